r"""Per-node projections of TopDown releases of hierarchical counts (IntOpt, L∞ and L2).

A TopDown release (InfTDA for O/D data, the Census TopDown baseline for plain hierarchical
counts) fixes a parent's released count ``c`` and then, for the parent's ``b`` children,
replaces their noisy integer counts ``x`` by a vector ``y`` of non-negative integers that
sums to ``c`` and is as close as possible to ``x``.  This module solves that per-node problem
exactly, for one vector and for a whole tree level at once.

References
----------
* Boninsegna & Silvestri, *Differentially Private Release of Hierarchical
  Origin/Destination Data with a TopDown Approach* (PoPETs 2025), Sec. 4.2: the exact L∞ problem
  and the closed-form optimum α*; IntOpt (Algorithm 2 and App. C, Algorithm 4; here in a
  vectorised exact form with tie breaking and the c = 0 and b = 1 edge cases); zeros and sparsity.
* Fioretto et al., AIJ 2021, Sec. 10: the same TopDown baseline (scaled-simplex
  projection, then largest-remainder rounding).

The problems
------------
L∞ (InfTDA, paper Eq. 6)::

    P∞(x, c) = argmin_y ‖y − x‖_∞   s.t.  y ∈ ℕ₀^b,  Σ_i y_i = c

L2 (TDA_ℓ2, Census TopDown baseline), solved **in the integers**::

    P₂(x, c) = argmin_y ‖y − x‖_2   s.t.  y ∈ ℕ₀^b,  Σ_i y_i = c

Both have many optimal points; the functions here return one specific optimum chosen by an
explicit, documented ordering (see *Tie-breaking*), never by floating-point accident.

Closed forms used
-----------------
Let ``g(t) = Σ_i max(x_i − t, 0)`` (continuous, piecewise linear, non-increasing; for ``t``
real).  For each ``t`` the sums reachable by feasible ``y`` with ``‖y − x‖_∞ ≤ t`` form the
interval ``[g(t), Σ_i (x_i + t)]`` (needs ``t ≥ −x_i`` for all i), so (Sec. 4.2)::

    α* = the smallest integer t ≥ L := max(0, −min_i x_i, ⌈(c − Σx)/b⌉)  with  g(t) ≤ c.

Let ``T`` be the smallest integer with ``g(T) ≤ c`` (no lower bound).  Then ``α* = max(L, T)``.
With ``x`` sorted descending, ``P_k`` the sum of the ``k`` largest entries,
``h_k = P_k − k·x_(k) = g(x_(k))`` (non-decreasing in k, ``h_1 = 0 ≤ c``) and
``K = #{k : h_k ≤ c} = #{i : x_(i) ≥ t°}`` where ``t° = inf{t : g(t) ≤ c}``, the real root is
``t° = (P_K − c)/K`` (``g`` is linear, ``P_K − K·t``, on ``[x_(K+1), x_(K)]``), hence::

    T = ⌈(P_K − c) / K⌉,        α* = max(0, −min x, ⌈(c − Σx)/b⌉, T).

The single-vector :func:`linf_alpha` finds α* by bisection on the definition (an oracle
independent of this formula); the segment version uses the formula.

IntOpt, vectorised exact form (verified identical to Alg. 2)::

    S = c − Σx,  k = ⌈S/b⌉,  z⁰ = max(k, −x),  t₀ = ‖z⁰‖_∞,  t* = max(t₀, α*)
    s = z⁰ if t* = t₀ else max(−x, −(t* − 1))            (state after the full sweeps)
    f = max(−x, −t*)                                      (floor of the last sweep)
    walk the entries in the chosen order, lowering s_i towards f_i until Σs = S
    y = x + s

Why it equals Alg. 2: every *completed* sweep of Alg. 2 with norm bound ``t`` leaves
``z = max(−x, −t)`` (a sweep that stops part-way ends the loop), and the sweep with bound ``t``
completes iff ``Σ max(−x, −t) > S``, i.e. iff ``g(t) > c``.  The final sweep therefore runs
with the smallest ``t ≥ t₀`` having ``g(t) ≤ c``, which is ``max(t₀, T) = max(t₀, α*)`` because
``t₀ ≥ L`` (``t₀ ≥ |z⁰_i| ≥ z⁰_i ≥ max(k, −x_i)`` and ``t₀ ≥ 0``).

L2 exact integer minimiser (ours, for the L2 TopDown of Abowd et al. 2022): the real projection is ``max(x − τ, 0)`` with
``g(τ) = c`` (scaled-simplex projection).  For **integer** x, ``⌊x_i − τ⌋ = x_i − ⌈τ⌉``, so
with ``T = ⌈τ⌉`` (the same ``T`` as above, computed exactly with integers)::

    y = max(x − T, 0)  +  one extra unit for d of the eligible entries {i : x_i ≥ T},
    d = c − Σ max(x − T, 0) = c − g(T),   0 ≤ d < #{i : x_i ≥ T}.

Every positive entry of the real projection has the same fractional part ``T − τ``, so
"largest remainder" is purely a tie-break: the d units go to the eligible entries in
``tiebreak`` order.  Proof that every such choice is optimal (and that the result is the
exact integer minimiser, not an approximation): the objective is separable, and raising
``y_i`` from ``v`` to ``v + 1`` costs ``(v+1−x_i)² − (v−x_i)² = 2(v − x_i) + 1``, increasing in
``v``; so a feasible ``y`` is optimal iff it consists of ``c`` smallest unit costs, i.e. iff
every taken unit has *level* ``λ = v − x_i`` ≤ every untaken unit's level.  ``max(x − T, 0)``
takes exactly the units with level ``≤ −T − 1``; the units at level ``−T`` exist exactly for
the entries with ``x_i ≥ T`` (``v = x_i − T ≥ 0``); all other units have level ``≥ −T + 1``.
Because ``g(T) ≤ c < g(T − 1) = g(T) + #{x_i ≥ T}``, the ``d`` remaining units must be
level-``−T`` units, and *any* ``d`` of them give the same multiset of unit costs, hence the
same (minimal) objective.  For real-valued x (:func:`l2_round` only) the same argument with
levels ``−τ − frac(x_i − τ)`` shows that floor + largest remainder (ties by ``tiebreak``) is
exact; it is computed with :class:`fractions.Fraction`, so ties are exact too.

Tie-breaking
------------
* IntOpt walks the entries in the lexicographic order of ``(x_i, tiebreak_i, i)`` for
  ``order="ascending"`` (smallest noisy cells are lowered, hence zeroed, first: fewer false
  positives; the default and the paper's choice) or ``(−x_i, tiebreak_i, i)`` for
  ``order="descending"`` (largest first: fewer false negatives).
* L2 gives its ``d`` extra units to the eligible entries with the largest remainder (all equal
  for integer x), ties in the order of ``(tiebreak_i, i)``.
* ``tiebreak`` is an integer or float key array of the same length as x; lower key first.
  ``None`` means "by index" (stable).  In a release pass a random permutation drawn from the
  release RNG so that no area is systematically favoured by its index; nothing here draws
  random numbers.

Why hand-written
----------------
A generic solver per node (HiGHS ``milp`` 6–300 ms, CLARABEL/cvxpy 10–100 ms) costs hours at
10⁵–10⁶ sub-problems per tree level (Boninsegna & Silvestri 2025, Sec. 4.2), a generic MILP returns an
arbitrary optimal vertex (bad for false positives) and SciPy has no QP solver at all.
The closed forms here are exact, O(b log b), and the segment versions process a whole level
with one sort (no Python loop per node).  ``scipy.optimize.milp`` and exhaustive search are
used only as test oracles.

Errata and pitfalls handled
---------------------------
* Lemma 5's lower bound ``max(⌈|c − Σx|/b⌉, −min x)`` is not always tight (``x = (20, 0)``,
  ``c = 0``: bound 10, optimum 20); the exact α* above is used instead.
* Alg. 2 declares ``x ∈ ℤ^d`` and divides by ``d``: ``d = b``.  Alg. 4 (the authors' code)
  divides by zero when ``c = 0``; here ``c = 0`` returns zeros and ``b = 1`` returns ``(c)``.
* ``numpy.argsort`` is unstable by default; all orderings here are explicit lexsorts.
* The reference repo's L2 rounding (round, then fix the sum on the largest/smallest entries)
  is not always optimal; the rule here is exact.
* The paper's footnote ``|⌈a⌉| = ⌈|a|⌉ − 1`` (false for negative integers a) only affects a
  proof and is not relied on.

Arithmetic is exact int64.  Every intermediate quantity is bounded by
``4·(B·(M + 1) + C)`` where ``M = max|x|``, ``B`` the largest segment and ``C`` the largest
total, so inputs with ``B·(M + 1) + C > 2**60`` are refused with a ParameterError (e.g.
``|x| ≤ 10¹²`` with segments of up to 10⁶ entries is fine).  Level-wide cumulative sums are
taken modulo 2⁶⁴ (uint64) and differenced within a segment, which is exact whenever the
per-segment value fits in int64, whatever the length of the level.
"""

from __future__ import annotations

import numbers
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcore.errors import ParameterError

__all__ = [
    "check_true_counts",
    "intopt",
    "intopt_alg2",
    "intopt_segments",
    "l2_round",
    "l2_round_segments",
    "linf_alpha",
    "linf_alpha_segments",
]

_ORDERS = ("ascending", "descending")
_LIMIT = 2**60  # see the module docstring: every intermediate value stays below 2**62


# ----------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------


def _vector(x: ArrayLike, *, allow_real: bool = False) -> NDArray:
    """``x`` as a 1-D non-empty int64 array (or float64 if real values are allowed and present)."""
    try:
        a = np.asarray(x)
    except (OverflowError, ValueError, TypeError) as err:  # ragged input, huge Python ints
        raise ParameterError(f"x must be a 1-D array of whole numbers ({err}).") from None
    if a.ndim != 1:
        raise ParameterError(f"x must be a 1-D array of counts (got an array of shape {a.shape}).")
    if a.size == 0:
        raise ParameterError(
            "x is empty: a node must have at least one child. Drop childless nodes before projecting."
        )
    if a.dtype == np.bool_ or np.issubdtype(a.dtype, np.integer):
        if a.dtype == np.uint64 and int(a.max()) > np.iinfo(np.int64).max:
            raise ParameterError("x has values too large for int64 arithmetic (> 2**63 − 1).")
        return a.astype(np.int64)
    if np.issubdtype(a.dtype, np.floating):
        a = a.astype(np.float64)
        if not np.all(np.isfinite(a)):
            raise ParameterError("x must contain finite numbers only (found NaN or infinity).")
        if np.all(a == np.round(a)):
            if np.abs(a).max() >= 2.0**62:
                raise ParameterError("x has values too large for exact int64 arithmetic.")
            return a.astype(np.int64)
        if allow_real:
            return a
        raise ParameterError(
            "x must hold whole numbers (noisy integer counts); got non-integer values. "
            "Round the noisy counts first, or use l2_round for real-valued input."
        )
    raise ParameterError(f"x must be numeric (got dtype {a.dtype}).")


def _total(c: object) -> int:
    """The parent's released value ``c`` as a Python int ≥ 0."""
    if isinstance(c, bool | np.bool_):
        raise ParameterError(f"The total c must be a whole number ≥ 0 (got {c!r}).")
    if isinstance(c, numbers.Integral):
        c = int(c)
    elif isinstance(c, numbers.Real) and float(c).is_integer():
        c = int(c)
    else:
        raise ParameterError(f"The total c must be a whole number ≥ 0 (got {c!r}).")
    if c < 0:
        raise ParameterError(
            f"The total c must be ≥ 0 (got {c}). Clamp a noisy root to max(n, 0) first."
        )
    return c


def _order(order: str) -> str:
    if order not in _ORDERS:
        raise ParameterError(f"order must be 'ascending' or 'descending' (got {order!r}).")
    return order


def _tiebreak(tiebreak: ArrayLike | None, n: int) -> NDArray | None:
    if tiebreak is None:
        return None
    t = np.asarray(tiebreak)
    if t.ndim != 1 or t.size != n:
        raise ParameterError(
            f"tiebreak must be a 1-D key array with one entry per element of x "
            f"(got shape {t.shape}, expected ({n},))."
        )
    if not (t.dtype == np.bool_ or np.issubdtype(t.dtype, np.integer)
            or np.issubdtype(t.dtype, np.floating)):
        raise ParameterError(f"tiebreak must hold integer or float keys (got dtype {t.dtype}).")
    if np.issubdtype(t.dtype, np.floating) and not np.all(np.isfinite(t)):
        raise ParameterError("tiebreak keys must be finite (found NaN or infinity).")
    return t


def _guard(max_abs_x: int, max_b: int, max_c: int) -> None:
    if max_b * (max_abs_x + 1) + max_c > _LIMIT:
        raise ParameterError(
            "Values too large for exact int64 arithmetic: need (largest node size) × "
            f"(max |x| + 1) + (largest total) ≤ 2**60 (got b = {max_b}, max |x| = {max_abs_x}, "
            f"c = {max_c})."
        )


def check_true_counts(max_count: int, max_fanout: int) -> None:
    """Refuse, before a budget is charged, true counts too large for the exact projections.

    The projections refuse a level whose noisy values ``x`` and parent totals ``c`` break
    ``b·(max |x| + 1) + max c ≤ 2^60`` (``b`` the largest number of children of one node).  Those
    are noisy, so the refusal itself cannot come before the noise; this check refuses the true
    counts (every count at most ``max_count``) unless they use at most *half* that range,
    ``b·(max_count + 1) + max_count ≤ 2^59``.  A refusal after the charge then needs noise of
    about ``2^59 / (b + 1)`` or more on one count (beyond 2^32 for a billion children), which
    no calibrated scale draws in practice.  The check publishes nothing and only the curator, who
    holds the counts, sees a refusal: it says the counts are beyond about ``2^59 / b``.

    >>> check_true_counts(10**6, 50)
    >>> check_true_counts(2**55, 50)
    Traceback (most recent call last):
    ...
    dpcore.errors.ParameterError: The counts (up to 36,028,797,018,963,968) are too large for exact integer \
projection with up to 50 children per area (at most 11,303,152,005,949,479); split the data into smaller releases.
    """
    b, m = int(max_fanout), max(int(max_count), 0)
    if b * (m + 1) + m > _LIMIT // 2:
        raise ParameterError(
            f"The counts (up to {m:,}) are too large for exact integer projection with up to {b:,} "
            f"children per area (at most {(_LIMIT // 2 - b) // (b + 1):,}); split the data into smaller releases."
        )


def _max_abs(x: NDArray[np.int64]) -> int:
    return max(int(x.max()), -int(x.min()))


def _segments(
    x: ArrayLike, offsets: ArrayLike, totals: ArrayLike
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Validated ``x``, ``starts``, ``totals`` and the segment id of every element."""
    xv = _vector(x)
    n = xv.size
    off = np.asarray(offsets)
    if off.ndim != 1 or off.size < 2 or not (np.issubdtype(off.dtype, np.integer)):
        raise ParameterError(
            "offsets must be a 1-D integer array of length m + 1 ≥ 2 (CSR style: segment i is "
            f"x[offsets[i]:offsets[i+1]]); got dtype {off.dtype}, shape {off.shape}."
        )
    off = off.astype(np.int64)
    if off[0] != 0 or off[-1] != n:
        raise ParameterError(
            f"offsets must start at 0 and end at len(x) = {n} (got {int(off[0])} … {int(off[-1])})."
        )
    lengths = np.diff(off)
    if np.any(lengths <= 0):
        bad = int(np.flatnonzero(lengths <= 0)[0])
        raise ParameterError(
            "offsets must be strictly increasing: every segment (node) needs at least one "
            f"child (segment {bad} has {int(lengths[bad])} elements)."
        )
    m = lengths.size
    tot = np.asarray(totals)
    if tot.ndim != 1 or tot.size != m:
        raise ParameterError(
            f"totals must be a 1-D array with one entry per segment ({m}); got shape {tot.shape}."
        )
    if np.issubdtype(tot.dtype, np.floating):
        if not np.all(np.isfinite(tot)) or not np.all(tot == np.round(tot)):
            raise ParameterError("totals must be whole numbers.")
        if np.abs(tot).max() >= 2.0**62:
            raise ParameterError("totals too large for exact int64 arithmetic.")
    elif not np.issubdtype(tot.dtype, np.integer) or tot.dtype == np.uint64 and (
        int(tot.max()) > np.iinfo(np.int64).max
    ):
        raise ParameterError(f"totals must be whole numbers (got dtype {tot.dtype}).")
    tot = tot.astype(np.int64)
    if np.any(tot < 0):
        bad = int(np.flatnonzero(tot < 0)[0])
        raise ParameterError(
            f"totals must be ≥ 0 (segment {bad} has total {int(tot[bad])}). "
            "Clamp a noisy root to max(n, 0) first."
        )
    _guard(_max_abs(xv), int(lengths.max()), int(tot.max()))
    seg = np.repeat(np.arange(m, dtype=np.int64), lengths)
    return xv, off[:-1], tot, seg


# ----------------------------------------------------------------------------------------
# single-vector reference functions
# ----------------------------------------------------------------------------------------


def _g(x: NDArray[np.int64], t: int) -> int:
    """``g(t) = Σ_i max(x_i − t, 0)`` (exact)."""
    return int(np.maximum(x - t, 0).sum())


def _smallest_t(x: NDArray[np.int64], c: int, lo: int) -> int:
    """Smallest integer ``t ≥ lo`` with ``g(t) ≤ c``, by bisection (g is non-increasing)."""
    if _g(x, lo) <= c:
        return lo
    hi = max(lo, int(x.max()))  # g(max x) = 0 ≤ c
    while hi - lo > 1:  # invariant: g(lo) > c ≥ g(hi)
        mid = (lo + hi) // 2
        if _g(x, mid) <= c:
            hi = mid
        else:
            lo = mid
    return hi


def _walk(x: NDArray[np.int64], order: str, tiebreak: NDArray | None) -> NDArray[np.int64]:
    """Indices in IntOpt's walk order: lexicographic ``(±x_i, tiebreak_i, i)``."""
    key = x if order == "ascending" else -x
    keys = (key,) if tiebreak is None else (tiebreak, key)
    return np.lexsort(keys)


def linf_alpha(x: ArrayLike, c: int) -> int:
    r"""Exact optimal value α* of the integer L∞ projection (Boninsegna & Silvestri 2025, Sec. 4.2).

    .. math::

        α^* = \min_{y ∈ ℕ_0^b,\ Σ y = c} \|y − x\|_∞
            = \min\{t ∈ ℤ : t ≥ \max(0, −\min_i x_i, ⌈(c − Σ_i x_i)/b⌉),\
              Σ_i \max(x_i − t, 0) ≤ c\}

    Both conditions are monotone in ``t``; this reference version bisects on the second.

    Parameters
    ----------
    x : array of int, shape (b,)
        Noisy integer counts (may be negative), b ≥ 1.
    c : int
        The parent's released value, ≥ 0.

    Returns
    -------
    int
        α*.

    Raises
    ------
    ParameterError
        Empty or non-integer ``x``, negative ``c``, or values beyond exact int64 range.
    """
    xv = _vector(x)
    c = _total(c)
    b = xv.size
    _guard(_max_abs(xv), b, c)
    s = c - int(xv.sum())
    lower = max(0, -int(xv.min()), -(-s // b))
    return _smallest_t(xv, c, lower)


def intopt(
    x: ArrayLike, c: int, *, order: str = "ascending", tiebreak: ArrayLike | None = None
) -> NDArray[np.int64]:
    r"""IntOpt: an exact integer L∞ projection, in the vectorised exact form (Boninsegna & Silvestri 2025, Sec. 4.2, Alg. 2 and App. C).

    Returns ``y ∈ ℕ₀^b`` with ``Σ y = c`` and ``‖y − x‖_∞ = α*`` (:func:`linf_alpha`), and
    the *same vector* as the paper's Algorithm 2 (:func:`intopt_alg2`) given the same order::

        S = c − Σx,  k = ⌈S/b⌉,  z⁰ = max(k, −x),  t₀ = ‖z⁰‖_∞,  t* = max(t₀, α*)
        s = z⁰ if t* = t₀ else max(−x, −(t* − 1)),     f = max(−x, −t*)
        lower s_i towards f_i in walk order until Σs = S;   y = x + s

    Parameters
    ----------
    x : array of int, shape (b,)
        Noisy integer counts (may be negative), b ≥ 1.
    c : int
        The parent's released value, ≥ 0.
    order : {"ascending", "descending"}
        Walk order. ``"ascending"`` lowers (and so zeroes) the smallest noisy cells first:
        fewer false positives (default, the paper's choice).  ``"descending"`` lowers the
        largest first: fewer false negatives.
    tiebreak : array of int or float, shape (b,), optional
        Key for equal ``x``: lower key first; remaining ties (and ``None``) by index.  The
        walk order is the lexicographic order of ``(x_i, tiebreak_i, i)`` (ascending) or
        ``(−x_i, tiebreak_i, i)`` (descending).

    Returns
    -------
    numpy.ndarray of int64, shape (b,)
        ``y``; ``c = 0`` gives zeros and ``b = 1`` gives ``(c,)``.
    """
    xv = _vector(x)
    c = _total(c)
    order = _order(order)
    tb = _tiebreak(tiebreak, xv.size)
    b = xv.size
    _guard(_max_abs(xv), b, c)
    if c == 0:
        return np.zeros(b, dtype=np.int64)
    if b == 1:
        return np.array([c], dtype=np.int64)
    s_req = c - int(xv.sum())  # S, the required Σz
    k = -(-s_req // b)  # ⌈S/b⌉
    z0 = np.maximum(k, -xv)
    t0 = int(np.abs(z0).max())
    t_star = max(t0, linf_alpha(xv, c))
    s = z0 if t_star == t0 else np.maximum(-xv, -(t_star - 1))
    f = np.maximum(-xv, -t_star)
    excess = int(s.sum()) - s_req  # ≥ 0, and ≤ Σ(s − f) because g(t*) ≤ c
    walk = _walk(xv, order, tb)
    room = (s - f)[walk]
    before = np.cumsum(room) - room  # room of the entries earlier in the walk
    lower = np.clip(excess - before, 0, room)
    z = s.copy()
    z[walk] -= lower
    return xv + z


def intopt_alg2(
    x: ArrayLike, c: int, *, order: str = "ascending", tiebreak: ArrayLike | None = None
) -> NDArray[np.int64]:
    """The paper's Algorithm 2, literally (a test oracle; Boninsegna & Silvestri 2025, Sec. 4.2, Alg. 2 and App. C).

    ::

        1  S ← c − Σx
        2  z_i ← max(⌈S/b⌉, −x_i)
        3  t ← ‖z‖_∞
        4  I ← indices in walk order          (sorted by x; ties as in :func:`intopt`)
        5  j ← 0
        6  while Σz > S:
        7      Δ ← Σz − S
        8      z_I[j] ← max(z_I[j] − Δ, −x_I[j], −t)
        9      j ← (j + 1) mod b
        10     if j = 0: t ← t + 1
        11 return x + z

    Runs in Python integers (no overflow), in O(b · (α* − t₀ + 1)) steps: use it only on
    small values.  No short-cut for ``c = 0`` or ``b = 1`` (the loop handles both).
    Parameters and result as in :func:`intopt`.
    """
    xv = _vector(x)
    c = _total(c)
    order = _order(order)
    tb = _tiebreak(tiebreak, xv.size)
    b = xv.size
    xs = [int(v) for v in xv]
    s_req = c - sum(xs)
    k = -(-s_req // b)
    z = [max(k, -v) for v in xs]
    t = max(abs(v) for v in z)
    walk = [int(i) for i in _walk(xv, order, tb)]
    total = sum(z)
    j = 0
    while total > s_req:
        delta = total - s_req
        i = walk[j]
        new = max(z[i] - delta, -xs[i], -t)
        total += new - z[i]
        z[i] = new
        j = (j + 1) % b
        if j == 0:
            t += 1
    return np.array([v + zi for v, zi in zip(xs, z, strict=True)], dtype=np.int64)


def l2_round(x: ArrayLike, c: int, *, tiebreak: ArrayLike | None = None) -> NDArray[np.int64]:
    r"""Exact integer least-squares projection (the L2 TopDown of Abowd et al., HDSR 2022; Fioretto et al. 2021, Sec. 10).

    .. math:: y = \arg\min_{y ∈ ℕ_0^b,\ Σ y = c} \|y − x\|_2

    computed as the scaled-simplex projection ``max(x − τ, 0)`` (``Σ = c``), floored, plus
    one unit for the ``d = c − Σ⌊·⌋`` entries with the largest fractional part among the
    positive projected entries, ties by ``(tiebreak_i, i)``.  For integer ``x`` this is
    ``max(x − T, 0)`` plus one unit for the first ``d`` entries with ``x_i ≥ T`` in
    ``(tiebreak_i, i)`` order, where ``T = ⌈τ⌉`` is the smallest integer with
    ``Σ max(x_i − T, 0) ≤ c`` (all integer arithmetic).  The module docstring proves that
    this is an exact minimiser and that every tie choice is optimal.

    Parameters
    ----------
    x : array of int or float, shape (b,)
        Noisy counts, b ≥ 1.  Whole numbers use integer arithmetic; other real values use
        exact rational arithmetic (:class:`fractions.Fraction`, slower).
    c : int
        The parent's released value, ≥ 0.
    tiebreak : array of int or float, shape (b,), optional
        Lower key first; remaining ties (and ``None``) by index.

    Returns
    -------
    numpy.ndarray of int64, shape (b,)
    """
    xv = _vector(x, allow_real=True)
    c = _total(c)
    b = xv.size
    tb = _tiebreak(tiebreak, b)
    if xv.dtype != np.int64:
        if np.abs(xv).max() >= 2.0**62 or c > _LIMIT:
            raise ParameterError("Values too large for exact int64 results (|x|, c ≥ 2**60).")
        return _l2_round_real(xv, c, tb)
    _guard(_max_abs(xv), b, c)
    if c == 0:
        return np.zeros(b, dtype=np.int64)
    # g(lo) = Σ(x − min x) + b(⌈c/b⌉ + 1) > c, so lo is infeasible; search up from it.
    lo = int(xv.min()) - (-(-c // b)) - 1
    t = _smallest_t(xv, c, lo)
    y = np.maximum(xv - t, 0)
    d = c - int(y.sum())  # 0 ≤ d < #{x_i ≥ T}
    eligible = np.flatnonzero(xv >= t)
    if d:
        if tb is not None:
            eligible = eligible[np.argsort(tb[eligible], kind="stable")]
        y[eligible[:d]] += 1
    return y


def _l2_round_real(x: NDArray[np.float64], c: int, tb: NDArray | None) -> NDArray[np.int64]:
    """:func:`l2_round` for non-integer real x, exactly, with rational arithmetic."""
    b = x.size
    if c == 0:
        return np.zeros(b, dtype=np.int64)
    xs = [Fraction(float(v)) for v in x]
    desc = sorted(xs, reverse=True)
    # simplex projection: ρ = max{j : x_(j) − (P_j − c)/j > 0}, τ = (P_ρ − c)/ρ
    prefix = Fraction(0)
    tau = None
    for j, v in enumerate(desc, start=1):
        prefix += v
        cand = (prefix - c) / j
        if v > cand:
            tau = cand
    assert tau is not None  # j = 1 always passes when c > 0
    proj = [max(v - tau, Fraction(0)) for v in xs]
    floors = [p.numerator // p.denominator for p in proj]
    d = c - sum(floors)
    frac = [p - f for p, f in zip(proj, floors, strict=True)]
    positive = [i for i in range(b) if proj[i] > 0]
    key = (lambda i: (-frac[i], i)) if tb is None else (lambda i: (-frac[i], tb[i], i))
    y = np.array(floors, dtype=np.int64)
    for i in sorted(positive, key=key)[:d]:
        y[i] += 1
    return y


# ----------------------------------------------------------------------------------------
# segment-vectorised versions (a whole tree level at once)
# ----------------------------------------------------------------------------------------


def _seg_cumsum(
    v: NDArray[np.int64], starts: NDArray[np.int64], seg: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Inclusive cumulative sums restarting at every segment start.

    The level-wide running sum is taken modulo 2**64 (uint64, well defined on wrap-around);
    differences within a segment are exact whenever the true value fits in int64.
    """
    u = np.ascontiguousarray(v).view(np.uint64)
    cs = np.cumsum(u, dtype=np.uint64)
    base = cs[starts] - u[starts]
    return (cs - base[seg]).view(np.int64)


def _desc_threshold(
    xs: NDArray[np.int64], starts: NDArray[np.int64], seg: NDArray[np.int64],
    totals: NDArray[np.int64],
) -> NDArray[np.int64]:
    """Per segment, the smallest integer ``T`` with ``Σ max(x_i − T, 0) ≤ c``.

    ``xs`` holds every segment's values sorted descending.  ``T = ⌈(P_K − c)/K⌉`` with
    ``P_k`` the sum of the k largest values and ``K = #{k : P_k − k·x_(k) ≤ c}``.
    """
    prefix = _seg_cumsum(xs, starts, seg)
    rank = np.arange(xs.size, dtype=np.int64) - starts[seg] + 1  # k
    h = prefix - rank * xs  # g(x_(k)), non-decreasing within a segment, h_1 = 0
    big_k = np.add.reduceat((h <= totals[seg]).astype(np.int64), starts)
    p_k = prefix[starts + big_k - 1]
    return -((totals - p_k) // big_k)  # ⌈(P_K − c)/K⌉


def _alpha_from_threshold(
    x: NDArray[np.int64], starts: NDArray[np.int64], lengths: NDArray[np.int64],
    totals: NDArray[np.int64], threshold: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(α*, S)`` per segment: ``α* = max(0, −min x, ⌈S/b⌉, T)`` with ``S = c − Σx``."""
    s_req = totals - np.add.reduceat(x, starts)
    k = -(-s_req // lengths)
    alpha = np.maximum(np.maximum(0, -np.minimum.reduceat(x, starts)), np.maximum(k, threshold))
    return alpha, s_req


def linf_alpha_segments(x: ArrayLike, offsets: ArrayLike, totals: ArrayLike) -> NDArray[np.int64]:
    r"""α* (:func:`linf_alpha`) of many independent problems at once.

    Uses the closed form ``α* = max(0, −min x, ⌈(c − Σx)/b⌉, ⌈(P_K − c)/K⌉)`` (module
    docstring) with one lexsort of the whole level.

    Parameters
    ----------
    x : array of int, shape (n,)
        All segments' noisy counts, concatenated.
    offsets : array of int, shape (m + 1,)
        CSR offsets: segment i is ``x[offsets[i]:offsets[i+1]]``; ``offsets[0] = 0``,
        ``offsets[-1] = n``, strictly increasing (every segment non-empty).
    totals : array of int, shape (m,)
        Every segment's total ``c_i ≥ 0``.

    Returns
    -------
    numpy.ndarray of int64, shape (m,)
    """
    xv, starts, tot, seg = _segments(x, offsets, totals)
    lengths = np.diff(np.append(starts, xv.size))
    xs = xv[np.lexsort((-xv, seg))]
    threshold = _desc_threshold(xs, starts, seg, tot)
    return _alpha_from_threshold(xv, starts, lengths, tot, threshold)[0]


def intopt_segments(
    x: ArrayLike, offsets: ArrayLike, totals: ArrayLike, *, order: str = "ascending",
    tiebreak: ArrayLike | None = None,
) -> NDArray[np.int64]:
    """:func:`intopt` on every segment at once (a whole tree level).

    Identical, segment by segment, to ``intopt(x[a:b], c_i, order=order,
    tiebreak=tiebreak[a:b])``.  One lexsort of the level by ``(segment, ±x, tiebreak)``;
    per-segment sums, maxima and cumulative sums by ``reduceat`` / global cumsum minus the
    segment start; no Python loop over segments.

    Parameters
    ----------
    x, offsets, totals
        As in :func:`linf_alpha_segments`.
    order : {"ascending", "descending"}
        As in :func:`intopt`.
    tiebreak : array of int or float, shape (n,), optional
        As in :func:`intopt` (keys compared within a segment only).

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
        ``y``: ≥ 0, every segment sums to its total and has ``max |y − x| = α*``.
    """
    xv, starts, tot, seg = _segments(x, offsets, totals)
    order = _order(order)
    tb = _tiebreak(tiebreak, xv.size)
    n = xv.size
    lengths = np.diff(np.append(starts, n))
    key = xv if order == "ascending" else -xv
    walk = np.lexsort((key, seg) if tb is None else (tb, key, seg))
    if order == "descending":
        desc = walk
    else:  # reverse the walk within every segment: position p ↦ start + end − 1 − p
        ends = starts + lengths
        desc = walk[(starts + ends - 1)[seg] - np.arange(n, dtype=np.int64)]
    threshold = _desc_threshold(xv[desc], starts, seg, tot)
    alpha, s_req = _alpha_from_threshold(xv, starts, lengths, tot, threshold)

    k = -(-s_req // lengths)
    z0 = np.maximum(k[seg], -xv)
    t0 = np.maximum.reduceat(np.abs(z0), starts)
    t_star = np.maximum(t0, alpha)
    s = np.where((t_star == t0)[seg], z0, np.maximum(-xv, -(t_star - 1)[seg]))
    f = np.maximum(-xv, -t_star[seg])
    excess = np.add.reduceat(s, starts) - s_req
    room = (s - f)[walk]
    before = _seg_cumsum(room, starts, seg) - room
    lower = np.clip(excess[seg] - before, 0, room)
    y = np.empty(n, dtype=np.int64)
    y[walk] = (xv + s)[walk] - lower
    # c = 0 → zeros and b = 1 → (c) fall out of the general form (the optimum is unique).
    return y


def l2_round_segments(
    x: ArrayLike, offsets: ArrayLike, totals: ArrayLike, *, tiebreak: ArrayLike | None = None
) -> NDArray[np.int64]:
    """:func:`l2_round` on every segment at once (integer x only).

    Per segment ``y = max(x − T, 0)`` plus one unit for the first ``d = c − Σ max(x − T, 0)``
    entries with ``x_i ≥ T`` in ``(tiebreak_i, i)`` order, ``T = ⌈(P_K − c)/K⌉`` as in
    :func:`linf_alpha_segments`.  Identical, segment by segment, to :func:`l2_round`.

    Parameters
    ----------
    x, offsets, totals
        As in :func:`linf_alpha_segments` (x must hold whole numbers).
    tiebreak : array of int or float, shape (n,), optional
        Lower key first within a segment; remaining ties (and ``None``) by index.

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
    """
    xv, starts, tot, seg = _segments(x, offsets, totals)
    tb = _tiebreak(tiebreak, xv.size)
    threshold = _desc_threshold(xv[np.lexsort((-xv, seg))], starts, seg, tot)
    t_el = threshold[seg]
    y = np.maximum(xv - t_el, 0)
    d = tot - np.add.reduceat(y, starts)
    if not d.any():
        return y
    eligible = (xv >= t_el).astype(np.int64)
    if tb is None:
        rank = _seg_cumsum(eligible, starts, seg)  # 1-based rank among eligible, index order
        y += (eligible == 1) & (rank <= d[seg])
    else:
        by_key = np.lexsort((tb, seg))
        e_sorted = eligible[by_key]
        rank = _seg_cumsum(e_sorted, starts, seg)
        y[by_key] += (e_sorted == 1) & (rank <= d[seg])
    return y
