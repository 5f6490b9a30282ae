"""Why the 90 % polygon intervals under-cover at 1,024² (issue 25): the misses split by cause.

A diagnostic on *training* polygons (``--seed``, not the reported seed 0), never on the reported run.
The apportionment error of a polygon, ``A = Σ_cut (y_i − w_i x_i)`` (``y_i`` the cell's pickups inside
the polygon, ``x_i`` its pickups, ``w_i`` its area share), is fixed by the data and the polygon, so it is
computed exactly from the true counts; the noise error is the GLS error of one release.  Printed:

* the truth check: pickups inside the polygon against Σ_inside x + Σ_cut y (the cells' sums);
* calibration of the model's variance per cut cell (Σ a_i² / Σ v_i by the cell's count) and per polygon
  (Σ A² / Σ V: with the cells' cross terms), with true counts and with the release's estimates;
* the expected coverage per polygon, P(|A + e| ≤ z·sd) with e ~ N(0, noise²), for the variants asked;
* the misses by the share of the polygon's variance that is apportionment.

Run from the repository root::

    nice -n 10 .venv/bin/python benchmarks/interval_polygons_diagnose.py --size 1024 --seed 11
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import shapely
from scipy.stats import norm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.interval_coverage_polygons import BOUNDS, drawn_polygons, load  # noqa: E402
from dpcore import catalog, pipeline  # noqa: E402
from dpcore.core.session import Session  # noqa: E402
from dpcore.data.domain import Grid, aggregate_points  # noqa: E402
from dpcore.estimate.apportionment import shape_factors, subcell_overdispersion  # noqa: E402
from dpcore.estimate.gls import gls_estimate, measurements_from, union_variance  # noqa: E402
from dpcore.estimate.polygon_interval import (  # noqa: E402
    CellIndex,
    lattice_counts,
    lattice_shares,
    piece_grids,
    polygon_weights,
)
from dpcore.estimate.release_interval import cell_shapes  # noqa: E402
from dpcore.points.data_users import design, measurement_frame  # noqa: E402
from dpcore.points.unit import points_unit  # noqa: E402
from dpcore.privacy.budget import pure  # noqa: E402
from dpcore.privacy.noise import NoiseSource  # noqa: E402


def lattice_share(grid: Grid, geoms: np.ndarray, polygon: shapely.Geometry, step: float, cell_of_rc: np.ndarray,
                  cells: np.ndarray) -> np.ndarray:
    """Each cut cell's share of the lattice positions (multiples of ``step`` degrees) that fall in it
    (by the grid's own binning) and lie inside ``polygon``."""
    b = shapely.bounds(geoms)
    k = int(math.ceil(max(grid.dlon, grid.dlat) / step)) + 2
    off = np.arange(k) - 1
    ix = np.floor(b[:, [0]] / step) + off[None, :]
    iy = np.floor(b[:, [1]] / step) + off[None, :]
    lon = np.round(np.repeat(ix, k, axis=1) * step, 10)
    lat = np.round(np.tile(iy, (1, k)) * step, 10)
    r, c, ok = grid.cell_index(lon.ravel(), lat.ravel())
    mine = ok & (cell_of_rc[np.clip(r, 0, grid.rows - 1), np.clip(c, 0, grid.cols - 1)] == np.repeat(cells, k * k))
    mine = mine.reshape(lon.shape)
    inside = shapely.contains_xy(polygon, lon, lat) & mine
    n = mine.sum(axis=1)
    return np.where(n > 0, inside.sum(axis=1) / np.maximum(n, 1), 0.5)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--polygons", type=int, default=200)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--days", default="1-30")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--jitter", type=float, default=0.0, help="move each pickup uniformly by up to ± this many "
                    "degrees (a thought experiment: is the lattice of the rounded coordinates the cause?)")
    ap.add_argument("--lattice", type=float, default=0.0, help="also weigh cut cells by their share of the "
                    "lattice of coordinates this many degrees apart (0.0001: the pickups' 4 decimals)")
    ap.add_argument("--quick", action="store_true", help="skip the noise (the apportionment statistics only)")
    args = ap.parse_args(argv)
    lon, lat = load(args.days)
    if args.jitter:
        rng = np.random.default_rng(5)
        lon = np.clip(lon + rng.uniform(-args.jitter, args.jitter, lon.size), BOUNDS.west, BOUNDS.east - 1e-9)
        lat = np.clip(lat + rng.uniform(-args.jitter, args.jitter, lat.size), BOUNDS.south, BOUNDS.north - 1e-9)
    polys = drawn_polygons(args.polygons, args.seed, lon, lat)
    grid = Grid(BOUNDS, args.size, args.size)
    agg = aggregate_points(lon, lat, grid)
    row, col, _ = grid.cell_index(lon, lat)
    plan = catalog.get("points", "quadtree").plan(grid, pure(args.epsilon), {"height": int(math.log2(args.size))},
                                                  unit=points_unit(None))
    rel = pipeline.release(plan, agg, session=Session.unaccounted(), noise=NoiseSource(777)).inner
    d = design(rel)
    m = measurements_from(d, measurement_frame(rel))
    index = CellIndex(cell_shapes(d, {}))
    rects = rel.rects[rel.leaf_index()]
    cell_of_rc = np.full((args.size, args.size), -1, dtype=np.int64)
    cell_of_rc[rects[:, 0], rects[:, 2]] = np.arange(rects.shape[0])
    pt_cell = cell_of_rc[row, col]
    truth = agg.counts[rects[:, 0], rects[:, 2]].astype(float)
    x = gls_estimate(m)
    model = subcell_overdispersion(m, index.area)
    lat_model = subcell_overdispersion(m, lattice_counts(index.geoms, args.lattice)) if args.lattice else model
    if args.lattice:
        print(f"rho from the lattice counts: rho_sub {lat_model.rho:.4f} alpha {lat_model.exponent:.3f} "
              f"levels {[round(r, 4) for r, _ in lat_model.levels]}")
    print(f"size {args.size}, seed {args.seed}: rho_sub {model.rho:.4f} alpha {model.exponent:.3f} levels {model.levels}")
    # distinct pickup locations per occupied cell
    key = np.unique(np.column_stack([pt_cell, np.rint(lon * 1e4), np.rint(lat * 1e4)]), axis=0)
    locs = np.bincount(key[:, 0].astype(np.int64), minlength=truth.size)
    occ = truth > 0
    print(f"distinct locations per occupied cell: median {np.median(locs[occ]):.0f}, mean {locs[occ].mean():.1f}; "
          f"weighted by pickups {np.sum(locs * truth) / truth.sum():.1f}")
    z = norm.ppf(0.95)
    rows, lat_rows, lat_diff = [], [], 0
    cells_a, cells_v, cells_x, cells_vhat = [], [], [], []
    for p in polys:
        idx, share = polygon_weights(index, p)
        cut = share < 1 - 1e-9
        inside_pts = shapely.contains_xy(p, lon, lat)
        y_cut = np.bincount(pt_cell[inside_pts], minlength=truth.size)[idx[cut]].astype(float)
        n_in = float(inside_pts.sum())
        by_cells = float(truth[idx[~cut]].sum() + y_cut.sum())
        xc, wc = truth[idx[cut]], share[cut]
        a = y_cut - wc * xc
        grids = piece_grids(index.geoms[idx[cut]], p)
        rho_i = np.minimum(1.0, model.rho * shape_factors(grids, model.exponent))
        g = wc * (1 - wc)
        v = xc * g * (1 + np.maximum(xc - 1, 0) * rho_i)
        xh = np.maximum(x[idx[cut]], 0)
        vh = xh * g * (1 + np.maximum(xh - 1, 0) * rho_i)
        if args.lattice:
            wl = lattice_share(grid, index.geoms[idx[cut]], p, args.lattice, cell_of_rc, idx[cut])
            wl2 = lattice_shares(index.geoms[idx[cut]], p, args.lattice, wc)
            lat_diff += int(np.sum(np.abs(wl - wl2) > 1e-9))
            wl = wl2  # the library's (the grid's binning differs at a tie: a position on a cell's edge)
            gl = wl * (1 - wl)
            a_l = y_cut - wl * xc
            rho_l = np.minimum(1.0, lat_model.rho * shape_factors(grids, lat_model.exponent))
            v_l = xc * gl * (1 + np.maximum(xc - 1, 0) * rho_l)
            lat_rows.append((float(a_l.sum()), float(v_l.sum()), float((a_l * a_l).sum()), float((a_l * a_l).sum()),
                             float(np.sum(a_l * a_l)), float(np.sum(v_l))))
        cells_a.append(a), cells_v.append(v), cells_x.append(xc), cells_vhat.append(vh)
        w = np.zeros(m.n)
        w[idx] = share
        noise = 1.0 if args.quick else math.sqrt(union_variance(m, w))
        est = float(share @ x[idx])
        e = est - float(share @ truth[idx])
        rows.append((n_in, by_cells, float(a.sum()), float(v.sum()), float(vh.sum()), float((a * a).sum()), noise, e,
                     float(wc @ xc) / max(float(share @ truth[idx]), 1.0), int(cut.sum())))
    r = np.array(rows)
    n_in, by_cells, A, V, Vh, S, noise, e, cutfrac, ncut = r.T
    print(f"truth check: pickups inside != cells' sum in {int(np.sum(n_in != by_cells))} polygons "
          f"(max |diff| {np.max(np.abs(n_in - by_cells)):.0f})")
    a, v, xc, vh = (np.concatenate(c) for c in (cells_a, cells_v, cells_x, cells_vhat))
    print(f"per cut cell: sum a^2 / sum v = {np.sum(a * a) / np.sum(v):.3f} (true counts), / sum v_hat = "
          f"{np.sum(a * a) / np.sum(vh):.3f}; cells {a.size}")
    for lo, hi in [(0, 2), (2, 5), (5, 20), (20, 100), (100, 1e9)]:
        k = (xc >= lo) & (xc < hi)
        if k.any():
            print(f"   x in [{lo}, {hi}): {k.sum()} cells, sum a^2/sum v {np.sum(a[k] ** 2) / np.sum(v[k]):.3f}, "
                  f"share of sum v {np.sum(v[k]) / np.sum(v):.3f}")
    print(f"per polygon: sum A^2 / sum V {np.sum(A * A) / np.sum(V):.3f}; sum A^2 / sum S (cross terms) "
          f"{np.sum(A * A) / np.sum(S):.3f}; median A^2/S {np.median(A * A / np.maximum(S, 1e-9)):.3f}")
    if lat_rows:
        L = np.array(lat_rows)
        print(f"cut cells whose lattice share by the grid's binning differs from the library's: {lat_diff}")
        print(f"lattice shares: per cut cell sum a^2/sum v {L[:, 4].sum() / L[:, 5].sum():.3f}; per polygon sum A^2/sum V "
              f"{np.sum(L[:, 0] ** 2) / L[:, 1].sum():.3f}; sum A^2/sum S {np.sum(L[:, 0] ** 2) / L[:, 2].sum():.3f}; "
              f"mean A/sqrt(V) {np.mean(L[L[:, 1] > 0, 0] / np.sqrt(L[L[:, 1] > 0, 1])):+.3f}")
        if not args.quick:
            sd = np.sqrt(noise ** 2 + L[:, 1])
            pc = norm.cdf((z * sd - L[:, 0]) / noise) - norm.cdf((-z * sd - L[:, 0]) / noise)
            print(f"lattice shares, model with true x: expected coverage {pc.mean():.4f} (SE {pc.std(ddof=1) / math.sqrt(pc.size):.4f})")
    if args.quick:
        return 0
    print(f"noise: e/noise sd: mean {np.mean(e / noise):+.3f} sd {np.std(e / noise):.3f}")
    frac = V / (V + noise ** 2)
    for name, var in [("model, true x", V), ("model, x_hat", Vh), ("model x_hat, *1.5", 1.5 * Vh)]:
        sd = np.sqrt(noise ** 2 + var)
        pc = norm.cdf((z * sd - A) / noise) - norm.cdf((-z * sd - A) / noise)
        real = np.abs(A + e) <= z * sd
        print(f"{name}: expected coverage {pc.mean():.4f} (SE {pc.std(ddof=1) / math.sqrt(pc.size):.4f}), "
              f"this release {real.mean():.3f}")
        for lo, hi in [(0, 0.2), (0.2, 0.5), (0.5, 0.8), (0.8, 1.01)]:
            k = (frac >= lo) & (frac < hi)
            if k.any():
                print(f"   apportionment share of variance [{lo}, {hi}): {k.sum()} polygons, coverage {pc[k].mean():.3f}, "
                      f"A^2/V {np.sum(A[k] ** 2) / np.sum(V[k]):.3f}")
    zA = A[V > 0] / np.sqrt(V[V > 0])  # polygons with a cut cell holding pickups
    print("A/sqrt(V) quantiles 5,25,50,75,95:", np.round(np.quantile(zA, [0.05, 0.25, 0.5, 0.75, 0.95]), 2),
          f"mean {zA.mean():+.3f} (SE {zA.std(ddof=1) / math.sqrt(zA.size):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
