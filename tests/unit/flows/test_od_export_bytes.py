"""The O/D writers that build their files whole-array at a time (issue 28 item 2) give the bytes of
the writers they replace: flow lines without a dict per flow (``flows_geojson_bytes`` against
``orjson.dumps(flows_geojson(...))``), and a release charged to no budget marked in the one write
(``accounted=False`` against :func:`dpcore.core.record.mark_not_accounted` afterwards)."""

from __future__ import annotations

import numpy as np
import orjson
import pandas as pd
import pytest

from dpcore import catalog
from dpcore.core.record import NOT_ACCOUNTED_CELL, mark_not_accounted
from dpcore.data.hierarchy import Hierarchy
from dpcore.flows import export as X
from dpcore.flows.counts import ODCounts
from dpcore.flows.flow_lines import feature_count, flows_geojson_bytes
from dpcore.flows.mechanisms.common import ODRelease
from dpcore.privacy import budget
from dpcore.privacy.noise import NoiseSource


def _release(areas: pd.DataFrame, levels: list[str], trips: pd.DataFrame, seed: int = 3,
             names: dict[str, str] | None = None, mech: str = "inftda") -> ODRelease:
    h = Hierarchy.from_frame(areas, levels, names=names)
    c = ODCounts.from_frame(trips, h, origin="o", destination="d", fingerprint=False)
    return catalog.get("od", mech).release_counts(c, budget.zcdp(5.0), NoiseSource(seed))


def _grid(labels: list[str]) -> pd.DataFrame:
    """Every ordered pair of ``labels`` with 40 + 7 i trips (pair i)."""
    pairs = [(a, b) for a in labels for b in labels]
    o = [a for i, (a, _) in enumerate(pairs) for _ in range(40 + 7 * i)]
    d = [b for i, (_, b) in enumerate(pairs) for _ in range(40 + 7 * i)]
    return pd.DataFrame({"o": o, "d": d})


AREAS = pd.DataFrame({"st": ["A", "A", "B", "B"], "co": ["A1", "A2", "B1", "B2"],
                      "nm": ["Alpha \"1\"", "Ånchor", None, "=Bravo"]})


@pytest.fixture(scope="module")
def named() -> ODRelease:
    return _release(AREAS, ["st", "co"], _grid(["A1", "A2", "B1", "B2"]), names={"co": "nm"})


def _xy(rel: ODRelease, nan_at: int | None = None) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Coordinates per depth with digits that round at the sixth decimal, a negative zero and (at
    ``nan_at`` of the finest depth) a missing point."""
    out = {}
    for d, n in enumerate(rel.origin_h.sizes):
        x = -71.123456789 + np.arange(n) * 0.0123456789
        y = np.where(np.arange(n) == 0, -0.0000001, 41.5 + np.arange(n) * 1e-7)
        if nan_at is not None and d == rel.origin_h.depth:
            x = x.copy()
            x[nan_at] = np.nan
        out[d] = (x, y)
    return out


@pytest.mark.parametrize("options", [{}, {"top": 2}, {"levels": ["co", 2]}, {"top": 1, "levels": [1]}])
def test_geojson_bytes_are_the_dumped_collection(named: ODRelease, options: dict) -> None:
    for xy in (_xy(named), _xy(named, nan_at=1)):
        want = orjson.dumps(X.flows_geojson(named, xy, **options))
        got = flows_geojson_bytes(named, xy, **options)
        assert got == want
        assert orjson.loads(got) == orjson.loads(want)
    # destinations apart, the finest depth only: levels without coordinates are left out
    xy = _xy(named)
    dest = {2: (xy[2][0] + 1.0, xy[2][1])}
    assert flows_geojson_bytes(named, {2: xy[2]}, dest) == orjson.dumps(X.flows_geojson(named, {2: xy[2]}, dest))


def test_feature_count_is_the_parsed_number_of_features() -> None:
    """Counted without parsing, also when an area's name holds the bytes a feature begins with."""
    areas = AREAS.assign(nm=['{"type":"Feature",', "Ånchor", None, '"type":"Feature"'])
    rel = _release(areas, ["st", "co"], _grid(["A1", "A2", "B1", "B2"]), names={"co": "nm"})
    for options in ({}, {"top": 2}, {"levels": [1]}):
        got = flows_geojson_bytes(rel, _xy(rel, nan_at=1), **options, members={"accounted": False})
        assert feature_count(got) == len(orjson.loads(got)["features"]) > 0
    none = {d: (np.full(n, np.nan), np.zeros(n)) for d, n in enumerate(rel.origin_h.sizes)}
    assert feature_count(flows_geojson_bytes(rel, none)) == 0


def test_geojson_bytes_with_no_flow_and_with_members(named: ODRelease) -> None:
    none = {d: (np.full(n, np.nan), np.zeros(n)) for d, n in enumerate(named.origin_h.sizes)}
    assert flows_geojson_bytes(named, none) == orjson.dumps(X.flows_geojson(named, none)) \
        == b'{"type":"FeatureCollection","features":[]}'
    marked = mark_not_accounted({"flows.geojson": orjson.dumps(X.flows_geojson(named, _xy(named)))})
    from dpcore.core.record import NOT_ACCOUNTED

    got = flows_geojson_bytes(named, _xy(named), members={"accounted": False, "not_accounted": NOT_ACCOUNTED})
    assert got == marked["flows.geojson"]
    assert mark_not_accounted({"flows.geojson": got})["flows.geojson"] == got  # marked once


def test_geojson_bytes_of_float_counts() -> None:
    """A mechanism releasing non-integral counts writes them as orjson writes floats."""
    rel = _release(AREAS, ["st", "co"], _grid(["A1", "B2"]))
    values = tuple(v.astype(np.float64) + 0.1 for v in rel.values)
    floaty = ODRelease(rel.origin_h, rel.destination_h, rel.plan, rel.origins, rel.destinations, values,
                       rel.public_total)
    xy = _xy(rel)
    assert flows_geojson_bytes(floaty, xy) == orjson.dumps(X.flows_geojson(floaty, xy))


@pytest.mark.parametrize("codes", [
    ["A1", "A2", "B1", "B2"],  # plain: the column appended in the write
    ["=A1", "-A2", "B1", "+B2"],  # formulas: escaped, then appended
    ["A,1", "A2", "B\"1", "B2"],  # quoted by pandas: marked the round-trip way
])
def test_release_csv_marked_in_the_write_is_marked_afterwards(codes: list[str]) -> None:
    areas = pd.DataFrame({"st": ["A", "A", "B", "B"], "co": codes})
    rel = _release(areas, ["st", "co"], _grid(codes))
    plain = X.release_csv_bytes(rel)
    got = X.release_csv_bytes(rel, accounted=False)
    assert got == mark_not_accounted({"release.csv": plain})["release.csv"]
    assert got.split(b"\n", 1)[0].endswith(b",accounted")
    assert got.count(NOT_ACCOUNTED_CELL.encode()) == len(X.release_frame(rel))
    assert mark_not_accounted({"release.csv": got})["release.csv"] == got  # marked once


def test_files_of_an_unaccounted_release_are_marked_once(named: ODRelease) -> None:
    """KindRelease.files without a ledger asks the O/D writer to mark its files: the same bytes as
    the writer's unmarked files marked afterwards."""
    from flows_helpers import plan_od

    from dpcore import pipeline
    from dpcore.core.session import Session

    c = ODCounts.from_frame(_grid(["A1", "A2", "B1", "B2"]), named.origin_h, origin="o", destination="d")
    made = pipeline.release(plan_od(c, "inftda", budget.zcdp(5.0)), c, session=Session.unaccounted(),
                            noise=NoiseSource(5))
    xy = _xy(made.inner)
    files = made.files(None, origin_xy=xy)
    plain = mark_not_accounted(X.od_files(made.inner, None, origin_xy=xy, plan=made.plan))
    for name in ("release.csv", "flows.geojson"):
        assert files[name] == plain[name]
    assert files["release.csv"].split(b"\n", 1)[0].count(b"accounted") == 1
