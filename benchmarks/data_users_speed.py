"""Speed of the data users' files of an O/D release (measurements.csv, design.json, estimates.csv).

The made-up O/D demo (:func:`dpcore.data.synthetic.demo_od`: 28,377 pairs, region → district →
zone), released by InfTDA and TopDown L2 at ρ = 0.25 (fixed seed); times, median of 5, each run on
a fresh copy of the release (``dataclasses.replace``: :mod:`dpcore.flows.data_users` keeps a
release's measured tree and pack per release object, so a copy makes them again, as a new release
does):

* the release itself;
* ``od_data_user_files`` (the pack, design.json, measurements.csv, the reader's measurements
  and estimates.csv; ~80k measured nodes for InfTDA).

The target is ``od_data_user_files`` on the InfTDA demo in at most 0.25 s.  Run from the
repository root::

    .venv/bin/python benchmarks/data_users_speed.py

It prints a markdown table and writes it to benchmarks/results/data_users_speed.md.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dpcore import catalog  # noqa: E402
from dpcore.data import synthetic  # noqa: E402
from dpcore.data.hierarchy import Hierarchy  # noqa: E402
from dpcore.flows import data_users as du  # noqa: E402
from dpcore.flows.counts import ODCounts  # noqa: E402
from dpcore.privacy import budget  # noqa: E402
from dpcore.privacy.noise import NoiseSource  # noqa: E402

MECHANISMS = ("inftda", "tda_l2")
RHO, SEED, REPEATS = 0.25, 1, 5
RESULTS = ROOT / "benchmarks" / "results" / "data_users_speed.md"


def median_of(fn: Callable[[int], Any]) -> tuple[float, float, Any]:
    """Median wall time and median CPU time (this process: less sensitive to a busy machine) of
    ``fn(i)`` for runs ``i = 0 .. REPEATS - 1``."""
    wall, cpu, out = [], [], None
    for i in range(REPEATS):
        t, c = time.perf_counter(), time.process_time()
        out = fn(i)
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), statistics.median(cpu), out


def main() -> None:
    areas, flows, _ = synthetic.demo_od()
    h = Hierarchy.from_frame(areas, ["region", "district", "zone"], source="area list")
    counts = ODCounts.from_frame(flows, h, origin="origin", destination="destination", count="count",
                                 fingerprint=False)
    rows = []
    for name in MECHANISMS:
        mech = catalog.get("od", name)
        t_rel, _, rel = median_of(lambda _, mech=mech: mech.release_counts(counts, budget.zcdp(RHO), NoiseSource(SEED)))
        fresh = [dataclasses.replace(rel) for _ in range(REPEATS)]  # nothing kept for them yet
        t_files, c_files, files = median_of(lambda i, fresh=fresh: du.od_data_user_files(fresh[i]))
        pack = du.od_pack(rel)
        rows.append((name, len(pack.value), t_rel, t_files, c_files, sum(map(len, files.values())) / 1e6))
        print(f"{name}: release {t_rel:.3f} s, files {t_files:.3f} s ({c_files:.3f} s CPU)", file=sys.stderr)
    lines = [
        "# Data users' files of the O/D demo: time to write them",
        "",
        f"- Date: {datetime.date.today().isoformat()}",
        f"- Machine: {os.cpu_count()} cores, {platform.machine()}, {platform.system()}, "
        f"Python {platform.python_version()}",
        f"- Demo: {len(flows):,} pairs; ρ = {RHO}; seed {SEED}; median of {REPEATS}; load average "
        f"{os.getloadavg()[0]:.1f} when written",
        "",
        "| mechanism | measurements | release (s) | od_data_user_files (s) | its CPU time (s) | files (MB) |",
        "|---|---:|---:|---:|---:|---:|",
        *(f"| {n} | {m:,} | {a:.3f} | {b:.3f} | {c:.3f} | {mb:.1f} |" for n, m, a, b, c, mb in rows),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.write_text(text)


if __name__ == "__main__":
    main()
