"""Unit tests of the public area tree (dpcore.data.hierarchy): Hierarchy and HierarchyCounts.

Expected values are written out by hand from the small tables below (no recomputation with
the code under test).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpcore.areas.counts import HierarchyCounts
from dpcore.data.hierarchy import ROOT_LEVEL, Hierarchy
from dpcore.errors import InputError, ParameterError

# FIPS-like: county codes 001/003 repeat in every state (codes unique only within the state)
FIPS = pd.DataFrame({
    "state": ["01", "01", "01", "02", "02", "06", "06", "06"],
    "county": ["001", "003", "005", "001", "003", "001", "001", "007"],
    "tract": ["0100", "0100", "0100", "0100", "0100", "0100", "0200", "0100"],
    "name": ["Autauga", "Baldwin", "Barbour", "Aleutians E", "Aleutians W", "Alameda", "Alameda", "Butte"],
    "pop": [10, 0, 5, 7, 3, 100, 20, 1],
})
LEVELS = ["state", "county", "tract"]


@pytest.fixture
def fips() -> Hierarchy:
    return Hierarchy.from_frame(FIPS, LEVELS, names={"county": "name"})


# ------------------------------------------------------------------ building and code modes


def test_fips_codes_repeating_within_states_are_path_identified(fips: Hierarchy) -> None:
    assert fips.levels == ("state", "county", "tract")
    assert fips.level_names == [ROOT_LEVEL, "state", "county", "tract"]
    assert fips.sizes == [1, 3, 7, 8]
    assert fips.n_nodes == 19 and fips.n_leaves == 8 and fips.depth == 3
    # 001 and 003 sit under several states: local codes; tracts repeat under counties too
    assert fips.code_modes == ("global", "within_parent", "within_parent")
    assert fips.codes(2).tolist() == ["001", "003", "005", "001", "003", "001", "007"]
    assert fips.labels(2).tolist() == ["01/001", "01/003", "01/005", "02/001", "02/003", "06/001", "06/007"]
    assert fips.labels(1).tolist() == ["01", "02", "06"]
    assert fips.joined_codes(2).tolist() == ["01001", "01003", "01005", "02001", "02003", "06001", "06007"]
    assert fips.joined_codes(3)[-3:].tolist() == ["060010100", "060010200", "060070100"]
    assert fips.parent_labels(2).tolist() == ["01", "01", "01", "02", "02", "06", "06"]
    assert fips.parent_labels(3).tolist() == ["01/001", "01/003", "01/005", "02/001", "02/003",
                                              "06/001", "06/001", "06/007"]
    assert fips.parent_labels(1).tolist() == ["total", "total", "total"]
    assert fips.parent_labels(0).tolist() == [""]
    assert fips.labels(0).tolist() == ["total"]
    assert [p.tolist() for p in fips.parents] == [[0, 0, 0], [0, 0, 0, 1, 1, 2, 2], [0, 1, 2, 3, 4, 5, 5, 6]]
    assert fips.paths(3)[6] == ("06", "001", "0200")
    assert fips.summary() == [
        {"level": "total", "areas": 1, "codes": "-"},
        {"level": "state", "areas": 3, "codes": "global"},
        {"level": "county", "areas": 7, "codes": "within_parent"},
        {"level": "tract", "areas": 8, "codes": "within_parent"},
    ]


def test_rows_are_sorted_by_path_whatever_the_input_order() -> None:
    shuffled = FIPS.sample(frac=1.0, random_state=3).reset_index(drop=True)
    h = Hierarchy.from_frame(shuffled, LEVELS)
    assert h.labels(2).tolist() == ["01/001", "01/003", "01/005", "02/001", "02/003", "06/001", "06/007"]
    assert h.fingerprint() == Hierarchy.from_frame(FIPS, LEVELS).fingerprint()
    # a different structure has a different fingerprint
    assert h.fingerprint() != Hierarchy.from_frame(FIPS.iloc[:-1], LEVELS).fingerprint()


def test_five_digit_county_codes_are_global() -> None:
    df = pd.DataFrame({"state": ["01", "01", "02", "06"], "county": ["01001", "01003", "02001", "06001"]})
    h = Hierarchy.from_frame(df, ["state", "county"])
    assert h.code_modes == ("global", "global")
    assert h.labels(2).tolist() == ["01001", "01003", "02001", "06001"]  # own code, no path
    assert h.joined_codes(2).tolist() == ["0101001", "0101003", "0202001", "0606001"]
    assert h.parent_labels(2).tolist() == ["01", "01", "02", "06"]
    # forcing within_parent keeps the path labels
    hw = Hierarchy.from_frame(df, ["state", "county"], codes="within_parent")
    assert hw.code_modes == ("global", "within_parent")
    assert hw.labels(2).tolist() == ["01/01001", "01/01003", "02/02001", "06/06001"]


def test_a_code_under_two_parents_with_few_repeats_is_an_error_naming_it() -> None:
    counties = [f"01{i:03d}" for i in range(1, 20, 2)]  # 10 global codes in state 01
    df = pd.DataFrame({"state": ["01"] * 10 + ["02", "02"], "county": counties + ["02001", "01005"]})
    with pytest.raises(InputError) as ei:
        Hierarchy.from_frame(df, ["state", "county"])
    msg = str(ei.value)
    assert "'01005' under '01' and '02'" in msg
    assert "county" in msg and "state" in msg
    assert "within parent" in msg  # the fix when codes are local
    # the explicit choice accepts it as two areas
    h = Hierarchy.from_frame(df, ["state", "county"], codes=["auto", "within_parent"])
    assert h.sizes == [1, 2, 12]


def test_global_mode_refuses_repeats_that_auto_would_accept() -> None:
    with pytest.raises(InputError, match="'001' under '01' and '02'"):
        Hierarchy.from_frame(FIPS, LEVELS, codes=["auto", "global", "auto"])


def test_missing_codes_are_an_error_naming_the_rows() -> None:
    df = FIPS.copy()
    df.loc[2, "county"] = None
    df.loc[5, "county"] = "  "
    with pytest.raises(InputError) as ei:
        Hierarchy.from_frame(df, LEVELS)
    msg = str(ei.value)
    assert "'county'" in msg and "2 missing codes" in msg
    assert "data rows 3, 6" in msg  # data rows: the header not counted


def test_control_characters_and_missing_columns_are_errors() -> None:
    df = FIPS.copy()
    df.loc[0, "tract"] = "01\x1f00"
    with pytest.raises(InputError, match="control characters"):
        Hierarchy.from_frame(df, LEVELS)
    with pytest.raises(InputError, match="'county_fp'"):
        Hierarchy.from_frame(FIPS, ["state", "county_fp"])


@pytest.mark.parametrize("levels", [["county", "state"], ["tract5", "county"], ["state", "tract5", "county"]])
def test_levels_in_the_wrong_order_are_an_error(levels: list[str]) -> None:
    df = pd.DataFrame({
        "state": ["01", "01", "01", "02", "02"],
        "county": ["01001", "01001", "01003", "02001", "02001"],
        "tract5": ["0100101", "0100102", "0100301", "0200101", "0200102"],
    })
    Hierarchy.from_frame(df, ["state", "county", "tract5"])  # the right order is fine
    with pytest.raises(InputError, match="do not nest in this order") as ei:
        Hierarchy.from_frame(df, levels)
    assert f"Every area of '{levels[-2]}' has exactly one '{levels[-1]}'" in str(ei.value)
    assert "top (largest areas) down to the finest" in str(ei.value)


def test_a_level_that_does_not_subdivide_local_codes_is_accepted() -> None:
    # every county holds a single tract '0100' (codes local to the county): not a reversed order
    df = pd.DataFrame({"state": ["01", "01", "02"], "county": ["001", "003", "001"], "tract": ["0100"] * 3})
    h = Hierarchy.from_frame(df, ["state", "county", "tract"])
    assert h.sizes == [1, 2, 3, 3]
    assert h.code_modes == ("global", "within_parent", "within_parent")


def test_parameter_errors() -> None:
    with pytest.raises(ParameterError):
        Hierarchy.from_frame(FIPS, [])
    with pytest.raises(ParameterError, match="repeat"):
        Hierarchy.from_frame(FIPS, ["state", "state"])
    with pytest.raises(ParameterError, match="grand total"):
        Hierarchy.from_frame(FIPS.rename(columns={"state": "total"}), ["total", "county"])
    with pytest.raises(ParameterError):
        Hierarchy.from_frame(FIPS, LEVELS, codes=["auto", "auto"])
    with pytest.raises(ParameterError):
        Hierarchy.from_frame(FIPS, LEVELS, codes="sometimes")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="empty"):
        Hierarchy.from_frame(FIPS.iloc[:0], LEVELS)
    with pytest.raises(ParameterError, match="not a level"):
        Hierarchy.from_frame(FIPS, LEVELS, names={"district": "name"})
    with pytest.raises(InputError, match="name column"):
        Hierarchy.from_frame(FIPS, LEVELS, names={"county": "nom"})


def test_float_codes_from_parquet_become_integer_text() -> None:
    df = pd.DataFrame({"state": [1.0, 1.0, 2.0], "county": [1.0, 3.0, 1.0]})
    h = Hierarchy.from_frame(df, ["state", "county"])
    assert h.labels(1).tolist() == ["1", "2"]
    assert h.labels(2).tolist() == ["1/1", "1/3", "2/1"]


def test_names_first_row_wins_and_blank_falls_back_to_label(fips: Hierarchy) -> None:
    assert fips.names[0] is None and fips.names[2] is None
    assert fips.display_names(2).tolist() == [
        "Autauga", "Baldwin", "Barbour", "Aleutians E", "Aleutians W", "Alameda", "Butte"]
    assert fips.display_names(1).tolist() == ["01", "02", "06"]  # no names: labels
    assert fips.display_names(0).tolist() == ["Total"]
    df = FIPS.copy()
    df.loc[1, "name"] = ""
    h = Hierarchy.from_frame(df, LEVELS, names={"county": "name"})
    assert h.display_names(2)[1] == "01/003"


# ------------------------------------------------------------------ shape helpers


def test_child_offsets_n_children_descendants_and_find(fips: Hierarchy) -> None:
    assert fips.child_offsets(0).tolist() == [0, 3]
    assert fips.child_offsets(1).tolist() == [0, 3, 5, 7]
    assert fips.child_offsets(2).tolist() == [0, 1, 2, 3, 4, 5, 7, 8]
    assert fips.n_children(1).tolist() == [3, 2, 2]
    assert fips.n_children(2).tolist() == [1, 1, 1, 1, 1, 2, 1]
    with pytest.raises(ParameterError):
        fips.child_offsets(3)
    assert fips.descendants(1, 2, 3).tolist() == [5, 6, 7]  # state 06 → its three tracts
    assert fips.descendants(1, 1, 2).tolist() == [3, 4]
    assert fips.descendants(0, 0, 3).tolist() == list(range(8))
    assert fips.descendants(2, 6, 2).tolist() == [6]
    assert fips.find(2, "06/007") == 6
    assert fips.find(3, "06/001/0200") == 6
    assert fips.find(1, "02") == 1
    with pytest.raises(ParameterError, match="no area '03'"):
        fips.find(1, "03")
    assert fips.depth_of("county") == 2 and fips.depth_of("total") == 0
    with pytest.raises(ParameterError, match="Unknown level"):
        fips.depth_of("block")
    assert [v.tolist() for v in fips.leaves_under()] == [[8], [3, 2, 3], [1, 1, 1, 1, 1, 2, 1], [1] * 8]


def test_aggregate_sums_every_level(fips: Hierarchy) -> None:
    leaf = np.array([10, 0, 5, 7, 3, 100, 20, 1], dtype=np.int64)
    levels = fips.aggregate(leaf)
    assert [v.tolist() for v in levels] == [[146], [15, 10, 121], [10, 0, 5, 7, 3, 120, 1], leaf.tolist()]
    assert all(v.dtype == np.int64 for v in levels)
    # extra columns (group sizes) are aggregated column by column
    two = np.column_stack([leaf, 2 * leaf])
    agg = fips.aggregate(two)
    assert agg[0].tolist() == [[146, 292]] and agg[1][2].tolist() == [121, 242]
    # float values keep their fractional parts
    assert fips.aggregate(leaf + 0.25)[0][0] == pytest.approx(148.0)
    with pytest.raises(ParameterError, match="Expected 8 leaf values"):
        fips.aggregate(leaf[:-1])


def test_aggregate_is_exact_in_int64_beyond_float_precision() -> None:
    df = pd.DataFrame({"a": ["x", "x", "x", "y"], "b": ["1", "2", "3", "1"]})
    h = Hierarchy.from_frame(df, ["a", "b"])
    big = 9_000_000_000_000_001  # < 2**53 ≈ 9.007e15, odd
    leaf = np.array([big, big, big, 1], dtype=np.int64)
    levels = h.aggregate(leaf)
    assert int(levels[1][0]) == 27_000_000_000_000_003  # float64 would give ...000_004
    assert int(levels[0][0]) == 27_000_000_000_000_004
    assert float(27_000_000_000_000_003) != 27_000_000_000_000_003  # the test is meaningful


# ------------------------------------------------------------------ data onto the tree


def test_leaf_index_maps_rows_and_rejects_unknown_areas(fips: Hierarchy) -> None:
    rows = pd.DataFrame({"s": ["06", "01", "06"], "c": ["001", "005", "001"], "t": ["0200", "0100", "0100"]})
    assert fips.leaf_index(rows, ["s", "c", "t"]).tolist() == [6, 2, 5]
    bad = pd.DataFrame({"s": ["06", "01", "04", "01"], "c": ["001", "007", "001", "001"],
                        "t": ["0200", "0100", "0100", "0100"]})
    with pytest.raises(InputError) as ei:
        fips.leaf_index(bad, ["s", "c", "t"])
    msg = str(ei.value)
    assert "2 rows" in msg and "data rows 2, 3" in msg
    assert "01 / 007 / 0100" in msg and "04 / 001 / 0100" in msg
    assert "not in the public area list" in msg
    with pytest.raises(ParameterError, match="2 level columns"):
        fips.leaf_index(rows, ["s", "c"])


def test_count_column_several_rows_per_area_are_summed(fips: Hierarchy) -> None:
    df = pd.concat([FIPS, FIPS.iloc[[0, 6]].assign(pop=[4, 2])], ignore_index=True)
    c = HierarchyCounts.from_frame(df, fips, LEVELS, "pop")
    assert c.statistic == "count" and c.k == 1 and c.n_rows == 10
    assert c.count_columns == ("pop",)
    assert c.leaf.tolist() == [14, 0, 5, 7, 3, 100, 22, 1]
    assert [v.tolist() for v in c.levels()] == [[152], [19, 10, 123], [14, 0, 5, 7, 3, 122, 1], c.leaf.tolist()]


def test_empty_public_areas_get_zero(fips: Hierarchy) -> None:
    c = HierarchyCounts.from_frame(FIPS.iloc[[0, 7]], fips, LEVELS, "pop")
    assert c.leaf.tolist() == [10, 0, 0, 0, 0, 0, 0, 1]


def test_person_rows_count_one_each(fips: Hierarchy) -> None:
    people = pd.DataFrame({"state": ["01", "01", "06", "06", "06"], "county": ["001", "001", "001", "001", "007"],
                           "tract": ["0100", "0100", "0200", "0100", "0100"]})
    c = HierarchyCounts.from_frame(people, fips, LEVELS)
    assert c.statistic == "count" and c.n_rows == 5 and c.count_columns == ()
    assert c.leaf.tolist() == [2, 0, 0, 0, 0, 1, 1, 1]
    assert c.levels()[0].tolist() == [5]


def test_several_count_columns_are_a_group_size_histogram(fips: Hierarchy) -> None:
    df = FIPS.assign(h1=[1, 0, 2, 0, 0, 5, 1, 0], h2=[0, 0, 1, 3, 0, 2, 0, 0], h3p=[2, 0, 0, 0, 1, 0, 0, 4])
    c = HierarchyCounts.from_frame(df, fips, LEVELS, ["h1", "h2", "h3p"])
    assert c.statistic == "group_sizes" and c.k == 3
    assert c.size_labels == ("h1", "h2", "h3p") and c.count_columns == ("h1", "h2", "h3p")
    assert c.n_groups == 22
    assert c.levels()[0].tolist() == [[9, 6, 7]]
    assert c.levels()[1].tolist() == [[3, 1, 2], [0, 3, 1], [6, 2, 4]]


def test_person_rows_with_group_ids_count_groups_by_size_top_coded(fips: Hierarchy) -> None:
    # household a: 1 person; b: 2; c: 4 (top-coded at 3); d: 3; e: 1 (in another area)
    people = pd.DataFrame({
        "state": ["01", "01", "01", "01", "01", "01", "01", "01", "01", "01", "06"],
        "county": ["001"] * 10 + ["007"],
        "tract": ["0100"] * 11,
        "hh": ["a", "b", "b", "c", "c", "c", "c", "d", "d", "d", "e"],
    })
    c = HierarchyCounts.from_frame(people, fips, LEVELS, group="hh", max_size=3)
    assert c.statistic == "group_sizes" and c.size_labels == ("1", "2", "3+")
    assert c.n_rows == 11 and c.n_groups == 5
    assert c.leaf[0].tolist() == [1, 1, 2]
    assert c.leaf[7].tolist() == [1, 0, 0]
    assert int(c.leaf[1:7].sum()) == 0
    c7 = HierarchyCounts.from_frame(people, fips, LEVELS, group="hh")  # default 7 sizes
    assert c7.size_labels == ("1", "2", "3", "4", "5", "6", "7+")
    assert c7.leaf[0].tolist() == [1, 1, 1, 1, 0, 0, 0]


def test_a_group_spanning_two_areas_is_an_error(fips: Hierarchy) -> None:
    people = pd.DataFrame({"state": ["01", "01", "02"], "county": ["001", "001", "001"],
                           "tract": ["0100"] * 3, "hh": ["a", "b", "b"]})
    with pytest.raises(InputError, match="1 group have members in two or more areas"):
        HierarchyCounts.from_frame(people, fips, LEVELS, group="hh")
    people.loc[1, "hh"] = None
    with pytest.raises(InputError, match="group id column 'hh' has 1 missing value"):
        HierarchyCounts.from_frame(people, fips, LEVELS, group="hh")
    with pytest.raises(ParameterError, match="at least 1"):
        HierarchyCounts.from_frame(people.fillna("z"), fips, LEVELS, group="hh", max_size=0)


@pytest.mark.parametrize(("values", "what", "rows"), [
    (["10", "0", "5", "7", "x", "100", "20", "1"], "missing or not numbers", "data row 5"),
    ([10, 0, 5, 7, 3, None, 20, 1], "missing or not numbers", "data row 6"),
    ([10, 0, 5.5, 7, 3, 100, 20, 1.25], "not whole numbers", "data rows 3, 8"),
    ([10, 0, 5, -7, 3, 100, 20, 1], "negative", "data row 4"),
    ([10, 0, 5, 7, 3, 2.0**53, 20, 1], "9,007,199,254,740,992 or more", "data row 6"),
])
def test_bad_counts_are_input_errors_naming_rows(fips: Hierarchy, values: list, what: str, rows: str) -> None:
    df = FIPS.copy()
    df["pop"] = pd.Series(values, dtype=object)
    with pytest.raises(InputError) as ei:
        HierarchyCounts.from_frame(df, fips, LEVELS, "pop")
    assert what in str(ei.value) and rows in str(ei.value) and "'pop'" in str(ei.value)


def test_counts_frame_errors(fips: Hierarchy) -> None:
    with pytest.raises(InputError, match="no rows"):
        HierarchyCounts.from_frame(FIPS.iloc[:0], fips, LEVELS, "pop")
    with pytest.raises(InputError, match="'persons'"):
        HierarchyCounts.from_frame(FIPS, fips, LEVELS, "persons")
    with pytest.raises(ParameterError, match="used twice"):
        HierarchyCounts.from_frame(FIPS, fips, LEVELS, "tract")
    with pytest.raises(ParameterError, match="not both"):
        HierarchyCounts.from_frame(FIPS.assign(hh="a"), fips, LEVELS, ["pop"], group="hh")
    with pytest.raises(InputError):
        HierarchyCounts.from_frame([1, 2], fips, LEVELS, "pop")  # type: ignore[arg-type]


def test_building_reports_each_phase_and_the_same_tree(fips: Hierarchy) -> None:
    """``progress`` is told every phase of every level in order, fractions rising to 1.0, and the
    tree is the one built without it (issue 28 item 1: the app's Data step at 8 M blocks)."""
    said: list[tuple[float, str]] = []
    h = Hierarchy.from_frame(FIPS, LEVELS, progress=lambda f, m: said.append((f, m)))
    assert [k.tolist() for k in h.keys] == [k.tolist() for k in fips.keys] and h.frame_rows() is not None
    fracs, lines = [f for f, _ in said], [m for _, m in said]
    assert len(said) == 4 * len(LEVELS) + 1 and fracs == sorted(fracs) and fracs[0] == 0.0 and fracs[-1] == 1.0
    for verb in ("Reading the codes of", "Finding the areas of", "Keying the", "Checking the codes of"):
        assert [lv for lv in LEVELS if any(m.startswith(verb) and f"'{lv}'" in m for m in lines)] == LEVELS, verb
    assert lines[-1] == "Built the areas of state, county, tract"  # not their number: progress lines reach logs


def test_level_columns_missing_or_named_twice_are_refused_by_name() -> None:
    """The level columns are checked by name before any code is read (not by cleaning the codes of
    no rows); a level column named twice is a dpcore error too (it was pandas' ValueError)."""
    df = pd.DataFrame([["01", "01001"], ["02", "02001"]], columns=["state", "county"])
    with pytest.raises(InputError, match=r"has no column 'tract'\. Its columns are: state, county"):
        Hierarchy.from_frame(df, ["state", "tract"])
    twice = pd.DataFrame([["01", "01001", "x"]], columns=["state", "county", "county"])
    with pytest.raises(InputError, match="more than one column named 'county'"):
        Hierarchy.from_frame(twice, ["state", "county"])


# ------------------------------------------------------------------ the checks before keying
# check_area_frame runs before a table's budget is keyed (tens of seconds at 8 M census blocks):
# blank codes, control characters and levels that do not nest are refused there, not by the build.
# Not cheap: it reads every level's codes (level_ids), most of a build's time (1.7 s of 2.9 s at 2 M rows).

def _no_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the hierarchy's build (its path keys) fail loudly: check_area_frame must refuse first."""
    from dpcore.data import hierarchy

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("check_area_frame built the areas' keys")

    monkeypatch.setattr(hierarchy, "_path_keys", boom)


@pytest.mark.parametrize(("row", "level", "code", "words"), [
    (4, "county", "   ", ["1 missing code", "data row 5", "fill them in or drop those rows"]),  # blank only
    (6, "tract", "02\x0700", ["control characters", "data row 7", "Remove them from the codes"]),
])
def test_cheap_checks_refuse_blank_codes_and_control_characters(
        monkeypatch: pytest.MonkeyPatch, row: int, level: str, code: str, words: list[str]) -> None:
    from dpcore.data.hierarchy import check_area_frame

    _no_build(monkeypatch)
    df = FIPS.copy()
    df.loc[row, level] = code
    with pytest.raises(InputError) as ei:
        check_area_frame(df, LEVELS)
    msg = str(ei.value)
    assert f"'{level}'" in msg and all(w in msg for w in words), msg


def test_cheap_checks_refuse_levels_that_do_not_nest(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcore.data.hierarchy import check_area_frame

    _no_build(monkeypatch)
    df = pd.DataFrame({"state": ["01", "01", "02"], "county": ["01001", "01003", "02005"]})
    assert check_area_frame(df, ["state", "county"]) == (["state", "county"], ["auto", "auto"])
    with pytest.raises(InputError) as ei:
        check_area_frame(df, ["county", "state"])
    msg = str(ei.value)
    assert "do not nest in this order" in msg and "'county'" in msg and "'state'" in msg
    assert "data rows 1, 2" in msg  # an example: two counties under one state code
    assert "top (largest areas) down to the finest" in msg


def test_cheap_checks_refuse_a_child_with_two_parents(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcore.data.hierarchy import check_area_frame

    _no_build(monkeypatch)
    df = pd.DataFrame({"state": ["01", "01", "02", "02"], "county": ["01001", "01003", "01003", "02005"]})
    with pytest.raises(InputError, match=r"two or more parents.*'01003' under '01' and '02'"):
        check_area_frame(df, ["state", "county"], codes="global")
