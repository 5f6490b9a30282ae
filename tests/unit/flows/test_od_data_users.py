"""The data users' files of O/D releases (dpcore.flows.data_users): VanillaGauss writes every finest
pair's noisy count, the TopDown variants write the tree of pairs they measured (conditional on that
tree, and the files say so), the stability histogram exposes none (its measured pairs are the true support)."""

from __future__ import annotations

from io import BytesIO
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pytest
from od_testing import make_states, random_trips

from dpcore import catalog
from dpcore.data.hierarchy import Hierarchy
from dpcore.estimate.gls import read_release, union_interval
from dpcore.flows.counts import ODCounts
from dpcore.flows.export import od_file_names, od_files, validate_od_record
from dpcore.privacy import budget
from dpcore.privacy.noise import NoiseSource


@pytest.fixture(scope="module")
def counts() -> ODCounts:
    h: Hierarchy = make_states()
    df = random_trips(np.random.default_rng(2), h, h, 200)
    return ODCounts.from_frame(df, h, origin="o", destination="d")


def test_vanilla_gauss_writes_every_finest_pair_and_estimates(counts: ODCounts, tmp_path: Path) -> None:
    rel = catalog.get("od", "vanilla_gauss").release_counts(counts, budget.zcdp(0.5), NoiseSource(3))
    files = od_files(rel)
    rec = orjson.loads(files["release.json"])
    validate_od_record(rec)
    assert rec["data_users"]["map_shows"] == "published"
    assert {"measurements.csv", "design.json", "estimates.csv"} <= set(rec["outputs"]["files"]) <= set(files)
    n = counts.origin_h.n_leaves * counts.destination_h.n_leaves
    meas = pd.read_csv(BytesIO(files["measurements.csv"]))
    assert len(meas) == n and set(meas["family"]) == {"discrete_gaussian"}
    # the measurements are the noisy pairs before the zeros are dropped: their sums are the published values
    est = pd.read_csv(BytesIO(files["estimates.csv"]), dtype={"code": str})
    np.testing.assert_allclose(est["estimate"], est["published"], atol=1e-6)
    assert est["published"].tolist() == np.concatenate(rel.values).tolist()
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    m = read_release(tmp_path)
    cells = orjson.loads(files["design.json"])["cells"]
    assert len(cells) == n and all(">" in c for c in cells)
    r = union_interval(m, cells[:5], 0.9)
    assert r["variance"] == pytest.approx(5 * meas["variance"].iloc[0])
    assert r["estimate"] == pytest.approx(meas["value"].iloc[:5].sum())


@pytest.mark.parametrize("mech", ["inftda", "tda_l2"])
def test_topdown_variants_keep_their_measurements_on_the_release(counts: ODCounts, mech: str) -> None:
    rel = catalog.get("od", mech).release_counts(counts, budget.zcdp(0.5), NoiseSource(3))
    assert len(rel.measurements) == rel.depth + 1
    for t in range(1, rel.depth + 1):
        meas = rel.measurements[t]
        if meas is None:
            continue
        o, d, x = meas
        assert o.shape == d.shape == x.shape
        # a level's released pairs are among its measured pairs (children of released parents)
        n_d = counts.destination_h.sizes[rel.plan.levels[t].destination_depth]
        assert set((rel.origins[t] * n_d + rel.destinations[t]).tolist()) <= set((o * n_d + d).tolist())



@pytest.mark.parametrize(("mech", "neighbour"), [("inftda", "add_remove"), ("tda_l2", "add_remove"),
                                                  ("inftda", "replace")])
def test_topdown_variants_write_their_measured_tree(counts: ODCounts, mech: str, neighbour: str,
                                                    tmp_path: Path) -> None:
    """Every noisy count of the walk is a row of measurements.csv; the design is the measured tree
    (cells: measured pairs without a measured child), conditional on it and saying so; the two-pass
    least-squares estimates equal a dense solve; a public total is an invariant held exactly."""
    rel = catalog.get("od", mech).release_counts(counts, budget.zcdp(0.5), NoiseSource(3), neighbour=neighbour)
    files = od_files(rel)
    rec = orjson.loads(files["release.json"])
    validate_od_record(rec)
    assert {"measurements.csv", "design.json", "estimates.csv"} <= set(rec["data_users"]["files"])
    assert "conditional" in rec["data_users"]["note"]
    design = orjson.loads(files["design.json"])
    assert design["conditional_on_partition"] is True and design["kind"] == "od"
    meas = pd.read_csv(BytesIO(files["measurements.csv"]), dtype={"node": str})
    n_meas = sum(m[2].size for m in rel.measurements if m is not None)
    assert len(meas) == n_meas and (meas["phase"] == "count").all()
    assert bool(design["invariants"]) == (rel.public_total is not None)
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    m = read_release(tmp_path)
    assert m.tree is not None  # the exact two-pass solve
    est = pd.read_csv(BytesIO(files["estimates.csv"]), dtype={"code": str})
    assert est["published"].tolist() == np.concatenate(rel.values).tolist()
    root = union_interval(m, np.ones(m.n), 0.9)
    assert est["estimate"].iloc[0] == pytest.approx(root["estimate"], abs=1e-6)
    if rel.public_total is not None:
        assert root["estimate"] == pytest.approx(rel.public_total) and root["variance"] == pytest.approx(0, abs=1e-9)
    # the two passes equal the dense least squares (invariants by a heavily weighted row)
    A, y, w = m.A.toarray(), np.asarray(m.y, float), 1 / m.var
    if m.B is not None:
        A, y, w = np.vstack([A, m.B.toarray()]), np.r_[y, m.t], np.r_[w, np.full(m.B.shape[0], 1e12)]
    dense = np.linalg.lstsq(A * np.sqrt(w)[:, None], y * np.sqrt(w), rcond=None)[0]
    np.testing.assert_allclose(union_interval(m, np.eye(m.n)[0], 0.9)["estimate"], dense[0], atol=1e-4)
    assert root["estimate"] == pytest.approx(dense.sum(), abs=1e-4)


def test_stability_histogram_exposes_no_measurements(counts: ODCounts) -> None:
    rel = catalog.get("od", "sh").release_counts(counts, None, NoiseSource(3), approx=(1.0, 1e-6))
    assert rel.measurements == ()
    assert "measurements.csv" not in od_files(rel)


def test_pairs_whose_codes_coincide_get_no_design_and_the_release_is_written() -> None:
    """Area labels holding ">" can make two pairs one code ("a>b" > "c" and "a" > "b>c"): the data users'
    files are not offered, the release's own files are written (the design's writer raised a TypeError
    after the charge before, review finding)."""
    areas = pd.DataFrame({"state": ["s"] * 4, "zone": ["a>b", "a", "b>c", "c"]})
    h = Hierarchy.from_frame(areas, ["state", "zone"], codes="global", source="area list")
    trips = ODCounts.from_frame(pd.DataFrame({"o": ["a>b", "a", "c"], "d": ["c", "b>c", "a"]}), h,
                                origin="o", destination="d")
    rel = catalog.get("od", "vanilla_gauss").release_counts(trips, budget.zcdp(0.5), NoiseSource(3))
    files = od_files(rel)
    validate_od_record(orjson.loads(files["release.json"]))
    assert "release.csv" in files and "design.json" not in files and "measurements.csv" not in files
    users = orjson.loads(files["release.json"])["data_users"]  # the record names no files, and says why
    assert users["files"] == [] and users["measurements_offered"] is False
    assert "'a>b>c'" in users["why"] and "unique" in users["why"]
    assert od_file_names(rel=rel) == ["release.csv", "release.json"]


def test_pair_codes_repeating_across_levels_say_why_in_the_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """A zone coded like its state: TopDown measures pair "A>B" at the state level and again at the zone
    level, so the measured tree has no design; the record says which code and how to fix it (from the
    tree's codes made once: they were made again for the reason)."""
    from dpcore.flows import data_users, data_users_tree

    made: list[int] = []
    tree_codes = data_users_tree.tree_codes

    def counted(rel: object, tree: dict) -> np.ndarray:
        made.append(1)
        return tree_codes(rel, tree)

    for module in (data_users, data_users_tree):
        monkeypatch.setattr(module, "tree_codes", counted)
    areas = pd.DataFrame({"state": ["A", "A", "B", "B"], "zone": ["A", "z2", "B", "z4"]})
    h = Hierarchy.from_frame(areas, ["state", "zone"], codes="global", source="area list")
    trips = ODCounts.from_frame(pd.DataFrame({"o": ["A"] * 60 + ["z2"] * 5, "d": ["B"] * 60 + ["z4"] * 5}), h,
                                origin="o", destination="d")
    rel = catalog.get("od", "inftda").release_counts(trips, budget.zcdp(2.0), NoiseSource(3))
    files = od_files(rel)
    rec = orjson.loads(files["release.json"])
    validate_od_record(rec)
    assert not {"measurements.csv", "design.json", "estimates.csv"} & set(files)
    users = rec["data_users"]
    assert users["files"] == [] and users["measurements_offered"] is False
    assert "'A>B'" in users["why"] and "unique" in users["why"]
    assert "design.json" not in rec["outputs"]["files"]
    assert len(made) == 1
