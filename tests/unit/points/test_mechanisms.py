"""Unit tests of dpcore.points.mechanisms: registry, parameters, plans (data-free noise) and releases.

The discrete Laplace facts are recomputed here from the pmf
``P(X = k) = (1 - q) / (1 + q) * q^|k|``, ``q = exp(-1/t)``, not read from dpcore.
Statistical checks use fixed seeds and tolerances of 5 standard errors computed
from the distribution.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from points_helpers import levels_of, release_with

from dpcore import catalog, pipeline
from dpcore.core.mechanism import Mechanism
from dpcore.data.domain import Aggregate, Bounds, Grid, aggregate_points, rect_sums
from dpcore.errors import ParameterError
from dpcore.points.kind import MECHANISMS
from dpcore.points.mechanisms.base import PointsMechanism, check_epsilon
from dpcore.points.mechanisms.identity import Identity
from dpcore.points.mechanisms.ug import UniformGrid
from dpcore.points.mechanisms.uniform import Uniform
from dpcore.points.release import PartitionRelease
from dpcore.points.unit import points_unit
from dpcore.privacy.budget import pure
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource

N_SE = 5.0  # tolerance of every statistical check, in standard errors


# ---------------------------------------------------------------------------------------------
# independent discrete Laplace facts
# ---------------------------------------------------------------------------------------------


def dlap_q(scale: float) -> float:
    return math.exp(-1.0 / scale)


def dlap_pmf(k: np.ndarray, scale: float) -> np.ndarray:
    q = dlap_q(scale)
    return (1 - q) / (1 + q) * q ** np.abs(k)


def dlap_var(scale: float) -> float:
    q = dlap_q(scale)
    return 2 * q / (1 - q) ** 2


def dlap_support(scale: float) -> np.ndarray:
    # beyond this radius the pmf is below 1e-30
    r = math.ceil(70 * scale) + 10
    return np.arange(-r, r + 1)


def dlap_moment4(scale: float) -> float:
    k = dlap_support(scale).astype(np.float64)
    return float(np.sum(k**4 * dlap_pmf(k, scale)))


def dlap_ci95(scale: float) -> int:
    """Smallest h >= 0 with P(|X| <= h) >= 0.95, by summing the pmf."""
    k = np.arange(0, math.ceil(70 * scale) + 10)
    p = dlap_pmf(k, scale)
    cdf_abs = np.cumsum(np.where(k == 0, p, 2 * p))  # P(|X| <= h)
    return int(np.argmax(cdf_abs >= 0.95))


def dlap_abs_cdf(h: int, scale: float) -> float:
    k = np.arange(-h, h + 1)
    return float(dlap_pmf(k, scale).sum())


def tiling(shape: tuple[int, int], rects: np.ndarray) -> np.ndarray:
    cov = np.zeros(shape, dtype=np.int64)
    for r0, r1, c0, c1 in np.asarray(rects).tolist():
        cov[r0:r1, c0:c1] += 1
    return cov


def make_aggregate(counts: np.ndarray, sensitivity: int = 1, user_cap: int | None = None) -> Aggregate:
    counts = np.asarray(counts, dtype=np.int64)
    g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), counts.shape[0], counts.shape[1])
    return Aggregate(grid=g, counts=counts, n_outside=0, n_capped=0, sensitivity=sensitivity, user_cap=user_cap)


GRID_64 = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 64, 64)

# ---------------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------------


class TestRegistry:
    def test_names(self) -> None:
        assert {"identity", "ug", "uniform", "htf"} <= set(catalog.names("points"))
        assert [m.name for m in MECHANISMS] == catalog.names("points")
        for mech in MECHANISMS:
            assert catalog.get("points", mech.name) is mech  # the catalogue is the only registry
            assert isinstance(mech, PointsMechanism) and isinstance(mech, Mechanism)
            assert mech.kind == "points"

    @pytest.mark.parametrize("name,cls", [("ug", UniformGrid), ("IDENTITY", Identity), (" Uniform ", Uniform)])
    def test_get(self, name: str, cls: type) -> None:
        assert isinstance(catalog.get("points", name), cls)

    @pytest.mark.parametrize("name", ["quad tree", "", "u g", "htf2"])
    def test_get_unknown(self, name: str) -> None:
        with pytest.raises(ParameterError) as ei:
            catalog.get("points", name)
        msg = str(ei.value)
        assert "Unknown points mechanism" in msg
        for known in ("ug", "identity", "uniform"):
            assert known in msg

    def test_describe(self) -> None:
        for mech in MECHANISMS:
            d = mech.describe()
            assert d["name"] == mech.name
            assert [p["name"] for p in d["params"]] == [p.name for p in mech.params]
            for key in ("title", "summary", "when_to_use", "reference", "privacy"):
                assert isinstance(d[key], str) and d[key]


# ---------------------------------------------------------------------------------------------
# plan once, release that plan
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [m.name for m in MECHANISMS])
def test_plan_and_release_resolve_params_and_check_cost_once(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the one release path a points release resolves its parameters once and checks its
    cost once, both in the plan; the release draws from the plan's parameters and cost."""
    mech = catalog.get("points", name)
    calls = {"resolve_params": 0, "cost": 0}
    for what in calls:
        original = getattr(mech, what)

        def counted(*a: object, _what: str = what, _original=original, **k: object) -> object:
            calls[_what] += 1
            return _original(*a, **k)

        monkeypatch.setattr(mech, what, counted)
    rng = np.random.default_rng(3)
    agg = make_aggregate(rng.poisson(30.0, size=(16, 16)))
    ledger = Ledger(pure(2.0))
    plan = mech.plan(agg.grid, 1.0, {}, unit=points_unit(agg.user_cap), n_estimate=7_000 if mech.needs_n_guess else None)
    assert calls == {"resolve_params": 1, "cost": 1}
    rel = pipeline.release(plan, agg, ledger=ledger, noise=NoiseSource(5))
    assert calls == {"resolve_params": 1, "cost": 1}  # nothing resolved or checked again
    assert rel.plan is plan and rel.inner.cost == plan.cost and ledger.spent == pytest.approx(1.0)
    # the same noise through the same plan draws the same release (the plan holds everything)
    again = mech.release(plan, agg, NoiseSource(5)).inner
    np.testing.assert_array_equal(again.noisy, rel.inner.noisy)


def test_a_plan_of_another_mechanism_is_refused() -> None:
    agg = make_aggregate(np.ones((4, 4), dtype=np.int64))
    plan = catalog.get("points", "identity").plan(agg.grid, 0.5, {})
    with pytest.raises(ParameterError, match="identity"):
        catalog.get("points", "uniform").release(plan, agg, NoiseSource(0))


# ---------------------------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------------------------


class TestResolveParams:
    def test_defaults(self) -> None:
        ug = catalog.get("points", "ug")
        p = ug.resolve_params({})
        assert p == {"c": 10.0, "count_share": 0.05, "public_n": 0}
        assert ug.resolve_params(None) == p
        assert catalog.get("points", "identity").resolve_params({}) == {}
        assert catalog.get("points", "uniform").resolve_params(None) == {}

    def test_strings_converted(self) -> None:
        p = catalog.get("points", "ug").resolve_params({"c": "10", "count_share": " 0.1 ", "public_n": "5000"})
        assert p["c"] == 10.0 and isinstance(p["c"], float)
        assert p["count_share"] == 0.1
        assert p["public_n"] == 5000 and isinstance(p["public_n"], int)

    def test_whole_float_for_int(self) -> None:
        assert catalog.get("points", "ug").resolve_params({"public_n": "12.0"})["public_n"] == 12

    def test_empty_string_means_default(self) -> None:
        assert catalog.get("points", "ug").resolve_params({"c": ""})["c"] == 10.0

    def test_unknown_param(self) -> None:
        with pytest.raises(ParameterError) as ei:
            catalog.get("points", "ug").resolve_params({"cc": 3, "c": 10})
        msg = str(ei.value)
        assert "'cc'" in msg
        for known in ("c", "count_share", "public_n"):
            assert known in msg

    def test_unknown_param_for_mechanism_without_params(self) -> None:
        with pytest.raises(ParameterError) as ei:
            catalog.get("points", "identity").resolve_params({"c": "10"})
        assert "none" in str(ei.value)

    @pytest.mark.parametrize(
        "raw",
        [
            {"c": "0.5"},
            {"c": 1000.5},
            {"count_share": "0.9"},
            {"count_share": 0},
            {"public_n": -1},
            {"public_n": "2.5"},
            {"c": "ten"},
            {"c": "nan"},
            {"c": "inf"},
            {"public_n": "many"},
        ],
    )
    def test_bad_values(self, raw: dict) -> None:
        with pytest.raises(ParameterError) as ei:
            catalog.get("points", "ug").resolve_params(raw)
        assert next(iter(raw)) in str(ei.value)

    @pytest.mark.parametrize("value", [1.0, 1000.0])
    def test_range_is_inclusive(self, value: float) -> None:
        assert catalog.get("points", "ug").resolve_params({"c": value})["c"] == value


class TestCheckEpsilon:
    @pytest.mark.parametrize("eps", [0.01, "0.5", 1, 100])
    def test_good(self, eps: object) -> None:
        assert check_epsilon(eps) == float(eps)  # type: ignore[arg-type]

    @pytest.mark.parametrize("eps", [0, -0.5, "abc", None, math.nan, math.inf, 100.5])
    def test_bad(self, eps: object) -> None:
        with pytest.raises(ParameterError):
            check_epsilon(eps)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# plans
# ---------------------------------------------------------------------------------------------


def assert_laplace_level(level, epsilon: float, sensitivity: int) -> None:
    expected_scale = sensitivity / epsilon
    assert level.noise == "discrete_laplace"
    assert level.scale == expected_scale
    assert level.sensitivity == sensitivity
    assert level.cost.definition == "pure"
    assert level.cost.value == pytest.approx(epsilon, rel=1e-12)
    assert level.sd == pytest.approx(math.sqrt(dlap_var(expected_scale)), rel=1e-9)
    h = level.ci95
    assert h == int(h) and h >= 0
    assert h == dlap_ci95(expected_scale)
    # the definition itself: covers 95 %, and one less does not
    assert dlap_abs_cdf(int(h), expected_scale) >= 0.95
    if h > 0:
        assert dlap_abs_cdf(int(h) - 1, expected_scale) < 0.95


class TestPlans:
    @pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 3.0])
    @pytest.mark.parametrize("k", [1, 4])
    def test_identity(self, eps: float, k: int) -> None:
        g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 20, 30)
        (lv,) = levels_of(catalog.get("points", "identity"), g, eps, {}, sensitivity=k)
        assert_laplace_level(lv, eps, k)
        assert lv.n_counts == 600
        assert lv.cells_per_count == 1.0
        assert lv.in_partition

    @pytest.mark.parametrize("eps", [0.05, 1.0])
    @pytest.mark.parametrize("k", [1, 3])
    def test_uniform(self, eps: float, k: int) -> None:
        g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 20, 30)
        (lv,) = levels_of(catalog.get("points", "uniform"), g, eps, {}, sensitivity=k)
        assert_laplace_level(lv, eps, k)
        assert lv.n_counts == 1
        assert lv.cells_per_count == 600
        assert lv.in_partition

    def test_small_scale_ci_is_zero_or_small(self) -> None:
        # eps = 20: q = exp(-20), P(X = 0) > 0.95, so the 95 % half-width is 0
        (lv,) = levels_of(catalog.get("points", "identity"), GRID_64, 20.0, {})
        assert lv.ci95 == 0
        assert dlap_abs_cdf(0, 1 / 20) >= 0.95

    @pytest.mark.parametrize("name", ["identity", "uniform", "ug"])
    @pytest.mark.parametrize("eps", [0, -1, "x", 101])
    def test_plan_refuses_bad_epsilon(self, name: str, eps: object) -> None:
        with pytest.raises(ParameterError):
            levels_of(catalog.get("points", name), GRID_64, eps, {}, n_estimate=1000)  # type: ignore[arg-type]

    def test_expected_error_is_plan_to_dict(self) -> None:
        mech = catalog.get("points", "identity")
        rows = mech.expected_error(mech.plan(GRID_64, 0.5, {}), query_sizes=(0.1,))
        (lv,) = levels_of(mech, GRID_64, 0.5, {})
        assert rows == [lv.to_dict(GRID_64.n_cells, (0.1,))]
        assert rows[0]["noise"]["scale"] == 2.0


def ug_side(n: float, eps_grid: float, c: float, k: int, grid: Grid) -> int:
    m = math.sqrt(n * eps_grid / (c * k))
    return int(max(1, min(round(m), grid.rows, grid.cols)))


class TestUGPlan:
    UG = UniformGrid()

    @pytest.mark.parametrize(
        "n,eps,rows,cols,k",
        [
            (1_000_000, 1.0, 512, 400, 1),
            (1_000_000, 1.0, 256, 300, 1),
            (1_000_000, 1.0, 512, 512, 7),
            (50_000, 0.1, 1024, 1024, 1),
            (1, 0.5, 64, 64, 1),
            (0, 0.5, 64, 64, 1),
        ],
    )
    def test_grid_side(self, n: int, eps: float, rows: int, cols: int, k: int) -> None:
        g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), rows, cols)
        levels = levels_of(self.UG, g, eps, {}, sensitivity=k, n_estimate=n)
        e_g = eps * (1 - 0.05)
        m = ug_side(n, e_g, 10.0, k, g)
        assert 1 <= m <= min(rows, cols)
        assert levels[-1].n_counts == m * m
        assert levels[-1].cells_per_count == pytest.approx(g.n_cells / (m * m))
        assert self.UG.grid_side(n, e_g, 10.0, k, g) == m

    def test_grid_side_hand_values(self) -> None:
        g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 512, 400)
        # sqrt(1e6 * 0.95 / 10) = 308.22
        assert self.UG.grid_side(1e6, 0.95, 10.0, 1, g) == 308
        # clamped to the smaller side
        assert self.UG.grid_side(1e8, 1.0, 10.0, 1, g) == 400
        # sqrt(100 * 1 / 10) = 3.16 -> 3; with k = 10 sqrt(1) = 1
        assert self.UG.grid_side(100, 1.0, 10.0, 1, g) == 3
        assert self.UG.grid_side(100, 1.0, 10.0, 10, g) == 1
        # never below 1, even for a negative noisy count
        assert self.UG.grid_side(-50, 1.0, 10.0, 1, g) == 1

    @pytest.mark.parametrize("eps,share", [(1.0, 0.05), (0.3, 0.2), (2.0, 0.5), (0.1, 0.001)])
    def test_two_levels_budget_adds_up(self, eps: float, share: float) -> None:
        levels = levels_of(self.UG, GRID_64, eps, {"count_share": share}, n_estimate=10_000)
        assert len(levels) == 2
        count_lv, grid_lv = levels
        assert [lv.level for lv in levels] == [0, 1]
        assert count_lv.n_counts == 1 and not count_lv.in_partition
        assert grid_lv.in_partition
        assert count_lv.cost.value == pytest.approx(eps * share, rel=1e-12)
        assert count_lv.cost.value + grid_lv.cost.value == pytest.approx(eps, rel=1e-12)
        assert count_lv.scale == pytest.approx(1 / (eps * share), rel=1e-12)
        assert grid_lv.scale == pytest.approx(1 / (eps * (1 - share)), rel=1e-12)
        assert grid_lv.sd == pytest.approx(math.sqrt(dlap_var(grid_lv.scale)), rel=1e-9)
        assert grid_lv.ci95 == dlap_ci95(grid_lv.scale)
        assert self.UG.cost(eps, {}).value == eps

    def test_public_n_single_level_full_epsilon(self) -> None:
        eps = 0.7
        levels = levels_of(self.UG, GRID_64, eps, {"public_n": 20_000})
        assert len(levels) == 1
        (lv,) = levels
        assert lv.cost.value == eps
        assert lv.scale == 1 / eps
        assert lv.level == 0 and lv.in_partition
        m = ug_side(20_000, eps, 10.0, 1, GRID_64)  # sqrt(20000*0.7/10) = 37.4 -> 37
        assert m == 37
        assert lv.n_counts == m * m
        # the public number wins over the guess
        assert levels_of(self.UG, GRID_64, eps, {"public_n": 20_000}, n_estimate=10) == levels

    @pytest.mark.parametrize("k", [2, 5])
    def test_user_cap_multiplies_scale(self, k: int) -> None:
        eps = 0.8
        base = levels_of(self.UG, GRID_64, eps, {}, sensitivity=1, n_estimate=100_000)
        capped = levels_of(self.UG, GRID_64, eps, {}, sensitivity=k, n_estimate=100_000)
        for a, b in zip(base, capped, strict=True):
            assert b.scale == pytest.approx(k * a.scale, rel=1e-12)
            assert b.sensitivity == k
        m = ug_side(100_000, eps * 0.95, 10.0, k, GRID_64)
        assert capped[-1].n_counts == m * m

    def test_needs_a_guess_without_public_n(self) -> None:
        with pytest.raises(ParameterError, match="guess"):
            levels_of(self.UG, GRID_64, 1.0, {})

    def test_c_changes_grid(self) -> None:
        g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 1024, 1024)
        fine = levels_of(self.UG, g, 1.0, {"c": 1, "public_n": 100_000})[-1].n_counts
        coarse = levels_of(self.UG, g, 1.0, {"c": 100, "public_n": 100_000})[-1].n_counts
        assert fine == round(math.sqrt(100_000)) ** 2
        assert coarse == round(math.sqrt(1000)) ** 2


# ---------------------------------------------------------------------------------------------
# releases
# ---------------------------------------------------------------------------------------------


def poisson_aggregate(rows: int, cols: int, lam: float, seed: int, k: int = 1) -> Aggregate:
    rng = np.random.default_rng(seed)
    return make_aggregate(rng.poisson(lam, size=(rows, cols)), sensitivity=k, user_cap=k if k > 1 else None)


class TestIdentityRelease:
    def test_structure(self) -> None:
        agg = poisson_aggregate(12, 7, 5.0, seed=1)
        rel = release_with(Identity(), agg, 0.5, {}, NoiseSource(1))
        assert isinstance(rel, PartitionRelease)
        assert rel.mechanism == "identity"
        assert rel.n_rects == 84
        assert rel.leaf.all()
        np.testing.assert_array_equal(tiling((12, 7), rel.rects), np.ones((12, 7), dtype=np.int64))
        assert (rel.rects[:, 1] - rel.rects[:, 0] == 1).all()
        assert (rel.rects[:, 3] - rel.rects[:, 2] == 1).all()
        assert np.all(rel.noisy == np.round(rel.noisy))
        assert rel.cost.value == 0.5
        assert np.all(rel.sd == rel.levels[0].sd)
        assert np.all(rel.ci95 == rel.levels[0].ci95)
        # one rectangle per cell: the density puts each noisy count on its own cell
        expected = np.full((12, 7), np.nan)
        expected[rel.rects[:, 0], rel.rects[:, 2]] = rel.noisy
        np.testing.assert_array_equal(rel.density(), expected)
        # the noise is centred on the truth cell by cell (loose bound, many scales away)
        err = rel.noisy - rect_sums(agg.counts, rel.rects)
        assert np.abs(err).max() < 60 * rel.levels[0].scale

    def test_seeded_is_reproducible(self) -> None:
        agg = poisson_aggregate(8, 8, 3.0, seed=2)
        a = release_with(Identity(), agg, 1.0, {}, NoiseSource(42))
        b = release_with(Identity(), agg, 1.0, {}, NoiseSource(42))
        c = release_with(Identity(), agg, 1.0, {}, NoiseSource(43))
        np.testing.assert_array_equal(a.noisy, b.noisy)
        assert not np.array_equal(a.noisy, c.noisy)

    @pytest.mark.parametrize("eps,k", [(0.5, 1), (1.0, 3)])
    def test_noise_distribution(self, eps: float, k: int) -> None:
        rows, cols = 200, 200
        agg = poisson_aggregate(rows, cols, 20.0, seed=3, k=k)
        rel = release_with(Identity(), agg, eps, {}, NoiseSource(7))
        true = rect_sums(agg.counts, rel.rects)
        err = rel.noisy - true
        n = err.size
        t = k / eps
        var = dlap_var(t)
        mu4 = dlap_moment4(t)
        mean = err.mean()
        assert abs(mean) <= N_SE * math.sqrt(var / n), (mean, var)
        s2 = float(np.mean(err**2))  # the true mean is 0, so this is unbiased for var
        se_var = math.sqrt((mu4 - var**2) / n)
        assert abs(s2 - var) <= N_SE * se_var, (s2, var, se_var)
        # the plan's error bars describe this noise
        assert rel.levels[0].sd == pytest.approx(math.sqrt(var), rel=1e-9)
        # the noise is integer-valued and symmetric: P(X > 0) = P(X < 0) = q / (1 + q)
        p_pos = dlap_q(t) / (1 + dlap_q(t))
        for frac in (np.mean(err > 0), np.mean(err < 0)):
            assert abs(frac - p_pos) <= N_SE * math.sqrt(p_pos * (1 - p_pos) / n)

    def test_empirical_ci95_coverage(self) -> None:
        agg = poisson_aggregate(150, 150, 5.0, seed=4)
        rel = release_with(Identity(), agg, 0.3, {}, NoiseSource(11))
        err = rel.noisy - rect_sums(agg.counts, rel.rects)
        p = dlap_abs_cdf(int(rel.levels[0].ci95), 1 / 0.3)  # exact coverage of the interval
        cover = np.mean(np.abs(err) <= rel.ci95)
        assert abs(cover - p) <= N_SE * math.sqrt(p * (1 - p) / err.size)

    def test_sensitivity_from_aggregate(self) -> None:
        lon = np.array([0.1, 0.2, 0.3, 0.9])
        lat = np.array([0.1, 0.2, 0.3, 0.9])
        agg = aggregate_points(lon, lat, Grid(Bounds(0, 0, 1, 1), 4, 4), user=np.array([1, 1, 1, 2]), user_cap=2)
        rel = release_with(Identity(), agg, 0.5, {}, NoiseSource(0))
        assert rel.sensitivity == 2 and rel.user_cap == 2
        assert rel.levels[0].scale == 4.0

    def test_unknown_param_refused(self) -> None:
        with pytest.raises(ParameterError):
            release_with(Identity(), poisson_aggregate(4, 4, 1.0, 0), 1.0, {"c": 3}, NoiseSource(0))


class TestUniformRelease:
    def test_spreads_noisy_total(self) -> None:
        agg = poisson_aggregate(10, 16, 4.0, seed=5)
        rel = release_with(Uniform(), agg, 0.2, {}, NoiseSource(3))
        assert rel.n_rects == 1
        assert rel.rects.tolist() == [[0, 10, 0, 16]]
        assert rel.leaf.tolist() == [True]
        total = rel.noisy[0]
        assert total == round(total)
        assert rel.public["noisy_total"] == total
        d = rel.density()
        assert d.shape == (10, 16)
        np.testing.assert_allclose(d, np.full((10, 16), total / 160))
        # a query over a quarter of the area gets a quarter of the noisy total
        assert rel.answer(np.array([[0, 5, 0, 8]]))[0] == pytest.approx(total / 4)

    def test_noise_distribution_over_many_releases(self) -> None:
        agg = poisson_aggregate(4, 4, 10.0, seed=6)
        eps = 0.5
        src = NoiseSource(17)
        errs = np.array([release_with(Uniform(), agg, eps, {}, src).noisy[0] - agg.total for _ in range(2000)])
        var = dlap_var(1 / eps)
        assert abs(errs.mean()) <= N_SE * math.sqrt(var / errs.size)
        se_var = math.sqrt((dlap_moment4(1 / eps) - var**2) / errs.size)
        assert abs(np.mean(errs**2) - var) <= N_SE * se_var


class TestUGRelease:
    def test_public_values_and_grid(self) -> None:
        agg = poisson_aggregate(64, 64, 25.0, seed=8)  # ~100k points
        eps = 0.5
        rel = release_with(UniformGrid(), agg, eps, {}, NoiseSource(5))
        assert set(rel.public) == {"noisy_point_count", "grid_side"}
        n_hat = rel.public["noisy_point_count"]
        assert isinstance(n_hat, int)
        m = rel.public["grid_side"]
        assert m == ug_side(n_hat, eps * 0.95, 10.0, 1, agg.grid)
        assert rel.n_rects == m * m
        np.testing.assert_array_equal(tiling((64, 64), rel.rects), np.ones((64, 64), dtype=np.int64))
        assert rel.leaf.all()
        assert np.all(rel.noisy == np.round(rel.noisy))
        assert len(rel.levels) == 2
        assert rel.levels[1].n_counts == m * m
        assert np.all(rel.level == 1)
        # the noisy point count is near the truth: scale 1/(0.05 * 0.5) = 40
        assert abs(n_hat - agg.total) <= 40 * math.log(1e6)
        assert rel.cost.value == eps

    def test_public_n(self) -> None:
        agg = poisson_aggregate(32, 48, 3.0, seed=9)
        rel = release_with(UniformGrid(), agg, 1.0, {"public_n": "4000"}, NoiseSource(5))
        assert "noisy_point_count" not in rel.public
        m = ug_side(4000, 1.0, 10.0, 1, agg.grid)  # sqrt(400) = 20
        assert m == 20
        assert rel.public["grid_side"] == m
        assert rel.n_rects == 400
        assert len(rel.levels) == 1 and rel.levels[0].cost.value == 1.0
        np.testing.assert_array_equal(tiling((32, 48), rel.rects), np.ones((32, 48), dtype=np.int64))
        assert np.all(rel.level == 0)

    def test_block_noise_distribution(self) -> None:
        # public_n fixes the grid: m = sqrt(1e6 * 1 / 10) = 316 is clamped to the 128 rows,
        # so there are 16384 blocks, each a single cell
        agg = poisson_aggregate(128, 128, 2.0, seed=10)
        eps = 1.0
        rel = release_with(UniformGrid(), agg, eps, {"public_n": 1_000_000}, NoiseSource(21))
        assert rel.public["grid_side"] == 128
        err = rel.noisy - rect_sums(agg.counts, rel.rects)
        var = dlap_var(1 / eps)
        assert abs(err.mean()) <= N_SE * math.sqrt(var / err.size)
        se_var = math.sqrt((dlap_moment4(1 / eps) - var**2) / err.size)
        assert abs(np.mean(err**2) - var) <= N_SE * se_var

    def test_user_cap_scales_noise(self) -> None:
        agg = poisson_aggregate(16, 16, 50.0, seed=12, k=4)
        rel = release_with(UniformGrid(), agg, 1.0, {"public_n": 12_800}, NoiseSource(2))
        assert rel.sensitivity == 4
        assert rel.levels[-1].scale == 4.0
        assert rel.public["grid_side"] == ug_side(12_800, 1.0, 10.0, 4, agg.grid)  # sqrt(320) -> 18 -> 16
        assert rel.public["grid_side"] == 16


class TestNoTrueCountsInRelease:
    """No attribute of a release may equal the true counts it was made from."""

    @staticmethod
    def _numeric_attributes(rel: PartitionRelease) -> dict[str, np.ndarray]:
        out = {}
        for f in dataclasses.fields(rel):
            v = getattr(rel, f.name)
            if isinstance(v, np.ndarray) and v.dtype != bool:
                out[f.name] = v
        for k, v in rel.public.items():
            arr = np.atleast_1d(np.asarray(v))
            if arr.dtype.kind in "iufb":  # numbers only; labels such as a split name are not counts
                out[f"public.{k}"] = arr
        return out

    @pytest.mark.parametrize(
        "name,params", [*((n, {}) for n in catalog.names("points")), ("ug", {"public_n": 40_000})]
    )
    def test_no_attribute_equals_truth(self, name: str, params: dict) -> None:
        # eps = 0.01: scale >= 100, so P(noise = 0) <= 0.005 per count; the seed is fixed
        rng = np.random.default_rng(13)
        agg = make_aggregate(rng.poisson(40.0, size=(32, 32)) + 1000)
        rel = release_with(catalog.get("points", name), agg, 0.01, params, NoiseSource(99))
        true_blocks = rect_sums(agg.counts, rel.rects).astype(np.float64)
        assert not np.array_equal(rel.noisy, true_blocks)  # the noise is not zero everywhere
        truths = [true_blocks, np.array([float(agg.total)]), agg.counts.ravel().astype(np.float64)]
        for attr, arr in self._numeric_attributes(rel).items():
            for truth in truths:
                if arr.size == truth.size:
                    assert not np.array_equal(arr.astype(np.float64).ravel(), truth), attr
        assert "counts" not in {f.name for f in dataclasses.fields(rel)}
        # the true total is never stated as a public value
        for v in rel.public.values():
            assert v != agg.total
