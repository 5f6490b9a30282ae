"""Several app servers behind one address: ``./run --workers N`` (issue 28 item 5).

One Streamlit server is one Python process, and Python runs one thread at a time: ten curators who
click at the same moment wait for each other's steps, whatever the machine's cores.  With
``--workers N`` the address the curator opens is served by :class:`StickyFront`, and N app servers
(``python -m ui.serve app.py`` each, on ports of their own on 127.0.0.1) do the work.

**Sticky by browser.**  Everything a browser session uses lives in the server that runs it: the
session's state and its websocket, the files it uploads (``/_stcore/upload_file``) and the media it
shows (``/media``).  So the front pins a browser to one server with a cookie (``dpcore_worker``), as
HAProxy's or nginx's cookie stickiness does: the first answer to a browser without it (the page
itself) sets it; later connections carrying it go to that server.  A new browser goes to the server
with the fewest open sessions (websockets), ties in turn.

**Bytes, not messages.**  The front reads a connection's first request head (the cookie), opens the
chosen server and then copies bytes both ways untouched, websocket frames included: nothing is
parsed or re-encoded after that head, so its cost is a copy.  Only the first answer on a connection
that had no valid cookie gains one ``Set-Cookie`` line.  (The standard library has no HTTP proxy and
the app's own stack, uvicorn and Starlette, has no client; a reverse proxy such as nginx or HAProxy
in front of the workers does the same job for a deployment and is what the README suggests there.)

**What the servers share.**  The budget database (SQLite, ``$DPCORE_LEDGER_DB``): every release of
every worker is charged in it under SQLite's write lock (:mod:`dpcore.privacy.ledger_store`), so
the workers never overspend a shared cap.  A worker that exits is started again on its port; its
browser sessions reconnect to a fresh session, as after a restart of a single server.  Each server
keeps Streamlit's own cookie secret (its own unless ``server.cookieSecret`` is set): the front draws
no randomness (DESIGN.md's rule 2: only the noise module does).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import http.cookies
import itertools
import os
import re
import signal
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass

#: The cookie that pins a browser to its worker.
COOKIE = "dpcore_worker"
#: Largest request or response head read before the bytes are copied (Streamlit's are a few kB).
MAX_HEAD = 64 * 1024
#: Seconds a client may take to send its first request head (then it is closed, as a server would).
HEAD_TIMEOUT = 60.0
#: Bytes per read when copying.
CHUNK = 256 * 1024
#: Seconds a worker may take to accept connections after it is started (the first start imports the
#: map and data libraries: about a minute on a small machine).
START_TIMEOUT = 300.0
_UPGRADE = re.compile(rb"\r\nupgrade:[ \t]*websocket", re.IGNORECASE)


@dataclass
class Backend:
    """One worker's address and how many browser sessions (websockets) it holds now."""

    host: str
    port: int
    sessions: int = 0


class StickyFront:
    """The front: routes each connection to a backend by the ``dpcore_worker`` cookie.

    >>> front = StickyFront([Backend("127.0.0.1", 9001), Backend("127.0.0.1", 9002)])
    >>> front.pinned(b"GET / HTTP/1.1\\r\\nCookie: a=1; dpcore_worker=1\\r\\n\\r\\n")
    1
    >>> front.pinned(b"GET / HTTP/1.1\\r\\nCookie: dpcore_worker=7\\r\\n\\r\\n") is None  # no such worker
    True
    >>> [front.next_free() for _ in range(3)]  # no sessions yet: in turn
    [0, 1, 0]
    """

    def __init__(self, backends: Sequence[Backend], connect_timeout: float = 10.0) -> None:
        self.backends = list(backends)
        self.connect_timeout = connect_timeout
        self._turn = itertools.count()

    def pinned(self, head: bytes) -> int | None:
        """The worker a request head's cookie names, if it names one of ours."""
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() != b"cookie":
                continue
            jar = http.cookies.SimpleCookie()
            with contextlib.suppress(http.cookies.CookieError):
                jar.load(value.decode("latin-1"))
            if COOKIE in jar and jar[COOKIE].value.isdigit() and int(jar[COOKIE].value) < len(self.backends):
                return int(jar[COOKIE].value)
        return None

    def next_free(self, exclude: frozenset[int] = frozenset()) -> int | None:
        """The worker with the fewest sessions (ties in turn), not in ``exclude``."""
        free = [i for i in range(len(self.backends)) if i not in exclude]
        if not free:
            return None
        least = min(self.backends[i].sessions for i in free)
        tied = [i for i in free if self.backends[i].sessions == least]
        return tied[next(self._turn) % len(tied)]

    async def handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        """Serve one client connection: read its first head, open its worker, copy both ways."""
        try:
            head = await asyncio.wait_for(client_r.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
        except asyncio.LimitOverrunError:
            return await _answer(client_w, 431, "Request header fields too large")
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            return await _close(client_w)
        index = self.pinned(head)
        opened = await self._open(index)
        if opened is None:
            return await _answer(client_w, 503, "No app server is running; it restarts, try again in a minute")
        chosen, (server_r, server_w) = opened
        upgrade = _UPGRADE.search(head) is not None
        backend = self.backends[chosen]
        backend.sessions += upgrade
        try:
            server_w.write(head)
            cookie = None if chosen == index else chosen
            await asyncio.gather(_copy(client_r, server_w), _answers(server_r, client_w, cookie))
        finally:
            backend.sessions -= upgrade
            await _close(server_w)
            await _close(client_w)

    async def _open(self, index: int | None):
        """Connect to the pinned worker, else (or when it does not answer) the freest other one."""
        tried: set[int] = set()
        choice = index if index is not None else self.next_free()
        while choice is not None:
            tried.add(choice)
            b = self.backends[choice]
            try:
                conn = await asyncio.wait_for(asyncio.open_connection(b.host, b.port, limit=MAX_HEAD),
                                              self.connect_timeout)
                return choice, conn
            except (TimeoutError, OSError):
                choice = self.next_free(frozenset(tried))
        return None


async def _copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy until the end of ``src``; then end ``dst``'s writing half (the other way may go on)."""
    try:
        while chunk := await src.read(CHUNK):
            dst.write(chunk)
            await dst.drain()
        if dst.can_write_eof():
            dst.write_eof()
    except (ConnectionError, OSError):
        dst.close()


async def _answers(server_r: asyncio.StreamReader, client_w: asyncio.StreamWriter, cookie: int | None) -> None:
    """Copy the worker's answers to the client; the first one sets the cookie when ``cookie`` is given."""
    if cookie is not None:
        try:
            head = await server_r.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            return client_w.close()
        line = f"Set-Cookie: {COOKIE}={cookie}; Path=/; HttpOnly; SameSite=Lax\r\n".encode()
        client_w.write(head[:-2] + line + b"\r\n")
    await _copy(server_r, client_w)
    client_w.close()  # the worker is done: so is this connection (its other way then reads the end)


async def _answer(w: asyncio.StreamWriter, status: int, text: str) -> None:
    body = (text + "\n").encode()
    w.write(f"HTTP/1.1 {status} {text}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    await _close(w)


async def _close(w: asyncio.StreamWriter) -> None:
    w.close()
    with contextlib.suppress(ConnectionError, OSError):
        await w.wait_closed()


# --------------------------------------------------------------------------------------------------
# the workers


def split_address(argv: Sequence[str], defaults: dict[str, str] | None = None) -> tuple[str, int, list[str]]:
    """The public address and port among Streamlit's options (the last of each wins, as for
    Streamlit), else as Streamlit would find them (:func:`configured`); and the options without them.

    >>> split_address(["app.py", "--server.address", "127.0.0.1", "--server.port=8600", "--theme.base=dark"])
    ('127.0.0.1', 8600, ['app.py', '--theme.base=dark'])
    >>> split_address(["app.py"], {"address": "", "port": "8501"})
    ('', 8501, ['app.py'])
    """
    defaults = configured() if defaults is None else defaults
    found = {"--server.address": defaults["address"], "--server.port": defaults["port"]}
    rest: list[str] = []
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=")
        if name in found:
            found[name] = value if eq else next(args, "")
        else:
            rest.append(arg)
    port = found["--server.port"]
    if not port.isdigit():
        raise SystemExit(f"--server.port {port!r} is not a port number: give one such as 8501")
    return found["--server.address"], int(port), rest


def configured(env: dict[str, str] | None = None, config: str = ".streamlit/config.toml") -> dict[str, str]:
    """The server's address and port when no option names them, found as Streamlit finds them:
    ``$STREAMLIT_SERVER_ADDRESS`` / ``$STREAMLIT_SERVER_PORT``, else the app's ``config`` file
    (127.0.0.1:8501 here), else Streamlit's defaults (every interface, 8501).  So the front never
    listens more widely than one server would."""
    env = os.environ if env is None else env
    server: dict = {}
    with contextlib.suppress(OSError, ValueError):
        with open(config, "rb") as f:
            server = tomllib.load(f).get("server", {})
    return {name: env.get(f"STREAMLIT_SERVER_{name.upper()}") or str(server.get(name, default))
            for name, default in (("address", ""), ("port", 8501))}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: the worker gets SIGTERM when the front dies, even by SIGKILL (no orphan servers).  The
    kernel ties this to the thread that started the worker: the front starts them all from its main
    thread, which lives as long as the front."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Workers:
    """N app servers (``python -m ui.serve`` with Streamlit's options ``argv``), started again when
    one exits."""

    def __init__(self, n: int, argv: Sequence[str]) -> None:
        self.argv = list(argv)
        self.backends = [Backend("127.0.0.1", _free_port()) for _ in range(n)]
        self.env = dict(os.environ, DPCORE_WORKERS="1")  # each worker is one server
        self.procs: list[subprocess.Popen | None] = [None] * n
        self.started = [0.0] * n  # time.monotonic() of each worker's last start
        self.stopping = False

    def command(self, i: int) -> list[str]:
        """Worker ``i``'s command: the app's server on its own port."""
        return [sys.executable, "-m", "ui.serve", *self.argv, f"--server.port={self.backends[i].port}",
                "--server.address=127.0.0.1", "--server.headless=true"]

    def start(self, i: int) -> None:
        self.started[i] = time.monotonic()
        # their own banners name their inner ports: the front prints the address to open instead
        self.procs[i] = subprocess.Popen(self.command(i), env=self.env, stdout=subprocess.DEVNULL,
                                         preexec_fn=_die_with_parent if sys.platform == "linux" else None)

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Block until every worker accepts connections; SystemExit naming the one that exited."""
        deadline = time.monotonic() + timeout
        waiting = set(range(len(self.backends)))
        while waiting:
            for i in sorted(waiting):
                code = self.procs[i].poll()
                if code is not None:
                    self.stop()
                    raise SystemExit(f"App server {i + 1} of {len(self.backends)} exited with code {code} "
                                     "before it started; its messages are above.")
                with contextlib.suppress(OSError), socket.create_connection(
                        (self.backends[i].host, self.backends[i].port), timeout=1):
                    waiting.discard(i)
            if waiting and time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"{len(waiting)} app server(s) did not start within {timeout:.0f} s.")
            time.sleep(0.2)

    async def supervise(self, every: float = 1.0, pause: float = 10.0) -> None:
        """Start again a worker that exited (its port stays; the front sends its browsers elsewhere
        meanwhile), at most once per ``pause`` seconds each (a worker that cannot start is not
        started in a tight loop)."""
        while not self.stopping:
            await asyncio.sleep(every)
            for i, p in enumerate(self.procs):
                if (p is not None and p.poll() is not None and not self.stopping
                        and time.monotonic() - self.started[i] >= pause):
                    print(f"App server {i + 1} exited with code {p.returncode}; starting it again.",
                          file=sys.stderr, flush=True)
                    self.start(i)

    def stop(self, grace: float = 10.0) -> None:
        self.stopping = True
        live = [p for p in self.procs if p is not None and p.poll() is None]
        for p in live:
            p.terminate()
        deadline = time.monotonic() + grace
        for p in live:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def serve(argv: Sequence[str], n: int) -> int:
    """Run ``n`` app servers behind one sticky front on the address of ``argv``'s Streamlit options."""
    host, port, rest = split_address(argv)
    workers = Workers(n, rest)
    print(f"Starting {n} app servers ...", flush=True)
    for i in range(n):
        workers.start(i)
    workers.wait_ready()
    return asyncio.run(_front(workers, host, port))


async def _front(workers: Workers, host: str, port: int) -> int:
    front = StickyFront(workers.backends)
    try:
        server = await asyncio.start_server(front.handle, host or None, port, limit=MAX_HEAD)
    except OSError as e:
        workers.stop()
        raise SystemExit(f"Cannot listen on {host or '*'}:{port}: {e.strerror}. Give another --server.port.") from None
    stop = asyncio.Event()

    def stopping() -> None:  # Ctrl-C reaches the workers too: none may be started again meanwhile
        workers.stopping = True
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping)
    supervisor = asyncio.create_task(workers.supervise())
    shown = host if host not in ("", "0.0.0.0") else "localhost"
    print(f"The app is served on http://{shown}:{port} by {len(workers.backends)} app servers.", flush=True)
    try:
        await stop.wait()
    finally:
        supervisor.cancel()
        server.close()
        workers.stop()
    return 0
