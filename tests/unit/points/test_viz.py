"""Unit tests of dpcore.points.viz: offline maps, one Choroplethmap trace, display aggregation."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import pytest
from points_helpers import release_with
from scipy import special

from dpcore import catalog
from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.points.viz import display_blocks, extent_figure, partition_figure
from dpcore.privacy.noise import NoiseSource

#: z of the two-sided normal 95 % interval, derived here independently of dpcore (SciPy's ndtri).
Z95 = float(-special.ndtri(0.025))

BOUNDS = Bounds(-74.06, 40.56, -73.70, 40.92)


def identity_release(rows: int, cols: int, seed: int = 0, eps: float = 0.5):
    rng = np.random.default_rng(seed)
    counts = rng.poisson(3.0, size=(rows, cols)).astype(np.int64)
    agg = Aggregate(grid=Grid(BOUNDS, rows, cols), counts=counts, n_outside=0, n_capped=0,
                    sensitivity=1, user_cap=None)
    return release_with(catalog.get("points", "identity"), agg, eps, {}, NoiseSource(seed))


@pytest.fixture(scope="module")
def big_release():
    return identity_release(256, 256, seed=1)


def noisy_matrix(rel) -> np.ndarray:
    m = np.full(rel.grid.shape, np.nan)
    m[rel.rects[:, 0], rel.rects[:, 2]] = rel.noisy
    return m


class TestPartitionFigure:
    def test_aggregated_identity_256(self, big_release) -> None:
        fig, info = partition_figure(big_release, max_polygons=1000)
        assert isinstance(fig, go.Figure)
        assert len(fig.data) == 1
        trace = fig.data[0]
        assert trace.type == "choroplethmap"
        assert fig.layout.map.style == "white-bg"
        assert info["aggregated"] is True
        assert info["n_polygons"] <= 1000
        assert info["n_leaves"] == 256 * 256
        assert len(trace.z) == info["n_polygons"]
        assert len(trace.geojson["features"]) == info["n_polygons"]
        # densities are drawn non-negative (negative noisy sums shown as 0)
        assert np.all(np.asarray(trace.z) >= 0)

    def test_aggregated_block_sums(self, big_release) -> None:
        blocks = display_blocks(big_release, max_polygons=1000)
        assert blocks["aggregated"].all()
        rects = blocks["rects"]
        assert len(rects) <= 1000
        cov = np.zeros(big_release.grid.shape, dtype=np.int64)
        for r0, r1, c0, c1 in rects.tolist():
            cov[r0:r1, c0:c1] += 1
        assert (cov == 1).all()  # display blocks tile the grid
        m = noisy_matrix(big_release)
        expected = np.array([m[r0:r1, c0:c1].sum() for r0, r1, c0, c1 in rects.tolist()])
        np.testing.assert_allclose(blocks["noisy"], expected, rtol=0, atol=1e-6)
        assert blocks["cells"].tolist() == [(r1 - r0) * (c1 - c0) for r0, r1, c0, c1 in rects.tolist()]
        # block SD: independent cells, variance adds up
        sd_cell = big_release.levels[0].sd
        np.testing.assert_allclose(blocks["hi"] - blocks["noisy"], Z95 * sd_cell * np.sqrt(blocks["cells"]))

    def test_figure_carries_block_sums(self, big_release) -> None:
        fig, _ = partition_figure(big_release, max_polygons=1000)
        blocks = display_blocks(big_release, max_polygons=1000)
        custom = np.asarray(fig.data[0].customdata)[:, :4].astype(float)  # cols 4-5: depth, budget text
        np.testing.assert_allclose(custom[:, 0], blocks["noisy"])
        # polygon corners are the blocks' lon/lat boxes
        box = big_release.grid.rect_lonlat(blocks["rects"])
        for i in (0, len(box) // 2, len(box) - 1):
            ring = fig.data[0].geojson["features"][i]["geometry"]["coordinates"][0]
            w, s, e, n = box[i]
            np.testing.assert_allclose(ring, [[w, s], [e, s], [e, n], [w, n], [w, s]], atol=1e-6)

    def test_basemap_option(self, big_release) -> None:
        fig, _ = partition_figure(big_release, max_polygons=1000, basemap=True)
        assert fig.layout.map.style == "open-street-map"

    def test_small_release_not_aggregated(self) -> None:
        rel = identity_release(10, 12, seed=2)
        fig, info = partition_figure(rel)
        assert info["aggregated"] is False
        assert info["n_polygons"] == 120
        assert len(fig.data) == 1 and fig.data[0].type == "choroplethmap"
        np.testing.assert_array_equal(np.asarray(fig.data[0].customdata)[:, 0].astype(float), rel.noisy)
        assert fig.layout.map.style == "white-bg"

    def test_exactly_max_polygons_not_aggregated(self) -> None:
        rel = identity_release(10, 10, seed=3)
        _, info = partition_figure(rel, max_polygons=100)
        assert info["aggregated"] is False and info["n_polygons"] == 100
        _, info = partition_figure(rel, max_polygons=99)
        assert info["aggregated"] is True and info["n_polygons"] <= 99

    @pytest.mark.parametrize(
        "rows,cols,max_polygons",
        [(512, 1024, 10_000), (8, 132, 1000), (300, 200, 1000), (64, 256, 1000), (1, 3000, 1000)],
    )
    def test_never_more_polygons_than_allowed(self, rows: int, cols: int, max_polygons: int) -> None:
        # the caption promises at most max_polygons polygons, whatever the grid's shape
        rel = identity_release(rows, cols, seed=5)
        blocks = display_blocks(rel, max_polygons=max_polygons)
        assert blocks["aggregated"].all()
        assert len(blocks["rects"]) <= max_polygons
        # and the blocks still tile the grid with the leaves' total
        np.testing.assert_allclose(blocks["noisy"].sum(), rel.noisy.sum(), rtol=1e-9)
        assert blocks["cells"].sum() == rows * cols

    def test_uniform_release_one_polygon(self) -> None:
        rng = np.random.default_rng(4)
        agg = Aggregate(grid=Grid(BOUNDS, 20, 20), counts=rng.poisson(5, (20, 20)), n_outside=0,
                        n_capped=0, sensitivity=1, user_cap=None)
        rel = release_with(catalog.get("points", "uniform"), agg, 1.0, {}, NoiseSource(4))
        fig, info = partition_figure(rel)
        assert info["n_polygons"] == 1
        assert fig.data[0].type == "choroplethmap"

    def test_outline_layer_and_boundaries(self, big_release) -> None:
        boundaries = {"type": "FeatureCollection", "features": []}
        fig, _ = partition_figure(big_release, max_polygons=1000, boundaries=boundaries)
        layers = fig.layout.map.layers
        assert len(layers) == 2
        assert all(layer.sourcetype == "geojson" and layer.type == "line" for layer in layers)


class TestExtentFigure:
    def test_white_bg(self) -> None:
        fig = extent_figure(BOUNDS)
        assert fig.layout.map.style == "white-bg"
        assert len(fig.data) == 1
        tr = fig.data[0]
        assert tr.type == "scattermap"
        assert list(tr.lon) == [BOUNDS.west, BOUNDS.east, BOUNDS.east, BOUNDS.west, BOUNDS.west]
        assert list(tr.lat) == [BOUNDS.south, BOUNDS.south, BOUNDS.north, BOUNDS.north, BOUNDS.south]
        c = fig.layout.map.center
        assert c.lon == pytest.approx((BOUNDS.west + BOUNDS.east) / 2)
        assert c.lat == pytest.approx((BOUNDS.south + BOUNDS.north) / 2)

    def test_basemap(self) -> None:
        assert extent_figure(BOUNDS, basemap=True).layout.map.style == "open-street-map"

    def test_smaller_extent_zooms_in(self) -> None:
        wide = extent_figure(Bounds(-125.0, 24.4, -66.9, 49.4)).layout.map.zoom
        city = extent_figure(BOUNDS).layout.map.zoom
        assert city > wide >= 0


def test_rects_figure_draws_the_published_leaves_on_one_colour_scale() -> None:
    """One period of a series from its release.csv rows: only leaves, the given zmax, offline style."""
    import pandas as pd

    from dpcore.data.maps import OFFLINE_STYLE
    from dpcore.points.viz import rects_density, rects_figure

    rows = pd.DataFrame({"west": [0.0, 0.0, 0.5], "south": [0.0, 0.0, 0.0], "east": [1.0, 0.5, 1.0],
                         "north": [1.0, 1.0, 1.0], "noisy_count": [30, -4, 20], "ci95_low": [20, -14, 10],
                         "ci95_high": [40, 6, 30], "leaf": [False, True, True]})
    fig = rects_figure(rows, Bounds(0, 0, 1, 1), zmax=0.5)
    (trace,) = fig.data
    # the log scale of every map (issue 26, item 5), topped at the series' zmax: negatives at its bottom
    assert len(trace.geojson["features"]) == 2 and trace.zmax == pytest.approx(math.log10(0.5))
    assert trace.zmin == pytest.approx(math.log10(0.5) - 4)
    assert trace.z[0] == trace.zmin
    assert trace.z[1] == pytest.approx(max(math.log10(rects_density(rows.iloc[[2]])[0]), trace.zmin))
    assert trace.customdata[1][3] == pytest.approx(rects_density(rows.iloc[[2]])[0])
    assert fig.layout.map.style == OFFLINE_STYLE
