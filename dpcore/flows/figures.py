"""Figures of an O/D release: the largest flows on an offline map, and the O/D matrix.

Maps use the inline ``white-bg`` MapLibre style (no tiles, no glyphs: no map text) with local
boundaries as line layers.  Plotly draws one line width per trace, so the flows are binned into
a few width classes by their noisy count, one ``Scattermap`` trace per class.  Everything drawn
is the release (noisy counts) and public geography (area centroids, boundaries): post-processing,
free.  The view is fitted to the public centroids, never to where the data are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from dpcore.data.maps import OFFLINE_STYLE, WEB_STYLE, zoom_box
from dpcore.errors import ParameterError
from dpcore.flows.mechanisms.common import ODRelease

__all__ = ["FLOW_COLOURS", "MAX_HEATMAP_SIDE", "extent_figure", "flow_classes", "flow_map", "od_heatmap"]

#: Colours of the width classes, light (small flows) to dark (large flows).
FLOW_COLOURS = ("#fdae6b", "#fd8d3c", "#e6550d", "#b63a06", "#7f2704")
#: Line widths (px) of the classes, thin to thick.
FLOW_WIDTHS = (1.2, 2.2, 3.6, 5.4, 8.0)
#: Largest number of areas per side the heatmap draws.
MAX_HEATMAP_SIDE = 300
#: How far a flow line bends sideways (fraction of its length), so A→B and B→A do not overlap.
BEND = 0.12
#: Positions along a flow line at which the arc is sampled.
ARC = np.linspace(0.0, 1.0, 9)
Coords = Mapping[int, tuple[Any, Any]]


def _fmt(x: float) -> str:
    return f"{x:,.0f}"


def _round2(x: np.ndarray) -> np.ndarray:
    """Round to two significant digits (class edges people can read: 1,200, not 1,187)."""
    x = np.asarray(x, dtype=float)
    mag = 10.0 ** np.floor(np.log10(np.maximum(np.abs(x), 1.0)))
    return np.round(x / mag * 10.0) * mag / 10.0


def flow_classes(values: np.ndarray, k: int = 5) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Bin positive flow values into at most ``k`` classes of increasing size.

    Edges are spaced geometrically between the smallest and the largest value (flows span
    orders of magnitude; a line twice as thick means a flow several times larger) and rounded
    to two significant digits; empty classes are dropped.  Returns the class of every value
    (0 = smallest) and the ``(low, high)`` range of the values in each class.
    """
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return np.zeros(0, dtype=np.int64), []
    lo, hi = float(v.min()), float(v.max())
    k = max(1, min(int(k), np.unique(v).size))
    if k == 1 or hi <= lo:
        return np.zeros(v.size, dtype=np.int64), [(int(lo), int(hi))]
    base = max(lo, 1.0)
    edges = _round2(np.geomspace(base, max(hi, base + 1.0), k + 1)[1:-1])
    edges = np.unique(edges[(edges > lo) & (edges <= hi)])
    cls = np.searchsorted(edges, v, side="right")  # class i: edges[i-1] <= v < edges[i]
    used = np.unique(cls)
    remap = np.full(edges.size + 1, -1, dtype=np.int64)
    remap[used] = np.arange(used.size)
    cls = remap[cls]
    ranges = [(int(v[cls == c].min()), int(v[cls == c].max())) for c in range(used.size)]
    return cls.astype(np.int64), ranges


def _xy(coords: Coords, depth: int, n: int, side: str) -> tuple[np.ndarray, np.ndarray]:
    if depth not in coords:
        raise ParameterError(f"No {side} coordinates for depth {depth} of the hierarchy; give centroids for it.")
    x, y = (np.asarray(a, dtype=float) for a in coords[depth])
    if x.shape != (n,) or y.shape != (n,):
        raise ParameterError(f"The {side} coordinates of depth {depth} must list {n:,} areas, not {x.shape[0]:,}.")
    return x, y


def _boundary_layers(boundaries: Any, span: float) -> list[dict[str, Any]]:
    """Line layers of GeoDataFrames (finest first; later ones darker and thicker), simplified to
    about 1/1500 of the view so that thousands of areas stay cheap to send and draw."""
    if boundaries is None:
        return []
    frames = [boundaries] if hasattr(boundaries, "geometry") else list(boundaries)
    layers = []
    tol = max(span, 1e-6) / 1500.0
    for i, gdf in enumerate(frames):
        if gdf is None or len(gdf) == 0:
            continue
        g = gdf.geometry
        if g.crs is not None and not g.crs.equals("EPSG:4326"):
            g = g.to_crs("EPSG:4326")
        g = g[g.notna() & ~g.is_empty].simplify(tol, preserve_topology=False)
        g = g[~g.is_empty]
        coarse = i > 0 or len(frames) == 1 and len(g) <= 60
        layers.append({"sourcetype": "geojson", "source": g.__geo_interface__, "type": "line",
                       "color": "#33506e" if coarse else "#a9a9a9",
                       "line": {"width": 1.3 if coarse else 0.5}, "below": "traces"})
    return layers


def _view(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray]) -> tuple[float, float, float, float]:
    """(west, south, east, north) box of the bulk (2nd–98th percentile) of the public centroids,
    padded by 8 % (percentiles keep far-flung areas from zooming out to the whole world)."""
    x = np.concatenate([np.asarray(a, float) for a in xs])
    y = np.concatenate([np.asarray(a, float) for a in ys])
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size == 0:
        return (-180.0, -60.0, 180.0, 75.0)
    if x.size >= 20:
        west, east = np.percentile(x, [2, 98])
        south, north = np.percentile(y, [2, 98])
    else:
        west, east, south, north = x.min(), x.max(), y.min(), y.max()
    pad_x = max((east - west) * 0.08, 0.01)
    pad_y = max((north - south) * 0.08, 0.01)
    return (float(west - pad_x), float(south - pad_y), float(east + pad_x), float(north + pad_y))


def extent_figure(boundaries: Any, xy: Coords, *, height: int = 420,
                  title: str = "Public areas (their boundaries and centres; no trips)") -> go.Figure:
    """The public extent before any release: the areas' boundaries (GeoDataFrames, finest first, as
    :func:`flow_map` draws them) and the finest areas' public centres, on the offline ``white-bg`` map
    fitted to the centres.  Public geography only: no trip is drawn."""
    depth = max(xy) if xy else None
    x, y = (np.asarray(a, dtype=float) for a in xy[depth]) if depth is not None else (np.array([]), np.array([]))
    fig = go.Figure(go.Scattermap(lon=x, lat=y, mode="markers", marker={"size": 3, "color": "#1f4e79"},
                                  hoverinfo="skip", name="area centres"))
    w, s, e, n = _view([x], [y])
    zoom, centre = zoom_box(w, s, e, n, width_px=520, height_px=height)
    fig.update_layout(map={"style": OFFLINE_STYLE, "zoom": zoom, "center": centre,
                           "layers": _boundary_layers(boundaries, max(e - w, n - s))},
                      margin={"l": 0, "r": 0, "t": 30, "b": 0}, height=height, showlegend=False,
                      title={"text": title, "font": {"size": 14}})
    return fig


def _arc_trace(ends: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], txt: np.ndarray, lw: float,
               colour: str, label: str, rank: int) -> go.Scattermap:
    """One width class of flows: each a gentle arc (a quadratic Bézier) bending to the right of the
    direction of travel, ending in a dot at the destination, with ``txt`` as its hover."""
    ax, ay, bx, by = ends
    cx = (ax + bx) / 2 + 2 * BEND * (by - ay)
    cy = (ay + by) / 2 - 2 * BEND * (bx - ax)
    s_ = ARC[None, :]
    lon = (1 - s_) ** 2 * ax[:, None] + 2 * (1 - s_) * s_ * cx[:, None] + s_ ** 2 * bx[:, None]
    lat = (1 - s_) ** 2 * ay[:, None] + 2 * (1 - s_) * s_ * cy[:, None] + s_ ** 2 * by[:, None]
    n = ax.size
    nan = np.full((n, 1), np.nan)
    lon = np.hstack([lon, nan]).ravel()
    lat = np.hstack([lat, nan]).ravel()
    hover = np.column_stack([np.repeat(txt[:, None], ARC.size, axis=1), np.full((n, 1), "", dtype=object)]).ravel()
    dot = np.zeros(ARC.size + 1)
    dot[ARC.size - 1] = lw + 3.0  # a dot at the destination end
    return go.Scattermap(
        lon=np.where(np.isnan(lon), None, lon), lat=np.where(np.isnan(lat), None, lat),
        mode="lines+markers", line={"width": lw, "color": colour},
        marker={"size": np.tile(dot, n), "color": colour}, hovertext=hover, hoverinfo="text",
        name=label, legendrank=rank, connectgaps=False,
    )


def flow_map(
    rel: ODRelease,
    t: int,
    origin_xy: Coords,
    destination_xy: Coords | None = None,
    *,
    boundaries: Any = None,
    top: int = 200,
    within: bool = True,
    unit: str = "trips",
    basemap: bool = False,
    height: int = 600,
) -> go.Figure:
    """The ``top`` largest released flows of tree level ``t`` between different areas, as lines
    between area centroids, and (``within``) the ``top`` largest flows within one area as circles.

    ``origin_xy[depth]`` / ``destination_xy[depth]`` are the (lon, lat) arrays of the areas of a
    hierarchy depth (public centroids; NaN where unknown: those flows are not drawn).  Flows are
    binned by noisy count into up to five width classes (one trace each, legend "a–b trips");
    lines are gentle arcs bending to the right of their direction, so A→B and B→A stay apart,
    and end in a dot at the destination.  Flows within one area (same area at both ends;
    commuting is dominated by them) are circles sized by count, chosen separately so that they do
    not crowd out the lines.  ``boundaries`` (a GeoDataFrame, or several: finest first) are drawn
    as thin outlines.  Hover: "origin → destination: noisy count".
    """
    if not 1 <= int(t) <= rel.depth:
        raise ParameterError(f"Choose a tree level 1..{rel.depth}; level 0 is the total, one number.")
    if int(top) < 1:
        raise ParameterError("Show at least one flow (top ≥ 1).")
    t = int(t)
    dest_xy = origin_xy if destination_xy is None else destination_xy
    lp = rel.plan.levels[t]
    oh, dh = rel.origin_h, rel.destination_h
    od_, dd = lp.origin_depth, lp.destination_depth
    ox, oy = _xy(origin_xy, od_, oh.sizes[od_], "origin")
    dx, dy = _xy(dest_xy, dd, dh.sizes[dd], "destination")
    o, d, v = rel.origins[t], rel.destinations[t], rel.values[t]
    x0, y0, x1, y1 = ox[o], oy[o], dx[d], dy[d]
    ok = np.isfinite(x0) & np.isfinite(y0) & np.isfinite(x1) & np.isfinite(y1) & (v > 0)
    same = (x0 == x1) & (y0 == y1)
    if od_ == dd and (oh is dh or oh.fingerprint() == dh.fingerprint()):
        same |= o == d
    names_o = oh.display_names(od_)
    names_d = dh.display_names(dd)

    def largest(mask: np.ndarray) -> np.ndarray:
        sel = np.flatnonzero(mask)
        return sel[np.argsort(-v[sel], kind="stable")[: int(top)]]

    lines = largest(ok & ~same)
    selfs = largest(ok & same) if within else np.zeros(0, dtype=np.int64)

    fig = go.Figure()
    cls, ranges = flow_classes(v[lines])
    n_cls = len(ranges)
    # spread the classes over the full width and colour scales, whatever their number
    pick = np.rint(np.linspace(0, len(FLOW_WIDTHS) - 1, n_cls)).astype(int) if n_cls > 1 else np.array([1])
    for c, (lo, hi) in enumerate(ranges):
        idx = lines[cls == c]
        if idx.size == 0:
            continue
        label = f"{_fmt(lo)} {unit}" if lo == hi else f"{_fmt(lo)}–{_fmt(hi)} {unit}"
        txt = np.array([f"{names_o[o[i]]} → {names_d[d[i]]}: {_fmt(v[i])} {unit}" for i in idx], dtype=object)
        fig.add_trace(_arc_trace((x0[idx], y0[idx], x1[idx], y1[idx]), txt, FLOW_WIDTHS[pick[c]],
                                 FLOW_COLOURS[pick[c]], label, 100 - c))
    if selfs.size:  # on top of the lines, translucent so that lines show through
        vs = v[selfs].astype(float)
        size = 5.0 + 17.0 * np.sqrt(vs / vs.max())
        txt = [f"within {names_o[o[i]]}: {_fmt(v[i])} {unit}" if od_ == dd else
               f"{names_o[o[i]]} → {names_d[d[i]]}: {_fmt(v[i])} {unit}" for i in selfs]
        fig.add_trace(go.Scattermap(
            lon=x0[selfs], lat=y0[selfs], mode="markers",
            marker={"size": size, "color": "#3b6fb6", "opacity": 0.45},
            hovertext=txt, hoverinfo="text", name=f"within one area ({_fmt(vs.min())}–{_fmt(vs.max())} {unit})",
            legendrank=200,
        ))
    box = _view([ox, dx], [oy, dy])
    # The view fits the public centroids, never the flows: two invisible corner points, and
    # plotly.js's map fitbounds fits them to the chart's actual size (a fixed zoom would have to
    # guess the width of the Streamlit column).
    w_, s_, e_, n_ = box
    fig.add_trace(go.Scattermap(lon=[w_, e_], lat=[s_, n_], mode="markers", marker={"size": 1, "opacity": 0},
                                hoverinfo="skip", showlegend=False, name="extent"))
    fig.update_layout(
        map={"style": WEB_STYLE if basemap else OFFLINE_STYLE, "fitbounds": "locations",
             "layers": _boundary_layers(boundaries, max(e_ - w_, n_ - s_))},
        margin={"l": 0, "r": 0, "t": 10, "b": 70}, height=height,
        legend={"title": {"text": f"noisy flow ({unit})"}, "orientation": "h", "x": 0.0, "y": 0.0,
                "xanchor": "left", "yanchor": "top", "bgcolor": "rgba(255,255,255,0.85)"},
        showlegend=True,
    )
    return fig


def od_heatmap(
    rel: ODRelease,
    t: int,
    *,
    names: bool = True,
    max_side: int = MAX_HEATMAP_SIDE,
    log: bool = True,
    unit: str = "trips",
    height: int = 600,
) -> go.Figure:
    """The origin × destination matrix of tree level ``t`` as a heatmap (origins are rows).

    Pairs released as 0 are left blank.  ``log`` colours by log10 of the count (the colour bar is
    labelled in counts).  Refuses (``ParameterError``) levels with more than ``max_side`` areas
    on a side: such a matrix cannot be read, use the flow map.
    """
    if not 0 <= int(t) <= rel.depth:
        raise ParameterError(f"Choose a tree level 0..{rel.depth}.")
    t = int(t)
    lp = rel.plan.levels[t]
    oh, dh = rel.origin_h, rel.destination_h
    no, nd = oh.sizes[lp.origin_depth], dh.sizes[lp.destination_depth]
    if max(no, nd) > int(max_side):
        raise ParameterError(
            f"Level '{lp.name}' has {no:,} origin × {nd:,} destination areas; the matrix view shows at most "
            f"{int(max_side):,} per side. Use the flow map, or a coarser level."
        )
    m = rel.matrix(t).astype(float)

    def axis_labels(h: Any, depth: int) -> list[str]:
        lab = h.labels(depth).astype(str)
        if not names:
            return lab.tolist()
        nm = h.display_names(depth).astype(str)
        if len(set(nm.tolist())) == len(nm):
            return nm.tolist()
        return [n if n == c else f"{n} ({c})" for n, c in zip(nm, lab, strict=True)]

    ylab, xlab = axis_labels(oh, lp.origin_depth), axis_labels(dh, lp.destination_depth)
    shown = np.where(m != 0, m, np.nan)
    colorbar: dict[str, Any] = {"title": {"text": unit}}
    if log:
        z = np.log10(np.where(shown > 0, shown, np.nan))
        top = float(np.nanmax(z)) if np.isfinite(z).any() else 1.0
        ticks = np.arange(0, math.floor(top) + 1)
        colorbar.update(tickvals=ticks.tolist(), ticktext=[_fmt(10.0 ** k) for k in ticks])
    else:
        z = shown
    fig = go.Figure(go.Heatmap(
        z=z, x=xlab, y=ylab, customdata=m, colorscale="YlOrRd", hoverongaps=False, colorbar=colorbar,
        hovertemplate="%{y} → %{x}: %{customdata:,.0f} " + unit + "<extra></extra>",
    ))
    fig.update_layout(
        xaxis={"title": {"text": f"destination ({lp.destination_level})"}, "type": "category",
               "showticklabels": nd <= 60, "showgrid": False},
        yaxis={"title": {"text": f"origin ({lp.origin_level})"}, "type": "category", "autorange": "reversed",
               "showticklabels": no <= 60, "showgrid": False},
        margin={"l": 10, "r": 10, "t": 10, "b": 10}, height=height, plot_bgcolor="white",
    )
    return fig


def published_flow_map(rows: Any, labels: Sequence[Any], xy: tuple[Any, Any], *, top: int = 150,
                       unit: str = "trips", boundaries: Any = None, height: int = 560,
                       title: str | None = None) -> go.Figure:
    """The ``top`` largest flows of one published table (rows ``origin, destination, noisy_count``
    of a ``release.csv``: one period of a series) as lines between the public centroids ``xy``
    (lon, lat arrays in the order of ``labels``), widths by class; flows within one area as circles.

    Built from the published rows only, so a re-served period draws as it was published.
    """
    lon, lat = (np.asarray(a, dtype=float) for a in xy)
    where = {str(k): i for i, k in enumerate(labels)}
    o = np.array([where.get(str(k), -1) for k in rows["origin"]], dtype=np.int64)
    d = np.array([where.get(str(k), -1) for k in rows["destination"]], dtype=np.int64)
    v = np.asarray(rows["noisy_count"], dtype=float)
    ok = (o >= 0) & (d >= 0) & (v > 0)
    ok[ok] &= np.isfinite(lon[o[ok]]) & np.isfinite(lat[d[ok]])
    fig = go.Figure()
    lines = np.flatnonzero(ok & (o != d))
    lines = lines[np.argsort(-v[lines], kind="stable")[: int(top)]]
    cls, ranges = flow_classes(v[lines])
    pick = np.rint(np.linspace(0, len(FLOW_WIDTHS) - 1, len(ranges))).astype(int) if len(ranges) > 1 else np.array([1])
    for c, (lo, hi) in enumerate(ranges):
        idx = lines[cls == c]
        if idx.size == 0:
            continue
        nan = np.full(idx.size, np.nan)
        xs = np.column_stack([lon[o[idx]], lon[d[idx]], nan]).ravel()
        ys = np.column_stack([lat[o[idx]], lat[d[idx]], nan]).ravel()
        txt = np.repeat([f"{rows['origin'].iloc[i]} → {rows['destination'].iloc[i]}: {_fmt(v[i])} {unit}"
                         for i in idx], 3)
        fig.add_trace(go.Scattermap(lon=np.where(np.isnan(xs), None, xs), lat=np.where(np.isnan(ys), None, ys),
                                    mode="lines", line={"width": FLOW_WIDTHS[pick[c]], "color": FLOW_COLOURS[pick[c]]},
                                    hovertext=txt, hoverinfo="text", connectgaps=False,
                                    name=f"{_fmt(lo)}–{_fmt(hi)} {unit}" if lo != hi else f"{_fmt(lo)} {unit}"))
    selfs = np.flatnonzero(ok & (o == d))
    selfs = selfs[np.argsort(-v[selfs], kind="stable")[: int(top)]]
    if selfs.size:
        vs = v[selfs]
        fig.add_trace(go.Scattermap(lon=lon[o[selfs]], lat=lat[o[selfs]], mode="markers",
                                    marker={"size": 5.0 + 17.0 * np.sqrt(vs / vs.max()), "color": "#3b6fb6",
                                            "opacity": 0.45},
                                    hovertext=[f"within {rows['origin'].iloc[i]}: {_fmt(v[i])} {unit}" for i in selfs],
                                    hoverinfo="text", name=f"within one area ({unit})"))
    w_, s_, e_, n_ = _view([lon[np.isfinite(lon)]], [lat[np.isfinite(lat)]])
    fig.add_trace(go.Scattermap(lon=[w_, e_], lat=[s_, n_], mode="markers", marker={"size": 1, "opacity": 0},
                                hoverinfo="skip", showlegend=False, name="extent"))
    fig.update_layout(map={"style": OFFLINE_STYLE, "fitbounds": "locations",
                           "layers": _boundary_layers(boundaries, max(e_ - w_, n_ - s_))},
                      margin={"l": 0, "r": 0, "t": 30 if title else 10, "b": 70}, height=height,
                      title={"text": title or "", "font": {"size": 14}},
                      legend={"title": {"text": f"noisy flow ({unit})"}, "orientation": "h", "x": 0.0, "y": 0.0,
                              "xanchor": "left", "yanchor": "top", "bgcolor": "rgba(255,255,255,0.85)"})
    return fig
