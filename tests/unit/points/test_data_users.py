"""The data users' files of a points release (issue 25): measurements.csv, design.json,
estimates.csv, in the shared format (notes/data-users-format.md)."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pandas as pd
import pytest
from points_helpers import release_with

from dpcore import catalog
from dpcore.core.record import validate_record
from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.points.data_users import CONDITIONAL, NOT_OFFERED, data_user_files
from dpcore.points.export import release_files
from dpcore.privacy.budget import zcdp
from dpcore.privacy.noise import NoiseSource

BOUNDS = Bounds(-74.06, 40.56, -73.70, 40.92)

#: every points mechanism with small, valid parameters
PARAMS: dict[str, dict] = {
    "identity": {}, "uniform": {}, "ug": {"public_n": 2000}, "ag": {"public_n": 2000}, "ag_pool": {"public_n": 2000},
    "quadtree": {"height": 3}, "kdtree": {"height": 3}, "privtree": {}, "htf": {}, "dawa": {}, "dawa_free": {},
    "privelet": {}, "matrix": {}, "auto": {"public_n": 2000},
}


def agg(seed: int = 0, shape: tuple[int, int] = (16, 16)) -> Aggregate:
    counts = np.random.default_rng(seed).poisson(8, size=shape).astype(np.int64)
    return Aggregate(grid=Grid(BOUNDS, *shape), counts=counts, n_outside=0, n_capped=0, sensitivity=1,
                     user_cap=None)


def files_of(name: str, seed: int = 1, budget=1.0) -> tuple[object, dict[str, bytes]]:
    rel = release_with(catalog.get("points", name), agg(), budget, PARAMS[name], NoiseSource(seed))
    return rel, release_files(rel)


def frames(files: dict[str, bytes]) -> tuple[pd.DataFrame, dict, pd.DataFrame]:
    m = pd.read_csv(io.BytesIO(files["measurements.csv"]), dtype={"node": str})
    e = pd.read_csv(io.BytesIO(files["estimates.csv"]), dtype={"code": str})
    return m, json.loads(files["design.json"]), e


def design_matrix(m: pd.DataFrame, d: dict) -> np.ndarray:
    a = np.zeros((len(m), len(d["cells"])))
    for i, node in enumerate(m["node"]):
        a[i, d["nodes"][node]] = 1.0
    return a


def gls(a: np.ndarray, y: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense GLS (test only): x = (AᵀS⁻¹A)⁻¹AᵀS⁻¹y and its covariance."""
    w = a.T / var
    cov = np.linalg.inv(w @ a)
    return cov @ (w @ y), cov


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_every_mechanism_writes_the_three_files_in_the_format(name):
    rel, files = files_of(name)
    m, d, e = frames(files)
    assert list(m.columns) == ["measurement_id", "level", "node", "value", "family", "scale", "variance",
                               "share", "phase"]
    assert {"level", "code", "estimate", "variance", "sd", "published"} <= set(e.columns)
    assert d["schema"] == "dpcore-design/1" and d["kind"] == "points" and d["independent"] is True
    assert len(d["cell_bounds"]) == len(d["cells"]) == int(rel.leaf.sum())
    assert d["cells"] == [str(i) for i in np.flatnonzero(rel.leaf)]  # release.csv's leaf ids, in order
    assert len(e) == rel.n_rects and np.allclose(e["published"], rel.noisy)
    base = rel.public.get("auto", {}).get("chosen", name)
    if base in NOT_OFFERED:
        assert len(m) == 0 and d["measurements_offered"] is False
    else:
        assert len(m) >= 1 and (m["phase"] == "count").all() and set(m["node"]) == set(d["nodes"])
    assert d["conditional_on_partition"] == (base in CONDITIONAL or "noisy_point_count" in rel.public
                                             or "features" in rel.public.get("auto", {}))
    rec = json.loads(files["release.json"])
    validate_record(rec)
    offered = base not in NOT_OFFERED
    assert rec["data_users"]["files"] == ["measurements.csv", "design.json", "estimates.csv",
                                          *(["replicates.csv"] if offered else [])]
    assert ("replicates.csv" in files) == offered
    assert rec["data_users"]["map_shows"] == "published"


@pytest.mark.parametrize("name", ["quadtree", "kdtree", "ag", "ag_pool", "privtree", "htf", "ug", "identity"])
def test_estimates_are_the_gls_of_the_measurements(name):
    """A dense GLS from measurements.csv + design.json reproduces estimates.csv (value and variance)."""
    rel, files = files_of(name, seed=3)
    m, d, e = frames(files)
    a = design_matrix(m, d)
    x, cov = gls(a, m["value"].to_numpy(float), m["variance"].to_numpy())
    # every published rectangle = the sum of the cells it covers: estimate and variance of that sum
    from dpcore.points.data_users import leaves_within
    node, leaf = leaves_within(rel)
    q = np.zeros((rel.n_rects, len(d["cells"])))
    q[node, leaf] = 1.0
    assert len(set(d["cells"])) == len(d["cells"])  # one column per cell: no cell named twice
    np.testing.assert_allclose(e["estimate"], q @ x, rtol=1e-7, atol=1e-6)
    np.testing.assert_allclose(e["variance"], np.einsum("ij,jk,ik->i", q, cov, q), rtol=1e-7, atol=1e-9)


def test_variance_is_exact_for_both_families():
    _, files = files_of("identity", budget=1.0)
    m, _, _ = frames(files)
    t = float(m["scale"][0])
    q = math.exp(-1 / t)
    assert m["family"][0] == "discrete_laplace" and m["variance"][0] == pytest.approx(2 * q / (1 - q) ** 2)
    _, files = files_of("identity", budget=zcdp(2.0))
    m, _, _ = frames(files)
    sigma = float(m["scale"][0])
    assert m["family"][0] == "discrete_gaussian" and sigma < 1  # the exact sum, not sigma²
    k = np.arange(-60, 61)
    p = np.exp(-k**2 / (2 * sigma**2))
    assert m["variance"][0] == pytest.approx((k**2 * p).sum() / p.sum(), rel=1e-12)
    assert m["variance"][0] < sigma**2


def test_tree_measurements_are_the_raw_counts_not_the_consistent_ones():
    rel, files = files_of("quadtree", seed=5)
    m, _, _ = frames(files)
    raw = m["value"].to_numpy()
    assert np.all(raw == np.round(raw))  # integers, before post-processing
    published = rel.noisy[m["node"].astype(int).to_numpy()]
    assert not np.allclose(raw, published)  # least squares moved them


def test_data_user_files_hold_no_true_count():
    a = agg(seed=9)
    a.counts[:] = 0
    a.counts[3, 4] = 987_654  # a distinctive true value
    # a small budget: a noise draw of exactly 0 (which would publish the true count) is improbable
    rel = release_with(catalog.get("points", "quadtree"), a, 0.01, {"height": 3}, NoiseSource(2))
    for name, data in data_user_files(rel).items():
        assert b"987654" not in data, name


def test_files_are_still_written_when_no_design_can_be_made(monkeypatch):
    """The files are made after the charge: they say why no measurement is offered instead of failing."""
    from dpcore.points import data_users

    rel, _ = files_of("quadtree")

    def refuse(release):
        raise ValueError("The release's rectangles are not unions of its leaves; no design can be written.")

    monkeypatch.setattr(data_users, "leaves_within", refuse)
    m, d, e = frames(data_user_files(rel))
    assert len(m) == 0 and d["measurements_offered"] is False and "not unions" in d["why"]
    assert np.allclose(e["estimate"], rel.noisy) and np.allclose(e["variance"], rel.sd ** 2)


def _record_lists_only_written_files(files: dict[str, bytes]) -> dict:
    rec = json.loads(files["release.json"])
    users = rec["data_users"]
    assert set(users["files"]) <= set(files) and set(rec["outputs"]["files"]) <= set(files)
    assert (users.get("replicates") or {}).get("file") in (set(files) | {None})
    return users


@pytest.mark.parametrize("case", ["no design", "no measurement"])
def test_the_record_lists_only_the_data_users_files_written(monkeypatch, case):
    """No replicates.csv is written without a design or without a measurement: the record's data_users
    section (and outputs.files) then does not list it, and says why; with both, it lists it."""
    from dpcore.points import data_users

    rel, files = files_of("quadtree")
    users = _record_lists_only_written_files(files)
    assert "replicates.csv" in files and users["replicates"]["file"] == "replicates.csv"
    if case == "no design":
        def refuse(release):
            raise ValueError("The release's rectangles are not unions of its leaves; no design can be written.")

        monkeypatch.setattr(data_users, "leaves_within", refuse)
    else:
        monkeypatch.setattr(data_users, "_measured", lambda release: np.full(release.n_rects, np.nan))
    files = release_files(rel)
    assert "replicates.csv" not in files
    users = _record_lists_only_written_files(files)
    assert users["replicates"]["file"] is None and users["replicates"]["why"]
    if case == "no design":
        assert users["measurements_offered"] is False and "not unions" in users["why"]
    validate_record(json.loads(files["release.json"]))  # the schema knows the reason it states


@pytest.mark.parametrize("name", ["quadtree", "ug", "privelet"])
def test_points_files_read_back_through_the_shared_reader(name, tmp_path):
    """measurements.csv and design.json of points are the format every kind shares: the one reader
    (gls.read_release) takes them, and its GLS estimate of the cells is estimates.csv's."""
    from dpcore.core.record import write_files
    from dpcore.errors import ParameterError
    from dpcore.estimate.gls import gls_estimate, read_release

    rel, files = files_of(name, seed=4)
    write_files(files, tmp_path)
    if name == "privelet":  # nothing offered: the reader says the cells cannot be estimated
        with pytest.raises(ParameterError, match="in no measurement"):
            read_release(tmp_path)
        return
    m = read_release(tmp_path)
    _, d, e = frames(files)
    assert m.cells == d["cells"]
    leaf_rows = e.set_index("code").loc[m.cells]
    np.testing.assert_allclose(gls_estimate(m), leaf_rows["estimate"], rtol=1e-7, atol=1e-6)


@pytest.mark.parametrize("name", ["quadtree", "ug", "privtree", "kdtree"])
def test_leaves_within_pairwise_and_grid_agree(name, monkeypatch):
    """The pair-by-pair test of small levels and the labelled grid give the same pairs."""
    from dpcore.points import data_users

    rel, _ = files_of(name, seed=6)
    monkeypatch.setattr(data_users, "_PAIRS", 1 << 30)
    pairwise = data_users.leaves_within(rel)
    monkeypatch.setattr(data_users, "_PAIRS", 0)
    grid = data_users.leaves_within(rel)
    for a, b in zip(pairwise, grid, strict=True):
        np.testing.assert_array_equal(a, b)
    assert pairwise[0].size >= int(rel.leaf.sum())


def _within_on_the_cells(release) -> tuple[np.ndarray, np.ndarray]:
    """leaves_within as it was: one labelled grid of the grid's cells per level (the reference)."""
    g, leaf_idx = release.grid, release.leaf_index()
    corner = release.rects[leaf_idx][:, [0, 2]]
    nodes, leaves = [], []
    for lv in np.unique(release.level).tolist():
        idx = np.flatnonzero(release.level == lv)
        r, lab = release.rects[idx], idx + 1
        diff = np.zeros((g.rows + 1, g.cols + 1), dtype=np.int64)
        for rows, cols, sign in ((r[:, 0], r[:, 2], 1), (r[:, 1], r[:, 2], -1), (r[:, 0], r[:, 3], -1),
                                 (r[:, 1], r[:, 3], 1)):
            np.add.at(diff, (rows, cols), sign * lab)
        owner = np.cumsum(np.cumsum(diff, axis=0), axis=1)[corner[:, 0], corner[:, 1]] - 1
        hit = np.flatnonzero(owner >= 0)
        nodes.append(owner[hit])
        leaves.append(hit)
    node, leaf = np.concatenate(nodes), np.concatenate(leaves)
    order = np.lexsort((leaf, node))
    return node[order], leaf[order]


@pytest.mark.parametrize("name", ["quadtree", "kdtree", "privtree", "ug", "ag", "htf"])
def test_leaves_within_on_the_levels_edges_finds_what_the_cells_grid_found(name, monkeypatch):
    """Issue 28 item 5: each level is labelled on the bands between its own edges, not on every cell
    (the demo's files spent 0.6 s summing 15 grids of a million cells); the pairs are the same."""
    from dpcore.points import data_users

    monkeypatch.setattr(data_users, "_PAIRS", 0)  # every level through the labelled grid
    for seed in (1, 2):
        rel = release_with(catalog.get("points", name), agg(seed, (32, 24)), 1.0, PARAMS[name], NoiseSource(seed))
        got, want = data_users.leaves_within(rel), _within_on_the_cells(rel)
        assert [a.tolist() for a in got] == [a.tolist() for a in want]


def test_the_cells_shapes_come_from_the_design_as_returned_and_as_read_back() -> None:
    """``design(release)`` holds ``cell_bounds`` as an array (the writer's own), ``design.json`` as a list:
    both give every finest cell's rectangle (the array's truth value raised before, review finding)."""
    import shapely

    from dpcore.estimate.release_interval import cell_shapes
    from dpcore.points.data_users import design

    rel, files = files_of("quadtree")
    made = design(rel)
    read = json.loads(files["design.json"])
    a, b = cell_shapes(made, {}), cell_shapes(read, {})
    assert len(a) == len(read["cells"]) > 1
    assert all(shapely.equals(x, y) for x, y in zip(a, b, strict=True))
