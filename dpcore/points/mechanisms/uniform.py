"""Uniform: one noisy total, spread evenly over the domain.

The total count has L1 sensitivity ``k`` (the cap on records per person), so
discrete Laplace noise of scale ``k/ε`` makes it ε-DP.  Every query is answered
as its area share of the noisy total.  Its noise error is tiny; its error comes
from assuming the data are uniform, which the analytic preview cannot know.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpcore.core.mechanism import Plan
from dpcore.data.domain import Aggregate, Grid
from dpcore.points.mechanisms.base import (
    PointsMechanism,
    count_level,
    noisy_counts,
    rect_cells,
)
from dpcore.points.release import LevelPlan, PartitionRelease
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.noise import NoiseSource


class Uniform(PointsMechanism):
    name = "uniform"
    title = "Uniform (one noisy total)"
    summary = "Releases only the noisy total number of points and assumes they are spread evenly."
    when_to_use = (
        "A floor for comparison: very accurate for the total, useless where the data are clustered."
    )
    reference = "Baseline in Qardaji, Yang & Li (ICDE 2013) and Shaham et al. (HTF, SIGSPATIAL 2021)"
    params = ()

    def plan_levels(
        self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], *, sensitivity: int, n_estimate: float | None
    ) -> tuple[LevelPlan, ...]:
        return (
            count_level(
                0,
                "Total number of points",
                cost,
                sensitivity,
                1,
                float(grid.n_cells),
                True,
                note="The error from assuming uniform data is not included; it depends on the data.",
            ),
        )

    def query_error(self, plan: Plan, rect: tuple[int, int, int, int]) -> dict[str, Any]:
        """Exact noise part: the query takes its area share of the one noisy total."""
        cells = rect_cells(rect)
        lv = plan.inner[0]
        return {"sd": lv.sd * cells / plan.domain.n_cells, "cells": cells, "exact": True}

    def _release(
        self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: NoiseSource
    ) -> PartitionRelease:
        grid = aggregate.grid
        levels = self.plan_levels(grid, cost, params, sensitivity=aggregate.sensitivity, n_estimate=None)
        total = np.array([aggregate.total], dtype=np.int64)
        noisy = noisy_counts(total, cost, aggregate.sensitivity, noise)
        rects = np.array([[0, grid.rows, 0, grid.cols]], dtype=np.int64)
        return self.flat_release(aggregate, cost, params, levels, rects, noisy,
                                 public={"noisy_total": int(noisy[0])})
