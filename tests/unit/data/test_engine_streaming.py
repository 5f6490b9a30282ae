"""DuckDB streams each point row's parsed coordinates to numpy, which bins them with the grid's own
cell_index (issue 28 item 4): the answer must stay the in-memory engine's, bit for bit, on text
coordinates that take the fast path (plain numbers) and those that do not (spaces, tabs, missing
markers), on cell edges, across batch boundaries and under a cap.  Also the exact fast cell index
and the CLI's progress lines in a log."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpcore.cli import common as cli_common
from dpcore.cli import main
from dpcore.data.domain import Bounds, Grid, edge_index
from dpcore.data.engines import Source, duckdb_engine, get_engine

GRID = Grid(Bounds(-74.06, 40.56, -73.70, 40.92), 16, 16)


def _messy_csv(path: Path, n: int = 1500, seed: int = 3) -> Path:
    """Points as text: plain numbers, the grid's own edges, values padded with spaces or tabs,
    pandas' missing markers, points outside the bounds, and person ids."""
    rng = np.random.default_rng(seed)
    lon = rng.uniform(-74.1, -73.66, n)
    lat = rng.uniform(40.52, 40.96, n)
    lon[:40] = rng.choice(GRID.lon_edges(), 40)  # exactly on a cell or the bounds' edge
    lat[20:60] = rng.choice(GRID.lat_edges(), 40)
    text_lon = [repr(float(v)) for v in lon]
    text_lat = [f"{v:.6f}" for v in lat]
    for i in range(60, 90):
        text_lon[i] = f'" {text_lon[i]}\t"'  # padded: the full test, not the fast path
    for i, marker in zip(range(90, 96), ["", "NA", "nan", "-nan", "NULL", "n/a"], strict=True):
        text_lat[i] = marker  # missing: dropped by both engines
    person = rng.integers(0, 50, n)
    rows = [f"{a},{b},{u}" for a, b, u in zip(text_lat, text_lon, person, strict=True)]
    path.write_text("lat,lon,person\n" + "\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("cap", [None, 4])
def test_duckdb_gives_the_in_memory_answer_on_text_coordinates(tmp_path: Path, cap: int | None,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    src = Source.from_path(_messy_csv(tmp_path / "p.csv"))
    monkeypatch.setattr(duckdb_engine, "BATCH_ROWS", 97)  # many batches: the tallies add up across them
    user = "person" if cap else None
    ref = get_engine("numpy").points(src, GRID, lat="lat", lon="lon", user=user, user_cap=cap)
    got = get_engine("duckdb").points(src, GRID, lat="lat", lon="lon", user=user, user_cap=cap)
    assert np.array_equal(got.aggregate.counts, ref.aggregate.counts)
    assert (got.aggregate.n_outside, got.aggregate.n_capped) == (ref.aggregate.n_outside, ref.aggregate.n_capped)
    assert got.dropped == ref.dropped and sum(got.dropped.values()) == 6
    assert (got.n_read, got.fingerprint) == (ref.n_read, ref.fingerprint)
    assert ref.aggregate.n_outside > 0 and (ref.aggregate.n_capped > 0) == bool(cap)


def test_duckdb_without_a_fingerprint_counts_the_same(tmp_path: Path) -> None:
    src = Source.from_path(_messy_csv(tmp_path / "p.csv", n=300))
    ref = get_engine("numpy").points(src, GRID, lat="lat", lon="lon")
    got = get_engine("duckdb").points(src, GRID, lat="lat", lon="lon", fingerprint=False)
    assert np.array_equal(got.aggregate.counts, ref.aggregate.counts) and got.fingerprint == ""


@pytest.mark.parametrize("n", [1, 2, 3, 16, 255, 1024])
@pytest.mark.parametrize(("lo", "hi"), [(-74.06, -73.70), (40.56, 40.92), (-180.0, 180.0), (-1e-3, 2e-3)])
def test_edge_index_is_searchsorted(n: int, lo: float, hi: float) -> None:
    edges = np.linspace(lo, hi, n + 1)
    rng = np.random.default_rng(n)
    v = np.concatenate([rng.uniform(lo, hi, 3000), edges, np.nextafter(edges, np.inf), np.nextafter(edges, -np.inf)])
    v = v[(v >= lo) & (v <= hi)]
    ref = np.clip(np.searchsorted(edges, v, side="right") - 1, 0, n - 1)
    assert np.array_equal(edge_index(edges, v), ref)


def test_codes_padded_with_whitespace_are_one_code_in_both_engines(tmp_path: Path) -> None:
    """DuckDB skips its costly trim when a code starts and ends with a visible character: padded
    codes still take it and meet their plain spelling, as in memory."""
    f = tmp_path / "t.csv"
    f.write_text('tract,county\n01,001\n" 01","001\t"\n"01\x0b",001\n02,001\n02 ,002\n')
    ref = get_engine("numpy").code_counts(Source.from_path(f), ["county", "tract"])
    got = get_engine("duckdb").code_counts(Source.from_path(f), ["county", "tract"])
    assert got.frame.to_dict("list") == ref.frame.to_dict("list")
    assert ref.frame["count"].tolist() == [3, 1, 1]


def test_cli_prints_progress_lines_to_a_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """stderr is not a terminal here (captured): the DuckDB count still reports, as whole lines."""
    monkeypatch.setattr(cli_common, "LOG_EVERY_SECONDS", 0.0)
    csv = _messy_csv(tmp_path / "p.csv", n=200)
    rc = main(["release", "points", "--input", str(csv), "--bounds=-74.06,40.56,-73.70,40.92", "--grid", "8,8",
               "--mechanism", "identity", "--epsilon", "1", "--no-budget", "--engine", "duckdb",
               "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 0, err
    lines = [ln for ln in err.splitlines() if "Counting points with DuckDB" in ln]
    assert lines and all("\r" not in ln for ln in lines)
    assert any("Counted the rows with duckdb" in ln for ln in err.splitlines())  # never their number


def test_cli_progress_is_quiet_in_a_log_for_a_short_step(capsys: pytest.CaptureFixture[str]) -> None:
    show = cli_common.cli_progress("Counting points")
    show(0.5, "Counting points")
    show(1.0, "Counted 3 rows")
    assert capsys.readouterr().err == ""


def test_the_tally_can_sum_the_tolerant_keys_as_the_in_memory_path_makes_them() -> None:
    """Issue 26 item 12 keys a points file also by its rounded coordinates: the streamed tally
    holds the sums those keys are made of, batch by batch, equal to the in-memory computation."""
    import hashlib

    from dpcore.data.engines import base
    from dpcore.data.engines.common import PointTally

    rng = np.random.default_rng(8)
    x, y = rng.uniform(-74.2, -73.6, 3000), rng.uniform(40.4, 41.0, 3000)
    st = (rng.random(3000) < 0.05).astype(np.int64)  # a few rows missing a coordinate
    tally = PointTally(GRID, fingerprint=True, tolerant=True)
    for part in np.array_split(np.arange(3000), 7):
        tally.add(x[part], y[part], st[part])
    ok = st == 0
    n, s1, s2, q1, q2, ni, i1, i2 = tally.sums
    assert base.point_fingerprint(n, s1, s2) == base.points_fingerprint(x[ok], y[ok])
    keys = [hashlib.sha256(f"points:q{base.KEY_DECIMALS}:{a}:{b}:{c}".encode()).hexdigest()[:16]
            for a, b, c in ((n, q1, q2), (ni, i1, i2))]
    assert keys == base.tolerant_points_fingerprints(x[ok], y[ok], GRID.bounds)
    assert 0 < ni < n
