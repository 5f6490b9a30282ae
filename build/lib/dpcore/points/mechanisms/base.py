"""What every point mechanism provides, and the registry the app and CLI read.

A mechanism module reads top to bottom like its spec: parameters, privacy cost,
plan (the data-free noise of every level), release, expected error.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from dpcore.core.mechanism import Param, resolve_params
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


def rect_bounds(rect: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    """``(r0, r1, c0, c1)`` of a query rectangle as ints."""
    r0, r1, c0, c1 = (int(v) for v in rect)
    return r0, r1, c0, c1


def rect_cells(rect: tuple[int, int, int, int]) -> int:
    """Number of grid cells a query rectangle ``(r0, r1, c0, c1)`` covers."""
    r0, r1, c0, c1 = rect_bounds(rect)
    return max(0, r1 - r0) * max(0, c1 - c0)


class PointMechanism(ABC):
    """A DP mechanism that releases a partition of a public grid from a frequency matrix."""

    name: ClassVar[str]
    title: ClassVar[str]
    summary: ClassVar[str]
    when_to_use: ClassVar[str]
    reference: ClassVar[str]
    params: ClassVar[tuple[Param, ...]] = ()
    #: whether the error preview needs a guess of the number of points
    needs_n_guess: ClassVar[bool] = False
    #: whether the mechanism can run under ρ-zCDP (discrete Gaussian); tree mechanisms
    #: whose papers prove pure ε-DP only set this to False
    supports_zcdp: ClassVar[bool] = True
    #: whether ``release`` returns a tree (``is_tree``) whose depth the Map page can browse
    is_tree: ClassVar[bool] = False

    # -- parameters ---------------------------------------------------------------
    def resolve_params(self, raw: dict[str, Any] | None = None) -> dict[str, Any]:
        """Defaults filled in, types converted, ranges checked; unknown names refused."""
        return resolve_params(self.name, self.params, raw)

    # -- privacy cost ---------------------------------------------------------------
    def privacy_cost(self, epsilon: Budget, params: dict[str, Any] | None = None) -> PrivacyCost:
        """Total cost: the phases compose sequentially (ε adds up under pure DP, ρ under zCDP)."""
        return self.check_budget(epsilon)

    def check_budget(self, budget: Budget) -> PrivacyCost:
        """The budget as a PrivacyCost, refused when the mechanism cannot use its definition."""
        cost = as_cost(budget)
        if cost.definition == "zcdp" and not self.supports_zcdp:
            raise ParameterError(
                f"{self.title} is defined for pure ε-DP only. Choose 'Pure ε-DP' as the privacy "
                "definition (CLI: --epsilon), or a mechanism that supports ρ-zCDP."
            )
        return cost

    # -- plan and expected error (data-free) -------------------------------------------
    def prepare(self, grid: Grid, budget: Budget, params: dict[str, Any] | None
                ) -> tuple[PrivacyCost, dict[str, Any]]:
        """Validate the budget and the parameters before anything else (a hook: HTF adds its
        own public checks).  Every :meth:`plan` and :meth:`release` goes through it."""
        return self.check_budget(budget), self.resolve_params(params)

    def plan(
        self,
        grid: Grid,
        epsilon: Budget,
        params: dict[str, Any] | None,
        *,
        sensitivity: int = 1,
        n_estimate: float | None = None,
    ) -> tuple[LevelPlan, ...]:
        """The noise of every level, from public inputs only (grid, ε, parameters,
        the unit of privacy and, where the mechanism needs one, a public guess of
        the number of points)."""
        cost, p = self.prepare(grid, epsilon, params)
        return self._plan(grid, cost, p, sensitivity=sensitivity, n_estimate=n_estimate)

    @abstractmethod
    def _plan(
        self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], *, sensitivity: int, n_estimate: float | None
    ) -> tuple[LevelPlan, ...]:
        """:meth:`plan` with a checked cost and resolved parameters."""

    def expected_error(
        self,
        grid: Grid,
        epsilon: float,
        params: dict[str, Any],
        *,
        sensitivity: int = 1,
        n_estimate: float | None = None,
        query_sizes: tuple[float, ...] = DEFAULT_QUERY_SIZES,
    ) -> list[dict[str, Any]]:
        """Per level: budget, noise scale, SD and 95 % interval of one count, and the
        noise SD of range queries of the given area fractions.  Needs no data."""
        levels = self.plan(grid, epsilon, params, sensitivity=sensitivity, n_estimate=n_estimate)
        return [lv.to_dict(grid.n_cells, query_sizes) for lv in levels]

    def query_error(
        self,
        grid: Grid,
        epsilon: Budget,
        params: dict[str, Any],
        rect: tuple[int, int, int, int],
        *,
        sensitivity: int = 1,
        n_estimate: float | None = None,
    ) -> dict[str, Any]:
        """Noise SD of the range query over cells ``rect = (r0, r1, c0, c1)``, before release.

        Default: the leaf level's formula for a query of that area under evenly spread
        leaves (:meth:`LevelPlan.query_sd`), flagged ``exact=False``.  Mechanisms with an
        exact data-free variance override it.
        """
        cells = rect_cells(rect)
        levels = self.plan(grid, epsilon, params, sensitivity=sensitivity, n_estimate=n_estimate)
        leaf = [lv for lv in levels if lv.in_partition][-1]
        return {"sd": leaf.query_sd(cells / grid.n_cells, grid.n_cells), "cells": cells, "exact": False}

    # -- release -------------------------------------------------------------------
    def check_aggregate(self, aggregate: Aggregate) -> None:
        """Refuse data this mechanism cannot release, before any budget is charged (default: none)."""
        return None

    def release(
        self,
        aggregate: Aggregate,
        epsilon: Budget,
        params: dict[str, Any] | None,
        noise: _noise.NoiseSource,
    ) -> PartitionRelease:
        """Draw the noise and return the release.  Spends ``privacy_cost`` (the
        caller charges it to the ledger *before* calling)."""
        cost, p = self.prepare(aggregate.grid, epsilon, params)
        return self._release(aggregate, cost, p, noise)

    def release_planned(
        self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: _noise.NoiseSource
    ) -> PartitionRelease:
        """:meth:`release` with the cost and parameters a plan has already checked and resolved
        (:meth:`prepare`, e.g. through :meth:`plan`), so they are not checked twice.

        Levels sized by the data (a noisy number of points, e.g. Qardaji et al. 2013's grids or
        HTF's height) are set inside the release, as each mechanism's paper prescribes.
        Spends ``cost`` (the caller charges it first).
        """
        return self._release(aggregate, cost, params, noise)

    @abstractmethod
    def _release(
        self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: _noise.NoiseSource
    ) -> PartitionRelease:
        """:meth:`release` with a checked cost and resolved parameters."""

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
        return {
            "name": self.name,
            "title": self.title,
            "summary": self.summary,
            "when_to_use": self.when_to_use,
            "reference": self.reference,
            "privacy": ("pure epsilon-DP (discrete Laplace) or rho-zCDP (discrete Gaussian)"
                        if self.supports_zcdp else "pure epsilon-DP"),
            "tree": self.is_tree,
            "params": [p.to_dict() for p in self.params],
        }


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
