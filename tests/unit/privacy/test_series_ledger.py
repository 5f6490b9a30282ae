"""Budgets over time: parallel composition across periods (event, person-period), sequential for a
person over the horizon, the horizon figure and its cap, population identity, the office listing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpcore.core.session import Charge, Session
from dpcore.errors import BudgetError, ParameterError
from dpcore.privacy.budget import pure, zcdp, zcdp_to_approx_dp
from dpcore.privacy.series_ledger import find_population, list_budgets
from dpcore.privacy.units import TimeUnit, Unit
from dpcore.series import sample_periods

PERSON = Unit("person", cap=2)


def _charge(session: Session, budget, period: str, cost) -> None:
    session.release(budget.ledger(period), Charge(cost, f"release {period}", unit=budget.unit.base), lambda: None)


def test_event_periods_compose_in_parallel_each_with_the_per_period_cap(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    budget = session.series_budget("points", "whole", [("d1", "a")], TimeUnit("event", Unit(), "day"),
                                   default=pure(0.25))
    for day in ("d1", "d2", "d3"):
        _charge(session, budget, day, pure(0.1))
        _charge(session, budget, day, pure(0.1))
    # each day spent 0.2 of its own 0.25: three days in parallel, not 0.6 of one budget
    assert budget.per_period() == pytest.approx({"d1": 0.2, "d2": 0.2, "d3": 0.2})
    with pytest.raises(BudgetError, match="Not enough privacy budget"):
        _charge(session, budget, "d2", pure(0.1))  # 0.3 > 0.25 in d2
    _charge(session, budget, "d4", pure(0.1))  # a new day has its own budget
    # horizon for a person present every day: ρ = Σ ε²/2 over the charges per day = 3·(0.2²/2) + 0.1²/2
    h = budget.horizon()
    assert h["rho"] == pytest.approx(3 * 0.02 + 0.005)
    assert h["epsilon_pure"] == pytest.approx(0.7)
    assert h["periods"] == 4
    assert h["epsilon"][1]["epsilon"] == pytest.approx(zcdp_to_approx_dp(0.065, 1e-6))
    assert h["projection"]["rho"] == pytest.approx(0.065 / 4 * 365)


def test_a_person_over_the_horizon_composes_sequentially_against_one_budget(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    unit = TimeUnit("person", PERSON, "week", max_periods=3)
    budget = session.series_budget("flows", "whole", [], unit, default=zcdp(0.1))
    for week in ("w1", "w2", "w3", "w4"):
        _charge(session, budget, week, zcdp(0.02))
    # one ledger: 4 × 0.02 = 0.08 of the horizon cap 0.1, the fifth week (0.10) still fits, a sixth does not
    assert budget.ledger("w9").spent == pytest.approx(0.08)
    _charge(session, budget, "w5", zcdp(0.02))
    with pytest.raises(BudgetError, match="Not enough privacy budget"):
        _charge(session, budget, "w6", zcdp(0.02))
    assert budget.per_period() == pytest.approx({f"w{i}": 0.02 for i in range(1, 6)})
    assert budget.horizon()["rho"] == pytest.approx(0.10)


def test_the_horizon_cap_refuses_what_would_pass_it(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    budget = session.series_budget("points", "whole", [], TimeUnit("person-period", PERSON, "day"),
                                   default=zcdp(0.5), horizon_cap=zcdp(0.05))
    for day in ("d1", "d2"):
        _charge(session, budget, day, zcdp(0.02))
    with pytest.raises(BudgetError, match="past the horizon cap"):
        _charge(session, budget, "d3", zcdp(0.02))  # 0.06 > 0.05 although d3's own budget is untouched
    assert budget.ledger("d3").spent == 0.0
    _charge(session, budget, "d3", zcdp(0.01))  # exactly 0.05
    assert budget.horizon()["rho"] == pytest.approx(0.05)


def test_a_budget_keeps_its_unit_and_period(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    session.series_budget("points", "w", [], TimeUnit("event", Unit(), "day"), default=pure(1))
    with pytest.raises(BudgetError, match="accounted as one record, per day"):
        session.series_budget("points", "w", [], TimeUnit("event", Unit(), "week"), default=pure(1))


def test_a_named_population_refuses_an_event_series(tmp_path: Path) -> None:
    """Issue 26 item 15 for series: a named population's budget protects persons, so a series that
    protects one record per period (unit 'event') cannot open or join it; a person unit can."""
    session = Session.open(tmp_path / "l.sqlite")
    with pytest.raises(BudgetError, match="protects one record per period"):
        session.series_budget("points", "w", [("d1", "a")], TimeUnit("event", Unit(), "day"), default=pure(1),
                              population="Survey")
    person_day = TimeUnit("person-period", Unit("person", cap=2), "day")
    session.series_budget("points", "w", [("d1", "a")], person_day, default=pure(1), population="Survey")
    with pytest.raises(BudgetError, match="protects one record per period"):  # nor join it once opened
        session.series_budget("areas", "t", [("d1", "b")], TimeUnit("event", Unit(), "day"), default=pure(1),
                              population="Survey")


def test_the_population_survives_a_late_record_in_one_period(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    store = session.store
    unit = TimeUnit("event", Unit(), "day")
    budget = session.series_budget("points", "whole-1", [("d1", "a"), ("d2", "b")], unit, default=pure(1))
    budget.keep("plan", "d1", "a", {"release.csv": b"x"}, {})
    budget.keep("plan", "d2", "b", {"release.csv": b"y"}, {})
    # d2 got a late record: the whole data's fingerprint changed, d1's data did not
    key, rule = find_population(store, "points", [("d1", "a"), ("d2", "b2")], "whole-2")
    assert (key, rule) == (budget.population, "matched")
    # other data: a population of its own
    assert find_population(store, "points", [("d1", "z")], "whole-3")[1] == "new"
    # a stored empty period is re-served like any other (the caller matches non-empty periods only)
    budget.keep("plan", "d3", "empty", {"release.csv": b"z"}, {}, empty=True)
    assert budget.stored("plan", "d3", "empty")[0].files == {"release.csv": b"z"}
    # a name for data already released under another budget is refused (it would start afresh) ...
    with pytest.raises(BudgetError, match="fresh budget"):
        find_population(store, "points", [("d1", "a")], "w", name="Survey")
    # ... and accepted for new data, whose later releases then find the named population
    person_day = TimeUnit("person-period", Unit("person", cap=2), "day")  # a population protects persons
    named = session.series_budget("points", "w5", [("d1", "n")], person_day, default=pure(1), population="Survey")
    named.keep("plan", "d1", "n", {"release.csv": b"n"}, {})
    assert find_population(store, "points", [("d1", "n"), ("d2", "m")], "w6") == (named.population, "matched")
    assert find_population(store, "points", [("d1", "n")], "w6", name="Survey") == (named.population, "named")


def test_time_unit_checks() -> None:
    with pytest.raises(ParameterError, match="--max-periods"):
        TimeUnit("person", PERSON, "day")
    with pytest.raises(ParameterError, match="person column"):
        TimeUnit("person-period", Unit(), "day")
    with pytest.raises(ParameterError, match="drop the person column"):
        TimeUnit("event", PERSON, "day")


def test_max_periods_sampling_bounds_each_persons_periods() -> None:
    rng = np.random.default_rng(1)
    users = rng.integers(0, 200, 20_000)
    periods = rng.integers(-1, 30, 20_000)
    keep = sample_periods(users, periods, 3, "0123456789abcdef")
    touched = {}
    for u, p in zip(users[keep], periods[keep], strict=True):
        touched.setdefault(u, set()).add(p)
    assert max(len(s) for s in touched.values()) == 3  # at most w, and w reached (everyone touches more)
    assert (periods[keep] >= 0).all()
    # a person keeps all records of a period kept (periods are sampled, not records)
    kept_pairs = {(u, p) for u, p in zip(users[keep], periods[keep], strict=True)}
    assert all(keep[i] for i in range(len(users)) if (users[i], periods[i]) in kept_pairs)
    # not the data's order: the same pairs in another order keep the same pairs
    perm = rng.permutation(len(users))
    keep2 = sample_periods(users[perm], periods[perm], 3, "0123456789abcdef")
    assert {(u, p) for u, p in zip(users[perm][keep2], periods[perm][keep2], strict=True)} == kept_pairs
    # another key, another choice
    keep3 = sample_periods(users, periods, 3, "fedcba9876543210")
    assert {(u, p) for u, p in zip(users[keep3], periods[keep3], strict=True)} != kept_pairs


def test_the_periods_a_person_keeps_follow_the_labels_not_the_positions() -> None:
    """A request over another range numbers the periods differently; each person must keep the
    same periods, or across two requests one person could be in more than w periods."""
    rng = np.random.default_rng(2)
    users = rng.integers(0, 50, 3000)
    labels = np.array([f"2024-01-{d:02d}" for d in range(1, 11)])
    day = rng.integers(0, 10, 3000)
    keep_a = sample_periods(users, day, 3, "0123456789abcdef", labels[day])
    keep_b = sample_periods(users, day + 5, 3, "0123456789abcdef", labels[day])  # same days, shifted positions
    assert np.array_equal(keep_a, keep_b)
    by_index = sample_periods(users, day + 5, 3, "0123456789abcdef")
    assert not np.array_equal(keep_a, by_index)  # positions alone give another choice


def test_list_budgets_reports_one_off_and_series_budgets(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    one = session.budget("points", "fp", default=pure(1.0))
    session.release(one, Charge(pure(0.3), "one-off"), lambda: None)
    budget = session.series_budget("flows", "w", [], TimeUnit("person-period", PERSON, "week"), default=zcdp(0.5),
                                   population="Taxi riders")
    for week in ("2020-W14", "2020-W15"):
        _charge(session, budget, week, zcdp(0.05))
    rows = {r["population"]: r for r in list_budgets(session.store)}
    assert set(rows) == {one.dataset, "Taxi riders"}
    s = rows["Taxi riders"]
    assert s["unit"]["scope"] == "person-period" and s["cap"]["value"] == 0.5 and s["cap_per"] == "period"
    assert s["periods"] == [{"period": "2020-W14", "spent": 0.05, "releases": 1},
                            {"period": "2020-W15", "spent": 0.05, "releases": 1}]
    assert s["spent"] == pytest.approx(0.05) and s["horizon"]["rho"] == pytest.approx(0.10)
    assert s["horizon"]["projection"]["rho"] == pytest.approx(0.05 * 52)
    assert rows[one.dataset]["spent"] == pytest.approx(0.3) and rows[one.dataset]["periods"] == []


def test_a_batch_of_periods_is_charged_in_one_transaction_before_any_release_runs(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    budget = session.series_budget("points", "whole", [], TimeUnit("event", Unit(), "day"), default=pure(0.25),
                                   horizon_cap=zcdp(0.0125))  # ρ: 10 days at ε = 0.05 (ρ 0.00125 each), not 12
    ledgers = [budget.ledger(f"d{i}") for i in range(3)]
    seen = []

    def run() -> str:  # every charge of the batch is committed (read by another session) before any release
        other = Session.open(tmp_path / "l.sqlite").series_budget(
            "points", "whole", [], TimeUnit("event", Unit(), "day"), default=pure(0.25))
        seen.append(other.per_period())
        return "released"

    out = session.release_many(ledgers, Charge(pure(0.05), "day", unit=Unit()), [run, run, run])
    assert out == ["released"] * 3 and seen[0] == pytest.approx({"d0": 0.05, "d1": 0.05, "d2": 0.05})
    # a batch one of whose charges would pass the horizon cap charges none of them
    more = [budget.ledger(f"d{i}") for i in range(3, 12)]
    with pytest.raises(BudgetError, match="horizon cap"):
        session.release_many(more, Charge(pure(0.05), "day", unit=Unit()), [lambda: None] * len(more))
    assert sorted(budget.per_period()) == ["d0", "d1", "d2"]
    assert [led.spent for led in more] == [0.0] * len(more)
