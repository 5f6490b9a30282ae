"""Exports of a hierarchy release: CSV, GeoJSON per level, and the JSON release record.

Everything written here is public: the area list (public by construction, see
:mod:`dpcore.data.hierarchy`), the released values, the data-free plan and the ledger's spends.
No true count, no raw row and no input file name is ever written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import geopandas
import numpy as np
import orjson
import pandas as pd

from dpcore.areas.data_users import data_users_section, hierarchy_data_user_files
from dpcore.areas.tree_plans import HierarchyRelease
from dpcore.areas.unit import unit_of_privacy_words
from dpcore.core.mechanism import Plan
from dpcore.core.record import INTERVAL_COLUMNS, build_record, validate_record
from dpcore.data.area_boundaries import BoundaryJoin
from dpcore.data.csv_safe import ESTIMATE_DECIMALS, csv_bytes, pandas_csv
from dpcore.data.hierarchy import hierarchy_info
from dpcore.estimate.data_user_format import name_written
from dpcore.estimate.data_user_format import no_interval_note as empty_note
from dpcore.privacy.calibration import interval_half_width
from dpcore.privacy.ledger import Ledger

__all__ = [
    "INTERVALS_NOTE",
    "hierarchy_csv",
    "hierarchy_frame",
    "hierarchy_json",
    "hierarchy_body",
    "hierarchy_file_names",
    "hierarchy_files",
    "hierarchy_record",
    "intervals_note",
    "level_geojson",
    "no_interval_line",
    "no_interval_note",
    "validate_hierarchy_record",
]

SCHEMA = "dpcore-hierarchy-release/1"

#: The record's ``outputs.intervals`` where the intervals are published (:func:`no_interval_note` is None).
INTERVALS_NOTE = ("noise_sd = the analytic SD of the area's error; ci95_low/high (CSV and GeoJSON) = "
                  "value ± 1.96 × noise_sd (a normal approximation, computed from public parameters "
                  "only; clipped at 0 for non-negative mechanisms)")


def intervals_note(rel: HierarchyRelease) -> str:
    """The record's ``outputs.intervals`` where the intervals are published: :data:`INTERVALS_NOTE`, or,
    where some levels' values are one discrete noise draw (:meth:`HierarchyRelease.single_draw
    <dpcore.areas.tree_plans.HierarchyRelease.single_draw>`), one sentence naming their exact half-widths."""
    p = rel.plan
    exact = [d for d in range(len(p.levels)) if rel.single_draw(d)]
    if not exact:
        return INTERVALS_NOTE
    ks = "; ".join(f"{p.levels[d].level}: k = {interval_half_width(p.levels[d].noise, p.scales[d]):.0f}"
                   for d in exact)
    summed = {d: hw for d in range(len(p.levels)) if d not in exact
              and (hw := rel.mechanism.sum_half_widths(rel.hierarchy, p, d)) is not None}
    sums = ""
    if summed:
        kms = "; ".join(f"{p.levels[d].level}: k = {_k_range(hw)}" for d, hw in summed.items())
        sums = (f", value ± k at the levels whose values are sums of m such draws ({kms}), k the exact 95 % quantile "
                "of that sum, per area (the smallest whole number with P(|S| ≤ k) ≥ 0.95, S the sum of the area's m "
                "finest areas' noise draws, m its number of finest areas)")
    others = (", and value ± 1.96 × noise_sd (a normal approximation) at the other levels (sums or least-squares "
              "combinations of noisy counts, or an exact public total)"
              if len(exact) + len(summed) < len(p.levels) else "")
    return ("noise_sd = the analytic SD of the area's error; ci95_low/high (CSV and GeoJSON) = value ± k at the "
            f"levels whose values are one draw of discrete noise ({ks}), k the exact 95 % quantile of that noise "
            f"(the smallest whole number with P(|noise| ≤ k) ≥ 0.95){sums}{others}; computed from public "
            "parameters only, clipped at 0 for non-negative mechanisms")


def _k_range(hw: np.ndarray) -> str:
    """A level's exact half-widths in words: one number, or their range over the level's areas."""
    lo, hi = float(np.min(hw)), float(np.max(hw))
    return f"{lo:.0f}" if lo == hi else f"{lo:.0f} to {hi:.0f} by area"


def _projection_reason(rel: HierarchyRelease, *, add_up: bool) -> str:
    """Why no 95 % interval is valid for this release's values, the one source of the pages' line
    (:func:`no_interval_line`) and the record's note (:func:`no_interval_note`): its mechanism's
    projection onto non-negative whole numbers (``add_up``: that add up, as the note says) depends on
    the data."""
    return (f"{rel.mechanism.title} adjusts the noisy counts to non-negative whole numbers"
            f"{' that add up,' if add_up else ''} in a way that depends on the data")


def no_interval_line(rel: HierarchyRelease) -> str | None:
    """One sentence for the pages: why no 95 % interval is shown for this release's values (None: it is)."""
    if rel.has_intervals:
        return None
    return (f"No 95 % interval is shown: {_projection_reason(rel, add_up=False)}, so the released count ± 1.96 × SD "
            "would cover the true count less than 95 % of the time.")


def no_interval_note(rel: HierarchyRelease) -> str | None:
    """Why ``ci95_low``/``ci95_high`` of release.csv (and the level GeoJSONs) are empty for this release,
    and where a data user gets an interval instead (the record's ``outputs.intervals``); None where they
    are filled (:attr:`~dpcore.areas.tree_plans.HierarchyRelease.has_intervals`).

    The exact tree DP and the TopDown projections (L2, L∞) make the released values non-negative whole
    numbers that add up, a projection that depends on the data: a large count among empty siblings is
    pulled down by the positive noise the empty ones keep (by about one SD), and the exact DP's total
    moves with the clipped areas (up by about one SD where most areas are empty).  So
    ``value ± 1.96 · noise_sd`` covers less than 95 % (benchmarks/interval_release_coverage.py: a zone of
    1,000 people among 31 empty zones covered in 82-90 % of 600 releases under TopDown L2, the exact DP's
    total in 83-85 %).
    """
    if rel.has_intervals:
        return None
    why = (f"{_projection_reason(rel, add_up=True)}: the released values are biased (most of all a large count among empty "
           "areas, pulled down by the positive noise the empty ones keep), and noisy_count ± 1.96 × noise_sd "
           "would cover the true count less often than 95 % of the time (in a simulation, as low as 82 % for a "
           "large count among empty areas, and 83 % for the exact tree DP's total). No interval is given for "
           "them; noise_sd is still the analytic SD of an area's error (public parameters only).")
    return empty_note(why, (data_users_section(rel) or {}).get("files") or [],
                      estimates="the unbiased least-squares estimate of every area and its variance (estimate ± "
                                "1.96 × its SD is a valid 95 % interval)",
                      command=" --coverage 0.95", answers="any area or union of finest areas", items="areas")


def _values_column(v: np.ndarray) -> np.ndarray:
    return v if np.issubdtype(v.dtype, np.integer) else np.round(v.astype(float), 6)


#: Rows of ``release.csv`` made and written at a time (:func:`hierarchy_csv`): the rows of 8 M census
#: blocks are never one frame.
CSV_STEP = 1_000_000


def hierarchy_frame(rel: HierarchyRelease) -> pd.DataFrame:
    """One row per area and level (root included): ``level, code, parent, noisy_count``.

    Group-size releases have one row per area, level and size: ``level, code, parent, size,
    noisy_count``.
    """
    return pd.concat(list(_frame_parts(rel, None)), ignore_index=True)


def _frame_parts(rel: HierarchyRelease, step: int | None) -> Any:
    """The rows of :func:`hierarchy_frame`, level by level and at most ``step`` rows a frame (None:
    one frame a level), with the column types the whole frame has (a level of whole numbers among
    rounded ones is written as the concatenated frame writes it)."""
    h = rel.hierarchy
    count_type = np.result_type(*(_values_column(rel.values[d][:1]).dtype for d in range(h.depth + 1)))
    for d in range(h.depth + 1):
        v = rel.values[d]
        lab = h.labels(d)
        par = h.parent_labels(d)
        lo, hi = _published_interval(rel, d)
        sd = np.broadcast_to(np.asarray(rel.sd(d), dtype=np.float64), (len(lab),))
        k = 1 if v.ndim == 1 else v.shape[1]
        areas = len(lab) if step is None else max(1, step // k)
        for i in range(0, len(lab), areas):
            a = slice(i, i + areas)
            count = _values_column(v[a].ravel()).astype(count_type, copy=False)
            if v.ndim == 1:
                yield pd.DataFrame({"level": h.level_names[d], "code": lab[a], "parent": par[a],
                                    "noisy_count": count, **_intervals(sd[a], lo[a], hi[a])})
            else:
                yield pd.DataFrame({
                    "level": h.level_names[d], "code": np.repeat(lab[a], k), "parent": np.repeat(par[a], k),
                    "size": np.tile(np.array(rel.size_labels, dtype=object), len(lab[a])),
                    "noisy_count": count, **_intervals(np.repeat(sd[a], k), lo[a].ravel(), hi[a].ravel()),
                })


def _published_interval(rel: HierarchyRelease, d: int) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`~dpcore.areas.tree_plans.HierarchyRelease.interval` where it is valid, else NaN (written as
    empty cells, null in GeoJSON: the columns stay, :func:`no_interval_note` says why)."""
    if rel.has_intervals:
        return rel.interval(d)
    empty = np.full(rel.values[d].shape, np.nan)
    return empty, empty


def _intervals(sd: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> dict[str, np.ndarray]:
    """The interval columns (:data:`dpcore.core.record.INTERVAL_COLUMNS`): the analytic SD of an
    area's error and its published 95 % interval (:meth:`HierarchyRelease.interval`; public parameters
    only), to the decimals of :data:`dpcore.data.csv_safe.ESTIMATE_DECIMALS`."""
    return dict(zip(INTERVAL_COLUMNS, (np.round(np.asarray(sd, dtype=np.float64), ESTIMATE_DECIMALS["noise_sd"]),
                                       np.round(lo, ESTIMATE_DECIMALS["ci95_low"]),
                                       np.round(hi, ESTIMATE_DECIMALS["ci95_high"])), strict=True))


def hierarchy_csv(rel: HierarchyRelease, step: int | None = None) -> bytes:
    """``release.csv``: :func:`hierarchy_frame` through :func:`~dpcore.data.csv_safe.csv_bytes`, made
    and written ``step`` rows at a time (default :data:`CSV_STEP`) (the same bytes as the whole frame written at once: each
    cell is escaped and formatted on its own, and every part has the whole frame's column types)."""
    import io

    buf = io.BytesIO()
    for j, part in enumerate(_frame_parts(rel, step or CSV_STEP)):
        data = csv_bytes(part, pandas_csv)
        buf.write(data if j == 0 else memoryview(data)[data.index(b"\n") + 1:])  # the header once
        del data
    return buf.getvalue()


def level_geojson(rel: HierarchyRelease, join: BoundaryJoin) -> bytes:
    """GeoJSON of one level: matched boundaries with the released values as properties."""
    h = rel.hierarchy
    d = join.depth
    idx = join.frame["node"].to_numpy()
    v = rel.values[d][idx]
    lo, hi = _published_interval(rel, d)
    props = {
        "level": h.level_names[d],
        "code": h.labels(d)[idx],
        "name": h.display_names(d)[idx],
        "parent": h.parent_labels(d)[idx],
    }
    if v.ndim == 1:
        props["noisy_count"] = _values_column(v)
        props["ci95_low"] = np.round(lo[idx], ESTIMATE_DECIMALS["ci95_low"])
        props["ci95_high"] = np.round(hi[idx], ESTIMATE_DECIMALS["ci95_high"])
    else:
        props["noisy_total"] = v.sum(axis=1)
        for j, lab in enumerate(rel.size_labels):
            props[f"size_{lab}"] = v[:, j]
    out = geopandas.GeoDataFrame(pd.DataFrame(props), geometry=join.frame.geometry.to_numpy(),
                                 crs=join.frame.crs)
    if out.crs is not None and not out.crs.equals("EPSG:4326"):
        out = out.to_crs("EPSG:4326")
    return out.to_json(drop_id=True).encode("utf-8")


def hierarchy_body(rel: HierarchyRelease, files: Sequence[str]) -> dict[str, Any]:
    """What only a hierarchy record has: the statistic, the budget split, the public area list,
    the expected errors per level and the outputs (``files``: the release's file names)."""
    p = rel.plan
    users = data_users_section(rel)
    return {
        **({"data_users": users} if users is not None else {}),
        "statistic": p.statistic,
        "sizes": list(rel.size_labels),
        "budget": {
            "split": p.split,
            "split_weights": list(p.split_weights),
            "levels": [{"level": lv.level, "measured": lv.measured, "share": lv.share, "noise": lv.noise,
                        "scale": lv.scale, "l1_sensitivity": lv.l1_sensitivity,
                        "l2_sensitivity": lv.l2_sensitivity} for lv in p.levels],
        },
        "hierarchy": hierarchy_info(rel.hierarchy),
        "expected_error": [{
            "level": lv.level, "cells": lv.cells, "noise_sd": lv.noise_sd, "sd": lv.sd,
            "mean_abs_error": lv.mean_abs, "typical_max_abs_error": lv.max_abs, "basis": lv.basis,
        } for lv in p.levels],
        "outputs": {
            "files": list(files),
            "csv_columns": ["level", "code", "parent", *(["size"] if p.statistic == "group_sizes" else []),
                            "noisy_count", *INTERVAL_COLUMNS],
            "intervals": no_interval_note(rel) or intervals_note(rel),
        },
    }


def _hierarchy_privacy(rel: HierarchyRelease) -> tuple[str, dict[str, Any]]:
    """The unit of privacy of a hierarchy release and the kind's other privacy keys."""
    p = rel.plan
    unit = ("one person (add or remove)" if p.neighbour == "add_remove"
            else "one person (replace one person by another; the total is public)")
    if p.statistic == "group_sizes":
        unit = ("one person's membership in a group (groups are neither created nor removed; "
                "the number of groups N is public)")
    invariants: dict[str, Any] = {}
    if rel.public_total is not None:
        invariants["total"] = rel.public_total
    if "public_groups_N" in rel.details:
        invariants["groups_N"] = rel.details["public_groups_N"]
    return unit, {
        "neighbouring_relation": p.neighbour,
        "noise": "discrete Laplace" if p.cost.definition == "pure" else "discrete Gaussian",
        "randomness": "exact discrete samplers driven by the operating system's CSPRNG (os.urandom)",
        "composition": ("one answer of the matrix mechanism's strategy with the whole budget; every level "
                        "and every area-code set is post-processing of it" if p.mechanism == "matrix" else
                        "sequential over the measured levels (parallel within a level: areas are disjoint)"),
        "invariants": invariants,
        "invariants_note": "Invariants are published exactly and are outside the DP guarantee.",
    }


def hierarchy_file_names(rel: HierarchyRelease, joins: Mapping[str, Any] | None = None) -> list[str]:
    """The names of the files :func:`hierarchy_files` writes for ``rel`` and ``joins``."""
    return ["release.csv", *(["area_queries.csv"] if rel.details.get("area_sets") else []),
            *[f"{safe_file_stem(level)}.geojson" for level in (joins or {})],
            *((data_users_section(rel) or {}).get("files", ())), "release.json"]


def hierarchy_record(rel: HierarchyRelease, ledger: Ledger | None = None, files: Sequence[str] | None = None, *,
                     plan: Plan | None = None, joins: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The machine-readable record of how the release was made (no true values): the one
    envelope (:func:`dpcore.core.record.build_record`) around :func:`hierarchy_body`.  ``files``
    are the release's file names (default: those of :func:`hierarchy_files` with ``joins``);
    ``plan`` is the core plan the release was made from (its rows go into the record)."""
    p = rel.plan
    info = rel.mechanism
    unit, privacy = _hierarchy_privacy(rel)
    unit = unit_of_privacy_words(plan.unit if plan is not None else None, unit)
    notes = [
        "All values are outputs of the mechanism; no true count is published (except the invariants).",
        "Expected errors are analytic: they come from the mechanism, the budget and the public area "
        "list, not from the data.",
    ]
    if p.statistic == "group_sizes":
        notes.append(
            "Group sizes: the number of groups N is public, so neighbouring datasets keep every group. "
            "A person who is the only member of their group cannot be removed without removing the group; "
            "such people are protected only against changes of group size, not against their absence "
            "(Fioretto, Van Hentenryck & Zhu, AIJ 2021)."
        )
    if rel.hierarchy.source == "data (not public)":
        notes.append(
            "WARNING: the area list was taken from the data; areas without people are missing and that "
            "absence is not protected by differential privacy."
        )
    return build_record(
        schema=SCHEMA, kind="hierarchy", release_id=rel.release_id, created=rel.created,
        mechanism={"name": info.name, "title": info.title, "reference": info.reference,
                   "consistent": info.consistent, "integral": info.integral, "nonnegative": info.nonnegative,
                   "details": {k: v for k, v in rel.details.items() if k != "public_groups_N"}},
        cost=p.cost, unit_of_privacy=unit, privacy=privacy,
        body=hierarchy_body(rel, files if files is not None else hierarchy_file_names(rel, joins)),
        notes=notes, ledger=ledger, plan=plan.rows_dict() if plan is not None else None,
    )


def hierarchy_json(rel: HierarchyRelease, ledger: Ledger | None = None, files: Sequence[str] | None = None, *,
                   plan: Plan | None = None) -> bytes:
    return orjson.dumps(hierarchy_record(rel, ledger, files, plan=plan),
                        option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)


def validate_hierarchy_record(record: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` if the record breaks the envelope or the hierarchy body schema."""
    validate_record(record)


def safe_file_stem(level: str) -> str:
    """A level name usable as a file name (no path separators or odd characters)."""
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", str(level)).strip("_")
    return stem or "level"


def hierarchy_files(rel: HierarchyRelease, ledger: Ledger | None = None,
                    joins: dict[str, BoundaryJoin] | None = None, *, plan: Plan | None = None,
                    parquet_above: int | None = None) -> dict[str, bytes]:
    """The release's files, name -> bytes: ``release.csv``, ``area_queries.csv`` (area sets),
    ``LEVEL.geojson`` per joined level, the data users' ``measurements.csv``, ``design.json`` and
    ``estimates.csv`` (:mod:`dpcore.areas.data_users`) and ``release.json`` (the record, ``ledger`` as of the
    charge, the rows of the core ``plan``).  Made once, when the release is made.  The measurements are
    ``measurements.parquet`` above ``parquet_above`` rows (default
    :data:`~dpcore.estimate.data_user_format.PARQUET_ROWS`), and the record names it."""
    files: dict[str, bytes] = {"release.csv": hierarchy_csv(rel)}
    if rel.details.get("area_sets"):
        from dpcore.areas.area_sets import area_sets_csv

        files["area_queries.csv"] = area_sets_csv(rel)
    for level, join in (joins or {}).items():
        files[f"{safe_file_stem(level)}.geojson"] = level_geojson(rel, join)
    files.update(hierarchy_data_user_files(rel, parquet_above))
    files["release.json"] = hierarchy_json(rel, ledger, hierarchy_file_names(rel, joins), plan=plan)
    return name_written(files)  # the record names measurements.parquet where a large release wrote it
