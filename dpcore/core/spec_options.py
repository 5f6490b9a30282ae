"""The options of every ``release KIND`` command, as a release description (:mod:`dpcore.core.spec`) holds them.

One row per option: its flag, the config section and key it lives under, the form of its value and
its default (the command line's, checked against the parsers by ``tests/unit/cli/test_spec.py``).
Forms: ``str`` (text; a TOML array is written comma-separated), ``int``, ``float``, ``flag`` (on/off),
``repeat`` (a repeatable ``--flag VALUE``: a TOML table is ``KEY=VALUE`` items, an array one item each)
and ``opt`` (``--budget-db [FILE]``: ``true`` is the default database).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KINDS = ("points", "hierarchy", "census", "od")
SECTIONS = ("input", "engine", "domain", "mechanism", "budget", "output", "options")
#: Options whose value is a path (made relative to the config file's folder).
PATHS = {"--input", "--out", "--ledger", "--budget-db", "--workload-file", "--hierarchy", "--areas", "--area-sets",
         "--coordinates", "--boundaries"}


@dataclass(frozen=True)
class Option:
    """One option of ``release KIND``: ``flag`` is ``section.key`` of a config, its value of ``form``."""

    flag: str
    section: str
    key: str
    form: str = "str"
    default: Any = None

    @property
    def dest(self) -> str:
        """The attribute of the parsed arguments (``--user-cap`` -> ``user_cap``)."""
        return self.flag[2:].replace("-", "_")

    @property
    def is_path(self) -> bool:
        return self.flag in PATHS


def _o(flag: str, section: str, key: str | None = None, form: str = "str", default: Any = None) -> Option:
    return Option(flag, section, key or flag[2:].replace("-", "_"), form, default)


_BUDGET = (_o("--budget-cap", "budget", "cap", "float"), _o("--budget-db", "budget", "db", "opt"),
           _o("--ledger", "budget"), _o("--population", "budget"), _o("--no-budget", "budget", form="flag",
                                                                          default=False))
#: Releases over time (issue 24): the time column is read from the input, the period and range are public
#: like the domain, the unit over time and its caps belong to the budget.
_TIME = (_o("--time-col", "input", "time"), _o("--period", "domain", default="day"),
         _o("--time-range", "domain"), _o("--unit", "budget"), _o("--max-periods", "budget", form="int"),
         _o("--horizon-cap", "budget", form="float"))
_ENGINE = (_o("--engine", "engine", "name", default="auto"), _o("--spark-master", "engine"))

OPTIONS: dict[str, tuple[Option, ...]] = {
    "points": (
        _o("--input", "input", "path"), _o("--lat-col", "input", "lat"), _o("--lon-col", "input", "lon"),
        _o("--user-col", "input", "user"), _o("--user-cap", "input", "user_cap", "int"),
        *_ENGINE,
        _o("--bounds", "domain"), _o("--grid", "domain", default="1024,1024"),
        _o("--mechanism", "mechanism", "name"), _o("--param", "mechanism", "params", "repeat", ()),
        _o("--workload-file", "mechanism"),
        _o("--epsilon", "budget"), _o("--rho", "budget"), _o("--delta", "budget", form="float", default=1e-6),
        *_BUDGET, *_TIME,
        _o("--out", "output", "dir"),
    ),
    "census": (
        _o("--input", "input", "path"), _o("--levels", "input"), _o("--count", "input"),
        _o("--ordinal", "input", form="repeat", default=()), _o("--ordinal-order", "input", form="repeat", default=()),
        _o("--areas", "input"), _o("--name", "input", form="repeat", default=()),
        *_ENGINE,
        _o("--mechanism", "mechanism", "name", default="privelet"), _o("--plus", "mechanism", form="repeat", default=()),
        _o("--marginals", "mechanism", default="1"), _o("--geo-level", "mechanism"),
        _o("--epsilon", "budget"), _o("--rho", "budget"),
        *_BUDGET,
        _o("--out", "output", "dir"),
    ),
    "hierarchy": (
        _o("--input", "input", "path"), _o("--levels", "input"), _o("--count", "input"), _o("--group-col", "input"),
        _o("--max-size", "input", form="int", default=7), _o("--codes", "input", default="auto"),
        _o("--areas", "input"), _o("--input-lists-all-areas", "input", form="flag", default=False),
        _o("--name", "input", form="repeat", default=()),
        *_ENGINE,
        _o("--mechanism", "mechanism", "name", default="exact"), _o("--area-sets", "mechanism"),
        _o("--sets-weight", "mechanism", form="float", default=1.0),
        _o("--epsilon", "budget"), _o("--rho", "budget"), _o("--delta", "budget", form="float", default=1e-6),
        _o("--split", "budget", default="uniform"), _o("--neighbour", "budget", default="add_remove"),
        _o("--order", "budget", default="ascending"),
        *_BUDGET, *_TIME, _o("--user-col", "input", "user"), _o("--user-cap", "input", "user_cap", "int"),
        _o("--boundaries", "output", form="repeat", default=()), _o("--out", "output", "dir"),
    ),
    "od": (
        _o("--input", "input", "path"), _o("--origin", "input"), _o("--destination", "input"), _o("--count", "input"),
        _o("--user", "input", "user"), _o("--max-trips", "input", form="int", default=1),
        _o("--repeats", "input", form="flag", default=False), _o("--drop-unmatched", "input", form="flag", default=False),
        *_ENGINE,
        _o("--hierarchy", "domain"), _o("--levels", "domain"), _o("--code-column", "domain"),
        _o("--prefix-lengths", "domain"), _o("--level-names", "domain"), _o("--codes", "domain", default="auto"),
        _o("--names", "domain", form="repeat", default=()),
        _o("--mechanism", "mechanism", "name", default="inftda"),
        _o("--orientation", "mechanism", default="destination"), _o("--order", "mechanism", default="ascending"),
        _o("--tiebreak", "mechanism", default="random"),
        _o("--epsilon", "budget"), _o("--delta", "budget", form="float"), _o("--rho", "budget"),
        _o("--pure", "budget", form="flag", default=False), _o("--conversion", "budget", default="classic"),
        _o("--neighbour", "budget", default="replace"), _o("--split", "budget", default="uniform"),
        *_BUDGET, *_TIME,
        _o("--boundaries", "output", form="repeat", default=()), _o("--coordinates", "output"),
        _o("--coord-code", "output"), _o("--lat", "output"), _o("--lon", "output"),
        _o("--geojson-top", "output", form="int"), _o("--out", "output", "dir"),
    ),
}


def find(kind: str, section: str, key: str) -> Option | None:
    """The option ``[section] key`` names for ``kind``: its own section and key first, then any option whose
    name is ``key`` (``[options] levels`` is ``--levels``), as configs have always been read."""
    opts = OPTIONS[kind]
    for o in opts:
        if (o.section, o.key) == (section, key):
            return o
    for o in opts:
        if o.dest == key:
            return o
    return None


def valid_keys(kind: str, section: str) -> list[str]:
    """The keys ``[section]`` can hold for ``kind`` (for the message refusing an unknown one)."""
    opts = OPTIONS[kind]
    return sorted({o.key for o in opts if o.section == section} | {o.dest for o in opts})
