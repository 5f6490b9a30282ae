"""``pipeline.release`` of an O/D plan: options and sizes are validated (by the plan and its unit)
and the ledger charged before any noise is drawn; a pure-ε cost on a zCDP ledger and an exhausted budget are refused."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
import pytest
from flows_helpers import plan_od
from od_testing import LedgerWatcher, NoDraw, make_states

from dpcore import pipeline
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import BudgetError, ParameterError
from dpcore.flows.counts import ODCounts
from dpcore.flows.mechanisms.common import ODRelease
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource


@pytest.fixture(scope="module")
def states() -> Hierarchy:
    """3 states with 2, 3 and 1 counties (prefix codes)."""
    return make_states()


@pytest.fixture
def small_counts(states: Hierarchy) -> ODCounts:
    df = pd.DataFrame({"o": ["0101", "0203", "0203", "0301"] * 5, "d": ["0202", "0101", "0102", "0301"] * 5})
    return ODCounts.from_frame(df, states, origin="o", destination="d")


@pytest.mark.parametrize("opts", [
    {"orientation": "sideways"}, {"order": "random"}, {"split": "sideways"}, {"tiebreak": "coin"},
    {"neighbour": "sideways"}, {"split": "custom", "weights": [1.0]}, {"seed": 1}, {"approx": (1.0, 1e-6)},
])
def test_pipeline_validates_before_spending(small_counts: ODCounts, opts: dict) -> None:
    led = Ledger(budget.zcdp(1.0))
    with pytest.raises(ParameterError):
        pipeline.release(plan_od(small_counts, "inftda", budget.zcdp(0.1), **opts), small_counts, ledger=led,
                         noise=NoDraw(0))
    assert led.spent == 0 and not led.entries
    with pytest.raises(ParameterError):
        pipeline.release(plan_od(small_counts, "bogus", budget.zcdp(0.1)), small_counts, ledger=led, noise=NoDraw(0))
    assert led.spent == 0 and not led.entries


@pytest.mark.parametrize("mechanism", ["inftda", "tda_l2", "tda_linf_milp", "vanilla_gauss"])
def test_pipeline_charges_before_any_noise(small_counts: ODCounts, mechanism: str) -> None:
    led = Ledger(budget.zcdp(1.0))
    src = LedgerWatcher(led, 0.3)
    seen = []
    plan = plan_od(small_counts, mechanism, budget.zcdp(0.3), orientation="origin", split="geometric")
    rel = pipeline.release(plan, small_counts, ledger=led, noise=src, progress=lambda f, msg: seen.append(f)).inner
    assert not src.first  # noise was drawn, after the charge
    assert seen and isinstance(rel, ODRelease)
    (entry,) = led.entries
    assert entry.details["kind"] == "od" and entry.details["mechanism"] == mechanism
    assert entry.details["orientation"] == "origin" and entry.details["split"] == rel.plan.split
    assert [lv["share"] for lv in entry.details["levels"]] == [lv.share for lv in rel.plan.levels]
    assert sum(Fraction(lv["share"]) for lv in entry.details["levels"]) <= Fraction(0.3)
    assert rel.consistent


def test_pipeline_pure_cost_on_a_zcdp_ledger_and_exhaustion(small_counts: ODCounts) -> None:
    led = Ledger(budget.zcdp(0.5))
    src = LedgerWatcher(led, 0.5 ** 2 / 2)
    rel = pipeline.release(plan_od(small_counts, "inftda", budget.pure(0.5)), small_counts, ledger=led, noise=src).inner
    assert rel.plan.cost == budget.pure(0.5) and not src.first
    assert led.spent == pytest.approx(0.125)
    pipeline.release(plan_od(small_counts, "inftda", budget.zcdp(0.375)), small_counts, ledger=led,
                     noise=NoiseSource(1))
    small = plan_od(small_counts, "inftda", budget.zcdp(0.01))
    with pytest.raises(BudgetError):
        pipeline.release(small, small_counts, ledger=led, noise=NoDraw(0))
    assert led.spent == pytest.approx(0.5) and len(led.entries) == 2
    pure_led = Ledger(budget.pure(1.0))
    with pytest.raises(BudgetError, match="zCDP"):
        pipeline.release(small, small_counts, ledger=pure_led, noise=NoDraw(0))
    assert pure_led.spent == 0 and not pure_led.entries
