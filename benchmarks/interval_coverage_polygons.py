"""Coverage and bias of the 90 % polygon intervals on the NYC pickups release (issue 25, "Done when").

Data
    ../shared/data/points/uber_nyc_pickups_2014-04.csv.gz (564,516 Uber pickups, April 2014), the
    points inside the public box -74.05, 40.60, -73.75, 40.90 (lon/lat).
Release
    the quadtree on a ``--size``² grid down to every cell (data-independent), ε = 1 (discrete Laplace),
    ``--releases`` releases with ``NoiseSource(1000 + r)``, charged nothing (a study); each release's
    measurements are read as a data user reads them (``measurement_frame`` and ``design`` of
    ``dpcore.points.data_users``, then ``dpcore.estimate.gls.measurements_from``).
Polygons
    ``--polygons`` "drawn" polygons, fixed before any release (``numpy`` seed ``--seed``):
    the convex hull of 5 to 12 random vertices in a window of 1 % to 20 % of the box's side around a
    random pickup (where a data user would draw), plus a few random rotated rectangles.  Cut cells weigh their area share
    (``dpcore.estimate.polygon_interval``).  The noise SD of each polygon is data-free (the plan
    fixes the design): computed once.
Measured
    * against the interval's estimand, the true cell counts weighted as the interval weighs them
      (Σ share_i · x_i): the share of (release, polygon) pairs whose 90 % interval covers it, with
      its SE from the between-release spread, and the mean standardised error (est − truth)/sd;
    * against the true number of pickups inside each polygon: the same coverage (it adds the
      apportionment error, which the interval does not measure: the answer's bracket
      [cells inside, cells touching] is there for it), and how often that truth lies in the bracket
      widened by the interval's half-width.
Criteria (issue 25): coverage 90 ± 2 %; mean error within 2 standard errors of 0.

Run from the repository root::

    .venv/bin/python benchmarks/interval_coverage_polygons.py   # writes results/interval_coverage_polygons.md
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import shapely
from scipy.stats import norm
from shapely import affinity

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpcore import catalog, pipeline  # noqa: E402
from dpcore.core.session import Session  # noqa: E402
from dpcore.data.domain import Bounds, Grid, aggregate_points  # noqa: E402
from dpcore.estimate.gls import gls_estimate, measurements_from, union_variance  # noqa: E402
from dpcore.estimate.polygon_interval import CellIndex, polygon_weights  # noqa: E402
from dpcore.estimate.release_interval import cell_shapes  # noqa: E402
from dpcore.points.data_users import design, measurement_frame  # noqa: E402
from dpcore.points.unit import points_unit  # noqa: E402
from dpcore.privacy.budget import pure  # noqa: E402
from dpcore.privacy.noise import NoiseSource  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "points" / "uber_nyc_pickups_2014-04.csv.gz"
BOUNDS = Bounds(-74.05, 40.60, -73.75, 40.90)


def drawn_polygons(n: int, seed: int, lon: np.ndarray, lat: np.ndarray) -> list[shapely.Geometry]:
    """``n`` polygons: convex hulls of random vertices, and every fifth a rotated rectangle, each in a
    window around a random pickup (where a data user would draw; the polygons are then fixed, and the
    coverage is over the releases' noise)."""
    rng = np.random.default_rng(seed)
    w, s, e, nn = BOUNDS.west, BOUNDS.south, BOUNDS.east, BOUNDS.north
    out = []
    while len(out) < n:
        side = math.exp(rng.uniform(math.log(0.01), math.log(0.2)))
        k = int(rng.integers(lon.size))
        cx, cy = (lon[k] - w) / (e - w), (lat[k] - s) / (nn - s)
        x0, y0 = np.clip(cx - side / 2, 0, 1 - side), np.clip(cy - side / 2, 0, 1 - side)
        if len(out) % 5 == 4:
            rect = shapely.box(0, 0, side * rng.uniform(0.4, 1), side * rng.uniform(0.4, 1))
            g = affinity.translate(affinity.rotate(rect, rng.uniform(0, 90), origin="centroid"), x0, y0)
        else:
            k = int(rng.integers(5, 13))
            g = shapely.MultiPoint(np.c_[x0 + side * rng.random(k), y0 + side * rng.random(k)]).convex_hull
        if g.area <= 0:
            continue
        out.append(affinity.affine_transform(g, [e - w, 0, 0, nn - s, w, s]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--releases", type=int, default=30)
    ap.add_argument("--polygons", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "interval_coverage_polygons.md"))
    args = ap.parse_args(argv)
    load0, t0 = os.getloadavg()[0], time.perf_counter()
    df = pd.read_csv(DATA, usecols=["Lat", "Lon"])
    lon, lat = df["Lon"].to_numpy(float), df["Lat"].to_numpy(float)
    inside_box = (lon >= BOUNDS.west) & (lon < BOUNDS.east) & (lat >= BOUNDS.south) & (lat < BOUNDS.north)
    lon, lat = lon[inside_box], lat[inside_box]
    grid = Grid(BOUNDS, args.size, args.size)
    agg = aggregate_points(lon, lat, grid)
    height = int(round(math.log2(args.size)))
    plan = catalog.get("points", "quadtree").plan(grid, pure(1.0), {"height": height}, unit=points_unit(None))
    polys = drawn_polygons(args.polygons, args.seed, lon, lat)
    first = pipeline.release(plan, agg, session=Session.unaccounted(), noise=NoiseSource(1000)).inner
    plan_design = design(first)  # data-free for this plan: the same cells and nodes in every release
    m0 = measurements_from(plan_design, measurement_frame(first))
    index = CellIndex(cell_shapes(plan_design, {}))
    rects = first.rects[first.leaf_index()]  # design.json's cells, in order: one grid cell each
    assert np.all(rects[:, 1] - rects[:, 0] == 1) and np.all(rects[:, 3] - rects[:, 2] == 1)
    leaf_truth = agg.counts[rects[:, 0], rects[:, 2]].astype(float)
    W = np.zeros((len(polys), m0.n))
    full = np.zeros((len(polys), m0.n))
    points_in = np.zeros(len(polys))
    for i, p in enumerate(polys):
        idx, share = polygon_weights(index, p)
        W[i, idx] = share
        full[i, idx] = 1.0
        points_in[i] = float(shapely.contains_xy(p, lon, lat).sum())
    inner = W >= 1.0 - 1e-9
    sd = np.sqrt([union_variance(m0, w) for w in W])
    truth_w = W @ leaf_truth
    z = norm.ppf(0.95)
    cover, zbar, cover_pts, bracket = [], [], [], []
    for r in range(args.releases):
        rel = first if r == 0 else pipeline.release(plan, agg, session=Session.unaccounted(),
                                                    noise=NoiseSource(1000 + r)).inner
        x = gls_estimate(measurements_from(plan_design, measurement_frame(rel)))
        est = W @ x
        err = (est - truth_w) / sd
        cover.append(float(np.mean(np.abs(err) <= z)))
        zbar.append(float(np.mean(err)))
        cover_pts.append(float(np.mean(np.abs(est - points_in) <= z * sd)))
        lo, hi = (inner * 1.0) @ x - z * sd, full @ x + z * sd
        bracket.append(float(np.mean((points_in >= lo) & (points_in <= hi))))
    R = args.releases

    def mean_se(v: list[float]) -> tuple[float, float]:
        a = np.asarray(v)
        return float(a.mean()), float(a.std(ddof=1) / math.sqrt(R))

    (c, cse), (zb, zse), (cp, cpse), (br, brse) = map(mean_se, (cover, zbar, cover_pts, bracket))
    lines = ["# Coverage of the 90 % polygon intervals on the NYC pickups release "
             "(benchmarks/interval_coverage_polygons.py)", "",
             f"{int(agg.counts.sum()):,} Uber pickups (April 2014) in the box {BOUNDS.as_tuple()}; quadtree on "
             f"{args.size}² cells (height {height}, every cell a leaf), ε = 1; {len(polys)} drawn polygons "
             f"(fixed before the releases, around random pickups; {int(np.median(points_in)):,} pickups inside the median one, "
             f"{int(points_in.min()):,} to {int(points_in.max()):,}); {R} releases; SEs from the between-release "
             "spread.", "",
             "| truth | coverage of the 90 % interval | SE | within 90 ± 2 % | mean (est − truth)/sd | SE | "
             "within 2 SE |", "|---|---|---|---|---|---|---|",
             f"| cell counts weighted by area share (the interval's estimand) | {c:.4f} | {cse:.4f} | "
             f"{'yes' if abs(c - 0.9) <= 0.02 else 'NO'} | {zb:+.4f} | {zse:.4f} | "
             f"{'yes' if abs(zb) <= 2 * zse else 'NO'} |",
             f"| pickups inside the polygon (adds apportionment) | {cp:.4f} | {cpse:.4f} | "
             f"{'yes' if abs(cp - 0.9) <= 0.02 else 'NO'} | – | – | – |", "",
             f"The pickups inside the polygon lie in the bracket [cells inside − z·sd, cells touching + z·sd] in "
             f"{br:.1%} of the pairs (SE {brse:.1%}): apportionment error is what the bracket is for.", "",
             f"Seconds: {time.perf_counter() - t0:.0f} in all; load average {load0:.1f} at the start, "
             f"{os.getloadavg()[0]:.1f} at the end, on a shared 2-core machine ({os.cpu_count()} CPUs seen)."]
    print("\n".join(lines))
    Path(args.out).write_text("\n".join(lines) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
