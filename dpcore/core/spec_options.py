"""The options of every ``release KIND`` command and the values a release description holds for them.

One row per option (:data:`OPTIONS`): its flag, the config section and key it lives under, the
command line's form and default (checked against the parsers by ``tests/unit/cli/test_spec.py``) and
the type of the value a :class:`~dpcore.core.spec.ReleaseSpec` holds.  Adding an option of ``release
KIND`` is adding its row.

Command-line forms: ``str``, ``int``, ``float``, ``flag`` (on/off), ``repeat`` (a repeatable ``--flag
VALUE``) and ``opt`` (``--budget-db [FILE]``).  Value types (:data:`TYPES`), what the description holds:

=========  =================================================  ==============================================
type       value                                              also read from (the command line, old configs)
=========  =================================================  ==============================================
``text``   a string                                           a number; a TOML array (joined with commas)
``int``    an int; ``float`` a float                          their text
``number`` a number (ε, ρ)                                    its text (text that is no number is kept, and
                                                              the release refuses it with the flag's message)
``bool``   True or False
``opt``    True (the default database) or a file              ``""`` (the flag given without a value)
``list``   a tuple of strings (levels, columns)               ``"a,b,c"``
``ints``   a tuple of ints (grid, prefix lengths)             ``"16,8"`` (text that does not read is kept)
``floats`` a tuple of numbers (bounds)                        ``"-74.06,40.56,-73.7,40.92"`` (likewise)
``split``  a name (``uniform``...) or a tuple of numbers      ``"1,1,2"``
``items``  a tuple of strings, one per repeated item          ``"a,b"`` items (split at commas)
``table``  a dict of strings (``KEY=VALUE`` items)             ``["KEY=VALUE", ...]``
``params`` a dict of numbers, booleans and strings            ``["c=10", ...]`` (``"10"`` is read as 10)
=========  =================================================  ==============================================

Numbers keep their text: a whole number given as such stays an int (``bounds = [0, 0, 1, 1]`` is
written back as ``--bounds=0,0,1,1``), and equals the float of the same value.

>>> o = find("points", "domain", "bounds")
>>> o.read("-74.06,40.56,-73.70,40.92", o.flag), o.read([0, 0, 1, 1], "[domain] bounds")
((-74.06, 40.56, -73.7, 40.92), (0, 0, 1, 1))
>>> o.argv((0, 0, 1, 1)), o.argv((0.0, 0.5, 1.0, 1.5)), o.read("1,2,x", o.flag)
(['--bounds=0,0,1,1'], ['--bounds=0.0,0.5,1.0,1.5'], '1,2,x')
>>> p = find("points", "mechanism", "params")
>>> p.read(["c=10", "height=2", "fast=true", "name=ab"], p.flag), p.argv({"c": 10})
({'c': 10, 'height': 2, 'fast': True, 'name': 'ab'}, ['--param', 'c=10'])
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpcore.errors import ParameterError

KINDS = ("points", "hierarchy", "census", "od")
SECTIONS = ("input", "engine", "domain", "mechanism", "budget", "output", "options")
#: Options whose value is a path (made relative to the config file's folder).
PATHS = {"--input", "--out", "--ledger", "--budget-db", "--workload-file", "--hierarchy", "--areas", "--area-sets",
         "--coordinates", "--boundaries"}
#: The value type of an option of each command-line form, unless its row names another.
_BY_FORM = {"str": "text", "int": "int", "float": "float", "flag": "bool", "repeat": "items", "opt": "opt"}
TYPES = ("text", "int", "float", "number", "bool", "opt", "list", "ints", "floats", "split", "items", "table",
         "params")


@dataclass(frozen=True)
class Option:
    """One option of ``release KIND``: ``flag`` is ``section.key`` of a config; the command line gives it in
    ``form`` with ``default``; a release description holds it as a value of ``type`` (:data:`TYPES`)."""

    flag: str
    section: str
    key: str
    form: str = "str"
    default: Any = None
    type: str = ""

    def __post_init__(self) -> None:
        if not self.type:
            object.__setattr__(self, "type", _BY_FORM[self.form])
        assert self.type in TYPES, self

    @property
    def dest(self) -> str:
        """The attribute of the parsed arguments (``--user-cap`` -> ``user_cap``)."""
        return self.flag[2:].replace("-", "_")

    @property
    def is_path(self) -> bool:
        return self.flag in PATHS

    @property
    def value_default(self) -> Any:
        """The default as the description's value (``"1024,1024"`` -> ``(1024, 1024)``)."""
        return self.read(self.default, self.flag)

    def read(self, value: Any, where: str) -> Any:
        """The description's value of ``value``: a Python or TOML value of this option's type, or the text
        the command line (or an older config) gives; ``where`` (a flag or ``[section] key``) names it in
        messages.  Reading a value twice gives the same value; None (not given) stays None."""
        if value is None:
            return None
        return _READ[self.type](value, where)

    def arg(self, value: Any) -> Any:
        """The value in the command line's form (what its parser makes of the option): text for lists,
        ``KEY=VALUE`` items for tables."""
        if value is None:
            return [] if self.form == "repeat" else None
        if self.type == "opt":
            return "" if value is True else value
        if self.type == "number":  # the parser keeps ε and ρ as text (the release reads them)
            return _text(value)
        if self.type in ("table", "params"):
            return [f"{k}={_text(v)}" for k, v in value.items()]
        if self.type == "items":
            return list(value)
        if isinstance(value, tuple):
            return ",".join(map(_text, value))
        return value

    def argv(self, value: Any) -> list[str]:
        """The command-line arguments giving ``value`` (``['--grid=16,8']``, ``['--param', 'c=10']``...)."""
        v = self.arg(value)
        if self.form == "flag":
            return [self.flag] if v else []
        if self.form == "repeat":
            return [x for item in v for x in (self.flag, item)]
        if self.form == "opt" and v == "":
            return [self.flag]
        return [f"{self.flag}={_text(v)}"]

    def toml(self, value: Any) -> Any:
        """The value as written in a TOML config (arrays, tables, numbers, booleans)."""
        if isinstance(value, tuple):
            return [self.toml(x) for x in value]
        if isinstance(value, dict):
            return {k: self.toml(x) for k, x in value.items()}
        return value

    def rebase(self, value: Any, base: Path) -> Any:
        """``value`` with its relative paths taken from ``base`` (a config file's folder)."""
        if not self.is_path or value is None or value is True:
            return value
        if isinstance(value, dict):
            return {k: _path(v, base) for k, v in value.items()}
        return _path(value, base)


def _o(flag: str, section: str, key: str | None = None, form: str = "str", default: Any = None,
       type: str = "") -> Option:  # noqa: A002 - the row's column
    return Option(flag, section, key or flag[2:].replace("-", "_"), form, default, type)


_BUDGET = (_o("--budget-cap", "budget", "cap", "float"), _o("--budget-db", "budget", "db", "opt"),
           _o("--ledger", "budget"), _o("--population", "budget"), _o("--matches-spent-data", "budget"),
           _o("--no-budget", "budget", form="flag",
                                                                          default=False))
#: Releases over time (issue 24): the time column is read from the input, the period and range are public
#: like the domain, the unit over time and its caps belong to the budget.
_TIME = (_o("--time-col", "input", "time"), _o("--period", "domain", default="day"),
         _o("--time-range", "domain"), _o("--unit", "budget"), _o("--max-periods", "budget", form="int"),
         _o("--horizon-cap", "budget", form="float"), _o("--cumulative", "mechanism", form="flag", default=False))
_ENGINE = (_o("--engine", "engine", "name", default="auto"), _o("--spark-master", "engine"))
#: A count table released as one person counted once (issue 26 item 15), confirmed by the curator.
_PERSON_ONCE = _o("--each-person-counted-once", "budget", form="flag", default=False)

OPTIONS: dict[str, tuple[Option, ...]] = {
    "points": (
        _o("--input", "input", "path"), _o("--lat-col", "input", "lat"), _o("--lon-col", "input", "lon"),
        _o("--user-col", "input", "user"), _o("--user-cap", "input", "user_cap", "int"),
        # rows whose coordinate is text that is not a number: left out and counted instead of refused
        _o("--drop-unreadable", "input", form="flag", default=False),
        *_ENGINE,
        _o("--bounds", "domain", type="floats"), _o("--grid", "domain", default="1024,1024", type="ints"),
        # the points' coordinate precision (degrees): a public fact of the data's format, stated by the curator
        _o("--coordinate-precision", "domain", type="number"),
        _o("--mechanism", "mechanism", "name"), _o("--param", "mechanism", "params", "repeat", (), "params"),
        _o("--workload-file", "mechanism"),
        _o("--epsilon", "budget", type="number"), _o("--rho", "budget", type="number"),
        _o("--delta", "budget", form="float", default=1e-6),
        *_BUDGET, *_TIME,
        _o("--out", "output", "dir"), _o("--suppress", "output"), _o("--cv-threshold", "output", form="float", default=0.3),
    ),
    "census": (
        _o("--input", "input", "path"), _o("--levels", "input", type="list"), _o("--count", "input"),
        _o("--ordinal", "input", form="repeat", default=()),
        _o("--ordinal-order", "input", form="repeat", default=(), type="table"),
        _o("--areas", "input"), _o("--name", "input", form="repeat", default=(), type="table"),
        *_ENGINE,
        _o("--mechanism", "mechanism", "name", default="privelet"),
        _o("--plus", "mechanism", form="repeat", default=()),
        _o("--marginals", "mechanism", default="1"), _o("--geo-level", "mechanism"),
        _o("--epsilon", "budget", type="number"), _o("--rho", "budget", type="number"),
        *_BUDGET, _PERSON_ONCE,
        _o("--out", "output", "dir"), _o("--suppress", "output"), _o("--cv-threshold", "output", form="float", default=0.3),
    ),
    "hierarchy": (
        _o("--input", "input", "path"), _o("--levels", "input", type="list"), _o("--count", "input", type="list"),
        _o("--group-col", "input"),
        _o("--max-size", "input", form="int", default=7), _o("--codes", "input", default="auto"),
        _o("--areas", "input"), _o("--input-lists-all-areas", "input", form="flag", default=False),
        _o("--name", "input", form="repeat", default=(), type="table"),
        *_ENGINE,
        _o("--mechanism", "mechanism", "name", default="exact"), _o("--area-sets", "mechanism"),
        _o("--sets-weight", "mechanism", form="float", default=1.0),
        _o("--epsilon", "budget", type="number"), _o("--rho", "budget", type="number"),
        _o("--delta", "budget", form="float", default=1e-6),
        _o("--split", "budget", default="uniform", type="split"), _o("--neighbour", "budget", default="add_remove"),
        _o("--order", "budget", default="ascending"),
        *_BUDGET, _PERSON_ONCE, *_TIME, _o("--user-col", "input", "user"),
        _o("--user-cap", "input", "user_cap", "int"),
        _o("--boundaries", "output", form="repeat", default=(), type="table"), _o("--out", "output", "dir"),
        _o("--suppress", "output"), _o("--cv-threshold", "output", form="float", default=0.3),
    ),
    "od": (
        _o("--input", "input", "path"), _o("--origin", "input"), _o("--destination", "input"), _o("--count", "input"),
        _o("--user", "input", "user"), _o("--max-trips", "input", form="int", default=1),
        _o("--repeats", "input", form="flag", default=False),
        _o("--drop-unmatched", "input", form="flag", default=False),
        *_ENGINE,
        _o("--hierarchy", "domain"), _o("--levels", "domain", type="list"), _o("--code-column", "domain"),
        _o("--prefix-lengths", "domain", type="ints"), _o("--level-names", "domain", type="list"),
        _o("--codes", "domain", default="auto"),
        _o("--names", "domain", form="repeat", default=(), type="table"),
        _o("--mechanism", "mechanism", "name", default="inftda"),
        _o("--orientation", "mechanism", default="destination"), _o("--order", "mechanism", default="ascending"),
        _o("--tiebreak", "mechanism", default="random"),
        _o("--epsilon", "budget", type="number"), _o("--delta", "budget", form="float"),
        _o("--rho", "budget", type="number"),
        _o("--pure", "budget", form="flag", default=False), _o("--conversion", "budget", default="classic"),
        _o("--neighbour", "budget", default="replace"), _o("--split", "budget", default="uniform", type="split"),
        *_BUDGET, *_TIME,
        _o("--boundaries", "output", form="repeat", default=(), type="table"), _o("--coordinates", "output"),
        _o("--coord-code", "output"), _o("--lat", "output"), _o("--lon", "output"),
        _o("--geojson-top", "output", form="int"), _o("--out", "output", "dir"), _o("--suppress", "output"), _o("--cv-threshold", "output", form="float", default=0.3),
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


def keyword(kind: str, name: str) -> Option | None:
    """The option a keyword of :meth:`dpcore.core.spec.ReleaseSpec.points` (and its siblings) names: its
    attribute name (``input``, ``mechanism``, ``epsilon``, ``user_cap``, ``out``...), else its config key
    when only one option has it (``params``, ``lat``, ``cap``...)."""
    opts = OPTIONS[kind]
    for o in opts:
        if o.dest == name:
            return o
    keyed = [o for o in opts if o.key == name]
    return keyed[0] if len(keyed) == 1 else None


def keywords(kind: str) -> list[str]:
    """Every keyword :func:`keyword` reads for ``kind`` (for the message refusing an unknown one)."""
    opts = OPTIONS[kind]
    return sorted({o.dest for o in opts} | {o.key for o in opts if keyword(kind, o.key) is o})


def valid_keys(kind: str, section: str) -> list[str]:
    """The keys ``[section]`` can hold for ``kind`` (for the message refusing an unknown one)."""
    opts = OPTIONS[kind]
    return sorted({o.key for o in opts if o.section == section} | {o.dest for o in opts})


# -- the value types ---------------------------------------------------------------------------


def _text(v: Any) -> str:
    """A value as command-line text (``True`` is ``true``, a float its shortest repr)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list | dict):
        return json.dumps(v)
    if isinstance(v, tuple):
        return json.dumps(list(v))
    return str(v)


def _path(text: Any, base: Path) -> str:
    t = str(text)
    return t if Path(t).expanduser().is_absolute() else str(base / Path(t).expanduser())


def _plain(text: str) -> Any:
    """``text`` as a number or boolean when it reads back to the same text, else the text (lossless:
    ``"010"`` and ``"1e3"`` stay text)."""
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            v = kind(text)
        except ValueError:
            continue
        if _text(v) == text and v == v:
            return v
    return text


def _scalar(value: Any, where: str) -> str:
    """One value as text: a number is its text, an array is joined with commas (configs always could)."""
    if isinstance(value, bool) or isinstance(value, dict):
        key = where.split()[-1]
        raise ParameterError(f"{where} takes a value (e.g. {key} = \"...\"), not "
                             f"{'true/false' if isinstance(value, bool) else 'a table'}.")
    if isinstance(value, list | tuple):
        return ",".join(_scalar(v, where) for v in value)
    return _text(value)


def _parts(value: Any, where: str) -> list[str]:
    """The comma-separated parts of a value (an array's items, or text split at commas), stripped."""
    items = value if isinstance(value, list | tuple) else [value]
    return [p.strip() for v in items for p in _scalar(v, where).split(",") if p.strip()]


def _real(text: str) -> int | float:
    """A real number from its text: a whole number stays an int (``1`` is written back as ``1``, not
    ``1.0``; the two compare equal)."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def _numbers(kind: type) -> Any:
    """A reader of comma-separated numbers (a tuple of ints, or of reals); text that does not read as
    such is kept, and refused with the command line's own message when the release is made."""
    def one(part: str) -> int | float:
        v = _real(part)
        if kind is int and isinstance(v, float):
            if not v.is_integer():  # 16.0 in a TOML array is 16; 16.5 is not a count
                raise ValueError(part)
            return int(v)
        return v

    def read(value: Any, where: str) -> Any:
        try:
            return tuple(one(p) for p in _parts(value, where))
        except ValueError:
            return _scalar(value, where)
    return read


def _number(kind: type, lenient: bool) -> Any:
    """A reader of one number (``int``, ``float``, or a real kept whole when whole for ``lenient`` ε and ρ,
    whose text that is no number is kept and refused with the command line's message when made)."""
    def read(value: Any, where: str) -> Any:
        text = _scalar(value, where)
        try:
            return _real(text) if lenient else kind(text)
        except ValueError:
            if lenient:
                return text
            raise ParameterError(f"{where}: invalid {kind.__name__} value: {text!r}.") from None
    return read


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        key = where.split()[-1]
        raise ParameterError(f"{where} is on or off: write {key} = true or {key} = false.")
    return value


def _opt(value: Any, where: str) -> Any:
    if isinstance(value, bool):
        return True if value else None
    text = _scalar(value, where)
    return True if text == "" else text


def _split(value: Any, where: str) -> Any:
    if isinstance(value, str) and value.strip() and not any(ch.isdigit() for ch in value):
        return value.strip()
    read = _numbers(float)(value, where)
    return read if isinstance(read, tuple) and read else _scalar(value, where)


def _items(value: Any, where: str) -> tuple[str, ...]:
    return tuple(_parts(value, where))


def _pairs(value: Any, where: str, example: str = "KEY=VALUE") -> dict[str, Any]:
    """``KEY=VALUE`` items (a table, or text items as the command line gives them) as a dict."""
    if isinstance(value, dict):
        return {str(k).strip(): v for k, v in value.items()}
    out: dict[str, Any] = {}
    for item in value if isinstance(value, list | tuple) else [value]:
        text = _scalar(item, where)
        if "=" not in text:
            raise ParameterError(f"{where} '{text}' must look like key=value, e.g. {where} {example}.")
        k, v = text.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _table(value: Any, where: str) -> dict[str, str]:
    return {k: _scalar(v, where) for k, v in _pairs(value, where).items()}


def _params(value: Any, where: str) -> dict[str, Any]:
    return {k: _plain(v) if isinstance(v, str) else _frozen_param(v) for k, v in _pairs(value, where, "c=10").items()}


def _frozen_param(v: Any) -> Any:
    """A parameter's value with arrays as tuples (so that two descriptions compare and hash)."""
    if isinstance(v, list | tuple):
        return tuple(_frozen_param(x) for x in v)
    if hasattr(v, "item") and not isinstance(v, str | bytes):  # numpy scalars the app passes in
        return v.item()
    return v


_READ = {"text": _scalar, "int": _number(int, False), "float": _number(float, False),
         "number": _number(float, True), "bool": _bool, "opt": _opt,
         "list": lambda v, w: tuple(_parts(v, w)), "ints": _numbers(int), "floats": _numbers(float),
         "split": _split, "items": _items, "table": _table, "params": _params}
