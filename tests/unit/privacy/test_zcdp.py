"""ρ-zCDP releases: discrete Gaussian noise, exact σ, accounting and the (ε, δ) reading."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from points_helpers import levels_of, plan_points, release_with

from dpcore import catalog, pipeline
from dpcore.cli import main
from dpcore.core.record import validate_record
from dpcore.data.domain import Bounds, Grid, aggregate_points
from dpcore.errors import BudgetError
from dpcore.points import export
from dpcore.points.mechanisms.base import gaussian_sigma, noisy_counts
from dpcore.privacy import budget, noise
from dpcore.privacy.ledger import Ledger

BOUNDS = Bounds(-74.06, 40.56, -73.70, 40.92)


@pytest.mark.parametrize("rho", [0.5, 0.1, 1e-3, 0.3333333333, 2.0])
@pytest.mark.parametrize("k", [1, 3, 10])
def test_gaussian_sigma_is_the_smallest_float_that_clears_the_exact_bound(rho, k):
    target = Fraction(k) ** 2 / (2 * Fraction(rho))
    s = gaussian_sigma(rho, k)
    assert s * s >= target
    below = Fraction(math.nextafter(float(s), 0.0))
    assert below * below < target


def test_identity_zcdp_noise_has_the_discrete_gaussian_variance():
    g = Grid(BOUNDS, 200, 200)
    agg = aggregate_points(np.array([-73.9]), np.array([40.7]), g)
    rho = 0.02
    rel = release_with(catalog.get("points", "identity"), agg, budget.zcdp(rho), {}, noise.NoiseSource(7))
    lv = rel.levels[0]
    sigma = gaussian_sigma(rho, 1)
    assert lv.noise == "discrete_gaussian" and lv.scale == float(sigma)
    err = rel.noisy - agg.counts.ravel()
    var = noise.discrete_gaussian_variance(sigma)
    # SE of the sample variance from the 4th moment of the exact pmf
    ks = np.arange(-int(40 * float(sigma)), int(40 * float(sigma)) + 1)
    pmf = noise.discrete_gaussian_pmf(ks, sigma)
    m4 = float(np.sum(pmf * ks.astype(float) ** 4))
    n = err.size
    se_var = math.sqrt((m4 - var**2) / n)
    assert abs(err.var() - var) < 5 * se_var
    assert abs(err.mean()) < 5 * math.sqrt(var / n)
    assert lv.sd == pytest.approx(math.sqrt(var))


def test_ug_zcdp_splits_rho_and_sizes_the_grid_with_the_equivalent_epsilon():
    g = Grid(BOUNDS, 1024, 1024)
    mech = catalog.get("points", "ug")
    rho = 0.08
    levels = levels_of(mech, g, budget.zcdp(rho), {}, n_estimate=1e6)
    assert [lv.cost.definition for lv in levels] == ["zcdp", "zcdp"]
    assert math.fsum(lv.cost.value for lv in levels) == pytest.approx(rho, rel=1e-12)
    rho_grid = levels[-1].cost.value
    m = round(math.sqrt(1e6 * 2 * math.sqrt(rho_grid) / 10))
    assert levels[-1].n_counts == m * m
    assert all(lv.noise == "discrete_gaussian" for lv in levels)


def test_zcdp_record_states_the_approx_dp_reading_and_validates():
    g = Grid(BOUNDS, 64, 64)
    rng = np.random.default_rng(0)
    agg = aggregate_points(rng.uniform(-74.0, -73.8, 5000), rng.uniform(40.6, 40.9, 5000), g)
    led = Ledger(budget.zcdp(1.0))
    rel = pipeline.release(plan_points(agg, "ug", budget.zcdp(0.25), {}), agg,
                           ledger=led, noise=noise.NoiseSource(3)).inner
    rec = export.release_record(rel, led)
    validate_record(rec)
    assert rec["privacy"]["definition"] == "rho-zCDP"
    assert rec["privacy"]["noise"] == "discrete Gaussian"
    for item in rec["privacy"]["approx_dp"]:
        assert item["epsilon"] == pytest.approx(budget.zcdp_to_approx_dp(0.25, item["delta"]))
    assert led.spent == pytest.approx(0.25)


def test_pure_ledger_refuses_a_zcdp_release_before_drawing_noise():
    g = Grid(BOUNDS, 16, 16)
    agg = aggregate_points(np.array([-73.9]), np.array([40.7]), g)
    led = Ledger(budget.pure(1.0))

    class NoDraw(noise.NoiseSource):
        def random_uint64(self, size: int) -> np.ndarray:  # pragma: no cover - must not run
            raise AssertionError("noise drawn before the budget check")

    with pytest.raises(BudgetError):
        pipeline.release(plan_points(agg, "identity", budget.zcdp(0.1), {}), agg, ledger=led, noise=NoDraw(1))
    assert led.spent == 0


def test_noisy_counts_dispatches_on_the_definition():
    src = noise.NoiseSource(11)
    true = np.zeros(20000, dtype=np.int64)
    lap = noisy_counts(true, 0.5, 1, src)
    gau = noisy_counts(true, budget.zcdp(0.125), 1, src)  # σ = 2
    # 5 standard errors of a sample variance: SE = σ²·sqrt((κ − 1)/n), kurtosis κ = 6 (Laplace), 3 (Gaussian)
    n = true.size
    v_lap, v_gau = noise.discrete_laplace_variance(2), noise.discrete_gaussian_variance(2)
    assert abs(lap.var() - v_lap) < 5 * v_lap * np.sqrt(5 / n)
    assert abs(gau.var() - v_gau) < 5 * v_gau * np.sqrt(2 / n)


def test_cli_rho_release_and_ledger_definition(tmp_path, capsys):
    rng = np.random.default_rng(1)
    csv = tmp_path / "p.csv"
    lines = ["lat,lon"] + [f"{a:.5f},{b:.5f}" for a, b in zip(rng.uniform(40.6, 40.9, 300),
                                                           rng.uniform(-74.0, -73.8, 300), strict=True)]
    csv.write_text("\n".join(lines) + "\n")
    ledger = tmp_path / "ledger.json"
    out = tmp_path / "out"
    args = ["release", "points", "--input", str(csv), "--bounds", "-74.06,40.56,-73.70,40.92",
            "--grid", "32,32", "--mechanism", "identity", "--rho", "0.1", "--out", str(out),
            "--ledger", str(ledger), "--budget-cap", "0.15"]
    assert main(args) == 0
    said = capsys.readouterr().out
    assert "ρ = 0.1" in said and "δ = 1e-06" in said
    rec = json.loads((out / "release.json").read_text())
    assert rec["privacy"]["definition"] == "rho-zCDP"
    assert json.loads(ledger.read_text())["definition"] == "zcdp"
    # a second ρ = 0.1 would exceed the cap of 0.15
    assert main(args[:-6] + ["--out", str(tmp_path / "o2"), "--ledger", str(ledger)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")
    assert not (tmp_path / "o2").exists()
