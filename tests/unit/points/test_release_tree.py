"""Tree releases: the partition seen at each depth, per-node budgets, and drawing it."""

from __future__ import annotations

import numpy as np
import pytest

from dpcore.data.domain import Bounds, Grid
from dpcore.points import viz
from dpcore.points.mechanisms.base import count_level
from dpcore.points.release import PartitionRelease
from dpcore.privacy.budget import pure

GRID = Grid(Bounds(0.0, 0.0, 4.0, 4.0), 4, 4)


def tree_release() -> PartitionRelease:
    """root -> west half (split again into south/north) + east half (a leaf)."""
    rects = np.array([
        [0, 4, 0, 4],  # 0 root, depth 0
        [0, 4, 0, 2],  # 1 west, depth 1
        [0, 4, 2, 4],  # 2 east, depth 1, leaf
        [0, 2, 0, 2],  # 3 south-west, depth 2, leaf
        [2, 4, 0, 2],  # 4 north-west, depth 2, leaf
    ])
    level = np.array([0, 1, 1, 2, 2])
    leaf = np.array([False, False, True, True, True])
    noisy = np.array([100.0, 60.0, 41.0, 22.0, 37.0])
    budget = np.array([0.1, 0.2, 0.7, 0.4, 0.4])
    levels = tuple(count_level(d, f"Depth {d}", pure(0.1 * (d + 1)), 1, 2**d, 16 / 2**d, d == 2)
                   for d in range(3))
    return PartitionRelease(
        mechanism="hand", mechanism_title="hand-made tree", params={}, grid=GRID, cost=pure(1.0),
        levels=levels, rects=rects, level=level, leaf=leaf, noisy=noisy, sd=np.ones(5),
        ci95=np.full(5, 2.0), sensitivity=1, user_cap=None, node_budget=budget, is_tree=True,
    )


def coverage(rel: PartitionRelease, idx: np.ndarray) -> np.ndarray:
    cov = np.zeros(GRID.shape, dtype=int)
    for r0, r1, c0, c1 in rel.rects[idx]:
        cov[r0:r1, c0:c1] += 1
    return cov


@pytest.mark.parametrize(("depth", "expected"), [(0, [0]), (1, [1, 2]), (2, [2, 3, 4]), (5, [2, 3, 4])])
def test_frontier_is_the_nodes_at_depth_plus_leaves_above(depth, expected):
    rel = tree_release()
    idx = rel.frontier(depth)
    assert sorted(idx.tolist()) == expected
    assert (coverage(rel, idx) == 1).all()


def test_density_of_a_frontier_spreads_its_counts():
    rel = tree_release()
    d1 = rel.density(rel.frontier(1))
    assert d1[:, :2].sum() == pytest.approx(60.0) and d1[:, 2:].sum() == pytest.approx(41.0)
    np.testing.assert_allclose(d1[:, :2], 60.0 / 8)
    leaves = rel.density()
    assert leaves.sum() == pytest.approx(22 + 37 + 41)


def test_node_budgets_override_level_budgets():
    rel = tree_release()
    np.testing.assert_array_equal(rel.budgets(), [0.1, 0.2, 0.7, 0.4, 0.4])
    flat = PartitionRelease(**{**rel.__dict__, "node_budget": None})
    np.testing.assert_allclose(flat.budgets(), [0.1, 0.2, 0.2, 0.3, 0.3])


def test_map_at_a_depth_draws_that_partition_with_budgets_in_the_hover():
    rel = tree_release()
    fig, info = viz.partition_figure(rel, depth=1)
    assert info["n_shown"] == 2 and not info["aggregated"]
    custom = np.asarray(fig.data[0].customdata)
    assert sorted(custom[:, 0].astype(float).tolist()) == [41.0, 60.0]
    assert set(custom[:, 5]) == {"ε = 0.2", "ε = 0.7"}
    assert "budget" in fig.data[0].hovertemplate
