"""``release points|hierarchy|od --time-col ...``: a series of releases over public periods, charged
once per period, re-served byte for byte, corrected when a past period's data changes; ``budgets``."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcore.cli import main
from dpcore.core.record import validate_record
from dpcore.core.session import Session

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data"
UBER = SHARED / "points" / "uber_nyc_pickups_2014-04.csv.gz"
TAXI = SHARED / "od" / "nyc_green_taxi_trips_2020-04.csv.gz"
ZONES = SHARED / "boundaries" / "nyc_taxi_zone_lookup.csv"
needs_shared = pytest.mark.skipif(not (UBER.exists() and TAXI.exists()), reason="shared/data is not available")


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    rc = main(argv)
    out = capsys.readouterr()
    assert rc == 0, out.err
    return out.out


@pytest.fixture(scope="module")
def uber_slice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every 50th Uber pickup of April 2014 (about 11,000 points over 30 days)."""
    df = pd.read_csv(UBER, skiprows=lambda i: i > 0 and i % 50 != 0)
    path = tmp_path_factory.mktemp("uber") / "uber.csv"
    df.to_csv(path, index=False)
    return path


def _points_argv(src: Path, out: Path, *extra: str) -> list[str]:
    return ["release", "points", "--input", str(src), "--bounds=-74.06,40.56,-73.70,40.92", "--grid", "256,256",
            "--mechanism", "ug", "--epsilon", "0.1", "--time-col", "Date/Time", "--period", "day",
            "--time-range", "2014-04-01,2014-04-30", "--out", str(out), *extra]


@needs_shared
def test_the_uber_days_are_released_once_and_re_served_byte_for_byte(
        uber_slice: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "S"
    _run(_points_argv(uber_slice, out), capsys)
    days = [f"2014-04-{d:02d}" for d in range(1, 31)]
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == days
    for d in days:
        assert {p.name for p in (out / d).iterdir()} == {
            "release.csv", "release.json", "release.geojson",  # the release
            "measurements.csv", "design.json", "estimates.csv", "replicates.csv",  # the data users' files
            "deployment.yaml", "review.html"}  # the review record
    first = _files(out)
    session = Session.open(None)
    (row,) = session.budgets()
    # each day charged once, ε = 0.1, in parallel: spent 0.1 of its own cap; horizon ρ = 30 · 0.1²/2
    assert [p["spent"] for p in row["periods"]] == [0.1] * 30 and [p["period"] for p in row["periods"]] == days
    assert row["spent"] == pytest.approx(0.1) and row["horizon"]["rho"] == pytest.approx(0.15)

    text = _run(_points_argv(uber_slice, out), capsys)
    assert "Re-served all 30 periods" in text and "nothing charged" in text
    assert _files(out) == first  # every file byte-identical, series.csv and series.json included
    (again,) = session.budgets()
    assert again["periods"] == row["periods"] and again["releases"] == row["releases"]

    series = pd.read_csv(out / "series.csv", dtype={"period": str})
    assert list(series.columns[:6]) == ["period", "area", "noisy_count", "noise_sd", "ci95_low", "ci95_high"]
    assert sorted(series["period"].unique()) == days
    day1 = pd.read_csv(out / "2014-04-01" / "release.csv")
    assert (series.loc[series["period"] == "2014-04-01", "noisy_count"].to_numpy() == day1["noisy_count"]).all()
    record = json.loads((out / "series.json").read_bytes())
    validate_record(record, "series")
    assert [p["period"] for p in record["periods"]] == days
    assert {p["status"] for p in record["periods"]} == {"released"}
    assert record["unit"]["scope"] == "event" and record["spend"]["per_period"]["value"] == 0.1
    assert record["horizon"]["rho"] == pytest.approx(0.15) and "365 days at this rate" in \
        record["horizon"]["projection"]["text"]


@needs_shared
def test_a_late_record_in_a_past_day_is_a_charged_correction_the_rest_re_served(
        uber_slice: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _run(_points_argv(uber_slice, tmp_path / "S"), capsys)
    before = _files(tmp_path / "S")
    late = pd.read_csv(uber_slice)
    late = pd.concat([late, pd.DataFrame({"Date/Time": ["4/3/2014 12:00:00"], "Lat": [40.75], "Lon": [-73.98],
                                          "Base": ["B02512"]})])
    late_path = tmp_path / "late.csv"
    late.to_csv(late_path, index=False)
    rc = main(_points_argv(late_path, tmp_path / "S2"))
    out = capsys.readouterr()
    assert rc == 0 and "29 re-served, 1 correction" in out.out and "2014-04-03" in out.err
    after = _files(tmp_path / "S2")
    for name, data in before.items():
        if not name.startswith(("2014-04-03", "series")):
            assert after[name] == data, name
    record = json.loads(after["series.json"])
    status = {p["period"]: (p["status"], p["correction_of"]) for p in record["periods"]}
    assert status["2014-04-03"][0] == "correction" and status["2014-04-03"][1]
    assert status["2014-04-02"] == ("re-served", None)
    (row,) = Session.open(None).budgets()  # one population: the late record did not open a fresh budget
    spent = {p["period"]: p["spent"] for p in row["periods"]}
    assert spent["2014-04-03"] == pytest.approx(0.2) and spent["2014-04-02"] == pytest.approx(0.1)


def test_empty_periods_are_released_and_the_time_range_is_required(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _small_points(tmp_path, 3, 400, 48)
    base = ["release", "points", "--input", str(src), "--bounds=0,0,1,1", "--grid", "8,8", "--mechanism", "ug",
            "--epsilon", "0.5", "--out", str(tmp_path / "S"), "--time-col", "when"]
    assert main(base) == 2 and "--time-range" in capsys.readouterr().err
    assert main([*base[:-2], "--unit", "event"]) == 2 and "--time-col" in capsys.readouterr().err
    _run([*base, "--time-range", "2024-01-01,2024-01-04"], capsys)  # data on 2 of the 4 days
    record = json.loads((tmp_path / "S" / "series.json").read_bytes())
    assert [p["period"] for p in record["periods"]] == ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]
    assert all((tmp_path / "S" / d / "release.csv").exists() for d in ("2024-01-03", "2024-01-04"))
    first = _files(tmp_path / "S")
    assert "Re-served all 4 periods" in _run([*base, "--time-range", "2024-01-01,2024-01-04"], capsys)
    assert _files(tmp_path / "S") == first  # the empty days too: stored, re-served, never re-noised


def _small_points(tmp_path: Path, seed: int = 8, n: int = 600, hours: int = 96) -> Path:
    """``n`` random points in the unit square, timed over ``hours`` hours from 2024-01-01 (``p.csv``)."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"lat": rng.uniform(0.1, 0.9, n), "lon": rng.uniform(0.1, 0.9, n),
                       "when": pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, hours, n), unit="h")})
    src = tmp_path / "p.csv"
    df.to_csv(src, index=False)
    return src


def _tracts(tmp_path: Path, seed: int, n: int, tracts: int, days: int) -> tuple[Path, Path]:
    """``n`` rows over two boroughs of ``tracts`` tracts each, dated over ``days`` days from 2020-04-01,
    and the public list of the areas."""
    rng = np.random.default_rng(seed)
    boro = rng.choice(["A", "B"], n)
    df = pd.DataFrame({"boro": boro, "tract": [f"{b}{t}" for b, t in zip(boro, rng.integers(0, tracts, n), strict=True)],
                       "date": pd.Timestamp("2020-04-01") + pd.to_timedelta(rng.integers(0, days * 24, n), unit="h")})
    src, areas = tmp_path / "h.csv", tmp_path / "areas.csv"
    df.to_csv(src, index=False)
    pd.DataFrame([(b, f"{b}{t}") for b in "AB" for t in range(tracts)],
                 columns=["boro", "tract"]).to_csv(areas, index=False)
    return src, areas


def test_a_hierarchy_series_over_weeks_and_budgets_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, areas = _tracts(tmp_path, 4, 1500, 4, 14)
    argv = ["release", "hierarchy", "--input", str(src), "--levels", "boro,tract", "--areas", str(areas),
            "--epsilon", "0.25", "--time-col", "date", "--period", "week", "--time-range", "2020-04-01,2020-04-30",
            "--out", str(tmp_path / "H")]
    # a named population protects persons; a hierarchy series protects one record per period (item 15)
    assert main([*argv, "--population", "Survey"]) == 2
    assert "protects one record per period" in capsys.readouterr().err
    _run(argv, capsys)
    series = pd.read_csv(tmp_path / "H" / "series.csv", dtype=str)
    assert sorted(series["period"].unique()) == [f"2020-W{w}" for w in range(14, 19)]
    assert set(series.loc[series["level"] == "tract", "area"]) == {f"{b}{t}" for b in "AB" for t in range(4)}
    capsys.readouterr()
    assert main(["budgets", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["unit"]["scope"] == "event" and row["cap"]["value"] == 1.0
    assert row["periods"] == [{"period": f"2020-W{w}", "spent": 0.25, "releases": 1} for w in range(14, 19)]
    assert row["spent"] == pytest.approx(0.25)
    assert row["horizon"]["rho"] == pytest.approx(5 * 0.25**2 / 2)
    assert main(["budgets"]) == 0 and "2020-W16: spent 0.25" in capsys.readouterr().out


@needs_shared
def test_green_taxi_trips_by_iso_week_person_period(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    df = pd.read_csv(TAXI, usecols=["lpep_pickup_datetime", "PULocationID", "DOLocationID"])
    df["person"] = np.random.default_rng(5).integers(0, 4000, len(df))  # a synthetic person id
    src = tmp_path / "taxi.csv"
    df.to_csv(src, index=False)
    argv = ["release", "od", "--input", str(src), "--hierarchy", str(ZONES), "--levels", "Borough,LocationID",
            "--origin", "PULocationID", "--destination", "DOLocationID", "--rho", "0.05", "--user-col", "person",
            "--user-cap", "2", "--unit", "person-period", "--time-col", "lpep_pickup_datetime", "--period", "week",
            "--time-range", "2020-04-01,2020-04-30", "--horizon-cap", "0.3", "--out", str(tmp_path / "O")]
    text = _run(argv, capsys)
    assert "5 released" in text
    record = json.loads((tmp_path / "O" / "series.json").read_bytes())
    assert record["unit"]["label"].startswith("one person-week (at most 2 records each)")
    assert record["horizon"]["rho"] == pytest.approx(0.25) and record["horizon"]["cap"]["value"] == 0.3
    series = pd.read_csv(tmp_path / "O" / "series.csv", dtype=str)
    assert "->" in series["area"].iloc[0] and {"origin", "destination"} <= set(series.columns)
    # a second request: re-served, nothing charged, still under the horizon cap
    first = _files(tmp_path / "O")
    assert "Re-served all 5 periods" in _run(argv, capsys)
    assert _files(tmp_path / "O") == first
    # another plan on the same weeks would pass the horizon cap (0.25 + 0.05 > 0.3 after one week)
    rc = main([*argv[:argv.index("--rho") + 1], "0.06", *argv[argv.index("--rho") + 2:-1], str(tmp_path / "O2")])
    assert rc == 2 and "horizon cap" in capsys.readouterr().err
    (row,) = Session.open(None).budgets()  # refused before the first week was charged
    assert [p["spent"] for p in row["periods"]] == [0.05] * 5


def test_a_config_runs_a_series(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(6)
    n = 200
    df = pd.DataFrame({"lat": rng.uniform(0.1, 0.9, n), "lon": rng.uniform(0.1, 0.9, n),
                       "when": pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 72, n), unit="h")})
    df.to_csv(tmp_path / "p.csv", index=False)
    (tmp_path / "r.toml").write_text(
        'release = "points"\n[input]\npath = "p.csv"\ntime = "when"\n[domain]\nbounds = [0, 0, 1, 1]\n'
        'grid = [8, 8]\nperiod = "day"\ntime_range = "2024-01-01,2024-01-03"\n[mechanism]\nname = "ug"\n'
        '[budget]\nepsilon = 0.2\nunit = "event"\nhorizon_cap = 0.6\n[output]\ndir = "S"\n')
    _run(["run", str(tmp_path / "r.toml")], capsys)
    assert json.loads((tmp_path / "S" / "series.json").read_bytes())["horizon"]["cap"]["value"] == 0.6
    assert "Re-served all 3 periods" in _run(["run", str(tmp_path / "r.toml")], capsys)


def test_a_person_over_the_horizon_is_charged_sequentially(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(7)
    n = 600
    df = pd.DataFrame({"lat": rng.uniform(0.1, 0.9, n), "lon": rng.uniform(0.1, 0.9, n), "who": rng.integers(0, 40, n),
                       "when": pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 96, n), unit="h")})
    df.to_csv(tmp_path / "p.csv", index=False)
    argv = ["release", "points", "--input", str(tmp_path / "p.csv"), "--bounds=0,0,1,1", "--grid", "8,8",
            "--mechanism", "ug", "--rho", "0.01", "--user-col", "who", "--user-cap", "3", "--unit", "person",
            "--max-periods", "2", "--time-col", "when", "--time-range", "2024-01-01,2024-01-04",
            "--budget-cap", "0.05", "--out", str(tmp_path / "S")]
    _run(argv, capsys)
    record = json.loads((tmp_path / "S" / "series.json").read_bytes())
    assert record["unit"]["scope"] == "person" and record["unit"]["max_periods"] == 2
    # four days charged to one horizon budget: 4 × 0.01 = 0.04 of 0.05; any one person is in ≤ 2 days
    assert record["horizon"]["rho"] == pytest.approx(0.04)
    assert record["horizon"]["person_bound"]["rho"] == pytest.approx(0.02)
    (row,) = Session.open(None).budgets()
    assert row["cap_per"] == "horizon" and row["spent"] == pytest.approx(0.04)
    # a second series of another plan would pass the horizon budget (0.04 + 4 × 0.01 > 0.05): refused first
    other = list(argv)
    other[other.index("--rho") + 1], other[-1] = "0.011", str(tmp_path / "S2")
    assert main(other) == 2
    assert "Not enough privacy budget" in capsys.readouterr().err
    (again,) = Session.open(None).budgets()
    assert again["spent"] == pytest.approx(0.04)
    # History says what the horizon budget holds: the four days in sequence, not the largest day, and a
    # one-off release of the same data on top, as the office view counts it (review)
    one = [a for a in argv[:argv.index("--unit")] if a != "0.01"] + ["--budget-cap", "0.05", "--out",
                                                                     str(tmp_path / "O")]
    one.insert(one.index("--rho") + 1, "0.001")
    _run(one, capsys)
    office = [r["spent"] for r in Session.open(None).budgets() if r.get("cap_per") == "horizon"]
    out = _run(["history"], capsys)
    assert office == [pytest.approx(0.041)]
    assert "spent ρ = 0.041 of 0.05 of the horizon in 4 charges over 4 periods" in out, out
    # with --unit person, --max-periods is required; --unit event refuses a person column
    assert main([*argv[:argv.index("--max-periods")], *argv[argv.index("--max-periods") + 2:]]) == 2
    assert "--max-periods" in capsys.readouterr().err
    assert main([*argv[:argv.index("--unit") + 1], "event", *argv[argv.index("--unit") + 2:]]) == 2
    assert "person column" in capsys.readouterr().err


@needs_shared
def test_a_one_off_release_and_a_series_of_the_same_file_share_one_budget(
        uber_slice: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "b.sqlite")
    one = ["release", "points", "--input", str(uber_slice), "--bounds=-74.06,40.56,-73.70,40.92", "--grid", "64,64",
           "--mechanism", "ug", "--budget-db", db, "--budget-cap", "1"]
    _run([*one, "--epsilon", "0.7", "--out", str(tmp_path / "O")], capsys)
    # every day's cap is 1 and the one-off's 0.7 counts in every day: 0.4 a day does not fit, 0.3 does
    argv = _points_argv(uber_slice, tmp_path / "S", "--budget-db", db, "--budget-cap", "1")
    argv[argv.index("0.1")] = "0.4"
    assert main(argv) != 0
    assert "Not enough privacy budget" in capsys.readouterr().err
    argv[argv.index("0.4")] = "0.3"
    _run(argv, capsys)
    # and the one-off budget now sees the days' 0.3: 0.7 + 0.3 leaves nothing for another one-off
    assert main([*one, "--epsilon", "0.05", "--out", str(tmp_path / "O2")]) != 0
    assert "series of this data" in capsys.readouterr().err


@needs_shared
def test_a_series_of_the_same_points_and_one_far_away_point_shares_the_one_off_budget(
        uber_slice: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The series' file holds the one-off's points and one point far outside the bounds: its exact key
    is new, but its key of the points inside the bounds leads to the one-off's budget (issue 26 item
    12), so the days still count the one-off's 0.7 (before, the series opened a budget of its own)."""
    db = str(tmp_path / "b.sqlite")
    one = ["release", "points", "--input", str(uber_slice), "--bounds=-74.06,40.56,-73.70,40.92", "--grid", "64,64",
           "--mechanism", "ug", "--budget-db", db, "--budget-cap", "1"]
    _run([*one, "--epsilon", "0.7", "--out", str(tmp_path / "O")], capsys)
    df = pd.read_csv(uber_slice)
    far = df.iloc[[0]].copy()
    far["Lat"], far["Lon"] = 10.0, 10.0
    pd.concat([df, far]).to_csv(tmp_path / "plus_far.csv", index=False)
    argv = _points_argv(tmp_path / "plus_far.csv", tmp_path / "S", "--budget-db", db, "--budget-cap", "1")
    argv[argv.index("0.1")] = "0.4"
    assert main(argv) != 0
    assert "Not enough privacy budget" in capsys.readouterr().err


@needs_shared
def test_each_period_record_is_the_envelope_one_with_the_plan_rows(
        uber_slice: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "b.sqlite")
    _run(_points_argv(uber_slice, tmp_path / "S", "--budget-db", db), capsys)
    first = _files(tmp_path / "S")
    one = json.loads((tmp_path / "S" / "2014-04-02" / "release.json").read_text("utf-8"))
    series = json.loads((tmp_path / "S" / "series.json").read_text("utf-8"))
    assert "plan" in one and one["plan"] == series["plan"]["rows"]  # files_of(inner) left the plan out
    _run(_points_argv(uber_slice, tmp_path / "S", "--budget-db", db), capsys)  # re-served byte for byte
    assert _files(tmp_path / "S") == first


def _csv_rows(path: Path) -> list[dict[str, str]]:
    import csv

    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@needs_shared
@pytest.mark.parametrize("mode", ["suppress", "flag"])
def test_suppress_in_a_series_marks_series_csv_exactly_by_the_rule(
        mode: str, uber_slice: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fractions import Fraction

    db = str(tmp_path / "b.sqlite")
    argv = _points_argv(uber_slice, tmp_path / "S", "--budget-db", db, "--suppress", f"{mode}:floor=5,cv=0.3")
    argv[argv.index("256,256")] = "16,16"
    _run(argv, capsys)
    col, why = ("suppressed", "suppression_reason") if mode == "suppress" else ("flagged", "flag_reason")
    series = _csv_rows(tmp_path / "S" / "series.csv")
    at, n_hit = 0, 0
    for d in range(1, 31):
        folder = tmp_path / "S" / f"2014-04-{d:02d}"
        full = _csv_rows(folder / "release_full.csv")
        for f in full:
            s = series[at]
            at += 1
            assert s["period"] == folder.name and s["area"] == f["id"]
            y, sd = Fraction(f["noisy_count"]), Fraction(f["noise_sd"])
            hit = y < 5 or y <= 0 or Fraction("1.645") * sd > Fraction("0.3") * y
            assert (s[col] == "true") == hit and s[why] == f[why]
            assert (s["noisy_count"] == "") == (hit and mode == "suppress")
            n_hit += hit
    assert at == len(series) and 0 < n_hit < len(series)
    rec = json.loads((tmp_path / "S" / "series.json").read_text("utf-8"))
    validate_record(rec, "series")
    assert rec["reliability"][col] == n_hit and rec["reliability"]["cells"] == len(series)
    first = _files(tmp_path / "S")
    _run(argv, capsys)  # the same rule: re-served byte for byte, nothing charged
    assert _files(tmp_path / "S") == first
    spent = Session.open(db).budgets()
    assert sum(len(b["periods"]) for b in spent) == 30 and all(p["releases"] == 1 for b in spent for p in b["periods"])
    # another rule re-serves the same noise (post-processing): nothing charged, the full values unchanged
    argv[argv.index(f"{mode}:floor=5,cv=0.3")] = "floor=50"
    _run(argv, capsys)
    again = _files(tmp_path / "S")
    assert again["series.csv"] != first["series.csv"]  # the new rule's columns
    for d in ("2014-04-01", "2014-04-15"):
        old = [r["noisy_count"] for r in _csv_rows(tmp_path / "S" / d / "release_full.csv")]
        assert old == [r["noisy_count"] for r in _csv_rows_from(first[f"{d}/release_full.csv"])]
    assert sum(p["releases"] for b in Session.open(db).budgets() for p in b["periods"]) == 30


def _csv_rows_from(data: bytes) -> list[dict[str, str]]:
    import csv
    import io

    return list(csv.DictReader(io.StringIO(data.decode("utf-8"))))




def test_cumulative_points_series_is_charged_once_and_re_served(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sqlite3

    from dpcore.estimate.prefix_sums import compare_variances, plan_prefix_sums
    from dpcore.privacy.budget import zcdp
    from dpcore.privacy.series_ledger import SeriesBudget
    from dpcore.privacy.units import TimeUnit, Unit

    src = _small_points(tmp_path)
    db = str(tmp_path / "b.sqlite")
    argv = ["release", "points", "--input", str(src), "--bounds=0,0,1,1", "--grid", "4,4", "--mechanism", "identity",
            "--rho", "0.05", "--time-col", "when", "--time-range", "2024-01-01,2024-01-04", "--budget-db", db,
            "--cumulative", "--out", str(tmp_path / "S")]
    assert main([*argv[:9], "--epsilon", "0.5", *argv[11:]]) == 2
    assert "--rho" in capsys.readouterr().err
    no_time = argv[:argv.index("--time-col")] + argv[argv.index("--time-range") + 2:]
    assert main(no_time) == 2 and "--cumulative describe a release over time" in capsys.readouterr().err
    _run(argv, capsys)
    record = json.loads((tmp_path / "S" / "series.json").read_bytes())
    validate_record(record, "series")
    cum = record["cumulative"]
    assert cum["charge"]["cost"]["value"] == 0.05 and cum["charge"]["once"] and cum["status"] == "released"
    plan = plan_prefix_sums(4, 0.05, cells=16)
    assert cum["plan"]["sigma"] == pytest.approx(plan.sigma)
    assert cum["comparison"]["factorisation"]["ytd"] == pytest.approx(compare_variances(4, 0.05)["factorisation"]["ytd"])
    assert cum["recommendation"]["method"] in ("factorisation", "leaves")
    series = pd.read_csv(tmp_path / "S" / "series.csv", dtype={"period": str, "area": str})
    assert {"cumulative", "cumulative_sd", "cumulative_ci95_low", "cumulative_ci95_high"} <= set(series.columns)
    grid_rows = series[series["area"].str.startswith("r")]
    assert len(grid_rows) == 4 * 16 and grid_rows["cumulative"].notna().all()
    sd = grid_rows.groupby("period")["cumulative_sd"].first().to_numpy()
    assert sd == pytest.approx(np.sqrt(plan.prefix_variance))
    # one charge of ρ = 0.05 for the whole series, counted in every day beside the day's own 0.05
    store = Session.open(db).store
    with sqlite3.connect(store.path) as con:
        (pop,) = [r[0] for r in con.execute("SELECT population FROM series_budgets")]
    budget = SeriesBudget.open(store, pop, "points", TimeUnit("event", Unit(), "day"), zcdp(0.5))
    assert [e.charged for e in budget.cumulative_ledger().entries] == [0.05]
    assert [budget.ledger(f"2024-01-0{d}").spent for d in range(1, 5)] == pytest.approx([0.1] * 4)
    multiple = compare_variances(4)["factorisation"]["horizon_rho_multiple"]
    assert record["horizon"]["rho"] == pytest.approx(4 * 0.05 + 0.05 * multiple)
    first = _files(tmp_path / "S")
    assert "Re-served all 4 periods" in _run(argv, capsys)
    assert _files(tmp_path / "S") == first
    assert len(budget.cumulative_ledger().entries) == 1


def test_cumulative_hierarchy_series_joins_the_leaf_areas(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, areas = _tracts(tmp_path, 9, 800, 3, 20)
    argv = ["release", "hierarchy", "--input", str(src), "--levels", "boro,tract", "--areas", str(areas),
            "--rho", "0.02", "--time-col", "date", "--period", "week", "--time-range", "2020-04-01,2020-04-20",
            "--cumulative", "--budget-db", str(tmp_path / "b.sqlite"), "--out", str(tmp_path / "H")]
    _run(argv, capsys)
    series = pd.read_csv(tmp_path / "H" / "series.csv", dtype={"period": str, "area": str, "level": str})
    tracts = series[series["level"] == "tract"]
    assert len(tracts) == 4 * 6 and tracts["cumulative"].notna().all()  # ISO weeks 14-17 × 6 tracts, joined
    assert series.loc[series["level"] == "boro", "cumulative"].isna().all()
    # the cumulative of the last week is the first week's plus the others' increments: monotone SDs
    sd = tracts.groupby("period")["cumulative_sd"].first().to_numpy()
    assert sd[0] < sd[1] < sd[2] < sd[3]



def _taxi_argv(src: Path, db: str, out: Path, rho: str, *, series: bool, zones: Path = ZONES) -> list[str]:
    argv = ["release", "od", "--input", str(src), "--hierarchy", str(zones), "--levels", "Borough,LocationID",
            "--origin", "PULocationID", "--destination", "DOLocationID", "--rho", rho, "--user-col", "person",
            "--user-cap", "2", "--budget-db", db, "--out", str(out)]
    if series:
        argv += ["--unit", "person-period", "--time-col", "lpep_pickup_datetime", "--period", "week",
                 "--time-range", "2020-04-01,2020-04-30"]
    return argv


@needs_shared
def test_cumulative_od_series_after_a_one_off_of_the_same_trips(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    df = pd.read_csv(TAXI, usecols=["lpep_pickup_datetime", "PULocationID", "DOLocationID"])
    df["person"] = np.random.default_rng(5).integers(0, 4000, len(df))
    # the month's trips within two boroughs (63 zones, ~3,000 trips, every week): every file is written
    # per week and for the cumulative, and the whole city's 265² zone pairs made this test spend most
    # of its time writing CSV
    zones = pd.read_csv(ZONES)
    zones = zones[zones["Borough"].isin(["Bronx", "Staten Island"])]
    zones.to_csv(tmp_path / "zones.csv", index=False)
    df = df[df["PULocationID"].isin(zones["LocationID"]) & df["DOLocationID"].isin(zones["LocationID"])]
    assert len(df) > 2000
    src = tmp_path / "taxi.csv"
    df.to_csv(src, index=False)
    db = str(tmp_path / "b.sqlite")
    argv = functools.partial(_taxi_argv, zones=tmp_path / "zones.csv")
    # a one-off release of the same trips (ρ 0.3 of the default cap 0.5) counts in every week
    _run(argv(src, db, tmp_path / "one", "0.3", series=False), capsys)
    # each week: 0.3 (one-off) + 0.15 (the cumulative, once for all weeks) + 0.15 (the week) > 0.5: refused
    # before anything is charged
    assert main([*argv(src, db, tmp_path / "O", "0.15", series=True), "--cumulative"]) == 2
    assert "Not enough privacy budget" in capsys.readouterr().err
    assert [r for r in Session.open(db).budgets() if r["periods"] or r["releases"]] == \
        [r for r in Session.open(db).budgets() if r["kind"] == "flows"]  # only the one-off's budget has spent
    # at ρ = 0.1: 0.3 + 0.1 + 0.1 = 0.5 fits exactly
    _run([*argv(src, db, tmp_path / "O", "0.1", series=True), "--cumulative"], capsys)
    record = json.loads((tmp_path / "O" / "series.json").read_bytes())
    cum = record["cumulative"]
    # 2 trips per person-week, replace-one neighbours (the O/D default): Δ = 2·√2
    assert cum["plan"]["per_period_sensitivity"] == pytest.approx(2 * 2**0.5) and cum["plan"]["periods_per_person"] == 1
    assert [p["spent"] for p in record["periods"]] == pytest.approx([0.5] * 5)  # each week's ledger, linked
    series = pd.read_csv(tmp_path / "O" / "series.csv", dtype=str)
    assert series["cumulative"].notna().any() and series["area"].str.contains("->").all()
    # and no further one-off of the same trips fits (the weeks are full)
    assert main(argv(src, db, tmp_path / "one2", "0.01", series=False)) == 2
    assert "series of this data" in capsys.readouterr().err


def test_a_config_runs_a_cumulative_series(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _small_points(tmp_path)
    (tmp_path / "r.toml").write_text(
        'release = "points"\n[input]\npath = "p.csv"\ntime = "when"\n[domain]\nbounds = [0, 0, 1, 1]\n'
        'grid = [4, 4]\nperiod = "day"\ntime_range = "2024-01-01,2024-01-04"\n[mechanism]\nname = "identity"\n'
        'cumulative = true\n[budget]\nrho = 0.05\n[output]\ndir = "S"\n')
    text = _run(["run", str(tmp_path / "r.toml")], capsys)
    assert "cumulative series (square-root factorisation) released, charged once ρ = 0.05" in text
    assert json.loads((tmp_path / "S" / "series.json").read_bytes())["cumulative"]["charge"]["cost"]["value"] == 0.05


def test_a_one_off_hierarchy_release_and_a_series_of_the_same_file_share_one_budget(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The hierarchy's one-off and its series of the same rows draw on one budget (as points and
    trips do): by hand, weekly cap 1 and a one-off ε = 0.7 leave 0.3 per week; 0.4 is refused, 0.3
    fits, and then no further one-off fits (0.7 + 0.3 spent for a record of any week)."""
    src, areas = _tracts(tmp_path, 5, 600, 3, 14)
    db = str(tmp_path / "b.sqlite")
    base = ["release", "hierarchy", "--input", str(src), "--levels", "boro,tract", "--areas", str(areas),
            "--budget-db", db, "--budget-cap", "1"]
    _run([*base, "--epsilon", "0.7", "--out", str(tmp_path / "O")], capsys)
    series = [*base, "--time-col", "date", "--period", "week", "--time-range", "2020-04-01,2020-04-14",
              "--out", str(tmp_path / "S")]
    assert main([*series, "--epsilon", "0.4"]) != 0
    assert "budget" in capsys.readouterr().err.lower()
    _run([*series, "--epsilon", "0.3"], capsys)
    assert main([*base, "--epsilon", "0.05", "--out", str(tmp_path / "O2")]) != 0
    assert "series of this data" in capsys.readouterr().err


def test_a_hierarchy_series_joins_a_person_level_population_once_each_person_is_confirmed_counted_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 26 item 15 for series: a population opened by person-level points over weeks is joined by a
    hierarchy series only when the curator confirms each person is counted once in each period
    (--each-person-counted-once: each week's release protects one person, the unit over time
    person-week); without it the refusal names the option.  One budget: each week spends both."""
    src, areas = _tracts(tmp_path, 4, 600, 3, 14)
    rng = np.random.default_rng(6)
    pts = tmp_path / "pts.csv"
    pd.DataFrame({"lat": rng.uniform(0.1, 0.9, 300), "lon": rng.uniform(0.1, 0.9, 300),
                  "person": rng.integers(0, 60, 300),
                  "date": pd.Timestamp("2020-04-01") + pd.to_timedelta(rng.integers(0, 14 * 24, 300), unit="h")}
                 ).to_csv(pts, index=False)
    weeks = ["--time-col", "date", "--period", "week", "--time-range", "2020-04-01,2020-04-14",
             "--population", "Survey"]
    _run(["release", "points", "--input", str(pts), "--bounds=0,0,1,1", "--grid", "4,4", "--mechanism", "ug",
          "--epsilon", "0.2", "--user-col", "person", "--user-cap", "2", "--out", str(tmp_path / "P"), *weeks], capsys)
    hier = ["release", "hierarchy", "--input", str(src), "--levels", "boro,tract", "--areas", str(areas),
            "--epsilon", "0.3", "--out", str(tmp_path / "H"), *weeks]
    assert main(hier) == 2
    err = capsys.readouterr().err
    assert "protects one record per period" in err and "--each-person-counted-once" in err
    assert main([*hier, "--each-person-counted-once", "--unit", "event"]) == 2  # the confirmation makes it persons
    assert "--unit event" in capsys.readouterr().err
    _run([*hier, "--each-person-counted-once"], capsys)
    record = json.loads((tmp_path / "H" / "series.json").read_bytes())
    assert record["unit"]["scope"] == "person-period" and record["unit"]["base"]["entity"] == "person"
    (row,) = Session.open(None).budgets()  # the population's budget, not one of its own
    assert row["population"] == "Survey" and row["unit"]["scope"] == "person-period"
    assert [p["spent"] for p in row["periods"]] == pytest.approx([0.5, 0.5, 0.5])  # 0.2 (points) + 0.3 (table)


def test_a_table_series_is_counted_once_by_the_flag_not_by_the_unit_shape() -> None:
    """``table_series`` reads "each person counted once" from --each-person-counted-once: a plan whose
    unit merely looks like one person (uncapped) without the flag still needs the person column for a
    person-period series (before: taken as confirmed from the unit's shape)."""
    import argparse

    from dpcore.cli.series import table_series
    from dpcore.errors import ParameterError
    from dpcore.privacy.units import Unit

    args = argparse.Namespace(unit="person-period", max_periods=None, horizon_cap=None, time_col="t",
                              time_range="2024-01-01,2024-01-14", period="week", epsilon=None, no_budget=True,
                              each_person_counted_once=False)
    plan = argparse.Namespace(unit=Unit("person"))
    with pytest.raises(ParameterError, match="needs the person column"):
        table_series(args, plan, pd.DataFrame({"t": []}), [], None, lambda rows: rows, {}, None, None)
