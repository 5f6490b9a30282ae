"""Releases described in Python, on the command line or in a TOML file (``python -m dpcore run CONFIG``).

A :class:`ReleaseSpec` says what to release and how: the kind (points, hierarchy, census or od), its
input, engine, domain, mechanism with its parameters, budget and output, each section a mapping of
typed values (numbers, booleans, strings, tuples, dicts).  A config writes the same sections::

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

The same release in Python (every keyword is an option of ``release points``, by its name)::

    ReleaseSpec.points(input="pings/", lat="lat", lon="lon", user="device_id", user_cap=10, engine="duckdb",
                       bounds=(-74.06, 40.56, -73.70, 40.92), grid=(1024, 1024), mechanism="ug",
                       params={"c": 10}, epsilon=0.5, budget_cap=1.0, ledger="ledger.json", out="release")

Every key is one option of ``python -m dpcore release KIND`` (``--lat-col`` is ``lat``, ``--user-cap``
is ``user_cap``...; the table, with the type of each value, is :data:`dpcore.core.spec_options.OPTIONS`),
so a config, a command line and a description written in Python make the same release: the command
line is read by :meth:`ReleaseSpec.from_args` (its one mapping of arguments to a description), a config
by :meth:`ReleaseSpec.from_toml`, and a description is written back by :meth:`ReleaseSpec.to_argv` and
:meth:`ReleaseSpec.to_toml`.  Older configs still read: a list given as text (``bounds = "0,0,1,1"``,
``levels = "a,b"``) and parameters as ``KEY=VALUE`` items (``params = ["c=10"]``).  An unknown key is
refused, naming the keys that section takes.  Paths are relative to the config file.  The app writes
such a file for a release made by clicking (:func:`points_config`, :func:`hierarchy_config`,
:func:`census_config`, :func:`od_config`), and :func:`dpcore.run` makes any of them.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from dpcore.core.spec_options import (
    KINDS,
    OPTIONS,
    SECTIONS,
    Option,
    find,
    keyword,
    keywords,
    valid_keys,
)
from dpcore.errors import InputError, ParameterError

__all__ = ["KINDS", "SECTIONS", "ReleaseSpec", "census_config", "hierarchy_config", "od_config", "points_config"]


def _frozen(d: Mapping[str, Any] | None = None) -> MappingProxyType:
    return MappingProxyType(dict(d or {}))


def _hashable(v: Any) -> Any:
    if isinstance(v, Mapping):
        return tuple((k, _hashable(x)) for k, x in v.items())
    if isinstance(v, list | tuple):
        return tuple(_hashable(x) for x in v)
    return v


@dataclass(frozen=True)
class ReleaseSpec:
    """One release, described once: what the app, ``release KIND``, ``run CONFIG`` and :func:`dpcore.run`
    all make.

    ``kind`` is points, hierarchy, census or od; each section maps its keys (the config's names,
    :data:`dpcore.core.spec_options.OPTIONS`) to typed values: ``bounds`` four numbers, ``grid`` two
    ints, ``levels`` a tuple of column names, ``params`` a dict, ``epsilon`` a float...  A section may
    be given in any form a config or the command line gives (``"0,0,1,1"``, ``["c=10"]``); it holds
    the typed value, and only what differs from the option's default, so that two descriptions of
    one release compare equal.

    >>> s = ReleaseSpec.from_toml('release = "points"\\n[domain]\\nbounds = [0, 0, 1, 1]\\n'
    ...                           '[mechanism]\\nname = "ug"\\n[mechanism.params]\\nc = 10\\n')
    >>> s.domain["bounds"], s.params
    ((0, 0, 1, 1), {'c': 10})
    >>> ReleaseSpec.from_toml(s.to_toml()) == s
    True
    >>> s == ReleaseSpec("points", domain={"bounds": "0,0,1,1"}, mechanism={"name": "ug", "params": ["c=10"]})
    True
    >>> s.to_argv()
    ['release', 'points', '--bounds=0,0,1,1', '--mechanism=ug', '--param', 'c=10']
    """

    kind: str
    input: Mapping[str, Any] = field(default_factory=_frozen)
    engine: Mapping[str, Any] = field(default_factory=_frozen)
    domain: Mapping[str, Any] = field(default_factory=_frozen)
    mechanism: Mapping[str, Any] = field(default_factory=_frozen)
    budget: Mapping[str, Any] = field(default_factory=_frozen)
    output: Mapping[str, Any] = field(default_factory=_frozen)
    options: Mapping[str, Any] = field(default_factory=_frozen)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ParameterError(f"A release is one of {', '.join(KINDS)}; got {self.kind!r}.")
        values: dict[Option, Any] = {}
        for sec in SECTIONS:
            body = getattr(self, sec)
            if not isinstance(body, Mapping):
                raise ParameterError(f"'{sec}' must be a section ([{sec}]) of keys and values, not {body!r}.")
            for key, value in body.items():
                opt = find(self.kind, sec, key)
                if opt is None:
                    raise ParameterError(f"[{sec}] {key} is not an option of 'release {self.kind}'. Options are: "
                                         f"{', '.join(valid_keys(self.kind, sec))}.")
                v = opt.read(value, f"[{sec}] {key}")
                if v is not None:
                    values[opt] = _merge(values[opt], v) if opt in values and opt.form == "repeat" else v
        secs: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
        for opt in OPTIONS[self.kind]:  # the table's order: one canonical order of keys
            if opt in values and values[opt] != opt.value_default:
                secs[opt.section][opt.key] = values[opt]
        for sec in SECTIONS:
            object.__setattr__(self, sec, _frozen(secs[sec]))

    def __hash__(self) -> int:
        return hash((self.kind, *(_hashable(getattr(self, s)) for s in SECTIONS)))

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
    def params(self) -> dict[str, Any]:
        """The mechanism's parameters (``[mechanism.params]``: numbers, booleans, text; the mechanism
        checks them when the release is planned)."""
        return dict(self.mechanism.get("params", {}))

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
        key = "rho" if "rho" in self.budget else "epsilon"
        v = self.budget.get(key)
        if isinstance(v, str):
            raise ParameterError(f"[budget] {key} '{v}' is not a number; use e.g. {key} = 0.5.")
        return None if v is None else float(v)

    @property
    def budget_cap(self) -> float | None:
        """The cap of a budget made new for this data (an existing budget keeps its own)."""
        return self.budget.get("cap")

    @property
    def budget_store(self) -> dict[str, Any]:
        """Where the budget is kept: ``{"ledger": FILE}``, ``{"db": FILE or True}`` (True: the app's
        database), or ``{}`` (the app's database, the default); with ``population`` when the data is
        bound to one."""
        return {k: self.budget[k] for k in ("ledger", "db", "population", "no_budget") if k in self.budget}

    @property
    def output_dir(self) -> str | None:
        """The folder the release's files are written to."""
        return self.output.get("dir")

    # -- building ------------------------------------------------------------------------------

    @classmethod
    def points(cls, **options: Any) -> ReleaseSpec:
        """A points release: ``input`` (a file, folder or glob), ``bounds`` (west, south, east, north),
        ``grid`` (rows, cols), ``mechanism``, ``params``, ``epsilon`` or ``rho``, ``out``; and any option
        of ``release points`` by its name (``lat``, ``lon``, ``user`` with ``user_cap``, ``engine``,
        ``budget_cap``, ``ledger``, ``budget_db``, ``workload_file``...).

        >>> s = ReleaseSpec.points(input="pings.csv", bounds=(-74.06, 40.56, -73.7, 40.92), grid=(256, 256),
        ...                        mechanism="ug", params={"c": 10}, epsilon=0.5, out="release")
        >>> s.domain["grid"], s.mechanism_name, s.params, s.budget_definition, s.budget_value
        ((256, 256), 'ug', {'c': 10}, 'pure', 0.5)
        """
        return cls._build("points", options)

    @classmethod
    def hierarchy(cls, **options: Any) -> ReleaseSpec:
        """Counts over a hierarchy of areas: ``input``, ``levels`` (top first), ``count`` (columns),
        ``areas`` (the public area list), ``mechanism``, ``epsilon`` or ``rho``, ``split`` (a name or
        weights), ``neighbour``, ``out``... (the options of ``release hierarchy``).

        >>> s = ReleaseSpec.hierarchy(input="tracts.csv", levels=["state", "county", "tract"], count=["pop"],
        ...                           areas="tracts.csv", mechanism="topdown_l2", rho=0.5, split=[1, 1, 2], out="o")
        >>> s.input["levels"], s.budget["split"], s.budget_definition
        (('state', 'county', 'tract'), (1, 1, 2), 'zcdp')
        """
        return cls._build("hierarchy", options)

    @classmethod
    def census(cls, **options: Any) -> ReleaseSpec:
        """A census table: ``input``, ``levels``, ``count`` (a column of counts, or one row per person),
        ``ordinal`` (attributes with ordered values) and ``ordinal_order``, ``areas``, ``mechanism``
        (privelet, or matrix with ``marginals``), ``epsilon`` or ``rho``, ``out``...

        >>> s = ReleaseSpec.census(input="people.csv", levels=["state", "county"], ordinal=["age"],
        ...                        ordinal_order={"age": "young|old"}, epsilon=1.0, out="o")
        >>> s.input["ordinal"], s.input["ordinal_order"], s.mechanism_name
        (('age',), {'age': 'young|old'}, 'privelet')
        """
        return cls._build("census", options)

    @classmethod
    def od(cls, **options: Any) -> ReleaseSpec:
        """Trips between areas: ``input``, ``origin``, ``destination``, ``user`` with ``max_trips`` (or
        ``count``), ``hierarchy`` (the public area file) with ``levels`` or ``code_column`` and
        ``prefix_lengths``, ``mechanism``, ``rho`` (or ``epsilon`` with ``delta``, or ``pure``), ``out``...

        >>> s = ReleaseSpec.od(input="trips.csv", hierarchy="blocks.csv", code_column="GEOID",
        ...                    prefix_lengths=(2, 5, 11), rho=0.3, out="o")
        >>> s.domain["prefix_lengths"], s.mechanism_name, s.budget_definition
        ((2, 5, 11), 'inftda', 'zcdp')
        """
        return cls._build("od", options)

    @classmethod
    def _build(cls, kind: str, options: dict[str, Any]) -> ReleaseSpec:
        secs: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
        for name, value in options.items():
            opt = keyword(kind, name)
            if opt is None:
                raise ParameterError(f"{name} is not an option of a {kind} release. Options are: "
                                     f"{', '.join(keywords(kind))}.")
            secs[opt.section][opt.key] = value
        return cls(kind, **secs)

    @classmethod
    def from_args(cls, kind: str, namespace: Any) -> ReleaseSpec:
        """The release ``release KIND`` was asked for, from its parsed arguments (paths as given): the
        command line's one mapping to a description (each option's value read by its row of
        :data:`~dpcore.core.spec_options.OPTIONS`)."""
        if kind not in KINDS:
            raise ParameterError(f"A release is one of {', '.join(KINDS)}; got {kind!r}.")
        secs: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
        for opt in OPTIONS[kind]:
            secs[opt.section][opt.key] = opt.read(getattr(namespace, opt.dest, opt.default), opt.flag)
        return cls(kind, **secs)

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
        secs: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
        for sec in SECTIONS:
            for key, value in (cfg.get(sec) or {}).items():
                opt = find(kind, sec, key)
                secs[sec][key] = value if opt is None else opt.rebase(opt.read(value, f"[{sec}] {key}"), base)
        return cls(kind, **secs)

    # -- writing -------------------------------------------------------------------------------

    def to_argv(self) -> list[str]:
        """The equivalent command line, ``['release', KIND, ...]`` (``run --dry-run`` prints it)."""
        argv = ["release", self.kind]
        for opt in OPTIONS[self.kind]:
            sec = getattr(self, opt.section)
            if opt.key in sec:
                argv += opt.argv(sec[opt.key])
        return argv

    def to_toml(self, header: str = "") -> str:
        """TOML text of this release (``release`` first, then the sections), with an optional comment header;
        :meth:`from_toml` reads it back to an equal description."""
        import tomli_w

        doc: dict[str, Any] = {"release": self.kind}
        for sec in SECTIONS:
            body = {}
            for opt in OPTIONS[self.kind]:
                if opt.section != sec:
                    continue
                if opt.key in getattr(self, sec):
                    body[opt.key] = opt.toml(getattr(self, sec)[opt.key])
                elif opt.flag in _SHOWN and opt.default is not None:  # said even when it is the default
                    body[opt.key] = opt.toml(opt.value_default)
            if body:
                doc[sec] = body
        lines = [f"# {line}" if line else "#" for line in header.splitlines()]
        return ("\n".join(lines) + "\n\n" if lines else "") + tomli_w.dumps(doc)


#: Options a written config states even at their default (a reader sees the engine, grid and mechanism).
_SHOWN = {"--engine", "--grid", "--mechanism"}


def _merge(a: Any, b: Any) -> Any:
    """Two values of one repeatable option (``[mechanism.params]`` and ``[options] param = ...``)."""
    return {**a, **b} if isinstance(a, dict) else (*a, *b)


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
                  out: str = "release", coordinate_precision: float | None = None,
                  drop_unreadable: bool = False) -> ReleaseSpec:
    """The description of a points release the app made (its ``to_toml()`` is the app's release.toml).
    The budget is the app's database (``db = true``), whose cap the app manages, so no ``cap`` is written.
    ``coordinate_precision``: the points' coordinate precision the curator stated (degrees, public).
    ``drop_unreadable``: the points were read with their rows of text coordinates left out (written
    only when true, so the config reads the same rows)."""
    inp: dict[str, Any] = {"path": input_path, "lat": lat, "lon": lon}
    if drop_unreadable:
        inp["drop_unreadable"] = True
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
    dom: dict[str, Any] = {"bounds": [float(x) for x in bounds], "grid": [int(grid[0]), int(grid[1])]}
    if coordinate_precision is not None:
        dom["coordinate_precision"] = float(coordinate_precision)
    return _spec("points", {"input": inp, "engine": eng, "domain": dom,
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
    return ReleaseSpec(kind, **{sec: {k: _clean(v) for k, v in body.items() if v is not None}
                                for sec, body in sections.items()})


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
