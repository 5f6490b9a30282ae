"""Tests of dpcore.data.points.load_points_file: columns found or named in a file, and the real
point files (skipped when the shared data folder is missing).
"""

from __future__ import annotations

import time

import pytest
from input_files import QUAKES, UBER, assert_actionable, need

from dpcore.data.columns import detect_coordinate_columns, detect_user_column
from dpcore.data.points import load_points, load_points_file
from dpcore.data.tables import read_table
from dpcore.errors import InputError


def test_load_points_file_no_coordinate_columns():
    with pytest.raises(InputError) as err:
        load_points_file(b"a,b,c\n1,2,3\n", "f.csv")
    assert str(err.value) == (
        "No latitude/longitude columns found in 'f.csv' (columns: a, b, c). Name them 'lat' "
        "and 'lon' or choose them in the app (CLI: --lat-col/--lon-col)."
    )
    assert_actionable(err, "'f.csv'")


def test_load_points_file_one_axis_missing():
    with pytest.raises(InputError, match="No longitude column found") as err:
        load_points_file(b"lat,b\n1,2\n", "f.csv")
    assert_actionable(err, "'f.csv'", "lat, b")


def test_load_points_file_headerless():
    with pytest.raises(InputError, match="looks like data, not column names") as err:
        load_points_file(b"40.7,-73.9\n40.8,-73.8\n", "noheader.csv")
    assert_actionable(err, "'noheader.csv'", "header")


def test_load_points_file_explicit_columns():
    content = b"a,b,who\n40.7,-73.9,x\n40.8,-73.8,y\n"
    table = load_points_file(content, "f.csv", lat_col="a", lon_col="b", user_col="who")
    assert (table.lat_column, table.lon_column, table.user_column) == ("a", "b", "who")
    assert table.user.tolist() == ["x", "y"]
    # the user column is used only when named
    assert load_points_file(b"lat,lon,user_id\n1,2,u\n", "f.csv").user is None


def test_real_uber_file():
    path = need(UBER)
    start = time.perf_counter()
    df = read_table(path)
    assert list(df.columns) == ["Date/Time", "Lat", "Lon", "Base"]
    assert detect_coordinate_columns(df) == ("Lat", "Lon")
    assert detect_user_column(df) is None
    table = load_points(df, "Lat", "Lon", source_name=path.name)
    elapsed = time.perf_counter() - start
    assert table.n_read == table.n_kept == 564_516
    assert table.dropped == {}
    assert 40.07 <= table.lat.min() and table.lat.max() <= 42.12
    assert -74.78 <= table.lon.min() and table.lon.max() <= -72.06
    assert elapsed < 60  # a sanity bound only (a few seconds expected), not a benchmark


def test_real_uber_bytes_with_progress():
    path = need(UBER)
    calls: list[tuple[float, str]] = []
    table = load_points_file(
        path.read_bytes(), "uber.csv.gz", progress=lambda f, m: calls.append((f, m))
    )
    assert table.n_kept == 564_516
    assert calls[0][0] == 0.0 and calls[-1][0] == 1.0


def test_real_earthquakes_file():
    path = need(QUAKES)
    table = load_points_file(path)
    assert (table.lat_column, table.lon_column) == ("Latitude", "Longitude")
    assert table.n_read == table.n_kept == 23_412
    assert table.lat.min() == pytest.approx(-77.08)
    assert table.lat.max() == pytest.approx(86.005)
    assert table.lon.min() == pytest.approx(-179.997)
    assert table.lon.max() == pytest.approx(179.998)
