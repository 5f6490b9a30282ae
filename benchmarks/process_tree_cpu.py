"""CPU of a command's whole process tree: ``python benchmarks/process_tree_cpu.py -- CMD ...``.

``/usr/bin/time`` counts only the children a process waits for; chromium's processes (reparented
when Playwright's driver exits) and the Spark JVM are missed, so ``./test``'s CPU reads far too low.
This runs ``CMD``, reads ``/proc`` every 0.2 s, follows every descendant (also after it is
reparented) and sums each process's last user + system time, by kind of process (chromium, the
Streamlit servers, pytest, the rest).  Processes that live under 0.2 s are missed, and each
process's last < 0.2 s; both are small next to a test run.  Linux only.

Example (benchmarks/results/test_suite_profile.md, 2026-11-29 19:34)::

    python benchmarks/process_tree_cpu.py -- python -m pytest -n 0 tests/e2e
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")
KINDS = (("chrom", "chromium"), ("streamlit", "Streamlit servers"), ("ui.serve", "Streamlit servers"),
         ("playwright", "Playwright's driver"), ("pytest", "pytest"), ("java", "Java (Spark)"))


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(parent pid, user + system ticks, start time) of ``pid``, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    fields = s[s.rindex(")") + 2:].split()
    return int(fields[1]), int(fields[11]) + int(fields[12]), fields[19]


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            return f.read().replace("\0", " ")
    except OSError:
        return ""


def _kind(command: str) -> str:
    return next((name for key, name in KINDS if key in command), "other (Python children, JVM, CLI)")


def run(cmd: list[str], interval: float = 0.2) -> tuple[int, float, dict[str, float]]:
    """Run ``cmd``; return its exit status, wall seconds and CPU seconds by kind of process."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd)
    seen: dict[tuple[int, str], list] = {}  # (pid, start) -> [ticks, command as last read]
    while True:
        stats = {int(d): st for d in os.listdir("/proc") if d.isdigit() and (st := _stat(int(d)))}
        live = {pid for pid, _ in seen} | {proc.pid}
        grown = True
        while grown:  # descendants of the tree, however deep
            new = {pid for pid, st in stats.items() if pid not in live and st[0] in live}
            live |= new
            grown = bool(new)
        for pid in live & stats.keys():
            _, ticks, start = stats[pid]
            entry = seen.setdefault((pid, start), [0, ""])
            entry[0] = ticks
            entry[1] = _command(pid) or entry[1]  # the last command line (a script may exec java)
        if proc.poll() is not None:
            break
        time.sleep(interval)
    by_kind: dict[str, float] = collections.Counter()
    for ticks, command in seen.values():
        by_kind[_kind(command)] += ticks / TICK
    return proc.returncode, time.monotonic() - t0, dict(by_kind)


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print(__doc__)
        return 2
    load = open("/proc/loadavg").read().split()[:3]
    rc, wall, by_kind = run(argv[argv.index("--") + 1:])
    print(f"exit {rc}, wall {wall:.1f} s, CPU {sum(by_kind.values()):.1f} s (process tree), load average "
          f"{' '.join(load)} -> {' '.join(open('/proc/loadavg').read().split()[:3])}")
    for kind, cpu in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"  {kind}: {cpu:.1f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
