"""Used budgets of the same data count together (issue 26, item 12, privacy review): when the keys of
one data set lead to two or more used budgets, key_aliases.adopt records them as one group, and every
charge or check of a member must fit the smallest cap with the spends of every member."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from dpcore.errors import BudgetError, StorageError
from dpcore.privacy import budget_groups, key_aliases
from dpcore.privacy.budget import pure, zcdp
from dpcore.privacy.ledger_store import LedgerStore

ONE = pure(1.0)


@pytest.fixture
def store(tmp_path: Path) -> LedgerStore:
    return LedgerStore(tmp_path / "ledger.sqlite")


def _members(store: LedgerStore, key: str) -> list[str]:
    with contextlib.closing(store._connect()) as con:  # noqa: SLF001 - the store's connection
        return budget_groups.members(con, key)


def test_two_used_budgets_of_the_same_data_share_the_smallest_cap(store: LedgerStore) -> None:
    """The app spent 0.6 on A (its main key), the CLI 0.3 on C (--bounds B); the app's key of the points
    inside B leads to C.  After adopt, 0.2 more fits neither A's cap nor C's (0.6 + 0.3 + 0.2 > 1), on
    either side; 0.1 does.  Before: A took 0.2 (0.8 of its own cap) and C took 0.2 (0.5)."""
    app = store.ledger("k1:app", ONE, "points")
    app.spend(pure(0.6), "app, wide bounds")
    key_aliases.adopt(store, "k1:cli", ["k1:inside-b"])
    cli = store.ledger("k1:cli", ONE, "points")
    cli.spend(pure(0.3), "CLI, --bounds B")
    assert key_aliases.adopt(store, "k1:app", ["k1:inside-b"]) == "k1:app"
    assert _members(store, "k1:app") == _members(store, "k1:cli") == ["k1:app", "k1:cli"]
    assert app.remaining == pytest.approx(0.1) and cli.remaining == pytest.approx(0.1)  # was 0.4 and 0.7
    for led in (app, cli):
        with pytest.raises(BudgetError, match="shared with another budget of the same data") as err:
            led.check(pure(0.2))
        assert "ε = 0.9" in str(err.value)
        with pytest.raises(BudgetError, match="shared with another budget"):
            led.spend(pure(0.2), "too much")
    assert app.spent == pytest.approx(0.6) and cli.spent == pytest.approx(0.3)  # a refusal charges nothing
    app.check(pure(0.1))
    app.spend(pure(0.1), "fits")
    assert app.spent == pytest.approx(0.7) and cli.spent == pytest.approx(0.3)  # charged to A only
    with pytest.raises(BudgetError, match="shared with another budget"):
        cli.spend(pure(0.05), "the group is full")


def test_groups_merge_transitively(store: LedgerStore) -> None:
    for k in ("k1:a", "k1:b", "k1:c", "k1:d"):
        store.ledger(k, ONE, "points").spend(pure(0.2), "used")
    key_aliases.adopt(store, "k1:a", ["k1:b"])
    key_aliases.adopt(store, "k1:c", ["k1:d"])
    assert _members(store, "k1:a") == ["k1:a", "k1:b"] and _members(store, "k1:c") == ["k1:c", "k1:d"]
    key_aliases.adopt(store, "k1:d", ["k1:b"])
    assert _members(store, "k1:a") == _members(store, "k1:d") == ["k1:a", "k1:b", "k1:c", "k1:d"]
    led = store.ledger("k1:c", ONE, "points")
    with pytest.raises(BudgetError, match="shared"):
        led.spend(pure(0.25), "0.8 + 0.25 > 1")
    led.spend(pure(0.2), "0.8 + 0.2 = 1")


def test_a_zcdp_spend_cannot_be_counted_under_a_pure_cap_of_the_group(store: LedgerStore) -> None:
    """A's cap is pure ε = 1 and C's ρ = 0.5: C's ρ spend cannot be counted under A's pure cap (zCDP gives
    no pure ε guarantee), so a charge of either is refused, with the reason and the fix."""
    app = store.ledger("k1:app", ONE, "points")
    app.spend(pure(0.6), "app")
    cli = store.ledger("k1:cli", zcdp(0.5), "points")
    cli.spend(zcdp(0.3), "CLI")
    with store.transaction() as con:
        budget_groups.record(con, ["k1:app", "k1:cli"])
    with pytest.raises(BudgetError, match="cannot be counted under the pure ε cap"):
        cli.check(zcdp(0.01))
    assert app.remaining == 0
    with pytest.raises(BudgetError, match="cannot be counted under the pure ε cap"):
        app.spend(pure(0.01), "pure, but the group holds a ρ spend")
    assert app.spent == pytest.approx(0.6) and cli.spent == pytest.approx(0.3)


def test_pure_spends_convert_into_a_zcdp_cap_of_the_group(store: LedgerStore) -> None:
    """Both caps ρ: a pure ε = 0.6 release on A counts ρ = 0.6²/2 = 0.18 with C's ρ = 0.3 (0.48 of 0.5)."""
    app = store.ledger("k1:app", zcdp(0.5), "points")
    app.spend(pure(0.6), "app, pure release on a ρ budget")
    cli = store.ledger("k1:cli", zcdp(0.5), "points")
    cli.spend(zcdp(0.3), "CLI")
    key_aliases.adopt(store, "k1:app", ["k1:cli"])
    with pytest.raises(BudgetError, match="shared") as err:
        cli.spend(zcdp(0.03), "0.48 + 0.03 > 0.5")
    assert "ρ = 0.48" in str(err.value)
    cli.spend(zcdp(0.02), "0.48 + 0.02 = 0.5")


def test_one_used_budget_forms_no_group(store: LedgerStore) -> None:
    store.ledger("k1:cli", ONE, "points").spend(pure(0.3), "CLI")
    store.ledger("k1:app", ONE, "points")
    key_aliases.adopt(store, "k1:app", ["k1:cli"])
    assert _members(store, "k1:cli") == []
    store.ledger("k1:cli", ONE, "points").spend(pure(0.7), "the rest of its own cap")


def test_a_damaged_row_of_another_member_is_a_damaged_database(store: LedgerStore) -> None:
    """Never a traceback, never counted as nothing: restore the database."""
    store.ledger("k1:app", ONE, "points").spend(pure(0.2), "app")
    cli = store.ledger("k1:cli", ONE, "points")
    cli.spend(pure(0.2), "CLI")
    key_aliases.adopt(store, "k1:app", ["k1:cli"])
    with store.transaction() as con:
        con.execute("UPDATE spends SET entry = '{' WHERE fingerprint = 'k1:app'")
    with pytest.raises(StorageError, match="damaged"):
        cli.check(pure(0.1))
    with pytest.raises(StorageError, match="damaged"):
        cli.spend(pure(0.1), "refused")


# -- a group with a series of the same data (privacy review after issue 26) --------------------------

def _group_with_series(tmp_path: Path, link_first: bool):
    """The app spent ε 0.3 on A, the CLI 0.1 on C, a daily event series of the same points (linked to
    A, before or after the group is recorded) 0.5 in day d1; every cap ε = 1."""
    from dpcore.core.session import Charge, Session
    from dpcore.privacy.units import TimeUnit, Unit

    session = Session.open(tmp_path / "l.sqlite")

    def oneoff(fp: str, cost):
        ledger = session.budget("points", fp, default=ONE, unit=Unit())
        session.release(ledger, Charge(cost, "one-off", unit=Unit()), lambda: None)
        return ledger

    def series():
        return session.series_budget("points", "whole", [("d1", "a")], TimeUnit("event", Unit(), "day"),
                                     default=ONE, oneoff=[("points", "fp-app")])

    app, cli = oneoff("fp-app", pure(0.3)), oneoff("fp-cli", pure(0.1))
    budget = series() if link_first else None
    session.adopt_keys("points", "fp-app", ["fp-cli"])  # a key of the app's points leads to the CLI's budget
    budget = budget or series()
    assert _members(session.store, app.dataset) == sorted([app.dataset, cli.dataset])
    session.release(budget.ledger("d1"), Charge(pure(0.5), "d1", unit=Unit()), lambda: None)
    return session, app, cli, budget


@pytest.mark.parametrize("link_first", [True, False], ids=["series-then-group", "group-then-series"])
def test_a_group_member_counts_the_series_linked_to_another_member(tmp_path: Path, link_first: bool) -> None:
    """A record of day d1 loses A's 0.3, C's 0.1 and d1's 0.5 (sequential composition): 0.9 of the
    smallest cap.  So 0.2 more fits on neither one-off budget (before: C checked only A + C = 0.6 and
    A only its own 0.3 + d1's 0.5, so both took it: 1.1); 0.1 does."""
    from dpcore.core.session import Charge
    from dpcore.privacy.units import Unit

    session, app, cli, _budget = _group_with_series(tmp_path, link_first)
    for led in (cli, app):
        with pytest.raises(BudgetError, match="series of the same data ε = 0.5"):
            led.check(pure(0.2))
        with pytest.raises(BudgetError, match="series"):
            session.release(led, Charge(pure(0.2), "too much", unit=Unit()), lambda: None)
    assert app.spent == pytest.approx(0.3) and cli.spent == pytest.approx(0.1)
    assert cli.remaining == pytest.approx(0.1) and app.remaining == pytest.approx(0.1)
    session.release(cli, Charge(pure(0.1), "fits: 1.0", unit=Unit()), lambda: None)
    with pytest.raises(BudgetError):
        app.check(pure(0.01))


@pytest.mark.parametrize("link_first", [True, False], ids=["series-then-group", "group-then-series"])
def test_the_series_of_one_member_counts_every_member(tmp_path: Path, link_first: bool) -> None:
    """The series linked to A counts C's 0.1 in every period too (before: only A's 0.3, so d1 took 0.15
    more, 1.05 in all, and a new day 0.7, 1.1)."""
    from dpcore.core.session import Charge
    from dpcore.privacy.units import Unit

    session, _app, _cli, budget = _group_with_series(tmp_path, link_first)
    assert budget.ledger("d1").spent == pytest.approx(0.9)  # 0.5 + A's 0.3 + C's 0.1
    assert budget.ledger("d2").spent == pytest.approx(0.4)
    with pytest.raises(BudgetError):
        session.release(budget.ledger("d1"), Charge(pure(0.15), "d1 again", unit=Unit()), lambda: None)
    with pytest.raises(BudgetError):
        session.release(budget.ledger("d2"), Charge(pure(0.7), "d2", unit=Unit()), lambda: None)
    session.release(budget.ledger("d2"), Charge(pure(0.6), "d2 fits: 1.0", unit=Unit()), lambda: None)
