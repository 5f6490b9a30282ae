"""The data users' files of a points release (issue 25): ``measurements.csv``, ``design.json``
and ``estimates.csv``, in the format every kind shares (``notes/data-users-format.md``).

The *count phase* of a points release is a set of noisy rectangle counts, each the sum of the
released leaves it covers (the leaves tile the grid; they are the finest cells of
``release.csv``).  What is offered:

* least-squares trees (``quadtree``, ``kdtree``, ``ag``) keep each node's raw noisy count in
  :attr:`~dpcore.points.release.PartitionRelease.measured`; their released counts are the
  least-squares (GLS) estimates of :mod:`dpcore.estimate.tree_inference` (Hay, Rastogi, Miklau &
  Suciu, VLDB 2010, section 4), with the exact variances, so ``estimates.csv`` states them;
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
from typing import Any

import numpy as np
import orjson
import pandas as pd
from numpy.typing import NDArray

from dpcore.data.csv_safe import csv_bytes
from dpcore.estimate.data_users import REPLICATE_FILE, replicate_files, replicates_info
from dpcore.estimate.gls import measurements_from
from dpcore.points.release import PartitionRelease
from dpcore.privacy import noise as _noise
from dpcore.privacy.calibration import gaussian_sigma_for_rho, laplace_scale_for_epsilon

__all__ = ["DATA_USER_FILES", "CONDITIONAL", "data_user_files", "data_users_section", "leaves_within",
           "measurement_frame", "estimate_frame", "design"]

#: The data users' files of every points release, in the order they are written.
DATA_USER_FILES = ("measurements.csv", "design.json", "estimates.csv")

#: Mechanisms whose partition depends on the data: their count phase is offered conditional on it.
CONDITIONAL = frozenset({"privtree", "ag", "htf", "dawa", "ug", "kdtree"})

#: Mechanisms whose measurements are not sums of released rectangles (none offered), and why.
NOT_OFFERED = {
    "privelet": "Privelet measures Haar wavelet coefficients (signed combinations of cells), not sums of "
                "released rectangles; the released counts are their unique linear reconstruction.",
    "matrix": "the matrix mechanism measures its strategy's rows, which are not released rectangles; the "
              "released counts are the least-squares reconstruction from them.",
    "dawa": "DAWA measures groups of its buckets, which are not released rectangles; the released "
            "counts are their least-squares estimates.",
}

MEASUREMENT_COLUMNS = ["measurement_id", "level", "node", "value", "family", "scale", "variance", "share",
                       "phase"]
ESTIMATE_COLUMNS = ["level", "code", "estimate", "variance", "sd", "published"]


def _base(release: PartitionRelease) -> str:
    """The mechanism that drew the counts (``auto``'s choice for ``auto``)."""
    if release.mechanism == "auto":
        return str(release.public.get("auto", {}).get("chosen", "auto"))
    return release.mechanism


def _conditional(release: PartitionRelease) -> bool:
    # auto chooses its mechanism from a noisy count when no public count is given: data-dependent too
    return _base(release) in CONDITIONAL or (release.mechanism == "auto" and "noisy_point_count" in release.public)


def _family(release: PartitionRelease) -> str:
    return "discrete_laplace" if release.cost.definition == "pure" else "discrete_gaussian"


def _scale_variance(release: PartitionRelease, budgets: NDArray[np.float64]) -> tuple[NDArray, NDArray]:
    """Each budget's noise scale (t or σ) and the noise's exact variance (one evaluation per value)."""
    values, inverse = np.unique(budgets, return_inverse=True)
    k = release.sensitivity
    if release.cost.definition == "pure":
        scale = [laplace_scale_for_epsilon(b, k) for b in values.tolist()]
        var = [_noise.discrete_laplace_variance(t) for t in scale]
    else:
        scale = [gaussian_sigma_for_rho(b, k) for b in values.tolist()]
        var = [_noise.discrete_gaussian_variance(s) for s in scale]
    scale_a = np.array([float(s) for s in scale], dtype=np.float64)
    return scale_a[inverse.ravel()], np.array(var, dtype=np.float64)[inverse.ravel()]


def leaves_within(release: PartitionRelease) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Pairs ``(rect, leaf position)``: the leaves (their position among the leaves, in id order)
    each rectangle of the release is made of.  One labelled grid per level (rectangles of one level
    are disjoint), so the cost is O(levels × cells).

    >>> from dpcore.data.domain import Bounds, Grid
    >>> from dpcore.privacy.budget import pure
    >>> g = Grid(Bounds(0, 0, 1, 1), 2, 2)
    >>> r = PartitionRelease("q", "q", {}, g, pure(1), (), np.array([[0, 2, 0, 2], [0, 1, 0, 2], [1, 2, 0, 2]]),
    ...                      np.array([0, 1, 1]), np.array([False, True, True]), np.zeros(3), np.ones(3),
    ...                      np.ones(3), 1, None)
    >>> [a.tolist() for a in leaves_within(r)]
    [[0, 0, 1, 2], [0, 1, 0, 1]]
    """
    g = release.grid
    leaf_idx = release.leaf_index()
    corner = release.rects[leaf_idx][:, [0, 2]]
    nodes, leaves = [], []
    for lv in np.unique(release.level).tolist():
        idx = np.flatnonzero(release.level == lv)
        r = release.rects[idx]
        diff = np.zeros((g.rows + 1, g.cols + 1), dtype=np.int64)
        lab = idx + 1
        np.add.at(diff, (r[:, 0], r[:, 2]), lab)
        np.add.at(diff, (r[:, 1], r[:, 2]), -lab)
        np.add.at(diff, (r[:, 0], r[:, 3]), -lab)
        np.add.at(diff, (r[:, 1], r[:, 3]), lab)
        owner = np.cumsum(np.cumsum(diff, axis=0), axis=1)[corner[:, 0], corner[:, 1]] - 1
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


def measurement_frame(release: PartitionRelease) -> pd.DataFrame:
    """``measurements.csv``: one row per count-phase noisy measurement, before post-processing."""
    value = _measured(release)
    idx = np.array([], dtype=np.int64) if value is None else np.flatnonzero(np.isfinite(value))
    budgets = release.budgets()[idx]
    scale, var = _scale_variance(release, budgets)
    vals = value[idx] if value is not None else np.array([], dtype=np.float64)
    return pd.DataFrame({
        "measurement_id": np.arange(idx.size, dtype=np.int64),
        "level": release.level[idx].astype(np.int64),
        "node": idx.astype(np.int64),  # the rectangle's release.csv id (the same text as a code)
        "value": np.round(vals).astype(np.int64),  # discrete noise on integer counts: integers
        "family": _family(release),
        "scale": scale,
        "variance": var,
        "share": budgets,
        "phase": "count",
    })[MEASUREMENT_COLUMNS]


def estimate_frame(release: PartitionRelease) -> pd.DataFrame:
    """``estimates.csv``: the least-squares (GLS) estimate of every published rectangle with its
    variance, beside the released value.  Least-squares trees release these estimates already
    (exact variances); where the leaves are the measurements, a rectangle's estimate is the sum of
    its leaves' and its variance the sum of theirs (independent draws)."""
    if release.measured is not None or _base(release) in NOT_OFFERED:
        est = np.asarray(release.noisy, dtype=np.float64)
        var = np.asarray(release.sd, dtype=np.float64) ** 2
    else:
        leaf_idx = release.leaf_index()
        _, leaf_var = _scale_variance(release, release.budgets()[leaf_idx])
        node, leaf = leaves_within(release)
        est = np.bincount(node, weights=release.noisy[leaf_idx][leaf], minlength=release.n_rects)
        var = np.bincount(node, weights=leaf_var[leaf], minlength=release.n_rects)
    return pd.DataFrame({
        "level": release.level.astype(np.int64), "code": np.arange(release.n_rects, dtype=np.int64),
        "estimate": est, "variance": var, "sd": np.sqrt(var), "published": release.noisy,
    })[ESTIMATE_COLUMNS]


def design(release: PartitionRelease) -> dict[str, Any]:
    """``design.json``: the finest cells (the leaves, by ``release.csv`` id), the leaves each
    measured rectangle sums, each leaf's lon/lat rectangle, and the statements on the draws."""
    leaf_idx = release.leaf_index()
    value = _measured(release)
    node, leaf = leaves_within(release)
    measured = set() if value is None else set(np.flatnonzero(np.isfinite(value)).tolist())
    keep = np.isin(node, sorted(measured))
    nodes = _node_cells(node[keep], leaf[keep])
    box = np.round(release.grid.rect_lonlat(release.rects[leaf_idx]), 7)
    conditional = _conditional(release)
    statement = ("The noise draws of all measurements are independent (exact discrete samplers); each "
                 "measurement is the sum of the listed cells plus its own noise.")
    if conditional:
        statement += (" The partition was chosen from the data under its own budget: only the count phase is "
                      "offered, and it is unbiased conditional on the published partition.")
    out: dict[str, Any] = {
        "schema": "dpcore-design/1", "kind": "points",
        "cells": _codes(leaf_idx), "nodes": nodes, "invariants": [],
        "independent": True, "statement": statement, "conditional_on_partition": conditional,
        "cell_bounds": box.tolist(),
    }
    if value is None:
        out["measurements_offered"] = False
        out["why"] = NOT_OFFERED[_base(release)]
    return out


def _codes(idx: NDArray[np.int64]) -> list[str]:
    """Release ids as the codes of ``release.csv`` (text)."""
    import pyarrow as pa

    return pa.array(np.asarray(idx, dtype=np.int64)).cast(pa.string()).to_pylist()


def _node_cells(node: NDArray[np.int64], leaf: NDArray[np.int64]) -> dict[str, list[int]]:
    """``{node code: [cell positions]}`` from pairs sorted by node (one-cell nodes vectorised: a
    million single cells take a second, not a minute)."""
    if node.size == 0:
        return {}
    cuts = np.flatnonzero(np.diff(node)) + 1
    if cuts.size == node.size - 1:  # every node sums one cell
        return dict(zip(_codes(node), leaf[:, None].tolist(), strict=True))
    return {str(int(ns[0])): ls.tolist() for ns, ls in zip(np.split(node, cuts), np.split(leaf, cuts), strict=True)}


def _csv(df: pd.DataFrame) -> bytes:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    # pyarrow: a million rows in under a second (shortest round-trip text of floats); the helper
    # finds no text column that starts like a formula (codes are digits, families fixed words)
    def write(d: pd.DataFrame) -> bytes:
        buf = io.BytesIO()
        pacsv.write_csv(pa.Table.from_pandas(d, preserve_index=False), buf, pacsv.WriteOptions(quoting_style="none"))
        return buf.getvalue()

    return csv_bytes(df, write)


def data_user_files(release: PartitionRelease) -> dict[str, bytes]:
    """The three data users' files of a points release, name -> bytes (:data:`DATA_USER_FILES`).

    They are made after the budget is charged, so they never refuse: a release whose rectangles are
    not unions of its leaves gets files that offer no measurement and say why, with the published
    values and their analytic variances as the estimates."""
    try:
        frame, plan = measurement_frame(release), design(release)
        files = {
            "measurements.csv": _csv(frame),
            "design.json": orjson.dumps(plan),  # compact: a million cells stay ~100 bytes each
            "estimates.csv": _csv(estimate_frame(release)),
        }
    except ValueError as err:
        leaf_idx = release.leaf_index()
        var = np.asarray(release.sd, dtype=np.float64) ** 2
        none = {"schema": "dpcore-design/1", "kind": "points", "cells": _codes(leaf_idx), "nodes": {},
                "invariants": [], "independent": True, "statement": "No measurement is offered.",
                "conditional_on_partition": _conditional(release), "measurements_offered": False, "why": str(err),
                "cell_bounds": np.round(release.grid.rect_lonlat(release.rects[leaf_idx]), 7).tolist()}
        est = pd.DataFrame({"level": release.level.astype(np.int64), "code": np.arange(release.n_rects, dtype=np.int64),
                            "estimate": release.noisy, "variance": var, "sd": np.sqrt(var), "published": release.noisy})
        return {"measurements.csv": (",".join(MEASUREMENT_COLUMNS) + "\n").encode(),
                "design.json": orjson.dumps(none), "estimates.csv": _csv(est[ESTIMATE_COLUMNS])}
    if replicates_info(len(plan["cells"]))["file"] and len(frame):  # small enough for a spreadsheet (item 5)
        files.update(replicate_files(measurements_from(plan, frame)))
    return files


def data_users_section(release: PartitionRelease) -> dict[str, Any]:
    """The record's ``data_users`` section: the files and which value the map and tables show."""
    offered = _measured(release) is not None
    info = replicates_info(int(release.leaf.sum())) if offered else None
    return {
        "files": [*DATA_USER_FILES, *([REPLICATE_FILE] if info is not None and info["file"] else [])],
        "map_shows": "published",
        "published": "release.csv's noisy_count: the released counts (negative values kept, not rounded)",
        "estimates": "estimates.csv: least-squares (GLS) estimates with exact variances from measurements.csv",
        "measurements_offered": offered,
        "conditional_on_partition": _conditional(release),
        **({"replicates": info} if info is not None else {}),
    }
