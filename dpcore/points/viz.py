"""Plotly figures for the app: maps that draw without the internet.

Every map uses the inline ``white-bg`` MapLibre style (no tiles, no glyphs) with
the domain outline and any uploaded boundaries as local GeoJSON line layers; a
web basemap is an explicit option.  Partitions are drawn as ONE Choroplethmap
trace; more than ``max_polygons`` leaves are summed into display blocks first
(post-processing of the release, so free), because MapLibre in software WebGL
slows down past ~10k polygons (ecosystem notes §2).

Grid densities (a release whose leaves are the cells of a lattice: Identity, UG, or
any partition with more leaves than the polygon cap) are drawn instead as an
**image layer** at the grid's full resolution (:func:`grid_image_figure`): one
pixel per grid cell, a PNG made from the per-cell released values, stretched by
MapLibre between the grid's corner coordinates, so zooming in shows single cells.
"""

from __future__ import annotations

import base64
import io
import math
from typing import Any

import numpy as np
import plotly.graph_objects as go

from dpcore.data.domain import (
    Bounds,
    Grid,
    block_edges,
    block_rects,
    paint_rects,
    prefix_sums,
    rect_sums_from_prefix,
)
from dpcore.data.domain import block_sums as block_sums_of_cells
from dpcore.data.maps import (
    COLORSCALE,
    OFFLINE_STYLE,
    WEB_STYLE,
    LogScale,
    choropleth_figure,
    zoom_box,
)
from dpcore.points.release import PartitionRelease
from dpcore.privacy.budget import two_significant
from dpcore.privacy.calibration import interval_half_width

MAX_POLYGONS = 10_000
#: the one unit of every points map (polygons, image layers, a series' periods): noisy points per km²
DENSITY_TITLE = "points<br>per km² (log)"


def outline_geojson(bounds: Bounds) -> dict[str, Any]:
    w, s, e, n = bounds.as_tuple()
    return {
        "type": "FeatureCollection",
        "features": [{
            "type": "Feature",
            "properties": {},
            "geometry": {"type": "Polygon", "coordinates": [[[w, s], [e, s], [e, n], [w, n], [w, s]]]},
        }],
    }


def _layers(bounds: Bounds, boundaries: dict[str, Any] | None) -> list[dict[str, Any]]:
    layers = []
    if boundaries is not None:
        layers.append({"sourcetype": "geojson", "source": boundaries, "type": "line",
                       "color": "#7a7a7a", "line": {"width": 0.6}})
    layers.append({"sourcetype": "geojson", "source": outline_geojson(bounds), "type": "line",
                   "color": "#1f4e79", "line": {"width": 2}})
    return layers


def _map_layout(fig: go.Figure, bounds: Bounds, boundaries: dict[str, Any] | None, basemap: bool,
                height: int = 600) -> go.Figure:
    zoom, centre = zoom_box(*bounds.as_tuple(), height_px=height)
    fig.update_layout(
        map={"style": WEB_STYLE if basemap else OFFLINE_STYLE, "zoom": zoom, "center": centre,
             "layers": _layers(bounds, boundaries)},
        margin={"l": 0, "r": 0, "t": 30, "b": 0},
        height=height,
    )
    return fig


def extent_figure(bounds: Bounds, boundaries: dict[str, Any] | None = None, *, basemap: bool = False,
                  height: int = 420) -> go.Figure:
    """The public extent only: the domain outline (and boundaries), no data."""
    w, s, e, n = bounds.as_tuple()
    fig = go.Figure(go.Scattermap(
        lon=[w, e, e, w, w], lat=[s, s, n, n, s], mode="lines",
        line={"width": 2, "color": "#1f4e79"}, hoverinfo="skip", name="domain",
    ))
    fig.update_layout(showlegend=False, title={"text": "Public domain (bounds you set)", "font": {"size": 14}})
    return _map_layout(fig, bounds, boundaries, basemap, height)


def display_blocks(release: PartitionRelease, max_polygons: int = MAX_POLYGONS,
                   idx: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Leaves to draw: the leaves themselves, or sums over display blocks when too many.

    Block SDs assume each leaf's noise spreads over its cells in proportion to
    area, which is exact when leaves are single cells and conservative otherwise.
    """
    idx = release.leaf_index() if idx is None else np.asarray(idx, dtype=np.int64)
    g = release.grid
    if len(idx) <= max_polygons:
        t = release.table(idx)
        return {
            "rects": release.rects[idx], "noisy": t["noisy_count"], "lo": t["ci95_low"],
            "hi": t["ci95_high"], "cells": t["cells"].astype(np.float64), "level": t["level"],
            "budget": t["budget"], "aggregated": np.zeros(len(idx), dtype=bool),
        }
    mr, mc = display_shape(g, max_polygons)
    rects = block_rects(g, mr, mc)
    dens = release.density(idx)
    # per-cell share of each leaf's variance: sd^2 / area spread over the leaf
    r = release.rects[idx]
    area = (r[:, 1] - r[:, 0]) * (r[:, 3] - r[:, 2])
    var_cell = np.zeros(g.shape)
    if len(idx) == g.n_cells:
        var_cell[r[:, 0], r[:, 2]] = release.sd[idx] ** 2 / area
    else:
        var_cell = paint_rects(r, release.sd[idx] ** 2 / area, g.shape)
    noisy = rect_sums_from_prefix(prefix_sums(dens), rects)
    sd = np.sqrt(np.maximum(rect_sums_from_prefix(prefix_sums(var_cell), rects), 0))
    half = interval_half_width("normal", sd)  # a block sums many leaves' noise
    cells = ((rects[:, 1] - rects[:, 0]) * (rects[:, 3] - rects[:, 2])).astype(np.float64)
    return {"rects": rects, "noisy": noisy, "lo": noisy - half, "hi": noisy + half, "cells": cells,
            "level": np.zeros(len(rects), dtype=np.int64), "budget": np.full(len(rects), np.nan),
            "aggregated": np.ones(len(rects), dtype=bool)}


def display_shape(g: Grid, max_polygons: int) -> tuple[int, int]:
    """Block rows x cols with about the grid's aspect ratio and at most ``max_polygons`` blocks."""
    ratio = g.rows / g.cols
    mr = max(1, min(g.rows, int(math.sqrt(max_polygons * ratio))))
    mc = max(1, min(g.cols, max_polygons // mr))
    return mr, mc


def rect_feature_collection(grid: Grid, rects: np.ndarray) -> dict[str, Any]:
    """Rectangles as a FeatureCollection with only ``id`` (values go in z/customdata)."""
    box = np.round(grid.rect_lonlat(rects), 6).tolist()
    return {
        "type": "FeatureCollection",
        "features": [
            {"type": "Feature", "id": i,
             "geometry": {"type": "Polygon", "coordinates": [[[w, s], [e, s], [e, n], [w, n], [w, s]]]}}
            for i, (w, s, e, n) in enumerate(box)
        ],
    }


def partition_figure(
    release: PartitionRelease,
    *,
    boundaries: dict[str, Any] | None = None,
    basemap: bool = False,
    max_polygons: int = MAX_POLYGONS,
    opacity: float = 0.75,
    height: int = 600,
    depth: int | None = None,
) -> tuple[go.Figure, dict[str, Any]]:
    """The released partition coloured by noisy density (count per km², on the log scale of every map).

    ``depth`` shows a tree's partition at that depth (its nodes there plus the
    leaves above); None shows the leaves.  Returns the figure and facts for the
    caption (polygons drawn, aggregated or not).  Negative noisy counts are drawn
    as 0 (display only; exports keep them).
    """
    idx = release.frontier(depth) if depth is not None else release.leaf_index()
    blocks = display_blocks(release, max_polygons, idx)
    g = release.grid
    cell_km2 = g.cell_area_km2()
    area_km2 = blocks["cells"] * cell_km2
    dens = np.maximum(blocks["noisy"], 0) / area_km2
    n = len(blocks["noisy"])
    fc = rect_feature_collection(g, blocks["rects"])
    sym = release.cost.symbol
    budgets = np.nan_to_num(blocks["budget"])
    labels = {float(b): f"{sym} = {two_significant(float(b))}" for b in np.unique(budgets)}  # few distinct budgets
    budget_txt = np.where(np.isfinite(blocks["budget"]), [labels[float(b)] for b in budgets], "sum of several counts")
    custom = np.empty((n, 7), dtype=object)
    for j, col in enumerate((blocks["noisy"], blocks["lo"], blocks["hi"], area_km2)):
        custom[:, j] = np.asarray(col, dtype=np.float64)
    custom[:, 4] = np.asarray(blocks["level"]).astype(int)
    custom[:, 5] = budget_txt
    custom[:, 6] = dens
    scale = LogScale.of(dens)  # the same unit and scale as the image maps (issue 26, item 5)
    fig = choropleth_figure(
        fc,
        customdata=custom,
        locations=np.arange(n),
        z=scale.z(dens),
        colorscale=COLORSCALE,
        zmin=scale.zmin,
        zmax=scale.zmax,
        marker={"opacity": opacity, "line": {"width": 0.3 if n <= 2500 else 0, "color": "#999"}},
        colorbar=scale.colorbar(DENSITY_TITLE),
        hovertemplate=(
            "noisy count: %{customdata[0]:,.0f}<br>"
            "95% interval: %{customdata[1]:,.0f} to %{customdata[2]:,.0f}<br>"
            "area: %{customdata[3]:,.3f} km²<br>density: %{customdata[6]:,.1f} per km²<br>"
            "depth: %{customdata[4]} · budget: %{customdata[5]}<extra></extra>"
        ),
    )
    fig = _map_layout(fig, g.bounds, boundaries, basemap, height)
    info = {"n_polygons": n, "aggregated": bool(blocks["aggregated"].any()),
            "n_leaves": int(release.leaf.sum()), "n_shown": int(len(idx))}
    return fig, info


def true_density_figure(counts: np.ndarray, grid: Grid, *, max_side: int = 256, height: int = 420) -> go.Figure:
    """CURATOR-ONLY preview of the true point density (log scale), never for publication."""
    f_r = max(1, math.ceil(grid.rows / max_side))
    f_c = max(1, math.ceil(grid.cols / max_side))
    rr = math.ceil(grid.rows / f_r) * f_r
    cc = math.ceil(grid.cols / f_c) * f_c
    padded = np.zeros((rr, cc))
    padded[: grid.rows, : grid.cols] = counts
    small = padded.reshape(rr // f_r, f_r, cc // f_c, f_c).sum(axis=(1, 3))
    lon = grid.bounds.west + (np.arange(small.shape[1]) + 0.5) * grid.dlon * f_c
    lat = grid.bounds.south + (np.arange(small.shape[0]) + 0.5) * grid.dlat * f_r
    fig = go.Figure(go.Heatmap(
        z=np.log10(1 + small), x=lon, y=lat, colorscale="Greys", showscale=False,
        hovertemplate="lon %{x:.4f}, lat %{y:.4f}<extra>true density (not for publication)</extra>",
    ))
    fig.update_layout(
        title={"text": "True point density — NOT FOR PUBLICATION", "font": {"size": 14, "color": "#b00020"}},
        height=height, margin={"l": 40, "r": 10, "t": 40, "b": 30},
        xaxis={"title": "longitude"}, yaxis={"title": "latitude", "scaleanchor": "x",
                                            "scaleratio": 1 / max(math.cos(math.radians(
                                                (grid.bounds.south + grid.bounds.north) / 2)), 0.05)},
    )
    return fig


# ---------------------------------------------------------------- grid densities as an image layer

#: The image layer's colours: the colour scale cut into this many equal steps of value (the PNG's
#: palette; the colour bar shows the same steps, so a colour reads back as a range of values).
IMAGE_LEVELS = 16
#: The grid's rows are equal steps of latitude, but MapLibre stretches an image linearly in Web
#: Mercator between its corners; the image is cut into horizontal strips, each with its own
#: corners, so that no cell edge is drawn further than this fraction of a row from its place.
STRIP_TOLERANCE_ROWS = 0.1
#: zlib's run-length strategy (``zlib.Z_RLE``), for :func:`png_bytes`.
Z_RLE = 3
#: Points of the invisible hover layer (block centres; the leaves themselves when fewer).  Each point
#: costs the browser time to draw the map: in headless Chromium with software WebGL, 10,000 points took
#: about 0.4 s more than 2,500 to draw a 1,024 × 1,024 image map (benchmarks/results/map_draw.md).
HOVER_POINTS = 2_500
#: The image layer has at most this many pixels a side when the released areas are coarser than its
#: pixels (:func:`image_factor`): a UG release on a 4,096² grid is 4,761 areas, which a 1,024² image
#: draws as well as a 4,096² one at a sixteenth of the pixels the browser decodes and uploads.
MAX_IMAGE_SIDE = 1_024
#: Plotly's ``YlOrRd`` (ColorBrewer), light to dark: the same colours as the polygon maps.
_YLORRD = ((255, 255, 204), (255, 237, 160), (254, 217, 118), (254, 178, 76), (253, 141, 60),
           (252, 78, 42), (227, 26, 28), (189, 0, 38), (128, 0, 38))


def image_palette(levels: int = IMAGE_LEVELS) -> np.ndarray:
    """``(levels, 3)`` uint8 RGB colours sampled at the step centres of the YlOrRd scale.

    >>> image_palette(2).tolist()
    [[254, 217, 118], [227, 26, 28]]
    """
    anchors = np.asarray(_YLORRD, dtype=np.float64)
    at = (np.arange(levels) + 0.5) / levels
    pos = np.linspace(0.0, 1.0, len(anchors))
    rgb = [np.interp(at, pos, anchors[:, j]) for j in range(3)]
    return np.rint(np.column_stack(rgb)).astype(np.uint8)


def stepped_colorscale(palette: np.ndarray) -> list[list[Any]]:
    """A plotly colour scale with one flat step per palette colour (for the colour bar)."""
    n = len(palette)
    out: list[list[Any]] = []
    for k, (r, g, b) in enumerate(palette.tolist()):
        out += [[k / n, f"rgb({r},{g},{b})"], [(k + 1) / n, f"rgb({r},{g},{b})"]]
    return out


def colour_levels(values: np.ndarray, vmax: float, levels: int = IMAGE_LEVELS) -> np.ndarray:
    """Palette index of each value: ``levels`` equal steps of ``[0, vmax]``; values at or below 0
    get the first step (negative noisy counts are drawn as 0), values at or above ``vmax`` the last.

    >>> colour_levels(np.array([-3.0, 0.0, 0.4, 5.0, 9.9, 10.0, 50.0]), 10.0, 4).tolist()
    [0, 0, 0, 2, 3, 3, 3]
    """
    scaled = np.multiply(values, levels / vmax)
    np.clip(scaled, 0, levels - 1, out=scaled)
    return scaled.astype(np.uint8)  # truncation = floor for values >= 0


def png_bytes(index: np.ndarray, palette: np.ndarray) -> bytes:
    """A palette PNG of a 2-D array of palette indices (its first row is the image's top).

    Encoded with Pillow (installed with Streamlit and Matplotlib) with zlib's run-length
    strategy (``Z_RLE``): on a 4,096 × 4,096 grid of noisy values the default strategy took
    1.3 times longer at level 1 and 6 times longer at level 6 for files a few per cent smaller
    or larger, and runs of equal cells (coarse grids, empty areas) still compress to little.
    Palettes of at most 16 colours are written 4 bits per pixel.
    """
    from PIL import Image  # only the maps need it

    h, w = index.shape
    img = Image.frombytes("P", (w, h), np.ascontiguousarray(index, dtype=np.uint8).tobytes())
    img.putpalette(palette.astype(np.uint8).ravel().tolist())
    buf = io.BytesIO()
    extra = {"bits": 4} if len(palette) <= 16 else {}
    img.save(buf, format="PNG", compress_level=1, compress_type=Z_RLE, **extra)
    return buf.getvalue()


def mercator_strips(grid: Grid, tolerance_rows: float = STRIP_TOLERANCE_ROWS) -> list[tuple[int, int]]:
    """Row ranges ``(r0, r1)`` (south to north) that tile the grid, each small enough that a
    linear stretch in Web Mercator between its edges misplaces no row edge by more than
    ``tolerance_rows`` of a row.

    Stretching a strip of ``h`` radians of latitude linearly in Mercator ``y`` misplaces its
    middle by about ``tan(φ) h² / 8`` radians (``y'' / y' = tan φ``), so a strip holds at most
    ``sqrt(8 tol / (tan φ · row))`` rows, with ``φ`` the largest absolute latitude of the grid.

    >>> from dpcore.data.domain import Bounds
    >>> mercator_strips(Grid(Bounds(-74.06, 40.56, -73.70, 40.92), 4096, 4096))[:2]
    [(0, 775), (775, 1550)]
    """
    b = grid.bounds
    tan_phi = math.tan(math.radians(min(max(abs(b.south), abs(b.north)), 85.0)))
    row = math.radians(grid.dlat)
    k = grid.rows if tan_phi * row <= 0 else max(1, int(math.sqrt(8 * tolerance_rows / (tan_phi * row))))
    return [(r0, min(r0 + k, grid.rows)) for r0 in range(0, grid.rows, k)]


def is_lattice(release: PartitionRelease, idx: np.ndarray) -> bool:
    """True when the areas ``idx`` (a tiling of the grid) are the cells of a lattice: row bands ×
    column bands, e.g. Identity's cells or UG's coarser grid."""
    g = release.grid
    if len(idx) == g.n_cells:
        return True  # a tiling with one area per cell
    r = release.rects[idx]
    rows = np.unique(r[:, 0] * (g.rows + 1) + r[:, 1])
    cols = np.unique(r[:, 2] * (g.cols + 1) + r[:, 3])
    return len(rows) * len(cols) == len(idx)  # distinct disjoint areas: every band pair is one area


#: Hover block sums come from the areas (O(areas)) when the grid has at least this many cells per area
#: (UG's 4,761 areas on a 4,096² grid), else from the grid's per-cell values (O(cells): Identity).
_CELLS_PER_AREA = 16


def _hover_blocks(release: PartitionRelease, idx: np.ndarray, values: np.ndarray | None,
                  hover_points: int) -> dict[str, np.ndarray]:
    """:func:`display_blocks` for the hover layer: block sums from the areas' overlaps with the blocks
    (:meth:`PartitionRelease.block_sums`, e.g. UG's 4,761 areas on a 4,096² grid), or, for areas of a
    few cells (Identity: one each), by ``np.add.reduceat`` over the per-cell ``values`` (the grid's values, None
    when they were not made: the image was made from the areas); the same numbers as
    :func:`display_blocks`' prefix sums, a fraction of the time on a 4,096 × 4,096 grid."""
    if len(idx) <= hover_points:
        return display_blocks(release, hover_points, idx)
    g = release.grid
    mr, mc = display_shape(g, hover_points)
    re, ce = block_edges(g.rows, mr), block_edges(g.cols, mc)
    cells_path = values is not None and g.n_cells < _CELLS_PER_AREA * len(idx)  # Identity: the cells are the areas

    def block_sums(per_area: np.ndarray, per_cell: np.ndarray | None = None) -> np.ndarray:
        if not cells_path:
            return release.block_sums(per_area, idx, re, ce).ravel()
        a = release.spread(per_area, idx) if per_cell is None else per_cell
        return block_sums_of_cells(a, re, ce).ravel()

    noisy = block_sums(release.noisy, values)
    rects = block_rects(g, mr, mc)
    cells = ((rects[:, 1] - rects[:, 0]) * (rects[:, 3] - rects[:, 2])).astype(np.float64)
    sd_areas = release.sd if len(idx) == release.n_rects else release.sd[idx]
    if len(idx) == g.n_cells and sd_areas.min() == sd_areas.max():
        var = sd_areas[0] ** 2 * cells  # one area per cell, all with the same noise (Identity)
    else:
        var = block_sums(release.sd ** 2)
    sd = np.sqrt(np.maximum(var, 0))
    half = interval_half_width("normal", sd)  # a block sums many areas' noise
    return {"rects": rects, "noisy": noisy, "lo": noisy - half, "hi": noisy + half, "cells": cells,
            "aggregated": np.ones(len(rects), dtype=bool)}


def hover_integers(values: np.ndarray) -> np.ndarray:
    """``values`` rounded to whole numbers as the hover's ``,.0f`` format shows them (JavaScript's
    ``toFixed``: the nearest integer, halves away from zero), so the figure carries the digits shown
    and not seventeen more.

    >>> hover_integers(np.array([2.5, -2.5, 0.49999999999999994, -0.3, 1234.5678])).tolist()
    [3, -3, 0, 0, 1235]
    """
    v = np.asarray(values, dtype=np.float64)
    a = np.abs(v)
    n = np.floor(a)
    n += (a - n) >= 0.5  # exact: a - floor(a) loses nothing
    out = n.astype(np.int64)
    np.negative(out, out=out, where=v < 0)
    return out


def grid_image_layers(values: np.ndarray, grid: Grid, vmax: float, *, levels: int = IMAGE_LEVELS,
                      opacity: float = 0.8) -> list[dict[str, Any]]:
    """MapLibre image layers (PNG data URLs) drawing ``values`` (grid shape, row 0 south) one
    pixel per cell, in :func:`mercator_strips`; each layer's corners are its strip's lon/lat
    corners, clockwise from the top left as MapLibre expects."""
    palette = image_palette(levels)
    lat_e = grid.lat_edges()
    w, e = grid.bounds.west, grid.bounds.east
    layers = []
    for r0, r1 in mercator_strips(grid):
        index = colour_levels(values[r0:r1][::-1], vmax, levels)  # PNG rows run north to south
        s, n = float(lat_e[r0]), float(lat_e[r1])
        layers.append({
            "sourcetype": "image", "type": "raster", "opacity": opacity, "below": "traces",
            "source": "data:image/png;base64," + base64.b64encode(png_bytes(index, palette)).decode("ascii"),
            "coordinates": [[w, n], [e, n], [e, s], [w, s]],
        })
    return layers


def image_factor(rects: np.ndarray, rows: int, cols: int, max_side: int | None = None) -> int:
    """How many grid cells a side one pixel of the image covers: 1 (a pixel per cell), or the
    smallest ``f`` dividing the grid that brings it to at most ``max_side`` pixels a side, when every
    released area (``rects``, ``(r0, r1, c0, c1)`` in cells) is at least ``2 f`` cells a side, so that
    each area keeps pixels of its own colour and only its edge pixels mix it with a neighbour's
    (``max_side``: :data:`MAX_IMAGE_SIDE`).

    >>> ug = np.array([[0, 64, 0, 64], [64, 4096, 0, 4096], [0, 64, 64, 4096]])
    >>> image_factor(ug, 4096, 4096), image_factor(ug[:, [0, 1, 0, 1]] // 64, 4096, 4096)
    (4, 1)
    """
    max_side = MAX_IMAGE_SIDE if max_side is None else max_side
    f = max(-(-rows // max_side), -(-cols // max_side))
    while f > 1 and (rows % f or cols % f):
        f += 1
        if f > min(rows, cols):
            return 1
    if f <= 1 or not len(rects):
        return 1
    smallest = min(int((rects[:, 1] - rects[:, 0]).min()), int((rects[:, 3] - rects[:, 2]).min()))
    return f if smallest >= 2 * f else 1


def grid_image_figure(
    release: PartitionRelease,
    *,
    boundaries: dict[str, Any] | None = None,
    basemap: bool = False,
    depth: int | None = None,
    opacity: float = 0.8,
    height: int = 600,
    hover_points: int = HOVER_POINTS,
) -> tuple[go.Figure, dict[str, Any]]:
    """The released counts per grid cell as an image layer at the grid's full resolution.

    Each pixel is one cell of the public grid, coloured by the released count of the area that
    holds it spread evenly over the area's cells (``PartitionRelease.density``, the uniformity
    assumption of Qardaji, Yang & Li, ICDE 2013, §III), per km², in :data:`IMAGE_LEVELS` equal steps
    of the log scale the polygon maps use (:class:`dpcore.data.maps.LogScale`: four decades up to the
    largest); negative noisy counts are drawn as 0.  The grid is in lon/lat, so the
    image is cut into strips that MapLibre's Mercator stretch keeps in place (:func:`mercator_strips`);
    a heatmap on cartesian axes would lose the map context.  Hovering shows an invisible layer
    of at most ``hover_points`` points: each released area's noisy count and 95 % interval, or
    when there are more areas, block sums with the interval of the sum (:func:`display_blocks`);
    it also carries the colour bar.  Post-processing only: nothing here touches the data.

    Returns the figure and facts for the caption.
    """
    idx = release.frontier(depth) if depth is not None else release.leaf_index()
    g = release.grid
    cell_km2 = g.cell_area_km2()
    f = image_factor(release.rects[idx], g.rows, g.cols)
    values: np.ndarray | None = None
    if f > 1:  # areas coarser than the pixels: the mean density of each f x f block of cells, from the
        # areas' overlaps with the blocks (the grid's cells are never made: 16.8 M on a 4,096² grid)
        r = release.rects[idx]
        top = float(np.max(release.noisy[idx] / ((r[:, 1] - r[:, 0]) * (r[:, 3] - r[:, 2]))))
        shown = release.block_sums(release.noisy, idx, np.arange(0, g.rows + 1, f), np.arange(0, g.cols + 1, f))
        shown /= f * f
        shown_grid = Grid(g.bounds, g.rows // f, g.cols // f)
    else:
        values = release.spread(release.noisy, idx)  # = release.density(idx), faster on big grids
        top = float(np.max(values))
        shown, shown_grid = values, g
    # per km², log: the polygon maps' unit and scale (issue 26, item 5), up to the densest cell
    scale = LogScale.of(np.array([top / cell_km2]))
    layers = grid_image_layers(scale.z(shown / cell_km2) - scale.zmin, shown_grid, scale.zmax - scale.zmin,
                               opacity=opacity)
    vmax = scale.zmax
    palette = image_palette()

    blocks = _hover_blocks(release, idx, values, hover_points)
    box = g.rect_lonlat(blocks["rects"])
    lon, lat = (box[:, 0] + box[:, 2]) / 2, (box[:, 1] + box[:, 3]) / 2
    cells = blocks["cells"]
    # numbers only, as the hover shows them (a numpy array of objects mixing numbers and words, in full
    # precision, was 0.2 of the figure's 0.3 MB and about 0.3 s more of the browser's draw at 2,500 points)
    custom = np.column_stack([hover_integers(blocks[k]) for k in ("noisy", "lo", "hi")] + [cells.astype(np.int64)])
    text = None
    if blocks["aggregated"].any():
        what = "sum over %{customdata[3]:,.0f} cells"
    elif (cells == 1).all():
        what = "one cell"
    else:
        what = "one released area of %{customdata[3]:,.0f} cells"
        if (cells == 1).any():  # some areas of one cell: said so for those
            what = "%{text}"
            text = np.where(cells == 1, "one cell", [f"one released area of {int(c):,} cells" for c in cells])
    zoom, centre = zoom_box(*g.bounds.as_tuple(), height_px=height)
    px_per_deg = 512.0 * 2.0 ** zoom / 360.0
    size = float(np.clip(np.median(box[:, 2] - box[:, 0]) * px_per_deg, 4.0, 40.0))
    fig = go.Figure(go.Scattermap(
        lon=np.round(lon, 6), lat=np.round(lat, 6), mode="markers", customdata=custom,
        text=text,
        marker={"size": size, "opacity": 0, "color": scale.z(np.maximum(blocks["noisy"], 0) / (cells * cell_km2)),
                "colorscale": stepped_colorscale(palette), "cmin": scale.zmin, "cmax": scale.zmax,
                "showscale": True, "colorbar": scale.colorbar(DENSITY_TITLE)},
        hovertemplate=("noisy count: %{customdata[0]:,.0f}<br>"
                       "95% interval: %{customdata[1]:,.0f} to %{customdata[2]:,.0f}<br>"
                       f"{what}<extra></extra>"),
        name="released counts",
    ))
    fig = _map_layout(fig, g.bounds, boundaries, basemap, height)
    # assigned, not update_layout: an update merges list items into the existing layers by position
    fig.layout.map.layers = layers + [lay.to_plotly_json() for lay in fig.layout.map.layers]
    info = {"kind": "image", "image_shape": (shown_grid.rows, shown_grid.cols), "n_strips": len(layers), "vmax": vmax,
            "png_bytes": sum(len(lay["source"]) for lay in layers) * 3 // 4,
            "n_hover": len(cells), "hover_aggregated": bool(blocks["aggregated"].any()),
            "hover_cells": int(np.median(cells)),
            "n_polygons": 0, "aggregated": False,
            "n_leaves": int(release.leaf.sum()), "n_shown": int(len(idx))}
    return fig, info


def release_map_figure(
    release: PartitionRelease,
    *,
    boundaries: dict[str, Any] | None = None,
    basemap: bool = False,
    depth: int | None = None,
    max_polygons: int = MAX_POLYGONS,
) -> tuple[go.Figure, dict[str, Any]]:
    """The Map page's figure: polygons (:func:`partition_figure`) for a tree's partition or any
    partition that is not a lattice (adaptive grids) of at most ``max_polygons`` areas, so that
    the areas' edges show; otherwise (grid densities, and partitions beyond the cap) the
    full-resolution image layer (:func:`grid_image_figure`).
    ``info["kind"]`` says which ("polygons" or "image")."""
    idx = release.frontier(depth) if depth is not None else release.leaf_index()
    if len(idx) <= max_polygons and (release.is_tree or not is_lattice(release, idx)):
        fig, info = partition_figure(release, boundaries=boundaries, basemap=basemap, depth=depth,
                                     max_polygons=max_polygons)
        return fig, info | {"kind": "polygons"}
    return grid_image_figure(release, boundaries=boundaries, basemap=basemap, depth=depth)


def rects_density(frame: Any) -> np.ndarray:
    """Noisy density (points per km², negatives drawn as 0) of released rectangles given as a
    table with ``west, south, east, north, noisy_count`` (a published ``release.csv``).

    >>> import pandas as pd
    >>> d = rects_density(pd.DataFrame({"west": [0.0], "south": [0.0], "east": [0.01], "north": [0.01],
    ...                                 "noisy_count": [12.0]}))
    >>> round(float(d[0]), 2)
    9.75
    """
    w, s, e, n = (np.asarray(frame[c], dtype=np.float64) for c in ("west", "south", "east", "north"))
    km2 = np.abs(e - w) * 111.32 * np.cos(np.radians((s + n) / 2)) * np.abs(n - s) * 110.57
    return np.maximum(np.asarray(frame["noisy_count"], dtype=np.float64), 0) / np.maximum(km2, 1e-12)


def rects_figure(frame: Any, bounds: Bounds, *, boundaries: dict[str, Any] | None = None, basemap: bool = False,
                 zmax: float | None = None, height: int = 520, title: str | None = None) -> go.Figure:
    """A published ``release.csv``'s leaves on a map that draws offline (one period of a series).

    Built from the published table only (a re-served period draws as it was published):
    ``frame`` holds ``west, south, east, north, noisy_count, ci95_low, ci95_high`` and optionally
    ``leaf``; ``zmax`` fixes the colour scale (the same for every period of a series).
    """
    if "leaf" in frame.columns:
        frame = frame[frame["leaf"].astype(str).str.lower().isin(("true", "1"))]
    frame = frame.head(MAX_POLYGONS)
    box = frame[["west", "south", "east", "north"]].to_numpy(dtype=np.float64).round(6).tolist()
    fc = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "id": i, "geometry": {"type": "Polygon",
                                                  "coordinates": [[[w, s], [e, s], [e, n], [w, n], [w, s]]]}}
        for i, (w, s, e, n) in enumerate(box)]}
    dens = rects_density(frame)
    custom = np.column_stack([frame[["noisy_count", "ci95_low", "ci95_high"]].to_numpy(dtype=np.float64), dens])
    scale = LogScale.of([zmax] if zmax and zmax > 0 else dens)  # one scale for every period of a series
    fig = choropleth_figure(
        fc, locations=np.arange(len(box)), z=scale.z(dens), customdata=custom, colorscale=COLORSCALE,
        zmin=scale.zmin, zmax=scale.zmax,
        marker={"opacity": 0.75, "line": {"width": 0.3 if len(box) <= 2500 else 0, "color": "#999"}},
        colorbar=scale.colorbar(DENSITY_TITLE),
        hovertemplate=("noisy count: %{customdata[0]:,.0f}<br>95% interval: %{customdata[1]:,.0f} to "
                       "%{customdata[2]:,.0f}<br>density: %{customdata[3]:,.1f} per km²<extra></extra>"),
    )
    if title:
        fig.update_layout(title={"text": title, "font": {"size": 14}})
    return _map_layout(fig, bounds, boundaries, basemap, height)
