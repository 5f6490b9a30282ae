"""Public periods: labels, clipping to the range, assignment, and clear refusals."""

from pathlib import Path

import pandas as pd
import pytest

from dpcore.core.periods import (
    assign_periods,
    detect_time_column,
    parse_period,
    parse_time_range,
    periods_in,
    read_times,
)
from dpcore.errors import InputError, ParameterError


def test_months_are_calendar_months_clipped_to_the_range():
    ps = periods_in(*parse_time_range("2020-01-15,2020-03-10"), "month")
    assert [p.label for p in ps] == ["2020-01", "2020-02", "2020-03"]
    assert ps[0].start == pd.Timestamp("2020-01-15") and ps[0].end == pd.Timestamp("2020-02-01")
    assert ps[-1].end == pd.Timestamp("2020-03-11")


def test_fixed_length_steps_from_the_range_start():
    ps = periods_in(*parse_time_range("2020-04-01T06:00,2020-04-02T00:00"), "6h")
    assert [str(p.start) for p in ps] == ["2020-04-01 06:00:00", "2020-04-01 12:00:00", "2020-04-01 18:00:00"]
    assert ps[1].label == "2020-04-01T1200"


def test_periods_tile_the_range_without_gaps():
    start, end = parse_time_range("2019-12-25,2020-01-20")
    for period in ("day", "week", "month", "3d"):
        ps = periods_in(start, end, period)
        assert ps[0].start == start and ps[-1].end == end
        assert all(a.end == b.start for a, b in zip(ps, ps[1:], strict=False))
        assert len({p.label for p in ps}) == len(ps)


def test_an_iso_week_label_uses_the_iso_year():
    ps = periods_in(*parse_time_range("2020-12-28,2021-01-10"), "week")
    assert [p.label for p in ps] == ["2020-W53", "2021-W01"]


def test_assignment_is_by_half_open_interval():
    ps = periods_in(*parse_time_range("2014-04-01,2014-04-02"), "day")
    t = read_times(pd.Series(["2014-04-01 23:59:59", "2014-04-02 00:00:00", "2014-04-03 00:00:00"]))
    assert assign_periods(t, ps).tolist() == [0, 1, -1]


@pytest.mark.parametrize("text", ["fortnight", "0d", "-3h", ""])
def test_a_bad_period_is_refused_with_the_choices(text):
    with pytest.raises(ParameterError, match="day, week"):
        parse_period(text)


@pytest.mark.parametrize("text", ["2014-04-01", "2014-04-30,2014-04-01", "yesterday,today"])
def test_a_bad_range_is_refused(text):
    with pytest.raises(ParameterError, match="time range"):
        parse_time_range(text)


def test_unreadable_times_name_the_column_and_an_example():
    with pytest.raises(InputError, match="'when'.*'soon'"):
        read_times(pd.Series(["2014-04-01", "soon"]), "when")


_SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data"
_UBER = _SHARED / "points" / "uber_nyc_pickups_2014-04.csv.gz"
_TAXI = _SHARED / "od" / "nyc_green_taxi_trips_2020-04.csv.gz"


@pytest.mark.skipif(not (_UBER.exists() and _TAXI.exists()), reason="shared/data is not available")
def test_the_real_time_columns_are_detected():
    uber = pd.read_csv(_UBER, nrows=50)
    assert detect_time_column(uber) == "Date/Time"
    taxi = pd.read_csv(_TAXI, nrows=50)
    assert detect_time_column(taxi) == "lpep_pickup_datetime"


def test_a_fixed_length_label_names_one_interval_whatever_the_range():
    """Two ranges that start on different days must not give one instant two period names (each
    name has its own ledger: a record would be charged twice the per-period cap)."""
    a = {p.label: p for p in periods_in(*parse_time_range("2014-04-01,2014-04-30"), "3d")}
    b = {p.label: p for p in periods_in(*parse_time_range("2014-04-02,2014-04-30"), "3d")}
    for label in set(a) & set(b):
        if a[label].start >= pd.Timestamp("2014-04-02"):
            assert (a[label].start, a[label].end) == (b[label].start, b[label].end)
    t = read_times(pd.Series(["2014-04-05 12:00"]))
    pa, pb = periods_in(*parse_time_range("2014-04-01,2014-04-30"), "3d"), \
        periods_in(*parse_time_range("2014-04-02,2014-04-30"), "3d")
    assert pa[assign_periods(t, pa)[0]].label == pb[assign_periods(t, pb)[0]].label


def test_iso_times_read_by_pyarrow_are_pandas_instants() -> None:
    """The fast ISO path gives the instants pandas gives; anything else is left to pandas."""
    import pandas as pd

    from dpcore.core.periods import _iso_times, read_times

    iso = pd.Series(["2014-04-01", "2014-04-01T06:30", "2014-04-01 06:30:15", "2014-12-31T23:59:59.123456789", None])
    fast = _iso_times(iso)
    slow = pd.DatetimeIndex(pd.to_datetime(iso, errors="coerce", format="mixed"))
    assert fast is not None and fast.as_unit("ns").asi8.tolist()[:4] == slow.as_unit("ns").asi8.tolist()[:4]
    assert fast.isna().tolist() == [False] * 4 + [True]
    for other in (["4/1/2014 0:11:00"], ["2014-04-01T06:30:00+02:00"], ["2014-02-30"], ["2014-04-01", "x"]):
        assert _iso_times(pd.Series(other)) is None
    with pytest.raises(InputError, match="not dates or times"):
        read_times(pd.Series(["2014-04-01", "x"]), "t")
