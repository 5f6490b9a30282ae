"""What the SQL engines share after their query: checks, error messages, and turning the small
grouped result into the answer (:class:`~dpcore.data.engines.base.PointCounts` or
:class:`~dpcore.data.engines.base.CodeCounts`)."""

from __future__ import annotations

import gzip
import os
import re
import time
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from dpcore.data.domain import Aggregate, Grid
from dpcore.data.engines import base, sql
from dpcore.data.points import (
    DROP_MISSING_COORDINATE,
    DROP_MISSING_USER,
    DROP_UNREADABLE_COORDINATE,
    UnreadableCoordinates,
    none_readable,
)
from dpcore.data.text import SNIFF_BYTES, sniff_delimiter
from dpcore.errors import InputError, curator_only, curator_only_if_numbered
from dpcore.privacy.near_match import Profile


def first_line(e: BaseException) -> str:
    """The first line of an engine's error (their messages carry the reason in text), shortened."""
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


def data_error(e: BaseException, src: base.Source) -> str:
    """:func:`first_line` of an engine's error while it read ``src``, marked curator-only when it
    holds a number (:func:`~dpcore.errors.curator_only_if_numbered`): the engines' texts name a
    file's line (``CSV Error on Line: 1102``) or quote a row's value (``'12/05/2024'``), numbers of
    the private data.  Only ``src``'s own paths and label are left out before looking, never other
    quoted text: a row's value may hold a "/" too.

    >>> src = base.Source(("/data/2024/p.csv",), "csv", "/data/2024/p.csv")
    >>> data_error(ValueError("Conversion Error: CSV Error on Line: 1102"), src)
    'curator only, not for publication: Conversion Error: CSV Error on Line: 1102'
    >>> data_error(ValueError('IO Error: No files found that match "/data/2024/p.csv"'), src)
    'IO Error: No files found that match "/data/2024/p.csv"'
    >>> data_error(ValueError("Could not convert string '12/05/2024' to DOUBLE"), src)
    "curator only, not for publication: Could not convert string '12/05/2024' to DOUBLE"
    """
    # as given, absolute (Spark names "file:/abs/p.csv"), and as quoted in DuckDB's SQL
    own = {src.label, *src.paths, *(os.path.abspath(p) for p in src.paths), *(p.replace("'", "''") for p in src.paths)}
    return curator_only_if_numbered(first_line(e), own)


def csv_delimiter(src: base.Source) -> str:
    """The delimiter of the first file, found the way the in-memory reader finds it."""
    with open(src.paths[0], "rb") as fh:
        head = fh.read(SNIFF_BYTES)
    if head[:2] == b"\x1f\x8b":
        with gzip.open(src.paths[0], "rb") as gz:
            head = gz.read(SNIFF_BYTES)
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    # drop a last line cut in the middle
    text = text[: text.rfind("\n") + 1] if "\n" in text and len(head) >= SNIFF_BYTES else text
    sep = sniff_delimiter(text, None)  # noqa: SLF001 - the same sniffing as the in-memory reader
    if sep is None:
        raise InputError(f"'{src.label}': the first file has a single column; a CSV needs latitude and "
                         "longitude (or code) columns separated by commas, semicolons, tabs or bars.")
    return sep


def csv_gzipped(src: base.Source) -> bool:
    """Whether the first file is gzip by its content (the in-memory reader looks at the bytes, not
    the name, so the engines must too)."""
    with open(src.paths[0], "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def csv_encoding(src: base.Source) -> str:
    """``utf-8``, or ``latin-1`` when the first file's head is not UTF-8 (the in-memory reader
    falls back the same way)."""
    with open(src.paths[0], "rb") as fh:
        head = fh.read(SNIFF_BYTES)
    if head[:2] == b"\x1f\x8b":
        with gzip.open(src.paths[0], "rb") as gz:
            head = gz.read(SNIFF_BYTES)
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 4:  # not just a character cut at the end of the sample
            return "latin-1"
    return "utf-8"


def _missing_columns(available: list[str], wanted: list[tuple[str | None, str]], label: str) -> None:
    for col, role in wanted:
        if col is not None and col not in available:
            cols = ", ".join(available[:20]) + (" …" if len(available) > 20 else "")
            raise InputError(f"'{label}' has no {role} column '{col}'. Its columns are: {cols}.")


def check_point_columns(available: list[str], lat: str, lon: str, user: str | None, label: str) -> None:
    _missing_columns(available, [(lat, "latitude"), (lon, "longitude"), (user, "user id")], label)
    if lat == lon:
        raise InputError(f"Column '{lat}' was chosen for both latitude and longitude. Choose two different columns.")
    if user is not None and user in (lat, lon):
        raise InputError(f"Column '{user}' was chosen both as a coordinate and as the user id. Choose a user-id "
                         "column that is neither the latitude nor the longitude column.")


def check_code_columns(available: list[str], keys: list[str], count: str | None, user: str | None,
                       label: str) -> None:
    _missing_columns(available, [(k, "code") for k in keys] + [(count, "count"), (user, "person id")], label)


def point_result(df: pd.DataFrame, grid: Grid, user: str | None, user_cap: int | None, engine: str,
                 label: str, examples: Callable[[str], pd.DataFrame], lat: str, lon: str,
                 prog: base.Progress, t0: float,
                 fingerprint: Callable[[], Sequence[int]] | None,
                 drop_unreadable: bool = False) -> base.PointCounts:
    """Assemble the answer from the ``points_query`` groups (status, cell, kept, n); ``fingerprint``
    runs the ``fingerprint_query`` (exact integer sums) when the budget key is wanted: ``(n, s1, s2)``,
    then with the grid's bounds the tolerant keys' sums ``(q1, q2, ni, i1, i2)``.

    With ``drop_unreadable`` the rows whose coordinate is text that is not a number (status
    ``ST_BAD_TEXT``, never valid) are counted under ``"coordinate not a number"`` instead of refused,
    as :func:`dpcore.data.points.load_points` does, unless one of them is a decimal comma
    (``examples("comma")``): the in-memory engine reads those, so leaving them out here would keep
    other rows than it; they are refused as without the option."""
    st = df["st"].to_numpy(dtype=np.int64)
    cell = df["cell"].to_numpy(dtype=np.int64)
    kept = df["kept"].to_numpy(dtype=bool)
    n = df["n"].to_numpy(dtype=np.int64)
    by_st = {int(s): int(n[st == s].sum()) for s in np.unique(st)}
    n_unreadable, commas = 0, False
    if drop_unreadable and by_st.get(sql.ST_BAD_TEXT):
        commas = not examples("comma").empty
        if not commas:
            n_unreadable = by_st.pop(sql.ST_BAD_TEXT)
    for code, which, what in ((sql.ST_BAD_TEXT, "text", "not a number"),
                              (sql.ST_INFINITE, "infinite", "infinite"),
                              (sql.ST_BAD_RANGE, "range", "outside -90..90 (latitude) or -180..180 (longitude)")):
        if by_st.get(code):
            ex = examples(which)
            shown = "; ".join(f"{lat}={a!s}, {lon}={b!s}" for a, b in zip(ex["lat"], ex["lon"], strict=False))
            hint = (" Check that latitude and longitude are not swapped, and that they are degrees (WGS84)."
                    if which == "range" else " Fix or remove those rows.")
            decimal_commas = which == "text" and (commas or any(re.fullmatch(r"\s*[-+]?\d+,\d+\s*", str(v))
                                                                  for v in [*ex["lat"], *ex["lon"]]))
            if decimal_commas:
                hint = (" These look like decimal commas: DuckDB and Spark read decimal points only. Convert the "
                        "file, or use the in-memory engine (--engine numpy), which reads decimal commas.")
            text = curator_only(f"'{label}' has {by_st[code]:,} rows whose '{lat}' or '{lon}' is {what} "
                                f"(e.g. {shown}).{hint}")
            if which == "text" and not decimal_commas:  # decimal commas: the option refuses them too
                raise UnreadableCoordinates(text, by_st[code])
            raise InputError(text)
    n_read = int(n.sum())
    dropped: dict[str, int] = {}
    if n_unreadable:
        dropped[DROP_UNREADABLE_COORDINATE] = n_unreadable
    if by_st.get(sql.ST_MISSING_COORD):
        dropped[DROP_MISSING_COORDINATE] = by_st[sql.ST_MISSING_COORD]
    if by_st.get(sql.ST_MISSING_USER):
        dropped[DROP_MISSING_USER] = by_st[sql.ST_MISSING_USER]
    ok = st == sql.ST_OK
    if not ok.any():
        if n_read == 0:
            raise InputError(f"'{label}' has no data rows. Give a table with at least one row of coordinates.")
        if n_unreadable:
            raise none_readable(f"'{label}'", n_read, n_unreadable, lat, lon)
        raise InputError(curator_only(f"'{label}' has no rows with both coordinates" + (" and a user id" if user else "")
                         + f": all {n_read:,} data rows miss one. Check that you chose the right columns."))
    inside = ok & kept & (cell >= 0)
    counts = np.bincount(cell[inside], weights=n[inside], minlength=grid.n_cells)
    counts = np.rint(counts).astype(np.int64).reshape(grid.shape)
    agg = Aggregate(
        grid=grid, counts=counts,
        n_outside=int(n[ok & kept & (cell == -1)].sum()),
        n_capped=int(n[ok & ~kept].sum()),
        sensitivity=int(user_cap) if user is not None else 1,
        user_cap=int(user_cap) if user is not None else None,
    )
    fp, keys = "", ()
    if fingerprint is not None:
        prog(0.97, "Fingerprinting the points (the budget key)")
        values = list(fingerprint())
        sums = [int(v or 0) for v in values[:8]]
        fp = base.point_fingerprint(*sums[:3])
        keys = tuple(base.tolerant_keys_of_sums((sums[0], *sums[3:5]), tuple(sums[5:8])) if len(sums) >= 8 else ())
        # the valid points' extent (west, south, east, north) after the sums: the near-match profile
        extent = tuple(float(v) for v in values[8:12]) if len(values) >= 12 and sums[0] else None
        profile = Profile("points", tuple(c for c in (lat, lon, user) if c), sums[0], extent)
    else:
        profile = None
    prog(1.0, f"Counted the rows with {engine} in {time.perf_counter() - t0:.1f} s")  # never their number: logs
    return base.PointCounts(agg, n_read, dropped, fp, engine, keys, profile)


class PointTally:
    """Sums over the rows of :func:`dpcore.data.engines.sql.point_rows_query`, streamed in batches.

    Each batch's valid rows (``st`` 0, and ``kept`` under a cap) are binned with the grid's own
    :meth:`Grid.cell_index` (the in-memory path's function, so the cells are the same by
    construction), the other rows counted by status, and with ``fingerprint`` the budget key's
    exact integer sums (:func:`base.fingerprint_sums`, Python ints) added over every valid row.
    Memory: the grid's counts and one batch.

    >>> import numpy as np
    >>> from dpcore.data.domain import Bounds, Grid
    >>> t = PointTally(Grid(Bounds(0.0, 0.0, 2.0, 2.0), 2, 2), fingerprint=False)
    >>> t.add(np.array([0.5, 1.5, 3.0, np.nan]), np.array([0.5, 1.5, 0.5, 1.0]), np.array([0, 0, 0, 1]))
    >>> t.counts.tolist(), t.n_outside, t.by_st[:2].tolist()
    ([1, 0, 0, 1], 1, [3, 1])
    """

    def __init__(self, grid: Grid, fingerprint: bool, tolerant: bool = False) -> None:
        self.grid = grid
        self.counts = np.zeros(grid.n_cells, dtype=np.int64)
        self.by_st = np.zeros(8, dtype=np.int64)
        self.n_outside = 0
        self.n_capped = 0
        self.sums = [0, 0, 0] if fingerprint else None
        #: with ``tolerant``, the sums also hold the tolerant keys' ``(q1, q2, ni, i1, i2)``: the
        #: fingerprint hashes of the coordinates rounded to ``base.KEY_DECIMALS`` decimals over every
        #: valid row, then the count and hashes over those inside the bounds
        #: (:func:`base.tolerant_points_fingerprints` computes the same from points in memory)
        self.tolerant = bool(fingerprint and tolerant)
        if self.tolerant:
            self.sums += [0, 0, 0, 0, 0]
        #: the valid points' (west, south, east, north) with ``tolerant`` (the near-match profile)
        self.extent = [np.inf, np.inf, -np.inf, -np.inf]

    def add(self, x: np.ndarray, y: np.ndarray, st: np.ndarray, kept: np.ndarray | None = None) -> None:
        st = np.asarray(st, dtype=np.int64)
        self.by_st += np.bincount(st, minlength=self.by_st.size)  # the statuses are sql.ST_*: 0..5
        ok = st == sql.ST_OK
        if self.sums is not None:
            s1, s2 = base.fingerprint_sums(x[ok], y[ok])
            self.sums[0] += int(ok.sum())
            self.sums[1] += s1
            self.sums[2] += s2
            if self.tolerant:
                self._add_tolerant(x[ok], y[ok])
        if kept is not None:
            self.n_capped += int((ok & ~kept).sum())
            ok &= kept
        row, col, inside = self.grid.cell_index(x[ok], y[ok])
        self.n_outside += int((~inside).sum())
        self.counts += np.bincount(row[inside] * self.grid.cols + col[inside], minlength=self.grid.n_cells)

    @property
    def fingerprint_values(self) -> list[float] | None:
        """The sums, then with ``tolerant`` the valid points' extent (what ``point_result`` reads)."""
        if self.sums is None:
            return None
        return [*self.sums, *self.extent] if self.tolerant else list(self.sums)

    def _add_tolerant(self, x: np.ndarray, y: np.ndarray) -> None:
        if x.size:
            e = self.extent
            e[:] = [min(e[0], float(x.min())), min(e[1], float(y.min())), max(e[2], float(x.max())),
                    max(e[3], float(y.max()))]
        scale = 10.0**base.KEY_DECIMALS
        qx, qy = np.floor(x * scale + 0.5) / scale, np.floor(y * scale + 0.5) / scale
        b = self.grid.bounds
        inside = (x >= b.west) & (x <= b.east) & (y >= b.south) & (y <= b.north)
        q1, q2 = base.fingerprint_sums(qx, qy)
        i1, i2 = base.fingerprint_sums(qx[inside], qy[inside])
        for j, v in enumerate((q1, q2, int(inside.sum()), i1, i2), start=3):
            self.sums[j] += v

    def groups(self) -> pd.DataFrame:
        """The tallies as the ``(st, cell, kept, n)`` groups of :func:`point_result`."""
        cells = np.flatnonzero(self.counts)
        bad = np.flatnonzero(self.by_st[1:]) + 1
        df = pd.DataFrame({
            "st": np.concatenate([np.zeros(cells.size + 2, dtype=np.int64), bad]),
            "cell": np.concatenate([cells, [-1, -2], np.full(bad.size, -2)]).astype(np.int64),
            "kept": np.concatenate([np.ones(cells.size + 1, dtype=bool), np.zeros(1 + bad.size, dtype=bool)]),
            "n": np.concatenate([self.counts[cells], [self.n_outside, self.n_capped], self.by_st[bad]]).astype(np.int64),
        })
        return df.loc[df["n"] > 0].reset_index(drop=True)  # no valid row: no (0, ...) group


def code_result(df: pd.DataFrame, keys: list[str], count: str | None, user: str | None, cap: int | None,
                engine: str, label: str, prog: base.Progress, drop_missing: bool = False) -> base.CodeCounts:
    """Assemble the answer from the ``code_counts_query`` groups (rows with a missing code are
    refused, or with ``drop_missing`` left out and counted)."""
    bk = df["bk"].astype(bool).to_numpy()
    bw = df["bw"].astype(bool).to_numpy()
    bu = df["bu"].astype(bool).to_numpy()
    n = df["n"].to_numpy(dtype=np.int64)
    n_missing = int(n[bk].sum())
    problems(0 if drop_missing else n_missing, int(n[bw & ~bk].sum()), int(n[bu & ~bk & ~bw].sum()), keys, count,
             user, label)
    good = df.loc[~(bk | bw | bu)]
    frame = finish_frame(good.rename(columns={f"k{i}": k for i, k in enumerate(keys)}), keys)
    n_capped = int(frame["count_all"].sum() - frame["count"].sum()) if user is not None else 0
    prog(1.0, f"Counted the rows with {engine}")  # never their number: progress lines end up in logs
    return base.CodeCounts(frame, tuple(keys), int(n.sum()), n_capped, engine, n_missing if drop_missing else 0)


def problems(n_key: int, n_count: int, n_user: int, keys: list[str], count: str | None, user: str | None,
             label: str) -> None:
    """Refuse rows without a code, with a bad count or without a person id (their number)."""
    if n_key:
        raise InputError(curator_only(f"'{label}': {n_key:,} rows have no code in {', '.join(repr(k) for k in keys)}. "
                         "Fill the codes or drop those rows."))
    if n_count:
        raise InputError(curator_only(f"'{label}': the count column '{count}' has {n_count:,} values that are not whole "
                         "numbers ≥ 0 (or are missing). Fix or drop those rows."))
    if n_user:
        raise InputError(curator_only(f"'{label}': the person id column '{user}' is empty in {n_user:,} rows. "
                         "Fill it or drop those rows."))


def finish_frame(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Key columns as str, counts as int64, sorted by the keys.  Rows whose count is 0 stay: a
    census table lists empty areas, and the area list may be read from it."""
    out = pd.DataFrame({k: frame[k].astype(str).to_numpy(dtype=object) for k in keys})
    out["count"] = frame["count"].to_numpy(dtype=np.int64)
    out["count_all"] = frame["count_all"].to_numpy(dtype=np.int64)
    return out.sort_values(keys, kind="stable").reset_index(drop=True)
