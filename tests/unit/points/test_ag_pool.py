"""AG with pooled sparse cells (issue 27, item 3): the pooling rule, the parents of AG's tree, and
the release (AG's noisy counts, pooled estimates, consistent)."""

from __future__ import annotations

import numpy as np
import pytest
from points_helpers import RecordingNoise, release_with

from dpcore import catalog
from dpcore.data.domain import Aggregate, Bounds, Grid, prefix_sums, rect_sums_from_prefix
from dpcore.points.mechanisms import ag_pool as A
from dpcore.privacy.noise import NoiseSource

B = Bounds(0.0, 0.0, 1.0, 1.0)
MECH = catalog.get("points", "ag_pool")
AG = catalog.get("points", "ag")


def _clustered(side: int = 64, seed: int = 3) -> Aggregate:
    """Three dense clusters on empty land (seeded, public generator)."""
    rng = np.random.default_rng(seed)
    counts = np.zeros((side, side), dtype=np.int64)
    for r, c in ((10, 12), (40, 50), (50, 8)):
        rr = np.clip(rng.normal(r, 2, 3000).astype(int), 0, side - 1)
        cc = np.clip(rng.normal(c, 2, 3000).astype(int), 0, side - 1)
        np.add.at(counts, (rr, cc), 1)
    return Aggregate(Grid(B, side, side), counts, 0, 0, 1, None)


def test_pool_threshold_zero_changes_nothing() -> None:
    est = np.array([3.0, -2.0, 1.0])
    e, _, p = A.pool_sparse(est, np.ones(3), np.array([-1, -1, -1]), np.zeros(3, dtype=np.int64),
                            np.ones(3), 0.0)
    assert e.tolist() == est.tolist() and not p.any()


def test_pooling_keeps_a_groups_total_and_spreads_by_area() -> None:
    """Children of one parent below 2 SD share their (non-negative) sum in proportion to area; a
    pooled node's children follow it by area; the pool's SD is the root sum of its variances."""
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


def test_same_noisy_counts_as_ag_and_plain_ag_without_pooling() -> None:
    """The same draws as AG (scales and raw counts), and with pool_threshold = 0 AG's estimates."""
    agg = _clustered()
    n1, n2 = RecordingNoise(4), RecordingNoise(4)
    pooled = release_with(MECH, agg, 0.3, {}, n1)
    ag = release_with(AG, agg, 0.3, {}, n2)
    assert n1.scales == n2.scales
    np.testing.assert_array_equal(pooled.measured, ag.measured)
    np.testing.assert_array_equal(pooled.rects, ag.rects)
    plain = release_with(MECH, agg, 0.3, {"pool_threshold": 0.0}, NoiseSource(4))
    np.testing.assert_allclose(plain.noisy, ag.noisy, atol=1e-9)
    assert not np.allclose(pooled.noisy, ag.noisy)


def _contains(rel) -> np.ndarray:
    """The test's own parents of AG's release: the first-level cell that holds each sub-cell (-1: none)."""
    top = np.flatnonzero(rel.level == 0)
    r, p = rel.rects[:, None, :], rel.rects[top][None, :, :]
    inside = (p[..., 0] <= r[..., 0]) & (r[..., 1] <= p[..., 1]) & (p[..., 2] <= r[..., 2]) & (r[..., 3] <= p[..., 3])
    return np.where(rel.level == 0, -1, top[inside.argmax(axis=1)])


def test_parents_of_ags_tree() -> None:
    """The parents AG's release builds (and AG with pooling uses) are the cells holding each sub-cell."""
    agg = _clustered()
    rel = release_with(AG, agg, 1.0, {}, NoiseSource(5))
    same, parent = AG._release_tree(agg, rel.cost, rel.params, NoiseSource(5))  # the same draws
    np.testing.assert_array_equal(same.rects, rel.rects)
    np.testing.assert_array_equal(parent, _contains(rel))
    assert (parent[rel.level == 0] == -1).all() and (parent[rel.level == 1] >= 0).all()


def test_release_is_consistent_and_tiles_the_grid() -> None:
    agg = _clustered()
    rel = release_with(MECH, agg, 0.2, {}, NoiseSource(5))
    cover = np.zeros(agg.grid.shape, dtype=np.int64)
    for r0, r1, c0, c1 in rel.rects[rel.leaf]:
        cover[r0:r1, c0:c1] += 1
    assert (cover == 1).all()
    parent = _contains(rel)
    kids = np.flatnonzero(rel.level == 1)
    sums = np.bincount(parent[kids], rel.noisy[kids], minlength=rel.n_rects)
    np.testing.assert_allclose(sums[rel.level == 0], rel.noisy[rel.level == 0], atol=1e-9)
    assert 0 < rel.public["pooled_cells"] < int(rel.leaf.sum())


def test_pooling_cuts_the_error_over_empty_land() -> None:
    """Empty 16 x 16 blocks: pooled answers are far closer to 0 than AG's (same seeds).  AG's
    answer carries the noise of the few first-level cells the block covers (scale about
    1/(0.2·0.95/2) ≈ 10.5 each); pooled, the pool's summed noise is spread over most of the grid,
    so a block (1/16 of the grid) gets about a tenth of it."""
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
