"""Unit tests of hierarchy release exports (dpcore.areas.export): CSV, boundaries, GeoJSON, record."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import geopandas
import jsonschema
import numpy as np
import pandas as pd
import pytest
from areas_helpers import plan_hierarchy
from scipy import special
from shapely.geometry import box

from dpcore import catalog
from dpcore.areas import export as X
from dpcore.areas import tree_plans as TR
from dpcore.areas.counts import HierarchyCounts
from dpcore.core.record import write_files
from dpcore.data.area_boundaries import join_boundaries
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import InputError
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource


def plan_hier(h: Any, mechanism: str, cost: Any, **options: Any) -> Any:
    """The data-free plan of the catalogue's hierarchy mechanism ``mechanism``."""
    return catalog.get("hierarchy", mechanism).plan_tree(h, cost, **options)


def release_hier(counts: Any, mechanism: str, cost: Any, noise: Any, **options: Any) -> Any:
    """Plan and release ``counts`` with the catalogue's hierarchy mechanism ``mechanism`` (no charge)."""
    return catalog.get("hierarchy", mechanism).release_counts(counts, cost, noise, **options)

#: z of the two-sided normal 95 % interval, derived here independently of dpcore (SciPy's ndtri).
Z95 = float(-special.ndtri(0.025))

# 2 states, FIPS-like county codes repeating within states; leaf counts distinctive numbers
AREAS = pd.DataFrame({
    "state": ["01", "01", "01", "02", "02", "06", "06"],
    "county": ["001", "003", "005", "001", "003", "001", "007"],
    "cname": ["Autauga", "Baldwin", "Barbour", "Aleutians E", "Aleutians W", "Alameda", "Butte"],
})
TRUE = np.array([7770011, 7770023, 0, 7770037, 7770041, 7770053, 7770067])
LEVELS = ["state", "county"]


@pytest.fixture(scope="module")
def hier() -> Hierarchy:
    return Hierarchy.from_frame(AREAS, LEVELS, names={"county": "cname"})


@pytest.fixture(scope="module")
def counts(hier: Hierarchy) -> HierarchyCounts:
    return HierarchyCounts.from_frame(AREAS.assign(pop=TRUE), hier, LEVELS, "pop")


@pytest.fixture(scope="module")
def group_counts(hier: Hierarchy) -> HierarchyCounts:
    df = AREAS.assign(one=[3, 0, 1, 2, 5, 0, 1], two=[1, 1, 0, 4, 0, 2, 0], more=[0, 2, 0, 1, 1, 0, 3])
    return HierarchyCounts.from_frame(df, hier, LEVELS, ["one", "two", "more"])


@pytest.fixture(scope="module")
def rel(counts: HierarchyCounts) -> TR.HierarchyRelease:
    return release_hier(counts, "exact", budget.pure(1.0), NoiseSource(1))


def read_csv(data: bytes) -> pd.DataFrame:
    return pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)


# ------------------------------------------------------------------ CSV


@pytest.mark.parametrize("mechanism", ["exact", "hay", "independent", "topdown_l2"])
def test_csv_one_row_per_area_and_level_with_released_values_only(counts: HierarchyCounts, mechanism: str) -> None:
    r = release_hier(counts, mechanism, budget.pure(0.5), NoiseSource(3))
    df = read_csv(X.hierarchy_csv(r))
    assert list(df.columns) == ["level", "code", "parent", "noisy_count", "noise_sd", "ci95_low", "ci95_high"]
    assert len(df) == 1 + 3 + 7
    assert df["level"].tolist() == ["total"] + ["state"] * 3 + ["county"] * 7
    assert df["code"].tolist() == ["total", "01", "02", "06",
                                   "01/001", "01/003", "01/005", "02/001", "02/003", "06/001", "06/007"]
    assert df["parent"].tolist() == ["", "total", "total", "total", "01", "01", "01", "02", "02", "06", "06"]
    released = np.concatenate([np.asarray(v, float) for v in r.values])
    np.testing.assert_allclose(df["noisy_count"].astype(float).to_numpy(), released, atol=1e-6)
    if np.issubdtype(r.values[0].dtype, np.integer):
        assert all(s.lstrip("-").isdigit() for s in df["noisy_count"])
    true = np.concatenate(counts.levels())
    assert np.sum(np.abs(released - true) > 1e-9) >= 8  # noise: most cells are not the true count
    # a true leaf count appears only if released (as any field: the intervals are noisy count ± a
    # public half-width, so one may share a true count's digits but not its value)
    values = {float(f) for line in X.hierarchy_csv(r).decode().splitlines()[1:] for f in line.split(",")[3:] if f}
    for v in TRUE[TRUE > 0]:
        assert float(v) not in values or int(v) in released


@pytest.mark.parametrize("mechanism", ["exact", "independent", "topdown_l2"])
@pytest.mark.parametrize("step", [1, 2, 5])
def test_csv_written_in_parts_is_the_whole_frame_written_at_once(counts: HierarchyCounts, group_counts: HierarchyCounts,
                                                                 mechanism: str, step: int) -> None:
    """release.csv made a few rows at a time (8 M census blocks are never one frame) is byte for byte
    the whole frame through csv_bytes: the header once, every level's column types as concatenated
    (independent's rounded floats), escaped codes, group sizes split inside an area's rows."""
    from dpcore.data.csv_safe import csv_bytes, pandas_csv

    odd_rows = AREAS.assign(state=["=1", "=1", "=1", "+2", "+2", "06", "06"])
    odd = Hierarchy.from_frame(odd_rows, LEVELS)
    odd_counts = HierarchyCounts.from_frame(odd_rows.assign(pop=TRUE), odd, LEVELS, "pop")
    for c in (counts, group_counts, odd_counts):
        if c is group_counts and mechanism != "exact":
            continue
        r = release_hier(c, mechanism, budget.pure(0.5), NoiseSource(3))
        whole = csv_bytes(X.hierarchy_frame(r), pandas_csv)
        assert X.hierarchy_csv(r, step=step) == whole
        assert X.hierarchy_csv(r) == whole
    assert b"\ncounty,'=1/001,'=1," in X.hierarchy_csv(release_hier(odd_counts, mechanism, budget.pure(0.5), NoiseSource(3)), step=2)


def test_csv_of_group_sizes_has_a_size_column(group_counts: HierarchyCounts) -> None:
    r = release_hier(group_counts, "exact", budget.pure(1.0), NoiseSource(2))
    frame = X.hierarchy_frame(r)
    assert list(frame.columns) == ["level", "code", "parent", "size", "noisy_count", "noise_sd", "ci95_low", "ci95_high"]
    assert len(frame) == (1 + 3 + 7) * 3
    assert frame["size"].tolist()[:6] == ["one", "two", "more", "one", "two", "more"]
    assert frame["code"].tolist()[3:6] == ["01"] * 3
    rows = frame[(frame["level"] == "county") & (frame["code"] == "02/003")]
    assert rows["noisy_count"].tolist() == r.values[2][4].tolist()
    assert frame.loc[frame["level"] == "total", "noisy_count"].sum() == group_counts.n_groups


# ------------------------------------------------------------------ boundaries


def boxes(codes: list[str], column: str = "code", crs: str = "EPSG:4326", **extra) -> geopandas.GeoDataFrame:
    geoms = [box(i, 0, i + 1, 1) for i in range(len(codes))]
    if crs == "EPSG:3857":
        geoms = [box(i * 100000, 0, (i + 1) * 100000, 100000) for i in range(len(codes))]
    return geopandas.GeoDataFrame({column: codes, **extra}, geometry=geoms, crs=crs)


def test_join_by_own_code_for_a_global_level(hier: Hierarchy) -> None:
    j = join_boundaries(hier, 1, boxes(["06", "01", "02"], "STATEFP"))
    assert (j.key, j.key_style) == ("STATEFP", "code")
    assert j.frame["node"].tolist() == [2, 0, 1]
    assert j.missing_areas == [] and j.extra_features == []


def test_join_by_path_label(hier: Hierarchy) -> None:
    labels = ["01/001", "01/003", "01/005", "02/001", "02/003", "06/001", "06/007"]
    j = join_boundaries(hier, 2, boxes(labels[::-1]))
    assert (j.key, j.key_style) == ("code", "label")
    assert j.frame["node"].tolist() == list(range(7))[::-1]


def test_join_by_geoid_prefers_paths_over_ambiguous_own_codes(hier: Hierarchy) -> None:
    # COUNTYFP holds own codes (001 is in three states): never used for a within-parent level
    gdf = boxes(["01001", "01003", "01005", "02001", "02003", "06001", "06007", "99001"], "GEOID",
                COUNTYFP=["001", "003", "005", "001", "003", "001", "007", "001"])
    j = join_boundaries(hier, 2, gdf)
    assert (j.key, j.key_style) == ("GEOID", "joined")
    assert j.frame["node"].tolist() == list(range(7))
    assert j.extra_features == ["99001"] and j.missing_areas == []
    with pytest.raises(InputError, match="No boundary matches"):
        join_boundaries(hier, 2, gdf, key="COUNTYFP")


def test_join_lists_unmatched_areas_and_extra_features(hier: Hierarchy) -> None:
    gdf = boxes(["01001", "01005", "02003", "72001", "72003"], "GEOID")
    j = join_boundaries(hier, 2, gdf)
    assert j.key_style == "joined" and len(j.frame) == 3
    assert j.missing_areas == ["01/003", "02/001", "06/001", "06/007"]
    assert j.extra_features == ["72001", "72003"]


def test_join_errors(hier: Hierarchy) -> None:
    with pytest.raises(InputError, match="No boundary matches"):
        join_boundaries(hier, 1, boxes(["AL", "AK"]))
    with pytest.raises(InputError, match="no column 'FIPS'"):
        join_boundaries(hier, 1, boxes(["01"]), key="FIPS")
    with pytest.raises(InputError, match="level 1..2"):
        join_boundaries(hier, 0, boxes(["01"]))
    with pytest.raises(InputError, match="no features"):
        join_boundaries(hier, 1, boxes([]))


def test_level_geojson_properties(rel: TR.HierarchyRelease, counts: HierarchyCounts) -> None:
    h = rel.hierarchy
    gdf = boxes(["01001", "01003", "06007"], "GEOID", crs="EPSG:3857")
    j = join_boundaries(h, 2, gdf)
    gj = json.loads(X.level_geojson(rel, j))
    feats = gj["features"]
    assert len(feats) == 3
    props = [f["properties"] for f in feats]
    assert [p["code"] for p in props] == ["01/001", "01/003", "06/007"]
    assert [p["name"] for p in props] == ["Autauga", "Baldwin", "Butte"]
    assert [p["parent"] for p in props] == ["01", "01", "06"]
    assert {p["level"] for p in props} == {"county"}
    assert [p["noisy_count"] for p in props] == rel.values[2][[0, 1, 6]].tolist()
    # the exact DP publishes no interval (tests/unit/areas/test_release_intervals.py): the properties stay, null
    assert all(p["ci95_low"] is None and p["ci95_high"] is None for p in props)
    assert set(props[0]) == {"level", "code", "name", "parent", "noisy_count", "ci95_low", "ci95_high"}
    hay = release_hier(counts, "hay", budget.pure(1.0), NoiseSource(1))
    hay_props = [f["properties"] for f in json.loads(X.level_geojson(hay, j))["features"]]
    for p, s in zip(hay_props, hay.sd(2)[[0, 1, 6]], strict=True):  # hay may go below 0: not clipped
        assert p["ci95_high"] == pytest.approx(p["noisy_count"] + Z95 * s, abs=1e-3)
        assert p["ci95_low"] == pytest.approx(p["noisy_count"] - Z95 * s, abs=1e-3)
    # reprojected to longitude/latitude
    xs = [c[0] for f in feats for c in f["geometry"]["coordinates"][0]]
    assert max(xs) < 180 and max(xs) > 0.5


def test_level_geojson_of_group_sizes(group_counts: HierarchyCounts) -> None:
    r = release_hier(group_counts, "dpc_approx", budget.pure(1.0), NoiseSource(2))
    j = join_boundaries(r.hierarchy, 1, boxes(["01", "02", "06"]))
    props = [f["properties"] for f in json.loads(X.level_geojson(r, j))["features"]]
    assert [p["size_one"] for p in props] == r.values[1][:, 0].tolist()
    assert [p["size_more"] for p in props] == r.values[1][:, 2].tolist()
    assert [p["noisy_total"] for p in props] == r.values[1].sum(axis=1).tolist()
    assert "noisy_count" not in props[0]


# ------------------------------------------------------------------ the record


CASES = ([(m, d, nb) for m in ["exact", "topdown_linf", "topdown_l2", "hay", "bottom_up", "independent"]
          for d in ("pure", "zcdp") for nb in ("add_remove", "replace")])


@pytest.mark.parametrize(("mechanism", "definition", "neighbour"), CASES)
def test_record_validates_and_holds_no_true_counts(counts: HierarchyCounts, mechanism: str, definition: str,
                                                   neighbour: str) -> None:
    cost = budget.pure(1.0) if definition == "pure" else budget.zcdp(0.5)
    led = Ledger(budget.pure(3.0) if definition == "pure" else budget.zcdp(2.0),
                        dataset="confidential_people_2020.csv")
    from dpcore import pipeline

    plan = plan_hierarchy(counts, mechanism, cost, neighbour=neighbour)
    r = pipeline.release(plan, counts, ledger=led, noise=NoiseSource(5)).inner
    rec = X.hierarchy_record(r, led)
    X.validate_hierarchy_record(rec)
    text = X.hierarchy_json(r, led).decode()
    assert json.loads(text) == json.loads(json.dumps(rec))
    assert "confidential_people" not in text
    for t in TRUE[TRUE > 0]:
        assert str(t) not in text
    total = int(TRUE.sum())
    if neighbour == "replace" and mechanism != "bottom_up":  # bottom-up publishes no exact total
        assert rec["privacy"]["invariants"] == {"total": total}
    else:
        assert rec["privacy"]["invariants"] == {}
        assert str(total) not in text
    assert rec["mechanism"]["name"] == mechanism
    assert rec["privacy"]["neighbouring_relation"] == neighbour
    assert rec["ledger"]["spent"] == pytest.approx(cost.value)
    assert [lv["share"] for lv in rec["budget"]["levels"]] == [lv.share for lv in r.plan.levels]
    assert rec["hierarchy"]["areas_per_level"] == [1, 3, 7]
    assert rec["hierarchy"]["code_modes"] == ["-", "global", "within_parent"]
    assert rec["outputs"]["csv_columns"] == ["level", "code", "parent", "noisy_count", "noise_sd", "ci95_low", "ci95_high"]
    if definition == "zcdp":
        assert rec["privacy"]["noise"] == "discrete Gaussian"
        for item in rec["privacy"]["approx_dp"]:
            assert item["epsilon"] == pytest.approx(budget.zcdp_to_approx_dp(0.5, item["delta"]))
    else:
        assert "approx_dp" not in rec["privacy"]


@pytest.mark.parametrize("mechanism", ["exact", "dpc_approx"])
def test_record_of_group_sizes(group_counts: HierarchyCounts, mechanism: str) -> None:
    r = release_hier(group_counts, mechanism, budget.pure(1.0), NoiseSource(5))
    rec = X.hierarchy_record(r)
    X.validate_hierarchy_record(rec)
    assert rec["statistic"] == "group_sizes" and rec["sizes"] == ["one", "two", "more"]
    assert rec["privacy"]["invariants"] == {"groups_N": group_counts.n_groups}
    assert "public_groups_N" not in rec["mechanism"]["details"]
    assert rec["outputs"]["csv_columns"] == ["level", "code", "parent", "size", "noisy_count", "noise_sd", "ci95_low", "ci95_high"]
    assert "groups" in rec["privacy"]["unit_of_privacy"]


def test_schema_rejects_true_values_and_unknown_fields(rel: TR.HierarchyRelease) -> None:
    rec = X.hierarchy_record(rel)
    X.validate_hierarchy_record(rec)
    for bad in (
        {**rec, "true_counts": [1, 2]},
        {**rec, "privacy": {**rec["privacy"], "invariants": {"leaf_counts": [1]}}},
        {**rec, "hierarchy": {**rec["hierarchy"], "input_file": "people.csv"}},
        {**rec, "outputs": {**rec["outputs"], "files": ["../release.csv"]}},
        {**rec, "release_id": "not-hex"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            X.validate_hierarchy_record(bad)


def test_record_warns_when_the_area_list_came_from_the_data(counts: HierarchyCounts) -> None:
    h = Hierarchy.from_frame(AREAS, LEVELS, source="data (not public)")
    c = HierarchyCounts.from_frame(AREAS.assign(pop=TRUE), h, LEVELS, "pop")
    rec = X.hierarchy_record(release_hier(c, "exact", budget.pure(1.0), NoiseSource(0)))
    X.validate_hierarchy_record(rec)
    assert rec["hierarchy"]["area_list_source"] == "data (not public)"
    assert any(n.startswith("WARNING") for n in rec["notes"])


# ------------------------------------------------------------------ writing files


def test_write_hierarchy_sanitises_level_names(tmp_path: Path, rel: TR.HierarchyRelease) -> None:
    h = rel.hierarchy
    out = tmp_path / "deep" / "out"
    joins = {"../x": join_boundaries(h, 1, boxes(["01", "02", "06"])),
             "a b/c": join_boundaries(h, 2, boxes(["01001", "06007"], "GEOID"))}
    paths = write_files(X.hierarchy_files(rel, Ledger(budget.pure(1.0)), joins), out)
    names = sorted(p.name for p in paths)
    assert names == ["a_b_c.geojson", "design.json", "estimates.csv", "measurements.csv", "release.csv",
                     "release.json", "replicates.csv", "x.geojson"]
    assert all(p.parent == out for p in paths)
    assert sorted(p.name for p in out.iterdir()) == names
    assert not (tmp_path / "deep" / "x.geojson").exists()
    rec = json.loads((out / "release.json").read_text("utf-8"))
    X.validate_hierarchy_record(rec)
    assert sorted(rec["outputs"]["files"]) == names
    assert (out / "release.csv").read_bytes() == X.hierarchy_csv(rel)
    assert len(json.loads((out / "a_b_c.geojson").read_text("utf-8"))["features"]) == 2
    assert X.safe_file_stem("..") == "level" and X.safe_file_stem("État 1") == "tat_1"
