"""Defects found by the review of the one-path app, each pinned by a test."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


def ok(at: AppTest) -> AppTest:
    assert not at.exception, at.exception
    return at


def _marks_after_shared_open() -> None:
    import streamlit as st

    from dpcore.privacy import budget
    from ui import state
    from ui.kinds.points import state as points_state

    points_state.init()
    fp = "0123456789abcdef"
    led = state.stored_ledger("areas", fp, budget.pure(1.0))  # a real table's budget, opened in the shared store
    state.mark_demo("areas", fp)  # e.g. a failed demo build passing the earlier (real) table's key
    st.write(f"demo={state.is_demo('census', fp)} temporary={state.is_session_budget(led)}")
    again = state.stored_ledger("areas", fp, budget.pure(1.0))
    st.write(f"again temporary={state.is_session_budget(again)}")


def test_a_budget_opened_in_the_shared_store_is_never_moved_to_the_demo_store() -> None:
    at = ok(AppTest.from_function(_marks_after_shared_open, default_timeout=60).run())
    shown = [m.value for m in at.markdown]
    assert "demo=False temporary=False" in shown
    assert "again temporary=False" in shown


def _points_plan(at: AppTest) -> AppTest:
    at.switch_page("pages/plan.py").run()
    return ok(at)


def test_switching_the_definition_converts_the_cap_and_never_raises_it() -> None:
    at = ok(AppTest.from_file(APP, default_timeout=120).run())
    _points_plan(at)
    fp = at.session_state["dataset"].fingerprint
    [cap] = [n for n in at.number_input if n.label.startswith("Budget cap")]
    cap.set_value(0.2).run()  # lowering needs no confirmation
    at.radio(key=f"definition_{fp}").set_value("zcdp").run()
    led = at.session_state["ledgers"][fp]
    assert led.definition == "zcdp" and led.cap.value == pytest.approx(0.02)  # ρ = ε²/2, not the default 0.5
    at.radio(key=f"definition_{fp}").set_value("pure").run()
    led = at.session_state["ledgers"][fp]
    assert led.definition == "pure" and led.cap.value == pytest.approx(0.2)
    assert all(c.new.to_zcdp().value <= c.old.to_zcdp().value * (1 + 1e-9) for c in led.cap_changes)


def test_the_release_button_states_what_a_pure_release_costs_on_a_rho_budget() -> None:
    """Privelet (pure ε only) on a ρ-zCDP budget: ε = 0.5 is charged as ρ = 0.125, so 0.375 of 0.5 is left."""
    at = ok(AppTest.from_file(APP, default_timeout=120).run())
    at.radio(key="_w_kind").set_value("areas").run()
    at.radio(key="_w_areas_table").set_value("census").run()
    ok(at.switch_page("pages/plan.py").run())
    fp = at.session_state["census_fp"]
    at.radio(key=f"census_def_{fp}").set_value("zcdp").run()
    ok(at.switch_page("pages/release.py").run())
    button = at.button(key="census_release_button")
    assert button.label == "Release with ε = 0.5 (charged as ρ = 0.12) — 0.38 left after this", button.label


def test_compare_for_another_kind_says_what_it_compares_and_keeps_the_sidebar() -> None:
    at = ok(AppTest.from_file(APP, default_timeout=120).run())
    at.radio(key="_w_kind").set_value("flows").run()
    ok(at.switch_page("pages/compare.py").run())
    assert any("expected error at each level" in m.value for m in at.markdown)  # the page's own sentence
    assert not at.get("plotly_chart")
    side = [m.value for m in at.sidebar.markdown]
    assert "#### Dataset" in side and "#### Privacy budget" in side


def test_a_census_upload_chosen_without_a_file_does_not_release_the_built_in_census() -> None:
    at = ok(AppTest.from_file(APP, default_timeout=120).run())
    at.radio(key="_w_kind").set_value("areas").run()
    at.radio(key="_w_areas_table").set_value("census").run()  # the built-in synthetic census is built
    assert at.session_state["census_table"] is not None
    at.radio(key="_w_census_source").set_value("upload").run()  # ... then "Upload a file", no file yet
    ok(at.switch_page("pages/release.py").run())
    assert not [b for b in at.button if "release" in str(b.key)], [b.key for b in at.button]
    assert at.get("page_link"), "the step says where to go"
    ok(at.switch_page("pages/plan.py").run())
    assert not at.dataframe


def test_the_confirmation_of_a_census_table_links_to_its_tables_not_a_map() -> None:
    from ui.state import release_widget_key

    at = ok(AppTest.from_file(APP, default_timeout=120).run())
    at.radio(key="_w_kind").set_value("areas").run()
    at.radio(key="_w_areas_table").set_value("census").run()
    ok(at.switch_page("pages/release.py").run())
    at.button(key=release_widget_key("census_release_button", at.session_state)).click().run()
    ok(at)
    text = " ".join(m.value for m in at.markdown)
    assert "See the released counts ↓" in text and "See it on the map" not in text


def test_a_large_release_is_kept_in_the_history_after_its_page_is_drawn() -> None:
    """65,536 areas: the files are stored after the map is on the page, still once, in the same run."""
    from ui import state

    at = ok(AppTest.from_file(APP, default_timeout=180).run())
    at.number_input(key="_w_grid_rows").set_value(256).run()
    at.number_input(key="_w_grid_cols").set_value(256).run()
    ok(at.switch_page("pages/plan.py").run())
    at.selectbox(key="_w_mechanism").set_value("identity").run()
    ok(at.switch_page("pages/release.py").run())
    at.button(key=state.release_widget_key("release_button", at.session_state)).click().run()
    ok(at)
    [entry] = at.session_state["releases"]
    assert entry.release.n_rects == 256 * 256
    assert "history_pending" not in entry.exports  # stored by the end of the run
    led = at.session_state["ledgers"][entry.dataset_fingerprint]
    stored = led.store.releases(led.dataset)
    assert [r["release_id"] for r in stored] == [entry.release.release_id]
    assert {"release.csv", "release.json", "release.geojson"} <= set(stored[0]["files"])
    at.run()  # a rerun stores nothing twice
    assert len(led.store.releases(led.dataset)) == 1
