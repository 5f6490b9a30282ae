"""Speed of the PrivTree release against building the frequency matrix (issue 19's target).

The data of ``benchmarks/htf_speed.py`` (3.5 million synthetic points in four Gaussian
clusters on a 1024 x 1024 grid over the LA box, fixed seed); times, best of 3:

* building the frequency matrix with numpy (``dpcore.data.domain.aggregate_points``);
* the PrivTree release with its defaults (half of ε for the tree, θ = 0) at ε = 0.1, 0.5
  and 1, with the secure noise source (os.urandom).

The target is a release time of at most 3x the aggregation time.  Run from the repository
root::

    .venv/bin/python benchmarks/privtree_speed.py

It prints a markdown table and writes it to benchmarks/results/privtree_speed.md.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
from htf_speed import CENTRES, LA, N_POINTS, REPEATS, SEED, SIDE, SIGMAS, WEIGHTS, best_of  # noqa: E402

from dpcore.data.domain import Grid, aggregate_points  # noqa: E402
from dpcore.data.synthetic import gaussian_clusters  # noqa: E402
from dpcore.points.mechanisms.privtree import PrivTree  # noqa: E402
from dpcore.points.unit import points_unit  # noqa: E402
from dpcore.privacy.noise import secure_source  # noqa: E402

EPSILONS = (0.1, 0.5, 1.0)
RESULTS = ROOT / "benchmarks" / "results" / "privtree_speed.md"


def main() -> None:
    grid = Grid(LA, SIDE, SIDE)
    lon, lat = gaussian_clusters(N_POINTS, LA, sigma_cells=SIGMAS, centres=CENTRES,
                                 weights=WEIGHTS, resolution=SIDE, seed=SEED)
    t_agg, agg = best_of(lambda: aggregate_points(lon, lat, grid))
    nonzero = int(np.count_nonzero(agg.counts))
    mech = PrivTree()
    src = secure_source()
    rows = []
    for eps in EPSILONS:
        t_rel, rel = best_of(lambda eps=eps: mech.release(mech.plan(agg.grid, eps, {}, unit=points_unit(agg.user_cap)), agg, src).inner)
        rows.append((eps, t_rel, rel))
        print(f"eps={eps}: {t_rel:.3f} s", file=sys.stderr)
    lines = [
        "# PrivTree release speed vs building the frequency matrix",
        "",
        f"- Date: {datetime.date.today().isoformat()}",
        f"- Machine: {os.cpu_count()} cores, {platform.machine()}, {platform.system()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}",
        f"- Data: as benchmarks/htf_speed.py: {N_POINTS:,} synthetic points, {len(CENTRES)} Gaussian "
        f"clusters, seed {SEED}, {SIDE} x {SIDE} grid; {nonzero:,} non-zero cells.",
        "- PrivTree: defaults (tree share ½, θ = 0), secure noise source (os.urandom).",
        f"- Times: best of {REPEATS}. Aggregation = `dpcore.data.domain.aggregate_points` (numpy).",
        "- Command: `.venv/bin/python benchmarks/privtree_speed.py`",
        "",
        "| ε | aggregation (s) | PrivTree release (s) | ratio | height | nodes | leaves |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for eps, t_rel, rel in rows:
        lines.append(
            f"| {eps:g} | {t_agg:.3f} | {t_rel:.3f} | {t_rel / t_agg:.2f} | "
            f"{rel.public['height']} | {rel.n_rects:,} | {int(rel.leaf.sum()):,} |"
        )
    lines += ["", "Target: ratio <= 3."]
    table = "\n".join(lines) + "\n"
    print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(table)


if __name__ == "__main__":
    main()
