"""What ``./run --workers N`` costs: the front's CPU and every process's memory (issue 28 item 5).

Starts the app as ``./run --workers N`` does (benchmarks/map_draw.streamlit_server: a free port, a
budget database of its own), then walks ``--rounds`` rounds of ``--sessions`` protocol sessions at
once (benchmarks/session_protocol.walk: Data, Plan, Release page, the Release button on the demo
points) through the front.  Reads, from /proc, the user + system CPU seconds and the resident memory
(VmRSS) of the front and of each app server at the start and after the rounds.  "At start" is once the
processes are idle (their CPU time still for 2 s, :func:`idle`), not as soon as the servers are ready:
each server warms itself once it listens (ui/serve.py ``warm_up``, on by default with ``--workers``), so
the warm-up is included in the memory at start and not counted in the rounds' CPU.

Run from the repository root (after ``python -m compileall -q dpcore ui pages app.py``)::

    .venv/bin/python benchmarks/workers_cost.py --workers 2 --sessions 10 --rounds 2

It prints a markdown table and writes it at the head of benchmarks/results/workers_cost.md (the
file's dated ``##`` sections after it are kept).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import importlib.util
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import session_protocol  # noqa: E402
from map_draw import loadavg, streamlit_server  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "workers_cost.md"
TICKS = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            out += [int(c) for c in f.read().split()]
    return sorted(out)


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return kb / 1024


def _compiled() -> str:
    """Whether the app's bytecode was compiled beforehand (as the docstring asks), checked, not assumed."""
    root = Path(__file__).resolve().parent.parent
    done = all(Path(importlib.util.cache_from_source(str(root / f))).exists()
               for f in ("ui/front.py", "ui/workers.py", "dpcore/__init__.py", "app.py"))
    return "Bytecode compiled." if done else "Bytecode NOT compiled beforehand (run python -m compileall first)."


def idle(cpu: Callable[[], float], still: float = 2.0, limit: float = 120.0) -> float:
    """Wait until ``cpu()`` (CPU seconds) has not moved by 0.02 s for ``still`` seconds; its value now."""
    t_end = time.monotonic() + limit
    last, since = cpu(), time.monotonic()
    while time.monotonic() < t_end:
        time.sleep(0.25)
        now = cpu()
        if now - last > 0.02:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= still:
            return now
    return cpu()


def _snapshot(pids: dict[str, int]) -> dict[str, tuple[float, float]]:
    return {name: (_cpu(pid), _rss_mb(pid)) for name, pid in pids.items()}


async def _rounds(base: str, sessions: int, rounds: int) -> int:
    steps = 0
    for _ in range(rounds):
        walks = await asyncio.gather(*[session_protocol.walk(base) for _ in range(sessions)])
        steps += sum(len(w) for w in walks)
    return steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(RESULTS))
    a = ap.parse_args()
    load_before = loadavg()
    started: list = []
    with streamlit_server(workers=a.workers, started=started) as (base, _log):
        front = started[0].pid
        pids = {"front": front, **{f"app server {i + 1}": p for i, p in enumerate(_children(front))}}
        idle(lambda: sum(_cpu(p) for p in pids.values()))  # the servers' warm-up has finished
        before = _snapshot(pids)
        steps = asyncio.run(_rounds(base, a.sessions, a.rounds))
        after = _snapshot(pids)
    rows = [f"| {name} | {before[name][1]:.0f} | {after[name][1]:.0f} | {after[name][0] - before[name][0]:.2f} |"
            for name in pids]
    table = "\n".join(["| process | memory at start (MB) | memory after (MB) | CPU during the rounds (s) |",
                       "|---|---:|---:|---:|", *rows])
    md = f"""# What `./run --workers {a.workers}` costs

- Date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M')} UTC
- Machine: {os.cpu_count()} cores, Python {platform.python_version()}. {_compiled()}
- Load average (1 / 5 / 15 min) before: {load_before}; after: {loadavg()}.
- Command: `python benchmarks/workers_cost.py --workers {a.workers} --sessions {a.sessions} --rounds {a.rounds}`:
  {a.rounds} rounds of {a.sessions} protocol sessions at once through the front ({steps} steps: Data, Plan,
  Release page and the Release button on the demo points). "At start": the servers ready and idle (their
  warm-up done), before any session. CPU: user + system seconds during the rounds (/proc/PID/stat); memory: VmRSS.

{table}
"""
    out = Path(a.out)
    old = out.read_text() if out.exists() else ""
    later = old[old.index("\n## "):] if "\n## " in old else ""  # dated sections added by hand stay
    out.write_text(md + later)
    print(md)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
