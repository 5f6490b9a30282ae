"""Uploaded workloads of lon/lat rectangles: parsing, bad inputs, mapping to the grid's cells."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpcore.data.domain import Bounds, Grid
from dpcore.errors import InputError
from dpcore.points.workload_io import (
    MAX_RECTANGLES,
    RectangleList,
    map_to_grid,
    parse_rectangles,
    read_rectangles,
)

# 4 x 4 cells over [0, 1]²: edges 0, .25, .5, .75, 1; centres .125, .375, .625, .875 (exact floats)
GRID = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 4, 4)


def test_reads_names_weights_groups_and_defaults() -> None:
    text = ("name,lon_min,lat_min,lon_max,lat_max,weight,group\n"
            "\"Centre, north\",0.1,0.5,0.6,0.9,2,core\n"
            ",0,0,1,1,,\n")
    r = parse_rectangles(text)
    assert len(r) == 2
    assert r[0] == {"name": "Centre, north", "west": 0.1, "south": 0.5, "east": 0.6, "north": 0.9,
                    "weight": 2.0, "group": "core"}
    assert r[1]["name"] == "rectangle 2" and r[1]["weight"] == 1.0 and r[1]["group"] == "(no group)"
    np.testing.assert_array_equal(r.bounds()[1], [0, 0, 1, 1])


@pytest.mark.parametrize("header", ["west,south,east,north", "XMIN,YMIN,XMAX,YMAX", " Lon_Min ; Lat_Min ; Lon_Max ; Lat_Max",
                                    "minx\tminy\tmaxx\tmaxy"])
def test_column_aliases_and_separators_case_insensitive(header) -> None:
    sep = ";" if ";" in header else "\t" if "\t" in header else ","
    r = parse_rectangles(header + "\n" + sep.join(["0.1", "0.2", "0.3", "0.4"]) + "\n")
    assert (r[0]["west"], r[0]["south"], r[0]["east"], r[0]["north"]) == (0.1, 0.2, 0.3, 0.4)
    assert r[0]["group"] == "all" and r[0]["weight"] == 1.0


def test_round_trip_through_params_json_and_a_release_record(tmp_path) -> None:
    r = parse_rectangles("lon_min,lat_min,lon_max,lat_max,name\n0,0,0.5,0.5,a\n0.5,0.5,1,1,b\n")
    assert RectangleList(r.to_list()) == r
    assert RectangleList(json.dumps(r.to_list())) == r
    rec = {"mechanism": {"name": "matrix", "params": {"workload": "uploaded", "rectangles": r.to_list()}}}
    p = tmp_path / "release.json"
    p.write_text(json.dumps(rec))
    assert read_rectangles(p) == r
    assert read_rectangles(b"\xef\xbb\xbfxmin,ymin,xmax,ymax\n0,0,0.5,0.5\n")[0]["east"] == 0.5  # BOM


@pytest.mark.parametrize("text, match", [
    ("lon_min,lat_min,lon_max\n0,0,1\n", r"no column for north"),
    ("xmin,ymin,xmax,ymax\n", r"holds no rectangle"),
    ("xmin,ymin,xmax,ymax\n0,0,1,1\n0.6,0,0.2,1\n", r"xmin is larger than xmax in data row 2.*Swap"),
    ("xmin,ymin,xmax,ymax\n0,0.9,1,0.1\n", r"ymin is larger than ymax in data row 1"),
    ("xmin,ymin,xmax,ymax\n0,0,0,1\n", r"equals xmax in data row 1.*no area"),
    ("xmin,ymin,xmax,ymax\n0,0,abc,1\n", r"'xmax' \(east\) is not a number in data row 1"),
    ("xmin,ymin,xmax,ymax\n0,0,1,1\n0,,1,1\n", r"'ymin' \(south\) is empty in data row 2"),
    ("xmin,ymin,xmax,ymax\n0,0,1,nan\n", r"'ymax' \(north\) is not a number in data row 1"),
    ("xmin,ymin,xmax,ymax\n-74.0,40.7,-73.9,95\n", r"Latitudes must lie in -90..90.*data row 1.*swapped"),
    ("xmin,ymin,xmax,ymax\n-190,0,1,1\n", r"Longitudes must lie in -180..180.*data row 1"),
    ("xmin,ymin,xmax,ymax,weight\n0,0,1,1,-2\n", r"'weight' must be a positive number.*data row 1"),
    ("", r"empty"),
])
def test_bad_inputs_name_the_row_and_the_fix(text, match) -> None:
    with pytest.raises(InputError, match=match):
        parse_rectangles(text)


def test_too_many_rectangles_and_bad_json() -> None:
    rows = "\n".join("0,0,1,1" for _ in range(MAX_RECTANGLES + 1))
    with pytest.raises(InputError, match=f"at most {MAX_RECTANGLES:,}"):
        parse_rectangles("xmin,ymin,xmax,ymax\n" + rows)
    with pytest.raises(InputError, match="not valid JSON"):
        RectangleList("[{bad")
    with pytest.raises(InputError, match="holds no rectangles"):
        RectangleList('{"mechanism": {"params": {}}}')
    with pytest.raises(InputError, match="does not exist"):
        read_rectangles("/nonexistent/rects.csv")


def test_cells_are_those_whose_centres_lie_inside_half_open() -> None:
    r = RectangleList([
        {"west": 0.0, "south": 0.0, "east": 1.0, "north": 1.0},  # the whole area
        {"west": 0.125, "south": 0.125, "east": 0.625, "north": 0.375},  # edges exactly on centres
        {"west": 0.2, "south": 0.6, "east": 0.55, "north": 0.95},  # between centres
        {"west": 0.25, "south": 0.25, "east": 0.5, "north": 0.5},  # exactly one cell's box
    ])
    m = map_to_grid(r, GRID)
    # (r0, r1, c0, c1): rows are latitude (row 0 at the south), columns longitude
    np.testing.assert_array_equal(m.cells, [
        [0, 4, 0, 4],
        [0, 1, 0, 2],  # centre on the west/south edge counts, on the east/north edge does not
        [2, 4, 1, 2],
        [1, 2, 1, 2],
    ])
    assert m.warnings == () and m.clipped.size == 0


def test_adjacent_rectangles_on_a_centre_line_share_no_cell() -> None:
    r = RectangleList([{"west": 0.0, "south": 0.0, "east": 0.375, "north": 1.0},
                       {"west": 0.375, "south": 0.0, "east": 1.0, "north": 1.0}])
    a, b = map_to_grid(r, GRID).cells
    assert a[3] == b[2] == 1  # column 1 (centre 0.375) belongs to the eastern rectangle only


def test_partly_outside_is_clipped_with_a_warning_naming_rows() -> None:
    r = RectangleList([{"west": -5.0, "south": 0.5, "east": 0.5, "north": 3.0},
                       {"west": 0.0, "south": 0.0, "east": 1.0, "north": 1.0}])
    m = map_to_grid(r, GRID)
    np.testing.assert_array_equal(m.cells[0], [2, 4, 0, 2])
    assert m.clipped.tolist() == [0]
    assert "clipped" in m.warnings[0] and "data row 1" in m.warnings[0]


def test_outside_or_no_centre_is_refused_naming_rows() -> None:
    r = RectangleList([
        {"west": 0.0, "south": 0.0, "east": 1.0, "north": 1.0},
        {"west": 2.0, "south": 2.0, "east": 3.0, "north": 3.0},  # wholly outside
        {"west": 0.13, "south": 0.13, "east": 0.2, "north": 0.2},  # inside one cell, no centre
        {"west": 1.0, "south": 0.0, "east": 2.0, "north": 1.0},  # touches the east edge only
    ])
    with pytest.raises(InputError) as e:
        map_to_grid(r, GRID)
    msg = str(e.value)
    assert "wholly outside the grid's area" in msg.lower() and "data rows 2, 4" in msg
    assert "no cell centre" in msg and "data row 3" in msg and "finer grid" in msg
