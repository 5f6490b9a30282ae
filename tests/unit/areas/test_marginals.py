"""Census marginals with the matrix mechanism (dpcore.areas.mechanisms.census_matrix; spec matrix-mechanism.md §2.9.4)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from dpcore.areas import census_tables
from dpcore.areas.mechanisms import census_matrix as marginals
from dpcore.cli import main
from dpcore.data import synthetic
from dpcore.errors import ParameterError
from dpcore.estimate import matrix_design, matrix_release
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource

LEVELS = ["state", "county", "tract"]


@pytest.fixture(scope="module")
def table() -> census_tables.CensusTable:
    df = synthetic.synthetic_census(age_bands=True)
    return census_tables.CensusTable.from_frame(df, LEVELS, "population", ordinals=["age_band"])


def test_synthetic_age_bands_keep_the_totals() -> None:
    plain = synthetic.synthetic_census()
    bands = synthetic.synthetic_census(age_bands=True)
    assert plain.equals(synthetic.synthetic_census(age_bands=False))
    per_tract = bands.groupby(LEVELS, sort=True)["population"].sum().reset_index()
    assert per_tract["population"].tolist() == plain.sort_values(LEVELS)["population"].tolist()
    assert set(bands["age_band"]) == set(synthetic.AGE_BANDS)


def test_parse_marginals() -> None:
    axes = ["county", "age_band"]
    assert marginals.parse_marginals("1", axes) == [(0,), (1,)]
    assert marginals.parse_marginals("2", axes) == [(0, 1)]
    assert marginals.parse_marginals("age_band*county; age_band", axes) == [(0, 1), (1,)]
    assert marginals.parse_marginals([["county"], ["county"]], axes) == [(0,)]
    for bad, msg in (("3", "1 <= k <= 2"), ("county*sex", "Unknown axis 'sex'"), ("", "at least one")):
        with pytest.raises(ParameterError, match=msg):
            marginals.parse_marginals(bad, axes)


def test_plan_is_at_the_lower_bound_and_exact(table: census_tables.CensusTable) -> None:
    ms = [(0, 1), (1,), (0,)]
    p = marginals.plan(table.structure, "county", ms, budget.zcdp(0.2))
    assert p.info["ratio_to_lower_bound"] == pytest.approx(1.0, abs=1e-9)  # closed form is optimal (§2.9.4)
    w = marginals.workload(table.structure, "county", ms)
    s = matrix_design.marginal_strategy(w)
    var = matrix_release.calibrate(s, rho=0.2).variance
    W = w.matrix()
    sd = np.sqrt(var * np.einsum("ij,jk,ik->i", W, np.linalg.pinv(s.A.T @ s.A, rcond=1e-10, hermitian=True), W))
    off = 0
    for m in p.per_marginal:
        v = sd[off:off + m["cells"]]
        off += m["cells"]
        assert m["sd_mean"] == pytest.approx(float(np.sqrt(np.mean(v**2))), rel=1e-8)
        assert m["sd_max"] == pytest.approx(float(v.max()), rel=1e-8)


def test_release_is_unbiased_consistent_and_matches_the_plan(table: census_tables.CensusTable) -> None:
    """Monte Carlo: per cell, Σ_runs err² / sd² ~ χ²_R (answers are linear in discrete Gaussians)."""
    ms = [(0, 1), (1,)]
    cost = budget.zcdp(0.5)
    p = marginals.plan(table.structure, "county", ms, cost)
    # the truth from the raw rows, independently of the code under test
    df = synthetic.synthetic_census(age_bands=True)
    x = df.groupby(["state", "county", "age_band"])["population"].sum().unstack().to_numpy(float)
    truth = {"county × age_band": x.reshape(-1), "age_band": x.sum(axis=0)}
    R = 200
    src = NoiseSource(9)
    sq = {k: np.zeros(v.size) for k, v in truth.items()}
    for _ in range(R):
        rel = marginals.release(table, p, src)
        # consistency: the one-way table is the sum of the two-way table
        two = rel.tables["county × age_band"]["noisy_count"].to_numpy().reshape(-1, 4)
        np.testing.assert_allclose(two.sum(axis=0), rel.tables["age_band"]["noisy_count"], rtol=1e-9, atol=1e-6)
        for k in truth:
            sq[k] += (rel.tables[k]["noisy_count"].to_numpy() - truth[k]) ** 2
    lo, hi = stats.chi2.ppf([1e-5, 1 - 1e-5], R)
    for k, m in zip(truth, p.per_marginal, strict=True):
        ratio = sq[k] / m["sd_max"] ** 2  # every cell of a marginal has the same SD here
        assert np.all((ratio > lo) & (ratio < hi)), (k, ratio.min(), ratio.max())


def test_exports_hold_no_true_count_and_refusals(table: census_tables.CensusTable) -> None:
    p = marginals.plan(table.structure, "state", [(0,), (1,)], budget.zcdp(0.3))
    rel = marginals.release(table, p, NoiseSource(4))
    led = Ledger(budget.zcdp(1.0), dataset="secret-name.csv")
    rec = json.loads(marginals.marginals_json(rel, led))
    assert rec["table"]["marginals"] == [["state"], ["age_band"]]
    assert "secret-name" not in json.dumps(rec)
    csv = marginals.marginals_csv(rel).decode()
    totals = table.counts.sum(axis=0)
    for t in totals:
        assert f",{int(t)}," not in csv
    with pytest.raises(ParameterError, match="below the total"):
        marginals.plan(table.structure, "total", [(0,)], budget.zcdp(0.3))


def test_a_table_too_large_is_refused_with_the_fix(table: census_tables.CensusTable, monkeypatch) -> None:
    monkeypatch.setattr(marginals, "MAX_CELLS", 100)  # tract × age band has 240 cells
    with pytest.raises(ParameterError, match="coarser level"):
        marginals.plan(table.structure, "tract", [(0, 1)], budget.zcdp(0.3))


def test_pure_epsilon_falls_back_to_an_l1_strategy(table: census_tables.CensusTable) -> None:
    p = marginals.plan(table.structure, "county", [(0,), (1,)], budget.pure(1.0))
    assert p.info["noise"].startswith("discrete_laplace")
    assert p.info["ratio_to_lower_bound"] is None and "Pure ε-DP" in p.info["notes"][0]
    rel = marginals.release(table, p, NoiseSource(5))
    assert set(rel.tables) == {"county", "age_band"}


def test_cli_release_census_marginals(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through the CLI's ``main(argv)`` in this process (a ``python -m dpcore`` process per call paid
    about 1.5 s of CPU for its imports; tests/unit/test_bad_inputs.py runs the real process)."""
    synthetic.synthetic_census(age_bands=True).to_csv(tmp_path / "c.csv", index=False)
    base = ["release", "census", "--input", str(tmp_path / "c.csv"),
            "--levels", "state,county,tract", "--count", "population", "--ordinal", "age_band",
            "--ordinal-order", "age_band=0-17|18-34|35-64|65+"]
    rc = main([*base, "--mechanism", "matrix", "--marginals", "county*age_band;age_band",
               "--geo-level", "county", "--rho", "0.1", "--ledger", str(tmp_path / "l.json"),
               "--budget-cap", "0.15", "--out", str(tmp_path / "o")])
    assert rc == 0, capsys.readouterr().err
    rec = json.loads((tmp_path / "o" / "release.json").read_text())
    assert rec["table"]["marginals"] == [["county", "age_band"], ["age_band"]]
    assert rec["table"]["bins_source"] == {"age_band": census_tables.BINS_FLAG}  # where the bins came from
    marginals.validate_marginals_record(rec)
    assert json.loads((tmp_path / "l.json").read_text())["spent"] == pytest.approx(0.1)
    # the second release would pass the cap: refused (an exception would escape main), nothing written
    capsys.readouterr()
    rc2 = main([*base, "--mechanism", "matrix", "--rho", "0.1", "--ledger", str(tmp_path / "l.json"),
                "--out", str(tmp_path / "o2")])
    err2 = capsys.readouterr().err
    assert rc2 != 0 and "Traceback" not in err2 and not (tmp_path / "o2").exists()
    rc3 = main([*base, "--rho", "0.1", "--out", str(tmp_path / "o3")])
    assert rc3 != 0 and "Privelet is pure" in capsys.readouterr().err


def test_marginals_csv_keeps_every_person_of_a_large_count(table: census_tables.CensusTable) -> None:
    """A state of 39,512,223 people is written whole (3 decimals), not as 3.95122e+07: the file's
    values equal the release's to the written precision (``%.6g`` lost up to 50 people there)."""
    import dataclasses
    import io

    import pandas as pd

    p = marginals.plan(table.structure, "state", [(0,)], budget.zcdp(0.3))
    rel = marginals.release(table, p, NoiseSource(4))
    name, df = next(iter(rel.tables.items()))
    big = df.assign(noisy_count=df["noisy_count"] + 39_512_223.123456, ci95_low=df["ci95_low"] + 39_512_223.0,
                    ci95_high=df["ci95_high"] + 39_512_223.0)
    text = marginals.marginals_csv(dataclasses.replace(rel, tables={name: big})).decode()
    assert "e+07" not in text
    back = pd.read_csv(io.StringIO(text))
    np.testing.assert_allclose(back["noisy_count"], big["noisy_count"].round(3), rtol=0, atol=1e-6)
    np.testing.assert_allclose(back["ci95_high"] - back["ci95_low"], (big["ci95_high"] - big["ci95_low"]).round(3),
                               rtol=0, atol=2e-3)
