"""The unit of privacy: whom a release protects, and when two units may share one budget.

A budget is created for one unit and every release charged to it states its own. The rules
(:func:`group_factor`) say when a release of another unit may still be charged, at its
group-privacy cost, and when it must be refused:

* **Same unit** — charged as it is.  For ``person`` the per-person cap ``k`` is enforced by
  truncation inside every release, so a release protects the whole person whatever its cap;
  the cap changes accuracy, not whom is protected, and releases with different caps share one
  person budget.
* **A record-level release on a person or group budget** — refused.  A record-level release
  bounds one row's influence only; a person with many rows is protected by nothing, so it
  cannot be charged to a budget that promises to protect persons (or groups).
* **A person or group release on a record budget** — charged its cost for a group of two.  A
  dataset with one record changed is reached from the original by removing the whole entity
  and adding it back without that record: two entity-level steps, hence ``2ε`` under pure DP
  and ``4ρ`` under zCDP (Dwork & Roth 2014, Thm. 2.2; Bun & Steinke 2016, Prop. 1.9).
* **Add/remove neighbours vs replace-one** — a replace-one release may publish the exact total,
  which add/remove DP protects; it is refused on an add/remove budget.  An add/remove release
  on a replace-one budget is charged for a group of two (a replacement is a removal and an
  addition).
* **Person on group or group on person** — refused: neither entity contains the other.

>>> budget_unit = Unit("person", cap=5)
>>> group_factor(budget_unit, Unit("person", cap=3))
1
>>> group_factor(Unit("record"), Unit("person", cap=3))
2
>>> group_factor(budget_unit, Unit("record"))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
dpcore.errors.BudgetError: This budget protects one person (at most 5 records each)...

"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from dpcore.errors import BudgetError, ParameterError

Entity = Literal["record", "person", "group"]
Neighbour = Literal["add_remove", "replace"]

_ENTITIES = ("record", "person", "group")
_NEIGHBOURS = ("add_remove", "replace")


@dataclass(frozen=True)
class Unit:
    """Whom a release protects.

    Parameters
    ----------
    entity : {"record", "person", "group"}
        One row (point, trip, count unit); one person identified by a person column; one group
        (a household) identified by a group column.
    cap : int, optional
        For ``person``: at most this many records of one person are kept (the rest dropped
        before counting); sensitivities scale with it.
    neighbour : {"add_remove", "replace"}
        Neighbouring datasets differ by adding or removing one entity, or by replacing one
        (which makes the total public).

    >>> Unit("person", cap=10).label()
    'one person (at most 10 records each), add or remove'
    >>> Unit.from_dict(Unit("group").to_dict()) == Unit("group")
    True
    """

    entity: Entity = "record"
    cap: int | None = None
    neighbour: Neighbour = "add_remove"

    def __post_init__(self) -> None:
        if self.entity not in _ENTITIES:
            raise ParameterError(f"The unit of privacy must be one of {', '.join(_ENTITIES)} (got {self.entity!r}).")
        if self.neighbour not in _NEIGHBOURS:
            raise ParameterError(
                f"Neighbouring datasets are 'add_remove' or 'replace' (got {self.neighbour!r}).")
        if self.cap is not None:
            if self.entity != "person" or isinstance(self.cap, bool) or int(self.cap) != self.cap or self.cap < 1:
                raise ParameterError(
                    f"A cap on records applies to the unit 'person' and must be a whole number of at least 1 "
                    f"(got {self.cap!r} for {self.entity!r}).")
            object.__setattr__(self, "cap", int(self.cap))

    @property
    def contribution(self) -> int:
        """The most records one unit adds: the cap, or 1 (the sensitivities scale with it)."""
        return 1 if self.cap is None else self.cap

    def label(self) -> str:
        """The unit in plain words, for pages and records."""
        who = {"record": "one record", "group": "one group",
               "person": "one person" + (f" (at most {self.cap} records each)" if self.cap else "")}[self.entity]
        return who + (", add or remove" if self.neighbour == "add_remove" else ", replace one")

    def to_dict(self) -> dict[str, Any]:
        return {"entity": self.entity, "cap": self.cap, "neighbour": self.neighbour, "label": self.label()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Unit:
        """Inverse of :meth:`to_dict`; ``None`` (a budget from before units were recorded) is one record."""
        if not d:
            return cls()
        return cls(d.get("entity", "record"), d.get("cap"), d.get("neighbour", "add_remove"))


def group_factor(budget_unit: Unit, release_unit: Unit) -> int:
    """The group size at which a ``release_unit`` release is charged to a ``budget_unit`` budget.

    1 when the units protect the same entity with the same neighbours, 2 where group privacy
    makes the charge sound (see the module docstring), and a :class:`BudgetError` explaining
    why otherwise.
    """
    factor = 1
    b, r = budget_unit, release_unit
    if b.entity != r.entity:
        if b.entity == "record":
            factor *= 2
        elif r.entity == "record":
            raise BudgetError(
                f"This budget protects {b.label()}, but the release protects {r.label()}: a record-level "
                "release bounds the influence of one row only, so a person or group with many rows is "
                "protected by nothing. Release with the same unit of privacy as the budget (give the person "
                "or group column and its cap), or keep this data under a budget of its own.")
        else:
            raise BudgetError(
                f"This budget protects {b.label()}, but the release protects {r.label()}: neither contains "
                "the other, so the release cannot be charged to this budget. Release with the budget's unit.")
    if b.neighbour != r.neighbour:
        if b.neighbour == "add_remove":
            raise BudgetError(
                "This budget uses add/remove neighbours, but the release uses replace-one neighbours, under "
                "which the total is public: it could reveal the exact number of people that this budget "
                "protects. Release with add/remove neighbours.")
        factor *= 2
    return factor


def population_needs_persons(unit: Unit | None) -> None:
    """Refuse a record-level release on a named population's budget (issue 26 item 15); ``None`` (the
    unit not known yet) passes.

    A population joins data sets of the same people (points, trips, tables) and its cap is meant to
    hold for every person; a release that protects one row leaves a person with 15 points exposed at
    15 times its cost.  A count table in which each person is counted once is released as one person
    when the curator confirms it.

    >>> population_needs_persons(Unit("person", cap=3))
    >>> population_needs_persons(Unit())
    Traceback (most recent call last):
    ...
    dpcore.errors.BudgetError: This data draws on a named population's budget, ...
    """
    if unit is not None and unit.entity == "record":
        raise BudgetError(
            "This data draws on a named population's budget, which protects every person across all of the "
            f"population's data, but the release protects {unit.label()}: a person with many rows would be exposed "
            "many times over. Release with a person or group unit (name the person column and its cap), or, for a "
            "count table in which each person is counted once, confirm it (--each-person-counted-once on the "
            "command line; 'Each person is counted once' in the app).")


def series_population_needs_persons(scope: str) -> None:
    """Refuse a series over time with the unit ``event`` on a named population's budget (issue 26
    item 15, for series): as for one-off releases (:func:`population_needs_persons`), a population's
    cap is meant to hold for every person, and an event series protects one record in each period.

    >>> series_population_needs_persons("person-period")
    >>> series_population_needs_persons("event")
    Traceback (most recent call last):
    ...
    dpcore.errors.BudgetError: A named population's budget protects every person across all of its data, ...
    """
    if scope == "event":
        raise BudgetError(
            "A named population's budget protects every person across all of its data, but a series with the unit "
            "'event' protects one record per period: a person with many records would be exposed many times over. "
            "Release the series with a person unit (--unit person-period or person, with the person column and "
            "its cap); for a count table in which each person is counted once in each period, confirm it "
            "(--each-person-counted-once on the command line; 'Each person is counted once in each period' in the "
            "app); or release without --population (a series then keeps a budget of its own, found again from its "
            "periods).")


Scope = Literal["event", "person-period", "person"]
SCOPES = ("event", "person-period", "person")


@dataclass(frozen=True)
class TimeUnit:
    """The unit of privacy of a series of releases over public periods.

    ``scope`` says how one person's records across periods are protected:

    * ``event`` — one record (point, trip) whatever the period; each period's release is one
      ordinary record-level release, and disjoint periods compose in parallel (every record is in
      exactly one period; McSherry 2009, "Privacy Integrated Queries", Thm. 4).
    * ``person-period`` — one person's records within one period, at most ``base.cap`` of them
      (Google's and Meta's user-day); the periods compose in parallel too, with a budget per
      period.  A person present in every period loses the *sum* over the periods: the horizon
      figure every budget shows.
    * ``person`` — one person over the whole horizon; each person touches at most
      ``max_periods`` periods (sampled before anything else) and ``base.cap`` records in each;
      the releases compose sequentially (zCDP sums, Bun & Steinke 2016, Lemma 1.7) against one
      horizon budget.

    ``base`` is the unit each period's release protects (:class:`Unit`); ``period`` the period
    text (``day``, ``week``, ``month``, ``6h``); a budget keeps one period length for good.

    >>> u = TimeUnit("person-period", Unit("person", cap=3), "day")
    >>> u.label()
    'one person-day (at most 3 records each), add or remove'
    >>> TimeUnit.from_dict(u.to_dict()) == u
    True
    >>> TimeUnit.from_dict(None) is None
    True
    """

    scope: Scope = "event"
    base: Unit = Unit()
    period: str = "day"
    max_periods: int | None = None

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ParameterError(f"The unit over time is one of {', '.join(SCOPES)} (got {self.scope!r}).")
        if self.scope == "event" and self.base.entity != "record":
            raise ParameterError("The unit 'event' protects one record: drop the person column (--user-col), or "
                                 "choose --unit person-period or --unit person.")
        if self.scope != "event" and self.base.entity != "person":
            raise ParameterError(f"The unit {self.scope!r} protects a person: name the person column (--user-col) "
                                 "and the most records one person may contribute per period (--user-cap).")
        if self.max_periods is not None:
            if self.scope != "person" or isinstance(self.max_periods, bool) or int(self.max_periods) < 1:
                raise ParameterError("--max-periods (the most periods one person may touch) goes with --unit person "
                                     f"and is a whole number of at least 1 (got {self.max_periods!r}).")
            object.__setattr__(self, "max_periods", int(self.max_periods))
        elif self.scope == "person":
            raise ParameterError("--unit person needs --max-periods W, the most periods one person may touch "
                                 "(each person's other periods are dropped by a keyed random choice).")

    @property
    def parallel(self) -> bool:
        """Whether disjoint periods compose in parallel (event, person-period) rather than sequentially."""
        return self.scope != "person"

    def label(self) -> str:
        """The unit in plain words."""
        period = {"day": "day", "week": "week", "month": "month"}.get(self.period, f"period ({self.period})")
        neighbour = ", add or remove" if self.base.neighbour == "add_remove" else ", replace one"
        cap = f" (at most {self.base.cap} records each)" if self.base.cap else ""
        if self.scope == "event":
            return f"one record, per {period}{neighbour}"
        if self.scope == "person-period":
            return f"one person-{period}{cap}{neighbour}"
        return (f"one person over the horizon (at most {self.max_periods} {period}s, {self.base.cap or 1} "
                f"records per {period}){neighbour}")

    def to_dict(self) -> dict[str, Any]:
        return {"scope": self.scope, "base": self.base.to_dict(), "period": self.period,
                "max_periods": self.max_periods, "label": self.label()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> TimeUnit | None:
        """Inverse of :meth:`to_dict`; ``None`` for a budget that is not kept over time."""
        if not d:
            return None
        return cls(d.get("scope", "event"), Unit.from_dict(d.get("base")), str(d.get("period", "day")),
                   d.get("max_periods"))
