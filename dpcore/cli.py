"""Command line: ``python -m dpcore ...``.

    python -m dpcore mechanisms
    python -m dpcore release points --input FILE --bounds W,S,E,N --grid R,C \
        --mechanism NAME --epsilon E [--param key=value ...] --out DIR
    python -m dpcore evaluate points --input FILE|synthetic:SIGMA:N --bounds W,S,E,N \
        --grid R,C --mechanisms ug,identity --epsilon 0.1,0.3,0.5 --out DIR

Errors a person can fix print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dpcore import __version__, mechanisms
from dpcore.errors import DPCoreError, ParameterError

EXIT_USER_ERROR = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump
        raise ParameterError(f"{message} (see 'python -m dpcore {self.prog.split()[-1]} --help')")


def build_parser() -> argparse.ArgumentParser:
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
    pts.add_argument("--out", required=True, help="output folder for release.csv/.geojson/.json")
    pts.add_argument("--lat-col", help="latitude column (detected by name if omitted)")
    pts.add_argument("--lon-col", help="longitude column (detected by name if omitted)")
    pts.add_argument("--user-col", help="column identifying a person (unit of privacy)")
    pts.add_argument("--user-cap", type=int, help="at most this many records per person (with --user-col)")
    pts.add_argument("--budget-cap", type=float,
                     help="total ε (or ρ with --rho) allowed for this dataset, checked against --ledger")
    pts.add_argument("--ledger", help="JSON file keeping the dataset's spent budget across runs")

    cen = rsub.add_parser("census", help="release hierarchical census counts with Privelet")
    cen.add_argument("--input", required=True, help="CSV (optionally .gz) or Parquet, one row per area or per person")
    cen.add_argument("--levels", required=True,
                     help="code columns of the geography, top first, e.g. state,county,tract")
    cen.add_argument("--count", help="count column (omit when each row is one person)")
    cen.add_argument("--ordinal", action="append", default=[], metavar="COLUMN",
                     help="ordinal attribute column, e.g. age_band (repeatable; values in natural order)")
    cen.add_argument("--plus", action="append", default=[], metavar="AXIS",
                     help="Privelet+: leave this axis untransformed ('geography' or an ordinal column; repeatable)")
    cen.add_argument("--areas", help="public list of the finest areas (CSV with the level columns); "
                                     "without it the area list comes from the data, which leaks empty areas")
    cen.add_argument("--name", action="append", default=[], metavar="LEVEL=COLUMN",
                     help="column with the public name of a level's areas, e.g. --name state=state_name")
    cen.add_argument("--epsilon", required=True, type=str, help="pure ε-DP budget of this release")
    cen.add_argument("--out", required=True, help="output folder for release.csv and release.json")
    cen.add_argument("--budget-cap", type=float, help="total ε allowed for this dataset, checked against --ledger")
    cen.add_argument("--ledger", help="JSON file keeping the dataset's spent budget across runs")

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
    return p


def _parse_params(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for it in items:
        if "=" not in it:
            raise ParameterError(f"--param '{it}' must look like key=value, e.g. --param c=10.")
        k, v = it.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def cmd_mechanisms(args: argparse.Namespace) -> int:
    descs = [m.describe() for m in mechanisms.REGISTRY.values()]
    if args.json:
        print(json.dumps(descs, indent=2))
        return 0
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
    return 0


def cmd_release_points(args: argparse.Namespace) -> int:
    from dpcore import budget, io
    from dpcore.domain import Bounds, Grid, aggregate_points
    from dpcore.export import write_release
    from dpcore.pipeline import release_points

    bounds = Bounds.parse(args.bounds)
    grid = Grid.parse(bounds, args.grid)
    mech = mechanisms.get(args.mechanism)
    flag, text = ("--epsilon", args.epsilon) if args.epsilon is not None else ("--rho", args.rho)
    try:
        value = float(text)
    except ValueError:
        raise ParameterError(f"{flag} '{text}' is not a number; use e.g. {flag} 0.5.") from None
    make = budget.pure if flag == "--epsilon" else budget.zcdp
    params = mech.resolve_params(_parse_params(args.param))
    cost = mech.privacy_cost(make(value), params)
    if args.user_cap is not None and not args.user_col:
        raise ParameterError("--user-cap needs --user-col naming the column that identifies a person.")
    if args.user_col and args.user_cap is None:
        raise ParameterError("--user-col needs --user-cap, the most records one person may contribute (e.g. 10).")

    ledger_path = Path(args.ledger) if args.ledger else None
    if ledger_path is not None and ledger_path.exists():
        try:
            ledger = budget.Ledger.from_dict(json.loads(ledger_path.read_text("utf-8")))
        except (ValueError, KeyError, TypeError) as e:
            raise ParameterError(f"Ledger file '{ledger_path}' is not a dpcore ledger ({e}). "
                                 "Point --ledger to the file an earlier run wrote, or a new path.") from None
        if args.budget_cap is not None and args.budget_cap != ledger.cap.value:
            ledger.set_cap(make(args.budget_cap))
    else:
        cap = args.budget_cap if args.budget_cap is not None else cost.value
        ledger = budget.Ledger(make(cap))
    ledger.check(cost)  # e.g. a ρ release against a pure-ε ledger: say why
    if not ledger.can_spend(cost):
        raise DPCoreError(
            f"This release needs {cost.label()} but only {ledger.remaining:.4g} of the cap "
            f"{ledger.cap.label()} is left in '{ledger_path}'. Lower --epsilon or raise --budget-cap "
            "if your policy allows it."
        )

    path = Path(args.input)
    if not path.exists():
        raise DPCoreError(f"Input file '{path}' does not exist. Check the path given to --input.")
    table = io.load_points_file(path, path.name, lat_col=args.lat_col, lon_col=args.lon_col,
                                user_col=args.user_col)
    agg = aggregate_points(table.lon, table.lat, grid, user=table.user,
                           user_cap=args.user_cap if table.user is not None else None)
    rel = release_points(agg, mech.name, cost, params, ledger)
    paths = write_release(rel, args.out, ledger)
    if ledger_path is not None:
        ledger_path.parent.mkdir(parents=True, exist_ok=True)
        ledger_path.write_text(json.dumps(ledger.to_dict(), indent=2), "utf-8")
    reading = ""
    if cost.definition == "zcdp":
        reading = f" (≈ ε = {budget.zcdp_to_approx_dp(cost.value, args.delta):.3g} at δ = {args.delta:g})"
    print(f"Released {rel.n_rects:,} rectangles with {mech.title}, {cost.label()}{reading}; "
          f"{ledger.remaining:.4g} of the budget left.")
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
    from dpcore import evaluate, io
    from dpcore.domain import Bounds, Grid, aggregate_points

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
        if not path.exists():
            raise DPCoreError(f"Input file '{path}' does not exist. Check the path given to --input, "
                              "or use --input synthetic:SIGMA:N for made-up data.")
    if spec is not None:
        agg = evaluate.synthetic_aggregate(grid, spec.sigma, spec.n, seed=spec.seed)
        source = spec.label
    else:
        table = io.load_points_file(path, path.name, lat_col=args.lat_col, lon_col=args.lon_col)
        agg = aggregate_points(table.lon, table.lat, grid)
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
    from dpcore import budget, census
    from dpcore.noise import secure_source

    try:
        epsilon = float(args.epsilon)
    except ValueError:
        raise ParameterError(f"--epsilon '{args.epsilon}' is not a number; use e.g. --epsilon 0.5.") from None
    cost = budget.pure(epsilon)
    levels = _split_list(args.levels, "--levels", str, "state,county,tract")
    ordinals = [c for item in args.ordinal for c in _split_list(item, "--ordinal", str, "age_band")]
    plus = [c for item in args.plus for c in _split_list(item, "--plus", str, "geography")]
    names = _parse_params(args.name)

    ledger_path = Path(args.ledger) if args.ledger else None
    if ledger_path is not None and ledger_path.exists():
        try:
            ledger = budget.Ledger.from_dict(json.loads(ledger_path.read_text("utf-8")))
        except (ValueError, KeyError, TypeError) as e:
            raise ParameterError(f"Ledger file '{ledger_path}' is not a dpcore ledger ({e}). "
                                 "Point --ledger to the file an earlier run wrote, or a new path.") from None
        if args.budget_cap is not None and args.budget_cap != ledger.cap.value:
            ledger.set_cap(budget.pure(args.budget_cap))
    else:
        cap = args.budget_cap if args.budget_cap is not None else epsilon
        ledger = budget.Ledger(budget.pure(cap))
    ledger.check(cost)

    df = census.read_census_file(args.input)
    areas = census.read_census_file(args.areas) if args.areas else None
    table = census.CensusTable.from_frame(df, levels, args.count, ordinals=ordinals, names=names, areas=areas)
    rel = census.release_census(table, epsilon, secure_source(), plus_axes=plus, ledger=ledger)
    if areas is None:
        print("warning: the list of areas comes from the data; areas with no one are missing from the "
              "release (not protected). Give a public list with --areas.", file=sys.stderr)
    paths = census.write_census(rel, args.out, ledger)
    if ledger_path is not None:
        ledger_path.parent.mkdir(parents=True, exist_ok=True)
        ledger_path.write_text(json.dumps(ledger.to_dict(), indent=2), "utf-8")
    counts = ", ".join(f"{len(rel.levels[n]):,} {n}" for n in table.structure.levels)
    print(f"Released {counts} with Privelet{'+' if rel.plus_axes else ''}, {cost.label()}; "
          f"{ledger.remaining:.4g} of the budget left.")
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
            raise ParameterError("Say what to release: 'python -m dpcore release points ...' "
                                 "or 'python -m dpcore release census ...'.")
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
