"""One interval on a 1,024 × 1,024 points release: time from the release's files (issue 25).

Data
    a public synthetic count grid (no real data): 1,024² cells over a NYC-sized box, Poisson counts
    whose mean falls off from a few centres (``dpcore.data.synthetic.public_generator``, seeded).
Release
    the quadtree of height 10 (every level of the complete tree measured, data-independent, down to
    every single cell: 1,048,576 leaves, 1,398,101 measurements), ε = 1, charged
    nothing (an unaccounted session: a study, not a publication); its data users' files come from
    ``KindRelease.files`` (measurements.csv, design.json with every cell's rectangle, estimates.csv).
Measured (``time.perf_counter``)
    * making the release's files;
    * ``ReleaseIntervals(files)``: parsing measurements.csv and design.json, building the design and
      solving the least-squares estimate once (per release);
    * the first polygon (it also builds the cells' rectangles, their spatial index and the tree's
      data-free bottom-up pass), then the median and max of ``--queries`` further polygons (boxes of
      0.1 % to 10 % of the area, cut cells weighted by area share) and of unions of 1 to 10,000 random
      cells.  A query runs the two passes on its cells and their ancestors only
      (``dpcore.estimate.tree_inference.SparseTreeFit``) and a polygon's coverage is two queries of the
      cells' STR-tree (``dpcore.estimate.polygon_interval.CellIndex``).
Target: one interval in under 1 s (issue 25).

Run from the repository root::

    .venv/bin/python benchmarks/interval_points.py     # writes results/interval_points.md
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import shapely

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpcore import catalog, pipeline  # noqa: E402
from dpcore.core.session import Session  # noqa: E402
from dpcore.data.domain import Aggregate, Bounds, Grid  # noqa: E402
from dpcore.data.synthetic import public_generator  # noqa: E402
from dpcore.estimate.gls import union_interval  # noqa: E402
from dpcore.estimate.polygon_interval import polygon_interval  # noqa: E402
from dpcore.estimate.release_interval import ReleaseIntervals  # noqa: E402
from dpcore.points.unit import points_unit  # noqa: E402
from dpcore.privacy.budget import pure  # noqa: E402
from dpcore.privacy.noise import NoiseSource  # noqa: E402

BOUNDS = Bounds(-74.05, 40.60, -73.75, 40.90)


def grid_counts(n: int, seed: int) -> np.ndarray:
    rng, _ = public_generator(seed)
    yy, xx = np.mgrid[0:n, 0:n] / n
    mean = np.zeros((n, n))
    for cx, cy, s, w in [(0.5, 0.6, 0.05, 40.0), (0.3, 0.3, 0.1, 10.0), (0.7, 0.2, 0.08, 8.0)]:
        mean += w * np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * s * s))
    return rng.poisson(mean + 0.2).astype(np.int64)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--queries", type=int, default=10)
    ap.add_argument("--height", type=int, default=10, help="quadtree height (10: every one of the 1,024² cells a leaf)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "interval_points.md"))
    args = ap.parse_args(argv)
    n = args.size
    load0 = os.getloadavg()[0]
    grid = Grid(BOUNDS, n, n)
    agg = Aggregate(grid=grid, counts=grid_counts(n, args.seed), n_outside=0, n_capped=0, sensitivity=1,
                    user_cap=None)
    plan = catalog.get("points", "quadtree").plan(grid, pure(1.0), {"height": args.height},
                                                  unit=points_unit(None))
    kr = pipeline.release(plan, agg, session=Session.unaccounted(), noise=NoiseSource(args.seed))
    t0 = time.perf_counter()
    files = kr.files()
    t1 = time.perf_counter()
    ri = ReleaseIntervals(files)
    t2 = time.perf_counter()
    rng, _ = public_generator(args.seed + 1)
    w, s, e, nn = BOUNDS.west, BOUNDS.south, BOUNDS.east, BOUNDS.north

    def box(share: float) -> shapely.Polygon:
        side = np.sqrt(share)
        x0, y0 = rng.uniform(0, 1 - side, 2)
        return shapely.box(w + x0 * (e - w), s + y0 * (nn - s), w + (x0 + side) * (e - w), s + (y0 + side) * (nn - s))

    t3 = time.perf_counter()
    shapes = ri.shapes()
    polygon_interval(ri.m, shapes, box(0.01), 0.9, estimate=ri.estimate, rho=ri.rho)  # ρ estimated once here
    t4 = time.perf_counter()
    poly_t, union_t = [], []
    for i in range(args.queries):
        p = box([0.001, 0.01, 0.1][i % 3])
        a = time.perf_counter()
        polygon_interval(ri.m, shapes, p, 0.9, estimate=ri.estimate, rho=ri.rho)
        poly_t.append(time.perf_counter() - a)
        q = np.zeros(ri.m.n)
        q[rng.choice(ri.m.n, min([1, 100, 10_000][i % 3], ri.m.n), replace=False)] = 1.0
        a = time.perf_counter()
        union_interval(ri.m, q, 0.9, estimate=ri.estimate)
        union_t.append(time.perf_counter() - a)
    lines = [f"# One interval on a {n:,}² points release (benchmarks/interval_points.py)", "",
             f"Quadtree of height {args.height}, ε = 1, public synthetic counts (seed {args.seed}); {ri.m.n:,} cells, "
             f"{ri.m.A.shape[0]:,} measurements; times in seconds (time.perf_counter) on a shared 2-core "
             f"machine ({os.cpu_count()} CPUs seen), load average {load0:.1f} at the start and "
             f"{os.getloadavg()[0]:.1f} at the end (other jobs' test suites).", "",
             "| step | seconds |", "|---|---|",
             f"| make the release's files (KindRelease.files) | {t1 - t0:.1f} |",
             f"| ReleaseIntervals(files): read, build the design, solve GLS once | {t2 - t1:.1f} |",
             f"| first polygon (builds the cells' rectangles, their index, the tree's data-free pass) | {t4 - t3:.2f} |",
             f"| further polygons (0.1 %–10 % of the area), median / max | {np.median(poly_t):.3f} / "
             f"{np.max(poly_t):.3f} |",
             f"| unions of 1–10,000 cells, median / max | {np.median(union_t):.3f} / {np.max(union_t):.3f} |", "",
             "Target (issue 25): one interval in under 1 s, once the release's files are read (once per release)."]
    print("\n".join(lines))
    Path(args.out).write_text("\n".join(lines) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
