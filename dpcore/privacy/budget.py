"""Privacy definitions, their costs and conversions.

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

The ledger that adds the costs up and refuses overspending is :mod:`dpcore.privacy.ledger`;
splitting a budget over levels or phases, the noise scale of a cost and the 95 % interval of
a noisy value are in :mod:`dpcore.privacy.calibration`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from functools import lru_cache
from numbers import Real
from typing import Any, Literal, get_args

import numpy as np

from dpcore.errors import InputError, ParameterError

__all__ = [
    "APPROX_DP_DELTAS",
    "CAP_TOLERANCE",
    "MAX_EPSILON",
    "MAX_RHO",
    "Definition",
    "PrivacyCost",
    "approx_dp_to_zcdp",
    "pure",
    "zcdp",
    "zcdp_to_approx_dp",
]

Definition = Literal["pure", "zcdp"]

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

SYMBOL: dict[str, str] = {"pure": "ε", "zcdp": "ρ"}
DEFINITION_NAME: dict[str, str] = {"pure": "pure ε-DP", "zcdp": "ρ-zCDP"}


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


def float_down(q: Fraction) -> float:
    """The largest float that is <= q (budgets are rounded down, never up)."""
    f = float(q)
    if Fraction(f) > q:
        f = math.nextafter(f, -math.inf)
    return f


def float_up(q: Fraction) -> float:
    """The smallest float that is >= q."""
    f = float(q)
    if Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f


#: digits and minus as superscripts (powers of ten for people: 10⁻⁸)
SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def two_significant(x: float, *, down: bool = False) -> str:
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
        return f"{sign}{mantissa:f}×10{str(exponent).translate(SUPERSCRIPT)}"
    if exponent >= 1:
        return f"{sign}{int(rounded):,}"
    text = f"{rounded:f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return sign + text


def jsonable(obj: Any, where: str = "details") -> Any:
    """A JSON-able deep copy of ``obj`` (numpy scalars/arrays and tuples converted)."""
    if obj is None or isinstance(obj, str | bool):
        return obj
    if isinstance(obj, np.generic):
        return jsonable(obj.item(), where)
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
        return jsonable(obj.tolist(), where)
    if isinstance(obj, PrivacyCost):
        return obj.to_dict()
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for key, value in obj.items():
            if not isinstance(key, str):
                raise ParameterError(
                    f"{where} has the key {key!r}; keys must be text so the record can be saved as JSON."
                )
            out[key] = jsonable(value, f"{where}[{key!r}]")
        return out
    if isinstance(obj, list | tuple):
        return [jsonable(v, f"{where}[{i}]") for i, v in enumerate(obj)]
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
        return SYMBOL[self.definition]

    def to_zcdp(self) -> PrivacyCost:
        """The same cost read as ρ-zCDP.

        A pure ε-DP mechanism is ``ρ = ε²/2``-zCDP (Bun & Steinke 2016, Prop. 1.4).  ρ is
        rounded *up* to the next float, so the conversion never understates the cost.  A
        zCDP cost is returned unchanged.
        """
        if self.definition == "zcdp":
            return self
        return PrivacyCost("zcdp", float_up(Fraction(self.value) ** 2 / 2))

    def for_group(self, size: int) -> PrivacyCost:
        """The cost for a group of ``size`` units: ``size·ε`` under pure DP (Dwork & Roth 2014,
        Thm. 2.2), ``size²·ρ`` under zCDP (Bun & Steinke 2016, Prop. 1.9).

        >>> pure(0.5).for_group(2).label(), zcdp(0.1).for_group(2).label()
        ('ε = 1', 'ρ = 0.4')
        """
        if size == 1:
            return self
        factor = Fraction(size) if self.definition == "pure" else Fraction(size) ** 2
        return PrivacyCost(self.definition, float_up(Fraction(self.value) * factor))

    def label(self) -> str:
        """``"ε = 0.5"`` or ``"ρ = 0.02"``: the value with two significant digits."""
        return f"{self.symbol} = {two_significant(self.value)}"

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
# conversions
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


_GOLDEN = 0.5 * (3.0 - math.sqrt(5.0))
_SQRT_EPS = math.sqrt(2.2e-16)


def _bounded_brent(f: Any, a: float, b: float, xatol: float, maxiter: int = 500) -> tuple[float, bool]:
    """The minimum ``f(x)`` found on ``[a, b]`` by Brent's method (parabolic steps safeguarded by
    golden-section ones; Brent, "Algorithms for Minimization without Derivatives", 1973, ch. 5),
    and whether it converged (within ``maxiter`` evaluations, no NaN).

    The steps and the stopping rule are those of SciPy's ``minimize_scalar(method="bounded")``
    (``fminbound``), so the same points are evaluated and the same value is returned, without
    importing ``scipy.optimize`` (over a second of a command-line release's start-up).

    >>> fx, ok = _bounded_brent(lambda x: (x - 1.0) ** 2 + 3.0, -5.0, 5.0, 1e-12)
    >>> ok, abs(fx - 3.0) < 1e-15
    (True, True)
    """
    fulc = a + _GOLDEN * (b - a)
    nfc = xf = x = fulc
    rat = e = 0.0
    fx = f(x)
    num, fu = 1, np.inf
    ffulc = fnfc = fx
    xm = 0.5 * (a + b)
    tol1 = _SQRT_EPS * np.abs(xf) + xatol / 3.0
    tol2 = 2.0 * tol1
    converged = True
    while np.abs(xf - xm) > (tol2 - 0.5 * (b - a)):
        golden = True
        if np.abs(e) > tol1:  # try a parabola through the three best points
            golden = False
            r = (xf - nfc) * (fx - ffulc)
            q = (xf - fulc) * (fx - fnfc)
            p = (xf - fulc) * q - (xf - nfc) * r
            q = 2.0 * (q - r)
            if q > 0.0:
                p = -p
            q = np.abs(q)
            r, e = e, rat
            if (np.abs(p) < np.abs(0.5 * q * r)) and (p > q * (a - xf)) and (p < q * (b - xf)):
                rat = (p + 0.0) / q
                x = xf + rat
                if ((x - a) < tol2) or ((b - x) < tol2):
                    rat = tol1 * (np.sign(xm - xf) + ((xm - xf) == 0))
            else:
                golden = True
        if golden:
            e = (a - xf) if xf >= xm else (b - xf)
            rat = _GOLDEN * e
        x = xf + (np.sign(rat) + (rat == 0)) * np.maximum(np.abs(rat), tol1)
        fu = f(x)
        num += 1
        if fu <= fx:
            if x >= xf:
                a = xf
            else:
                b = xf
            fulc, ffulc = nfc, fnfc
            nfc, fnfc = xf, fx
            xf, fx = x, fu
        else:
            if x < xf:
                a = x
            else:
                b = x
            if (fu <= fnfc) or (nfc == xf):
                fulc, ffulc = nfc, fnfc
                nfc, fnfc = x, fu
            elif (fu <= ffulc) or (fulc == xf) or (fulc == nfc):
                fulc, ffulc = x, fu
        xm = 0.5 * (a + b)
        tol1 = _SQRT_EPS * np.abs(xf) + xatol / 3.0
        tol2 = 2.0 * tol1
        if num >= maxiter:
            converged = False
            break
    if np.isnan(xf) or np.isnan(fx) or np.isnan(fu):
        converged = False
    return float(fx), converged


@lru_cache(maxsize=1024)
def _zcdp_to_approx_dp(rho: float, delta: float) -> float:
    """Cached: a record reads the same ρ at several δ, and more than once (release.json, the review)."""
    log_inv_delta = -math.log(delta)
    values = _cks_objective(_T_GRID, rho, log_inv_delta)
    i = int(np.argmin(values))
    best = float(values[i])
    lo = _T_GRID[max(i - 1, 0)]
    hi = _T_GRID[min(i + 1, len(_T_GRID) - 1)]
    fun, ok = _bounded_brent(lambda t: _cks_objective(t, rho, log_inv_delta), float(lo), float(hi), 1e-12)
    if ok and math.isfinite(fun):
        best = min(best, fun)
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
