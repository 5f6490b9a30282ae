"""Command line, ``run CONFIG``: the release a TOML config file describes, run as the equivalent
``release`` command line (or printed with --dry-run)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any


def add_run_parser(sub: Any) -> argparse.ArgumentParser:
    rn = sub.add_parser("run", help="make the release a TOML config file describes (see dpcore/core/spec.py)")
    rn.add_argument("config", help="the config file, e.g. release.toml (the app's 'Release config' download)")
    rn.add_argument("--dry-run", action="store_true",
                    help="print the equivalent 'release' command line and stop (nothing is read or spent)")
    return rn


def cmd_run(parser: argparse.ArgumentParser, args: argparse.Namespace, main: Callable[[list[str]], int]) -> int:
    """Run the config's release through ``main`` (the command line's entry point) with its flags."""
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
