"""The sticky front of ``./run --workers N`` (ui/front.py, issue 28 item 5), against small stand-in
servers: a browser keeps its worker by cookie, new browsers go to the freest usable worker, the
connection that set the cookie is not reused, websocket bytes pass untouched, a worker that does not
answer or may not be used is replaced, and odd input gets an answer.  The processes behind it:
test_workers.py; the app behind it: tests/e2e/test_workers_browser.py."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket

from loop_helpers import run

from ui import front
from ui.front import Backend, StickyFront

UPGRADE = (b"GET /_stcore/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Cookie: dpcore_worker=%d\r\n\r\n")


class StandIn:
    """A stand-in worker: answers each request on a connection with its name (keep-alive, until the
    request says ``Connection: close``); ``Expect: 100-continue`` first with 100 Continue; an upgrade
    with 101, then echoes bytes."""

    def __init__(self, name: str) -> None:
        self.name, self.heads, self.server = name, [], None

    async def start(self) -> Backend:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return Backend("127.0.0.1", self.server.sockets[0].getsockname()[1])

    async def _serve(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await r.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break
            self.heads.append(head)
            low = head.lower()
            if b"upgrade: websocket" in low:
                w.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
                while chunk := await r.read(65536):
                    w.write(chunk)
                    await w.drain()
                break
            if b"expect: 100-continue" in low:
                w.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            body = self.name.encode()
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            await w.drain()
            if b"connection: close" in low:
                break
        w.close()


async def fronted(n: int, down: tuple[int, ...] = (), unusable: tuple[int, ...] = ()):
    """``n`` stand-ins (those in ``down`` closed again, those in ``unusable`` not ready) behind a front;
    returns (front, stand-ins, port)."""
    stand_ins = [StandIn(f"worker {i}") for i in range(n)]
    backends = [await s.start() for s in stand_ins]
    for i in down:
        stand_ins[i].server.close()
        await stand_ins[i].server.wait_closed()
    f = StickyFront(backends, connect_timeout=2, usable=lambda i: i not in unusable)
    server = await asyncio.start_server(f.handle, "127.0.0.1", 0, limit=front.MAX_HEAD)
    return f, stand_ins, server.sockets[0].getsockname()[1]


async def session(port: int, worker: int = 0, rcvbuf: int | None = None):
    """A websocket-like session pinned to ``worker`` through the front: (reader, writer, its 101 head)."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    if rcvbuf is not None:  # a client that will not keep up
        w.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    w.write(UPGRADE % worker)
    return r, w, await r.readuntil(b"\r\n\r\n")


async def get(port: int, cookie: str | None = None, extra: bytes = b"") -> tuple[str, str]:
    """One request (``Connection: close``) through the front: (its answers' heads, its body)."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + (f"Cookie: {cookie}\r\n".encode() if cookie else b"")
            + extra + b"\r\n")
    await w.drain()
    answer = (await r.read(-1)).decode()
    w.close()
    head, _, body = answer.rpartition("\r\n\r\n")
    return head, body


def cookie_of(head: str) -> str | None:
    m = re.search(r"(?m)^Set-Cookie: dpcore_worker=(\d+); Path=/; HttpOnly; SameSite=Lax\r?$", head)
    return m and m.group(1)


def test_a_new_browser_gets_a_cookie_and_keeps_its_worker() -> None:
    async def scenario():
        _f, stand_ins, port = await fronted(3)
        head, body = await get(port)
        pinned = cookie_of(head)
        assert pinned is not None and body == f"worker {pinned}"
        for _ in range(4):  # with the cookie (among others): the same worker, and no new cookie
            head, body = await get(port, f"_streamlit_xsrf=abc; dpcore_worker={pinned}")
            assert body == f"worker {pinned}" and cookie_of(head) is None
        # the worker got the request head as sent
        assert stand_ins[int(pinned)].heads[-1].startswith(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                                           b"Cookie: _streamlit_xsrf=abc;")

    run(scenario())


def test_the_connection_that_set_the_cookie_is_not_reused_and_a_pinned_one_is() -> None:
    """A connection chosen before the browser had the cookie ends after that answer (review finding: a
    reused one kept its first worker for requests that named another); with the cookie, keep-alive."""
    async def scenario():
        _f, _s, port = await fronted(2)
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
        head = (await r.readuntil(b"\r\n\r\n")).decode()
        assert "Connection: close" in head and cookie_of(head) is not None
        w.close()
        pinned = cookie_of(head)
        r, w = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(3):  # three requests on one connection, all answered by the pinned worker
            w.write(f"GET / HTTP/1.1\r\nHost: x\r\nCookie: dpcore_worker={pinned}\r\n\r\n".encode())
            head = (await r.readuntil(b"\r\n\r\n")).decode()
            assert "Connection: close" not in head and cookie_of(head) is None
            assert await r.readexactly(8) == f"worker {pinned}".encode()
        w.close()

    run(scenario())


def test_an_interim_answer_passes_and_the_cookie_goes_on_the_final_one() -> None:
    async def scenario():
        _f, _s, port = await fronted(1)
        head, body = await get(port, extra=b"Expect: 100-continue\r\n")
        interim, final = head.split("\r\n\r\n")
        assert interim == "HTTP/1.1 100 Continue" and cookie_of(final) == "0" and body == "worker 0"

    run(scenario())


def test_new_browsers_go_in_turn_and_a_cookie_naming_no_worker_is_replaced() -> None:
    async def scenario():
        _f, _s, port = await fronted(2)
        first = [cookie_of((await get(port))[0]) for _ in range(4)]
        assert sorted(first) == ["0", "0", "1", "1"]
        for odd in ("dpcore_worker=5", "dpcore_worker=" + "9" * 5000, "dpcore_worker=-1", "dpcore_worker=1x"):
            head, body = await get(port, odd)  # another front's, a huge number (int() refuses), junk
            assert cookie_of(head) is not None and body == f"worker {cookie_of(head)}"
        # other apps' cookies on the host that Python's SimpleCookie refuses do not hide ours (review)
        for others in ("theme=dark mode", "lang=café", "junk", 'x="a', "json={\"a\": 1}"):
            head, body = await get(port, f"{others}; dpcore_worker=1; z=2")
            assert cookie_of(head) is None and body == "worker 1"

    run(scenario())


def test_websocket_bytes_pass_untouched_and_new_browsers_go_to_the_freest_worker() -> None:
    async def scenario():
        f, _s, port = await fronted(2)
        r, w, head = await session(port)
        assert head.startswith(b"HTTP/1.1 101") and b"Set-Cookie" not in head
        payload = os.urandom(3_000_000) + b"\r\n\r\nCookie: dpcore_worker=1\r\n\r\n"  # frames are not read
        w.write(payload)
        await w.drain()
        assert await r.readexactly(len(payload)) == payload
        assert [b.sessions for b in f.backends] == [1, 0]
        for _ in range(3):  # worker 0 holds a session: new browsers go to worker 1
            assert cookie_of((await get(port))[0]) == "1"
        w.close()
        await w.wait_closed()
        for _ in range(50):
            if f.backends[0].sessions == 0:
                break
            await asyncio.sleep(0.02)
        assert [b.sessions for b in f.backends] == [0, 0]

    run(scenario())


def test_a_worker_that_does_not_answer_or_may_not_be_used_is_replaced() -> None:
    async def scenario():
        _f, _s, port = await fronted(2, down=(1,))
        head, body = await get(port, "dpcore_worker=1")
        assert body == "worker 0" and cookie_of(head) == "0"  # pinned anew to the one that answers
        # a worker that listens but may not be used (not seen listening as itself, or stopped): never chosen
        _f, stand_ins, port = await fronted(2, unusable=(1,))
        for cookie in (None, "dpcore_worker=1", None, None):
            head, body = await get(port, cookie)
            assert body == "worker 0"
        assert stand_ins[1].heads == []
        _f, _s, port = await fronted(1, down=(0,))
        head, body = await get(port)
        assert head.startswith("HTTP/1.1 503") and "try again in a minute" in body

    run(scenario())


def test_a_request_head_too_large_is_refused() -> None:
    async def scenario():
        _f, _s, port = await fronted(1)
        head, _ = await get(port, extra=b"X-Big: " + b"a" * (front.MAX_HEAD + 10) + b"\r\n")
        assert head.startswith("HTTP/1.1 431")

    run(scenario())


def test_a_client_that_sends_no_head_is_closed(monkeypatch) -> None:
    monkeypatch.setattr(front, "HEAD_TIMEOUT", 0.2)

    async def scenario():
        _f, stand_ins, port = await fronted(1)
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"GET / HTTP/1.1\r\nHost: x\r\n")  # and nothing more
        assert await asyncio.wait_for(r.read(), 5) == b""  # closed by the front
        assert stand_ins[0].heads == []  # no worker was bothered
        w.close()

    run(scenario())


def test_closing_the_front_ends_its_connections() -> None:
    async def scenario():
        f, _s, port = await fronted(1)
        r, w, _head = await session(port)
        assert f._tasks
        await f.close(grace=5)
        assert not f._tasks and not f._open
        assert await asyncio.wait_for(r.read(), 5) == b""
        w.close()

    run(scenario())


def test_sessions_that_arrive_together_are_spread_evenly(monkeypatch) -> None:
    """A session counts from the choice, not from the connection: with one worker slower to connect,
    ten websockets arriving 10 ms apart went 1 and 9 (measured on the app: 2 and 8); now 5 and 5."""
    async def scenario():
        f, _s, port = await fronted(2)
        slow = f.backends[1].port
        connect = asyncio.open_connection

        async def open_connection(host, p, **kw):
            if p == slow:
                await asyncio.sleep(0.2)
            return await connect(host, p, **kw)

        monkeypatch.setattr(front.asyncio, "open_connection", open_connection)
        writers = []
        for _ in range(10):
            r, w = await connect("127.0.0.1", port)
            w.write(b"GET /_stcore/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
            writers.append((r, w))
            await asyncio.sleep(0.01)
        for r, _w in writers:
            await r.readuntil(b"\r\n\r\n")
        assert [b.sessions for b in f.backends] == [5, 5]
        for _r, w in writers:
            w.close()

    run(scenario())


def test_a_client_that_stops_reading_does_not_hold_the_front_at_its_close() -> None:
    """Review finding: closing waited for the unsent bytes of a client that never reads (for ever)."""
    async def scenario():
        f, _s, port = await fronted(1)
        r, w, _head = await session(port, rcvbuf=4096)
        w.write(os.urandom(20_000_000))  # echoed back by the worker; this client never reads it
        await asyncio.sleep(0.5)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await f.close(grace=0.5)
        assert loop.time() - t0 < 3 and not f._tasks
        w.transport.abort()

    run(scenario())


def test_a_connect_cancelled_leaves_no_session_count(monkeypatch) -> None:
    """Review finding: a handler cancelled while it connected (the front stopping) kept its count."""
    async def scenario():
        f, _s, port = await fronted(1)

        async def hangs(*a, **k):
            await asyncio.sleep(3600)

        r, w = await asyncio.open_connection("127.0.0.1", port)  # before: the patch is asyncio's own
        monkeypatch.setattr(front.asyncio, "open_connection", hangs)
        w.write(UPGRADE % 0)
        for _ in range(100):
            if f.backends[0].sessions == 1:
                break
            await asyncio.sleep(0.01)
        assert f.backends[0].sessions == 1  # counted from the choice
        for task in list(f._tasks):
            task.cancel()
        await asyncio.wait(list(f._tasks), timeout=5)
        assert f.backends[0].sessions == 0
        w.close()

    run(scenario())


def test_closing_a_connection_whose_peer_never_reads_is_bounded() -> None:
    """After ``flush`` seconds what is unsent is dropped: the peer, reading at last, gets less."""
    async def scenario():
        peers = []

        async def reads_late(r, w):
            peers.append(r)
            await asyncio.sleep(3600)

        server = await asyncio.start_server(reads_late, "127.0.0.1", 0)
        r, w = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
        w.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        w.write(os.urandom(20_000_000))  # far more than the peer's buffers take
        await asyncio.wait_for(front._close(w, flush=0.2), 3)
        got = 0
        with contextlib.suppress(ConnectionError):
            while chunk := await asyncio.wait_for(peers[0].read(1 << 20), 3):
                got += len(chunk)
        assert got < 20_000_000
        server.close()

    run(scenario())
