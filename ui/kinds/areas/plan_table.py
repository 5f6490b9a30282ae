"""Counts over areas, Plan step for a census table with attributes: Privelet or the marginal tables.

Both are mechanisms of this kind, chosen here like the hierarchy mechanisms; everything shown
before the release is data-free.  :func:`selection` reads back the choice for the Release step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from dpcore import catalog
from dpcore.areas import census_tables
from dpcore.areas.mechanisms import census_privelet
from dpcore.areas.unit import census_unit
from dpcore.core.mechanism import Plan
from dpcore.errors import DPCoreError
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from ui import budget_ui, fmt, frame, plans, state
from ui.kinds.areas import common
from ui.kinds.areas import marginals as marginals_ui

MAX_SELECT = 2000  # beyond this many areas, type the path instead of picking it
DEFAULT_EPSILON = state.DEFAULT_EPSILON
#: mechanism -> (title, use it when)
MECHS = {"privelet": ("Privelet: every area of every level (pure ε)",
                      "you publish the people of every area of every level, crossed with the attributes, and "
                      "users add areas and ranges of an attribute up (Xiao, Wang & Gehrke, ICDE 2010)."),
         "matrix": ("Matrix mechanism: the tables you choose (area × age band …)",
                    "you know which tables will be published (people per county and age band, per age band …): "
                    "the noise is tuned to exactly those tables (Li & Miklau, PVLDB 2012).")}
DEFS = {"pure": "Pure ε-DP", "zcdp": "ρ-zCDP (for the matrix mechanism's optimal strategy)"}

ss = st.session_state


def plan_step() -> None:
    """The Plan step for a census table with attributes."""
    table, fp = common.table()
    if table is None:
        frame.missing("Load a census table on the Data step first.", "data", "Go to the Data step")
    st.caption(f"Data: **{ss.get('census_name', 'census table')}**")
    st.subheader("1. Mechanism")
    mech = st.radio("Mechanism", list(MECHS), format_func=lambda m: MECHS[m][0], horizontal=True,
                    key=state.persistent("census_mech", "privelet"))
    state.store("census_mech")
    st.markdown(f"**Use it when:** {MECHS[mech][1]}")

    st.subheader("2. Privacy budget")
    # persistent: the same table finds the same budget (its population's, once bound) on every step and after
    # restarts; shared with the hierarchy mechanisms of the same table
    sec = budget_ui.section("areas", fp, ss.setdefault("census_ledgers", {}), key=f"census_{fp}",
                            definition_key=f"census_def_{fp}", cap_key="census_cap",
                            release_keys={"pure": "census_epsilon"} if mech == "privelet" else None,
                            release_in="pure", definition_label="Privacy definition of this dataset's budget",
                            definitions=DEFS, definition_help="Privelet is pure ε-DP; under a ρ-zCDP budget it is "
                                                              "charged ρ = ε²/2.", release_max=10.0)
    led = sec.ledger
    if mech == "matrix":
        marginals_ui.plan_section(table, led)
        frame.link("release", "Next: release →")
        return
    axis_names = [census_tables.GEO_AXIS, *table.structure.ordinals]
    ss["_w_census_plus"] = [a for a in ss.get("_w_census_plus", ss.get("census_plus", [])) if a in axis_names]
    with st.expander("Advanced: Privelet+"):
        st.caption("For small attributes read cell by cell: plain noise per cell on the axes you choose.")
        st.multiselect("Axes left untransformed (identity)", axis_names, key="_w_census_plus",
                       help="Privelet+ adds plain noise per cell on these axes: better for small axes "
                            "queried cell by cell, worse for large sums.")
        state.store("census_plus")
    sel = selection()
    if sel.error is not None:
        st.error(sel.error)
        return
    _privelet_error(table, sel)
    frame.link("release", "Next: release →")


def _privelet_error(table: Any, sel: TableSelection) -> None:
    """The expected error of Privelet's plan, per level (the plan's rows), then of one area."""
    st.subheader("3. Expected error (before release, from no data)")
    rows = sel.plan.rows
    last = rows[-1]
    st.markdown(f"The total of one {common.level_label(last.name)} is off by about **± "
                f"{fmt.num(last.ci95)} people** in 19 of 20 cases.")
    show = pd.DataFrame({
        "level": [common.level_label(r.name) for r in rows],
        "number of areas": [fmt.count(r.n_counts) for r in rows],
        "SD of an area's total": [f"{r.sd:,.1f}" for r in rows],
        "± 95 %": [f"± {r.ci95:,.1f}" for r in rows],
    })
    st.dataframe(show, hide_index=True, key="census_expected")
    with st.expander("How the expected error is computed"):
        st.caption("From the mechanism, the budget and the public areas only: no data is used.")
        st.markdown("The 95 % half-width is 2.12 × SD, the exact 95 % quantile of one Laplace draw. An area's "
                    "noise is a weighted sum of a few Laplace draws (its own wavelet coefficient, its neighbours' "
                    "and its parents'); for every weight pattern checked "
                    "(benchmarks/results/privelet_weights_coverage.md) this half-width covers such a sum in at "
                    "least 95 % of releases, where the normal 1.96 × SD covers less than 95 % (93.7 % for one "
                    "draw).")

    s = table.structure
    q1, q2 = st.columns([1, 2])
    q_level = q1.selectbox("Check one area: level", s.level_names[1:], key="census_q_level")
    paths = s.paths_at(s.level_depth(q_level))
    labels = [" / ".join(p) for p in paths]
    if len(paths) <= MAX_SELECT:
        q_label = q2.selectbox("Area (code path)", labels, key="census_q_area")
    else:
        q_label = q2.text_input(f"Area code path ({fmt.count(len(paths))} areas), e.g. {labels[0]}",
                                value=labels[0], key="census_q_text")
    q_path = tuple(x.strip() for x in str(q_label).split("/"))
    try:
        q_sd = census_privelet.area_expected_error(s, sel.epsilon, q_path, plus_axes=sel.plus)
        st.markdown(f"Expected error of **{q_label}**'s total: ± {fmt.num(float(census_privelet.half_widths(q_sd)))} "
                    f"people (95 %; SD {fmt.num(q_sd)}).")
    except DPCoreError as e:
        st.error(str(e))


@dataclass(frozen=True)
class TableSelection:
    """What the Plan step chose for a census table, read back without widgets, and the one core plan
    built from it through the catalogue (``plan``): the Release step releases that plan."""

    mech: str
    title: str
    cost: budget.PrivacyCost
    ledger: Ledger
    epsilon: float = DEFAULT_EPSILON
    plus: tuple[str, ...] = ()
    plan: Plan | None = None
    error: str | None = None


def selection() -> TableSelection:
    """The mechanism, budget and plan of the Plan step for the census table loaded now."""
    table, fp = common.table()
    led = common.ledger(fp)
    mech = ss.get("census_mech", "privelet")
    if mech == "matrix":
        p, error = marginals_ui.selected_plan(table, led)
        cost = p.cost if p is not None else marginals_ui.selected_cost(led)
        return TableSelection(mech, "matrix mechanism (marginal tables)", cost, led, plan=p, error=error)
    eps = float(ss.get("census_epsilon", DEFAULT_EPSILON))
    plus = tuple(a for a in ss.get("census_plus", []) if a in [census_tables.GEO_AXIS, *table.structure.ordinals])
    once = state.person_once(fp)
    p, error = plans.kept("census_privelet_plan", plans.digest(fp, id(table.structure), eps, plus, once),
                          lambda: _privelet_plan(table, eps, plus, once))
    return TableSelection(mech, "Privelet" + ("+" if plus else ""), budget.pure(eps), led, eps, plus, p, error)


def _privelet_plan(table: Any, eps: float, plus: tuple[str, ...], once: bool = False) -> tuple[Plan | None, str | None]:
    """Privelet's one core plan, through the catalogue, or why there is none."""
    try:
        return catalog.get("census", "privelet").plan(table.structure, budget.pure(eps), {"plus_axes": plus},
                                                      unit=census_unit(person_once=once)), None
    except DPCoreError as e:
        return None, str(e)
