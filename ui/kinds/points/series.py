"""Points over time: what the points supply to the shared series steps (:mod:`ui.series`): the
uploaded table's time controls, the period inputs (as the CLI builds them) and one period's map."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dpcore.errors import InputError
from dpcore.privacy.units import TimeUnit
from ui import series, state
from ui.kinds.points import state as points_state

KIND = "points"


def upload_frame() -> pd.DataFrame | None:
    """The uploaded table of the loaded points (with its other columns), or None (demo, files on disk)."""
    ss = st.session_state
    ds = points_state.dataset()
    if ds.is_demo or ds.source is not None:
        return None
    df = ss.get("upload_df") if ss.get("upload_name") == ds.name else None
    if df is not None:  # kept with the dataset: the Data step forgets the upload once the page is left
        ss["series_frame_points"] = (ds.fingerprint, df)
        return df
    kept = ss.get("series_frame_points")
    return kept[1] if kept is not None and kept[0] == ds.fingerprint else None


def data_controls() -> None:
    """The Data step's "Release over time" for points."""
    series.time_controls(KIND, upload_frame(), points_state.choice().unit)


def inputs(unit: TimeUnit, session: Any) -> tuple[list[Any], str]:
    """One input per public period of the uploaded points (rows outside the range dropped first;
    for the unit ``person`` each person's periods sampled before anything else)."""
    from dpcore.data.points import DROP_UNREADABLE_COORDINATE
    from dpcore.series import points_series_inputs

    s = series.active(KIND)
    df = upload_frame()
    if s is None or df is None:
        raise InputError("Upload the points with their time column on the Data step first.")
    t = points_state.dataset().table
    user_col = t.user_column if unit.scope != "event" else None
    cap = st.session_state.get("user_cap") if user_col else None
    # a table loaded with its unreadable rows left out (the Data step's button) is read the same way
    inputs, whole, _ = points_series_inputs(df, s.column, s.periods(), t.lat_column, t.lon_column, user_col, unit,
                                            session, points_state.grid(), cap, t.source_name,
                                            drop_unreadable=DROP_UNREADABLE_COORDINATE in t.dropped)
    return inputs, whole


def files_of(rel: Any, ledger: Any) -> dict[str, bytes]:
    """One period's files, as the CLI writes them."""
    from dpcore.points.export import release_files

    return release_files(rel, ledger)


def figure(rows: pd.DataFrame, zmax: float | None, title: str) -> go.Figure:
    """One period's released rectangles on the offline map (from the published rows)."""
    from dpcore.points import viz

    return viz.rects_figure(rows, points_state.grid().bounds, boundaries=st.session_state.get("boundaries"),
                            zmax=zmax, title=title)


def value(rows: pd.DataFrame) -> Any:
    from dpcore.points import viz

    return viz.rects_density(rows) if len(rows) else np.zeros(0)




def release_step(pr: Any) -> None:
    """The Release step when "Release over time" is on."""
    kind = series.SeriesKind(KIND, inputs, files_of, figure, value, points_state.dataset().fingerprint)
    series.release_step(kind, pr.plan, pr.error, state.session())
