"""Trips between areas: the sidebar's dataset, budget and current release."""

from __future__ import annotations

import streamlit as st

from dpcore.privacy import budget
from ui import budget_ui, fmt, series, state
from ui import sidebar as sidebar_ui
from ui.kinds.flows.common import init, ledger, sci
from ui.kinds.flows.sources import model
from ui.kinds.flows.state import RELEASES_KEY


def sidebar() -> None:
    """Dataset, budget and current release of the trips loaded (drawn inside st.sidebar)."""
    ss = st.session_state
    init()
    m = model()
    st.markdown("#### Dataset")
    if m is None:
        st.caption("No trips loaded: the Data step says what is missing (earlier budgets and releases are kept).")
        return
    c = m["counts"]
    st.markdown(f"**{m['name']}**")
    st.caption(f"{m['areas_text']} (public area list)")
    st.caption(f"{fmt.count(c.total)} {m['unit']}, {fmt.count(c.n_pairs)} observed pairs"
               + (f", {fmt.count(c.dropped_trips)} above the per-person cap" if c.dropped_trips else "")
               + ". These figures are about your confidential data: for you only, never exported.")
    st.markdown("#### Privacy budget")
    led = ledger(m)
    delta = ss.get("od_delta_read" if ss.get("od_definition", "rho") != "approx" else "od_delta", 1e-8)
    sidebar_ui.budget_panel(led, delta, population=state.population_of("flows", m["fp"]))
    spent = budget_ui.spent_with_series(led)[0]
    if led.definition == "zcdp" and spent:
        st.caption(f"By the paper's simpler conversion (its Lemma 3), the spent ρ reads as ε = "
                   f"{fmt.eps(budget.zcdp_to_approx_dp_classic(spent, delta))} at δ = {sci(delta)}.")
    series.sidebar_note("flows", m["fp"], led)
    st.markdown("#### Current release")
    entries = ss[RELEASES_KEY].get(m["fp"], [])
    over_time = series.current_note("flows", m["fp"])
    if over_time:
        st.markdown(over_time)
    if not entries:
        if not over_time:
            st.caption("Nothing released yet.")
    else:
        e = ss.get("od_shown") if ss.get("od_shown") in entries else entries[-1]
        r = e.release
        st.markdown(f"{r.mechanism.title}  \n{e.cost_label} · "
                    f"{fmt.count(int(r.values[-1].size))} flows released in the finest table")
