"""Command line: ``python -m dpcore ...``.

    python -m dpcore mechanisms
    python -m dpcore release points --input FILE --bounds W,S,E,N --grid R,C \
        --mechanism NAME --epsilon E [--param key=value ...] [--workload-file RECTS.csv] --out DIR
    python -m dpcore release hierarchy --input FILE --levels a,b,c --count COLUMN \
        --mechanism exact --epsilon E --split uniform --out DIR
    python -m dpcore release od --input FILE --hierarchy FILE --code-column COL \
        --prefix-lengths 2,5,11,12,15 --epsilon E --delta D --out DIR
    python -m dpcore evaluate points --input FILE|synthetic:SIGMA:N --bounds W,S,E,N \
        --grid R,C --mechanisms ug,identity --epsilon 0.1,0.3,0.5 --out DIR

Errors a person can fix print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from dpcore import __version__
from dpcore.errors import DPCoreError, InputError, ParameterError
from dpcore.points import mechanisms

EXIT_USER_ERROR = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump
        raise ParameterError(f"{message} (see 'python -m dpcore {self.prog.split()[-1]} --help')")


def build_parser() -> argparse.ArgumentParser:
    from dpcore.flows import od as od_mod

    p = _Parser(prog="dpcore", description="Differentially private releases of location data.")
    p.add_argument("--version", action="version", version=f"dpcore {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    m = sub.add_parser("mechanisms", help="list mechanisms with their parameters and defaults")
    m.add_argument("--json", action="store_true", help="print as JSON")

    r = sub.add_parser("release", help="make a release")
    rsub = r.add_subparsers(dest="kind", parser_class=_Parser)
    pts = rsub.add_parser("points", help="release location points as counts over a grid")
    pts.add_argument("--input", required=True, help="CSV (optionally .gz), Parquet or GeoJSON points")
    pts.add_argument("--bounds", required=True, help="public domain 'west,south,east,north' in degrees")
    pts.add_argument("--grid", default="1024,1024", help="grid 'rows,cols' (default 1024,1024)")
    pts.add_argument("--mechanism", required=True, help=f"one of: {', '.join(mechanisms.names())}")
    budget_grp = pts.add_mutually_exclusive_group(required=True)
    budget_grp.add_argument("--epsilon", type=str, help="pure ε-DP budget of this release (discrete Laplace noise)")
    budget_grp.add_argument("--rho", type=str, help="ρ-zCDP budget of this release (discrete Gaussian noise)")
    pts.add_argument("--delta", type=float, default=1e-6,
                     help="δ for the (ε, δ)-DP reading of a ρ-zCDP release (printed; default 1e-6)")
    pts.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                     help="mechanism parameter (repeatable)")
    pts.add_argument("--workload-file", metavar="FILE",
                     help="matrix mechanism: your queries as a CSV of lon/lat rectangles (lon_min, lat_min, "
                          "lon_max, lat_max; optional name, weight, group), or the release.json of an earlier "
                          "release to repeat its workload; sets --param workload=uploaded")
    pts.add_argument("--out", required=True, help="output folder for release.csv/.geojson/.json")
    pts.add_argument("--lat-col", help="latitude column (detected by name if omitted)")
    pts.add_argument("--lon-col", help="longitude column (detected by name if omitted)")
    pts.add_argument("--user-col", help="column identifying a person (unit of privacy)")
    pts.add_argument("--user-cap", type=int, help="at most this many records per person (with --user-col)")
    pts.add_argument("--budget-cap", type=float,
                     help="total ε (or ρ with --rho) allowed for this dataset, checked against --ledger")
    pts.add_argument("--ledger", help="JSON file keeping the dataset's spent budget across runs")
    pts.add_argument("--budget-db", nargs="?", const="", metavar="FILE",
                     help="keep the budget in the app's budget database instead (default $DPCORE_LEDGER_DB or "
                          "~/.local/share/dpcore/ledger.sqlite), keyed by the points' content: the app and the "
                          "pipelines then draw on one budget")
    _engine_args(pts)

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
    cen.add_argument("--budget-cap", type=float, help="total ε (or ρ with --rho) allowed for this dataset, "
                                                      "checked against --ledger")
    cen.add_argument("--ledger", help="JSON file keeping the dataset's spent budget across runs")
    _engine_args(cen)

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
    hi.add_argument("--neighbour", default="add_remove", choices=["add_remove", "replace"],
                    help="add_remove: the total is noised; replace: the total is public (default add_remove)")
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
    hi.add_argument("--budget-cap", type=float,
                    help="total ε (or ρ with --rho) allowed for this dataset, checked against --ledger")
    hi.add_argument("--ledger", help="JSON file keeping the dataset's spent budget across runs")
    hi.add_argument("--budget-db", nargs="?", const="", metavar="FILE",
                    help="keep the budget in the app's budget database instead (default $DPCORE_LEDGER_DB), keyed "
                         "by the table's content as the app keys it: the app and pipelines draw on one budget")
    _engine_args(hi)

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
    od.add_argument("--user", help="person-id column: each person keeps at most --max-trips trips")
    od.add_argument("--max-trips", type=int, default=1, help="most trips one person contributes (m, default 1)")
    od.add_argument("--repeats", action="store_true",
                    help="a person's trips may repeat the same pair (default: distinct pairs)")
    od.add_argument("--drop-unmatched", action="store_true",
                    help="drop trips whose origin or destination is missing or not a finest area (else an error)")
    od.add_argument("--mechanism", default="inftda", help=f"one of: {', '.join(od_mod.MECHANISMS)} (default inftda)")
    od.add_argument("--epsilon", type=str, help="ε: with --delta an (ε, δ) target converted to ρ-zCDP; "
                                                "with --pure a pure ε-DP budget (discrete Laplace)")
    od.add_argument("--delta", type=float, help="δ of the (ε, δ) target (e.g. 1e-8); with --rho the δ at which "
                                                "ρ is read as (ε, δ) (default 1e-8)")
    od.add_argument("--rho", type=str, help="ρ-zCDP budget of this release (discrete Gaussian noise)")
    od.add_argument("--pure", action="store_true", help="with --epsilon: pure ε-DP (discrete Laplace noise)")
    od.add_argument("--conversion", default="classic", choices=["classic", "cks"],
                    help="(ε, δ) → ρ: classic ρ = (√(ln(1/δ)+ε) − √ln(1/δ))² (the paper's Lemma 3, default) "
                         "or cks (Canonne-Kamath-Steinke, tighter: a larger ρ for the same (ε, δ))")
    od.add_argument("--neighbour", default="bounded", choices=["bounded", "unbounded"],
                    help="bounded: replace one person, the total is public (default); unbounded: add/remove one")
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
    od.add_argument("--budget-cap", type=float,
                    help="total budget allowed for this dataset, checked against --ledger: ε with --pure, ρ with "
                         "--rho, an ε at the same δ with --epsilon/--delta (converted to ρ like the release)")
    od.add_argument("--ledger", help="JSON file keeping the dataset's spent budget across runs")
    _engine_args(od)

    rn = sub.add_parser("run", help="make the release a TOML config file describes (see dpcore/core/spec.py)")
    rn.add_argument("config", help="the config file, e.g. release.toml (the app's 'Release config' download)")
    rn.add_argument("--dry-run", action="store_true",
                    help="print the equivalent 'release' command line and stop (nothing is read or spent)")
    p.release_parsers = {"points": pts, "census": cen, "hierarchy": hi, "od": od}  # type: ignore[attr-defined]

    ev = sub.add_parser("evaluate", help="compare mechanisms on range queries (curator-only)")
    evsub = ev.add_subparsers(dest="kind", parser_class=_Parser)
    ept = evsub.add_parser(
        "points", help="MRE of every mechanism x ε x query size against the truth (not for publication)")
    ept.add_argument("--input", required=True,
                     help="CSV (optionally .gz), Parquet or GeoJSON points, or 'synthetic:SIGMA:N' for the "
                          "HTF paper's Gaussian data (σ in cells of a 1024 grid), e.g. synthetic:50:1000000")
    ept.add_argument("--bounds", required=True, help="public domain 'west,south,east,north' in degrees")
    ept.add_argument("--grid", default="1024,1024", help="grid 'rows,cols' (default 1024,1024)")
    ept.add_argument("--mechanisms", default=",".join(mechanisms.names()),
                     help=f"comma-separated, default all: {','.join(mechanisms.names())}")
    ept.add_argument("--epsilon", default="0.1,0.3,0.5", help="comma-separated ε values (default 0.1,0.3,0.5)")
    ept.add_argument("--query-sizes", default="0.02,0.06,0.1",
                     help="area fractions of the queries (default 0.02,0.06,0.1)")
    ept.add_argument("--queries", type=int, default=2000, help="queries per size (default 2000)")
    ept.add_argument("--repeats", type=int, default=5, help="releases per mechanism and ε (default 5)")
    ept.add_argument("--shape", default="random", choices=["random", "square"],
                     help="query shape: random aspect ratio in [1/4, 4] or squares (default random)")
    ept.add_argument("--seed", type=int, default=0, help="seed of the public query workload (default 0)")
    ept.add_argument("--noise-seed", type=int,
                     help="seeded, NOT secure noise for reproducible benchmarks (default: secure noise)")
    ept.add_argument("--param", action="append", default=[], metavar="MECH.KEY=VALUE",
                     help="mechanism parameter, e.g. --param ug.c=10 (repeatable)")
    ept.add_argument("--out", required=True, help="output folder for results.csv, summary.csv/.md, plot.png")
    ept.add_argument("--lat-col", help="latitude column (detected by name if omitted)")
    ept.add_argument("--lon-col", help="longitude column (detected by name if omitted)")
    _engine_args(ept)
    return p


def _engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", default="auto", choices=["auto", "numpy", "duckdb", "spark"],
                   help="where the rows are aggregated: numpy (in memory), duckdb (streaming, out of core) or spark "
                        "(a cluster); auto (default) takes duckdb for inputs above 200 MB. --input may then be a "
                        "folder or glob of CSV/Parquet files")
    p.add_argument("--spark-master", help="Spark master URL with --engine spark (default local[*]), "
                                          "e.g. spark://host:7077 or yarn")


def _cli_progress(what: str) -> Any:
    """Progress on stderr: a live percentage on a terminal, nothing in a pipeline's log."""
    if not sys.stderr.isatty():
        return None
    last = [-1]

    def show(frac: float, msg: str) -> None:
        pct = int(frac * 100)
        if pct != last[0]:
            last[0] = pct
            print(f"\r  {msg[:90]:<90} {pct:3d} %", end="" if pct < 100 else "\n", file=sys.stderr, flush=True)

    return show


def _engine_for(args: argparse.Namespace, path_text: str) -> tuple[Any, Any] | None:
    """``(engine, source)`` when --input goes through an engine, None for the in-memory readers
    (a single file of a format only they read, e.g. GeoJSON, with --engine auto or numpy)."""
    from dpcore.data import engines

    p = Path(path_text)
    single = p.is_file() and not any(ch in path_text for ch in "*?[")
    if single and engines.base._fmt(p) is None and args.engine in ("auto", "numpy"):  # noqa: SLF001
        return None
    if not single and not p.is_dir() and not any(ch in path_text for ch in "*?["):
        raise DPCoreError(f"Input file '{p}' does not exist. Check the path given to --input.")
    src = engines.Source.from_path(path_text)
    name = engines.choose(args.engine, src.n_bytes)
    if name == "numpy" and single:
        return None  # the in-memory readers (they also read GeoJSON and detect more)
    if args.spark_master and name != "spark":
        raise ParameterError("--spark-master is for --engine spark.")
    eng = engines.get_engine(name, spark_master=args.spark_master)
    if name != args.engine:
        print(f"Aggregating with {name} ({src.n_bytes / 1e6:,.0f} MB of input).", file=sys.stderr)
    return eng, src


def _points_aggregate(args: argparse.Namespace, grid: Any, user_col: str | None,
                      user_cap: int | None) -> tuple[Any, str]:
    """The confidential frequency matrix of --input, through the chosen engine, and the points'
    content fingerprint (the app's budget key)."""
    from dpcore.data import io
    from dpcore.data.domain import aggregate_points
    from dpcore.data.engines.base import points_fingerprint

    routed = _engine_for(args, args.input)
    if routed is None:
        path = Path(args.input)
        table = io.load_points_file(path, path.name, lat_col=args.lat_col, lon_col=args.lon_col, user_col=user_col)
        agg = aggregate_points(table.lon, table.lat, grid, user=table.user,
                               user_cap=user_cap if table.user is not None else None)
        wanted = getattr(args, "budget_db", None) is not None
        return agg, points_fingerprint(table.lon, table.lat) if wanted else ""
    eng, src = routed
    lat, lon = args.lat_col, args.lon_col
    if lat is None or lon is None:
        found_lat, found_lon = io.detect_coordinate_columns(eng.head(src))
        lat, lon = lat or found_lat, lon or found_lon
        if lat is None or lon is None:
            raise DPCoreError(f"No latitude/longitude columns were recognised by name in '{src.label}'. "
                              "Name them with --lat-col and --lon-col.")
    pc = eng.points(src, grid, lat=lat, lon=lon, user=user_col, user_cap=user_cap,
                    progress=_cli_progress("Counting points"),
                    fingerprint=getattr(args, "budget_db", None) is not None)
    return pc.aggregate, pc.fingerprint


def _parse_params(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for it in items:
        if "=" not in it:
            raise ParameterError(f"--param '{it}' must look like key=value, e.g. --param c=10.")
        k, v = it.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def cmd_mechanisms(args: argparse.Namespace) -> int:
    from dpcore.areas import tree_records
    from dpcore.flows import od

    descs = [{"kind": "points", **m.describe()} for m in mechanisms.REGISTRY.values()]
    hier = [{"kind": "hierarchy", "name": h.name, "title": h.title, "summary": h.description,
             "when_to_use": h.when, "consistent": h.consistent, "integral": h.integral,
             "nonnegative": h.nonnegative, "statistics": [s for s, ok in (("count", h.counts),
                                                                          ("group_sizes", h.group_sizes)) if ok],
             "default_definition": h.default_definition, "reference": h.paper}
            for h in tree_records.MECHANISMS.values()]
    ods = [{"kind": "od", "name": m.name, "title": m.title, "summary": m.description, "when_to_use": m.when,
            "consistent": m.consistent, "integral": True, "nonnegative": m.nonnegative,
            "ledger": m.ledger, "reference": m.paper}
           for m in od.MECHANISMS.values()]
    if args.json:
        print(json.dumps(descs + hier + ods, indent=2))
        return 0
    print("Point mechanisms (python -m dpcore release points --mechanism NAME):\n")
    for d in descs:
        print(f"{d['name']}: {d['title']}")
        print(f"    {d['summary']}")
        print(f"    When to use: {d['when_to_use']}")
        print(f"    Privacy: {d['privacy']}. Reference: {d['reference']}")
        if not d["params"]:
            print("    Parameters: none besides --epsilon")
        for p in d["params"]:
            rng = ""
            if p["minimum"] is not None or p["maximum"] is not None:
                rng = f" [{p['minimum']}..{p['maximum'] if p['maximum'] is not None else ''}]"
            print(f"    --param {p['name']}=<{p['type']}>  default {p['default']}{rng}: {p['help']}")
        print()
    print("Hierarchy mechanisms (python -m dpcore release hierarchy --mechanism NAME):\n")
    for d in hier:
        props = [w for w, ok in (("consistent", d["consistent"]), ("integral", d["integral"]),
                                 ("non-negative", d["nonnegative"])) if ok]
        print(f"{d['name']}: {d['title']}")
        print(f"    {d['summary']}")
        print(f"    When to use: {d['when_to_use']}")
        print(f"    Output: {', '.join(props) or 'real-valued'}; statistics: {', '.join(d['statistics'])}. "
              f"Reference: {d['reference']}")
        print()
    print("O/D mechanisms (python -m dpcore release od --mechanism NAME):\n")
    for d in ods:
        props = [w for w, ok in (("consistent", d["consistent"]), ("integral", d["integral"]),
                                 ("non-negative", d["nonnegative"])) if ok]
        print(f"{d['name']}: {d['title']}")
        print(f"    {d['summary']}")
        print(f"    When to use: {d['when_to_use']}")
        print(f"    Output: {', '.join(props)}. Reference: {d['reference']}"
              + ("" if d["ledger"] else ". Not for 'release od': its (ε, δ) cost cannot go on a budget ledger"))
        print()
    return 0


def _load_ledger(args: argparse.Namespace, make: Any, cost: Any) -> tuple[Path | None, Any]:
    """The dataset's ledger from ``--ledger`` (or a new one capped by ``--budget-cap``), checked for ``cost``."""
    from dpcore.privacy import budget

    ledger_path = Path(args.ledger) if args.ledger else None
    if ledger_path is not None and ledger_path.exists():
        try:
            ledger = budget.Ledger.from_dict(json.loads(ledger_path.read_text("utf-8")))
        except (ValueError, KeyError, TypeError) as e:
            raise ParameterError(f"Ledger file '{ledger_path}' is not a dpcore ledger ({e}). "
                                 "Point --ledger to the file an earlier run wrote, or a new path.") from None
        if args.budget_cap is not None:
            # A ledger's cap is the curator's policy, fixed when the ledger is created: a run may
            # not raise it (or reinterpret it in another unit) by passing another --budget-cap.
            asked = make(args.budget_cap)
            if asked.definition != ledger.definition or not math.isclose(
                    asked.value, ledger.cap.value, rel_tol=1e-12, abs_tol=0.0):
                raise ParameterError(
                    f"The ledger '{ledger_path}' already has the cap {ledger.cap.label()}; --budget-cap would "
                    f"make it {asked.label()}. A ledger's cap is set when the ledger is created: drop "
                    "--budget-cap to keep using this ledger, or start a new ledger file if your policy "
                    "grants a new budget."
                )
    else:
        cap = args.budget_cap if args.budget_cap is not None else cost.value
        ledger = budget.Ledger(make(cap))
    ledger.check(cost)  # e.g. a ρ release against a pure-ε ledger: say why
    return ledger_path, ledger


def _check_can_spend(ledger: Any, cost: Any, where: str) -> None:
    if not ledger.can_spend(cost):
        raise DPCoreError(
            f"This release needs {cost.label()} but only {ledger.remaining:.4g} of the cap "
            f"{ledger.cap.label()} is left in {where}. Lower --epsilon or raise --budget-cap "
            "if your policy allows it."
        )


def _stored_ledger(args: argparse.Namespace, make: Any, cost: Any, key: str, kind: str) -> tuple[Any, str]:
    """The dataset's ledger in the app's budget database (``--budget-db``), checked for ``cost``.

    A new dataset gets ``--budget-cap`` (or this release's cost) as its cap; an existing one keeps
    its cap, and a different --budget-cap is refused, as for a --ledger file.
    """
    from dpcore.privacy import ledger_store

    store = ledger_store.LedgerStore(Path(args.budget_db)) if args.budget_db else ledger_store.default_store()
    known = store.has_ledger(key)
    cap = make(args.budget_cap if args.budget_cap is not None else cost.value)
    ledger = store.ledger(key, cap, kind)
    if known and args.budget_cap is not None and (cap.definition != ledger.definition or not math.isclose(
            cap.value, ledger.cap.value, rel_tol=1e-12, abs_tol=0.0)):
        raise ParameterError(
            f"The budget database already holds this dataset with the cap {ledger.cap.label()}; --budget-cap would "
            f"make it {cap.label()}. Drop --budget-cap, or change the cap in the app if your policy allows it.")
    ledger.check(cost)
    where = f"the budget database '{store.path}'"
    _check_can_spend(ledger, cost, where)
    return ledger, where


def _budget_left(ledger_path: Path | None, ledger: Any) -> str:
    """The end of a release's summary line: what is left, and where it is recorded."""
    if ledger_path is None:
        return ("no --ledger given, so this spend is not recorded anywhere: pass --ledger FILE to keep "
                "the dataset's budget across runs.")
    return f"{ledger.remaining:.4g} of the budget left in '{ledger_path}'."


def _charged(ledger_path: Path | None, ledger: Any, release: Any) -> Any:
    """Run ``release()`` and save the ledger as soon as it was charged, whatever happens next.

    A release that fails after its charge (or whose files cannot be written) has still drawn
    noise from the data, so its spend must be on record before anything else can go wrong.
    """
    before = len(ledger.entries)
    try:
        return release()
    finally:
        if len(ledger.entries) != before:
            _save_ledger(ledger_path, ledger)


def _save_ledger(ledger_path: Path | None, ledger: Any) -> None:
    if ledger_path is not None:
        ledger_path.parent.mkdir(parents=True, exist_ok=True)
        ledger_path.write_text(json.dumps(ledger.to_dict(), indent=2), "utf-8")


def _census_marginals(args: argparse.Namespace, table: Any, cost: Any, ledger_path: Any, ledger: Any,
                      areas_from_data: bool) -> int:
    """``release census --mechanism matrix``: marginal tables with the matrix mechanism."""
    from dpcore.areas import marginals
    from dpcore.privacy.noise import secure_source

    s = table.structure
    level = args.geo_level or s.levels[-1]
    axes, _ = marginals.axes_of(s, level)
    p = marginals.plan(s, level, marginals.parse_marginals(args.marginals, axes), cost)  # before spending

    def run() -> Any:
        ledger.spend(cost, label="census marginals (matrix mechanism)", details={
            "kind": "census_marginals", "mechanism": "matrix", "level": level,
            "marginals": [[p.axes[a] for a in t] for t in p.marginals]})
        return marginals.release(table, p, secure_source())

    rel = _charged(ledger_path, ledger, run)
    if areas_from_data:
        print("warning: the list of areas comes from the data; areas with no one are missing from the "
              "release (not protected). Give a public list with --areas.", file=sys.stderr)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "marginals.csv", out / "release.json"]
    paths[0].write_bytes(marginals.marginals_csv(rel))
    paths[1].write_bytes(marginals.marginals_json(rel, ledger))
    ratio = p.info["ratio_to_lower_bound"]
    print(f"Released {len(rel.tables)} tables ({', '.join(rel.tables)}) with the matrix mechanism, {cost.label()}; "
          f"RMSE per cell {p.info['expected_rmse_per_query']:.3g}"
          + (f" ({ratio:.4f} × the lower bound)" if ratio is not None else "") + f"; {_budget_left(ledger_path, ledger)}")
    for path in paths:
        print(f"  wrote {path}")
    return 0


def _budget_arg(args: argparse.Namespace) -> tuple[Any, Any]:
    """(make, cost) from --epsilon or --rho."""
    from dpcore.privacy import budget

    flag, text = ("--epsilon", args.epsilon) if args.epsilon is not None else ("--rho", args.rho)
    try:
        value = float(text)
    except ValueError:
        raise ParameterError(f"{flag} '{text}' is not a number; use e.g. {flag} 0.5.") from None
    make = budget.pure if flag == "--epsilon" else budget.zcdp
    return make, make(value)


def cmd_release_points(args: argparse.Namespace) -> int:
    from dpcore.core.pipeline import release_points
    from dpcore.data.domain import Bounds, Grid
    from dpcore.points.export import write_release
    from dpcore.privacy import budget

    bounds = Bounds.parse(args.bounds)
    grid = Grid.parse(bounds, args.grid)
    mech = mechanisms.get(args.mechanism)
    make, requested = _budget_arg(args)
    raw = _parse_params(args.param)
    if args.workload_file:
        from dpcore.points.workload_io import read_rectangles

        if mech.name != "matrix":
            raise ParameterError(f"--workload-file is for the matrix mechanism (--mechanism matrix), not "
                                 f"'{mech.name}'.")
        if raw.get("workload", "uploaded") != "uploaded":
            raise ParameterError(f"--workload-file gives uploaded rectangles, but --param workload={raw['workload']} "
                                 "asks for another workload; drop one of the two.")
        if "rectangles" in raw:
            raise ParameterError("Give the rectangles once: --workload-file or --param rectangles, not both.")
        raw["workload"] = "uploaded"
        raw["rectangles"] = read_rectangles(args.workload_file)
    params = mech.resolve_params(raw)
    cost = mech.privacy_cost(requested, params)
    if args.user_cap is not None and not args.user_col:
        raise ParameterError("--user-cap needs --user-col naming the column that identifies a person.")
    if args.user_col and args.user_cap is None:
        raise ParameterError("--user-col needs --user-cap, the most records one person may contribute (e.g. 10).")

    if args.budget_db is not None and args.ledger:
        raise ParameterError("Give --ledger FILE or --budget-db, not both: the budget is kept in one place.")
    if args.budget_db is None:
        ledger_path, ledger = _load_ledger(args, make, cost)
        _check_can_spend(ledger, cost, f"'{ledger_path}'")
    agg, fp = _points_aggregate(args, grid, args.user_col, args.user_cap)
    where = None
    if args.budget_db is not None:
        ledger_path, ledger, where = None, *_stored_ledger(args, make, cost, f"points:{fp}", "points")
    rel = _charged(ledger_path, ledger, lambda: release_points(agg, mech.name, cost, params, ledger))
    paths = write_release(rel, args.out, ledger)
    reading = ""
    if cost.definition == "zcdp":
        reading = f" (≈ ε = {budget.zcdp_to_approx_dp(cost.value, args.delta):.3g} at δ = {args.delta:g})"
    left = (f"{ledger.remaining:.4g} of the budget left in {where}." if where else _budget_left(ledger_path, ledger))
    print(f"Released {rel.n_rects:,} rectangles with {mech.title}, {cost.label()}{reading}; {left}")
    for p in paths:
        print(f"  wrote {p}")
    return 0


def _split_list(text: str, flag: str, kind: type, example: str) -> list[Any]:
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    try:
        values = [kind(p) for p in parts]
    except ValueError:
        raise ParameterError(f"{flag} '{text}' must be a comma-separated list, e.g. {flag} {example}.") from None
    if not values:
        raise ParameterError(f"{flag} is empty; give a comma-separated list, e.g. {flag} {example}.")
    return values


def cmd_evaluate_points(args: argparse.Namespace) -> int:
    from dpcore.data.domain import Bounds, Grid
    from dpcore.points import evaluate

    bounds = Bounds.parse(args.bounds)
    grid = Grid.parse(bounds, args.grid)
    names = [mechanisms.get(n).name for n in _split_list(args.mechanisms, "--mechanisms", str, "ug,identity")]
    epsilons = _split_list(args.epsilon, "--epsilon", float, "0.1,0.3,0.5")
    sizes = _split_list(args.query_sizes, "--query-sizes", float, "0.02,0.06,0.1")
    params: dict[str, dict[str, Any]] = {}
    for key, value in _parse_params(args.param).items():
        mech, dot, name = key.partition(".")
        if not dot or not name:
            raise ParameterError(f"--param '{key}={value}' must name the mechanism, e.g. --param ug.c=10.")
        params.setdefault(mechanisms.get(mech).name, {})[name] = value
    # every setting is checked before any data is read or any file written
    evaluate.check_settings(names, epsilons, sizes, args.queries, args.repeats, args.shape,
                            params, args.noise_seed)
    spec = evaluate.parse_synthetic(args.input)
    if spec is None:
        path = Path(args.input)
        if not path.exists() and not any(ch in args.input for ch in "*?["):
            raise DPCoreError(f"Input file '{path}' does not exist. Check the path given to --input, "
                              "or use --input synthetic:SIGMA:N for made-up data.")
    if spec is not None:
        agg = evaluate.synthetic_aggregate(grid, spec.sigma, spec.n, seed=spec.seed)
        source = spec.label
    else:
        agg, _ = _points_aggregate(args, grid, None, None)
        source = path.name

    def progress(done: int, total: int, what: str) -> None:
        if done < total:
            print(f"  [{done + 1}/{total}] {what}", file=sys.stderr, flush=True)

    results = evaluate.evaluate(agg, names, epsilons, sizes, args.queries, args.repeats, args.shape,
                                seed=args.seed, params=params, noise_seed=args.noise_seed,
                                progress=progress)
    summary = evaluate.summarize(results)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    title = f"MRE on {source}, {grid.rows} x {grid.cols} grid"
    md = evaluate.summary_markdown(summary, title)
    paths = [out / "results.csv", out / "summary.csv", out / "summary.md", out / "plot.png"]
    results.to_csv(paths[0], index=False)
    summary.to_csv(paths[1], index=False)
    paths[2].write_text(md, "utf-8")
    evaluate.plot_summary(summary, paths[3], title)
    print(md)
    for p in paths:
        print(f"  wrote {p}")
    return 0


def cmd_release_census(args: argparse.Namespace) -> int:
    from dpcore.areas import census_privelet, census_tables
    from dpcore.privacy.noise import secure_source

    make, cost = _budget_arg(args)
    if args.mechanism == "privelet" and cost.definition != "pure":
        raise ParameterError("Privelet is pure ε-DP: give --epsilon, or choose --mechanism matrix for --rho.")
    epsilon = cost.value
    levels = _split_list(args.levels, "--levels", str, "state,county,tract")
    ordinals = [c for item in args.ordinal for c in _split_list(item, "--ordinal", str, "age_band")]
    plus = [c for item in args.plus for c in _split_list(item, "--plus", str, "geography")]
    names = _parse_params(args.name)

    ledger_path, ledger = _load_ledger(args, make, cost)

    count_col = args.count
    small = _engine_table(args, levels + ordinals, args.count, bool(names and not args.areas))
    if small is not None:
        df, count_col = small[0], small[0].columns[-1]  # the engine's sums (engines.COUNT_COLUMN)
    else:
        df = census_tables.read_census_file(args.input)
    areas = census_tables.read_census_file(args.areas) if args.areas else None
    orders = {k: [v.strip() for v in val.split("|")] for k, val in _parse_params(args.ordinal_order).items()}
    unknown = [k for k in orders if k not in ordinals]
    if unknown:
        raise ParameterError(f"--ordinal-order names {', '.join(unknown)}, which is not an --ordinal column.")
    table = census_tables.CensusTable.from_frame(df, levels, count_col, ordinals=ordinals, names=names, areas=areas,
                                          ordinal_orders=orders)
    for o in ordinals:
        if o not in orders:
            print(f"warning: the values of '{o}' and their order come from the data; a bin nobody falls in "
                  f"is missing from the release (not protected). Give --ordinal-order {o}=V1|V2|...",
                  file=sys.stderr)
    if args.mechanism == "matrix":
        if plus:
            raise ParameterError("--plus is a Privelet option; the matrix mechanism has no untransformed axes.")
        return _census_marginals(args, table, cost, ledger_path, ledger, areas is None)
    rel = _charged(ledger_path, ledger, lambda: census_privelet.release_census(table, epsilon, secure_source(),
                                                                      plus_axes=plus, ledger=ledger))
    if areas is None:
        print("warning: the list of areas comes from the data; areas with no one are missing from the "
              "release (not protected). Give a public list with --areas.", file=sys.stderr)
    paths = census_privelet.write_census(rel, args.out, ledger)
    counts = ", ".join(f"{len(rel.levels[n]):,} {n}" for n in table.structure.levels)
    print(f"Released {counts} with Privelet{'+' if rel.plus_axes else ''}, {cost.label()}; "
          f"{_budget_left(ledger_path, ledger)}")
    for p in paths:
        print(f"  wrote {p}")
    return 0


def cmd_release_hierarchy(args: argparse.Namespace) -> int:
    from dpcore.areas import export, tree_mechanisms, tree_records
    from dpcore.areas.hierarchy import Hierarchy, HierarchyCounts, read_hierarchy_table
    from dpcore.core.pipeline import release_hierarchy
    from dpcore.data import io
    from dpcore.privacy import budget

    make, cost = _budget_arg(args)
    levels = _split_list(args.levels, "--levels", str, "state,county,tract")
    counts_cols = _split_list(args.count, "--count", str, "POPULATION") if args.count else []
    split_text = str(args.split).strip()
    if split_text in ("uniform", "geometric", "levels", "queries"):
        split, weights = split_text, None
    else:
        split, weights = "custom", _split_list(split_text, "--split", float, "1,1,2,4")
    mech = tree_records.get(args.mechanism)
    statistic = "group_sizes" if (len(counts_cols) > 1 or args.group_col) else "count"
    names = _parse_params(args.name)
    bounds_args = _parse_params(args.boundaries)
    # validate everything that needs no data before reading anything
    for lv in bounds_args:
        if lv not in levels:
            raise ParameterError(f"--boundaries names the level '{lv}', which is not in --levels ({', '.join(levels)}).")
    if not counts_cols and not args.areas:  # person rows (with or without a group id)
        raise ParameterError(
            "With one row per person the areas where nobody lives are missing from the data, so the "
            "area list must be public: give it with --areas (a CSV with the level columns).")

    if args.budget_db is not None and args.ledger:
        raise ParameterError("Give --ledger FILE or --budget-db, not both: the budget is kept in one place.")
    ledger_path = ledger = where = None
    if args.budget_db is None:
        ledger_path, ledger = _load_ledger(args, make, cost)
    small = None
    if args.engine != "numpy" and statistic == "count":
        small = _engine_table(args, levels, counts_cols[0] if counts_cols else None, bool(names and not args.areas))
    elif args.engine not in ("auto", "numpy"):
        raise ParameterError("Group-size histograms (several --count columns or --group-col) are aggregated in memory "
                             "only: use --engine numpy (or auto).")
    if small is not None:
        df, counts_cols = small[0], [small[0].columns[-1]]  # the engine's sums (engines.COUNT_COLUMN)
    else:
        df = read_hierarchy_table(args.input)
    if args.budget_db is not None:
        from dpcore.areas import census_tables
        from dpcore.data import engines

        # the app's key for this file, whichever engine counts it: its content up to the engine
        # threshold (the app reads such uploads in memory), its bytes above (the app hands those
        # to DuckDB); keyed by the engine instead, switching engines would open a fresh budget
        whole = engines.Source.from_path(args.input)
        if whole.n_bytes > engines.threshold():
            key = whole.bytes_fingerprint()
        else:
            key = census_tables.fingerprint(df if small is None else read_hierarchy_table(args.input))
        ledger, where = _stored_ledger(args, make, cost, f"census:{key}", "census")
    if args.areas:
        area_df = read_hierarchy_table(args.areas)
        h = Hierarchy.from_frame(area_df, levels, codes=args.codes, names=names, source="area list")
    else:
        source = "table (confirmed public)" if args.input_lists_all_areas else "data (not public)"
        h = Hierarchy.from_frame(df, levels, codes=args.codes, names=names, source=source)
        if not args.input_lists_all_areas:
            print("warning: the list of areas comes from the input table; if an area of the public geography "
                  "is missing from it, its absence is not protected. Give --areas, or confirm with "
                  "--input-lists-all-areas that the table lists every area (empty ones included).",
                  file=sys.stderr)
    counts = HierarchyCounts.from_frame(df, h, levels, counts_cols or None, group=args.group_col,
                                        max_size=args.max_size)
    extra: dict[str, Any] = {}
    if args.area_sets:
        if mech.name != "matrix":
            raise ParameterError("--area-sets is answered by the matrix mechanism only; add --mechanism matrix.")
        from dpcore.areas import area_sets

        sets_path = Path(args.area_sets)
        if not sets_path.is_file():
            raise InputError(f"The query file '{sets_path}' does not exist. Check the path given to --area-sets.")
        extra = {"area_sets": area_sets.read_area_sets(sets_path.read_bytes(), h, sets_path.name),
                 "sets_weight": args.sets_weight}
    tree_mechanisms.plan(h, mech.name, cost, neighbour=args.neighbour, split=split, weights=weights,
                      statistic=statistic, k=counts.k, **extra)
    joins = {}
    for lv, file in bounds_args.items():
        gdf = io.read_boundaries(file)
        join = export.join_boundaries(h, h.depth_of(lv), gdf)
        if join.missing_areas or join.extra_features:
            print(f"warning: boundaries of '{lv}': {len(join.missing_areas):,} areas have no boundary "
                  f"(e.g. {', '.join(join.missing_areas[:5])}); {len(join.extra_features):,} features match no "
                  f"area (e.g. {', '.join(join.extra_features[:5])}).", file=sys.stderr)
        joins[lv] = join
    rel = _charged(ledger_path, ledger, lambda: release_hierarchy(
        counts, mech.name, cost, ledger, neighbour=args.neighbour, split=split, weights=weights, order=args.order,
        **extra))
    paths = export.write_hierarchy(rel, args.out, ledger, joins)
    reading = ""
    if cost.definition == "zcdp":
        reading = f" (≈ ε = {budget.zcdp_to_approx_dp(cost.value, args.delta):.3g} at δ = {args.delta:g})"
    sizes = ", ".join(f"{n:,} {lv}" for lv, n in zip(h.level_names, h.sizes, strict=True))
    left = f"{ledger.remaining:.4g} of the budget left in {where}." if where else _budget_left(ledger_path, ledger)
    print(f"Released {sizes} with {mech.title}, {cost.label()}{reading}; {left}")
    for p in paths:
        print(f"  wrote {p}")
    return 0


# ---------------------------------------------------------------------------------------------
# release od
# ---------------------------------------------------------------------------------------------

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


def _read_od_hierarchy_file(path: str) -> Any:
    """The public area list as text columns (CSV/Parquet via read_hierarchy_table; GeoJSON properties)."""
    import pandas as pd

    from dpcore.areas.hierarchy import code_text, read_hierarchy_table
    from dpcore.data import io

    p = Path(path)
    if not p.exists():
        raise DPCoreError(f"Hierarchy file '{p}' does not exist. Check the path given to --hierarchy.")
    head = p.read_bytes()[:64].lstrip()
    if p.suffix.lower() in (".geojson", ".json") or head[:1] == b"{":
        gdf = io.read_boundaries(p)
        df = pd.DataFrame(gdf.drop(columns=gdf.geometry.name))
        for c in df.columns:  # codes as text: 7 not 7.0, leading zeros as stored
            df[c] = code_text(df[c]).set_axis(df.index)
        return df
    return read_hierarchy_table(p)


def _od_hierarchy(args: argparse.Namespace) -> tuple[Any, Any]:
    """(hierarchy, the hierarchy file's table)."""
    import pandas as pd

    from dpcore.areas.hierarchy import Hierarchy
    from dpcore.flows import od

    names = _parse_params(args.names)
    if args.levels and (args.code_column or args.prefix_lengths):
        raise ParameterError("Give the hierarchy either with --levels COL,COL,... or with --code-column COL "
                             "--prefix-lengths 2,5,..., not both.")
    if not args.levels and not (args.code_column and args.prefix_lengths):
        raise ParameterError("Say how the hierarchy file is read: --levels state,county,... (one code column per "
                             "level, top first) or --code-column COL --prefix-lengths 2,5,11,12,15.")
    df = _read_od_hierarchy_file(args.hierarchy)
    if args.levels:
        if args.level_names:
            raise ParameterError("--level-names goes with --prefix-lengths; with --levels the columns name the levels.")
        levels = _split_list(args.levels, "--levels", str, "state,county,tract")
        return Hierarchy.from_frame(df, levels, codes=args.codes, names=names, source="area list"), df
    lengths = _split_list(args.prefix_lengths, "--prefix-lengths", int, "2,5,11,12,15")
    if args.level_names:
        lv_names = _split_list(args.level_names, "--level-names", str, "state,county,tract")
    elif all(n in _CENSUS_PREFIXES for n in lengths):
        lv_names = [_CENSUS_PREFIXES[n] for n in lengths]
    else:
        lv_names = [f"level{i + 1}" for i in range(len(lengths))]
    if args.code_column not in df.columns:
        raise InputError(f"The hierarchy file has no column '{args.code_column}' (--code-column). Its columns: "
                         f"{', '.join(map(str, list(df.columns)[:20]))}.")
    h = od.hierarchy_from_prefixes(df[args.code_column], lengths, lv_names)
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


def _engine_table(args: argparse.Namespace, keys: list[str], count: str | None, names_from_input: bool) -> Any:
    """Counts per code combination of a large --input (the engine sums ``count`` or counts rows),
    as a small table with the code columns and ``engines.COUNT_COLUMN``, and the engine's source;
    None for the in-memory path."""
    from dpcore.data import engines

    routed = _engine_for(args, args.input)
    if routed is None:
        return None
    if names_from_input:
        raise ParameterError("--name takes the area names from the input table, which the engines reduce to counts "
                             "per area: give the names in the --areas file (--name then reads them there), or use "
                             "--engine numpy.")
    eng, src = routed
    cc = eng.code_counts(src, keys, count=count, progress=_cli_progress("Counting rows"))
    return cc.frame[keys + ["count"]].rename(columns={"count": engines.COUNT_COLUMN}), src


def _od_counts_by_engine(args: argparse.Namespace, h: Any, eng: Any, src: Any) -> Any:
    """O/D counts of a large trips input: the engine groups the rows by (origin, destination) with
    the per-person cap; only that small table is matched to the hierarchy in memory."""
    from dpcore.flows import od

    if args.drop_unmatched and args.user:
        raise ParameterError(
            "--drop-unmatched with --user needs the rows dropped before each person's trips are capped, which only the "
            "in-memory engine does: use --engine numpy, or remove the unmatched trips from the file first.")
    origin, destination, count = _od_columns(args, eng.columns(src))
    cc = eng.code_counts(src, [origin, destination], count=count, user=args.user,
                         cap=args.max_trips if args.user else None, distinct=not args.repeats,
                         progress=_cli_progress("Counting trips"), drop_missing=args.drop_unmatched)
    if args.drop_unmatched:
        f = cc.frame
        keep = (od.match_leaves(h, f[origin]) >= 0) & (od.match_leaves(h, f[destination]) >= 0)
        n_drop = int(f.loc[~keep, "count_all"].sum()) + cc.n_missing
        if n_drop:
            print(f"Dropped {n_drop:,} trips whose origin or destination is not a finest area ('{h.levels[-1]}') of "
                  "the hierarchy (curator-only; not in the export).", file=sys.stderr)
            cc = type(cc)(f.loc[keep].reset_index(drop=True), cc.keys, cc.n_read, cc.n_capped, cc.engine,
                          cc.n_missing)
    return od.ODCounts.from_code_counts(cc, h, max_trips=args.max_trips if args.user else 1,
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

    from dpcore.areas.hierarchy import read_hierarchy_table
    from dpcore.data import io
    from dpcore.flows import od_export

    xy: dict[int, Any] = {}
    if args.coordinates:
        p = Path(args.coordinates)
        if not p.exists():
            raise DPCoreError(f"Coordinates file '{p}' does not exist. Check the path given to --coordinates.")
        same = hier_df is not None and p.resolve() == Path(args.hierarchy).resolve()
        cdf = hier_df if same else read_hierarchy_table(p)  # e.g. the LODES crosswalk serves as both
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
    for lv, file in _parse_params(args.boundaries).items():
        if lv not in h.levels:
            raise ParameterError(f"--boundaries names the level '{lv}', which is not a level "
                                 f"({', '.join(h.levels)}).")
        d = h.depth_of(lv)
        lon_a, lat_a, missing = od_export.centroids_from_boundaries(h, d, io.read_boundaries(file))
        if missing:
            print(f"warning: boundaries of '{lv}': {len(missing):,} areas have no boundary "
                  f"(e.g. {', '.join(missing[:5])}); their flows are left out of flows.geojson.", file=sys.stderr)
        xy[d] = (lon_a, lat_a)
    return xy or None


def cmd_release_od(args: argparse.Namespace) -> int:
    from dpcore.areas.hierarchy import read_hierarchy_table
    from dpcore.core.pipeline import release_od
    from dpcore.flows import od, od_export
    from dpcore.privacy import budget
    from dpcore.privacy.noise import secure_source

    # everything that needs no data is checked before the trips are read or budget is spent
    make, cost, delta, given, cap = _od_cost(args)
    info = od.get(args.mechanism)
    if not info.ledger:
        raise ParameterError(
            f"{info.title} is (ε, δ)-DP; its cost cannot be added to a pure-ε or zCDP budget ledger, so "
            "'release od' does not run it. Use --mechanism inftda (or compare with it in the benchmarks).")
    split_text = str(args.split).strip()
    if split_text in ("uniform", "geometric"):
        split, weights = split_text, None
    else:
        split, weights = "custom", _split_list(split_text, "--split", float, "1,1,2,4")
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
    options = {"neighbour": args.neighbour, "orientation": args.orientation, "split": split, "weights": weights,
               "order": args.order, "tiebreak": args.tiebreak}

    h, hier_df = _od_hierarchy(args)
    od.plan(h, h, info.name, cost, max_trips=args.max_trips, distinct=not args.repeats, **options)
    xy = _od_coordinates(args, h, hier_df)
    del hier_df
    ledger_args = argparse.Namespace(ledger=args.ledger, budget_cap=cap)
    ledger_path, ledger = _load_ledger(ledger_args, make, cost)

    routed = _engine_for(args, args.input)
    if routed is not None:
        counts = _od_counts_by_engine(args, h, *routed)
    else:
        path = Path(args.input)
        df = read_hierarchy_table(path)
        origin, destination, count = _od_columns(args, [str(c) for c in df.columns])
        if args.drop_unmatched:
            o = od.match_leaves(h, df[origin])
            d = od.match_leaves(h, df[destination])
            keep = (o >= 0) & (d >= 0)
            n_drop = int((~keep).sum())
            if n_drop:
                # a count of confidential rows: to stderr (for the curator), not to the stdout pipelines log
                print(f"Dropped {n_drop:,} of {len(df):,} trip rows whose origin or destination is missing or not a "
                      f"finest area ('{h.levels[-1]}') of the hierarchy (curator-only; not in the export).",
                      file=sys.stderr)
                df = df.loc[keep].reset_index(drop=True)
        counts = od.ODCounts.from_frame(df, h, origin=origin, destination=destination, count=count, user=args.user,
                                        max_trips=args.max_trips, distinct=not args.repeats)
        del df
    rel = _charged(ledger_path, ledger, lambda: release_od(counts, info.name, cost, ledger, noise=secure_source(),
                                                           **options))
    paths = od_export.write_od(rel, out, ledger, origin_xy=xy, delta=delta, extra={"budget_input": given},
                               top=args.geojson_top)
    if cost.definition == "zcdp":
        src = (f" from (ε = {given['epsilon']:g}, δ = {given['delta']:g}) by the {given['conversion']} conversion"
               if given["given"] == "epsilon, delta" else "")
        budget_text = (f"ρ = {cost.value:.4g}{src} (≈ ε = {budget.zcdp_to_approx_dp(cost.value, delta):.3g} "
                       f"at δ = {delta:g})")
    else:
        budget_text = cost.label()
    per_level = ", ".join(f"{lp.name} {rel.values[t].size:,}" for t, lp in enumerate(rel.plan.levels) if t > 0)
    print(f"Released O/D flows with {info.title}, {budget_text}; flows per level: {per_level}; "
          f"{_budget_left(ledger_path, ledger)}")
    for p in paths:
        print(f"  wrote {p}")
    return 0


def _glue_negative_values(argv: list[str]) -> list[str]:
    """Turn ``--bounds -74.06,...`` into ``--bounds=-74.06,...``.

    argparse takes a value starting with '-' that is not a plain number for an
    option, and western or southern bounds always start with '-'.
    """
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--bounds", "--epsilon") and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def cmd_run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    import shlex

    from dpcore.core import spec as config

    cfg = config.load(args.config)
    sub = parser.release_parsers[cfg["release"]]  # type: ignore[attr-defined]
    flags = {o for a in sub._actions for o in a.option_strings}  # noqa: SLF001 - argparse has no public list
    argv = config.to_argv(cfg, Path(args.config).resolve().parent, flags)
    if args.dry_run:
        print("python -m dpcore " + " ".join(shlex.quote(a) for a in argv))
        return 0
    return main(argv)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = _glue_negative_values(list(sys.argv[1:] if argv is None else argv))
    try:
        args = parser.parse_args(argv)
        if args.command == "mechanisms":
            return cmd_mechanisms(args)
        if args.command == "release":
            if args.kind == "points":
                return cmd_release_points(args)
            if args.kind == "census":
                return cmd_release_census(args)
            if args.kind == "hierarchy":
                return cmd_release_hierarchy(args)
            if args.kind == "od":
                return cmd_release_od(args)
            raise ParameterError("Say what to release: 'python -m dpcore release points ...', "
                                 "'... release hierarchy ...', '... release census ...' or '... release od ...'.")
        if args.command == "run":
            return cmd_run(parser, args)
        if args.command == "evaluate":
            if args.kind == "points":
                return cmd_evaluate_points(args)
            raise ParameterError("Say what to evaluate: 'python -m dpcore evaluate points ...'.")
        parser.print_help()
        return EXIT_USER_ERROR
    except DPCoreError as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_USER_ERROR
    except OSError as e:
        print(f"error: cannot read or write a file: {e.strerror or e} ({e.filename}). "
              "Check the path and its permissions.", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
