"""The target-error planner checked against simulation (issue 17): releases drawn at the proposed
budget through the real release path (Mechanism.release with seeded noise, no ledger) meet the
stated error in at least the stated share of counts.

The tolerance is binomial: with N simulated counts each within ±T with probability p >= c, the
observed share falls below ``c − 4·√(c(1 − c)/N)`` with probability below 4e-5 (normal tail).
The counts of one release are independent for identity and independent levels; under TopDown the
siblings' errors are tied by their parent's (weakly), and the binomial bound is used there too,
with several independent releases pooled.  Seeds are fixed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcore import catalog
from dpcore.areas.counts import HierarchyCounts
from dpcore.core.target import Target, plan_for_targets
from dpcore.data import synthetic
from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.data.hierarchy import Hierarchy
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.noise import NoiseSource


def _floor(c: float, n: int) -> float:
    return c - 4.0 * math.sqrt(c * (1 - c) / n)


def _replan(prop, domain):
    m = catalog.get(prop.kind, prop.mechanism)
    return m, m.plan(domain, PrivacyCost(prop.cost.definition, prop.total), prop.params, unit=prop.plan.unit,
                     **prop.plan.public)


@pytest.mark.parametrize("definition", ["pure", "zcdp"])
def test_identity_grid_meets_its_target_in_simulation(definition: str) -> None:
    grid = Grid(Bounds(0, 0, 1, 1), 32, 32)
    rng = np.random.default_rng(3)
    counts = rng.poisson(50, size=(32, 32)).astype(np.int64)
    agg = Aggregate(grid, counts, 0, 0, 1, None)
    target = Target("finest", 4, 0.9)
    prop = plan_for_targets(catalog.get("points", "identity"), grid, [target], definition=definition)
    m, plan = _replan(prop, grid)
    inside = []
    for seed in range(8):
        rel = m.release(plan, agg, NoiseSource(100 + seed)).inner
        r = rel.rects[rel.leaf]
        truth = np.array([counts[a:b, c:d].sum() for a, b, c, d in r])
        inside.append(np.abs(rel.noisy[rel.leaf] - truth) <= target.half_width)
    share = np.concatenate(inside)
    assert share.mean() >= _floor(target.coverage, share.size)


def _census() -> tuple[Hierarchy, HierarchyCounts]:
    df = synthetic.synthetic_census(n_states=4, counties_per_state=6, tracts_per_county=10, seed=1)
    levels = ["state", "county", "tract"]
    h = Hierarchy.from_frame(df, levels)
    return h, HierarchyCounts.from_frame(df, h, levels, "population")


@pytest.mark.parametrize(("name", "definition", "targets"), [
    ("independent", "pure", [Target("tract", 10, 0.95), Target("county", 6, 0.9)]),
    ("topdown_l2", "pure", [Target("tract", 12, 0.95), Target("county", 10, 0.9)]),
    ("topdown_l2", "zcdp", [Target("tract", 12, 0.95)]),
    ("hay", "pure", [Target("tract", 12, 0.95)]),
])
def test_hierarchy_meets_its_targets_in_simulation(name: str, definition: str, targets: list[Target]) -> None:
    h, counts = _census()
    prop = plan_for_targets(catalog.get("hierarchy", name), h, targets, definition=definition)
    m, plan = _replan(prop, h)
    true = counts.levels()
    hits: dict[str, list[np.ndarray]] = {t.level: [] for t in targets}
    for seed in range(25):
        rel = m.release(plan, counts, NoiseSource(1000 + seed)).inner
        for t in targets:
            d = h.depth_of(t.level)
            hits[t.level].append(np.abs(rel.values[d].astype(float) - true[d]) <= t.half_width)
    for t in targets:
        share = np.concatenate(hits[t.level])
        assert share.mean() >= _floor(t.coverage, share.size), (t.describe(), share.mean())
