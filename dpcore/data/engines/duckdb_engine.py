"""DuckDB: the embedded engine for files larger than memory (streaming, out of core).

The input is a view over ``read_parquet``/``read_csv`` of the files; the queries are the shared
ones of :mod:`dpcore.data.engines.sql`.  DuckDB streams Parquet row groups and CSV blocks through the
aggregation and spills to ``temp_directory`` when a window (the per-person cap) needs more than
``memory_limit``, so peak memory stays bounded whatever the input size.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import pandas as pd

from dpcore.data.domain import Grid
from dpcore.data.engines import base, common, sql
from dpcore.errors import DPCoreError, InputError, ParameterError

#: Default cap on DuckDB's memory (its own default is 80 % of RAM); aggregation spills to disk
#: beyond it.  Override with DPCORE_DUCKDB_MEMORY (e.g. "8GB").
DEFAULT_MEMORY = "2GB"

#: Rows per Arrow batch streamed from DuckDB to numpy (points): about 25 MB of coordinates.
BATCH_ROWS = 1_000_000


class DuckDBEngine:
    name = "duckdb"

    def __init__(self, memory_limit: str | None = None, threads: int | None = None,
                 temp_directory: str | None = None) -> None:
        try:
            import duckdb
        except ImportError:  # pragma: no cover - duckdb is a pinned requirement
            raise ParameterError("The DuckDB engine needs the duckdb package: pip install -r requirements.txt.") from None
        self._duckdb = duckdb
        self.memory_limit = memory_limit or os.environ.get("DPCORE_DUCKDB_MEMORY", DEFAULT_MEMORY)
        self.threads = threads or max(1, os.cpu_count() or 1)
        self.temp_directory = temp_directory or _spill_dir()

    # -------------------------------------------------------------------------------- plumbing

    def _connect(self, src: base.Source) -> Any:
        files = "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in src.paths) + "]"
        if src.fmt == "parquet":
            rel = f"read_parquet({files}, union_by_name = true)"
        else:  # sniffed before connecting: a failure here leaves no connection open
            sep = common.csv_delimiter(src)
            enc = "latin-1" if common.csv_encoding(src) == "latin-1" else "utf-8"
            comp = "gzip" if common.csv_gzipped(src) else "auto"
            rel = (f"read_csv({files}, header = true, all_varchar = true, delim = '{sep}', quote = '\"', "
                   f"union_by_name = true, null_padding = false, encoding = '{enc}', compression = '{comp}')")
        try:
            con = self._duckdb.connect(config={
                "memory_limit": self.memory_limit,
                "threads": self.threads,
                "temp_directory": self.temp_directory,
            })
        except self._duckdb.Error as e:
            raise ParameterError(f"DuckDB could not start: {common.first_line(e)}. Check DPCORE_DUCKDB_MEMORY "
                                 "(e.g. 2GB) and that the temporary folder is writable.") from None
        try:
            # query_progress() needs the progress bar on; printing it to the terminal stays off.
            # in_clause: the optimizer turns the long IN lists of missing-value strings into joins,
            # after which each use of a parsed coordinate read the raw text again (10x slower)
            con.execute("SET enable_progress_bar = true; SET enable_progress_bar_print = false; "
                        "SET disabled_optimizers = 'in_clause'")
            con.execute(f"CREATE TEMP VIEW src AS SELECT * FROM {rel}")
        except self._duckdb.Error as e:
            con.close()
            raise InputError(f"DuckDB could not read '{src.label}': {common.data_error(e, src)}. Check that the files are "
                             "CSV with a header row or Parquet.") from None
        return con

    def _run(self, con: Any, src: base.Source, query: str, progress: base.Progress, what: str) -> pd.DataFrame:
        """Run ``query`` in a worker thread while this one reports DuckDB's progress."""
        out: dict[str, Any] = {}

        def work() -> None:
            try:
                out["df"] = con.execute(query).fetchdf()
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
                out["err"] = e

        th = threading.Thread(target=work, daemon=True)
        th.start()
        try:
            while th.is_alive():
                th.join(0.25)
                try:
                    p = con.query_progress()
                except Exception:  # noqa: BLE001 - progress is a nicety
                    p = -1
                if p is not None and p >= 0:
                    progress(0.05 + 0.9 * p / 100.0, f"{what}: {p:.0f} %")
        finally:
            if th.is_alive():  # interrupted (a Streamlit rerun, Ctrl-C): stop the query, not just its wait
                con.interrupt()
                th.join()
        if "err" in out:
            e = out["err"]
            if isinstance(e, self._duckdb.Error):
                raise InputError(f"DuckDB could not read the input: {common.data_error(e, src)}.") from None
            raise e
        return out["df"]

    @contextlib.contextmanager
    def _session(self, src: base.Source) -> Iterator[Any]:
        """A connection with the ``src`` view; DuckDB's own errors become an InputError naming the input."""
        con = self._connect(src)
        try:
            yield con
        except DPCoreError:
            raise
        except self._duckdb.Error as e:
            raise InputError(f"DuckDB could not aggregate '{src.label}': {common.data_error(e, src)}.") from None
        finally:
            con.close()

    def _types(self, con: Any) -> dict[str, str]:
        rows = con.execute("DESCRIBE SELECT * FROM src").fetchall()
        return {str(r[0]): _kind(str(r[1])) for r in rows}

    # -------------------------------------------------------------------------------- interface

    def columns(self, src: base.Source) -> list[str]:
        with self._session(src) as con:
            return list(self._types(con))

    def head(self, src: base.Source, n: int = 1000) -> pd.DataFrame:
        with self._session(src) as con:
            return con.execute(f"SELECT * FROM src LIMIT {int(n)}").fetchdf()

    def points(self, src: base.Source, grid: Grid, *, lat: str, lon: str, user: str | None = None,
               user_cap: int | None = None, progress: base.ProgressCallback | None = None,
               fingerprint: bool = True, drop_unreadable: bool = False) -> base.PointCounts:
        base.check_point_options(user, user_cap)
        prog = base.Progress(progress)
        prog(0.0, f"Opening {src.label}")
        t0 = time.perf_counter()
        with self._session(src) as con:
            types = self._types(con)
            common.check_point_columns(list(types), lat, lon, user, src.label)
            cols = ((lat, types[lat]), (lon, types[lon]), (user, types[user]) if user else None)
            q = sql.point_rows_query(sql.DUCKDB, *cols, user_cap)
            # PointTally(..., tolerant=True) adds the rounded keys' sums (issue 26 item 12) to the exact ones
            tally = common.PointTally(grid, fingerprint, tolerant=True)
            self._stream(con, src, q, prog, f"Counting points with DuckDB ({src.label})", tally)
            sums = tally.fingerprint_values
            return common.point_result(tally.groups(), grid, user, user_cap, self.name, src.label,
                                       lambda which: con.execute(sql.point_examples_query(
                                           sql.DUCKDB, cols[0], cols[1], which)).fetchdf(),
                                       lat, lon, prog, t0, (lambda: sums) if sums is not None else None,
                                       drop_unreadable)

    def _stream(self, con: Any, src: base.Source, query: str, progress: base.Progress, what: str,
                tally: common.PointTally) -> None:
        """Stream ``query``'s rows as Arrow batches into ``tally`` (one scan; memory: one batch),
        reporting DuckDB's progress between batches."""
        try:
            reader = con.sql(query).to_arrow_reader(BATCH_ROWS)
            for batch in reader:
                cols = [batch.column(i).to_numpy(zero_copy_only=False) for i in range(batch.num_columns)]
                tally.add(*cols)
                p = con.query_progress()
                if p is not None and p >= 0:
                    progress(0.05 + 0.9 * p / 100.0, f"{what}: {p:.0f} %")
        except self._duckdb.Error as e:
            raise InputError(f"DuckDB could not read the input: {common.data_error(e, src)}.") from None

    def code_counts(self, src: base.Source, keys: list[str], *, count: str | None = None, user: str | None = None,
                    cap: int | None = None, distinct: bool = False,
                    progress: base.ProgressCallback | None = None, drop_missing: bool = False) -> base.CodeCounts:
        base.check_code_options(keys, count, user, cap)
        prog = base.Progress(progress)
        with self._session(src) as con:
            types = self._types(con)
            common.check_code_columns(list(types), keys, count, user, src.label)
            q = sql.code_counts_query(sql.DUCKDB, [(k, types[k]) for k in keys],
                                      (count, types[count]) if count else None,
                                      (user, types[user]) if user else None, cap, distinct)
            df = self._run(con, src, q, prog, f"Counting rows with DuckDB ({src.label})")
            return common.code_result(df, keys, count, user, cap, self.name, src.label, prog, drop_missing)


_SPILL: list[str] = []


def _spill_dir() -> str:
    """One private (mode 0700) folder per process for DuckDB's spill files: they hold confidential
    rows, so the folder is removed when the process ends (it was left behind before)."""
    if not _SPILL:
        folder = tempfile.mkdtemp(prefix="dpcore-duckdb-")
        atexit.register(shutil.rmtree, folder, True)
        _SPILL.append(folder)
    return _SPILL[0]


def _kind(duck_type: str) -> str:
    t = duck_type.upper()
    if t in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
             "UBIGINT", "UHUGEINT"):
        return "integer"
    if t in ("FLOAT", "DOUBLE", "REAL") or t.startswith("DECIMAL"):
        return "number"
    if t == "BOOLEAN":
        return "boolean"
    return "text"




