"""Counts over areas, Release step: the Release button and its confirmation, then the map and the errors.

A hierarchy release is drawn on a map per level (with drill-down into one area) beside a treemap;
a census table's release (Privelet, marginal tables) is shown as its tables.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from dpcore import pipeline
from dpcore.areas import export as area_export
from dpcore.areas import figures, tree_plans
from dpcore.areas.mechanisms import census_matrix, census_privelet
from dpcore.areas.unit import census_unit
from dpcore.data.memory import release_unused
from dpcore.errors import DPCoreError
from dpcore.points import viz
from dpcore.privacy.noise import secure_source
from ui import charts, confirm, fmt, frame, intervals, near_match_ui, series, state
from ui.kinds.areas import common, drill
from ui.kinds.areas import marginals as marginals_ui
from ui.kinds.areas import series as areas_series
from ui.kinds.areas.common import keep, kept, released_areas
from ui.kinds.areas.plan import error_table, selection
from ui.kinds.areas.state import HIERARCHY_KEY, TABLE_KEYS, HierarchyEntry, TableEntry
from ui.steps import Steps

ss = st.session_state
MAX_POLYGONS = viz.MAX_POLYGONS
#: A release of more areas than this shows its steps while it is made.
PROGRESS_NODES = 50_000


def release_step() -> None:
    """The Release step for counts over areas (the page script is pages/release.py)."""
    if common.which() == common.TABLE:
        _table_release()
        return
    m = common.model()
    if m is None:
        frame.missing("Load a table of counts over areas on the Data step first.", "data", "Go to the Data step")
    sel = selection()
    if series.active("areas") is not None:  # "Release over time" is on: one release per period
        areas_series.release_step(m, sel)
        frame.link("export")
        return
    if not near_match_ui.answered("areas", m["fp"], m["counts"].profile(), sel.ledger):
        return  # the same population as spent data? asked first (issue 26 item 14)
    entry = common.hier_entry()  # a click's release was made in its callback, before this run
    what = (f"**{sel.title}** with {sel.cost.label()} on **{m['name']}**, {confirm.planned()}; "
            f"unit of privacy: **{common.unit_words(sel.unit)}**.")
    job = {"counts": m["counts"], "plan": sel.core, "led": sel.ledger, "fp": m["fp"], "name": m["name"],
           "config": (m["inputs"], sel), "joins": dict(m["joins"]), "cv": confirm.cv_threshold()}
    if entry is None:  # before any release: the Release button, primary, at the top
        confirm.button("hier_release_button", sel.ledger, sel.cost, sel.unit, sel.error, release_now, job, what=what)
        st.caption("Nothing has been released from this data yet.")
        frame.link("plan", "Back to the plan")
        return
    # the confirmation first, then the release's map and errors; the next release after them, calmly
    rel = entry.release
    confirm.released(f"{rel.mechanism.title}: {released_areas(rel.hierarchy)}", rel.plan.cost, sel.ledger,
                     rel.release_id)
    st.subheader("Map", anchor="map")
    _map(entry, m)
    st.subheader("Errors", anchor="errors")
    _errors(entry, m)
    intervals.section(lambda: entry.files, rel.release_id, pick=True,
                      word="groups" if m["counts"].statistic == "group_sizes" else "people",
                      on_demand=rel.hierarchy.n_nodes > PROGRESS_NODES)
    confirm.button("hier_release_button", sel.ledger, sel.cost, sel.unit, sel.error, release_now, job, after=True,
                   what=what)
    frame.link("export")


def release_now(job: dict[str, Any]) -> None:
    """The Release button's action (:func:`ui.state.release_button`): charge, release, store."""
    from ui.kinds.areas.export import release_config

    led = job["led"]
    steps = Steps("Releasing …", job["counts"].hierarchy.n_nodes > PROGRESS_NODES)
    # the Plan step's plan, released as it is (not planned again)
    steps.say("Drawing the noise and making the levels consistent …")
    try:
        out = pipeline.release(job["plan"], job["counts"], ledger=led, session=state.session(), noise=secure_source())
    except DPCoreError:
        steps.failed("Nothing was released")
        raise
    rel = out.inner
    # no st.session_state access until the release is in the history: Streamlit 1.67 may stop a
    # callback at any such access (a second click), and a charged release must not be lost
    # the files, made once from the envelope (the record with the ledger as of the charge and the
    # plan's rows): stored, then served by Export
    release_unused()  # the mechanism's working arrays, before the files are written (as the command line)
    steps.say("Writing the files (release.csv, release.json, the data users' files) …")
    files = out.files(led, joins=job["joins"], cv_threshold=job["cv"])
    release_unused()  # the files' temporaries
    steps.say("Keeping the release in the history …")
    state.remember_release("areas", job["fp"], rel.release_id,
                           {"mechanism": rel.mechanism.title, "cost": rel.plan.cost.label(),
                            "levels": list(rel.hierarchy.level_names)}, files, led)
    steps.done(f"Released {released_areas(rel.hierarchy)}")
    ss[HIERARCHY_KEY] = HierarchyEntry(rel, job["fp"], job["name"], release_config(*job["config"]), job["plan"],
                                       files)


def _map(entry: HierarchyEntry, m: dict[str, Any]) -> None:
    """The release by level: a map where the level has boundaries, else a table; inside the area the
    curator chooses (:mod:`ui.kinds.areas.drill`), never more areas than the browser can take."""
    rel = entry.release
    h, joins = rel.hierarchy, m["joins"]
    st.caption(f"{rel.mechanism.title}, {rel.plan.cost.label()} · released {rel.created.replace('+00:00', '')} UTC")
    cmap, ctree = st.columns([3, 2])
    if not joins:
        cmap.info("No boundaries were given, so there is no map: the released counts are listed per level "
                  "and the treemap shows the hierarchy.")
    shown = drill.levels_shown(h, joins)
    wkey = keep("map_level", shown[0])
    if ss.get(wkey) not in shown:  # a level of another table
        ss[wkey] = shown[0]
    level = cmap.selectbox("Level", shown, format_func=common.level_label, key=wkey)
    kept("map_level")
    d = h.depth_of(level)
    at, idx = drill.choose_area(h, d, cmap)
    nodes = None if at == 0 else h.descendants(at, idx, d)
    size = None
    if m["counts"].statistic == "group_sizes":
        sz = cmap.selectbox("Group size", ["all sizes", *rel.size_labels], key="hier_map_size")
        size = None if sz == "all sizes" else rel.size_labels.index(sz)
    if level in joins:
        _choropleth(entry, cmap, level, d, nodes, (at, idx), size, joins)
    else:
        _level_table(rel, cmap, d, nodes, size)
    tree_depth, tree_index = (at, idx) if at else (0, 0)
    # as the maps: a rerun does not rebuild the same treemap (the last few kept)
    tree = charts.kept_recent(entry.exports.setdefault("treemaps", {}), (tree_depth, tree_index),
                              lambda: figures.hierarchy_treemap(rel, tree_depth, tree_index))
    ctree.plotly_chart(tree, key="hier_treemap")
    ctree.caption("Treemap of the released counts (two levels below the selected area); tiles are named.")


def _choropleth(entry: HierarchyEntry, cmap: Any, level: str, d: int, nodes: Any, within: tuple[int, int],
                size: int | None, joins: dict[str, Any]) -> None:
    rel, h = entry.release, entry.release.hierarchy
    n_poly = len(joins[level].frame) if nodes is None else len(nodes)
    if n_poly > MAX_POLYGONS:
        cmap.info(f"{fmt.count(n_poly)} areas are too many to draw at once: choose an area above to see "
                  "the areas inside it.")
        return
    parent_join = joins.get(h.level_names[d - 1]) if d > 1 else None
    fig = charts.kept_recent(  # a rerun does not rebuild the same map (the last few kept)
        entry.exports.setdefault("figs", {}), (level, within, size),
        lambda: figures.hierarchy_map(rel, joins[level], nodes=nodes, parent_join=parent_join, size=size))
    cmap.plotly_chart(fig, key="hier_map", config={"displayModeBar": False})
    _far_hint(cmap, joins[level], h, d, nodes)
    why = area_export.no_interval_line(rel)
    cmap.caption("Colour: noisy count of people. Hover: the noisy count" +
                 (" and its 95 % interval (from the mechanism's expected error, not from the data)" if why is None
                  else "") + ". Dark outlines: the level above." + ("" if why is None else f" {why}"))


def _level_table(rel: Any, cmap: Any, d: int, nodes: Any, size: int | None) -> None:
    """The released counts of a level without boundaries, inside the chosen area, capped."""
    table, total = drill.area_table(rel, d, nodes, size)
    cmap.dataframe(table, hide_index=True, key="hier_level_table",
                   column_config={"noisy count": st.column_config.NumberColumn(format="%.0f")})
    if total > len(table):
        cmap.caption(f"The first {fmt.count(len(table))} of {fmt.count(total)} areas: choose an area above to "
                     "see the areas inside it (all of them are in release.csv on the Export step).")
    else:
        cmap.caption(area_export.no_interval_line(rel) or
                     "The 95 % interval comes from the mechanism's expected error, not from the data.")


def _far_hint(where: Any, join: Any, h: Any, d: int, nodes: Any) -> None:
    """Name the areas drawn outside the first view (Alaska, Hawaii ...), so that they are not taken for
    missing."""
    frame = join.frame if nodes is None else join.frame[join.frame["node"].isin(np.asarray(nodes))]
    far = figures.far_areas(frame) if len(frame) else np.zeros(0, dtype=bool)
    if far.any():
        names = [str(n) for n in common.area_names(h, d)[frame["node"].to_numpy()[far]]]
        shown = ", ".join(names[:4]) + (f" and {fmt.count(len(names) - 4)} more" if len(names) > 4 else "")
        where.caption(f"Outside the first view, far from the rest: {shown}. Zoom out or pan to see "
                      f"{'it' if len(names) == 1 else 'them'}.")


def _errors(entry: HierarchyEntry, m: dict[str, Any]) -> None:
    rel = entry.release
    st.markdown("**Expected error of the release** (from the mechanism; publishable)")
    error_table(entry.plan, m["counts"].statistic, key="hier_err_plan", after=True)
    st.markdown("**Error against your data** · :red[curator only, not for publication]")
    if "empirical" not in entry.exports:  # curator only, computed once
        entry.exports["empirical"] = tree_plans.empirical_errors(rel, m["counts"])
    st.dataframe(pd.DataFrame([{
        "level": common.level_label(e["level"]), "mean abs. error": fmt.num(e["mae"]),
        "max abs. error": fmt.num(e["max_abs_error"]), "mean rel. error": f"{e['mre_percent']:.1f} %",
        "empty areas released > 0": f"{fmt.count(e['true_zero_released_positive'])} of {fmt.count(e['true_zeros'])}",
        "expected mean abs.": fmt.num(e["expected_mae"]), "expected max abs.": fmt.num(e["expected_max_abs"]),
    } for e in entry.exports["empirical"]]), hide_index=True, key="hier_err_emp")
    st.warning("These numbers compare the release with your confidential data. Do not publish them, and do not "
               "re-run releases until they look good: that choice is not covered by the privacy budget.")
    if not rel.mechanism.consistent or not rel.mechanism.nonnegative:
        st.info(f"{rel.mechanism.title}: " + ("levels do not add up; " if not rel.mechanism.consistent else "")
                + ("some counts may be negative or fractional." if not rel.mechanism.nonnegative else ""))


# ---------------------------------------------------------------- census table with attributes


def _privelet_now(table: Any, core: Any, led: Any, fp: str, name: str, cfg: str | None) -> None:
    """The Release button's action for Privelet: release the Plan step's plan (charged first), store."""
    cv = confirm.cv_threshold()  # before the charge
    out = pipeline.release(core, table, ledger=led, session=state.session(), noise=secure_source())
    rel = out.inner
    # the files, made once from the envelope with the ledger as of the charge: stored, served by Export
    entry = TableEntry(rel, fp, name, out.files(led, cv_threshold=cv), config=cfg)
    # the history first: Streamlit 1.67 may stop a callback at an st.session_state access
    state.remember_release("areas", fp, rel.release_id,
                           {"mechanism": "Privelet" + ("+" if rel.plus_axes else ""), "cost": rel.cost.label(),
                            "levels": list(rel.structure.levels)}, entry.files, led)
    ss[TABLE_KEYS["privelet"]] = entry


def _table_confirmation(entry: Any, sel: Any) -> None:
    """The confirmation of a census table's release (matrix mechanism or Privelet)."""
    rel = entry.release
    if sel.mech == "matrix":
        n = len(rel.tables)
        what = f"{n} table{'s' if n != 1 else ''} of {entry.source} with the matrix mechanism"
        confirm.released(what, rel.plan.cost, sel.ledger, rel.release_id, below="See the released tables")
        return
    s = rel.structure
    what = (f"{entry.source} with Privelet{'+' if rel.plus_axes else ''}: "
            f"{fmt.count(sum(len(t) for t in rel.levels.values()))} areas at all levels "
            f"({fmt.count(len(s.paths_at(len(s.levels))))} finest areas)")
    confirm.released(what, rel.cost, sel.ledger, rel.release_id, below="See the released counts")


def _table_release() -> None:
    from ui.kinds.areas.export import table_config
    from ui.kinds.areas.plan_table import selection as table_selection

    table, fp = common.table()
    if table is None:
        frame.missing("Load a census table on the Data step first.", "data", "Go to the Data step")
    sel = table_selection()
    if not near_match_ui.answered("areas", fp, table.profile(), sel.ledger):
        return  # the same population as spent data? asked first (issue 26 item 14)
    name = ss.get("census_name", "census table")
    unit = census_unit(person_once=state.person_once(fp))
    what = (f"**{sel.title}** with {sel.cost.label()} on **{name}**, {confirm.planned()}; "
            f"unit of privacy: **{common.unit_words(unit)}**.")
    cfg = table_config(table, sel.plan) if sel.plan is not None else None  # read before the charge

    def release_button(after: bool) -> None:
        if sel.mech == "matrix":
            confirm.button("census_mx_release_button", sel.ledger, sel.cost, unit, sel.error, marginals_ui.release_now,
                           table, sel.plan, sel.ledger, fp, name, cfg, after=after, what=what)
        else:
            confirm.button("census_release_button", sel.ledger, sel.cost, unit, sel.error, _privelet_now, table,
                           sel.plan, sel.ledger, fp, name, cfg, after=after, what=what)

    entry = common.table_entry()  # a click's release was made in its callback, before this run
    if entry is None:  # before any release: the Release button, primary, at the top
        release_button(after=False)
        st.caption("Nothing has been released from this table yet.")
        frame.link("plan", "Back to the plan")
        return
    # the confirmation first, then the released tables; the next release after them, calmly
    _table_confirmation(entry, sel)
    rel = entry.release
    if sel.mech == "matrix":
        st.subheader("The released tables", anchor="map")
        marginals_ui.show_tables(entry, fp, "Table", rel.tables, 0, 2,
                                 {name: census_matrix.interval_text(rel.plan, i) for i, name in enumerate(rel.tables)},
                                 "census_mx")
        st.info("The published tables are noisy and unrounded: some cells are fractional and small cells can be "
                "below zero, so that sums of cells stay unbiased.")
    else:
        st.subheader("The released counts", anchor="map")
        st.caption("No map: a census table comes without boundaries. The counts per level are below; the "
                   "hierarchy of areas (Data step) draws maps from boundaries.")
        marginals_ui.show_tables(entry, fp, "Level", rel.levels, 1, 1,
                                 dict.fromkeys(rel.levels, census_privelet.CI95_TEXT), "census")
        st.info(common.NEGATIVE_NOTE)
    release_button(after=True)
    frame.link("export")
