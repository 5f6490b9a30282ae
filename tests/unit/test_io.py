"""Tests of dpcore.data.tables, .columns, .points and .boundaries: reading uploaded tables and boundaries, and validating points.

Bad files are built inside the tests.  Real data is read from ../shared/data (never
copied); those tests are skipped when it is missing.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcore.data import tables
from dpcore.data.boundaries import boundary_bounds, read_boundaries
from dpcore.data.columns import detect_coordinate_columns, detect_user_column
from dpcore.data.points import load_points, load_points_file
from dpcore.data.tables import read_table
from dpcore.data.text import SNIFF_BYTES
from dpcore.errors import DPCoreError, InputError, ParameterError

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
if not DATA.is_dir():
    DATA = Path("/work/shared/data")
UBER = DATA / "points" / "uber_nyc_pickups_2014-04.csv.gz"
QUAKES = DATA / "points" / "earthquakes_23k.csv"
BOROUGHS = DATA / "boundaries" / "nyc_boroughs.geojson"

# Every message must tell the curator what to do.
FIX = re.compile(
    r"\b(Export|Fix|Check|Choose|Add|Rename|Upload|Replace|Name them|Zip|Include|convert|"
    r"Save|remove|delete|Did you mean)\b",
    re.IGNORECASE,
)


def assert_actionable(err: pytest.ExceptionInfo[InputError], *names: str) -> str:
    """The message names the problem (file/column/values) and contains a fix."""
    msg = str(err.value)
    for name in names:
        assert name in msg, f"{name!r} not named in: {msg}"
    assert FIX.search(msg), f"no fix hint in: {msg}"
    assert "\n" not in msg  # the CLI prints it on one line
    return msg


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"real data not available: {path}")
    return path


def csv_bytes(text: str) -> bytes:
    return text.encode("utf-8")


# --------------------------------------------------------------------------------------
# read_table: formats, encodings, delimiters
# --------------------------------------------------------------------------------------


def test_errors_are_dpcore_errors():
    assert issubclass(InputError, DPCoreError)


@pytest.mark.parametrize("content", [b"", b"   \n\n  \r\n", b"\xef\xbb\xbf"])
def test_empty_file(content):
    with pytest.raises(InputError, match="empty") as err:
        read_table(content, "points.csv")
    assert_actionable(err, "'points.csv'")


def test_empty_gzip_file():
    with pytest.raises(InputError, match="empty") as err:
        read_table(gzip.compress(b""), "points.csv.gz")
    assert_actionable(err, "'points.csv.gz'")


@pytest.mark.parametrize("with_progress", [False, True])
def test_header_only(with_progress):
    progress = (lambda f, m: None) if with_progress else None
    with pytest.raises(InputError, match="has a header but no data rows") as err:
        read_table(b"lat,lon,name\n", "points.csv", progress=progress)
    assert_actionable(err, "'points.csv'")


def test_comma_csv_basic_types():
    df = read_table(csv_bytes("lat,lon,name\n40.7,-73.9,a\n40.8,-73.8,b\n"), "p.csv")
    assert list(df.columns) == ["lat", "lon", "name"]
    assert df["lat"].dtype == np.float64
    assert df["name"].tolist() == ["a", "b"]


def test_semicolon_sniffed():
    df = read_table(csv_bytes("lat;lon;name\n40.7;-73.9;a, b\n40.8;-73.8;c\n"), "p.csv")
    assert list(df.columns) == ["lat", "lon", "name"]
    assert df["name"].tolist() == ["a, b", "c"]


def test_semicolon_with_decimal_commas():
    # The European export: ';' between columns, ',' as the decimal mark.
    content = "Breite;Länge;lat;lon\n" + "".join(f"x;y;40,{i:04d};-73,{i:04d}\n" for i in range(20))
    df = read_table(content.encode("utf-8"), "europe.csv")
    assert list(df.columns) == ["Breite", "Länge", "lat", "lon"]
    table = load_points(df, "lat", "lon")
    assert table.n_kept == 20
    np.testing.assert_allclose(table.lat[:2], [40.0, 40.0001])
    np.testing.assert_allclose(table.lon[:2], [-73.0, -73.0001])


@pytest.mark.parametrize(
    ("sep", "name"), [("\t", "p.tsv"), ("\t", "p.txt"), ("|", "p.csv"), (",", "p.txt")]
)
def test_other_delimiters(sep, name):
    text = sep.join(["lat", "lon", "note"]) + "\n" + sep.join(["1.5", "2.5", "x y"]) + "\n"
    df = read_table(text.encode(), name)
    assert list(df.columns) == ["lat", "lon", "note"]
    assert df.loc[0, "lon"] == 2.5


def test_tsv_prefers_tab_when_commas_also_split():
    text = "lat\tlon\tnote\n1.5\t2.5\ta,b,c\n"
    df = read_table(text.encode(), "p.tsv")
    assert df.loc[0, "note"] == "a,b,c"


def test_unusual_delimiter_gives_one_column_error():
    with pytest.raises(InputError, match="only one column") as err:
        read_table(b"lat:lon\n40.7:-73.9\n40.8:-73.8\n", "colon.csv")
    msg = assert_actionable(err, "'colon.csv'", "lat:lon")
    assert "comma" in msg


def test_single_column_file():
    with pytest.raises(InputError, match="only one column") as err:
        read_table(b"latitude\n40.7\n40.8\n", "one.csv")
    assert_actionable(err, "'one.csv'", "latitude")


def test_ragged_rows():
    with pytest.raises(InputError, match="Line 4 of 'ragged.csv' has 4 values") as err:
        read_table(b"lat,lon\n1,2\n3,4\n5,6,7,8\n", "ragged.csv")
    assert_actionable(err, "'lat,lon'")


def test_parse_error_beyond_the_sample():
    rows = b"1.5,2.5\n" * 10_000  # > SNIFF_BYTES, so the sniffer does not see the bad row
    with pytest.raises(InputError, match="could not be read as CSV") as err:
        read_table(b"lat,lon\n" + rows + b"5,6,7,8\n", "ragged.csv")
    assert_actionable(err, "'ragged.csv'", "line 10002")


def test_unclosed_quote():
    with pytest.raises(InputError, match="could not be read as CSV") as err:
        read_table(b'lat,lon\n1,"2\n', "quote.csv")
    assert_actionable(err, "'quote.csv'", "quote")


def test_trailing_delimiters_do_not_shift_columns():
    df = read_table(b"lat,lon\n1.5,2.5,\n3.5,4.5,\n", "trailing.csv")
    assert list(df.columns) == ["lat", "lon"]
    assert df["lat"].tolist() == [1.5, 3.5]
    assert df["lon"].tolist() == [2.5, 4.5]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"Exported from X\nlat,lon,name\n1,2,a\n", "Line 2 of 'wide.csv' has 3 values"),
        (b"lat,lon\n1,2,3,4\n5,6\n", "Line 2 of 'wide.csv' has 4 values"),
    ],
)
def test_rows_wider_than_header(content, fragment):
    with pytest.raises(InputError, match=fragment) as err:
        read_table(content, "wide.csv")
    assert_actionable(err, "header", "delete those lines")


def test_header_names_stripped():
    df = read_table(b"lat , lon\n1,2\n", "p.csv")
    assert list(df.columns) == ["lat", "lon"]


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4


def _zip_with_csv() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("points.csv", "lat,lon\n1,2\n")
    return buf.getvalue()


@pytest.mark.parametrize(
    ("content", "looks_like"),
    [
        (PNG, "PNG"),
        (_zip_with_csv(), "ZIP"),
        (np.random.default_rng(0).bytes(4096), "binary"),
        (b"%PDF-1.7\n" + bytes(200), "PDF"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(100), "Excel"),
        (b"lat,lon\n1,2\n\x00\x00\x00\x01\x02", "binary"),
    ],
)
def test_binary_renamed_csv(content, looks_like):
    with pytest.raises(InputError, match="is not a text CSV file") as err:
        read_table(content, "x.csv")
    msg = assert_actionable(err, "'x.csv'", looks_like)
    assert "Export it as CSV with a header row, or upload Parquet/GeoJSON." in msg


def test_binary_inside_gzip():
    with pytest.raises(InputError, match="is not a text CSV file") as err:
        read_table(gzip.compress(PNG), "x.csv.gz")
    assert_actionable(err, "'x.csv.gz'", "PNG", "gzip")


def test_damaged_gzip():
    data = gzip.compress(b"lat,lon\n" + b"1.5,2.5\n" * 50_000)
    with pytest.raises(InputError, match="damaged or incomplete gzip") as err:
        read_table(data[: len(data) // 2], "cut.csv.gz")
    assert_actionable(err, "'cut.csv.gz'")


def test_latin1_text():
    content = "lat,lon,ville\n48.85,2.35,Orléans\n45.76,4.84,Besançon\n".encode("latin-1")
    df = read_table(content, "fr.csv")
    assert df["ville"].tolist() == ["Orléans", "Besançon"]


def test_latin1_after_the_sniffed_sample():
    ascii_rows = "".join(f"{40 + i / 1e5:.5f},-73.9,plain\n" for i in range(8000))
    content = ("lat,lon,name\n" + ascii_rows + "41.0,-73.0,Zoë\n").encode("latin-1")
    assert len(content) > SNIFF_BYTES
    df = read_table(content, "late.csv")
    assert len(df) == 8001
    assert df["name"].iloc[-1] == "Zoë"


def test_utf8_bom_and_utf16():
    df = read_table("\ufefflat,lon\n1,2\n".encode(), "bom.csv")
    assert list(df.columns) == ["lat", "lon"]
    df = read_table("lat\tlon\n1\t2\n".encode("utf-16"), "excel-unicode.txt")
    assert list(df.columns) == ["lat", "lon"]
    assert df.loc[0, "lon"] == 2


def test_gzip_csv(tmp_path):
    content = gzip.compress(b"lat,lon\n40.7,-73.9\n40.8,-73.8\n")
    df = read_table(content, "p.csv.gz")
    assert df.shape == (2, 2)
    # gzip content under a plain .csv name is still read
    df = read_table(content, "p.csv")
    assert df.shape == (2, 2)
    path = tmp_path / "p.csv.gz"
    path.write_bytes(content)
    assert read_table(path).shape == (2, 2)
    assert read_table(str(path)).shape == (2, 2)


def test_content_decides_without_extension():
    assert read_table(b"lat,lon\n1,2\n").shape == (1, 2)
    assert read_table(gzip.compress(b"lat,lon\n1,2\n"), "upload").shape == (1, 2)
    with pytest.raises(InputError, match="not a CSV, Parquet or GeoJSON") as err:
        read_table(PNG, "upload")
    assert_actionable(err, "'upload'", "PNG")


def test_file_object_with_name():
    buf = io.BytesIO(b"lat,lon\n1,2\n")
    buf.name = "uploaded.csv"
    table = load_points_file(buf)
    assert table.source_name == "uploaded.csv"
    assert table.n_kept == 1


def test_missing_path():
    with pytest.raises(InputError, match="File not found") as err:
        read_table("/nonexistent/dir/points.csv")
    assert_actionable(err, "points.csv")


def test_spreadsheet_and_gis_extensions():
    with pytest.raises(InputError, match="spreadsheet") as err:
        read_table(_zip_with_csv(), "book.xlsx")
    assert_actionable(err, "'book.xlsx'", "CSV")
    with pytest.raises(InputError, match="GIS file") as err:
        read_table(b"SQLite format 3\x00" + bytes(100), "pts.gpkg")
    assert_actionable(err, "'pts.gpkg'", "GeoJSON")


def test_max_rows_and_bad_max_rows():
    content = b"lat,lon\n" + b"1,2\n" * 100
    assert len(read_table(content, "p.csv", max_rows=7)) == 7
    with pytest.raises(ParameterError):
        read_table(content, "p.csv", max_rows=0)


def test_progress_reports_chunks(monkeypatch):
    monkeypatch.setattr(tables, "CSV_CHUNK_ROWS", 1000)
    content = gzip.compress(
        b"lat,lon\n" + b"".join(f"{i % 90}.5,{i % 180}.25\n".encode() for i in range(10_500))
    )
    calls: list[tuple[float, str]] = []
    df = read_table(content, "big.csv.gz", progress=lambda f, m: calls.append((f, m)))
    assert len(df) == 10_500
    fractions = [f for f, _ in calls]
    assert len(calls) >= 11  # start, one per chunk (11 chunks), end
    assert fractions[0] == 0.0 and fractions[-1] == 1.0
    assert all(0.0 <= f <= 1.0 for f in fractions)
    assert fractions == sorted(fractions)
    assert calls[-1][1] == "Read 10,500 rows from 'big.csv.gz'"
    # same table as without progress (chunks concatenated with a fresh index)
    pd.testing.assert_frame_equal(df, read_table(content, "big.csv.gz"))


# --------------------------------------------------------------------------------------
# Parquet and GeoJSON
# --------------------------------------------------------------------------------------


def _parquet_bytes(df: pd.DataFrame, **kwargs) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf, **kwargs)
    return buf.getvalue()


def test_parquet_round_trip(tmp_path):
    df = pd.DataFrame(
        {
            "lat": [40.7, 40.8, np.nan],
            "lon": [-73.9, -73.8, -73.7],
            "user_id": ["u1", "u2", "u3"],
            "n": [1, 2, 3],
        }
    )
    data = _parquet_bytes(df)
    out = read_table(data, "p.parquet")
    pd.testing.assert_frame_equal(out, df)
    path = tmp_path / "p.parquet"
    path.write_bytes(data)
    pd.testing.assert_frame_equal(read_table(path), df)
    assert len(read_table(data, "p.parquet", max_rows=2)) == 2
    table = load_points_file(data, "p.parquet", user_col="user_id")
    assert table.n_kept == 2
    assert table.dropped == {"missing coordinate": 1}
    assert table.user.tolist() == ["u1", "u2"]


def test_parquet_named_index_becomes_column():
    df = pd.DataFrame({"lat": [1.0], "lon": [2.0]}, index=pd.Index(["a"], name="user_id"))
    out = read_table(_parquet_bytes(df), "p.parquet")
    assert list(out.columns) == ["user_id", "lat", "lon"]


def test_parquet_empty_and_mismatched():
    empty = _parquet_bytes(pd.DataFrame({"lat": pd.Series([], dtype=float), "lon": []}))
    with pytest.raises(InputError, match="no data rows") as err:
        read_table(empty, "e.parquet")
    assert_actionable(err, "'e.parquet'")
    with pytest.raises(InputError, match="not a Parquet file") as err:
        read_table(b"lat,lon\n1,2\n", "text.parquet")
    assert_actionable(err, "'text.parquet'", "Rename it to end in .csv")
    with pytest.raises(InputError, match="looks like a Parquet file") as err:
        read_table(_parquet_bytes(pd.DataFrame({"a": [1]})), "renamed.csv")
    assert_actionable(err, "'renamed.csv'", ".parquet")
    with pytest.raises(InputError, match="could not be read as Parquet") as err:
        read_table(b"PAR1" + bytes(64), "broken.parquet")
    assert_actionable(err, "'broken.parquet'")


def test_geoparquet_points():
    gpd = pytest.importorskip("geopandas")
    gdf = gpd.GeoDataFrame(
        {"kind": ["a", "b"]}, geometry=gpd.points_from_xy([2.35, 4.84], [48.85, 45.76]), crs=4326
    )
    buf = io.BytesIO()
    gdf.to_parquet(buf)
    df = read_table(buf.getvalue(), "pts.parquet")
    assert list(df.columns) == ["longitude", "latitude", "kind"]
    assert df["latitude"].tolist() == [48.85, 45.76]


def _feature_collection(features: list[dict]) -> bytes:
    return json.dumps({"type": "FeatureCollection", "features": features}).encode()


def _point(lon, lat, **props) -> dict:
    geometry = None if lon is None else {"type": "Point", "coordinates": [lon, lat]}
    return {"type": "Feature", "properties": props, "geometry": geometry}


def test_geojson_points():
    data = _feature_collection(
        [
            _point(-73.9, 40.7, name="a", latitude=1),
            _point(-73.8, 40.8, name="b", latitude=2),
            _point(None, None, name="c", latitude=3),
        ]
    )
    df = read_table(data, "pts.geojson")
    assert list(df.columns) == ["longitude", "latitude", "name", "latitude_property"]
    assert df["longitude"].tolist()[:2] == [-73.9, -73.8]
    assert df["name"].tolist() == ["a", "b", "c"]
    table = load_points_file(data, "pts.geojson")
    assert (table.lat_column, table.lon_column) == ("latitude", "longitude")
    assert table.n_read == 3 and table.n_kept == 2
    assert table.dropped == {"missing coordinate": 1}


def test_geojson_other_crs_is_reprojected():
    gpd = pytest.importorskip("geopandas")
    gdf = gpd.GeoDataFrame(
        {"v": [1]}, geometry=gpd.points_from_xy([-73.9], [40.7]), crs=4326
    ).to_crs(32618)
    buf = io.BytesIO()
    gdf.to_file(buf, driver="GeoJSON")
    df = read_table(buf.getvalue(), "utm.geojson")
    assert df["longitude"].iloc[0] == pytest.approx(-73.9)
    assert df["latitude"].iloc[0] == pytest.approx(40.7)


def test_geojson_errors():
    polygon = {
        "type": "Feature",
        "properties": {},
        "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]]]},
    }
    with pytest.raises(InputError, match="not points") as err:
        read_table(_feature_collection([polygon, _point(1, 2)]), "areas.geojson")
    assert_actionable(err, "'areas.geojson'", "1 Polygon")
    with pytest.raises(InputError, match="no features") as err:
        read_table(_feature_collection([]), "none.geojson")
    assert_actionable(err, "'none.geojson'")
    with pytest.raises(InputError, match="could not be read as GeoJSON") as err:
        read_table(b'{"type": "FeatureCollection", "features": [', "cut.geojson")
    assert_actionable(err, "'cut.geojson'")
    with pytest.raises(InputError, match="not a GeoJSON file") as err:
        read_table(b"lat,lon\n1,2\n", "text.geojson")
    assert_actionable(err, "'text.geojson'")
    with pytest.raises(InputError, match="looks like JSON") as err:
        read_table(_feature_collection([_point(1, 2)]), "renamed.csv")
    assert_actionable(err, "'renamed.csv'", ".geojson")


# --------------------------------------------------------------------------------------
# Column detection
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("columns", "expected"),
    [
        (["lat", "lon"], ("lat", "lon")),
        (["Lat", "Lon", "Base"], ("Lat", "Lon")),
        (["Date", "Latitude", "Longitude", "Magnitude"], ("Latitude", "Longitude")),
        (["LATITUDE", "LONGITUDE"], ("LATITUDE", "LONGITUDE")),
        (["lat", "lng"], ("lat", "lng")),
        (["Lat", "Long"], ("Lat", "Long")),
        (["y", "x"], ("y", "x")),
        (["X", "Y", "name"], ("Y", "X")),
        (["POINT_X", "POINT_Y"], ("POINT_Y", "POINT_X")),
        (["lat_dd", "lon_dd"], ("lat_dd", "lon_dd")),
        (["Start Lat", "Start Lon"], ("Start Lat", "Start Lon")),
        (["startLat", "startLng"], ("startLat", "startLng")),
        (["decimalLatitude", "decimalLongitude"], ("decimalLatitude", "decimalLongitude")),
        (
            ["pickup_longitude", "pickup_latitude", "dropoff_longitude", "dropoff_latitude"],
            ("pickup_latitude", "pickup_longitude"),
        ),
        (
            ["dropoff_latitude", "pickup_longitude", "dropoff_longitude", "pickup_latitude"],
            ("dropoff_latitude", "dropoff_longitude"),
        ),
        (["Latitude (deg)", "Longitude (deg)"], ("Latitude (deg)", "Longitude (deg)")),
        (["GPS_LAT", "GPS_LON"], ("GPS_LAT", "GPS_LON")),
        (["x", "y", "lat", "lon"], ("lat", "lon")),
        (["X", "Y", "Start Lat", "Start Lon"], ("Start Lat", "Start Lon")),
        ([" lat ", " lon "], (" lat ", " lon ")),
        (["latency", "plate", "long_name", "only"], (None, None)),
        (["lat", "long_name"], ("lat", None)),
        (["start_lat", "start_long", "long_name"], ("start_lat", "start_long")),
        (["a", "b", "c"], (None, None)),
        (["lat", "b"], ("lat", None)),
        (["b", "longitude"], (None, "longitude")),
    ],
)
def test_detect_coordinate_columns(columns, expected):
    df = pd.DataFrame([[1.0] * len(columns)], columns=columns)
    assert detect_coordinate_columns(df) == expected


def test_detect_prefers_numeric_columns():
    df = pd.DataFrame({"long_name": ["Main St"], "lat": [40.7], "long": [-73.9]})
    assert detect_coordinate_columns(df) == ("lat", "long")


@pytest.mark.parametrize(
    ("columns", "expected"),
    [
        (["lat", "lon", "user_id"], "user_id"),
        (["userid", "lat"], "userid"),
        (["UserID", "lat"], "UserID"),
        (["uid", "lat"], "uid"),
        (["user", "lat"], "user"),
        (["User ID", "lat"], "User ID"),
        (["person_id", "lat"], "person_id"),
        (["device_id", "lat"], "device_id"),
        (["deviceId", "lat"], "deviceId"),
        (["hashed_user_id", "lat"], "hashed_user_id"),
        (["participant_id"], "participant_id"),
        (["taxi_id", "lat"], "taxi_id"),
        (["device_id", "user_id"], "user_id"),
        (["lat", "lon", "Base"], None),
        (["trip_id", "lat", "lon"], None),
        (["username_length"], None),
        (["id", "lat"], None),
    ],
)
def test_detect_user_column(columns, expected):
    df = pd.DataFrame([[1] * len(columns)], columns=columns)
    assert detect_user_column(df) == expected


# --------------------------------------------------------------------------------------
# load_points: validation
# --------------------------------------------------------------------------------------


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
    assert str(err.value) == (
        "Column 'lat' has 3 values that are not numbers (data rows 2, 5, 9: 'abc', 'N/A', "
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


# --------------------------------------------------------------------------------------
# User ids
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# load_points_file
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# Real data
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# Boundaries
# --------------------------------------------------------------------------------------

gpd = pytest.importorskip("geopandas")
shapely = pytest.importorskip("shapely")

NYC_BOUNDS = (-74.255591, 40.496115, -73.700009, 40.915533)


@pytest.fixture(scope="module")
def squares():
    """Two unit-ish squares near NYC, one invalid (a bow-tie), in EPSG:4326."""
    good = shapely.box(-74.0, 40.6, -73.9, 40.7)
    bowtie = shapely.Polygon([(-73.9, 40.6), (-73.8, 40.7), (-73.8, 40.6), (-73.9, 40.7)])
    return gpd.GeoDataFrame({"name": ["a", "b"]}, geometry=[good, bowtie], crs=4326)


def test_nyc_boroughs():
    path = need(BOROUGHS)
    gdf = read_boundaries(path)
    assert len(gdf) == 5
    assert gdf.crs.to_epsg() == 4326
    assert gdf.is_valid.all()  # the source has invalid polygons; they are repaired
    assert set(gdf.geom_type) <= {"Polygon", "MultiPolygon"}
    assert boundary_bounds(gdf) == pytest.approx(NYC_BOUNDS, abs=1e-6)
    same = read_boundaries(path.read_bytes(), "nyc_boroughs.geojson")
    assert len(same) == 5


def test_invalid_geometry_repaired(squares):
    buf = io.BytesIO()
    squares.to_file(buf, driver="GeoJSON")
    gdf = read_boundaries(buf.getvalue(), "b.geojson")
    assert gdf.is_valid.all()
    assert set(gdf.geom_type) <= {"Polygon", "MultiPolygon"}
    assert boundary_bounds(gdf) == pytest.approx((-74.0, 40.6, -73.8, 40.7))


def test_geopackage_in_bytes(squares):
    buf = io.BytesIO()
    squares.to_crs(2263).to_file(buf, driver="GPKG", layer="areas")  # NY state plane, feet
    gdf = read_boundaries(buf.getvalue(), "areas.gpkg")
    assert gdf.crs.to_epsg() == 4326
    assert len(gdf) == 2
    assert boundary_bounds(gdf) == pytest.approx((-74.0, 40.6, -73.8, 40.7), abs=1e-6)


def test_geopackage_with_two_polygon_layers(squares, tmp_path):
    path = tmp_path / "two.gpkg"
    squares.to_file(path, layer="one")
    squares.to_file(path, layer="two")
    with pytest.raises(InputError, match="2 layers") as err:
        read_boundaries(path.read_bytes(), "two.gpkg")
    assert_actionable(err, "'two.gpkg'", "one, two")


def _zip_dir(folder: Path, arcnames: dict[str, str] | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.iterdir()):
            zf.write(path, (arcnames or {}).get(path.name, path.name))
    return buf.getvalue()


def test_zipped_shapefile(squares, tmp_path):
    folder = tmp_path / "shp"
    folder.mkdir()
    squares.to_crs(32618).to_file(folder / "areas.shp")
    data = _zip_dir(folder)
    gdf = read_boundaries(data, "areas.zip")
    assert gdf.crs.to_epsg() == 4326
    assert gdf["name"].tolist() == ["a", "b"]
    assert boundary_bounds(gdf) == pytest.approx((-74.0, 40.6, -73.8, 40.7), abs=1e-6)
    # in a folder inside the zip, with macOS litter
    nested = _zip_dir(folder, {p.name: f"data/{p.name}" for p in folder.iterdir()})
    with zipfile.ZipFile(io.BytesIO(nested), "a") as zf:
        zf.writestr("__MACOSX/data/._areas.shp", b"junk")
    buf = io.BytesIO(nested)
    assert len(read_boundaries(buf.getvalue(), "nested.zip")) == 2


def test_zipped_shapefile_without_prj(squares, tmp_path):
    lonlat = tmp_path / "lonlat"
    lonlat.mkdir()
    squares.to_file(lonlat / "areas.shp")
    (lonlat / "areas.prj").unlink()
    gdf = read_boundaries(_zip_dir(lonlat), "noprj.zip")
    assert gdf.crs.to_epsg() == 4326  # assumed: coordinates look like degrees

    metres = tmp_path / "metres"
    metres.mkdir()
    squares.to_crs(32618).to_file(metres / "areas.shp")
    (metres / "areas.prj").unlink()
    with pytest.raises(InputError, match="no coordinate reference system") as err:
        read_boundaries(_zip_dir(metres), "utm.zip")
    assert_actionable(err, "'utm.zip'", ".prj")


def test_shapefile_path_on_disk(squares, tmp_path):
    squares.to_file(tmp_path / "areas.shp")
    assert len(read_boundaries(tmp_path / "areas.shp")) == 2


@pytest.mark.parametrize(
    "member", ["../evil.shp", "/etc/evil.shp", "a/../../evil.shp", "C:/evil.shp"]
)
def test_zip_path_traversal_rejected(member):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(zipfile.ZipInfo(member), b"not really a shapefile")
    with pytest.raises(InputError, match="unsafe path") as err:
        read_boundaries(buf.getvalue(), "evil.zip")
    assert_actionable(err, "'evil.zip'", member)


def test_zip_bomb_rejected_before_reading():
    buf = io.BytesIO()
    zeros = bytes(1 << 20)
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        with zf.open("bomb.shp", "w", force_zip64=True) as member:
            for _ in range(300):
                member.write(zeros)
    data = buf.getvalue()
    assert len(data) < 1_000_000
    start = time.perf_counter()
    with pytest.raises(InputError, match="would expand to 300 MB") as err:
        read_boundaries(data, "bomb.zip")
    assert time.perf_counter() - start < 2  # decided from the directory, nothing inflated
    assert_actionable(err, "'bomb.zip'", "200x")


def test_zip_without_shapefile():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("readme.txt", "hello")
    with pytest.raises(InputError, match="no shapefile") as err:
        read_boundaries(buf.getvalue(), "empty.zip")
    assert_actionable(err, "'empty.zip'", "readme.txt")


def test_boundary_errors():
    with pytest.raises(InputError, match="empty") as err:
        read_boundaries(b"", "b.geojson")
    assert_actionable(err, "'b.geojson'")
    with pytest.raises(InputError, match="not a GeoJSON, GeoPackage or zipped shapefile") as err:
        read_boundaries(b"lat,lon\n1,2\n", "b.csv")
    assert_actionable(err, "'b.csv'")
    with pytest.raises(InputError, match="could not be read as a boundary file") as err:
        read_boundaries(b"{not json at all", "broken.geojson")
    assert_actionable(err, "'broken.geojson'")
    with pytest.raises(InputError, match="has no features") as err:
        read_boundaries(_feature_collection([]), "none.geojson")
    assert_actionable(err, "'none.geojson'")
    with pytest.raises(InputError, match="damaged ZIP") as err:
        read_boundaries(b"PK\x03\x04" + bytes(50), "bad.zip")
    assert_actionable(err, "'bad.zip'")


def test_boundary_bounds_reprojects_and_rejects_empty(squares):
    assert boundary_bounds(squares.to_crs(32618)) == pytest.approx(
        (-74.0, 40.6, -73.8, 40.7), abs=1e-6
    )
    with pytest.raises(InputError, match="no areas") as err:
        boundary_bounds(squares.iloc[:0])
    assert_actionable(err)
