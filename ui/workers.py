"""The app servers behind ``./run --workers N`` (issue 28 item 5): started, watched, started again,
stopped; and :func:`serve`, which runs them behind the sticky front (:mod:`ui.front`).

**What the servers share.**  The budget database (SQLite, ``$DPCORE_LEDGER_DB``): every release of
every worker is charged in it under SQLite's write lock (:mod:`dpcore.privacy.ledger_store`), so the
workers never overspend a shared cap.  A worker that exits is started again on its port (at once after
a long run; after 10 s, then 20 s, 40 s ... up to 5 minutes while it keeps failing within a minute);
its browser sessions reconnect to a fresh session, as after a restart of a single server.  Each
server keeps Streamlit's own cookie secret (its own unless ``server.cookieSecret`` is set): nothing
here draws randomness (DESIGN.md's rule 2: only the noise module does).

**Only the worker's own port.**  A worker's port is free between its start and its listening (the
imports take up to a minute) and after it stops; another local program could listen there.  So a
worker serves only once its own process is seen listening on its port (on Linux, from /proc: the
listening socket's inode among the process's open files; elsewhere a connection test) and only while
its process runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Sequence

from ui.front import COOKIE, MAX_HEAD, Backend, StickyFront

#: Seconds a worker may take to listen after it is started (the first start imports the map and data
#: libraries: about a minute on a small machine).
START_TIMEOUT = 300.0
#: A worker that exits within this many seconds of its start counts as failing to start.
QUICK_EXIT = 60.0
#: Seconds before a failing worker is started again: doubled at each failure, at most the second.
RESTART_PAUSE = (10.0, 300.0)
#: Connections the front's socket queues (uvicorn's own default).
BACKLOG = 2048
#: Streamlit's options for TLS: the front speaks plain HTTP to the browser.
_TLS_OPTIONS = ("--server.sslCertFile", "--server.sslKeyFile")


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
        if name in _TLS_OPTIONS:
            raise SystemExit(f"{name} cannot be used with --workers: the front speaks plain HTTP to the browser. Put a "
                             "TLS terminator (nginx, Caddy) in front of it, or serve with TLS from one server (no --workers).")
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


def listens(pid: int, port: int, host: str = "127.0.0.1") -> bool:
    """Whether process ``pid`` itself listens on ``port``: on Linux, a listening socket on that port
    (/proc/net/tcp, tcp6) among the process's open files; without /proc, whether the port accepts a
    connection (which cannot tell whose it is)."""
    inodes, tables = set(), 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        tables += 1
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    if not tables:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return True
        except OSError:
            return False
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    return True
    return False


class Workers:
    """N app servers (``python -m ui.serve`` with Streamlit's options ``argv``), started again when
    one exits."""

    def __init__(self, n: int, argv: Sequence[str]) -> None:
        self.argv = list(argv)
        self.backends = [Backend("127.0.0.1", _free_port(), ready=False) for _ in range(n)]
        if len({b.port for b in self.backends}) < n:  # pragma: no cover - the OS hands out distinct free ports
            raise SystemExit("Could not find a free port for every app server; try again.")
        self.env = dict(os.environ, DPCORE_WORKERS="1")  # each worker is one server
        self.procs: list[subprocess.Popen | None] = [None] * n
        self.started = [0.0] * n  # time.monotonic() of each worker's last start
        self.failures = [0] * n  # exits within QUICK_EXIT of the start, in a row
        self.stopping = False

    def command(self, i: int) -> list[str]:
        """Worker ``i``'s command: the app's server on its own port."""
        return [sys.executable, "-m", "ui.serve", *self.argv, f"--server.port={self.backends[i].port}",
                "--server.address=127.0.0.1", "--server.headless=true"]

    def start(self, i: int) -> None:
        self.backends[i].ready = False
        self.started[i] = time.monotonic()
        # their own banners name their inner ports: the front prints the address to open instead
        self.procs[i] = subprocess.Popen(self.command(i), env=self.env, stdout=subprocess.DEVNULL,
                                         preexec_fn=_die_with_parent if sys.platform == "linux" else None)

    def alive(self, i: int) -> bool:
        p = self.procs[i]
        return p is not None and p.poll() is None

    def usable(self, i: int) -> bool:
        """Whether the front may send a connection to worker ``i``: seen listening on its own port, and
        still running."""
        return self.backends[i].ready and self.alive(i)

    def check(self, i: int) -> bool:
        """Mark worker ``i`` ready once its own process listens on its port; return whether it is."""
        b = self.backends[i]
        if not b.ready and self.alive(i) and listens(self.procs[i].pid, b.port):
            b.ready = True
        return b.ready

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Block until every worker listens on its port; SystemExit naming the one that exited."""
        deadline = time.monotonic() + timeout
        waiting = set(range(len(self.backends)))
        while waiting:
            for i in sorted(waiting):
                if not self.alive(i):
                    self.stop()
                    raise SystemExit(f"App server {i + 1} of {len(self.backends)} exited with code "
                                     f"{self.procs[i].returncode} before it started; its messages are above.")
                if self.check(i):
                    waiting.discard(i)
            if waiting and time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"{len(waiting)} app server(s) did not start within {timeout:.0f} s.")
            time.sleep(0.2)

    def pause(self, i: int) -> float:
        """Seconds to wait after worker ``i``'s last start before starting it again."""
        if self.failures[i] == 0:
            return 0.0
        first, most = RESTART_PAUSE
        return min(most, first * 2 ** (self.failures[i] - 1))

    async def supervise(self, every: float = 1.0) -> None:
        """Watch the workers: one that exited is started again on its port after :meth:`pause`; one
        started again serves once :meth:`check` sees it listening."""
        noted: set[int] = set()
        while not self.stopping:
            await asyncio.sleep(every)
            for i, p in enumerate(self.procs):
                if self.stopping or p is None:
                    continue
                if p.poll() is None:
                    self.check(i)
                    continue
                self.backends[i].ready = False
                if i not in noted:  # once per exit
                    noted.add(i)
                    ran = time.monotonic() - self.started[i]
                    self.failures[i] = self.failures[i] + 1 if ran < QUICK_EXIT else 0
                    print(f"App server {i + 1} exited with code {p.returncode} after {ran:.0f} s; starting it again"
                          + (f" in {self.pause(i):.0f} s." if self.pause(i) else "."), file=sys.stderr, flush=True)
                if time.monotonic() - self.started[i] >= self.pause(i):
                    noted.discard(i)
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
    return asyncio.run(front(workers, host, port))


async def front(workers: Workers, host: str, port: int) -> int:
    """Serve ``host:port`` with :class:`~ui.front.StickyFront` over ``workers`` until SIGINT or SIGTERM;
    then stop them."""
    sticky = StickyFront(workers.backends, f"{COOKIE}_{port}", workers.usable)
    try:
        server = await asyncio.start_server(sticky.handle, host or None, port, limit=MAX_HEAD, backlog=BACKLOG)
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
        await sticky.close()
        workers.stop()
    return 0
