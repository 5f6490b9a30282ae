"""KD-tree: the private kd-tree of Cormode, Procopiuc, Srivastava, Shen & Yu (ICDE 2012).

Structure (data-dependent, private)
    The root is the whole grid.  A node at depth ``d`` splits its fine-cell range in two
    along columns (x, longitude) when ``d`` is even and rows (y) when ``d`` is odd, at a
    private median; when its range has one line on that axis it splits the other one, and
    a single cell is a leaf.  Splitting stops at the height ``h``.

Private medians: report-noisy-max (the "Median search" level)
    A node with ``L`` lines on its axis has candidates ``j = 1..L−1`` (both halves keep at
    least one line).  The utility of ``j`` is ``u_j = −|2·r_j − n|``, with ``r_j`` the points
    in the first ``j`` lines and ``n`` the node's points: ``−2·|rank − count/2|``, an integer
    whose sensitivity is ``Δu = k`` (one person moves ``2r − n`` by at most ``k``).  We
    release ``argmax_j (u_j + Z_j)`` with ``Z_j`` i.i.d. discrete Laplace of scale
    ``t = 2Δu/ε_m`` (exact sampler), ties to the smallest ``j`` (a fixed, data-independent
    rule).

    Why this is ε_m-DP (report noisy max; Dwork & Roth 2014, Claim 3.9 for counting
    queries, with the factor 2 for utilities that can move in opposite directions).  Fix
    the other candidates' noise; ``j`` wins iff ``Z_j >= T(D)`` for an integer threshold
    ``T`` (integer utilities and noise; the fixed tie rule decides the boundary).  For neighbours ``|u_i(D) − u_i(D')| <= Δu`` for all ``i``, so
    ``T(D') <= T(D) + 2Δu``.  The discrete Laplace has ``P(Z >= a+1) >= e^{−1/t} P(Z >= a)``
    for every integer ``a``, hence ``P(win | D') >= e^{−2Δu/t} P(win | D) = e^{−ε_m} P(win | D)``.
    Like McSherry & Talwar's exponential mechanism it favours high utility exponentially;
    it is not the same distribution (that would need Gumbel noise), but it has the same
    guarantee, uses only integers and our exact noise source, and the tests check it
    against exact output probabilities on small examples.

    The nodes of one depth are disjoint, so their selections cost ``ε_m`` together
    (parallel composition; a person with ``c_v <= k`` records in node ``v`` changes its
    utilities by ``c_v`` and costs ``c_v/k · ε_m`` there).  The median share (default
    15 % of ε, as in the HTF paper's setting of this baseline) is spread evenly over the
    ``h`` split depths.

Counts and consistency
    The rest of ε gives every node a noisy count, geometric over the depths (root least,
    ratio ``2^(1/3)``, Cormode et al. Eq. 17) or uniform; a leaf above the bottom (a single
    cell) takes its path's remaining budget, so every path spends exactly the count
    budget.  The released ``noisy`` values are the weighted least-squares consistent
    counts (:mod:`dpcore.estimate.tree_inference`), ``sd`` their exact post-inference SD and
    ``ci95`` the node's raw 95 % half-width scaled by the same SD ratio.  The plan shows
    the raw noise of every depth and, in ``details``, the post-inference SD of a complete
    binary tree with those budgets.

Default height 16
    The HTF paper evaluates kd-trees over a range of heights and finds the error
    U-shaped with no rule to pick one; its own (binary) heights on its 1024² benchmark
    are 15–17.  Leaves of a kd-tree hold about equal numbers of points, so a shallow
    tree merges empty land with the edge of a cluster and spreads those points over it:
    in our runs on the paper's synthetic data (1024², one Gaussian cluster, n = 0.1–3.5 M,
    ε = 0.1 / 0.5, 2–10 % queries) height 8 was 10–20x worse than 16 in MRE and RMSE
    at 1–3.5 M points (2–8x at 100 k); the best height was 12–16 for 100 k points and
    16–20 for 1–3.5 M.  Beyond that the thinner median budget (``0.15 ε/h`` per level)
    makes deep splits noise-driven.  The range offered is 1–20.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcore.data.domain import Aggregate, Grid, prefix_sums, rect_sums_from_prefix
from dpcore.estimate.tree_inference import complete_tree_variances, consistent_release
from dpcore.points.mechanisms.base import Param, PointsMechanism
from dpcore.points.mechanisms.quadtree import (
    level_budgets,
    node_budgets,
    noisy_tree_counts,
    tree_levels,
)
from dpcore.points.release import LevelPlan, PartitionRelease
from dpcore.privacy import noise as _noise
from dpcore.privacy.budget import PrivacyCost, pure
from dpcore.privacy.calibration import interval_half_width, laplace_scale_for_epsilon, split_custom
from dpcore.privacy.noise import NoiseSource


def report_noisy_max(scores: NDArray[np.int64], group: NDArray[np.int64], n_groups: int,
                     epsilon: float, sensitivity: int, noise: NoiseSource) -> NDArray[np.int64]:
    """Index (into ``scores``) of the noisy maximum of every group.

    ``scores`` are integer utilities of sensitivity ``sensitivity``; ``group[i]`` says
    which selection candidate ``i`` belongs to (groups ``0..n_groups-1`` in order,
    contiguous, every group non-empty).  Noise: discrete Laplace of scale ``2·sensitivity/ε``; ties go to the
    first candidate of the group.  Each group's selection is ε-DP (module docstring).
    """
    scale = laplace_scale_for_epsilon(epsilon, 2 * sensitivity)
    group = np.asarray(group, dtype=np.int64)
    noisy = np.asarray(scores, dtype=np.int64) + noise.discrete_laplace(scale, group.size)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    if starts.size != n_groups or np.any(group[starts] != np.arange(n_groups)):
        raise ValueError("report_noisy_max needs contiguous, non-empty groups 0..n_groups-1.")
    best = np.maximum.reduceat(noisy, starts)
    idx = np.arange(group.size)
    first = np.minimum.reduceat(np.where(noisy == best[group], idx, group.size), starts)
    return first


class KDTree(PointsMechanism):
    name = "kdtree"
    title = "KD-tree (private medians, consistent counts)"
    summary = (
        "Halves the area again and again at private medians, alternating east-west and "
        "north-south, with a noisy count in every node made consistent."
    )
    when_to_use = (
        "Clustered data where splits should follow the points. Its error depends strongly on "
        "the height; compare a few heights (a higher tree spends the median budget thinner)."
    )
    reference = (
        "Cormode, Procopiuc, Srivastava, Shen & Yu, 'Differentially private spatial "
        "decompositions', ICDE 2012; consistency: Hay, Rastogi, Miklau & Suciu, VLDB 2010"
    )
    definitions = ("pure",)
    is_tree = True
    params = (
        Param("height", "Tree height", int, 16,
              "Number of halvings from the whole area to the leaves (2^height leaves at most).",
              minimum=1, maximum=20),
        Param("median_share", "Share of ε for choosing the medians", float, 0.15,
              "Part of the budget spent on the split positions, spread evenly over the levels "
              "(15 % as in the HTF paper's comparison). The rest goes to the counts.",
              minimum=0.01, maximum=0.9, advanced=True),
        Param("budget_split", "Count budget across levels", str, "geometric",
              "'geometric' gives each level 2^(1/3) times the budget of the level above "
              "(Cormode et al.); 'uniform' gives every level the same.",
              choices=("geometric", "uniform"), advanced=True),
    )

    # -- helpers ---------------------------------------------------------------------
    @staticmethod
    def effective_height(grid: Grid, height: int) -> int:
        """``min(h, rows + cols − 2)``: no node can be split more often than that."""
        return min(int(height), grid.rows + grid.cols - 2)

    def _budgets(self, cost: PrivacyCost, grid: Grid, params: dict[str, Any]) -> tuple[
            float, float, list[float]]:
        """(median budget per split depth, count budget, count budget per depth)."""
        h = self.effective_height(grid, params["height"])
        if h == 0:  # a single cell: nothing to split, everything counts
            return 0.0, cost.value, [cost.value]
        v_med, v_cnt = split_custom(cost.value, [params["median_share"], 1 - params["median_share"]])
        # the per-depth share rounded down so that h of them never exceed v_med
        per_depth = split_custom(v_med, [1.0] * h)
        return min(per_depth), v_cnt, level_budgets(v_cnt, h + 1, params["budget_split"])

    # -- plan --------------------------------------------------------------------
    def plan_levels(
        self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], *, sensitivity: int, n_estimate: float | None
    ) -> tuple[LevelPlan, ...]:
        eps_med, _, parts = self._budgets(cost, grid, params)
        h = len(parts) - 1
        levels: list[LevelPlan] = []
        if h > 0:
            scale = laplace_scale_for_epsilon(eps_med, 2 * sensitivity)
            levels.append(LevelPlan(
                level=0,
                name=f"Median search ({h} levels, ε = {eps_med:.3g} each)",
                cost=pure(eps_med * h),
                noise="discrete_laplace",
                scale=float(scale),
                sensitivity=int(sensitivity),
                n_counts=int(min(2**h - 1, grid.n_cells - 1)),
                sd=float(np.sqrt(_noise.discrete_laplace_variance(scale))),
                ci95=interval_half_width("discrete_laplace", scale),
                cells_per_count=float(grid.n_cells),
                in_partition=False,
                note=("Report-noisy-max over the candidate split lines of every node; the noise "
                      "is added to the utility −|2·rank − count|, not to a count."),
                extra={"levels": h, "epsilon_per_level": eps_med},
            ))
        # counts: the structure depends on the data; assume a complete binary tree
        nodes = [int(min(2**d, grid.n_cells)) for d in range(h + 1)]
        cells = [grid.n_cells / n for n in nodes]
        var = [_noise.discrete_laplace_variance(laplace_scale_for_epsilon(p, sensitivity))
               for p in parts]
        after = np.sqrt(complete_tree_variances(var, 2))
        levels.extend(tree_levels(len(levels), parts, sensitivity, nodes, cells, after.tolist(),
                                  "nodes",
                                  note="Node counts assume a complete tree; the split positions "
                                  "depend on the data."))
        return tuple(levels)

    # -- release -------------------------------------------------------------------
    def _release(
        self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: NoiseSource
    ) -> PartitionRelease:
        grid = aggregate.grid
        k = aggregate.sensitivity
        eps_med, v_cnt, parts = self._budgets(cost, grid, params)
        h = len(parts) - 1
        P = prefix_sums(aggregate.counts)

        rects = [np.array([[0, grid.rows, 0, grid.cols]], dtype=np.int64)]
        parents = [np.array([-1], dtype=np.int64)]
        first = 0
        for d in range(h):
            cur = rects[-1]
            height = cur[:, 1] - cur[:, 0]
            width = cur[:, 3] - cur[:, 2]
            split = (height > 1) | (width > 1)
            if not split.any():
                break
            # columns at even depths, rows at odd ones; the other axis when only one line
            by_cols = (width > 1) if d % 2 == 0 else (height == 1)
            nodes = np.flatnonzero(split)
            lines = np.where(by_cols, width, height)[nodes]
            n_cand = lines - 1
            group = np.repeat(np.arange(nodes.size), n_cand)
            j = np.arange(group.size) - np.repeat(np.cumsum(n_cand) - n_cand, n_cand) + 1
            node_of = nodes[group]
            r0, r1, c0, c1 = (cur[node_of, i] for i in range(4))
            col_axis = by_cols[node_of]
            # points in the first j lines of the node
            first_part = np.column_stack([r0, np.where(col_axis, r1, r0 + j),
                                          c0, np.where(col_axis, c0 + j, c1)])
            rank = rect_sums_from_prefix(P, first_part)
            total = rect_sums_from_prefix(P, cur[nodes])[group]
            utility = -np.abs(2 * rank - total)
            pick = report_noisy_max(utility, group, nodes.size, eps_med, k, noise)
            cut = j[pick]
            nr0, nr1, nc0, nc1 = (cur[nodes, i] for i in range(4))
            axis_c = by_cols[nodes]
            left = np.column_stack([nr0, np.where(axis_c, nr1, nr0 + cut),
                                    nc0, np.where(axis_c, nc0 + cut, nc1)])
            right = np.column_stack([np.where(axis_c, nr0, nr0 + cut), nr1,
                                     np.where(axis_c, nc0 + cut, nc0), nc1])
            children = np.empty((2 * nodes.size, 4), dtype=np.int64)
            children[0::2], children[1::2] = left, right
            rects.append(children)
            parents.append(np.repeat(nodes, 2) + first)
            first += cur.shape[0]

        all_rects = np.vstack(rects)
        parent = np.concatenate(parents)
        depth = np.concatenate([np.full(r.shape[0], d, dtype=np.int64) for d, r in enumerate(rects)])
        has_child = np.zeros(all_rects.shape[0], dtype=bool)
        has_child[parent[parent >= 0]] = True
        leaf = ~has_child
        budgets = node_budgets(depth, leaf, parts, v_cnt)
        noisy, sd_own, ci_own = noisy_tree_counts(rect_sums_from_prefix(P, all_rects), budgets, k,
                                                  noise)
        est, sd, ci = consistent_release(parent, depth, noisy, sd_own, ci_own)
        levels = self.plan_levels(grid, cost, params, sensitivity=k, n_estimate=None)
        return self.make_release(
            aggregate, cost, params, levels,
            rects=all_rects,
            level=depth,
            leaf=leaf,
            noisy=est,
            sd=sd,
            ci95=ci,
            public={"height": int(depth.max()), "requested_height": params["height"],
                    "median_epsilon_per_level": eps_med, "budget_split": params["budget_split"]},
            node_budget=budgets,
            is_tree=True,
            measured=noisy.astype(np.float64),  # the raw counts, for the data users' files
        )


__all__ = ["KDTree", "report_noisy_max"]
