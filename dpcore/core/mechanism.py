"""The one mechanism interface every kind of data implements: parameters, cost, plan, release.

Whatever the data (points on a grid, counts over a hierarchy of areas or a census table,
origin/destination flows), a mechanism has the same four parts (``DESIGN.md``, "The shape"):

* declared parameters (:class:`Param`: default, bounds, choices, help), validated in one place
  (:meth:`Mechanism.resolve_params`: unknown names refused, defaults filled, types converted);
* a privacy map (:meth:`Mechanism.cost`): the :class:`~dpcore.privacy.budget.PrivacyCost` of a
  release for a budget and parameters, refusing a privacy definition it does not support;
* a data-free plan (:meth:`Mechanism.plan` -> :class:`Plan`): the unit of privacy
  (:class:`Unit`), the cost and, per level, the noise and the expected error (:class:`PlanRow`),
  built from public inputs only, so it can be shown (and published) before any data is read;
* a release from ``(plan, aggregate, noise)`` (:meth:`Mechanism.release` -> :class:`Release`),
  whose JSON record goes through the one envelope of :mod:`dpcore.core.record`.

As in OpenDP, where a measurement carries its own privacy map from a neighbour distance to a
privacy loss, the cost here belongs to the mechanism and the neighbour relation to the plan's
unit; as in ektelo, a plan is fixed before the data is measured.  The mechanisms themselves
never charge a budget: the session does, from ``plan.cost``, ``plan.label``, ``plan.details()``
and ``plan.unit``, before it calls :meth:`Mechanism.release`.
"""

from __future__ import annotations

import copy
import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from dpcore.core import record as _record
from dpcore.core.reliability import apply_to_files, parse_rule
from dpcore.core.review import CV_THRESHOLD, with_review
from dpcore.errors import ParameterError
from dpcore.privacy.budget import PrivacyCost, pure
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource
from dpcore.privacy.units import Unit

__all__ = [
    "DEFINITION_WORDS",
    "KindRelease",
    "Mechanism",
    "Param",
    "Plan",
    "PlanRow",
    "Release",
    "Unit",
    "as_cost",
    "errors_wanted",
    "finite_fields",
    "finite_or_none",
    "sd_only",
]

#: How each privacy definition is named to people.
DEFINITION_WORDS = {"pure": "pure ε-DP", "zcdp": "ρ-zCDP"}

#: True inside :func:`sd_only` (per thread and task: the app serves sessions on threads).
_SD_ONLY: ContextVar[bool] = ContextVar("dpcore_plan_sd_only", default=False)


@contextmanager
def sd_only() -> Iterator[None]:
    """Plans made inside state every row's SD (``sd``, its noise, scale and details) but may leave the
    expected errors out (``mean_abs``, ``max_abs`` not a number; today the areas kind's level plans,
    ``tree_plans.level_plans``) where they cost more than the SDs: for a
    search that reads the SDs only (the target planner's thousands of plans, where the expected largest
    error over a level's areas was half an areas plan's time).  Such a plan is never shown or kept.
    Use it around plain calls only: a generator that yields inside the block leaves the flag set in
    its caller until it resumes.

    >>> with sd_only():
    ...     errors_wanted()
    False
    >>> errors_wanted()
    True
    """
    token = _SD_ONLY.set(True)
    try:
        yield
    finally:
        _SD_ONLY.reset(token)


def errors_wanted() -> bool:
    """Whether a plan made now must state its expected errors (False inside :func:`sd_only`)."""
    return not _SD_ONLY.get()


# ---------------------------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """A mechanism parameter with its default (from the paper), range and help text.

    >>> p = Param("alpha", "Budget share", float, 0.5, "Share of the budget for phase 1.", 0.0, 1.0)
    >>> p.convert("0.25"), p.convert(None)
    (0.25, 0.5)
    >>> p.convert(2)
    Traceback (most recent call last):
    ...
    dpcore.errors.ParameterError: Parameter 'alpha' must be at most 1.0 (got 2.0).
    >>> Param("weights", "Weights", tuple, (), "One per level.", item=float).convert("1, 2")
    (1.0, 2.0)
    """

    name: str
    label: str
    kind: type
    default: Any
    help: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[Any, ...] | None = None
    advanced: bool = False
    #: Display names of ``choices`` (same order), for pages; the CLI uses the choices themselves.
    choice_labels: tuple[str, ...] | None = None
    #: ``(other parameter, value)``: the parameter only matters (and is only shown) then; a tuple of
    #: values: when the other parameter has any of them (:meth:`applies`).
    shown_if: tuple[str, Any] | None = None
    #: For ``kind=tuple``: the type of every item (``"1,2"`` or ``[1, 2]`` -> ``(1.0, 2.0)`` for float).
    item: type = str

    def applies(self, raw: Mapping[str, Any], defaults: Mapping[str, Any]) -> bool:
        """Whether this parameter matters for the choices made: no ``shown_if``, or the other
        parameter's value (``raw``'s, else its default) is the one named, or any of a tuple of them.

        >>> p = Param("c", "C", float, 1.0, "Help.", shown_if=("rule", ("features", "table")))
        >>> p.applies({"rule": "table"}, {}), p.applies({}, {"rule": "features"}), p.applies({"rule": "x"}, {})
        (True, True, False)
        >>> Param("d", "D", float, 1.0, "Help.", shown_if=("rule", "table")).applies({}, {"rule": "table"})
        True
        """
        if self.shown_if is None:
            return True
        other, wanted = self.shown_if
        value = raw.get(other, defaults.get(other))
        return value in (wanted if isinstance(wanted, tuple) else (wanted,))

    def convert(self, value: Any) -> Any:
        if value is None or (isinstance(value, str) and value.strip() == ""):
            return self.default
        try:
            if self.kind is bool:
                if isinstance(value, str):
                    v = value.strip().lower()
                    if v not in {"true", "false", "1", "0", "yes", "no"}:
                        raise ValueError
                    value = v in {"true", "1", "yes"}
                else:
                    value = bool(value)
            elif self.kind is int:
                f = float(value)
                if not f.is_integer():
                    raise ValueError
                value = int(f)
            elif self.kind is float:
                value = float(value)
                if not math.isfinite(value):
                    raise ValueError
            elif self.kind is tuple:
                value = _items(value, self.item)
            else:
                value = self.kind(value)
        except (TypeError, ValueError):
            raise ParameterError(
                f"Parameter '{self.name}' must be {_kind_word(self.kind, self.item)} (got {value!r}). {self.help}"
            ) from None
        if self.choices is not None and value not in self.choices:
            raise ParameterError(
                f"Parameter '{self.name}' must be one of {', '.join(map(str, self.choices))} (got {value!r})."
            )
        if self.minimum is not None and value < self.minimum:
            raise ParameterError(f"Parameter '{self.name}' must be at least {self.minimum} (got {value}).")
        if self.maximum is not None and value > self.maximum:
            raise ParameterError(f"Parameter '{self.name}' must be at most {self.maximum} (got {value}).")
        return value

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "label": self.label,
            "type": self.kind.__name__,
            "default": self.default,
            "help": self.help,
            "minimum": self.minimum,
            "maximum": self.maximum,
            "choices": list(self.choices) if self.choices else None,
            "advanced": self.advanced,
        }


def _items(value: Any, item: type) -> tuple[Any, ...]:
    """A list parameter from ``"a, b"`` text or a sequence; every item converted to ``item``."""
    parts = [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else list(value)
    out = tuple(item(v) for v in parts)
    if item is float and not all(math.isfinite(v) for v in out):
        raise ValueError
    return out


def _kind_word(kind: type, item: type = str) -> str:
    if kind is tuple:
        return "a list of numbers" if item in (int, float) else "a list of names"
    return {int: "a whole number", float: "a number", bool: "true or false", str: "text"}.get(kind, kind.__name__)


# ---------------------------------------------------------------------------------------------
# the unit of privacy and the plan
# ---------------------------------------------------------------------------------------------


def finite_or_none(x: Any) -> float | None:
    """``x`` as a float, or None when it is missing or not finite (unknown): how a plan states an
    error it does not know (JSON has no NaN)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def finite_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` with every non-finite float as None (:func:`finite_or_none`'s rule for a level
    plan's fields; the others as they are).

    >>> finite_fields({"sd": 1.5, "max_abs": float("nan"), "level": "county"})
    {'sd': 1.5, 'max_abs': None, 'level': 'county'}
    """
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in fields.items()}


@dataclass(frozen=True)
class PlanRow:
    """One level of a data-free plan, the same for every kind of data.

    ``cost`` is the budget spent on this level's counts (None when the level gets no noise of
    its own, e.g. sums of finer levels or a public total); ``sd``/``ci95`` are the standard
    deviation and 95 % half-width of the error of one count; ``mean_abs`` the mean absolute
    error per count and ``max_abs`` the expected largest absolute error over the level (None
    where unknown).  ``details`` holds the kind's own data-free facts (JSON-able).

    >>> row = PlanRow(0, "Grid of 4 x 4 cells", pure(1.0), "discrete_laplace", 1.0, 1, 16,
    ...               1.2, 3.0, 0.85, None)
    >>> d = row.to_dict()
    >>> d["cost"]["label"], d["expected_error"]["max_abs"]
    ('ε = 1', None)
    """

    level: int
    name: str
    cost: PrivacyCost | None
    noise: str | None
    scale: float | None
    sensitivity: float | None
    n_counts: int
    sd: float
    ci95: float
    mean_abs: float | None
    max_abs: float | None
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": int(self.level),
            "name": self.name,
            "cost": self.cost.to_dict() if self.cost is not None else None,
            "noise": {"distribution": self.noise, "scale": finite_or_none(self.scale),
                      "sensitivity": finite_or_none(self.sensitivity)},
            "n_counts": int(self.n_counts),
            "expected_error": {"sd_per_count": finite_or_none(self.sd), "ci95_half_width_per_count": finite_or_none(self.ci95),
                               "mean_abs_error_per_count": finite_or_none(self.mean_abs),
                               "max_abs": finite_or_none(self.max_abs)},
            "note": self.note,
            "details": _record.jsonable(self.details),
        }


@dataclass(frozen=True, eq=False)
class Plan:
    """Everything about a release that is known before the data: data-free and publishable.

    ``params`` are the resolved parameters; ``cost`` is what the release spends (the session
    charges it); ``unit`` the unit of privacy; ``rows`` the noise and expected error per level;
    ``inner`` the kind's own plan object (so releasing does not rebuild it); ``domain`` the
    public domain it was planned on and ``public`` the other public inputs (e.g. a guess of the
    number of points, area sets).  ``label`` is the ledger entry's short text and
    :meth:`details` its JSON-able facts.

    >>> p = Plan("points", "identity", {}, pure(0.5), Unit(), (), inner=None, label="Identity")
    >>> p.details()
    {'kind': 'points', 'mechanism': 'identity', 'params': {}, 'unit': {'entity': 'record', 'cap': None, \
'neighbour': 'add_remove', 'label': 'one record, add or remove'}}
    """

    kind: str
    mechanism: str
    params: Mapping[str, Any]
    cost: PrivacyCost
    unit: Unit
    rows: tuple[PlanRow, ...]
    inner: Any = field(default=None, repr=False)
    label: str = ""
    #: kind-specific facts for the ledger entry (split, per-level shares, strategy...)
    extra: Mapping[str, Any] = field(default_factory=dict)
    domain: Any = field(default=None, repr=False)
    public: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def details(self) -> dict[str, Any]:
        """JSON-able facts for the ledger entry: kind, mechanism, params, unit and the kind's extras."""
        d: dict[str, Any] = {"kind": self.kind, "mechanism": self.mechanism, "params": _record.jsonable(self.params),
                             "unit": self.unit.to_dict()}
        d.update(_record.jsonable(copy.deepcopy(dict(self.extra))))
        return d

    def rows_dict(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self.rows]


# ---------------------------------------------------------------------------------------------
# releases
# ---------------------------------------------------------------------------------------------


@runtime_checkable
class Release(Protocol):
    """What every release offers, whatever its kind: the plan it came from, the kind's own
    release object (``inner``) and its JSON record through the one envelope."""

    @property
    def kind(self) -> str: ...

    @property
    def mechanism(self) -> str: ...

    @property
    def cost(self) -> PrivacyCost: ...

    @property
    def release_id(self) -> str: ...

    @property
    def plan(self) -> Plan: ...

    @property
    def inner(self) -> Any: ...

    def record(self, ledger: Ledger | None = None) -> dict[str, Any]: ...


@dataclass(frozen=True, eq=False)
class KindRelease:
    """A :class:`Release` over a kind's own release object.

    ``make_record`` is the kind's record: ``(inner, ledger, *, plan, **options) -> dict``, built
    by :func:`dpcore.core.record.build_record` (the shared top and the kind's body); ``make_files``
    the kind's files ``(inner, ledger, *, plan, **options) -> {name: bytes}``, whose
    ``release.json`` is that same record.  Build it with :meth:`of`, which gives ``inner`` the
    release id and creation time so every file states the same ones.

    >>> p = Plan("points", "identity", {}, pure(0.5), Unit(), (), label="Identity")
    >>> def rec(inner, ledger, *, plan):
    ...     return {"kind": plan.kind, "values": inner["noisy"], "ledger": _record.ledger_section(ledger)}
    >>> r = KindRelease.of(p, {"noisy": [1, 2]}, rec)
    >>> r.record()["values"], r.record()["ledger"]["accounted"], len(r.release_id)
    ([1, 2], False, 12)
    """

    plan: Plan
    inner: Any
    make_record: Callable[..., dict[str, Any]] = field(repr=False)
    release_id: str
    created: str
    make_files: Callable[..., dict[str, bytes]] | None = field(default=None, repr=False)

    @classmethod
    def of(cls, plan: Plan, inner: Any, record: Callable[..., dict[str, Any]],
           files: Callable[..., dict[str, bytes]] | None = None) -> KindRelease:
        rid, created = _record.new_release_id(), _record.created_now()
        return cls(plan, _record.with_fields(inner, release_id=rid, created=created), record, rid, created, files)

    def files(self, ledger: Ledger | None = None, *, suppress: Any = None, cv_threshold: float = CV_THRESHOLD,
              **options: Any) -> dict[str, bytes]:
        """The release's files, name -> bytes, made from the kind's release with ``ledger`` as of the
        charge (``release.csv``, ``release.json`` and the kind's others; ``options`` are the kind's,
        e.g. boundary joins or flow-line coordinates).  ``release.json`` holds :meth:`record` with
        the same ledger and options, plus ``level_guidance`` (the "use at level L or coarser" line,
        read from the published table: the finest level whose median CV is under ``cv_threshold``)
        and, with a reliability rule ``suppress`` (:func:`dpcore.core.reliability.parse_rule`;
        post-processing), the ``reliability`` section and ``release_full.csv``.  Every kind's files
        gain the review record (``deployment.yaml``, ``review.html``; issue 25 item 7), made once,
        after the rule.  Write them with :func:`dpcore.core.record.write_files`; the app stores the
        same bytes."""
        if self.make_files is None:
            raise NotImplementedError(f"The {self.kind} kind writes no files.")
        rule = parse_rule(suppress)
        # a kind whose writer takes the rule marks its GeoJSON in the one write (points: a
        # million features are not parsed and written again)
        takes = inspect.signature(self.make_files).parameters
        early = rule is not None and "suppress" in takes
        # a writer that marks a release charged to no budget itself (O/D: release.csv and
        # flows.geojson in their one write) is asked to; mark_not_accounted keeps what it marked
        unmarked = {"accounted": False} if ledger is None and "accounted" in takes else {}
        made = self.make_files(self.inner, ledger, plan=self.plan, **({"suppress": rule} if early else {}),
                               **unmarked, **options)
        marked = [n for n in made if n.endswith(".geojson")] if early else []
        if ledger is None:  # charged to no budget: every table a data user opens says so (issue 26 item 16)
            made = _record.mark_not_accounted(made)
        return with_review(apply_to_files(made, rule, marked=marked), cv_threshold)

    @property
    def kind(self) -> str:
        return self.plan.kind

    @property
    def mechanism(self) -> str:
        return self.plan.mechanism

    @property
    def cost(self) -> PrivacyCost:
        return self.plan.cost

    def record(self, ledger: Ledger | None = None, *, suppress: Any = None, cv_threshold: float = CV_THRESHOLD,
               **options: Any) -> dict[str, Any]:
        """The JSON record as ``release.json`` of :meth:`files` holds it with the same ``ledger`` and
        ``options``: the shared top of :func:`dpcore.core.record.build_record` (with the plan's
        rows) and the kind's body; ``release.json`` adds to it what is read from the published table
        (``level_guidance`` at ``cv_threshold``, and the ``reliability`` section of a ``suppress`` rule)."""
        del suppress, cv_threshold  # sections of the files, read from the published table
        return self.make_record(self.inner, ledger, plan=self.plan, **options)


# ---------------------------------------------------------------------------------------------
# the mechanism
# ---------------------------------------------------------------------------------------------


def resolve_params(mechanism: str, params: Sequence[Param], raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """The one rule for a mechanism's parameters: defaults filled in, types converted, ranges checked,
    unknown names refused (with the list of known ones).

    >>> resolve_params("ug", (Param("c", "c", float, 10.0, "granularity constant", minimum=1),), {"c": "5"})
    {'c': 5.0}
    """
    raw = dict(raw or {})
    known = {p.name for p in params}
    unknown = sorted(set(raw) - known)
    if unknown:
        listing = ", ".join(sorted(known)) or "none"
        raise ParameterError(
            f"Mechanism '{mechanism}' has no parameter {', '.join(map(repr, unknown))}. "
            f"Its parameters are: {listing}."
        )
    return {p.name: p.convert(raw.get(p.name)) for p in params}


def as_cost(budget: PrivacyCost | float) -> PrivacyCost:
    """A release budget as a :class:`PrivacyCost`; a bare number is ε (pure DP).

    >>> as_cost(0.5).label()
    'ε = 0.5'
    """
    if isinstance(budget, PrivacyCost):
        return budget
    if isinstance(budget, bool):
        raise ParameterError(f"The privacy budget must be a number or a PrivacyCost (got {budget!r}).")
    return pure(budget)


class Mechanism(ABC):
    """A DP mechanism of one kind of data (``kind``: ``points``, ``hierarchy``, ``census``, ``od``).

    Subclasses set the descriptive attributes (as class attributes, or per instance for adapters
    that wrap a family of mechanisms), ``params``, ``definitions`` (the privacy definitions
    the mechanism supports) and ``public_inputs`` (names of the public keyword inputs
    :meth:`plan` accepts besides the domain), and implement :meth:`_plan` and :meth:`release`.

    >>> class Count(Mechanism):
    ...     kind, name, title = "demo", "count", "One noisy count"
    ...     summary = when_to_use = reference = ""
    ...     definitions = ("pure",)
    ...     def _plan(self, domain, cost, params, unit, public):
    ...         return Plan(self.kind, self.name, params, cost, unit, (), label=self.title)
    ...     def release(self, plan, aggregate, noise):
    ...         raise NotImplementedError
    >>> Count().plan(None, 0.5).cost.label()
    'ε = 0.5'
    >>> Count().cost(PrivacyCost("zcdp", 0.1))
    Traceback (most recent call last):
    ...
    dpcore.errors.ParameterError: One noisy count is defined for pure ε-DP only. Choose 'Pure ε-DP' as the \
privacy definition (CLI: --epsilon), or a mechanism that supports ρ-zCDP.
    >>> Count().resolve_params({"depth": 3})
    Traceback (most recent call last):
    ...
    dpcore.errors.ParameterError: Mechanism 'count' has no parameter 'depth'. Its parameters are: none.
    """

    kind: str
    name: str
    title: str
    summary: str
    when_to_use: str
    reference: str
    params: tuple[Param, ...] = ()
    definitions: tuple[str, ...] = ("pure", "zcdp")
    public_inputs: tuple[str, ...] = ()

    # -- parameters -------------------------------------------------------------------------
    def resolve_params(self, raw: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Defaults filled in, types converted, ranges checked; unknown names refused."""
        return resolve_params(self.name, self.params, raw)

    # -- the privacy map ----------------------------------------------------------------------
    def cost(self, budget: PrivacyCost | float, params: Mapping[str, Any] | None = None) -> PrivacyCost:
        """What a release with ``budget`` and ``params`` spends; every mechanism here spends its
        whole budget (its phases and levels compose sequentially to it).  Refuses a privacy
        definition the mechanism does not support."""
        cost = as_cost(budget)
        if cost.definition not in self.definitions:
            if not self.definitions:
                raise ParameterError(f"{self.title} cannot be charged to a pure-ε or zCDP budget.")
            only = " or ".join(DEFINITION_WORDS[d] for d in self.definitions)
            other = "Pure ε-DP' as the privacy definition (CLI: --epsilon)" if "pure" in self.definitions else \
                "ρ-zCDP' as the privacy definition (CLI: --rho)"
            raise ParameterError(
                f"{self.title} is defined for {only} only. Choose '{other}, or a mechanism that supports "
                f"{DEFINITION_WORDS[cost.definition]}."
            )
        return cost

    # -- plan (data-free) -----------------------------------------------------------------------
    def plan(self, domain: Any, budget: PrivacyCost | float, params: Mapping[str, Any] | None = None, *,
             unit: Unit | None = None, **public: Any) -> Plan:
        """The data-free plan: parameters resolved, cost checked, unit checked, noise and expected
        error per level.  ``domain`` is the kind's public domain; ``public`` its other public
        inputs (names in ``public_inputs``; others refused)."""
        unknown = sorted(set(public) - set(self.public_inputs))
        if unknown:
            listing = ", ".join(self.public_inputs) or "none"
            raise ParameterError(
                f"Mechanism '{self.name}' takes no public input {', '.join(map(repr, unknown))}. "
                f"Its public inputs are: {listing}."
            )
        p = self.resolve_params(params)
        cost = self.cost(budget, p)
        return self._plan(domain, cost, p, unit if unit is not None else Unit(), public)

    @abstractmethod
    def _plan(self, domain: Any, cost: PrivacyCost, params: dict[str, Any], unit: Unit,
              public: Mapping[str, Any]) -> Plan:
        """:meth:`plan` with resolved parameters and a checked cost."""

    # -- release --------------------------------------------------------------------------------
    @abstractmethod
    def release(self, plan: Plan, aggregate: Any, noise: NoiseSource, *, checked: bool = False) -> Release:
        """Draw the noise for ``plan`` over ``aggregate`` (its true counts) and return the release.
        Spends ``plan.cost``: the session charges it before calling.  Runs :meth:`check_data`
        first unless ``checked`` says the caller already has (:func:`dpcore.pipeline.release` runs
        it once, before the charge, and passes ``checked=True``); a direct caller keeps the default."""

    def check_data(self, plan: Plan, aggregate: Any) -> None:
        """Refusals that depend on the data, run by the pipeline *before* the session charges.

        A release that would be refused for its data (too many points, counts aggregated for
        another plan, counts beyond a solver's range) must not cost budget; the default accepts
        everything.  Only refusals decidable from the true aggregate belong here (one that depends
        on the noisy values cannot come before the noise).  A refusal is itself an event that
        depends on the data: keep each to data outside the plan's public domain or far beyond any
        real table, and say so; nothing is released or charged, and only the curator sees it
        (``SECURITY.md``, "A refusal after the charge").
        """
        return None

    def check_plan(self, plan: Plan) -> None:
        """Refuse a plan made by another mechanism."""
        if (plan.kind, plan.mechanism) != (self.kind, self.name):
            raise ParameterError(
                f"This plan is for {plan.kind} mechanism '{plan.mechanism}', not {self.kind} mechanism '{self.name}'."
            )

    # -- listing ----------------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "title": self.title,
            "summary": self.summary,
            "when_to_use": self.when_to_use,
            "reference": self.reference,
            "definitions": list(self.definitions),
            "privacy": " or ".join(DEFINITION_WORDS[d] for d in self.definitions) or "not accountable",
            "params": [p.to_dict() for p in self.params],
            "public_inputs": list(self.public_inputs),
        }
