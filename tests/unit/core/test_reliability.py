"""Reliability rules (dpcore.core.reliability): the flags match the rule exactly on hand-made values."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import orjson
import pandas as pd
import pytest

from dpcore.core.reliability import (
    FULL_FILE,
    ReliabilityRule,
    apply_to_files,
    apply_to_frame,
    assess,
    parse_rule,
)
from dpcore.errors import ParameterError


@pytest.mark.parametrize(("text", "floor", "cv", "z", "mode", "canonical"), [
    ("floor=5", 5, None, "1.645", "suppress", "floor=5"),
    ("cv=0.3", None, "0.3", "1.645", "suppress", "cv=0.3"),
    ("cv=0.3,z=1.96", None, "0.3", "1.96", "suppress", "cv=0.3,z=1.96"),
    ("floor=5, cv=0.3", 5, "0.3", "1.645", "suppress", "floor=5,cv=0.3"),
    ("flag:cv=0.3", None, "0.3", "1.645", "flag", "flag:cv=0.3"),
    ("suppress:floor=100", 100, None, "1.645", "suppress", "floor=100"),
    ("FLAG: floor=2.5,cv=25%,z=2", "2.5", "0.25", "2", "flag", "flag:floor=2.5,cv=0.25,z=2"),
])
def test_parse_rule(text: str, floor, cv, z, mode: str, canonical: str) -> None:
    r = parse_rule(text)
    assert r.floor == (None if floor is None else Fraction(str(floor)))
    assert r.cv == (None if cv is None else Fraction(cv))
    assert r.z == Fraction(z) and r.mode == mode and r.text == canonical
    assert parse_rule(r.text) == r  # the canonical text reads back as the same rule


@pytest.mark.parametrize(("text", "needle"), [
    ("cv", "not key=value"), ("cv=abc", "not a number"), ("depth=3", "Unknown key 'depth'"),
    ("z=1.96", "z belongs to a CV rule"), ("cv=0", "must be > 0"), ("cv=0.3,z=-1", "z must be > 0"),
    ("floor=1,floor=2", "given twice"), ("flag:", "not key=value"), ("drop:cv=0.3", "Unknown key"),
])
def test_parse_rule_refuses_bad_text(text: str, needle: str) -> None:
    with pytest.raises(ParameterError, match=needle):
        parse_rule(text)


def test_empty_rule_is_none() -> None:
    assert parse_rule(None) is None and parse_rule("  ") is None
    with pytest.raises(ParameterError, match="needs a floor or a CV"):
        ReliabilityRule()


def test_floor_ties_and_signs() -> None:
    """ŷ < F is suppressed, ŷ = F is published; negative and zero values are below any positive floor."""
    r = parse_rule("floor=5")
    y = [5, 5.0, 4.999999999999, 5.000000000001, 0, -3, 1e6, None, float("nan")]
    a = assess(r, y, [1.0] * len(y))
    assert a.hit.tolist() == [False, False, True, False, True, True, False, False, False]
    assert a.reasons.tolist() == ["", "", "floor", "", "floor", "floor", "", "", ""]
    # a floor of 0: only negative values go
    assert assess(parse_rule("floor=0"), [0, -0.0, -1e-12, 2], [1] * 4).hit.tolist() == [False, False, True, False]


def test_cv_rule_matches_its_definition_exactly() -> None:
    """Published iff ŷ > 0 and z·σ/ŷ <= C, on the decimals as written (ties published)."""
    r = parse_rule("cv=0.3")  # z = 1.645: threshold ŷ >= 1.645 σ / 0.3
    y = [16.45, 16.449999, 16.450001, 100, 0, -0.0, -5, 3.29, 3.2899]
    sd = [3, 3, 3, 3, 3, 3, 3, 0.6, 0.6]
    a = assess(r, y, sd)
    assert a.hit.tolist() == [False, True, False, False, True, True, True, False, True]
    assert a.reasons.tolist() == ["", "cv", "", "", "cv_nonpositive", "cv_nonpositive", "cv_nonpositive", "", "cv"]
    # the float products are not exact: 1.645 * 3 = 4.935000000000001 > 0.3 * 16.45 = 4.935 in floats
    assert 1.645 * 3 != 0.3 * 16.45


def test_cv_rule_against_a_brute_force_exact_reference() -> None:
    """Random decimals, many near the threshold: the vectorised rule equals Fraction arithmetic."""
    rng = np.random.default_rng(7)
    sd = np.round(rng.uniform(0.1, 20, 4000), 4)
    thr = 1.96 * sd / 0.25
    y = np.where(rng.random(4000) < 0.5, np.round(thr, 4), np.round(rng.normal(thr, thr), 2))
    r = parse_rule("cv=0.25,z=1.96")
    got = assess(r, y, sd).hit

    def exact(yi: float, si: float) -> bool:
        fy, fs = Fraction(repr(float(yi))), Fraction(repr(float(si)))
        return fy <= 0 or Fraction("1.96") * fs > Fraction("0.25") * fy

    want = np.array([exact(a, b) for a, b in zip(y, sd, strict=True)])
    assert np.array_equal(got, want)
    assert 0 < got.sum() < got.size


def test_cv_zero_sd_and_missing_sd() -> None:
    r = parse_rule("cv=0.3")
    a = assess(r, [7, 7, 0, 7], [0, None, 0, float("nan")])
    assert a.hit.tolist() == [False, True, True, True]
    assert a.reasons.tolist() == ["", "cv_no_sd", "cv_nonpositive", "cv_no_sd"]


def test_combined_rule_lists_every_reason() -> None:
    r = parse_rule("floor=10,cv=0.5,z=2")  # published iff y >= 10 and y >= 4 sd
    a = assess(r, [9, 12, 12, -1, 40], [1, 3.0001, 3, 1, 10])
    assert a.reasons.tolist() == ["floor", "cv", "", "floor;cv_nonpositive", ""]
    assert a.counts() == {"cv": 1, "cv_nonpositive": 1, "floor": 2}


def test_flag_mode_keeps_values() -> None:
    frame = pd.DataFrame({"level": ["0", "0"], "code": ["007", "=x"], "noisy_count": ["-2", "40"],
                          "noise_sd": ["3", "3"], "ci95_low": ["-7.88", "34.12"], "ci95_high": ["3.88", "45.88"]})
    pub, full, a = apply_to_frame(frame, parse_rule("flag:cv=0.3"))
    assert pub.equals(full)
    assert pub["noisy_count"].tolist() == ["-2", "40"] and pub["flagged"].tolist() == ["true", "false"]
    assert pub["flag_reason"].tolist() == ["cv_nonpositive", ""]
    assert pub["code"].tolist() == ["007", "=x"]  # text read and kept verbatim


def test_apply_to_files_points_like_release() -> None:
    csv = (b"id,level,leaf,noisy_count,ci95_low,ci95_high,noise_sd\n"
           b"0,1,true,3,-2.88,8.88,3\n1,1,true,40,34.12,45.88,3\n2,1,true,,,,3\n")
    feats = [{"type": "Feature", "geometry": None,
              "properties": {"id": i, "level": 1, "noisy_count": v, "ci95_low": 0, "ci95_high": 1, "noise_sd": 3}}
             for i, v in ((0, 3), (1, 40))]
    files = {"release.csv": csv, "release.geojson": orjson.dumps({"type": "FeatureCollection", "features": feats}),
             "release.json": orjson.dumps({"outputs": {"files": ["release.csv", "release.geojson", "release.json"]}}),
             "other.csv": b"x\n1\n"}
    out = apply_to_files(files, "floor=5")
    # the review record is not made here: KindRelease.files(suppress=...) makes it once, after the rule
    assert list(out) == ["release.csv", FULL_FILE, "release.geojson", "other.csv", "release.json"]
    assert out["other.csv"] == files["other.csv"]
    pub = out["release.csv"].decode().splitlines()
    assert pub[0].endswith(",noise_sd,suppressed,suppression_reason")
    assert pub[1] == "0,1,true,,,,3,true,floor"
    assert pub[2] == "1,1,true,40,34.12,45.88,3,false,"
    assert pub[3] == "2,1,true,,,,3,false,"  # no value: nothing to suppress
    full = out[FULL_FILE].decode().splitlines()
    assert full[1] == "0,1,true,3,-2.88,8.88,3,true,floor"
    # the data users' file holds the original columns byte for byte
    assert [ln.rsplit(",", 2)[0] for ln in full] == csv.decode().splitlines()
    gj = orjson.loads(out["release.geojson"])
    p0, p1 = (f["properties"] for f in gj["features"])
    assert (p0["noisy_count"], p0["ci95_low"], p0["suppressed"]) == (None, None, True)
    assert (p1["noisy_count"], p1["suppressed"]) == (40, False)
    rec = orjson.loads(out["release.json"])["reliability"]
    assert (rec["rule"], rec["cells"], rec["suppressed"], rec["flagged"], rec["by_reason"]) == (
        "floor=5", 2, 1, 0, {"floor": 1})
    assert rec["values_in"] == FULL_FILE


def test_apply_to_files_without_rule_or_columns() -> None:
    files = {"release.csv": b"a,b\n1,2\n"}
    assert apply_to_files(files, None) == files
    with pytest.raises(ParameterError, match="needs the columns noisy_count and noise_sd"):
        apply_to_files(files, "floor=5")


def test_group_sizes_leave_the_geojson_and_say_so() -> None:
    csv = b"level,code,parent,size,noisy_count,noise_sd\nc,1,,1,2,1\nc,1,,2,9,1\n"
    gj = orjson.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "geometry": None, "properties": {"level": "c", "code": "1", "size_1": 2, "size_2": 9}}]})
    files = {"release.csv": csv, "c.geojson": gj, "release.json": b"{}"}
    out = apply_to_files(files, "floor=5")
    assert out["c.geojson"] == gj
    assert out["release.csv"].decode().splitlines()[1] == "c,1,,1,,1,true,floor"
    assert "c.geojson unchanged" in orjson.loads(out["release.json"])["reliability"]["geojson"]


@pytest.mark.parametrize("rule", ["floor=5", "flag:cv=0.3", "floor=2,cv=0.5,z=2"])
def test_the_fast_path_writes_what_the_csv_reader_writes(rule: str) -> None:
    """release.csv without quoted fields is edited line by line; the bytes equal the CSV reader's round trip."""
    from dpcore.core.reliability import _csv_bytes, _csv_frame, _plain_csv

    rng = np.random.default_rng(3)
    y = rng.integers(-3, 30, 300)
    csv = ("level,code,parent,noisy_count,ci95_low,ci95_high,noise_sd\n" + "".join(
        f"tract,{i:06d},{i // 10:03d},{v},{v - 4.1:.1f},{v + 4.1:.1f},2.0918\n" for i, v in enumerate(y))).encode()
    pub, full, a, _ = _plain_csv(csv, parse_rule(rule))
    want_pub, want_full, b = apply_to_frame(_csv_frame(csv), parse_rule(rule))
    assert np.array_equal(a.hit, b.hit) and a.hit.any()
    assert pub == _csv_bytes(want_pub) and full == _csv_bytes(want_full)


def test_quoted_fields_take_the_csv_reader() -> None:
    csv = b'level,code,name,noisy_count,noise_sd\nc,01,"Leeds, West",3,1\nc,02,"a ""b""",40,1\n'
    out = apply_to_files({"release.csv": csv}, "floor=5")
    assert out["release.csv"].decode().splitlines()[1:] == ['c,01,"Leeds, West",,1,true,floor',
                                                           'c,02,"a ""b""",40,1,false,']


@pytest.mark.parametrize("rule", ["floor=5", "flag:cv=0.3"])
def test_the_arrow_geojson_path_equals_the_parsing_paths(rule: str) -> None:
    """A points-style GeoJSON (one feature per line) is edited in Arrow; the result parses to what the
    whole-file path gives."""
    from dpcore.core.reliability import _geojson, _geojson_arrow, _mark

    rng = np.random.default_rng(5)
    y = rng.integers(-2, 12, 50)
    feats = [b'{"type":"Feature","id":%d,"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0]]]},'
             b'"properties":{"id":%d,"level":%d,"noisy_count":%d,"ci95_low":%.1f,"ci95_high":%.1f,"noise_sd":2.5}}'
             % (i, i, 1 + i % 2, v, v - 4.9, v + 4.9) for i, v in enumerate(y)]
    data = b'{"type":"FeatureCollection","name":"x","features":[\n' + b",\n".join(feats) + b"\n]}\n"
    r = parse_rule(rule)
    hit = assess(r, y.astype(float), np.full(y.size, 2.5)).hit
    keys = {f"{i}\x1f{1 + i % 2}" for i in np.flatnonzero(hit)}
    fast = _geojson_arrow(data, r, keys, ["id", "level"])
    assert fast is not None
    doc = orjson.loads(data)
    _mark([f["properties"] for f in doc["features"]], r, keys, ["id", "level"])
    assert orjson.loads(fast) == doc
    assert orjson.loads(_geojson(orjson.dumps(orjson.loads(data)), r, keys, ["id", "level"])) == doc  # parsed whole
    assert sum(f["properties"][r.column] for f in doc["features"]) == hit.sum() > 0
    assert _geojson_arrow(orjson.dumps(doc) + b"\n", r, keys, ["id", "level"]) is None  # one line: not this form


def test_a_quoted_header_keeps_the_fast_path_and_its_style() -> None:
    """Arrow's CSV writer (points) quotes the header's names; the rows are plain."""
    from dpcore.core.reliability import _plain_csv

    csv = b'"id","level","noisy_count","noise_sd"\n0,1,3,1\n1,1,9,1\n'
    pub, full, a, _ = _plain_csv(csv, parse_rule("floor=5"))
    assert pub == b'"id","level","noisy_count","noise_sd","suppressed","suppression_reason"\n0,1,,1,true,floor\n' \
                  b"1,1,9,1,false,\n"
    assert apply_to_files({"release.csv": csv}, "floor=5")["release.csv"] == pub


@pytest.mark.parametrize("rule", ["cv=0.3", "flag:floor=25"])
def test_points_geojson_is_marked_in_its_one_write_as_the_rewrite_would(rule: str) -> None:
    """``KindRelease.files(suppress=...)`` lets the points writer mark release.geojson in its one pass
    (no rewrite of a million features); the result parses to what the file editor makes of the plain
    files, and release.csv, release_full.csv and the record are the same."""
    from points_helpers import plan_points

    from dpcore import pipeline
    from dpcore.core.session import Session
    from dpcore.data.domain import Aggregate, Bounds, Grid
    from dpcore.privacy.noise import NoiseSource

    counts = np.random.default_rng(2).poisson(20, size=(8, 8)).astype(np.int64)
    agg = Aggregate(grid=Grid(Bounds(-74.0, 40.6, -73.8, 40.8), 8, 8), counts=counts, n_outside=0, n_capped=0,
                    sensitivity=1, user_cap=None)
    kr = pipeline.release(plan_points(agg, "quadtree", 0.5, {}), agg, session=Session.unaccounted(),
                          noise=NoiseSource(3))
    one = kr.files(suppress=rule)
    plain = apply_to_files(kr.files(), rule)
    assert orjson.loads(one["release.geojson"]) == orjson.loads(plain["release.geojson"])
    assert orjson.loads(one["release.geojson"]) != orjson.loads(kr.files()["release.geojson"])
    for name in ("release.csv", FULL_FILE):
        assert one[name] == plain[name]
    assert orjson.loads(one["release.json"]) == orjson.loads(plain["release.json"])  # keys in another order
