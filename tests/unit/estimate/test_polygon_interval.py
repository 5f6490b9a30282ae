"""Tests of dpcore.estimate.polygon_interval's cell coverage (vectorised, through a spatial index).

The reference is the plain definition outside the code under test: each cell's share is the area of
its intersection with the polygon over its own area, computed cell by cell with shapely.
"""

from __future__ import annotations

import numpy as np
import orjson
import pytest
import shapely

from dpcore.estimate.polygon_interval import (
    CellIndex,
    Density,
    lattice_counts,
    lattice_shares,
    polygon_weights,
)
from dpcore.estimate.release_interval import ReleaseIntervals


def grid_cells(n: int) -> np.ndarray:
    x, y = np.meshgrid(np.arange(n, dtype=float), np.arange(n, dtype=float))
    return shapely.box(x.ravel(), y.ravel(), x.ravel() + 1, y.ravel() + 1)


def test_shares_equal_the_cell_by_cell_definition() -> None:
    cells = grid_cells(12)
    index = CellIndex(cells)
    polygons = [shapely.Polygon([(0.5, 0.2), (11.3, 3.7), (4.1, 10.9)]),  # a triangle cutting cells
                shapely.box(2, 2, 6, 5),  # edges on cell borders: whole cells, none cut
                shapely.box(3, 3, 4, 4).buffer(2.5)]  # round, with cells wholly inside
    for poly in polygons:
        ref = np.array([c.intersection(poly).area / c.area for c in cells])
        idx, share = polygon_weights(index, poly)
        assert idx.tolist() == np.flatnonzero(ref > 0).tolist()
        np.testing.assert_allclose(share, ref[ref > 0], rtol=0, atol=1e-12)
        idx2, share2 = polygon_weights(cells, poly)  # shapes without an index: the same answer
        assert np.array_equal(idx, idx2) and np.array_equal(share, share2)
    idx, share = polygon_weights(index, shapely.box(2, 2, 6, 5))
    assert len(idx) == 12 and np.all(share == 1.0)


def test_density_shares_equal_the_cell_by_cell_definition() -> None:
    """With a public density (value d_k on shape D_k, 0 elsewhere) a cut cell weighs
    Σ d_k |c ∩ P ∩ D_k| / Σ d_k |c ∩ D_k| (its area share where it has no density); whole cells weigh 1."""
    cells = grid_cells(10)
    shapes = [shapely.box(0, 0, 10, 3.5), shapely.Polygon([(2, 4), (9, 4.5), (5, 9.5)])]
    values = [2.0, 0.5]
    density = Density(shapes, values)
    poly = shapely.Polygon([(0.3, 0.6), (8.7, 2.2), (6.2, 8.8), (1.1, 6.4)])
    ref = []
    for c in cells:
        geo = c.intersection(poly).area / c.area
        if poly.covers(c):
            ref.append(1.0)
            continue
        den = sum(v * c.intersection(d).area for d, v in zip(shapes, values, strict=True))
        num = sum(v * c.intersection(d).intersection(poly).area for d, v in zip(shapes, values, strict=True))
        ref.append(num / den if den > 0 else geo)
    ref = np.array(ref)
    idx, share = polygon_weights(CellIndex(cells), poly, density)
    assert idx.tolist() == np.flatnonzero(ref > 0).tolist()
    np.testing.assert_allclose(share, ref[ref > 0], rtol=0, atol=1e-12)
    pidx, pshare = polygon_weights(cells, poly)
    by_area = dict(zip(pidx.tolist(), pshare.tolist(), strict=True))
    moved = [abs(w - by_area.get(i, 0.0)) for i, w in zip(idx.tolist(), share.tolist(), strict=True)]
    assert max(moved) > 0.1  # the density moves some cut cells' weights away from their area shares


def _tiny_release() -> ReleaseIntervals:
    design = {"schema": "dpcore-design/1", "kind": "hierarchy", "cells": ["a", "b"],
              "nodes": {"t": [0, 1], "a": [0], "b": [1]}, "invariants": [], "edges": [["t", "a"], ["t", "b"]],
              "cell_bounds": [[0, 0, 1, 1], [1, 0, 2, 1]]}
    meas = (b"measurement_id,level,node,value,family,scale,variance,share,phase\n"
            b"0,total,t,10,discrete_gaussian,1,1,0.5,count\n1,leaf,a,4,discrete_gaussian,1,1,0.5,count\n"
            b"2,leaf,b,5,discrete_gaussian,1,1,0.5,count\n")
    return ReleaseIntervals({"design.json": orjson.dumps(design), "measurements.csv": meas})


def _square(x0: float) -> bytes:
    ring = [[x0, 0], [2, 0], [2, 1], [x0, 1], [x0, 0]]
    return ('{"type":"FeatureCollection","features":[{"type":"Feature","properties":{},'
            f'"geometry":{{"type":"Polygon","coordinates":[{ring}]}}}}]}}').encode()


def test_polygon_answers_are_kept_by_polygon_and_recomputed_for_another_question(monkeypatch) -> None:
    """The app asks the same polygon on every rerun: the release's intervals object answers it once."""
    import dpcore.estimate.release_interval as ri_mod

    calls = []
    real = ri_mod.polygon_interval
    monkeypatch.setattr(ri_mod, "polygon_interval", lambda *a, **k: calls.append(1) or real(*a, **k))
    ri = _tiny_release()
    first = ri.of_polygons(_square(0.5))
    first[0]["estimate"] = -1.0  # a caller changing its copy does not change the kept answer
    again = ri.of_polygons(_square(0.5))
    assert len(calls) == 1 and again[0]["estimate"] != -1.0
    ri.of_polygons(_square(0.5), 0.95)  # another coverage, another model, another polygon: new answers
    ri.of_polygons(_square(0.5), apportionment="none")
    ri.of_polygons(_square(0.25))
    dens = Density(shapely.box([0], [0], [1], [1]), [1.0])
    ri.of_polygons(_square(0.5), density=dens)
    ri.of_polygons(_square(0.5), density=Density(shapely.box([0], [0], [1], [1]), [1.0]))  # the same density
    assert len(calls) == 5
    ri.of_polygons(_square(0.5), precision=0.1)  # weighed by the lattice: another question
    ri.of_polygons(_square(0.5), precision=0.1)
    assert len(calls) == 6


def test_lattice_shares_count_the_positions_inside_like_the_binning_does() -> None:
    """Each cut cell's share of the lattice positions (multiples of the precision, a cell holding those
    on its west and south edges, as points are binned) inside the polygon, against a position-by-position count."""
    step = 0.1
    edges = np.arange(9) * 0.29  # 8 cells of 2.9 positions a side: 2 or 3 positions per axis
    xs, ys = np.meshgrid(edges[:-1], edges[:-1], indexing="ij")
    cells = shapely.box(xs.ravel(), ys.ravel(), xs.ravel() + 0.29, ys.ravel() + 0.29)
    poly = shapely.Polygon([(0.13, 0.07), (2.1, 0.4), (1.6, 2.2), (0.3, 1.5)])
    got = lattice_shares(cells, poly, step, np.full(cells.size, -1.0))
    k = np.arange(-1, 30)
    px, py = (a.ravel() * step for a in np.meshgrid(k, k, indexing="ij"))
    for c, share in zip(cells, got, strict=True):
        w, s, e, n = c.bounds
        mine = (px >= w - 1e-9) & (px < e - 1e-9) & (py >= s - 1e-9) & (py < n - 1e-9)
        inside = mine & shapely.contains_xy(poly, px, py)
        assert share == pytest.approx(inside.sum() / mine.sum())
    assert lattice_counts(cells, step).tolist() == [float(np.sum(
        (px >= c.bounds[0] - 1e-9) & (px < c.bounds[2] - 1e-9) & (py >= c.bounds[1] - 1e-9) & (py < c.bounds[3] - 1e-9)))
        for c in cells]


def test_lattice_shares_remove_the_edge_error_of_points_on_a_lattice() -> None:
    """One point on every lattice position: weighed by their lattice share, the cut cells give the points
    inside exactly; by area share they err, the same way in every cell along the edge (the errors add up)."""
    step, side = 0.1, 0.29
    edges = np.arange(11) * side
    xs, ys = np.meshgrid(edges[:-1], edges[:-1], indexing="ij")
    cells = shapely.box(xs.ravel(), ys.ravel(), xs.ravel() + side, ys.ravel() + side)
    k = np.arange(0, 29)
    px, py = (a.ravel() * step for a in np.meshgrid(k, k, indexing="ij"))
    counts = np.array([np.sum((px >= c.bounds[0] - 1e-9) & (px < c.bounds[2] - 1e-9) & (py >= c.bounds[1] - 1e-9)
                              & (py < c.bounds[3] - 1e-9)) for c in cells], dtype=float)
    poly = shapely.box(-0.05, -0.05, 2.95, 1.12)  # an edge just above lattice row 11, in the 4th row of cells
    truth = float(shapely.contains_xy(poly, px, py).sum())
    idx, w = polygon_weights(cells, poly, precision=step)
    assert float(w @ counts[idx]) == pytest.approx(truth)
    idx, w = polygon_weights(cells, poly)
    assert abs(float(w @ counts[idx]) - truth) > 10  # 10 cells along the edge, each 1.24 points short


def test_precision_is_positive_and_not_given_with_a_density() -> None:
    import scipy.sparse as sp

    from dpcore.errors import ParameterError
    from dpcore.estimate.gls import Measurements
    from dpcore.estimate.polygon_interval import polygon_interval

    cells = shapely.box([0, 1], [0, 0], [1, 2], [1, 1])
    m = Measurements(sp.csr_matrix(np.eye(2)), np.array([5.0, 5.0]), np.ones(2), ["a", "b"])
    poly = shapely.box(0.5, 0, 2, 1)
    for bad in ({"precision": 0.0}, {"precision": float("nan")},
                {"precision": 0.1, "density": Density(shapely.box([0], [0], [1], [1]), [1.0])}):
        with pytest.raises(ParameterError, match="precision"):
            polygon_interval(m, cells, poly, **bad)
    assert polygon_interval(m, cells, poly, precision=0.1)["cells_cut"] == 1


def test_precision_is_refused_for_cells_that_are_not_rectangles() -> None:
    """The lattice is counted over a cell's bounding box: a triangle cut at x < 0.15 (precision 0.1)
    holds 5 of its 6 positions there, the box 6 of 9; the precision is refused, not misapplied."""
    from dpcore.errors import ParameterError
    from dpcore.estimate.polygon_interval import lattice_shares

    triangle = shapely.Polygon([(0, 0), (0.3, 0), (0, 0.3)])
    with pytest.raises(ParameterError, match="not rectangles"):
        lattice_shares(np.array([triangle]), shapely.box(-1, -1, 0.15, 1), 0.1, np.array([0.5]))


def test_a_cell_with_a_fine_lattice_falls_back_alone() -> None:
    """A cell of 10⁴ positions (over MAX_LATTICE) takes its area share; its neighbour of 3 × 1 positions keeps its lattice
    share (before, the one large cell sent every cut cell back to area shares)."""
    from dpcore.estimate.polygon_interval import lattice_shares

    cells = shapely.box([0, 10], [0, 0], [0.3, 20], [0.1, 10])
    cut = shapely.box(-1, -1, 0.15, 11)  # x < 0.15 cuts the first (area share 0.5), not the second
    shares = lattice_shares(cells, cut, 0.1, np.array([0.5, 0.25]))
    assert shares.tolist() == [pytest.approx(2 / 3), 0.25]

