"""Budget keys of coded tables (census and hierarchy tables, O/D trips): a function of the people
counted, never of how the file holds them.

The same rows reordered, with the columns permuted, with an unused column, gzipped, in Latin-1
instead of UTF-8, in Parquet with typed codes (``1`` for ``"01"``), as one row per person, or
counted by the numpy, DuckDB or Spark engine give one key; one person more gives another.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcore.areas import census_tables
from dpcore.cli import main
from dpcore.data.code_tables import read_code_table
from dpcore.data.engines import COUNT_COLUMN, Source, get_engine
from dpcore.data.engines.base import codes_fingerprint
from dpcore.data.hierarchy import Hierarchy
from dpcore.flows.counts import ODCounts

LEVELS = ["state", "county", "tract"]


@pytest.fixture(params=["numpy", "duckdb", pytest.param("spark", marks=pytest.mark.spark)])
def engine(request: pytest.FixtureRequest) -> Any:
    if request.param == "spark":
        return request.getfixturevalue("spark_engine")
    return get_engine(request.param)


def _table(seed: int = 0) -> pd.DataFrame:
    """Tracts with FIPS-like codes (leading zeros), a few empty, and non-ASCII text in a used level
    (``county``) and an unused column."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in ("01", "02", "06"):
        for c in ("001", "003", "Zürich"):
            for t in ("000100", "000200"):
                rows.append((s, c, t, 0 if rng.random() < 0.2 else int(rng.integers(1, 40)), "Genève"))
    return pd.DataFrame(rows, columns=["state", "county", "tract", "pop", "note"])


def _variants(df: pd.DataFrame, tmp: Path) -> dict[str, Path]:
    """The same table saved in every way that must not change its key."""
    out: dict[str, Path] = {}
    out["csv"] = tmp / "t.csv"
    df.to_csv(out["csv"], index=False, encoding="utf-8")
    out["reordered"] = tmp / "reordered.csv"
    df.sample(frac=1, random_state=3)[["pop", "note", "tract", "state", "county"]].to_csv(out["reordered"],
                                                                                          index=False)
    out["unused"] = tmp / "unused.csv"
    df.assign(extra=np.arange(len(df)), note2="x").to_csv(out["unused"], index=False)
    out["gzip"] = tmp / "t.csv.gz"
    out["gzip"].write_bytes(gzip.compress(out["csv"].read_bytes()))
    out["latin1"] = tmp / "latin1.csv"
    df.to_csv(out["latin1"], index=False, encoding="latin-1")
    out["parquet"] = tmp / "t.parquet"
    typed = df.assign(state=df["state"].astype(int), pop=df["pop"].astype("int32"))  # 1, not "01"
    typed.to_parquet(out["parquet"], index=False)
    out["per_person"] = tmp / "per_person.csv"
    df.loc[df.index.repeat(df["pop"])].assign(pop=1).to_csv(out["per_person"], index=False)
    return out


def test_census_key_ignores_how_the_table_is_stored(tmp_path: Path) -> None:
    df = _table()
    ref = census_tables.fingerprint(df, LEVELS, "pop")
    for name, path in _variants(df, tmp_path).items():
        assert census_tables.fingerprint(read_code_table(path), LEVELS, "pop") == ref, name
    # finer levels are summed out: the same table released at fewer levels keeps its budget
    assert census_tables.fingerprint(df, ["state", "county"], "pop") == ref
    assert census_tables.fingerprint(df, ["state"], "pop") == ref
    # one person more, or one moved to another state, is another population
    more = df.assign(pop=df["pop"] + (df.index == 0))
    assert census_tables.fingerprint(more, LEVELS, "pop") != ref
    moved = df.copy()
    moved.loc[df.index[df["pop"] > 0][0], "pop"] -= 1
    moved.loc[df.index[df["state"] == "06"][0], "pop"] += 1
    assert census_tables.fingerprint(moved, LEVELS, "pop") != ref
    # another top level is another key (the key is the totals per top-level area)
    assert census_tables.fingerprint(df, ["county", "tract"], "pop") != ref


def test_census_key_is_the_same_on_every_engine(engine: Any, tmp_path: Path) -> None:
    """Each engine's sums per area (the small table the CLI and the pages release from) give the
    in-memory table's key, for every way of storing it."""
    df = _table(1)
    ref = census_tables.fingerprint(df, LEVELS, "pop")
    for name, path in _variants(df, tmp_path).items():
        count = "pop" if name != "per_person" else None
        cc = engine.code_counts(Source.from_path(path), LEVELS, count=count)
        small = cc.frame[[*LEVELS, "count"]].rename(columns={"count": COUNT_COLUMN})
        assert census_tables.fingerprint(small, LEVELS, COUNT_COLUMN) == ref, (engine.name, name)


def test_group_size_histograms_are_keyed_per_column_position() -> None:
    df = pd.DataFrame({"state": ["01", "02"], "H1": [3, 4], "H2": [1, 0], "note": ["a", "b"]})
    key = census_tables.fingerprint(df, ["state"], ["H1", "H2"])
    renamed = df.rename(columns={"H1": "one", "H2": "two"}).iloc[::-1]
    assert census_tables.fingerprint(renamed, ["state"], ["one", "two"]) == key
    assert census_tables.fingerprint(df, ["state"], ["H2", "H1"]) != key  # sizes swapped: other data
    assert census_tables.fingerprint(df, ["state"], "H1") != key


def test_codes_fingerprint_reads_codes_as_canonical_text() -> None:
    text = codes_fingerprint("t", [pd.Series(["01", " 2", "007", "x"]), pd.Series(["1.0", "2", "3", "y"])],
                             [1, 2, 3, 4])
    typed = codes_fingerprint("t", [pd.Series([1, 2, 7, "x"], dtype=object), pd.Series([1.0, 2, 3, "y"], dtype=object)],
                              np.array([1, 2, 3, 4]))
    assert text == typed
    assert codes_fingerprint("t", [pd.Series([1.0, 2.0])], [1, 1]) == codes_fingerprint("t", [pd.Series([1, 2])], [1, 1])
    assert codes_fingerprint("u", [["1"]], [1]) != codes_fingerprint("t", [["1"]], [1])  # the tag is in the key
    # the split of a count over rows does not matter; a zero row is no row
    assert codes_fingerprint("t", [["a", "a", "b"]], [2, 3, 0]) == codes_fingerprint("t", [["a"]], [5])


# --------------------------------------------------------------------------------------------- trips


ZONES = ["0101", "0102", "0201", "Zürich"]


def _trips(n: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame({"who": rng.integers(0, 60, n), "o": rng.choice(ZONES, n), "d": rng.choice(ZONES, n),
                         "note": "é"})


def _zones() -> Hierarchy:
    return Hierarchy.from_frame(pd.DataFrame({"region": ["01", "01", "02", "CH"], "zone": ZONES}),
                                ["region", "zone"], codes="global", source="area list")


def test_trip_keys_are_the_same_on_every_engine_and_storage(engine: Any, tmp_path: Path) -> None:
    trips = _trips()
    h = _zones()
    ref = ODCounts.from_frame(trips, h, origin="o", destination="d").fingerprint
    trips.to_csv(tmp_path / "t.csv", index=False)
    trips.sample(frac=1, random_state=1)[["note", "d", "who", "o"]].to_csv(tmp_path / "r.csv", index=False,
                                                                         encoding="latin-1")
    (tmp_path / "t.csv.gz").write_bytes(gzip.compress((tmp_path / "t.csv").read_bytes()))
    trips.to_parquet(tmp_path / "t.parquet", index=False)
    trips.groupby(["o", "d"]).size().rename("n").reset_index().to_csv(tmp_path / "agg.csv", index=False)
    for name in ("t.csv", "r.csv", "t.csv.gz", "t.parquet", "agg.csv"):
        src = Source.from_path(tmp_path / name)
        count = "n" if name == "agg.csv" else None
        in_memory = ODCounts.from_frame(read_code_table(tmp_path / name), h, origin="o", destination="d", count=count)
        assert in_memory.fingerprint == ref, name
        for user, cap in ((None, None), ("who", 2)) if count is None else ((None, None),):
            cc = engine.code_counts(src, ["o", "d"], count=count, user=user, cap=cap)
            got = ODCounts.from_code_counts(cc, h, max_trips=cap or 1).fingerprint
            assert got == ref, (engine.name, name, user)  # the key is taken before the per-person cap


# --------------------------------------------------------------------------------------------- CLI


def test_cli_large_and_small_copies_of_a_table_share_one_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A gzipped CSV above the engine threshold (DuckDB sums it) and a reordered Parquet copy with
    typed codes and an extra column (read in memory) are one table: one budget."""
    df = _table(2).rename(columns={"pop": "population"})
    df.to_csv(tmp_path / "big.csv.gz", index=False, compression="gzip")
    df.sample(frac=1, random_state=5).assign(state=df["state"].astype(int), extra=1).to_parquet(
        tmp_path / "copy.parquet", index=False)
    common = ["--levels", "state,county,tract", "--count", "population", "--epsilon", "1", "--budget-cap", "2"]
    monkeypatch.setenv("DPCORE_AUTO_ENGINE_BYTES", "100")  # big.csv.gz goes to DuckDB
    assert main(["release", "census", "--input", str(tmp_path / "big.csv.gz"), *common,
                 "--out", str(tmp_path / "a")]) == 0, capsys.readouterr().err
    monkeypatch.setenv("DPCORE_AUTO_ENGINE_BYTES", str(10**9))  # the copy is read in memory
    assert main(["release", "hierarchy", "--input", str(tmp_path / "copy.parquet"), *common,
                 "--mechanism", "exact", "--input-lists-all-areas", "--out", str(tmp_path / "b")]) == 0, \
        capsys.readouterr().err
    capsys.readouterr()
    # the two releases spent the cap: a third, at fewer levels, on yet another copy, is refused
    df.to_csv(tmp_path / "third.csv", index=False, encoding="latin-1")
    assert main(["release", "census", "--input", str(tmp_path / "third.csv"), "--levels", "state,county",
                 "--count", "population", "--epsilon", "1", "--budget-cap", "2", "--out", str(tmp_path / "c")]) == 2
    assert "Not enough privacy budget" in capsys.readouterr().err

