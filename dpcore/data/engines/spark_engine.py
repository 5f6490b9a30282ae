"""Apache Spark through PySpark: the engine for clusters (tests run it in local mode).

The input is a temporary view over ``spark.read.parquet``/``spark.read.csv`` and the queries are
the shared ones of :mod:`dpcore.data.engines.sql`; only the small grouped result comes back to the
driver.  ``master`` is a Spark master URL (``local[*]``, ``spark://host:7077``,
``yarn``...).  The session is created once per master and reused.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd

from dpcore.data.domain import Grid
from dpcore.data.engines import base, common, sql
from dpcore.errors import DPCoreError, InputError, ParameterError

DEFAULT_MASTER = "local[*]"
_sessions: dict[str, Any] = {}
_lock = threading.Lock()


def session(master: str | None = None) -> Any:
    """The SparkSession for ``master`` (created on first use; Java 17+ must be installed)."""
    master = master or os.environ.get("DPCORE_SPARK_MASTER", DEFAULT_MASTER)
    with _lock:
        s = _sessions.get(master)
        if s is not None and s.sparkContext._jsc is not None:  # noqa: SLF001 - stopped sessions have none
            return s
        # One SparkContext per process, and getOrCreate() would hand back the running one whatever
        # master is asked for: stop it so the new master is really used.
        for other in list(_sessions.values()):
            with contextlib.suppress(Exception):
                other.stop()
        _sessions.clear()
        try:
            from pyspark.sql import SparkSession
        except ImportError:
            raise ParameterError(
                "The Spark engine needs PySpark: pip install -r requirements-spark.txt (and Java 17 or newer)."
            ) from None
        try:
            s = (SparkSession.builder.master(master).appName("dpcore")
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.shuffle.partitions", os.environ.get("DPCORE_SPARK_PARTITIONS", "8"))
                 .config("spark.sql.session.timeZone", "UTC")
                 .getOrCreate())
        except Exception as e:  # noqa: BLE001 - Java missing, master unreachable...
            raise ParameterError(
                f"Spark could not start with master '{master}': {str(e).strip().splitlines()[0][:300]}. "
                "Check that Java 17+ is installed (java -version) and the master URL is right."
            ) from None
        s.sparkContext.setLogLevel("ERROR")
        _sessions[master] = s
        return s


class SparkEngine:
    name = "spark"

    def __init__(self, master: str | None = None) -> None:
        self.master = master

    def _view(self, src: base.Source) -> tuple[Any, Any]:
        spark = session(self.master)
        try:
            if src.fmt == "parquet":
                df = spark.read.parquet(*src.paths)
            else:
                if common.csv_gzipped(src) and not src.paths[0].lower().endswith(".gz"):
                    # Spark picks the codec by the file name
                    raise InputError(f"'{Path(src.paths[0]).name}' is gzip-compressed but not named .gz: Spark "
                                     "reads it only as '.csv.gz'. Rename it, or use --engine duckdb.")
                enc = "ISO-8859-1" if common.csv_encoding(src) == "latin-1" else "UTF-8"
                df = (spark.read.option("header", "true").option("inferSchema", "false")
                      .option("sep", common.csv_delimiter(src)).option("quote", '"').option("escape", '"')
                      .option("encoding", enc).option("mode", "PERMISSIVE").csv(list(src.paths)))
                # pandas and DuckDB strip spaces around header names; Spark keeps them
                df = df.toDF(*[c.strip() for c in df.columns])
        except DPCoreError:
            raise
        except Exception as e:  # noqa: BLE001 - AnalysisException and friends
            raise InputError(f"Spark could not read '{src.label}': {common.data_error(e, src)}.") from None
        name = f"src_{abs(hash((src.paths, time.time_ns()))):x}"
        df.createOrReplaceTempView(name)
        return spark, (df, name)

    def _types(self, df: Any) -> dict[str, str]:
        out = {}
        for f in df.schema.fields:
            t = f.dataType.typeName()
            out[f.name] = ("integer" if t in ("byte", "short", "integer", "long") else
                           "number" if t in ("float", "double") or t.startswith("decimal") else
                           "boolean" if t == "boolean" else "text")
        return out

    def _collect(self, spark: Any, src: base.Source, query: str, view: str, progress: base.Progress, what: str) -> pd.DataFrame:
        q = query.replace("FROM src", f"FROM {view}")
        progress(0.1, f"{what}: running")
        try:
            res = spark.sql(q)
            rows = res.collect()
        except Exception as e:  # noqa: BLE001 - Py4J/Analysis errors carry the reason in text
            raise InputError(f"Spark could not aggregate the input: {common.data_error(e, src)}.") from None
        return pd.DataFrame([r.asDict() for r in rows], columns=res.columns)

    @staticmethod
    def _drop(spark: Any, view: str) -> None:
        with contextlib.suppress(Exception):
            spark.catalog.dropTempView(view)

    def columns(self, src: base.Source) -> list[str]:
        spark, (df, view) = self._view(src)
        self._drop(spark, view)
        return list(df.columns)

    def head(self, src: base.Source, n: int = 1000) -> pd.DataFrame:
        spark, (df, view) = self._view(src)
        try:
            rows = df.limit(int(n)).collect()
        except Exception as e:  # noqa: BLE001 - Py4J errors carry the reason in text
            raise InputError(f"Spark could not read '{src.label}': {common.data_error(e, src)}.") from None
        finally:
            self._drop(spark, view)
        return pd.DataFrame([r.asDict() for r in rows], columns=df.columns)

    def points(self, src: base.Source, grid: Grid, *, lat: str, lon: str, user: str | None = None,
               user_cap: int | None = None, progress: base.ProgressCallback | None = None,
               fingerprint: bool = True, drop_unreadable: bool = False) -> base.PointCounts:
        base.check_point_options(user, user_cap)
        prog = base.Progress(progress)
        prog(0.0, f"Starting Spark for {src.label}")
        t0 = time.perf_counter()
        spark, (df, view) = self._view(src)
        try:
            types = self._types(df)
            common.check_point_columns(list(types), lat, lon, user, src.label)
            return self._points(spark, view, types, src, grid, lat, lon, user, user_cap, prog, t0, fingerprint,
                                drop_unreadable)
        finally:
            self._drop(spark, view)

    def _points(self, spark: Any, view: str, types: dict[str, str], src: base.Source, grid: Grid, lat: str,
                lon: str, user: str | None, user_cap: int | None, prog: base.Progress, t0: float,
                fingerprint: bool, drop_unreadable: bool = False) -> base.PointCounts:
        q = sql.points_query(sql.SPARK, grid, (lat, types[lat]), (lon, types[lon]),
                             (user, types[user]) if user else None, user_cap)
        out = self._collect(spark, src, q, view, prog, f"Counting points with Spark ({src.label})")

        def examples(which: str) -> pd.DataFrame:
            eq = sql.point_examples_query(sql.SPARK, (lat, types[lat]), (lon, types[lon]), which)
            return self._collect(spark, src, eq, view, base.Progress(None), "examples")

        def sums() -> tuple[int, ...]:
            fq = sql.fingerprint_query(sql.SPARK, (lat, types[lat]), (lon, types[lon]),
                                       (user, types[user]) if user else None, grid.bounds)
            out = self._collect(spark, src, fq, view, base.Progress(None), "fingerprint")
            sums = tuple(int(out[c].iloc[0] or 0) for c in ("n", "s1", "s2", "q1", "q2", "ni", "i1", "i2"))
            return (*sums, *(float(out[c].iloc[0] or 0.0) for c in ("x0", "y0", "x1", "y1")))

        return common.point_result(out, grid, user, user_cap, self.name, src.label, examples, lat, lon, prog, t0,
                                   sums if fingerprint else None, drop_unreadable)

    def code_counts(self, src: base.Source, keys: list[str], *, count: str | None = None, user: str | None = None,
                    cap: int | None = None, distinct: bool = False,
                    progress: base.ProgressCallback | None = None, drop_missing: bool = False) -> base.CodeCounts:
        base.check_code_options(keys, count, user, cap)
        prog = base.Progress(progress)
        spark, (df, view) = self._view(src)
        try:
            types = self._types(df)
            common.check_code_columns(list(types), keys, count, user, src.label)
            q = sql.code_counts_query(sql.SPARK, [(k, types[k]) for k in keys],
                                      (count, types[count]) if count else None,
                                      (user, types[user]) if user else None, cap, distinct)
            out = self._collect(spark, src, q, view, prog, f"Counting rows with Spark ({src.label})")
        finally:
            self._drop(spark, view)
        return common.code_result(out, keys, count, user, cap, self.name, src.label, prog, drop_missing)
