"""The target-error planner: the smallest budget, and its split over levels, that meets a stated error.

The curator states the error they can live with, one target per level ("±50 people for 95 % of
tracts", "within 10 % for areas of 1,000 people or more", "±20 trips between counties"); the
planner proposes the smallest total budget (ε under pure DP, ρ under zCDP) and, where the
mechanism lets the curator weigh its levels, the split that meets every target.  It reads only
the data-free plan (:meth:`dpcore.core.mechanism.Mechanism.plan`): the same per-level noise and
standard deviation the plan step shows, so nothing here touches the data.

What a target means (per-count coverage)
-----------------------------------------
"±T for a share c of the areas of a level" is read per count: **every** count of the level has
its error within ±T with probability at least ``c``.  By linearity of expectation the expected
share of the level's counts within ±T is then at least ``c`` too, which is the reading a person
gives the sentence; the realised share of one release scatters around it (binomially when the
counts' noises are independent).  The half-width at coverage ``c`` comes from
:func:`dpcore.privacy.calibration.interval_half_width`:

* **exact**, when a count's error is one draw of the level's discrete Laplace or discrete
  Gaussian (its SD equals the noise's exact SD): the smallest integer ``h`` with
  ``P(|X| <= h) >= c`` under the exact pmf;
* otherwise (least-squares or TopDown post-processing, sums of noisy cells, wavelets) from the
  level's SD (its largest, ``details["sd_max"]``, where the plan gives one): ``z_c·sd`` under
  zCDP (Gaussian noise stays Gaussian); under pure DP the larger of that and the quantile of a
  single Laplace variable with that SD, since a sum of Laplace terms has heavier tails than the
  normal (at 95 %: 2.12 instead of 1.96 SDs).  The simulation tests check both.

A relative target ("within 10 % for areas of at least 1,000") is the absolute target ``0.10 ×
1,000 = 100`` at that level: the noise does not depend on the count, so an area of 1,000 or more
is within 10 % whenever its error is within ±100.

The search
----------
Every error here falls as the budget grows (noise scales are ``Δ/ε`` or ``Δ/√(2ρ)``), so for a
fixed split the smallest total is found by bisection on the total, each step planning again
(relative tolerance ``rtol``; the returned total meets the targets and ``(1 − rtol)`` times it
does not).  The split, for mechanisms with a ``custom`` split over levels that each have a budget:

* **independent levels** (a level's error depends on its own budget only, checked on the plan
  itself): the budget each targeted level needs is found on its own and the needs are summed;
* **coupled levels** (TopDown, least squares: a level's error depends on the others' budgets):
  the shares are optimised numerically (Nelder–Mead over log-shares, fixed starts, deterministic),
  then the exact bisection runs at the chosen split; the mechanism's own split is kept when it
  needs less.

Levels without a target keep at least ``min_share`` of the total each, so they are never left as
pure noise; state a target for them to control their error.  Mechanisms whose error has no
data-free form (HTF's tree is shaped by the data; mechanisms sized by the number of points without
a public guess of it) are refused with the reason, or planned on the public guess with a note.

References: the error formulas are the plan's (Hay, Rastogi, Miklau & Suciu 2010, Sec. 4;
Abowd et al. 2022, TopDown, Sec. 5; Cormode et al. 2012, Sec. 4); the per-count intervals those of
Ghosh, Roughgarden & Sundararajan (2009) and Canonne, Kamath & Steinke (2020).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dpcore.core.mechanism import Mechanism, Plan, PlanRow, sd_only
from dpcore.errors import ParameterError
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.calibration import interval_half_width, noise_variance
from dpcore.privacy.units import Unit

__all__ = ["LevelOutcome", "Proposal", "Target", "parse_target", "plan_for_targets", "round_down", "round_up",
           "row_half_width"]

#: Mechanisms whose error the plan cannot state without the data (refused, with the reason).
DATA_DEPENDENT = {
    ("points", "htf"): "HTF's tree (its height, where it stops and how each node's budget is used) is shaped by the "
                       "data, so the error of its released cells has no data-free form. Plan a target with a "
                       "data-free mechanism (quadtree, ug with a public number of points, identity).",
}
#: Budgets the search never leaves (a target that needs more is refused as unreachable).
_MIN_TOTAL, _MAX_TOTAL = 1e-9, 1e6
_EXACT = ("discrete_laplace", "discrete_gaussian")
#: Words that name the released level of a kind without knowing its name.
FINEST = ("finest", "released", "cells", "leaves")


# ---------------------------------------------------------------------------------------------
# targets
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """An error the curator can live with at one level: every count within ``±half_width`` with
    probability ``coverage`` (see the module's "per-count coverage").

    ``level`` names a plan row (its name, its level number, or ``finest``: the released level).
    ``relative``/``at_least`` keep a relative statement for display: ``half_width = relative ×
    at_least``.

    >>> Target("tract", 50).describe()
    '±50 for 95 % of tract'
    >>> Target("county", 100, 0.9, relative=0.1, at_least=1000).describe()
    'within 10 % for counts of 1,000 or more (±100) for 90 % of county'
    """

    level: str = "finest"
    half_width: float = 0.0
    coverage: float = 0.95
    relative: float | None = None
    at_least: float | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.half_width, (int, float)) and math.isfinite(self.half_width) and self.half_width > 0):
            raise ParameterError(f"A target's error must be a positive number of counts (got {self.half_width!r}), "
                                 "e.g. abs=50.")
        if not 0.0 < float(self.coverage) < 1.0:
            raise ParameterError(f"A target's coverage must lie strictly between 0 and 1 (got {self.coverage!r}), "
                                 "e.g. coverage=0.95 or coverage=95%.")

    def describe(self) -> str:
        share = f"{_num(100 * self.coverage)} %"
        if self.relative is not None and self.at_least is not None:
            what = (f"within {_num(100 * self.relative)} % for counts of {_num(self.at_least)} or more "
                    f"(±{_num(self.half_width)})")
        else:
            what = f"±{_num(self.half_width)}"
        return f"{what} for {share} of {self.level}"

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "half_width": self.half_width, "coverage": self.coverage,
                "relative": self.relative, "at_least": self.at_least, "text": self.describe()}


def round_up(x: float, digits: int = 4) -> float:
    """``x`` rounded up to ``digits`` significant digits (a budget a person types never undercuts the need).

    >>> round_up(0.66012345), round_up(12.0)
    (0.6602, 12.0)
    """
    if x <= 0 or not math.isfinite(x):
        return x
    step = _step(x, digits)
    return round(math.ceil(x / step - 1e-9) * step, 12)


def round_down(x: float, digits: int = 4) -> float:
    """``x`` rounded down to ``digits`` significant digits (a budget typed from it stays within a cap).

    >>> round_down(0.1 / 52), round_down(12.0)
    (0.001923, 12.0)
    """
    if x <= 0 or not math.isfinite(x):
        return x
    step = _step(x, digits)
    return round(math.floor(x / step) * step, 12)


def _step(x: float, digits: int) -> float:
    """The place value of the ``digits``-th significant digit of ``x`` (> 0)."""
    return 10.0 ** (math.floor(math.log10(x)) - digits + 1)


def _num(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.4g}"


def _number(key: str, text: str, example: str) -> float:
    t = text.strip().replace(",", "").replace("±", "")
    pct = t.endswith("%")
    try:
        v = float(t[:-1] if pct else t)
    except ValueError:
        raise ParameterError(f"Target '{key}={text}' is not a number; use e.g. {example}.") from None
    if not math.isfinite(v):
        raise ParameterError(f"Target '{key}={text}' is not a finite number; use e.g. {example}.")
    return v / 100 if pct else v


_KEYS = {"level": "level", "abs": "abs", "within": "abs", "rel": "rel", "min": "min", "at_least": "min",
         "coverage": "coverage", "share": "coverage"}


def parse_target(text: str) -> Target:
    """A :class:`Target` from ``"level=tract,abs=50,coverage=0.95"`` (the CLI's ``--target``).

    Keys: ``level`` (a level's name, its number, or ``finest``; default ``finest``), ``abs``
    (the ± half-width in counts), or ``rel`` with ``min`` (within ``rel`` — 0.1 or 10 % — for
    counts of at least ``min``), and ``coverage`` (default 0.95; 0.95 or 95 %).  ``;`` may
    separate the pairs instead of ``,`` so that numbers may carry thousands separators.

    >>> parse_target("level=tract,abs=50,coverage=95%")
    Target(level='tract', half_width=50.0, coverage=0.95, relative=None, at_least=None)
    >>> parse_target("level=county; rel=10%; min=1,000").half_width
    100.0
    >>> parse_target("level=tract,abs=-3")
    Traceback (most recent call last):
    ...
    dpcore.errors.ParameterError: A target's error must be a positive number of counts (got -3.0), e.g. abs=50.
    """
    text = str(text).strip()
    sep = ";" if ";" in text else ","
    got: dict[str, str] = {}
    for part in (p.strip() for p in text.split(sep)):
        if not part:
            continue
        if "=" not in part:
            raise ParameterError(f"Target part '{part}' must look like key=value, e.g. "
                                 "--target \"level=tract,abs=50,coverage=0.95\".")
        k, v = (s.strip() for s in part.split("=", 1))
        key = _KEYS.get(k.lower())
        if key is None:
            raise ParameterError(f"Target key '{k}' is unknown; use level, abs, rel, min and coverage, e.g. "
                                 "\"level=tract,abs=50,coverage=0.95\" or \"level=county,rel=10%,min=1000\".")
        if key in got:
            raise ParameterError(f"Target '{text}' gives '{key}' twice; give it once.")
        got[key] = v
    coverage = _number("coverage", got["coverage"], "coverage=0.95") if "coverage" in got else 0.95
    level = got.get("level", "finest") or "finest"
    if "abs" in got:
        if "rel" in got or "min" in got:
            raise ParameterError(f"Target '{text}' gives both abs and rel/min; state the error one way.")
        return Target(level, _number("abs", got["abs"], "abs=50"), coverage)
    if "rel" in got:
        if "min" not in got:
            raise ParameterError(f"Target '{text}' gives rel without min: say for which counts, e.g. "
                                 "rel=10%,min=1000 (within 10 % for counts of 1,000 or more).")
        rel, low = _number("rel", got["rel"], "rel=10%"), _number("min", got["min"], "min=1000")
        if not 0 < rel or not low > 0:
            raise ParameterError(f"Target '{text}': rel and min must be positive, e.g. rel=10%,min=1000.")
        return Target(level, rel * low, coverage, relative=rel, at_least=low)
    raise ParameterError(f"Target '{text}' states no error: give abs=N (±N counts) or rel=P,min=N, e.g. "
                         "\"level=tract,abs=50,coverage=0.95\".")


# ---------------------------------------------------------------------------------------------
# the error of one level at a coverage
# ---------------------------------------------------------------------------------------------


def _single_draw(row: PlanRow) -> bool:
    """Whether a count's error is exactly one draw of the row's discrete noise (no post-processing)."""
    if row.noise not in _EXACT or row.scale is None or not row.sd or not math.isfinite(row.sd):
        return False
    sd = math.sqrt(noise_variance(row.noise, row.scale))
    return math.isclose(sd, row.sd, rel_tol=1e-6)


def row_half_width(row: PlanRow, coverage: float = 0.95, definition: str = "zcdp") -> tuple[float, str]:
    """``(h, method)``: every count of ``row``'s level is within ``±h`` with probability ``coverage``.

    ``method`` is ``"exact"`` (quantile of the exact discrete noise: one draw per count),
    ``"normal"`` (``z·sd``, for Gaussian noise post-processed: sums and least-squares
    combinations of Gaussians are Gaussian), ``"conservative"`` (Laplace noise post-processed,
    ``definition="pure"``: the larger of ``z·sd`` and the quantile of one Laplace variable with that
    SD, ``sd/√2 · ln(1/(1 − c))``, since a weighted sum of Laplace terms may be dominated by one;
    Xiao, Wang & Gehrke 2010) or ``"none"`` (no noise).  ``sd`` is the level's largest SD where
    the plan gives ``details["sd_max"]``, else its SD.

    >>> from dpcore.privacy.budget import pure
    >>> row = PlanRow(0, "cells", pure(1.0), "discrete_laplace", 1.0, 1, 16, 1.3567, 3.0, 0.85, None)
    >>> row_half_width(row, 0.95, "pure")   # the sd is not one draw's: post-processed Laplace noise
    (2.873..., 'conservative')
    >>> row_half_width(row, 0.95, "zcdp")[1]
    'normal'
    """
    if row.sd == 0:
        return 0.0, "none"
    if row.sd is None or not math.isfinite(row.sd):
        return math.inf, "normal"
    if _single_draw(row):
        return float(interval_half_width(row.noise, row.scale, coverage)), "exact"
    sd = row.details.get("sd_max") if isinstance(row.details, Mapping) else None
    sd = float(sd) if isinstance(sd, (int, float)) and math.isfinite(sd) and sd >= row.sd else float(row.sd)
    normal = float(interval_half_width("normal", sd, coverage))
    if definition == "pure":
        return max(normal, float(interval_half_width("laplace", sd, coverage))), "conservative"
    return normal, "normal"


# ---------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LevelOutcome:
    """One level at the proposed budget: its share, SD and the half-width at the target's coverage
    (95 % where the level has no target)."""

    level: str
    n_counts: int
    budget: float | None
    sd: float
    coverage: float
    half_width: float
    method: str
    target: Target | None

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.half_width <= self.target.half_width * (1 + 1e-9)

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "n_counts": self.n_counts, "budget": self.budget, "sd": self.sd,
                "coverage": self.coverage, "half_width": self.half_width, "method": self.method,
                "target": self.target.to_dict() if self.target else None, "met": self.met}


@dataclass(frozen=True)
class Proposal:
    """The planner's answer: the total ``cost``, the parameters to release with (``params``,
    the split included), how the split was found (``split``), each level's outcome and notes."""

    kind: str
    mechanism: str
    cost: PrivacyCost
    params: dict[str, Any]
    split: str
    levels: tuple[LevelOutcome, ...]
    notes: tuple[str, ...]
    plan: Plan = field(repr=False)
    #: the plan's own notes on levels whose error depends on the data, from the plan AT the proposal
    #: (e.g. a tree's shape, auto's choice); kept apart from what the proposal assumes (``notes``)
    row_notes: tuple[str, ...] = ()

    @property
    def total(self) -> float:
        return self.cost.value

    @property
    def rounded(self) -> float:
        """The total rounded *up* to 4 significant digits: the number to type (it still meets the targets)."""
        return round_up(self.cost.value)

    def to_dict(self) -> dict[str, Any]:
        from dpcore.core.record import jsonable as _jsonable

        return {"kind": self.kind, "mechanism": self.mechanism, "cost": self.cost.to_dict(), "rounded": self.rounded,
                "params": _jsonable(self.params), "split": self.split,
                "levels": [lv.to_dict() for lv in self.levels], "notes": list(self.notes),
                "row_notes": list(self.row_notes)}


# ---------------------------------------------------------------------------------------------
# the search
# ---------------------------------------------------------------------------------------------


class _Planner:
    """Plans of one mechanism on one domain at any (total, weights), memoised: the plans whose rows
    are read, and for the search (thousands of points) only each point's :meth:`worst` ratio."""

    def __init__(self, mechanism: Mechanism, domain: Any, definition: str, params: Mapping[str, Any],
                 unit: Unit | None, public: Mapping[str, Any], targets: Sequence[Target]) -> None:
        self.m, self.domain, self.definition = mechanism, domain, definition
        self.params, self.unit, self.public = dict(params), unit, dict(public)
        self.targets = list(targets)
        self._memo: dict[Any, Plan] = {}
        self._worst: dict[Any, float] = {}
        self.rows_of: list[int] = []

    def _make(self, total: float, weights: Sequence[float] | None) -> Plan:
        prm = dict(self.params)
        if weights is not None:
            prm.update(split="custom", weights=tuple(float(w) for w in weights))
        return self.m.plan(self.domain, PrivacyCost(self.definition, float(total)), prm, unit=self.unit,
                           **self.public)

    def plan(self, total: float, weights: Sequence[float] | None = None) -> Plan:
        key = (float(total), tuple(weights) if weights is not None else None)
        if key not in self._memo:
            self._memo[key] = self._make(total, weights)
        return self._memo[key]

    def ratios(self, plan: Plan) -> list[float]:
        """Per target, its half-width over the target (<= 1: met)."""
        return [row_half_width(plan.rows[i], t.coverage, self.definition)[0] / t.half_width
                for i, t in zip(self.rows_of, self.targets, strict=True)]

    def worst(self, total: float, weights: Sequence[float] | None = None) -> float:
        """The largest of :meth:`ratios` at (total, weights), memoised without its plan: a plan kept per
        point of the search (37 objects each, 1,200 to 2,600 points per proposal on the demos) grew the
        heap until Python's full garbage collections ran during the search (13 % of its time).  The plan
        is made :func:`~dpcore.core.mechanism.sd_only`: the ratios read only its SDs."""
        key = (float(total), tuple(weights) if weights is not None else None)
        if key not in self._worst:
            plan = self._memo.get(key)
            if plan is None:
                with sd_only():  # the ratios read the rows' SDs only: no expected largest errors
                    plan = self._make(total, weights)
            self._worst[key] = max(self.ratios(plan))
        return self._worst[key]

    def meets(self, total: float, weights: Sequence[float] | None = None) -> bool:
        return self.worst(total, weights) <= 1 + 1e-12

    def power(self) -> float:
        """How the error falls with the budget: ``∝ 1/ε`` (pure) or ``∝ 1/√ρ`` (zCDP)."""
        return 1.0 if self.definition == "pure" else 2.0

    def min_total(self, weights: Sequence[float] | None, rtol: float,
                  guess: float | None = None) -> float:
        """The smallest total meeting every target at this split, within ``rtol`` (bisection)."""
        ok = (lambda b: self.meets(b, _scaled(weights, b))) if weights is not None else self.meets
        if guess is None:
            r = self.worst(1.0, _scaled(weights, 1.0))
            guess = min(max(r ** self.power(), _MIN_TOTAL), _MAX_TOTAL) if r > 0 else _MIN_TOTAL
        hi = guess * 1.05
        while not ok(hi):
            if hi >= _MAX_TOTAL:
                raise ParameterError(
                    f"The targets cannot be met with any budget up to {_MAX_TOTAL:g}: a target is below what "
                    "this mechanism can reach (its error does not fall with the budget there). Loosen it.")
            hi = min(hi * 2.0, _MAX_TOTAL)
        lo = hi / 1.1
        while ok(lo):
            hi = lo
            if lo <= _MIN_TOTAL:
                return hi
            lo = max(lo / 2.0, _MIN_TOTAL)
        while hi / lo > 1 + rtol:
            mid = math.sqrt(lo * hi)
            if ok(mid):
                hi = mid
            else:
                lo = mid
        return hi


def _scaled(weights: Sequence[float] | None, total: float) -> tuple[float, ...] | None:
    """Shares as per-level budgets summing to ``total`` (the custom split normalises them anyway)."""
    if weights is None:
        return None
    s = float(sum(weights))
    return tuple(total * w / s for w in weights)


def _find_row(plan: Plan, level: str) -> int:
    rows = plan.rows
    want = str(level).strip().lower()
    for i, r in enumerate(rows):
        if r.name.strip().lower() == want:
            return i
    if want in FINEST:
        released = [i for i, r in enumerate(rows) if r.details.get("in_partition") is True]
        return released[-1] if released else len(rows) - 1
    if want.lstrip("-").isdigit():
        for i, r in enumerate(rows):
            if int(r.level) == int(want):
                return i
    names = ", ".join(repr(r.name) for r in rows)
    raise ParameterError(f"The plan has no level '{level}'. Its levels are: {names} (or 'finest', or a level number).")


def _splittable(m: Mechanism, plan: Plan) -> int:
    """How many per-level budgets a custom split takes (0: the mechanism has no such split)."""
    names = {p.name: p for p in m.params}
    split = names.get("split")
    if split is None or "weights" not in names or not split.choices or "custom" not in split.choices:
        return 0
    measured = [r for r in plan.rows if r.cost is not None]
    return len(measured) if len(measured) >= 2 else 0


def plan_for_targets(mechanism: Mechanism, domain: Any, targets: Sequence[Target], *, definition: str = "pure",
                     params: Mapping[str, Any] | None = None, unit: Unit | None = None,
                     optimise_split: bool = True, min_share: float = 0.01, rtol: float = 1e-4,
                     **public: Any) -> Proposal:
    """The smallest total budget, and the split over levels, that meets every target.

    Parameters
    ----------
    mechanism : Mechanism
        A mechanism of the catalogue (:func:`dpcore.catalog.get`).
    domain
        Its public domain (a grid, a hierarchy, an O/D pair): nothing of the data.
    targets : sequence of Target
        At most one per level (:func:`parse_target` reads the CLI's text).
    definition : {"pure", "zcdp"}
        The budget is ε (pure DP) or ρ (zCDP).
    params : mapping, optional
        The mechanism's parameters; with a ``custom``-capable split and ``optimise_split`` the
        split is chosen by the planner, otherwise the given one is kept.
    unit : Unit, optional
        The unit of privacy (its cap scales the sensitivity).
    min_share : float
        Least share of the total each measured level keeps when the split is optimised.
    rtol : float
        Relative tolerance of the total: ``(1 − rtol) ×`` the proposal misses a target.
    **public
        The mechanism's public inputs (``n_estimate``, ``distinct`` ...).

    Returns
    -------
    Proposal

    Examples
    --------
    ±3 points per cell for 95 % of the cells of a 4 × 4 grid, with the identity mechanism: one
    discrete Laplace draw per cell, so the exact quantile applies: ``P(|X| > 3) = 2q⁴/(1 + q)``
    with ``q = e^{−ε}`` falls to 5 % at ε ≈ 0.832.

    >>> from dpcore import catalog
    >>> from dpcore.data.domain import Bounds, Grid
    >>> grid = Grid(Bounds(0, 0, 1, 1), 4, 4)
    >>> p = plan_for_targets(catalog.get("points", "identity"), grid, [Target("finest", 3)])
    >>> round(p.total, 3), p.levels[0].half_width, p.levels[0].method, p.levels[0].met
    (0.832, 3.0, 'exact', True)
    """
    _check_request(mechanism, targets, definition, min_share)
    notes: list[str] = []
    pl = _Planner(mechanism, domain, definition, params or {}, unit, public, targets)
    first = pl.plan(1.0)
    if not first.rows:
        raise ParameterError(
            f"{mechanism.title} sizes its levels by the number of points, so its error has no data-free form "
            "without a public guess of it: give the number of points (public_n, or the n_estimate public input; "
            "CLI: --n-estimate N) and the plan is made for that guess.")
    rows_of = [_find_row(first, t.level) for t in targets]
    if len(set(rows_of)) < len(rows_of):
        raise ParameterError("Two targets name the same level; give one target per level (the stricter one).")
    pl.rows_of = rows_of
    if public.get("n_estimate") and getattr(mechanism, "needs_n_guess", False) and not first.params.get("public_n"):
        notes.append(f"The levels are sized by a public guess of {public['n_estimate']:,} points; the release sizes "
                     "them by its own noisy count, so the error holds for data of about that size.")

    k = _splittable(mechanism, first) if optimise_split else 0
    given = pl.min_total(None, rtol)
    best_total, best_w, how = given, None, "given"
    if k:
        total, weights, how_found = _optimise(pl, k, first, given, min_share, rtol)
        if total < given:
            best_total, best_w, how = total, weights, how_found
            untargeted = [r.name for i, r in enumerate(first.rows) if r.cost is not None and i not in rows_of]
            if untargeted:
                notes.append(f"Levels without a target ({', '.join(untargeted)}) keep at least {min_share:.0%} of "
                             "the total each; state a target for them to control their error.")
    final = pl.plan(best_total, _scaled(best_w, best_total))
    out_params = dict(final.params)
    levels = _outcomes(final, targets, rows_of, definition)
    if any(lv.method == "normal" and lv.target for lv in levels):
        notes.append("Levels marked 'normal' combine several Gaussian noises (post-processing or sums): their error "
                     "is normal with the plan's SD.")
    if any(lv.method == "conservative" and lv.target for lv in levels):
        notes.append("Levels marked 'conservative' combine several Laplace noises (post-processing or sums): the "
                     "half-width is the larger of the normal one and that of a single Laplace with the same SD.")
    row_notes = tuple(dict.fromkeys(f"{r.name}: {r.note}" for r in final.rows
                                    if "depend" in r.note and ("data" in r.note or "noisy" in r.note)))
    return Proposal(mechanism.kind, mechanism.name, final.cost, out_params, how, tuple(levels),
                    tuple(dict.fromkeys(notes)), final, row_notes)


def _check_request(mechanism: Mechanism, targets: Sequence[Target], definition: str, min_share: float) -> None:
    """Refuse, before any plan is made, what :func:`plan_for_targets` cannot answer."""
    if not targets:
        raise ParameterError("State at least one target, e.g. --target \"level=tract,abs=50,coverage=0.95\".")
    if definition not in ("pure", "zcdp"):
        raise ParameterError(f"The budget is ε ('pure') or ρ ('zcdp'), not {definition!r}.")
    if not 0.0 < min_share < 1.0:
        raise ParameterError(f"min_share must lie strictly between 0 and 1 (got {min_share!r}): every measured level "
                             "needs some budget, e.g. 0.01.")
    key = (mechanism.kind, mechanism.name)
    if key in DATA_DEPENDENT:
        raise ParameterError(f"No target-error plan for {mechanism.title}: {DATA_DEPENDENT[key]}")


def _outcomes(final: Plan, targets: Sequence[Target], rows_of: Sequence[int], definition: str) -> list[LevelOutcome]:
    """Each level of the final plan with its half-width at its target's coverage (95 % without one)."""
    levels = []
    for i, r in enumerate(final.rows):
        t = targets[rows_of.index(i)] if i in rows_of else None
        cov = t.coverage if t else 0.95
        h, method = row_half_width(r, cov, definition)
        levels.append(LevelOutcome(r.name, int(r.n_counts), r.cost.value if r.cost is not None else None,
                                   float(r.sd), cov, h, method, t))
    return levels


def _optimise(pl: _Planner, k: int, first: Plan, given: float, min_share: float,
              rtol: float) -> tuple[float, tuple[float, ...], str]:
    """The best split of ``k`` measured levels: closed form per level when independent, else numerical."""
    measured = [i for i, r in enumerate(first.rows) if r.cost is not None]
    targeted = [measured.index(i) for i in pl.rows_of if i in measured]
    if min_share * k >= 1:
        raise ParameterError(f"min_share {min_share} leaves nothing to split over {k} levels; lower it.")
    if _independent(pl, k, measured, given):
        needs = [0.0] * k
        for j, t_row in zip(range(len(pl.rows_of)), pl.rows_of, strict=True):
            if t_row not in measured:
                continue
            lv = measured.index(t_row)
            needs[lv] = max(needs[lv], _level_need(pl, k, lv, t_row, pl.targets[j], given, rtol))
        free = [lv for lv in range(k) if needs[lv] == 0.0]
        total = sum(needs) / (1 - min_share * len(free)) if free else sum(needs)
        weights = [n if n > 0 else min_share * total for n in needs]
        total = sum(weights)
        # the per-level needs are exact; one bisection on the total at this split confirms them
        total = pl.min_total(tuple(weights), rtol, guess=total)
        return total, tuple(weights), "independent"

    import numpy as np
    from scipy.optimize import minimize

    def shares(x: np.ndarray) -> np.ndarray:
        e = np.exp(x - x.max())
        return min_share + (1 - k * min_share) * e / e.sum()

    p = pl.power()

    def objective(x: np.ndarray) -> float:
        w = shares(x)
        r = pl.worst(given, tuple(given * w))
        return given * r ** p  # the total this split needs, from the error's scaling with the budget

    starts = [np.zeros(k), np.linspace(0.0, math.log(2 ** (1 / 3)) * (k - 1), k)]
    if targeted:
        s = np.zeros(k)
        s[targeted] = 1.0
        starts.append(s)
    best = None
    for x0 in starts:
        res = minimize(objective, x0, method="Nelder-Mead",
                       options={"xatol": 1e-3, "fatol": given * 1e-5, "maxiter": 150 * k, "disp": False})
        if best is None or res.fun < best.fun:
            best = res
    w = tuple(float(v) for v in shares(best.x))
    return pl.min_total(w, rtol, guess=float(best.fun)), w, "optimised"


def _independent(pl: _Planner, k: int, measured: list[int], total: float) -> bool:
    """Whether each level's error depends on its own budget only (checked on the plan: raising one
    level's budget, the others' fixed, leaves every other level's SD unchanged)."""
    base_w = [total / k] * k
    base = pl.plan(sum(base_w), base_w)
    for lv in range(k):
        w = list(base_w)
        w[lv] *= 2.0
        other = pl.plan(sum(w), w)
        for i in measured:
            if i != measured[lv] and not math.isclose(other.rows[i].sd, base.rows[i].sd, rel_tol=1e-9):
                return False
        if not all(math.isclose(a.sd, b.sd, rel_tol=1e-9)
                   for j, (a, b) in enumerate(zip(other.rows, base.rows, strict=True)) if j not in measured):
            return False
    return True


def _level_need(pl: _Planner, k: int, lv: int, row: int, target: Target, total: float, rtol: float) -> float:
    """The budget level ``lv`` alone needs to meet ``target`` (the others' budgets do not matter)."""
    others = total / k

    def ok(b: float) -> bool:
        w = [others] * k
        w[lv] = b
        h, _ = row_half_width(pl.plan(sum(w), w).rows[row], target.coverage, pl.definition)
        return h <= target.half_width * (1 + 1e-12)

    hi = total / k
    while not ok(hi):
        if hi >= _MAX_TOTAL:
            raise ParameterError(f"The target {target.describe()} cannot be met with any budget up to {_MAX_TOTAL:g}.")
        hi *= 2.0
    lo = hi / 2.0
    while ok(lo):
        hi, lo = lo, lo / 2.0
        if lo < _MIN_TOTAL:
            return hi
    while hi / lo > 1 + rtol / 4:
        mid = math.sqrt(lo * hi)
        hi, lo = (mid, lo) if ok(mid) else (hi, mid)
    return hi
