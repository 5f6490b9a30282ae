"""Unit tests of the baseline mechanisms AG, Quadtree and KD-tree and of dpcore.estimate.tree_inference.

Reference values are recomputed here independently of the code under test: the weighted
least-squares fit by numpy's ``lstsq``, variances of the consistent counts from the linear
map (one unit vector at a time), discrete Laplace facts from the pmf
``P(X = k) = (1 - q)/(1 + q) q^|k|``, report-noisy-max probabilities by exact summation,
and the AG / geometric-budget formulas by hand.  Statistical checks use fixed seeds and a
tolerance of 5 standard errors computed from the distribution.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from points_helpers import levels_of, release_with

from dpcore.core.record import validate_record
from dpcore.data.domain import Aggregate, Bounds, Grid, block_edges, block_rects, rect_sums
from dpcore.errors import ParameterError
from dpcore.estimate.tree_inference import (
    complete_tree_variances,
    consistent_counts,
    consistent_release,
    consistent_variance,
)
from dpcore.points.export import release_csv, release_record
from dpcore.points.mechanisms.ag import (
    AdaptiveGrid,
    first_level_side,
    second_level_sides,
    sub_blocks,
)
from dpcore.points.mechanisms.kdtree import KDTree, report_noisy_max
from dpcore.points.mechanisms.quadtree import (
    Quadtree,
    max_quadtree_height,
    path_remainders,
    quadtree_structure,
)
from dpcore.points.release import PartitionRelease
from dpcore.privacy.budget import zcdp
from dpcore.privacy.noise import NoiseSource

N_SE = 5.0
CBRT2 = 2 ** (1 / 3)


# ---------------------------------------------------------------------------------------------
# independent helpers
# ---------------------------------------------------------------------------------------------


def dlap_q(scale: float) -> float:
    return math.exp(-1.0 / scale)


def dlap_pmf(k: np.ndarray, scale: float) -> np.ndarray:
    q = dlap_q(scale)
    return (1 - q) / (1 + q) * q ** np.abs(k)


def dlap_cdf(a: np.ndarray, scale: float) -> np.ndarray:
    """P(X <= a) for integer a."""
    q = dlap_q(scale)
    a = np.asarray(a, dtype=np.float64)
    return np.where(a < 0, q ** (-a) / (1 + q), 1 - q ** (a + 1) / (1 + q))


def dlap_moments(scale: float) -> tuple[float, float]:
    """Variance and fourth moment, by summing the pmf."""
    k = np.arange(-(math.ceil(70 * scale) + 10), math.ceil(70 * scale) + 11).astype(np.float64)
    p = dlap_pmf(k, scale)
    return float(np.sum(k**2 * p)), float(np.sum(k**4 * p))


def make_aggregate(counts: np.ndarray, sensitivity: int = 1) -> Aggregate:
    counts = np.asarray(counts, dtype=np.int64)
    g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), counts.shape[0], counts.shape[1])
    return Aggregate(grid=g, counts=counts, n_outside=0, n_capped=0, sensitivity=sensitivity,
                     user_cap=None if sensitivity == 1 else sensitivity)


def coverage(shape: tuple[int, int], rects: np.ndarray) -> np.ndarray:
    cov = np.zeros(shape, dtype=np.int64)
    for r0, r1, c0, c1 in np.asarray(rects).tolist():
        cov[r0:r1, c0:c1] += 1
    return cov


def parents_of(rel: PartitionRelease) -> np.ndarray:
    """Parent of every node, from the rectangles: the smallest strictly shallower node
    (one depth up) that contains it."""
    parent = np.full(rel.n_rects, -1, dtype=np.int64)
    for i in range(rel.n_rects):
        d = rel.level[i]
        if d == 0:
            continue
        r = rel.rects[i]
        cand = np.flatnonzero(
            (rel.level == d - 1) & (rel.rects[:, 0] <= r[0]) & (rel.rects[:, 1] >= r[1])
            & (rel.rects[:, 2] <= r[2]) & (rel.rects[:, 3] >= r[3])
        )
        assert cand.size == 1, f"node {i} has {cand.size} possible parents"
        parent[i] = cand[0]
    return parent


def check_tree_release(rel: PartitionRelease, count_budget: float) -> None:
    """Leaves tile the grid, every internal node is the sum of its children, the children
    partition their parent, and every root-to-leaf path spends the count budget."""
    g = rel.grid
    assert rel.is_tree
    assert (coverage(g.shape, rel.rects[rel.leaf]) == 1).all()
    parent = parents_of(rel)
    child = parent >= 0
    sums = np.bincount(parent[child], weights=rel.noisy[child], minlength=rel.n_rects)
    areas = (rel.rects[:, 1] - rel.rects[:, 0]) * (rel.rects[:, 3] - rel.rects[:, 2])
    child_area = np.bincount(parent[child], weights=areas[child], minlength=rel.n_rects)
    internal = ~rel.leaf
    assert np.all(child_area[internal] == areas[internal])
    assert np.all(child_area[rel.leaf] == 0)
    np.testing.assert_allclose(sums[internal], rel.noisy[internal], rtol=0, atol=1e-6)
    budget = rel.budgets()
    for i in np.flatnonzero(rel.leaf).tolist():
        total, v = 0.0, i
        while v >= 0:
            total += budget[v]
            v = parent[v]
        assert total <= count_budget * (1 + 1e-12)
        assert total == pytest.approx(count_budget, rel=1e-12)
    assert np.all(rel.sd > 0) and np.all(rel.ci95 >= 0)


def random_tree(rng: np.random.Generator, n: int, max_depth: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """A random forest: 1–3 roots, arbitrary fan-out (single children included)."""
    parent = [-1] * int(rng.integers(1, 4))
    depth = [0] * len(parent)
    while len(parent) < n:
        p = int(rng.integers(0, len(parent)))
        if depth[p] >= max_depth:
            continue
        parent.append(p)
        depth.append(depth[p] + 1)
    return np.array(parent), np.array(depth)


def design(parent: np.ndarray) -> np.ndarray:
    """Node x leaf 0/1 matrix: which leaves lie under each node."""
    n = parent.size
    is_leaf = np.ones(n, dtype=bool)
    is_leaf[parent[parent >= 0]] = False
    leaves = np.flatnonzero(is_leaf)
    A = np.zeros((n, leaves.size))
    for j, leaf in enumerate(leaves.tolist()):
        v = leaf
        while v >= 0:
            A[v, j] = 1
            v = parent[v]
    return A


def linear_map(parent: np.ndarray, depth: np.ndarray, var: np.ndarray) -> np.ndarray:
    """The matrix M with consistent_counts(y) = M y (the estimator is linear)."""
    n = parent.size
    return np.column_stack([consistent_counts(parent, depth, np.eye(n)[j], var) for j in range(n)])


# ---------------------------------------------------------------------------------------------
# tree_inference
# ---------------------------------------------------------------------------------------------


class TestTreeInference:
    def test_matches_weighted_least_squares(self) -> None:
        rng = np.random.default_rng(11)
        for _ in range(60):
            parent, depth = random_tree(rng, int(rng.integers(1, 40)))
            n = parent.size
            var = rng.uniform(0.05, 20.0, n)
            y = rng.normal(0, 30, n)
            A = design(parent)
            w = 1 / np.sqrt(var)
            x, *_ = np.linalg.lstsq(A * w[:, None], y * w, rcond=None)
            np.testing.assert_allclose(consistent_counts(parent, depth, y, var), A @ x,
                                       rtol=0, atol=1e-8)
            cov = A @ np.linalg.inv(A.T @ (A / var[:, None])) @ A.T
            np.testing.assert_allclose(consistent_variance(parent, depth, var), np.diag(cov),
                                       rtol=1e-9, atol=1e-10)

    def test_node_order_does_not_matter(self) -> None:
        rng = np.random.default_rng(3)
        parent, depth = random_tree(rng, 30)
        var = rng.uniform(0.5, 4, parent.size)
        y = rng.normal(0, 5, parent.size)
        perm = rng.permutation(parent.size)
        inv = np.argsort(perm)
        p2 = np.where(parent[perm] >= 0, inv[np.maximum(parent[perm], 0)], -1)
        est = consistent_counts(parent, depth, y, var)
        est2 = consistent_counts(p2, depth[perm], y[perm], var[perm])
        np.testing.assert_allclose(est2, est[perm], atol=1e-10)

    def test_consistent_input_is_kept(self) -> None:
        rng = np.random.default_rng(5)
        parent, depth = random_tree(rng, 25)
        A = design(parent)
        truth = A @ rng.integers(0, 50, A.shape[1])
        est = consistent_counts(parent, depth, truth, rng.uniform(0.1, 3, parent.size))
        np.testing.assert_allclose(est, truth, atol=1e-9)

    def test_two_level_is_qardaji_weighted_average(self) -> None:
        """Qardaji et al. §V-B: v' = (α²m²v + (1−α)²s) / (α²m² + (1−α)²), then
        each sub-cell gets (v' − s)/m² added."""
        alpha, eps, m = 0.3, 0.8, 3
        v = 120.0
        subs = np.arange(m * m, dtype=np.float64) * 3 + 1
        s = subs.sum()
        parent = np.r_[-1, np.zeros(m * m, dtype=np.int64)]
        depth = np.r_[0, np.ones(m * m, dtype=np.int64)]
        var = np.r_[2 / (alpha * eps) ** 2, np.full(m * m, 2 / ((1 - alpha) * eps) ** 2)]
        est = consistent_counts(parent, depth, np.r_[v, subs], var)
        a2m2, b2 = (alpha * m) ** 2, (1 - alpha) ** 2
        v_new = (a2m2 * v + b2 * s) / (a2m2 + b2)
        assert est[0] == pytest.approx(v_new, rel=1e-12)
        np.testing.assert_allclose(est[1:], subs + (v_new - s) / (m * m), rtol=1e-12)

    def test_complete_tree_variances(self) -> None:
        for fanout, h in ((2, 5), (4, 3), (3, 2), (1, 3)):
            sig2 = np.linspace(5.0, 1.0, h + 1)
            parent, depth = [-1], [0]
            frontier = [0]
            for d in range(1, h + 1):
                nxt = []
                for p in frontier:
                    for _ in range(fanout):
                        parent.append(p)
                        depth.append(d)
                        nxt.append(len(parent) - 1)
                frontier = nxt
            depth_a = np.array(depth)
            got = consistent_variance(np.array(parent), depth_a, sig2[depth_a])
            want = complete_tree_variances(sig2, fanout)
            np.testing.assert_allclose(got, want[depth_a], rtol=1e-12)
            assert np.all(want <= sig2)

    def test_variance_is_the_linear_maps(self) -> None:
        rng = np.random.default_rng(8)
        parent, depth = random_tree(rng, 20)
        var = rng.uniform(0.2, 6, parent.size)
        M = linear_map(parent, depth, var)
        np.testing.assert_allclose(consistent_variance(parent, depth, var), (M**2) @ var, rtol=1e-9)

    def test_release_interval_scaling(self) -> None:
        parent = np.array([-1, 0, 0])
        depth = np.array([0, 1, 1])
        est, sd, ci = consistent_release(parent, depth, [10, 4, 5], [2.0, 1.0, 1.0], [6, 3, 3])
        assert est[0] == pytest.approx(est[1] + est[2])
        np.testing.assert_allclose(ci, np.array([6, 3, 3]) * sd / np.array([2.0, 1.0, 1.0]))
        assert np.all(sd <= np.array([2.0, 1.0, 1.0]))

    @pytest.mark.parametrize(
        "parent,depth,var",
        [
            ([-1, 0], [0, 2], [1, 1]),  # depth not parent's + 1
            ([-1, 0], [1, 2], [1, 1]),  # root not at depth 0
            ([-1, 5], [0, 1], [1, 1]),  # parent out of range
            ([-1, 0], [0, 1], [1, 0]),  # zero variance
            ([-1, 0], [0, 1], [1, np.inf]),
            ([-1, 0], [0, 1, 1], [1, 1]),  # lengths differ
        ],
    )
    def test_bad_trees_refused(self, parent, depth, var) -> None:
        with pytest.raises(ParameterError):
            consistent_counts(parent, depth, np.zeros(len(parent)), var)


# ---------------------------------------------------------------------------------------------
# parameters and plans
# ---------------------------------------------------------------------------------------------


class TestParams:
    def test_defaults(self) -> None:
        assert Quadtree().resolve_params({}) == {"height": 7, "budget_split": "geometric"}
        assert KDTree().resolve_params({}) == {"height": 16, "median_share": 0.15,
                                               "budget_split": "geometric"}
        assert AdaptiveGrid().resolve_params({}) == {"alpha": 0.5, "c": 10.0, "c2": 5.0,
                                                     "count_share": 0.05, "public_n": 0}

    @pytest.mark.parametrize(
        "mech,raw",
        [
            (Quadtree(), {"height": 0}),
            (Quadtree(), {"height": 11}),
            (Quadtree(), {"height": 2.5}),
            (Quadtree(), {"budget_split": "linear"}),
            (Quadtree(), {"depth": 3}),
            (KDTree(), {"height": 21}),
            (KDTree(), {"median_share": 0.0}),
            (KDTree(), {"median_share": 0.95}),
            (AdaptiveGrid(), {"alpha": 1.0}),
            (AdaptiveGrid(), {"alpha": 0.0}),
            (AdaptiveGrid(), {"c2": 0.0}),
            (AdaptiveGrid(), {"public_n": -1}),
        ],
    )
    def test_bad_values(self, mech, raw) -> None:
        with pytest.raises(ParameterError):
            mech.resolve_params(raw)

    def test_classes(self) -> None:
        for cls, name in ((AdaptiveGrid, "ag"), (Quadtree, "quadtree"), (KDTree, "kdtree")):
            m = cls()
            assert m.name == name and m.is_tree
            d = m.describe()
            for key in ("title", "summary", "when_to_use", "reference"):
                assert isinstance(d[key], str) and d[key]
        assert "zcdp" in AdaptiveGrid.definitions
        assert Quadtree.definitions == KDTree.definitions == ("pure",)

    @pytest.mark.parametrize("mech", [Quadtree(), KDTree()])
    def test_zcdp_refused_by_trees(self, mech) -> None:
        with pytest.raises(ParameterError, match="pure"):
            mech.cost(zcdp(0.1))
        with pytest.raises(ParameterError):
            levels_of(mech, Grid(Bounds(0, 0, 1, 1), 16, 16), zcdp(0.1), {})
        with pytest.raises(ParameterError):
            release_with(mech, make_aggregate(np.ones((4, 4))), zcdp(0.1), {}, NoiseSource(0))

    @pytest.mark.parametrize("mech", [Quadtree(), KDTree(), AdaptiveGrid()])
    @pytest.mark.parametrize("eps", [0.0, -1.0, float("nan"), 101.0])
    def test_bad_epsilon(self, mech, eps) -> None:
        with pytest.raises(ParameterError):
            levels_of(mech, Grid(Bounds(0, 0, 1, 1), 16, 16), eps, {}, n_estimate=1000)


def level_costs(levels) -> list[float]:
    return [lv.cost.value for lv in levels]


class TestQuadtreePlan:
    @pytest.mark.parametrize("eps", [0.1, 0.5, 3.0])
    def test_geometric_budgets(self, eps: float) -> None:
        g = Grid(Bounds(0, 0, 1, 1), 1024, 1024)
        levels = levels_of(Quadtree(), g, eps, {"height": 8})
        costs = level_costs(levels)
        assert len(costs) == 9
        assert math.fsum(costs) <= eps and math.fsum(costs) == pytest.approx(eps, rel=1e-12)
        for a, b in itertools.pairwise(costs):
            assert b / a == pytest.approx(CBRT2, rel=1e-12)
        # Cormode et al. Eq. 17 with i = h − d: ε_d = 2^(d/3) ε (2^(1/3) − 1) / (2^((h+1)/3) − 1)
        for d, c in enumerate(costs):
            assert c == pytest.approx(2 ** (d / 3) * eps * (CBRT2 - 1) / (2 ** (9 / 3) - 1), rel=1e-12)
        assert [lv.extra["depth"] for lv in levels] == list(range(9))
        assert [lv.n_counts for lv in levels] == [4**d for d in range(9)]
        assert [lv.in_partition for lv in levels] == [False] * 8 + [True]
        assert [lv.level for lv in levels] == list(range(9))

    def test_uniform_budgets(self) -> None:
        g = Grid(Bounds(0, 0, 1, 1), 64, 64)
        costs = level_costs(levels_of(Quadtree(), g, 0.6, {"height": 5, "budget_split": "uniform"}))
        np.testing.assert_allclose(costs, [0.1] * 6, rtol=1e-12)

    def test_height_capped_by_grid(self) -> None:
        assert max_quadtree_height(16, 16) == 4
        assert max_quadtree_height(17, 3) == 5
        assert max_quadtree_height(1, 1) == 0
        g = Grid(Bounds(0, 0, 1, 1), 16, 16)
        levels = levels_of(Quadtree(), g, 1.0, {"height": 10})
        assert len(levels) == 5 and levels[-1].n_counts == 256 and levels[-1].cells_per_count == 1

    def test_scale_and_inferred_sd(self) -> None:
        g = Grid(Bounds(0, 0, 1, 1), 32, 32)
        levels = levels_of(Quadtree(), g, 1.0, {"height": 5}, sensitivity=3)
        for lv in levels:
            assert lv.scale == pytest.approx(3 / lv.cost.value, rel=1e-12)
            var, _ = dlap_moments(lv.scale)
            assert lv.sd == pytest.approx(math.sqrt(var), rel=1e-9)
        want = np.sqrt(complete_tree_variances([lv.sd**2 for lv in levels], 4))
        np.testing.assert_allclose([lv.extra["sd_after_inference"] for lv in levels], want, rtol=1e-9)

    def test_expected_error_is_json(self) -> None:
        g = Grid(Bounds(0, 0, 1, 1), 64, 64)
        rows = Quadtree.expected_error(Quadtree().plan(g, 0.5, {}))
        assert rows[-1]["in_partition"] and rows[-1]["details"]["depth"] == len(rows) - 1


class TestQuadtreeStructure:
    @pytest.mark.parametrize("shape,h", [((1, 1), 3), ((1, 7), 4), ((3, 3), 2), ((5, 7), 3),
                                         ((8, 8), 3), ((6, 1), 5)])
    def test_tiles_and_nests(self, shape, h) -> None:
        rects, parent, depth, leaf = quadtree_structure(*shape, h)
        assert (coverage(shape, rects[leaf]) == 1).all()
        assert np.all(depth[1:] >= depth[:-1])  # level order
        for i in np.flatnonzero(parent >= 0).tolist():
            p, r = rects[parent[i]], rects[i]
            assert p[0] <= r[0] < r[1] <= p[1] and p[2] <= r[2] < r[3] <= p[3]
        fan = np.bincount(parent[parent >= 0], minlength=parent.size)[~leaf]
        assert set(fan.tolist()) <= {2, 4}

    def test_counts_of_a_square_tree(self) -> None:
        rects, parent, depth, leaf = quadtree_structure(8, 8, 3)
        assert np.bincount(depth).tolist() == [1, 4, 16, 64]
        assert leaf.sum() == 64 and np.all(leaf == (depth == 3))
        assert rects[1:5].tolist() == [[0, 4, 0, 4], [0, 4, 4, 8], [4, 8, 0, 4], [4, 8, 4, 8]]

    def test_odd_sides_single_row_halves(self) -> None:
        rects, parent, depth, leaf = quadtree_structure(3, 3, 2)
        # first split at ceil(3/2) = 2
        assert rects[1:5].tolist() == [[0, 2, 0, 2], [0, 2, 2, 3], [2, 3, 0, 2], [2, 3, 2, 3]]
        # the 1 x 1 quadrant is a leaf at depth 1; the 1 x 2 one splits in two
        assert leaf[4] and not leaf[3]
        assert rects[parent == 3].tolist() == [[2, 3, 0, 1], [2, 3, 1, 2]]


class TestAGPlan:
    def test_first_level_side_by_hand(self) -> None:
        # ceil(¼·sqrt(1e6·1/10)) = ceil(79.06) = 80
        assert first_level_side(1e6, 1.0, 10.0, 1) == 80
        # ¼·sqrt(1.6e6/10) = 100 exactly
        assert first_level_side(1.6e6, 1.0, 10.0, 1) == 100
        # small N: the floor of 10
        assert first_level_side(1e4, 0.1, 10.0, 1) == 10
        assert first_level_side(-50, 1.0, 10.0, 1) == 10
        # a cap of k = 2 records per person halves ε in the rule: ceil(¼·sqrt(5e4)) = 56
        assert first_level_side(1e6, 1.0, 10.0, 2) == 56

    def test_second_level_sides_by_hand(self) -> None:
        # sqrt(n'·ε₂/c2) with ε₂ = 0.5, c2 = 5: 1000 -> 10, 4000 -> 20, 1001 -> ceil(10.005) = 11
        got = second_level_sides(np.array([1000, 0, -5, 1, 4000, 1001]), 0.5, 5.0, 1)
        assert got.tolist() == [10, 1, 1, 1, 20, 11]
        assert second_level_sides(np.array([4000]), 0.5, 5.0, 4).tolist() == [10]

    def test_budgets_and_sides(self) -> None:
        g = Grid(Bounds(0, 0, 1, 1), 1024, 1024)
        levels = levels_of(AdaptiveGrid(), g, 1.0, {}, n_estimate=1e6)
        costs = level_costs(levels)
        np.testing.assert_allclose(costs, [0.05, 0.475, 0.475], rtol=1e-12)
        assert math.fsum(costs) <= 1.0
        # m1 = ceil(¼·sqrt(1e6·0.95/10)) = ceil(77.05) = 78
        assert levels[1].n_counts == 78 * 78
        assert [lv.in_partition for lv in levels] == [False, False, True]
        assert levels[1].extra["depth"] == 0 and levels[2].extra["depth"] == 1
        assert levels[2].n_counts >= levels[1].n_counts

    def test_public_n_and_alpha(self) -> None:
        g = Grid(Bounds(0, 0, 1, 1), 256, 256)
        levels = levels_of(AdaptiveGrid(), g, 2.0, {"public_n": 50_000, "alpha": 0.25})
        np.testing.assert_allclose(level_costs(levels), [0.5, 1.5], rtol=1e-12)
        assert levels[0].n_counts == 25 * 25  # ceil(¼·sqrt(5e4·2/10)) = ceil(25.0) = 25
        assert levels[0].extra["depth"] == 0

    def test_needs_a_guess(self) -> None:
        g = Grid(Bounds(0, 0, 1, 1), 64, 64)
        with pytest.raises(ParameterError, match="guess"):
            levels_of(AdaptiveGrid(), g, 1.0, {})

    def test_zcdp_plan(self) -> None:
        g = Grid(Bounds(0, 0, 1, 1), 64, 64)
        levels = levels_of(AdaptiveGrid(), g, zcdp(0.02), {}, n_estimate=1e5)
        assert all(lv.noise == "discrete_gaussian" for lv in levels)
        assert math.fsum(level_costs(levels)) == pytest.approx(0.02, rel=1e-12)


class TestKDPlan:
    @pytest.mark.parametrize("h,eps", [(8, 0.1), (16, 1.0), (3, 0.5)])
    def test_budgets(self, h: int, eps: float) -> None:
        g = Grid(Bounds(0, 0, 1, 1), 1024, 1024)
        levels = levels_of(KDTree(), g, eps, {"height": h})
        med, counts = levels[0], levels[1:]
        assert not med.in_partition and "Median" in med.name
        assert med.cost.value == pytest.approx(0.15 * eps, rel=1e-12)
        assert med.extra["levels"] == h
        assert med.scale == pytest.approx(2 / (0.15 * eps / h), rel=1e-12)
        costs = level_costs(counts)
        assert len(costs) == h + 1
        assert math.fsum(costs) == pytest.approx(0.85 * eps, rel=1e-12)
        for a, b in itertools.pairwise(costs):
            assert b / a == pytest.approx(CBRT2, rel=1e-12)
        total = math.fsum(level_costs(levels))
        assert total <= eps and total == pytest.approx(eps, rel=1e-12)
        assert [lv.extra["depth"] for lv in counts] == list(range(h + 1))
        assert [lv.level for lv in levels] == list(range(h + 2))
        assert [lv.in_partition for lv in counts] == [False] * h + [True]

    def test_single_cell_grid_spends_all_on_the_count(self) -> None:
        g = Grid(Bounds(0, 0, 1, 1), 1, 1)
        levels = levels_of(KDTree(), g, 0.7, {})
        assert level_costs(levels) == [0.7]


# ---------------------------------------------------------------------------------------------
# report noisy max
# ---------------------------------------------------------------------------------------------


def rnm_probabilities(u: np.ndarray, scale: float) -> np.ndarray:
    """Exact P(candidate j is released) for report-noisy-max with discrete Laplace noise,
    ties to the smallest index: Σ_z P(Z_j = z) Π_{i<j} P(Z_i < u_j+z−u_i) Π_{i>j} P(Z_i <= ...)."""
    z = np.arange(-int(80 * scale) - 10, int(80 * scale) + 11)
    out = np.empty(u.size)
    for j in range(u.size):
        p = dlap_pmf(z, scale)
        for i in range(u.size):
            if i == j:
                continue
            bound = u[j] + z - u[i] - (1 if i < j else 0)
            p = p * dlap_cdf(bound, scale)
        out[j] = p.sum()
    return out


def worst_ratio(utilities: list[list[int]], scale: float, delta: int = 1) -> float:
    """max over utility vectors, neighbours u' = u + s (s in {−Δ..Δ}^m) and outputs of
    P(out | u) / P(out | u')."""
    worst = 0.0
    for u in utilities:
        u = np.asarray(u)
        p = rnm_probabilities(u, scale)
        for s in itertools.product(range(-delta, delta + 1), repeat=u.size):
            p2 = rnm_probabilities(u + np.asarray(s), scale)
            worst = max(worst, float(np.max(p / p2)), float(np.max(p2 / p)))
    return worst


class TestReportNoisyMax:
    UTILS = [[0, 0, 0], [0, -1, -3], [-2, 0, -2], [-5, -1, 0]]

    def test_exact_probabilities_are_epsilon_dp(self) -> None:
        eps = 1.0
        assert rnm_probabilities(np.array([0, -1, -3]), 2 / eps).sum() == pytest.approx(1, abs=1e-12)
        assert worst_ratio(self.UTILS, scale=2 / eps) <= math.exp(eps) * (1 + 1e-9)
        # with sensitivity 2 (user cap k = 2) the scale 4/ε is still ε-DP
        assert worst_ratio([[0, -2, -1]], scale=4 / eps, delta=2) <= math.exp(eps) * (1 + 1e-9)

    def test_half_the_scale_would_not_be(self) -> None:
        """Utilities moving in opposite directions need the factor 2: the same check fails
        at scale Δ/ε, so the check above has power."""
        assert worst_ratio(self.UTILS, scale=1.0) > math.exp(1.0) * 1.05

    def test_sampler_matches_exact_probabilities(self) -> None:
        u = np.array([0, -1, -3, 0])  # a tie between the first and the last
        reps = 20_000
        scores = np.tile(u, reps)
        group = np.repeat(np.arange(reps), u.size)
        pick = report_noisy_max(scores, group, reps, 1.0, 1, NoiseSource(4))
        assert np.all(pick // u.size == np.arange(reps))
        freq = np.bincount(pick % u.size, minlength=u.size) / reps
        p = rnm_probabilities(u, 2.0)
        assert p[0] > p[3]  # the tie rule favours the first
        se = np.sqrt(p * (1 - p) / reps)
        assert np.all(np.abs(freq - p) <= N_SE * se), (freq, p)

    def test_groups_of_different_sizes(self) -> None:
        scores = np.array([5, 1000, 3, -7, 2000, 0])
        group = np.array([0, 0, 1, 2, 2, 2])
        pick = report_noisy_max(scores, group, 3, 50.0, 1, NoiseSource(1))
        assert pick.tolist() == [1, 2, 4]


# ---------------------------------------------------------------------------------------------
# releases: structure
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def clustered() -> Aggregate:
    rng = np.random.default_rng(7)
    counts = rng.poisson(0.2, size=(40, 56))
    counts[5:15, 30:45] += rng.poisson(30, size=(10, 15))
    return make_aggregate(counts)


class TestQuadtreeRelease:
    def test_structure(self, clustered) -> None:
        rel = release_with(Quadtree(), clustered, 0.8, {"height": 4}, NoiseSource(1))
        check_tree_release(rel, 0.8)
        assert rel.public["height"] == 4
        assert np.bincount(rel.level).tolist() == [1, 4, 16, 64, 256]
        assert rel.frontier(2).size == 16
        assert rel.budgets()[0] == pytest.approx(rel.levels[0].cost.value)

    def test_early_leaves_take_the_rest(self) -> None:
        agg = make_aggregate(np.arange(9).reshape(3, 3))
        rel = release_with(Quadtree(), agg, 1.0, {"height": 5}, NoiseSource(2))
        costs = level_costs(rel.levels)
        assert len(costs) == 3  # height capped at ceil(log2 3) = 2
        single_at_1 = (rel.level == 1) & rel.leaf
        assert single_at_1.sum() == 1
        assert rel.budgets()[single_at_1][0] == pytest.approx(costs[1] + costs[2], rel=1e-12)
        assert path_remainders(1.0, costs)[1] <= 1.0 - costs[0]
        check_tree_release(rel, 1.0)

    def test_noiseless_limit_is_the_truth(self, clustered) -> None:
        rel = release_with(Quadtree(), clustered, 100.0, {"height": 3}, NoiseSource(3))
        np.testing.assert_allclose(rel.noisy, rect_sums(clustered.counts, rel.rects), atol=0.05)

    def test_seeded_is_reproducible(self, clustered) -> None:
        a = release_with(Quadtree(), clustered, 0.5, {}, NoiseSource(9))
        b = release_with(Quadtree(), clustered, 0.5, {}, NoiseSource(9))
        np.testing.assert_array_equal(a.noisy, b.noisy)

    def test_export_validates(self, clustered) -> None:
        rel = release_with(Quadtree(), clustered, 0.5, {"height": 3}, NoiseSource(1))
        validate_record(release_record(rel))
        assert release_csv(rel).count(b"\n") == rel.n_rects + 1  # every node of the tree


class TestAGRelease:
    def test_structure_and_public_values(self, clustered) -> None:
        rel = release_with(AdaptiveGrid(), clustered, 1.0, {}, NoiseSource(1))
        e_g = rel.levels[1].cost.value + rel.levels[2].cost.value
        check_tree_release(rel, e_g)
        assert set(np.unique(rel.level).tolist()) == {0, 1}
        assert np.all(rel.leaf == (rel.level == 1))
        m1 = rel.public["first_level_side"]
        assert m1 == first_level_side(rel.public["noisy_point_count"], e_g, 10.0, 1)
        cells = rel.rects[rel.level == 0]
        np.testing.assert_array_equal(cells, block_rects(clustered.grid, m1, m1))
        validate_record(release_record(rel))

    def test_second_level_from_first_level_counts(self) -> None:
        # ε = 100: noise of scale 1/50 is 0 except with probability ~4e-22 per count
        rng = np.random.default_rng(2)
        counts = rng.poisson(2, size=(30, 30))
        counts[:6, :6] += 400
        counts[12:15, 12:15] += 10
        counts[21:24, 21:24] += 4
        agg = make_aggregate(counts)
        rel = release_with(AdaptiveGrid(), agg, 100.0, {"public_n": 1, "c2": 1000.0}, NoiseSource(5))
        cells = rel.rects[rel.level == 0]
        assert cells.shape[0] == 100  # m1 = max(10, ceil(¼·sqrt(1·100/10))) = 10
        n1 = rect_sums(counts, cells)
        m2 = second_level_sides(n1, 50.0, 1000.0, 1)  # ceil(sqrt(n'·50/1000))
        assert set(np.minimum(m2, 3).tolist()) == {1, 2, 3}
        subs, owner = sub_blocks(cells, m2, m2)
        np.testing.assert_array_equal(rel.rects[rel.level == 1], subs)
        np.testing.assert_allclose(rel.noisy, rect_sums(counts, rel.rects), atol=1e-6)

    def test_sub_blocks_are_block_edges(self) -> None:
        rng = np.random.default_rng(4)
        cells = block_rects(Grid(Bounds(0, 0, 1, 1), 37, 23), 5, 4)
        mr = rng.integers(1, 12, cells.shape[0])
        mc = rng.integers(1, 12, cells.shape[0])
        subs, owner = sub_blocks(cells, mr, mc)
        k = 0
        for i, (r0, r1, c0, c1) in enumerate(cells.tolist()):
            re = r0 + block_edges(r1 - r0, mr[i])
            ce = c0 + block_edges(c1 - c0, mc[i])
            for a in range(re.size - 1):
                for b in range(ce.size - 1):
                    assert subs[k].tolist() == [re[a], re[a + 1], ce[b], ce[b + 1]]
                    assert owner[k] == i
                    k += 1
        assert k == subs.shape[0]

    def test_zcdp_release(self, clustered) -> None:
        rel = release_with(AdaptiveGrid(), clustered, zcdp(0.05), {}, NoiseSource(2))
        check_tree_release(rel, rel.levels[1].cost.value + rel.levels[2].cost.value)
        assert rel.cost.definition == "zcdp"
        assert all(lv.noise == "discrete_gaussian" for lv in rel.levels)

    def test_user_cap_sizes_and_scales(self, clustered) -> None:
        agg = make_aggregate(clustered.counts, sensitivity=3)
        rel = release_with(AdaptiveGrid(), agg, 1.0, {"public_n": 20_000}, NoiseSource(1))
        assert rel.public["first_level_side"] == first_level_side(20_000, 1.0, 10.0, 3)
        assert rel.levels[0].scale == pytest.approx(3 / 0.5)


class TestKDRelease:
    def test_structure(self, clustered) -> None:
        rel = release_with(KDTree(), clustered, 1.0, {"height": 7}, NoiseSource(1))
        count_budget = math.fsum(level_costs(rel.levels[1:]))
        check_tree_release(rel, count_budget)
        assert rel.level.max() <= 7
        parent = parents_of(rel)
        assert np.all(np.bincount(parent[parent >= 0], minlength=rel.n_rects)[~rel.leaf] == 2)
        validate_record(release_record(rel))

    def test_median_split_at_large_epsilon(self) -> None:
        # ranks 5,5,5,6,6,8,8,8,11 of n = 12: |2r − n| is 0 at j = 4 and 5; ties -> j = 4
        counts = np.array([[5, 0, 0, 1, 0, 2, 0, 0, 3, 1]])
        rel = release_with(KDTree(), make_aggregate(counts), 100.0, {"height": 1, "median_share": 0.5},
                               NoiseSource(0))
        assert rel.rects[1:].tolist() == [[0, 1, 0, 4], [0, 1, 4, 10]]

    def test_axes_alternate(self) -> None:
        rng = np.random.default_rng(3)
        counts = rng.poisson(50, size=(16, 16))
        rel = release_with(KDTree(), make_aggregate(counts), 100.0, {"height": 2, "median_share": 0.5},
                               NoiseSource(0))
        d1 = rel.rects[rel.level == 1]
        d2 = rel.rects[rel.level == 2]
        # the root is cut between columns
        assert d1.tolist() == [[0, 16, 0, d1[0, 3]], [0, 16, d1[0, 3], 16]]
        # its halves between rows
        for i in (0, 1):
            a, b = d2[2 * i], d2[2 * i + 1]
            assert a[2:].tolist() == b[2:].tolist() == d1[i, 2:].tolist()
            assert a[0] == 0 and a[1] == b[0] and b[1] == 16

    def test_thin_range_splits_the_other_axis(self) -> None:
        counts = np.arange(8).reshape(8, 1)
        rel = release_with(KDTree(), make_aggregate(counts), 5.0, {"height": 3}, NoiseSource(2))
        check_tree_release(rel, math.fsum(level_costs(rel.levels[1:])))
        assert np.all(rel.rects[:, 2] == 0) and np.all(rel.rects[:, 3] == 1)


# ---------------------------------------------------------------------------------------------
# releases: the consistent counts are unbiased with the analytic variance (Monte Carlo)
# ---------------------------------------------------------------------------------------------


def check_moments(samples: np.ndarray, truth: np.ndarray, M: np.ndarray, var: np.ndarray,
                  m4: np.ndarray, sd_reported: np.ndarray) -> None:
    """samples: reps x nodes of consistent counts.  M: linear map of the inference,
    var / m4: second and fourth moment of every node's own noise."""
    reps = samples.shape[0]
    P = (M**2) @ var  # variance of every consistent count, from the linear map
    np.testing.assert_allclose(sd_reported, np.sqrt(P), rtol=1e-9)
    err = samples - truth
    mean = err.mean(axis=0)
    assert np.all(np.abs(mean) <= N_SE * np.sqrt(P / reps)), (mean, P)
    # E[(Σ a e)^4] = 3 P² + Σ a⁴ (m4 − 3 var²) for independent symmetric e
    mu4 = 3 * P**2 + (M**4) @ (m4 - 3 * var**2)
    s2 = (err**2).mean(axis=0)
    assert np.all(np.abs(s2 - P) <= N_SE * np.sqrt((mu4 - P**2) / reps)), (s2, P)


def own_noise_moments(rel: PartitionRelease, sensitivity: int = 1) -> tuple[np.ndarray, np.ndarray]:
    pairs = [dlap_moments(sensitivity / b) for b in rel.budgets().tolist()]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


class TestMonteCarlo:
    REPS = 1200

    def test_quadtree(self) -> None:
        rng = np.random.default_rng(21)
        agg = make_aggregate(rng.poisson(4, size=(8, 8)))
        mech = Quadtree()
        rels = [release_with(mech, agg, 1.0, {"height": 3}, NoiseSource(1000 + i)) for i in range(self.REPS)]
        rel = rels[0]
        var, m4 = own_noise_moments(rel)
        parent = parents_of(rel)
        M = linear_map(parent, rel.level, var)
        check_moments(np.array([r.noisy for r in rels]), rect_sums(agg.counts, rel.rects), M, var,
                      m4, rel.sd)
        # plan's data-free post-inference SD agrees with the release's
        for lv in rel.levels:
            d = lv.extra["depth"]
            assert lv.extra["sd_after_inference"] == pytest.approx(rel.sd[rel.level == d][0], rel=1e-9)
        # the scaled interval covers at least ~95 % (it errs on the wide side)
        errs = np.abs(np.array([r.noisy for r in rels]) - rect_sums(agg.counts, rel.rects))
        cover = (errs <= rel.ci95).mean(axis=0)
        se = math.sqrt(0.95 * 0.05 / self.REPS)
        assert np.all(cover >= 0.95 - N_SE * se), cover

    def test_ag(self) -> None:
        # 20 x 20 grid, public N -> m1 = 10 cells of 2 x 2; ~200 points a cell make m2 >= 5,
        # capped at 2, whatever the noise: a fixed forest of 100 roots with 4 children each
        agg = make_aggregate(np.full((20, 20), 50))
        mech = AdaptiveGrid()
        rels = [release_with(mech, agg, 1.0, {"public_n": 1000}, NoiseSource(5000 + i))
                for i in range(self.REPS)]
        rel = rels[0]
        assert all(r.n_rects == 500 for r in rels)
        var, m4 = own_noise_moments(rel)
        idx = np.r_[0, 1, np.flatnonzero(rel.level == 1)[:4]]  # two cells, a cell's sub-cells
        parent = parents_of(rel)
        M = linear_map(parent, rel.level, var)
        samples = np.array([r.noisy[idx] for r in rels])
        check_moments(samples, rect_sums(agg.counts, rel.rects)[idx], M[idx], var, m4, rel.sd[idx])
        want = complete_tree_variances([var[0], var[-1]], 4)
        np.testing.assert_allclose(rel.sd[[0, -1]], np.sqrt(want), rtol=1e-9)

    def test_kdtree(self) -> None:
        # a 2 x 2 grid has one candidate per split: the structure is fixed
        agg = make_aggregate(np.array([[3, 9], [0, 5]]))
        mech = KDTree()
        rels = [release_with(mech, agg, 0.7, {"height": 2}, NoiseSource(9000 + i)) for i in range(self.REPS)]
        rel = rels[0]
        assert all(np.array_equal(r.rects, rel.rects) for r in rels)
        assert rel.n_rects == 7
        var, m4 = own_noise_moments(rel)
        M = linear_map(parents_of(rel), rel.level, var)
        check_moments(np.array([r.noisy for r in rels]), rect_sums(agg.counts, rel.rects), M, var,
                      m4, rel.sd)
        want = complete_tree_variances([var[0], var[1], var[-1]], 2)
        np.testing.assert_allclose(rel.sd, np.sqrt(want[rel.level]), rtol=1e-9)
