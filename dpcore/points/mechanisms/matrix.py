"""Matrix mechanism: the adaptive Eigen-Design of Li & Miklau (PVLDB 5(6), 2012) on the grid.

The curator picks a public *workload* of range queries (all 2-D rectangles of the grid, a seeded
set of random rectangles, prefixes / all ranges on a 1 × n grid, or an uploaded CSV of lon/lat
rectangles, :mod:`dpcore.points.workload_io`, mapped to the cells whose centres they contain).  A strategy ``A`` tuned to
that workload is designed from the workload alone (:func:`dpcore.estimate.matrix_cache.cached_strategy`,
never from the data, so designing it costs no budget).  The release answers ``y = A x + z``
with exact discrete noise, and publishes the least-squares cell estimates ``x̂ = A⁺ y`` as a
partition of the grid (one rectangle per cell) plus the workload answers ``W x̂`` with their
analytic standard errors (Li & Miklau 2012, Sec. 2.3–2.4, Prop. 3).

Privacy: ρ-zCDP with the discrete Gaussian on a fine grid (as :func:`dpcore.estimate.matrix_release.release`
does), or pure ε-DP with discrete Laplace noise on an L1 strategy (the Eigen-Design is dense and
bad under L1 sensitivity, so the fallback of §7.3 is used and the release says so).  One unit of
privacy changes the counts by at most ``k`` in L1 (so at most ``k·Δ(A)`` in the strategy
answers): the budget given to :func:`matrix_release.release` is ``ρ/k²`` or ``ε/k``.

Size: all 2-D rectangles use the per-axis (Kronecker) Eigen-Design, so no ``n × n`` matrix is
formed; grids above :data:`MAX_CELLS` cells are refused (the strategy answers and their exact
noise would take too long to draw).  The design of a workload (strategy, its full-rank check,
error report, cell variances) is memoised per (workload hash, privacy definition) in this
process, so a plan followed by a release loads the cached strategy once; it holds public
inputs only (the workload), never data.
"""

from __future__ import annotations

import copy
import hashlib
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpcore.core.mechanism import Plan
from dpcore.data.domain import Aggregate, Grid, block_rects
from dpcore.errors import DPCoreError, ParameterError
from dpcore.estimate import (
    matrix_cache,
    matrix_errors,
    matrix_release,
    matrix_report,
    matrix_strategy,
    matrix_workload,
)
from dpcore.points.mechanisms.base import Param, PointsMechanism, rect_bounds, rect_cells
from dpcore.points.release import DEFAULT_QUERY_SIZES, LevelPlan, PartitionRelease
from dpcore.points.workload_io import RectangleList, map_to_grid
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.calibration import interval_half_width
from dpcore.privacy.noise import NoiseSource

#: Largest grid (cells) the matrix mechanism releases.
MAX_CELLS = 256 * 256
#: Most workload answers kept in a release and written to ``workload_answers.csv``.
MAX_LISTED_ANSWERS = 300_000
WORKLOADS = ("ranges_2d", "random_rectangles", "prefix", "ranges_1d", "uploaded")
WORKLOAD_LABELS = {
    "ranges_2d": "all rectangles of the grid",
    "random_rectangles": "random rectangles (seeded, public)",
    "prefix": "prefixes (cumulative counts) of a 1 × n grid",
    "ranges_1d": "all ranges of a 1 × n grid",
    "uploaded": "uploaded rectangles (a CSV of lon/lat boxes)",
}
#: How an uploaded rectangle becomes cells (stated in the plan and the release record).
CELL_RULE = ("cells whose centres lie in the rectangle, half-open: west <= lon < east and "
             "south <= lat < north; parts outside the grid's area are clipped")
_MEMO_SIZE = 4  # designs kept (a flat 4,096-cell strategy is ~130 MB)


def _unit_budget(cost: PrivacyCost, k: int) -> float:
    """The budget for a sensitivity-1 change (ρ/k² or ε/k), never rounded up."""
    div = k * k if cost.definition == "zcdp" else k
    v = cost.value / div
    while Fraction(v) * div > Fraction(cost.value):
        v = math.nextafter(v, 0.0)
    return v


def _budget_kwargs(cost: PrivacyCost, k: int) -> dict[str, float]:
    """What :func:`matrix_release.calibrate`/``release`` take for one unit of privacy of ``k`` records."""
    unit = _unit_budget(cost, k)
    return {"rho": unit} if cost.definition == "zcdp" else {"epsilon": unit}


def _svd_bound(w: matrix_workload.Workload) -> float:
    """``svdb`` of the workload (as :func:`matrix_errors.svd_bound`), through cheaper routes where
    they exist: the prefix spectrum in closed form, ``σ_k = 1 / (4 sin²((2k−1)π / (2(2n+1))))``
    (the inverse of ``L Lᵀ`` is the tridiagonal second difference), and for a short list of
    rectangles the ``m × m`` Gram ``W Wᵀ`` of their overlaps (same nonzero eigenvalues as ``WᵀW``)."""
    import scipy.linalg as sl

    if w.spec.get("family") == "prefix":
        k = np.arange(1, w.n + 1)
        ev = 1.0 / (4.0 * np.sin((2 * k - 1) * np.pi / (2 * (2 * w.n + 1))) ** 2)
    elif w.rects is not None and w.m < w.n:
        r = np.asarray(w.rects, dtype=np.int64)
        h = np.clip(np.minimum.outer(r[:, 1], r[:, 1]) - np.maximum.outer(r[:, 0], r[:, 0]), 0, None)
        v = np.clip(np.minimum.outer(r[:, 3], r[:, 3]) - np.maximum.outer(r[:, 2], r[:, 2]), 0, None)
        ev = sl.eigh((h * v).astype(np.float64), eigvals_only=True, driver="evd")
    else:
        return matrix_errors.svd_bound(w)
    ev = np.clip(ev, 0.0, None)
    ev = ev[ev > 10.0 * w.n * np.finfo(float).eps * ev.max()]  # §7.2 P4, as matrix_errors
    return float(np.sqrt(ev).sum() ** 2 / w.n)


def _strategy_label(s: matrix_strategy.Strategy) -> str:
    kind = s.kind + (f"-{s.factors[0].kind}" if s.factors else "")
    words = {"eigen": "Eigen-Design tuned to these queries", "kron-eigen": "Eigen-Design per axis (all ranges)",
             "kron-hierarchical": "hierarchical per axis (pure ε)", "kron-identity": "identity (pure ε)",
             "hierarchical": "hierarchical (pure ε)", "identity": "identity (pure ε)"}
    return f"{words.get(kind, kind)}: used"


@dataclass(frozen=True)
class _Queries:
    """The public workload of a grid and parameters (cheap to build; no strategy yet)."""

    workload: matrix_workload.Workload  # the queries answered and reported (unweighted, spec P15)
    weights: np.ndarray | None = None  # uploaded row weights (None: all rows count alike)
    names: tuple[str, ...] | None = None
    groups: tuple[str, ...] | None = None
    asked: np.ndarray | None = None  # (k, 4) uploaded lon/lat bounds
    notes: tuple[str, ...] = ()

    @property
    def design(self) -> matrix_workload.Workload:
        """What the strategy is tuned to: the workload, its rows scaled by the uploaded weights
        (spec P15: a row of weight w counts w² in the design) on a grid small enough for the
        flat design; built only when a design is computed (not on every preview)."""
        if not self._weighted:
            return self.workload
        return matrix_workload.explicit_workload(self.weights[:, None] * self.workload.matrix(), shape=self.workload.shape,
                                    name=self.workload.name + ", weighted")

    @property
    def _weighted(self) -> bool:
        w = self.weights
        return not (w is None or np.all(w == w[0]) or self.workload.n > matrix_workload.FULL_METHOD_MAX_N)

    def key(self) -> str:
        """Content hash of the workload and its weights (the memo key of the design)."""
        h = self.workload.content_hash()
        if not self._weighted:
            return h
        return h + ":" + hashlib.sha256(np.ascontiguousarray(self.weights, dtype=np.float64).tobytes()).hexdigest()


@dataclass(frozen=True)
class _Design:
    """Everything about a workload's strategy that does not depend on the budget or the data."""

    strategy: matrix_strategy.Strategy
    tse_per_p: float
    svdb: float
    cell_q: np.ndarray  # diag(X⁺): a cell estimate's variance per unit noise variance
    profile: matrix_report.Profile | None
    notes: tuple[str, ...]


_MEMO = matrix_cache.DesignMemo(_MEMO_SIZE)
#: The data-free error figures of a level (:meth:`MatrixMechanism._errors`) per workload, budget and
#: sensitivity: a plan and its release, or a series of releases, make them once.
_ERRORS = matrix_cache.DesignMemo(4 * _MEMO_SIZE)


def clear_memo() -> None:
    """Forget the memoised designs (tests; the disk cache stays)."""
    _MEMO.clear()
    _ERRORS.clear()


class MatrixMechanism(PointsMechanism):
    name = "matrix"
    title = "Matrix mechanism (Eigen-Design, tuned to your queries)"
    summary = (
        "Answers a set of range queries you choose with noise designed for exactly those queries, "
        "and publishes the cell estimates and the query answers with their standard errors."
    )
    when_to_use = (
        "When you know which area counts people will ask for (all rectangles, rectangles of "
        "a typical size, or your own list of rectangles) and want the smallest error for them. "
        "Works best under ρ-zCDP; under pure ε-DP a simpler strategy is used."
    )
    reference = ("Li & Miklau, 'An adaptive mechanism for accurate query answering under "
                 "differential privacy', PVLDB 5(6), 2012")
    params = (
        Param("workload", "Queries to optimise for", str, "ranges_2d",
              "all rectangles of the grid; random rectangles of one size; prefixes or all ranges "
              "(only for a grid of 1 row or 1 column); or rectangles you upload as a CSV.",
              choices=WORKLOADS, choice_labels=tuple(WORKLOAD_LABELS[w] for w in WORKLOADS)),
        Param("rect_area", "Random rectangles: share of the grid's area", float, 0.1,
              "Each random rectangle covers about this share of the area (same shape as the grid).",
              minimum=0.0001, maximum=1.0, shown_if=("workload", "random_rectangles")),
        Param("rect_count", "Random rectangles: how many", int, 200,
              "Number of random rectangles in the workload.", minimum=1, maximum=5000,
              shown_if=("workload", "random_rectangles")),
        Param("rect_seed", "Random rectangles: seed (public)", int, 0,
              "The rectangles are public and drawn from this seed; they do not depend on the data.",
              minimum=0, advanced=True, shown_if=("workload", "random_rectangles")),
        Param("rectangles", "Uploaded rectangles (public)", RectangleList, None,
              "Your queries: lon/lat rectangles (west, south, east, north; optional name, weight, "
              "group). They are public and kept in the release record. CLI: --workload-file FILE.",
              shown_if=("workload", "uploaded")),
    )

    def resolve_params(self, raw: dict[str, Any] | None = None) -> dict[str, Any]:
        """As the base, and uploaded rectangles are kept only for the uploaded workload (so a
        release record never carries rectangles it did not use)."""
        p = super().resolve_params(raw)
        if p["workload"] != "uploaded":
            p["rectangles"] = None
        return p

    # -- workload and strategy (public inputs only) ----------------------------------------
    def _queries(self, grid: Grid, params: dict[str, Any]) -> _Queries:
        if grid.n_cells > MAX_CELLS:
            raise ParameterError(
                f"The matrix mechanism handles grids of at most {MAX_CELLS:,} cells (e.g. 256 × 256); "
                f"this grid has {grid.rows:,} × {grid.cols:,} = {grid.n_cells:,}. Choose a coarser grid "
                "on the Data page, or another mechanism."
            )
        w = params["workload"]
        if w == "ranges_2d":
            q = matrix_workload.range_2d_workload(grid.rows, grid.cols)
            return _Queries(q)
        if w == "random_rectangles":
            a = math.sqrt(params["rect_area"])
            size = (max(1, min(grid.rows, round(a * grid.rows))), max(1, min(grid.cols, round(a * grid.cols))))
            q = matrix_workload.random_rectangles_workload(grid.rows, grid.cols, [size], params["rect_count"],
                                              seed=params["rect_seed"])
            return _Queries(q)
        if w == "uploaded":
            return self._uploaded(grid, params.get("rectangles"))
        if grid.rows != 1 and grid.cols != 1:
            raise ParameterError(
                f"The workload '{w}' is for a grid of one row or one column (this grid is "
                f"{grid.rows} × {grid.cols}). Use 'ranges_2d' or 'random_rectangles'."
            )
        q = matrix_workload.prefix_workload(grid.n_cells) if w == "prefix" else matrix_workload.all_range_workload(grid.n_cells)
        return _Queries(q)

    @staticmethod
    def _uploaded(grid: Grid, rectangles: Any) -> _Queries:
        if not rectangles:
            raise ParameterError(
                "The workload 'uploaded rectangles' needs your rectangles: upload a CSV with the columns "
                "lon_min, lat_min, lon_max, lat_max (optional name, weight, group) on the Mechanism page, "
                "or pass --workload-file FILE on the command line."
            )
        rl = RectangleList(rectangles)
        mp = map_to_grid(rl, grid)
        k = len(rl)
        q = matrix_workload.Workload(f"{k:,} uploaded rectangle{'s' if k != 1 else ''} ({grid.rows}×{grid.cols})",
                        grid.shape, k, {"family": "uploaded"}, rects=mp.cells)
        return _Queries(q, weights=rl.weights(), names=tuple(rl.names()), groups=tuple(rl.groups()),
                        asked=rl.bounds(), notes=mp.warnings)

    def workload(self, grid: Grid, params: dict[str, Any]) -> matrix_workload.Workload:
        """The public workload over the grid's cells (row-major), refused on a too-large grid."""
        return self._queries(grid, params).workload

    def check_public(self, grid: Grid, cost: PrivacyCost, params: dict[str, Any]) -> None:
        """Refuses a grid or workload the mechanism cannot handle, before anything is spent."""
        self._queries(grid, params)

    def strategy(self, workload: matrix_workload.Workload, cost: PrivacyCost, design: matrix_workload.Workload | None = None
                 ) -> matrix_strategy.Strategy:
        """The workload's strategy, which must have full column rank: the release publishes an
        estimate of every cell, and a cell the strategy cannot see would be published as
        unbounded noise ( a flat design for 10 rectangles on 32 × 32 had cells at
        ±20,900 for true counts of 100).  A flat design that misses cells is replaced by the
        per-axis (Kronecker) design, which covers every cell; if even that misses some, the
        release is refused before anything is spent (the rank is public: workload only).

        Uploaded rectangles get the flat Eigen-Design of ``design`` (their weighted rows) on
        grids of at most 4,096 cells, the per-axis design otherwise."""
        return self._strategy(workload, cost, design)[0]

    @staticmethod
    def _strategy(workload: matrix_workload.Workload, cost: PrivacyCost, design: matrix_workload.Workload | None = None
                  ) -> tuple[matrix_strategy.Strategy, tuple[str, ...]]:
        pure = cost.definition == "pure"
        notes: list[str] = []
        if workload.spec.get("family") == "uploaded" and not pure:
            s = None
            if workload.n <= matrix_workload.FULL_METHOD_MAX_N:
                try:
                    s = matrix_cache.cached_strategy(design or workload, method="eigen")
                except ParameterError as e:  # e.g. Program 1 missed its certificate
                    notes.append(f"The flat design for your rectangles failed ({e}); the per-axis design "
                                 "is used.")
            if s is None:
                s = matrix_cache.cached_strategy(workload, method="kron")
        else:
            s = matrix_cache.cached_strategy(workload, pure_dp=pure)
        if not s.full_rank and len(workload.shape) == 2 and not s.factors:
            s = matrix_cache.cached_strategy(workload, method="kron", pure_dp=pure)
            notes.append(
                f"The strategy tuned to exactly these {workload.m:,} queries cannot estimate every cell, "
                "so the per-axis design (tuned to all ranges of each axis) is used: every cell gets an "
                "estimate, at some cost in error for your queries."
            )
        if not s.full_rank:
            raise ParameterError(
                "The strategy for this workload cannot estimate every cell of the grid, so the cell "
                "counts could not be published. Choose 'all rectangles of the grid', or more random "
                "rectangles."
            )
        return s, tuple(notes)

    def _design(self, q: _Queries, cost: PrivacyCost) -> _Design:
        """The memoised design of a workload for a privacy definition (public inputs only); the
        uploaded group names are in the key, as the design's error profile is grouped by them."""
        return _MEMO.get((q.key(), q.groups, cost.definition), lambda: self._make_design(q, cost))

    def _make_design(self, q: _Queries, cost: PrivacyCost) -> _Design:
        w = q.workload
        s, notes = self._strategy(w, cost, q.design if q._weighted else None)
        try:
            prof = matrix_report.profile(w, s, pure=cost.definition == "pure",
                                         groups=list(q.groups) if q.groups is not None else None,
                                         this_label=_strategy_label(s))
        except DPCoreError as e:
            prof = None
            notes += (f"No error report per query group: {e}",)
        if prof is not None:  # TSE/P = Δ² Σ_i w_i X⁺ w_iᵀ, already summed per atom by the profile
            t = s.sensitivity() ** 2 * float(prof.candidates[0].atoms.qsum.sum())
        elif w.rects is not None and not s.factors:
            t = float(matrix_errors.query_variances_per_p(w, s).sum())
        else:
            t = matrix_errors.tse_per_p(w, s)
        b = _svd_bound(w)
        if s.norm == "l2" and t < b * (1 - 1e-9):
            raise ParameterError(  # §7.2 P3: an error below svdb is a numerical bug, never real
                f"Computed TSE/P {t:.6g} is below the SVD bound {b:.6g}: numerical failure. Report it.")
        return _Design(s, t, b, self._cell_quadforms(s), prof, notes)

    @staticmethod
    def _calibration(strategy: matrix_strategy.Strategy, cost: PrivacyCost, k: int) -> matrix_release.Calibration:
        """The noise of the strategy answers: :func:`matrix_release.calibrate`, the very function
        :func:`matrix_release.release` draws with, for one unit of privacy of ``k`` records."""
        return matrix_release.calibrate(strategy, **_budget_kwargs(cost, k))

    @staticmethod
    def _cell_quadforms(strategy: matrix_strategy.Strategy) -> np.ndarray:
        """``diag(X⁺)``: the variance of each cell estimate per unit noise variance."""
        d = np.ones(1)
        for f in strategy.factors or (strategy,):
            d = np.kron(d, matrix_errors._row_quadforms(np.eye(f.n), f))
        return d

    @staticmethod
    def _rect_quadform(strategy: matrix_strategy.Strategy, grid: Grid, rect: tuple[int, int, int, int]) -> float:
        """``q X⁺ qᵀ`` for the indicator ``q`` of a rectangle of cells (Kronecker: per axis)."""
        r0, r1, c0, c1 = rect_bounds(rect)
        rows = ((np.arange(grid.rows) >= r0) & (np.arange(grid.rows) < r1)).astype(float)
        cols = ((np.arange(grid.cols) >= c0) & (np.arange(grid.cols) < c1)).astype(float)
        if strategy.factors and len(strategy.factors) == 2:
            a, b = strategy.factors
            return float(matrix_errors._row_quadforms(rows[None, :], a)[0] * matrix_errors._row_quadforms(cols[None, :], b)[0])
        return float(matrix_errors._row_quadforms(np.kron(rows, cols)[None, :], strategy)[0])

    def _summary(self, grid: Grid, q: _Queries, d: _Design, cost: PrivacyCost, params: dict[str, Any],
                 sensitivity: int) -> dict[str, Any]:
        w, s = q.workload, d.strategy
        cal = self._calibration(s, cost, sensitivity)
        per_unit = math.sqrt(cal.variance) / s.sensitivity()  # sqrt(P)/Δ: answers' SD per sqrt(q X⁺ qᵀ)
        notes = list(q.notes) + list(d.notes)
        if cost.definition == "pure":
            notes.append(
                "Pure ε-DP: the Eigen-Design strategy is tuned for Gaussian noise and has a large L1 "
                f"sensitivity, so a simpler L1 strategy ({s.kind}"
                f"{'-' + s.factors[0].kind if s.factors else ''}) is used instead (Li & Miklau 2012, Sec. 3.5). "
                "Choose ρ-zCDP for the tuned strategy."
            )
        rmse = math.sqrt(d.tse_per_p / w.m) * per_unit
        lb = math.sqrt(d.svdb / w.m) * per_unit
        out = {
            "workload": params["workload"],
            "workload_name": w.name,
            "n_queries": int(w.m),
            "strategy": s.kind + (f"-{s.factors[0].kind}" if s.factors else ""),
            "strategy_queries": int(s.p),
            "pure_dp_fallback": cost.definition == "pure",
            "noise": cal.distribution,
            "noise_scale": float(cal.scale),
            "noise_variance": cal.variance,
            "effective_sensitivity": cal.effective_sensitivity * sensitivity,
            "expected_rmse_per_query": rmse,
            "rmse_lower_bound": lb,
            # null when the SVD bound is zero (no ratio exists); the schema allows it
            "ratio_to_lower_bound": math.sqrt(d.tse_per_p / d.svdb) if d.svdb > 0 else None,
            "notes": notes,
        }
        if params["workload"] == "uploaded":
            out["cell_rule"] = CELL_RULE
        if d.profile is not None:
            rep = matrix_report.report(d.profile, **_budget_kwargs(cost, sensitivity))
            out.update({
                "worst_se": rep["worst_se"],
                "simultaneous_95": rep["simultaneous_95"],
                "groups": rep["groups"],
                "grouped_by": rep["grouped_by"],
                "comparisons": rep["comparisons"],
                "by_size": rep["by_size"],
                "strategy_labels": rep["labels"],
                "strategy_short_labels": rep["short_labels"],
            })
        return out

    # -- plan --------------------------------------------------------------------------------
    def _errors(self, grid: Grid, q: _Queries, d: _Design, cost: PrivacyCost, params: dict[str, Any],
                sensitivity: int) -> tuple[dict[str, Any], dict[str, float], np.ndarray]:
        """The level's data-free error figures: :meth:`_summary`, the exact SD of a centred
        rectangle of each default size and each cell estimate's SD."""
        info = self._summary(grid, q, d, cost, params, sensitivity)
        cell_sd = np.sqrt(info["noise_variance"] * d.cell_q)
        exact = {}
        for f in DEFAULT_QUERY_SIZES:  # a centred rectangle of that share of the area, grid-shaped
            h = max(1, min(grid.rows, round(math.sqrt(f) * grid.rows)))
            wd = max(1, min(grid.cols, round(math.sqrt(f) * grid.cols)))
            r0, c0 = (grid.rows - h) // 2, (grid.cols - wd) // 2
            qf = self._rect_quadform(d.strategy, grid, (r0, r0 + h, c0, c0 + wd))
            exact[f"{f:g}"] = math.sqrt(info["noise_variance"] * qf)
        return info, exact, cell_sd

    def _level(self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], sensitivity: int,
               q: _Queries | None = None) -> tuple[LevelPlan, np.ndarray, _Queries, _Design]:
        q = q if q is not None else self._queries(grid, params)
        d = self._design(q, cost)
        # memoised per public input (the per-query error report took ~60 % of a release's CPU when
        # it was made again for every release); each caller gets its own copy to change
        key = (q.key(), q.notes, q.groups, cost.definition, cost.value, int(sensitivity), grid.rows, grid.cols,
               params["workload"])
        info, exact, cell_sd = _ERRORS.get(key, lambda: self._errors(grid, q, d, cost, params, sensitivity))
        info, exact, cell_sd = copy.deepcopy(info), dict(exact), cell_sd.copy()
        sd = float(np.sqrt(np.mean(cell_sd**2)))
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
            ci95=interval_half_width("normal", sd),  # least squares over many noisy answers
            cells_per_count=1.0,
            in_partition=True,
            note="Noise is added to the strategy queries; the cell estimates are their least-squares "
                 "solution, so the SD per cell is its root mean square over the cells.",
            extra={"matrix": info, "range_query_sd_exact": exact},
        )
        return lv, cell_sd, q, d

    def plan_levels(
        self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], *, sensitivity: int, n_estimate: float | None
    ) -> tuple[LevelPlan, ...]:
        return (self._level(grid, cost, params, sensitivity)[0],)

    def query_error(self, plan: Plan, rect: tuple[int, int, int, int]) -> dict[str, Any]:
        """Exact: ``Var = Var(z) · q X⁺ qᵀ`` for the rectangle's indicator ``q``."""
        grid, cost = plan.domain, plan.cost
        s = self._design(self._queries(grid, dict(plan.params)), cost).strategy
        var = self._calibration(s, cost, plan.unit.contribution).variance
        return {"sd": math.sqrt(var * self._rect_quadform(s, grid, rect)), "cells": rect_cells(rect),
                "exact": True}

    # -- release -------------------------------------------------------------------------------
    def _release(
        self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: NoiseSource
    ) -> PartitionRelease:
        grid = aggregate.grid
        k = aggregate.sensitivity
        lv, cell_sd, q, d = self._level(grid, cost, params, k)
        info = dict(lv.extra["matrix"])
        w, s = q.workload, d.strategy
        res = matrix_release.release(w, s, aggregate.counts.reshape(-1), noise, **_budget_kwargs(cost, k))
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
            if q.names is not None:  # uploaded: each answer names its rectangle and the bounds asked
                details["workload_answers"].update(
                    {"name": list(q.names), "group": list(q.groups), "asked": np.asarray(q.asked)})
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
            ci95=interval_half_width("normal", cell_sd),
            public={"workload": info["workload_name"], "strategy": info["strategy"]},
            details=details,
        )

    @staticmethod
    def _workload_rects(w: matrix_workload.Workload, grid: Grid) -> np.ndarray:
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
