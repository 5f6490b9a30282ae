"""DAWA: the Data- and Workload-Aware algorithm of Li, Hay, Miklau & Wang (PVLDB 7(5), 2014).

Two stages on the grid's cells laid out along a Hilbert curve (Sec. 6: 2-D data is
linearised by the Hilbert curve, the 1-D algorithm runs on the sequence):

1. **Private partition** (Sec. 3), ``ε₁ = partition_share · ε`` (¼ by default).  The sequence
   is cut into buckets minimising ``Σ_b (dev(x, b) + k/ε₂)``, ``dev(x, b) = Σ_{i∈b}|x_i − x̄_b|``
   the L1 error of spreading the bucket's count evenly and ``k/ε₂`` the expected absolute
   noise of its count in stage 2 (plus, ours, twice the cost noise's scale: see
   :func:`bucket_penalty`); every candidate bucket's cost gets noise.  As the paper does
   for speed (Sec. 3.3), buckets are intervals whose length is a power of two; we take the
   *aligned* ones (start a multiple of the length), so the optimum is a bottom-up tree
   recursion, ``O(n)`` after ``O(n log n)`` exact integer costs, and every bucket is a square
   or a 2 : 1 rectangle of the grid (aligned Hilbert blocks).  The paper and its public code
   allow any start; aligned buckets are a subset, so a region may need a few more buckets.
   :mod:`dpcore.points.mechanisms.dawa_free` (``dawa_free``) is the variant with free starts
   and per-node budgets; both are kept and compared in ``benchmarks/spatial.py``.
2. **Workload-aware counts** (Sec. 4), ``ε₂ = ε − ε₁``.  A binary hierarchy of queries over the
   buckets, with each level's budget share tuned to the workload (GreedyH's aim, made per
   level in closed form, :mod:`dpcore.estimate.greedy_h`); noisy node counts, least-squares
   consistent bucket estimates (:mod:`dpcore.estimate.tree_inference`), each bucket's
   estimate spread evenly over its cells.  The workload is random rectangles of the
   curator's query sizes (the 2 %, 6 % and 10 % of the Compare page and ``evaluate``; public,
   drawn from ``workload_seed``) or uploaded lon/lat rectangles.

Parameters
    ``partition_share`` (¼), ``workload`` (``query_sizes`` | ``uploaded``), ``rectangles``,
    ``queries_per_size`` and ``workload_seed``.

Privacy cost (pure ε-DP; ε₁ + ε₂ = ε by sequential composition)
    *Stage 1.*  Costs live on the lattice ``2^-4`` cell (exact integers: ``|b| dev`` is an
    integer, rounded half up to 1/16).  Adding or removing one point at cell ``i`` changes
    ``dev(x, b)`` by at most ``2(1 − 1/|b|) < 2`` for the intervals ``b ∋ i`` and not at all
    for the others, so a lattice cost moves by at most ``Δ = 32`` units (``< 2·16 + 1``).
    Every aligned interval's cost (single cells too) gets discrete Laplace noise of scale
    ``t = 2kΔ/ε₁`` lattice units, i.e. ``4k/ε₁`` cells.  Argument: every partition holds
    exactly one interval ``b ∋ i``.  Fix the noise of all intervals except the one, ``j``,
    that the output partition ``o`` uses; intervals without ``i`` cost the same on both
    neighbours.  The DP returns the least partition in a fixed order (total noisy cost, then a
    structural key that ignores costs, :func:`~dpcore.estimate.greedy_h.optimal_dyadic_partition`),
    so ``{output = o}`` is ``{η_j < T}`` for an integer ``T`` (the noisy totals of partitions
    through other intervals ``b' ∋ i``, less ``o``'s total without ``η_j``, plus 1 where the key
    lets ``o`` win a tie).  On the neighbour ``T`` moves by ``δ_{b'} − δ_j ≥ −2Δ``, and the
    discrete Laplace satisfies ``P(η < T − 2Δ) ≥ e^{−2Δ/t} P(η < T)``: a report-noisy-min over
    the intervals through ``i`` whose scores move both ways, hence ``2Δ``.  With ``t = 2Δ/ε₁``
    that is ``ε₁``-DP per point, ``kε₁`` for ``k`` points of a person (group privacy), which
    the factor ``k`` in ``t`` pays.  The public implementations (ektelo, DPComp) draw about
    half this noise (scale ≈ ``2/ε₁``) and clamp noisy costs from below; we do neither, as
    the argument above does not cover them.  The sampler is exact (integers on the lattice)
    and ``t`` is the exact rational ``2kΔ/ε₁`` (:func:`cost_noise_scale`), so the inequality
    used is exact; no floating-point value decides the partition.  The costs are exact in int64
    for fewer than ``2^35`` points; DAWA refuses ``MAX_POINTS = 2^34`` or more before the charge.
    *Stage 2.*  One point changes one node per level by 1 (``k`` for a person); level ``ℓ``
    gets ``w_ℓ ε₂`` (``Σ w_ℓ = 1``, :func:`~dpcore.privacy.calibration.split_custom`) and
    discrete Laplace noise of the exact rational scale ``k/(w_ℓ ε₂)``: ``ε₂``-DP.  The partition and the workload are
    public to stage 2 (the first is stage 1's output, the second the curator's).

Release
    The buckets, clipped to the grid, are the leaves (a flat partition, one rectangle per
    bucket); ``noisy`` holds the least-squares estimates, ``sd`` their exact noise SD.  The
    public facts: the number of buckets, the level weights and the workload's noise bound.

Expected error
    Before release only the noise can be stated, and only given a partition: the partition
    comes from the data.  The plan shows stage 1's noise and the stage-2 levels for the finest
    partition (one bucket per cell: the most levels, the most noise per count); coarser
    buckets have fewer levels but add the bias of spreading counts evenly, which depends on
    the data.  The release states the exact per-level noise of the partition it chose and an
    upper bound on the workload's noise SD (canonical decomposition, which least squares
    never does worse than).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.data.queries import random_rectangles
from dpcore.errors import ParameterError
from dpcore.estimate import greedy_h as gh
from dpcore.estimate.tree_inference import consistent_release
from dpcore.points.mechanisms.base import Param, PointsMechanism, count_level, noisy_counts
from dpcore.points.release import DEFAULT_QUERY_SIZES, LevelPlan, PartitionRelease
from dpcore.points.workload_io import RectangleList, map_to_grid
from dpcore.privacy.budget import PrivacyCost, pure
from dpcore.privacy.calibration import laplace_scale_for_epsilon, split_custom
from dpcore.privacy.noise import NoiseSource, discrete_laplace_interval, discrete_laplace_variance

#: Cost lattice: 2^-FRAC_BITS of a point.
FRAC_BITS = 4
#: Lattice sensitivity of one interval's cost for one point (``dev`` moves by < 2).
COST_SENSITIVITY = 2 << FRAC_BITS
#: Largest grid DAWA releases (the Hilbert square of a 2,048 × 2,048 grid).
MAX_CELLS = 2048 * 2048
#: DAWA releases fewer points than this.  Stage 1's exact costs hold ``2^5·|b|·dev(x, b)`` in
#: int64 (:func:`~dpcore.estimate.greedy_h.dyadic_deviation_costs`), at most
#: ``2^6·(|b| − 1)·n < 2^28·n`` for ``|b| ≤ MAX_CELLS = 2^22``: exact below ``n = 2^35``; the
#: limit keeps a factor 2 of margin.  No real dataset comes near.
MAX_POINTS = 2**34
WORKLOADS = ("query_sizes", "uploaded")


#: Multiple of the cost noise's scale added to every bucket's cost (see ``bucket_penalty``).
PENALTY_FACTOR = 2.0


def bucket_penalty(epsilon1: float, epsilon2: float, k: int, factor: float = PENALTY_FACTOR) -> int:
    """Public cost of one bucket, in lattice units: ``k/ε₂`` (the paper's expected absolute noise
    of its count) plus ``factor`` times the cost noise's scale ``4k/ε₁``.  The second term is
    ours: the minimum over many partitions favours the ones whose buckets drew negative cost
    noise, so without it the partition is cut finer the more noise there is (on 3.5 M points
    on 1,024², 640,000 buckets at ε = 1).  The public implementations clamp each noisy cost
    from below instead, which the privacy argument of this module does not cover."""
    return round((k / epsilon2 + factor * 4.0 * k / epsilon1) * (1 << FRAC_BITS))


def cost_noise_scale(epsilon1: float, k: int) -> Fraction:
    """Stage 1's discrete Laplace scale in lattice units: ``t = 2·k·Δ/ε₁``, the exact rational
    of :func:`~dpcore.privacy.calibration.laplace_scale_for_epsilon`, so the noise spends exactly
    ε₁ (a float quotient could round down, and spend a little more).

    >>> cost_noise_scale(0.25, 1)
    Fraction(256, 1)
    """
    return laplace_scale_for_epsilon(epsilon1, 2 * int(k) * COST_SENSITIVITY)



@functools.lru_cache(maxsize=32)
def _random_workload(rows: int, cols: int, per_size: int, seed: int) -> NDArray[np.int64]:
    """The random workload's rectangles on a ``rows × cols`` grid: public (a seeded generator that never
    sees the data) and the same at every call, so drawn once per grid and seed and shared read-only (the
    check, the plan and every release of a grid asked for it again: 0.7 ms a call on a 2 × 2 grid).

    >>> a = _random_workload(4, 4, 2, 0)
    >>> a is _random_workload(4, 4, 2, 0), a.flags.writeable, a.shape
    (True, False, (6, 4))
    """
    rects, _ = random_rectangles(Grid(Bounds(0.0, 0.0, 1.0, 1.0), rows, cols), DEFAULT_QUERY_SIZES, per_size,
                                 shape="random", seed=seed)
    rects.setflags(write=False)
    return rects


def partition_row(e1: float, k: int, n_cells: int) -> LevelPlan:
    """Stage 1's row of the plan and of every release: the noise of the candidate buckets' costs, in
    cells (the lattice scale over ``2^4``)."""
    t = cost_noise_scale(e1, k)
    return LevelPlan(
        level=0, name="Partition: noisy costs of the candidate buckets", cost=pure(e1),
        noise="discrete_laplace", scale=float(t / (1 << FRAC_BITS)), sensitivity=4 * k, n_counts=2 * n_cells - 1,
        sd=math.sqrt(discrete_laplace_variance(t)) / (1 << FRAC_BITS),
        ci95=discrete_laplace_interval(t) / (1 << FRAC_BITS), cells_per_count=float("nan"),
        in_partition=False,
        note=("Noise on each candidate bucket's cost (in points); chooses the buckets, which are "
              "published; the costs are not."),
        extra={"lattice": f"2^-{FRAC_BITS}", "lattice_scale": float(t)})


def distinct_rects(rects: NDArray[np.int64]) -> tuple[tuple[tuple[int, ...], ...], NDArray[np.int64]]:
    """The workload's distinct rectangles in order of first use, and which of them each query is (a
    read-only array): a small grid's workload repeats a few rectangles many times.

    >>> d, which = distinct_rects(np.array([[0, 1, 0, 1], [0, 2, 0, 2], [0, 1, 0, 1]]))
    >>> d, which.tolist()
    (((0, 1, 0, 1), (0, 2, 0, 2)), [0, 1, 0])
    """
    seen: dict[tuple[int, ...], int] = {}
    which = np.asarray([seen.setdefault(rect, len(seen)) for rect in map(tuple, np.asarray(rects).tolist())],
                       dtype=np.int64)
    which.setflags(write=False)
    return tuple(seen), which


@functools.lru_cache(maxsize=32)
def _random_groups(rows: int, cols: int, per_size: int, seed: int) -> tuple[
        tuple[tuple[int, ...], ...], NDArray[np.int64]]:
    """:func:`distinct_rects` of :func:`_random_workload` (public), once per grid and seed."""
    return distinct_rects(_random_workload(rows, cols, per_size, seed))


class DAWA(PointsMechanism):
    name = "dawa"
    title = "DAWA (data- and workload-aware)"
    summary = (
        "Groups cells along a Hilbert curve into buckets of similar density (chosen privately), "
        "then counts the buckets with a hierarchy of noisy queries tuned to your query sizes."
    )
    when_to_use = (
        "Data with large empty or evenly filled areas, queried with rectangles of known sizes: "
        "buckets cut the noise where the data are smooth. The partition uses a quarter of ε."
    )
    reference = ("Li, Hay, Miklau & Wang, 'A Data- and Workload-Aware Algorithm for Range Queries "
                 "Under Differential Privacy', PVLDB 7(5), 2014")
    definitions = ("pure",)
    is_tree = False
    params = (
        Param("partition_share", "Share of ε for the partition", float, 0.25,
              "ε₁ = share · ε chooses the buckets; the rest counts them (the paper uses ¼).",
              minimum=0.05, maximum=0.95),
        Param("workload", "Queries to tune the counts for", str, "query_sizes",
              "Random rectangles of the query sizes (2 %, 6 %, 10 % of the area), or your own "
              "rectangles (a CSV of lon/lat boxes; CLI: --workload-file FILE).",
              choices=WORKLOADS, choice_labels=("rectangles of the query sizes", "uploaded rectangles")),
        Param("rectangles", "Uploaded rectangles (public)", RectangleList, None,
              "Your queries: lon/lat rectangles (west, south, east, north).",
              shown_if=("workload", "uploaded")),
        Param("queries_per_size", "Random rectangles per size", int, 32,
              "How many public random rectangles of each size tune the hierarchy.",
              minimum=1, maximum=1000, advanced=True),
        Param("workload_seed", "Seed of the random rectangles (public)", int, 0,
              "The rectangles are public and drawn from this seed.", minimum=0, advanced=True),
    )

    def resolve_params(self, raw: dict[str, Any] | None = None) -> dict[str, Any]:
        """As the base; uploaded rectangles are kept only for the uploaded workload."""
        p = super().resolve_params(raw)
        if p["workload"] != "uploaded":
            p["rectangles"] = None
        return p

    def check_public(self, grid: Grid, cost: PrivacyCost, params: dict[str, Any]) -> None:
        """A grid whose Hilbert square fits :data:`MAX_CELLS`, and a usable workload."""
        side = 1 << gh.hilbert_order_for(grid.rows, grid.cols)
        if side * side > MAX_CELLS:
            raise ParameterError(
                f"DAWA handles grids up to 2,048 × 2,048 cells (this one is {grid.rows:,} × {grid.cols:,}); "
                "choose a coarser grid.")
        self._workload(grid, params)

    # -- privacy budget ---------------------------------------------------------------
    @staticmethod
    def budgets(cost: PrivacyCost, params: dict[str, Any]) -> tuple[float, float]:
        """``(ε₁, ε₂)``, summing to at most ε."""
        e1, e2 = split_custom(cost.value, [params["partition_share"], 1 - params["partition_share"]])
        return e1, e2

    # -- workload (public) --------------------------------------------------------------
    def _workload(self, grid: Grid, params: dict[str, Any]) -> NDArray[np.int64]:
        """The workload's rectangles of cells ``(r0, r1, c0, c1)``."""
        if params["workload"] == "uploaded":
            if not params.get("rectangles"):
                raise ParameterError(
                    "The workload 'uploaded rectangles' needs your rectangles: upload a CSV with the "
                    "columns lon_min, lat_min, lon_max, lat_max, or pass --workload-file FILE.")
            cells = np.asarray(map_to_grid(RectangleList(params["rectangles"]), grid).cells, dtype=np.int64)
            keep = (cells[:, 1] > cells[:, 0]) & (cells[:, 3] > cells[:, 2])
            if not keep.any():
                raise ParameterError("None of the uploaded rectangles covers a cell of the grid.")
            return cells[keep]
        return _random_workload(grid.rows, grid.cols, int(params["queries_per_size"]), int(params["workload_seed"]))

    def _workload_groups(self, grid: Grid, params: dict[str, Any]) -> tuple[
            tuple[tuple[int, ...], ...], NDArray[np.int64]]:
        """:func:`distinct_rects` of :meth:`_workload` (kept per grid and seed for the random one)."""
        if params["workload"] == "uploaded":
            return distinct_rects(self._workload(grid, params))
        return _random_groups(grid.rows, grid.cols, int(params["queries_per_size"]), int(params["workload_seed"]))

    # -- stage 2 design (public: partition and workload) -----------------------------------------
    @staticmethod
    def _design(bucket_of_cell: NDArray[np.int64], sizes: NDArray[np.int64], groups: tuple[Any, ...],
                runs: Callable[[tuple[int, ...]], tuple[NDArray, NDArray]] | None = None
                ) -> tuple[gh.BucketTree, NDArray[np.float64], NDArray[np.float64]]:
        """The tree over the buckets, the workload's nodes per level (per query) and the weights.
        A rectangle the workload repeats (a small grid has few distinct ones) is decomposed once
        (``groups``: :func:`distinct_rects` of the workload).  ``runs(rect)``: for the finest
        partition, the buckets a rectangle covers as runs (:func:`_finest_runs`), which spares a
        count over a million buckets per rectangle (0.5 s of the plan on 1,024²)."""
        m = int(sizes.size)
        tree = gh.BucketTree(m)
        distinct, which = groups
        rows = np.zeros((len(distinct), tree.height + 1))
        for j, rect in enumerate(distinct):
            if runs is not None:  # every bucket a cell: all covered whole, none in part
                rows[j] = gh.level_decomposition(tree, np.zeros(0), runs=runs(rect))
                continue
            r0, r1, c0, c1 = rect
            cov = np.bincount(bucket_of_cell[r0:r1, c0:c1].ravel(), minlength=m)
            rows[j] = gh.level_decomposition(tree, cov / np.maximum(sizes, 1))
        per_query = rows[which]
        weights = gh.level_weights(per_query.sum(axis=0))
        return tree, per_query, weights

    def _levels(self, e1: float, e2: float, k: int, tree: gh.BucketTree, weights: NDArray[np.float64],
                n_cells: int, note: str) -> tuple[LevelPlan, ...]:
        shares = split_custom(e2, [float(w) for w in weights])
        out = [partition_row(e1, k, n_cells)]
        for lv in range(tree.height, -1, -1):
            if shares[lv] <= 0:
                continue
            nodes = tree.n_nodes(lv)
            row = count_level(len(out), f"Hierarchy level {lv}: {nodes:,} node{'s' if nodes != 1 else ''}"
                              + (" (the buckets)" if lv == 0 else ""), pure(shares[lv]), k, nodes,
                              n_cells / nodes, lv == 0, note=note if lv == 0 else "")
            out.append(dataclasses.replace(row, extra={"tree_level": lv, "weight": float(weights[lv])}))
        return tuple(out)

    @staticmethod
    def _hilbert(grid: Grid) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Rows and columns of the Hilbert positions of the padded square (some outside the grid)."""
        return gh.hilbert_cells(gh.hilbert_order_for(grid.rows, grid.cols))

    @classmethod
    def _finest_buckets(cls, grid: Grid) -> NDArray[np.int64]:
        """The finest partition, for the plan: every cell its own bucket, numbered in Hilbert order
        (read-only, kept per grid shape: :func:`_hilbert_numbering`)."""
        return _hilbert_numbering(grid.rows, grid.cols)[1]

    # -- plan --------------------------------------------------------------------------------------
    def plan_levels(self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], *, sensitivity: int,
              n_estimate: float | None) -> tuple[LevelPlan, ...]:
        e1, e2 = self.budgets(cost, params)
        bucket_of_cell = self._finest_buckets(grid)
        tree, per_query, weights = self._design(bucket_of_cell, np.ones(grid.n_cells, dtype=np.int64),
                                                self._workload_groups(grid, params),
                                                _finest_runs(grid, bucket_of_cell))
        note = ("Preview for one bucket per cell: the partition is chosen from the data, so the number "
                "of buckets and levels is known only at release. Coarser buckets mean fewer levels and "
                "less noise, plus the error of spreading a bucket evenly, which depends on the data.")
        levels = self._levels(e1, e2, sensitivity, tree, weights, grid.n_cells, note)
        # the query figures of this preview are an upper bound (issue 26, item 3): say so where they are read
        levels = tuple(dataclasses.replace(lv, extra={**lv.extra, "finest_partition": True}) if lv.in_partition
                       else lv for lv in levels)
        return self._with_bound(levels, tree, per_query, weights, grid)

    @staticmethod
    def _with_bound(levels: tuple[LevelPlan, ...], tree: gh.BucketTree, per_query: NDArray[np.float64],
                    weights: NDArray[np.float64], grid: Grid) -> tuple[LevelPlan, ...]:
        var = np.full(tree.height + 1, np.inf)
        for lv in levels[1:]:
            var[lv.extra["tree_level"]] = lv.sd ** 2
        bound = np.sqrt(gh.workload_variance_bound(per_query, var))
        leaf = levels[-1]
        extra = dict(leaf.extra, workload_noise_sd_bound={"mean": float(np.sqrt(np.mean(bound ** 2))),
                                                          "max": float(bound.max())},
                     level_weights=[float(w) for w in weights])
        return (*levels[:-1], dataclasses.replace(leaf, extra=extra))

    # -- release -------------------------------------------------------------------------------
    def check_aggregate(self, aggregate: Aggregate) -> None:
        """Refuse ``2^34`` points or more (the int64 bound of stage 1's exact costs), before the charge."""
        if int(np.asarray(aggregate.counts, dtype=np.int64).sum()) >= MAX_POINTS:
            raise ParameterError(
                f"DAWA's exact bucket costs hold fewer than {MAX_POINTS:,} points; split the data "
                "(e.g. by period) into smaller releases, or choose another mechanism.")

    def _release(self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: NoiseSource
                 ) -> PartitionRelease:
        grid = aggregate.grid
        k = aggregate.sensitivity
        e1, e2 = self.budgets(cost, params)
        rr, cc = self._hilbert(grid)
        pos = _hilbert_numbering(grid.rows, grid.cols)[0]
        x = np.zeros(rr.size, dtype=np.int64)
        x[pos] = np.asarray(aggregate.counts, dtype=np.int64)  # each cell at its place on the curve; padding 0

        # stage 1: noisy lattice costs of every aligned dyadic interval, optimal partition
        costs = gh.dyadic_deviation_costs(x, FRAC_BITS)
        penalty = bucket_penalty(e1, e2, k, PENALTY_FACTOR)
        t = cost_noise_scale(e1, k)
        noisy_costs = [c + penalty + noise.discrete_laplace(t, c.size) for c in costs]
        chosen = gh.optimal_dyadic_partition(noisy_costs)

        # the buckets in Hilbert order (public from here on) and their rectangles
        starts, lengths = [], []
        for lv, sel in enumerate(chosen):
            idx = np.flatnonzero(sel)
            starts.append(idx << lv)
            lengths.append(np.full(idx.size, 1 << lv, dtype=np.int64))
        start = np.concatenate(starts)
        length = np.concatenate(lengths)
        order = np.argsort(start, kind="stable")
        start, length = start[order], length[order]
        rects = _block_rects(rr, cc, start, length, grid)
        size = (rects[:, 1] - rects[:, 0]) * (rects[:, 3] - rects[:, 2])
        keep = size > 0  # buckets wholly in the padding hold no cell of the grid
        # the buckets tile the curve: each cell's (kept) bucket, read at its place on the curve
        bucket_of_cell = np.repeat(np.cumsum(keep) - 1, length)[pos]
        start, length, rects, size = start[keep], length[keep], rects[keep], size[keep]
        m = int(size.size)
        true_b = np.add.reduceat(x, start) if m else np.zeros(0, dtype=np.int64)

        # stage 2: the workload-weighted hierarchy over the buckets, least squares
        tree, per_query, weights = self._design(bucket_of_cell, size, self._workload_groups(grid, params))
        levels = self._levels(e1, e2, k, tree, weights, grid.n_cells, "")
        levels = self._with_bound(levels, tree, per_query, weights, grid)
        parent, depth, noisy, sd_own, ci_own = [], [], [], [], []
        by_level = {lv.extra["tree_level"]: lv for lv in levels[1:]}
        offset = 0
        for d, lv in enumerate(range(tree.height, -1, -1)):
            nodes = tree.n_nodes(lv)
            if lv < tree.height:
                parent.append(offset - tree.n_nodes(lv + 1) + np.arange(nodes) // 2)
            else:
                parent.append(np.full(nodes, -1, dtype=np.int64))
            depth.append(np.full(nodes, d, dtype=np.int64))
            plan = by_level.get(lv)
            if plan is None:  # a level without budget is not measured
                noisy.append(np.zeros(nodes))
                sd_own.append(np.full(nodes, np.inf))
                ci_own.append(np.zeros(nodes))  # not released; keeps the scaled half-width finite
            else:
                true = tree.level_sums(true_b, lv)
                # the exact scale k/(w_ℓ ε₂), not the plan's float (which is for display)
                noisy.append(noisy_counts(true, plan.cost, k, noise).astype(np.float64))
                sd_own.append(np.full(nodes, plan.sd))
                ci_own.append(np.full(nodes, plan.ci95))
            offset += nodes
        est, sd, ci = consistent_release(np.concatenate(parent), np.concatenate(depth), np.concatenate(noisy),
                                         np.concatenate(sd_own), np.concatenate(ci_own))
        leaf = slice(offset - m, offset)
        public = {
            "buckets": m,
            "bucket_cells": {"min": int(size.min()), "median": float(np.median(size)), "max": int(size.max())},
            "level_weights": [float(w) for w in weights],
            "workload_noise_sd_bound": levels[-1].extra["workload_noise_sd_bound"],
        }
        return self.make_release(
            aggregate, cost, params, levels,
            rects=rects.astype(np.int64),
            level=np.full(m, levels[-1].level, dtype=np.int64),
            leaf=np.ones(m, dtype=bool),
            noisy=est[leaf],
            sd=sd[leaf],
            ci95=ci[leaf],
            public=public,
        )


@functools.lru_cache(maxsize=2)
def _hilbert_numbering(rows: int, cols: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Every cell's position on the Hilbert curve of the padded square and its number among the
    grid's cells in that order (the finest partition's bucket): public, the same at every call, so
    made once per grid shape and shared read-only (two scatters of a million cells, 0.02 s of every
    plan on 1,024²).

    >>> pos, number = _hilbert_numbering(1, 3)
    >>> pos.tolist(), number.tolist(), number.flags.writeable
    ([[0, 1, 14]], [[0, 1, 2]], False)
    """
    rr, cc = gh.hilbert_cells(gh.hilbert_order_for(rows, cols))
    where = np.flatnonzero((rr < rows) & (cc < cols))  # the positions in the grid, in curve order
    cell = rr * cols + cc  # flat cell indices: two 1-D scatters (0.026 -> 0.011 s on 1,024², a first plan)
    at = cell[where] if where.size < cell.size else cell
    pos = np.empty(rows * cols, dtype=np.int64)
    number = np.empty(rows * cols, dtype=np.int64)
    pos[at] = where
    number[at] = np.arange(rows * cols)
    pos, number = pos.reshape(rows, cols), number.reshape(rows, cols)
    pos.setflags(write=False)
    number.setflags(write=False)
    return pos, number


def _block_rects(rr: NDArray[np.int64], cc: NDArray[np.int64], start: NDArray[np.int64],
                 length: NDArray[np.int64], grid: Grid) -> NDArray[np.int64]:
    """``(r0, r1, c0, c1)`` of aligned Hilbert blocks, clipped to the grid.

    A block of ``4^j`` positions is the aligned square of side ``s = 2^j`` holding its first
    cell; a block of ``2·4^j`` is the union of the aligned squares of side ``2^j`` holding its
    first and its last cell.
    """
    side = np.left_shift(1, (np.log2(length).astype(np.int64)) // 2)
    first, last = start, start + length - 1
    r0 = np.minimum(rr[first] // side, rr[last] // side) * side
    c0 = np.minimum(cc[first] // side, cc[last] // side) * side
    r1 = (np.maximum(rr[first] // side, rr[last] // side) + 1) * side
    c1 = (np.maximum(cc[first] // side, cc[last] // side) + 1) * side
    out = np.column_stack([r0, r1, c0, c1]).astype(np.int64)
    out[:, 0:2] = np.minimum(out[:, 0:2], grid.rows)
    out[:, 2:4] = np.minimum(out[:, 2:4], grid.cols)
    return out


def _finest_runs(grid: Grid, finest: NDArray[np.int64]) -> Callable[[tuple[int, ...]], tuple[NDArray, NDArray]]:
    """For the finest partition (``finest``: every cell its own bucket, numbered in Hilbert order),
    the buckets a rectangle covers as maximal runs ``[lo, hi)`` of bucket numbers, without reading
    its cells: its cells are runs of consecutive Hilbert positions, and a run can only begin or end
    on the rectangle's border (an inner cell's neighbours on the curve are in the rectangle), so
    the runs are the border cells whose predecessor (successor) on the curve lies outside; runs
    apart only by padding cells are one run of bucket numbers."""
    rr, cc = DAWA._hilbert(grid)
    pos = _hilbert_numbering(grid.rows, grid.cols)[0]
    last = rr.size - 1

    def runs(rect: tuple[int, ...]) -> tuple[NDArray, NDArray]:
        r0, r1, c0, c1 = rect
        border = np.unique(np.concatenate([pos[r0, c0:c1], pos[r1 - 1, c0:c1], pos[r0:r1, c0], pos[r0:r1, c1 - 1]]))

        def outside(h: NDArray[np.int64]) -> NDArray[np.bool_]:
            q = np.clip(h, 0, last)
            return (h < 0) | (h > last) | (rr[q] < r0) | (rr[q] >= r1) | (cc[q] < c0) | (cc[q] >= c1)

        lo, hi = border[outside(border - 1)], border[outside(border + 1)]  # the runs' first and last positions
        first, final = finest[rr[lo], cc[lo]], finest[rr[hi], cc[hi]]
        new = np.concatenate([[True], first[1:] != final[:-1] + 1])
        return first[new], final[np.concatenate([new[1:], [True]])] + 1

    return runs
