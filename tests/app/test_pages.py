"""Headless tests of the Streamlit app, page by page, with Streamlit's AppTest.

AppTest runs the scripts without a browser: it checks what each page shows and
what it stores in the session, not whether a map actually draws (see
tests/e2e for that). The app starts with the 100,000-point demo dataset.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
from app_steps import in_order
from points_helpers import levels_of
from streamlit.testing.v1 import AppTest

from dpcore import catalog
from dpcore.core.record import validate_record
from dpcore.data.synthetic import DEMO_NAME
from dpcore.points import export
from ui.state import release_widget_key

APP = "../../app.py"  # relative to this file
NYC_CORE = (-74.06, 40.56, -73.70, 40.92)  # west, south, east, north


# ------------------------------------------------------------------ helpers


def points_csv(n: int, *, seed: int = 1, n_missing: int = 0) -> bytes:
    """A CSV of n points inside the NYC core bounds, plus n_missing rows with a missing coordinate."""
    rng = np.random.default_rng(seed)
    w, s, e, no = NYC_CORE
    lat = rng.uniform(s + 0.01, no - 0.01, n)
    lon = rng.uniform(w + 0.01, e - 0.01, n)
    lines = ["lat,lon"] + [f"{a:.6f},{b:.6f}" for a, b in zip(lat, lon, strict=True)]
    lines += ["40.7," if i % 2 else ",-73.9" for i in range(n_missing)]
    return ("\n".join(lines) + "\n").encode()


def sidebar_text(at: AppTest) -> str:
    parts = [m.value for m in at.sidebar.markdown] + [c.value for c in at.sidebar.caption]
    parts += [p.proto.text for p in at.sidebar.get("progress")]
    return "\n".join(parts)


def texts(elements) -> list[str]:
    return [e.value for e in elements]


def plotly_specs(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def upload(at: AppTest, name: str, data: bytes, mime: str = "text/csv") -> AppTest:
    at.file_uploader(key="points_upload").set_value((name, data, mime)).run()
    assert not at.exception, at.exception
    return at


def number_input(at: AppTest, label_start: str):
    matches = [n for n in at.number_input if n.label.startswith(label_start)]
    assert len(matches) == 1, [n.label for n in at.number_input]
    return matches[0]


# the old page names of the points path, as steps of the one path
STEP = {"data": "data", "mechanism": "plan", "plan": "plan", "map": "release", "errors": "release",
        "release": "release", "export": "export", "compare": "compare", "history": "history"}


def goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"pages/{STEP[page]}.py").run()
    assert not at.exception, at.exception
    return at


def choose(at: AppTest, mechanism: str) -> AppTest:
    """Pick ``mechanism`` on the Plan step (a new session starts with auto)."""
    goto(at, "plan")
    at.selectbox(key="_w_mechanism").set_value(mechanism).run()
    assert not at.exception, at.exception
    return at


def release(at: AppTest) -> AppTest:
    """Release with the Plan step's current settings (defaults: auto, ε = 0.5; tests that check UG's
    numbers choose UG first)."""
    goto(at, "release")
    button = at.button(key=release_widget_key("release_button", at.session_state))
    assert button.label.startswith("Release with ε = "), button.label
    button.click().run()
    assert not at.exception, at.exception
    return at


@pytest.fixture
def at() -> AppTest:
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    assert not app.exception, app.exception
    return app


# ------------------------------------------------------------------ start / Data page


def test_start_shows_demo_data_and_offline_extent_map(at):
    assert [t.value for t in at.title] == ["Data"]
    side = sidebar_text(at)
    assert DEMO_NAME in side
    assert "100,000 rows kept of 100,000 read" in side
    assert "spent ε = 0 of 1" in side
    assert "Nothing released yet." in side
    assert at.session_state["dataset"].is_demo
    extent = [el for el in at.get("plotly_chart") if el.proto.id.endswith("-extent_map")]
    assert len(extent) == 1
    spec = json.loads(extent[0].proto.spec)
    assert spec["layout"]["map"]["style"] == "white-bg"
    # not an empty box (issue 17): the demo's context, the NYC boroughs, under the area's outline
    from ui.kinds.points.data import NYC_BOROUGHS

    if not NYC_BOROUGHS.exists():
        pytest.skip("the shared NYC borough boundaries are not here")
    layers = spec["layout"]["map"]["layers"]
    assert len(layers) == 2 and len(layers[0]["source"]["features"]) == 5  # five boroughs, then the outline
    assert len(json.dumps(layers[0]["source"])) < 300_000  # simplified: cheap to send
    assert any("New York City boroughs" in c for c in texts(at.caption))


def test_upload_valid_csv_replaces_dataset(at):
    upload(at, "pickups.csv", points_csv(1234))
    assert not at.error
    ds = at.session_state["dataset"]
    assert ds.name == "pickups.csv" and not ds.is_demo and ds.table.n_kept == 1234
    side = sidebar_text(at)  # redrawn in the same interaction, not one step late
    assert "**pickups.csv**" in side
    assert "1,234 rows kept of 1,234 read" in side
    assert DEMO_NAME not in side
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {"Rows read": "1,234", "Rows kept": "1,234", "Rows dropped": "0"}


BAD_UPLOADS = {
    "empty": ("empty.csv", b"", ["empty", "0 bytes"]),
    "header only": ("header.csv", b"lat,lon\n", ["header but no data rows"]),
    "non-numeric": (
        "text.csv",
        b"lat,lon\n40.7,-73.9\nabc,-73.95\n40.8,-73.95\n",
        ["'lat'", "not a number", "data row 2", "abc"],
    ),
    "out of range": (
        "range.csv",
        b"lat,lon\n40.7,-73.9\n140.7,-73.9\n",
        ["'lat'", "outside -90..90", "data row 2", "140.7"],
    ),
    "png renamed csv": (
        "picture.csv",
        b"\x89PNG\r\n\x1a\n" + bytes(64),
        ["'picture.csv'", "not a text CSV", "PNG image"],
    ),
}


@pytest.mark.parametrize("case", list(BAD_UPLOADS))
def test_bad_upload_shows_error_and_keeps_earlier_dataset_and_release(at, case):
    upload(at, "good.csv", points_csv(500))
    release(at)
    before_fp = at.session_state["dataset"].fingerprint
    before_releases = list(at.session_state["releases"])
    spent = sidebar_text(at)
    assert "spent ε = 0.5 of 1" in spent

    goto(at, "data")
    name, data, fragments = BAD_UPLOADS[case]
    upload(at, name, data)

    errors = texts(at.error)
    assert len(errors) == 1, errors
    for frag in fragments:
        assert frag in errors[0], (frag, errors[0])
    assert "Your earlier dataset and releases are kept." in texts(at.caption)
    # no green "Read N rows" above the red error: the status says the file could not be used
    labels = [s.label for s in at.status]
    assert labels == [f"Could not use {name}"], labels
    ds = at.session_state["dataset"]
    assert ds.name == "good.csv" and ds.fingerprint == before_fp
    assert at.session_state["releases"] == before_releases
    side = sidebar_text(at)
    assert "500 rows kept of 500 read" in side
    assert "spent ε = 0.5 of 1" in side
    assert "Nothing released yet." not in side


def test_upload_without_coordinate_columns_asks_for_them_and_keeps_dataset(at):
    upload(at, "good.csv", points_csv(300))
    upload(at, "names.csv", b"name,city\nfoo,bar\nbaz,qux\n")
    # not an error: the curator is asked to pick the columns
    warnings = texts(at.warning)
    assert any("No latitude/longitude columns were recognised" in w and "names.csv" in w
               for w in warnings), warnings
    assert at.session_state["dataset"].name == "good.csv"
    assert "300 rows kept of 300 read" in sidebar_text(at)
    # no green "Read 2 rows" over the old data, no column pre-selected as coordinates, and the data still
    # in use named (issue 26, item 10)
    [status] = [t for k, t in in_order(at.main) if k == "Status" and "names.csv" in t]
    assert "no latitude and longitude columns were recognised" in status
    assert any("the data in use (below and in the sidebar) is still 'good.csv'" in w for w in warnings)
    lat = next(b for b in at.selectbox if b.label == "Latitude column")
    assert lat.value is None
    at.button(key="FormSubmitter:columns-Use these columns").click().run()
    assert not at.exception
    assert texts(at.error) == ["Choose the latitude and the longitude column above: none was recognised by its name."]
    # picking text columns as coordinates is refused with a clear error
    next(b for b in at.selectbox if b.label == "Latitude column").set_value("name")
    next(b for b in at.selectbox if b.label == "Longitude column").set_value("city")
    at.button(key="FormSubmitter:columns-Use these columns").click().run()
    assert not at.exception
    errors = texts(at.error)
    assert len(errors) == 1 and "'name'" in errors[0] and "not numbers" in errors[0], errors
    assert at.session_state["dataset"].name == "good.csv"
    assert "300 rows kept of 300 read" in sidebar_text(at)


def test_rows_with_missing_coordinates_are_dropped_and_counted(at):
    upload(at, "gaps.csv", points_csv(300, n_missing=7))
    assert not at.error
    assert at.session_state["dataset"].name == "gaps.csv"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {"Rows read": "307", "Rows kept": "300", "Rows dropped": "7"}
    assert "Dropped: 7 missing coordinate" in texts(at.caption)
    side = sidebar_text(at)
    assert "300 rows kept of 307 read" in side
    assert "Dropped: 7 missing coordinate" in side


def _with_text_coordinates(n: int) -> bytes:
    """points_csv(300) with 3 rows whose latitude is text."""
    lines = points_csv(n).decode().splitlines()
    for i in (5, 50, 200):
        lines[i] = "foo," + lines[i].split(",")[1]
    return ("\n".join(lines) + "\n").encode()


def test_text_coordinates_refused_then_left_out_on_request(at):
    upload(at, "good.csv", points_csv(300))
    upload(at, "texty.csv", _with_text_coordinates(300))
    errors = texts(at.error)
    assert len(errors) == 1 and "Column 'lat' has 3 values that are not numbers" in errors[0], errors
    # the earlier dataset stays until the curator chooses
    assert at.session_state["dataset"].name == "good.csv"
    [leave] = [b for b in at.button if b.label.startswith("Leave out")]
    assert leave.label == "Leave out the 3 rows whose coordinates are not numbers"
    assert at.session_state["dataset"].name == "good.csv"
    leave.click().run()
    assert not at.exception and not at.error
    assert at.session_state["dataset"].name == "texty.csv"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {"Rows read": "300", "Rows kept": "297", "Rows dropped": "3"}
    assert "Dropped: 3 coordinate not a number" in texts(at.caption)
    assert not [b for b in at.button if b.label.startswith("Leave out")]
    # the columns form reads this file the same way
    at.button(key="FormSubmitter:columns-Use these columns").click().run()
    assert not at.exception and not at.error
    assert at.session_state["dataset"].table.n_kept == 297


def test_no_leave_out_button_when_another_problem_remains(at):
    lines = _with_text_coordinates(300).decode().splitlines()
    lines[9] = "95.0," + lines[9].split(",")[1]  # out of range: refused with or without the option
    upload(at, "worse.csv", ("\n".join(lines) + "\n").encode())
    assert len(at.error) == 1 and "not numbers" in at.error[0].value
    assert not [b for b in at.button if b.label.startswith("Leave out")]
    assert at.session_state["dataset"].name == DEMO_NAME


def test_typed_bounds_with_west_not_below_east_are_refused(at):
    before = at.session_state["bounds"]
    at.radio(key="_w_bounds_how").set_value("Numbers I type").run()
    assert not at.exception and not at.error
    assert number_input(at, "West").value == pytest.approx(before.west)
    number_input(at, "West").set_value(-73.0).run()  # east is -73.70
    assert not at.exception
    errors = texts(at.error)
    assert len(errors) == 1 and "West (-73.0) must be smaller than east (-73.7)" in errors[0], errors
    assert "The earlier area is kept." in texts(at.caption)
    assert at.session_state["bounds"] == before
    # the extent map still shows the earlier (valid) area
    assert plotly_specs(at)[0]["layout"]["map"]["style"] == "white-bg"
    # a valid west is accepted
    number_input(at, "West").set_value(-74.0).run()
    assert not at.error
    assert at.session_state["bounds"].west == pytest.approx(-74.0)


def test_two_edits_in_a_row_both_take_effect(at):
    """Regression: widgets whose default came from the state they wrote dropped the 2nd edit."""
    number_input(at, "Grid rows").set_value(512).run()
    number_input(at, "Grid rows").set_value(256).run()
    number_input(at, "Grid columns").set_value(300).run()
    number_input(at, "Grid columns").set_value(200).run()
    assert at.session_state["grid_shape"] == (256, 200)
    at.radio(key="_w_bounds_how").set_value("Numbers I type").run()
    number_input(at, "North").set_value(40.90).run()
    number_input(at, "North").set_value(40.85).run()
    assert at.session_state["bounds"].north == pytest.approx(40.85)
    # leaving the page and coming back shows the stored values, not the defaults
    goto(at, "mechanism")
    goto(at, "data")
    assert number_input(at, "Grid rows").value == 256
    assert number_input(at, "Grid columns").value == 200


def test_upload_error_is_cleared_by_the_demo_button(at):
    upload(at, "empty.csv", b"")
    assert len(at.error) == 1
    at.button[0].click().run()  # "Use the demo dataset"
    assert not at.exception
    assert not at.error
    assert at.session_state["dataset"].name == DEMO_NAME


# ------------------------------------------------------------------ Mechanism & budget


@pytest.mark.parametrize("mechanism", ["ug", "identity", "uniform", "privelet", "htf", "ag", "quadtree", "kdtree",
                                       "privtree", "dawa", "privtree_ag"])
def test_expected_error_table_before_release(at, mechanism):
    goto(at, "mechanism")
    at.selectbox(key="_w_mechanism").set_value(mechanism).run()
    assert not at.exception and not at.error
    assert at.session_state["mechanism"] == mechanism
    assert len(at.dataframe) == 1
    table = at.dataframe[0].value
    assert {"level", "ε", "counts released", "± per count (95%)"} <= set(table.columns)
    assert len(table) >= 1
    # the level budgets add up to the ε of the release
    assert table["ε"].sum() == pytest.approx(0.5)
    assert (table["± per count (95%)"] > 0).all()
    assert any("Each released count is off by at most" in m for m in texts(at.markdown))
    # nothing spent, nothing released by looking
    assert at.session_state["releases"] == []
    assert "spent ε = 0 of 1" in sidebar_text(at)
    goto(at, "release")  # the Release step releases what the plan says
    assert at.button(key=release_widget_key("release_button", at.session_state)).label.startswith("Release with ε = 0.5")
    assert at.session_state["releases"] == []


def test_release_spends_once_and_rerun_keeps_the_noise(at):
    choose(at, "ug")
    release(at)
    releases = at.session_state["releases"]
    assert len(releases) == 1
    rel = releases[0].release
    noisy = rel.noisy.copy()
    assert rel.mechanism == "ug"
    assert any(s.startswith("Released UG") and "ε = 0.5 of 1 is left" in s for s in texts(at.success))
    side = sidebar_text(at)
    assert "spent ε = 0.5 of 1 · left 0.5" in side
    assert "#1 UG" in side

    for _ in range(2):  # plain reruns and a page round trip draw no new noise
        at.run()
        assert not at.exception
    goto(at, "map")
    goto(at, "mechanism")
    releases = at.session_state["releases"]
    assert len(releases) == 1
    assert releases[0].release.release_id == rel.release_id
    np.testing.assert_array_equal(releases[0].release.noisy, noisy)
    ledger = next(iter(at.session_state["ledgers"].values()))
    assert ledger.spent == pytest.approx(0.5)
    assert len(ledger.entries) == 1
    assert "spent ε = 0.5 of 1 · left 0.5" in sidebar_text(at)


def test_release_over_the_cap_is_refused(at):
    goto(at, "mechanism")
    number_input(at, "Budget cap").set_value(0.2).run()
    assert not at.exception
    goto(at, "release")
    button = at.button(key=release_widget_key("release_button", at.session_state))
    assert button.disabled
    assert button.label == "Not enough budget: ε = 0.5 asked, 0.2 left"
    assert any("more than the 0.2 left of the budget" in w for w in texts(at.warning))
    assert at.session_state["releases"] == []
    ledger = next(iter(at.session_state["ledgers"].values()))
    assert ledger.spent == 0 and ledger.cap.value == pytest.approx(0.2)


def test_second_release_over_the_remaining_budget_is_refused(at):
    release(at)
    goto(at, "plan")
    number_input(at, "Privacy budget of this release").set_value(0.6).run()
    assert not at.exception
    goto(at, "release")
    button = at.button(key=release_widget_key("release_button", at.session_state))
    assert button.disabled and button.label.startswith("Not enough budget: ε = 0.6 asked, 0.5 left")
    assert len(at.session_state["releases"]) == 1


def test_budget_cap_can_be_changed_twice_in_a_row(at):
    # regression: without a widget key, the cap's widget identity followed its default
    # value, so the second of two consecutive edits was silently dropped
    goto(at, "mechanism")
    number_input(at, "Budget cap").set_value(0.2).run()
    number_input(at, "Budget cap").set_value(0.8).run()
    ledger = next(iter(at.session_state["ledgers"].values()))
    assert ledger.cap.value == pytest.approx(0.2)  # lowering is immediate, raising waits for confirmation
    assert any("Raise the cap" in w for w in texts(at.warning))
    next(b for b in at.button if b.label == "Raise the cap").click().run()
    assert ledger.cap.value == pytest.approx(0.8)
    assert [(c.old.value, c.new.value) for c in ledger.cap_changes] == [(1.0, 0.2), (0.2, 0.8)]
    goto(at, "release")
    assert at.button(key=release_widget_key("release_button", at.session_state)).label.startswith("Release with ε = 0.5")


# ------------------------------------------------------------------ Map


def test_release_step_before_release_shows_no_map(at):
    goto(at, "release")
    assert [t.value for t in at.title] == ["Release"]
    assert "Nothing has been released from this data yet." in texts(at.caption)
    links = at.get("page_link")
    assert [link.proto.page for link in links] == ["plan"]
    assert at.get("plotly_chart") == []
    assert not at.dataframe


def test_map_after_release_is_an_offline_full_resolution_image(at):
    choose(at, "ug")
    release(at)  # a UG release: a grid density
    goto(at, "map")
    assert not at.info
    specs = [json.loads(el.proto.spec) for el in at.get("plotly_chart") if el.proto.id.endswith("-release_map")]
    assert len(specs) == 1
    spec = specs[0]
    assert [tr["type"] for tr in spec["data"]] == ["scattermap"]  # the invisible hover layer
    assert spec["layout"]["map"]["style"] == "white-bg"
    images = [lay for lay in spec["layout"]["map"]["layers"] if lay["sourcetype"] == "image"]
    assert images and all(lay["source"].startswith("data:image/png;base64,") for lay in images)
    assert any("released areas" in c and "full resolution" in c and "1,024 × 1,024" in c
               for c in texts(at.caption))


# ------------------------------------------------------------------ Errors


def test_errors_after_release(at):
    choose(at, "ug")
    release(at)
    rel = at.session_state["releases"][-1].release
    goto(at, "errors")
    assert not at.info
    subheaders = texts(at.subheader)
    assert "Expected error per level (from the mechanism, publishable)" in subheaders
    assert any("Not for publication" in s for s in subheaders)
    expected, empirical = (d.value for d in at.dataframe)
    assert list(expected["level"]) == [lv.name for lv in rel.levels]
    assert expected["ε"].sum() == pytest.approx(0.5)
    assert list(empirical["query size"])[:3] == ["2%", "6%", "10%"]  # then an "all" row
    assert (empirical["queries"][:3] == 500).all()
    assert {"MRE (%)", "MAE", "RMSE", "expected noise SD"} <= set(empirical.columns)
    assert np.isfinite(empirical["MRE (%)"]).all()


# ------------------------------------------------------------------ Export


def test_export_before_release(at):
    goto(at, "export")
    assert texts(at.info) == ["Nothing has been released from this data yet."]
    assert not at.download_button


def test_export_after_release_files_agree(at):
    choose(at, "ug")
    release(at)
    goto(at, "export")
    assert not at.info
    # (the clamped file, offered when some counts are negative, is post-processing: tested on its own)
    labels = [b.label for b in at.download_button if not b.label.startswith("Download release_clamped.csv")]
    users = ["measurements.csv", "design.json", "estimates.csv", "replicates.csv", "deployment.yaml", "review.html"]
    assert labels == ["Download release.csv", "Download release.geojson", "Download release.json",
                      *(f"Download {n}" for n in users), "Download release.toml"]  # + data users' files (issue 25)
    assert any("**measurements.csv**: every noisy measurement before post-processing" in m.value for m in at.markdown)
    # the config of the click-made release names what was released
    import tomllib

    [code] = [c for c in at.code if c.value.lstrip("#").strip() and 'release = "points"' in c.value]
    cfg = tomllib.loads(code.value)
    rel0 = at.session_state["releases"][-1].release
    assert cfg["mechanism"]["name"] == rel0.mechanism == "ug"
    assert cfg["budget"]["epsilon"] == rel0.cost.value
    assert cfg["domain"]["grid"] == [rel0.grid.rows, rel0.grid.cols]
    assert cfg["domain"]["bounds"] == list(rel0.grid.bounds.as_tuple())

    # AppTest cannot read the bytes behind a download button: build the same files
    entry = at.session_state["releases"][-1]
    rel = entry.release
    ledger = next(iter(at.session_state["ledgers"].values()))
    csv = pd.read_csv(io.BytesIO(export.release_csv(rel)))
    geo = json.loads(export.release_geojson(rel))
    record = json.loads(export.release_json(rel, ledger))
    validate_record(record)

    assert list(csv.columns) == export.CSV_COLUMNS
    assert geo["type"] == "FeatureCollection"
    assert len(csv) == len(geo["features"]) == rel.n_rects == record["outputs"]["n_rectangles"]
    assert [f["id"] for f in geo["features"]] == csv["id"].tolist()
    np.testing.assert_array_equal(csv["noisy_count"].to_numpy(), rel.noisy)
    np.testing.assert_array_equal(
        [f["properties"]["noisy_count"] for f in geo["features"]], csv["noisy_count"].to_numpy()
    )
    assert record["release_id"] == rel.release_id
    assert record["mechanism"]["name"] == "ug"
    assert record["outputs"]["n_leaves"] == int(csv["leaf"].sum())
    assert record["ledger"]["spent"] == pytest.approx(0.5)
    # the page serves the files made once, with the release: the same tables, and the record
    # whose ledger is the one as of the charge
    served = entry.exports["files"]
    assert list(served) == ["release.csv", "release.geojson", "release.json", "measurements.csv", "design.json",
                            "estimates.csv", "replicates.csv", "deployment.yaml", "review.html"]  # + issue 25's files
    assert served["release.csv"] == export.release_csv(rel)
    assert json.loads(served["release.json"])["ledger"] == record["ledger"]


def test_zcdp_release_shows_the_approx_dp_reading_and_locks_the_definition(at):
    from dpcore.privacy import budget

    choose(at, "ug")  # auto is for pure ε-DP only
    fp = at.session_state["dataset"].fingerprint
    at.radio(key=f"definition_{fp}").set_value("zcdp").run()
    assert not at.exception
    led = at.session_state["ledgers"][fp]
    assert led.definition == "zcdp"
    infos = texts(at.info)
    assert any("Read as (ε, δ)-DP with δ = 1e-06" in i for i in infos), infos
    expected = budget.zcdp_to_approx_dp(0.25, 1e-6)  # the default: half the default cap ρ = 0.5
    assert any(f"this release is ε = {expected:.2g}" in i for i in infos), (expected, infos)
    goto(at, "release")
    button = at.button(key=release_widget_key("release_button", at.session_state))
    assert button.label.startswith("Release with ρ = 0.25"), button.label
    button.click().run()
    assert not at.exception
    rel = at.session_state["releases"][-1].release
    assert rel.cost.definition == "zcdp" and rel.cost.value == pytest.approx(0.25)
    assert all(lv.noise == "discrete_gaussian" for lv in rel.levels)
    assert "spent ρ = 0.25 of 0.5" in sidebar_text(at)
    goto(at, "plan")
    assert at.radio(key=f"definition_{fp}").disabled
    rec = json.loads(export.release_json(rel, led))
    validate_record(rec)
    assert rec["privacy"]["definition"] == "rho-zCDP"


def test_htf_release_has_depth_slider_tree_stats_and_stop_probabilities(at):
    goto(at, "mechanism")
    at.selectbox(key="_w_mechanism").set_value("htf").run()
    assert not at.exception and not at.error
    release(at)
    rel = at.session_state["releases"][-1].release
    assert rel.mechanism == "htf" and rel.is_tree
    goto(at, "map")
    height = int(rel.level.max())
    slider = at.slider[0]
    assert slider.label == "Tree depth shown" and slider.value == height and slider.max == height
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Height"] == str(height)
    assert metrics["Leaves"] == f"{int(rel.leaf.sum()):,}"
    stats = at.dataframe[0].value
    assert list(stats["nodes"]) == np.bincount(rel.level).tolist()
    assert int(stats["leaves"].sum()) == int(rel.leaf.sum())
    # the deepest level shows the leaves; depth 0 shows the root alone
    spec = plotly_specs(at)[0]
    assert len(spec["data"][0]["geojson"]["features"]) == int(rel.leaf.sum())
    slider.set_value(0).run()
    assert not at.exception
    spec = plotly_specs(at)[0]
    assert len(spec["data"][0]["geojson"]["features"]) == 1
    assert "budget" in spec["data"][0]["hovertemplate"]
    assert any("at depth 0" in c for c in texts(at.caption))
    # errors: per-level budget, noise scale and the stop-test probability
    goto(at, "errors")
    stop = "chance that noise decides a split"
    expected = next(d.value for d in at.dataframe if stop in d.value.columns)
    depth_rows = expected[expected["level"].str.startswith("Depth")]
    assert len(depth_rows) == height + 1
    shown = [v for v in depth_rows[stop] if v != "–"]
    p = [0.0 if v == "< 0.1%" else float(v.rstrip("%")) / 100 for v in shown]
    assert len(p) > 0 and all(0 <= x <= 0.5 for x in p)
    assert "None" not in expected.astype(str).to_numpy()  # missing values are shown as "–"
    other = expected[~expected["level"].str.startswith("Depth")]
    assert (other[stop] == "–").all()


def test_zcdp_ledger_refuses_a_pure_only_mechanism_with_a_clear_message(at):
    choose(at, "ug")  # auto is for pure ε-DP only
    fp = at.session_state["dataset"].fingerprint
    at.radio(key=f"definition_{fp}").set_value("zcdp").run()
    at.selectbox(key="_w_mechanism").set_value("htf").run()
    assert not at.exception
    errors = texts(at.error)
    assert any("pure ε-DP only" in e for e in errors), errors
    goto(at, "release")
    assert any("pure ε-DP only" in e for e in texts(at.error))
    assert at.button(key=release_widget_key("release_button", at.session_state)).disabled


def test_typed_query_box_shows_its_expected_error_before_release(at):
    goto(at, "mechanism")
    at.selectbox(key="_w_mechanism").set_value("identity").run()
    number_input(at, "Query west").set_value(-74.0).run()
    number_input(at, "Query east").set_value(-73.9).run()
    number_input(at, "Query south").set_value(40.7).run()
    number_input(at, "Query north").set_value(40.8).run()
    assert not at.exception
    text = " ".join(m.value for m in at.markdown)
    assert "The box covers" in text and "exact" in text
    # identity: sqrt(cells) x per-cell SD, computed here independently of the page
    from dpcore.data.domain import Grid

    grid = Grid(at.session_state["bounds"], *at.session_state["grid_shape"])
    rows, cols, _ = grid.cell_index(np.array([-74.0, -73.9]), np.array([40.7, 40.8]))
    cells = int(rows[1] - rows[0] + 1) * int(cols[1] - cols[0] + 1)
    sd = levels_of(catalog.get("points", "identity"), grid, 0.5, {})[0].sd * cells ** 0.5
    assert f"covers {cells:,} cells" in text
    from scipy import special

    z95 = float(-special.ndtri(0.025))  # the normal 95 % z, derived here independently
    assert f"±{z95 * sd:,.0f} points" in text
    assert at.session_state["releases"] == []  # nothing spent


def test_the_release_that_uses_up_the_budget_is_confirmed_like_any_other(at):
    """Not a red refusal under a greyed button: the button says the budget is used up after it, and
    the confirmation says what was released, what it cost and that nothing is left."""
    choose(at, "ug")
    number_input(at, "Privacy budget of this release").set_value(1.0).run()
    goto(at, "release")
    button = at.button(key="release_button")
    assert not button.disabled and button.label == "Release with ε = 1 — the budget is used up after this"
    button.click().run()
    assert not at.exception and not at.error
    [ok] = [s for s in texts(at.success) if s.startswith("Released UG")]
    assert "with ε = 1" in ok and "The budget of this data is now used up." in ok
    assert "spent ε = 1 of 1" in sidebar_text(at)
    at.run()  # the next run: the button is replaced by a calm note under the confirmation, not an error
    assert not at.error and not at.warning
    assert any("used up" in c for c in texts(at.caption))


def test_a_success_reads_as_a_success_and_the_plan_warns_first(at):
    """Issue 26, item 6: after a release the confirmation comes first and the next release's state (a
    disabled "Not enough budget" button) after it, as a calm caption, not a warning; and the Plan step
    warns when the budget typed is more than what is left."""
    goto(at, "plan")
    number_input(at, "Privacy budget of this release (ε)").set_value(0.6).run()
    assert not [w for w in texts(at.warning) if "left of the cap" in w]  # nothing spent yet
    goto(at, "release")
    at.button(key=release_widget_key("release_button", at.session_state)).click().run()
    assert not at.exception, at.exception
    order = in_order(at.main)
    first_success = next(i for i, (k, _) in enumerate(order) if k == "Success")
    button = next(i for i, (k, t) in enumerate(order) if k == "Button" and t.startswith("Not enough budget"))
    assert first_success < button
    assert "ε = 0.4 of 1 is left" in order[first_success][1]
    assert not at.warning
    assert any("Another release with ε = 0.6 would need more than the 0.4 left" in c for c in texts(at.caption))
    goto(at, "plan")
    assert any("This release asks for ε = 0.6, more than the ε = 0.4 left of the cap" in w for w in texts(at.warning))


def test_after_a_release_its_map_and_errors_come_before_the_next_release(at):
    """shared/UX.md, "a success reads as a success": before any release the Release button is the step's
    primary button, first on the step; after one, the confirmation, then the map and the errors, and only
    then "Another release from this data" with a secondary button whose label still states the cost."""
    choose(at, "ug")
    number_input(at, "Privacy budget of this release (ε)").set_value(0.3).run()
    goto(at, "release")
    before = in_order(at.main)
    first = next(i for i, (k, _) in enumerate(before) if k == "Button")
    assert before[first][1] == "Release with ε = 0.3 — 0.7 left after this"
    button = at.button(key=release_widget_key("release_button", at.session_state))
    assert button.proto.type == "primary"
    assert not [t for _, t in before if "Another release" in t]
    button.click().run()
    assert not at.exception, at.exception
    order = in_order(at.main)

    def where(kind: str, start: str) -> int:
        return next(i for i, (k, t) in enumerate(order) if k == kind and t.startswith(start))

    success = where("Success", "Released UG")
    assert success < where("Subheader", "Map") < where("Subheader", "Errors") < where("Markdown", "###### Another")
    assert where("Markdown", "###### Another release") < where("Button", "Release with ε = 0.3 — 0.4 left after this")
    assert not [k for k, _ in order[:success] if k == "Button"]  # no button above the confirmation
    nxt = at.button(key=release_widget_key("release_button", at.session_state))
    assert nxt.label == "Release with ε = 0.3 — 0.4 left after this" and nxt.proto.type == "secondary"


def test_export_explains_negative_counts_and_offers_a_clamped_file(at):
    """Issue 26, item 9: the Export step says why negative counts are kept and offers the clamped file with
    its bias stated; the file is the leaves with count_clamped = max(count, 0)."""
    choose(at, "privtree")
    number_input(at, "Privacy budget of this release (ε)").set_value(0.1).run()  # much noise: negatives
    goto(at, "release")
    at.button(key=release_widget_key("release_button", at.session_state)).click().run()
    assert not at.exception, at.exception
    goto(at, "export")
    rel = at.session_state["releases"][-1].release
    n_neg = int((rel.noisy[rel.leaf] < 0).sum())
    assert n_neg > 0
    [why] = [m for m in texts(at.markdown) if "have a negative count" in m]
    assert f"{n_neg:,} of the {int(rel.leaf.sum()):,} released areas" in why and "right on average" in why
    assert any("biased upward" in c and "at most half its noise SD" in c for c in texts(at.caption))
    [dl] = [b for b in at.get("download_button") if b.proto.label.startswith("Download release_clamped.csv")]


def test_the_guess_of_the_number_of_points_says_it_is_not_taken_from_the_file(at):
    """Issue 26, item 10: for an upload the preview's guess stays a public figure the curator types (it is
    written into the published plan), and the page says why it is not the file's row count."""
    upload(at, "good.csv", points_csv(300))
    goto(at, "plan")
    assert number_input(at, "Rough number of points").value == 100_000
    assert any("The guess is not taken from your file" in c for c in texts(at.caption))


def test_release_step_offers_the_polygon_interval_and_the_use_level_line(at):
    """Issue 25 item 4 for points: the Release step offers the polygon upload and states the record's
    "use at level" line; the stored files answer a polygon (the library the page calls) with every leaf
    inside a box that covers the grid."""
    from dpcore.estimate.release_interval import ReleaseIntervals

    choose(at, "ug")
    release(at)
    cur = at.session_state["releases"][0]
    files = cur.exports["files"]
    g = json.loads(files["release.json"])["level_guidance"]
    assert g["threshold"] == 0.3 and g["statement"].startswith(("Use at level", "No level"))
    assert any(g["statement"] in c.value for c in at.caption)
    assert any("Upload a polygon" in str(getattr(u, "proto", "")) for u in at.get("file_uploader"))
    rel = cur.release
    b = rel.grid.bounds
    box = {"type": "Polygon", "coordinates": [[[b.west - 1, b.south - 1], [b.east + 1, b.south - 1],
                                               [b.east + 1, b.north + 1], [b.west - 1, b.north + 1],
                                               [b.west - 1, b.south - 1]]]}
    [r] = ReleaseIntervals(files).of_polygons(json.dumps(box).encode())
    assert r["cells_cut"] == 0 and r["cells_inside"] == len(json.loads(files["design.json"])["cells"])
    assert r["low"] < r["estimate"] < r["high"]


@pytest.mark.parametrize("kind, shown", [("flows", "60,000 trips"), ("areas", "4 regions, 36 districts, 576 zones")])
def test_a_link_naming_a_kind_opens_a_new_session_on_that_kind(kind, shown):
    """``?kind=`` on a page's URL picks the kind of a new session before its first run: the Data step
    draws that kind (not the points demo first); the curator can still change it there."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["kind"] = kind
    at.run()
    assert not at.exception, at.exception
    assert at.session_state["kind"] == kind
    assert at.radio(key="_w_kind").value == kind
    page_text = " ".join(e.value for e in [*at.markdown, *at.caption, *at.sidebar.markdown, *at.sidebar.caption])
    assert shown in page_text  # that kind's demo is loaded and drawn
    at.radio(key="_w_kind").set_value("points").run()
    assert at.session_state["kind"] == "points" and not at.exception
    assert at.query_params["kind"] in ("points", ["points"])  # the URL follows the choice: a reload opens points


def test_a_link_naming_an_unknown_kind_opens_the_points_step():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["kind"] = "nonsense"
    at.run()
    assert not at.exception, at.exception
    assert at.session_state["kind"] == "points"
