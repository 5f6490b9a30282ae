"""The record every kind writes: one place for what records share (core.record), the same
top-level ledger and the same interval columns in every kind's CSV, one (ε, δ) reading."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest
from areas_helpers import plan_census, plan_hierarchy
from flows_helpers import plan_od
from points_helpers import plan_points

from dpcore import pipeline
from dpcore.areas import census_tables
from dpcore.areas.counts import HierarchyCounts
from dpcore.core.record import (
    APPROX_DP_CONVERSION,
    INTERVAL_COLUMNS,
    approx_dp_reading,
    record_schema,
    schema_of,
    validate_record,
    write_files,
)
from dpcore.core.review import level_guidance
from dpcore.data import synthetic
from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import InputError
from dpcore.flows.counts import ODCounts
from dpcore.points.unit import points_unit
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource

ROOT = Path(__file__).resolve().parents[3]
AREAS = pd.DataFrame({"state": ["01", "01", "02", "02"], "county": ["001", "003", "001", "005"]})


def _points(cost: budget.PrivacyCost) -> tuple[dict[str, bytes], Ledger]:
    rng = np.random.default_rng(0)
    counts = rng.poisson(20, size=(8, 8)).astype(np.int64)
    agg = Aggregate(grid=Grid(Bounds(-74.0, 40.6, -73.8, 40.8), 8, 8), counts=counts, n_outside=0, n_capped=0,
                    sensitivity=1, user_cap=None)
    led = Ledger(budget.zcdp(1.0) if cost.definition == "zcdp" else budget.pure(2.0), dataset="k1:points")
    kr = pipeline.release(plan_points(agg, "ug", cost, {"public_n": 1000}), agg, ledger=led, noise=NoiseSource(1))
    return kr.files(led), led


def _hierarchy(cost: budget.PrivacyCost) -> tuple[dict[str, bytes], Ledger]:
    h = Hierarchy.from_frame(AREAS, ["state", "county"])
    counts = HierarchyCounts.from_frame(AREAS.assign(pop=[120, 40, 75, 300]), h, ["state", "county"], "pop")
    led = Ledger(budget.zcdp(1.0) if cost.definition == "zcdp" else budget.pure(2.0), dataset="k1:hier")
    kr = pipeline.release(plan_hierarchy(counts, "topdown_l2", cost), counts, ledger=led, noise=NoiseSource(2))
    return kr.files(led), led


def _census(cost: budget.PrivacyCost) -> tuple[dict[str, bytes], Ledger]:
    table = census_tables.CensusTable.from_frame(synthetic.synthetic_census(), ["state", "county", "tract"],
                                                 "population")
    led = Ledger(budget.pure(2.0), dataset="k1:census")
    kr = pipeline.release(plan_census(table, "privelet", cost), table, ledger=led, noise=NoiseSource(3))
    return kr.files(led), led


def _marginals(cost: budget.PrivacyCost) -> tuple[dict[str, bytes], Ledger]:
    table = census_tables.CensusTable.from_frame(synthetic.synthetic_census(age_bands=True),
                                                 ["state", "county", "tract"], "population", ordinals=["age_band"])
    led = Ledger(budget.zcdp(1.0) if cost.definition == "zcdp" else budget.pure(2.0), dataset="k1:census")
    kr = pipeline.release(plan_census(table, "matrix", cost, level="state", marginals="state;age_band"), table,
                          ledger=led, noise=NoiseSource(4))
    return kr.files(led), led


def _od(cost: budget.PrivacyCost) -> tuple[dict[str, bytes], Ledger]:
    h = Hierarchy.from_frame(AREAS, ["state", "county"])
    labels = h.labels(2).tolist()
    n = len(labels)
    flows = pd.DataFrame({"origin": np.repeat(labels, n), "destination": np.tile(labels, n),
                          "count": np.arange(n * n) * 7 + 50})
    counts = ODCounts.from_frame(flows, h, origin="origin", destination="destination", count="count")
    led = Ledger(budget.zcdp(1.0) if cost.definition == "zcdp" else budget.pure(2.0), dataset="k1:od")
    kr = pipeline.release(plan_od(counts, "inftda", cost), counts, ledger=led, noise=NoiseSource(5))
    return kr.files(led), led


KINDS = {"points": _points, "hierarchy": _hierarchy, "census": _census, "census_marginals": _marginals, "od": _od}
COSTS = [budget.pure(0.5), budget.zcdp(0.25)]


@pytest.mark.parametrize("cost", COSTS, ids=lambda c: c.definition)
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_record_validates_and_carries_the_shared_parts(kind: str, cost: budget.PrivacyCost) -> None:
    if kind == "census" and cost.definition == "zcdp":
        pytest.skip("Privelet is defined for pure ε-DP only")
    files, led = KINDS[kind](cost)
    rec = json.loads(files["release.json"])
    validate_record(rec)  # the envelope, and through it the body schema of the record's kind and mechanism
    # the record's kind is the release form: the marginal tables are a census release by the matrix mechanism
    assert rec["kind"] == ("census" if kind == "census_marginals" else kind)
    assert schema_of(rec) == {"points": "release", "hierarchy": "hierarchy_release", "census": "census_release",
                              "census_marginals": "census_marginals", "od": "od_release"}[kind]
    for key in ("schema", "software", "release_id", "created", "mechanism", "privacy", "ledger", "notes"):
        assert key in rec, key
    # the ledger as of the charge, in one place for every kind, without the budget's key
    assert rec["ledger"]["accounted"] is True and rec["ledger"]["spent"] == pytest.approx(led.spent)
    assert "dataset" not in rec["ledger"] and "ledger" not in rec.get("budget", {})
    reading = rec["privacy"].get("approx_dp_table", rec["privacy"].get("approx_dp"))
    if cost.definition == "zcdp":
        assert rec["privacy"]["approx_dp_conversion"] == APPROX_DP_CONVERSION
        expected = approx_dp_reading(cost)
        assert expected is not None
        by_delta = {r["delta"]: r["epsilon"] for r in reading}
        for row in expected:
            assert by_delta[row["delta"]] == pytest.approx(row["epsilon"])
    else:
        assert reading is None
    # a record that lost its ledger breaks the schema
    broken = {k: v for k, v in rec.items() if k != "ledger"}
    with pytest.raises(jsonschema.ValidationError):
        validate_record(broken)


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_csv_carries_the_interval_columns(kind: str) -> None:
    files, _ = KINDS[kind](budget.pure(0.5))
    name = "marginals.csv" if kind == "census_marginals" else "release.csv"
    df = pd.read_csv(io.BytesIO(files[name]))
    assert set(INTERVAL_COLUMNS) <= set(df.columns)
    assert "noisy_count" in df.columns
    assert (df["noise_sd"].dropna() >= 0).all() and df["noise_sd"].notna().any()
    both = df[["ci95_low", "ci95_high"]].dropna()
    assert (both["ci95_low"] <= both["ci95_high"]).all()


def test_the_od_interval_is_the_level_bound_and_empty_without_one() -> None:
    files, _ = _od(budget.zcdp(0.25))
    df = pd.read_csv(io.BytesIO(files["release.csv"]))
    assert df["ci95_low"].notna().all()  # InfTDA (L-infinity) has a 95 % bound per level
    assert (df["ci95_low"] <= df["noisy_count"]).all() and (df["noisy_count"] <= df["ci95_high"]).all()


def test_files_are_written_whole_into_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "rel"
    paths = write_files({"release.csv": b"a\n", "release.json": b"{}"}, out)
    assert [p.name for p in paths] == ["release.csv", "release.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rel"]  # no temporary folder left behind
    write_files({"release.csv": b"b\n"}, out)  # a second write replaces its files, keeps the others
    assert (out / "release.csv").read_bytes() == b"b\n" and (out / "release.json").exists()
    with pytest.raises(ValueError, match="folder"):
        write_files({"../x.csv": b""}, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rel"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="is a file"):
        write_files({"release.csv": b""}, tmp_path / "file")


def test_the_approx_dp_reading_is_made_in_one_place() -> None:
    """Records read a ρ as (ε, δ) through core.record.approx_dp_reading only (one function, one
    citation); the app's and the CLI's budget texts may convert, records may not."""
    pattern = re.compile(r"zcdp_to_approx_dp(_classic)?\(")
    writers = [p for p in (ROOT / "dpcore").rglob("*.py")
               if p.parent.name != "cli" and p.name not in ("budget.py", "record.py", "ledger.py")]
    offenders = [str(p.relative_to(ROOT)) for p in writers if pattern.search(p.read_text("utf-8"))]
    assert offenders == []
    citations = [str(p.relative_to(ROOT)) for p in (ROOT / "dpcore").rglob("*.py")
                 if '"approx_dp_conversion"] = "' in p.read_text("utf-8")]
    assert citations == []  # every record names APPROX_DP_CONVERSION


def test_a_release_makes_its_files_from_the_envelope_of_the_charge(tmp_path: Path) -> None:
    counts = np.random.default_rng(1).poisson(20, size=(8, 8)).astype(np.int64)
    agg = Aggregate(grid=Grid(Bounds(-74.0, 40.6, -73.8, 40.8), 8, 8), counts=counts, n_outside=0, n_capped=0,
                    sensitivity=1, user_cap=None)
    led = Ledger(budget.pure(2.0), dataset="k1:points")
    plan = plan_points(agg, "ug", 0.5, {"public_n": 1000})
    kr = pipeline.release(plan, agg, ledger=led, noise=NoiseSource(1))
    files = kr.files(led)
    paths = write_files(files, tmp_path / "out")
    assert [p.name for p in paths] == ["release.csv", "release.geojson", "release.json",  # the CLI's names
                                       "measurements.csv", "design.json", "estimates.csv",  # data users' (issue 25)
                                       "replicates.csv",  # R = 80 replicate columns for spreadsheets
                                       "deployment.yaml", "review.html"]  # the review record (issue 25)
    rec = json.loads((tmp_path / "out" / "release.json").read_bytes())
    validate_record(rec)
    assert (rec["release_id"], rec["created"]) == (kr.release_id, kr.created)
    assert rec["ledger"]["entries"][-1]["cost"]["value"] == pytest.approx(0.5)


SHARED = ("schema", "software", "release_id", "created", "kind", "mechanism", "privacy", "notes", "ledger")


@pytest.mark.parametrize("key", SHARED)
def test_a_record_missing_a_shared_key_fails_the_envelope(key: str) -> None:
    rec = json.loads(_hierarchy(budget.pure(0.5))[0]["release.json"])
    validate_record(rec)
    with pytest.raises(jsonschema.ValidationError):
        validate_record({k: v for k, v in rec.items() if k != key})


@pytest.mark.parametrize("part", ["name", "title", "reference"])
def test_a_record_missing_a_shared_mechanism_key_fails(part: str) -> None:
    rec = json.loads(_od(budget.zcdp(0.25))[0]["release.json"])
    rec["mechanism"].pop(part)
    with pytest.raises(jsonschema.ValidationError):
        validate_record(rec)


BODY_SCHEMA = {"points": "release", "hierarchy": "hierarchy_release", "census": "census_release",
               "census_marginals": "census_marginals", "od": "od_release"}


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_body_of_one_kind_fails_every_other_kinds_schema(kind: str) -> None:
    rec = json.loads(KINDS[kind](budget.pure(0.5))[0]["release.json"])
    validate_record(rec, BODY_SCHEMA[kind])
    for other, schema in BODY_SCHEMA.items():
        if other == kind:
            continue
        with pytest.raises(jsonschema.ValidationError):
            validate_record(rec, schema)
        # the envelope picks the body schema from the record's kind (and mechanism for census)
        relabelled = {**rec, "kind": "census" if other == "census_marginals" else other}
        if other == "census_marginals":
            relabelled["mechanism"] = {**rec["mechanism"], "name": "matrix"}
        if kind == "census_marginals" and other == "census":
            relabelled["mechanism"] = {**rec["mechanism"], "name": "privelet"}
        with pytest.raises(jsonschema.ValidationError):
            validate_record(relabelled)


def test_census_records_pick_their_body_by_mechanism() -> None:
    """The kind ``census`` holds two mechanisms with two bodies: the envelope chooses by the name."""
    rec = json.loads(_marginals(budget.zcdp(0.25))[0]["release.json"])
    assert (rec["kind"], rec["mechanism"]["name"]) in {("census_marginals", "matrix"), ("census", "matrix")}
    validate_record({**rec, "kind": "census"})  # the marginals body under the kind's one name
    with pytest.raises(jsonschema.ValidationError):
        validate_record({**rec, "kind": "census", "mechanism": {**rec["mechanism"], "name": "privelet"}})
    with pytest.raises(jsonschema.ValidationError):
        validate_record({**rec, "kind": "census", "mechanism": {**rec["mechanism"], "name": "other"}})


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_kind_release_record_is_what_its_release_json_holds(kind: str) -> None:
    """KindRelease.record(ledger) and release.json come from one builder, with the plan's rows."""
    from dpcore import catalog

    cost = budget.pure(0.5)
    led = Ledger(budget.pure(2.0), dataset=f"k1:{kind}")
    if kind == "points":
        counts = np.random.default_rng(0).poisson(20, size=(8, 8)).astype(np.int64)
        agg = Aggregate(grid=Grid(Bounds(-74.0, 40.6, -73.8, 40.8), 8, 8), counts=counts, n_outside=0,
                        n_capped=0, sensitivity=1, user_cap=None)
        plan = catalog.get("points", "ug").plan(agg.grid, cost, {"public_n": 1000}, unit=points_unit())
    elif kind == "hierarchy":
        h = Hierarchy.from_frame(AREAS, ["state", "county"])
        agg = HierarchyCounts.from_frame(AREAS.assign(pop=[120, 40, 75, 300]), h, ["state", "county"], "pop")
        plan = catalog.get("hierarchy", "topdown_l2").plan(h, cost)
    elif kind in ("census", "census_marginals"):
        agg = census_tables.CensusTable.from_frame(synthetic.synthetic_census(age_bands=True),
                                                   ["state", "county", "tract"], "population", ordinals=["age_band"])
        name, params = ("privelet", {}) if kind == "census" else ("matrix", {"level": "state",
                                                                               "marginals": "state;age_band"})
        plan = catalog.get("census", name).plan(agg.structure, cost, params)
    else:
        h = Hierarchy.from_frame(AREAS, ["state", "county"])
        labels = h.labels(2).tolist()
        n = len(labels)
        flows = pd.DataFrame({"origin": np.repeat(labels, n), "destination": np.tile(labels, n),
                              "count": np.arange(n * n) * 7 + 50})
        agg = ODCounts.from_frame(flows, h, origin="origin", destination="destination", count="count")
        plan = catalog.get("od", "inftda").plan(h, cost)
    kr = pipeline.release(plan, agg, ledger=led, noise=NoiseSource(7))
    rec = kr.record(led)
    files = kr.files(led)
    written = json.loads(files["release.json"])
    validate_record(written)  # with its level_guidance, read from the published table
    assert written.pop("level_guidance", None) == level_guidance(files.get("release.csv"))
    assert written == rec
    validate_record(rec)
    assert rec["plan"] == json.loads(json.dumps(plan.rows_dict()))
    assert (rec["release_id"], rec["created"]) == (kr.release_id, kr.created)
    assert rec["ledger"]["spent"] == pytest.approx(0.5)


# ---------------------------------------------------------------- the envelope and the body schemas


SHARED_ONLY = ("software", "release_id", "created", "notes", "ledger", "plan")


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_body_schema_holds_the_kinds_keys_and_refers_to_the_envelope(kind: str) -> None:
    """The envelope states the shared top once; a body schema holds what only its kind has (and its kind's
    own keys inside the shared mechanism and privacy sections, on top of the envelope's)."""
    body = record_schema(BODY_SCHEMA[kind])
    assert not set(SHARED_ONLY) & set(body["properties"]), "the shared top belongs to the envelope"
    assert not set(SHARED_ONLY) & set(body["required"])
    for section in ("mechanism", "privacy"):
        assert body["properties"][section]["$ref"] == f"envelope.schema.json#/$defs/{section}"
    envelope = record_schema()
    assert envelope["unevaluatedProperties"] is False
    assert f"{BODY_SCHEMA[kind]}.schema.json" in json.dumps(envelope["allOf"])


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_body_is_checked_through_the_envelope(kind: str) -> None:
    rec = json.loads(KINDS[kind](budget.pure(0.5))[0]["release.json"])
    validate_record(rec)
    validate_record(rec, BODY_SCHEMA[kind])  # the body schema alone (it reads the envelope's sections)
    body_keys = set(rec) - {"schema", "software", "release_id", "created", "kind", "mechanism", "privacy",
                            *SHARED_ONLY}
    assert body_keys
    for key in sorted(body_keys & set(record_schema(BODY_SCHEMA[kind])["required"])):
        with pytest.raises(jsonschema.ValidationError, match=f"'{key}' is a required property"):
            validate_record({k: v for k, v in rec.items() if k != key})  # the refusal names the body key
    # a key neither the envelope nor the body declares is refused, at the top and in the mechanism
    with pytest.raises(jsonschema.ValidationError, match="unexpected"):
        validate_record({**rec, "true_counts": [1, 2]})
    with pytest.raises(jsonschema.ValidationError, match="'secret' was unexpected"):
        validate_record({**rec, "mechanism": {**rec["mechanism"], "secret": 1}})
    # the envelope's sections hold for every body: a mechanism without its title fails the body alone too
    with pytest.raises(jsonschema.ValidationError):
        validate_record({**rec, "mechanism": {k: v for k, v in rec["mechanism"].items() if k != "title"}},
                        BODY_SCHEMA[kind])


@pytest.mark.parametrize("kind", list(KINDS))
def test_records_of_earlier_versions_still_validate(kind: str) -> None:
    """Records written before the plan's rows went into release.json, and marginal tables recorded as kind
    census_marginals (before it became census), still validate.  (O/D records that said bounded/unbounded
    do not: the schemas name no alias, tests/unit/core/test_vocabulary.py; History serves them as stored.)"""
    rec = json.loads(KINDS[kind](budget.pure(0.5))[0]["release.json"])
    validate_record({k: v for k, v in rec.items() if k != "plan"})
    if kind == "census_marginals":
        validate_record({**rec, "kind": "census_marginals"})


def _not_offered_records() -> dict[str, dict]:
    """Records the code writes whose data users' files are not offered (design codes repeat): an areas
    release (a tract coded like a county's ``level:code`` key), an O/D leaf-only release ('>' in area
    labels) and an O/D TopDown release (a zone coded like its state)."""
    from dpcore import catalog
    from dpcore.areas.export import hierarchy_files
    from dpcore.flows.export import od_files

    out = {}
    df = pd.DataFrame({"county": ["A", "A", "B", "B"], "tract": ["A", "county:B", "t3", "t4"]})
    h = Hierarchy.from_frame(df, ["county", "tract"])
    c = HierarchyCounts.from_frame(df.assign(n=[5, 7, 9, 11]), h, ["county", "tract"], "n")
    rel = catalog.get("hierarchy", "exact").release_counts(c, budget.pure(1.0), NoiseSource(5))
    out["hierarchy"] = json.loads(hierarchy_files(rel)["release.json"])
    for mech, zones, o, d in (("vanilla_gauss", ["a>b", "a", "b>c", "c"], ["a>b", "a", "c"], ["c", "b>c", "a"]),
                              ("inftda", ["A", "z2", "B", "z4"], ["A"] * 60 + ["z2"] * 5, ["B"] * 60 + ["z4"] * 5)):
        areas = pd.DataFrame({"state": ["A", "A", "B", "B"] if mech == "inftda" else ["s"] * 4, "zone": zones})
        h = Hierarchy.from_frame(areas, ["state", "zone"], codes="global", source="area list")
        trips = ODCounts.from_frame(pd.DataFrame({"o": o, "d": d}), h, origin="o", destination="d")
        rel = catalog.get("od", mech).release_counts(trips, budget.zcdp(2.0), NoiseSource(3))
        out[f"od {mech}"] = json.loads(od_files(rel)["release.json"])
    counts = np.random.default_rng(0).poisson(20, size=(8, 8)).astype(np.int64)
    agg = Aggregate(grid=Grid(Bounds(-74.0, 40.6, -73.8, 40.8), 8, 8), counts=counts, n_outside=0, n_capped=0,
                    sensitivity=1, user_cap=None)
    for mech in ("privelet", "dawa", "dawa_free", "matrix"):
        led = Ledger(budget.pure(2.0), dataset=f"k1:points:{mech}")
        kr = pipeline.release(plan_points(agg, mech, budget.pure(0.5)), agg, ledger=led, noise=NoiseSource(1))
        out[f"points {mech}"] = json.loads(kr.files(led)["release.json"])
    return out


def test_a_record_whose_measurements_are_not_offered_must_say_why() -> None:
    """Every record the code writes whose measurements are not offered says why (areas and O/D: codes that
    repeat; points: mechanisms that measure no released rectangle), and validates.  The areas and O/D
    schemas require ``why`` then (JSON Schema if/then: their writers always stated it); the points schema
    does not, because points records written before 2026-11-30 have no ``why`` and must still validate
    (review); ``why`` stays optional when measurements are offered or the field is absent."""
    written = {kind: json.loads(KINDS[kind](budget.pure(0.5))[0]["release.json"])
               for kind in ("points", "hierarchy", "od")}
    for name, rec in _not_offered_records().items():
        users = rec["data_users"]
        assert users["measurements_offered"] is False and users["why"], name
        validate_record(rec)
        without = {**rec, "data_users": {k: v for k, v in users.items() if k != "why"}}
        if name.startswith("points"):
            validate_record(without)  # an earlier points record
            continue
        with pytest.raises(jsonschema.ValidationError, match="'why' is a required property"):
            validate_record(without)
        kind = name.split()[0]
        offered = written[kind]
        validate_record(offered)
        assert "why" not in offered["data_users"]
        validate_record({**offered, "data_users": {**offered["data_users"], "measurements_offered": True}})
        with pytest.raises(jsonschema.ValidationError, match="'why' is a required property"):
            validate_record({**offered, "data_users": {**offered["data_users"], "measurements_offered": False}})


MECHANISM_OF = {"points": ("points", "ug"), "hierarchy": ("hierarchy", "topdown_l2"), "census": ("census", "privelet"),
                "census_marginals": ("census", "matrix"), "od": ("od", "inftda")}


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_pipeline_checks_the_data_once(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """pipeline.release runs check_data once, before the charge, and tells the mechanism so; a direct
    caller of Mechanism.release still gets the check (tests/unit/core/test_core_mechanism.py)."""
    from dpcore import catalog

    cls = type(catalog.get(*MECHANISM_OF[kind]))
    calls: list[str] = []
    original = cls.check_data

    def counted(self, plan, aggregate):  # type: ignore[no-untyped-def]
        calls.append(plan.mechanism)
        return original(self, plan, aggregate)

    monkeypatch.setattr(cls, "check_data", counted)
    KINDS[kind](budget.pure(0.5))
    assert calls == [MECHANISM_OF[kind][1]]


def test_a_write_stopped_half_way_leaves_the_folder_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 26, item 20: a full disk while the files are written leaves neither a lone release.csv in
    a new folder nor a mix of two releases in an existing one (a guard: writing into a temporary
    folder first already did this; the kill while moving in is the next test)."""
    written = Path.write_bytes

    def full_after_one(self: Path, data: bytes) -> int:
        if self.name != "release.csv":
            raise OSError(28, "No space left on device", str(self))
        return written(self, data)

    monkeypatch.setattr(Path, "write_bytes", full_after_one)
    with pytest.raises(OSError, match="No space"):
        write_files({"release.csv": b"new\n", "release.json": b"{}"}, tmp_path / "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no folder holding release.csv alone
    monkeypatch.setattr(Path, "write_bytes", written)
    out = tmp_path / "rel"
    write_files({"release.csv": b"old\n", "release.json": b"{\"old\": 1}", "notes.txt": b"mine"}, out)
    monkeypatch.setattr(Path, "write_bytes", full_after_one)
    with pytest.raises(OSError, match="No space"):
        write_files({"release.csv": b"new\n", "release.json": b"{}"}, out)
    monkeypatch.setattr(Path, "write_bytes", written)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {
        "release.csv": b"old\n", "release.json": b"{\"old\": 1}", "notes.txt": b"mine"}
    write_files({"release.csv": b"new\n", "release.json": b"{}"}, out)  # a whole write swaps the folder
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {
        "release.csv": b"new\n", "release.json": b"{}", "notes.txt": b"mine"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rel"]  # nothing left beside it
    (out / "sub").mkdir()
    (out / "sub" / "keep.txt").write_bytes(b"kept")
    write_files({"release.csv": b"third\n"}, out)  # a folder inside: files replaced, the folder untouched
    assert (out / "sub" / "keep.txt").read_bytes() == b"kept" and (out / "release.csv").read_bytes() == b"third\n"


def test_a_kill_while_the_files_are_moved_in_never_leaves_a_mix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    out = tmp_path / "rel"
    write_files({"release.csv": b"old\n", "release.json": b"old"}, out)
    moves = []
    real = os.replace

    def killed_on_second(src: object, dst: object) -> None:
        moves.append(dst)
        if len(moves) == 2:
            raise KeyboardInterrupt  # the kill
        real(src, dst)

    monkeypatch.setattr(os, "replace", killed_on_second)
    with pytest.raises(KeyboardInterrupt):
        write_files({"release.csv": b"new\n", "release.json": b"new"}, out)
    monkeypatch.setattr(os, "replace", real)
    if out.exists():  # the folder holds one release's files, never release.csv of one and release.json of another
        got = {p.name: p.read_bytes() for p in out.iterdir()}
        assert got in ({"release.csv": b"old\n", "release.json": b"old"},
                       {"release.csv": b"new\n", "release.json": b"new"}), got
    else:  # killed between the two renames: the new folder is complete beside it
        beside = [p for p in tmp_path.iterdir() if p.name.startswith(".rel.") and (p / "release.json").exists()]
        assert any((p / "release.json").read_bytes() == b"new" for p in beside)
