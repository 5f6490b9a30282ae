"""AGH, AG with a third level, consistency and pooled sparse cells (issue 27, item 3): the pooling
rule, the budgets, the tree it releases and its sizes."""

from __future__ import annotations

import numpy as np
import pytest
from points_helpers import RecordingNoise, levels_of, release_with

from dpcore import catalog
from dpcore.data.domain import Aggregate, Bounds, Grid, prefix_sums, rect_sums_from_prefix
from dpcore.errors import ParameterError
from dpcore.estimate.tree_inference import tree_least_squares
from dpcore.points.mechanisms import agh as A
from dpcore.privacy.noise import NoiseSource

B = Bounds(0.0, 0.0, 1.0, 1.0)
MECH = catalog.get("points", "agh")


def _agg(counts: np.ndarray) -> Aggregate:
    counts = np.asarray(counts, dtype=np.int64)
    return Aggregate(Grid(B, *counts.shape), counts, 0, 0, 1, None)


def _clustered(side: int = 64, seed: int = 3) -> Aggregate:
    """A few dense clusters on empty land (seeded, public generator)."""
    rng = np.random.default_rng(seed)
    counts = np.zeros((side, side), dtype=np.int64)
    for r, c in ((10, 12), (40, 50), (50, 8)):
        rr = np.clip(rng.normal(r, 2, 3000).astype(int), 0, side - 1)
        cc = np.clip(rng.normal(c, 2, 3000).astype(int), 0, side - 1)
        np.add.at(counts, (rr, cc), 1)
    return _agg(counts)


def test_pool_threshold_zero_changes_nothing() -> None:
    est = np.array([3.0, -2.0, 1.0])
    e, s, p = A.pool_sparse(est, np.ones(3), np.array([-1, -1, -1]), np.zeros(3, dtype=np.int64),
                            np.ones(3), 0.0)
    assert e.tolist() == est.tolist() and not p.any()


def test_pooling_keeps_a_groups_total_and_spreads_by_area() -> None:
    """Children of one parent below 2 SD share their (non-negative) sum in proportion to area; a
    pooled node's children follow it by area."""
    parent = np.array([-1, 0, 0, 0, 2, 2])
    depth = np.array([0, 1, 1, 1, 2, 2])
    est = np.array([20.0, 15.0, 1.5, 0.5, 3.0, -1.0])
    area = np.array([8.0, 4.0, 3.0, 1.0, 1.0, 2.0])
    e, sd, p = A.pool_sparse(est, np.ones(6), parent, depth, area, 2.0)
    assert e[1] == 15.0 and not p[1]
    assert e[2] + e[3] == pytest.approx(2.0) and e[2] == pytest.approx(1.5)  # 3/4 of the pool
    assert e[4] == pytest.approx(e[2] / 3) and e[5] == pytest.approx(2 * e[2] / 3)
    assert p[2:].all()
    assert sd[2] == pytest.approx(np.sqrt(2) * 3 / 4)


def test_negative_pool_gets_zero_and_sum_up_restores_consistency() -> None:
    parent = np.array([-1, 0, 0])
    depth = np.array([0, 1, 1])
    e, _, _ = A.pool_sparse(np.array([10.0, 9.0, -3.0]), np.ones(3), parent, depth, np.ones(3), 2.0)
    assert e.tolist() == [10.0, 9.0, 0.0]
    assert A.sum_up(e, parent, depth).tolist() == [9.0, 9.0, 0.0]


def test_budgets_add_up_to_epsilon() -> None:
    """The noisy count and the three levels: scales 1/ε_j whose ε_j add up to ε."""
    noise = RecordingNoise(1)
    rel = release_with(MECH, _clustered(), 0.8, {}, noise)
    assert len(noise.scales) == 4
    assert sum(1 / float(s) for s in noise.scales) == pytest.approx(0.8, rel=1e-9)
    assert rel.cost.value == pytest.approx(0.8)


def test_release_is_a_consistent_three_level_tree_tiling_the_grid() -> None:
    agg = _clustered()
    rel = release_with(MECH, agg, 1.0, {}, NoiseSource(5))
    leaves = rel.rects[rel.leaf]
    cover = np.zeros(agg.grid.shape, dtype=np.int64)
    for r0, r1, c0, c1 in leaves:
        cover[r0:r1, c0:c1] += 1
    assert (cover == 1).all()
    assert set(rel.level.tolist()) == {0, 1, 2} and (rel.level[rel.leaf] == 2).all()
    parent_of = _parents(rel.rects, rel.level)
    for d in (1, 2):
        kids = np.flatnonzero(rel.level == d)
        sums = np.bincount(parent_of[kids], rel.noisy[kids], minlength=rel.n_rects)
        parents = np.unique(parent_of[kids])
        np.testing.assert_allclose(sums[parents], rel.noisy[parents], atol=1e-9)
    assert rel.public["third_level_side"]["max"] > 1  # the dense cells are cut again
    assert 0 < rel.public["pooled_leaves"] < int(rel.leaf.sum())


def _parents(rects: np.ndarray, level: np.ndarray) -> np.ndarray:
    """The node of the level above containing each node (from the rectangles alone)."""
    out = np.full(len(rects), -1)
    for i in np.flatnonzero(level > 0):
        up = np.flatnonzero(level == level[i] - 1)
        r = rects[up]
        inside = (r[:, 0] <= rects[i, 0]) & (r[:, 1] >= rects[i, 1]) & (r[:, 2] <= rects[i, 2]) & (
            r[:, 3] >= rects[i, 3])
        out[i] = up[np.flatnonzero(inside)[0]]
    return out


def test_without_pooling_it_is_the_least_squares_tree() -> None:
    """pool_threshold = 0: the leaves are the weighted least-squares consistent estimate of the
    raw counts (the released ``measured`` values)."""
    agg = _clustered()
    rel = release_with(MECH, agg, 0.5, {"pool_threshold": 0.0}, NoiseSource(9))
    parent = _parents(rel.rects, rel.level)
    sd = np.array([lv.sd for lv in rel.levels[-3:]])[rel.level]
    est, _ = tree_least_squares(parent, rel.level, rel.measured, sd**2)
    np.testing.assert_allclose(rel.noisy, est, atol=1e-8)


def test_pooling_cuts_the_error_over_empty_land() -> None:
    """Queries of empty 16 x 16 blocks: pooled answers are far closer to 0 than unpooled ones
    (same noise seeds).  Unpooled, each answer carries the noise of the cells it covers (SD of a
    few counts at ε = 0.2, scale 1/(0.2·0.95/3) ≈ 16); pooled, the pool's sum is spread over most
    of the grid, so a block gets about 1/16 of it."""
    agg = _clustered()
    blocks = np.array([[r, r + 16, c, c + 16] for r in range(0, 64, 16) for c in range(0, 64, 16)])
    empty = blocks[rect_sums_from_prefix(prefix_sums(agg.counts), blocks) == 0]
    assert len(empty) >= 8
    err = {}
    for thr in (0.0, 2.0):
        e = [np.abs(release_with(MECH, agg, 0.2, {"pool_threshold": thr}, NoiseSource(s)).answer(empty)).mean()
             for s in range(6)]
        err[thr] = float(np.mean(e))
    assert err[2.0] < 0.5 * err[0.0], err


def test_plan_has_the_count_and_three_levels_and_needs_a_guess() -> None:
    grid = Grid(B, 64, 64)
    levels = levels_of(MECH, grid, 1.0, n_estimate=9000)
    assert len(levels) == 4
    assert sum(lv.cost.value for lv in levels) == pytest.approx(1.0)
    assert [lv.in_partition for lv in levels] == [False, False, False, True]
    with pytest.raises(ParameterError, match="guess of the number of points"):
        MECH.plan_levels(grid, MECH.plan(grid, 1.0, None).cost, MECH.resolve_params({}), sensitivity=1,
                         n_estimate=None)
    with pytest.raises(ParameterError, match="alpha1 \\+ alpha2"):
        levels_of(MECH, grid, 1.0, {"alpha1": 0.6, "alpha2": 0.5}, n_estimate=9000)
