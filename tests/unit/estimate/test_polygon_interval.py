"""Tests of dpcore.estimate.polygon_interval's cell coverage (vectorised, through a spatial index).

The reference is the plain definition outside the code under test: each cell's share is the area of
its intersection with the polygon over its own area, computed cell by cell with shapely.
"""

from __future__ import annotations

import numpy as np
import shapely

from dpcore.estimate.polygon_interval import CellIndex, polygon_weights


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
