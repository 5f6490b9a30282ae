"""The data user's interval on the Release step of points, areas and trips (issue 25 item 4).

Pick areas of any level, upload a polygon (GeoJSON) or draw one (a lasso or a box on the release's
cells, :func:`draw_figure`; the drawing becomes a GeoJSON, :func:`selection_geojson`, answered by the
same code as an upload) and read its unbiased estimate and 90 % interval; cut cells weigh their area
share, or their share of a public density the curator uploads (:func:`dpcore.estimate.release_interval.read_density`,
as ``interval --density``).  Trips: pick origin→destination flows of any table; no polygon, a pair has
no one shape.  Computed from the release's published measurements by
:class:`dpcore.estimate.release_interval.ReleaseIntervals` (least squares solved once per
release, kept with it).  Post-processing of published files: no data, no budget.  The record's
"use at level L or coarser" line (``level_guidance`` of ``release.json``) is shown beside it.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dpcore.errors import DPCoreError
from dpcore.estimate.release_interval import ReleaseIntervals, offers_intervals, read_density
from dpcore.privacy.calibration import interval_half_width
from ui import charts, fmt, state

#: The interval's coverage on the page.
COVERAGE = 0.9
#: At most this many areas are offered to pick (the coarser levels first); finer ones: a polygon.
MAX_PICK = 5_000
#: At most this many cell centres are drawn to lasso on (an even stride over the cells beyond).
MAX_DRAW_POINTS = 5_000


def _intervals(files: Mapping[str, bytes], release_id: str) -> ReleaseIntervals:
    """The release's :class:`ReleaseIntervals`, made once per release and kept in the session."""
    cache = st.session_state.setdefault("_release_intervals", {})
    if release_id not in cache:
        cache.clear()  # one release at a time: the solve of an earlier one is not kept
        with st.spinner("Reading the release's measurements …"):
            cache[release_id] = ReleaseIntervals(files)
    return cache[release_id]


def pickable(nodes: list[tuple[str, str]], limit: int = MAX_PICK) -> list[tuple[str, str]]:
    """The nodes offered to pick: whole levels, coarse first, while they fit under ``limit``.

    >>> pickable([("state", "1"), ("county", "1a"), ("county", "1b")], limit=2)
    [('state', '1')]
    """
    size = Counter(lv for lv, _ in nodes)  # in the order the levels first appear, as dict.fromkeys: one pass
    keep, total = set(), 0
    for lv in size:
        if total + size[lv] > limit:
            break
        keep.add(lv)
        total += size[lv]
    return [(lv, n) for lv, n in nodes if lv in keep]


def answer_line(r: Mapping[str, Any], what: str) -> str:
    """One answer as a sentence (the estimate, its SD and the 90 % interval).

    >>> answer_line({"estimate": 123.44, "sd": 5.0, "low": 115.2, "high": 131.7}, "2 areas")
    '2 areas: estimate **123.4** (SD 5), 90% interval **[115.2, 131.7]**'
    """
    return (f"{what}: estimate **{r['estimate']:,.1f}** (SD {fmt.num(r['sd'])}), {COVERAGE:.0%} interval "
            f"**[{r['low']:,.1f}, {r['high']:,.1f}]**")


def rounded_for_people(r: Mapping[str, Any]) -> tuple[int, int, int]:
    """The estimate and the interval of an answer as whole counts a person reads: rounded to a step
    of a power of ten under a tenth of the interval's half-width (at least 1, so never fractional
    people), the interval rounded outwards (never narrower than computed), counts below zero shown
    as 0 (a count is never negative, so the interval keeps its coverage).  The exact numbers stay in
    the details (:func:`answer_line`) and in the files.

    >>> rounded_for_people({"estimate": 797.0, "low": 677.1, "high": 916.9})
    (800, 670, 920)
    >>> rounded_for_people({"estimate": 12.4, "low": -3.2, "high": 28.0})
    (12, 0, 28)
    >>> rounded_for_people({"estimate": 123456.0, "low": 121000.0, "high": 125912.0})
    (123500, 121000, 126000)
    """
    half = max((float(r["high"]) - float(r["low"])) / 2, 0.0)
    step = 10 ** math.floor(math.log10(half / 10)) if half >= 100 else 1
    est = max(round(float(r["estimate"]) / step) * step, 0)
    low = max(math.floor(float(r["low"]) / step) * step, 0)
    high = max(math.ceil(float(r["high"]) / step) * step, 0)
    return int(est), int(low), int(high)


def plain_line(r: Mapping[str, Any], what: str, word: str, where: str = "") -> str:
    """One answer in one plain sentence: about how many, and the interval, rounded for people
    (:func:`rounded_for_people`); the technical reading is :func:`answer_line`, in the details.

    >>> plain_line({"estimate": 797.0, "low": 677.1, "high": 916.9}, "Drawn polygon 1", "points", " in this area")
    '**Drawn polygon 1**: about **800** points in this area (90 % interval: **670 to 920**).'
    """
    est, low, high = rounded_for_people(r)
    return (f"**{what}**: about **{fmt.count(est)}** {word}{where} ({COVERAGE * 100:g} % interval: "
            f"**{fmt.count(low)} to {fmt.count(high)}**).")


#: what the technical words of an answer mean ("How is this computed")
HOW_COMPUTED = (
    "**Estimate**: the unbiased least-squares estimate from the release's measurements (the measurements "
    "file), not the sum of the published counts. **SD**: its standard deviation; the {cov} interval is the "
    "estimate ± {z:.3g} SD (normal). A polygon that cuts cells counts each cut cell by the share of it "
    "inside (its area, a public density or the coordinates' lattice): the **bracket [inside, touching]** is "
    "the estimate over the cells wholly inside and over every cell the polygon touches, which holds the "
    "count whatever the points' spread within the cut cells (up to the noise). How the points of a cut cell are spread "
    "is modelled (the **apportionment**): **binomial**, each point independently inside with the share; "
    "**over-dispersed** with **ρ** > 0, points in clusters, which widens the interval; the SD is then split "
    "into its part from the noise and its part from the apportionment. The plain sentence above rounds "
    "these numbers for reading (the interval outwards); the files and the table here keep them exact.")


def _guidance(files: Mapping[str, bytes]) -> None:
    g = json.loads(files["release.json"]).get("level_guidance") if "release.json" in files else None
    if g:
        st.caption(f"{g['statement']} (stated in release.json and review.html)")


def selection_geojson(selection: Mapping[str, Any] | None) -> bytes | None:
    """The lasso and box selections of a chart drawn by :func:`draw_figure` (x = longitude,
    y = latitude) as a GeoJSON FeatureCollection, one polygon per selection in the order drawn;
    None when nothing is drawn (a lasso of fewer than 3 points is no area).

    ``selection`` is the ``selection`` of ``st.plotly_chart(..., on_select="rerun")``: ``lasso`` holds
    ``{"x": [...], "y": [...]}`` of each lasso's vertices, ``box`` ``{"x": [x0, x1], "y": [y0, y1]}``.

    >>> sel = {"lasso": [{"x": [0, 2, 2], "y": [0, 0, 1]}], "box": [{"x": [3, 1], "y": [0, 1]}]}
    >>> g = json.loads(selection_geojson(sel))
    >>> [f["geometry"]["coordinates"][0] for f in g["features"]]
    [[[0.0, 0.0], [2.0, 0.0], [2.0, 1.0], [0.0, 0.0]], [[1.0, 0.0], [3.0, 0.0], [3.0, 1.0], [1.0, 1.0], [1.0, 0.0]]]
    >>> selection_geojson({"lasso": [{"x": [0, 1], "y": [0, 1]}], "box": []}) is None
    True
    """
    rings: list[list[list[float]]] = []
    for lasso in (selection or {}).get("lasso") or []:
        xy = [[float(x), float(y)] for x, y in zip(lasso.get("x") or [], lasso.get("y") or [], strict=False)]
        if len(xy) >= 3:
            rings.append(xy + [xy[0]])
    for box in (selection or {}).get("box") or []:
        xs, ys = sorted(map(float, box.get("x") or [])), sorted(map(float, box.get("y") or []))
        if len(xs) == 2 and len(ys) == 2 and xs[0] < xs[1] and ys[0] < ys[1]:
            (x0, x1), (y0, y1) = xs, ys
            rings.append([[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]])
    if not rings:
        return None
    feats = [{"type": "Feature", "properties": {"drawn": i + 1}, "geometry": {"type": "Polygon", "coordinates": [r]}}
             for i, r in enumerate(rings)]
    return json.dumps({"type": "FeatureCollection", "features": feats}).encode()


def draw_figure(ri: ReleaseIntervals, max_points: int = MAX_DRAW_POINTS) -> go.Figure:
    """The release's finest cells as points at their centres on plain longitude/latitude axes, with
    the lasso chosen: a drawn lasso or box comes back as a path in these coordinates (a tile map's
    selection returns its points only, not the drawn path).  At most ``max_points`` centres (an even
    stride over the cells, no randomness), and the cells' outer bounds as a frame; no tiles: it draws
    offline.  Only public shapes are drawn (the cells of design.json or the areas' boundaries)."""
    import shapely

    geoms = ri.shapes().geoms
    keep = ~shapely.is_empty(geoms)
    centre = shapely.get_coordinates(shapely.centroid(geoms[keep]))
    step = max(1, -(-centre.shape[0] // max_points))
    centre = centre[::step]
    w, s, e, n = shapely.total_bounds(geoms[keep])
    fig = go.Figure([
        go.Scatter(x=[w, e, e, w, w], y=[s, s, n, n, s], mode="lines", line={"color": "#888", "width": 1},
                   hoverinfo="skip", showlegend=False),
        go.Scatter(x=centre[:, 0], y=centre[:, 1], mode="markers", name="cells",
                   marker={"size": 4, "color": "#1f4e79", "opacity": 0.45},
                   hovertemplate="%{x:.4f}, %{y:.4f}<extra>cell centre</extra>", showlegend=False),
    ])
    mid = math.cos(math.radians(max(min((s + n) / 2, 85.0), -85.0)))
    fig.update_layout(
        dragmode="lasso", height=420, margin={"l": 10, "r": 10, "t": 30, "b": 10}, plot_bgcolor="white",
        title={"text": "Draw with the lasso (or a box) around your area", "font": {"size": 14}},
        xaxis={"title": {"text": "longitude"}, "showgrid": False, "zeroline": False},
        yaxis={"title": {"text": "latitude"}, "showgrid": False, "zeroline": False, "scaleanchor": "x",
               "scaleratio": 1 / mid},
    )
    return fig


def section(files_of: Callable[[], Mapping[str, bytes]], release_id: str, *, pick: bool,
            stored: Mapping[str, bytes] | None = None, polygon: bool = True, noun: str = "area",
            word: str = "people", on_demand: bool = False) -> None:
    """The interval section of a Release step: a multiselect of areas (``pick``), a polygon upload, a
    drawn polygon and a public density (``polygon``).  ``files_of`` gives the release's files (called
    only when needed, so a large release's tables are made only when a polygon is asked for);
    ``stored``: the files made so far (their record's guidance); ``noun``: what a picked node is
    ("area"; "flow" for trips); ``word``: what the counts count ("points", "people", "trips"), in the plain
    sentence that leads each answer (:func:`plain_line`; the technical reading and the exact numbers sit in
    "How is this computed"); ``on_demand``: a large release, whose measurements are read only after a click
    (not on every visit of the step)."""
    st.subheader(f"Estimate and {COVERAGE:.0%} interval for your {noun}", anchor="interval")
    st.caption(f"For any union of {fmt.plural(noun)}{' or a drawn or uploaded polygon' if polygon else ''}: about "
               f"how many {word} it holds, with a {COVERAGE * 100:g} % interval. Computed from the published files "
               "only: no data read, no budget spent.")
    if stored is not None:
        _guidance(stored)
    if on_demand and release_id not in st.session_state.get("_release_intervals", {}):
        if not st.button("Read the measurements (a large release: this takes a while)",
                         key=f"interval_read_{release_id}"):
            return
    picked = _pick(files_of, release_id, noun, guide=stored is None) if pick else []
    if picked is None:
        return
    up, drawn, density, precision = _polygon_inputs(files_of, release_id, stored) if polygon else (None,) * 4
    if not picked and up is None and drawn is None:
        return
    files = files_of()
    if not offers_intervals(files):
        st.caption("This release has no measurements file (data-dependent partitions offer none), so no interval.")
        return
    details: list[tuple[str, list[dict[str, Any]]]] = []
    try:
        ri = _intervals(files, release_id)
        if picked:
            what = f"{len(picked)} {fmt.plural(noun, len(picked))}"
            r = ri.of_nodes(picked, COVERAGE)
            st.markdown(plain_line(r, what + (" together" if len(picked) > 1 else ""), word))
            details.append((answer_line(r, what), []))
        dens = read_density(density.getvalue()) if density is not None else None
        if up is not None:
            details += _polygons(ri.of_polygons(up.getvalue(), COVERAGE, dens, precision=precision), "Polygon", word)
        if drawn is not None:
            details += _polygons(ri.of_polygons(drawn, COVERAGE, dens, precision=precision), "Drawn polygon", word)
    except DPCoreError as e:
        st.error(str(e))
    if details:
        _how_computed(details)


def recorded_precision(stored: Mapping[str, bytes] | None) -> float | None:
    """The points' coordinate precision the curator recorded in ``release.json`` (``data_users``), or None.

    >>> recorded_precision({"release.json": b'{"data_users": {"coordinate_precision": {"degrees": 0.0001}}}'})
    0.0001
    >>> recorded_precision({"release.json": b'{"data_users": {}}'}), recorded_precision(None)
    (None, None)
    """
    if not stored or "release.json" not in stored:
        return None
    stated = (json.loads(stored["release.json"]).get("data_users") or {}).get("coordinate_precision") or {}
    return None if stated.get("degrees") is None else float(stated["degrees"])


def _polygon_inputs(files_of: Callable[[], Mapping[str, bytes]], release_id: str,
                    stored: Mapping[str, bytes] | None) -> tuple[Any, bytes | None, Any, float | None]:
    """The polygon upload, the drawn polygon, the public density and the coordinates' precision (pre-filled
    with the precision the release records, :func:`recorded_precision`)."""
    up = st.file_uploader("Upload a polygon (GeoJSON in longitude/latitude; one answer per polygon)",
                          type=["geojson", "json"], key=f"_w_interval_polygon_{release_id}")
    drawn = _drawn(files_of, release_id)
    density = st.file_uploader("Public density for cut cells (optional): GeoJSON polygons with a numeric "
                               "'density' property, fixed before the data (e.g. land 1, water 0)",
                               type=["geojson", "json"], key=f"_w_interval_density_{release_id}",
                               help="Without it a cell the polygon cuts weighs the share of its area inside; "
                                    "with it, the share of this density inside (as `interval --density`).")
    recorded = recorded_precision(stored)
    precision = st.number_input(
        "Coordinates' precision in degrees (optional; e.g. 0.0001 for 4 decimals)", min_value=0.0, value=None, step=0.0001,
        format="%.6f", key=state.seed(f"_w_interval_precision_{release_id}", recorded),
        help="A public fact about the points' file: coordinates rounded to it lie on a lattice, and a cell the "
             "polygon cuts then weighs its share of the lattice positions inside (as `interval --precision`); not "
             "with a density." + (f" Pre-filled with the precision the curator recorded ({recorded:g}°)."
                                  if recorded is not None else "")) or None
    return up, drawn, density, precision


def _pick(files_of: Callable[[], Mapping[str, bytes]], release_id: str, noun: str, guide: bool) -> list[str] | None:
    """The multiselect of nodes to sum (None: the release has no measurements, said on the page)."""
    files = files_of()
    if not offers_intervals(files):
        st.caption(f"This release has no measurements file, so no interval for a union of {fmt.plural(noun)}.")
        return None
    if guide:
        _guidance(files)
    # Kept beside _intervals' cache, not redundant with it: that one holds the release's ReleaseIntervals
    # (its node list read once), this one the nodes offered and their labels, which would otherwise be
    # counted (pickable) and formatted again on every rerun of the page: about 6 ms a rerun on 80,000
    # nodes, the O/D demo's count.  One release at a time, as there.
    kept = st.session_state.get("_interval_pickable")
    if kept is None or kept[0] != release_id:
        nodes = pickable(_intervals(files, release_id).nodes())
        label = {n: f"{lv} · {n}" for lv, n in nodes}
        kept = (release_id, label, list(label))
        st.session_state["_interval_pickable"] = kept
    _, label, options = kept
    return st.multiselect(f"{fmt.plural(noun).capitalize()} (their union)", options, format_func=label.get,
                          key=f"_w_interval_areas_{release_id}", placeholder=f"Choose {fmt.plural(noun)} of any level")


def _drawn(files_of: Callable[[], Mapping[str, bytes]], release_id: str) -> bytes | None:
    """The toggle "Draw a polygon" and, when on, the cells to draw on; the drawing as GeoJSON (or None)."""
    if not st.toggle("Draw a polygon on the release's cells", key=f"_w_interval_draw_{release_id}",
                     help="Lasso (or box) around an area on a plain longitude/latitude view of the cells; "
                          "hold Shift to draw several, one answer each."):
        return None
    files = files_of()
    if not offers_intervals(files):
        return None
    kept = st.session_state.get("_interval_draw_figure")
    if kept is None or kept[0] != release_id:  # made once per release (a million cells' centres take a while)
        try:
            kept = (release_id, charts.built(draw_figure(_intervals(files, release_id))))  # its dict made once
        except DPCoreError as e:  # no cell shapes (areas released without boundaries): say so, keep the page
            st.caption(str(e))
            return None
        st.session_state["_interval_draw_figure"] = kept
    fig = kept[1]
    event = st.plotly_chart(fig, width="stretch", key=f"_w_interval_lasso_{release_id}", on_select="rerun",
                            selection_mode=("lasso", "box"), config={"displaylogo": False})
    drawn = selection_geojson((event or {}).get("selection"))
    if drawn is None:
        st.caption("Nothing drawn yet: drag a lasso around your area on the cells above.")
    else:
        st.download_button("Download the drawn polygon (GeoJSON)", drawn, "drawn_polygon.geojson",
                           "application/geo+json", key=f"_w_interval_drawn_dl_{release_id}", on_click="ignore")
    return drawn


def _polygons(rows: list[dict[str, Any]], what: str, word: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each polygon's plain sentence (and a plain warning when cut cells carry much of it); returns each
    one's technical line and the library's warning, for :func:`_how_computed`."""
    out: list[tuple[str, list[dict[str, Any]]]] = []
    for i, r in enumerate(rows):
        name = f"{what} {i + 1}"
        st.markdown(plain_line(r, name, word, " in this area"))
        if r.get("warning"):
            _, low, high = rounded_for_people({"estimate": 0.0, "low": r["inside"], "high": r["touching"]})
            st.warning(f"{name}: cells that its edge cuts carry {r['cut_share']:.0%} of this estimate, so the interval "
                       f"may be too narrow. The cells wholly inside hold about {fmt.count(low)} {word}, all the "
                       f"cells it touches about {fmt.count(high)}. See “How is this computed” below.")
        out.append((answer_line(r, name) + f"; cells inside {fmt.count(r['cells_inside'])}, "
                    f"cut {fmt.count(r['cells_cut'])}, bracket [{r['inside']:,.1f}, {r['touching']:,.1f}]; "
                    f"SD from the noise {fmt.num(r['noise_sd'])}, from the cut cells' apportionment "
                    f"({r['apportionment']}) {fmt.num(r['apportionment_sd'])}; cut cells weighed by "
                    f"{r.get('weighting', 'area shares')}", [r]))
    return out


def _how_computed(details: list[tuple[str, list[dict[str, Any]]]]) -> None:
    """The exact numbers of the answers above and what their technical words mean, in an expander."""
    with st.expander("How is this computed (exact numbers)", icon=":material/calculate:"):
        for line, rows in details:
            st.markdown(line)
            for r in rows:
                if r.get("warning"):
                    st.caption(f"{line.split(':', 1)[0]}: {r['warning']}")
        rows = [r for _, rs in details for r in rs]
        if len(rows) > 1:
            st.dataframe(pd.DataFrame(rows)[["estimate", "sd", "low", "high", "inside", "touching", "cut_share"]],
                         width="stretch")
        st.caption(HOW_COMPUTED.format(cov=f"{COVERAGE * 100:g} %", z=interval_half_width("normal", 1.0, COVERAGE)))
