"""The preview is the release: every kind's Plan step builds the one core plan through the catalogue,
and the Release button releases that very plan without planning again (issue 23, item 1).

Plans are counted by wrapping :meth:`dpcore.core.mechanism.Mechanism.plan` (the one entry every
mechanism plans through); the plans the app releases are caught at :func:`dpcore.pipeline.release`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dpcore import pipeline
from dpcore.core.mechanism import Mechanism, Plan
from ui.state import release_widget_key

APP = str(Path(__file__).resolve().parents[2] / "app.py")


class Counter:
    """The plans built (through the catalogue's mechanisms) and the plans released."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.built: list[Plan] = []
        self.released: list[Plan] = []
        plan, release = Mechanism.plan, pipeline.release

        def counted_plan(mech: Mechanism, *args, **kwargs) -> Plan:
            p = plan(mech, *args, **kwargs)
            self.built.append(p)
            return p

        def caught_release(p: Plan, *args, **kwargs):
            self.released.append(p)
            return release(p, *args, **kwargs)

        monkeypatch.setattr(Mechanism, "plan", counted_plan)
        monkeypatch.setattr(pipeline, "release", caught_release)


#: the points tests' grid: more cells than the app stores a GeoJSON for (its large-release path, as
#: at the default 1,024 x 1,024), a quarter of the default's work
GRID = (512, 512)


def ok(at: AppTest) -> AppTest:
    assert not at.exception, at.exception
    return at


def step(at: AppTest, name: str) -> AppTest:
    at.switch_page(f"pages/{name}.py").run()
    return ok(at)


def release_once(at: AppTest, button: str, counter: Counter) -> Plan:
    """Click the Release button; the click plans nothing and releases exactly one plan."""
    step(at, "release")
    counter.built.clear()
    at.button(key=release_widget_key(button, at.session_state)).click().run()
    ok(at)
    assert counter.built == [], [f"{p.kind}/{p.mechanism}" for p in counter.built]
    assert len(counter.released) == 1
    return counter.released[0]


@pytest.mark.parametrize("mechanism", ["ug", "identity"])
def test_points_release_is_the_plan_step_plan(monkeypatch: pytest.MonkeyPatch, mechanism: str) -> None:
    counter = Counter(monkeypatch)
    at = ok(AppTest.from_file(APP, default_timeout=120).run())
    at.session_state["grid_shape"] = GRID
    step(at, "plan")
    at.selectbox(key="_w_mechanism").set_value(mechanism).run()
    shown = ok(at).session_state["points_plan"].plan
    assert shown is not None and (shown.kind, shown.mechanism) == ("points", mechanism)
    released = release_once(at, "release_button", counter)
    assert released is shown
    entry = at.session_state["releases"][-1]
    assert entry.envelope.plan is shown and entry.release.mechanism == mechanism


def test_points_release_without_visiting_the_plan_step_plans_once(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = Counter(monkeypatch)
    at = ok(AppTest.from_file(APP, default_timeout=120).run())
    at.session_state["grid_shape"] = GRID
    at.session_state["mechanism"] = "identity"
    step(at, "release")
    assert len(counter.built) == 1  # the Release step built the plan of the stored choices, once
    planned = counter.built[0]
    assert release_once(at, "release_button", counter) is planned


def test_hierarchy_release_is_the_plan_step_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = Counter(monkeypatch)
    at = ok(AppTest.from_file(APP, default_timeout=180).run())
    at.radio(key="_w_kind").set_value("areas").run()
    step(ok(at), "plan")
    shown = at.session_state["hier_plan"][1][0]
    assert shown is not None and shown.kind == "hierarchy"
    assert release_once(at, "hier_release_button", counter) is shown
    assert "hier_release" in at.session_state


@pytest.mark.parametrize("mechanism", ["privelet", "matrix"])
def test_census_release_is_the_plan_step_plan(monkeypatch: pytest.MonkeyPatch, mechanism: str) -> None:
    counter = Counter(monkeypatch)
    at = ok(AppTest.from_file(APP, default_timeout=120).run())
    at.radio(key="_w_kind").set_value("areas").run()
    at.radio(key="_w_areas_table").set_value("census").run()
    step(ok(at), "plan")
    if mechanism == "matrix":
        ok(at.radio(key="_w_census_mech").set_value("matrix").run())
    slot = "census_mx_plan" if mechanism == "matrix" else "census_privelet_plan"
    shown = at.session_state[slot][1][0]
    assert shown is not None and (shown.kind, shown.mechanism) == ("census", mechanism)
    button = "census_mx_release_button" if mechanism == "matrix" else "census_release_button"
    assert release_once(at, button, counter) is shown


def test_flows_release_is_the_plan_step_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = Counter(monkeypatch)
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state["kind"] = at.session_state["_w_kind"] = "flows"
    ok(at.run())
    step(at, "data")
    step(at, "plan")
    shown = at.session_state["od_plan"][1][1]
    assert shown is not None and shown.kind == "od"
    assert release_once(at, "od_release_button", counter) is shown
