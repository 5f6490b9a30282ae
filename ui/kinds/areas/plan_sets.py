"""Counts over areas, Plan step of the matrix mechanism: your own area-code sets and the strategy's facts."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from dpcore.areas import area_sets
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import DPCoreError
from dpcore.privacy.calibration import interval_half_width
from ui import fmt
from ui.kinds.areas.common import keep, kept

ss = st.session_state


def area_sets_widget(h: Hierarchy) -> None:
    """Optional upload of area-code sets (public queries) for the matrix mechanism; kept in
    ``hier_sets`` for :func:`ui.kinds.areas.plan.selection`."""
    up = st.file_uploader(
        "Your own queries (optional): area-code sets, CSV 'query,area' (+ optional 'level')", type=["csv", "txt"],
        key="hier_sets_upload",
        help="Each query is the total of a set of areas of any level, e.g. a metro area made of counties: one "
             "row per (query, area). These are public questions, not data: they tune the strategy and their "
             "noisy totals are exported as area_queries.csv.")
    key = (h.fingerprint(), up.file_id if up is not None else None)
    if up is not None and ss.get("hier_sets_key") != key:
        try:
            ss["hier_sets"] = area_sets.read_area_sets(up.getvalue(), h, up.name)
            ss["hier_sets_name"] = up.name
            ss["hier_sets_error"] = None
        except DPCoreError as e:
            ss["hier_sets_error"] = str(e)
            ss.pop("hier_sets", None)
        ss["hier_sets_key"] = key
    if up is None:
        ss.pop("hier_sets", None)
        ss.pop("hier_sets_key", None)
        ss["hier_sets_error"] = None
    if ss.get("hier_sets_error"):
        st.error(ss["hier_sets_error"])
        st.caption("Fix the file and upload it again; the release is planned without it meanwhile.")
    sets = ss.get("hier_sets")
    if sets is None or ss.get("hier_sets_key") != key:
        return
    st.number_input("How much your queries matter (1 = together as much as one level)", min_value=0.01,
                    max_value=100.0, step=0.5, key=keep("sets_weight", 1.0),
                    help="The strategy minimises a weighted sum of squared errors. With 'every level "
                         "equally', your queries share this weight, in units of one level; with 'every "
                         "area total equally', each query counts like one area total times this weight.")
    kept("sets_weight")
    st.caption(f"{fmt.count(len(sets))} queries read: " + ", ".join(sets.names[:5])
               + (" …" if len(sets) > 5 else ""))


def matrix_summary(p: Any) -> None:
    """The matrix mechanism's data-free facts: strategy, workload error, lower bound, query SDs."""
    x = p.extra
    rows = [("Strategy", f"{x['strategy']} ({fmt.count(x['strategy_queries'])} strategy queries)"),
            ("Queries it is tuned to", f"{fmt.count(x['n_queries'])} ({x['workload']})"),
            ("Expected RMSE per query (weighted)", fmt.num(x["expected_rmse_per_query"]))]
    if x.get("rmse_lower_bound") is not None:
        rows += [("Lower bound for any strategy (SVD bound)", fmt.num(x["rmse_lower_bound"])),
                 ("Ratio to the lower bound", f"{x['ratio_to_lower_bound']:.4f}")]
    st.dataframe(pd.DataFrame(rows, columns=["", "value"]), hide_index=True, key="hier_matrix_summary")
    for note in x.get("notes", []):
        st.info(note)
    if "area_sets" in x:
        st.markdown("**Your queries: expected error (data-free)**")
        st.dataframe(pd.DataFrame({"query": x["area_sets"]["query"],
                                   "SD": [fmt.num(v) for v in x["area_sets"]["sd"]],
                                   "± 95 %": [f"± {fmt.num(interval_half_width('normal', v))}"
                                              for v in x["area_sets"]["sd"]]}),
                     hide_index=True, key="hier_matrix_sets")
