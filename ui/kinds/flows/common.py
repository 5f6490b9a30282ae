"""Trips between areas: what the four steps share (settings kept across pages, names of tables in
plain words, the plan table, the loaded trips and their budget).

Ledgers and releases are keyed by :attr:`dpcore.flows.counts.ODCounts.fingerprint`: a hash of the
trips themselves (order, line endings, compression, trip rows or count rows do not matter), not of
the file, the area list or the settings.  The same trips re-loaded draw on the same budget.
"""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from dpcore import catalog
from dpcore.core.mechanism import Plan, PlanRow
from dpcore.flows import figures as od_figures
from dpcore.flows.mechanisms.common import ODLevelPlan, ODPlan
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from ui import charts, fmt, frame, plan_table, state
from ui.kinds.flows.state import RELEASES_KEY, ODEntry
from ui.state import persistent, store

DEMO, NYC, US, RI, UPLOAD = "demo", "nyc", "us", "ri", "upload"
# every mechanism whose cost a ledger can add up ('sh' is (ε, δ)-DP: it cannot), InfTDA first
#: the mechanisms a budget can account for (SH is (ε, δ)-DP: none), InfTDA first
MECHS = sorted((n for n in catalog.names("od") if catalog.get("od", n).definitions), key=lambda n: n != "inftda")
NEIGHBOURS = {"replace": "Replace one person (the total is public and exact)",
              "add_remove": "Add or remove one person (the total is noised)"}
ORIENTATIONS = {"destination": "Destination tree (refine the destination first)",
                "origin": "Origin tree (refine the origin first)"}
SPLITS = {"uniform": "Uniform across tree levels (the paper)", "geometric": "Geometric (finer levels get more)",
          "custom": "Custom weights"}
#: the Plan step's settings and their defaults (the budget: the app-wide defaults of ui.state)
DEFAULTS: dict[str, Any] = {
    "mech": "inftda", "definition": "rho", "rho": state.DEFAULT_RHO, "eps": state.DEFAULT_EPSILON,
    "eps_pure": state.DEFAULT_EPSILON, "delta": 1e-8, "delta_read": 1e-8, "conversion": "classic",
    "neighbour": "replace", "orientation": "destination", "split": "uniform", "order": "ascending",
    "tiebreak": "random"}
MODELS_KEPT = 3  # counted data sets kept in the session (switching back does not count again)
CHOOSE, NONE = "(choose)", "(none)"
#: the name choice that takes a level's names from its boundary file (the default without a name column)
BOUNDARY_NAMES = "(from the boundary file)"
# default map level: the finest intra-level table small enough for the O/D matrix beside the map
MAX_MAP_AREAS = od_figures.MAX_HEATMAP_SIDE


def init() -> None:
    """The session keys of this kind (every step calls it first)."""
    ss = st.session_state
    ss.setdefault("od_ledgers", {})  # fingerprint -> Ledger
    ss.setdefault(RELEASES_KEY, {})  # fingerprint -> [release entries], oldest first


def keep(key: str, default: Any) -> str:
    """:func:`ui.state.persistent` under this kind's prefix (values survive page switches)."""
    return persistent(f"od_{key}", default)


def kept(key: str) -> Any:
    return store(f"od_{key}")


def setting(key: str) -> Any:
    """A Plan step setting as last chosen (its default before the Plan step was opened)."""
    return st.session_state.get(f"od_{key}", DEFAULTS.get(key))


def keep_choice(key: str, options: list[Any], default: Any) -> str:
    """:func:`keep` for a choice among ``options``: a remembered value that is no longer offered
    (another file, another release) falls back to ``default``.  Lists (multiselect) are checked
    item by item."""
    ss = st.session_state
    for k in (f"od_{key}", f"_w_od_{key}"):
        if k in ss:
            v = ss[k]
            ok = all(x in options for x in v) if isinstance(v, list) else v in options
            if not ok:
                del ss[k]
    return keep(key, default)


def sci(x: float) -> str:
    """1e-08 → 1e-8."""
    m, e = f"{x:.0e}".split("e")
    return f"{m}e{int(e)}"


def people(x: float | None) -> float | None:
    """A number of people for a table: whole numbers, one decimal below 10 (None if not finite)."""
    if x is None or not math.isfinite(x):
        return None
    return round(float(x), 1) if abs(x) < 10 else float(round(x))


def figure(key: tuple[Any, ...], build: Any) -> Any:
    """A figure of a release, built once and kept (the last few only: :func:`ui.charts.kept_recent`)."""
    return charts.kept_recent(st.session_state.setdefault("od_figs", {}), key, build)


# ---------------------------------------------------------------------------------------------
# words
# ---------------------------------------------------------------------------------------------


def _side(level: str, n: int = 2) -> str:
    return "the whole territory" if level == "total" else fmt.level_label(level, n)


def level_label(name: str) -> str:
    """A level of the O/D plan as the curator reads it (the planner's levels, issue 26 item 10): an
    intra-level table by its level (:func:`ui.fmt.level_label`, ``county (COUNTYFP)``), a cross-level
    one ``origin>destination`` as 'region to district' (as the plan table's :func:`table_name`, singular).

    >>> level_label("district"), level_label("STATEFP>COUNTYFP"), level_label("total>region")
    ('district', 'state (STATEFP) to county (COUNTYFP)', 'the whole territory to region')
    """
    origin, sep, destination = name.partition(">")
    return f"{_side(origin, 1)} to {_side(destination, 1)}" if sep else fmt.level_label(name)


def table_name(lp: ODLevelPlan, unit: str) -> str:
    """A tree level's table in words: 'regions to districts', 'total of all trips · exact, public'."""
    if lp.kind == "total":
        return f"total of all {unit}" if lp.measured else f"total of all {unit} · exact, public"
    return f"{_side(lp.origin_level)} to {_side(lp.destination_level)}" + (
        "" if lp.measured else " · copy of the level above")


def short_name(lp: ODLevelPlan) -> str:
    """'regions to districts'; 'total'."""
    return "total" if lp.kind == "total" else f"{_side(lp.origin_level)} to {_side(lp.destination_level)}"


ERRORS_CAPTION = ("**Typical largest error** is what the largest error over a table usually comes to (it can be "
                  "exceeded); the **guaranteed 95 % bound** is a promise: the largest error stays below it with "
                  "probability 95 % (only InfTDA and its MILP baseline give one, so '–' otherwise).")


def plan_caption(pl: ODPlan) -> str:
    """What a table's name and the error columns mean, the example taken from this plan's own tables."""
    cross = next((lv for lv in pl.levels
                  if lv.kind == "cross" and "total" not in (lv.origin_level, lv.destination_level)), None)
    if cross is None:
        return ERRORS_CAPTION
    o, d = cross.origin_level, cross.destination_level
    return (f"'{short_name(cross).capitalize()}' is the table of flows from each {o} (origin) to each {d} "
            f"(destination); release.csv names it {o}>{d}. " + ERRORS_CAPTION)


def error_basis(pl: ODPlan, unit: str) -> None:
    """How the expected error is computed, behind an expander (the method's formula stays out of the way)."""
    with st.expander("How the expected error is computed"):
        st.caption(f"From the mechanism, the budget, the unit of privacy and the public area list only: no data is "
                   f"used, so it can be published. All errors are in {unit} per area pair.")
        st.markdown(f"Method: {pl.levels[-1].basis}.")


def row_table_name(r: PlanRow, unit: str) -> str:
    """:func:`table_name` of a row of the core plan (its kind and levels are in ``details``)."""
    d = r.details
    if d["kind"] == "total":
        return f"total of all {unit}" if d["measured"] else f"total of all {unit} · exact, public"
    return f"{_side(d['origin_level'])} to {_side(d['destination_level'])}" + (
        "" if d["measured"] else " · copy of the level above")


def plan_columns(plan: Plan, unit_: str, full: bool = False) -> tuple[plan_table.Column, ...]:
    """The expected-error table's columns for trips (Plan and Release steps), read from the core plan's
    rows (:mod:`ui.plan_table`): numbers as numbers (they sort), rounded for people; ``full`` (the
    Release step) shows the possible pairs instead of the budget shares.  The errors in people come
    first (typical largest, per flow, unreliable below, the guaranteed bound), then the budget share
    (or possible pairs) and the noise SD: the headers are whole (:func:`ui.plan_table.fit_headers`), so
    the table is wider than the page, and what a curator reads first shows without scrolling sideways;
    the name column is as wide as its longest name (:func:`ui.plan_table.fit_cells`), not a fixed 400 px."""
    sym_ = plan.cost.symbol

    def num(label: str | None = None, **kw: Any) -> Any:
        return st.column_config.NumberColumn(label, width="small", **kw)

    def measured(r: PlanRow, x: float | None) -> float | None:
        return x if r.details["measured"] else None

    first: plan_table.Column = (
        ("possible pairs", lambda r: int(r.n_counts),
         num(format="localized", help="Origin areas × destination areas of this table.")) if full else
        ("budget share", lambda r: measured(r, float(f"{r.details['share']:.2g}")),
         num(f"budget share ({sym_})", format="%.2g",
             help="The part of this release's budget spent on this table (none: not measured).")))
    columns = (
        ("table", lambda r: row_table_name(r, unit_), st.column_config.TextColumn(
            "table", width="medium",
            help="The flows from each origin area to each destination area of two levels. release.csv names "
                 "it origin>destination (e.g. region>district).")),
        first,
        ("noise per cell (SD)", lambda r: measured(r, people(r.details["noise_sd"])),
         num(format="localized", help=f"Standard deviation of the noise added to each flow of this table, in "
                                      f"{unit_}.")),
        ("error per flow (RMSE)", lambda r: people(r.sd),
         num(format="localized", help=f"Typical error of one released flow (root mean square) after the tables "
                                      f"are made consistent, in {unit_}.")),
        ("typical largest error", lambda r: people(r.max_abs),
         num(format="localized", help=f"About the largest error over all the table's possible pairs, in {unit_}; "
                                      "can be exceeded.")),
        ("guaranteed 95 % bound", lambda r: people(r.details["bound_95"]),
         num(format="localized", help=f"The largest error stays below this with probability 95 %, in {unit_} "
                                      "(InfTDA and the MILP baseline only).")),
        ("unreliable below", lambda r: people(r.details["unreliable_below"]),
         num(format="localized", help=f"Released flows below this many {unit_} (about twice the noise) may be "
                                      "noise.")),
    )
    return plan_table.plain_first(columns, ("table", "typical largest error", "error per flow (RMSE)",
                                            "unreliable below", "guaranteed 95 % bound"))


def error_chart(pl: ODPlan, unit_: str) -> charts.BuiltFigure:
    """The expected error per table as bars, in the tree's order (top level first), with axis titles;
    made once per plan's numbers and kept in the session (:func:`ui.charts.kept`)."""
    lv = list(pl.levels[1:])
    bars = (tuple(short_name(x) for x in lv), tuple(people(x.sd) for x in lv), tuple(people(x.max_abs) for x in lv))
    return charts.kept("od_plan_chart", (bars, unit_), lambda: _error_figure(*bars, unit_))


def _error_figure(names: tuple[str, ...], sd: tuple[Any, ...], max_abs: tuple[Any, ...], unit_: str) -> go.Figure:
    fig = go.Figure([
        go.Bar(y=list(names), x=list(sd), name="error per flow (RMSE)", orientation="h",
               marker_color="#1f4e79", hovertemplate="%{y}: ± %{x:,} " + unit_ + "<extra>RMSE</extra>"),
        go.Bar(y=list(names), x=list(max_abs), name="typical largest error", orientation="h",
               marker_color="#e07b39",
               hovertemplate="%{y}: ± %{x:,} " + unit_ + "<extra>typical largest</extra>"),
    ])
    fig.update_layout(
        barmode="group", height=120 + 44 * len(names), margin={"l": 10, "r": 10, "t": 30, "b": 40},
        xaxis={"title": {"text": f"expected error, {unit_} per area pair"}, "tickformat": ",~r"},
        yaxis={"title": {"text": "table (origin level to destination level)"}, "autorange": "reversed",
               "categoryorder": "array", "categoryarray": list(names)},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
    )
    return fig


# ---------------------------------------------------------------------------------------------
# the loaded trips, their budget and their releases
# ---------------------------------------------------------------------------------------------


def ledger(m: dict[str, Any]) -> Ledger:
    """The budget the loaded trips draw on (their population's, once bound)."""
    return state.data_ledger("flows", m["fp"], budget.zcdp(state.DEFAULT_RHO_CAP), st.session_state["od_ledgers"])


def shown_entry(m: dict[str, Any]) -> ODEntry | None:
    """The release to show for the loaded data: the latest one made with the same area list and
    unit of privacy, else the latest one of these trips."""
    entries = st.session_state[RELEASES_KEY].get(m["fp"], [])
    same = [e for e in entries if e.view == m["view"]]
    return (same or entries or [None])[-1]


def missing(what: str, url: str, label: str) -> None:
    """A prerequisite is missing: say what to do, with a link that goes there (the page goes on)."""
    st.info(what)
    frame.link(url, label)


def unit_words(unit: Any, word: str) -> str:
    """The unit of privacy in the Data step's words (one trip, one worker, one person with at most m
    trips), with its neighbours: ``unit`` is the release's :class:`~dpcore.privacy.units.Unit` and
    ``word`` the model's counted unit ("trips" or "workers")."""
    if unit.entity == "person":
        who = f"one person with at most {unit.cap} trip{'s' if unit.cap != 1 else ''}"
    else:
        who = "one worker" if word == "workers" else "one trip"
    return f"{who}, " + ("added or removed" if unit.neighbour == "add_remove" else "changed (replace one)")
