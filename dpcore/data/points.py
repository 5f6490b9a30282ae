"""Validated point tables: from an uploaded file to longitudes, latitudes and user ids.

Data flows one way (see DESIGN.md): an uploaded file becomes a validated :class:`PointTable`,
which the engines turn into a frequency matrix.  :func:`load_points_file` reads the file
(:func:`dpcore.data.tables.read_table`), finds the coordinate and user-id columns by name
(:mod:`dpcore.data.columns`) and :func:`load_points` checks the coordinates.

Every problem a person can fix raises :class:`~dpcore.errors.InputError` whose message names
the file or column, says how many rows are affected and which ones (1-based *data* rows, the
header not counted), shows a few example values and says what to do.  Rows with a missing
coordinate or user id are not errors: they are dropped and counted in
:attr:`PointTable.dropped` so that the app can show "rows dropped and why".  Rows
whose coordinate is text that is not a number are refused
(:class:`UnreadableCoordinates`) unless the curator asks to leave them out
(``drop_unreadable``).

Nothing here prints or logs.  The few example values quoted in error messages go only to the
curator who uploaded the file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from dpcore.data.columns import detect_coordinate_columns
from dpcore.data.tables import read_table
from dpcore.data.text import WHITESPACE, DataSource, ProgressCallback
from dpcore.errors import InputError, curator_only

__all__ = [
    "DROP_MISSING_COORDINATE",
    "DROP_MISSING_USER",
    "DROP_UNREADABLE_COORDINATE",
    "PointTable",
    "UnreadableCoordinates",
    "load_points",
    "load_points_file",
]

if TYPE_CHECKING:
    pass

DROP_MISSING_COORDINATE = "missing coordinate"
DROP_MISSING_USER = "missing user id"
#: rows whose latitude or longitude is text that is not a number, left out only when the curator asks
#: (``load_points(..., drop_unreadable=True)``, CLI ``--drop-unreadable``); otherwise they are refused
DROP_UNREADABLE_COORDINATE = "coordinate not a number"

_N_EXAMPLES = 5


class UnreadableCoordinates(InputError):
    """Refused: a coordinate is text that is not a number.  The one refusal that
    ``drop_unreadable=True`` turns into dropped rows, so callers can offer that option
    (the CLI's ``--drop-unreadable``, the app's button).  ``rows``: the number of rows the option
    would leave out when the refusal knows it (the DuckDB and Spark engines count them; the in-memory
    check counts one column's values), else None.  Curator-only, like the message."""

    def __init__(self, message: str, rows: int | None = None) -> None:
        super().__init__(message)
        self.rows = rows

    def with_hint(self, hint: str) -> UnreadableCoordinates:
        """The same refusal with ``hint`` after its last sentence ("Fix or remove those rows, or
        ``hint``."), the message's first part unchanged."""
        text = str(self)
        text = text[:-1] if text.endswith(".") else text
        return UnreadableCoordinates(f"{text}, or {hint}.", self.rows)


# --------------------------------------------------------------------------------------
# The validated table
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, repr=False)
class PointTable:
    """Validated points, ready to be aggregated.

    Attributes
    ----------
    lon, lat : numpy.ndarray
        Longitudes and latitudes in decimal degrees (float64, finite, within
        -180..180 and -90..90), one entry per kept row, in file order.
    user : numpy.ndarray or None
        User ids of the kept rows (int64 when the ids are whole numbers, else an
        object array of str), or None when no user column was chosen.
    source_name : str
        File name as uploaded.  Curator-only: never exported.
    lat_column, lon_column, user_column : str or None
        The columns the values came from.
    n_read : int
        Data rows read (the header not counted).
    dropped : dict of str to int
        Reason -> number of rows dropped for it.  Each dropped row is counted
        once, under the first reason that applies ("coordinate not a number",
        only with ``drop_unreadable``, before "missing coordinate" before
        "missing user id"), so ``n_read == n_kept + sum(dropped.values())``.
        Curator-only: never exported.

    Notes
    -----
    ``repr`` shows counts and column names only, never values, so a table that
    ends up in a log does not leak any location.  Equality is identity (arrays
    do not compare as a single bool).
    """

    lon: np.ndarray
    lat: np.ndarray
    user: np.ndarray | None
    source_name: str
    lat_column: str
    lon_column: str
    user_column: str | None
    n_read: int
    dropped: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.lon)
        if len(self.lat) != n or (self.user is not None and len(self.user) != n):
            raise ValueError("PointTable: lon, lat and user must have the same length")

    @property
    def n_kept(self) -> int:
        """Number of rows kept (``len(lon)``)."""
        return int(len(self.lon))

    @property
    def n_dropped(self) -> int:
        """Number of rows dropped, all reasons together."""
        return int(sum(self.dropped.values()))

    def __repr__(self) -> str:
        return (
            f"PointTable(source_name={self.source_name!r}, n_read={self.n_read}, "
            f"n_kept={self.n_kept}, dropped={self.dropped!r}, lat_column={self.lat_column!r}, "
            f"lon_column={self.lon_column!r}, user_column={self.user_column!r})"
        )


# --------------------------------------------------------------------------------------
# Sources: bytes, paths and uploaded file objects
# --------------------------------------------------------------------------------------


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _fmt_value(v: object) -> str:
    if isinstance(v, str):
        return repr(v if len(v) <= 24 else v[:21] + "...")
    if isinstance(v, float | np.floating):
        return f"{float(v):.10g}"
    text = repr(v)
    return text if len(text) <= 24 else text[:21] + "..."


def _where(positions: np.ndarray, values: Sequence[object]) -> str:
    """'data rows 2, 5, 9: 'abc', 'N/A', '4O.7'' for 0-based positions and their values."""
    shown = positions[:_N_EXAMPLES]
    more = len(positions) > _N_EXAMPLES
    rows = ", ".join(str(int(i) + 1) for i in shown) + (", ..." if more else "")
    examples = ", ".join(_fmt_value(v) for v in list(values)[:_N_EXAMPLES]) + (
        ", ..." if more else ""
    )
    word = "data row" if len(positions) == 1 else "data rows"
    return f"{word} {rows}: {examples}"


def _check_column(df: pd.DataFrame, col: object, role: str) -> None:
    columns = list(df.columns)
    if col not in columns:
        near = [c for c in columns if str(c).strip().lower() == str(col).strip().lower()]
        hint = f" Did you mean '{near[0]}'?" if near else ""
        raise InputError(
            f"There is no column '{col}' for the {role} (columns: {_list_columns(columns)}).{hint} "
            "Choose one of the columns listed."
        )
    if columns.count(col) > 1:
        raise InputError(
            f"There are {columns.count(col)} columns named '{col}'. Rename them so that each "
            f"name is used once, then choose the {role} column again."
        )


def _list_columns(columns: Sequence[object], limit: int = 20) -> str:
    shown = ", ".join(str(c) for c in columns[:limit])
    if len(columns) > limit:
        shown += f", ... ({len(columns) - limit:,} more)"
    return shown or "none"


_DECIMAL_COMMA = re.compile(r"^[+-]?(\d+,\d*|,\d+)$")


def _numeric_column(s: pd.Series, col: object,
                    unreadable: np.ndarray | None = None) -> np.ndarray:
    """Coordinates as float64 with NaN for missing ones; InputError for text values.

    Missing: NaN/None/NA, empty or blank strings and the string 'nan'.  Numbers
    written with a decimal comma ('40,71') are accepted when every value that
    does not parse has that form: a coordinate cannot have a thousands separator.

    With ``unreadable`` (a bool array, one entry per row), text that is not a
    number is not refused: its rows are marked True there and their value is
    NaN.  Decimal commas are read as without it, the marked values set aside.
    """
    dtype = s.dtype
    if pd.api.types.is_bool_dtype(dtype):
        raise InputError(
            f"Column '{col}' holds true/false values, not coordinates. Choose the column "
            "that holds the coordinates in decimal degrees."
        )
    if pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_complex_dtype(dtype):
        # a copy: the table must not share (read-only, copy-on-write) memory with df
        return np.array(s.to_numpy(dtype=np.float64, na_value=np.nan), copy=True)
    if not (
        pd.api.types.is_object_dtype(dtype)
        or pd.api.types.is_string_dtype(dtype)
        or isinstance(dtype, pd.CategoricalDtype)
    ):
        raise InputError(
            f"Column '{col}' holds values of type {dtype} (dates or times?), not coordinates. "
            "Choose the column that holds the coordinates in decimal degrees."
        )
    if isinstance(dtype, pd.CategoricalDtype):
        s = s.astype(object)
    values = np.array(
        pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan), copy=True
    )
    failed = np.flatnonzero(np.isnan(values) & s.notna().to_numpy())
    if failed.size == 0:
        return values
    # Second chance for the few values pandas could not parse: surrounding spaces,
    # blanks (missing, not text) and decimal commas.
    originals = s.iloc[failed]
    stripped = originals.astype(object).map(str).str.strip(WHITESPACE)
    lowered = stripped.str.lower()
    blank = ((stripped == "") | lowered.isin(("nan", "+nan", "-nan"))).to_numpy()
    reparsed = np.array(
        pd.to_numeric(stripped, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan),
        copy=True,
    )
    text = np.isnan(reparsed) & ~blank
    if unreadable is not None and text.any():
        # only text that is neither a number nor a decimal comma is left out; the commas are read
        # by the rule below, as they are without the option
        aside = text & ~stripped.str.match(_DECIMAL_COMMA).to_numpy(dtype=bool)
        unreadable[failed[aside]] = True
        blank = blank | aside  # NaN, and no longer refused
        text &= ~aside
    if text.any() and stripped[text].str.match(_DECIMAL_COMMA).all():
        fixed = stripped[text].str.replace(",", ".", regex=False)
        reparsed[text] = pd.to_numeric(fixed, errors="coerce").to_numpy(
            dtype=np.float64, na_value=np.nan
        )
        text = np.isnan(reparsed) & ~blank
    if text.any():
        bad = failed[text]
        raise UnreadableCoordinates(
            curator_only(f"Column '{col}' has {_plural(int(bad.size), 'value')} that "
            f"{'is not a number' if bad.size == 1 else 'are not numbers'} "
            f"({_where(bad, originals.to_numpy()[text])}). Fix or remove those rows.")
        )
    values[failed] = reparsed
    return values


def _check_finite(values: np.ndarray, col: object) -> None:
    bad = np.flatnonzero(np.isinf(values))
    if bad.size:
        raise InputError(
            curator_only(f"Column '{col}' has {_plural(int(bad.size), 'infinite value')} "
            f"({_where(bad, values[bad])}). Replace them with the real coordinates or "
            "remove those rows.")
        )


def _check_ranges(lat: np.ndarray, lon: np.ndarray, lat_col: object, lon_col: object) -> None:
    # NaN compares False, so missing values are never out of range.
    with np.errstate(invalid="ignore"):
        swap_ok = not (np.abs(lat) > 180).any() and not (np.abs(lon) > 90).any()
        for values, col, limit, word in (
            (lat, lat_col, 90, "latitude"),
            (lon, lon_col, 180, "longitude"),
        ):
            bad = np.flatnonzero(np.abs(values) > limit)
            if bad.size == 0:
                continue
            if swap_ok:
                hint = (
                    "Check that latitude and longitude are not swapped: choose "
                    f"'{lon_col}' as latitude and '{lat_col}' as longitude."
                )
            elif np.abs(values[bad]).max() > 1000:
                hint = (
                    "These look like projected coordinates (for example metres), not degrees: "
                    "convert them to longitude/latitude (WGS84, EPSG:4326) before uploading."
                )
            else:
                hint = (
                    f"Check that '{col}' is the {word} column in decimal degrees, then fix or "
                    "remove those rows."
                )
            raise InputError(
                curator_only(f"Column '{col}' has {_plural(int(bad.size), 'value')} outside "
                f"{-limit}..{limit} ({_where(bad, values[bad])}). {hint}")
            )


def _user_ids(s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, missing)``: int64 ids when they are whole numbers, else stripped str."""
    dtype = s.dtype
    if pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
        values = s.to_numpy(dtype=np.float64, na_value=np.nan)
        missing = np.isnan(values)
        if pd.api.types.is_unsigned_integer_dtype(dtype) and (s.dropna() > np.iinfo(np.int64).max).any():
            # above int64: keep them exact as text (an int64 cast would wrap them around)
            return s.astype(object).map(lambda v: str(int(v)) if pd.notna(v) else None).to_numpy(dtype=object), missing
        if pd.api.types.is_integer_dtype(dtype):
            return s.to_numpy(dtype=np.int64, na_value=0), missing
        present = values[~missing]
        if present.size and np.abs(present[np.isfinite(present)]).max(initial=0) >= 2**53 and \
                np.all(present[np.isfinite(present)] == np.round(present[np.isfinite(present)])):
            raise InputError(
                "The person ids are whole numbers of more than 15 digits, and some rows have none, so they were "
                "read as decimal numbers, which cannot hold them exactly: different people could be merged. "
                "Fill or drop the rows without an id, or write the ids with a letter prefix so they are read "
                "as text."
            )
        if (
            np.all(np.isfinite(present))
            and np.all(present == np.round(present))
            and (present.size == 0 or np.abs(present).max() < 2**53)
        ):
            return np.where(missing, 0, values).astype(np.int64), missing
        text = s.astype(object).map(str).to_numpy(dtype=object)
        return text, missing
    stripped = s.astype("string").str.strip(WHITESPACE)
    missing = (stripped.isna() | (stripped == "")).to_numpy(dtype=bool)
    return stripped.astype(object).where(~missing, None).to_numpy(dtype=object), missing


def _check_chosen_columns(df: pd.DataFrame, lat_col: str, lon_col: str, user_col: str | None) -> None:
    """Check 1 of :func:`load_points`: the chosen columns exist, are used once and are distinct."""
    _check_column(df, lat_col, "latitude")
    _check_column(df, lon_col, "longitude")
    if user_col is not None:
        _check_column(df, user_col, "user id")
    if lat_col == lon_col:
        raise InputError(
            f"Column '{lat_col}' was chosen for both latitude and longitude. Choose two "
            f"different columns (columns: {_list_columns(list(df.columns))})."
        )
    if user_col is not None and user_col in (lat_col, lon_col):
        raise InputError(
            f"Column '{user_col}' was chosen both as a coordinate and as the user id. Choose "
            "a user-id column that is neither the latitude nor the longitude column."
        )


def _rows_with_user(df: pd.DataFrame, user_col: str | None, keep: np.ndarray, dropped: dict[str, int],
                    label: str) -> tuple[np.ndarray | None, np.ndarray]:
    """The user ids of the kept rows and the rows kept once rows without a user id are dropped
    (counted in ``dropped``); ``(None, keep)`` without a user column."""
    if user_col is None:
        return None, keep
    ids, no_user = _user_ids(df[user_col])
    lost = no_user & keep
    if lost.any():
        dropped[DROP_MISSING_USER] = int(lost.sum())
        keep = keep & ~no_user
    if not keep.any():
        raise InputError(
            f"{label} has no rows with both coordinates and a user id: column "
            f"'{user_col}' is empty in every row that has coordinates. Choose the "
            "user-id column again, or choose none to protect single records."
        )
    return ids[keep], keep


def none_readable(label: str, n_read: int, n_unreadable: int, lat_col: str, lon_col: str) -> InputError:
    """The refusal of a table whose every row was left out, ``n_unreadable`` of them for a coordinate that
    is not a number (``drop_unreadable``): the same words from every engine (curator-only counts)."""
    return InputError(curator_only(
        f"{label} has no rows with both coordinates as numbers: of its {n_read:,} data rows, {n_unreadable:,} "
        f"have a '{lat_col}' or '{lon_col}' that is not a number and the others none. Check that you chose the "
        "coordinate columns."))


def _coordinates(df: pd.DataFrame, lat_col: str, lon_col: str, drop_unreadable: bool,
                 label: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
    """:func:`load_points`' checks 3-5 and its dropped rows: (latitudes, longitudes, the rows kept, the
    dropped counts by reason)."""
    n_read = len(df)
    unreadable = np.zeros(n_read, dtype=bool) if drop_unreadable else None
    lat = _numeric_column(df[lat_col], lat_col, unreadable)
    lon = _numeric_column(df[lon_col], lon_col, unreadable)
    if unreadable is not None and unreadable.any():
        # the row is left out whatever its other coordinate holds (as the SQL engines' status)
        lat[unreadable] = np.nan
        lon[unreadable] = np.nan
    _check_finite(lat, lat_col)
    _check_finite(lon, lon_col)
    _check_ranges(lat, lon, lat_col, lon_col)

    missing = np.isnan(lat) | np.isnan(lon)
    keep = ~missing
    dropped: dict[str, int] = {}
    n_unreadable = int(unreadable.sum()) if unreadable is not None else 0
    if n_unreadable:
        dropped[DROP_UNREADABLE_COORDINATE] = n_unreadable
        missing = missing & ~unreadable
    if missing.any():
        dropped[DROP_MISSING_COORDINATE] = int(missing.sum())
    if not keep.any() and n_unreadable:
        raise none_readable(label, n_read, n_unreadable, lat_col, lon_col)
    if not keep.any():
        raise InputError(
            curator_only(f"{label} has no rows with both coordinates: all {n_read:,} data rows have an "
            f"empty '{lat_col}' or '{lon_col}'. Check that you chose the coordinate columns.")
        )

    return lat, lon, keep, dropped


def load_points(
    df: pd.DataFrame,
    lat_col: str,
    lon_col: str,
    user_col: str | None = None,
    *,
    source_name: str = "",
    drop_unreadable: bool = False,
) -> PointTable:
    """Validate coordinate (and user-id) columns and return a :class:`PointTable`.

    Checks, in order, each an :class:`InputError` naming the column, the number
    of rows, the first data rows (1-based, header not counted), example values
    and the fix:

    1. the columns exist (the message lists the available ones), each name is
       used once, and latitude, longitude and user id are different columns;
    2. the table has data rows;
    3. no coordinate is text that does not parse as a number (surrounding spaces
       are ignored; empty strings count as missing; decimal commas are read when
       every unparsable value is one): :class:`UnreadableCoordinates`, unless
       ``drop_unreadable``;
    4. no coordinate is infinite;
    5. latitudes lie in -90..90 and longitudes in -180..180; when swapping the
       two columns would make every value valid, the message says so.

    Rows with a missing (NaN, None, empty) latitude or longitude are dropped and
    counted under ``"missing coordinate"``; with a user column, remaining rows
    with a missing or blank user id are dropped and counted under
    ``"missing user id"``.  If nothing is left, :class:`InputError`.

    With ``drop_unreadable`` (the curator's explicit choice), rows whose latitude
    or longitude is text that is not a number are dropped instead of refused and
    counted under ``"coordinate not a number"``, first (before the other
    reasons, and whatever their other coordinate holds: the DuckDB and Spark
    engines give the same rows and counts).  Decimal commas are read as without
    it; infinite and out-of-range values in the other rows are still refused.

    The checks are vectorised (``pd.to_numeric(errors="coerce")`` compared with
    the missing mask); only values that fail are looked at again.

    Parameters
    ----------
    df : pandas.DataFrame
        The table, as returned by :func:`read_table`.  Row ``i`` (by position)
        is data row ``i + 1``.
    lat_col, lon_col : str
        Latitude and longitude columns, decimal degrees (WGS84).
    user_col : str, optional
        Column of user ids, for user-level privacy.  Ids are stripped of
        surrounding spaces; whole-number ids become int64.
    source_name : str
        The file name as uploaded, kept for the curator's view.
    drop_unreadable : bool
        Drop (and count) rows with a coordinate that is not a number instead of
        refusing the table.  Default False.

    Returns
    -------
    PointTable
    """
    label = f"'{source_name}'" if source_name else "The table"
    _check_chosen_columns(df, lat_col, lon_col, user_col)
    n_read = len(df)
    if n_read == 0:
        raise InputError(
            f"{label} has no data rows. Upload a table with at least one row of coordinates."
        )

    lat, lon, keep, dropped = _coordinates(df, lat_col, lon_col, drop_unreadable, label)
    user, keep = _rows_with_user(df, user_col, keep, dropped, label)

    all_kept = bool(keep.all())
    return PointTable(
        lon=lon if all_kept else lon[keep],
        lat=lat if all_kept else lat[keep],
        user=user,
        source_name=source_name,
        lat_column=lat_col,
        lon_column=lon_col,
        user_column=user_col,
        n_read=n_read,
        dropped=dropped,
    )


def load_points_file(
    data: DataSource,
    filename: str | None = None,
    lat_col: str | None = None,
    lon_col: str | None = None,
    user_col: str | None = None,
    progress: ProgressCallback | None = None,
    *,
    drop_unreadable: bool = False,
) -> PointTable:
    """Read a point file, find its coordinate columns if not given, and validate it.

    :func:`read_table`, then :func:`detect_coordinate_columns` for whichever of
    ``lat_col``/``lon_col`` is None, then :func:`load_points`.

    The user column is *not* detected: a user id changes the unit of privacy
    and drops rows without one, so it is used only when named (the app proposes
    :func:`detect_user_column` and lets the curator decide).

    Parameters
    ----------
    data, filename, progress
        As for :func:`read_table`.
    lat_col, lon_col, user_col : str, optional
        Columns to use; see :func:`load_points`.
    drop_unreadable : bool
        See :func:`load_points`.

    Returns
    -------
    PointTable

    Raises
    ------
    InputError
        Any problem from reading or validation, or no coordinate columns found.
    """
    src_name = filename or _source_name(data)
    df = read_table(data, filename=src_name or None, progress=progress)
    if lat_col is None or lon_col is None:
        found_lat, found_lon = detect_coordinate_columns(df)
        lat_col = lat_col if lat_col is not None else found_lat
        lon_col = lon_col if lon_col is not None else found_lon
        if lat_col is None or lon_col is None:
            raise _no_coordinates_error(df, src_name, lat_col is None, lon_col is None)
    return load_points(df, lat_col, lon_col, user_col, source_name=src_name, drop_unreadable=drop_unreadable)


def _source_name(data: object) -> str:
    if isinstance(data, str | os.PathLike):
        return Path(data).name
    return Path(str(getattr(data, "name", "") or "")).name


def _no_coordinates_error(df: pd.DataFrame, name: str, no_lat: bool, no_lon: bool) -> InputError:
    where = f"'{name}'" if name else "the file"
    columns = list(df.columns)
    numeric_names = pd.to_numeric(pd.Series([str(c) for c in columns]), errors="coerce")
    if len(columns) and numeric_names.notna().mean() >= 0.5:
        return InputError(
            f"The first row of {where} looks like data, not column names ({_list_columns(columns, 6)}). "
            "Add a header row naming the columns (for example 'lat,lon') and upload it again."
        )
    what = (
        "latitude/longitude columns"
        if no_lat and no_lon
        else ("latitude column" if no_lat else "longitude column")
    )
    return InputError(
        f"No {what} found in {where} (columns: {_list_columns(columns)}). Name them 'lat' and "
        "'lon' or choose them in the app (CLI: --lat-col/--lon-col)."
    )


# --------------------------------------------------------------------------------------
# Boundaries
# --------------------------------------------------------------------------------------
