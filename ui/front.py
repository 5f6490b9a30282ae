"""The sticky front of ``./run --workers N`` (issue 28 item 5): one address, N app servers.

One Streamlit server is one Python process, and Python runs one thread at a time: ten curators who
click at the same moment wait for each other's steps, whatever the machine's cores.  With
``--workers N`` the address the curator opens is served by :class:`StickyFront`, and N app servers
(:mod:`ui.workers`: ``python -m ui.serve app.py`` each, on ports of their own on 127.0.0.1) do the
work.

**Sticky by browser.**  Everything a browser session uses lives in the server that runs it: the
session's state and its websocket, the files it uploads (``/_stcore/upload_file``) and the media it
shows (``/media``).  So the front pins a browser to one server with a cookie (``dpcore_worker_`` and
the front's port: browsers share cookies between the ports of a host), as HAProxy's or nginx's cookie
stickiness does.  The first answer to a browser without it (the page itself) sets it, with
``Connection: close``: that connection was chosen before the browser had the cookie, so it is not
reused, and every later connection carries it.  A new browser goes to the server with the fewest open
sessions (websockets), ties in turn.  Only servers that are running and listening on their own port
are used (:mod:`ui.workers` says which): a port a stopped server left free is never trusted.

**Bytes, not messages.**  The front reads a connection's first request head (the cookie), opens the
chosen server and then copies bytes both ways untouched, websocket frames included: nothing is
parsed or re-encoded after that head, so its cost is a copy.  (The standard library has no HTTP proxy
and the app's own stack, uvicorn and Starlette, has no client; a reverse proxy such as nginx or
HAProxy with cookie stickiness does the same job for a deployment, as the README says.)
"""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: The cookie that pins a browser to its worker: this, then the front's port.
COOKIE = "dpcore_worker"
#: Largest request or response head read before the bytes are copied (Streamlit's are a few kB).
MAX_HEAD = 64 * 1024
#: Seconds a client may take to send its first request head (then it is closed, as a server would).
HEAD_TIMEOUT = 60.0
#: Bytes per read when copying.
CHUNK = 256 * 1024
_UPGRADE = re.compile(rb"\r\nupgrade:[ \t]*websocket", re.IGNORECASE)
_INDEX = re.compile(r"\d{1,4}")


@dataclass
class Backend:
    """One worker's address and how many browser sessions (websockets) it holds (whether it serves
    now is the front's ``usable``)."""

    host: str
    port: int
    sessions: int = 0


class StickyFront:
    """The front: routes each connection to a backend by its cookie (``cookie``).

    ``usable(i)``: whether backend ``i`` may take a connection now (default: every one;
    :meth:`ui.workers.Workers.usable`: its process listens on its port, from the worker's run).

    >>> front = StickyFront([Backend("127.0.0.1", 9001), Backend("127.0.0.1", 9002)], "w")
    >>> front.pinned(b"GET / HTTP/1.1\\r\\nCookie: a=1; w=1\\r\\n\\r\\n")
    1
    >>> front.pinned(b"GET / HTTP/1.1\\r\\nCookie: w=7\\r\\n\\r\\n") is None  # no such worker
    True
    >>> [front.next_free() for _ in range(3)]  # no sessions yet: in turn
    [0, 1, 0]
    """

    def __init__(self, backends: Sequence[Backend], cookie: str = COOKIE,
                 usable: Callable[[int], bool] | None = None, connect_timeout: float = 10.0) -> None:
        self.backends = list(backends)
        self.cookie = cookie
        self.usable = usable or (lambda i: True)
        self.connect_timeout = connect_timeout
        self._turn = itertools.count()
        self._open: set[asyncio.StreamWriter] = set()  # both ends of the connections being served
        self._tasks: set[asyncio.Task] = set()

    def pinned(self, head: bytes) -> int | None:
        """The worker a request head's cookie names, if it names one of ours.

        The Cookie header is split by hand (``name=value`` pairs between semicolons): Python's
        ``SimpleCookie`` drops the whole header for one cookie it dislikes (a space or a non-ASCII
        letter in another app's value on the same host), and the browser then lost its server at every
        request (review finding: its upload landed on the other server).

        >>> StickyFront([Backend("h", 1), Backend("h", 2)], "w").pinned(
        ...     b"GET / HTTP/1.1\\r\\nCookie: theme=dark mode; lang=caf\\xc3\\xa9; junk; w=1\\r\\n\\r\\n")
        1
        """
        name = self.cookie.encode()
        for line in head.split(b"\r\n")[1:]:
            field, _, value = line.partition(b":")
            if field.strip().lower() != b"cookie":
                continue
            for part in value.split(b";"):
                key, eq, v = part.strip().partition(b"=")
                if eq and key == name:
                    v = v.strip().strip(b'"')
                    if _INDEX.fullmatch(v.decode("latin-1")):
                        index = int(v)
                        return index if index < len(self.backends) else None
                    return None
        return None

    def next_free(self, exclude: frozenset[int] = frozenset()) -> int | None:
        """The usable worker with the fewest sessions (ties in turn), not in ``exclude``."""
        free = [i for i in range(len(self.backends)) if i not in exclude and self.usable(i)]
        if not free:
            return None
        least = min(self.backends[i].sessions for i in free)
        tied = [i for i in free if self.backends[i].sessions == least]
        return tied[next(self._turn) % len(tied)]

    async def handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        """Serve one client connection: read its first head, open its worker, copy both ways."""
        task = asyncio.current_task()
        self._tasks.add(task)
        self._open.add(client_w)
        try:
            await self._serve(client_r, client_w)
        finally:
            self._open.discard(client_w)
            self._tasks.discard(task)

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(client_r.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
        except asyncio.LimitOverrunError:
            return await _answer(client_w, 431, "Request header fields too large")
        except (asyncio.IncompleteReadError, OSError):
            return await _close(client_w)
        index = self.pinned(head)
        upgrade = _UPGRADE.search(head) is not None
        opened = await self._connect(index, upgrade)
        if opened is None:
            return await _answer(client_w, 503, "No app server is running; it restarts, try again in a minute")
        chosen, (server_r, server_w) = opened
        backend = self.backends[chosen]
        self._open.add(server_w)
        try:
            server_w.write(head)
            set_cookie = None if chosen == index else (
                f"Set-Cookie: {self.cookie}={chosen}; Path=/; HttpOnly; SameSite=Lax".encode())
            await asyncio.gather(_copy(client_r, server_w), _answers(server_r, client_w, set_cookie))
        finally:
            backend.sessions -= upgrade
            await _close(server_w)
            await _close(client_w)
            self._open.discard(server_w)

    async def _connect(self, index: int | None, session: bool):
        """Connect to the pinned worker when usable, else (or when it does not answer) the freest other one.
        A ``session`` (websocket) counts on its worker from the choice on, not from the connection: ten
        that arrive together would otherwise all see the counts of before (measured: 2 and 8 on two
        workers, instead of 5 and 5)."""
        tried: set[int] = set()
        choice = index if index is not None and self.usable(index) else self.next_free()
        while choice is not None:
            tried.add(choice)
            b = self.backends[choice]
            b.sessions += session
            try:
                conn = await asyncio.wait_for(asyncio.open_connection(b.host, b.port, limit=MAX_HEAD),
                                              self.connect_timeout)
                return choice, conn
            except (TimeoutError, OSError):
                b.sessions -= session
                choice = self.next_free(frozenset(tried))
            except BaseException:  # cancelled while connecting (the front stops): no count left behind
                b.sessions -= session
                raise
        return None

    async def close(self, grace: float = 2.0) -> None:
        """End every connection being served and wait (up to ``grace`` seconds) for their handlers; then
        drop what is left unsent (a client that stops reading kept the front alive, review finding)."""
        for w in list(self._open):
            w.close()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace)
        for w in list(self._open):
            w.transport.abort()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace)


async def _copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy until the end of ``src``; then end ``dst``'s writing half (the other way may go on)."""
    try:
        while chunk := await src.read(CHUNK):
            dst.write(chunk)
            await dst.drain()
        if dst.can_write_eof():
            dst.write_eof()
    except OSError:
        dst.close()


async def _answers(server_r: asyncio.StreamReader, client_w: asyncio.StreamWriter, set_cookie: bytes | None) -> None:
    """Copy the worker's answers to the client; the first final one carries ``set_cookie`` when given
    (:func:`with_cookie`)."""
    if set_cookie is not None:
        try:
            head = await server_r.readuntil(b"\r\n\r\n")
            while _interim(head):  # "100 Continue": the cookie goes on the answer that follows
                client_w.write(head)
                head = await server_r.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            return client_w.close()
        client_w.write(with_cookie(head, set_cookie))
    await _copy(server_r, client_w)
    client_w.close()  # the worker is done: so is this connection (its other way then reads the end)


def _interim(head: bytes) -> bool:
    """An informational answer (1xx) other than 101 Switching Protocols."""
    status = head[9:12]
    return head.startswith(b"HTTP/1.") and status[:1] == b"1" and status != b"101"


def with_cookie(head: bytes, set_cookie: bytes) -> bytes:
    """An answer's ``head`` with the ``set_cookie`` line; unless it switches to a websocket, also
    ``Connection: close`` in place of any Connection header (the connection was chosen before the
    browser had the cookie: it is not reused).

    >>> with_cookie(b"HTTP/1.1 200 OK\\r\\nConnection: keep-alive\\r\\nA: b\\r\\n\\r\\n", b"Set-Cookie: w=1")
    b'HTTP/1.1 200 OK\\r\\nA: b\\r\\nConnection: close\\r\\nSet-Cookie: w=1\\r\\n\\r\\n'
    >>> with_cookie(b"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\n\\r\\n", b"Set-Cookie: w=1")
    b'HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nSet-Cookie: w=1\\r\\n\\r\\n'
    """
    lines = head[:-4].split(b"\r\n")
    if head[9:12] != b"101":
        lines = [line for line in lines if not line.lower().startswith(b"connection:")] + [b"Connection: close"]
    return b"\r\n".join([*lines, set_cookie]) + b"\r\n\r\n"


async def _answer(w: asyncio.StreamWriter, status: int, text: str) -> None:
    body = (text + "\n").encode()
    w.write(f"HTTP/1.1 {status} {text}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    await _close(w)


async def _close(w: asyncio.StreamWriter, flush: float = 5.0) -> None:
    """Close ``w``, letting ``flush`` seconds for what is still unsent; then drop it (a peer that stops
    reading must not hold a handler for ever)."""
    w.close()
    try:
        await asyncio.wait_for(w.wait_closed(), flush)
    except TimeoutError:  # first: TimeoutError is an OSError
        w.transport.abort()
    except OSError:
        pass
