"""The matrix mechanism on a geographic hierarchy (dpcore.areas.area_sets, spec matrix-mechanism.md §6.1)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from areas_helpers import plan_hierarchy
from scipy import stats

from dpcore import catalog, pipeline
from dpcore.areas import area_sets, export
from dpcore.areas.counts import HierarchyCounts
from dpcore.areas.mechanisms import matrix
from dpcore.cli import main
from dpcore.core.record import write_files
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import InputError, ParameterError
from dpcore.estimate import matrix_errors, matrix_release
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource

LEVELS = ["state", "county", "tract"]


def irregular() -> tuple[Hierarchy, HierarchyCounts]:
    """3 states with 1, 3 and 4 counties of 1–5 tracts (codes repeat within parents)."""
    rng = np.random.default_rng(5)
    rows = []
    for s, n_c in zip(("01", "02", "03"), (1, 3, 4), strict=True):
        for c in range(n_c):
            for t in range(int(rng.integers(1, 6))):
                rows.append({"state": s, "county": f"{c + 1:03d}", "tract": f"{t + 1:02d}",
                             "pop": int(rng.integers(0, 500))})
    df = pd.DataFrame(rows)
    h = Hierarchy.from_frame(df, LEVELS)
    return h, HierarchyCounts.from_frame(df, h, LEVELS, "pop")


def node_rows(h: Hierarchy, d: int) -> np.ndarray:
    anc = matrix.ancestors(h)[d]
    B = np.zeros((h.sizes[d], h.n_leaves))
    B[anc, np.arange(h.n_leaves)] = 1.0
    return B


def test_workload_rows_and_structured_gram_agree() -> None:
    h, _ = irregular()
    w8 = matrix.level_weights(h, "custom", [1, 2, 3, 4])
    sets = area_sets.read_area_sets(b"query,area\nA,02\nA,03/001\nB,01/001/01\n", h)
    w = matrix.workload(h, w8, sets, sets_weight=2.0)
    assert w.m == h.n_nodes + 2
    np.testing.assert_allclose(w.gram(), w.W.T @ w.W, atol=1e-12)
    # P15: a level of n_d areas with importance I_d gets row weight sqrt(I_d / n_d) (max 1)
    w2 = np.array([1, 2, 3, 4]) / np.array(h.sizes)
    np.testing.assert_allclose(w8, np.sqrt(w2 / w2.max()))
    assert np.allclose(matrix.level_weights(h, "queries"), 1.0)
    np.testing.assert_allclose(matrix.level_weights(h, "uniform"), matrix.level_weights(h, "levels"))
    with pytest.raises(ParameterError, match="importance"):
        matrix.level_weights(h, "geometric")


def test_regular_tree_reaches_the_svd_bound() -> None:
    """Spec §6.1: on a geography-hierarchy Gram the Eigen-Design reaches the lower bound."""
    df = pd.DataFrame([{"a": f"{i}", "b": f"{j}", "c": f"{k}", "n": 1}
                       for i in range(3) for j in range(4) for k in range(5)])
    h = Hierarchy.from_frame(df, ["a", "b", "c"])
    for imp in ("queries", "levels"):
        p = catalog.get("hierarchy", "matrix").plan_tree(h, budget.zcdp(0.5), split=imp)
        assert p.extra["ratio_to_lower_bound"] == pytest.approx(1.0, abs=1e-6)
        assert p.extra["program1_gap"] < matrix.GAP_TOL


def test_plan_sd_is_the_exact_matrix_mechanism_variance() -> None:
    h, _ = irregular()
    cost = budget.zcdp(0.3)
    p = catalog.get("hierarchy", "matrix").plan_tree(h, cost, split="levels")
    w = matrix.workload(h, matrix.level_weights(h, "levels"))
    s = matrix.strategy(h, w, "zcdp")
    cal = matrix_release.calibrate(s, rho=0.3)
    Xinv = np.linalg.inv(s.A.T @ s.A)  # full rank: every finest area is a query
    for d in range(h.depth + 1):
        B = node_rows(h, d)
        want = np.sqrt(cal.variance * np.einsum("ij,jk,ik->i", B, Xinv, B))
        np.testing.assert_allclose(p.node_sd[d], want, rtol=1e-8)
        assert p.levels[d].sd == pytest.approx(math.sqrt(np.mean(want**2)), rel=1e-8)
    # never below the lower bound, and the strategy's L2 sensitivity is the one calibrated
    assert p.extra["ratio_to_lower_bound"] >= 1.0
    assert p.levels[0].l2_sensitivity == pytest.approx(s.l2_sensitivity)
    assert cal.effective_sensitivity ** 2 / (2 * cal.scale**2) <= 0.3


def test_release_is_consistent_unbiased_and_matches_the_plan() -> None:
    """Monte Carlo: per-node squared errors over R runs, divided by the planned variance, are
    χ²_R (the estimate is a linear function of many discrete Gaussians: close to normal)."""
    h, counts = irregular()
    cost = budget.zcdp(0.5)
    sets = area_sets.read_area_sets(b"query,area,level\nX,02,state\nX,01/001/01,tract\n", h)
    p = catalog.get("hierarchy", "matrix").plan_tree(h, cost, area_sets=sets)
    truth = counts.levels()
    R = 300
    src = NoiseSource(11)
    sq = [np.zeros(n) for n in h.sizes]
    err_sum = [np.zeros(n) for n in h.sizes]
    set_sq = 0.0
    set_truth = float(truth[1][1] + truth[3][0])
    for _ in range(R):
        rel = catalog.get("hierarchy", "matrix").release_counts(counts, cost, src, area_sets=sets)
        for d in range(h.depth + 1):
            e = rel.values[d] - truth[d]
            sq[d] += e**2
            err_sum[d] += e
        set_sq += (rel.details["area_sets"]["answer"][0] - set_truth) ** 2
    assert rel.consistent and not rel.mechanism.integral
    lo, hi = stats.chi2.ppf([1e-5, 1 - 1e-5], R)
    for d in range(h.depth + 1):
        ratio = sq[d] / p.node_sd[d] ** 2
        assert np.all((ratio > lo) & (ratio < hi)), (d, ratio.min(), ratio.max(), lo, hi)
        # unbiased: the mean error of each node is N(0, sd²/R)
        z = err_sum[d] / R / (p.node_sd[d] / math.sqrt(R))
        assert np.all(np.abs(z) < stats.norm.ppf(1 - 1e-5))
    set_sd = p.extra["area_sets"]["sd"][0]
    assert lo < set_sq / set_sd**2 < hi


def test_area_sets_parsing_and_clear_errors() -> None:
    h, _ = irregular()
    sets = area_sets.read_area_sets(
        "Query,Area\nmetro,03/001\nmetro,03/002\nmetro,03/001/01\nsolo,01\n", h)
    assert sets.names == ("metro", "solo")
    n_metro = len(h.descendants(2, h.find(2, "03/001"), 3)) + len(h.descendants(2, h.find(2, "03/002"), 3))
    assert sets.rows[0].sum() == n_metro  # a tract listed inside its county counts once
    assert sets.members[0][0] == "county:03/001"
    # joined codes (GEOIDs) are accepted too
    assert area_sets.read_area_sets(b"query,area\nq,03001\n", h).rows.sum() == len(
        h.descendants(2, h.find(2, "03/001"), 3))
    bad = {
        b"": "empty",
        b"query,area\n": "no rows",
        b"name,colour\nq,red\n": "no area code column",
        b"query,area\nq,99\n": "not in the hierarchy",
        b"query,area\nq,\n": "empty query name or area code",
        b"query,area,level\nq,01,planet\n": "Unknown level",
        b"\xff\xfe\x00q": "Could not read",
    }
    for data, msg in bad.items():
        with pytest.raises(InputError, match=msg):
            area_sets.read_area_sets(data, h, "sets.csv")


def test_ambiguous_code_asks_for_a_level_column() -> None:
    df = pd.DataFrame({"a": ["1", "1", "2"], "b": ["2", "3", "1"], "n": [1, 2, 3]})
    h = Hierarchy.from_frame(df, ["a", "b"], codes="global")
    with pytest.raises(InputError, match="level"):
        area_sets.read_area_sets(b"query,area\nq,2\n", h)
    s = area_sets.read_area_sets(b"query,area,level\nq,2,b\n", h)
    assert s.rows.sum() == 1


def test_refusals_before_anything_is_spent(monkeypatch: pytest.MonkeyPatch) -> None:
    h, counts = irregular()
    led = Ledger(budget.zcdp(1.0))
    with pytest.raises(ParameterError, match="add/remove"):
        pipeline.release(plan_hierarchy(counts, "matrix", budget.zcdp(0.5), neighbour="replace"), counts, ledger=led)
    monkeypatch.setattr(matrix, "MAX_LEAVES", 10)
    with pytest.raises(ParameterError, match="at most 10 finest areas"):
        pipeline.release(plan_hierarchy(counts, "matrix", budget.zcdp(0.5)), counts, ledger=led)
    with pytest.raises(ParameterError, match="matrix mechanism only"):
        catalog.get("hierarchy", "hay").plan_tree(h, budget.zcdp(0.5), area_sets=area_sets.read_area_sets(b"query,area\nq,01\n", h))
    assert led.spent == 0 and not led.entries


def test_pipeline_charges_once_and_the_record_validates(tmp_path: Path) -> None:
    h, counts = irregular()
    led = Ledger(budget.zcdp(1.0))
    sets = area_sets.read_area_sets(b"query,area\nA,02\nA,03\n", h)
    plan = plan_hierarchy(counts, "matrix", budget.zcdp(0.25), area_sets=sets)
    rel = pipeline.release(plan, counts, ledger=led, noise=NoiseSource(3)).inner
    assert led.spent == pytest.approx(0.25) and len(led.entries) == 1
    assert led.entries[0].details["strategy"] == "Eigen-Design"
    paths = write_files(export.hierarchy_files(rel, led), tmp_path)
    assert {p.name for p in paths} == {"release.csv", "area_queries.csv", "release.json"}
    rec = json.loads((tmp_path / "release.json").read_text())
    export.validate_hierarchy_record(rec)
    assert rec["mechanism"]["name"] == "matrix" and "area_queries.csv" in rec["outputs"]["files"]
    assert "whole budget" in rec["privacy"]["composition"]
    q = pd.read_csv(tmp_path / "area_queries.csv")
    assert list(q.columns) == ["query", "areas", "noisy_total", "standard_error", "ci95_low", "ci95_high"]
    true_a = int(counts.levels()[1][1] + counts.levels()[1][2])
    assert q["noisy_total"].iloc[0] != true_a  # noisy, not the true total
    # no exported number is the true total (a substring test would trip on an interval bound such as 2444.42)
    assert true_a not in q[["noisy_total", "standard_error", "ci95_low", "ci95_high"]].to_numpy()


def test_pure_epsilon_uses_an_l1_strategy_and_says_so() -> None:
    h, counts = irregular()
    p = catalog.get("hierarchy", "matrix").plan_tree(h, budget.pure(1.0))
    assert p.levels[0].noise.startswith("discrete_laplace")
    assert p.extra["rmse_lower_bound"] is None and any("Pure ε-DP" in n for n in p.extra["notes"])
    w = matrix.workload(h, matrix.level_weights(h, "levels"))
    s = matrix.strategy(h, w, "pure")
    assert s.norm == "l1"
    # never worse than noising every area of the tree (the geographic tree design)
    assert matrix_errors.tse_per_p(w, s) <= matrix_errors.tse_per_p(w, matrix.tree_design(h)) * (1 + 1e-9)
    rel = catalog.get("hierarchy", "matrix").release_counts(counts, budget.pure(1.0), NoiseSource(2))
    assert rel.consistent


def test_cli_release_with_area_sets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through the CLI's ``main(argv)`` in this process (tests/unit/test_bad_inputs.py runs the real
    ``python -m dpcore`` process)."""
    h, counts = irregular()
    rows = [{"state": p[0], "county": p[1], "tract": p[2], "pop": int(v)}
            for p, v in zip(h.paths(3), counts.levels()[3], strict=True)]
    pd.DataFrame(rows).to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "sets.csv").write_text("query,area\nA,02\nA,03/001\n")
    out = tmp_path / "out"
    rc = main(["release", "hierarchy", "--input", str(tmp_path / "t.csv"),
               "--levels", "state,county,tract", "--count", "pop", "--input-lists-all-areas",
               "--mechanism", "matrix", "--rho", "0.5", "--split", "queries",
               "--area-sets", str(tmp_path / "sets.csv"), "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    assert (out / "area_queries.csv").exists()
    rec = json.loads((out / "release.json").read_text())
    assert rec["budget"]["split"] == "queries"
    capsys.readouterr()
    rc2 = main(["release", "hierarchy", "--input", str(tmp_path / "t.csv"),
                "--levels", "state,county,tract", "--count", "pop", "--input-lists-all-areas",
                "--mechanism", "hay", "--rho", "0.5", "--area-sets", str(tmp_path / "sets.csv"),
                "--out", str(out)])
    err2 = capsys.readouterr().err
    assert rc2 != 0 and "matrix mechanism only" in err2 and "Traceback" not in err2


def test_area_sets_weight_is_in_units_of_one_level() -> None:
    h, _ = irregular()
    # 'levels': the root (1 area) has the largest per-query weight, 1; four queries sharing the
    # importance of one level get w² = 1/4 each
    assert matrix.sets_row_weight(h, "levels", None, 4, 1.0) == pytest.approx(0.5)
    assert matrix.sets_row_weight(h, "levels", None, 4, 4.0) == pytest.approx(1.0)
    # 'queries': each query counts like one area total times the weight
    assert matrix.sets_row_weight(h, "queries", None, 4, 1.0) == pytest.approx(1.0)
    with pytest.raises(ParameterError, match="positive"):
        matrix.sets_row_weight(h, "levels", None, 4, 0.0)
