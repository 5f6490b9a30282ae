"""The data users' files of a points release (issue 25): ``measurements.csv``, ``design.json``
and ``estimates.csv``, in the format every kind shares (``notes/data-users-format.md``).

The *count phase* of a points release is a set of noisy rectangle counts, each the sum of the
released leaves it covers (the leaves tile the grid; they are the finest cells of
``release.csv``).  What is offered:

* least-squares trees (``quadtree``, ``kdtree``, ``ag``) keep each node's raw noisy count in
  :attr:`~dpcore.points.release.PartitionRelease.measured`; their released counts are the
  least-squares (GLS) estimates of :mod:`dpcore.estimate.tree_inference` (Hay, Rastogi, Miklau &
  Suciu, VLDB 2010, section 4), with the exact variances, so ``estimates.csv`` states them;
  ``ag_pool`` (and ``ag_pool_smooth``, the same counts) releases AG's measurements too but pools sparse cells after least squares: its
  ``estimates.csv`` gives AG's least-squares estimates (``details["least_squares"]``) beside the
  pooled released counts;
* every other mechanism whose leaves carry a count of their own (``identity``, ``ug``,
  ``uniform``, ``privtree``, ``htf``): the leaves' released counts are the measurements (one per
  leaf), the estimate of a leaf is its measurement and that of a coarser rectangle the sum of
  the leaves inside it, with the summed exact variance;
* ``privelet``, ``matrix`` and ``dawa`` measure wavelet coefficients, strategy rows or bucket
  groups that are not sums of released rectangles: no measurement is offered (the file has its
  header only and ``design.json`` says why); their released counts are linear unbiased estimates
  and ``estimates.csv`` gives them with their analytic variance.

For data-dependent partitions (PrivTree, AG, HTF, DAWA, UG, and the KD-tree's private medians)
the measurements are the count phase only and unbiased only conditional on the published
partition; the split statistics are never offered as measurements.  Nothing here reads data: every
value is a DP output or public.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import orjson
import pandas as pd
from numpy.typing import NDArray

from dpcore.data.csv_safe import csv_bytes
from dpcore.data.domain import paint_rects
from dpcore.estimate.data_user_format import (
    DATA_USER_FILES,
    DESIGN_SCHEMA,
    ESTIMATE_COLUMNS,
    MEASUREMENT_COLUMNS,
    MEASUREMENTS_PARQUET,
    PRECISION_SOURCE,
    REPLICATE_FILE,
    coordinate_precision,
    measurements_name,
    name_written,
    noise_of,
    parquet_bytes,
    precision_statement,
    replicates_info,
    section,
)
from dpcore.estimate.design_nodes import NodeCells, json_default
from dpcore.points.release import PartitionRelease

__all__ = ["DATA_USER_FILES", "CONDITIONAL", "data_user_files", "data_users_section", "leaves_within",
           "match_written", "measurement_frame", "estimate_frame", "design", "stating_precision"]

#: Mechanisms whose partition depends on the data: their count phase is offered conditional on it.
CONDITIONAL = frozenset({"privtree", "ag", "ag_pool", "ag_pool_smooth", "privtree_ag", "htf", "dawa", "dawa_free", "ug", "kdtree"})

#: Mechanisms whose measurements are not sums of released rectangles (none offered), and why.
NOT_OFFERED = {
    "privelet": "Privelet measures Haar wavelet coefficients (signed combinations of cells), not sums of "
                "released rectangles; the released counts are their unique linear reconstruction.",
    "matrix": "the matrix mechanism measures its strategy's rows, which are not released rectangles; the "
              "released counts are the least-squares reconstruction from them.",
    "dawa": "DAWA measures groups of its buckets, which are not released rectangles; the released "
            "counts are their least-squares estimates.",
    "dawa_free": "DAWA (free starts) measures groups of its buckets, which are not released rectangles (a "
                 "bucket is several rectangles); the released counts are their least-squares estimates.",
}


def _base(release: PartitionRelease) -> str:
    """The mechanism that drew the counts (``auto``'s choice for ``auto``)."""
    if release.mechanism == "auto":
        return str(release.public.get("auto", {}).get("chosen", "auto"))
    return release.mechanism


def _conditional(release: PartitionRelease) -> bool:
    # auto chooses its mechanism from a noisy count (no public count given) or from noisy features:
    # data-dependent too
    chose = release.public.get("auto", {}) if release.mechanism == "auto" else {}
    return _base(release) in CONDITIONAL or (release.mechanism == "auto"
                                             and ("noisy_point_count" in release.public or "features" in chose))


def _scale_variance(release: PartitionRelease, budgets: NDArray[np.float64]) -> tuple[NDArray, NDArray, str]:
    """Each budget's noise scale (t or σ), the noise's exact variance (one evaluation per distinct
    budget) and the family (:func:`~dpcore.estimate.data_user_format.noise_of`, the release's rule)."""
    values, inverse = np.unique(budgets, return_inverse=True)
    noise = [noise_of(release.cost.definition, b, release.sensitivity) for b in values.tolist()]
    family = noise[0][0] if noise else noise_of(release.cost.definition, 1.0, 1)[0]
    scale = np.array([float(s) for _, s, _ in noise], dtype=np.float64)
    var = np.array([v for _, _, v in noise], dtype=np.float64)
    return scale[inverse.ravel()], var[inverse.ravel()], family


#: Leaf × rectangle pairs up to which :func:`leaves_within` tests them directly (no labelled grid).
_PAIRS = 1 << 20


def _labels_at(r: NDArray[np.int64], lab: NDArray[np.int64], ys: NDArray[np.int64], xs: NDArray[np.int64],
               points: NDArray[np.int64]) -> NDArray[np.int64]:
    """The label of the rectangle of ``r`` (disjoint, ``(r0, r1, c0, c1)`` in cells) holding each point
    ``(row, col)``, 0 for none: a labelled grid whose rows and columns are the bands between the
    rectangles' own edges ``ys``/``xs`` (sorted, unique), not the grid's cells, so a coarse level costs
    its edges, not the grid (a 2-D difference array summed twice, then one look-up per point)."""
    i0, i1 = np.searchsorted(ys, r[:, 0]), np.searchsorted(ys, r[:, 1])
    j0, j1 = np.searchsorted(xs, r[:, 2]), np.searchsorted(xs, r[:, 3])
    # labels are whole numbers far below 2**53: exact through the float grid
    labels = paint_rects(np.stack([i0, i1, j0, j1], axis=1), lab, (ys.size, xs.size)).astype(np.int64)
    iy = np.searchsorted(ys, points[:, 0], side="right") - 1  # the band holding the point; -1: before all
    ix = np.searchsorted(xs, points[:, 1], side="right") - 1
    return np.where((iy >= 0) & (ix >= 0), labels[np.maximum(iy, 0), np.maximum(ix, 0)], 0)


def leaves_within(release: PartitionRelease) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Pairs ``(rect, leaf position)``: the leaves (their position among the leaves, in id order)
    each rectangle of the release is made of.  One labelled grid per level (rectangles of one level
    are disjoint) on the bands between that level's own edges (:func:`_labels_at`), so a level costs
    at most its edges squared, never more than the grid's cells; a level with fewer leaf × rectangle
    pairs than bands is tested pair by pair instead (vectorised).

    >>> from dpcore.data.domain import Bounds, Grid
    >>> from dpcore.privacy.budget import pure
    >>> g = Grid(Bounds(0, 0, 1, 1), 2, 2)
    >>> r = PartitionRelease("q", "q", {}, g, pure(1), (), np.array([[0, 2, 0, 2], [0, 1, 0, 2], [1, 2, 0, 2]]),
    ...                      np.array([0, 1, 1]), np.array([False, True, True]), np.zeros(3), np.ones(3),
    ...                      np.ones(3), 1, None)
    >>> [a.tolist() for a in leaves_within(r)]
    [[0, 0, 1, 2], [0, 1, 0, 1]]
    """
    leaf_idx = release.leaf_index()
    corner = release.rects[leaf_idx][:, [0, 2]]
    nodes, leaves = [], []
    for lv in np.unique(release.level).tolist():
        idx = np.flatnonzero(release.level == lv)
        r = release.rects[idx]
        lab = idx + 1
        ys, xs = np.unique(r[:, :2]), np.unique(r[:, 2:])  # this level's row and column edges
        if corner.shape[0] * idx.size <= min(_PAIRS, (ys.size + 1) * (xs.size + 1)):
            # few leaves and rectangles (a small release, such as one day of a series): test each
            # leaf corner against each rectangle, the same label sums as the grid below
            y, x = corner[:, :1], corner[:, 1:]
            inside = (r[:, 0] <= y) & (y < r[:, 1]) & (r[:, 2] <= x) & (x < r[:, 3])
            owner = inside.astype(np.int64) @ lab - 1
        else:
            owner = _labels_at(r, lab, ys, xs, corner) - 1
        hit = np.flatnonzero(owner >= 0)
        nodes.append(owner[hit])
        leaves.append(hit)
    node = np.concatenate(nodes)
    leaf = np.concatenate(leaves)
    order = np.lexsort((leaf, node))
    node, leaf = node[order], leaf[order]
    area = (release.rects[:, 1] - release.rects[:, 0]) * (release.rects[:, 3] - release.rects[:, 2])
    covered = np.bincount(node, weights=area[leaf_idx][leaf], minlength=release.n_rects)
    if not np.array_equal(covered, area):
        raise ValueError("The release's rectangles are not unions of its leaves; no design can be written.")
    return node, leaf


def _measured(release: PartitionRelease) -> NDArray[np.float64] | None:
    """Each rectangle's count-phase measurement (NaN: none), or None where none is offered."""
    if release.measured is not None:
        return np.asarray(release.measured, dtype=np.float64)
    if _base(release) in NOT_OFFERED:
        return None
    out = np.full(release.n_rects, np.nan)
    out[release.leaf] = release.noisy[release.leaf]
    return out


@dataclass
class _Parts:
    """What the three files share, each computed once per release (a series of 365 daily
    releases pays per release what is computed here)."""

    release: PartitionRelease

    @cached_property
    def value(self) -> NDArray[np.float64] | None:
        return _measured(self.release)

    @cached_property
    def within(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        return leaves_within(self.release)

    @cached_property
    def leaf_idx(self) -> NDArray[np.int64]:
        return self.release.leaf_index()

    @cached_property
    def budgets(self) -> NDArray[np.float64]:
        return self.release.budgets()

    def measurement_columns(self) -> dict[str, Any]:
        rel, value = self.release, self.value
        idx = np.array([], dtype=np.int64) if value is None else np.flatnonzero(np.isfinite(value))
        share = self.budgets[idx]
        scale, var, family = _scale_variance(rel, share)
        vals = value[idx] if value is not None else np.array([], dtype=np.float64)
        return {"measurement_id": np.arange(idx.size, dtype=np.int64),
                "level": rel.level[idx].astype(np.int64),
                "node": idx.astype(np.int64),  # the rectangle's release.csv id (the same text as a code)
                "value": np.round(vals).astype(np.int64),  # discrete noise on integer counts: integers
                "family": family, "scale": scale, "variance": var, "share": share, "phase": "count"}

    def estimate_columns(self) -> dict[str, Any]:
        rel = self.release
        if "least_squares" in rel.details:  # released values post-processed beyond least squares (ag_pool)
            est, sd = (np.asarray(a, dtype=np.float64) for a in rel.details["least_squares"])
            var = sd**2
        elif rel.measured is not None or _base(rel) in NOT_OFFERED:
            est = np.asarray(rel.noisy, dtype=np.float64)
            var = np.asarray(rel.sd, dtype=np.float64) ** 2
        else:
            _, leaf_var, _ = _scale_variance(rel, self.budgets[self.leaf_idx])
            node, leaf = self.within
            est = np.bincount(node, weights=rel.noisy[self.leaf_idx][leaf], minlength=rel.n_rects)
            var = np.bincount(node, weights=leaf_var[leaf], minlength=rel.n_rects)
        return _estimates(rel, est, var)

    def design(self) -> dict[str, Any]:
        rel, value = self.release, self.value
        node, leaf = self.within
        keep = np.zeros(node.size, dtype=bool) if value is None else np.isfinite(value)[node]
        nodes = _node_cells(node[keep], leaf[keep])
        conditional = _conditional(rel)
        statement = ("The noise draws of all measurements are independent (exact discrete samplers); each "
                     "measurement is the sum of the listed cells plus its own noise.")
        if conditional:
            statement += (" The partition was chosen from the data under its own budget: only the count phase is "
                          "offered, and it is unbiased conditional on the published partition.")
        out = _design_head(rel, self.leaf_idx, nodes, statement, conditional)
        if value is None:
            out["measurements_offered"] = False
            out["why"] = NOT_OFFERED[_base(rel)]
        return out


def _estimates(release: PartitionRelease, est: NDArray[np.float64], var: NDArray[np.float64]) -> dict[str, Any]:
    return {"level": release.level.astype(np.int64), "code": np.arange(release.n_rects, dtype=np.int64),
            "estimate": est, "variance": var, "sd": np.sqrt(var), "published": np.asarray(release.noisy)}


def _design_head(release: PartitionRelease, leaf_idx: NDArray[np.int64], nodes: Mapping[str, list[int]],
                 statement: str, conditional: bool) -> dict[str, Any]:
    """``design.json`` up to the measurements' statement (``cell_bounds`` last: an array, written by
    orjson's ``OPT_SERIALIZE_NUMPY`` as the same text as its list of lists, without making one)."""
    head = {"schema": DESIGN_SCHEMA, "kind": "points", "cells": _codes(leaf_idx), "nodes": nodes, "invariants": [],
            "independent": True, "statement": statement, "conditional_on_partition": conditional}
    if release.coordinate_precision is not None:  # the curator's public statement (never read from the data)
        head["coordinate_precision"] = float(release.coordinate_precision)
        head["coordinate_precision_source"] = PRECISION_SOURCE
    head["cell_bounds"] = np.round(release.grid.rect_lonlat(release.rects[leaf_idx]), 7)
    return head


def measurement_frame(release: PartitionRelease) -> pd.DataFrame:
    """``measurements.csv``: one row per count-phase noisy measurement, before post-processing."""
    return pd.DataFrame(_Parts(release).measurement_columns())[list(MEASUREMENT_COLUMNS)]


def estimate_frame(release: PartitionRelease) -> pd.DataFrame:
    """``estimates.csv``: the least-squares (GLS) estimate of every published rectangle with its
    variance, beside the released value.  Least-squares trees release these estimates already
    (exact variances); where the leaves are the measurements, a rectangle's estimate is the sum of
    its leaves' and its variance the sum of theirs (independent draws)."""
    return pd.DataFrame(_Parts(release).estimate_columns())[list(ESTIMATE_COLUMNS)]


def design(release: PartitionRelease) -> dict[str, Any]:
    """``design.json``: the finest cells (the leaves, by ``release.csv`` id), the leaves each
    measured rectangle sums, each leaf's lon/lat rectangle, and the statements on the draws.
    ``nodes`` is a :class:`~dpcore.estimate.design_nodes.NodeCells` mapping and ``cell_bounds`` an
    array: ``orjson.dumps(d, option=orjson.OPT_SERIALIZE_NUMPY, default=json_default)`` writes the file."""
    return _Parts(release).design()


def _codes(idx: NDArray[np.int64]) -> list[str]:
    """Release ids as the codes of ``release.csv`` (text)."""
    return np.asarray(idx, dtype=np.int64).astype(str).tolist()


def _node_cells(node: NDArray[np.int64], leaf: NDArray[np.int64]) -> NodeCells:
    """``{node code: [cell positions]}`` from pairs sorted by node, as :class:`NodeCells`."""
    starts = np.flatnonzero(np.r_[True, node[1:] != node[:-1]]) if node.size else node  # each node's run
    # arrays, not a list per node (57k nodes: 0.15 s of np.split, then the garbage collector's
    # passes over the lists); written as the same JSON by json_default
    return NodeCells(_codes(node[starts]), np.r_[starts, node.size], leaf)


def _table(columns: dict[str, Any], names: tuple[str, ...]) -> Any:
    """The columns (arrays; a text value is repeated) as a pyarrow Table (no pandas: a DataFrame and
    its conversion cost more than the writing for a small release)."""
    import pyarrow as pa

    n = next(len(v) for v in columns.values() if isinstance(v, np.ndarray))
    return pa.table({c: pa.repeat(columns[c], n) if isinstance(columns[c], str) else pa.array(columns[c])
                     for c in names})


def _csv(columns: dict[str, Any], names: tuple[str, ...]) -> bytes:
    """The columns (:func:`_table`) as CSV, straight through pyarrow."""
    import pyarrow.csv as pacsv

    table = _table(columns, names)

    # pyarrow: a million rows in under a second (shortest round-trip text of floats); the helper
    # finds no text column that starts like a formula (codes are digits, families fixed words)
    def write(t: Any) -> bytes:
        buf = io.BytesIO()
        pacsv.write_csv(t, buf, pacsv.WriteOptions(quoting_style="none"))
        return buf.getvalue()

    return csv_bytes(table, write)


def data_user_files(release: PartitionRelease, parquet_above: int | None = None) -> dict[str, bytes]:
    """The three data users' files of a points release, name -> bytes (:data:`DATA_USER_FILES`;
    ``measurements.parquet`` instead of ``measurements.csv`` above ``parquet_above`` measurements,
    default :data:`~dpcore.estimate.data_user_format.PARQUET_ROWS`, named in ``design.json``).

    They are made after the budget is charged, so they never refuse: a release whose rectangles are
    not unions of its leaves gets files that offer no measurement and say why, with the published
    values and their analytic variances as the estimates."""
    parts = _Parts(release)
    try:
        plan, meas = parts.design(), parts.measurement_columns()
        name = measurements_name(meas["measurement_id"].size, parquet_above)
        plan["measurements_file"] = name
        files = {
            name: (parquet_bytes(_table(meas, MEASUREMENT_COLUMNS)) if name == MEASUREMENTS_PARQUET
                   else _csv(meas, MEASUREMENT_COLUMNS)),
            # compact: a million cells stay ~100 bytes each
            "design.json": orjson.dumps(plan, option=orjson.OPT_SERIALIZE_NUMPY, default=json_default),
            "estimates.csv": _csv(parts.estimate_columns(), ESTIMATE_COLUMNS),
        }
    except ValueError as err:
        var = np.asarray(release.sd, dtype=np.float64) ** 2
        none = {**_design_head(release, parts.leaf_idx, {}, "No measurement is offered.", _conditional(release)),
                "measurements_offered": False, "why": str(err)}
        none["cell_bounds"] = none.pop("cell_bounds")  # after the reason, as before
        return {"measurements.csv": (",".join(MEASUREMENT_COLUMNS) + "\n").encode(),
                "design.json": orjson.dumps(none, option=orjson.OPT_SERIALIZE_NUMPY),
                "estimates.csv": _csv(_estimates(release, np.asarray(release.noisy, dtype=np.float64), var),
                                      ESTIMATE_COLUMNS)}
    if replicates_info(len(plan["cells"]))["file"] and meas["measurement_id"].size:  # small enough (item 5)
        # the reader (SciPy) only where the file is written
        from dpcore.estimate.data_users import replicate_files
        from dpcore.estimate.gls import measurements_from

        files.update(replicate_files(measurements_from(plan, pd.DataFrame(meas))))
    return files


def data_users_section(release: PartitionRelease) -> dict[str, Any]:
    """The record's ``data_users`` section: the files and which value the map and tables show."""
    offered = _measured(release) is not None
    return section(
        published="release.csv's noisy_count: the released counts (negative values kept, not rounded)",
        estimates="estimates.csv: least-squares (GLS) estimates with exact variances from measurements.csv",
        measurements_offered=offered, **({} if offered else {"why": NOT_OFFERED[_base(release)]}),
        conditional_on_partition=_conditional(release),
        **({} if release.coordinate_precision is None
           else {"coordinate_precision": precision_statement(release.coordinate_precision)}),
        n_cells=int(release.leaf.sum()) if offered else None)


def match_written(files: dict[str, bytes]) -> dict[str, bytes]:
    """``files`` with ``release.json``'s ``data_users`` section (and ``outputs.files``) as the data users'
    files were actually written.

    The record is made at the charge, before the data users' files (a large release's come after the
    page is drawn), and :func:`data_users_section` does not build the design to see whether it can be
    made (seconds on a million leaves).  When no design could be made (design.json then says why) or no
    measurement was written, there is no ``replicates.csv``: the record then does not list it and says
    why, and names the reason no measurement is offered.  Unchanged when they agree (the usual case).
    """
    files = name_written(files)  # measurements.parquet named where a large release wrote it
    if "release.json" not in files or "measurements.csv" not in files:
        return files
    rec = orjson.loads(files["release.json"])
    users = rec.get("data_users")
    if not users:
        return files
    changed = False
    if users.get("measurements_offered") and files["measurements.csv"].count(b"\n") <= 1:  # a header alone
        made = orjson.loads(files["design.json"])
        if made.get("measurements_offered") is False:
            users["measurements_offered"], users["why"], changed = False, made.get("why"), True
    rep = users.get("replicates") or {}
    if rep.get("file") and rep["file"] not in files:
        rep["file"] = None
        rep["why"] = "no measurement was written (see measurements_offered), so no replicate can be drawn"
        users["files"] = [f for f in users["files"] if f != REPLICATE_FILE]
        rec["outputs"]["files"] = [f for f in rec["outputs"]["files"] if f != REPLICATE_FILE]
        changed = True
    if changed:
        files = {**files, "release.json": orjson.dumps(rec, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)}
    return files


def stating_precision(out: Any, value: Any, where: str = "--coordinate-precision") -> Any:
    """A points release (a :class:`~dpcore.core.mechanism.KindRelease` around a
    :class:`~dpcore.points.release.PartitionRelease`, or the latter) with the coordinate precision the
    curator states (:func:`~dpcore.estimate.data_user_format.coordinate_precision`: a public fact of the
    data's format, checked and never read from the data), which its record and ``design.json`` then
    state; unchanged when none is given.  No noise, no charge: post-processing of public facts.

    >>> import dataclasses
    >>> @dataclasses.dataclass(frozen=True)
    ... class R:
    ...     coordinate_precision: float | None = None
    >>> stating_precision(R(), "0.001"), stating_precision(R(), None)
    (R(coordinate_precision=0.001), R(coordinate_precision=None))
    """
    import dataclasses

    p = coordinate_precision(value, where)
    if p is None:
        return out
    inner = getattr(out, "inner", None)
    if inner is not None:
        return dataclasses.replace(out, inner=dataclasses.replace(inner, coordinate_precision=p))
    return dataclasses.replace(out, coordinate_precision=p)
