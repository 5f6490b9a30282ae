"""Figures of a hierarchy release: a choropleth per level (offline) and a treemap.

Maps use the inline ``white-bg`` MapLibre style with local boundaries only (no tiles), one
Choroplethmap trace per level, and the parent level's outlines as a line layer.  Everything
drawn is the release (noisy values and their analytic intervals): post-processing, free.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from dpcore.areas.tree_plans import HierarchyRelease
from dpcore.data.area_boundaries import BoundaryJoin
from dpcore.data.maps import (
    COLORSCALE,
    OFFLINE_STYLE,
    WEB_STYLE,
    LogScale,
    choropleth_figure,
    light_outlines,
    zoom_box,
)

#: Beyond this many areas the treemap shows only the first levels below the chosen area.  Room for the
#: US states with their 3,221 counties: at 3,000 the counties were cut, and a click on a state zoomed into
#: an empty tile (issue 26, item 10).
MAX_TREEMAP_NODES = 4000


def _view(frame: Any, height: int, width: int = 520) -> tuple[float, dict[str, float]]:
    """Zoom and centre that fit the bulk of the features: the box of the areas whose centres lie
    within Tukey's fences (1.5 interquartile ranges, plus a degree) of the centres in longitude
    and in latitude.

    Far-flung areas (Alaska, Hawaii and Puerto Rico next to the lower 48 states; the Aleutians
    across the antimeridian) would otherwise shrink the bulk to a third of the map.  They are
    still drawn: the view only starts on the bulk, and the curator can pan or zoom out.  With
    fewer than 8 areas every area is in the box.
    """
    keep = ~far_areas(frame)
    b = frame.geometry.bounds[keep]
    west, east = float(b["minx"].min()), float(b["maxx"].max())
    south, north = float(b["miny"].min()), float(b["maxy"].max())
    zoom, centre = zoom_box(west, south, east, north, width_px=width, height_px=height)
    return max(0.0, zoom - 0.15), centre


def far_areas(frame: Any) -> np.ndarray:
    """Which areas lie outside the bulk that the first view of a map frames (:func:`_view`): centres
    beyond Tukey's fences (1.5 interquartile ranges, plus a degree) in longitude or latitude; none with
    fewer than 8 areas.  The map says so, so that Alaska and Hawaii are not taken for missing."""
    pts = frame.geometry.representative_point()
    lon, lat = pts.x.to_numpy(), pts.y.to_numpy()
    keep = np.ones(len(lon), dtype=bool)
    if len(lon) >= 8:
        for v in (lon, lat):
            q1, q3 = np.percentile(v, [25, 75])
            reach = 1.5 * (q3 - q1) + 1.0  # a degree (about 100 km) beyond the bulk is never cut
            keep &= (v >= q1 - reach) & (v <= q3 + reach)
    return ~keep


def extent_figure(frames: Sequence[Any], *, height: int = 420,
                  title: str = "Public areas (their boundaries; no data)") -> go.Figure:
    """The public extent of a hierarchy before any release: the boundaries of its levels (GeoDataFrames,
    top level first; the finest is drawn thin and grey, coarser ones dark) on the offline ``white-bg``
    map, fitted to the finest level's areas.  Public geography only: no count is drawn."""
    frames = [f for f in frames if f is not None and len(f)]
    fig = go.Figure(go.Scattermap(lon=[], lat=[], mode="lines", hoverinfo="skip"))
    layers = []
    for i, f in enumerate(reversed(frames)):  # finest first, so coarser outlines are drawn above it
        coarse = i > 0 or len(frames) == 1 and len(f) <= 60
        layers.append({"sourcetype": "geojson", "source": light_outlines(f), "type": "line",
                       "color": "#1f4e79" if coarse else "#9a9a9a", "line": {"width": 1.4 if coarse else 0.5}})
    zoom, centre = _view(frames[-1], height) if frames else (0.5, {"lon": 0.0, "lat": 20.0})
    fig.update_layout(
        map={"style": OFFLINE_STYLE, "zoom": zoom, "center": centre, "layers": layers},
        margin={"l": 0, "r": 0, "t": 30, "b": 0}, height=height, showlegend=False,
        title={"text": title, "font": {"size": 14}},
    )
    return fig


def hierarchy_map(
    rel: HierarchyRelease,
    join: BoundaryJoin,
    *,
    nodes: np.ndarray | None = None,
    parent_join: BoundaryJoin | None = None,
    size: int | None = None,
    basemap: bool = False,
    height: int = 560,
) -> go.Figure:
    """Choropleth of the released values of one level.

    ``nodes`` restricts the map to some areas (the children of a drilled-down area); ``size``
    picks one group size of a group-size release (``None``: the total over sizes).  Hover shows
    the noisy value, its 95 % interval (normal approximation of the analytic error; none where the
    release publishes none) and the parent.
    """
    h = rel.hierarchy
    d = join.depth
    frame = join.frame
    if nodes is not None:
        frame = frame[frame["node"].isin(np.asarray(nodes))]
    idx = frame["node"].to_numpy()
    v = rel.values[d]
    if v.ndim == 2:
        z = v[:, size] if size is not None else v.sum(axis=1)
        lo = hi = None
    else:
        z = v
        # no interval where release.csv has none (HierarchyRelease.has_intervals)
        lo, hi = rel.interval(d) if rel.has_intervals else (None, None)
    zs = z[idx].astype(float)
    names = h.display_names(d)[idx]
    codes = h.labels(d)[idx]
    parents = h.parent_labels(d)[idx]
    if lo is not None:
        custom = np.column_stack([names, codes, parents, np.round(zs), np.round(lo[idx]), np.round(hi[idx])])
        hover = ("<b>%{customdata[0]}</b> (%{customdata[1]})<br>noisy count %{customdata[3]:,.0f}"
                 "<br>95%% interval %{customdata[4]:,.0f} – %{customdata[5]:,.0f}"
                 "<br>in %{customdata[2]}<extra></extra>").replace("%%", "%")
    else:
        custom = np.column_stack([names, codes, parents, np.round(zs)])
        hover = ("<b>%{customdata[0]}</b> (%{customdata[1]})<br>noisy count %{customdata[3]:,.0f}"
                 "<br>in %{customdata[2]}<extra></extra>")
    geo = frame[[frame.geometry.name]].copy()
    geo["id"] = idx.astype(str)
    gj = geo.set_index("id").__geo_interface__
    scale = LogScale.of(zs)  # skewed counts (one county of ten million) show on a log scale (issue 26, item 5)
    fig = choropleth_figure(
        gj, locations=idx.astype(str), z=scale.z(zs), zmin=scale.zmin, zmax=scale.zmax, featureidkey="id",
        customdata=custom, hovertemplate=hover, colorscale=COLORSCALE, marker={"line": {"width": 0.3, "color": "#555"}},
        colorbar=scale.colorbar(("people" if v.ndim == 1 else "groups") + " (log)"),
    )
    layers = []
    if parent_join is not None:
        pg = parent_join.frame[[parent_join.frame.geometry.name]]
        layers.append({"sourcetype": "geojson", "source": pg.__geo_interface__, "type": "line",
                       "color": "#1f4e79", "line": {"width": 1.4}})
    zoom, centre = _view(frame if len(frame) else join.frame, height)
    fig.update_layout(
        map={"style": WEB_STYLE if basemap else OFFLINE_STYLE, "zoom": zoom, "center": centre, "layers": layers},
        margin={"l": 0, "r": 0, "t": 10, "b": 0}, height=height,
    )
    return fig


def hierarchy_treemap(rel: HierarchyRelease, depth: int = 0, index: int = 0, *, levels: int = 2,
                      height: int = 520) -> go.Figure:
    """Treemap of the area ``index`` at ``depth`` and up to ``levels`` levels below it.

    Tile sizes are the released values of the deepest level shown, clipped at 0 (a treemap
    cannot draw negative areas), summed upwards; hover shows each area's released value itself.
    """
    h = rel.hierarchy
    tiers: list[tuple[int, np.ndarray]] = [(depth, np.array([index]))]
    n = 1
    for d in range(depth + 1, min(h.depth, depth + levels) + 1):
        lo, hi = h.child_offsets(d - 1)[tiers[-1][1][[0, -1]] + np.array([0, 1])]
        nxt = np.arange(lo, hi)  # children of a contiguous block of parents are contiguous
        if n + len(nxt) > MAX_TREEMAP_NODES:
            break
        tiers.append((d, nxt))
        n += len(nxt)
    size: dict[int, np.ndarray] = {}
    for d, nodes in reversed(tiers):
        v = rel.values[d]
        v = (v.sum(axis=1) if v.ndim == 2 else v).astype(float)
        if d == tiers[-1][0]:
            size[d] = np.maximum(v[nodes], 0.0)
        else:
            below_d, below = d + 1, tiers[d + 1 - depth][1]
            sums = np.zeros(h.sizes[d])
            np.add.at(sums, h.parents[d][below], size[below_d])
            size[d] = sums[nodes]
    ids: list[str] = []
    parents: list[str] = []
    labels: list[str] = []
    shown: list[float] = []
    released: list[float] = []
    for d, nodes in tiers:
        v = rel.values[d]
        v = (v.sum(axis=1) if v.ndim == 2 else v).astype(float)
        lab = h.labels(d)
        par = h.parent_labels(d)
        names = h.display_names(d)
        ids += [f"{d}:{lab[i]}" for i in nodes]
        parents += ["" if d == depth else f"{d - 1}:{par[i]}" for i in nodes]
        labels += [str(names[i]) for i in nodes]
        shown += size[d].tolist()
        released += v[nodes].tolist()
    fig = go.Figure(go.Treemap(
        ids=ids, parents=parents, labels=labels, values=shown, branchvalues="total",
        customdata=np.array(released),
        hovertemplate="<b>%{label}</b><br>noisy count %{customdata:,.0f}<extra></extra>",
        marker={"colorscale": COLORSCALE},
    ))
    fig.update_layout(margin={"l": 0, "r": 0, "t": 10, "b": 0}, height=height)
    return fig
