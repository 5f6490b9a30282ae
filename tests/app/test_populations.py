"""The app's side of the one session: populations, cap raises and units of privacy, with AppTest.

Every page charges through ``ui.state.session()``; data loaded on different pages can be bound
to one named population (ui/budget_ui.population_input) and then draws on one budget.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from ui.state import release_widget_key

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
POP = "Travel survey 2023"


# the old page names of the points path, as steps of the one path
STEP = {"data": "data", "mechanism": "plan", "plan": "plan", "map": "release", "errors": "release",
        "release": "release", "export": "export", "compare": "compare", "history": "history"}

# where a page script of the old layout lives now (the flows kind still runs as one page)
SCRIPTS = {"od.py": "ui/kinds/flows/od_page.py", "history.py": "pages/history.py", "compare.py": "pages/compare.py"}


def ok(at: AppTest) -> AppTest:
    assert not at.exception, at.exception
    return at


def app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    return ok(at)


def page(name: str) -> AppTest:
    """One page run as under st.navigation (a script whose __file__ is the page); the census table
    and the hierarchy of areas open on the Plan step of their kind, through app.py."""
    if name in ("census.py", "hierarchy.py"):
        return goto(app(), name.removesuffix(".py"))
    path = ROOT / SCRIPTS[name]
    at = AppTest.from_string(f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from ui.kinds.points import state as points_state
points_state.init()
from ui import frame
with frame.framed():  # as app.py runs a page
    exec(compile(open({str(path)!r}, encoding="utf-8").read(), {str(path)!r}, "exec"),
         {{"__file__": {str(path)!r}, "__name__": "__main__"}})
""", default_timeout=180)
    at.run()
    return ok(at)


def goto(at: AppTest, name: str) -> AppTest:
    if name in ("census", "hierarchy", "census_release", "od"):  # the areas and flows kinds
        at.session_state["kind"] = at.session_state["_w_kind"] = "flows" if name == "od" else "areas"
        if name != "od":
            at.session_state["areas_table"] = at.session_state["_w_areas_table"] = (
                "hierarchy" if name == "hierarchy" else "census")
            loaded = "census_table" if at.session_state["areas_table"] == "census" else "hier_model"
            if loaded not in at.session_state:
                at.switch_page("pages/data.py").run()  # the Data step loads the table
        name = "data" if name == "od" else "release" if name == "census_release" else "plan"
    elif name in STEP:
        at.session_state["kind"] = at.session_state["_w_kind"] = "points"
    at.switch_page(f"pages/{STEP.get(name, name)}.py").run()
    return ok(at)


def population_box(at: AppTest):
    [box] = [t for t in at.text_input if t.label == "Population (optional)"]
    return box


def bind(at: AppTest, name: str) -> AppTest:
    population_box(at).input(name).run()
    return ok(at)


def number_input(at: AppTest, label_start: str):
    [box] = [n for n in at.number_input if n.label.startswith(label_start)]
    return box


def texts(elements) -> str:
    return "\n".join(e.value for e in elements)


def sidebar_text(at: AppTest) -> str:
    return "\n".join([m.value for m in at.sidebar.markdown] + [c.value for c in at.sidebar.caption])


def points_ledger(at: AppTest):
    return at.session_state["ledgers"][at.session_state["dataset"].fingerprint]


def census_ledger(at: AppTest):
    """The budget of the table of counts over areas in use (a census table or a hierarchy)."""
    ss = at.session_state
    fp = ss["census_fp"] if ss["areas_table"] == "census" else ss["hier_model"]["fp"]
    return ss["census_ledgers"][fp]


# ---------------------------------------------------------------- (a) one budget per population


def test_points_and_census_bound_to_one_population_draw_on_one_budget() -> None:
    """A population's budget protects persons (issue 26 item 15): record-level points are refused on
    it with the reason, and a census table joins it once the curator confirms that each person is
    counted once in it."""
    at = goto(app(), "mechanism")
    assert "Data that comes from the same people" in population_box(at).help
    bind(at, POP)
    assert f"population: **{POP}**" in texts(at.caption)
    assert f"population: **{POP}**" in sidebar_text(at)
    assert number_input(at, "Budget cap").label == f"Budget cap of the population {POP} (ε)"
    number_input(at, "Privacy budget of this release").set_value(0.6).run()
    goto(at, "release")
    button = at.button(key=release_widget_key("release_button", at.session_state))
    assert button.disabled and "person or group unit" in texts(at.error)  # the demo points: one record each
    pop = points_ledger(at)
    assert pop.spent == 0 and not at.session_state["releases"]

    goto(at, "census")
    assert census_ledger(at).dataset != pop.dataset  # the census table has a budget of its own ...
    bind(at, f"  {POP} ")  # ... until it is bound (the name is trimmed)
    led = census_ledger(at)
    assert led.dataset == pop.dataset
    at.number_input(key="_w_census_epsilon").set_value(0.6).run()
    goto(at, "census_release")
    button = at.button(key=release_widget_key("census_release_button", at.session_state))
    assert button.disabled and "person or group unit" in texts(at.error)  # not confirmed: one counted record
    goto(at, "census")
    fp = at.session_state["census_fp"]
    at.checkbox(key=f"_w_person_once_{fp}").check().run()
    goto(at, "census_release")
    at.button(key=release_widget_key("census_release_button", at.session_state)).click().run()
    ok(at)
    assert pop.spent == pytest.approx(0.6) and [e.label for e in pop.entries][-1].startswith("census release")
    assert pop.unit is not None and pop.unit.entity == "person"


# ---------------------------------------------------------------- (b) binding refused


def test_binding_after_a_release_is_refused_and_the_page_stays() -> None:
    at = page("census.py")
    goto(at, "census_release")
    at.button(key=release_widget_key("census_release_button", at.session_state)).click().run()
    ok(at)
    own = census_ledger(at)
    goto(at, "census")
    bind(at, POP)
    assert "already has releases on a budget of its own" in texts(at.error)
    assert population_box(at).value == ""  # nothing bound: the box says so
    assert census_ledger(at) is own and own.spent == pytest.approx(0.5)
    assert [t.value for t in at.title] == ["Plan"]  # page alive
    goto(at, "census_release")
    assert at.button(key=release_widget_key("census_release_button", at.session_state)).label.startswith("Release with ε = 0.5")
    goto(at, "census")
    at.run()
    assert "already has releases" not in texts(at.error)  # shown once, not on every rerun


TRACTS = b"STATEFP,COUNTYFP,TRACTCE,POPULATION\n01,001,020100,1775\n01,001,020200,2055\n02,001,000100,990\n"


def real_census() -> AppTest:
    """The census page holding an uploaded table (real data: its budget is kept for good, unlike the
    made-up demo's, which lives with the session)."""
    at = page("census.py")
    at.switch_page("pages/data.py").run()  # the table is chosen on the Data step
    at.radio(key="_w_census_source").set_value("upload").run()
    at.file_uploader(key="census_upload").set_value(("tracts.csv", TRACTS, "text/csv")).run()
    at.switch_page("pages/plan.py").run()
    return ok(at)


def test_a_data_set_belongs_to_one_population_for_good() -> None:
    at = real_census()
    bind(at, "Survey A")
    bind(at, "Survey B")
    assert "already bound to the population 'Survey A'" in texts(at.error)
    assert population_box(at).value == "Survey A"
    bind(at, "")
    assert "belongs to the population 'Survey A' for good" in texts(at.error)
    assert population_box(at).value == "Survey A"
    # a new session (reload, second tab) finds the binding and shows its name
    again = real_census()
    assert population_box(again).value == "Survey A"
    assert "population: **Survey A**" in texts(again.caption)
    led = again.session_state["census_ledgers"][again.session_state["census_fp"]]
    assert led.dataset == at.session_state["census_ledgers"][at.session_state["census_fp"]].dataset
    assert not led.store.temporary  # real data: the shared database


# ---------------------------------------------------------------- (c) raising a cap asks, lowering does not


def _points():
    return goto(app(), "mechanism"), points_ledger


def _census():
    return page("census.py"), census_ledger


def _hierarchy():
    return page("hierarchy.py"), census_ledger


def _od():
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state["kind"] = at.session_state["_w_kind"] = "flows"  # trips between areas: the Plan step
    at.run()
    at.switch_page("pages/plan.py").run()
    return ok(at), lambda a: next(iter(a.session_state["od_ledgers"].values()))


@pytest.mark.parametrize("open_page", [_points, _census, _hierarchy, _od], ids=["points", "census", "hierarchy", "od"])
def test_raising_a_cap_asks_for_confirmation_and_lowering_does_not(open_page) -> None:
    at, ledger = open_page()
    led = ledger(at)
    cap0 = led.cap.value
    low, high = cap0 / 2, cap0 * 3
    number_input(at, "Budget cap").set_value(low).run()
    ok(at)
    assert led.cap.value == pytest.approx(low)  # lowered at once
    assert not any("Raise the cap" in w.value for w in at.warning)
    number_input(at, "Budget cap").set_value(high).run()
    ok(at)
    assert led.cap.value == pytest.approx(low)  # not yet
    assert any("Raise the cap" in w.value and "exposed more" in w.value for w in at.warning)
    next(b for b in at.button if b.label == "Raise the cap").click().run()
    ok(at)
    assert led.cap.value == pytest.approx(high)
    assert number_input(at, "Budget cap").value == pytest.approx(high)
    assert [(c.old.value, c.new.value) for c in led.cap_changes] == [
        (pytest.approx(cap0), pytest.approx(low)), (pytest.approx(low), pytest.approx(high))]
    # "Keep the cap" leaves it as it is
    number_input(at, "Budget cap").set_value(high * 2).run()
    next(b for b in at.button if b.label == "Keep the cap").click().run()
    ok(at)
    assert led.cap.value == pytest.approx(high) and len(led.cap_changes) == 2


# ---------------------------------------------------------------- (d) the history lists cap changes and units


def test_history_lists_cap_changes_and_the_unit_of_each_spend() -> None:
    at = goto(app(), "mechanism")
    number_input(at, "Budget cap").set_value(0.8).run()
    goto(at, "release")
    at.button(key=release_widget_key("release_button", at.session_state)).click().run()
    ok(at)
    goto(at, "history")
    assert any("Cap changes:" in c.value and "ε = 1 → ε = 0.8" in c.value for c in at.caption)
    [spends] = [d.value for d in at.dataframe if "unit of privacy" in d.value.columns]
    assert list(spends["unit of privacy"]) == ["one record, add or remove"]
    assert list(spends["cost"]) == ["ε = 0.5"]


# ---------------------------------------------------------------- (e) a person budget refuses a record release


def _points_with_people(n: int = 3000) -> bytes:
    rng = np.random.default_rng(5)
    lat, lon = rng.uniform(40.6, 40.9, n), rng.uniform(-74.0, -73.75, n)
    user = rng.integers(0, 300, n)
    rows = ["lat,lon,user_id"] + [f"{a:.6f},{b:.6f},u{u}" for a, b, u in zip(lat, lon, user, strict=True)]
    return ("\n".join(rows) + "\n").encode()


def upload(at: AppTest) -> AppTest:
    at.file_uploader(key="points_upload").set_value(("people.csv", _points_with_people(), "text/csv")).run()
    return ok(at)


def _use_columns(at: AppTest, person: str) -> AppTest:
    [box] = [b for b in at.selectbox if b.label == "Person / user id column (optional)"]
    box.set_value(person)
    at.button(key="FormSubmitter:columns-Use these columns").click().run()
    return ok(at)


def test_a_record_level_release_on_a_person_budget_is_refused_with_the_reason() -> None:
    at = app()
    upload(at)
    _use_columns(at, "user_id")
    assert at.session_state["user_cap"] == 10
    goto(at, "mechanism")
    goto(at, "release")
    at.button(key=release_widget_key("release_button", at.session_state)).click().run()
    ok(at)
    led = points_ledger(at)
    assert led.unit is not None and led.unit.label() == "one person (at most 10 records each), add or remove"
    assert not led.store.temporary  # uploaded (real) points keep their budget in the shared database

    goto(at, "data")
    upload(at)  # the same points again, read as they come: each row its own unit
    assert at.session_state["dataset"].table.user_column is None
    goto(at, "mechanism")
    assert points_ledger(at) is led  # same points, same budget
    goto(at, "release")
    err = texts(at.error)
    assert "This budget protects one person (at most 10 records each)" in err
    assert "a record-level release bounds the influence of one row only" in err
    button = at.button(key=release_widget_key("release_button", at.session_state))
    assert button.disabled and "unit of privacy" in button.label
    assert len(led.entries) == 1 and len(at.session_state["releases"]) == 1
    assert [t.value for t in at.title] == ["Release"]  # the page is alive


# ---------------------------------------------------------------- (e) near-identical data (issue 26 item 14)


def test_near_identical_points_ask_whether_they_are_the_same_population() -> None:
    """The same points minus one row would start a fresh budget: the Release step asks first, shows
    nothing about the data, and 'same people' leads the data to the spent budget (recorded)."""
    full = _points_with_people()
    short = b"".join(full.splitlines(keepends=True)[:-1])
    at = app()
    at.file_uploader(key="points_upload").set_value(("full.csv", full, "text/csv")).run()
    goto(ok(at), "mechanism")
    number_input(at, "Privacy budget of this release").set_value(0.7).run()
    goto(at, "release")
    at.button(key=release_widget_key("release_button", at.session_state)).click().run()
    spent = points_ledger(ok(at))
    assert spent.spent == pytest.approx(0.7)

    goto(at, "data")
    at.file_uploader(key="points_upload").set_value(("short.csv", short, "text/csv")).run()
    goto(ok(at), "release")
    question = texts(at.warning)
    assert "Is this the same population" in question and "3,000" not in question and "2,999" not in question
    assert not [b for b in at.button if b.key and "release_button" in b.key]  # nothing to click before the answer
    [same] = [b for b in at.button if b.key == "near_match_same"]
    same.click().run()
    ok(at)
    assert "Is this the same population" not in texts(at.warning)
    assert points_ledger(at).dataset == spent.dataset  # the spent budget: 0.3 left
    assert at.button(key=release_widget_key("release_button", at.session_state)).disabled
