"""``release points --coordinate-precision DEG`` (issue 25): the curator states the points' coordinate
precision, a public fact of the data's format; the record and design.json state it, and the data users'
polygon intervals use it by default (``interval --precision`` still overrides)."""

from __future__ import annotations

import json
from pathlib import Path

import geopandas
import pytest
import shapely

from dpcore.cli import build_parser, main
from dpcore.core.record import validate_record
from dpcore.core.spec import ReleaseSpec, points_config
from dpcore.errors import ParameterError
from dpcore.estimate.data_user_format import coordinate_precision
from dpcore.estimate.release_interval import ReleaseIntervals

BOUNDS = "0,0,0.4,0.4"


@pytest.fixture
def points(tmp_path: Path) -> Path:
    """Points on the 0.01° lattice (coordinates with 2 decimals), a public fixed pattern."""
    rows = ["lat,lon"] + [f"{(i * 7 % 40) / 100:.2f},{(i * 13 % 40) / 100:.2f}" for i in range(400)]
    path = tmp_path / "pts.csv"
    path.write_text("\n".join(rows) + "\n", "utf-8")
    return path


def _release(points: Path, out: Path, *extra: str) -> int:
    return main(["release", "points", "--input", str(points), f"--bounds={BOUNDS}", "--grid", "4,4",
                 "--mechanism", "identity", "--epsilon=1", "--no-budget", "--out", str(out), *extra])


def _interval(capsys: pytest.CaptureFixture[str], out: Path, poly: Path, *extra: str) -> dict:
    capsys.readouterr()
    assert main(["interval", "--release", str(out), "--polygon", str(poly), "--json", "--apportionment", "none",
                 *extra]) == 0
    return json.loads(capsys.readouterr().out)[0]


def test_the_flag_is_recorded_and_is_the_intervals_default(points: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    stated, plain = tmp_path / "stated", tmp_path / "plain"
    assert _release(points, stated, "--coordinate-precision", "0.01") == 0
    assert _release(points, plain) == 0
    rec = json.loads((stated / "release.json").read_text("utf-8"))
    validate_record(rec)
    assert rec["data_users"]["coordinate_precision"]["degrees"] == 0.01
    assert "not read from the data" in rec["data_users"]["coordinate_precision"]["source"]
    assert json.loads((stated / "design.json").read_text("utf-8"))["coordinate_precision"] == 0.01
    # without the flag: nothing recorded, as before
    assert "coordinate_precision" not in json.loads((plain / "release.json").read_text("utf-8"))["data_users"]
    assert "coordinate_precision" not in json.loads((plain / "design.json").read_text("utf-8"))
    # a box to x = 0.135: a cell 0.1 wide holds 10 lattice columns; the box keeps 4 of the cut ones (share 0.4),
    # while its area share is 0.35
    poly = tmp_path / "box.geojson"
    poly.write_text(geopandas.GeoDataFrame(geometry=[shapely.box(-1, -1, 0.135, 1)], crs="EPSG:4326").to_json(),
                    "utf-8")
    default = _interval(capsys, stated, poly)
    assert default["weighting"] == "lattice shares at precision 0.01° (the release's recorded coordinate precision)"
    assert default["precision"] == 0.01
    given = _interval(capsys, stated, poly, "--precision", "0.01")
    assert given["estimate"] == pytest.approx(default["estimate"]) and given["weighting"].endswith("(as given)")
    area = _interval(capsys, plain, poly)
    assert area["weighting"] == "area shares" and area["precision"] is None
    assert ReleaseIntervals({n: (plain / n).read_bytes() for n in ("design.json", "measurements.csv")}).of_polygons(
        poly.read_bytes(), apportionment="none")[0]["estimate"] == pytest.approx(area["estimate"])
    # the same box by hand from the stated release's estimates: column 0 whole, column 1 at 0.4 (lattice)
    ri = ReleaseIntervals({n: (stated / n).read_bytes() for n in ("design.json", "measurements.csv")})
    cells = ri.design["cell_bounds"]
    first = sum(e for e, b in zip(ri.estimate, cells, strict=True) if b[2] <= 0.1 + 1e-9)
    second = sum(e for e, b in zip(ri.estimate, cells, strict=True) if 0.1 - 1e-9 <= b[0] < 0.2 - 1e-9)
    assert default["estimate"] == pytest.approx(first + 0.4 * second)
    assert ri.of_polygons(poly.read_bytes(), apportionment="none", precision=None)[0]["estimate"] == \
        pytest.approx(first + 0.4 * second)


def test_an_explicit_precision_overrides_the_recorded_one(points: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert _release(points, out, "--coordinate-precision=0.01") == 0
    poly = tmp_path / "box.geojson"
    poly.write_text(geopandas.GeoDataFrame(geometry=[shapely.box(-1, -1, 0.135, 1)], crs="EPSG:4326").to_json(),
                    "utf-8")
    over = _interval(capsys, out, poly, "--precision", "0.05")
    assert over["precision"] == 0.05 and over["weighting"] == "lattice shares at precision 0.05° (as given)"
    default = _interval(capsys, out, poly)
    # at 0.05 the cut column keeps 1 of its 2 lattice columns (share 0.5), at the recorded 0.01 4 of 10 (0.4)
    assert over["estimate"] != pytest.approx(default["estimate"])
    ri = ReleaseIntervals({n: (out / n).read_bytes() for n in ("design.json", "measurements.csv")})
    assert ri.of_polygons(poly.read_bytes(), apportionment="none", precision=0.05)[0]["estimate"] == \
        pytest.approx(over["estimate"])


@pytest.mark.parametrize("bad", ["0", "-0.001", "abc", "nan", "inf"])
def test_bad_values_are_refused_before_any_data_is_read(points: Path, tmp_path: Path, bad: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert _release(points, out, f"--coordinate-precision={bad}") == 2
    err = capsys.readouterr().err
    assert "--coordinate-precision must be a positive number of degrees" in err and "Traceback" not in err
    assert not out.exists()
    with pytest.raises(ParameterError, match="positive number of degrees"):
        coordinate_precision(bad)


def test_the_spec_round_trips(tmp_path: Path) -> None:
    argv = ["--input", "p.csv", f"--bounds={BOUNDS}", "--mechanism", "ug", "--epsilon=1", "--out", "o",
            "--coordinate-precision", "0.0001"]
    spec = ReleaseSpec.from_args("points", build_parser().parse_args(["release", "points", *argv]))
    assert spec.domain["coordinate_precision"] == 0.0001
    assert "--coordinate-precision=0.0001" in spec.to_argv()
    assert ReleaseSpec.from_toml(spec.to_toml()) == spec
    assert "coordinate_precision = 0.0001" in spec.to_toml()
    app = points_config(input_path="p.csv", lat="lat", lon="lon", user=None, user_cap=None, bounds=(0, 0, 1, 1),
                        grid=(4, 4), mechanism="ug", params={}, definition="pure", value=1.0,
                        coordinate_precision=0.0001)
    assert ReleaseSpec.from_toml(app.to_toml()) == app and "--coordinate-precision=0.0001" in app.to_argv()


def test_a_release_over_time_refuses_it_plainly(points: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Not yet recorded for series: said, not silently dropped."""
    out = tmp_path / "out"
    assert _release(points, out, "--coordinate-precision=0.01", "--time-col", "t", "--period", "day",
                    "--time-range", "2014-04-01,2014-04-02") == 2
    assert "not yet recorded for a release over time" in capsys.readouterr().err and not out.exists()
