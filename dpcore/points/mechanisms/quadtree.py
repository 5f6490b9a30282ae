"""Quadtree: the private quadtree of Cormode, Procopiuc, Srivastava, Shen & Yu (ICDE 2012).

Structure (data-independent, so it costs no budget)
    The root is the whole grid.  A node splits its fine-cell ranges at their middles
    into 4 quadrants (2 halves when it has a single row or column) down to the height
    ``h``; a single cell is never split.  The middle of ``n`` lines is ``ceil(n/2)``, so
    the southern / western half gets the odd line.  The height is capped at
    ``ceil(log2(max(rows, cols)))``, where every node is a single cell, so no budget is
    planned for levels that cannot exist.

Counts (Cormode et al., budget allocation)
    Every node gets a noisy count (discrete Laplace, scale ``k/ε_d`` for a cap of ``k``
    records per person).  The nodes of one depth are disjoint (parallel composition) and
    a point lies in one node per depth, so the depths compose sequentially:
    ``Σ_d ε_d = ε``.  Geometric allocation (their Eq. 17; erratum: Eq. 16 misses the cube root): the root gets the
    least, each level below ``2^(1/3)`` times more, ``ε_d ∝ 2^(d/3)``, which minimises
    their bound on the noise variance of range queries; a uniform split is an option.  A node that is a
    single cell before the bottom (odd side lengths) is a leaf and takes the budget its
    path has left, ``ε − Σ_{j<d} ε_j``, so every root-to-leaf path spends exactly ``ε``.

Constrained inference (post-processing, free)
    The released ``noisy`` values are the weighted least-squares consistent counts of
    :mod:`dpcore.estimate.tree_inference` (Hay et al. 2010, generalised to per-level budgets as in
    Cormode et al.): each internal node equals the sum of its children.

Reported uncertainty
    ``sd`` is the **post-inference** SD of each released count, computed exactly from the
    tree and the budgets (the consistent counts are linear in the noisy ones); it never
    exceeds the node's own noise SD.  ``ci95`` is the node's own discrete Laplace 95 %
    half-width scaled by the same SD ratio.  The plan's levels describe the *raw* noise
    of each level (what is drawn); their ``details`` give the post-inference SD of the
    level's counts (root mean square over its nodes; the tree is public, so this is
    data-free).

Default height 7
    No principled rule exists (HTF §5.5: the error is U-shaped in the height), so the
    default is a fixed, data-free value that agrees with three pointers: (a) Qardaji et
    al.'s UG rule for the HTF paper's synthetic scale (n = 1 M, ε = 0.1: m ≈ 100 cells
    per side, ~10 fine cells on 1024²) puts the leaves near height log2(1024/10) ≈ 6.7;
    (b) the HTF paper equates quadtree height k with binary height 2k and its own LA
    heights are 15–17, i.e. 7.5–8.5; (c) in our runs on the paper's synthetic data
    (1024², one Gaussian cluster, n = 0.1–3.5 M, ε = 0.1 / 0.5, 2–10 % queries) height 7
    gave the lowest RMSE, while the paper's MRE (smoothing 20, dominated by near-empty
    queries) preferred coarser trees (4–5) and height 8 was 1.4–1.6x worse than 7 on
    both.  On 1024² height 7 gives 8 x 8-cell leaves (16,384 leaves).  The range offered
    is 1–10 (10 is single cells on 1024²).
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcore.data.domain import Aggregate, Grid, rect_sums
from dpcore.estimate.tree_inference import consistent_release, consistent_variance
from dpcore.points.mechanisms.base import Param, PointsMechanism, count_level
from dpcore.points.release import LevelPlan, PartitionRelease
from dpcore.privacy import noise as _noise
from dpcore.privacy.budget import PrivacyCost, float_down, pure
from dpcore.privacy.calibration import interval_half_width, laplace_scale_for_epsilon
from dpcore.privacy.calibration import split as split_parts
from dpcore.privacy.noise import NoiseSource

#: Cormode et al.'s geometric ratio between the budgets of consecutive levels.
GEOMETRIC_RATIO = 2 ** (1 / 3)


# -- budget helpers shared by the tree mechanisms -------------------------------------------


def level_budgets(total: float, n_levels: int, split: str) -> list[float]:
    """Budgets of depths ``0..n_levels-1`` (root first) adding up to at most ``total``.

    ``"geometric"``: ``ε_d ∝ 2^(d/3)`` (the leaves get the most; Cormode et al. Eq. 17);
    ``"uniform"``: equal parts.
    """
    return split_parts(total, n_levels, "geometric" if split == "geometric" else "uniform", ratio=GEOMETRIC_RATIO)


def path_remainders(total: float, parts: list[float]) -> list[float]:
    """``rem[d] = total − Σ_{j<d} parts[j]``, rounded down: the budget a leaf at depth ``d``
    (above the bottom) takes so that its path spends ``total`` and never more."""
    exact = Fraction(total)
    out = []
    for p in parts:
        out.append(max(0.0, float_down(exact)))
        exact -= Fraction(p)
    return out


def node_budgets(depth: NDArray[np.int64], leaf: NDArray[np.bool_], parts: list[float],
                 total: float) -> NDArray[np.float64]:
    """Budget of every node: its depth's part, or the path remainder for a leaf above the
    bottom depth (``len(parts) - 1``)."""
    bottom = len(parts) - 1
    level = np.asarray(parts, dtype=np.float64)[depth]
    rem = np.asarray(path_remainders(total, parts), dtype=np.float64)[depth]
    return np.where(leaf & (depth < bottom), rem, level)


def noisy_tree_counts(true: NDArray[np.int64], budgets: NDArray[np.float64], sensitivity: int,
                      noise: NoiseSource) -> tuple[NDArray[np.int64], NDArray[np.float64],
                                                   NDArray[np.float64]]:
    """Discrete Laplace counts with each node's own budget; also each node's noise SD and
    95 % half-width.  One draw per distinct budget value (few: one per depth)."""
    noisy = np.empty(true.shape, dtype=np.int64)
    sd = np.empty(true.shape, dtype=np.float64)
    ci = np.empty(true.shape, dtype=np.float64)
    values, inverse = np.unique(budgets, return_inverse=True)
    for j, b in enumerate(values.tolist()):
        idx = np.flatnonzero(inverse == j)
        scale = laplace_scale_for_epsilon(b, sensitivity)
        noisy[idx] = true[idx] + noise.discrete_laplace(scale, idx.size)
        sd[idx] = math.sqrt(_noise.discrete_laplace_variance(scale))
        ci[idx] = interval_half_width("discrete_laplace", scale)
    return noisy, sd, ci


def node_variances(budgets: NDArray[np.float64], sensitivity: int) -> NDArray[np.float64]:
    """Discrete Laplace variance of each node's noise (one evaluation per distinct budget)."""
    values, inverse = np.unique(budgets, return_inverse=True)
    v = np.array([_noise.discrete_laplace_variance(laplace_scale_for_epsilon(b, sensitivity))
                  for b in values.tolist()])
    return v[inverse.ravel()]


def tree_levels(first_level: int, parts: list[float], sensitivity: int, nodes: list[int],
                cells: list[float], inferred_sd: list[float], kind: str,
                note: str = "") -> list[LevelPlan]:
    """One count LevelPlan per depth (``extra={"depth": d, ...}``), the bottom one the
    partition."""
    out = []
    bottom = len(parts) - 1
    for d, eps_d in enumerate(parts):
        lv = count_level(first_level + d, f"Depth {d}: {nodes[d]:,} {kind}", pure(eps_d),
                         sensitivity, nodes[d], cells[d], d == bottom,
                         note=note if d == bottom else "")
        out.append(dataclasses.replace(
            lv, extra={"depth": d, "sd_after_inference": float(inferred_sd[d])}))
    return out


# -- the quadtree structure ---------------------------------------------------------------------


def max_quadtree_height(rows: int, cols: int) -> int:
    """Depth at which every quadtree node is a single cell: ``ceil(log2(max side))``."""
    return (max(int(rows), int(cols)) - 1).bit_length()


def quadrant_children(cur: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Children of the rectangles ``cur`` (rows ``(r0, r1, c0, c1)``) split at their middles.

    Four quadrants, two halves when a rectangle has a single row or column, none for a single
    cell.  The middle of ``n`` lines is ``ceil(n/2)`` (the southern / western half gets the odd
    line).  Returns the children's rectangles (those of one parent contiguous, row-major,
    south-west first) and each child's parent index into ``cur``.
    """
    nr = (cur[:, 1] - cur[:, 0] > 1).astype(np.int64) + 1
    nc = (cur[:, 3] - cur[:, 2] > 1).astype(np.int64) + 1
    k = nr * nc
    k[(nr == 1) & (nc == 1)] = 0  # single cells stay leaves
    owner = np.repeat(np.arange(cur.shape[0]), k)
    q = np.arange(owner.size) - np.repeat(np.cumsum(k) - k, k)
    a, b = q // nc[owner], q % nc[owner]
    r0, r1, c0, c1 = (cur[owner, i] for i in range(4))
    rmid = r0 + (r1 - r0 + 1) // 2
    cmid = c0 + (c1 - c0 + 1) // 2
    split_r = nr[owner] == 2
    split_c = nc[owner] == 2
    nr0 = np.where(split_r & (a == 1), rmid, r0)
    nr1 = np.where(split_r & (a == 0), rmid, r1)
    nc0 = np.where(split_c & (b == 1), cmid, c0)
    nc1 = np.where(split_c & (b == 0), cmid, c1)
    return np.column_stack([nr0, nr1, nc0, nc1]).reshape(-1, 4), owner


def quadtree_structure(rows: int, cols: int, height: int) -> tuple[
        NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
    """Rectangles, parent, depth and leaf flag of the quadtree, in level order.

    Children of a node are contiguous, row-major (south-west first).
    """
    rects = [np.array([[0, rows, 0, cols]], dtype=np.int64)]
    parents = [np.array([-1], dtype=np.int64)]
    first = 0
    for _ in range(height):
        cur = rects[-1]
        children, owner = quadrant_children(cur)
        if not owner.size:
            break
        rects.append(children)
        parents.append(owner + first)
        first += cur.shape[0]
    depth = np.concatenate([np.full(r.shape[0], d, dtype=np.int64) for d, r in enumerate(rects)])
    parent = np.concatenate(parents)
    all_rects = np.vstack(rects)
    has_child = np.zeros(all_rects.shape[0], dtype=bool)
    has_child[parent[parent >= 0]] = True
    return all_rects, parent, depth, ~has_child


class Quadtree(PointsMechanism):
    name = "quadtree"
    title = "Quadtree (quadrants with consistent counts)"
    summary = (
        "A full quadtree of the grid with a noisy count in every node, more budget towards the "
        "leaves, made consistent (each area equals the sum of its quadrants)."
    )
    when_to_use = (
        "A data-independent hierarchy: good for queries of many sizes on fairly evenly spread "
        "data. On very clustered data adaptive methods (AG, kd-tree, HTF) usually do better."
    )
    reference = (
        "Cormode, Procopiuc, Srivastava, Shen & Yu, 'Differentially private spatial "
        "decompositions', ICDE 2012; consistency: Hay, Rastogi, Miklau & Suciu, VLDB 2010"
    )
    definitions = ("pure",)
    is_tree = True
    params = (
        Param("height", "Tree height", int, 7,
              "Number of quadrant splits from the whole area to the leaves. Height 7 on a "
              "1024 x 1024 grid gives leaves of 8 x 8 cells; capped where leaves are single cells.",
              minimum=1, maximum=10),
        Param("budget_split", "Budget across levels", str, "geometric",
              "'geometric' gives each level 2^(1/3) times the budget of the level above "
              "(Cormode et al.); 'uniform' gives every level the same.",
              choices=("geometric", "uniform"), advanced=True),
    )

    # -- helpers ---------------------------------------------------------------------
    @staticmethod
    def effective_height(grid: Grid, height: int) -> int:
        return min(int(height), max_quadtree_height(grid.rows, grid.cols))

    def _parts(self, total: float, grid: Grid, params: dict[str, Any]) -> list[float]:
        h = self.effective_height(grid, params["height"])
        return level_budgets(total, h + 1, params["budget_split"])

    # -- plan --------------------------------------------------------------------
    def plan_levels(
        self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], *, sensitivity: int, n_estimate: float | None
    ) -> tuple[LevelPlan, ...]:
        parts = self._parts(cost.value, grid, params)
        _, parent, depth, leaf = quadtree_structure(grid.rows, grid.cols, len(parts) - 1)
        budgets = node_budgets(depth, leaf, parts, cost.value)
        return self._levels(grid, parts, parent, depth, leaf, budgets, sensitivity)

    @staticmethod
    def _levels(grid: Grid, parts: list[float], parent: NDArray[np.int64], depth: NDArray[np.int64],
                leaf: NDArray[np.bool_], budgets: NDArray[np.float64],
                sensitivity: int) -> tuple[LevelPlan, ...]:
        """Count levels of the (public) tree, with the mean post-inference SD of each depth."""
        h = len(parts) - 1
        nodes = np.bincount(depth, minlength=h + 1)
        post = consistent_variance(parent, depth, node_variances(budgets, sensitivity))
        sd_after = np.sqrt(np.bincount(depth, weights=post, minlength=h + 1) / nodes)
        cells = [grid.n_cells / n for n in nodes.tolist()]
        note = ("Leaves above the bottom (single cells of odd-sized ranges) take their path's "
                "remaining budget." if np.any(leaf & (depth < h)) else "")
        return tuple(tree_levels(0, parts, sensitivity, nodes.tolist(), cells, sd_after.tolist(),
                                 "quadrants", note=note))

    # -- release -------------------------------------------------------------------
    def _release(
        self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: NoiseSource
    ) -> PartitionRelease:
        grid = aggregate.grid
        k = aggregate.sensitivity
        parts = self._parts(cost.value, grid, params)
        h = len(parts) - 1
        rects, parent, depth, leaf = quadtree_structure(grid.rows, grid.cols, h)
        budgets = node_budgets(depth, leaf, parts, cost.value)
        noisy, sd_own, ci_own = noisy_tree_counts(rect_sums(aggregate.counts, rects), budgets, k, noise)
        est, sd, ci = consistent_release(parent, depth, noisy, sd_own, ci_own)
        levels = self._levels(grid, parts, parent, depth, leaf, budgets, k)
        return self.make_release(
            aggregate, cost, params, levels,
            rects=rects,
            level=depth,
            leaf=leaf,
            noisy=est,
            sd=sd,
            ci95=ci,
            public={"height": h, "requested_height": params["height"],
                    "budget_split": params["budget_split"]},
            node_budget=budgets,
            is_tree=True,
            measured=noisy.astype(np.float64),  # the raw counts, for the data users' files
        )


__all__ = ["Quadtree", "level_budgets", "node_budgets", "path_remainders", "quadrant_children",
           "quadtree_structure"]
