"""PrivTree: the private quadtree of Zhang, Xiao & Xie (SIGMOD 2016) without a height parameter.

Zhang, Xiao & Xie, "PrivTree: A Differentially Private Algorithm for Hierarchical
Decompositions", SIGMOD 2016.  Sec. 3 gives the algorithm (Algorithm 2, PrivTree) and its
privacy proof (Lemma 3.1 on the ratio of split probabilities, Theorem 3.1); the spatial
histogram releases the leaves of the tree with noisy counts (Sec. 3–4, half of ε each by
default).  We run it on the public grid, with exact discrete noise; the proof is redone below
for that noise.

Parameters
    ``tree_share`` (default ½): the share ε_tree of ε spent on the tree; the leaf counts get
    ε_count = ε − ε_tree.  ``theta`` (θ, an integer, default 0): the split threshold.  The fanout
    is β = 4 (a quadtree).  There is no height: a node is split while its noisy biased count
    exceeds θ, down to single cells.  A per-person cap of ``k`` records (``aggregate.sensitivity``)
    is handled by scaling the split-test noise, the bias δ and the count noise by ``k``.

Structure
    The root is the whole grid.  A node splits at the middles of its row and column ranges into
    4 quadrants, into 2 halves when it has a single row or column (it cannot split further along
    that axis), and a single cell is a leaf without a test
    (:func:`dpcore.points.mechanisms.quadtree.quadrant_children`, the same split as the
    ``quadtree`` mechanism).

Privacy cost: the tree (Algorithm 2 on integers)
    For a node ``v`` of depth ``d`` with true count ``c(v)``:

        b(v) = max(c(v) − d·δ, θ − δ),   split  ⇔  b(v) + X > θ,   X ~ DLap(t)

    (``P(X = x) ∝ exp(−|x|/t)`` on the integers, :meth:`~dpcore.privacy.noise.NoiseSource.discrete_laplace`),
    with ``t = k·λ``, ``λ = (2β − 1)/((β − 1)·ε_tree)`` (= 7/(3·ε_tree)) and the bias rounded **up** to
    an integer, ``δ = ⌈t·ln β⌉`` (:func:`privtree_parameters`).  θ, δ and every count are integers, so
    every b(v) is an integer.  Claim: the tree shape is ε_tree-DP under adding or removing one
    person (at most ``k`` records).  Proof (the paper's Lemma 3.1 / Theorem 3.1 argument with the
    discrete Laplace's geometric tails):

    1. Tails.  With ``q = e^{−1/t}``, ``P(X ≥ m) = q^m/(1+q)`` for integers ``m ≥ 0``, and
       ``1 − q^{1−m}/(1+q)`` for ``m ≤ 0``.  A node with ``b = θ + s`` splits with probability
       ``f(s) = P(X ≥ 1 − s)`` (:func:`split_probability`).  The log-increment
       ``r(s) = ln f(s+1) − ln f(s)`` is exactly ``1/t`` for ``s ≤ 0``; for ``s ≥ 1``, with
       ``a = q^s/(1+q) ≤ q/(1+q)``, ``r(s) = ln(1 + a(1−q)/(1−a)) ≤ a(1−q)(1+q) = (1−q)q^s ≤ q^s/t``.
       So ``r(s) ≤ (1/t)·q^{max(s, 0)}``.  (The paper's Lemma 3.1 states the same for the
       continuous Laplace: the ratio decays exponentially once the count is above θ.)
    2. One person.  Let D' be D plus one person's ``j ≤ k`` records.  A node's count grows by
       ``Δ(v) ∈ [0, k]``, and ``b'(v) − b(v) ∈ [0, Δ(v)]`` (max is monotone and 1-Lipschitz).
       A fixed tree shape T has probability ``Π_{tested internal v} f(b(v)) · Π_{tested leaves v}
       (1 − f(b(v)))`` (nodes outside the changed ones cancel; single cells have no test).
    3. D over D'.  Split factors only shrink the ratio (``f`` is non-decreasing); a tested leaf's
       factor ``P(X ≤ θ − b)/P(X ≤ θ − b')`` is at most ``e^{(b'−b)/t} ≤ e^{Δ(v)/t}`` (the pmf
       ratio of a shift).  Leaves are disjoint, ``Σ Δ(v) ≤ k``: the ratio is at most
       ``e^{k/t} = e^{1/λ} ≤ e^{ε_tree}``.
    4. D' over D.  Leaf factors are ≤ 1.  A split node contributes ``Σ_{u=b}^{b'−1} r(u − θ)``,
       one term per unit step of its biased count.  Number the added records 1..j and give the
       step ``u = y(v) + i`` (``y(v) = c(v) − d·δ``, unclamped) to the ``(i+1)``-th added record
       inside v; only steps with ``u ≥ θ − δ`` occur (below that the clamp holds b fixed).
       Along one record's root-to-leaf path, ``u = c(v) + i(v) − d·δ`` falls by at least δ per
       level (``c`` and ``i`` cannot grow with depth).  So one record's steps are integers
       ``s_1 > s_2 > …`` (``s = u − θ ≥ −δ``) with gaps ``≥ δ``: if the smallest is ``≤ 0`` the sum is
       at most ``(1/t)(1 + Σ_{j≥0} q^{jδ})`` (the next one is ``≥ 0``, then ``≥ δ``, …), otherwise at
       most ``(1/t)·Σ_{j≥0} q^{1+jδ}``.  Both are ``≤ (1/t)(1 + 1/(1 − q^δ))``.  With ``δ ≥ t·ln β``,
       ``q^δ ≤ 1/β``, so each record adds at most ``(1/t)(1 + β/(β−1)) = (1/t)(2β−1)/(β−1)``, and
       ``j ≤ k`` records at most ``(k/t)(2β−1)/(β−1) = (2β−1)/((β−1)λ) = ε_tree``.  ∎
    Where the integers matter: with real-valued b the clamp could leave two partial steps in
    ``(θ−δ−1, θ)``; on integers a changed node has ``y ≥ θ − δ`` exactly, and rounding δ up keeps
    ``q^δ ≤ 1/β``.  ``t`` is the exact rational ``7k/(3·ε_tree)``; δ is the float ``t·ln 4``
    enlarged by a relative 10⁻¹² (far above its float error) before the ceiling, so ``δ ≥ t·ln 4``.
    ``tests/unit/points/test_privtree.py`` checks the claim by brute force: the exact probability of
    every tree shape on 4 × 4 and 8 × 8 grids under neighbouring datasets (``k`` = 1 and 2).

Privacy cost: the counts
    Given the (now public) tree, the leaves are disjoint: their counts get discrete Laplace noise
    of scale ``k/ε_count`` (ε_count-DP).  Tree and counts compose sequentially:
    ``ε_tree + ε_count ≤ ε``.  Pure ε-DP only (``definitions = ("pure",)``): the proof above is for
    the Laplace tails.

Release
    The tree is grown one level at a time over all the nodes of that depth (2-D prefix sums give
    every node's count in O(1); one noise draw per level).  Internal nodes carry the sum of the
    noisy counts of the leaves below them (post-processing, so every depth of the Map page tiles
    the grid consistently), with SD ``sqrt(leaves below)`` times the leaf SD (and the leaf's
    95 % half-width scaled alike).  ``node_budget`` is ε_count for a leaf and 0 for an internal
    node (its value costs nothing more).  Least-squares consistency between levels (noisy counts
    at every depth, geometric budgets, as in the ``quadtree`` mechanism) was measured on a
    clustered synthetic set and did not help (see the commit), so only the leaves are counted.

Expected error (the plan, data-free)
    What is known before release: the noise of one leaf count (discrete Laplace, scale
    ``k/ε_count``, its SD and 95 % half-width) and the split tests' noise (scale ``k·λ``) and bias δ.
    The tree's shape — how many leaves, how large — depends on the data.  Given a public guess of
    the number of points (``n_estimate``), the plan's range-query figures assume the number of
    leaves PrivTree makes for that many points spread evenly, and state an upper bound on the
    expected number of leaves wherever the points are (:func:`expected_leaves`), with the query
    figures it gives (``details.range_query_sd_at_most``); the release states the same formula
    with the leaves it made.  Without a guess they assume the finest possible tree (every leaf a
    single cell), a looser bound.  The spread of points inside a coarse leaf adds a
    data-dependent error the plan cannot state.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcore.data.domain import Aggregate, Grid, prefix_sums, rect_sums_from_prefix
from dpcore.points.mechanisms.base import Param, PointsMechanism, count_level
from dpcore.points.mechanisms.quadtree import quadrant_children
from dpcore.points.release import DEFAULT_QUERY_SIZES, LevelPlan, PartitionRelease
from dpcore.privacy import noise as _noise
from dpcore.privacy.budget import PrivacyCost, pure
from dpcore.privacy.calibration import interval_half_width, laplace_scale_for_epsilon, split_custom
from dpcore.privacy.noise import NoiseSource

__all__ = ["BETA", "PrivTree", "expected_leaves", "grow_privtree", "privtree_parameters", "split_probability",
           "split_test_level"]

#: Fanout of the quadtree (the paper's β).
BETA = 4


# -- parameters of the split test (Sec. 3, Theorem 3.1) ------------------------------------------


def privtree_parameters(eps_tree: float, sensitivity: int = 1, beta: int = BETA) -> tuple[Fraction, int]:
    """Scale ``t`` of the split-test noise and the integer bias ``δ`` per level.

    ``t = k·λ`` with ``λ = (2β − 1)/((β − 1)·ε_tree)`` (Zhang, Xiao & Xie 2016, Theorem 3.1),
    exact as a rational; ``δ = ⌈t·ln β⌉`` rounded up so that ``e^{−δ/t} ≤ 1/β`` (module
    docstring, step 4).

    >>> t, d = privtree_parameters(1.0)
    >>> t, d
    (Fraction(7, 3), 4)
    >>> privtree_parameters(1.0, sensitivity=2)
    (Fraction(14, 3), 7)
    """
    k = int(sensitivity)
    lam = Fraction(2 * beta - 1) / (Fraction(beta - 1) * Fraction(eps_tree))
    t = lam * k
    # ceil of t·ln β from above: the float product is within ~1e-15 relative of the true value
    delta = math.ceil(float(t) * math.log(beta) * (1.0 + 1e-12))
    return t, max(int(delta), 1)


def split_probability(b: NDArray[np.int64] | int, theta: int, scale: Fraction | float) -> NDArray[np.float64]:
    """``P(b + X > θ)`` for ``X ~ DLap(scale)``: the probability that a node of biased count b splits.

    ``P(X ≥ m) = q^m/(1+q)`` for ``m ≥ 0`` and ``1 − q^{1−m}/(1+q)`` for ``m ≤ 0``, ``q = e^{−1/t}``,
    at ``m = θ + 1 − b``.

    >>> float(split_probability(0, 0, 1.0))  # P(X >= 1) = q/(1+q)
    0.2689414213699951
    """
    t = float(scale)
    q = math.exp(-1.0 / t)
    m = theta + 1 - np.asarray(b, dtype=np.float64)
    upper = np.exp(-np.maximum(m, 0.0) / t) / (1.0 + q)
    lower = 1.0 - np.exp(-np.maximum(1.0 - m, 0.0) / t) / (1.0 + q)
    return np.where(m >= 0, upper, lower)


# -- the tree (Algorithm 2, one level at a time) -------------------------------------------------


def grow_privtree(counts: NDArray[np.integer], theta: int, scale: Fraction, delta: int,
                  noise: NoiseSource) -> dict[str, NDArray[Any]]:
    """Algorithm 2 of Zhang, Xiao & Xie (2016) on the grid's quadtree, level by level.

    Every node of depth ``d`` that is not a single cell gets ``b = max(c − d·δ, θ − δ)`` and
    splits when ``b + DLap(scale) > θ``.  Returns ``rects``, ``parent`` (−1 for the root),
    ``depth``, ``leaf``, ``tested`` (the node got a split test: it is not a single cell; its sum
    is the number of split tests) and the true ``count`` of every node, in level order (children
    of a node contiguous).
    """
    N, M = np.asarray(counts).shape
    P = prefix_sums(np.asarray(counts, dtype=np.int64))
    rects = np.array([[0, N, 0, M]], dtype=np.int64)
    parent = np.array([-1], dtype=np.int64)
    out: dict[str, list[NDArray[Any]]] = {k: [] for k in ("rects", "parent", "depth", "leaf", "tested", "count")}
    first = 0
    d = 0
    while True:
        m = rects.shape[0]
        c = rect_sums_from_prefix(P, rects)
        testable = ((rects[:, 1] - rects[:, 0]) > 1) | ((rects[:, 3] - rects[:, 2]) > 1)
        split = np.zeros(m, dtype=bool)
        idx = np.flatnonzero(testable)
        if idx.size:
            b = np.maximum(c[idx] - d * delta, theta - delta)
            split[idx] = b + noise.discrete_laplace(scale, idx.size) > theta
        out["rects"].append(rects)
        out["parent"].append(parent)
        out["depth"].append(np.full(m, d, dtype=np.int64))
        out["leaf"].append(~split)
        out["tested"].append(testable)
        out["count"].append(c)
        if not split.any():
            break
        sel = np.flatnonzero(split)
        rects, owner = quadrant_children(rects[sel])
        parent = first + sel[owner]
        first += m
        d += 1
    return {k: np.concatenate(v) for k, v in out.items()}


def subtree_sums(parent: NDArray[np.int64], depth: NDArray[np.int64],
                 values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Every node's value plus those of all its descendants, bottom-up by depth (leaf values
    in, internal zeros in: the sums of the leaves below)."""
    total = np.asarray(values, dtype=np.float64).copy()
    for d in range(int(depth.max(initial=0)), 0, -1):
        at = np.flatnonzero(depth == d)
        np.add.at(total, parent[at], total[at])
    return total


# -- how many leaves, before release (data-free, from a public number of points) ----------------


def _depth_sizes(rows: int, cols: int) -> list[dict[tuple[int, int], int]]:
    """The node sizes of the full quadtree, per depth: ``{(rows, cols): number of nodes}`` (at most four
    sizes per depth, as :func:`~dpcore.points.mechanisms.quadtree.quadrant_children` splits at
    ``ceil(n/2)``), down to single cells."""
    out = [{(int(rows), int(cols)): 1}]
    while any(h > 1 or w > 1 for h, w in out[-1]):
        nxt: dict[tuple[int, int], int] = {}
        for (h, w), m in out[-1].items():
            if h == 1 and w == 1:
                continue
            for hh in ((h + 1) // 2, h // 2) if h > 1 else (h,):
                for ww in ((w + 1) // 2, w // 2) if w > 1 else (w,):
                    nxt[(hh, ww)] = nxt.get((hh, ww), 0) + m
        out.append(nxt)
    return out


def expected_leaves(grid: Grid, n_points: float, eps_tree: float, sensitivity: int = 1, theta: int = 0
                    ) -> tuple[float, float]:
    """How many leaves PrivTree makes for about ``n_points`` points, before release: (evenly spread, at most).

    *Evenly spread*: the expected number of leaves if the points were spread evenly over the grid
    (every node of depth ``d`` holding ``n·cells/N`` points), exact under that model:
    ``Σ_v P(v reached)·(1 − f(b(v)))`` with ``f`` the split probability (:func:`split_probability`).
    *At most*: an upper bound on the expected number of leaves for ANY placement of the points.
    A node of depth ``d`` is *heavy* when ``c(v) > (d − 1)·δ + θ``; the nodes of one depth are
    disjoint, so at most ``n/((d − 1)·δ + θ + 1)`` are heavy (and at most the nodes of that depth): ``H``
    in all.  Any other node has the clamped ``b = θ − δ`` and splits with probability
    ``p₀ = P(X ≥ δ + 1) = q^{δ+1}/(1+q) < 1/8`` (``q^δ ≤ 1/4``); its children are not heavy
    either, so the internal nodes below a reached non-heavy node number ``E = p₀/(1 − 4p₀)`` in
    expectation (a sub-critical branching process).  At most ``4H + 1`` non-heavy nodes are reached
    from heavy ones (or are the root), so ``E[internal] ≤ H + (4H + 1)·E`` and, four children at most
    per split, ``E[leaves] ≤ 1 + 3·E[internal]`` (and at most the cells).  Zhang, Xiao & Xie (SIGMOD 2016),
    Sec. 3, give the split rule; the count of heavy nodes is the argument of their Lemma 3.2 on the
    size of the tree.

    >>> from dpcore.data.domain import Bounds
    >>> g = Grid(Bounds(0, 0, 1, 1), 64, 64)
    >>> even, most = expected_leaves(g, 10_000, 0.25)
    >>> 1 <= even <= most <= g.n_cells
    True
    """
    t, delta = privtree_parameters(eps_tree, sensitivity)
    q = math.exp(-1.0 / float(t))
    n = max(float(n_points), 0.0)
    sizes = _depth_sizes(grid.rows, grid.cols)
    even, heavy = 0.0, 0.0
    reached = {(grid.rows, grid.cols): 1.0}  # expected number of nodes reached, by size
    for d, level in enumerate(sizes):
        nxt: dict[tuple[int, int], float] = {}
        for (h, w), r in reached.items():
            if h == 1 and w == 1:
                even += r
                continue
            b = max(n * h * w / grid.n_cells - d * delta, theta - delta)
            f = float(split_probability(np.array([b]), theta, t)[0])
            even += r * (1.0 - f)
            for hh in ((h + 1) // 2, h // 2) if h > 1 else (h,):
                for ww in ((w + 1) // 2, w // 2) if w > 1 else (w,):
                    nxt[(hh, ww)] = nxt.get((hh, ww), 0.0) + r * f  # expected nodes reached of that size
        testable = sum(m for (h, w), m in level.items() if h > 1 or w > 1)
        heavy += testable if d == 0 else min(testable, math.floor(n / ((d - 1) * delta + theta + 1)))
        reached = nxt
    p0 = q ** (delta + 1) / (1.0 + q)
    e_light = p0 / (1.0 - 4.0 * p0)
    most = min(1.0 + 3.0 * (heavy + (4.0 * heavy + 1.0) * e_light), float(grid.n_cells))
    return min(even, most), most


def split_test_level(grid: Grid, eps_tree: float, sensitivity: int, theta: int,
                     n_tests: int | None = None) -> LevelPlan:
    """The plan's row of the split tests (not released): ``n_tests`` of them (the sum of
    :func:`grow_privtree`'s ``tested``), or, before release, at most one fewer than the cells.
    Shared by :class:`PrivTree` and :class:`~dpcore.points.mechanisms.privtree_ag.PrivTreeAG`."""
    t, delta = privtree_parameters(eps_tree, sensitivity)
    tests = int(n_tests) if n_tests is not None else max(grid.n_cells - 1, 1)
    return LevelPlan(
        level=0,
        name=(f"Split tests ({tests:,} nodes)" if n_tests is not None else "Split tests (one per node visited)"),
        cost=pure(eps_tree),
        noise="discrete_laplace",
        scale=float(t),
        sensitivity=int(sensitivity),
        n_counts=tests,
        sd=math.sqrt(_noise.discrete_laplace_variance(t)),
        ci95=interval_half_width("discrete_laplace", t),
        cells_per_count=float(grid.n_cells),
        in_partition=False,
        note=(f"Each node splits when max(count − depth·{delta}, θ − {delta}) plus this noise exceeds "
              f"θ = {int(theta)}; the noise is not released."
              + ("" if n_tests is not None else
                 " How many nodes are tested depends on the data (at most one fewer than the cells).")),
        extra={"delta": int(delta), "theta": int(theta), "fanout": BETA, "lambda": float(t) / int(sensitivity)},
    )


# -- the mechanism -------------------------------------------------------------------------------


class PrivTree(PointsMechanism):
    """PrivTree (Zhang, Xiao & Xie, SIGMOD 2016); see the module docstring."""

    name = "privtree"
    title = "PrivTree (adaptive quadtree, no height)"
    summary = (
        "Splits the map into quarters again and again wherever a noisy count says there are "
        "enough points, with a bias that grows with depth so the noise of the split decisions "
        "does not grow with the tree's height. Half of ε shapes the tree, half counts the leaves."
    )
    when_to_use = (
        "Clustered data and range queries of many sizes: the tree goes deep in dense areas and "
        "stays coarse in empty ones, and no height needs choosing. The published state of the "
        "art for 2-D range queries (with DAWA)."
    )
    reference = (
        "Zhang, Xiao & Xie, 'PrivTree: A Differentially Private Algorithm for Hierarchical "
        "Decompositions', ACM SIGMOD 2016"
    )
    definitions = ("pure",)
    is_tree = True
    n_guess_helps = True
    params = (
        Param("tree_share", "Share of ε for the tree", float, 0.5,
              "Part of the budget spent on the split decisions; the rest counts the leaves "
              "(the paper uses half and half).",
              minimum=0.05, maximum=0.95, advanced=True),
        Param("theta", "Split threshold θ", int, 0,
              "A node is split while its noisy, depth-biased count exceeds θ (the paper's default "
              "0). A larger θ gives larger leaves.",
              minimum=0, maximum=1_000_000, advanced=True),
    )

    # -- privacy cost ------------------------------------------------------------------------
    @staticmethod
    def budgets(cost: PrivacyCost, params: dict[str, Any]) -> tuple[float, float]:
        """(ε_tree, ε_count), adding up to at most ε."""
        share = float(params["tree_share"])
        eps_tree, eps_count = split_custom(cost.value, [share, 1.0 - share])
        return eps_tree, eps_count

    # -- plan ---------------------------------------------------------------------------------
    def _levels(self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], sensitivity: int,
                n_leaves: int | None = None, n_tests: int | None = None, n_estimate: float | None = None
                ) -> tuple[LevelPlan, ...]:
        eps_tree, eps_count = self.budgets(cost, params)
        known = n_leaves is not None
        tree = split_test_level(grid, eps_tree, sensitivity, int(params["theta"]), n_tests)
        if n_tests is not None:  # this row's note has always ended in a space here (releases are fingerprinted)
            tree = dataclasses.replace(tree, note=tree.note + " ")
        if known:
            return tree, count_level(1, f"Leaf counts ({int(n_leaves):,} leaves)", pure(eps_count), sensitivity,
                                     int(n_leaves), grid.n_cells / max(int(n_leaves), 1), True)
        if n_estimate is None:
            finest = count_level(
                1, "Leaf counts", pure(eps_count), sensitivity, grid.n_cells, 1.0, True,
                note="The tree's shape depends on the data: the number and size of the leaves are known only "
                     "after release. The noise of each leaf count is as shown; without a guess of the number "
                     "of points the range-query figures assume the finest tree (one leaf per cell), an upper bound.")
            return tree, dataclasses.replace(finest, extra={"finest_partition": True})
        even, most = expected_leaves(grid, n_estimate, eps_tree, sensitivity, int(params["theta"]))
        n = max(int(round(even)), 1)
        leaves = count_level(
            1, f"Leaf counts (about {n:,} leaves if evenly spread)", pure(eps_count), sensitivity, n,
            grid.n_cells / n, True,
            note=(f"The tree's shape depends on the data. For about {float(n_estimate):,.0f} points spread evenly "
                  f"PrivTree makes about {n:,} leaves (the range-query figures assume these); wherever the points "
                  f"are, at most {most:,.0f} on average (the upper figures); fewer where they cluster."))
        upper = dataclasses.replace(leaves, cells_per_count=grid.n_cells / max(most, 1.0))
        extra = {"leaves_evenly_spread": float(even), "leaves_at_most": float(most), "n_estimate": float(n_estimate),
                 "range_query_sd_at_most": {f"{s:g}": upper.query_sd(s, grid.n_cells) for s in DEFAULT_QUERY_SIZES}}
        return tree, dataclasses.replace(leaves, extra=extra)

    def plan_levels(
        self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], *, sensitivity: int, n_estimate: float | None
    ) -> tuple[LevelPlan, ...]:
        return self._levels(grid, cost, params, sensitivity, n_estimate=n_estimate)

    # -- release ------------------------------------------------------------------------------
    def _release(
        self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: NoiseSource
    ) -> PartitionRelease:
        grid = aggregate.grid
        k = int(aggregate.sensitivity)
        eps_tree, eps_count = self.budgets(cost, params)
        t, delta = privtree_parameters(eps_tree, k)
        tree = grow_privtree(aggregate.counts, int(params["theta"]), t, delta, noise)
        leaf, depth, parent = tree["leaf"], tree["depth"], tree["parent"]
        # leaf counts (ε_count): disjoint, sensitivity k
        scale = laplace_scale_for_epsilon(eps_count, k)
        leaf_idx = np.flatnonzero(leaf)
        own = np.zeros(leaf.size, dtype=np.float64)
        own[leaf_idx] = tree["count"][leaf_idx] + noise.discrete_laplace(scale, leaf_idx.size)
        sd_leaf = math.sqrt(_noise.discrete_laplace_variance(scale))
        ci_leaf = float(interval_half_width("discrete_laplace", scale))
        noisy = subtree_sums(parent, depth, own)
        below = subtree_sums(parent, depth, leaf.astype(np.float64))
        levels = self._levels(grid, cost, params, k, n_leaves=int(leaf_idx.size), n_tests=int(tree["tested"].sum()))
        return self.make_release(
            aggregate, cost, params, levels,
            rects=tree["rects"],
            level=depth,
            leaf=leaf,
            noisy=noisy,
            sd=sd_leaf * np.sqrt(below),
            ci95=ci_leaf * np.sqrt(below),
            public={"height": int(depth.max()), "delta": int(delta), "split_scale": float(t),
                    "epsilon_tree": eps_tree, "epsilon_counts": eps_count, "fanout": BETA},
            node_budget=np.where(leaf, eps_count, 0.0),
            is_tree=True,
        )
