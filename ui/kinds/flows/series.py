"""Trips over time: what the trips supply to the shared series steps (:mod:`ui.series`): the trips
table's time controls, the period inputs (as the CLI builds them) and one period's flow map."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go

from dpcore.errors import InputError
from dpcore.flows.unit import od_unit
from dpcore.privacy.units import TimeUnit
from ui import series, state
from ui.kinds.flows.common import setting

KIND = "flows"


def _cols(m: dict[str, Any]) -> dict[str, Any]:
    return dict(m["config"]["cols"])


def data_controls(m: dict[str, Any]) -> None:
    """The Data step's "Release over time" for trips (the trips table of the loaded data)."""
    c = m["counts"]
    base = od_unit(setting("neighbour"), c.max_trips, c.persons)
    # trips counted by DuckDB keep only their first rows in memory: a series of them is the CLI's
    series.time_controls(KIND, None if m["config"].get("engine") == "duckdb" else m.get("df"), base)


def inputs_of(m: dict[str, Any]) -> Any:
    """``inputs(unit, session)`` for the trips of model ``m``: one input per public period."""
    from dpcore.flows.counts import ODCounts
    from dpcore.series import table_series_inputs

    def inputs(unit: TimeUnit, session: Any) -> tuple[list[Any], str]:
        s = series.active(KIND)
        df = None if m["config"].get("engine") == "duckdb" else m.get("df")
        if s is None or df is None:
            raise InputError("Load the trips with their time column on the Data step first.")
        cols = _cols(m)
        origin, destination, count, user = cols["origin"], cols["destination"], cols.get("count"), cols.get("user")
        c = m["counts"]

        def build(part: pd.DataFrame) -> Any:
            return ODCounts.from_frame(part, m["h"], origin=origin, destination=destination, count=count, user=user,
                                       max_trips=c.max_trips, distinct=c.distinct)

        return table_series_inputs(df, s.column, s.periods(), [origin, destination], count, build, unit, session, user)

    return inputs


def files_of(m: dict[str, Any], sel: Any) -> Any:
    """One period's files, as the Release step makes them for one release of trips."""
    from dpcore.flows.export import od_files

    def files(rel: Any, ledger: Any) -> dict[str, bytes]:
        return od_files(rel, ledger, origin_xy=m["xy"] or None, delta=sel.delta,
                        extra={"budget_input": sel.approx} if sel.approx else None)

    return files


def figure_of(m: dict[str, Any]) -> Any:
    """One period's largest flows of the finest table, from its published rows."""
    from dpcore.flows.figures import published_flow_map

    h = m["h"]
    depth = int(h.depth)
    xy = (m["xy"] or {}).get(depth)

    def figure(rows: pd.DataFrame, _zmax: float | None, title: str) -> go.Figure:
        finest = rows[rows["level"] == rows["level"].iloc[-1]] if len(rows) else rows
        if xy is None:
            return go.Figure().update_layout(title={"text": f"{title}: no map positions for the areas"})
        return published_flow_map(finest, h.labels(depth), xy, unit=m["unit"], title=title,
                                  boundaries=(m.get("boundaries") or {}).get(depth))

    return figure


def release_step(m: dict[str, Any], sel: Any) -> None:
    """The Release step when "Release over time" is on."""
    kind = series.SeriesKind(KIND, inputs_of(m), files_of(m, sel), figure_of(m),
                             lambda rows: rows["noisy_count"] if len(rows) else [], m["fp"])
    series.release_step(kind, sel.core, sel.error, state.session())
