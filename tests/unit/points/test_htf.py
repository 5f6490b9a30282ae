"""Unit tests of dpcore.points.mechanisms.htf against shared/specs/htf.md.

Test vectors come from the spec's Appendix A and §5.3; expected numbers are recomputed
here from the spec's closed forms, not read from the module.  Statistical checks use fixed
seeds and tolerances of 5 standard errors computed from the discrete Laplace pmf
``P(X = k) = (1 - q)/(1 + q)·q^|k|``, ``q = exp(-1/t)``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from points_helpers import levels_of, release_with

from dpcore.data.domain import Aggregate, Bounds, Grid, prefix_sums
from dpcore.errors import ParameterError
from dpcore.points.mechanisms.htf import (
    BAD_RELEASE_TABLE,
    HTF,
    PAPER_PRESET,
    bad_release_chance,
    budget_breakdown,
    count_budgets,
    max_height,
    remainder_budgets,
    tree_height,
)
from dpcore.points.mechanisms.htf_tree import (
    _LevelObjective,
    alg1_split_points,
    exhaustive_split_points,
    objective,
    objective_scale,
)
from dpcore.points.release import PartitionRelease
from dpcore.privacy.budget import pure, zcdp
from dpcore.privacy.noise import NoiseSource

N_SE = 5.0
CBRT2 = 2 ** (1 / 3)
G = 2.0**-10
MECH = HTF()
GRID_1024 = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 1024, 1024)


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def make_aggregate(counts: np.ndarray, sensitivity: int = 1) -> Aggregate:
    counts = np.asarray(counts, dtype=np.int64)
    g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), counts.shape[0], counts.shape[1])
    return Aggregate(grid=g, counts=counts, n_outside=0, n_capped=0, sensitivity=sensitivity,
                     user_cap=sensitivity if sensitivity > 1 else None)


class ZeroNoise(NoiseSource):
    """Test double: no noise at all (grid values still rounded to the grid)."""

    def __init__(self) -> None:
        super().__init__(0)

    def discrete_laplace(self, scale, size):  # type: ignore[override]
        return np.zeros(size, dtype=np.int64)

    def laplace_on_grid(self, values, scale, granularity_exp):  # type: ignore[override]
        return np.ldexp(np.rint(np.ldexp(np.asarray(values, dtype=np.float64), -granularity_exp)),
                        granularity_exp)


class NoNoiseAllowed(NoiseSource):
    """Fails the test if any noise is drawn."""

    def __init__(self) -> None:
        super().__init__(0)

    def random_uint64(self, size):  # type: ignore[override]
        raise AssertionError("noise was drawn before the parameters were validated")


def dlap_var(scale: float) -> float:
    q = math.exp(-1.0 / scale)
    return 2 * q / (1 - q) ** 2


def dlap_moment4(scale: float) -> float:
    r = math.ceil(70 * scale) + 10
    k = np.arange(-r, r + 1, dtype=np.float64)
    q = math.exp(-1.0 / scale)
    p = (1 - q) / (1 + q) * q ** np.abs(k)
    return float(np.sum(k**4 * p))


def spec_eps_i(eps_data: float, h: int, i: int) -> float:
    """Paper Eq. 17 as written in spec B3."""
    return eps_data * 2 ** ((h - i) / 3) * (CBRT2 - 1) / (2 ** ((h + 1) / 3) - 1)


def spec_rem(eps_data: float, h: int, i: int) -> float:
    """Spec §2.6 closed form ε_rem(i) = ε_0·(1 − 2^(−i/3))/(1 − 2^(−1/3))."""
    e0 = spec_eps_i(eps_data, h, 0)
    return e0 * (1 - 2 ** (-i / 3)) / (1 - 2 ** (-1 / 3))


def resolved(**over) -> dict:
    return MECH.resolve_params(over)


def leaves_coverage(rel: PartitionRelease) -> np.ndarray:
    cov = np.zeros(rel.grid.shape, dtype=np.int64)
    for r0, r1, c0, c1 in rel.rects[rel.leaf].tolist():
        cov[r0:r1, c0:c1] += 1
    return cov


def path_sums(rel: PartitionRelease) -> np.ndarray:
    """Sum of node_budget over every node whose rectangle contains each leaf."""
    r = rel.rects
    out = []
    for j in np.flatnonzero(rel.leaf):
        a = r[j]
        anc = (r[:, 0] <= a[0]) & (r[:, 1] >= a[1]) & (r[:, 2] <= a[2]) & (r[:, 3] >= a[3])
        out.append(math.fsum(rel.node_budget[anc]))
    return np.array(out)


# ---------------------------------------------------------------------------------------------
# Appendix: the objective and its sensitivity
# ---------------------------------------------------------------------------------------------

FIG_2B = np.array([[0, 0], [3, 3], [3, 3]])


class TestObjective:
    def test_fig_2b(self) -> None:
        assert objective(FIG_2B, 1, "rows") == 0.0
        assert objective(FIG_2B, 2, "rows") == 6.0
        assert objective(FIG_2B, 3, "rows") == 8.0  # "no split"
        # same geometry with rows and columns swapped
        assert objective(FIG_2B.T, 1, "cols") == 0.0
        assert objective(FIG_2B.T, 2, "cols") == 6.0

    @staticmethod
    def fast(block: np.ndarray, rects: np.ndarray, axis_x: np.ndarray, k: np.ndarray,
             exact_float: bool) -> np.ndarray:
        P = prefix_sums(block)
        node = np.full(block.shape, -1)
        for j, (r0, r1, c0, c1) in enumerate(rects.tolist()):
            node[r0:r1, c0:c1] = j
        flat = np.flatnonzero(block)
        r, c = np.divmod(flat, block.shape[1])
        cell_node = node.ravel()[flat]
        coord = np.where(axis_x[cell_node], c, r)
        S = np.array([block[r0:r1, c0:c1].sum() for r0, r1, c0, c1 in rects.tolist()])
        ev = _LevelObjective(P, rects, S, axis_x, cell_node, coord, block.ravel()[flat], exact_float)
        return ev(k, None)

    def test_fast_form_fig_2b(self) -> None:
        rects = np.array([[0, 3, 0, 2]])
        for exact_float in (True, False):
            got = [self.fast(FIG_2B, rects, np.array([False]), np.array([kk]), exact_float)[0]
                   for kk in (1, 2)]
            assert got == [0.0, 6.0]
        got = self.fast(FIG_2B.T.copy(), rects[:, [2, 3, 0, 1]], np.array([True]), np.array([1]), True)
        assert got[0] == 0.0

    @pytest.mark.parametrize("exact_float", [True, False])
    def test_fast_form_matches_direct_sum(self, exact_float: bool) -> None:
        rng = np.random.default_rng(11)
        for _ in range(40):
            rows, cols = rng.integers(2, 9, size=2)
            block = rng.poisson(rng.uniform(0.2, 5), size=(rows, cols)) * rng.integers(0, 2, size=(rows, cols))
            # two nodes side by side (split of the block at a random column or row)
            if rng.random() < 0.5 and cols >= 2:
                c = int(rng.integers(1, cols))
                rects = np.array([[0, rows, 0, c], [0, rows, c, cols]])
            else:
                r = int(rng.integers(1, rows))
                rects = np.array([[0, r, 0, cols], [r, rows, 0, cols]])
            U = rects[:, 1] - rects[:, 0]
            V = rects[:, 3] - rects[:, 2]
            axis_x = rng.random(2) < 0.5
            axis_x = np.where(np.where(axis_x, V, U) < 2, ~axis_x, axis_x)
            L = np.where(axis_x, V, U)
            if (L < 2).any():
                continue
            k = np.array([rng.integers(1, x) for x in L])
            got = self.fast(block, rects, axis_x, k, exact_float)
            for j, (r0, r1, c0, c1) in enumerate(rects.tolist()):
                sub = block[r0:r1, c0:c1]
                want = objective(sub, int(k[j]), "cols" if axis_x[j] else "rows")
                assert got[j] == pytest.approx(want, rel=1e-12, abs=1e-9)

    def test_sensitivity_brute_force(self) -> None:
        """Appendix A-2: |o_k(F) − o_k(F ± e_cell)| <= 2·(1 − 1/n_cluster) < 2."""
        rng = np.random.default_rng(5)
        worst = 0.0
        for _ in range(25):
            rows, cols = (int(x) for x in rng.integers(1, 6, size=2))
            F = rng.integers(0, 5, size=(rows, cols)) * rng.integers(0, 2, size=(rows, cols))
            for axis, lines in (("rows", rows), ("cols", cols)):
                for k in range(1, lines + 1):  # the no-split candidate included
                    base = objective(F, k, axis)
                    for r, c in itertools.product(range(rows), range(cols)):
                        line = r if axis == "rows" else c
                        n_cluster = k * (cols if axis == "rows" else rows) if line < k else \
                            (lines - k) * (cols if axis == "rows" else rows)
                        bound = 2 * (1 - 1 / n_cluster) + 1e-12
                        for delta in (1, -1):
                            if F[r, c] + delta < 0:
                                continue
                            F2 = F.copy()
                            F2[r, c] += delta
                            change = abs(objective(F2, k, axis) - base)
                            assert change <= bound
                            worst = max(worst, change / 2)
        assert worst < 1.0

    def test_bound_is_reached(self) -> None:
        # an all-zero cluster of n cells gaining one point: 2·(1 − 1/n) exactly
        F = np.zeros((4, 5), dtype=np.int64)
        F2 = F.copy()
        F2[0, 0] = 1
        assert objective(F2, 2, "rows") - objective(F, 2, "rows") == pytest.approx(2 * (1 - 1 / 10))


# ---------------------------------------------------------------------------------------------
# Appendix A-3 ..: heights and budgets
# ---------------------------------------------------------------------------------------------


class TestHeightAndBudgets:
    @pytest.mark.parametrize("eps,h", [(0.1, 15), (0.3, 16), (0.5, 17)])
    def test_la_heights(self, eps: float, h: int) -> None:
        assert tree_height(3.5e6, eps, 10) == h
        assert tree_height(3.5e6, eps, 10, 1, max_height(GRID_1024)) == h

    def test_height_edge_cases(self) -> None:
        assert max_height(GRID_1024) == 20
        assert max_height(Grid(Bounds(0, 0, 1, 1), 1, 1)) == 0
        assert max_height(Grid(Bounds(0, 0, 1, 1), 5, 3)) == 3 + 2
        assert tree_height(0, 1.0, 10) == 0
        assert tree_height(-500, 1.0, 10) == 0  # n̂ <= 0
        assert tree_height(9, 1.0, 10) == 0  # x < 1
        assert tree_height(10, 1.0, 10) == 0  # x = 1 -> log2 = 0
        assert tree_height(20, 1.0, 10) == 1
        # exact floor at a power of two: n·ε/c0 = 1024 exactly, and just below
        assert tree_height(10240, 1.0, 10) == 10
        assert tree_height(10239, 1.0, 10) == 9
        assert tree_height(1e12, 1.0, 10, 1, 20) == 20  # capped at h_max
        # a cap of k records per person divides ε in the rule
        assert tree_height(10240, 1.0, 10, 4) == 8

    def test_geometric_budgets(self) -> None:
        eps = count_budgets(0.0924, 15)
        assert len(eps) == 16
        assert math.fsum(eps) == pytest.approx(0.0924, rel=1e-12)
        assert math.fsum(eps) <= 0.0924
        for i in range(1, 16):
            assert eps[i - 1] / eps[i] == pytest.approx(CBRT2, rel=1e-12)
            assert eps[i] == pytest.approx(spec_eps_i(0.0924, 15, i), rel=1e-12)
        assert eps[15] == pytest.approx(6.108e-4, rel=5e-4)
        assert eps[0] == pytest.approx(1.9547e-2, rel=5e-5)
        assert eps[0] / eps[15] == pytest.approx(2 ** (15 / 3), rel=1e-12)

    def test_uniform_budgets(self) -> None:
        eps = count_budgets(0.6, 5, "uniform")
        assert eps == pytest.approx([0.1] * 6, rel=1e-12)
        with pytest.raises(ParameterError):
            count_budgets(0.6, 5, "linear")

    def test_remainders(self) -> None:
        eps = count_budgets(0.0924, 15)
        rem = remainder_budgets(eps, 0.0924)
        assert rem[0] == 0.0 and rem[16] == 0.0924
        assert rem[1] == pytest.approx(eps[0], rel=1e-12)
        for i, want in zip(range(1, 6), (0.0195, 0.0351, 0.0474, 0.0571, 0.0649), strict=True):
            assert rem[i] == pytest.approx(want, abs=5e-5)
        assert rem[15] == pytest.approx(0.0918, abs=5e-5)
        for i in range(1, 16):
            assert rem[i] == pytest.approx(spec_rem(0.0924, 15, i), rel=1e-12)
            assert rem[i] == pytest.approx(math.fsum(eps[:i]), rel=1e-12)
            # open point 5: the path never exceeds ε_data, even in exact arithmetic
            from fractions import Fraction

            assert sum(Fraction(e) for e in eps[i:]) + Fraction(rem[i]) <= Fraction(0.0924)
            assert math.fsum(eps[i:]) + rem[i] == pytest.approx(0.0924, rel=1e-12)

    def test_accounting_paper_setting(self) -> None:
        p = resolved(**PAPER_PRESET)
        b = budget_breakdown(0.1, p, 15)
        assert b.eps_height == 1e-4
        assert b.eps_prt == pytest.approx(0.0075, rel=1e-12)
        assert b.eps_data == pytest.approx(0.0924, rel=1e-12)
        assert b.eps_height + b.eps_prt + b.eps_data == pytest.approx(0.1, rel=1e-12)

    def test_total_mode_spreads_share(self) -> None:
        b = budget_breakdown(0.5, resolved(), 8)
        assert b.eps_height == pytest.approx(0.005)
        assert b.eps_prt_level == pytest.approx(0.05 / 8, rel=1e-12)
        assert b.eps_data == pytest.approx(0.5 * (1 - 0.01 - 0.10), rel=1e-12)

    def test_h0_gives_partition_share_to_counts(self) -> None:
        b = budget_breakdown(0.5, resolved(), 0)  # review open point 2
        assert b.eps_prt == 0
        assert b.eps_data == pytest.approx(0.5 * 0.99, rel=1e-12)
        assert b.by_height == (b.eps_data,)

    def test_objective_scale(self) -> None:
        t = objective_scale(1, 7, 5e-4)
        assert float(t) == pytest.approx((2 + G) * 7 / 5e-4, rel=1e-15)
        assert float(t) == pytest.approx(28_000, rel=1e-3)  # spec: 2(2T+1)/ε'_prt
        assert float(objective_scale(1, 7, 1e-3)) == pytest.approx(14_000, rel=1e-3)
        # exactly ε'_prt/(2T+1) per evaluation, rounding term included
        from dpcore.privacy.noise import real_noise_epsilon

        assert real_noise_epsilon(2, t, -10) == pytest.approx(5e-4 / 7, rel=1e-15)
        assert float(objective_scale(3, 7, 5e-4)) == pytest.approx((6 + G) * 7 / 5e-4, rel=1e-15)


# ---------------------------------------------------------------------------------------------
# Appendix A-7: the split search
# ---------------------------------------------------------------------------------------------


def reachable(L: int, T: int) -> set[int]:
    """Every k the corrected Algorithm 1 (spec §2.4.2) can return, over all decisions."""
    out: set[int] = set()

    def go(lo: int, hi: int, k: int, r: int) -> None:
        if r == T:
            out.add(k)
            return
        k1 = lo + (k - lo) // 2
        k2 = k + math.ceil((hi - k) / 2)
        if k1 == k and k2 == k:
            out.add(k)
            return
        go(k1, k2, k, r + 1)
        if k1 != k:
            go(lo, k, k1, r + 1)
        if k2 != k:
            go(k, hi, k2, r + 1)

    go(1, L - 1, 1 + (L - 2) // 2, 0)
    return out


class TestSplitSearch:
    def test_reachable_positions_spec_counts(self) -> None:
        assert len(reachable(1024, 3)) == 15  # 2^(T+1) − 1 on a power of two
        assert len(reachable(1000, 3)) == 21  # spec §2.4.2 note

    @pytest.mark.parametrize("T", [1, 3, 6])
    def test_evaluations_and_range(self, T: int) -> None:
        rng = np.random.default_rng(T)
        L = rng.integers(2, 300, size=4000)
        table = [rng.normal(0, 1, size=int(x) + 1) for x in L]
        calls = {"n": 0}

        def evaluate(k, needed):
            calls["n"] += 1
            return np.array([table[j][int(k[j])] for j in range(L.size)])

        def add_noise(values, idx):
            return values + rng.laplace(0, 1, size=values.size)

        rounds = np.full(L.size, T)
        k, n_eval = alg1_split_points(L, rounds, evaluate, add_noise)
        assert (k >= 1).all() and (k <= L - 1).all()
        assert (n_eval <= 2 * T + 1).all() and (n_eval >= 1).all()
        assert calls["n"] <= 2 * T + 1
        for L_val in (2, 3, 17, 100, 299):
            sel = L == L_val
            if sel.any():
                assert set(k[sel].tolist()) <= reachable(L_val, T)

    def test_all_reachable_positions_occur(self) -> None:
        rng = np.random.default_rng(3)
        L = np.full(20_000, 1000)
        k, _ = alg1_split_points(L, np.full(L.size, 3),
                                 lambda k, needed: np.zeros(L.size),
                                 lambda v, idx: v + rng.normal(size=v.size))
        assert set(k.tolist()) == reachable(1000, 3)

    def test_noise_free_finds_unimodal_minimum(self) -> None:
        # minimum on a reachable position: o(k) = |k − 384| on L = 1024, T = 3 (resolution 64)
        L = np.array([1024])
        k, n_eval = alg1_split_points(L, np.array([3]),
                                      lambda k, needed: np.abs(k - 384).astype(float),
                                      lambda v, idx: v)
        assert k.tolist() == [384]
        assert n_eval.tolist() == [7]

    def test_collapse_spends_less(self) -> None:
        # L = 2: the only candidate is 1; nothing beyond the centre is evaluated (S11)
        k, n_eval = alg1_split_points(np.array([2, 3]), np.array([5, 5]),
                                      lambda k, needed: np.zeros(2), lambda v, idx: v)
        assert k.tolist() == [1, 1]
        assert n_eval[0] == 1
        assert n_eval[1] <= 11

    def test_exhaustive(self) -> None:
        L = np.array([2, 5, 9])
        obj = {0: [9, 0], 1: [9, 3, 1, 2, 1], 2: [9, 5, 4, 3, 2, 1, 0.5, 0.2, 0.1]}
        k, n_eval = exhaustive_split_points(
            L, lambda k, needed: np.array([obj[j][int(k[j])] for j in range(3)], dtype=float),
            lambda v, idx: v)
        assert k.tolist() == [1, 2, 8]  # ties keep the smaller offset
        assert n_eval.tolist() == [1, 4, 8]

    def test_fig_2b_split_without_noise(self) -> None:
        # 3 rows x 2 cols, one level: the root (height 1) cuts between rows (P5) after row 0
        rel = release_with(MECH, make_aggregate(FIG_2B), 1.0, {"height": 1, "theta": 0, "kappa": 1},
                           ZeroNoise())
        assert rel.rects.tolist() == [[0, 3, 0, 2], [0, 1, 0, 2], [1, 3, 0, 2]]
        assert rel.leaf.tolist() == [False, True, True]
        assert rel.noisy.tolist() == [12.0, 0.0, 12.0]


# ---------------------------------------------------------------------------------------------
# Appendix: answers
# ---------------------------------------------------------------------------------------------


class TestAnswers:
    def test_fig_2a_query(self) -> None:
        g = Grid(Bounds(0, 0, 1, 1), 3, 3)
        # C1: 2 cells (0), C2: 4 cells (12), C3: 1 cell (4), C4: 2 cells (2)
        rects = np.array([[0, 2, 2, 3], [0, 2, 0, 2], [2, 3, 0, 1], [2, 3, 1, 3]])
        n = 4
        rel = PartitionRelease(
            mechanism="htf", mechanism_title="HTF", params={}, grid=g, cost=pure(1.0), levels=(),
            rects=rects, level=np.zeros(n, dtype=np.int64), leaf=np.ones(n, dtype=bool),
            noisy=np.array([0.0, 12.0, 4.0, 2.0]), sd=np.zeros(n), ci95=np.zeros(n),
            sensitivity=1, user_cap=None, is_tree=True,
        )
        # one cell of C2, (1,1), and one cell of C4, (2,1)
        assert rel.answer(np.array([[1, 3, 1, 2]]))[0] == pytest.approx(12 / 4 + 2 / 2)

    def test_noise_free_limit(self) -> None:
        """A-10: no pruning; leaves at height 0 or single cells; only uniformity error."""
        rng = np.random.default_rng(8)
        counts = rng.integers(1, 40, size=(13, 10))
        agg = make_aggregate(counts)
        rel = release_with(MECH, agg, 100.0, {"height": 6, "theta": 0, "kappa": 1}, ZeroNoise())
        h = rel.public["height"]
        assert h == 6
        assert np.array_equal(leaves_coverage(rel), np.ones(counts.shape, dtype=np.int64))
        r = rel.rects[rel.leaf]
        single = (r[:, 1] - r[:, 0] == 1) & (r[:, 3] - r[:, 2] == 1)
        assert ((rel.level[rel.leaf] == h) | single).all()
        # leaf counts are exact without noise
        true = np.array([counts[a:b, c:d].sum() for a, b, c, d in rel.rects.tolist()])
        assert np.array_equal(rel.noisy, true)
        # whole-leaf queries are exact; the total too
        assert rel.answer(np.array([[0, 13, 0, 10]]))[0] == pytest.approx(counts.sum())
        assert np.allclose(rel.answer(r), true[rel.leaf])

    def test_uniform_data_answers_exact(self) -> None:
        counts = np.full((8, 8), 20)
        rel = release_with(MECH, make_aggregate(counts), 100.0, {"height": 3, "theta": 0, "kappa": 1},
                           ZeroNoise())
        q = np.array([[1, 6, 2, 7], [0, 3, 0, 8], [5, 8, 4, 5]])
        want = [20 * 25, 20 * 24, 20 * 3]
        assert rel.answer(q) == pytest.approx(want)


# ---------------------------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------------------------


class TestParams:
    def test_defaults(self) -> None:
        assert MECH.resolve_params({}) == {
            "height_share": 0.01, "partition_share": 0.10, "theta": 50, "kappa": 5, "T": 3,
            "c0": 10.0, "height": 0, "public_n": 0, "height_epsilon": 0.0,
            "partition_epsilon_per_level": 0.0, "allocation": "geometric", "split_method": "alg1",
            "first_axis": "paper", "extent_first": False, "adaptive_rounds": False,
        }
        assert MECH.name == "htf" and MECH.title == "HTF (homogeneous tree)"
        assert MECH.is_tree and MECH.needs_n_guess and MECH.definitions == ("pure",)
        essential = {p.name for p in MECH.params if not p.advanced}
        assert essential == {"height_share", "partition_share", "theta"}

    @pytest.mark.parametrize("raw", [
        {"T": 0}, {"T": 11}, {"T": "2.5"}, {"c0": 0.5}, {"c0": 101}, {"theta": -1},
        {"theta": 10_001}, {"kappa": 0}, {"kappa": 1001}, {"height": -1}, {"height": 25},
        {"height_share": 0.0}, {"height_share": 0.3}, {"partition_share": 0.6},
        {"partition_share": 0}, {"allocation": "linear"}, {"split_method": "noisy_min"},
        {"first_axis": "z"}, {"height_epsilon": -1e-4}, {"partition_epsilon_per_level": 2.0},
        {"public_n": -5}, {"extent_first": "maybe"},
    ])
    def test_bad_values(self, raw: dict) -> None:
        with pytest.raises(ParameterError) as ei:
            MECH.resolve_params(raw)
        assert next(iter(raw)) in str(ei.value)

    @pytest.mark.parametrize("raw", [
        {"T": 1}, {"T": 10}, {"c0": 1}, {"c0": 100}, {"theta": 0}, {"theta": 10_000},
        {"kappa": 1}, {"kappa": 1000}, {"partition_share": 0.5},
    ])
    def test_range_inclusive(self, raw: dict) -> None:
        key, value = next(iter(raw.items()))
        assert MECH.resolve_params(raw)[key] == value

    def test_unknown(self) -> None:
        with pytest.raises(ParameterError, match="'depth'"):
            MECH.resolve_params({"depth": 3})

    def test_manual_height_too_deep_for_grid(self) -> None:
        g = Grid(Bounds(0, 0, 1, 1), 16, 16)  # h_max = 8
        levels_of(MECH, g, 1.0, {"height": 8})
        with pytest.raises(ParameterError, match="at most 8"):
            levels_of(MECH, g, 1.0, {"height": 9})
        with pytest.raises(ParameterError, match="at most 8"):
            release_with(MECH, make_aggregate(np.ones((16, 16))), 1.0, {"height": 9}, NoNoiseAllowed())

    def test_overspent_budget_refused_before_noise(self) -> None:
        # 20 levels x 0.01 > 0.1: refused for the worst-case height, before drawing n̂
        params = {"partition_epsilon_per_level": 0.01}
        with pytest.raises(ParameterError, match="nothing for the counts"):
            levels_of(MECH, GRID_1024, 0.1, params, n_estimate=1000)
        agg = make_aggregate(np.ones((1024, 1024), dtype=np.int64))
        with pytest.raises(ParameterError, match="nothing for the counts"):
            release_with(MECH, agg, 0.1, params, NoNoiseAllowed())
        with pytest.raises(ParameterError):
            levels_of(MECH, GRID_1024, 0.1, {"height_epsilon": 0.1, "height": 0}, n_estimate=10)

    def test_too_many_points_refused(self) -> None:
        with pytest.raises(ParameterError, match="fewer than"):
            release_with(MECH, make_aggregate(np.array([[2**36, 0]])), 1.0, {}, NoiseSource(1))

    def test_zcdp_refused(self) -> None:
        with pytest.raises(ParameterError, match="pure ε-DP"):
            levels_of(MECH, GRID_1024, zcdp(0.5), {}, n_estimate=1e6)
        with pytest.raises(ParameterError, match="pure ε-DP"):
            release_with(MECH, make_aggregate(np.ones((4, 4))), zcdp(0.5), {}, NoNoiseAllowed())
        with pytest.raises(ParameterError):
            MECH.cost(zcdp(0.5), {})
        assert MECH.cost(0.5, {}) == pure(0.5)

    @pytest.mark.parametrize("eps", [0, -1, "x", 101])
    def test_bad_epsilon(self, eps) -> None:
        with pytest.raises(ParameterError):
            levels_of(MECH, GRID_1024, eps, {}, n_estimate=1e6)

    def test_needs_guess_unless_manual_height(self) -> None:
        with pytest.raises(ParameterError, match="guess"):
            levels_of(MECH, GRID_1024, 0.5, {})
        assert levels_of(MECH, GRID_1024, 0.5, {"height": 10})
        assert levels_of(MECH, GRID_1024, 0.5, {"public_n": 100_000})

    def test_describe(self) -> None:
        d = MECH.describe()
        assert d["privacy"] == "pure epsilon-DP" and d["tree"] is True
        assert [p["name"] for p in d["params"]] == [p.name for p in MECH.params]


# ---------------------------------------------------------------------------------------------
# plans (spec §6.2, LA table §5.3)
# ---------------------------------------------------------------------------------------------


def depth_levels(levels):
    return [lv for lv in levels if "depth" in lv.extra]


class TestPlan:
    @pytest.mark.parametrize("eps,h,eps_level,eps_prt,eps_data,root,root_scale,bottom,bottom_scale", [
        (0.1, 15, 5e-4, 0.0075, 0.0924, 6.11e-4, 1637, 0.01955, 51.2),
        (0.1, 15, 1e-3, 0.015, 0.0849, 5.61e-4, 1782, 0.01796, 55.7),
        (0.3, 16, 5e-4, 0.008, 0.2919, 1.52e-3, 656, 0.06143, 16.3),
        (0.3, 16, 1e-3, 0.016, 0.2839, 1.48e-3, 675, 0.05974, 16.7),
        (0.5, 17, 5e-4, 0.0085, 0.4914, 2.03e-3, 493, 0.10298, 9.7),
        (0.5, 17, 1e-3, 0.017, 0.4829, 1.99e-3, 502, 0.10120, 9.9),
    ])
    def test_la_table(self, eps, h, eps_level, eps_prt, eps_data, root, root_scale, bottom,
                      bottom_scale) -> None:
        params = {**PAPER_PRESET, "partition_epsilon_per_level": eps_level}
        levels = levels_of(MECH, GRID_1024, eps, params, n_estimate=3.5e6)
        height_lv, split_lv, *depths = levels
        assert [lv.level for lv in levels] == list(range(len(levels)))
        assert height_lv.cost.value == 1e-4 and height_lv.scale == pytest.approx(10_000)
        assert height_lv.n_counts == 1 and not height_lv.in_partition
        assert len(depths) == h + 1
        assert split_lv.cost.value == pytest.approx(eps_prt, rel=1e-12)
        data = math.fsum(lv.cost.value for lv in depths)
        assert data == pytest.approx(eps_data, rel=1e-12)

        def sig(x: float, digits: int) -> float:
            return float(f"{x:.{digits}g}")

        assert sig(depths[0].cost.value, 3) == root
        assert round(depths[0].scale) == root_scale
        assert sig(depths[-1].cost.value, 4 if bottom < 0.1 else 5) == bottom
        assert round(depths[-1].scale, 1) == bottom_scale
        assert split_lv.scale == pytest.approx((2 + G) * 7 / eps_level, rel=1e-12)
        assert split_lv.extra["data_driven_depth"] == (7 if eps_level == 5e-4 else 8)

    @pytest.mark.parametrize("n,eps,c0", [(3.5e6, 0.1, 10), (1e5, 1.0, 10), (5e4, 0.5, 3.0),
                                          (50, 0.5, 10), (1e9, 2.0, 10)])
    def test_height_rule_and_budget_sum(self, n, eps, c0) -> None:
        levels = levels_of(MECH, GRID_1024, eps, {"c0": c0}, n_estimate=n)
        x = n * eps / c0
        h = min(math.floor(math.log2(x)), 20) if x >= 1 else 0
        depths = depth_levels(levels)
        assert len(depths) == h + 1
        assert levels[0].extra["height"] == h
        assert math.fsum(lv.cost.value for lv in levels) == pytest.approx(eps, rel=1e-12)
        assert levels[0].cost.value == pytest.approx(0.01 * eps, rel=1e-12)
        if h >= 1:
            assert levels[1].cost.value == pytest.approx(0.10 * eps, rel=1e-12)
            assert levels[1].noise == "discrete_laplace_grid"
            assert levels[1].extra["epsilon_per_level"] == pytest.approx(0.10 * eps / h, rel=1e-12)
        else:
            assert len(levels) == 2  # no split search at h = 0
            assert depths[0].cost.value == pytest.approx(0.99 * eps, rel=1e-12)

    def test_depth_levels(self) -> None:
        n, eps, theta = 2e6, 0.4, 50
        levels = levels_of(MECH, GRID_1024, eps, {"theta": theta}, n_estimate=n)
        depths = depth_levels(levels)
        h = len(depths) - 1
        eps_data = math.fsum(lv.cost.value for lv in depths)
        assert eps_data == pytest.approx(eps * 0.89, rel=1e-12)
        for d, lv in enumerate(depths):
            i = h - d
            assert lv.extra["depth"] == d
            assert lv.n_counts == 2**d
            assert lv.cells_per_count == pytest.approx(GRID_1024.n_cells / 2**d)
            assert lv.in_partition == (d == h)
            assert lv.cost.value == pytest.approx(spec_eps_i(eps_data, h, i), rel=1e-12)
            assert lv.scale == pytest.approx(1 / lv.cost.value, rel=1e-12)
            if d:
                assert lv.cost.value / depths[d - 1].cost.value == pytest.approx(CBRT2, rel=1e-12)
            if i >= 1:
                assert lv.extra["leaf_budget_if_pruned_here"] == pytest.approx(
                    spec_rem(eps_data, h, i), rel=1e-12)
                c = n / 2**d
                assert lv.extra["p_stop_by_noise"] == pytest.approx(
                    0.5 * math.exp(-abs(c - theta) * lv.cost.value), rel=1e-12)
            else:
                assert lv.extra["leaf_budget_if_pruned_here"] == lv.cost.value
                assert lv.extra["p_stop_by_noise"] is None
        # every path adds up to ε_data, whatever depth it stops at
        for d, lv in enumerate(depths[:-1]):
            spent = math.fsum(x.cost.value for x in depths[: d + 1])
            assert spent + lv.extra["leaf_budget_if_pruned_here"] == pytest.approx(eps_data, rel=1e-12)

    def test_p_stop_is_half_at_theta(self) -> None:
        levels = levels_of(MECH, GRID_1024, 1.0, {"theta": 100, "height": 4}, n_estimate=1600)
        depth4 = depth_levels(levels)[4]  # expected count 1600/16 = 100 = θ, but height 0
        assert depth4.extra["p_stop_by_noise"] is None
        depth3 = depth_levels(levels)[3]  # 200 vs θ = 100
        assert depth3.extra["p_stop_by_noise"] == pytest.approx(
            0.5 * math.exp(-100 * depth3.cost.value))
        levels = levels_of(MECH, GRID_1024, 1.0, {"theta": 200, "height": 4}, n_estimate=1600)
        assert depth_levels(levels)[3].extra["p_stop_by_noise"] == 0.5

    def test_manual_height_no_height_phase(self) -> None:
        levels = levels_of(MECH, GRID_1024, 0.5, {"height": 5})
        assert levels[0].name.startswith("Split search")
        assert len(depth_levels(levels)) == 6
        assert math.fsum(lv.cost.value for lv in levels) == pytest.approx(0.5, rel=1e-12)
        assert depth_levels(levels)[0].extra["p_stop_by_noise"] is None  # no n given
        assert levels[0].extra["data_driven_depth"] is None

    def test_uniform_allocation(self) -> None:
        levels = levels_of(MECH, GRID_1024, 0.5, {"height": 5, "allocation": "uniform"})
        costs = [lv.cost.value for lv in depth_levels(levels)]
        assert costs == pytest.approx([0.5 * 0.9 / 6] * 6, rel=1e-12)

    @pytest.mark.parametrize("k", [2, 5])
    def test_sensitivity_multiplies_scales(self, k: int) -> None:
        base = levels_of(MECH, GRID_1024, 0.5, {"height": 8}, sensitivity=1)
        capped = levels_of(MECH, GRID_1024, 0.5, {"height": 8}, sensitivity=k)
        for a, b in zip(depth_levels(base), depth_levels(capped), strict=True):
            assert b.scale == pytest.approx(k * a.scale, rel=1e-12)
            assert b.sensitivity == k
        assert capped[0].sensitivity == 2 * k
        assert capped[0].scale == pytest.approx(float(objective_scale(k, 7, 0.05 / 8)), rel=1e-12)
        # the height rule uses ε/k
        assert len(depth_levels(levels_of(MECH, GRID_1024, 1.0, {}, sensitivity=4, n_estimate=10240))) == 9

    def test_split_level_facts(self) -> None:
        levels = levels_of(MECH, GRID_1024, 0.5, {"height": 6, "T": 2})
        sp = levels[0]
        assert sp.extra["T"] == 2 and sp.extra["evaluations_per_split"] == 5
        assert sp.n_counts == (2**6 - 1) * 5
        assert sp.extra["epsilon_per_evaluation"] == pytest.approx(0.05 / 6 / 5, rel=1e-12)
        assert sp.sensitivity == 2
        # SD of g·X, X discrete Laplace of scale t/g
        assert sp.sd == pytest.approx(G * math.sqrt(dlap_var(sp.scale / G)), rel=1e-9)
        ex = levels_of(MECH, GRID_1024, 0.5, {"height": 2, "split_method": "exhaustive"})[0]
        assert ex.n_counts == 1023 + 2 * 1023  # root cuts columns (height 2), then rows
        assert ex.scale == pytest.approx(float(objective_scale(1, 1023, 0.05 / 2)), rel=1e-12)

    def test_expected_error_rows(self) -> None:
        rows = MECH.expected_error(MECH.plan(GRID_1024, 0.1, PAPER_PRESET, n_estimate=3.5e6))
        assert len(rows) == 2 + 16
        bottom = rows[-1]
        assert bottom["in_partition"] and bottom["expected_error"]["range_query_sd"]
        # spec §6.2-4: 2 % query over ~655 bottom leaves, SD ≈ sqrt(2·655)/ε_0 ≈ 1,852
        assert bottom["expected_error"]["range_query_sd"]["0.02"] == pytest.approx(1852, rel=0.01)


# ---------------------------------------------------------------------------------------------
# releases
# ---------------------------------------------------------------------------------------------


def poisson(rows: int, cols: int, lam: float, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).poisson(lam, size=(rows, cols))


class TestRelease:
    def test_structure_and_invariants(self) -> None:
        counts = poisson(40, 33, 4.0, 1)
        counts[:20, :10] += 30
        agg = make_aggregate(counts)
        rel = release_with(MECH, agg, 1.0, {}, NoiseSource(3))
        assert rel.is_tree and rel.mechanism == "htf"
        assert rel.rects[0].tolist() == [0, 40, 0, 33] and rel.level[0] == 0
        assert (np.diff(rel.level) >= 0).all()  # root first, then depth by depth
        assert np.array_equal(leaves_coverage(rel), np.ones(counts.shape, dtype=np.int64))
        h = rel.public["height"]
        assert rel.level.max() <= h
        assert rel.public["n_leaves"] == rel.leaf.sum()
        assert rel.cost == pure(1.0)
        assert math.fsum(lv.cost.value for lv in rel.levels) == pytest.approx(1.0, rel=1e-12)
        assert path_sums(rel) == pytest.approx(rel.public["epsilon_data"], rel=1e-12)
        # the plan recomputed from the released n̂ is the release's plan
        assert rel.levels == levels_of(MECH, agg.grid, 1.0, {}, n_estimate=rel.public["noisy_n"])
        assert np.all(rel.noisy == np.round(rel.noisy))
        # sd / ci95 are those of the published count's own budget
        from dpcore.privacy.noise import discrete_laplace_interval, discrete_laplace_variance

        for j in range(rel.n_rects):
            depth = int(rel.level[j])
            e_i = rel.levels[2 + depth].cost.value
            pruned = rel.leaf[j] and depth < h
            eps_pub = rel.node_budget[j] - e_i if pruned else rel.node_budget[j]
            assert rel.sd[j] == pytest.approx(math.sqrt(discrete_laplace_variance(1 / eps_pub)), rel=1e-6)
            assert rel.ci95[j] == discrete_laplace_interval(1 / eps_pub)
        # internal nodes have exactly two children tiling them
        for j in np.flatnonzero(~rel.leaf):
            a = rel.rects[j]
            kids = rel.rects[(rel.level == rel.level[j] + 1)
                             & (rel.rects[:, 0] >= a[0]) & (rel.rects[:, 1] <= a[1])
                             & (rel.rects[:, 2] >= a[2]) & (rel.rects[:, 3] <= a[3])]
            assert len(kids) == 2
            area = (kids[:, 1] - kids[:, 0]) * (kids[:, 3] - kids[:, 2])
            assert area.sum() == (a[1] - a[0]) * (a[3] - a[2])

    def test_frontier_and_budgets(self) -> None:
        rel = release_with(MECH, make_aggregate(poisson(32, 32, 10.0, 2)), 2.0, {"theta": 5}, NoiseSource(4))
        assert rel.budgets().tolist() == rel.node_budget.tolist()
        for d in range(rel.public["height"] + 1):
            front = rel.frontier(d)
            cov = np.zeros((32, 32), dtype=np.int64)
            for r0, r1, c0, c1 in rel.rects[front].tolist():
                cov[r0:r1, c0:c1] += 1
            assert (cov == 1).all()

    def test_seeded_reproducible(self) -> None:
        agg = make_aggregate(poisson(20, 20, 5.0, 3))
        a = release_with(MECH, agg, 1.0, {}, NoiseSource(9))
        b = release_with(MECH, agg, 1.0, {}, NoiseSource(9))
        c = release_with(MECH, agg, 1.0, {}, NoiseSource(10))
        assert np.array_equal(a.rects, b.rects) and np.array_equal(a.noisy, b.noisy)
        assert not (np.array_equal(a.rects, c.rects) and np.array_equal(a.noisy, c.noisy))

    def test_small_data_single_leaf(self) -> None:
        # P25: a handful of points at ε = 0.1 gives h = 0: one leaf with all of ε
        # (public n, so the height is free; the partition share goes to the counts)
        rel = release_with(MECH, make_aggregate(poisson(16, 16, 0.05, 4)), 0.1, {"public_n": 13},
                           NoiseSource(1))
        assert rel.public["height"] == 0
        assert rel.n_rects == 1 and rel.leaf[0]
        assert rel.node_budget[0] == 0.1
        assert [lv.name for lv in rel.levels] == ["Depth 0 (~1 node)"]

    def test_public_n_and_manual_height(self) -> None:
        agg = make_aggregate(poisson(16, 16, 4.0, 5))
        rel = release_with(MECH, agg, 1.0, {"public_n": 1024}, NoiseSource(2))
        assert "noisy_n" not in rel.public
        assert rel.public["height"] == 6  # floor(log2(1024·1/10)) = 6
        assert rel.public["epsilon_height"] == 0
        rel = release_with(MECH, agg, 1.0, {"height": 3}, NoiseSource(2))
        assert rel.public["height"] == 3 and rel.level.max() <= 3

    @pytest.mark.parametrize("first_axis", ["x", "y"])
    def test_first_axis(self, first_axis: str) -> None:
        counts = np.full((8, 8), 50)
        rel = release_with(MECH, make_aggregate(counts), 5.0, {"height": 2, "first_axis": first_axis,
                                                         "theta": 0}, NoiseSource(1))
        child = rel.rects[1]
        if first_axis == "x":
            assert child[0] == 0 and child[1] == 8  # a vertical cut: full rows
        else:
            assert child[2] == 0 and child[3] == 8

    def test_paper_axis_depends_on_height_parity(self) -> None:
        counts = np.full((8, 8), 50)
        for h, full_rows in ((2, True), (3, False)):
            rel = release_with(MECH, make_aggregate(counts), 5.0, {"height": h, "theta": 0}, NoiseSource(1))
            child = rel.rects[1]
            assert (child[0] == 0 and child[1] == 8) == full_rows

    def test_axis_fallback_on_thin_grid(self) -> None:
        # one column: every cut must be between rows whatever the parity (P3)
        rel = release_with(MECH, make_aggregate(np.full((16, 1), 30)), 5.0,
                           {"height": 4, "theta": 0, "kappa": 1}, NoiseSource(2))
        assert (rel.rects[:, 2] == 0).all() and (rel.rects[:, 3] == 1).all()
        assert np.array_equal(leaves_coverage(rel), np.ones((16, 1), dtype=np.int64))

    def test_extent_first_gives_leaf_whole_remainder(self) -> None:
        # 4x4 grid, κ = 17: the root is too small, so it is a leaf with all of ε_data
        agg = make_aggregate(np.full((4, 4), 10))
        rel = release_with(MECH, agg, 1.0, {"height": 3, "kappa": 17, "extent_first": True}, NoiseSource(1))
        assert rel.n_rects == 1
        assert rel.node_budget[0] == pytest.approx(0.9, rel=1e-12)
        rel = release_with(MECH, agg, 1.0, {"height": 3, "kappa": 17}, NoiseSource(1))
        assert rel.n_rects == 1
        assert rel.node_budget[0] == pytest.approx(0.9, rel=1e-12)  # ε_h + ε_rem(h)
        # but its published count has only ε_rem(3) = ε_0 + ε_1 + ε_2
        assert rel.sd[0] == pytest.approx(math.sqrt(dlap_var(1 / spec_rem(0.9, 3, 3))), rel=1e-9)

    def test_exhaustive_release(self) -> None:
        counts = poisson(12, 9, 3.0, 6)
        counts[:3] = 0
        rel = release_with(MECH, make_aggregate(counts), 2.0, {"split_method": "exhaustive", "height": 4,
                                                         "theta": 0}, NoiseSource(5))
        assert np.array_equal(leaves_coverage(rel), np.ones(counts.shape, dtype=np.int64))
        assert path_sums(rel) == pytest.approx(rel.public["epsilon_data"], rel=1e-12)

    def test_adaptive_rounds_release(self) -> None:
        counts = poisson(12, 9, 3.0, 7)
        rel = release_with(MECH, make_aggregate(counts), 2.0, {"adaptive_rounds": True, "height": 5},
                           NoiseSource(5))
        assert np.array_equal(leaves_coverage(rel), np.ones(counts.shape, dtype=np.int64))

    def test_clustered_data_splits_follow_the_cluster(self) -> None:
        # a dense block in one corner of an otherwise empty grid: with a generous split
        # budget the first cut separates the block (checked on 20 seeds, must hold for most)
        counts = np.zeros((64, 64), dtype=np.int64)
        counts[:16, :16] = 200
        agg = make_aggregate(counts)
        hits = 0
        for seed in range(20):
            rel = release_with(MECH, agg, 10.0, {"height": 2, "partition_share": 0.5, "first_axis": "x",
                                           "theta": 0}, NoiseSource(seed))
            hits += int(rel.rects[1, 3] == 16)
        assert hits >= 15


class TestNoiseDistribution:
    """Root noisy counts over many releases against the discrete Laplace variance."""

    @staticmethod
    def run(k: int, params: dict, reps: int, seed: int, shape: tuple[int, int] = (8, 8)) -> np.ndarray:
        counts = np.full(shape, 1280 // (shape[0] * shape[1]))
        agg = make_aggregate(counts, sensitivity=k)
        src = NoiseSource(seed)
        out = np.empty(reps)
        for r in range(reps):
            out[r] = release_with(MECH, agg, 1.0, params, src).noisy[0] - counts.sum()
        return out

    @staticmethod
    def check(err: np.ndarray, scale: float) -> None:
        n = err.size
        var = dlap_var(scale)
        se_mean = math.sqrt(var / n)
        assert abs(err.mean()) < N_SE * se_mean
        se_var = math.sqrt((dlap_moment4(scale) - var**2) / n)
        assert abs(err.var() - var) < N_SE * se_var

    @pytest.mark.parametrize("k", [1, 3])
    def test_root_stop_test_count(self, k: int) -> None:
        # a 2 x 1 grid of 1280 points, manual height 1, θ = 0, κ = 1: the root is never
        # pruned (its count is > 100 noise scales above θ), so its published count is its
        # stop-test count, with ε_1 = 0.9·(2^(1/3) − 1)/(2^(2/3) − 1), scale k/ε_1
        err = self.run(k, {"height": 1, "theta": 0, "kappa": 1}, 2000, seed=100 + k, shape=(2, 1))
        self.check(err, k / spec_eps_i(0.9, 1, 1))

    def test_pruned_root_gets_remainder(self) -> None:
        # κ > cells: the root stops; its fresh count has ε_rem(2) = ε_0 + ε_1
        err = self.run(1, {"height": 2, "kappa": 1000}, 2000, seed=7)
        self.check(err, 1 / spec_rem(0.9, 2, 2))


def test_small_data_warning_in_plan() -> None:
    # P25: height 10 at ε = 0.1 with the paper's budgets: root scale 1/ε_10 ≈ 474, so
    # 1,000 points lie within θ + 3 scales (1,472); 3.5 M do not
    levels = levels_of(MECH, GRID_1024, 0.1, {**PAPER_PRESET, "height": 10}, n_estimate=1000)
    assert depth_levels(levels)[0].scale == pytest.approx(1 / spec_eps_i(0.095, 10, 10))
    assert "single leaf" in depth_levels(levels)[0].note
    levels = levels_of(MECH, GRID_1024, 0.1, {**PAPER_PRESET, "height": 10}, n_estimate=3.5e6)
    assert "single leaf" not in depth_levels(levels)[0].note


# ---------------------------------------------------------------- chance of a bad release (issue 19)

GRID_512 = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 512, 512)


def test_bad_release_chance_reads_the_nearest_simulated_setting() -> None:
    out = bad_release_chance(250_000, 0.8, GRID_512)
    assert (out["n_tabulated"], out["epsilon_tabulated"]) == (300_000, 1.0)
    assert out["chance"] == BAD_RELEASE_TABLE[(300_000, 1.0)][0]
    assert "3 times" in out["sentence"]
    # nothing simulated: another grid, n or ε far from the table, non-default parameters, no guess
    assert bad_release_chance(300_000, 1.0, Grid(Bounds(0.0, 0.0, 1.0, 1.0), 1024, 1024)) is None
    assert bad_release_chance(5e7, 1.0, GRID_512) is None
    assert bad_release_chance(300_000, 0.01, GRID_512) is None
    assert bad_release_chance(None, 1.0, GRID_512) is None
    assert bad_release_chance(300_000, 1.0, GRID_512, {"height": 18}) is None
    assert bad_release_chance(300_000, 1.0, GRID_512, {"public_n": 300_000}) is not None


def test_plan_carries_bad_release_chance_for_record_level_only() -> None:
    split = [lv for lv in levels_of(MECH, GRID_512, 1.0, None, n_estimate=300_000) if lv.name.startswith("Split")][0]
    assert split.extra["bad_release_chance"] == BAD_RELEASE_TABLE[(300_000, 1.0)][0]
    assert "3 times" in split.extra["bad_release_note"]
    split = [lv for lv in levels_of(MECH, GRID_512, 1.0, None, sensitivity=3, n_estimate=300_000)
             if lv.name.startswith("Split")][0]
    assert split.extra["bad_release_chance"] is None
