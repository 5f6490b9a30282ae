"""Constrained inference on a tree of noisy counts (Hay, Rastogi, Miklau & Suciu, PVLDB 2010, §4).

The one implementation of tree least squares in dpcore: the point tree mechanisms (quadtree,
kd-tree, adaptive grid) call it on their node arrays (:func:`consistent_release`), the
hierarchy's ``hay`` mechanism and its plan on level lists (:func:`level_least_squares`).

A tree mechanism (quadtree, kd-tree, adaptive grid) releases a noisy count ``y_v`` for
every node ``v``; the true counts are *consistent*: a node's count is the sum of its
children's.  The noisy ones are not.  The minimum-variance consistent estimate is the
weighted least-squares (WLS) fit

.. math:: \\hat t = \\arg\\min_{t \\text{ consistent}} \\sum_v (y_v - t_v)^2 / \\sigma_v^2 ,

whose unknowns are the leaf values (every other node is a sum of leaves).  Hay et al.
(2010) solve it for equal variances on a complete k-ary tree in two passes; Cormode et
al. (ICDE 2012) generalise it to a budget (variance) per level of a complete tree.  We
implement the same two passes for **any** fan-out (including a single child) and **any**
per-node variance, vectorised by depth:

1. *Bottom-up* (subtree estimates).  ``z_v`` is the WLS estimate of ``t_v`` from the
   observations inside ``v``'s subtree, ``V_v`` its variance.  A leaf has ``z = y``,
   ``V = σ²``.  An internal node combines its own observation with the sum of its
   children's estimates by inverse-variance weighting::

       S_v = Σ_c V_c,   Z_v = Σ_c z_c
       z_v = (y_v · S_v + Z_v · σ_v²) / (σ_v² + S_v),   V_v = σ_v² S_v / (σ_v² + S_v)

2. *Top-down* (distribute the mismatch).  A root keeps ``t̂ = z``.  A child ``c`` of
   ``p`` gets the parent's mismatch in proportion to its variance::

       t̂_c = z_c + (V_c / S_p) · (t̂_p − Z_p)

   With equal variances within a level this is Hay et al.'s "split the difference
   equally among the children"; for a two-level grid it is exactly Qardaji et al.'s
   (ICDE 2013) weighted average of a cell with the sum of its sub-cells.

Why this is the WLS solution: with a flat prior on the leaves and independent
Gaussian noise of the same variances, ``t̂`` is the posterior mean, and the two passes
are the Kalman filter / Rauch–Tung–Striebel smoother on the tree (given the parent's
total, the subtree estimates of disjoint subtrees are independent).  The posterior mean
is the GLS estimator, which depends on the noise only through its variances, so it is the
minimum-variance *linear unbiased* estimate for any zero-mean noise (Gauss–Markov),
discrete Laplace included.  The same recursion gives the exact variance of every
``t̂_v`` (:func:`consistent_variance`), equal to the GLS covariance ``A (AᵀWA)⁻¹ Aᵀ``::

    P_root = V_root,   P_c = V_c (1 − V_c / S_p) + (V_c / S_p)² · P_p

The tests check both passes against a brute-force weighted least-squares solve.

A forest (several roots, e.g. the adaptive grid's first level without a root count) is
allowed: roots have ``parent = -1``.  A node that is not measured (``σ² = ∞``, e.g. a
hierarchy level without budget) drops out of the objective: bottom-up it takes ``z = Z``,
``V = S``.  A root whose value is public (``σ² = 0``, e.g. the total under replace-one
neighbours) keeps it exactly: ``z = y``, ``V = 0``.  Leaves must be measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcore.errors import ParameterError

__all__ = [
    "SparseTreeFit",
    "complete_tree_variances",
    "consistent_counts",
    "consistent_release",
    "consistent_variance",
    "level_least_squares",
    "tree_least_squares",
]


def _check_tree(
    parent: ArrayLike, depth: ArrayLike, variance: ArrayLike
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64], list[NDArray[np.int64]]]:
    """Validated arrays and the node indices of every depth (0 first)."""
    par = np.asarray(parent, dtype=np.int64).ravel()
    dep = np.asarray(depth, dtype=np.int64).ravel()
    var = np.asarray(variance, dtype=np.float64).ravel()
    n = par.size
    if dep.size != n or var.size != n:
        raise ParameterError(
            f"parent, depth and variance must have one entry per node (got {n}, {dep.size}, {var.size})."
        )
    if n == 0:
        return par, dep, var, []
    if np.any(par >= n) or np.any(par < -1):
        raise ParameterError("parent[i] must be -1 (a root) or the index of another node.")
    roots = par < 0
    if np.any(np.isnan(var)) or np.any(var < 0) or np.any((var == 0) & ~roots):
        raise ParameterError("Every node's noise variance must be positive (infinite: not measured; "
                             "0 only for a root whose value is public).")
    if np.any(dep[roots] != 0):
        raise ParameterError("Roots (parent = -1) must have depth 0.")
    child = ~roots
    if np.any(dep[child] != dep[par[child]] + 1):
        raise ParameterError("Every node's depth must be its parent's depth plus one.")
    is_leaf = np.bincount(par[child], minlength=n) == 0
    if np.any(is_leaf & ~np.isfinite(var)):
        raise ParameterError("Every leaf must be measured (a finite noise variance).")
    order = np.argsort(dep, kind="stable")
    starts = np.searchsorted(dep[order], np.arange(int(dep.max()) + 2))
    by_depth = [order[starts[d]:starts[d + 1]] for d in range(int(dep.max()) + 1)]
    return par, dep, var, by_depth


def _subtree_estimate(leaf: NDArray[np.bool_], sig2: NDArray[np.float64], s: NDArray[np.float64],
                      y: NDArray[np.float64], Z: NDArray[np.float64]) -> NDArray[np.float64]:
    """Bottom-up ``z`` of nodes from their own observations ``y`` (variance ``sig2``) and their
    children's sums ``Z`` (variance ``s``): a leaf or public root keeps ``y``, a measured node the
    inverse-variance combination, an unmeasured one ``Z`` (:func:`tree_least_squares`).  ``y`` and
    ``Z`` may carry one column per right-hand side (replicates); the per-node factors broadcast."""
    col = (slice(None),) + (None,) * (y.ndim - 1)
    measured = np.isfinite(sig2)
    public = sig2 == 0.0
    sig2_ = np.where(measured, sig2, 1.0)  # placeholder where unused: no inf/inf
    s_ = np.where(leaf, 1.0, s)
    y = np.where(measured[col], y, 0.0)
    comb = (y * s[col] + Z * sig2_[col]) / (sig2_ + s_)[col]
    return np.where((leaf | public)[col], y, np.where(measured[col], comb, Z))


def _to_parents(p: NDArray[np.int64], vals: NDArray[np.float64], n: int) -> NDArray[np.float64]:
    """``out[q] = Σ_{i: p_i = q} vals_i`` (rows of a matrix summed alike), added in index order."""
    if vals.ndim == 1:
        return np.bincount(p, weights=vals, minlength=n)
    out = np.zeros((n, vals.shape[1]))
    np.add.at(out, p, vals)
    return out


def _bottom_up(
    par: NDArray[np.int64], var: NDArray[np.float64], by_depth: list[NDArray[np.int64]],
    noisy: NDArray[np.float64] | None,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Subtree estimates ``z`` (empty without data; one column per column of ``noisy``), their
    variances ``V`` and the per-parent sums ``Z = Σ_c z_c`` and ``S = Σ_c V_c`` (0 for leaves)."""
    n = par.size
    z = np.zeros((n, *noisy.shape[1:])) if noisy is not None else np.empty(0)
    V = np.zeros(n)
    Z = np.zeros_like(z) if noisy is not None else np.zeros(n)
    S = np.zeros(n)
    has_kids = np.bincount(par[par >= 0], minlength=n) > 0
    for idx in reversed(by_depth):
        s = S[idx]
        leaf = ~has_kids[idx]
        sig2 = var[idx]
        measured = np.isfinite(sig2)
        sig2_ = np.where(measured, sig2, 1.0)  # placeholder where unused: no inf/inf
        s_ = np.where(leaf, 1.0, s)
        # leaves: z = y, V = σ²; measured internal: inverse-variance combination;
        # unmeasured internal: the children's sum; public root: its value, V = 0
        V[idx] = np.where(leaf, sig2, np.where(measured, sig2_ * s / (sig2_ + s_), s))
        if noisy is not None:
            z[idx] = _subtree_estimate(leaf, sig2, s, noisy[idx], Z[idx])
        has_parent = idx[par[idx] >= 0]
        if has_parent.size:
            p = par[has_parent]
            S += np.bincount(p, weights=V[has_parent], minlength=n)
            if noisy is not None:
                Z += _to_parents(p, z[has_parent], n)
    return z, V, Z, S


def tree_least_squares(
    parent: ArrayLike, depth: ArrayLike, noisy: ArrayLike | None, variance: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Weighted least-squares consistent counts of a tree and their exact variances.

    Hay, Rastogi, Miklau & Suciu, "Boosting the accuracy of differentially private
    histograms through consistency", PVLDB 3(1), 2010, §4, generalised to a noise variance
    per node, nodes that are not measured and public roots (module docstring).  The two
    passes, by depth:

    * bottom-up: ``z_v = (y_v S_v + Z_v σ_v²) / (σ_v² + S_v)``,
      ``V_v = σ_v² S_v / (σ_v² + S_v)`` (``Z_v, S_v`` the sums of the children's ``z, V``;
      a leaf has ``z = y, V = σ²``; an unmeasured node ``z = Z, V = S``; a public root
      ``z = y, V = 0``);
    * top-down: ``t̂_c = z_c + (V_c / S_p)(t̂_p − Z_p)`` and
      ``P_c = V_c (1 − V_c / S_p) + (V_c / S_p)² P_p`` from ``t̂ = z, P = V`` at the roots.

    Parameters
    ----------
    parent : array of int
        ``parent[i]`` is the index of node ``i``'s parent, ``-1`` for a root (a forest is fine).
    depth : array of int
        Depth of every node (0 for roots, parent's + 1 otherwise); leaves may lie at any depth.
    noisy : array of float, or None
        The noisy count of every node (ignored where the node is not measured, and may be NaN
        there; a public root's entry is its exact value).  ``None``: variances only (the
        returned counts are then those of all-zero observations).  A matrix with one row per
        node solves each column as its own observation vector, in one pass (the same numbers
        as one call per column: replicates solve 80 at once).
    variance : array of float
        The noise variance of every node's count: ``> 0``; ``inf`` for a node that is not
        measured (never a leaf); ``0`` for a root whose value is public and exact.

    Returns
    -------
    values, variances : numpy.ndarray of float64
        ``t̂`` with ``t̂_v = Σ_{c child of v} t̂_c`` for every internal node (up to float
        rounding), minimising ``Σ_v (y_v − t̂_v)² / σ_v²`` over the measured nodes (with the
        public roots fixed), and the exact variance of each ``t̂_v`` (never above ``σ_v²``).
        O(nodes · height) time.

    Examples
    --------
    A worked example: a root (19), two children (7, 10), four leaves, unit variances.

    >>> parent = [-1, 0, 0, 1, 1, 2, 2]
    >>> depth = [0, 1, 1, 2, 2, 2, 2]
    >>> t, p = tree_least_squares(parent, depth, [19, 7, 10, 5, 1, -3, 8], [1.0] * 7)
    >>> t.round(4).tolist()
    [17.2857, 7.8095, 9.4762, 5.9048, 1.9048, -0.7619, 10.2381]
    >>> p.round(4).tolist()
    [0.5714, 0.4762, 0.4762, 0.619, 0.619, 0.619, 0.619]

    The same tree with the total public (15, variance 0):

    >>> t, p = tree_least_squares(parent, depth, [15, 7, 10, 5, 1, -3, 8], [0.0] + [1.0] * 6)
    >>> t.round(4).tolist()
    [15.0, 6.6667, 8.3333, 5.3333, 1.3333, -1.3333, 9.6667]

Two observation vectors as the columns of one matrix, each solved as above:

    >>> cols = np.array([[19, 7, 10, 5, 1, -3, 8], [12, 7, 10, 5, 1, -3, 8]]).T
    >>> t, p = tree_least_squares(parent, depth, cols, [1.0] * 7)
    >>> t.shape, t[:, 0].round(4).tolist()[:3], t[:, 1].round(4).tolist()[:3]
    ((7, 2), [17.2857, 7.8095, 9.4762], [13.2857, 5.8095, 7.4762])
    >>> bool(np.array_equal(t[:, 1], tree_least_squares(parent, depth, cols[:, 1], [1.0] * 7)[0]))
    True
    """
    par, _, var, by_depth = _check_tree(parent, depth, variance)
    y = None
    if noisy is not None:
        y = np.asarray(noisy, dtype=np.float64)
        y = y.ravel() if y.ndim < 2 else y
        if y.ndim > 2 or y.shape[0] != par.size:
            raise ParameterError(f"noisy must have one entry (or one row) per node (got {y.shape[0] if y.ndim else 1} "
                                 f"for {par.size} nodes).")
        if not np.all(np.isfinite(y[np.isfinite(var)])):
            raise ParameterError("Noisy counts must be finite numbers.")
    if par.size == 0:
        return np.zeros((0, *y.shape[1:]) if y is not None else 0), var.copy()
    z, V, Z, S = _bottom_up(par, var, by_depth, y)
    est = z.copy() if y is not None else np.zeros(par.size)  # roots keep their subtree estimate
    col = (slice(None),) + (None,) * (est.ndim - 1)
    P = V.copy()
    for idx in by_depth[1:]:
        p = par[idx]
        w = V[idx] / S[p]
        if y is not None:
            est[idx] = z[idx] + w[col] * (est[p] - Z[p])
        P[idx] = V[idx] * (1.0 - w) + w * w * P[p]
    # clip float rounding outside the (provable) bounds 0 ≤ P ≤ σ²
    return est, np.maximum(np.minimum(P, var), 0.0)



class SparseTreeFit:
    """:func:`tree_least_squares` of observations that are 0 outside a few nodes, read at those nodes.

    A data user's interval needs ``C q`` only where ``q`` is not 0 (``qᵀCq``), and ``C q`` is the
    fit of pseudo-observations that vanish outside ``q``'s cells (:mod:`dpcore.estimate.gls`).
    The fit is linear in the observations, so a subtree without any observation has ``z = 0``
    bottom-up, and the top-down value of a node needs only its ancestors: both passes run on the
    chosen nodes and their ancestors alone, O(chosen · height) per query instead of
    O(nodes · height).  The data-free quantities ``V`` and ``S`` of the bottom-up pass are computed
    once, here.

    Parameters
    ----------
    parent, depth, variance
        As for :func:`tree_least_squares`.

    Examples
    --------
    The same values as the full two passes, read at two leaves:

    >>> parent, depth, var = [-1, 0, 0, 1, 1, 2, 2], [0, 1, 1, 2, 2, 2, 2], [1.0] * 7
    >>> obs = [0, 0, 0, 2.0, 0, 0, -1.0]
    >>> full = tree_least_squares(parent, depth, obs, var)[0]
    >>> fit = SparseTreeFit(parent, depth, var)
    >>> bool(np.allclose(fit.at([3, 6], [2.0, -1.0]), full[[3, 6]]))
    True
    """

    def __init__(self, parent: ArrayLike, depth: ArrayLike, variance: ArrayLike) -> None:
        self.parent, self.depth, self.var, by_depth = _check_tree(parent, depth, variance)
        _, self.V, _, self.S = _bottom_up(self.parent, self.var, by_depth, None)
        self.leaf = np.bincount(self.parent[self.parent >= 0], minlength=self.parent.size) == 0

    def _with_ancestors(self, nodes: NDArray[np.int64]) -> NDArray[np.bool_]:
        """A mask of ``nodes`` and all their ancestors (no sort: a chain stops at a marked node)."""
        mark = np.zeros(self.parent.size, dtype=bool)
        mark[nodes] = True
        cur = nodes
        while cur.size:
            cur = self.parent[cur]
            cur = cur[cur >= 0]
            cur = cur[~mark[cur]]  # repeats (siblings' parent) stay: at most len(nodes) per step
            mark[cur] = True
        return mark

    def at(self, nodes: ArrayLike, obs: ArrayLike) -> NDArray[np.float64]:
        """The fitted values at ``nodes`` (distinct) when ``obs`` is observed there and 0 elsewhere."""
        nodes = np.asarray(nodes, dtype=np.int64).ravel()
        if nodes.size == 0:
            return np.zeros(0)
        mark = self._with_ancestors(nodes)
        U = np.flatnonzero(mark)
        loc = np.cumsum(mark) - 1  # a node's position in U
        k = U.size
        up = self.parent[U]
        lp = np.where(up >= 0, loc[np.maximum(up, 0)], -1)
        mine = loc[nodes]
        y = np.zeros(k)
        y[mine] = np.asarray(obs, dtype=np.float64).ravel()
        d = self.depth[U]
        order = np.argsort(d, kind="stable")
        starts = np.searchsorted(d[order], np.arange(int(d.max()) + 2))
        levels = [order[starts[i]:starts[i + 1]] for i in range(starts.size - 1)]
        z, Z = np.zeros(k), np.zeros(k)
        S, V = self.S[U], self.V[U]
        for idx in reversed(levels):
            z[idx] = _subtree_estimate(self.leaf[U[idx]], self.var[U[idx]], S[idx], y[idx], Z[idx])
            kid = idx[lp[idx] >= 0]
            Z += np.bincount(lp[kid], weights=z[kid], minlength=k)
        est = z.copy()  # roots keep their subtree estimate
        for idx in levels[1:]:
            p = lp[idx]
            est[idx] = z[idx] + V[idx] / S[p] * (est[p] - Z[p])
        return est[mine]


def consistent_counts(
    parent: ArrayLike, depth: ArrayLike, noisy: ArrayLike, variance: ArrayLike
) -> NDArray[np.float64]:
    """The minimum-variance consistent counts of a tree (weighted least squares).

    The counts of :func:`tree_least_squares` (Hay et al., PVLDB 2010, §4); same parameters.

    >>> consistent_counts([-1, 0, 0], [0, 1, 1], [10.0, 4.0, 5.0], [1.0, 1.0, 1.0]).round(4).tolist()
    [9.6667, 4.3333, 5.3333]
    """
    if noisy is None:
        raise ParameterError("consistent_counts needs the noisy counts.")
    return tree_least_squares(parent, depth, noisy, variance)[0]


def consistent_variance(parent: ArrayLike, depth: ArrayLike, variance: ArrayLike) -> NDArray[np.float64]:
    """Exact variance of every node's consistent count (:func:`consistent_counts`).

    The consistent counts are linear in the noisy ones, so their variance depends only on
    the tree and the noise variances (not on the data or the noise distribution):
    ``P_root = V_root`` and ``P_c = V_c (1 − V_c/S_p) + (V_c/S_p)² P_p``.  Always at most
    the node's own noise variance (Gauss–Markov: its own count is one linear unbiased
    estimate among those the WLS fit improves on).
    """
    return tree_least_squares(parent, depth, None, variance)[1]


def level_least_squares(
    parents: Sequence[ArrayLike], y: Sequence[ArrayLike | None], var: Sequence[float],
    root_value: float | None = None,
) -> tuple[list[NDArray[np.float64]], list[NDArray[np.float64]]]:
    """:func:`tree_least_squares` on a level tree: one root, every leaf at the last depth.

    Parameters
    ----------
    parents : list of arrays of int
        ``parents[d][i]`` is the index (in level ``d``) of the parent of node ``i`` of level
        ``d + 1``; level 0 is the single root.
    y : list of arrays of float or None
        The noisy counts of every level (``None``: not measured, or not known yet).
    var : list of float
        The noise variance of every level; ``math.inf`` for a level that is not measured
        (never the last).
    root_value : float, optional
        The public exact total: the root is fixed to it and its measurement, if any, ignored.

    Returns
    -------
    values, variances : lists of numpy.ndarray, one per level
        The consistent counts (those of all-zero observations where ``y`` is ``None``: with
        ``y`` all ``None`` only the variances mean something, as a data-free plan uses them)
        and their exact variances (0 for a public root).

    Examples
    --------
    >>> values, post = level_least_squares([[0, 0]], [[10.0], [4.0, 5.0]], [1.0, 1.0])
    >>> [v.round(4).tolist() for v in values]
    [[9.6667], [4.3333, 5.3333]]
    >>> [v.round(4).tolist() for v in level_least_squares([[0, 0]], [None, [4.0, 5.0]], [1.0, 1.0], 12)[0]]
    [[12.0], [5.5, 6.5]]
    """
    L = len(parents)
    if not math.isfinite(var[L]):
        raise ParameterError("The finest level must be measured.")
    sizes = [1] + [len(p) for p in parents]
    starts = np.concatenate([[0], np.cumsum(sizes)])
    parent = np.concatenate([[-1]] + [np.asarray(parents[d], dtype=np.int64) + starts[d] for d in range(L)])
    depth = np.repeat(np.arange(L + 1), sizes)
    variance = np.repeat(np.asarray(var, dtype=np.float64), sizes)
    noisy = np.concatenate([np.zeros(n) if yy is None or not math.isfinite(v) else np.asarray(yy, float).ravel()
                            for yy, v, n in zip(y, var, sizes, strict=True)])
    if root_value is not None:
        variance[0], noisy[0] = 0.0, float(root_value)
    values, post = tree_least_squares(parent, depth, noisy, variance)
    return ([values[starts[d]:starts[d + 1]] for d in range(L + 1)],
            [post[starts[d]:starts[d + 1]] for d in range(L + 1)])


def complete_tree_variances(variances: ArrayLike, fanout: int) -> NDArray[np.float64]:
    """Per-depth variance of the consistent counts of a *complete* tree.

    ``variances[d]`` is the noise variance of every count at depth ``d`` (root first, all
    leaves at the last depth) and every internal node has ``fanout`` children.  By
    symmetry all nodes of a depth have the same variance; this is the data-free value
    a plan can show before any release.
    """
    sig2 = np.asarray(variances, dtype=np.float64).ravel()
    if sig2.size == 0 or not np.all(np.isfinite(sig2) & (sig2 > 0)):
        raise ParameterError("Level variances must be positive finite numbers, at least one level.")
    if int(fanout) < 1:
        raise ParameterError(f"The fan-out must be at least 1 (got {fanout}).")
    f = float(fanout)
    h = sig2.size - 1
    V = np.empty(h + 1)
    V[h] = sig2[h]
    for d in range(h - 1, -1, -1):
        s = f * V[d + 1]
        V[d] = sig2[d] * s / (sig2[d] + s)
    P = np.empty(h + 1)
    P[0] = V[0]
    for d in range(1, h + 1):
        P[d] = V[d] * (1.0 - 1.0 / f) + P[d - 1] / (f * f)
    return np.minimum(P, sig2)


def consistent_release(
    parent: ArrayLike, depth: ArrayLike, noisy: ArrayLike, sd: ArrayLike, ci95: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Consistent counts, their exact SD and a 95 % half-width, for a tree release.

    ``sd`` and ``ci95`` are those of each node's *own* noise (from its budget).  The SD
    returned is the exact SD of the consistent count (:func:`consistent_variance`).  The
    half-width is the node's own-noise half-width scaled by the SD ratio.  That is exact
    when the node's own noise dominates its estimate; otherwise the error is a weighted sum
    of many independent errors, closer to normal, whose 95 % point (1.96 SD) lies below
    the discrete Laplace's (about 2.1 SD), so the interval errs on the wide side.  This is
    an approximation, not a bound; the tests check its coverage by Monte Carlo.
    """
    sd_own = np.asarray(sd, dtype=np.float64).ravel()
    var = sd_own**2
    est, var_post = tree_least_squares(parent, depth, noisy, var)
    sd_post = np.sqrt(var_post)
    ratio = np.divide(sd_post, sd_own, out=np.ones_like(sd_post), where=sd_own > 0)
    return est, sd_post, np.asarray(ci95, dtype=np.float64).ravel() * ratio
