"""Several keys of one data set lead to one budget (dpcore.privacy.key_aliases, issue 26 item 12): an
unused budget opened under one key is retired into the used budget another key of the same data leads
to; a used budget never is; every table of the budget database is classified for this."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest

from dpcore.errors import BudgetError
from dpcore.privacy import key_aliases, near_match, oneoff_links, series_ledger
from dpcore.privacy.budget import pure, zcdp
from dpcore.privacy.ledger_history import datasets, name_dataset
from dpcore.privacy.ledger_store import LedgerStore

ONE = pure(1.0)


@pytest.fixture
def store(tmp_path: Path) -> LedgerStore:
    return LedgerStore(tmp_path / "ledger.sqlite")


def _spent(store: LedgerStore, key: str, eps: float = 0.3) -> None:
    store.ledger(key, ONE, "points").spend(pure(eps), "released")


def test_an_unused_budget_is_retired_into_the_used_budget_another_key_leads_to(store: LedgerStore) -> None:
    """The app opens the data's budget at load (B2, under its main key); a key of bounds set afterwards
    leads to the CLI's spent budget B1: B2 is retired, its key, aliases and name lead to B1."""
    _spent(store, "k1:cli")
    key_aliases.adopt(store, "k1:cli", ["k1:inside"])  # the CLI's key of the points inside its bounds
    held = store.ledger("k1:app", ONE, "points")  # opened at load, never charged
    key_aliases.adopt(store, "k1:app", ["k1:every"])
    name_dataset(store, "k1:app", "pickups")
    assert key_aliases.adopt(store, "k1:app", ["k1:every", "k1:inside"]) == "k1:cli"
    assert not store.has_ledger("k1:app")
    assert {key_aliases.resolve(store, k) for k in ("k1:app", "k1:every", "k1:inside")} == {"k1:cli"}
    assert store.ledger(key_aliases.resolve(store, "k1:app"), ONE).spent == pytest.approx(0.3)
    [listed] = datasets(store)
    assert listed["key"] == "k1:cli" and listed["names"] == ["pickups"]
    # a page still holding the retired budget can neither read nor charge it, nor open it afresh
    with pytest.raises(BudgetError, match="merged"):
        held.spend(pure(0.1), "stale")
    with pytest.raises(BudgetError, match="merged"):
        store.ledger("k1:app", ONE, "points")
    assert not store.has_ledger("k1:app")


USES = {
    "spend": lambda s, k: _spent(s, k),
    "release": lambda s, k: s.record_release(k, "r1", "points", {}, {"release.csv": b"x"}),
    "binding": lambda s, k: s.bind(k, "survey"),
    "series link": lambda s, k: oneoff_links.link(s, "k1:series", [k]),
}


@pytest.mark.parametrize("use", list(USES))
def test_a_used_budget_is_never_retired(store: LedgerStore, use: str) -> None:
    """Two budgets that have each been used stay apart (each keeps what it holds); the data draws on its
    own, the first key's."""
    _spent(store, "k1:cli", 0.4)
    key_aliases.adopt(store, "k1:cli", ["k1:inside"])
    store.ledger("k1:app", ONE, "points")
    USES[use](store, "k1:app")
    assert key_aliases.adopt(store, "k1:app", ["k1:inside"]) == "k1:app"
    assert store.has_ledger("k1:cli") and store.ledger("k1:cli", ONE).spent == pytest.approx(0.4)
    assert key_aliases.resolve(store, "k1:app") == "k1:app" and key_aliases.resolve(store, "k1:inside") == "k1:cli"
    assert store.has_ledger("k1:app") or use == "binding"
    # but they count together (key_aliases.adopt recorded them as one group): 0.4 + 0.3 + 0.4 > 1
    cli = store.ledger("k1:cli", ONE)
    if use == "spend":
        with pytest.raises(BudgetError, match="shared with another budget of the same data"):
            cli.check(pure(0.4))
    cli.check(pure(0.3 if use == "spend" else 0.6))


def test_two_unused_budgets_become_one(store: LedgerStore) -> None:
    """Neither used: the first key's is kept and the other retired, so a later charge of either data
    draws on one budget."""
    store.ledger("k1:a", ONE, "points")
    store.ledger("k1:b", ONE, "points")
    assert key_aliases.adopt(store, "k1:a", ["k1:b"]) == "k1:a"
    assert not store.has_ledger("k1:b") and key_aliases.resolve(store, "k1:b") == "k1:a"


def test_a_budget_of_a_database_with_a_table_this_version_does_not_know_is_not_retired(store: LedgerStore) -> None:
    _spent(store, "k1:cli")
    store.ledger("k1:app", ONE, "points")
    with contextlib.closing(store._connect()) as con:  # noqa: SLF001 - a later version's table
        con.execute("CREATE TABLE later (budget TEXT)")
    assert key_aliases.adopt(store, "k1:app", ["k1:cli"]) == "k1:app"
    assert store.has_ledger("k1:app") and store.has_ledger("k1:cli")


def test_every_table_of_the_budget_database_is_classified(store: LedgerStore) -> None:
    """Every table the library creates, and each of its columns, says what it holds about a budget key
    (key_aliases.COLUMNS): a new table or column must be classified there, or no budget is retired."""
    key_aliases.adopt(store, "k1:a", ["k1:b"])
    name_dataset(store, "k1:a", "x")
    near_match.remember(store, "k1:a", near_match.Profile("points", ("lat", "lon"), 10, (0.0, 0.0, 1.0, 1.0)))
    near_match.answer(store, "k1:c", ["k1:a"], False)
    oneoff_links.link(store, "k1:series", ["k1:a"])
    series_ledger.list_budgets(store)
    with contextlib.closing(store._connect()) as con:  # noqa: SLF001 - the store's connection
        assert key_aliases.unclassified(con) == []
    root = Path(key_aliases.__file__).parents[1]
    created = {m for p in root.rglob("*.py")
               for m in re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", p.read_text("utf-8"))}
    assert created - set(key_aliases.COLUMNS) == set(), "classify these tables in key_aliases.COLUMNS"


def test_an_alias_of_a_retired_alias_is_followed_to_its_budget(store: LedgerStore) -> None:
    """Earlier versions retired a budget (near_match.answer) without moving the aliases that led to it:
    such a chain is followed to its end, never to a key without a budget (which would open a fresh one)."""
    _spent(store, "k1:o")
    with store.transaction() as con:
        key_aliases.ensure(con)
        con.executemany("INSERT INTO key_aliases VALUES (?, ?, '2026-01-01T00:00')",
                        [("k1:every", "k1:d"), ("k1:d", "k1:o")])
    assert key_aliases.resolve(store, "k1:every") == "k1:o"


def test_the_same_people_answer_moves_the_aliases_of_the_dropped_budget(store: LedgerStore) -> None:
    """near_match.answer('same') retires the data's unused budget through key_aliases: the aliases that
    led to it now lead to the matched budget (before, they led to the deleted one, which a later load
    by such a key opened afresh)."""
    _spent(store, "k1:o")
    store.ledger("k1:d", ONE, "points").set_cap(pure(2.0))  # a cap change only: still dropped on 'same'
    key_aliases.adopt(store, "k1:d", ["k1:every"])
    near_match.answer(store, "k1:d", ["k1:o"], True)
    assert not store.has_ledger("k1:d")
    assert key_aliases.resolve(store, "k1:every") == "k1:o" and key_aliases.resolve(store, "k1:d") == "k1:o"


def test_a_budget_used_only_by_a_cap_change_is_retired_and_its_lower_cap_kept(store: LedgerStore) -> None:
    """The curator typed a cap on the app's budget before any release (or switched ε and ρ), then set
    bounds whose key leads to the CLI's spent budget: the app's budget is retired all the same (else the
    same points would draw on two caps), and the lower cap it promised now holds for the CLI's budget."""
    _spent(store, "k1:cli", 0.8)
    key_aliases.adopt(store, "k1:cli", ["k1:inside"])
    store.ledger("k1:app", ONE, "points").set_cap(pure(0.9))
    assert key_aliases.adopt(store, "k1:app", ["k1:inside"]) == "k1:cli"
    assert not store.has_ledger("k1:app")
    merged = store.ledger(key_aliases.resolve(store, "k1:app"), ONE)
    assert merged.cap == pure(0.9) and [c.new for c in merged.cap_changes] == [pure(0.9)]
    with pytest.raises(BudgetError):
        merged.spend(pure(0.2), "over the lower cap")
    merged.spend(pure(0.1), "within it")


def test_a_carried_cap_is_never_below_what_the_chosen_budget_spent(store: LedgerStore) -> None:
    _spent(store, "k1:cli", 0.8)
    store.ledger("k1:app", ONE, "points").set_cap(pure(0.5))
    assert key_aliases.adopt(store, "k1:app", ["k1:cli"]) == "k1:cli"
    merged = store.ledger("k1:cli", ONE)
    assert merged.cap.value == pytest.approx(0.8) and merged.remaining == pytest.approx(0.0, abs=1e-9)


def test_a_higher_cap_or_a_mere_switch_of_definition_leaves_the_chosen_cap(store: LedgerStore) -> None:
    """ε = 1 switched to the same loss in ρ (ρ = 0.5) and a raise to 3 promise nothing lower."""
    _spent(store, "k1:cli", 0.4)
    store.ledger("k1:rho", ONE, "points").set_cap(zcdp(0.5))
    store.ledger("k1:high", ONE, "points").set_cap(pure(3.0))
    assert key_aliases.adopt(store, "k1:rho", ["k1:high", "k1:cli"]) == "k1:cli"
    assert not store.has_ledger("k1:rho") and not store.has_ledger("k1:high")
    merged = store.ledger("k1:cli", ONE)
    assert merged.cap == ONE and merged.cap_changes == ()


@pytest.mark.parametrize(("lowered", "chosen", "carried"), [
    (zcdp(0.08), ONE, 0.4),                # ρ 0.08 holds under a pure cap ε = √(2·0.08) = 0.4
    (pure(0.4), zcdp(0.5), 0.4 ** 2 / 2),  # ε 0.4 read as ρ = 0.08 (zCDP keeps no pure promise)
], ids=["rho-into-pure", "pure-into-rho"])
def test_a_lower_cap_of_the_other_definition_is_carried_at_the_same_loss(
        store: LedgerStore, lowered, chosen, carried: float) -> None:
    """Before, a lower cap of the other definition was dropped (the chosen budget kept ε = 1 / ρ = 0.5)."""
    store.ledger("k1:cli", chosen, "points").spend(pure(0.1), "released")
    store.ledger("k1:app", ONE, "points").set_cap(lowered)
    assert key_aliases.adopt(store, "k1:app", ["k1:cli"]) == "k1:cli"
    merged = store.ledger("k1:cli", chosen)
    assert merged.cap.definition == chosen.definition and merged.cap.value == pytest.approx(carried, rel=1e-9)
    assert merged.cap.value <= carried * (1 + 1e-15)  # rounded down, never a larger cap


def test_a_lower_cap_is_carried_to_the_population_a_chosen_binding_draws_on(store: LedgerStore) -> None:
    """The CLI's data is bound to a population (its key has a binding, no budget row of its own); the
    app's budget of the same data, its cap lowered to 0.5 before any release, is retired into it: the
    population's budget takes the lower cap (before: dropped, the population kept ε = 1)."""
    from dpcore.privacy.units import Unit

    pop = store.bind("k1:cli", "survey")
    store.ledger(pop, ONE, "population", Unit("person")).spend(pure(0.2), "released", unit=Unit("person"))
    store.ledger("k1:app", ONE, "points").set_cap(pure(0.5))
    assert key_aliases.adopt(store, "k1:app", ["k1:cli"]) == "k1:cli"
    assert not store.has_ledger("k1:app")
    merged = store.ledger(pop, ONE)
    assert merged.cap == pure(0.5) and [c.new for c in merged.cap_changes] == [pure(0.5)]
