"""A click is never lost when another request reaches the server while its callback runs (issue 28
item 5: under load, 10 of 27 clicks were lost).

Streamlit 1.67 checks for a pending rerun at every read or write of ``st.session_state`` and every
element a callback draws; a request that arrived meanwhile (a second click, a reconnecting browser,
any widget) stops the callback there, as if it had called ``st.rerun()``, and the click's trigger
is not replayed.  These tests send such a request from inside the release, before the charge."""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_requests import RerunData
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
from streamlit.testing.v1 import AppTest

from ui.state import release_widget_key

APP = "../../app.py"


def _another_request() -> None:
    """What the server does when a second message arrives while this run is busy."""
    ctx = get_script_run_ctx()
    ctx.script_requests.request_rerun(RerunData(query_string=ctx.query_string,
                                                page_script_hash=ctx.page_script_hash))


def test_a_request_during_the_release_callback_does_not_lose_the_click(monkeypatch):
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("pages/release.py").run()
    assert not at.exception
    from ui.kinds.points import state as points_state

    real, sent = points_state.aggregate, []

    def busy():
        if not sent:  # once: arrives while the callback still runs, before the charge
            sent.append(_another_request())
        return real()

    monkeypatch.setattr(points_state, "aggregate", busy)
    at.button(key=release_widget_key("release_button", at.session_state)).click().run()
    assert not at.exception, at.exception
    assert len(at.session_state["releases"]) == 1
    assert any(s.value.startswith("Released ") for s in at.success)


def test_the_request_that_arrived_meanwhile_is_served_after_the_release(monkeypatch):
    """Held, not dropped: a click on the sidebar's Plan link during the release opens the Plan step."""
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("pages/release.py").run()
    from ui.kinds.points import state as points_state

    real, sent = points_state.aggregate, []

    def busy():
        if not sent:
            ctx = get_script_run_ctx()
            plan = st.Page("pages/plan.py", url_path="plan")._script_hash  # the hash the sidebar link sends
            ctx.script_requests.request_rerun(RerunData(query_string="", page_script_hash=plan))
            sent.append(plan)
        return real()

    monkeypatch.setattr(points_state, "aggregate", busy)
    at.button(key=release_widget_key("release_button", at.session_state)).click().run()
    assert not at.exception, at.exception
    assert len(at.session_state["releases"]) == 1
    assert [t.value for t in at.title] == ["Plan"]


def test_a_new_session_draws_the_public_area_map_without_building_it_again(monkeypatch):
    """The Data step's map of the public area and the shipped outlines is made once per server and area;
    the true density preview (confidential) is made only when its expander is opened, once per count, in
    the session only."""
    import json

    from dpcore.points import viz
    from ui.kinds.points import data

    # kept between tests (tests/conftest.py KEPT_RESOURCES): this one counts their making
    data._public_extent.clear()
    data.demo_outlines.clear()
    built: list[str] = []
    real_extent, real_density = viz.extent_figure, viz.true_density_figure
    monkeypatch.setattr(viz, "extent_figure", lambda *a, **k: built.append("extent") or real_extent(*a, **k))
    monkeypatch.setattr(viz, "true_density_figure", lambda *a, **k: built.append("density") or real_density(*a, **k))
    first = AppTest.from_file(APP, default_timeout=120).run()
    first.run()  # a rerun of the same page
    second = AppTest.from_file(APP, default_timeout=120).run()
    assert not first.exception and not second.exception
    assert built.count("extent") == 1
    assert built.count("density") == 0  # the expander is closed: nothing made, nothing sent
    assert len(first.get("plotly_chart")) == 1
    for at in (first, second):
        at.session_state["_w_density_open"] = True  # the curator opens the expander
        at.run()
        at.run()  # a rerun of the same page
        assert not at.exception
    assert built.count("density") == 2  # once per session, not per run
    assert len(first.get("plotly_chart")) == 2
    specs = [json.loads(at.get("plotly_chart")[0].proto.spec) for at in (first, second)]
    assert specs[0] == specs[1] and specs[0]["layout"]["map"]["style"] == "white-bg"


def test_a_choice_made_just_before_a_page_change_is_kept(monkeypatch):
    """The mechanism picked on the Plan step, then at once the Release link: the run of the choice is
    stopped by the page change before it reaches the line that kept the choice, and the release would
    be made with Auto instead of UG."""
    from ui import frame

    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("pages/plan.py").run()
    real, sent = frame.heading, []

    def busy(*args):
        if not sent:  # the Release link, clicked while the Plan step's run is under way
            release = st.Page("pages/release.py", url_path="release")._script_hash
            get_script_run_ctx().script_requests.request_rerun(RerunData(query_string="", page_script_hash=release))
            sent.append(release)
        return real(*args)

    monkeypatch.setattr(frame, "heading", busy)
    at.selectbox(key="_w_mechanism").set_value("ug").run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Release"]
    assert at.session_state["mechanism"] == "ug"
