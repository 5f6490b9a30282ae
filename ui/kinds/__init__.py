"""The kinds of data a curator can publish, each behind the same four steps.

A kind is a package ``ui.kinds.<name>`` whose ``__init__`` provides the adapter functions the step
pages call, so that every kind goes through the same path and the same sidebar:

``data_step()``     what the data is, where it comes from, the unit of privacy, the public domain
``plan_step()``     mechanism, parameters, budget and split, expected error (no data used)
``release_step()``  the Release button and its confirmation, then the map and the errors
``export_step()``   the files, their previews and the release record
``sidebar()``       the dataset, the budget and the current release, in the sidebar
``compare_step()``  (optional) the Compare tool for this kind

The library does the work (``dpcore.pipeline`` charges through the one session); the adapters
hold only widgets and figures.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import streamlit as st

#: name -> (label on the Data step, one line on what it is)
KINDS = {
    "points": ("Points", "one row per point (a pickup, a check-in), with latitude and longitude"),
    "areas": ("Counts over areas", "people per area over a public geography (census tracts in counties in states)"),
    "flows": ("Trips between areas", "origin/destination trips or commutes between public areas"),
}


def current_name() -> str:
    """The kind chosen on the Data step: points until the curator picks another, or the kind a link
    names (``?kind=flows`` on any page's URL opens a new session on that kind, e.g.
    ``/data?kind=areas``; an unknown name is ignored)."""
    ss = st.session_state
    if "kind" not in ss:
        asked = st.query_params.get("kind")
        ss["kind"] = asked if asked in KINDS else "points"
    return ss["kind"]


def adapter(name: str | None = None) -> ModuleType:
    """The adapter package of a kind (the current one by default)."""
    return importlib.import_module(f"ui.kinds.{name or current_name()}")


def choose() -> ModuleType:
    """The Data step's choice of the kind of data; returns its adapter."""
    names = list(KINDS)
    ss = st.session_state
    ss.setdefault("_w_kind", current_name())
    name = st.radio("What is the data?", names, key="_w_kind", horizontal=True,
                    format_func=lambda n: KINDS[n][0],
                    captions=[KINDS[n][1] for n in names])
    ss["kind"] = name
    if st.query_params.get("kind", name) != name:  # the link's kind, changed here: a reload keeps the choice
        st.query_params["kind"] = name
    return adapter(name)
