"""The Census page's matrix-mechanism section: marginal tables of a census table (thin UI).

Everything computed here before the release is data-free (:func:`dpcore.areas.marginals.plan`);
the release runs in the button's callback, so a fast rerun cannot interrupt it between charging
the ledger and storing the result.
"""

from __future__ import annotations

import itertools
from typing import Any

import pandas as pd
import streamlit as st

from dpcore.areas import marginals
from dpcore.areas.census_tables import CensusTable
from dpcore.errors import DPCoreError
from dpcore.pipeline import release_census
from dpcore.privacy import budget
from dpcore.privacy.calibration import interval_half_width
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import secure_source
from ui import fmt, state

ss = st.session_state


def _label(axes: list[str], t: tuple[int, ...]) -> str:
    return " × ".join(axes[a] for a in t)


def _release_now(table: CensusTable, p: marginals.MarginalsPlan, led: Ledger, fp: str,
                 source: str) -> None:
    """The Release button's action (:func:`ui.state.release_button`): charge, release, store."""
    rel = release_census(table, "matrix", p.cost, led, session=state.session(), noise=secure_source(), level=p.level,
                         marginals=";".join("*".join(p.axes[a] for a in t) for t in p.marginals))
    entry = {"release": rel, "fingerprint": fp, "source": source,
             "csv": marginals.marginals_csv(rel), "json": marginals.marginals_json(rel, led)}
    # the history first: Streamlit 1.67 may stop a callback at an st.session_state access
    state.remember_release("census", fp, rel.release_id,
                           {"mechanism": "matrix mechanism (marginals)", "cost": p.cost.label(),
                            "tables": list(rel.tables)},
                           {"marginals.csv": entry["csv"], "release.json": entry["json"]})
    ss["census_mx_release"] = entry


def section(table: CensusTable | None, fp: str, led: Ledger, source: str) -> None:
    """Sections 3–4 of the Census page for the matrix mechanism."""
    if table is None:
        st.stop()
    s = table.structure
    st.subheader("3. Tables to publish and their expected error (before release)")
    if not s.ordinals:
        st.info("Marginal tables cross the areas with attributes such as an age band: choose at least one ordinal "
                "attribute above (the built-in synthetic census has 'age_band'). Without one, the only table is the "
                "areas' totals.")
    c1, c2 = st.columns([1, 2])
    level = c1.selectbox("Geography level of the tables", s.level_names[1:], index=len(s.levels) - 1,
                         key="census_mx_level", help="The areas that form the geography axis of every table.")
    axes, _ = marginals.axes_of(s, level)
    options = [t for k in range(1, len(axes) + 1) for t in itertools.combinations(range(len(axes)), k)]
    labels = {_label(axes, t): t for t in options}
    default = [_label(axes, t) for t in options if len(t) == len(axes)] + (
        [axes[a] for a in range(1, len(axes))] if len(axes) > 1 else [])
    if ss.get("census_mx_axes") != axes:  # new axes (level or attributes changed): suggest the tables again
        ss["census_mx_axes"] = axes
        ss["census_mx_marginals"] = default
    ss["census_mx_marginals"] = [m for m in ss.get("census_mx_marginals", default) if m in labels] or default
    chosen = c2.multiselect("Tables (marginals)", list(labels), key="census_mx_marginals",
                            help="Each table sums the people over the attributes it leaves out, e.g. "
                                 "'county × age_band' gives people per county and age band.")
    if not chosen:
        st.info("Choose at least one table.")
        st.stop()
    sym = "ε" if led.definition == "pure" else "ρ"
    value = st.number_input(f"Privacy budget of this release ({sym})", min_value=0.001, max_value=10.0, step=0.05,
                            format="%.3f", key=f"census_mx_value_{led.definition}",
                            value=0.5 if led.definition == "pure" else 0.05,
                            help="Smaller: more privacy, more noise. The whole budget answers one strategy; every "
                                 "table is computed from it.")
    cost = budget.pure(value) if led.definition == "pure" else budget.zcdp(value)
    try:
        p = marginals.plan(s, level, [labels[c] for c in chosen], cost)
    except DPCoreError as e:
        st.error(str(e))
        st.stop()
    st.dataframe(pd.DataFrame([{
        "table": m["marginal"], "cells": fmt.count(m["cells"]), "SD of a cell": fmt.num(m["sd_mean"]),
        "± 95 %": f"± {fmt.num(interval_half_width('normal', m['sd_max']))}"} for m in p.per_marginal]), hide_index=True,
        key="census_mx_plan")
    info = p.info
    rows = [("Strategy", f"{info['strategy']}, {fmt.count(info['strategy_queries'])} strategy queries"),
            ("Expected RMSE per table cell", fmt.num(info["expected_rmse_per_query"]))]
    if info["rmse_lower_bound"] is not None:
        rows += [("Lower bound for any strategy (SVD bound)", fmt.num(info["rmse_lower_bound"])),
                 ("Ratio to the lower bound", f"{info['ratio_to_lower_bound']:.4f}")]
    st.dataframe(pd.DataFrame(rows, columns=["", "value"]), hide_index=True, key="census_mx_summary")
    for note in info["notes"]:
        st.info(note)
    st.caption("Analytic and data-free: SD = √(Var(noise) · w X⁺ wᵀ) for each table cell w.")

    st.subheader("4. Release")
    can = led.can_spend(cost)
    left = led.remaining - (led.charge_of(cost) if can else 0.0)
    state.release_button("census_mx_release_button",
                         f"Release with {cost.label()} — {fmt.eps(max(left, 0.0))} left after this",
                         _release_now, table, p, led, fp, source, disabled=not can)
    if not can:
        st.error(f"Not enough budget left for {cost.label()}: {led.cap.symbol} = {fmt.eps(led.remaining)} is left of "
                 f"the cap {fmt.eps(led.cap.value)}. Lower the budget, or raise the cap if your privacy policy "
                 "allows it.")
    entry = ss.get("census_mx_release")
    if entry is None:
        st.info("Nothing released yet. The expected errors above cost nothing; the Release button spends the budget.")
        return
    rel = entry["release"]
    show_release(entry, fp, f"Released {len(rel.tables)} table{'s' if len(rel.tables) != 1 else ''} of "
                            f"{entry['source']} with the matrix mechanism, {rel.plan.cost.label()}.",
                 "Table", rel.tables, 0, 2, "standard error", "marginals.csv", "census_mx")


def show_release(entry: dict[str, Any], fp: str, title: str, what: str, tables: dict[str, pd.DataFrame],
                 first: int, decimals: int, sd_name: str, csv_name: str, key: str) -> None:
    """A census release's tables (one shown at a time) and its two downloads."""
    if entry["fingerprint"] != fp:
        st.caption(f"This is the latest release, made from another table ({entry['source']}).")
    st.success(title)
    name = st.selectbox(what, list(tables), index=min(first, len(tables) - 1), key=f"{key}_view")
    # display only (rounded); the CSV keeps full precision
    st.dataframe(tables[name].round(decimals), hide_index=True, key=f"{key}_table")
    st.caption(f"Noisy counts, unrounded (negative values kept so sums stay unbiased); "
               f"ci95 = noisy count ± 1.96 × {sd_name}.")
    d1, d2 = st.columns(2)
    d1.download_button(f"Download {csv_name}", entry["csv"], csv_name, "text/csv", on_click="ignore",
                       key=f"{key}_dl_csv", type="primary")
    d2.download_button("Download release.json", entry["json"], "release.json", "application/json",
                       on_click="ignore", key=f"{key}_dl_json", type="primary")


__all__: list[Any] = ["section"]
