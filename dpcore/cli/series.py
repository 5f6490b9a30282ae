"""Command line, releases over time: the time options of ``release points|hierarchy|od`` (and of
``run CONFIG``), the series release of each kind (one release per public period, charged once per
period, re-served when asked again: :mod:`dpcore.series`) and ``budgets`` (the office view)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpcore.cli.common import (
    Made,
    cli_progress,
    cv_threshold,
    report_unreadable,
    suppress_rule,
    unreadable_hint,
)
from dpcore.errors import InputError, ParameterError
from dpcore.series import points_series_inputs, shared_aggregates, table_series_inputs

UNITS = ("event", "person-period", "person")


def add_time_args(p: argparse.ArgumentParser, *, user_args: bool = False) -> None:
    """The options of a release over time (every ``release`` command that can be a series)."""
    g = p.add_argument_group("releases over time (a series: one release per public period)")
    g.add_argument("--time-col", help="the time column (timestamps or dates): release one period at a time; "
                                      "needs --time-range")
    g.add_argument("--period", default="day",
                   help="day (default), week (ISO), month, or a fixed length such as 6h, 3d, 2w")
    g.add_argument("--time-range", metavar="START,END",
                   help="the public time range, e.g. 2014-04-01,2014-04-30 (END's whole day included): the periods "
                        "come from it, never from the data, so an empty period is released too")
    g.add_argument("--unit", choices=UNITS,
                   help="unit of privacy over time: event (one record; default without --user-col), person-period "
                        "(one person's records in one period, capped by --user-cap; default with --user-col) or "
                        "person (one person over the whole range, in at most --max-periods periods)")
    g.add_argument("--max-periods", type=int,
                   help="--unit person: the most periods one person may touch (the others are dropped by a keyed "
                        "random choice before anything else)")
    g.add_argument("--horizon-cap", type=float,
                   help="refuse a period's release that would take the horizon figure (the sum over periods for a "
                        "person present in all of them; ε with --epsilon, ρ with --rho) past this")
    g.add_argument("--cumulative", action="store_true",
                   help="also release every cell's cumulative (year-to-date) counts over the periods by the "
                        "square-root factorisation: one mechanism for the whole range, charged once at --rho "
                        "(zCDP only); series.csv gains cumulative, cumulative_sd and its 95 %% interval")
    if user_args:
        g.add_argument("--user-col", help="column identifying a person (with --unit person-period or person)")
        g.add_argument("--user-cap", type=int, help="at most this many records per person and period")


def add_budgets_parser(sub: Any) -> argparse.ArgumentParser:
    b = sub.add_parser("budgets", help="list every budget in the budget database (the office view)")
    b.add_argument("--json", action="store_true", help="print the list as JSON")
    b.add_argument("--budget-db", metavar="FILE", help="the budget database (default: the app's)")
    return b


def cmd_budgets(args: argparse.Namespace) -> int:
    """``budgets``: population, unit, periods, spent and cap per period, horizon figure, releases."""
    from dpcore.core.session import Session

    rows = Session.open(args.budget_db or None).budgets()
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print("No budgets yet.")
    for r in rows:
        unit = (r["unit"] or {}).get("label", "one record")
        print(f"{r['population']}  [{r['kind']}]  {unit}")
        per = f" per {r.get('cap_per', 'release set')}" if r["periods"] else ""
        print(f"    cap {r['cap']['label']}{per}; spent {r['spent']:.4g}; {r['releases']} releases")
        if r.get("counted"):  # a linked release of another definition or unit: its periods refuse every charge
            print(f"    {r['counted']}")
        for p in r["periods"]:
            print(f"    {p['period']}: spent {p['spent']:.4g} ({p['releases']} releases)")
        h = r["horizon"]
        eps = next((e["epsilon"] for e in h["epsilon"] if e["delta"] == 1e-6), 0.0)
        print(f"    horizon (a person in every period): ρ = {h['rho']:.4g} (ε ≈ {eps:.3g} at δ = 1e-6); "
              f"{h['projection']['text']}")
    return 0


def time_options(args: argparse.Namespace) -> Any:
    """The parsed periods of a series (None without --time-col), after checking the time options."""
    from dpcore.core.periods import parse_period, parse_time_range, periods_in

    cumulative = bool(getattr(args, "cumulative", False))
    given = [f for f, v in (("--unit", args.unit), ("--max-periods", args.max_periods),
                            ("--horizon-cap", args.horizon_cap), ("--cumulative", cumulative or None)) if v is not None]
    if cumulative and getattr(args, "epsilon", None) is not None:  # refused before any data is read
        raise ParameterError("--cumulative releases Gaussian noise (ρ-zCDP): give the budget with --rho instead of "
                             "--epsilon.")
    if not getattr(args, "time_col", None):
        if args.time_range or given:
            raise ParameterError(f"{', '.join(['--time-range'] * bool(args.time_range) + given)} describe a release "
                                 "over time: give the time column with --time-col.")
        return None
    if not args.time_range:
        raise ParameterError("--time-col needs --time-range START,END (public: the periods come from it, never from "
                             "the data), e.g. --time-range 2014-04-01,2014-04-30.")
    period = parse_period(args.period)
    start, end = parse_time_range(args.time_range)
    return periods_in(start, end, period)


def time_unit(args: argparse.Namespace, base: Any) -> Any:
    """The unit over time of the series: --unit (default event, or person-period with a person column)."""
    from dpcore.privacy.units import TimeUnit

    scope = args.unit or ("person-period" if base.entity == "person" else "event")
    return TimeUnit(scope, base, str(args.period).strip().lower(), args.max_periods)


def series_session(args: argparse.Namespace, session: Any) -> Any:
    """The session a series is charged through (opened before the data is read: its install secret
    keys the sampling of periods, so the same data is sampled alike on every run)."""
    from dpcore.core.session import Session

    if session is not None:
        return session
    return Session.unaccounted() if args.no_budget else Session.open(args.budget_db or None)


def run_series(args: argparse.Namespace, plan: Any, periods: list[Any], inputs: list[Any], whole_fp: str,
               files_options: dict[str, Any], make: Any, session: Any,
               cap: float | None = None, oneoff: tuple[str, str] | None = None,
               cells_of: Callable[[Any], tuple[list[str], Any]] | None = None) -> Made:
    """Open the series budget, release (or re-serve) every period, write the folders and series files.

    ``oneoff``: the (kind, fingerprint) a one-off release of the same input is keyed by, whose budget
    the series composes with (:mod:`dpcore.privacy.oneoff_links`); ``cells_of(aggregate) -> (ids,
    values)`` the public cells of one period's aggregate, for ``--cumulative``."""
    from dpcore.core.session import default_cap
    from dpcore.series import release_series

    unit = time_unit(args, plan.unit)
    if args.no_budget:
        if args.budget_cap is not None or args.population or args.horizon_cap is not None:
            raise ParameterError("--no-budget charges nothing: drop --budget-cap, --population and --horizon-cap.")
        budget = None
    else:
        if args.ledger:
            raise ParameterError("A release over time keeps its budget in the budget database (one ledger per "
                                 "period): drop --ledger (use --budget-db FILE for another database).")
        cap_value = cap if cap is not None else args.budget_cap
        default = make(cap_value) if cap_value is not None else default_cap(plan.cost)
        horizon = make(args.horizon_cap) if args.horizon_cap is not None else None
        pairs = [(i.period.label, i.fingerprint) for i in inputs if not i.empty]
        budget = session.series_budget(plan.kind, whole_fp, pairs, unit, default=default, horizon_cap=horizon,
                                       population=args.population, oneoff=[oneoff] if oneoff else [])
    if getattr(args, "cumulative", False):  # the cumulative and the periods build each aggregate once
        inputs = shared_aggregates(inputs)
    cumulative, cumulative_cost = cumulative_step(args, plan, inputs, cells_of, unit, budget, whole_fp, session)
    show = cli_progress("Releasing the periods")
    series = release_series(plan, inputs, unit=unit, budget=budget, session=session, files_options=files_options,
                            suppress=suppress_rule(args), cumulative=cumulative, cumulative_cost=cumulative_cost,
                            cv_threshold=cv_threshold(args),
                            progress=(lambda f, m: show(f, m)) if show else None,
                            time={"column": args.time_col, "period": str(args.period), "range": args.time_range})
    paths = series.write(args.out)
    n = len(series.outcomes)
    counts = {s: sum(o.status == s for o in series.outcomes) for s in ("released", "re-served", "correction")}
    if budget is None:
        tail = "not accounted (--no-budget): nothing was charged and the record says so."
    else:
        h = series.record["horizon"]
        tail = (f"horizon (a person in every period) ρ = {h['rho']:.4g}; {h['projection']['text']}; "
                f"budget database '{budget.store.path}'.")
    if counts["re-served"] == n:
        head = (f"Re-served all {n} periods from the stored releases (byte-identical, nothing charged); "
                f"series files {'re-served' if series.reserved else 'rebuilt'}")
    else:
        parts = [f"{v} {k}" for k, v in counts.items() if v]
        head = (f"Series of {n} periods ({plan.unit.label() if budget is None else unit.label()}): "
                f"{', '.join(parts)}; {series.charged} charged {plan.cost.label()} each")
    cum = series.record.get("cumulative")
    if cum is not None:
        head += (f"; cumulative series (square-root factorisation) {cum['status']}"
                 + (f", charged once {plan.cost.label()}" if cum["status"] == "released" else ", nothing charged")
                 + f" ({cum['recommendation']['reason'].split(':')[0]})")
    for o in series.outcomes:
        if o.status == "correction":
            print(f"Period {o.period.label}: its data changed since {o.correction_of}; released again as a "
                  "correction (charged).", file=sys.stderr)
    return Made(series, paths, f"{head}; {tail}")


def cumulative_step(args: argparse.Namespace, plan: Any, inputs: list[Any],
                    cells_of: Callable[[Any], tuple[list[str], Any]] | None, unit: Any, budget: Any, whole_fp: str,
                    session: Any) -> tuple[Callable[[], Any] | None, tuple[Any, float] | None]:
    """``--cumulative``: the release of every cell's cumulative counts (``dpcore.series.release_cumulative``),
    at the series' ρ, charged once; refused under pure ε (the factorisation's noise is Gaussian).
    Returns the release step and its (cost, horizon share) for the periods' pre-check."""
    if not getattr(args, "cumulative", False):
        return None, None
    if plan.cost.definition != "zcdp":
        raise ParameterError("--cumulative releases Gaussian noise (ρ-zCDP): give the budget with --rho instead of "
                             "--epsilon.")
    if cells_of is None:
        raise ParameterError("--cumulative is not available for this release: drop --cumulative.")
    from dpcore.series import release_cumulative

    def run() -> Any:
        ids: list[str] = []
        rows = []
        for item in inputs:
            ids, values = cells_of(item.aggregate())
            rows.append(np.asarray(values, dtype=np.float64).ravel())
        if len(inputs) * max(len(ids), 1) > 50_000_000:
            raise ParameterError(f"--cumulative over {len(inputs)} periods × {len(ids):,} cells is too large for one "
                                 "release; use a coarser grid or fewer areas.")
        return release_cumulative(np.vstack(rows), [i.period.label for i in inputs], ids, plan.cost.value, unit=unit,
                                  budget=budget, fingerprint=whole_fp, session=session)

    from dpcore.estimate.prefix_sums import compare_variances

    multiple = compare_variances(len(inputs))["factorisation"]["horizon_rho_multiple"] if unit.parallel else 1.0
    return run, (plan.cost, plan.cost.value * multiple)


def points_series(args: argparse.Namespace, plan: Any, grid: Any, make: Any, session: Any) -> Made:
    """``release points --time-col ...``: the points grouped by period once, one release per period."""
    from dpcore.data.columns import detect_coordinate_columns
    from dpcore.data.tables import read_table

    periods = time_options(args)
    path = Path(args.input)
    if not path.exists():
        raise InputError(f"Input file '{path}' does not exist. Check the path given to --input.")
    df = read_table(path, path.name)
    lat, lon = args.lat_col, args.lon_col
    if lat is None or lon is None:
        found_lat, found_lon = detect_coordinate_columns(df)
        lat, lon = lat or found_lat, lon or found_lon
    unit = time_unit(args, plan.unit)
    session = series_session(args, session)
    dropped: dict[str, int] = {}
    with unreadable_hint():
        inputs, whole, key = points_series_inputs(df, args.time_col, periods, lat, lon, args.user_col, unit, session,
                                                  grid, args.user_cap, path.name,
                                                  drop_unreadable=bool(getattr(args, "drop_unreadable", False)),
                                                  dropped=dropped)
    report_unreadable(dropped)
    oneoff = ("points", key) if key is not None else None
    return run_series(args, plan, periods, inputs, whole, {}, make, session, oneoff=oneoff, cells_of=grid_cells)


def table_series(args: argparse.Namespace, plan: Any, df: pd.DataFrame, columns: list[str], count: str | None,
                 build: Callable[[pd.DataFrame], Any], files_options: dict[str, Any],
                 make: Any, session: Any, user: str | None = None, cap: float | None = None,
                 oneoff: tuple[str, str] | None = None,
                 cells_of: Callable[[Any], tuple[list[str], Any]] | None = None) -> Made:
    """A series of a table kind (hierarchy, od): the rows grouped by period once, ``build(rows)`` the
    aggregate of one period's rows, ``columns``/``count`` what its content fingerprint reads."""
    periods = time_options(args)
    unit = time_unit(args, plan.unit)
    # a count table confirmed to count each person once per period (--each-person-counted-once) is a
    # person-period series without a person column: its base unit is one person, uncapped
    confirmed = bool(getattr(args, "each_person_counted_once", False)) and unit.scope == "person-period"
    if unit.scope != "event" and not user and not confirmed:
        raise ParameterError(f"--unit {unit.scope} needs the person column (--user-col).")
    session = series_session(args, session)
    inputs, whole = table_series_inputs(df, args.time_col, periods, columns, count, build, unit, session, user)
    return run_series(args, plan, periods, inputs, whole, files_options, make, session, cap=cap, oneoff=oneoff,
                      cells_of=cells_of)


def grid_cells(agg: Any) -> tuple[list[str], Any]:
    """The fine grid cells of a period's frequency matrix (ids ``r<row>c<col>``, row south to north)."""
    ny, nx = agg.counts.shape
    return [f"r{r}c{c}" for r in range(ny) for c in range(nx)], agg.counts.ravel()


def leaf_cells(counts: Any) -> tuple[list[str], Any]:
    """The finest areas of a period's hierarchy counts (their codes); group sizes are refused."""
    if counts.leaf.ndim != 1:
        raise ParameterError("--cumulative releases counts per area; drop --group-col (group sizes), or --cumulative.")
    h = counts.hierarchy
    return [str(x) for x in h.labels(h.depth)], counts.leaf


def pair_cells(counts: Any) -> tuple[list[str], Any]:
    """Every finest (origin, destination) pair of a period's trips (``origin->destination``), dense."""
    o_h, d_h = counts.origin_h, counts.destination_h
    o_codes, d_codes = [str(x) for x in o_h.labels(o_h.depth)], [str(x) for x in d_h.labels(d_h.depth)]
    dense = np.zeros(len(o_codes) * len(d_codes))
    np.add.at(dense, np.asarray(counts.origin, dtype=np.int64) * len(d_codes) + np.asarray(counts.destination,
                                                                                           dtype=np.int64),
              np.asarray(counts.count, dtype=np.float64))
    return [f"{o}->{d}" for o in o_codes for d in d_codes], dense
