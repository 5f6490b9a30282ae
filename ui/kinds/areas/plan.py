"""Counts over areas, Plan step: mechanism, budget and split, expected error per level (no data used).

For a hierarchy of areas the mechanisms are TopDown and its kin (:mod:`dpcore.areas.mechanisms`);
for a census table with attributes, Privelet and the marginal tables (:mod:`ui.kinds.areas.plan_table`).
:func:`selection` reads back what the curator chose (no widgets), for the Release step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from dpcore import catalog
from dpcore.areas.mechanisms import matrix
from dpcore.areas.unit import hierarchy_unit
from dpcore.core.mechanism import Plan
from dpcore.errors import DPCoreError
from dpcore.privacy import budget
from dpcore.privacy.calibration import interval_half_width
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.units import Unit
from ui import (
    budget_ui,
    charts,
    fmt,
    frame,
    plan_table,
    plans,
    series,
    split_editor,
    state,
    target_ui,
)
from ui.kinds.areas import common
from ui.kinds.areas.common import keep, kept

ss = st.session_state
NEIGHBOURS = {"add_remove": "Add or remove one person (the total is noised)",
              "replace": "Replace one person (the total is public and exact)"}
SPLITS = {"uniform": "Uniform across levels", "geometric": "Geometric (finer levels get more)",
          "custom": "Custom weights"}
MAX_VALUE = 10.0  # the largest budget of one release the Plan step takes


def plan_step() -> None:
    """The Plan step for counts over areas (the page script is pages/plan.py)."""
    if common.which() == common.TABLE:
        from ui.kinds.areas import plan_table

        plan_table.plan_step()
        return
    m = common.model()
    if m is None:
        frame.missing("Load a table of counts over areas on the Data step first.", "data", "Go to the Data step")
    h, counts, fp = m["h"], m["counts"], m["fp"]
    st.caption(f"Data: **{m['name']}** · {fmt.sizes_line(h.level_names[1:], h.sizes[1:])}")

    # ---------------------------------------------------------------- mechanism
    mech_name = _mechanism(counts)
    # ---------------------------------------------------------------- budget
    st.subheader("2. Privacy budget")
    # persistent: the same table finds the same budget (its population's, once bound) on every step and
    # after restarts; shared with the census table's mechanisms
    budget_ui.section("areas", fp, ss.setdefault("census_ledgers", {}), key=f"hier_{fp}",
                      definition_key=f"hier_def_{fp}", cap_key=f"hier_cap_{fp}_{{definition}}",
                      release_keys={d: f"hier_value_{d}" for d in budget_ui.DEFINITIONS}, delta_key="hier_delta",
                      release_max=MAX_VALUE, over_time=series.active("areas") is not None)

    _unit_and_split(h, counts, mech_name)
    is_matrix = mech_name == "matrix"

    # ---------------------------------------------------------------- expected error
    st.subheader("3. Expected error per level (before release, from no data)")
    with st.spinner("Designing the strategy from the public areas (once per hierarchy and set of queries; "
                    "then cached) …"):
        sel = selection()
    if sel.error is not None:
        st.error(sel.error)
        return
    error_table(sel.core, counts.statistic, key="hier_plan_table", budget_col=True)
    if is_matrix:
        from ui.kinds.areas.plan_sets import matrix_summary

        matrix_summary(sel.plan)
    with st.expander("Plan from the error you need", icon=":material/target:"):
        target_planner(h, counts, sel)
    series.plan_panel("areas", sel.cost)
    frame.link("release", "Next: release →")


def _mechanism(counts: Any) -> str:
    """The mechanism list (those that release this statistic), when to use it, how it works."""
    st.subheader("1. Mechanism")
    names = mechanism_names(counts.statistic)
    mech_name = st.selectbox("Mechanism", names, format_func=lambda n: catalog.get("hierarchy", n).title,
                             key=keep("mech", names[0]))
    kept("mech")
    info = catalog.get("hierarchy", mech_name)
    st.markdown(f"**Use it when:** {info.when_to_use}")
    with st.expander("How it works"):
        st.caption("What the mechanism does, and the paper it follows.")
        st.markdown(f"{info.summary}  \n*{info.reference}*")
    return mech_name


def _unit_and_split(h: Any, counts: Any, mech_name: str) -> None:
    """The neighbours (unit of privacy), the budget across levels (or the matrix's importance), the
    custom weights, IntOpt's zeroing order and the matrix's area sets."""
    c4, c5 = st.columns(2)
    is_matrix = mech_name == "matrix"
    if is_matrix:
        c4.caption("Unit of privacy: one person, added or removed (the total is noised). The matrix mechanism "
                   "answers one strategy with the whole budget; every level is computed from it.")
    elif counts.statistic == "count":
        c4.radio("Neighbouring datasets (unit of privacy: one person)", list(NEIGHBOURS),
                 format_func=NEIGHBOURS.get, key=keep("neighbour", "add_remove"),
                 help="Replace-one keeps the total fixed, so it can be published exactly; the sensitivity doubles.")
        kept("neighbour")
    else:
        c4.caption(f"Unit of privacy: one person's membership in a group; the number of groups "
                   f"({fmt.count(counts.n_groups)}) is public, as in the census paper.")
    if is_matrix:
        c5.radio("Which totals matter most", list(matrix.IMPORTANCE), format_func=matrix.IMPORTANCE.get,
                 key=keep("importance", "levels"),
                 help="The strategy is tuned to make the weighted sum of squared errors smallest. The "
                      "budget is not split: this only moves accuracy between levels.")
        kept("importance")
    else:
        c5.radio("Budget across levels", list(SPLITS), format_func=SPLITS.get, key=keep("split", "uniform"))
        kept("split")
    sel = selection(parse_only=True)
    if sel.split == "custom":
        measured = catalog.get("hierarchy", mech_name).measured_levels(counts.statistic, sel.opts["neighbour"], h.depth)
        levels = [common.level_label(name) for name, m in zip(h.level_names, measured, strict=False) if m]
        split_editor.editor(c5, levels if len(levels) == sel.n_measured else
                            [f"level {i + 1}" for i in range(sel.n_measured)], f"hier_weights_{sel.n_measured}")
    if takes(mech_name, "order"):
        with st.expander("Advanced"):
            st.caption("How the last step turns noisy counts into whole numbers.")
            st.radio("Which noisy cells are set to zero first", ["ascending", "descending"],
                     key=keep("order", "ascending"),
                     help="Ascending zeroes the smallest noisy cells first (fewer empty areas showing people); "
                          "descending keeps them (fewer real people lost).")
            kept("order")
    if is_matrix:
        from ui.kinds.areas.plan_sets import area_sets_widget

        area_sets_widget(h)


def mechanism_names(statistic: str) -> list[str]:
    """The hierarchy mechanisms of the catalogue that release this statistic (counts, or group sizes)."""
    mechs = (catalog.get("hierarchy", n) for n in catalog.names("hierarchy"))
    return [m.name for m in mechs if (m.group_sizes if statistic == "group_sizes" else m.counts)]


def target_planner(h: Any, counts: Any, sel: Selection) -> None:
    """The target-error planner for a hierarchy mechanism: "±50 people for 95 % of tracts", "within 10 %
    for areas of 1,000 people or more"; "Use this budget" sets the release budget and the split."""
    mech = catalog.get("hierarchy", sel.mech)
    params: dict[str, Any] = {"split": sel.split, "weights": tuple(sel.opts.get("weights") or ())}
    public: dict[str, Any] = {"statistic": counts.statistic, "k": counts.k}
    if takes(sel.mech, "order"):
        params["order"] = sel.opts.get("order", "ascending")
    if sel.mech == "matrix":
        params["sets_weight"] = float(sel.opts.get("sets_weight", 1.0))
        if sel.opts.get("area_sets") is not None:
            public["area_sets"] = sel.opts["area_sets"]
    names = [lv.level for lv in sel.plan.levels]
    word = "groups" if counts.statistic == "group_sizes" else "people"
    prop = target_ui.planner(mech, h, sel.cost.definition, params, public, on_use=_use_budget, key="hier_target",
                             unit=sel.unit, levels=names[:-1], word=word,
                             finest_label=f"each {common.level_label(names[-1])}", level_label=common.level_label)
    if prop is not None:
        _budget_warnings(prop, sel.ledger)


def _budget_warnings(prop: Any, led: Ledger | None) -> None:
    sym = prop.cost.symbol
    if prop.rounded > MAX_VALUE:
        st.warning(f"The proposal is above the largest budget of one release here ({sym} = {fmt.eps(MAX_VALUE)}): "
                   "loosen the target.")
    elif led is not None and prop.cost.value > led.remaining:
        st.warning(f"The proposal is more than the budget left ({sym} = {fmt.eps(led.remaining)}): loosen the "
                   "target, or raise the cap.")


def _use_budget(prop: Any) -> None:
    """"Use this budget" (a button callback, so it may set widget keys): the proposal, rounded up, becomes
    this release's ε (or ρ), and its split over levels the custom weights."""
    definition = prop.cost.definition
    value = min(max(float(prop.rounded), 0.001), MAX_VALUE)
    ss[f"hier_value_{definition}"] = ss[f"_w_hier_value_{definition}"] = value
    split = target_ui.split_params(prop)
    if split:
        weights = split["weights"]
        ss["hier_split"] = ss["_w_hier_split"] = "custom"
        split_editor.store(f"hier_weights_{len(weights)}", weights)


def error_table(plan: Plan, statistic: str, *, key: str, budget_col: bool = False, after: bool = False) -> None:
    """The expected error per level of a hierarchy plan (its rows): one plain sentence, the table
    (:mod:`ui.plan_table`), a chart in hierarchy order, and how it was computed behind an expander."""
    rows = plan.rows
    finest = rows[-1]
    unit = "groups per size" if statistic == "group_sizes" else "people"
    # the same reading as every kind's (UX review): ± for 19 of 20 counts first, the mean and the largest after
    st.markdown(f"A {common.level_label(finest.name)} count is off by at most about **± {fmt.num(finest.ci95)} "
                f"{unit}** in 19 of 20 {common.level_label(finest.name, 20)} (± {fmt.num(finest.mean_abs)} on "
                f"average); the largest error among the {fmt.count(finest.details['areas'])} "
                f"{common.level_label(finest.name, finest.details['areas'])} is about ± {fmt.num(finest.max_abs)}.")
    if not getattr(catalog.get("hierarchy", plan.mechanism), "normal_intervals", True):
        # benchmarks/results/interval_release_coverage.md: these projections shift a large area beside empty ones
        st.caption("From the noise alone: this mechanism's rounding and non-negativity depend on the data and can "
                   "move an area further, most of all a large area beside empty ones, so its release publishes no "
                   "95 % interval (the data users' estimates.csv does).")
    plan_table.show(plan, level_columns(plan, budget_col=budget_col, after=after), key=key)
    bars = (tuple(common.level_label(r.name) for r in rows), tuple(r.mean_abs for r in rows))
    # made once per plan's numbers and kept in the session: built again on every rerun otherwise
    fig = charts.kept(f"{key}_chart", (bars, unit), lambda: _error_figure(*bars, unit))
    st.plotly_chart(fig, key=f"{key}_chart", config={"displayModeBar": False})
    with st.expander("How the expected error is computed"):
        st.caption("From the mechanism, the budget and the public areas only: no data is used, so it can be "
                   "published.")
        st.markdown(f"Method: {finest.note}. The 95 % interval of one area is about ± "
                    f"{fmt.num(interval_half_width('normal', finest.sd))} at the finest level.")


def _error_figure(order: tuple[str, ...], mean_abs: tuple[float, ...], unit: str) -> go.Figure:
    """The mean absolute error per level as bars, in hierarchy order."""
    fig = go.Figure(go.Bar(x=list(mean_abs), y=list(order), orientation="h", marker_color="#1f4e79",
                           hovertemplate="%{y}: ± %{x:,.1f} " + unit + "<extra></extra>"))
    fig.update_layout(xaxis={"title": {"text": f"mean absolute error ({unit} per area)"}},
                      yaxis={"title": {"text": "level"}, "autorange": "reversed", "categoryorder": "array",
                             "categoryarray": list(order)},
                      height=110 + 28 * len(order), margin={"l": 10, "r": 10, "t": 10, "b": 40})
    return fig


def level_columns(plan: Plan, *, budget_col: bool, after: bool) -> tuple[plan_table.Column, ...]:
    """The hierarchy's columns: level, areas, its budget (or "not measured"), the noise SD, the SD after
    post-processing (after a release), and the mean and expected largest absolute error."""
    whole = plan.mechanism == "matrix"

    def share(r: Any) -> str:
        return ("one strategy, whole budget" if whole else
                f"{plan.cost.symbol} = {fmt.eps(r.details['share'])}" if r.details["measured"] else "not measured")

    cols: list[plan_table.Column] = [("level", lambda r: common.level_label(r.name), None),
                                     ("areas", lambda r: fmt.count(r.details["areas"]), None)]
    if budget_col:
        cols.append(("budget", share, None))
    cols.append(("noise SD", lambda r: fmt.num(r.details["noise_sd"]) if r.details["measured"] else "–", None))
    if after:
        cols.append(("SD after post-processing", lambda r: fmt.num(r.sd), None))
    cols += [("mean abs. error", lambda r: fmt.num(r.mean_abs), None),
             ("expected max abs. error", lambda r: fmt.num(r.max_abs), None)]
    return tuple(cols)


@dataclass(frozen=True)
class Selection:
    """What the Plan step chose for a hierarchy, read back without widgets, and the one core plan built
    from it (``core``, through the catalogue): the Release step releases that plan.  ``plan`` is its
    hierarchy plan (``core.inner``: levels, shares, expected error) for the tables."""

    mech: str
    title: str
    cost: budget.PrivacyCost
    ledger: Ledger | None
    unit: Unit
    split: str
    n_measured: int
    opts: dict[str, Any] = field(default_factory=dict)
    core: Plan | None = None
    delta: float = 1e-6
    error: str | None = None

    @property
    def plan(self) -> Any:
        return self.core.inner if self.core is not None else None


def takes(mech: str, option: str) -> bool:
    """Whether the hierarchy mechanism ``mech`` reads ``option`` (one of its declared parameters)."""
    return any(p.name == option for p in catalog.get("hierarchy", mech).params)


def mechanism_options(mech: str, statistic: str, fp: str) -> dict[str, Any]:
    """The Plan step's settings as ``mech`` reads them, the one rule of the Plan step and of Compare: the
    neighbours (one person replaced only for counts, and never under the matrix mechanism, whose strategy is
    for one person added or removed), the zeroing order where ``mech`` declares it (its default elsewhere),
    and whether each person is counted once (the table with fingerprint ``fp``)."""
    neighbour = ss.get("hier_neighbour", "add_remove") if statistic == "count" and mech != "matrix" else "add_remove"
    # the unit: one person when confirmed, for the table or, over time, for each period (issue 26 item 15)
    return {"neighbour": neighbour, "order": ss.get("hier_order", "ascending") if takes(mech, "order") else "ascending",
            "person_once": state.person_once(fp, per_period=series.active("areas") is not None)}


def selection(*, parse_only: bool = False) -> Selection:
    """The mechanism, options and budget of the Plan step for the hierarchy loaded now, and its plan.

    ``parse_only``: the options only, without the plan (which may design a matrix strategy)."""
    m = common.model()
    h, counts, fp = m["h"], m["counts"], m["fp"]
    led = common.ledger(fp, budget.pure(1.0))
    mech = ss.get("hier_mech", "exact")
    definition = led.definition
    value = ss.get(f"hier_value_{definition}", state.DEFAULT_RELEASE[definition])
    cost = budget.pure(value) if definition == "pure" else budget.zcdp(value)
    is_matrix = mech == "matrix"
    own = mechanism_options(mech, counts.statistic, fp)
    neighbour = own["neighbour"]
    split = ss.get("hier_importance", "levels") if is_matrix else ss.get("hier_split", "uniform")
    n_measured = sum(catalog.get("hierarchy", mech).measured_levels(counts.statistic, neighbour, h.depth))
    # the text is always n_measured numbers (split_editor's writers): parse's fallback to ones is never taken
    weights = split_editor.parse(ss.get(f"hier_weights_{n_measured}", ""), n_measured) if split == "custom" else None
    opts: dict[str, Any] = {"neighbour": neighbour, "split": split, "weights": weights,
                            "order": own["order"]}
    if is_matrix and ss.get("hier_sets") is not None and ss.get("hier_sets_key", (None,))[0] == h.fingerprint():
        opts.update(area_sets=ss["hier_sets"], sets_weight=float(ss.get("hier_sets_weight", 1.0)))
    opts["person_once"] = own["person_once"]
    sel = Selection(mech, catalog.get("hierarchy", mech).title, cost, led,
                    hierarchy_unit(neighbour, counts.statistic, person_once=opts["person_once"]),
                    split, n_measured, opts, None, ss.get("hier_delta", 1e-6), None)
    if parse_only:
        return sel
    key = plans.digest(fp, h.fingerprint(), counts.statistic, counts.k, mech, cost, neighbour, split, weights,
                       opts["order"], ss.get("hier_sets_key") if "area_sets" in opts else None,
                       opts.get("sets_weight"), opts["person_once"])
    core, error = plans.kept("hier_plan", key, lambda: _core_plan(h, counts, mech, cost, opts))
    return Selection(**{**sel.__dict__, "core": core, "error": error})


def _core_plan(h: Any, counts: Any, mech: str, cost: budget.PrivacyCost,
               opts: dict[str, Any]) -> tuple[Plan | None, str | None]:
    """The one core plan of a hierarchy release, through the catalogue, or why there is none."""
    m = catalog.get("hierarchy", mech)
    declared = {p.name for p in m.params}
    params = {k: opts.get(k) for k in ("split", "weights", "order", "sets_weight") if k in declared}
    public: dict[str, Any] = {"statistic": counts.statistic, "k": counts.k}
    if opts.get("area_sets") is not None:
        public["area_sets"] = opts["area_sets"]
    try:
        unit = hierarchy_unit(opts["neighbour"], person_once=bool(opts.get("person_once")))
        return m.plan(h, cost, params, unit=unit, **public), None
    except DPCoreError as e:
        return None, str(e)
