"""Unit tests of O/D release exports (dpcore.flows.export): CSV, flow lines, centroids, the record."""

from __future__ import annotations

import io
import json
import math
import re
import warnings
from pathlib import Path

import geopandas
import jsonschema
import numpy as np
import pandas as pd
import pytest
from flows_helpers import plan_od
from shapely.geometry import box

from dpcore import catalog, pipeline
from dpcore.core.record import write_files
from dpcore.data.hierarchy import Hierarchy
from dpcore.data.synthetic import demo_od, synthetic_hierarchy
from dpcore.errors import InputError, ParameterError
from dpcore.flows import export as X
from dpcore.flows.counts import ODCounts
from dpcore.flows.mechanisms.common import ODRelease
from dpcore.flows.tree import tree_levels
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource

# 2 regions × 2 districts × 3 zones, codes repeating within parents (like county FIPS)
ZONES = [(r, d, z) for r in ("01", "02") for d in ("001", "003") for z in ("1", "2", "3")]
AREAS = pd.DataFrame(ZONES, columns=["region", "district", "zone"])
LEVELS = ["region", "district", "zone"]
LABELS = ["/".join(t) for t in ZONES]


def _true_flows() -> pd.DataFrame:
    """Every finest pair a distinctive count ≥ 7,100,000 (so no structural number equals one)."""
    rng = np.random.default_rng(3)
    n = len(LABELS)
    vals = 7_100_003 + rng.choice(500_000, size=n * n, replace=False) * 7
    return pd.DataFrame({"origin": np.repeat(LABELS, n), "destination": np.tile(LABELS, n), "count": vals})


def _squares(h: Hierarchy) -> dict[int, geopandas.GeoDataFrame]:
    """Square boundaries per depth: zone k of the finest level at x = k, y = 0; parents cover theirs."""
    out = {}
    for d in range(1, h.depth + 1):
        geoms, codes = [], []
        for i, lab in enumerate(h.labels(d)):
            leaves = h.descendants(d, i, h.depth)
            geoms.append(box(float(leaves[0]) * 0.1, 0.0, float(leaves[-1] + 1) * 0.1, 0.1))
            codes.append(lab)
        out[d] = geopandas.GeoDataFrame({"code": codes}, geometry=geoms, crs="EPSG:4326")
    return out


@pytest.fixture(scope="module")
def hier() -> Hierarchy:
    return Hierarchy.from_frame(AREAS, LEVELS)


@pytest.fixture(scope="module")
def counts(hier: Hierarchy) -> ODCounts:
    return ODCounts.from_frame(_true_flows(), hier, origin="origin", destination="destination", count="count")


def _release(counts: ODCounts, cost: budget.PrivacyCost, *, seed: int = 11, mech: str = "inftda",
             **opt: object) -> ODRelease:
    ledger = Ledger(budget.zcdp(10.0) if cost.definition == "zcdp" else budget.pure(10.0), dataset="x")
    return pipeline.release(plan_od(counts, mech, cost, **opt), counts, ledger=ledger, noise=NoiseSource(seed)).inner


@pytest.fixture(scope="module")
def rel(counts: ODCounts) -> ODRelease:
    return _release(counts, budget.zcdp(0.5))


def _true_values(counts: ODCounts) -> set[int]:
    out: set[int] = set()
    for o, d in tree_levels(counts.origin_h.depth):
        out.update(int(v) for v in counts.level(o, d)[1])
    return out


def _numbers(text: str) -> set[int]:
    """Every integer token of a file (not part of a decimal number)."""
    return {int(m) for m in re.findall(r"(?<![\d.eE+-])\d+(?![\d.])", text)}


# ---------------------------------------------------------------------------------------------
# CSV
# ---------------------------------------------------------------------------------------------


def test_release_frame_columns_and_nonzero(rel: ODRelease) -> None:
    df = X.release_frame(rel)
    assert list(df.columns) == ["level", "origin", "destination", "noisy_count", "noise_sd", "ci95_low", "ci95_high"]
    assert (df["noisy_count"] > 0).all()
    names = [lp.name for lp in rel.plan.levels]
    assert set(df["level"]) <= set(names[1:])
    assert "total" not in set(df["level"])
    # consistent: every level sums to the (public, bounded) total
    for _lv, s in df.groupby("level")["noisy_count"].sum().items():
        assert s == rel.total(0)
    assert len(df) == sum(v.size for v in rel.values[1:])


def test_release_csv_bytes_round_trip(rel: ODRelease) -> None:
    data = X.release_csv_bytes(rel)
    assert data.startswith(b"level,origin,destination,noisy_count,noise_sd,ci95_low,ci95_high\n")
    back = pd.read_csv(io.BytesIO(data), dtype={"origin": str, "destination": str})
    assert len(back) == len(X.release_frame(rel))
    assert (back["noisy_count"] > 0).all()
    assert back["origin"].str.contains("/").any()  # within-parent codes keep their path labels (01/001)


# ---------------------------------------------------------------------------------------------
# the record: schema, no true counts, no file names
# ---------------------------------------------------------------------------------------------


def test_record_validates_and_holds_the_plan(rel: ODRelease, hier: Hierarchy) -> None:
    rec = X.od_record(rel, delta=1e-8)
    X.validate_od_record(rec)
    assert rec["schema"] == "dpcore-od-release/1"
    assert rec["kind"] == "od"
    assert rec["mechanism"]["name"] == "inftda"
    assert rec["privacy"]["cost"]["value"] == 0.5
    assert rec["privacy"]["neighbouring_relation"] == "replace"
    assert rec["privacy"]["unit_of_privacy"]["max_trips"] == 1
    ap = rec["privacy"]["approx_dp"]
    assert ap["delta"] == 1e-8
    assert ap["epsilon"] == pytest.approx(budget.zcdp_to_approx_dp(0.5, 1e-8))
    assert ap["epsilon_classic"] == pytest.approx(0.5 + 2 * math.sqrt(0.5 * math.log(1e8)))
    assert ap["epsilon"] <= ap["epsilon_classic"]
    assert rec["tree"]["orientation"] == "destination"
    assert [lv["name"] for lv in rec["tree"]["levels"]] == [
        "total", "total>region", "region", "region>district", "district", "district>zone", "zone"]
    assert rec["hierarchy"]["origin"]["structure_fingerprint"] == hier.fingerprint()
    assert rec["hierarchy"]["same"] is True
    assert rec["total_public"] is True
    assert rec["privacy"]["invariants"] == {"total": rel.public_total}
    assert rec["zeroing_order"] == "ascending" and rec["tiebreak"] == "random"
    lv = rec["privacy"]["levels"]
    assert [x["measured"] for x in lv] == [False] + [True] * 6
    assert sum(x["share"] for x in lv) == pytest.approx(0.5)
    assert all(x["l2_sensitivity"] == pytest.approx(math.sqrt(2)) for x in lv[1:])
    assert len(rec["expected_error"]) == 7
    assert rec["outputs"]["csv_columns"] == ["level", "origin", "destination", "noisy_count", "noise_sd", "ci95_low", "ci95_high"]
    assert rec["not_exported"]
    # JSON-able as is
    json.dumps(rec, allow_nan=False)


def test_schema_rejects_unknown_top_level_key(rel: ODRelease) -> None:
    rec = X.od_record(rel)
    rec["input_file"] = "trips.csv"
    with pytest.raises(jsonschema.ValidationError):
        X.validate_od_record(rec)
    rec = X.od_record(rel)
    rec["privacy"]["invariants"]["pairs"] = 3
    with pytest.raises(jsonschema.ValidationError):
        X.validate_od_record(rec)


def test_exported_files_hold_no_true_count(counts: ODCounts, hier: Hierarchy, tmp_path: Path) -> None:
    # unbounded neighbours: not even the total is public; tiny ρ (σ ≈ 25,000 per cell) so that a noisy
    # value equals a true one only by a (seeded, checked) chance of well under 1 %
    r = _release(counts, budget.zcdp(1e-8), seed=5, neighbour="add_remove")
    assert r.public_total is None
    ledger = Ledger(budget.zcdp(1.0), dataset="secret_trips_2024.csv")
    ledger.spend(budget.zcdp(1e-8), label="O/D")
    xy = {d: X.centroids_from_boundaries(hier, d, g)[:2] for d, g in _squares(hier).items()}
    paths = write_files(X.od_files(r, ledger, origin_xy=xy), tmp_path / "out")
    users = ["design.json", "estimates.csv", "measurements.csv", "replicates.csv"]  # TopDown's tree, checked too
    assert sorted(p.name for p in paths) == sorted(["flows.geojson", "release.csv", "release.json", *users])
    rec = json.loads((tmp_path / "out" / "release.json").read_text("utf-8"))
    X.validate_od_record(rec)
    assert rec["total_public"] is False and rec["privacy"]["invariants"] == {}
    assert "dataset" not in rec["ledger"]
    truth = _true_values(counts)
    assert counts.total in truth
    for p in paths:
        text = p.read_text("utf-8")
        assert "secret_trips_2024" not in text
        leaked = truth & _numbers(text)
        assert not leaked, (p.name, sorted(leaked)[:5])


def test_bounded_record_publishes_only_the_total(counts: ODCounts, tmp_path: Path) -> None:
    r = _release(counts, budget.zcdp(1e-8), seed=6)
    paths = write_files(X.od_files(r, None), tmp_path)
    users = ["design.json", "estimates.csv", "measurements.csv", "replicates.csv"]  # TopDown's tree, checked too
    assert sorted(p.name for p in paths) == sorted(["release.csv", "release.json", *users])  # no geojson
    truth = _true_values(counts)
    for p in paths:
        leaked = truth & _numbers(p.read_text("utf-8"))
        assert leaked <= {counts.total}, (p.name, sorted(leaked)[:5])
    rec = json.loads((tmp_path / "release.json").read_text("utf-8"))
    assert rec["privacy"]["invariants"]["total"] == counts.total
    assert rec["ledger"]["accounted"] is False  # no ledger given: the record says it was not accounted


def test_record_pure_and_vanilla(counts: ODCounts) -> None:
    r = _release(counts, budget.pure(1.0))
    rec = X.od_record(r)
    X.validate_od_record(rec)
    assert rec["privacy"]["definition"] == "pure epsilon-DP"
    assert rec["privacy"]["noise"] == "discrete Laplace"
    assert "approx_dp" not in rec["privacy"]
    v = _release(counts, budget.zcdp(1.0), mech="vanilla_gauss")
    rec = X.od_record(v, extra={"budget_input": {"given": "rho", "rho": 1.0}})
    X.validate_od_record(rec)
    assert rec["budget"]["split"] == "finest only"
    assert rec["extra"]["budget_input"]["rho"] == 1.0


def test_record_never_exports_sh_true_pair_count(counts: ODCounts) -> None:
    r = catalog.get("od", "sh").release_counts(counts, None, NoiseSource(1), approx=(1.0, 1e-6))
    rec = X.od_record(r)
    X.validate_od_record(rec)
    assert rec["mechanism"]["details"] == {}  # 'noised_cells' of SH is the true number of pairs
    assert rec["privacy"]["approx_dp"] == {"delta": 1e-6, "epsilon": 1.0}


def test_write_od_refuses_a_file_as_folder(rel: ODRelease, tmp_path: Path) -> None:
    f = tmp_path / "out"
    f.write_text("x")
    with pytest.raises(InputError, match="is a file"):
        write_files(X.od_files(rel), f)


# ---------------------------------------------------------------------------------------------
# centroids and flow lines
# ---------------------------------------------------------------------------------------------


def test_centroids_from_boundaries_squares_and_unmatched() -> None:
    areas, bounds = synthetic_hierarchy()
    h = Hierarchy.from_frame(areas, ["region", "district", "zone"])
    zones = bounds["zone"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no geographic-CRS centroid warning
        lon, lat, missing = X.centroids_from_boundaries(h, 3, zones)
    assert lon.shape == lat.shape == (h.sizes[3],)
    assert missing == []
    # the squares' centres (an equal-area centroid differs by < 1e-4° this close to the equator)
    idx = pd.Index(h.labels(3)).get_indexer(zones["code"])
    c = zones.geometry.representative_point()
    np.testing.assert_allclose(lon[idx], c.x.to_numpy(), atol=1e-4)
    np.testing.assert_allclose(lat[idx], c.y.to_numpy(), atol=1e-4)
    # drop two zones: NaN there and their labels listed
    gone = zones["code"].iloc[[0, 5]].tolist()
    lon2, lat2, missing2 = X.centroids_from_boundaries(h, 3, zones.iloc[[i for i in range(len(zones)) if i not in (0, 5)]],
                                                       code_field="code")
    assert sorted(missing2) == sorted(gone)
    assert np.isnan(lon2[h.find(3, gone[0])]) and np.isnan(lat2[h.find(3, gone[1])])
    assert np.isfinite(lon2).sum() == h.sizes[3] - 2


def test_centroids_from_boundaries_projected_crs() -> None:
    areas, bounds = synthetic_hierarchy()
    h = Hierarchy.from_frame(areas, ["region", "district", "zone"])
    reg = bounds["region"]
    lon, lat, _ = X.centroids_from_boundaries(h, 1, reg)
    lon_m, lat_m, _ = X.centroids_from_boundaries(h, 1, reg.to_crs("EPSG:3857"))
    np.testing.assert_allclose(lon_m, lon, atol=1e-6)
    np.testing.assert_allclose(lat_m, lat, atol=1e-6)
    with pytest.raises(InputError):
        X.centroids_from_boundaries(h, 0, reg)


def test_centroids_from_points_means_per_level(hier: Hierarchy) -> None:
    # one point per zone at (k, 10k), one zone without a point, plus a point of an unknown code
    labels = list(hier.labels(3))
    codes = [*labels[1:], "99/999/9", labels[1]]
    x = [float(k) for k in range(1, len(labels))] + [500.0, 3.0]  # zone 1 twice: (1 + 3) / 2 = 2
    y = [10.0 * v for v in x]
    xy = X.centroids_from_points(hier, codes, x, y)
    assert sorted(xy) == [0, 1, 2, 3]
    lon3, lat3 = xy[3]
    assert np.isnan(lon3[0]) and np.isnan(lat3[0])
    assert lon3[1] == pytest.approx(2.0) and lat3[1] == pytest.approx(20.0)
    assert lon3[2] == pytest.approx(2.0)
    # district 0 holds zones 0, 1, 2: the mean of the zones that have a point (2, 2)
    assert xy[2][0][0] == pytest.approx(2.0)
    # the root: mean of the zone means (500 of the unknown code is ignored)
    zone_means = lon3[np.isfinite(lon3)]
    assert xy[0][0][0] == pytest.approx(zone_means.mean())
    assert xy[0][0][0] < 100


def test_flows_geojson_endpoints_are_the_centroids() -> None:
    areas, flows, bounds = demo_od(trips=5_000)
    h = Hierarchy.from_frame(areas, ["region", "district", "zone"])
    c = ODCounts.from_frame(flows, h, origin="origin", destination="destination", count="count")
    r = _release(c, budget.zcdp(1.0))
    xy = {d: X.centroids_from_boundaries(h, d, bounds[lv])[:2] for d, lv in enumerate(h.levels, start=1)}
    gj = X.flows_geojson(r, xy)
    assert gj["type"] == "FeatureCollection"
    feats = gj["features"]
    # every flow of every level except those from the total (depth 0 has no coordinates here)
    expected = sum(r.values[t].size for t, lp in enumerate(r.plan.levels) if t > 0 and lp.origin_depth > 0)
    assert len(feats) == expected
    depth = {lp.name: (lp.origin_depth, lp.destination_depth) for lp in r.plan.levels}
    for f in feats[:: max(1, len(feats) // 300)]:
        p = f["properties"]
        assert set(p) == {"level", "origin", "destination", "noisy_count"}
        assert p["noisy_count"] > 0
        od_, dd = depth[p["level"]]
        (x0, y0), (x1, y1) = f["geometry"]["coordinates"]
        assert f["geometry"]["type"] == "LineString"
        i, j = h.find(od_, p["origin"]), h.find(dd, p["destination"])
        assert (x0, y0) == pytest.approx((xy[od_][0][i], xy[od_][1][i]), abs=1e-6)
        assert (x1, y1) == pytest.approx((xy[dd][0][j], xy[dd][1][j]), abs=1e-6)
    # only some levels, destination coordinates apart, and a NaN end skips its flows
    lon3, lat3 = (a.copy() for a in xy[3])
    lon3[0] = np.nan
    gj2 = X.flows_geojson(r, {3: (lon3, lat3)}, {3: xy[3]}, levels=[r.depth])
    assert {f["properties"]["level"] for f in gj2["features"]} == {"zone"}
    first = h.labels(3)[0]
    assert all(f["properties"]["origin"] != first for f in gj2["features"])
    n_from_first = int((r.origins[r.depth] == 0).sum())
    assert len(gj2["features"]) == r.values[r.depth].size - n_from_first


def test_flows_geojson_top_keeps_the_largest(rel: ODRelease, hier: Hierarchy) -> None:
    xy = {d: X.centroids_from_boundaries(hier, d, g)[:2] for d, g in _squares(hier).items()}
    gj = X.flows_geojson(rel, xy, top=3)
    by_level: dict[str, list[int]] = {}
    for f in gj["features"]:
        by_level.setdefault(f["properties"]["level"], []).append(f["properties"]["noisy_count"])
    for t, lp in enumerate(rel.plan.levels):
        if t == 0 or lp.origin_depth == 0:
            continue
        got = by_level[lp.name]
        assert len(got) == min(3, rel.values[t].size)
        assert sorted(got, reverse=True) == sorted(rel.values[t].tolist(), reverse=True)[: len(got)]
    with pytest.raises(ParameterError, match="positive"):
        X.flows_geojson(rel, xy, top=0)
    # written with top: fewer lines in the file
    assert len(X.flows_geojson(rel, xy)["features"]) > len(gj["features"])


def test_release_csv_quotes_labels_with_commas() -> None:
    areas = pd.DataFrame({"city": ["Providence, RI", "Providence, RI", "Boston"], "zone": ["a", "b", "c"]})
    h = Hierarchy.from_frame(areas, ["city", "zone"])
    labels = h.labels(2)
    flows = pd.DataFrame({"origin": [labels[0], labels[2]], "destination": [labels[1], labels[0]], "count": [40, 60]})
    c = ODCounts.from_frame(flows, h, origin="origin", destination="destination", count="count")
    r = _release(c, budget.zcdp(1.0))
    back = pd.read_csv(io.BytesIO(X.release_csv_bytes(r)), dtype={"origin": str, "destination": str})
    pd.testing.assert_frame_equal(back, X.release_frame(r).astype({"noisy_count": "int64"}), check_dtype=False)
    assert back["origin"].str.contains("Providence, RI").any() or back["destination"].str.contains(",").any()


def test_schema_refuses_a_total_that_is_not_public_and_stray_details(rel: ODRelease) -> None:
    """The schema is the last guard: a true total when the record says it is not public, any
    mechanism detail but the (public) number of noised cells, and unknown 'extra' keys fail."""
    rec = X.od_record(rel)
    X.validate_od_record(rec)
    bad = json.loads(json.dumps(rec))
    bad["total_public"] = False
    bad["privacy"]["invariants"] = {"total": 123}
    with pytest.raises(jsonschema.ValidationError):
        X.validate_od_record(bad)
    bad = json.loads(json.dumps(rec))
    bad["mechanism"]["details"]["true_pairs"] = 200
    with pytest.raises(jsonschema.ValidationError):
        X.validate_od_record(bad)
    bad = json.loads(json.dumps(rec))
    bad["extra"] = {"input": "/secret/trips.csv"}
    with pytest.raises(jsonschema.ValidationError):
        X.validate_od_record(bad)


def test_record_warns_when_the_area_list_came_from_the_data(counts: ODCounts) -> None:
    h = counts.origin_h
    leaky = Hierarchy(h.levels, h.keys, h.parents, h.code_modes, h.names, "data (not public)")
    c = ODCounts(leaky, leaky, counts.origin, counts.destination, counts.count)
    r = catalog.get("od", "inftda").release_counts(c, budget.zcdp(0.5), NoiseSource(1))
    rec = X.od_record(r)
    assert any(n.startswith("WARNING") and "not protected" in n for n in rec["notes"])


def test_flows_geojson_carries_public_display_names() -> None:
    areas = pd.DataFrame({"st": ["A", "A", "B"], "co": ["A1", "A2", "B1"], "nm": ["Alpha", "Anchor", "Bravo"]})
    h = Hierarchy.from_frame(areas, ["st", "co"], names={"co": "nm"})
    df = pd.DataFrame({"o": ["A1"] * 400 + ["B1"] * 300, "d": ["A2"] * 400 + ["A1"] * 300})
    c = ODCounts.from_frame(df, h, origin="o", destination="d")
    r = catalog.get("od", "inftda").release_counts(c, budget.zcdp(5.0), NoiseSource(3))
    xy = {2: (np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0, 2.0]))}
    gj = X.flows_geojson(r, xy)
    names = dict(zip(h.labels(2).tolist(), ["Alpha", "Anchor", "Bravo"], strict=True))
    assert gj["features"]
    for f in gj["features"]:
        pr = f["properties"]
        assert pr["origin_name"] == names[pr["origin"]] and pr["destination_name"] == names[pr["destination"]]
