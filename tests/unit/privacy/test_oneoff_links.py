"""One-off releases and series of the same data compose both ways (dpcore.privacy.oneoff_links):
hand-computed totals, one-off then series and series then one-off."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpcore.core.session import Charge, Session
from dpcore.errors import BudgetError
from dpcore.privacy.budget import pure, zcdp
from dpcore.privacy.units import TimeUnit, Unit

EVENT = TimeUnit("event", Unit(), "day")
ONE = pure(1.0)


def _series(session: Session, unit: TimeUnit = EVENT, cap=ONE, **kw):
    return session.series_budget("points", "whole", [("d1", "a")], unit, default=cap,
                                 oneoff=[("points", "fp-input")], **kw)


def _oneoff(session: Session, cost, cap=ONE, unit: Unit | None = None, population: str | None = None):
    ledger = session.budget("points", "fp-input", default=cap, unit=unit or Unit(), population=population)
    session.release(ledger, Charge(cost, "one-off", unit=unit or Unit()), lambda: None)
    return ledger


def _period(session: Session, budget, period: str, cost) -> None:
    session.release(budget.ledger(period), Charge(cost, period, unit=budget.unit.base), lambda: None)


def test_oneoff_then_series_each_period_fits_after_the_oneoff(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    _oneoff(session, pure(0.3))
    budget = _series(session)
    # period cap 1.0: the one-off's 0.3 counts in every period, so 0.8 does not fit, 0.6 does (0.9)
    with pytest.raises(BudgetError, match="Not enough privacy budget"):
        _period(session, budget, "d1", pure(0.8))
    _period(session, budget, "d1", pure(0.6))
    _period(session, budget, "d2", pure(0.4))
    assert budget.ledger("d1").spent == pytest.approx(0.9)
    assert budget.ledger("d2").spent == pytest.approx(0.7)
    assert budget.ledger("d3").spent == pytest.approx(0.3)  # not charged yet: the one-off only
    # a second one-off: own 0.3 + largest period 0.6 + new ≤ 1.0, and d1: 0.6 + 0.3 + new ≤ 1.0
    with pytest.raises(BudgetError, match="series of this data"):
        _oneoff(session, pure(0.15))
    _oneoff(session, pure(0.1))
    assert budget.ledger("d1").spent == pytest.approx(1.0)
    with pytest.raises(BudgetError):
        _period(session, budget, "d1", pure(0.01))
    # the horizon (a person with one record in each period): Σ periods + the record-level one-offs
    # as a group of the 2 charged periods: ε = 0.6 + 0.4 + 2 · 0.4 = 1.8
    assert budget.horizon()["epsilon_pure"] == pytest.approx(1.8)


def test_series_then_oneoff_fits_under_the_largest_period_spend(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    budget = _series(session)
    _period(session, budget, "d1", pure(0.6))
    _period(session, budget, "d2", pure(0.2))
    with pytest.raises(BudgetError, match="spent up to ε = 0.6"):
        _oneoff(session, pure(0.5))  # 0.6 + 0.5 > 1.0
    ledger = _oneoff(session, pure(0.4))  # 0.6 + 0.4 = 1.0
    assert ledger.series_spent == pytest.approx(0.6)
    # the periods now count the one-off: d2 has 0.2 + 0.4, so 0.5 does not fit there, 0.4 does
    with pytest.raises(BudgetError, match="Not enough privacy budget"):
        _period(session, budget, "d2", pure(0.5))
    _period(session, budget, "d2", pure(0.4))
    assert budget.ledger("d2").spent == pytest.approx(1.0)
    with pytest.raises(BudgetError):
        budget.precheck(pure(0.7), ["d3"])  # a new period: 0.4 + 0.7 > 1.0
    budget.precheck(pure(0.6), ["d3"])


def test_a_period_cap_smaller_than_the_oneoff_cap_refuses_the_oneoff(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    budget = _series(session, cap=pure(0.5))
    _period(session, budget, "d1", pure(0.3))
    # one-off cap 1.0 leaves 0.7, but period d1 (cap 0.5) has only 0.2 left
    with pytest.raises(BudgetError, match="period d1"):
        _oneoff(session, pure(0.3))
    _oneoff(session, pure(0.2))


def test_zcdp_horizon_counts_a_person_level_oneoff_once_and_its_cap_refuses(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    person = Unit("person", cap=3)
    unit = TimeUnit("person-period", person, "week")
    budget = _series(session, unit, cap=zcdp(0.1), horizon_cap=zcdp(0.1))
    for w in ("w1", "w2", "w3"):
        _period(session, budget, w, zcdp(0.02))
    _oneoff(session, zcdp(0.01), cap=zcdp(0.5), unit=person)
    # ρ = 3 · 0.02 + 0.01 (the person-level one-off once) = 0.07; each week: 0.02 + 0.01
    assert budget.horizon()["rho"] == pytest.approx(0.07)
    assert budget.ledger("w1").spent == pytest.approx(0.03)
    _period(session, budget, "w4", zcdp(0.02))  # 0.09
    with pytest.raises(BudgetError, match="horizon"):
        _oneoff(session, zcdp(0.02), cap=zcdp(0.5), unit=person)  # 0.11 > 0.1
    with pytest.raises(BudgetError, match="horizon"):
        _period(session, budget, "w5", zcdp(0.02))


def test_a_record_level_oneoff_cannot_count_towards_a_person_period_series(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    _oneoff(session, zcdp(0.01), cap=zcdp(0.5))
    budget = _series(session, TimeUnit("person-period", Unit("person", cap=2), "day"), cap=zcdp(0.5))
    with pytest.raises(BudgetError, match="share one budget"):
        _period(session, budget, "d1", zcdp(0.01))


def test_a_named_population_links_its_oneoff_and_its_series(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    person = Unit("person", cap=1)  # a named population protects persons (issue 26 item 15)
    _oneoff(session, pure(0.5), unit=person, population="survey")
    # another input (no oneoff pairs), the same named population: linked by the name
    budget = session.series_budget("points", "other", [("d1", "b")], TimeUnit("person-period", person, "day"),
                                   default=pure(1.0), population="survey")
    with pytest.raises(BudgetError, match="Not enough privacy budget"):
        _period(session, budget, "d1", pure(0.6))
    _period(session, budget, "d1", pure(0.5))
    with pytest.raises(BudgetError):
        _oneoff(session, pure(0.01), unit=person, population="survey")


def test_an_event_series_cannot_join_the_population_its_data_is_bound_to(tmp_path: Path) -> None:
    """Item 15 for series: data bound to a named population (one-off, person unit) cannot be released
    as an event series linked to that population, which would charge records to a person budget."""
    session = Session.open(tmp_path / "l.sqlite")
    person = Unit("person", cap=1)
    _oneoff(session, pure(0.2), unit=person, population="survey")
    with pytest.raises(BudgetError, match="protects one record per period"):
        session.series_budget("points", "whole", [("d1", "a")], TimeUnit("event", Unit(), "day"),
                              default=pure(1.0), oneoff=[("points", "fp-input")])
    session.series_budget("points", "whole", [("d1", "a")], TimeUnit("person-period", person, "day"),
                          default=pure(1.0), oneoff=[("points", "fp-input")])


def test_unlinked_data_keeps_its_own_budget(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    ledger = session.budget("points", "other-data", default=pure(1.0), unit=Unit())
    session.release(ledger, Charge(pure(0.9), "one-off"), lambda: None)
    budget = _series(session)
    _period(session, budget, "d1", pure(1.0))  # other data: not linked, nothing counted


def test_the_office_view_counts_the_oneoff_in_every_period_and_once_in_the_horizon(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    _oneoff(session, zcdp(0.1), cap=zcdp(1.0), unit=Unit("person", cap=2))
    budget = _series(session, TimeUnit("person-period", Unit("person", cap=2), "day"), cap=zcdp(0.5))
    _period(session, budget, "d1", zcdp(0.2))
    _period(session, budget, "d2", zcdp(0.05))
    (row,) = [r for r in session.budgets() if r["periods"]]
    assert [p["spent"] for p in row["periods"]] == pytest.approx([0.3, 0.15]) and row["spent"] == pytest.approx(0.3)
    assert row["horizon"]["rho"] == pytest.approx(0.2 + 0.05 + 0.1)  # a person-level one-off once
    assert row["horizon"] == budget.horizon()


def test_a_oneoff_counts_the_cumulative_release_of_its_series(tmp_path: Path) -> None:
    """A cumulative release of the series covers every period like a one-off: a record of day d1 loses
    the one-off's spends, d1's 0.3 and the cumulative's 0.4.  Under the one-off's cap ρ 0.8 (periods:
    ρ 2) a one-off of 0.2 fits, 0.5 does not (before: 0.3 + 0.5 = 0.8 was taken, 1.2 with the cumulative)."""
    session = Session.open(tmp_path / "l.sqlite")
    budget = _series(session, cap=zcdp(2.0))
    _period(session, budget, "d1", zcdp(0.3))
    session.release(budget.cumulative_ledger(), Charge(zcdp(0.4), "cumulative", unit=Unit()), lambda: None)
    with pytest.raises(BudgetError, match="spent up to ρ = 0.7 in one period"):
        _oneoff(session, zcdp(0.5), cap=zcdp(0.8))
    assert _oneoff(session, zcdp(0.1), cap=zcdp(0.8)).series_spent == pytest.approx(0.7)


def test_a_period_past_a_lowered_cap_refuses_only_charges_of_its_own_records(tmp_path: Path) -> None:
    """The series side counts the records of the periods it charges (each record is in one period):
    after the one-off cap is lowered below period d1's spend, d1 takes nothing more, but d2's
    records (0.1, then 0.4 more) still fit the cap, and a charge that would take them past it is
    refused; before, every period was refused on d1's state (the series "would add 0.9")."""
    session = Session.open(tmp_path / "l.sqlite")
    oneoff = session.budget("points", "fp-input", default=pure(2.0), unit=Unit())
    budget = _series(session)
    _period(session, budget, "d1", pure(0.9))
    assert session.set_cap(oneoff, pure(0.5))  # lowering needs no confirmation
    _period(session, budget, "d2", pure(0.1))
    budget.precheck(pure(0.4), ["d2", "d3"])  # a batch: d2's 0.1 + 0.4 and d3's 0.4 fit 0.5
    session.release_many([budget.ledger("d2"), budget.ledger("d3")], Charge(pure(0.4), "batch", unit=Unit()),
                         [lambda: None, lambda: None])
    assert budget.ledger("d2").spent == pytest.approx(0.5) and budget.ledger("d3").spent == pytest.approx(0.4)
    for period, cost in (("d1", 0.01), ("d2", 0.01), ("d3", 0.2)):
        with pytest.raises(BudgetError, match="one-off budget of this data"):
            _period(session, budget, period, pure(cost))
    with pytest.raises(BudgetError, match="one-off budget of this data"):
        budget.precheck(pure(0.2), ["d3", "d4"])
    assert budget.ledger("d1").spent == pytest.approx(0.9)  # nothing charged by the refusals
    with pytest.raises(BudgetError, match="spent up to ε = 0.9"):  # a one-off reaches d1's records
        session.release(oneoff, Charge(pure(0.01), "one-off", unit=Unit()), lambda: None)
