"""The files of a points release: ``release.csv``, ``release.geojson`` and ``release.json``
(:func:`release_files`, which :meth:`dpcore.core.mechanism.KindRelease.files` calls once, at
release time; :func:`dpcore.core.record.write_files` writes them).

Exports hold the release and its metadata only (DESIGN.md rule 5): noisy
counts, their public error bars, the public grid and parameters, the privacy
accounting.  Never a true count, a raw row, the dropped-row counts, or the
input file name.  The record is the envelope (``schemas/envelope.schema.json``) with the
points body (``schemas/release.schema.json``).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import orjson
import pandas as pd

from dpcore.core.mechanism import Plan
from dpcore.core.record import build_record, jsonable
from dpcore.core.reliability import ReliabilityRule, assess
from dpcore.core.review import REVIEW_FILES
from dpcore.data.csv_safe import csv_bytes
from dpcore.estimate.data_user_format import MEASUREMENTS_PARQUET, REPLICATE_FILE
from dpcore.points.data_users import (
    DATA_USER_FILES,
    data_user_files,
    data_users_section,
    match_written,
)
from dpcore.points.release import DEFAULT_QUERY_SIZES, PartitionRelease
from dpcore.privacy.budget import pure  # noqa: F401  (the doctest's release cost)
from dpcore.privacy.calibration import interval_half_width
from dpcore.privacy.ledger import Ledger

CSV_COLUMNS = [
    "id", "level", "leaf", "west", "south", "east", "north", "cells",
    "noisy_count", "ci95_low", "ci95_high", "noise_sd", "budget",
]

#: Decimal places of exported coordinates (~0.1 m); the grid edges are public anyway.
COORD_DECIMALS = 7


def release_columns(release: PartitionRelease) -> dict[str, np.ndarray]:
    """The columns of ``release.csv`` as arrays, in the CSV's order (rounded as published)."""
    # rounded as numpy arrays and written without pandas: a DataFrame and its conversion to
    # pyarrow cost more than the writing for a small release, which a series of 365 daily
    # releases pays 365 times
    t = release.table()
    for c in ("west", "south", "east", "north"):
        t[c] = np.round(t[c], COORD_DECIMALS)
    t["noise_sd"] = np.round(t["noise_sd"], 4)
    if np.all(np.mod(release.noisy, 1) == 0):
        for c in ("noisy_count", "ci95_low", "ci95_high"):
            t[c] = np.round(t[c]).astype(np.int64)
    return {c: t[c] for c in CSV_COLUMNS}


def release_frame(release: PartitionRelease) -> pd.DataFrame:
    """One row per released rectangle (every level), in the CSV's column order."""
    return pd.DataFrame(release_columns(release))


def _arrow(frame: pd.DataFrame | dict[str, np.ndarray]) -> Any:
    import pyarrow as pa

    if isinstance(frame, pd.DataFrame):
        return pa.Table.from_pandas(frame, preserve_index=False)
    return pa.table({c: pa.array(np.asarray(v)) for c, v in frame.items()})


def release_csv(release: PartitionRelease, frame: pd.DataFrame | dict[str, np.ndarray] | None = None) -> bytes:
    """``release.csv``: one row per released rectangle, header first (``frame``: its
    :func:`release_frame` or :func:`release_columns`, when already made)."""
    import pyarrow.csv as pacsv

    # pyarrow writes a million rows in well under a second; pandas.to_csv takes ~7 s.
    def write(table: Any) -> bytes:
        buf = io.BytesIO()
        pacsv.write_csv(table, buf, pacsv.WriteOptions(quoting_style="none"))
        return buf.getvalue()

    return csv_bytes(_arrow(release_columns(release) if frame is None else frame), write)


def release_geojson(release: PartitionRelease, frame: pd.DataFrame | dict[str, np.ndarray] | None = None,
                    suppress: ReliabilityRule | None = None) -> bytes:
    """A FeatureCollection of lon/lat rectangles with the CSV's properties (RFC 7946).

    Built with pyarrow's vectorised string kernels: a Python dict per feature
    takes ~40 s for a million cells, this takes a few seconds.  With a reliability rule
    (:mod:`dpcore.core.reliability`) the features carry its yes/no property and, under
    ``suppress``, the withheld cells' value and interval are null: written in this one pass, as
    :func:`~dpcore.core.reliability.apply_to_files` would edit the file afterwards (post-processing).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    df = release_columns(release) if frame is None else frame
    txt = {c: pc.cast(pa.array(np.asarray(df[c])), pa.string()) for c in CSV_COLUMNS}
    hit = None
    if suppress is not None:
        hit = pa.array(assess(suppress, np.asarray(df["noisy_count"], dtype=float),
                              np.asarray(df["noise_sd"], dtype=float)).hit)
        if suppress.mode == "suppress":
            for c in ("noisy_count", "ci95_low", "ci95_high"):
                txt[c] = pc.if_else(hit, pa.scalar("null", pa.string()), txt[c])
    w, s, e, n = (txt[c] for c in ("west", "south", "east", "north"))

    def pt(x: pa.Array, y: pa.Array) -> list[Any]:
        return ["[", x, ",", y, "]"]

    pieces: list[Any] = ['{"type":"Feature","id":', txt["id"],
                         ',"geometry":{"type":"Polygon","coordinates":[[',
                         # counter-clockwise exterior ring (RFC 7946 §3.1.6)
                         *pt(w, s), ",", *pt(e, s), ",", *pt(e, n), ",", *pt(w, n), ",", *pt(w, s),
                         ']]},"properties":{']
    for i, c in enumerate(CSV_COLUMNS):
        pieces += [("," if i else "") + f'"{c}":', txt[c]]
    if hit is not None:
        pieces += [f',"{suppress.column}":', pc.if_else(hit, pa.scalar("true"), pa.scalar("false"))]  # type: ignore[union-attr]
    pieces.append("}}")
    feats = pc.binary_join_element_wise(*pieces, "")
    head = ('{"type":"FeatureCollection","name":"dp_release_' + release.release_id
            + '","features":[\n')
    body = ",\n".join(feats.to_pylist())
    return (head + body + "\n]}\n").encode("utf-8")


WORKLOAD_COLUMNS = ["query", "r0", "r1", "c0", "c1", "west", "south", "east", "north", "cells",
                    "answer", "standard_error", "ci95_low", "ci95_high"]


#: the clamped file's name: post-processing offered on request, not one of the release's stored files
CLAMPED_FILE = "release_clamped.csv"
CLAMPED_COLUMNS = ["id", "level", "west", "south", "east", "north", "cells", "count_clamped", "noisy_count",
                   "bias_at_most", "noise_sd"]


def negative_counts(release: PartitionRelease) -> dict[str, Any]:
    """How many released areas (the leaves, which tile the grid) have a negative noisy count, the smallest
    count, and the largest upward bias a clamp at 0 can give one of them (half its noise SD, see
    :func:`clamped_frame`); all from the release (public), nothing from the data.

    >>> from dpcore.data.domain import Bounds, Grid
    >>> g = Grid(Bounds(0, 0, 1, 1), 1, 2)
    >>> r = PartitionRelease("x", "X", {}, g, pure(1.0), (), np.array([[0, 1, 0, 1], [0, 1, 1, 2]]),
    ...                      np.zeros(2, dtype=np.int64), np.ones(2, dtype=bool), np.array([-3.0, 5.0]),
    ...                      np.array([1.4, 1.4]), np.array([3.0, 3.0]), 1, None)
    >>> negative_counts(r)
    {'n_negative': 1, 'n_areas': 2, 'min': -3.0, 'bias_at_most': 0.7}
    """
    leaf = np.asarray(release.leaf, dtype=bool)
    noisy = np.asarray(release.noisy, dtype=np.float64)[leaf]
    sd = np.asarray(release.sd, dtype=np.float64)[leaf]
    return {"n_negative": int(np.count_nonzero(noisy < 0)), "n_areas": int(noisy.size),
            "min": float(noisy.min()) if noisy.size else 0.0,
            "bias_at_most": float(sd.max() / 2) if sd.size else 0.0}


def clamped_frame(release: PartitionRelease) -> pd.DataFrame:
    """The released areas (the leaves) with their noisy counts clamped at 0: post-processing, no budget.

    ``count_clamped = max(noisy_count, 0)``.  A clamp is biased upward: for a true count ``c`` and noise
    ``X`` (symmetric, mean 0, SD σ) the bias is ``E[max(c + X, 0)] − c = E[max(−c − X, 0)] ≤ E[X⁺] =
    E|X|/2 ≤ σ/2`` (Jensen: ``E|X| ≤ σ``), largest for an empty area.  ``bias_at_most`` = σ/2 per area; a
    sum over areas can be off upward by up to the sum of theirs, which the unclamped counts avoid.
    """
    t = release.table(np.flatnonzero(np.asarray(release.leaf, dtype=bool)))
    for c in ("west", "south", "east", "north"):
        t[c] = np.round(t[c], COORD_DECIMALS)
    noisy = np.asarray(t["noisy_count"], dtype=np.float64)
    t["count_clamped"] = np.maximum(noisy, 0.0)
    t["bias_at_most"] = np.round(np.asarray(t["noise_sd"], dtype=np.float64) / 2, 4)
    t["noise_sd"] = np.round(t["noise_sd"], 4)
    if np.all(np.mod(noisy, 1) == 0):
        for c in ("noisy_count", "count_clamped"):
            t[c] = np.round(np.asarray(t[c], dtype=np.float64)).astype(np.int64)
    return pd.DataFrame({c: t[c] for c in CLAMPED_COLUMNS})


def clamped_csv(release: PartitionRelease) -> bytes:
    """:data:`CLAMPED_FILE`: :func:`clamped_frame` as CSV (through the one CSV writer)."""
    return release_csv(release, clamped_frame(release))


def has_workload_answers(release: PartitionRelease) -> bool:
    """Whether the release carries workload answers (the matrix mechanism's)."""
    return "workload_answers" in getattr(release, "details", {})


def workload_answers_frame(release: PartitionRelease) -> pd.DataFrame:
    """``workload_answers.csv``: each workload query (a rectangle of cells) with its released
    answer and analytic standard error.  Answers are DP outputs (post-processing of the release).

    An uploaded workload adds, after ``query``, each rectangle's ``name`` and ``group`` and the
    bounds the curator asked for (``lon_min, lat_min, lon_max, lat_max``, public); ``west ..
    north`` stay the bounds of the cells actually answered (those whose centres lie inside)."""
    wa = release.details["workload_answers"]
    r = np.asarray(wa["rects"], dtype=np.int64)
    box = release.grid.rect_lonlat(r)
    ans = np.asarray(wa["answer"], dtype=np.float64)
    se = np.asarray(wa["standard_error"], dtype=np.float64)
    half = interval_half_width("normal", se)  # an answer sums many noisy cells
    df = pd.DataFrame({
        "query": np.arange(len(r), dtype=np.int64),
        "r0": r[:, 0], "r1": r[:, 1], "c0": r[:, 2], "c1": r[:, 3],
        "west": box[:, 0], "south": box[:, 1], "east": box[:, 2], "north": box[:, 3],
        "cells": (r[:, 1] - r[:, 0]) * (r[:, 3] - r[:, 2]),
        "answer": ans, "standard_error": se, "ci95_low": ans - half, "ci95_high": ans + half,
    })[WORKLOAD_COLUMNS]
    if "name" in wa:
        asked = np.asarray(wa["asked"], dtype=np.float64).reshape(-1, 4)
        named = {"name": [str(v) for v in wa["name"]], "group": [str(v) for v in wa["group"]],
                 "lon_min": asked[:, 0], "lat_min": asked[:, 1], "lon_max": asked[:, 2], "lat_max": asked[:, 3]}
        for i, (c, v) in enumerate(named.items()):
            df.insert(1 + i, c, v)
    for c in ("west", "south", "east", "north", "lon_min", "lat_min", "lon_max", "lat_max"):
        if c in df:
            df[c] = df[c].round(COORD_DECIMALS)
    for c in ("answer", "standard_error", "ci95_low", "ci95_high"):
        df[c] = df[c].round(4)
    return df


def workload_answers_csv(release: PartitionRelease) -> bytes:
    """``workload_answers.csv`` (see :func:`workload_answers_frame`)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    def write(df: pd.DataFrame) -> bytes:
        table = pa.Table.from_pandas(df, preserve_index=False)
        buf = io.BytesIO()
        # names are the curator's free text: quote text columns so a comma in a name stays one field
        quoting = "needed" if "name" in table.column_names else "none"
        pacsv.write_csv(table, buf, pacsv.WriteOptions(quoting_style=quoting))
        return buf.getvalue()

    # names and groups starting like a formula are escaped (dpcore.data.csv_safe)
    return csv_bytes(workload_answers_frame(release), write)


def _workload_summary(release: PartitionRelease) -> dict[str, Any] | None:
    info = getattr(release, "details", {}).get("matrix")
    if info is None:
        return None
    keys = ("workload", "workload_name", "n_queries", "strategy", "strategy_queries", "pure_dp_fallback",
            "noise", "noise_scale", "effective_sensitivity", "expected_rmse_per_query", "rmse_lower_bound",
            "ratio_to_lower_bound", "worst_se", "simultaneous_95", "grouped_by", "groups", "comparisons",
            "cell_rule", "guarantee", "notes")
    out = {k: info[k] for k in keys if k in info}
    out["answers_file"] = "workload_answers.csv" if has_workload_answers(release) else None
    out["standard_errors"] = ("analytic: sqrt(Var(z) · w X⁺ wᵀ) for each query w, from the strategy and "
                              "the noise only (no data)")
    return jsonable(out)


def release_body(release: PartitionRelease) -> dict[str, Any]:
    """What only a points record has: the budget split over levels, the public domain and grid,
    the levels, the released values, the outputs and the matrix mechanism's workload."""
    g = release.grid
    users = data_users_section(release)
    body: dict[str, Any] = {
        "budget": {
            "split": [
                {"level": lv.level, "name": lv.name, **lv.cost.to_dict()} for lv in release.levels
            ],
        },
        "domain": {
            "bounds": g.bounds.to_dict(),
            "grid": {"rows": g.rows, "cols": g.cols},
            "cell_size_km": {
                "east_west": g.bounds.width_km / g.cols,
                "north_south": g.bounds.height_km / g.rows,
            },
            "crs": "EPSG:4326",
            "source": "set by the curator (public), not derived from the data",
        },
        "levels": [lv.to_dict(g.n_cells, DEFAULT_QUERY_SIZES) for lv in release.levels],
        "released_values": jsonable(release.public),
        "outputs": {
            "n_rectangles": release.n_rects,
            "n_leaves": int(release.leaf.sum()),
            "files": ["release.csv", "release.geojson", "release.json"]
            + (["workload_answers.csv"] if has_workload_answers(release) else []) + users["files"],
            "count_columns": "noisy_count is the released count; ci95_low/high = noisy_count ± the "
            "95% half-width of the noise (public, from the mechanism's parameters)",
        },
    }
    body["data_users"] = users
    summary = _workload_summary(release)
    if summary is not None:
        body["workload"] = summary
    return body


def release_record(release: PartitionRelease, ledger: Ledger | None = None, *,
                   plan: Plan | None = None, tables: bool = True) -> dict[str, Any]:
    """The machine-readable record of how the release was made (no true values): the one
    envelope (:func:`dpcore.core.record.build_record`) around :func:`release_body`; ``plan`` is
    the core plan the release was made from (its rows go into the record).  ``tables`` (the
    option of :func:`release_files`) changes nothing in the record: it lists every file."""
    return build_record(
        schema="dpcore-release/1", kind="points", release_id=release.release_id, created=release.created,
        mechanism={"name": release.mechanism, "title": release.mechanism_title,
                   "reference": release.mechanism_reference, "params": jsonable(release.params)},
        cost=release.cost,
        unit_of_privacy=("one record (point)" if release.user_cap is None
                         else f"one person, contributing at most {release.user_cap} records"),
        privacy={
            "neighbouring_relation": "add or remove one unit of privacy",
            "sensitivity_l1": release.sensitivity,
            "sensitivity_l2": release.sensitivity,
            "composition": "sequential over levels: the level budgets add up to the total",
            "randomness": "exact discrete samplers driven by the operating system's CSPRNG (os.urandom)",
            "noise": "discrete Laplace" if release.cost.definition == "pure" else "discrete Gaussian",
        },
        body=release_body(release),
        notes=[
            "All counts are noisy. Negative counts are kept so that sums over areas stay unbiased.",
            "Expected errors are analytic: they come from the mechanism and its parameters, not from the data.",
        ],
        ledger=ledger, plan=plan.rows_dict() if plan is not None else None,
    )


def release_json(release: PartitionRelease, ledger: Ledger | None = None, *, plan: Plan | None = None) -> bytes:
    return orjson.dumps(
        release_record(release, ledger, plan=plan), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
    )


#: The order of a points release's files (the CLI writes them in this order; the app stores them so).
FILE_ORDER = ("release.csv", "release.geojson", "release.json", "workload_answers.csv", DATA_USER_FILES[0],
              MEASUREMENTS_PARQUET, *DATA_USER_FILES[1:], REPLICATE_FILE, *REVIEW_FILES)


def release_tables(release: PartitionRelease, *, geojson: bool = True,
                   suppress: ReliabilityRule | None = None, parquet_above: int | None = None) -> dict[str, bytes]:
    """The files of a points release that do not depend on the ledger, name -> bytes:
    ``release.csv``, ``release.geojson`` (unless ``geojson`` is False) and ``workload_answers.csv``
    for the matrix mechanism.  The app makes them after the page of a large release is drawn; its
    ``release.json`` was made at the charge (:func:`release_files` with ``tables=False``).  The
    measurements are ``measurements.parquet`` above ``parquet_above`` rows
    (:func:`dpcore.points.data_users.data_user_files`)."""
    frame = release_columns(release)
    files = {"release.csv": release_csv(release, frame)}
    if geojson:
        files["release.geojson"] = release_geojson(release, frame, suppress)
    if has_workload_answers(release):
        files["workload_answers.csv"] = workload_answers_csv(release)
    files.update(data_user_files(release, parquet_above))  # issue 25: measurements, design, estimates
    return files


def in_file_order(files: dict[str, bytes]) -> dict[str, bytes]:
    """``files`` in :data:`FILE_ORDER`.

    >>> list(in_file_order({"release.json": b"{}", "release.csv": b""}))
    ['release.csv', 'release.json']
    """
    return {name: files[name] for name in FILE_ORDER if name in files}


def release_files(release: PartitionRelease, ledger: Ledger | None = None, *,
                  plan: Plan | None = None, tables: bool = True,
                  suppress: ReliabilityRule | None = None, parquet_above: int | None = None) -> dict[str, bytes]:
    """The release's files, name -> bytes: ``release.csv``, ``release.geojson``, ``release.json``
    (the record, with ``ledger`` as of the charge and the rows of the core ``plan``) and
    ``workload_answers.csv`` for the matrix mechanism; with ``tables=False``, ``release.json`` only.
    Made once, when the release is made (:meth:`dpcore.core.mechanism.KindRelease.files`); write
    them with :func:`dpcore.core.record.write_files`, the app stores these bytes.  ``suppress``: a
    reliability rule written into ``release.geojson`` in its one pass (``KindRelease.files`` then
    applies it to ``release.csv`` and ``release.json``)."""
    files = release_tables(release, suppress=suppress, parquet_above=parquet_above) if tables else {}
    files["release.json"] = release_json(release, ledger, plan=plan)
    return in_file_order(match_written(files))
