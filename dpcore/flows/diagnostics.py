"""Curator-only diagnostics of an O/D release: its errors against the true counts.

**Not for publication**: these numbers read the confidential counts.  They are the metrics of
Boninsegna & Silvestri ("Differentially private release of hierarchical origin/destination data
with a TopDown approach", PoPETs 2025 / arXiv 2024, Sec. 5) per tree level, next to the
data-free expectations of the plan (:mod:`dpcore.flows.accuracy`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpcore.core import metrics
from dpcore.errors import InputError
from dpcore.flows.counts import ODCounts
from dpcore.flows.mechanisms.common import ODRelease

__all__ = ["empirical_errors"]


def empirical_errors(rel: ODRelease, counts: ODCounts) -> list[dict[str, Any]]:
    """Curator-only: error of the release against the truth per tree level.  **Not for publication.**

    Over the union of pairs positive in the truth or the release (Boninsegna & Silvestri 2025, Sec. 5; a missing pair is
    0): maximum and mean absolute error; MAE over *all possible* pairs (the paper's
    normalisation); false positives (released > 0, true 0) and the false-discovery rate; false
    negatives (true > 0, released 0) and their rate; median and 95th percentile relative error
    ``|x̂ − x| / max(x, 1)`` over true-positive pairs (a ratio, not percent).  The error
    definitions are those of :mod:`dpcore.core.metrics` (sanity bound 1 here).
    """
    if counts.origin_h.fingerprint() != rel.origin_h.fingerprint() or \
            counts.destination_h.fingerprint() != rel.destination_h.fingerprint():
        raise InputError("The release was made on another hierarchy than these counts.")
    out = []
    for t, lp in enumerate(rel.plan.levels):
        keys, tc = counts.level(lp.origin_depth, lp.destination_depth)
        n_d = rel.destination_h.sizes[lp.destination_depth]
        rk = rel.origins[t] * n_d + rel.destinations[t]
        rv = rel.values[t]
        allk = np.union1d(keys, rk)
        tv = np.zeros(allk.size, dtype=np.int64)
        ev = np.zeros(allk.size, dtype=np.int64)
        tv[np.searchsorted(allk, keys)] = tc
        ev[np.searchsorted(allk, rk)] = rv
        released = int((ev > 0).sum())
        true_pos = int((tv > 0).sum())
        fp = int(((ev > 0) & (tv == 0)).sum())
        fn = int(((tv > 0) & (ev <= 0)).sum())
        rel_err = metrics.relative_errors(tv[tv > 0], ev[tv > 0], 1.0, percent=False)
        out.append({
            "level": lp.name,
            "tree_level": t,
            "possible_pairs": lp.pairs,
            "true_pairs": true_pos,
            "released_pairs": released,
            "max_abs_error": metrics.max_abs(tv, ev),
            "mean_abs_error": metrics.mae(tv, ev) if allk.size else 0.0,
            "mae_all_pairs": metrics.mae(tv, ev, over=lp.pairs),
            "rmse_all_pairs": metrics.rmse(tv, ev, over=lp.pairs),
            "false_positives": fp,
            "fdr_percent": (100.0 * fp / released) if released else math.nan,
            "false_negatives": fn,
            "fnr_percent": (100.0 * fn / true_pos) if true_pos else math.nan,
            "median_relative_error": float(np.median(rel_err)) if rel_err.size else math.nan,
            "p95_relative_error": float(np.quantile(rel_err, 0.95)) if rel_err.size else math.nan,
            "expected_max_abs": lp.max_abs,
            "expected_rmse": lp.sd,
        })
    return out
