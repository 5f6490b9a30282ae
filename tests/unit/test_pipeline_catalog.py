"""Every pipeline release takes the one mechanism interface: the catalogue's plan is what the
session charges, and the release is made from that plan (never planned twice)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from areas_helpers import plan_census, plan_hierarchy
from flows_helpers import plan_od
from points_helpers import plan_points, release_with

from dpcore import catalog, pipeline
from dpcore.areas import census_tables
from dpcore.areas.counts import HierarchyCounts
from dpcore.areas.mechanisms import census_matrix, census_privelet
from dpcore.areas.mechanisms.tree import TreeMechanism
from dpcore.areas.unit import census_unit, hierarchy_unit
from dpcore.core.mechanism import Plan
from dpcore.core.session import Session
from dpcore.data import synthetic
from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import BudgetError, ParameterError
from dpcore.flows.counts import ODCounts
from dpcore.flows.mechanisms.base import ODMechanism
from dpcore.flows.tree import hierarchy_from_prefixes
from dpcore.points.mechanisms.base import PointsMechanism
from dpcore.privacy.budget import pure, zcdp
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource
from dpcore.privacy.units import Unit

GRID = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 8, 8)
TREE = pd.DataFrame({"state": ["01", "01", "02", "02", "02"], "county": ["001", "002", "001", "002", "003"]})
LEVELS = ["state", "county"]
CENSUS_LEVELS = ["state", "county", "tract"]


class NoDraw(NoiseSource):
    def random_uint64(self, size: int) -> np.ndarray:  # every sampler draws through here
        raise AssertionError("noise drawn")


class LedgerWatcher(NoiseSource):
    """Asserts, at the first random bit, that the ledger has already been charged once."""

    def __init__(self, ledger: Ledger, seed: int = 1) -> None:
        super().__init__(seed)
        self.ledger, self.first = ledger, True

    def random_uint64(self, size: int) -> np.ndarray:
        if self.first:
            self.first = False
            assert len(self.ledger.entries) == 1
        return super().random_uint64(size)


def _aggregate() -> Aggregate:
    counts = np.random.default_rng(0).poisson(3, (8, 8)).astype(np.int64)
    return Aggregate(GRID, counts, 0, 0, 1, None)


def _hier_counts() -> HierarchyCounts:
    h = Hierarchy.from_frame(TREE, LEVELS)
    return HierarchyCounts.from_frame(TREE.assign(n=[5, 3, 0, 7, 2]), h, LEVELS, "n")


def _od_counts() -> ODCounts:
    h = hierarchy_from_prefixes(["0101", "0102", "0201", "0202", "0203"], [2, 4], ["state", "county"])
    trips = pd.DataFrame({"o": ["0101", "0201", "0203", "0101"] * 3, "d": ["0202", "0102", "0101", "0203"] * 3})
    return ODCounts.from_frame(trips, h, origin="o", destination="d")


@pytest.fixture(scope="module")
def table() -> census_tables.CensusTable:
    df = synthetic.synthetic_census(n_states=2, counties_per_state=2, tracts_per_county=2, age_bands=True)
    return census_tables.CensusTable.from_frame(df, CENSUS_LEVELS, "population", ordinals=["age_band"])


def _release(plan: Plan, aggregate: Any, led: Ledger | None, noise: NoiseSource, s: Session | None) -> Any:
    return pipeline.release(plan, aggregate, ledger=led, session=s, noise=noise).inner


def _points(led: Ledger | None, noise: NoiseSource, s: Session | None, t: Any) -> Any:
    agg = _aggregate()
    return _release(plan_points(agg, "ug", 0.5, {"c": 10}), agg, led, noise, s)


def _hierarchy(led: Ledger | None, noise: NoiseSource, s: Session | None, t: Any) -> Any:
    counts = _hier_counts()
    plan = plan_hierarchy(counts, "topdown_linf", pure(0.5), split="geometric", order="descending")
    return _release(plan, counts, led, noise, s)


def _od(led: Ledger | None, noise: NoiseSource, s: Session | None, t: Any) -> Any:
    counts = _od_counts()
    return _release(plan_od(counts, "inftda", zcdp(0.1), orientation="origin"), counts, led, noise, s)


#: (kind, a pipeline release given a ledger, noise, session and the census table; planned once per call)
RELEASES: dict[str, Callable[..., Any]] = {
    "points": _points,
    "hierarchy": _hierarchy,
    "od": _od,
    "census_privelet": lambda led, noise, s, t: _release(plan_census(t, "privelet", pure(0.5), plus_axes=["age_band"]),
                                                         t, led, noise, s),
    "census_matrix": lambda led, noise, s, t: _release(
        plan_census(t, "matrix", zcdp(0.1), level="county", marginals="county*age_band"), t, led, noise, s),
}


class SpySession(Session):
    """An unaccounted session that keeps what it was asked to charge."""

    def __init__(self) -> None:
        super().__init__(None, accounted=False)
        self.charges: list[Any] = []

    def release(self, ledger, charge, run):  # type: ignore[no-untyped-def]
        self.charges.append(charge)
        return super().release(ledger, charge, run)


@pytest.mark.parametrize("which", list(RELEASES))
def test_the_session_charges_the_catalogues_plan(which: str, table: census_tables.CensusTable) -> None:
    led = Ledger(zcdp(1.0))
    s = SpySession()
    src = LedgerWatcher(led)
    rel = RELEASES[which](led, src, s, table)
    assert not src.first  # noise was drawn, after the charge
    (plan,) = s.charges
    assert isinstance(plan, Plan)
    (entry,) = led.entries
    assert entry.label == plan.label and entry.details == plan.details()
    assert entry.unit == plan.unit
    # the kind's own release object, stamped with the time of the charge
    assert not isinstance(rel, Plan) and rel.created == entry.time


@pytest.mark.parametrize("which", list(RELEASES))
def test_over_budget_is_refused_before_any_noise(which: str, table: census_tables.CensusTable) -> None:
    led = Ledger(zcdp(1e-4))
    with pytest.raises(BudgetError):
        RELEASES[which](led, NoDraw(0), None, table)
    assert led.spent == 0 and not led.entries


def test_ledger_entries_keep_their_labels_and_details(table: census_tables.CensusTable) -> None:
    entries = []
    for release in RELEASES.values():
        led = Ledger(zcdp(5.0))  # one budget each: their units of privacy differ
        release(led, NoiseSource(2), None, table)
        entries += led.entries
    points, hier, flows, priv, mx = entries
    assert points.label == catalog.get("points", "ug").title
    assert points.details["mechanism"] == "ug" and points.details["params"]["c"] == 10.0
    assert hier.label == catalog.get("hierarchy", "topdown_linf").title
    assert {"kind", "mechanism", "neighbour", "split", "split_weights", "statistic", "levels"} <= set(hier.details)
    assert (hier.details["kind"], hier.details["split"], hier.details["neighbour"]) == (
        "hierarchy", "geometric", "add_remove")
    assert flows.label == f"O/D: {catalog.get('od', 'inftda').title}"
    assert {"kind", "mechanism", "neighbour", "max_trips", "orientation", "split", "split_weights",
            "levels"} <= set(flows.details)
    assert (flows.details["neighbour"], flows.details["orientation"]) == ("replace", "origin")
    # the census entries keep the labels and details keys their releases had before the catalogue
    assert priv.label == "census release (Privelet+)"
    assert {"mechanism", "plus_axes", "levels"} <= set(priv.details) and priv.details["plus_axes"] == ["age_band"]
    assert mx.label == "census marginals (matrix mechanism)"
    assert {"mechanism", "level", "marginals"} <= set(mx.details) and mx.details["mechanism"] == "matrix"
    assert mx.details["kind"] == "census"  # the catalogue's kind; the mechanism says 'matrix'


def test_matrix_hierarchy_details_keep_the_strategy() -> None:
    led = Ledger(zcdp(1.0))
    counts = _hier_counts()
    pipeline.release(plan_hierarchy(counts, "matrix", zcdp(0.5), sets_weight=2.0), counts, ledger=led,
                     noise=NoiseSource(1))
    (entry,) = led.entries
    assert {"strategy", "level_weights", "area_sets"} <= set(entry.details) and "levels" not in entry.details
    assert entry.details["params"]["sets_weight"] == 2.0


# ---------------------------------------------------------------------------------------------
# released from the plan: planned (and checked) once
# ---------------------------------------------------------------------------------------------


def _count(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    calls = [0]
    original = getattr(owner, name)

    def counted(*a: Any, **k: Any) -> Any:
        calls[0] += 1
        return original(*a, **k)

    monkeypatch.setattr(owner, name, counted)
    return calls


@pytest.mark.parametrize(("which", "owner", "name"), [
    ("points", PointsMechanism, "resolve_params"),
    ("points", PointsMechanism, "cost"),
    ("hierarchy", TreeMechanism, "plan_tree"),
    ("od", ODMechanism, "plan_tree"),
    ("census_privelet", census_privelet, "plan_census"),
    ("census_matrix", census_matrix, "plan"),
])
def test_released_from_the_plan_without_planning_again(which: str, owner: Any, name: str,
                                                       table: census_tables.CensusTable,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count(monkeypatch, owner, name)
    RELEASES[which](Ledger(zcdp(1.0)), NoiseSource(3), None, table)
    assert calls[0] == 1


def test_planned_releases_match_the_direct_ones(table: census_tables.CensusTable) -> None:
    """Releasing from the plan draws exactly what the one-call releases draw."""
    via = pipeline.release(plan_census(table, "privelet", pure(0.5), plus_axes=["age_band"]), table,
                           ledger=Ledger(pure(1.0)), noise=NoiseSource(4)).inner
    led = Ledger(zcdp(5.0))
    direct = census_privelet.release_census(table, 0.5, NoiseSource(4), plus_axes=["age_band"])
    np.testing.assert_array_equal(via.noisy, direct.noisy)
    assert via.level_sd == direct.level_sd and via.lam == direct.lam
    counts = _hier_counts()
    via_h = pipeline.release(plan_hierarchy(counts, "exact", pure(0.5), split="geometric"), counts, ledger=led,
                             noise=NoiseSource(5)).inner
    direct_h = catalog.get("hierarchy", "exact").release_counts(counts, pure(0.5), NoiseSource(5), split="geometric")
    for a, b in zip(via_h.values, direct_h.values, strict=True):
        np.testing.assert_array_equal(a, b)
    c = _od_counts()
    via_o = pipeline.release(plan_od(c, "tda_l2", zcdp(0.1)), c, ledger=Ledger(zcdp(1.0)), noise=NoiseSource(6)).inner
    direct_o = catalog.get("od", "tda_l2").release_counts(c, zcdp(0.1), NoiseSource(6))
    for a, b in zip(via_o.values, direct_o.values, strict=True):
        np.testing.assert_array_equal(a, b)
    agg = _aggregate()
    via_p = pipeline.release(plan_points(agg, "ag", 0.5, {}), agg, ledger=led, noise=NoiseSource(7)).inner
    direct_p = release_with(catalog.get("points", "ag"), agg, 0.5, {}, NoiseSource(7))
    np.testing.assert_array_equal(via_p.noisy, direct_p.noisy)


# ---------------------------------------------------------------------------------------------
# checks before charging
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("mechanism", "cost", "opts"), [
    ("privelet", pure(0.5), {"plus_axes": ["nope"]}),
    ("privelet", zcdp(0.1), {}),  # Privelet is pure ε-DP
    ("privelet", pure(0.5), {"level": "county"}),  # a marginals option
    ("matrix", zcdp(0.1), {"marginals": "county*nope"}),
    ("matrix", zcdp(0.1), {"plus_axes": ["age_band"]}),
    ("nope", pure(0.5), {}),
])
def test_census_checks_before_spending(mechanism: str, cost: Any, opts: dict,
                                       table: census_tables.CensusTable) -> None:
    led = Ledger(zcdp(1.0))
    with pytest.raises(ParameterError):
        pipeline.release(plan_census(table, mechanism, cost, **opts), table, ledger=led, noise=NoDraw(0))
    assert led.spent == 0 and not led.entries


def test_census_unit_is_the_hierarchys_and_can_be_given(table: census_tables.CensusTable) -> None:
    led = Ledger(pure(2.0))
    pipeline.release(plan_census(table, "privelet", pure(0.5)), table, ledger=led, noise=NoiseSource(1))
    # the census and hierarchy releases of one table share its budget: one unit for both
    assert led.entries[0].unit == census_unit() == hierarchy_unit("add_remove")
    person_budget = Ledger(pure(2.0), unit=Unit("person", cap=3))
    pipeline.release(plan_census(table, "privelet", pure(0.5), unit=Unit("person", cap=3)), table,
                     ledger=person_budget, noise=NoiseSource(1))
    assert person_budget.spent == pytest.approx(0.5)


def test_hierarchy_order_is_intopts_parameter_and_checked_by_its_plan() -> None:
    """IntOpt's zeroing order is a parameter of ``topdown_linf`` only: its plan refuses an unknown
    order, the other mechanisms' plans refuse the name, and a bad neighbour word is refused by the
    unit, all before anything is spent."""
    led = Ledger(pure(1.0))
    counts = _hier_counts()
    with pytest.raises(ParameterError, match="'order' must be one of ascending, descending"):
        plan_hierarchy(counts, "topdown_linf", pure(0.1), order="sideways")
    with pytest.raises(ParameterError, match="has no parameter 'order'"):
        plan_hierarchy(counts, "exact", pure(0.1), order="descending")
    with pytest.raises(ParameterError, match="Neighbours"):
        plan_hierarchy(counts, "exact", pure(0.1), neighbour="sideways")
    assert not led.entries
    rel = pipeline.release(plan_hierarchy(counts, "exact", pure(0.1)), counts, ledger=led, noise=NoiseSource(0)).inner
    assert rel.details.get("zeroing_order") is None and "order" not in led.entries[0].details["params"]


def test_od_neighbour_checked_by_the_unit_before_the_plan() -> None:
    with pytest.raises(ParameterError, match="neighbour relation"):
        plan_od(_od_counts(), "inftda", zcdp(0.1), neighbour="sideways")


def test_points_n_estimate_only_adds_preview_rows() -> None:
    s1, s2 = SpySession(), SpySession()
    agg = _aggregate()
    a = pipeline.release(plan_points(agg, "ug", 0.5, {}), agg, ledger=Ledger(pure(1.0)), noise=NoiseSource(8),
                         session=s1).inner
    b = pipeline.release(plan_points(agg, "ug", 0.5, {}, n_estimate=200.0), agg, ledger=Ledger(pure(1.0)),
                         noise=NoiseSource(8), session=s2).inner
    np.testing.assert_array_equal(a.noisy, b.noisy)
    assert s1.charges[0].rows == () and s2.charges[0].rows
    assert s1.charges[0].details() == s2.charges[0].details()
