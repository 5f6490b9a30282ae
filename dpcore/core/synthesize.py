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


def _points(rec: dict[str, Any], df: pd.DataFrame, rng: PublicGenerator) -> pd.DataFrame:
    leaves = df[df["leaf"].astype(str).str.lower() == "true"]
    n = whole_counts(leaves["noisy_count"].to_numpy())
    box = leaves[["west", "south", "east", "north"]].to_numpy(dtype=np.float64)
    at = np.repeat(np.arange(len(leaves)), n)
    u = rng.random((at.size, 2))
    lon = box[at, 0] + u[:, 0] * (box[at, 2] - box[at, 0])
    lat = box[at, 1] + u[:, 1] * (box[at, 3] - box[at, 1])
    return pd.DataFrame({"lon": lon, "lat": lat, "cell": leaves["id"].to_numpy()[at]})


def _od(rec: dict[str, Any], df: pd.DataFrame) -> pd.DataFrame:
    finest = rec["outputs"]["levels"][-1]
    rows = df[df["level"] == finest]
    n = whole_counts(rows["noisy_count"].to_numpy())
    at = np.repeat(np.arange(len(rows)), n)
    return pd.DataFrame({"trip_id": np.arange(at.size, dtype=np.int64),
                         "origin": rows["origin"].to_numpy()[at], "destination": rows["destination"].to_numpy()[at]})


def _readme(kind: str, rec: dict[str, Any], seed: int, n: int, exact: bool) -> str:
    what = "points, each drawn uniformly inside its published leaf's lon/lat rectangle" if kind == "points" \
        else "trips, one row per trip of each released origin/destination pair of the finest level"
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


def synthesize(release: str | Path, *, seed: int | None = None) -> Synthetic:
    """The synthetic points (points release) or trips (od release) of the release folder ``release``.

    ``seed`` (any non-negative integer) makes the file reproducible; by default a fresh one is drawn
    and recorded in the README.
    """
    folder = Path(release)
    rec, df = _read(folder)
    kind = rec.get("kind")
    if seed is not None and seed < 0:
        raise InputError("--seed must be a non-negative whole number.")
    rng, seed = public_generator(seed)
    if kind == "points":
        frame = _points(rec, df, rng)
        vals = df.loc[df["leaf"].astype(str).str.lower() == "true", "noisy_count"].to_numpy(dtype=np.float64)
    elif kind == "od":
        frame = _od(rec, df)
        vals = df.loc[df["level"] == rec["outputs"]["levels"][-1], "noisy_count"].to_numpy(dtype=np.float64)
    else:
        raise InputError(f"Synthetic files are made from points and od releases; '{folder}' is a {kind} release.")
    exact = bool(np.array_equal(vals, whole_counts(vals)))
    return Synthetic(frame, int(seed), _readme(str(kind), rec, int(seed), len(frame), exact), str(kind))


def write_synthetic(syn: Synthetic, out: str | Path) -> tuple[Path, Path]:
    """Write the synthetic file ``out`` and its README next to it (``<stem>.README.txt``)."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(csv_bytes(syn.frame, lambda d: d.to_csv(index=False).encode("utf-8")))
    readme = path.with_name(f"{path.stem}.README.txt")
    readme.write_text(syn.readme, encoding="utf-8")
    return path, readme
