"""Unit tests of dpcore.privacy.calibration: the 95 % interval, cost -> noise, and that no other
module computes its own interval constant."""

from __future__ import annotations

import functools
import io
import math
import tokenize
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import special

import dpcore
from dpcore.errors import ParameterError
from dpcore.privacy import calibration as C

ROOT = Path(dpcore.__file__).resolve().parent


def _dlap_mass(t: float, h: int) -> float:
    """P(|X| <= h) for the discrete Laplace of scale t, summed term by term from its pmf
    ((1 − q)/(1 + q)) q^|k|, q = e^{−1/t} (written here, independently of dpcore)."""
    q = math.exp(-1.0 / t)
    c = (1.0 - q) / (1.0 + q)
    return math.fsum(c * q ** abs(k) for k in range(-h, h + 1))


def _dgauss_mass(sigma: float, h: int) -> float:
    """P(|X| <= h) for the discrete Gaussian: e^{−k²/(2σ²)} over its sum on all integers."""
    kmax = int(40 * sigma) + 40
    w = [math.exp(-k * k / (2.0 * sigma * sigma)) for k in range(-kmax, kmax + 1)]
    z = math.fsum(w)
    return math.fsum(w[kmax - h: kmax + h + 1]) / z


@pytest.mark.parametrize("scale", [0.2, 0.7, 1, 2.5, Fraction(10, 3), 12.0, 57.3])
def test_discrete_laplace_interval_is_the_smallest_with_95_percent(scale) -> None:
    h = C.interval_half_width("discrete_laplace", scale)
    assert h == int(h) and h >= 0
    assert _dlap_mass(float(scale), int(h)) >= 0.95
    if h > 0:
        assert _dlap_mass(float(scale), int(h) - 1) < 0.95


@pytest.mark.parametrize("sigma", [0.3, 0.8, 1.0, 2.2, 5.0, 17.5, 64.0])
def test_discrete_gaussian_interval_is_the_smallest_with_95_percent(sigma) -> None:
    h = C.interval_half_width("discrete_gaussian", sigma)
    assert h == int(h) and h >= 0
    assert _dgauss_mass(sigma, int(h)) >= 0.95
    if h > 0:
        assert _dgauss_mass(sigma, int(h) - 1) < 0.95


def test_other_levels_follow_the_same_rule() -> None:
    for level in (0.5, 0.9, 0.99):
        h = int(C.interval_half_width("discrete_laplace", 4.0, level))
        assert _dlap_mass(4.0, h) >= level > _dlap_mass(4.0, h - 1)


def test_normal_interval_uses_the_normal_quantile() -> None:
    z = float(-special.ndtri(0.025))  # 1.959963984540054 from SciPy, independent of NormalDist
    assert C.normal_z() == pytest.approx(z, rel=1e-15)
    assert C.interval_half_width("normal", 10.0) == pytest.approx(10 * z, rel=1e-15)
    sd = np.array([0.0, 1.0, 2.5])
    np.testing.assert_allclose(C.interval_half_width("normal", sd), z * sd, rtol=1e-15)
    assert C.normal_z(0.99) == pytest.approx(float(-special.ndtri(0.005)), rel=1e-14)
    # a Bonferroni share keeps its precision in the far tail
    for m in (64, 10**6):
        assert C.normal_z(alpha=0.05 / m) == pytest.approx(float(-special.ndtri(0.025 / m)), rel=1e-14)


def test_laplace_interval_is_the_single_laplace_quantile_in_sds() -> None:
    # one continuous Laplace of scale b has SD b√2 and P(|X| > h) = e^{−h/b}: h = b ln 20
    assert C.interval_half_width("laplace", math.sqrt(2.0)) == pytest.approx(math.log(20.0), rel=1e-14)


def test_interval_rejects_unknown_noise_and_bad_levels() -> None:
    with pytest.raises(ParameterError):
        C.interval_half_width("cauchy", 1.0)
    for bad in (0, 1, 1.5, -0.1, float("nan"), True):
        with pytest.raises(ParameterError):
            C.interval_half_width("normal", 1.0, bad)


def test_noise_for_cost_picks_the_distribution_and_the_exact_scale() -> None:
    assert C.noise_for_cost("pure", 0.5, 2) == ("discrete_laplace", Fraction(4))
    nm, sigma = C.noise_for_cost("zcdp", 0.125, 1, 2)
    assert nm == "discrete_gaussian" and Fraction(sigma) ** 2 >= Fraction(4) / Fraction(0.25)
    assert C.noise_for_cost("zcdp", 0.5, 3)[1] == C.gaussian_sigma_for_rho(0.5, 3)  # Δ₂ defaults to Δ₁
    assert C.noise_variance("discrete_laplace", 2) < 2 * 2**2
    with pytest.raises(ParameterError):
        C.noise_for_cost("approx", 0.5, 1)
    with pytest.raises(ParameterError):
        C.noise_variance("normal", 1.0)


def _code_tokens(path: Path) -> list[tokenize.TokenInfo]:
    toks = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    return [t for t in toks if t.type not in (tokenize.STRING, tokenize.COMMENT)]


def test_no_module_but_calibration_computes_an_interval_constant() -> None:
    """The 95 % z (1.96, 1.959…, norm.ppf(0.975), ndtri, NormalDist) lives in calibration only.

    Strings and comments may still say "1.96 SD" to people; code may not compute with it.
    """
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.name == "calibration.py" and path.parent.name == "privacy":
            continue
        toks = _code_tokens(path)
        for i, t in enumerate(toks):
            bad = (t.type == tokenize.NUMBER and t.string.lstrip("0").startswith(("1.96", "1.959"))) or (
                t.type == tokenize.NAME and t.string in ("ndtri", "NormalDist", "inv_cdf")) or (
                t.type == tokenize.NAME and t.string == "ppf" and i + 2 < len(toks)
                and toks[i + 2].string in ("0.975", "0.025"))
            if bad:
                offenders.append(f"{path.relative_to(ROOT.parent)}:{t.start[0]}: {t.string}")
    assert not offenders, "compute 95 % intervals with dpcore.privacy.calibration.interval_half_width:\n" + \
        "\n".join(offenders)


def test_the_grep_finds_a_typed_constant(tmp_path: Path) -> None:
    p = tmp_path / "m.py"
    p.write_text('x = 1.96 * sd  # "1.96" in a comment is fine\ny = "1.96 SD"\n', encoding="utf-8")
    nums = [t.string for t in _code_tokens(p) if t.type == tokenize.NUMBER]
    assert nums == ["1.96"]


def test_cached_call_computes_unhashable_arguments_uncached_and_raises_fs_own_type_errors_once() -> None:
    calls = []

    @functools.lru_cache
    def f(x):
        calls.append(x)
        if x == "bad":
            raise TypeError("f refuses 'bad'")
        return len(x)

    assert C.cached_call(f, (1, 2)) == C.cached_call(f, (1, 2)) == 2 and calls == [(1, 2)]  # kept
    assert C.cached_call(f, [1, 2, 3]) == 3 and calls[-1] == [1, 2, 3]  # unhashable: computed uncached
    calls.clear()
    with pytest.raises(TypeError, match="f refuses 'bad'"):
        C.cached_call(f, "bad")
    assert calls == ["bad"]  # f's own TypeError of hashable arguments: not computed a second time


def test_no_module_but_calibration_reaches_around_an_lru_cache() -> None:
    """The fallback from an lru_cache to ``f.__wrapped__`` for unhashable arguments is written once,
    in :func:`dpcore.privacy.calibration.cached_call`: no other module reaches around an lru_cache (the
    caches whose arguments are always hashable are plain lru_caches and need no fallback)."""
    offenders = [f"{path.relative_to(ROOT.parent)}:{t.start[0]}"
                 for path in sorted(ROOT.rglob("*.py"))
                 if not (path.name == "calibration.py" and path.parent.name == "privacy")
                 for t in _code_tokens(path) if t.type == tokenize.NAME and t.string == "__wrapped__"]
    assert not offenders, "use dpcore.privacy.calibration.cached_call:\n" + "\n".join(offenders)
    src = (ROOT / "privacy" / "calibration.py").read_text(encoding="utf-8")
    assert src.count(".__wrapped__(") == 1  # in cached_call only


@pytest.mark.parametrize("weight", [np.array(1.0), np.float64(1.0)], ids=["0-d array", "numpy float"])
def test_a_split_by_a_numpy_weight_equals_the_plain_float_split(weight) -> None:
    """A 0-d array is unhashable: the kept split is then computed uncached, not refused with a TypeError."""
    plain = C._split_by_weights(0.7, [1.0, 2.0, 4.0])
    assert C._split_by_weights(0.7, [weight, 2.0, 4.0]) == plain
    assert C._split_by_weights(0.7, [2.0, 4.0, weight]) == C._split_by_weights(0.7, [2.0, 4.0, 1.0])


@pytest.mark.parametrize("noise", ["discrete_laplace", "discrete_gaussian", "laplace", "normal"])
@pytest.mark.parametrize("scale", [1.5, -1.0])  # also before a bad scale is looked at
def test_a_bad_interval_level_is_named_first_for_every_noise(noise: str, scale: float) -> None:
    """One rule (review of the shared dispatch): the level is checked before anything else, with this
    module's message, whichever noise."""
    for level in (-1, 0, 1, 1.5):
        with pytest.raises(ParameterError, match=r"The interval level must lie strictly between 0 and 1"):
            C.interval_half_width(noise, scale, level)
