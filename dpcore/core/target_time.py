"""The target-error planner over time: a budget per period, the horizon figure and the horizon cap.

"±20 trips at 90 % per tract and week, for 52 weeks": the planner of :mod:`dpcore.core.target`
finds the budget one period needs (every period is one release of the same plan); this module
adds what the programme of releases costs a person.  A person present in every one of ``P``
periods is in ``P`` releases, which compose sequentially (Bun & Steinke, TCC 2016, Lemma 1.7 for
zCDP; Dwork & Roth 2014, Thm. 3.14 for pure ε), so the **horizon figure** is

* zCDP: :math:`\\rho_H = \\sum_p \\rho_p = P \\rho`, read as (ε, δ)-DP by the conversion of
  Canonne, Kamath & Steinke (NeurIPS 2020, Prop. 12 / Cor. 13), also given by the classic bound
  :math:`\\varepsilon \\le \\rho_H + 2\\sqrt{\\rho_H \\ln(1/\\delta)}` (Bun & Steinke 2016, Prop. 1.3);
* pure DP: :math:`\\varepsilon_H = P \\varepsilon`.

Event and person-period units compose in parallel across periods (disjoint records), so their
ledger spends ``ρ`` per period; the horizon figure is the protection of a *person* who appears in
every period, which the curator must see next to it (Google's and Meta's user-day budgets say
nothing of a year).  A horizon cap (an office's annual budget for a population) refuses a plan
whose horizon figure would pass it, with the per-period budget the cap allows.

Worked example (the normal closed form ``σ = h/z``, ``ρ = Δ₂²/(2σ²)``): ±20 at 90 % with ``Δ₂ = 1`` needs ``σ = 20/1.645 =
12.2``, so ``ρ_week = 1/(2σ²) = 0.0034`` (ε ≈ 0.44 at δ = 1e-6 by the classic bound, whose
``2√(ρ ln(1/δ))`` term alone is the 0.43 sometimes quoted) and ``ρ_year = 52 × 0.0034 = 0.176``
(ε ≈ 3.3).  The planner's own figure uses the exact discrete
Gaussian quantile (an integer error of at most 20 with probability 90 %), a little smaller.

>>> from dpcore.privacy.budget import zcdp
>>> from dpcore.privacy.calibration import normal_z
>>> sigma = 20 / normal_z(0.90)
>>> rho = 1 / (2 * sigma**2)
>>> round(sigma, 1), round(rho, 4), round(52 * rho, 3)
(12.2, 0.0034, 0.176)
>>> h = horizon_figure(zcdp(rho), 52)
>>> round(h["epsilon_classic"], 1), round(horizon_figure(zcdp(rho), 1)["epsilon_classic"], 2)
(3.3, 0.44)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dpcore.core.record import approx_dp_reading
from dpcore.core.target import round_down
from dpcore.errors import BudgetError, ParameterError
from dpcore.privacy.budget import PrivacyCost

__all__ = ["TimePlan", "horizon_figure", "plan_over_time"]


def _count(periods: Any) -> int:
    if isinstance(periods, bool) or not isinstance(periods, int) or periods < 1:
        raise ParameterError(f"The number of periods must be a whole number of at least 1 (got {periods!r}), "
                             "e.g. --periods 52 for a year of weeks.")
    return periods


def horizon_figure(per_period: PrivacyCost, periods: int, delta: float = 1e-6) -> dict[str, Any]:
    """What ``periods`` releases at ``per_period`` each cost a person present in every one.

    >>> from dpcore.privacy.budget import pure, zcdp
    >>> h = horizon_figure(zcdp(0.5), 2)
    >>> h["definition"], h["value"], round(h["epsilon"], 3), round(h["epsilon_classic"], 3)
    ('zcdp', 1.0, 7.766, 8.434)
    >>> horizon_figure(pure(0.1), 30)["value"]
    3.0
    """
    P = _count(periods)
    total = per_period.value * P
    out: dict[str, Any] = {"definition": per_period.definition, "periods": P, "per_period": per_period.value,
                           "value": total, "delta": None, "epsilon": total if per_period.definition == "pure" else None,
                           "epsilon_classic": None, "epsilon_per_period": None,
                           "composition": "sequential over the periods for a person present in every period"}
    if per_period.definition == "zcdp":
        (reading,) = approx_dp_reading(PrivacyCost("zcdp", total), (delta,), classic=True)  # the records' reading
        (one,) = approx_dp_reading(per_period, (delta,))
        out.update(delta=float(delta), epsilon=reading["epsilon"], epsilon_classic=reading["epsilon_classic"],
                   epsilon_per_period=one["epsilon"])
    return out


@dataclass(frozen=True)
class TimePlan:
    """A per-period proposal (:class:`dpcore.core.target.Proposal`) over ``periods`` periods: the
    budget per period (``per_period``, the proposal's rounded total), the horizon figure, the cap."""

    per_period: PrivacyCost
    periods: int
    period_name: str
    horizon: dict[str, Any]
    cap: float | None

    @property
    def within_cap(self) -> bool | None:
        return None if self.cap is None else self.horizon["value"] <= self.cap * (1 + 1e-12)

    def to_dict(self) -> dict[str, Any]:
        return {"periods": self.periods, "period": self.period_name, "per_period": self.per_period.to_dict(),
                "horizon": self.horizon, "horizon_cap": self.cap, "within_cap": self.within_cap}

    def describe(self) -> str:
        """The lines the command line prints under the per-period proposal."""
        sym = "ρ" if self.per_period.definition == "zcdp" else "ε"
        h = self.horizon
        lines = [f"Per {self.period_name}: {sym} = {self.per_period.value:.4g}; {self.periods} {self.period_name}s "
                 f"at this rate: {sym} = {h['value']:.4g} for a person present in every {self.period_name} "
                 "(sequential composition)."]
        if h["delta"] is not None:
            one = h["epsilon_per_period"]
            lines.append(f"As (ε, δ)-DP at δ = {h['delta']:g}: ε ≈ {one:.3g} per {self.period_name}, ε ≈ "
                         f"{h['epsilon']:.3g} over the {self.periods} {self.period_name}s (classic bound "
                         f"{h['epsilon_classic']:.3g}).")
        if self.cap is not None:
            lines.append(f"Horizon cap {sym} = {self.cap:g}: within it ({h['value'] / self.cap:.0%} used).")
        return "\n".join(lines)


def plan_over_time(per_period: PrivacyCost, periods: int, *, horizon_cap: float | None = None,
                   delta: float = 1e-6, period_name: str = "period") -> TimePlan:
    """The budget per period, the horizon figure and the refusal of a plan that passes the cap.

    ``per_period`` is the budget one period needs (the planner's rounded proposal); ``horizon_cap``
    is in the same unit (ρ for zCDP, ε for pure DP).

    Raises
    ------
    BudgetError
        When ``periods × per_period`` passes ``horizon_cap``; the message gives the per-period
        budget the cap allows.

    >>> from dpcore.privacy.budget import zcdp
    >>> tp = plan_over_time(zcdp(0.0034), 52, horizon_cap=0.2, period_name="week")
    >>> round(tp.horizon["value"], 4), tp.within_cap
    (0.1768, True)
    >>> plan_over_time(zcdp(0.0034), 52, horizon_cap=0.1, period_name="week")
    Traceback (most recent call last):
    ...
    dpcore.errors.BudgetError: 52 weeks at ρ = 0.0034 each cost a person present in every week ρ = 0.1768, above \
the horizon cap ρ = 0.1. Within the cap each week may spend at most ρ = 0.001923: loosen the target error, release \
fewer weeks, or raise the cap (a recorded decision).
    """
    P = _count(periods)
    if horizon_cap is not None and not (isinstance(horizon_cap, (int, float)) and math.isfinite(horizon_cap)
                                        and horizon_cap > 0):
        raise ParameterError(f"The horizon cap must be a positive number (got {horizon_cap!r}).")
    h = horizon_figure(per_period, P, delta)
    tp = TimePlan(per_period, P, period_name, h, None if horizon_cap is None else float(horizon_cap))
    if tp.within_cap is False:
        sym = "ρ" if per_period.definition == "zcdp" else "ε"
        allowed = round_down(float(horizon_cap) / P)
        raise BudgetError(
            f"{P} {period_name}s at {sym} = {per_period.value:.4g} each cost a person present in every "
            f"{period_name} {sym} = {h['value']:.4g}, above the horizon cap {sym} = {horizon_cap:g}. Within the cap "
            f"each {period_name} may spend at most {sym} = {allowed:.4g}: loosen the target error, release fewer "
            f"{period_name}s, or raise the cap (a recorded decision).")
    return tp
