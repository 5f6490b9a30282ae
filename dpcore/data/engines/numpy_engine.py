"""numpy/pandas: the in-memory engine for inputs that fit in memory (the app's uploads).

It is the reference the other engines are tested against: points go through the same readers
and validation as an upload (:func:`dpcore.data.tables.read_table`, :func:`dpcore.data.points.load_points`) and the
same :func:`dpcore.data.domain.aggregate_points`.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from dpcore.data import persons
from dpcore.data.code_tables import code_text, read_code_table
from dpcore.data.domain import Grid, aggregate_points
from dpcore.data.engines import base, common
from dpcore.data.points import PointTable, load_points
from dpcore.data.tables import read_table


class NumpyEngine:
    name = "numpy"

    def _read(self, src: base.Source, progress: base.Progress, codes: bool = False) -> pd.DataFrame:
        frames = []
        for i, p in enumerate(src.paths):
            def part(frac: float, msg: str, i: int = i) -> None:
                progress(0.8 * (i + frac) / len(src.paths), msg)
            frames.append(read_code_table(p) if codes else read_table(p, progress=part))
            part(1.0, f"Read {i + 1} of {len(src.paths)} files")
        return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)

    @staticmethod
    def _text_column(src: base.Source, col: str) -> pd.Series:
        sep = common.csv_delimiter(src)
        enc = common.csv_encoding(src)
        comp = "gzip" if common.csv_gzipped(src) else None
        parts = [pd.read_csv(p, sep=sep, usecols=lambda c: str(c).strip() == col, dtype=str, encoding=enc,
                             keep_default_na=True, index_col=False, compression=comp).iloc[:, 0] for p in src.paths]
        return pd.concat(parts, ignore_index=True)

    def columns(self, src: base.Source) -> list[str]:
        return [str(c) for c in self.head(src, 5).columns]

    def head(self, src: base.Source, n: int = 1000) -> pd.DataFrame:
        return read_table(src.paths[0], max_rows=n)

    def points(self, src: base.Source, grid: Grid, *, lat: str, lon: str, user: str | None = None,
               user_cap: int | None = None, progress: base.ProgressCallback | None = None,
               fingerprint: bool = True, drop_unreadable: bool = False) -> base.PointCounts:
        base.check_point_options(user, user_cap)
        prog = base.Progress(progress)
        t0 = time.perf_counter()
        df = self._read(src, prog)
        common.check_point_columns([str(c) for c in df.columns], lat, lon, user, src.label)
        if user is not None and src.fmt == "csv" and pd.api.types.is_float_dtype(df[user].dtype):
            # pandas reads whole-number ids with a blank as float64, which merges ids above 2^53;
            # the ids are read again as text, as the SQL engines read them
            df[user] = self._text_column(src, user)
        table = load_points(df, lat, lon, user, source_name=src.label, drop_unreadable=drop_unreadable)
        return self.points_of_table(table, grid, user_cap, prog, t0, fingerprint)

    def points_of_table(self, table: PointTable, grid: Grid, user_cap: int | None,
                        prog: base.Progress | None = None, t0: float | None = None,
                        fingerprint: bool = True) -> base.PointCounts:
        """The answer for points already read and validated (an upload held by the app)."""
        prog = prog or base.Progress(None)
        t0 = time.perf_counter() if t0 is None else t0
        use_user = table.user is not None
        agg = aggregate_points(table.lon, table.lat, grid, user=table.user if use_user else None,
                               user_cap=user_cap if use_user else None)
        fp = base.points_fingerprint(table.lon, table.lat) if fingerprint else ""
        keys = tuple(base.tolerant_points_fingerprints(table.lon, table.lat, grid.bounds)) if fingerprint else ()
        prog(1.0, f"Counted the rows in memory in {time.perf_counter() - t0:.1f} s")  # never their number: logs
        return base.PointCounts(agg, table.n_read, dict(table.dropped), fp, self.name, keys)

    def code_counts(self, src: base.Source, keys: list[str], *, count: str | None = None, user: str | None = None,
                    cap: int | None = None, distinct: bool = False,
                    progress: base.ProgressCallback | None = None, drop_missing: bool = False) -> base.CodeCounts:
        base.check_code_options(keys, count, user, cap)
        prog = base.Progress(progress)
        df = self._read(src, prog, codes=True)
        common.check_code_columns([str(c) for c in df.columns], keys, count, user, src.label)
        return code_counts_of_frame(df, keys, count=count, user=user, cap=cap, distinct=distinct,
                                    label=src.label, engine=self.name, prog=prog, drop_missing=drop_missing)


def code_counts_of_frame(df: pd.DataFrame, keys: list[str], *, count: str | None = None, user: str | None = None,
                         cap: int | None = None, distinct: bool = False, label: str = "the table",
                         engine: str = "numpy", prog: base.Progress | None = None,
                         drop_missing: bool = False) -> base.CodeCounts:
    """:meth:`NumpyEngine.code_counts` of a table already in memory."""
    prog = prog or base.Progress(None)
    frame = pd.DataFrame({k: code_text(df[k]).to_numpy(dtype=object) for k in keys})
    bad_key = np.zeros(len(df), dtype=bool)
    for k in keys:
        v = frame[k]
        bad_key |= (v.isna() | (v.astype(str) == "")).to_numpy()
    bad_w = np.zeros(len(df), dtype=bool)
    if count is not None:
        c = pd.to_numeric(df[count].astype(object).map(lambda x: x.strip() if isinstance(x, str) else x),
                          errors="coerce").to_numpy(dtype=float)
        bad_w = ~np.isfinite(c) | (c < 0) | (c != np.floor(c)) | (c > 9e15)
        frame["w"] = np.where(bad_w, 0, np.nan_to_num(c)).astype(np.int64)
    else:
        frame["w"] = np.ones(len(df), dtype=np.int64)
    bad_u = np.zeros(len(df), dtype=bool)
    if user is not None:
        frame["u"] = persons.canonical_id(df[user])
        bad_u = frame["u"].isna().to_numpy()
    n_missing = int(bad_key.sum())
    common.problems(0 if drop_missing else n_missing, int((bad_w & ~bad_key).sum()),
                    int((bad_u & ~bad_key & ~bad_w).sum()), keys, count, user, label)
    if drop_missing and n_missing:
        frame = frame.loc[~bad_key].reset_index(drop=True)
    if user is not None and cap is not None:
        out = base.cap_groups(frame, keys, int(cap), distinct)
    else:
        out = frame.groupby(keys, sort=False)["w"].sum().rename("count").reset_index()
        out["count_all"] = out["count"]
    out = common.finish_frame(out, keys)
    n_capped = int(out["count_all"].sum() - out["count"].sum()) if user is not None else 0
    prog(1.0, "Counted the rows in memory")  # never their number: progress lines end up in logs
    return base.CodeCounts(out, tuple(keys), len(df), n_capped, engine, n_missing if drop_missing else 0)
