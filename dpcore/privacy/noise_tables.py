"""Certified float decisions for the exact samplers of :mod:`dpcore.privacy.noise` (no randomness here).

The samplers read a uniform ``U`` through a short prefix of its bits and decide each output in
float where a margin far above the float error proves every ``U`` of the prefix's interval gives
the same answer; these helpers make those decisions in bulk (lookup tables per scale, integer
thresholds per ``|Y|``).  Undecided elements go back to the sampler, which settles them exactly
with more bits of the same ``U`` (Canonne, Kamath & Steinke, "The Discrete Gaussian for
Differential Privacy", NeurIPS 2020, Algorithms 2 and 3, for what is sampled).
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np

__all__ = ["ABS_MARGIN", "COIN_BITS", "EXP_ABS_MARGIN", "REJECT", "REL_MARGIN", "ROUND_MAX", "TABLE_MIN_BATCH",
           "UNDECIDED", "coins_by_log", "coins_by_table", "dgauss_acceptance", "laplace_table"]

REL_MARGIN = 1e-12  # relative float error margin (actual error is ~1e-15)
ABS_MARGIN = 1e-12
EXP_ABS_MARGIN = 2.0**-60


def coins_by_table(a: np.ndarray, v: np.ndarray, top: int, shift_f: float,
                    inv_2s2: float) -> tuple[np.ndarray, np.ndarray]:
    """The discrete Gaussian's coins ``U < exp(-gamma(a))``, ``gamma(a) = (a - sigma^2/t)^2 / (2 sigma^2)``,
    for ``b``-bit prefixes ``v`` of the uniforms (``b`` = :data:`COIN_BITS`), from integer thresholds
    per ``a = 0..top``: accepted where ``v < A_a`` (then ``(v + 1) 2^-b <= e - margin``), rejected
    where ``v >= B_a`` (then ``v 2^-b >= e + margin``), ``e`` the float ``exp(-gamma)`` and the margin certified as in the
    float decision elsewhere; returns ``(accepted, undecided indices)``."""
    k = np.arange(top + 1, dtype=np.float64)
    k -= shift_f
    k *= k
    k *= inv_2s2  # gamma per |Y|
    e = np.exp(-k)
    margin = e * (REL_MARGIN * (k + 1.0)) + EXP_ABS_MARGIN
    accept_below = np.floor((e - margin) * 2.0**COIN_BITS).astype(np.int64)
    reject_from = np.ceil((e + margin) * 2.0**COIN_BITS).astype(np.int64)
    vi = v.astype(np.int64)
    accept = vi < accept_below.take(a)
    undecided = np.flatnonzero(~accept & (vi < reject_from.take(a)))
    return accept, undecided


def coins_by_log(a: np.ndarray, v: np.ndarray, shift_f: float, inv_2s2: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`coins_by_table` element by element (small batches, or ``|Y|`` too spread for a
    table): ``U < exp(-gamma)`` iff ``-ln U > gamma``; on ``U``'s interval ``[v, v + 1) 2^-b``,
    ``-ln U`` lies in ``(w, w + 1/v]`` with ``w = -ln((v + 1) 2^-b) <= b ln 2``."""
    m = v.size
    gamma = a.astype(np.float64)
    gamma -= shift_f
    gamma *= gamma
    gamma *= inv_2s2
    w = v.astype(np.float64)
    width = np.divide(1.0 + REL_MARGIN, w, out=np.full(m, np.inf), where=w > 0)
    w += 1.0
    w *= 2.0**-COIN_BITS
    np.log(w, out=w)
    np.negative(w, out=w)
    margin = gamma * REL_MARGIN
    margin += (COIN_BITS + 1.0) * REL_MARGIN + ABS_MARGIN
    accept = w - margin > gamma
    w += width
    w += margin
    return accept, np.flatnonzero(~accept & (w > gamma))


#: Markers in a batch of discrete Laplace proposals (no draw comes near them).
UNDECIDED = np.iinfo(np.int64).min
REJECT = UNDECIDED + 1
#: Smallest batch for which the proposals' and the Gaussian coins' lookup tables are used.
TABLE_MIN_BATCH = 1 << 14
#: Bits of the discrete Gaussian's coin read at first (more are drawn only when they do not decide).
COIN_BITS = 16
#: Most proposals in one round of the batched samplers: larger requests take several rounds,
#: whose arrays stay in the processor's caches.
ROUND_MAX = 1 << 18


@lru_cache(maxsize=64)
def laplace_table(t: Fraction) -> np.ndarray:
    """Proposal of :meth:`dpcore.privacy.noise.NoiseSource._laplace_proposals` per (sign ``B``, top 16 bits ``j`` of the
    uniform's prefix): ``(1 - 2B) G`` where ``G = floor(-t ln U)`` is the same for every ``U`` in
    ``[j 2^-16, (j + 1) 2^-16)``, certified in float as in :meth:`dpcore.privacy.noise.NoiseSource._geometric` (the two
    ends, widened by a margin far above the float error, floor alike); :data:`REJECT` for
    ``B = 1, G = 0``; :data:`UNDECIDED` where ``G`` changes inside the bucket (about
    ``t (1 + ln(2^16 / t)) / 2^16`` of them: 0.2 % at t = 10), which the caller draws exactly.

    >>> tab = laplace_table(Fraction(10))
    >>> int(tab[2**16 - 1]), int(tab[2**17 - 1]), int(tab[0]) == UNDECIDED
    (0, -9223372036854775807, True)
    """
    tf = float(t)
    j = np.arange(1 << 16, dtype=np.float64)
    margin = (tf * 16 * 0.6931471805599453 + 1.0) * REL_MARGIN + ABS_MARGIN
    with np.errstate(divide="ignore", invalid="ignore"):
        z_top = -tf * np.log(j * 2.0**-16)  # +inf at j = 0
        z_bottom = -tf * np.log((j + 1.0) * 2.0**-16)
    hi = np.floor(z_top + margin)
    lo = np.maximum(np.floor(z_bottom - margin), 0.0)
    g = np.where(lo == hi, lo, -1.0).astype(np.int64)
    tab = np.concatenate([g, np.where(g == 0, REJECT, -g)])
    tab[np.concatenate([g < 0, g < 0])] = UNDECIDED
    tab.setflags(write=False)
    return tab


@lru_cache(maxsize=256)
def dgauss_acceptance(sigma: Fraction) -> float:
    """Acceptance rate of CKS20 Algorithm 3 with ``t = floor(sigma) + 1`` (it only sizes batches).

    The proposal's pmf times the acceptance probability is
    ``tanh(1/(2t)) exp(-sigma^2/(2t^2)) exp(-y^2/(2 sigma^2))`` (CKS20, proof of Theorem 6), so
    the rate is ``tanh(1/(2t)) exp(-sigma^2/(2t^2)) Z``, ``Z = sum_y exp(-y^2/(2 sigma^2))``, here
    ``max(1, sqrt(2 pi) sigma)`` (equal to float precision from sigma = 1; any value changes only
    the batch sizes, never a draw), clipped to [0.05, 1].

    >>> round(dgauss_acceptance(Fraction(10)), 3)
    0.753
    """
    sf = float(sigma)
    t = math.floor(sigma) + 1
    z = max(1.0, math.sqrt(2.0 * math.pi) * sf)
    return min(max(math.tanh(0.5 / t) * math.exp(-sf * sf / (2.0 * t * t)) * z, 0.05), 1.0)
