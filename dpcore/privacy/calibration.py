"""Calibration: how a budget becomes noise, and how sure a noisy value is.

Three rules shared by every kind of data (points, areas, flows) and every mechanism:

* **Splitting a budget over levels or phases** (:func:`split`, :func:`split_uniform`,
  :func:`split_geometric`, :func:`split_custom`).  By sequential composition (Dwork & Roth
  2014, Thm. 3.14; Bun & Steinke 2016, Lemma 1.7 for zCDP) releases with these parts cost the
  total together; the parts are rounded so that their exact sum never exceeds the total.
* **Cost to noise scale** (:func:`laplace_scale_for_epsilon`, :func:`gaussian_sigma_for_rho`,
  and :func:`noise_for_cost`, which picks the discrete Laplace for pure ε-DP and the discrete
  Gaussian for ρ-zCDP, with its exact variance from :mod:`dpcore.privacy.noise`).
* **The 95 % interval of a noisy value** (:func:`interval_half_width`): exact quantiles of the
  discrete distribution where the error is one discrete Laplace / discrete Gaussian draw, the
  normal quantile where it is a sum or least-squares combination of many noisy values;
  :func:`discrete_sum_half_width`: the exact quantile of a sum of m iid discrete Laplace or Gaussian draws.

Nothing here draws randomness; the samplers are in :mod:`dpcore.privacy.noise`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from functools import lru_cache
from statistics import NormalDist
from typing import Any, Literal

import numpy as np

from dpcore.errors import ParameterError
from dpcore.privacy import noise as _noise
from dpcore.privacy.budget import _positive, _real, float_down

__all__ = [
    "NOISES",
    "SplitKind",
    "gaussian_sigma_for_rho",
    "discrete_sum_half_width",
    "discrete_sum_half_widths",
    "interval_half_width",
    "laplace_scale_for_epsilon",
    "noise_for_cost",
    "noise_variance",
    "normal_z",
    "split",
    "split_custom",
    "split_geometric",
    "split_measured",
    "split_uniform",
]

SplitKind = Literal["uniform", "geometric", "custom"]
#: The distributions :func:`interval_half_width` knows: one discrete draw (exact), ``"normal"``
#: (sums of many noisy values) and ``"laplace"`` (a sum dominated by one Laplace term).
NOISES = ("discrete_laplace", "discrete_gaussian", "normal", "laplace")

_MAX_PARTS = 1_000_000


def _count(k: Any, what: str = "The number of parts k") -> int:
    if isinstance(k, bool | np.bool_):
        raise ParameterError(f"{what} must be a whole number of at least 1 (got {k!r}).")
    try:
        out = int(k) if isinstance(k, float) and k.is_integer() else int(k.__index__())
    except (AttributeError, TypeError, ValueError, OverflowError):
        raise ParameterError(f"{what} must be a whole number of at least 1 (got {k!r}).") from None
    if out < 1:
        raise ParameterError(f"{what} must be at least 1 (got {k!r}).")
    if out > _MAX_PARTS:
        raise ParameterError(
            f"{what} ({k!r}) is more than {_MAX_PARTS:,}; so many parts would leave each one "
            "with no useful budget. Use fewer levels or phases."
        )
    return out


# ---------------------------------------------------------------------------------------------
# cost -> noise scale
# ---------------------------------------------------------------------------------------------


def gaussian_sigma_for_rho(rho: float, l2_sensitivity: float) -> float:
    """Standard deviation of Gaussian noise that gives ρ-zCDP.

    ``σ = Δ₂ / sqrt(2ρ)``, rounded up to a float with ``σ² ≥ Δ₂²/(2ρ)`` exactly: the Gaussian mechanism with L2 sensitivity Δ₂ and variance σ² is
    ``Δ₂²/(2σ²)``-zCDP (Bun & Steinke 2016, Prop. 1.6); the same holds for the discrete
    Gaussian on integers (Canonne, Kamath & Steinke 2020, Thm. 4).

    Parameters
    ----------
    rho : float
        ρ > 0.
    l2_sensitivity : float
        Δ₂ > 0: the largest L2 change of the query vector between neighbours.
    """
    r = _positive(rho, "ρ", "Use the zCDP budget of this release, e.g. ρ = 0.125.")
    s = _positive(
        l2_sensitivity,
        "The L2 sensitivity Δ₂",
        "It is the most one unit of privacy can change the counts (1 for one point per person).",
    )
    return _sigma_for_rho(float(r), float(s))


@lru_cache(maxsize=4096)
def _sigma_for_rho(r: float, s: float) -> float:
    """:func:`gaussian_sigma_for_rho` of checked floats (a plan and its release ask for the same σ of
    every level again, and the target planner for many).

    ``Δ₂/sqrt(2ρ)`` in floats may round down by an ulp, which would spend a hair more than ρ: the
    float is stepped up until its exact square clears the exact bound ``σ² ≥ Δ₂²/(2ρ)``, compared in
    integers (``σ = a/b``, ``Δ₂ = c/d``, ``ρ = e/f`` exactly: ``a²·2e·d² ≥ c²·f·b²``).

    >>> _sigma_for_rho(0.5, 1.0), _sigma_for_rho(0.1, 1.0) ** 2 >= 1 / 0.2
    (1.0, True)
    """
    c, d = s.as_integer_ratio()
    e, f = r.as_integer_ratio()
    need = c * c * f
    have = 2 * e * d * d
    sigma = s / math.sqrt(2.0 * r)
    while True:
        a, b = sigma.as_integer_ratio()
        if a * a * have >= need * b * b:
            return sigma
        sigma = math.nextafter(sigma, math.inf)


def laplace_scale_for_epsilon(epsilon: float, l1_sensitivity: float) -> Fraction:
    """Exact scale ``b = Δ₁/ε`` of the (discrete) Laplace mechanism for ε-DP.

    The Laplace mechanism with scale ``Δ₁/ε`` is ε-DP (Dwork et al. 2006; Dwork & Roth
    2014, Thm. 3.6), and so is the discrete Laplace (geometric) mechanism on integers
    (Ghosh, Roughgarden & Sundararajan 2009; Canonne, Kamath & Steinke 2020).  The scale is
    returned as the exact rational ``Fraction(Δ₁) / Fraction(ε)`` of the two floats, so an
    exact sampler realises precisely the stated ε (no float rounding in the privacy
    parameter).

    Parameters
    ----------
    epsilon : float
        ε > 0, finite.
    l1_sensitivity : float
        Δ₁ > 0: the largest L1 change of the query vector between neighbours.
    """
    return cached_call(_laplace_scale, epsilon, l1_sensitivity)


@lru_cache(maxsize=4096, typed=True)
def _laplace_scale(epsilon: Any, l1_sensitivity: Any) -> Fraction:
    """:func:`laplace_scale_for_epsilon`, kept per (ε, Δ₁) and their types: a release asks for the
    same few public scales at every level and node again (a Fraction each time: 0.1 ms of a
    2 × 2 DAWA release)."""
    eps = _positive(epsilon, "The privacy budget ε", "Typical values are 0.05 to 2, e.g. ε = 0.5.")
    sens = _positive(
        l1_sensitivity,
        "The L1 sensitivity Δ₁",
        "It is the most one unit of privacy can change the counts (1 for one point per person).",
    )
    exact_eps = epsilon if isinstance(epsilon, Fraction) else Fraction(eps)
    exact_sens = l1_sensitivity if isinstance(l1_sensitivity, Fraction) else Fraction(sens)
    return exact_sens / exact_eps


# ---------------------------------------------------------------------------------------------
# splits of a budget
# ---------------------------------------------------------------------------------------------


def _total(total: Any) -> float:
    return _positive(
        total, "The total budget to split", "Use the budget of this release, e.g. 0.5."
    )


def _split_by_weights(total: float, weights: Sequence[float]) -> list[float]:
    """``total · w_i / Σw``; the last part with a positive weight absorbs the float rounding.

    That part is set to the largest float <= ``total − Σ(other parts)`` computed exactly, so
    the exact sum of the parts is <= ``total`` and so is the correctly rounded
    ``math.fsum``.  Parts with weight 0 are exactly 0.  Kept per (total, weights), both
    public: every release splits the same budget by the same shares again (exact Fractions).
    """
    w = tuple(weights)
    return list(cached_call(_split_cached, total, w, tuple(map(type, w))))


@lru_cache(maxsize=4096, typed=True)
def _split_cached(total: float, weights: tuple[float, ...], types: tuple[type, ...]) -> tuple[float, ...]:
    """:func:`_split_exact`, kept per total, weights and their types (a numpy weight gives numpy parts)."""
    return tuple(_split_exact(total, weights))


def _split_exact(total: float, weights: Sequence[float]) -> list[float]:
    w_sum = math.fsum(weights)
    parts = [total * (w / w_sum) for w in weights]
    last = max(i for i, w in enumerate(weights) if w > 0)
    exact_total = Fraction(total)

    def rest() -> Fraction:
        return exact_total - sum(
            (Fraction(p) for i, p in enumerate(parts) if i != last), Fraction(0)
        )

    left = rest()
    if left < 0:
        # Only when the absorbing share is ~0: rounding pushed the others a few ulps above
        # the total.  Take the excess from the largest part (orders of magnitude bigger).
        j = max((i for i in range(len(parts)) if i != last), key=parts.__getitem__)
        parts[j] = max(0.0, float_down(Fraction(parts[j]) + left))
        left = rest()
    parts[last] = float_down(left)
    return parts


def split_uniform(total: float, k: int) -> list[float]:
    """``k`` equal parts of ``total`` (e.g. the same ε for every level).

    By sequential composition (Dwork & Roth 2014, Thm. 3.14) releases with these parts
    cost ``total`` together.  The last part absorbs float rounding:
    ``math.fsum(parts) <= total`` always.
    """
    t = _total(total)
    n = _count(k)
    return _split_by_weights(t, [1.0] * n)


def split_geometric(total: float, k: int, ratio: float = 2 ** (1 / 3)) -> list[float]:
    """``k`` parts growing geometrically: part ``i ∝ ratio**i`` for ``i = 0..k-1``.

    Index 0 is the root (top level), which gets the least; with the default
    ``ratio = 2^(1/3)`` this is the geometric allocation of Cormode et al. (2012, Eq. 17)
    used by HTF: ``ε_i = total · ratio^i · (ratio − 1) / (ratio^k − 1)``.  The last part
    with a positive weight absorbs float rounding: ``math.fsum(parts) <= total`` always.

    Parameters
    ----------
    total : float
        Budget to split, > 0.
    k : int
        Number of parts (levels), >= 1.
    ratio : float
        Ratio between consecutive parts, > 0 (1 gives the uniform split; < 1 gives the
        root the most).
    """
    t = _total(total)
    n = _count(k)
    r = _positive(ratio, "The geometric ratio", "The default 2^(1/3) ≈ 1.26 is the HTF allocation.")
    # Normalise to the largest weight (= 1) so ratio**i cannot overflow for large k.
    top = n - 1 if r >= 1 else 0
    weights = [r ** (i - top) for i in range(n)]
    return _split_by_weights(t, weights)


def split_custom(total: float, weights: Sequence[float]) -> list[float]:
    """Parts proportional to ``weights``: part ``i = total · w_i / Σw``.

    Weights must be finite and >= 0, and not all 0; a part of weight 0 gets exactly 0.
    The last part with a positive weight absorbs float rounding:
    ``math.fsum(parts) <= total`` always.
    """
    t = _total(total)
    if isinstance(weights, str | bytes) or not isinstance(weights, Iterable):
        raise ParameterError(
            f"The split weights must be a list of numbers, one per part (got {weights!r})."
        )
    w = [
        _real(x, f"Split weight {i + 1}", "Use a number >= 0 for every part.")
        for i, x in enumerate(weights)
    ]
    if not w:
        raise ParameterError("The split needs at least one weight; give one number per part.")
    negative = [i + 1 for i, x in enumerate(w) if x < 0]
    if negative:
        raise ParameterError(
            f"Split weights must be >= 0; weight(s) {', '.join(map(str, negative))} are negative. "
            "Give 0 to a part that should get no budget."
        )
    if not any(x > 0 for x in w):
        raise ParameterError("All split weights are 0; give at least one part a positive weight.")
    # Scale to the largest weight so that huge weights cannot overflow their sum.
    biggest = max(w)
    return _split_by_weights(t, [x / biggest for x in w])


def split(
    total: float,
    k: int,
    kind: SplitKind,
    weights: Sequence[float] | None = None,
    ratio: float = 2 ** (1 / 3),
) -> list[float]:
    """Split ``total`` over ``k`` parts by ``kind`` (``"uniform"``, ``"geometric"``, ``"custom"``).

    ``weights`` is used (and required, with ``k`` entries) only for ``"custom"``, ``ratio``
    only for ``"geometric"``; otherwise they are ignored.  See :func:`split_uniform`,
    :func:`split_geometric` and :func:`split_custom`.
    """
    if kind == "uniform":
        return split_uniform(total, k)
    if kind == "geometric":
        return split_geometric(total, k, ratio)
    if kind == "custom":
        n = _count(k)
        if weights is None:
            raise ParameterError(
                "A custom split needs weights: give one number per part (e.g. 1, 2, 4)."
            )
        if isinstance(weights, str | bytes) or not isinstance(weights, Iterable):
            raise ParameterError(
                f"The split weights must be a list of numbers, one per part (got {weights!r})."
            )
        w = list(weights)
        if len(w) != n:
            raise ParameterError(
                f"A custom split over {n} parts needs {n} weights (got {len(w)}); "
                "give one number per part."
            )
        return split_custom(total, w)
    raise ParameterError(f"Unknown split {kind!r}; choose 'uniform', 'geometric' or 'custom'.")


def split_measured(total: float, measured: Sequence[bool], kind: SplitKind, weights: Sequence[float] | None,
                   level_names: Sequence[str]) -> list[float]:
    """Split ``total`` over the measured levels of a hierarchy (top first) by ``kind``, 0 for the others.

    The levels that are not measured get no share; with ``"geometric"`` each measured level gets
    2^(1/3) times the share of the measured level above (the finest the most).  A custom split
    needs one weight per measured level: its refusal names those levels (``level_names``, one
    per level) and shows weights to start from.

    >>> split_measured(3.0, [False, True, True], "uniform", None, ["total", "state", "county"])
    [0.0, 1.5, 1.5]
    """
    n_meas = sum(measured)
    if kind == "custom" and (weights is None or len(list(weights)) != n_meas):
        names = [name for name, m in zip(level_names, measured, strict=False) if m]
        raise ParameterError(
            f"A custom split needs {n_meas} weights, one per measured level ({', '.join(names)}), "
            "top first, e.g. " + ",".join(["1"] * n_meas) + "."
        )
    shares = iter(split(total, n_meas, kind, weights=weights))
    return [next(shares) if m else 0.0 for m in measured]


# ---------------------------------------------------------------------------------------------
# the noise of a cost
# ---------------------------------------------------------------------------------------------


def noise_for_cost(definition: str, value: float, l1_sensitivity: float,
                   l2_sensitivity: float | None = None) -> tuple[str, Fraction | float]:
    """The noise that spends ``value`` of a budget on a query: ``(distribution, exact scale)``.

    Pure ε-DP: the discrete Laplace of scale ``t = Δ₁/ε`` (:func:`laplace_scale_for_epsilon`;
    Ghosh, Roughgarden & Sundararajan 2009).  ρ-zCDP: the discrete Gaussian with
    ``σ² >= Δ₂²/(2ρ)`` exactly (:func:`gaussian_sigma_for_rho`; Canonne, Kamath & Steinke 2020,
    Thm. 4).  ``l2_sensitivity`` defaults to ``l1_sensitivity`` (disjoint counts, where one
    unit of privacy changes them by the same amount in both norms).

    Parameters
    ----------
    definition : {"pure", "zcdp"}
    value : float
        ε (pure) or ρ (zCDP) of this part, > 0.
    l1_sensitivity, l2_sensitivity : float
        Δ₁ and Δ₂ of the query vector, > 0.

    Returns
    -------
    (str, Fraction or float)
        ``("discrete_laplace", t)`` with ``t`` an exact Fraction, or
        ``("discrete_gaussian", σ)`` with ``σ`` a float.

    Examples
    --------
    >>> noise_for_cost("pure", 0.5, 1)
    ('discrete_laplace', Fraction(2, 1))
    >>> noise_for_cost("zcdp", 0.5, 1)
    ('discrete_gaussian', 1.0)
    """
    if definition == "pure":
        return "discrete_laplace", laplace_scale_for_epsilon(value, l1_sensitivity)
    if definition == "zcdp":
        l2 = l1_sensitivity if l2_sensitivity is None else l2_sensitivity
        return "discrete_gaussian", gaussian_sigma_for_rho(value, l2)
    raise ParameterError(
        f"Unknown privacy definition {definition!r}; use 'pure' (ε-DP) or 'zcdp' (ρ-zCDP)."
    )


def noise_variance(noise: str, scale: Any) -> float:
    """Exact variance of one draw of ``noise`` (``"discrete_laplace"`` or ``"discrete_gaussian"``).

    ``2q/(1 − q)²`` with ``q = e^{−1/t}`` for the discrete Laplace, ``Σ k² p(k)`` (slightly
    below σ²) for the discrete Gaussian (Canonne, Kamath & Steinke 2020, Prop. 19); see
    :mod:`dpcore.privacy.noise`.
    """
    facts = _exact(noise)
    if facts is None:
        raise ParameterError(f"Unknown noise {noise!r}; use 'discrete_laplace' or 'discrete_gaussian'.")
    return facts[0](scale)


#: The exact discrete families and their facts in :mod:`dpcore.privacy.noise`: (variance, interval).
_EXACT: dict[str, tuple[Callable[[Any], float], Callable[[Any, float], int]]] = {
    "discrete_laplace": (_noise.discrete_laplace_variance, _noise.discrete_laplace_interval),
    "discrete_gaussian": (_noise.discrete_gaussian_variance, _noise.discrete_gaussian_interval),
}


def _exact(noise: Any) -> tuple[Callable[[Any], float], Callable[[Any, float], int]] | None:
    """The facts of the exact family ``noise`` names (:data:`_EXACT`), None for anything else: the one
    rule :func:`noise_variance` and :func:`interval_half_width` dispatch by."""
    return _EXACT.get(noise) if isinstance(noise, str) else None


def cached_call(f: Any, *args: Any) -> Any:
    """``f(*args)`` through ``f``'s :func:`functools.lru_cache`, and uncached (``f.__wrapped__``) when an
    argument is unhashable: a list or a 0-d array is then checked (and refused, or used) as it would
    be without the cache.  The one place of this fallback, for the caches of public inputs that a
    caller may hand over unchecked (the scales of :func:`laplace_scale_for_epsilon`, the splits'
    weights).  A TypeError ``f`` raises for hashable arguments is raised as it is, not computed a
    second time.

    >>> @lru_cache
    ... def total(xs):
    ...     return sum(xs)
    >>> cached_call(total, (1, 2)), cached_call(total, [1, 2])
    (3, 3)
    """
    try:
        return f(*args)
    except TypeError:
        try:
            hash(args)
        except TypeError:
            return f.__wrapped__(*args)
        raise


# ---------------------------------------------------------------------------------------------
# the 95 % interval
# ---------------------------------------------------------------------------------------------


def _level(level: Any) -> float:
    out = _real(level, "The interval level", "Use a probability such as 0.95.")
    if not 0.0 < out < 1.0:
        raise ParameterError(f"The interval level must lie strictly between 0 and 1 (got {level!r}); use e.g. 0.95.")
    return out


def normal_z(level: float = 0.95, *, alpha: float | None = None) -> float:
    """The two-sided normal quantile ``z`` with ``P(|Z| <= z) = level`` for ``Z ~ N(0, 1)``.

    Computed from the standard library's :class:`statistics.NormalDist` (Wichura 1988,
    Algorithm AS 241) as ``−Φ⁻¹((1 − level)/2)``.  ``normal_z(0.95)`` is the familiar 1.95996…
    Give ``alpha = 1 − level`` instead when it is tiny (a Bonferroni share ``0.05/m``), so
    that ``1 − alpha`` is never rounded.

    >>> round(normal_z(0.95), 6), round(normal_z(0.99), 6), round(normal_z(alpha=1e-6), 4)
    (1.959964, 2.575829, 4.8916)
    """
    if alpha is not None:
        return -NormalDist().inv_cdf(_level(alpha) / 2.0)
    lv = _level(level)
    return _Z95 if lv == 0.95 else -NormalDist().inv_cdf((1.0 - lv) / 2.0)


_Z95 = -NormalDist().inv_cdf((1.0 - 0.95) / 2.0)


def interval_half_width(noise: str, scale: Any, level: float = 0.95) -> Any:
    """Half-width ``h`` of the ``level`` (default 95 %) interval ``value ± h`` of a noisy value.

    Two cases, one rule for every kind of data (and a conservative variant of the second):

    * **Exact** (``noise = "discrete_laplace"`` or ``"discrete_gaussian"``, ``scale`` = the
      discrete Laplace scale ``t`` or the discrete Gaussian σ): the error is *one* draw of that
      distribution, e.g. a raw noisy count.  ``h`` is the smallest integer with
      ``P(|X| <= h) >= level`` under the exact pmf (Ghosh, Roughgarden & Sundararajan 2009 for
      the discrete Laplace; Canonne, Kamath & Steinke 2020 for the discrete Gaussian),
      from :func:`dpcore.privacy.noise.discrete_laplace_interval` /
      :func:`~dpcore.privacy.noise.discrete_gaussian_interval`.
    * **Normal approximation** (``noise = "normal"``, ``scale`` = the standard deviation, a
      float or an array): the error is a sum or least-squares combination of many independent
      noisy values (a range query over several counts, a least-squares estimate, a TopDown or
      wavelet reconstruction), which the central limit theorem makes close to normal.  ``h =
      z·sd`` with ``z = normal_z(level)`` (1.95996… at 95 %), computed once from
      :class:`statistics.NormalDist`.  It is an approximation: for few Laplace terms the true
      95 % point lies somewhat higher (up to ``ln 20/√2 ≈ 2.12`` SDs for a single one).
    * **Laplace-dominated sum** (``noise = "laplace"``, ``scale`` = the SD): the exact quantile
      of one continuous Laplace variable with that SD, ``h = sd/√2 · ln(1/(1 − level))``
      (``ln 20/√2 ≈ 2.12`` SDs at 95 %), the upper end of the range for a weighted sum of
      Laplace terms in which one term may dominate (Xiao, Wang & Gehrke 2010, the Privelet
      error analysis).

    Parameters
    ----------
    noise : {"discrete_laplace", "discrete_gaussian", "normal", "laplace"}
    scale : Fraction, float or array
        ``t`` / σ of the single draw (exact cases), or the SD (``"normal"``, ``"laplace"``;
        0 gives 0).
    level : float
        Coverage, strictly between 0 and 1.

    Returns
    -------
    float or numpy.ndarray
        A float for the exact cases (an integer value) and for a scalar SD; an array for an
        array of SDs.

    Examples
    --------
    >>> interval_half_width("discrete_laplace", 1)   # P(|X| <= 3) ≈ 0.973 >= 0.95 > P(|X| <= 2) ≈ 0.927
    3.0
    >>> round(interval_half_width("normal", 10.0), 4)
    19.5996
    """
    facts = _exact(noise)
    if facts is not None:  # the level checked first (before the scale), with this module's message
        return float(facts[1](scale, _level(level)))
    if noise in ("normal", "laplace"):
        z = normal_z(level) if noise == "normal" else -math.log1p(-_level(level)) / math.sqrt(2.0)
        if isinstance(scale, np.ndarray):
            return z * scale.astype(np.float64, copy=False)
        return z * float(scale)
    raise ParameterError(
        f"Unknown noise {noise!r} for an interval; use 'discrete_laplace' or 'discrete_gaussian' "
        "(one exact draw) or 'normal' (a sum of many noisy values)."
    )


#: Largest FFT grid of :func:`discrete_sum_half_width` (2^21 points, 16 MB of float64);
#: about ``71·t·√m`` points are needed, so it is reached only for ``t·√m`` above about 29,000
#: (ε below 0.0022 for m = 4,096 cells of sensitivity 1).
_SUM_MAX_GRID = 1 << 21


def discrete_sum_half_width(noise: str, scale: Any, m: int, level: float = 0.95) -> float:
    """Smallest whole number ``k`` with ``P(|S_m| <= k) >= level`` for ``S_m`` the sum of ``m`` iid draws of
    the exact discrete ``noise`` (``"discrete_laplace"`` of scale ``t`` or ``"discrete_gaussian"`` of σ):
    the one rule for both families.

    The discrete Laplace (pmf ``(1 − q)/(1 + q)·q^|j|``, ``q = e^{−1/t}``): the normal ``± 1.96·√m·sd`` falls
    short of 95 % whenever its floor lies below the 95 % point (ε = 1, m = 3: 93.9 %; beyond
    :data:`_SUM_MAX_GRID` points the Laplace quantile rounded up, conservative there:
    benchmarks/matrix_laplace_sum_coverage.py).  The discrete Gaussian
    (Canonne, Kamath & Steinke 2020) is read the same way from the exact distribution of ``S_m`` on the
    integers: the pmf (:func:`dpcore.privacy.noise.discrete_gaussian_pmf`) raised to the m-th power in
    Fourier space on a grid of at least ``±(25·sd + 40·σ + 50)``, cached per ``(σ, m, level)``; ``m = 1``
    is :func:`interval_half_width` (``"discrete_gaussian"``).  A sum of discrete Gaussians is not a
    discrete Gaussian, and ``noisy ± 1.96·√m·sd`` covers only ``|S_m| <= ⌊1.96·√m·sd⌋`` (ρ = 1, σ = 1/√2,
    m = 2: 88.2 %; benchmarks/bottom_up_sum_coverage.py).  Above :data:`_SUM_MAX_GRID` points (sd beyond
    about 40,000) ``⌈z·sd⌉`` is returned (``z = normal_z(level)``; the sum is then normal to far below
    the step of one).

    >>> discrete_sum_half_width("discrete_laplace", 1, 1), interval_half_width("discrete_laplace", 1)
    (3.0, 3.0)
    >>> discrete_sum_half_width("discrete_laplace", 1, 3)   # P(|S| <= 4) ≈ 0.9387 < 0.95 <= P(|S| <= 5)
    5.0
    >>> discrete_sum_half_width("discrete_gaussian", 1, 1), interval_half_width("discrete_gaussian", 1)
    (2.0, 2.0)
    >>> discrete_sum_half_width("discrete_gaussian", 1, 2)   # P(|S| <= 2) ≈ 0.8807 < 0.95 <= P(|S| <= 3)
    3.0
    """
    single = {"discrete_laplace": (_noise.discrete_laplace_interval, _noise.discrete_laplace_variance),
              "discrete_gaussian": (_noise.discrete_gaussian_interval, _noise.discrete_gaussian_variance)}
    if noise not in single:
        raise ParameterError(f"Unknown noise {noise!r} for a sum's exact interval; use 'discrete_laplace' or "
                             "'discrete_gaussian'.")
    m = _count(m, "The number of draws m")
    lv = _level(level)
    one_draw, variance = single[noise]
    if m == 1:
        return float(one_draw(scale, lv))
    variance(scale)  # the scale checked (and refused) by noise's rule
    return float(cached_call(_sum_k, noise, scale, m, lv))


def discrete_sum_half_widths(noise: str, scale: Any, m: Any, level: float = 0.95) -> np.ndarray:
    """:func:`discrete_sum_half_width` for every entry of the array of draw counts ``m`` (each distinct m
    computed once), as a float array of ``m``'s shape.

    >>> discrete_sum_half_widths("discrete_gaussian", 1, np.array([1, 2, 2]))
    array([2., 3., 3.])
    """
    ms = np.asarray(m)
    uniq, inv = np.unique(ms, return_inverse=True)
    ks = np.array([discrete_sum_half_width(noise, scale, int(u), level) for u in uniq], dtype=np.float64)
    return ks[inv].reshape(ms.shape)


@lru_cache(maxsize=16384)  # ints only: a level of a large hierarchy has thousands of distinct m
def _sum_k(noise: str, scale: Any, m: int, level: float) -> int:
    """The smallest ``k`` with ``P(|S_m| <= k) >= level``, ``S_m`` the sum of ``m`` iid exact discrete
    ``noise`` draws of ``scale``: the pmf (from :mod:`dpcore.privacy.noise`) raised to the m-th power in
    Fourier space on the integers, taken circularly.  Beyond :data:`_SUM_MAX_GRID` points, the discrete
    Laplace's continuous quantile and the Gaussian's normal one, rounded up."""
    laplace = noise == "discrete_laplace"
    var1 = _noise.discrete_laplace_variance(scale) if laplace else _noise.discrete_gaussian_variance(scale)
    sd = math.sqrt(m * float(var1))
    half = 25.0 * sd + 40.0 * float(scale) + 50.0
    n = 1 << int(math.ceil(math.log2(2.0 * half + 1.0)))
    if n > _SUM_MAX_GRID:
        z = -math.log1p(-level) / math.sqrt(2.0) if laplace else normal_z(level)
        return int(math.ceil(z * sd))
    j = np.arange(n)
    j = np.minimum(j, n - j)  # |j| on the integers taken circularly
    pmf = _noise.discrete_laplace_pmf(j, scale) if laplace else _noise.discrete_gaussian_pmf(j, scale)
    dist = np.fft.irfft(np.fft.rfft(pmf) ** m, n)
    # P(|S| <= h) = P(0) + 2·Σ_{1..h} P(j), S symmetric
    cover = dist[0] + 2.0 * np.cumsum(dist[1:n // 2])
    if dist[0] >= level:
        return 0
    return int(np.flatnonzero(cover >= level)[0]) + 1  # cover[i] is P(|S| <= i + 1)
