"""Counts over areas (census tables over a public geography): the adapter of the four steps for this kind (:mod:`ui.kinds`).

Transitional: the steps of this kind still run as one page with tabs (the page script beside this
module), drawn by the Data step; the Plan, Release and Export steps point there.
"""

from __future__ import annotations

import runpy
from pathlib import Path

import streamlit as st

from ui import fmt, frame, state
from ui import sidebar as sidebar_ui

_HERE = Path(__file__).resolve().parent
_CHOICES = {'hierarchy': 'A hierarchy of areas (TopDown and its kin: tracts in counties in states)', 'privelet': 'A census table with attributes (Privelet: ranges of an ordinal attribute)'}
_FILES = {'hierarchy': 'hierarchy_page.py', 'privelet': 'privelet_page.py'}


def data_step() -> None:
    """Every step of this kind, for now on one page with tabs."""
    what: str = st.radio("Which table?", list(_CHOICES), format_func=_CHOICES.get, horizontal=True,
                    key=state.persistent("areas_table", next(iter(_CHOICES))))
    state.store("areas_table")
    runpy.run_path(str(_HERE / _FILES[what]), run_name="__main__")


def _elsewhere() -> None:
    frame.missing("For this kind of data the plan, the release and the export are on the Data step's tabs "
                  "for now.", "data", "Go to the Data step")


plan_step = release_step = export_step = _elsewhere


def sidebar() -> None:
    """Dataset, budget and current release of the census table loaded (inside st.sidebar)."""
    ss = st.session_state
    model = ss.get("hier_model")
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
        sidebar_ui.budget_panel(led, ss.get("hier_delta", 1e-6), population=state.population_of("census", model["fp"]))
    st.markdown("#### Current release")
    entry = ss.get("hier_release")
    if entry is None or entry["fp"] != model["fp"]:
        st.caption("Nothing released yet.")
    else:
        r = entry["release"]
        st.markdown(f"{r.mechanism.title}  \n{r.plan.cost.label()} · {fmt.count(h.n_nodes)} areas")
