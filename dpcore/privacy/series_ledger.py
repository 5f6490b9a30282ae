"""Budgets over time: a series of releases over public periods, accounted by its unit over time.

A series budget belongs to one population (a named one, or one recognised from its data, below)
and one unit over time (:class:`~dpcore.privacy.units.TimeUnit`, which keeps one period length
for good).  It lives in the budget database (:class:`~dpcore.privacy.ledger_store.LedgerStore`):

* **event, person-period** — every period has a ledger of its own (key ``POP@PERIOD``) with the
  per-period cap: disjoint periods compose in parallel, each record or person-period being in
  exactly one of them (McSherry 2009, "Privacy Integrated Queries", Thm. 4).
* **person** — one ledger (key ``POP@horizon``) that every period's release is charged to:
  releases about the same person compose sequentially (Dwork & Roth 2014, Thm. 3.14; Bun &
  Steinke 2016, Lemma 1.7), each entry naming its period.

Every budget reports the **horizon figure** for a person present in every period: the sum of the
per-period charges (ε under pure DP, read as ρ = ε²/2 as well; ρ under zCDP), its (ε, δ) reading
ε(δ) from ρ (Canonne, Kamath & Steinke 2020, Cor. 13, the conversion of
:func:`~dpcore.privacy.ledger.epsilon_readings`), and a projection over a year of periods at the
mean rate so far.  An optional **horizon cap** refuses a charge that would take that sum past it.

**Population identity.**  A late record changes a period's data and so the whole input's content
fingerprint; a budget keyed by that fingerprint alone would hand the corrected data a fresh budget
and let every period be released again (a leak).  So a series finds its population by the first
rule that applies (:func:`find_population`):

1. a population named by the curator (``--population NAME``);
2. any population one of whose released periods has the same period label and the same period
   data (keyed fingerprint) as a non-empty period of this series — a late record changes one
   period's data, not the others';
3. else a new population keyed by the whole input's content fingerprint.

Two unrelated data sets that agree on a whole period would share a budget (more is charged than
needed: safe).  Data whose every period changed is new data.

Periods released are kept (:meth:`SeriesBudget.stored`, :meth:`SeriesBudget.keep`) with their
files, keyed by (population, plan digest, period) and the period's keyed data fingerprint, so a
repeated request re-serves the same bytes and a changed past period is a new, charged correction.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpcore.errors import BudgetError, InputError, ParameterError
from dpcore.privacy.budget import PrivacyCost, two_significant
from dpcore.privacy.ledger import Ledger, LedgerEntry, epsilon_readings, minute_now
from dpcore.privacy.ledger_store import LedgerStore, StoredLedger
from dpcore.privacy.linked_series import like
from dpcore.privacy.oneoff_links import fit_series, horizon_part, in_unit, linked_entries
from dpcore.privacy.units import TimeUnit

__all__ = ["PeriodLedger", "SeriesBudget", "StoredPeriod", "find_population", "horizon_figure", "list_budgets",
           "periods_per_year"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS series_budgets (
    population TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    unit TEXT NOT NULL,
    horizon_cap TEXT,
    name TEXT,
    created TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS series_periods (
    population TEXT NOT NULL,
    plan TEXT NOT NULL,
    period TEXT NOT NULL,
    data TEXT NOT NULL,
    release_id TEXT NOT NULL,
    correction_of TEXT,
    created TEXT NOT NULL,
    PRIMARY KEY (population, plan, period, data)
);
CREATE INDEX IF NOT EXISTS series_periods_by_data ON series_periods(period, data);
"""

#: The key suffix of the one ledger of a person-over-the-horizon budget.
HORIZON = "horizon"
#: The period label (and ledger suffix) of a cumulative series' one charge.
CUMULATIVE = "cumulative"
#: The δ of the (ε, δ) reading shown first.
DEFAULT_DELTA = 1e-6


def _tables(store: LedgerStore) -> None:
    with contextlib.closing(store._connect()) as con:  # noqa: SLF001 - the same package's store
        con.executescript(_SCHEMA)


def periods_per_year(period: str) -> tuple[int, str]:
    """How many periods make a year, and their name, for the projection.

    >>> periods_per_year("week"), periods_per_year("day"), periods_per_year("6h")
    ((52, 'weeks'), (365, 'days'), (1460, 'periods of 6h'))
    """
    named = {"day": (365, "days"), "week": (52, "weeks"), "month": (12, "months")}
    if period in named:
        return named[period]
    import pandas as pd

    try:
        n = max(1, int(round(pd.Timedelta(days=365) / pd.Timedelta(period))))
    except ValueError:
        n = 365
    return n, f"periods of {period}"


def horizon_figure(charges: Sequence[float], definition: str, period: str, n_periods: int,
                   cap: PrivacyCost | None = None, max_periods: int | None = None) -> dict[str, Any]:
    """The horizon figure of per-period charges (one per period, in the ledger's unit).

    ``rho`` is the zCDP sum for a person present in every period (a pure ε charge reads as
    ρ = ε²/2, Bun & Steinke 2016, Prop. 1.4); ``epsilon`` its (ε, δ) readings; under pure DP
    ``epsilon_pure`` is the basic-composition sum.  ``projection`` is a year of periods at the
    mean charge so far.  With ``max_periods`` w (unit ``person``: nobody touches more than w
    periods), ``person_bound`` is the tighter loss of any one person: the w largest charges.

    >>> h = horizon_figure([0.01, 0.01], "zcdp", "week", 2)
    >>> h["rho"], h["projection"]["rho"], h["projection"]["text"]
    (0.02, 0.52, '52 weeks at this rate: ρ = 0.52')
    """
    values = [float(c) for c in charges]
    rho = float(sum(Fraction(v) for v in values)) if definition == "zcdp" else \
        float(sum(Fraction(v) * Fraction(v) / 2 for v in values))
    out: dict[str, Any] = {"definition": definition, "periods": int(n_periods), "rho": rho,
                           "epsilon": epsilon_readings(rho)}
    if definition == "pure":
        out["epsilon_pure"] = float(sum(Fraction(v) for v in values))
    year, name = periods_per_year(period)
    rate = rho / len(values) if values else 0.0
    proj = rate * year
    out["projection"] = {"periods": year, "rho": proj,
                         "epsilon": epsilon_readings(proj, (DEFAULT_DELTA,))[0]["epsilon"],
                         "delta": DEFAULT_DELTA,
                         "text": f"{year} {name} at this rate: ρ = {two_significant(proj)}"}
    out["cap"] = cap.to_dict() if cap is not None else None
    if max_periods is not None:
        top = sorted(values, reverse=True)[:max_periods]
        bound = float(sum(Fraction(v) for v in top)) if definition == "zcdp" else \
            float(sum(Fraction(v) * Fraction(v) / 2 for v in top))
        out["person_bound"] = {"max_periods": int(max_periods), "rho": bound,
                               "text": f"a person is in at most {max_periods} periods: ρ ≤ {two_significant(bound)}"}
    return out


def with_oneoff(figure: dict[str, Any], extra: Fraction | float, definition: str) -> dict[str, Any]:
    """A horizon figure with the linked one-off releases' share ``extra`` (in ``definition``'s unit,
    :func:`~dpcore.privacy.oneoff_links.horizon_part`) added, and stated under ``oneoff``."""
    if not extra:
        return figure
    out = dict(figure)
    add = float(extra) if definition == "zcdp" else float(extra) ** 2 / 2
    out["oneoff"] = {"value": float(extra), "definition": definition,
                     "text": "one-off releases of the same data and a cumulative series, each counted once (a group "
                             "of the periods for a record-level one-off; ρ·horizon_rho_multiple for a cumulative)"}
    out["rho"] = figure["rho"] + add
    out["epsilon"] = epsilon_readings(out["rho"])
    if definition == "pure":
        out["epsilon_pure"] = figure["epsilon_pure"] + float(extra)
    return out


@dataclass(frozen=True)
class StoredPeriod:
    """A period released before: its release id, the one it corrected (if any) and its files."""

    release_id: str
    correction_of: str | None
    files: dict[str, bytes]


class PeriodLedger(StoredLedger):
    """The ledger one period's release is charged to, within its series budget.

    Its entries name the period; a charge that would take the budget's horizon sum past the
    horizon cap is refused, inside the same transaction as the charge.
    """

    def __init__(self, budget: SeriesBudget, period: str, default_cap: PrivacyCost) -> None:
        # StoredLedger's state without its creating transaction: the budget row is written in the
        # first charge's transaction (one commit per period, not two); until then it reads as new
        key = f"{budget.population}@{period if budget.unit.parallel else HORIZON}"
        Ledger.__init__(self, default_cap, dataset=key, unit=budget.unit.base)
        # the budget's one read connection and its lock, shared by its period ledgers (a year of
        # daily periods would otherwise hold a connection, a file descriptor, per period)
        self._lock = budget._lock  # noqa: SLF001 - the same module's budget
        self._store, self._fp = budget.store, key
        self._read = budget._reader()  # noqa: SLF001
        self._version = None
        self.series = budget
        self.period = str(period)
        self._refresh()

    #: What the linked one-off releases of the same data count in this period (part of ``spent``).
    oneoff: float = 0.0
    #: Why the linked releases cannot be counted in this period's ledger (another definition or unit:
    #: the period then reads as used up), or None.
    uncountable: str | None = None

    def __del__(self) -> None:  # the read connection is the budget's: it stays open
        pass

    def _load(self, con: Any) -> None:
        if con.execute("SELECT 1 FROM datasets WHERE fingerprint = ?", (self._fp,)).fetchone() is not None:
            super()._load(con)
        else:  # not charged yet: the default cap, nothing spent by the series
            self._entries, self._spent = [], Fraction(0)
        # one-off releases of the same data touch every period: they count as spent here
        # (:mod:`dpcore.privacy.oneoff_links`)
        try:
            extra = self.series.oneoff_charge(con, self._cap.definition)
        except BudgetError as e:
            # a linked budget of another definition or unit (e.g. linked later, budget_groups.spread):
            # nothing more can be charged here, and reads must not fail: the period reads as used up
            self.uncountable = str(e)
            extra = max(Fraction(0), Fraction(self._cap.value) - self._spent)
        else:
            self.uncountable = None
        self.oneoff = float(extra)
        self._spent += extra

    def _pending(self, costs: Sequence[PrivacyCost], unit: Any) -> dict[str, list[LedgerEntry]]:
        """The charges ``costs`` (protecting ``unit``) as unwritten entries of this ledger, for
        :func:`~dpcore.privacy.oneoff_links.fit_series`."""
        release_unit = unit if unit is not None else (self._unit_of_privacy or self.series.unit.base)
        out = []
        for cost in costs:
            charged, group = self.charge_for(cost, release_unit)
            out.append(LedgerEntry(len(self._entries) + len(out), "pending", cost, self.charge_of(charged), "",
                                   {"period": self.period}, release_unit, group))
        return {self._fp: out}

    def check(self, cost: PrivacyCost, unit: Any = None) -> None:
        """:meth:`StoredLedger.check`, and the caps of the one-off budgets linked to the series (their own,
        their group's: :func:`~dpcore.privacy.oneoff_links.fit_series`) with this charge counted."""
        self.check_own(cost, unit)
        with self._lock:
            fit_series(self._read, self.series.population, self._pending([cost], unit), self.series.unit.base)

    def check_own(self, cost: PrivacyCost, unit: Any = None) -> None:
        """:meth:`StoredLedger.check` alone (this period's cap), refusing a period whose linked releases
        cannot be counted here (:attr:`uncountable`)."""
        self._refresh()
        with self._lock:
            if self.uncountable is not None:
                raise BudgetError(self.uncountable)
        super().check(cost, unit)

    def spend(self, cost: PrivacyCost, label: str, details: Mapping[str, Any] | None = None,
              unit: Any = None) -> LedgerEntry:
        with self._lock, self._store.transaction() as con:
            return self.spend_in(con, cost, label, details, unit)

    def spend_in(self, con: Any, cost: PrivacyCost, label: str, details: Mapping[str, Any] | None = None,
                 unit: Any = None, *, linked: bool = True) -> LedgerEntry:
        """:meth:`spend` inside the caller's open transaction (:meth:`SeriesBudget.spend_many`).
        ``linked`` False leaves the linked budgets' caps (:func:`~dpcore.privacy.oneoff_links.fit_series`)
        to the caller, once for a batch, before it commits."""
        details = {**dict(details or {}), "period": self.period}
        with self._lock:
            con.execute("INSERT OR IGNORE INTO datasets (fingerprint, kind, cap, created, unit) VALUES (?, ?, ?, ?, ?)",
                        (self._fp, "period", json.dumps(self._check_cap(self._cap).to_dict()), minute_now(),
                         json.dumps(self.series.unit.base.to_dict())))
            self._load(con)
            if self.uncountable is not None:
                raise BudgetError(self.uncountable)
            charged_cost, _ = self.charge_for(cost, unit)
            charge = self.charge_of(charged_cost)
            self.series.check_horizon(con, charge, self.definition, period=self.period)
            entry = super(StoredLedger, self).spend(cost, label, details, unit)
            try:
                con.execute("INSERT INTO spends VALUES (?, ?, ?)", (self._fp, entry.index, json.dumps(entry.to_dict())))
                # the linked one-off budgets' caps (their own, their group's), the charge counted: the
                # rule their own charges meet, run from the series side (oneoff_links.fit_series)
                if linked:  # this period's records (the charge is written: no entry pending)
                    fit_series(con, self.series.population, {self._fp: []}, self.series.unit.base)
            except BaseException:
                self._version = None  # the transaction rolls back: forget the in-memory charge too
                raise
            return entry


class SeriesBudget:
    """The budget of one population's releases over time (see the module docstring).

    Open it with :meth:`open` (through :meth:`dpcore.core.session.Session.series_budget`);
    :meth:`ledger` gives the ledger a period's release is charged to.
    """

    def __init__(self, store: LedgerStore, population: str, kind: str, unit: TimeUnit,
                 default_cap: PrivacyCost, horizon_cap: PrivacyCost | None, name: str | None) -> None:
        self.store, self.population, self.kind, self.unit = store, population, kind, unit
        self.default_cap, self.horizon_cap, self.name = default_cap, horizon_cap, name
        self._lock = threading.RLock()
        self._read: Any = None
        self._ledgers: dict[str, PeriodLedger] = {}

    def _reader(self) -> Any:
        """The read connection of this budget's period ledgers (opened once)."""
        with self._lock:
            if self._read is None:
                self._read = self.store._connect(check_same_thread=False)  # noqa: SLF001
            return self._read

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            if self._read is not None:
                self._read.close()

    @classmethod
    def open(cls, store: LedgerStore, population: str, kind: str, unit: TimeUnit, default_cap: PrivacyCost,
             horizon_cap: PrivacyCost | None = None, name: str | None = None) -> SeriesBudget:
        """The series budget of ``population``, created with ``unit`` and caps on first use.

        An existing budget keeps its unit and period length (another is refused: a budget kept per
        day cannot take weekly releases, whose periods overlap the days) and its horizon cap (a
        new ``horizon_cap`` may lower it, never raise it)."""
        _tables(store)
        with store.transaction() as con:
            row = con.execute("SELECT unit, horizon_cap FROM series_budgets WHERE population = ?",
                              (population,)).fetchone()
            if row is None:
                con.execute("INSERT INTO series_budgets VALUES (?, ?, ?, ?, ?, ?)",
                            (population, kind, json.dumps(unit.to_dict()),
                             json.dumps(horizon_cap.to_dict()) if horizon_cap else None, name, minute_now()))
                return cls(store, population, kind, unit, default_cap, horizon_cap, name)
            have = TimeUnit.from_dict(json.loads(row[0]))
            assert have is not None
            if (have.scope, have.period, have.max_periods) != (unit.scope, unit.period, unit.max_periods):
                raise BudgetError(
                    f"This population's releases over time are accounted as {have.label()}; this series asks for "
                    f"{unit.label()}. Release with the same unit and period (--unit, --period, --max-periods), or "
                    "keep this data under another population (--population NAME).")
            stored_cap = PrivacyCost.from_dict(json.loads(row[1])) if row[1] else None
            if horizon_cap is not None and (stored_cap is None or horizon_cap.to_zcdp().value
                                            < stored_cap.to_zcdp().value):
                con.execute("UPDATE series_budgets SET horizon_cap = ? WHERE population = ?",
                            (json.dumps(horizon_cap.to_dict()), population))
                stored_cap = horizon_cap
            return cls(store, population, kind, have, default_cap, stored_cap, name)

    def ledger(self, period: str) -> PeriodLedger:
        """The ledger the release of ``period`` (its label) is charged to: built once per budget
        object (checked before the series, then charged), every read reloading what changed."""
        with self._lock:
            if period not in self._ledgers:
                self._ledgers[period] = PeriodLedger(self, period, self.default_cap)
            return self._ledgers[period]

    def spend_many(self, ledgers: Sequence[PeriodLedger], cost: PrivacyCost, label: str,
                   details: Mapping[str, Any] | None = None, unit: Any = None) -> list[LedgerEntry]:
        """Charge ``cost`` to each of these period ledgers in **one** transaction (one commit for a
        batch of periods, :meth:`dpcore.core.session.Session.release_many`): all are charged, or none
        (a refusal rolls the batch back).  Each charge is checked as :meth:`PeriodLedger.spend` checks
        it, the batch's earlier charges counted (the same transaction reads them)."""
        if any(getattr(led, "series", None) is not self for led in ledgers):
            raise ParameterError("spend_many charges the period ledgers of this series budget only.")
        try:
            with self.store.transaction() as con:
                entries = [led.spend_in(con, cost, label, details, unit, linked=False) for led in ledgers]
                # the linked budgets' caps, the whole batch counted (written), for the records of its periods
                fit_series(con, self.population, {led.dataset: [] for led in ledgers}, self.unit.base)
                return entries
        except BaseException:
            for led in ledgers:  # rolled back: forget the batch's in-memory charges (reloaded on next read)
                led._version = None  # noqa: SLF001 - the same package's ledger
            raise

    def cumulative_ledger(self) -> Ledger:
        """The ledger a cumulative series (one factorised mechanism over every period,
        :mod:`dpcore.estimate.prefix_sums`) is charged to, once.

        * event, person-period: it protects one record or person-period (calibrated to one period's
          change) and touches every period, like a one-off release of the same data: a ledger of its
          own (key ``POP#cumulative``, the per-period cap) linked to the population
          (:mod:`dpcore.privacy.oneoff_links`), so every period counts it and it must fit beside the
          largest period spend, every period's cap and the horizon cap (its horizon share is
          ``ρ·horizon_rho_multiple``, given in the charge's details);
        * person: the horizon ledger itself (sequential composition; the mechanism is calibrated to
          the person's ``max_periods`` periods).
        """
        if not self.unit.parallel:
            return self.ledger(CUMULATIVE)
        from dpcore.privacy.oneoff_links import LinkedLedger, link

        key = f"{self.population}#{CUMULATIVE}"
        link(self.store, self.population, [key])
        return LinkedLedger(self.store, key, self.default_cap, "cumulative", self.unit.base)

    # -- horizon ------------------------------------------------------------------------------
    def _entries(self, con: Any) -> list[LedgerEntry]:
        rows = con.execute("SELECT entry FROM spends WHERE fingerprint LIKE ? ESCAPE '\\' ORDER BY fingerprint, idx",
                           (like(self.population),)).fetchall()
        return [LedgerEntry.from_dict(json.loads(e)) for (e,) in rows]

    def per_period(self) -> dict[str, float]:
        """What each period has spent (in the ledger's unit), by period label, in time order."""
        with contextlib.closing(self.store._connect()) as con:  # noqa: SLF001
            entries = self._entries(con)
        out: dict[str, Fraction] = {}
        for e in entries:
            p = str(e.details.get("period", ""))
            out[p] = out.get(p, Fraction(0)) + Fraction(e.charged)
        return {p: float(v) for p, v in sorted(out.items())}

    def oneoff_charge(self, con: Any, definition: str) -> Fraction:
        """What the one-off releases linked to this population count in one period's ledger of
        ``definition`` (:func:`~dpcore.privacy.oneoff_links.in_unit`, in the series' base unit)."""
        return sum((in_unit(e.cost, e.unit, self.unit.base, definition) for e in linked_entries(con, self.population)),
                   Fraction(0))

    def oneoff_horizon(self, con: Any, definition: str, n_periods: int) -> Fraction:
        """The linked one-off releases' share of the horizon figure over ``n_periods`` periods."""
        return sum((horizon_part(e.cost, e.unit, definition, n_periods, e.details)
                    for e in linked_entries(con, self.population)), Fraction(0))

    def check_horizon(self, con: Any, charge: float, definition: str, period: str | None = None,
                      new_periods: int = 1) -> None:
        """Refuse (BudgetError) a charge that would take the horizon sum past the horizon cap (the
        linked one-off releases counted, :meth:`oneoff_horizon`)."""
        if self.horizon_cap is None:
            return
        entries = self._entries(con)
        cap = self.horizon_cap
        seen = {str(e.details.get("period", "")) for e in entries}
        n = len(seen | ({period} if period is not None else set())) if period is not None else len(seen) + new_periods
        if cap.definition == "zcdp":
            to_rho = (lambda c: c) if definition == "zcdp" else (lambda c: c * c / 2)
            total = sum(Fraction(to_rho(e.charged)) for e in entries) + Fraction(to_rho(charge))
        else:
            if definition != "pure":
                raise BudgetError(f"The horizon cap {cap.label()} is pure ε, but these releases are ρ-zCDP: give the "
                                  "horizon cap as ρ (--horizon-cap with --rho).")
            total = sum(Fraction(e.charged) for e in entries) + Fraction(charge)
        total += self.oneoff_horizon(con, cap.definition, max(n, 1))
        if total > Fraction(cap.value) * (1 + Fraction(1, 10**9)):
            raise BudgetError(
                f"This release would take the horizon figure (a person present in every period) to "
                f"{cap.symbol} = {two_significant(float(total))}, past the horizon cap {cap.label()}. Lower the "
                "per-period budget, release fewer periods, or raise the horizon cap if your policy allows it.")

    def precheck(self, cost: PrivacyCost, periods: Sequence[str], once: PrivacyCost | None = None,
                 once_horizon: float = 0.0) -> None:
        """Refuse, before anything is charged, a series whose new ``periods`` (each to cost ``cost``)
        would not all fit: each period's own budget, and the horizon cap for all of them together.

        ``once`` is a release charged once beside them that touches every period (a cumulative
        series, :meth:`cumulative_ledger`): each new period must fit ``cost`` plus ``once`` (a
        person's horizon budget: ``once`` once), and the horizon cap its share ``once_horizon``."""
        if not periods:
            return
        if once is not None and self.unit.parallel:
            both = cost.to_zcdp().value + once.to_zcdp().value if cost.definition != once.definition \
                else cost.value + once.value
            cost = PrivacyCost("zcdp" if cost.definition != once.definition else cost.definition, both)
            once = None
        keys = sorted({f"{self.population}@{p if self.unit.parallel else HORIZON}" for p in periods})
        have: set[str] = set()
        with contextlib.closing(self.store._connect()) as con:  # noqa: SLF001
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                have |= {k for (k,) in con.execute(f"SELECT fingerprint FROM datasets WHERE fingerprint IN "
                                                   f"({','.join('?' * len(chunk))})", chunk)}
        new = [p for p in periods if f"{self.population}@{p}" not in have]
        if self.unit.parallel and new:  # a period not charged yet (its one-off share counted)
            self.ledger(new[0]).check_own(cost, self.unit.base)
        ledgers = [self.ledger(p) for p in periods if f"{self.population}@{p}" in have] if self.unit.parallel \
            else [self.ledger(periods[0])]
        for ledger in ledgers:
            ledger.check_own(cost, self.unit.base)
        first = ledgers[0] if not self.unit.parallel else self.ledger(periods[0])
        # the linked one-off budgets' caps (oneoff_links.fit_series), every new charge counted: a
        # period's (its largest counts), or a person's all in the one horizon ledger
        pending: dict[str, list[LedgerEntry]] = {}
        if self.unit.parallel:
            for led in ledgers + ([self.ledger(new[0])] if new else []):
                pending.update(led._pending([cost], self.unit.base))  # noqa: SLF001 - the same module's ledger
        else:
            pending = first._pending([cost] * len(periods) + ([once] if once is not None else []),  # noqa: SLF001
                                     self.unit.base)
        with contextlib.closing(self.store._connect()) as con:  # noqa: SLF001
            fit_series(con, self.population, pending, self.unit.base)
        charge = first.charge_of(cost)
        if not self.unit.parallel:
            total = Fraction(first.spent) + Fraction(charge) * len(periods)
            total += Fraction(first.charge_of(once)) if once is not None else 0
            if total > Fraction(first.cap.value) * (1 + Fraction(1, 10**9)):
                raise BudgetError(
                    f"Releasing {len(periods)} periods at {cost.label()} each would spend "
                    f"{cost.symbol} = {two_significant(float(total))} of this person's horizon budget "
                    f"{first.cap.label()}. Lower the per-period budget or release fewer periods.")
        if self.horizon_cap is not None:
            with contextlib.closing(self.store._connect()) as con:  # noqa: SLF001
                self.check_horizon(con, charge * len(periods) + float(once_horizon), first.definition,
                                   new_periods=len(periods))

    def horizon(self) -> dict[str, Any]:
        """The horizon figure of this budget (:func:`horizon_figure`)."""
        per = self.per_period()
        # unit person: a cumulative series is charged to the horizon ledger under the label
        # "cumulative"; it is one mechanism over every period (calibrated to a person's
        # max_periods), not one more period: counted once, beside the periods, never in their
        # number, their rate or the person's w largest periods
        cumulative = per.pop(CUMULATIVE, 0.0) if not self.unit.parallel else 0.0
        definition = self.ledger_definition()
        charges = list(per.values())
        with contextlib.closing(self.store._connect()) as con:  # noqa: SLF001
            extra = self.oneoff_horizon(con, definition, max(len(per), 1))
        out = horizon_figure(charges, definition, self.unit.period, len(per), self.horizon_cap, self.unit.max_periods)
        if cumulative and "person_bound" in out:
            bound = out["person_bound"]["rho"] + (cumulative if definition == "zcdp" else cumulative**2 / 2)
            out["person_bound"] = {**out["person_bound"], "rho": bound,
                                   "text": f"a person is in at most {self.unit.max_periods} periods and the cumulative "
                                           f"series: ρ ≤ {two_significant(bound)}"}
        return with_oneoff(out, extra + Fraction(cumulative), definition)

    def ledger_definition(self) -> str:
        with contextlib.closing(self.store._connect()) as con:  # noqa: SLF001
            row = con.execute("SELECT cap FROM datasets WHERE fingerprint LIKE ? ESCAPE '\\' LIMIT 1",
                              (like(self.population),)).fetchone()
        return PrivacyCost.from_dict(json.loads(row[0])).definition if row else self.default_cap.definition

    # -- stored periods ------------------------------------------------------------------------
    def data_key(self, period: str, fingerprint: str) -> str:
        """The keyed fingerprint of one period's data (never stored plain)."""
        return self.store.key(f"series-{self.kind}", f"{period}:{fingerprint}")

    def release_id(self, plan_digest: str, period: str, fingerprint: str) -> str:
        """The id of the release of ``period`` with this plan and data (keyed: tells nothing of the data)."""
        mac = self.store.key("series-release", f"{self.population}|{plan_digest}|{period}|{fingerprint}")
        return "s1-" + mac[len("k1:"):][:40]

    def stored(self, plan_digest: str, period: str, fingerprint: str) -> tuple[StoredPeriod | None, str | None]:
        """The stored release of this plan, period and data (or None), and the id of the latest
        stored release of this plan and period made from other data (the one a new release corrects)."""
        return self.stored_many(plan_digest, [(period, fingerprint)])[0]

    def stored_many(self, plan_digest: str, items: Sequence[tuple[str, str]]
                    ) -> list[tuple[StoredPeriod | None, str | None]]:
        """:meth:`stored` for many (period, fingerprint) pairs, read in one connection.

        A stored release whose files were removed from the history is refused (InputError): it
        can be neither re-served nor released again (that would re-noise the same data)."""
        with contextlib.closing(self.store._connect()) as con:  # noqa: SLF001
            rows: dict[str, list[tuple[str, str, str | None]]] = {}
            for period, data, rid, corr in con.execute(
                    "SELECT period, data, release_id, correction_of FROM series_periods WHERE population = ? AND "
                    "plan = ? ORDER BY created DESC, rowid DESC", (self.population, plan_digest)):
                rows.setdefault(period, []).append((data, rid, corr))
            found = []
            for period, fingerprint in items:
                data = self.data_key(period, fingerprint)
                same = [r for r in rows.get(period, []) if r[0] == data]
                other = next((r[1] for r in rows.get(period, []) if r[0] != data), None)
                found.append((period, same[0] if same else None, other))
            wanted = [r[1] for _, r, _ in found if r is not None]
            files = self._files(con, wanted)
        return [(StoredPeriod(r[1], r[2], files.get(r[1], {})) if r is not None else None, other)
                for _, r, other in found]

    def _files(self, con: Any, ids: Sequence[str]) -> dict[str, dict[str, bytes]]:
        from dpcore.privacy.ledger_store import _unpack

        out: dict[str, dict[str, bytes]] = {}
        for i in range(0, len(ids), 400):
            chunk = list(ids[i:i + 400])
            marks = ",".join("?" * len(chunk))
            order = {rid: json.loads(summary).get("order") for rid, summary in con.execute(
                f"SELECT release_id, summary FROM releases WHERE release_id IN ({marks})", chunk)}
            for rid, name, data, encoding, removed, size in con.execute(
                    f"SELECT release_id, name, data, encoding, removed, size FROM release_files WHERE release_id IN ({marks}) "
                    "ORDER BY rowid", chunk):
                if removed is not None:
                    raise InputError(
                        f"The stored file {name!r} of the period release {rid} was removed from the history on "
                        f"{removed.replace('T', ' ')} UTC, so it cannot be re-served, and releasing it again would "
                        "re-noise the same data. Use another plan, or another population.")
                out.setdefault(rid, {})[name] = _unpack(bytes(data), encoding, size,
                                                        f"The stored file {name!r} of the period release {rid}")
            for rid, names in order.items():
                if names and rid in out:
                    out[rid] = {n: out[rid][n] for n in names if n in out[rid]}
        return out

    def files(self, release_id: str) -> dict[str, bytes]:
        """The stored files of a release, as published, in the order they were kept ({} if none)."""
        with contextlib.closing(self.store._connect()) as con:  # noqa: SLF001
            return self._files(con, [release_id]).get(release_id, {})

    def keep(self, plan_digest: str, period: str, fingerprint: str, files: Mapping[str, bytes],
             summary: Mapping[str, Any], correction_of: str | None = None, empty: bool = False) -> str:
        """Store a period's files (published bytes) and its (period, data) pair; returns its release id.
        (An empty period's pair never identifies a population: :func:`find_population` is given the
        non-empty periods only, every empty period being alike.)"""
        return self.keep_many([(plan_digest, period, fingerprint, files, summary, correction_of, empty)])[0]

    def keep_many(self, items: Sequence[tuple[str, str, str, Mapping[str, bytes], Mapping[str, Any], str | None,
                                              bool]]) -> list[str]:
        """:meth:`keep` for several periods in one transaction (one commit for a batch of periods:
        a commit waits for the disk).  Each item is ``(plan_digest, period, fingerprint, files,
        summary, correction_of, empty)``."""
        ids = []
        with self.store.transaction() as con:
            for plan, period, fingerprint, files, summary, correction_of, _empty in items:
                rid = self.release_id(plan, period, fingerprint)
                self.store.record_release(self.population, rid, self.kind, {**dict(summary), "order": list(files)},
                                          files, con=con)
                con.execute("INSERT OR IGNORE INTO series_periods VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (self.population, plan, period, self.data_key(period, fingerprint), rid, correction_of,
                             minute_now()))
                ids.append(rid)
        return ids


def find_population(store: LedgerStore, kind: str, pairs: Sequence[tuple[str, str]], whole: str,
                    name: str | None = None) -> tuple[str, str]:
    """The population key of a series and the rule that found it (``named``, ``matched``, ``new``).

    ``pairs`` are the (period label, content fingerprint) of the series' non-empty periods;
    ``whole`` the content fingerprint of the whole input.  See the module docstring for the rule.
    """
    named = None
    if name is not None:
        if not str(name).strip():
            raise ParameterError("A population needs a name (for example the survey the data comes from).")
        named = store.population_key(str(name).strip())
    _tables(store)
    keys = [store.key(f"series-{kind}", f"{p}:{fp}") for p, fp in pairs]
    found: dict[str, int] = {}
    if keys:
        with contextlib.closing(store._connect()) as con:  # noqa: SLF001
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                for pop, n in con.execute(
                        f"SELECT population, COUNT(DISTINCT period) FROM series_periods WHERE data IN "
                        f"({','.join('?' * len(chunk))}) GROUP BY population", chunk):
                    found[pop] = found.get(pop, 0) + int(n)
    if named is not None:
        others = sorted(p for p in found if p != named)
        if others:
            # the same people's periods already draw on another budget: a new name would start afresh
            raise BudgetError(
                f"Periods of this data were already released under another population's budget; naming it "
                f"'{name}' now would give the same people a fresh budget. Release it without --population (it is "
                "recognised from its periods), or under the name it was first released with.")
        return named, "named"
    if found:
        return max(sorted(found), key=lambda p: found[p]), "matched"
    return store.key(f"series-{kind}", whole), "new"


def list_budgets(store: LedgerStore, delta: float = DEFAULT_DELTA) -> list[dict[str, Any]]:
    """Every budget in the database, for the office view (``python -m dpcore budgets``, History).

    One record per budget: ``population`` (a name, or the keyed key), ``kind``, ``unit``, ``cap``
    (per period for event and person-period series, of the horizon otherwise), ``spent`` (the most
    any period spent; the total for one-off budgets and person series), ``periods`` (each
    ``{period, spent, releases}``), ``horizon`` (:func:`horizon_figure`) and ``releases``; a series
    whose linked one-off releases cannot be counted in its definition or unit has ``counted``
    (``"cannot be counted: <reason>"``, the linked releases left out of its figures; its periods
    refuse every charge).
    """
    _tables(store)
    with contextlib.closing(store._connect()) as con:  # noqa: SLF001
        datasets = con.execute("SELECT fingerprint, kind, cap, unit FROM datasets ORDER BY created, rowid").fetchall()
        series = {r[0]: r for r in con.execute("SELECT population, kind, unit, horizon_cap, name FROM series_budgets")}
        names = {p: n for p, n in con.execute("SELECT population, name FROM bindings")}
        spends: dict[str, list[LedgerEntry]] = {}
        for fp, e in con.execute("SELECT fingerprint, entry FROM spends ORDER BY fingerprint, idx"):
            spends.setdefault(fp, []).append(LedgerEntry.from_dict(json.loads(e)))
        n_rel = dict(con.execute("SELECT fingerprint, COUNT(*) FROM releases GROUP BY fingerprint").fetchall())
        linked = {pop: linked_entries(con, pop) for pop in series}
    out: list[dict[str, Any]] = []
    grouped: dict[str, list[tuple[str, PrivacyCost]]] = {}
    for fp, kind, cap, _unit in datasets:
        pop, at, _ = fp.rpartition("@")
        if at and pop in series:
            grouped.setdefault(pop, []).append((fp, PrivacyCost.from_dict(json.loads(cap))))
            continue
        entries = spends.get(fp, [])
        cost = PrivacyCost.from_dict(json.loads(cap))
        base, hash_, what = fp.rpartition("#")
        if hash_ and what == CUMULATIVE and base in series:  # a series' cumulative release, charged once
            fp_name = f"{series[base][4] or base} (cumulative series)"
            names.setdefault(fp, fp_name)
        spent = float(sum(Fraction(e.charged) for e in entries))
        out.append({"population": names.get(fp, fp), "kind": kind, "unit": json.loads(_unit) if _unit else None,
                    "cap": cost.to_dict(), "spent": spent, "periods": [],
                    "horizon": horizon_figure([spent] if entries else [], cost.definition, "day", 1 if entries else 0),
                    "releases": len(entries)})
    for pop, ledgers in grouped.items():
        _, kind, unit_text, hcap, name = series[pop]
        unit = TimeUnit.from_dict(json.loads(unit_text))
        assert unit is not None
        per: dict[str, list[LedgerEntry]] = {}
        for fp, _ in ledgers:
            for e in spends.get(fp, []):
                per.setdefault(str(e.details.get("period", "")), []).append(e)
        cap = ledgers[0][1]
        own = {p: sum((Fraction(e.charged) for e in es), Fraction(0)) for p, es in sorted(per.items())}
        # one-off releases of the same data (and a cumulative series) count in every period's ledger
        # (parallel units) or once in the person's horizon ledger
        try:
            extra = sum((in_unit(e.cost, e.unit, unit.base, cap.definition) for e in linked.get(pop, [])),
                        Fraction(0))
            share = sum((horizon_part(e.cost, e.unit, cap.definition, max(len(own), 1), e.details)
                         for e in linked.get(pop, [])), Fraction(0))
            counted = None
        except BudgetError as e:  # a linked budget of another definition or unit: listed, never failing the list
            extra, share, counted = Fraction(0), Fraction(0), f"cannot be counted: {e}"
        periods = [{"period": p, "spent": float(v + (extra if unit.parallel else 0)), "releases": len(per[p])}
                   for p, v in own.items()]
        spent = max((p["spent"] for p in periods), default=0.0) if unit.parallel else \
            float(sum(own.values(), extra))
        hc = PrivacyCost.from_dict(json.loads(hcap)) if hcap else None
        figure = with_oneoff(horizon_figure([float(v) for v in own.values()], cap.definition, unit.period, len(own),
                                            hc, unit.max_periods), share, cap.definition)
        out.append({"population": name or pop, "kind": kind, "unit": unit.to_dict(), "cap": cap.to_dict(),
                    "cap_per": "period" if unit.parallel else "horizon", "spent": spent, "periods": periods,
                    "horizon": figure,
                    "releases": sum(p["releases"] for p in periods), "stored": int(n_rel.get(pop, 0)),
                    **({"counted": counted} if counted else {})})
    return out


def plan_digest(parts: Mapping[str, Any]) -> str:
    """A digest of a plan's public description (mechanism, parameters, cost, unit, domain).

    >>> plan_digest({"a": 1}) == plan_digest({"a": 1}), len(plan_digest({"a": 1}))
    (True, 32)
    """
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
