"""The app servers behind ``./run --workers N`` (ui/workers.py, issue 28 item 5), with small stand-in
processes: started, seen listening on their own port (never on a port another program took), started
again after an exit with growing pauses while they keep failing, stopped with the front; and the
options.  The proxy: test_front.py; the app: tests/e2e/test_workers_browser.py."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from loop_helpers import run, until

from ui import serve, workers
from ui.workers import Workers

ROOT = Path(__file__).resolve().parents[2]
SLEEPER = ("import socket, sys, time\ns = socket.socket()\ns.bind(('127.0.0.1', int(sys.argv[1])))\n"
           "s.listen()\ntime.sleep(120)")


class Sleepers(Workers):
    """Workers that listen on their port and do nothing else (or exit at once with ``exit_code``)."""

    exit_code: int | None = None

    def command(self, i: int) -> list[str]:
        if self.exit_code is not None:
            return [sys.executable, "-c", f"raise SystemExit({self.exit_code})"]
        return [sys.executable, "-c", SLEEPER, str(self.backends[i].port)]


def started(n: int) -> Sleepers:
    w = Sleepers(n, ["app.py"])
    for i in range(n):
        w.start(i)
    w.wait_ready(timeout=60)
    return w


def test_a_worker_serves_once_its_own_process_listens_on_its_port() -> None:
    w = started(1)
    try:
        assert w.ready(0) and w.usable(0)
        assert workers.own_listener(w.runs[0].proc.pid, w.backends[0].port) is not None
        assert workers.own_listener(os.getpid(), w.backends[0].port) is None  # the port is not ours
        with socket.socket() as mine:
            mine.bind(("127.0.0.1", 0))
            mine.listen()
            assert workers.own_listener(os.getpid(), mine.getsockname()[1]) is not None
            assert workers.own_listener(w.runs[0].proc.pid, mine.getsockname()[1]) is None
    finally:
        w.stop()
    assert not w.usable(0)  # stopped: never used, whatever listens there now


def test_a_port_another_program_took_is_never_trusted() -> None:
    """Review finding: a worker's port is free until it listens; a program that took it first is not a
    worker: the worker cannot listen, exits, and the start fails with a message naming it."""
    w = Sleepers(1, ["app.py"])
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", w.backends[0].port))
        squatter.listen()
        w.start(0)
        with pytest.raises(SystemExit, match=r"App server 1 of 1 exited with code 1 before it started"):
            w.wait_ready(timeout=60)
        assert not w.ready(0)


def test_workers_are_started_again_when_one_exits_and_stop() -> None:
    w = started(2)
    first, port = w.runs[0].proc, w.backends[0].port
    w.runs[0].ready_at -= 3600  # it served for an hour: started again at once
    first.kill()
    first.wait()

    async def watch():
        task = asyncio.create_task(w.supervise(every=0.05))
        for _ in range(400):
            if w.runs[0].proc is not first and w.ready(0):
                break
            await asyncio.sleep(0.05)
        task.cancel()
        # checked in this thread: a worker dies with the thread that started it (PR_SET_PDEATHSIG;
        # the front starts them all from its main thread)
        assert w.runs[0].proc is not first and w.usable(0) and w.failures[0] == 0
        assert w.backends[0].port != port  # a new port: the old one may have been taken meanwhile
        w.stop()

    run(watch())
    assert all(p.poll() is not None for p in (r.proc for r in w.runs))
    assert w.env["DPCORE_WORKERS"] == "1"  # each worker is one server, not another front


def test_a_worker_that_keeps_failing_waits_longer_each_time(capsys) -> None:
    w = Sleepers(1, ["app.py"])
    assert [w.pause(0)] == [0.0]
    w.failures[0] = 1
    assert w.pause(0) == 10.0
    w.failures[0] = 3
    assert w.pause(0) == 40.0
    w.failures[0] = 30
    assert w.pause(0) == 300.0
    w.failures[0] = 0
    w.exit_code = 1  # exits without ever listening: a failure, not started again at once
    w.start(0)
    w.runs[0].proc.wait()
    w.runs[0].started -= 3600  # however long ago it started: the pause runs from its exit (review finding)

    async def watch():
        task = asyncio.create_task(w.supervise(every=0.02))
        assert await until(lambda: w.runs[0].exited)  # its exit seen
        await asyncio.sleep(0.5)  # 25 more looks: none starts it again before its 10 s
        task.cancel()

    first = w.runs[0].proc
    run(watch())
    assert w.failures[0] == 1 and w.runs[0].proc is first  # waiting its 10 s
    err = capsys.readouterr().err
    assert len(re.findall(r"App server 1 exited with code 1 after 36\d\d s; starting it again in 10 s\.", err)) == 1


FRONT_OF_SLEEPERS = """
import sys
from ui import workers

class Sleepers(workers.Workers):
    def command(self, i):
        return [sys.executable, "-c", SLEEPER, str(self.backends[i].port)]

SLEEPER = {sleeper!r}
w = Sleepers(2, ["app.py"])
for i in range(2):
    w.start(i)
w.wait_ready(timeout=60)
print(*(p.pid for p in (r.proc for r in w.runs)), flush=True)
sys.exit(workers.asyncio.run(workers.front(w, "127.0.0.1", int(sys.argv[1]))))
"""


def test_the_front_serves_until_sigterm_then_stops_its_workers() -> None:
    """A real front process (two stand-in workers): it answers on its port; on SIGTERM it exits with 0
    and its workers are gone."""
    port = workers.free_port()
    proc = subprocess.Popen([sys.executable, "-c", FRONT_OF_SLEEPERS.format(sleeper=SLEEPER), str(port)], cwd=ROOT,
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
    with pytest.raises(SystemExit, match=r"App server [12] of 2 exited with code 3 before it started"):
        w.wait_ready(timeout=60)
    assert all(p.poll() is not None for p in (r.proc for r in w.runs))


def test_a_port_in_use_is_named_with_the_fix() -> None:
    w = started(1)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(SystemExit, match=r"Cannot listen on 127\.0\.0\.1:\d+: .*Give another --server\.port"):
            run(workers.front(w, "127.0.0.1", taken.getsockname()[1]))
    assert w.runs[0].proc.poll() is not None  # its worker was stopped


def test_the_options_name_the_problem_and_the_fix() -> None:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert serve.workers_option(["app.py", "--workers=auto"], {})[0] == cores
    assert serve.workers_option(["app.py"], {}) == (1, ["app.py"])
    for bad in ("0", "two", ""):
        with pytest.raises(SystemExit, match=r"is not a number of app servers: give 1 or more, or auto"):
            serve.workers_option(["app.py", "--workers", bad], {})
    for bad in ("x", "0", "70000"):  # 0: a random port the front could not name (review)
        with pytest.raises(SystemExit, match=r"--server\.port '\w+' is not a port number"):
            workers.split_address(["app.py", "--server.port", bad], {"address": "", "port": "8501"})
    for tls in ("--server.sslCertFile=c.pem", "--server.sslKeyFile"):  # review: it silently broke every page
        with pytest.raises(SystemExit, match=r"cannot be used with --workers: the front speaks plain HTTP.*TLS terminator"):
            workers.split_address(["app.py", tls, "k.pem"])


def test_without_options_the_front_listens_where_one_server_would(tmp_path) -> None:
    """The app's .streamlit/config.toml says 127.0.0.1: the front does not listen on every interface."""
    app = [".streamlit/config.toml"]  # the repository's file (run from the root, as ./run does)
    assert workers.configured({}, app) == {"address": "127.0.0.1", "port": "8501", "tls": ""}
    assert workers.split_address(["app.py"], workers.configured({}, app))[:2] == ("127.0.0.1", 8501)
    assert workers.configured({"STREAMLIT_SERVER_PORT": "9000"}, app)["port"] == "9000"
    (tmp_path / "c.toml").write_text("[server]\nport = 8700\n")
    assert workers.configured({}, [str(tmp_path / "c.toml")]) == {"address": "", "port": "8700", "tls": ""}
    assert workers.configured({}, [str(tmp_path / "missing.toml")]) == {"address": "", "port": "8501", "tls": ""}
    # the user's file, then the app's: the app's wins
    assert workers.configured({}, [str(tmp_path / "c.toml"), *app])["port"] == "8501"


def test_tls_set_anywhere_is_refused_with_workers(tmp_path) -> None:
    """Review finding: a certificate set in the environment or a config file reached the workers, and
    every page then hung (the front speaks plain HTTP)."""
    (tmp_path / "tls.toml").write_text('[server]\nsslCertFile = "c.pem"\nsslKeyFile = "k.pem"\n')
    for found in (workers.configured({"STREAMLIT_SERVER_SSL_CERT_FILE": "c.pem"}, []),
                  workers.configured({"STREAMLIT_SERVER_SSL_KEY_FILE": "k.pem"}, []),
                  workers.configured({}, [str(tmp_path / "tls.toml")])):
        assert found["tls"]
        with pytest.raises(SystemExit, match=r"cannot be used with --workers: the front speaks plain HTTP"):
            workers.split_address(["app.py"], found)


def test_a_busy_port_is_said_before_any_server_starts(monkeypatch) -> None:
    monkeypatch.setattr(Workers, "start", lambda self, i: pytest.fail("a server was started"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        argv = ["app.py", "--server.address", "127.0.0.1", "--server.port", str(taken.getsockname()[1])]
        with pytest.raises(SystemExit, match=r"Cannot listen on 127\.0\.0\.1:\d+: .*Give another --server\.port"):
            workers.serve(argv, 2)


class Closer(Sleepers):
    """A worker that listens until the file ``go`` exists, then closes its socket and lives on (as one that
    stops): told when, not after a fixed time, so a loaded machine cannot close it before it is seen."""

    go: Path

    def command(self, i: int) -> list[str]:
        return [sys.executable, "-c", "import os, socket, sys, time\ns = socket.socket()\n"
                "s.bind(('127.0.0.1', int(sys.argv[1])))\ns.listen()\nend = time.monotonic() + 60\n"
                "while not os.path.exists(sys.argv[2]) and time.monotonic() < end:\n    time.sleep(0.02)\n"
                "s.close()\ntime.sleep(60)",
                str(self.backends[i].port), str(self.go)]


def test_a_worker_whose_listening_socket_is_gone_is_never_used_again(tmp_path: Path) -> None:
    """Review finding: a stopping worker closes its socket before it exits, and a program that took the
    port then got the front's traffic (584 of 6,100 requests); the socket is now checked at every use."""
    w = Closer(1, ["app.py"])
    w.go = tmp_path / "go"
    w.start(0)
    try:
        w.wait_ready(timeout=60)
        assert w.usable(0) and w.runs[0].listener[1].startswith("socket:[")
        w.go.touch()  # now close the socket
        deadline = time.monotonic() + 30
        while w.usable(0):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        with socket.socket() as squatter:  # takes the port while the worker still runs
            squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            squatter.bind(("127.0.0.1", w.backends[0].port))
            squatter.listen()
            assert w.alive(0) and not w.usable(0) and not w.check(0)
            assert w.runs[0].lost and not w.ready(0)  # never used again: its run says so
    finally:
        w.stop()


def test_a_start_that_fails_is_said_and_tried_again_later(monkeypatch, capsys) -> None:
    """Review finding: one failed fork ended the supervisor, and no server was ever started again."""
    w = started(1)
    w.runs[0].ready_at -= 3600  # it served an hour: started again at once
    w.runs[0].proc.kill()
    w.runs[0].proc.wait()

    def no_fork(*a, **k):
        raise OSError(11, "Resource temporarily unavailable")

    async def watch():
        monkeypatch.setattr(subprocess, "Popen", no_fork)
        task = asyncio.create_task(w.supervise(every=0.02))
        assert await until(lambda: w.failures[0] == 1)  # the failed start counted
        await asyncio.sleep(0.1)
        assert not task.done()  # still watching
        task.cancel()

    run(watch())
    err = capsys.readouterr().err
    assert "App server 1 exited with code -9 after" in err and "starting it again." in err
    assert ("App server 1 could not be started again ([Errno 11] Resource temporarily unavailable); trying again "
            "in 10 s.") in err
    assert w.failures[0] == 1 and w.pause(0) == 10.0


def test_main_hands_several_workers_to_the_front(monkeypatch) -> None:
    seen = []
    monkeypatch.setattr(workers, "serve", lambda argv, n: seen.append((list(argv), n)) or 0)
    monkeypatch.setenv("DPCORE_WORKERS", "3")
    assert serve.main(["app.py", "--server.port", "1"]) == 0
    assert seen == [(["app.py", "--server.port", "1"], 3)]


def test_an_exit_within_a_minute_of_listening_is_a_failure_and_after_it_is_not() -> None:
    w = started(2)
    try:
        now = time.monotonic()
        w.runs[0].ready_at, w.runs[1].ready_at = now - 5, now - 3600
        for i in range(2):
            w.runs[i].proc.kill()
            w.runs[i].proc.wait()
            w._exited(i, time.monotonic())
        assert (w.failures, w.pause(0), w.pause(1)) == ([1, 0], 10.0, 0.0)
        assert not (w.ready(0) or w.ready(1))  # exited: neither serves, whenever it is started again
    finally:
        w.stop()


def test_a_worker_that_never_listens_or_stops_listening_but_runs_on_is_stopped(monkeypatch, capsys,
                                                                                tmp_path: Path) -> None:
    """Review findings: a worker hung before it listened, or after it closed its socket while stopping,
    was kept for ever (never used, never started again)."""
    monkeypatch.setattr(workers, "START_TIMEOUT", 0.3)
    monkeypatch.setattr(workers, "STUCK", 0.3)

    class Mute(Sleepers):
        def command(self, i: int) -> list[str]:
            return [sys.executable, "-c", "import time\ntime.sleep(60)"]

    class Deaf(Mute):  # ignores SIGTERM: killed STUCK seconds after it was told to stop
        def command(self, i: int) -> list[str]:
            return [sys.executable, "-c", "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                    "time.sleep(60)"]

    for kind, expect, code in ((Mute, "did not start within 0 s", -signal.SIGTERM),
                               (Closer, "stopped listening 0 s ago", -signal.SIGTERM),
                               (Deaf, "did not start within 0 s", -signal.SIGKILL)):
        w = kind(1, ["app.py"])
        w.go = tmp_path / "go"

        async def watch(w=w, kind=kind):
            w.start(0)
            first = w.runs[0].proc
            if kind is Closer:
                w.wait_ready(timeout=60)
                w.go.touch()  # now close the socket
            task = asyncio.create_task(w.supervise(every=0.05))
            stopped = await until(lambda: first.poll() is not None)
            task.cancel()
            w.stop()
            assert stopped, "the watch did not stop it"  # not w.stop() above (review: that passed too)
            return first.returncode

        assert run(watch()) == code  # told to stop first (its own clean-up); killed if it will not
        assert f"App server 1 {expect}; stopping it." in capsys.readouterr().err


def test_the_watch_goes_on_after_an_error_in_one_step(monkeypatch, capsys) -> None:
    """Review finding: an error the watch did not expect ended it, and no worker was started again."""
    w = Sleepers(1, ["app.py"])
    seen = []

    def flaky(i, now):
        seen.append(i)
        if len(seen) == 1:
            raise ValueError("a surprise")

    monkeypatch.setattr(w, "_watch", flaky)

    async def watch():
        task = asyncio.create_task(w.supervise(every=0.02))
        assert await until(lambda: len(seen) > 3)  # it looked again after the error
        assert not task.done()
        task.cancel()

    run(watch())
    assert len(seen) > 3 and "Watching app server 1 failed: ValueError('a surprise')." in capsys.readouterr().err


def test_ports_are_distinct_even_when_the_os_repeats_one(monkeypatch) -> None:
    handed = iter([5000, 5000, 5001])

    class Stub:
        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def bind(self, address):
            pass

        def getsockname(self):
            return ("127.0.0.1", next(handed))

    monkeypatch.setattr(workers.socket, "socket", Stub)
    assert workers.free_port([5000]) == 5001


@pytest.mark.parametrize("host", ["", "::", "0.0.0.0", "127.0.0.1"])
def test_the_front_takes_ipv4_clients_on_every_interface_as_one_server_does(host: str) -> None:
    """Review finding: "::" listened on IPv6 only, where one Streamlit server takes IPv4 too."""
    if host == "::" and not socket.has_dualstack_ipv6():
        pytest.skip("no dual-stack IPv6 here")
    with workers.bind(host, 0) as sock:
        socket.create_connection(("127.0.0.1", sock.getsockname()[1]), timeout=5).close()


def test_ctrl_c_while_the_servers_start_stops_them_quietly(monkeypatch) -> None:
    stopped = []
    monkeypatch.setattr(Workers, "start", lambda self, i: None)
    monkeypatch.setattr(Workers, "stop", lambda self, grace=10.0: stopped.append(True))

    def interrupted(self, timeout=0):
        raise KeyboardInterrupt

    monkeypatch.setattr(Workers, "wait_ready", interrupted)
    port = workers.free_port()
    assert workers.serve(["app.py", "--server.address", "127.0.0.1", "--server.port", str(port)], 2) == 130
    assert stopped == [True]
    workers.bind("127.0.0.1", port).close()  # its port is free again


def test_waiting_workers_share_one_read_of_the_listening_sockets_a_tick(monkeypatch) -> None:
    """Review finding: /proc/net/tcp (about 7 ms) was read once per waiting worker per tick."""
    reads, ticks, sleep = [], [], time.sleep
    monkeypatch.setattr(workers, "listening", lambda real=workers.listening: reads.append(1) or real())
    # workers' own sleep, not time.sleep: another thread of this process that sleeps would add ticks
    monkeypatch.setattr(workers, "_sleep", lambda s: ticks.append(s) or sleep(s))
    w = started(3)
    try:
        assert all(w.ready(i) for i in range(3)) and len(reads) == len(ticks) > 0
    finally:
        w.stop()


DEAF_FRONT = """
import signal, sys
from ui import workers

# Ctrl-C as in a terminal, whatever the harness passed on: a background job of a non-interactive shell
# (how a CI script may start the suite) inherits SIGINT ignored, and Python then leaves it ignored
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

# workers that never listen and ignore SIGTERM, each leaving a mark in the folder sys.argv[2] when it has
# started and when it is told to stop, so that the test waits for states, not for times (a loaded CI machine)
DEAF = (
    "import os, signal, sys, time\\n"
    "d = sys.argv[1]\\n"
    "def term(*_):\\n"
    "    open(os.path.join(d, f'term-{os.getpid()}'), 'w').close()\\n"
    "signal.signal(signal.SIGTERM, term)\\n"
    "os.close(2)\\n"
    "open(os.path.join(d, f'ready-{os.getpid()}'), 'w').close()\\n"
    "time.sleep(60)"
)
workers.Workers.command = lambda self, i: [sys.executable, "-c", DEAF, sys.argv[2]]
sys.exit(workers.serve(["app.py", "--server.address", "127.0.0.1", "--server.port", sys.argv[1]], 2))
"""


INTERRUPTED_FRONT = """
import os, signal, sys
from ui import workers

signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
workers.Workers.command = lambda self, i: [sys.executable, "-c", "import time; time.sleep(60)"]
made = []
real_init, real_run = workers.Workers.__init__, workers.Run


def init(self, *a, **k):
    real_init(self, *a, **k)
    made.append(self)


def run_interrupted(proc, started):  # the Ctrl-C lands after the second fork and exec, before the record
    if sum(r is not None for r in made[0].runs) == 1:
        os.kill(os.getpid(), signal.SIGINT)
    return real_run(proc, started)


workers.Workers.__init__, workers.Run = init, run_interrupted
code = workers.serve(["app.py", "--server.address", "127.0.0.1", "--server.port", sys.argv[1]], 2)
# every worker started is recorded, and the stop saw it end
print([r is not None and r.proc.poll() is not None for r in made[0].runs])
sys.exit(code)
"""


def test_a_ctrl_c_while_a_worker_starts_stops_that_worker_too() -> None:
    """A Ctrl-C that lands while the front forks and records a worker is held back until the worker is
    recorded, so the stop that follows stops every worker (before: the Ctrl-C raised inside that start, and
    the worker ran on unrecorded until the parent-death signal once the front had gone)."""
    proc = subprocess.run([sys.executable, "-c", INTERRUPTED_FRONT, str(workers.free_port())],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (130, ""), proc.stderr
    assert proc.stdout.splitlines()[-1] == "[True, True]", proc.stdout


def test_a_worker_started_while_ctrl_c_is_held_back_gets_ctrl_c_again() -> None:
    """The front holds Ctrl-C back while it starts a worker; the child unblocks it before exec (a blocked
    signal stays blocked across exec), so a worker takes Ctrl-C as any server does."""
    probe = "import signal; print(sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])))"
    with workers._sigint_deferred():
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             preexec_fn=workers._pdeathsig()).stdout
        held = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout
    assert int(signal.SIGINT) not in eval(out) and int(signal.SIGINT) in eval(held)  # noqa: S307 - a list of ints
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # and the front's mask restored


def _wait(cond, proc: subprocess.Popen, timeout: float = 60.0) -> None:  # noqa: ANN001 - a predicate
    """Poll ``cond`` until true (a deadline, not a fixed sleep: the machine may be loaded); on the deadline,
    fail with what the front said and whether it still runs."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"timed out; the front's exit code {proc.returncode}, stdout {out!r}, stderr {err!r}")
        time.sleep(0.02)


def test_a_second_ctrl_c_while_the_servers_stop_at_start_is_quiet_and_kills_them(tmp_path: Path) -> None:
    """Review finding: a second Ctrl-C while the servers stopped printed a traceback.  Workers that
    never listen and ignore SIGTERM (so that the first stop waits its 10 s): the second Ctrl-C ends it
    at once, with code 130 and nothing on stderr.  Each Ctrl-C is sent once the workers are in the state
    it is about (both started; both told to stop), as marks in ``tmp_path`` show."""
    proc = subprocess.Popen([sys.executable, "-c", DEAF_FRONT, str(workers.free_port()), str(tmp_path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def marks(kind: str) -> int:
        return sum(1 for f in tmp_path.iterdir() if f.name.startswith(kind))

    try:
        assert proc.stdout.readline() == "Starting 2 app servers ...\n"
        _wait(lambda: marks("ready-") == 2, proc)  # both workers started
        proc.send_signal(signal.SIGINT)
        _wait(lambda: marks("term-") == 2, proc)  # the front is stopping them: SIGTERM, ignored
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=8)  # before the first stop's 10 s
        assert (proc.returncode, err) == (130, "")
    finally:
        proc.kill()
        proc.wait()
