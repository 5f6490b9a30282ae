"""AG: the adaptive grid of Qardaji, Yang & Li (ICDE 2013).

Phases (sequential composition; the budgets add up to ε)
    0. *Number of points* (as UG): unless the curator gives a public ``N``, a share of ε
       (default 5 %) buys a noisy ``N̂`` (discrete Laplace, sensitivity ``k``).  The rest,
       ``ε_g``, goes to the two grids.
    1. *First level*: an ``m1 x m1`` grid with
       ``m1 = max(10, ceil(¼ · sqrt(N·ε_g / c)))``, ``c = 10``, and budget ``α·ε_g``
       (``α = 0.5``).  Its noisy counts ``n'`` are released.
    2. *Second level*: each first-level cell is cut into an ``m2 x m2`` sub-grid with
       ``m2 = max(1, ceil(sqrt(n' · (1−α)·ε_g / c2)))``, ``c2 = c/2 = 5``, counted with
       budget ``(1−α)·ε_g``.  ``m2`` depends only on the released ``n'`` (post-processing of
       phase 1), so phase 2 is an ordinary count level of a public partition.  A cell with
       ``m2 = 1`` (or a single fine cell) gets one sub-cell equal to itself, i.e. a second
       noisy count of the same area (as DPComp's implementation does), which inference
       averages with the first.

    With a cap of ``k`` records per person every count's noise grows ``k`` times, so both
    size rules use ``ε/k`` (the same guideline per unit of budget, as in UG).  Under ρ-zCDP
    the rules use ``ε = 2·sqrt(ρ)`` (same noise variance) and the counts get discrete
    Gaussian noise; the levels compose as ρ adds up.

Checked against the source
    ``m1``, ``m2``, ``c2 = c/2 = 5`` and ``α = 0.5`` are the paper's; Shaham et al. (2021, Sec. 5) write
    ``c/2`` and the DPComp benchmark's implementation of AG uses ``c2 = 5``, ``α = 0.5``
    and the same ceilings.  Deviations: the paper's ``N`` is the exact number of points
    and its ``m1`` rule uses the total ε; we make ``N`` private (phase 0) or public and
    use the grids' budget ``ε_g`` (as UG does).  Cells are unions of the curator's fine
    cells: :func:`dpcore.data.domain.block_edges` on the grid for the first level and within
    each first-level cell for the second (DPComp instead tiles a cell with square blocks
    of ``ceil(sqrt(area/m2²))`` cells); a sub-grid is capped by the fine rows / columns
    the cell has, per axis.

Constrained inference (post-processing)
    The paper (as implemented in DPComp) replaces a cell's count by the inverse-variance
    weighted average of its own noisy count ``v`` and the sum ``s`` of its ``m2²``
    sub-cells, ``v' = (α² m2² v + (1−α)² s) / (α² m2² + (1−α)²)``, then adds
    ``(v' − s)/m2²`` to every sub-cell.  That is exactly the weighted least-squares
    consistent estimate of the two-level tree (each first-level cell a root), which
    :mod:`dpcore.estimate.tree_inference` computes; we call it with each level's exact noise
    variance (a unit test checks the two agree).

Release
    A two-level tree (``is_tree``): depth 0 = the first-level cells, depth 1 = the
    sub-cells, which are the leaves and tile the grid.  ``noisy`` holds the consistent
    counts, ``sd`` their exact post-inference SD (at most the raw noise SD of the level);
    ``ci95`` is the level's raw 95 % half-width scaled by the same ratio.  The plan's
    levels describe the raw noise of each level; since ``m2`` depends on the noisy
    first-level counts, the preview of the second level assumes points spread evenly.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcore.data.domain import (
    Aggregate,
    Grid,
    block_edges,
    block_rects,
    prefix_sums,
    rect_sums_from_prefix,
)
from dpcore.errors import ParameterError
from dpcore.estimate.tree_inference import complete_tree_variances, consistent_release
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

#: The paper's floor on the first-level grid side.
MIN_FIRST_LEVEL = 10


def first_level_side(n: float, epsilon: float, c: float, sensitivity: int) -> int:
    """``m1 = max(10, ceil(¼ · sqrt(N·ε/(c·k))))`` (Qardaji et al.); N <= 0 gives 10."""
    x = max(float(n), 0.0) * epsilon / (c * sensitivity)
    return max(MIN_FIRST_LEVEL, math.ceil(0.25 * math.sqrt(x)))


def second_level_sides(noisy: NDArray[np.number], epsilon: float, c2: float,
                       sensitivity: int) -> NDArray[np.int64]:
    """``m2 = max(1, ceil(sqrt(n'·ε₂/(c2·k))))`` per first-level cell, ``ε₂ = (1−α)·ε_g``;
    a negative noisy count gives 1."""
    x = np.maximum(np.asarray(noisy, dtype=np.float64), 0.0) * (epsilon / (c2 * sensitivity))
    return np.maximum(1, np.ceil(np.sqrt(x))).astype(np.int64)


def after_inference(first: LevelPlan, second: LevelPlan, n_first: int, n_second: int,
                    first_extra: dict[str, Any] | None = None,
                    second_extra: dict[str, Any] | None = None) -> tuple[LevelPlan, LevelPlan]:
    """The two count levels of an AG-style two-level tree with the SD each has after AG's least
    squares (:func:`~dpcore.estimate.tree_inference.complete_tree_variances` at the mean fan-out), their
    depths and any ``extra`` facts of each (used by AG and :mod:`~dpcore.points.mechanisms.privtree_ag`)."""
    after = complete_tree_variances([first.sd ** 2, second.sd ** 2], max(1, round(n_second / n_first)))
    return (dataclasses.replace(first, extra={"depth": 0, "sd_after_inference": float(math.sqrt(after[0])),
                                              **(first_extra or {})}),
            dataclasses.replace(second, extra={"depth": 1, "sd_after_inference": float(math.sqrt(after[1])),
                                               **(second_extra or {})}))


def two_level_consistent(noisy1: NDArray[np.number], noisy2: NDArray[np.number], owner: NDArray[np.int64],
                         first: LevelPlan, second: LevelPlan) -> tuple[NDArray[np.float64], NDArray[np.float64],
                                                                       NDArray[np.float64], NDArray[np.int64],
                                                                       NDArray[np.int64]]:
    """AG's least squares (:func:`~dpcore.estimate.tree_inference.consistent_release`) over first-level
    cells with noisy counts ``noisy1`` and their sub-cells ``noisy2`` (``owner``: each sub-cell's cell),
    each cell the root of a two-level tree: ``(estimates, SDs, intervals, parent, depth)`` of the cells,
    then the sub-cells.  Post-processing of the noisy counts."""
    n1, n2 = len(noisy1), len(noisy2)
    parent = np.concatenate([np.full(n1, -1, dtype=np.int64), owner])
    depth = np.concatenate([np.zeros(n1, dtype=np.int64), np.ones(n2, dtype=np.int64)])
    est, sd, ci = consistent_release(parent, depth, np.concatenate([noisy1, noisy2]),
                                     np.concatenate([np.full(n1, first.sd), np.full(n2, second.sd)]),
                                     np.concatenate([np.full(n1, first.ci95), np.full(n2, second.ci95)]))
    return est, sd, ci, parent, depth


def sub_blocks(cells: NDArray[np.int64], m_rows: NDArray[np.int64],
               m_cols: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Rectangles of an ``m_rows[i] x m_cols[i]`` block grid inside every cell ``i``
    (:func:`block_edges` within the cell, capped by its fine rows / columns), row-major
    within each cell, and the index of the cell each belongs to."""
    cells = np.asarray(cells, dtype=np.int64).reshape(-1, 4)
    height = cells[:, 1] - cells[:, 0]
    width = cells[:, 3] - cells[:, 2]
    mr = np.clip(np.asarray(m_rows, dtype=np.int64), 1, height)
    mc = np.clip(np.asarray(m_cols, dtype=np.int64), 1, width)

    def edge_table(extent: NDArray[np.int64], m: NDArray[np.int64]) -> tuple[
            NDArray[np.int64], NDArray[np.int64]]:
        # one block_edges call per distinct (extent, m): few, whatever the number of cells
        base = int(m.max()) + 1
        keys, inverse = np.unique(extent * base + m, return_inverse=True)
        edges = [block_edges(int(key // base), int(key % base)) for key in keys.tolist()]
        offsets = np.cumsum([0] + [e.size for e in edges])[:-1]
        return np.concatenate(edges), offsets[inverse.ravel()]

    row_table, row_off = edge_table(height, mr)
    col_table, col_off = edge_table(width, mc)
    per_cell = mr * mc
    owner = np.repeat(np.arange(cells.shape[0]), per_cell)
    q = np.arange(owner.size) - np.repeat(np.cumsum(per_cell) - per_cell, per_cell)
    a = q // mc[owner]
    b = q % mc[owner]
    ro = row_off[owner] + a
    co = col_off[owner] + b
    rects = np.column_stack([
        cells[owner, 0] + row_table[ro], cells[owner, 0] + row_table[ro + 1],
        cells[owner, 2] + col_table[co], cells[owner, 2] + col_table[co + 1],
    ])
    return rects.astype(np.int64), owner


class AdaptiveGrid(PointsMechanism):
    name = "ag"
    title = "AG (adaptive two-level grid)"
    summary = (
        "A coarse grid whose cells are each cut into a finer sub-grid sized from their noisy "
        "count; both levels are combined so every cell equals the sum of its sub-cells."
    )
    when_to_use = (
        "Data with dense and sparse areas: dense cells get fine sub-grids, sparse ones stay "
        "coarse. A strong, simple baseline that usually beats UG."
    )
    reference = "Qardaji, Yang & Li, 'Differentially private grids for geospatial data', ICDE 2013"
    needs_n_guess = True
    is_tree = True
    params = (
        Param("alpha", "Share of the grid budget for the first level", float, 0.5,
              "α: the first level gets α of the grid budget, the sub-grids the rest. The paper "
              "uses 0.5.", minimum=0.05, maximum=0.95, advanced=True),
        Param("c", "Constant c (first level)", float, 10.0,
              "c in m1 = max(10, ceil(sqrt(N·ε/c)/4)); the paper's value is 10.",
              minimum=1.0, maximum=1000.0, advanced=True),
        Param("c2", "Constant c2 (second level)", float, 5.0,
              "c2 in m2 = ceil(sqrt(n'·(1-α)·ε/c2)); the paper uses c/2 = 5. Larger gives "
              "coarser sub-grids.", minimum=0.5, maximum=1000.0, advanced=True),
        Param("count_share", "Share of ε for counting the points", float, 0.05,
              "Part of the budget spent on a noisy number of points, which sizes the first "
              "level. Not used when a public number of points is given.",
              minimum=0.001, maximum=0.5, advanced=True),
        Param("public_n", "Public number of points (0 = estimate privately)", int, 0,
              "Only if the number of points is already public (e.g. published elsewhere); "
              "then sizing the first level costs nothing.", minimum=0, advanced=True),
    )

    # -- privacy budget ----------------------------------------------------------------
    def _budgets(self, cost: PrivacyCost, params: dict[str, Any]) -> tuple[
            PrivacyCost | None, PrivacyCost, PrivacyCost, PrivacyCost]:
        """Budgets of the point count (None with a public N), of both grids together
        (``ε_g``, which sizes the first level), of the first and of the second level.
        Count + first + second add up to at most the total."""
        if params["public_n"] > 0:
            e_n, v_g = None, cost.value
        else:
            v_n, v_g = split_custom(cost.value, [params["count_share"], 1 - params["count_share"]])
            e_n = part(cost, v_n)
        v1, v2 = split_custom(v_g, [params["alpha"], 1 - params["alpha"]])
        return e_n, part(cost, v_g), part(cost, v1), part(cost, v2)

    # -- plan --------------------------------------------------------------------
    def plan_levels(
        self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], *, sensitivity: int, n_estimate: float | None
    ) -> tuple[LevelPlan, ...]:
        e_n, e_g, e1, e2 = self._budgets(cost, params)
        n = params["public_n"] if params["public_n"] > 0 else n_estimate
        if n is None:
            raise ParameterError(
                "AG sizes its first-level grid from the number of points. Give a rough public "
                "guess of the number of points to preview its error (it is used only for the "
                "preview)."
            )
        m1 = first_level_side(float(n), equivalent_epsilon(e_g), params["c"], sensitivity)
        cells = block_rects(grid, m1, m1)
        # preview only: every first-level cell holds its share of n
        per_cell = float(n) * _areas(cells) / grid.n_cells
        m2 = second_level_sides(per_cell, equivalent_epsilon(e2), params["c2"], sensitivity)
        subs, _ = sub_blocks(cells, m2, m2)
        return self._levels(grid, e_n, e1, e2, cells.shape[0], subs.shape[0], sensitivity,
                            preview=True)

    def _levels(self, grid: Grid, e_n: PrivacyCost | None, e1: PrivacyCost, e2: PrivacyCost,
                n_first: int, n_second: int, sensitivity: int, preview: bool) -> tuple[
                    LevelPlan, ...]:
        levels: list[LevelPlan] = []
        if e_n is not None:
            levels.append(count_level(0, "Number of points (sizes the first level)", e_n,
                                      sensitivity, 1, float(grid.n_cells), False,
                                      note="Published with the release; not used to answer queries."))
        first = count_level(len(levels), f"First level: {n_first:,} cells", e1, sensitivity,
                            n_first, grid.n_cells / n_first, False)
        second = count_level(
            len(levels) + 1, f"Second level: {n_second:,} sub-cells", e2, sensitivity, n_second,
            grid.n_cells / n_second, True,
            note=("Sub-grid sizes depend on the noisy first-level counts; this preview assumes "
                  "the points are spread evenly." if preview else ""))
        levels.extend(after_inference(first, second, n_first, n_second,
                                      second_extra={"mean_sub_cells_per_cell": n_second / n_first}))
        return tuple(levels)

    # -- release -------------------------------------------------------------------
    def _release(
        self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: NoiseSource
    ) -> PartitionRelease:
        return self._release_tree(aggregate, cost, params, noise)[0]

    def _release_tree(
        self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: NoiseSource
    ) -> tuple[PartitionRelease, NDArray[np.int64]]:
        """The release and the parent index of each of its rectangles (-1 for a first-level cell),
        for post-processing of the two-level tree (:mod:`dpcore.points.mechanisms.ag_pool`)."""
        grid = aggregate.grid
        k = aggregate.sensitivity
        e_n, e_g, e1, e2 = self._budgets(cost, params)
        public: dict[str, Any] = {}
        n_hat = noisy_point_count(aggregate, e_n, params, noise, public)
        m1 = first_level_side(float(n_hat), equivalent_epsilon(e_g), params["c"], k)
        cells = block_rects(grid, m1, m1)
        P = prefix_sums(aggregate.counts)
        noisy1 = noisy_counts(rect_sums_from_prefix(P, cells), e1, k, noise)
        # m2 is a function of the released noisy counts only (post-processing)
        m2 = second_level_sides(noisy1, equivalent_epsilon(e2), params["c2"], k)
        subs, owner = sub_blocks(cells, m2, m2)
        noisy2 = noisy_counts(rect_sums_from_prefix(P, subs), e2, k, noise)

        levels = self._levels(grid, e_n, e1, e2, cells.shape[0], subs.shape[0], k, preview=False)
        n1, n2 = cells.shape[0], subs.shape[0]
        est, sd, ci, parent, depth = two_level_consistent(noisy1, noisy2, owner, levels[-2], levels[-1])
        public.update({
            "first_level_side": m1,
            "first_level_shape": [int(min(m1, grid.rows)), int(min(m1, grid.cols))],
            "second_level_side": {"min": int(m2.min()), "median": float(np.median(m2)),
                                  "max": int(m2.max())},
        })
        return self.make_release(
            aggregate, cost, params, levels,
            rects=np.vstack([cells, subs]),
            level=depth,
            leaf=depth == 1,
            noisy=est,
            sd=sd,
            ci95=ci,
            public=public,
            node_budget=np.concatenate([np.full(n1, e1.value), np.full(n2, e2.value)]),
            is_tree=True,
            measured=np.concatenate([noisy1, noisy2]).astype(np.float64),  # raw, for the data users' files
        ), parent


def _areas(rects: NDArray[np.int64]) -> NDArray[np.int64]:
    return (rects[:, 1] - rects[:, 0]) * (rects[:, 3] - rects[:, 2])
