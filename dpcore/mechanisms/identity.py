"""Identity ("Singular" in the HTF paper): noise on every grid cell.

Neighbouring datasets differ in one unit of privacy (one record, or one person
with at most ``k`` records), which changes the frequency matrix by at most
``k`` in L1 and in L2.  Discrete Laplace noise of scale ``k/ε`` on every cell is
ε-DP (Dwork et al. 2006); discrete Gaussian noise with ``σ² = k²/(2ρ)`` is ρ-zCDP
(Canonne, Kamath & Steinke 2020).  Both samplers are exact (``dpcore.noise``).  Counts are released as
drawn (negative values kept: clamping would bias range sums; clamp for display).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpcore.domain import Aggregate, Grid
from dpcore.mechanisms.base import Budget, PointMechanism, as_cost, count_level, noisy_counts
from dpcore.noise import NoiseSource
from dpcore.release import LevelPlan, PartitionRelease


class Identity(PointMechanism):
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
    def plan(
        self,
        grid: Grid,
        epsilon: Budget,
        params: dict[str, Any],
        *,
        sensitivity: int = 1,
        n_estimate: float | None = None,
    ) -> tuple[LevelPlan, ...]:
        cost = as_cost(epsilon)
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

    # -- release -------------------------------------------------------------------
    def query_error(self, grid: Grid, epsilon: Budget, params: dict[str, Any], rect: tuple[int, int, int, int],
                    *, sensitivity: int = 1, n_estimate: float | None = None) -> dict[str, Any]:
        """Exact: the sum of ``cells`` independent noises has SD ``sqrt(cells)·sd``."""
        r0, r1, c0, c1 = (int(v) for v in rect)
        cells = max(0, r1 - r0) * max(0, c1 - c0)
        lv = self.plan(grid, epsilon, params, sensitivity=sensitivity)[0]
        return {"sd": lv.sd * cells ** 0.5, "cells": cells, "exact": True}

    def release(
        self, aggregate: Aggregate, epsilon: Budget, params: dict[str, Any], noise: NoiseSource
    ) -> PartitionRelease:
        params = self.resolve_params(params)
        grid = aggregate.grid
        levels = self.plan(grid, epsilon, params, sensitivity=aggregate.sensitivity)
        noisy = noisy_counts(aggregate.counts, epsilon, aggregate.sensitivity, noise).ravel()
        r, c = np.divmod(np.arange(grid.n_cells, dtype=np.int64), grid.cols)
        rects = np.column_stack([r, r + 1, c, c + 1])
        return self.flat_release(aggregate, self.privacy_cost(epsilon, params), params, levels, rects, noisy)
