"""Counts over areas (a hierarchy) over time: what the hierarchy supplies to the shared series steps
(:mod:`ui.series`): the table's time controls, the period inputs (as the CLI builds them) and one
period's map of the finest level with boundaries."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dpcore.errors import InputError
from dpcore.privacy.units import TimeUnit
from ui import budget_ui, series, state

KIND = "areas"


def data_controls(m: dict[str, Any], base_unit: Any) -> None:
    """The Data step's "Release over time" for a hierarchy table read in memory."""
    series.time_controls(KIND, m.get("df"), base_unit, unit_choice=lambda base: _unit_choice(m["fp"], base))


def _unit_choice(fp: str, base_unit: Any) -> tuple[str, Any]:
    """A table names no person: its series protects one record per period (the unit event), or, when
    the curator confirms each person is counted once in each period's rows, one person per period
    (person-period, uncapped), which may draw on a population's budget as a one-off release of a
    confirmed table does (:func:`ui.state.person_once`)."""
    once = budget_ui.person_once_box(fp, per_period=True)
    return ("person-period" if once else "event"), dataclasses.replace(base_unit, entity="person" if once else "record")


def inputs_of(m: dict[str, Any]) -> Any:
    """``inputs(unit, session)`` for the table of model ``m``: one input per public period (an empty
    period is released as zero in every public area)."""
    from dpcore.areas.counts import HierarchyCounts
    from dpcore.series import table_series_inputs

    def inputs(unit: TimeUnit, session: Any) -> tuple[list[Any], str]:
        s = series.active(KIND)
        df = m.get("df")
        if s is None or df is None:
            raise InputError("Load the table with its time column on the Data step first.")
        if unit.scope == "person":
            raise InputError("A table of counts names no person, so it cannot follow one person over the periods: "
                             "choose the unit event or person-period.")
        cfg = m["inputs"]
        levels, counts_cols, group = list(cfg["levels"]), list(cfg["count"]), cfg.get("group")
        counts = m["counts"]
        fp_cols = levels + ([group] if group else [])
        count = counts_cols[0] if len(counts_cols) == 1 else None

        def build(part: pd.DataFrame) -> Any:
            if part.empty:
                return dataclasses.replace(counts, leaf=np.zeros_like(counts.leaf), n_rows=0)
            return HierarchyCounts.from_frame(part, m["h"], levels, counts_cols or None, group=group)

        return table_series_inputs(df, s.column, s.periods(), fp_cols, count, build, unit, session)

    return inputs


def figure_of(m: dict[str, Any]) -> Any:
    """One period's finest mapped level from its published rows (boundaries from the Data step)."""
    from dpcore.data.maps import COLORSCALE, OFFLINE_STYLE, LogScale, zoom_box

    h, joins = m["h"], m.get("joins") or {}
    join = max(joins.values(), key=lambda j: j.depth) if joins else None
    geo = None
    if join is not None:
        frame = join.frame[["geometry"]].assign(code=h.labels(join.depth)[join.frame["node"].to_numpy()])
        geo = frame.__geo_interface__
        w, s_, e, n = (float(x) for x in join.frame.total_bounds)

    def figure(rows: pd.DataFrame, zmax: float | None, title: str) -> go.Figure:
        if join is None:
            top = rows[rows["level"] == h.level_names[-1]].nlargest(20, "noisy_count")
            return go.Figure(go.Bar(x=top["noisy_count"], y=top["code"].astype(str), orientation="h")).update_layout(
                title={"text": f"{title}: the 20 largest areas (no boundaries were given for a map)"}, height=520)
        part = rows[rows["level"] == h.level_names[join.depth]]
        counts = part["noisy_count"].to_numpy(dtype=float)
        scale = LogScale.of([zmax] if zmax and zmax > 0 else counts)  # one log scale for every period
        fig = go.Figure(go.Choroplethmap(
            geojson=geo, featureidkey="properties.code", locations=part["code"].astype(str), z=scale.z(counts),
            zmin=scale.zmin, zmax=scale.zmax, colorscale=COLORSCALE, marker={"opacity": 0.75},
            colorbar=scale.colorbar("people (log)"), customdata=counts,
            hovertemplate="%{location}: %{customdata:,.0f}<extra></extra>"))
        zoom, centre = zoom_box(w, s_, e, n, height_px=520)
        return fig.update_layout(map={"style": OFFLINE_STYLE, "zoom": zoom, "center": centre}, height=520,
                                 margin={"l": 0, "r": 0, "t": 30, "b": 0}, title={"text": title, "font": {"size": 14}})

    return figure


def release_step(m: dict[str, Any], sel: Any) -> None:
    """The Release step when "Release over time" is on."""
    from dpcore.areas import export

    def files_of(rel: Any, ledger: Any) -> dict[str, bytes]:
        return export.hierarchy_files(rel, ledger, dict(m["joins"]), plan=sel.core)  # the record states its unit

    kind = series.SeriesKind(KIND, inputs_of(m), files_of, figure_of(m),
                             lambda rows: rows["noisy_count"] if len(rows) else [], m["fp"])
    series.release_step(kind, sel.core, sel.error, state.session())

