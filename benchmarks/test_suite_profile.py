"""Where ``./test`` spends its time: reads the JSON-lines files that ``DPCORE_TEST_PROFILE=DIR`` makes the
test run write (tests/profile_plugin.py: one file per pytest process) and prints a Markdown summary.

Measured
    per worker: the time from its start to the end of collection (imports of every test module),
    the sum of its tests' phases (setup + call + teardown), its first and last test, and its idle
    time at the end (the wall time of the run minus its last test's end); per file: the sum of its
    tests' time and the worker that ran it; the slowest tests; the set-up phases over 2 s (Spark
    sessions, Streamlit servers, browsers, large fixtures).  Times are wall-clock, so they grow
    with whatever else the machine runs: compare runs made under the same load.

Run from the repository root::

    DPCORE_TEST_PROFILE=/tmp/prof ./test
    .venv/bin/python benchmarks/test_suite_profile.py /tmp/prof            # prints Markdown
    .venv/bin/python benchmarks/test_suite_profile.py /tmp/prof --top 40
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def load(folder: Path) -> dict[str, dict]:
    """The profile of each pytest process in ``folder``, by worker id (``controller`` for the main
    one): ``started``, ``collected``, ``finished`` (the last line written, for a run cut short) and
    ``tests``, the phases."""
    out = {}
    for p in sorted(folder.glob("*.jsonl")):
        lines = [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
        by = {d["event"]: d["t"] for d in lines}
        out[p.stem] = {"started": by["start"], "collected": by.get("collected"),
                       "finished": max(d["t"] for d in lines),
                       "tests": [d for d in lines if d["event"] == "phase"],
                       "cpu": {(d["nodeid"], d["when"]): d["cpu"] for d in lines if d["event"] == "cpu"}}
    return out


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _test(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


def summary(profiles: dict[str, dict], top: int = 25) -> str:
    """Markdown tables: workers, files, tests, set-ups."""
    ctl = profiles.get("controller")
    workers = {k: v for k, v in profiles.items() if k != "controller"} or profiles
    t0 = min(v["started"] for v in profiles.values())
    t_end = max(v["finished"] for v in profiles.values())
    out = [f"Wall time of the pytest run (first process start to last process end): {t_end - t0:.0f} s"]
    if ctl and ctl.get("collected"):
        out.append(f"(controller: collection done {ctl['collected'] - ctl['started']:.1f} s after its start)")
    out += ["", "| worker | collection (s) | tests | sum of test time (s) | its CPU (s) | first test at (s) "
            "| last test ends at (s) | idle at end (s) |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    per_file: dict[str, float] = defaultdict(float)
    cpu_file: dict[str, float] = defaultdict(float)
    cpu_test: dict[str, float] = defaultdict(float)
    file_worker: dict[str, str] = {}
    per_test: dict[str, float] = defaultdict(float)
    per_func: dict[str, float] = defaultdict(float)
    setups: list[tuple[float, str]] = []
    for wid, prof in sorted(workers.items()):
        tests = prof["tests"]
        busy = sum(t["duration"] for t in tests)
        ids = {t["nodeid"] for t in tests}
        first = min((t["start"] for t in tests), default=prof["started"])
        last = max((t["stop"] for t in tests), default=prof["started"])
        coll = (prof["collected"] or prof["started"]) - prof["started"]
        cpu = prof.get("cpu", {})
        out.append(f"| {wid} | {coll:.1f} | {len(ids)} | {busy:.0f} | {sum(cpu.values()):.0f} | {first - t0:.0f} "
                   f"| {last - t0:.0f} | {t_end - last:.0f} |")
        for (nodeid, _when), c in cpu.items():
            cpu_file[_file(nodeid)] += c
            cpu_test[nodeid] += c
        for t in tests:
            per_file[_file(t["nodeid"])] += t["duration"]
            file_worker[_file(t["nodeid"])] = wid
            per_test[t["nodeid"]] += t["duration"]
            per_func[_test(t["nodeid"])] += t["duration"]
            if t["when"] == "setup" and t["duration"] > 2:
                setups.append((t["duration"], t["nodeid"]))
    total = sum(per_file.values())
    out += ["", f"Sum of all test time: {total:.0f} s (CPU of the pytest processes: {sum(cpu_file.values()):.0f} s) "
            f"over {len(per_test)} tests and {len(per_file)} files.", "",
            f"Slowest {top} files:", "", "| file | worker | time (s) | share | CPU (s) |", "|---|---|---:|---:|---:|"]
    for f, s in sorted(per_file.items(), key=lambda kv: -kv[1])[:top]:
        out.append(f"| {f} | {file_worker[f]} | {s:.1f} | {100 * s / total:.1f} % | {cpu_file[f]:.1f} |")
    out += ["", f"Slowest {top} tests (setup + call + teardown):", "", "| test | time (s) | CPU (s) |", "|---|---:|---:|"]
    for n, s in sorted(per_test.items(), key=lambda kv: -kv[1])[:top]:
        out.append(f"| {n} | {s:.1f} | {cpu_test[n]:.1f} |")
    out += ["", f"Slowest {top} test functions (all parameters together):", "", "| test function | time (s) |", "|---|---:|"]
    for n, s in sorted(per_func.items(), key=lambda kv: -kv[1])[:top]:
        out.append(f"| {n} | {s:.1f} |")
    out += ["", "Set-up phases over 2 s (fixtures: Spark, servers, browsers, data):", "", "| test | setup (s) |", "|---|---:|"]
    for s, n in sorted(setups, reverse=True)[:top]:
        out.append(f"| {n} | {s:.1f} |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path, help="the DPCORE_TEST_PROFILE folder of a test run")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    print(summary(load(args.folder), args.top), end="")


if __name__ == "__main__":
    main()
