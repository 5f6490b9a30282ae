"""Headless tests of the Compare page (pages/compare.py) with Streamlit's AppTest.

The page is run through a small wrapper script that initialises the session as
app.py does (``points_state.init()``: the 100,000-point demo dataset, NYC bounds, a
1024 x 1024 grid) and then executes the page, so the page can be tested whether
or not app.py's navigation lists it yet.  When it does, the last test also
reaches it through the app.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dpcore import catalog

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "pages" / "compare.py"
WARNING_START = "Choosing a mechanism by its error on your real data is itself a use of the data"

WRAPPER = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from ui.kinds.points import state as points_state
points_state.init()
from ui import frame
with frame.framed():  # as app.py runs a page
    try:
        exec(compile(open({str(PAGE)!r}, encoding="utf-8").read(), {str(PAGE)!r}, "exec"))
    except frame.Stop:
        pass
"""


@pytest.fixture
def at() -> AppTest:
    app = AppTest.from_string(WRAPPER, default_timeout=120)
    app.run()
    assert not app.exception, app.exception
    return app


def small_settings(at: AppTest, mechs: list[str]) -> AppTest:
    at.multiselect(key="_w_compare_mechanisms").set_value(mechs)
    at.multiselect(key="_w_compare_epsilons").set_value([0.1, 0.5])
    at.multiselect(key="_w_compare_sizes").set_value([0.02, 0.1])
    at.number_input(key="_w_compare_queries").set_value(50)
    at.number_input(key="_w_compare_repeats").set_value(2)
    at.run()
    assert not at.exception, at.exception
    return at


def run(at: AppTest) -> AppTest:
    at.button(key="compare_run").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def test_page_before_anything_is_run(at: AppTest) -> None:
    assert [t.value for t in at.title] == ["Compare"]
    assert at.radio(key="_w_compare_source").value == "synthetic"  # the safe choice by default
    assert not at.warning
    # the demo's 1,024 x 1,024 grid: every mechanism but the matrix mechanism (at most 256 x 256) is
    # offered and chosen; that one is listed as not offered, with its reason
    runnable = [n for n in catalog.names("points") if n != "matrix"]
    box = at.multiselect(key="_w_compare_mechanisms")
    assert box.value == runnable
    assert list(box.options) == [catalog.get("points", n).title for n in runnable]
    assert {"privtree", "dawa", "htf"} <= set(box.value)
    refused = [c.value for c in at.caption if "Not offered" in c.value]
    assert len(refused) == 1
    assert catalog.get("points", "matrix").title in refused[0] and "256 × 256" in refused[0]
    assert at.multiselect(key="_w_compare_epsilons").value == [0.1, 0.3, 0.5]
    assert at.number_input(key="_w_compare_queries").value == 500
    assert at.number_input(key="_w_compare_repeats").value == 3
    assert not at.dataframe and not at.get("plotly_chart")
    assert any("Run the comparison" in i.value for i in at.info)
    assert "compare_result" not in at.session_state


def test_run_on_synthetic_stand_in(at: AppTest) -> None:
    small_settings(at, ["ug", "uniform"])
    at.selectbox(key="_w_compare_sigma").set_value(20).run()
    run(at)
    res = at.session_state["compare_result"]
    assert not res["real"] and "σ = 20" in res["data"]
    assert not at.warning
    assert [s.value for s in at.subheader] == ["Mechanisms compared on a synthetic stand-in"]
    tables = [d.value for d in at.dataframe]
    mre_tables = [t for t in tables if list(t.columns) == ["ε = 0.1", "ε = 0.5"] and "±" in str(t.iloc[0, 0])]
    assert len(mre_tables) == 2  # one per query size
    titles = [catalog.get("points", n).title for n in ("ug", "uniform")]
    assert list(mre_tables[0].index) == titles  # names, not codes (UX review)
    charts = at.get("plotly_chart")
    assert len(charts) == 1
    spec = json.loads(charts[0].proto.spec)
    assert {t["name"] for t in spec["data"]} == set(titles)
    assert "not for publication" not in spec["layout"]["title"]["text"]
    # the best per budget is marked, with a sentence on which to pick (issue 26, item 10)
    from dpcore.points import evaluate
    best = evaluate.best_per_epsilon(res["summary"])
    [line] = [m.value for m in at.markdown if m.value.startswith("**Best at each budget**")]
    for eps, name, _ in best:
        assert f"ε = {eps:.2g}: **{catalog.get('points', name).title}**" in line
    assert any("Pick the best at the ε you plan to release with" in c.value for c in at.caption)
    assert "Mechanism & budget" not in " ".join(m.value for m in at.markdown)
    # nothing spent: no ledger entry for the demo dataset
    assert all(not led.entries for led in at.session_state["ledgers"].values())
    # a rerun shows the stored results without recomputing them
    before = res["results"]["release_seconds"].tolist()
    at.run()
    assert not at.exception
    assert at.session_state["compare_result"]["results"]["release_seconds"].tolist() == before
    assert len(at.get("plotly_chart")) == 1


def test_the_pick_defaults_to_the_best_at_the_compared_epsilon_nearest_the_plan_steps(
        at: AppTest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The best differs between the compared ε, and the one nearest the Plan step's ε is not the first option."""
    from dpcore.points import evaluate
    from ui import compare_page

    planned = at.session_state["epsilon"] = 0.4  # the Plan step's ε
    # the best by ε, as best_per_epsilon gives it: uniform at 0.5, ug (the first option) at 0.1
    monkeypatch.setattr(evaluate, "best_per_epsilon", lambda summary: [(0.1, "ug", 3.0), (0.5, "uniform", 1.0)])
    assert compare_page.nearest_best(evaluate.best_per_epsilon(None), planned) == "uniform"
    small_settings(at, ["ug", "uniform"])
    run(at)
    pick = at.selectbox(key="compare_points_pick")
    assert pick.options[0] == catalog.get("points", "ug").title
    assert pick.value == "uniform"


def test_loaded_data_shows_warning_and_not_for_publication(at: AppTest) -> None:
    at.radio(key="_w_compare_source").set_value("loaded").run()
    assert not at.exception, at.exception
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 1 and warnings[0].startswith(WARNING_START)
    assert "treat the result as a privacy cost" in warnings[0]
    small_settings(at, ["ug", "identity"])
    run(at)
    assert at.session_state["compare_result"]["real"]
    assert any(s.value.startswith(":red[Not for publication]") for s in at.subheader)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert "not for publication" in spec["layout"]["title"]["text"]
    assert all(not led.entries for led in at.session_state["ledgers"].values())


def test_defaults_run_without_error_on_the_demo(at: AppTest) -> None:
    """The page's own defaults (every offered mechanism on the demo's 1,024 x 1,024 grid, ε
    0.1/0.3/0.5, 500 queries of each default size), with one repeat instead of the default three:
    a repeat runs the same releases again with fresh noise, and what this test is about, that each
    mechanism the page offers runs at its settings, shows in the first (the default of 3 repeats is
    checked in test_page_before_anything_is_run; two repeats and their standard error in
    test_run_on_synthetic_stand_in).  One repeat is a third of the releases."""
    at.number_input(key="_w_compare_repeats").set_value(1).run()
    assert not at.exception, at.exception
    run(at)
    res = at.session_state["compare_result"]
    assert not res["failures"] and not at.warning
    expected = [n for n in catalog.names("points") if n != "matrix"]
    assert list(dict.fromkeys(res["summary"]["mechanism"])) == expected
    assert len(res["summary"]) == len(expected) * 3 * 3  # mechanisms x ε x query sizes
    table = at.dataframe[0].value
    titles = [catalog.get("points", n).title for n in expected]
    assert list(table.index) == titles and "not run because" not in table.columns
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert {t["name"] for t in spec["data"]} == set(titles)


def test_smaller_grid_offers_the_matrix_mechanism() -> None:
    wrapper = WRAPPER.replace("points_state.init()\n", "points_state.init()\nimport streamlit as st\n"
                                                 "st.session_state['grid_shape'] = (64, 64)\n")
    app = AppTest.from_string(wrapper, default_timeout=120)
    app.run()
    assert not app.exception, app.exception
    assert "matrix" in app.multiselect(key="_w_compare_mechanisms").value
    assert not [c.value for c in app.caption if "Not offered" in c.value]


def test_one_failing_mechanism_keeps_the_others_results(at: AppTest, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args, **kwargs):
        raise RuntimeError("out of memory (forced by the test)")

    monkeypatch.setattr(catalog.get("points", "privtree"), "_release", boom)
    # the mechanisms that finish are two cheap ones (DAWA here planned on the demo's 1,024² grid took
    # most of the test's CPU, and what is tested is that a failure keeps the others' results)
    small_settings(at, ["ug", "privtree", "uniform"])
    run(at)
    res = at.session_state["compare_result"]
    assert list(res["failures"]) == ["privtree"]
    assert "RuntimeError: out of memory (forced by the test)" in res["failures"]["privtree"]
    assert set(res["summary"]["mechanism"]) == {"ug", "uniform"}  # the finished results are kept
    assert len(res["results"]) == 2 * 2 * 2 * 2  # mechanisms x ε x repeats x sizes
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 1 and catalog.get("points", "privtree").title in warnings[0]
    mre_tables = [d.value for d in at.dataframe if "not run because" in d.value.columns]
    assert len(mre_tables) == 2  # one per query size
    t = mre_tables[0]
    ug, uniform, privtree = (catalog.get("points", n).title for n in ("ug", "uniform", "privtree"))
    assert list(t.index) == [ug, uniform, privtree]
    assert t.loc[privtree, "ε = 0.1"] == "–" and "out of memory" in t.loc[privtree, "not run because"]
    assert "±" in t.loc[uniform, "ε = 0.5"] and t.loc[uniform, "not run because"] == ""
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert {tr["name"] for tr in spec["data"]} == {ug, uniform}


def test_nothing_chosen_disables_run(at: AppTest) -> None:
    at.multiselect(key="_w_compare_mechanisms").set_value([]).run()
    assert not at.exception
    assert at.button(key="compare_run").disabled


def test_reachable_from_the_app() -> None:
    app = AppTest.from_file("../../app.py", default_timeout=120)
    app.run()
    app.switch_page("pages/compare.py").run()
    assert not app.exception, app.exception
    assert [t.value for t in app.title] == ["Compare"]


def test_a_compared_mechanism_goes_to_the_plan_step_in_one_click() -> None:
    app = AppTest.from_file("../../app.py", default_timeout=120)
    app.run()
    app.switch_page("pages/compare.py").run()
    small_settings(app, ["ug", "uniform"])
    run(app)
    pick = app.selectbox(key="compare_points_pick")
    other = "uniform" if pick.value == "ug" else "ug"
    pick.set_value(other).run()
    app.button(key="compare_points_use").click().run()
    assert not app.exception, app.exception
    assert app.session_state["mechanism"] == other
    [mech] = [s for s in app.selectbox if s.label == "Mechanism"]
    assert mech.value == other
