"""``st.plotly_chart`` of a kept figure serialises it once, not at every rerun (``ui.charts`` wraps
``plotly.io.to_json``): a Streamlit upgrade that called plotly another way would silently lose that
saving, so this runs Streamlit's own element (review finding)."""

from __future__ import annotations

import plotly.io._json as plotly_json
import pytest
from streamlit.testing.v1 import AppTest


def _page() -> None:
    import plotly.graph_objects as go
    import streamlit as st

    from ui import charts

    if "fig" not in st.session_state:
        st.session_state["fig"] = charts.built(go.Figure(go.Bar(x=["a", "b"], y=[1, 2])))
    st.plotly_chart(st.session_state["fig"], key="kept")


def test_a_kept_figure_is_serialised_once_over_three_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []
    real = plotly_json.to_json_plotly
    monkeypatch.setattr(plotly_json, "to_json_plotly", lambda *a, **k: made.append(1) or real(*a, **k))
    at = AppTest.from_function(_page).run()
    for _ in range(2):
        at.run()
    assert not at.exception, at.exception
    assert len(at.get("plotly_chart")) == 1
    assert len(made) == 1
