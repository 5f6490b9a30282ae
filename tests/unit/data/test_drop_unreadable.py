"""Rows whose coordinate is text that is not a number, left out on request (``drop_unreadable``):
the library's counts, and the same kept rows, dropped counts and budget keys on every engine."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcore.data.domain import Bounds, Grid
from dpcore.data.engines import Source, get_engine
from dpcore.data.points import (
    DROP_MISSING_COORDINATE,
    DROP_MISSING_USER,
    DROP_UNREADABLE_COORDINATE,
    UnreadableCoordinates,
    load_points,
    load_points_file,
)
from dpcore.errors import InputError

GRID = Grid(Bounds(-74.0, 40.0, -73.0, 41.0), 4, 4)

#: 12 rows: 2 with text in lat, 1 with text in lon, 1 text beside an infinite and one beside an
#: out-of-range value (left out, not refused), 1 text beside an empty value, 2 empty, 1 without a person
CSV = """
    lat,lon,uid
    40.5,-73.5,a
    north,-73.2,a
    40.1, -73.1 ,b
    40.2,east,b
    n/k,inf,c
    x,-500,c
    ?,,d
    ,-73.4,d
    40.9,,a
    40.3,-73.3,
    40.35,-73.35,b
    40.45,-73.45,a
"""


def _src(tmp_path: Path, text: str = CSV) -> Source:
    p = tmp_path / "p.csv"
    p.write_text(textwrap.dedent(text).lstrip())
    return Source.from_path(p)


def _df() -> pd.DataFrame:
    return pd.read_csv(pd.io.common.StringIO(textwrap.dedent(CSV).lstrip()), dtype=str, keep_default_na=True)


# ---------------------------------------------------------------------------------------------
# the library
# ---------------------------------------------------------------------------------------------


def test_default_refuses_as_before() -> None:
    df = pd.DataFrame({"lat": ["40.1", "abc", "N/Ax", "4O.7"], "lon": ["-73", "-73", "-73", "-73"]})
    with pytest.raises(UnreadableCoordinates) as ei:
        load_points(df, "lat", "lon")
    assert isinstance(ei.value, InputError)
    assert str(ei.value) == ("curator only, not for publication: Column 'lat' has 3 values that are not numbers "
                             "(data rows 2, 3, 4: 'abc', 'N/Ax', '4O.7'). Fix or remove those rows.")
    hinted = ei.value.with_hint("give --drop-unreadable to leave those rows out")
    assert str(hinted) == ("curator only, not for publication: Column 'lat' has 3 values that are not numbers "
                           "(data rows 2, 3, 4: 'abc', 'N/Ax', '4O.7'). Fix or remove those rows, or give "
                           "--drop-unreadable to leave those rows out.")


def test_dropped_and_counted_first() -> None:
    t = load_points(_df(), "lat", "lon", "uid", drop_unreadable=True)
    assert t.dropped == {DROP_UNREADABLE_COORDINATE: 5, DROP_MISSING_COORDINATE: 2, DROP_MISSING_USER: 1}
    assert t.n_read == 12 and t.n_kept == 4
    assert t.lat.tolist() == [40.5, 40.1, 40.35, 40.45]
    assert t.lon.tolist() == [-73.5, -73.1, -73.35, -73.45]
    assert t.user.tolist() == ["a", "b", "b", "a"]


def test_without_unreadable_values_the_table_is_unchanged() -> None:
    df = pd.DataFrame({"lat": ["40.1", "", "40,5"], "lon": ["-73", "-73", "-73,5"]})
    a, b = load_points(df, "lat", "lon"), load_points(df, "lat", "lon", drop_unreadable=True)
    assert a.dropped == b.dropped == {DROP_MISSING_COORDINATE: 1}
    assert a.lat.tolist() == b.lat.tolist() == [40.1, 40.5] and b.lon.tolist() == [-73.0, -73.5]


def test_decimal_commas_are_read_beside_dropped_text() -> None:
    df = pd.DataFrame({"lat": ["40,1", "foo", "40,5"], "lon": ["-73", "-73", "-73"]})
    t = load_points(df, "lat", "lon", drop_unreadable=True)
    assert t.lat.tolist() == [40.1, 40.5] and t.dropped == {DROP_UNREADABLE_COORDINATE: 1}


def test_infinite_and_out_of_range_still_refused() -> None:
    df = pd.DataFrame({"lat": ["40.1", "foo", "40.2"], "lon": ["-73", "-73", "inf"]})
    with pytest.raises(InputError, match="infinite"):
        load_points(df, "lat", "lon", drop_unreadable=True)
    df = pd.DataFrame({"lat": ["40.1", "foo", "95"], "lon": ["-73", "-73", "-73"]})
    with pytest.raises(InputError, match=r"outside -90\.\.90"):
        load_points(df, "lat", "lon", drop_unreadable=True)


def test_nothing_readable_left() -> None:
    df = pd.DataFrame({"lat": ["foo", "", "bar"], "lon": ["-73", "-73", "-73"]})
    with pytest.raises(InputError, match="no rows with both coordinates as numbers: of its 3 data rows, 2 have"):
        load_points(df, "lat", "lon", drop_unreadable=True)


def test_load_points_file_passes_the_option(tmp_path: Path) -> None:
    src = _src(tmp_path)
    with pytest.raises(UnreadableCoordinates):
        load_points_file(src.paths[0], user_col="uid")
    t = load_points_file(src.paths[0], user_col="uid", drop_unreadable=True)
    assert t.dropped[DROP_UNREADABLE_COORDINATE] == 5 and t.n_kept == 4


# ---------------------------------------------------------------------------------------------
# every engine: the same rows and counts
# ---------------------------------------------------------------------------------------------


def _answer(pc: Any) -> tuple[Any, ...]:
    a = pc.aggregate
    return (a.counts.tolist(), a.n_outside, a.n_capped, pc.n_read, pc.dropped, pc.fingerprint, tuple(pc.keys))


@pytest.mark.parametrize("user", [None, "uid"])
def test_duckdb_matches_numpy(tmp_path: Path, user: str | None) -> None:
    src = _src(tmp_path)
    cap = 1 if user else None
    ref = get_engine("numpy").points(src, GRID, lat="lat", lon="lon", user=user, user_cap=cap, drop_unreadable=True)
    got = get_engine("duckdb").points(src, GRID, lat="lat", lon="lon", user=user, user_cap=cap, drop_unreadable=True)
    assert _answer(got) == _answer(ref)
    assert ref.dropped[DROP_UNREADABLE_COORDINATE] == 5
    # the budget key follows the kept rows: the table without those rows gives the same key
    kept = _df()
    kept = kept.loc[pd.to_numeric(kept["lat"], errors="coerce").notna()
                    & pd.to_numeric(kept["lon"], errors="coerce").notna()]
    p2 = tmp_path / "kept.csv"
    kept.to_csv(p2, index=False)
    clean = get_engine("duckdb").points(Source.from_path(p2), GRID, lat="lat", lon="lon", user=user, user_cap=cap)
    assert clean.fingerprint == got.fingerprint and clean.aggregate.counts.tolist() == got.aggregate.counts.tolist()


@pytest.mark.parametrize("name", ["numpy", "duckdb"])
def test_engines_refuse_without_the_option(tmp_path: Path, name: str) -> None:
    with pytest.raises(UnreadableCoordinates, match="not (a number|numbers)") as ei:
        get_engine(name).points(_src(tmp_path), GRID, lat="lat", lon="lon")
    # the SQL engines count the rows the option would leave out (the app's button names them)
    assert ei.value.rows == (None if name == "numpy" else 5)


def test_duckdb_refuses_decimal_commas_even_with_the_option(tmp_path: Path) -> None:
    src = _src(tmp_path, "lat,lon\n40.5,-73.5\nfoo,-73.2\n\"40,1\",-73.1\n")
    with pytest.raises(InputError, match="decimal commas") as ei:
        get_engine("duckdb").points(src, GRID, lat="lat", lon="lon", drop_unreadable=True)
    assert not isinstance(ei.value, UnreadableCoordinates)  # the option would not help: not offered
    # the in-memory engine reads them and leaves out the text
    pc = get_engine("numpy").points(src, GRID, lat="lat", lon="lon", drop_unreadable=True)
    assert pc.dropped == {DROP_UNREADABLE_COORDINATE: 1} and pc.n_kept == 2


@pytest.mark.spark
def test_spark_matches_numpy(tmp_path: Path, spark_engine: Any) -> None:
    src = _src(tmp_path)
    ref = get_engine("numpy").points(src, GRID, lat="lat", lon="lon", user="uid", user_cap=1, drop_unreadable=True)
    got = spark_engine.points(src, GRID, lat="lat", lon="lon", user="uid", user_cap=1, drop_unreadable=True)
    assert _answer(got) == _answer(ref)
    assert np.array_equal(got.aggregate.counts, ref.aggregate.counts)
