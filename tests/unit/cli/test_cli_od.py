"""Unit tests of ``python -m dpcore release od`` (dpcore.cli.flows) on small made-up files.

The CLI draws secure noise, so the tests check structure and invariants, not values.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import geopandas
import numpy as np
import pandas as pd
import pytest
from shapely.geometry import box

import dpcore
from dpcore.cli import main
from dpcore.cli.flows import classic_rho
from dpcore.flows.export import validate_od_record
from dpcore.privacy import budget

REPO = Path(dpcore.__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
RI_OD = DATA / "od" / "ri_lodes7_od_main_JT00_2019.csv.gz"
RI_XWALK = DATA / "od" / "ri_lodes7_xwalk_2010blocks.csv.gz"
FILES = ["deployment.yaml", "flows.geojson", "release.csv", "release.json", "review.html"]  # + the review record


def files_in(out: Path) -> list[str]:
    """The folder's files but the data users' ones the record lists (TopDown's measured tree, issue 25)."""
    users = json.loads((out / "release.json").read_text("utf-8")).get("data_users", {}).get("files", [])
    names = sorted(p.name for p in out.iterdir())
    assert set(users) <= set(names)
    return [n for n in names if n not in users]

# 2 regions × 3 districts × 4 zones; joined 6-digit codes RRDDZZ with leading zeros
ZONES = [(f"{r:02d}", f"{d:02d}", f"{z:02d}") for r in (1, 2) for d in (1, 2, 3) for z in (1, 2, 3, 4)]
CODES = ["".join(t) for t in ZONES]


def assert_user_error(rc: int, capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert rc == 2, captured
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    assert lines[0].startswith("error:")
    return lines[0]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    rng = np.random.default_rng(0)
    areas = pd.DataFrame(ZONES, columns=["region", "district", "zone"]).assign(code=CODES)
    areas["district_name"] = "District " + areas["district"]
    areas.to_csv(tmp_path / "areas.csv", index=False)
    n = len(CODES)
    pairs = rng.choice(n * n, size=200, replace=False)
    trips = pd.DataFrame({"origin": [CODES[i // n] for i in pairs], "destination": [CODES[i % n] for i in pairs],
                          "count": rng.integers(1, 60, size=pairs.size)})
    trips.to_csv(tmp_path / "secret_trips_file.csv", index=False)
    geoms = [box(i * 0.01, 0.0, (i + 1) * 0.01, 0.01) for i in range(n)]
    gdf = geopandas.GeoDataFrame({"GEOID": CODES}, geometry=geoms, crs="EPSG:4326")
    (tmp_path / "zones.geojson").write_text(gdf.to_json(), "utf-8")
    pts = pd.DataFrame({"code": CODES, "lat": 0.005, "lon": [i * 0.01 + 0.005 for i in range(n)]})
    pts.to_csv(tmp_path / "points.csv", index=False)
    return {"areas": tmp_path / "areas.csv", "trips": tmp_path / "secret_trips_file.csv",
            "zones": tmp_path / "zones.geojson", "points": tmp_path / "points.csv", "dir": tmp_path}


def od_args(f: dict[str, Path], out: Path, *extra: str, budget_args: tuple[str, ...] = ("--rho", "0.5"),
            hierarchy: tuple[str, ...] = ("--levels", "region,district,zone"), hier_file: str = "areas") -> list[str]:
    return ["release", "od", "--input", str(f["trips"]), "--hierarchy", str(f[hier_file]), *hierarchy,
            *budget_args, "--out", str(out), *extra]


def record(out: Path) -> dict:
    rec = json.loads((out / "release.json").read_text("utf-8"))
    validate_od_record(rec)
    return rec


def test_release_od_writes_the_three_files(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out = files["dir"] / "out"
    rc = main(od_args(files, out, "--boundaries", f"zone={files['zones']}", "--names", "district=district_name"))
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert files_in(out) == FILES
    assert "Released O/D flows with InfTDA" in captured.out
    assert "flows per level:" in captured.out and "of the budget left in the budget database" in captured.out
    assert "origin=origin, destination=destination, count=count" in captured.out  # detected, said so
    df = pd.read_csv(out / "release.csv", dtype={"origin": str, "destination": str})
    assert list(df.columns) == ["level", "origin", "destination", "noisy_count", "noise_sd", "ci95_low", "ci95_high"]
    assert (df["noisy_count"] > 0).all()
    assert {"region", "district", "zone", "region>district", "district>zone"} <= set(df["level"])
    assert set(df.loc[df["level"] == "zone", "origin"]) <= {"/".join(z) for z in ZONES}
    rec = record(out)
    assert rec["privacy"]["cost"] == {"definition": "zcdp", "value": 0.5, "label": rec["privacy"]["cost"]["label"]}
    assert rec["extra"]["budget_input"] == {"given": "rho", "rho": 0.5}
    users = ["measurements.csv", "design.json", "estimates.csv", "replicates.csv"]  # InfTDA's measured tree
    assert rec["outputs"]["files"] == ["release.csv", "flows.geojson", *users, "release.json"]
    assert rec["data_users"]["files"] == users
    gj = json.loads((out / "flows.geojson").read_text("utf-8"))
    levels = {f["properties"]["level"] for f in gj["features"]}
    assert levels == {"zone"}  # only the zone level has coordinates
    # the input file name is nowhere in the outputs
    for p in out.iterdir():
        assert "secret_trips_file" not in p.read_text("utf-8")


def test_epsilon_delta_classic_and_cks(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out1, out2 = files["dir"] / "classic", files["dir"] / "cks"
    assert main(od_args(files, out1, budget_args=("--epsilon", "1", "--delta", "1e-8"))) == 0
    assert main(od_args(files, out2, budget_args=("--epsilon", "1", "--delta", "1e-8", "--conversion", "cks"))) == 0
    capsys.readouterr()
    r1, r2 = record(out1)["privacy"]["cost"]["value"], record(out2)["privacy"]["cost"]["value"]
    # the paper's Lemma 3 (spec §5.3 table): ε = 1, δ = 1e-8 → ρ = 1.32154e-2
    assert r1 == pytest.approx(1.32154e-2, rel=1e-5)
    assert r1 == pytest.approx(classic_rho(1.0, 1e-8))
    assert r2 == pytest.approx(budget.approx_dp_to_zcdp(1.0, 1e-8))
    assert r2 > r1  # the CKS conversion is tighter
    rec = record(out1)
    assert rec["privacy"]["approx_dp"]["delta"] == 1e-8
    assert rec["privacy"]["approx_dp"]["epsilon_classic"] == pytest.approx(1.0)
    assert rec["extra"]["budget_input"]["conversion"] == "classic"
    assert record(out2)["privacy"]["approx_dp"]["epsilon"] == pytest.approx(1.0, rel=1e-6)
    # spec §5.3 inverse checks of the classic conversion
    assert classic_rho(0.1, 1e-8) == pytest.approx(1.3535e-4, rel=1e-3)
    assert classic_rho(10, 1e-8) == pytest.approx(1.07988, rel=1e-4)


def test_pure_epsilon(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out = files["dir"] / "pure"
    # ε = 2 is above the default cap of a new budget (ε = 1): the cap is given
    assert main(od_args(files, out, "--neighbour", "unbounded", "--split", "geometric", "--budget-cap", "2",
                        budget_args=("--epsilon", "2", "--pure"))) == 0
    capsys.readouterr()
    rec = record(out)
    assert rec["privacy"]["cost"]["definition"] == "pure" and rec["privacy"]["cost"]["value"] == 2.0
    assert rec["privacy"]["noise"] == "discrete Laplace"
    assert rec["privacy"]["neighbouring_relation"] == "add_remove"  # the alias is read as the relation
    assert rec["total_public"] is False and rec["privacy"]["invariants"] == {}
    assert rec["budget"]["split"] == "geometric"
    assert sum(lv["share"] for lv in rec["privacy"]["levels"]) == pytest.approx(2.0)


@pytest.mark.parametrize(("budget_args", "match"), [
    (("--epsilon", "1"), "--delta"),
    (("--epsilon", "1", "--pure", "--delta", "1e-8"), "--pure"),
    (("--epsilon", "1", "--rho", "0.1"), "not both"),
    ((), "privacy budget"),
    (("--rho", "abc"), "not a number"),
])
def test_budget_errors(files: dict[str, Path], capsys: pytest.CaptureFixture[str],
                       budget_args: tuple[str, ...], match: str) -> None:
    out = files["dir"] / "err"
    line = assert_user_error(main(od_args(files, out, budget_args=budget_args)), capsys)
    assert match in line
    assert not out.exists()


def test_prefix_hierarchy(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out = files["dir"] / "prefix"
    rc = main(od_args(files, out, "--level-names", "region,district,zone", "--names", "district=district_name",
                      "--budget-cap", "1", hierarchy=("--code-column", "code", "--prefix-lengths", "2,4,6")))
    assert rc == 0, capsys.readouterr().err
    df = pd.read_csv(out / "release.csv", dtype={"origin": str, "destination": str})
    assert {"total>region", "region", "region>district", "district", "district>zone", "zone"} == set(df["level"])
    zone = df[df["level"] == "zone"]
    assert zone["origin"].str.len().eq(6).all() and set(zone["origin"]) <= set(CODES)  # global prefix codes
    rec = record(out)
    assert rec["hierarchy"]["origin"]["levels"] == ["total", "region", "district", "zone"]
    assert rec["hierarchy"]["origin"]["areas_per_level"] == [1, 2, 6, 24]
    # without --level-names: generic names (census names only for census prefix lengths)
    out2 = files["dir"] / "prefix2"
    assert main(od_args(files, out2, "--budget-cap", "1", hierarchy=("--code-column", "code", "--prefix-lengths",
                                                                      "2,4,6"))) == 0
    assert record(out2)["hierarchy"]["origin"]["levels"] == ["total", "level1", "level2", "level3"]


def test_hierarchy_from_geojson_and_origin_tree(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out = files["dir"] / "gj"
    rc = main(od_args(files, out, "--orientation", "origin", "--order", "descending", "--tiebreak", "index",
                      "--coordinates", str(files["points"]),
                      hierarchy=("--code-column", "GEOID", "--prefix-lengths", "2,4,6"), hier_file="zones"))
    assert rc == 0, capsys.readouterr().err
    rec = record(out)
    assert rec["tree"]["orientation"] == "origin"
    assert rec["zeroing_order"] == "descending" and rec["tiebreak"] == "index"
    assert rec["tree"]["levels"][1]["name"] == "level1>total"
    gj = json.loads((out / "flows.geojson").read_text("utf-8"))
    # points give coordinates at every depth, the total included
    assert {f["properties"]["level"] for f in gj["features"]} == set(pd.read_csv(out / "release.csv")["level"])


def test_auto_detected_lodes_columns(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    t = pd.read_csv(files["trips"], dtype=str)
    lodes = files["dir"] / "lodes.csv"
    t.rename(columns={"origin": "h_geocode", "destination": "w_geocode", "count": "S000"})[
        ["w_geocode", "h_geocode", "S000"]].to_csv(lodes, index=False)
    out = files["dir"] / "lodes"
    args = od_args(files, out)
    args[args.index("--input") + 1] = str(lodes)
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "origin=h_geocode, destination=w_geocode, count=S000" in captured.out
    # home → work: the origin is the home block
    df = pd.read_csv(out / "release.csv", dtype=str)
    assert df["noisy_count"].astype(int).groupby(df["level"]).sum().nunique() == 1
    # without recognisable names: an error listing the columns
    odd = files["dir"] / "odd.csv"
    t.rename(columns={"origin": "a", "destination": "b"}).to_csv(odd, index=False)
    args[args.index("--input") + 1] = str(odd)
    line = assert_user_error(main(args), capsys)
    assert "--origin" in line and "a, b, count" in line


def test_user_column_caps_trips(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(1)
    rows = pd.DataFrame({"pid": rng.integers(0, 50, 400), "origin": rng.choice(CODES, 400),
                         "destination": rng.choice(CODES, 400)})
    trips = files["dir"] / "trip_rows.csv"
    rows.to_csv(trips, index=False)
    out = files["dir"] / "user"
    args = od_args(files, out, "--user", "pid", "--max-trips", "3", "--repeats")
    args[args.index("--input") + 1] = str(trips)
    assert main(args) == 0, capsys.readouterr().err
    rec = record(out)
    assert rec["privacy"]["unit_of_privacy"]["max_trips"] == 3
    assert rec["privacy"]["unit_of_privacy"]["distinct"] is False
    assert rec["total_public"] is False  # m > 1: the total is noised
    assert rec["privacy"]["levels"][-1]["l2_sensitivity"] == pytest.approx(math.sqrt(2) * 3)
    line = assert_user_error(main(od_args(files, out, "--max-trips", "3")), capsys)
    assert "--user" in line


def test_unknown_codes_error_and_drop_unmatched(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    t = pd.read_csv(files["trips"], dtype=str)
    bad = pd.concat([t, pd.DataFrame({"origin": ["999999", CODES[0]], "destination": [CODES[1], ""],
                                      "count": ["5", "7"]})], ignore_index=True)
    f = files["dir"] / "bad.csv"
    bad.to_csv(f, index=False)
    out = files["dir"] / "bad"
    args = od_args(files, out)
    args[args.index("--input") + 1] = str(f)
    line = assert_user_error(main(args), capsys)
    assert "not a finest area" in line or "missing" in line
    assert not out.exists()
    assert main([*args, "--drop-unmatched"]) == 0
    captured = capsys.readouterr()
    assert "Dropped 2 of 202 trip rows" in captured.err
    assert (out / "release.csv").exists()
    # the dropped-row count is curator-only: not in the export
    rec = json.loads((out / "release.json").read_text("utf-8"))
    rec.pop("release_id"), rec.pop("created", None)  # random hex and a time: they may hold "200" by chance
    assert not re.search(r"(?<![\d.])20[02](?![\d.])", json.dumps(rec))


def test_ledger_refuses_when_exhausted(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    ledger = files["dir"] / "ledger.json"
    lg = ["--ledger", str(ledger), "--budget-cap", "1"]
    assert main(od_args(files, files["dir"] / "a", *lg, budget_args=("--rho", "0.6"))) == 0
    assert f"0.4 of the budget left in '{ledger}'" in capsys.readouterr().out
    saved = json.loads(ledger.read_text("utf-8"))
    assert saved["definition"] == "zcdp" and saved["spent"] == pytest.approx(0.6)
    out = files["dir"] / "b"
    line = assert_user_error(main(od_args(files, out, *lg, budget_args=("--rho", "0.6"))), capsys)
    assert "0.4" in line or "budget" in line.lower()
    assert not out.exists()
    assert json.loads(ledger.read_text("utf-8"))["spent"] == pytest.approx(0.6)  # refused: nothing charged
    # an (ε, δ) cap is converted to ρ like the release; ρ composes, so two releases of ε = 1 fit under a cap
    # of ε = 1.5 (ρ ∝ ε² roughly) but not under ε = 1.3
    assert 2 * classic_rho(1, 1e-8) < classic_rho(1.5, 1e-8) and 2 * classic_rho(1, 1e-8) > classic_rho(1.3, 1e-8)
    ledger2 = files["dir"] / "ledger2.json"
    lg2 = ["--ledger", str(ledger2), "--budget-cap", "1.3"]
    eps = ("--epsilon", "1", "--delta", "1e-8")
    assert main(od_args(files, files["dir"] / "c", *lg2, budget_args=eps)) == 0
    capsys.readouterr()
    assert json.loads(ledger2.read_text("utf-8"))["cap"]["value"] == pytest.approx(classic_rho(1.3, 1e-8))
    assert_user_error(main(od_args(files, files["dir"] / "d", *lg2, budget_args=eps)), capsys)
    # a ρ release cannot go on a pure-ε ledger
    ledger3 = files["dir"] / "ledger3.json"
    assert main(od_args(files, files["dir"] / "e", "--ledger", str(ledger3), "--budget-cap", "5",
                        budget_args=("--epsilon", "1", "--pure"))) == 0
    capsys.readouterr()
    assert_user_error(main(od_args(files, files["dir"] / "f", "--ledger", str(ledger3))), capsys)


def test_parameter_errors(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    d = files["dir"]
    (d / "afile").write_text("x")
    assert "is a file" in assert_user_error(main(od_args(files, d / "afile")), capsys)
    assert "ledger" in assert_user_error(main(od_args(files, d / "x", "--mechanism", "sh")), capsys)
    assert "Unknown od mechanism 'nope'. Available: inftda" in assert_user_error(main(od_args(files, d / "x", "--mechanism", "nope")), capsys)
    line = assert_user_error(main(od_args(files, d / "x", "--split", "1,2")), capsys)
    assert "weights" in line
    line = assert_user_error(main(od_args(files, d / "x", hierarchy=())), capsys)
    assert "--levels" in line and "--prefix-lengths" in line
    line = assert_user_error(main(od_args(files, d / "x", "--boundaries", f"county={files['zones']}")), capsys)
    assert "county" in line
    assert not (d / "x").exists()
    # custom weights, one per measured level (6 here)
    assert main(od_args(files, d / "w", "--split", "1,1,1,2,2,4")) == 0
    capsys.readouterr()
    assert record(d / "w")["budget"]["split_weights"] == [1, 1, 1, 2, 2, 4]


OD_MECHANISMS = ["inftda", "tda_l2", "tda_linf_milp", "vanilla_gauss", "sh"]


def test_mechanisms_lists_od(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mechanisms"]) == 0
    out = capsys.readouterr().out
    assert "O/D mechanisms (python -m dpcore release od" in out
    for name in OD_MECHANISMS:
        assert f"{name}:" in out
    assert main(["mechanisms", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    ods = {d["name"]: d for d in data if d["kind"] == "od"}
    assert list(ods) == OD_MECHANISMS
    assert ods["inftda"]["ledger"] is True and ods["sh"]["ledger"] is False
    assert {"points", "hierarchy", "census", "od"} == {d["kind"] for d in data}


@pytest.mark.skipif(not (RI_OD.exists() and RI_XWALK.exists()), reason="shared RI LODES data not available")
def test_real_rhode_island_lodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ri"
    rc = main(["release", "od", "--input", str(RI_OD), "--hierarchy", str(RI_XWALK),
               "--code-column", "tabblk2010", "--prefix-lengths", "2,5,11,12,15",
               "--epsilon", "1", "--delta", "1e-8", "--coordinates", str(RI_XWALK),
               "--names", "county=ctyname", "--geojson-top", "200", "--out", str(out)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "origin=h_geocode, destination=w_geocode, count=S000" in captured.out
    assert files_in(out) == FILES
    df = pd.read_csv(out / "release.csv", dtype={"origin": str, "destination": str})
    names = ["total>state", "state", "state>county", "county", "county>tract", "tract", "tract>block_group",
             "block_group", "block_group>block", "block"]
    assert set(df["level"]) == set(names)
    sums = df.groupby("level")["noisy_count"].sum()
    assert (sums == 406_052).all()  # bounded, one job per person: the total is public and every level adds up
    assert df.loc[df["level"] == "county", "origin"].str.len().eq(5).all()
    assert df.loc[df["level"] == "block", "destination"].str.len().eq(15).all()
    assert len(df[df["level"] == "county"]) <= 25
    rec = record(out)
    assert rec["hierarchy"]["origin"]["areas_per_level"][:3] == [1, 1, 5]
    assert rec["privacy"]["cost"]["value"] == pytest.approx(1.32154e-2, rel=1e-5)
    gj = json.loads((out / "flows.geojson").read_text("utf-8"))
    per_level = pd.Series([f["properties"]["level"] for f in gj["features"]]).value_counts()
    assert per_level.max() <= 200 and set(per_level.index) == set(names)
    lon = np.array([c[0] for f in gj["features"] for c in f["geometry"]["coordinates"]])
    lat = np.array([c[1] for f in gj["features"] for c in f["geometry"]["coordinates"]])
    assert ((lon > -72) & (lon < -71)).all() and ((lat > 41) & (lat < 42.1)).all()
    for p in out.iterdir():
        assert "ri_lodes7" not in p.read_text("utf-8")


def test_budget_cap_of_an_existing_ledger_cannot_be_changed(files: dict[str, Path],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A run may not raise (or reinterpret in another unit) the cap of an existing ledger."""
    ledger = files["dir"] / "cap.json"
    eps = ("--epsilon", "1", "--delta", "1e-8")
    assert main(od_args(files, files["dir"] / "c1", "--ledger", str(ledger), "--budget-cap", "1",
                        budget_args=eps)) == 0
    capsys.readouterr()
    saved = json.loads(ledger.read_text("utf-8"))
    # a pure-ε run with --budget-cap 1 would have turned the ρ cap 0.0132 into ρ = 1
    line = assert_user_error(main(od_args(files, files["dir"] / "c2", "--ledger", str(ledger), "--budget-cap", "1",
                                          budget_args=("--epsilon", "0.5", "--pure"))), capsys)
    assert "already has the cap" in line
    line = assert_user_error(main(od_args(files, files["dir"] / "c3", "--ledger", str(ledger), "--budget-cap", "2",
                                          budget_args=eps)), capsys)
    assert "already has the cap" in line
    assert json.loads(ledger.read_text("utf-8")) == saved
    # the same cap again is fine (and then refused for lack of budget, not for the cap)
    line = assert_user_error(main(od_args(files, files["dir"] / "c4", "--ledger", str(ledger), "--budget-cap", "1",
                                          budget_args=eps)), capsys)
    assert "already has the cap" not in line


def test_spend_is_recorded_even_when_writing_fails(files: dict[str, Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Noise was drawn from the data, so the charge must be saved before the files are written."""
    ledger = files["dir"] / "fail.json"
    out = files["dir"] / "fail_out"
    (out / "release.json").mkdir(parents=True)  # writing release.json will fail
    rc = main(od_args(files, out, "--ledger", str(ledger), "--budget-cap", "1", budget_args=("--rho", "0.3")))
    capsys.readouterr()
    assert rc != 0
    assert json.loads(ledger.read_text("utf-8"))["spent"] == pytest.approx(0.3)
