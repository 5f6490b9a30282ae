"""AGH: the adaptive grid (Qardaji, Yang & Li, ICDE 2013) with a third level, consistency and pooling.

A hierarchy over AG's cells (issue 27, item 3): AG's two levels plus a finer third level, the
weighted least-squares consistent estimate of the whole tree (Hay, Rastogi, Miklau & Suciu,
PVLDB 2010, Sec. 4), then a data-free sparsity rule applied to the released estimates only.

Phases (sequential composition; the budgets add up to ε)
    0. *Number of points* (as AG): unless the curator gives a public ``N``, a share of ε
       (default 5 %) buys a noisy ``N̂`` (discrete Laplace, sensitivity ``k``).  The rest,
       ``ε_g``, goes to the three levels.
    1. *First level*: AG's ``m1 x m1`` grid, ``m1 = max(10, ceil(¼ · sqrt(N̂·ε_g / (c·k))))``,
       ``c = 10``, budget ``ε₁ = α₁·ε_g`` (``α₁ = 0.34``).
    2. *Second level*: every first-level cell is cut into AG's ``m2 x m2`` sub-grid,
       ``m2 = max(1, ceil(sqrt(n₁' · ε₂ / (c2·k))))`` from its released noisy count ``n₁'``,
       budget ``ε₂ = α₂·ε_g`` (``α₂ = 0.33``).
    3. *Third level*: every second-level cell is cut the same way,
       ``m3 = max(1, ceil(sqrt(n₂' · ε₃ / (c3·k))))`` from its released noisy count ``n₂'``,
       budget ``ε₃ = ε_g − ε₁ − ε₂``.  ``c2 = c3 = c/2 = 5`` (AG's second-level constant: the
       same error balance, noise against uniformity, one level down).

    A cell whose sub-grid is ``1 x 1`` gets one sub-cell equal to itself (AG as in DPComp): a
    second noisy count of the same area, which inference averages with the first.

Privacy cost (pure ε-DP; ρ-zCDP alike with ρ adding up)
    Every level is a partition of the grid into disjoint cells, so one point changes exactly
    one count per level by 1 and a person's ``k`` points change a level's counts by at most
    ``k`` in L1: discrete Laplace of scale ``k/ε_j`` (discrete Gaussian with ``σ² ≥ k²/(2ρ_j)``
    under zCDP) makes level ``j`` ``ε_j``-DP.  The first level's cells depend on ``N̂`` only
    (released, phase 0); the second level's cells on the released first-level counts only; the
    third level's cells on the released second-level counts only.  Each level is therefore an
    ``ε_j``-DP count of a partition that is a function of earlier *outputs*, and by adaptive
    sequential composition (Dwork & Roth, 2014, Thm. 3.16 and its adaptive form, Sec. 3.5) the
    release is ``(ε_N + ε₁ + ε₂ + ε₃)``-DP, ``= ε``.  Everything below is post-processing of
    the released noisy counts and of public parameters (Dwork & Roth, Prop. 2.1): it never
    reads the data.

Consistency (post-processing)
    The three levels form a forest (a first-level cell is a root).  The weighted least-squares
    consistent estimate with each level's exact noise variance
    (:func:`dpcore.estimate.tree_inference.tree_least_squares`) gives every node ``t̂_v`` and its
    exact SD ``s_v``; for two levels it is AG's own inference.

Pooling of sparse cells (post-processing; a data-free sparsity prior)
    Where the data are empty or thin, AG's error is noise: a 10 % query over empty land adds
    the noise of a dozen first-level cells.  Top down, the roots forming one group and the
    children of every other node one group each, the nodes whose consistent estimate is below
    ``pool_threshold · s_v`` (default 2) are *pooled*: their summed estimate (clamped at 0) is
    spread over them in proportion to area, and their subtrees follow by area.  Within a
    parent this keeps the parent's total (unless the pool's sum is negative, when it gets 0),
    and across the pooled roots it keeps their sum: unlike zeroing (which removes thin
    background) it moves no mass between pooled and unpooled areas, it only flattens noise
    inside the pool, where it averages out.  Every inner node is then reset to the sum of its
    children, bottom up, so the released tree is exactly consistent.
    ``pool_threshold = 0`` turns it off.  The rule and its default (2 SD, three levels with
    shares ⅓) were chosen on the head-to-head's *training* shapes (roads, single_tight,
    earthquakes, gauss_paper; benchmarks/results/beat_ag_study.md), not on the held-out ones.

Release
    A three-level tree (``is_tree``): depth 0 = first-level cells, 1 = second-level,
    2 = third-level cells, which are the leaves and tile the grid.  ``noisy`` holds the
    consistent (and pooled) counts.  ``sd`` is the exact post-inference SD of unpooled nodes;
    a pooled node gets its pool's SD (the root sum of its members' variances) times its area
    share, an approximation that ignores the pool's covariances and its bias (the selection by
    the threshold); ``ci95`` is the level's raw half-width scaled by the same ratio.  The
    plan's levels describe each level's raw noise; the second and third levels' sizes depend
    on noisy counts, so their preview assumes points spread evenly.

Expected error
    As AG, each level's counts have noise SD ``sqrt(2)·k/ε_j`` before inference; a query's
    error is the noise of the cells it covers plus the uniformity error of the leaves it cuts.
    On the head-to-head's training shapes (256², n 10^4–10^5, ε 0.1 and 1) the geometric mean
    of its mean relative error was 0.71× AG's (worst 1.10×, single_tight at ε = 1).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcore.data.domain import Aggregate, Grid, block_rects, prefix_sums, rect_sums_from_prefix
from dpcore.errors import ParameterError
from dpcore.estimate.tree_inference import complete_tree_variances, tree_least_squares
from dpcore.points.mechanisms.ag import (
    AdaptiveGrid,
    first_level_side,
    second_level_sides,
    sub_blocks,
)
from dpcore.points.mechanisms.base import (
    Param,
    PointsMechanism,
    count_level,
    equivalent_epsilon,
    noisy_counts,
    part,
)
from dpcore.points.release import LevelPlan, PartitionRelease
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.calibration import split_custom
from dpcore.privacy.noise import NoiseSource

#: AG's own parameters that AGH shares (the first level's constant, the count's share, a public N)
_AG_PARAMS = {p.name: p for p in AdaptiveGrid.params}


def pool_sparse(est: NDArray[np.float64], sd: NDArray[np.float64], parent: NDArray[np.int64],
                depth: NDArray[np.int64], area: NDArray[np.float64],
                threshold: float) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """Pool the nodes below ``threshold`` SDs, top down (see the module docstring).

    Roots form one group, the children of a node one group each.  Returns the new estimates,
    their approximate SDs and which nodes were pooled (directly or through an ancestor).

    >>> est = np.array([10.0, -1.0, 0.5, 4.0, 6.0])
    >>> sd = np.ones(5)
    >>> parent = np.array([-1, -1, -1, 0, 0]); depth = np.array([0, 0, 0, 1, 1])
    >>> area = np.array([2.0, 1.0, 3.0, 1.0, 1.0])
    >>> e, s, p = pool_sparse(est, sd, parent, depth, area, 2.0)
    >>> e.tolist(), p.tolist()
    ([10.0, 0.0, 0.0, 4.0, 6.0], [False, True, True, False, False])
    >>> pool_sparse(np.array([5.0, 1.0, 2.0]), np.ones(3), np.array([-1, 0, 0]),
    ...             np.array([0, 1, 1]), np.array([4.0, 1.0, 3.0]), 2.5)[0].tolist()
    [5.0, 0.75, 2.25]
    """
    est = np.array(est, dtype=np.float64)
    sd = np.array(sd, dtype=np.float64)
    pooled = np.zeros(est.size, dtype=bool)
    if threshold <= 0 or est.size == 0:
        return est, sd, pooled
    for d in range(int(depth.max()) + 1):
        nodes = np.flatnonzero(depth == d)
        if d > 0:  # below a pooled node: spread by area
            inh = nodes[pooled[parent[nodes]]]
            share = area[inh] / area[parent[inh]]
            est[inh] = est[parent[inh]] * share
            sd[inh] = sd[parent[inh]] * share
            pooled[inh] = True
        live = nodes[~pooled[nodes]]
        low = live[est[live] < threshold * sd[live]]
        if low.size == 0:
            continue
        group = parent[low] + 1  # the roots' group is 0
        n_groups = int(group.max()) + 1
        total = np.maximum(np.bincount(group, est[low], minlength=n_groups), 0.0)
        var = np.bincount(group, sd[low] ** 2, minlength=n_groups)
        g_area = np.bincount(group, area[low], minlength=n_groups)
        share = area[low] / g_area[group]
        est[low] = total[group] * share
        sd[low] = np.sqrt(var[group]) * share
        pooled[low] = True
    return est, sd, pooled


def sum_up(est: NDArray[np.float64], parent: NDArray[np.int64], depth: NDArray[np.int64]) -> NDArray[np.float64]:
    """Every node with children reset to the sum of its children, bottom up.

    >>> sum_up(np.array([9.0, 2.0, 3.0, 1.0]), np.array([-1, 0, 0, 1]), np.array([0, 1, 1, 2])).tolist()
    [4.0, 1.0, 3.0, 1.0]
    """
    est = np.array(est, dtype=np.float64)
    for d in range(int(depth.max()), 0, -1):
        nodes = np.flatnonzero(depth == d)
        has = np.zeros(est.size, dtype=bool)
        has[parent[nodes]] = True
        sums = np.bincount(parent[nodes], est[nodes], minlength=est.size)
        est[has] = sums[has]
    return est


class AdaptiveGridHierarchy(PointsMechanism):
    name = "agh"
    title = "AGH (adaptive grid, three levels, sparse cells pooled)"
    summary = (
        "AG's coarse grid and sub-grids plus a third, finer level in dense cells; the three levels "
        "are made consistent, and cells whose estimate is within noise of zero share one flat estimate."
    )
    when_to_use = (
        "Clustered data with empty or thin areas (cities, clusters, point sets with large empty "
        "regions): the pooling removes most of the noise over empty land, the third level cuts the "
        "uniformity error in dense cells. On thin uniform backgrounds at large ε plain AG can be "
        "slightly better."
    )
    reference = ("Qardaji, Yang & Li, 'Differentially private grids for geospatial data', ICDE 2013; "
                 "Hay, Rastogi, Miklau & Suciu, 'Boosting the accuracy of differentially private "
                 "histograms through consistency', PVLDB 2010")
    needs_n_guess = True
    is_tree = True
    params = (
        Param("alpha1", "Share of the grid budget for the first level", float, 0.34,
              "α₁: the first level gets α₁ of the grid budget.", minimum=0.05, maximum=0.9, advanced=True),
        Param("alpha2", "Share of the grid budget for the second level", float, 0.33,
              "α₂: the second level gets α₂; the third level gets the rest (1 − α₁ − α₂).",
              minimum=0.05, maximum=0.9, advanced=True),
        _AG_PARAMS["c"],
        Param("c2", "Constant c2 (second and third levels)", float, 5.0,
              "c2 in m = ceil(sqrt(n'·ε_level/c2)) for the second and third levels; AG uses c/2 = 5.",
              minimum=0.5, maximum=1000.0, advanced=True),
        Param("pool_threshold", "Pooling threshold (SDs; 0 = off)", float, 2.0,
              "Cells whose consistent estimate is below this many standard deviations share one "
              "flat estimate with their pooled siblings (post-processing).", minimum=0.0, maximum=10.0,
              advanced=True),
        _AG_PARAMS["count_share"],
        _AG_PARAMS["public_n"],
    )

    # -- privacy budget ----------------------------------------------------------------
    def _budgets(self, cost: PrivacyCost, params: dict[str, Any]) -> tuple[
            PrivacyCost | None, PrivacyCost, tuple[PrivacyCost, PrivacyCost, PrivacyCost]]:
        """Budgets of the point count (None with a public N), of the three levels together
        (``ε_g``, which sizes the first level) and of each level; they add up to the total."""
        a1, a2 = params["alpha1"], params["alpha2"]
        if a1 + a2 >= 0.95:
            raise ParameterError(
                f"AGH's first two levels take {a1 + a2:.2f} of the budget, leaving nothing for the "
                "third. Choose alpha1 + alpha2 below 0.95.")
        if params["public_n"] > 0:
            e_n, v_g = None, cost.value
        else:
            v_n, v_g = split_custom(cost.value, [params["count_share"], 1 - params["count_share"]])
            e_n = part(cost, v_n)
        v1, v2, v3 = split_custom(v_g, [a1, a2, 1 - a1 - a2])
        return e_n, part(cost, v_g), (part(cost, v1), part(cost, v2), part(cost, v3))

    # -- plan --------------------------------------------------------------------
    def plan_levels(
        self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], *, sensitivity: int, n_estimate: float | None
    ) -> tuple[LevelPlan, ...]:
        e_n, e_g, es = self._budgets(cost, params)
        n = params["public_n"] if params["public_n"] > 0 else n_estimate
        if n is None:
            raise ParameterError(
                "AGH sizes its first-level grid from the number of points. Give a rough public "
                "guess of the number of points to preview its error (it is used only for the "
                "preview).")
        m1 = first_level_side(float(n), equivalent_epsilon(e_g), params["c"], sensitivity)
        cells = [block_rects(grid, m1, m1)]
        for e in es[1:]:  # preview only: every cell holds its share of n
            per_cell = float(n) * _areas(cells[-1]) / grid.n_cells
            m = second_level_sides(per_cell, equivalent_epsilon(e), params["c2"], sensitivity)
            cells.append(sub_blocks(cells[-1], m, m)[0])
        return self._levels(grid, e_n, es, [c.shape[0] for c in cells], sensitivity, preview=True)

    def _levels(self, grid: Grid, e_n: PrivacyCost | None, es: tuple[PrivacyCost, ...],
                sizes: list[int], sensitivity: int, preview: bool) -> tuple[LevelPlan, ...]:
        levels: list[LevelPlan] = []
        if e_n is not None:
            levels.append(count_level(0, "Number of points (sizes the first level)", e_n,
                                      sensitivity, 1, float(grid.n_cells), False,
                                      note="Published with the release; not used to answer queries."))
        names = ("First level", "Second level", "Third level")
        note = ("Sizes depend on the noisy counts of the level above; this preview assumes the "
                "points are spread evenly." if preview else "")
        raw = [count_level(len(levels) + j, f"{names[j]}: {sizes[j]:,} cells", es[j], sensitivity,
                           sizes[j], grid.n_cells / sizes[j], j == 2, note=note if j else "")
               for j in range(3)]
        fanout = max(1, round(math.sqrt(sizes[2] / sizes[0])))
        after = complete_tree_variances([lv.sd ** 2 for lv in raw], fanout)
        for j, lv in enumerate(raw):
            levels.append(dataclasses.replace(
                lv, extra={"depth": j, "sd_after_inference": float(math.sqrt(after[j]))}))
        return tuple(levels)

    # -- release -------------------------------------------------------------------
    def _release(
        self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: NoiseSource
    ) -> PartitionRelease:
        grid = aggregate.grid
        k = aggregate.sensitivity
        e_n, e_g, es = self._budgets(cost, params)
        public: dict[str, Any] = {}
        if e_n is not None:
            n_hat = int(noisy_counts(np.array([aggregate.total]), e_n, k, noise)[0])
            public["noisy_point_count"] = n_hat
        else:
            n_hat = params["public_n"]
        m1 = first_level_side(float(n_hat), equivalent_epsilon(e_g), params["c"], k)
        P = prefix_sums(aggregate.counts)
        rects = [block_rects(grid, m1, m1)]
        owners = [np.full(rects[0].shape[0], -1, dtype=np.int64)]
        measured = [noisy_counts(rect_sums_from_prefix(P, rects[0]), es[0], k, noise)]
        sides = []
        for j in (1, 2):
            # the cells of level j are a function of level j-1's released counts (post-processing)
            m = second_level_sides(measured[-1], equivalent_epsilon(es[j]), params["c2"], k)
            sides.append(m)
            subs, owner = sub_blocks(rects[-1], m, m)
            owners.append(owner + sum(r.shape[0] for r in rects[:-1]))
            rects.append(subs)
            measured.append(noisy_counts(rect_sums_from_prefix(P, subs), es[j], k, noise))

        sizes = [r.shape[0] for r in rects]
        levels = self._levels(grid, e_n, es, sizes, k, preview=False)
        depth = np.repeat(np.arange(3, dtype=np.int64), sizes)
        parent = np.concatenate(owners)
        raw = np.concatenate(measured).astype(np.float64)
        sd_own = np.repeat([lv.sd for lv in levels[-3:]], sizes)
        ci_own = np.repeat([lv.ci95 for lv in levels[-3:]], sizes)
        est, var = tree_least_squares(parent, depth, raw, sd_own ** 2)
        all_rects = np.vstack(rects)
        est, sd, pooled = pool_sparse(est, np.sqrt(var), parent, depth, _areas(all_rects).astype(np.float64),
                                      params["pool_threshold"])
        est = sum_up(est, parent, depth)
        ratio = np.divide(sd, sd_own, out=np.ones_like(sd), where=sd_own > 0)
        public.update({
            "first_level_side": m1,
            "first_level_shape": [int(min(m1, grid.rows)), int(min(m1, grid.cols))],
            "second_level_side": _side_summary(sides[0]),
            "third_level_side": _side_summary(sides[1]),
            "pooled_leaves": int(np.count_nonzero(pooled[depth == 2])),
        })
        return self.make_release(
            aggregate, cost, params, levels,
            rects=all_rects, level=depth, leaf=depth == 2, noisy=est, sd=sd, ci95=ci_own * ratio,
            public=public, node_budget=np.repeat([e.value for e in es], sizes), is_tree=True,
            measured=raw,  # raw, for the data users' files
        )


def _side_summary(m: NDArray[np.int64]) -> dict[str, float]:
    return {"min": int(m.min()), "median": float(np.median(m)), "max": int(m.max())}


def _areas(rects: NDArray[np.int64]) -> NDArray[np.int64]:
    return (rects[:, 1] - rects[:, 0]) * (rects[:, 3] - rects[:, 2])
