"""Hypothesis invariants of the baseline tree mechanisms (AG, Quadtree, KD-tree) and of
dpcore.estimate.tree_inference: the leaves tile the grid, the released counts are consistent, every
root-to-leaf path spends the count budget, and the levels spend exactly ε."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from points_helpers import release_with

from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.estimate.tree_inference import consistent_counts, consistent_variance
from dpcore.points.mechanisms.ag import AdaptiveGrid
from dpcore.points.mechanisms.kdtree import KDTree
from dpcore.points.mechanisms.quadtree import Quadtree, path_remainders, quadtree_structure
from dpcore.points.release import PartitionRelease
from dpcore.privacy.calibration import laplace_scale_for_epsilon, split_geometric, split_uniform
from dpcore.privacy.noise import NoiseSource, discrete_laplace_variance

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

sides = st.integers(min_value=1, max_value=24)
epsilons = st.floats(min_value=0.05, max_value=5.0, allow_nan=False, allow_infinity=False)
seeds = st.integers(min_value=0, max_value=2**32 - 1)


def aggregate(rows: int, cols: int, seed: int, density: float, k: int) -> Aggregate:
    rng = np.random.default_rng(seed)
    counts = rng.poisson(density, size=(rows, cols)).astype(np.int64)
    if rows * cols > 1:  # a hot spot, so data-dependent structure has something to follow
        r, c = rng.integers(0, rows), rng.integers(0, cols)
        counts[r, c] += int(rng.integers(0, 500))
    return Aggregate(grid=Grid(Bounds(0.0, 0.0, 1.0, 1.0), rows, cols), counts=counts,
                     n_outside=0, n_capped=0, sensitivity=k, user_cap=None if k == 1 else k)


def tiles(shape: tuple[int, int], rects: np.ndarray) -> bool:
    diff = np.zeros((shape[0] + 1, shape[1] + 1), dtype=np.int64)
    np.add.at(diff, (rects[:, 0], rects[:, 2]), 1)
    np.add.at(diff, (rects[:, 1], rects[:, 2]), -1)
    np.add.at(diff, (rects[:, 0], rects[:, 3]), -1)
    np.add.at(diff, (rects[:, 1], rects[:, 3]), 1)
    cover = np.cumsum(np.cumsum(diff, axis=0), axis=1)[:-1, :-1]
    return bool(np.all(cover == 1))


def parents(rects: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """The unique node one depth up containing each node (nodes of a depth are disjoint)."""
    out = np.full(depth.size, -1, dtype=np.int64)
    for i in np.flatnonzero(depth > 0).tolist():
        r = rects[i]
        cand = np.flatnonzero((depth == depth[i] - 1) & (rects[:, 0] <= r[0]) & (rects[:, 1] >= r[1])
                              & (rects[:, 2] <= r[2]) & (rects[:, 3] >= r[3]))
        assert cand.size == 1
        out[i] = cand[0]
    return out


def check_release(rel: PartitionRelease, epsilon: float, count_budget: float) -> None:
    g = rel.grid
    # leaves tile the grid
    assert tiles(g.shape, rel.rects[rel.leaf])
    # children partition their parent; internal nodes equal the sum of their children
    parent = parents(rel.rects, rel.level)
    child = parent >= 0
    area = (rel.rects[:, 1] - rel.rects[:, 0]) * (rel.rects[:, 3] - rel.rects[:, 2])
    child_area = np.bincount(parent[child], weights=area[child], minlength=rel.n_rects)
    assert np.all(child_area[~rel.leaf] == area[~rel.leaf])
    assert np.all(child_area[rel.leaf] == 0)
    sums = np.bincount(parent[child], weights=rel.noisy[child], minlength=rel.n_rects)
    scale = max(1.0, float(np.abs(rel.noisy).max()))
    assert np.all(np.abs(sums[~rel.leaf] - rel.noisy[~rel.leaf]) <= 1e-9 * scale + 1e-6)
    # every root-to-leaf path spends the count budget, never more
    budget = rel.budgets()
    assert np.all(budget > 0)
    leaves = np.flatnonzero(rel.leaf)
    total = budget[leaves].copy()
    v = parent[leaves]
    while np.any(v >= 0):
        up = v >= 0
        total[up] += budget[v[up]]
        v = np.where(up, parent[np.maximum(v, 0)], -1)
    assert np.all(total <= count_budget * (1 + 1e-12))
    assert np.all(total >= count_budget * (1 - 1e-12))
    # the levels spend ε in all (sequential composition), never more
    spent = math.fsum(lv.cost.value for lv in rel.levels)
    assert spent <= epsilon * (1 + 1e-12) and spent >= epsilon * (1 - 1e-12)
    assert rel.cost.value == epsilon
    # post-inference SDs never exceed the raw noise SD of the node's own count
    values, inverse = np.unique(budget, return_inverse=True)
    raw = np.sqrt([discrete_laplace_variance(laplace_scale_for_epsilon(b, rel.sensitivity))
                   for b in values.tolist()])[inverse.ravel()]
    assert np.all(rel.sd > 0) and np.all(rel.sd <= raw * (1 + 1e-9))
    assert np.all(np.isfinite(rel.noisy))
    assert rel.is_tree and rel.node_budget is not None


@SETTINGS
@given(rows=sides, cols=sides, h=st.integers(0, 7))
def test_quadtree_structure_tiles(rows: int, cols: int, h: int) -> None:
    rects, parent, depth, leaf = quadtree_structure(rows, cols, h)
    assert tiles((rows, cols), rects[leaf])
    assert depth.max() <= h
    np.testing.assert_array_equal(parents(rects, depth), parent)
    fan = np.bincount(parent[parent >= 0], minlength=parent.size)
    assert set(fan[~leaf].tolist()) <= {2, 4}
    # only single cells stop above the height
    early = leaf & (depth < h)
    assert np.all((rects[early, 1] - rects[early, 0] == 1) & (rects[early, 3] - rects[early, 2] == 1))


@SETTINGS
@given(rows=sides, cols=sides, h=st.integers(1, 6), eps=epsilons, seed=seeds,
       uniform=st.booleans(), k=st.integers(1, 3))
def test_quadtree_release(rows, cols, h, eps, seed, uniform, k) -> None:
    agg = aggregate(rows, cols, seed, 2.0, k)
    params = {"height": h, "budget_split": "uniform" if uniform else "geometric"}
    rel = release_with(Quadtree(), agg, eps, params, NoiseSource(seed))
    check_release(rel, eps, eps)


@SETTINGS
@given(rows=sides, cols=sides, h=st.integers(1, 9), eps=epsilons, seed=seeds,
       share=st.floats(0.01, 0.9), k=st.integers(1, 3))
def test_kdtree_release(rows, cols, h, eps, seed, share, k) -> None:
    agg = aggregate(rows, cols, seed, 1.0, k)
    rel = release_with(KDTree(), agg, eps, {"height": h, "median_share": share}, NoiseSource(seed))
    count_levels = [lv for lv in rel.levels if "depth" in lv.extra]
    count_budget = math.fsum(lv.cost.value for lv in count_levels)
    if rows * cols > 1:
        assert count_budget == pytest.approx(eps * (1 - share), rel=1e-12)
    check_release(rel, eps, count_budget)
    assert rel.level.max() <= h
    fan = np.bincount(parents(rel.rects, rel.level)[rel.level > 0], minlength=rel.n_rects)
    assert np.all(fan[~rel.leaf] == 2)


@SETTINGS
@given(rows=sides, cols=sides, eps=epsilons, seed=seeds, alpha=st.floats(0.05, 0.95),
       public_n=st.integers(0, 10**6), density=st.floats(0.0, 50.0), k=st.integers(1, 3))
def test_ag_release(rows, cols, eps, seed, alpha, public_n, density, k) -> None:
    agg = aggregate(rows, cols, seed, density, k)
    rel = release_with(AdaptiveGrid(), agg, eps, {"alpha": alpha, "public_n": public_n},
                                 NoiseSource(seed))
    grid_levels = [lv for lv in rel.levels if "depth" in lv.extra]
    assert [lv.extra["depth"] for lv in grid_levels] == [0, 1]
    count_budget = math.fsum(lv.cost.value for lv in grid_levels)
    check_release(rel, eps, count_budget)
    assert np.all(rel.leaf == (rel.level == 1))
    assert len(rel.levels) == (2 if public_n > 0 else 3)


@SETTINGS
@given(total=st.floats(1e-6, 100.0), n=st.integers(1, 25), geometric=st.booleans())
def test_path_remainders(total: float, n: int, geometric: bool) -> None:
    parts = split_geometric(total, n, 2 ** (1 / 3)) if geometric else split_uniform(total, n)
    rem = path_remainders(total, parts)
    assert rem[0] == total
    for d in range(n):
        spent = math.fsum(parts[:d]) + rem[d]
        assert spent <= total * (1 + 1e-15)
        assert spent >= total * (1 - 1e-12)
        assert rem[d] >= parts[d] * (1 - 1e-12)


@st.composite
def trees(draw):
    n = draw(st.integers(1, 40))
    parent, depth = [], []
    for i in range(n):
        if i == 0 or draw(st.integers(0, 9)) == 0:
            parent.append(-1)
            depth.append(0)
        else:
            p = draw(st.integers(0, i - 1))
            parent.append(p)
            depth.append(depth[p] + 1)
    var = draw(st.lists(st.floats(1e-3, 1e3), min_size=n, max_size=n))
    y = draw(st.lists(st.floats(-1e4, 1e4), min_size=n, max_size=n))
    return np.array(parent), np.array(depth), np.array(y), np.array(var)


@SETTINGS
@given(tree=trees())
def test_inference_is_consistent_and_idempotent(tree) -> None:
    parent, depth, y, var = tree
    est = consistent_counts(parent, depth, y, var)
    child = parent >= 0
    sums = np.bincount(parent[child], weights=est[child], minlength=parent.size)
    internal = np.bincount(parent[child], minlength=parent.size) > 0
    tol = 1e-9 * max(1.0, float(np.abs(y).max()))
    assert np.all(np.abs(sums[internal] - est[internal]) <= tol)
    again = consistent_counts(parent, depth, est, var)
    assert np.all(np.abs(again - est) <= tol)
    P = consistent_variance(parent, depth, var)
    assert np.all((P > 0) & (P <= var))
