"""``python -m dpcore recommend points``: which point mechanism to use, from public inputs only.

    python -m dpcore recommend points --grid 512 512 --epsilon 1 --n-guess 300000 [--query-sizes 0.02,0.06,0.1]

Prints the mechanism ``auto`` with rule ``table`` would choose and the reason in one sentence
(:func:`dpcore.points.recommend.recommend`; the rule and its validation: benchmarks/results/auto.md).
Reads no data.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from dpcore.cli.common import split_list
from dpcore.errors import ParameterError


def add_recommend_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("recommend", help="which mechanism to use, from public inputs only (no data read)")
    p.add_argument("kind", choices=["points"], help="points (counts over a grid)")
    p.add_argument("--grid", nargs="+", default=["1024", "1024"], metavar="N",
                   help="grid rows and columns: '--grid 512 512' or '--grid 512,512' (default 1024 1024)")
    p.add_argument("--epsilon", required=True, type=float, help="pure ε-DP budget of the release")
    p.add_argument("--n-guess", required=True, type=float, help="a public guess of the number of points")
    p.add_argument("--query-sizes", default="0.02,0.06,0.1",
                   help="area fractions of the queries you care about (default 0.02,0.06,0.1)")
    p.add_argument("--user-cap", type=int, help="at most this many records per person (ε per record is ε/cap)")
    p.add_argument("--json", action="store_true", help="print the recommendation as JSON")
    return p


def _grid(values: list[str]) -> Any:
    from dpcore.data.domain import Bounds, Grid

    parts = [v for item in values for v in str(item).replace("x", ",").split(",") if v.strip()]
    try:
        rows, cols = (int(v) for v in parts)
    except ValueError:
        raise ParameterError(f"--grid takes rows and columns, e.g. '--grid 512 512' (got {' '.join(values)!r}).") from None
    if rows < 1 or cols < 1:
        raise ParameterError("--grid needs at least one row and one column.")
    return Grid(Bounds(0.0, 0.0, 1.0, 1.0), rows, cols)  # the box does not matter to the rule


def cmd_recommend(args: argparse.Namespace) -> int:
    from dpcore.points import recommend

    grid = _grid(args.grid)
    sizes = split_list(args.query_sizes, "--query-sizes", float, "0.02,0.06,0.1")
    cap = args.user_cap if args.user_cap is not None else 1
    if cap < 1:
        raise ParameterError("--user-cap must be at least 1.")
    rec = recommend.recommend(grid, args.epsilon, n_guess=args.n_guess, query_sizes=sizes, sensitivity=cap)
    if args.json:
        print(json.dumps(rec.to_dict(), indent=2))
        return 0
    print(f"Recommended: {rec.mechanism}")
    print(rec.reason)
    print("To release with it: --mechanism auto --param rule=table --param public_n=N if N is public, or "
          "--mechanism auto --param rule=table (5 % of ε counts the points privately), or --mechanism "
          + rec.mechanism + ".")
    return 0
