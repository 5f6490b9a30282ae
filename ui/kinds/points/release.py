"""Points, Release step: the Release button, then the map (trees browsable by depth) and the errors."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dpcore import pipeline
from dpcore.core.mechanism import Plan, PlanRow
from dpcore.errors import DPCoreError
from dpcore.estimate.data_user_format import coordinate_precision
from dpcore.points import diagnostics, viz
from dpcore.points.data_users import stating_precision
from dpcore.points.mechanisms.base import level_row
from dpcore.points.release import PartitionRelease
from ui import charts, confirm, fmt, frame, intervals, near_match_ui, plan_table, series, state
from ui.kinds.points import plan as points_plan
from ui.kinds.points import series as points_series
from ui.kinds.points import state as points_state


def release_step() -> None:
    """The Release step for points (the page script is pages/release.py): the plan of the Plan step,
    released as it is (:func:`dpcore.pipeline.release`); not planned again."""
    pr = points_state.planned()
    if series.active("points") is not None:  # "Release over time" is on: one release per period
        points_series.release_step(pr)
        frame.link("export")
        return
    led = points_state.ledger()
    if not near_match_ui.answered("points", points_state.dataset().fingerprint, points_state.profile(), led):
        return  # the same population as spent data? asked first (issue 26 item 14)
    led = points_state.ledger()  # "same people" leads the data to the matched budget
    c = pr.choice
    cur = points_state.current_release()  # a click's release was made in its callback, before this run
    what = (f"**{pr.mechanism.title}** with {c.cost.label()}, {confirm.planned()}; "
            f"unit of privacy: {c.unit.label()}.")
    if cur is None:  # before any release: the Release button, primary, at the top
        confirm.button("release_button", led, c.cost, c.unit, pr.error, release_now, pr.plan, what=what)
        st.caption("Nothing has been released from this data yet.")
        frame.link("plan", "Back to the plan")
        return
    # the confirmation first, then the release's map and errors; the next release after them, calmly
    r = cur.release
    confirm.released(f"{r.mechanism_title}: {fmt.count(int(r.leaf.sum()))} released areas", r.cost, led,
                     r.release_id)
    if "auto" in r.public:  # auto's choice, in the record's words (published: read from the release)
        st.caption(f"Why {r.public['auto']['chosen_title']}: {r.public['auto']['reason']}")
    st.subheader("Map", anchor="map")
    _map(cur)
    # the release's tables, once its map is on the page: the record's level guidance below reads them
    points_state.store_pending_history()
    st.subheader("Errors", anchor="errors")
    _errors(cur)
    intervals.section(lambda: points_state.release_files(cur), r.release_id, pick=False, stored=cur.exports["files"],
                      word="points")
    confirm.button("release_button", led, c.cost, c.unit, pr.error, release_now, pr.plan, after=True, what=what)
    frame.link("export")


def release_now(plan: Plan) -> None:
    """The Release button's action (:func:`ui.state.release_button`): count (points kept in their
    files are counted here if needed), then release the Plan step's plan (charged first), store."""
    agg, into, fp = points_state.aggregate(), st.session_state["releases"], points_state.dataset().fingerprint  # before the charge
    # the budget is found again before the charge: points kept in their files get the key of the points
    # inside these bounds with this count (as the CLI finds it), and a key may have led the data to a
    # budget spent before, into which the unused one opened at load was merged (key_aliases.adopt)
    ledger = points_state.ledger()
    cv = confirm.cv_threshold()
    # the curator's stated coordinate precision (Data step; public, never read from the data), checked before the charge
    precision = coordinate_precision(st.session_state.get("coordinate_precision") or None,
                                     "The coordinates' precision (Data step)")
    out = pipeline.release(plan, agg, ledger=ledger, session=state.session())
    out = stating_precision(out, precision)  # recorded in release.json and design.json: no noise, no charge
    points_state.add_release(out, into=into, fp=fp, led=ledger, cv_threshold=cv)


def _map(cur: points_state.ReleaseEntry) -> None:
    """The released partition on a map that draws offline; hover shows each area's noisy count."""
    rel = cur.release
    c1, c2 = st.columns([3, 1])
    with c1:
        basemap = st.toggle("Web basemap (needs the internet)", key=state.persistent("basemap", False),
                            help="Off by default: the map draws offline on a white background.")
        state.store("basemap")
    depth = None
    if rel.is_tree:
        height = int(rel.level.max())
        depth = st.slider(
            "Tree depth shown", min_value=0, max_value=height,
            key=state.seed(f"_w_depth_{rel.release_id}", height),
            help="The partition at this depth of the tree: its nodes there plus the leaves that stopped "
                 "above it. The deepest level shows the released leaves.",
        ) if height > 0 else 0

    key = ("map", rel.release_id, basemap, depth, id(st.session_state.get("boundaries")))
    if cur.exports.get("map_key") != key:
        fig, info = viz.release_map_figure(rel, boundaries=st.session_state.get("boundaries"),
                                         basemap=basemap, depth=depth)
        # its dict made once: st.plotly_chart copied and serialised it on every rerun (issue 28 item 5)
        cur.exports["map_fig"], cur.exports["map_info"], cur.exports["map_key"] = charts.built(fig), info, key
    fig, info = cur.exports["map_fig"], cur.exports["map_info"]

    if rel.is_tree:
        left, right = st.columns([3, 1])
    else:
        left, right = st.container(), None
    with left:
        st.plotly_chart(fig, width="stretch", key="release_map")
        shown = "released areas" if depth is None else f"areas at depth {depth}"
        cap = f"{rel.mechanism_title}, {rel.cost.label()}: {fmt.count(info['n_shown'])} {shown}"
        if info["kind"] == "image":
            rows, cols = info["image_shape"]
            cap += ((f", drawn at full resolution: one pixel per grid cell ({fmt.count(rows)} × "
                     f"{fmt.count(cols)}); zoom in to see single cells. ") if rows == rel.grid.rows else
                    (f", drawn as an image of {fmt.count(rows)} × {fmt.count(cols)} pixels (each pixel "
                     f"{fmt.count(rel.grid.rows // rows)} × {fmt.count(rel.grid.cols // cols)} grid cells, "
                     "finer than the released areas). ")) + "Hover shows " + (
                f"sums over {fmt.count(info['n_hover'])} blocks of about {fmt.count(info['hover_cells'])} "
                "cells with their 95% interval" if info["hover_aggregated"] else
                "each released count with its 95% interval")
        elif info["aggregated"]:
            cap += (f", drawn as {fmt.count(info['n_polygons'])} blocks (sums of the released counts) "
                    "so the map stays fast; the export holds every area")
        st.caption(cap + ". Negative noisy counts are drawn as 0; the export keeps them.")
    if right is not None:
        with right:
            st.markdown("**Tree statistics**")
            depths = rel.level
            leaves_per = np.bincount(depths[rel.leaf], minlength=int(depths.max()) + 1)
            nodes_per = np.bincount(depths, minlength=int(depths.max()) + 1)
            st.metric("Height", int(depths.max()))
            st.metric("Leaves", fmt.count(int(rel.leaf.sum())))
            budgets = rel.budgets()
            per_depth = pd.DataFrame({
                "depth": np.arange(len(nodes_per)),
                "nodes": nodes_per,
                "leaves": leaves_per,
                f"{rel.cost.symbol} per count": [
                    float(np.nanmedian(budgets[depths == d])) if nodes_per[d] else np.nan
                    for d in range(len(nodes_per))
                ],
            })
            st.dataframe(per_depth, hide_index=True, width="stretch",  # narrow columns: fits its side column
                         column_config=plan_table.fit_headers({  # every header whole
                             "depth": st.column_config.NumberColumn(width="small"),
                             "nodes": st.column_config.NumberColumn(format="localized", width="small"),
                             "leaves": st.column_config.NumberColumn(format="localized", width="small"),
                             f"{rel.cost.symbol} per count": st.column_config.NumberColumn(
                                 format="%.2g", width="small", help="median over the nodes of that depth")}))
            phases = [lv for lv in rel.levels if not lv.in_partition and "depth" not in lv.extra]
            if phases:
                st.caption("Budget of the other phases: "
                           + "; ".join(f"{lv.name}: {lv.cost.label()}" for lv in phases))


def _share(p: float | None) -> str:
    """A probability for people: "12.3%", "< 0.1%", or "–" where there is none."""
    if p is None or not np.isfinite(p):
        return "–"
    return "< 0.1%" if 0 < p < 0.001 else f"{p:.1%}"


def released_plan(cur: points_state.ReleaseEntry) -> Plan:
    """The plan of the release as made: the Plan step's plan with one row per released level (levels
    sized by the data, e.g. by a noisy number of points, are the release's, not the preview's guess)."""
    rel = cur.release
    rows = tuple(level_row(lv, rel.grid.n_cells) for lv in rel.levels)
    return dataclasses.replace(cur.envelope.plan, rows=rows)


def _query_sd(share: float) -> Any:
    """The column of a range query over ``share`` of the area: its noise SD (only released levels answer)."""
    def read(r: PlanRow) -> str:
        return fmt.num(r.details["range_query_sd"][f"{share:g}"]) if r.details.get("in_partition") else "–"
    return read


def release_columns(plan: Plan) -> tuple[plan_table.Column, ...]:
    """The Release step's expected-error table of points, from the rows of the released plan: level, budget,
    noise, counts, SD and ± per count, SD of range queries, and HTF's chance that noise decides a split."""
    def cost_of(sym: str) -> Any:
        return lambda r: r.cost.value if r.cost is not None and r.cost.symbol == sym else None

    number = st.column_config.NumberColumn
    cols: list[plan_table.Column] = [("level", lambda r: r.name, None)]
    cols += [(sym, cost_of(sym), number(format="%.2g"))
             for sym in dict.fromkeys(r.cost.symbol for r in plan.rows if r.cost is not None)]
    cols += [
        ("noise", lambda r: r.noise.replace("_", " "), None),
        ("noise scale", lambda r: r.scale, number(format="%.3g")),
        ("counts", lambda r: int(r.n_counts), number(format="localized")),
        ("SD per count", lambda r: r.sd, number(format="%.3g")),
        ("± per count (95%)", lambda r: int(round(r.ci95)), number(format="localized")),
        ("SD, query of 2%", _query_sd(0.02), None),
        ("SD, query of 6%", _query_sd(0.06), None),
        ("SD, query of 10%", _query_sd(0.10), None),
    ]
    if any("p_stop_by_noise" in r.details for r in plan.rows):
        cols.append(("chance that noise decides a split", lambda r: _share(r.details.get("p_stop_by_noise")), None))
    return tuple(cols)


def _query_against_plan(cur: points_state.ReleaseEntry, released: Plan) -> None:
    """The 10 % query's noise as released next to what the Plan step said, both from the same formula
    (:func:`ui.kinds.points.plan.query_reading`): the released leaves, then the planned ones."""
    def leaf(p: Plan) -> PlanRow | None:
        rows = [r for r in p.rows if r.details.get("in_partition")]
        return rows[-1] if rows else None
    now, before = leaf(released), leaf(cur.envelope.plan)
    if now is None:
        return
    text = (f"From noise alone, a query covering 10% of the area is off by about {points_plan.query_reading(now)}, "
            f"as released ({fmt.count(now.n_counts)} released areas).")
    if before is not None:
        text += f" The Plan step said {points_plan.query_reading(before)}."
    st.markdown(text)


def _level_error_figure(rel: PartitionRelease) -> charts.BuiltFigure:
    """The error of one count per level (95%), as a bar per level; made once per release's levels and
    kept in the session (:func:`ui.charts.kept`)."""
    counted = [lv for lv in rel.levels if lv.noise != "discrete_laplace_grid"]  # counts of points only
    bars = (tuple(lv.ci95 for lv in counted), tuple(lv.name for lv in counted))
    return charts.kept("level_error_chart", bars, lambda: _level_error_bars(*bars))


def _level_error_bars(ci95: tuple[float, ...], names: tuple[str, ...]) -> go.Figure:
    fig = go.Figure(go.Bar(
        x=list(ci95), y=list(names), orientation="h",
        marker_color="#1f4e79", hovertemplate="%{y}: ± %{x:,.0f} points (95%)<extra></extra>",
    ))
    fig.update_layout(
        title={"text": "Error of one count, per level (95%)", "font": {"size": 14}},
        xaxis={"title": {"text": "± points per count (95% of counts)"}},
        yaxis={"title": {"text": "level"}, "autorange": "reversed", "categoryorder": "array",
               "categoryarray": list(names)},
        height=160 + 24 * len(names), margin={"l": 10, "r": 10, "t": 40, "b": 40},
    )
    return fig


def _errors(cur: points_state.ReleaseEntry) -> None:
    """Expected error per level (publishable), then the curator-only error against the truth."""
    rel = cur.release
    st.subheader("Expected error per level (from the mechanism, publishable)")
    plan = released_plan(cur)
    if any("p_stop_by_noise" in r.details for r in plan.rows):
        st.caption("Chance that noise decides a split: for a node holding the count expected under evenly "
                   "spread data, the chance that noise, not the data, decides whether it is split further.")
    plan_table.show(plan, release_columns(plan), width="stretch")
    _query_against_plan(cur, plan)
    st.plotly_chart(_level_error_figure(rel), width="stretch", key="level_error_chart")

    st.subheader(":red[Not for publication] — error against your true data")
    st.caption(
        "Measured on random rectangular range queries covering 2%, 6% and 10% of the area. "
        "MRE is the mean relative error in percent with a sanity bound of 20 (|true − released| / "
        "max(true, 20)). These numbers use the true counts: never publish them, and do not pick a "
        "mechanism by them without accounting for that choice."
    )
    if cur.exports.get("empirical_id") != rel.release_id:
        try:
            with st.spinner("Answering 1,500 range queries …"):
                agg = points_state.aggregate()
                cur.exports["empirical"] = diagnostics.empirical_errors(
                    rel, agg, n_per_size=500, truth=points_state.query_truth(agg))
                cur.exports["empirical_id"] = rel.release_id
        except DPCoreError as e:  # the data could not be counted again (a file moved, an engine failed)
            st.error(f"The true counts are needed here and could not be made: {e}")
            return
    emp = pd.DataFrame(cur.exports["empirical"])
    emp["query_size"] = emp["query_size"].map(lambda s: f"{s:.0%}" if isinstance(s, float) else s)
    # the "all sizes" row has no single expected SD: "–", not "None"; the same rounding in every column
    emp["expected_noise_sd"] = [fmt.num(v) for v in emp["expected_noise_sd"]]
    st.dataframe(
        emp.rename(columns={"query_size": "query size", "n_queries": "queries", "mre_percent": "MRE (%)",
                            "mae": "MAE", "rmse": "RMSE", "max_abs_error": "max |error|",
                            "expected_noise_sd": "expected noise SD"}),
        hide_index=True, width="stretch",
        column_config={"queries": st.column_config.NumberColumn(format="localized")}
        | {c: st.column_config.NumberColumn(format="%.3g") for c in ["MRE (%)", "MAE", "RMSE", "max |error|"]},
    )
