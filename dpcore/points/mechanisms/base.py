"""What every point mechanism has in common: the points kind's base class and shared helpers.

A mechanism module reads top to bottom like its paper: parameters, privacy cost, plan (the
data-free noise and expected error of every level), release.  Each is one
:class:`~dpcore.core.mechanism.Mechanism` of the catalogue (:mod:`dpcore.catalog`) through
:class:`PointsMechanism`, which turns its level plans into :class:`~dpcore.core.mechanism.PlanRow`,
checks the grid, the unit and the data, and builds the release's envelope.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from dpcore.core.mechanism import KindRelease, Mechanism, Param, Plan, PlanRow
from dpcore.data.domain import Aggregate, Grid
from dpcore.errors import ParameterError
from dpcore.points.release import DEFAULT_QUERY_SIZES, LevelPlan, PartitionRelease
from dpcore.privacy import noise as _noise
from dpcore.privacy.budget import PrivacyCost, pure, zcdp
from dpcore.privacy.calibration import (
    gaussian_sigma_for_rho,
    interval_half_width,
    laplace_scale_for_epsilon,
    noise_for_cost,
    noise_variance,
)
from dpcore.privacy.units import Unit

__all__ = [
    "KIND", "Budget", "Param", "PointsMechanism", "as_cost", "check_epsilon", "count_level", "equivalent_epsilon",
    "gaussian_sigma", "laplace_level", "level_row", "noisy_counts", "noisy_point_count", "part", "rect_bounds", "rect_cells",
]

#: The kind of data of every point mechanism (its key in the catalogue).
KIND = "points"


def rect_bounds(rect: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    """``(r0, r1, c0, c1)`` of a query rectangle as ints."""
    r0, r1, c0, c1 = (int(v) for v in rect)
    return r0, r1, c0, c1


def rect_cells(rect: tuple[int, int, int, int]) -> int:
    """Number of grid cells a query rectangle ``(r0, r1, c0, c1)`` covers."""
    r0, r1, c0, c1 = rect_bounds(rect)
    return max(0, r1 - r0) * max(0, c1 - c0)


class PointsMechanism(Mechanism):
    """A DP mechanism that releases a partition of a public grid from a frequency matrix.

    What is common to the points kind: the domain is the public :class:`~dpcore.data.domain.Grid`,
    the aggregate its :class:`~dpcore.data.domain.Aggregate`, the unit of privacy one record or one
    person with a cap on records (the counts' sensitivity).  A mechanism declares its parameters,
    may refuse public settings (:meth:`check_public`), gives the noise of every level from public
    inputs (:meth:`plan_levels`) and draws its release (:meth:`_release`).  :meth:`plan` resolves
    the parameters and checks the cost once; :meth:`release` draws from that plan's parameters and
    cost, and wraps the :class:`~dpcore.points.release.PartitionRelease` in the one envelope.

    ``public_inputs``: ``n_estimate``, a public guess of the number of points for the mechanisms
    that size their grid by it (``needs_n_guess``); without it their plan has no rows (nothing to
    preview), and the release sizes the levels from its noisy count.
    """

    kind = KIND
    public_inputs = ("n_estimate",)
    #: whether the error preview needs a guess of the number of points
    needs_n_guess: ClassVar[bool] = False
    #: whether a guess of the number of points, though not needed, makes the preview closer to the
    #: release (PrivTree: how many leaves the tree is likely to make); the plan without one is an upper bound
    n_guess_helps: ClassVar[bool] = False
    #: whether ``release`` returns a tree (``is_tree``) whose depth the Map page can browse
    is_tree: ClassVar[bool] = False

    # -- privacy cost ---------------------------------------------------------------
    def cost(self, budget: Budget, params: Mapping[str, Any] | None = None) -> PrivacyCost:
        """Total cost: the phases compose sequentially (ε adds up under pure DP, ρ under zCDP);
        ε must be positive and at most 100; a definition the mechanism does not support is refused."""
        return super().cost(as_cost(budget), params)

    # -- plan and expected error (data-free) -------------------------------------------
    def _plan(self, domain: Grid, cost: PrivacyCost, params: dict[str, Any], unit: Unit,
              public: Mapping[str, Any]) -> Plan:
        """:meth:`plan` (``plan(grid, budget, params, unit=..., n_estimate=...)``) once the parameters
        are resolved and the cost checked: the grid and the unit checked, the public settings
        checked, the noise of every level from public inputs (grid, budget, parameters, the unit of
        privacy and, where the mechanism needs one, a public guess ``n_estimate`` of the number of
        points)."""
        if not isinstance(domain, Grid):
            raise ParameterError(f"A points plan needs the public grid (got {type(domain).__name__}).")
        if unit.neighbour != "add_remove":
            raise ParameterError("Point releases protect one unit added or removed; choose the add/remove neighbours.")
        self.check_public(domain, cost, params)
        n_estimate = public.get("n_estimate")
        levels: tuple[LevelPlan, ...] = ()
        if n_estimate is not None or not self.needs_n_guess:
            # sized by the number of points: without a public guess there is no preview of the
            # levels (the release sizes them from its noisy count); the public checks still ran
            levels = self.plan_levels(domain, cost, params, sensitivity=unit.contribution, n_estimate=n_estimate)
        rows = tuple(level_row(lv, domain.n_cells) for lv in levels)
        return Plan(KIND, self.name, params, cost, unit, rows, inner=levels, label=self.title,
                    domain=domain, public=dict(public))

    def check_public(self, grid: Grid, cost: PrivacyCost, params: dict[str, Any]) -> None:
        """Refuse public settings the mechanism cannot release (a grid too large, a workload it
        cannot use...), before anything is spent; run by every plan (default: none)."""
        return None

    def check_settings(self, grid: Grid, budget: Budget, params: Mapping[str, Any] | None = None) -> None:
        """The refusals of :meth:`plan` (parameters, cost, public settings) without computing its
        levels: for listings that only ask whether a mechanism can run these settings."""
        p = self.resolve_params(params)
        self.check_public(grid, self.cost(budget, p), p)

    @abstractmethod
    def plan_levels(
        self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], *, sensitivity: int, n_estimate: float | None
    ) -> tuple[LevelPlan, ...]:
        """The noise and expected error of every level, with a checked cost and resolved parameters."""

    @staticmethod
    def expected_error(plan: Plan, query_sizes: tuple[float, ...] = DEFAULT_QUERY_SIZES) -> list[dict[str, Any]]:
        """Per level of ``plan``: budget, noise scale, SD and 95 % interval of one count, and the
        noise SD of range queries of the given area fractions.  Needs no data."""
        return [lv.to_dict(plan.domain.n_cells, query_sizes) for lv in plan.inner]

    def query_error(self, plan: Plan, rect: tuple[int, int, int, int]) -> dict[str, Any]:
        """Noise SD of the range query over cells ``rect = (r0, r1, c0, c1)``, before release.

        Default: the leaf level's formula for a query of that area under evenly spread
        leaves (:meth:`LevelPlan.query_sd`), flagged ``exact=False``.  Mechanisms with an
        exact data-free variance override it.
        """
        cells = rect_cells(rect)
        grid = plan.domain
        leaf = [lv for lv in _levels_of(plan) if lv.in_partition][-1]
        return {"sd": leaf.query_sd(cells / grid.n_cells, grid.n_cells), "cells": cells, "exact": False}

    # -- release -------------------------------------------------------------------
    def check_aggregate(self, aggregate: Aggregate) -> None:
        """Refuse data this mechanism cannot release, before any budget is charged (default: none)."""
        return None

    def check_data(self, plan: Plan, aggregate: Aggregate) -> None:
        """The counts match the plan's grid and cap, and the mechanism accepts their size
        (:meth:`check_aggregate`): run before the charge."""
        self.check_counts(plan, aggregate)
        self.check_aggregate(aggregate)

    def check_counts(self, plan: Plan, aggregate: Aggregate) -> None:
        """The plan is this mechanism's, and the counts match its grid and cap."""
        self.check_plan(plan)
        if aggregate.grid != plan.domain:
            raise ParameterError("The points were aggregated on another grid than the one this plan was made for.")
        if aggregate.sensitivity != plan.unit.contribution:
            raise ParameterError(
                f"The plan protects {plan.unit.label()}, but the counts were capped at {aggregate.sensitivity} "
                "records per unit; plan again with the same cap."
            )

    def release(self, plan: Plan, aggregate: Aggregate, noise: _noise.NoiseSource, *,
                checked: bool = False) -> KindRelease:
        """Draw the noise for ``plan`` over ``aggregate`` with the plan's parameters and cost (the
        plan resolved and checked them; levels sized by the data, e.g. a noisy number of points as
        in Qardaji, Yang & Li 2013's grids or HTF's height, are set inside the release, as each
        mechanism's paper prescribes).  Spends ``plan.cost``: the session charges it first."""
        from dpcore.points import export  # the record's writer: loaded for a release only

        if not checked:  # a direct caller: the pipeline ran it before the charge and says so
            self.check_data(plan, aggregate)
        inner = self._release(aggregate, plan.cost, dict(plan.params), noise)
        return KindRelease.of(plan, inner, export.release_record, export.release_files)

    @abstractmethod
    def _release(
        self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: _noise.NoiseSource
    ) -> PartitionRelease:
        """The mechanism's draw, with a checked cost and resolved parameters."""

    def make_release(
        self,
        aggregate: Aggregate,
        cost: PrivacyCost,
        params: dict[str, Any],
        levels: tuple[LevelPlan, ...],
        **fields: Any,
    ) -> PartitionRelease:
        """A release of this mechanism over ``aggregate``'s grid; ``fields`` are the rest
        of :class:`PartitionRelease` (rects, level, leaf, noisy, sd, ci95, ...)."""
        return PartitionRelease(
            mechanism=self.name,
            mechanism_title=self.title,
            mechanism_reference=self.reference,
            params=params,
            grid=aggregate.grid,
            cost=cost,
            levels=levels,
            sensitivity=aggregate.sensitivity,
            user_cap=aggregate.user_cap,
            **fields,
        )

    def flat_release(
        self,
        aggregate: Aggregate,
        cost: PrivacyCost,
        params: dict[str, Any],
        levels: tuple[LevelPlan, ...],
        rects: np.ndarray,
        noisy: np.ndarray,
        public: dict[str, Any] | None = None,
    ) -> PartitionRelease:
        """A one-level partition: every rectangle is a leaf of the last level of ``levels``."""
        lv = levels[-1]
        n = int(rects.shape[0])
        return self.make_release(
            aggregate, cost, params, levels,
            rects=np.asarray(rects, dtype=np.int64),
            level=np.full(n, lv.level, dtype=np.int64),
            leaf=np.ones(n, dtype=bool),
            noisy=np.asarray(noisy).astype(np.float64),
            sd=np.full(n, lv.sd),
            ci95=np.full(n, lv.ci95),
            public=public or {},
        )

    def describe(self) -> dict[str, Any]:
        """The catalogue's description, with the noise named and whether the release is a tree."""
        d = super().describe()
        d["privacy"] = ("pure epsilon-DP (discrete Laplace) or rho-zCDP (discrete Gaussian)"
                        if "zcdp" in self.definitions else "pure epsilon-DP")
        d["tree"] = self.is_tree
        return d


def level_row(lv: LevelPlan, n_cells: int) -> PlanRow:
    """A point level plan as a plan row (the expected error of range queries under ``details``)."""
    d = lv.to_dict(n_cells, DEFAULT_QUERY_SIZES)
    details: dict[str, Any] = {"in_partition": lv.in_partition, "cells_per_count": lv.cells_per_count,
                               "range_query_sd": d["expected_error"]["range_query_sd"]}
    details.update(lv.extra)
    return PlanRow(
        level=lv.level, name=lv.name, cost=lv.cost, noise=lv.noise, scale=lv.scale,
        sensitivity=lv.sensitivity, n_counts=lv.n_counts, sd=lv.sd, ci95=lv.ci95,
        mean_abs=d["expected_error"]["mean_abs_error_per_count"], max_abs=None, note=lv.note, details=details,
    )


def _levels_of(plan: Plan) -> tuple[LevelPlan, ...]:
    """The level plans of a points plan; refused when it has none (no guess of the number of points)."""
    if not plan.inner:
        raise ParameterError(
            f"{plan.label or plan.mechanism} sizes its levels from the number of points. Give a rough public "
            "guess of the number of points to preview its error (it is used only for the preview)."
        )
    return tuple(plan.inner)


def check_epsilon(epsilon: float) -> float:
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise ParameterError(f"The privacy budget ε must be a number (got {epsilon!r}).") from None
    if not math.isfinite(eps) or eps <= 0:
        raise ParameterError(f"The privacy budget ε must be a positive number (got {epsilon!r}), e.g. 0.5.")
    if eps > 100:
        raise ParameterError(f"ε = {eps:g} gives no meaningful protection; choose ε of at most 100 (typical 0.05–2).")
    return eps


#: A release budget: a float is ε (pure DP); a PrivacyCost may also be ρ (zCDP).
Budget = float | PrivacyCost


def as_cost(budget: Budget) -> PrivacyCost:
    """The release budget as a :class:`PrivacyCost` (a bare number means pure ε)."""
    if isinstance(budget, PrivacyCost):
        if budget.definition == "pure":
            check_epsilon(budget.value)
        return budget
    return pure(check_epsilon(budget))


def part(cost: PrivacyCost, value: float) -> PrivacyCost:
    """A share of a budget in the same definition (ε and ρ both add up over phases)."""
    return pure(value) if cost.definition == "pure" else zcdp(value)


def equivalent_epsilon(cost: PrivacyCost) -> float:
    """The ε whose Laplace noise has the same variance as this budget's noise.

    For ρ-zCDP, Gaussian noise of variance Δ²/(2ρ) matches Laplace variance 2Δ²/ε² at
    ε = 2·sqrt(ρ).  Used only by data-size rules such as UG's grid size.
    """
    return cost.value if cost.definition == "pure" else 2.0 * math.sqrt(cost.value)


def gaussian_sigma(rho: float, l2_sensitivity: int) -> Fraction:
    """σ of the discrete Gaussian for ρ-zCDP with ``σ² >= Δ₂²/(2ρ)`` exactly.

    The exact rounding-up is :func:`dpcore.privacy.calibration.gaussian_sigma_for_rho`'s.
    """
    return Fraction(gaussian_sigma_for_rho(rho, l2_sensitivity))


def count_level(
    level: int,
    name: str,
    cost: PrivacyCost,
    sensitivity: int,
    n_counts: int,
    cells_per_count: float,
    in_partition: bool,
    note: str = "",
) -> LevelPlan:
    """A level of counts with discrete Laplace (pure ε) or discrete Gaussian (ρ-zCDP) noise.

    The counts of a level are disjoint, so one unit of privacy (at most ``sensitivity``
    records) changes them by at most ``sensitivity`` in L1 and in L2.
    """
    noise_name, scale = noise_for_cost(cost.definition, cost.value, sensitivity)
    return LevelPlan(
        level=level,
        name=name,
        cost=cost,
        noise=noise_name,
        scale=float(scale),
        sensitivity=int(sensitivity),
        n_counts=int(n_counts),
        sd=math.sqrt(noise_variance(noise_name, scale)),
        ci95=interval_half_width(noise_name, scale),
        cells_per_count=float(cells_per_count),
        in_partition=in_partition,
        note=note,
    )


def laplace_level(
    level: int,
    name: str,
    epsilon: float,
    sensitivity: int,
    n_counts: int,
    cells_per_count: float,
    in_partition: bool,
    note: str = "",
) -> LevelPlan:
    """A level whose counts get discrete Laplace noise of scale sensitivity/ε."""
    return count_level(level, name, pure(epsilon), sensitivity, n_counts, cells_per_count, in_partition, note)


def noisy_counts(
    true_counts: np.ndarray, budget: Budget, sensitivity: int, noise: _noise.NoiseSource
) -> np.ndarray:
    """True integer counts plus exact discrete noise for ``budget``.

    Pure ε: discrete Laplace of scale Δ/ε.  ρ-zCDP: discrete Gaussian with σ² >= Δ²/(2ρ).
    """
    cost = as_cost(budget)
    true = np.asarray(true_counts).astype(np.int64)
    if cost.definition == "pure":
        return true + noise.discrete_laplace(laplace_scale_for_epsilon(cost.value, sensitivity), true.shape)
    return true + noise.discrete_gaussian(gaussian_sigma(cost.value, sensitivity), true.shape)


def noisy_point_count(aggregate: Aggregate, e_n: PrivacyCost | None, params: Mapping[str, Any],
                      noise: _noise.NoiseSource, public: dict[str, Any]) -> int:
    """The number of points that sizes a grid (UG, and AG's first level: Qardaji, Yang & Li 2013):
    the public one (``params["public_n"]``) when ``e_n`` is None, else the total with noise of
    ``e_n`` (:func:`noisy_counts`), published with the release as ``public["noisy_point_count"]``."""
    if e_n is None:
        return params["public_n"]
    n_hat = int(noisy_counts(np.array([aggregate.total]), e_n, aggregate.sensitivity, noise)[0])
    public["noisy_point_count"] = n_hat
    return n_hat
