"""Speed of the two DAWA variants against building the frequency matrix (the speed rule).

The data of ``benchmarks/htf_speed.py``: 3.5 million synthetic points in four Gaussian clusters
(σ = 20, 50, 100, 50 cells, fixed seed) over the HTF paper's Los Angeles box on a 1024 x 1024 grid.
Times, best of ``--repeats``, with the secure noise source:

* building the frequency matrix with numpy (``dpcore.data.domain.aggregate_points``);
* ``dawa`` (aligned buckets, per-level budgets) and ``dawa_free`` (free bucket starts, per-node
  budgets; Li, Hay, Miklau & Wang, PVLDB 2014) at their defaults, plan and release (the plan is
  part of a release: the finest partition's workload design), on 1,024² and on 512².

The rule: a release takes at most 3x the aggregation.  Writes benchmarks/results/dawa_speed.md::

    nice -n 19 .venv/bin/python benchmarks/dawa_speed.py
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.htf_speed import CENTRES, LA, N_POINTS, SEED, SIDE, SIGMAS, WEIGHTS  # noqa: E402
from dpcore import catalog  # noqa: E402
from dpcore.data.domain import Grid, aggregate_points  # noqa: E402
from dpcore.data.synthetic import gaussian_clusters  # noqa: E402
from dpcore.errors import ParameterError  # noqa: E402
from dpcore.points.unit import points_unit  # noqa: E402
from dpcore.privacy.noise import secure_source  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "dawa_speed.md"


def best_of(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--epsilons", default="0.1,1")
    ap.add_argument("--mechanisms", default="dawa,dawa_free")
    ap.add_argument("--out", default=str(RESULTS), help=f"results file (default {RESULTS.name})")
    a = ap.parse_args(argv)
    lon, lat = gaussian_clusters(N_POINTS, LA, sigma_cells=SIGMAS, centres=CENTRES, weights=WEIGHTS, seed=SEED)
    rows = []
    for side in (SIDE, SIDE // 2):
        grid = Grid(LA, side, side)
        t_agg, agg = best_of(lambda grid=grid: aggregate_points(lon, lat, grid), a.repeats)
        for name in a.mechanisms.split(","):
            mech = catalog.get("points", name)
            for eps in (float(e) for e in a.epsilons.split(",")):
                def run(mech=mech, eps=eps, grid=grid, agg=agg):
                    return mech.release(mech.plan(grid, eps, {}, unit=points_unit(agg.user_cap)), agg,
                                        secure_source()).inner
                try:
                    t, rel = best_of(run, a.repeats)
                except ParameterError as exc:
                    rows.append(f"| {side}² | {name} | {eps:g} | {t_agg:.3f} | refused: {exc} | | | |")
                else:
                    rows.append(f"| {side}² | {name} | {eps:g} | {t_agg:.3f} | {t:.3f} | {t / t_agg:.2f} | "
                                f"{rel.public['buckets']:,} | {int(rel.leaf.sum()):,} |")
                print(rows[-1], flush=True)
    text = "\n".join([
        "# DAWA release speed vs building the frequency matrix", "",
        f"- Date: {datetime.date.today()}; {os.cpu_count()} cores shared with other jobs (load average "
        f"{os.getloadavg()[0]:.1f} at the end), "
        f"{platform.machine()}, Python {platform.python_version()}",
        f"- Data: {N_POINTS:,} synthetic points, 4 Gaussian clusters (benchmarks/htf_speed.py), on "
        f"{SIDE} x {SIDE} (the speed rule's grid) and {SIDE // 2} x {SIDE // 2}.",
        f"- Times: best of {a.repeats}; plan + release, default parameters, secure noise.",
        f"- Command: `nice -n 19 .venv/bin/python benchmarks/dawa_speed.py {' '.join(argv or sys.argv[1:])}`",
        "- Bytecode compiled first (`python -m compileall dpcore`). The ratio is against the histogram alone, "
        "which is stricter than the rule's reading the file plus the histogram.", "",
        "| grid | mechanism | ε | aggregation (s) | release (s) | ratio | buckets | leaves |",
        "|---|---|---:|---:|---:|---:|---:|---:|", *rows, "", "Target: ratio <= 3.", ""])
    Path(a.out).write_text(text)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
