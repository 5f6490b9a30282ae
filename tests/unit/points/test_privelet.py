"""Tests of dpcore.estimate.privelet (wavelet transforms, Privelet / Privelet+ releases, exact variances)
and of the location mechanism dpcore.points.mechanisms.privelet.

Expected values come from the spec (shared/specs/privelet.md §2, §3.4, §7.3) or are recomputed
here by brute force (dense transform matrices built column by column).  Statistical checks
use fixed seeds; the tolerance of a variance estimate is 5 standard errors computed from the
sample's own fourth moment, Var(s^2) ~ (m4 - s^4 (n-3)/(n-1)) / n.
"""

from __future__ import annotations

import inspect
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from points_helpers import levels_of, release_with

from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.errors import ParameterError
from dpcore.estimate import privelet as pv
from dpcore.points.mechanisms.privelet import Privelet
from dpcore.privacy.budget import zcdp
from dpcore.privacy.noise import NoiseSource, real_noise_epsilon

N_SE = 5.0
ETA = float(pv.ROUNDING_SHARE)
FIG3 = [[0, 0, 0, 1, 1, 1]]  # spec Figure 3: root -> 2 groups -> 3 leaves each


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def ordinal(n, transform=True, name="o"):
    return pv.Axis.ordinal(name, n, transform=transform)


def fig3(transform=True):
    return pv.Axis.nominal("occ", FIG3, transform=transform)


def random_hierarchy(rng, n_levels: int, size: int, shuffle: bool = True) -> list[np.ndarray]:
    """Nested groups (levels 0..n_levels-1 below the root) over at least ``size`` leaves, with
    single-child nodes likely; leaves are shuffled so sibling groups are not contiguous."""
    if n_levels == 0:
        return []
    counts = [int(rng.integers(1, 4))]
    parent_of: list[np.ndarray] = [np.zeros(counts[0], dtype=np.int64)]
    for _ in range(1, n_levels):
        m_prev = counts[-1]
        m = m_prev + int(rng.integers(0, 4))
        parent_of.append(rng.permutation(np.concatenate([np.arange(m_prev), rng.integers(0, m_prev, m - m_prev)])))
        counts.append(m)
    last = counts[-1]
    leaf = np.concatenate([np.arange(last), rng.integers(0, last, max(size, last) - last)])
    if shuffle:
        leaf = rng.permutation(leaf)
    groups = [leaf]
    for j in range(n_levels - 1, 0, -1):
        groups.insert(0, parent_of[j][groups[0]])
    return groups


def dense(axes) -> np.ndarray:
    """Transform matrix T (coefficients x cells) by transforming every unit matrix."""
    shape = tuple(a.size for a in axes)
    cols = []
    for j in range(math.prod(shape)):
        e = np.zeros(math.prod(shape))
        e[j] = 1.0
        cols.append(pv.forward(e.reshape(shape), axes).ravel())
    return np.array(cols).T


def weighted_col_norms(axes) -> np.ndarray:
    t = dense(axes)
    w = pv.coefficient_weights(axes).ravel()
    assert np.all(t[np.isinf(w)] == 0), "an infinite-weight coefficient depends on the data"
    wt = np.where(t == 0, 0.0, np.abs(t) * np.where(np.isinf(w), 0.0, w)[:, None])
    return wt.sum(axis=0)


def variance_check(samples: np.ndarray, exact: float) -> None:
    y = np.asarray(samples, dtype=np.float64)
    n = y.size
    s2 = y.var(ddof=1)
    m4 = np.mean((y - y.mean()) ** 4)
    se = math.sqrt(max(m4 - s2 * s2 * (n - 3) / (n - 1), 0.0) / n)
    assert abs(s2 - exact) < N_SE * se, (s2, exact, se)
    assert se < 0.05 * exact  # the check is sharp enough to catch a 25 % error


def haar_v_formula(a: int, b: int, lev: int) -> float:
    """O(lev) Haar variance factor of the inclusive interval [a, b] (spec §3.4), written
    independently of the library."""
    m = 1 << lev
    v = ((b - a + 1) / m) ** 2
    for i in range(1, lev + 1):
        width = 1 << (lev - i + 1)
        half = width // 2
        for node in sorted({a // width, b // width}):
            lo = node * width
            left = max(0, min(b, lo + half - 1) - max(a, lo) + 1)
            right = max(0, min(b, lo + width - 1) - max(a, lo + half) + 1)
            v += ((left - right) / width) ** 2
    return v


def all_interval_v(size: int) -> np.ndarray:
    """V[a, b] of every half-open interval [a, b) of a Haar axis (Gram-matrix trick)."""
    ax = ordinal(size)
    prefixes = np.tril(np.ones((size + 1, size)), -1)  # row t: indicator of [0, t)
    p = np.array([ax._tf.forward(r) for r in prefixes])
    g = p @ p.T
    d = np.diag(g)
    return d[:, None] + d[None, :] - 2 * g


# ---------------------------------------------------------------------------------------------
# axes and validation
# ---------------------------------------------------------------------------------------------


def test_axis_constructors_and_validation():
    a = pv.Axis.nominal("n", FIG3)
    assert (a.kind, a.size, a.height, a.n_coefficients) == ("nominal", 6, 3, 9)
    g = pv.Axis.nominal("sex", [], size=2)
    assert (g.size, g.height, g.n_coefficients) == (2, 2, 3)
    assert pv.Axis.ordinal("x", 5).n_coefficients == 8
    assert pv.Axis.ordinal("x", 5, transform=False).n_coefficients == 5
    assert pv.Axis.nominal("n", FIG3) == a and hash(pv.Axis.nominal("n", FIG3)) == hash(a)
    with pytest.raises(ParameterError, match="nest"):
        pv.Axis.nominal("n", [[0, 0, 1, 1], [0, 1, 1, 2]])
    with pytest.raises(ParameterError, match="0..m-1"):
        pv.Axis.nominal("n", [[0, 0, 2, 2]])
    with pytest.raises(ParameterError):
        pv.Axis.nominal("n", [])
    with pytest.raises(ParameterError):
        pv.Axis("x", "ordinal", 4, ([0, 0, 1, 1],))
    with pytest.raises(ParameterError):
        pv.Axis.ordinal("x", 0)


def test_release_validation():
    axes = [ordinal(4)]
    src = NoiseSource(1)
    with pytest.raises(ParameterError):
        pv.release(np.array([1.5, 0, 0, 0]), axes, 1.0, src)
    with pytest.raises(ParameterError):
        pv.release(np.zeros(5, dtype=int), axes, 1.0, src)
    with pytest.raises(ParameterError):
        pv.release(np.zeros(4, dtype=int), axes, 0.0, src)
    with pytest.raises(ParameterError):
        pv.release(np.zeros(4, dtype=int), axes, 1.0, src, sensitivity=0)
    with pytest.raises(ParameterError):
        pv.query_variance(axes, 1.0, [(3, 5)])


def test_no_numpy_random_in_privelet_modules():
    import dpcore.points.mechanisms.privelet as mech

    for mod in (pv, mech):
        assert "np.random" not in inspect.getsource(mod)
        assert "numpy.random" not in inspect.getsource(mod).replace("never ``numpy.random``", "")


# ---------------------------------------------------------------------------------------------
# spec §7.3 acceptance tests 1-5: transforms, weights, sensitivity
# ---------------------------------------------------------------------------------------------


def test_acceptance_1_haar_vector():
    ax = [ordinal(8)]
    c = pv.forward(np.array([9, 3, 5, 3, 6, 6, 6, 6]), ax)
    np.testing.assert_array_equal(c, [5.5, -0.5, 1, 0, 3, 1, 0, 0])
    np.testing.assert_array_equal(pv.inverse(c, ax), [9, 3, 5, 3, 6, 6, 6, 6])
    np.testing.assert_array_equal(pv.coefficient_weights(ax), [8, 8, 4, 4, 2, 2, 2, 2])


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 8, 16, 31, 32, 64, 100, 128, 256])
def test_acceptance_2_haar_rho_brute_force(size):
    axes = [ordinal(size)]
    lev = (size - 1).bit_length()
    assert pv.generalized_sensitivity(axes) == 1 + lev
    norms = weighted_col_norms(axes)
    assert norms.max() == pytest.approx(1 + lev, rel=1e-12)
    np.testing.assert_allclose(norms, 1 + lev, rtol=1e-12)  # every cell, padded or not


def test_acceptance_3_nominal_figure3():
    ax = [fig3()]
    c = pv.forward(np.array([9, 5, 4, 4, 4, 4]), ax)
    np.testing.assert_allclose(c, [30, 3, -3, 3, -1, -2, 0, 0, 0], atol=1e-12)
    np.testing.assert_array_equal(pv.coefficient_weights(ax), [1, 1, 1] + [0.75] * 6)
    assert pv.generalized_sensitivity(ax) == 3
    assert weighted_col_norms(ax).max() == pytest.approx(3, rel=1e-12)
    np.testing.assert_allclose(pv.inverse(c, ax), [9, 5, 4, 4, 4, 4], rtol=1e-12)


def test_acceptance_4_hn():
    axes = [ordinal(2), ordinal(2)]
    c = pv.forward(np.array([[1, 2], [3, 4]]), axes)
    np.testing.assert_array_equal(c, [[2.5, -0.5], [-1, 0]])
    np.testing.assert_array_equal(pv.coefficient_weights(axes), np.full((2, 2), 4.0))
    assert pv.generalized_sensitivity(axes) == 4
    axes86 = [ordinal(8), fig3()]
    assert pv.generalized_sensitivity(axes86) == 12
    assert weighted_col_norms(axes86).max() == pytest.approx(12, rel=1e-12)
    # the inverse does not depend on the order of the axes
    rng = np.random.default_rng(4)
    coeffs = rng.normal(size=(8, 9))
    a = pv.inverse(coeffs, axes86)
    b = pv.inverse(coeffs.T, axes86[::-1]).T
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sizes", [(8,), (5,), (16, 8), (13, 7), (1, 6), (5, 3, 9)])
def test_acceptance_5_zero_noise_haar_identity_bit_exact(sizes):
    rng = np.random.default_rng(sum(sizes))
    x = rng.integers(0, 1000, size=sizes)
    for flags in itertools.product([True, False], repeat=len(sizes)):
        axes = [ordinal(n, t, f"a{i}") for i, (n, t) in enumerate(zip(sizes, flags, strict=True))]
        c = pv.forward(x, axes)
        assert c.shape == tuple(a.n_coefficients for a in axes)
        np.testing.assert_array_equal(pv.inverse(c, axes), x)


def test_acceptance_5_zero_noise_nominal_and_mixed():
    rng = np.random.default_rng(5)
    for _trial in range(20):
        groups = random_hierarchy(rng, int(rng.integers(0, 4)), int(rng.integers(4, 14)))
        size = len(groups[-1]) if groups else int(rng.integers(2, 6))
        nom = pv.Axis.nominal("n", groups, size=size)
        for axes in ([nom], [ordinal(7), nom], [nom, ordinal(3, False), ordinal(5)],
                     [pv.Axis.nominal("n", groups, transform=False, size=size), ordinal(6)]):
            x = rng.integers(0, 50, size=tuple(a.size for a in axes))
            c = pv.forward(x, axes)
            assert c.shape == tuple(a.n_coefficients for a in axes)
            np.testing.assert_allclose(pv.inverse(c, axes), x, rtol=1e-12, atol=1e-9)


def test_generalized_sensitivity_brute_force_random_hierarchies():
    """ρ equals the largest weighted column L1 norm, including single-child nodes (weight inf),
    unsorted leaves, identity axes and products of axes."""
    rng = np.random.default_rng(6)
    for _ in range(25):
        n_lev = int(rng.integers(0, 4))
        size = int(rng.integers(3, 10))
        groups = random_hierarchy(rng, n_lev, size)
        size = len(groups[-1]) if groups else size
        nom = pv.Axis.nominal("n", groups, size=size)
        assert pv.generalized_sensitivity([nom]) <= nom.height
        assert weighted_col_norms([nom]).max() == pytest.approx(pv.generalized_sensitivity([nom]))
        axes = [nom, ordinal(int(rng.integers(1, 6))), ordinal(3, transform=False)]
        assert weighted_col_norms(axes).max() == pytest.approx(pv.generalized_sensitivity(axes))


def test_single_child_nodes_get_no_noise_and_count_zero():
    # leaf 0 sits alone under group 0 (a single-child chain); leaves 1-3 under group 1
    ax = pv.Axis.nominal("n", [[0, 1, 1, 1], [0, 1, 2, 3]])
    w = pv.coefficient_weights([ax])
    # level-1 node 0 and all four leaves are only children: weight inf, no noise
    assert np.isinf(w).sum() == 5
    assert pv.generalized_sensitivity([ax]) == 3  # leaves 1-3: root + level 0 + level 1
    np.testing.assert_array_equal(weighted_col_norms([ax]), [2, 3, 3, 3])


# ---------------------------------------------------------------------------------------------
# mean subtraction (spec §2.2, D10)
# ---------------------------------------------------------------------------------------------


def test_mean_subtraction_restores_consistency():
    """Noise on non-root coefficients must not change the total nor any node's share of its
    parent: after mean subtraction the reconstructed leaves sum to the root coefficient and
    each group's total is parent/f + its mean-subtracted coefficient.  Fails without it."""
    ax = fig3()
    rng = np.random.default_rng(7)
    c = pv.forward(np.array([9, 5, 4, 4, 4, 4]), [ax])
    noisy = c + np.concatenate([[0.0], rng.normal(0, 3, size=8)])
    m = pv.inverse(noisy, [ax])
    assert m.sum() == pytest.approx(noisy[0], rel=1e-13)
    c1 = noisy[1:3] - noisy[1:3].mean()
    np.testing.assert_allclose([m[:3].sum(), m[3:].sum()], noisy[0] / 2 + c1, rtol=1e-13)
    # multi-D: the nominal axis's totals are consistent in every fibre
    axes = [ordinal(4), ax]
    c2 = pv.forward(rng.integers(0, 9, size=(4, 6)), axes)
    noisy2 = c2.copy()
    noisy2[:, 1:] += rng.normal(0, 3, size=(4, 8))
    np.testing.assert_allclose(pv.inverse(noisy2, axes).sum(axis=1),
                               ordinal(4)._tf.inverse(noisy2[:, 0]), rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# exact variances (spec §3.4, acceptance test 6)
# ---------------------------------------------------------------------------------------------


def test_haar_single_cell_and_formula():
    for lev in range(0, 11):
        ax = ordinal(1 << lev)
        for pos in {0, (1 << lev) // 3, (1 << lev) - 1}:
            q = np.zeros(1 << lev)
            q[pos] = 1
            assert ax._tf.variance_factor(q) == pytest.approx(1 / 3 + (2 / 3) * 4.0**-lev, rel=1e-12)
    rng = np.random.default_rng(8)
    for lev in (3, 6, 9):
        ax = ordinal(1 << lev)
        for _ in range(30):
            a, b = sorted(rng.integers(0, 1 << lev, 2))
            q = np.zeros(1 << lev)
            q[a:b + 1] = 1
            v = ax._tf.variance_factor(q)
            assert v == pytest.approx(haar_v_formula(int(a), int(b), lev), rel=1e-12)
            assert v == pytest.approx(float(np.sum(ax._tf.forward(q) ** 2)), rel=1e-12)


def test_haar_variance_factor_equals_linear_algebra():
    """V = Σ_c (R^T q)_c^2 / W_c^2 with R the dense reconstruction (real cells x padded
    coefficients), built by inverting unit coefficient vectors."""
    for size in (8, 6, 13):
        ax = ordinal(size)
        n_c = ax.n_coefficients
        r = np.array([pv.inverse(np.eye(n_c)[c], [ax]) for c in range(n_c)]).T
        np.testing.assert_allclose(r @ dense([ax]), np.eye(size), atol=1e-12)
        w = pv.coefficient_weights([ax])
        q = np.zeros(size)
        q[1:size - 1] = 1
        a = r.T @ q
        assert ax._tf.variance_factor(q) == pytest.approx(float(np.sum((a / w) ** 2)), rel=1e-10)


def test_haar_max_interval_1024_and_padded_full_domains():
    v = all_interval_v(1024)
    assert np.triu(v, 1).max() == pytest.approx(2.7501, abs=1e-4)
    for size, expected in ((101, 1.42), (96, 0.875), (1001, 1.73), (1020, 1.33), (128, 1.0)):
        assert ordinal(size)._tf.variance_factor(np.ones(size)) == pytest.approx(expected, abs=0.005)


def test_nominal_factors_figure3_and_node_recursion():
    ax = fig3()
    assert ax._tf.variance_factor(np.ones(6)) == pytest.approx(1.0)
    assert ax._tf.variance_factor(np.array([1, 1, 1, 0, 0, 0.0])) == pytest.approx(0.75)
    assert ax._tf.variance_factor(np.eye(6)[4]) == pytest.approx(1.2685, abs=1e-4)
    # the O(nodes) recursion agrees with the general adjoint formula on random hierarchies
    rng = np.random.default_rng(9)
    for _ in range(15):
        groups = random_hierarchy(rng, int(rng.integers(1, 4)), int(rng.integers(4, 16)))
        nom = pv.Axis.nominal("n", groups)
        per_node = nom._tf.node_variances()
        for k, g in enumerate(groups, start=1):
            for node in range(per_node[k].size):
                assert per_node[k][node] == pytest.approx(nom._tf.variance_factor((g == node).astype(float)))
        for leaf in range(nom.size):
            assert per_node[-1][leaf] == pytest.approx(nom._tf.variance_factor(np.eye(nom.size)[leaf]))
        assert np.all(np.concatenate(per_node) < 4)


def test_level_variances():
    eps = 0.7
    ax = fig3()
    lam = pv.noise_magnitude([ax, ordinal(8)], eps)
    got = pv.level_variances(ax, eps, [ordinal(8)])
    np.testing.assert_allclose(got, 2 * lam**2 * np.array([1, 0.75, 1.2685185185185]), rtol=1e-10)
    got96 = pv.level_variances(ax, eps, [ordinal(96)])
    lam96 = pv.noise_magnitude([ax, ordinal(96)], eps)
    np.testing.assert_allclose(got96, 2 * lam96**2 * 0.875 * np.array([1, 0.75, 1.2685185185185]), rtol=1e-6)
    # untransformed nominal axis: a node's total sums its leaves' independent noise
    plain = fig3(transform=False)
    lam_p = pv.noise_magnitude([plain], eps)
    np.testing.assert_allclose(pv.level_variances(plain, eps), 2 * lam_p**2 * np.array([6, 3, 1]))
    # agrees with query_variance of each node
    for k, v in enumerate(pv.node_variances(ax, eps, [ordinal(8)])):
        masks = [np.ones(6, bool)] if k == 0 else (
            [np.array(FIG3[0]) == g for g in range(2)] if k == 1 else list(np.eye(6, dtype=bool)))
        for node, mask in enumerate(masks):
            assert v[node] == pytest.approx(pv.query_variance([ax, ordinal(8)], eps, [mask, (0, 8)]))
    with pytest.raises(ParameterError):
        pv.level_variances(ordinal(8), eps)


def test_spec_d2_grid_table():
    """Worst-case Privelet variance on square grids at ε = 1, replace-one (Δ = 2).  The spec's
    table was computed from maxV rounded to 4 decimals (2.3058 for 256), hence rel=1e-4."""
    for side, expected in ((64, 66_616), (256, 279_064)):
        v = np.triu(all_interval_v(side), 1)
        a, b = np.unravel_index(np.argmax(v), v.shape)
        axes = [ordinal(side, name="r"), ordinal(side, name="c")]
        got = pv.query_variance(axes, 1.0, [(int(a), int(b)), (int(a), int(b))], sensitivity=2)
        assert got == pytest.approx(expected * (1 + ETA) ** 2, rel=1e-4)
        assert pv.basic_query_variance(axes, 1.0, [(0, side), (0, side)], sensitivity=2) == 8 * side * side


def test_acceptance_8_paper_constants():
    eps = 1.0
    infl = (1 + ETA) ** 2
    assert pv.worst_case_bound([ordinal(512)], eps, sensitivity=2) == pytest.approx(4400 * infl)
    assert pv.worst_case_bound([fig3()], eps, sensitivity=2) == pytest.approx(288 * infl)
    assert pv.worst_case_bound([ordinal(16)], eps, sensitivity=2) == pytest.approx(600 * infl)
    assert pv.basic_query_variance([ordinal(16)], eps, [(0, 16)], sensitivity=2) == pytest.approx(128)
    # Brazil, Privelet+ with S_A = {Age, Gender}; Occupation 16 x 32 (h = 3), Income 1001
    occ = pv.Axis.nominal("occ", [np.repeat(np.arange(16), 32)])
    brazil = [ordinal(101, False, "age"), pv.Axis.nominal("sex", [], False, size=2), occ,
              ordinal(1001, name="income")]
    assert pv.noise_magnitude(brazil, eps, sensitivity=2) == pytest.approx(66 * (1 + ETA))
    assert pv.worst_case_bound(brazil, eps, sensitivity=2) == pytest.approx(4.22e7 * infl, rel=1e-3)


# ---------------------------------------------------------------------------------------------
# privacy accounting of the grid noise
# ---------------------------------------------------------------------------------------------


class RecordingSource(NoiseSource):
    def __init__(self, seed):
        super().__init__(seed)
        self.calls = []

    def laplace_on_grid(self, values, scale, granularity_exp):
        self.calls.append((Fraction(scale), int(granularity_exp), np.asarray(values).size))
        return super().laplace_on_grid(values, scale, granularity_exp)


@pytest.mark.parametrize("sensitivity", [1, 2, 3])
def test_total_privacy_cost_with_grid_rounding_at_most_epsilon(sensitivity):
    """Brute force over every neighbour: Σ over changed coefficients of real_noise_epsilon
    (|Δc| + g_c) / t_c stays <= ε, using the scales and grids release() actually uses."""
    eps = 0.8
    rng = np.random.default_rng(10)
    groups = random_hierarchy(rng, 2, 7)
    for axes in ([ordinal(6), fig3()], [pv.Axis.nominal("n", groups), ordinal(3, False)],
                 [ordinal(5), ordinal(3)]):
        axes = tuple(axes)
        lam = pv._lam_exact(axes, eps, sensitivity)  # what release() calls
        plan = pv._class_plan(axes)
        t = dense(axes)
        cls = plan.classes.ravel()
        src = RecordingSource(0)
        rel = pv.release(np.zeros(tuple(a.size for a in axes), dtype=int), axes, eps, src,
                         sensitivity=sensitivity)
        assert rel.lam == pytest.approx(float(lam))
        used = {(s, k) for s, k, _ in src.calls}
        expected = {(lam / w, k) for w, k in zip(plan.weights, plan.exponents, strict=True)
                    if w is not None}
        assert used == expected
        assert sum(n for *_, n in src.calls) == sum(
            int(np.sum(cls == j)) for j, w in enumerate(plan.weights) if w is not None)
        n_cells = t.shape[1]
        # each coefficient's loss is a function of |Δc| and its class: made once per pair (the
        # neighbours repeat a few values; exact Fractions each time were most of this test)
        term: dict[tuple[float, int], float] = {}
        # neighbours: change up to `sensitivity` cells by integers with L1 total <= sensitivity
        worst = 0.0
        for cells in itertools.combinations_with_replacement(range(n_cells), sensitivity):
            delta = np.zeros(n_cells)
            for j in cells:
                delta[j] += 1.0
            dc = t @ delta
            loss = 0.0
            for c in np.flatnonzero(np.abs(dc) > 1e-12):
                key = (abs(float(dc[c])), int(cls[c]))
                if key not in term:
                    w = plan.weights[key[1]]
                    assert w is not None
                    term[key] = real_noise_epsilon(key[0], lam / w, plan.exponents[key[1]])
                loss += term[key]
            worst = max(worst, loss)
        assert worst <= eps * (1 + 1e-12)
        assert worst >= eps / (1 + ETA) * (1 - 1e-9) * (1 if sensitivity == 1 else 0.5)


# ---------------------------------------------------------------------------------------------
# Monte Carlo (acceptance test 7): many independent releases at once through an identity axis
# ---------------------------------------------------------------------------------------------


def test_monte_carlo_variance_8x6():
    """An untransformed axis of n draws does not change ρ or λ, so each of its slices is an
    independent Privelet release of the 8 x 6 zero table."""
    n, eps = 20_000, 1.0
    axes = [ordinal(8), fig3()]
    big = axes + [ordinal(n, transform=False, name="draw")]
    assert pv.noise_magnitude(big, eps) == pv.noise_magnitude(axes, eps)
    rel = pv.release(np.zeros((8, 6, n), dtype=np.int64), big, eps, NoiseSource(2024))
    lam = rel.lam
    node = np.array([1, 1, 1, 0, 0, 0], bool)
    answers = rel.noisy[1:7][:, node].sum(axis=(0, 1))
    exact = pv.query_variance(axes, eps, [(1, 7), node])
    assert exact == pytest.approx(1.78125 * lam**2)  # spec §3.4: 1.781 λ²
    variance_check(answers, exact)
    assert abs(answers.mean()) < N_SE * math.sqrt(exact / n)
    variance_check(rel.noisy[3, 4], pv.query_variance(axes, eps, [(3, 4), (4, 5)]))
    # the grand total only sees the noisy base coefficients (mean subtraction, spec D10)
    variance_check(rel.noisy.sum(axis=(0, 1)), 2 * lam**2)


def test_monte_carlo_padding_identity_and_nominal_sets():
    n, eps = 20_000, 0.5
    groups = [[0, 0, 0, 1, 1, 2, 2, 2, 2], [0, 1, 1, 2, 2, 3, 3, 4, 5]]
    nom = pv.Axis.nominal("tract", groups)
    axes = [ordinal(5), nom, ordinal(3, transform=False)]
    big = axes + [ordinal(n, transform=False, name="draw")]
    rel = pv.release(np.zeros((5, 9, 3, n), dtype=np.int64), big, eps, NoiseSource(77), sensitivity=2)
    county = np.array(groups[0]) == 2
    odd = np.array([1, 0, 1, 0, 1, 0, 1, 0, 1], bool)  # outside the roll-up class (spec D14)
    for q in ([(0, 5), county, (0, 3)], [(2, 5), odd, (1, 2)], [(0, 1), np.eye(9, dtype=bool)[0], (0, 1)]):
        r0, r1 = q[0]
        c0, c1 = q[2]
        answers = rel.noisy[r0:r1][:, q[1]][:, :, c0:c1].sum(axis=(0, 1, 2))
        variance_check(answers, pv.query_variance(axes, eps, q, sensitivity=2))


# ---------------------------------------------------------------------------------------------
# the location mechanism
# ---------------------------------------------------------------------------------------------


def make_aggregate(rows, cols, seed=0, sensitivity=1):
    grid = Grid(Bounds(-1.0, -1.0, 1.0, 1.0), rows, cols)
    counts = np.random.default_rng(seed).poisson(4, size=(rows, cols)).astype(np.int64)
    return Aggregate(grid, counts, 0, 0, sensitivity, None)


def test_mechanism_metadata():
    m = Privelet()
    d = m.describe()
    assert (d["name"], d["title"], d["tree"]) == ("privelet", "Privelet (Haar wavelets)", False)
    assert "Xiao" in d["reference"] and d["privacy"] == "pure epsilon-DP"
    assert m.resolve_params({}) == {"transform": "both"}
    with pytest.raises(ParameterError):
        m.resolve_params({"transform": "diagonal"})


def test_mechanism_plan_values():
    m = Privelet()
    grid = Grid(Bounds(-1.0, -1.0, 1.0, 1.0), 100, 64)
    eps = 0.5
    (lv,) = levels_of(m, grid, eps, {}, sensitivity=2)
    axes = [ordinal(100, name="row"), ordinal(64, name="col")]
    lam = 2 * (1 + 7) * (1 + 6) * (1 + ETA) / eps
    assert lv.scale == pytest.approx(lam) and lv.noise == "discrete_laplace_grid"
    assert lv.extra["generalized_sensitivity"] == 56 and lv.extra["lambda"] == pytest.approx(lam)
    cell_v = (1 / 3 + 2 / 3 * 4.0**-7) * (1 / 3 + 2 / 3 * 4.0**-6)
    assert lv.sd == pytest.approx(math.sqrt(2 * lam**2 * cell_v))
    assert (lv.n_counts, lv.in_partition, lv.cells_per_count, lv.sensitivity) == (6400, True, 1.0, 2)
    exact = lv.extra["range_query_sd_exact"]
    assert set(exact) == {"0.02", "0.06", "0.1"}
    # 10 %: sqrt(0.1) of each side, centred: rows 32 (34..66), cols 20 (22..42)
    assert exact["0.1"] == pytest.approx(
        math.sqrt(pv.query_variance(axes, eps, [(34, 66), (22, 42)], sensitivity=2)))
    d = lv.to_dict(grid.n_cells)
    assert d["details"]["range_query_sd_exact"] == exact
    # Privelet+: only rows transformed -> rho = 8, column factor 1 per cell
    (lv_rows,) = levels_of(m, grid, eps, {"transform": "rows"}, sensitivity=1)
    assert lv_rows.extra["generalized_sensitivity"] == 8
    assert lv_rows.sd == pytest.approx(math.sqrt(2 * (8 * (1 + ETA) / eps) ** 2 * (1 / 3 + 2 / 3 * 4.0**-7)))
    (lv_auto,) = levels_of(m, Grid(grid.bounds, 300, 100), eps, {"transform": "auto"})
    assert lv_auto.extra["transformed_axes"] == ["row"]


def test_mechanism_refuses_zcdp():
    m = Privelet()
    agg = make_aggregate(8, 8)
    with pytest.raises(ParameterError, match="pure"):
        levels_of(m, agg.grid, zcdp(0.5), {})
    with pytest.raises(ParameterError, match="pure"):
        release_with(m, agg, zcdp(0.5), {}, NoiseSource(1))


def test_mechanism_release_shape_and_unbiased():
    m = Privelet()
    agg = make_aggregate(23, 13, seed=3)
    eps = 1.0
    n_rel = 80
    totals, mean_sq = [], []
    for seed in range(n_rel):
        rel = release_with(m, agg, eps, {}, NoiseSource(seed))
        assert rel.n_rects == 23 * 13 and rel.noisy.dtype == np.float64
        assert not rel.is_tree and rel.levels[0].extra["padded_shape"] == [32, 16]
        err = rel.density() - agg.counts
        totals.append(err.sum())
        mean_sq.append(np.mean(err**2))
    sd_cell = rel.levels[0].sd
    v_total = pv.query_variance(Privelet.axes(agg.grid, {}), eps, [(0, 23), (0, 13)])
    assert abs(np.mean(totals)) < N_SE * math.sqrt(v_total / n_rel)
    ms = np.array(mean_sq)
    assert abs(ms.mean() - sd_cell**2) < N_SE * ms.std(ddof=1) / math.sqrt(n_rel)
    # the rectangles tile the grid cell by cell
    np.testing.assert_array_equal(rel.rects[:, 1] - rel.rects[:, 0], 1)
    assert rel.public["generalized_sensitivity"] == 30 and rel.public["lambda"] == pytest.approx(30 * (1 + ETA))


def test_mechanism_release_user_cap_scales_noise():
    m = Privelet()
    agg = make_aggregate(16, 16, sensitivity=3)
    rel = release_with(m, agg, 1.0, {"transform": "columns"}, NoiseSource(5))
    assert rel.levels[0].scale == pytest.approx(3 * 5 * (1 + ETA))
    assert rel.levels[0].sensitivity == 3
