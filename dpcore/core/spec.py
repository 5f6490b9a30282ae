"""Releases described by a TOML file: ``python -m dpcore run CONFIG``.

A config names what to release and how, in sections a curator can read::

    release = "points"            # points | hierarchy | census | od

    [input]                       # a file, a folder or a glob (relative to this file)
    path = "pings/"
    lat = "lat"
    lon = "lon"
    user = "device_id"
    user_cap = 10

    [engine]                      # auto | numpy | duckdb | spark
    name = "duckdb"

    [domain]
    bounds = [-74.06, 40.56, -73.70, 40.92]
    grid = [1024, 1024]

    [mechanism]
    name = "ug"
    [mechanism.params]
    c = 10

    [budget]
    epsilon = 0.5                 # or rho = 0.05
    cap = 1.0
    ledger = "ledger.json"        # or db = true: the app's budget database

    [output]
    dir = "release"

Every key is one option of ``python -m dpcore release KIND`` (``--lat-col`` is ``lat``, ``--user-cap``
is ``user_cap``...; the table is :data:`dpcore.core.spec_options.OPTIONS`), so a config and a command line
make the same release: both are read into one :class:`ReleaseSpec`, which the command line executes
(:meth:`ReleaseSpec.from_args`, :meth:`ReleaseSpec.from_toml`) and writes back
(:meth:`ReleaseSpec.to_argv`, :meth:`ReleaseSpec.to_toml`).  An unknown key is refused, naming the keys
that section takes.  Paths are relative to the config file.  The app writes such a file for a release
made by clicking (:func:`points_config`, :func:`hierarchy_config`, :func:`census_config`, :func:`od_config`).

The description reads as a release, not as flags (:attr:`ReleaseSpec.input_path`,
:attr:`~ReleaseSpec.mechanism_name`, :attr:`~ReleaseSpec.params`, :attr:`~ReleaseSpec.budget_definition`,
:attr:`~ReleaseSpec.budget_value`, :attr:`~ReleaseSpec.output_dir`...), and :func:`dpcore.run` makes it.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from dpcore.core.spec_options import KINDS, OPTIONS, SECTIONS, Option, find, valid_keys
from dpcore.errors import InputError, ParameterError

__all__ = ["KINDS", "SECTIONS", "ReleaseSpec", "census_config", "hierarchy_config", "od_config", "points_config"]


def _frozen(d: dict[str, Any] | None = None) -> MappingProxyType:
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True)
class ReleaseSpec:
    """One release, described once: what the app, ``release KIND`` and ``run CONFIG`` all make.

    ``kind`` is points, hierarchy, census or od; each section maps its keys (the config's names,
    :data:`dpcore.core.spec_options.OPTIONS`) to the value the command line would hold for that option
    (text as typed, numbers, on/off, a tuple of repeated items), and holds only what differs from the
    option's default: two descriptions of one release compare equal.

    >>> s = ReleaseSpec.from_toml('release = "points"\\n[domain]\\nbounds = [0, 0, 1, 1]\\n'
    ...                           '[mechanism]\\nname = "ug"\\n[mechanism.params]\\nc = 10\\n')
    >>> s.domain["bounds"], s.mechanism["params"]
    ('0,0,1,1', ('c=10',))
    >>> ReleaseSpec.from_toml(s.to_toml()) == s
    True
    >>> s.to_argv()
    ['release', 'points', '--bounds=0,0,1,1', '--mechanism=ug', '--param', 'c=10']
    """

    kind: str
    input: MappingProxyType = field(default_factory=_frozen)
    engine: MappingProxyType = field(default_factory=_frozen)
    domain: MappingProxyType = field(default_factory=_frozen)
    mechanism: MappingProxyType = field(default_factory=_frozen)
    budget: MappingProxyType = field(default_factory=_frozen)
    output: MappingProxyType = field(default_factory=_frozen)
    options: MappingProxyType = field(default_factory=_frozen)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ParameterError(f"A release is one of {', '.join(KINDS)}; got {self.kind!r}.")
        for sec in SECTIONS:
            object.__setattr__(self, sec, _frozen(getattr(self, sec)))

    def __hash__(self) -> int:
        return hash((self.kind, *(tuple(getattr(self, s).items()) for s in SECTIONS)))

    # -- the release it describes -----------------------------------------------------------------

    @property
    def input_path(self) -> str | None:
        """The input: a file, a folder or a glob."""
        return self.input.get("path")

    @property
    def engine_name(self) -> str:
        """Where the rows are aggregated: auto, numpy, duckdb or spark."""
        return self.engine.get("name", "auto")

    @property
    def mechanism_name(self) -> str | None:
        """The mechanism (a name of :mod:`dpcore.catalog` for this kind), or the kind's default."""
        return self.mechanism.get("name", _default(self.kind, "mechanism", "name"))

    @property
    def params(self) -> dict[str, str]:
        """The mechanism's parameters as given (``[mechanism.params]``; text, resolved by the mechanism)."""
        return dict(item.split("=", 1) for item in self.mechanism.get("params", ()))

    @property
    def budget_definition(self) -> str:
        """The privacy definition the release is charged under: ``pure`` (ε) or ``zcdp`` (ρ; an O/D (ε, δ)
        target is converted to ρ)."""
        if self.budget.get("rho") is not None:
            return "zcdp"
        return "pure" if self.kind != "od" or self.budget.get("pure") else "zcdp"

    @property
    def budget_value(self) -> float | None:
        """The ε or ρ asked for (for an O/D (ε, δ) target: its ε, converted to ρ when made)."""
        v = self.budget.get("rho", self.budget.get("epsilon"))
        return None if v is None else float(v)

    @property
    def budget_cap(self) -> float | None:
        """The cap of a budget made new for this data (an existing budget keeps its own)."""
        return self.budget.get("cap")

    @property
    def budget_store(self) -> dict[str, Any]:
        """Where the budget is kept: ``{"ledger": FILE}``, ``{"db": FILE or ""}`` (the app's database), or
        ``{}`` (the app's database, the default); with ``population`` when the data is bound to one."""
        return {k: self.budget[k] for k in ("ledger", "db", "population", "no_budget") if k in self.budget}

    @property
    def output_dir(self) -> str | None:
        """The folder the release's files are written to."""
        return self.output.get("dir")

    # -- building ------------------------------------------------------------------------------

    @classmethod
    def _of_values(cls, kind: str, values: dict[Option, Any]) -> ReleaseSpec:
        secs: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
        for opt in OPTIONS[kind]:  # the table's order: one canonical order of keys
            if opt in values and values[opt] != opt.default:
                secs[opt.section][opt.key] = values[opt]
        return cls(kind, **secs)

    @classmethod
    def from_args(cls, kind: str, namespace: Any) -> ReleaseSpec:
        """The release ``release KIND`` was asked for, from its parsed arguments (paths as given)."""
        if kind not in KINDS:
            raise ParameterError(f"A release is one of {', '.join(KINDS)}; got {kind!r}.")
        values = {}
        for opt in OPTIONS[kind]:
            v = getattr(namespace, opt.dest, opt.default)
            values[opt] = tuple(v) if isinstance(v, list) else v
        return cls._of_values(kind, values)

    @classmethod
    def from_toml(cls, text_or_path: str | Path, base_dir: str | Path | None = None) -> ReleaseSpec:
        """The release a TOML config describes.

        ``text_or_path`` is a file (a :class:`~pathlib.Path`, or text without a newline or '=') or the
        TOML text itself.  Relative paths in it are taken from the config file's folder (from
        ``base_dir``, or left relative, for text).  An unknown key is refused, naming the keys its
        section takes; a config cannot opt out of accounting (``no_budget``).
        """
        text, name, base = _read(text_or_path, base_dir)
        try:
            cfg = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise InputError(f"'{name}' is not valid TOML: {e}. Fix that line.") from None
        kind = cfg.get("release")
        if kind not in KINDS:
            raise ParameterError(f"'{name}' must say what it releases: release = \"points\" (or "
                                 f"{', '.join(repr(k) for k in KINDS[1:])}); got {kind!r}.")
        extra = [k for k in cfg if k != "release" and k not in SECTIONS]
        if extra:
            raise ParameterError(f"'{name}' has unknown top-level keys {extra}; the sections are "
                                 f"{', '.join(f'[{s}]' for s in SECTIONS)}.")
        for sec in SECTIONS:
            if sec in cfg and not isinstance(cfg[sec], dict):
                raise ParameterError(f"'{sec}' in '{name}' must be a section ([{sec}]), not a value.")
        if (cfg.get("budget") or {}).get("no_budget"):
            # a repeated release must spend from a budget that outlives the run (without [budget] ledger or
            # db, it is the budget database shared with the app, like every release command)
            raise ParameterError("A config repeats a release, so it is always accounted: drop no_budget from "
                                 "[budget] (the release then draws on the budget database shared with the app, "
                                 "or on ledger = \"ledger.json\").")
        values: dict[Option, Any] = {}
        for sec in SECTIONS:
            for key, value in (cfg.get(sec) or {}).items():
                opt = find(kind, sec, key)
                if opt is None:
                    raise ParameterError(f"[{sec}] {key} is not an option of 'release {kind}'. Options are: "
                                         f"{', '.join(valid_keys(kind, sec))}.")
                if opt.form == "repeat" and opt in values:  # [mechanism.params] and [options] param = ...
                    values[opt] = values[opt] + _value(opt, sec, key, value, base)
                else:
                    values[opt] = _value(opt, sec, key, value, base)
        return cls._of_values(kind, values)

    # -- writing -------------------------------------------------------------------------------

    def values(self) -> dict[str, Any]:
        """Every option of ``release KIND`` (attribute name -> value), defaults included: what the command
        line's parser would make of :meth:`to_argv`."""
        out = {}
        for opt in OPTIONS[self.kind]:
            v = getattr(self, opt.section).get(opt.key, opt.default)
            out[opt.dest] = list(v) if isinstance(v, tuple) else v
        return out

    def namespace(self) -> Any:
        """:meth:`values` as an :class:`argparse.Namespace` (what the release commands read)."""
        import argparse

        return argparse.Namespace(**self.values())

    def to_argv(self) -> list[str]:
        """The equivalent command line, ``['release', KIND, ...]`` (``run --dry-run`` prints it)."""
        argv = ["release", self.kind]
        for opt in OPTIONS[self.kind]:
            sec = getattr(self, opt.section)
            if opt.key not in sec:
                continue
            v = sec[opt.key]
            if opt.form == "flag":
                argv += [opt.flag] if v else []
            elif opt.form == "repeat":
                argv += [x for item in v for x in (opt.flag, item)]
            elif opt.form == "opt" and v == "":
                argv.append(opt.flag)
            else:
                argv.append(f"{opt.flag}={_text(v)}")
        return argv

    def to_toml(self, header: str = "") -> str:
        """TOML text of this release (``release`` first, then the sections), with an optional comment header.

        Comma-separated lists are written as arrays, numbers as numbers, ``KEY=VALUE`` items as a table,
        whenever :meth:`from_toml` reads them back to the same description.
        """
        import tomli_w

        doc: dict[str, Any] = {"release": self.kind}
        for sec in SECTIONS:
            body = {}
            for opt in OPTIONS[self.kind]:
                if opt.section != sec:
                    continue
                if opt.key in getattr(self, sec):
                    body[opt.key] = _display(opt, getattr(self, sec)[opt.key])
                elif opt.flag in _SHOWN and opt.default is not None:  # said even when it is the default
                    body[opt.key] = _display(opt, opt.default)
            if body:
                doc[sec] = body
        lines = [f"# {line}" if line else "#" for line in header.splitlines()]
        return ("\n".join(lines) + "\n\n" if lines else "") + tomli_w.dumps(doc)


#: Options a written config states even at their default (a reader sees the engine, grid and mechanism).
_SHOWN = {"--engine", "--grid", "--mechanism"}


def _read(text_or_path: str | Path, base_dir: str | Path | None) -> tuple[str, str, Path]:
    """(text, name for messages, folder of relative paths) of a config given as a file or as text."""
    if isinstance(text_or_path, Path) or ("\n" not in text_or_path and "=" not in text_or_path):
        p = Path(text_or_path)
        if not p.is_file():
            raise InputError(f"Config file '{p}' does not exist. Check the path.")
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise InputError(f"'{p.name}' is not UTF-8 text. Save it as UTF-8.") from None
        return text, p.name, Path(base_dir) if base_dir is not None else p.resolve().parent
    return text_or_path, "config", Path(base_dir) if base_dir is not None else Path()


def _value(opt: Option, sec: str, key: str, value: Any, base: Path) -> Any:
    """The command line's value of ``[sec] key = value`` (paths from ``base``)."""
    where = f"[{sec}] {key}"
    if opt.form == "flag":
        if not isinstance(value, bool):
            raise ParameterError(f"{where} is on or off: write {key} = true or {key} = false.")
        return value
    if opt.form == "repeat":
        if isinstance(value, dict):
            return tuple(f"{k}={_path(v, base) if opt.is_path else _text(v)}" for k, v in value.items())
        items = value if isinstance(value, list) else [value]
        return tuple(_path(v, base) if opt.is_path else _text(v) for v in items)
    if opt.form == "opt" and isinstance(value, bool):
        return "" if value else None  # db = true: the default database
    if isinstance(value, bool) or isinstance(value, dict):
        raise ParameterError(f"{where} takes a value (e.g. {key} = \"...\"), not "
                             f"{'true/false' if isinstance(value, bool) else 'a table'}.")
    text = ",".join(_text(v) for v in value) if isinstance(value, list) else _text(value)
    if opt.form in ("int", "float"):
        try:
            return int(text) if opt.form == "int" else float(text)
        except ValueError:
            raise ParameterError(f"{where}: invalid {opt.form} value: {text!r}.") from None
    return _path(text, base) if opt.is_path else text


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list | dict):
        return json.dumps(v)
    return str(v)


def _path(text: Any, base: Path) -> str:
    t = str(text)
    p = Path(t).expanduser()
    return t if p.is_absolute() else str(base / p)


def _plain(text: str, bools: bool = False) -> Any:
    """``text`` as a TOML number (or boolean) when it reads back to the same text, else the text."""
    if bools and text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            v = kind(text)
        except ValueError:
            continue
        if _text(v) == text and not (isinstance(v, float) and v != v):
            return v
    return text


def _display(opt: Option, v: Any) -> Any:
    """How a value is written in TOML (read back by :func:`_value` to ``v``)."""
    if opt.form == "repeat":
        pairs = [item.partition("=") for item in v]
        if opt.flag in ("--ordinal", "--plus") or not all(eq for _, eq, _ in pairs) or \
                len({k for k, _, _ in pairs}) < len(pairs) or any(k != k.strip() or not k for k, _, _ in pairs):
            return list(v)
        return {k: (val if opt.is_path else _plain(val, bools=True)) for k, _, val in pairs}
    if opt.form == "opt" and v == "":
        return True
    if isinstance(v, str) and not opt.is_path:
        if "," in v:
            return [_plain(x) for x in v.split(",")]
        return _plain(v)
    return v


def _clean(v: Any) -> Any:
    """Plain Python values (numpy scalars, tuples; None dropped) of a value the app passes in."""
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items() if x is not None}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, str | bytes):
        return v.item()
    return v


def _default(kind: str, section: str, key: str) -> Any:
    opt = find(kind, section, key)
    return None if opt is None else opt.default


def _budget(definition: str, value: float, delta: float | None) -> dict[str, Any]:
    """The [budget] of a config the app writes: the release's ε or ρ (δ for zCDP), spent from the
    app's budget database (``db = true``: the app and the pipeline draw on one budget).  No ``cap``:
    the database keeps the dataset's cap, and a copy here would go stale when it changes."""
    bud: dict[str, Any] = {"epsilon" if definition == "pure" else "rho": float(value)}
    if definition != "pure" and delta is not None:
        bud["delta"] = float(delta)
    bud["db"] = True
    return bud


def points_config(*, input_path: str, lat: str, lon: str, user: str | None, user_cap: int | None,
                  bounds: tuple[float, float, float, float], grid: tuple[int, int], mechanism: str,
                  params: dict[str, Any], definition: str, value: float,
                  delta: float | None = None, engine: str = "auto", spark_master: str | None = None,
                  out: str = "release") -> ReleaseSpec:
    """The description of a points release the app made (its ``to_toml()`` is the app's release.toml).
    The budget is the app's database (``db = true``), whose cap the app manages, so no ``cap`` is written."""
    inp: dict[str, Any] = {"path": input_path, "lat": lat, "lon": lon}
    if user:
        inp["user"] = user
        inp["user_cap"] = int(user_cap or 1)
    bud = _budget(definition, value, delta)
    mech: dict[str, Any] = {"name": mechanism}
    if params.get("rectangles"):  # an uploaded workload travels as its own file (workload.json)
        mech["workload_file"] = "workload.json"
    simple = {k: v for k, v in params.items() if isinstance(v, str | int | float | bool) and v is not None}
    if simple:
        mech["params"] = simple
    eng: dict[str, Any] = {"name": engine}
    if engine == "spark" and spark_master:
        eng["spark_master"] = spark_master
    return _spec("points", {"input": inp, "engine": eng,
                            "domain": {"bounds": [float(x) for x in bounds], "grid": [int(grid[0]), int(grid[1])]},
                            "mechanism": mech, "budget": bud, "output": {"dir": out}})


def hierarchy_config(*, input_path: str, levels: list[str], count: list[str], group: str | None,
                     areas_path: str | None, lists_all_areas: bool, mechanism: str, definition: str,
                     value: float, delta: float | None, split: str, weights: list[float] | None, neighbour: str,
                     order: str, sets_path: str | None, sets_weight: float | None, engine: str = "auto",
                     out: str = "release") -> ReleaseSpec:
    """The description of a census-hierarchy release the app's hierarchy page made."""
    inp: dict[str, Any] = {"path": input_path, "levels": list(levels)}
    if count:
        inp["count"] = list(count)
    if group:
        inp["group_col"] = group
    if areas_path:
        inp["areas"] = areas_path
    if lists_all_areas:
        inp["input_lists_all_areas"] = True
    mech: dict[str, Any] = {"name": mechanism}
    if sets_path:
        mech["area_sets"] = sets_path
        mech["sets_weight"] = float(sets_weight or 1.0)
    bud = _budget(definition, value, delta)
    bud["split"] = [float(w) for w in weights] if split == "custom" and weights else split
    if mechanism != "matrix":
        bud["neighbour"] = neighbour
    if mechanism == "topdown_linf":
        bud["order"] = order
    return _spec("hierarchy", {"input": inp, "engine": {"name": engine}, "mechanism": mech, "budget": bud,
                               "output": {"dir": out}})


def _spec(kind: str, sections: dict[str, dict[str, Any]]) -> ReleaseSpec:
    """The description of sections written as a config would (paths as given, None left out)."""
    values: dict[Option, Any] = {}
    for sec, body in sections.items():
        for key, value in body.items():
            if value is None:
                continue
            opt = find(kind, sec, key)
            assert opt is not None, (sec, key)  # the app writes only options of the kind
            values[opt] = _value(opt, sec, key, _clean(value), Path())
    return ReleaseSpec._of_values(kind, values)  # noqa: SLF001 - the module's own constructor


def census_config(*, input_path: str, levels: list[str], count: str | None, ordinals: list[str],
                  ordinal_orders: dict[str, list[str]] | None, areas_path: str | None, mechanism: str,
                  definition: str, value: float, plus: list[str] | None = None, marginals: str | None = None,
                  geo_level: str | None = None, engine: str = "auto", out: str = "release") -> ReleaseSpec:
    """The description of a census-table release (Privelet, or marginal tables with the matrix mechanism)
    the app made; ``ordinal_orders`` are the public orders of the attributes' values."""
    inp: dict[str, Any] = {"path": input_path, "levels": list(levels)}
    if count:
        inp["count"] = count
    if ordinals:
        inp["ordinal"] = list(ordinals)
    if ordinal_orders:
        inp["ordinal_order"] = {k: "|".join(map(str, v)) for k, v in ordinal_orders.items()}
    if areas_path:
        inp["areas"] = areas_path
    mech: dict[str, Any] = {"name": mechanism}
    if mechanism == "matrix":
        mech["marginals"] = marginals or "1"
        if geo_level:
            mech["geo_level"] = geo_level
    elif plus:
        mech["plus"] = list(plus)
    bud = _budget(definition, value, None)
    return _spec("census", {"input": inp, "engine": {"name": engine}, "mechanism": mech, "budget": bud,
                            "output": {"dir": out}})


def od_config(*, input_path: str, hierarchy_path: str, levels: list[str] | None = None,
              code_column: str | None = None, prefix_lengths: list[int] | None = None,
              origin: str | None = None, destination: str | None = None, count: str | None = None,
              user: str | None = None, max_trips: int = 1, repeats: bool = False, mechanism: str = "inftda",
              definition: str, value: float, delta: float | None = None, neighbour: str = "replace",
              orientation: str = "destination", split: str = "uniform", weights: list[float] | None = None,
              order: str = "ascending", engine: str = "auto", out: str = "release") -> ReleaseSpec:
    """The description of an O/D (trips) release the app made: the public hierarchy by one code column
    per level (``levels``) or by prefixes of one code (``code_column``, ``prefix_lengths``); the budget
    as ρ (``definition="zcdp"``, with the δ of its (ε, δ) reading) or pure ε."""
    inp: dict[str, Any] = {"path": input_path, "origin": origin, "destination": destination, "count": count}
    if user:
        inp["user"] = user
        inp["max_trips"] = int(max_trips)
    if repeats:
        inp["repeats"] = True
    dom: dict[str, Any] = {"hierarchy": hierarchy_path}
    if levels:
        dom["levels"] = list(levels)
    else:
        dom["code_column"] = code_column
        dom["prefix_lengths"] = [int(n) for n in prefix_lengths or ()]
    mech = {"name": mechanism, "orientation": orientation, "order": order}
    bud: dict[str, Any] = ({"epsilon": float(value), "pure": True} if definition == "pure"
                           else {"rho": float(value), **({"delta": float(delta)} if delta is not None else {})})
    bud.update(neighbour=neighbour, split=[float(w) for w in weights] if split == "custom" and weights else split,
               db=True)
    return _spec("od", {"input": inp, "engine": {"name": engine}, "domain": dom, "mechanism": mech, "budget": bud,
                        "output": {"dir": out}})
