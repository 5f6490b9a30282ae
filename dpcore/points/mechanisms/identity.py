"""Identity ("Singular" in the HTF paper): noise on every grid cell.

Neighbouring datasets differ in one unit of privacy (one record, or one person
with at most ``k`` records), which changes the frequency matrix by at most
``k`` in L1 and in L2.  Discrete Laplace noise of scale ``k/ε`` on every cell is
ε-DP (Dwork et al. 2006); discrete Gaussian noise with ``σ² = k²/(2ρ)`` is ρ-zCDP
(Canonne, Kamath & Steinke 2020).  Both samplers are exact (``dpcore.privacy.noise``).  Counts are released as
drawn (negative values kept: clamping would bias range sums; clamp for display).
"""

from __future__ import annotations

from typing import Any

from dpcore.core.mechanism import Plan
from dpcore.data.domain import Aggregate, Grid, block_rects
from dpcore.points.mechanisms.base import (
    PointsMechanism,
    count_level,
    noisy_counts,
    rect_cells,
)
from dpcore.points.release import LevelPlan, PartitionRelease
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.noise import NoiseSource


class Identity(PointsMechanism):
    name = "identity"
    title = "Identity (noise on every cell)"
    summary = "Adds independent noise to the count of every grid cell."
    when_to_use = (
        "Small grids or dense data where each cell holds many people; the baseline every "
        "other mechanism is compared with. Range queries over many cells add up a lot of noise."
    )
    reference = "Dwork, McSherry, Nissim & Smith (2006); 'Singular' in Shaham et al. (HTF, SIGSPATIAL 2021)"
    params = ()

    # -- plan --------------------------------------------------------------------
    def plan_levels(
        self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], *, sensitivity: int, n_estimate: float | None
    ) -> tuple[LevelPlan, ...]:
        return (
            count_level(
                0,
                f"Grid of {grid.rows:,} x {grid.cols:,} cells",
                cost,
                sensitivity,
                grid.n_cells,
                1.0,
                True,
            ),
        )

    def query_error(self, plan: Plan, rect: tuple[int, int, int, int]) -> dict[str, Any]:
        """Exact: the sum of ``cells`` independent noises has SD ``sqrt(cells)·sd``."""
        cells = rect_cells(rect)
        lv = plan.inner[0]
        return {"sd": lv.sd * cells ** 0.5, "cells": cells, "exact": True}

    # -- release -------------------------------------------------------------------
    def _release(
        self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: NoiseSource
    ) -> PartitionRelease:
        grid = aggregate.grid
        levels = self.plan_levels(grid, cost, params, sensitivity=aggregate.sensitivity, n_estimate=None)
        noisy = noisy_counts(aggregate.counts, cost, aggregate.sensitivity, noise).ravel()
        rects = block_rects(grid, grid.rows, grid.cols)  # one rectangle per cell, row-major
        return self.flat_release(aggregate, cost, params, levels, rects, noisy)
