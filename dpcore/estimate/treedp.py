"""Exact integer least-squares release on a tree (Fioretto, Van Hentenryck & Zhu, AIJ 2021).

Given noisy integer measurements ``y_v`` of the nodes of a region tree, find the
**non-negative, integer, consistent** hierarchy closest to them in weighted squared L2::

    minimise    Σ_v w_v (x_v − y_v)²          over measured nodes v
    subject to  x_v = Σ_{u ∈ ch(v)} x_u        for every internal node v
                x_v ∈ ℕ                        for every node
                x_root = N                     if the root value N is public

(Fioretto, Van Hentenryck & Zhu, AIJ 2021, Sec. 5–7).  This is the *post-processing* step of
the census mechanisms: it reads only noisy values and public data, so it costs no privacy
and uses no randomness.

Why it is written by hand
-------------------------
No Python library solves an integer convex-cost allocation on a tree exactly at this size
(ours): SciPy has no QP solver at all, ``scipy.optimize.milp`` is linear only, and the
exact unit-segment LP (total unimodularity makes it integral) grows with nodes × window width
and becomes the bottleneck beyond ~10⁵ nodes.  The tree dynamic program below is exact and
runs in O(Σ_v S_v log S_v) (S_v = total width of the children's tables).

The dynamic program (Fioretto et al. 2021, Sec. 7, Alg. 1 in an equivalent form)
---------------------------------
Every node has a *cost table* ``F_v(x)`` = the best cost of v's subtree given ``x_v = x``.
Tables are convex on the integers, so each is stored as its lower bound ``a_v`` and its
non-decreasing **increments** ``inc_v[j] = F_v(a_v+j+1) − F_v(a_v+j)`` (never absolute
costs: those reach 10¹⁷ and would lose precision, ours).  A parent's table is the
*sorted merge* of its children's increments (greedy resource allocation / infimal
convolution of discrete convex functions) plus its own data term ``w_v (2(x − y_v) + 1)``.
The top-down pass hands a parent's value to its children by taking the ``t = x_v − A_v``
smallest merged increments: each child gets a prefix of its own increments.  Ties are
broken by a stable order: equal increments go to the earlier child first (then in the
child's own order), so results are deterministic and reproduce the worked example A′ of the tests.

Domains are **windows** around the noisy values (WINDOW, Fioretto et al. 2021, Sec. 7, Alg. 1 in an equivalent form).  A
*certificate* checks that no node ended on an artificial window edge (x_v = b_v, or
x_v = a_v > 0); the root is included unless its value is fixed (erratum: Algorithm 1's check must include the root).
If the check fails, every half-width is doubled and the DP re-run (WIDEN).

Implementation (vectorised per level, numpy only)
-------------------------------------------------
* **Leaves → parents in closed form.**  All leaves share one weight ``w_L`` and have
  integer ``y``, so leaf u's increments on its window ``[a_u, b_u)`` are ``w_L (2d + 1)``
  with ``d = x − y_u`` running over the integer interval ``[a_u − y_u, b_u − y_u)``.
  Merging siblings' increments is therefore sorting by ``d``; the merged sequence of a
  parent is described by the *coverage* of each ``d`` (how many children's intervals
  contain it), a step function with at most ``2m`` breakpoints for m children.  Nothing of
  size (leaves × window) is ever built: the parent's increments are evaluated only on its
  own window (a ``searchsorted`` into the breakpoints), and the top-down pass finds the
  threshold ``d*`` and gives every child all its ``d < d*`` and the remaining units at
  ``d*`` to the first covering children in order (the stable tie-break).
* **Higher levels** (far fewer nodes) store tables run-length encoded (value, count); a
  whole level is merged with one stable sort keyed by (parent, increment) of the
  concatenated child tables (already in (parent, child, position) order), which keeps the
  owner of every run for the top-down pass.  Unmeasured nodes (no own window) keep the
  full merged range, compressed into runs of equal increments.

Exactness: with equal weights all increments are exact ``int64`` integers.  More generally
the weights are rescaled to integers (exact rational ratios) when that fits comfortably in
int64 (e.g. weights 0.5, 1, 2), and only otherwise (arbitrary float ratios such as
1/Var per level) are increments compared in float64; near-ties closer than ~1e-15
relative may then be broken differently from exact arithmetic.  The reported objective is
always computed exactly (Python integers and ``fractions.Fraction``) and rounded once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from numbers import Integral

import numpy as np
from numpy.typing import NDArray

from dpcore.errors import ParameterError, curator_only

__all__ = ["TreeDPResult", "check_true_total", "default_half_widths", "solve_l2"]

# Values (noisy counts, root value) are capped so that window arithmetic (sums of bounds,
# increments, composite sort keys) can never overflow int64.
_MAX_VALUE = 2**48
# Increments and sort keys must stay below this to use exact int64 arithmetic.
_INT_LIMIT = 2**61

I64 = NDArray[np.int64]


@dataclass(frozen=True)
class TreeDPResult:
    """The released hierarchy and how it was found.

    Attributes
    ----------
    values : tuple of numpy.ndarray (int64)
        ``values[d][i]`` is the released value of node i of level d (0 = root).  Every
        value is ≥ 0, every parent equals the sum of its children, and the root equals
        ``root_value`` when one was given.  The arrays are read-only.
    objective : float
        ``Σ_d w_d Σ_{v ∈ level d} (x_v − y_v)²`` over measured levels, computed exactly
        (Python integers and ``Fraction`` of the float weights) and rounded once to float.
    widenings : int
        How many times the windows were doubled because the certificate failed (a node on
        an artificial window edge, an empty window, or the root value outside the range).
    half_widths : tuple of float
        The half-widths ``h_d`` of the final (certified) run, per level.  Unmeasured
        levels have no window of their own; their entry is carried along unused.
    """

    values: tuple[np.ndarray, ...]
    objective: float
    widenings: int
    half_widths: tuple[float, ...]


def default_half_widths(weights: Sequence[float]) -> tuple[float, ...]:
    """Default window half-widths ``h_d = max(5, ⌈6 / √w_d⌉)`` (ours).

    With ``w_d = 1/Var_d`` (the *unnormalised* inverse noise variance) this is our
    ``h = max(5, ⌈6·sd⌉)``.  Callers who normalise the weights must pass half-widths
    explicitly.  A non-positive or non-finite weight (an unmeasured level) gets 5.
    """
    out = []
    for w in weights:
        wf = float(w)
        out.append(float(max(5, math.ceil(6.0 / math.sqrt(wf)))) if math.isfinite(wf) and wf > 0
                   else 5.0)
    return tuple(out)


# --------------------------------------------------------------------------------------
# validation


@dataclass(frozen=True)
class _Tree:
    parents: tuple[I64, ...]     # parents[d][i]: parent (level d) of node i of level d+1
    sizes: tuple[int, ...]       # n_d
    starts: tuple[I64, ...]      # starts[d][i]: first child of node i of level d; length n_d + 1


def _check_tree(parents: Sequence[np.ndarray]) -> _Tree:
    """Validate the level tree (O(nodes)) and index each node's first child."""
    sizes = [1]
    pars: list[I64] = []
    starts: list[I64] = []
    for d, p in enumerate(parents):
        arr = np.asarray(p)
        if arr.ndim != 1 or arr.size == 0:
            raise ParameterError(f"parents[{d}] must be a non-empty 1-D array of parent indices "
                                 f"(one per node of level {d + 1}).")
        if not np.issubdtype(arr.dtype, np.integer):
            raise ParameterError(f"parents[{d}] must hold integer indices (got dtype {arr.dtype}).")
        arr = arr.astype(np.int64)
        step = np.diff(arr)
        if np.any(step < 0):
            i = int(np.flatnonzero(step < 0)[0])
            raise ParameterError(
                f"parents[{d}] must be non-decreasing (each parent's children contiguous, parents "
                f"in order); node {i + 1} of level {d + 1} has parent {arr[i + 1]} after {arr[i]}.")
        n_up = sizes[-1]
        if arr[0] != 0 or arr[-1] != n_up - 1:
            raise ParameterError(
                f"parents[{d}] must start at parent 0 and end at parent {n_up - 1} (level {d} has "
                f"{n_up} node(s), each needs at least one child); got {arr[0]} … {arr[-1]}.")
        if np.any(step > 1):
            i = int(np.flatnonzero(step > 1)[0])
            raise ParameterError(
                f"Every node of level {d} needs at least one child (all leaves at the last level): "
                f"parents[{d}] jumps from {arr[i]} to {arr[i + 1]}.")
        first = np.flatnonzero(np.concatenate(([True], step > 0)))
        starts.append(np.append(first, arr.size).astype(np.int64))
        pars.append(arr)
        sizes.append(int(arr.size))
    return _Tree(tuple(pars), tuple(sizes), tuple(starts))


def _check_noisy(noisy: Sequence[np.ndarray | None], sizes: tuple[int, ...]) -> list[I64 | None]:
    if len(noisy) != len(sizes):
        raise ParameterError(f"noisy must have one entry (array or None) per level: the tree has "
                             f"{len(sizes)} levels, got {len(noisy)}.")
    out: list[I64 | None] = []
    for d, (y, n) in enumerate(zip(noisy, sizes, strict=True)):
        if y is None:
            out.append(None)
            continue
        arr = np.asarray(y)
        if arr.ndim != 1 or arr.size != n:
            raise ParameterError(f"noisy[{d}] must be a 1-D array with one value per node of level "
                                 f"{d} ({n}); got shape {arr.shape}.")
        if not np.issubdtype(arr.dtype, np.integer):
            if not (np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr))
                    and np.all(arr == np.round(arr))):
                raise ParameterError(f"noisy[{d}] must hold integers (the mechanism's noise is "
                                     f"discrete); got dtype {arr.dtype} with non-integer values.")
        if arr.size and float(np.max(np.abs(arr.astype(np.float64)))) > _MAX_VALUE:
            raise ParameterError(f"noisy[{d}] has a value beyond ±2^48; such counts are not "
                                 "supported.")
        out.append(arr.astype(np.int64))
    if out[-1] is None:
        raise ParameterError(
            "The leaf level must be measured: an unmeasured leaf has no data to window on and its "
            "split would be arbitrary. Remove the level from the tree instead.")
    return out


def _check_weights(weights: Sequence[float], ys: list[I64 | None]) -> list[float]:
    if len(weights) != len(ys):
        raise ParameterError(f"weights must have one entry per level ({len(ys)}), got "
                             f"{len(weights)}.")
    out = []
    for d, (w, y) in enumerate(zip(weights, ys, strict=True)):
        try:
            wf = float(w)
        except (TypeError, ValueError):
            raise ParameterError(f"weights[{d}] must be a number; got {w!r}.") from None
        if y is not None and not (math.isfinite(wf) and wf > 0):
            raise ParameterError(f"weights[{d}] must be a positive finite number (the inverse "
                                 f"noise variance of level {d}); got {w!r}.")
        out.append(wf)
    return out


def _check_half_widths(half_widths: Sequence[float], n_levels: int) -> list[float]:
    if len(half_widths) != n_levels:
        raise ParameterError(f"half_widths must have one entry per level ({n_levels}), got "
                             f"{len(half_widths)}.")
    try:
        out = [float(h) for h in half_widths]
    except (TypeError, ValueError):
        raise ParameterError(f"half_widths must be numbers; got {list(half_widths)!r}.") from None
    for d, h in enumerate(out):
        if not (math.isfinite(h) and h > 0):
            raise ParameterError(f"half_widths[{d}] must be a positive finite number; got {h!r}.")
    return out


# --------------------------------------------------------------------------------------
# arithmetic: exact integer increments when possible


def _scaled_weights(w: list[float], ys: list[I64 | None], H: list[int]) -> list[int] | list[float]:
    """Per-level weights for the increments, as exact integers when they fit.

    Increments are sums over a root-to-leaf chain of ``W_d (2(x − y) + 1)`` with
    ``|x − y| ≤ H_d + max|y_d|``; rescaling all weights by one positive factor changes no
    comparison, so the exact rational ratios ``w_d / min w`` are brought to a common
    denominator.  Equal weights give W ≡ 1.  If the integers (times the bound on
    ``2|x−y|+1``) would not stay below 2^61, fall back to float64 (documented above).
    """
    measured = [d for d, y in enumerate(ys) if y is not None]
    fr = {d: Fraction(w[d]) for d in measured}
    base = min(fr.values())
    ratio = {d: fr[d] / base for d in measured}
    den = 1
    for r in ratio.values():
        den = den * r.denominator // math.gcd(den, r.denominator)
    W = {d: int(ratio[d] * den) for d in measured}
    bound = 0
    for d in measured:
        y = ys[d]
        ymax = int(np.max(np.abs(y))) if y is not None and y.size else 0
        bound += W[d] * (2 * (H[d] + ymax) + 1)
    if bound < _INT_LIMIT:
        return [W.get(d, 0) for d in range(len(w))]
    return [w[d] / float(base) if d in W else 0.0 for d in range(len(w))]


def _stable_order(par: I64, val: np.ndarray, n_par: int) -> I64:
    """Stable argsort by (par, val); ``par`` is already non-decreasing.

    One composite int64 key when it fits (timsort exploits the pre-sorted child runs),
    else ``np.lexsort`` (also stable)."""
    if val.size == 0:
        return np.zeros(0, dtype=np.int64)
    if np.issubdtype(val.dtype, np.integer):
        vmin = int(val.min())
        span = int(val.max()) - vmin + 1
        if n_par * span < _INT_LIMIT:
            return np.argsort(par * span + (val - vmin), kind="stable")
    return np.lexsort((val, par))


# --------------------------------------------------------------------------------------
# one windowed DP run


def _window(y: I64, H: int) -> tuple[I64, I64]:
    """WINDOW(v) = [max(0, ⌊y − h⌋), max(⌈y + h⌉, ⌈h⌉)] with H = ⌈h⌉ (y integer)."""
    return np.maximum(y - H, 0), np.maximum(y + H, H)


def _positions(A: I64, G: I64, lo: I64, hi: I64) -> tuple[I64, I64, I64, I64]:
    """Flattened window positions of every node: (node, x, global merged position, offsets).

    Node i's table covers x ∈ [lo_i, hi_i); its merged (children) sequence starts at
    value A_i and at global position G_i of the level's concatenated merged sequence."""
    lens = hi - lo
    off = np.zeros(lens.size + 1, dtype=np.int64)
    np.cumsum(lens, out=off[1:])
    node = np.repeat(np.arange(lens.size, dtype=np.int64), lens)
    x = np.arange(int(off[-1]), dtype=np.int64) - off[:-1][node] + lo[node]
    return node, x, G[node] + (x - A[node]), off


@dataclass
class _LeafMerge:
    """Merged leaf increments of every leaf-parent, as a coverage step function over d."""

    par: I64       # parent of each breakpoint / segment
    lo: I64        # per leaf: first d = a_u − y_u
    ln: I64        # per leaf: table length b_u − a_u (≥ 1)
    ev_d: I64      # sorted breakpoints (by parent, d); segment k covers [ev_d[k], ev_d[k+1])
    cov: I64       # number of children covering segment k
    start: I64     # global merged position of segment k's first unit
    end: I64       # ... and one past its last

    def d_at(self, q: I64) -> tuple[I64, I64]:
        """The d of global merged position q, and q's rank among the units at that d."""
        k = np.searchsorted(self.end, q, side="right")  # zero-unit segments are skipped
        off = q - self.start[k]
        c = self.cov[k]
        return self.ev_d[k] + off // c, off % c


def _merge_leaves(p: I64, a: I64, b: I64, y: I64) -> _LeafMerge:
    """Coverage breakpoints of the leaves' d-intervals, per parent (2 events per leaf)."""
    lo = a - y
    ln = b - a
    n = p.size
    ev_par = np.concatenate((p, p))
    ev_d = np.concatenate((lo, lo + ln))
    delta = np.concatenate((np.ones(n, dtype=np.int64), -np.ones(n, dtype=np.int64)))
    order = np.lexsort((ev_d, ev_par))
    ev_par, ev_d = ev_par[order], ev_d[order]
    cov = np.cumsum(delta[order])  # each parent's deltas sum to 0, so one global cumsum
    seg = np.zeros(2 * n, dtype=np.int64)
    seg[:-1] = np.where(ev_par[1:] == ev_par[:-1], ev_d[1:] - ev_d[:-1], 0)
    units = cov * seg
    end = np.cumsum(units)
    return _LeafMerge(ev_par, lo, ln, ev_d, cov, end - units, end)


@dataclass
class _RunMerge:
    """Merged run-length-encoded child tables of a generic level, in stable order."""

    own: I64       # child (index in level d+1) owning each merged run
    par: I64       # its parent
    cnt: I64       # run length
    end: I64       # global merged position one past the run


@dataclass
class _Level:
    a: I64                       # table lower bound a_v
    b: I64                       # table upper bound b_v
    A: I64 | None = None         # Σ children's a (internal nodes)
    S: I64 | None = None         # Σ children's (b − a) = merged length
    G: I64 | None = None         # exclusive cumsum of S: where v's merged units start
    merge: _LeafMerge | _RunMerge | None = None


#: Most cost-table entries one level may hold (≈ 0.4 GB per int64 array).  The US tract
#: hierarchy at ε = 0.1 needs about 2.2 million; only noisy values very far from a public root
#: value (or from each other) need more, through the widening that certifies the optimum.
MAX_TABLE_ENTRIES = 50_000_000


def check_true_total(total: int) -> None:
    """Refuse, before a budget is charged, a true total too large for the solver.

    :func:`solve_l2` refuses a public root value, or a noisy value, beyond ``2^48``.  Every true
    value of a hierarchy is at most its total, so a total of at most ``2^47`` (checked here, on the
    true data, before the noise) leaves the refusal of a noisy value to noise beyond ``2^47``,
    which no calibrated scale draws in practice.  The check publishes nothing and only the curator,
    who holds the counts, sees a refusal.

    >>> check_true_total(10**9)
    >>> check_true_total(2**48)
    Traceback (most recent call last):
    ...
    dpcore.errors.ParameterError: curator only, not for publication: The total (281,474,976,710,656) is beyond \
140,737,488,355,328, the most the exact solver takes; split the data into smaller releases.
    """
    if int(total) > _MAX_VALUE // 2:
        raise ParameterError(
            curator_only(f"The total ({int(total):,}) is beyond {_MAX_VALUE // 2:,}, the most the exact solver takes; "
            "split the data into smaller releases.")
        )


def _check_table_size(n: int) -> None:
    if n > MAX_TABLE_ENTRIES:
        raise ParameterError(
            f"The exact solver would need {n:,} cost-table entries for one level (at most "
            f"{MAX_TABLE_ENTRIES:,}): the noisy counts lie very far from the public total or from "
            "each other. Use a TopDown mechanism (topdown_l2 or topdown_linf) for these counts."
        )


def _attempt(tree: _Tree, ys: list[I64 | None], W: list, H: list[int],
             N: int | None) -> tuple[list[I64], list[_Level]] | None:
    """One bottom-up / top-down run with fixed windows.  None ⇒ WIDEN (empty window or N
    outside the root range).  The caller runs the certificate."""
    up = _bottom_up(tree, ys, W, H)
    if up is None:
        return None
    levels, tval, tcnt = up
    root = levels[0]
    if N is not None:
        if not (int(root.a[0]) <= N <= int(root.b[0])):
            return None
        x0 = N
    else:  # leftmost minimiser of the convex root table
        x0 = int(root.a[0]) + int(tcnt[tval < 0].sum())
    return _top_down(tree, levels, x0), levels


def _bottom_up(tree: _Tree, ys: list[I64 | None], W: list,
               H: list[int]) -> tuple[list[_Level], np.ndarray, I64] | None:
    """The cost tables, leaves to root, as windows and sorted increments; ``None`` when a
    window is empty (WIDEN).  Returns the levels and the root's table (increments, counts)."""
    L = len(tree.sizes) - 1
    levels: list[_Level | None] = [None] * (L + 1)
    yL = ys[L]
    assert yL is not None
    aL, bL = _window(yL, H[L])
    levels[L] = _Level(aL, bL)
    tval: np.ndarray = np.zeros(0)
    tcnt: I64 = np.zeros(0, dtype=np.int64)
    toff: I64 = np.zeros(1, dtype=np.int64)
    for d in range(L - 1, -1, -1):
        p, st, n = tree.parents[d], tree.starts[d], tree.sizes[d]
        child = levels[d + 1]
        assert child is not None
        A = np.add.reduceat(child.a, st[:-1])
        S = np.add.reduceat(child.b - child.a, st[:-1])
        G = np.zeros(n, dtype=np.int64)
        np.cumsum(S[:-1], out=G[1:])
        if d == L - 1:
            mg: _LeafMerge | _RunMerge = _merge_leaves(p, child.a, child.b, yL)
        else:
            run_child = np.repeat(np.arange(tree.sizes[d + 1], dtype=np.int64), np.diff(toff))
            run_par = p[run_child]
            order = _stable_order(run_par, tval, n)
            val_m, cnt_m = tval[order], tcnt[order]
            mg = _RunMerge(run_child[order], run_par, cnt_m, np.cumsum(cnt_m))
        y = ys[d]
        if y is not None:
            wa, wb = _window(y, H[d])
            a, b = np.maximum(A, wa), np.minimum(A + S, wb)
            if np.any(a > b):
                return None
            _check_table_size(int(np.sum(b - a)))
            node, x, q, toff = _positions(A, G, a, b)
            if isinstance(mg, _LeafMerge):
                dd, _ = mg.d_at(q)
                psi = W[L] * (2 * dd + 1)
            else:
                psi = val_m[np.searchsorted(mg.end, q, side="right")]
            # F_v increments: merged children's + own data term w (2(x − y) + 1)
            tval = psi + W[d] * (2 * (x - y[node]) + 1)
            tcnt = np.ones(tval.size, dtype=np.int64)
        else:
            a, b = A, A + S
            if isinstance(mg, _LeafMerge):
                # expand the coverage step function to one run per covered d (a segment
                # with coverage > 0 is always followed by a breakpoint of the same parent)
                k = np.flatnonzero(mg.cov > 0)
                seg = np.zeros(mg.ev_d.size, dtype=np.int64)
                seg[:-1] = mg.ev_d[1:] - mg.ev_d[:-1]
                k = k[seg[k] > 0]
                lens = seg[k]
                _check_table_size(int(lens.sum()))
                off = np.zeros(k.size + 1, dtype=np.int64)
                np.cumsum(lens, out=off[1:])
                rep = np.repeat(np.arange(k.size), lens)
                dd = mg.ev_d[k][rep] + (np.arange(int(off[-1])) - off[:-1][rep])
                tval = W[L] * (2 * dd + 1)
                tcnt = mg.cov[k][rep]
                run_node = mg.par[k][rep]
            else:
                # compress equal consecutive increments of one parent into one run
                keep = np.ones(val_m.size, dtype=bool)
                keep[1:] = (mg.par[1:] != mg.par[:-1]) | (val_m[1:] != val_m[:-1])
                idx = np.flatnonzero(keep)
                tval = val_m[idx]
                tcnt = np.add.reduceat(mg.cnt, idx) if idx.size else mg.cnt[:0]
                run_node = mg.par[idx]
            toff = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.bincount(run_node, minlength=n), out=toff[1:])
        levels[d] = _Level(a, b, A, S, G, mg)

    return [lv for lv in levels if lv is not None], tval, tcnt


def _top_down(tree: _Tree, levels: list[_Level], x0: int) -> list[I64]:
    """Each level's values from the root value ``x0`` down, splitting every parent's units among
    its children by the merged tables (earlier child first on ties)."""
    L = len(tree.sizes) - 1
    xs: list[I64] = [np.array([x0], dtype=np.int64)]
    for d in range(L):
        lv, child = levels[d], levels[d + 1]
        assert lv is not None and child is not None and lv.A is not None
        assert lv.S is not None and lv.G is not None
        t = xs[d] - lv.A                                   # units taken from the merge
        mg = lv.merge
        if isinstance(mg, _LeafMerge):
            p = tree.parents[d]
            full = t >= lv.S
            q = lv.G + np.minimum(t, lv.S - 1)
            dstar, r = mg.d_at(q)
            big = int((mg.lo + mg.ln).max()) + 1
            dstar = np.where(full, big, dstar)
            r = np.where(full, 0, r)
            ds = dstar[p]
            # every leaf takes all its d < d*; the r units at d* go to the first covering
            # children in child order (the stable tie-break)
            base = np.clip(ds - mg.lo, 0, mg.ln)
            cover = (mg.lo <= ds) & (ds < mg.lo + mg.ln)
            cs = np.zeros(p.size + 1, dtype=np.int64)
            np.cumsum(cover, out=cs[1:])
            rank = cs[:-1] - cs[tree.starts[d][:-1]][p]
            xs.append(child.a + base + (cover & (rank < r[p])))
        else:
            assert isinstance(mg, _RunMerge)
            start_local = mg.end - mg.cnt - lv.G[mg.par]
            take = np.clip(t[mg.par] - start_local, 0, mg.cnt)
            got = np.bincount(mg.own, weights=take, minlength=tree.sizes[d + 1])
            xs.append(child.a + np.rint(got).astype(np.int64))
    return xs


def _certified(xs: list[I64], levels: list[_Level], root_fixed: bool) -> bool:
    """No node on an artificial window edge: x = b, or x = a > 0 (Fioretto et al. 2021, Sec. 7, Alg. 1 in an equivalent form;
    a fixed root is the only node skipped)."""
    for d, (x, lv) in enumerate(zip(xs, levels, strict=True)):
        if d == 0 and root_fixed:
            continue
        if np.any((x == lv.b) | ((x == lv.a) & (lv.a > 0))):
            return False
    return True


def _safe_half_width(ys: list[I64 | None], N: int | None, n_leaves: int) -> int:
    """A half-width at which the certificate provably passes (termination of WIDEN).

    Let M bound every optimal value.  With a fixed root, M = N.  With a free root, an
    optimal leaf satisfies x_u ≤ max(0, max y): otherwise lowering that leaf and all its
    ancestors by one keeps feasibility and strictly lowers every measured term on the path
    (each has x ≥ y + 1), the leaf's included; so M = n_leaves · max(0, max y).  With
    H > M + max|y| every window has lower end 0 and upper end ≥ H > M (sums of children's
    upper ends too), so all optima lie inside, the windowed optimum is a global one, and
    none of its values sits on an edge: the certificate passes.
    """
    ymax_abs, ymax = 0, 0
    for y in ys:
        if y is not None and y.size:
            ymax_abs = max(ymax_abs, int(np.abs(y).max()))
            ymax = max(ymax, int(y.max()))
    M = N if N is not None else n_leaves * ymax
    return M + ymax_abs + 1


def _objective(xs: list[I64], ys: list[I64 | None], w: list[float]) -> float:
    """Σ_d w_d Σ (x − y)², exact: integer sums of squares, then Fractions of the float w."""
    total = Fraction(0)
    for x, y, wd in zip(xs, ys, w, strict=True):
        if y is None:
            continue
        diff = x - y
        m = int(np.abs(diff).max()) if diff.size else 0
        if m * m * max(diff.size, 1) < 2**62:
            sq = int(np.dot(diff, diff))
        else:
            sq = sum(int(v) * int(v) for v in diff.tolist())
        total += Fraction(wd) * sq
    return float(total)


# --------------------------------------------------------------------------------------
# public entry point


def _check_root(root_value: int | None, ys: list[I64 | None]) -> int | None:
    """The public root value N, checked (an integer in ``[0, 2^48]``, never with a root measurement)."""
    if root_value is not None:
        if isinstance(root_value, bool) or not isinstance(root_value, Integral):
            raise ParameterError(f"root_value must be an integer (the public total); got "
                                 f"{root_value!r}.")
        N: int | None = int(root_value)
        if root_value < 0:
            raise ParameterError(f"root_value must be non-negative; got {root_value}.")
        if root_value > _MAX_VALUE:
            raise ParameterError("root_value beyond 2^48 is not supported.")
        if ys[0] is not None:
            raise ParameterError(
                "Give either root_value (a public, exact root) or a root measurement noisy[0], "
                "not both: a fixed root's measurement would be silently ignored.")
    else:
        N = None
    return N


def _check_max_widenings(max_widenings: int) -> None:
    if isinstance(max_widenings, bool) or not isinstance(max_widenings, Integral) or max_widenings < 0:
        raise ParameterError(f"max_widenings must be a non-negative integer; got {max_widenings!r}.")


def solve_l2(
    parents: Sequence[np.ndarray],
    noisy: Sequence[np.ndarray | None],
    weights: Sequence[float],
    *,
    root_value: int | None = None,
    half_widths: Sequence[float] | None = None,
    max_widenings: int = 40,
) -> TreeDPResult:
    """Exact non-negative integer weighted least squares on a level tree (Fioretto et al. 2021, Sec. 6).

    Solves ``min Σ_d w_d Σ_{v ∈ level d} (x_v − y_v)²`` over measured levels subject to
    ``x_v = Σ_{u ∈ ch(v)} x_u``, ``x_v ∈ ℕ`` and, if given, ``x_root = root_value``, with
    the windowed tree DP of Fioretto et al. 2021, Sec. 7, Alg. 1 in an equivalent form (cost tables as sorted increments, windows
    ``[max(0, ⌊y − h⌋), max(⌈y + h⌉, ⌈h⌉)]``, a certificate that includes a free root, and
    WIDEN = double every h).  The result is the exact optimum; among several optima the
    stable tie-break (earlier child first) picks one deterministically, and a free root
    takes the leftmost minimiser of its table.

    Parameters
    ----------
    parents : sequence of L int arrays
        ``parents[d][i]`` is the index (in level d) of the parent of node i of level d+1.
        Level 0 is the single root.  Each ``parents[d]`` must be non-decreasing (children
        of a parent contiguous, parents in order) and hit every node of level d (all
        leaves at depth L).  Child order is the tie-break order.  For group-size
        histograms pass the reformulated hierarchy T′ (Fioretto et al. 2021, Sec. 6) (level 0 = dummy root ρ, level 1 = the k copy roots).
    noisy : sequence of L+1 int arrays or None
        The integer noisy measurements of each level, or None for an unmeasured level
        (no data term; pinned only by consistency, Fioretto et al. 2021, Sec. 5).  The leaf level must be
        measured.  If ``root_value`` is given, ``noisy[0]`` must be None (a measured root
        whose value is also fixed is ambiguous; the measurement would be ignored).
    weights : sequence of L+1 floats
        ``w_d > 0``, the weight of every node of level d (inverse noise variance ``1/Var``
        for a weighted objective; all equal for the paper's unweighted L2).  Ignored for
        unmeasured levels (may be 0 there).
    root_value : int, optional
        Public root value N (faithfulness); the root is free when None.
    half_widths : sequence of L+1 floats, optional
        Initial window half-widths per level.  Default ``max(5, ⌈6/√w_d⌉)``, i.e.
        ``max(5, ⌈6·sd_d⌉)`` when ``w_d = 1/Var_d`` is *unnormalised*; pass explicit
        half-widths if you normalise the weights.  Only speed depends on them: the answer
        is the same exact optimum for any positive h.
    max_widenings : int
        After this many doublings the windows jump to a size at which the certificate
        provably passes (all domains effectively [0, bound]), so the loop always ends.

    Returns
    -------
    TreeDPResult

    Raises
    ------
    ParameterError
        Malformed tree, lengths that do not match it, non-integer or huge noisy values,
        an unmeasured leaf level, a negative ``root_value``, a ``root_value`` together
        with a root measurement, non-positive weights or half-widths.

    Notes
    -----
    Time is O(Σ_v S_v log S_v) with S_v the children's total window width, except at the
    leaf level, merged in closed form in O(leaves · log + parents · window).  Measured on a
    synthetic 1/52/3,221/85,395 tract tree (2-core machine): ~0.2–0.4 s and ~260 MiB peak
    at λ = 40 per level (h = 340), ~0.05 s at λ = 4.
    """
    tree = _check_tree(parents)
    L = len(tree.sizes) - 1
    ys = _check_noisy(noisy, tree.sizes)
    w = _check_weights(weights, ys)
    N = _check_root(root_value, ys)
    if half_widths is None:
        h = list(default_half_widths(w))
    else:
        h = _check_half_widths(half_widths, L + 1)
    _check_max_widenings(max_widenings)

    if L == 0:  # a single measured node with a free root: clamp at 0
        y0 = ys[0]
        assert y0 is not None
        xs = [np.maximum(y0, 0)]
        return _result(xs, ys, w, 0, h)

    h_safe = _safe_half_width(ys, N, tree.sizes[-1])
    measured = [d for d in range(L + 1) if ys[d] is not None]
    widenings = 0
    while True:
        H = [math.ceil(v) for v in h]
        out = _attempt(tree, ys, _scaled_weights(w, ys, H), H, N)
        if out is not None and _certified(out[0], out[1], N is not None):
            return _result(out[0], ys, w, widenings, h)
        if all(H[d] >= h_safe for d in measured):
            # Unreachable by _safe_half_width's argument; never return an uncertified answer.
            raise AssertionError("tree DP: certificate failed with windows covering every "
                                 "optimum (bug)")
        widenings += 1
        if widenings > max_widenings:
            h = [max(v, float(h_safe)) for v in h]
        else:
            # double (WIDEN), but never far past the size that provably certifies
            h = [min(2.0 * v, max(v, float(h_safe))) for v in h]


def _result(xs: list[I64], ys: list[I64 | None], w: list[float], widenings: int,
            h: list[float]) -> TreeDPResult:
    vals = []
    for x in xs:
        arr = np.ascontiguousarray(x, dtype=np.int64)
        arr.setflags(write=False)
        vals.append(arr)
    return TreeDPResult(tuple(vals), _objective(xs, ys, w), widenings, tuple(float(v) for v in h))
