"""Tests of dpcore.estimate.matrix_l1 and matrix_design.l1_strategy (spec matrix-mechanism.md §7.3).

Errors are ``TSE_ε / (2/ε²) = Δ1(A)² trace(G X⁺)`` (what ``tse_per_p`` returns for an L1
strategy).  Tolerances:

* the §7.3 table is printed to 5 significant digits, so a value is checked to half a unit in
  its last printed digit (``abs = 0.5 · 10^(e−4)``); this covers both the closed forms
  (identity, unweighted Haar/tree: exact linear algebra, ~1e-12) and the L1-weighted Haar,
  whose convex program is solved to a relative duality gap below 1e-9 here;
* closed forms we can state exactly (``trace G = n(n+1)(n+2)/6``) use rel 1e-12;
* comparisons "never worse than unweighted" allow one part in 1e-12 for round-off.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from dpcore.errors import ParameterError
from dpcore.estimate import (
    matrix_cache,
    matrix_design,
    matrix_errors,
    matrix_release,
    matrix_strategy,
    matrix_workload,
)
from dpcore.estimate import matrix_l1 as ml
from dpcore.privacy.noise import NoiseSource


def _half_unit(value: float) -> float:
    """Half a unit in the 5th significant digit of a printed table value."""
    return 0.5 * 10 ** (math.floor(math.log10(abs(value))) - 4)


# --------------------------------------------------------------------------------------------
# Haar design
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 5, 10, 17, 64, 100])
def test_haar_matrix_is_square_invertible_and_paper_shaped(n):
    H = ml.haar_matrix(n)
    assert H.shape == (n, n)
    assert set(np.unique(H)) <= {-1.0, 0.0, 1.0}
    np.testing.assert_array_equal(H[0], np.ones(n))
    assert np.linalg.matrix_rank(H) == n  # full column rank for every n (docstring argument)
    for r in H[1:]:  # one block: a non-empty run of +1 followed by a non-empty run of −1
        nz = np.flatnonzero(r)
        assert np.array_equal(nz, np.arange(nz[0], nz[-1] + 1))
        signs = r[nz]
        assert signs[0] == 1 and signs[-1] == -1 and np.all(np.diff(signs) <= 0)


def test_haar_matrix_power_of_two_is_the_fig2_matrix():
    H = ml.haar_matrix(8)
    expected = np.array([
        [1, 1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, -1, -1, -1, -1],
        [1, 1, -1, -1, 0, 0, 0, 0],
        [0, 0, 0, 0, 1, 1, -1, -1],
        [1, -1, 0, 0, 0, 0, 0, 0],
        [0, 0, 1, -1, 0, 0, 0, 0],
        [0, 0, 0, 0, 1, -1, 0, 0],
        [0, 0, 0, 0, 0, 0, 1, -1],
    ], dtype=float)
    np.testing.assert_array_equal(H, expected)
    H64 = ml.haar_matrix(64)
    G = H64 @ H64.T
    np.testing.assert_array_equal(G, np.diag(np.diag(G)))  # orthogonal rows
    assert ml.haar_strategy(64).l1_sensitivity == 7  # 1 + log2 n


# --------------------------------------------------------------------------------------------
# §7.3 table (1-D all ranges)
# --------------------------------------------------------------------------------------------

TABLE_73 = {  # n: (identity, Haar, L1-weighted Haar, hierarchical, RMSE ratio Haar / weighted)
    64: (45760, 1.0634e5, 99430, 1.3234e5, 1.034),
    256: (2.8291e6, 3.6372e6, 3.4429e6, 4.3551e6, 1.028),
}


@pytest.mark.parametrize("n", sorted(TABLE_73))
def test_section73_table_values(n):
    ident, haar, whaar, hier, ratio = TABLE_73[n]
    w = matrix_workload.all_range_workload(n)
    t_id = matrix_errors.tse_per_p(w, matrix_strategy.identity_strategy(n))
    assert t_id == pytest.approx(n * (n + 1) * (n + 2) / 6, rel=1e-12)  # trace G, exact
    assert t_id == pytest.approx(ident, abs=_half_unit(ident))
    t_haar = matrix_errors.tse_per_p(w, ml.haar_strategy(n))
    assert t_haar == pytest.approx(haar, abs=_half_unit(haar))
    assert matrix_errors.tse_per_p(w, matrix_strategy.hierarchical_strategy(n)) == pytest.approx(hier, abs=_half_unit(hier))
    s = ml.l1_reweight(w, ml.haar_strategy(n))
    assert s.info["method"] == "dual" and s.info["gap"] < 1e-9
    assert s.info["objective"] == pytest.approx(whaar, abs=_half_unit(whaar))
    assert matrix_errors.tse_per_p(w, s) == pytest.approx(s.info["objective"], rel=1e-9)
    # the table's "1.034× better" is an RMSE ratio: sqrt of the TSE ratio (1.0695 at n = 64)
    assert math.sqrt(t_haar / s.info["objective"]) == pytest.approx(ratio, abs=5e-4)  # 3 digits


# --------------------------------------------------------------------------------------------
# certificate, normalisation, never worse
# --------------------------------------------------------------------------------------------


def test_square_design_certificate_agrees_with_an_independent_solver():
    n = 16
    w = matrix_workload.prefix_workload(n)
    H = ml.haar_matrix(n)
    s = ml.l1_reweight(w, ml.haar_strategy(n), completion=False)
    assert s.info["method"] == "dual"
    assert 0 <= s.info["gap"] < 1e-9 and s.info["kkt"] < 1e-6
    # the spec's program solved by SLSQP in λ (a different algorithm, primal side)
    Hi = np.linalg.inv(H)
    c = ((np.linalg.cholesky(w.gram()).T @ Hi) ** 2).sum(axis=0)  # ||(W H⁻¹)[:, i]||², FᵀF = G
    B = np.abs(H)
    res = minimize(lambda v: (c / v**2).sum(), np.full(n, 1.0 / B.sum(axis=0).max()),
                   jac=lambda v: -2 * c / v**3, method="SLSQP", bounds=[(1e-9, None)] * n,
                   constraints=[{"type": "ineq", "fun": lambda v: 1 - B.T @ v, "jac": lambda v: -B.T}],
                   options={"maxiter": 2000, "ftol": 1e-15})
    f_slsqp = (c / res.x**2).sum() * (B.T @ res.x).max() ** 2
    assert s.info["objective"] == pytest.approx(f_slsqp, rel=1e-6)
    # a certificate means no feasible point is better than objective·(1 − gap)
    rng = np.random.default_rng(0)
    for _ in range(200):
        lam = s.info["weights"] * np.exp(rng.normal(0, 0.3, n))
        lam /= (B.T @ lam).max()
        assert (c / lam**2).sum() >= s.info["objective"] * (1 - s.info["gap"]) * (1 - 1e-12)


@pytest.mark.parametrize("make", [
    lambda: matrix_workload.all_range_workload(32), lambda: matrix_workload.prefix_workload(24),
    lambda: matrix_workload.marginals_workload((4, 2, 3), 1),
    lambda: matrix_workload.explicit_workload((np.random.default_rng(3).random((20, 12)) < 0.4).astype(float)),
])
def test_reweighted_is_never_worse_and_has_unit_l1_sensitivity(make):
    w = make()
    n = w.n
    for design in (matrix_strategy.identity_strategy(n), matrix_strategy.hierarchical_strategy(n), ml.haar_strategy(n)):
        s = ml.l1_reweight(w, design)
        unweighted = matrix_errors.tse_per_p(w, design)
        assert s.info["unweighted"] == pytest.approx(unweighted, rel=1e-9)
        t = matrix_errors.tse_per_p(w, s)
        assert t <= unweighted * (1 + 1e-12)
        assert t == pytest.approx(s.info["objective"], rel=1e-9)
        assert ml.l1_objective(w, s.A) == pytest.approx(t, rel=1e-9)
        assert s.norm == "l1" and s.kind == f"weighted-{design.kind}"
        assert s.l1_sensitivity == pytest.approx(1.0, abs=4 * np.finfo(float).eps)
        # tse_per_p multiplies by Δ1²: a rescaled copy has the same error (§1.6 invariance)
        s3 = matrix_strategy.Strategy("x", n, A=3.0 * s.A, norm="l1")
        assert matrix_errors.tse_per_p(w, s3) == pytest.approx(t, rel=1e-9)


def test_identity_is_already_optimal_and_tree_reweighting_helps_on_ranges():
    w = matrix_workload.all_range_workload(64)
    s = ml.l1_reweight(w, matrix_strategy.identity_strategy(64))
    np.testing.assert_array_equal(s.A, np.eye(64))  # weights 1: nothing to gain
    t = ml.l1_reweight(w, matrix_strategy.hierarchical_strategy(64))
    # the weighted tree beats every unweighted design of the §7.3 table (identity 45760)
    assert t.info["objective"] < 0.8 * 45760
    assert t.info["gain"] > 3.5


def test_rank_deficient_workload_prunes_to_the_rows_it_needs():
    """Paper Example 4 (rank 4): the tree's 4 pair rows span W, so the optimum puts all weight
    on them; the other rows are pruned and the result snaps to the 0/1 pair rows (integer,
    Δ1 = 1, TSE 18 vs 36 for the identity; rank 4, so x̂ is not a cell estimate, §7.2 P9).
    The square Haar design drops the rows W does not use (c_i = 0) from the program and gives
    them the slack left in their columns."""
    W = np.array([[1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1, 1, 1],
                  [1, 1, 0, 0, 1, 1, 0, 0], [0, 0, 1, 1, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0, 1, 1],
                  [1, 1, 0, 0, 0, 0, 0, 0], [1, 1, 1, 1, -1, -1, -1, -1]], dtype=float)
    w = matrix_workload.explicit_workload(W)
    s = ml.l1_reweight(w, matrix_strategy.hierarchical_strategy(8))
    assert matrix_errors.tse_per_p(w, s) == pytest.approx(18.0, rel=1e-9)
    np.testing.assert_array_equal(s.A, np.kron(np.eye(4), np.ones((1, 2))))
    assert s.info["pruned_rows"] > 0 and s.info["snapped_to_unweighted"]
    h = ml.l1_reweight(w, ml.haar_strategy(8))
    assert h.info["method"] == "dual" and h.info["unused_rows"] == 4 and h.info["gap"] < 1e-9
    assert matrix_errors.tse_per_p(w, h) == pytest.approx(h.info["objective"], rel=1e-9)
    assert h.info["objective"] < matrix_errors.tse_per_p(w, ml.haar_strategy(8))


def test_overcomplete_speed_n256():
    import time

    w = matrix_workload.all_range_workload(256)
    t0 = time.process_time()
    s = ml.l1_reweight(w, matrix_strategy.hierarchical_strategy(256))
    cpu = time.process_time() - t0
    assert s.info["evals"] <= 245
    assert s.info["objective"] < 1.33e6  # 3.3× below the unweighted tree, 2.15× below identity
    assert cpu < 120  # CPU seconds (both cores); wall time depends on the machine's load


# --------------------------------------------------------------------------------------------
# Monte Carlo: a pure-ε release through a reweighted strategy
# --------------------------------------------------------------------------------------------


def test_monte_carlo_release_matches_the_analytic_error():
    n = 16
    w = matrix_workload.all_range_workload(n)
    s = ml.l1_reweight(w, matrix_strategy.hierarchical_strategy(n))
    assert not np.all(s.A == np.round(s.A))  # real weights: the grid-Laplace path of release
    x = np.arange(n, dtype=float) * 3 + 1
    truth = w.matrix() @ x
    src = NoiseSource(11)
    eps = 0.7
    R = 3000
    sse = np.empty(R)
    for r in range(R):
        rel = matrix_release.release(w, s, x, src, epsilon=eps)
        sse[r] = ((rel.answers - truth) ** 2).sum()
    analytic = float((rel.standard_errors**2).sum())
    # the analytic TSE is the exact noise variance times trace(G X⁺) = tse_per_p / Δ1²
    assert analytic == pytest.approx(rel.noise_variance * matrix_errors.tse_per_p(w, s) / s.l1_sensitivity**2,
                                     rel=1e-9)
    # discrete Laplace on a 2^-k grid: variance 2 (Δ1/ε)² up to the grid slack (1e-6)
    assert rel.noise_variance == pytest.approx(2 * (rel.sensitivity / eps) ** 2, rel=1e-5)
    assert rel.cost.definition == "pure" and rel.cost.value == eps
    # runs are i.i.d.; the mean SSE has standard error sd/sqrt(R) (CLT): allow 4 of them
    se = sse.std(ddof=1) / math.sqrt(R)
    assert abs(sse.mean() - analytic) < 4 * se


# --------------------------------------------------------------------------------------------
# l1_strategy: candidates, extra designs, grids, cache
# --------------------------------------------------------------------------------------------


def test_l1_strategy_picks_the_best_candidate_and_explains_it():
    w = matrix_workload.all_range_workload(64)
    s = matrix_design.l1_strategy(w)
    c = s.info["candidates"]
    assert set(c) == {"identity", "hierarchical", "haar", "weighted-hierarchical", "weighted-haar"}
    assert s.info["chosen"] == min(c, key=c.get) == "weighted-hierarchical"
    assert matrix_errors.tse_per_p(w, s) == pytest.approx(c["weighted-hierarchical"], rel=1e-12)
    assert s.info["best_unweighted"] == "identity"
    assert s.info["gain_over_unweighted"] == pytest.approx(45760 / c["weighted-hierarchical"])
    assert "L1-weighted binary hierarchical tree" in s.info["l1_note"]
    assert f"{s.info['gain_over_unweighted']:.3g}×" in s.info["l1_note"]
    assert matrix_design.design_strategy(w, pure_dp=True).kind == s.kind


def test_l1_strategy_uses_a_better_extra_design():
    """Areas as interleaved cell groups (like a geography whose leaf order does not follow the
    tree): the workload is the 4 area totals and the grand total.  A 3-level area tree (total,
    areas, cells) is far better than any interval design over the cell order."""
    n, groups = 32, 4
    area = np.arange(n) % groups
    rows = [np.ones(n)] + [(area == g).astype(float) for g in range(groups)]
    w = matrix_workload.explicit_workload(np.array(rows))
    tree = matrix_strategy.Strategy("area-tree", n, A=np.vstack([np.ones(n)] + rows[1:] + [np.eye(n)]), norm="l1")
    s = matrix_design.l1_strategy(w, extra_designs=[tree])
    c = s.info["candidates"]
    assert s.info["chosen"] == "weighted extra[0] area-tree"
    builtin = min(v for k, v in c.items() if "extra" not in k)
    assert c[s.info["chosen"]] < 0.5 * builtin
    assert s.info["chosen"] in s.info["l1_note"]
    assert s.kind == "weighted-area-tree"
    with pytest.raises(ParameterError):
        matrix_design.l1_strategy(w, extra_designs=[matrix_strategy.identity_strategy(5)])


def test_l1_strategy_on_grids_reweights_each_axis():
    w = matrix_workload.range_2d_workload(16, 8)
    s = matrix_design.l1_strategy(w)
    assert s.is_kron and s.norm == "l1"
    c = s.info["candidates"]
    assert min(c.values()) == pytest.approx(matrix_errors.tse_per_p(w, s), rel=1e-12)
    assert c[s.info["chosen"]] <= min(c["kron identity"], c["kron hierarchical"])  # old choices
    # Kronecker error = product of the per-axis errors (§2.9.2), for the reweighted factors too
    f0, f1 = w.factors
    prod = matrix_errors.tse_per_p(f0, s.factors[0]) * matrix_errors.tse_per_p(f1, s.factors[1])
    assert matrix_errors.tse_per_p(w, s) == pytest.approx(prod, rel=1e-12)
    rr = matrix_workload.random_rectangles_workload(16, 16, [(4, 4)], 20, seed=1)
    s2 = matrix_design.l1_strategy(rr)
    assert s2.is_kron and s2.info["chosen"] == min(s2.info["candidates"], key=s2.info["candidates"].get)


def test_cache_round_trips_l1_strategies(tmp_path, monkeypatch):
    monkeypatch.setenv("DPCORE_CACHE_DIR", str(tmp_path))
    for w in (matrix_workload.all_range_workload(48), matrix_workload.range_2d_workload(8, 6)):
        a = matrix_cache.cached_strategy(w, pure_dp=True)
        b = matrix_cache.cached_strategy(w, pure_dp=True)  # loaded from disk
        assert b.kind == a.kind and b.norm == "l1" and b.is_kron == a.is_kron
        assert b.info["l1_note"] == a.info["l1_note"] and b.info["chosen"] == a.info["chosen"]
        assert b.info["candidates"] == a.info["candidates"]
        assert matrix_errors.tse_per_p(w, b) == matrix_errors.tse_per_p(w, a)
        for pa, pb in zip(a.factors or (a,), b.factors or (b,), strict=True):
            assert pb.kind == pa.kind
            np.testing.assert_array_equal(pb.A, pa.A)
            if "weights" in pa.info:
                np.testing.assert_array_equal(pb.info["weights"], pa.info["weights"])
        if not a.is_kron and "weights" in a.info["design_info"]:
            np.testing.assert_array_equal(b.info["design_info"]["weights"],
                                          a.info["design_info"]["weights"])
    assert len(list(tmp_path.glob("*.npz"))) == 2
