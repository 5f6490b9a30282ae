"""The CLI's --engine choice changes where rows are aggregated, never the release: with the same
noise seed, numpy, DuckDB and Spark give byte-identical release.csv files for points, O/D,
hierarchy and census inputs (the release is a function of the aggregate and the noise only).
Also ``python -m dpcore run CONFIG``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_cli import write_tracts

from dpcore.cli import main
from dpcore.privacy import noise

ENGINES = ["numpy", "duckdb", pytest.param("spark", marks=pytest.mark.spark)]


@pytest.fixture(autouse=True)
def seeded_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every release draws from the same seeded stream, so equal aggregates give equal files."""
    import dpcore.pipeline

    monkeypatch.setattr(noise, "secure_source", lambda: noise.NoiseSource(11))
    monkeypatch.setattr(dpcore.pipeline, "secure_source", lambda: noise.NoiseSource(11))


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(argv)
    captured = capsys.readouterr()
    assert rc == 0, captured.err


def _points(tmp: Path) -> Path:
    rng = np.random.default_rng(4)
    n = 3000
    df = pd.DataFrame({"lat": rng.uniform(40.5, 40.95, n), "lon": rng.uniform(-74.1, -73.65, n),
                       "person": rng.integers(0, 200, n)})
    folder = tmp / "points"
    folder.mkdir()
    df.iloc[:1500].to_parquet(folder / "a.parquet")
    df.iloc[1500:].to_parquet(folder / "b.parquet")
    return folder


@pytest.mark.parametrize("engine", ENGINES)
def test_points_release_is_the_same_on_every_engine(engine: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    if engine == "spark" and shutil.which("java") is None:
        pytest.skip("Spark needs Java")
    folder = _points(tmp_path)
    ref, out = tmp_path / "ref", tmp_path / "out"
    base = ["release", "points", "--input", str(folder), "--bounds=-74.06,40.56,-73.70,40.92", "--grid", "32,32",
            "--mechanism", "identity", "--epsilon", "1", "--user-col", "person", "--user-cap", "3", "--budget-cap", "2"]
    _run([*base, "--out", str(ref), "--engine", "numpy"], capsys)
    _run([*base, "--out", str(out), "--engine", engine], capsys)
    assert (ref / "release.csv").read_bytes() == (out / "release.csv").read_bytes()
    _budget_used_up(base, tmp_path, capsys)  # both engines drew on one budget: the same key


def _budget_used_up(base: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A third release of the same data is refused: the runs before it, on whichever engines, charged one budget."""
    assert main([*base, "--out", str(tmp_path / "third"), "--engine", "numpy"]) == 2
    assert "Not enough privacy budget" in capsys.readouterr().err


@pytest.mark.parametrize("engine", ENGINES)
def test_od_release_with_a_person_cap_is_the_same_on_every_engine(engine: str, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    if engine == "spark" and shutil.which("java") is None:
        pytest.skip("Spark needs Java")
    zones = [f"{r:02d}{d:02d}" for r in (1, 2) for d in (1, 2, 3)]
    pd.DataFrame({"region": [z[:2] for z in zones], "zone": zones}).to_csv(tmp_path / "areas.csv", index=False)
    rng = np.random.default_rng(2)
    n = 800
    trips = pd.DataFrame({"person": rng.integers(0, 120, n), "origin": rng.choice(zones, n),
                          "destination": rng.choice(zones, n)})
    trips.to_csv(tmp_path / "trips.csv", index=False)
    base = ["release", "od", "--input", str(tmp_path / "trips.csv"), "--hierarchy", str(tmp_path / "areas.csv"),
            "--levels", "region,zone", "--user", "person", "--max-trips", "2", "--rho", "0.5", "--budget-cap", "1"]
    _run([*base, "--out", str(tmp_path / "ref"), "--engine", "numpy"], capsys)
    _run([*base, "--out", str(tmp_path / "out"), "--engine", engine], capsys)
    assert (tmp_path / "ref" / "release.csv").read_bytes() == (tmp_path / "out" / "release.csv").read_bytes()
    _budget_used_up(base, tmp_path, capsys)


@pytest.mark.parametrize("engine", ENGINES)
def test_hierarchy_and_census_releases_are_the_same_on_every_engine(engine: str, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    if engine == "spark" and shutil.which("java") is None:
        pytest.skip("Spark needs Java")
    tracts = write_tracts(tmp_path / "tracts.csv")
    for kind, extra in (("hierarchy", ["--mechanism", "exact", "--input-lists-all-areas"]),
                        ("census", [])):
        base = ["release", kind, "--input", str(tracts), "--levels", "STATEFP,COUNTYFP,TRACTCE",
                "--count", "POPULATION", "--epsilon", "1", "--budget-cap", "4", *extra]
        ref, out = tmp_path / f"{kind}_ref", tmp_path / f"{kind}_{engine}"
        _run([*base, "--out", str(ref), "--engine", "numpy"], capsys)
        _run([*base, "--out", str(out), "--engine", engine], capsys)
        assert (ref / "release.csv").read_bytes() == (out / "release.csv").read_bytes(), kind
    _budget_used_up(base, tmp_path, capsys)  # the hierarchy and census releases of one table share its budget


def test_group_size_histograms_need_the_in_memory_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tracts = write_tracts(tmp_path / "tracts.csv")
    rc = main(["release", "hierarchy", "--input", str(tracts), "--levels", "STATEFP,COUNTYFP,TRACTCE",
               "--count", "H1,H2,H3", "--epsilon", "1", "--input-lists-all-areas", "--engine", "duckdb",
               "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "--engine numpy" in err


def test_run_config_repeats_the_command_line_release(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _points(tmp_path)
    (tmp_path / "rel.toml").write_text(
        'release = "points"\n'
        '[input]\npath = "points"\nlat = "lat"\nlon = "lon"\nuser = "person"\nuser_cap = 3\n'
        '[engine]\nname = "duckdb"\n'
        '[domain]\nbounds = [-74.06, 40.56, -73.70, 40.92]\ngrid = [32, 32]\n'
        '[mechanism]\nname = "identity"\n'
        '[budget]\nepsilon = 1.0\ncap = 1.5\nledger = "ledger.json"\n'
        '[output]\ndir = "from_config"\n', "utf-8")
    _run(["run", str(tmp_path / "rel.toml")], capsys)
    _run(["release", "points", "--input", str(folder), "--bounds=-74.06,40.56,-73.70,40.92", "--grid", "32,32",
          "--mechanism", "identity", "--epsilon", "1", "--user-col", "person", "--user-cap", "3",
          "--out", str(tmp_path / "from_cli")], capsys)
    assert (tmp_path / "from_config" / "release.csv").read_bytes() == \
        (tmp_path / "from_cli" / "release.csv").read_bytes()
    # the config's ledger (relative to the config file) refuses a second release over its cap
    assert (tmp_path / "ledger.json").is_file()
    assert main(["run", str(tmp_path / "rel.toml")]) == 2
    assert "budget" in capsys.readouterr().err


def test_run_config_dry_run_and_bad_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('release = "points"\n[input]\npath = "x.csv"\n[domain]\nbounds = [0, 0, 1, 1]\n'
                   '[mechanism]\nname = "ug"\n[budget]\nepsilon = 0.5\n[output]\ndir = "o"\n', "utf-8")
    # without a ledger the run is accounted in the budget database shared with the app (no flag needed)
    assert main(["run", str(cfg), "--dry-run"]) == 0
    line = capsys.readouterr().out
    assert "--ledger" not in line and "--no-budget" not in line
    # a config repeats a release: it cannot opt out of accounting
    cfg.write_text(cfg.read_text("utf-8").replace("epsilon = 0.5\n", "epsilon = 0.5\nno_budget = true\n"), "utf-8")
    assert main(["run", str(cfg), "--dry-run"]) == 2
    assert "always accounted" in capsys.readouterr().err
    cfg.write_text('release = "points"\n[input]\npath = "x.csv"\n[domain]\nbounds = [0, 0, 1, 1]\n'
                   '[mechanism]\nname = "ug"\n[budget]\nepsilon = 0.5\nledger = "l.json"\n[output]\ndir = "o"\n',
                   "utf-8")
    assert main(["run", str(cfg), "--dry-run"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("python -m dpcore release points ")
    assert f"--input={tmp_path / 'x.csv'}" in line and "--bounds=0,0,1,1" in line and "--out=" in line
    cfg.write_text('release = "points"\n[input]\npath = "x.csv"\ncolour = "red"\n[budget]\ndb = true\n', "utf-8")
    assert main(["run", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "colour" in err and "lat" in err  # names the bad key and what the section takes
    cfg.write_text('release = "maps"\n', "utf-8")
    assert main(["run", str(cfg)]) == 2
    assert "points" in capsys.readouterr().err
    cfg.write_text('release = "points"\n[input\n', "utf-8")
    assert main(["run", str(cfg)]) == 2
    assert "TOML" in capsys.readouterr().err


def test_budget_db_is_the_apps_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--budget-db keeps the spend in the app's SQLite budget under the app's key for these points."""
    from dpcore.core.session import Session
    from dpcore.data.engines.base import points_fingerprint
    from dpcore.data.points import load_points

    folder = _points(tmp_path)
    db = tmp_path / "budget.sqlite"
    base = ["release", "points", "--input", str(folder), "--bounds=-74.06,40.56,-73.70,40.92", "--grid", "16,16",
            "--mechanism", "identity", "--epsilon", "0.4", "--budget-cap", "1", "--budget-db", str(db),
            "--engine", "duckdb"]
    _run([*base, "--out", str(tmp_path / "a")], capsys)
    _run([*base, "--out", str(tmp_path / "b")], capsys)
    assert main([*base, "--out", str(tmp_path / "c")]) == 2  # 0.4 + 0.4 + 0.4 > 1
    assert "Not enough privacy budget" in capsys.readouterr().err
    # the key is the one the app computes for the same points (any engine, any file split)
    df = pd.concat([pd.read_parquet(p) for p in sorted(folder.iterdir())])
    table = load_points(df, "lat", "lon")
    led = Session.open(db).budget("points", points_fingerprint(table.lon, table.lat), default=noise_free_cap())
    assert abs(led.spent - 0.8) < 1e-12
    # another cap for the same data is refused, not silently applied
    assert main([*base[:-4], "--budget-cap", "5", "--budget-db", str(db), "--out", str(tmp_path / "d")]) == 2
    assert "already has the cap" in capsys.readouterr().err
    assert main([*base, "--ledger", str(tmp_path / "l.json"), "--out", str(tmp_path / "e")]) == 2
    assert "not both" in capsys.readouterr().err


def noise_free_cap():  # the cap passed when opening an existing ledger is ignored
    from dpcore.privacy import budget

    return budget.pure(1.0)


def test_engine_refusals_and_config_aliases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Options the engines cannot honour are refused up front, naming the way out."""
    zones = [f"{r:02d}{d:02d}" for r in (1, 2) for d in (1, 2, 3)]
    pd.DataFrame({"region": [z[:2] for z in zones], "zone": zones}).to_csv(tmp_path / "areas.csv", index=False)
    trips = pd.DataFrame({"person": [1, 1, 2], "origin": [zones[0], "9999", zones[1]],
                          "destination": [zones[1], zones[2], ""]})
    trips.to_csv(tmp_path / "trips.csv", index=False)
    od_base = ["release", "od", "--input", str(tmp_path / "trips.csv"), "--hierarchy", str(tmp_path / "areas.csv"),
               "--levels", "region,zone", "--rho", "0.5", "--drop-unmatched", "--engine", "duckdb",
               "--out", str(tmp_path / "o")]
    # with a person cap, unmatched trips must go before the cap: only the in-memory path does that
    assert main([*od_base, "--user", "person"]) == 2
    assert "--engine numpy" in capsys.readouterr().err
    # without one, the engine drops unmatched and missing codes after grouping: the same counts
    assert main(od_base) == 0
    assert "Dropped 2 trips" in capsys.readouterr().err
    # area names read from the input table are lost in the engine's counts
    tracts = write_tracts(tmp_path / "tracts.csv")
    rc = main(["release", "hierarchy", "--input", str(tracts), "--levels", "STATEFP,COUNTYFP,TRACTCE",
               "--count", "POPULATION", "--epsilon", "1", "--input-lists-all-areas", "--engine", "duckdb",
               "--name", "STATEFP=H1", "--out", str(tmp_path / "h")])
    assert rc == 2 and "--areas" in capsys.readouterr().err
    # [engine] name is --engine for every kind (not --name)
    cfg = tmp_path / "h.toml"
    cfg.write_text('release = "hierarchy"\n[input]\npath = "tracts.csv"\nlevels = "STATEFP,COUNTYFP,TRACTCE"\n'
                   '[engine]\nname = "duckdb"\n[budget]\nepsilon = 1\ndb = true\n[output]\ndir = "o"\n', "utf-8")
    assert main(["run", str(cfg), "--dry-run"]) == 0
    line = capsys.readouterr().out
    assert "--engine=duckdb" in line and "--name" not in line


def test_hierarchy_budget_db_key_does_not_depend_on_the_engine(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    tracts = write_tracts(tmp_path / "tracts.csv")
    db = tmp_path / "b.sqlite"
    base = ["release", "hierarchy", "--input", str(tracts), "--levels", "STATEFP,COUNTYFP,TRACTCE",
            "--count", "POPULATION", "--epsilon", "0.4", "--budget-cap", "1", "--input-lists-all-areas",
            "--budget-db", str(db)]
    _run([*base, "--engine", "numpy", "--out", str(tmp_path / "a")], capsys)
    _run([*base, "--engine", "duckdb", "--out", str(tmp_path / "b")], capsys)
    assert main([*base, "--engine", "duckdb", "--out", str(tmp_path / "c")]) == 2  # 3 × 0.4 > 1 on one budget
    assert "Not enough privacy budget" in capsys.readouterr().err
