"""DAWA with free bucket starts and node-by-node budgets (Li, Hay, Miklau & Wang, PVLDB 7(5), 2014).

The variant of DAWA closest to its authors' algorithm that has a privacy argument for every step.
:mod:`dpcore.points.mechanisms.dawa` (``dawa``) is kept as the other variant: its buckets are
*aligned* Hilbert blocks and its stage 2 shares the budget per level of the tree.  This one:

1. **Private partition** (Sec. 3), ``ε₁ = partition_share · ε``.  The grid's cells in Hilbert
   order (Sec. 6) are cut into buckets minimising ``Σ_b (dev(x, b) + penalty)``, ``dev`` the L1
   deviation of the bucket from its mean (the reference's cost function), over the candidate
   buckets of Sec. 3.3: intervals whose length is a power of two, **starting anywhere** the
   lattice of ``start_offsets`` allows (every cell for lengths up to ``start_offsets``, multiples
   of ``length / start_offsets`` beyond; the reference allows every start, which is
   ``start_offsets`` at least the number of cells).  Exact integer costs on the ``2^-4`` lattice
   and the exact dynamic programme of :func:`~dpcore.estimate.greedy_h.optimal_interval_partition`.
2. **Workload-aware counts** (Sec. 4), ``ε₂ = ε − ε₁``.  A binary tree over the buckets; the
   budget is shared **node by node**, from the leaves up as GreedyH does, each node's share the
   exact minimiser of the workload's decomposition variance given its subtrees
   (:func:`~dpcore.estimate.greedy_h.node_shares`); the workload is the actual one: random
   rectangles of the curator's query sizes (public, from ``workload_seed``) or uploaded
   rectangles.  Noisy node counts, least squares over the tree
   (:mod:`dpcore.estimate.tree_inference`), each bucket's estimate spread evenly over its cells.

Parameters
    Those of ``dawa`` (``partition_share`` ¼, ``workload``, ``rectangles``, ``queries_per_size``,
    ``workload_seed``) and ``start_offsets`` (8): how many start positions a bucket of a given
    length may take within one length (a power of two, 1 … 64; 1 is the aligned buckets).

Privacy cost (pure ε-DP; ε₁ + ε₂ ≤ ε by sequential composition), step by step
    *Costs.*  Adding or removing one point at cell ``i`` changes ``dev(x, b)`` by less than 2 for
    every interval ``b ∋ i`` and not at all for the others: on the lattice by at most
    ``Δ = 32`` units (``dawa``'s :data:`~dpcore.points.mechanisms.dawa.COST_SENSITIVITY`).
    *Noise.*  Every candidate interval's cost gets independent discrete Laplace noise of scale
    ``t = 2kΔ/ε₁`` (exact rational, :func:`~dpcore.points.mechanisms.dawa.cost_noise_scale`).
    *Penalty.*  A public constant per bucket (``k/ε₂`` plus :data:`FREE_PENALTY_FACTOR` times the cost
    noise's scale, as ``dawa``'s :func:`~dpcore.points.mechanisms.dawa.bucket_penalty`): data-free, so it changes
    nothing below.  *No clamping.*  The reference code clamps each noisy cost from below; we do
    not: the argument below needs a partition's total to be the sum of its intervals' noisy
    costs, and a clamp at a fixed floor breaks the shift argument (a clamped competitor can
    block ``o`` on one neighbour and not on the other whatever ``η_j``), so the penalty does the
    clamp's work (without it the minimum favours many buckets with negative noise).
    *Selection.*  Every partition holds exactly one interval through ``i``, whatever the
    starts (the buckets tile the sequence).  Fix the noise of every interval but ``j``, the one
    through ``i`` that the output partition ``o`` uses.  Partitions through ``j`` differ from
    ``o`` only in intervals without ``i``: their comparisons with ``o`` do not involve ``η_j``
    and are the same on both neighbours.  Partitions through another ``b' ∋ i`` beat ``o``
    unless ``η_j < T`` (``≤`` where the fixed order lets ``o`` win a tie; an integer threshold
    either way): ``T`` is their least total less ``o``'s total without ``η_j``.  On the
    neighbour every ``b' ∋ i`` moves by at most ``Δ`` and so does ``j``: ``T`` moves by at most
    ``2Δ``, and ``P(η < T − 2Δ) ≥ e^{−2Δ/t} P(η < T)`` for the discrete Laplace: ``ε₁/k`` per
    point, ``ε₁`` for ``k`` points of a person.  The DP's tie rule (total, then the last
    bucket's length, recursively) is a total order on partitions that ignores the costs, as the
    argument needs.  No other function of the noisy costs is released.
    *Counts.*  The partition is public to stage 2 (post-processing of stage 1), and so are the
    workload and hence every node's share ``s_v`` (a function of the partition and the workload
    only).  One point changes by one the count of each node on the path from its bucket to the
    root; node ``v`` gets ``ε_v ≤ s_v ε₂`` (shares rounded down to ``2^(−q/16)``, so few
    samplers serve all nodes) and discrete Laplace noise of scale ``k/ε_v``.  Shares along every
    root-to-leaf path add up to at most 1.  One point moves the counts on its path only, by 1
    each, and costs ``Σ_{v on path} ε_v/k ≤ ε₂/k``; a person's ``k`` points (on up to ``k``
    different paths) cost at most ``ε₂`` (sequential composition; nodes off the paths do not
    change).
    *Spreading.*  Least squares and spreading a bucket over its cells are post-processing.

Release
    Each bucket is cut into its aligned dyadic Hilbert blocks (:func:`~dpcore.estimate.greedy_h.dyadic_pieces`),
    each a rectangle of the grid; the rectangles are the leaves, each holding its share (by
    cells) of its bucket's least-squares estimate, SD and half-width.  Public facts: the number
    of buckets and rectangles, the range of the node budgets and the workload's noise bound.

Expected error
    As ``dawa``: before release only the noise of the finest partition (one bucket per cell) can
    be stated; the release states the node budgets it used and an upper bound on the workload's
    noise SD (the canonical decomposition, which least squares never does worse than).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.errors import ParameterError
from dpcore.estimate import greedy_h as gh
from dpcore.estimate.tree_inference import consistent_release
from dpcore.points.mechanisms.base import Param, count_level
from dpcore.points.mechanisms.dawa import (
    DAWA,
    FRAC_BITS,
    _block_rects,
    _finest_runs,
    _hilbert_numbering,
    _random_groups,
    bucket_penalty,
    cost_noise_scale,
    partition_row,
)
from dpcore.points.release import LevelPlan, PartitionRelease
from dpcore.privacy.budget import PrivacyCost, pure
from dpcore.privacy.calibration import laplace_scale_for_epsilon
from dpcore.privacy.noise import NoiseSource, discrete_laplace_interval, discrete_laplace_variance

#: Node shares are rounded down to ``2^(−q/SHARE_STEPS)``.
SHARE_STEPS = 16
#: Multiple of the cost noise's scale in the public bucket penalty.  Free starts offer the minimum
#: many more partitions than aligned buckets, so more of them win by negative noise alone; ``dawa``'s
#: factor 2 gave 7,000 buckets of median 4 cells on 4 Gaussian clusters (10^5 points, 256², not a
#: data set of the head-to-head), factor 4 about 50–200 and a third to a half of the error.
FREE_PENALTY_FACTOR = 4.0
#: Relative margin kept below ε₂ on every path (float rounding of the shares' products).
PATH_MARGIN = 1e-9
#: A rectangle over the buckets as :func:`~dpcore.estimate.greedy_h.node_decompositions` takes it:
#: the buckets it touches, the share of each it covers, and the buckets it covers whole as runs.
_Query = tuple[NDArray[np.int64], NDArray[np.float64], tuple[NDArray[np.int64], NDArray[np.int64]] | None]


def node_epsilons(shares: list[NDArray[np.float64]], e2: float) -> list[NDArray[np.float64]]:
    """``ε_v = ε₂ · 2^(−q/16)`` with the largest ``q`` making it at most ``s_v ε₂ (1 − 10⁻⁹)``;
    0 for an unmeasured node.  Every root-to-leaf path then spends less than ``ε₂``.

    >>> [e.tolist() for e in node_epsilons([np.array([0.5, 0.0])], 1.0)]
    [[0.47880164034928685, 0.0]]
    """
    return _node_budgets(shares, e2)[0]


def _node_budgets(shares: list[NDArray[np.float64]], e2: float
                  ) -> tuple[list[NDArray[np.float64]], list[NDArray[np.int64]]]:
    """:func:`node_epsilons` and every node's step ``q`` (0 for an unmeasured node; at least 1 for a
    measured one, its share below 1): nodes of one step have one budget, so :func:`_variances` finds
    the distinct budgets by counting the steps made here rather than again from the floats."""
    units, steps = _unit_budgets(shares)
    return [e2 * u for u in units], steps


def _unit_budgets(shares: list[NDArray[np.float64]]) -> tuple[list[NDArray[np.float64]], list[NDArray[np.int64]]]:
    """:func:`_node_budgets` for ``ε₂ = 1``: ``2^(−q/16)`` (0 for an unmeasured node) and the steps
    ``q``.  Times ``ε₂`` they are the budgets to the bit (the same product), so a plan's finest design
    keeps them (:attr:`_RandomWorkload.finest`) and multiplies once per ε."""
    units, steps = [], []
    for s in shares:
        s = np.asarray(s, dtype=np.float64) * (1.0 - PATH_MARGIN)
        q = np.ceil(-SHARE_STEPS * np.log2(np.where(s > 0, s, 1.0)))
        units.append(np.where(s > 0, np.exp2(-q / SHARE_STEPS), 0.0))
        steps.append(q.astype(np.int64))
    return units, steps


class DAWAFree(DAWA):
    name = "dawa_free"
    title = "DAWA, free bucket starts (the authors' algorithm)"
    summary = (
        "DAWA as its authors built it: buckets along the Hilbert curve may start anywhere, and the "
        "hierarchy that counts them shares the budget node by node for your queries."
    )
    when_to_use = (
        "As DAWA, where clusters do not line up with the aligned blocks: free starts need fewer "
        "buckets, and node-by-node budgets put the noise where your queries do not look."
    )
    params = (
        *DAWA.params,
        Param("start_offsets", "Bucket starts per length", int, 8,
              "A bucket of L cells may start at every cell (L ≤ this) or every L/this cells; a power "
              "of two. 1 gives aligned buckets; more is closer to the paper and slower.",
              minimum=1, maximum=64, advanced=True),
    )

    def check_public(self, grid: Grid, cost: PrivacyCost, params: dict[str, Any]) -> None:
        """As ``dawa`` (grids up to 2,048²); ``start_offsets`` a power of two."""
        off = int(params["start_offsets"])
        if off & (off - 1):
            raise ParameterError(f"Bucket starts per length must be a power of two (got {off}); e.g. 8.")
        super().check_public(grid, cost, params)

    # -- stage 2 design (public: partition and workload) ---------------------------------------
    @staticmethod
    def _node_design(m: int, queries: list[_Query], index: NDArray[np.int64]
                     ) -> tuple[gh.BucketTree, list[NDArray[np.float64]], tuple[list[tuple[NDArray, NDArray]], NDArray]]:
        """The tree over ``m`` buckets, every node's share (per level,
        :func:`~dpcore.estimate.greedy_h.node_shares` of the workload's uses of the nodes) and the
        queries' uses: each distinct rectangle's (sparse: flat node index and count, levels from the
        leaves up) and which of them each query is (``index``, :func:`~dpcore.points.mechanisms.dawa.distinct_rects`).
        ``queries``: each distinct rectangle over the buckets, in order of first use, as
        :func:`~dpcore.estimate.greedy_h.node_decompositions` takes it (:func:`_bucket_queries`, or
        runs of the finest partition, :func:`_finest_design`).  A rectangle the workload repeats (a
        small grid has few distinct ones) is decomposed once; the uses still add up query by query,
        in the workload's order, so the sums are the same to the bit."""
        tree = gh.BucketTree(m)
        offsets = np.cumsum([0] + [tree.n_nodes(lv) for lv in range(tree.height + 1)])
        decs = gh.node_decompositions(tree, queries)  # all the rectangles at once
        flats = [(np.concatenate([i + offsets[lv] for lv, (i, _) in enumerate(dec)]),
                  np.concatenate([v for _, v in dec])) for dec in decs]
        # one bincount per level over every query's uses in the workload's order: the same
        # sequence of float additions from 0 as adding query by query (np.add.at), in one call
        uses, which = [], index.tolist()
        for lv in range(tree.height + 1):
            n = tree.n_nodes(lv)
            i = np.concatenate([np.zeros(0, dtype=np.int64)] + [decs[q][lv][0] for q in which])
            v = np.concatenate([np.zeros(0)] + [decs[q][lv][1] for q in which])
            uses.append(np.bincount(i, weights=v, minlength=n))  # node_decomposition's nodes of lv are < n
        return tree, gh.node_shares(tree, uses), (flats, index)

    def _stage2_levels(self, e1: float, e2: float, k: int, tree: gh.BucketTree, eps: list[NDArray[np.float64]],
                       steps: list[NDArray[np.int64]], per_query: tuple[list[tuple[NDArray, NDArray]], NDArray],
                       n_cells: int, note: str) -> tuple[LevelPlan, ...]:
        """The partition's row (as ``dawa``), the inner nodes' and the buckets' rows, with the
        workload's noise bound on the last (the node budgets and their steps: :func:`_node_budgets`)."""
        first = partition_row(e1, k, n_cells)
        leaf_min = float(eps[0].min())
        rows = [first]
        stats = {f"level_{lv}": {"min": float(e.min()), "max": float(e.max()), "measured": int((e > 0).sum())}
                 for lv, e in enumerate(eps)}
        if tree.height > 0:
            inner = sum(int((e > 0).sum()) for e in eps[1:])
            row = count_level(1, f"Hierarchy: {inner:,} measured inner nodes (budgets per node)",
                              pure(max(e2 - leaf_min, 1e-300)), k, max(inner, 1), n_cells / max(inner, 1), False,
                              note="Each node has its own budget; along every path from a bucket to the root "
                                   "the inner nodes spend at most ε₂ less the bucket's own.")
            rows.append(dataclasses.replace(row, extra={"node_budgets": stats}))
        leaf = count_level(len(rows), f"Buckets: {tree.m:,} (the least-funded bucket shown)", pure(leaf_min), k,
                           tree.m, n_cells / tree.m, True, note=note)
        var = np.concatenate([_variances(e, q, k) for e, q in zip(eps, steps, strict=True)])
        flats, which = per_query
        once = np.array([float((var[i] * v).sum()) for i, v in flats])  # one sum per distinct rectangle
        bound = np.sqrt(once[which]) if which.size else np.zeros(1)
        extra = {"node_budgets": stats,
                 "workload_noise_sd_bound": {"mean": float(np.sqrt(np.mean(bound ** 2))), "max": float(bound.max())}}
        rows.append(dataclasses.replace(leaf, extra=extra))
        return tuple(rows)

    def _allocate(self, grid: Grid, params: dict[str, Any], e2: float,
                  covered: Callable[[int, tuple[int, ...]], tuple[NDArray, NDArray]], sizes: NDArray[np.int64]
                  ) -> tuple[gh.BucketTree, tuple[list[NDArray[np.float64]], list[NDArray[np.int64]]], tuple]:
        """The release's stage 2 design on its partition: the tree, the node budgets with their steps
        (:func:`_node_budgets`) and the queries' uses."""
        distinct, index = self._workload_groups(grid, params)
        tree, shares, per_query = self._node_design(int(sizes.size), _bucket_queries(covered, sizes, distinct), index)
        return tree, _node_budgets(shares, e2), per_query

    # -- plan ------------------------------------------------------------------------------------
    def plan_levels(self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], *, sensitivity: int,
                    n_estimate: float | None) -> tuple[LevelPlan, ...]:
        e1, e2 = self.budgets(cost, params)
        if params["workload"] == "uploaded":
            tree, shares, per_query = _finest_design(grid, self._workload_groups(grid, params))
            eps, steps = _node_budgets(shares, e2)
        else:
            tree, per_query, units, steps = _random_workload(grid, params).finest
            eps = [e2 * u for u in units]  # = _node_budgets(shares, e2)
        note = ("Preview for one bucket per cell: the partition is chosen from the data, so the buckets and "
                "their budgets are known only at release.")
        levels = self._stage2_levels(e1, e2, sensitivity, tree, eps, steps, per_query, grid.n_cells, note)
        return tuple(dataclasses.replace(lv, extra={**lv.extra, "finest_partition": True}) if lv.in_partition
                     else lv for lv in levels)

    # -- release ---------------------------------------------------------------------------------
    def _partition(self, x: NDArray[np.int64], e1: float, e2: float, k: int, offsets: int, noise: NoiseSource
                   ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Stage 1: noisy costs of every candidate interval, the least-cost partition."""
        costs = gh.free_interval_costs(x, FRAC_BITS, offsets)
        penalty = bucket_penalty(e1, e2, k, FREE_PENALTY_FACTOR)
        t = cost_noise_scale(e1, k)
        for c in costs:  # in place: the costs are this call's own (no copy of ~5 M costs on 1,024²)
            c += penalty
            c += noise.discrete_laplace(t, c.size)
        return gh.optimal_interval_partition(costs, offsets)

    def _release(self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: NoiseSource
                 ) -> PartitionRelease:
        grid, k = aggregate.grid, aggregate.sensitivity
        e1, e2 = self.budgets(cost, params)
        rr, cc = self._hilbert(grid)
        pos = _hilbert_numbering(grid.rows, grid.cols)[0]
        x = np.zeros(rr.size, dtype=np.int64)
        x[pos] = np.asarray(aggregate.counts, dtype=np.int64)  # each cell at its place on the curve; padding 0
        start, length = self._partition(x, e1, e2, k, int(params["start_offsets"]), noise)

        # public from here: the buckets, their aligned pieces and the pieces' rectangles
        p_start, p_len, owner = gh.dyadic_pieces(start, length)
        rects = _block_rects(rr, cc, p_start, p_len, grid)
        p_size = (rects[:, 1] - rects[:, 0]) * (rects[:, 3] - rects[:, 2])
        size = np.bincount(owner, weights=p_size, minlength=start.size).astype(np.int64)
        keep = size > 0  # buckets wholly in the padding hold no cell of the grid
        new_id = np.cumsum(keep) - 1
        length_all = length
        start, length, size = start[keep], length[keep], size[keep]
        piece_ok = keep[owner] & (p_size > 0)
        rects, p_size, owner = rects[piece_ok], p_size[piece_ok], new_id[owner[piece_ok]]
        m = int(size.size)
        prefix = np.concatenate([[0], np.cumsum(x)])
        true_b = prefix[start + length] - prefix[start]
        if params["workload"] == "uploaded":
            # the buckets tile the curve: each cell's bucket, read at its place on the curve
            bucket_of_cell = np.repeat(new_id, length_all)[pos]

            def covered(j: int, rect: tuple[int, ...]) -> tuple[NDArray, NDArray]:
                return _covered(bucket_of_cell, m, rect)
        else:  # the random rectangles' cells as runs along the curve (public, kept): no cell read
            runs = _random_workload(grid, params).runs
            first = np.cumsum(size) - size  # the buckets tile the grid's cells in curve order

            def covered(j: int, rect: tuple[int, ...]) -> tuple[NDArray, NDArray]:
                return _runs_cover(runs[j], first, size)

        tree, (eps, steps), per_query = self._allocate(grid, params, e2, covered, size)
        levels = self._stage2_levels(e1, e2, k, tree, eps, steps, per_query, grid.n_cells, "")
        est, sd, ci = self._counts(tree, eps, true_b, k, noise)
        share = p_size / size[owner]
        public = {
            "buckets": m, "rectangles": int(rects.shape[0]),
            "bucket_cells": {"min": int(size.min()), "median": float(np.median(size)), "max": int(size.max())},
            "start_offsets": int(params["start_offsets"]),
            "node_budgets": levels[-1].extra["node_budgets"],
            "workload_noise_sd_bound": levels[-1].extra["workload_noise_sd_bound"],
        }
        n = int(rects.shape[0])
        return self.make_release(
            aggregate, cost, params, levels, rects=rects.astype(np.int64),
            level=np.full(n, levels[-1].level, dtype=np.int64), leaf=np.ones(n, dtype=bool),
            noisy=est[owner] * share, sd=sd[owner] * share, ci95=ci[owner] * share, public=public,
            node_budget=eps[0][owner])  # each rectangle: its bucket's own budget

    @staticmethod
    def _counts(tree: gh.BucketTree, eps: list[NDArray[np.float64]], true_b: NDArray[np.int64], k: int,
                noise: NoiseSource) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """Noisy node counts (one sampler per distinct budget), least squares; the buckets' rows."""
        parent, depth, noisy, sd_own, ci_own = [], [], [], [], []
        offset = 0
        for d, lv in enumerate(range(tree.height, -1, -1)):
            nodes = tree.n_nodes(lv)
            parent.append(offset - tree.n_nodes(lv + 1) + np.arange(nodes) // 2 if lv < tree.height
                          else np.full(nodes, -1, dtype=np.int64))
            depth.append(np.full(nodes, d, dtype=np.int64))
            true = tree.level_sums(true_b, lv).astype(np.int64)
            val, sd, ci = np.zeros(nodes), np.full(nodes, np.inf), np.zeros(nodes)
            for e in np.unique(eps[lv][eps[lv] > 0]).tolist():
                at = np.flatnonzero(eps[lv] == e)
                t, var, half = _facts(e, k)
                val[at] = true[at] + noise.discrete_laplace(t, at.size)
                sd[at] = math.sqrt(var)
                ci[at] = half
            noisy.append(val)
            sd_own.append(sd)
            ci_own.append(ci)
            offset += nodes
        est, sd, ci = consistent_release(np.concatenate(parent), np.concatenate(depth), np.concatenate(noisy),
                                         np.concatenate(sd_own), np.concatenate(ci_own))
        leaf = slice(offset - tree.m, offset)
        return est[leaf], sd[leaf], ci[leaf]


def _finest_design(grid: Grid, groups: tuple[Any, ...], runs: Sequence[tuple[NDArray, NDArray]] | None = None
                   ) -> tuple[gh.BucketTree, list[NDArray[np.float64]], tuple]:
    """The plan's stage 2 on the finest partition (every cell a bucket): the tree, every node's
    share (:func:`~dpcore.estimate.greedy_h.node_shares`) and the queries' uses, for the workload's
    distinct rectangles ``groups`` (:func:`~dpcore.points.mechanisms.dawa.distinct_rects`), whose
    cells as runs of the finest partition are ``runs`` (else found here, :func:`_rect_runs`)."""
    distinct, index = groups
    if runs is None:
        runs = _rect_runs(grid, distinct)
    # every bucket a cell: each rectangle's buckets covered whole, as runs (node_decomposition's own)
    empty = (np.zeros(0, dtype=np.int64), np.zeros(0))
    return DAWAFree._node_design(grid.n_cells, [(*empty, r) for r in runs], index)


def _bucket_queries(covered: Callable[[int, tuple[int, ...]], tuple[NDArray, NDArray]], sizes: NDArray[np.int64],
                    distinct: Sequence[tuple[int, ...]]) -> list[_Query]:
    """Each distinct rectangle over a release's buckets of ``sizes`` cells, in order: the buckets it
    touches and the share of each bucket's cells it covers (``covered(j, rect)``: the buckets and its
    cells in each, :func:`_covered` or :func:`_runs_cover`)."""
    queries: list[_Query] = []
    for j, rect in enumerate(distinct):  # in order of first use
        ids, cells = covered(j, rect)
        queries.append((ids, cells / np.maximum(sizes[ids], 1), None))
    return queries


def _rect_runs(grid: Grid, rects: Sequence[tuple[int, ...]]) -> list[tuple[NDArray, NDArray]]:
    """Each rectangle's cells as maximal runs ``[lo, hi)`` of their numbers in curve order
    (:func:`~dpcore.points.mechanisms.dawa._finest_runs`)."""
    runs = _finest_runs(grid, DAWA._finest_buckets(grid))
    return [runs(rect) for rect in rects]


def _runs_cover(runs: tuple[NDArray, NDArray], first: NDArray[np.int64], size: NDArray[np.int64]
                ) -> tuple[NDArray, NDArray]:
    """:func:`_covered`'s answer from the rectangle's cells as runs ``[lo, hi)`` of their numbers in
    curve order (:func:`_rect_runs`), for buckets that hold the numbers ``[first, first + size)``:
    the cells up to each bucket's edges counted from the runs (``Σ_j clip(p − lo_j, 0, hi_j − lo_j)``
    at ``p``), not read cell by cell (a workload's 96 rectangles on 1,024²: 0.013 -> 0.002 s)."""
    lo, hi = runs
    if not lo.size or not size.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    before = np.concatenate([[0], np.cumsum(hi - lo)])  # the runs' cells before each run
    edge = np.append(first, first[-1] + size[-1])
    j = np.searchsorted(lo, edge, side="right")  # the runs starting at or before each edge
    upto = before[j] - np.maximum(np.where(j > 0, hi[j - 1], 0) - edge, 0)
    count = np.diff(upto)
    ids = np.flatnonzero(count)
    return ids, count[ids]


class _RandomWorkload:
    """The random workload's stage-2 facts on one grid shape and seed: public (the grid's shape and
    the seeded rectangles, no data), the same at every call, so made once per grid and seed
    (:func:`_random_workload`) and shared read-only, as the workload itself.

    ``runs``: each distinct rectangle's cells as runs along the curve (:func:`_rect_runs`), for the
    plan's finest design and every release's (:func:`_runs_cover`).  ``finest``, made at the first
    plan: the finest partition's design (:func:`_finest_design`: the tree and the queries' uses;
    0.1 s of every plan on 1,024², a million buckets) and its node budgets for ``ε₂ = 1`` with their
    steps (:func:`_unit_budgets`), so a plan finds its budgets by one product (0.012 -> 0.003 s on
    1,024²).  Memory: 32 MB of budgets for 1,024² (128 MB for 2,048²) per grid and seed kept, two at
    most; int16 steps would save a third but made each plan's variances 5 ms slower.
    """

    def __init__(self, rows: int, cols: int, per_size: int, seed: int) -> None:
        self.grid = Grid(Bounds(0.0, 0.0, 1.0, 1.0), rows, cols)
        self.groups = _random_groups(rows, cols, per_size, seed)
        runs = _rect_runs(self.grid, self.groups[0])
        for a in (a for pair in runs for a in pair):
            a.setflags(write=False)
        self.runs: tuple[tuple[NDArray, NDArray], ...] = tuple(runs)

    @functools.cached_property
    def finest(self) -> tuple[gh.BucketTree, tuple, list[NDArray[np.float64]], list[NDArray[np.int64]]]:
        """The tree, the queries' uses, and the node budgets for ``ε₂ = 1`` with their steps."""
        tree, shares, (flats, which) = _finest_design(self.grid, self.groups, self.runs)
        units, steps = _unit_budgets(shares)
        for a in (*units, *steps, *(a for pair in flats for a in pair)):
            a.setflags(write=False)
        return tree, (flats, which), units, steps


def _random_workload(grid: Grid, params: dict[str, Any]) -> _RandomWorkload:
    """The kept :class:`_RandomWorkload` of the grid's shape and the parameters' random workload."""
    return _random_workload_of(grid.rows, grid.cols, int(params["queries_per_size"]), int(params["workload_seed"]))


@functools.lru_cache(maxsize=2)
def _random_workload_of(rows: int, cols: int, per_size: int, seed: int) -> _RandomWorkload:
    return _RandomWorkload(rows, cols, per_size, seed)


def _covered(bucket_of_cell: NDArray[np.int64], m: int, rect: tuple[int, ...]) -> tuple[NDArray, NDArray]:
    """The buckets (of ``m``) the rectangle ``(r0, r1, c0, c1)`` touches, increasing, and its
    cells in each: ``np.unique``'s answer, by counting (no sort) where the buckets are few."""
    r0, r1, c0, c1 = rect
    block = bucket_of_cell[r0:r1, c0:c1]
    if m > 4 * block.size:
        return np.unique(block, return_counts=True)
    count = np.bincount(block.ravel(), minlength=m)
    ids = np.flatnonzero(count)
    return ids, count[ids]


def _scale(epsilon: float, k: int) -> Fraction:
    """The exact rational discrete Laplace scale ``k/ε`` (spends exactly ``ε``)."""
    return laplace_scale_for_epsilon(epsilon, k)


def _facts(epsilon: float, k: int) -> tuple[Fraction, float, int]:
    """A node budget's exact scale (:func:`_scale`), noise variance and 95 % half-width (the budgets
    are ``ε₂ · 2^(−q/16)``, few per ε₂: asked once per distinct budget, the facts kept by
    :mod:`dpcore.privacy.noise`)."""
    t = _scale(epsilon, k)
    return t, discrete_laplace_variance(t), discrete_laplace_interval(t)


def _variances(eps: NDArray[np.float64], steps: NDArray[np.int64], k: int) -> NDArray[np.float64]:
    """Noise variance of every node (0 where unmeasured), one computation per distinct budget.

    The budgets are ``ε₂ · 2^(−q/16)`` (:func:`node_epsilons`), so the distinct ones are found by
    their steps ``q`` (:func:`_node_budgets`), counted rather than sorted (the plan's finest partition
    has a million buckets); checked to be exactly one value per step, else found by sorting."""
    if steps.size and int(steps.min()) < 0:  # not steps of _node_budgets (a share above 1): by sorting
        return _variances_sorted(eps, k)
    value = np.zeros(int(steps.max(initial=0)) + 1)
    value[steps] = eps  # each step's budget: a node's (any one: the check below covers them all)
    if not np.array_equal(value[steps], eps):  # not one value per step: by sorting
        return _variances_sorted(eps, k)
    var = np.zeros(value.size)
    live = np.flatnonzero(value > 0)
    var[live] = [discrete_laplace_variance(_scale(v, k)) for v in value[live].tolist()]
    return var[steps]


def _variances_sorted(eps: NDArray[np.float64], k: int) -> NDArray[np.float64]:
    """:func:`_variances` of any budgets: one computation per distinct budget, found by sorting."""
    out = np.zeros(eps.size)
    for v in np.unique(eps[eps > 0]).tolist():
        out[eps == v] = discrete_laplace_variance(_scale(v, k))
    return out
