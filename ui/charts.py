"""Plotly figures made ready for ``st.plotly_chart`` once, not on every rerun (issue 28 item 5).

``st.plotly_chart`` calls ``figure.to_dict()`` (a deep copy of every trace and layer) and
serialises the copy on every run of the page, even when the figure is kept in the session: for a
release map of 3,600 polygons that was 0.9 s of copying and 1.5 s of JSON (orjson refuses numpy
arrays of Python objects such as ``customdata`` mixing numbers and words, and Plotly then cleans the
whole figure value by value), on every click of the Release page, for every session.
:func:`built` makes the dict once, with such arrays turned into lists so that orjson writes it in
one pass; what the browser receives is the same figure.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go


class BuiltFigure(go.Figure):
    """A figure whose dict is made once (:func:`built`); ``to_dict`` returns it without copying.

    Read-only by convention: it is what the page shows, not something to change (change the figure
    it was built from and build it again)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__()
        self._spec = spec

    def to_dict(self) -> dict[str, Any]:
        return self._spec

    def to_plotly_json(self) -> dict[str, Any]:
        return self._spec


def _plain(value: Any) -> Any:
    """``value`` with numpy arrays of Python objects turned into lists (orjson writes those)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (dict, list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray) and value.dtype == object:
        return value.tolist()
    return value


def built(fig: go.Figure) -> BuiltFigure:
    """``fig`` as a :class:`BuiltFigure`: its dict made once, ready for ``st.plotly_chart`` on every rerun.

    >>> f = built(go.Figure(go.Scatter(x=[1, 2], y=[3, 4], customdata=np.array([[1.5, "a"]], dtype=object))))
    >>> f.to_dict()["data"][0]["customdata"], f.to_dict() is f.to_dict()
    ([[1.5, 'a']], True)
    """
    if isinstance(fig, BuiltFigure):
        return fig
    return BuiltFigure(_plain(fig.to_dict()))
