"""The three engines (numpy, DuckDB, Spark) give identical aggregates on random inputs.

The rules they must share are in :mod:`dpcore.data.engines.base`.  Every example is written as
Parquet and as CSV (floats with 17 significant digits, so the text round-trips), and as a folder
of several files, and every engine must give the same counts, ``n_outside``, ``n_capped``,
sensitivity, ``n_read``, ``dropped`` and fingerprint (points) or the same frame, ``n_read`` and
``n_capped`` (coded rows); when the input is refused, every engine refuses it with an
:class:`~dpcore.errors.InputError`.

Points are drawn to sit on the grid's edges (including the west/east/south/north bounds) and one
ulp either side of them, outside the bounds, with missing coordinates, duplicated (ties in the
per-person cap), and with person ids written in their canonical variants (``"7"``, ``"007"``,
``" 7 "``, ``"7.0"``, ``"+7"``).

The numpy-vs-DuckDB properties run 25 examples in every storage; the Spark ones (marked ``spark``,
skipped without ``java`` on PATH) run six, each read by Spark from one of the four storages, in one
Spark session shared by the whole test run.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpcore.data.domain import Bounds, Grid
from dpcore.data.engines import Source, get_engine
from dpcore.errors import InputError

SPARK_MASTER = "local[2]"  # = conftest.SPARK_TEST_MASTER: one Spark session per test run

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SPARK = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------------------------
# drawing inputs
# ---------------------------------------------------------------------------------------------

NAMED_BOUNDS = [
    (-74.06, 40.56, -73.70, 40.92),
    (-180.0, -90.0, 180.0, 90.0),
    (0.0, 0.0, 1.0, 1.0),
    (-0.51, 51.28, 0.33, 51.69),
    (2.25, 48.81, 2.42, 48.9),
    (-122.52, 37.7, -122.35, 37.83),
    (179.5, -90.0, 180.0, -89.9),
]


def _random_bounds(t: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
    w, s, dw, ds = t
    return (w, s, min(w + dw, 180.0), min(s + ds, 90.0))


BOUNDS = st.one_of(
    st.sampled_from(NAMED_BOUNDS),
    st.tuples(st.floats(-179.0, 179.0), st.floats(-89.0, 89.0), st.floats(1e-5, 60.0), st.floats(1e-5, 60.0))
    .map(_random_bounds),
)
KINDS = ("inside", "edge", "edge_lon", "edge_lat", "ulp", "outside", "missing", "dup")
POINT = st.tuples(st.sampled_from(KINDS), st.integers(0, 10**6), st.integers(0, 10**6),
                  st.floats(0.0, 1.0), st.floats(0.0, 1.0))


def id_variants(p: int) -> list[str | None]:
    """Spellings of person ``p``: the first six are the same canonical id, then a text id, then missing."""
    return [str(p), f"00{p}", f" {p} ", f"{p}.0", f"+{p}", f"{p} ", f"u{p}", f" u{p}", None]


def build_points(bounds: tuple[float, float, float, float], grid: Grid,
                 specs: list[tuple[str, int, int, float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Longitudes and latitudes for the drawn point specs (NaN = missing)."""
    w, s, e, n = bounds
    le, fe = grid.lon_edges(), grid.lat_edges()
    lons: list[float] = []
    lats: list[float] = []
    for kind, i, j, u, v in specs:
        x = min(w + u * (e - w), e)
        y = min(s + v * (n - s), n)
        if kind == "edge":
            x, y = le[i % len(le)], fe[j % len(fe)]
        elif kind == "edge_lon":
            x = le[i % len(le)]
        elif kind == "edge_lat":
            y = fe[j % len(fe)]
        elif kind == "ulp":
            x = np.nextafter(le[i % len(le)], np.inf if j % 2 else -np.inf)
            y = np.nextafter(fe[j % len(fe)], np.inf if i % 2 else -np.inf)
        elif kind == "outside":
            side = i % 4
            if side == 0:
                x = w - (0.01 + u) * (e - w)
            elif side == 1:
                x = e + (0.01 + u) * (e - w)
            elif side == 2:
                y = s - (0.01 + v) * (n - s)
            else:
                y = n + (0.01 + v) * (n - s)
        elif kind == "missing":
            if i % 3 != 1:
                x = np.nan
            if i % 3 != 0:
                y = np.nan
        elif kind == "dup" and lons:
            x, y = lons[j % len(lons)], lats[j % len(lats)]
        lons.append(float(np.clip(x, -180.0, 180.0)))
        lats.append(float(np.clip(y, -90.0, 90.0)))
    return np.array(lons), np.array(lats)


@st.composite
def point_cases(draw: Any, max_points: int = 40) -> dict[str, Any]:
    b = draw(BOUNDS)
    grid = Grid(Bounds(*b), draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    specs = draw(st.lists(POINT, min_size=1, max_size=max_points))
    # whole lists of awkward points: small examples alone rarely make a person exceed the cap
    specs += draw(st.lists(POINT, min_size=max_points // 4, max_size=max_points // 4))
    lon, lat = build_points(b, grid, specs)
    user_style = draw(st.sampled_from(["none", "text", "text", "integer"]))
    df = pd.DataFrame({"lat": lat, "lon": lon})
    if user_style == "none":
        user, cap = None, draw(st.sampled_from([None, 1]))
    else:
        persons = draw(st.lists(st.integers(0, 3), min_size=len(specs), max_size=len(specs)))
        if user_style == "integer":
            df["uid"] = np.array(persons, dtype=np.int64)
        else:
            variants = draw(st.lists(st.integers(0, 8), min_size=len(specs), max_size=len(specs)))
            df["uid"] = pd.Series([id_variants(p)[k] for p, k in zip(persons, variants, strict=True)],
                                  dtype=object).astype("string")
        user, cap = "uid", draw(st.integers(1, 4))
    df["note"] = [f"r{i}" for i in range(len(df))]  # a text column the engines must ignore
    csv = {"sep": draw(st.sampled_from([",", ",", ";", "\t"])),
           "na_rep": draw(st.sampled_from(["", "", "NA", "NaN", "null", "N/A", "nan"]))}
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(df) - 1)), max_size=2)))) if len(df) > 1 else []
    return {"df": df, "grid": grid, "user": user, "cap": cap, "csv": csv, "cuts": cuts}


CODES = ["01", "1", "001", " 01", "01 ", " 1 ", "10", "010", "A", " A ", "a", "0", "00", "x y"]
KEYSETS = [["county"], ["origin", "destination"]]


@st.composite
def code_cases(draw: Any, max_rows: int = 30) -> dict[str, Any]:
    keys = KEYSETS[draw(st.integers(0, 1))]
    n = draw(st.integers(1, max_rows // 2)) + draw(st.integers(0, max_rows // 2))
    data: dict[str, Any] = {k: draw(st.lists(st.sampled_from(CODES), min_size=n, max_size=n)) for k in keys}
    mode = ["user", "count", "rows", "user"][draw(st.integers(0, 3))]
    count = user = cap = None
    distinct = False
    if mode == "count":
        vals = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
        style = draw(st.sampled_from(["integer", "float", "text"]))
        if style == "integer":
            data["n"] = np.array(vals, dtype=np.int64)
        elif style == "float":
            data["n"] = np.array(vals, dtype=np.float64)
        else:
            spell = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
            data["n"] = [[str(c), f" {c} ", f"{c}.0"][k] for c, k in zip(vals, spell, strict=True)]
        count = "n"
    elif mode == "user":
        persons = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
        variants = draw(st.lists(st.integers(0, 7), min_size=n, max_size=n))
        data["uid"] = [id_variants(p)[k] for p, k in zip(persons, variants, strict=True)]
        user = "uid"
        cap = draw(st.integers(1, 3))  # a person column needs a cap (check_code_options)
        distinct = draw(st.booleans())
    data["note"] = [f"r{i}" for i in range(n)]
    df = pd.DataFrame(data)
    for c in df.columns:
        if df[c].dtype == object:
            df[c] = df[c].astype("string")
    csv = {"sep": draw(st.sampled_from([",", ",", ";", "\t"])), "na_rep": ""}
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, n - 1)), max_size=2)))) if n > 1 else []
    return {"df": df, "keys": keys, "count": count, "user": user, "cap": cap, "distinct": distinct,
            "csv": csv, "cuts": cuts}


# ---------------------------------------------------------------------------------------------
# writing and comparing
# ---------------------------------------------------------------------------------------------


def write_sources(df: pd.DataFrame, root: Path, csv: dict[str, str], cuts: list[int]) -> dict[str, Source]:
    """The table as one Parquet file, one CSV file, and folders of Parquet and CSV parts."""
    out = {}
    df.to_parquet(root / "all.parquet", index=False)
    df.to_csv(root / "all.csv", index=False, float_format="%.17g", **csv)
    out["parquet"] = Source.from_path(root / "all.parquet")
    out["csv"] = Source.from_path(root / "all.csv")
    parts = np.split(np.arange(len(df)), cuts)
    for fmt in ("parquet", "csv"):
        d = root / f"parts_{fmt}"
        d.mkdir()
        for i, idx in enumerate(parts):
            part = df.iloc[idx]
            if fmt == "parquet":
                part.to_parquet(d / f"part-{i}.parquet", index=False)
            else:
                part.to_csv(d / f"part-{i}.csv", index=False, float_format="%.17g", **csv)
        out[f"{fmt}_folder"] = Source.from_path(d)
    return out


def point_summary(fn: Any) -> dict[str, Any]:
    """Everything an engine's point answer must agree on (or the refusal)."""
    try:
        pc = fn()
    except InputError:
        return {"refused": "InputError"}
    a = pc.aggregate
    assert a.counts.dtype == np.int64
    return {"shape": a.counts.shape, "counts": a.counts.tolist(), "n_outside": a.n_outside,
            "n_capped": a.n_capped, "sensitivity": a.sensitivity, "user_cap": a.user_cap,
            "total": int(a.counts.sum()), "n_read": pc.n_read, "dropped": dict(pc.dropped),
            "fingerprint": pc.fingerprint}


def run_points(engine: Any, src: Source, case: dict[str, Any]) -> dict[str, Any]:
    return point_summary(lambda: engine.points(src, case["grid"], lat="lat", lon="lon", user=case["user"],
                                               user_cap=case["cap"]))


def run_codes(engine: Any, src: Source, case: dict[str, Any]) -> Any:
    try:
        return engine.code_counts(src, case["keys"], count=case["count"], user=case["user"], cap=case["cap"],
                                  distinct=case["distinct"])
    except InputError:
        return "refused"


def assert_same_codes(ref: Any, got: Any, label: str) -> None:
    if isinstance(ref, str) or isinstance(got, str):
        assert ref == got, f"{label}: one engine refused the input, the other did not"
        return
    assert got.keys == ref.keys, label
    assert (got.n_read, got.n_capped) == (ref.n_read, ref.n_capped), label
    pd.testing.assert_frame_equal(got.frame, ref.frame, obj=f"{label} frame")


def expected_codes_sanity(ref: Any, case: dict[str, Any]) -> None:
    """The reference answer itself: counts bounded by count_all, the cap bounds each person."""
    if isinstance(ref, str):
        return
    df, f = case["df"], ref.frame
    assert list(f.columns) == [*case["keys"], "count", "count_all"]
    assert (f["count"] >= 0).all() and (f["count"] <= f["count_all"]).all()
    assert ref.n_read == len(df)
    total = int(pd.to_numeric(df[case["count"]].astype(str).str.strip()).sum()) if case["count"] else len(df)
    assert int(f["count_all"].sum()) == total
    for k in case["keys"]:
        assert (f[k] == f[k].str.strip()).all()


# ---------------------------------------------------------------------------------------------
# numpy vs DuckDB (cheap: many examples)
# ---------------------------------------------------------------------------------------------


@FAST
@given(point_cases())
def test_points_numpy_duckdb_agree(case: dict[str, Any]) -> None:
    numpy_eng, duck = get_engine("numpy"), get_engine("duckdb")
    with tempfile.TemporaryDirectory() as tmp:
        srcs = write_sources(case["df"], Path(tmp), case["csv"], case["cuts"])
        ref = run_points(numpy_eng, srcs["parquet"], case)
        for fmt, src in srcs.items():
            for eng in (numpy_eng, duck):
                if eng is numpy_eng and fmt == "parquet":
                    continue
                assert run_points(eng, src, case) == ref, f"{eng.name} on {fmt} differs from numpy on parquet"
    if "refused" not in ref:
        kept = case["df"][["lat", "lon"]].notna().all(axis=1).sum()
        assert ref["n_read"] == len(case["df"])
        assert ref["total"] + ref["n_outside"] + ref["n_capped"] + sum(ref["dropped"].values()) == len(case["df"])
        assert ref["dropped"].get("missing coordinate", 0) == len(case["df"]) - kept


@FAST
@given(code_cases())
def test_code_counts_numpy_duckdb_agree(case: dict[str, Any]) -> None:
    numpy_eng, duck = get_engine("numpy"), get_engine("duckdb")
    with tempfile.TemporaryDirectory() as tmp:
        srcs = write_sources(case["df"], Path(tmp), case["csv"], case["cuts"])
        ref = run_codes(numpy_eng, srcs["parquet"], case)
        expected_codes_sanity(ref, case)
        for fmt, src in srcs.items():
            for eng in (numpy_eng, duck):
                if eng is numpy_eng and fmt == "parquet":
                    continue
                assert_same_codes(ref, run_codes(eng, src, case), f"{eng.name} on {fmt}")


# ---------------------------------------------------------------------------------------------
# Spark (each query costs seconds: few examples, single files plus one folder per example)
# ---------------------------------------------------------------------------------------------


def spark_format(case: dict[str, Any]) -> str:
    """The one storage Spark reads ``case`` from (a Spark query, seconds each, is these tests' cost;
    the numpy-vs-DuckDB properties read every example from every storage): CSV when the example drew
    a CSV-only feature (a separator or missing-value spelling other than ``,`` and empty), where it
    matters, else Parquet; a folder of parts when it drew cuts.  A function of the example, so a
    replayed example reads the same storage."""
    fmt = "parquet" if case["csv"] == {"sep": ",", "na_rep": ""} else "csv"
    return f"{fmt}_folder" if case["cuts"] else fmt


@pytest.mark.spark
@SPARK
@given(case=point_cases(max_points=60))
def test_points_spark_agrees(spark_engine: Any, case: dict[str, Any]) -> None:
    fmt = spark_format(case)
    with tempfile.TemporaryDirectory() as tmp:
        srcs = write_sources(case["df"], Path(tmp), case["csv"], case["cuts"])
        ref = run_points(get_engine("numpy"), srcs["parquet"], case)
        assert run_points(spark_engine, srcs[fmt], case) == ref, f"spark on {fmt} differs from numpy"


@pytest.mark.spark
@SPARK
@given(case=code_cases(max_rows=40))
def test_code_counts_spark_agrees(spark_engine: Any, case: dict[str, Any]) -> None:
    fmt = spark_format(case)
    with tempfile.TemporaryDirectory() as tmp:
        srcs = write_sources(case["df"], Path(tmp), case["csv"], case["cuts"])
        ref = run_codes(get_engine("numpy"), srcs["parquet"], case)
        assert_same_codes(ref, run_codes(spark_engine, srcs[fmt], case), f"spark on {fmt}")


def _rich_points(seed: int, n: int) -> tuple[pd.DataFrame, Grid]:
    """A larger fixed example with every kind of awkward point (Spark's hypothesis runs are few)."""
    rng = np.random.default_rng(seed)
    grid = Grid(Bounds(-74.06, 40.56, -73.70, 40.92), 7, 9)
    lon = rng.uniform(-74.1, -73.65, n)
    lat = rng.uniform(40.5, 40.95, n)
    le, fe = grid.lon_edges(), grid.lat_edges()
    k = n // 5
    lon[:k] = rng.choice(le, k)
    lat[k // 2:k + k // 2] = rng.choice(fe, k)
    lon[2 * k:2 * k + 20] = np.nextafter(rng.choice(le, 20), -np.inf)
    lat[2 * k + 20:2 * k + 40] = np.nextafter(rng.choice(fe, 20), np.inf)
    lon[3 * k:3 * k + 30] = lon[3 * k + 30:3 * k + 60]  # duplicates: ties in the cap key
    lat[3 * k:3 * k + 30] = lat[3 * k + 30:3 * k + 60]
    lat[::97] = np.nan
    persons = rng.integers(0, 40, n)
    variant = rng.integers(0, 8, n)
    uid = pd.Series([id_variants(int(p))[int(v)] for p, v in zip(persons, variant, strict=True)], dtype="string")
    return pd.DataFrame({"lat": lat, "lon": lon, "uid": uid}), grid


@pytest.mark.spark
def test_spark_rich_example_and_folder(spark_engine: Any, tmp_path: Path) -> None:
    df, grid = _rich_points(7, 3000)
    case = {"grid": grid, "user": "uid", "cap": 3}
    srcs = write_sources(df, tmp_path, {"sep": ",", "na_rep": ""}, [700, 1900])
    ref = run_points(get_engine("numpy"), srcs["parquet"], case)
    assert ref["n_capped"] > 0 and ref["n_outside"] > 0 and ref["dropped"]["missing coordinate"] > 0
    for fmt in ("parquet_folder", "csv"):
        assert run_points(spark_engine, srcs[fmt], case) == ref, f"spark on {fmt} differs from numpy"
        assert run_points(get_engine("duckdb"), srcs[fmt], case) == ref, f"duckdb on {fmt} differs from numpy"


@pytest.mark.spark
def test_spark_rich_example_with_sparks_own_code_generation(spark_engine: Any, tmp_path: Path) -> None:
    """The tests' Spark runs interpreted, without adaptive execution (tests/conftest.py, for time);
    the engine in use keeps Spark's defaults, so one example runs with them: whole-stage code
    generation, generated expressions and adaptive execution."""
    from dpcore.data.engines.spark_engine import session

    conf = session(os.environ["DPCORE_SPARK_MASTER"]).conf  # the tests' one session (tests/conftest.py)
    defaults = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK",
                "spark.sql.adaptive.enabled": "true"}
    before = {k: conf.get(k) for k in defaults}
    df, grid = _rich_points(11, 2000)
    case = {"grid": grid, "user": "uid", "cap": 2}
    srcs = write_sources(df, tmp_path, {"sep": ",", "na_rep": ""}, [900])
    ref = run_points(get_engine("numpy"), srcs["parquet"], case)
    try:
        for k, v in defaults.items():
            conf.set(k, v)
        assert run_points(spark_engine, srcs["csv"], case) == ref, "spark with its defaults differs from numpy"
    finally:
        for k, v in before.items():
            conf.set(k, v)
