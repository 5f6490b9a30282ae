"""Unit tests of dpcore.data.domain: bounds, grid, cell indexing, aggregation, rectangles.

Expected values are worked out by hand on tiny inputs (bounds chosen so that cell
edges are exact binary fractions) or by brute force with plain numpy slicing.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcore.data.domain import (
    MAX_SIDE,
    Aggregate,
    Bounds,
    Grid,
    aggregate_points,
    block_edges,
    block_rects,
    block_sums,
    cap_user_contributions,
    cumsum_down,
    paint_rects,
    rect_sums,
    validate_rects,
)
from dpcore.errors import DPCoreError, ParameterError

# ---------------------------------------------------------------------------------------------
# Bounds
# ---------------------------------------------------------------------------------------------


class TestBoundsValidation:
    def test_valid_bounds_keep_their_values(self) -> None:
        b = Bounds(-74.06, 40.64, -73.78, 40.83)
        assert b.as_tuple() == (-74.06, 40.64, -73.78, 40.83)
        assert b.to_dict() == {"west": -74.06, "south": 40.64, "east": -73.78, "north": 40.83}

    def test_whole_world_is_valid(self) -> None:
        Bounds(-180, -90, 180, 90)

    @pytest.mark.parametrize("west,east", [(10.0, 10.0), (11.0, 10.0), (179.0, -179.0)])
    def test_west_not_below_east(self, west: float, east: float) -> None:
        with pytest.raises(ParameterError) as ei:
            Bounds(west, 0.0, east, 1.0)
        msg = str(ei.value)
        assert "West" in msg and "east" in msg
        # names the fix: the order of the four numbers
        assert "west, south, east, north" in msg

    @pytest.mark.parametrize("south,north", [(5.0, 5.0), (6.0, 5.0)])
    def test_south_not_below_north(self, south: float, north: float) -> None:
        with pytest.raises(ParameterError) as ei:
            Bounds(0.0, south, 1.0, north)
        msg = str(ei.value)
        assert "South" in msg and "north" in msg
        assert "west, south, east, north" in msg

    @pytest.mark.parametrize(
        "vals",
        [(-181.0, 0.0, 0.0, 1.0), (0.0, 0.0, 180.5, 1.0), (0.0, -91.0, 1.0, 1.0), (0.0, 0.0, 1.0, 90.01)],
    )
    def test_out_of_range(self, vals: tuple[float, float, float, float]) -> None:
        with pytest.raises(ParameterError) as ei:
            Bounds(*vals)
        assert "swapped" in str(ei.value)  # the usual cause, named as the fix

    def test_swapped_lat_lon_caught(self) -> None:
        # NYC typed as lat, lon, lat, lon: latitude 40 fine, "longitude" -74 as south is out
        # of range for a latitude
        with pytest.raises(ParameterError):
            Bounds(40.64, -74.06, 40.83, -73.78 - 20)

    @pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
    @pytest.mark.parametrize("pos", range(4))
    def test_not_finite(self, bad: float, pos: int) -> None:
        vals = [0.0, 0.0, 1.0, 1.0]
        vals[pos] = bad
        with pytest.raises(ParameterError) as ei:
            Bounds(*vals)
        assert "finite" in str(ei.value)
        assert "west, south, east, north" in str(ei.value)

    @pytest.mark.parametrize("conv", [np.float64, np.float32, np.int64, np.int32, int])
    def test_numpy_and_int_numbers_accepted(self, conv) -> None:
        # numbers read from arrays or tables (numpy scalars) are finite numbers too;
        # the message "not a finite number" would be wrong for them
        b = Bounds(conv(-74), conv(40), conv(-73), conv(41))
        assert b.as_tuple() == (-74.0, 40.0, -73.0, 41.0)

    def test_text_value_refused(self) -> None:
        with pytest.raises(ParameterError):
            Bounds("0", 0.0, 1.0, 1.0)  # type: ignore[arg-type]

    def test_parameter_error_is_a_dpcore_error(self) -> None:
        with pytest.raises(DPCoreError):
            Bounds(1.0, 0.0, 0.0, 1.0)

    def test_contains_is_closed(self) -> None:
        b = Bounds(0.0, 0.0, 2.0, 1.0)
        lon = np.array([0.0, 2.0, 1.0, -1e-9, 2.0 + 1e-9, 1.0, 1.0, math.nan])
        lat = np.array([0.0, 1.0, 0.5, 0.5, 0.5, -1e-9, 1.0 + 1e-9, 0.5])
        assert b.contains(lon, lat).tolist() == [True, True, True, False, False, False, False, False]

    def test_extent_in_km(self) -> None:
        # one degree of latitude on a 6371 km sphere
        b = Bounds(0.0, 0.0, 1.0, 1.0)
        assert b.height_km == pytest.approx(6371.0 * math.pi / 180)
        # at latitude 60 a degree of longitude is half as long as at the equator
        b60 = Bounds(0.0, 59.5, 1.0, 60.5)
        assert b60.width_km == pytest.approx(6371.0 * math.pi / 180 * 0.5)


class TestBoundsParse:
    @pytest.mark.parametrize(
        "text",
        [
            "-74.06,40.64,-73.78,40.83",
            " -74.06 , 40.64 ,-73.78, 40.83 ",
            "-74.06;40.64;-73.78;40.83",
            "-74.06,40.64,-73.78,40.83,",  # trailing separator ignored
        ],
    )
    def test_good(self, text: str) -> None:
        assert Bounds.parse(text) == Bounds(-74.06, 40.64, -73.78, 40.83)

    def test_integers(self) -> None:
        assert Bounds.parse("0,1,2,3").as_tuple() == (0.0, 1.0, 2.0, 3.0)

    @pytest.mark.parametrize("text", ["", "1,2,3", "1,2,3,4,5", "  ,  ,  "])
    def test_wrong_count(self, text: str) -> None:
        with pytest.raises(ParameterError) as ei:
            Bounds.parse(text)
        msg = str(ei.value)
        assert "four numbers" in msg and "for example" in msg

    @pytest.mark.parametrize("text", ["a,b,c,d", "1,2,3,x", "1,2,three,4"])
    def test_not_numbers(self, text: str) -> None:
        with pytest.raises(ParameterError) as ei:
            Bounds.parse(text)
        msg = str(ei.value)
        assert "not a number" in msg and "for example" in msg

    def test_parsed_bounds_are_validated(self) -> None:
        with pytest.raises(ParameterError, match="West"):
            Bounds.parse("-73.78,40.64,-74.06,40.83")

    def test_nan_text_refused(self) -> None:
        with pytest.raises(ParameterError):
            Bounds.parse("nan,0,1,1")


# ---------------------------------------------------------------------------------------------
# Grid
# ---------------------------------------------------------------------------------------------

UNIT = Bounds(0.0, 0.0, 1.0, 1.0)


class TestGrid:
    def test_shape_and_cells(self) -> None:
        g = Grid(UNIT, 3, 5)
        assert g.shape == (3, 5)
        assert g.n_cells == 15
        assert g.dlon == pytest.approx(0.2)
        assert g.dlat == pytest.approx(1 / 3)

    @pytest.mark.parametrize("rows,cols", [(0, 5), (5, 0), (-1, 5), (MAX_SIDE + 1, 1), (1, MAX_SIDE + 1)])
    def test_out_of_limits(self, rows: int, cols: int) -> None:
        with pytest.raises(ParameterError) as ei:
            Grid(UNIT, rows, cols)
        assert str(MAX_SIDE) in str(ei.value)

    def test_max_side_allowed(self) -> None:
        g = Grid(UNIT, MAX_SIDE, 1)
        assert g.n_cells == MAX_SIDE

    @pytest.mark.parametrize("bad", [2.0, 2.5, "4", True, None])
    def test_not_whole_number(self, bad: object) -> None:
        with pytest.raises(ParameterError, match="whole number"):
            Grid(UNIT, bad, 4)  # type: ignore[arg-type]

    def test_numpy_integers_accepted(self) -> None:
        g = Grid(UNIT, np.int64(4), np.int32(3))
        assert g.n_cells == 12

    @pytest.mark.parametrize(
        "text,shape", [("3,4", (3, 4)), ("3x4", (3, 4)), ("3 X 4", (3, 4)), ("7", (7, 7)), (" 2 , 9 ", (2, 9))]
    )
    def test_parse_good(self, text: str, shape: tuple[int, int]) -> None:
        assert Grid.parse(UNIT, text).shape == shape

    @pytest.mark.parametrize("text", ["a,b", "1.5,2", "1,2,3", "", "0,4"])
    def test_parse_bad(self, text: str) -> None:
        with pytest.raises(ParameterError):
            Grid.parse(UNIT, text)

    def test_edges(self) -> None:
        g = Grid(Bounds(-2.0, 10.0, 2.0, 13.0), 3, 4)
        np.testing.assert_allclose(g.lon_edges(), [-2, -1, 0, 1, 2])
        np.testing.assert_allclose(g.lat_edges(), [10, 11, 12, 13])

    def test_rect_lonlat(self) -> None:
        g = Grid(Bounds(-2.0, 10.0, 2.0, 13.0), 3, 4)
        # rows 1..3 (lat 11..13), cols 0..2 (lon -2..0)
        box = g.rect_lonlat(np.array([[1, 3, 0, 2], [0, 1, 3, 4]]))
        np.testing.assert_allclose(box, [[-2, 11, 0, 13], [1, 10, 2, 11]])

    def test_cell_area(self) -> None:
        g = Grid(Bounds(0.0, -0.5, 1.0, 0.5), 2, 5)
        deg = 6371.0 * math.pi / 180
        assert g.cell_area_km2() == pytest.approx(deg * math.cos(0.0) * deg / 10)


# ---------------------------------------------------------------------------------------------
# cell_index
# ---------------------------------------------------------------------------------------------

# lon 0..4 in 4 columns, lat 0..2 in 2 rows: every cell is 1 x 1 degree, edges are exact
G42 = Grid(Bounds(0.0, 0.0, 4.0, 2.0), 2, 4)


class TestCellIndex:
    def test_row_zero_is_south(self) -> None:
        row, col, inside = G42.cell_index(np.array([0.5, 0.5]), np.array([0.5, 1.5]))
        assert row.tolist() == [0, 1]
        assert col.tolist() == [0, 0]
        assert inside.all()

    def test_columns_run_west_to_east(self) -> None:
        row, col, _ = G42.cell_index(np.array([0.5, 1.5, 2.5, 3.5]), np.full(4, 0.25))
        assert col.tolist() == [0, 1, 2, 3]
        assert row.tolist() == [0, 0, 0, 0]

    def test_east_and_north_edges_go_to_last_cell(self) -> None:
        lon = np.array([4.0, 4.0, 0.0, 2.5])
        lat = np.array([2.0, 0.5, 2.0, 2.0])
        row, col, inside = G42.cell_index(lon, lat)
        assert inside.all()
        assert col.tolist() == [3, 3, 0, 2]
        assert row.tolist() == [1, 0, 1, 1]

    def test_west_and_south_edges_go_to_first_cell(self) -> None:
        row, col, inside = G42.cell_index(np.array([0.0, 0.0]), np.array([0.0, 1.0]))
        assert inside.all()
        assert col.tolist() == [0, 0]
        assert row.tolist() == [0, 1]

    def test_interior_edges_half_open(self) -> None:
        # a point on an interior edge belongs to the cell east / north of it
        lon = np.array([1.0, 2.0, 3.0, np.nextafter(1.0, 0.0), 0.5])
        lat = np.array([0.5, 0.5, 0.5, 0.5, 1.0])
        row, col, _ = G42.cell_index(lon, lat)
        assert col.tolist() == [1, 2, 3, 0, 0]
        assert row.tolist() == [0, 0, 0, 0, 1]
        row, _, _ = G42.cell_index(np.array([0.5]), np.array([np.nextafter(1.0, 0.0)]))
        assert row.tolist() == [0]

    def test_outside_gets_minus_one(self) -> None:
        lon = np.array([-0.001, 4.001, 1.0, 1.0, math.nan, 1.0, 200.0])
        lat = np.array([1.0, 1.0, -0.001, 2.001, 1.0, math.nan, 1.0])
        row, col, inside = G42.cell_index(lon, lat)
        assert not inside.any()
        assert row.tolist() == [-1] * 7
        assert col.tolist() == [-1] * 7
        assert row.dtype == np.int64 and col.dtype == np.int64

    def test_mixed_inside_outside(self) -> None:
        row, col, inside = G42.cell_index(np.array([3.2, 5.0, 0.1]), np.array([1.7, 1.0, 0.1]))
        assert inside.tolist() == [True, False, True]
        assert row.tolist() == [1, -1, 0]
        assert col.tolist() == [3, -1, 0]

    def test_accepts_lists(self) -> None:
        row, col, inside = G42.cell_index([0.5], [1.5])  # type: ignore[arg-type]
        assert (row[0], col[0], inside[0]) == (1, 0, True)

    @pytest.mark.parametrize(
        "bounds,rows,cols",
        [
            (Bounds(-74.06, 40.56, -73.70, 40.92), 36, 36),
            (Bounds(-74.26, 40.49, -73.70, 40.92), 100, 37),
            (Bounds(-125.0, 24.4, -66.9, 49.4), 13, 1000),
        ],
    )
    def test_points_on_published_edges_follow_half_open_rule(
        self, bounds: Bounds, rows: int, cols: int
    ) -> None:
        # The cell boxes the release exports come from lon_edges()/lat_edges()
        # (Grid.rect_lonlat). A point exactly on the west edge of column j
        # (resp. south edge of row j) must be counted in column j (row j), as the
        # documented half-open convention [lon0, lon1) x [lat0, lat1) says.
        g = Grid(bounds, rows, cols)
        lon_e = g.lon_edges()[:-1]
        lat_e = g.lat_edges()[:-1]
        mid_lat = np.full(cols, (bounds.south + bounds.north) / 2 + g.dlat / 3)
        mid_lon = np.full(rows, (bounds.west + bounds.east) / 2 + g.dlon / 3)
        _, col, _ = g.cell_index(lon_e, mid_lat)
        row, _, _ = g.cell_index(mid_lon, lat_e)
        wrong_cols = np.flatnonzero(col != np.arange(cols))
        wrong_rows = np.flatnonzero(row != np.arange(rows))
        assert wrong_cols.size == 0, f"west edges of columns {wrong_cols[:10].tolist()} misplaced"
        assert wrong_rows.size == 0, f"south edges of rows {wrong_rows[:10].tolist()} misplaced"


# ---------------------------------------------------------------------------------------------
# aggregate_points
# ---------------------------------------------------------------------------------------------


class TestAggregatePoints:
    def test_hand_example(self) -> None:
        lon = np.array([0.5, 0.6, 3.9, 4.0, 2.0, 5.0, -1.0, 1.5])
        lat = np.array([0.5, 0.1, 1.9, 2.0, 1.0, 1.0, 1.0, 3.0])
        agg = aggregate_points(lon, lat, G42)
        expected = np.zeros((2, 4), dtype=np.int64)
        expected[0, 0] = 2  # (0.5,0.5), (0.6,0.1)
        expected[1, 3] = 2  # (3.9,1.9), (4.0,2.0) on the NE corner
        expected[1, 2] = 1  # (2.0,1.0) on an interior corner -> NE cell
        np.testing.assert_array_equal(agg.counts, expected)
        assert agg.counts.dtype == np.int64
        assert agg.n_outside == 3
        assert agg.total == 5
        assert agg.sensitivity == 1
        assert agg.user_cap is None
        assert agg.n_capped == 0
        assert agg.grid == G42

    def test_total_equals_inside_points_random(self) -> None:
        rng = np.random.default_rng(11)
        n = 5000
        lon = rng.uniform(-1.0, 5.0, n)
        lat = rng.uniform(-0.5, 2.5, n)
        g = Grid(Bounds(0.0, 0.0, 4.0, 2.0), 16, 8)
        agg = aggregate_points(lon, lat, g)
        inside = (lon >= 0) & (lon <= 4) & (lat >= 0) & (lat <= 2)
        assert agg.total == int(inside.sum())
        assert agg.n_outside == n - int(inside.sum())
        assert agg.counts.shape == (16, 8)
        # brute force per cell (edges are exact binary fractions: 0.5 x 0.125)
        li, la = lon[inside], lat[inside]
        expected = np.zeros((16, 8), dtype=np.int64)
        for r in range(16):
            for c in range(8):
                in_c = (li >= c * 0.5) & ((li < (c + 1) * 0.5) | ((c == 7) & (li == 4.0)))
                in_r = (la >= r * 0.125) & ((la < (r + 1) * 0.125) | ((r == 15) & (la == 2.0)))
                expected[r, c] = int((in_c & in_r).sum())
        np.testing.assert_array_equal(agg.counts, expected)

    def test_empty_input(self) -> None:
        agg = aggregate_points(np.array([]), np.array([]), G42)
        assert agg.total == 0 and agg.n_outside == 0
        assert agg.counts.shape == (2, 4)

    def test_nan_points_are_outside(self) -> None:
        agg = aggregate_points(np.array([math.nan, 1.5]), np.array([0.5, math.nan]), G42)
        assert agg.total == 0 and agg.n_outside == 2


class TestUserCap:
    # 1 row x 8 columns over lon 0..8: record i sits alone in column i, so the counts
    # show exactly which records were kept
    G18 = Grid(Bounds(0.0, 0.0, 8.0, 1.0), 1, 8)

    def _points(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        return np.arange(n) + 0.5, np.full(n, 0.5)

    @staticmethod
    def _brute_keep(users: list[object], lon: np.ndarray, lat: np.ndarray, cap: int) -> list[bool]:
        """The documented rule, written plainly: per person (canonical text id), keep the ``cap``
        records with the smallest (frac(lon*A + lat*B), lon, lat)."""
        from dpcore.data.persons import CAP_A, CAP_B

        def canon(u: object) -> str:
            t = str(u).strip()
            try:
                f = float(t)
                if f == int(f) and t.replace("+", "").replace("-", "").split(".")[0].isdigit():
                    return str(int(f))
            except ValueError:
                pass
            return t

        def key(i: int) -> tuple[float, float, float]:
            v = float(lon[i]) * CAP_A + float(lat[i]) * CAP_B
            return (v - math.floor(v), float(lon[i]), float(lat[i]))

        keep = [False] * len(users)
        groups: dict[str, list[int]] = {}
        for i, u in enumerate(users):
            groups.setdefault(canon(u), []).append(i)
        for idx in groups.values():
            for i in sorted(idx, key=key)[:cap]:
                keep[i] = True
        return keep

    def test_keeps_cap_records_by_the_documented_key(self) -> None:
        users = np.array(["a", "b", "a", "a", "b", "c", "a", "b"])
        lon, lat = self._points(8)
        agg = aggregate_points(lon, lat, self.G18, user=users, user_cap=2)
        expected = self._brute_keep(users.tolist(), lon, lat, 2)
        assert agg.counts[0].tolist() == [int(k) for k in expected]
        assert agg.n_capped == 3  # a keeps 2 of 4, b 2 of 3, c 1 of 1
        assert agg.sensitivity == 2
        assert agg.user_cap == 2

    def test_file_order_does_not_matter(self) -> None:
        rng = np.random.default_rng(5)
        users = rng.integers(0, 20, 300)
        lon, lat = rng.uniform(0, 8, 300), rng.uniform(0, 1, 300)
        a = aggregate_points(lon, lat, self.G18, user=users, user_cap=3)
        p = rng.permutation(300)
        b = aggregate_points(lon[p], lat[p], self.G18, user=users[p], user_cap=3)
        assert np.array_equal(a.counts, b.counts) and a.n_capped == b.n_capped

    def test_ids_compare_as_canonical_text(self) -> None:
        # 7, "007", " 7 " and "7.0" are one person: with cap 1 only one of the four records stays
        users = np.array(["7", "007", " 7 ", "7.0"], dtype=object)
        lon, lat = self._points(4)
        agg = aggregate_points(lon, lat, self.G18, user=users, user_cap=1)
        assert agg.total == 1 and agg.n_capped == 3

    def test_cap_one(self) -> None:
        users = np.array([7, 7, 3, 7, 3, 9])
        lon, lat = self._points(6)
        agg = aggregate_points(lon, lat, self.G18, user=users, user_cap=1)
        expected = self._brute_keep(users.tolist(), lon, lat, 1)
        assert agg.counts[0].tolist() == [int(k) for k in expected] + [0, 0]
        assert agg.sensitivity == 1
        assert agg.user_cap == 1
        assert agg.n_capped == 3

    def test_cap_larger_than_any_user_keeps_all(self) -> None:
        users = np.array(["x", "y", "x"])
        lon, lat = self._points(3)
        agg = aggregate_points(lon, lat, self.G18, user=users, user_cap=10)
        assert agg.total == 3 and agg.n_capped == 0
        assert agg.sensitivity == 10

    def test_cap_applies_before_dropping_outside_points(self) -> None:
        # a record outside the bounds still uses up one of its person's slots when its key ranks
        # among the first: find such a layout by the documented rule, then check the aggregate
        lon = np.array([-5.0, 0.5, 1.5])
        lat = np.full(3, 0.5)
        users = np.array(["a", "a", "a"])
        keep = self._brute_keep(users.tolist(), lon, lat, 2)
        agg = aggregate_points(lon, lat, self.G18, user=users, user_cap=2)
        assert agg.n_capped == 1
        assert agg.n_outside == int(keep[0])
        assert agg.total == int(keep[1]) + int(keep[2])

    def test_mask_matches_brute_force(self) -> None:
        rng = np.random.default_rng(3)
        users = rng.integers(0, 30, 600)
        lon, lat = rng.uniform(-10, 10, 600), rng.uniform(-5, 5, 600)
        lon[:50] = lon[50:100]  # repeated coordinates: ties are broken by (lon, lat)
        lat[:50] = lat[50:100]
        for cap in (1, 2, 5):
            keep = cap_user_contributions(users, cap, lon, lat)
            expected = self._brute_keep(users.tolist(), lon, lat, cap)
            # identical coordinates are interchangeable: compare the kept multiset per person
            got = sorted((int(u), float(x), float(y)) for u, x, y, k in zip(users, lon, lat, keep, strict=True) if k)
            exp = sorted((int(u), float(x), float(y)) for u, x, y, k in zip(users, lon, lat, expected, strict=True) if k)
            assert got == exp

    def test_user_cap_without_user_column(self) -> None:
        lon, lat = self._points(3)
        with pytest.raises(ParameterError) as ei:
            aggregate_points(lon, lat, self.G18, user_cap=3)
        assert "user-id column" in str(ei.value)

    def test_user_column_without_cap(self) -> None:
        lon, lat = self._points(3)
        with pytest.raises(ParameterError) as ei:
            aggregate_points(lon, lat, self.G18, user=np.array([1, 2, 3]))
        assert "cap" in str(ei.value)

    @pytest.mark.parametrize("cap", [0, -1, 1.5, "2"])
    def test_bad_cap(self, cap: object) -> None:
        with pytest.raises(ParameterError):
            cap_user_contributions(np.array([1, 2]), cap, np.zeros(2), np.zeros(2))  # type: ignore[arg-type]

    def test_aggregate_is_frozen(self) -> None:
        agg = aggregate_points(np.array([0.5]), np.array([0.5]), G42)
        assert isinstance(agg, Aggregate)
        with pytest.raises(AttributeError):
            agg.sensitivity = 5  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# blocks and rectangle sums
# ---------------------------------------------------------------------------------------------


def coverage(shape: tuple[int, int], rects: np.ndarray) -> np.ndarray:
    """How many rectangles cover each cell (brute force)."""
    cov = np.zeros(shape, dtype=np.int64)
    for r0, r1, c0, c1 in np.asarray(rects).tolist():
        cov[r0:r1, c0:c1] += 1
    return cov


class TestBlocks:
    @pytest.mark.parametrize("n,m", [(10, 3), (10, 10), (7, 1), (1024, 57), (5, 2)])
    def test_block_edges(self, n: int, m: int) -> None:
        e = block_edges(n, m)
        assert len(e) == m + 1
        assert e[0] == 0 and e[-1] == n
        d = np.diff(e)
        assert (d >= 1).all()
        # nearly equal: sizes differ by at most one
        assert d.max() - d.min() <= 1

    @pytest.mark.parametrize("m,expected", [(20, 5), (0, 1), (-3, 1)])
    def test_block_edges_clamped(self, m: int, expected: int) -> None:
        e = block_edges(5, m)
        assert len(e) == expected + 1
        assert e[0] == 0 and e[-1] == 5

    @pytest.mark.parametrize("rows,cols,mr,mc", [(10, 7, 3, 2), (16, 16, 4, 4), (5, 9, 5, 9), (3, 8, 1, 1), (6, 6, 10, 2)])
    def test_block_rects_tile_the_grid(self, rows: int, cols: int, mr: int, mc: int) -> None:
        g = Grid(UNIT, rows, cols)
        rects = block_rects(g, mr, mc)
        assert rects.dtype == np.int64
        assert len(rects) == min(mr, rows) * min(mc, cols)
        np.testing.assert_array_equal(coverage(g.shape, rects), np.ones(g.shape, dtype=np.int64))
        validate_rects(g, rects)

    def test_block_rects_row_major(self) -> None:
        g = Grid(UNIT, 4, 6)
        rects = block_rects(g, 2, 3)
        assert rects.tolist() == [
            [0, 2, 0, 2], [0, 2, 2, 4], [0, 2, 4, 6],
            [2, 4, 0, 2], [2, 4, 2, 4], [2, 4, 4, 6],
        ]

    @pytest.mark.parametrize("rows,cols,mr,mc", [(10, 7, 3, 2), (16, 16, 4, 4), (5, 9, 5, 9), (3, 8, 1, 1), (97, 64, 13, 13)])
    def test_block_sums_are_the_sums_over_block_rects(self, rows: int, cols: int, mr: int, mc: int) -> None:
        """UG counts its blocks with block_sums (one pass over the cells): the same integers, in the same
        order, as rect_sums over block_rects."""
        m = np.random.default_rng(rows).poisson(2.0, size=(rows, cols)).astype(np.int64)
        got = block_sums(m, block_edges(rows, mr), block_edges(cols, mc)).ravel()
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, rect_sums(m, block_rects(Grid(UNIT, rows, cols), mr, mc)))


def random_rects(rng: np.random.Generator, rows: int, cols: int, k: int) -> np.ndarray:
    r = np.sort(rng.integers(0, rows + 1, size=(k, 2)), axis=1)
    c = np.sort(rng.integers(0, cols + 1, size=(k, 2)), axis=1)
    return np.column_stack([r[:, 0], r[:, 1], c[:, 0], c[:, 1]]).astype(np.int64)


class TestRectSums:
    def test_hand_example(self) -> None:
        m = np.arange(12).reshape(3, 4)
        rects = np.array([[0, 3, 0, 4], [0, 1, 0, 1], [1, 3, 2, 4], [2, 2, 0, 4]])
        # total 66; m[0,0]=0; m[1:3,2:4] = 6+7+10+11 = 34; empty rectangle 0
        assert rect_sums(m, rects).tolist() == [66, 0, 34, 0]

    def test_random_integer_matrices(self) -> None:
        rng = np.random.default_rng(5)
        for rows, cols in [(1, 1), (1, 9), (13, 1), (17, 23), (40, 31)]:
            m = rng.integers(-50, 1000, size=(rows, cols))
            rects = random_rects(rng, rows, cols, 300)
            expected = np.array([m[r0:r1, c0:c1].sum() for r0, r1, c0, c1 in rects.tolist()])
            got = rect_sums(m, rects)
            np.testing.assert_array_equal(got, expected)
            assert np.issubdtype(got.dtype, np.integer)

    def test_random_float_matrix(self) -> None:
        rng = np.random.default_rng(6)
        m = rng.normal(size=(20, 30))
        rects = random_rects(rng, 20, 30, 200)
        expected = np.array([m[r0:r1, c0:c1].sum() for r0, r1, c0, c1 in rects.tolist()])
        np.testing.assert_allclose(rect_sums(m, rects), expected, atol=1e-9)

    def test_large_counts_do_not_overflow(self) -> None:
        m = np.full((4, 4), 2**40, dtype=np.int64)
        assert rect_sums(m, np.array([[0, 4, 0, 4]]))[0] == 16 * 2**40

    def test_validate_rects(self) -> None:
        g = Grid(UNIT, 3, 4)
        ok = validate_rects(g, [[0, 3, 0, 4], [1, 2, 3, 4]])
        assert ok.shape == (2, 4)
        for bad in ([0, 4, 0, 1], [-1, 1, 0, 1], [1, 1, 0, 1], [0, 1, 2, 2], [0, 1, 0, 5]):
            with pytest.raises(ParameterError):
                validate_rects(g, [bad])


# ---------------------------------------------------------------------------------------------
# cumsum_down: its callers (paint_rects, prefix_sums) pass 2-D grids, out None or the input itself
# ---------------------------------------------------------------------------------------------


class TestCumsumDown:
    @pytest.mark.parametrize("shape", [(5,), (2, 3, 70), ()])
    def test_refuses_other_than_2d(self, shape: tuple[int, ...]) -> None:
        with pytest.raises(ValueError, match=f"2-D array.*{len(shape)}-D"):
            cumsum_down(np.ones(shape))

    def test_out_overlapping_the_input_sums_as_numpy(self) -> None:
        # out one row below the input (shared memory, not the same array): row by row, each row would add
        # a row already overwritten; numpy's cumsum buffers overlapping operands
        rng = np.random.default_rng(5)
        base = rng.random((9, 80))
        expected = np.cumsum(base[:-1], axis=0)
        got = cumsum_down(base[:-1], out=base[1:])
        assert np.array_equal(got, expected)
        assert np.array_equal(base[1:], expected)

    def test_in_place_and_separate_out_stay_numpys(self) -> None:
        v = np.random.default_rng(2).random((7, 100))
        expected = np.cumsum(v, axis=0)
        out = np.empty_like(v)
        assert cumsum_down(v, out=out) is out and np.array_equal(out, expected)
        assert cumsum_down(v, out=v) is v and np.array_equal(v, expected)


def test_paint_rects_allocates_one_grid() -> None:
    # the difference array is summed in place and returned as a view: one grid-sized allocation (a copy
    # per cumulative sum made three: 4,096² peaked at 403 MB instead of 134 MB)
    import tracemalloc

    side = 512
    rects = np.array([[0, side, 0, side], [3, 200, 7, 511], [100, 101, 0, 1]])
    values = np.array([1.0, 2.5, -4.0])
    tracemalloc.start()
    try:
        out = paint_rects(rects, values, (side, side))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    grid_bytes = (side + 1) ** 2 * 8
    assert grid_bytes <= peak < 1.5 * grid_bytes
    expected = np.zeros((side, side))
    for (r0, r1, c0, c1), x in zip(rects, values, strict=True):
        expected[r0:r1, c0:c1] += x
    assert np.array_equal(out, expected)
