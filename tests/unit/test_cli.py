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

from dpcore import mechanisms
from dpcore.cli import main
from dpcore.export import CSV_COLUMNS, validate_record

REPO = Path(__file__).resolve().parents[2]
BOUNDS = "-74.06,40.56,-73.70,40.92"
FILES = ["release.csv", "release.geojson", "release.json"]


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


@pytest.mark.parametrize("mechanism", mechanisms.names())
def test_release_each_mechanism(tmp_path: Path, points_csv: Path, mechanism: str,
                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    rc = main(release_args(points_csv, out, mechanism=mechanism))
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert captured.err == ""
    assert sorted(p.name for p in out.iterdir()) == FILES
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
    for name in mechanisms.names():
        assert f"{name}:" in out
    for p in mechanisms.get("ug").params:
        assert f"--param {p.name}=" in out


def test_mechanisms_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mechanisms", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert sorted(d["name"] for d in data if d["kind"] == "points") == sorted(mechanisms.names())
    hier = {d["name"] for d in data if d["kind"] == "hierarchy"}
    assert {"exact", "topdown_linf", "topdown_l2", "hay", "bottom_up", "independent", "dpc_approx"} == hier
    ug = next(d for d in data if d["name"] == "ug")
    assert {p["name"]: p["default"] for p in ug["params"]} == {"c": 10.0, "count_share": 0.05, "public_n": 0}


def test_python_m_dpcore_mechanisms() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dpcore", "mechanisms"], cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    for name in mechanisms.names():
        assert f"{name}:" in proc.stdout
    assert "Traceback" not in proc.stderr


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
        ({"mechanism": "quad-tree"}, "Unknown mechanism"),
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


def test_unknown_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert_user_error(main(["frobnicate"]), capsys)


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
    assert rec["budget"]["ledger"]["spent"] == pytest.approx(0.6)

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
