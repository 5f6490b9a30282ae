"""Command line, point commands: ``mechanisms`` (the list of every mechanism), ``release points``
(counts over a grid) and ``evaluate points`` (mechanisms compared on range queries)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dpcore import catalog
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
    open_budget,
    parse_params,
    report_unreadable,
    split_list,
    suppress_rule,
    unreadable_hint,
)
from dpcore.cli.series import add_time_args, points_series, time_options
from dpcore.cli.spec_args import arguments
from dpcore.core.spec import ReleaseSpec
from dpcore.data.csv_safe import csv_bytes
from dpcore.errors import DPCoreError, ParameterError


def add_mechanisms_parser(sub: Any) -> argparse.ArgumentParser:
    m = sub.add_parser("mechanisms", help="list mechanisms with their parameters and defaults")
    m.add_argument("--json", action="store_true", help="print as JSON")
    return m


def add_points_parser(rsub: Any) -> argparse.ArgumentParser:
    pts = rsub.add_parser("points", help="release location points as counts over a grid")
    pts.add_argument("--input", required=True, help="CSV (optionally .gz), Parquet or GeoJSON points")
    pts.add_argument("--bounds", required=True, help="public domain 'west,south,east,north' in degrees")
    pts.add_argument("--grid", default="1024,1024", help="grid 'rows,cols' (default 1024,1024)")
    pts.add_argument("--mechanism", required=True, help=f"one of: {', '.join(catalog.names('points'))}")
    budget_grp = pts.add_mutually_exclusive_group(required=True)
    budget_grp.add_argument("--epsilon", type=str, help="pure ε-DP budget of this release (discrete Laplace noise)")
    budget_grp.add_argument("--rho", type=str, help="ρ-zCDP budget of this release (discrete Gaussian noise)")
    pts.add_argument("--delta", type=float, default=1e-6,
                     help="δ for the (ε, δ)-DP reading of a ρ-zCDP release (printed; default 1e-6)")
    pts.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                     help="mechanism parameter (repeatable)")
    pts.add_argument("--workload-file", metavar="FILE",
                     help="matrix and DAWA mechanisms: your queries as a CSV of lon/lat rectangles (lon_min, lat_min, "
                          "lon_max, lat_max; optional name, weight, group), or the release.json of an earlier "
                          "release to repeat its workload; sets --param workload=uploaded")
    pts.add_argument("--out", required=True, help="output folder for release.csv/.geojson/.json")
    pts.add_argument("--coordinate-precision", metavar="DEG",
                     help="the points' coordinate precision in degrees, e.g. 0.0001 for coordinates rounded to 4 "
                          "decimals: a public fact you state from the data's documentation (never measured from the "
                          "data). It changes no noise and no budget; release.json and design.json record it, and the "
                          "data users' polygon intervals (interval --polygon) use it by default")
    pts.add_argument("--lat-col", help="latitude column (detected by name if omitted)")
    pts.add_argument("--lon-col", help="longitude column (detected by name if omitted)")
    pts.add_argument("--user-col", help="column identifying a person (unit of privacy)")
    pts.add_argument("--user-cap", type=int, help="at most this many records per person (with --user-col)")
    pts.add_argument("--drop-unreadable", action="store_true",
                     help="leave out (and count on stderr) the rows whose latitude or longitude is text that is "
                          "not a number, instead of refusing the file")
    add_budget_args(pts)
    add_suppress_arg(pts)
    add_time_args(pts)
    engine_args(pts)
    return pts


def add_evaluate_parser(evsub: Any) -> argparse.ArgumentParser:
    ept = evsub.add_parser(
        "points", help="MRE of every mechanism x ε x query size against the truth (not for publication)")
    ept.add_argument("--input", required=True,
                     help="CSV (optionally .gz), Parquet or GeoJSON points, or 'synthetic:SIGMA:N' for the "
                          "HTF paper's Gaussian data (σ in cells of a 1024 grid), e.g. synthetic:50:1000000")
    ept.add_argument("--bounds", required=True, help="public domain 'west,south,east,north' in degrees")
    ept.add_argument("--grid", default="1024,1024", help="grid 'rows,cols' (default 1024,1024)")
    ept.add_argument("--mechanisms", default=",".join(catalog.names("points")),
                     help=f"comma-separated, default all: {','.join(catalog.names('points'))}")
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
    engine_args(ept)
    return ept


def _points_aggregate(args: argparse.Namespace, grid: Any, user_col: str | None,
                      user_cap: int | None) -> tuple[Any, str, list[str], Any]:
    """The confidential frequency matrix of --input, through the chosen engine, the points'
    content fingerprint (the app's budget key), their tolerant keys
    (:func:`dpcore.data.engines.base.tolerant_points_fingerprints`, aliases of the same budget, computed
    the same way by every engine) and their near-match profile
    (:func:`dpcore.privacy.near_match.points_profile`; DuckDB and Spark compute it in their pass)."""
    from dpcore.data.columns import detect_coordinate_columns
    from dpcore.data.domain import aggregate_points
    from dpcore.data.engines.base import points_fingerprint, tolerant_points_fingerprints
    from dpcore.data.points import load_points_file
    from dpcore.privacy.near_match import points_profile

    drop = bool(getattr(args, "drop_unreadable", False))
    routed = engine_for(args, args.input)
    if routed is None:
        path = Path(args.input)
        with unreadable_hint():
            table = load_points_file(path, path.name, lat_col=args.lat_col, lon_col=args.lon_col, user_col=user_col,
                                     drop_unreadable=drop)
        report_unreadable(table.dropped)
        agg = aggregate_points(table.lon, table.lat, grid, user=table.user,
                               user_cap=user_cap if table.user is not None else None)
        if getattr(args, "no_budget", False):
            return agg, "", [], None
        return (agg, points_fingerprint(table.lon, table.lat),
                tolerant_points_fingerprints(table.lon, table.lat, grid.bounds), points_profile(table.lon, table.lat, (table.lat_column, table.lon_column, table.user_column)))
    eng, src = routed
    lat, lon = args.lat_col, args.lon_col
    if lat is None or lon is None:
        found_lat, found_lon = detect_coordinate_columns(eng.head(src))
        lat, lon = lat or found_lat, lon or found_lon
        if lat is None or lon is None:
            raise DPCoreError(f"No latitude/longitude columns were recognised by name in '{src.label}'. "
                              "Name them with --lat-col and --lon-col.")
    with unreadable_hint():
        pc = eng.points(src, grid, lat=lat, lon=lon, user=user_col, user_cap=user_cap,
                        progress=cli_progress("Counting points"),
                        fingerprint=not getattr(args, "no_budget", False), drop_unreadable=drop)
    report_unreadable(pc.dropped)
    # the engines compute the same tolerant keys as the in-memory read (issue 26 item 12)
    return pc.aggregate, pc.fingerprint, list(pc.keys), pc.profile


#: Per kind: the heading of its part of the listing (the command that releases it).
_KIND_HEADINGS = {
    "points": "Point mechanisms (python -m dpcore release points --mechanism NAME):",
    "hierarchy": "Hierarchy mechanisms (python -m dpcore release hierarchy --mechanism NAME):",
    "census": "Census-table mechanisms (python -m dpcore release census --mechanism NAME):",
    "od": "O/D mechanisms (python -m dpcore release od --mechanism NAME):",
}


def _kind_facts(m: Any) -> dict[str, Any]:
    """The facts a kind adds to the catalogue's description (output properties, tree, ledger)."""
    if m.kind == "points":  # the point mechanism's own privacy text names its noise
        d = m.describe()
        return {"privacy": d["privacy"], "tree": d["tree"]}
    info = m if m.kind == "hierarchy" else getattr(m, "info", None)
    if m.kind == "hierarchy":
        return {"consistent": info.consistent, "integral": info.integral, "nonnegative": info.nonnegative,
                "statistics": [s for s, ok in (("count", info.counts), ("group_sizes", info.group_sizes)) if ok],
                "default_definition": info.default_definition}
    if m.kind == "od":
        return {"consistent": m.consistent, "integral": True, "nonnegative": m.nonnegative,
                "ledger": bool(m.definitions)}
    return {}


def _print_point(d: dict[str, Any]) -> None:
    print(f"    Privacy: {d['privacy']}. Reference: {d['reference']}")
    if not d["params"]:
        print("    Parameters: none besides --epsilon")
    for p in d["params"]:
        rng = ""
        if p["minimum"] is not None or p["maximum"] is not None:
            rng = f" [{p['minimum']}..{p['maximum'] if p['maximum'] is not None else ''}]"
        print(f"    --param {p['name']}=<{p['type']}>  default {p['default']}{rng}: {p['help']}")


def _print_other(d: dict[str, Any]) -> None:
    props = [w for w, ok in (("consistent", d.get("consistent")), ("integral", d.get("integral")),
                             ("non-negative", d.get("nonnegative"))) if ok]
    if d["kind"] == "hierarchy":
        print(f"    Output: {', '.join(props) or 'real-valued'}; statistics: {', '.join(d['statistics'])}. "
              f"Reference: {d['reference']}")
    elif d["kind"] == "od":
        print(f"    Output: {', '.join(props)}. Reference: {d['reference']}"
              + ("" if d["ledger"] else ". Not for 'release od': its (ε, δ) cost cannot go on a budget ledger"))
    else:
        print(f"    Reference: {d['reference']}")
    if d["definitions"]:
        print(f"    Privacy: {d['privacy']}")
    for p in d["params"]:
        print(f"    option {p['name']}, default {p['default']!r}: {p['help']}")


def cmd_mechanisms(args: argparse.Namespace) -> int:
    """List every mechanism of every kind of the catalogue (:mod:`dpcore.catalog`)."""
    descs = [{**m.describe(), **_kind_facts(m)} for m in catalog.REGISTRY]
    if args.json:
        print(json.dumps(descs, indent=2, default=str))
        return 0
    for kind in catalog.kinds():
        print(_KIND_HEADINGS.get(kind, f"{kind} mechanisms:") + "\n")
        for d in (d for d in descs if d["kind"] == kind):
            print(f"{d['name']}: {d['title']}")
            print(f"    {d['summary']}")
            print(f"    When to use: {d['when_to_use']}")
            (_print_point if kind == "points" else _print_other)(d)
            print()
    return 0


def execute_points(spec: ReleaseSpec, session: Any = None) -> Made:
    """``release points``: the counts over the grid of a points release, written to its output folder.

    The plan is built once (``catalog.get("points", name).plan``: parameters, cost and grid checked
    before any data is read) and released through :func:`dpcore.pipeline.release`."""
    args = arguments(spec)  # the options, defaults included, as the parser gives them
    from dpcore import catalog, pipeline
    from dpcore.data.domain import Bounds, Grid
    from dpcore.estimate.data_user_format import coordinate_precision
    from dpcore.points.data_users import stating_precision
    from dpcore.points.unit import points_unit
    from dpcore.privacy import budget

    bounds = Bounds.parse(args.bounds)
    grid = Grid.parse(bounds, args.grid)
    mech = catalog.get("points", args.mechanism)
    rule, cv = suppress_rule(args), cv_threshold(args)
    precision = coordinate_precision(args.coordinate_precision)  # checked before any data is read
    make, requested = budget_arg(args)
    raw = parse_params(args.param)
    if args.workload_file:
        from dpcore.points.workload_io import read_rectangles

        if mech.name not in ("matrix", "dawa", "dawa_free"):
            raise ParameterError(f"--workload-file is for the matrix and DAWA mechanisms (--mechanism matrix, "
                                 f"dawa or dawa_free), not '{mech.name}'.")
        if raw.get("workload", "uploaded") != "uploaded":
            raise ParameterError(f"--workload-file gives uploaded rectangles, but --param workload={raw['workload']} "
                                 "asks for another workload; drop one of the two.")
        if "rectangles" in raw:
            raise ParameterError("Give the rectangles once: --workload-file or --param rectangles, not both.")
        raw["workload"] = "uploaded"
        raw["rectangles"] = read_rectangles(args.workload_file)
    if args.user_cap is not None and not args.user_col:
        raise ParameterError("--user-cap needs --user-col naming the column that identifies a person.")
    if args.user_col and args.user_cap is None:
        raise ParameterError("--user-col needs --user-cap, the most records one person may contribute (e.g. 10).")
    plan = mech.plan(grid, requested, raw, unit=points_unit(args.user_cap if args.user_col else None))
    if time_options(args) is not None:  # a release over time: one release per public period
        if precision is not None:
            raise ParameterError("--coordinate-precision is not yet recorded for a release over time (--time-col); "
                                 "drop it, and give --precision to 'interval --polygon' instead.")
        return points_series(args, plan, grid, make, session)

    agg, fp, others, profile = _points_aggregate(args, grid, args.user_col, args.user_cap)
    bud = open_budget(args, make, plan.cost, "points", fp, plan.unit, session=session, others=others,
                      profile=profile)
    out = pipeline.release(plan, agg, ledger=bud.ledger, session=bud.session)
    out = stating_precision(out, precision)  # the curator's public statement: recorded, no noise, no charge
    rel = out.inner
    # the files, made once from the envelope with the ledger as of the charge, written whole
    paths = deliver(bud, out, out.files(bud.ledger, suppress=rule, cv_threshold=cv), args.out)
    cost = plan.cost
    reading = ""
    if cost.definition == "zcdp":
        reading = f" (≈ ε = {budget.zcdp_to_approx_dp(cost.value, args.delta):.3g} at δ = {args.delta:g})"
    return Made(out, paths, f"Released {rel.n_rects:,} rectangles with {mech.title}, {cost.label()}{reading}; "
                            f"{bud.left()}")


def cmd_evaluate_points(args: argparse.Namespace) -> int:
    from dpcore.data.domain import Bounds, Grid
    from dpcore.points import evaluate

    bounds = Bounds.parse(args.bounds)
    grid = Grid.parse(bounds, args.grid)
    names = [catalog.get("points", n).name for n in split_list(args.mechanisms, "--mechanisms", str, "ug,identity")]
    epsilons = split_list(args.epsilon, "--epsilon", float, "0.1,0.3,0.5")
    sizes = split_list(args.query_sizes, "--query-sizes", float, "0.02,0.06,0.1")
    params: dict[str, dict[str, Any]] = {}
    for key, value in parse_params(args.param).items():
        mech, dot, name = key.partition(".")
        if not dot or not name:
            raise ParameterError(f"--param '{key}={value}' must name the mechanism, e.g. --param ug.c=10.")
        params.setdefault(catalog.get("points", mech).name, {})[name] = value
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
        agg = _points_aggregate(args, grid, None, None)[0]
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
    for frame, p in ((results, paths[0]), (summary, paths[1])):
        p.write_bytes(csv_bytes(frame, lambda d: d.to_csv(index=False).encode("utf-8")))
    paths[2].write_text(md, "utf-8")
    evaluate.plot_summary(summary, paths[3], title)
    print(md)
    for p in paths:
        print(f"  wrote {p}")
    return 0
