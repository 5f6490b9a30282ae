"""``--suppress RULE`` on ``release points|hierarchy|od`` and in ``run CONFIG`` (dpcore.core.reliability).

The CLI draws secure noise, so the tests check that the published files follow the rule exactly on
whatever values were drawn: every flag is recomputed from release_full.csv's values and SDs."""

from __future__ import annotations

import csv
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcore.cli import main
from dpcore.core.record import validate_record


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _check_folder(out: Path, floor: int | None, cv: str | None, z: str = "1.645", mode: str = "suppress") -> dict:
    pub, full = _rows(out / "release.csv"), _rows(out / "release_full.csv")
    col = "suppressed" if mode == "suppress" else "flagged"
    assert len(pub) == len(full) > 0
    n_hit = 0
    for p, f in zip(pub, full, strict=True):
        if f["noisy_count"] == "":
            continue
        y, sd = Fraction(f["noisy_count"]), Fraction(f["noise_sd"])
        hit = (floor is not None and y < floor) or (cv is not None and (y <= 0 or Fraction(z) * sd > Fraction(cv) * y))
        assert (f[col] == "true") == hit and p[col] == f[col]
        n_hit += hit
        if hit and mode == "suppress":
            assert p["noisy_count"] == p["ci95_low"] == p["ci95_high"] == ""
        else:
            assert p["noisy_count"] == f["noisy_count"]
    rec = json.loads((out / "release.json").read_text("utf-8"))
    validate_record(rec)
    rel = rec["reliability"]
    assert rel[col] == n_hit and rel["values_in"] == "release_full.csv"
    assert "release_full.csv" in json.dumps(rec.get("outputs", {}))
    return rec


def test_release_points_suppress_cv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(1)
    pd.DataFrame({"lat": rng.uniform(0, 1, 3000) ** 2, "lon": rng.uniform(0, 1, 3000)}).to_csv(
        tmp_path / "pts.csv", index=False)
    out = tmp_path / "out"
    rc = main(["release", "points", "--input", str(tmp_path / "pts.csv"), "--bounds=0,0,1,1", "--grid", "8,8",
               "--mechanism", "identity", "--epsilon", "0.3", "--out", str(out), "--no-budget",
               "--suppress", "floor=5,cv=0.3,z=1.96"])
    assert rc == 0, capsys.readouterr()
    rec = _check_folder(out, 5, "0.3", "1.96")
    assert 0 < rec["reliability"]["suppressed"] < 64  # squared latitudes: an empty south, a full north
    gj = json.loads((out / "release.geojson").read_text("utf-8"))
    pub = {r["id"]: r for r in _rows(out / "release.csv")}
    for feat in gj["features"]:
        p = feat["properties"]
        assert p["suppressed"] == (pub[str(p["id"])]["suppressed"] == "true")
        assert (p["noisy_count"] is None) == p["suppressed"]


def test_release_points_refuses_a_bad_rule_before_reading(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["release", "points", "--input", str(tmp_path / "missing.csv"), "--bounds=0,0,1,1", "--grid", "4,4",
               "--mechanism", "identity", "--epsilon", "1", "--out", str(tmp_path / "o"), "--no-budget",
               "--suppress", "cv=lots"])
    err = capsys.readouterr().err
    assert rc == 2 and "cv=lots" in err and "not a number" in err


def test_release_hierarchy_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.unit.cli.test_cli import hier_args, write_tracts

    inp = write_tracts(tmp_path / "tracts.csv")
    out = tmp_path / "h"
    assert main(hier_args(inp, out, "--no-budget", "--suppress", "flag:cv=0.1", budget_flag="--rho=0.01")) == 0, \
        capsys.readouterr()
    _check_folder(out, None, "0.1", mode="flag")


def test_release_od_suppress_floor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    codes = [f"{r:02d}{d:02d}" for r in (1, 2) for d in (1, 2, 3)]
    pd.DataFrame({"region": [c[:2] for c in codes], "district": [c[2:] for c in codes], "code": codes}).to_csv(
        tmp_path / "areas.csv", index=False)
    trips = pd.DataFrame({"origin": rng.choice(codes, 400), "destination": rng.choice(codes, 400)})
    trips.to_csv(tmp_path / "trips.csv", index=False)
    out = tmp_path / "od"
    rc = main(["release", "od", "--input", str(tmp_path / "trips.csv"), "--hierarchy", str(tmp_path / "areas.csv"),
               "--levels", "region,district", "--rho", "0.5", "--out", str(out), "--no-budget",
               "--suppress", "floor=12"])
    assert rc == 0, capsys.readouterr()
    _check_folder(out, 12, None)


def test_run_config_suppress(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(2)
    pd.DataFrame({"lat": rng.uniform(0, 1, 500), "lon": rng.uniform(0, 1, 500)}).to_csv(tmp_path / "p.csv",
                                                                                        index=False)
    (tmp_path / "r.toml").write_text(
        'release = "points"\n[input]\npath = "p.csv"\n[domain]\nbounds = "0,0,1,1"\ngrid = "4,4"\n'
        '[mechanism]\nname = "identity"\n[budget]\nepsilon = 1\nledger = "ledger.json"\nbudget_cap = 5\n'
        '[output]\ndir = "out"\nsuppress = "cv=0.2"\n', "utf-8")
    assert main(["run", str(tmp_path / "r.toml"), "--dry-run"]) == 0
    assert "--suppress=cv=0.2" in capsys.readouterr().out
    assert main(["run", str(tmp_path / "r.toml")]) == 0, capsys.readouterr()
    rec = _check_folder(tmp_path / "out", None, "0.2")
    assert rec["reliability"]["rule"] == "cv=0.2"


def test_release_census_suppress_and_the_matrix_refusal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``release census --suppress`` (Privelet counts) follows the rule exactly, the review states it, and
    the matrix mechanism's marginal tables (no noisy_count/noise_sd) are refused before any data is read."""
    areas = pd.DataFrame({"state": ["1", "1", "2", "2"], "county": ["1a", "1b", "2a", "2b"]})
    areas.to_csv(tmp_path / "areas.csv", index=False)
    areas.assign(pop=[500, 70, 0, 3]).to_csv(tmp_path / "t.csv", index=False)
    base = ["release", "census", "--input", str(tmp_path / "t.csv"), "--levels", "state,county", "--count", "pop",
            "--areas", str(tmp_path / "areas.csv"), "--no-budget", "--suppress", "cv=0.3"]
    out = tmp_path / "out"
    assert main([*base, "--epsilon", "1", "--out", str(out)]) == 0, capsys.readouterr()
    rec = _check_folder(out, None, "0.3")
    assert rec["reliability"]["suppressed"] >= 1  # the empty county's CV is infinite or large
    assert "No reliability rule" not in (out / "review.html").read_text("utf-8")
    bad = tmp_path / "missing.csv"  # never read: the refusal comes first
    rc = main(["release", "census", "--input", str(bad), "--levels", "state,county", "--count", "pop",
               "--mechanism", "matrix", "--rho", "0.5", "--no-budget", "--suppress", "cv=0.3",
               "--out", str(tmp_path / "m")])
    assert rc != 0 and "matrix" in capsys.readouterr().err


def test_cv_threshold_sets_the_records_level_guidance(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--cv-threshold`` is the threshold of release.json's "use at level L or coarser" line (and of
    review.html's); a threshold that is no positive number is refused before any data is read."""
    from dpcore.core.review import level_guidance

    rng = np.random.default_rng(2)
    pd.DataFrame({"lat": rng.uniform(0, 1, 2000), "lon": rng.uniform(0, 1, 2000)}).to_csv(
        tmp_path / "pts.csv", index=False)
    base = ["release", "points", "--input", str(tmp_path / "pts.csv"), "--bounds=0,0,1,1", "--grid", "8,8",
            "--mechanism", "quadtree", "--param", "height=3", "--epsilon", "0.5", "--no-budget"]
    for cv in (None, "0.05", "5"):
        out = tmp_path / f"out{cv}"
        assert main([*base, "--out", str(out), *(["--cv-threshold", cv] if cv else [])]) == 0, capsys.readouterr()
        g = json.loads((out / "release.json").read_text("utf-8"))["level_guidance"]
        assert g["threshold"] == (0.3 if cv is None else float(cv))
        assert g == level_guidance((out / "release.csv").read_bytes(), g["threshold"])  # read from the table
        page = (out / "review.html").read_text("utf-8")  # the same line in words, the level with its cells' size
        assert (f"Use at level {g['use_level']} (cells of about " if g["use_level"] is not None
                else "No level is reliable on its own") in page and f"{g['threshold']:g}" in page
    # 5 admits every level (the finest is named), 0.05 fewer: the line follows the threshold
    depth = {lv["level"]: i for i, lv in enumerate(g["levels"])}
    loose = json.loads((tmp_path / "out5" / "release.json").read_text("utf-8"))["level_guidance"]
    tight = json.loads((tmp_path / "out0.05" / "release.json").read_text("utf-8"))["level_guidance"]
    assert loose["use_level"] == g["levels"][-1]["level"]
    assert tight["use_level"] is None or depth[tight["use_level"]] < depth[loose["use_level"]]
    assert main([*base, "--out", str(tmp_path / "bad"), "--cv-threshold", "0"]) == 2
    assert "--cv-threshold must be a positive number" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
