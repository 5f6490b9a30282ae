"""Privacy definitions, budget splits and the ledger that refuses overspending.

Two privacy definitions are supported:

* **pure ε-DP** (Dwork, McSherry, Nissim & Smith 2006): a mechanism ``M`` is ε-DP if
  ``P[M(x) ∈ S] <= exp(ε) · P[M(x') ∈ S]`` for all neighbours ``x, x'`` and sets ``S``.
  Releases compose *sequentially*: ε-costs add up (Dwork & Roth 2014, Thm. 3.14).
* **ρ-zCDP** (Bun & Steinke 2016, Def. 1.1): ``D_α(M(x) ‖ M(x')) <= ρ·α`` for every Rényi
  order ``α > 1``.  ρ-costs add up too (Bun & Steinke 2016, Lemma 1.7), and a pure ε-DP
  mechanism is ``ε²/2``-zCDP (Bun & Steinke 2016, Prop. 1.4), so pure releases can be
  charged to a zCDP budget.  The other way round is impossible: a ρ-zCDP mechanism (e.g.
  Gaussian noise) satisfies no pure ε-DP guarantee.

A curator who reads privacy as (ε, δ)-DP gets the ε implied by a ρ-zCDP budget from
:func:`zcdp_to_approx_dp` (Canonne, Kamath & Steinke 2020, Cor. 13) and the ρ that fits an
(ε, δ) target from :func:`approx_dp_to_zcdp`.

The :class:`Ledger` holds the budget cap of one dataset and every release charged to it.
Its arithmetic is exact (:class:`fractions.Fraction`), its check-and-record is atomic and
thread-safe, and a refused release changes nothing.
"""

from __future__ import annotations

import copy
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from numbers import Real
from typing import Any, Literal, get_args

import numpy as np

from dpcore.errors import BudgetError, InputError, ParameterError

__all__ = [
    "APPROX_DP_DELTAS",
    "CAP_TOLERANCE",
    "MAX_EPSILON",
    "MAX_RHO",
    "Definition",
    "Ledger",
    "LedgerEntry",
    "PrivacyCost",
    "SplitKind",
    "approx_dp_to_zcdp",
    "gaussian_sigma_for_rho",
    "laplace_scale_for_epsilon",
    "pure",
    "split",
    "split_custom",
    "split_geometric",
    "split_uniform",
    "zcdp",
    "zcdp_to_approx_dp",
]

Definition = Literal["pure", "zcdp"]
SplitKind = Literal["uniform", "geometric", "custom"]

#: Largest ε accepted for a pure cost or cap; beyond this DP protects nobody.
MAX_EPSILON = 100.0
#: Largest ρ accepted for a zCDP cost or cap: the ρ of a pure ``MAX_EPSILON`` release (ε²/2).
MAX_RHO = MAX_EPSILON**2 / 2
#: Relative slack of the cap check.  Budgets are decimal numbers typed by people (0.1, 0.3)
#: that binary floats cannot hold exactly: ten releases of ε = 0.1 add up *exactly* to
#: 1.0000000000000000555 > 1.0.  A total up to ``cap · (1 + CAP_TOLERANCE)`` is therefore
#: accepted; anything beyond is refused.  The slack (1e-9 relative) is far below any
#: meaningful difference in privacy loss.
CAP_TOLERANCE = Fraction(1, 10**9)
#: The δ values for which a zCDP ledger reports its (ε, δ)-DP reading.
APPROX_DP_DELTAS: tuple[float, ...] = (1e-5, 1e-6, 1e-7, 1e-9)

_MAX_PARTS = 1_000_000
_SYMBOL: dict[str, str] = {"pure": "ε", "zcdp": "ρ"}
_NAME: dict[str, str] = {"pure": "pure ε-DP", "zcdp": "ρ-zCDP"}


# ---------------------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------------------


def _real(value: Any, what: str, hint: str) -> float:
    """``value`` as a finite float, or a ParameterError naming ``what`` and ``hint``."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, Real | np.number):
        raise ParameterError(f"{what} must be a number (got {value!r}). {hint}")
    out = float(value)
    if not math.isfinite(out):
        raise ParameterError(f"{what} must be a finite number (got {value!r}). {hint}")
    return out


def _positive(value: Any, what: str, hint: str) -> float:
    out = _real(value, what, hint)
    if out <= 0:
        raise ParameterError(f"{what} must be greater than 0 (got {value!r}). {hint}")
    return out


def _delta(delta: Any) -> float:
    d = _real(delta, "δ", "Use a small probability such as 1e-6 (well below 1/number of people).")
    if not 0 < d < 1:
        raise ParameterError(
            f"δ must lie strictly between 0 and 1 (got {delta!r}). "
            "Use a small probability such as 1e-6 (well below 1/number of people)."
        )
    return d


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


def float_down(q: Fraction) -> float:
    """The largest float that is <= q (budgets are rounded down, never up)."""
    f = float(q)
    if Fraction(f) > q:
        f = math.nextafter(f, -math.inf)
    return f


def _float_up(q: Fraction) -> float:
    """The smallest float that is >= q."""
    f = float(q)
    if Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _two_significant(x: float, *, down: bool = False) -> str:
    """``x`` rounded to two significant digits for people: 0.5, 0.12, 12, 1,200, 3.4×10⁻⁵."""
    if x == 0:
        return "0"
    if not math.isfinite(x):
        return str(x)
    sign = "-" if x < 0 else ""
    d = Decimal(repr(abs(x)))
    exponent = d.adjusted()  # position of the leading digit
    mode = ROUND_FLOOR if down else ROUND_HALF_EVEN  # down: never suggest more than is left
    rounded = d.scaleb(-exponent).quantize(Decimal("0.1"), rounding=mode).scaleb(exponent)
    if rounded.adjusted() != exponent:  # 9.96 -> 10: the leading digit moved
        exponent = rounded.adjusted()
    if exponent < -4 or exponent >= 6:
        mantissa = rounded.scaleb(-exponent).normalize()
        return f"{sign}{mantissa:f}×10{str(exponent).translate(_SUPERSCRIPT)}"
    if exponent >= 1:
        return f"{sign}{int(rounded):,}"
    text = f"{rounded:f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return sign + text


def _jsonable(obj: Any, where: str = "details") -> Any:
    """A JSON-able deep copy of ``obj`` (numpy scalars/arrays and tuples converted)."""
    if obj is None or isinstance(obj, str | bool):
        return obj
    if isinstance(obj, np.generic):
        return _jsonable(obj.item(), where)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise ParameterError(
                f"{where} holds {obj!r}, which JSON cannot store; record a finite number or text."
            )
        return float(obj)
    if isinstance(obj, Fraction):
        return str(obj)
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist(), where)
    if isinstance(obj, PrivacyCost):
        return obj.to_dict()
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for key, value in obj.items():
            if not isinstance(key, str):
                raise ParameterError(
                    f"{where} has the key {key!r}; keys must be text so the record can be saved as JSON."
                )
            out[key] = _jsonable(value, f"{where}[{key!r}]")
        return out
    if isinstance(obj, list | tuple):
        return [_jsonable(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    raise ParameterError(
        f"{where} holds a {type(obj).__name__} ({obj!r}), which cannot be saved as JSON; "
        "record numbers, text, lists or dicts."
    )


# ---------------------------------------------------------------------------------------------
# privacy costs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PrivacyCost:
    """The privacy loss of a release (or a budget cap) under one definition.

    Parameters
    ----------
    definition : {"pure", "zcdp"}
        ``"pure"`` for ε-DP (Dwork et al. 2006), ``"zcdp"`` for ρ-zCDP (Bun & Steinke 2016).
    value : float
        ε for ``"pure"`` (``0 < ε <= 100``), ρ for ``"zcdp"`` (``0 < ρ <= 5000``, the ρ of
        ε = 100).  Validated on construction: anything else raises
        :class:`~dpcore.errors.ParameterError`.

    Notes
    -----
    Costs of one definition compose by addition: ε-DP releases by basic sequential
    composition (Dwork & Roth 2014, Thm. 3.14), zCDP releases by Bun & Steinke (2016,
    Lemma 1.7).
    """

    definition: Definition
    value: float

    def __post_init__(self) -> None:
        if self.definition not in get_args(Definition):
            raise ParameterError(
                f"Unknown privacy definition {self.definition!r}; use 'pure' (ε-DP) or 'zcdp' (ρ-zCDP)."
            )
        if self.definition == "pure":
            value = _positive(
                self.value, "The privacy budget ε", "Typical values are 0.05 to 2, e.g. ε = 0.5."
            )
            if value > MAX_EPSILON:
                raise ParameterError(
                    f"ε = {value:g} gives no meaningful protection; choose ε of at most "
                    f"{MAX_EPSILON:g} (typical values are 0.05 to 2)."
                )
        else:
            value = _positive(
                self.value, "The zCDP budget ρ", "Typical values are 0.001 to 2, e.g. ρ = 0.125."
            )
            if value > MAX_RHO:
                raise ParameterError(
                    f"ρ = {value:g} gives no meaningful protection; choose ρ of at most "
                    f"{MAX_RHO:g} (the ρ of ε = {MAX_EPSILON:g}; typical values are 0.001 to 2)."
                )
        object.__setattr__(self, "value", value)

    @property
    def symbol(self) -> str:
        """``"ε"`` or ``"ρ"``."""
        return _SYMBOL[self.definition]

    def to_zcdp(self) -> PrivacyCost:
        """The same cost read as ρ-zCDP.

        A pure ε-DP mechanism is ``ρ = ε²/2``-zCDP (Bun & Steinke 2016, Prop. 1.4).  ρ is
        rounded *up* to the next float, so the conversion never understates the cost.  A
        zCDP cost is returned unchanged.
        """
        if self.definition == "zcdp":
            return self
        return PrivacyCost("zcdp", _float_up(Fraction(self.value) ** 2 / 2))

    def label(self) -> str:
        """``"ε = 0.5"`` or ``"ρ = 0.02"``: the value with two significant digits."""
        return f"{self.symbol} = {_two_significant(self.value)}"

    def to_dict(self) -> dict[str, Any]:
        """``{"definition", "value", "label"}``; ``label`` is for people and ignored on reading."""
        return {"definition": self.definition, "value": self.value, "label": self.label()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PrivacyCost:
        """Inverse of :meth:`to_dict` (validates like the constructor)."""
        if not isinstance(d, Mapping) or "definition" not in d or "value" not in d:
            raise InputError(
                f"A privacy cost record needs 'definition' and 'value' (got {d!r}); "
                "it should look like {'definition': 'pure', 'value': 0.5}."
            )
        return cls(d["definition"], d["value"])

    def __str__(self) -> str:
        return self.label()


def pure(epsilon: float) -> PrivacyCost:
    """A pure ε-DP cost, ``0 < ε <= 100`` (ParameterError otherwise).

    Parameters
    ----------
    epsilon : float
        The privacy-loss bound ε of Dwork et al. (2006).
    """
    return PrivacyCost("pure", epsilon)


def zcdp(rho: float) -> PrivacyCost:
    """A ρ-zCDP cost (Bun & Steinke 2016, Def. 1.1), ``0 < ρ <= 5000`` (ParameterError otherwise).

    Parameters
    ----------
    rho : float
        The zCDP parameter ρ: ``D_α(M(x) ‖ M(x')) <= ρ·α`` for all ``α > 1``.
    """
    return PrivacyCost("zcdp", rho)


# ---------------------------------------------------------------------------------------------
# conversions and calibration
# ---------------------------------------------------------------------------------------------

# Search range of t = log(α − 1): α − 1 from e^-40 ≈ 4e-18 to e^40 ≈ 2e17 covers the optimum
# α ≈ 1 + sqrt(log(1/δ)/ρ) for every ρ and δ in practical use; any α gives a valid bound.
_T_GRID = np.linspace(-40.0, 40.0, 321)


def _cks_objective(t: np.ndarray | float, rho: float, log_inv_delta: float) -> np.ndarray | float:
    """CKS20 Cor. 13 as a function of t = log(α − 1), written to avoid cancellation.

    With ``e = α − 1 = exp(t)``:
    ``ρα + (log(1/δ) − log α)/(α − 1) + log(1 − 1/α)``
    ``= ρ(1 + e) + (log(1/δ) − log1p(e))/e − log1p(1/e)``.
    """
    e = np.exp(t)
    return rho * (1.0 + e) + (log_inv_delta - np.log1p(e)) / e - np.log1p(np.exp(-t))


def _classic_epsilon(rho: float, log_inv_delta: float) -> float:
    return rho + 2.0 * math.sqrt(rho * log_inv_delta)


def _zcdp_to_approx_dp(rho: float, delta: float) -> float:
    from scipy.optimize import minimize_scalar

    log_inv_delta = -math.log(delta)
    values = _cks_objective(_T_GRID, rho, log_inv_delta)
    i = int(np.argmin(values))
    best = float(values[i])
    lo = _T_GRID[max(i - 1, 0)]
    hi = _T_GRID[min(i + 1, len(_T_GRID) - 1)]
    res = minimize_scalar(
        _cks_objective,
        bounds=(float(lo), float(hi)),
        args=(rho, log_inv_delta),
        method="bounded",
        options={"xatol": 1e-12},
    )
    if res.success and math.isfinite(float(res.fun)):
        best = min(best, float(res.fun))
    # (0, δ)-DP is the strongest (ε, δ) statement; a negative infimum (tiny ρ) means just that.
    return max(0.0, min(best, _classic_epsilon(rho, log_inv_delta)))


def zcdp_to_approx_dp(rho: float, delta: float) -> float:
    """The ε of the (ε, δ)-DP guarantee implied by ρ-zCDP.

    Uses the conversion of Canonne, Kamath & Steinke (2020, Prop. 12 / Cor. 13):

    .. math::

        \\varepsilon = \\inf_{\\alpha > 1}\\; \\rho\\alpha
            + \\frac{\\log(1/(\\alpha\\delta)) + (\\alpha - 1)\\log(1 - 1/\\alpha)}{\\alpha - 1},

    minimised numerically (a grid over ``log(α − 1)`` refined with bounded Brent), and never
    larger than the classic bound ``ρ + 2·sqrt(ρ·log(1/δ))`` of Bun & Steinke (2016,
    Prop. 1.3): the result is the minimum of the two, and at least 0.  Every α gives a
    valid bound, so an inexact minimiser only makes the answer slightly conservative.

    Parameters
    ----------
    rho : float
        ρ > 0, finite.
    delta : float
        0 < δ < 1.

    Returns
    -------
    float
        ε >= 0; increasing in ρ and decreasing in δ (up to ~1e-12 relative numerical error).

    Examples
    --------
    >>> round(zcdp_to_approx_dp(0.5, 1e-6), 3)   # classic bound would say 5.757
    5.222
    """
    r = _positive(rho, "ρ", "Use the zCDP budget, e.g. ρ = 0.125.")
    return _zcdp_to_approx_dp(r, _delta(delta))


def approx_dp_to_zcdp(epsilon: float, delta: float) -> float:
    """The largest ρ whose (ε, δ)-DP reading (:func:`zcdp_to_approx_dp`) is at most ε.

    For curators who state their budget as (ε, δ): a ρ-zCDP budget of the returned ρ
    guarantees (ε, δ)-DP.  Found by bisection on ρ (the conversion is increasing in ρ),
    starting from the exact inverse of the classic bound,
    ``ρ₀ = (sqrt(log(1/δ) + ε) − sqrt(log(1/δ)))²``, which is always feasible.

    Parameters
    ----------
    epsilon : float
        ε > 0, finite.
    delta : float
        0 < δ < 1.

    Returns
    -------
    float
        ρ with ``zcdp_to_approx_dp(ρ, δ) <= ε`` and ``zcdp_to_approx_dp(ρ, δ)`` within about
        1e-12 relative of ε.
    """
    eps = _positive(epsilon, "ε", "Use the (ε, δ) target, e.g. ε = 1 with δ = 1e-6.")
    d = _delta(delta)
    log_inv_delta = -math.log(d)
    # Inverse of rho + 2 sqrt(rho L) = eps, written without cancellation.
    lo = eps**2 / (math.sqrt(log_inv_delta + eps) + math.sqrt(log_inv_delta)) ** 2
    while lo > 0 and _zcdp_to_approx_dp(lo, d) > eps:  # rounding only; never loops long
        lo /= 2
    hi = max(2 * lo, eps, 1e-300)
    while _zcdp_to_approx_dp(hi, d) <= eps:
        hi *= 2
    for _ in range(200):
        mid = lo + (hi - lo) / 2
        if mid <= lo or mid >= hi or hi - lo <= 1e-15 * hi:
            break
        if _zcdp_to_approx_dp(mid, d) <= eps:
            lo = mid
        else:
            hi = mid
    return lo


def zcdp_to_approx_dp_classic(rho: float, delta: float) -> float:
    """ε of ρ-zCDP at δ by the classic bound ``ε = ρ + 2√(ρ ln(1/δ))`` (Bun & Steinke 2016,
    Prop. 1.3; the InfTDA paper's Lemma 3).  Looser than :func:`zcdp_to_approx_dp`."""
    r = _positive(rho, "ρ", "Use the zCDP budget, e.g. ρ = 0.125.")
    return _classic_epsilon(r, -math.log(_delta(delta)))


def approx_dp_to_zcdp_classic(epsilon: float, delta: float) -> float:
    """ρ whose classic (ε, δ) reading is ε: ``ρ = (√(ln(1/δ) + ε) − √ln(1/δ))²``.

    The InfTDA paper's conversion; it reproduces the paper's numbers (ε = 1, δ = 1e-8 →
    ρ = 0.0132154).  :func:`approx_dp_to_zcdp` (CKS) gives a larger ρ for the same (ε, δ).
    """
    eps = _positive(epsilon, "ε", "Use the (ε, δ) target, e.g. ε = 1 with δ = 1e-8.")
    lg = -math.log(_delta(delta))
    # the same value written without cancellation: ε² / (√(L + ε) + √L)²
    return eps * eps / (math.sqrt(lg + eps) + math.sqrt(lg)) ** 2


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
    # Δ₂/sqrt(2ρ) in floats may round down by an ulp, which would spend a hair more than ρ:
    # step the float up until its exact square clears the exact bound σ² ≥ Δ₂²/(2ρ).
    target = Fraction(s) ** 2 / (2 * Fraction(r))
    sigma = s / math.sqrt(2.0 * r)
    while Fraction(sigma) ** 2 < target:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


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
    ``math.fsum``.  Parts with weight 0 are exactly 0.
    """
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


# ---------------------------------------------------------------------------------------------
# the ledger
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerEntry:
    """One release recorded in a :class:`Ledger`.

    Attributes
    ----------
    index : int
        Position in the ledger, from 0.
    label : str
        What was released, for people ("HTF release of trips.csv").
    cost : PrivacyCost
        The cost as stated by the mechanism.
    charged : float
        The cost in the ledger's unit (ε for a pure ledger, ρ for a zCDP ledger).
    time : str
        ISO 8601 time in UTC.
    details : dict
        JSON-able facts about the release (mechanism, parameters, split, ...).
    """

    index: int
    label: str
    cost: PrivacyCost
    charged: float
    time: str
    details: dict[str, Any] = field(default_factory=dict, hash=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able record of the entry."""
        return {
            "index": self.index,
            "label": self.label,
            "cost": self.cost.to_dict(),
            "charged": self.charged,
            "time": self.time,
            "details": copy.deepcopy(self.details),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LedgerEntry:
        """Inverse of :meth:`to_dict`."""
        try:
            return cls(
                index=int(d["index"]),
                label=str(d["label"]),
                cost=PrivacyCost.from_dict(d["cost"]),
                charged=float(d["charged"]),
                time=str(d["time"]),
                details=_jsonable(dict(d.get("details") or {})),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise InputError(
                f"A ledger entry record is incomplete or malformed ({err!r}); it needs index, "
                "label, cost, charged and time. Use a file written by Ledger.to_dict()."
            ) from None


class Ledger:
    """Privacy budget of one dataset: a cap set by the curator, every release recorded,
    overspending refused.

    Releases compose sequentially, so the ledger adds their costs: ε for a pure cap (basic
    composition, Dwork & Roth 2014, Thm. 3.14) or ρ for a zCDP cap (Bun & Steinke 2016,
    Lemma 1.7).  A pure ε release charged to a zCDP cap costs ``ε²/2`` (Bun & Steinke
    2016, Prop. 1.4); a zCDP release cannot be charged to a pure cap.

    The running total is exact (a sum of :class:`fractions.Fraction` of the float charges).
    A release is allowed when ``spent + charge <= cap · (1 + 1e-9)``: the relative slack
    :data:`CAP_TOLERANCE` lets decimal budgets that binary floats cannot hold exactly add up
    to the cap (ten releases of ε = 0.1 against a cap of 1.0).  Check and record happen
    under one lock, so concurrent spends (two browser tabs on one session) never exceed the
    cap, and a refused spend changes nothing.

    Parameters
    ----------
    cap : PrivacyCost
        The most this dataset may spend; its definition is the ledger's definition.
    dataset : str
        Name of the dataset, for the record.
    """

    def __init__(self, cap: PrivacyCost, dataset: str = "") -> None:
        self._lock = threading.Lock()
        self._cap = self._check_cap(cap)
        self.dataset = str(dataset)
        self._entries: list[LedgerEntry] = []
        self._spent = Fraction(0)

    # -- state -------------------------------------------------------------------------------
    @staticmethod
    def _check_cap(cap: Any) -> PrivacyCost:
        if not isinstance(cap, PrivacyCost):
            raise ParameterError(
                f"The budget cap must be a PrivacyCost (got {cap!r}); "
                "use dpcore.privacy.budget.pure(epsilon) or dpcore.privacy.budget.zcdp(rho)."
            )
        return cap

    @property
    def cap(self) -> PrivacyCost:
        """The cap set by the curator."""
        return self._cap

    @property
    def definition(self) -> Definition:
        """The ledger's definition (that of the cap): ``"pure"`` or ``"zcdp"``."""
        return self._cap.definition

    @property
    def spent(self) -> float:
        """Total charged so far, in the ledger's unit."""
        with self._lock:
            return float(self._spent)

    @property
    def remaining(self) -> float:
        """What is left under the cap (0 when the cap is used up), in the ledger's unit."""
        with self._lock:
            return max(0.0, float(Fraction(self._cap.value) - self._spent))

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        """The recorded releases, oldest first."""
        with self._lock:
            return tuple(self._entries)

    def _limit(self, cap: PrivacyCost | None = None) -> Fraction:
        return Fraction((cap or self._cap).value) * (1 + CAP_TOLERANCE)

    def _unit(self) -> str:
        return _SYMBOL[self.definition]

    # -- charging ----------------------------------------------------------------------------
    def charge_of(self, cost: PrivacyCost) -> float:
        """``cost`` in the ledger's unit.

        Pure ε in a zCDP ledger costs ``ρ = ε²/2`` (Bun & Steinke 2016, Prop. 1.4, rounded
        up); ρ-zCDP in a pure ledger raises :class:`~dpcore.errors.BudgetError`, because
        zCDP implies no pure ε-DP guarantee.
        """
        if not isinstance(cost, PrivacyCost):
            raise ParameterError(
                f"A release cost must be a PrivacyCost (got {cost!r}); "
                "use dpcore.privacy.budget.pure(epsilon) or dpcore.privacy.budget.zcdp(rho)."
            )
        if cost.definition == self.definition:
            return cost.value
        if self.definition == "zcdp":
            return cost.to_zcdp().value
        raise BudgetError(
            f"A ρ-zCDP release ({cost.label()}) cannot be charged to a pure ε-DP budget "
            f"({self._cap.label()}): zCDP mechanisms such as Gaussian noise give no pure ε "
            "guarantee. Set the dataset's budget as zCDP (ρ) instead (pure ε releases can "
            "still be charged to it, at ρ = ε²/2), or choose a pure ε mechanism."
        )

    def _refusal(self, cost: PrivacyCost, charge: float) -> BudgetError:
        u = self._unit()
        left = max(Fraction(0), Fraction(self._cap.value) - self._spent)
        asked = cost.label()
        if cost.definition != self.definition:
            asked += f" ({u} = {_two_significant(charge)} in this budget)"
        # The most spend() would accept now, in the release's own unit (ε = sqrt(2ρ) for a
        # pure release on a zCDP budget), rounded down for the suggestion.
        affordable = float(self._limit() - self._spent)
        if cost.definition != self.definition:
            affordable = math.sqrt(2 * max(0.0, affordable))
        if left > Fraction(self._cap.value) * CAP_TOLERANCE:
            fix = (
                f"Lower {cost.symbol} for this release to at most "
                f"{cost.symbol} = {_two_significant(affordable, down=True)}, or raise the "
                "dataset's cap if your privacy policy allows it."
            )
        else:
            fix = (
                "The budget is used up: raise the dataset's cap if your privacy policy allows "
                "it; otherwise nothing more can be released from this dataset."
            )
        return BudgetError(
            f"Not enough privacy budget left for this release: it asks for {asked}, but only "
            f"{u} = {_two_significant(float(left))} is left of the cap "
            f"{self._cap.label()} ({u} = {_two_significant(float(self._spent))} already "
            f"spent). {fix}"
        )

    def check(self, cost: PrivacyCost) -> None:
        """Raise the BudgetError that :meth:`spend` would raise for ``cost``, else do nothing."""
        charge = self.charge_of(cost)
        with self._lock:
            if self._spent + Fraction(charge) > self._limit():
                raise self._refusal(cost, charge)

    def can_spend(self, cost: PrivacyCost) -> bool:
        """Whether :meth:`spend` would accept ``cost`` now.

        False also when ``cost`` cannot be charged to this ledger at all (zCDP cost, pure
        cap); :meth:`check` gives the reason.
        """
        try:
            self.check(cost)
        except BudgetError:
            return False
        return True

    def spend(
        self, cost: PrivacyCost, label: str, details: Mapping[str, Any] | None = None
    ) -> LedgerEntry:
        """Charge ``cost`` and record the release, or refuse and change nothing.

        Parameters
        ----------
        cost : PrivacyCost
            What the release costs (ε or ρ).
        label : str
            What is released, for the record (an empty label becomes ``"release <n>"``).
        details : dict, optional
            JSON-able facts (mechanism, parameters, split); numpy scalars and tuples are
            converted, and a copy is stored.

        Returns
        -------
        LedgerEntry
            The recorded entry.

        Raises
        ------
        BudgetError
            If ``spent + charge > cap · (1 + 1e-9)``; the message says what is left and what
            was asked.  Also for a zCDP cost against a pure cap.
        ParameterError
            For a cost that is not a PrivacyCost, a non-text label or non-JSON details.
        """
        # Everything that can fail on the arguments is done before taking the lock.
        charge = self.charge_of(cost)
        if not isinstance(label, str):
            raise ParameterError(f"The release label must be text (got {label!r}).")
        if details is not None and not isinstance(details, Mapping):
            raise ParameterError(f"Release details must be a dict (got {details!r}).")
        clean = _jsonable(dict(details or {}))
        with self._lock:
            new_spent = self._spent + Fraction(charge)
            if new_spent > self._limit():
                raise self._refusal(cost, charge)
            index = len(self._entries)
            entry = LedgerEntry(
                index=index,
                label=label.strip() or f"release {index + 1}",
                cost=cost,
                charged=charge,
                time=datetime.now(UTC).isoformat(timespec="microseconds"),
                details=clean,
            )
            self._entries.append(entry)
            self._spent = new_spent
            return entry

    def set_cap(self, cap: PrivacyCost) -> None:
        """Change the cap.

        Raises BudgetError if the new cap is below what is already spent (with the same
        1e-9 relative slack as :meth:`spend`), or if it changes the definition after
        something was spent (the recorded charges would be in the wrong unit).
        """
        cap = self._check_cap(cap)
        with self._lock:
            if self._entries and cap.definition != self._cap.definition:
                raise BudgetError(
                    f"This dataset's budget is {_NAME[self._cap.definition]} and releases were "
                    f"already charged to it, so it cannot become {_NAME[cap.definition]}. "
                    f"Keep the definition and set a new {self._unit()} cap, or start a new "
                    "ledger for a new dataset."
                )
            if self._spent > self._limit(cap):
                raise BudgetError(
                    f"The new cap {cap.label()} is below what was already spent "
                    f"({self._unit()} = {_two_significant(float(self._spent))}); a cap can "
                    f"only be lowered to at least the amount spent. Choose a cap of at least "
                    f"{self._unit()} = {_float_up(self._spent)!r}."
                )
            self._cap = cap

    # -- records -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-able record: dataset, definition, cap, spent, remaining, entries.

        A zCDP ledger also reports its (ε, δ)-DP reading (Canonne, Kamath & Steinke 2020,
        Cor. 13) under ``"approx_dp"``: a list of ``{"delta", "epsilon_spent",
        "epsilon_cap"}`` for δ in 1e-5, 1e-6, 1e-7 and 1e-9.
        """
        with self._lock:
            cap = self._cap
            spent_exact = self._spent
            entries = [e.to_dict() for e in self._entries]
        spent = float(spent_exact)
        out: dict[str, Any] = {
            "dataset": self.dataset,
            "definition": cap.definition,
            "cap": cap.to_dict(),
            "spent": spent,
            "remaining": max(0.0, float(Fraction(cap.value) - spent_exact)),
            "tolerance": float(CAP_TOLERANCE),
            "entries": entries,
        }
        if cap.definition == "zcdp":
            out["approx_dp"] = [
                {
                    "delta": d,
                    "epsilon_spent": zcdp_to_approx_dp(spent, d) if spent > 0 else 0.0,
                    "epsilon_cap": zcdp_to_approx_dp(cap.value, d),
                }
                for d in APPROX_DP_DELTAS
            ]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Ledger:
        """Rebuild a ledger from :meth:`to_dict`.

        The charges are recomputed from the recorded costs and checked against the stored
        ones and against the cap, so an edited or corrupted record is refused
        (:class:`~dpcore.errors.InputError`) rather than silently trusted.
        """
        if not isinstance(d, Mapping) or "cap" not in d:
            raise InputError(
                "A ledger record needs at least 'cap' (and usually 'entries'); "
                "use a file written by Ledger.to_dict()."
            )
        ledger = cls(PrivacyCost.from_dict(d["cap"]), str(d.get("dataset", "")))
        raw_entries = d.get("entries") or []
        if not isinstance(raw_entries, list | tuple):
            raise InputError("The ledger record's 'entries' must be a list of release records.")
        spent = Fraction(0)
        for i, raw in enumerate(raw_entries):
            if not isinstance(raw, Mapping):
                raise InputError(f"Ledger entry {i} is not a record (got {raw!r}).")
            entry = LedgerEntry.from_dict(raw)
            if entry.index != i:
                raise InputError(
                    f"Ledger entry {i} has index {entry.index}; entries must be numbered 0, 1, 2, "
                    "... in order. The record was edited or is incomplete."
                )
            try:
                charge = ledger.charge_of(entry.cost)
            except BudgetError as err:
                raise InputError(f"Ledger entry {i} does not fit the cap: {err}") from None
            if charge != entry.charged:
                raise InputError(
                    f"Ledger entry {i} records a charge of {entry.charged!r} but its cost "
                    f"{entry.cost.label()} charges {charge!r}. The record was edited or corrupted."
                )
            spent += Fraction(charge)
            ledger._entries.append(entry)
        if spent > ledger._limit():
            raise InputError(
                f"The ledger record spends {_two_significant(float(spent))}, more than its cap "
                f"{ledger.cap.label()}. The record was edited or corrupted."
            )
        ledger._spent = spent
        return ledger

    # -- plumbing ----------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            state = self.__dict__.copy()
            state["_entries"] = list(self._entries)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"Ledger(cap={self._cap.label()!r}, dataset={self.dataset!r}, "
            f"spent={self.spent!r}, entries={len(self._entries)})"
        )
