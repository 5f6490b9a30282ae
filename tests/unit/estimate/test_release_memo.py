"""The matrix mechanism's and Privelet's releases make their data-free part once per plan (a
strategy's L1 replacement, calibration and workload variances; Privelet's noise plan and weight
classes), keyed by public inputs only, and a seeded release gives the same numbers with it kept."""

from __future__ import annotations

import numpy as np
import pytest

from dpcore.errors import ParameterError
from dpcore.estimate import matrix_release
from dpcore.estimate import privelet as pv
from dpcore.estimate.matrix_design import design_strategy
from dpcore.estimate.matrix_workload import all_range_workload, range_2d_workload
from dpcore.privacy.noise import NoiseSource


def _counting(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


@pytest.mark.parametrize("budget", [{"epsilon": 1.0}, {"rho": 0.5}], ids=["pure", "zcdp"])
def test_matrix_release_makes_its_data_free_part_once_per_strategy(monkeypatch, budget) -> None:
    w = all_range_workload(16)
    s = design_strategy(w)  # an L2 design: under pure ε replaced by an L1 strategy, once
    x = np.random.default_rng(3).poisson(20, 16).astype(float)
    fresh = [matrix_release.release(w, design_strategy(w), x, NoiseSource(11), **budget) for _ in range(2)]
    made = {n: _counting(monkeypatch, matrix_release, n) for n in ("calibrate", "l1_strategy", "query_variances_per_p")}
    kept = [matrix_release.release(w, s, x, NoiseSource(11), **budget) for _ in range(3)]
    assert len(made["calibrate"]) == 1 and len(made["query_variances_per_p"]) == 1
    assert len(made["l1_strategy"]) == (1 if "epsilon" in budget else 0)
    for a in kept:  # the same numbers as releases that made everything afresh
        np.testing.assert_array_equal(a.answers, fresh[0].answers)
        np.testing.assert_array_equal(a.standard_errors, fresh[0].standard_errors)
        assert (a.noise_variance, a.cost, a.notes) == (fresh[0].noise_variance, fresh[0].cost, fresh[0].notes)
    # another budget is another calibration; the L1 strategy and its variances per unit of noise are kept
    matrix_release.release(w, s, x, NoiseSource(11), **{k: v / 2 for k, v in budget.items()})
    assert len(made["calibrate"]) == 2 and len(made["query_variances_per_p"]) == 1
    assert len(made["l1_strategy"]) == (1 if "epsilon" in budget else 0)


def test_matrix_exact_units_keep_the_strategys_integers() -> None:
    """Rows whose rounding float arithmetic cannot decide are computed exactly from the strategy's
    integers, made once per strategy; the units equal a fresh computation's."""
    from dpcore.estimate import matrix_exact

    w = range_2d_workload(4, 4)
    s = design_strategy(w)
    x = np.full(16, 2.0**52)  # large counts: every answer is past 2^50 and taken exactly
    first = matrix_exact.grid_units(s, x, -3)
    assert "exact_ints" in s._memo["derived"]  # noqa: SLF001 - the memo this test is about
    np.testing.assert_array_equal(matrix_exact.grid_units(s, x, -3), first)
    np.testing.assert_array_equal(matrix_exact.grid_units(design_strategy(w), x, -3), first)


def test_matrix_exact_does_not_keep_a_large_strategys_integers() -> None:
    """Above 2^16 entries the exact integers (Python objects, tens of bytes each) are made for the
    release and dropped, not pinned on a strategy that may be cached process-wide."""
    from dpcore.estimate import matrix_exact
    from dpcore.estimate.matrix_strategy import Strategy

    n = 260  # 67,600 entries: above 2^16, below the former 2^20
    s = Strategy("matrix", n, A=np.tril(np.ones((n, n))) / 3)
    x = np.full(n, 2.0**52)
    units = matrix_exact.grid_units(s, x, -3)
    assert "exact_ints" not in s._memo.get("derived", {})  # noqa: SLF001 - the memo this test is about
    np.testing.assert_array_equal(matrix_exact.grid_units(s, x, -3), units)


def test_privelet_makes_its_class_plan_once_per_grid_for_every_budget(monkeypatch) -> None:
    """The cached plan is free of ε: another budget reuses it (only λ is recomputed)."""
    pv._class_plan.cache_clear()
    made = _counting(monkeypatch, pv, "_build_class_plan")
    axes = (pv.Axis.ordinal("row", 24), pv.Axis.ordinal("col", 40, transform=False))
    x = np.random.default_rng(5).poisson(4, (24, 40))
    a, b = (pv.release(x, axes, 0.5, NoiseSource(9)) for _ in range(2))
    assert len(made) == 1
    np.testing.assert_array_equal(a.noisy, b.noisy)
    pv._class_plan.cache_clear()
    np.testing.assert_array_equal(pv.release(x, axes, 0.5, NoiseSource(9)).noisy, a.noisy)  # made afresh
    c = pv.release(x, axes, 0.25, NoiseSource(9))  # another budget: the same class plan, another λ
    assert len(made) == 2 and c.lam == 2 * a.lam
    assert not pv._class_plan(axes).classes.flags.writeable


@pytest.mark.parametrize("bad", [{"epsilon": True}, {"epsilon": 1.0, "sensitivity": True}])
def test_privelet_checks_the_budget_on_every_call_with_the_plan_cached(bad) -> None:
    """``True == 1``: a cache keyed by ε once let ``epsilon=True`` past the checks after ε = 1."""
    axes = (pv.Axis.ordinal("row", 8),)
    x = np.arange(8)
    pv.release(x, axes, 1, NoiseSource(1), sensitivity=1)  # the plan is cached
    with pytest.raises(ParameterError):
        pv.release(x, axes, bad["epsilon"], NoiseSource(1), sensitivity=bad.get("sensitivity", 1))


@pytest.mark.parametrize(("good", "bad"), [
    ({"epsilon": 1.0}, {"epsilon": True}),
    ({"rho": 1.0}, {"rho": True}),
    ({"epsilon": 1.0, "delta": 1e-6}, {"epsilon": True, "delta": 1e-6}),
], ids=["pure", "zcdp", "approx"])
def test_matrix_release_checks_the_budget_on_every_call_with_the_calibration_kept(good, bad) -> None:
    """``True == 1.0``: the strategy's kept calibration, keyed by the raw budget, once let
    ``epsilon=True`` (or ``rho=True``) past the checks after a release at 1.0."""
    w = all_range_workload(8)
    s = design_strategy(w)
    x = np.arange(8.0)
    with pytest.raises(ParameterError):  # refused fresh
        matrix_release.release(w, design_strategy(w), x, NoiseSource(1), **bad)
    matrix_release.release(w, s, x, NoiseSource(1), **good)  # the calibration is kept on s
    with pytest.raises(ParameterError):
        matrix_release.release(w, s, x, NoiseSource(1), **bad)


def test_strategy_keeps_its_derived_arrays_read_only() -> None:
    """Kept arrays are shared by every release of the plan: read only, also inside a tuple or list."""
    from dpcore.estimate.matrix_strategy import Strategy

    s = Strategy("identity", 2, A=np.eye(2))
    kept = s.derived("pair", lambda: (np.zeros(2), [np.ones(3)], 4))
    assert not kept[0].flags.writeable and not kept[1][0].flags.writeable
    assert s.derived("pair", lambda: None) is kept


def test_privelet_class_plan_is_small_and_read_only() -> None:
    """The plan is cached process-wide: class ids in the smallest unsigned dtype (1 B a cell
    below 256 classes), the order in int32 (4 B, not 8), at most two grids kept."""
    pv._class_plan.cache_clear()
    axes = (pv.Axis.ordinal("row", 24), pv.Axis.ordinal("col", 40, transform=False))
    plan = pv._class_plan(axes)
    assert len(plan.weights) < 256 and plan.classes.dtype == np.uint8
    assert plan.order.dtype == np.int32
    assert not any(a.flags.writeable for a in (plan.classes, plan.order, plan.bounds))
    assert pv._class_plan.cache_info().maxsize == 2


@pytest.mark.parametrize(("seed", "digest"), [
    (9, "b80c647c85d69badaf23e0550527910428ad156c2a70afa3c9b02b2bf0a40fc7"),
])
def test_privelet_release_is_bit_identical_for_a_fixed_seed(seed, digest) -> None:
    """The noisy matrix of a fixed seed, recorded before the plan's dtypes shrank, is unchanged."""
    import hashlib

    axes = (pv.Axis.ordinal("row", 24), pv.Axis.ordinal("col", 40, transform=False))
    x = np.random.default_rng(5).poisson(4, (24, 40))
    assert hashlib.sha256(pv.release(x, axes, 0.5, NoiseSource(seed)).noisy.tobytes()).hexdigest() == digest


def test_privelet_nominal_release_is_bit_identical_for_a_fixed_seed() -> None:
    """A nominal x Haar grid with Δ = 2 (several weight classes), recorded before the change."""
    import hashlib

    axes = (pv.Axis.nominal("n", [np.repeat(np.arange(3), 3)]), pv.Axis.ordinal("r", 33))
    x = np.random.default_rng(6).poisson(7, (9, 33))
    got = pv.release(x, axes, 1.3, NoiseSource(4), sensitivity=2).noisy.tobytes()
    assert hashlib.sha256(got).hexdigest() == "8d9193f07532faeb9db0a40743c5f4e9811fabfbf7e690ed4384bc5c775cd661"
