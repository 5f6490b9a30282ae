"""Tests of dpcore.data.columns: which columns are taken for the coordinates and for the user id.
"""

from __future__ import annotations

import pandas as pd
import pytest

from dpcore.data.columns import detect_coordinate_columns, detect_user_column


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
