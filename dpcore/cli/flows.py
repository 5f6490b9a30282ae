"""Command line, flow command: ``release od`` (origin/destination flows over a public hierarchy),
with the (ε, δ) → ρ conversion of its budget and the detection of trip and coordinate columns."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dpcore.cli.common import (
    Made,
    add_budget_args,
    add_suppress_arg,
    cli_progress,
    cv_threshold,
    deliver,
    engine_args,
    engine_for,
    neighbour_arg,
    open_budget,
    parse_params,
    split_list,
    suppress_rule,
)
from dpcore.cli.series import add_time_args, pair_cells, table_series, time_options
from dpcore.cli.spec_args import arguments
from dpcore.core.spec import ReleaseSpec
from dpcore.errors import DPCoreError, InputError, ParameterError, curator_only


def add_od_parser(rsub: Any) -> argparse.ArgumentParser:
    from dpcore import catalog

    od = rsub.add_parser("od", help="release origin/destination flows over a public hierarchy (InfTDA)")
    od.add_argument("--input", required=True,
                    help="trips: CSV (optionally .gz) or Parquet, one row per trip or per (origin, destination, count)")
    od.add_argument("--hierarchy", required=True,
                    help="public list of every finest area: CSV (optionally .gz), Parquet or GeoJSON")
    od.add_argument("--levels", help="code columns of the hierarchy file, top first, e.g. state,county,tract")
    od.add_argument("--code-column", help="one column with the finest code; levels are its prefixes "
                                          "(with --prefix-lengths)")
    od.add_argument("--prefix-lengths", help="prefix length of each level, e.g. 2,5,11,12,15 for census blocks")
    od.add_argument("--level-names", help="names of the prefix levels, e.g. state,county,tract,block_group,block")
    od.add_argument("--codes", default="auto", choices=["auto", "global", "within_parent"],
                    help="with --levels: are codes unique across their level (global) or only within their parent?")
    od.add_argument("--names", action="append", default=[], metavar="LEVEL=COLUMN",
                    help="column of the hierarchy file with the public display name of a level's areas (repeatable)")
    od.add_argument("--origin", help="origin column of the trips (detected by name if omitted)")
    od.add_argument("--destination", help="destination column of the trips (detected by name if omitted)")
    od.add_argument("--count", help="count column (detected by name if omitted; none = one row per trip)")
    od.add_argument("--user-col", "--user", dest="user",
                    help="person-id column: each person keeps at most --max-trips trips (per period in a series)")
    od.add_argument("--user-cap", "--max-trips", dest="max_trips", type=int, default=1,
                    help="most trips one person contributes (m, default 1; per period in a series)")
    od.add_argument("--repeats", action="store_true",
                    help="a person's trips may repeat the same pair (default: distinct pairs)")
    od.add_argument("--drop-unmatched", action="store_true",
                    help="drop trips whose origin or destination is missing or not a finest area (else an error)")
    od.add_argument("--mechanism", default="inftda", help=f"one of: {', '.join(catalog.names('od'))} (default inftda)")
    od.add_argument("--epsilon", type=str, help="ε: with --delta an (ε, δ) target converted to ρ-zCDP; "
                                                "with --pure a pure ε-DP budget (discrete Laplace)")
    od.add_argument("--delta", type=float, help="δ of the (ε, δ) target (e.g. 1e-8); with --rho the δ at which "
                                                "ρ is read as (ε, δ) (default 1e-8)")
    od.add_argument("--rho", type=str, help="ρ-zCDP budget of this release (discrete Gaussian noise)")
    od.add_argument("--pure", action="store_true", help="with --epsilon: pure ε-DP (discrete Laplace noise)")
    od.add_argument("--conversion", default="classic", choices=["classic", "cks"],
                    help="(ε, δ) → ρ: classic ρ = (√(ln(1/δ)+ε) − √ln(1/δ))² (the paper's Lemma 3, default) "
                         "or cks (Canonne-Kamath-Steinke, tighter: a larger ρ for the same (ε, δ))")
    od.add_argument("--neighbour", default="replace", type=neighbour_arg, metavar="{replace,add_remove}",
                    help="replace: replace one person, the total is public (default; alias bounded); add_remove: "
                         "add or remove one person (alias unbounded)")
    od.add_argument("--orientation", default="destination", choices=["destination", "origin"],
                    help="which end is refined first in the O/D tree (default destination)")
    od.add_argument("--split", default="uniform",
                    help="budget across the measured tree levels: uniform, geometric, or weights w1,w2,... (top first)")
    od.add_argument("--order", default="ascending", choices=["ascending", "descending"],
                    help="IntOpt zeroing order: ascending (fewer spurious flows) or descending (fewer missed)")
    od.add_argument("--tiebreak", default="random", choices=["random", "index"], help="IntOpt ties (default random)")
    od.add_argument("--boundaries", action="append", default=[], metavar="LEVEL=FILE",
                    help="boundaries of a level (GeoJSON, GeoPackage, zipped shapefile); their centroids are the "
                         "ends of the flow lines in flows.geojson (repeatable)")
    od.add_argument("--coordinates", help="public points of the finest areas (CSV/Parquet, e.g. block internal "
                                          "points); the mean point of each area's finest areas ends its flow lines")
    od.add_argument("--coord-code", help="code column of --coordinates (default: detected)")
    od.add_argument("--lat", help="latitude column of --coordinates (default: detected)")
    od.add_argument("--lon", help="longitude column of --coordinates (default: detected)")
    od.add_argument("--geojson-top", type=int, help="flows.geojson keeps only the largest N flows per level")
    od.add_argument("--out", required=True, help="output folder for release.csv, release.json, flows.geojson")
    add_suppress_arg(od)
    add_budget_args(od)  # --budget-cap: ε with --pure, ρ with --rho, an ε at the same δ with --epsilon/--delta
    add_time_args(od)
    engine_args(od)
    return od


#: Census block codes: state, county, tract, block group, block.
_CENSUS_PREFIXES = {2: "state", 5: "county", 11: "tract", 12: "block_group", 15: "block"}
#: (origin, destination) column names recognised without --origin/--destination, first match wins.
_OD_COLUMN_PAIRS = [("origin", "destination"), ("h_geocode", "w_geocode"), ("PULocationID", "DOLocationID"),
                    ("h_fips", "w_fips"), ("orig", "dest"), ("from", "to")]
_OD_COUNT_COLUMNS = ["count", "S000", "flow", "trips", "n"]
_LAT_COLUMNS = ["blklatdd", "lat", "latitude", "intptlat", "y"]
_LON_COLUMNS = ["blklondd", "lon", "lng", "long", "longitude", "intptlon", "x"]


def classic_rho(epsilon: float, delta: float) -> float:
    """(ε, δ) → ρ by the InfTDA paper's Lemma 3 (:func:`dpcore.privacy.budget.approx_dp_to_zcdp_classic`)."""
    from dpcore.privacy import budget

    return budget.approx_dp_to_zcdp_classic(epsilon, delta)


def _find_column(columns: list[str], candidates: list[str]) -> str | None:
    low = {str(c).lower(): c for c in columns}
    for cand in candidates:
        if cand.lower() in low:
            return low[cand.lower()]
    return None


def _od_cost(args: argparse.Namespace) -> tuple[Any, Any, float, dict[str, Any], float | None]:
    """(make, cost, δ for the reading, record of how the budget was given, ledger cap in cost units)."""
    from dpcore.privacy import budget

    def number(flag: str, text: str) -> float:
        try:
            return float(text)
        except ValueError:
            raise ParameterError(f"{flag} '{text}' is not a number; use e.g. {flag} 0.5.") from None

    cap = args.budget_cap
    if args.rho is not None:
        if args.epsilon is not None or args.pure:
            raise ParameterError("Give either --rho R, or --epsilon E with --delta D (or with --pure), not both.")
        rho = number("--rho", args.rho)
        delta = args.delta if args.delta is not None else 1e-8
        return budget.zcdp, budget.zcdp(rho), delta, {"given": "rho", "rho": rho}, cap
    if args.epsilon is None:
        raise ParameterError("Give the privacy budget: --epsilon E --delta D (converted to ρ-zCDP), --rho R, "
                             "or --epsilon E --pure (pure ε-DP).")
    eps = number("--epsilon", args.epsilon)
    if args.pure:
        if args.delta is not None:
            raise ParameterError("--pure is ε-DP without δ; drop --delta (or drop --pure for (ε, δ) → ρ-zCDP).")
        return budget.pure, budget.pure(eps), 1e-8, {"given": "pure epsilon", "epsilon": eps}, cap
    if args.delta is None:
        raise ParameterError(
            "--epsilon needs --delta (e.g. --delta 1e-8, the (ε, δ) target converted to ρ-zCDP), or --pure for "
            "pure ε-DP with discrete Laplace noise.")
    delta = float(args.delta)
    if args.conversion == "cks":
        def conv(e: float) -> float:
            return budget.approx_dp_to_zcdp(e, delta)
        how = "Canonne, Kamath & Steinke (2020): the largest rho whose (epsilon, delta) reading is at most epsilon"
    else:
        def conv(e: float) -> float:
            return classic_rho(e, delta)
        how = "classic: rho = (sqrt(ln(1/delta) + epsilon) - sqrt(ln(1/delta)))^2 (Lemma 3 of the InfTDA paper)"
    rho = conv(eps)
    given = {"given": "epsilon, delta", "epsilon": eps, "delta": delta, "conversion": args.conversion,
             "conversion_formula": how, "rho": rho}
    if cap is not None:
        cap = conv(float(cap))  # the cap is an ε at the same δ: converted the same way
        given["budget_cap_epsilon"] = float(args.budget_cap)
    return budget.zcdp, budget.zcdp(rho), delta, given, cap


def _read_od_hierarchy_file(path: str, columns: Any = None) -> Any:
    """The public area list as text columns (CSV/Parquet via read_code_table, ``columns`` choosing
    which from a CSV's header; GeoJSON properties)."""
    import pandas as pd

    from dpcore.data.boundaries import read_boundaries
    from dpcore.data.code_tables import code_text, read_code_table

    p = Path(path)
    if not p.exists():
        raise DPCoreError(f"Hierarchy file '{p}' does not exist. Check the path given to --hierarchy.")
    head = p.read_bytes()[:64].lstrip()
    if p.suffix.lower() in (".geojson", ".json") or head[:1] == b"{":
        gdf = read_boundaries(p)
        df = pd.DataFrame(gdf.drop(columns=gdf.geometry.name))
        for c in df.columns:  # codes as text: 7 not 7.0, leading zeros as stored
            df[c] = code_text(df[c]).set_axis(df.index)
        return df
    return read_code_table(p, columns=columns)


def _hierarchy_columns(args: argparse.Namespace, names: dict[str, str]) -> Any:
    """The hierarchy file's columns that the release reads (a chooser for read_code_table): with
    --code-column, that column, the --names columns and, when --coordinates is the same file, its
    code, latitude and longitude columns; None (every column) with --levels or when a named column
    is missing (so that the error lists the file's columns)."""
    if args.levels or not args.code_column:
        return None

    def needed(cols: list[str]) -> list[str] | None:
        want = [args.code_column, *names.values()]
        if args.coordinates and Path(args.coordinates).resolve() == Path(args.hierarchy).resolve():
            want += [args.coord_code or _find_column(
                         cols, [c for c in (args.code_column, "tabblk2010", "GEOID", "code", "id") if c]),
                     args.lat or _find_column(cols, _LAT_COLUMNS), args.lon or _find_column(cols, _LON_COLUMNS)]
        return want if all(c is not None and c in cols for c in want) else None

    return needed


def _od_hierarchy(args: argparse.Namespace) -> tuple[Any, Any]:
    """(hierarchy, the hierarchy file's table)."""
    import pandas as pd

    from dpcore.data.hierarchy import Hierarchy
    from dpcore.flows.tree import hierarchy_from_prefixes

    names = parse_params(args.names)
    if args.levels and (args.code_column or args.prefix_lengths):
        raise ParameterError("Give the hierarchy either with --levels COL,COL,... or with --code-column COL "
                             "--prefix-lengths 2,5,..., not both.")
    if not args.levels and not (args.code_column and args.prefix_lengths):
        raise ParameterError("Say how the hierarchy file is read: --levels state,county,... (one code column per "
                             "level, top first) or --code-column COL --prefix-lengths 2,5,11,12,15.")
    df = _read_od_hierarchy_file(args.hierarchy, _hierarchy_columns(args, names))
    if args.levels:
        if args.level_names:
            raise ParameterError("--level-names goes with --prefix-lengths; with --levels the columns name the levels.")
        levels = split_list(args.levels, "--levels", str, "state,county,tract")
        return Hierarchy.from_frame(df, levels, codes=args.codes, names=names, source="area list"), df
    lengths = split_list(args.prefix_lengths, "--prefix-lengths", int, "2,5,11,12,15")
    if args.level_names:
        lv_names = split_list(args.level_names, "--level-names", str, "state,county,tract")
    elif all(n in _CENSUS_PREFIXES for n in lengths):
        lv_names = [_CENSUS_PREFIXES[n] for n in lengths]
    else:
        lv_names = [f"level{i + 1}" for i in range(len(lengths))]
    if args.code_column not in df.columns:
        raise InputError(f"The hierarchy file has no column '{args.code_column}' (--code-column). Its columns: "
                         f"{', '.join(map(str, list(df.columns)[:20]))}.")
    h = hierarchy_from_prefixes(df[args.code_column], lengths, lv_names)
    if not names:
        return h, df
    for lv, col in names.items():
        if lv not in lv_names:
            raise ParameterError(f"--names gives names for '{lv}', which is not a level ({', '.join(lv_names)}).")
        if col not in df.columns:
            raise InputError(f"The hierarchy file has no name column '{col}' (--names {lv}={col}).")
    codes = df[args.code_column].astype("string").str.strip()
    frame = {n: codes.str.slice(0, ln) for n, ln in zip(lv_names, lengths, strict=True)}
    cols = {f"__name_{lv}": df[col] for lv, col in names.items()}
    return Hierarchy.from_frame(pd.DataFrame({**frame, **cols}), lv_names, codes="global",
                                names={lv: f"__name_{lv}" for lv in names}, source="area list"), df


def _od_counts_by_engine(args: argparse.Namespace, h: Any, eng: Any, src: Any) -> Any:
    """O/D counts of a large trips input: the engine groups the rows by (origin, destination) with
    the per-person cap; only that small table is matched to the hierarchy in memory."""
    from dpcore.flows.counts import ODCounts
    from dpcore.flows.tree import match_leaves

    if args.drop_unmatched and args.user:
        raise ParameterError(
            "--drop-unmatched with --user needs the rows dropped before each person's trips are capped, which only the "
            "in-memory engine does: use --engine numpy, or remove the unmatched trips from the file first.")
    origin, destination, count = _od_columns(args, eng.columns(src))
    cc = eng.code_counts(src, [origin, destination], count=count, user=args.user,
                         cap=args.max_trips if args.user else None, distinct=not args.repeats,
                         progress=cli_progress("Counting trips"), drop_missing=args.drop_unmatched)
    if args.drop_unmatched:
        f = cc.frame
        keep = (match_leaves(h, f[origin]) >= 0) & (match_leaves(h, f[destination]) >= 0)
        n_drop = int(f.loc[~keep, "count_all"].sum()) + cc.n_missing
        if n_drop:
            print(curator_only(f"Dropped {n_drop:,} trips whose origin or destination is not a finest area "
                               f"('{h.levels[-1]}') of the hierarchy (not in the export)."), file=sys.stderr)
            cc = type(cc)(f.loc[keep].reset_index(drop=True), cc.keys, cc.n_read, cc.n_capped, cc.engine,
                          cc.n_missing)
    return ODCounts.from_code_counts(cc, h, max_trips=args.max_trips if args.user else 1, persons=bool(args.user),
                                        distinct=not args.repeats)


def _od_columns(args: argparse.Namespace, columns: list[str]) -> tuple[str, str, str | None]:
    detected = []
    origin, destination, count = args.origin, args.destination, args.count
    if origin is None or destination is None:
        for o, d in _OD_COLUMN_PAIRS:
            fo, fd = _find_column(columns, [o]), _find_column(columns, [d])
            if fo is not None and fd is not None:
                if origin is None:
                    origin = fo
                    detected.append(f"origin={fo}")
                if destination is None:
                    destination = fd
                    detected.append(f"destination={fd}")
                break
        if origin is None or destination is None:
            raise InputError(
                "Cannot tell which columns hold the origin and the destination. Name them with --origin COL "
                f"--destination COL; the trips table has the columns: {', '.join(map(str, columns[:30]))}.")
    for col, flag in ((origin, "--origin"), (destination, "--destination"), (count, "--count"),
                      (args.user, "--user")):
        if col is not None and col not in columns:
            raise InputError(f"The trips table has no column '{col}' ({flag}). Its columns: "
                             f"{', '.join(map(str, columns[:30]))}.")
    if count is None and args.user is None:
        count = _find_column([c for c in columns if c not in (origin, destination)], _OD_COUNT_COLUMNS)
        if count is not None:
            detected.append(f"count={count}")
    if detected:
        print(f"Using the trip columns {', '.join(detected)} (detected by name; set --origin, --destination, "
              "--count to choose others).")
    return origin, destination, count


def _od_coordinates(args: argparse.Namespace, h: Any, hier_df: Any = None) -> dict[int, Any] | None:
    import numpy as np

    from dpcore.data.boundaries import read_boundaries
    from dpcore.data.code_tables import read_code_table
    from dpcore.flows import export as od_export

    xy: dict[int, Any] = {}
    if args.coordinates:
        p = Path(args.coordinates)
        if not p.exists():
            raise DPCoreError(f"Coordinates file '{p}' does not exist. Check the path given to --coordinates.")
        same = hier_df is not None and p.resolve() == Path(args.hierarchy).resolve()
        cdf = hier_df if same else read_code_table(p)  # e.g. the LODES crosswalk serves as both
        cols = [str(c) for c in cdf.columns]
        code = args.coord_code or _find_column(
            cols, [c for c in (args.code_column, "tabblk2010", "GEOID", "code", "id") if c])
        lat = args.lat or _find_column(cols, _LAT_COLUMNS)
        lon = args.lon or _find_column(cols, _LON_COLUMNS)
        for col, flag in ((code, "--coord-code"), (lat, "--lat"), (lon, "--lon")):
            if col is None or col not in cdf.columns:
                raise InputError(f"The coordinates file has no {flag} column{f' {col!r}' if col else ''}. Name it "
                                 f"with {flag} COL; its columns: {', '.join(cols[:30])}.")
        xy.update(od_export.centroids_from_points(h, cdf[code], cdf[lon], cdf[lat]))
        n_leaf = int(np.isfinite(xy[h.depth][0]).sum())
        if n_leaf < h.n_leaves:
            print(f"warning: {h.n_leaves - n_leaf:,} of {h.n_leaves:,} finest areas have no point in the "
                  "coordinates file; their finest-level flows are left out of flows.geojson.",
                  file=sys.stderr)
    for lv, file in parse_params(args.boundaries).items():
        if lv not in h.levels:
            raise ParameterError(f"--boundaries names the level '{lv}', which is not a level "
                                 f"({', '.join(h.levels)}).")
        d = h.depth_of(lv)
        lon_a, lat_a, missing = od_export.centroids_from_boundaries(h, d, read_boundaries(file))
        if missing:
            print(f"warning: boundaries of '{lv}': {len(missing):,} areas have no boundary "
                  f"(e.g. {', '.join(missing[:5])}); their flows are left out of flows.geojson.", file=sys.stderr)
        xy[d] = (lon_a, lat_a)
    return xy or None


def _read_trips(args: argparse.Namespace, h: Any) -> tuple[Any, str, str, str | None]:
    """The trips table read in memory, its (origin, destination, count) columns, and the unmatched rows
    dropped with --drop-unmatched (counted on stderr, marked curator-only)."""
    from dpcore.data.code_tables import read_code_table
    from dpcore.flows.tree import match_leaves

    found: list[tuple[str, str, str | None]] = []

    def needed(names: list[str]) -> list[str]:  # the trips' columns, chosen from the header alone
        found.append(_od_columns(args, names))
        return [c for c in (*found[0], args.user, getattr(args, "time_col", None)) if c]

    df = read_code_table(Path(args.input), columns=needed)
    origin, destination, count = found[0] if found else _od_columns(args, [str(c) for c in df.columns])
    if args.drop_unmatched:
        keep = (match_leaves(h, df[origin]) >= 0) & (match_leaves(h, df[destination]) >= 0)
        n_drop = int((~keep).sum())
        if n_drop:
            # a count of confidential rows: to stderr, marked for the curator (logs are read more widely)
            print(curator_only(f"Dropped {n_drop:,} of {len(df):,} trip rows whose origin or destination is missing "
                               f"or not a finest area ('{h.levels[-1]}') of the hierarchy (not in the export)."),
                  file=sys.stderr)
            df = df.loc[keep].reset_index(drop=True)
    return df, origin, destination, count


def execute_od(spec: ReleaseSpec, session: Any = None) -> Made:
    """``release od``: origin/destination flows over a public hierarchy, written to the output folder.

    The plan is built once (``catalog.get("od", name).plan``) from the public hierarchy, before the
    trips are read or any budget is opened, and released through :func:`dpcore.pipeline.release`."""
    args = arguments(spec)  # the options, defaults included, as the parser gives them
    from dpcore import catalog, pipeline
    from dpcore.flows.counts import ODCounts, trips_fingerprint
    from dpcore.flows.unit import od_unit
    from dpcore.privacy import budget

    # everything that needs no data is checked before the trips are read or budget is spent
    make, cost, delta, given, cap = _od_cost(args)
    rule, cv = suppress_rule(args), cv_threshold(args)
    info = catalog.get("od", args.mechanism)
    if not info.definitions:
        raise ParameterError(
            f"{info.title} is (ε, δ)-DP; its cost cannot be added to a pure-ε or zCDP budget ledger, so "
            "'release od' does not run it. Use --mechanism inftda (or compare with it in the benchmarks).")
    split_text = str(args.split).strip()
    if split_text in ("uniform", "geometric"):
        split, weights = split_text, None
    else:
        split, weights = "custom", split_list(split_text, "--split", float, "1,1,2,4")
    if args.max_trips < 1:
        raise ParameterError("--max-trips must be at least 1.")
    if args.max_trips > 1 and not args.user:
        raise ParameterError("--max-trips above 1 needs --user, the person-id column whose trips are capped.")
    if args.user and args.count:
        raise ParameterError("--user (one row per trip) and --count (aggregated rows) cannot go together.")
    if args.geojson_top is not None and args.geojson_top < 1:
        raise ParameterError("--geojson-top must be a positive number of flows per level.")
    if (args.lat or args.lon or args.coord_code) and not args.coordinates:
        raise ParameterError("--lat, --lon and --coord-code describe the --coordinates file; give --coordinates FILE.")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ParameterError(f"--out '{out}' is a file; give a folder (it is created if missing).")
    params = {"orientation": args.orientation, "split": split, "weights": weights, "order": args.order,
              "tiebreak": args.tiebreak}

    h, hier_df = _od_hierarchy(args)
    plan = catalog.get("od", info.name).plan((h, h), cost, params, distinct=not args.repeats,
                                              unit=od_unit(args.neighbour, args.max_trips, persons=bool(args.user)))
    xy = _od_coordinates(args, h, hier_df)
    del hier_df

    if time_options(args) is not None:  # one release per public period of the trips' time column
        df, origin, destination, count = _read_trips(args, h)

        def build(rows: Any) -> Any:  # the periods' budgets are keyed by their rows (series.frame_fingerprint)
            return ODCounts.from_frame(rows, h, origin=origin, destination=destination, count=count, user=args.user,
                                       max_trips=args.max_trips, distinct=not args.repeats, fingerprint=False)

        options = {"origin_xy": xy, "delta": delta, "extra": {"budget_input": given}, "top": args.geojson_top}
        # the one-off budget's key: the trips' fingerprint alone (no whole-table aggregate for it)
        whole = None if args.no_budget else ("flows", trips_fingerprint(df, origin, destination, count))
        return table_series(args, plan, df, [origin, destination], count, build, options, make, session,
                            oneoff=whole, cells_of=pair_cells,
                            user=args.user, cap=cap)
    routed = engine_for(args, args.input)
    if routed is not None:
        counts = _od_counts_by_engine(args, h, *routed)
    else:
        df, origin, destination, count = _read_trips(args, h)
        # the fingerprint keys the budget only: under --no-budget it is not computed
        counts = ODCounts.from_frame(df, h, origin=origin, destination=destination, count=count, user=args.user,
                                     max_trips=args.max_trips, distinct=not args.repeats,
                                     fingerprint=not args.no_budget)
        del df
    # the cap is read in the release's units (an ε at the same δ is converted like the release)
    bud = open_budget(argparse.Namespace(**{**vars(args), "budget_cap": cap}), make, plan.cost, "flows",
                      counts.fingerprint, plan.unit, session=session,
                      profile=counts.profile())  # near-identical trips are asked about (issue 26 item 14)
    made = pipeline.release(plan, counts, ledger=bud.ledger, session=bud.session)
    rel = made.inner
    files = made.files(bud.ledger, suppress=rule, cv_threshold=cv, origin_xy=xy, delta=delta, extra={"budget_input": given},
                       top=args.geojson_top)
    paths = deliver(bud, made, files, out)
    if cost.definition == "zcdp":
        src = (f" from (ε = {given['epsilon']:g}, δ = {given['delta']:g}) by the {given['conversion']} conversion"
               if given["given"] == "epsilon, delta" else "")
        budget_text = (f"ρ = {cost.value:.4g}{src} (≈ ε = {budget.zcdp_to_approx_dp(cost.value, delta):.3g} "
                       f"at δ = {delta:g})")
    else:
        budget_text = cost.label()
    per_level = ", ".join(f"{lp.name} {rel.values[t].size:,}" for t, lp in enumerate(rel.plan.levels) if t > 0)
    return Made(made, paths, f"Released O/D flows with {info.title}, {budget_text}; flows per level: {per_level}; "
                             f"{bud.left()}")
