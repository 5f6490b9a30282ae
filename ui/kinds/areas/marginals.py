"""Counts over areas: the marginal tables of a census table (matrix mechanism), Plan and Release parts.

Everything computed before the release is data-free (:func:`dpcore.areas.mechanisms.census_matrix.plan`); the
release runs in the button's callback, so a fast rerun cannot interrupt it between charging the
ledger and storing the result.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import pandas as pd
import streamlit as st

from dpcore import catalog, pipeline
from dpcore.areas.census_tables import CensusTable
from dpcore.areas.mechanisms import census_matrix as marginals
from dpcore.areas.unit import census_unit
from dpcore.core.mechanism import Plan
from dpcore.errors import DPCoreError
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import secure_source
from ui import confirm, fmt, plan_table, plans, state
from ui.kinds.areas.state import TABLE_KEYS, TableEntry

ss = st.session_state


def _label(axes: list[str], t: tuple[int, ...]) -> str:
    return " × ".join(axes[a] for a in t)


def _options(table: CensusTable, level: str) -> tuple[list[str], dict[str, tuple[int, ...]], list[str]]:
    """The axes at ``level``, every table (marginal) by its label, and the tables suggested."""
    axes, _ = marginals.axes_of(table.structure, level)
    options = [t for k in range(1, len(axes) + 1) for t in itertools.combinations(range(len(axes)), k)]
    labels = {_label(axes, t): t for t in options}
    default = [_label(axes, t) for t in options if len(t) == len(axes)] + (
        [axes[a] for a in range(1, len(axes))] if len(axes) > 1 else [])
    return axes, labels, default


def selected_cost(led: Ledger) -> budget.PrivacyCost:
    value = ss.get(f"census_mx_value_{led.definition}", state.DEFAULT_RELEASE[led.definition])
    return budget.pure(value) if led.definition == "pure" else budget.zcdp(value)


def selected_plan(table: CensusTable, led: Ledger) -> tuple[Plan | None, str | None]:
    """The one core plan of the tables chosen on the Plan step (data-free, through the catalogue;
    kept in the session while the choice stands), or why there is none.  Its ``inner`` is the
    marginal tables' plan (:class:`dpcore.areas.marginals.MarginalsPlan`)."""
    s = table.structure
    level = ss.get("census_mx_level", s.level_names[-1])
    if level not in s.level_names[1:]:
        level = s.level_names[-1]
    axes, labels, default = _options(table, level)
    chosen = [c for c in ss.get("census_mx_marginals", default) if c in labels]
    if not chosen:
        return None, "Choose at least one table on the Plan step."
    spec = ";".join("*".join(axes[a] for a in labels[c]) for c in chosen)
    cost = selected_cost(led)
    # id(s): the kept plan holds the structure (its domain), so the id cannot be reused while it is kept
    once = state.person_once(ss.get("census_fp", ""))
    return plans.kept("census_mx_plan", plans.digest(id(s), level, spec, cost, once),
                      lambda: _core_plan(table, level, spec, cost, once))


def _core_plan(table: CensusTable, level: str, spec: str, cost: budget.PrivacyCost,
               once: bool = False) -> tuple[Plan | None, str | None]:
    try:
        return catalog.get("census", "matrix").plan(table.structure, cost, {"level": level, "marginals": spec},
                                                    unit=census_unit(person_once=once)), None
    except DPCoreError as e:
        return None, str(e)


def plan_section(table: CensusTable, led: Ledger) -> None:
    """The Plan step for the matrix mechanism: the tables, the budget, their expected error."""
    s = table.structure
    st.subheader("3. Tables to publish and their expected error (before release, from no data)")
    if not s.ordinals:
        st.info("Marginal tables cross the areas with attributes such as an age band: choose at least one ordinal "
                "attribute on the Data step (the built-in synthetic census has 'age_band'). Without one, the only "
                "table is the areas' totals.")
    c1, c2 = st.columns([1, 2])
    level = c1.selectbox("Geography level of the tables", s.level_names[1:],
                         key=state.persistent("census_mx_level", s.level_names[-1]),
                         help="The areas that form the geography axis of every table.")
    state.store("census_mx_level")
    axes, labels, default = _options(table, level)
    if ss.get("census_mx_axes") != axes:  # new axes (level or attributes changed): suggest the tables again
        ss["census_mx_axes"] = axes
        ss["census_mx_marginals"] = ss["_w_census_mx_marginals"] = default
    ss["_w_census_mx_marginals"] = [m for m in ss.get("_w_census_mx_marginals", ss.get("census_mx_marginals", default))
                                    if m in labels] or default
    c2.multiselect("Tables (marginals)", list(labels), key="_w_census_mx_marginals",
                   help="Each table sums the people over the attributes it leaves out, e.g. "
                        "'county × age_band' gives people per county and age band.")
    state.store("census_mx_marginals")
    sym = "ε" if led.definition == "pure" else "ρ"
    st.number_input(f"Privacy budget of this release ({sym})", min_value=0.001, max_value=10.0, step=0.05,
                    format="%.3f", key=state.persistent(f"census_mx_value_{led.definition}",
                                                        state.DEFAULT_RELEASE[led.definition]),
                    help="Smaller: more privacy, more noise. The whole budget answers one strategy; every "
                         "table is computed from it.")
    state.store(f"census_mx_value_{led.definition}")
    core, error = selected_plan(table, led)
    if core is None:
        st.info(error) if error and error.startswith("Choose") else st.error(error)
        return
    first = core.rows[0]
    st.markdown(f"A cell of the table **{first.name}** is off by about **± {fmt.num(first.ci95)} people** in 19 "
                "of 20 cases.")
    plan_table.show(core, plan_columns(core), key="census_mx_plan")
    info = core.inner.info
    rows = [("Strategy", f"{info['strategy']}, {fmt.count(info['strategy_queries'])} strategy queries"),
            ("Expected RMSE per table cell", fmt.num(info["expected_rmse_per_query"]))]
    if info["rmse_lower_bound"] is not None:
        rows += [("Lower bound for any strategy (SVD bound)", fmt.num(info["rmse_lower_bound"])),
                 ("Ratio to the lower bound", f"{info['ratio_to_lower_bound']:.4f}")]
    with st.expander("The strategy and how close it is to the best possible"):
        st.caption("The matrix mechanism answers a strategy of queries and computes every table from it; the "
                   "lower bound is the smallest error any strategy could reach.")
        st.dataframe(pd.DataFrame(rows, columns=["", "value"]), hide_index=True, key="census_mx_summary")
        st.caption("Analytic and data-free: SD = √(Var(noise) · w X⁺ wᵀ) for each table cell w.")
    for note in info["notes"]:
        st.info(note)


def plan_columns(core: Plan) -> tuple[plan_table.Column, ...]:
    """The marginal tables' expected-error table, from the core plan's rows (one per table); the
    95 % half-width of a table's largest SD by the mechanism's own rule
    (:meth:`dpcore.areas.mechanisms.census_matrix.MarginalsPlan.half_width`: ``± k_m`` for a table whose
    cells are each the sum of m discrete Laplace draws, as the row's ci95 and the release)."""
    inner = core.inner
    return (
        ("table", lambda r: r.name, None),
        ("cells", lambda r: fmt.count(r.n_counts), None),
        ("SD of a cell", lambda r: fmt.num(r.sd), None),
        ("± 95 %", lambda r: f"± {fmt.num(float(inner.half_width(r.level, r.details['sd_max'])))}", None),
    )


def release_now(table: CensusTable, core: Plan, led: Ledger, fp: str, source: str, cfg: str | None) -> None:
    """The Release button's action (:func:`ui.state.release_button`): release the Plan step's plan
    (charged first; not planned again), store."""
    cv = confirm.cv_threshold()  # before the charge
    out = pipeline.release(core, table, ledger=led, session=state.session(), noise=secure_source())
    rel, p = out.inner, core.inner
    # the files, made once from the envelope with the ledger as of the charge: stored, served by Export
    entry = TableEntry(rel, fp, source, out.files(led, cv_threshold=cv), config=cfg)
    # the history first: Streamlit 1.67 may stop a callback at an st.session_state access
    state.remember_release("areas", fp, rel.release_id,
                           {"mechanism": "matrix mechanism (marginals)", "cost": p.cost.label(),
                            "tables": list(rel.tables)}, entry.files, led)
    ss[TABLE_KEYS["matrix"]] = entry


def show_tables(entry: TableEntry, fp: str, what: str, tables: dict[str, pd.DataFrame], first: int,
                decimals: int, ci95: Mapping[str, str], key: str) -> None:
    """A census release's tables, one shown at a time (display rounded; the files keep full precision);
    ``ci95``: each table's 95 % interval in the mechanism's words (``census_privelet.CI95_TEXT``,
    ``census_matrix.interval_text``)."""
    if entry.fingerprint != fp:
        st.caption(f"This is the latest release, made from another table ({entry.source}).")
    name = st.selectbox(what, list(tables), index=min(first, len(tables) - 1), key=f"{key}_view")
    shown = tables[name].round(decimals)
    st.dataframe(shown, hide_index=True, key=f"{key}_table",
                 column_config={c: st.column_config.NumberColumn(format="localized")
                                for c in shown.columns if pd.api.types.is_float_dtype(shown[c])})
    st.caption(f"Noisy counts, rounded for display only; ci95 = {ci95[name]}.")
