"""The sidebar, the same on every page: dataset, privacy budget, current release."""

from __future__ import annotations

import streamlit as st

from dpcore.errors import DPCoreError
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from ui import fmt, state


def _ledger(led: Ledger, delta: float, *, classic: bool = False, population: str | None = None) -> None:
    """The budget bar, the (ε, δ) reading of a ρ ledger, and one line per spend.

    ``classic``: also name the paper's (Lemma 3) reading beside the CKS one (the O/D page, whose
    releases may be stated through that conversion).  ``population``: the name of the population
    the data is bound to (the budget shown is the population's)."""
    spent, cap, sym = led.spent, led.cap.value, led.cap.symbol
    if state.is_session_budget(led):
        st.caption(f"**{state.DEMO_BUDGET_NOTE}** (made-up data: its budget and history are not kept)")
    if population:
        st.caption(f"population: **{population}** (one budget for all its data)")
    st.progress(min(spent / cap, 1.0) if cap else 1.0,
                text=f"spent {sym} = {fmt.eps(spent)} of {fmt.eps(cap)} · left {fmt.eps(led.remaining)}")
    if led.definition == "zcdp" and classic and spent:
        d = f"{delta:.0e}".replace("e-0", "e-")
        st.caption(f"Spent so far ≈ ε {fmt.eps(budget.zcdp_to_approx_dp(spent, delta))} at δ = {d} (CKS "
                   f"conversion; the paper's conversion reads ε = "
                   f"{fmt.eps(budget.zcdp_to_approx_dp_classic(spent, delta))}).")
    elif led.definition == "zcdp" and not classic:
        st.caption(f"As (ε, δ)-DP with δ = {delta:.0e}: spent ε = "
                   f"{fmt.eps(budget.zcdp_to_approx_dp(spent, delta)) if spent else '0'}")
    for e in led.entries:
        st.caption(f"#{e.index + 1} {e.label}: {e.cost.label()}")


def render_hierarchy() -> None:
    """Sidebar of the census-hierarchy page: its dataset, its ledger, its release."""
    ss = st.session_state
    model = ss.get("hier_model")
    with st.sidebar:
        st.markdown("#### Dataset")
        if model is None:
            st.caption("No hierarchy loaded yet.")
            return
        h = model["h"]
        st.markdown(f"**{model['name']}**")
        st.caption(", ".join(f"{fmt.count(n)} {lv}" for lv, n in zip(h.level_names[1:], h.sizes[1:], strict=True))
                   + f" · {fmt.count(model['counts'].n_rows)} rows read")
        st.caption("These figures are about your confidential data: for you only, never exported.")
        st.markdown("#### Privacy budget")
        led = ss.get("census_ledgers", {}).get(model["fp"])
        if led is not None:
            _ledger(led, ss.get("hier_delta", 1e-6), population=state.population_of("census", model["fp"]))
        st.markdown("#### Current release")
        entry = ss.get("hier_release")
        if entry is None or entry["fp"] != model["fp"]:
            st.caption("Nothing released yet.")
        else:
            r = entry["release"]
            st.markdown(f"{r.mechanism.title}  \n{r.plan.cost.label()} · {fmt.count(h.n_nodes)} areas")


def render_od() -> None:
    """Sidebar of the O/D page: its dataset, its ledger, its release."""
    ss = st.session_state
    model = ss.get("od_model") if ss.get("od_active") else None
    with st.sidebar:
        st.markdown("#### Dataset")
        if model is None:
            st.caption("No O/D data loaded yet." if not ss.get("od_model") else
                       "No O/D data loaded (the earlier dataset's budget and release are kept).")
            return
        h = model["h"]
        c = model["counts"]
        st.markdown(f"**{model['name']}**")
        st.caption(", ".join(f"{fmt.count(n)} {lv}" for lv, n in zip(h.level_names[1:], h.sizes[1:], strict=True))
                   + " (public area list)")
        st.caption(f"{fmt.count(c.total)} {model['unit']}, {fmt.count(c.n_pairs)} observed pairs"
                   + (f", {fmt.count(c.dropped_trips)} above the per-person cap" if c.dropped_trips else "")
                   + ". These figures are about your confidential data: for you only, never exported.")
        st.markdown("#### Privacy budget")
        led = ss.get("od_ledgers", {}).get(model["fp"])
        if led is not None:
            _ledger(led, ss.get("od_delta", 1e-8), classic=True, population=state.population_of("od", model["fp"]))
        st.markdown("#### Current release")
        entry = ss.get("od_shown")
        if entry is None or entry.get("fp") != model["fp"]:
            st.caption("Nothing released yet.")
        else:
            r = entry["release"]
            st.markdown(f"{r.mechanism.title}  \n{entry['cost_label']} · "
                        f"{fmt.count(int(r.values[-1].size))} finest flows released")


def render(page: str = "") -> None:
    if page == "hierarchy":
        render_hierarchy()
        return
    if page == "od":
        render_od()
        return
    ds = state.dataset()
    t = ds.table
    with st.sidebar:
        st.markdown("#### Dataset")
        st.markdown(f"**{ds.name}**" + (" (made-up demo data)" if ds.is_demo else ""))
        dropped = t.n_dropped
        st.caption(f"{fmt.count(t.n_kept)} rows kept of {fmt.count(t.n_read)} read")
        if dropped:
            reasons = "; ".join(f"{fmt.count(v)} {k}" for k, v in t.dropped.items() if v)
            st.caption(f"Dropped: {reasons}")
        try:
            # points kept in their files are counted on request (a pass over them), not on every edit
            agg = state.aggregate_current() if ds.source is not None else state.aggregate()
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
        _ledger(state.ledger(), st.session_state.get("delta", 1e-6),
                population=state.population_of("points", ds.fingerprint))

        st.markdown("#### Current release")
        cur = state.current_release()
        if cur is None:
            st.caption("Nothing released yet.")
        else:
            r = cur.release
            st.markdown(f"{r.mechanism_title}  \n{r.cost.label()} · {fmt.count(int(r.leaf.sum()))} areas")
