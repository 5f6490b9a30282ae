"""Compare for counts over areas and trips between areas (ui.compare_plans): every mechanism's expected
error per level at the Plan step's budget, side by side, from no data; one click takes a mechanism to
the Plan step."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dpcore import catalog

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


def ok(at: AppTest) -> AppTest:
    assert not at.exception, at.exception
    return at


def _compare(kind: str) -> AppTest:
    at = ok(AppTest.from_file(APP, default_timeout=120).run())
    at.radio(key="_w_kind").set_value(kind).run()
    return ok(at.switch_page("pages/compare.py").run())


@pytest.mark.parametrize(("kind", "catalog_kind", "mech_key", "pick"),
                         [("areas", "hierarchy", "hier_mech", "bottom_up"), ("flows", "od", "od_mech", "tda_l2")])
def test_compare_sets_every_mechanism_side_by_side_and_takes_one_to_the_plan_step(
        kind: str, catalog_kind: str, mech_key: str, pick: str) -> None:
    at = _compare(kind)
    [table] = at.dataframe
    shown = list(table.value["mechanism"])
    names = at.selectbox(key="compare_plans_pick").options
    assert shown == names and len(shown) >= 3, shown
    assert catalog.get(catalog_kind, pick).title in shown
    # the numbers are the plans' own: the Plan step shows the same ± for the mechanism it plans
    at.selectbox(key="compare_plans_pick").set_value(pick).run()
    ok(at.button(key="compare_plans_use").click().run())
    assert at.session_state[mech_key] == pick
    [mech] = [s for s in at.selectbox if s.label == "Mechanism"]
    assert mech.value == pick
    core = at.session_state["hier_plan" if kind == "areas" else "od_plan"][1]
    core = core if kind == "areas" else core[1]
    plan = core[0] if isinstance(core, tuple) else core
    row = table.value.loc[table.value["mechanism"] == catalog.get(catalog_kind, pick).title].iloc[0]
    assert [row.iloc[i + 1] for i in range(len(plan.rows))] == [float(round(r.ci95)) for r in plan.rows]
    # Compare charged nothing: the data's budget has no entry, nor has any budget of its database
    ledgers = at.session_state["census_ledgers" if kind == "areas" else "od_ledgers"]
    assert ledgers and all(not led.entries for led in ledgers.values())
    for led in ledgers.values():
        with led.store.transaction() as con:
            assert con.execute("SELECT COUNT(*) FROM spends").fetchone()[0] == 0


def test_compare_for_a_census_table_sends_the_curator_to_the_plan_step() -> None:
    at = ok(AppTest.from_file(APP, default_timeout=120).run())
    at.radio(key="_w_kind").set_value("areas").run()
    at.radio(key="_w_areas_table").set_value("census").run()
    ok(at.switch_page("pages/compare.py").run())
    assert not at.dataframe
    assert any("census table" in i.value for i in at.info), [i.value for i in at.info]
    assert at.get("page_link")


def test_compare_over_areas_follows_the_plan_settings_not_the_matrix_mechanisms_area_sets() -> None:
    """With the matrix mechanism and an area-sets file on the Plan step, Compare still compares every
    other mechanism (the sets are the matrix mechanism's only), and a later mechanism leaves no stale table."""
    at = ok(AppTest.from_file(APP, default_timeout=240).run())
    at.radio(key="_w_kind").set_value("areas").run()
    at.switch_page("pages/plan.py").run()
    at.selectbox(key="_w_hier_mech").set_value("matrix").run()
    at.file_uploader(key="hier_sets_upload").set_value(
        ("q.csv", b"query,area\nNorth,R1\nNorth,R2\nDowntown,R1/D2\n", "text/csv")).run()
    ok(at)

    def not_compared(at: AppTest) -> list[str]:
        [table] = at.dataframe
        return [str(v) for v in table.value.astype(str).to_numpy().ravel()
                if "matrix mechanism only" in str(v)] + [c.value for c in at.caption if "matrix mechanism only" in c.value]

    ok(at.switch_page("pages/compare.py").run())
    assert not not_compared(at), not_compared(at)
    at.switch_page("pages/plan.py").run()
    at.selectbox(key="_w_hier_mech").set_value("bottom_up").run()
    ok(at.switch_page("pages/compare.py").run())
    assert not not_compared(at), not_compared(at)
