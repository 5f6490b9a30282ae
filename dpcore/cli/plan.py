"""``python -m dpcore plan KIND``: the smallest budget that meets the errors you can live with.

    python -m dpcore plan hierarchy --levels state,county,tract --areas AREAS.csv \
        --mechanism topdown_l2 --target "level=tract,abs=50,coverage=0.95"
    python -m dpcore plan od --levels state,county --sizes 1,5 --mechanism inftda --target "level=county,abs=20"
    python -m dpcore plan points --bounds -74.3,40.5,-73.7,40.9 --grid 64,64 --mechanism quadtree \
        --param height=6 --target "abs=10"
    python -m dpcore plan hierarchy --levels county,tract --sizes 5,240 --mechanism exact --rho \
        --target "level=tract,abs=20,coverage=0.9" --periods 52 --period week --horizon-cap 0.5

Reads public inputs only (the grid, the public list of areas or the number of areas per level),
never counts; prints the proposed ε (or ρ with --rho), the split over levels and each level's
expected error (:func:`dpcore.core.target.plan_for_targets`), or JSON with --json.  With
``--periods P`` the proposal is the budget of each period of a series, followed by the horizon
figure for a person present in every period and, with ``--horizon-cap``, a refusal (exit 2) when
that figure would pass the cap (:func:`dpcore.core.target_time.plan_over_time`).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from dpcore.cli.common import neighbour_arg, parse_params, split_list
from dpcore.errors import ParameterError

KINDS = ("points", "hierarchy", "od")


def add_plan_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("plan", help="propose the smallest budget that meets target errors (no data read)")
    p.add_argument("kind", choices=KINDS, help="points, hierarchy (counts over areas) or od (trips between areas)")
    p.add_argument("--mechanism", required=True, help="the mechanism (see 'python -m dpcore mechanisms')")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="a mechanism parameter")
    p.add_argument("--target", action="append", default=[], metavar="TEXT",
                   help="an error you can live with, one per level: \"level=tract,abs=50,coverage=0.95\" (±50 for "
                        "95 %% of tracts) or \"level=county,rel=10%%,min=1000\" (within 10 %% for counts of 1,000 or "
                        "more); level defaults to the finest (released) level, coverage to 0.95")
    p.add_argument("--rho", action="store_true", help="propose a ρ-zCDP budget (default: pure ε-DP)")
    p.add_argument("--keep-split", action="store_true",
                   help="keep the mechanism's split over levels (its 'split' parameter); only the total is searched")
    p.add_argument("--min-share", type=float, default=0.01,
                   help="least share of the total every level keeps when the planner chooses the split (default 0.01)")
    p.add_argument("--json", action="store_true", help="print the proposal as JSON")
    t = p.add_argument_group("over time: the same target in every period of a series")
    t.add_argument("--periods", type=int, help="number of periods released with this plan, e.g. 52 (weeks): the "
                                               "budget proposed is per period, and the horizon figure is shown")
    t.add_argument("--period", default="period", help="the period's name in the text, e.g. day, week, month")
    t.add_argument("--horizon-cap", type=float, metavar="CAP",
                   help="with --periods: the most a person present in every period may spend (ρ with --rho, else "
                        "ε); a plan that would pass it is refused")
    t.add_argument("--delta", type=float, default=1e-6, help="δ of the (ε, δ) reading of a ρ (default 1e-6)")
    t.add_argument("--statistic", metavar="{period,cumulative,window:L}",
                   help="with --periods and --rho: the statistic data users mainly read; the plan then compares each "
                        "period released on its own with the square-root factorisation of the prefix sums (year to "
                        "date, rolling windows of L periods) and recommends one")
    g = p.add_argument_group("points: the public grid")
    g.add_argument("--bounds", help="public domain 'west,south,east,north' in degrees")
    g.add_argument("--grid", default="1024,1024", help="grid 'rows,cols' (default 1024,1024)")
    g.add_argument("--n-estimate", type=int, help="a public guess of the number of points (ug, ag size their grid by it)")
    g.add_argument("--user-cap", type=int, help="at most this many records per person")
    a = p.add_argument_group("hierarchy and od: the public areas")
    a.add_argument("--levels", help="level names (code columns of --areas), top first, e.g. state,county,tract")
    a.add_argument("--areas", help="public list of the finest areas (CSV/Parquet with the level columns)")
    a.add_argument("--sizes", help="instead of --areas: the number of areas per level, top first, e.g. 50,3000,85000 "
                                   "(children spread evenly over their parents)")
    a.add_argument("--codes", default="auto", choices=["auto", "global", "within_parent"],
                   help="with --areas: are each level's codes unique across the level (see 'release hierarchy')")
    a.add_argument("--neighbour", default="add_remove", type=neighbour_arg, metavar="{add_remove,replace}",
                   help="one record added or removed (default) or replaced (the total is then public)")
    a.add_argument("--max-trips", type=int, default=1, help="od: most trips one person makes (default 1)")
    return p


def _even_hierarchy(levels: list[str], sizes: list[int]) -> Any:
    """A public hierarchy with ``sizes[d]`` areas at level ``d``, children spread evenly."""
    import pandas as pd

    from dpcore.data.hierarchy import Hierarchy

    if len(sizes) != len(levels):
        raise ParameterError(f"--sizes gives {len(sizes)} numbers for {len(levels)} levels ({', '.join(levels)}); "
                             "give one per level.")
    if any(n < 1 for n in sizes) or any(b < a for a, b in zip(sizes, sizes[1:], strict=False)):
        raise ParameterError(f"--sizes {','.join(map(str, sizes))} must be positive and never fall from a level to "
                             "the next (every area splits into one or more).")
    if sizes[-1] > 5_000_000:
        raise ParameterError("--sizes: more than 5,000,000 finest areas; give the public area list with --areas.")
    return Hierarchy.from_frame(pd.DataFrame(even_codes(levels, sizes)), levels, codes="global", source="area list")


def even_codes(levels: list[str], sizes: list[int]) -> dict[str, Any]:
    """Each finest area's code at every level, nested whatever the sizes: area ``j`` of a level of ``n``
    areas lies in area ``floor(j·m/n)`` of the level of ``m`` areas above it (every one of those ``m`` is
    hit, as ``m ≤ n``).  (``floor(i·m/N)`` from the finest index ``i`` directly does not nest unless the
    sizes divide evenly: a county could then lie in two states.)

    >>> codes = even_codes(["state", "county", "tract"], [2, 3, 7])
    >>> codes["county"].tolist(), codes["state"].tolist()
    (['0', '0', '0', '1', '1', '2', '2'], ['0', '0', '0', '0', '0', '1', '1'])
    """
    import numpy as np

    code = np.arange(sizes[-1])
    out: dict[str, Any] = {levels[-1]: code.astype(str)}
    for d in range(len(sizes) - 2, -1, -1):
        code = code * sizes[d] // sizes[d + 1]  # the parent of each area of level d + 1
        out[levels[d]] = code.astype(str)
    return {lv: out[lv] for lv in levels}


def _domain(args: argparse.Namespace) -> tuple[Any, Any, dict[str, Any]]:
    """(domain, unit, public inputs) from the public options of the kind."""
    from dpcore.areas.unit import hierarchy_unit
    from dpcore.flows.unit import od_unit
    from dpcore.points.unit import points_unit

    if args.kind == "points":
        from dpcore.data.domain import Bounds, Grid

        if not args.bounds:
            raise ParameterError("Give the public domain with --bounds west,south,east,north.")
        grid = Grid.parse(Bounds.parse(args.bounds), args.grid)
        return grid, points_unit(args.user_cap), ({"n_estimate": args.n_estimate} if args.n_estimate else {})
    if not args.levels:
        raise ParameterError("Give the level names with --levels, top first, e.g. --levels state,county,tract.")
    levels = split_list(args.levels, "--levels", str, "state,county,tract")
    if bool(args.areas) == bool(args.sizes):
        raise ParameterError("Give the public areas one way: --areas FILE (the list of finest areas) or --sizes "
                             "(the number of areas per level). The planner never reads counts.")
    if args.areas:
        from dpcore.data.code_tables import read_code_table
        from dpcore.data.hierarchy import Hierarchy

        h = Hierarchy.from_frame(read_code_table(args.areas), levels, codes=args.codes, source="area list")
    else:
        h = _even_hierarchy(levels, split_list(args.sizes, "--sizes", int, "3,12,60"))
    if args.kind == "hierarchy":
        return h, hierarchy_unit(args.neighbour), {}
    if args.max_trips < 1:
        raise ParameterError(f"--max-trips must be at least 1 (got {args.max_trips}).")
    return h, od_unit(args.neighbour, args.max_trips), {}


def cmd_plan(args: argparse.Namespace) -> int:
    from dpcore import catalog
    from dpcore.core.target import parse_target, plan_for_targets

    if not args.target:
        raise ParameterError("State at least one error you can live with, e.g. "
                             "--target \"level=tract,abs=50,coverage=0.95\".")
    targets = [parse_target(t) for t in args.target]
    mech = catalog.get(args.kind, args.mechanism)
    domain, unit, public = _domain(args)
    if args.horizon_cap is not None and args.periods is None:
        raise ParameterError("--horizon-cap is the cap of a series: give the number of periods with --periods, "
                             "e.g. --periods 52.")
    prop = plan_for_targets(mech, domain, targets, definition="zcdp" if args.rho else "pure",
                            params=parse_params(args.param), unit=unit, optimise_split=not args.keep_split,
                            min_share=args.min_share, **public)
    over_time = None
    if args.periods is not None:
        from dpcore.core.target_time import plan_over_time
        from dpcore.privacy.budget import PrivacyCost

        over_time = plan_over_time(PrivacyCost(prop.cost.definition, prop.rounded), args.periods,
                                   horizon_cap=args.horizon_cap, delta=args.delta, period_name=args.period)
    cumulative = _cumulative(args, prop.rounded) if args.statistic else None
    if args.json:
        out = prop.to_dict()
        if over_time is not None:
            out["over_time"] = over_time.to_dict()
        if cumulative is not None:
            out["cumulative"] = cumulative[0]
        print(json.dumps(out, indent=1, ensure_ascii=False))
        return 0
    print(format_proposal(prop, mech.title))
    if over_time is not None:
        print(over_time.describe())
    if cumulative is not None:
        print(cumulative[1])
    return 0


def _cumulative(args: argparse.Namespace, rho: float) -> tuple[dict[str, Any], str]:
    """The two designs of a series compared at the per-period ``rho`` (:func:`dpcore.estimate.prefix_sums.recommend`),
    as JSON and as text."""
    from dpcore.estimate.prefix_sums import recommend

    if args.periods is None or not args.rho:
        raise ParameterError("--statistic compares designs of a series under zCDP: give --periods P and --rho.")
    stat, _, window = str(args.statistic).partition(":")
    try:
        w = int(window) if window else None
    except ValueError:
        raise ParameterError(f"--statistic {args.statistic}: the window is a number of periods, e.g. window:4.") from None
    rec = recommend(stat.strip(), args.periods, window=w)
    cmp = rec["comparison"]
    sd = {k: {m: (cmp[k][m] / (2 * rho)) ** 0.5 for m in ("ytd", "period_max")} for k in ("leaves", "factorisation")}
    text = (f"Cumulative series at ρ = {rho:.4g}: year-to-date SD {sd['factorisation']['ytd']:.3g} with the square-root "
            f"factorisation against {sd['leaves']['ytd']:.3g} for summed {args.period}s; one {args.period} "
            f"{sd['factorisation']['period_max']:.3g} against {sd['leaves']['period_max']:.3g} (so a per-{args.period} "
            f"target planned for the leaves is not met by the factorisation); a person present in every {args.period} "
            f"spends {cmp['leaves']['horizon_rho_multiple']:.0f} ρ with the leaves, "
            f"{cmp['factorisation']['horizon_rho_multiple']:.0f} ρ with the factorisation.\n"
            f"Recommended for the {stat} statistic: {rec['method']} ({rec['reason'].split(':')[0]}).")
    return {**rec, "rho": rho, "sd": sd}, text


def format_proposal(prop: Any, title: str) -> str:
    """The proposal as text: the budget, how the split was found, one line per level, the notes."""
    how = {"given": "the mechanism's own split", "independent": "each level's need summed (levels independent)",
           "optimised": "split optimised over the levels"}[prop.split]
    symbol = "ε" if prop.cost.definition == "pure" else "ρ"
    lines = [f"{title}: the smallest budget that meets your targets is {symbol} = {prop.rounded:g} ({how})."]
    width = max(len(lv.level) for lv in prop.levels)
    for lv in prop.levels:
        budget = f"{lv.budget:.4g}" if lv.budget is not None else "-"
        err = f"±{lv.half_width:,.4g} for {lv.coverage:.0%} of {lv.n_counts:,} counts ({lv.method})"
        target = ""
        if lv.target is not None:
            target = f"   target {lv.target.describe()}: {'met' if lv.met else 'NOT met'}"
        lines.append(f"  {lv.level:<{width}}  budget {budget:>8}  {err}{target}")
    if prop.split != "given" and "weights" in prop.params:
        weights = ",".join(f"{w:.4g}" for w in prop.params["weights"])
        lines.append(f"Release with this split: --split {weights}")
    lines += [f"note: {n}" for n in (*prop.notes, *prop.row_notes)]
    return "\n".join(lines)
