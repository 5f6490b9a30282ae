"""Server CPU seconds of each step of the demo walk, one session at a time (issue 28 item 5).

On a 2-core machine ten sessions clicking at once stay within 2x of one session only if each step's
server CPU is small: the server runs one script at a time on the CPU (Python's GIL).  This starts
one app server (``streamlit run app.py``, a budget database of its own, at normal priority) and walks
the benchmark's path (benchmarks/session_protocol.py: Data -> Plan -> Release page -> the Release
button) ``--walks`` times, one fresh session after another.  For each step it reads the server
process's CPU time (user + system, /proc/PID/stat) before the request and after the run that
answers it has finished: the server's whole cost of the step (script thread, serialising and
sending the messages), which a loaded machine stretches much less than wall time.

``--profile DIR`` runs the server under a wrapper that profiles every script run with cProfile in
the script thread (its CPU time, not wall time) and writes ``DIR/run-NNN.prof`` (read with ``python -m pstats``); the CPU times
are then inflated by the profiler, so measure without it.

Run from the repository root (after ``python -m compileall dpcore ui pages``)::

    python benchmarks/step_cpu.py --walks 3
    python benchmarks/step_cpu.py --walks 1 --profile /tmp/prof

It prints a line per walk and the medians (nothing is written).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import session_protocol  # noqa: E402
from map_draw import loadavg, streamlit_server  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
STEPS = ("data", "plan", "release page", "release")
_PROFILED = """
import cProfile, itertools, os, sys, runpy, time
from streamlit.runtime.scriptrunner import script_runner as _sr
_real, _n, _dir = _sr.ScriptRunner._run_script, itertools.count(), os.environ["STEP_CPU_PROFILE"]
def _run_script(self, rerun_data):
    p = cProfile.Profile(time.thread_time)  # CPU of the script thread, not wall time
    p.enable()
    try:
        return _real(self, rerun_data)
    finally:
        p.disable()
        p.dump_stats(os.path.join(_dir, f"run-{next(_n):03d}.prof"))
_sr.ScriptRunner._run_script = _run_script
sys.argv = ["streamlit"] + sys.argv[1:]
runpy.run_module("streamlit", run_name="__main__")
"""


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def server(profile: str | None):
    """The app's server (map_draw.streamlit_server), under the profiling wrapper if ``profile``;
    yields (base URL, server pid)."""
    started: list = []
    if profile:
        os.makedirs(profile, exist_ok=True)
    launcher = [sys.executable, "-c", _PROFILED] if profile else None
    with streamlit_server(launcher, {"STEP_CPU_PROFILE": profile} if profile else None, started) as (base, _log):
        yield base, started[0].pid


async def walk(base: str, pid: int) -> dict[str, tuple[float, float]]:
    """One session's walk: step -> (wall s, server CPU s)."""
    out: dict[str, tuple[float, float]] = {}

    async def step(name: str, coro) -> None:
        c0 = cpu_seconds(pid)
        wall = await coro
        await asyncio.sleep(0.3)  # what the server does after the run's last message (sending, cleanup)
        out[name] = (wall, cpu_seconds(pid) - c0)

    async with session_protocol.ProtocolSession(base) as s:
        await step("data", s.run(until="Rows read"))
        await step("plan", s.run(page="plan", until="Plan"))
        await step("release page", s.run(page="release", until="Release with"))
        label = next(b for b in s.buttons if b.startswith("Release with"))
        await step("release", s.run(page="release", trigger=label, until="Released "))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--walks", type=int, default=3)
    ap.add_argument("--profile", default=None, help="directory for one .prof per script run")
    args = ap.parse_args()
    print(f"load average before: {loadavg()}")
    walks = []
    with server(args.profile) as (base, pid):
        for i in range(args.walks):
            w = asyncio.run(walk(base, pid))
            walks.append(w)
            print(f"walk {i + 1}: " + ", ".join(f"{k} {v[1]:.2f} CPU-s ({v[0]:.2f} s)" for k, v in w.items()))
    print(f"load average after: {loadavg()}")
    print("| step | server CPU-s, median | wall s, median |\n|---|---:|---:|")
    for k in STEPS:
        cpu = statistics.median(w[k][1] for w in walks)
        wall = statistics.median(w[k][0] for w in walks)
        print(f"| {k} | {cpu:.2f} | {wall:.2f} |")


if __name__ == "__main__":
    main()
