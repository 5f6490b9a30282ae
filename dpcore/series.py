"""A series release: the same plan released once per public period, re-served, never re-noised.

:func:`release_series` takes a plan built once (``catalog.get(kind, name).plan(...)``), the
public periods (:func:`dpcore.core.periods.periods_in`, from the curator's range, so an empty
period is released too) with each period's data, and releases every period through
:func:`dpcore.pipeline.release` — charged through the one session to the period's ledger of the
series budget (:class:`dpcore.privacy.series_ledger.SeriesBudget`).  Before anything is drawn for
a period it looks for the release stored under (population, plan digest, period, period data):

* found: its files are **re-served**, byte for byte, and nothing is charged (re-querying must not
  average the noise away: LinkedIn's Audience Engagements API, Rogers et al. 2020, Sec. 4; Apple's
  App Analytics reports);
* a release of this plan and period from *other* data (late records): a new, charged release,
  stated as a **correction** of the earlier one in series.json and in the stored record;
* none: a new, charged release.

The outputs are the kind's files per period (``S/<period>/``), ``series.csv`` (one row per period
and released cell, area or pair: ``period, area, noisy_count, noise_sd, ci95_low, ci95_high`` then
the kind's other columns) and ``series.json`` (one record, schema ``dpcore/schemas/series.schema.json``).
When every period was re-served, the stored series files are re-served too.

The kind's part comes as callables (``files_of``): the core imports no kind.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpcore.core.periods import Period
from dpcore.core.record import jsonable, validate_record, write_files
from dpcore.data.csv_safe import csv_bytes
from dpcore.errors import InputError, ParameterError
from dpcore.privacy.series_ledger import SeriesBudget, plan_digest
from dpcore.privacy.units import TimeUnit

__all__ = ["CUMULATIVE_COLUMNS", "KEEP_BATCH", "SERIES_COLUMNS", "CumulativeRelease", "PeriodInput", "PeriodOutcome",
           "SeriesRelease", "release_cumulative", "series_csv_with_cumulative",
           "frame_fingerprint", "group_by_period", "keep_for_unit", "period_index", "plan_parts", "points_inputs",
           "points_series_inputs", "release_series", "sample_periods", "sampling_key", "series_csv",
           "shared_aggregates", "table_inputs", "table_series_inputs"]

#: The first columns of series.csv, for every kind.
SERIES_COLUMNS = ("period", "area", "noisy_count", "noise_sd", "ci95_low", "ci95_high")
#: Periods whose files are stored in one transaction.  A crash loses at most this many stored
#: releases (already charged): a rerun releases and charges them again, it never re-serves unpaid.
KEEP_BATCH = 32
#: Progress callback: (fraction done, message).
Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class PeriodInput:
    """One public period and its data: a content ``fingerprint`` of the period's rows (never
    published), whether it holds no record, and ``aggregate``, a callable building the period's
    aggregate (called only when the period is released, not when it is re-served)."""

    period: Period
    fingerprint: str
    empty: bool
    aggregate: Callable[[], Any]


@dataclass(frozen=True)
class PeriodOutcome:
    """What became of one period: ``released``, ``re-served``, ``correction`` or ``not accounted``."""

    period: Period
    status: str
    release_id: str | None
    correction_of: str | None
    files: Mapping[str, bytes] = field(repr=False)
    spent: float | None = None


@dataclass(frozen=True)
class SeriesRelease:
    """A series: the outcome of every period and the series files (``series.csv``, ``series.json``)."""

    kind: str
    unit: TimeUnit
    outcomes: tuple[PeriodOutcome, ...]
    files: Mapping[str, bytes] = field(repr=False)
    reserved: bool = False

    @property
    def charged(self) -> int:
        """How many periods were charged by this request."""
        return sum(o.status in ("released", "correction") for o in self.outcomes)

    @property
    def record(self) -> dict[str, Any]:
        """series.json, parsed."""
        return json.loads(self.files["series.json"])

    def write(self, out_dir: str | Path) -> list[Path]:
        """Write ``out_dir/<period>/<files>``, ``series.csv`` and ``series.json``; returns the paths."""
        out = Path(out_dir)
        paths: list[Path] = []
        for o in self.outcomes:
            folder = out / o.period.label
            if all((folder / n).is_file() and (folder / n).read_bytes() == d for n, d in o.files.items()):
                paths += [folder / n for n in o.files]  # already there, byte for byte (a re-served period)
                continue
            paths += write_files(o.files, folder)
        out.mkdir(parents=True, exist_ok=True)
        for name, data in self.files.items():
            (out / name).write_bytes(data)
            paths.append(out / name)
        return paths


def _domain_text(domain: Any) -> Any:
    if isinstance(domain, tuple | list):
        return [_domain_text(d) for d in domain]
    fp = getattr(domain, "fingerprint", None)
    if callable(fp):
        try:
            return str(fp())
        except TypeError:
            pass
    if hasattr(domain, "labels") and hasattr(domain, "depth"):
        h = hashlib.sha256()
        for d in range(int(domain.depth) + 1):
            h.update("\x1f".join(map(str, domain.labels(d))).encode("utf-8") + b"\x1e")
        return h.hexdigest()
    return repr(domain)


def plan_parts(plan: Any) -> dict[str, Any]:
    """The public description of a plan its digest is taken of: kind, mechanism, parameters, cost,
    unit, the kind's facts, the expected error rows and the public domain.

    Two requests with the same parts release the same thing (and so are re-served)."""
    return {"details": jsonable(plan.details()), "cost": plan.cost.to_dict(),
            "rows": [r.to_dict() for r in plan.rows], "domain": _domain_text(plan.domain),
            "public": {k: repr(v) for k, v in sorted(dict(plan.public).items())}}


def _keyed_hash(values: pd.Series, key: str) -> np.ndarray:
    # SipHash-2-4 keyed with a secret (pandas' hash_pandas_object): deterministic for re-serving,
    # unpredictable without the key, independent of the rows' order
    return pd.util.hash_pandas_object(values.reset_index(drop=True), index=False, hash_key=key[:16]).to_numpy()


def sample_periods(user: Sequence[Any] | np.ndarray, period: np.ndarray, max_periods: int, key: str,
                   labels: Sequence[str] | np.ndarray | None = None) -> np.ndarray:
    """Mask keeping each person's records in at most ``max_periods`` of the periods they touch.

    Each (person, period) pair gets a keyed pseudo-random rank (SipHash under ``key``, a secret
    of at least 16 characters) of the person and the period's label (``labels``, one per row;
    the period index when not given); a person keeps the ``max_periods`` periods of lowest rank.
    The choice looks at nothing but the person and the period (not the records, not their order),
    so it is made before anything else, as the unit ``person`` requires (records outside the
    range, ``period < 0``, are dropped).

    >>> u = np.array(["a", "a", "a", "b", "a"]); p = np.array([0, 1, 2, 0, 1])
    >>> keep = sample_periods(u, p, 2, "0123456789abcdef")
    >>> len(set(p[keep & (u == "a")])), bool(keep[3])
    (2, True)
    """
    if max_periods < 1:
        raise ParameterError("--max-periods must be at least 1.")
    period = np.asarray(period, dtype=np.int64)
    name = pd.Series(np.asarray(labels, dtype=object)).astype(str) if labels is not None else pd.Series(period).astype(str)
    frame = pd.DataFrame({"u": pd.Series(np.asarray(user, dtype=object)).astype(str), "p": period, "n": name})
    pairs = frame.drop_duplicates()
    pairs = pairs[pairs["p"] >= 0]
    pairs = pairs.assign(r=_keyed_hash(pairs["u"] + "\x1f" + pairs["n"], key))
    rank = pairs.groupby("u")["r"].rank(method="first")
    kept = pairs.loc[rank.to_numpy() <= max_periods, ["u", "p"]].assign(k=True)
    hit = frame[["u", "p"]].merge(kept, on=["u", "p"], how="left")["k"].fillna(False).to_numpy(dtype=bool)
    return hit & (period >= 0)


def sampling_key(session: Any) -> str:
    """A secret of this install for the keyed choices (caps, periods kept): the same data gets the
    same choice, so a repeated request finds its stored release; unaccounted: a fresh secret."""
    if getattr(session, "accounted", False):
        return session.store.key("series-sampling", "v1")[3:19]
    from dpcore.privacy.noise import secret_key

    return secret_key(8).hex()


def frame_fingerprint(df: pd.DataFrame, columns: list[str], count: str | None = None) -> str:
    """A content fingerprint of a period's rows (never published): the totals per combination of
    ``columns``, sorted, hashed; independent of the rows' order and of other columns."""
    if df.empty:
        return "empty"
    keys = df[columns].astype(str)
    totals = (pd.to_numeric(df[count], errors="coerce").fillna(0).groupby([keys[c] for c in columns]).sum()
              if count else keys.groupby(columns).size())
    text = csv_bytes(totals[totals != 0].sort_index().reset_index(),
                     lambda d: d.to_csv(index=False, header=False).encode("utf-8"))
    return hashlib.sha256(text).hexdigest()


def period_index(df: pd.DataFrame, column: str, periods: list[Any]) -> np.ndarray:
    """The period of each row (-1 outside the public range)."""
    from dpcore.core.periods import assign_periods, read_times

    if column not in df.columns:
        raise InputError(f"The input has no time column '{column}' (the time column). Its columns: "
                         f"{', '.join(map(str, list(df.columns)[:30]))}.")
    return assign_periods(read_times(df[column], column), periods)


def keep_for_unit(unit: Any, user: Any, pidx: np.ndarray, session: Any, periods: Sequence[Any]) -> np.ndarray:
    """Rows kept before anything else: in the range, and for ``person`` in at most w periods each.

    The periods kept are chosen by their labels (``periods``), not their positions in this
    request, so a request over another range keeps the same periods of each person."""
    keep = pidx >= 0
    if unit.scope == "person":
        labels = np.array([p.label for p in periods] + [""], dtype=object)[pidx]  # -1 -> "" (dropped)
        keep &= sample_periods(user, np.where(keep, pidx, -1), unit.max_periods, sampling_key(session), labels)
    return keep


def group_by_period(pidx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows grouped by period once: (order, bounds) with period i at order[bounds[i]:bounds[i+1]]."""
    # a stable sort of 16-bit keys is numpy's radix sort, O(rows): 4x faster on millions of rows,
    # the same order (stable: ties keep their row order)
    keys = pidx.astype(np.int16) if n < np.iinfo(np.int16).max else pidx
    order = np.argsort(keys, kind="stable")
    bounds = np.searchsorted(keys[order], np.arange(n + 1), side="left")
    return order, bounds


def points_inputs(lon: np.ndarray, lat: np.ndarray, user: np.ndarray | None, pidx: np.ndarray,
                  periods: Sequence[Period], grid: Any, user_cap: int | None = None) -> list[PeriodInput]:
    """One :class:`PeriodInput` per public period of points already read (``pidx``: each point's
    period, :func:`period_index`; rows kept for the unit, :func:`keep_for_unit`): grouped by period
    once, each period's frequency matrix built only when it is released.

    >>> from dpcore.core.periods import parse_time_range, periods_in
    >>> from dpcore.data.domain import Bounds, Grid
    >>> ps = periods_in(*parse_time_range("2024-01-01,2024-01-02"), "day")
    >>> grid = Grid.parse(Bounds.parse("0,0,1,1"), "2,2")
    >>> ins = points_inputs(np.array([0.2, 0.7]), np.array([0.2, 0.7]), None, np.array([0, 0]), ps, grid)
    >>> [(i.period.label, i.empty, int(i.aggregate().counts.sum())) for i in ins]
    [('2024-01-01', False, 2), ('2024-01-02', True, 0)]
    """
    from dpcore.data.domain import aggregate_points
    from dpcore.data.engines.base import points_fingerprint

    order, bounds = group_by_period(pidx, len(periods))

    def one(i: int) -> PeriodInput:
        rows = order[bounds[i]:bounds[i + 1]]
        lo, la = lon[rows], lat[rows]
        us = user[rows] if user is not None else None
        return PeriodInput(periods[i], points_fingerprint(lo, la) if rows.size else "empty", rows.size == 0,
                           lambda: aggregate_points(lo, la, grid, user=us, user_cap=user_cap if us is not None else None))

    return [one(i) for i in range(len(periods))]


def table_inputs(frame: pd.DataFrame, pidx: np.ndarray, periods: Sequence[Period], columns: list[str],
                 count: str | None, build: Callable[[pd.DataFrame], Any]) -> list[PeriodInput]:
    """One :class:`PeriodInput` per public period of a table's rows (hierarchy rows, trips):
    ``build(rows)`` makes one period's aggregate, :func:`frame_fingerprint` over ``columns`` and
    ``count`` its content key."""
    order, bounds = group_by_period(pidx, len(periods))

    def one(i: int) -> PeriodInput:
        rows = frame.iloc[order[bounds[i]:bounds[i + 1]]]
        return PeriodInput(periods[i], frame_fingerprint(rows, columns, count), rows.empty, lambda: build(rows))

    return [one(i) for i in range(len(periods))]


def points_series_inputs(df: pd.DataFrame, column: str, periods: Sequence[Period], lat: str, lon: str,
                         user_col: str | None, unit: Any, session: Any, grid: Any, user_cap: int | None = None,
                         source_name: str = "", *, drop_unreadable: bool = False,
                         dropped: dict[str, int] | None = None) -> tuple[list[PeriodInput], str, str | None]:
    """The period inputs of a table of points with a time column, as the CLI and the app build them:
    ``(inputs, whole, oneoff)``.

    The whole table is read as a one-off release reads it (``oneoff``: its points' fingerprint, the
    key a one-off release of the same input draws on; None when empty); the points outside the public
    range are dropped first (``whole``: the fingerprint of the rest, the population's data before any
    sampling); for the unit ``person`` each person's periods are sampled before anything else
    (:func:`keep_for_unit`); then one input per period (:func:`points_inputs`).

    ``drop_unreadable`` is :func:`dpcore.data.points.load_points`'s (rows whose coordinate is text
    that is not a number left out, not refused); ``dropped``, when given, receives the whole table's
    dropped rows per reason (curator-only)."""
    from dpcore.data.engines.base import points_fingerprint, tolerant_points_fingerprints
    from dpcore.data.points import load_points

    pidx = period_index(df, column, list(periods))
    if df.empty:
        lons = lats = np.zeros(0)
        users = None
    else:
        table = load_points(df, lat, lon, user_col=user_col, source_name=source_name,
                            drop_unreadable=drop_unreadable)
        if dropped is not None:
            dropped.update(table.dropped)
        # rows with text that is not a number are NaN here too: with drop_unreadable they are not kept
        kept = ~(pd.to_numeric(df[lat], errors="coerce").isna() | pd.to_numeric(df[lon], errors="coerce").isna())
        if user_col:
            kept &= df[user_col].notna() & (df[user_col].astype(str).str.strip() != "")
        pidx = pidx[kept.to_numpy()]
        if pidx.size != table.lon.size:
            raise InputError("Some coordinates could not be matched to their time; fix the coordinate columns "
                             "(empty or unreadable values) and try again.")
        lons, lats, users = table.lon, table.lat, table.user
    oneoff = points_fingerprint(lons, lats) if lons.size else None
    if oneoff is not None and session.accounted:  # the one-off's further keys (the points inside the bounds, ...): a budget they
        # lead to is the one-off budget the series composes with, as a one-off release finds it (issue 26 item 12)
        session.adopt_keys("points", oneoff, tolerant_points_fingerprints(lons, lats, grid.bounds))
    inside = pidx >= 0  # outside the public range: dropped first
    lons, lats, pidx = lons[inside], lats[inside], pidx[inside]
    users = users[inside] if users is not None else None
    # the population's data, before any sampling (the one-off key's when the range kept every point)
    whole = oneoff if oneoff is not None and inside.all() else points_fingerprint(lons, lats)
    keep = keep_for_unit(unit, users, pidx, session, periods)
    users = users[keep] if users is not None else None
    inputs = points_inputs(lons[keep], lats[keep], users, pidx[keep], periods, grid,
                           user_cap if user_col else None)
    return inputs, whole, oneoff


def table_series_inputs(df: pd.DataFrame, column: str, periods: Sequence[Period], columns: list[str],
                        count: str | None, build: Callable[[pd.DataFrame], Any], unit: Any, session: Any,
                        user: str | None = None) -> tuple[list[PeriodInput], str]:
    """The period inputs of a table kind (hierarchy rows, trips), as the CLI and the app build them:
    ``(inputs, whole)``, ``whole`` the fingerprint of the table over ``columns`` (and ``user``) before
    any sampling; the rows kept for the unit (:func:`keep_for_unit`), then one input per period
    (:func:`table_inputs`, ``build(rows)`` one period's aggregate)."""
    pidx = period_index(df, column, list(periods))
    fp_cols = columns + ([user] if user else [])
    whole = frame_fingerprint(df, fp_cols, count)
    keep = keep_for_unit(unit, df[user].to_numpy() if user else None, pidx, session, periods)
    rows, pidx = df.loc[keep].reset_index(drop=True), pidx[keep]
    return table_inputs(rows, pidx, periods, fp_cols, count, build), whole


class _Twice:
    """An aggregate builder for two users (the cumulative series, then its period's release): built
    on the first call and kept, handed over and forgotten on the second."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build, self._kept, self._have = build, None, False

    def __call__(self) -> Any:
        if self._have:
            out, self._kept, self._have = self._kept, None, False
            return out
        self._kept, self._have = self._build(), True
        return self._kept


def shared_aggregates(inputs: Sequence[PeriodInput]) -> list[PeriodInput]:
    """``inputs`` whose aggregates are built once for a cumulative series and the periods' releases
    (``--cumulative``), instead of twice; a period that is re-served keeps its aggregate until the
    inputs are dropped.

    >>> calls = []
    >>> ins = shared_aggregates([PeriodInput(None, "fp", False, lambda: calls.append(1) or len(calls))])
    >>> ins[0].aggregate(), ins[0].aggregate(), len(calls)
    (1, 1, 1)
    """
    import dataclasses

    return [dataclasses.replace(i, aggregate=_Twice(i.aggregate)) for i in inputs]


def _area(table: Any) -> Any:
    import pyarrow.compute as pc

    names = table.column_names
    if "origin" in names and "destination" in names:
        return pc.binary_join_element_wise(table["origin"], table["destination"], "->")
    for col in ("id", "code", "cell"):
        if col in names:
            return table[col]
    import pyarrow as pa

    return pa.array([str(i) for i in range(table.num_rows)], pa.string())


def _read_text_csv(data: bytes) -> Any:
    """A release.csv as a table of text columns (every value as published)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    names = next(csv.reader(io.StringIO(data.split(b"\n", 1)[0].decode("utf-8"))))
    return pacsv.read_csv(io.BytesIO(data), read_options=pacsv.ReadOptions(use_threads=len(data) > 1 << 20),
                          convert_options=pacsv.ConvertOptions(
        column_types={n: pa.string() for n in names}, strings_can_be_null=False, quoted_strings_can_be_null=False))


def series_csv(outcomes: Sequence[PeriodOutcome]) -> bytes:
    """``series.csv``: every period's ``release.csv`` rows under one header, period first, then
    ``area`` (the cell id, area code or ``origin->destination`` pair) and the noisy value with its
    SD and 95 % interval, then the kind's other columns.  Built from the published bytes only
    (a re-served period reads as it was published), with pyarrow (a year of days in a second)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    parts = []
    for o in outcomes:
        data = o.files.get("release.csv")
        if data is None:
            continue
        t = _read_text_csv(data)
        t = t.add_column(0, "area", _area(t)).add_column(0, "period", pa.array([o.period.label] * t.num_rows,
                                                                                  pa.string()))
        parts.append(t)
    if not parts:
        return (",".join(SERIES_COLUMNS) + "\n").encode("utf-8")
    table = pa.concat_tables(parts, promote_options="default")
    first = [c for c in SERIES_COLUMNS if c in table.column_names]
    table = table.select(first + [c for c in table.column_names if c not in first])

    def write(df: pd.DataFrame) -> bytes:
        buf = io.BytesIO()
        header = io.StringIO()
        csv.writer(header, lineterminator="\n").writerow(list(df.columns))  # pyarrow would quote every name
        buf.write(header.getvalue().encode("utf-8"))
        pacsv.write_csv(pa.Table.from_pandas(df, preserve_index=False), buf,
                        pacsv.WriteOptions(quoting_style="needed", include_header=False))
        return buf.getvalue()

    # the cells are the published release.csv text (escaped there already); the helper checks again
    return csv_bytes(table.to_pandas(), write, numbers_as_text=True)


def _series_record(plan: Any, unit: TimeUnit, outcomes: Sequence[PeriodOutcome], budget: SeriesBudget | None,
                   digest: str, time: Mapping[str, Any]) -> dict[str, Any]:
    per_cost = plan.cost.to_dict()
    record: dict[str, Any] = {
        "schema": "dpcore.series/1",
        "kind": plan.kind,
        "mechanism": plan.mechanism,
        "time": dict(time),
        "unit": unit.to_dict(),
        "plan": {"digest": digest, "label": plan.label, "details": jsonable(plan.details()), "cost": per_cost,
                 "rows": [r.to_dict() for r in plan.rows]},
        "periods": [{**o.period.to_dict(), "status": o.status, "release_id": o.release_id,
                     "correction_of": o.correction_of, "spent": o.spent,
                     "files": [f"{o.period.label}/{n}" for n in o.files]} for o in outcomes],
        "spend": {"per_period": per_cost, "composition": "parallel over periods" if unit.parallel else
                  "sequential over periods (one horizon budget)",
                  "accounted": budget is not None},
        "files": ["series.csv", "series.json"] + [f"{o.period.label}/{n}" for o in outcomes for n in o.files],
    }
    if budget is not None:
        record["spend"]["population"] = budget.name or "recognised from the data (keyed)"
        record["spend"]["cap"] = budget.default_cap.to_dict()
        record["horizon"] = budget.horizon()
    return record


def release_series(plan: Any, inputs: Sequence[PeriodInput],
                   files_of: Callable[[Any, Any], Mapping[str, bytes]] | None = None, *, unit: TimeUnit,
                   budget: SeriesBudget | None, session: Any = None, noise: Any = None,
                   progress: Progress | None = None, time: Mapping[str, Any] | None = None,
                   files_options: Mapping[str, Any] | None = None, suppress: Any = None,
                   cumulative: Callable[[], CumulativeRelease] | None = None,
                   cumulative_cost: tuple[Any, float] | None = None, cv_threshold: float | None = None,
                   ) -> SeriesRelease:
    """Release ``plan`` once per period of ``inputs`` (re-serving what was released before).

    Parameters
    ----------
    plan : dpcore.core.mechanism.Plan
        Built once, through the catalogue; every period is released with it.
    inputs : sequence of PeriodInput
        The public periods in time order, each with its data.
    files_of : callable, optional
        Deprecated: ``files_of(kind_release.inner, ledger) -> {name: bytes}``.  By default (None)
        each period's files are the envelope's, ``made.files(ledger, **files_options)``
        (:meth:`dpcore.core.mechanism.KindRelease.files`, as one-off releases make them: the
        record holds the plan's rows).
    unit : TimeUnit
        The unit over time (its ``base`` is ``plan.unit``).
    budget : SeriesBudget or None
        The series budget (:meth:`dpcore.core.session.Session.series_budget`); None only with an
        unaccounted session (nothing is charged, stored or re-served).
    session, noise
        As for :func:`dpcore.pipeline.release`.
    progress : callable, optional
        ``progress(fraction, message)`` after every period.
    time : mapping, optional
        The public time settings for series.json (time column, period, range).
    files_options : mapping, optional
        The kind's file options (boundary joins, flow-line coordinates...), for ``made.files``.
    suppress : ReliabilityRule or str, optional
        A reliability rule (:func:`dpcore.core.reliability.parse_rule`) applied to every period's
        files (:func:`~dpcore.core.reliability.apply_to_files`: ``release_full.csv`` per period for
        data users, the rule's columns in ``release.csv`` and so in ``series.csv``).  Post-processing
        of the noisy values: the stored release is the one before the rule, which is applied when the
        files are served (new or re-served alike), so another rule re-serves the same noise.
    cumulative : callable, optional
        Releases (or re-serves) the cumulative series (:func:`release_cumulative`), called once
        before the periods; its columns join series.csv and its record series.json.
    cumulative_cost : (PrivacyCost, float), optional
        Its cost and horizon share: the periods' pre-check counts them before anything is charged.
    cv_threshold : float, optional
        Each new period's ``level_guidance`` threshold (default :data:`dpcore.core.review.CV_THRESHOLD`).
    """
    from dpcore.core.reliability import apply_to_files, parse_rule
    from dpcore.core.review import CV_THRESHOLD, with_review, without_review

    if unit.base != plan.unit:
        raise ParameterError(f"The series' unit ({unit.label()}) does not protect what the plan protects "
                             f"({plan.unit.label()}): plan with the series' unit.")
    digest = plan_digest(plan_parts(plan))
    rule, cv = parse_rule(suppress), CV_THRESHOLD if cv_threshold is None else float(cv_threshold)

    def served(files: Mapping[str, bytes]) -> dict[str, bytes]:  # as KindRelease.files(suppress=rule): reviewed once
        return with_review(apply_to_files(without_review(files), rule), cv) if rule is not None else dict(files)

    outcomes: list[PeriodOutcome] = []
    n = len(inputs)
    found = ([(None, None)] * len(inputs) if budget is None
             else budget.stored_many(digest, [(i.period.label, i.fingerprint) for i in inputs]))
    if budget is not None:  # every new period must fit before the first is charged (the cumulative's too)
        once, share = cumulative_cost if cumulative_cost is not None and cumulative is not None else (None, 0.0)
        budget.precheck(plan.cost, [i.period.label for i, (s, _) in zip(inputs, found, strict=True) if s is None],
                        once, share)
    cum = cumulative() if cumulative is not None else None
    pending: list[Any] = []
    try:
        for i, made, ledger in _in_order(plan, inputs, found, budget, session, noise):
            item = inputs[i]
            label = item.period.label
            stored, other = found[i]
            if stored is not None:
                outcomes.append(PeriodOutcome(item.period, "re-served", stored.release_id, stored.correction_of,
                                              served(stored.files)))
            else:
                files = (dict(files_of(made.inner, ledger)) if files_of is not None
                         else dict(made.files(ledger, cv_threshold=cv, **dict(files_options or {}))))
                if budget is None:
                    outcomes.append(PeriodOutcome(item.period, "not accounted", None, None, served(files)))
                else:
                    status = "correction" if other else "released"
                    pending.append((digest, label, item.fingerprint, files,
                                    {"period": label, "status": status, "plan": digest, "correction_of": other},
                                    other, item.empty))
                    outcomes.append(PeriodOutcome(item.period, status, budget.release_id(digest, label, item.fingerprint),
                                                  other, served(files), ledger.spent))
                    if len(pending) >= KEEP_BATCH:
                        budget.keep_many(pending)
                        pending = []
            if progress is not None:
                progress((i + 1) / max(n, 1), f"{outcomes[-1].status.capitalize()} {label} ({i + 1}/{n})")
    finally:  # what was charged is stored, even when a later period fails
        if budget is not None and pending:
            budget.keep_many(pending)
    return _finish(plan, unit, outcomes, budget, digest, dict(time or {}), rule, cum)


def _reliability(rule: Any, outcomes: Sequence[PeriodOutcome]) -> dict[str, Any]:
    """series.json's ``reliability``: the rule and its counts summed over the periods."""
    totals = {"cells": 0, "suppressed": 0, "flagged": 0}
    for o in outcomes:
        rec = json.loads(o.files["release.json"]) if "release.json" in o.files else {}
        for k in totals:
            totals[k] += int(rec.get("reliability", {}).get(k, 0))
    return {**rule.to_dict(), **totals, "columns": [rule.column, rule.reason_column],
            "values_in": "<period>/release_full.csv"}


#: Periods charged in one transaction (one commit for the batch, every charge before any noise).
CHARGE_BATCH = KEEP_BATCH


def _in_order(plan: Any, inputs: Sequence[PeriodInput], found: Sequence[tuple[Any, Any]], budget: SeriesBudget | None,
              session: Any, noise: Any) -> Any:
    """``(index, release, ledger)`` of every period in time order (``(index, None, None)`` for a stored
    one): the new periods released :data:`CHARGE_BATCH` at a time by
    :func:`dpcore.pipeline.release_many`, all of a batch charged in one transaction before any of
    its noise is drawn."""
    from dpcore import pipeline

    chunk: list[int] = []

    def flush() -> Any:
        if not chunk:
            return
        aggregates = [inputs[j].aggregate() for j in chunk]
        if budget is None:
            made = [pipeline.release(plan, a, ledger=None, session=session, noise=noise) for a in aggregates]
            ledgers: list[Any] = [None] * len(chunk)
        else:
            ledgers = [budget.ledger(inputs[j].period.label) for j in chunk]
            made = pipeline.release_many(plan, aggregates, ledgers=ledgers, session=session, noise=noise)
        yield from zip(list(chunk), made, ledgers, strict=True)
        chunk.clear()

    for i in range(len(inputs)):
        if found[i][0] is not None:
            yield from flush()
            yield i, None, None
            continue
        chunk.append(i)
        if len(chunk) >= CHARGE_BATCH:
            yield from flush()
    yield from flush()


def _finish(plan: Any, unit: TimeUnit, outcomes: list[PeriodOutcome], budget: SeriesBudget | None, digest: str,
            time: dict[str, Any], rule: Any = None, cum: CumulativeRelease | None = None) -> SeriesRelease:
    """The series files: re-served when every period was and the series was kept before, else built and kept."""
    series_id = None
    if budget is not None:
        ids = "|".join(f"{o.period.label}={o.release_id}" for o in outcomes)
        if rule is not None:  # the series files differ by rule (the periods' noise does not)
            ids += "|rule=" + json.dumps(rule.to_dict(), sort_keys=True, default=str)
        if cum is not None:
            ids += f"|cumulative={cum.release_id}"
        series_id = budget.release_id(digest, "series", hashlib.sha256(ids.encode()).hexdigest())
        if all(o.status == "re-served" for o in outcomes):
            kept = budget.files(series_id)
            if kept:
                return SeriesRelease(plan.kind, unit, tuple(outcomes), kept, reserved=True)
    record = _series_record(plan, unit, outcomes, budget, digest, time)
    if rule is not None:
        record["reliability"] = _reliability(rule, outcomes)
    table = series_csv(outcomes)
    if cum is not None:
        record["cumulative"] = {**cum.record, "status": cum.status, "release_id": cum.release_id,
                                "columns": list(CUMULATIVE_COLUMNS)}
        table = series_csv_with_cumulative(table, cum)
    validate_record(record, "series")
    files = {"series.csv": table,
             "series.json": (json.dumps(record, indent=2, ensure_ascii=False) + "\n").encode("utf-8")}
    if budget is not None and series_id is not None:
        budget.store.record_release(budget.population, series_id, plan.kind,
                                    {"series": True, "plan": digest, "order": list(files)}, files)
    return SeriesRelease(plan.kind, unit, tuple(outcomes), files)


#: The columns a cumulative series adds to series.csv (``--cumulative``).
CUMULATIVE_COLUMNS = ("cumulative", "cumulative_sd", "cumulative_ci95_low", "cumulative_ci95_high")


@dataclass(frozen=True)
class CumulativeRelease:
    """A cumulative series: ``table`` (period, area and :data:`CUMULATIVE_COLUMNS`, as published),
    the plan's record (both figures and the recommendation), whether it was re-served, what it spent."""

    table: pd.DataFrame
    record: dict[str, Any]
    status: str
    release_id: str | None = None


def _cumulative_table(labels: Sequence[str], areas: Sequence[str], rel: Any) -> pd.DataFrame:
    from dpcore.privacy.calibration import normal_z

    Z95 = normal_z(0.95)
    T, n = rel.prefix.shape
    sd = np.repeat(rel.prefix_sd, n)
    value = rel.prefix.reshape(-1)
    return pd.DataFrame({"period": np.repeat(np.asarray(labels, dtype=object), n),
                         "area": np.tile(np.asarray(areas, dtype=object), T),
                         "cumulative": value, "cumulative_sd": sd,
                         "cumulative_ci95_low": value - Z95 * sd, "cumulative_ci95_high": value + Z95 * sd})


def release_cumulative(counts: np.ndarray, labels: Sequence[str], areas: Sequence[str], rho: float, *,
                       unit: TimeUnit, budget: SeriesBudget | None, fingerprint: str, session: Any = None,
                       noise: Any = None, statistic: str = "cumulative") -> CumulativeRelease:
    """Per-cell prefix sums over the periods by the square-root factorisation, charged once.

    ``counts`` is periods × cells (the public periods in order, empty ones as zeros; cells in the
    order of ``areas``).  One mechanism over the whole horizon
    (:func:`dpcore.estimate.prefix_sums.release_prefix_sums`), ρ-zCDP only, calibrated to the
    unit: one period's change (``w = 1``) of ``Δ = base.contribution`` (``√2·`` that for replace-one
    neighbours) for event and person-period units, the person's ``max_periods`` periods for ``person``.  It is charged **once**, to
    :meth:`~dpcore.privacy.series_ledger.SeriesBudget.cumulative_ledger` (every period counts it;
    the horizon figure counts ``ρ·horizon_rho_multiple``, not ``T·ρ``), before the noise is drawn,
    and kept: the same data and plan are re-served, never re-noised.  The record states the
    year-to-date and per-period variances of both designs
    (:func:`~dpcore.estimate.prefix_sums.compare_variances`) and the recommendation for ``statistic``.
    """
    from dpcore.core.session import Charge
    from dpcore.estimate.prefix_sums import (
        compare_variances,
        plan_prefix_sums,
        recommend,
        release_prefix_sums,
    )
    from dpcore.privacy.budget import zcdp
    from dpcore.privacy.series_ledger import CUMULATIVE

    x = np.asarray(counts, dtype=np.float64)
    T, cells = x.shape
    w = unit.max_periods if unit.scope == "person" else 1
    # one unit adds at most ``contribution`` to the cells of one period (L2 ≤ L1); replacing it moves
    # that much from some cells to others: √2 times as much in L2
    delta = float(unit.base.contribution) * (float(np.sqrt(2.0)) if unit.base.neighbour == "replace" else 1.0)
    plan = plan_prefix_sums(T, rho, cells=cells, periods_per_person=w, per_period_sensitivity=delta)
    cmp = compare_variances(T, rho, periods_per_person=w, per_period_sensitivity=delta)
    record = {"plan": plan.to_dict(), "comparison": {k: v for k, v in cmp.items()},
              "recommendation": {**{k: v for k, v in recommend(statistic, T, periods_per_person=w).items()
                                    if k != "comparison"},
                                 "by_statistic": {st: recommend(st, T, periods_per_person=w)["method"]
                                                  for st in ("period", "cumulative")}},
              "charge": {"cost": zcdp(rho).to_dict(), "once": True, "ledger": "cumulative" if unit.parallel
                         else "horizon", "horizon_rho_multiple": cmp["factorisation"]["horizon_rho_multiple"]}}
    details = {"mechanism": "prefix-sums", "periods": T, "cells": cells, "periods_per_person": w,
               "per_period_sensitivity": delta, "sensitivity": plan.sensitivity,
               "horizon_rho_multiple": cmp["factorisation"]["horizon_rho_multiple"]}
    digest = plan_digest({"cumulative": details, "rho": rho, "labels": list(labels), "areas": list(areas)})
    if budget is not None:
        stored, _other = budget.stored(digest, CUMULATIVE, fingerprint)
        if stored is not None:
            table = pd.read_csv(io.BytesIO(stored.files["cumulative.csv"]), dtype={"period": str, "area": str})
            return CumulativeRelease(table, record, "re-served", stored.release_id)
    charge = Charge(zcdp(rho), f"cumulative series of {T} periods (square-root factorisation)", details, unit.base)
    ledger = None if budget is None else budget.cumulative_ledger()

    def run() -> Any:
        return release_prefix_sums(x, rho, noise if noise is not None else _secure(), periods_per_person=w,
                                   per_period_sensitivity=delta)

    from dpcore.core.session import Session

    # charged before the noise is drawn, through the one session (an unaccounted one still charges
    # a ledger it is handed)
    rel = (session if session is not None else Session.unaccounted()).release(ledger, charge, run)
    table = _cumulative_table(labels, areas, rel)
    rid = None
    if budget is not None:
        data = csv_bytes(table, lambda d: d.to_csv(index=False).encode("utf-8"))
        rid = budget.keep(digest, CUMULATIVE, fingerprint, {"cumulative.csv": data},
                          {"period": CUMULATIVE, "status": "released", "plan": digest})
        table = pd.read_csv(io.BytesIO(data), dtype={"period": str, "area": str})  # as published, like a re-serve
    return CumulativeRelease(table, record, "released" if budget is not None else "not accounted", rid)


def _secure() -> Any:
    from dpcore.privacy.noise import secure_source

    return secure_source()


def series_csv_with_cumulative(series_bytes: bytes, cumulative: CumulativeRelease) -> bytes:
    """series.csv with the cumulative columns joined on (period, area): a cell of the cumulative
    series that is no row of the periods' files (a grid cell of a coarser partition, a pair no
    period published) gets a row of its own after its period's rows, the period columns empty.
    The periods' values are kept as published (text)."""
    frame = pd.read_csv(io.BytesIO(series_bytes), dtype=str, keep_default_na=False)
    cum = cumulative.table.astype({"period": str, "area": str})
    order = {p: i for i, p in enumerate(dict.fromkeys(cum["period"].tolist()))}
    merged = frame.merge(cum, on=["period", "area"], how="outer", sort=False, indicator=True)
    merged["_at"] = merged["period"].map(order).fillna(-1)
    merged["_new"] = merged["_merge"].eq("right_only")
    merged = merged.sort_values(["_at", "_new"], kind="stable").drop(columns=["_at", "_new", "_merge"])
    return csv_bytes(merged, lambda d: d.to_csv(index=False).encode("utf-8"))
