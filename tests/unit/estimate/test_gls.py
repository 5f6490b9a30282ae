"""Tests of the data users' estimates and intervals (dpcore.estimate.gls, dpcore.areas.data_users).

Reference values come from dense linear algebra outside the code under test: the GLS estimate by
``numpy.linalg.lstsq`` on the whitened system, its covariance ``(AᵀΣ⁻¹A)⁻¹`` by ``numpy.linalg.inv``
and, with invariants ``Bx = t``, the KKT system of the equality-constrained problem solved densely.

Statistical tolerances:

* replicates: the variance estimate from R independent replicates of a normal error has relative SD
  ``√(2/R)``; R = 2000 gives 3.2 %, so the 10 % tolerance is 3.2 SDs (each union, fixed seed).
* coverage: over N independent releases, the share of intervals covering the truth is binomial with
  SD ``√(0.9·0.1/N)``; N = 300 gives 1.7 %, tolerance 4 SDs.
* unbiasedness: the mean of N standardised errors ``(est − truth)/sd`` has SE ``1/√N``; tolerance 4 SEs.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pytest
import scipy.sparse as sp

from dpcore import catalog
from dpcore.areas.counts import HierarchyCounts
from dpcore.areas.data_users import data_users_section as areas_data_users_section
from dpcore.areas.data_users import hierarchy_data_user_files, hierarchy_pack
from dpcore.areas.export import hierarchy_files, validate_hierarchy_record
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import ParameterError
from dpcore.estimate.data_users import pack_files
from dpcore.estimate.gls import (
    DESIGN_SCHEMA,
    Measurements,
    gls_estimate,
    measurements_from,
    read_release,
    replicate_variance,
    replicates,
    union_interval,
    union_variance,
)
from dpcore.privacy import budget
from dpcore.privacy.noise import NoiseSource

MECHS = ["exact", "topdown_l2", "topdown_linf", "hay", "bottom_up", "independent"]


def random_tree(rng: np.random.Generator, fanouts: list[tuple[int, int]]) -> pd.DataFrame:
    paths: list[tuple[str, ...]] = [()]
    for lo, hi in fanouts:
        paths = [p + (f"{c:02d}",) for p in paths for c in range(int(rng.integers(lo, hi + 1)))]
    return pd.DataFrame(paths, columns=[f"l{d}" for d in range(len(paths[0]))])


def counts_for(df: pd.DataFrame, values: np.ndarray) -> HierarchyCounts:
    levels = list(df.columns)
    h = Hierarchy.from_frame(df, levels)
    return HierarchyCounts.from_frame(df.assign(n=values), h, levels, "n")


def write(files: dict[str, bytes], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (out / name).write_bytes(data)
    return out


def dense_reference(m: Measurements) -> tuple[np.ndarray, np.ndarray]:
    """GLS estimate and covariance by dense algebra (KKT system with invariants)."""
    A = m.A.toarray()
    W = np.diag(1.0 / m.var)
    n = A.shape[1]
    if not m.invariants:
        Aw = A / np.sqrt(m.var)[:, None]
        x = np.linalg.lstsq(Aw, m.y / np.sqrt(m.var), rcond=None)[0]
        return x, np.linalg.inv(A.T @ W @ A)
    B = m.B.toarray()
    k = B.shape[0]
    K = np.block([[A.T @ W @ A, B.T], [B, np.zeros((k, k))]])
    sol = np.linalg.solve(K, np.concatenate([A.T @ W @ m.y, m.t]))
    Kinv = np.linalg.inv(K)
    return sol[:n], Kinv[:n, :n]


def without_tree(m: Measurements) -> Measurements:
    return Measurements(m.A, m.y, m.var, m.cells, B=m.B, t=m.t, families=m.families)


@pytest.fixture(scope="module")
def small_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(3)
    df = random_tree(rng, [(2, 4), (2, 4), (1, 3)])
    c = counts_for(df, rng.integers(0, 50, len(df)))
    rel = catalog.get("hierarchy", "exact").release_counts(c, budget.pure(1.0), NoiseSource(5))
    return write(hierarchy_files(rel), tmp_path_factory.mktemp("small"))


# -- exactness: two passes and CG against dense algebra ------------------------------------------


@pytest.mark.parametrize("neighbour", ["add_remove", "replace"])
@pytest.mark.parametrize("mech", ["exact", "bottom_up"])
def test_tree_and_cg_variances_equal_dense_lstsq(tmp_path: Path, neighbour: str, mech: str) -> None:
    rng = np.random.default_rng(11)
    df = random_tree(rng, [(2, 3), (2, 4), (1, 3)])
    c = counts_for(df, rng.integers(0, 30, len(df)))
    rel = catalog.get("hierarchy", mech).release_counts(c, budget.zcdp(0.3), NoiseSource(2), neighbour=neighbour,
                                                        split="geometric")
    m = read_release(write(hierarchy_data_user_files(rel), tmp_path))
    assert m.tree is not None and m.invariants == (1 if neighbour == "replace" and mech != "bottom_up" else 0)
    x_ref, C_ref = dense_reference(m)
    mc = without_tree(m)
    np.testing.assert_allclose(gls_estimate(m), x_ref, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(gls_estimate(mc), x_ref, rtol=1e-8, atol=1e-8)
    for _ in range(5):
        q = (rng.random(m.n) < 0.4).astype(float) * rng.choice([1.0, 0.5], m.n)
        ref = q @ C_ref @ q
        assert union_variance(m, q) == pytest.approx(ref, rel=1e-8, abs=1e-8)
        assert union_variance(mc, q) == pytest.approx(ref, rel=1e-8, abs=1e-8)


def test_estimates_csv_matches_dense_per_node(small_release: Path) -> None:
    m = read_release(small_release)
    x_ref, C_ref = dense_reference(m)
    design = orjson.loads((small_release / "design.json").read_bytes())
    est = pd.read_csv(small_release / "estimates.csv", dtype={"code": str})
    assert list(est.columns) == ["level", "code", "estimate", "variance", "sd", "published"]
    keys = list(design["nodes"])
    assert len(est) == len(keys)
    for key, (_, row) in zip(keys, est.iterrows(), strict=True):
        q = np.zeros(m.n)
        q[design["nodes"][key]] = 1.0
        assert row["estimate"] == pytest.approx(q @ x_ref, abs=2e-6)
        assert row["variance"] == pytest.approx(q @ C_ref @ q, abs=2e-6)
    released = pd.read_csv(small_release / "release.csv", dtype={"code": str})
    assert est["published"].tolist() == released["noisy_count"].tolist()


def test_measurements_are_the_noisy_counts_before_post_processing(tmp_path: Path) -> None:
    """Independent noise: the release is the measurements; exact: the same draws, then projected."""
    rng = np.random.default_rng(4)
    df = random_tree(rng, [(2, 3), (2, 3)])
    c = counts_for(df, rng.integers(0, 30, len(df)))
    ind = catalog.get("hierarchy", "independent").release_counts(c, budget.pure(1.0), NoiseSource(9))
    ex = catalog.get("hierarchy", "exact").release_counts(c, budget.pure(1.0), NoiseSource(9))
    mi = pd.read_csv(pd.io.common.BytesIO(hierarchy_data_user_files(ind)["measurements.csv"]))
    me = pd.read_csv(pd.io.common.BytesIO(hierarchy_data_user_files(ex)["measurements.csv"]))
    assert mi["value"].tolist() == np.concatenate(ind.values).tolist()
    assert me["value"].tolist() == mi["value"].tolist()  # same seed: same draws; exact post-processes them
    assert np.concatenate(ex.values).tolist() != mi["value"].tolist()
    assert set(mi["family"]) == {"discrete_laplace"} and set(mi["phase"]) == {"count"}


def test_group_sizes_write_no_data_user_files() -> None:
    df = pd.DataFrame({"a": ["1", "1", "2"], "b": ["x", "y", "z"]})
    h = Hierarchy.from_frame(df, ["a", "b"])
    c = HierarchyCounts.from_frame(df.assign(s1=[1, 2, 0], s2=[0, 1, 1]), h, ["a", "b"], ["s1", "s2"])
    rel = catalog.get("hierarchy", "exact").release_counts(c, budget.pure(1.0), NoiseSource(1))
    files = hierarchy_files(rel)
    assert "measurements.csv" not in files
    rec = orjson.loads(files["release.json"])
    validate_hierarchy_record(rec)
    assert "data_users" not in rec


def test_hierarchies_over_the_area_limit_write_no_data_user_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over :data:`MAX_AREAS` areas (8 M census blocks: design.json took more memory than the release)
    the release has no data users' files and its record no ``data_users`` section; at the limit it has."""
    from dpcore.areas import data_users

    rng = np.random.default_rng(8)
    df = random_tree(rng, [(2, 3), (1, 3)])
    c = counts_for(df, rng.integers(0, 30, len(df)))
    rel = catalog.get("hierarchy", "exact").release_counts(c, budget.pure(1.0), NoiseSource(1))
    n_areas = int(sum(rel.hierarchy.sizes))
    monkeypatch.setattr(data_users, "MAX_AREAS", n_areas)
    assert "measurements.csv" in hierarchy_files(rel)
    monkeypatch.setattr(data_users, "MAX_AREAS", n_areas - 1)
    files = hierarchy_files(rel)
    assert not {"measurements.csv", "design.json", "estimates.csv"} & set(files)
    rec = orjson.loads(files["release.json"])
    validate_hierarchy_record(rec)
    assert "data_users" not in rec


@pytest.mark.parametrize("mech", MECHS)
def test_every_tree_mechanism_writes_the_files_and_the_record_says_what_the_map_shows(mech: str) -> None:
    rng = np.random.default_rng(8)
    df = random_tree(rng, [(2, 3), (1, 3)])
    c = counts_for(df, rng.integers(0, 30, len(df)))
    rel = catalog.get("hierarchy", mech).release_counts(c, budget.zcdp(0.5), NoiseSource(1))
    files = hierarchy_files(rel)
    rec = orjson.loads(files["release.json"])
    validate_hierarchy_record(rec)
    assert rec["data_users"]["map_shows"] == "published"
    assert {"measurements.csv", "design.json", "estimates.csv"} <= set(rec["outputs"]["files"]) <= set(files)
    meas = pd.read_csv(pd.io.common.BytesIO(files["measurements.csv"]))
    assert set(meas["family"]) == {"discrete_gaussian"}
    sigma = meas["scale"].to_numpy()
    assert np.all(meas["variance"] <= sigma ** 2) and np.all(meas["variance"] > 0.99 * sigma ** 2)


def test_constrained_gls_on_a_non_tree_design() -> None:
    """Overlapping rows (not a tree) with an invariant: CG with the Lagrangian correction."""
    rng = np.random.default_rng(2)
    n = 12
    A = sp.csr_matrix(np.vstack([np.eye(n), (rng.random((6, n)) < 0.5).astype(float)]))
    var = rng.uniform(0.5, 4.0, A.shape[0])
    y = A @ rng.integers(0, 20, n) + rng.normal(0, np.sqrt(var))
    B = sp.csr_matrix(np.vstack([np.ones(n), np.r_[np.ones(4), np.zeros(n - 4)]]))
    m = Measurements(A, y, var, [f"c{i}" for i in range(n)], B=B, t=np.array([100.0, 30.0]))
    x_ref, C_ref = dense_reference(m)
    np.testing.assert_allclose(gls_estimate(m), x_ref, rtol=1e-8, atol=1e-8)
    assert gls_estimate(m).sum() == pytest.approx(100.0) and gls_estimate(m)[:4].sum() == pytest.approx(30.0)
    q = np.r_[np.ones(6), np.zeros(n - 6)]
    assert union_variance(m, q) == pytest.approx(q @ C_ref @ q, rel=1e-8, abs=1e-10)
    assert union_variance(m, np.ones(n)) == pytest.approx(0.0, abs=1e-8)


def test_unmeasured_cells_and_unknown_codes_are_refused() -> None:
    A = sp.csr_matrix(np.array([[1.0, 0.0]]))
    with pytest.raises(ParameterError, match="in no measurement"):
        Measurements(A, np.array([1.0]), np.ones(1), ["a", "b"])
    m = Measurements(sp.csr_matrix(np.eye(2)), np.ones(2), np.ones(2), ["a", "b"])
    with pytest.raises(ParameterError, match="not finest cells"):
        union_interval(m, ["a", "zz"])
    with pytest.raises(ParameterError, match="coverage"):
        union_interval(m, ["a"], coverage=90)
    assert union_interval(m, ["a", "a"])["estimate"] == union_interval(m, ["a"])["estimate"] == 1.0  # a set


# -- replicates ---------------------------------------------------------------------------------


def test_replicate_variances_within_ten_percent_of_cg(small_release: Path) -> None:
    m = read_release(small_release)
    R = 2000  # relative SD of a variance from R replicates: √(2/R) = 3.2 %; 10 % is 3.2 SDs
    reps = replicates(m, R=R, seed=7)
    assert reps.shape == (m.n, R)
    rng = np.random.default_rng(1)
    for _ in range(3):
        codes = list(rng.choice(m.cells, size=max(1, m.n // 3), replace=False))
        cg_var = union_variance(m, codes)
        assert replicate_variance(m, reps, codes) == pytest.approx(cg_var, rel=0.10)
    # the replicates centre on the estimate: the mean of R deviations of cell i has SD √(C_ii / R)
    sd_mean = np.sqrt([union_variance(m, [c]) / R for c in m.cells])
    assert np.all(np.abs(reps.mean(axis=1) - gls_estimate(m)) < 5 * sd_mean)


def test_replicates_hold_a_public_total(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    df = random_tree(rng, [(2, 3), (2, 3)])
    c = counts_for(df, rng.integers(0, 30, len(df)))
    rel = catalog.get("hierarchy", "hay").release_counts(c, budget.pure(1.0), NoiseSource(3), neighbour="replace")
    m = read_release(write(hierarchy_data_user_files(rel), tmp_path))
    reps = replicates(m, R=20, seed=0)
    np.testing.assert_allclose(reps.sum(axis=0), c.levels()[0][0], atol=1e-6)
    assert gls_estimate(m).sum() == pytest.approx(c.levels()[0][0])


def test_replicates_solve_all_columns_at_once_as_one_solve_per_column(tmp_path: Path) -> None:
    """The tree's replicates are fitted as one matrix of draws: the same numbers, bit for bit, as a
    fit of each replicate's draws on its own (a public total held, as above)."""
    from dpcore.data.synthetic import public_generator
    from dpcore.estimate import gls

    rng = np.random.default_rng(6)
    df = random_tree(rng, [(2, 3), (2, 3)])
    c = counts_for(df, rng.integers(0, 30, len(df)))
    rel = catalog.get("hierarchy", "hay").release_counts(c, budget.pure(1.0), NoiseSource(3), neighbour="replace")
    m = read_release(write(hierarchy_data_user_files(rel), tmp_path))
    assert m.tree is not None and m.invariants == 1
    draws, _ = public_generator(4)
    zero_cells, zero_rows = np.zeros(m.n), np.zeros(m.var.size)
    base = gls._tree_solve(m, zero_cells, zero_rows)
    one_by_one = [gls_estimate(m) + (gls._tree_solve(m, zero_cells, draws.standard_normal(m.var.size)
                                                     * np.sqrt(m.var)) - base) for _ in range(6)]
    assert np.array_equal(replicates(m, R=6, seed=4), np.column_stack(one_by_one))


# -- unbiased and covering: simulated releases ---------------------------------------------------


@pytest.mark.parametrize("mech", ["topdown_l2", "bottom_up"])
def test_estimates_unbiased_and_intervals_cover_90(tmp_path: Path, mech: str) -> None:
    rng = np.random.default_rng(21)
    df = random_tree(rng, [(3, 3), (2, 4), (1, 3)])
    true = rng.integers(0, 40, len(df))
    c = counts_for(df, true)
    mechanism = catalog.get("hierarchy", mech)
    N = 300
    z, covered, methods = [], 0, set()
    for seed in range(N):
        rel = mechanism.release_counts(c, budget.zcdp(0.2), NoiseSource(1000 + seed))
        # the files read_release reads (measurements.csv, design.json), as hierarchy_data_user_files
        # writes them; building its other files (replicates, estimates) was most of this test's time
        files, _ = pack_files(hierarchy_pack(rel))
        if seed == 0:
            full = hierarchy_data_user_files(rel)
            assert {k: full[k] for k in files} == files
        m = read_release(write(files, tmp_path / f"r{seed}"))
        pick = np.flatnonzero(rng.random(m.n) < 0.3)
        if pick.size == 0:
            pick = np.array([0])
        r = union_interval(m, [m.cells[i] for i in pick], coverage=0.9)
        methods.add(r["method"])
        truth = float(true[pick].sum())
        z.append((r["estimate"] - truth) / r["sd"])
        covered += r["low"] <= truth <= r["high"]
    assert methods == {"normal"}
    assert abs(np.mean(z)) < 4 / math.sqrt(N)
    assert abs(covered / N - 0.9) < 4 * math.sqrt(0.9 * 0.1 / N)


def test_discrete_quantile_below_sd_one() -> None:
    """One cell measured with discrete Laplace of SD < 1: the exact integer quantile."""
    from dpcore.privacy.noise import discrete_laplace_interval, discrete_laplace_variance

    t = 0.5
    v = discrete_laplace_variance(t)
    m = Measurements(sp.csr_matrix(np.eye(1)), np.array([3.0]), np.array([v]), ["a"],
                     families=np.array(["discrete_laplace"]))
    r = union_interval(m, ["a"], coverage=0.9)
    h = discrete_laplace_interval(t, 0.9)
    assert r["method"] == "exact discrete_laplace quantile"
    assert (r["low"], r["high"]) == (3.0 - h, 3.0 + h)


@pytest.mark.parametrize("neighbour", ["add_remove", "replace"])
def test_a_nested_design_without_edges_is_solved_as_a_tree(neighbour: str) -> None:
    """The tree is found from the rows alone (laminar family), and agrees with dense algebra."""
    import dataclasses

    from dpcore.areas.data_users import hierarchy_pack
    from dpcore.estimate.data_users import pack_files

    rng = np.random.default_rng(12)
    df = random_tree(rng, [(2, 3), (2, 4), (1, 3)])
    c = counts_for(df, rng.integers(0, 30, len(df)))
    rel = catalog.get("hierarchy", "hay").release_counts(c, budget.pure(1.0), NoiseSource(2), neighbour=neighbour)
    _, m = pack_files(dataclasses.replace(hierarchy_pack(rel), edges=()))
    assert m.tree is not None
    x_ref, C_ref = dense_reference(m)
    np.testing.assert_allclose(gls_estimate(m), x_ref, rtol=1e-8, atol=1e-8)
    q = (rng.random(m.n) < 0.5).astype(float)
    assert union_variance(m, q) == pytest.approx(q @ C_ref @ q, rel=1e-8, abs=1e-8)


class TestTreeLayoutInternalChecks:
    """gls._tree_layout takes node positions its caller (measurements_from) has already looked up
    and checked; a position -1 (a node design.json does not list) would index the last node silently."""

    # the root listed last: parent[-1] is then -1, so an unknown invariant node became the root's
    DESIGN = {"cells": ["a", "b"], "edges": [["all", "a"], ["all", "b"]]}
    NODES = {"a": [0], "b": [1], "all": [0, 1]}

    def test_invariant_at_a_position_outside_the_nodes_is_refused(self) -> None:
        from dpcore.estimate.design_nodes import NodeCells
        from dpcore.estimate.gls import _tree_layout

        nodes = NodeCells.of(self.NODES)
        with pytest.raises(RuntimeError, match="internal error"):
            _tree_layout(self.DESIGN, nodes, np.arange(3), nodes.positions(["elsewhere"]), [5.0])
        # a known root's invariant is still taken
        tree = _tree_layout(self.DESIGN, nodes, np.arange(3), nodes.positions(["all"]), [5.0])
        assert tree is not None and tree.public[2] == 5.0 and np.isnan(tree.public[:2]).all()

    def test_measurements_from_refuses_an_invariant_at_an_unknown_node_first(self) -> None:
        """The reachable path: a design.json whose invariant names no node is refused before the layout."""
        design = {"schema": DESIGN_SCHEMA, "cells": self.DESIGN["cells"], "nodes": self.NODES,
                  "edges": self.DESIGN["edges"], "invariants": [{"node": "elsewhere", "value": 5.0}]}
        meas = pd.DataFrame({"node": ["a", "b", "all"], "value": [1.0, 2.0, 3.0], "variance": 1.0,
                             "family": "discrete_laplace", "phase": "count"})
        with pytest.raises(ParameterError, match="'elsewhere'"):
            measurements_from(design, meas)
        design["invariants"] = [{"node": "all", "value": 5.0}]
        tree = measurements_from(design, meas).tree
        assert tree is not None and tree.public[2] == 5.0

    @pytest.mark.parametrize("ids", [[-1, 1, 2], [0, 1, 3]])
    def test_measurement_outside_the_nodes_is_refused(self, ids: list[int]) -> None:
        from dpcore.estimate.design_nodes import NodeCells
        from dpcore.estimate.gls import _tree_layout

        with pytest.raises(RuntimeError, match="internal error"):
            _tree_layout(self.DESIGN, NodeCells.of(self.NODES), np.array(ids), np.zeros(0, dtype=np.int64), [])


class TestTreeLayoutEdgesAgreeWithNodes:
    """A design.json whose edges do not give every node the cells its ``nodes`` entry lists (a
    file edited or corrupted: the writers make them agree) is not solved by the two passes, which
    would fit the edges' tree and not the rows of A: the general solve of A's rows answers."""

    NODES = {"all": [0, 1, 2], "l": [0, 1], "r": [2], "a": [0], "b": [1], "c": [2]}
    EDGES = [["all", "l"], ["all", "r"], ["l", "a"], ["l", "b"], ["r", "c"]]

    def _both(self, edges: list[list[str]], nodes: dict[str, list[int]] | None = None) -> tuple[object, object]:
        from dpcore.estimate.gls import DESIGN_SCHEMA, measurements_from

        nodes = nodes or self.NODES
        design = {"schema": DESIGN_SCHEMA, "cells": ["a", "b", "c"], "nodes": nodes, "edges": edges}
        meas = pd.DataFrame({"node": list(nodes), "value": [10.0, 6.0, 5.0, 2.0, 3.0, 4.0][:len(nodes)],
                             "variance": 1.0, "family": "gaussian_grid", "phase": "count"})
        m = measurements_from(design, meas)
        return m, Measurements(m.A, m.y, m.var, m.cells)  # the same rows, solved without a tree

    def test_agreeing_edges_keep_the_two_passes(self) -> None:
        m, plain = self._both(self.EDGES)
        assert m.tree is not None
        assert np.allclose(gls_estimate(m), gls_estimate(plain))

    @pytest.mark.parametrize("edges", [
        EDGES + [["r", "b"]],  # b under two parents: the last one listed was kept (estimate 4.08, 2.38, 3.38)
        [["all", "l"], ["all", "r"], ["l", "a"], ["r", "b"], ["l", "c"]],  # b and c swapped between l and r
        [["all", "l"], ["l", "a"], ["l", "b"], ["r", "c"]],  # r a root of its own, under no node
    ])
    def test_disagreeing_edges_solve_the_rows(self, edges: list[list[str]]) -> None:
        m, plain = self._both(edges)
        assert m.tree is None
        assert np.allclose(gls_estimate(m), gls_estimate(plain))

    def test_a_cycle_is_not_a_tree(self) -> None:
        nodes = {"all": [0, 1, 2], "x": [0, 1, 2], "a": [0], "b": [1], "c": [2]}
        edges = [["all", "x"], ["x", "all"], ["x", "a"], ["x", "b"], ["x", "c"]]
        m, plain = self._both(edges, nodes)
        assert m.tree is None
        assert np.allclose(gls_estimate(m), gls_estimate(plain))


def test_a_code_naming_two_areas_is_not_offered_files(tmp_path) -> None:
    """A finest area coded like a coarser area's ``level:label`` key: the design would name two nodes
    alike (the writer used to keep one of them, then stop with an error that named no code, after the
    charge).  The release's data users' files are not offered, and its record lists none and says why
    (which code, and the fix), as for O/D pairs whose codes coincide."""
    df = pd.DataFrame({"county": ["A", "A", "B", "B"], "tract": ["A", "county:B", "t3", "t4"]})
    h = Hierarchy.from_frame(df, ["county", "tract"])
    c = HierarchyCounts.from_frame(df.assign(n=[5, 7, 9, 11]), h, ["county", "tract"], "n")
    rel = catalog.get("hierarchy", "exact").release_counts(c, budget.pure(1.0), NoiseSource(5))
    assert hierarchy_pack(rel) is None
    assert hierarchy_data_user_files(rel) == {}
    files = hierarchy_files(rel)
    assert not {"measurements.csv", "design.json", "estimates.csv"} & set(files)
    rec = orjson.loads(files["release.json"])
    validate_hierarchy_record(rec)
    users = rec["data_users"]
    assert users == areas_data_users_section(rel)
    assert users["files"] == [] and users["measurements_offered"] is False
    assert "'county:B'" in users["why"] and "unique" in users["why"]
    assert "design.json" not in rec["outputs"]["files"]
    # `dpcore interval` on its folder quotes the record's reason, not "use a newer version"
    folder = tmp_path / "rel"
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    with pytest.raises(ParameterError, match=r"offers no data users' files, because the design code 'county:B'"):
        read_release(folder)
    fine = df.assign(tract=["t1", "t2", "t3", "t4"])  # the same areas with codes of their own: offered
    h2 = Hierarchy.from_frame(fine, ["county", "tract"])
    c2 = HierarchyCounts.from_frame(fine.assign(n=[5, 7, 9, 11]), h2, ["county", "tract"], "n")
    rel2 = catalog.get("hierarchy", "exact").release_counts(c2, budget.pure(1.0), NoiseSource(5))
    assert hierarchy_pack(rel2) is not None and "design.json" in hierarchy_data_user_files(rel2)
    assert areas_data_users_section(rel2) is not None


@pytest.mark.parametrize("tracts", [["A", "county:B", "t3", "t4"], ["t1", "t2", "t3", "t4"]],
                         ids=["codes repeat", "codes of their own"])
def test_the_areas_labels_are_built_once_per_release(monkeypatch: pytest.MonkeyPatch, tracts: list[str]) -> None:
    """The record's section (offered, or why not) and the files read one set of labels per release
    (the reason not offered and estimates.csv built them again)."""
    df = pd.DataFrame({"county": ["A", "A", "B", "B"], "tract": tracts})
    h = Hierarchy.from_frame(df, ["county", "tract"])
    c = HierarchyCounts.from_frame(df.assign(n=[5, 7, 9, 11]), h, ["county", "tract"], "n")
    rel = catalog.get("hierarchy", "exact").release_counts(c, budget.pure(1.0), NoiseSource(5))
    asked: list[int] = []
    labels = Hierarchy.labels
    monkeypatch.setattr(Hierarchy, "labels", lambda self, d: asked.append(d) or labels(self, d))
    section, files = areas_data_users_section(rel), hierarchy_data_user_files(rel)
    assert section is not None and ("measurements_offered" in section) == (files == {})
    assert sorted(asked) == list(range(h.depth + 1))  # each depth once
