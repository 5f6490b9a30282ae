"""The matrix mechanism's release: noise calibration, measurement and least-squares inference.

Answers a workload ``W`` through a strategy ``A``: measure ``y = Ax + z``, infer ``x̂ = A⁺y`` and
answer ``Wx̂`` with analytic standard errors (Li, Miklau, Hay, McGregor & Rastogi, "The matrix
mechanism: optimizing linear counting queries under differential privacy", VLDB Journal 24(6),
2015; Li & Miklau 2012, Sec. 2.3, Prop. 3), the strategy usually being the adaptive
design of Li & Miklau, "An adaptive mechanism for accurate query answering under differential
privacy", PVLDB 5(6), 2012 (:mod:`dpcore.estimate.matrix_design`).

* noise calibration (§3.2): analytic Gaussian (Balle & Wang, "Improving the Gaussian mechanism
  for differential privacy", ICML 2018), the paper's classic ``P = 2 ln(2/δ)/ε²`` (only for
  ε < 1, §7.2 P11) and ρ-zCDP; pure ε-DP falls back to an L1-suited strategy (§7.3);
* the release, with noise drawn only from :mod:`dpcore.privacy.noise` (the discrete Gaussian of
  Canonne, Kamath & Steinke, NeurIPS 2020, or the discrete Laplace).

Privacy (§3.1): :func:`release` does **not** charge a ledger: the caller charges ``result.cost``
(a :class:`~dpcore.privacy.budget.PrivacyCost`) to its :class:`~dpcore.privacy.ledger.Ledger`
before publishing anything.  Neighbours are add/remove one tuple (one cell changes by ±1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpcore import lazy
from dpcore.data.domain import prefix_sums, rect_sums_from_prefix
from dpcore.errors import InputError, ParameterError
from dpcore.estimate.matrix_design import l1_strategy
from dpcore.estimate.matrix_errors import query_variances_per_p
from dpcore.estimate.matrix_exact import check_units, grid_units
from dpcore.estimate.matrix_strategy import Strategy
from dpcore.estimate.matrix_workload import _MAX_EXPLICIT_ANSWERS, _MAX_MATRIX_ENTRIES, Workload
from dpcore.privacy.budget import PrivacyCost, pure, zcdp
from dpcore.privacy.calibration import gaussian_sigma_for_rho, laplace_scale_for_epsilon
from dpcore.privacy.noise import NoiseSource, discrete_gaussian_variance, discrete_laplace_variance

# SciPy on first use (dpcore.lazy): listing the mechanisms does not import it
special = lazy.module("scipy.special")

__all__ = [
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "Calibration",
    "calibrate",
    "check_data",
    "StrategyAnswers",
    "release",
]


# =============================================================================================
# Noise calibration (§3.2)
# =============================================================================================


def _ag_delta(sigma: float, eps: float, sens: float) -> float:
    """Exact δ of the Gaussian mechanism (Balle & Wang 2018, Thm 8):
    ``Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ)``; the second term in log space."""
    a, b = sens / (2.0 * sigma), eps * sigma / sens
    return float(special.ndtr(a - b) - math.exp(eps + special.log_ndtr(-a - b)))


def analytic_gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float = 1.0) -> float:
    """Smallest σ for which Gaussian noise is (ε, δ)-DP: the analytic Gaussian (Balle & Wang 2018).

    Bisection on σ over the exact condition ``δ(σ) <= δ`` (δ(σ) decreases in σ), written with
    ``scipy.special.ndtr``/``log_ndtr``.  Hand-written because neither numpy/scipy nor the
    installed OpenDP exposes this calibration (OpenDP calibrates Gaussian noise through zCDP,
    which is looser).  Valid for every ε > 0.  The returned σ is the upper end of the final
    bracket, so ``δ(σ) <= δ`` holds for it.
    """
    eps = _check_pos(epsilon, "ε")
    d = _check_delta(delta)
    sens = _check_pos(l2_sensitivity, "The L2 sensitivity Δ2")
    lo, hi = sens * 1e-6, sens * max(1.0, math.sqrt(2 * math.log(1.25 / d)) / eps) * 2
    while _ag_delta(hi, eps, sens) > d:
        hi *= 2
    while _ag_delta(lo, eps, sens) <= d and lo > 1e-300:
        lo /= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi or hi - lo <= 1e-14 * hi:
            break
        if _ag_delta(mid, eps, sens) <= d:
            hi = mid
        else:
            lo = mid
    return hi


def classic_gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float = 1.0) -> float:
    """The paper's calibration ``s = Δ2 sqrt(2 ln(2/δ)) / ε`` (Prop. 2), only for ε < 1 (§7.2 P11)."""
    eps = _check_pos(epsilon, "ε")
    d = _check_delta(delta)
    sens = _check_pos(l2_sensitivity, "The L2 sensitivity Δ2")
    if eps >= 1:
        raise ParameterError(
            f"The classic Gaussian calibration is only proven for ε < 1 (got ε = {eps:g}); use "
            "calibration='analytic'."
        )
    return sens * math.sqrt(2 * math.log(2 / d)) / eps


def _check_pos(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float | np.floating | np.integer) or not (
        math.isfinite(v) and v > 0
    ):
        raise ParameterError(f"{what} must be a finite number greater than 0 (got {v!r}).")
    return float(v)


def _check_delta(v: Any) -> float:
    d = _check_pos(v, "δ")
    if d >= 1:
        raise ParameterError(f"δ must lie strictly between 0 and 1 (got {v!r}); e.g. δ = 1e-6.")
    return d


# =============================================================================================
# Release (§1.5)
# =============================================================================================


@dataclass(frozen=True)
class StrategyAnswers:
    """The noisy answers of a strategy and the workload answers derived from them: the output of
    :func:`release` (not a core release: a mechanism wraps these in its
    :class:`~dpcore.core.mechanism.KindRelease`).  Charge ``cost`` to the dataset's Ledger before
    publishing.

    Attributes
    ----------
    answers : ndarray or None
        ``W x̂`` (``None`` when the workload has too many queries to list; use ``x_hat``).
    standard_errors : ndarray or None
        Analytic ``sqrt(v_i)`` of each answer (exact Gaussian/Laplace noise before post-processing).
    x_hat : ndarray
        Least-squares cell estimate ``A⁺ y``.  Only unbiased for cells when ``A`` has full column
        rank (§7.2 P9); do not present it as cell counts otherwise (``x_hat_unbiased``).
    noise_variance : float
        Exact per-answer variance of the noise added to each strategy query.
    cost : PrivacyCost
        What to charge: ``zcdp(ρ)`` for Gaussian noise (ρ = Δ²/(2σ²), rigorous for the discrete
        Gaussian, CKS20), ``pure(ε)`` for Laplace noise.
    guarantee : str
        The privacy statement in words (includes the (ε, δ) reading where applicable).
    strategy : Strategy
        The strategy actually used (an L1 strategy replaces an L2 one under pure ε-DP).
    notes : tuple of str
        Anything the curator must know (fallbacks, rounding slack).
    """

    answers: np.ndarray | None
    standard_errors: np.ndarray | None
    x_hat: np.ndarray
    x_hat_unbiased: bool
    noise_variance: float
    sensitivity: float
    noise_scale: float
    cost: PrivacyCost
    guarantee: str
    strategy: Strategy
    notes: tuple[str, ...] = ()


def _grid_exponent(sens: float, support: int, slack: float) -> int:
    """``k`` with ``sqrt(support)·2^k <= slack·Δ``: rounding to the grid adds at most that to Δ."""
    return math.floor(math.log2(slack * sens / math.sqrt(support)))


@dataclass(frozen=True)
class Calibration:
    """How the noise of a strategy's answers is calibrated (:func:`calibrate`).

    Attributes
    ----------
    pure : bool
        Pure ε-DP (discrete Laplace, L1) rather than Gaussian noise (L2).
    distribution : str
        ``"discrete_laplace"`` (exact integer noise on integer answers), ``"discrete_laplace_grid"``
        or ``"discrete_gaussian"`` (both on the grid ``2^grid_exponent``).
    scale : Fraction or float
        The Laplace scale ``b`` (exact :class:`~fractions.Fraction`) or the Gaussian ``σ``.
    grid_exponent : int or None
        ``k`` of the grid ``2^k`` the answers are rounded to; ``None`` for exact integer noise.
    variance : float
        Exact variance of the noise added to one strategy answer.
    sensitivity : float
        ``Δ1(A)`` or ``Δ2(A)`` of the strategy itself.
    effective_sensitivity : float
        The sensitivity the noise is calibrated to (``Δ`` plus the grid-rounding slack).
    cost : PrivacyCost
        What a release with this noise spends.
    guarantee : str
        The privacy statement in words.
    """

    pure: bool
    distribution: str
    scale: Fraction | float
    grid_exponent: int | None
    variance: float
    sensitivity: float
    effective_sensitivity: float
    cost: PrivacyCost
    guarantee: str


def calibrate(
    strategy: Strategy, *, epsilon: float | None = None, delta: float | None = None,
    rho: float | None = None, calibration: str = "analytic", grid_slack: float = 1e-6,
    integral_data: bool = True,
) -> Calibration:
    """The noise :func:`release` adds to ``strategy``'s answers, from public inputs only (§3.2).

    The one place the noise is calibrated: :func:`release` draws with it and previews (the
    mechanism's plan) read it, so the previewed variance is the drawn one.  Privacy as in
    :func:`release`: ``rho`` → ρ-zCDP; ``epsilon`` and ``delta`` → σ from the ``calibration``
    (analytic Balle–Wang or the paper's classic formula), charged as the zCDP it implies;
    ``epsilon`` alone → pure ε-DP with discrete Laplace noise and L1 sensitivity.  Integer
    strategies on integer data (``integral_data``) get exact integer Laplace noise; otherwise
    answers are rounded to the grid ``2^k`` and the sensitivity grows by the rounding slack
    (``Δ + s·2^k`` in L1, ``Δ + sqrt(s)·2^k`` in L2, ``s = max_j nnz(A[:, j])``), at most
    ``grid_slack·Δ``.
    """
    if rho is not None and (epsilon is not None or delta is not None):
        raise ParameterError("Give either rho (zCDP) or epsilon/delta, not both.")
    pure_mode = epsilon is not None and delta is None and rho is None
    if not pure_mode and rho is None and (epsilon is None or delta is None):
        raise ParameterError("Give rho, or epsilon and delta, or epsilon alone for pure ε-DP.")
    support = strategy.max_column_support
    if pure_mode:
        eps = _check_pos(epsilon, "ε")
        sens = strategy.l1_sensitivity
        integral = integral_data and all(
            np.all(f.A == np.round(f.A)) for f in (strategy.factors or (strategy,)))
        if integral:
            k, eff, dist = None, sens, "discrete_laplace"
            scale: Fraction | float = laplace_scale_for_epsilon(eps, sens)
            var = discrete_laplace_variance(scale)
        else:
            k = _grid_exponent(sens, support, grid_slack)
            eff = sens + support * 2.0**k  # L1: each changed value may move one more step
            dist = "discrete_laplace_grid"
            scale = laplace_scale_for_epsilon(eps, eff)
            var = discrete_laplace_variance(scale / Fraction(2) ** k) * 4.0**k
        return Calibration(
            True, dist, scale, k, float(var), float(sens), float(eff), pure(eps),
            f"pure ε-DP with ε = {eps:g} (discrete Laplace, L1 sensitivity {sens:.6g})",
        )
    sens = strategy.l2_sensitivity
    k = _grid_exponent(sens, support, grid_slack)
    eff = sens + math.sqrt(support) * 2.0**k
    if rho is not None:
        sigma = gaussian_sigma_for_rho(rho, eff)
        guarantee = f"ρ-zCDP with ρ = {rho:g}"
    else:
        if calibration == "analytic":
            sigma = analytic_gaussian_sigma(epsilon, delta, eff)
        elif calibration == "classic":
            sigma = classic_gaussian_sigma(epsilon, delta, eff)
        else:
            raise ParameterError("calibration must be 'analytic' or 'classic'.")
        # The (ε, δ) calibration is proven for continuous Gaussian noise; the noise drawn is the
        # discrete Gaussian on a grid, whose proven guarantee is the zCDP reading charged here.
        guarantee = (
            f"ρ-zCDP with ρ = Δ²/(2σ²), σ set by the {calibration} Gaussian calibration for "
            f"(ε = {epsilon:g}, δ = {delta:g}); read (ε, δ) through the zCDP conversion"
        )
    var = discrete_gaussian_variance(Fraction(sigma) / Fraction(2) ** k) * 4.0**k
    rho_used = eff * eff / (2.0 * sigma * sigma)
    return Calibration(
        False, "discrete_gaussian", float(sigma), k, float(var), float(sens), float(eff),
        zcdp(float(np.nextafter(rho_used, np.inf))), guarantee,
    )


def _prepare(
    workload: Workload, strategy: Strategy, x: np.ndarray, *, epsilon: float | None, delta: float | None,
    rho: float | None, calibration: str, grid_slack: float,
) -> tuple[np.ndarray, Strategy, Calibration, int, list[str]]:
    """What :func:`release` does before any noise: the checked data vector, the strategy answered
    (an L1 one under pure ε), its calibration, the grid exponent and the notes."""
    xv = np.asarray(x, dtype=np.float64).reshape(-1)
    if xv.size != workload.n:
        raise InputError(f"The data vector has {xv.size} cells but the workload has {workload.n}.")
    if not np.all(np.isfinite(xv)):
        raise InputError("The data vector contains NaN or infinity; counts must be finite numbers.")
    if strategy.n != workload.n:
        raise ParameterError(f"Strategy has {strategy.n} cells but the workload has {workload.n}.")
    integral = bool(np.all(xv == np.round(xv)))
    # checked before the lookup, the key built from the checked floats: ``True == 1.0`` would
    # otherwise find the entry of ε = 1.0 and skip the refusal a fresh call gives
    epsilon, delta, rho = _check_budget(epsilon, delta, rho)
    key = ("answered", workload.content_hash(), epsilon, delta, rho, calibration, grid_slack, integral)
    used, cal, k, notes = strategy.derived(key, lambda: _answered(
        workload, strategy, epsilon=epsilon, delta=delta, rho=rho, calibration=calibration,
        grid_slack=grid_slack, integral=integral))
    return xv, used, cal, k, list(notes)


def _check_budget(
    epsilon: Any, delta: Any, rho: Any,
) -> tuple[float | None, float | None, float | None]:
    """The privacy mode's checks and the checked floats of ``epsilon``, ``delta`` and ``rho``
    (``None`` kept): ρ alone, ε and δ, or ε alone."""
    if rho is not None and (epsilon is not None or delta is not None):
        raise ParameterError("Give either rho (zCDP) or epsilon/delta, not both.")
    if rho is None and epsilon is None:
        raise ParameterError("Give rho, or epsilon and delta, or epsilon alone for pure ε-DP.")
    if rho is not None:
        return None, None, _check_pos(rho, "ρ")
    return _check_pos(epsilon, "ε"), (None if delta is None else _check_delta(delta)), None


def _answered(
    workload: Workload, strategy: Strategy, *, epsilon: float | None, delta: float | None, rho: float | None,
    calibration: str, grid_slack: float, integral: bool,
) -> tuple[Strategy, Calibration, int, tuple[str, ...]]:
    """The data-free part of :func:`_prepare` (kept per strategy, :meth:`Strategy.derived`): the
    strategy answered (an L1 one under pure ε), its calibration, the grid exponent and the notes;
    ``integral`` says whether the counts are whole numbers."""
    notes: list[str] = []
    pure_mode = epsilon is not None and delta is None and rho is None
    if pure_mode and strategy.norm != "l1":
        strategy = strategy.derived(("l1_strategy", workload.content_hash()), lambda: l1_strategy(workload))
        notes.append(
            "Pure ε-DP: the L2-optimised strategy was replaced by an L1 strategy "
            f"({strategy.kind}{'-' + strategy.factors[0].kind if strategy.factors else ''}); "
            "Eigen-Design strategies have large L1 sensitivity (Li & Miklau 2012, Sec. 3.5)."
        )
    if not pure_mode and strategy.norm != "l2":
        notes.append("Gaussian noise on an L1-designed strategy: valid but not error-optimal.")
    cal = calibrate(strategy, epsilon=epsilon, delta=delta, rho=rho, calibration=calibration,
                    grid_slack=grid_slack, integral_data=integral)
    # round(Ax / 2^k) of the exact product, not of fl(Ax): the calibration's one grid step per
    # changed answer holds only for the exact value (issue 18, item 3c; matrix_exact).  The noise
    # is drawn on the grid and added to those units in integers; the float y is post-processing.
    k = 0 if cal.distribution == "discrete_laplace" else cal.grid_exponent
    return strategy, cal, int(k), tuple(notes)


def check_data(
    workload: Workload, strategy: Strategy, x: np.ndarray, *, epsilon: float | None = None,
    delta: float | None = None, rho: float | None = None, calibration: str = "analytic",
    grid_slack: float = 1e-6,
) -> None:
    """Every refusal of :func:`release` that depends on ``x``, without drawing noise.

    Run it before the budget is charged (issue 18, item 7): the data vector's size and finiteness,
    and the strategy answers' size on the noise grid (:func:`dpcore.estimate.matrix_exact.check_units`,
    which refuses every ``x`` whose units :func:`~dpcore.estimate.matrix_exact.grid_units` could
    refuse).  When it passes, :func:`release` with the same arguments refuses nothing for its data.
    It reads ``x`` only through ``|A| |x|`` and publishes nothing: a refusal tells the curator, who
    holds the data, that the counts are beyond about ``2^62`` grid units.

    >>> from dpcore.estimate.matrix_workload import prefix_workload
    >>> from dpcore.estimate.matrix_strategy import identity_strategy
    >>> check_data(prefix_workload(2), identity_strategy(2), np.array([3.0, 4.0]), rho=0.5)
    >>> check_data(prefix_workload(2), identity_strategy(2), np.array([3.0, 2.0**62]), rho=0.5)
    Traceback (most recent call last):
    ...
    dpcore.errors.ParameterError: The strategy answers are too large for the noise grid 2^-20 (more than 62 bits); \
the counts are too large for this mechanism at this size.
    """
    xv, strategy, _, k, _ = _prepare(workload, strategy, x, epsilon=epsilon, delta=delta, rho=rho,
                                     calibration=calibration, grid_slack=grid_slack)
    check_units(strategy, xv, k)


def release(
    workload: Workload, strategy: Strategy, x: np.ndarray, source: NoiseSource, *,
    epsilon: float | None = None, delta: float | None = None, rho: float | None = None,
    calibration: str = "analytic", grid_slack: float = 1e-6,
) -> StrategyAnswers:
    """Answer the workload with the matrix mechanism: ``y = Ax + z``, ``x̂ = A⁺y``, ``W x̂`` (§1.5).

    Privacy (choose one): ``rho`` → ρ-zCDP Gaussian; ``epsilon`` and ``delta`` → (ε, δ)-DP
    Gaussian calibrated by ``calibration`` (``"analytic"`` Balle–Wang, ``"classic"`` the paper's
    formula for ε < 1); ``epsilon`` alone → pure ε-DP with discrete Laplace noise on an L1
    strategy (an L2 strategy is replaced by :func:`l1_strategy`, and ``notes`` says so, §7.3).

    Noise comes from ``source`` (:mod:`dpcore.privacy.noise`) with the calibration of :func:`calibrate`:
    Gaussian noise is the discrete Gaussian on the grid ``2^k``
    (:meth:`NoiseSource.gaussian_on_grid`), whose rounding can move each of the
    ``s = max_j nnz(A[:, j])`` changed answers by one grid step; the noise is calibrated to
    ``Δ + sqrt(s)·2^k <= Δ (1 + grid_slack)``.  Integer strategies on integer counts get exact
    integer Laplace noise with no slack.

    The caller charges ``result.cost`` to its Ledger; this function never touches a ledger.
    ``x`` is the private count vector (row-major over ``workload.shape``); nothing here reads
    it except the single product ``Ax`` (and whether its entries are whole numbers).
    """
    xv, strategy, cal, k, notes = _prepare(workload, strategy, x, epsilon=epsilon, delta=delta, rho=rho,
                                           calibration=calibration, grid_slack=grid_slack)
    units = grid_units(strategy, xv, k)
    zero = np.zeros(units.size)
    if cal.distribution == "discrete_laplace":
        z = np.asarray(source.discrete_laplace(cal.scale, units.size), dtype=np.int64)
    elif cal.distribution == "discrete_laplace_grid":
        z = np.rint(np.ldexp(source.laplace_on_grid(zero, cal.scale, k), -k)).astype(np.int64)
        notes.append(f"Real-valued strategy answers were rounded to the grid 2^{cal.grid_exponent}.")
    else:
        z = np.rint(np.ldexp(source.gaussian_on_grid(zero, cal.scale, k), -k)).astype(np.int64)
    y = np.ldexp((units + z).astype(np.float64), k)
    var = cal.variance
    x_hat = strategy.solve(y)
    # Answers and analytic standard errors: v_i = Var(z) · w_i X⁺ w_iᵀ
    answers = ses = None
    listable = workload.m <= _MAX_EXPLICIT_ANSWERS and (
        bool(workload.factors) or workload.rects is not None or workload.W is not None
        or workload.m * workload.n <= _MAX_MATRIX_ENTRIES)
    if listable:
        per_p = strategy.derived(("query_variances_per_p", workload.content_hash()),
                                 lambda: query_variances_per_p(workload, strategy))  # data-free: once a plan
        v = per_p / strategy.sensitivity() ** 2 * var
        ses = np.sqrt(v)
        if workload.factors and len(workload.factors) == 2:
            X = x_hat.reshape(workload.shape)
            answers = (workload.factors[0].matrix() @ X @ workload.factors[1].matrix().T).reshape(-1)
        elif workload.rects is not None and len(workload.shape) == 2:
            # rectangle sums from 2-D prefix sums: never the dense m × n matrix, which
            # Workload.matrix() refuses above 50 M entries (1,000 rectangles on 256 × 256)
            answers = rect_sums_from_prefix(prefix_sums(x_hat.reshape(workload.shape)), workload.rects)
        else:
            answers = workload.matrix() @ x_hat
    else:
        notes.append(f"{workload.m:,} queries are too many to list; answer them from x_hat.")
    full_rank = strategy.full_rank
    return StrategyAnswers(
        answers=answers, standard_errors=ses, x_hat=x_hat, x_hat_unbiased=full_rank,
        noise_variance=float(var), sensitivity=float(cal.effective_sensitivity if not cal.pure else cal.sensitivity),
        noise_scale=float(cal.scale), cost=cal.cost, guarantee=cal.guarantee, strategy=strategy,
        notes=tuple(notes),
    )
