"""Issue 26, item 2: uploaded trips and area lists are guessed from their names and values, on the
real public files: a count column only when its name says so; levels from the fewest codes to the
most, only columns that nest; free text offered as names, not levels."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcore.data.area_columns import free_text, guess_area_columns, name_column
from dpcore.data.boundaries import read_boundaries
from dpcore.data.columns import count_like
from dpcore.data.hierarchy import Hierarchy

ROOT = Path(__file__).resolve().parents[3]
SHARED = Path(os.environ.get("DPCORE_SHARED_DATA", ROOT.parent / "shared" / "data"))
DEMO = ROOT / "assets" / "demo"


def shared(rel: str) -> Path:
    path = SHARED / rel
    if not path.exists():
        pytest.skip(f"{rel} is not in the public data folder")
    return path


@pytest.mark.parametrize(("rel", "counts"), [
    ("od/nyc_green_taxi_trips_2020-04.csv.gz", []),  # passenger_count counts passengers, not trips
    ("od/ri_lodes7_od_main_JT00_2019.csv.gz", ["S000"]),
    ("od/ri_lodes7_od_aux_JT00_2019.csv.gz", ["S000"]),
    ("od/us_county_commuting_flows_acs2009_2013.csv.gz", ["flow"]),
])
def test_a_count_column_only_when_its_name_says_so(rel: str, counts: list[str]) -> None:
    cols = pd.read_csv(shared(rel), nrows=0).columns
    assert [c for c in cols if count_like(c)] == counts


def test_count_names() -> None:
    assert all(map(count_like, ["count", "n", "trips", "flow", "S000", "trip_count", "n_trips", "TripCount",
                                "num_trips", "workers", "jobs_total"]))
    assert not any(map(count_like, ["passenger_count", "n_passengers", "total_amount", "bike_count", "SA01",
                                    "trip_distance", "PULocationID"]))


def test_the_taxi_zone_lookup_gives_borough_then_zone_with_zone_names() -> None:
    lookup = pd.read_csv(shared("boundaries/nyc_taxi_zone_lookup.csv"), dtype=str)
    g = guess_area_columns(lookup)
    # 7 boroughs then 265 zones; service_zone cuts across boroughs (does not nest); Zone is free text
    assert g.levels == ["Borough", "LocationID"]
    assert g.names == {"LocationID": "Zone"}
    h = Hierarchy.from_frame(lookup, g.levels, names=g.names)
    assert h.sizes[1:] == [7, 265]
    zone = dict(zip(h.labels(2), h.display_names(2), strict=True))
    assert zone["74"] == "East Harlem North" and zone["1"] == "Newark Airport"


def test_the_lodes_crosswalk_levels_nest_from_fewest_codes_to_most_with_their_names() -> None:
    xw = pd.read_csv(shared("od/ri_lodes7_xwalk_2010blocks.csv.gz"), dtype=str)
    g = guess_area_columns(xw)
    assert g.levels[-4:] == ["cty", "trct", "bgrp", "tabblk2010"]
    sizes = [xw[c].nunique() for c in g.levels]
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)
    for coarse, fine in zip(g.levels, g.levels[1:], strict=False):  # every code has one parent
        assert xw.groupby(fine)[coarse].nunique().max() == 1, (coarse, fine)
    assert g.names["cty"] == "ctyname" and g.names["trct"] == "trctname"
    assert not set(g.levels) & {"ctyname", "trctname", "blklatdd", "blklondd", "createdate"}


def test_census_levels_with_codes_local_to_their_parent_come_from_their_names() -> None:
    tracts = pd.read_csv(shared("census/us_tract_population_2020_cenpop.csv.gz"), dtype=str,
                         encoding="utf-8-sig", nrows=20_000)
    assert guess_area_columns(tracts).levels == ["STATEFP", "COUNTYFP", "TRACTCE"]


def test_free_text_is_names_and_codes_are_not() -> None:
    assert free_text(pd.Series(["Jamaica Bay", "Astoria", None]))
    assert not free_text(pd.Series(["B02512", "440010301001008", "EWR", "N/A"]))
    assert not free_text(pd.Series([], dtype=object))


@pytest.mark.parametrize(("rel", "column"), [
    ("boundaries/us_states_2010_20m.geojson", "NAME"),
    ("boundaries/us_counties_2010_20m_fips.geojson", "NAME"),
    ("boundaries/ri_tracts_2020_tiger2023.geojson", "NAMELSAD"),
    ("boundaries/nyc_taxi_zones.geojson", "zone"),
    ("boundaries/nyc_boroughs.geojson", "boro_name"),
])
def test_the_name_column_of_each_boundary_file(rel: str, column: str) -> None:
    assert name_column(read_boundaries(DEMO / rel)) == column


def test_no_levels_from_a_table_of_names_and_numbers_only() -> None:
    df = pd.DataFrame({"name": ["a b", "c d"], "population": [1, 2], "lat": [1.0, 2.0]})
    assert guess_area_columns(df).levels == []
    assert guess_area_columns(pd.DataFrame({"zone": np.array(["1", "2"])})).levels == ["zone"]
