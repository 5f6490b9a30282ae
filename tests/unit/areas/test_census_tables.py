"""Unit tests of the census mode (dpcore.areas.census_tables) and ``python -m dpcore release census``.

Statistical tests use a seeded NoiseSource and tolerances derived from the sample size:
the mean error of n draws is within 4 standard errors of 0, and the sample variance within
4 standard errors of the analytic variance, where the standard error of a sample variance
is ``var·sqrt((κ − 1)/n)`` with κ ≤ 6 (the kurtosis of a single Laplace term; a sum of
several is lighter-tailed).
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from areas_helpers import plan_census

import dpcore
from dpcore import pipeline
from dpcore.areas import census_tables
from dpcore.areas.mechanisms import census_privelet
from dpcore.cli import main
from dpcore.data.code_tables import read_code_table
from dpcore.data.synthetic import synthetic_census
from dpcore.errors import DPCoreError, InputError, ParameterError
from dpcore.estimate import privelet
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource

#: Privelet's 95 % half-width in SDs (since 2026-11-30; 1.96 before): the exact quantile of one Laplace draw,
#: ln 20/√2, derived here independently of dpcore.
LAPLACE95 = math.log(20.0) / math.sqrt(2.0)

LEVELS = ["state", "county", "tract"]
SHARED = Path(dpcore.__file__).resolve().parents[2] / "shared" / "data" / "census"


@pytest.fixture
def synth() -> pd.DataFrame:
    return synthetic_census()  # 3 states x 4 counties x 5 tracts, county codes repeat across states


@pytest.fixture
def table(synth: pd.DataFrame) -> census_tables.CensusTable:
    return census_tables.CensusTable.from_frame(synth, LEVELS, "population")


def persons(seed: int = 0, n: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "state": rng.choice(["01", "02"], n),
        "county": rng.choice(["001", "003"], n),
        "age_band": rng.choice(["0-17", "18-64", "65+", "5-9"], n),
    })


# ------------------------------------------------------------------ building


def test_paths_identify_areas_when_codes_repeat(table: census_tables.CensusTable, synth: pd.DataFrame) -> None:
    s = table.structure
    assert s.levels == tuple(LEVELS)
    assert len(s.leaf_paths) == 60 == len(set(s.leaf_paths))
    assert ("01", "001", "000100") in s.leaf_paths and ("02", "001", "000100") in s.leaf_paths
    assert [len(s.paths_at(d)) for d in range(4)] == [1, 3, 12, 60]
    assert table.total == int(synth["population"].sum())
    # the counts are those of the rows, path by path
    for row in synth.sample(10, random_state=1).itertuples():
        i = s.leaf_paths.index((row.state, row.county, row.tract))
        assert table.counts[i] == row.population


def test_build_gives_nominal_geography_axis_with_nested_groups(table: census_tables.CensusTable) -> None:
    x, axes, leaf_paths = census_privelet.build(table)
    assert x.shape == (60,) and x.dtype == np.float64
    assert leaf_paths == list(table.structure.leaf_paths)
    geo = axes[0]
    assert geo.name == census_tables.GEO_AXIS and geo.kind == "nominal" and geo.size == 60 and geo.transform
    g_state, g_county = (np.asarray(g) for g in geo.groups)
    assert len(np.unique(g_state)) == 3 and len(np.unique(g_county)) == 12
    # nesting: every county lies in exactly one state; same county code in two states = two counties
    assert all(len(np.unique(g_state[g_county == c])) == 1 for c in np.unique(g_county))
    i1 = leaf_paths.index(("01", "001", "000100"))
    i2 = leaf_paths.index(("02", "001", "000100"))
    assert g_county[i1] != g_county[i2]
    _, axes_plus, _ = census_privelet.build(table, plus_axes=[census_tables.GEO_AXIS])
    assert not axes_plus[0].transform


def test_person_rows_and_ordinal_axis() -> None:
    df = persons()
    t = census_tables.CensusTable.from_frame(df, ["state", "county"], None, ordinals=["age_band"])
    assert t.structure.bins == (("0-17", "5-9", "18-64", "65+"),)  # natural order of the values
    assert t.counts.shape == (4, 4) and t.total == len(df)
    x, axes, _ = census_privelet.build(t, plus_axes=["age_band"])
    assert x.shape == (4, 4)
    assert axes[1].kind == "ordinal" and axes[1].size == 4 and not axes[1].transform and axes[0].transform
    order = ["0-17", "5-9", "18-64", "65+", "unused"]
    t2 = census_tables.CensusTable.from_frame(df, ["state", "county"], ordinals=["age_band"],
                                       ordinal_orders={"age_band": order})
    assert t2.structure.bins == (tuple(order),) and t2.counts[:, 4].sum() == 0


def test_duplicate_rows_are_summed(synth: pd.DataFrame) -> None:
    doubled = pd.concat([synth, synth.head(3)], ignore_index=True)
    t = census_tables.CensusTable.from_frame(doubled, LEVELS, "population")
    assert t.n_duplicate_rows == 3
    assert t.total == int(synth["population"].sum() + synth.head(3)["population"].sum())


def test_public_area_list_adds_empty_areas(synth: pd.DataFrame) -> None:
    areas = pd.concat([synth[LEVELS], pd.DataFrame([{"state": "09", "county": "001", "tract": "000100"}])])
    t = census_tables.CensusTable.from_frame(synth, LEVELS, "population", areas=areas)
    assert t.structure.public_areas and t.n_added_areas == 1
    assert t.counts[t.structure.leaf_paths.index(("09", "001", "000100"))] == 0
    rel = census_privelet.release_census(t, 1.0, NoiseSource(seed=3))
    assert ("09",) in [tuple(r) for r in rel.levels["state"][["state"]].to_numpy().tolist()]
    assert "public list" in census_privelet.census_record(rel)["notes"][-1]


def test_single_level_table() -> None:
    df = pd.DataFrame({"state": ["01", "02", "03"], "pop": [10, 20, 30]})
    t = census_tables.CensusTable.from_frame(df, ["state"], "pop")
    err = census_privelet.expected_error(t.structure, 1.0)
    assert list(err["level"]) == ["total", "state"]
    rel = census_privelet.release_census(t, 1.0, NoiseSource(seed=0))
    assert len(rel.levels["state"]) == 3
    assert rel.levels["total"]["noisy_count"].iloc[0] == pytest.approx(rel.levels["state"]["noisy_count"].sum())


@pytest.mark.parametrize(
    ("change", "kwargs", "words"),
    [
        (lambda d: d.drop(columns="tract"), {}, ["'tract'", "not in the table"]),
        (lambda d: d.iloc[0:0], {}, ["no rows"]),
        (lambda d: d.assign(population=d["population"].where(d.index != 4, -3)), {}, ["negative", "row"]),
        (lambda d: d.assign(population=d["population"].astype(float).where(d.index != 2, 1.5)), {},
         ["whole numbers"]),
        (lambda d: d.assign(population=d["population"].astype(object).where(d.index != 2, "many")), {},
         ["not numbers"]),
        (lambda d: d.assign(county=d["county"].where(d.index != 7, None)), {}, ["missing code", "'county'"]),
        (lambda d: d.assign(county=d["county"].where(d.index != 7, "  ")), {}, ["missing code"]),
    ],
)
def test_validation_errors_name_problem_and_fix(synth, change, kwargs, words) -> None:
    with pytest.raises(InputError) as e:
        census_tables.CensusTable.from_frame(change(synth.copy()), LEVELS, "population", **kwargs)
    msg = str(e.value)
    for w in words:
        assert w in msg, msg


def test_parameter_errors(synth: pd.DataFrame, table: census_tables.CensusTable) -> None:
    with pytest.raises(ParameterError, match="at least one level"):
        census_tables.CensusTable.from_frame(synth, [], "population")
    with pytest.raises(ParameterError, match="used twice"):
        census_tables.CensusTable.from_frame(synth, ["state", "county", "county"], "population")
    with pytest.raises(ParameterError, match="not an axis"):
        census_privelet.build(table, plus_axes=["age"])
    with pytest.raises(ParameterError):
        census_privelet.expected_error(table.structure, 0.0)
    with pytest.raises(ParameterError, match="no area"):
        census_privelet.area_expected_error(table.structure, 1.0, ("99",))
    with pytest.raises(InputError, match="not in the public area list"):
        census_tables.CensusTable.from_frame(synth, LEVELS, "population", areas=synth[LEVELS].iloc[1:])
    with pytest.raises(InputError, match="not in its public list of values"):
        census_tables.CensusTable.from_frame(persons(), ["state"], ordinals=["age_band"],
                                      ordinal_orders={"age_band": ["0-17", "18-64"]})


def test_read_census_file_keeps_leading_zeros_and_drops_bom(tmp_path: Path) -> None:
    text = "\ufeffSTATEFP,COUNTYFP,TRACTCE,POPULATION\n01,001,020100,1775\n01,001,020200,2055\n"
    for name, data in [("t.csv", text.encode()), ("t.csv.gz", gzip.compress(text.encode()))]:
        df = read_code_table(data, name)
        assert list(df.columns) == ["STATEFP", "COUNTYFP", "TRACTCE", "POPULATION"]
        assert df["COUNTYFP"].tolist() == ["001", "001"]
    with pytest.raises(InputError, match="empty"):
        read_code_table(b"", "x.csv")
    with pytest.raises(InputError, match="single column"):
        read_code_table(b"abc\n1\n", "x.csv")
    with pytest.raises(InputError, match="does not exist"):
        read_code_table(tmp_path / "nope.csv")


# ------------------------------------------------------------------ release


def _check_consistent(rel: census_privelet.CensusRelease) -> None:
    s = rel.structure
    value_cols = ["noisy_count", *s.bin_labels()]
    for d in range(s.depth):
        parent = rel.levels[s.level_names[d]]
        child = rel.levels[s.level_names[d + 1]]
        keys = list(s.levels[:d])
        sums = child.groupby(keys, sort=True)[value_cols].sum() if keys else child[value_cols].sum().to_frame().T
        got = parent.set_index(keys)[value_cols] if keys else parent[value_cols]
        np.testing.assert_allclose(got.to_numpy(float), sums.to_numpy(float), rtol=1e-12, atol=1e-9)


def test_release_levels_are_consistent(table: census_tables.CensusTable) -> None:
    rel = census_privelet.release_census(table, 0.5, NoiseSource(seed=11))
    assert list(rel.levels) == ["total", "state", "county", "tract"]
    assert [len(rel.levels[k]) for k in rel.levels] == [1, 3, 12, 60]
    _check_consistent(rel)
    tr = rel.levels["tract"]
    assert tr["ci95_high"].sub(tr["noisy_count"]).to_numpy() == pytest.approx(LAPLACE95 * tr["sd"].to_numpy())
    # noise was added
    assert not np.allclose(tr["noisy_count"].to_numpy(), table.counts)


def test_release_with_ordinal_axis_is_consistent_over_bins() -> None:
    t = census_tables.CensusTable.from_frame(persons(n=2000), ["state", "county"], ordinals=["age_band"])
    for plus in ([], ["age_band"], [census_tables.GEO_AXIS]):
        rel = census_privelet.release_census(t, 1.0, NoiseSource(seed=5), plus_axes=plus)
        _check_consistent(rel)
        county = rel.levels["county"]
        labels = t.structure.bin_labels()
        assert labels[0] == "age_band=0-17"
        np.testing.assert_allclose(county[labels].sum(axis=1), county["noisy_count"], rtol=1e-12)


def test_expected_error_is_data_free_and_matches_release(table: census_tables.CensusTable) -> None:
    err = census_privelet.expected_error(table.structure, 0.5)
    assert list(err.columns) == ["level", "n_areas", "sd", "ci95", "sd_max"]
    assert err["sd_max"].to_numpy() == pytest.approx(err["sd"].to_numpy())  # balanced: all areas alike
    assert list(err["n_areas"]) == [1, 3, 12, 60]
    rel = census_privelet.release_census(table, 0.5, NoiseSource(seed=2))
    assert err["sd"].tolist() == pytest.approx([rel.level_sd[k] for k in err["level"]])
    err2 = census_privelet.expected_error(table.structure, 1.0)
    assert err2["sd"].to_numpy() == pytest.approx(err["sd"].to_numpy() / 2)
    # the balanced synthetic hierarchy: the exact per-area SD equals the per-level SD
    assert census_privelet.area_expected_error(table.structure, 0.5, ("02", "003")) == pytest.approx(err["sd"][2], rel=1e-9)
    assert census_privelet.area_expected_error(table.structure, 0.5, ()) == pytest.approx(err["sd"][0], rel=1e-9)


def test_per_area_sd_in_unbalanced_hierarchy_is_exact() -> None:
    df = pd.DataFrame({
        "state": ["01"] * 5 + ["02"] * 2,
        "county": ["001", "001", "001", "003", "005", "001", "001"],
        "tract": ["1", "2", "3", "1", "1", "1", "2"],
        "pop": [5, 6, 7, 8, 9, 10, 11],
    })
    t = census_tables.CensusTable.from_frame(df, LEVELS, "pop")
    rel = census_privelet.release_census(t, 1.0, NoiseSource(seed=0))
    for name in ["state", "county", "tract"]:
        d = t.structure.level_depth(name)
        lv = rel.levels[name]
        for _, row in lv.iterrows():
            path = tuple(row[LEVELS[:d]])
            assert row["sd"] == pytest.approx(census_privelet.area_expected_error(t.structure, 1.0, path), rel=1e-9)
    err = census_privelet.expected_error(t.structure, 1.0)
    assert (err["sd_max"] >= err["sd"] * (1 - 1e-12)).all()
    assert err["sd_max"].iloc[2] > err["sd"].iloc[2]  # counties differ: 3 siblings vs 1


def test_ledger_refuses_before_noise_and_charges_once(table: census_tables.CensusTable) -> None:
    from dpcore.privacy import budget

    led = Ledger(budget.pure(1.0))
    pipeline.release(plan_census(table, "privelet", budget.pure(0.7)), table, ledger=led, noise=NoiseSource(seed=1))
    assert led.spent == pytest.approx(0.7) and len(led.entries) == 1
    with pytest.raises(DPCoreError, match="Not enough privacy budget"):
        pipeline.release(plan_census(table, "privelet", budget.pure(0.5)), table, ledger=led,
                         noise=NoiseSource(seed=1))
    assert len(led.entries) == 1


def test_unbiased_and_sd_per_level_match_monte_carlo(table: census_tables.CensusTable) -> None:
    n = 3000
    eps = 1.0
    err = census_privelet.expected_error(table.structure, eps)
    src = NoiseSource(seed=20240601)
    picks = {"total": (), "state": ("02",), "county": ("03", "005"), "tract": ("01", "007", "000300")}
    truth = {}
    for name, path in picks.items():
        truth[name] = table.counts[table.structure.leaf_mask(path)].sum()
    rows = {name: table.structure.paths_at(len(path)).index(path) for name, path in picks.items()}
    masks = {name: table.structure.leaf_mask(path) for name, path in picks.items()}
    draws = {k: np.empty(n) for k in picks}
    plan = census_privelet.plan_census(table.structure, eps)  # data-free: planned once, as release_census does per call
    # release_planned draws its noise with exactly this call (privelet.release) and then builds the
    # level tables, which cost more than the noise: the first FULL draws go through release_planned
    # and pin each published area's total to the sum of its noisy leaves; the rest of the n draws
    # (the same NoiseSource sequence, so the same values) read that sum from the noisy leaves
    full = 25
    for i in range(n):
        if i < full:
            rel = census_privelet.release_planned(table, plan, src)
            leaves = rel.noisy.reshape(rel.noisy.shape[0], -1).sum(axis=1)
        else:
            leaves = privelet.release(table.counts.astype(np.float64), list(plan.axes), plan.epsilon, src,
                                      sensitivity=plan.sensitivity).noisy
            leaves = np.asarray(leaves, dtype=np.float64).reshape(len(table.structure.leaf_paths), -1).sum(axis=1)
        for name in picks:
            draws[name][i] = leaves[masks[name]].sum()
            if i < full:
                published = rel.levels[name]["noisy_count"].to_numpy()[rows[name]]
                assert published == pytest.approx(draws[name][i], rel=1e-12, abs=1e-9), (name, i)
    for d, name in enumerate(["total", "state", "county", "tract"]):
        sd = float(err["sd"][d])
        e = draws[name] - truth[name]
        assert abs(e.mean()) < 4 * sd / np.sqrt(n), (name, e.mean(), sd)
        rel_se = np.sqrt(5 / n)
        assert abs(e.var(ddof=1) / sd**2 - 1) < 4 * rel_se, (name, e.var(ddof=1), sd**2)


# ------------------------------------------------------------------ exports


def test_exports_hold_no_truth(table: census_tables.CensusTable) -> None:
    from dpcore.privacy import budget

    led = Ledger(budget.pure(1.0), dataset="secret_file.csv")
    rel = pipeline.release(plan_census(table, "privelet", budget.pure(1.0)), table, ledger=led,
                           noise=NoiseSource(seed=4)).inner
    df = pd.read_csv(pd.io.common.BytesIO(census_privelet.census_csv(rel)), dtype={c: str for c in LEVELS})
    assert list(df.columns[:4]) == ["level", *LEVELS]
    assert {"noisy_count", "sd", "ci95_low", "ci95_high"} <= set(df.columns)
    assert "population" not in df.columns
    assert df.loc[df.level == "tract", "county"].str.len().eq(3).all()  # zero padding kept
    rec = census_privelet.census_record(rel, led)
    text = json.dumps(rec)
    assert "secret_file" not in text
    assert rec["mechanism"]["name"] == "privelet"
    assert rec["params"]["epsilon"] == 1.0 and rec["params"]["lambda"] == rel.lam
    assert [lv["level"] for lv in rec["levels"]] == ["total", *LEVELS]
    assert rec["ledger"]["entries"]


# ------------------------------------------------------------------ CLI


def distinctive(tmp_path: Path) -> tuple[Path, pd.DataFrame]:
    df = synthetic_census(seed=3)
    df["population"] = 731_900 + 7_919 * np.arange(len(df))  # no noisy value will look like these
    df["state_name"] = df["state"].map(lambda s: f"State {s}")
    path = tmp_path / "secret_input_census.csv"
    df.to_csv(path, index=False)
    return path, df


def test_cli_end_to_end(tmp_path: Path, capsys) -> None:
    path, df = distinctive(tmp_path)
    out = tmp_path / "out"
    ledger = tmp_path / "ledger.json"
    argv = ["release", "census", "--input", str(path), "--levels", "state,county,tract", "--count", "population",
            "--name", "state=state_name", "--epsilon", "0.5", "--out", str(out), "--ledger", str(ledger),
            "--budget-cap", "0.8"]
    assert main(argv) == 0
    cap = capsys.readouterr()
    assert "Released 3 state, 12 county, 60 tract" in cap.out
    assert "areas comes from the data" in cap.err
    assert sorted(p.name for p in out.iterdir()) == ["deployment.yaml", "release.csv", "release.json", "review.html"]
    csv_bytes = (out / "release.csv").read_bytes()
    rel = pd.read_csv(out / "release.csv", dtype={c: str for c in LEVELS})
    assert set(rel["level"]) == {"total", *LEVELS}
    assert (rel.loc[rel.level == "state", "state_name"] == ["State 01", "State 02", "State 03"]).all()
    truths = set(df["population"].tolist()) | {int(df["population"].sum())}
    assert not truths & set(np.round(rel["noisy_count"], 6).tolist())
    js = (out / "release.json").read_text()
    for t in truths:
        assert str(t) not in js
    for line in csv_bytes.decode().splitlines()[1:]:  # no field of the CSV is a true count
        assert not {f for f in line.split(",")} & {str(t) for t in truths}
    assert "secret_input" not in js
    rec = json.loads(js)
    assert rec["params"]["epsilon"] == 0.5 and rec["mechanism"]["name"] == "privelet"
    # the ledger carries over: a second release of 0.5 exceeds the cap of 0.8
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "budget" in err[0]


def _public_areas(tmp_path: Path) -> str:
    """The public list of the persons' four areas (two states of two counties each)."""
    path = tmp_path / "areas.csv"
    pd.DataFrame({"state": ["01", "01", "02", "02"], "county": ["001", "003", "001", "003"]}).to_csv(path, index=False)
    return str(path)


def test_cli_person_rows_need_a_public_area_list(tmp_path: Path, capsys) -> None:
    """One row per person cannot list the areas where nobody lives: ``release census`` refuses it as
    its own area list, as ``release hierarchy`` does (issue 26 item 17)."""
    path = tmp_path / "persons.csv"
    persons(n=200).to_csv(path, index=False)
    argv = ["release", "census", "--input", str(path), "--levels", "state,county", "--epsilon", "1", "--no-budget"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 2
    assert "--areas" in capsys.readouterr().err and not (tmp_path / "a").exists()
    assert main([*argv, "--areas", _public_areas(tmp_path), "--out", str(tmp_path / "b")]) == 0


def test_cli_with_plus_and_ordinal(tmp_path: Path, capsys) -> None:
    path = tmp_path / "persons.csv"
    persons(n=500).to_csv(path, index=False)
    out = tmp_path / "o"
    assert main(["release", "census", "--input", str(path), "--levels", "state,county", "--ordinal", "age_band",
                 "--plus", "age_band", "--areas", _public_areas(tmp_path), "--epsilon", "1", "--out", str(out)]) == 0
    rec = json.loads((out / "release.json").read_text())
    assert rec["mechanism"]["plus_axes"] == ["age_band"] and rec["mechanism"]["title"] == "Privelet+"
    assert "age_band=65+" in pd.read_csv(out / "release.csv").columns
    assert "come from the data" in capsys.readouterr().err


def test_cli_ordinal_order_releases_an_empty_bin(tmp_path: Path, capsys) -> None:
    path = tmp_path / "persons.csv"
    persons(n=300).to_csv(path, index=False)  # nobody is 100+
    out = tmp_path / "o"
    assert main(["release", "census", "--input", str(path), "--levels", "state,county", "--ordinal", "age_band",
                 "--ordinal-order", "age_band=0-17|5-9|18-64|65+|100+", "--areas", _public_areas(tmp_path),
                 "--epsilon", "1", "--out", str(out)]) == 0
    assert "come from the data" not in capsys.readouterr().err
    cols = pd.read_csv(out / "release.csv").columns
    assert "age_band=100+" in cols  # the empty bin is released (with noise) like every other
    assert main(["release", "census", "--input", str(path), "--levels", "state,county", "--ordinal", "age_band",
                 "--ordinal-order", "age=0-17", "--areas", _public_areas(tmp_path), "--epsilon", "1",
                 "--out", str(out)]) == 2
    assert "not an --ordinal column" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--levels", "state,county,nope", "--count", "population", "--epsilon", "1"], "'nope'"),
        (["--levels", "state,county,tract", "--count", "population", "--epsilon", "abc"], "not a number"),
        (["--levels", "state,county,tract", "--count", "population", "--epsilon", "-1"], "greater than 0"),
        (["--levels", "state,county,tract", "--count", "population", "--epsilon", "1", "--plus", "x"],
         "not an axis"),
        (["--levels", "state,county,tract", "--count", "state_name", "--epsilon", "1"], "not numbers"),
        (["--count", "population", "--epsilon", "1"], "--levels"),
    ],
)
def test_cli_errors_one_line_exit_2(tmp_path: Path, capsys, extra, words) -> None:
    path, _ = distinctive(tmp_path)
    out = tmp_path / "out"
    assert main(["release", "census", "--input", str(path), "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and words in err[0], err
    assert not out.exists()


def test_cli_missing_input(tmp_path: Path, capsys) -> None:
    assert main(["release", "census", "--input", str(tmp_path / "none.csv"), "--levels", "state",
                 "--epsilon", "1", "--out", str(tmp_path / "o")]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.skipif(not (SHARED / "us_tract_population_2020_cenpop.csv.gz").exists(), reason="shared data absent")
def test_real_tract_file_one_state() -> None:
    df = read_code_table(SHARED / "us_tract_population_2020_cenpop.csv.gz")
    df = df[df["STATEFP"].isin(["10", "11"])]  # Delaware and DC: small
    t = census_tables.CensusTable.from_frame(df, ["STATEFP", "COUNTYFP", "TRACTCE"], "POPULATION")
    assert t.total == int(df["POPULATION"].astype(int).sum())
    rel = census_privelet.release_census(t, 1.0, NoiseSource(seed=9))
    _check_consistent(rel)
    assert rel.levels["COUNTYFP"]["COUNTYFP"].str.len().eq(3).all()


class _NoDraw(NoiseSource):
    """A noise source that fails on any draw: proves nothing was drawn."""

    def discrete_laplace(self, scale, size):  # noqa: ARG002
        raise AssertionError("noise drawn")

    def laplace_on_grid(self, values, scale, granularity_exp):  # noqa: ARG002
        raise AssertionError("noise drawn")


def test_census_charges_before_drawing_and_refuses_without_drawing(table: census_tables.CensusTable) -> None:
    from dpcore.privacy import budget

    led = Ledger(budget.pure(1.0))

    class Watch(NoiseSource):
        def laplace_on_grid(self, values, scale, granularity_exp):
            assert led.spent == pytest.approx(0.7), "noise drawn before the ledger was charged"
            return super().laplace_on_grid(values, scale, granularity_exp)

    pipeline.release(plan_census(table, "privelet", budget.pure(0.7)), table, ledger=led, noise=Watch(seed=1))
    with pytest.raises(DPCoreError, match="Not enough privacy budget"):
        pipeline.release(plan_census(table, "privelet", budget.pure(0.5)), table, ledger=led, noise=_NoDraw(seed=1))
    assert len(led.entries) == 1


def test_names_come_from_the_public_area_list_not_the_data() -> None:
    areas = pd.DataFrame({"state": ["01"] * 3, "county": ["001", "002", "003"],
                          "county_name": ["Ant", "Bee", "Cat"]})
    data = pd.DataFrame({"state": ["01", "01"], "county": ["001", "002"], "pop": [5, 7],
                         "county_name": ["Ant", "Bee"]})
    t = census_tables.CensusTable.from_frame(data, ["state", "county"], "pop", names={"county": "county_name"},
                                      areas=areas)
    rel = census_privelet.release_census(t, 1.0, NoiseSource(seed=3))
    csv = pd.read_csv(__import__("io").BytesIO(census_privelet.census_csv(rel)), dtype=str, keep_default_na=False)
    counties = csv[csv["level"] == "county"]
    assert counties["county_name"].tolist() == ["Ant", "Bee", "Cat"]  # the empty county is named too
    with pytest.raises(InputError, match="must be in the public area list"):
        census_tables.CensusTable.from_frame(data, ["state", "county"], "pop", names={"county": "county_name"},
                                      areas=areas.drop(columns="county_name"))


# ------------------------------------------------------------------ public ordinal values (issue 18, item 2)


def test_parse_ordinal_order_is_the_one_parser_and_refuses_typos() -> None:
    assert census_tables.parse_ordinal_order(" 0-17 |18-64| 65+", "age") == ("0-17", "18-64", "65+")
    for bad, words in (("", "Give the public values"), ("0-17||65+", "empty value"), ("0-17|", "empty value"),
                       ("a|b|a", "repeat 'a'")):
        with pytest.raises(ParameterError, match=words):
            census_tables.parse_ordinal_order(bad, "age")


def test_required_orders_refuse_values_from_the_data_and_the_record_says_where_bins_came_from() -> None:
    df = persons(n=200)  # nobody is 100+
    with pytest.raises(ParameterError, match="public values of 'age_band'"):
        census_tables.CensusTable.from_frame(df, ["state"], ordinals=["age_band"], require_orders=True)
    order = census_tables.parse_ordinal_order("0-17|5-9|18-64|65+|100+", "age_band")
    t = census_tables.CensusTable.from_frame(df, ["state"], ordinals=["age_band"], require_orders=True,
                                             ordinal_orders={"age_band": order},
                                             orders_source=census_tables.BINS_TYPED)
    assert t.structure.bins == (order,) and t.counts[:, -1].sum() == 0  # the empty band is a column
    assert t.structure.bins_origin() == {"age_band": census_tables.BINS_TYPED}
    rec = json.loads(census_privelet.census_json(census_privelet.release_census(t, 1.0, NoiseSource(0))))
    [axis] = [a for a in rec["params"]["axes"] if a["name"] == "age_band"]
    assert axis["bins"] == list(order) and axis["bins_source"] == census_tables.BINS_TYPED
    assert f"The values of 'age_band' come from {census_tables.BINS_TYPED}." in rec["notes"]
    # a data value outside the public list is refused, and the message says which and where
    with pytest.raises(InputError, match=r"\['65\+'\].*not in its public list of values"):
        census_tables.CensusTable.from_frame(df, ["state"], ordinals=["age_band"], require_orders=True,
                                             ordinal_orders={"age_band": ["0-17", "5-9", "18-64"]})
    # without a list (the CLI's path, which warns) the record says the values came from the data
    t2 = census_tables.CensusTable.from_frame(df, ["state"], ordinals=["age_band"])
    assert t2.structure.bins_origin() == {"age_band": census_tables.BINS_FROM_DATA}


def test_cli_ordinal_order_is_recorded_as_the_flag(tmp_path: Path) -> None:
    path = tmp_path / "persons.csv"
    persons(n=300).to_csv(path, index=False)
    out = tmp_path / "o"
    assert main(["release", "census", "--input", str(path), "--levels", "state,county", "--ordinal", "age_band",
                 "--ordinal-order", "age_band=0-17|5-9|18-64|65+", "--areas", _public_areas(tmp_path),
                 "--epsilon", "1", "--no-budget",
                 "--out", str(out)]) == 0
    rec = json.loads((out / "release.json").read_text())
    [axis] = [a for a in rec["params"]["axes"] if a["name"] == "age_band"]
    assert axis["bins_source"] == census_tables.BINS_FLAG
    assert main(["release", "census", "--input", str(path), "--levels", "state,county", "--ordinal", "age_band",
                 "--ordinal-order", "age_band=0-17||65+", "--epsilon", "1", "--no-budget", "--out", str(out)]) == 2


def test_budget_keys_report_each_key_and_stay_the_same() -> None:
    """``progress`` of :func:`census_tables.fingerprints` is told each key as it is made and 1.0 at the
    end, and the keys are those made without it (issue 28 item 1: the app's Data step at 8 M blocks)."""
    df = pd.DataFrame({"state": ["01", "01", "02", "02"], "county": ["001", "003", "001", "005"],
                       "tract": ["a", "b", "c", "d"], "pop": [5, 7, 0, 2]})
    said: list[tuple[float, str]] = []
    keys = census_tables.fingerprints(df, ["state", "county", "tract"], "pop", progress=lambda f, m: said.append((f, m)))
    assert keys == census_tables.fingerprints(df, ["state", "county", "tract"], "pop")
    assert [f for f, _ in said] == sorted(f for f, _ in said) and said[-1] == (1.0, "Keyed the table's budget")
    lines = [m for _, m in said]
    # the main key (state), the finer levels' earlier keys (county, tract), then the codes:v2 keys
    assert [m.split("per '")[1].split("'")[0] for m in lines if "per '" in m] == ["state", "county", "tract"]
    assert any("2 finer levels" in m for m in lines) and len(said) == 5


def test_budget_keys_refuse_bad_counts_as_the_counts_do() -> None:
    """The app keys a table before it counts it, so the keys refuse a bad count with the counts' own
    message (:func:`dpcore.areas.counts.whole_counts`: which rows, what is wrong)."""
    df = pd.DataFrame({"state": ["01", "02", "02"], "pop": [5, -2, 3]})
    with pytest.raises(InputError, match=r"'pop' has 1 negative value \(data row 2\)"):
        census_tables.fingerprints(df, ["state"], "pop")
    with pytest.raises(InputError, match=r"'pop' has 1 value that are missing or not numbers \(data row 3\)"):
        census_tables.fingerprints(df.assign(pop=["5", "2", "x"]), ["state"], "pop")
