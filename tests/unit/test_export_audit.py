"""No export carries a raw row, a true count or the input file's name; records validate (issue 9).

The noise source is replaced by one that adds large values (10⁵–10⁶) to everything, so a true
count can only appear in a file if some field passes the truth through; distinctive counts and
coordinates are then searched for in every exported byte.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from areas_helpers import plan_census, plan_hierarchy
from points_helpers import plan_points

from dpcore import pipeline
from dpcore.areas import census_tables, export
from dpcore.areas.counts import HierarchyCounts
from dpcore.areas.mechanisms import census_matrix as marginals
from dpcore.areas.mechanisms import census_privelet
from dpcore.core.record import validate_record
from dpcore.data.domain import Bounds, Grid, aggregate_points
from dpcore.data.hierarchy import Hierarchy
from dpcore.data.points import load_points
from dpcore.points import export as pexport
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource

SECRET_NAME = "SECRET-input-7Q.csv"
TRUE = (48611, 27943)  # distinctive true counts (their total is 76554)


class ShiftNoise(NoiseSource):
    """A test double (never a real release): every noise value is large (10⁵–10⁶) and varied, so a
    transform (Privelet's wavelets) cannot cancel it to zero in a cell the way constant noise can."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self._gen = np.random.default_rng(seed)

    def _big(self, size) -> np.ndarray:
        return self._gen.integers(100_000, 1_000_000, size=size)

    def discrete_laplace(self, scale, size):
        return self._big(size)

    def discrete_gaussian(self, sigma, size):
        return self._big(size)

    def laplace_on_grid(self, values, scale, granularity_exp):
        v = np.asarray(values, float)
        return v + self._big(v.shape)

    def gaussian_on_grid(self, values, sigma, granularity_exp):
        v = np.asarray(values, float)
        return v + self._big(v.shape)


def assert_clean(blobs: dict[str, bytes], truths: list[int], raw: list[str] = ()) -> None:
    for name, data in blobs.items():
        text = data.decode("utf-8", errors="replace")
        assert SECRET_NAME not in text and "SECRET" not in text, name
        for t in truths:
            assert not re.search(rf"(?<![\d.]){t}(?![\d])", text), (name, t)
        for r in raw:
            assert r not in text, (name, r)


def test_points_exports() -> None:
    lon = np.r_[np.full(TRUE[0], -73.9876543), np.full(TRUE[1], -73.9123457)]
    lat = np.r_[np.full(TRUE[0], 40.7654321), np.full(TRUE[1], 40.7123459)]
    table = load_points(pd.DataFrame({"lat": lat, "lon": lon}), "lat", "lon", source_name=SECRET_NAME)
    grid = Grid(Bounds(-74.0, 40.7, -73.9, 40.8), 8, 8)
    agg = aggregate_points(table.lon, table.lat, grid)
    led = Ledger(budget.pure(5.0), dataset=SECRET_NAME)
    for mech in ("identity", "ug", "privelet"):
        rel = pipeline.release(plan_points(agg, mech, 1.0, {}), agg, ledger=led, noise=ShiftNoise(1)).inner
        rec = pexport.release_record(rel, led)
        validate_record(rec)
        assert_clean({"csv": pexport.release_csv(rel), "json": pexport.release_json(rel, led),
                      "geojson": pexport.release_geojson(rel)}, [*TRUE, sum(TRUE)],
                     ["73.9876543", "40.7654321"])


@pytest.fixture(scope="module")
def hier() -> tuple[Hierarchy, HierarchyCounts, pd.DataFrame]:
    df = pd.DataFrame({"s": ["01", "01", "02"], "c": ["001", "002", "001"], "n": [TRUE[0], TRUE[1], 0]})
    h = Hierarchy.from_frame(df, ["s", "c"], source="table (confirmed public)")
    return h, HierarchyCounts.from_frame(df, h, ["s", "c"], "n"), df


def test_hierarchy_exports(hier) -> None:
    h, counts, _ = hier
    from dpcore.areas import area_sets

    sets = area_sets.read_area_sets(b"query,area\nboth,01\n", h, SECRET_NAME)
    for mech, cost, opts in (("exact", budget.pure(1.0), {}), ("hay", budget.zcdp(0.5), {}),
                             ("matrix", budget.zcdp(0.5), {"area_sets": sets})):
        led = Ledger(cost if cost.definition == "zcdp" else budget.pure(5.0), dataset=SECRET_NAME)
        rel = pipeline.release(plan_hierarchy(counts, mech, cost, **opts), counts,
                               ledger=led, noise=ShiftNoise(2)).inner
        export.validate_hierarchy_record(export.hierarchy_record(rel, led))
        blobs = {"csv": export.hierarchy_csv(rel), "json": export.hierarchy_json(rel, led)}
        if mech == "matrix":
            blobs["sets"] = area_sets.area_sets_csv(rel)
        assert_clean(blobs, [*TRUE, sum(TRUE)])


def test_census_exports() -> None:
    df = pd.DataFrame({"state": ["01"] * 4, "county": ["001", "001", "003", "003"],
                       "age": ["a", "b", "a", "b"], "pop": [TRUE[0], 1, TRUE[1], 2]})
    table = census_tables.CensusTable.from_frame(df, ["state", "county"], "pop", ordinals=["age"])
    led = Ledger(budget.zcdp(5.0), dataset=SECRET_NAME)
    rel = pipeline.release(plan_census(table, "privelet", budget.pure(1.0)), table,
                           ledger=led, noise=ShiftNoise(3)).inner
    census_privelet.validate_census_record(census_privelet.census_record(rel, led))
    census_privelet.validate_census_record(census_privelet.census_record(rel))
    assert_clean({"csv": census_privelet.census_csv(rel), "json": census_privelet.census_json(rel, led)}, [*TRUE])
    p = marginals.plan(table.structure, "county", [(0, 1), (1,)], budget.zcdp(0.5))
    mrel = marginals.release(table, p, ShiftNoise(4))
    rec = marginals.marginals_record(mrel, led)
    marginals.validate_marginals_record(rec)
    assert_clean({"csv": marginals.marginals_csv(mrel), "json": marginals.marginals_json(mrel, led)},
                 [*TRUE, TRUE[0] + TRUE[1]])
    bad = dict(rec, true_total=TRUE[0])  # the schema refuses unknown fields such as a true count
    with pytest.raises(Exception, match="'true_total' was unexpected"):
        marginals.validate_marginals_record(bad)
