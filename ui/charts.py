"""Plotly figures made ready for ``st.plotly_chart`` once, not on every rerun (issue 28 item 5).

``st.plotly_chart`` calls ``figure.to_dict()`` (a deep copy of every trace and layer) and
serialises the copy on every run of the page, even when the figure is kept in the session: for a
release map of 3,600 polygons that was 0.9 s of copying and 1.5 s of JSON (orjson refuses numpy
arrays of Python objects such as ``customdata`` mixing numbers and words, and Plotly then cleans the
whole figure value by value), on every click of the Release page, for every session.
:func:`built` makes the dict once, with such arrays turned into lists so that orjson writes it in
one pass; what the browser receives is the same figure.  The dict is made from the figure's own
properties without plotly's deep copy (``to_dict`` copied every coordinate of every polygon: about
1 s of the server's CPU per release map of a few thousand areas); the figure is not changed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any, ParamSpec

import numpy as np
import plotly
import plotly.graph_objects as go
import plotly.io
import streamlit as st

P = ParamSpec("P")


class _Spec(dict):
    """A built figure's dict, with the JSON ``st.plotly_chart`` makes of it kept once made (:func:`_json_kept`)."""

    __slots__ = ("json",)
    #: what the wrapper of plotly.io.to_json looks for (a class attribute: the wrapper made by a first
    #: import of this module also serves the class of a later re-import)
    keeps_plotly_json = True

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(spec)
        self.json: str | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # a copy (copy.copy, copy.deepcopy, pickle) is a plain dict: it may be changed, so it must
        # not carry this dict's JSON (review finding: a changed deep copy was served the old text)
        return (dict, (dict(self),))


class BuiltFigure(go.Figure):
    """A figure whose dict is made once (:func:`built`); ``to_dict`` returns it without copying, and
    its JSON is made once too (:func:`_json_kept`).

    Read-only by convention: it is what the page shows, not something to change (change the figure
    it was built from and build it again)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__()
        self._spec = _Spec(spec)

    def to_dict(self) -> dict[str, Any]:
        return self._spec

    def to_plotly_json(self) -> dict[str, Any]:
        return self._spec


#: Keys whose values are plain GeoJSON (ours, or a boundary file's), left as they are by :func:`_plain`
#: (walking the coordinates of thousands of polygons cost 0.2 s).
_GEOJSON_KEYS = frozenset({"geojson", "source"})
#: The plotly major versions whose ``to_dict`` :func:`_figure_dict` was checked against (same JSON for
#: maps, heatmaps, bars, dates, typed and object arrays); any other plotly gets its own ``to_dict``.
_CHECKED_PLOTLY = ("6", "7")


def _plain(value: Any, typed: Any = None, skipped: Any = None) -> Any:
    """``value`` with numpy arrays of Python objects turned into lists (orjson writes those) and, given
    ``typed`` (plotly's ``to_typed_array_spec``), other numpy arrays as plotly's typed arrays, as
    ``to_dict`` sends them, except under the keys plotly skips (``skipped``: its ``is_skipped_key``);
    every dict and every list of containers is new, so ``value`` is unchanged."""
    if isinstance(value, dict):
        return {k: (v if k in _GEOJSON_KEYS else
                    _plain(v, None if skipped is not None and skipped(k) else typed, skipped))
                for k, v in value.items()}
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (dict, list, tuple, np.ndarray)):
        return [_plain(v, typed, skipped) for v in value]
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return value.tolist()
        return value if typed is None else typed(value)
    return value


def built(fig: go.Figure) -> BuiltFigure:
    """``fig`` as a :class:`BuiltFigure`: its dict made once, ready for ``st.plotly_chart`` on every rerun.

    >>> f = built(go.Figure(go.Scatter(x=[1, 2], y=[3, 4], customdata=np.array([[1.5, "a"]], dtype=object))))
    >>> f.to_dict()["data"][0]["customdata"], f.to_dict() is f.to_dict()
    ([[1.5, 'a']], True)
    """
    if isinstance(fig, BuiltFigure):
        return fig
    return BuiltFigure(_figure_dict(fig))


def shared_figure(make: Callable[P, go.Figure]) -> Callable[P, BuiltFigure]:
    """``make``, a function drawing a figure of public inputs only, as a function whose figure is made and
    built (:func:`built`) once per server and its arguments, then shared read-only by every session
    (``st.cache_resource``, at most 8 figures per function): the Data step's extent maps of a public
    area or of a geography shipped with the app, which every new session's first page otherwise drew
    and serialised again (issue 28 item 5).

    Privacy: a cache shared between sessions holds nothing derived from an upload or from true counts,
    so ``make``'s arguments are public (bounds, a shipped file's codes and levels), and a figure of an
    uploaded table is built in its own session with :func:`built`.  As for any ``st.cache_resource``
    function, the key is made of the arguments whose names do not begin with ``_``; those that do (the
    frames a key already names) are passed through unhashed.  The function keeps its module and name,
    which name its cache (tests/conftest.py ``KEPT_RESOURCES``); ``.clear()`` empties it.
    """
    @functools.wraps(make)
    def build(*args: P.args, **kwargs: P.kwargs) -> BuiltFigure:
        return built(make(*args, **kwargs))

    return st.cache_resource(show_spinner=False, max_entries=8)(build)


def kept(name: str, key: Hashable, make: Callable[[], go.Figure]) -> BuiltFigure:
    """``make()``'s figure, built (:func:`built`) once and kept in this session under ``name`` until
    ``key`` changes: a small chart drawn on every rerun of its page (the expected error per level of a
    plan or a release) otherwise built its figure again at each click, about a quarter of the CPU of a
    rerun of the Plan step (plotly validates every property set).  ``key`` holds every value ``make``
    draws (numbers and words of a data-free plan or of a release), so the same key makes the same
    figure; the figure lives in this session only, as the plan does.
    """
    return kept_recent(st.session_state.setdefault(f"_chart_{name}", {}), key, make, limit=1)


#: Figures a release keeps per session (:func:`kept_recent`): the last ones drawn.
FIGURES_KEPT = 3


def kept_recent(store: dict[Hashable, BuiltFigure], key: Hashable, make: Callable[[], go.Figure],
                limit: int = FIGURES_KEPT) -> BuiltFigure:
    """``make()``'s figure, built once and kept in ``store`` (a dict in this session's state) under
    ``key``, with only the ``limit`` most recently drawn kept: a curator walking the areas of a
    release draws a map and a treemap per area, each held with its JSON, so an unbounded store grew
    with every area visited (review finding)."""
    if key in store:
        store[key] = store.pop(key)  # most recently used last
    else:
        store[key] = built(make())
        while len(store) > limit:
            store.pop(next(iter(store)))
    return store[key]


def _figure_dict(fig: go.Figure) -> dict[str, Any]:
    """What ``fig.to_dict()`` returns (numpy arrays as plotly's typed arrays), without its deep copy:
    new dicts and lists (:func:`_plain`) around the figure's own values, which are only read.  The
    rules (which keys are skipped, how an array is typed) are plotly's own functions, and only the
    plotly versions checked take this path; every other case gets plotly's (copying) ``to_dict``."""
    data, layout = getattr(fig, "_data", None), getattr(fig, "_layout", None)
    try:
        from _plotly_utils.utils import is_skipped_key, to_typed_array_spec  # what to_dict applies
    except ImportError:  # another plotly: its own (copying) dict
        return _plain(fig.to_dict())
    if (plotly.__version__.split(".")[0] not in _CHECKED_PLOTLY or not isinstance(data, list)
            or not isinstance(layout, dict) or fig.frames):
        return _plain(fig.to_dict())
    return _plain({"data": data, "layout": layout}, to_typed_array_spec, is_skipped_key)


def _json_kept(to_json: Callable[..., str]) -> Callable[..., str]:
    """``plotly.io.to_json`` keeping the JSON of a built figure's dict once made.

    ``st.plotly_chart`` calls ``plotly.io.to_json(figure.to_dict(), validate=False)`` on every run of
    the page: for a kept figure, the same dict serialised again at each click (orjson, then plotly's
    escaping of the whole text), about half of a rerun of the points Release step with its map
    (py-spy, 2026-11-30).  A built figure's dict (:class:`_Spec`) is read only, so its JSON is made
    once by plotly's own function and served again; any other argument goes to plotly as it is.  A
    figure shared between sessions (:func:`shared_figure`) shares its JSON: public, as the figure.
    """
    if getattr(to_json, "_keeps_built_json", False):  # this module imported again: wrapped once
        return to_json

    @functools.wraps(to_json)
    def kept(fig: Any, *args: Any, **kwargs: Any) -> str:
        if getattr(type(fig), "keeps_plotly_json", False) and not args and kwargs == {"validate": False}:
            if fig.json is None:
                fig.json = to_json(fig, validate=False)
            return fig.json
        return to_json(fig, *args, **kwargs)

    kept._keeps_built_json = True  # type: ignore[attr-defined]
    return kept


plotly.io.to_json = _json_kept(plotly.io.to_json)
