"""The planner over time (dpcore.core.target_time and ``plan --periods``): per-period budget, horizon, cap."""

from __future__ import annotations

import json
import math

import pytest

from dpcore import catalog
from dpcore.cli import main
from dpcore.core.target import Target, plan_for_targets
from dpcore.core.target_time import horizon_figure, plan_over_time
from dpcore.data.domain import Bounds, Grid
from dpcore.errors import BudgetError, ParameterError
from dpcore.privacy.budget import pure, zcdp, zcdp_to_approx_dp
from dpcore.privacy.calibration import normal_z


def gaussian_target_rho(half_width: float, coverage: float) -> dict[str, float]:
    """The normal closed form of one Gaussian count's target: σ = h/z, ρ = 1/(2σ²) (Δ₂ = 1)."""
    sigma = half_width / normal_z(coverage)
    return {"sigma": sigma, "rho": 1 / (2 * sigma**2)}


def test_the_notes_worked_example() -> None:
    """±20 at 90 % with Δ₂ = 1: σ = 20/1.645 = 12.2, ρ_week = 1/(2σ²) = 0.0034, ρ_year = 52 ρ_week = 0.176,
    ε ≈ 3.3 per person-year at δ = 1e-6 (classic bound)."""
    r = gaussian_target_rho(20, 0.90)
    assert r["sigma"] == pytest.approx(20 / 1.6448536, rel=1e-6) and round(r["sigma"], 1) == 12.2
    assert r["rho"] == pytest.approx(1 / (2 * r["sigma"] ** 2)) and round(r["rho"], 4) == 0.0034
    tp = plan_over_time(zcdp(r["rho"]), 52, period_name="week")
    assert tp.horizon["value"] == pytest.approx(52 * r["rho"]) and round(tp.horizon["value"], 3) == 0.176
    assert round(tp.horizon["epsilon_classic"], 1) == 3.3
    rho_h = 52 * r["rho"]
    assert tp.horizon["epsilon_classic"] == pytest.approx(rho_h + 2 * math.sqrt(rho_h * math.log(1e6)))
    assert tp.horizon["epsilon"] == pytest.approx(zcdp_to_approx_dp(rho_h, 1e-6))
    assert tp.horizon["epsilon"] < tp.horizon["epsilon_classic"]


def test_the_planner_agrees_with_the_closed_form() -> None:
    """One discrete Gaussian draw per cell (identity): the exact integer quantile allows |error| <= 20 with
    probability 90 %, a little looser than the normal σ = 20/1.645, i.e. σ ≈ 20.5/1.645 (continuity)."""
    grid = Grid(Bounds(0, 0, 1, 1), 4, 4)
    prop = plan_for_targets(catalog.get("points", "identity"), grid, [Target("finest", 20, 0.9)], definition="zcdp")
    closed = gaussian_target_rho(20, 0.9)["rho"]
    continuity = gaussian_target_rho(20.5, 0.9)["rho"]
    assert continuity * 0.99 < prop.total < closed
    tp = plan_over_time(prop.cost, 52)
    assert tp.horizon["value"] == pytest.approx(52 * prop.total)


def test_horizon_figures() -> None:
    h = horizon_figure(pure(0.1), 30)
    assert (h["value"], h["epsilon"], h["delta"]) == (pytest.approx(3.0), pytest.approx(3.0), None)
    h = horizon_figure(zcdp(0.01), 365, delta=1e-9)
    assert h["value"] == pytest.approx(3.65) and h["delta"] == 1e-9
    with pytest.raises(ParameterError, match="whole number"):
        horizon_figure(zcdp(0.01), 0)


def test_cap_refuses_and_says_what_fits() -> None:
    assert plan_over_time(zcdp(0.01), 10, horizon_cap=0.1).within_cap is True  # exactly at the cap
    with pytest.raises(BudgetError) as e:
        plan_over_time(zcdp(0.0034), 52, horizon_cap=0.1, period_name="week")
    msg = str(e.value)
    assert "ρ = 0.1768" in msg and "at most ρ = 0.001923" in msg
    assert 0.001923 * 52 <= 0.1
    with pytest.raises(BudgetError, match="ε = 3"):
        plan_over_time(pure(0.1), 30, horizon_cap=2.0)
    with pytest.raises(ParameterError, match="positive"):
        plan_over_time(pure(0.1), 30, horizon_cap=-1.0)


PLAN = ["plan", "points", "--bounds", "0,0,1,1", "--grid", "4,4", "--mechanism", "identity", "--rho",
        "--target", "abs=20,coverage=0.9"]


def test_cli_plan_periods(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*PLAN, "--periods", "52", "--period", "week", "--horizon-cap", "0.5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ot = out["over_time"]
    assert ot["periods"] == 52 and ot["period"] == "week" and ot["within_cap"] is True
    assert ot["per_period"]["value"] == out["rounded"]
    assert ot["horizon"]["value"] == pytest.approx(52 * out["rounded"])
    assert main([*PLAN, "--periods", "52", "--period", "week"]) == 0
    text = capsys.readouterr().out
    assert "Per week: ρ = 0.003218" in text and "52 weeks at this rate: ρ = 0.1673" in text


def test_cli_plan_refuses_past_the_cap(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*PLAN, "--periods", "52", "--period", "week", "--horizon-cap", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "above the horizon cap ρ = 0.1" in err and "Traceback" not in err
    assert main([*PLAN, "--horizon-cap", "0.1"]) == 2
    assert "--periods" in capsys.readouterr().err


def test_cli_plan_without_periods_is_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*PLAN, "--json"]) == 0
    assert "over_time" not in json.loads(capsys.readouterr().out)


def test_cli_plan_statistic_compares_the_designs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*PLAN, "--periods", "52", "--statistic", "cumulative", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    cum, rho = out["cumulative"], out["rounded"]
    assert cum["method"] == "factorisation" and cum["rho"] == rho
    assert cum["sd"]["leaves"]["ytd"] == pytest.approx(math.sqrt(52 / (2 * rho)))
    assert cum["sd"]["factorisation"]["ytd"] == pytest.approx(math.sqrt(5.3939 / (2 * rho)), rel=1e-4)
    assert main([*PLAN, "--periods", "52", "--period", "week", "--statistic", "window:3"]) == 0
    assert "Recommended for the window statistic: leaves" in capsys.readouterr().out
    assert main([*PLAN, "--statistic", "cumulative"]) == 2
    assert "--periods P and --rho" in capsys.readouterr().err
