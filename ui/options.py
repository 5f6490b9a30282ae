"""Options of ``python -m ui.serve`` taken out of the command line before Streamlit reads the rest
(``--workers`` in :mod:`ui.serve`, the address and port in :mod:`ui.workers`).  Standard library only:
the server's start reads it before anything else."""

from __future__ import annotations

from collections.abc import Collection, Sequence


def take_options(argv: Sequence[str], names: Collection[str]) -> tuple[dict[str, str], list[str]]:
    """The options ``names`` among ``argv``, as ``--name value`` or ``--name=value`` (the last of each
    wins; a name at the end without its value: ""), in the order first met; and ``argv`` without them.

    >>> take_options(["app.py", "--workers", "3", "--server.port=8600", "--workers=2", "--x"],
    ...              ("--workers", "--server.port"))
    ({'--workers': '2', '--server.port': '8600'}, ['app.py', '--x'])
    >>> take_options(["app.py", "--workers"], ("--workers",))
    ({'--workers': ''}, ['app.py'])
    """
    found: dict[str, str] = {}
    rest: list[str] = []
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=")
        if name in names:
            found[name] = value if eq else next(args, "")
        else:
            rest.append(arg)
    return found, rest
