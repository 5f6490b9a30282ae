"""O/D trips and their public tree (dpcore.flows.tree, dpcore.flows.counts): the tree levels of
Boninsegna & Silvestri (PoPETs 2025, Sec. 3), hierarchies from code prefixes, counting trips per
finest pair with the person cap and distinct pairs, refusals of bad inputs, and the content
fingerprint."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from od_testing import make_states, n_children, tree_h

from dpcore import catalog
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import InputError, ParameterError
from dpcore.flows.counts import ODCounts, trips_fingerprint
from dpcore.flows.tree import hierarchy_from_prefixes, tree_levels
from dpcore.privacy import budget
from dpcore.privacy.noise import NoiseSource


@pytest.fixture(scope="module")
def states() -> Hierarchy:
    """3 states with 2, 3 and 1 counties (prefix codes)."""
    return make_states()


def test_tree_levels_alternate_the_refined_side_in_both_orientations() -> None:
    """Spec §1.4: depth T = 2g; odd levels (k−1, k) in the destination tree, (k, k−1) in the
    origin tree; even levels (k, k)."""
    assert tree_levels(3, "destination") == [(0, 0), (0, 1), (1, 1), (1, 2), (2, 2), (2, 3), (3, 3)]
    assert tree_levels(3, "origin") == [(0, 0), (1, 0), (1, 1), (2, 1), (2, 2), (3, 2), (3, 3)]
    for g in range(1, 9):
        for orient in ("destination", "origin"):
            lv = tree_levels(g, orient)
            assert len(lv) - 1 == 2 * g
            for k in range(1, g + 1):
                assert lv[2 * k] == (k, k)
                assert lv[2 * k - 1] == ((k - 1, k) if orient == "destination" else (k, k - 1))
    assert tree_levels(2) == tree_levels(2, "destination")
    with pytest.raises(ParameterError, match="orientation"):
        tree_levels(2, "sideways")  # type: ignore[arg-type]


def test_hierarchy_from_prefixes_cuts_codes_into_levels(states: Hierarchy) -> None:
    assert states.sizes == [1, 3, 6] and states.levels == ("state", "county")
    assert states.codes(1).tolist() == ["01", "02", "03"]
    assert n_children(states, 1).tolist() == [2, 3, 1]
    h = hierarchy_from_prefixes(pd.Series(["440070101001000", "440070101001001", "450010101001000"]),
                                   [2, 5, 11, 12, 15])
    assert h.sizes == [1, 2, 2, 2, 2, 3] and h.levels[0] == "level1"
    for bad in ([2, 2], [4, 2], [], [0, 4]):
        with pytest.raises(ParameterError, match="increasing"):
            hierarchy_from_prefixes(["0101"], bad)
    with pytest.raises(ParameterError, match="one level name per prefix"):
        hierarchy_from_prefixes(["0101"], [2, 4], ["state"])
    with pytest.raises(InputError, match=r"data rows 3, 4.*4 characters"):
        hierarchy_from_prefixes(["0101", "0102", "101", "10203"], [2, 4])
    with pytest.raises(InputError, match="4 characters"):
        hierarchy_from_prefixes([101, 102], [2, 4])  # leading zeros lost


def test_counts_from_frame_and_lookup(states: Hierarchy) -> None:
    df = pd.DataFrame({"o": ["0101", "0203", "0203", "0301", "0101"],
                       "d": ["0202", "0101", "0101", "0301", "0202"]})
    c = ODCounts.from_frame(df, states, origin="o", destination="d")
    assert c.total == 5 and c.n_pairs == 3 and c.max_trips == 1 and c.dropped_trips == 0
    lab = states.labels(2)
    got = {(lab[o], lab[d]): int(n) for o, d, n in zip(c.origin, c.destination, c.count, strict=True)}
    assert got == {("0101", "0202"): 2, ("0203", "0101"): 2, ("0301", "0301"): 1}
    assert c.count.dtype == np.int64 and (c.count > 0).all()
    keys = c.origin * states.n_leaves + c.destination
    assert (np.diff(keys) > 0).all()  # sorted, unique
    # level (1, 1): state × state
    k, v = c.level(1, 1)
    assert dict(zip(k.tolist(), v.tolist(), strict=True)) == {0 * 3 + 1: 2, 1 * 3 + 0: 2, 2 * 3 + 2: 1}
    assert c.level(0, 0)[1].tolist() == [5]
    assert c.lookup(1, 1, np.array([0, 0, 1, 2]), np.array([1, 0, 0, 2])).tolist() == [2, 0, 2, 1]
    # aggregated input with a count column; zero counts are dropped
    agg = pd.DataFrame({"o": ["0101", "0203", "0301"], "d": ["0202", "0101", "0301"], "n": [2, 0, 7.0]})
    ca = ODCounts.from_frame(agg, states, origin="o", destination="d", count="n")
    assert ca.total == 9 and ca.n_pairs == 2


def test_counts_unknown_codes_name_the_rows(states: Hierarchy) -> None:
    df = pd.DataFrame({"o": ["0101", "0999", "0102", "0999"], "d": ["0101", "0102", "0102", "0101"]})
    with pytest.raises(InputError, match=r"2 rows.*data rows 2, 4.*origin.*0999"):
        ODCounts.from_frame(df, states, origin="o", destination="d")
    df = pd.DataFrame({"o": ["0101", "0102"], "d": ["0101", "02"]})
    with pytest.raises(InputError, match=r"data row 2.*destination.*02"):
        ODCounts.from_frame(df, states, origin="o", destination="d")


def test_counts_path_labels_and_geoids() -> None:
    """Within-parent codes: trips may give the a/b label or the joined code (GEOID)."""
    areas = pd.DataFrame({"state": ["01", "01", "02"], "county": ["001", "003", "001"]})
    h = Hierarchy.from_frame(areas, ["state", "county"])
    df = pd.DataFrame({"o": ["01/001", "02/001"], "d": ["01003", "01001"]})
    c = ODCounts.from_frame(df, h, origin="o", destination="d")
    lab = h.labels(2)
    assert sorted((lab[o], lab[d]) for o, d in zip(c.origin, c.destination, strict=True)) == [
        ("01/001", "01/003"), ("02/001", "01/001")]


@pytest.mark.parametrize("bad", [[1, -1, 2], [1, 1.5, 2], [1, np.nan, 2], [1, "x", 2]])
def test_counts_must_be_whole_non_negative(states: Hierarchy, bad: list) -> None:
    df = pd.DataFrame({"o": ["0101"] * 3, "d": ["0102"] * 3, "n": bad})
    with pytest.raises(InputError, match=r"count column 'n'.*data row 2"):
        ODCounts.from_frame(df, states, origin="o", destination="d", count="n")


def test_person_cap_keeps_m_trips_per_person_and_distinct_drops_repeats(states: Hierarchy) -> None:
    """m caps each person; distinct de-duplicates a person's repeated pair first."""
    trips = [("p", "0101", "0102")] * 3 + [("p", "0201", "0202"), ("p", "0301", "0301"),  # p: 5 trips
             ("q", "0101", "0102"), ("q", "0101", "0102"),  # q: the same pair twice
             ("r", "0203", "0101")]  # r: one trip
    df = pd.DataFrame(trips, columns=["u", "o", "d"])
    lab = states.labels(2)
    for seed in range(8):
        c = ODCounts.from_frame(df, states, origin="o", destination="d", user="u", max_trips=2,
                                   noise=NoiseSource(seed))
        assert c.max_trips == 2 and c.distinct
        # p keeps 2 of its 3 distinct pairs, q keeps its pair once, r its trip
        assert c.total == 2 + 1 + 1 and c.dropped_trips == 8 - 4
        got = {(lab[o], lab[d]): int(n) for o, d, n in zip(c.origin, c.destination, c.count, strict=True)}
        assert got[("0203", "0101")] == 1 and got[("0101", "0102")] in (1, 2)
        assert max(got.values()) <= 2  # a pair holds at most one trip of p and one of q
        r = ODCounts.from_frame(df, states, origin="o", destination="d", user="u", max_trips=2,
                                   distinct=False, noise=NoiseSource(seed))
        assert not r.distinct and r.total == 2 + 2 + 1 and r.dropped_trips == 3
        got = {(lab[o], lab[d]): int(n) for o, d, n in zip(r.origin, r.destination, r.count, strict=True)}
        assert got[("0101", "0102")] >= 2  # q's repeated pair counts twice
    # which trips p keeps follows the documented rule: the smallest md5(person · origin ·
    # destination), whatever the row order or noise seed (so DuckDB and Spark keep the same)
    import hashlib

    pairs = sorted({(o, d) for _, o, d in trips[:5]}, key=lambda od_: hashlib.md5(
        "\x1f".join(("p", *od_)).encode()).hexdigest())
    expect: dict[tuple[str, str], int] = {}
    left = 2
    for pr in pairs:  # not distinct: each pair's trips in md5 order until 2 are taken
        take = min(left, sum(1 for t in trips[:5] if (t[1], t[2]) == pr))
        if take:
            expect[pr] = take
        left -= take
    for seed in range(4):
        shuffled = df[df.u == "p"].sample(frac=1.0, random_state=seed)
        c = ODCounts.from_frame(shuffled, states, origin="o", destination="d", user="u", max_trips=2,
                                   distinct=False, noise=NoiseSource(seed))
        assert c.total == 2 and c.dropped_trips == 3
        got = {(lab[o], lab[d]): int(n) for o, d, n in zip(c.origin, c.destination, c.count, strict=True)}
        assert got == expect
    one = ODCounts.from_frame(df, states, origin="o", destination="d", user="u", noise=NoiseSource(0))
    assert one.total == 3 and one.dropped_trips == 5  # m = 1: one trip per person


def test_counts_refuse_bad_options(states: Hierarchy) -> None:
    df = pd.DataFrame({"o": ["0101"], "d": ["0102"], "n": [3], "u": ["a"]})
    with pytest.raises(ParameterError, match="person id"):
        ODCounts.from_frame(df, states, origin="o", destination="d", max_trips=2)
    with pytest.raises(ParameterError, match="either a count column"):
        ODCounts.from_frame(df, states, origin="o", destination="d", count="n", user="u")
    with pytest.raises(ParameterError, match="at least 1"):
        ODCounts.from_frame(df, states, origin="o", destination="d", user="u", max_trips=0)
    with pytest.raises(InputError, match="no origin column 'x'"):
        ODCounts.from_frame(df, states, origin="x", destination="d")
    with pytest.raises(InputError, match="empty"):
        ODCounts.from_frame(df.iloc[:0], states, origin="o", destination="d")
    with pytest.raises(InputError, match="person id column 'u' is empty in data row 2"):
        ODCounts.from_frame(pd.DataFrame({"o": ["0101"] * 2, "d": ["0102"] * 2, "u": ["a", None]}), states,
                               origin="o", destination="d", user="u")
    with pytest.raises(ParameterError, match="same number of levels"):
        ODCounts.from_frame(df, states, tree_h([2]), origin="o", destination="d")


def test_level_names_with_the_export_separator_are_refused() -> None:
    """'>' separates origin and destination levels in exports (state>county): a level called
    'p>q' would make two different tables share one name."""
    h = hierarchy_from_prefixes(["0101", "0102"], [2, 4], ["p", "p>q"])
    with pytest.raises(ParameterError, match="contains '>'"):
        catalog.get("od", "inftda").plan_tree(h, h, budget.zcdp(0.5))


def test_counts_too_large_to_add_exactly_are_refused() -> None:
    h = hierarchy_from_prefixes(["0101", "0102"], [2, 4])
    df = pd.DataFrame({"o": ["0101", "0102"], "d": ["0102", "0101"], "n": [2.0**62, 2.0**62]})
    with pytest.raises(InputError, match="cannot be added exactly"):
        ODCounts.from_frame(df, h, origin="o", destination="d", count="n")
    df["n"] = [1e19, 1.0]
    with pytest.raises(InputError, match="data row 1 alone"):
        ODCounts.from_frame(df, h, origin="o", destination="d", count="n")


def test_fingerprint_follows_the_trips_not_their_encoding() -> None:
    """The budget key: the same trips reordered, as count rows, with or without (renamed) person
    ids hash alike; one trip more does not."""
    h = hierarchy_from_prefixes(["0101", "0102", "0201"], [2, 4])
    rng = np.random.default_rng(5)
    codes = np.array(["0101", "0102", "0201"])
    trips = pd.DataFrame({"o": rng.choice(codes, 300), "d": rng.choice(codes, 300),
                          "who": rng.integers(0, 40, 300).astype(str)})
    base = ODCounts.from_frame(trips, h, origin="o", destination="d").fingerprint
    assert base
    same = [
        ODCounts.from_frame(trips.sample(frac=1, random_state=2), h, origin="o", destination="d"),
        ODCounts.from_frame(trips.groupby(["o", "d"]).size().rename("n").reset_index(), h,
                               origin="o", destination="d", count="n"),
        ODCounts.from_frame(trips, h, origin="o", destination="d", user="who", max_trips=2,
                               noise=NoiseSource(0)),
        ODCounts.from_frame(trips.assign(who="p" + trips["who"]), h, origin="o", destination="d", user="who",
                               max_trips=3, noise=NoiseSource(1)),
    ]
    assert all(c.fingerprint == base for c in same)
    more = pd.concat([trips, trips.iloc[:1]], ignore_index=True)
    assert ODCounts.from_frame(more, h, origin="o", destination="d").fingerprint != base


def test_fingerprint_alone_and_skipped() -> None:
    """``trips_fingerprint`` is the key ``from_frame`` computes (trip rows and count rows), without
    the aggregate; ``fingerprint=False`` (a release charged to no budget) leaves it empty and the
    counts unchanged."""
    h = hierarchy_from_prefixes(["0101", "0102", "0201"], [2, 4])
    trips = pd.DataFrame({"o": ["0101", "0201", "0101", "0102"], "d": ["0102", "0101", "0102", "0201"],
                          "n": [3, 1, 0, 2]})
    for count in (None, "n"):
        full = ODCounts.from_frame(trips, h, origin="o", destination="d", count=count)
        assert trips_fingerprint(trips, "o", "d", count) == full.fingerprint != ""
        bare = ODCounts.from_frame(trips, h, origin="o", destination="d", count=count, fingerprint=False)
        assert bare.fingerprint == ""
        assert [bare.origin.tolist(), bare.destination.tolist(), bare.count.tolist()] == \
            [full.origin.tolist(), full.destination.tolist(), full.count.tolist()]
    with pytest.raises(InputError, match="not whole"):
        trips_fingerprint(trips.assign(n=[1.5, 1, 1, 1]), "o", "d", "n")
