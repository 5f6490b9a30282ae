"""The sidebar, the same on every page and for every kind: dataset, privacy budget, current release.

The kind's adapter (:mod:`ui.kinds`) fills the three parts; :func:`budget_panel` draws the budget the
same way for all of them."""

from __future__ import annotations

import streamlit as st

from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from ui import budget_ui, fmt, kinds, state


def budget_panel(led: Ledger, delta: float, *, population: str | None = None) -> None:
    """The budget bar, the (ε, δ) reading of a ρ ledger, and one line per spend.

    ``population``: the name of the population the data is bound to (the budget shown is the
    population's)."""
    cap, sym = led.cap.value, led.cap.symbol
    spent, share = budget_ui.spent_with_series(led)
    if state.is_session_budget(led):
        st.caption(f"**{state.DEMO_BUDGET_NOTE}** (made-up data: its budget and history are not kept)")
    if population:
        st.caption(f"population: **{population}** (one budget for all its data)")
    st.progress(min(spent / cap, 1.0) if cap else 1.0,
                text=f"spent {sym} = {fmt.eps(spent)} of {fmt.eps(cap)} · left {fmt.eps(led.remaining)}")
    series_text = budget_ui.series_share_text(led, share)
    if series_text:
        st.caption(series_text)
    if led.definition == "zcdp":
        st.caption(f"As (ε, δ)-DP with δ = {delta:.0e}: spent ε = "
                   f"{fmt.eps(budget.zcdp_to_approx_dp(spent, delta)) if spent else '0'}")
    for e in led.entries:
        st.caption(f"#{e.index + 1} {e.label}: {e.cost.label()}")


def render() -> None:
    """The sidebar of the current kind of data (called by app.py after every page)."""
    with st.sidebar:
        kinds.adapter().sidebar()
