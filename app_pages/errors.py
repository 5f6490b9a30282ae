"""Errors: expected error per level (public), and the curator-only error against the truth."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dpcore import pipeline
from dpcore.errors import DPCoreError
from ui import state

st.title("Errors")
st.markdown(
    "How far the released numbers can be from the truth: first the expected error that follows "
    "from the mechanism (publishable), then the actual error measured against your data "
    "(for you only). Next step: export."
)

cur = state.current_release()
if cur is None:
    st.info("Nothing has been released for this dataset yet; the expected error before release is "
            "on the Mechanism & budget page.")
    st.page_link("app_pages/mechanism.py", label="Go to Mechanism & budget", icon=":material/tune:")
    st.stop()

rel = cur.release
n_cells = rel.grid.n_cells
st.subheader("Expected error per level (from the mechanism, publishable)")
rows = []
for lv in rel.levels:
    rows.append({
        "level": lv.name,
        lv.cost.symbol: lv.cost.value,
        "noise": lv.noise.replace("_", " "),
        "noise scale": lv.scale,
        "counts": lv.n_counts,
        "SD per count": lv.sd,
        "± per count (95%)": lv.ci95,
        "SD, query of 2%": lv.query_sd(0.02, n_cells) if lv.in_partition else None,
        "SD, query of 6%": lv.query_sd(0.06, n_cells) if lv.in_partition else None,
        "SD, query of 10%": lv.query_sd(0.10, n_cells) if lv.in_partition else None,
    })
exp = pd.DataFrame(rows)
if any("p_stop_by_noise" in lv.extra for lv in rel.levels):
    exp["P(stop test decided by noise)"] = [lv.extra.get("p_stop_by_noise") for lv in rel.levels]
    st.caption("P(stop test decided by noise): for a node holding the count expected under evenly "
               "spread data, the chance that noise, not the data, decides whether it is split further.")
st.dataframe(exp, hide_index=True, width="stretch",
             column_config={c: st.column_config.NumberColumn(format="%.4g")
                            for c in ["noise scale", "SD per count", "± per count (95%)", "SD, query of 2%",
                                      "SD, query of 6%", "SD, query of 10%",
                                      "P(stop test decided by noise)"]})
counted = [lv for lv in rel.levels if lv.noise != "discrete_laplace_grid"]  # counts of people only
fig = go.Figure(go.Bar(
    x=[lv.ci95 for lv in counted], y=[lv.name for lv in counted], orientation="h",
    marker_color="#1f4e79", hovertemplate="%{y}: ± %{x:,.0f} people (95%)<extra></extra>",
))
fig.update_layout(
    title={"text": "± per count (95%), people", "font": {"size": 14}},
    yaxis={"autorange": "reversed", "categoryorder": "array", "categoryarray": [lv.name for lv in counted]},
    height=120 + 24 * len(counted), margin={"l": 10, "r": 10, "t": 40, "b": 30},
)
st.plotly_chart(fig, width="stretch", key="level_error_chart")

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
            cur.exports["empirical"] = pipeline.empirical_errors(rel, state.aggregate(), n_per_size=500)
            cur.exports["empirical_id"] = rel.release_id
    except DPCoreError as e:  # the data could not be counted again (a file moved, an engine failed)
        st.error(f"The true counts are needed here and could not be made: {e}")
        st.stop()
emp = pd.DataFrame(cur.exports["empirical"])
emp["query_size"] = emp["query_size"].map(lambda s: f"{s:.0%}" if isinstance(s, float) else s)
st.dataframe(
    emp.rename(columns={"query_size": "query size", "n_queries": "queries", "mre_percent": "MRE (%)",
                        "mae": "MAE", "rmse": "RMSE", "max_abs_error": "max |error|",
                        "expected_noise_sd": "expected noise SD"}),
    hide_index=True, width="stretch",
    column_config={c: st.column_config.NumberColumn(format="%.4g")
                   for c in ["MRE (%)", "MAE", "RMSE", "max |error|", "expected noise SD"]},
)
st.page_link("app_pages/export.py", label="Next: export →", icon=":material/download:")
