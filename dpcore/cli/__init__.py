"""Command line: ``python -m dpcore ...``.

    python -m dpcore mechanisms
    python -m dpcore release points --input FILE --bounds W,S,E,N --grid R,C \
        --mechanism NAME --epsilon E [--param key=value ...] [--workload-file RECTS.csv] --out DIR
    python -m dpcore release hierarchy --input FILE --levels a,b,c --count COLUMN \
        --mechanism exact --epsilon E --split uniform --out DIR
    python -m dpcore release od --input FILE --hierarchy FILE --code-column COL \
        --prefix-lengths 2,5,11,12,15 --epsilon E --delta D --out DIR
    python -m dpcore plan hierarchy --levels state,county,tract --areas AREAS.csv \
        --mechanism topdown_l2 --target "level=tract,abs=50,coverage=0.95" [--rho] [--json]
    python -m dpcore release points ... --time-col "Date/Time" --period day --time-range 2014-04-01,2014-04-30
    python -m dpcore budgets [--json]
    python -m dpcore history [--json] [--serve RELEASE_ID --out DIR]
    python -m dpcore interval --release OUT --codes codes.txt|--polygon area.geojson --coverage 0.9 --json
    python -m dpcore recommend points --grid 512 512 --epsilon 1 --n-guess 300000
    python -m dpcore synthesize --release OUT --out points.csv [--seed S]
    python -m dpcore evaluate points --input FILE|synthetic:SIGMA:N --bounds W,S,E,N \
        --grid R,C --mechanisms ug,identity --epsilon 0.1,0.3,0.5 --out DIR

Errors a person can fix print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import sys

from dpcore.cli import history, interval, plan, points, recommend, run, series, synthesize
from dpcore.cli.parser import build_parser
from dpcore.core.spec import KINDS, ReleaseSpec
from dpcore.errors import DPCoreError, ParameterError

EXIT_USER_ERROR = 2


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
            return points.cmd_mechanisms(args)
        if args.command == "release":
            if args.kind in KINDS:
                return run.execute(ReleaseSpec.from_args(args.kind, args), parser)
            raise ParameterError("Say what to release: 'python -m dpcore release points ...', "
                                 "'... release hierarchy ...', '... release census ...' or '... release od ...'.")
        if args.command == "plan":
            return plan.cmd_plan(args)
        if args.command == "recommend":
            return recommend.cmd_recommend(args)
        if args.command == "budgets":
            return series.cmd_budgets(args)
        if args.command == "history":
            return history.cmd_history(args)
        if args.command == "interval":
            return interval.cmd_interval(args)
        if args.command == "synthesize":
            return synthesize.cmd_synthesize(args)
        if args.command == "run":
            return run.cmd_run(parser, args)
        if args.command == "evaluate":
            if args.kind == "points":
                return points.cmd_evaluate_points(args)
            raise ParameterError("Say what to evaluate: 'python -m dpcore evaluate points ...'.")
        parser.print_help()
        return EXIT_USER_ERROR
    except DPCoreError as e:
        # (a marked message has its marker at the front already: DPCoreError.__init__ moves it there)
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
