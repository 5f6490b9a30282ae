"""Unit tests of the full-resolution image layer of dpcore.points.viz (grid densities)."""

from __future__ import annotations

import base64
import io
import math
import re

import numpy as np
import plotly.io
import pytest
from PIL import Image
from points_helpers import release_with

from dpcore import catalog
from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.points.viz import (
    IMAGE_LEVELS,
    colour_levels,
    display_blocks,
    grid_image_figure,
    hover_integers,
    image_palette,
    mercator_strips,
    release_map_figure,
)
from dpcore.privacy.noise import NoiseSource

BOUNDS = Bounds(-74.06, 40.56, -73.70, 40.92)


def release(mech: str, rows: int, cols: int, seed: int = 0, eps: float = 0.5, bounds: Bounds = BOUNDS):
    rng = np.random.default_rng(seed)
    counts = rng.poisson(3.0, size=(rows, cols)).astype(np.int64)
    agg = Aggregate(grid=Grid(bounds, rows, cols), counts=counts, n_outside=0, n_capped=0,
                    sensitivity=1, user_cap=None)
    return release_with(catalog.get("points", mech), agg, eps, {}, NoiseSource(seed))


def image_layers(fig) -> list:
    return [lay for lay in fig.layout.map.layers if lay.sourcetype == "image"]


def decode(layer) -> Image.Image:
    prefix = "data:image/png;base64,"
    assert layer.source.startswith(prefix)
    return Image.open(io.BytesIO(base64.b64decode(layer.source[len(prefix):])))


def noisy_matrix(rel) -> np.ndarray:
    m = np.full(rel.grid.shape, np.nan)
    m[rel.rects[:, 0], rel.rects[:, 2]] = rel.noisy
    return m


@pytest.fixture(scope="module")
def small():
    """40 × 30 cells: one strip (a city-sized extent at this resolution needs no cut)."""
    return release("identity", 40, 30, seed=1)


class TestImageLayer:
    def test_one_strip_whose_corners_are_the_grid_bounds(self, small) -> None:
        fig, info = grid_image_figure(small)
        layers = image_layers(fig)
        assert len(layers) == 1 and info["n_strips"] == 1
        lay = layers[0]
        assert lay.type == "raster"
        w, s, e, n = BOUNDS.as_tuple()
        # clockwise from the top left, as MapLibre's image source expects
        assert [list(c) for c in lay.coordinates] == [[w, n], [e, n], [e, s], [w, s]]

    def test_png_size_equals_the_grid(self, small) -> None:
        fig, info = grid_image_figure(small)
        img = decode(image_layers(fig)[0])
        assert img.format == "PNG"
        assert img.size == (30, 40)  # (width = columns, height = rows)
        assert info["image_shape"] == (40, 30)

    def test_pixels_are_the_cells_north_at_the_top(self, small) -> None:
        fig, info = grid_image_figure(small)
        img = decode(image_layers(fig)[0])
        assert img.mode == "P"
        pix = np.asarray(img)
        expected = log_levels(noisy_matrix(small), small.grid, info["vmax"])
        np.testing.assert_array_equal(pix, expected[::-1])  # grid row 0 is the south edge

    def test_colours_monotone_in_value(self, small) -> None:
        fig, info = grid_image_figure(small)
        img = decode(image_layers(fig)[0])
        rgb = np.asarray(img.convert("RGB"), dtype=np.float64)[::-1].reshape(-1, 3)
        values = np.maximum(noisy_matrix(small).ravel(), 0)
        # darker colour for a larger value: luminance never increases with the value
        lum = rgb @ np.array([0.2126, 0.7152, 0.0722])
        order = np.argsort(values, kind="stable")
        assert np.all(np.diff(lum[order]) <= 1e-9)
        # and the scale is used: the smallest and the largest values get different colours
        assert lum[order[0]] > lum[order[-1]]
        # the palette itself: strictly darker step by step, the colour bar shows the same steps
        pal = image_palette().astype(np.float64) @ np.array([0.2126, 0.7152, 0.0722])
        assert np.all(np.diff(pal) < 0)
        bar = fig.data[0].marker
        assert bar.showscale and bar.cmin == pytest.approx(info["vmax"] - 4) and bar.cmax == pytest.approx(info["vmax"])
        # one unit and one log scale for every points map (issue 26, item 5): per km², as the polygons
        assert "per km²" in bar.colorbar.title.text and "log" in bar.colorbar.title.text

    def test_colour_levels_steps(self) -> None:
        v = np.array([-5.0, 0.0, 0.99, 1.0, 3.5, 7.99, 8.0, 1e9])
        assert colour_levels(v, 8.0, 8).tolist() == [0, 0, 0, 1, 3, 7, 7, 7]

    def test_no_external_urls_in_the_figure_json(self, small) -> None:
        fig, _ = grid_image_figure(small)
        spec = plotly.io.to_json(fig, validate=False)
        assert fig.layout.map.style == "white-bg"
        assert re.findall(r"(?:https?:|wss?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}", spec) == []
        # the web basemap is the explicit exception
        web, _ = grid_image_figure(small, basemap=True)
        assert web.layout.map.style == "open-street-map"

    def test_hover_layer_carries_each_cell_with_its_interval(self, small) -> None:
        fig, info = grid_image_figure(small)
        tr = fig.data[0]
        assert tr.type == "scattermap" and tr.marker.opacity == 0
        assert info["hover_aggregated"] is False and info["n_hover"] == 40 * 30
        custom = np.asarray(tr.customdata)
        t = small.table(small.leaf_index())
        # the whole numbers the hover shows (its ",.0f" format), and the cells of each
        np.testing.assert_array_equal(custom[:, 0], hover_integers(t["noisy_count"]))
        np.testing.assert_array_equal(custom[:, 1], hover_integers(t["ci95_low"]))
        np.testing.assert_array_equal(custom[:, 2], hover_integers(t["ci95_high"]))
        assert custom.dtype.kind == "i" and (custom[:, 3] == 1).all() and "one cell" in tr.hovertemplate
        box = small.grid.rect_lonlat(small.rects)
        np.testing.assert_allclose(tr.lon, (box[:, 0] + box[:, 2]) / 2, atol=1e-6)
        np.testing.assert_allclose(tr.lat, (box[:, 1] + box[:, 3]) / 2, atol=1e-6)
        assert "95% interval" in tr.hovertemplate

    def test_hover_blocks_are_the_display_blocks(self) -> None:
        rel = release("identity", 120, 90, seed=2)
        fig, info = grid_image_figure(rel, hover_points=500)
        assert info["hover_aggregated"] is True and info["n_hover"] <= 500
        blocks = display_blocks(rel, 500)
        custom = np.asarray(fig.data[0].customdata)
        for col, key in enumerate(("noisy", "lo", "hi")):
            np.testing.assert_array_equal(custom[:, col], hover_integers(blocks[key]))
        np.testing.assert_array_equal(custom[:, 3], blocks["cells"])
        assert "sum over %{customdata[3]:,.0f} cells" in fig.data[0].hovertemplate

    def test_coarse_grid_release_drawn_at_the_fine_grid(self) -> None:
        rel = release("ug", 64, 48, seed=3)
        fig, info = grid_image_figure(rel)
        pix = np.concatenate([np.asarray(decode(lay)) for lay in image_layers(fig)])
        assert pix.shape == (64, 48)
        expected = log_levels(rel.density(), rel.grid, info["vmax"])[::-1]
        np.testing.assert_array_equal(pix, expected)
        assert info["n_shown"] == int(rel.leaf.sum())


def log_levels(values: np.ndarray, grid, zmax: float) -> np.ndarray:
    """The palette index of per-cell values on the maps' log scale of densities per km²."""
    from dpcore.data.maps import LogScale

    dens = values / grid.cell_area_km2()
    sc = LogScale.of(dens)
    assert sc.zmax == pytest.approx(zmax)
    return colour_levels(sc.z(dens) - sc.zmin, sc.zmax - sc.zmin)


class TestStrips:
    @pytest.mark.parametrize("bounds,rows", [
        (BOUNDS, 4096), (Bounds(-125.0, 24.4, -66.9, 49.4), 2048), (Bounds(10.0, -60.0, 20.0, 70.0), 1000),
        (Bounds(0.0, -1.0, 1.0, 1.0), 512),
    ])
    def test_strips_tile_the_rows_and_keep_cells_in_place(self, bounds: Bounds, rows: int) -> None:
        g = Grid(bounds, rows, 8)
        strips = mercator_strips(g)
        assert strips[0][0] == 0 and strips[-1][1] == rows
        assert all(a[1] == b[0] for a, b in zip(strips, strips[1:], strict=False))

        def merc(lat):
            return np.log(np.tan(np.pi / 4 + np.radians(lat) / 2))

        lat_e = g.lat_edges()
        worst = 0.0
        for r0, r1 in strips:
            # where a linear stretch in Mercator between the strip's edges puts each row edge
            f = (np.arange(r0, r1 + 1) - r0) / (r1 - r0)
            y = merc(lat_e[r0]) + f * (merc(lat_e[r1]) - merc(lat_e[r0]))
            drawn = np.degrees(2 * np.arctan(np.exp(y)) - np.pi / 2)
            worst = max(worst, float(np.max(np.abs(drawn - lat_e[r0:r1 + 1]))) / g.dlat)
        assert worst <= 0.1 + 1e-9  # STRIP_TOLERANCE_ROWS

    def test_strip_layers_stack_to_the_grid(self) -> None:
        rel = release("identity", 600, 20, seed=4, bounds=Bounds(-10.0, 30.0, 10.0, 60.0))
        fig, info = grid_image_figure(rel)
        layers = image_layers(fig)
        assert info["n_strips"] == len(layers) > 1
        sizes = [decode(lay).size for lay in layers]
        assert {w for w, _ in sizes} == {20} and sum(h for _, h in sizes) == 600
        # the strips run south to north, share their edges, and span the bounds
        assert layers[0].coordinates[3] == [-10.0, 30.0] and layers[-1].coordinates[0] == [-10.0, 60.0]
        for a, b in zip(layers, layers[1:], strict=False):
            assert a.coordinates[0] == b.coordinates[3] and a.coordinates[1] == b.coordinates[2]
        lat_e = rel.grid.lat_edges()
        for lay, (r0, r1) in zip(layers, mercator_strips(rel.grid), strict=True):
            assert lay.coordinates[0][1] == pytest.approx(lat_e[r1]) and lay.coordinates[3][1] == pytest.approx(lat_e[r0])
            assert decode(lay).size == (20, r1 - r0)


class TestChoice:
    def test_grid_densities_are_images(self) -> None:
        for mech in ("identity", "ug"):
            fig, info = release_map_figure(release(mech, 64, 64, seed=5))
            assert info["kind"] == "image" and image_layers(fig)

    def test_trees_within_the_cap_are_polygons(self) -> None:
        rel = release("htf", 64, 64, seed=6)
        assert rel.is_tree and int(rel.leaf.sum()) <= 10_000
        fig, info = release_map_figure(rel)
        assert info["kind"] == "polygons" and fig.data[0].type == "choroplethmap"
        assert not image_layers(fig)

    def test_partitions_beyond_the_cap_are_images(self) -> None:
        rel = release("htf", 64, 64, seed=6)
        n = int(rel.leaf.sum())
        _, info = release_map_figure(rel, max_polygons=n - 1)
        assert info["kind"] == "image" and info["n_shown"] == n

    def test_scale_top_is_finite_and_positive(self) -> None:
        rel = release("identity", 10, 10, seed=7, eps=1e-3)
        _, info = grid_image_figure(rel)
        assert math.isfinite(info["vmax"]) and info["vmax"] > 0


class TestHoverCap:
    def test_large_grids_hover_over_at_most_2500_blocks(self) -> None:
        """The default hover layer of a grid with more cells than HOVER_POINTS holds block sums (at most
        2,500 points, the cap that keeps the browser's draw short), and says how big the blocks are."""
        from dpcore.points.viz import HOVER_POINTS

        assert HOVER_POINTS == 2_500
        rel = release("identity", 120, 90, seed=4)
        fig, info = grid_image_figure(rel)
        tr = fig.data[0]
        assert info["hover_aggregated"] is True and len(tr.lon) == info["n_hover"] <= 2_500
        blocks = display_blocks(rel, 2_500)
        assert info["n_hover"] == len(blocks["noisy"])
        assert info["hover_cells"] == int(np.median(blocks["cells"]))
        custom = np.asarray(tr.customdata)
        np.testing.assert_array_equal(custom[:, 0], hover_integers(blocks["noisy"]))
        np.testing.assert_array_equal(custom[:, 1], hover_integers(blocks["lo"]))
        # every cell is in exactly one block: the block sums add up to the whole release
        assert custom[:, 0].astype(float).sum() == pytest.approx(float(rel.noisy[rel.leaf].sum()))

    @pytest.mark.parametrize("mech", ["ug", "identity"])
    def test_hover_block_sums_from_the_areas_equal_those_from_the_cells(self, mech: str, monkeypatch) -> None:
        """Few areas on a large grid: the block sums come from the areas' overlaps with the blocks, never
        from the cells; they equal the sums over the cells (prefix sums of the spread, display_blocks)."""
        import dpcore.points.viz as viz

        rel = release(mech, 200, 160, seed=6)
        assert len(rel.leaf_index()) > 100
        fast, _ = grid_image_figure(rel, hover_points=100)
        monkeypatch.setattr(viz, "_CELLS_PER_AREA", 10**12)  # the cells' path
        slow, _ = grid_image_figure(rel, hover_points=100)
        blocks = display_blocks(rel, 100)
        for fig in (fast, slow):
            custom = np.asarray(fig.data[0].customdata)
            for col, key in enumerate(("noisy", "lo", "hi")):
                # whole numbers as shown; a sum at a half may round either way by the path's last bit
                np.testing.assert_allclose(custom[:, col], blocks[key], rtol=0, atol=0.5 + 1e-6)

    def test_a_coarse_release_within_the_cap_hovers_per_area(self) -> None:
        rel = release("ug", 60, 40, seed=5)  # 2,400 cells: UG releases at most that many areas
        fig, info = grid_image_figure(rel)
        assert info["hover_aggregated"] is False
        assert info["n_hover"] == int(rel.leaf.sum()) <= 2_500


def test_polygons_and_image_of_one_release_share_unit_and_scale_and_skewed_counts_show() -> None:
    """Issue 26, item 5: a tree release drawn as polygons (up to the polygon cap) and as an image (beyond
    it) has one unit (points per km²) and one log scale; on skewed counts most released areas are not drawn
    in the first colour (a linear scale up to the 99th percentile drew them nearly all blank)."""
    from dpcore.points.viz import partition_figure

    rng = np.random.default_rng(5)
    counts = np.zeros((64, 64), dtype=np.int64)
    counts[:] = rng.poisson(0.5, size=(64, 64))
    counts[30:34, 30:34] += rng.poisson(3000, size=(4, 4))  # one dense centre: heavily skewed counts
    agg = Aggregate(grid=Grid(BOUNDS, 64, 64), counts=counts, n_outside=0, n_capped=0, sensitivity=1, user_cap=None)
    rel = release_with(catalog.get("points", "privtree"), agg, 1.0, {}, NoiseSource(5))
    poly, _ = partition_figure(rel)
    img, info = grid_image_figure(rel)
    p, m = poly.data[0], img.data[0].marker
    assert p.colorbar.title.text == m.colorbar.title.text == "points<br>per km² (log)"
    assert (p.zmin, p.zmax) == pytest.approx((m.cmin, m.cmax))
    assert list(p.colorbar.tickvals) == pytest.approx(list(m.colorbar.tickvals))
    # skewed counts show: the areas between 1/1,000 and 1/16 of the top density, which a linear scale of
    # 16 steps draws all in its first colour, take more than one colour, none the first
    dens = np.asarray(p.customdata[:, 6], dtype=float)
    mid = (dens >= dens.max() / 1000) & (dens < dens.max() / IMAGE_LEVELS)
    assert mid.sum() >= 5
    step = (p.zmax - p.zmin) / IMAGE_LEVELS
    levels = np.floor((np.asarray(p.z, dtype=float)[mid] - p.zmin) / step)
    assert levels.min() >= 1 and len(np.unique(levels)) >= 2


class TestCoarseImage:
    """Released areas coarser than the pixels (a UG release on a large grid) are drawn on a smaller
    image, each pixel the mean density of the cells it covers; a pixel per cell otherwise."""

    def test_ug_on_a_large_grid_is_drawn_with_fewer_pixels(self, monkeypatch) -> None:
        from dpcore.points import viz

        monkeypatch.setattr(viz, "MAX_IMAGE_SIDE", 32)
        rel = release("ug", 128, 128, seed=3, eps=0.01)
        sides = np.concatenate([rel.rects[rel.leaf_index(), 1] - rel.rects[rel.leaf_index(), 0],
                                rel.rects[rel.leaf_index(), 3] - rel.rects[rel.leaf_index(), 2]])
        assert sides.min() >= 8  # coarser than 4 x 4 cells
        fig, info = grid_image_figure(rel)
        assert info["image_shape"] == (32, 32)
        pix = np.asarray(decode(image_layers(fig)[0]))
        dens = rel.spread(rel.noisy, rel.leaf_index()).reshape(32, 4, 32, 4).mean(axis=(1, 3))
        from dpcore.data.maps import LogScale

        full = rel.spread(rel.noisy, rel.leaf_index()) / rel.grid.cell_area_km2()
        sc = LogScale.of(full)  # the scale of the cells, as the colour bar shows
        expected = colour_levels(sc.z(dens / rel.grid.cell_area_km2()) - sc.zmin, sc.zmax - sc.zmin)
        np.testing.assert_array_equal(pix, expected[::-1])

    def test_cells_as_fine_as_the_grid_keep_a_pixel_each(self, monkeypatch) -> None:
        from dpcore.points import viz

        monkeypatch.setattr(viz, "MAX_IMAGE_SIDE", 32)
        fig, info = grid_image_figure(release("identity", 128, 128, seed=3))
        assert info["image_shape"] == (128, 128)
        assert decode(image_layers(fig)[0]).size == (128, 128)


def test_hover_words_of_areas_of_one_cell_and_larger_ones() -> None:
    """The hover's numbers are sent as integers and its words in the template; areas of one cell mixed with
    larger ones say which each is (through ``text``), as before."""
    from dpcore.points.release import PartitionRelease
    from dpcore.privacy.budget import pure

    g = Grid(Bounds(-74.0, 40.6, -73.8, 40.8), 4, 4)
    rects = np.array([[0, 1, 0, 1], [0, 1, 1, 2], [1, 2, 0, 2], [0, 2, 2, 4], [2, 4, 0, 4]])
    noisy = np.array([2.5, -0.4, 7.0, 1234.5, 9.49])
    rel = PartitionRelease("x", "X", {}, g, pure(1), (), rects, np.zeros(5, dtype=int), np.ones(5, dtype=bool),
                           noisy, np.ones(5), np.ones(5), 1, None)
    fig, info = grid_image_figure(rel)
    tr = fig.data[0]
    assert info["hover_aggregated"] is False and "%{text}" in tr.hovertemplate
    assert list(tr.text) == ["one cell", "one cell", "one released area of 2 cells",
                             "one released area of 4 cells", "one released area of 8 cells"]
    custom = np.asarray(tr.customdata)
    assert custom.dtype.kind == "i" and custom[:, 0].tolist() == [3, 0, 7, 1235, 9]
    assert custom[:, 3].tolist() == [1, 1, 2, 4, 8]
