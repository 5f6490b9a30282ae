"""The strategy answers ``A x`` rounded to the noise grid, exactly (issue 18, item 3c).

The matrix mechanism (Li, Hay, Miklau, Rastogi & McGregor 2015, §3) adds noise to ``A x`` rounded to
the grid ``2^k`` and calibrates to ``Δ + sqrt(s)·2^k``: one grid step of rounding per changed
answer.  That is only true when the value rounded is ``A x`` itself.  In floating point the
computed ``fl(A x)`` differs from ``A x`` by up to ``γ·(|A| |x|)_i`` (Higham 2002, §3.5:
``|fl(A x) − A x| ≤ γ_n |A| |x|`` with ``γ_n = n u / (1 − n u)``), which at very large counts is
many grid steps, and a neighbour's error differs from the data's: the released value would then
move by more than the calibration pays for.

:func:`grid_units` returns ``round(A x / 2^k)`` of the *exact* product.  It computes ``fl(A x)``
and the error bound; a row whose interval ``fl(A x)_i ± bound`` holds no rounding boundary is
rounded from the float (the same integer as the exact value); every other row is computed exactly
in integers (the floats of ``A`` and ``x`` are dyadic rationals).  The result is a function of
``A x`` alone, so the calibration's one-step margin holds.  Only the running time depends on the
data (more exact rows for larger counts), a side channel SECURITY.md already names.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpcore.errors import ParameterError

__all__ = ["check_units", "grid_units"]

_U = 2.0**-53  # unit roundoff of float64
_MAX_UNITS = 2**62  # grid units and the noise added to them stay within int64


def _gamma(n: int) -> float:
    nu = n * _U
    return nu / (1.0 - nu)


def _factors(strategy) -> list[np.ndarray]:
    return [f.A for f in strategy.factors] if strategy.factors else [strategy.A]


def _apply(mats: list[np.ndarray], x: np.ndarray) -> np.ndarray:
    """``(⊗ mats) x`` one axis at a time (as :meth:`Strategy.apply`)."""
    T = x.reshape(tuple(m.shape[1] for m in mats))
    for ax, m in enumerate(mats):
        T = np.moveaxis(np.tensordot(m, T, axes=([1], [ax])), 0, ax)
    return T.reshape(-1)


def _scaled_ints(a: np.ndarray) -> tuple[np.ndarray, int]:
    """``a = M / 2^e`` exactly, ``M`` Python integers (object array)."""
    flat = a.reshape(-1)
    ratios = [float(v).as_integer_ratio() for v in flat]
    e = max((d.bit_length() - 1 for _, d in ratios), default=0)
    M = np.array([n * (1 << (e - (d.bit_length() - 1))) for n, d in ratios], dtype=object)
    return M.reshape(a.shape), e


#: Most strategy entries whose exact integers (:func:`_strategy_ints`) a strategy keeps.  They are
#: Python ints (~30-50 B each with the object array's pointer), pinned for as long as the strategy is
#: cached process-wide: 2^16 entries is at most a few MB.  A cap on size, not on kind: a Kronecker
#: factor over one long axis is itself millions of entries, while a small explicit matrix is cheap.
_KEEP_INTS = 1 << 16


def _strategy_ints(strategy, mats: list[np.ndarray]) -> list[tuple[np.ndarray, int]]:
    """The strategy's matrices as exact scaled integers (:func:`_scaled_ints`): public, so kept by
    the strategy (:meth:`~dpcore.estimate.matrix_strategy.Strategy.derived`) when small, not made
    again for every release of its plan."""
    def make() -> list[tuple[np.ndarray, int]]:
        return [_scaled_ints(m) for m in mats]

    if sum(m.size for m in mats) > _KEEP_INTS:
        return make()
    return strategy.derived("exact_ints", make)


def _exact_rows(mats: list[np.ndarray], x: np.ndarray, rows: np.ndarray, k: int,
                ints: list[tuple[np.ndarray, int]]) -> np.ndarray:
    """``round(A x / 2^k)`` (ties to even) for the given rows, in exact integer arithmetic
    (``ints``: the matrices' :func:`_scaled_ints`, :func:`_strategy_ints`)."""
    Mx, ex = _scaled_ints(x)
    shape_out = tuple(m.shape[0] for m in mats)
    T0 = Mx.reshape(tuple(m.shape[1] for m in mats))
    out = np.empty(len(rows), dtype=np.int64)
    if len(rows) * T0.size > 4 * sum(m.shape[0] * T0.size for m in mats):
        # many rows: the whole product at once (one exact tensor contraction per axis)
        T = T0
        for ax, (M, _) in enumerate(ints):
            T = np.moveaxis(np.tensordot(M, T, axes=([1], [ax])), 0, ax)
        vals = T.reshape(-1)[rows]
    else:
        idx = np.unravel_index(rows, shape_out)
        vals = []
        for r in range(len(rows)):
            T = T0
            for ax in range(len(mats) - 1, -1, -1):
                T = np.tensordot(T, ints[ax][0][idx[ax][r]], axes=([ax], [0]))
            vals.append(T if not isinstance(T, np.ndarray) else T.item())
    scale = ex + sum(e for _, e in ints)
    for i, v in enumerate(vals):
        q = round(Fraction(int(v), 1 << scale) / Fraction(2) ** k)  # ties to even
        if abs(q) >= _MAX_UNITS:
            raise ParameterError(
                f"The strategy answers are too large for the noise grid 2^{k} (more than 62 bits); "
                "the counts are too large for this mechanism at this size.")
        out[i] = q
    return out


def check_units(strategy, x: np.ndarray, k: int) -> None:
    """Refuse, before anything is charged, data whose grid units :func:`grid_units` could refuse.

    :func:`grid_units` refuses a row whose ``|round(A x / 2^k)|`` reaches 2^62 (the units and the
    noise added to them must stay within int64).  That depends on the true counts only, so it is
    decided here from the bound ``|A x| ≤ |A| |x|`` (computed in floating point and inflated by
    its own error, Higham 2002, §3.5): when this check passes, every ``|A x| / 2^k`` is below
    ``2^62 − 1`` and :func:`grid_units` never refuses.  It refuses a slightly larger set than
    :func:`grid_units` would (rows whose bound, not value, reaches the limit): counts of about
    ``2^62 · 2^k`` over the strategy's column sums, far outside any count table.

    Raises
    ------
    ParameterError
        The strategy answers may be too large for the noise grid.

    Examples
    --------
    >>> from dpcore.estimate.matrix_strategy import Strategy
    >>> s = Strategy("matrix", 2, A=np.array([[1.0, 1.0]]))
    >>> check_units(s, np.array([3.0, 4.0]), 0)
    >>> check_units(s, np.array([2.0**61, 2.0**61]), 0)
    Traceback (most recent call last):
    ...
    dpcore.errors.ParameterError: The strategy answers are too large for the noise grid 2^0 (more than 62 bits); \
the counts are too large for this mechanism at this size.
    """
    mats = [np.abs(np.asarray(m, dtype=np.float64)) for m in _factors(strategy)]
    xv = np.abs(np.asarray(x, dtype=np.float64).reshape(-1))
    with np.errstate(over="ignore", invalid="ignore"):
        bound = _apply(mats, xv)
        g = math.prod(1.0 + _gamma(m.shape[1] + 1) for m in mats) - 1.0
        top = float(np.max(bound, initial=0.0)) * (1.0 + 4.0 * g)
    if not math.isfinite(top) or math.ldexp(top, -k) + 1.0 >= float(_MAX_UNITS):
        raise ParameterError(
            f"The strategy answers are too large for the noise grid 2^{k} (more than 62 bits); "
            "the counts are too large for this mechanism at this size.")


def grid_units(strategy, x: np.ndarray, k: int) -> np.ndarray:
    """``round(A x / 2^k)`` for the exact product ``A x`` (int64; ties to even).

    Parameters
    ----------
    strategy : Strategy
        Explicit (``A``) or Kronecker (``factors``) strategy of the matrix mechanism
        (Li et al. 2015, §3).
    x : ndarray of float
        The data vector (finite).
    k : int
        The grid exponent; ``k = 0`` rounds to whole numbers (integer strategies, exact noise).

    Returns
    -------
    ndarray of int64
        The grid units (below 2^62 in absolute value).

    Examples
    --------
    >>> from dpcore.estimate.matrix_strategy import Strategy
    >>> s = Strategy("matrix", 3, A=np.array([[1.0, 1.0, -1.0]]))
    >>> x = np.array([2.0**53, 1.0, 2.0**53])
    >>> (s.A @ x).tolist(), grid_units(s, x, 0).tolist()   # fl(A x) loses the 1
    ([0.0], [1])
    """
    mats = [np.asarray(m, dtype=np.float64) for m in _factors(strategy)]
    xv = np.asarray(x, dtype=np.float64).reshape(-1)
    fx = _apply(mats, xv)
    bound = _apply([np.abs(m) for m in mats], np.abs(xv))
    g = math.prod(1.0 + _gamma(m.shape[1] + 1) for m in mats) - 1.0  # errors compound per axis
    # the bound itself is computed in floating point: twice it, plus a floor for tiny values
    err = np.ldexp(2.0 * g * bound, -k) + 2.0**-40
    v = np.ldexp(fx, -k)
    units = np.rint(v)
    dist = np.abs(np.abs(v - np.floor(v)) - 0.5)  # distance to the nearest half-integer
    unsure = (dist <= err) | (np.abs(v) >= 2.0**50) | ~np.isfinite(v)
    out = units.astype(np.int64, copy=True) if not unsure.any() else np.zeros(v.size, dtype=np.int64)
    if unsure.any():
        sure = ~unsure
        out[sure] = units[sure].astype(np.int64)
        rows = np.flatnonzero(unsure)
        out[rows] = _exact_rows(mats, xv, rows, k, _strategy_ints(strategy, mats))
    return out
