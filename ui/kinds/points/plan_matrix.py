"""Points, Plan step: the matrix mechanism's parts (its uploaded rectangles, its error report)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from dpcore.errors import DPCoreError
from dpcore.estimate import matrix_report
from dpcore.points import workload_io
from ui import fmt


def strategy_report(mx: Any) -> None:
    """The matrix mechanism's plan: the queries its strategy is tuned for, its expected error and the
    smallest any strategy could reach, its notes (from the plan's ``matrix`` details)."""
    st.markdown(f"**Queries the strategy is tuned for:** {mx['workload_name']} "
                f"({fmt.count(mx['n_queries'])} queries; strategy {mx['strategy']}).")
    st.dataframe(
        pd.DataFrame([{
            "expected error per query (RMSE)": mx["expected_rmse_per_query"],
            "lower bound (any strategy)": mx["rmse_lower_bound"],
            "ratio to the bound": mx["ratio_to_lower_bound"],
        }]),
        hide_index=True, width="stretch", key="matrix_error_table",
        column_config={c: st.column_config.NumberColumn(format="%.3g") for c in (
            "expected error per query (RMSE)", "lower bound (any strategy)", "ratio to the bound")},
    )
    st.caption("From the queries and the budget only (no data): the root mean square noise of the "
               "answers to your queries, and the smallest any strategy could reach (SVD bound).")
    for note in mx["notes"]:
        st.warning(note)
    if "simultaneous_95" in mx:
        matrix_extras(mx)


def rectangles_upload(raw: dict[str, Any]) -> None:
    """The matrix mechanism's uploaded workload: a CSV of lon/lat rectangles (public questions).
    A file that cannot be used shows why and keeps the rectangles uploaded before."""
    up = st.file_uploader(
        "Your rectangles (CSV: lon_min, lat_min, lon_max, lat_max; optional name, weight, group)",
        type=["csv", "txt", "json"], key="matrix_rects_upload",
        help="One rectangle per row in degrees. Also accepted: west/south/east/north or "
             "xmin/ymin/xmax/ymax, or the release.json of an earlier release. The rectangles are your "
             "questions, not data: they are public and kept in the release record.",
    )
    if up is not None:
        sig = up.file_id  # a new upload has a new id: no copy and hash of the file on every rerun
        if st.session_state.get("matrix_rects_sig") != sig:
            try:
                raw["rectangles"] = workload_io.read_rectangles(up.getvalue(), f"'{up.name}'")
                st.session_state["matrix_rects_sig"] = sig
                st.session_state["matrix_rects_name"] = up.name
            except DPCoreError as e:
                st.error(str(e))
                if raw.get("rectangles"):
                    st.caption(f"Still using the {len(raw['rectangles']):,} rectangles of "
                               f"{st.session_state.get('matrix_rects_name', 'the earlier file')}.")
    rl = raw.get("rectangles")
    if not rl:
        st.info("Upload the rectangles you want answered. Each asks for the grid cells whose centres lie "
                "inside it.")
        return
    rl = workload_io.RectangleList(rl)
    st.caption(f"{len(rl):,} rectangles from {st.session_state.get('matrix_rects_name', 'your file')} "
               "(public). A rectangle asks for the cells whose centres lie inside it; parts outside the "
               "area are clipped.")
    with st.expander("The uploaded rectangles"):
        st.dataframe(pd.DataFrame(rl.to_list()), hide_index=True, key="matrix_rects_table")


def matrix_extras(mx: dict[str, Any]) -> None:
    """Spec §6.3: per-group RMSE, worst query, simultaneous bound, other strategies, SE vs size."""
    sim = mx["simultaneous_95"]
    c1, c2, c3 = st.columns(3)
    c1.metric("Typical error of a query (RMSE)", f"± {fmt.num(mx['expected_rmse_per_query'])}")
    c2.metric("Worst query: standard error", f"± {fmt.num(mx['worst_se'])}")
    c3.metric("No answer off by more than (95%)", f"± {fmt.num(sim['bound'])}",
              help=sim["method"] + ". " + sim.get("method_subgaussian", sim.get("note", "")))
    extra = (f" Without assuming normal noise (sub-Gaussian bound): ± {fmt.num(sim['bound_subgaussian'])}."
             if "bound_subgaussian" in sim else "")
    st.caption(f"With 95% probability none of the {fmt.count(mx['n_queries'])} answers is off by more than "
               f"± {fmt.num(sim['bound'])} ({sim['method']}).{extra}")
    labels, short = mx["strategy_labels"], mx["strategy_short_labels"]
    what = "group" if mx["grouped_by"] == "group" else "query size"
    groups = pd.DataFrame([{
        what: g["group"], "queries": g["n_queries"], "RMSE": g["rmse_this"], "worst SE": g["worst_se"],
        **{f"RMSE, {short[k]}": g[f"rmse_{k}"] for k in labels if k != "this"},
    } for g in mx["groups"]])
    source = "the column 'group' of your file" if what == "group" else "the size of the query in cells"
    st.markdown(f"**Expected error per {what}** ({source}; unweighted; this strategy, then the others for "
                "comparison)")
    st.dataframe(groups, hide_index=True, width="stretch", key="matrix_group_table",
                 column_config={c: st.column_config.NumberColumn(format="%.3g")
                                for c in groups.columns if c not in (what, "queries")})
    comp = pd.DataFrame([{"strategy": c["strategy"], "RMSE": c["rmse"], "worst SE": c["worst_se"],
                          "× this strategy": c["ratio_to_this"]} for c in mx["comparisons"]])
    st.markdown("**Other strategies under the same budget** (same queries, same noise calibration)")
    st.dataframe(comp, hide_index=True, width="stretch", key="matrix_comparison_table",
                 column_config={c: st.column_config.NumberColumn(format="%.3g")
                                for c in ("RMSE", "worst SE", "× this strategy")})
    st.caption("Identity adds noise to every cell; 'noise on each query' answers each query directly "
               "(no cell estimates); hierarchical uses a binary tree of ranges per axis. The release "
               "uses this strategy: it must estimate every cell.")
    st.plotly_chart(matrix_report.se_vs_size_figure({"by_size": mx["by_size"], "labels": labels}),
                    width="stretch", key="matrix_se_size_chart")
