"""AppTest of the matrix mechanism (Eigen-Design) in the points workflow: choose it on the
Mechanism page, see its data-free RMSE / lower-bound table, release, export the workload answers."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from ui.state import release_widget_key

APP = "../../app.py"  # relative to this file


# the old page names of the points path, as steps of the one path
STEP = {"data": "data", "mechanism": "plan", "plan": "plan", "map": "release", "errors": "release",
        "release": "release", "export": "export", "compare": "compare", "history": "history"}

def _goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"pages/{STEP[page]}.py").run()
    assert not at.exception, at.exception
    return at


@pytest.fixture
def at() -> AppTest:
    app = AppTest.from_file(APP, default_timeout=120)
    app.run()
    assert not app.exception, app.exception
    return app


def _table(at: AppTest, column: str):
    found = [d.value for d in at.dataframe if column in d.value.columns]
    assert len(found) == 1, [list(d.value.columns) for d in at.dataframe]
    return found[0]


def test_large_grid_is_refused_with_a_clear_message(at: AppTest) -> None:
    _goto(at, "mechanism")  # the default grid is 1024 x 1024
    at.selectbox(key="_w_mechanism").set_value("matrix").run()
    assert not at.exception
    assert any("at most 65,536 cells" in e.value for e in at.error)
    _goto(at, "release")
    assert at.button(key=release_widget_key("release_button", at.session_state)).disabled


def test_choose_matrix_preview_release_and_export(at: AppTest) -> None:
    at.number_input(key="_w_grid_rows").set_value(16).run()
    at.number_input(key="_w_grid_cols").set_value(16).run()
    assert at.session_state["grid_shape"] == (16, 16)
    _goto(at, "mechanism")
    at.selectbox(key="_w_mechanism").set_value("matrix").run()
    assert not at.exception and not at.error
    assert at.selectbox(key="param_matrix_workload").value == "ranges_2d"
    # readable choices, and the random-rectangle settings only where they matter
    assert "all rectangles of the grid" in at.selectbox(key="param_matrix_workload").options
    assert not [w for w in at.number_input if w.key == "param_matrix_rect_count"]
    table = _table(at, "ratio to the bound")
    assert list(table.columns) == ["expected error per query (RMSE)", "lower bound (any strategy)",
                                   "ratio to the bound"]
    row = table.iloc[0]
    assert 0 < row["lower bound (any strategy)"] <= row["expected error per query (RMSE)"]
    assert row["ratio to the bound"] >= 1.0
    # pure ε (the default definition): the note on the L1 fallback strategy is shown
    assert any("L1 strategy" in w.value for w in at.warning)
    # another workload: random rectangles, still no data, nothing spent
    at.selectbox(key="param_matrix_workload").set_value("random_rectangles").run()
    assert [w for w in at.number_input if w.key == "param_matrix_rect_count"]
    assert not at.exception and not at.error
    assert _table(at, "ratio to the bound").iloc[0]["ratio to the bound"] >= 1.0
    assert at.session_state["releases"] == []

    _goto(at, "release")
    at.button(key=release_widget_key("release_button", at.session_state)).click().run()
    assert not at.exception, at.exception
    rels = at.session_state["releases"]
    assert len(rels) == 1
    rel = rels[0].release
    assert rel.mechanism == "matrix" and rel.n_rects == 256
    assert "workload_answers" in rel.details
    ledger = next(iter(at.session_state["ledgers"].values()))
    assert len(ledger.entries) == 1 and ledger.spent == pytest.approx(0.5)

    _goto(at, "export")
    assert not at.error
    assert at.get("download_button")
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Download workload_answers.csv" in labels
    preview = _table(at, "standard_error")
    assert {"answer", "standard_error", "ci95_low", "ci95_high"} <= set(preview.columns)
    assert len(preview) == 20
    assert any("Answers to the workload queries" in s.value for s in at.subheader)


NYC_RECTS = (
    b"name,lon_min,lat_min,lon_max,lat_max,weight,group\n"
    b"Lower Manhattan,-74.03,40.69,-73.96,40.76,1,Manhattan\n"
    b"Midtown,-74.01,40.74,-73.93,40.80,2,Manhattan\n"
    b"\"Brooklyn, south\",-74.05,40.57,-73.85,40.70,1,outer\n"
    b"Queens,-73.93,40.65,-73.70,40.80,1,outer\n"
    b"Bronx,-73.93,40.79,-73.75,40.95,1,outer\n"  # reaches north of the area: clipped
)


def test_uploaded_rectangles_preview_error_keeps_earlier_release_and_export(at: AppTest) -> None:
    at.number_input(key="_w_grid_rows").set_value(8).run()
    at.number_input(key="_w_grid_cols").set_value(8).run()
    _goto(at, "mechanism")
    at.selectbox(key="_w_mechanism").set_value("matrix").run()
    at.radio(key=next(r.key for r in at.radio if r.key.startswith("definition_"))).set_value("zcdp").run()
    at.selectbox(key="param_matrix_workload").set_value("uploaded").run()
    assert not at.exception
    # no rectangles yet: say what to upload, and nothing can be released
    assert any("Upload the rectangles" in i.value for i in at.info)
    assert any("once your rectangles are uploaded" in i.value for i in at.info) and not at.error
    _goto(at, "release")
    assert at.button(key=release_widget_key("release_button", at.session_state)).disabled
    _goto(at, "plan")

    at.file_uploader(key="matrix_rects_upload").set_value(("nyc.csv", NYC_RECTS, "text/csv")).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("5 rectangles from nyc.csv" in c.value for c in at.caption)
    assert any("clipped" in w.value and "data row 5" in w.value for w in at.warning)
    groups = next(d.value for d in at.dataframe if "worst SE" in d.value.columns and "queries" in d.value.columns)
    assert list(groups.iloc[:, 0]) == ["Manhattan", "outer"] and list(groups["queries"]) == [2, 3]
    comp = next(d.value for d in at.dataframe if "× this strategy" in d.value.columns)
    assert any("identity" in s for s in comp["strategy"]) and any("Gaussian on W" in s for s in comp["strategy"])
    assert any("No answer off by more than" in m.label for m in at.metric)
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert fig["layout"]["xaxis"]["type"] == "log"
    assert at.session_state["releases"] == []  # the preview spent nothing

    _goto(at, "release")
    at.button(key=release_widget_key("release_button", at.session_state)).click().run()
    assert not at.exception, at.exception
    rel = at.session_state["releases"][0].release
    assert rel.details["workload_answers"]["name"][2] == "Brooklyn, south"
    assert len(rel.params["rectangles"]) == 5

    # a broken file: the error names the row and the fix; the rectangles and the release stay
    _goto(at, "plan")
    bad = b"lon_min,lat_min,lon_max,lat_max\n-73.9,40.8,-74.0,40.9\n"
    at.file_uploader(key="matrix_rects_upload").set_value(("bad.csv", bad, "text/csv")).run()
    assert not at.exception
    assert any("data row 1" in e.value and "Swap" in e.value for e in at.error)
    assert any("Still using the 5 rectangles of nyc.csv" in c.value for c in at.caption)
    assert len(at.session_state["releases"]) == 1
    _goto(at, "release")
    assert not at.button(key=release_widget_key("release_button", at.session_state)).disabled  # the earlier rectangles can still be released

    _goto(at, "export")
    preview = _table(at, "standard_error")
    assert list(preview["name"]) == ["Lower Manhattan", "Midtown", "Brooklyn, south", "Queens", "Bronx"]
    assert {"lon_min", "lat_min", "lon_max", "lat_max", "group"} <= set(preview.columns)
    assert preview["lat_max"].iloc[4] == pytest.approx(40.95)
