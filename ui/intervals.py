"""The data user's interval on the Release step of points, areas and trips (issue 25 item 4).

Pick areas of any level or upload a polygon (GeoJSON) and read its unbiased estimate and 90 %
interval (trips: pick origin→destination flows of any table; no polygon, a pair has no one shape), computed from the release's published measurements by
:class:`dpcore.estimate.release_interval.ReleaseIntervals` (least squares solved once per
release, kept with it).  Post-processing of published files: no data, no budget.  The record's
"use at level L or coarser" line (``level_guidance`` of ``release.json``) is shown beside it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd
import streamlit as st

from dpcore.errors import DPCoreError
from dpcore.estimate.release_interval import ReleaseIntervals, offers_intervals
from ui import fmt

#: The interval's coverage on the page.
COVERAGE = 0.9
#: At most this many areas are offered to pick (the coarser levels first); finer ones: a polygon.
MAX_PICK = 5_000


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
    levels = list(dict.fromkeys(lv for lv, _ in nodes))
    size = {lv: sum(1 for x, _ in nodes if x == lv) for lv in levels}
    keep, total = set(), 0
    for lv in levels:
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


def _guidance(files: Mapping[str, bytes]) -> None:
    g = json.loads(files["release.json"]).get("level_guidance") if "release.json" in files else None
    if g:
        st.caption(f"{g['statement']} (stated in release.json and review.html)")


def section(files_of: Callable[[], Mapping[str, bytes]], release_id: str, *, pick: bool,
            stored: Mapping[str, bytes] | None = None, polygon: bool = True, noun: str = "area",
            on_demand: bool = False) -> None:
    """The interval section of a Release step: a multiselect of areas (``pick``) and a polygon upload
    (``polygon``).  ``files_of`` gives the release's files (called only when needed, so a large release's
    tables are made only when a polygon is uploaded); ``stored``: the files made so far (their record's
    guidance); ``noun``: what a picked node is ("area"; "flow" for trips); ``on_demand``: a large release,
    whose measurements are read only after a click (not on every visit of the step)."""
    st.subheader(f"Estimate and {COVERAGE:.0%} interval for your {noun}", anchor="interval")
    st.caption(f"For any union of {fmt.plural(noun)}{' or a drawn polygon' if polygon else ''}: the unbiased "
               "least-squares estimate from the release's measurements (measurements.csv), not the published value, "
               "with its interval. Computed from the published files only: no data read, no budget spent.")
    picked: list[str] = []
    if stored is not None:
        _guidance(stored)
    if on_demand and release_id not in st.session_state.get("_release_intervals", {}):
        if not st.button("Read the measurements (a large release: this takes a while)",
                         key=f"interval_read_{release_id}"):
            return
    if pick:
        files = files_of()
        if not offers_intervals(files):
            st.caption(f"This release has no measurements file, so no interval for a union of {fmt.plural(noun)}.")
            return
        if stored is None:
            _guidance(files)
        nodes = pickable(_intervals(files, release_id).nodes())
        label = {n: f"{lv} · {n}" for lv, n in nodes}
        picked = st.multiselect(f"{fmt.plural(noun).capitalize()} (their union)", list(label), format_func=label.get,
                                key=f"_w_interval_areas_{release_id}",
                                placeholder=f"Choose {fmt.plural(noun)} of any level")
    up = None if not polygon else st.file_uploader("Upload a polygon (GeoJSON in longitude/latitude; one answer per polygon)",
                          type=["geojson", "json"], key=f"_w_interval_polygon_{release_id}")
    if not picked and up is None:
        return
    files = files_of()
    if not offers_intervals(files):
        st.caption("This release has no measurements file (data-dependent partitions offer none), so no interval.")
        return
    try:
        ri = _intervals(files, release_id)
        if picked:
            st.markdown(answer_line(ri.of_nodes(picked, COVERAGE), f"{len(picked)} {fmt.plural(noun, len(picked))}"))
        if up is not None:
            _polygons(ri.of_polygons(up.getvalue(), COVERAGE))
    except DPCoreError as e:
        st.error(str(e))


def _polygons(rows: list[dict[str, Any]]) -> None:
    for i, r in enumerate(rows):
        st.markdown(answer_line(r, f"Polygon {i + 1}") + f"; cells inside {fmt.count(r['cells_inside'])}, "
                    f"cut {fmt.count(r['cells_cut'])}, bracket [{r['inside']:,.1f}, {r['touching']:,.1f}]")
        if r.get("warning"):
            st.warning(f"Polygon {i + 1}: {r['warning']}")
    if len(rows) > 1:
        st.dataframe(pd.DataFrame(rows)[["estimate", "sd", "low", "high", "inside", "touching", "cut_share"]],
                     width="stretch")
