"""Issue 26, item 1: a fresh clone offers every demo with its map context.

The app reads its real-data demos from the compact copies shipped in ``assets/demo`` (through
:func:`ui.demo_data.demo_file`), never from the public data folder beside the repository
(``../shared/data`` or ``DPCORE_SHARED_DATA``), which a fresh clone does not have.  These tests hide
that folder (the variable names a missing folder, and the app's modules are imported afresh so that
nothing read at import time survives), then load every demo the app offers and check that each demo
map has its boundaries.
"""

from __future__ import annotations

import json
import sys

import pytest
from app_steps import data_step, ok
from streamlit.testing.v1 import AppTest


@pytest.fixture
def fresh_clone(tmp_path, monkeypatch):
    """No public data folder beside the repository: ``DPCORE_SHARED_DATA`` names a missing folder
    and the app's modules are imported again under it (restored afterwards)."""
    monkeypatch.setenv("DPCORE_SHARED_DATA", str(tmp_path / "no-shared-data"))
    # and none of the resources an earlier test made: Streamlit keys a cache by the function's module,
    # name and source, so the re-imported modules would find them (tests/conftest.py keeps the shipped
    # geography between tests)
    import streamlit as st

    st.cache_resource.clear()
    saved = dict(sys.modules)
    for name in [n for n in sys.modules if n == "ui" or n.startswith(("ui.", "pages"))]:
        del sys.modules[name]
    yield
    for name in [n for n in sys.modules if n == "ui" or n.startswith(("ui.", "pages"))]:
        del sys.modules[name]
    sys.modules.update(saved)
    st.cache_resource.clear()  # nor do later tests get what the re-imported modules made


def map_layers(at: AppTest, key: str) -> list[dict]:
    """The outline layers of the map whose element key ends with ``key``."""
    [spec] = [json.loads(el.proto.spec) for el in at.get("plotly_chart") if el.proto.id.endswith(key)]
    return spec["layout"]["map"]["layers"]


def test_every_trips_demo_is_offered_and_loads_with_its_boundaries(fresh_clone) -> None:
    at = data_step("flows")
    assert at.radio(key="_w_od_source").options[:4] == [
        "Made-up demo (576 zones, 60,000 trips)",
        "NYC green taxi trips, April 2020 (boroughs and taxi zones)",
        "US county-to-county commuting, ACS 2009–2013 (states and counties)",
        "Rhode Island home-to-work commutes, LODES 2019 (state, counties, tracts, block groups, blocks)"]
    # every demo, its trips and the boundaries of its map levels (level -> features at least)
    expected = {"nyc": (35_612, {1: 5, 2: 263}), "us": (139_681_106, {1: 52, 2: 3_221}),
                "ri": (406_052, {2: 5, 3: 250})}
    for source, (total, bounds) in expected.items():
        at.radio(key="_w_od_source").set_value(source).run()
        ok(at)
        model = at.session_state["od_model"]
        assert model["counts"].total == total, source
        assert {d: len(f) for d, f in model["boundaries"].items()} == bounds, source
        assert map_layers(at, "od_extent_map"), source  # the Data step's map draws the outlines


def test_the_us_tracts_demo_is_offered_with_state_and_county_boundaries(fresh_clone) -> None:
    at = data_step("areas")
    assert "US census tracts 2020 (public Census Bureau counts, 85,395 tracts)" in at.radio(key="_w_hier_source").options
    at.radio(key="_w_hier_source").set_value("us").run()
    ok(at)
    m = at.session_state["hier_model"]
    assert int(m["counts"].leaf.sum()) == 334_735_155
    assert {lv: len(j.frame) for lv, j in m["joins"].items()} == {"STATEFP": 52, "COUNTYFP": 3_217}
    assert len(map_layers(at, "hier_extent_map")) == 2
    assert m["h"].display_names(1)[0] == "Alabama"  # names from the shipped lookup table


def test_the_uber_pickups_demo_loads_with_its_time_column_and_borough_outlines(fresh_clone) -> None:
    at = data_step("points")
    [uber] = [b for b in at.button if b.label.startswith("Use NYC Uber pickups")]
    uber.click().run()
    ok(at)
    ds = at.session_state["dataset"]
    assert ds.name == "NYC Uber pickups, April 2014 (every 4th)" and ds.table.n_read == 141_129
    assert "Date/Time" in at.session_state["upload_df"].columns  # for the series
    assert len(map_layers(at, "extent_map")[0]["source"]["features"]) == 5  # the five boroughs
    # the made-up demo, too, keeps its borough outlines
    [made_up] = [b for b in at.button if b.label == "Use the demo dataset"]
    made_up.click().run()
    ok(at)
    assert at.session_state["dataset"].is_demo
    assert map_layers(at, "extent_map")
