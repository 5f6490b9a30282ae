"""The data users' files of an O/D release (issue 25): measurements, design, GLS estimates.

Written for VanillaGauss, whose one measurement is every finest origin→destination pair of the
full domain (zeros included), noised independently: ``measurements.csv`` has one row per pair,
``design.json`` lists the pairs as the cells (code ``ORIGIN>DESTINATION``, the finest level's
labels of release.csv) and ``estimates.csv`` the GLS estimate of every published flow with its
exact variance.  The design is the identity, so the GLS estimate of a cell is its measurement and
the covariance is diagonal: a flow's variance is the sum of its finest pairs' noise variances.

Not written (the record then has no ``data_users`` section):

* the TopDown variants (InfTDA, TopDown L2, the MILP): they keep their measurements on the release
  (:attr:`~dpcore.flows.mechanisms.common.ODRelease.measurements`), but which pairs are measured at
  a level depends on the released (post-processed) parents, so an estimate would be conditional on
  that partition and its cells are not the finest pairs; not offered yet;
* the stability histogram: its measured pairs are the true observed pairs (confidential);
* domains above :data:`OD_MAX_CELLS` pairs (the design would not be a file to hand to a user).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpcore.estimate.data_users import (
    DATA_USER_FILES,
    DataUserPack,
    estimates_csv,
    pack_files,
    section,
)
from dpcore.estimate.gls import gls_estimate
from dpcore.flows.mechanisms.common import ODRelease
from dpcore.flows.tree import ancestors

__all__ = ["DATA_USER_FILES", "OD_MAX_CELLS", "data_users_section", "od_data_user_files", "od_pack"]

#: The largest full finest domain whose data users' files are written.
OD_MAX_CELLS = 250_000


def _offers(rel: ODRelease) -> bool:
    T = rel.depth
    if not rel.measurements or rel.measurements[T] is None or any(x is not None for x in rel.measurements[:T]):
        return False
    o, _, v = rel.measurements[T]
    return o is None and v.size <= OD_MAX_CELLS


def _pair_codes(rel: ODRelease, t: int, o: np.ndarray, d: np.ndarray) -> np.ndarray:
    lp = rel.plan.levels[t]
    lo = np.asarray(rel.origin_h.labels(lp.origin_depth)).astype(str)[o]
    ld = np.asarray(rel.destination_h.labels(lp.destination_depth)).astype(str)[d]
    return np.char.add(np.char.add(lo, ">"), ld)


def od_pack(rel: ODRelease) -> DataUserPack | None:
    """The measurements and design of ``rel`` (None when not offered, module docstring)."""
    if not _offers(rel):
        return None
    T = rel.depth
    leaf = rel.measurements[T][2]
    nd = rel.destination_h.n_leaves
    idx = np.arange(leaf.size)
    codes = _pair_codes(rel, T, idx // nd, idx % nd).tolist()
    lv = rel.plan.levels[T]
    n = leaf.size
    return DataUserPack("od", [lv.name] * n, codes, leaf, [lv.noise] * n, [float(rel.plan.scales[T])] * n,
                        [lv.share] * n, codes, {c: [i] for i, c in enumerate(codes)})


def od_data_user_files(rel: ODRelease) -> dict[str, bytes]:
    """``measurements.csv``, ``design.json`` and ``estimates.csv`` of ``rel`` (empty when not offered)."""
    pack = od_pack(rel)
    if pack is None:
        return {}
    files, m = pack_files(pack)
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


def data_users_section(rel: ODRelease) -> dict[str, Any] | None:
    """The record's ``data_users`` section: the files and which value the map shows."""
    if not _offers(rel):
        return None
    return section("release.csv and flows.geojson show the published flows; estimates.csv holds the unbiased "
                 "generalised least-squares estimate of every published flow and its exact variance, from "
                 "measurements.csv (every finest pair's noisy count, zeros included) and design.json (cells "
                 "coded ORIGIN>DESTINATION). 'python -m dpcore interval' gives the estimate and interval of "
                 "any union of finest pairs.")
