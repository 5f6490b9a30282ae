"""dpcore.estimate.treedp: the exact integer least-squares tree DP (spec census-optimization.md §2.6).

Checked against the spec's worked examples (§2.11, §7.6), an exhaustive search on small trees
and a unit-segment LP (min-cost flow, integral by total unimodularity) on medium ones."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from dpcore.errors import ParameterError
from dpcore.estimate.treedp import TreeDPResult, default_half_widths, solve_l2

# Example A's tree: US -> {GA, NY}, GA -> {g1, g2}, NY -> {n1, n2}
TREE_A = [np.array([0, 0]), np.array([0, 0, 1, 1])]
# Examples B/C: T' with dummy root rho -> 3 copies of US (sizes 1..3) -> (GA, g), (NY, g)
TREE_T = [np.array([0, 0, 0]), np.array([0, 0, 1, 1, 2, 2])]
ONES3 = [1.0, 1.0, 1.0]


def arr(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int64)


def values(res: TreeDPResult) -> list[list[int]]:
    return [v.tolist() for v in res.values]


# ---------------------------------------------------------------------------------- helpers

def random_parents(sizes: list[int], rng: np.random.Generator) -> list[np.ndarray]:
    """Non-decreasing parent arrays hitting every parent: random cut points."""
    out = []
    for n_up, n in zip(sizes[:-1], sizes[1:], strict=True):
        cuts = np.sort(rng.choice(np.arange(1, n), size=n_up - 1, replace=False))
        counts = np.diff(np.concatenate(([0], cuts, [n])))
        out.append(np.repeat(np.arange(n_up), counts).astype(np.int64))
    return out


def level_values(parents: list[np.ndarray], leaves: np.ndarray) -> list[np.ndarray]:
    """Every level's values from leaf values (rows = candidates)."""
    vals = [leaves]
    for p in reversed(parents):
        n_up = int(p[-1]) + 1
        m = np.zeros((p.size, n_up), dtype=np.int64)
        m[np.arange(p.size), p] = 1
        vals.insert(0, vals[0] @ m)
    return vals


def check_feasible(res: TreeDPResult, parents: list[np.ndarray], root_value: int | None) -> None:
    for v in res.values:
        assert v.dtype == np.int64
        assert np.all(v >= 0)
    for d, p in enumerate(parents):
        sums = np.bincount(p, weights=res.values[d + 1], minlength=res.values[d].size)
        assert np.array_equal(sums.astype(np.int64), res.values[d])
    assert res.values[0].size == 1
    if root_value is not None:
        assert int(res.values[0][0]) == root_value


def exact_cost(vals: list[np.ndarray], noisy: list, weights: list[float]) -> Fraction:
    total = Fraction(0)
    for x, y, w in zip(vals, noisy, weights, strict=True):
        if y is not None:
            total += Fraction(w) * sum((int(a) - int(b)) ** 2 for a, b in zip(x, y, strict=True))
    return total


def brute_force(parents, noisy, weights, root_value) -> Fraction:
    """Exhaustive minimum over all feasible integer hierarchies.

    Free root: an optimal leaf never exceeds max(0, largest measured y on its path) (else
    lowering it and its ancestors by one lowers every measured term), so leaves range over
    [0, that]; fixed root N: leaves range over [0, N] with sum N."""
    L = len(parents)
    n_leaf = noisy[L].size
    if root_value is None:
        anc = [np.arange(n_leaf)]
        for p in reversed(parents):
            anc.insert(0, p[anc[0]])
        hi = np.zeros(n_leaf, dtype=np.int64)
        for d in range(L + 1):
            if noisy[d] is not None:
                hi = np.maximum(hi, noisy[d][anc[d]])
        grids = np.meshgrid(*[np.arange(int(h) + 1) for h in hi], indexing="ij")
        cand = np.stack([g.ravel() for g in grids], axis=1).astype(np.int64)
    else:  # compositions of N into n_leaf parts (stars and bars)
        combos = list(itertools.combinations(range(root_value + n_leaf - 1), n_leaf - 1))
        bars = np.array(combos, dtype=np.int64).reshape(len(combos), n_leaf - 1)
        edges = np.concatenate([np.full((bars.shape[0], 1), -1), bars,
                                np.full((bars.shape[0], 1), root_value + n_leaf - 1)], axis=1)
        cand = np.diff(edges, axis=1) - 1
    vals = level_values(parents, cand)
    cost = np.zeros(cand.shape[0])
    for x, y, w in zip(vals, noisy, weights, strict=True):
        if y is not None:
            cost += w * ((x - y) ** 2).sum(axis=1)
    # float costs only preselect; the minimum is decided exactly
    near = np.flatnonzero(cost <= cost.min() * (1 + 1e-9) + 1e-9)
    return min(exact_cost([v[i] for v in vals], noisy, weights) for i in near.tolist())


def lp_oracle(parents, noisy, weights, root_value) -> tuple[float, list[np.ndarray]]:
    """Unit-segment LP: x_v = Σ_k z_vk, z_vk ∈ [0, 1] with cost φ_v(k+1) − φ_v(k).

    Consistency rows x_v − Σ_children x_u = 0 make a network matrix (each column has one
    +1 and one −1), so HiGHS's simplex vertex is integral and solves the integer problem."""
    L = len(parents)
    sizes = [1] + [p.size for p in parents]
    offs = np.concatenate(([0], np.cumsum(sizes)))
    n_tot = int(offs[-1])
    par_global = np.full(n_tot, -1)
    for d, p in enumerate(parents):
        par_global[offs[d + 1]:offs[d + 2]] = p + offs[d]
    # upper bounds: N for a fixed root; else a leaf's max(0, largest measured y on its path)
    # (see brute_force) and an internal node's sum of its leaves' bounds
    if root_value is None:
        anc = [np.arange(sizes[L])]
        for p in reversed(parents):
            anc.insert(0, p[anc[0]])
        bound = [np.zeros(sizes[L], dtype=np.int64)]
        for d in range(L + 1):
            if noisy[d] is not None:
                bound[0] = np.maximum(bound[0], noisy[d][anc[d]])
        for p in reversed(parents):
            bound.insert(0, np.bincount(p, weights=bound[0]).astype(np.int64))
    else:
        bound = [np.full(n, root_value, dtype=np.int64) for n in sizes]
    cols, rows, data, cost, ub = [], [], [], [], []
    const = 0.0
    owner = []
    for d in range(L + 1):
        for i in range(sizes[d]):
            g = offs[d] + i
            if d == 0 and root_value is not None:
                continue
            U = int(bound[d][i])
            y = None if noisy[d] is None else int(noisy[d][i])
            w = weights[d]
            segs = [(0.0, float(U))] if y is None else \
                [(w * (2 * (k - y) + 1), 1.0) for k in range(U)]
            if y is not None:
                const += w * y * y
            for c, u in segs:
                j = len(cost)
                cost.append(c)
                ub.append(u)
                owner.append(g)
                if d > 0:  # −1 in the parent's consistency row
                    rows.append(par_global[g])
                    cols.append(j)
                    data.append(-1.0)
                if d < L:  # +1 in its own row (internal nodes)
                    rows.append(g)
                    cols.append(j)
                    data.append(1.0)
    n_rows = offs[L]  # one row per internal node
    A = sp.csr_matrix((data, (rows, cols)), shape=(n_rows, len(cost)))
    b = np.zeros(n_rows)
    if root_value is not None:
        b[0] = -root_value  # −Σ_children x_u = −N
    bounds = np.column_stack([np.zeros(len(ub)), np.array(ub)])
    res = linprog(np.array(cost), A_eq=A, b_eq=b, bounds=bounds, method="highs-ds")
    assert res.status == 0, res.message
    x = np.bincount(np.array(owner), weights=res.x, minlength=n_tot)
    if root_value is not None:
        x[0] = root_value
    assert np.allclose(x, np.round(x), atol=1e-7)  # integral vertex
    xi = np.round(x).astype(np.int64)
    return res.fun + const, [xi[offs[d]:offs[d + 1]] for d in range(L + 1)]


# ------------------------------------------------------------------ spec worked examples

def test_example_a_free_root():
    res = solve_l2(TREE_A, [arr(19), arr(7, 10), arr(5, 1, -3, 8)], ONES3)
    assert values(res) == [[18], [8, 10], [6, 2, 0, 10]]
    assert res.objective == 17.0
    check_feasible(res, TREE_A, None)


def test_example_a_fixed_root():
    res = solve_l2(TREE_A, [None, arr(7, 10), arr(5, 1, -3, 8)], ONES3, root_value=15)
    assert values(res) == [[15], [6, 9], [5, 1, 0, 9]]
    assert res.objective == 12.0


def test_example_a_prime_ties_take_earlier_child_first():
    res = solve_l2(TREE_A, [None, arr(6, 9), arr(4, 1, -2, 8)], ONES3, root_value=15)
    # two optima (5, 1) and (4, 2), objective 6; the stable rule gives (5, 1)
    assert values(res) == [[15], [6, 9], [5, 1, 0, 9]]
    assert res.objective == 6.0
    # ... with any window size
    res2 = solve_l2(TREE_A, [None, arr(6, 9), arr(4, 1, -2, 8)], ONES3, root_value=15,
                    half_widths=[100, 100, 100])
    assert values(res2) == values(res)


def test_example_a_prime_free_root_unique():
    res = solve_l2(TREE_A, [arr(17), arr(6, 9), arr(4, 1, -2, 8)], ONES3)
    assert values(res) == [[16], [7, 9], [5, 2, 0, 9]]
    assert res.objective == 9.0


def test_example_b_group_sizes_through_t_prime():
    # level 1 = US copies for sizes 1..3, level 2 = (GA, g), (NY, g) per copy
    noisy = [None, arr(5, 0, 0), arr(1, 1, 0, -1, 3, 0)]
    res = solve_l2(TREE_T, noisy, ONES3, root_value=6)
    x = res.values[2]
    assert x[0::2].tolist() == [2, 0, 2]   # GA
    assert x[1::2].tolist() == [2, 0, 0]   # NY
    assert res.values[1].tolist() == [4, 0, 2]
    assert res.objective == 9.0
    check_feasible(res, TREE_T, 6)


def test_example_c_dpc_approx_inputs():
    noisy = [None, arr(4, 1, 1), arr(2, 0, 0, 1, 0, 1)]
    res = solve_l2(TREE_T, noisy, ONES3, root_value=6)
    x = res.values[2]
    assert x[0::2].tolist() == [3, 0, 0]
    assert x[1::2].tolist() == [1, 1, 1]
    assert res.values[1].tolist() == [4, 1, 1]
    assert res.objective == 2.0


def test_free_root_certificate_vector():
    # spec §7.6: a check that skips the free root stops at US 8, S 8, c1 4, c2 4 (objective 113)
    parents = [arr(0), arr(0, 0)]
    res = solve_l2(parents, [arr(13), arr(4), arr(-2, -2)], ONES3, half_widths=[5, 5, 5])
    assert values(res) == [[6], [6], [3, 3]]
    assert res.objective == 103.0
    assert res.widenings >= 1  # only the root sat on its window edge (a_US = 8)


def test_certificate_widens_tiny_windows():
    rng = np.random.default_rng(7)
    parents = random_parents([1, 3, 9], rng)
    noisy = [arr(300), arr(0, 10, 5), rng.integers(40, 80, size=9)]
    w = [1.0, 2.0, 0.5]
    small = solve_l2(parents, noisy, w, half_widths=[1, 1, 1])
    large = solve_l2(parents, noisy, w, half_widths=[1e4, 1e4, 1e4])
    assert small.widenings > 0
    assert large.widenings == 0
    assert small.half_widths[0] > 1
    assert values(small) == values(large)
    assert small.objective == large.objective


def test_root_value_outside_range_widens():
    # leaf windows at h = 1 sum to at most 6, far below N = 51
    res = solve_l2([arr(0, 0)], [None, arr(1, 2)], [1.0, 1.0], root_value=51,
                   half_widths=[1, 1])
    assert res.widenings > 0
    assert values(res) == [[51], [25, 26]]
    assert res.objective == 2 * 24 ** 2


def test_only_leaves_measured_clamps_at_zero():
    rng = np.random.default_rng(3)
    parents = random_parents([1, 4, 20], rng)
    y = rng.integers(-30, 30, size=20)
    res = solve_l2(parents, [None, None, y], [0.0, 0.0, 1.0])
    assert np.array_equal(res.values[2], np.maximum(y, 0))
    check_feasible(res, parents, None)


def test_single_node_tree():
    assert values(solve_l2([], [arr(-4)], [1.0])) == [[0]]
    res = solve_l2([], [arr(9)], [2.0])
    assert values(res) == [[9]] and res.objective == 0.0


def test_weighted_objective_is_exact():
    # weights 1/3 and 3: float weights, reported objective = float(exact rational sum)
    res = solve_l2([arr(0, 0)], [arr(10), arr(3, 3)], [1 / 3, 3.0])
    # the optimum found by exhaustive search, and the reported objective equal to it exactly
    best = brute_force([arr(0, 0)], [arr(10), arr(3, 3)], [1 / 3, 3.0], None)
    assert res.objective == float(best)
    assert exact_cost(list(res.values), [arr(10), arr(3, 3)], [1 / 3, 3.0]) == best


def test_default_half_widths():
    assert default_half_widths([1.0, 1 / 3200.0, 0.0]) == (6.0, 340.0, 5.0)
    assert default_half_widths([4.0]) == (5.0,)


def test_result_arrays_are_read_only():
    res = solve_l2(TREE_A, [arr(19), arr(7, 10), arr(5, 1, -3, 8)], ONES3)
    with pytest.raises(ValueError):
        res.values[2][0] = 1


# ------------------------------------------------------------------------- brute force

def random_instance(rng: np.random.Generator, max_leaves: int = 6):
    L = int(rng.integers(1, 4))
    n_leaf = int(rng.integers(1, max_leaves + 1))
    sizes = [1] + sorted(int(v) for v in rng.integers(1, n_leaf + 1, size=L - 1)) + [n_leaf]
    parents = random_parents(sizes, rng)
    wset = rng.choice(["ones", "dyadic", "float"])
    weights = []
    for _ in range(L + 1):
        if wset == "ones":
            weights.append(1.0)
        elif wset == "dyadic":
            weights.append(float(rng.choice([0.5, 1.0, 2.0, 3.0])))
        else:
            weights.append(float(rng.uniform(0.2, 3.0)))
    fixed = bool(rng.random() < 0.5)
    noisy = []
    for d in range(L + 1):
        unmeasured = d < L and rng.random() < 0.3
        if (d == 0 and fixed) or unmeasured:
            noisy.append(None)
        else:
            noisy.append(rng.integers(-3, 7, size=sizes[d]).astype(np.int64))
    root_value = int(rng.integers(0, 9)) if fixed else None
    h = [float(rng.choice([0.5, 1.0, 2.0, 5.0, 50.0]))] * (L + 1)
    return parents, noisy, weights, root_value, h


def test_matches_brute_force_on_random_small_trees():
    rng = np.random.default_rng(20240611)
    widened = 0
    for _ in range(300):
        parents, noisy, weights, root_value, h = random_instance(rng)
        res = solve_l2(parents, noisy, weights, root_value=root_value, half_widths=h)
        check_feasible(res, parents, root_value)
        best = brute_force(parents, noisy, weights, root_value)
        got = exact_cost(list(res.values), noisy, weights)
        assert got == best, (parents, noisy, weights, root_value, h)
        assert res.objective == float(best)
        widened += res.widenings > 0
    assert widened > 20  # the certificate was exercised, not just huge windows


# ------------------------------------------------------------------------------ LP oracle

@pytest.mark.parametrize("seed", range(20))
def test_matches_unit_segment_lp_on_medium_trees(seed):
    rng = np.random.default_rng(1000 + seed)
    L = int(rng.integers(2, 4))
    n_leaf = int(rng.integers(25, 90))
    sizes = [1] + sorted(int(rng.integers(2, max(3, n_leaf // 3))) for _ in range(L - 1)) + [n_leaf]
    parents = random_parents(sizes, rng)
    truth = [rng.poisson(rng.choice([0.5, 2.0]), size=n_leaf).astype(np.int64)]
    for p, n in zip(reversed(parents), reversed(sizes[:-1]), strict=True):
        truth.insert(0, np.bincount(p, weights=truth[0], minlength=n).astype(np.int64))
    if seed % 4 == 3:  # arbitrary float ratios (float64 increments)
        weights = [float(rng.uniform(0.3, 3.0)) for _ in range(L + 1)]
    elif seed % 2 == 1:  # dyadic ratios (exact rescaled integers)
        weights = [float(rng.choice([0.5, 1.0, 2.0])) for _ in range(L + 1)]
    else:
        weights = [1.0] * (L + 1)
    fixed = seed % 3 == 0
    noisy = []
    for d, t in enumerate(truth):
        if (d == 0 and fixed) or (0 < d < L and seed % 5 == 1):
            noisy.append(None)
            continue
        lam = 2.0 / weights[d] ** 0.5
        a = np.exp(-1 / lam)
        noisy.append(t + rng.geometric(1 - a, t.size) - rng.geometric(1 - a, t.size))
    root_value = int(truth[0][0]) if fixed else None
    res = solve_l2(parents, noisy, weights, root_value=root_value,
                   half_widths=[3.0] * (L + 1) if seed % 4 == 0 else None)
    check_feasible(res, parents, root_value)
    lp_fun, lp_x = lp_oracle(parents, noisy, weights, root_value)
    assert sum(s for s in sizes) >= 30
    # the LP's integral vertex is feasible and its exact cost equals the DP's exact optimum
    lp_cost = exact_cost(lp_x, noisy, weights)
    assert exact_cost(list(res.values), noisy, weights) == lp_cost
    assert res.objective == float(lp_cost)
    assert res.objective == pytest.approx(lp_fun, rel=1e-9, abs=1e-6)


# ---------------------------------------------------------------------------- validation

def test_rejects_non_contiguous_parents():
    with pytest.raises(ParameterError, match="non-decreasing"):
        solve_l2([arr(0, 0), arr(0, 1, 0)], [arr(1), arr(1, 1), arr(1, 1, 1)], ONES3)


def test_rejects_childless_node_and_bad_index():
    with pytest.raises(ParameterError, match="at least one child"):
        solve_l2([arr(0, 0, 0), arr(0, 0, 2)], [arr(1), arr(1, 1, 1), arr(1, 1, 1)], ONES3)
    with pytest.raises(ParameterError, match="end at parent 1"):
        solve_l2([arr(0, 0), arr(0, 1, 2)], [arr(1), arr(1, 1), arr(1, 1, 1)], ONES3)
    with pytest.raises(ParameterError, match="start at parent 0"):
        solve_l2([arr(1, 1)], [arr(1), arr(1, 1)], [1.0, 1.0])
    with pytest.raises(ParameterError, match="integer indices"):
        solve_l2([np.array([0.0, 0.0])], [arr(1), arr(1, 1)], [1.0, 1.0])


def test_rejects_unmeasured_leaves():
    with pytest.raises(ParameterError, match="leaf level must be measured"):
        solve_l2(TREE_A, [arr(3), arr(1, 2), None], ONES3)


def test_rejects_bad_root_value():
    noisy = [None, arr(7, 10), arr(5, 1, -3, 8)]
    with pytest.raises(ParameterError, match="non-negative"):
        solve_l2(TREE_A, noisy, ONES3, root_value=-1)
    with pytest.raises(ParameterError, match="integer"):
        solve_l2(TREE_A, noisy, ONES3, root_value=2.5)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="not both"):
        solve_l2(TREE_A, [arr(19), arr(7, 10), arr(5, 1, -3, 8)], ONES3, root_value=15)


def test_rejects_length_mismatches():
    good = [arr(19), arr(7, 10), arr(5, 1, -3, 8)]
    with pytest.raises(ParameterError, match="one entry .* per level"):
        solve_l2(TREE_A, good[:2], ONES3)
    with pytest.raises(ParameterError, match=r"noisy\[2\] must be a 1-D array"):
        solve_l2(TREE_A, [arr(19), arr(7, 10), arr(5, 1, -3)], ONES3)
    with pytest.raises(ParameterError, match="weights must have one entry per level"):
        solve_l2(TREE_A, good, [1.0, 1.0])
    with pytest.raises(ParameterError, match="half_widths must have one entry per level"):
        solve_l2(TREE_A, good, ONES3, half_widths=[5.0])


def test_rejects_bad_values_weights_and_widths():
    with pytest.raises(ParameterError, match="integers"):
        solve_l2(TREE_A, [arr(19), arr(7, 10), np.array([5.5, 1, -3, 8])], ONES3)
    with pytest.raises(ParameterError, match=r"weights\[1\] must be a positive"):
        solve_l2(TREE_A, [arr(19), arr(7, 10), arr(5, 1, -3, 8)], [1.0, 0.0, 1.0])
    with pytest.raises(ParameterError, match=r"half_widths\[0\] must be a positive"):
        solve_l2(TREE_A, [arr(19), arr(7, 10), arr(5, 1, -3, 8)], ONES3,
                 half_widths=[0.0, 1.0, 1.0])
    with pytest.raises(ParameterError, match="max_widenings"):
        solve_l2(TREE_A, [arr(19), arr(7, 10), arr(5, 1, -3, 8)], ONES3, max_widenings=-1)
    # integral floats are accepted as integers; an unmeasured level's weight is ignored
    res = solve_l2(TREE_A, [None, np.array([7.0, 10.0]), arr(5, 1, -3, 8)], [0.0, 1.0, 1.0],
                   root_value=15)
    assert values(res) == [[15], [6, 9], [5, 1, 0, 9]]


def test_max_widenings_zero_still_exact():
    # no doubling allowed: the windows jump straight to a provably certifying size
    parents = [arr(0), arr(0, 0)]
    res = solve_l2(parents, [arr(13), arr(4), arr(-2, -2)], ONES3, half_widths=[5, 5, 5],
                   max_widenings=0)
    assert values(res) == [[6], [6], [3, 3]]
    assert res.widenings == 1


def test_free_root_takes_leftmost_minimiser():
    # cost x² + (x − 1)²: x = 0 and x = 1 tie; the leftmost minimiser is 0
    res = solve_l2([arr(0)], [arr(0), arr(1)], [1.0, 1.0])
    assert values(res) == [[0], [0]]
    assert res.objective == 1.0


def test_ties_between_internal_children_go_to_the_earlier_one():
    # GA and NY are identical subtrees; the 11th unit is a tie between them -> GA
    res = solve_l2(TREE_A, [None, arr(5, 5), arr(2, 2, 2, 2)], ONES3, root_value=11)
    assert values(res) == [[11], [6, 5], [3, 3, 3, 2]]
    # unmeasured middle: root 10 and 11 tie (objective 3; leftmost root), and both units
    # above y = 2 go to GA's children first
    res = solve_l2(TREE_A, [arr(11), None, arr(2, 2, 2, 2)], ONES3)
    assert values(res) == [[10], [6, 4], [3, 3, 2, 2]]
    assert res.objective == 3.0


def test_values_beyond_the_exact_range_are_refused():
    with pytest.raises(ParameterError, match="beyond ±2\\^48"):
        solve_l2([arr(0, 0)], [arr(1), arr(2**49, 3)], [1.0, 1.0])
    with pytest.raises(ParameterError, match="root_value beyond 2\\^48"):
        solve_l2([arr(0, 0)], [None, arr(1, 3)], [1.0, 1.0], root_value=2**49)


def test_huge_counts_are_solved_exactly():
    # values near 2^31 (the int64 increments stay exact); each leaf moves by one to meet the total
    big = 2**31
    y = np.full(8, big, dtype=np.int64)
    res = solve_l2([np.zeros(8, dtype=np.int64)], [None, y], [0.0, 1.0], root_value=8 * big + 8)
    assert values(res) == [[8 * big + 8], [big + 1] * 8]
    assert res.objective == 8.0


def test_windows_too_large_for_memory_are_refused_with_a_message():
    # a public total of 0 under noisy counts of ±2^35: certifying needs windows of 2^36 entries
    big = 2**35
    with pytest.raises(ParameterError, match="cost-table entries"):
        solve_l2([arr(0, 0)], [None, arr(big, -big)], [0.0, 1.0], root_value=0, max_widenings=0)
