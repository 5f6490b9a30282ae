"""Trips between areas (origin/destination counts): the adapter of the four steps for this kind (:mod:`ui.kinds`).

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
_CHOICES = {'od': ''}
_FILES = {'od': 'od_page.py'}


def data_step() -> None:
    """Every step of this kind, for now on one page with tabs."""
    runpy.run_path(str(_HERE / _FILES[next(iter(_FILES))]), run_name="__main__")


def _elsewhere() -> None:
    frame.missing("For this kind of data the plan, the release and the export are on the Data step's tabs "
                  "for now.", "data", "Go to the Data step")


plan_step = release_step = export_step = _elsewhere


def sidebar() -> None:
    """Dataset, budget and current release of the O/D data loaded (inside st.sidebar)."""
    ss = st.session_state
    model = ss.get("od_model") if ss.get("od_active") else None
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
        sidebar_ui.budget_panel(led, ss.get("od_delta", 1e-8), classic=True, population=state.population_of("od", model["fp"]))
    st.markdown("#### Current release")
    entry = ss.get("od_shown")
    if entry is None or entry.get("fp") != model["fp"]:
        st.caption("Nothing released yet.")
    else:
        r = entry["release"]
        st.markdown(f"{r.mechanism.title}  \n{entry['cost_label']} · "
                    f"{fmt.count(int(r.values[-1].size))} finest flows released")
