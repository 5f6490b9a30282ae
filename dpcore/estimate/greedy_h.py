"""Hilbert order, the dyadic L1 partition and a workload-weighted hierarchy over buckets.

The data-independent parts of DAWA (Li, Hay, Miklau & Wang, "A Data- and Workload-Aware
Algorithm for Range Queries Under Differential Privacy", PVLDB 7(5), 2014): the Hilbert
linearisation of a 2-D grid (Sec. 6), the exact integer bucket costs and the optimal partition
of a cost vector into aligned dyadic intervals (Sec. 3), and the weights of a hierarchy of
queries over the buckets tuned to a workload (Sec. 4, GreedyH).  No noise is drawn here; the
mechanism (:mod:`dpcore.points.mechanisms.dawa`) adds it and states the privacy argument.

The hierarchy (Sec. 4).  GreedyH builds a binary tree over the ``m`` buckets and chooses, node
by node from the leaves up, how the budget is shared between a node's own query and its
subtree, minimising the workload's error under least-squares inference.  We make the same
choice **per level** and in closed form: a workload query is answered from its canonical
decomposition into tree nodes (whole buckets it covers) plus the buckets it covers in part
(weighted by the covered share); if ``N_ℓ`` is the workload's total number of level-``ℓ``
nodes (partial buckets counted as their squared share) and level ``ℓ`` gets the share
``w_ℓ`` of the budget, the workload's total variance is ``Σ_ℓ N_ℓ · c / w_ℓ²`` (``c`` the
noise variance at the whole budget), minimised under ``Σ w_ℓ = 1`` by ``w_ℓ ∝ N_ℓ^(1/3)``.
Least squares over all nodes (:mod:`dpcore.estimate.tree_inference`) answers each query with
at most that variance (it is the best linear unbiased estimate, and the decomposition is one
linear unbiased estimate), so :func:`workload_variance_bound` is an upper bound on the noise
of the released answers.  Levels no query uses get no budget (unmeasured); the leaves are
always measured, so every bucket has an estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from dpcore.errors import ParameterError, curator_only

__all__ = [
    "BucketTree",
    "dyadic_deviation_costs",
    "dyadic_pieces",
    "free_interval_costs",
    "free_start_step",
    "hilbert_cells",
    "level_decomposition",
    "level_weights",
    "node_decomposition",
    "node_decompositions",
    "node_shares",
    "optimal_dyadic_partition",
    "optimal_interval_partition",
    "workload_variance_bound",
]

#: Weight of the leaf level relative to the largest when no workload query uses it (the
#: leaves must be measured so that every bucket has an estimate).
LEAF_FLOOR = 1e-3


# -- Hilbert order (Li et al. 2014, Sec. 6) ----------------------------------------------------
@lru_cache(maxsize=4)
def hilbert_cells(order: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Row and column of every position ``d = 0 .. 4^order − 1`` of the Hilbert curve on a
    ``2^order × 2^order`` square (the classic ``d2xy`` conversion, vectorised).

    Every aligned block of ``4^j`` positions is a ``2^j × 2^j`` square and every aligned block
    of ``2 · 4^j`` positions a ``2^(j+1) × 2^j`` (or transposed) rectangle.

    ``d2xy`` reads ``d``'s base-4 digits from the lowest, each placing the square built so far in
    one quadrant of the square twice its side; the curve of order ``j + 1`` is therefore the curve
    of order ``j`` four times, one copy per quadrant (digit ``q``): ``(y, x)``, ``(x, y + s)``,
    ``(x + s, y + s)`` and ``(2s − 1 − y, s − 1 − x)`` for ``s = 2^j``.  Built so, level by level,
    rather than digit by digit over every position (0.10 -> 0.005 s for 1,024², the first plan of a grid).

    >>> r, c = hilbert_cells(1)
    >>> list(zip(r.tolist(), c.tolist()))
    [(0, 0), (1, 0), (1, 1), (0, 1)]
    """
    if order < 0 or order > 15:
        raise ParameterError(f"Hilbert order must be in 0..15 (got {order}).")
    x = np.zeros(1, dtype=np.int64)
    y = np.zeros(1, dtype=np.int64)
    for j in range(order):
        s, m = 1 << j, x.size
        nx, ny = np.empty(4 * m, dtype=np.int64), np.empty(4 * m, dtype=np.int64)
        nx[:m], ny[:m] = y, x
        nx[m:2 * m] = x
        np.add(y, s, out=ny[m:2 * m])
        np.add(x, s, out=nx[2 * m:3 * m])
        ny[2 * m:3 * m] = ny[m:2 * m]
        np.subtract(2 * s - 1, y, out=nx[3 * m:])
        np.subtract(s - 1, x, out=ny[3 * m:])
        x, y = nx, ny
    x.flags.writeable = False
    y.flags.writeable = False
    return y, x


def hilbert_order_for(rows: int, cols: int) -> int:
    """Smallest ``m`` with ``2^m >= max(rows, cols)``."""
    return max(0, (max(rows, cols) - 1).bit_length())


# -- stage 1: exact costs and the optimal dyadic partition (Sec. 3) ----------------------------
def dyadic_deviation_costs(x: NDArray[np.integer], frac_bits: int) -> list[NDArray[np.int64]]:
    """``round(2^frac_bits · dev(x, b))`` for every aligned dyadic interval ``b`` of ``x``.

    ``dev(x, b) = Σ_{i∈b} |x_i − x̄_b|`` (Li et al. 2014, Sec. 3.1) is computed exactly in
    integers: ``|b| · dev = Σ |‖b‖·x_i − S_b|``; the result is rounded half up.  Entry ``ℓ`` of
    the list holds the ``len(x) / 2^ℓ`` intervals of length ``2^ℓ``; ``len(x)`` must be a power
    of two.  The arithmetic is int64: ``2^(frac_bits+1)·Σ|‖b‖x_i − S_b| ≤ 2^(frac_bits+2)·‖b‖·S_b``
    must stay below ``2^63``, so data beyond that (``4·2^frac_bits·len(x)·Σx ≥ 2^63``) are
    refused rather than wrapped (callers check their own limit first, e.g. DAWA's ``MAX_POINTS``).
    """
    x = np.asarray(x, dtype=np.int64)
    n = x.size
    if n == 0 or n & (n - 1):
        raise ParameterError("The L1 partition needs a power-of-two number of cells.")
    scale = 1 << frac_bits
    if 4 * scale * n * int(x.sum()) + n >= 2**63:
        raise ParameterError(
            curator_only(f"Too many points ({int(x.sum()):,}) for exact L1 costs on {n:,} cells; split the data."))
    out = [np.zeros(n, dtype=np.int64)]
    length = 2
    sums = x
    while length <= n:
        sums = sums[0::2] + sums[1::2]
        blocks = x.reshape(-1, length)
        num = np.abs(blocks * length - sums[:, None]).sum(axis=1)
        out.append((2 * num * scale + length) // (2 * length))
        length *= 2
    return out


def optimal_dyadic_partition(costs: list[NDArray[np.int64]]) -> list[NDArray[np.bool_]]:
    """The partition into aligned dyadic intervals of least total cost (exact integers).

    Bottom-up, ``best(v) = min(cost(v), best(left) + best(right))``; a tie keeps ``v`` whole.
    The result is the least partition in the total order "total cost, then a structural key"
    (the preorder code of the pruned tree, whole before split, left before right), which the
    privacy argument of :mod:`dpcore.points.mechanisms.dawa` needs: ties never depend on the
    costs of parts.  Returns, per level, which intervals are buckets.
    """
    top = len(costs) - 1
    best = costs[0]
    merge = [np.ones(costs[0].size, dtype=bool)]
    for lv in range(1, top + 1):
        split = best[0::2] + best[1::2]
        m = costs[lv] <= split
        merge.append(m)
        best = np.where(m, costs[lv], split)
    chosen: list[NDArray[np.bool_]] = [np.zeros(0, dtype=bool)] * (top + 1)
    covered = np.zeros(1, dtype=bool)
    for lv in range(top, -1, -1):
        if lv < top:
            covered = np.repeat(covered, 2)
        sel = merge[lv] & ~covered
        chosen[lv] = sel
        covered = covered | sel
    return chosen


# -- stage 2: a hierarchy over the buckets tuned to the workload (Sec. 4) ----------------------
@dataclass(frozen=True)
class BucketTree:
    """A binary tree over ``m`` buckets: level ``ℓ`` node ``j`` holds buckets
    ``[j·2^ℓ, min((j+1)·2^ℓ, m))``; level 0 are the buckets, the top level one root."""

    m: int

    @property
    def height(self) -> int:
        return max(0, (self.m - 1).bit_length())

    def n_nodes(self, level: int) -> int:
        return -(-self.m // (1 << level))

    def level_sums(self, values: NDArray[np.number], level: int) -> NDArray[np.number]:
        """Sum of ``values`` (one per bucket) over every node of ``level``."""
        return np.add.reduceat(values, np.arange(0, self.m, 1 << level))


def level_decomposition(tree: BucketTree, coverage: NDArray[np.float64],
                        runs: tuple[NDArray[np.int64], NDArray[np.int64]] | None = None) -> NDArray[np.float64]:
    """Nodes per level of the canonical decomposition of one query, partial buckets counted as
    their squared covered share (what each level contributes to the query's variance, per unit
    of that level's noise variance).  ``coverage[b]`` is the share of bucket ``b`` covered; or,
    with ``runs`` (the wholly covered buckets as maximal runs ``[lo, hi)`` in order, as
    :func:`node_decomposition` takes them), ``coverage`` holds the partial buckets' shares only
    (in bucket order), which spares a pass over every bucket where the runs are known without one."""
    out = np.zeros(tree.height + 1)
    f = np.asarray(coverage, dtype=np.float64)
    full = f >= 1.0
    part = (f > 0) & ~full
    out[0] += float(np.sum(f[part] ** 2))
    if runs is not None:
        assert not full.any(), "with runs, coverage holds the partial shares only"
        lo, hi = (np.array(a, dtype=np.int64) for a in runs)
        if not lo.size:
            return out
    else:
        if not full.any():
            return out
        edge = np.diff(np.concatenate([[0], full.astype(np.int8), [0]]))
        lo = np.flatnonzero(edge == 1)
        hi = np.flatnonzero(edge == -1)
    hi[hi == tree.m] = 1 << tree.height  # a run to the last bucket ends where the right-edge nodes end
    for lv in range(tree.height + 1):  # take the odd ends at each level, then move up
        live = lo < hi
        if not live.any():  # every run used up: the levels above get nothing
            break
        if lv == tree.height:  # one root: whatever is left is the root
            out[lv] += float(live.sum())
            break
        take_lo = live & (lo % 2 == 1)
        take_hi = live & (hi % 2 == 1) & (lo + take_lo < hi)
        out[lv] += float(take_lo.sum() + take_hi.sum())
        lo = (lo + take_lo) // 2
        hi = (hi - take_hi) // 2
    return out


def level_weights(counts: NDArray[np.float64]) -> NDArray[np.float64]:
    """Budget shares ``w_ℓ ∝ N_ℓ^(1/3)`` minimising ``Σ N_ℓ / w_ℓ²`` (sum 1); the leaves get at
    least :data:`LEAF_FLOOR` of the largest so every bucket is measured.

    >>> [round(float(w), 3) for w in level_weights(np.array([8.0, 1.0, 0.0]))]
    [0.667, 0.333, 0.0]
    """
    c = np.asarray(counts, dtype=np.float64).copy()
    if c.size == 0:
        raise ParameterError("The hierarchy needs at least one level.")
    top = float(c.max()) if c.max() > 0 else 1.0
    c[0] = max(c[0], LEAF_FLOOR * top)
    w = np.cbrt(c)
    return w / w.sum()


def workload_variance_bound(per_query: NDArray[np.float64], level_variance: NDArray[np.float64]
                            ) -> NDArray[np.float64]:
    """Upper bound on each query's noise variance after least squares: ``Σ_ℓ n_ℓ(q) σ_ℓ²``
    (levels without budget must not be used by any query)."""
    v = np.asarray(level_variance, dtype=np.float64)
    q = np.asarray(per_query, dtype=np.float64)
    used = q > 0
    if np.any(used & ~np.isfinite(v)[None, :]):
        raise ParameterError("A workload query uses a level without budget.")
    return np.where(used, q * np.where(np.isfinite(v), v, 0.0)[None, :], 0.0).sum(axis=1)


def cube_root_rule_variance(counts: NDArray[np.float64], total_variance: float) -> float:
    """``Σ N_ℓ σ²/w_ℓ²`` at the optimum ``w ∝ N^(1/3)``: ``σ² (Σ N_ℓ^(1/3))³`` (for tests)."""
    return float(total_variance * math.pow(float(np.cbrt(np.asarray(counts)).sum()), 3))


# -- free bucket starts (Sec. 3.3, the reference's intervals of power-of-two length) -----------
def free_start_step(length: int, offsets: int) -> int:
    """Spacing of the starts of the candidate buckets of ``length`` cells: every start for
    ``length <= offsets``, else multiples of ``length / offsets`` (``offsets`` a power of two).

    >>> [free_start_step(n, 4) for n in (1, 2, 4, 8, 64)]
    [1, 1, 1, 2, 16]
    """
    return max(1, length // offsets)


#: Cells of candidate intervals whose deviations :func:`free_interval_costs` computes at once.
COST_CHUNK = 1 << 18


def free_interval_costs(x: NDArray[np.integer], frac_bits: int, offsets: int) -> list[NDArray[np.int64]]:
    """``round(2^frac_bits · dev(x, b))`` (as :func:`dyadic_deviation_costs`) for every interval
    ``b`` of length ``2^ℓ`` starting at a multiple of :func:`free_start_step`: entry ``ℓ`` holds
    the starts ``0, s, 2s, .. ≤ len(x) − 2^ℓ`` in order.  ``offsets = 1`` gives the aligned
    intervals; ``offsets >= len(x)`` every start (Li et al. 2014, Sec. 3.3).  The work is about
    ``offsets · len(x)`` per length (strided views, in chunks of :data:`COST_CHUNK` cells).
    """
    x = np.asarray(x, dtype=np.int64)
    n = x.size
    if n == 0 or n & (n - 1) or offsets < 1 or offsets & (offsets - 1):
        raise ParameterError("The L1 partition needs a power-of-two number of cells and of start offsets.")
    if int(x.min()) < 0:  # counts: the overflow guards below bound |length·x_i − S| by non-negative x
        raise ParameterError("The L1 partition's costs are of counts: every cell must be 0 or more.")
    scale = 1 << frac_bits
    if 4 * scale * n * int(x.sum()) + n >= 2**63:
        raise ParameterError(
            curator_only(f"Too many points ({int(x.sum()):,}) for exact L1 costs on {n:,} cells; split the data."))
    prefix = np.concatenate([[0], np.cumsum(x)])
    out: list[NDArray[np.int64]] = []
    top_count, total = int(x.max()), int(prefix[-1])
    # work buffers reused in place instead of fresh temporaries per chunk (0.80 -> 0.26 s on 1,024²
    # cells); int32 where every term fits, which halves the memory traffic
    buf, scaled = np.empty(max(COST_CHUNK, n), dtype=np.int64), np.empty(n, dtype=np.int64)
    buf32, scaled32 = np.empty(max(COST_CHUNK, n), dtype=np.int32), np.empty(n, dtype=np.int32)
    x_narrow = x.astype(np.int32) if top_count < 2**31 else x
    out.append(np.zeros(n, dtype=np.int64))  # one cell never deviates from its own mean
    if n >= 2:  # two cells deviate by |a − b| from their mean together (exact: 2^f·|a − b| is on the lattice)
        cost = np.abs(x[0:n - 1:free_start_step(2, offsets)] - x[1:n:free_start_step(2, offsets)])
        cost <<= frac_bits
        out.append(cost)
    lv = 2
    while (1 << lv) <= n:
        length = 1 << lv
        step = free_start_step(length, offsets)
        sums = prefix[length::step] - prefix[0:n - length + 1:step]  # the windows' counts, by views
        # Σ_b |L·x_i − S_b| = 2·(Σ_b max(L·x_i, S_b) − L·S_b), as the terms L·x_i − S_b add up to 0:
        # one maximum and one sum per window over L·x (made once per length) instead of a
        # multiply, a subtraction, an absolute value and a sum (with the short windows below: 0.22 -> 0.12 s on 1,024²)
        small = length * top_count < 2**31 and total < 2**31
        y, work = (scaled32, buf32) if small else (scaled, buf)
        np.multiply(x_narrow if small else x, length, out=y)
        cost = np.zeros(sums.size, dtype=np.int64)
        _window_max_sums(y, sums.astype(y.dtype), step, length, work, cost)
        # round(2^f·Σ|L·x_i − S|/L) half up = (2^(f+2)·E + L) // 2L with E = Σ max − L·S ≥ 0: powers
        # of two, so shifts in place (numpy's int64 floor division is slow: ~0.03 s over the 5 M
        # costs), and one or two of them: E·2^(f+1−ℓ) exactly while ℓ ≤ f + 1 (the half rounds
        # down), else (E + 2^(k−1)) >> k with k = ℓ − f − 1
        cost -= sums << lv
        if lv <= frac_bits + 1:
            cost <<= frac_bits + 1 - lv
        else:
            cost += 1 << (lv - frac_bits - 2)
            cost >>= lv - frac_bits - 1
        out.append(cost)
        lv += 1
    return out


#: Windows up to this length are summed offset by offset (:func:`_window_max_sums`).
SHORT_WINDOW = 32


def _window_max_sums(y: NDArray[np.integer], sums: NDArray[np.integer], step: int, length: int,
                     work: NDArray[np.integer], out: NDArray[np.int64]) -> None:
    """``out[a] = Σ_{j < length} max(y[a·step + j], sums[a])`` for every window ``a`` (exact: the
    sums are added in int32 only where twice ``length`` times the largest of ``sums`` fits, a
    bound on every window's total as ``y`` is ``length`` times non-negative counts adding up to
    ``sums``).  Short windows go offset by offset over all windows at once (numpy sums rows of a
    few values slowly: 0.9 against 0.1 ms per 2^18 cells for rows of 8), the others as rows of a
    strided view, in chunks of :data:`COST_CHUNK` cells."""
    nw = sums.size
    narrow = 2 * length * int(sums.max()) < 2**31
    if length <= SHORT_WINDOW:
        acc = np.zeros(nw, dtype=np.int32 if narrow else np.int64)
        term = work[:nw]
        for j in range(length):
            np.maximum(y[j: j + (nw - 1) * step + 1: step], sums, out=term)
            acc += term
        out[:] = acc
        return
    rows = max(1, COST_CHUNK // length)
    for lo, hi in _spans_with_points(sums, max(1, SKIP_CELLS // length)):
        for a in range(lo, hi, rows):
            b = min(hi, a + rows)
            win = np.lib.stride_tricks.as_strided(y[a * step:], shape=(b - a, length),
                                                  strides=(step * y.itemsize, y.itemsize), writeable=False)
            t = work[:(b - a) * length].reshape(b - a, length)
            np.maximum(win, sums[a:b, None], out=t)
            if narrow:
                out[a:b] = np.add.reduce(t, axis=1, dtype=np.int32)
            else:
                np.add.reduce(t, axis=1, dtype=np.int64, out=out[a:b])


#: Empty windows (no point) in runs covering at least this many cells are skipped (their sum is 0).
SKIP_CELLS = 1 << 14


def _spans_with_points(sums: NDArray[np.integer], gap: int) -> list[tuple[int, int]]:
    """The windows ``[lo, hi)`` left once the runs of at least ``gap`` empty windows (``sums`` 0,
    hence every count 0 and every term of :func:`_window_max_sums` 0) are cut out: clustered points
    leave a third to a half of the windows of 64 … 4,096 cells empty on 1,024²; shorter runs
    are kept, where a cut would cost more numpy calls than it saves.

    >>> _spans_with_points(np.array([0, 0, 0, 5, 0, 2, 0, 0]), 2)
    [(3, 6)]
    """
    empty = np.concatenate([[0], (sums == 0).view(np.int8), [0]])
    edge = np.flatnonzero(np.diff(empty))
    start, end = edge[0::2], edge[1::2]  # the runs of empty windows
    long = end - start >= gap
    lo = np.concatenate([[0], end[long]])
    hi = np.concatenate([start[long], [sums.size]])
    keep = hi > lo
    return list(zip(lo[keep].tolist(), hi[keep].tolist(), strict=True))


#: Block of bucket ends the partition's dynamic programme solves at once (a power of two):
#: fewer Python steps (``n / PARTITION_BLOCK``) against more entries per block (the ``r ≤
#: PARTITION_BLOCK`` whose odd part is at most ``offsets``: 9 for 1 offset, 28 for 8, 128 for 64).  128 and 256 were the fastest of 64 … 1,024 on 1,024²
#: cells (0.35 s against 1.1 s for the loop end by end).
PARTITION_BLOCK = 256
#: Candidate ends a block's internal paths are computed for at once, at most: 2^18 was faster than
#: 2^17 on 1,024² with 8 offsets (0.165 against 0.187 s: fewer numpy calls), 2^19 no faster.
PARTITION_CHUNK_CELLS = 1 << 18
#: ... and no more than this table of paths holds (29 MB of int32 on 1,024² with 8 offsets; with 64
#: offsets, 128 entries a block, 2^16 ends: 0.77 s against 0.98 s for 2^17 and 0.94 s before).
PARTITION_TABLE_BYTES = 1 << 25
#: Buckets the walk back finds one by one (a few Python steps each) before it finds the last bucket
#: of every end at once (about 0.03 s on 1,024², when a partition of ~2,000 buckets needs 0.003 s).
BACKTRACK_ONE_BY_ONE = 4096
#: Stand-in for "no path" in the int64 dynamic programme; real totals stay below 2^59.
_NO_PATH = 1 << 61


def optimal_interval_partition(costs: list[NDArray[np.int64]], offsets: int) -> tuple[
        NDArray[np.int64], NDArray[np.int64]]:
    """The partition of ``0 .. n`` into the intervals of :func:`free_interval_costs` of least
    total cost; returns the buckets' starts and lengths in order.

    Dynamic programme over the end ``e`` of the last bucket (exact integers):
    ``best(e) = min_ℓ best(e − 2^ℓ) + cost_ℓ(e − 2^ℓ)`` over the lengths whose start
    ``e − 2^ℓ`` is allowed (a multiple of its step, i.e. ``ℓ ≤ tz(e) + log2 offsets``).  Among
    the lengths reaching ``best(e)`` the longest is the last bucket, so the result is the least
    partition in the fixed order "total cost, then the last bucket's length (longer first), then
    the same order on the rest": a total order on partitions that ignores the costs, which the
    privacy argument of :mod:`dpcore.points.mechanisms.dawa_free` needs.

    ``best`` is computed by :func:`_partition_totals` (blocks of ends at once, the same minima
    as the recurrence end by end: they are unique), then the walk back from ``n``, which finds
    each last bucket from ``best``.

    >>> starts, lengths = optimal_interval_partition([np.array([0, 0, 0, 0]), np.array([5, 0, 5]),
    ...                                                np.array([9])], 2)
    >>> starts.tolist(), lengths.tolist()
    ([0, 1, 3], [1, 2, 1])
    """
    top = len(costs) - 1
    n = 1 << top
    shift = max(0, offsets.bit_length() - 1)
    costs = [np.asarray(c, dtype=np.int64) for c in costs]
    # the widest |cost| of each length as Python ints (np.abs leaves -2^63 negative)
    width = [max(int(c.max()), -int(c.min())) for c in costs]
    widest = max(width)
    # int64 holds every total (at most n buckets) and the stand-in for "no path" with room; the
    # rare costs beyond that (a tiny ε's noise on a large grid) run the same code on Python ints
    fits = (n + 1) * widest < (1 << 59)
    table = costs if fits else [c.astype(object) for c in costs]
    best = _partition_totals(table, shift, top, _NO_PATH if fits else 4 * (n + 1) * (widest + 1), width)
    starts, lengths = [], []
    e = n
    while e > 0 and len(starts) < BACKTRACK_ONE_BY_ONE:  # few buckets: their ends alone
        lv = _last_bucket(best, table, e, shift)
        e -= 1 << lv
        starts.append(e)
        lengths.append(1 << lv)
    if e > 0:  # many: the last bucket of every end at once
        last = np.full(n + 1, -1, dtype=np.int64)
        for lv in range(top, -1, -1):  # longest first: the longest length reaching best(e) is kept
            length, step = 1 << lv, 1 << max(0, lv - shift)
            ends = last[length::step]  # a view: the ends of this length's buckets, in start order
            hit = (best[0:n - length + 1:step] + table[lv] == best[length::step]) & (ends < 0)
            ends[hit] = lv
        back = last[:e + 1].tolist()
        while e > 0:
            ln = 1 << back[e]
            e -= ln
            starts.append(e)
            lengths.append(ln)
    return np.array(starts[::-1], dtype=np.int64), np.array(lengths[::-1], dtype=np.int64)


def _last_bucket(best: NDArray, costs: list[NDArray], e: int, shift: int) -> int:
    """``log2`` of the longest bucket ending at ``e > 0`` whose start's total plus its cost is
    ``best(e)`` (the rule of :func:`optimal_interval_partition`), trying the lengths from the longest
    the end's alignment allows."""
    for lv in range(min(_tz(e) + shift, e.bit_length() - 1), -1, -1):
        s = e - (1 << lv)
        if best[s] + costs[lv][s >> max(0, lv - shift)] == best[e]:
            return lv
    raise AssertionError("no bucket reaches best(e)")  # the dynamic programme's minimum is one of them


def _partition_totals(costs: list[NDArray], shift: int, top: int, inf: int, width: list[int]) -> NDArray:
    """``best(e)`` for every end ``e = 0 .. n`` of :func:`optimal_interval_partition`.

    No numpy or scipy routine runs a min-plus recurrence (scipy's Dijkstra over the candidate
    intervals, about ``n (log2(offsets) + 2)`` of them: ~5n for dawa_free's default 8 starts per
    length, took about as long as a Python loop over the ends on 1,024² cells), so it is
    written here, vectorised over blocks.  The ends are cut into blocks of ``P`` (aligned); the
    buckets ending in block ``(kP, kP + P]`` that start at or before ``kP`` ("external") land on
    a few fixed *entries* ``kP + r`` (``r`` whose odd part is at most ``offsets``, and ``P``); any
    path to an end ``e`` of the block leaves its last external bucket at some entry ``i`` and
    goes on inside the block, so ``best(e) = min_i (in_i + G_k[i, e])``, ``in_i`` the best
    external bucket into entry ``i`` and ``G_k[i, e]`` the least cost from entry ``i`` to ``e``
    with buckets inside the block.  ``G`` needs no value of ``best``: it is built for many blocks at
    once (chunks of :data:`PARTITION_CHUNK_CELLS` cells), end by end (``P`` steps).  Then the
    blocks are walked in order, each finding its ``in_i`` (from ``best`` of earlier blocks) and
    ``best(e)`` only at the few ends that external buckets of later blocks start from (about as
    many as the entries; the walk once found all ``P``).  Last, every end of the chunk by the
    recurrence itself, forward through its blocks all at once from their ``in_i``.  The minima
    are the recurrence's (the same candidates, exact integers).
    ``width[ℓ]``: the widest ``|cost|`` of length ``2^ℓ`` (the caller's, not found again).
    """
    n = 1 << top
    p = min(top, PARTITION_BLOCK.bit_length() - 1)
    size = 1 << p
    blocks = n // size
    dtype = costs[0].dtype  # int64, or object (Python ints) for costs beyond int64's room

    # the entries (relative ends r = 1 .. P reached by an external bucket)
    entries = [r for r in range(1, size + 1)
               if r == size or any((1 << lv) >= r for lv in range(0, min(top, _tz(r) + shift) + 1))]
    slot = {r: j for j, r in enumerate(entries)}
    src, cost, entry_of = _external_buckets(costs, entries, size, shift, top, inf)
    group = np.flatnonzero(np.diff(entry_of, prepend=-1))  # each entry's first external bucket
    # inside a block: the lengths into each relative end r from an end r − 2^ℓ > 0 of the block
    inner = [[lv for lv in range(p) if (1 << lv) < r and lv <= _tz(r) + shift] for r in range(size + 1)]
    upto = np.searchsorted(entries, np.arange(size + 1), side="right")  # entries at or before r
    # the ends (relative, 1 .. P) some external bucket starts from: all the walk needs
    need = np.flatnonzero(np.bincount((src[src > 0] - 1) % size + 1, minlength=size + 1))

    best = np.empty(n + 1, dtype=dtype)
    best[0] = 0
    # paths inside a block in int32 where they fit (half the memory traffic): every such path and
    # the stand-in for "no path" plus one bucket stay below 2^31; the walk adds int64 totals and
    # masks the "no path" cells (an end before the entry), so its minima are the same
    narrow = dtype.kind == "i" and (size + 1) * max(width[:p] + [0]) < 1 << 30
    gtype, ginf = (np.dtype(np.int32), 1 << 30) if narrow else (dtype, inf)
    per_block = size * len(entries) * (4 if narrow else 8)
    chunk = min(blocks, max(1, min(PARTITION_CHUNK_CELLS // size, PARTITION_TABLE_BYTES // per_block)))
    # an end before the entry has no path from it: masked in the walk
    before = np.where(need[:, None] < np.asarray(entries)[None, :], _NO_PATH, 0) if narrow else 0
    # G[r − 1, i, b]: least cost from entry i to end r of block k0 + b inside the block; an entry
    # after r has no path to r: those cells stay "no path" from chunk to chunk, the others are
    # rewritten.  The blocks are the last axis, so each step runs over rows of ``chunk`` values
    # (blocks first, numpy's loops ran over the ≤ 28 entries at a time)
    whole = np.full((size, len(entries), chunk), ginf, dtype=gtype)
    rel = np.empty((size + 1, chunk), dtype=dtype)  # best(kP + r) of the chunk's blocks, r = 1 .. P
    # G's needed ends, block-major; int64 with the mask added once per chunk where that is small (8 MB
    # on 1,024² with 8 offsets: one sum less per block, 0.143 -> 0.136 s; not with 64 offsets' 128 entries)
    folded = narrow and chunk * need.size * len(entries) * 8 <= PARTITION_TABLE_BYTES // 2
    gneed = np.empty((chunk, need.size, len(entries)), dtype=dtype if folded else gtype)
    mask = 0 if folded else before
    for k0 in range(0, blocks, chunk):
        nb = min(chunk, blocks - k0)
        own = _block_costs(costs, k0, nb, size, shift, p, gtype, ginf)
        g = whole[:, :, :nb]
        _inside_paths(g, own, inner, upto, slot, shift)
        # the walk, block by block (block-major rows of the needed ends: 36 of 256 on 1,024² with
        # 8 offsets, where turning the whole table block-major took a quarter of the programme)
        for q, r in enumerate(need.tolist()):  # row by row (numpy's 3-D transpose was 5× slower)
            gneed[:nb, q] = g[r - 1].T
        if folded:
            gneed[:nb] += before
        ends = need + size * np.arange(k0, k0 + nb)[:, None]
        into = np.empty((nb, len(entries)), dtype=dtype)
        reach = np.empty(src.shape[1], dtype=dtype)
        for b in range(nb):  # few numpy calls a block (4,096 blocks on 1,024²), into buffers
            np.add(best[src[k0 + b]], cost[k0 + b], out=reach)
            np.minimum.reduceat(reach, group, out=into[b])
            best[ends[b]] = (gneed[b] + (into[b] if folded else into[b] + mask)).min(axis=1)
        _forward(rel[:, :nb], into, own, inner, slot, shift)  # every end of the chunk
        best[k0 * size + 1:(k0 + nb) * size + 1] = rel[1:, :nb].T.ravel()
    return best


def _inside_paths(g: NDArray, own: list[NDArray], inner: list[list[int]], upto: NDArray, slot: dict[int, int],
                  shift: int) -> None:
    """``g[r − 1, i, b]``: the least cost from entry ``i`` to relative end ``r`` of block ``b`` with
    buckets inside the block (:func:`_partition_totals`), end by end, in place; the cells of entries
    after ``r`` are left as they are ("no path")."""
    for r in range(1, g.shape[0] + 1):
        m = int(upto[r])
        col = g[r - 1, :m]
        for d, lv in enumerate(inner[r]):
            sr = r - (1 << lv)
            c = own[lv][sr >> max(0, lv - shift)]
            if d == 0:
                np.add(g[sr - 1, :m], c, out=col)
            else:  # entries after sr have no path to sr: left out
                j = int(upto[sr])
                np.minimum(col[:j], g[sr - 1, :j] + c, out=col[:j])
        if r in slot:  # after the candidates: from the entry itself they are all "no path"
            col[slot[r]] = 0


def _forward(rel: NDArray, into: NDArray, own: list[NDArray], inner: list[list[int]], slot: dict[int, int],
             shift: int) -> None:
    """``rel[r, b]``: ``best`` at relative end ``r`` of block ``b``, by the recurrence itself, forward through
    all the blocks at once from their entries' ``into`` (:func:`_partition_totals`), in place."""
    for r in range(1, rel.shape[0]):
        row = rel[r]
        fresh = r not in slot
        if not fresh:
            row[:] = into[:, slot[r]]
        for lv in inner[r]:
            sr = r - (1 << lv)
            c = own[lv][sr >> max(0, lv - shift)]
            if fresh:
                np.add(rel[sr], c, out=row)
                fresh = False
            else:
                np.minimum(row, rel[sr] + c, out=row)


def _block_costs(costs: list[NDArray], k0: int, nb: int, size: int, shift: int, p: int, dtype: np.dtype,
                 fill: int) -> list[NDArray]:
    """For :func:`_partition_totals`: the costs of the lengths ``2^ℓ < P`` starting in blocks
    ``k0 .. k0 + nb − 1``, laid out ``[start in the block / step, block]`` in ``dtype`` (one
    contiguous row per start: the steps read a row each instead of a strided copy per step)."""
    out = []
    for lv in range(p):
        per = size >> max(0, lv - shift)
        # the last block's last starts may not exist; narrowed before the transpose (half its time)
        have = costs[lv][k0 * per:(k0 + nb) * per].astype(dtype, copy=False)
        rows = np.full((per, nb), fill, dtype=dtype)
        whole = have.size // per
        rows[:, :whole] = have[:whole * per].reshape(whole, per).T
        rows[:have.size - whole * per, whole:whole + 1] = have[whole * per:, None]
        out.append(rows)
    return out


def _tz(v: int) -> int:
    """Trailing zero bits of ``v > 0``."""
    return (v & -v).bit_length() - 1


def _external_buckets(costs: list[NDArray], entries: list[int], size: int, shift: int, top: int, inf: int
                      ) -> tuple[NDArray[np.int64], NDArray, NDArray[np.int64]]:
    """For :func:`_partition_totals`: every block's external buckets, entry by entry, as the source
    end and the bucket's cost (``inf`` and source 0 where the length does not exist), shape
    ``(blocks, buckets)``, and the entry of each.  The block's last end ``P`` takes every length
    from ``P`` up to what its alignment allows."""
    blocks = (1 << top) // size
    k = np.arange(blocks, dtype=np.int64)
    end = (k + 1) * size
    end_tz = np.log2(end & -end).astype(np.int64)  # exact: powers of two below 2^53
    srcs, cs, entry_of = [], [], []
    for j, r in enumerate(entries):
        lo = max(0, (r - 1).bit_length())  # the shortest length reaching back to kP
        hi = top if r == size else min(top, _tz(r) + shift)
        for lv in range(lo, hi + 1):
            src = k * size + r - (1 << lv)
            ok = src >= 0
            if r == size:
                ok &= lv <= end_tz + shift
            c = np.full(blocks, inf, dtype=costs[0].dtype)
            c[ok] = costs[lv][src[ok] >> max(0, lv - shift)]
            srcs.append(np.where(ok, src, 0))
            cs.append(c)
            entry_of.append(j)
    return np.column_stack(srcs), np.column_stack(cs), np.asarray(entry_of, dtype=np.int64)


def dyadic_pieces(start: NDArray[np.int64], length: NDArray[np.int64]) -> tuple[
        NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Every interval ``[start, start + length)`` cut into its maximal aligned dyadic blocks
    (at most ``2 log2 length`` each): their starts, lengths and the interval each belongs to.

    >>> s, ln, owner = dyadic_pieces(np.array([3]), np.array([8]))
    >>> s.tolist(), ln.tolist(), owner.tolist()
    ([3, 4, 8, 10], [1, 4, 2, 1], [0, 0, 0, 0])
    """
    pos = np.asarray(start, dtype=np.int64).copy()
    end = pos + np.asarray(length, dtype=np.int64)
    owner = np.arange(pos.size)
    out_s, out_l, out_o = [], [], []
    while pos.size:
        low = pos & -pos  # the largest block the start's alignment allows (0: any)
        room = end - pos
        big = np.where(low == 0, room, low)
        size = np.left_shift(1, np.floor(np.log2(np.minimum(big, room))).astype(np.int64))
        out_s.append(pos.copy())
        out_l.append(size)
        out_o.append(owner)
        pos = pos + size
        live = pos < end
        pos, end, owner = pos[live], end[live], owner[live]
    s, ln, o = np.concatenate(out_s), np.concatenate(out_l), np.concatenate(out_o)
    order = np.lexsort((s, o))
    return s[order], ln[order], o[order]


# -- stage 2, node by node (Sec. 4, GreedyH) -----------------------------------------------------
def node_decomposition(tree: BucketTree, buckets: NDArray[np.int64], coverage: NDArray[np.float64],
                       runs: tuple[NDArray[np.int64], NDArray[np.int64]] | None = None
                       ) -> list[tuple[NDArray[np.int64], NDArray[np.float64]]]:
    """As :func:`level_decomposition`, per node and sparse: for each level ``ℓ``, the nodes of the
    query's canonical decomposition and their uses (partial buckets at level 0 as their squared
    covered share).  ``buckets`` (increasing) are the buckets the query touches, ``coverage``
    the share of each it covers; or ``runs``, the wholly covered buckets as maximal runs
    ``[lo, hi)`` in order (then ``buckets`` holds the partial ones only).

    >>> [(i.tolist(), v.tolist()) for i, v in node_decomposition(BucketTree(4), np.array([1, 2, 3]),
    ...                                                             np.array([0.5, 1.0, 1.0]))]
    [([1], [0.25]), ([1], [1.0]), ([], [])]
    """
    return node_decompositions(tree, [(buckets, coverage, runs)])[0]


def node_decompositions(tree: BucketTree, queries: list[tuple[NDArray[np.int64], NDArray[np.float64],
                                                              tuple[NDArray[np.int64], NDArray[np.int64]] | None]]
                        ) -> list[list[tuple[NDArray[np.int64], NDArray[np.float64]]]]:
    """:func:`node_decomposition` of each query ``(buckets, coverage, runs)``, all at once: the runs
    of every query climb the tree together, a few numpy steps per level for all of them instead
    of per query (a workload's 96 rectangles on 1,024²: 0.03 -> 0.01 s a release)."""
    parts, los, his = [], [], []
    for buckets, coverage, runs in queries:
        b = np.asarray(buckets, dtype=np.int64)
        f = np.asarray(coverage, dtype=np.float64)
        full = f >= 1.0
        part = (f > 0) & ~full
        parts.append((b[part], f[part] ** 2))
        fb = b[full]
        if runs is not None:
            assert not fb.size, "with runs, buckets holds the partial buckets only"
            lo, hi = (np.array(a, dtype=np.int64) for a in runs)
        else:  # the wholly covered buckets as maximal runs [lo, hi)
            cut = np.flatnonzero(np.diff(fb) != 1) + 1
            lo = fb[np.concatenate([[0], cut])] if fb.size else fb
            hi = fb[np.concatenate([cut - 1, [fb.size - 1]])] + 1 if fb.size else fb
        los.append(lo)
        his.append(hi)
    nq = len(queries)
    query = np.repeat(np.arange(nq), [a.size for a in los])  # the query of each run
    lo = np.concatenate([np.zeros(0, dtype=np.int64), *los])
    hi = np.concatenate([np.zeros(0, dtype=np.int64), *his])
    hi[hi == tree.m] = 1 << tree.height  # a run to the last bucket ends where the right-edge nodes end
    # whole[lv]: every query's nodes of level lv, query after query, and where each query's begin
    whole: list[tuple[NDArray[np.int64], NDArray[np.int64]]] = []
    top = np.zeros(nq, dtype=np.int64)  # live runs reaching the root, per query
    for lv in range(tree.height + 1):
        live = lo < hi
        if not live.any():  # every run used up: the levels above get nothing
            break
        if lv == tree.height:
            top = np.bincount(query[live], minlength=nq)
            break
        nodes = tree.n_nodes(lv)  # nodes past the last hold only the padding: not counted
        take_lo = live & (lo % 2 == 1)
        take_hi = live & (hi % 2 == 1) & (lo + take_lo < hi)
        # run by run, its left node before its right one (distinct: lo + 1 < hi when both are
        # taken), and the runs stay apart and in order as they move up: increasing, no repeats
        at = np.column_stack([np.where(take_lo, lo, -1), np.where(take_hi, hi - 1, -1)]).ravel()
        keep = (at >= 0) & (at < nodes)
        whole.append((at[keep], np.searchsorted(np.repeat(query, 2)[keep], np.arange(nq + 1))))
        lo = (lo + take_lo) // 2
        hi = (hi - take_hi) // 2
    out = []
    for q in range(nq):
        dec = []
        for lv in range(tree.height + 1):
            pieces = [parts[q]] if lv == 0 else []
            if lv < len(whole):
                i = whole[lv][0][whole[lv][1][q]:whole[lv][1][q + 1]]
                pieces.append((i, np.ones(i.size)))
            elif lv == tree.height and top[q]:
                pieces.append((np.zeros(int(top[q]), dtype=np.int64), np.ones(int(top[q]))))
            pieces = [(i, v) for i, v in pieces if i.size]
            if not pieces:
                dec.append((np.zeros(0, dtype=np.int64), np.zeros(0)))
            elif len(pieces) == 1 and lv < tree.height:  # increasing, no repeats: np.unique's answer as it is
                dec.append(pieces[0])  # (a plan's finest partition asks this ~2,000 times: 0.06 s of sorting)
            else:
                i, v = (np.concatenate(part) for part in zip(*pieces, strict=True))
                u, inv = np.unique(i, return_inverse=True)
                dec.append((u, np.bincount(inv.ravel(), weights=v, minlength=u.size)))
        out.append(dec)
    return out


def node_shares(tree: BucketTree, uses: list[NDArray[np.float64]]) -> list[NDArray[np.float64]]:
    """Each node's share of the budget, chosen node by node from the leaves up (GreedyH's order,
    Li et al. 2014, Sec. 4.2) to minimise the workload's decomposition variance
    ``Σ_v N_v / w_v²`` under "every root-to-leaf path spends at most the whole budget".

    At a node with ``N_v`` uses whose subtrees cost ``C`` at their whole budget, giving the node
    ``a`` and the subtrees ``1 − a`` costs ``N_v/a² + C/(1 − a)²``, least at
    ``a = N_v^⅓ / (N_v^⅓ + C^⅓)`` with value ``(N_v^⅓ + C^⅓)³`` (exact, not a search over a
    few ratios as GreedyH's).  A leaf keeps all that reaches it; leaves get at least
    :data:`LEAF_FLOOR` of the most-used node's uses so every bucket is measured; an unused inner
    node gets 0 (not measured).  Shares along every root-to-leaf path add up to 1.

    >>> t = BucketTree(2)
    >>> [s.round(3).tolist() for s in node_shares(t, [np.array([1.0, 1.0]), np.array([8.0])])]
    [[0.386, 0.386], [0.614]]
    """
    top = max(float(u.max()) for u in uses if u.size) or 1.0
    cost = np.maximum(uses[0], LEAF_FLOOR * top)
    own: list[NDArray[np.float64]] = [np.ones_like(cost)]
    for lv in range(1, tree.height + 1):
        child = cost[0::2].copy()  # pairs of children (the last node of a level may have one)
        child[: cost.size // 2] += cost[1::2]
        own_root, child_root = np.cbrt(uses[lv]), np.cbrt(child)
        whole = own_root + child_root
        own.append(own_root / whole)
        cost = whole ** 3
    shares = [np.zeros(0)] * (tree.height + 1)
    above = np.ones(1)  # what reaches each node of the level from its ancestors
    for lv in range(tree.height, -1, -1):
        if lv < tree.height:
            above = np.repeat(above, 2)[: tree.n_nodes(lv)]
        shares[lv] = above * own[lv]
        above = above * (1.0 - own[lv])
    return shares
