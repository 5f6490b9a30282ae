"""The app servers behind ``./run --workers N`` (issue 28 item 5): started, watched, started again,
stopped; and :func:`serve`, which runs them behind the sticky front (:mod:`ui.front`).

**What the servers share.**  The budget database (SQLite, ``$DPCORE_LEDGER_DB``): every release of
every worker is charged in it under SQLite's write lock (:mod:`dpcore.privacy.ledger_store`), so the
workers never overspend a shared cap.  A worker that exits is started again, on a new port: at once
after a run of a minute or more, otherwise after 10 s, then 20 s, 40 s ... up to 5 minutes from its
exit while it keeps failing; its browser sessions reconnect to a fresh session, as after a restart of
a single server.  Each server keeps Streamlit's own cookie secret (its own unless
``server.cookieSecret`` is set): nothing here draws randomness (DESIGN.md's rule 2: only the noise
module does).

**Only the worker's own port.**  A worker's port is free between its start and its listening (the
imports take up to a minute) and while it stops; another local program could listen there.  So a
worker serves only while its process runs and the socket listening on its port is the one its process
opened (on Linux, from /proc: the listening socket among the process's open files, found once; then
at every connection, that the process still holds it; elsewhere a connection test, which cannot tell
whose the port is).
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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ui.front import COOKIE, MAX_HEAD, Backend, StickyFront
from ui.options import take_options

#: Seconds a worker may take to listen after it is started (the first start imports the map and data
#: libraries: about a minute on a small machine).
START_TIMEOUT = 300.0
#: A worker that exits before it listened, or within this many seconds of it, counts as failing.
QUICK_EXIT = 60.0
#: Seconds from a failing worker's exit to its next start: doubled at each failure, at most the second.
RESTART_PAUSE = (10.0, 300.0)
#: Seconds a worker may run on after it stopped listening before it is stopped.
STUCK = 10.0
#: Connections the front's socket queues (uvicorn's own default).
BACKLOG = 2048
#: Where Streamlit finds its options besides the command line: the user's file, then the app's.
CONFIG_FILES = (str(Path.home() / ".streamlit" / "config.toml"), ".streamlit/config.toml")
#: The waiting loops' sleep, this module's own: a test counts its ticks by replacing it here, where
#: replacing ``time.sleep`` would count every other thread's sleeps too.
_sleep = time.sleep
_TLS = {"--server.sslCertFile": "sslCertFile", "--server.sslKeyFile": "sslKeyFile"}
_NO_TLS = ("cannot be used with --workers: the front speaks plain HTTP to the browser. Put a TLS terminator "
           "(nginx, Caddy) in front of it, or serve with TLS from one server (no --workers).")


def split_address(argv: Sequence[str], defaults: dict[str, str] | None = None) -> tuple[str, int, list[str]]:
    """The public address and port among Streamlit's options (the last of each wins, as for
    Streamlit), else as Streamlit would find them (:func:`configured`); and the options without them.
    TLS options are refused (:data:`_NO_TLS`).

    >>> split_address(["app.py", "--server.address", "127.0.0.1", "--server.port=8600", "--theme.base=dark"])
    ('127.0.0.1', 8600, ['app.py', '--theme.base=dark'])
    >>> split_address(["app.py"], {"address": "", "port": "8501"})
    ('', 8501, ['app.py'])
    """
    defaults = configured() if defaults is None else defaults
    if defaults.get("tls"):
        raise SystemExit(f"{defaults['tls']} {_NO_TLS}")
    given, rest = take_options(argv, ("--server.address", "--server.port", *_TLS))
    tls = next((name for name in given if name in _TLS), None)  # the first given
    if tls:
        raise SystemExit(f"{tls} {_NO_TLS}")
    found = {"--server.address": defaults["address"], "--server.port": defaults["port"], **given}
    port = found["--server.port"]
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise SystemExit(f"--server.port {port!r} is not a port number: give one such as 8501")
    return found["--server.address"], int(port), rest


def configured(env: dict[str, str] | None = None, files: Sequence[str] = CONFIG_FILES) -> dict[str, str]:
    """The server's address and port when no option names them, found as Streamlit finds them:
    ``$STREAMLIT_SERVER_ADDRESS`` / ``$STREAMLIT_SERVER_PORT``, else the config ``files`` (the later
    wins; the app's says 127.0.0.1:8501), else Streamlit's defaults (every interface, 8501): so the
    front never listens more widely than one server would.  ``tls``: where a TLS certificate or key is
    set outside the command line ("" when nowhere)."""
    env = os.environ if env is None else env
    server: dict = {}
    for path in files:
        with contextlib.suppress(OSError, ValueError):
            with open(path, "rb") as f:
                server.update(tomllib.load(f).get("server", {}))
    out = {name: env.get(f"STREAMLIT_SERVER_{name.upper()}") or str(server.get(name, default))
           for name, default in (("address", ""), ("port", 8501))}
    out["tls"] = next((f"server.{key} (config or environment)" for key in _TLS.values()
                       if server.get(key) or env.get("STREAMLIT_SERVER_" + _snake(key).upper())), "")
    return out


def _snake(key: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in key)


def free_port(taken: Sequence[int] = ()) -> int:
    """A port free now on 127.0.0.1, none of ``taken`` (the OS may hand the same one out twice in a
    row: 3 times in 20,000 pairs, review finding)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in taken:
            return port


Listening = dict[int, set[str]]


def listening() -> Listening | None:
    """The sockets listening on TCP here, by port (``socket:[inode]``, as /proc/PID/fd links name
    them), from /proc/net/tcp and tcp6 (about 7 ms: read once for all the workers that wait); None
    without /proc."""
    ports: Listening = {}
    tables = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        tables += 1
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == "0A":
                ports.setdefault(int(fields[1].rsplit(":", 1)[1], 16), set()).add(f"socket:[{fields[9]}]")
    return ports if tables else None


def own_listener(pid: int, port: int, host: str = "127.0.0.1",
                 seen: Listening | None | bool = True) -> tuple[str, str] | None:
    """How process ``pid`` itself listens on ``port``: ``(its file descriptor's /proc path, the socket
    it names)``, else None.  ``seen``: :func:`listening`'s answer, when already read (True: read it
    here).  Without /proc: ``("", "")`` when the port accepts a connection (whose, it cannot tell)."""
    ports = listening() if seen is True else seen
    inodes = None if ports is None else ports.get(port, set())
    if inodes is None:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return "", ""
        except OSError:
            return None
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            path = f"/proc/{pid}/fd/{fd}"
            with contextlib.suppress(OSError):
                link = os.readlink(path)
                if link in inodes:
                    return path, link
    return None


def still_open(listener: tuple[str, str]) -> bool:
    """Whether the worker still holds the listening socket :func:`own_listener` found: one readlink, a
    few microseconds, cheap enough for every connection (reading /proc/net/tcp took 7 ms).  A bound
    socket keeps its port while it is open, so no other program can listen there meanwhile."""
    path, link = listener
    if not path:
        return True
    try:
        return os.readlink(path) == link
    except OSError:
        return False


def _pdeathsig() -> object:
    """The child's first steps: Ctrl-C unblocked (the front defers it while it starts a worker:
    :func:`_sigint_deferred`, and a blocked signal would stay blocked across exec), and on Linux SIGTERM
    when the front dies, even by SIGKILL (no orphan servers).  libc is loaded here, in the front; the
    child only calls prctl.  The kernel ties this to the thread that started the worker: the front
    starts them from its main thread, which lives as long as it."""
    prctl = None
    if sys.platform == "linux":
        try:
            prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl
        except OSError:  # pragma: no cover - a Linux without glibc's name
            prctl = None
    front = os.getpid()

    def child() -> None:  # pragma: no cover - runs in the child before exec
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        if prctl is not None:
            prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
            if os.getppid() != front:  # the front died before that: do not outlive it
                os.kill(os.getpid(), signal.SIGTERM)

    return child


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Ctrl-C held back while a worker is forked, exec'd and recorded, then delivered: a Ctrl-C in the
    middle of ``Popen`` raised there and left that worker running unrecorded, so the stop that followed
    never told it to stop (found by the second-Ctrl-C test on a loaded machine)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)  # a Ctrl-C that came meanwhile is raised here


@dataclass
class Run:
    """One run of a worker: its process and what was seen of it (a new one at every start)."""

    proc: subprocess.Popen
    started: float  # time.monotonic() of its start
    listener: tuple[str, str] | None = None  # how it listens (own_listener), once seen
    ready_at: float = 0.0  # when it was seen listening (0: not yet)
    lost: float = 0.0  # when it was seen no longer listening, while it ran on
    term_at: float = 0.0  # when it was told to stop (SIGTERM), before it is killed
    exited: float = 0.0  # when its exit was seen

    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def ready(self) -> bool:
        """Whether it serves: seen listening on its port, and since then neither seen without its
        listening socket (the port maybe someone else's: never again) nor exited."""
        return self.ready_at > 0.0 and not self.lost and not self.exited


class Workers:
    """N app servers (``python -m ui.serve`` with Streamlit's options ``argv``), started again when
    one exits."""

    def __init__(self, n: int, argv: Sequence[str]) -> None:
        self.argv = list(argv)
        self.backends: list[Backend] = []
        for _ in range(n):
            self.backends.append(Backend("127.0.0.1", free_port([b.port for b in self.backends])))
        # each worker is one server, and warms itself once it listens (ui.serve.warm_up; DPCORE_WARM_UP=0
        # in the environment: not)
        self.env = {"DPCORE_WARM_UP": "1", **os.environ, "DPCORE_WORKERS": "1"}
        self.runs: list[Run | None] = [None] * n  # each worker's current (or last) run
        self.failures = [0] * n  # failing exits in a row (QUICK_EXIT), across runs
        self.stopping = False
        self._preexec = _pdeathsig()

    def command(self, i: int) -> list[str]:
        """Worker ``i``'s command: the app's server on its own port."""
        return [sys.executable, "-m", "ui.serve", *self.argv, f"--server.port={self.backends[i].port}",
                "--server.address=127.0.0.1", "--server.headless=true"]

    def start(self, i: int) -> None:
        b = self.backends[i]
        if self.runs[i] is not None:  # started again: a new port (its old one may have been taken)
            b.port = free_port([o.port for o in self.backends])
        # their own banners name their inner ports: the front prints the address to open instead
        proc = subprocess.Popen(self.command(i), env=self.env, stdout=subprocess.DEVNULL, preexec_fn=self._preexec)
        self.runs[i] = Run(proc, time.monotonic())

    def alive(self, i: int) -> bool:
        return self.runs[i] is not None and self.runs[i].alive()

    def ready(self, i: int) -> bool:
        """Whether worker ``i``'s current run serves (:attr:`Run.ready`)."""
        return self.runs[i] is not None and self.runs[i].ready

    def usable(self, i: int) -> bool:
        """Whether the front may send a connection to worker ``i`` now: it runs, and it still holds the
        socket it listened by (:func:`still_open`, checked at every connection)."""
        if not (self.ready(i) and self.alive(i)):
            return False
        run = self.runs[i]
        if run.listener is not None and not still_open(run.listener):
            run.lost = time.monotonic()  # closing, and the port maybe someone else's: never again
            return False
        return True

    def check(self, i: int, seen: Listening | None | bool = True) -> bool:
        """Mark worker ``i`` ready once its own process listens on its port; return whether it is.
        ``seen``: :func:`listening`'s answer, when already read this tick (True: read it here)."""
        run = self.runs[i]
        if self.alive(i) and run.ready_at == 0.0:
            found = own_listener(run.proc.pid, self.backends[i].port, seen=seen)
            if found is not None:
                run.listener, run.ready_at = found, time.monotonic()
        return self.ready(i)

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Block until every worker listens on its port; SystemExit naming the one that exited."""
        deadline = time.monotonic() + timeout
        waiting = set(range(len(self.backends)))
        while waiting:
            seen = listening()  # once a tick for all the workers that wait
            for i in sorted(waiting):
                if not self.alive(i):
                    self.stop()
                    raise SystemExit(f"App server {i + 1} of {len(self.backends)} exited with code "
                                     f"{self.runs[i].proc.returncode} before it started; its messages are above.")
                if self.check(i, seen):
                    waiting.discard(i)
            if waiting and time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"{len(waiting)} app server(s) did not start within {timeout:.0f} s.")
            _sleep(0.2)

    def pause(self, i: int) -> float:
        """Seconds from worker ``i``'s exit to its next start."""
        if self.failures[i] == 0:
            return 0.0
        first, most = RESTART_PAUSE
        return min(most, first * 2 ** (self.failures[i] - 1))

    def _exited(self, i: int, now: float) -> None:
        """Note worker ``i``'s exit (once): a failure when it never listened or stopped within
        :data:`QUICK_EXIT` of it."""
        run = self.runs[i]
        failed = run.ready_at == 0.0 or now - run.ready_at < QUICK_EXIT
        self.failures[i] = self.failures[i] + 1 if failed else 0
        run.exited = now
        wait = f" in {self.pause(i):.0f} s" if self.pause(i) else ""
        print(f"App server {i + 1} exited with code {run.proc.returncode} after {now - run.started:.0f} s; "
              f"starting it again{wait}.", file=sys.stderr, flush=True)

    def _restart(self, i: int, now: float) -> None:
        try:
            self.start(i)
        except OSError as e:  # no memory or processes left: try again later, and say so
            self.failures[i] += 1
            self.runs[i].exited = now
            print(f"App server {i + 1} could not be started again ({e}); trying again in {self.pause(i):.0f} s.",
                  file=sys.stderr, flush=True)

    async def supervise(self, every: float = 1.0) -> None:
        """Watch the workers (:meth:`_watch`, each in turn, every ``every`` seconds).  An error in one
        step is said and the watch goes on: a watch that stopped would never start a worker again."""
        while not self.stopping:
            await asyncio.sleep(every)
            for i in range(len(self.runs)):
                if self.stopping:
                    break
                try:
                    self._watch(i, time.monotonic())
                except Exception as e:  # noqa: BLE001 - said, and the next tick tries again
                    print(f"Watching app server {i + 1} failed: {e!r}.", file=sys.stderr, flush=True)

    def _watch(self, i: int, now: float) -> None:
        """One look at worker ``i``: one that exited is started again :meth:`pause` seconds after its exit;
        one started again serves once :meth:`check` sees it listening; one that does not listen within
        :data:`START_TIMEOUT`, or that runs on :data:`STUCK` seconds after it stopped listening, is
        stopped (and so started again)."""
        run = self.runs[i]
        if run is None:
            return
        if not run.alive():
            if run.exited == 0.0:
                self._exited(i, now)
            if now - run.exited >= self.pause(i):
                self._restart(i, now)
            return
        if self.check(i) and self.usable(i):  # usable() drops it once its listening socket is gone
            return
        why = ""
        if run.ready_at == 0.0 and now - run.started > START_TIMEOUT:
            why = f"did not start within {START_TIMEOUT:.0f} s"
        elif run.ready_at:
            run.lost = run.lost or now
            why = f"stopped listening {STUCK:.0f} s ago" if now - run.lost > STUCK else ""
        if why and not run.term_at:
            print(f"App server {i + 1} {why}; stopping it.", file=sys.stderr, flush=True)
            run.term_at = now
            run.proc.terminate()  # its own clean-up first (temporary files) ...
        elif why and now - run.term_at > STUCK:
            run.proc.kill()  # ... then for sure

    def stop(self, grace: float = 10.0) -> None:
        self.stopping = True
        live = [r.proc for r in self.runs if r is not None and r.alive()]
        for p in live:
            p.terminate()
        deadline = time.monotonic() + grace
        for p in live:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def stop_quietly(workers: Workers) -> None:
    """Stop the workers after a Ctrl-C; another Ctrl-C while they stop kills them at once, without a
    traceback (and later ones are ignored until they are gone)."""
    try:
        workers.stop()
    except KeyboardInterrupt:
        before = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            workers.stop(grace=0.0)
        finally:
            signal.signal(signal.SIGINT, before)


def bind(host: str, port: int) -> socket.socket:
    """The front's listening socket, made before any worker starts (a port in use is said at once)."""
    dual = host in ("", "::") and socket.has_dualstack_ipv6()  # as one server: IPv4 clients too
    family = socket.AF_INET6 if dual or ":" in host else socket.AF_INET
    try:
        return socket.create_server((host if host != "" or not dual else "::", port), family=family,
                                    backlog=BACKLOG, dualstack_ipv6=dual)
    except OSError as e:
        raise SystemExit(f"Cannot listen on {host or '*'}:{port}: {e.strerror}. Give another --server.port.") from None


def serve(argv: Sequence[str], n: int) -> int:
    """Run ``n`` app servers behind one sticky front on the address of ``argv``'s Streamlit options."""
    host, port, rest = split_address(argv)
    sock = bind(host, port)
    workers = Workers(n, rest)
    print(f"Starting {n} app servers ...", flush=True)
    try:
        for i in range(n):
            with _sigint_deferred():
                workers.start(i)
        workers.wait_ready()
    except KeyboardInterrupt:  # Ctrl-C while they start: stop them, quietly
        stop_quietly(workers)
        sock.close()
        return 130
    return asyncio.run(front(workers, host, port, sock))


async def front(workers: Workers, host: str, port: int, sock: socket.socket | None = None) -> int:
    """Serve ``host:port`` (or ``sock``, bound there) with :class:`~ui.front.StickyFront` over
    ``workers`` until SIGINT or SIGTERM; then stop them."""
    sticky = StickyFront(workers.backends, f"{COOKIE}_{port}", workers.usable)
    try:
        sock = sock or bind(host, port)
    except SystemExit:
        workers.stop()
        raise
    server = await asyncio.start_server(sticky.handle, sock=sock, limit=MAX_HEAD)
    stop = asyncio.Event()

    def stopping() -> None:  # Ctrl-C reaches the workers too: none may be started again meanwhile
        workers.stopping = True
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping)
    supervisor = asyncio.create_task(workers.supervise())
    shown = host if host not in ("", "0.0.0.0", "::") else "localhost"
    print(f"The app is served on http://{shown}:{port} by {len(workers.backends)} app servers.", flush=True)
    try:
        await stop.wait()
    finally:
        supervisor.cancel()
        server.close()
        await sticky.close()
        workers.stop()
    return 0
