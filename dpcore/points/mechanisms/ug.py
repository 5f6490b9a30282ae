"""UG: the uniform grid of Qardaji, Yang & Li (ICDE 2013).

The grid size balances noise error against non-uniformity error:
``m = sqrt(N * ε / c)`` cells per side with ``c = 10`` (their Guideline 1).
With a cap of ``k`` records per person the noise of every cell grows ``k``
times, so we use ``ε / k`` in the rule (same guideline, per-unit budget).
Under ρ-zCDP the rule uses ``ε = 2·sqrt(ρ)``, whose Laplace noise has the same
variance as the discrete Gaussian's (``σ² = k²/(2ρ)``).

``N`` is data: unless the curator types a *public* number of points, a share
of ε (default 5 %) buys a noisy count ``N̂`` first (discrete Laplace, sensitivity
``k``), and the remaining budget goes to the grid (sequential composition).
The m x m blocks are unions of the curator's fine cells (edges rounded to the
fine grid), so every mechanism releases rectangles of the same public grid.
"""

from __future__ import annotations

import math
from typing import Any

from dpcore.data.domain import Aggregate, Grid, block_edges, block_rects, block_sums
from dpcore.errors import ParameterError
from dpcore.points.mechanisms.base import (
    Param,
    PointsMechanism,
    count_level,
    equivalent_epsilon,
    noisy_counts,
    noisy_point_count,
    part,
)
from dpcore.points.release import LevelPlan, PartitionRelease
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.calibration import split_custom
from dpcore.privacy.noise import NoiseSource


class UniformGrid(PointsMechanism):
    name = "ug"
    title = "UG (uniform grid sized from the data volume)"
    summary = "Counts on a coarser regular grid whose size is chosen from the number of points and ε."
    when_to_use = (
        "A strong, simple default for moderately spread data; the grid gets finer as there are "
        "more points or more budget."
    )
    reference = "Qardaji, Yang & Li, 'Differentially private grids for geospatial data', ICDE 2013"
    needs_n_guess = True
    params = (
        Param("c", "Constant c", float, 10.0,
              "c in m = sqrt(N·ε/c); the paper's value is 10. Larger c gives a coarser grid.",
              minimum=1.0, maximum=1000.0, advanced=True),
        Param("count_share", "Share of ε for counting the points", float, 0.05,
              "Part of the budget spent on a noisy number of points, which sizes the grid. "
              "Not used when a public number of points is given.",
              minimum=0.001, maximum=0.5, advanced=True),
        Param("public_n", "Public number of points (0 = estimate privately)", int, 0,
              "Only if the number of points is already public (e.g. published elsewhere); "
              "then sizing the grid costs nothing.", minimum=0, advanced=True),
    )

    # -- helpers ---------------------------------------------------------------------
    @staticmethod
    def grid_side(n: float, epsilon: float, c: float, sensitivity: int, grid: Grid) -> int:
        """m = sqrt(N·ε/(c·k)), at least 1 and at most the fine grid's side."""
        m = math.sqrt(max(n, 0.0) * epsilon / (c * sensitivity))
        return int(max(1, min(round(m), grid.rows, grid.cols)))

    def _budgets(self, cost: PrivacyCost, params: dict[str, Any]) -> tuple[PrivacyCost | None, PrivacyCost]:
        """Budget of the point count (None with a public N) and of the grid; they add up."""
        if params["public_n"] > 0:
            return None, cost
        # split_custom guarantees the parts never add up to more than the total (a plain
        # subtraction v - v_n can round so that v_n + (v - v_n) > v by one ulp)
        v_n, v_g = split_custom(cost.value, [params["count_share"], 1 - params["count_share"]])
        return part(cost, v_n), part(cost, v_g)

    # -- plan --------------------------------------------------------------------
    def plan_levels(
        self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], *, sensitivity: int, n_estimate: float | None
    ) -> tuple[LevelPlan, ...]:
        e_n, e_g = self._budgets(cost, params)
        n = params["public_n"] if params["public_n"] > 0 else n_estimate
        if n is None:
            raise ParameterError(
                "UG sizes its grid from the number of points. Give a rough public guess of the "
                "number of points to preview its error (it is used only for the preview)."
            )
        m = self.grid_side(float(n), equivalent_epsilon(e_g), params["c"], sensitivity, grid)
        return self._levels(grid, e_n, e_g, m, sensitivity)

    def _levels(self, grid: Grid, e_n: PrivacyCost | None, e_g: PrivacyCost, m: int,
                sensitivity: int) -> tuple[LevelPlan, ...]:
        levels: list[LevelPlan] = []
        if e_n is not None:
            levels.append(count_level(0, "Number of points (sizes the grid)", e_n, sensitivity, 1,
                                      float(grid.n_cells), False,
                                      note="Published with the release; not used to answer queries."))
        levels.append(count_level(len(levels), f"Grid of {m} x {m} blocks", e_g, sensitivity, m * m,
                                  grid.n_cells / (m * m), True))
        return tuple(levels)

    # -- release -------------------------------------------------------------------
    def _release(
        self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: NoiseSource
    ) -> PartitionRelease:
        grid = aggregate.grid
        k = aggregate.sensitivity
        e_n, e_g = self._budgets(cost, params)
        public: dict[str, Any] = {}
        n_hat = noisy_point_count(aggregate, e_n, params, noise, public)
        m = self.grid_side(float(n_hat), equivalent_epsilon(e_g), params["c"], k, grid)
        public["grid_side"] = m
        levels = self._levels(grid, e_n, e_g, m, k)
        rects = block_rects(grid, m, m)
        # the blocks' true counts in block_rects' order, by one pass over the cells (no prefix sums)
        true = block_sums(aggregate.counts, block_edges(grid.rows, m), block_edges(grid.cols, m)).ravel()
        noisy = noisy_counts(true, e_g, k, noise)
        return self.flat_release(aggregate, cost, params, levels, rects, noisy, public)
