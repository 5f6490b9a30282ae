"""Property tests (hypothesis) of dpcore.data.domain invariants.

* every point is counted once: ``counts.sum() + n_outside == n``;
* block rectangles partition the grid (areas add up, every cell covered once);
* prefix-sum rectangle sums equal brute-force slicing.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dpcore.data.domain import Bounds, Grid, aggregate_points, block_edges, block_rects, rect_sums

SETTINGS = settings(max_examples=60, deadline=None)


@st.composite
def bounds_st(draw: st.DrawFn) -> Bounds:
    west = draw(st.floats(-180, 179, allow_nan=False))
    east = draw(st.floats(west, 180, allow_nan=False).filter(lambda e: e > west))
    south = draw(st.floats(-90, 89, allow_nan=False))
    north = draw(st.floats(south, 90, allow_nan=False).filter(lambda n: n > south))
    return Bounds(west, south, east, north)


@st.composite
def grid_st(draw: st.DrawFn, max_side: int = 40) -> Grid:
    return Grid(draw(bounds_st()), draw(st.integers(1, max_side)), draw(st.integers(1, max_side)))


@st.composite
def grid_and_points(draw: st.DrawFn) -> tuple[Grid, np.ndarray, np.ndarray]:
    g = draw(grid_st())
    b = g.bounds
    n = draw(st.integers(0, 200))
    w = b.east - b.west
    h = b.north - b.south
    # a box around the bounds, so some points fall outside; plus exact edges and corners
    lon_pool = st.one_of(
        st.floats(b.west - w / 2, b.east + w / 2, allow_nan=False),
        st.sampled_from([b.west, b.east, float(np.nextafter(b.east, np.inf))]),
    )
    lat_pool = st.one_of(
        st.floats(b.south - h / 2, b.north + h / 2, allow_nan=False),
        st.sampled_from([b.south, b.north, float(np.nextafter(b.south, -np.inf))]),
    )
    lon = np.array(draw(st.lists(lon_pool, min_size=n, max_size=n)), dtype=np.float64)
    lat = np.array(draw(st.lists(lat_pool, min_size=n, max_size=n)), dtype=np.float64)
    return g, lon, lat


@SETTINGS
@given(grid_and_points())
def test_every_point_counted_once(data: tuple[Grid, np.ndarray, np.ndarray]) -> None:
    g, lon, lat = data
    agg = aggregate_points(lon, lat, g)
    b = g.bounds
    inside = (lon >= b.west) & (lon <= b.east) & (lat >= b.south) & (lat <= b.north)
    assert agg.counts.shape == g.shape
    assert (agg.counts >= 0).all()
    assert int(agg.counts.sum()) + agg.n_outside == len(lon)
    assert agg.n_outside == int((~inside).sum())


@SETTINGS
@given(grid_and_points())
def test_cell_index_in_range_and_near_the_point(data: tuple[Grid, np.ndarray, np.ndarray]) -> None:
    g, lon, lat = data
    row, col, inside = g.cell_index(lon, lat)
    assert ((row >= 0) & (row < g.rows) == inside).all()
    assert ((col >= 0) & (col < g.cols) == inside).all()
    # the point lies in its cell's box, up to floating-point slack of a fraction of a cell
    le, ae = g.lon_edges(), g.lat_edges()
    slack_lon = 1e-6 * g.dlon + 1e-9 * abs(g.bounds.east - g.bounds.west)
    slack_lat = 1e-6 * g.dlat + 1e-9 * abs(g.bounds.north - g.bounds.south)
    c, r = col[inside], row[inside]
    assert (lon[inside] >= le[c] - slack_lon).all() and (lon[inside] <= le[c + 1] + slack_lon).all()
    assert (lat[inside] >= ae[r] - slack_lat).all() and (lat[inside] <= ae[r + 1] + slack_lat).all()


@SETTINGS
@given(
    st.integers(1, 60),
    st.integers(1, 60),
    st.integers(-5, 80),
    st.integers(-5, 80),
)
def test_block_rects_partition_the_grid(rows: int, cols: int, mr: int, mc: int) -> None:
    g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), rows, cols)
    rects = block_rects(g, mr, mc)
    r0, r1, c0, c1 = rects.T
    assert (r0 >= 0).all() and (r1 <= rows).all() and (r0 < r1).all()
    assert (c0 >= 0).all() and (c1 <= cols).all() and (c0 < c1).all()
    assert int(((r1 - r0) * (c1 - c0)).sum()) == g.n_cells
    cov = np.zeros(g.shape, dtype=np.int64)
    for a, b, c, d in rects.tolist():
        cov[a:b, c:d] += 1
    assert (cov == 1).all()
    assert len(rects) == max(1, min(mr, rows)) * max(1, min(mc, cols))


@SETTINGS
@given(st.integers(1, 500), st.integers(-3, 600))
def test_block_edges_nearly_equal(n: int, m: int) -> None:
    e = block_edges(n, m)
    k = max(1, min(m, n))
    assert len(e) == k + 1
    assert e[0] == 0 and e[-1] == n
    d = np.diff(e)
    assert (d >= 1).all()
    assert d.max() - d.min() <= 1


@st.composite
def matrix_and_rects(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    rows = draw(st.integers(1, 25))
    cols = draw(st.integers(1, 25))
    m = draw(arrays(np.int64, (rows, cols), elements=st.integers(-(10**6), 10**6)))
    k = draw(st.integers(1, 30))
    rr = draw(st.lists(st.tuples(st.integers(0, rows), st.integers(0, rows)), min_size=k, max_size=k))
    cc = draw(st.lists(st.tuples(st.integers(0, cols), st.integers(0, cols)), min_size=k, max_size=k))
    rects = np.array(
        [[min(a), max(a), min(b), max(b)] for a, b in zip(rr, cc, strict=True)], dtype=np.int64
    )
    return m, rects


@SETTINGS
@given(matrix_and_rects())
def test_rect_sums_equal_brute_force(data: tuple[np.ndarray, np.ndarray]) -> None:
    m, rects = data
    expected = [int(m[r0:r1, c0:c1].sum()) for r0, r1, c0, c1 in rects.tolist()]
    assert rect_sums(m, rects).tolist() == expected
