"""Refusals that depend on the data come before the budget is charged (issue 18, item 7).

Points (HTF's 2^36 points, DAWA's 2^34, ``auto`` running the checks of every mechanism it can
choose, counts for another grid or cap), hierarchies (the exact solver's and
the TopDown projections' ranges, the matrix mechanism's noise grid, counts for another plan),
census tables (another structure, the marginals' noise grid) and O/D trips (another plan, the
projections' range): each refusal leaves the ledger untouched, with or without a session, and
an ordinary release of the same mechanism is charged exactly once.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from areas_helpers import plan_census, plan_hierarchy
from flows_helpers import plan_od
from points_helpers import favour, plan_points

from dpcore import pipeline
from dpcore.areas.census_tables import CensusTable
from dpcore.areas.counts import HierarchyCounts
from dpcore.core.session import Session
from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import ParameterError
from dpcore.estimate import matrix_exact
from dpcore.estimate.matrix_strategy import Strategy, identity_strategy
from dpcore.flows.counts import ODCounts
from dpcore.flows.tree import hierarchy_from_prefixes
from dpcore.flows.unit import od_unit
from dpcore.points import recommend
from dpcore.points.mechanisms import dawa
from dpcore.points.mechanisms.htf_tree import MAX_POINTS
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource


def _aggregate(total: int) -> Aggregate:
    g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 4, 4)
    counts = np.zeros((4, 4), dtype=np.int64)
    counts[0, 0] = total
    return Aggregate(grid=g, counts=counts, n_outside=0, n_capped=0, sensitivity=1, user_cap=None)


@pytest.mark.parametrize("session", [None, Session()])
def test_htf_refuses_too_many_points_without_charging(session) -> None:
    led = Ledger(budget.pure(2.0))
    with pytest.raises(ParameterError, match="fewer than"):
        _release(plan_points, _aggregate(MAX_POINTS), "htf", 0.5, led, session=session)
    assert led.spent == 0 and not led.entries


@pytest.mark.parametrize("session", [None, Session()])
def test_dawa_refuses_too_many_points_without_charging(session) -> None:
    led = Ledger(budget.pure(2.0))
    with pytest.raises(ParameterError, match="DAWA's exact bucket costs"):
        _release(plan_points, _aggregate(dawa.MAX_POINTS), "dawa", 0.5, led, session=session)
    assert led.spent == 0 and not led.entries
    # one point fewer is released (exact costs), and charged once
    rel = _release(plan_points, _aggregate(dawa.MAX_POINTS - 1), "dawa", 0.5, led, session=session,
                   noise=NoiseSource(7)).inner
    assert len(led.entries) == 1 and led.spent == pytest.approx(0.5)
    assert abs(float(rel.noisy.sum()) - (dawa.MAX_POINTS - 1)) < 1e4


def _table_with(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The rule's table with one entry (1,000 points at ε = 0.01) naming ``name``: a mechanism the
    rule can choose, though not for the data of these tests."""
    table = dict(recommend.TABLE)
    key = (1000, 0.01, "0.1%")
    table[key] = (name, *table[key][1:])
    monkeypatch.setattr(recommend, "TABLE", table)


@pytest.mark.parametrize("session", [None, Session()], ids=["no-session", "session"])
@pytest.mark.parametrize(("name", "total", "words"), [("htf", MAX_POINTS, "HTF.*fewer than"),
                                                      ("dawa", dawa.MAX_POINTS, "DAWA.*exact bucket costs")])
def test_auto_runs_the_checks_of_every_mechanism_it_can_choose(monkeypatch, session, name, total, words) -> None:
    """``auto`` with rule 'table' chooses from its noisy count, after the charge: the data checks of every
    mechanism the rule can name run before it, and a refusal leaves the ledger untouched.  (Its default,
    'held_out_best', can release privtree_ag only, and runs that one's checks: test_auto_default.py.)"""
    _table_with(monkeypatch, name)
    led = Ledger(budget.pure(2.0))
    with pytest.raises(ParameterError, match=words):
        _release(plan_points, _aggregate(total), "auto", 0.5, led, session=session, noise=NoiseSource(8),
                 params={"rule": "table"})
    assert led.spent == 0 and not led.entries
    # the same table on data every candidate accepts: released and charged once
    _release(plan_points, _aggregate(5000), "auto", 0.5, led, session=session, noise=NoiseSource(8),
             params={"rule": "table"})
    assert len(led.entries) == 1 and led.spent == pytest.approx(0.5)


@pytest.mark.parametrize("session", [None, Session()], ids=["no-session", "session"])
def test_auto_runs_the_public_checks_of_every_mechanism_it_can_choose(monkeypatch, session) -> None:
    """The data-free rule (``feature_share=0``; the feature rule passes over refused configurations)
    names in its table DAWA with free starts (grids of 512² at most) for about 1,000
    points and PrivTree elsewhere.  The plan's guess (a million points) previews PrivTree; the noisy
    count of 1,000 points would choose DAWA after the charge.  So the public checks of every
    mechanism the table can name run before any charge: the refusal leaves the ledger untouched."""
    table = {key: ("dawa_free" if key[0] == 1000 else "privtree", *v[1:]) for key, v in recommend.TABLE.items()}
    monkeypatch.setattr(recommend, "TABLE", table)

    def points(side: int) -> Aggregate:
        counts = np.zeros((side, side), dtype=np.int64)
        counts[0, 0] = 1000
        return Aggregate(grid=Grid(Bounds(0.0, 0.0, 1.0, 1.0), side, side), counts=counts, n_outside=0,
                         n_capped=0, sensitivity=1, user_cap=None)

    led = Ledger(budget.pure(2.0))
    with pytest.raises(ParameterError, match="Auto may choose DAWA .free starts.*512 × 512"):
        _release(plan_points, points(1024), "auto", 1.0, led, session=session, noise=NoiseSource(8), n_estimate=1e6,
                 params={"feature_share": 0.0})
    _untouched(led)
    # a grid every mechanism of the table accepts: released (DAWA chosen from the noisy count), charged once
    rel = _release(plan_points, points(32), "auto", 1.0, led, session=session, noise=NoiseSource(8), n_estimate=1e6,
                 params={"feature_share": 0.0})
    assert rel.inner.public["auto"]["chosen"] == "dawa_free"
    assert len(led.entries) == 1 and led.spent == pytest.approx(1.0)
    # the feature rule (the default), made to prefer DAWA with free starts above all, passes over it
    # on the large grid (auto offers it up to 512² only): released, charged once more
    favour(monkeypatch, "dawa_free")
    rel = _release(plan_points, points(1024), "auto", 0.5, led, session=session, noise=NoiseSource(8), n_estimate=1e6)
    assert rel.inner.public["auto"]["chosen"] != "dawa_free"
    assert len(led.entries) == 2 and led.spent == pytest.approx(1.5)


def test_points_counts_for_another_grid_are_refused_without_charging() -> None:
    from dpcore import catalog

    mech = catalog.get("points", "ug")
    plan = mech.plan(Grid(Bounds(0.0, 0.0, 1.0, 1.0), 8, 8), 0.5, {})
    with pytest.raises(ParameterError, match="another grid"):
        mech.check_data(plan, _aggregate(10))


# ---------------------------------------------------------------------------------------------
# hierarchies, census tables and O/D (issue 18, item 7, for the other kinds)
# ---------------------------------------------------------------------------------------------

AREAS = pd.DataFrame({"state": ["01", "01", "01", "02", "02"], "county": ["001", "003", "005", "001", "003"]})
LEVELS = ["state", "county"]
SESSIONS = [None, Session()]


def _hier_counts(values, statistic: str = "count") -> HierarchyCounts:
    h = Hierarchy.from_frame(AREAS, LEVELS)
    return HierarchyCounts(h, np.asarray(values, dtype=np.int64), statistic=statistic)


def _census(values) -> CensusTable:
    t = CensusTable.from_frame(AREAS.assign(pop=1), LEVELS, "pop")
    return dataclasses.replace(t, counts=np.asarray(values, dtype=np.int64).reshape(t.counts.shape))


def _od(total: int) -> ODCounts:
    h = hierarchy_from_prefixes(["1001", "1002", "2001"], [2, 4], ["state", "county"])
    c = ODCounts.from_frame(pd.DataFrame({"o": ["1001"], "d": ["2001"]}), h, origin="o", destination="d")
    return dataclasses.replace(c, count=np.array([total], dtype=np.int64))


def _release(plan_of, data, name: str, cost, led: Ledger, *, session=None, noise=None, **params):
    """Plan ``name`` for ``data`` with ``plan_of`` (the catalogue's plan, as the app builds it) and
    release that plan through :func:`dpcore.pipeline.release`."""
    return pipeline.release(plan_of(data, name, cost, **params), data, ledger=led, session=session, noise=noise)


def _untouched(led: Ledger) -> None:
    assert led.spent == 0 and not led.entries


# each case: (release function, arguments, the refusal's words); every one is refused for its
# data, which the pipeline must decide before the session charges
HUGE = 2**46  # five areas of 2^46: a total beyond the exact solver's 2^47
REFUSED = {
    "exact": (lambda led, s: _release(plan_hierarchy, _hier_counts([HUGE] * 5), "exact", budget.pure(0.5),
                                                        led, session=s), "exact solver"),
    "exact_replace": (lambda led, s: _release(plan_hierarchy,
        _hier_counts([HUGE] * 5), "exact", budget.pure(0.5), led, session=s, neighbour="replace"), "exact solver"),
    "group_sizes": (lambda led, s: _release(plan_hierarchy,
        _hier_counts(np.full((5, 2), HUGE), "group_sizes"), "dpc_approx", budget.pure(0.5), led, session=s,
        neighbour="replace"), "exact solver"),
    "topdown_l2": (lambda led, s: _release(plan_hierarchy, _hier_counts([2**56] * 5), "topdown_l2",
                                                             budget.zcdp(0.5), led, session=s), "exact integer"),
    "topdown_linf": (lambda led, s: _release(plan_hierarchy, _hier_counts([2**56] * 5), "topdown_linf",
                                                               budget.zcdp(0.5), led, session=s), "exact integer"),
    "hierarchy_matrix": (lambda led, s: _release(plan_hierarchy, _hier_counts([2**50] * 5), "matrix",
                                                                   budget.zcdp(0.5), led, session=s), "62 bits"),
    "census_marginals": (lambda led, s: _release(plan_census, _census([2**50] * 5), "matrix", budget.zcdp(0.5),
                                                                led, session=s), "62 bits"),
    "od_inftda": (lambda led, s: _release(plan_od, _od(2**58), "inftda", budget.zcdp(0.5), led, session=s),
                  "exact integer"),
    "od_tda_l2": (lambda led, s: _release(plan_od, _od(2**58), "tda_l2", budget.zcdp(0.5), led, session=s),
                  "exact integer"),
}


@pytest.mark.parametrize("session", SESSIONS, ids=["no-session", "session"])
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_data_refusals_of_every_kind_come_before_the_charge(case: str, session) -> None:
    run, words = REFUSED[case]
    led = Ledger(budget.zcdp(4.0))
    with pytest.raises(ParameterError, match=words):
        run(led, session)
    _untouched(led)


# the same mechanisms on ordinary data: released, and charged exactly once
CHARGED = {
    "exact": lambda led, s: _release(plan_hierarchy, _hier_counts([5, 0, 7, 3, 9]), "exact", budget.zcdp(0.5),
                                                       led, session=s, noise=NoiseSource(1)),
    "group_sizes": lambda led, s: _release(plan_hierarchy,
        _hier_counts([[1, 0], [2, 1], [0, 0], [3, 1], [1, 2]], "group_sizes"), "dpc_approx", budget.zcdp(0.5),
        led, session=s, noise=NoiseSource(1), neighbour="replace"),
    "topdown_linf": lambda led, s: _release(plan_hierarchy, _hier_counts([5, 0, 7, 3, 9]), "topdown_linf",
                                                              budget.zcdp(0.5), led, session=s, noise=NoiseSource(1)),
    "hierarchy_matrix": lambda led, s: _release(plan_hierarchy, _hier_counts([5, 0, 7, 3, 9]), "matrix",
                                                                  budget.zcdp(0.5), led, session=s,
                                                                  noise=NoiseSource(1)),
    "census_privelet": lambda led, s: _release(plan_census, _census([5, 0, 7, 3, 9]), "privelet",
                                                              budget.pure(0.5), led, session=s, noise=NoiseSource(1)),
    "census_marginals": lambda led, s: _release(plan_census, _census([5, 0, 7, 3, 9]), "matrix", budget.zcdp(0.5),
                                                               led, session=s, noise=NoiseSource(1)),
    "od_inftda": lambda led, s: _release(plan_od, _od(12), "inftda", budget.zcdp(0.5), led, session=s,
                                                    noise=NoiseSource(1)),
}


@pytest.mark.parametrize("session", SESSIONS, ids=["no-session", "session"])
@pytest.mark.parametrize("case", sorted(CHARGED))
def test_an_ordinary_release_of_every_kind_charges_once(case: str, session) -> None:
    cap = budget.pure(4.0) if case == "census_privelet" else budget.zcdp(4.0)
    led = Ledger(cap)
    assert CHARGED[case](led, session) is not None
    assert len(led.entries) == 1 and led.spent == pytest.approx(0.5)


def test_counts_that_do_not_match_the_plan_are_refused_by_check_data() -> None:
    """The plan/counts mismatches the releases used to find after the charge are check_data's now."""
    from dpcore import catalog

    counts = _hier_counts([5, 0, 7, 3, 9])
    other = Hierarchy.from_frame(AREAS.iloc[:4], LEVELS)
    mech = catalog.get("hierarchy", "exact")
    plan = mech.plan(other, budget.zcdp(0.5), {})
    with pytest.raises(ParameterError, match="another hierarchy"):
        mech.check_data(plan, counts)
    plan = mech.plan(counts.hierarchy, budget.zcdp(0.5), {}, statistic="group_sizes", k=2)
    with pytest.raises(ParameterError, match="group_sizes"):
        mech.check_data(plan, counts)

    t = _census([5, 0, 7, 3, 9])
    small = CensusTable.from_frame(AREAS.iloc[:4].assign(pop=1), LEVELS, "pop")
    for name, cost in (("privelet", budget.pure(0.5)), ("matrix", budget.zcdp(0.5))):
        mech = catalog.get("census", name)
        with pytest.raises(ParameterError, match="another structure"):
            mech.check_data(mech.plan(small.structure, cost, {}), t)

    trips = _od(12)
    mech = catalog.get("od", "inftda")
    plan = mech.plan((trips.origin_h, trips.destination_h), budget.zcdp(0.5), {},
                     unit=od_unit("replace", 3, persons=True))
    with pytest.raises(ParameterError, match="trip"):
        mech.check_data(plan, trips)


@pytest.mark.parametrize("k", [0, -20, 7])
def test_the_matrix_grid_check_covers_every_refusal_of_the_exact_answers(k: int) -> None:
    """``check_units`` passing means ``grid_units`` cannot refuse: tried at the edge of 2^62 units,
    on an integer and a real-valued strategy."""
    rng = np.random.default_rng(k + 100)
    strategies = [identity_strategy(3), Strategy("matrix", 3, A=np.array([[0.7, 0.2, 0.1], [1.0, -1.0, 0.5]]))]
    for s in strategies:
        for j in range(0, 62, 3):
            top = 2.0 ** (62 + k) * (1 - 2.0**-j) if j else 2.0 ** (62 + k)
            x = np.floor(rng.uniform(0.0, 1.0, 3) * top)
            try:
                matrix_exact.check_units(s, x, k)
            except ParameterError:
                continue
            matrix_exact.grid_units(s, x, k)  # never refuses after check_units passed
        with pytest.raises(ParameterError, match="62 bits"):
            matrix_exact.check_units(s, np.full(3, 2.0 ** (63 + k)), k)
