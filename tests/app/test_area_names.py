"""Issue 26, items 2 and 4 in the app: an uploaded trips file and its area list are guessed right
(no count column from ``passenger_count``; levels borough then zone; ``Zone`` as names), and uploaded
areas are shown by name (the area list's name column, else the boundary file's NAME) on maps, hovers,
the treemap, tables and the GeoJSON ``name``, the codes staying in the code columns."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from app_steps import counties_csv, data_step, frame_with, ok, step
from streamlit.testing.v1 import AppTest

from dpcore.areas.export import level_geojson
from ui.state import release_widget_key

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "assets" / "demo"
LOOKUP = DEMO / "boundaries" / "nyc_taxi_zone_lookup.csv"


def charts(at: AppTest) -> str:
    return "\n".join(c.proto.spec for c in at.get("plotly_chart"))


def trips_csv(n: int = 3000) -> bytes:
    """The first ``n`` green taxi trips with every column (passenger_count among them)."""
    return pd.read_csv(DEMO / "od" / "nyc_green_taxi_trips_2020-04.csv.gz", dtype=str, nrows=n).to_csv(
        index=False).encode()


def test_uploaded_taxi_trips_are_guessed_right_and_zones_shown_by_name() -> None:
    at = data_step("flows")
    at.radio(key="_w_od_source").set_value("upload").run()
    at.file_uploader(key="od_upload").set_value(("green.csv", trips_csv(), "text/csv")).run()
    at.file_uploader(key="od_areas_upload").set_value(("lookup.csv", LOOKUP.read_bytes(), "text/csv")).run()
    ok(at)
    # one trip per row: passenger_count is not a count of trips
    assert at.radio(key="_w_od_set_trips_kind").value == "trips"
    assert (at.selectbox(key="_w_od_set_trips_origin").value,
            at.selectbox(key="_w_od_set_trips_destination").value) == ("PULocationID", "DOLocationID")
    # 7 boroughs, then 265 zones; Zone names the zones; service_zone (not nested) is no level
    assert at.multiselect(key="_w_od_set_areas_levels").value == ["Borough", "LocationID"]
    assert at.selectbox(key="_w_od_set_areas_name_1").value == "Zone"
    assert any("7 Boroughs, 265 zones (LocationID)" in s.value for s in at.success), [s.value for s in at.success]
    preview = frame_with(at, "LocationID code")  # names in the table, codes in the code column
    assert (preview["LocationID"] != preview["LocationID code"]).all()
    h = at.session_state["od_model"]["h"]
    assert dict(zip(h.labels(2), h.display_names(2), strict=True))["1"] == "Newark Airport"
    # without a name column, the boundary file's names (its 'zone' column) by default
    lookup = pd.read_csv(LOOKUP, dtype=str).drop(columns=["Zone"])
    at.file_uploader(key="od_areas_upload").set_value(
        ("lookup2.csv", lookup.to_csv(index=False).encode(), "text/csv")).run()
    ok(at)
    assert at.selectbox(key="_w_od_set_areas_name_1").value == "(from the boundary file)"
    at.file_uploader(key="od_bounds_2").set_value(
        ("zones.geojson", (DEMO / "boundaries" / "nyc_taxi_zones.geojson").read_bytes(), "application/json")).run()
    ok(at)
    h = at.session_state["od_model"]["h"]
    names = dict(zip(h.labels(2), h.display_names(2), strict=True))
    assert names["74"] == "East Harlem North" and names["264"] == "264"  # no boundary: the code
    step(at, "release")
    at.button(key=release_widget_key("od_release_button", at.session_state)).click().run()
    ok(at)
    spec = charts(at)
    assert "East Harlem North" in spec or "Central Harlem" in spec  # hovers and axes by name


def test_uploaded_counties_are_named_from_their_boundary_files() -> None:
    at = data_step("areas")
    at.radio(key="_w_hier_source").set_value("upload").run()
    at.file_uploader(key="hier_upload").set_value(("counties.csv", counties_csv(), "text/csv")).run()
    at.radio(key="_w_hier_area_source").set_value("table").run()
    ok(at)
    assert at.multiselect(key="w_levels").value == ["STATEFP", "COUNTYFP"]
    assert at.selectbox(key="w_names_COUNTYFP").value == "(from the boundary file)"
    for lv, f in (("STATEFP", "us_states_2010_20m.geojson"), ("COUNTYFP", "us_counties_2010_20m_fips.geojson")):
        at.file_uploader(key=f"hier_bounds_{lv}").set_value((f, (DEMO / "boundaries" / f).read_bytes(),
                                                               "application/json")).run()
        ok(at)
    h = at.session_state["hier_model"]["h"]
    assert dict(zip(h.labels(1), h.display_names(1), strict=True))["48"] == "Texas"
    assert dict(zip(h.labels(2), h.display_names(2), strict=True))["48/201"] == "Harris"
    step(at, "release")
    at.button(key=release_widget_key("hier_release_button", at.session_state)).click().run()
    ok(at)
    [tree] = [json.loads(c.proto.spec) for c in at.get("plotly_chart") if '"treemap"' in c.proto.spec]
    assert "Texas" in tree["data"][0]["labels"] and "48" not in tree["data"][0]["labels"]
    rel = at.session_state["hier_release"].release
    joins = at.session_state["hier_model"]["joins"]
    feats = json.loads(level_geojson(rel, joins["COUNTYFP"]))["features"]
    harris = next(f["properties"] for f in feats if f["properties"]["code"] == "48/201")
    assert harris["name"] == "Harris"
