"""Matrix mechanism: the adaptive Eigen-Design of Li & Miklau (PVLDB 5(6), 2012) on the grid.

The curator picks a public *workload* of range queries (all 2-D rectangles of the grid, a seeded
set of random rectangles, or prefixes / all ranges on a 1 × n grid).  A strategy ``A`` tuned to
that workload is designed from the workload alone (:func:`dpcore.matrix_mech.cached_strategy`,
never from the data, so designing it costs no budget).  The release answers ``y = A x + z``
with exact discrete noise, and publishes the least-squares cell estimates ``x̂ = A⁺ y`` as a
partition of the grid (one rectangle per cell) plus the workload answers ``W x̂`` with their
analytic standard errors (spec ``matrix-mechanism.md`` §1.5, §6).

Privacy: ρ-zCDP with the discrete Gaussian on a fine grid (as :func:`dpcore.matrix_mech.release`
does), or pure ε-DP with discrete Laplace noise on an L1 strategy (the Eigen-Design is dense and
bad under L1 sensitivity, so the fallback of §7.3 is used and the release says so).  One unit of
privacy changes the counts by at most ``k`` in L1 (so at most ``k·Δ(A)`` in the strategy
answers): the budget given to :func:`matrix_mech.release` is ``ρ/k²`` or ``ε/k``.

Size: all 2-D rectangles use the per-axis (Kronecker) Eigen-Design, so no ``n × n`` matrix is
formed; grids above :data:`MAX_CELLS` cells are refused (the strategy answers and their exact
noise would take too long to draw).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpcore import matrix_mech as mm
from dpcore.budget import PrivacyCost, gaussian_sigma_for_rho, laplace_scale_for_epsilon
from dpcore.domain import Aggregate, Grid, block_rects
from dpcore.errors import ParameterError
from dpcore.mechanisms.base import Budget, Param, PointMechanism, rect_bounds, rect_cells
from dpcore.noise import NoiseSource, discrete_gaussian_variance, discrete_laplace_variance
from dpcore.release import DEFAULT_QUERY_SIZES, LevelPlan, PartitionRelease

#: Largest grid (cells) the matrix mechanism releases.
MAX_CELLS = 256 * 256
#: Most workload answers kept in a release and written to ``workload_answers.csv``.
MAX_LISTED_ANSWERS = 300_000
WORKLOADS = ("ranges_2d", "random_rectangles", "prefix", "ranges_1d")
WORKLOAD_LABELS = {
    "ranges_2d": "all rectangles of the grid",
    "random_rectangles": "random rectangles (seeded, public)",
    "prefix": "prefixes (cumulative counts) of a 1 × n grid",
    "ranges_1d": "all ranges of a 1 × n grid",
}
_GRID_SLACK = 1e-6  # as matrix_mech.release's default


def _full_rank(s: mm.Strategy) -> bool:
    """Full column rank: the factor of X⁺ dropped no null space (memoised per strategy)."""
    return all(f.gram_pinv()[2].shape[1] == 0 for f in (s.factors or (s,)))


def _unit_budget(cost: PrivacyCost, k: int) -> float:
    """The budget for a sensitivity-1 change (ρ/k² or ε/k), never rounded up."""
    div = k * k if cost.definition == "zcdp" else k
    v = cost.value / div
    while Fraction(v) * div > Fraction(cost.value):
        v = math.nextafter(v, 0.0)
    return v


class MatrixMechanism(PointMechanism):
    name = "matrix"
    title = "Matrix mechanism (Eigen-Design, tuned to your queries)"
    summary = (
        "Answers a set of range queries you choose with noise designed for exactly those queries, "
        "and publishes the cell estimates and the query answers with their standard errors."
    )
    when_to_use = (
        "When you know which area counts people will ask for (all rectangles, or rectangles of "
        "a typical size) and want the smallest error for them. Works best under ρ-zCDP; under "
        "pure ε-DP a simpler strategy is used."
    )
    reference = ("Li & Miklau, 'An adaptive mechanism for accurate query answering under "
                 "differential privacy', PVLDB 5(6), 2012")
    params = (
        Param("workload", "Queries to optimise for", str, "ranges_2d",
              "all rectangles of the grid; random rectangles of one size; prefixes or all ranges "
              "(only for a grid of 1 row or 1 column).", choices=WORKLOADS,
              choice_labels=tuple(WORKLOAD_LABELS[w] for w in WORKLOADS)),
        Param("rect_area", "Random rectangles: share of the grid's area", float, 0.1,
              "Each random rectangle covers about this share of the area (same shape as the grid).",
              minimum=0.0001, maximum=1.0, shown_if=("workload", "random_rectangles")),
        Param("rect_count", "Random rectangles: how many", int, 200,
              "Number of random rectangles in the workload.", minimum=1, maximum=5000,
              shown_if=("workload", "random_rectangles")),
        Param("rect_seed", "Random rectangles: seed (public)", int, 0,
              "The rectangles are public and drawn from this seed; they do not depend on the data.",
              minimum=0, advanced=True, shown_if=("workload", "random_rectangles")),
    )

    # -- workload and strategy (public inputs only) ----------------------------------------
    def workload(self, grid: Grid, params: dict[str, Any]) -> mm.Workload:
        """The public workload over the grid's cells (row-major), refused on a too-large grid."""
        if grid.n_cells > MAX_CELLS:
            raise ParameterError(
                f"The matrix mechanism handles grids of at most {MAX_CELLS:,} cells (e.g. 256 × 256); "
                f"this grid has {grid.rows:,} × {grid.cols:,} = {grid.n_cells:,}. Choose a coarser grid "
                "on the Data page, or another mechanism."
            )
        w = params["workload"]
        if w == "ranges_2d":
            return mm.range_2d_workload(grid.rows, grid.cols)
        if w == "random_rectangles":
            a = math.sqrt(params["rect_area"])
            size = (max(1, min(grid.rows, round(a * grid.rows))), max(1, min(grid.cols, round(a * grid.cols))))
            return mm.random_rectangles_workload(grid.rows, grid.cols, [size], params["rect_count"],
                                                 seed=params["rect_seed"])
        if grid.rows != 1 and grid.cols != 1:
            raise ParameterError(
                f"The workload '{w}' is for a grid of one row or one column (this grid is "
                f"{grid.rows} × {grid.cols}). Use 'ranges_2d' or 'random_rectangles'."
            )
        return mm.prefix_workload(grid.n_cells) if w == "prefix" else mm.all_range_workload(grid.n_cells)

    def prepare(self, grid: Grid, budget: Budget, params: dict[str, Any] | None
                ) -> tuple[PrivacyCost, dict[str, Any]]:
        """Also refuses a grid or workload the mechanism cannot handle, before anything is spent."""
        cost, p = super().prepare(grid, budget, params)
        self.workload(grid, p)
        return cost, p

    def strategy(self, workload: mm.Workload, cost: PrivacyCost) -> mm.Strategy:
        """The workload's strategy, which must have full column rank: the release publishes an
        estimate of every cell, and a cell the strategy cannot see would be published as
        unbounded noise (spec §7.2 P9; a flat design for 10 rectangles on 32 × 32 had cells at
        ±20,900 for true counts of 100).  A flat design that misses cells is replaced by the
        per-axis (Kronecker) design, which covers every cell; if even that misses some, the
        release is refused before anything is spent (the rank is public: workload only)."""
        pure = cost.definition == "pure"
        s = mm.cached_strategy(workload, pure_dp=pure)
        if not _full_rank(s) and len(workload.shape) == 2 and not s.factors:
            s = mm.cached_strategy(workload, method="kron", pure_dp=pure)
        if not _full_rank(s):
            raise ParameterError(
                "The strategy for this workload cannot estimate every cell of the grid, so the cell "
                "counts could not be published. Choose 'all rectangles of the grid', or more random "
                "rectangles."
            )
        return s

    @staticmethod
    def _noise(strategy: mm.Strategy, cost: PrivacyCost, k: int) -> tuple[str, float, float, float]:
        """(distribution, scale, exact variance of one strategy answer, effective sensitivity),
        computed exactly as :func:`matrix_mech.release` calibrates (counts are integers)."""
        unit = _unit_budget(cost, k)
        if cost.definition == "pure":
            sens = strategy.l1_sensitivity
            integral = all(np.all(f.A == np.round(f.A)) for f in (strategy.factors or (strategy,)))
            if integral:
                scale = laplace_scale_for_epsilon(unit, sens)
                return "discrete_laplace", float(scale), float(discrete_laplace_variance(scale)), sens
            g = mm._grid_exponent(sens, strategy.max_column_support, _GRID_SLACK)
            eff = sens + strategy.max_column_support * 2.0**g
            scale = laplace_scale_for_epsilon(unit, eff)
            var = discrete_laplace_variance(scale / Fraction(2) ** g) * 4.0**g
            return "discrete_laplace_grid", float(scale), float(var), eff
        sens = strategy.l2_sensitivity
        g = mm._grid_exponent(sens, strategy.max_column_support, _GRID_SLACK)
        eff = sens + math.sqrt(strategy.max_column_support) * 2.0**g
        sigma = gaussian_sigma_for_rho(unit, eff)
        var = discrete_gaussian_variance(Fraction(sigma) / Fraction(2) ** g) * 4.0**g
        return "discrete_gaussian", float(sigma), float(var), eff

    @staticmethod
    def _cell_quadforms(strategy: mm.Strategy) -> np.ndarray:
        """``diag(X⁺)``: the variance of each cell estimate per unit noise variance."""
        if strategy.factors:
            d = np.ones(1)
            for f in strategy.factors:
                d = np.kron(d, (f.whiten(np.eye(f.n)) ** 2).sum(axis=0))
            return d
        return (strategy.whiten(np.eye(strategy.n)) ** 2).sum(axis=0)

    @staticmethod
    def _rect_quadform(strategy: mm.Strategy, grid: Grid, rect: tuple[int, int, int, int]) -> float:
        """``q X⁺ qᵀ`` for the indicator ``q`` of a rectangle of cells (Kronecker: per axis)."""
        r0, r1, c0, c1 = rect_bounds(rect)
        rows = ((np.arange(grid.rows) >= r0) & (np.arange(grid.rows) < r1)).astype(float)
        cols = ((np.arange(grid.cols) >= c0) & (np.arange(grid.cols) < c1)).astype(float)
        if strategy.factors and len(strategy.factors) == 2:
            a, b = strategy.factors
            return float((a.whiten(rows[None, :]) ** 2).sum() * (b.whiten(cols[None, :]) ** 2).sum())
        q = np.kron(rows, cols)[None, :]
        return float((strategy.whiten(q) ** 2).sum())

    def summary_of(self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], sensitivity: int) -> dict[str, Any]:
        """Data-free preview: workload, strategy, expected RMSE per query, SVD lower bound, ratio."""
        w = self.workload(grid, params)
        s = self.strategy(w, cost)
        rep = mm.error_report(w, s)
        dist, scale, var, eff = self._noise(s, cost, sensitivity)
        per_unit = math.sqrt(var) / s.sensitivity()  # sqrt(P)/Δ: answers' SD per sqrt(q X⁺ qᵀ)
        notes = []
        if cost.definition == "pure":
            notes.append(
                "Pure ε-DP: the Eigen-Design strategy is tuned for Gaussian noise and has a large L1 "
                f"sensitivity, so a simpler L1 strategy ({s.kind}"
                f"{'-' + s.factors[0].kind if s.factors else ''}) is used instead (spec §7.3). "
                "Choose ρ-zCDP for the tuned strategy."
            )
        return {
            "workload": params["workload"],
            "workload_name": w.name,
            "n_queries": int(w.m),
            "strategy": s.kind + (f"-{s.factors[0].kind}" if s.factors else ""),
            "strategy_queries": int(s.p),
            "pure_dp_fallback": cost.definition == "pure",
            "noise": dist,
            "noise_scale": scale,
            "noise_variance": var,
            "effective_sensitivity": eff * sensitivity,
            "expected_rmse_per_query": rep["rmse_per_sqrt_p"] * per_unit,
            "rmse_lower_bound": rep["rmse_lower_bound_per_sqrt_p"] * per_unit,
            "ratio_to_lower_bound": rep["ratio_rmse"],
            "notes": notes,
        }

    # -- plan --------------------------------------------------------------------------------
    def _level(self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], sensitivity: int
               ) -> tuple[LevelPlan, np.ndarray]:
        info = self.summary_of(grid, cost, params, sensitivity)
        w = self.workload(grid, params)
        s = self.strategy(w, cost)
        cell_sd = np.sqrt(info["noise_variance"] * self._cell_quadforms(s))
        sd = float(np.sqrt(np.mean(cell_sd**2)))
        exact = {}
        for f in DEFAULT_QUERY_SIZES:  # a centred rectangle of that share of the area, grid-shaped
            h = max(1, min(grid.rows, round(math.sqrt(f) * grid.rows)))
            wd = max(1, min(grid.cols, round(math.sqrt(f) * grid.cols)))
            r0, c0 = (grid.rows - h) // 2, (grid.cols - wd) // 2
            q = self._rect_quadform(s, grid, (r0, r0 + h, c0, c0 + wd))
            exact[f"{f:g}"] = math.sqrt(info["noise_variance"] * q)
        lv = LevelPlan(
            level=0,
            name=f"Cell estimates of a {grid.rows:,} x {grid.cols:,} grid from {info['strategy_queries']:,} "
                 "strategy queries",
            cost=cost,
            noise=info["noise"],
            scale=info["noise_scale"],
            sensitivity=int(sensitivity),
            n_counts=grid.n_cells,
            sd=sd,
            ci95=1.96 * sd,
            cells_per_count=1.0,
            in_partition=True,
            note="Noise is added to the strategy queries; the cell estimates are their least-squares "
                 "solution, so the SD per cell is its root mean square over the cells.",
            extra={"matrix": info, "range_query_sd_exact": exact},
        )
        return lv, cell_sd

    def _plan(
        self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], *, sensitivity: int, n_estimate: float | None
    ) -> tuple[LevelPlan, ...]:
        return (self._level(grid, cost, params, sensitivity)[0],)

    def query_error(self, grid: Grid, epsilon: Budget, params: dict[str, Any], rect: tuple[int, int, int, int],
                    *, sensitivity: int = 1, n_estimate: float | None = None) -> dict[str, Any]:
        """Exact: ``Var = Var(z) · q X⁺ qᵀ`` for the rectangle's indicator ``q``."""
        cost, p = self.prepare(grid, epsilon, params)
        w = self.workload(grid, p)
        s = self.strategy(w, cost)
        var = self._noise(s, cost, sensitivity)[2]
        return {"sd": math.sqrt(var * self._rect_quadform(s, grid, rect)), "cells": rect_cells(rect),
                "exact": True}

    # -- release -------------------------------------------------------------------------------
    def _release(
        self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: NoiseSource
    ) -> PartitionRelease:
        grid = aggregate.grid
        k = aggregate.sensitivity
        lv, cell_sd = self._level(grid, cost, params, k)
        info = dict(lv.extra["matrix"])
        w = self.workload(grid, params)
        s = self.strategy(w, cost)
        unit = _unit_budget(cost, k)
        budget = {"rho": unit} if cost.definition == "zcdp" else {"epsilon": unit}
        res = mm.release(w, s, aggregate.counts.reshape(-1), noise, **budget)
        notes = list(info["notes"]) + [n for n in res.notes if not n.startswith("Pure ε-DP")]
        if not res.x_hat_unbiased:
            notes.append("The strategy does not have full column rank: the cell estimates are not "
                         "unbiased; use the workload answers.")
        info["notes"] = notes
        info["guarantee"] = (f"{cost.label()} for one unit of privacy (strategy noise calibrated as "
                             f"{res.guarantee}, sensitivity × {k})")
        details: dict[str, Any] = {"matrix": info}
        if res.answers is not None and w.m <= MAX_LISTED_ANSWERS:
            details["workload_answers"] = {
                "rects": self._workload_rects(w, grid),
                "answer": np.asarray(res.answers, dtype=np.float64),
                "standard_error": np.asarray(res.standard_errors, dtype=np.float64),
            }
        else:
            info["notes"].append(f"The {w.m:,} workload answers are too many to list; sum the cell "
                                 "estimates over any rectangle instead.")
        rects = block_rects(grid, grid.rows, grid.cols)  # one rectangle per cell, row-major
        n = grid.n_cells
        return self.make_release(
            aggregate, cost, params, (lv,),
            rects=np.asarray(rects, dtype=np.int64),
            level=np.zeros(n, dtype=np.int64),
            leaf=np.ones(n, dtype=bool),
            noisy=np.asarray(res.x_hat, dtype=np.float64),
            sd=cell_sd,
            ci95=1.96 * cell_sd,
            public={"workload": info["workload_name"], "strategy": info["strategy"]},
            details=details,
        )

    @staticmethod
    def _workload_rects(w: mm.Workload, grid: Grid) -> np.ndarray:
        """``(r0, r1, c0, c1)`` of every workload query, in the order of ``W``'s rows."""
        if w.rects is not None:
            return np.asarray(w.rects, dtype=np.int64)
        if w.factors:
            a1, b1 = np.triu_indices(grid.rows)
            a2, b2 = np.triu_indices(grid.cols)
            i, j = np.divmod(np.arange(w.m), a2.size)
            return np.stack([a1[i], b1[i] + 1, a2[j], b2[j] + 1], axis=1).astype(np.int64)
        n = grid.n_cells
        if w.spec.get("family") == "prefix":
            a, b = np.zeros(n, dtype=np.int64), np.arange(n)
        else:
            a, b = np.triu_indices(n)
        lo, hi = a.astype(np.int64), b.astype(np.int64) + 1
        zero, one = np.zeros_like(lo), np.ones_like(lo)
        if grid.rows == 1:
            return np.stack([zero, one, lo, hi], axis=1)
        return np.stack([lo, hi, zero, one], axis=1)
