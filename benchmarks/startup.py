"""Start-up time of the command line: ``python -m dpcore mechanisms`` against ``import numpy, pandas``.

Measured
    the wall time of each command in a fresh subprocess (``time.perf_counter`` around
    ``subprocess.run``, output discarded), the two commands alternating so that a slow spell of a
    shared machine hits both; one warm-up run of each first (file system cache), then ``--runs``
    timed runs of each.  The subprocesses may write bytecode (``PYTHONDONTWRITEBYTECODE`` is
    removed from their environment), as an installed or normally run dpcore does: numpy and pandas
    come compiled, and without the cache every run would also compile dpcore's sources.  Reported: median, min, max and the interquartile range, and the ratio of
    the medians (listing the mechanisms / importing numpy and pandas).
Target
    ratio at most 1.3: listing the mechanisms imports numpy and pandas (the mechanisms' metadata
    lives next to their code) but none of SciPy's optimisers, DuckDB, Spark, Plotly or GeoPandas,
    which load where they are used.  ``tests/unit/cli/test_cli.py`` checks that they stay out of
    ``sys.modules``; this benchmark is not a test (times depend on the machine).

Run from the repository root::

    .venv/bin/python benchmarks/startup.py            # 15 runs each, writes results/startup.md
    .venv/bin/python benchmarks/startup.py --runs 30
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TARGET = 1.3

COMMANDS = {
    "import numpy, pandas": [sys.executable, "-c", "import numpy, pandas"],
    "python -m dpcore mechanisms": [sys.executable, "-m", "dpcore", "mechanisms"],
}


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_once(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def measure(runs: int) -> dict[str, list[float]]:
    for argv in COMMANDS.values():  # warm-up: the file system cache, .pyc files
        run_once(argv)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(runs):
        for name, argv in COMMANDS.items():
            times[name].append(run_once(argv))
    return times


def summary(times: dict[str, list[float]]) -> tuple[list[dict[str, float | str]], float]:
    rows: list[dict[str, float | str]] = []
    for name, ts in times.items():
        q1, _, q3 = statistics.quantiles(ts, n=4)
        rows.append({"command": name, "median": statistics.median(ts), "min": min(ts), "max": max(ts),
                     "iqr": q3 - q1})
    base, cli = (float(r["median"]) for r in rows)
    return rows, cli / base


def table(rows: list[dict[str, float | str]]) -> str:
    lines = ["| command | median (s) | min (s) | max (s) | IQR (s) |", "|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| `{r['command']}` | {r['median']:.3f} | {r['min']:.3f} | {r['max']:.3f} | {r['iqr']:.3f} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=15, help="timed runs of each command (default 15)")
    ap.add_argument("--out", default=str(RESULTS / "startup.md"), help="Markdown report")
    args = ap.parse_args()
    if args.runs < 2:
        ap.error("--runs must be at least 2")

    rows, ratio = summary(measure(args.runs))
    verdict = "meets" if ratio <= TARGET else "MISSES"
    text = "\n".join([
        "# Start-up time of the command line",
        "",
        f"{args.runs} runs of each command in a fresh subprocess after one warm-up run, alternating, "
        "bytecode cached; "
        f"Python {platform.python_version()} on {platform.machine()}, {platform.system()}.",
        "",
        table(rows),
        "",
        f"Ratio of the medians (`python -m dpcore mechanisms` / `import numpy, pandas`): **{ratio:.2f}** "
        f"({verdict} the target of at most {TARGET}).",
        "",
        "Written by `benchmarks/startup.py`; the times depend on the machine and its load, the ratio much less.",
        "",
    ])
    print(table(rows))
    print(f"\nratio {ratio:.2f} (target <= {TARGET})")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, "utf-8")
    print(f"  wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
