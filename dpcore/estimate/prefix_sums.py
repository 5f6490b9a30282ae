"""Cumulative series: noisy prefix sums (year to date) by the square-root factorisation.

When the statistic data users read is cumulative (year to date, or a rolling window of several
periods), summing independently noised period counts makes the error grow like the number of
periods: after ``T`` periods the year-to-date count carries ``T`` noises.  The square-root
factorisation (Fichtenberger, Henzinger & Upadhyay, "Constant matters: fine-grained error bound
on differentially private continual observation", ICML 2023, Sec. 3; Henzinger, Upadhyay &
Upadhyay, "Almost tight error bounds on differentially private continual counting", SODA 2023,
Sec. 3) writes the prefix-sum matrix ``A`` (lower-triangular ones, ``T × T``) as ``A = C·C`` with
``C`` the lower-triangular Toeplitz matrix of

.. math:: c_k = \\binom{2k}{k} / 4^k \\quad (c_0 = 1,\\; c_k = c_{k-1} (2k - 1) / (2k)),

the coefficients of :math:`(1 - x)^{-1/2}`, whose square is :math:`(1 - x)^{-1}`.  It measures
``y = C·x + z`` (``x``: the ``T`` period counts of a cell, ``z`` Gaussian noise of SD ``σ``) and
publishes ``C·y = A·x + C·z``.  Both factors are lower-triangular, so the prefix of period ``t``
uses only the periods up to ``t``: the mechanism is *online* (each row can be published when its
period closes, with the same result).  The number of periods ``T`` is fixed in advance (the
public horizon): the noise is calibrated to it.

Sensitivity.  One record in one period ``j`` changes ``C·x`` by column ``j`` of ``C``, whose L2
norm is at most that of column 0, :math:`\\sqrt{\\sum_{k<T} c_k^2}`; a unit whose per-period change
has L2 norm ``Δ`` gives ``Δ`` times that.  A person present in ``w`` periods changes ``C·X`` (``X``:
periods × cells) by :math:`\\sum_{p \\in P} C_{:,p} \\delta_p^T`; its Frobenius norm squared is
:math:`\\sum_{p,q} (C^T C)_{pq}\\, \\delta_p \\cdot \\delta_q \\le \\Delta^2 \\sum_{p,q \\in P} (C^T C)_{pq}`
because every entry of ``CᵀC`` is positive, and the sum is largest for the first ``w`` periods
(``(CᵀC)_{pq} = Σ_s c_s c_{s+|p−q|}`` over ``s < T − max(p, q)`` falls with the gap and with the
later index), so ``Δ₂ = Δ·‖C·1_w‖``, with ``1_w`` the indicator of the first ``w`` periods.  It grows
from ``√Σc²`` (``w = 1``) to about ``T·√(2/π)`` (``w = T``), against ``√w`` for independent periods:
the factorisation pays off for event and person-period units, and for a person over a horizon only
when ``w`` is small.

Error.  With ``Var(z) = σ²``, the prefix after ``t`` periods has variance
:math:`\\sigma^2 \\sum_{k<t} c_k^2 \\approx \\sigma^2 (1 + \\ln t / \\pi)`, and a single period's
value (the difference of two prefixes) :math:`\\sigma^2 \\sum_{k<t} (c_k - c_{k-1})^2`.  With
``σ² = Δ²·Σ_{k<T} c_k² / (2ρ)`` at ``T = 52``: year to date ``5.39/(2ρ)`` against ``52/(2ρ)`` for
summed independent weeks, and ``2.96/(2ρ)`` for one week against ``1/(2ρ)``
(:func:`compare_variances`).  :func:`recommend` turns the curator's statistic into the choice.

Noise.  ``C·x`` is real-valued; as for every real-valued quantity of the library, it is rounded
to the grid ``2^k`` and the discrete Gaussian of parameter ``σ/2^k`` is added on it
(:meth:`dpcore.privacy.noise.NoiseSource.gaussian_on_grid`; Canonne, Kamath & Steinke, NeurIPS
2020).  Rounding can move each of the ``s`` changed answers by one more grid step, so the noise is
calibrated to ``Δ₂ + √s·2^k`` with ``s = T × cells`` (every answer), and ``k`` is chosen so that
this slack is at most ``grid_slack·Δ₂`` (1e-6 by default).  Scaling ``C`` to integers instead is
not practical: ``c_k`` has denominator ``4^k``, so ``4^{T−1}·C`` overflows 64 bits beyond
``T = 31``.  The rounding itself is a fixed error of at most ``2^{k−1}`` per answer, far below the
noise (it is not counted in the variances).

Use in a series release (``--cumulative``).  With the per-period counts of every cell stacked as
``counts`` (periods × cells, the periods of the public range in order, empty periods as zeros),
``rel = release_prefix_sums(counts, rho, noise_source, periods_per_person=w,
per_period_sensitivity=Δ)`` is the whole series in one draw: charge ``rel.cost`` once through the
session for the whole horizon, publish ``rel.prefix`` (cumulative counts) and ``rel.periods``
(period counts that add up to them) with ``rel.prefix_sd`` / ``rel.period_sd`` as the SD columns,
and record ``rel.plan.to_dict()``.  :func:`plan_prefix_sums` is the same without data (previews),
:func:`recommend` the advice the plan shows.  Under pure ε-DP there is no factorisation here (its
noise is Gaussian): refuse ``--cumulative`` with ``--epsilon``.

>>> c = coefficients(4)
>>> c.tolist()
[1.0, 0.5, 0.375, 0.3125]
>>> C = factor_matrix(4)
>>> (C @ C).tolist() == np.tril(np.ones((4, 4))).tolist()
True
>>> cmp = compare_variances(52)
>>> round(cmp["factorisation"]["ytd"], 2), cmp["leaves"]["ytd"], round(cmp["factorisation"]["period_max"], 2)
(5.39, 52.0, 2.96)
>>> recommend("cumulative", 52)["method"], recommend("period", 52)["method"]
('factorisation', 'leaves')
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from dpcore.errors import ParameterError
from dpcore.privacy.budget import PrivacyCost, zcdp
from dpcore.privacy.calibration import gaussian_sigma_for_rho
from dpcore.privacy.noise import NoiseSource, discrete_gaussian_variance

__all__ = ["PrefixPlan", "PrefixRelease", "STATISTICS", "coefficients", "compare_variances", "factor_matrix",
           "period_variance_factors", "plan_prefix_sums", "prefix_variance_factors", "recommend",
           "release_prefix_sums", "sensitivity"]

#: The statistics a curator can name as the one data users read (:func:`recommend`).
STATISTICS = ("period", "cumulative", "window")
#: The shortest rolling window for which the factorisation is recommended (issue 24, item 6).
MIN_WINDOW = 4
#: Most periods accepted: ten years of days.  The factor is a dense T × T matrix (two of them while
#: it is built: about 0.26 GB at this size, 6.4 GB at 20,000) and ``C @ X`` costs T² per cell.
MAX_PERIODS = 4_000


def _periods(T: Any) -> int:
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or not 1 <= int(T) <= MAX_PERIODS:
        raise ParameterError(f"The number of periods must be a whole number from 1 to {MAX_PERIODS:,} (got {T!r}); "
                             "it is the public horizon of the series, e.g. 52 weeks.")
    return int(T)


def coefficients(T: int) -> np.ndarray:
    """``c_k = C(2k, k)/4^k`` for ``k < T`` (the recurrence ``c_k = c_{k−1}(2k − 1)/(2k)``).

    >>> coefficients(3).tolist()
    [1.0, 0.5, 0.375]
    """
    T = _periods(T)
    k = np.arange(1, T, dtype=np.float64)
    return np.concatenate(([1.0], np.cumprod((2.0 * k - 1.0) / (2.0 * k))))


def factor_matrix(T: int) -> np.ndarray:
    """The lower-triangular Toeplitz factor ``C`` (``C[t, j] = c_{t−j}`` for ``j <= t``), ``C·C = A``.

    >>> factor_matrix(3).tolist()
    [[1.0, 0.0, 0.0], [0.5, 1.0, 0.0], [0.375, 0.5, 1.0]]
    """
    c = coefficients(T)
    idx = np.subtract.outer(np.arange(len(c)), np.arange(len(c)))
    return np.where(idx >= 0, c[np.clip(idx, 0, None)], 0.0)


def sensitivity(T: int, periods_per_person: int = 1, per_period: float = 1.0) -> float:
    """The L2 sensitivity of ``C·X`` (see the module): ``Δ·‖C·1_w‖₂`` over the first ``w`` periods.

    ``per_period`` is ``Δ``, the L2 norm of one unit's change to one period's counts (1 for one
    record; the cap's for a person-period); ``periods_per_person`` is ``w`` (1 for event and
    person-period units, whose periods are disjoint; the declared cap for a person over a horizon).

    >>> round(sensitivity(52), 4), round(sensitivity(52) ** 2, 4)
    (1.524, 2.3225)
    >>> round(sensitivity(52, 52) ** 2)  # a person in all 52 weeks: Δ₂² = 52 for the leaves
    1738
    """
    T = _periods(T)
    w = _periods(periods_per_person)
    if w > T:
        raise ParameterError(f"A person cannot be in more periods ({w}) than the series has ({T}).")
    if not (isinstance(per_period, (int, float)) and math.isfinite(per_period) and per_period > 0):
        raise ParameterError(f"The per-period sensitivity must be a positive number (got {per_period!r}).")
    c = coefficients(T)
    rows = np.cumsum(c)  # (C·1_w)_t = Σ_{j<w, j<=t} c_{t−j} = S_t − S_{t−w}
    col = rows.copy()
    col[w:] -= rows[:-w] if w < T else 0.0
    return float(per_period * math.sqrt(float(np.sum(col * col))))


def prefix_variance_factors(T: int) -> np.ndarray:
    """``Σ_{k<t} c_k²`` for ``t = 1..T``: the variance of each prefix in units of ``Var(z)``.

    >>> prefix_variance_factors(3).tolist()
    [1.0, 1.25, 1.390625]
    """
    return np.cumsum(coefficients(T) ** 2)


def period_variance_factors(T: int) -> np.ndarray:
    """``Σ_{k<t} (c_k − c_{k−1})²`` (``c_{−1} = 0``) for ``t = 1..T``: a single period's variance.

    >>> period_variance_factors(3).tolist()
    [1.0, 1.25, 1.265625]
    """
    c = coefficients(T)
    return np.cumsum(np.diff(np.concatenate(([0.0], c))) ** 2)


def _grid_exponent(sens: float, answers: int, slack: float) -> int:
    """``k`` with ``√answers·2^k <= slack·Δ``: rounding to the grid adds at most that to ``Δ``."""
    return math.floor(math.log2(slack * sens / math.sqrt(answers)))


@dataclass(frozen=True)
class PrefixPlan:
    """The data-free plan of a cumulative series (:func:`plan_prefix_sums`): the noise and the
    exact variance of every prefix and every period value."""

    periods: int
    cells: int
    rho: float
    periods_per_person: int
    per_period_sensitivity: float
    sensitivity: float
    effective_sensitivity: float
    sigma: float
    grid_exponent: int
    noise_variance: float
    prefix_variance: np.ndarray = field(repr=False)
    period_variance: np.ndarray = field(repr=False)

    @property
    def cost(self) -> PrivacyCost:
        return zcdp(self.rho)

    def to_dict(self) -> dict[str, Any]:
        return {"method": "square-root factorisation of the prefix sums", "periods": self.periods,
                "cells": self.cells, "rho": self.rho, "periods_per_person": self.periods_per_person,
                "per_period_sensitivity": self.per_period_sensitivity, "sensitivity": self.sensitivity,
                "effective_sensitivity": self.effective_sensitivity, "sigma": self.sigma,
                "grid_exponent": self.grid_exponent, "noise_variance": self.noise_variance,
                "prefix_sd": np.sqrt(self.prefix_variance).tolist(),
                "period_sd": np.sqrt(self.period_variance).tolist(),
                "reference": "Fichtenberger, Henzinger & Upadhyay, ICML 2023, Sec. 3; Henzinger, Upadhyay & "
                             "Upadhyay, SODA 2023, Sec. 3"}


def plan_prefix_sums(periods: int, rho: float, *, cells: int = 1, periods_per_person: int = 1,
                     per_period_sensitivity: float = 1.0, grid_slack: float = 1e-6) -> PrefixPlan:
    """The noise of a cumulative series of ``periods`` periods over ``cells`` cells at ρ-zCDP ``rho``.

    ``σ`` is :func:`~dpcore.privacy.calibration.gaussian_sigma_for_rho` of the effective sensitivity
    ``Δ₂ + √(T·cells)·2^k`` (the module's "Noise"); the variances are exact for the discrete
    Gaussian drawn (:func:`~dpcore.privacy.noise.discrete_gaussian_variance`, a hair below ``σ²``).

    >>> p = plan_prefix_sums(52, 0.5)
    >>> round(float(p.prefix_variance[-1]) * 2 * 0.5, 3), round(float(p.period_variance[-1]) * 2 * 0.5, 3)
    (5.394, 2.957)
    """
    T = _periods(periods)
    if isinstance(cells, bool) or not isinstance(cells, (int, np.integer)) or cells < 1:
        raise ParameterError(f"cells must be a positive whole number (got {cells!r}).")
    if not 0 < grid_slack < 1e-2:
        raise ParameterError(f"grid_slack must lie in (0, 0.01) (got {grid_slack!r}); the default 1e-6 is right.")
    sens = sensitivity(T, periods_per_person, per_period_sensitivity)
    k = _grid_exponent(sens, T * int(cells), grid_slack)
    eff = sens + math.sqrt(T * int(cells)) * 2.0**k
    sigma = gaussian_sigma_for_rho(rho, eff)
    var = discrete_gaussian_variance(Fraction(sigma) / Fraction(2) ** k) * 4.0**k
    return PrefixPlan(T, int(cells), float(rho), int(periods_per_person), float(per_period_sensitivity), sens, eff,
                      sigma, k, var, var * prefix_variance_factors(T), var * period_variance_factors(T))


@dataclass(frozen=True)
class PrefixRelease:
    """A released cumulative series: ``prefix[t, i]`` the noisy count of cell ``i`` over periods
    ``0..t``; ``periods[t, i]`` its noisy count in period ``t`` (consecutive differences, so the
    periods add up to every prefix); the plan with the variances; the cost to charge."""

    prefix: np.ndarray
    periods: np.ndarray
    plan: PrefixPlan

    @property
    def cost(self) -> PrivacyCost:
        return self.plan.cost

    @property
    def prefix_sd(self) -> np.ndarray:
        return np.sqrt(self.plan.prefix_variance)

    @property
    def period_sd(self) -> np.ndarray:
        return np.sqrt(self.plan.period_variance)


def release_prefix_sums(counts: np.ndarray, rho: float, source: NoiseSource, *, periods_per_person: int = 1,
                        per_period_sensitivity: float = 1.0, grid_slack: float = 1e-6) -> PrefixRelease:
    """Noisy prefix sums of ``counts`` (``T × cells``: period ``t``'s count of every cell) at ρ-zCDP.

    ``y = C·X + Z`` with ``Z`` the discrete Gaussian on the grid (the only randomness, from
    ``source``), published as ``C·y``.  The caller charges ``result.cost`` (``ρ``) through the
    session, once for the whole series under the unit's accounting: this is one mechanism over all
    ``T`` periods, calibrated to the horizon ``T``.  Reads ``counts`` only through ``C·X``.

    >>> rel = release_prefix_sums(np.ones((4, 2)), 1e6, NoiseSource(seed=1))
    >>> np.round(rel.prefix, 1).tolist()
    [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0]]
    >>> bool(np.allclose(rel.periods.cumsum(axis=0), rel.prefix))
    True
    """
    x = np.asarray(counts, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise ParameterError(f"counts must be a periods × cells matrix (got shape {np.shape(counts)}).")
    if not np.all(np.isfinite(x)):
        raise ParameterError("counts hold NaN or infinity; they must be the counts of every cell in every period.")
    plan = plan_prefix_sums(x.shape[0], rho, cells=x.shape[1], periods_per_person=periods_per_person,
                            per_period_sensitivity=per_period_sensitivity, grid_slack=grid_slack)
    C = factor_matrix(plan.periods)
    y = source.gaussian_on_grid(C @ x, plan.sigma, plan.grid_exponent)
    prefix = C @ y
    periods = np.diff(np.vstack([np.zeros((1, x.shape[1])), prefix]), axis=0)
    return PrefixRelease(prefix, periods, plan)


def compare_variances(periods: int, rho: float | None = None, *, periods_per_person: int = 1,
                      per_period_sensitivity: float = 1.0) -> dict[str, Any]:
    """Year-to-date and single-period variances of the two designs, in units of ``1/(2ρ)`` (or in
    counts² for a given ``rho``), from public parameters only.

    * ``leaves``: every period released on its own (sensitivity ``Δ·√w``): a period ``w·Δ²``, the
      year to date ``T·w·Δ²``;
    * ``factorisation``: :func:`plan_prefix_sums` without the grid slack: the year to date
      ``Δ₂²·Σ_{k<T} c_k²`` and the worst single period ``Δ₂²·Σ_{k<T}(c_k − c_{k−1})²``.

    ``horizon_rho_multiple`` is what a person present in every period spends, in multiples of the
    ρ each design is run at: ``T`` for the leaves (``T`` releases), ``‖C·1‖²/‖c‖²`` for the
    factorisation (about ``2T²/(π Σc²)``: 748 at ``T = 52``).  The factorisation's advantage holds
    for event and person-period guarantees; a person in every period is far more exposed by it.

    >>> round(compare_variances(52)["factorisation"]["horizon_rho_multiple"])
    748

    >>> cmp = compare_variances(12)
    >>> round(cmp["factorisation"]["ytd"], 1), round(cmp["factorisation"]["period_max"], 2), cmp["ytd_ratio"] > 3
    (3.4, 2.36, True)
    >>> round(compare_variances(365)["factorisation"]["ytd"], 1)
    8.7
    """
    T = _periods(periods)
    unit = 1.0 if rho is None else 1.0 / (2.0 * float(rho))
    d2 = sensitivity(T, periods_per_person, per_period_sensitivity) ** 2
    leaves_period = periods_per_person * per_period_sensitivity**2
    fac = {"ytd": d2 * float(prefix_variance_factors(T)[-1]) * unit,
           "period_max": d2 * float(period_variance_factors(T)[-1]) * unit,
           "ytd_by_period": (d2 * prefix_variance_factors(T) * unit).tolist()}
    leaves = {"ytd": T * leaves_period * unit, "period_max": leaves_period * unit,
              "ytd_by_period": (np.arange(1, T + 1) * leaves_period * unit).tolist()}
    # the ρ a person present in every period spends, in multiples of the ρ the design is run at
    # (leaves: T releases of ρ each; factorisation: one release of ρ calibrated to one period's change)
    fac["horizon_rho_multiple"] = sensitivity(T, T) ** 2 / sensitivity(T) ** 2
    leaves["horizon_rho_multiple"] = float(T)
    return {"periods": T, "unit": "1/(2 rho)" if rho is None else "counts^2", "periods_per_person": periods_per_person,
            "factorisation": fac, "leaves": leaves, "ytd_ratio": leaves["ytd"] / fac["ytd"],
            "period_ratio": fac["period_max"] / leaves["period_max"]}


def recommend(statistic: str, periods: int, *, window: int | None = None, periods_per_person: int = 1) -> dict[str, Any]:
    """Which design to release with, for the statistic data users mainly read.

    ``period`` (each period's own count) → ``leaves`` (each period released on its own: variance 1
    per period); ``cumulative`` (year to date) or ``window`` of at least :data:`MIN_WINDOW`
    periods → ``factorisation``, unless the person's many periods make its year-to-date variance
    no better than the leaves' (then ``leaves``).  The figures of :func:`compare_variances` come
    with the answer, and ``reason`` says it in words.

    >>> r = recommend("window", 52, window=3)
    >>> r["method"], r["reason"].split(":")[0]
    ('leaves', 'a window of 3 periods')
    >>> recommend("cumulative", 52, periods_per_person=52)["method"]
    'leaves'
    """
    if statistic not in STATISTICS:
        raise ParameterError(f"The statistic is one of {', '.join(STATISTICS)} (got {statistic!r}): the period "
                             "count, the cumulative (year to date) count, or a rolling window of periods.")
    cmp = compare_variances(periods, periods_per_person=periods_per_person)
    fac, leaves = cmp["factorisation"], cmp["leaves"]
    figures = (f"year to date {fac['ytd']:.3g}/(2ρ) with the factorisation against {leaves['ytd']:.3g}/(2ρ) "
               f"for summed periods; one period {fac['period_max']:.3g}/(2ρ) against {leaves['period_max']:.3g}/(2ρ)")
    if statistic == "period":
        method, why = "leaves", "the period count is read: release each period on its own"
    elif statistic == "window" and (window is None or window < MIN_WINDOW):
        method, why = "leaves", (f"a window of {window} periods: below {MIN_WINDOW} periods the factorisation's "
                                 "worse single periods are not repaid")
    elif fac["ytd"] >= leaves["ytd"]:
        method, why = "leaves", (f"a person in {periods_per_person} periods makes the factorisation's sensitivity "
                                 "too large")
    else:
        method, why = "factorisation", "a cumulative statistic is read: the square-root factorisation"
    return {"statistic": statistic, "window": window, "method": method, "reason": f"{why}: {figures}",
            "comparison": cmp}
