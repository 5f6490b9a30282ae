"""Plotly figures for the app: maps that draw without the internet.

Every map uses the inline ``white-bg`` MapLibre style (no tiles, no glyphs) with
the domain outline and any uploaded boundaries as local GeoJSON line layers; a
web basemap is an explicit option.  Partitions are drawn as ONE Choroplethmap
trace; more than ``max_polygons`` leaves are summed into display blocks first
(post-processing of the release, so free), because MapLibre in software WebGL
slows down past ~10k polygons (ecosystem notes §2).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import plotly.graph_objects as go

from dpcore.data.domain import Bounds, Grid, block_rects, prefix_sums, rect_sums_from_prefix
from dpcore.points.release import PartitionRelease
from dpcore.privacy.budget import two_significant
from dpcore.privacy.calibration import interval_half_width

OFFLINE_STYLE = "white-bg"
WEB_STYLE = "open-street-map"
MAX_POLYGONS = 10_000
COLORSCALE = "YlOrRd"


def _zoom_for(bounds: Bounds, width_px: int = 900, height_px: int = 600) -> tuple[float, dict[str, float]]:
    """Zoom level and centre that fit ``bounds`` (Web Mercator, 512-px world at zoom 0)."""
    return _zoom_box(bounds.west, bounds.south, bounds.east, bounds.north, width_px=width_px, height_px=height_px)


def _zoom_box(west: float, south: float, east: float, north: float, *, width_px: int = 900,
              height_px: int = 600) -> tuple[float, dict[str, float]]:
    """Zoom and centre that fit a lon/lat box into ``width_px × height_px`` pixels."""
    def merc(lat: float) -> float:
        lat = max(min(lat, 85.0), -85.0)
        return math.log(math.tan(math.pi / 4 + math.radians(lat) / 2))

    lon_span = max(east - west, 1e-9)
    y_span = max(merc(north) - merc(south), 1e-9)
    z_lon = math.log2(width_px * 360.0 / (512.0 * lon_span))
    z_lat = math.log2(height_px * 2 * math.pi / (512.0 * y_span))
    zoom = max(0.0, min(z_lon, z_lat) - 0.15)
    centre = {"lon": (west + east) / 2, "lat": (south + north) / 2}
    return zoom, centre


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
    zoom, centre = _zoom_for(bounds, height_px=height)
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


def light_outlines(frame: Any, bounds: Bounds | None = None, *, fraction: float = 1 / 1500) -> dict[str, Any]:
    """Public boundaries (a GeoDataFrame) as a light GeoJSON for a map's line layer: in lon/lat, clipped to
    ``bounds`` (padded by a quarter) when given, and simplified to about ``fraction`` of the view, so that a
    city's or a country's outlines stay cheap to send to the browser and to draw (Douglas–Peucker)."""
    g = frame.geometry
    if g.crs is not None and not g.crs.equals("EPSG:4326"):
        g = g.to_crs("EPSG:4326")
    g = g[g.notna() & ~g.is_empty]
    if bounds is not None:
        w, s, e, n = bounds.as_tuple()
        pw, ph = (e - w) / 4, (n - s) / 4
        g = g.cx[w - pw:e + pw, s - ph:n + ph]
        span = max(e - w, n - s)
    else:
        b = g.total_bounds if len(g) else (0.0, 0.0, 1.0, 1.0)
        span = max(b[2] - b[0], b[3] - b[1])
    g = g.simplify(max(span, 1e-6) * fraction, preserve_topology=False)
    return g[~g.is_empty].__geo_interface__


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
        d = np.zeros((g.rows + 1, g.cols + 1))
        v = release.sd[idx] ** 2 / area
        np.add.at(d, (r[:, 0], r[:, 2]), v)
        np.add.at(d, (r[:, 1], r[:, 2]), -v)
        np.add.at(d, (r[:, 0], r[:, 3]), -v)
        np.add.at(d, (r[:, 1], r[:, 3]), v)
        var_cell = np.cumsum(np.cumsum(d, axis=0), axis=1)[:-1, :-1]
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
    """The released partition coloured by noisy density (count per km²).

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
    custom = np.empty((n, 6), dtype=object)
    for j, col in enumerate((blocks["noisy"], blocks["lo"], blocks["hi"], area_km2)):
        custom[:, j] = np.asarray(col, dtype=np.float64)
    custom[:, 4] = np.asarray(blocks["level"]).astype(int)
    custom[:, 5] = budget_txt
    fig = go.Figure(go.Choroplethmap(
        geojson=fc,
        locations=np.arange(n),
        z=dens,
        customdata=custom,
        colorscale=COLORSCALE,
        zmin=0,
        zmax=float(np.quantile(dens, 0.99)) if n > 1 and np.quantile(dens, 0.99) > 0 else None,
        marker={"opacity": opacity, "line": {"width": 0.3 if n <= 2500 else 0, "color": "#999"}},
        colorbar={"title": {"text": "points<br>per km²"}, "thickness": 14},
        hovertemplate=(
            "noisy count: %{customdata[0]:,.0f}<br>"
            "95% interval: %{customdata[1]:,.0f} to %{customdata[2]:,.0f}<br>"
            "area: %{customdata[3]:,.3f} km²<br>density: %{z:,.1f} per km²<br>"
            "depth: %{customdata[4]} · budget: %{customdata[5]}<extra></extra>"
        ),
    ))
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
