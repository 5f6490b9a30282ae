"""A year of daily releases against one release over the whole year: time and peak memory.

Data
    ``--points`` synthetic points (default 3,500,000, the size of six months of the Uber NYC
    pickups) in the Uber bounds -74.06,40.56,-73.70,40.92, normal around Manhattan (SD 0.04°,
    clipped to the bounds), with timestamps uniform over 2014 (ISO text, seeded ``--seed``),
    written once as CSV.
Releases (each in a fresh subprocess, through the command line, end to end: reading, grouping,
releasing, writing every file)
    * one: ``release points --grid 256,256 --mechanism ug --epsilon 0.1`` over all the points;
    * series: the same with ``--time-col t --period day --time-range 2014-01-01,2014-12-31``:
      365 releases, each charged to its day's budget and stored, plus series.csv/series.json;
    * again: the series request repeated (every day re-served from the budget database).
Measured
    wall time (``time.perf_counter`` around the subprocess), CPU time (user + system of the
    subprocess, ``getrusage(RUSAGE_CHILDREN)``: what a shared, loaded machine does not inflate as
    much as the wall time) and peak resident memory (``ru_maxrss`` of the subprocess).  Target
    (issue 24): series ≤ 3 × one.

Run from the repository root::

    .venv/bin/python benchmarks/series.py                 # 3.5 M points, results/series.{csv,md}
    .venv/bin/python benchmarks/series.py --points 200000 --quick   # results/series_quick.*
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
BOUNDS = "-74.06,40.56,-73.70,40.92"
WRAPPER = ("import sys, resource; from dpcore.cli import main; rc = main(sys.argv[1:]); "
           "print('MAXRSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); sys.exit(rc)")


def make_points(path: Path, n: int, seed: int) -> None:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rng = np.random.default_rng(seed)
    lon = np.clip(rng.normal(-73.97, 0.04, n), -74.0599, -73.7001)
    lat = np.clip(rng.normal(40.75, 0.04, n), 40.5601, 40.9199)
    start = np.datetime64("2014-01-01T00:00:00")
    t = start + rng.integers(0, 365 * 86400, n).astype("timedelta64[s]")
    table = pa.table({"t": pa.array(np.datetime_as_string(t, unit="s")), "lat": lat.round(5), "lon": lon.round(5)})
    pacsv.write_csv(table, path)


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(argv: list[str], db: Path) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak MB) of ``python -m dpcore ARGV`` in a fresh process."""
    env = {"DPCORE_LEDGER_DB": str(db), "PATH": "/usr/bin:/bin"}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    t0, c0 = time.perf_counter(), _child_cpu()
    proc = subprocess.run([sys.executable, "-c", WRAPPER, *argv], cwd=ROOT, env=env, capture_output=True, text=True)
    seconds, cpu = time.perf_counter() - t0, _child_cpu() - c0
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(argv)}\n{proc.stderr}")
    rss = next(int(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("MAXRSS"))
    return seconds, cpu, rss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--points", type=int, default=3_500_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="write results/series_quick.* instead")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        src = tmpd / "points.csv"
        make_points(src, args.points, args.seed)
        base = ["release", "points", "--input", str(src), f"--bounds={BOUNDS}", "--grid", "256,256",
                "--mechanism", "ug", "--epsilon", "0.1"]
        series = [*base, "--time-col", "t", "--period", "day", "--time-range", "2014-01-01,2014-12-31",
                  "--out", str(tmpd / "S")]
        rows = []
        for name, argv in (("one release over the year", [*base, "--out", str(tmpd / "one")]),
                           ("365 daily releases (series)", series), ("the series again (re-served)", series)):
            seconds, cpu, mb = run(argv, tmpd / "ledger.sqlite")
            rows.append({"run": name, "points": args.points, "seconds": round(seconds, 1),
                         "cpu_seconds": round(cpu, 1), "peak_mb": round(mb)})
            print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    ratio = df["seconds"].iloc[1] / df["seconds"].iloc[0]
    cpu_ratio = df["cpu_seconds"].iloc[1] / df["cpu_seconds"].iloc[0]
    load = os.getloadavg()[0]
    stem = "series_quick" if args.quick else "series"
    RESULTS.mkdir(parents=True, exist_ok=True)
    df.to_csv(RESULTS / f"{stem}.csv", index=False)
    md = [f"# A year of daily releases, {args.points:,} points, 256 x 256 grid, UG, ε = 0.1 per day", "",
          "| run | seconds | CPU seconds | peak MB |", "|---|---|---|---|"]
    md += [f"| {r.run} | {r.seconds} | {r.cpu_seconds} | {r.peak_mb} |" for r in df.itertuples()]
    md += ["", f"Series / one release: {ratio:.2f} × wall, {cpu_ratio:.2f} × CPU (target ≤ 3 ×).",
           f"Machine: {os.cpu_count()} cores, load average {load:.1f} at the end (wall times grow with the load; "
           "CPU times much less).", ""]
    (RESULTS / f"{stem}.md").write_text("\n".join(md), "utf-8")
    print("\n".join(md))


if __name__ == "__main__":
    main()
