"""Cumulative series by the square-root factorisation (dpcore.estimate.prefix_sums)."""

from __future__ import annotations

import itertools
import math
from math import comb

import numpy as np
import pytest

from dpcore.errors import ParameterError
from dpcore.estimate.prefix_sums import (
    coefficients,
    compare_variances,
    factor_matrix,
    plan_prefix_sums,
    recommend,
    release_prefix_sums,
    sensitivity,
)
from dpcore.privacy.noise import NoiseSource


@pytest.mark.parametrize("T", [1, 2, 7, 52, 365])
def test_factor_squares_to_the_prefix_matrix(T: int) -> None:
    c = coefficients(T)
    assert np.allclose(c, [comb(2 * k, k) / 4**k for k in range(T)], rtol=1e-12)
    C = factor_matrix(T)
    assert np.array_equal(C, np.tril(C))  # lower-triangular: online
    assert np.allclose(C @ C, np.tril(np.ones((T, T))), atol=1e-12)


@pytest.mark.parametrize(("T", "w"), [(6, 1), (6, 2), (6, 3), (7, 4), (8, 8)])
def test_sensitivity_is_the_worst_set_of_periods(T: int, w: int) -> None:
    """Δ₂ = ‖C·1_P‖ is largest for the first w periods (brute force over every set of w periods),
    and no change of at most Δ per period in w periods exceeds it (random changes)."""
    C = factor_matrix(T)
    worst = max(np.linalg.norm(C[:, list(P)].sum(axis=1)) for P in itertools.combinations(range(T), w))
    assert sensitivity(T, w) == pytest.approx(worst, rel=1e-12)
    rng = np.random.default_rng(T * 10 + w)
    for _ in range(200):
        P = rng.choice(T, size=w, replace=False)
        delta = rng.normal(size=(w, 5))
        delta /= np.linalg.norm(delta, axis=1, keepdims=True) / rng.uniform(0, 2.0, size=(w, 1))
        change = C[:, P] @ delta  # periods × cells
        assert np.linalg.norm(change) <= sensitivity(T, w, per_period=2.0) * (1 + 1e-12)


def test_sensitivity_of_one_record_is_the_first_column() -> None:
    c = coefficients(52)
    assert sensitivity(52) == pytest.approx(math.sqrt(np.sum(c**2)))
    assert sensitivity(52, per_period=3.0) == pytest.approx(3 * sensitivity(52))


def test_the_notes_table() -> None:
    """Multiples of 1/(2ρ): YTD 3.4 / 5.4 / 8.7 and one period 2.36 / 2.96 / 3.75 at T = 12 / 52 / 365."""
    for T, ytd, per in ((12, 3.4, 2.36), (52, 5.4, 2.96), (365, 8.7, 3.75)):
        cmp = compare_variances(T)
        assert round(cmp["factorisation"]["ytd"], 1) == ytd
        assert round(cmp["factorisation"]["period_max"], 2) == per
        assert cmp["leaves"]["ytd"] == T and cmp["leaves"]["period_max"] == 1
    assert compare_variances(52, rho=0.5)["factorisation"]["ytd"] == pytest.approx(5.3939, abs=1e-4)


def test_recommend_by_statistic() -> None:
    assert recommend("period", 52)["method"] == "leaves"
    assert recommend("cumulative", 52)["method"] == "factorisation"
    assert recommend("window", 52, window=4)["method"] == "factorisation"
    assert recommend("window", 52, window=3)["method"] == "leaves"
    assert recommend("cumulative", 52, periods_per_person=52)["method"] == "leaves"
    assert "5.39/(2ρ)" in recommend("cumulative", 52)["reason"]
    with pytest.raises(ParameterError, match="statistic is one of"):
        recommend("total", 52)


def test_plan_charges_at_most_rho() -> None:
    p = plan_prefix_sums(52, 0.25, cells=1000)
    assert p.effective_sensitivity ** 2 / (2 * p.sigma**2) <= 0.25
    assert p.effective_sensitivity <= p.sensitivity * (1 + 1e-6)
    assert p.noise_variance == pytest.approx(p.sigma**2, rel=1e-9)
    assert p.cost.definition == "zcdp" and p.cost.value == 0.25


def test_online_rows_use_only_the_past() -> None:
    """Changing period t's counts leaves every prefix before t unchanged (same noise)."""
    x = np.arange(20.0).reshape(10, 2)
    a = release_prefix_sums(x, 0.5, NoiseSource(seed=3)).prefix
    x2 = x.copy()
    x2[6:] += 5
    b = release_prefix_sums(x2, 0.5, NoiseSource(seed=3)).prefix
    assert np.array_equal(a[:6], b[:6]) and not np.array_equal(a[6:], b[6:])


def test_ytd_variance_matches_its_formula_over_2000_runs() -> None:
    """T = 52: the year-to-date error variance within 10 % of σ²·Σ_{k<52} c_k² over 2,000 seeded runs.

    The estimate V̂ = mean(e²) (the truth is known, so the mean is 0) of n normal errors has
    relative SD √(2/n) = 3.2 % at n = 2,000 (V̂/V ~ χ²_n/n; the discrete Gaussian on a grid 2^-23
    with σ ≈ 1.5 is normal to far below that), so ±10 % is ±3.2 SDs, a false failure in about 2 of
    1,000 seeds; a wrong formula (e.g. summed periods: 52/(2ρ)·... or a missing Σc²) misses by far more."""
    n, T, rho = 2000, 52, 0.5
    assert 0.10 >= 3 * math.sqrt(2 / n)
    rng = np.random.default_rng(11)
    truth = rng.poisson(30, size=(T, 1)).astype(float)
    src = NoiseSource(seed=2024)
    ytd = np.empty(n)
    last = np.empty(n)
    for r in range(n):
        rel = release_prefix_sums(truth, rho, src)
        ytd[r] = rel.prefix[-1, 0] - truth.sum()
        last[r] = rel.periods[-1, 0] - truth[-1, 0]
    plan = rel.plan
    v_ytd = float(np.mean(ytd**2))
    assert v_ytd == pytest.approx(plan.prefix_variance[-1], rel=0.10)
    assert float(plan.prefix_variance[-1]) * 2 * rho == pytest.approx(5.394, abs=1e-3)
    assert v_ytd < 0.2 * T / (2 * rho)  # summed independent weeks: 52/(2ρ), ten times more
    assert float(np.mean(last**2)) == pytest.approx(plan.period_variance[-1], rel=0.10)
    assert abs(np.mean(ytd)) < 4 * math.sqrt(plan.prefix_variance[-1] / n)  # unbiased


@pytest.mark.parametrize(("kw", "needle"), [
    ({"counts": np.ones((0, 2))}, "periods × cells"), ({"counts": np.full((3, 1), np.nan)}, "NaN"),
    ({"counts": np.ones((3, 1)), "periods_per_person": 4}, "more periods"),
])
def test_bad_inputs(kw: dict, needle: str) -> None:
    counts = kw.pop("counts")
    with pytest.raises(ParameterError, match=needle):
        release_prefix_sums(counts, 0.5, NoiseSource(seed=0), **kw)


def test_a_person_in_every_period_is_exposed_by_the_factorisation() -> None:
    """Releasing ρ by the factorisation protects one record (or person-period) at ρ, but a person present
    in all T periods spends ρ·‖C·1‖²/‖c‖² (≈ 2T²/(π Σc²)), against T·ρ for T releases of the leaves."""
    cmp = compare_variances(52)
    C = factor_matrix(52)
    assert cmp["factorisation"]["horizon_rho_multiple"] == pytest.approx(
        np.sum(C.sum(axis=1) ** 2) / np.sum(C[:, 0] ** 2))
    assert cmp["leaves"]["horizon_rho_multiple"] == 52
    assert cmp["factorisation"]["horizon_rho_multiple"] > 10 * 52
