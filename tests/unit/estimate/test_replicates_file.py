"""replicates.csv (issue 25 item 5): R = 80 data-free replicate columns per finest cell, for spreadsheets.

Tolerances: for one union the replicate variance from R = 80 columns has relative SD √(2/80) = 16 %;
averaged over the 200-odd finest cells of the release below (correlated only through the tree's few
upper nodes) the mean ratio to the exact variance has an SD of a few per cent, so 10 % is a wide
margin.  The spreadsheet formula on the file's columns reproduces the library's replicate variance
to the file's rounding (4 decimals)."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from dpcore import catalog
from dpcore.areas.export import hierarchy_files, validate_hierarchy_record
from dpcore.estimate.data_users import MAX_REPLICATE_VALUES, REPLICATES, replicates_info
from dpcore.estimate.gls import replicate_variance, replicates, union_variance
from dpcore.estimate.release_interval import ReleaseIntervals
from dpcore.privacy import budget
from dpcore.privacy.noise import NoiseSource
from tests.unit.estimate.test_gls import counts_for, random_tree


@pytest.fixture(scope="module")
def files() -> dict[str, bytes]:
    rng = np.random.default_rng(8)
    df = random_tree(rng, [(3, 5), (3, 5), (4, 6)])
    c = counts_for(df, rng.integers(0, 40, len(df)))
    rel = catalog.get("hierarchy", "topdown_l2").release_counts(c, budget.zcdp(0.5), NoiseSource(4))
    return hierarchy_files(rel)


def test_the_file_has_r_columns_per_finest_cell_and_the_record_says_so(files: dict[str, bytes]) -> None:
    reps = pd.read_csv(io.BytesIO(files["replicates.csv"]), dtype={"code": str})
    design = json.loads(files["design.json"])
    assert list(reps.columns) == ["code", "estimate", *[f"rep_{r}" for r in range(1, REPLICATES + 1)]]
    assert reps["code"].tolist() == design["cells"]
    est = pd.read_csv(io.BytesIO(files["estimates.csv"]), dtype={"code": str}).set_index("code")
    np.testing.assert_allclose(reps["estimate"], est.loc[reps["code"], "estimate"], atol=1e-3)
    rec = json.loads(files["release.json"])
    validate_hierarchy_record(rec)
    assert rec["data_users"]["replicates"]["file"] == "replicates.csv" and "replicates.csv" in rec["data_users"]["files"]
    assert "replicates.csv" in rec["outputs"]["files"]


def test_replicate_and_cg_variances_agree_within_ten_percent(files: dict[str, bytes]) -> None:
    ri = ReleaseIntervals(files)
    reps = pd.read_csv(io.BytesIO(files["replicates.csv"]), dtype={"code": str})
    cols = reps[[f"rep_{r}" for r in range(1, REPLICATES + 1)]].to_numpy()
    est = reps["estimate"].to_numpy()
    rep_var = np.mean((cols - est[:, None]) ** 2, axis=1)  # the spreadsheet formula, cell by cell
    exact = np.array([union_variance(ri.m, [c]) for c in ri.m.cells])
    assert np.mean(rep_var / exact) == pytest.approx(1.0, abs=0.10)
    # a union: sum the rows column by column, then the same formula; equal to the library's replicates
    rng = np.random.default_rng(0)
    union = rng.choice(ri.m.n, 25, replace=False)
    mine = np.mean((cols[union].sum(axis=0) - est[union].sum()) ** 2)
    lib = replicate_variance(ri.m, replicates(ri.m, REPLICATES, 0), [ri.m.cells[i] for i in union])
    assert mine == pytest.approx(lib, rel=1e-3)


def test_a_release_too_large_for_a_spreadsheet_says_how_to_draw_them() -> None:
    info = replicates_info(MAX_REPLICATE_VALUES // REPLICATES + 1)
    assert info["file"] is None and "dpcore.estimate.gls.replicates" in info["why"]
