"""Stderr of the command line carries no true number of the data unless its line is marked
curator-only (dpcore.errors.CURATOR_ONLY): pipeline logs are read by more people than the curator
(UX.md: curator-only views carry a visible "not for publication" marker; DESIGN.md rules 1 and 5).

Each run below has inputs that make the CLI drop, clip or refuse rows; every progress line is
printed (``LOG_EVERY_SECONDS = 0``). The true numbers of each input (rows read, rows dropped, rows
outside the bounds, rows kept, the file's bytes) are chosen above 100, so that no percentage, level,
grid side or second of these runs spells one by chance; every number in an unmarked line is
compared with them."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcore.cli import common as cli_common
from dpcore.cli import main
from dpcore.errors import CURATOR_ONLY, StorageError, curator_only
from dpcore.privacy.ledger_store import LedgerStore

N, MISSING, OUTSIDE = 1237, 113, 129  # rows read, rows without a coordinate, rows outside the bounds
BOUNDS = "--bounds=-74.06,40.56,-73.70,40.92"


@pytest.fixture(autouse=True)
def every_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_common, "LOG_EVERY_SECONDS", 0.0)


def _numbers(line: str) -> set[int]:
    return {int(t.replace(",", "")) for t in re.findall(r"\d[\d,]*\d|\d", line)}


#: how a marked line starts: the marker at its front, where a reader (or a log filter) sees it
MARKED_FRONTS = (CURATOR_ONLY, "error: " + CURATOR_ONLY, "warning: " + CURATOR_ONLY)


def check_stderr(err: str, tmp: Path, counts: set[int]) -> list[str]:
    """The marked lines of ``err`` (:data:`MARKED_FRONTS`); every other line, a marker in its middle
    included, holds none of ``counts`` and no size."""
    counts = {c for c in counts if c > 100}  # (none of them is below: see the module's docstring)
    marked = []
    for line in err.replace(str(tmp), "<tmp>").splitlines():
        if line.startswith(MARKED_FRONTS):
            marked.append(line)
            continue
        assert not _numbers(line) & counts, line
        assert not re.search(r"\d\s*(bytes|kB|MB|GB)\b", line), line
    return marked


def test_the_check_wants_the_marker_at_the_front(tmp_path: Path) -> None:
    line = f"{CURATOR_ONLY}1237 rows read"
    for front in ("", "error: ", "warning: "):
        assert check_stderr(front + line, tmp_path, {1237}) == [front + line]
    for late in (f"warning: not kept ({line})", f"info: {line}", f" {line}"):
        with pytest.raises(AssertionError):
            check_stderr(late, tmp_path, {1237})


def _points(path: Path) -> set[int]:
    """N rows: MISSING without a latitude, OUTSIDE outside the bounds (dropped by the grid)."""
    rng = np.random.default_rng(7)
    lat, lon = rng.uniform(40.6, 40.9, N), rng.uniform(-74.0, -73.75, N)
    lon[MISSING:MISSING + OUTSIDE] = rng.uniform(-75.0, -74.5, OUTSIDE)
    rows = [("" if i < MISSING else f"{a:.6f}") + f",{o:.6f}\n" for i, (a, o) in enumerate(zip(lat, lon, strict=True))]
    path.write_text("lat,lon\n" + "".join(rows), "utf-8")
    return {N, MISSING, OUTSIDE, N - MISSING, N - MISSING - OUTSIDE, path.stat().st_size}


@pytest.mark.parametrize(("engine", "folder"), [("numpy", False), ("numpy", True), ("duckdb", False)])
def test_points_with_dropped_and_clipped_rows(tmp_path: Path, engine: str, folder: bool,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A folder goes through the numpy engine, whose reader reports its progress (it said bytes read)."""
    (tmp_path / "in").mkdir()
    counts = _points(tmp_path / "in" / "p.csv")
    rc = main(["release", "points", "--input", str(tmp_path / "in" / ("" if folder else "p.csv")), BOUNDS, "--grid",
               "8,8", "--mechanism", "identity", "--epsilon", "1", "--no-budget", "--engine", engine,
               "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert (engine, folder) == ("numpy", False) or "Counted the rows" in err  # progress lines were printed
    check_stderr(err, tmp_path, counts)


def test_points_refused_for_values_out_of_range(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bad file's error names the rows (the curator must fix them): marked."""
    counts = _points(tmp_path / "p.csv")
    text = (tmp_path / "p.csv").read_text("utf-8").splitlines()
    text[200] = "123.5," + text[200].split(",")[1]  # data row 200: latitude above 90
    (tmp_path / "p.csv").write_text("\n".join(text) + "\n", "utf-8")
    rc = main(["release", "points", "--input", str(tmp_path / "p.csv"), BOUNDS, "--grid", "8,8", "--mechanism",
               "identity", "--epsilon", "1", "--no-budget", "--engine", "numpy", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2
    [line] = check_stderr(err, tmp_path, counts | {200})
    assert line.startswith("error: " + CURATOR_ONLY) and "data row 200" in line


def _persons(tmp: Path, unknown: int) -> tuple[Path, Path, set[int]]:
    """N person rows over two states' tracts, ``unknown`` of them in a tract the area list lacks."""
    rng = np.random.default_rng(8)
    s, c = rng.choice(["01", "02"], N), rng.choice(["001", "003"], N)
    t = rng.choice(["000100", "000200"], N).astype(object)
    t[:unknown] = "000900"
    (tmp / "persons.csv").write_text("STATEFP,COUNTYFP,TRACTCE\n" + "".join(
        f"{a},{b},{d}\n" for a, b, d in zip(s, c, t, strict=True)), "utf-8")
    (tmp / "areas.csv").write_text("STATEFP,COUNTYFP,TRACTCE\n" + "".join(
        f"{a},{b},{d}\n" for a in ("01", "02") for b in ("001", "003") for d in ("000100", "000200")), "utf-8")
    return tmp / "persons.csv", tmp / "areas.csv", {N, unknown, N - unknown, (tmp / "persons.csv").stat().st_size}


@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
def test_hierarchy_of_person_rows(tmp_path: Path, engine: str, capsys: pytest.CaptureFixture[str]) -> None:
    persons, areas, counts = _persons(tmp_path, 0)
    args = ["release", "hierarchy", "--input", str(persons), "--areas", str(areas), "--levels",
            "STATEFP,COUNTYFP,TRACTCE", "--mechanism", "exact", "--epsilon=1", "--no-budget", "--engine", engine,
            "--out", str(tmp_path / "out")]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "Reading the codes of" in err  # progress lines were printed
    check_stderr(err, tmp_path, counts)
    # rows in areas the list lacks: refused, their number and rows marked
    persons, areas, counts = _persons(tmp_path, 117)
    assert main(args) == 2
    err = capsys.readouterr().err
    [line] = check_stderr(err, tmp_path, counts)
    assert line.startswith("error: " + CURATOR_ONLY), line


def test_census_table_with_a_blank_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Counts per area, the areas from the table itself: a blank code is refused, marked."""
    rows = [f"01,{c:03d},{100 + c}\n" for c in range(1, 140)]
    rows[130] = f"01,  ,{231}\n"
    (tmp_path / "t.csv").write_text("state,county,pop\n" + "".join(rows), "utf-8")
    rc = main(["release", "hierarchy", "--input", str(tmp_path / "t.csv"), "--levels", "state,county", "--count",
               "pop", "--mechanism", "exact", "--epsilon=1", "--no-budget", "--engine", "numpy",
               "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2
    [line] = check_stderr(err, tmp_path, {139, 131, (tmp_path / "t.csv").stat().st_size})
    assert line.startswith("error: " + CURATOR_ONLY) and "data row 131" in line


@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
def test_od_with_unmatched_trips_dropped(tmp_path: Path, engine: str, capsys: pytest.CaptureFixture[str]) -> None:
    zones = [f"{r:02d}{d:02d}" for r in (1, 2) for d in (1, 2, 3)]
    (tmp_path / "areas.csv").write_text("region,zone\n" + "".join(f"{z[:2]},{z}\n" for z in zones), "utf-8")
    rng = np.random.default_rng(9)
    o, d = rng.choice(zones, N).astype(object), rng.choice(zones, N).astype(object)
    o[:MISSING] = "9999"  # not a finest area
    (tmp_path / "trips.csv").write_text("origin,destination\n" + "".join(
        f"{a},{b}\n" for a, b in zip(o, d, strict=True)), "utf-8")
    counts = {N, MISSING, N - MISSING, (tmp_path / "trips.csv").stat().st_size}
    rc = main(["release", "od", "--input", str(tmp_path / "trips.csv"), "--hierarchy", str(tmp_path / "areas.csv"),
               "--levels", "region,zone", "--rho", "0.5", "--drop-unmatched", "--no-budget", "--engine", engine,
               "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 0, err
    [line] = check_stderr(err, tmp_path, counts)
    assert line.startswith(CURATOR_ONLY + "Dropped 113 ") and "not in the export" in line


@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
def test_a_row_wider_than_the_header_far_down_the_file(tmp_path: Path, engine: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The CSV parser's row number (beyond the sample the header check reads; DuckDB's own text
    names the file's line) is marked too."""
    counts = _points(tmp_path / "p.csv")
    text = (tmp_path / "p.csv").read_text("utf-8").splitlines()
    text[1150] += ",7"  # data row 1150: one value more than the header names
    (tmp_path / "p.csv").write_text("\n".join(text) + "\n", "utf-8")
    rc = main(["release", "points", "--input", str(tmp_path / "p.csv"), BOUNDS, "--grid", "8,8", "--mechanism",
               "identity", "--epsilon", "1", "--no-budget", "--engine", engine, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2, err
    marked = check_stderr(err, tmp_path, counts | {1150, 1151, 1152})
    assert engine == "duckdb" or (len(marked) == 1 and "data row 1150" in marked[0]), err
    assert all(m.startswith("error: " + CURATOR_ONLY) for m in marked), marked


def test_census_table_with_missing_ordinal_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``release census``: counts per area and age band; rows without a band are refused, marked;
    with every band given, the release's stderr (warnings: areas and bins from the data) holds no number."""
    rows = [f"01,{c:03d},{b},{100 + c}\n" for c in range(1, 60) for b in ("0-17", "18-64", "65+")]
    (tmp_path / "t.csv").write_text("state,county,age,pop\n" + "".join(rows), "utf-8")
    argv = ["release", "census", "--input", str(tmp_path / "t.csv"), "--levels", "state,county", "--count", "pop",
            "--ordinal", "age", "--epsilon", "1", "--no-budget", "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    check_stderr(capsys.readouterr().err, tmp_path, {len(rows), 59, (tmp_path / "t.csv").stat().st_size})
    rows[140] = "01,047,,147\n"
    (tmp_path / "t.csv").write_text("state,county,age,pop\n" + "".join(rows), "utf-8")
    assert main(argv) == 2
    size = (tmp_path / "t.csv").stat().st_size
    [line] = check_stderr(capsys.readouterr().err, tmp_path, {len(rows), 141, 142, size})  # (census numbers file lines)
    assert line.startswith("error: " + CURATOR_ONLY) and "missing value" in line, line


def test_an_unclosed_quote_on_the_last_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """pandas' other parser errors name a row too: an unclosed quote on the last row reads "EOF inside
    string starting at row 1237", the number of rows. Marked."""
    counts = _points(tmp_path / "p.csv")
    text = (tmp_path / "p.csv").read_text("utf-8").splitlines()
    text[-1] = '"' + text[-1]
    (tmp_path / "p.csv").write_text("\n".join(text) + "\n", "utf-8")
    rc = main(["release", "points", "--input", str(tmp_path / "p.csv"), BOUNDS, "--grid", "8,8", "--mechanism",
               "identity", "--epsilon", "1", "--no-budget", "--engine", "numpy", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2, err
    [line] = check_stderr(err, tmp_path, counts | {(tmp_path / "p.csv").stat().st_size})
    assert line.startswith("error: " + CURATOR_ONLY) and "EOF inside string" in line, line


def test_a_truncated_parquet_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """pyarrow's error names the cut file's size ("Parquet file size is 1008 bytes"): marked."""
    rng = np.random.default_rng(10)
    pd.DataFrame({"lat": rng.uniform(40.6, 40.9, N), "lon": rng.uniform(-74.0, -73.75, N)}).to_parquet(
        tmp_path / "whole.parquet")
    whole = (tmp_path / "whole.parquet").read_bytes()
    (tmp_path / "p.parquet").write_bytes(whole[:1000] + whole[-8:])  # the footer's length, its data cut away
    rc = main(["release", "points", "--input", str(tmp_path / "p.parquet"), BOUNDS, "--grid", "8,8", "--mechanism",
               "identity", "--epsilon", "1", "--no-budget", "--engine", "numpy", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2, err
    [line] = check_stderr(err, tmp_path, {N, 1008, len(whole)})
    assert line.startswith("error: " + CURATOR_ONLY) and "Parquet" in line, line


def test_a_release_not_kept_for_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The budget database refuses to keep a charged release (here with a marked reason naming a
    size): the files are written and the warning that quotes the reason is marked at its front."""
    counts = _points(tmp_path / "p.csv")

    def refused(*args: object, **kwargs: object) -> None:
        raise StorageError(curator_only("the files are 24,968 bytes, more than the database keeps"))

    monkeypatch.setattr(LedgerStore, "record_release", refused)
    rc = main(["release", "points", "--input", str(tmp_path / "p.csv"), BOUNDS, "--grid", "8,8", "--mechanism",
               "identity", "--epsilon", "0.25", "--engine", "numpy", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 0, err
    [line] = check_stderr(err, tmp_path, counts | {24968})
    assert line.startswith("warning: " + CURATOR_ONLY) and "History" in line, line


def test_a_broken_points_geojson(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The JSON parser's line and column in a file of one feature a line tell its length (line 1,502
    of 1,500 features): marked."""
    feats = [f'{{"type": "Feature", "properties": {{}}, "geometry": {{"type": "Point", "coordinates": '
             f'[-73.9, 40.{700 + i % 100}]}}}},' for i in range(1500)]
    (tmp_path / "p.geojson").write_text(
        '{"type": "FeatureCollection", "features": [\n' + "\n".join(feats) + "\n]}\n", "utf-8")  # trailing comma
    rc = main(["release", "points", "--input", str(tmp_path / "p.geojson"), BOUNDS, "--grid", "8,8", "--mechanism",
               "identity", "--epsilon", "1", "--no-budget", "--engine", "numpy", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2, err
    [line] = check_stderr(err, tmp_path, {1500, 1501, 1502, (tmp_path / "p.geojson").stat().st_size})
    assert line.startswith("error: " + CURATOR_ONLY) and "GeoJSON" in line, line


def test_a_gzip_that_expands_too_far(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The refusal of a gzip bomb names the compressed file's size (and a limit made from it): marked."""
    import gzip

    (tmp_path / "p.csv.gz").write_bytes(gzip.compress(b"lat,lon\n" + b"40.7,-73.9\n" * 1_100_000))
    rc = main(["release", "points", "--input", str(tmp_path / "p.csv.gz"), BOUNDS, "--grid", "8,8", "--mechanism",
               "identity", "--epsilon", "1", "--no-budget", "--engine", "numpy", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2, err
    [line] = check_stderr(err, tmp_path, {1_100_000, (tmp_path / "p.csv.gz").stat().st_size})
    assert line.startswith("error: " + CURATOR_ONLY) and "expands to more than" in line, line
