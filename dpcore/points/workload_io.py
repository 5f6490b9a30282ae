"""An uploaded workload for the matrix mechanism: lon/lat rectangles the curator wants answered.

The rectangles are the curator's *questions*, so they are public: they are never data, they
may shape the strategy (Li & Miklau 2012, Prop. 3: the strategy depends only on the
workload) and they travel in the release record, so the release can be repeated.

File format (CSV, optionally a release record, see :func:`read_rectangles`): one rectangle per
row with its bounds in degrees (WGS84).  Column names are matched case-insensitively:

* west: ``lon_min``, ``min_lon``, ``west``, ``xmin``, ``x_min``, ``minx``
* south: ``lat_min``, ``min_lat``, ``south``, ``ymin``, ``y_min``, ``miny``
* east: ``lon_max``, ``max_lon``, ``east``, ``xmax``, ``x_max``, ``maxx``
* north: ``lat_max``, ``max_lat``, ``north``, ``ymax``, ``y_max``, ``maxy``
* optional ``name`` (or ``label``), ``weight`` (a positive number, default 1: a rectangle of
  weight ``w`` counts ``w²`` times when the strategy is designed, ours) and ``group``
  (errors are reported per group, unweighted).

Mapping to the grid (:func:`map_to_grid`): a rectangle asks for the cells whose **centres** lie
in it, half-open: ``west <= centre_lon < east`` and ``south <= centre_lat < north``.  Cells are
counted whole (the release has no finer resolution), the centre rule picks the cells that are
mostly inside, and the half-open edges make rectangles that tile an area share no cell (a
centre exactly on a shared edge goes to the rectangle to its east or north).  Parts of a
rectangle outside the grid's public bounding box are clipped, with a warning naming the
rows; a rectangle that lies wholly outside, or that contains no cell centre (smaller than a
cell, or between centres), is refused with an :class:`~dpcore.errors.InputError` naming the
rows and the fix.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpcore.data.domain import Grid
from dpcore.data.hierarchy import data_rows
from dpcore.data.text import SNIFF_BYTES, check_text_head, looks_binary
from dpcore.errors import InputError

__all__ = [
    "MAX_RECTANGLES",
    "COLUMN_ALIASES",
    "RectangleList",
    "CellMapping",
    "read_rectangles",
    "parse_rectangles",
    "map_to_grid",
]

#: Most rectangles in one uploaded workload (the strategy design and error report stay interactive).
MAX_RECTANGLES = 5000
#: Largest upload read (bytes); a workload of 5,000 rectangles is far smaller.
MAX_BYTES = 20 * 1024 * 1024
_MAX_EXAMPLES = 8

COLUMN_ALIASES: dict[str, tuple[str, ...]] = {
    "west": ("lon_min", "min_lon", "lonmin", "minlon", "west", "xmin", "x_min", "minx", "min_x"),
    "south": ("lat_min", "min_lat", "latmin", "minlat", "south", "ymin", "y_min", "miny", "min_y"),
    "east": ("lon_max", "max_lon", "lonmax", "maxlon", "east", "xmax", "x_max", "maxx", "max_x"),
    "north": ("lat_max", "max_lat", "latmax", "maxlat", "north", "ymax", "y_max", "maxy", "max_y"),
    "name": ("name", "label", "query", "id"),
    "weight": ("weight", "weights", "w"),
    "group": ("group", "query_group", "category"),
}
_BOUNDS = ("west", "south", "east", "north")


def _rows(idx: Iterable[int], limit: int = _MAX_EXAMPLES) -> str:
    """'data rows 1, 4, 8' from 0-based data indices (:func:`dpcore.data.hierarchy.data_rows`)."""
    return data_rows(list(idx), limit)


class RectangleList(tuple):
    """An immutable, validated list of rectangles, each a plain JSON-able ``dict``
    ``{"name", "west", "south", "east", "north", "weight", "group"}``.

    Build it from such dicts (a release record's ``mechanism.params.rectangles``), from JSON
    text of them, or from CSV text; it is the kind of the matrix mechanism's ``rectangles``
    parameter, so the rectangles travel in the parameters and the release record.
    """

    def __new__(cls, value: Any = ()) -> RectangleList:
        if isinstance(value, RectangleList):
            return value
        if isinstance(value, bytes | bytearray):
            value = bytes(value).decode("utf-8-sig", errors="replace")
        if isinstance(value, str):
            text = value.strip()
            if text.startswith(("[", "{")):
                try:
                    value = json.loads(text)
                except json.JSONDecodeError as e:
                    raise InputError(f"The rectangles are not valid JSON ({e.msg}, line {e.lineno}). "
                                     "Give a CSV file of rectangles instead.") from None
            else:
                return parse_rectangles(text)
        if isinstance(value, Mapping):  # a release record or {"rectangles": [...]}
            value = _rectangles_in_record(value)
        if not isinstance(value, list | tuple):
            raise InputError("The rectangles must be a list of {west, south, east, north} entries "
                             "or a CSV file with lon_min, lat_min, lon_max, lat_max columns.")
        if value and not all(isinstance(v, Mapping) for v in value):
            raise InputError("Each rectangle must be an entry with west, south, east and north.")
        return _from_frame(pd.DataFrame([dict(v) for v in value]), "the rectangles")

    @classmethod
    def _make(cls, items: list[dict[str, Any]]) -> RectangleList:
        return tuple.__new__(cls, items)

    # arrays for vectorised use
    def bounds(self) -> np.ndarray:
        """``(k, 4)`` west, south, east, north."""
        return np.array([[r[b] for b in _BOUNDS] for r in self], dtype=np.float64).reshape(-1, 4)

    def weights(self) -> np.ndarray:
        return np.array([r["weight"] for r in self], dtype=np.float64)

    def names(self) -> list[str]:
        return [r["name"] for r in self]

    def groups(self) -> list[str]:
        return [r["group"] for r in self]

    def to_list(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self]


def _rectangles_in_record(rec: Mapping[str, Any]) -> Any:
    if "rectangles" in rec:
        return rec["rectangles"]
    params = rec.get("mechanism", {}).get("params", {}) if isinstance(rec.get("mechanism"), Mapping) else {}
    if isinstance(params, Mapping) and params.get("rectangles"):
        return params["rectangles"]
    raise InputError("This JSON file holds no rectangles: give a CSV of rectangles, or the release.json "
                     "of a matrix-mechanism release made with an uploaded workload.")


def _find(columns: list[str], role: str) -> str | None:
    low = {c.strip().lower(): c for c in columns}
    for alias in COLUMN_ALIASES[role]:
        if alias in low:
            return low[alias]
    return None


def _numbers(df: pd.DataFrame, col: str, role: str, what: str) -> np.ndarray:
    raw = df[col]
    num = pd.to_numeric(raw, errors="coerce")
    bad = num.isna().to_numpy()
    if bad.any():
        blank = raw.isna().to_numpy() | raw.astype("string").str.strip().fillna("").eq("").to_numpy()
        kind = ("is empty" if blank[bad].all() else "is not a number" if not blank[bad].any()
                else "is empty or not a number")
        raise InputError(
            f"Column '{col}' ({role}) {kind} in {_rows(np.flatnonzero(bad))} of {what}. Every rectangle "
            "needs four numbers in degrees; fill in or delete those rows."
        )
    vals = num.to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(vals)):
        raise InputError(f"Column '{col}' ({role}) holds infinity in {_rows(np.flatnonzero(~np.isfinite(vals)))} "
                         f"of {what}; use finite degrees.")
    return vals


def _from_frame(df: pd.DataFrame, what: str) -> RectangleList:
    """Validate a table of rectangles (one per row) into a :class:`RectangleList`."""
    cols = [str(c) for c in df.columns]
    df = df.set_axis(cols, axis=1)
    found = {role: _find(cols, role) for role in COLUMN_ALIASES}
    missing = [r for r in _BOUNDS if found[r] is None]
    if missing:
        raise InputError(
            f"Rectangles need the columns lon_min, lat_min, lon_max, lat_max (or west, south, east, north; "
            f"or xmin, ymin, xmax, ymax); {what} has no column for {', '.join(missing)} (its columns: "
            f"{', '.join(cols) or 'none'}). Rename the columns, keeping one rectangle per row."
        )
    if len(df) == 0:
        raise InputError(f"{what} holds no rectangle: add one row per rectangle below the header.")
    if len(df) > MAX_RECTANGLES:
        raise InputError(f"{what} holds {len(df):,} rectangles; at most "
                         f"{MAX_RECTANGLES:,} are supported. Split the workload or keep the most important ones.")
    v = {r: _numbers(df, found[r], r, what) for r in _BOUNDS}
    for a, b, lim in (("west", "east", 180.0), ("south", "north", 90.0)):
        out = (np.abs(v[a]) > lim) | (np.abs(v[b]) > lim)
        if out.any():
            swap = " Check that longitude and latitude are not swapped." if a == "south" else ""
            raise InputError(
                f"{'Longitudes' if a == 'west' else 'Latitudes'} must lie in -{lim:g}..{lim:g}, but do not in "
                f"{_rows(np.flatnonzero(out))} of {what}.{swap} Bounds are in degrees (WGS84)."
            )
    for a, b, fix in (("west", "east", "west < east"), ("south", "north", "south < north")):
        swapped = v[a] > v[b]
        if swapped.any():
            raise InputError(
                f"{found[a]} is larger than {found[b]} in {_rows(np.flatnonzero(swapped))} of {what}: each "
                f"rectangle needs {fix}. Swap the two values in those rows (rectangles across the "
                "antimeridian are not supported)."
            )
        flat = v[a] == v[b]
        if flat.any():
            raise InputError(
                f"{found[a]} equals {found[b]} in {_rows(np.flatnonzero(flat))} of {what}: those rectangles "
                f"have no area. Give each a {fix}."
            )
    k = len(df)
    if found["weight"] is not None:
        w = pd.to_numeric(df[found["weight"]], errors="coerce").to_numpy(dtype=np.float64)
        blank = df[found["weight"]].isna().to_numpy()
        w = np.where(blank, 1.0, w)
        bad = ~np.isfinite(w) | (w <= 0)
        if bad.any():
            raise InputError(
                f"Column '{found['weight']}' must be a positive number (or empty for 1) but is not in "
                f"{_rows(np.flatnonzero(bad))} of {what}. A weight says how much a rectangle matters."
            )
    else:
        w = np.ones(k)
    names = [f"rectangle {i + 1}" for i in range(k)]
    if found["name"] is not None:
        col = df[found["name"]].astype("string").str.strip()
        names = [n if (isinstance(n, str) and n) else d for n, d in zip(col.fillna("").tolist(), names, strict=True)]
    groups = ["all"] * k
    if found["group"] is not None:
        col = df[found["group"]].astype("string").str.strip()
        groups = [g if (isinstance(g, str) and g) else "(no group)" for g in col.fillna("").tolist()]
    items = [
        {"name": names[i], "west": float(v["west"][i]), "south": float(v["south"][i]),
         "east": float(v["east"][i]), "north": float(v["north"][i]), "weight": float(w[i]),
         "group": groups[i]}
        for i in range(k)
    ]
    return RectangleList._make(items)


def parse_rectangles(text: str, source_name: str = "the rectangles file") -> RectangleList:
    """Rectangles from CSV text (comma, semicolon or tab separated; header row first)."""
    if not text.strip():
        raise InputError(f"{source_name} is empty. Give one rectangle per row with lon_min, lat_min, "
                         "lon_max, lat_max.")
    try:
        df = pd.read_csv(io.StringIO(text), sep=None, engine="python", dtype=str, skipinitialspace=True,
                         keep_default_na=False, na_values=[""])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, csv.Error) as e:
        raise InputError(f"{source_name} is not a readable CSV ({e}). Save it as CSV with a header row "
                         "lon_min,lat_min,lon_max,lat_max.") from None
    df = df.dropna(how="all")
    return _from_frame(df.reset_index(drop=True), source_name)


def read_rectangles(source: str | Path | bytes, name: str | None = None) -> RectangleList:
    """Rectangles from a file path or uploaded bytes: a CSV, or a JSON release record of an
    earlier release with an uploaded workload (so ``--workload-file release.json`` repeats it)."""
    if isinstance(source, bytes | bytearray):
        data, label = bytes(source), name or "the uploaded file"
    else:
        p = Path(source)
        if not p.exists():
            raise InputError(f"Workload file '{p}' does not exist. Check the path.")
        if p.stat().st_size > MAX_BYTES:
            raise InputError(f"Workload file '{p}' is larger than {MAX_BYTES // 2**20} MB; a workload of "
                             f"{MAX_RECTANGLES:,} rectangles is far smaller. Is it the right file?")
        data, label = p.read_bytes(), name or f"'{p.name}'"
    if len(data) > MAX_BYTES:
        raise InputError(f"{label} is larger than {MAX_BYTES // 2**20} MB; is it the right file?")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{label} is not UTF-8 text. Save the rectangles as a CSV (UTF-8).") from None
    if looks_binary(data[:SNIFF_BYTES]):
        raise InputError(f"{label} is not a text file. Save the rectangles as a CSV (UTF-8).")
    if not text.lstrip().startswith(("{", "[")):
        check_text_head(data[:SNIFF_BYTES], label, whole=len(data) <= SNIFF_BYTES)
    if text.lstrip().startswith(("{", "[")):
        return RectangleList(text)
    return parse_rectangles(text, label)


@dataclass(frozen=True)
class CellMapping:
    """Rectangles of lon/lat mapped to the grid's cells.

    Attributes
    ----------
    cells : ndarray
        ``(k, 4)`` int64 half-open cell rectangles ``(r0, r1, c0, c1)`` (row 0 is the south edge).
    clipped : ndarray
        0-based indices of rectangles that reach beyond the grid's bounding box (clipped).
    warnings : tuple of str
        What the curator should know (clipping).
    """

    cells: np.ndarray
    clipped: np.ndarray
    warnings: tuple[str, ...]


def map_to_grid(rects: RectangleList, grid: Grid) -> CellMapping:
    """The cells of each rectangle: those whose centres lie in it (half-open, see the module doc).

    Raises :class:`InputError` naming the rows of rectangles that lie wholly outside the grid's
    bounding box or contain no cell centre.
    """
    rects = RectangleList(rects)
    B = rects.bounds()
    lon_e, lat_e = grid.lon_edges(), grid.lat_edges()
    lon_c, lat_c = (lon_e[:-1] + lon_e[1:]) / 2, (lat_e[:-1] + lat_e[1:]) / 2
    # first centre >= west .. first centre >= east: the centres in [west, east)
    c0 = np.searchsorted(lon_c, B[:, 0], side="left")
    c1 = np.searchsorted(lon_c, B[:, 2], side="left")
    r0 = np.searchsorted(lat_c, B[:, 1], side="left")
    r1 = np.searchsorted(lat_c, B[:, 3], side="left")
    b = grid.bounds
    outside = (B[:, 2] <= b.west) | (B[:, 0] >= b.east) | (B[:, 3] <= b.south) | (B[:, 1] >= b.north)
    empty = ((c1 <= c0) | (r1 <= r0)) & ~outside
    problems = []
    if outside.any():
        problems.append(
            f"wholly outside the grid's area (west {b.west:g}, south {b.south:g}, east {b.east:g}, north "
            f"{b.north:g}): {_rows(np.flatnonzero(outside))}. Check those rectangles' coordinates (longitude "
            "first), or widen the area on the Data page."
        )
    if empty.any():
        problems.append(
            f"containing no cell centre of the {grid.rows:,} × {grid.cols:,} grid (cells are "
            f"{grid.dlon:.4g}° × {grid.dlat:.4g}°): {_rows(np.flatnonzero(empty))}. Enlarge those "
            "rectangles, or choose a finer grid on the Data page."
        )
    if problems:
        raise InputError("Some rectangles cannot be answered on this grid. " + " ".join(
            p[0].upper() + p[1:] for p in problems))
    tol = 1e-9 * max(b.east - b.west, b.north - b.south)
    beyond = (B[:, 0] < b.west - tol) | (B[:, 2] > b.east + tol) | (B[:, 1] < b.south - tol) | (B[:, 3] > b.north + tol)
    clipped = np.flatnonzero(beyond)
    warnings = ()
    if clipped.size:
        warnings = (
            f"Rectangles reaching beyond the grid's area are clipped to it (only the part inside is "
            f"answered): {_rows(clipped)}.",
        )
    cells = np.stack([r0, r1, c0, c1], axis=1).astype(np.int64)
    return CellMapping(cells=cells, clipped=clipped, warnings=warnings)
