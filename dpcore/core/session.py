"""The session: the one object that owns the privacy budget and charges it.

Every release — from the app's pages, from every CLI command and from ``run CONFIG`` — goes
through :meth:`Session.release`, the only code in dpcore that charges a ledger.  It

1. finds the population's budget (:meth:`Session.budget`): a keyed content fingerprint of the
   data (:meth:`dpcore.privacy.ledger_store.LedgerStore.key`), or the named population the data
   is bound to, created with the default cap and the unit of privacy on first use;
2. refuses a release whose unit of privacy the budget cannot account for, or that would pass the
   cap, with the reason (:mod:`dpcore.privacy.units`, :class:`dpcore.privacy.ledger.Ledger`);
3. charges the cost *before* any noise is drawn, so a failure afterwards can never hand out an
   uncharged release, and stamps the release with the time of the charge (to the minute), so
   the record and the ledger entry state one time and neither times the computation;
4. keeps cap changes as ledger events, and asks for confirmation before a cap is raised.

It follows Tumult Analytics' ``Session`` (one object owns the accountant; every query goes
through it) and ektelo's kernel (the plan is data-free; only the kernel touches the data and the
budget).

>>> from dpcore.privacy.budget import pure
>>> from dpcore.privacy.ledger import Ledger
>>> session = Session.unaccounted()
>>> ledger = Ledger(pure(1.0))
>>> out = session.release(ledger, Charge(pure(0.25), "a test release"), lambda: "released")
>>> out, ledger.spent, ledger.entries[0].label
('released', 0.25, 'a test release')
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from dpcore.core.record import stamp_created
from dpcore.errors import BudgetError, DPCoreError, InputError, ParameterError
from dpcore.privacy import key_aliases
from dpcore.privacy.budget import PrivacyCost, pure, zcdp
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.ledger_journal import made
from dpcore.privacy.ledger_store import (
    LEGACY_KINDS,
    LedgerStore,
    StoredLedger,
    default_path,
    default_store,
)
from dpcore.privacy.oneoff_links import LinkedLedger, link
from dpcore.privacy.series_ledger import SeriesBudget, find_population, list_budgets
from dpcore.privacy.units import (
    TimeUnit,
    Unit,
    population_needs_persons,
    series_population_needs_persons,
)

__all__ = ["DEFAULT_EPSILON_CAP", "DEFAULT_RELEASE_SHARE", "DEFAULT_RHO_CAP", "Charge", "JsonLedger", "Session",
           "default_cap", "default_release_budget"]

R = TypeVar("R")

#: The cap a population gets when it has none yet (the app's default): ε = 1.
DEFAULT_EPSILON_CAP = 1.0
#: ... or, for a ρ-zCDP release, ρ = 0.5: the ρ of a pure ε = 1 mechanism (Bun & Steinke 2016,
#: Prop. 1.4), so the default allows the same releases under either definition.
DEFAULT_RHO_CAP = 0.5


#: The share of the default cap one release is offered by default, for every kind of data and both
#: definitions: half, so that two default releases use up a new default budget.
DEFAULT_RELEASE_SHARE = 0.5


def default_release_budget(definition: str) -> float:
    """The default budget of one release under ``definition`` (``"pure"``: ε, ``"zcdp"``: ρ):
    :data:`DEFAULT_RELEASE_SHARE` of that definition's default cap, the same for every kind of data.

    >>> default_release_budget("pure"), default_release_budget("zcdp")
    (0.5, 0.25)
    """
    if definition not in ("pure", "zcdp"):
        raise ParameterError(f"Unknown privacy definition {definition!r}: 'pure' (ε) or 'zcdp' (ρ).")
    return DEFAULT_RELEASE_SHARE * (DEFAULT_EPSILON_CAP if definition == "pure" else DEFAULT_RHO_CAP)


def default_cap(cost: PrivacyCost) -> PrivacyCost:
    """The default cap for a new population whose first release costs ``cost``.

    >>> default_cap(pure(0.3)).label(), default_cap(zcdp(0.01)).label()
    ('ε = 1', 'ρ = 0.5')
    """
    return pure(DEFAULT_EPSILON_CAP) if cost.definition == "pure" else zcdp(DEFAULT_RHO_CAP)


@dataclass(frozen=True)
class Charge:
    """What a release costs and how it is recorded: the cost, a label for people, JSON-able
    details (mechanism, parameters, split) and the release's unit of privacy (default: the
    budget's).  A mechanism's plan carries the same four attributes."""

    cost: PrivacyCost
    label: str
    details_: Mapping[str, Any] = field(default_factory=dict)
    unit: Unit | None = None

    def details(self) -> dict[str, Any]:
        return dict(self.details_)


class JsonLedger(Ledger):
    """A ledger kept in a JSON file (``--ledger FILE``), tied to one population's key.

    The file is rewritten after every charge.  A file made for other data is refused, so one
    file cannot carry a budget across data sets.
    """

    def __init__(self, path: Path, cap: PrivacyCost, key: str, unit: Unit | None = None) -> None:
        super().__init__(cap, dataset=key, unit=unit)
        self.path = Path(path)

    @classmethod
    def open(cls, path: str | Path, key: str, cap: PrivacyCost, unit: Unit | None = None, *,
             earlier: tuple[str, ...] = ()) -> JsonLedger:
        """The ledger in ``path`` (checked against ``key``, or one of the ``earlier`` keys of the same
        data, which it then moves to ``key``), or a new one with ``cap`` and ``unit``."""
        path = Path(path)
        if not path.exists():
            return cls(path, cap, key, unit)
        try:
            stored = Ledger.from_dict(json.loads(path.read_text("utf-8")))
        except (OSError, ValueError, InputError) as e:
            raise ParameterError(f"Ledger file '{path}' is not a dpcore ledger ({e}). Point --ledger to the file an "
                                 "earlier run wrote, or a new path.") from None
        if stored.dataset and stored.dataset != key and stored.dataset not in earlier:
            raise BudgetError(
                f"The ledger file '{path}' keeps the budget of other data: a ledger file belongs to the data of its "
                "first release. Use that data, or a new ledger file for this data.")
        out = cls(path, stored.cap, key, stored.unit)
        out.__setstate__({**stored.__getstate__(), "dataset": key, "path": path})
        return out

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.to_dict(), indent=2), "utf-8")


class Session:
    """Owns the budget database and charges every release.

    Parameters
    ----------
    store : LedgerStore, optional
        The budget database; default ``$DPCORE_LEDGER_DB``, else the user's data directory
        (:func:`dpcore.privacy.ledger_store.default_path`).
    accounted : bool
        ``False`` for a session that charges nothing (``--no-budget``, comparisons on the
        curator's own machine); its releases say "not accounted" in their record.
    """

    def __init__(self, store: LedgerStore | None = None, *, accounted: bool = True,
                 deliver_to: str | None = None) -> None:
        self._store = store
        self.accounted = bool(accounted)
        #: where this session's releases are delivered (``"app"``, ``"folder:PATH"``), or None: each
        #: charge of the database is then journalled with it, in its own transaction, until its files
        #: are stored and delivered (:mod:`dpcore.privacy.ledger_journal`; issue 26, item 20)
        self.deliver_to = deliver_to

    @classmethod
    def open(cls, path: str | Path | None = None) -> Session:
        """A session on the budget database at ``path`` (default: the shared one)."""
        return cls(LedgerStore(Path(path)) if path else None)

    @classmethod
    def temporary(cls) -> Session:
        """A session whose budgets and release history live only as long as the object (a
        private temporary database, removed with it): for made-up demo data, whose budget
        should reset with the app's browser session instead of being used up for good."""
        return cls(LedgerStore.temporary_store())

    @property
    def is_temporary(self) -> bool:
        """Whether this session's budgets are kept only as long as it lives (:meth:`temporary`)."""
        return self._store is not None and self._store.temporary

    @classmethod
    def unaccounted(cls) -> Session:
        """A session that charges only the ledgers it is handed (never the database)."""
        return cls(None, accounted=False)

    @property
    def store(self) -> LedgerStore:
        if self._store is None:
            self._store = default_store()
        return self._store

    # -- budgets ----------------------------------------------------------------------------
    def key(self, kind: str, fingerprint: str) -> str:
        """The keyed population key of ``kind`` data with this content fingerprint."""
        return self.store.key(kind, fingerprint)

    def budget(self, kind: str, fingerprint: str, *, default: PrivacyCost, unit: Unit | None = None,
               population: str | None = None) -> StoredLedger:
        """The budget that ``kind`` data with this content fingerprint draws on.

        A new budget gets the cap ``default`` and the unit ``unit``; an existing one keeps its
        own.  With ``population``, the data is bound (for good) to that named population and
        draws on its budget, shared with every other kind of data bound to it.
        """
        store = self.store
        data_key = store.data_key(kind, fingerprint)  # its own key, or the budget it is an alias of
        key = store.resolve(data_key)
        if population:
            population_needs_persons(unit)  # before the population's budget is opened with this unit
            key = store.bind(data_key, population)
        # a one-off budget composes with the series of the same data (linked when a series is opened)
        return LinkedLedger(store, key, default, kind if key == data_key else "population", unit)

    def adopt_keys(self, kind: str, fingerprint: str, others: Sequence[str]) -> None:
        """Lead every key of one data set to one budget: ``fingerprint`` is its main content
        fingerprint, ``others`` the further fingerprints of the same data (every level of a table,
        the points inside the bounds, the rule of an earlier version).  When the main key has no
        budget yet and another has, the data draws on that one; every key without a budget of its
        own becomes an alias of it (:func:`dpcore.privacy.key_aliases.adopt`).  Call it when the
        data is loaded, before its budget is opened.  An unaccounted session keeps no keys."""
        if self._store is None and not self.accounted:
            return
        store = self.store
        store.data_key(kind, fingerprint)  # a budget under an earlier version's key moves first
        key_aliases.adopt(store, store.key(kind, fingerprint), [store.key(kind, fp) for fp in others if fp])

    def may_hold_v1_level_keys(self) -> bool:
        """Whether this session's budget database may hold a table's finer-level keys of the earlier
        rule (:func:`dpcore.privacy.key_aliases.may_hold_v1_level_keys`): then a table is keyed by
        them too.  An unaccounted session keeps no keys."""
        if self._store is None and not self.accounted:
            return False
        return key_aliases.may_hold_v1_level_keys(self.store)

    def holds_budget(self, kind: str, fingerprint: str, others: Sequence[str] = ()) -> bool:
        """Whether the budget database already holds a budget (or a population binding) that
        ``kind`` data with these fingerprints draws on.  A database that does not exist holds none
        (and is not created by asking)."""
        if self._store is None and (not self.accounted or not default_path().exists()):
            return False
        store = self.store
        keys = [store.data_key(kind, fp) for fp in (fingerprint, *others) if fp]
        return any(store.has_ledger(store.resolve(k)) or store.population_name(k) is not None for k in keys)

    def adopt_legacy(self, kind: str, fingerprint: str, legacy: Sequence[str] | Callable[[], Sequence[str]]) -> None:
        """Move budgets stored under the plain keys of an earlier fingerprint rule (``legacy``) of the
        same data to this data's key, so an upgrade never hands out a fresh budget.  Call it when the
        data is loaded, before its budget is opened.  (A budget already opened under the new key is
        left as it is, and so is the old one: the two are not merged.)  ``legacy`` may be a function
        giving the earlier keys: it is called only when the database holds a plain key of ``kind``
        (:meth:`~dpcore.privacy.ledger_store.LedgerStore.holds_plain_keys`), the only case where
        anything can move."""
        store = self.store
        kinds = (kind, *LEGACY_KINDS.get(kind, ()))
        if callable(legacy):
            if not store.holds_plain_keys(kinds):
                return
            legacy = legacy()
        key = store.data_key(kind, fingerprint)
        for k in kinds:
            for old in legacy:
                store.migrate_plain_key(f"{k}:{old}", key, kind)

    def series_budget(self, kind: str, fingerprint: str, periods: Sequence[tuple[str, str]], unit: TimeUnit, *,
                      default: PrivacyCost, horizon_cap: PrivacyCost | None = None,
                      population: str | None = None, oneoff: Sequence[tuple[str, str]] = ()) -> SeriesBudget:
        """The budget a series of releases over time of ``kind`` data draws on.

        ``fingerprint`` is the whole input's content fingerprint and ``periods`` the (period label,
        period content fingerprint) pairs of its non-empty periods: the population is the named one,
        else the one an earlier series of the same periods' data was charged to (a late record in one
        period keeps the others), else a new one (:func:`~dpcore.privacy.series_ledger.find_population`).
        ``default`` is the cap of a new budget: per period for event and person-period units, of the
        horizon for a person; ``horizon_cap`` optionally caps the horizon figure.  Each period's release
        is charged to ``budget.ledger(period)`` through :meth:`release` (``dpcore.pipeline.release``).

        ``oneoff`` are the (kind, content fingerprint) pairs under which a one-off release of the same
        input is keyed (:meth:`budget`): their budgets are linked to the series' population, and so is a
        named population's own one-off budget, so one-off releases and the series compose both ways
        (:mod:`dpcore.privacy.oneoff_links`).
        """
        if not self.accounted:
            raise BudgetError("An unaccounted session keeps no series budget; release the series without one.")
        keys = [self.store.budget_key(k, fp) for k, fp in oneoff if fp]
        # a named population protects persons, series too (issue 26 item 15): named here, or the one the
        # data's one-off budget is bound to (the series would be linked to it)
        if population is not None or any(self.store.is_population(k) for k in keys):
            series_population_needs_persons(unit.scope)
        key, _rule = find_population(self.store, kind, periods, fingerprint, population)
        budget = SeriesBudget.open(self.store, key, kind, unit, default, horizon_cap, population)
        link(self.store, key, keys + ([key] if population else []))
        return budget

    def budgets(self) -> list[dict[str, Any]]:
        """Every budget in this session's database, for the office view
        (:func:`~dpcore.privacy.series_ledger.list_budgets`)."""
        return list_budgets(self.store)

    def json_budget(self, path: str | Path, kind: str, fingerprint: str, *, default: PrivacyCost,
                    unit: Unit | None = None, others: Sequence[str] = ()) -> JsonLedger:
        """A budget kept in a JSON file, tied to this data's key (a file written under an earlier
        version's key kind, :data:`~dpcore.privacy.ledger_store.LEGACY_KINDS`, or under one of the
        data's ``others`` fingerprints (:meth:`adopt_keys`) is taken over)."""
        earlier = tuple(self.key(k, fingerprint) for k in LEGACY_KINDS.get(kind, ()))
        earlier += tuple(self.key(kind, fp) for fp in others if fp)
        return JsonLedger.open(path, self.key(kind, fingerprint), default, unit, earlier=earlier)

    # -- the one place a budget is charged ----------------------------------------------------
    def release(self, ledger: Ledger | None, charge: Any, run: Callable[[], R]) -> R:
        """Charge ``charge`` to ``ledger``, then run the release and stamp it with the charge's time.

        ``charge`` has ``cost``, ``label``, ``details()`` and ``unit`` (a :class:`Charge` or a
        mechanism's plan).  Nothing is drawn when the charge is refused.  ``ledger`` may be
        ``None`` only in an unaccounted session.
        """
        if ledger is None:
            if self.accounted:
                raise BudgetError("This release has no budget to draw on. Open the data's budget first "
                                  "(Session.budget), or use an unaccounted session for a test.")
            return run()
        # a charge that names no unit is taken as record-level: it is refused on a person or group
        # budget rather than charged as if it protected persons
        unit = charge.unit if charge.unit is not None else Unit()
        _refuse_record_level_population(ledger, unit)
        # a charge of the database made to be delivered is journalled in its own transaction
        journal = self.deliver_to if isinstance(ledger, StoredLedger) and not hasattr(ledger, "series") else None
        entry = ledger.spend(charge.cost, charge.label, charge.details(), unit,
                             **({"journal": journal} if journal else {}))
        if isinstance(ledger, JsonLedger):
            ledger.save()
        out = run()
        if journal and isinstance(getattr(out, "release_id", None), str):
            with contextlib.suppress(DPCoreError):  # the charge stays journalled as not delivered
                made(ledger.store, ledger.dataset, entry.index, out.release_id)
        return stamp_created(out, entry.time)

    def release_many(self, ledgers: Sequence[Any], charge: Any, runs: Sequence[Callable[[], R]]) -> list[R]:
        """Charge ``charge`` to each of ``ledgers`` (period ledgers of one series budget) in one
        transaction, then run each release, stamped with its charge's time.

        Every charge is committed before the first noise is drawn (a crash afterwards leaves periods
        charged and not released, never a release without its charge); a refusal charges none of
        them.  One commit for a batch of periods instead of one each (``benchmarks/series.py``).
        """
        if len(ledgers) != len(runs):
            raise ParameterError("release_many needs one release per ledger.")
        if not ledgers:
            return []
        budget = getattr(ledgers[0], "series", None)
        if budget is None or not hasattr(budget, "spend_many"):
            return [self.release(led, charge, run) for led, run in zip(ledgers, runs, strict=True)]
        unit = charge.unit if charge.unit is not None else Unit()
        entries = budget.spend_many(ledgers, charge.cost, charge.label, charge.details(), unit)
        return [stamp_created(run(), entry.time) for entry, run in zip(entries, runs, strict=True)]

    # -- caps ---------------------------------------------------------------------------------
    def set_cap(self, ledger: Ledger, cap: PrivacyCost, *, confirm: bool = False) -> bool:
        """Change a budget's cap; the change is kept as a ledger event (when, old, new).

        Raising a cap gives the same people more exposure, so it needs ``confirm=True``; without
        it a :class:`~dpcore.errors.BudgetError` says so.  Returns whether the cap changed.
        """
        old = ledger.cap
        if cap == old:
            return False
        # compared in one currency: ρ (a pure ε cap reads as ρ = ε²/2), so that switching the
        # definition of a budget cannot raise it unconfirmed
        new_rho, old_rho = cap.to_zcdp().value, old.to_zcdp().value
        raising = new_rho > old_rho and not math.isclose(new_rho, old_rho, rel_tol=1e-12)
        if raising and not confirm:
            raise BudgetError(
                f"Raising the cap from {old.label()} to {cap.label()} lets the same people be exposed more. Confirm "
                "the raise if your privacy policy allows it (in the app: tick the confirmation; in code: confirm=True).")
        ledger.set_cap(cap)
        if isinstance(ledger, JsonLedger):
            ledger.save()
        return True


def _refuse_record_level_population(ledger: Ledger, unit: Unit) -> None:
    """Refuse a record-level charge to a named population's budget (issue 26 item 15).

    A population joins data sets of the same people (points, trips, tables); its cap is meant to hold
    for every person.  A record-level release protects one row, so a person with 15 points would be
    exposed at 15 times its cost: a population budget takes releases that protect a person or a group.
    A count table is released as one person when the curator confirms each person is counted once
    (``--each-person-counted-once``)."""
    store = getattr(ledger, "store", None)
    if unit.entity != "record" or not isinstance(store, LedgerStore):
        return
    if store.is_population(str(ledger.dataset)):
        population_needs_persons(unit)
