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


def _facts(plan) -> tuple:  # noqa: ANN001 - a core Plan
    """What a plan is, public facts only: its ledger facts (mechanism, options, cost, unit) and its rows."""
    return plan.details(), plan.cost, plan.rows


def _compared(at: AppTest, slot: str, title: str) -> tuple[dict, list[float]]:
    """Compare's plan of the mechanism titled ``title`` (kept in ``slot``) and its row of the table."""
    ok(at.switch_page("pages/compare.py").run())
    [cand] = [c for c in at.session_state[slot][1] if c.title.rstrip(" *") == title]
    [table] = at.dataframe
    row = table.value.loc[table.value["mechanism"] == cand.title].iloc[0]
    return cand.plan, [float(v) for v in row.iloc[1:]]


def test_compare_over_areas_plans_each_mechanism_with_the_plan_steps_options() -> None:
    """TopDown L∞'s zeroing order and the split chosen on the Plan step are those of its Compare plan:
    Compare's plan and row are the Plan step's plan, and not the default's."""
    at = ok(AppTest.from_file(APP, default_timeout=120).run())
    at.radio(key="_w_kind").set_value("areas").run()
    title = catalog.get("hierarchy", "topdown_linf").title
    default, default_row = _compared(at, "hier_compare", title)
    assert default.params["order"] == "ascending" and default.params["split"] == "uniform"
    ok(at.switch_page("pages/plan.py").run())
    at.selectbox(key="_w_hier_mech").set_value("topdown_linf").run()
    at.radio(key="_w_hier_order").set_value("descending").run()
    ok(at.radio(key="_w_hier_split").set_value("geometric").run())
    core = at.session_state["hier_plan"][1]
    planned = core[0] if isinstance(core, tuple) else core
    assert planned.params["order"] == "descending" and planned.params["split"] == "geometric"
    compared, row = _compared(at, "hier_compare", title)
    assert _facts(compared) == _facts(planned)
    assert row == [float(round(r.ci95)) for r in planned.rows]
    assert _facts(compared) != _facts(default) and row != default_row
    # a mechanism without a zeroing order is compared with the split alone
    [hay] = [c.plan for c in at.session_state["hier_compare"][1] if c.name == "hay"]
    assert "order" not in hay.params and hay.params["split"] == "geometric"


def test_compare_of_trips_plans_each_mechanism_with_the_plan_steps_options() -> None:
    """InfTDA's zeroing order and tie rule and the split chosen on the Plan step are those of its Compare
    plan: Compare's plan and row are the Plan step's plan, and not the default's; TopDown L2 takes the
    tie rule only (it has no zeroing order)."""
    at = ok(AppTest.from_file(APP, default_timeout=120).run())
    at.radio(key="_w_kind").set_value("flows").run()
    title = catalog.get("od", "inftda").title
    default, default_row = _compared(at, "od_compare", title)
    assert (default.inner.order, default.inner.tiebreak, default.inner.split) == ("ascending", "random", "uniform")
    ok(at.switch_page("pages/plan.py").run())
    at.selectbox(key="_w_od_mech").set_value("inftda").run()
    at.radio(key="_w_od_order").set_value("descending").run()
    at.radio(key="_w_od_tiebreak").set_value("index").run()
    ok(at.radio(key="_w_od_split").set_value("geometric").run())
    planned = at.session_state["od_plan"][1][1]
    assert (planned.inner.order, planned.inner.tiebreak, planned.inner.split) == ("descending", "index", "geometric")
    compared, row = _compared(at, "od_compare", title)
    assert _facts(compared) == _facts(planned)
    assert (compared.inner.order, compared.inner.tiebreak) == ("descending", "index")
    assert row == [float(round(r.ci95)) for r in planned.rows]
    assert _facts(compared) != _facts(default) and row != default_row
    [l2] = [c.plan for c in at.session_state["od_compare"][1] if c.name == "tda_l2"]
    assert (l2.inner.order, l2.inner.tiebreak, l2.inner.split) == ("ascending", "index", "geometric")
