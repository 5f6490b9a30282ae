"""Unit tests of dpcore.data.engines: inputs (Source), engine choice, refusals, and tiny hand-computed answers.

Each engine-level test runs on numpy, DuckDB and Spark (the Spark cases are marked ``spark`` and
skip without ``java`` on PATH; they share one local Spark session).  The equivalence of the engines
on random inputs is in tests/property/test_engine_equivalence.py.
"""

from __future__ import annotations

import gzip
import math
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcore.data.domain import Bounds, Grid
from dpcore.data.engines import AUTO_THRESHOLD_BYTES, Source, choose, get_engine
from dpcore.data.engines.base import points_fingerprint
from dpcore.data.engines.common import data_error
from dpcore.data.engines.numpy_engine import code_counts_of_frame
from dpcore.data.persons import CAP_A, CAP_B
from dpcore.errors import CURATOR_ONLY, InputError, ParameterError

SPARK_MASTER = "local[2]"  # = conftest.SPARK_TEST_MASTER: one Spark session per test run


@pytest.fixture(params=["numpy", "duckdb", pytest.param("spark", marks=pytest.mark.spark)])
def engine(request: pytest.FixtureRequest) -> Any:
    if request.param == "spark":
        return request.getfixturevalue("spark_engine")
    return get_engine(request.param)


def write_csv(path: Path, text: str) -> Source:
    path.write_text(textwrap.dedent(text).lstrip())
    return Source.from_path(path)


def write_parquet(path: Path, df: pd.DataFrame) -> Source:
    df.to_parquet(path, index=False)
    return Source.from_path(path)


# ---------------------------------------------------------------------------------------------
# Source.from_path
# ---------------------------------------------------------------------------------------------


def _table() -> pd.DataFrame:
    return pd.DataFrame({"lat": [40.7, 40.8], "lon": [-73.9, -73.8]})


def test_source_single_file(tmp_path: Path) -> None:
    _table().to_csv(tmp_path / "a.csv", index=False)
    src = Source.from_path(tmp_path / "a.csv")
    assert src.paths == (str(tmp_path / "a.csv"),)
    assert src.fmt == "csv"
    assert src.label == str(tmp_path / "a.csv")
    assert src.n_bytes == (tmp_path / "a.csv").stat().st_size

    _table().to_parquet(tmp_path / "b.parquet")
    assert Source.from_path(str(tmp_path / "b.parquet")).fmt == "parquet"
    with gzip.open(tmp_path / "c.csv.gz", "wt") as fh:
        _table().to_csv(fh, index=False)
    assert Source.from_path(tmp_path / "c.csv.gz").fmt == "csv"


def test_source_folder_sorted_and_ignores_other_files(tmp_path: Path) -> None:
    for name in ("part-2.parquet", "part-0.parquet", "part-1.parquet"):
        _table().to_parquet(tmp_path / name)
    (tmp_path / "README.md").write_text("not data")
    (tmp_path / "_SUCCESS").write_text("")
    (tmp_path / "sub").mkdir()
    src = Source.from_path(tmp_path)
    assert src.fmt == "parquet"
    assert [Path(p).name for p in src.paths] == ["part-0.parquet", "part-1.parquet", "part-2.parquet"]
    assert src.n_bytes == sum((tmp_path / f"part-{i}.parquet").stat().st_size for i in range(3))


def test_source_glob_and_list(tmp_path: Path) -> None:
    for name in ("b.csv", "a.csv", "c.txt"):
        _table().to_csv(tmp_path / name, index=False)
    src = Source.from_path(str(tmp_path / "*.csv"))
    assert [Path(p).name for p in src.paths] == ["a.csv", "b.csv"]
    assert src.fmt == "csv"
    lst = Source.from_path([tmp_path / "b.csv", tmp_path / "a.csv"])
    assert [Path(p).name for p in lst.paths] == ["a.csv", "b.csv"]
    with pytest.raises(InputError, match="No file matches"):
        Source.from_path(str(tmp_path / "*.parquet"))


def test_source_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("x")
    with pytest.raises(InputError, match=r"holds no CSV \(\.csv, \.csv\.gz\) or Parquet"):
        Source.from_path(tmp_path)


def test_source_mixed_formats(tmp_path: Path) -> None:
    _table().to_csv(tmp_path / "a.csv", index=False)
    _table().to_parquet(tmp_path / "b.parquet")
    with pytest.raises(InputError, match="mixes CSV and Parquet"):
        Source.from_path(tmp_path)
    with pytest.raises(InputError, match="mixes CSV and Parquet"):
        Source.from_path([tmp_path / "a.csv", tmp_path / "b.parquet"])


def test_source_missing_path(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist. Check the path"):
        Source.from_path(tmp_path / "nope.csv")
    _table().to_csv(tmp_path / "a.csv", index=False)
    with pytest.raises(InputError, match="does not exist"):
        Source.from_path([tmp_path / "a.csv", tmp_path / "gone.csv"])


def test_source_non_data_extension(tmp_path: Path) -> None:
    (tmp_path / "table.xlsx").write_bytes(b"PK\x03\x04")
    with pytest.raises(InputError) as ei:
        Source.from_path(tmp_path / "table.xlsx")
    msg = str(ei.value)
    assert "'table.xlsx' is not a CSV" in msg and "Parquet" in msg and "convert the file" in msg


# ---------------------------------------------------------------------------------------------
# choosing an engine
# ---------------------------------------------------------------------------------------------


def test_choose_auto_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPCORE_AUTO_ENGINE_BYTES", raising=False)
    assert choose(None, 10) == "numpy"
    assert choose("auto", AUTO_THRESHOLD_BYTES) == "numpy"
    assert choose("AUTO", AUTO_THRESHOLD_BYTES + 1) == "duckdb"
    monkeypatch.setenv("DPCORE_AUTO_ENGINE_BYTES", "100")
    assert choose("auto", 100) == "numpy"
    assert choose("auto", 101) == "duckdb"
    assert choose(None, 101) == "duckdb"
    monkeypatch.setenv("DPCORE_AUTO_ENGINE_BYTES", "lots")  # unreadable: the default threshold
    assert choose("auto", 101) == "numpy"
    assert choose("auto", AUTO_THRESHOLD_BYTES + 1) == "duckdb"


def test_choose_explicit_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPCORE_AUTO_ENGINE_BYTES", "1")
    assert choose("numpy", 10**12) == "numpy"
    assert choose("DuckDB", 0) == "duckdb"
    assert choose("spark", 0) == "spark"


def test_unknown_engine_names() -> None:
    with pytest.raises(ParameterError, match=r"Unknown engine 'polars'\. Choose one of: auto, numpy, duckdb, spark"):
        choose("polars", 0)
    with pytest.raises(ParameterError, match=r"Unknown engine 'polars'\. Choose one of: numpy, duckdb, spark"):
        get_engine("polars")


# ---------------------------------------------------------------------------------------------
# refusals, in every engine
# ---------------------------------------------------------------------------------------------

GRID = Grid(Bounds(-74.0, 40.0, -73.0, 41.0), 2, 2)


def test_missing_column_named(engine: Any, tmp_path: Path) -> None:
    src = write_csv(tmp_path / "p.csv", """
        latitude,lon,uid
        40.5,-73.5,a
    """)
    with pytest.raises(InputError) as ei:
        engine.points(src, GRID, lat="lat", lon="lon")
    msg = str(ei.value)
    assert "latitude column 'lat'" in msg and "Its columns are: latitude, lon, uid" in msg
    with pytest.raises(InputError) as ei:
        engine.points(src, GRID, lat="latitude", lon="lon", user="person", user_cap=2)
    assert "user id column 'person'" in str(ei.value) and "latitude, lon, uid" in str(ei.value)

    csrc = write_csv(tmp_path / "c.csv", """
        origin,dest
        01,02
    """)
    with pytest.raises(InputError) as ei:
        engine.code_counts(csrc, ["origin", "destination"])
    assert "code column 'destination'" in str(ei.value) and "Its columns are: origin, dest" in str(ei.value)


def test_text_in_coordinate(engine: Any, tmp_path: Path) -> None:
    src = write_csv(tmp_path / "p.csv", """
        lat,lon
        40.5,-73.5
        north,-73.2
        40.1,-73.1
    """)
    with pytest.raises(InputError, match=r"(?s)'lat'.*(not a number|text)"):
        engine.points(src, GRID, lat="lat", lon="lon")


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_infinite_coordinate(engine: Any, tmp_path: Path, fmt: str) -> None:
    df = pd.DataFrame({"lat": [40.5, 40.6], "lon": [-73.5, -np.inf]})
    if fmt == "csv":
        src = write_csv(tmp_path / "p.csv", "lat,lon\n40.5,-73.5\n40.6,-inf\n")
    else:
        src = write_parquet(tmp_path / "p.parquet", df)
    with pytest.raises(InputError, match="(?i)infinite"):
        engine.points(src, GRID, lat="lat", lon="lon")


def test_latitude_out_of_range(engine: Any, tmp_path: Path) -> None:
    src = write_parquet(tmp_path / "p.parquet", pd.DataFrame({"lat": [40.5, 95.0], "lon": [-73.5, -73.5]}))
    with pytest.raises(InputError, match=r"(?s)'lat'.*-90\.\.90"):
        engine.points(src, GRID, lat="lat", lon="lon")


def test_blank_code(engine: Any, tmp_path: Path) -> None:
    src = write_csv(tmp_path / "c.csv", "origin,destination,n\n01,02,3\n01,   ,2\n")
    with pytest.raises(InputError, match=r"1 rows have no code in 'origin', 'destination'"):
        engine.code_counts(src, ["origin", "destination"], count="n")


def test_negative_count(engine: Any, tmp_path: Path) -> None:
    src = write_parquet(tmp_path / "c.parquet", pd.DataFrame({"county": ["001", "003"], "n": [4, -1]}))
    with pytest.raises(InputError, match=r"the count column 'n' has 1 values that are not whole numbers"):
        engine.code_counts(src, ["county"], count="n")


def test_blank_person_id_in_coded_rows(engine: Any, tmp_path: Path) -> None:
    src = write_csv(tmp_path / "t.csv", "origin,destination,uid\n01,02,7\n01,03,NA\n")
    with pytest.raises(InputError, match=r"the person id column 'uid' is empty in 1 rows"):
        engine.code_counts(src, ["origin", "destination"], user="uid", cap=2)


# ---------------------------------------------------------------------------------------------
# tiny examples computed by hand
# ---------------------------------------------------------------------------------------------

# 2 rows x 3 columns over lon 0..3, lat 0..2: every edge is a whole number
HAND_GRID = Grid(Bounds(0.0, 0.0, 3.0, 2.0), 2, 3)
HAND_CSV = """
    lat,lon,who
    0.5,0.5,a
    0.5,1.0,b
    1.0,2.0,c
    2.0,3.0,d
    0.0,0.0,e
    1.999,2.999,f
    0.2,3.0,g
    2.0,0.2,h
    1.0,3.5,i
    -0.1,1.0,j
    1.0,,k
"""
# a (0.5, 0.5) -> row 0, col 0
# b on the middle longitude edge 1.0 -> the cell starting there: row 0, col 1
# c on the edges lon 2.0 / lat 1.0 -> row 1, col 2
# d on the north-east corner (east and north bounds are closed) -> row 1, col 2
# e on the south-west corner -> row 0, col 0
# f just inside the north-east cell -> row 1, col 2
# g on the east bound -> row 0, col 2;  h on the north bound -> row 1, col 0
# i east of the bounds, j south of them -> outside;  k has no longitude -> dropped
HAND_COUNTS = [[2, 1, 1],
               [1, 0, 3]]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_points_by_hand(engine: Any, tmp_path: Path, fmt: str) -> None:
    src = write_csv(tmp_path / "p.csv", HAND_CSV)
    if fmt == "parquet":
        src = write_parquet(tmp_path / "p.parquet", pd.read_csv(src.paths[0]))
    pc = engine.points(src, HAND_GRID, lat="lat", lon="lon")
    assert pc.aggregate.counts.tolist() == HAND_COUNTS
    assert pc.aggregate.n_outside == 2
    assert pc.aggregate.n_capped == 0
    assert pc.aggregate.sensitivity == 1 and pc.aggregate.user_cap is None
    assert pc.n_read == 11
    assert pc.dropped == {"missing coordinate": 1}
    assert pc.n_kept == 10
    assert pc.engine == engine.name


def _frac(x: float) -> float:
    return x - math.floor(x)


def test_points_cap_by_hand(engine: Any, tmp_path: Path) -> None:
    """One person (spelled 7, 007, ' 7 ', 7.0) with 5 points, cap 2: the two smallest frac keys stay."""
    grid = Grid(Bounds(0.0, 0.0, 4.0, 1.0), 1, 4)  # one row, a cell per whole longitude
    person7 = [(0.5, 0.25, "7"), (1.5, 0.5, "007"), (2.5, 0.75, " 7 "), (3.5, 0.3, "7.0"), (3.25, 0.6, "7")]
    others = [(1.2, 0.4, "b"), (1.7, 0.9, " b"), (5.0, 0.5, "c"), (2.2, 0.1, "")]
    rows = person7 + others
    src = write_parquet(tmp_path / "p.parquet", pd.DataFrame({
        "lon": [r[0] for r in rows], "lat": [r[1] for r in rows], "uid": [r[2] for r in rows]}))

    keys = sorted((_frac(lon * CAP_A + lat * CAP_B), lon, lat) for lon, lat, _ in person7)
    assert len({k for k, _, _ in keys}) == len(keys)  # no ties: the order is the key alone
    expected = np.zeros((1, 4), dtype=np.int64)
    for _, lon, _ in keys[:2]:
        expected[0, int(lon)] += 1
    expected[0, 1] += 2  # person b's two points, under the cap; c is outside; '' is a missing id

    pc = engine.points(src, grid, lat="lat", lon="lon", user="uid", user_cap=2)
    assert pc.aggregate.counts.tolist() == expected.tolist()
    assert pc.aggregate.n_capped == 3
    assert pc.aggregate.n_outside == 1
    assert pc.aggregate.sensitivity == 2 and pc.aggregate.user_cap == 2
    assert pc.n_read == 9
    assert pc.dropped == {"missing user id": 1}


def test_points_cap_ties_on_identical_coordinates(engine: Any, tmp_path: Path) -> None:
    """Identical coordinates are interchangeable: a person with 3 copies of one point and cap 2 keeps 2."""
    src = write_csv(tmp_path / "p.csv", """
        lat,lon,uid
        0.5,0.5,1
        0.5,0.5,01
        0.5,0.5,1.0
        0.5,1.5,2
    """)
    pc = engine.points(src, Grid(Bounds(0.0, 0.0, 2.0, 1.0), 1, 2), lat="lat", lon="lon", user="uid", user_cap=2)
    assert pc.aggregate.counts.tolist() == [[2, 1]]
    assert pc.aggregate.n_capped == 1


# ---------------------------------------------------------------------------------------------
# code counts of an in-memory frame (numpy), by hand
# ---------------------------------------------------------------------------------------------

TRIPS = pd.DataFrame({
    "origin":      ["02", " 02 ", "01", "01 ", "01", "1"],
    "destination": ["01", "01", "03", "02", "02", "2"],
    "uid":         ["7", "007", " 7 ", "7.0", "8", "9"],
})
# Person 7 (four spellings) has the groups (02,01) x2, (01,03) x1, (01,02) x1.  Their keys
# md5("7\x1f02\x1f01") = 0bf5..., md5("7\x1f01\x1f03") = 1cb2..., md5("7\x1f01\x1f02") = 3364...
# order them (02,01), (01,03), (01,02).  Persons 8 and 9 have one trip each.  "1" is not "01".


def test_trip_key_order_is_as_documented() -> None:
    import hashlib

    h = {od: hashlib.md5(("7\x1f" + od[0] + "\x1f" + od[1]).encode()).hexdigest() for od in
         [("02", "01"), ("01", "03"), ("01", "02")]}
    assert h[("02", "01")] < h[("01", "03")] < h[("01", "02")]


def test_code_counts_of_frame_cap_records() -> None:
    cc = code_counts_of_frame(TRIPS, ["origin", "destination"], user="uid", cap=2, distinct=False)
    # person 7 keeps both (02,01) trips (the first group in key order fills the cap of 2)
    expected = pd.DataFrame({
        "origin": ["01", "01", "02", "1"],
        "destination": ["02", "03", "01", "2"],
        "count": np.array([1, 0, 2, 1], dtype=np.int64),
        "count_all": np.array([2, 1, 2, 1], dtype=np.int64),
    })
    pd.testing.assert_frame_equal(cc.frame, expected)
    assert cc.keys == ("origin", "destination")
    assert cc.n_read == 6 and cc.n_capped == 2


def test_code_counts_of_frame_cap_distinct() -> None:
    cc = code_counts_of_frame(TRIPS, ["origin", "destination"], user="uid", cap=2, distinct=True)
    # distinct: each (person, pair) counts once; person 7 keeps (02,01) and (01,03)
    expected = pd.DataFrame({
        "origin": ["01", "01", "02", "1"],
        "destination": ["02", "03", "01", "2"],
        "count": np.array([1, 1, 1, 1], dtype=np.int64),
        "count_all": np.array([2, 1, 2, 1], dtype=np.int64),
    })
    pd.testing.assert_frame_equal(cc.frame, expected)
    assert cc.n_read == 6 and cc.n_capped == 2


def test_code_counts_of_frame_count_column() -> None:
    df = pd.DataFrame({"county": ["01", " 01", "1", "02", "001"], "n": [3, 2, 0, 4, "5"]})
    cc = code_counts_of_frame(df, ["county"], count="n")
    expected = pd.DataFrame({
        "county": ["001", "01", "02", "1"],  # "1" counts 0 and stays (an empty area); text order
        "count": np.array([5, 5, 4, 0], dtype=np.int64),
        "count_all": np.array([5, 5, 4, 0], dtype=np.int64),
    })
    pd.testing.assert_frame_equal(cc.frame, expected)
    assert cc.n_read == 5 and cc.n_capped == 0


def test_code_counts_by_hand(engine: Any, tmp_path: Path) -> None:
    """The same trips through every engine (CSV): the hand-written frame of the record cap."""
    src = tmp_path / "trips.csv"
    TRIPS.to_csv(src, index=False)
    cc = engine.code_counts(Source.from_path(src), ["origin", "destination"], user="uid", cap=2)
    assert cc.frame["origin"].tolist() == ["01", "01", "02", "1"]
    assert cc.frame["destination"].tolist() == ["02", "03", "01", "2"]
    assert cc.frame["count"].tolist() == [1, 0, 2, 1]
    assert cc.frame["count_all"].tolist() == [2, 1, 2, 1]
    assert cc.n_read == 6 and cc.n_capped == 2


# ---------------------------------------------------------------------------------------------
# awkward inputs: every engine gives the written-out answer (or refuses)
# ---------------------------------------------------------------------------------------------


def _bug(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.skip(reason=f"bug: {reason}")


def _pq(df: pd.DataFrame) -> bytes:
    import io

    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


# (id, file name, bytes, user column, cap, expected answer or "refused", {engine: bug reason})
# The expected answers are on GRID (lon -74..-73, lat 40..41, 2 x 2): the middle edges are -73.5 / 40.5.
AWKWARD: list[tuple[str, str, bytes, str | None, int | None, Any, dict[str, str]]] = [
    ("bom_crlf_trailing_delimiter", "p.csv",
     "\ufefflat,lon,\r\n40.25,-73.75,\r\n40.75,-73.25,\r\n".encode(), None, None,
     {"counts": [[1, 0], [0, 1]], "ids": None}, {}),
    ("quoted_text_and_spaces", "p.csv",
     b'lat,lon,note\n 40.25 , -73.75 ,"a,b"\n40.75,-73.25,"c ""d"""\n', None, None,
     {"counts": [[1, 0], [0, 1]], "ids": None}, {}),
    ("header_with_spaces", "p.csv", b" lat , lon \n40.25,-73.75\n40.75,-73.25\n", None, None,
     {"counts": [[1, 0], [0, 1]], "ids": None}, {}),
    ("integer_coordinates_parquet", "p.parquet",
     _pq(pd.DataFrame({"lat": np.array([40, 41], dtype=np.int64), "lon": np.array([-74, -73], dtype=np.int64)})),
     None, None, {"counts": [[1, 0], [0, 1]], "ids": None, "lon": [-74.0, -73.0], "lat": [40.0, 41.0]}, {}),
    ("latin1_csv", "p.csv", "lat,lon,n\u00e9\n40.25,-73.75,\u00e9\n40.75,-73.25,x\n".encode("latin-1"), None, None,
     {"counts": [[1, 0], [0, 1]], "ids": None}, {}),
    ("large_ids_with_a_missing_one", "p.csv",
     b"lat,lon,uid\n40.25,-73.75,1234567890123456789\n40.75,-73.25,1234567890123456788\n40.75,-73.75,\n",
     "uid", 1,
     {"counts": [[1, 0], [0, 1]], "ids": ["1234567890123456789", "1234567890123456788"],
      "dropped": {"missing user id": 1}}, {}),
    ("uint64_ids_parquet", "p.parquet",
     _pq(pd.DataFrame({"lat": [40.25, 40.75], "lon": [-73.75, -73.25],
                       "uid": np.array([2**63 + 5, 7], dtype=np.uint64)})),
     "uid", 1, {"counts": [[1, 0], [0, 1]], "ids": ["9223372036854775813", "7"]}, {}),
    # pandas reads True/true as one boolean, so the rule makes them one person everywhere
    ("true_and_True_ids_csv", "p.csv", b"lat,lon,uid\n40.25,-73.75,True\n40.75,-73.25,true\n", "uid", 2,
     {"counts": [[1, 0], [0, 1]], "ids": ["true", "true"]}, {}),
    ("underscore_in_number", "p.csv", b"lat,lon\n4_0.25,-73.75\n40.75,-73.25\n", None, None, "refused", {}),
]


def _awkward_params() -> list[Any]:
    out = []
    for case in AWKWARD:
        for name in ("numpy", "duckdb", "spark"):
            marks = [pytest.mark.spark] if name == "spark" else []
            if name in case[6]:
                marks.append(_bug(case[6][name]))
            out.append(pytest.param(case, name, marks=marks, id=f"{case[0]}-{name}"))
    return out


@pytest.mark.parametrize(("case", "engine_name"), _awkward_params())
def test_awkward_input(case: tuple, engine_name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    _, fname, data, user, cap, expected, _ = case
    eng = request.getfixturevalue("spark_engine") if engine_name == "spark" else get_engine(engine_name)
    (tmp_path / fname).write_bytes(data)
    src = Source.from_path(tmp_path / fname)
    if expected == "refused":
        with pytest.raises(InputError):
            eng.points(src, GRID, lat="lat", lon="lon", user=user, user_cap=cap)
        return
    pc = eng.points(src, GRID, lat="lat", lon="lon", user=user, user_cap=cap)
    assert pc.aggregate.counts.tolist() == expected["counts"]
    assert pc.aggregate.n_capped == 0
    assert pc.dropped == expected.get("dropped", {})
    # the two kept points are (-73.75, 40.25) and (-73.25, 40.75) unless written out; with a cap of 1
    # and no record capped, the ids were read as two people (the big ids and uint64 cases)
    lon, lat = np.array(expected.get("lon", [-73.75, -73.25])), np.array(expected.get("lat", [40.25, 40.75]))
    assert pc.fingerprint == points_fingerprint(lon, lat)


@pytest.mark.parametrize("engine_name", ["numpy", "duckdb", pytest.param("spark", marks=pytest.mark.spark)])
def test_decimal_commas_are_read_in_memory_and_refused_with_a_hint_by_sql_engines(
        engine_name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    eng = request.getfixturevalue("spark_engine") if engine_name == "spark" else get_engine(engine_name)
    (tmp_path / "p.csv").write_bytes(b"lat;lon\n40,25;-73,75\n40,75;-73,25\n")
    src = Source.from_path(tmp_path / "p.csv")
    if engine_name == "numpy":  # io.load_points reads a column whose every unparsable value is one
        assert eng.points(src, GRID, lat="lat", lon="lon").aggregate.counts.tolist() == [[1, 0], [0, 1]]
        return
    with pytest.raises(InputError, match="decimal commas"):
        eng.points(src, GRID, lat="lat", lon="lon")


def test_an_upload_with_ids_too_long_for_floats_is_refused_not_merged() -> None:
    """pandas reads 19-digit ids with a blank as float64; two people would become one."""
    from dpcore.data.points import load_points

    df = pd.DataFrame({"lat": [40.25, 40.75, 40.5], "lon": [-73.75, -73.25, -73.5],
                       "uid": [1234567890123456789.0, 1234567890123456788.0, np.nan]})
    with pytest.raises(InputError, match="more than 15 digits"):
        load_points(df, "lat", "lon", "uid")


@pytest.mark.parametrize("engine_name", ["numpy", "duckdb", pytest.param("spark", marks=pytest.mark.spark)])
def test_canonical_ids_are_one_person_in_every_engine(engine_name: str, tmp_path: Path,
                                                     request: pytest.FixtureRequest) -> None:
    """True/true, 7/007/7.0 and '7\t' are one person each: with a cap of 1, one record of each stays."""
    eng = request.getfixturevalue("spark_engine") if engine_name == "spark" else get_engine(engine_name)
    (tmp_path / "p.csv").write_bytes(b"lat,lon,uid\n40.25,-73.75,True\n40.75,-73.25,true\n"
                                     b"40.25,-73.25,7\n40.75,-73.75,007\n40.3,-73.3,7.0\n40.6,-73.6,\"7\t\"\n")
    pc = eng.points(Source.from_path(tmp_path / "p.csv"), GRID, lat="lat", lon="lon", user="uid", user_cap=1)
    assert pc.aggregate.total == 2 and pc.aggregate.n_capped == 4


def test_missing_ids_are_refused_by_the_cap_and_empty_sources_named() -> None:
    from dpcore.data.persons import person_codes

    with pytest.raises(ParameterError, match="no person id"):
        person_codes(np.array(["a", None, "b"], dtype=object))
    with pytest.raises(InputError, match="No input file"):
        Source.from_path([])


def test_a_partitioned_folder_is_read_whole(tmp_path: Path) -> None:
    """year=.../part.parquet subfolders are data; _SUCCESS, .crc and hidden files are not."""
    df = pd.DataFrame({"lat": [40.25, 40.75, 40.25], "lon": [-73.75, -73.25, -73.25]})
    for i, year in enumerate((2023, 2024, 2025)):
        (tmp_path / f"year={year}").mkdir()
        df.iloc[[i]].to_parquet(tmp_path / f"year={year}" / "part-0.parquet")
    (tmp_path / "_SUCCESS").write_text("")
    (tmp_path / "year=2023" / ".part-0.parquet.crc").write_bytes(b"x")
    (tmp_path / "_temporary").mkdir()
    (tmp_path / "_temporary" / "half.parquet").write_bytes(b"not parquet")
    src = Source.from_path(tmp_path)
    assert len(src.paths) == 3 and src.fmt == "parquet"
    pc = get_engine("duckdb").points(src, GRID, lat="lat", lon="lon")
    assert pc.aggregate.counts.tolist() == [[1, 1], [0, 1]]


@pytest.mark.parametrize("engine_name", ["numpy", "duckdb"])
def test_a_gzipped_csv_without_a_gz_name_is_read(engine_name: str, tmp_path: Path) -> None:
    """The in-memory reader looks at the bytes, not the name; so do the engines."""
    import gzip

    (tmp_path / "p.csv").write_bytes(gzip.compress(b"lat,lon,uid\n40.25,-73.75,1234567890123456789\n"
                                                   b"40.75,-73.25,1234567890123456788\n40.75,-73.75,\n"))
    pc = get_engine(engine_name).points(Source.from_path(tmp_path / "p.csv"), GRID, lat="lat", lon="lon",
                                        user="uid", user_cap=1)
    assert pc.aggregate.counts.tolist() == [[1, 0], [0, 1]] and pc.dropped == {"missing user id": 1}


def test_duckdb_spill_folder_is_private_and_removed_when_the_process_ends() -> None:
    """DuckDB's spill files hold confidential rows: their folder is the process's own (mode 0700)
    and does not outlive it."""
    code = ("import os, stat; from dpcore.data.engines import duckdb_engine as d; f = d._spill_dir(); "
            "print(f, oct(stat.S_IMODE(os.stat(f).st_mode)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[3]).stdout.split()
    assert out[1] == "0o700"
    assert not Path(out[0]).exists()


@pytest.mark.parametrize("engine_name", ["numpy", "duckdb", pytest.param("spark", marks=pytest.mark.spark)])
def test_every_engine_computes_the_tolerant_keys_of_the_in_memory_read(
        engine_name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Issue 26 item 12: points read by an engine get the same rounded keys (every point, and those
    inside the bounds) as the same points read in memory, so the same data finds the same budget
    whichever engine read it; a re-saved copy (%.15g) and one far-away point more keep them."""
    from dpcore.data.engines.base import tolerant_points_fingerprints
    from dpcore.data.points import load_points_file

    eng = request.getfixturevalue("spark_engine") if engine_name == "spark" else get_engine(engine_name)
    lon = np.array([-73.98765432101234, -73.61234567890123, -73.25000000000001, -73.5, -73.9])
    lat = np.array([40.71234567890123, 40.3333333333333, 40.75, 40.5, 40.2])
    full = pd.DataFrame({"lat": lat, "lon": lon})
    (tmp_path / "a.csv").write_text(full.to_csv(index=False, float_format="%.17g"))
    resaved = pd.DataFrame({"lat": [float(f"{v:.15g}") for v in lat], "lon": [float(f"{v:.15g}") for v in lon]})
    far = pd.concat([resaved, pd.DataFrame({"lat": [10.0], "lon": [10.0]})])
    (tmp_path / "b.csv").write_text(far.to_csv(index=False, float_format="%.15g"))
    memory = load_points_file(tmp_path / "a.csv", "a.csv", lat_col="lat", lon_col="lon")
    expected = tolerant_points_fingerprints(memory.lon, memory.lat, GRID.bounds)
    assert len(expected) == 2
    a = eng.points(Source.from_path(tmp_path / "a.csv"), GRID, lat="lat", lon="lon")
    b = eng.points(Source.from_path(tmp_path / "b.csv"), GRID, lat="lat", lon="lon")
    assert list(a.keys) == expected
    assert b.keys[1] == expected[1]  # re-saved, with a point outside the bounds: the inside key holds
    assert b.fingerprint != a.fingerprint  # while the exact key changed
    c = eng.points(Source.from_path(tmp_path / "a.csv"), GRID, lat="lat", lon="lon", fingerprint=False)
    assert c.keys == ()


# the last Spark test in the file, so after every other Spark test of the run (tests/conftest.py runs them on one worker in
# collection order): it stops the shared Spark session (one SparkContext per process), and a Spark test
# after it would start another (two did)
@pytest.mark.spark
def test_spark_other_master_is_not_silently_the_running_one(spark_engine: Any, tmp_path: Path) -> None:
    """Another master stops the running session instead of getting it back from getOrCreate; a master
    URL Spark cannot parse is then a ParameterError naming it, from the engine's first query (the
    session starts lazily).  In this process, whose JVM is already up (a fresh ``python`` and JVM
    for the bad master alone cost about 12 s of CPU; test_suite_profile.md)."""
    from dpcore.data.engines.spark_engine import session

    assert session(SPARK_MASTER).sparkContext.master == SPARK_MASTER
    data = tmp_path / "p.csv"
    data.write_text("lat,lon\n0.5,0.5\n")
    eng = get_engine("spark", spark_master="not-a-master://x")  # lazy: the session starts on use
    with pytest.raises(ParameterError, match=r"Spark could not start with master 'not-a-master://x'"):
        eng.points(Source.from_path(data), Grid(Bounds(0, 0, 1, 1), 1, 1), lat="lat", lon="lon")
    with pytest.raises(ParameterError, match="not-a-master://x"):
        session("not-a-master://x")


def test_data_error_leaves_out_the_sources_own_paths_only(tmp_path: Path) -> None:
    """An engine's error naming the input's path (digits in a folder's name) is not marked; a quoted
    row value holding a "/" (a date, an address) is a number of the data, not a path: marked."""
    (tmp_path / "2024").mkdir()
    src = write_csv(tmp_path / "2024" / "p1.csv", "lat,lon\n1,2\n")
    missing = f'IO Error: No files found that match the pattern "{src.paths[0]}"'
    assert data_error(ValueError(missing), src) == missing
    for value in ("12/05/2024", "Apt 4/B", "a/1"):
        text = f"Conversion Error: Could not convert string '{value}' to DOUBLE"
        assert data_error(ValueError(text), src) == CURATOR_ONLY + text
