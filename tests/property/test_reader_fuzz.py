"""Fuzzing the readers: whatever the bytes, a valid result or a DPCoreError, never another exception.

Random bytes, random CSV-like text and random GeoJSON-like dicts go through every reader a
person's file reaches (points, boundaries, census and hierarchy tables, rectangle workloads,
area-code sets, O/D trips).  The profile from tests/conftest.py makes the examples fixed
("ci": derandomized), and the example counts are kept small so that the suite stays fast.
"""

from __future__ import annotations

import gzip
import json
import warnings

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpcore.areas import area_sets
from dpcore.data.boundaries import read_boundaries
from dpcore.data.code_tables import read_code_table
from dpcore.data.hierarchy import Hierarchy
from dpcore.data.points import load_points_file
from dpcore.data.tables import read_table
from dpcore.errors import DPCoreError
from dpcore.flows.counts import ODCounts
from dpcore.points import workload_io

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_H = Hierarchy.from_frame(pd.DataFrame({"s": ["01", "01", "02"], "c": ["001", "002", "003"]}), ["s", "c"])


def _points(data: bytes, name: str) -> object:
    return load_points_file(data, name)


def _hierarchy(data: bytes, name: str) -> object:
    df = read_code_table(data, name)
    return Hierarchy.from_frame(df, [str(c) for c in df.columns[:2]])


def _od(data: bytes, name: str) -> object:
    df = read_code_table(data, name)
    cols = [str(c) for c in df.columns]
    return ODCounts.from_frame(df, _H, origin=cols[0], destination=cols[-1])


READERS = {
    "read_table": lambda d, n: read_table(d, n),
    "load_points_file": _points,
    "read_boundaries": lambda d, n: read_boundaries(d, n),
    "read_census_file": lambda d, n: read_code_table(d, n),
    "hierarchy": _hierarchy,
    "od trips": _od,
    "read_rectangles": lambda d, n: workload_io.read_rectangles(d, n),
    "read_area_sets": lambda d, n: area_sets.read_area_sets(d, _H, n),
}


def valid_or_dpcore_error(reader: str, data: bytes, name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # GDAL/pandas may warn about odd input; only errors matter here
        try:
            READERS[reader](data, name)
        except DPCoreError as e:
            assert str(e).strip(), "a DPCoreError must say what is wrong"


NAMES = st.sampled_from(["f.csv", "f.txt", "f.tsv", "f.csv.gz", "f.geojson", "f.json", "f.parquet", "f", ""])

# ------------------------------------------------------------------ random bytes


@pytest.mark.parametrize("reader", list(READERS))
@FUZZ
@given(data=st.binary(max_size=2048), name=NAMES)
def test_random_bytes(reader: str, data: bytes, name: str) -> None:
    valid_or_dpcore_error(reader, data, name)


@pytest.mark.parametrize("reader", ["read_table", "read_census_file", "read_area_sets"])
@settings(max_examples=30, deadline=None)
@given(data=st.binary(max_size=512), cut=st.integers(0, 600))
def test_random_gzip_content_and_truncation(reader: str, data: bytes, cut: int) -> None:
    gz = gzip.compress(data)
    valid_or_dpcore_error(reader, gz[: max(cut, 2)] if cut < len(gz) else gz, "f.csv.gz")


# ------------------------------------------------------------------ CSV-like text

_CELL = st.one_of(
    st.sampled_from(["", " ", "nan", "NaN", "inf", "-inf", "NULL", "N/A", "1e400", "0x1F", "40,7", "abc", '"',
                     '"a,b"', "01", "001", "999", "\u00e9", "\x00", "1.5", "-73.9", "40.7", "181", "-91", "1" * 30,
                     "true"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-10**20, 10**20).map(str),
    st.text(max_size=8),
)
_HEADER = st.lists(st.sampled_from(["lat", "lon", "latitude", "longitude", "x", "y", "user_id", "s", "c", "origin",
                                    "destination", "count", "query", "area", "level", "lon_min", "lat_min",
                                    "lon_max", "lat_max", "weight", "", " lat ", "lat"]),
                   min_size=1, max_size=6)


@st.composite
def csv_text(draw: st.DrawFn) -> bytes:
    sep = draw(st.sampled_from([",", ";", "\t", "|", " "]))
    header = draw(_HEADER)
    rows = draw(st.lists(st.lists(_CELL, min_size=0, max_size=len(header) + 2), max_size=12))
    eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    text = eol.join([sep.join(header), *(sep.join(r) for r in rows)])
    if draw(st.booleans()):
        text += eol
    enc = draw(st.sampled_from(["utf-8", "utf-8-sig", "latin-1", "utf-16"]))
    return text.encode(enc, errors="replace")


@pytest.mark.parametrize("reader", list(READERS))
@FUZZ
@given(data=csv_text(), name=st.sampled_from(["f.csv", "f.tsv", "f.txt", "f"]))
def test_random_csv_like_text(reader: str, data: bytes, name: str) -> None:
    valid_or_dpcore_error(reader, data, name)


# ------------------------------------------------------------------ GeoJSON-like dicts

_COORD = st.one_of(st.floats(-200, 200), st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10),
                   st.text(max_size=3), st.none())
_POS = st.lists(_COORD, min_size=0, max_size=4)
_RING = st.lists(_POS, min_size=0, max_size=6)
_GEOM = st.one_of(
    st.fixed_dictionaries({"type": st.just("Point"), "coordinates": _POS}),
    st.fixed_dictionaries({"type": st.just("Polygon"), "coordinates": st.lists(_RING, max_size=2)}),
    st.fixed_dictionaries({"type": st.just("MultiPolygon"), "coordinates": st.lists(st.lists(_RING, max_size=2),
                                                                                     max_size=2)}),
    st.fixed_dictionaries({"type": st.sampled_from(["LineString", "Nope", "GeometryCollection"]),
                           "coordinates": st.lists(_POS, max_size=3)}),
    st.none(),
    st.integers(),
)
_PROPS = st.one_of(st.none(), st.dictionaries(st.sampled_from(["id", "name", "latitude", "pop", ""]),
                                              st.one_of(st.integers(), st.text(max_size=5), st.none()),
                                              max_size=3))
_FEATURE = st.fixed_dictionaries({"type": st.sampled_from(["Feature", "Feature", "feature"]), "geometry": _GEOM,
                                  "properties": _PROPS})
_DOC = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["FeatureCollection", "FeatureCollection", "Collection"]),
                           "features": st.lists(_FEATURE, max_size=5)}),
    _FEATURE,
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


@pytest.mark.parametrize("reader", ["read_table", "load_points_file", "read_boundaries", "read_rectangles"])
@FUZZ
@given(doc=_DOC, name=st.sampled_from(["f.geojson", "f.json", "f"]))
def test_random_geojson_like_dicts(reader: str, doc: dict, name: str) -> None:
    valid_or_dpcore_error(reader, json.dumps(doc, allow_nan=True).encode(), name)
