"""Exact facts of the distributions that :mod:`dpcore.privacy.noise` samples (no randomness here).

The variance and the interval half-width of the discrete Laplace (two-sided geometric; Ghosh,
Roughgarden & Sundararajan 2009) and of the discrete Gaussian (Canonne, Kamath & Steinke, "The
Discrete Gaussian for Differential Privacy", NeurIPS 2020), for a checked parameter: a positive
float, int or :class:`~fractions.Fraction` at most ``10^15``.  Each fact is kept in one bounded
cache, here next to its computation: every level of every plan and release asks again for the
same few public scales, and every caller (the calibration, the mechanisms, the data users' files)
goes through the checked functions of :mod:`dpcore.privacy.noise`, which call these.

These functions do not check their parameter (``dlap_variance(-1.0)`` returns a number): call
them through :mod:`dpcore.privacy.noise`, which checks it first.

A fact depends on its parameter's exact value only (a float is read as the Fraction it equals),
so a float and the Fraction it equals, which compare and hash alike, share one cache entry.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np

__all__ = ["dgauss_interval", "dgauss_normaliser", "dgauss_variance", "dlap_interval",
           "dlap_variance"]

#: Above this sigma the discrete Gaussian facts use the Poisson-summation form instead of summing
#: the pmf term by term (the two agree to float precision).
DGAUSS_SUM_MAX_SIGMA = 1e4


@lru_cache(maxsize=4096)
def dlap_variance(scale: Fraction | float) -> float:
    """Variance :math:`2q / (1 - q)^2` with :math:`q = e^{-1/t}` of the discrete Laplace of scale ``t``.

    >>> round(dlap_variance(1.0), 6)
    1.841347
    """
    t = float(scale)
    q = math.exp(-1.0 / t)
    one_minus_q = -math.expm1(-1.0 / t)
    return 2.0 * q / (one_minus_q * one_minus_q)


def _dlap_abs_cdf(h: int, t: float) -> float:
    """:math:`P(|X| \\le h) = 1 - 2 q^{h+1} / (1 + q)`."""
    q = math.exp(-1.0 / t)
    return 1.0 - 2.0 * math.exp(-(h + 1) / t) / (1.0 + q)


@lru_cache(maxsize=4096)
def dlap_interval(scale: Fraction | float, level: float) -> int:
    """Smallest integer :math:`h \\ge 0` with :math:`P(|X| \\le h) \\ge` ``level`` (a float in (0, 1)).

    Uses :math:`P(|X| > h) = 2 q^{h+1} / (1 + q)`, so
    :math:`h = \\lceil -t \\ln((1 - \\mathrm{level})(1 + q)/2) \\rceil - 1`
    (then checked against the definition and adjusted by one if rounding demands).

    >>> dlap_interval(1.0, 0.95)
    3
    """
    t = float(scale)
    q = math.exp(-1.0 / t)
    h = max(math.ceil(-t * math.log((1.0 - level) * (1.0 + q) / 2.0)) - 1, 0)
    while h > 0 and _dlap_abs_cdf(h - 1, t) >= level:
        h -= 1
    while _dlap_abs_cdf(h, t) < level:
        h += 1
    return h


@lru_cache(maxsize=8)  # the variance and interval are cached per scale above it; arrays up to 3 MB each
def _dgauss_half_weights(sigma: Fraction) -> tuple[np.ndarray, float]:
    """Weights ``w_k = exp(-k^2/(2 sigma^2))`` for ``k = 0..K`` and ``Z = sum_{k in Z} w_k``.

    ``K = ceil(39 sigma) + 2``: beyond it every weight underflows to 0.
    """
    s = float(sigma)
    kmax = math.ceil(39.0 * s) + 2
    ks = np.arange(kmax + 1, dtype=np.float64)
    w = np.exp(-(ks * ks) / (2.0 * float(sigma * sigma)))
    w.setflags(write=False)
    z = float(w[0] + 2.0 * np.sum(w[1:]))
    return w, z


def dgauss_normaliser(sigma: Fraction | float) -> float:
    """:math:`Z = \\sum_k e^{-k^2/(2\\sigma^2)}`.

    Summed directly for :math:`\\sigma \\le 10^4`; above, Poisson summation
    :math:`Z = \\sqrt{2\\pi}\\sigma \\sum_m e^{-2\\pi^2\\sigma^2 m^2}`, whose
    :math:`m \\neq 0` terms are below :math:`e^{-10^9}`.
    """
    if float(sigma) <= DGAUSS_SUM_MAX_SIGMA:
        return _dgauss_half_weights(Fraction(sigma))[1]
    return math.sqrt(2.0 * math.pi) * float(sigma)


@lru_cache(maxsize=4096)
def dgauss_variance(sigma: Fraction | float) -> float:
    """Variance :math:`\\sum_k k^2 p(k)` of the discrete Gaussian, slightly below :math:`\\sigma^2`.

    Summed from the pmf for :math:`\\sigma \\le 10^4`; above, Poisson summation
    shows the difference from :math:`\\sigma^2` is below
    :math:`4\\pi^2\\sigma^4 e^{-2\\pi^2\\sigma^2}` (far below float precision),
    so :math:`\\sigma^2` is returned.
    """
    s = Fraction(sigma)
    if float(s) > DGAUSS_SUM_MAX_SIGMA:
        return float(s * s)
    w, z = _dgauss_half_weights(s)
    ks = np.arange(w.size, dtype=np.float64)
    return float(2.0 * np.sum(ks * ks * w) / z)


@lru_cache(maxsize=4096)
def dgauss_interval(sigma: Fraction | float, level: float) -> int:
    """Smallest integer :math:`h \\ge 0` with :math:`P(|X| \\le h) \\ge` ``level`` (a float in (0, 1)).

    :math:`P(|X| \\le h) = (w_0 + 2\\sum_{k=1}^{h} w_k)/Z` summed from the pmf
    for :math:`\\sigma \\le 10^4`.  Above, the midpoint (continuity-corrected)
    form :math:`\\operatorname{erf}((h + 1/2)/(\\sigma\\sqrt2))` is used; its
    error (order :math:`1/\\sigma^2`) is far below the step between
    consecutive :math:`h` (order :math:`1/\\sigma`).
    """
    from scipy import special

    s = Fraction(sigma)
    sf = float(s)
    if sf > DGAUSS_SUM_MAX_SIGMA:
        h = max(math.ceil(sf * math.sqrt(2.0) * float(special.erfinv(level)) - 0.5), 0)

        def cdf(j: int) -> float:
            return math.erf((j + 0.5) / (sf * math.sqrt(2.0)))

        while h > 0 and cdf(h - 1) >= level:
            h -= 1
        while cdf(h) < level:
            h += 1
        return h
    w, z = _dgauss_half_weights(s)
    cdf = (w[0] + 2.0 * np.concatenate(([0.0], np.cumsum(w[1:])))) / z
    idx = int(np.searchsorted(cdf, level, side="left"))
    return min(idx, w.size - 1)
