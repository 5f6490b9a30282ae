"""The VanillaGauss baseline (Boninsegna & Silvestri, PoPETs 2025, Sec. 5): noise on every finest
pair with the plan's σ, coarser levels as sums, and the domain-size limit checked by the plan."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from flows_helpers import plan_od
from od_testing import (
    NoDraw,
    check_tree_release,
    level_matrix,
    make_states,
    random_trips,
    tree_h,
    truth_matrix,
)

from dpcore import catalog, pipeline
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import ParameterError
from dpcore.flows.counts import ODCounts
from dpcore.flows.mechanisms import vanilla_gauss
from dpcore.flows.tree import hierarchy_from_prefixes
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource, discrete_gaussian_variance


@pytest.fixture(scope="module")
def states() -> Hierarchy:
    """3 states with 2, 3 and 1 counties (prefix codes)."""
    return make_states()


def test_vanilla_gauss_refuses_large_domains(states: Hierarchy, monkeypatch: pytest.MonkeyPatch) -> None:
    df = pd.DataFrame({"o": ["0101"], "d": ["0102"]})
    c = ODCounts.from_frame(df, states, origin="o", destination="d")
    monkeypatch.setattr(vanilla_gauss, "VANILLA_MAX_CELLS", 35)  # 36 finest pairs
    with pytest.raises(ParameterError, match="36"):
        catalog.get("od", "vanilla_gauss").release_counts(c, budget.zcdp(0.5), NoDraw(0))
    led = Ledger(budget.zcdp(1.0))
    with pytest.raises(ParameterError, match="36"):
        pipeline.release(plan_od(c, "vanilla_gauss", budget.zcdp(0.5)), c, ledger=led, noise=NoDraw(0))
    assert led.spent == 0 and not led.entries
    monkeypatch.setattr(vanilla_gauss, "VANILLA_MAX_CELLS", 36)
    rel = catalog.get("od", "vanilla_gauss").release_counts(c, budget.zcdp(0.5), NoiseSource(0))
    assert rel.details["noised_cells"] == 36


@pytest.mark.parametrize("orientation", ["destination", "origin"])
def test_vanilla_gauss_sums_its_leaves_and_has_sigma_noise(orientation: str) -> None:
    """Coarse levels are exact sums of the noisy leaves (negatives kept, exact zeros dropped);
    the leaf noise has the discrete Gaussian variance of σ = GS₂/√(2ρ).  With N = 160,000 leaf
    cells the sample variance has relative SE √((κ − 1)/N) ≈ √(2/N) = 0.35 %; tolerance 5 SE."""
    h = tree_h([20, 20])  # 400 leaves, 160,000 pairs
    rng = np.random.default_rng(3)
    df = random_trips(rng, h, h, 3000)
    c = ODCounts.from_frame(df, h, origin="o", destination="d")
    rho = 0.02
    rel = catalog.get("od", "vanilla_gauss").release_counts(
        c, budget.zcdp(rho), NoiseSource(4), orientation=orientation)
    p = rel.plan
    T = p.depth
    assert p.levels[T].scale == pytest.approx(math.sqrt(2) / math.sqrt(2 * rho), rel=1e-12)
    assert [lv.measured for lv in p.levels] == [False] * T + [True]
    assert rel.public_total is None and rel.consistent
    check_tree_release(rel, positive=False)  # every level is the exact sum of the leaves
    assert (rel.values[T] < 0).any()  # negative leaves are kept (unbiased sums, pitfall 13)
    noise = (level_matrix(rel, T) - truth_matrix(df, h, h, 2, 2)).ravel().astype(float)
    N = noise.size
    var = discrete_gaussian_variance(p.levels[T].scale)
    assert abs(noise.mean()) <= 5 * math.sqrt(var / N)
    assert abs(noise.var() / var - 1) <= 5 * math.sqrt(2 / N)
    assert rel.details["noised_cells"] == N
    # the plan's SD of a coarse cell: √(N_T/N_ℓ) leaf SDs (equal-sized nodes here)
    for t in range(T + 1):
        assert p.levels[t].sd == pytest.approx(math.sqrt(var * p.levels[T].pairs / p.levels[t].pairs), rel=1e-12)


def test_vanilla_gauss_size_limit_is_checked_by_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The size limit is checked by plan(), so the app and the CLI refuse before the click."""
    h = hierarchy_from_prefixes(["0101", "0102", "0201"], [2, 4])
    monkeypatch.setattr(vanilla_gauss, "VANILLA_MAX_CELLS", 8)
    with pytest.raises(ParameterError, match="VanillaGauss noises every possible finest pair"):
        catalog.get("od", "vanilla_gauss").plan_tree(h, h, budget.zcdp(0.5))
    monkeypatch.setattr(vanilla_gauss, "VANILLA_MAX_CELLS", 9)
    assert catalog.get("od", "vanilla_gauss").plan_tree(h, h, budget.zcdp(0.5)).levels[-1].measured
