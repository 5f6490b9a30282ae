"""The making of every release: a :class:`~dpcore.core.spec.ReleaseSpec`, built from a ``release KIND``
command line, read from a TOML config (``run CONFIG``) or written in Python, made by :func:`make`
(``dpcore.run``): checked as the command line's parser checks it, planned once, released through
:func:`dpcore.pipeline.release`, written out.  :func:`execute` is the command line's side (the summary
on stdout); ``run --dry-run`` prints the equivalent ``release`` command line instead."""

from __future__ import annotations

import argparse
from typing import Any

from dpcore.cli.common import Made
from dpcore.cli.parser import build_parser
from dpcore.cli.spec_args import argument_values
from dpcore.core.spec import ReleaseSpec


def make(spec: ReleaseSpec, *, session: Any = None, parser: argparse.ArgumentParser | None = None) -> Made:
    """Make the release ``spec`` describes: read its input, charge its budget (through ``session``, default
    the one its budget options name), write its files.  Returns the release (its envelope), the files
    written and the summary line."""
    from dpcore.cli import areas, flows, points

    parser = parser if parser is not None else build_parser()
    check_spec(parser.release_parsers[spec.kind], spec)  # type: ignore[attr-defined]
    run = {"points": points.execute_points, "census": areas.execute_census,
           "hierarchy": areas.execute_hierarchy, "od": flows.execute_od}[spec.kind]
    return run(spec, session)


def execute(spec: ReleaseSpec, parser: argparse.ArgumentParser | None = None) -> int:
    """The command line's release: :func:`make`, then its summary and the files written on stdout (exit code 0)."""
    made = make(spec, parser=parser)
    print(made.summary)
    for p in made.paths:
        print(f"  wrote {p}")
    return 0


def check_spec(sub: argparse.ArgumentParser, spec: ReleaseSpec) -> None:
    """What the parser of ``release KIND`` checks of a command line, checked of ``spec`` (read from a config,
    not parsed): the required options, the choices and the options that exclude each other, with the
    parser's own messages."""
    values = argument_values(spec)
    given = {a.dest for a in sub._actions if values.get(a.dest, a.default) != a.default}  # noqa: SLF001
    for group in sub._mutually_exclusive_groups:  # noqa: SLF001 - argparse has no public list
        on = [a for a in group._group_actions if a.dest in given]  # noqa: SLF001
        if len(on) > 1:
            sub.error(str(argparse.ArgumentError(on[1], f"not allowed with argument {on[0].option_strings[0]}")))
    missing = [a.option_strings[0] for a in sub._actions if a.required and values.get(a.dest) is None]  # noqa: SLF001
    if missing:
        sub.error(f"the following arguments are required: {', '.join(missing)}")
    for group in sub._mutually_exclusive_groups:  # noqa: SLF001
        if group.required and not any(a.dest in given for a in group._group_actions):  # noqa: SLF001
            names = " ".join(a.option_strings[0] for a in group._group_actions)  # noqa: SLF001
            sub.error(f"one of the arguments {names} is required")
    for a in sub._actions:  # noqa: SLF001
        if a.choices is not None and a.dest in given:
            try:
                sub._check_value(a, values[a.dest])  # noqa: SLF001 - the parser's own message
            except argparse.ArgumentError as e:
                sub.error(str(e))


def cmd_run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Read the config into a release description and make it (or print its command line with --dry-run)."""
    import shlex
    from pathlib import Path

    spec = ReleaseSpec.from_toml(Path(args.config))
    if args.dry_run:
        print("python -m dpcore " + " ".join(shlex.quote(a) for a in spec.to_argv()))
        return 0
    return execute(spec, parser)
