"""The command line's progress lines (stderr, which ends up in a pipeline's log) never hold the
input's true number of rows nor bytes read (nothing public is derived from raw data without a mechanism): they
say the phase, the fraction done and the seconds since the step began.  Every line is printed here (``LOG_EVERY_SECONDS = 0``) and searched for the
row count, with and without thousands separators."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpcore.cli import common as cli_common
from dpcore.cli import main
from dpcore.data.tables import read_table

N = 1237  # rows: a number no phase, level count, byte count or second count of these runs makes


def _no_count(text: str, tmp: Path | None = None, n: int = N) -> None:
    text = text.replace(str(tmp), "<tmp>") if tmp is not None else text  # pytest's folder may be numbered N
    for spelled in (f"{n:,}", str(n)):
        assert spelled not in text, text


def _points(path: Path, n: int = N) -> Path:
    rng = np.random.default_rng(7)
    lat, lon = rng.uniform(40.6, 40.9, n), rng.uniform(-74.0, -73.75, n)
    path.write_text("lat,lon\n" + "".join(f"{a:.6f},{o:.6f}\n" for a, o in zip(lat, lon, strict=True)), "utf-8")
    return path


def _persons(path: Path, n: int = N) -> Path:
    """One row per person: state, county and tract codes (each person counts once, no --count)."""
    rng = np.random.default_rng(8)
    s = rng.choice(["01", "02"], n)
    c = rng.choice(["001", "003"], n)
    t = rng.choice(["000100", "000200"], n)
    path.write_text("STATEFP,COUNTYFP,TRACTCE\n" + "".join(f"{a},{b},{d}\n" for a, b, d in zip(s, c, t, strict=True)),
                    "utf-8")
    return path


@pytest.fixture
def every_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_common, "LOG_EVERY_SECONDS", 0.0)


@pytest.mark.parametrize("engine", ["duckdb", "numpy"])
def test_points_progress_lines_hold_no_row_count(tmp_path: Path, engine: str, every_line: None,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "pings"  # a folder goes through the engine also with numpy
    folder.mkdir()
    _points(folder / "part-1.csv")
    rc = main(["release", "points", "--input", str(folder), "--bounds=-74.06,40.56,-73.70,40.92", "--grid", "8,8",
               "--mechanism", "identity", "--epsilon", "1", "--no-budget", "--engine", engine,
               "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "Counted the rows" in err  # progress lines were printed
    _no_count(err, tmp_path)


def test_hierarchy_progress_lines_hold_no_row_count(tmp_path: Path, every_line: None,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """One row per person, counted by DuckDB, the areas from a public list."""
    areas = tmp_path / "areas.csv"
    areas.write_text("STATEFP,COUNTYFP,TRACTCE\n" + "".join(f"{s},{c},{t}\n" for s in ("01", "02") for c in ("001", "003")
                                                           for t in ("000100", "000200")), "utf-8")
    rc = main(["release", "hierarchy", "--input", str(_persons(tmp_path / "persons.csv")), "--areas", str(areas),
               "--levels", "STATEFP,COUNTYFP,TRACTCE", "--mechanism", "exact", "--epsilon=1", "--no-budget",
               "--engine", "duckdb", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "Counted the rows" in err and "Reading the codes of" in err  # the lines were printed
    _no_count(err, tmp_path)


def test_hierarchy_phases_hold_no_row_count() -> None:
    """A table of N rows (areas repeated, one row per person) built into a hierarchy: its phase
    lines name phases and levels, never rows or areas found."""
    import pandas as pd

    from dpcore.data.hierarchy import Hierarchy

    rng = np.random.default_rng(9)
    df = pd.DataFrame({"S": rng.choice(["01", "02"], N), "C": rng.choice(["001", "003"], N)})
    said: list[str] = []
    Hierarchy.from_frame(df, ["S", "C"], source="data (not public)", progress=lambda f, m: said.append(m))
    assert any(m.startswith("Reading the codes of") for m in said)
    _no_count(" | ".join(said))


def test_read_table_progress_says_neither_bytes_nor_rows(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The chunked reader reports the fraction read, and its lines carry no row count and no bytes."""
    from dpcore.data import tables

    monkeypatch.setattr(tables, "CSV_CHUNK_ROWS", 100)
    said: list[tuple[float, str]] = []
    df = read_table(_points(tmp_path / "p.csv").read_bytes(), "p.csv", progress=lambda f, m: said.append((f, m)))
    assert len(df) == N and len(said) >= N // 100
    _no_count(" | ".join(m for _, m in said), tmp_path)
    assert said[-1] == (1.0, "Read 'p.csv'")
    size = (tmp_path / "p.csv").stat().st_size  # nor bytes: a fixed-width file's size tells its rows
    assert not any("kB" in m or "MB" in m or str(size) in m for _, m in said)
