"""Counts over areas: what the four steps share (the table chosen, its budget, area names, words).

The Data step builds the confidential model once (``hier_model`` for a hierarchy of areas,
``census_table`` for a census table with attributes) and every later step reads it from here.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from ui import fmt, state
from ui.demo_data import demo_file
from ui.kinds.areas.state import HIERARCHY_KEY, TABLE_KEYS, HierarchyEntry, TableEntry

US_TRACTS = demo_file("census/us_tract_population_2020_cenpop.csv.gz")
US_STATES = demo_file("boundaries/us_states_2010_20m.geojson")
US_COUNTIES = demo_file("boundaries/us_counties_2010_20m_fips.geojson")
US_NAMES = demo_file("census/us_state_county_population_2019.csv")

HIERARCHY, TABLE = "hierarchy", "census"
#: the Data step's first question: which kind of table
TABLES = {HIERARCHY: "A hierarchy of areas (people per area: tracts in counties in states)",
          TABLE: "A census table with attributes (people per area and age band …)"}

#: a level in plain words, ``county (COUNTYFP)`` for a raw column name (shared by every kind)
level_label = fmt.level_label


def which() -> str:
    """The table chosen on the Data step: a hierarchy of areas or a census table with attributes."""
    return st.session_state.setdefault("areas_table", HIERARCHY)


def keep(key: str, default: Any) -> str:
    """:func:`ui.state.persistent` under the hierarchy's prefix (values survive page switches)."""
    return state.persistent(f"hier_{key}", default)


def kept(key: str) -> Any:
    return state.store(f"hier_{key}")


#: the boundary files' LSAD abbreviations that do not read as words
_LSAD_WORDS = {"Muno": "Municipio", "Muny": "Municipio", "CA": "Census Area", "Cty&Bor": "City and Borough"}


@cache
def _us_names() -> tuple[dict[str, str], dict[str, str]]:
    """State names by state FIPS, county names by state+county FIPS (public lookup table).

    The lookup table (population estimates) has no Puerto Rico; its name and its municipios' names
    come from the public boundary files, for every code the lookup lacks.
    """
    if not US_NAMES.exists():
        return {}, {}
    t = pd.read_csv(US_NAMES, dtype=str)
    states = t[t["level"] == "state"].set_index("state_fips")["state_name"].to_dict()
    cty = t[t["level"] == "county"]
    counties = dict(zip(cty["state_fips"] + cty["county_fips"], cty["county_name"] + ", " + cty["state_name"],
                        strict=True))
    for f in _features(US_STATES):
        states.setdefault(f["STATE"], f["NAME"])
    for f in _features(US_COUNTIES):
        word = _LSAD_WORDS.get(f.get("LSAD") or "", f.get("LSAD") or "")
        name = f"{f['NAME']} {word}".strip() if word and word not in f["NAME"] else f["NAME"]
        counties.setdefault(f["STATE"] + f["COUNTY"], f"{name}, {states.get(f['STATE'], f['STATE'])}")
    return states, counties


def _features(path: Path) -> list[dict[str, Any]]:
    """The properties of every feature of a GeoJSON file (none when the file is missing)."""
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as f:
        return [feat.get("properties") or {} for feat in json.load(f).get("features", [])]


def us_names(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """The US tract table with state and county names beside the codes, and the ``names`` argument
    of :meth:`dpcore.data.hierarchy.Hierarchy.from_frame` (names are public, from the lookup table)."""
    states, counties = _us_names()
    if not states:
        return df, {}
    named = df.assign(_state_name=df["STATEFP"].map(states).fillna(""),
                      _county_name=(df["STATEFP"] + df["COUNTYFP"]).map(counties).fillna(""))
    return named, {"STATEFP": "_state_name", "COUNTYFP": "_county_name"}


def area_names(h: Any, depth: int) -> np.ndarray:
    """Names to show for the areas of a level: ``Alabama (01)`` where a name is known, else the code."""
    return area_names_of(h, depth, 0, h.sizes[depth])


def area_names_of(h: Any, depth: int, lo: int, hi: int) -> np.ndarray:
    """:func:`area_names` of the areas ``lo`` .. ``hi - 1`` of a level only (a county's tracts, not the
    nation's)."""
    lab, nm = h.labels(depth)[lo:hi], h.display_names(depth)[lo:hi]
    return np.array([str(c) if str(n) == str(c) else f"{n} ({c})" for n, c in zip(nm, lab, strict=True)], dtype=object)


def model() -> dict[str, Any] | None:
    """The hierarchy loaded on the Data step (confidential counts: this session only)."""
    return st.session_state.get("hier_model")


def table() -> tuple[Any, str] | tuple[None, None]:
    """The census table with attributes loaded on the Data step and its budget key."""
    ss = st.session_state
    if ss.get("census_table") is None:
        return None, None
    # a table of the source chosen now only: with "Upload a file" chosen and no file yet, the built-in
    # synthetic census must not stand in for the curator's table on the Plan and Release steps
    if ss.get("census_table_source", "synthetic") != ss.get("census_source", "synthetic"):
        return None, None
    return ss["census_table"], ss["census_fp"]


def ledger(fp: str, default_cap: budget.PrivacyCost | None = None) -> Ledger:
    """The budget of a table (its population's, once bound), shared by both kinds of table."""
    # through data_ledger always: it opens the budget again when the table was bound to a population since
    ledgers = st.session_state.setdefault("census_ledgers", {})
    return state.data_ledger("areas", fp, default_cap or budget.pure(state.DEFAULT_CAP), ledgers)


def hier_entry() -> HierarchyEntry | None:
    """The current release of the hierarchy loaded now, or None."""
    m, e = model(), st.session_state.get(HIERARCHY_KEY)
    if m is None or e is None or e.fp != m["fp"]:
        return None
    return e


def table_entry() -> TableEntry | None:
    """The current release of the census table (Privelet or marginal tables), or None."""
    ss = st.session_state
    mech = ss.get("census_mech", "privelet")
    e = ss.get(TABLE_KEYS["matrix" if mech == "matrix" else "privelet"])
    # only a release of the table loaded now: another table's is never shown under this table's budget
    return e if e is not None and e.fingerprint == ss.get("census_fp") else None


NEGATIVE_NOTE = ("Privelet's counts are noisy and unrounded: some are fractional (3.4 people) and some small "
                 "areas are below zero. That is on purpose: rounding them or setting them to zero would make "
                 "sums of areas biased. Round them only for display, after adding areas up.")


def released_areas(h: Any) -> str:
    """``617 areas at all levels (576 finest areas)``: the same words on every step and in the sidebar."""
    return f"{fmt.count(h.n_nodes)} areas at all levels ({fmt.count(h.sizes[-1])} finest areas)"


def unit_words(unit: Any) -> str:
    """The unit of privacy of ``unit`` (the release's :class:`~dpcore.privacy.units.Unit`) with its
    neighbours: one person when the curator confirmed each person is counted once, else one counted
    record (issue 26 item 15: as the release record and the budget state it)."""
    who = "one person" if unit.entity == "person" else "one counted record"
    return f"{who}, " + ("added or removed" if unit.neighbour == "add_remove" else "changed (replace one)")
