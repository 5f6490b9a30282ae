"""The command line's parser: every command and its options (``python -m dpcore --help``)."""

from __future__ import annotations

import argparse
from typing import Any

from dpcore import __version__
from dpcore.cli import areas, flows, history, interval, plan, points, recommend, series, synthesize
from dpcore.errors import ParameterError

__all__ = ["build_parser"]


def add_run_parser(sub: Any) -> argparse.ArgumentParser:
    rn = sub.add_parser("run", help="make the release a TOML config file describes (see dpcore/core/spec.py)")
    rn.add_argument("config", help="the config file, e.g. release.toml (the app's 'Release config' download)")
    rn.add_argument("--dry-run", action="store_true",
                    help="print the equivalent 'release' command line and stop (nothing is read or spent)")
    return rn



class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump
        raise ParameterError(f"{message} (see '{help_command(self.prog)}')")


def help_command(prog: str) -> str:
    """The help command of a (sub)parser: its whole command after the program's name.

    >>> help_command("dpcore")
    'python -m dpcore --help'
    >>> help_command("dpcore release points")
    'python -m dpcore release points --help'
    """
    words = prog.split()[1:]
    return " ".join(["python -m dpcore", *words, "--help"])


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="dpcore", description="Differentially private releases of location data.")
    p.add_argument("--version", action="version", version=f"dpcore {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    points.add_mechanisms_parser(sub)
    r = sub.add_parser("release", help="make a release")
    rsub = r.add_subparsers(dest="kind", parser_class=_Parser)
    pts = points.add_points_parser(rsub)
    cen = areas.add_census_parser(rsub)
    hi = areas.add_hierarchy_parser(rsub)
    od = flows.add_od_parser(rsub)
    add_run_parser(sub)
    plan.add_plan_parser(sub)
    recommend.add_recommend_parser(sub)
    series.add_budgets_parser(sub)
    history.add_history_parser(sub)
    interval.add_interval_parser(sub)
    synthesize.add_synthesize_parser(sub)
    p.release_parsers = {"points": pts, "census": cen, "hierarchy": hi, "od": od}  # type: ignore[attr-defined]

    ev = sub.add_parser("evaluate", help="compare mechanisms on range queries (curator-only)")
    evsub = ev.add_subparsers(dest="kind", parser_class=_Parser)
    points.add_evaluate_parser(evsub)
    return p
