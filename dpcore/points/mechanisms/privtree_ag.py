"""PrivTree's leaves with AG's second level and a within-leaf prior (issue 27, item 3).

PrivTree (Zhang, Xiao & Xie, "PrivTree: A Differentially Private Algorithm for Hierarchical
Decompositions", SIGMOD 2016, Sec. 3, Algorithm 2) builds an adaptive first level with no height
parameter; every leaf is counted and then cut, as AG's first-level cells are (Qardaji, Yang & Li,
"Differentially private grids for geospatial data", ICDE 2013, Sec. IV), into an ``m2 × m2`` block
grid sized from the leaf's released count; each leaf and its blocks are made consistent by AG's
weighted least squares; queries that cut a block are answered with the data-free piecewise-linear
prior of :mod:`dpcore.points.within_leaf` (``ag_pool_smooth``'s rule).  The research version, with
the sweeps that chose the constants, is ``benchmarks/beat_ag_ptree.py`` (variant ``s=0.1 th=0 /
ag2 0.2 7.5 / pl``; ``benchmarks/results/beat_ag_ptree.md``, section (c)).

Parameters
    ``tree_share`` ``s`` (default 0.1): the share ε_tree of ε spent on PrivTree's split tests, with
    θ = 0 (the paper's default; not a parameter here).  ``leaf_share`` ``a`` (default 0.2): the
    share ε₁ of the rest, ε_count = ε − ε_tree, spent on the leaves' counts; the blocks get
    ε₂ = ε_count − ε₁.  ``c2`` (default 7.5): AG's second-level constant in
    ``m2 = max(1, ⌈√(max(n′, 0)·ε₂/(c2·k))⌉)`` (:func:`~dpcore.points.mechanisms.ag.second_level_sides`),
    ``n′`` the leaf's released count (AG's paper: c/2 = 5).  All three were chosen on the
    head-to-head's training shapes only (roads, single_tight, earthquakes, gauss_paper; 256², n 10^4
    and 10^5, ε 0.1 and 1; ``benchmarks/results/beat_ag_ptree_hybrid_sweep.md`` and
    ``beat_ag_ptree_hybrid.md``): a small tree share makes a coarse first level whose leaves AG's
    blocks refine where the released counts say there are points; a larger ``c2`` than AG's 5 gives
    fewer, less noisy blocks under PrivTree's already adaptive leaves.  A cap of ``k`` records per
    person (``aggregate.sensitivity``) scales the split-test noise, the bias δ and both count noises
    by ``k``, and the block rule uses ``ε₂/k``.

Privacy (pure ε-DP, k records per person)
    1. *The tree* is PrivTree's, grown by :func:`~dpcore.points.mechanisms.privtree.grow_privtree`
       with ``(t, δ) = privtree_parameters(ε_tree, k)``: ε_tree-DP by the paper's Theorem 3.1 as
       redone for the discrete Laplace and integer counts in :mod:`dpcore.points.mechanisms.privtree`
       (its module docstring, steps 1–4, checked there by brute force).
    2. *The leaves' counts.*  Given the released tree (public from then on) the leaves are disjoint:
       one person's at most ``k`` records change them by at most ``k`` in L1, and each gets discrete
       Laplace noise of scale ``k/ε₁``: ε₁-DP.
    3. *The blocks.*  A leaf's block grid is a function of the public leaf rectangle and its
       released noisy count only (post-processing of steps 1–2); the blocks of all leaves are
       disjoint and tile the grid, so they are again a public partition of disjoint counts, with
       scale ``k/ε₂``: ε₂-DP.
    4. *Composition.*  Each step's partition and budget are functions of what was released before:
       adaptive sequential composition (Dwork & Roth, 2014, Thm. 3.16) gives ε_tree + ε₁ + ε₂.  The
       budgets are :func:`~dpcore.privacy.calibration.split_custom`'s parts (``[s, 1 − s]`` of ε,
       then ``[a, 1 − a]`` of ε_count), each split's last part rounded down so that the exact
       (rational) sum of the parts is at most the whole: ε_tree + ε₁ + ε₂ ≤ ε exactly.
    5. *Post-processing.*  The least squares, the internal nodes' sums and the within-leaf prior read
       only the released counts, the public grid and public parameters (Dwork & Roth, 2014,
       Prop. 2.1).  Pure ε-DP only (``definitions = ("pure",)``): step 1's proof is for Laplace tails.

Release
    A tree (``is_tree``): PrivTree's nodes in level order (an internal node carries the sum of the
    consistent estimates of the leaves below it), then every leaf's blocks one level below their leaf;
    the blocks are the release's leaves and tile the grid (a leaf with ``m2 = 1`` gets one block equal
    to itself: a second count of the same area, which the least squares averages with the first, as
    AG does).  ``noisy`` holds the consistent counts, ``sd`` their exact post-inference SD (an
    internal node's: the root sum of its leaves', which are independent), ``ci95`` the own-noise
    half-width scaled by the same ratio (AG's rule; internal nodes the root sum of squares);
    ``measured`` the raw noisy counts (NaN for PrivTree's internal nodes, which are not counted)
    and ``node_budget`` ε₁ for PrivTree's leaves, ε₂ for the blocks, 0 for internal nodes.
    ``within_leaf`` is ``"piecewise_linear"``: the map, the tables and the exports show the blocks'
    counts; only answers of queries that cut a block use the prior.  The raw counts are unbiased given
    the partition; the consistent ones inherit AG's small upward bias, since the weight the least
    squares gives a leaf's own count grows with the number of blocks its noisy count buys, so with its
    noise (measured on 2,000 points at ε 1: +6.0 ± 0.6 on the total, AG +5.2 ± 0.7; a third of its SD).

Expected error (the plan)
    Three rows: the split tests (scale ``k·7/(3·ε_tree)``, bias δ; not released), the leaves' counts
    (scale ``k/ε₁``) and the blocks' counts (scale ``k/ε₂``), with AG's two-level post-inference SDs.
    The number of leaves and blocks depends on the data: as AG's plan does, they are previewed from a
    public guess of the number of points (``n_estimate``) spread evenly: PrivTree's expected number of
    leaves for that many points (:func:`~dpcore.points.mechanisms.privtree.expected_leaves`), each
    holding its share, cut by the ``m2`` rule.  Without a guess the plan has no rows (as AG's).  The
    rows do NOT model the prior (:data:`PRIOR_NOTE`, appended to the blocks' row).

Measured (``benchmarks/results/beat_ag_ptree.md``, section (c); ``spatial_256_h2h_quick.md``)
    On the held-out shapes (uber, many_small, tight_wide; 256², n 10^4 and 10^5, random rectangles of
    0.1 / 1 / 10 % of the area, MRE with sanity bound 20): in the study, 3 releases, run once, 0.710×
    AG's mean relative error at ε 0.1 and 0.799× at ε 1 (geometric means over the 6 settings of each
    ε); in the head-to-head (5 releases at ε 0.1, 16 at ε 1), 0.72× (0.52-0.96×) and 0.795×
    (0.56-0.94×), the lowest mean MRE in 9 of its 12 settings.  It loses at 10^4 points and ε 0.1
    (1.17-1.65× the best), where the tree's tenth of a small budget and the noisy leaf counts that
    size the blocks cost most.

Speed (``benchmarks/results/speed_end_to_end.md``)
    3.5 M points on 1,024², ε 1: plan, release and the full within-leaf density in 0.54–0.57 s, end to
    end 1.35–1.43× reading the CSV plus the numpy histogram (the rule: at most 3×).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpcore.data.domain import Aggregate, Grid, prefix_sums, rect_sums_from_prefix
from dpcore.points.mechanisms.ag import (
    after_inference,
    second_level_sides,
    sub_blocks,
    two_level_consistent,
)
from dpcore.points.mechanisms.base import Param, PointsMechanism, count_level, noisy_counts
from dpcore.points.mechanisms.privtree import (
    BETA,
    expected_leaves,
    grow_privtree,
    privtree_parameters,
    split_test_level,
    subtree_sums,
)
from dpcore.points.release import LevelPlan, PartitionRelease
from dpcore.points.within_leaf import PIECEWISE_LINEAR
from dpcore.privacy.budget import PrivacyCost, pure
from dpcore.privacy.calibration import split_custom
from dpcore.privacy.noise import NoiseSource

__all__ = ["PRIOR_NOTE", "THETA", "WITHIN_LEAF", "PrivTreeAG"]

#: PrivTree's split threshold θ (the paper's default).
THETA = 0
#: the within-leaf rule this mechanism's releases state (:mod:`dpcore.points.within_leaf`)
WITHIN_LEAF = PIECEWISE_LINEAR
#: what the blocks' expected error leaves out (appended to their row's note)
PRIOR_NOTE = ("Expected error of whole blocks only (their noise after least squares): a query that cuts a block is "
              "answered by the sloping within-block density, whose error these figures do not model (measured on "
              "held-out shapes: 0.71x AG's mean relative error at ε 0.1, 0.80x at ε 1).")


class PrivTreeAG(PointsMechanism):
    """PrivTree's leaves, AG's second level, the piecewise-linear prior; see the module docstring."""

    name = "privtree_ag"
    title = "PrivTree with AG's second level, smoothed"
    summary = (
        "PrivTree's adaptive quadtree with a small share of ε as the first level, every leaf cut into "
        "an AG-style sub-grid sized from its noisy count, and queries that cut a block answered by a "
        "density that slopes towards the neighbouring blocks."
    )
    when_to_use = (
        "Range queries on clustered or uneven data (cities, roads, clusters of many sizes), at ε from "
        "about 0.1 to 1: measured at 0.71-0.80x AG's error on shapes held out from its tuning."
    )
    reference = (
        "Zhang, Xiao & Xie, 'PrivTree', ACM SIGMOD 2016, with the second level of Qardaji, Yang & Li, "
        "'Differentially private grids for geospatial data', ICDE 2013 (and a piecewise-linear within-cell "
        "prior, after Zeighami et al., PVLDB 2022)"
    )
    definitions = ("pure",)
    is_tree = True
    needs_n_guess = True
    params = (
        Param("tree_share", "Share of ε for the tree", float, 0.1,
              "Part of the budget spent on PrivTree's split decisions (θ = 0); the rest counts the "
              "leaves and their blocks. 0.1 was chosen on training shapes only.",
              minimum=0.01, maximum=0.9, advanced=True),
        Param("leaf_share", "Share of the counts' budget for the leaves", float, 0.2,
              "Part of what the tree leaves spent on the leaves' counts, which size their blocks; the "
              "blocks get the rest. 0.2 was chosen on training shapes only.",
              minimum=0.05, maximum=0.95, advanced=True),
        Param("c2", "Constant c2 (blocks)", float, 7.5,
              "c2 in m2 = ceil(sqrt(n'·ε₂/(c2·k))) blocks per side of a leaf with released count n' and k "
              "records per person (AG's paper: 5). Larger gives fewer blocks. 7.5 was chosen on training "
              "shapes only.",
              minimum=0.5, maximum=1000.0, advanced=True),
    )

    # -- privacy cost ------------------------------------------------------------------------
    @staticmethod
    def budgets(cost: PrivacyCost, params: dict[str, Any]) -> tuple[float, float, float]:
        """(ε_tree, ε₁, ε₂): exact sum at most ε (module docstring, step 4)."""
        s, a = float(params["tree_share"]), float(params["leaf_share"])
        eps_tree, eps_count = split_custom(cost.value, [s, 1.0 - s])
        e1, e2 = split_custom(eps_count, [a, 1.0 - a])
        return eps_tree, e1, e2

    # -- plan ---------------------------------------------------------------------------------
    def _levels(self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], sensitivity: int,
                n_leaves: int, n_blocks: int, n_tests: int | None, preview: bool,
                extra_leaves: dict[str, Any] | None = None) -> tuple[LevelPlan, ...]:
        eps_tree, e1, e2 = self.budgets(cost, params)
        tree = split_test_level(grid, eps_tree, sensitivity, THETA, n_tests)
        n_leaves, n_blocks = max(int(n_leaves), 1), max(int(n_blocks), 1)
        even = ("The tree and the blocks depend on the data; this preview assumes the guessed number of points "
                "spread evenly. " if preview else "")
        leaves = count_level(1, f"Leaf counts ({'about ' if preview else ''}{n_leaves:,} leaves)", pure(e1),
                             sensitivity, n_leaves, grid.n_cells / n_leaves, False,
                             note=even + "They size each leaf's blocks and are combined with them.")
        blocks = count_level(2, f"Block counts ({'about ' if preview else ''}{n_blocks:,} blocks)", pure(e2),
                             sensitivity, n_blocks, grid.n_cells / n_blocks, True, note=even + PRIOR_NOTE)
        leaves, blocks = after_inference(leaves, blocks, n_leaves, n_blocks, extra_leaves,
                                         {"mean_blocks_per_leaf": n_blocks / n_leaves})
        return tree, leaves, blocks

    def plan_levels(
        self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], *, sensitivity: int, n_estimate: float | None
    ) -> tuple[LevelPlan, ...]:
        eps_tree, _, e2 = self.budgets(cost, params)
        n = max(float(n_estimate or 0.0), 0.0)
        even, most = expected_leaves(grid, n, eps_tree, sensitivity, THETA)
        n_leaves = max(int(round(even)), 1)
        cells = grid.n_cells / n_leaves
        # preview only: every leaf of about `cells` cells holds its share of n
        m2 = int(second_level_sides(np.array([n / n_leaves]), e2, float(params["c2"]), sensitivity)[0])
        n_blocks = n_leaves * int(max(1, min(m2 * m2, math.floor(cells))))
        return self._levels(grid, cost, params, sensitivity, n_leaves, n_blocks, None, True,
                            {"leaves_evenly_spread": float(even), "leaves_at_most": float(most), "n_estimate": n})

    # -- release ------------------------------------------------------------------------------
    def _release(
        self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: NoiseSource
    ) -> PartitionRelease:
        grid = aggregate.grid
        k = int(aggregate.sensitivity)
        eps_tree, e1, e2 = self.budgets(cost, params)
        # 1. PrivTree's tree (ε_tree)
        t, delta = privtree_parameters(eps_tree, k)
        tree = grow_privtree(aggregate.counts, THETA, t, delta, noise)
        rects, leaf, depth, parent = tree["rects"], tree["leaf"], tree["depth"], tree["parent"]
        li = np.flatnonzero(leaf)
        # 2. the leaves' counts (ε₁): disjoint
        noisy1 = noisy_counts(tree["count"][li], pure(e1), k, noise)
        # 3. AG's blocks in every leaf, sized from its released count only; counted with ε₂
        m2 = second_level_sides(noisy1, e2, float(params["c2"]), k)
        subs, owner = sub_blocks(rects[li], m2, m2)
        noisy2 = noisy_counts(rect_sums_from_prefix(prefix_sums(aggregate.counts), subs), pure(e2), k, noise)
        levels = self._levels(grid, cost, params, k, li.size, subs.shape[0], int(tree["tested"].sum()), False)
        # AG's least squares per leaf and its blocks (each leaf the root of a two-level tree)
        n1, n2 = li.size, subs.shape[0]
        est, sd, ci, _, _ = two_level_consistent(noisy1, noisy2, owner, levels[1], levels[2])
        # the release: PrivTree's nodes (internal ones: sums of their leaves), then the blocks
        n_t = rects.shape[0]
        at_leaf = np.zeros(n_t, dtype=np.float64)
        at_leaf[li] = est[:n1]
        var_leaf = np.zeros(n_t, dtype=np.float64)
        var_leaf[li] = sd[:n1] ** 2
        ci2_leaf = np.zeros(n_t, dtype=np.float64)
        ci2_leaf[li] = ci[:n1] ** 2
        measured = np.full(n_t + n2, np.nan)
        measured[li] = noisy1
        measured[n_t:] = noisy2
        budget = np.zeros(n_t + n2, dtype=np.float64)
        budget[li] = e1
        budget[n_t:] = e2
        public = {"height": int(depth.max()), "delta": int(delta), "split_scale": float(t), "theta": THETA,
                  "epsilon_tree": eps_tree, "epsilon_leaves": e1, "epsilon_blocks": e2, "fanout": BETA,
                  "privtree_leaves": int(n1), "blocks": int(n2),
                  "block_side": {"min": int(m2.min()), "median": float(np.median(m2)), "max": int(m2.max())},
                  "within_leaf": WITHIN_LEAF}
        return self.make_release(
            aggregate, cost, params, levels,
            rects=np.vstack([rects, subs]).astype(np.int64),
            level=np.concatenate([depth, depth[li][owner] + 1]),
            leaf=np.concatenate([np.zeros(n_t, dtype=bool), np.ones(n2, dtype=bool)]),
            noisy=np.concatenate([subtree_sums(parent, depth, at_leaf), est[n1:]]),
            sd=np.concatenate([np.sqrt(subtree_sums(parent, depth, var_leaf)), sd[n1:]]),
            ci95=np.concatenate([np.sqrt(subtree_sums(parent, depth, ci2_leaf)), ci[n1:]]),
            public=public,
            node_budget=budget,
            is_tree=True,
            measured=measured,  # raw, for the data users' files
            within_leaf=WITHIN_LEAF,
        )
