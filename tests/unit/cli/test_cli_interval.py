"""``python -m dpcore interval`` on a real tracts release (Rhode Island, from the 2020 tract file).

The answers are checked against the release's own estimates.csv (a single tract, a whole county:
the union's GLS estimate and exact variance are the node's) and against the definition of the
interval (estimate ± z·sd, z the normal 95 % quantile of a 90 % interval).
"""

from __future__ import annotations

import json
from pathlib import Path

import geopandas
import numpy as np
import pandas as pd
import pytest
import shapely
from scipy.stats import norm

from dpcore.cli import main

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data"
US_TRACTS = SHARED / "census" / "us_tract_population_2020_cenpop.csv.gz"
RI_TRACTS = SHARED / "boundaries" / "ri_tracts_2020_tiger2023.geojson"

pytestmark = pytest.mark.skipif(not (US_TRACTS.exists() and RI_TRACTS.exists()), reason="shared data absent")


@pytest.fixture(scope="module")
def ri_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("interval")
    df = pd.read_csv(US_TRACTS, dtype=str, encoding="utf-8-sig")
    inp = tmp / "ri_tracts.csv"
    df[df["STATEFP"] == "44"].to_csv(inp, index=False)
    out = tmp / "out"
    with pytest.MonkeyPatch.context() as mp:  # a module fixture: the per-test ledger fixture has not run
        mp.setenv("DPCORE_LEDGER_DB", str(tmp / "ledger.sqlite"))
        rc = main(["release", "hierarchy", "--input", str(inp), "--levels", "STATEFP,COUNTYFP,TRACTCE",
                   "--count", "POPULATION", "--mechanism", "topdown_l2", "--rho=0.05", "--input-lists-all-areas",
                   "--boundaries", f"TRACTCE={RI_TRACTS}", "--out", str(out)])
    assert rc == 0
    return out


def cells_of(release: Path, node: str) -> list[str]:
    """The finest codes under ``node`` (design.json)."""
    design = json.loads((release / "design.json").read_text("utf-8"))
    return [design["cells"][i] for i in design["nodes"][node]]


def run_interval(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[list[dict], str]:
    assert main(["interval", *args]) == 0
    cap = capsys.readouterr()
    return json.loads(cap.out), cap.err


def test_codes_one_answer_per_line_in_order(ri_release: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    est = pd.read_csv(ri_release / "estimates.csv", dtype={"code": str})
    tracts = est[est["level"] == "TRACTCE"]
    county = est[est["level"] == "COUNTYFP"].iloc[1]
    in_county = cells_of(ri_release, county["code"])
    assert 10 < len(in_county) < len(tracts)
    lines = [tracts["code"].iloc[5], ",".join(in_county), ",".join(tracts["code"].iloc[[0, 9, 17]])]
    codes = tmp_path / "codes.txt"
    codes.write_text("\n".join(lines) + "\n", "utf-8")
    out, _ = run_interval(capsys, "--release", str(ri_release), "--codes", str(codes), "--coverage", "0.9", "--json")
    assert len(out) == 3 and all({"estimate", "sd", "low", "high"} <= set(r) for r in out)
    one = tracts.iloc[5]
    assert out[0]["estimate"] == pytest.approx(one["estimate"], abs=1e-5)
    assert out[0]["sd"] == pytest.approx(one["sd"], abs=1e-5)
    assert out[1]["estimate"] == pytest.approx(county["estimate"], abs=1e-4)
    assert out[1]["variance"] == pytest.approx(county["variance"], abs=1e-4)
    assert out[2]["estimate"] == pytest.approx(tracts["estimate"].iloc[[0, 9, 17]].sum(), abs=1e-4)
    z = norm.ppf(0.95)
    for r in out:
        assert r["method"] == "normal"
        assert (r["low"], r["high"]) == pytest.approx((r["estimate"] - z * r["sd"], r["estimate"] + z * r["sd"]))


def test_unknown_code_is_a_one_line_error(ri_release: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    codes = tmp_path / "codes.txt"
    codes.write_text("44/001/999999\n", "utf-8")
    assert main(["interval", "--release", str(ri_release), "--codes", str(codes), "--json"]) == 2
    assert "not finest cells" in capsys.readouterr().err


def test_polygon_county_and_a_box(ri_release: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    est = pd.read_csv(ri_release / "estimates.csv", dtype={"code": str})
    county = est[est["level"] == "COUNTYFP"].iloc[1]
    shapes = geopandas.read_file(ri_release / "TRACTCE.geojson")
    inside = shapes[shapes["code"].isin(cells_of(ri_release, county["code"]))]
    whole = shapely.union_all(inside.geometry.to_numpy())
    minx, miny, maxx, maxy = whole.bounds
    cut = shapely.box(minx, miny, (minx + maxx) / 2, (miny + maxy) / 2)
    poly = tmp_path / "area.geojson"
    poly.write_text(geopandas.GeoDataFrame(geometry=[whole, cut], crs="EPSG:4326").to_json(), "utf-8")
    out, err = run_interval(capsys, "--release", str(ri_release), "--polygon", str(poly), "--json")
    assert len(out) == 2
    first, second = out
    # the county's own outline: every tract inside (slivers of neighbours weigh almost nothing)
    assert first["cells_inside"] >= len(inside) - 2
    assert first["estimate"] == pytest.approx(county["estimate"], rel=0.01)
    assert first["inside"] <= first["estimate"] + 1e-6 and first["estimate"] <= first["touching"] + 1e-6
    # a box cutting tracts: weights between the bracket, a warning when cut cells carry > 20 %
    assert second["cells_cut"] > 0
    assert second["inside"] <= second["estimate"] <= second["touching"]
    assert (second["warning"] is not None) == (second["cut_share"] > 0.2)
    assert ("warning: feature 1" in err) == (second["warning"] is not None)
    assert np.isfinite(second["sd"]) and second["sd"] > 0


def test_polygon_on_a_grid_design_weighs_cut_cells_by_area(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A points-style design (cell_bounds): a box over cell a and half of cell b weighs them 1 and 0.5."""
    from dpcore.estimate.data_users import DataUserPack, MeasuredLevel, pack_files

    cells = ["a", "b", "c"]
    pack = DataUserPack("points", [MeasuredLevel("grid", "discrete_laplace", 2.0, 1.0)], np.zeros(3, dtype=np.int64),
                        cells, np.array([40, 10, 7]), cells, {c: [i] for i, c in enumerate(cells)},
                        cell_bounds=[[0, 0, 1, 1], [1, 0, 2, 1], [2, 0, 3, 1]])
    files, m = pack_files(pack)
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    poly = tmp_path / "area.geojson"
    poly.write_text(geopandas.GeoDataFrame(geometry=[shapely.box(-0.5, -0.5, 1.5, 0.5)], crs="EPSG:4326").to_json(),
                    "utf-8")
    out, err = run_interval(capsys, "--release", str(tmp_path), "--polygon", str(poly), "--json",
                            "--apportionment", "none")
    (r,) = out
    var = float(m.var[0])
    assert r["estimate"] == pytest.approx(0.5 * 40 + 0.5 * 0.5 * 10)  # cell a half inside (y from -0.5), b a quarter
    assert r["variance"] == pytest.approx((0.5 ** 2 + 0.25 ** 2) * var)
    assert (r["inside"], r["touching"]) == (0.0, 50.0)
    assert r["cells_cut"] == 2 and r["warning"] and "warning: feature 0" in err
    assert (r["apportionment"], r["apportionment_sd"], r["rho"]) == ("none", 0.0, None)
    # the default adds the cut cells' apportionment variance: a flat grid has no groups of cells to estimate the
    # over-dispersion from, so the binomial x·w·(1 − w) (40·0.5·0.5 + 10·0.25·0.75), and the warning says so
    out, err = run_interval(capsys, "--release", str(tmp_path), "--polygon", str(poly), "--json")
    (d,) = out
    assert d["apportionment"] == "binomial" and d["rho"] == 0.0 and "no groups of cells" in d["warning"]
    assert d["apportionment_sd"] ** 2 == pytest.approx(40 * 0.25 + 10 * 0.25 * 0.75)
    assert d["variance"] == pytest.approx(r["variance"] + d["apportionment_sd"] ** 2)
    assert d["noise_sd"] == pytest.approx(r["sd"]) and d["estimate"] == r["estimate"]
    z = norm.ppf(0.95)
    assert (d["low"], d["high"]) == pytest.approx((d["estimate"] - z * d["sd"], d["estimate"] + z * d["sd"]))
    # a public density the curator supplies (here all of it in the cells' lower halves): cell a's density is
    # wholly under the polygon (weight 1), b's half (0.5); the bracket stays geometric
    dens = tmp_path / "density.geojson"
    dens.write_text(geopandas.GeoDataFrame({"density": [3.0]}, geometry=[shapely.box(0, 0, 2, 0.5)],
                                           crs="EPSG:4326").to_json(), "utf-8")
    out, err = run_interval(capsys, "--release", str(tmp_path), "--polygon", str(poly), "--density", str(dens),
                            "--json", "--apportionment", "none")
    (r,) = out
    assert r["estimate"] == pytest.approx(1.0 * 40 + 0.5 * 10)
    assert r["variance"] == pytest.approx((1.0 ** 2 + 0.5 ** 2) * var)
    assert (r["inside"], r["touching"], r["cells_cut"]) == (0.0, 50.0, 2) and "public density" in r["warning"]
    assert main(["interval", "--release", str(tmp_path), "--codes", str(poly), "--density", str(dens)]) == 2
    assert main(["interval", "--release", str(tmp_path), "--codes", str(poly), "--apportionment", "none"]) == 2
    # the coordinates' precision 0.25: a cell holds 4×4 lattice positions; a box to x 1.4, y 0.4 holds 2 of a's
    # 4 rows (area share 0.4) and 2×2 of b's positions (area share 0.16)
    lat = tmp_path / "lattice.geojson"
    lat.write_text(geopandas.GeoDataFrame(geometry=[shapely.box(-0.5, -0.5, 1.4, 0.4)], crs="EPSG:4326").to_json(),
                   "utf-8")
    out, _ = run_interval(capsys, "--release", str(tmp_path), "--polygon", str(lat), "--precision", "0.25",
                          "--json", "--apportionment", "none")
    assert out[0]["estimate"] == pytest.approx(0.5 * 40 + 0.25 * 10)
    out, _ = run_interval(capsys, "--release", str(tmp_path), "--polygon", str(lat), "--json", "--apportionment", "none")
    assert out[0]["estimate"] == pytest.approx(0.4 * 40 + 0.16 * 10)
    assert main(["interval", "--release", str(tmp_path), "--codes", str(poly), "--precision", "0.25"]) == 2
    assert main(["interval", "--release", str(tmp_path), "--polygon", str(lat), "--precision", "0"]) == 2
