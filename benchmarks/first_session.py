"""The server CPU of the first session on each app server of ``./run --workers N``, with and without the
servers' warm-up (ui/serve.py ``warm_up``), interleaved.

Each start: the app as ``./run --workers N`` starts it (benchmarks/map_draw.streamlit_server: a free
port, a budget database of its own), with ``DPCORE_WARM_UP`` 1 or 0.  Once the servers are ready, it
waits until they are idle (workers_cost.idle: their CPU time still for 2 s: the warm-up, when on, has finished) and reads
what they spent since they were ready; then one protocol session through the front
(benchmarks/step_cpu.walk: Data, Plan, Release page, the Release button on the demo points) and then
a second one, reading the CPU seconds of all the servers per step (user + system, /proc/PID/stat).  It
also says whether the warm-up opened the shared budget database (it must not: its file would exist).

Run from the repository root (after ``python -m compileall -q dpcore ui pages app.py``)::

    .venv/bin/python benchmarks/first_session.py --workers 2 --starts 3

It prints a line per start and a markdown table (nothing is written).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import step_cpu  # noqa: E402
from map_draw import loadavg, streamlit_server  # noqa: E402
from workers_cost import _children, _cpu, idle  # noqa: E402


class AllServers:
    """The app servers behind a front, as one "pid" for step_cpu.walk (it reads ``cpu_seconds(pid)``)."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids

    def cpu(self) -> float:
        return sum(_cpu(p) for p in self.pids)


def one_start(workers: int, warm: bool) -> dict[str, float | bool]:
    started: list = []
    with streamlit_server(env_extra={"DPCORE_WARM_UP": "1" if warm else "0"}, started=started,
                          workers=workers) as (base, _log):
        front = started[0].pid
        db = _environ(front)["DPCORE_LEDGER_DB"]  # the budget database of its own (map_draw)
        servers = AllServers(_children(front))
        ready = servers.cpu()
        at_idle = idle(servers.cpu)
        out: dict[str, float | bool] = {"from ready to idle": at_idle - ready, "since their start, at idle": at_idle,
                                        "ledger opened": os.path.exists(db)}
        real = step_cpu.cpu_seconds
        step_cpu.cpu_seconds = lambda _pid: servers.cpu()
        try:
            for name in ("first", "second"):
                walk = asyncio.run(step_cpu.walk(base, 0))
                out |= {f"{name} session: {k}": v[1] for k, v in walk.items()}
        finally:
            step_cpu.cpu_seconds = real
    return out


def _environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        pairs = (item.decode().partition("=") for item in f.read().split(b"\0") if item)
    return {k: v for k, _, v in pairs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--starts", type=int, default=3, help="starts with the warm-up, and as many without")
    a = ap.parse_args()
    print(f"load average before: {loadavg()}")
    runs: dict[bool, list[dict]] = {False: [], True: []}
    for i in range(a.starts):
        for warm in (False, True):
            r = one_start(a.workers, warm)
            runs[warm].append(r)
            print(f"start {i + 1}, warm-up {'on' if warm else 'off'}: " + ", ".join(
                f"{k} {v:.2f}" if not isinstance(v, bool) else f"{k} {v}" for k, v in r.items()), flush=True)
    print(f"load average after: {loadavg()}")
    keys = [k for k in runs[True][0] if k != "ledger opened"]
    print("| server CPU-s (all servers), median | warm-up off | warm-up on |\n|---|---:|---:|")
    for k in keys:
        print(f"| {k} | {statistics.median(r[k] for r in runs[False]):.2f} "
              f"| {statistics.median(r[k] for r in runs[True]):.2f} |")
    print(f"shared budget database opened by the start: off {[r['ledger opened'] for r in runs[False]]}, "
          f"on {[r['ledger opened'] for r in runs[True]]}")


if __name__ == "__main__":
    main()
