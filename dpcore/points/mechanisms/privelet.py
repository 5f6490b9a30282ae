"""Privelet on a location grid: noise on the 2-D Haar wavelet coefficients.

Xiao, Wang & Gehrke (ICDE 2010 / TKDE 2011).
The frequency matrix's row and column indices are two ordinal Haar axes
(standard decomposition, spec D2), each zero-padded at the high end to a power
of two.  With ``l_r``, ``l_c`` levels the generalised sensitivity is
``ρ = (1 + l_r)(1 + l_c)`` and coefficient ``c`` gets Laplace noise of magnitude
``λ / W(c)`` with ``λ = k ρ (1 + η) / ε`` (``k`` records per person at most, the
project's add/remove unit of privacy; η = 2^-10 pays for the rounding of the
real coefficients to the noise grid, see :mod:`dpcore.estimate.privelet`).  Noise is
exact discrete Laplace on power-of-two grids (``NoiseSource.laplace_on_grid``).

Privelet+ (Xiao, Wang & Gehrke 2010, Sec. VI) leaves an axis untransformed (identity, weight 1, P = 1);
the ``transform`` parameter picks the axes.  ``auto`` transforms an axis when its
padded length is at least 256, where exact Haar beats identity on the worst
range (Xiao, Wang & Gehrke 2010, Sec. IV–VI); the rule uses the public grid only.

The noisy cells are real, unbiased and **correlated**: the error of a range
query is *not* the sum of its cells' variances.  Exact range-query SDs are in
the plan's ``extra["range_query_sd_exact"]`` (centred squares of 2 %, 6 %, 10 %
of the area); ``LevelPlan.query_sd``'s uniform-spread formula does not apply.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from dpcore.core.mechanism import Plan
from dpcore.data.domain import Aggregate, Grid, block_rects
from dpcore.estimate import privelet as pv
from dpcore.points.mechanisms.base import Param, PointsMechanism, rect_bounds, rect_cells
from dpcore.points.release import DEFAULT_QUERY_SIZES, LevelPlan, PartitionRelease
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.calibration import interval_half_width
from dpcore.privacy.noise import NoiseSource

#: padded axis length from which ``auto`` applies the Haar transform (Xiao, Wang & Gehrke 2010, Sec. IV–VI)
AUTO_MIN_PADDED = 256


@functools.lru_cache(maxsize=64, typed=True)
def _noise_facts(grid: Grid, t_rows: bool, t_cols: bool, eps: float, sensitivity: int) -> tuple[Any, ...]:
    """The plan's data-free noise facts: λ, a cell's SD, the query sizes' and the total's exact SDs,
    the generalized sensitivity, the transformed axes and the padded shape.  Public inputs only,
    kept per set of them (every release of a plan made them again: a third of a 2 × 2 release)."""
    axes = (pv.Axis.ordinal("row", grid.rows, transform=t_rows), pv.Axis.ordinal("col", grid.cols, transform=t_cols))
    lam = pv.noise_magnitude(axes, eps, sensitivity=sensitivity)
    cell_sd = math.sqrt(pv.query_variance(axes, eps, [(0, 1), (0, 1)], sensitivity=sensitivity))
    exact = tuple(
        (f"{s:g}", math.sqrt(pv.query_variance(axes, eps, Privelet.square_query(grid, s), sensitivity=sensitivity)))
        for s in DEFAULT_QUERY_SIZES
    )
    total_sd = math.sqrt(pv.query_variance(axes, eps, [(0, grid.rows), (0, grid.cols)], sensitivity=sensitivity))
    return (lam, cell_sd, exact, total_sd, pv.generalized_sensitivity(axes),
            tuple(a.name for a in axes if a.transform), tuple(a.n_coefficients for a in axes))


class Privelet(PointsMechanism):
    name = "privelet"
    title = "Privelet (Haar wavelets)"
    summary = (
        "Adds noise to the 2-D Haar wavelet coefficients of the whole grid, so large range "
        "queries get far less noise than summing noisy cells."
    )
    when_to_use = (
        "Fine grids (about 256 cells per side or more) queried with medium to large rectangles: "
        "range error grows only polylogarithmically with the grid size. Single cells are noisier "
        "than with Identity; on small grids Identity (or Privelet+ on one axis) is better."
    )
    reference = (
        "Xiao, Wang & Gehrke, 'Differential Privacy via Wavelet Transforms', ICDE 2010 "
        "(extended in IEEE TKDE 2011)"
    )
    definitions = ("pure",)
    is_tree = False
    params = (
        Param("transform", "Axes to transform (Privelet+)", str, "both",
              "Which grid axes get the Haar transform; the others are left as they are "
              "(Privelet+). 'auto' transforms an axis with 256 or more (padded) cells.",
              choices=("both", "rows", "columns", "auto")),
    )

    # -- helpers ---------------------------------------------------------------------------
    @staticmethod
    def axes(grid: Grid, params: dict[str, Any]) -> tuple[pv.Axis, pv.Axis]:
        """The two ordinal axes (rows, columns) with the chosen transforms."""
        mode = params.get("transform", "both")
        if mode == "auto":
            t_rows = 1 << (grid.rows - 1).bit_length() >= AUTO_MIN_PADDED
            t_cols = 1 << (grid.cols - 1).bit_length() >= AUTO_MIN_PADDED
        else:
            t_rows = mode in ("both", "rows")
            t_cols = mode in ("both", "columns")
        return (pv.Axis.ordinal("row", grid.rows, transform=t_rows),
                pv.Axis.ordinal("col", grid.cols, transform=t_cols))

    @staticmethod
    def square_query(grid: Grid, fraction: float) -> tuple[tuple[int, int], tuple[int, int]]:
        """The centred square-ish query covering ``fraction`` of the area (side sqrt(s) per axis)."""
        side = math.sqrt(fraction)
        h = min(grid.rows, max(1, round(side * grid.rows)))
        w = min(grid.cols, max(1, round(side * grid.cols)))
        r0 = (grid.rows - h) // 2
        c0 = (grid.cols - w) // 2
        return (r0, r0 + h), (c0, c0 + w)

    # -- plan --------------------------------------------------------------------------------
    def plan_levels(
        self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], *, sensitivity: int, n_estimate: float | None
    ) -> tuple[LevelPlan, ...]:
        rows, cols = self.axes(grid, params)
        key = (grid, rows.transform, cols.transform, cost.value, sensitivity)
        lam, cell_sd, exact, total_sd, gen_sens, transformed, padded = _noise_facts(*key)
        extra = {
            "generalized_sensitivity": gen_sens,
            "lambda": lam,
            "transformed_axes": list(transformed),
            "padded_shape": list(padded),
            "range_query_sd_exact": dict(exact),
            "total_count_sd_exact": total_sd,
            "rounding_share": float(pv.ROUNDING_SHARE),
            "correlated_cells": True,
        }
        name = (f"Grid of {grid.rows:,} x {grid.cols:,} cells "
                f"(Haar on {', '.join(transformed) if transformed else 'no axis'})")
        return (
            LevelPlan(
                level=0,
                name=name,
                cost=cost,
                noise="discrete_laplace_grid",
                scale=lam,
                sensitivity=int(sensitivity),
                n_counts=grid.n_cells,
                sd=cell_sd,
                # a cell is a weighted sum of Laplace coefficients in which one may dominate: the
                # single-Laplace 95 % point (ln 20/√2 SDs), the larger end of the range (ours)
                ci95=interval_half_width("laplace", cell_sd),
                cells_per_count=1.0,
                in_partition=True,
                note=("Cell noises are correlated: use details.range_query_sd_exact for range "
                      "queries, not the per-cell SD. The 95 % half-width is approximate "
                      "(ln 20 / sqrt 2 SDs)."),
                extra=extra,
            ),
        )

    def query_error(self, plan: Plan, rect: tuple[int, int, int, int]) -> dict[str, Any]:
        """Exact, data-free noise SD of the query over cells ``rect`` (ours)."""
        r0, r1, c0, c1 = rect_bounds(rect)
        var = pv.query_variance(self.axes(plan.domain, plan.params), plan.cost.value, [(r0, r1), (c0, c1)],
                                sensitivity=plan.unit.contribution)
        return {"sd": math.sqrt(var), "cells": rect_cells(rect), "exact": True}

    # -- release -------------------------------------------------------------------------------
    def _release(
        self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: NoiseSource
    ) -> PartitionRelease:
        grid = aggregate.grid
        k = aggregate.sensitivity
        levels = self.plan_levels(grid, cost, params, sensitivity=k, n_estimate=None)
        axes = self.axes(grid, params)
        rel = pv.release(aggregate.counts, axes, cost.value, noise, sensitivity=k)
        rects = block_rects(grid, grid.rows, grid.cols)  # one rectangle per cell, row-major
        public = {
            "lambda": rel.lam,
            "generalized_sensitivity": levels[0].extra["generalized_sensitivity"],
            "finest_granularity_exp": rel.granularity_exp,
            "transformed_axes": levels[0].extra["transformed_axes"],
        }
        return self.flat_release(aggregate, cost, params, levels, rects, rel.noisy.ravel(), public)
