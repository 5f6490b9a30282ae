"""Trips between areas, Plan step: the mechanism, the budget and its split over the tables, and the
expected error per table (from the public area list and the budget only: no data used).

:func:`selection` reads back what the curator chose (no widgets), for the Release step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from dpcore import catalog
from dpcore.core.mechanism import Plan
from dpcore.errors import DPCoreError
from dpcore.flows.mechanisms.common import ODPlan
from dpcore.flows.unit import od_unit
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.units import Unit
from ui import budget_ui, fmt, frame, plan_table, plans, series, split_editor, state, target_ui
from ui.kinds.flows.common import (
    DEFAULTS,
    MECHS,
    NEIGHBOURS,
    ORIENTATIONS,
    SPLITS,
    error_basis,
    error_chart,
    keep,
    kept,
    ledger,
    level_label,
    plan_caption,
    plan_columns,
    sci,
    setting,
)
from ui.kinds.flows.sources import model, need_model

DEFINITION_HELP = ("How the privacy loss is measured. The paper's noise is discrete Gaussian, measured in ρ "
                   "(zero-concentrated DP); it can be stated as (ε, δ)-DP through a conversion. Pure ε-DP uses "
                   "discrete Laplace noise and has no δ.")


@dataclass(frozen=True)
class Selection:
    """What the Plan step chose, read back without widgets, and the one core plan built from it through
    the catalogue (``core``): the Release step releases exactly that plan.  ``plan`` is its O/D plan
    (``core.inner``: the tables, their shares and expected errors) for the tables and charts."""

    mechanism: str
    cost: budget.PrivacyCost
    cost_label: str
    delta: float
    approx: dict[str, Any]  # the (ε, δ) the budget was stated in, if it was
    split: str
    weights: list[float] | None
    opts: dict[str, Any]
    core: Plan | None
    error: str | None  # why the plan cannot be released, or None
    ledger: Ledger
    unit: Unit
    model: dict[str, Any]

    @property
    def plan(self) -> ODPlan | None:
        return self.core.inner if self.core is not None else None


def _budget(definition: str) -> tuple[budget.PrivacyCost, str, float, dict[str, Any]]:
    """The cost of the release, its label, the δ of its (ε, δ) reading and the (ε, δ) it was stated in."""
    if definition == "approx":
        eps, delta, conv = float(setting("eps")), float(setting("delta")), setting("conversion")
        rho = budget_ui.rho_of(eps, delta, conv)
        how = "the paper's conversion" if conv == "classic" else "the tighter conversion of Canonne, Kamath & Steinke"
        return (budget.zcdp(rho), f"ρ = {rho:.3g} (from ε = {fmt.eps(eps)}, δ = {sci(delta)} by {how})", delta,
                {"epsilon": eps, "delta": delta, "conversion": conv, "rho": rho})
    if definition == "rho":
        rho = float(setting("rho"))
        return budget.zcdp(rho), f"ρ = {rho:.3g}", float(setting("delta_read")), {}
    cost = budget.pure(float(setting("eps_pure")))
    return cost, cost.label(), float(setting("delta_read")), {}


def _params(split: str, weights: list[float] | None, opts: dict[str, Any]) -> dict[str, Any]:
    """The mechanism's parameters (the neighbours go into the unit of privacy)."""
    return {"split": split, "weights": weights, **{k: v for k, v in opts.items() if k != "neighbour"}}


def _core_plan(m: dict[str, Any], mech: str, cost: budget.PrivacyCost, params: dict[str, Any], unit: Unit) -> Plan:
    """The one core plan of an O/D release, through the catalogue."""
    c = m["counts"]
    return catalog.get("od", mech).plan((c.origin_h, c.destination_h), cost, params, unit=unit, distinct=c.distinct)


def measured_levels(m: dict[str, Any], mech: str, cost: budget.PrivacyCost, opts: dict[str, Any]) -> list[str]:
    """The names of the tables the budget is split over (those measured, not copied or public)."""
    c = m["counts"]
    unit = od_unit(opts["neighbour"], c.max_trips, c.persons)
    key = plans.digest(id(c.origin_h), id(c.destination_h), c.max_trips, c.distinct, mech, cost, opts)
    probe = plans.kept("od_measured", key, lambda: _core_plan(m, mech, cost, _params("uniform", None, opts), unit))
    return [lv.name for lv in probe.inner.levels if lv.measured]


def takes(mech: str, option: str) -> bool:
    """Whether the O/D mechanism ``mech`` reads ``option``, ``"order"`` (IntOpt's zeroing order) or
    ``"tiebreak"`` (the tie rule): its own ``reads_order`` / ``reads_tiebreak``."""
    m = catalog.get("od", mech)
    return {"order": m.reads_order, "tiebreak": m.reads_tiebreak}[option]


def options(mech: str) -> dict[str, Any]:
    """The Plan step's options as ``mech`` reads them: the neighbours and the tree's orientation as chosen,
    the zeroing order and the tie rule as chosen where ``mech`` reads them (:func:`takes`), their defaults
    elsewhere.  The one rule of the Plan step and of Compare."""
    return {"neighbour": setting("neighbour"), "orientation": setting("orientation"),
            "order": setting("order") if takes(mech, "order") else "ascending",
            "tiebreak": setting("tiebreak") if takes(mech, "tiebreak") else "random"}


def selection(m: dict[str, Any] | None = None) -> Selection:
    """The mechanism, budget and options of the Plan step for the trips loaded now, and their plan (kept
    in the session while the choices stand)."""
    m = m or model()
    if m is None:
        raise DPCoreError("No trips are loaded: load them on the Data step first.")
    led = ledger(m)
    definition = setting("definition")
    if budget_ui.FAMILY[definition] != led.definition:  # the budget is kept in the other definition
        definition = "rho" if led.definition == "zcdp" else "pure"
    cost, label, delta, approx = _budget(definition)
    mech = setting("mech")
    opts = options(mech)
    split = setting("split")
    c = m["counts"]
    unit = od_unit(opts["neighbour"], c.max_trips, c.persons)
    typed = sorted((k, v) for k, v in st.session_state.items() if str(k).startswith("od_weights_"))
    key = plans.digest(id(c.origin_h), id(c.destination_h), c.max_trips, c.distinct, mech, cost, split, opts,
                       unit, typed if split == "custom" else None)
    weights, core, error = plans.kept("od_plan", key, lambda: _plan_choice(m, mech, cost, split, opts, unit))
    return Selection(mech, cost, label, delta, approx, split, weights, opts, core, error, led, unit, m)


def _plan_choice(m: dict[str, Any], mech: str, cost: budget.PrivacyCost, split: str, opts: dict[str, Any],
                 unit: Unit) -> tuple[list[float] | None, Plan | None, str | None]:
    """The custom weights (one per measured table) and the plan, or why there is no plan."""
    weights = None
    try:
        if split == "custom":
            n_m = len(measured_levels(m, mech, cost, opts))
            # the text is always n_m numbers (split_editor's writers): parse's fallback to ones is never taken
            weights = split_editor.parse(st.session_state.get(f"od_weights_{n_m}", ""), n_m)
        return weights, _core_plan(m, mech, cost, _params(split, weights, opts), unit), None
    except DPCoreError as e:  # e.g. the MILP baseline on a large domain: say why
        return weights, None, str(e)


def plan_step() -> None:
    """The Plan step for trips between areas (the page script is pages/plan.py)."""
    m = need_model()
    if m is None:
        return
    ss = st.session_state
    fp, counts, unit = m["fp"], m["counts"], m["unit"]
    st.caption(f"For **{m['name']}**: {m['areas_text']}.")

    st.subheader("Mechanism")
    mech = st.selectbox("Mechanism", MECHS, format_func=lambda n: catalog.get("od", n).title,
                        key=keep("mech", DEFAULTS["mech"]))
    kept("mech")
    info = catalog.get("od", mech)
    st.markdown(f"*Use it when:* {info.when_to_use}")
    with st.expander("How it works"):
        st.markdown(info.summary)
        st.caption(f"Source: {info.reference}. The stability histogram (SH) is not offered here: it is (ε, δ)-DP, and "
                   "its cost cannot be added to this data's budget (compare with it in the benchmarks).")

    st.subheader("Privacy budget")
    # persistent: the same trips find the same budget (their population's, once bound) on every step and after
    # restarts
    budget_ui.section("flows", fp, ss["od_ledgers"], key=f"od_{fp}", definition_key="od_definition",
                      cap_key=f"od_cap_{fp}_{{definition}}", release_keys={"pure": "od_eps_pure", "zcdp": "od_rho"},
                      statements=("od_eps", "od_delta", "od_conversion"), default_statement=DEFAULTS["definition"],
                      delta_key="od_delta_read", default_delta=DEFAULTS["delta_read"],
                      definition_help=DEFINITION_HELP, release_label="{sym} of this release",
                      release_max={"pure": 20.0, "zcdp": 10.0}, cap_label="Budget cap of this data set")
    st.caption(WHY_NOT_THE_SAME)
    with st.expander("How are these defaults chosen"):
        st.markdown(f"Half the cap per release, as for every kind: here ρ = {fmt.eps(state.DEFAULT_RHO)} of a cap of "
                    f"ρ = {fmt.eps(state.DEFAULT_RHO_CAP)}, the zCDP reading ρ = ε²/2 of the other kinds' cap of "
                    "ε = 1 (Bun & Steinke 2016, Prop. 1.4). The paper's experiments state ε = 1 at δ = 1e-8: choose "
                    "'(ε, δ)-DP' to state a release that way; it is converted to ρ by the paper's Lemma 3 or by "
                    "Canonne, Kamath & Steinke (2020).")

    _tree_options(m, mech, counts)
    sel = selection(m)
    if sel.error is not None:
        st.error(sel.error)
        return
    p = sel.plan
    assert p is not None
    st.subheader("Expected error per table (before release, from no data)")
    st.markdown(lead_sentence(sel.core, unit))
    plan_table.show(sel.core, plan_columns(sel.core, unit), key="od_plan_table", placeholder="–", width="stretch")
    st.plotly_chart(error_chart(p, unit), key="od_plan_chart", config={"displayModeBar": False})
    st.caption(plan_caption(p))
    error_basis(p, unit)
    series.plan_panel("flows", sel.cost)
    with st.expander("Plan from the error you need", icon=":material/target:"):
        target_planner(sel)
    frame.link("release")


#: why trips do not default to the other kinds' budget language, in one sentence (issue 26, item 7)
WHY_NOT_THE_SAME = (
    "Trips default to ρ-zCDP with one trip replaced by another, where points and areas default to pure ε with one "
    "record added or removed, because the O/D paper's mechanisms are built on Gaussian noise and a public total "
    "number of trips; choose 'Pure ε-DP' here and 'Add or remove one person' below to use the other kinds' language.")


def _tree_options(m: dict[str, Any], mech: str, counts: Any) -> None:
    """The neighbours, the tree's orientation, the budget across the tables (with custom weights, one per
    measured table), IntOpt's zeroing order and the ties."""
    c4, c5, c6 = st.columns(3)
    c4.radio("Neighbouring data sets", list(NEIGHBOURS), format_func=NEIGHBOURS.get,
             key=keep("neighbour", DEFAULTS["neighbour"]),
             help="Bounded: one person's trip is replaced by another, so the number of trips is public (the paper's "
                  "default). Unbounded: a person is added or removed; the total is noised.")
    kept("neighbour")
    c5.radio("Tree orientation", list(ORIENTATIONS), format_func=ORIENTATIONS.get,
             key=keep("orientation", DEFAULTS["orientation"]),
             help="Decides which cross-level tables are measured directly: the destination tree measures 'large "
                  "origin area to smaller destination area'.")
    kept("orientation")
    split = c6.radio("Budget across the tables", list(SPLITS), format_func=SPLITS.get,
                     key=keep("split", DEFAULTS["split"]))
    kept("split")
    with st.expander("Advanced"):
        if takes(mech, "order"):
            st.radio("IntOpt zeroing order", ["ascending", "descending"], key=keep("order", DEFAULTS["order"]),
                     help="Ascending zeroes the smallest noisy flows first (fewer spurious flows); descending keeps "
                          "them (fewer real flows lost).")
            kept("order")
        if takes(mech, "tiebreak"):
            st.radio("Ties", ["random", "index"], key=keep("tiebreak", DEFAULTS["tiebreak"]),
                     format_func={"random": "broken at random (no area favoured)",
                                  "index": "broken by area order (reproducible)"}.get)
            kept("tiebreak")
        st.caption(f"Unit of privacy (from the Data step): at most {counts.max_trips} trip"
                   f"{'s' if counts.max_trips > 1 else ''} per person.")
    if split == "custom":
        sel = selection(m)
        try:
            measured = measured_levels(m, mech, sel.cost, sel.opts)
        except DPCoreError:
            measured = []
        if measured:
            n_m = len(measured)
            split_editor.editor(c6, [level_label(t) for t in measured], f"od_weights_{n_m}", noun="table")


def target_planner(sel: Selection) -> None:
    """The target-error planner for the O/D tables: "±20 trips between counties"; "Use this budget" sets the
    release budget (ρ, or ε under pure DP) and the split over the tables."""
    m, p = sel.model, sel.plan
    params = {"split": sel.split, "weights": tuple(sel.weights or ()), **{k: v for k, v in sel.opts.items()
                                                                           if k != "neighbour"}}
    names = [lv.name for lv in p.levels]
    finest = level_label(names[-1])  # "zone", or "tract (TRACTCE)" for a raw column name (no nested brackets)
    finest = f"each pair of the finest table ({finest})" if "(" not in finest else f"each pair of the finest table: {finest}"
    prop = target_ui.planner(catalog.get("od", sel.mechanism), m["h"], sel.cost.definition, params,
                             {"distinct": m["counts"].distinct}, on_use=_use_budget, key="od_target", unit=sel.unit,
                             levels=names[:-1], word=m["unit"], level_label=level_label,
                             finest_label=finest)
    if prop is not None and prop.cost.value > sel.ledger.remaining:
        st.warning(f"The proposal is more than the budget left ({prop.cost.symbol} = {fmt.eps(sel.ledger.remaining)}): "
                   "loosen the target, or raise the cap.")


def _use_budget(prop: Any) -> None:
    """"Use this budget" (a button callback, so it may set widget keys): the proposal, rounded up, becomes
    this release's ρ (stated as ρ) or ε, and its split over the tables the custom weights."""
    ss = st.session_state
    if prop.cost.definition == "zcdp":
        ss["od_definition"] = ss["_w_od_definition"] = "rho"
        ss["od_rho"] = ss["_w_od_rho"] = min(max(float(prop.rounded), 1e-5), 10.0)
    else:
        ss["od_definition"] = ss["_w_od_definition"] = "pure"
        ss["od_eps_pure"] = ss["_w_od_eps_pure"] = min(max(float(prop.rounded), 0.01), 20.0)
    split = target_ui.split_params(prop)
    if split:
        weights = split["weights"]
        ss["od_split"] = ss["_w_od_split"] = "custom"
        split_editor.store(f"od_weights_{len(weights)}", weights)


def lead_sentence(core: Plan, unit: str) -> str:
    """The finest table's expected error in the words every kind leads with (UX review): ± for 19 of 20
    counts, from the core plan's last row (its 95 % half-width; the finest table is area to area)."""
    finest = core.rows[-1]
    d = finest.details
    pair = f"{fmt.level_label(d.get('origin_level', finest.name))}-to-{fmt.level_label(d.get('destination_level', finest.name))}"
    return (f"A {pair} count is off by at most about **± {fmt.num(finest.ci95)} {unit}** in 19 of 20 pairs; "
            "the table gives every level.")
