"""Tests for dpcore.privacy.noise: exact discrete samplers and their distribution facts.

Statistical tests use fixed seeds and a significance level fixed up front
(ALPHA = 0.001); tolerances on moments are derived from standard errors.
"""

from __future__ import annotations

import ast
import decimal
import math
import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from dpcore.errors import ParameterError
from dpcore.privacy import noise, noise_tables
from dpcore.privacy.noise import (
    NoiseSource,
    discrete_gaussian_interval,
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
    discrete_laplace_interval,
    discrete_laplace_pmf,
    discrete_laplace_variance,
    real_noise_epsilon,
    secure_source,
)

ALPHA = 0.001  # significance level for every goodness-of-fit test, fixed before running
N_FAST = 200_000
N_EXACT = 3_000
LAPLACE_SCALES = [0.5, 3, 20]
GAUSS_SIGMAS = [0.7, 3, 25]


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def _support_radius(kind: str, param: float) -> int:
    """Radius beyond which the pmf is negligible (< 1e-17)."""
    if kind == "laplace":
        return math.ceil(45 * param) + 10
    return math.ceil(10 * param) + 10


def _pmf(kind: str, ks: np.ndarray, param) -> np.ndarray:
    if kind == "laplace":
        return discrete_laplace_pmf(ks, param)
    return discrete_gaussian_pmf(ks, param)


def _bins(kind: str, param, n: int) -> tuple[int, np.ndarray]:
    """Central half-width K and expected counts for bins (-inf,-K-1], -K..K, [K+1,inf).

    K is the largest value with every expected count (tails included) >= 5.
    """
    m = _support_radius(kind, param)
    ks = np.arange(0, m + 1)
    p = _pmf(kind, ks, param)
    big = np.flatnonzero(n * p >= 5)
    k = int(big.max())
    while k > 0 and n * p[k + 1 :].sum() < 5:
        k -= 1
    central = n * _pmf(kind, np.arange(-k, k + 1), param)
    tail = n * p[k + 1 :].sum()
    return k, np.concatenate(([tail], central, [tail]))


def _binned_counts(x: np.ndarray, k: int) -> np.ndarray:
    return np.bincount(np.clip(x, -k - 1, k + 1) + k + 1, minlength=2 * k + 3)


def _chi2_pvalue(x: np.ndarray, kind: str, param) -> float:
    k, expected = _bins(kind, param, x.size)
    observed = _binned_counts(x, k)
    assert observed.sum() == x.size
    assert np.all(expected >= 5)
    stat = float(np.sum((observed - expected) ** 2 / expected))
    return float(stats.chi2.sf(stat, expected.size - 1))


def _moments(kind: str, param) -> tuple[float, float]:
    """Exact variance and fourth moment from the pmf."""
    m = _support_radius(kind, param)
    ks = np.arange(-m, m + 1, dtype=np.float64)
    p = _pmf(kind, ks, param)
    return float(np.sum(ks**2 * p)), float(np.sum(ks**4 * p))


def _draw(kind: str, param, n: int, seed: int) -> np.ndarray:
    src = NoiseSource(seed)
    if kind == "laplace":
        return src.discrete_laplace(param, n)
    return src.discrete_gaussian(param, n)


CASES = [("laplace", s) for s in LAPLACE_SCALES] + [("gauss", s) for s in GAUSS_SIGMAS]
SEEDS = {case: 1000 + i for i, case in enumerate(CASES)}


@pytest.fixture(scope="module")
def fast_samples() -> dict:
    return {case: _draw(*case, N_FAST, SEEDS[case]) for case in CASES}


# ---------------------------------------------------------------------------
# distribution of the samplers
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def test_chi_square_fast_path(fast_samples, case):
    x = fast_samples[case]
    assert x.dtype == np.int64 and x.shape == (N_FAST,)
    assert _chi2_pvalue(x, *case) >= ALPHA


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def test_chi_square_exact_slow_path(monkeypatch, case):
    calls = {"geometric": 0, "bernoulli": 0}
    real_geo, real_ber = noise._geometric_exact, noise._uniform_below_exp

    def geo(*args, **kwargs):
        calls["geometric"] += 1
        return real_geo(*args, **kwargs)

    def ber(*args, **kwargs):
        calls["bernoulli"] += 1
        return real_ber(*args, **kwargs)

    monkeypatch.setattr(noise, "_FORCE_EXACT", True)
    monkeypatch.setattr(noise, "_geometric_exact", geo)
    monkeypatch.setattr(noise, "_uniform_below_exp", ber)
    x = _draw(*case, N_EXACT, SEEDS[case] + 500)
    # every geometric draw went through the exact path (at least one per draw: a Laplace draw is a
    # sign and one geometric, a Gaussian draw one or more Laplace proposals)
    assert calls["geometric"] >= N_EXACT
    assert _chi2_pvalue(x, *case) >= ALPHA


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def test_chi_square_small_batches(case):
    """Batches below the lookup tables' size take the logarithm path (proposals and coins): the
    same distribution (40 batches of 2,500, one chi-square test at ALPHA)."""
    src = NoiseSource(SEEDS[case] + 900)
    kind, param = case
    draw = src.discrete_laplace if kind == "laplace" else src.discrete_gaussian
    assert 2_500 < noise_tables.TABLE_MIN_BATCH
    x = np.concatenate([draw(param, 2_500) for _ in range(40)])
    assert _chi2_pvalue(x, *case) >= ALPHA


def test_laplace_table_matches_the_exact_geometric():
    """Every decided bucket of the proposal table holds floor(-t ln U) for both ends of the bucket
    (checked with 60-digit decimals), signed, and the negative zero is marked for rejection."""
    for t in [Fraction(1, 2), Fraction(10), Fraction(1000)]:
        tab = noise_tables.laplace_table(t)
        half = 1 << 16
        rng = np.random.default_rng(3)
        for j in rng.choice(np.arange(1, half), 300, replace=False).tolist() + [half - 1]:
            g = int(tab[j])
            if g == noise_tables.UNDECIDED:
                continue
            with decimal.localcontext() as ctx:
                ctx.prec = 60
                tt = decimal.Decimal(t.numerator) / decimal.Decimal(t.denominator)
                ends = [decimal.Decimal(j) / half, (decimal.Decimal(j + 1) / half) - decimal.Decimal(10) ** -50]
                floors = {int((-tt * e.ln()).to_integral_value(rounding=decimal.ROUND_FLOOR)) for e in ends}
            assert floors == {g}
            assert int(tab[half + j]) == (noise_tables.REJECT if g == 0 else -g)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def test_mean_and_variance(fast_samples, case):
    kind, param = case
    x = fast_samples[case].astype(np.float64)
    n = x.size
    var, mu4 = _moments(kind, param)
    formula = discrete_laplace_variance(param) if kind == "laplace" else discrete_gaussian_variance(param)
    assert formula == pytest.approx(var, rel=1e-9)
    assert abs(x.mean()) <= 5 * math.sqrt(var / n)
    se_var = math.sqrt((mu4 - var**2) / n)
    assert abs(x.var() - var) <= 5 * se_var


def test_large_and_small_scales():
    src = NoiseSource(3)
    n = 50_000
    for scale in [0.1, 1e4]:
        x = src.discrete_laplace(scale, n).astype(np.float64)
        var = discrete_laplace_variance(scale)
        q = math.exp(-1 / scale)
        # 4th moment of the discrete Laplace: 2q(1+10q+q^2)/(1-q)^4
        mu4 = 2 * q * (1 + 10 * q + q * q) / (1 - q) ** 4
        assert abs(x.var() - var) <= 5 * math.sqrt((mu4 - var**2) / n)
    x = src.discrete_laplace(0.1, n)
    # P(X = 0) = tanh(5) ~ 0.99991
    assert np.mean(x == 0) == pytest.approx(math.tanh(5), abs=5 * math.sqrt(1e-4 / n))
    for sigma in [0.1, 1e4]:
        x = src.discrete_gaussian(sigma, n).astype(np.float64)
        var = discrete_gaussian_variance(sigma)
        # the discrete Gaussian's excess kurtosis is ~0 for large sigma; bound mu4 by 3 var^2 + var
        assert abs(x.var() - var) <= 5 * math.sqrt((2 * var**2 + var) / n) + 1e-12


# ---------------------------------------------------------------------------
# the exact slow path in isolation
# ---------------------------------------------------------------------------


def _dec_exp(x: Fraction, prec: int = 80) -> decimal.Decimal:
    with decimal.localcontext() as ctx:
        ctx.prec = prec
        return (decimal.Decimal(x.numerator) / decimal.Decimal(x.denominator)).exp()


def test_uniform_below_exp_refines_and_is_exact():
    src = NoiseSource(11)
    for gamma in [Fraction(1, 3), Fraction(7, 2), Fraction(1, 10**6), Fraction(50)]:
        e = Fraction(_dec_exp(-gamma))
        # a 53-bit prefix whose interval contains exp(-gamma): undecidable without refining
        u = _LazyPrefix.containing(e)
        assert Fraction(u.num, 2**53) < e < Fraction(u.num + 1, 2**53)
        result = noise._uniform_below_exp(src, u, gamma)
        assert u.bits > 53  # more bits were drawn
        lo, hi = Fraction(u.num, 2**u.bits), Fraction(u.num + 1, 2**u.bits)
        assert hi <= e or lo >= e  # the refined interval is decided against (80-digit) e
        assert result == (hi <= e)
    assert noise._uniform_below_exp(src, noise._LazyUniform(2**53 - 1, 53), Fraction(0)) is True
    # huge gamma: decided at once by the certified 2^(-1.44 gamma) bound, no Decimal.exp
    assert noise._uniform_below_exp(src, noise._LazyUniform(1, 53), Fraction(10**12, 7)) is False


class _LazyPrefix:
    @staticmethod
    def containing(x: Fraction) -> noise._LazyUniform:
        return noise._LazyUniform(math.floor(x * 2**53), 53)


def test_exp_bounds_are_rigorous():
    for gamma in [Fraction(1, 7), Fraction(123, 10), Fraction(10**4, 3)]:
        for prec in [30, 50]:
            lo, hi = noise._exp_neg_bounds(gamma, prec)
            e = Fraction(_dec_exp(-gamma, prec + 40))
            assert lo < e < hi
            # width: a few ulps, times (gamma + 1) from rounding -gamma itself
            assert (hi - lo) <= e * (gamma + 1) * Fraction(1, 10 ** (prec - 2))


@pytest.mark.parametrize("t", [Fraction(1, 2), Fraction(3), Fraction(20), Fraction(10**4)])
def test_geometric_exact_ignores_bad_hints(t):
    """The exact search returns floor(-t ln U) whatever the float hints say."""
    src = NoiseSource(5)
    rng_u = (NoiseSource(6).random_uint64(60) >> np.uint64(11)).tolist()
    for i, u in enumerate(rng_u):
        unif = noise._LazyUniform(int(u) | 1, 53)
        lo_hint, hi_hint = [(0, None), (10**6, None), (0, 0), (7, 3)][i % 4]
        g = noise._geometric_exact(src, unif, t, lo_hint, hi_hint)
        with decimal.localcontext() as ctx:
            ctx.prec = 60
            mid = decimal.Decimal(2 * unif.num + 1) / decimal.Decimal(2 ** (unif.bits + 1))
            tt = decimal.Decimal(t.numerator) / decimal.Decimal(t.denominator)
            expected = int((-tt * mid.ln()).to_integral_value(rounding=decimal.ROUND_FLOOR))
        assert g == expected


def test_geometric_handles_zero_prefix():
    # u = 0: the float interval reaches U = 0 (z = +inf); the exact path must cope
    src = NoiseSource(9)
    g = noise._geometric_exact(src, noise._LazyUniform(0, 53), Fraction(2), 0, None)
    assert g >= math.floor(2 * 53 * math.log(2))


# ---------------------------------------------------------------------------
# distribution facts
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [0.1, 0.5, 3, 20, 1000])
def test_laplace_pmf_sums_to_one(scale):
    m = _support_radius("laplace", scale)
    assert discrete_laplace_pmf(np.arange(-m, m + 1), scale).sum() == pytest.approx(1, abs=1e-12)
    assert discrete_laplace_pmf([0], scale)[0] == pytest.approx(math.tanh(0.5 / scale))


@pytest.mark.parametrize("sigma", [0.1, 0.7, 3, 25, 2e4])
def test_gaussian_pmf_sums_to_one(sigma):
    m = math.ceil(40 * sigma) + 5
    assert discrete_gaussian_pmf(np.arange(-m, m + 1), sigma).sum() == pytest.approx(1, abs=1e-12)
    var = discrete_gaussian_variance(sigma)
    assert var <= sigma**2 * (1 + 1e-12)
    if sigma >= 3:
        assert var == pytest.approx(sigma**2, rel=1e-12)


def _dec_laplace_abs_cdf(h: int, scale: float) -> decimal.Decimal:
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        t = decimal.Decimal(scale)
        q = (-1 / t).exp()
        return 1 - 2 * q ** (h + 1) / (1 + q)


def _dec_gauss_abs_cdf(sigma: float) -> callable:
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        two_s2 = 2 * decimal.Decimal(sigma) ** 2
        m = math.ceil(40 * sigma) + 5
        w = [(-decimal.Decimal(k * k) / two_s2).exp() for k in range(m + 1)]
        z = w[0] + 2 * sum(w[1:])

        def cdf(h: int) -> decimal.Decimal:
            with decimal.localcontext() as c2:
                c2.prec = 50
                return (w[0] + 2 * sum(w[1 : h + 1])) / z

        return cdf


@pytest.mark.parametrize("level", [0.5, 0.9, 0.95, 0.99, 0.999])
def test_laplace_interval_definition(level):
    lev = decimal.Decimal(level)
    for scale in [0.1, 0.5, 3, 20, 1000]:
        h = discrete_laplace_interval(scale, level)
        assert isinstance(h, int) and h >= 0
        assert _dec_laplace_abs_cdf(h, scale) >= lev
        if h > 0:
            assert _dec_laplace_abs_cdf(h - 1, scale) < lev


@pytest.mark.parametrize("sigma", [0.1, 0.7, 3, 25])
def test_gaussian_interval_definition(sigma):
    cdf = _dec_gauss_abs_cdf(sigma)
    for level in [0.5, 0.9, 0.95, 0.99]:
        lev = decimal.Decimal(level)
        h = discrete_gaussian_interval(sigma, level)
        assert isinstance(h, int) and h >= 0
        assert cdf(h) >= lev
        if h > 0:
            assert cdf(h - 1) < lev


def test_gaussian_interval_large_sigma():
    sigma = 2e4  # above the direct-summation limit: continuity-corrected erf form
    ks = np.arange(0, math.ceil(40 * sigma))
    w = np.exp(-(ks.astype(np.float64) ** 2) / (2 * sigma**2))
    cdf = (w[0] + 2 * np.concatenate(([0.0], np.cumsum(w[1:])))) / (w[0] + 2 * w[1:].sum())
    for level in [0.9, 0.95]:
        h = discrete_gaussian_interval(sigma, level)
        assert cdf[h] >= level > cdf[h - 1]


def test_real_noise_epsilon():
    assert real_noise_epsilon(1.0, 10.0, -10) == float((1 + Fraction(1, 1024)) / 10)
    assert real_noise_epsilon(2.5, 0.5, 0) == (2.5 + 1) / 0.5
    assert real_noise_epsilon(0.0, Fraction(1, 3), 2) == 12.0
    with pytest.raises(ParameterError):
        real_noise_epsilon(-1.0, 1.0, 0)
    with pytest.raises(ParameterError):
        real_noise_epsilon(1.0, 0.0, 0)


# ---------------------------------------------------------------------------
# randomness source
# ---------------------------------------------------------------------------


def test_seeded_sources_are_reproducible():
    a, b = NoiseSource(42), NoiseSource(42)
    assert a.seeded and b.seeded
    np.testing.assert_array_equal(a.random_uint64(10), b.random_uint64(10))
    np.testing.assert_array_equal(a.discrete_laplace(3, 100), b.discrete_laplace(3, 100))
    np.testing.assert_array_equal(a.discrete_gaussian(3, 100), b.discrete_gaussian(3, 100))
    np.testing.assert_array_equal(
        a.laplace_on_grid([1.0, 2.5], 1.0, -4), b.laplace_on_grid([1.0, 2.5], 1.0, -4)
    )
    assert not np.array_equal(NoiseSource(1).discrete_laplace(10, 100), NoiseSource(2).discrete_laplace(10, 100))


def test_secure_sources_differ():
    a, b = secure_source(), NoiseSource()
    assert not a.seeded and not b.seeded
    assert not np.array_equal(a.random_uint64(4), b.random_uint64(4))
    assert not np.array_equal(a.discrete_laplace(10, 1000), b.discrete_laplace(10, 1000))
    assert not np.array_equal(a.discrete_gaussian(10, 1000), b.discrete_gaussian(10, 1000))


def test_secure_source_uses_urandom_not_numpy_rng(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("numpy RNG used by the secure source")

    for name in [
        "default_rng", "Generator", "PCG64", "RandomState", "random", "rand", "randn",
        "randint", "laplace", "normal", "geometric", "uniform", "seed", "bytes",
    ]:
        monkeypatch.setattr(np.random, name, forbidden)
    calls = []
    real_urandom = os.urandom

    def counting_urandom(n):
        calls.append(n)
        return real_urandom(n)

    monkeypatch.setattr(os, "urandom", counting_urandom)
    src = secure_source()
    x = src.discrete_laplace(10, 1000)
    assert x.shape == (1000,)
    # one bulk read: a 32-bit word (sign and uniform prefix) per proposal, 1000 / P(accept) proposals
    # (P(accept) = (1 + e^-0.1) / 2) and room for their spread
    assert len(calls) == 1 and 4 * 1000 < calls[0] <= 4.5 * 1000
    src.discrete_gaussian(10, 1000)
    src.laplace_on_grid(np.zeros(10), 1.0, -5)
    src.gaussian_on_grid(np.zeros(10), 1.0, -5)
    assert len(calls) > 1
    with pytest.raises(AssertionError):
        NoiseSource(1)  # a seeded source does need numpy (PCG64), proving the patch bites


def test_no_float_samplers_in_module():
    """No textbook float sampler, global numpy RNG or clock seeding in the code."""
    tree = ast.parse(Path(noise.__file__).read_text())
    forbidden = {
        "laplace", "normal", "standard_normal", "exponential", "standard_exponential",
        "gumbel", "default_rng", "RandomState", "random_sample", "time", "time_ns",
    }
    used = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not used & forbidden


# ---------------------------------------------------------------------------
# grid noise for reals
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("k", [-6, 0, 3])
def test_laplace_on_grid_outputs_multiples(k):
    src = NoiseSource(21)
    values = np.array([[0.1, -3.7], [1e6 + 0.3, 2.0**-20]])
    for out in [src.laplace_on_grid(values, 2.0, k), src.gaussian_on_grid(values, 2.0, k)]:
        assert out.shape == values.shape and out.dtype == np.float64
        units = np.ldexp(out, -k)
        assert np.array_equal(units, np.round(units))


def test_laplace_on_grid_noise_distribution():
    # values on the grid: out - value is 2^k times discrete Laplace(scale / 2^k)
    k, scale = -2, 1.5  # scale / 2^k = 6 exactly
    src = NoiseSource(23)
    values = np.full(50_000, 0.75)
    units = np.ldexp(src.laplace_on_grid(values, scale, k) - 0.75, -k).astype(np.int64)
    assert _chi2_pvalue(units, "laplace", 6) >= ALPHA


def test_gaussian_on_grid_noise_distribution():
    # values on the grid: out - value is 2^k times discrete Gaussian(sigma / 2^k)
    k, sigma = -2, 0.75  # sigma / 2^k = 3 exactly
    src = NoiseSource(24)
    values = np.full(50_000, -1.25)
    units = np.ldexp(src.gaussian_on_grid(values, sigma, k) + 1.25, -k).astype(np.int64)
    assert _chi2_pvalue(units, "gauss", 3) >= ALPHA


def test_on_grid_rounds_to_nearest():
    src = NoiseSource(2)
    # huge scale relative to noise is not needed: check rounding through the tiny-noise limit
    out = src.laplace_on_grid(np.full(2000, 0.74), Fraction(1, 64), -1)  # grid 0.5, t/g = 1/32
    # P(noise = 0) = tanh(16) ~ 1; 0.74 rounds to 0.5
    assert np.mean(out == 0.5) > 0.99


def test_on_grid_rejects_bad_values():
    src = NoiseSource(1)
    for bad in [[1.0, float("nan")], [float("inf")], ["a"]]:
        with pytest.raises(ParameterError):
            src.laplace_on_grid(bad, 1.0, 0)
    with pytest.raises(ParameterError):
        src.laplace_on_grid([1e300], 1.0, -10)
    with pytest.raises(ParameterError):
        src.gaussian_on_grid([1.0], 1.0, 1.5)
    with pytest.raises(ParameterError):
        src.gaussian_on_grid([1.0], 0.0, 0)


# ---------------------------------------------------------------------------
# parameter validation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, 0.0, -2.5, float("nan"), float("inf"), "3", None, True, 1e20])
def test_bad_scale_raises(bad):
    src = NoiseSource(1)
    with pytest.raises(ParameterError):
        src.discrete_laplace(bad, 10)
    with pytest.raises(ParameterError):
        src.discrete_gaussian(bad, 10)
    with pytest.raises(ParameterError):
        discrete_laplace_variance(bad)
    with pytest.raises(ParameterError):
        discrete_gaussian_pmf([0], bad)


def test_error_message_says_what_to_fix():
    with pytest.raises(ParameterError, match="must be > 0"):
        NoiseSource(1).discrete_laplace(-1, 5)


@pytest.mark.parametrize("bad", [-1, 2.5, (3, -1), "10", None, True])
def test_bad_size_raises(bad):
    with pytest.raises(ParameterError):
        NoiseSource(1).discrete_laplace(1.0, bad)


@pytest.mark.parametrize("bad", [0, 1, -0.5, 1.5, float("nan")])
def test_bad_level_raises(bad):
    with pytest.raises(ParameterError):
        discrete_laplace_interval(1.0, bad)
    with pytest.raises(ParameterError):
        discrete_gaussian_interval(1.0, bad)


@pytest.mark.parametrize("bad", [-1, 1.5, "1"])
def test_bad_seed_raises(bad):
    with pytest.raises(ParameterError):
        NoiseSource(bad)


def test_sizes_and_exact_parameters():
    src = NoiseSource(4)
    for method in [src.discrete_laplace, src.discrete_gaussian]:
        empty = method(2.0, 0)
        assert empty.dtype == np.int64 and empty.shape == (0,)
        assert method(2.0, (3, 4)).shape == (3, 4)
        assert method(Fraction(1, 3), 5).dtype == np.int64
        assert method(np.float64(2.0), np.int64(5)).shape == (5,)
    assert src.random_uint64(0).shape == (0,)
    assert src.random_uint64(3).dtype == np.uint64


# ---------------------------------------------------------------------------
# cross-check against OpenDP
# ---------------------------------------------------------------------------


def test_matches_opendp_discrete_laplace():
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    scale, n = 5, 20_000
    meas = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=scale)
    assert meas.map(1) == pytest.approx(1 / scale)  # same scale convention: eps = 1 / t
    theirs = np.asarray(meas([0] * n), dtype=np.int64)
    ours = NoiseSource(77).discrete_laplace(scale, n)
    # two-sample chi-square over bins with expected count >= 5 per sample
    k, _ = _bins("laplace", scale, n)
    table = np.vstack([_binned_counts(ours, k), _binned_counts(theirs, k)])
    assert stats.chi2_contingency(table).pvalue >= ALPHA
    # OpenDP's empirical variance against our exact variance formula
    var = discrete_laplace_variance(scale)
    q = math.exp(-1 / scale)
    mu4 = 2 * q * (1 + 10 * q + q * q) / (1 - q) ** 4
    assert abs(theirs.astype(np.float64).var() - var) <= 5 * math.sqrt((mu4 - var**2) / n)


def test_each_fact_is_kept_once_for_every_caller():
    """The variance and interval of a scale are computed once, in dpcore.privacy.noise_facts, whoever
    asks (the noise module, the calibration, a float or the Fraction it equals), and are the same floats."""
    from dpcore.privacy import calibration, noise_facts

    t = Fraction(7919, 1024)  # a scale no other test asks for
    for fact in (noise_facts.dlap_variance, noise_facts.dlap_interval, noise_facts.dgauss_variance,
                 noise_facts.dgauss_interval):
        fact.cache_clear()
    first = (discrete_laplace_variance(t), discrete_laplace_interval(t), discrete_gaussian_variance(t),
             discrete_gaussian_interval(t))
    again = (calibration.noise_variance("discrete_laplace", float(t)),
             calibration.interval_half_width("discrete_laplace", float(t)),
             calibration.noise_variance("discrete_gaussian", t), calibration.interval_half_width("discrete_gaussian", t))
    assert again == first and [type(x) for x in again] == [float, float, float, float]
    for fact in (noise_facts.dlap_variance, noise_facts.dlap_interval, noise_facts.dgauss_variance,
                 noise_facts.dgauss_interval):
        info = fact.cache_info()
        assert (info.misses, info.hits, info.currsize) == (1, 1, 1), fact.__name__


def test_discrete_draws_the_family_a_plan_names_and_refuses_any_other() -> None:
    """``NoiseSource.discrete`` (what the tree and O/D mechanisms call) draws exactly the named family, the
    same values as the family's own sampler from the same seed, and refuses a name it does not know rather
    than drawing the other distribution (review)."""
    for family, own in (("discrete_laplace", "discrete_laplace"), ("discrete_gaussian", "discrete_gaussian")):
        a = NoiseSource(11).discrete(family, 3, 50)
        b = getattr(NoiseSource(11), own)(3, 50)
        assert np.array_equal(a, b)
    with pytest.raises(ParameterError, match="Unknown noise family 'discrete_laplce'"):
        NoiseSource(11).discrete("discrete_laplce", 3, 5)
