"""HTF's tree building: the exact homogeneity objective, the private split search and the top-down pass.

The Homogeneous Tree Framework (Shaham, Ghinita, Ahuja, Krumm & Shahabi, *HTF: Homogeneous
Tree Framework for Differentially-Private Release of Location Data*, SIGSPATIAL 2021;
Shaham et al., SIGSPATIAL 2021) splits every node where its two children are most homogeneous.  The
mechanism — its parameters, privacy cost, plan and release — is
:class:`dpcore.points.mechanisms.htf.HTF`; this module holds the machinery it runs, vectorised
over all the nodes of one level:

* the homogeneity objective ``o_k = Σ|c − μ1| + Σ|c − μ2|`` (Sec. 4.1, Eqs. 5–7), in
  a reference form (:func:`objective`) and the exact integer form used by releases;
* the Laplace scale of one noisy evaluation (:func:`objective_scale`) and the number of
  search rounds per node (:func:`search_rounds`);
* the private split search: the corrected Algorithm 1 of the paper (noisy local search,
  :func:`alg1_split_points`, Sec. 4.1.2) and the exhaustive baseline
  (:func:`exhaustive_split_points`, Sec. 4.1.1);
* :func:`grow_tree`, the top-down pass that merges the partitioning and count phases level by
  level (a lazy form of Algorithms 2–3, Sec. 4.2–4.3).

Why the objective is computed exactly and rounded to the grid ``g = 2^GRANULARITY_EXP``
before its noise is added is explained in :mod:`dpcore.points.mechanisms.htf`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from dpcore.data.domain import prefix_sums, rect_sums_from_prefix
from dpcore.errors import ParameterError
from dpcore.privacy import noise as _noise
from dpcore.privacy.calibration import interval_half_width, laplace_scale_for_epsilon
from dpcore.privacy.noise import NoiseSource

__all__ = [
    "GRANULARITY",
    "GRANULARITY_EXP",
    "MAX_POINTS",
    "PathBudgets",
    "alg1_split_points",
    "ceil_log2",
    "exhaustive_split_points",
    "grow_tree",
    "objective",
    "objective_scale",
    "rounding_steps",
    "search_rounds",
]


#: The split objective is rounded to multiples of 2^GRANULARITY_EXP before noise is added.
GRANULARITY_EXP = -10
#: The grid ``g = 2^GRANULARITY_EXP`` itself, exact.
GRANULARITY = Fraction(2) ** GRANULARITY_EXP

# Below this bound on n·cells, A·c and every partial sum of P are integers < 2^53: exact in
# float64.  Above it P is summed as int64 in two halves (exact while n·cells < 2^62).
_FLOAT_EXACT = 2**52
#: A release refuses this many points or more.  The float error of o_k stays below g/2 while
#: o_k <= 2n < 2^37 (docstring of :mod:`dpcore.points.mechanisms.htf`); with at most 2^24 cells
#: this also keeps n·cells < 2^62.  No real dataset comes near.
MAX_POINTS = 2**36


class PathBudgets(Protocol):
    """What :func:`grow_tree` reads of the count budgets (:class:`dpcore.points.mechanisms.htf.Budgets`)."""

    @property
    def h(self) -> int: ...

    @property
    def eps_prt_level(self) -> float: ...

    @property
    def by_height(self) -> tuple[float, ...]: ...

    @property
    def rem(self) -> tuple[float, ...]: ...


# =============================================================================================
# the noisy objective: its scale and the search rounds (Sec. 4.1)
# =============================================================================================


def ceil_log2(n: int) -> int:
    """``ceil(log2 n)`` for a positive integer, exact (0 for n <= 1)."""
    return (int(n) - 1).bit_length() if n > 1 else 0


def rounding_steps(sensitivity: int, nodes: int) -> int:
    """Grid steps that rounding can add, summed over the nodes one person touches at a level.

    One person (at most ``k`` records) changes at most ``m = min(k, nodes)`` of the disjoint
    nodes of one level, node ``j`` by ``Δ_j <= 2·k_j`` (``Σ k_j <= k``, paper Theorem 1
    per record).  The released integer is ``rint(a)``, ``a`` the float objective over ``g``
    (nearest, ties to even).  As ``|rint(a) − a| <= 1/2``, two values obey
    ``|rint(a) − rint(b)| <= |a − b| + 1``, and for node ``j``'s two neighbouring values
    ``|a − b| <= Δ_j/g + 2e/g``, where ``e < 2^-14 = g/16`` is the float error of ``o_k``
    (docstring of :mod:`dpcore.points.mechanisms.htf`).  (A bound of ``ceil(|a − b|)`` would
    be false: ``rint(0.5) = 0``, ``rint(1.5) = 2``.)  Summed over the ``m`` nodes, the integers
    released at one evaluation change by at most ``Σ Δ_j/g + 2me/g + m < 2k/g + m + m/8``; the
    change and ``2k/g`` are integers, so it is at most ``2k/g + m + floor(m/8)``: the margin is
    ``m + floor(m/8)`` steps (``= m`` for ``m <= 7``, and 1 for ``k = 1``).

    >>> rounding_steps(1, 1000), rounding_steps(3, 2), rounding_steps(3, 50), rounding_steps(16, 99)
    (1, 2, 3, 18)
    """
    m = max(1, min(int(sensitivity), int(nodes)))
    return m + m // 8


@functools.lru_cache(maxsize=1024, typed=True)
def objective_scale(sensitivity: int, evaluations: int, eps_prt_level: float,
                    nodes: int = 1) -> Fraction:
    """Laplace scale of one objective evaluation, exact: ``t = (2k + s·g)·evaluations/ε'_prt``.

    The objective has sensitivity 2 per record (paper Theorem 1), ``2k`` per unit of
    privacy; ``s·g`` pays for rounding to the grid ``g = 2^-10`` (docstring of
    :mod:`dpcore.points.mechanisms.htf`), with ``s = rounding_steps(k, nodes)`` because one
    person with ``k`` records can move up to ``min(k, nodes)`` of the ``nodes`` searched at
    one level, each by one more grid step.  Each evaluation then spends at most
    ``ε'_prt/evaluations`` over the whole level (parallel composition over its nodes).
    Public inputs only: kept per set of them (exact Fractions; every release asks again).
    """
    steps = rounding_steps(sensitivity, nodes)
    return (Fraction(2 * int(sensitivity)) + steps * GRANULARITY) * int(evaluations) / Fraction(eps_prt_level)


def search_rounds(L: NDArray[np.int64], T: int, adaptive: bool) -> NDArray[np.int64]:
    """Search rounds per node: T, or ``T_eff = min(T, max(0, ceil(log2 L) − 1))``.

    T_eff stops re-evaluating the same bounds on narrow nodes."""
    L = np.asarray(L, dtype=np.int64)
    if not adaptive:
        return np.full(L.shape, int(T), dtype=np.int64)
    lg = np.array([ceil_log2(int(v)) for v in L.tolist()], dtype=np.int64)
    return np.minimum(int(T), np.maximum(0, lg - 1))


# =============================================================================================
# homogeneity objective (Sec. 4.1, Eqs. 5–7)
# =============================================================================================


def objective(block: NDArray[np.integer], k: int, axis: str = "rows") -> float:
    """Reference (direct) objective of splitting ``block`` after ``k`` lines.

    ``o_k = Σ_{cluster 1} |c − μ1| + Σ_{cluster 2} |c − μ2|`` with ``μ`` the cluster means
    (Sec. 4.1, Eqs. 5–7: mean and absolute deviation).  ``axis="rows"`` puts the
    first ``k`` rows in cluster 1, ``"cols"`` the first ``k`` columns.  ``k`` may equal the
    number of lines (no split: the empty cluster contributes 0).  Used by tests; the release
    uses the vectorised exact form.
    """
    b = np.asarray(block, dtype=np.float64)
    if axis == "cols":
        b = b.T
    elif axis != "rows":
        raise ParameterError(f"axis must be 'rows' or 'cols' (got {axis!r}).")
    total = 0.0
    for part in (b[:k], b[k:]):
        if part.size:
            total += float(np.abs(part - part.mean()).sum())
    return total


# =============================================================================================
# private split selection (Sec. 4.1.1–4.1.2), vectorised over the nodes of one level
# =============================================================================================

#: evaluate(k, needed) -> exact objective of every node at offsets k (entries of nodes not
#: in ``needed`` may be anything); add_noise(values, node_index) -> noisy values
Evaluate = Callable[[NDArray[np.int64], NDArray[np.bool_] | None], NDArray[np.float64]]
AddNoise = Callable[[NDArray[np.float64], NDArray[np.int64]], NDArray[np.float64]]


def alg1_split_points(L: NDArray[np.int64], rounds: NDArray[np.int64], evaluate: Evaluate,
                      add_noise: AddNoise) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Corrected Algorithm 1 (Sec. 4.1.2) for many nodes at once.

    ``L[j] >= 2`` lines along node j's split axis, ``rounds[j]`` search rounds.  Returns the
    chosen offsets ``k`` (child 1 = first k lines; ``1 <= k <= L−1``) and the number
    of noisy evaluations per node (at most ``2·rounds + 1``).
    """
    L = np.asarray(L, dtype=np.int64)
    rounds = np.asarray(rounds, dtype=np.int64)
    m = L.size
    lo = np.ones(m, dtype=np.int64)  # S3
    hi = L - 1
    k = lo + (hi - lo) // 2  # S4
    everyone = np.arange(m)
    o = add_noise(evaluate(k, None), everyone)  # S5: kept, never redrawn (erratum: the noisy value is carried)
    n_eval = np.ones(m, dtype=np.int64)
    active = rounds > 0
    for r in range(int(rounds.max()) if m else 0):  # S6
        act = active & (r < rounds)
        if not act.any():
            break
        # erratum: midpoints carry the `lo +` / `k +` offsets; ceil on the right half
        k1 = lo + (k - lo) // 2  # S7
        k2 = k + (hi - k + 1) // 2  # S8
        need1 = act & (k1 != k)  # S9 (a midpoint equal to the centre is skipped)
        need2 = act & (k2 != k)  # S10
        collapsed = act & ~need1 & ~need2  # S11: interval collapsed, budget left unspent
        active &= ~collapsed
        act &= ~collapsed
        o1 = np.full(m, np.inf)
        o2 = np.full(m, np.inf)
        if need1.any():
            idx = np.flatnonzero(need1)
            o1[idx] = add_noise(evaluate(k1, need1)[idx], idx)
            n_eval[idx] += 1
        if need2.any():
            idx = np.flatnonzero(need2)
            o2[idx] = add_noise(evaluate(k2, need2)[idx], idx)
            n_eval[idx] += 1
        centre = act & (o <= o1) & (o <= o2)  # S12: ties prefer k, then k1
        left = act & ~centre & (o1 <= o2)
        right = act & ~centre & ~left
        # S13–S15 as simultaneous assignments (erratum), the winner's noisy value carried
        new_lo = np.where(centre, k1, np.where(right, k, lo))
        new_hi = np.where(centre, k2, np.where(left, k, hi))
        new_k = np.where(left, k1, np.where(right, k2, k))
        o = np.where(left, o1, np.where(right, o2, o))
        lo, hi, k = new_lo, new_hi, new_k
    return k, n_eval


def exhaustive_split_points(L: NDArray[np.int64], evaluate: Evaluate,
                            add_noise: AddNoise) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Exhaustive baseline (Sec. 4.1.1): every candidate 1..L−1, noisy argmin.

    The caller's ``add_noise`` uses ``ε'' = ε'_prt/(L−1)`` per evaluation (ours:
    divide by the number of candidates evaluated).  Ties keep the smaller offset.
    """
    L = np.asarray(L, dtype=np.int64)
    m = L.size
    best = np.full(m, np.inf)
    k_best = np.ones(m, dtype=np.int64)
    n_eval = np.zeros(m, dtype=np.int64)
    for j in range(1, int(L.max()) if m else 1):
        need = (L - 1) >= j
        kk = np.minimum(j, L - 1)
        idx = np.flatnonzero(need)
        vals = add_noise(evaluate(kk, need)[idx], idx)
        n_eval[idx] += 1
        better = vals < best[idx]
        best[idx[better]] = vals[better]
        k_best[idx[better]] = j
    return k_best, n_eval


class _ObjectiveNoise:
    """Adds ``g·DLap(t_j/g)`` to objective values, grouping the nodes that share a scale."""

    def __init__(self, noise: NoiseSource, group: NDArray[np.int64], scales: list[Fraction]) -> None:
        self.noise = noise
        self.group = group
        self.scales = scales

    def __call__(self, values: NDArray[np.float64], idx: NDArray[np.int64]) -> NDArray[np.float64]:
        if len(self.scales) == 1:
            return self.noise.laplace_on_grid(values, self.scales[0], GRANULARITY_EXP)
        out = np.empty(values.shape, dtype=np.float64)
        g = self.group[idx]
        for gi in np.unique(g).tolist():
            sel = g == gi
            out[sel] = self.noise.laplace_on_grid(values[sel], self.scales[gi], GRANULARITY_EXP)
        return out


class _LevelObjective:
    """Exact objective ``o_k`` of the nodes kept at one level, from their non-zero cells.

    Node j covers ``[r0,r1) x [c0,c1)``; it is cut along its axis after ``k`` lines.
    ``o_k = 2·(P1/A1 + P2/A2)``, ``P = Σ_{A·c > S}(A·c − S)`` over the child's non-zero cells
    (zero cells never exceed the mean: ``Σ|c − μ| = 2Σ_{c>μ}(c − μ)``).  ``S`` comes from the 2-D prefix
    sums, ``P`` from one ``bincount`` over the cells.
    """

    def __init__(self, P: NDArray[np.int64], rects: NDArray[np.int64], S: NDArray[np.int64],
                 axis_x: NDArray[np.bool_], cell_node: NDArray[np.int64],
                 coord: NDArray[np.int64], value: NDArray[np.int64], exact_float: bool) -> None:
        self.P = P
        self.r0, self.r1, self.c0, self.c1 = (rects[:, i] for i in range(4))
        self.S = S
        self.axis_x = axis_x
        U = self.r1 - self.r0
        V = self.c1 - self.c0
        self.L = np.where(axis_x, V, U)  # lines along the split axis
        self.W = np.where(axis_x, U, V)  # cells per line
        self.start = np.where(axis_x, self.c0, self.r0)
        self.m = rects.shape[0]
        self.node2 = 2 * cell_node
        self.coord = coord
        self.exact_float = exact_float
        self.value = value.astype(np.float64) if exact_float else value
        self.cell_node = cell_node

    def child1_sums(self, k: NDArray[np.int64]) -> NDArray[np.int64]:
        rr = np.where(self.axis_x, self.r1, self.r0 + k)
        cc = np.where(self.axis_x, self.c0 + k, self.c1)
        P = self.P
        return P[rr, cc] - P[self.r0, cc] - P[rr, self.c0] + P[self.r0, self.c0]

    def __call__(self, k: NDArray[np.int64], needed: NDArray[np.bool_] | None = None) -> NDArray[np.float64]:
        m = self.m
        A1 = k * self.W
        A2 = (self.L - k) * self.W
        S1 = self.child1_sums(k)
        S2 = self.S - S1
        A = np.empty(2 * m, dtype=np.int64)
        A[0::2], A[1::2] = A1, A2
        S = np.empty(2 * m, dtype=np.int64)
        S[0::2], S[1::2] = S1, S2
        node, node2, coord, value = self.cell_node, self.node2, self.coord, self.value
        if needed is not None and needed.sum() < 0.6 * m:
            # most nodes are done: skip the cells of the others
            keep = needed[node]
            node, node2, coord, value = node[keep], node2[keep], coord[keep], value[keep]
        split = self.start + k
        idx = node2 + (coord >= split[node])
        if self.exact_float:
            # every product and partial sum is an integer below 2^53: exact in float64
            t = A.astype(np.float64)[idx] * value
            t -= S.astype(np.float64)[idx]
            np.maximum(t, 0.0, out=t)
            Psum = np.bincount(idx, weights=t, minlength=2 * m)
        else:
            t = A[idx] * value - S[idx]
            np.maximum(t, 0, out=t)
            lo = np.bincount(idx, weights=(t & 0x3FFFFFF).astype(np.float64), minlength=2 * m)
            hi = np.bincount(idx, weights=(t >> 26).astype(np.float64), minlength=2 * m)
            Psum = lo.astype(np.int64) + (hi.astype(np.int64) << 26)  # exact integers
        return 2.0 * (Psum[0::2] / A1 + Psum[1::2] / A2)


# =============================================================================================
# phases P and C, merged level by level (Algorithms 2–3, lazily)
# =============================================================================================


def _split_kept(P: NDArray[np.int64], rects: NDArray[np.int64], S: NDArray[Any], U: NDArray[np.int64],
                V: NDArray[np.int64], kept: NDArray[np.int64], cells: tuple[NDArray[np.int64], ...], i: int, d: int,
                k: int, b: PathBudgets, p: dict[str, Any], noise: NoiseSource,
                axis_rule: Callable[[int, int, dict[str, Any]], bool],
                exact_float: bool) -> tuple[NDArray[np.int64], tuple[NDArray[np.int64], ...]]:
    """Phase P for the kept nodes of one depth: the noisy split search along each node's axis
    (Algorithm 1, or the exhaustive search) and the two children of each (Algorithm 2).
    Returns the children and the non-empty cells re-labelled with their child."""
    cell_node, cell_r, cell_c, cell_v = cells
    m = rects.shape[0]
    new_index = np.full(m, -1, dtype=np.int64)
    new_index[kept] = np.arange(kept.size)
    on = new_index[cell_node] >= 0
    cell_node = new_index[cell_node[on]]
    cell_r, cell_c, cell_v = cell_r[on], cell_c[on], cell_v[on]
    kr = rects[kept]
    kU, kV = U[kept], V[kept]
    axis_x = np.full(kept.size, axis_rule(i, d, p))
    extent = np.where(axis_x, kV, kU)
    axis_x = np.where(extent < 2, ~axis_x, axis_x)  # fallback: other axis
    coord = np.where(axis_x[cell_node], cell_c, cell_r)
    ev = _LevelObjective(P, kr, S[kept], axis_x, cell_node, coord, cell_v, exact_float)
    L = ev.L
    if p["split_method"] == "exhaustive":
        groups, inverse = np.unique(L - 1, return_inverse=True)
        scales = [objective_scale(k, int(c), b.eps_prt_level, kept.size) for c in groups.tolist()]
        add = _ObjectiveNoise(noise, inverse.astype(np.int64), scales)
        ks, _ = exhaustive_split_points(L, ev, add)
    else:
        rounds = search_rounds(L, p["T"], p["adaptive_rounds"])
        groups, inverse = np.unique(rounds, return_inverse=True)
        scales = [objective_scale(k, 2 * int(r) + 1, b.eps_prt_level, kept.size)
                  for r in groups.tolist()]
        add = _ObjectiveNoise(noise, inverse.astype(np.int64), scales)
        ks, _ = alg1_split_points(L, rounds, ev, add)
    # Algorithm 2: child 1 = first k lines along the axis, child 2 = the rest
    r0, r1, c0, c1 = (kr[:, j] for j in range(4))
    cut_c = np.where(axis_x, c0 + ks, c1)
    cut_r = np.where(axis_x, r1, r0 + ks)
    children = np.empty((2 * kept.size, 4), dtype=np.int64)
    children[0::2] = np.column_stack([r0, cut_r, c0, cut_c])
    children[1::2] = np.column_stack([np.where(axis_x, r0, cut_r), r1,
                                      np.where(axis_x, cut_c, c0), c1])
    side = coord >= (ev.start + ks)[cell_node]
    cell_node = 2 * cell_node + side
    return children, (cell_node, cell_r, cell_c, cell_v)


def grow_tree(counts: NDArray[np.int64], k: int, b: PathBudgets, p: dict[str, Any], noise: NoiseSource,
          axis_rule: Callable[[int, int, dict[str, Any]], bool]) -> dict[str, NDArray[Any]]:
    """Top-down pass: stop-test counts, pruning with the path remainder, split search.

    All nodes of a depth are handled together: one discrete Laplace draw per depth for the
    stop tests, one per depth for the pruned leaves, and vectorised split searches.
    """
    N, M = counts.shape
    P = prefix_sums(counts)
    exact_float = int(P[-1, -1]) * N * M < _FLOAT_EXACT
    flat = np.flatnonzero(counts)
    cell_r, cell_c = np.divmod(flat, M)
    cell_v = counts.ravel()[flat]
    cell_node = np.zeros(flat.size, dtype=np.int64)
    rects = np.array([[0, N, 0, M]], dtype=np.int64)
    h = b.h
    theta, kappa = p["theta"], p["kappa"]
    out: dict[str, list[NDArray[Any]]] = {key: [] for key in
                                          ("rects", "level", "leaf", "noisy", "budget", "sd", "ci95")}
    facts: dict[float, tuple[float, float]] = {}

    def sd_ci(eps: float) -> tuple[float, float]:
        if eps not in facts:
            scale = laplace_scale_for_epsilon(eps, k)
            facts[eps] = (math.sqrt(_noise.discrete_laplace_variance(scale)),
                          interval_half_width("discrete_laplace", scale))
        return facts[eps]

    for d in range(h + 1):
        i = h - d  # node height
        m = rects.shape[0]
        S = rect_sums_from_prefix(P, rects)
        U = rects[:, 1] - rects[:, 0]
        V = rects[:, 3] - rects[:, 2]
        cells = U * V
        small = cells < kappa
        single = (U < 2) & (V < 2)  # unsplittable, our stop clause of C4
        e_i = b.by_height[i]
        noisy = np.zeros(m, dtype=np.float64)
        budget = np.full(m, e_i)
        pub_eps = np.full(m, e_i)  # budget of the published count (for sd / ci95)
        # optional [ours]: public size test before spending ε_i
        pre = (small | single) if (p["extent_first"] and i > 0) else np.zeros(m, dtype=bool)
        test = ~pre
        # C1–C2: stop-test count, sensitivity k; acc is implicit: every node of depth d has
        # spent Σ_{j>i} ε_j on its path (path-local, the same for all nodes of a depth)
        y = S[test] + noise.discrete_laplace(laplace_scale_for_epsilon(e_i, k), int(test.sum()))
        noisy[test] = y
        if i == 0:
            leaf = np.ones(m, dtype=bool)  # C3: keep y, path spent exactly ε_data
        else:
            stop_after = np.zeros(m, dtype=bool)
            stop_after[test] = (y <= theta) | small[test] | single[test]  # C4 (<= θ, < κ)
            leaf = pre | stop_after
            # C4: fresh count with all that is left on the path; y is discarded
            if stop_after.any():
                rem = b.rem[i]
                noisy[stop_after] = S[stop_after] + noise.discrete_laplace(
                    laplace_scale_for_epsilon(rem, k), int(stop_after.sum()))
                budget[stop_after] = e_i + rem
                pub_eps[stop_after] = rem
            if pre.any():
                rem = b.rem[i + 1]  # includes ε_i, which was not spent
                noisy[pre] = S[pre] + noise.discrete_laplace(
                    laplace_scale_for_epsilon(rem, k), int(pre.sum()))
                budget[pre] = rem
                pub_eps[pre] = rem
        sd = np.empty(m)
        ci = np.empty(m)
        for eps in np.unique(pub_eps).tolist():
            sel = pub_eps == eps
            sd[sel], ci[sel] = sd_ci(eps)
        out["rects"].append(rects)
        out["level"].append(np.full(m, d, dtype=np.int64))
        out["leaf"].append(leaf)
        out["noisy"].append(noisy)
        out["budget"].append(budget)
        out["sd"].append(sd)
        out["ci95"].append(ci)
        kept = np.flatnonzero(~leaf)
        if i == 0 or kept.size == 0:
            break
        # ---- phase P for the kept nodes (Algorithm 2; only non-pruned nodes are split)
        rects, cells_of = _split_kept(P, rects, S, U, V, kept, (cell_node, cell_r, cell_c, cell_v), i, d, k, b, p,
                                      noise, axis_rule, exact_float)
        cell_node, cell_r, cell_c, cell_v = cells_of
    return {
        "rects": np.concatenate(out["rects"]),
        "level": np.concatenate(out["level"]),
        "leaf": np.concatenate(out["leaf"]),
        "noisy": np.concatenate(out["noisy"]),
        "budget": np.concatenate(out["budget"]),
        "sd": np.concatenate(out["sd"]),
        "ci95": np.concatenate(out["ci95"]),
    }
