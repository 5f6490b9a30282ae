"""Trips between areas, Release step: the Release button and its confirmation, then the map of the
largest flows with the O/D matrix, the errors (expected, then measured for the curator only), and the
data user's estimate and 90 % interval for a union of released flows (:func:`ui.intervals.section`)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import streamlit as st

from dpcore import catalog, pipeline
from dpcore.flows import figures as od_figures
from dpcore.flows.diagnostics import empirical_errors
from dpcore.flows.mechanisms.common import ODRelease
from ui import confirm, fmt, frame, intervals, near_match_ui, plan_table, series, state
from ui.kinds.flows import series as flows_series
from ui.kinds.flows.common import (
    MAX_MAP_AREAS,
    error_basis,
    figure,
    keep,
    keep_choice,
    kept,
    people,
    plan_caption,
    plan_columns,
    short_name,
    shown_entry,
    unit_words,
)
from ui.kinds.flows.export import release_config
from ui.kinds.flows.plan import Selection, selection
from ui.kinds.flows.sources import need_model
from ui.kinds.flows.state import RELEASES_KEY, ODEntry


def release_step() -> None:
    """The Release step for trips between areas (the page script is pages/release.py)."""
    m = need_model()
    if m is None:
        return
    sel = selection(m)
    if series.active("flows") is not None:  # "Release over time" is on: one release per period
        flows_series.release_step(m, sel)
        frame.link("export")
        return
    if not near_match_ui.answered("flows", m["fp"], m["counts"].profile(), sel.ledger):
        return  # the same population as spent data? asked first (issue 26 item 14)
    entry = shown_entry(m)  # a click's release was made in its callback, before this run
    st.session_state["od_shown"] = entry
    what = (f"**{catalog.get('od', sel.mechanism).title}** with {sel.cost_label}, {confirm.planned()}; unit of "
            f"privacy: **{unit_words(sel.unit, m['unit'])}**.")
    if entry is None:  # before any release: the Release button, primary, at the top
        confirm.button("od_release_button", sel.ledger, sel.cost, sel.unit, sel.error, release_now, sel, what=what)
        st.caption("Nothing has been released from these trips yet.")
        frame.link("plan", "Back to the plan")
        return
    # the confirmation first, then the release's map and errors; the next release after them, calmly
    rel: ODRelease = entry.release
    confirm.released(f"{rel.mechanism.title}: {fmt.count(sum(int(v.size) for v in rel.values[1:]))} flows in "
                     f"{rel.depth} tables", rel.plan.cost, sel.ledger, rel.release_id)
    if entry.view != m["view"]:
        st.info("This is the latest release of these trips. It was made with another area list or unit of privacy "
                "than the Data step now shows, and is shown as it was made. Release again to publish with the new "
                "settings.")
    st.subheader("Map", anchor="map")
    _map(entry)
    st.subheader("Errors", anchor="errors")
    _errors(entry)
    # flows of any table (origin>destination pairs of the O/D tree); a pair has no one shape: no polygon
    intervals.section(lambda: entry.files, entry.release.release_id, pick=True, polygon=False, noun="flow",
                      word=m["unit"])
    confirm.button("od_release_button", sel.ledger, sel.cost, sel.unit, sel.error, release_now, sel, after=True,
                   what=what)
    frame.link("export")


def release_now(sel: Selection) -> None:
    """The Release button's action (:func:`ui.state.release_button`: once per click): charge, release, store.

    Streamlit 1.67 can stop a callback at any read or write of st.session_state (a second click asks for a
    rerun): everything the release needs is read before the charge, and nothing between the charge and the
    storing of the release touches st.session_state.
    """
    m, led = sel.model, sel.ledger
    fp = m["fp"]
    releases = st.session_state[RELEASES_KEY]
    cfg, cv = release_config(sel), confirm.cv_threshold()  # before the charge
    # the Plan step's plan, released as it is (not planned again)
    out = pipeline.release(sel.core, m["counts"], ledger=led, session=state.session())
    rel = out.inner
    extra = {"budget_input": sel.approx} if sel.approx else None
    # the files, made once from the envelope (the record with the ledger as of the charge and the plan's
    # rows): stored, then served by Export
    files = out.files(led, origin_xy=m["xy"] or None, delta=sel.delta, extra=extra, cv_threshold=cv)
    releases.setdefault(fp, []).append(ODEntry(rel, fp, m["view"], m, m["name"], sel.cost_label, sel.delta, sel.approx,
                                               files, plan=sel.core, config=cfg))
    state.remember_release("flows", fp, rel.release_id,
                           {"mechanism": catalog.get("od", sel.mechanism).title, "cost": sel.cost_label,
                            "levels": [lv.name for lv in rel.plan.levels]},  # no file name (issue 18)
                           files, led)


def _map(entry: ODEntry) -> None:
    """The largest released flows of one table on a map that draws offline, and its O/D matrix."""
    rel: ODRelease = entry.release
    em = entry.model  # the settings the release was made with
    eh, eunit = em["h"], em["unit"]
    fp = entry.fp
    T = rel.depth
    lps = rel.plan.levels
    intra = [t for t in range(1, T + 1) if lps[t].kind == "intra" and eh.sizes[lps[t].origin_depth] <= MAX_MAP_AREAS]
    default_t = intra[-1] if intra else 1
    c1, c2 = st.columns([2, 3])
    t = c1.selectbox("Table (tree level)", list(range(1, T + 1)),
                     key=keep_choice(f"map_level_{fp}", list(range(1, T + 1)), default_t),
                     format_func=lambda i: f"{short_name(lps[i])} · {fmt.count(rel.values[i].size)} flows released",
                     help="A table of flows between the areas of two levels of the public geography.")
    kept(f"map_level_{fp}")
    top = c2.slider("Show the largest N flows", 10, 1000, step=10, key=keep("top", 200),
                    help="The N largest flows between two different areas are drawn as lines, and the N largest "
                         "flows within one area as circles.")
    kept("top")
    within = c2.checkbox("Show flows within one area as circles", key=keep("within", True))
    kept("within")
    lp = lps[t]
    od_, dd = lp.origin_depth, lp.destination_depth
    xy = em["xy"]
    has_xy = od_ in xy and dd in xy and min(od_, dd) > 0
    cmap, cside = st.columns([3, 2]) if max(eh.sizes[od_], eh.sizes[dd]) <= od_figures.MAX_HEATMAP_SIDE else (st, None)
    if has_xy:
        def _flow_map() -> Any:
            frames = em["boundaries"]  # public outlines: the finest ones up to this level, and the top level
            bg = []
            if frames:
                upto = [d for d in sorted(frames) if d <= max(od_, dd)] or [min(frames)]
                bg = [frames[upto[-1]]] + ([frames[min(frames)]] if min(frames) != upto[-1] else [])
            return od_figures.flow_map(rel, t, xy, boundaries=bg or None, top=top, within=within, unit=eunit)

        cmap.plotly_chart(figure((rel.release_id, "map", t, top, within), _flow_map), key="od_map",
                          config={"displayModeBar": False})
        cmap.caption(f"Lines: the {top} largest released flows of '{short_name(lp)}' between two areas "
                     f"(release.csv: {lp.name}), thicker = more {eunit}, arcs bend to the right "
                     "of their direction and end in a dot at the destination"
                     + (f"; circles: the {top} largest flows within one area" if within else "")
                     + ". Hover: the noisy count. Positions are public area centres.")
    elif min(od_, dd) == 0:
        cmap.info(f"In '{short_name(lp)}' one end is the whole territory (the total), which has no place on a "
                  "map: the matrix and the table below show these flows.")
    else:
        cmap.info("No positions for these areas (add longitude/latitude columns or boundaries to the area list "
                  "on the Data step); the table below lists the largest flows.")
    if cside is not None:
        log = cside.checkbox("Logarithmic colours", key=keep("heat_log", True))
        kept("heat_log")
        cside.plotly_chart(figure((rel.release_id, "heat", t, log),
                                  lambda: od_figures.od_heatmap(rel, t, log=log, unit=eunit, height=520)),
                           key="od_heatmap")
        cside.caption(f"Rows: the origin {fmt.plural(lp.origin_level)}; columns: the destination "
                      f"{fmt.plural(lp.destination_level)}; blank: released as 0.")
    st.info(f"At this level, flows below about **{fmt.num(lp.unreliable_below)} {eunit}** are unreliable (about "
            "twice the noise): a released flow that small may be noise, and true flows that small are often "
            "released as 0.")
    with st.expander("Largest flows as a table"):
        f = rel.frame(t, names=True)
        codes = rel.frame(t)
        if not (f["origin"].equals(codes["origin"]) and f["destination"].equals(codes["destination"])):
            f.insert(1, "origin code", codes["origin"])
            f.insert(3, "destination code", codes["destination"])
        f = f.sort_values("noisy_count", ascending=False, kind="stable").head(top)
        st.dataframe(f.rename(columns={"noisy_count": f"released {eunit}"}), hide_index=True, key="od_top_table",
                     width="stretch", column_config={f"released {eunit}": st.column_config.NumberColumn(
                         format="localized")})


def _errors(entry: ODEntry) -> None:
    """The expected error per table (publishable), then the error measured against the data (curator only)."""
    rel: ODRelease = entry.release
    shown = rel.plan
    eunit = entry.model["unit"]
    st.markdown("**Expected error of the release** (analytic, from no data: publishable)")
    plan_table.show(entry.plan, plan_columns(entry.plan, eunit, full=True), key="od_err_plan", width="stretch",
                    placeholder="–")
    st.caption(plan_caption(shown))
    error_basis(shown, eunit)
    st.markdown("**:red[Not for publication]: measured error of the release against your data**")
    st.warning("These numbers compare the release with your confidential data. Do not publish them, and do not "
               "re-run releases until they look good: that choice is not covered by the privacy budget.")
    if "empirical" not in entry.exports:
        entry.exports["empirical"] = empirical_errors(rel, entry.model["counts"])  # curator only, computed once
    emp = entry.exports["empirical"]
    lps = rel.plan.levels

    def pct(x: float | None) -> float | None:
        return None if x is None or not math.isfinite(x) else round(float(x), 1)

    def num(**kw: Any) -> Any:  # narrow number columns: the tables fit the page without scrolling sideways
        return st.column_config.NumberColumn(width="small", **kw)

    name_col = st.column_config.TextColumn("table", width="medium")
    st.markdown("**Errors: measured and expected**")
    st.dataframe(pd.DataFrame([{
        "table": short_name(lps[e["tree_level"]]),
        "largest error · measured": people(e["max_abs_error"]),
        "typical largest error · expected": people(e["expected_max_abs"]),
        "error per flow (RMSE) · measured": people(e["rmse_all_pairs"]),
        "error per flow (RMSE) · expected": people(e["expected_rmse"]),
    } for e in emp]), hide_index=True, key="od_err_emp", width="stretch", placeholder="–", column_config={
        "table": name_col,
        **{c: num(format="localized") for c in ("largest error · measured", "typical largest error · expected",
                                                "error per flow (RMSE) · measured",
                                                "error per flow (RMSE) · expected")}})
    st.caption(f"In {eunit} per area pair: measured on your data, next to what the plan expected (the columns of "
               "the same names above). The RMSE is over all possible pairs of the table; the largest error over "
               "the pairs positive in the data or the release.")
    st.markdown("**Flows made up and flows lost**")
    st.dataframe(pd.DataFrame([{
        "table": short_name(lps[e["tree_level"]]),
        "released flows not in the data (%)": pct(e["fdr_percent"]),
        "true flows released as 0 (%)": pct(e["fnr_percent"]),
        "released flows": e["released_pairs"],
        "true flows": e["true_pairs"],
    } for e in emp]), hide_index=True, key="od_err_emp_flows", width="stretch", placeholder="–", column_config={
        "table": name_col,
        "released flows not in the data (%)": num(format="%.1f %%", help="Of the flows released > 0, the share "
                                                                          "nobody travelled (false positives)."),
        "true flows released as 0 (%)": num(format="%.1f %%", help="Of the real flows, the share released as 0 "
                                                                    "(false negatives)."),
        "released flows": num(format="localized", help="Area pairs released with a count above 0."),
        "true flows": num(format="localized", help="Area pairs with at least one trip in your data."),
    })
    with st.expander("More measured errors · curator only, not for publication"):
        st.dataframe(pd.DataFrame([{
            "table": short_name(lps[e["tree_level"]]),
            "mean error (flows in the data or the release)": people(e["mean_abs_error"]),
            "median relative error (%)": pct(100 * e["median_relative_error"]),
            "95th percentile relative error (%)": pct(100 * e["p95_relative_error"]),
            "released flows not in the data": e["false_positives"],
            "true flows released as 0": e["false_negatives"],
        } for e in emp]), hide_index=True, key="od_err_emp_more", width="stretch", placeholder="–",
            column_config={"table": name_col,
                           "mean error (flows in the data or the release)": num(),
                           "median relative error (%)": num(),
                           "95th percentile relative error (%)": num(),
                           "released flows not in the data": num(format="localized"),
                           "true flows released as 0": num(format="localized")})
        st.caption("Relative error: |released − true| / true, over the real flows.")
