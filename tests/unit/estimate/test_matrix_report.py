"""The matrix mechanism's pre-release error report (spec §3.3, §6.3), checked against brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest
from points_helpers import levels_of
from scipy import special

from dpcore.data.domain import Bounds, Grid
from dpcore.estimate import (
    matrix_design,
    matrix_errors,
    matrix_release,
    matrix_strategy,
    matrix_workload,
)
from dpcore.estimate import matrix_report as mr
from dpcore.points.mechanisms.matrix import MatrixMechanism, _svd_bound
from dpcore.privacy.budget import pure, zcdp


def _brute_q(W: np.ndarray, s: matrix_strategy.Strategy) -> np.ndarray:
    """``w X⁺ wᵀ`` for every row, from the explicit strategy matrix (lstsq pseudo-inverse)."""
    A = s.A if not s.factors else np.kron(s.factors[0].A, s.factors[1].A)
    Ap = np.linalg.pinv(A, rcond=1e-10)
    return ((W @ Ap) ** 2).sum(axis=1)


def test_ranges_2d_atoms_match_every_query_one_by_one() -> None:
    w = matrix_workload.range_2d_workload(3, 5)
    s = matrix_design.kron_eigen_design(w)
    prof = mr.profile(w, s, pure=False)
    rep = mr.report(prof, rho=0.5)
    W = w.matrix()
    q = _brute_q(W, s)
    cells = W.sum(axis=1)
    var = matrix_release.calibrate(s, rho=0.5).variance
    se = np.sqrt(var * q)
    assert rep["m"] == w.m == sum(g["n_queries"] for g in rep["groups"])
    assert rep["rmse"] == pytest.approx(math.sqrt(np.mean(se**2)), rel=1e-9)
    assert rep["worst_se"] == pytest.approx(se.max(), rel=1e-9)
    # groups by size class: 1 cell, 2-4, 5-16 cells
    assert [g["group"] for g in rep["groups"]] == ["1 cell", "2–4 cells", "5–16 cells"]
    for g, sel in zip(rep["groups"], [cells == 1, (cells > 1) & (cells <= 4), cells > 4], strict=True):
        assert g["n_queries"] == sel.sum()
        assert g["rmse_this"] == pytest.approx(math.sqrt(np.mean(se[sel] ** 2)), rel=1e-9)
        assert g["worst_se"] == pytest.approx(se[sel].max(), rel=1e-9)
        assert g["rmse_identity"] == pytest.approx(math.sqrt(var_id := matrix_release.calibrate(
            matrix_strategy.identity_strategy(1), rho=0.5).variance) * math.sqrt(np.mean(cells[sel])), rel=1e-9)
        assert var_id > 0
    # per size: RMS, min and max SE of this strategy
    bs = rep["by_size"]
    for c, rms, lo, hi in zip(bs["cells"], bs["rms_se_this"], bs["min_se_this"], bs["max_se_this"], strict=True):
        sel = cells == c
        assert rms == pytest.approx(math.sqrt(np.mean(se[sel] ** 2)), rel=1e-9)
        assert (lo, hi) == (pytest.approx(se[sel].min(), rel=1e-9), pytest.approx(se[sel].max(), rel=1e-9))


def test_comparisons_match_matrix_mech_and_the_spec_baselines() -> None:
    w = matrix_workload.range_2d_workload(4, 4)
    s = matrix_design.kron_eigen_design(w)
    rep = mr.report(mr.profile(w, s, pure=False), rho=0.25)
    comp = {c["key"]: c for c in rep["comparisons"]}
    W = w.matrix()
    # identity: TSE/P = trace(G) (spec §3.3), P the variance of a sensitivity-1 answer
    p1 = matrix_release.calibrate(matrix_strategy.identity_strategy(16), rho=0.25).variance
    assert comp["identity"]["rmse"] == pytest.approx(math.sqrt(p1 * np.trace(W.T @ W) / w.m), rel=1e-9)
    # Gaussian on W (spec T2): every answer gets noise calibrated to Δ2(W) = max column norm
    d2 = float(np.sqrt((W**2).sum(axis=0)).max())
    direct = matrix_strategy.Strategy("w", 16, A=W)
    assert direct.l2_sensitivity == pytest.approx(d2)
    assert comp["direct"]["rmse"] == pytest.approx(math.sqrt(matrix_release.calibrate(direct, rho=0.25).variance), rel=1e-9)
    # hierarchical per axis: the error matrix_errors computes for that Kronecker strategy
    h = matrix_strategy.Strategy("kron", 16, factors=(matrix_strategy.hierarchical_strategy(4), matrix_strategy.hierarchical_strategy(4)), norm="l2")
    vh = matrix_release.calibrate(h, rho=0.25).variance
    tse = matrix_errors.tse_per_p(w, matrix_strategy.Strategy("kron", 16, factors=tuple(
        matrix_strategy.Strategy(f.kind, f.n, A=f.A, norm="l2") for f in h.factors), norm="l2"))
    assert comp["hierarchical"]["rmse"] == pytest.approx(math.sqrt(vh * tse / h.l2_sensitivity**2 / w.m), rel=1e-9)
    assert comp["this"]["ratio_to_this"] == 1.0
    # the Eigen-Design beats the identity and Gaussian-on-W on all rectangles (spec §3.5 ordering)
    assert comp["this"]["rmse"] < comp["identity"]["rmse"] and comp["this"]["rmse"] < comp["direct"]["rmse"]


def test_simultaneous_bound_is_bonferroni_with_the_normal_tail() -> None:
    w = matrix_workload.prefix_workload(64)
    s = matrix_design.eigen_design(w)
    rep = mr.report(mr.profile(w, s, pure=False), rho=0.1)
    sim = rep["simultaneous_95"]
    z = -special.ndtri(0.05 / (2 * 64))
    assert sim["z"] == pytest.approx(z) and sim["bound"] == pytest.approx(z * rep["worst_se"])
    assert "Bonferroni" in sim["method"] and "normal" in sim["method"]
    # the sub-Gaussian version uses σ, not the (smaller) discrete-Gaussian variance, and a larger quantile
    assert sim["bound_subgaussian"] > sim["bound"]
    # Monte-Carlo with continuous Gaussian noise of that variance: the bound holds in >= 95 % of runs
    rng = np.random.default_rng(0)
    var = matrix_release.calibrate(s, rho=0.1).variance
    M = w.matrix() @ np.linalg.pinv(s.A, rcond=1e-10)  # answers' noise = M z
    z_ = rng.normal(0.0, math.sqrt(var), (4000, s.A.shape[0]))
    cover = (np.abs(z_ @ M.T).max(axis=1) <= sim["bound"]).mean()
    assert cover >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / 4000)


def test_prefix_and_all_ranges_on_a_line() -> None:
    n = 12
    for w in (matrix_workload.prefix_workload(n), matrix_workload.all_range_workload(n)):
        s = matrix_design.eigen_design(w)
        rep = mr.report(mr.profile(w, s, pure=False), rho=1.0)
        q = _brute_q(w.matrix(), s)
        var = matrix_release.calibrate(s, rho=1.0).variance
        assert rep["rmse"] == pytest.approx(math.sqrt(var * q.mean()), rel=1e-9)
        assert rep["worst_se"] == pytest.approx(math.sqrt(var * q.max()), rel=1e-9)
        assert sum(rep["by_size"]["n_queries"]) == w.m


def test_groups_of_an_uploaded_workload_are_unweighted_and_in_file_order() -> None:
    rects = np.array([[0, 2, 0, 2], [1, 4, 0, 3], [0, 4, 0, 4], [2, 3, 2, 4]])
    w = matrix_workload.Workload("up", (4, 4), 4, {"family": "uploaded"}, rects=rects)
    s = matrix_design.eigen_design(matrix_workload.explicit_workload(np.array([[3.0], [1.0], [1.0], [1.0]]) * w.matrix(), shape=(4, 4)))
    rep = mr.report(mr.profile(w, s, pure=False, groups=["b", "a", "b", "a"]), rho=0.5)
    assert rep["grouped_by"] == "group" and [g["group"] for g in rep["groups"]] == ["b", "a"]
    q = _brute_q(w.matrix(), s)  # unweighted rows: spec P15
    var = matrix_release.calibrate(s, rho=0.5).variance
    assert rep["groups"][0]["rmse_this"] == pytest.approx(math.sqrt(var * q[[0, 2]].mean()), rel=1e-9)
    assert rep["groups"][1]["worst_se"] == pytest.approx(math.sqrt(var * q[[1, 3]].max()), rel=1e-9)


def test_pure_epsilon_uses_laplace_and_says_the_tail_is_approximate() -> None:
    w = matrix_workload.range_2d_workload(4, 4)
    s = matrix_design.l1_strategy(w)
    rep = mr.report(mr.profile(w, s, pure=True), epsilon=1.0)
    assert "note" in rep["simultaneous_95"] and "bound_subgaussian" not in rep["simultaneous_95"]
    assert rep["labels"]["direct"].endswith("(Laplace on W)")
    comp = {c["key"]: c for c in rep["comparisons"]}
    # identity under pure ε: discrete Laplace of scale 1/ε per cell
    p1 = matrix_release.calibrate(matrix_strategy.identity_strategy(1), epsilon=1.0).variance
    cells = w.matrix().sum(axis=1)
    assert comp["identity"]["rmse"] == pytest.approx(math.sqrt(p1 * cells.mean()), rel=1e-9)


def test_large_grid_is_summarised_without_listing_queries() -> None:
    w = matrix_workload.range_2d_workload(64, 64)  # 4.3 million rectangles
    s = matrix_design.kron_eigen_design(w)
    rep = mr.report(mr.profile(w, s, pure=False), rho=0.5)
    assert sum(rep["by_size"]["n_queries"]) == pytest.approx(w.m)
    assert len(rep["by_size"]["cells"]) <= mr.MAX_SIZE_POINTS
    t = matrix_errors.tse_per_p(w, s)
    assert rep["rmse"] == pytest.approx(math.sqrt(matrix_release.calibrate(s, rho=0.5).variance * t / w.m), rel=1e-9)
    fig = mr.se_vs_size_figure(rep)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    names = [tr.name for tr in fig.data]
    assert any("used" in n or "this" in n for n in names) and "identity (noisy cells)" in names


def test_haar_is_used_when_available_else_skipped_with_a_note() -> None:
    w = matrix_workload.prefix_workload(16)
    prof = mr.profile(w, matrix_design.eigen_design(w), pure=False)
    keys = [c.key for c in prof.candidates]
    if mr._haar_maker() is None:
        assert "haar" not in keys and any("Haar" in s for s in prof.skipped)
    else:
        assert "haar" in keys


def test_mechanism_plan_carries_the_report_and_matches_its_rmse() -> None:
    g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 8, 8)
    m = MatrixMechanism()
    for cost in (zcdp(0.5), pure(1.0)):
        mx = levels_of(m, g, cost, {"workload": "ranges_2d"})[0].extra["matrix"]
        assert mx["comparisons"][0]["rmse"] == pytest.approx(mx["expected_rmse_per_query"], rel=1e-9)
        assert mx["worst_se"] >= mx["expected_rmse_per_query"]
        assert mx["simultaneous_95"]["bound"] > mx["worst_se"]
        assert {g_["group"] for g_ in mx["groups"]} <= {"1 cell", "2–4 cells", "5–16 cells", "17–64 cells"}


def test_svd_bound_shortcuts_agree_with_matrix_mech() -> None:
    for n in (1, 7, 64):
        assert _svd_bound(matrix_workload.prefix_workload(n)) == pytest.approx(matrix_errors.svd_bound(matrix_workload.prefix_workload(n)), rel=1e-9)
    w = matrix_workload.random_rectangles_workload(8, 8, [(3, 2)], 20, seed=4)
    assert _svd_bound(w) == pytest.approx(matrix_errors.svd_bound(w), rel=1e-9)
