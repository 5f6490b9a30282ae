"""Privelet's wavelet coefficients rounded to their noise grids, computed exactly.

Xiao, Wang & Gehrke, "Differential Privacy via Wavelet Transforms", ICDE 2010, Sec. V (the
nominal wavelet) and Sec. III (the Haar wavelet).  :func:`dpcore.estimate.privelet.release`
adds exact discrete Laplace noise on a grid ``g_c = 2^k_c`` to every coefficient ``c`` and
pays ``(|Δc| + g_c)/t_c`` per changed coefficient: rounding may add one grid step.  That
holds for the *exact* coefficients.  The nominal transform divides by fan-outs, so float
coefficients carry errors that grow with the counts (at 2^45 people an error of 1/12 is
hundreds of steps of a grid 2^-11), and a neighbour could then move a grid value by far more
than the one step paid for.  This module computes ``round(c / g_c)`` without any float.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

__all__ = ["exact_grid_units"]


class IntegerTransform(Protocol):
    """One axis's transform run on integers: ``forward_int(z) = (M·forward(z), M)``."""

    def forward_int(self, z: np.ndarray) -> tuple[np.ndarray, int]: ...


def _scale(tf: IntegerTransform, size: int) -> int:
    return tf.forward_int(np.zeros((size, 1), dtype=np.int64))[1]


def exact_grid_units(x: np.ndarray, transforms: Sequence[IntegerTransform], classes: np.ndarray,
                     exponents: Sequence[int | None]) -> np.ndarray:
    """``round(c / 2^k_c)`` for every tensor-product wavelet coefficient ``c`` of ``x``, exactly.

    Every axis runs its transform on integers scaled by ``M_i`` (the lcm of the fan-outs for
    a nominal axis, ``2^l`` for Haar, 1 for the identity), so ``Z = (Π M_i)·c`` is an exact
    integer and ``round(Z / (M·2^k))`` an exact integer division (ties up; any fixed rule
    keeps ``|round(a/g) − round(b/g)| <= |a − b|/g + 1``, the step the accounting pays).
    Python integers replace int64 wherever a bound on ``|Z|·2^-k`` could overflow.

    Parameters
    ----------
    x : array of whole-number counts, one axis per transform.
    transforms : the per-axis transforms (``Axis._tf`` of :mod:`dpcore.estimate.privelet`).
    classes : class id of every coefficient (shape of the forward transform's output).
    exponents : grid exponent ``k`` of each class; None (weight +inf, always 0) gives 0.

    Returns
    -------
    numpy.ndarray of int64 (or of Python ints when int64 could overflow).

    Examples
    --------
    A sum and a difference scaled by 2 (Haar on two cells), on the grid 2^-1:

    >>> class Haar2:
    ...     def forward_int(self, z):
    ...         return np.concatenate([z[:1] + z[1:], z[:1] - z[1:]]), 2
    >>> exact_grid_units(np.array([3, 0]), [Haar2()], np.array([0, 0]), [-1]).tolist()
    [3, 3]
    """
    z = np.asarray(x)
    scales = [_scale(tf, n) for tf, n in zip(transforms, z.shape, strict=True)]
    M = math.prod(scales)
    total = int(np.abs(z).sum()) if z.size else 0
    finite = [k for k in exponents if k is not None]
    shift = max([0] + [-k for k in finite])
    # |Z| <= ||x||_1 · Π 2·M_i; the rounding doubles it once more
    big = total * math.prod(2 * m for m in scales) << (shift + 2) >= 2**62
    z = z.astype(object) if big else z.astype(np.int64)
    for i, tf in enumerate(transforms):
        moved = np.moveaxis(z, i, 0)
        rest = moved.shape[1:]
        y, _ = tf.forward_int(moved.reshape(moved.shape[0], -1))
        z = np.moveaxis(y.reshape((y.shape[0],) + rest), 0, i)
    out = np.zeros(z.shape, dtype=z.dtype)
    for j, k in enumerate(exponents):
        if k is None:
            continue
        sel = classes == j
        num = z[sel] * (1 << -k) if k < 0 else z[sel]
        den = M << k if k > 0 else M
        out[sel] = (2 * num + den) // (2 * den)
    return out
