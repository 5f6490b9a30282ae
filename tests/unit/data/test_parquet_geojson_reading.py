"""Tests of reading Parquet, GeoParquet and GeoJSON point files (dpcore.data.tables.read_table,
dpcore.data.points.load_points_file): round trips, indexes, reprojection and refusals.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from input_files import assert_actionable, feature_collection

from dpcore.data.points import load_points_file
from dpcore.data.tables import read_table
from dpcore.errors import InputError


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


def _point(lon, lat, **props) -> dict:
    geometry = None if lon is None else {"type": "Point", "coordinates": [lon, lat]}
    return {"type": "Feature", "properties": props, "geometry": geometry}


def test_geojson_points():
    data = feature_collection(
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
        read_table(feature_collection([polygon, _point(1, 2)]), "areas.geojson")
    assert_actionable(err, "'areas.geojson'", "1 Polygon")
    with pytest.raises(InputError, match="no features") as err:
        read_table(feature_collection([]), "none.geojson")
    assert_actionable(err, "'none.geojson'")
    with pytest.raises(InputError, match="could not be read as GeoJSON") as err:
        read_table(b'{"type": "FeatureCollection", "features": [', "cut.geojson")
    assert_actionable(err, "'cut.geojson'")
    with pytest.raises(InputError, match="not a GeoJSON file") as err:
        read_table(b"lat,lon\n1,2\n", "text.geojson")
    assert_actionable(err, "'text.geojson'")
    with pytest.raises(InputError, match="looks like JSON") as err:
        read_table(feature_collection([_point(1, 2)]), "renamed.csv")
    assert_actionable(err, "'renamed.csv'", ".geojson")


def test_a_geojson_that_cannot_be_parsed_is_read_from_disk_once(tmp_path, monkeypatch):
    """The error path words the problem from the bytes already read, not from a second full read."""
    from dpcore.data.text import Source

    path = tmp_path / "cut.geojson"
    path.write_bytes(b'{"type": "FeatureCollection", "features": [')
    reads = []
    real = Source.read_all
    monkeypatch.setattr(Source, "read_all", lambda self: reads.append(self.path) or real(self))
    with pytest.raises(InputError, match="could not be read as GeoJSON.*not valid JSON") as err:
        read_table(path, "cut.geojson")
    assert_actionable(err, "'cut.geojson'")
    assert reads == [path]
