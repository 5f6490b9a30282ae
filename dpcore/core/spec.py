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
is ``user_cap``...), so a config and a command line make the same release; :func:`to_argv` does the
translation and the command's own checks then apply.  An unknown key is refused, naming the keys
that section takes.  Paths are relative to the config file.  The app writes such a file for a
release made by clicking (:func:`dumps`).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from dpcore.errors import InputError, ParameterError

KINDS = ("points", "hierarchy", "census", "od")

# (section, key) -> flag, per kind; keys not listed under a section map to --key-with-dashes when
# the command has that option (checked by the caller against the parser).
_ALIASES: dict[str, dict[tuple[str, str], str]] = {
    "points": {("input", "path"): "--input", ("input", "lat"): "--lat-col", ("input", "lon"): "--lon-col",
               ("input", "user"): "--user-col", ("input", "user_cap"): "--user-cap",
               ("budget", "cap"): "--budget-cap", ("output", "dir"): "--out", ("mechanism", "name"): "--mechanism",
               ("engine", "name"): "--engine", ("engine", "spark_master"): "--spark-master",
               ("mechanism", "workload_file"): "--workload-file", ("budget", "db"): "--budget-db"},
    "od": {("input", "path"): "--input", ("input", "user"): "--user", ("input", "max_trips"): "--max-trips",
           ("budget", "cap"): "--budget-cap", ("output", "dir"): "--out", ("mechanism", "name"): "--mechanism",
           ("engine", "name"): "--engine", ("engine", "spark_master"): "--spark-master",
           ("domain", "hierarchy"): "--hierarchy", ("budget", "db"): "--budget-db"},
    "hierarchy": {("input", "path"): "--input", ("budget", "cap"): "--budget-cap", ("output", "dir"): "--out",
                  ("mechanism", "name"): "--mechanism", ("engine", "name"): "--engine",
                  ("engine", "spark_master"): "--spark-master", ("budget", "db"): "--budget-db"},
    "census": {("input", "path"): "--input", ("budget", "cap"): "--budget-cap", ("output", "dir"): "--out",
               ("mechanism", "name"): "--mechanism", ("engine", "name"): "--engine",
               ("engine", "spark_master"): "--spark-master", ("budget", "db"): "--budget-db"},
}
#: Options whose value is a path (made relative to the config file's folder).
_PATHS = {"--input", "--out", "--ledger", "--budget-db", "--workload-file", "--hierarchy", "--areas", "--area-sets",
          "--coordinates", "--boundaries"}
SECTIONS = ("input", "engine", "domain", "mechanism", "budget", "output", "options")


def load(path: str | Path) -> dict[str, Any]:
    """Read and check the top level of a config file (InputError on a TOML syntax error)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"Config file '{p}' does not exist. Check the path.")
    try:
        cfg = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"'{p.name}' is not valid TOML: {e}. Fix that line.") from None
    except UnicodeDecodeError:
        raise InputError(f"'{p.name}' is not UTF-8 text. Save it as UTF-8.") from None
    kind = cfg.get("release")
    if kind not in KINDS:
        raise ParameterError(f"'{p.name}' must say what it releases: release = \"points\" (or "
                             f"{', '.join(repr(k) for k in KINDS[1:])}); got {kind!r}.")
    extra = [k for k in cfg if k != "release" and k not in SECTIONS]
    if extra:
        raise ParameterError(f"'{p.name}' has unknown top-level keys {extra}; the sections are "
                             f"{', '.join(f'[{s}]' for s in SECTIONS)}.")
    for sec in SECTIONS:
        if sec in cfg and not isinstance(cfg[sec], dict):
            raise ParameterError(f"'{sec}' in '{p.name}' must be a section ([{sec}]), not a value.")
    return cfg


def to_argv(cfg: dict[str, Any], base_dir: str | Path, known_flags: set[str]) -> list[str]:
    """The ``release KIND ...`` command line of a config.

    ``known_flags`` are the options of ``release KIND`` (from the parser): a key that maps to none
    of them is refused with the list of what the section can hold.
    """
    kind = cfg["release"]
    aliases = _ALIASES[kind]
    bud = cfg.get("budget") or {}
    if bud.get("no_budget"):
        # a repeated release must spend from a budget that outlives the run (without [budget] ledger or db,
        # it is the budget database shared with the app, like every release command)
        raise ParameterError("A config repeats a release, so it is always accounted: drop no_budget from [budget] "
                             "(the release then draws on the budget database shared with the app, or on "
                             "ledger = \"ledger.json\").")
    base = Path(base_dir)
    argv = ["release", kind]
    for sec in SECTIONS:
        for key, value in (cfg.get(sec) or {}).items():
            if sec == "mechanism" and key == "params":
                if not isinstance(value, dict):
                    raise ParameterError("[mechanism.params] must be a table of key = value.")
                for pk, pv in value.items():
                    argv += ["--param", f"{pk}={_text(pv)}"]
                continue
            if sec == "budget" and key == "split" and isinstance(value, list):
                value = ",".join(_text(v) for v in value)
            flag = aliases.get((sec, key), "--" + key.replace("_", "-"))
            if flag not in known_flags:
                options = sorted({k for (s, k) in aliases if s == sec} | {
                    f[2:].replace("-", "_") for f in known_flags if f.startswith("--")})
                raise ParameterError(f"[{sec}] {key} is not an option of 'release {kind}'. Options are: "
                                     f"{', '.join(options)}.")
            argv += _flag_values(flag, value, base)
    return argv


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list | dict):
        return json.dumps(v)
    return str(v)


def _flag_values(flag: str, value: Any, base: Path) -> list[str]:
    if isinstance(value, bool):
        return [flag] if value else []
    if isinstance(value, dict):  # repeated LEVEL=VALUE options (--name, --boundaries, --ordinal-order)
        out: list[str] = []
        for k, v in value.items():
            v = _path(v, base) if flag in _PATHS else _text(v)
            out += [flag, f"{k}={v}"]
        return out
    if isinstance(value, list) and flag in ("--ordinal", "--plus"):
        return [x for v in value for x in (flag, _text(v))]
    if isinstance(value, list):
        text = ",".join(_text(v) for v in value)
    else:
        text = _text(value)
    if flag in _PATHS:
        text = _path(text, base)
    return [f"{flag}={text}"]


def _path(text: Any, base: Path) -> str:
    t = str(text)
    p = Path(t).expanduser()
    return t if p.is_absolute() else str(base / p)


def dumps(cfg: dict[str, Any], header: str = "") -> str:
    """TOML text of a config (``release`` first), with an optional comment header."""
    import tomli_w

    ordered = {"release": cfg["release"], **{k: v for k, v in cfg.items() if k != "release"}}
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    return ("\n".join(lines) + "\n\n" if lines else "") + tomli_w.dumps(_clean(ordered))


def _clean(v: Any) -> Any:
    """Plain Python values tomli-w can write (numpy scalars, tuples; None dropped)."""
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items() if x is not None}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, str | bytes):
        return v.item()
    return v


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
                  out: str = "release") -> dict[str, Any]:
    """The config of a points release (what the app writes after a release).  The budget is the
    app's database (``db = true``), whose cap the app manages, so no ``cap`` is written."""
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
    return {"release": "points", "input": inp, "engine": eng,
            "domain": {"bounds": [float(x) for x in bounds], "grid": [int(grid[0]), int(grid[1])]},
            "mechanism": mech, "budget": bud, "output": {"dir": out}}


def hierarchy_config(*, input_path: str, levels: list[str], count: list[str], group: str | None,
                     areas_path: str | None, lists_all_areas: bool, mechanism: str, definition: str,
                     value: float, delta: float | None, split: str, weights: list[float] | None, neighbour: str,
                     order: str, sets_path: str | None, sets_weight: float | None, engine: str = "auto",
                     out: str = "release") -> dict[str, Any]:
    """The config of a census-hierarchy release (what the app's hierarchy page writes)."""
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
    return {"release": "hierarchy", "input": inp, "engine": {"name": engine}, "mechanism": mech, "budget": bud,
            "output": {"dir": out}}
