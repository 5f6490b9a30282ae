"""Tests of dpcore.data.points.load_points: coordinates validated (types, ranges, swapped or
projected axes, missing and infinite values, duplicate columns) and user ids kept, each refusal
naming the problem and its fix.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from input_files import assert_actionable

from dpcore.data.columns import detect_user_column
from dpcore.data.points import load_points
from dpcore.data.tables import read_table
from dpcore.errors import InputError


def _frame(lat, lon, **extra) -> pd.DataFrame:
    return pd.DataFrame({"lat": lat, "lon": lon, **extra})


def test_load_points_basic():
    df = _frame([40.7, 40.8], [-73.9, -73.8])
    table = load_points(df, "lat", "lon", source_name="p.csv")
    assert table.lat.dtype == np.float64 and table.lon.dtype == np.float64
    np.testing.assert_array_equal(table.lat, [40.7, 40.8])
    np.testing.assert_array_equal(table.lon, [-73.9, -73.8])
    assert table.user is None and table.user_column is None
    assert (table.n_read, table.n_kept, table.dropped) == (2, 2, {})
    assert table.source_name == "p.csv"


def test_repr_shows_no_values():
    table = load_points(_frame([40.123456], [-73.987654]), "lat", "lon", source_name="p.csv")
    text = repr(table)
    assert "40.12" not in text and "73.98" not in text
    assert "n_kept=1" in text


def test_non_numeric_text_message_exact():
    lat = ["40.7", "abc", "40.7", "40.7", "N/A", "40.7", "", "40.7", "4O.7", " 40.7 "]
    df = _frame(lat, [-73.9] * 10)
    with pytest.raises(InputError) as err:
        load_points(df, "lat", "lon")
    assert str(err.value) == (  # the rows' number, positions and values: marked for the curator
        "curator only, not for publication: Column 'lat' has 3 values that are not numbers (data rows 2, 5, 9: 'abc', 'N/A', "
        "'4O.7'). Fix or remove those rows."
    )
    assert_actionable(err, "'lat'")


def test_non_numeric_from_csv_and_many_rows():
    rows = "".join(f"{'bad' if i % 3 == 0 else '40.5'},-73.9\n" for i in range(30))
    df = read_table(("lat,lon\n" + rows).encode(), "p.csv")
    with pytest.raises(InputError) as err:
        load_points(df, "lat", "lon")
    assert_actionable(err, "'lat'", "10 values", "data rows 1, 4, 7, 10, 13, ...")


def test_single_bad_value_is_singular():
    with pytest.raises(InputError, match=r"has 1 value that is not a number \(data row 2: 'x'\)"):
        load_points(_frame(["1", "x"], [2.0, 2.0]), "lat", "lon")


def test_whitespace_and_blank_strings():
    df = _frame([" 40.7", "40.8 ", "  ", "nan", None], ["-73.9", "-73.8", "-73.7", "1", "2"])
    table = load_points(df, "lat", "lon")
    np.testing.assert_array_equal(table.lat, [40.7, 40.8])
    assert table.dropped == {"missing coordinate": 3}


def test_object_column_mixing_floats_and_strings():
    df = _frame(pd.Series([40.7, "40.8", np.nan], dtype=object), [1.0, 2.0, 3.0])
    table = load_points(df, "lat", "lon")
    np.testing.assert_array_equal(table.lat, [40.7, 40.8])


def test_nullable_dtypes():
    df = _frame(
        pd.array([40, None, 41], dtype="Int64"), pd.array([1.5, 2.5, None], dtype="Float64")
    )
    table = load_points(df, "lat", "lon")
    np.testing.assert_array_equal(table.lat, [40.0])
    assert table.dropped == {"missing coordinate": 2}


@pytest.mark.parametrize(
    ("lat", "lon", "col", "fragment"),
    [
        ([40.7, 95.0, -91.0], [-73.9, -73.9, 200.0], "lat", "2 values outside -90..90"),
        ([40.7, 40.8], [-73.9, 181.5], "lon", "1 value outside -180..180"),
    ],
)
def test_out_of_range(lat, lon, col, fragment):
    with pytest.raises(InputError, match=re.escape(fragment)) as err:
        load_points(_frame(lat, lon), "lat", "lon")
    msg = assert_actionable(err, f"'{col}'", "data row")
    assert "swapped" not in msg


def test_out_of_range_message_rows_and_values():
    lat = [40.0] * 20
    lat[3] = 120.5
    lat[17] = -95.25
    lon = [-200.0] + [0.0] * 19
    with pytest.raises(InputError) as err:
        load_points(_frame(lat, lon), "lat", "lon")
    assert "(data rows 4, 18: 120.5, -95.25)" in str(err.value)


def test_swapped_hint():
    # Tokyo: longitude 139.7 cannot be a latitude, and 35.7 is a valid longitude.
    df = pd.DataFrame({"Y": [139.7, 139.8, 139.6], "X": [35.7, 35.6, np.nan]})
    with pytest.raises(InputError) as err:
        load_points(df, "Y", "X")
    msg = assert_actionable(err, "'Y'", "3 values outside -90..90")
    assert msg.endswith(
        "Check that latitude and longitude are not swapped: choose 'X' as latitude and "
        "'Y' as longitude."
    )


def test_projected_coordinates_hint():
    df = _frame([4_500_000.0, 4_510_000.0], [583_000.0, 590_000.0])
    with pytest.raises(InputError, match="projected coordinates") as err:
        load_points(df, "lat", "lon")
    assert_actionable(err, "'lat'", "EPSG:4326")


def test_nan_rows_dropped_and_counted():
    content = b"lat,lon,name\n40.7,-73.9,a\n,-73.8,b\n40.9,,c\nNA,NaN,d\n41.0,-74.0,e\n"
    df = read_table(content, "p.csv")
    table = load_points(df, "lat", "lon", source_name="p.csv")
    assert table.n_read == 5
    assert table.n_kept == 2
    assert table.dropped == {"missing coordinate": 3}
    assert table.n_read == table.n_kept + sum(table.dropped.values())
    np.testing.assert_array_equal(table.lat, [40.7, 41.0])
    np.testing.assert_array_equal(table.lon, [-73.9, -74.0])


def test_all_coordinates_missing():
    with pytest.raises(InputError, match="no rows with both coordinates") as err:
        load_points(_frame([np.nan, 1.0], [2.0, np.nan]), "lat", "lon", source_name="p.csv")
    assert_actionable(err, "'p.csv'", "'lat'", "'lon'")


@pytest.mark.parametrize("bad", [np.inf, -np.inf])
def test_infinite_values(bad):
    with pytest.raises(InputError, match="1 infinite value") as err:
        load_points(_frame([40.0, 40.0], [1.0, bad]), "lat", "lon")
    assert_actionable(err, "'lon'", "data row 2")


def test_infinite_values_from_csv_text():
    df = read_table(b"lat,lon\n40,inf\n41,-Infinity\n42,1e400\n", "p.csv")
    with pytest.raises(InputError, match="3 infinite values") as err:
        load_points(df, "lat", "lon")
    assert_actionable(err, "'lon'", "data rows 1, 2, 3")


def test_no_data_rows():
    with pytest.raises(InputError, match="no data rows") as err:
        load_points(_frame([], []), "lat", "lon", source_name="p.csv")
    assert_actionable(err, "'p.csv'")


def test_missing_column_lists_available():
    with pytest.raises(InputError, match="no column 'latitude'") as err:
        load_points(_frame([1.0], [2.0], name=["a"]), "latitude", "lon")
    assert_actionable(err, "columns: lat, lon, name")


def test_missing_column_suggests_case_variant():
    with pytest.raises(InputError) as err:
        load_points(pd.DataFrame({"Lat": [1.0], "Lon": [2.0]}), "lat", "Lon")
    assert_actionable(err, "Did you mean 'Lat'?")


def test_same_column_twice():
    with pytest.raises(InputError, match="both latitude and longitude") as err:
        load_points(_frame([1.0], [2.0]), "lat", "lat")
    assert_actionable(err, "'lat'")


def test_duplicate_column_names():
    df = pd.DataFrame([[1.0, 2.0, 3.0]], columns=["lat", "lat", "lon"])
    with pytest.raises(InputError, match="2 columns named 'lat'") as err:
        load_points(df, "lat", "lon")
    assert_actionable(err)


def test_boolean_and_date_columns_refused():
    with pytest.raises(InputError, match="true/false") as err:
        load_points(_frame([True], [2.0]), "lat", "lon")
    assert_actionable(err, "'lat'")
    df = _frame(pd.to_datetime(["2014-04-01"]), [2.0])
    with pytest.raises(InputError, match="not coordinates") as err:
        load_points(df, "lat", "lon")
    assert_actionable(err, "'lat'")


def test_user_column_and_missing_user_ids():
    content = (
        b"lat,lon,user_id\n40.7,-73.9,u1\n40.8,-73.8,\n,-73.7,u3\n40.6,-73.6, u4 \n40.5,-73.5,   \n"
    )
    df = read_table(content, "p.csv")
    assert detect_user_column(df) == "user_id"
    table = load_points(df, "lat", "lon", "user_id")
    assert table.user_column == "user_id"
    assert table.user.tolist() == ["u1", "u4"]
    assert table.dropped == {"missing coordinate": 1, "missing user id": 2}
    assert table.n_kept == 2 and table.n_read == 5
    np.testing.assert_array_equal(table.lat, [40.7, 40.6])


def test_integer_user_ids_stay_integers():
    df = _frame([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], uid=[7.0, np.nan, 9.0])
    table = load_points(df, "lat", "lon", "uid")
    assert table.user.dtype == np.int64
    assert table.user.tolist() == [7, 9]
    assert table.dropped == {"missing user id": 1}
    table = load_points(_frame([1.0], [1.0], uid=[12]), "lat", "lon", "uid")
    assert table.user.dtype == np.int64


def test_user_column_all_missing():
    with pytest.raises(InputError, match="no rows with both coordinates and a user id") as err:
        load_points(_frame([1.0], [2.0], uid=[None]), "lat", "lon", "uid")
    assert_actionable(err, "'uid'")


def test_user_column_same_as_coordinate():
    with pytest.raises(InputError, match="both as a coordinate and as the user id") as err:
        load_points(_frame([1.0], [2.0]), "lat", "lon", "lon")
    assert_actionable(err, "'lon'")
