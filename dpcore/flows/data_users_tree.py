"""The data users' files of the TopDown O/D mechanisms (InfTDA, TopDown L2, the MILP; issue 25).

TopDown (Boninsegna & Silvestri 2025, Algorithms 1 and 3) measures the O/D tree level by level: the
root (unless the total is public), then every child pair of every pair that *survived* the level
above (its projected value is positive).  Its measurements, kept on the release
(:attr:`~dpcore.flows.mechanisms.common.ODRelease.measurements`), are independent noisy counts of
the pairs of a tree, so they are written in the one format (:mod:`dpcore.estimate.data_users`):

* the design's **nodes** are the measured pairs (code ``ORIGIN>DESTINATION`` in the labels of their
  level, as release.csv names them), its **edges** join each to its measured parent (copy levels,
  which measure nothing, are skipped), and its **cells** are the measured pairs without a measured
  child: the finest pairs under surviving parents, and the coarser pairs the walk stopped at
  (projected to 0), whose finer pairs were never measured and cannot be estimated apart;
* a public total is an invariant of the root.

What cannot be stated as for a fixed design, and the files say so (``conditional_on_partition``
true, as for the points' data-dependent partitions): *which* pairs are measured depends on the
noisy values above them (a pair is refined only when its projected value is positive), and unlike
the points' separate count phase, the values that chose the tree are measurements of it.
Conditional on the published tree, the noise of a measurement that decided a refinement is not
exactly zero-mean, so the least-squares estimates are unbiased only approximately: closely for
pairs whose counts are many noise SDs from zero, with a bias towards the refined side for pairs
near zero.  The variances are the noises' exact variances.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpcore.estimate.data_users import DataUserPack, MeasuredLevel
from dpcore.estimate.design_nodes import NodeCells, NodeEdges, distinct_codes
from dpcore.flows.mechanisms.common import ODRelease

__all__ = ["TREE_NOTE", "measured_tree", "published_nodes", "tree_codes", "tree_pack"]

#: The statement of the design (design.json's ``statement`` is the independence; this is the caveat).
TREE_NOTE = ("TopDown measured the O/D tree level by level and refined only the pairs whose projected value was "
             "positive: which pairs are measured depends on the noisy values above them, so the least-squares "
             "estimates are unbiased only conditionally and approximately (closely for counts many noise SDs from "
             "zero, biased near zero). Cells are the measured pairs without a measured child, some of them coarser "
             "than the finest level.")


def _up(h: Any, idx: np.ndarray, from_depth: int, to_depth: int) -> np.ndarray:
    """The ancestors at ``to_depth`` of areas at ``from_depth`` (``h.parents[d]``: depth d+1 -> d)."""
    for d in range(from_depth - 1, to_depth - 1, -1):
        idx = np.asarray(h.parents[d])[idx]
    return idx


def measured_tree(rel: ODRelease) -> dict[str, Any] | None:
    """The measured pairs of ``rel`` as a tree: ``levels`` (the measured tree levels, root first),
    per node its ``level``, ``origin``, ``destination``, ``parent`` (-1 at the root) and ``value``
    (NaN for a public root), ``public_root``.  None when the walk's measurements are not a tree of
    pairs (another mechanism)."""
    meas = rel.measurements
    if not meas or all(m is None for m in meas) or any(m is not None and m[0] is None for m in meas):
        return None
    lv = rel.plan.levels
    levels = [0] + [t for t in range(1, len(meas)) if meas[t] is not None]
    keys: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # level -> (sorted pair keys, node ids)
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("level", "origin", "destination", "parent", "value")}
    public_root = meas[0] is None
    start = 0
    for i, t in enumerate(levels):
        if t == 0:
            o = d = np.zeros(1, np.int64)
            v = np.array([np.nan]) if public_root else np.asarray(meas[0][2], float)
            parent = np.full(1, -1, np.int64)
        else:
            o, d, v = (np.asarray(a) for a in meas[t])
            s = levels[i - 1]
            po = _up(rel.origin_h, o, lv[t].origin_depth, lv[s].origin_depth)
            pd_ = _up(rel.destination_h, d, lv[t].destination_depth, lv[s].destination_depth)
            sk, ids = keys[s]
            n_d = rel.destination_h.sizes[lv[s].destination_depth]
            pos = np.searchsorted(sk, po * n_d + pd_)
            if np.any(pos >= sk.size) or np.any(sk[np.minimum(pos, sk.size - 1)] != po * n_d + pd_):
                return None  # a measured pair without a measured parent: not the TopDown walk
            parent = ids[pos]
        n = o.size
        key = o.astype(np.int64) * rel.destination_h.sizes[lv[t].destination_depth] + d
        order = np.argsort(key, kind="stable")
        keys[t] = (key[order], start + order)
        for name, arr in (("level", np.full(n, t)), ("origin", o), ("destination", d), ("parent", parent),
                          ("value", np.asarray(v, float))):
            cols[name].append(np.asarray(arr))
        start += n
    out = {k: np.concatenate(v) for k, v in cols.items()}
    out.update(levels=levels, public_root=public_root, keys=keys)
    return out


def tree_codes(rel: ODRelease, tree: dict[str, Any]) -> np.ndarray:
    """The design code (``ORIGIN>DESTINATION`` in its level's labels) of every node of ``tree``."""
    lv = rel.plan.levels
    codes = np.empty(tree["level"].size, dtype=object)
    for t in tree["levels"]:
        at = tree["level"] == t
        lo = np.asarray(rel.origin_h.labels(lv[t].origin_depth)).astype(str)[tree["origin"][at]]
        ld = np.asarray(rel.destination_h.labels(lv[t].destination_depth)).astype(str)[tree["destination"][at]]
        codes[at] = np.char.add(np.char.add(lo, ">"), ld)
    return codes


def tree_pack(rel: ODRelease, tree: dict[str, Any], code_of: np.ndarray) -> DataUserPack | None:
    """The :class:`~dpcore.estimate.data_users.DataUserPack` of a TopDown release's measured tree, its
    nodes coded ``code_of`` (:func:`tree_codes`, which the caller keeps to say why when this is None:
    two levels would give a node the same code)."""
    codes = code_of.tolist()
    if not distinct_codes(codes):
        return None  # area labels repeat across levels: pair codes would not name one node
    parent, n = tree["parent"], len(codes)
    leaf = np.ones(n, dtype=bool)
    leaf[parent[parent >= 0]] = False
    cells = np.flatnonzero(leaf)
    # each cell under every ancestor, a level at a time (the tree has a few levels): (node, cell)
    # pairs, then grouped by node with its cells in increasing order
    cur_cells = np.arange(cells.size)
    nodes_at, cells_at = [cells], [cur_cells]
    cur_nodes = parent[cells]
    while (keep := cur_nodes >= 0).any():
        cur_nodes, cur_cells = cur_nodes[keep], cur_cells[keep]
        nodes_at.append(cur_nodes)
        cells_at.append(cur_cells)
        cur_nodes = parent[cur_nodes]
    node_of, cell_of = np.concatenate(nodes_at), np.concatenate(cells_at)
    order = np.argsort(node_of * cells.size + cell_of, kind="stable")  # by node, then cell (one key: lexsort's order)
    # the design's nodes and edges as arrays (80k nodes on the demo: no list per node)
    nodes = NodeCells(codes, np.searchsorted(node_of[order], np.arange(n + 1)), cell_of[order])
    has_parent = np.flatnonzero(parent >= 0)
    measured = np.flatnonzero(~np.isnan(tree["value"]))
    lvl = tree["level"][measured]
    invariants = ([{"node": codes[0], "value": int(rel.public_total),
                    "why": "the total number of trips is public (replace-one neighbours)"}]
                  if tree["public_root"] else [])

    lv, (measured_levels, row_level) = rel.plan.levels, np.unique(lvl, return_inverse=True)
    levels = [MeasuredLevel(lv[t].name, lv[t].noise, float(rel.plan.scales[t]), lv[t].share)
              for t in measured_levels.tolist()]
    return DataUserPack(
        "od", levels, row_level.astype(np.int64).ravel(), code_of[measured].tolist(),
        tree["value"][measured].astype(np.int64), code_of[cells].tolist(), nodes,
        NodeEdges(nodes, parent[has_parent], has_parent), invariants, conditional_on_partition=True)


def published_nodes(rel: ODRelease, tree: dict[str, Any], t: int) -> np.ndarray:
    """The tree node of every published pair of level ``t`` (its ancestor at the deepest measured
    level at or above ``t``: a copy level's pair covers its parent's cells)."""
    lv = rel.plan.levels
    s = max(x for x in tree["levels"] if x <= t)
    o = _up(rel.origin_h, np.asarray(rel.origins[t]), lv[t].origin_depth, lv[s].origin_depth)
    d = _up(rel.destination_h, np.asarray(rel.destinations[t]), lv[t].destination_depth, lv[s].destination_depth)
    sk, ids = tree["keys"][s]
    return ids[np.searchsorted(sk, o * rel.destination_h.sizes[lv[s].destination_depth] + d)]
