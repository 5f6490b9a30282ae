"""A series' period charge must fit the caps of the one-off budgets it is linked to, their group's and
the other series' of the same data (privacy review, finding 1), whatever the order of the releases;
and a series linked to a budget it cannot be counted with reads as used up, never raises on read
(finding 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpcore.core.session import Charge, Session
from dpcore.errors import BudgetError
from dpcore.privacy import budget_groups
from dpcore.privacy.budget import pure, zcdp
from dpcore.privacy.series_ledger import list_budgets
from dpcore.privacy.units import TimeUnit, Unit

EVENT = TimeUnit("event", Unit(), "month")
ONE = pure(1.0)


def _series(session: Session, whole: str = "whole", data: str = "a", oneoff: str = "fp-input", cap=ONE):
    return session.series_budget("points", whole, [("2026-01", data)], EVENT, default=cap,
                                 oneoff=[("points", oneoff)])


def _oneoff(session: Session, cost, cap=ONE, fp: str = "fp-input"):
    ledger = session.budget("points", fp, default=cap, unit=Unit())
    session.release(ledger, Charge(cost, "one-off", unit=Unit()), lambda: None)
    return ledger


def _period(session: Session, budget, period: str, cost) -> None:
    session.release(budget.ledger(period), Charge(cost, period, unit=budget.unit.base), lambda: None)


def test_a_period_charge_must_fit_the_smaller_cap_of_its_oneoff(tmp_path: Path) -> None:
    """O cap 0.5, P period cap 1.0: P 2026-01 0.4, O 0.1 (0.1 + 0.4 ≤ 0.5); P 2026-02 0.9 would make a
    record of 2026-02 lose 1.0, twice O's cap: refused (precheck and charge), 0.4 fits."""
    session = Session.open(tmp_path / "l.sqlite")
    p = _series(session)
    _period(session, p, "2026-01", pure(0.4))
    o = _oneoff(session, pure(0.1), cap=pure(0.5))
    with pytest.raises(BudgetError, match="one-off") as err:
        p.precheck(pure(0.9), ["2026-02"])
    assert "ε = 0.5" in str(err.value)
    with pytest.raises(BudgetError, match="one-off"):
        _period(session, p, "2026-02", pure(0.9))
    assert p.ledger("2026-02").spent == pytest.approx(0.1)  # rolled back: the one-off only
    assert p.per_period() == {"2026-01": pytest.approx(0.4)}
    p.precheck(pure(0.4), ["2026-02"])
    _period(session, p, "2026-02", pure(0.4))
    assert o.can_spend(pure(0.01)) is False


def test_two_series_of_the_same_data_count_together_under_the_oneoff_cap(tmp_path: Path) -> None:
    """O, P, Q caps 1.0: O 0.2, P 0.8 accepted; Q 0.8 would make a record in both lose 1.8: refused."""
    session = Session.open(tmp_path / "l.sqlite")
    o = _oneoff(session, pure(0.2))
    p = _series(session, "whole-p", "a")
    q = _series(session, "whole-q", "b")
    assert p.population != q.population
    _period(session, p, "2026-01", pure(0.8))
    with pytest.raises(BudgetError, match="one-off"):
        q.precheck(pure(0.8), ["2026-01"])
    with pytest.raises(BudgetError, match="one-off"):
        _period(session, q, "2026-01", pure(0.8))
    assert q.per_period() == {}
    assert o.remaining == pytest.approx(0.0) and o.can_spend(pure(0.01)) is False


def test_a_period_charge_must_fit_the_lowest_cap_of_the_group(tmp_path: Path) -> None:
    """A cap 0.5 spent 0.2, C cap 1.0 spent 0.2, group {A, C}; P linked to C: 0.6 in one period would
    make a record lose 1.0 against the lowest cap 0.5: refused; 0.1 fits (0.5)."""
    session = Session.open(tmp_path / "l.sqlite")
    a = _oneoff(session, pure(0.2), cap=pure(0.5), fp="fp-a")
    c = _oneoff(session, pure(0.2), fp="fp-c")
    with session.store.transaction() as con:
        budget_groups.record(con, [a._fp, c._fp])  # noqa: SLF001 - the budgets' keys
    p = _series(session, oneoff="fp-c")
    with pytest.raises(BudgetError):
        p.precheck(pure(0.6), ["2026-01"])
    with pytest.raises(BudgetError):
        _period(session, p, "2026-01", pure(0.6))
    assert p.per_period() == {}
    _period(session, p, "2026-01", pure(0.1))
    assert p.per_period() == {"2026-01": pytest.approx(0.1)}


def test_a_zcdp_series_linked_to_a_pure_oneoff_is_refused_at_series_time(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    _oneoff(session, pure(0.2))
    p = _series(session, cap=zcdp(0.5))
    with pytest.raises(BudgetError, match="--rho"):
        _period(session, p, "2026-01", zcdp(0.01))
    assert p.per_period() == {}


def _uncountable_series(tmp_path: Path):
    """Group {A pure, C ρ with a ρ spend} recorded after A's pure series P spent in 2026-01: P is then
    linked to C, which it cannot count.  Returns (session, P)."""
    session = Session.open(tmp_path / "l.sqlite")
    a = session.budget("points", "fp-a", default=ONE, unit=Unit())
    c = _oneoff(session, zcdp(0.1), cap=zcdp(0.5), fp="fp-c")
    p = _series(session, oneoff="fp-a")
    _period(session, p, "2026-01", pure(0.3))
    with session.store.transaction() as con:
        budget_groups.record(con, [a._fp, c._fp])  # noqa: SLF001 - the budgets' keys
    return session, p


def test_a_series_linked_to_a_member_it_cannot_count_reads_as_used_up(tmp_path: Path) -> None:
    """Group {A pure, C ρ with a ρ spend}; A's pure series P is then linked to C: its periods read as
    used up (not an error), a charge is refused with the definition message, and the office view
    lists every budget."""
    session, p = _uncountable_series(tmp_path)
    led = p.ledger("2026-01")
    assert led.spent == pytest.approx(1.0) and led.remaining == 0.0
    with pytest.raises(BudgetError, match="ρ-zCDP"):
        _period(session, p, "2026-02", pure(0.1))
    rows = list_budgets(session.store)
    assert len(rows) == 3
    series_row = next(r for r in rows if r["periods"])
    assert series_row["counted"].startswith("cannot be counted: ")


def test_a_batch_of_periods_is_refused_whole_by_the_oneoff_cap(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    _oneoff(session, pure(0.1), cap=pure(0.5))
    p = _series(session)
    ledgers = [p.ledger("2026-01"), p.ledger("2026-02")]
    with pytest.raises(BudgetError, match="one-off budget of this data"):
        p.spend_many(ledgers, pure(0.6), "batch")
    assert p.per_period() == {}
    assert [led.spent for led in ledgers] == [pytest.approx(0.1)] * 2
    p.spend_many(ledgers, pure(0.4), "batch")
    assert p.per_period() == {"2026-01": pytest.approx(0.4), "2026-02": pytest.approx(0.4)}


def test_a_budgets_row_says_why_a_series_cannot_be_counted(tmp_path: Path, capsys) -> None:
    from dpcore.cli.series import cmd_budgets
    from ui.series import budget_row

    session, p = _uncountable_series(tmp_path)
    row = next(r for r in list_budgets(session.store) if r["periods"])
    assert "cannot be counted" in budget_row(row)["spent"]
    import argparse

    assert cmd_budgets(argparse.Namespace(budget_db=str(tmp_path / "l.sqlite"), json=False)) == 0
    assert "cannot be counted: " in capsys.readouterr().out


def test_a_charge_of_one_linked_budget_must_fit_the_other_linked_budgets_caps(tmp_path: Path) -> None:
    """O cap ρ 0.5 spent 0.1; P's period 0.3; P's cumulative release 0.3 fits its own rule (0.3 + 0.3 +
    0.1 ≤ 1.0) but a record of that period would lose 0.7 against O's cap 0.5: refused; 0.1 fits."""
    session = Session.open(tmp_path / "l.sqlite")
    _oneoff(session, zcdp(0.1), cap=zcdp(0.5))
    p = _series(session, cap=zcdp(1.0))
    _period(session, p, "2026-01", zcdp(0.3))
    cumulative = p.cumulative_ledger()
    with pytest.raises(BudgetError, match="one-off budget of this data"):
        cumulative.check(zcdp(0.3), p.unit.base)
    with pytest.raises(BudgetError, match="one-off budget of this data"):
        session.release(cumulative, Charge(zcdp(0.3), "cumulative", unit=p.unit.base), lambda: None)
    assert cumulative.spent == 0.0
    session.release(cumulative, Charge(zcdp(0.1), "cumulative", unit=p.unit.base), lambda: None)
