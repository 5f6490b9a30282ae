"""Public periods for releases over time: a time column, a period length and a public range.

A series releases the same plan once per period. The periods come from the curator's public time
range and period length, never from the data (an empty period is released too, and the first and
last timestamps of the data are never looked at), just as the bounds of a map come from the curator.
Records outside the range are dropped before anything else, as points outside the bounds are.

Periods are half-open ``[start, end)`` intervals in the time column's own clock (naive, no time
zone is assumed). A day is a calendar day, a week an ISO week (Monday to Sunday, labelled
``2014-W14``), a month a calendar month (``2014-04``), and a fixed length (``6h``, ``3d``, ``2w``)
is a whole multiple of its length from a fixed origin (Monday 5 January 1970), so that one label
always names one interval, whichever range asked for it (the ledger keys periods by label). The first and last period are clipped to the range, so a weekly
series over April 2014 has five periods: 1–6, 7–13, 14–20, 21–27 and 28–30 April.

>>> ps = periods_in(*parse_time_range("2014-04-01,2014-04-30"), "week")
>>> [p.label for p in ps]
['2014-W14', '2014-W15', '2014-W16', '2014-W17', '2014-W18']
>>> str(ps[0].start), str(ps[0].end)
('2014-04-01 00:00:00', '2014-04-07 00:00:00')
>>> times = read_times(pd.Series(["4/1/2014 0:11:00", "4/30/2014 23:59:00", "5/1/2014 0:00:00"]), "Date/Time")
>>> assign_periods(times, ps).tolist()
[0, 4, -1]
>>> len(periods_in(*parse_time_range("2014-04-01,2014-04-30"), "day"))
30
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpcore.errors import InputError, ParameterError, curator_only

__all__ = ["NAMED_PERIODS", "Period", "assign_periods", "detect_time_column", "parse_period",
           "parse_time_range", "periods_in", "read_times"]

#: The calendar periods; any other period is a fixed length such as ``6h``, ``3d`` or ``2w``.
NAMED_PERIODS = ("day", "week", "month")

#: Column names that suggest a time column (matched as words of the lower-cased name).
_TIME_WORDS = ("date", "time", "datetime", "timestamp", "ts", "day", "pickup", "dropoff", "started", "ended")
_FIXED = re.compile(r"^\s*(\d+)\s*(min|h|d|w)\s*$")
_UNITS = {"min": "min", "h": "h", "d": "D", "w": "W"}
#: Fixed-length periods are whole multiples of their length from this instant (a Monday, so ``1w``
#: periods are ISO weeks and ``1d`` periods calendar days).
_ORIGIN = pd.Timestamp("1970-01-05")


@dataclass(frozen=True)
class Period:
    """One public period ``[start, end)`` with the label its folder and rows carry."""

    label: str
    start: pd.Timestamp
    end: pd.Timestamp

    def to_dict(self) -> dict[str, str]:
        return {"period": self.label, "start": self.start.isoformat(), "end": self.end.isoformat()}


def parse_period(text: str) -> str | pd.Timedelta:
    """``day``, ``week`` or ``month``, or a fixed length (``90min``, ``6h``, ``3d``, ``2w``).

    >>> parse_period("week"), parse_period("6h")
    ('week', Timedelta('0 days 06:00:00'))
    """
    t = str(text).strip().lower()
    if t in NAMED_PERIODS:
        return t
    m = _FIXED.match(t)
    if m and int(m.group(1)) > 0:
        return pd.Timedelta(int(m.group(1)), unit=_UNITS[m.group(2)])
    raise ParameterError(
        f"The period must be day, week (ISO), month or a fixed length such as 6h, 3d or 2w (got {text!r}).")


def _timestamp(text: str, what: str) -> tuple[pd.Timestamp, bool]:
    """The timestamp in ``text`` and whether it is a bare date (which then covers the whole day)."""
    t = str(text).strip()
    try:
        ts = pd.Timestamp(t)
    except (ValueError, TypeError):
        ts = pd.NaT
    if ts is pd.NaT or pd.isna(ts):
        raise ParameterError(f"The {what} of the time range must be a date or a time such as 2014-04-01 or "
                             f"2014-04-01T06:00 (got {text!r}).")
    if ts.tzinfo is not None:
        ts = ts.tz_convert(None)
    return ts, re.fullmatch(r"\d{4}-\d{2}-\d{2}", t) is not None


def parse_time_range(text: str | Sequence[str]) -> tuple[pd.Timestamp, pd.Timestamp]:
    """``START,END`` as a half-open ``[start, end)``; a bare END date includes that whole day.

    >>> parse_time_range("2014-04-01,2014-04-30")
    (Timestamp('2014-04-01 00:00:00'), Timestamp('2014-05-01 00:00:00'))
    """
    parts = [p for p in (text.split(",") if isinstance(text, str) else list(text))]
    if len(parts) != 2:
        raise ParameterError(f"The time range is START,END, for example 2014-04-01,2014-04-30 (got {text!r}).")
    start, _ = _timestamp(parts[0], "start")
    end, whole_day = _timestamp(parts[1], "end")
    if whole_day:
        end = end + pd.Timedelta(days=1)
    if end <= start:
        raise ParameterError(f"The time range ends before it starts ({text!r}): give START,END with END after START.")
    return start, end


def _label(start: pd.Timestamp, period: str | pd.Timedelta) -> str:
    if period == "day":
        return start.strftime("%Y-%m-%d")
    if period == "week":
        year, week, _ = start.isocalendar()
        return f"{year}-W{week:02d}"
    if period == "month":
        return start.strftime("%Y-%m")
    if start == start.normalize():
        return start.strftime("%Y-%m-%d")
    return start.strftime("%Y-%m-%dT%H%M")


def periods_in(start: pd.Timestamp, end: pd.Timestamp, period: str | pd.Timedelta,
               max_periods: int = 100_000) -> list[Period]:
    """The periods of ``[start, end)``, clipped to it; computed from the public range alone."""
    period = parse_period(period) if isinstance(period, str) else period
    if period == "day":
        edges = pd.date_range(start.normalize() + pd.Timedelta(days=1), end, freq="D", inclusive="left")
    elif period == "week":
        edges = pd.date_range(start.normalize() + pd.Timedelta(days=1), end, freq="W-MON", inclusive="left")
    elif period == "month":
        edges = pd.date_range(start.normalize() + pd.Timedelta(days=1), end, freq="MS", inclusive="left")
    else:
        # whole multiples of the length from a fixed origin, never from the range's start: a label
        # then means one interval whatever range asked for it, so two ranges never charge
        # overlapping intervals to two ledgers of different names
        first = _ORIGIN + ((start - _ORIGIN) // period) * period
        n = int(np.ceil((end - first) / period))
        if n > max_periods:
            raise ParameterError(f"The time range holds {n:,} periods of {period}; at most {max_periods:,} are "
                                 "allowed: choose a longer period or a shorter range.")
        edges = pd.DatetimeIndex([first + i * period for i in range(1, n)])
    bounds = [start, *[e for e in edges if start < e < end], end]
    if len(bounds) - 1 > max_periods:
        raise ParameterError(f"The time range holds {len(bounds) - 1:,} periods; at most {max_periods:,} are "
                             "allowed: choose a longer period or a shorter range.")
    return [Period(_label(_bucket(a, period), period), a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=False)]


def _bucket(t: pd.Timestamp, period: str | pd.Timedelta) -> pd.Timestamp:
    """The start of the whole period that holds ``t`` (a clipped first period keeps its period's name)."""
    if isinstance(period, pd.Timedelta):
        return _ORIGIN + ((t - _ORIGIN) // period) * period
    return t


def _iso_times(s: pd.Series) -> pd.DatetimeIndex | None:
    """``s`` read by pyarrow's ISO 8601 parser when every value is an ISO date or time without a
    zone (``2014-04-01``, ``2014-04-01T06:30:00.5``, a space for the T; the same instants as pandas,
    ten times faster on millions of rows); None otherwise (pandas reads it: US dates, zones).

    >>> _iso_times(pd.Series(["2014-04-01 06:30:00", None])).tolist()
    [Timestamp('2014-04-01 06:30:00'), NaT]
    >>> _iso_times(pd.Series(["4/1/2014 0:11:00"])) is None, _iso_times(pd.Series(["2014-04-01T06:30Z"])) is None
    (True, True)
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        arr = pa.array(s, from_pandas=True)
        if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)) or arr.null_count == len(arr):
            return None
        # the cast is strict: any other text (a zone, a US date, 2014-02-30) is an error, not a guess
        return pd.DatetimeIndex(pc.cast(arr, pa.timestamp("ns")).to_numpy(zero_copy_only=False))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, ValueError, TypeError):
        return None  # an impossible date (2014-02-30) or out of range: pandas reads it and says so


def read_times(values: pd.Series | Iterable, column: str = "time") -> pd.DatetimeIndex:
    """Parse a time column (ISO text, US ``4/1/2014 0:11:00``, dates, or datetimes) without a time zone.

    Unparseable values are refused with the column's name and an example, rather than dropped
    silently (a dropped record would shift counts between periods without anyone knowing).
    """
    s = pd.Series(values)
    if pd.api.types.is_datetime64_any_dtype(s):
        out = pd.DatetimeIndex(s)
    elif (fast := _iso_times(s)) is not None:
        out = fast
    else:
        try:
            # one format inferred from the first value parses a column at once (3.5 M ISO times:
            # 3 s against 4 s); values it cannot read are read again one by one (format="mixed")
            out = pd.DatetimeIndex(pd.to_datetime(s, errors="coerce"))
            retry = out.isna() & s.notna().to_numpy()
            if retry.any():
                again = pd.to_datetime(s[retry], errors="coerce", format="mixed")
                out = pd.DatetimeIndex(pd.Series(out, index=s.index).where(~retry, again))
        except (ValueError, TypeError) as e:
            raise InputError(f"The time column {column!r} cannot be read as dates or times ({e}). Choose the "
                             "column that holds timestamps, such as 2014-04-01 06:30.") from None
        bad = out.isna() & s.notna().to_numpy()
        if bad.any():
            example = s[bad].iloc[0]
            raise InputError(curator_only(f"{int(bad.sum()):,} values of the time column {column!r} are not dates or times "
                             f"(for example {example!r}). Fix or remove those rows, or choose another column."))
    if out.tz is not None:
        out = out.tz_convert(None)
    return out


def assign_periods(times: pd.DatetimeIndex, periods: Sequence[Period]) -> np.ndarray:
    """The index of each time's period, or -1 for times outside the public range (and missing times).

    >>> ps = periods_in(*parse_time_range("2020-04-01,2020-04-02"), "day")
    >>> assign_periods(pd.DatetimeIndex(["2020-03-31 23:00", "2020-04-02 12:00", None]), ps).tolist()
    [-1, 1, -1]
    """
    if not periods:
        return np.full(len(times), -1, dtype=np.int64)
    starts = np.array([p.start.as_unit("ns").value for p in periods], dtype=np.int64)
    end = periods[-1].end.as_unit("ns").value
    times = pd.DatetimeIndex(times)
    t = np.asarray(times.as_unit("ns").asi8, dtype=np.int64)
    idx = np.searchsorted(starts, t, side="right") - 1
    outside = (idx < 0) | (t >= end) | np.asarray(times.isna())
    return np.where(outside, -1, idx).astype(np.int64)


def detect_time_column(frame: pd.DataFrame, sample: int = 200) -> str | None:
    """The column that looks like a time column: a time-like name whose sample parses as times.

    >>> detect_time_column(pd.DataFrame({"Lat": [40.7], "Date/Time": ["4/1/2014 0:11:00"]}))
    'Date/Time'
    >>> detect_time_column(pd.DataFrame({"Lat": [40.7], "Lon": [-73.9]})) is None
    True
    """
    for col in frame.columns:
        words = re.split(r"[^a-z]+", str(col).lower())
        datetime_dtype = pd.api.types.is_datetime64_any_dtype(frame[col])
        if not datetime_dtype and not any(w in _TIME_WORDS for w in words):
            continue
        head = frame[col].dropna().head(sample)
        if head.empty or pd.api.types.is_numeric_dtype(head):
            continue
        try:
            read_times(head, str(col))
        except InputError:
            continue
        return str(col)
    return None
