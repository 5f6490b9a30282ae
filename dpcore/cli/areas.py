"""Command line, area commands: ``release hierarchy`` (counts over a geographic hierarchy) and
``release census`` (Privelet counts, or marginal tables with the matrix mechanism)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dpcore.cli.common import (
    Made,
    add_budget_args,
    add_suppress_arg,
    budget_arg,
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
from dpcore.cli.series import add_time_args, leaf_cells, table_series, time_options
from dpcore.cli.spec_args import arguments
from dpcore.core.spec import ReleaseSpec
from dpcore.errors import InputError, ParameterError, curator_only


def add_census_parser(rsub: Any) -> argparse.ArgumentParser:
    cen = rsub.add_parser("census", help="release hierarchical census counts with Privelet, or marginal tables "
                                         "with the matrix mechanism")
    cen.add_argument("--input", required=True, help="CSV (optionally .gz) or Parquet, one row per area or per person")
    cen.add_argument("--levels", required=True,
                     help="code columns of the geography, top first, e.g. state,county,tract")
    cen.add_argument("--count", help="count column (omit when each row is one person)")
    cen.add_argument("--ordinal", action="append", default=[], metavar="COLUMN",
                     help="ordinal attribute column, e.g. age_band (repeatable; values in natural order)")
    cen.add_argument("--ordinal-order", action="append", default=[], metavar="COLUMN=V1|V2|...",
                     help="public order of an ordinal column's values, separated by '|', e.g. "
                          "age=0-17|18-64|65+ (without it the values come from the data, and an empty bin "
                          "would be missing from the release)")
    cen.add_argument("--plus", action="append", default=[], metavar="AXIS",
                     help="Privelet+: leave this axis untransformed ('geography' or an ordinal column; repeatable)")
    cen.add_argument("--areas", help="public list of the finest areas (CSV with the level columns); "
                                     "without it the area list comes from the data, which leaks empty areas")
    cen.add_argument("--name", action="append", default=[], metavar="LEVEL=COLUMN",
                     help="column with the public name of a level's areas, e.g. --name state=state_name")
    cen.add_argument("--mechanism", default="privelet", choices=["privelet", "matrix"],
                     help="privelet: every area of every level (pure ε); matrix: the --marginals tables with the "
                          "matrix mechanism's optimal strategy (ρ-zCDP; pure ε uses an L1 strategy)")
    cen.add_argument("--marginals", default="1",
                     help="matrix: the tables, as k (all k-way tables) or AXIS*AXIS;AXIS, e.g. "
                          "'tract*age_band;age_band' (axes: --geo-level and the --ordinal columns)")
    cen.add_argument("--geo-level", help="matrix: the geography level of the tables (default: the finest level)")
    cbud = cen.add_mutually_exclusive_group(required=True)
    cbud.add_argument("--epsilon", type=str, help="pure ε-DP budget of this release")
    cbud.add_argument("--rho", type=str, help="ρ-zCDP budget of this release (matrix mechanism)")
    cen.add_argument("--out", required=True, help="output folder for release.csv (marginals.csv) and release.json")
    cen.add_argument("--each-person-counted-once", action="store_true",
                    help="confirm that each person is counted once in the table (one row per person, or counts in "
                         "which nobody appears twice): the release then protects one person, and may draw on a "
                         "person-level --population budget; without it a count table protects one counted record")
    add_budget_args(cen)
    engine_args(cen)
    add_suppress_arg(cen)
    return cen


def add_hierarchy_parser(rsub: Any) -> argparse.ArgumentParser:
    hi = rsub.add_parser("hierarchy", help="release counts over a geographic hierarchy (consistent, integral)")
    hi.add_argument("--input", required=True,
                    help="CSV (optionally .gz) or Parquet: one row per area with counts, or one row per person")
    hi.add_argument("--levels", required=True, help="code columns, top first, e.g. STATEFP,COUNTYFP,TRACTCE")
    hi.add_argument("--count", help="count column; several comma-separated columns = a group-size histogram "
                                    "(sizes 1, 2, ..., the last 'k or more'); omit when each row is one person")
    hi.add_argument("--group-col", help="with one row per person: the group id (household) column, for "
                                        "group-size histograms")
    hi.add_argument("--max-size", type=int, default=7, help="largest group size with --group-col (top-coded, default 7)")
    hi.add_argument("--mechanism", default="exact",
                    help="one of: exact, topdown_linf, topdown_l2, hay, bottom_up, independent, dpc_approx, matrix")
    hbud = hi.add_mutually_exclusive_group(required=True)
    hbud.add_argument("--epsilon", type=str, help="pure ε-DP budget of this release (discrete Laplace noise)")
    hbud.add_argument("--rho", type=str, help="ρ-zCDP budget of this release (discrete Gaussian noise)")
    hi.add_argument("--delta", type=float, default=1e-6,
                    help="δ for the (ε, δ)-DP reading of a ρ-zCDP release (printed; default 1e-6)")
    hi.add_argument("--split", default="uniform",
                    help="budget across the measured levels: uniform, geometric, or weights w1,w2,... (top first); "
                         "for --mechanism matrix the levels' importance: levels (= uniform), queries, or w1,w2,...")
    hi.add_argument("--area-sets", metavar="FILE",
                    help="matrix mechanism: public queries, each the total of a set of areas (CSV 'query,area' "
                         "with an optional 'level' column); their noisy totals go to area_queries.csv")
    hi.add_argument("--sets-weight", type=float, default=1.0,
                    help="matrix mechanism: weight of the --area-sets queries against the levels (default 1)")
    hi.add_argument("--neighbour", default="add_remove", type=neighbour_arg, metavar="{add_remove,replace}",
                    help="add_remove: the total is noised (default; alias unbounded); replace: the total is public "
                         "(alias bounded)")
    hi.add_argument("--order", default="ascending", choices=["ascending", "descending"],
                    help="topdown_linf: zero the smallest (ascending) or largest noisy cells first")
    hi.add_argument("--codes", default="auto", choices=["auto", "global", "within_parent"],
                    help="are codes unique across their level (global) or only within their parent?")
    hi.add_argument("--areas", help="public list of the finest areas (CSV/Parquet with the level columns)")
    hi.add_argument("--input-lists-all-areas", action="store_true",
                    help="confirm that the input table lists every area of the public geography, empty ones "
                         "included (it then serves as the public area list)")
    hi.add_argument("--name", action="append", default=[], metavar="LEVEL=COLUMN",
                    help="column (in the area list) with the public name of a level's areas")
    hi.add_argument("--boundaries", action="append", default=[], metavar="LEVEL=FILE",
                    help="boundaries of a level (GeoJSON, GeoPackage, zipped shapefile), joined by code; "
                         "writes LEVEL.geojson (repeatable)")
    hi.add_argument("--out", required=True, help="output folder for release.csv, release.json, LEVEL.geojson")
    hi.add_argument("--each-person-counted-once", action="store_true",
                    help="confirm that each person is counted once in the table (one row per person, or counts in "
                         "which nobody appears twice; over time, in each period's rows): the release then protects "
                         "one person (a series: one person-period), and may draw on a person-level --population "
                         "budget; without it a count table protects one counted record")
    add_budget_args(hi)
    add_suppress_arg(hi)
    add_time_args(hi, user_args=True)
    engine_args(hi)
    return hi


def _engine_table(args: argparse.Namespace, keys: list[str], count: str | None, names_from_input: bool) -> Any:
    """Counts per code combination of a large --input (the engine sums ``count`` or counts rows),
    as a small table with the code columns and ``engines.COUNT_COLUMN``, and the engine's source;
    None for the in-memory path."""
    from dpcore.data import engines

    routed = engine_for(args, args.input)
    if routed is None:
        return None
    if names_from_input:
        raise ParameterError("--name takes the area names from the input table, which the engines reduce to counts "
                             "per area: give the names in the --areas file (--name then reads them there), or use "
                             "--engine numpy.")
    eng, src = routed
    cc = eng.code_counts(src, keys, count=count, progress=cli_progress("Counting rows"))
    return cc.frame[keys + ["count"]].rename(columns={"count": engines.COUNT_COLUMN}), src


def _table_key(args: argparse.Namespace, df: Any, levels: list[str], count: str | list[str] | None,
               raw: bool = False, session: Any = None) -> list[str]:
    """The budget keys of the --input table, main key first, as the app keys it, whichever engine
    counts it: its used columns' content (:func:`dpcore.areas.census_tables.fingerprints`), from the
    table read in memory or from the engine's sums per area (``df`` is either; ``count`` its count
    column or columns; ``session`` the one that charges, default that of ``--budget-db``)."""
    from dpcore.areas import census_tables

    if getattr(args, "no_budget", False):
        return [""]
    if getattr(args, "ledger", None):  # a ledger file: the earlier version's level keys too
        return census_tables.fingerprints(df, levels, count, progress=cli_progress("Keying the budget"))
    from dpcore.core.session import Session

    session = session if session is not None else Session.open(args.budget_db or None)
    # the finer levels' keys of the earlier version only where a database may hold them
    keys = census_tables.fingerprints(df, levels, count, v1_levels=session.may_hold_v1_level_keys(),
                                      progress=cli_progress("Keying the budget"))
    if raw:  # a budget kept under the earlier rule's key is found again
        session.adopt_legacy("areas", keys[0], lambda: [census_tables.legacy_fingerprint(df)])
    return keys


def _areas_warning() -> None:
    print("warning: the list of areas comes from the data; areas with no one are missing from the "
          "release (not protected). Give a public list with --areas.", file=sys.stderr)


def execute_census(spec: ReleaseSpec, session: Any = None) -> Made:
    """``release census``: Privelet counts, or marginal tables with the matrix mechanism, written out.

    The plan is built once (``catalog.get("census", name).plan``) from the table's public structure,
    before any budget is opened, and released through :func:`dpcore.pipeline.release`."""
    args = arguments(spec)  # the options, defaults included, as the parser gives them
    from dpcore import catalog, pipeline
    from dpcore.areas import census_tables
    from dpcore.areas.unit import census_unit
    from dpcore.data.code_tables import read_code_table
    from dpcore.data.hierarchy import require_public_area_list

    make, cost = budget_arg(args)
    rule, cv = suppress_rule(args), cv_threshold(args)
    if rule is not None and args.mechanism == "matrix":
        raise ParameterError("--suppress reads release.csv's noisy_count and noise_sd, which the matrix mechanism's "
                             "marginal tables do not have; release them without --suppress (or use Privelet).")
    if args.mechanism == "privelet" and cost.definition != "pure":
        raise ParameterError("Privelet is pure ε-DP: give --epsilon, or choose --mechanism matrix for --rho.")
    levels = split_list(args.levels, "--levels", str, "state,county,tract")
    ordinals = [c for item in args.ordinal for c in split_list(item, "--ordinal", str, "age_band")]
    plus = [c for item in args.plus for c in split_list(item, "--plus", str, "geography")]
    names = parse_params(args.name)
    if args.mechanism == "matrix" and plus:
        raise ParameterError("--plus is a Privelet option; the matrix mechanism has no untransformed axes.")

    count_col = args.count
    small = _engine_table(args, levels + ordinals, args.count, bool(names and not args.areas))
    if small is not None:
        df, count_col = small[0], small[0].columns[-1]  # the engine's sums (engines.COUNT_COLUMN)
    else:
        df = read_code_table(args.input)
    # person rows cannot list every area: the hierarchy rule (DESIGN.md privacy rule 1, issue 26 item 17)
    require_public_area_list(args.count is None, bool(args.areas),
                             "give it with --areas (a CSV with the level columns: a gazetteer or the table of a "
                             "boundary file)")
    areas = read_code_table(args.areas) if args.areas else None
    orders = {k: census_tables.parse_ordinal_order(val, k) for k, val in parse_params(args.ordinal_order).items()}
    unknown = [k for k in orders if k not in ordinals]
    if unknown:
        raise ParameterError(f"--ordinal-order names {', '.join(unknown)}, which is not an --ordinal column.")
    table = census_tables.CensusTable.from_frame(df, levels, count_col, ordinals=ordinals, names=names, areas=areas,
                                          ordinal_orders=orders, orders_source=census_tables.BINS_FLAG)
    for o in ordinals:
        if o not in orders:
            print(f"warning: the values of '{o}' and their order come from the data; a bin nobody falls in "
                  f"is missing from the release (not protected). Give --ordinal-order {o}=V1|V2|...",
                  file=sys.stderr)
    mech = catalog.get("census", args.mechanism)
    params = ({"level": args.geo_level or "", "marginals": args.marginals} if mech.name == "matrix"
              else {"plus_axes": tuple(plus)})
    plan = mech.plan(table.structure, cost, params, unit=census_unit(person_once=args.each_person_counted_once))
    keys = _table_key(args, df, levels, count_col, raw=small is None, session=session)
    bud = open_budget(args, make, plan.cost, "areas", keys[0], plan.unit, session=session, others=keys[1:],
                      profile=table.profile())  # near-identical tables are asked about (issue 26 item 14)
    out = pipeline.release(plan, table, ledger=bud.ledger, session=bud.session)
    rel = out.inner
    if areas is None:
        _areas_warning()
    folder = Path(args.out)
    if mech.name == "matrix":
        paths = deliver(bud, out, out.files(bud.ledger, cv_threshold=cv), folder)
        info = plan.inner.info
        ratio = info["ratio_to_lower_bound"]
        return Made(out, paths, f"Released {len(rel.tables)} tables ({', '.join(rel.tables)}) with the matrix "
                                f"mechanism, {cost.label()}; RMSE per cell {info['expected_rmse_per_query']:.3g}"
                    + (f" ({ratio:.4f} × the lower bound)" if ratio is not None else "") + f"; {bud.left()}")
    paths = deliver(bud, out, out.files(bud.ledger, suppress=rule, cv_threshold=cv), folder)
    counts = ", ".join(f"{len(rel.levels[n]):,} {n}" for n in table.structure.levels)
    return Made(out, paths, f"Released {counts} with Privelet{'+' if rel.plus_axes else ''}, {cost.label()}; "
                            f"{bud.left()}")


def _hierarchy_series(args: argparse.Namespace, plan: Any, df: Any, levels: list[str], counts_cols: list[str],
                      counts: Any, joins: dict[str, Any], make: Any, session: Any) -> Made:
    """``release hierarchy --time-col ...``: one release per public period of the rows (an empty
    period is released as zero in every public area)."""
    import dataclasses

    import numpy as np

    from dpcore.areas.counts import HierarchyCounts

    def build(rows: Any) -> Any:
        if rows.empty:
            return dataclasses.replace(counts, leaf=np.zeros_like(counts.leaf), n_rows=0)
        return HierarchyCounts.from_frame(rows, counts.hierarchy, levels, counts_cols or None, group=args.group_col,
                                          max_size=args.max_size)

    return table_series(args, plan, df, levels + ([args.group_col] if args.group_col else []),
                        counts_cols[0] if len(counts_cols) == 1 else None, build,
                        {"joins": joins}, make, session,
                        oneoff=None if args.no_budget else ("areas", _table_key(args, df, levels, counts_cols or None)[0]),
                        cells_of=leaf_cells)


def _hierarchy_unit(args: argparse.Namespace, statistic: str, over_time: bool) -> Any:
    """The unit of a hierarchy release: one record, or one person with --each-person-counted-once.

    Over time the confirmation is about each period's rows: every period's release protects one
    person, so the series is a person-period one (issue 26 item 15) and may join a person-level
    ``--population``; a table names no person, so ``--unit person`` (one person followed over the
    periods) cannot be, and ``--unit event`` contradicts the confirmation."""
    from dpcore.areas.unit import hierarchy_unit

    once = args.each_person_counted_once
    if over_time and once and args.unit not in (None, "person-period"):
        why = ("a table names no person, so it cannot follow one over the periods" if args.unit == "person" else
               "--unit event protects one record per period; drop --each-person-counted-once for that")
        raise ParameterError(f"--each-person-counted-once releases each period's table as one person: the unit over "
                             f"time is person-period (its default), not --unit {args.unit} ({why}).")
    return hierarchy_unit(args.neighbour, statistic, person_once=once)


def _boundary_joins(h: Any, bounds_args: dict[str, str]) -> dict[str, Any]:
    """``--boundaries LEVEL=FILE``: each level's boundaries joined to its areas, with a warning
    naming areas without a boundary and features without an area."""
    from dpcore.data import area_boundaries
    from dpcore.data.boundaries import read_boundaries

    joins = {}
    for lv, file in bounds_args.items():
        join = area_boundaries.join_boundaries(h, h.depth_of(lv), read_boundaries(file))
        if join.missing_areas or join.extra_features:
            text = (f"boundaries of '{lv}': {len(join.missing_areas):,} areas have no boundary "
                    f"(e.g. {', '.join(join.missing_areas[:5])}); {len(join.extra_features):,} features match no "
                    f"area (e.g. {', '.join(join.extra_features[:5])}).")
            # areas listed by the data: their number and which features match none say who is there
            print("warning: " + (text if h.source == "area list" else curator_only(text)), file=sys.stderr)
        joins[lv] = join
    return joins


def execute_hierarchy(spec: ReleaseSpec, session: Any = None) -> Made:
    """``release hierarchy``: counts over a geographic hierarchy, written to the output folder.

    The plan is built once (``catalog.get("hierarchy", name).plan``) as soon as the public hierarchy
    is known, before the boundaries are read or any budget is opened, and released through
    :func:`dpcore.pipeline.release`."""
    args = arguments(spec)  # the options, defaults included, as the parser gives them
    from dpcore import catalog, pipeline
    from dpcore.areas.counts import HierarchyCounts
    from dpcore.data.code_tables import read_code_table
    from dpcore.data.hierarchy import Hierarchy, require_public_area_list
    from dpcore.data.memory import release_unused
    from dpcore.privacy import budget

    make, cost = budget_arg(args)
    rule, cv = suppress_rule(args), cv_threshold(args)
    levels = split_list(args.levels, "--levels", str, "state,county,tract")
    counts_cols = split_list(args.count, "--count", str, "POPULATION") if args.count else []
    split_text = str(args.split).strip()
    if split_text in ("uniform", "geometric", "levels", "queries"):
        split, weights = split_text, None
    else:
        split, weights = "custom", split_list(split_text, "--split", float, "1,1,2,4")
    mech = catalog.get("hierarchy", args.mechanism)
    statistic = "group_sizes" if (len(counts_cols) > 1 or args.group_col) else "count"
    names = parse_params(args.name)
    bounds_args = parse_params(args.boundaries)
    # validate everything that needs no data before reading anything
    for lv in bounds_args:
        if lv not in levels:
            raise ParameterError(f"--boundaries names the level '{lv}', which is not in --levels ({', '.join(levels)}).")
    # person rows (with or without a group id) cannot list every area: the rule the app applies too
    require_public_area_list(not counts_cols, bool(args.areas),
                             "give it with --areas (a CSV with the level columns: a gazetteer or the table of a "
                             "boundary file)")

    over_time = time_options(args) is not None
    if args.user_col or args.user_cap is not None:
        raise ParameterError("A hierarchy release protects one counted record: its series are released with the "
                             "unit event. Drop --user-col and --user-cap (person units are for points and od).")
    small = None
    if args.engine != "numpy" and statistic == "count" and not over_time:
        small = _engine_table(args, levels, counts_cols[0] if counts_cols else None, bool(names and not args.areas))
    elif args.engine not in ("auto", "numpy"):
        raise ParameterError("Group-size histograms (several --count columns or --group-col) are aggregated in memory "
                             "only: use --engine numpy (or auto).")
    if small is not None:
        df, counts_cols = small[0], [small[0].columns[-1]]  # the engine's sums (engines.COUNT_COLUMN)
    else:
        df = read_code_table(args.input)
        release_unused()  # the reader's buffers, before the hierarchy's arrays (8 M blocks)
    if args.areas:
        area_df = read_code_table(args.areas)
        h = Hierarchy.from_frame(area_df, levels, codes=args.codes, names=names, source="area list",
                                 progress=cli_progress("Building the hierarchy"))
    else:
        source = "table (confirmed public)" if args.input_lists_all_areas else "data (not public)"
        h = Hierarchy.from_frame(df, levels, codes=args.codes, names=names, source=source,
                                 progress=cli_progress("Building the hierarchy"))
        if not args.input_lists_all_areas:
            print("warning: the list of areas comes from the input table; if an area of the public geography "
                  "is missing from it, its absence is not protected. Give --areas, or confirm with "
                  "--input-lists-all-areas that the table lists every area (empty ones included).",
                  file=sys.stderr)
    counts = HierarchyCounts.from_frame(df, h, levels, counts_cols or None, group=args.group_col,
                                        max_size=args.max_size, leaf=None if args.areas else h.frame_rows())
    release_unused()  # building the hierarchy's temporaries
    public: dict[str, Any] = {"statistic": counts.statistic, "k": counts.k}
    if args.area_sets:
        if mech.name != "matrix":
            raise ParameterError("--area-sets is answered by the matrix mechanism only; add --mechanism matrix.")
        from dpcore.areas import area_sets

        sets_path = Path(args.area_sets)
        if not sets_path.is_file():
            raise InputError(f"The query file '{sets_path}' does not exist. Check the path given to --area-sets.")
        public["area_sets"] = area_sets.read_area_sets(sets_path.read_bytes(), h, sets_path.name)
    declared = {p.name for p in mech.params}  # order and sets_weight go to the mechanisms that take them
    params = {k: v for k, v in (("split", split), ("weights", weights), ("order", args.order),
                                ("sets_weight", args.sets_weight)) if k in declared}
    plan = mech.plan(h, cost, params, unit=_hierarchy_unit(args, statistic, over_time), **public)
    joins = _boundary_joins(h, bounds_args)
    if over_time:  # one release per public period of the rows' time column
        return _hierarchy_series(args, plan, df, levels, counts_cols, counts, joins, make, session)
    keys = _table_key(args, df, levels, counts_cols or None, raw=small is None, session=session)
    del df, small  # the rows are counted and keyed: their memory is free for the release (8 M blocks)
    release_unused()
    bud = open_budget(args, make, plan.cost, "areas", keys[0], plan.unit, session=session, others=keys[1:],
                      profile=counts.profile())  # near-identical tables are asked about (issue 26 item 14)
    out = pipeline.release(plan, counts, ledger=bud.ledger, session=bud.session)
    release_unused()  # the mechanism's working arrays, before the files are written
    paths = deliver(bud, out, out.files(bud.ledger, suppress=rule, joins=joins, cv_threshold=cv), args.out)
    reading = ""
    if cost.definition == "zcdp":
        reading = f" (≈ ε = {budget.zcdp_to_approx_dp(cost.value, args.delta):.3g} at δ = {args.delta:g})"
    sizes = ", ".join(f"{n:,} {lv}" for lv, n in zip(h.level_names, h.sizes, strict=True))
    return Made(out, paths, f"Released {sizes} with {mech.title}, {cost.label()}{reading}; {bud.left()}")
