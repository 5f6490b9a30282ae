"""The ledger: the budget cap of one population and every release charged to it.

Releases compose sequentially, so the ledger adds their costs (Dwork & Roth 2014, Thm. 3.14 for
pure ε-DP; Bun & Steinke 2016, Lemma 1.7 for ρ-zCDP).  Its arithmetic is exact
(:class:`fractions.Fraction`), its check-and-record is atomic and thread-safe, and a refused
release changes nothing.  A ledger is created for one unit of privacy
(:class:`~dpcore.privacy.units.Unit`); every entry records the unit of its release, and every
change of the cap is kept as an event (when, old, new).

Only :class:`dpcore.core.session.Session` charges a ledger; pages, the CLI and configs go
through it.

Times are kept to the minute (UTC): the time of an entry is the time its record states, and a
finer clock would let a reader of the record time the computation on the data.
"""

from __future__ import annotations

import copy
import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from dpcore.errors import BudgetError, InputError, ParameterError
from dpcore.privacy.budget import (
    APPROX_DP_DELTAS,
    CAP_TOLERANCE,
    DEFINITION_NAME,
    SYMBOL,
    Definition,
    PrivacyCost,
    float_up,
    jsonable,
    two_significant,
    zcdp_to_approx_dp,
)
from dpcore.privacy.units import Unit, group_factor

__all__ = ["CapChange", "Ledger", "LedgerEntry", "epsilon_readings", "minute_now"]


def epsilon_readings(rho: float, deltas: tuple[float, ...] = APPROX_DP_DELTAS) -> list[dict[str, float]]:
    """The (ε, δ)-DP readings of a ρ-zCDP total (Canonne, Kamath & Steinke 2020, Cor. 13), as a
    ledger reports them: ``[{"delta", "epsilon"}]`` (ε = 0 for nothing spent).

    >>> epsilon_readings(0.0, (1e-6,))
    [{'delta': 1e-06, 'epsilon': 0.0}]
    """
    return [{"delta": d, "epsilon": zcdp_to_approx_dp(rho, d) if rho > 0 else 0.0} for d in deltas]


#: The last minute :func:`minute_now` wrote, ``(minutes since the epoch, its text)``: every release
#: states its time, and a run of small releases asked for the same minute's text thousands of times.
_last_minute: tuple[int, str] = (-1, "")


def minute_now() -> str:
    """The current UTC time to the minute, ISO 8601 (``2026-11-27T06:13+00:00``).

    >>> len(minute_now())
    22
    >>> 0 <= (datetime.now(UTC) - datetime.fromisoformat(minute_now())).total_seconds() < 61
    True
    """
    global _last_minute
    minute = int(time.time() // 60)  # POSIX time: every UTC minute is 60 seconds
    last = _last_minute  # one read of a tuple: threads see a whole pair
    if last[0] != minute:
        last = _last_minute = (minute, datetime.fromtimestamp(minute * 60, UTC).isoformat(timespec="minutes"))
    return last[1]


@dataclass(frozen=True)
class CapChange:
    """A change of a ledger's cap: when (to the minute), the old cap and the new one."""

    time: str
    old: PrivacyCost
    new: PrivacyCost

    def to_dict(self) -> dict[str, Any]:
        return {"time": self.time, "old": self.old.to_dict(), "new": self.new.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CapChange:
        try:
            return cls(str(d["time"]), PrivacyCost.from_dict(d["old"]), PrivacyCost.from_dict(d["new"]))
        except (KeyError, TypeError) as err:
            raise InputError(f"A cap change record is incomplete ({err!r}); it needs time, old and new.") from None


@dataclass(frozen=True)
class LedgerEntry:
    """One release recorded in a :class:`Ledger`.

    Attributes
    ----------
    index : int
        Position in the ledger, from 0.
    label : str
        What was released, for people ("HTF release of trips.csv").
    cost : PrivacyCost
        The cost as stated by the mechanism.
    charged : float
        The cost in the ledger's unit (ε for a pure ledger, ρ for a zCDP ledger).
    time : str
        ISO 8601 time in UTC, to the minute (:func:`minute_now`).
    details : dict
        JSON-able facts about the release (mechanism, parameters, split, ...).
    unit : Unit
        The unit of privacy of the release.
    group : int
        The group size it was charged for (1, or 2 where :func:`~dpcore.privacy.units.group_factor`
        says the release protects another unit than the budget's).
    """

    index: int
    label: str
    cost: PrivacyCost
    charged: float
    time: str
    details: dict[str, Any] = field(default_factory=dict, hash=False)
    unit: Unit = field(default_factory=Unit)
    group: int = 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-able record of the entry."""
        return {
            "index": self.index,
            "label": self.label,
            "cost": self.cost.to_dict(),
            "charged": self.charged,
            "time": self.time,
            "details": copy.deepcopy(self.details),
            "unit": self.unit.to_dict(),
            "group": self.group,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LedgerEntry:
        """Inverse of :meth:`to_dict`."""
        try:
            return cls(
                index=int(d["index"]),
                label=str(d["label"]),
                cost=PrivacyCost.from_dict(d["cost"]),
                charged=float(d["charged"]),
                time=str(d["time"]),
                details=jsonable(dict(d.get("details") or {})),
                unit=Unit.from_dict(d.get("unit")),
                group=int(d.get("group", 1)),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise InputError(
                f"A ledger entry record is incomplete or malformed ({err!r}); it needs index, "
                "label, cost, charged and time. Use a file written by Ledger.to_dict()."
            ) from None


class Ledger:
    """Privacy budget of one dataset: a cap set by the curator, every release recorded,
    overspending refused.

    Releases compose sequentially, so the ledger adds their costs: ε for a pure cap (basic
    composition, Dwork & Roth 2014, Thm. 3.14) or ρ for a zCDP cap (Bun & Steinke 2016,
    Lemma 1.7).  A pure ε release charged to a zCDP cap costs ``ε²/2`` (Bun & Steinke
    2016, Prop. 1.4); a zCDP release cannot be charged to a pure cap.

    The running total is exact (a sum of :class:`fractions.Fraction` of the float charges).
    A release is allowed when ``spent + charge <= cap · (1 + 1e-9)``: the relative slack
    :data:`CAP_TOLERANCE` lets decimal budgets that binary floats cannot hold exactly add up
    to the cap (ten releases of ε = 0.1 against a cap of 1.0).  Check and record happen
    under one lock, so concurrent spends (two browser tabs on one session) never exceed the
    cap, and a refused spend changes nothing.

    Parameters
    ----------
    cap : PrivacyCost
        The most this dataset may spend; its definition is the ledger's definition.
    dataset : str
        The population's key (or a name), for the record; a ledger file is tied to it.
    unit : Unit, optional
        The unit of privacy the budget protects; releases of another unit are refused or
        charged their group cost (:func:`~dpcore.privacy.units.group_factor`).  Without one,
        the budget takes the unit of its first release and keeps it.
    """

    def __init__(self, cap: PrivacyCost, dataset: str = "", unit: Unit | None = None) -> None:
        self._lock = threading.Lock()
        self._cap = self._check_cap(cap)
        self.dataset = str(dataset)
        self._unit_of_privacy: Unit | None = unit
        self._entries: list[LedgerEntry] = []
        self._cap_changes: list[CapChange] = []
        self._spent = Fraction(0)

    # -- state -------------------------------------------------------------------------------
    @staticmethod
    def _check_cap(cap: Any) -> PrivacyCost:
        if not isinstance(cap, PrivacyCost):
            raise ParameterError(
                f"The budget cap must be a PrivacyCost (got {cap!r}); "
                "use dpcore.privacy.budget.pure(epsilon) or dpcore.privacy.budget.zcdp(rho)."
            )
        return cap

    @property
    def cap(self) -> PrivacyCost:
        """The cap set by the curator."""
        return self._cap

    @property
    def definition(self) -> Definition:
        """The ledger's definition (that of the cap): ``"pure"`` or ``"zcdp"``."""
        return self._cap.definition

    @property
    def spent(self) -> float:
        """Total charged so far, in the ledger's unit."""
        with self._lock:
            return float(self._spent)

    @property
    def remaining(self) -> float:
        """What is left under the cap (0 when the cap is used up), in the ledger's unit."""
        with self._lock:
            return max(0.0, float(Fraction(self._cap.value) - self._spent))

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        """The recorded releases, oldest first."""
        with self._lock:
            return tuple(self._entries)

    @property
    def unit(self) -> Unit | None:
        """The unit of privacy this budget protects (``None`` until its first release sets it)."""
        return self._unit_of_privacy

    @property
    def cap_changes(self) -> tuple[CapChange, ...]:
        """Every change of the cap, oldest first."""
        with self._lock:
            return tuple(self._cap_changes)

    def charge_for(self, cost: PrivacyCost, unit: Unit | None = None) -> tuple[PrivacyCost, int]:
        """The cost to charge for a release of ``unit`` (default: the budget's) and its group size.

        Refuses (:class:`~dpcore.errors.BudgetError`, with the reason) a unit this budget cannot
        account for; see :mod:`dpcore.privacy.units`.
        """
        self.charge_of(cost)  # a cost that is not one, or of a definition this budget cannot take
        own = self._unit_of_privacy
        group = 1 if own is None or unit is None else group_factor(own, unit)
        return cost.for_group(group), group

    def _limit(self, cap: PrivacyCost | None = None) -> Fraction:
        return Fraction((cap or self._cap).value) * (1 + CAP_TOLERANCE)

    def _symbol(self) -> str:
        return SYMBOL[self.definition]

    # -- charging ----------------------------------------------------------------------------
    def charge_of(self, cost: PrivacyCost) -> float:
        """``cost`` in the ledger's unit.

        Pure ε in a zCDP ledger costs ``ρ = ε²/2`` (Bun & Steinke 2016, Prop. 1.4, rounded
        up); ρ-zCDP in a pure ledger raises :class:`~dpcore.errors.BudgetError`, because
        zCDP implies no pure ε-DP guarantee.
        """
        if not isinstance(cost, PrivacyCost):
            raise ParameterError(
                f"A release cost must be a PrivacyCost (got {cost!r}); "
                "use dpcore.privacy.budget.pure(epsilon) or dpcore.privacy.budget.zcdp(rho)."
            )
        if cost.definition == self.definition:
            return cost.value
        if self.definition == "zcdp":
            return cost.to_zcdp().value
        raise BudgetError(
            f"A ρ-zCDP release ({cost.label()}) cannot be charged to a pure ε-DP budget "
            f"({self._cap.label()}): zCDP mechanisms such as Gaussian noise give no pure ε "
            "guarantee. Set the dataset's budget as zCDP (ρ) instead (pure ε releases can "
            "still be charged to it, at ρ = ε²/2), or choose a pure ε mechanism."
        )

    def _refusal(self, cost: PrivacyCost, charge: float, group: int = 1) -> BudgetError:
        u = self._symbol()
        left = max(Fraction(0), Fraction(self._cap.value) - self._spent)
        asked = cost.label() + (f" (charged for a group of {group}: the release protects another unit than the "
                                f"budget's)" if group > 1 else "")
        if cost.definition != self.definition:
            asked += f" ({u} = {two_significant(charge)} in this budget)"
        # The most spend() would accept now, in the release's own unit (ε = sqrt(2ρ) for a
        # pure release on a zCDP budget), rounded down for the suggestion.
        affordable = float(self._limit() - self._spent)
        if cost.definition != self.definition:
            affordable = math.sqrt(2 * max(0.0, affordable))
        if group > 1:  # ``cost`` is the group cost: the release itself may ask for 1/g (ε) or 1/g² (ρ) of it
            affordable /= group if cost.definition == "pure" else group * group
        if left > Fraction(self._cap.value) * CAP_TOLERANCE:
            fix = (
                f"Lower {cost.symbol} for this release to at most "
                f"{cost.symbol} = {two_significant(affordable, down=True)}, or raise the "
                "dataset's cap if your privacy policy allows it."
            )
        else:
            fix = (
                "The budget is used up: raise the dataset's cap if your privacy policy allows "
                "it; otherwise nothing more can be released from this dataset."
            )
        return BudgetError(
            f"Not enough privacy budget left for this release: it asks for {asked}, but only "
            f"{u} = {two_significant(float(left))} is left of the cap "
            f"{self._cap.label()} ({u} = {two_significant(float(self._spent))} already "
            f"spent). {fix}"
        )

    def check(self, cost: PrivacyCost, unit: Unit | None = None) -> None:
        """Raise the BudgetError that :meth:`spend` would raise for ``cost``, else do nothing."""
        cost, group = self.charge_for(cost, unit)
        charge = self.charge_of(cost)
        with self._lock:
            if self._spent + Fraction(charge) > self._limit():
                raise self._refusal(cost, charge, group)

    def can_spend(self, cost: PrivacyCost) -> bool:
        """Whether :meth:`spend` would accept ``cost`` now.

        False also when ``cost`` cannot be charged to this ledger at all (zCDP cost, pure
        cap); :meth:`check` gives the reason.
        """
        try:
            self.check(cost)
        except BudgetError:
            return False
        return True

    def spend(
        self, cost: PrivacyCost, label: str, details: Mapping[str, Any] | None = None,
        unit: Unit | None = None,
    ) -> LedgerEntry:
        """Charge ``cost`` and record the release, or refuse and change nothing.

        Parameters
        ----------
        cost : PrivacyCost
            What the release costs (ε or ρ).
        label : str
            What is released, for the record (an empty label becomes ``"release <n>"``).
        details : dict, optional
            JSON-able facts (mechanism, parameters, split); numpy scalars and tuples are
            converted, and a copy is stored.
        unit : Unit, optional
            The release's unit of privacy (default: the budget's).  Another unit is charged
            its group cost or refused (:meth:`charge_for`).

        Returns
        -------
        LedgerEntry
            The recorded entry.

        Raises
        ------
        BudgetError
            If ``spent + charge > cap · (1 + 1e-9)``; the message says what is left and what
            was asked.  Also for a zCDP cost against a pure cap.
        ParameterError
            For a cost that is not a PrivacyCost, a non-text label or non-JSON details.
        """
        # Everything that can fail on the arguments is done before taking the lock.
        release_unit = unit if unit is not None else (self._unit_of_privacy or Unit())
        charged_cost, group = self.charge_for(cost, release_unit)
        charge = self.charge_of(charged_cost)
        if not isinstance(label, str):
            raise ParameterError(f"The release label must be text (got {label!r}).")
        if details is not None and not isinstance(details, Mapping):
            raise ParameterError(f"Release details must be a dict (got {details!r}).")
        clean = jsonable(dict(details or {}))
        with self._lock:
            new_spent = self._spent + Fraction(charge)
            if new_spent > self._limit():
                raise self._refusal(charged_cost, charge, group)
            index = len(self._entries)
            entry = LedgerEntry(
                index=index,
                label=label.strip() or f"release {index + 1}",
                cost=cost,
                charged=charge,
                time=minute_now(),
                details=clean,
                unit=release_unit,
                group=group,
            )
            self._entries.append(entry)
            self._spent = new_spent
            if self._unit_of_privacy is None:
                self._unit_of_privacy = release_unit
            return entry

    def set_cap(self, cap: PrivacyCost) -> None:
        """Change the cap.

        Raises BudgetError if the new cap is below what is already spent (with the same
        1e-9 relative slack as :meth:`spend`), or if it changes the definition after
        something was spent (the recorded charges would be in the wrong unit).
        """
        cap = self._check_cap(cap)
        with self._lock:
            if self._entries and cap.definition != self._cap.definition:
                raise BudgetError(
                    f"This dataset's budget is {DEFINITION_NAME[self._cap.definition]} and releases were "
                    f"already charged to it, so it cannot become {DEFINITION_NAME[cap.definition]}. "
                    f"Keep the definition and set a new {self._symbol()} cap, or start a new "
                    "ledger for a new dataset."
                )
            if self._spent > self._limit(cap):
                raise BudgetError(
                    f"The new cap {cap.label()} is below what was already spent "
                    f"({self._symbol()} = {two_significant(float(self._spent))}); a cap can "
                    f"only be lowered to at least the amount spent. Choose a cap of at least "
                    f"{self._symbol()} = {float_up(self._spent)!r}."
                )
            if cap != self._cap:
                self._cap_changes.append(CapChange(minute_now(), self._cap, cap))
            self._cap = cap

    # -- records -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-able record: dataset, definition, cap, spent, remaining, entries.

        A zCDP ledger also reports its (ε, δ)-DP reading (Canonne, Kamath & Steinke 2020,
        Cor. 13) under ``"approx_dp"``: a list of ``{"delta", "epsilon_spent",
        "epsilon_cap"}`` for δ in 1e-5, 1e-6, 1e-7 and 1e-9.
        """
        with self._lock:
            cap = self._cap
            spent_exact = self._spent
            entries = [e.to_dict() for e in self._entries]
        spent = float(spent_exact)
        out: dict[str, Any] = {
            "dataset": self.dataset,
            "definition": cap.definition,
            "cap": cap.to_dict(),
            "spent": spent,
            "remaining": max(0.0, float(Fraction(cap.value) - spent_exact)),
            "tolerance": float(CAP_TOLERANCE),
            "unit": self._unit_of_privacy.to_dict() if self._unit_of_privacy else None,
            "entries": entries,
            "cap_changes": [c.to_dict() for c in self.cap_changes],
        }
        if cap.definition == "zcdp":
            out["approx_dp"] = [
                {
                    "delta": d,
                    "epsilon_spent": zcdp_to_approx_dp(spent, d) if spent > 0 else 0.0,
                    "epsilon_cap": zcdp_to_approx_dp(cap.value, d),
                }
                for d in APPROX_DP_DELTAS
            ]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Ledger:
        """Rebuild a ledger from :meth:`to_dict`.

        The charges are recomputed from the recorded costs and checked against the stored
        ones and against the cap, so an edited or corrupted record is refused
        (:class:`~dpcore.errors.InputError`) rather than silently trusted.
        """
        if not isinstance(d, Mapping) or "cap" not in d:
            raise InputError(
                "A ledger record needs at least 'cap' (and usually 'entries'); "
                "use a file written by Ledger.to_dict()."
            )
        ledger = cls(PrivacyCost.from_dict(d["cap"]), str(d.get("dataset", "")),
                     Unit.from_dict(d["unit"]) if d.get("unit") else None)
        ledger._cap_changes = [CapChange.from_dict(c) for c in d.get("cap_changes") or []]
        raw_entries = d.get("entries") or []
        if not isinstance(raw_entries, list | tuple):
            raise InputError("The ledger record's 'entries' must be a list of release records.")
        spent = Fraction(0)
        for i, raw in enumerate(raw_entries):
            if not isinstance(raw, Mapping):
                raise InputError(f"Ledger entry {i} is not a record (got {raw!r}).")
            entry = LedgerEntry.from_dict(raw)
            if entry.index != i:
                raise InputError(
                    f"Ledger entry {i} has index {entry.index}; entries must be numbered 0, 1, 2, "
                    "... in order. The record was edited or is incomplete."
                )
            try:
                charge = ledger.charge_of(entry.cost.for_group(entry.group))
            except BudgetError as err:
                raise InputError(f"Ledger entry {i} does not fit the cap: {err}") from None
            if charge != entry.charged:
                raise InputError(
                    f"Ledger entry {i} records a charge of {entry.charged!r} but its cost "
                    f"{entry.cost.label()} charges {charge!r}. The record was edited or corrupted."
                )
            spent += Fraction(charge)
            ledger._entries.append(entry)
        if spent > ledger._limit():
            raise InputError(
                f"The ledger record spends {two_significant(float(spent))}, more than its cap "
                f"{ledger.cap.label()}. The record was edited or corrupted."
            )
        ledger._spent = spent
        return ledger

    # -- plumbing ----------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            state = self.__dict__.copy()
            state["_entries"] = list(self._entries)
            state["_cap_changes"] = list(self._cap_changes)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"Ledger(cap={self._cap.label()!r}, dataset={self.dataset!r}, "
            f"spent={self.spent!r}, entries={len(self._entries)})"
        )
