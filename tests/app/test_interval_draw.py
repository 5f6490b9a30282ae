"""Issue 25 items 3 and 4 on the Release step: a drawn polygon (a lasso or a box on the release's cells)
and a public density the curator uploads.

The drawing is the chart's selection (``st.plotly_chart(..., on_select="rerun")``; AppTest runs no
JavaScript, so the selection a browser would send is set as the chart's state, in the form Streamlit's
frontend sends it: ``lasso`` holds each path's ``x``/``y``, ``box`` its two corners).  It becomes a
GeoJSON (:func:`ui.intervals.selection_geojson`) answered by the same library call as an upload; the
page's numbers are checked against that call on the stored files.  tests/e2e/test_interval_draw_browser.py
draws the lasso in a real browser.
"""

from __future__ import annotations

import json
import re

import pytest
import shapely
from app_steps import APP, ok, step
from streamlit.testing.v1 import AppTest

from dpcore.estimate.release_interval import ReleaseIntervals, read_density, read_polygons
from ui.intervals import answer_line, plain_line, rounded_for_people, selection_geojson
from ui.state import release_widget_key

LASSO = {"x": [-74.00, -73.82, -73.78, -73.92, -74.02], "y": [40.62, 40.64, 40.78, 40.86, 40.74]}


def test_a_lasso_and_a_box_become_the_polygons_an_upload_of_them_gives() -> None:
    sel = {"points": [], "point_indices": [], "lasso": [LASSO], "box": [{"x": [-73.9, -73.95], "y": [40.8, 40.7]}]}
    lasso, box = read_polygons(selection_geojson(sel))
    assert lasso.equals(shapely.Polygon(list(zip(LASSO["x"], LASSO["y"], strict=True))))
    assert box.equals(shapely.box(-73.95, 40.7, -73.9, 40.8))  # corners in any order
    assert selection_geojson({"lasso": [], "box": []}) is None
    assert selection_geojson(None) is None
    assert selection_geojson({"lasso": [{"x": [1, 2], "y": [1, 2]}]}) is None  # two points: no area


def test_a_lasso_drawn_across_itself_counts_both_loops() -> None:
    """A bow tie (the lasso crossed its own path) is not a valid polygon: its two triangles are the area."""
    [p] = read_polygons(selection_geojson({"lasso": [{"x": [0, 2, 2, 0], "y": [0, 2, 0, 2]}]}))
    assert p.is_valid and p.area == pytest.approx(2.0)


@pytest.fixture(scope="module")
def released() -> AppTest:
    """The demo released with UG (it offers measurements), the drawing turned on."""
    at = ok(AppTest.from_file(APP, default_timeout=240).run())
    step(at, "plan")
    ok(at.selectbox(key="_w_mechanism").set_value("ug").run())
    step(at, "release")
    ok(at.button(key=release_widget_key("release_button", at.session_state)).click().run())
    rid = at.session_state["releases"][0].release.release_id
    return ok(at.toggle(key=f"_w_interval_draw_{rid}").set_value(True).run())


def _draw(at: AppTest, lasso: list[dict], box: list[dict] | None = None) -> str:
    rid = at.session_state["releases"][0].release.release_id
    at.session_state[f"_w_interval_lasso_{rid}"] = {
        "selection": {"points": [], "point_indices": [], "box": box or [], "lasso": lasso}}
    ok(at.run())
    return rid


def test_the_cells_to_draw_on_are_plain_lon_lat_axes_with_the_lasso(released: AppTest) -> None:
    """The drawing surface needs no tiles (draws offline) and starts in lasso mode; a tile map's selection
    would not return the drawn path."""
    rid = released.session_state["releases"][0].release.release_id
    [el] = [e for e in released.get("plotly_chart") if e.proto.id.endswith(f"_w_interval_lasso_{rid}")]
    spec = json.loads(el.proto.spec)
    assert spec["layout"]["dragmode"] == "lasso"
    assert {t["type"] for t in spec["data"]} == {"scatter"} and "map" not in spec["layout"]
    assert spec["layout"]["yaxis"]["scaleanchor"] == "x"
    assert any("Nothing drawn yet" in c.value for c in released.caption)


def test_a_drawn_lasso_reads_the_librarys_estimate_and_interval(released: AppTest) -> None:
    _draw(released, [LASSO], [{"x": [-73.95, -73.9], "y": [40.7, 40.8]}])
    files = released.session_state["releases"][0].exports["files"]
    polys = selection_geojson({"lasso": [LASSO], "box": [{"x": [-73.95, -73.9], "y": [40.7, 40.8]}]})
    expected = ReleaseIntervals(files).of_polygons(polys, 0.9)
    # each answer leads with one plain sentence, counts rounded for people (whole numbers, the interval
    # rounded outwards); the exact numbers and the technical words sit in "How is this computed"
    plain = [m.value for m in released.markdown if m.value.startswith("**Drawn polygon")]
    assert plain == [plain_line(r, f"Drawn polygon {i + 1}", "points", " in this area") for i, r in enumerate(expected)]
    for line, r in zip(plain, expected, strict=True):
        est, low, high = rounded_for_people(r)
        assert low <= r["low"] and high >= r["high"] and abs(est - r["estimate"]) <= (r["high"] - r["low"]) / 20
        assert f"about **{est:,}** points in this area (90 % interval: **{low:,} to {high:,}**)." in line
        assert not any(w in line for w in ("SD", "bracket", "binomial", "rho", "ρ", "dispersion"))
    [how] = [e for e in released.expander if e.label.startswith("How is this computed")]
    shown = [m.value for m in how.markdown if m.value.startswith("Drawn polygon")]
    assert len(shown) == 2
    for i, (line, r) in enumerate(zip(shown, expected, strict=True)):
        assert line.startswith(answer_line(r, f"Drawn polygon {i + 1}")), line
        assert r["cells_inside"] > 0 and r["low"] < r["estimate"] < r["high"]
    assert expected[0]["cells_cut"] > 0  # a lasso cuts cells
    assert any("bracket [inside, touching]" in c.value and "binomial" in c.value for c in how.caption)
    assert set(how.dataframe[0].value.columns) >= {"estimate", "sd", "low", "high"}  # exact, as computed
    for w in released.warning:  # cut cells' warning in plain words; the library's words in the details
        assert w.value.startswith("Drawn polygon") and "binomial" not in w.value and "rho" not in w.value


def test_a_public_density_apportions_the_cut_cells(released: AppTest) -> None:
    """The uploaded density moves the cut cells' weights as the library's (``interval --density``); the
    cells inside the polygon keep weight 1, so the bracket stays."""
    rid = _draw(released, [LASSO])
    w, e = -74.10, -73.90  # density 1 west of -73.90, 0 east of it (e.g. land and water)
    dens = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"density": 1.0},
         "geometry": {"type": "Polygon", "coordinates": [[[w, 40.5], [e, 40.5], [e, 41.0], [w, 41.0], [w, 40.5]]]}},
        {"type": "Feature", "properties": {"density": 0.0},
         "geometry": {"type": "Polygon", "coordinates": [[[e, 40.5], [-73.6, 40.5], [-73.6, 41.0], [e, 41.0],
                                                          [e, 40.5]]]}}]}
    data = json.dumps(dens).encode()
    ok(released.file_uploader(key=f"_w_interval_density_{rid}").set_value(("d.geojson", data,
                                                                         "application/geo+json")).run())
    files = released.session_state["releases"][0].exports["files"]
    ri = ReleaseIntervals(files)
    polys = selection_geojson({"lasso": [LASSO], "box": []})
    [with_d] = ri.of_polygons(polys, 0.9, read_density(data))
    [by_area] = ri.of_polygons(polys, 0.9)
    [line] = [m.value for m in released.markdown if m.value.startswith("Drawn polygon 1")]
    assert line.startswith(answer_line(with_d, "Drawn polygon 1")), line
    assert with_d["estimate"] != pytest.approx(by_area["estimate"])  # the density moved the cut cells' weights
    assert (with_d["inside"], with_d["touching"]) == (by_area["inside"], by_area["touching"])
    assert re.search(r"bracket \[", line)
    ok(released.file_uploader(key=f"_w_interval_density_{rid}").clear().run())


def test_a_density_that_is_not_geojson_is_an_error_on_the_page(released: AppTest) -> None:
    rid = _draw(released, [LASSO])
    ok(released.file_uploader(key=f"_w_interval_density_{rid}").set_value(("d.geojson", b"not json",
                                                                         "application/geo+json")).run())
    assert any("density file could not be read" in e.value for e in released.error)
    ok(released.file_uploader(key=f"_w_interval_density_{rid}").clear().run())


def test_a_stated_coordinate_precision_weighs_the_cut_cells_by_the_lattice(released: AppTest) -> None:
    """The precision moves the cut cells' weights as the library's (``interval --precision``)."""
    rid = _draw(released, [LASSO])
    ok(released.number_input(key=f"_w_interval_precision_{rid}").set_value(0.001).run())
    ri = ReleaseIntervals(released.session_state["releases"][0].exports["files"])
    polys = selection_geojson({"lasso": [LASSO], "box": []})
    [lattice] = ri.of_polygons(polys, 0.9, precision=0.001)
    [by_area] = ri.of_polygons(polys, 0.9)
    [line] = [m.value for m in released.markdown if m.value.startswith("Drawn polygon 1")]
    assert line.startswith(answer_line(lattice, "Drawn polygon 1")), line
    assert lattice["estimate"] != pytest.approx(by_area["estimate"])
    ok(released.number_input(key=f"_w_interval_precision_{rid}").set_value(None).run())


def test_the_curators_coordinate_precision_reaches_the_record_and_the_interval() -> None:
    """The Data step's "Coordinates are rounded to … degrees" (a public fact) is recorded in release.json and
    design.json, and pre-fills the polygon section's precision, which the answers then use."""
    at = ok(AppTest.from_file(APP, default_timeout=240).run())
    ok(at.number_input(key="_w_coordinate_precision").set_value(0.001).run())
    step(at, "plan")
    ok(at.selectbox(key="_w_mechanism").set_value("ug").run())
    step(at, "release")
    ok(at.button(key=release_widget_key("release_button", at.session_state)).click().run())
    entry = at.session_state["releases"][0]
    rec = json.loads(entry.exports["files"]["release.json"])
    assert rec["data_users"]["coordinate_precision"]["degrees"] == 0.001
    rid = entry.release.release_id
    assert at.number_input(key=f"_w_interval_precision_{rid}").value == 0.001
    files = entry.exports["files"]
    assert json.loads(files["design.json"])["coordinate_precision"] == 0.001
    ok(at.toggle(key=f"_w_interval_draw_{rid}").set_value(True).run())
    _draw(at, [LASSO])
    [line] = [m.value for m in at.markdown if m.value.startswith("Drawn polygon 1")]
    assert "lattice shares at precision 0.001°" in line
