"""Unit tests of the command line (dpcore.cli.main and ``python -m dpcore``).

Errors a person can fix must give exit status 2, exactly one line on stderr and no
traceback, and must not write any output file.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dpcore
from dpcore import catalog
from dpcore.cli import main
from dpcore.core.record import validate_record
from dpcore.points.export import CSV_COLUMNS

REPO = Path(dpcore.__file__).resolve().parents[1]
BOUNDS = "-74.06,40.56,-73.70,40.92"
FILES = ["deployment.yaml", "design.json", "estimates.csv", "measurements.csv", "release.csv", "release.geojson",
         "release.json", "replicates.csv", "review.html"]  # the data users' files and the review record (issue 25)


def write_points(path: Path, n: int = 300, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    lat = rng.uniform(40.6, 40.9, n)
    lon = rng.uniform(-74.0, -73.75, n)
    lines = ["lat,lon"] + [f"{a:.6f},{o:.6f}" for a, o in zip(lat, lon, strict=True)]
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


@pytest.fixture
def points_csv(tmp_path: Path) -> Path:
    return write_points(tmp_path / "points.csv")


def release_args(inp: Path, out: Path, *, mechanism: str = "identity", epsilon: str = "1",
                 bounds: str = BOUNDS, grid: str = "8,8", extra: list[str] | None = None) -> list[str]:
    return [
        # "--bounds=..." because a value starting with "-" cannot follow "--bounds" as a
        # separate word (see test_negative_bounds_as_separate_argument)
        "release", "points", "--input", str(inp), f"--bounds={bounds}", "--grid", grid,
        "--mechanism", mechanism, f"--epsilon={epsilon}", "--out", str(out), *(extra or []),
    ]


def assert_user_error(rc: int, capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert rc == 2, captured
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    assert lines[0].startswith("error:")
    assert len(lines[0]) > len("error: ") + 10  # says something
    return lines[0]


# ---------------------------------------------------------------------------------------------
# successful releases
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", catalog.names("points"))
def test_release_each_mechanism(tmp_path: Path, points_csv: Path, mechanism: str,
                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    rc = main(release_args(points_csv, out, mechanism=mechanism))
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert captured.err == ""
    extra = ["workload_answers.csv"] if mechanism == "matrix" else []  # its workload answers
    offered = json.loads((out / "release.json").read_text("utf-8"))["data_users"]["measurements_offered"]
    expected = [n for n in FILES if offered or n != "replicates.csv"]  # replicates where measurements are offered
    assert sorted(p.name for p in out.iterdir()) == sorted(expected + extra)
    rec = json.loads((out / "release.json").read_text("utf-8"))
    validate_record(rec)
    assert rec["mechanism"]["name"] == mechanism
    assert rec["privacy"]["cost"]["value"] == 1.0
    assert rec["domain"]["grid"] == {"rows": 8, "cols": 8}
    with open(out / "release.csv", newline="", encoding="utf-8") as fh:
        table = list(csv.reader(fh))
    assert table[0] == CSV_COLUMNS
    assert len(table) - 1 == rec["outputs"]["n_rectangles"]
    assert "points.csv" not in (out / "release.json").read_text("utf-8")


def test_negative_bounds_as_separate_argument(tmp_path: Path, points_csv: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    # The documented usage is "--bounds W,S,E,N" and the messages suggest
    # "-74.06,40.64,-73.78,40.83": western longitudes start with "-", and the
    # command must accept them written as the next word.
    out = tmp_path / "out"
    args = ["release", "points", "--input", str(points_csv), "--bounds", BOUNDS, "--grid", "4,4",
            "--mechanism", "identity", "--epsilon", "1", "--out", str(out)]
    rc = main(args)
    assert rc == 0, capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == FILES


def test_release_with_params_and_user_cap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(1)
    n = 200
    inp = tmp_path / "trips.csv"
    rows = ["person,latitude,longitude"] + [
        f"p{u},{a:.5f},{o:.5f}"
        for u, a, o in zip(rng.integers(0, 20, n), rng.uniform(40.6, 40.9, n), rng.uniform(-74.0, -73.8, n),
                           strict=True)
    ]
    inp.write_text("\n".join(rows) + "\n", "utf-8")
    out = tmp_path / "out"
    rc = main(release_args(inp, out, mechanism="ug", epsilon="0.5", grid="16x16",
                           extra=["--param", "public_n=400", "--param", "c=5",
                                  "--user-col", "person", "--user-cap", "3",
                                  "--lat-col", "latitude", "--lon-col", "longitude"]))
    assert rc == 0, capsys.readouterr().err
    rec = json.loads((out / "release.json").read_text("utf-8"))
    assert rec["mechanism"]["params"] == {"c": 5.0, "count_share": 0.05, "public_n": 400}
    assert rec["privacy"]["sensitivity_l1"] == 3
    assert "3 records" in rec["privacy"]["unit_of_privacy"]
    # m = round(sqrt(400 * 0.5 / (5 * 3))) = round(3.65) = 4
    assert rec["released_values"]["grid_side"] == 4
    assert rec["outputs"]["n_rectangles"] == 16


# ---------------------------------------------------------------------------------------------
# mechanisms listing
# ---------------------------------------------------------------------------------------------


def test_mechanisms_lists_all(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mechanisms"]) == 0
    out = capsys.readouterr().out
    for name in catalog.names("points"):
        assert f"{name}:" in out
    for p in catalog.get("points", "ug").params:
        assert f"--param {p.name}=" in out


def test_mechanisms_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mechanisms", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert sorted(d["name"] for d in data if d["kind"] == "points") == sorted(catalog.names("points"))
    hier = {d["name"] for d in data if d["kind"] == "hierarchy"}
    assert {"exact", "topdown_linf", "topdown_l2", "hay", "bottom_up", "independent", "dpc_approx", "matrix"} == hier
    ug = next(d for d in data if d["name"] == "ug")
    assert {p["name"]: p["default"] for p in ug["params"]} == {"c": 10.0, "count_share": 0.05, "public_n": 0}


def test_mechanisms_list_every_kind_of_the_catalogue(capsys: pytest.CaptureFixture[str]) -> None:
    from dpcore import catalog

    assert main(["mechanisms"]) == 0
    out = capsys.readouterr().out
    for kind in ("points", "hierarchy", "census", "od"):
        assert f"python -m dpcore release {kind} --mechanism NAME" in out
    assert "privelet: Privelet" in out and "option marginals, default '1'" in out
    assert main(["mechanisms", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(d["kind"], d["name"]) for d in data] == [(m.kind, m.name) for m in catalog.REGISTRY]
    census = {d["name"]: d for d in data if d["kind"] == "census"}
    assert census["privelet"]["definitions"] == ["pure"] and census["matrix"]["definitions"] == ["pure", "zcdp"]
    assert [p["name"] for p in census["matrix"]["params"]] == ["level", "marginals"]


#: Libraries that listing the mechanisms must not import (they load where they are used); the
#: start-up time they cost is measured by benchmarks/startup.py.
HEAVY_MODULES = ["duckdb", "pyspark", "plotly", "scipy.optimize", "geopandas"]


def test_python_m_dpcore_mechanisms_lists_them_and_imports_no_heavy_library() -> None:
    """``python -m dpcore mechanisms`` (run as ``-m`` runs it, in a fresh process: the imports are
    the point) lists every points mechanism and loads none of :data:`HEAVY_MODULES`."""
    script = (
        "import contextlib, io, json, runpy, sys\n"
        "sys.argv = ['dpcore', 'mechanisms']\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        "        runpy.run_module('dpcore', run_name='__main__', alter_sys=True)\n"
        "    except SystemExit as e:\n"
        "        assert not e.code, e.code\n"
        "print(json.dumps({'modules': sorted(sys.modules), 'out': out.getvalue()}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    answer = json.loads(proc.stdout)
    for name in catalog.names("points"):
        assert f"{name}:" in answer["out"]
    loaded = set(answer["modules"])
    assert "dpcore.points.mechanisms" in loaded  # the listing did run
    assert [m for m in HEAVY_MODULES if m in loaded] == []


def test_python_m_dpcore_user_error_exit_code(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dpcore", *release_args(tmp_path / "none.csv", tmp_path / "out",
                                                       bounds="1,0,0,1")],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------------------------
# errors a person can fix
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw,needle",
    [
        ({"bounds": "-73.70,40.56,-74.06,40.92"}, "West"),  # W >= E
        ({"bounds": "1,2,3"}, "four numbers"),
        ({"bounds": "a,b,c,d"}, "not a number"),
        ({"mechanism": "quad-tree"}, "Unknown points mechanism"),
        ({"epsilon": "abc"}, "epsilon"),
        ({"epsilon": "-1"}, "ε"),
        ({"epsilon": "0"}, "ε"),
        ({"epsilon": "nan"}, "ε"),
        ({"epsilon": "1000"}, "ε"),
        ({"grid": "0,8"}, "rows"),
        ({"grid": "a,b"}, "Grid"),
        ({"extra": ["--param", "c=10"]}, "no parameter"),
        ({"extra": ["--param", "c"]}, "key=value"),
        ({"mechanism": "ug", "extra": ["--param", "c=0"]}, "'c'"),
        ({"mechanism": "ug", "extra": ["--param", "cc=3"]}, "'cc'"),
        ({"extra": ["--user-cap", "3"]}, "--user-col"),
        ({"extra": ["--user-col", "id"]}, "--user-cap"),
    ],
)
def test_parameter_errors(tmp_path: Path, points_csv: Path, kw: dict, needle: str,
                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    rc = main(release_args(points_csv, out, **kw))
    line = assert_user_error(rc, capsys)
    assert needle in line
    assert not out.exists()


def test_missing_required_argument(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["release", "points", "--input", "x.csv"])
    line = assert_user_error(rc, capsys)
    assert "required" in line
    assert "(see 'python -m dpcore release points --help')" in line  # the whole command (issue 26, item 10)


def test_unknown_command(capsys: pytest.CaptureFixture[str]) -> None:
    line = assert_user_error(main(["frobnicate"]), capsys)
    assert "(see 'python -m dpcore --help')" in line and "dpcore dpcore" not in line


def test_missing_input_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    line = assert_user_error(main(release_args(tmp_path / "nope.csv", out)), capsys)
    assert "nope.csv" in line
    assert not out.exists()


def _bad_inputs(tmp_path: Path) -> dict[str, Path]:
    files = {}
    files["empty"] = tmp_path / "empty.csv"
    files["empty"].write_bytes(b"")
    files["header_only"] = tmp_path / "header_only.csv"
    files["header_only"].write_text("lat,lon\n", "utf-8")
    files["no_coordinates"] = tmp_path / "nocoord.csv"
    files["no_coordinates"].write_text("name,count,colour\nann,3,red\nbob,4,blue\n", "utf-8")
    files["non_numeric"] = tmp_path / "nonnum.csv"
    files["non_numeric"].write_text("lat,lon\n40.7,-73.9\nforty,-73.8\n40.8,west\n", "utf-8")
    files["binary"] = tmp_path / "binary.csv"
    files["binary"].write_bytes(bytes(range(256)) * 40 + b"\x00\x00\xff\xfe" * 100)
    files["png"] = tmp_path / "picture.csv"
    files["png"].write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(np.random.default_rng(0).integers(0, 256, 2000,
                                                                                              dtype=np.uint8)))
    files["directory"] = tmp_path / "folder.csv"
    files["directory"].mkdir()
    return files


@pytest.mark.parametrize(
    "kind", ["empty", "header_only", "no_coordinates", "non_numeric", "binary", "png", "directory"]
)
def test_bad_input_files(tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    inp = _bad_inputs(tmp_path)[kind]
    out = tmp_path / "out"
    assert_user_error(main(release_args(inp, out)), capsys)
    assert not out.exists()


def test_out_of_bounds_points_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # every point outside the public bounds: still a valid (all-noise) release
    inp = tmp_path / "far.csv"
    inp.write_text("lat,lon\n10.0,10.0\n11.0,11.0\n", "utf-8")
    out = tmp_path / "out"
    assert main(release_args(inp, out)) == 0, capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == FILES


# ---------------------------------------------------------------------------------------------
# budget ledger across runs
# ---------------------------------------------------------------------------------------------


def test_ledger_refuses_second_release(tmp_path: Path, points_csv: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    ledger = tmp_path / "ledger" / "budget.json"
    extra = ["--budget-cap", "1", "--ledger", str(ledger)]
    out1, out2 = tmp_path / "out1", tmp_path / "out2"
    assert main(release_args(points_csv, out1, epsilon="0.6", extra=extra)) == 0
    capsys.readouterr()
    assert sorted(p.name for p in out1.iterdir()) == FILES
    saved = json.loads(ledger.read_text("utf-8"))
    assert saved["spent"] == pytest.approx(0.6)
    assert saved["remaining"] == pytest.approx(0.4)

    line = assert_user_error(main(release_args(points_csv, out2, epsilon="0.6", extra=extra)), capsys)
    assert "0.4" in line
    assert not out2.exists()
    # the refused run changed nothing
    assert json.loads(ledger.read_text("utf-8")) == saved
    rec = json.loads((out1 / "release.json").read_text("utf-8"))
    assert rec["ledger"]["spent"] == pytest.approx(0.6)

    # what is left can still be spent
    out3 = tmp_path / "out3"
    assert main(release_args(points_csv, out3, epsilon="0.4", extra=extra)) == 0
    assert json.loads(ledger.read_text("utf-8"))["spent"] == pytest.approx(1.0)


def test_ledger_without_cap_refuses_over_cap(tmp_path: Path, points_csv: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    line = assert_user_error(
        main(release_args(points_csv, out, epsilon="0.6", extra=["--budget-cap", "0.5"])), capsys
    )
    assert "0.5" in line
    assert not out.exists()


def test_corrupt_ledger_file(tmp_path: Path, points_csv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = tmp_path / "budget.json"
    ledger.write_text("{not json", "utf-8")
    out = tmp_path / "out"
    assert_user_error(main(release_args(points_csv, out, extra=["--ledger", str(ledger)])), capsys)
    assert not out.exists()


# ---------------------------------------------------------------------------------------------
# release hierarchy
# ---------------------------------------------------------------------------------------------

HIER_LEVELS = "STATEFP,COUNTYFP,TRACTCE"
US_TRACTS = REPO.parent / "shared" / "data" / "census" / "us_tract_population_2020_cenpop.csv.gz"


def write_tracts(path: Path, seed: int = 0) -> Path:
    """3 states × 2–4 counties (codes 001, 003, … repeat across states) × 1–5 tracts, some empty."""
    rng = np.random.default_rng(seed)
    lines = ["STATEFP,COUNTYFP,TRACTCE,POPULATION,H1,H2,H3"]
    for s in ("01", "02", "06"):
        for c in range(int(rng.integers(2, 5))):
            for t in range(int(rng.integers(1, 6))):
                pop = 0 if rng.random() < 0.2 else int(rng.poisson(300))
                h = rng.poisson([20, 15, 5])
                lines.append(f"{s},{2 * c + 1:03d},{(t + 1) * 100:06d},{pop},{h[0]},{h[1]},{h[2]}")
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


def hier_args(inp: Path, out: Path, *extra: str, mechanism: str = "exact", budget_flag: str = "--epsilon=1",
              count: str = "POPULATION") -> list[str]:
    return ["release", "hierarchy", "--input", str(inp), "--levels", HIER_LEVELS, "--count", count,
            "--mechanism", mechanism, budget_flag, "--input-lists-all-areas", "--out", str(out), *extra]


def read_release(out: Path) -> list[dict[str, str]]:
    with open(out / "release.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def assert_levels_add_up(rows: list[dict[str, str]], levels: list[str]) -> None:
    value = {(r["level"], r["code"]): int(r["noisy_count"]) for r in rows}
    for parent_level, level in zip(levels, levels[1:], strict=False):
        sums: dict[str, int] = {}
        for r in rows:
            if r["level"] == level:
                sums[r["parent"]] = sums.get(r["parent"], 0) + int(r["noisy_count"])
        parents = {code: v for (lv, code), v in value.items() if lv == parent_level}
        assert sums == parents, (level, sums, parents)


@pytest.fixture
def tracts_csv(tmp_path: Path) -> Path:
    return write_tracts(tmp_path / "tracts_confidential.csv")


def test_hierarchy_exact_release(tmp_path: Path, tracts_csv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dpcore.areas.export import validate_hierarchy_record

    out = tmp_path / "out"
    assert main(hier_args(tracts_csv, out)) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    assert "Released 1 total, 3 STATEFP" in captured.out and captured.err == ""
    assert sorted(p.name for p in out.iterdir()) == ["deployment.yaml", "design.json", "estimates.csv",
                                                     "measurements.csv", "release.csv", "release.json",
                                                     "replicates.csv", "review.html"]
    rows = read_release(out)
    assert list(rows[0]) == ["level", "code", "parent", "noisy_count", "noise_sd", "ci95_low", "ci95_high"]
    src = list(csv.DictReader(tracts_csv.open(encoding="utf-8")))
    n_counties = len({(r["STATEFP"], r["COUNTYFP"]) for r in src})
    assert len(rows) == 1 + 3 + n_counties + len(src)
    assert {k: rows[0][k] for k in ("level", "code", "parent")} == {"level": "total", "code": "total", "parent": ""}
    # the exact DP publishes no interval (its projection biases the values): the columns stay, empty
    assert all(r["ci95_low"] == r["ci95_high"] == "" and float(r["noise_sd"]) >= 0 for r in rows)
    assert [r["code"] for r in rows[1:4]] == ["01", "02", "06"]
    assert rows[4]["code"] == "01/001" and rows[4]["parent"] == "01"
    assert all(int(r["noisy_count"]) >= 0 for r in rows)
    assert_levels_add_up(rows, ["total", "STATEFP", "COUNTYFP", "TRACTCE"])
    true = [int(r["POPULATION"]) for r in src]
    released = [int(r["noisy_count"]) for r in rows if r["level"] == "TRACTCE"]
    assert released != true
    text = (out / "release.json").read_text("utf-8")
    rec = json.loads(text)
    validate_hierarchy_record(rec)
    assert "tracts_confidential" not in text
    assert rec["mechanism"]["name"] == "exact"
    assert rec["privacy"]["cost"]["definition"] == "pure" and rec["privacy"]["cost"]["value"] == 1.0
    assert rec["hierarchy"]["area_list_source"] == "table (confirmed public)"
    assert rec["hierarchy"]["code_modes"] == ["-", "global", "within_parent", "within_parent"]
    assert [lv["share"] for lv in rec["budget"]["levels"]] == pytest.approx([0.25] * 4)


def test_hierarchy_rho_release_with_replace_neighbours(tmp_path: Path, tracts_csv: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    rc = main(hier_args(tracts_csv, out, "--neighbour", "replace", mechanism="topdown_l2",
                        budget_flag="--rho=0.5"))
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "ρ = 0.5" in captured.out and "δ = 1e-06" in captured.out
    rec = json.loads((out / "release.json").read_text("utf-8"))
    assert rec["privacy"]["definition"] == "rho-zCDP" and rec["privacy"]["noise"] == "discrete Gaussian"
    levels = rec["budget"]["levels"]
    assert [lv["measured"] for lv in levels] == [False, True, True, True]
    assert [lv["share"] for lv in levels] == pytest.approx([0, 0.5 / 3, 0.5 / 3, 0.5 / 3])
    # replace: σ = √2/√(2ρ_l)
    assert levels[1]["scale"] == pytest.approx(np.sqrt(2) / np.sqrt(2 * 0.5 / 3))
    rows = read_release(out)
    total = sum(int(r["POPULATION"]) for r in csv.DictReader(tracts_csv.open(encoding="utf-8")))
    assert int(rows[0]["noisy_count"]) == total == rec["privacy"]["invariants"]["total"]
    assert_levels_add_up(rows, ["total", "STATEFP", "COUNTYFP", "TRACTCE"])


def test_hierarchy_custom_split_weights(tmp_path: Path, tracts_csv: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(hier_args(tracts_csv, out, "--split", "1,1,2,4", budget_flag="--epsilon=0.8")) == 0
    rec = json.loads((out / "release.json").read_text("utf-8"))
    assert rec["budget"]["split"] == "custom" and rec["budget"]["split_weights"] == [1, 1, 2, 4]
    assert [lv["share"] for lv in rec["budget"]["levels"]] == pytest.approx([0.1, 0.1, 0.2, 0.4])
    assert [lv["scale"] for lv in rec["budget"]["levels"]] == pytest.approx([10, 10, 5, 2.5])
    capsys.readouterr()
    # four weights for three measured levels (replace: the total is not measured)
    out2 = tmp_path / "out2"
    line = assert_user_error(main(hier_args(tracts_csv, out2, "--split", "1,1,2,4", "--neighbour", "replace")),
                             capsys)
    assert "3 weights" in line
    assert not out2.exists()


def test_hierarchy_group_sizes_from_several_count_columns(tmp_path: Path, tracts_csv: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(hier_args(tracts_csv, out, mechanism="dpc_approx", count="H1,H2,H3")) == 0, capsys.readouterr().err
    rows = read_release(out)
    assert list(rows[0]) == ["level", "code", "parent", "size", "noisy_count", "noise_sd", "ci95_low", "ci95_high"]
    src = list(csv.DictReader(tracts_csv.open(encoding="utf-8")))
    n = sum(int(r[c]) for r in src for c in ("H1", "H2", "H3"))
    assert sum(int(r["noisy_count"]) for r in rows if r["level"] == "total") == n
    for size in ("H1", "H2", "H3"):
        assert_levels_add_up([r for r in rows if r["size"] == size], ["total", "STATEFP", "COUNTYFP", "TRACTCE"])
    rec = json.loads((out / "release.json").read_text("utf-8"))
    assert rec["privacy"]["invariants"] == {"groups_N": n}


def test_hierarchy_boundaries_write_level_geojson(tmp_path: Path, tracts_csv: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import geopandas
    from shapely.geometry import box

    src = list(csv.DictReader(tracts_csv.open(encoding="utf-8")))
    geoids = sorted({r["STATEFP"] + r["COUNTYFP"] for r in src})
    feats = geopandas.GeoDataFrame({"GEOID": geoids[1:] + ["99001"]},
                                   geometry=[box(i, 0, i + 1, 1) for i in range(len(geoids))], crs="EPSG:4326")
    bfile = tmp_path / "counties.geojson"
    bfile.write_text(feats.to_json(), "utf-8")
    out = tmp_path / "out"
    rc = main(hier_args(tracts_csv, out, "--boundaries", f"COUNTYFP={bfile}"))
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    # the unmatched county and the extra feature are reported
    assert "01/001" in captured.err and "99001" in captured.err
    assert sorted(p.name for p in out.iterdir()) == ["COUNTYFP.geojson", "deployment.yaml", "design.json",
                                                     "estimates.csv", "measurements.csv", "release.csv",
                                                     "release.json", "replicates.csv", "review.html"]
    gj = json.loads((out / "COUNTYFP.geojson").read_text("utf-8"))
    assert len(gj["features"]) == len(geoids) - 1
    rows = {r["code"]: int(r["noisy_count"]) for r in read_release(out) if r["level"] == "COUNTYFP"}
    for f in gj["features"]:
        p = f["properties"]
        assert p["level"] == "COUNTYFP" and p["noisy_count"] == rows[p["code"]]
    rec = json.loads((out / "release.json").read_text("utf-8"))
    assert "COUNTYFP.geojson" in rec["outputs"]["files"]
    assert str(bfile.name) not in json.dumps(rec)


def test_hierarchy_person_rows_need_a_public_area_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    people = tmp_path / "people.csv"
    people.write_text("STATEFP,COUNTYFP\n01,001\n01,001\n02,003\n", "utf-8")
    out = tmp_path / "out"
    base = ["release", "hierarchy", "--input", str(people), "--levels", "STATEFP,COUNTYFP", "--epsilon", "1",
            "--out", str(out)]
    line = assert_user_error(main(base), capsys)
    assert "--areas" in line and "per person" in line
    assert not out.exists()
    # confirming that person rows list every area does not make them a public list (the app's rule too)
    line = assert_user_error(main([*base, "--input-lists-all-areas"]), capsys)
    assert "--areas" in line and "cannot list every area" in line
    areas = tmp_path / "areas.csv"
    areas.write_text("STATEFP,COUNTYFP\n01,001\n01,003\n02,001\n02,003\n", "utf-8")
    assert main([*base, "--areas", str(areas), "--mechanism", "independent"]) == 0, capsys.readouterr().err
    rows = read_release(out)
    assert [r["code"] for r in rows] == ["total", "01", "02", "01/001", "01/003", "02/001", "02/003"]
    rec = json.loads((out / "release.json").read_text("utf-8"))
    assert rec["hierarchy"]["area_list_source"] == "area list"
    # a person in an area that is not in the public list is refused
    people.write_text("STATEFP,COUNTYFP\n01,001\n06,001\n", "utf-8")
    line = assert_user_error(main([*base, "--areas", str(areas)]), capsys)
    assert "not in the public area list" in line and "06 / 001" in line


@pytest.mark.parametrize(("extra", "needle"), [
    (["--split", "fast"], "--split"),
    (["--split", "1,x"], "--split"),
    (["--mechanism", "privelet"], "Unknown hierarchy mechanism"),
    (["--boundaries", "BLOCK=x.geojson"], "BLOCK"),
    (["--epsilon=abc"], "--epsilon"),
    (["--mechanism", "dpc_approx"], "group-size"),
    (["--levels", "COUNTYFP,STATEFP2"], "STATEFP2"),
])
def test_hierarchy_user_errors(tmp_path: Path, tracts_csv: Path, capsys: pytest.CaptureFixture[str],
                               extra: list[str], needle: str) -> None:
    out = tmp_path / "out"
    args = hier_args(tracts_csv, out)
    if extra[0].startswith("--epsilon"):
        args = [a for a in args if not a.startswith("--epsilon")] + extra
    else:
        args = args + extra
    line = assert_user_error(main(args), capsys)
    assert needle in line
    assert not out.exists()


def test_hierarchy_without_confirmation_warns_that_the_area_list_is_not_public(
        tmp_path: Path, tracts_csv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    args = [a for a in hier_args(tracts_csv, out) if a != "--input-lists-all-areas"]
    assert main(args) == 0
    assert "warning" in capsys.readouterr().err
    rec = json.loads((out / "release.json").read_text("utf-8"))
    assert rec["hierarchy"]["area_list_source"] == "data (not public)"
    assert any("WARNING" in n for n in rec["notes"])


def test_hierarchy_ledger_accumulates_and_refuses(tmp_path: Path, tracts_csv: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    ledger = tmp_path / "budget.json"
    extra = ["--budget-cap", "1", "--ledger", str(ledger)]
    assert main(hier_args(tracts_csv, tmp_path / "o1", *extra, budget_flag="--epsilon=0.6")) == 0
    saved = json.loads(ledger.read_text("utf-8"))
    assert saved["spent"] == pytest.approx(0.6)
    assert saved["entries"][0]["details"]["kind"] == "hierarchy"
    capsys.readouterr()
    line = assert_user_error(main(hier_args(tracts_csv, tmp_path / "o2", *extra, mechanism="hay",
                                            budget_flag="--epsilon=0.6")), capsys)
    assert "0.4" in line
    assert not (tmp_path / "o2").exists()
    assert json.loads(ledger.read_text("utf-8")) == saved
    # a ρ release cannot be charged to this pure ε ledger
    assert_user_error(main(hier_args(tracts_csv, tmp_path / "o3", *extra, budget_flag="--rho=0.01")), capsys)
    assert not (tmp_path / "o3").exists()
    assert main(hier_args(tracts_csv, tmp_path / "o4", *extra, mechanism="bottom_up",
                          budget_flag="--epsilon=0.4")) == 0
    saved = json.loads(ledger.read_text("utf-8"))
    assert saved["spent"] == pytest.approx(1.0) and len(saved["entries"]) == 2
    rec = json.loads((tmp_path / "o4" / "release.json").read_text("utf-8"))
    assert rec["ledger"]["spent"] == pytest.approx(1.0)


@pytest.mark.skipif(not US_TRACTS.exists(), reason="shared US tract file not available")
def test_hierarchy_us_tracts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    rc = main(["release", "hierarchy", "--input", str(US_TRACTS), "--levels", HIER_LEVELS,
               "--count", "POPULATION", "--mechanism", "exact", "--epsilon", "1", "--input-lists-all-areas",
               "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    import pandas as pd

    df = pd.read_csv(out / "release.csv", dtype={"level": str, "code": str, "parent": str},
                     keep_default_na=False)
    assert list(df.columns) == ["level", "code", "parent", "noisy_count", "noise_sd", "ci95_low", "ci95_high"]
    assert df["level"].value_counts().to_dict() == {"total": 1, "STATEFP": 52, "COUNTYFP": 3221,
                                                     "TRACTCE": 85395}
    assert len(df) == 1 + 52 + 3221 + 85395
    assert df["noisy_count"].dtype == np.int64 and (df["noisy_count"] >= 0).all()
    for level, parent_level in (("STATEFP", "total"), ("COUNTYFP", "STATEFP"), ("TRACTCE", "COUNTYFP")):
        sums = df[df["level"] == level].groupby("parent")["noisy_count"].sum()
        parents = df[df["level"] == parent_level].set_index("code")["noisy_count"]
        assert sums.sort_index().equals(parents.sort_index()), level
    # the root's error SD is about 5.4 (ε = 1 over four levels): the noisy total is close to the truth
    total = int(pd.read_csv(US_TRACTS, usecols=["POPULATION"])["POPULATION"].sum())
    assert total == 334_735_155  # 50 states, DC and Puerto Rico
    assert df.loc[0, "level"] == "total" and abs(int(df.loc[0, "noisy_count"]) - total) < 100
    assert int(df.loc[0, "noisy_count"]) == int(df.loc[df["level"] == "TRACTCE", "noisy_count"].sum())
