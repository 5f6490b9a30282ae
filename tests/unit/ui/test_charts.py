"""ui.charts.built: the dict st.plotly_chart asks for on every rerun is made once, and the browser gets
the same figure as before (issue 28 item 5)."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from dpcore.data.domain import Bounds, Grid
from dpcore.points import viz
from dpcore.points.release import PartitionRelease
from dpcore.privacy.budget import pure
from ui import charts


def _release() -> PartitionRelease:
    """A 2-level quadtree on a 4 x 4 grid: the root and its four quadrants (the leaves)."""
    g = Grid(Bounds(-74.0, 40.6, -73.8, 40.8), 4, 4)
    rects = np.array([[0, 4, 0, 4], [0, 2, 0, 2], [0, 2, 2, 4], [2, 4, 0, 2], [2, 4, 2, 4]])
    noisy = np.array([100.0, 30.0, -2.0, 40.0, 32.0])
    return PartitionRelease("quadtree", "Quadtree", {}, g, pure(1), (), rects, np.array([0, 1, 1, 1, 1]),
                            np.array([False, True, True, True, True]), noisy, np.ones(5), np.ones(5), 1, None)


def test_the_built_figure_serialises_to_the_same_json_as_the_figure() -> None:
    fig, _ = viz.partition_figure(_release())  # the polygons' hover mixes numbers and words
    assert fig.data[0].customdata.dtype == object  # numbers and words: what made orjson give up
    before = json.loads(pio.to_json(fig.to_dict(), validate=False))
    after = json.loads(pio.to_json(charts.built(fig).to_dict(), validate=False))
    assert after == before


def test_the_dict_is_made_once_and_not_copied_on_every_run() -> None:
    b = charts.built(go.Figure(go.Scatter(x=[1, 2], y=[3, 4])))
    assert b.to_dict() is b.to_dict()
    assert charts.built(b) is b


def test_building_copies_no_polygon_and_leaves_the_figure_unchanged() -> None:
    # plotly's to_dict deep-copied every polygon of a release map (1 s of server CPU a map, issue 28)
    fig, _ = viz.partition_figure(_release())
    before = fig.to_json()
    spec = charts.built(fig).to_dict()
    assert spec["data"][0]["geojson"] is fig.data[0].geojson  # the figure's own GeoJSON, not a copy
    assert isinstance(spec["data"][0]["locations"], dict)  # numpy arrays as plotly's typed arrays
    assert fig.to_json() == before


def _figures() -> list[go.Figure]:
    """Figures of the kinds the pages draw: typed integer and float arrays, a 2-D heatmap, dates,
    multi-category axes, a map with a layer whose GeoJSON holds a numpy array, words."""
    heat = go.Figure(go.Heatmap(z=np.arange(12, dtype=np.int64).reshape(3, 4), x=np.arange(4.0)))
    heat.update_layout(xaxis={"range": np.array([0.0, 3.0])})
    bars = go.Figure(go.Bar(x=np.array([3, 300, 70_000], dtype=np.int64), y=["a", "b", "c"], orientation="h"))
    dates = go.Figure(go.Scatter(x=np.array(["2026-01-01", "2026-01-08"], dtype="datetime64[D]"),
                                 y=np.array([1.5, np.nan]), customdata=np.array([7, 8], dtype=np.uint8)))
    multi = go.Figure(go.Bar(x=[["l1", "l1", "l2"], ["a", "b", "a"]], y=np.array([1.0, 2.0, 3.0])))
    layer = {"sourcetype": "geojson", "type": "line", "source": {"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {}, "geometry": {"type": "LineString",
                                                            "coordinates": np.array([[0.0, 0.0], [1.0, 1.0]])}}]}}
    geo = go.Figure(go.Scattermap(lon=np.array([0.5, 0.7]), lat=np.array([0.5, 0.2]), text=["x", "y"]))
    geo.update_layout(map={"style": "white-bg", "layers": [layer]})
    return [heat, bars, dates, multi, geo]


def test_every_kind_of_figure_serialises_as_plotly_itself_does() -> None:
    for fig in _figures():
        want = json.loads(pio.to_json(fig.to_dict(), validate=False))
        assert json.loads(pio.to_json(charts.built(fig).to_dict(), validate=False)) == want


def test_the_area_and_trip_extent_maps_serialise_as_plotly_itself_does() -> None:
    """The Data step's public extent maps of areas and trips (kept built in the session; a shipped
    geography's made once per server through :func:`ui.charts.shared_figure`): the O/D demo's made-up
    geography, its boundaries of three levels and its area centres."""
    from dpcore.areas import figures as area_figures
    from dpcore.data.synthetic import demo_od
    from dpcore.flows import figures as od_figures
    from ui.kinds.areas import data as areas_data
    from ui.kinds.flows import data as flows_data

    _areas, _flows, bounds = demo_od()
    frames = [bounds["region"], bounds["district"], bounds["zone"]]
    zone = bounds["zone"].geometry.representative_point()
    xy = {3: (zone.x.to_numpy(), zone.y.to_numpy())}
    key = ("test_charts", "demo")
    try:
        for fig, shared in [(area_figures.extent_figure(frames), areas_data._shipped_extent(key, frames)),
                            (od_figures.extent_figure([frames[2], frames[0]], xy),
                             flows_data._shipped_extent(key, [frames[2], frames[0]], xy))]:
            want = json.loads(pio.to_json(fig.to_dict(), validate=False))
            assert json.loads(pio.to_json(charts.built(fig).to_dict(), validate=False)) == want
            assert isinstance(shared, charts.BuiltFigure)
            assert json.loads(pio.to_json(shared.to_dict(), validate=False)) == want
    finally:
        areas_data._shipped_extent.clear()
        flows_data._shipped_extent.clear()


class _Unhashable:
    """Stands for a frame the key already names: hashing it raises (it must never be hashed)."""

    def __reduce__(self):  # what Streamlit's hasher falls back on
        raise TypeError("not hashable")


def test_a_shared_figure_is_made_once_per_public_key_and_keeps_its_cache_name() -> None:
    """:func:`ui.charts.shared_figure`: one figure per key, built, shared; arguments named ``_...`` are not
    part of the key (they are not even hashed); the cache is named by the function's own module and name
    (tests/conftest.py KEPT_RESOURCES keeps the shipped geography's by that name)."""
    made: list[str] = []

    @charts.shared_figure
    def extent(key: tuple[str, ...], _frame: object) -> go.Figure:
        """A public figure."""
        made.append(key[0])
        return go.Figure(go.Scatter(x=[1, 2], y=[3, 4], customdata=np.array([[1.5, "a"]], dtype=object)),
                         layout={"title": {"text": key[0]}})

    try:
        first = extent(("a",), _Unhashable())
        assert isinstance(first, charts.BuiltFigure)
        assert extent(("a",), _Unhashable()) is first  # the same object for every session
        assert extent(("b",), _Unhashable()).to_dict()["layout"]["title"]["text"] == "b"
        assert made == ["a", "b"]
        assert first.to_dict()["data"][0]["customdata"] == [[1.5, "a"]]
        assert (extent.__module__, extent.__qualname__, extent.__doc__) == (
            __name__, "test_a_shared_figure_is_made_once_per_public_key_and_keeps_its_cache_name.<locals>.extent",
            "A public figure.")
        from streamlit.runtime.caching.cache_resource_api import _resource_caches as caches

        names = {c.display_name for per in caches._function_caches.values() for c in per.values()}
        assert f"{__name__}.{extent.__qualname__}" in names
    finally:
        extent.clear()
    extent(("a",), None)
    assert made == ["a", "b", "a"]  # .clear() empties it
    extent.clear()


def test_the_json_of_a_built_figure_is_made_once_and_is_plotlys() -> None:
    # st.plotly_chart serialised a kept figure again on every rerun of its page (issue 28 item 5)
    fig, _ = viz.partition_figure(_release())
    spec = charts.built(fig).to_dict()
    first = pio.to_json(spec, validate=False)
    assert pio.to_json(spec, validate=False) is first  # kept, not made again
    assert first == pio.to_json(fig.to_dict(), validate=False)  # the same text as the figure's own
    plain = dict(spec)  # any other dict, or other arguments, go to plotly as before
    assert pio.to_json(plain, validate=False) == first and pio.to_json(plain, validate=False) is not first
    assert pio.to_json(spec, validate=False, pretty=True) != first


def test_a_copy_of_a_built_figures_dict_does_not_carry_its_json() -> None:
    import copy
    import pickle

    fig, _ = viz.partition_figure(_release())
    spec = charts.built(fig).to_dict()
    first = pio.to_json(spec, validate=False)
    for made in (copy.copy(spec), copy.deepcopy(spec), pickle.loads(pickle.dumps(spec))):
        assert type(made) is dict and made == spec
        made["layout"] = {**made["layout"], "height": 123}
        assert pio.to_json(made, validate=False) != first


def test_kept_recent_builds_each_figure_once_and_keeps_only_the_last_drawn() -> None:
    import plotly.graph_objects as go

    made: list[str] = []

    def make(name: str):
        return lambda: made.append(name) or go.Figure(layout={"title": {"text": name}})

    store: dict = {}
    for name in ("a", "b", "a", "c", "d", "a"):
        fig = charts.kept_recent(store, name, make(name), limit=3)
        assert fig.to_dict()["layout"]["title"]["text"] == name
    assert made == ["a", "b", "c", "d"]  # "a" kept while among the 3 last drawn
    assert list(store) == ["c", "d", "a"]
    charts.kept_recent(store, "b", make("b"), limit=3)
    assert made[-1] == "b" and list(store) == ["d", "a", "b"]
