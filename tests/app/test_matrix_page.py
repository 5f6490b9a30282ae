"""AppTest of the matrix mechanism (Eigen-Design) in the points workflow: choose it on the
Mechanism page, see its data-free RMSE / lower-bound table, release, export the workload answers."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

APP = "../../app.py"  # relative to this file


def _goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"app_pages/{page}.py").run()
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
    assert at.button(key="release_button").disabled


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

    at.button(key="release_button").click().run()
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
