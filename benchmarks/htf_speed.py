"""Speed of the HTF and DAWA releases against building the frequency matrix.

3.5 million synthetic points (the size of the HTF paper's Los Angeles data, spec §5.1) in
four Gaussian clusters (σ = 20, 50, 100 and 50 cells of the 1024 grid, the paper's
sparsity levels; fixed seed) over the spec's 70 km LA box, on a 1024 x 1024 grid.  Times,
best of 3:

* building the frequency matrix with numpy (``dpcore.data.domain.aggregate_points``);
* the HTF release with the paper's settings (``PAPER_PRESET``: ε_height = 1e-4,
  ε'_prt = 5e-4 per level, T = 3, c0 = 10, θ = 50, κ = 5) at ε = 0.1 and 0.5, with the
  secure noise source (os.urandom).

The target is a release time of at most 3x the aggregation time.  Run from the repository
root::

    .venv/bin/python benchmarks/htf_speed.py

It prints a markdown table and writes it to benchmarks/results/htf_speed.md.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from dpcore.data.domain import Bounds, Grid, aggregate_points  # noqa: E402
from dpcore.data.synthetic import gaussian_clusters  # noqa: E402
from dpcore.points.mechanisms.dawa import DAWA  # noqa: E402
from dpcore.points.mechanisms.htf import HTF, PAPER_PRESET  # noqa: E402
from dpcore.points.unit import points_unit  # noqa: E402
from dpcore.privacy.noise import secure_source  # noqa: E402

N_POINTS = 3_500_000
SIDE = 1024
EPSILONS = (0.1, 0.5)
REPEATS = 3
SEED = 2021
#: the spec's LA extent (§5.1): a 70 km square centred at (34.05223, -118.24368)
LA = Bounds(-118.6228, 33.7367, -117.8646, 34.3678)
CENTRES = [(0.30, 0.35), (0.62, 0.58), (0.45, 0.80), (0.80, 0.20)]
SIGMAS = [20.0, 50.0, 100.0, 50.0]
WEIGHTS = [0.35, 0.30, 0.20, 0.15]
RESULTS = ROOT / "benchmarks" / "results" / "htf_speed.md"


def best_of(fn, repeats: int = REPEATS) -> tuple[float, object]:
    times = []
    out = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    grid = Grid(LA, SIDE, SIDE)
    lon, lat = gaussian_clusters(N_POINTS, LA, sigma_cells=SIGMAS, centres=CENTRES,
                                 weights=WEIGHTS, resolution=SIDE, seed=SEED)
    t_agg, agg = best_of(lambda: aggregate_points(lon, lat, grid))
    nonzero = int(np.count_nonzero(agg.counts))
    mech = HTF()
    src = secure_source()
    rows = []
    for eps in EPSILONS:
        t_rel, rel = best_of(lambda eps=eps: mech.release(mech.plan(agg.grid, eps, PAPER_PRESET, unit=points_unit(agg.user_cap)), agg, src).inner)
        rows.append((eps, t_rel, rel))
        print(f"eps={eps}: {t_rel:.3f} s", file=sys.stderr)

    lines = [
        "# HTF release speed vs building the frequency matrix",
        "",
        f"- Date: {datetime.date.today().isoformat()}",
        f"- Machine: {os.cpu_count()} cores, {platform.machine()}, {platform.system()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}",
        f"- Data: {N_POINTS:,} synthetic points, {len(CENTRES)} Gaussian clusters "
        f"(σ = {', '.join(f'{s:g}' for s in SIGMAS)} cells), seed {SEED}, on a {SIDE} x {SIDE} "
        f"grid over the spec's LA box; {nonzero:,} non-zero cells.",
        "- HTF: paper settings (`PAPER_PRESET`: ε_height = 1e-4, ε'_prt = 5e-4 per level, T = 3, "
        "c0 = 10, θ = 50, κ = 5), secure noise source (os.urandom).",
        f"- Times: best of {REPEATS}. Aggregation = `dpcore.data.domain.aggregate_points` (numpy).",
        "- Command: `.venv/bin/python benchmarks/htf_speed.py`",
        "",
        "| ε | aggregation (s) | HTF release (s) | ratio | height h | nodes | leaves |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for eps, t_rel, rel in rows:
        lines.append(
            f"| {eps:g} | {t_agg:.3f} | {t_rel:.3f} | {t_rel / t_agg:.2f} | "
            f"{rel.public['height']} | {rel.public['n_nodes']:,} | {rel.public['n_leaves']:,} |"
        )
    lines += ["", "Target: ratio <= 3.", "",
              "DAWA (Li et al. 2014; default parameters: ¼ of ε for the partition, 96 workload rectangles):",
              "", "| ε | aggregation (s) | DAWA release (s) | ratio | buckets |", "|---:|---:|---:|---:|---:|"]
    dawa = DAWA()
    for eps in EPSILONS:
        t_rel, rel = best_of(lambda eps=eps: dawa.release(dawa.plan(agg.grid, eps, {}, unit=points_unit(agg.user_cap)), agg, src).inner)
        print(f"dawa eps={eps}: {t_rel:.3f} s", file=sys.stderr)
        lines.append(f"| {eps:g} | {t_agg:.3f} | {t_rel:.3f} | {t_rel / t_agg:.2f} | {rel.public['buckets']:,} |")
    table = "\n".join(lines) + "\n"
    print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(table)


if __name__ == "__main__":
    main()
