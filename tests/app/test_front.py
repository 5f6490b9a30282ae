"""The sticky front of ``./run --workers N`` (ui/front.py, issue 28 item 5), against small stand-in
servers: a browser keeps its worker by cookie, new browsers go to the freest worker, websocket bytes
pass untouched, a worker that does not answer is replaced, and the worker processes are started,
started again and stopped.  The app behind the front: tests/e2e/test_workers_browser.py."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ui import front, serve
from ui.front import Backend, StickyFront, Workers


def _run(coro):
    """``asyncio.run`` in a thread of its own: a test process may already run an event loop on its main
    thread (Playwright's sync API does, after the browser tests of the same worker)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


ROOT = Path(__file__).resolve().parents[2]
UPGRADE = (b"GET /_stcore/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Cookie: dpcore_worker=%d\r\n\r\n")


class StandIn:
    """A stand-in worker: answers a request with its name; an upgrade with 101, then echoes bytes."""

    def __init__(self, name: str) -> None:
        self.name, self.heads, self.server = name, [], None

    async def start(self) -> Backend:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return Backend("127.0.0.1", self.server.sockets[0].getsockname()[1])

    async def _serve(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        head = await r.readuntil(b"\r\n\r\n")
        self.heads.append(head)
        if b"upgrade: websocket" in head.lower():
            w.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
            while chunk := await r.read(65536):
                w.write(chunk)
                await w.drain()
        else:
            body = self.name.encode()
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        await w.drain()
        w.close()


async def _fronted(n: int, down: tuple[int, ...] = ()):
    """``n`` stand-ins (those in ``down`` closed again) behind a front; returns (front, stand-ins, port)."""
    stand_ins = [StandIn(f"worker {i}") for i in range(n)]
    backends = [await s.start() for s in stand_ins]
    for i in down:
        stand_ins[i].server.close()
        await stand_ins[i].server.wait_closed()
    f = StickyFront(backends, connect_timeout=2)
    server = await asyncio.start_server(f.handle, "127.0.0.1", 0, limit=front.MAX_HEAD)
    return f, stand_ins, server.sockets[0].getsockname()[1]


async def _get(port: int, cookie: str | None = None, extra: bytes = b"") -> tuple[str, str]:
    """One request through the front: (its answer's head, its body)."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"GET / HTTP/1.1\r\nHost: x\r\n" + (f"Cookie: {cookie}\r\n".encode() if cookie else b"") + extra + b"\r\n")
    await w.drain()
    head, _, body = (await r.read(-1)).partition(b"\r\n\r\n")
    w.close()
    return head.decode(), body.decode()


def _cookie(head: str) -> str | None:
    m = re.search(r"(?im)^Set-Cookie: dpcore_worker=(\d+); Path=/; HttpOnly; SameSite=Lax$", head)
    return m and m.group(1)


def test_a_new_browser_gets_a_cookie_and_keeps_its_worker() -> None:
    async def scenario():
        _f, stand_ins, port = await _fronted(3)
        head, body = await _get(port)
        pinned = _cookie(head)
        assert pinned is not None and body == f"worker {pinned}"
        for _ in range(4):  # with the cookie (among others): the same worker, and no new cookie
            head, body = await _get(port, f"_streamlit_xsrf=abc; dpcore_worker={pinned}")
            assert body == f"worker {pinned}" and _cookie(head) is None
        # the worker got the request head as sent
        assert stand_ins[int(pinned)].heads[-1].startswith(b"GET / HTTP/1.1\r\nHost: x\r\nCookie: _streamlit_xsrf=abc;")

    _run(scenario())


def test_new_browsers_go_in_turn_and_a_cookie_naming_no_worker_is_replaced() -> None:
    async def scenario():
        _f, _s, port = await _fronted(2)
        first = [_cookie((await _get(port))[0]) for _ in range(4)]
        assert sorted(first) == ["0", "0", "1", "1"]
        head, body = await _get(port, "dpcore_worker=5")  # a front that had more workers before
        assert _cookie(head) is not None and body == f"worker {_cookie(head)}"

    _run(scenario())


def test_websocket_bytes_pass_untouched_and_new_browsers_go_to_the_freest_worker() -> None:
    async def scenario():
        f, _s, port = await _fronted(2)
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(UPGRADE % 0)
        head = await r.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101") and b"Set-Cookie" not in head
        payload = os.urandom(3_000_000) + b"\r\n\r\nCookie: dpcore_worker=1\r\n\r\n"  # frames are not read
        w.write(payload)
        await w.drain()
        assert await r.readexactly(len(payload)) == payload
        assert [b.sessions for b in f.backends] == [1, 0]
        for _ in range(3):  # worker 0 holds a session: new browsers go to worker 1
            assert _cookie((await _get(port))[0]) == "1"
        w.close()
        await w.wait_closed()
        for _ in range(50):
            if f.backends[0].sessions == 0:
                break
            await asyncio.sleep(0.02)
        assert [b.sessions for b in f.backends] == [0, 0]

    _run(scenario())


def test_a_worker_that_does_not_answer_is_replaced_and_none_gives_a_clear_answer() -> None:
    async def scenario():
        _f, _s, port = await _fronted(2, down=(1,))
        head, body = await _get(port, "dpcore_worker=1")
        assert body == "worker 0" and _cookie(head) == "0"  # pinned anew to the one that answers
        _f, _s, port = await _fronted(1, down=(0,))
        head, body = await _get(port)
        assert head.startswith("HTTP/1.1 503") and "try again in a minute" in body

    _run(scenario())


def test_a_request_head_too_large_is_refused() -> None:
    async def scenario():
        _f, _s, port = await _fronted(1)
        head, _ = await _get(port, extra=b"X-Big: " + b"a" * (front.MAX_HEAD + 10) + b"\r\n")
        assert head.startswith("HTTP/1.1 431")

    _run(scenario())


def test_a_client_that_sends_no_head_is_closed(monkeypatch) -> None:
    monkeypatch.setattr(front, "HEAD_TIMEOUT", 0.2)

    async def scenario():
        _f, stand_ins, port = await _fronted(1)
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"GET / HTTP/1.1\r\nHost: x\r\n")  # and nothing more
        assert await asyncio.wait_for(r.read(), 5) == b""  # closed by the front
        assert stand_ins[0].heads == []  # no worker was bothered
        w.close()

    _run(scenario())


# ---- the worker processes


class Sleepers(Workers):
    """Workers that listen on their port and do nothing else (or exit at once with ``exit_code``)."""

    exit_code: int | None = None

    def command(self, i: int) -> list[str]:
        if self.exit_code is not None:
            return [sys.executable, "-c", f"raise SystemExit({self.exit_code})"]
        return [sys.executable, "-c", "import socket, time\ns = socket.socket()\n"
                f"s.bind(('127.0.0.1', {self.backends[i].port}))\ns.listen()\ntime.sleep(120)"]


def test_workers_start_are_started_again_when_one_exits_and_stop() -> None:
    w = Sleepers(2, ["app.py"])
    for i in range(2):
        w.start(i)
    w.wait_ready(timeout=60)
    first = w.procs[0]
    first.kill()
    first.wait()

    async def watch():
        task = asyncio.create_task(w.supervise(every=0.05, pause=0))
        for _ in range(200):
            if w.procs[0] is not first:
                break
            await asyncio.sleep(0.05)
        task.cancel()
        # checked in this thread: a worker dies with the thread that started it (PR_SET_PDEATHSIG;
        # the front starts them all from its main thread)
        assert w.procs[0] is not first and w.procs[0].poll() is None
        w.wait_ready(timeout=60)
        w.stop()

    _run(watch())
    assert all(p.poll() is not None for p in w.procs)
    assert w.env["DPCORE_WORKERS"] == "1"  # each worker is one server, not another front


FRONT_OF_SLEEPERS = """
import sys
from ui import front
from ui.front import Workers

class Sleepers(Workers):
    def command(self, i):
        return [sys.executable, "-c", "import socket, time\\ns = socket.socket()\\n"
                f"s.bind(('127.0.0.1', {self.backends[i].port}))\\ns.listen()\\ntime.sleep(120)"]

w = Sleepers(2, ["app.py"])
for i in range(2):
    w.start(i)
w.wait_ready(timeout=60)
print(*(p.pid for p in w.procs), flush=True)
sys.exit(front.asyncio.run(front._front(w, "127.0.0.1", int(sys.argv[1]))))
"""


def test_the_front_serves_until_sigterm_then_stops_its_workers() -> None:
    """A real front process (two stand-in workers): it answers on its port; on SIGTERM it exits with 0
    and its workers are gone."""
    port = front._free_port()
    proc = subprocess.Popen([sys.executable, "-c", FRONT_OF_SLEEPERS, str(port)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2
        # said once it listens and handles signals
        assert proc.stdout.readline() == f"The app is served on http://127.0.0.1:{port} by 2 app servers.\n"
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        for pid in pids:  # stopped and reaped by the front
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
    finally:
        proc.kill()
        proc.wait()


def test_a_worker_that_cannot_start_stops_the_others_with_a_clear_message() -> None:
    w = Sleepers(2, ["app.py"])
    w.exit_code = 3
    for i in range(2):
        w.start(i)
    with pytest.raises(SystemExit, match=r"App server 1 of 2 exited with code 3 before it started"):
        w.wait_ready(timeout=60)
    assert all(p.poll() is not None for p in w.procs)


def test_a_port_in_use_is_named_with_the_fix(capsys) -> None:
    w = Sleepers(1, ["app.py"])
    w.start(0)
    w.wait_ready(timeout=60)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(SystemExit, match=r"Cannot listen on 127\.0\.0\.1:\d+: .*Give another --server\.port"):
            _run(front._front(w, "127.0.0.1", taken.getsockname()[1]))
    assert w.procs[0].poll() is not None  # its worker was stopped


def test_the_options_name_the_problem_and_the_fix() -> None:
    assert serve.workers_option(["app.py", "--workers=auto"], {})[0] == max(1, os.cpu_count() or 1)
    assert serve.workers_option(["app.py"], {}) == (1, ["app.py"])
    for bad in ("0", "two", ""):
        with pytest.raises(SystemExit, match=r"is not a number of app servers: give 1 or more, or auto"):
            serve.workers_option(["app.py", "--workers", bad], {})
    with pytest.raises(SystemExit, match=r"--server\.port 'x' is not a port number"):
        front.split_address(["app.py", "--server.port", "x"])


def test_without_options_the_front_listens_where_one_server_would(tmp_path) -> None:
    """The app's .streamlit/config.toml says 127.0.0.1: the front does not listen on every interface."""
    assert front.configured({}) == {"address": "127.0.0.1", "port": "8501"}  # the repository's file
    assert front.split_address(["app.py"])[:2] == ("127.0.0.1", 8501)
    assert front.configured({"STREAMLIT_SERVER_PORT": "9000"})["port"] == "9000"
    (tmp_path / "c.toml").write_text("[server]\nport = 8700\n")
    assert front.configured({}, str(tmp_path / "c.toml")) == {"address": "", "port": "8700"}
    assert front.configured({}, str(tmp_path / "missing.toml")) == {"address": "", "port": "8501"}


def test_main_hands_several_workers_to_the_front(monkeypatch) -> None:
    seen = []
    monkeypatch.setattr(front, "serve", lambda argv, n: seen.append((list(argv), n)) or 0)
    monkeypatch.setenv("DPCORE_WORKERS", "3")
    assert serve.main(["app.py", "--server.port", "1"]) == 0
    assert seen == [(["app.py", "--server.port", "1"], 3)]
