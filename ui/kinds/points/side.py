"""Points: the sidebar's dataset, budget and current release."""

from __future__ import annotations

import streamlit as st

from dpcore.errors import DPCoreError
from ui import fmt, series, state
from ui import sidebar as sidebar_ui
from ui.kinds.points import state as points_state


def sidebar() -> None:
    """Dataset, budget and current release of the points loaded (drawn inside st.sidebar)."""
    ds = points_state.dataset()
    t = ds.table
    st.markdown("#### Dataset")
    st.markdown(f"**{ds.name}**" + (" (made-up demo data)" if ds.is_demo else ""))
    dropped = t.n_dropped
    st.caption(f"{fmt.count(t.n_kept)} rows kept of {fmt.count(t.n_read)} read")
    if dropped:
        reasons = "; ".join(f"{fmt.count(v)} {k}" for k, v in t.dropped.items() if v)
        st.caption(f"Dropped: {reasons}")
    try:
        # points kept in their files are counted on request (a pass over them), not on every edit
        agg = points_state.aggregate_current() if ds.source is not None else points_state.aggregate()
        if agg is None:
            st.caption("Not counted for this grid yet: the Data page's Count button (or a release) counts it.")
        elif agg.n_outside:
            st.caption(f"{fmt.count(agg.n_outside)} points outside the bounds (not counted)")
        if agg is not None and agg.n_capped:
            st.caption(f"{fmt.count(agg.n_capped)} records above the per-person cap (not counted)")
    except DPCoreError:  # the Data page reports problems with bounds/grid itself
        pass
    st.caption("These figures are about your confidential data: for you only, never exported.")

    st.markdown("#### Privacy budget")
    led = points_state.ledger()
    sidebar_ui.budget_panel(led, st.session_state.get("delta", 1e-6),
            population=state.population_of("points", ds.fingerprint))
    series.sidebar_note("points", ds.fingerprint, led)

    st.markdown("#### Current release")
    cur = points_state.current_release()
    over_time = series.current_note("points", ds.fingerprint)
    if over_time:
        st.markdown(over_time)
    if cur is None:
        if not over_time:
            st.caption("Nothing released yet.")
    else:
        r = cur.release
        st.markdown(f"{r.mechanism_title}  \n{r.cost.label()} · {fmt.count(int(r.leaf.sum()))} released areas")
