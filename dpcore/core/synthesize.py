"""Synthetic points and trips that reproduce a release (issue 25, item 6): post-processing only.

``python -m dpcore synthesize --release OUT --out points.csv`` reads the release folder ``OUT``
(its ``release.json`` and ``release.csv``, nothing else: no data, no budget) and writes

* for a **points** release, one row per synthetic point (``lon, lat, cell``): each published leaf
  (the finest cells of ``release.csv``) gets its count of points drawn uniformly in its lon/lat
  rectangle (the PrivTree way of sampling inside the leaves of a private partition: Zhang, Xiao &
  Xie, SIGMOD 2016, section 6);
* for an **od** release, one row per synthetic trip (``trip_id, origin, destination``) between the
  released pairs of the finest level, as many as the released count.

Which counts are reproduced.  A synthetic file holds whole points, so it reproduces non-negative
integers.  The count given to a leaf or a pair is its published value rounded to the nearest whole
number and raised to 0 where negative (:func:`whole_counts`); where the published values already are
non-negative integers (O/D TopDown releases, integer leaves without negatives), every published count
of the finest level is reproduced exactly, and every coarser published count that is the sum of the
finest ones below it (consistent releases) is reproduced too.  Negative or fractional published values
cannot be: the file reproduces their whole non-negative counts instead, and the README says so.

The seed is recorded and not secret: the draws place points inside cells whose counts are already
public, so knowing the seed reveals nothing the release did not (post-processing of public output;
Dwork & Roth 2014, Prop. 2.1).  The DP noise itself never comes from here (it is drawn by
:mod:`dpcore.privacy.noise` from the operating system's CSPRNG).  Patterns inside a cell are artefacts
of the uniform draw, not of the data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcore.data.csv_safe import csv_bytes
from dpcore.data.synthetic import PublicGenerator, public_generator
from dpcore.errors import InputError

__all__ = ["Synthetic", "synthesize", "whole_counts", "write_synthetic"]


@dataclass(frozen=True)
class Synthetic:
    """A synthetic file: its rows, the recorded seed and the README text."""

    frame: pd.DataFrame
    seed: int
    readme: str
    kind: str


def whole_counts(values: NDArray[np.float64]) -> NDArray[np.int64]:
    """The whole non-negative counts a synthetic file reproduces: rounded, negatives raised to 0.

    >>> whole_counts(np.array([3.0, -2.0, 1.6, 0.4])).tolist()
    [3, 0, 2, 0]
    """
    v = np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0)
    return np.maximum(np.rint(v), 0).astype(np.int64)


def _read(folder: Path) -> tuple[dict[str, Any], pd.DataFrame]:
    rec_path, csv_path = folder / "release.json", folder / "release.csv"
    if not rec_path.is_file() or not csv_path.is_file():
        raise InputError(f"'{folder}' holds no release (release.json and release.csv). Give the --out folder "
                         "of a 'python -m dpcore release points|od' run as --release.")
    rec = json.loads(rec_path.read_text("utf-8"))
    full = folder / "release_full.csv"  # a reliability rule blanked values in release.csv: all are kept here
    table = full if full.is_file() else csv_path
    return rec, pd.read_csv(table, dtype={"origin": str, "destination": str, "level": str})


def _points(rec: dict[str, Any], df: pd.DataFrame, rng: PublicGenerator, mask: Any = None) -> tuple[pd.DataFrame, int]:
    """The synthetic points of the leaves, and how many leaves with points lie outside ``mask``."""
    leaves = df[df["leaf"].astype(str).str.lower() == "true"]
    n = whole_counts(leaves["noisy_count"].to_numpy())
    box = leaves[["west", "south", "east", "north"]].to_numpy(dtype=np.float64)
    at = np.repeat(np.arange(len(leaves)), n)
    lon, lat = _uniform(box, at, rng)
    outside = 0
    if mask is not None:
        lon, lat, outside = _in_mask(box, at, n, lon, lat, mask, rng)
    return pd.DataFrame({"lon": lon, "lat": lat, "cell": leaves["id"].to_numpy()[at]}), outside


def _uniform(box: NDArray[np.float64], at: NDArray[np.int64], rng: PublicGenerator
             ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    u = rng.random((at.size, 2))
    return (box[at, 0] + u[:, 0] * (box[at, 2] - box[at, 0]), box[at, 1] + u[:, 1] * (box[at, 3] - box[at, 1]))


#: Rejection rounds inside a mask before the last points of a cell go to a point of its part of the mask.
MASK_ROUNDS = 200


def _in_mask(box: NDArray[np.float64], at: NDArray[np.int64], n: NDArray[np.int64], lon: NDArray[np.float64],
             lat: NDArray[np.float64], mask: Any, rng: PublicGenerator
             ) -> tuple[NDArray[np.float64], NDArray[np.float64], int]:
    """Points drawn uniformly in each cell's part of the public ``mask`` (rejection, vectorised): a cell
    keeps its count; a cell outside the mask keeps the uniform draw over the cell (counted)."""
    import shapely

    shapely.prepare(mask)
    cells = shapely.box(box[:, 0], box[:, 1], box[:, 2], box[:, 3])
    overlap = shapely.area(shapely.intersection(cells, mask)) > 0
    todo = np.flatnonzero(overlap[at])
    for _ in range(MASK_ROUNDS):
        todo = todo[~shapely.contains_xy(mask, lon[todo], lat[todo])]
        if todo.size == 0:
            break
        lon[todo], lat[todo] = _uniform(box, at[todo], rng)
    if todo.size:  # a sliver of the mask in the cell: a point of it (inside the cell and the mask)
        spot = shapely.point_on_surface(shapely.intersection(cells[at[todo]], mask))
        lon[todo], lat[todo] = shapely.get_x(spot), shapely.get_y(spot)
    return lon, lat, int(np.sum(~overlap & (n > 0)))


def _od(rec: dict[str, Any], df: pd.DataFrame) -> pd.DataFrame:
    finest = rec["outputs"]["levels"][-1]
    rows = df[df["level"] == finest]
    n = whole_counts(rows["noisy_count"].to_numpy())
    at = np.repeat(np.arange(len(rows)), n)
    return pd.DataFrame({"trip_id": np.arange(at.size, dtype=np.int64),
                         "origin": rows["origin"].to_numpy()[at], "destination": rows["destination"].to_numpy()[at]})


def _readme(kind: str, rec: dict[str, Any], seed: int, n: int, exact: bool, mask: tuple[str, int] | None = None) -> str:
    what = "points, each drawn uniformly inside its published leaf's lon/lat rectangle" if kind == "points" \
        else "trips, one row per trip of each released origin/destination pair of the finest level"
    if mask is not None:
        what += (f" and inside the curator's public mask ({mask[0]}, fixed before the data); "
                 f"{mask[1]:,} leaves with points lie outside the mask and keep the draw over the whole leaf")
    reproduced = ("Every published count of the finest level is reproduced exactly, and every coarser published "
                  "count that is the sum of the finest ones below it." if exact else
                  "Some published values are negative or not whole numbers; a synthetic file can only hold whole "
                  "points, so each finest count is the published value rounded and raised to 0 where negative, "
                  "and it is these whole non-negative counts that the file reproduces exactly.")
    return "\n".join([
        f"SYNTHETIC {kind.upper()} - synthetic=true - release_id={rec.get('release_id')}",
        f"{n:,} synthetic {what}.",
        "Made from the published release only (post-processing): no data was read and no privacy budget spent.",
        reproduced,
        "Counts over any union of whole published cells match the release; patterns INSIDE a cell are "
        "artefacts of the uniform draw, not features of the data. Do not analyse below the published cells.",
        f"Seed: {seed} (recorded and not secret: the draws only place already-public counts inside public "
        "cells, so the seed reveals nothing the release did not; the DP noise came from the OS CSPRNG).",
        "",
    ])


def synthesize(release: str | Path, *, seed: int | None = None, mask: Any = None,
               mask_name: str = "mask") -> Synthetic:
    """The synthetic points (points release) or trips (od release) of the release folder ``release``.

    ``seed`` (any non-negative integer) makes the file reproducible; by default a fresh one is drawn
    and recorded in the README.  ``mask`` (points only): a public (multi)polygon in lon/lat the curator
    gives, fixed before the data (land, streets, buildings): each leaf's points are drawn uniformly in
    its part of the mask (``mask_name`` names it in the README).  Counts are unchanged either way.
    """
    folder = Path(release)
    rec, df = _read(folder)
    kind = rec.get("kind")
    if seed is not None and seed < 0:
        raise InputError("--seed must be a non-negative whole number.")
    rng, seed = public_generator(seed)
    if mask is not None and kind != "points":
        raise InputError("A mask places synthetic points; trips are drawn between released areas: drop --mask.")
    outside = 0
    if kind == "points":
        frame, outside = _points(rec, df, rng, mask)
        vals = df.loc[df["leaf"].astype(str).str.lower() == "true", "noisy_count"].to_numpy(dtype=np.float64)
    elif kind == "od":
        frame = _od(rec, df)
        vals = df.loc[df["level"] == rec["outputs"]["levels"][-1], "noisy_count"].to_numpy(dtype=np.float64)
    else:
        raise InputError(f"Synthetic files are made from points and od releases; '{folder}' is a {kind} release.")
    exact = bool(np.array_equal(vals, whole_counts(vals)))
    masked = (mask_name, outside) if mask is not None else None
    return Synthetic(frame, int(seed), _readme(str(kind), rec, int(seed), len(frame), exact, masked), str(kind))


def write_synthetic(syn: Synthetic, out: str | Path) -> tuple[Path, Path]:
    """Write the synthetic file ``out`` and its README next to it (``<stem>.README.txt``)."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(csv_bytes(syn.frame, lambda d: d.to_csv(index=False).encode("utf-8")))
    readme = path.with_name(f"{path.stem}.README.txt")
    readme.write_text(syn.readme, encoding="utf-8")
    return path, readme
