"""The data users' files of an O/D release (issue 25): measurements, design, GLS estimates.

Written for VanillaGauss, whose one measurement is every finest origin→destination pair of the
full domain (zeros included), noised independently: ``measurements.csv`` has one row per pair,
``design.json`` lists the pairs as the cells (code ``ORIGIN>DESTINATION``, the finest level's
labels of release.csv) and ``estimates.csv`` the GLS estimate of every published flow with its
exact variance.  The design is the identity, so the GLS estimate of a cell is its measurement and
the covariance is diagonal: a flow's variance is the sum of its finest pairs' noise variances.

The TopDown variants (InfTDA, TopDown L2, the MILP) measure a tree of pairs, refined only under
surviving parents: their files are written by :mod:`dpcore.flows.data_users_tree`, with the design
conditional on that tree and the caveat stated in the files.

Not written (the record then has no ``data_users`` section):

* the stability histogram: its measured pairs are the true observed pairs (confidential);
* domains above :data:`OD_MAX_CELLS` pairs (the design would not be a file to hand to a user).

Nor when two pairs would share a design code (area labels holding ">", or repeating across levels):
the record's section then lists no file and says why, with ``measurements_offered`` false.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from dpcore.estimate.data_users import (
    DATA_USER_FILES,
    DataUserPack,
    MeasuredLevel,
    estimates_csv,
    node_estimates,
    not_offered,
    pack_files,
    replicate_files,
    section,
)
from dpcore.estimate.design_nodes import NodeCells, distinct_codes, repeated_codes_why
from dpcore.estimate.gls import Measurements, gls_estimate
from dpcore.flows.data_users_tree import (
    TREE_NOTE,
    measured_tree,
    published_nodes,
    tree_codes,
    tree_pack,
)
from dpcore.flows.mechanisms.common import ODRelease
from dpcore.flows.tree import ancestors

__all__ = ["DATA_USER_FILES", "OD_MAX_CELLS", "data_users_section", "od_data_user_files", "od_pack"]

#: The largest full finest domain whose data users' files are written.
OD_MAX_CELLS = 250_000


def _leaf_only(rel: ODRelease) -> bool:
    """VanillaGauss: one measurement, every finest pair of the full domain."""
    T = rel.depth
    if not rel.measurements or rel.measurements[T] is None or any(x is not None for x in rel.measurements[:T]):
        return False
    o, _, v = rel.measurements[T]
    return o is None and v.size <= OD_MAX_CELLS


#: per release (immutable, compared by identity): its measured tree and its pack, made once although
#: the files, the record and the export's file list each ask for them
_TREES: weakref.WeakKeyDictionary[ODRelease, Any] = weakref.WeakKeyDictionary()
_PACKS: weakref.WeakKeyDictionary[ODRelease, Any] = weakref.WeakKeyDictionary()


def _tree(rel: ODRelease) -> dict[str, Any] | None:
    """The TopDown walk's measured tree (:func:`~dpcore.flows.data_users_tree.measured_tree`), when small enough."""
    if rel not in _TREES:
        small = (not _leaf_only(rel) and bool(rel.measurements)
                 and sum(m[2].size for m in rel.measurements if m is not None) <= OD_MAX_CELLS)
        _TREES[rel] = measured_tree(rel) if small else None
    return _TREES[rel]


def _pair_codes(rel: ODRelease, t: int, o: np.ndarray, d: np.ndarray) -> np.ndarray:
    lp = rel.plan.levels[t]
    lo = np.asarray(rel.origin_h.labels(lp.origin_depth)).astype(str)[o]
    ld = np.asarray(rel.destination_h.labels(lp.destination_depth)).astype(str)[d]
    return np.char.add(np.char.add(lo, ">"), ld)


def od_pack(rel: ODRelease) -> DataUserPack | None:
    """The measurements and design of ``rel`` (None when not offered, module docstring)."""
    pack = _pack_or_why(rel)
    return pack if isinstance(pack, DataUserPack) else None


def _pack_or_why(rel: ODRelease) -> DataUserPack | str | None:
    """:func:`_make_pack`, made once per release."""
    if rel not in _PACKS:
        _PACKS[rel] = _make_pack(rel)
    return _PACKS[rel]


#: the fix the record states when two pairs share a design code
_UNIQUE_CODES = ("make the area codes unique across the levels and free of '>' (a pair's code is "
                 "ORIGIN>DESTINATION) and release again to get the data users' files.")


def _make_pack(rel: ODRelease) -> DataUserPack | str | None:
    """The pack of ``rel``; why not (:func:`~dpcore.estimate.design_nodes.repeated_codes_why`) when two
    pairs share a design code; None when not offered otherwise."""
    if not _leaf_only(rel):
        tree = _tree(rel)
        if tree is None:
            return None
        codes = tree_codes(rel, tree)
        pack = tree_pack(rel, tree, codes)
        # None only when pair codes repeat across levels
        return pack if pack is not None else repeated_codes_why(codes.tolist(), "pairs", _UNIQUE_CODES)
    T = rel.depth
    leaf = rel.measurements[T][2]
    nd = rel.destination_h.n_leaves
    idx = np.arange(leaf.size)
    codes = _pair_codes(rel, T, idx // nd, idx % nd).tolist()
    if not distinct_codes(codes):
        # area labels holding ">" make two pairs one code: not offered (as tree_pack), and the record says why
        return repeated_codes_why(codes, "pairs", _UNIQUE_CODES)
    lv = rel.plan.levels[T]
    n = leaf.size
    one_each = NodeCells(codes, np.arange(n + 1), np.arange(n))  # the identity design: node i is cell i
    return DataUserPack("od", [MeasuredLevel(lv.name, lv.noise, float(rel.plan.scales[T]), lv.share)],
                        np.zeros(n, dtype=np.int64), codes, leaf, codes, one_each)


def od_data_user_files(rel: ODRelease, parquet_above: int | None = None) -> dict[str, bytes]:
    """``measurements.csv`` (Parquet above ``parquet_above`` rows: :func:`dpcore.estimate.data_users.pack_files`),
    ``design.json`` and ``estimates.csv`` of ``rel`` (empty when not offered)."""
    pack = od_pack(rel)
    if pack is None:
        return {}
    files, m = pack_files(pack, parquet_above)
    files.update(replicate_files(m))  # replicates.csv, where small enough (issue 25 item 5)
    if not _leaf_only(rel):
        files["estimates.csv"] = _tree_estimates(rel, m)
        return files
    x = gls_estimate(m)
    nd = rel.destination_h.n_leaves
    idx = np.arange(m.n)
    anc_o, anc_d = ancestors(rel.origin_h), ancestors(rel.destination_h)
    level, code, est, var, pub = [], [], [], [], []
    for t, lp in enumerate(rel.plan.levels):
        n_d = rel.destination_h.sizes[lp.destination_depth]
        key = anc_o[lp.origin_depth][idx // nd] * n_d + anc_d[lp.destination_depth][idx % nd]
        uk, inv = np.unique(key, return_inverse=True)
        s = np.bincount(inv, weights=x, minlength=uk.size)
        v = np.bincount(inv, weights=m.var, minlength=uk.size)  # identity design: C = diag(var)
        pos = np.searchsorted(uk, rel.origins[t] * n_d + rel.destinations[t])
        level += [lp.name] * pos.size
        code.append(_pair_codes(rel, t, rel.origins[t], rel.destinations[t]))
        est.append(s[pos])
        var.append(v[pos])
        pub.append(rel.values[t])
    files["estimates.csv"] = estimates_csv(level, np.concatenate(code), np.concatenate(est), np.concatenate(var),
                                           np.concatenate(pub))
    return files


def _tree_estimates(rel: ODRelease, m: Measurements) -> bytes:
    """estimates.csv of a TopDown release: every published pair's node estimate (two passes on the tree)."""
    tree = _tree(rel)
    assert tree is not None  # od_pack made the design from it
    est, var = node_estimates(m)  # in design node order: the measured tree's, root first
    level, code, e, v, pub = [], [], [], [], []
    for t, lp in enumerate(rel.plan.levels):
        node = published_nodes(rel, tree, t)
        level += [lp.name] * node.size
        code.append(_pair_codes(rel, t, rel.origins[t], rel.destinations[t]))
        e.append(est[node])
        v.append(var[node])
        pub.append(rel.values[t])
    return estimates_csv(level, np.concatenate(code), np.concatenate(e), np.concatenate(v), np.concatenate(pub))


def data_users_section(rel: ODRelease) -> dict[str, Any] | None:
    """The record's ``data_users`` section: the files and which value the map shows; for a release whose
    pair codes repeat, no file and why; None when no files are offered otherwise (module docstring)."""
    pack = _pack_or_why(rel)
    if pack is None:
        return None
    if isinstance(pack, str):
        return not_offered("release.csv and flows.geojson show the published flows; no data users' files are "
                           "written (see why).", pack)
    if not _leaf_only(rel):
        return section("release.csv and flows.geojson show the published flows; estimates.csv holds the "
                       "generalised least-squares estimate of every published flow and its variance, from "
                       "measurements.csv (every noisy count of the TopDown walk) and design.json (the measured "
                       "tree). " + TREE_NOTE, n_cells=len(pack.cells))
    return section("release.csv and flows.geojson show the published flows; estimates.csv holds the unbiased "
                 "generalised least-squares estimate of every published flow and its exact variance, from "
                 "measurements.csv (every finest pair's noisy count, zeros included) and design.json (cells "
                 "coded ORIGIN>DESTINATION). 'python -m dpcore interval' gives the estimate and interval of "
                 "any union of finest pairs.", n_cells=int(rel.measurements[rel.depth][2].size))
