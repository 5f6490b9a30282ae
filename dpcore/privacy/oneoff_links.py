"""One-off releases and series of the same data draw on one budget (composition both ways).

A one-off release of a population's data (no time column) is one mechanism over *every* period:
a record of period ``p`` is in it, and so is every person present in ``p``.  Without a link, a
record's loss would be the one-off cap plus the per-period cap (a leak).  So a series budget
(population ``P``, :class:`~dpcore.privacy.series_ledger.SeriesBudget`) is **linked** to the
one-off budgets of the same data (table ``series_links``), and the two compose:

* **series side** — every period ledger of ``P`` counts the linked one-off spends as spent
  (converted to the series' base unit and definition: :func:`in_unit`), so a period must fit its
  cap *after* the one-off spends.  Sequential composition of the one-off mechanism and the
  period's mechanism on the period's records (Dwork & Roth 2014, Thm. 3.14; Bun & Steinke 2016,
  Lemma 1.7); parallel composition across periods is untouched (each record is in one period).
  A period charge must also keep every linked one-off budget within its own rule below (its cap,
  its group's lowest cap, the other series of the same data counted: :func:`fit_series`, in the
  charge's transaction and in the pre-charge check), so the limit does not depend on the order of
  the releases.
* **one-off side** (:class:`LinkedLedger`) — a one-off release must fit (i) its own cap given the
  *largest* per-period series spend (a record or person-period is in exactly one period, so its
  series loss is that period's, at most the maximum) and the other budgets linked to the series
  (its cumulative release, a named population's budget:
  :func:`dpcore.privacy.linked_series.share`), and (ii) every charged period's cap and
  (iii) the series' horizon cap, the one-off's charge counted as above.
* **horizon** — a person present in every period meets a person-level one-off once; a
  record-level one-off holds that person's one event per period, ``n`` records in one mechanism:
  group privacy over ``n`` (``n·ε``, ``n²·ρ``; Dwork & Roth 2014, Thm. 2.2; Bun & Steinke 2016,
  Prop. 1.9), :func:`horizon_part`.

A unit that cannot be converted is refused (:func:`~dpcore.privacy.units.group_factor`): a
record-level one-off cannot count towards a person-period series (a person with many records is
protected by nothing), nor an event series towards a person-level one-off budget.

**Which budgets are linked** (the same population rule both ways): the series links, when it is
opened, the one-off budget key of its whole input (``Session.series_budget(oneoff=...)``, the key
a one-off release of the same input draws on, after its population binding) and, when named, the
named population's own key (a one-off ``--population NAME`` and a series ``--population NAME``
are the same people); and every budget of a group of used budgets of the same data that one of
them is in (:mod:`dpcore.privacy.budget_groups`).  A one-off release finds the series it is linked to by its budget key.

>>> from dpcore.privacy.budget import pure, zcdp
>>> from dpcore.privacy.units import Unit
>>> float(in_unit(pure(0.2), Unit(), Unit(), "pure")), float(in_unit(pure(0.2), Unit("person", cap=2), Unit(), "pure"))
(0.2, 0.4)
>>> round(float(in_unit(pure(0.2), Unit(), Unit(), "zcdp")), 12)  # ρ = ε²/2
0.02
>>> round(float(horizon_part(zcdp(0.01), Unit(), "zcdp", 3)), 12)  # a record-level one-off: a group of 3
0.09
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from dpcore.errors import BudgetError
from dpcore.privacy import budget_groups, linked_series
from dpcore.privacy.budget import PrivacyCost, two_significant
from dpcore.privacy.ledger import LedgerEntry, minute_now
from dpcore.privacy.ledger_store import LedgerStore, StoredLedger
from dpcore.privacy.units import TimeUnit, Unit, group_factor

__all__ = ["LinkedLedger", "fit_series", "horizon_part", "in_unit", "link", "linked_entries"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS series_links (
    population TEXT NOT NULL,
    data_key TEXT NOT NULL,
    created TEXT NOT NULL,
    PRIMARY KEY (population, data_key)
);
CREATE INDEX IF NOT EXISTS series_links_by_key ON series_links(data_key);
"""
_TOL = 1 + Fraction(1, 10**9)


def ensure(con: sqlite3.Connection) -> None:
    """Create the link table (idempotent)."""
    for stmt in _SCHEMA.split(";"):
        if stmt.strip():
            con.execute(stmt)


def link(store: LedgerStore, population: str, data_keys: Iterable[str]) -> None:
    """Link the series population ``population`` to the one-off budget keys ``data_keys`` (for good), and
    to every budget of their groups (:mod:`dpcore.privacy.budget_groups`)."""
    keys = sorted({str(k) for k in data_keys if k})
    if not keys:
        return
    with store.transaction() as con:
        ensure(con)
        con.executemany("INSERT OR IGNORE INTO series_links VALUES (?, ?, ?)",
                        [(population, k, minute_now()) for k in keys])
        # a budget counted with other used budgets of the same data (budget_groups): the series is
        # their data too, so it is linked to every member and every member's series to it
        linked_series.spread(con, sorted({m for k in keys for m in budget_groups.members(con, k)}))


def _value(cost: PrivacyCost, definition: str) -> Fraction:
    if cost.definition == definition:
        return Fraction(cost.value)
    if definition == "zcdp":
        return Fraction(cost.to_zcdp().value)
    raise BudgetError(f"A ρ-zCDP release ({cost.label()}) of this data cannot be counted in a pure ε budget of the "
                      "same data (one-off releases and series share one budget): keep both under ρ (--rho).")


def in_unit(cost: PrivacyCost, unit: Unit, budget_unit: Unit, definition: str) -> Fraction:
    """A release of ``cost`` protecting ``unit`` as counted in a ``definition`` budget of ``budget_unit``
    (group factor of :func:`~dpcore.privacy.units.group_factor`, ε read as ρ = ε²/2); refuses what
    cannot be counted."""
    try:
        g = group_factor(budget_unit, unit)
    except BudgetError as e:
        raise BudgetError(f"One-off releases and the series of this data share one budget, but: {e}") from None
    return _value(cost.for_group(g), definition)


def horizon_part(cost: PrivacyCost, unit: Unit, definition: str, n_periods: int,
                 details: Mapping[str, Any] | None = None) -> Fraction:
    """A one-off release's share of the horizon figure (a person present in each of ``n_periods``
    periods): once for a person or group release, a group of ``n_periods`` for a record-level one.

    A cumulative series (``details["horizon_rho_multiple"]``: one mechanism over every period that
    protects one record or person-period, :func:`dpcore.estimate.prefix_sums.compare_variances`)
    counts ``ρ`` times that multiple (its sensitivity for a person in all its ``T`` periods, squared,
    over the one it is calibrated to; below the group bound ``T²·ρ``), whatever ``n_periods``."""
    multiple = (details or {}).get("horizon_rho_multiple")
    if multiple is not None:
        rho = Fraction(cost.to_zcdp().value)
        if definition != "zcdp":
            raise BudgetError("A cumulative series is ρ-zCDP and cannot be counted in a pure ε budget: use --rho.")
        return rho * Fraction(float(multiple))
    if unit.entity == "record" and n_periods > 1:
        cost = cost.for_group(int(n_periods))
    return _value(cost, definition)


def linked_entries(con: sqlite3.Connection, population: str) -> list[LedgerEntry]:
    """The entries of every one-off budget linked to the series ``population`` (none before any link
    was made: the table is created by the first :func:`link`)."""
    try:
        rows = con.execute("SELECT s.entry FROM series_links l JOIN spends s ON s.fingerprint = l.data_key "
                           "WHERE l.population = ? ORDER BY s.fingerprint, s.idx", (population,)).fetchall()
    except sqlite3.OperationalError as e:
        if "no such table" not in str(e):
            raise
        return []
    return [LedgerEntry.from_dict(json.loads(e)) for (e,) in rows]


def _series_state(con: sqlite3.Connection, population: str) -> tuple[TimeUnit | None, PrivacyCost | None,
                                                                     dict[str, tuple[PrivacyCost, list[LedgerEntry]]]]:
    row = con.execute("SELECT unit, horizon_cap FROM series_budgets WHERE population = ?", (population,)).fetchone()
    if row is None:
        return None, None, {}
    unit = TimeUnit.from_dict(json.loads(row[0]))
    hcap = PrivacyCost.from_dict(json.loads(row[1])) if row[1] else None
    return unit, hcap, linked_series.period_ledgers(con, population)


def series_spend(con: sqlite3.Connection, population: str,
                 ledgers: Mapping[str, tuple[PrivacyCost, list[LedgerEntry]]] | None = None) -> dict[str, Any] | None:
    """What the series ``population`` has spent, as the office view counts it (for display; no charge
    reads it): ``periods`` charged, ``spent`` (the most any of its ledgers holds: a period's under a
    per-period cap, the whole horizon's for a person over the horizon; the one-off releases linked to the
    series counted in its unit; None when they cannot be counted in it), ``cap`` (a
    :class:`~dpcore.privacy.budget.PrivacyCost`) and ``per_period`` (else one budget of the horizon).
    None when the series has no charged ledger.  ``ledgers``: its period ledgers when the caller has read
    them already (:func:`~dpcore.privacy.linked_series.period_ledgers`)."""
    row = con.execute("SELECT unit FROM series_budgets WHERE population = ?", (population,)).fetchone()
    s_unit = TimeUnit.from_dict(json.loads(row[0])) if row is not None else None
    if ledgers is None and s_unit is not None:
        ledgers = linked_series.period_ledgers(con, population)
    if s_unit is None or not ledgers:
        return None
    others = linked_entries(con, population)
    spent: Fraction | None = Fraction(0)
    for cap, entries in ledgers.values():
        try:
            total = sum((Fraction(e.charged) for e in entries), Fraction(0)) + sum(
                (in_unit(e.cost, e.unit, s_unit.base, cap.definition) for e in others), Fraction(0))
        except BudgetError:
            spent = None
            break
        spent = max(spent, total)
    periods = {str(e.details.get("period", "")) for _c, es in ledgers.values() for e in es}
    return {"periods": len(periods - {""}) or len(ledgers), "spent": None if spent is None else float(spent),
            "cap": next(iter(ledgers.values()))[0], "per_period": bool(s_unit.parallel)}


class LinkedLedger(StoredLedger):
    """A one-off budget (:meth:`dpcore.core.session.Session.budget`) that composes with the series
    of the same data: a charge must also fit the linked series' periods and horizon (module docstring).
    ``series_spent`` is what the linked series added (their largest period spend, and the other budgets
    linked to them) when this budget's cap was last checked."""

    series_spent: float = 0.0
    #: The details of the charge being checked (its horizon multiple, for a cumulative series).
    _pending_details: Mapping[str, Any] | None = None

    def spend(self, cost: PrivacyCost, label: str, details: Mapping[str, Any] | None = None,
              unit: Unit | None = None, *, journal: str | None = None) -> LedgerEntry:
        self._pending_details = details
        try:
            return super().spend(cost, label, details, unit, journal=journal)
        finally:
            self._pending_details = None

    @property
    def remaining(self) -> float:
        """What is left under the cap after this budget's spends and what the linked series add for a
        record of one period (:meth:`_fit_own`'s rule; 0 when they cannot be counted here)."""
        with self._lock:  # re-entrant: one consistent reading of the spends and the linked series
            own = super().remaining
            worst = self._linked_share()
            if worst is None:
                return 0.0
            return max(0.0, min(own, float(Fraction(self._cap.value) - self._spent - worst)))

    @property
    def linked_share(self) -> float | None:
        """What the linked series add to this budget's spends for a record of one period, in its terms
        (what :attr:`remaining` subtracts besides :attr:`spent`; 0 without a series, None when they
        cannot be counted here).  Read from the database, for display: charges never read it."""
        worst = self._linked_share()
        return None if worst is None else float(worst)

    def _read_once(self, what: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per state of the budget database (SQLite's ``data_version`` of this ledger's
        read connection changes with every commit of another connection, a spend of this one included): a
        page run reads the linked series for the bar, the caption and the left figure, each of which
        read every period's spends again."""
        with self._lock:
            version = self._read.execute("PRAGMA data_version").fetchone()[0]
            memo = self.__dict__.setdefault("_memo", {})
            if what not in memo or memo[what][0] != version:
                memo[what] = (version, compute())
            return memo[what][1]

    def _linked_share(self) -> Fraction | None:
        return self._read_once("share", self._linked_share_read)

    def _linked_share_read(self) -> Fraction | None:
        with self._lock:
            unit = self._unit_of_privacy or Unit()
            try:
                return linked_series.share(self._read, [self._fp], lambda e: in_unit(e.cost, e.unit, unit,
                                                                                    self._cap.definition))
            except BudgetError:
                return None

    def linked_series(self) -> list[dict[str, Any]]:
        """The series linked to this budget as the office view counts them (:func:`series_spend`, for
        display), oldest link first."""
        def read() -> list[dict[str, Any]]:
            found = (series_spend(self._read, pop) for pop in linked_series.populations(self._read, [self._fp]))
            return [f for f in found if f is not None]

        return list(self._read_once("series", read))

    def check(self, cost: PrivacyCost, unit: Unit | None = None) -> None:
        super().check(cost, unit)
        with self._lock:  # the ledger's own read connection (StoredLedger), not a new one per check
            self._linked_check(self._read, cost, unit)

    def _before_spend(self, con: sqlite3.Connection, cost: PrivacyCost, unit: Unit | None) -> None:
        self._linked_check(con, cost, unit)

    def _linked_check(self, con: sqlite3.Connection, cost: PrivacyCost, unit: Unit | None) -> None:
        try:
            pops = [p for (p,) in con.execute("SELECT population FROM series_links WHERE data_key = ?", (self._fp,))]
        except sqlite3.OperationalError as e:
            if "no such table" not in str(e):
                raise
            return  # no series was ever linked in this database
        release_unit = unit if unit is not None else (self._unit_of_privacy or Unit())
        own_unit = self._unit_of_privacy or release_unit
        charge = Fraction(self.charge_of(self.charge_for(cost, release_unit)[0]))
        if pops:
            self._fit_own(con, own_unit, charge)
        for pop in pops:
            s_unit, hcap, ledgers = _series_state(con, pop)
            if s_unit is None:
                continue
            others = linked_entries(con, pop)
            for fp, (cap, entries) in ledgers.items():
                total = sum((Fraction(e.charged) for e in entries), Fraction(0))
                total += sum((in_unit(e.cost, e.unit, s_unit.base, cap.definition) for e in others), Fraction(0))
                new = in_unit(cost, release_unit, s_unit.base, cap.definition)
                if total + new > Fraction(cap.value) * _TOL:
                    where = fp.rpartition("@")[2]
                    raise BudgetError(
                        f"This one-off release touches every period of the series of this data; period {where} has "
                        f"{cap.symbol} = {two_significant(float(total))} spent of its cap {cap.label()}, so the "
                        f"release ({cost.label()}) does not fit. Lower the release's budget, or release less.")
            if hcap is not None:
                self._fit_horizon(hcap, ledgers, others, cost, release_unit)
            # the other budgets linked to the series (another one-off budget of the same data, a cumulative
            # series) must still hold their own rule with this charge counted
            _charged, group = self.charge_for(cost, release_unit)
            entry = LedgerEntry(len(self._entries), "pending", cost, float(charge), "",
                                dict(self._pending_details or {}), release_unit, group)
            fit_series(con, pop, {self._fp: [entry]}, s_unit.base)

    def _fit_own(self, con: sqlite3.Connection, own_unit: Unit, charge: Fraction) -> None:
        """This budget's spends, what the linked series add for a record of one period (their largest
        period and what else is linked to them: :func:`dpcore.privacy.linked_series.share`) and the
        charge must fit this budget's cap."""
        worst = linked_series.share(con, [self._fp], lambda e: in_unit(e.cost, e.unit, own_unit, self.definition))
        self.series_spent = float(worst)
        if self._spent + worst + charge > self._limit():
            raise BudgetError(
                f"The series of this data spent up to {self._symbol()} = {two_significant(float(worst))} in one "
                f"period (with the other releases counted in every period), and this budget ({self._cap.label()}) has {self._symbol()} = "
                f"{two_significant(float(self._spent))} spent: a record of that period would lose both, so this "
                f"release ({two_significant(float(charge))}) does not fit. Lower its budget, or release less.")

    def _fit_horizon(self, hcap: PrivacyCost, ledgers: Mapping[str, tuple[PrivacyCost, list[LedgerEntry]]],
                     others: list[LedgerEntry], cost: PrivacyCost, unit: Unit) -> None:
        d = hcap.definition
        entries = [e for _c, es in ledgers.values() for e in es]
        n = len({str(e.details.get("period", "")) for e in entries}) or 1
        total = sum((_value(e.cost.for_group(e.group), d) for e in entries), Fraction(0))
        total += sum((horizon_part(e.cost, e.unit, d, n, e.details) for e in others), Fraction(0))
        total += horizon_part(cost, unit, d, n, self._pending_details)
        if total > Fraction(hcap.value) * _TOL:
            raise BudgetError(
                f"This one-off release would take the horizon figure of the series of this data to {hcap.symbol} = "
                f"{two_significant(float(total))}, past its horizon cap {hcap.label()}. Lower its budget.")



def _budget_name(con: sqlite3.Connection, key: str) -> str:
    """How a refusal names the one-off budget ``key`` (a population's name, a cumulative series)."""
    row = con.execute("SELECT name FROM bindings WHERE population = ? LIMIT 1", (key,)).fetchone()
    if row is not None:
        return f"the budget of the population '{row[0]}'"
    if key.endswith("#cumulative"):
        return "the budget of the cumulative series of this data"
    return "the one-off budget of this data"


def fit_series(con: sqlite3.Connection, population: str,
               pending: Mapping[str, Sequence[LedgerEntry]] | None = None, base: Unit | None = None) -> None:
    """Refuse (:class:`~dpcore.errors.BudgetError`) the state of the series ``population`` unless every
    one-off budget linked to it still holds its own rule (:meth:`LinkedLedger._fit_own`: its spends and
    what the series of the same data add for a record of one period within its cap) and its group's
    (:func:`dpcore.privacy.budget_groups.fit`), with no charge of its own.

    The series side of the rule a one-off charge meets, so the limit does not depend on the order of
    the releases: run with ``pending`` (by ledger key ``P@PERIOD``) the charges not written yet, before
    a period charge, or no entries for the ledgers just charged, inside its transaction after its row
    is written.  Only the records of the charged periods are counted for the series (each record is in
    one period: :func:`dpcore.privacy.linked_series.share`), so a period over a cap lowered since does
    not refuse the others'.  Without ``pending``, every period.  A budget without a unit yet (nothing
    charged to it) counts in ``base``, the series' unit (its first release takes one)."""
    try:
        keys = [str(k) for (k,) in con.execute(
            "SELECT l.data_key FROM series_links l JOIN datasets d ON d.fingerprint = l.data_key "
            "WHERE l.population = ? ORDER BY l.data_key", (population,)).fetchall()]
    except sqlite3.OperationalError as e:
        if "no such table" not in str(e):
            raise
        return  # no series was ever linked in this database
    for key in keys:
        cap_text, unit_text = con.execute("SELECT cap, unit FROM datasets WHERE fingerprint = ?", (key,)).fetchone()
        cap = PrivacyCost.from_dict(json.loads(cap_text))
        unit = (Unit.from_dict(json.loads(unit_text)) if unit_text else None) or base or Unit()
        spent = sum((Fraction(LedgerEntry.from_dict(json.loads(e)).charged) for (e,) in con.execute(
            "SELECT entry FROM spends WHERE fingerprint = ?", (key,))), Fraction(0))
        name = _budget_name(con, key)
        try:
            worst = linked_series.share(con, [key], lambda e, u=unit, d=cap.definition: in_unit(e.cost, e.unit, u, d),
                                        pending)
        except BudgetError as e:
            fix = (" A ρ-zCDP series cannot be counted under a pure ε cap (zCDP gives no pure ε guarantee): release "
                   "the series under pure ε (--epsilon) to count it under that cap."
                   if cap.definition == "pure" and "ρ-zCDP" in str(e) else "")
            raise BudgetError(f"This series cannot be counted under {name} ({cap.label()}), which counts every "
                              f"series of the same data (a record of a period is in both): {e}{fix}") from None
        if spent + worst > Fraction(cap.value) * _TOL:
            raise BudgetError(
                f"This release would pass the cap of {name} ({cap.label()}), which counts every series of the same "
                f"data and what else is linked to them (a record of a period is in all): it has {cap.symbol} = "
                f"{two_significant(float(spent))} spent and the series would add {cap.symbol} = "
                f"{two_significant(float(worst))} for a record of one period ({cap.symbol} = "
                f"{two_significant(float(spent + worst))} in all). Release with a smaller ε (or ρ), or raise that "
                "budget's cap if your policy allows it.")
        try:
            budget_groups.fit(con, key, None, unit, pending)
        except BudgetError as e:
            raise BudgetError(f"This release does not fit {name}'s group of budgets of the same data: {e}"
                              ) from None
