"""Unit tests of dpcore.points.export: CSV, GeoJSON and the JSON release record.

The privacy tests build a dataset whose true counts are distinctive large numbers
and check that none of them (nor the true total, the dropped-row counts or the
input file name) appears in any exported file.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import re
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from points_helpers import plan_points, release_with, secret_value

from dpcore import catalog, pipeline
from dpcore.core.record import validate_record, write_files
from dpcore.data.domain import Aggregate, Bounds, Grid, rect_sums
from dpcore.points.export import (
    CSV_COLUMNS,
    release_csv,
    release_files,
    release_geojson,
    release_json,
    release_record,
)
from dpcore.privacy.budget import pure
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource

BOUNDS = Bounds(-74.06, 40.56, -73.70, 40.92)


def aggregate(counts: np.ndarray, *, bounds: Bounds = BOUNDS, n_outside: int = 0, n_capped: int = 0,
              sensitivity: int = 1, user_cap: int | None = None) -> Aggregate:
    counts = np.asarray(counts, dtype=np.int64)
    return Aggregate(
        grid=Grid(bounds, counts.shape[0], counts.shape[1]), counts=counts, n_outside=n_outside,
        n_capped=n_capped, sensitivity=sensitivity, user_cap=user_cap,
    )


def read_csv_rows(data: bytes) -> tuple[list[str], list[dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(data.decode("utf-8")))
    rows = list(reader)
    return list(reader.fieldnames or []), rows


@pytest.fixture(scope="module")
def ug_release():
    rng = np.random.default_rng(0)
    agg = aggregate(rng.poisson(30, size=(20, 30)))
    return release_with(catalog.get("points", "ug"), agg, 1.0, {"public_n": 2000}, NoiseSource(1))


@pytest.fixture(scope="module", params=["identity", "uniform", "ug"])
def any_release(request):
    rng = np.random.default_rng(1)
    agg = aggregate(rng.poisson(10, size=(12, 9)))
    return release_with(catalog.get("points", request.param), agg, 0.5, {"public_n": 500} if request.param == "ug" else {},
                                                  NoiseSource(2))


class TestCSV:
    def test_columns_and_rows(self, any_release) -> None:
        header, rows = read_csv_rows(release_csv(any_release))
        assert header == CSV_COLUMNS
        for col in ("id", "west", "south", "east", "north", "noisy_count", "ci95_low", "ci95_high"):
            assert col in header
        assert len(rows) == any_release.n_rects

    def test_values(self, ug_release) -> None:
        _, rows = read_csv_rows(release_csv(ug_release))
        rel = ug_release
        box = rel.grid.rect_lonlat(rel.rects)
        for i, row in enumerate(rows):
            assert int(row["id"]) == i
            assert float(row["noisy_count"]) == rel.noisy[i]
            # integer counts are written as integers
            assert row["noisy_count"].lstrip("-").isdigit()
            assert float(row["ci95_low"]) == rel.noisy[i] - rel.ci95[i]
            assert float(row["ci95_high"]) == rel.noisy[i] + rel.ci95[i]
            r0, r1, c0, c1 = rel.rects[i]
            assert int(row["cells"]) == (r1 - r0) * (c1 - c0)
            for j, c in enumerate(("west", "south", "east", "north")):
                assert float(row[c]) == pytest.approx(box[i, j], abs=1e-7)
            assert row["leaf"].lower() == "true"

    def test_bounds_cover_the_domain(self, ug_release) -> None:
        _, rows = read_csv_rows(release_csv(ug_release))
        w = min(float(r["west"]) for r in rows)
        e = max(float(r["east"]) for r in rows)
        s = min(float(r["south"]) for r in rows)
        n = max(float(r["north"]) for r in rows)
        assert (w, s, e, n) == pytest.approx(BOUNDS.as_tuple(), abs=1e-7)


class TestGeoJSON:
    def test_feature_collection_matches_csv(self, any_release) -> None:
        fc = json.loads(release_geojson(any_release))
        _, rows = read_csv_rows(release_csv(any_release))
        assert fc["type"] == "FeatureCollection"
        feats = fc["features"]
        assert len(feats) == len(rows)
        for f, row in zip(feats, rows, strict=True):
            assert f["type"] == "Feature"
            assert f["id"] == int(row["id"]) == f["properties"]["id"]
            assert f["properties"]["noisy_count"] == pytest.approx(float(row["noisy_count"]))
            assert f["properties"]["ci95_low"] == pytest.approx(float(row["ci95_low"]))
            assert f["geometry"]["type"] == "Polygon"
            (ring,) = f["geometry"]["coordinates"]
            w, s, e, n = (float(row[c]) for c in ("west", "south", "east", "north"))
            expected = [[w, s], [e, s], [e, n], [w, n], [w, s]]
            assert np.allclose(ring, expected, rtol=0, atol=1e-12)
            # exterior ring counter-clockwise (RFC 7946): positive shoelace area
            xs, ys = np.array(ring).T
            assert np.sum(xs[:-1] * ys[1:] - xs[1:] * ys[:-1]) > 0

    def test_properties_are_the_csv_columns(self, ug_release) -> None:
        fc = json.loads(release_geojson(ug_release))
        assert set(fc["features"][0]["properties"]) == set(CSV_COLUMNS)


class TestRecord:
    def test_validates(self, any_release) -> None:
        rec = release_record(any_release)
        validate_record(rec)
        assert rec["mechanism"]["name"] == any_release.mechanism
        assert rec["privacy"]["cost"]["value"] == 0.5
        assert rec["outputs"]["n_rectangles"] == any_release.n_rects
        assert rec["domain"]["grid"] == {"rows": 12, "cols": 9}
        # the JSON bytes hold the same record
        assert json.loads(release_json(any_release)) == json.loads(json.dumps(rec))

    def test_validates_with_ledger(self, ug_release) -> None:
        ledger = Ledger(pure(2.0), dataset="trips_2024.csv")
        ledger.spend(pure(1.0), label="UG", details={"mechanism": "ug"})
        rec = release_record(ug_release, ledger)
        validate_record(rec)
        assert rec["ledger"]["spent"] == 1.0
        assert "dataset" not in rec["ledger"]
        assert "trips_2024" not in release_json(ug_release, ledger).decode()

    def test_budget_split_adds_up(self, ug_release) -> None:
        rec = release_record(ug_release)
        assert sum(s["value"] for s in rec["budget"]["split"]) == pytest.approx(
            rec["privacy"]["cost"]["value"]
        )

    @pytest.mark.parametrize(
        "corrupt",
        [
            lambda r: r.pop("privacy"),
            lambda r: r.pop("levels"),
            lambda r: r.__setitem__("true_counts", [1, 2, 3]),
            lambda r: r["privacy"]["cost"].__setitem__("value", -0.5),
            lambda r: r["budget"]["split"][0].__setitem__("value", -1.0),
            lambda r: r["levels"][0]["privacy"].__setitem__("value", 0),
            lambda r: r.__setitem__("schema", "dpcore-release/0"),
            lambda r: r.__setitem__("release_id", "NOT-AN-ID"),
            lambda r: r["mechanism"].__setitem__("input_file", "people.csv"),
            lambda r: r["privacy"].__setitem__("sensitivity_l1", 0),
            lambda r: r["domain"]["bounds"].__setitem__("west", -200),
        ],
    )
    def test_corrupted_record_fails(self, ug_release, corrupt) -> None:
        rec = copy.deepcopy(release_record(ug_release))
        validate_record(rec)
        corrupt(rec)
        with pytest.raises(jsonschema.ValidationError):
            validate_record(rec)


# ---------------------------------------------------------------------------------------------
# privacy of the exports
# ---------------------------------------------------------------------------------------------

# distinctive true counts far apart from each other (millions), so a noisy value or an
# interval end (within a few thousand of its own cell's truth) can never spell another one
TRUE_COUNTS = np.array([[7777771, 5555553], [3333337, 9999991]], dtype=np.int64)
TRUE_TOTAL = int(TRUE_COUNTS.sum())  # 26666652
N_OUTSIDE = 4444447
N_CAPPED = 6666661
SECRET_NAME = "secret_patients_file.csv"
EPS = 0.001  # scale 1000: P(noise = 0) ~ 5e-4 per count


@pytest.mark.parametrize(
    "name,params",
    [*((n, {}) for n in catalog.names("points")), ("ug", {"public_n": 40_000_000})],
)
def test_exports_hold_no_true_values(tmp_path: Path, name: str, params: dict) -> None:
    agg = aggregate(TRUE_COUNTS, bounds=Bounds(0.0, 0.0, 1.0, 1.0), n_outside=N_OUTSIDE, n_capped=N_CAPPED)
    ledger = Ledger(pure(1.0), dataset=SECRET_NAME)
    rel = pipeline.release(plan_points(agg, name, EPS, params), agg, ledger=ledger, noise=NoiseSource(123)).inner
    true_blocks = rect_sums(agg.counts, rel.rects)
    # noise made every released count differ from its truth (fixed seed, scale >= 1000)
    assert np.all(rel.noisy != true_blocks)

    paths = write_files(release_files(rel, ledger), tmp_path / "out")
    texts = {p.name: p.read_text("utf-8") for p in paths}
    extra = {"workload_answers.csv"} if name == "matrix" else set()  # its workload answers
    data_users = {"measurements.csv", "design.json", "estimates.csv"}  # issue 25: checked for secrets too
    if json.loads(texts["release.json"])["data_users"].get("replicates", {}).get("file"):
        data_users.add("replicates.csv")  # the spreadsheet replicates, where measurements are offered
    assert set(texts) == {"release.csv", "release.geojson", "release.json"} | extra | data_users

    _, rows = read_csv_rows(texts["release.csv"].encode())
    csv_noisy = np.array([float(r["noisy_count"]) for r in rows])
    np.testing.assert_array_equal(csv_noisy, rel.noisy)
    assert np.all(csv_noisy != true_blocks)

    secrets = [str(v) for v in TRUE_COUNTS.ravel()] + [str(TRUE_TOTAL), str(N_OUTSIDE), str(N_CAPPED)]
    for fname, text in texts.items():
        for s in secrets:  # as a value (replicates are drawn around the estimate: 7777771.89 may occur)
            assert not re.search(secret_value(s), text), f"{s} found in {fname}"
        assert "secret_patients" not in text, fname
    rec = json.loads(texts["release.json"])
    validate_record(rec)
    flat = json.dumps(rec).lower()
    for key in ("n_outside", "n_capped", "dropped", "true_count", "source_name"):
        assert key not in flat


def test_write_release_writes_three_files(tmp_path: Path, ug_release) -> None:
    out = tmp_path / "a" / "b"
    paths = write_files(release_files(ug_release), out)
    names = ["design.json", "estimates.csv", "measurements.csv", "release.csv", "release.geojson", "release.json",
             "replicates.csv"]
    assert sorted(p.name for p in paths) == names
    assert sorted(p.name for p in out.iterdir()) == names
    for p in paths:
        assert p.stat().st_size > 0
    assert p.parent == out
    assert (out / "release.csv").read_bytes() == release_csv(ug_release)
    validate_record(json.loads((out / "release.json").read_text("utf-8")))
    assert json.loads((out / "release.geojson").read_text("utf-8"))["type"] == "FeatureCollection"


def test_geojson_with_fractional_counts_and_tiny_coordinates() -> None:
    # a hand-made release with non-integer counts (e.g. post-processed) over a tiny box
    # around (0, 0): every number must still be valid JSON and match the CSV
    from dpcore.points.release import LevelPlan, PartitionRelease

    g = Grid(Bounds(-1e-6, -1e-6, 1e-6, 1e-6), 1, 2)
    lv = LevelPlan(level=0, name="cells", cost=pure(1.0), noise="discrete_laplace", scale=1.0,
                   sensitivity=1, n_counts=2, sd=1.3, ci95=3.0, cells_per_count=1.0, in_partition=True)
    rel = PartitionRelease(
        mechanism="hand", mechanism_title="hand", params={}, grid=g, cost=pure(1.0), levels=(lv,),
        rects=np.array([[0, 1, 0, 1], [0, 1, 1, 2]]), level=np.zeros(2, dtype=np.int64),
        leaf=np.ones(2, dtype=bool), noisy=np.array([2.5, -0.125]), sd=np.full(2, 1.3),
        ci95=np.full(2, 3.0), sensitivity=1, user_cap=None,
    )
    fc = json.loads(release_geojson(rel))
    _, rows = read_csv_rows(release_csv(rel))
    assert [f["properties"]["noisy_count"] for f in fc["features"]] == [2.5, -0.125]
    assert [float(r["noisy_count"]) for r in rows] == [2.5, -0.125]
    ring0 = fc["features"][0]["geometry"]["coordinates"][0]
    assert ring0[0] == pytest.approx([-1e-6, -1e-6], abs=1e-7)
    assert ring0[2] == pytest.approx([0.0, 1e-6], abs=1e-7)
    validate_record(release_record(rel))


def test_clamped_export_sets_negative_leaves_to_zero_and_states_the_bias_bound() -> None:
    """Issue 26, item 9: the clamped file is post-processing of the leaves: max(count, 0), the unclamped
    count beside it, and each area's bias bound σ/2, which holds for the mean bias of clamping a count of 0."""
    from dpcore.points.export import clamped_csv, clamped_frame, negative_counts
    agg = aggregate(np.zeros((16, 16), dtype=np.int64))  # empty: half the noisy counts fall below 0
    rel = release_with(catalog.get("points", "identity"), agg, 0.5, {}, NoiseSource(26))
    neg = negative_counts(rel)
    assert neg["n_areas"] == 256 and 0 < neg["n_negative"] < 256 and neg["min"] < 0
    df = clamped_frame(rel)
    assert len(df) == 256 and (df["count_clamped"] >= 0).all()
    np.testing.assert_array_equal(df["count_clamped"], np.maximum(df["noisy_count"], 0))
    assert int((df["noisy_count"] < 0).sum()) == neg["n_negative"]
    # the bias of clamping an empty area, E[max(X, 0)], is within the stated bound (SE from the sample)
    bias = df["count_clamped"].to_numpy(dtype=float)
    assert bias.mean() - 4 * bias.std(ddof=1) / 16 <= df["bias_at_most"].iloc[0] == pytest.approx(neg["bias_at_most"], abs=1e-4)
    header, rows = read_csv_rows(clamped_csv(rel))
    assert header[:8] == ["id", "level", "west", "south", "east", "north", "cells", "count_clamped"] and len(rows) == 256
