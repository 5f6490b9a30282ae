"""Curator-only diagnostics of a points release: its errors against the true counts.

**Not for publication**: these numbers read the confidential frequency matrix.  The range-query
workload and the mean relative error with a smoothing bound follow the evaluation of Qardaji,
Yang & Li ("Differentially Private Grids for Geospatial Data", ICDE 2013, Sec. V) and of Zhang
et al. ("Towards Accurate Histogram Publication under Differential Privacy", SDM 2014, Sec. 6).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpcore.core import metrics
from dpcore.data import queries
from dpcore.data.domain import Aggregate
from dpcore.points.release import PartitionRelease

__all__ = ["cell_errors", "empirical_errors"]


def empirical_errors(
    release: PartitionRelease,
    aggregate: Aggregate,
    *,
    sizes: tuple[float, ...] = (0.02, 0.06, 0.10),
    n_per_size: int = 500,
    shape: str = "random",
    smoothing: float = metrics.DEFAULT_SMOOTHING,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Curator-only: error of the release against the truth on random range queries.

    NOT FOR PUBLICATION — computed from the true counts.
    """
    qs, tags = queries.random_rectangles(aggregate.grid, sizes, n_per_size, shape=shape, seed=seed)
    true = queries.true_answers(aggregate.counts, qs)
    est = release.answer(qs)
    rows = []
    for s in sizes:
        m = tags == s
        rows.append({
            "query_size": s,
            "n_queries": int(m.sum()),
            **metrics.summary(true[m], est[m], smoothing),
            "expected_noise_sd": release.expected_query_sd(s),
        })
    rows.append({
        "query_size": "all",
        "n_queries": int(len(qs)),
        **metrics.summary(true, est, smoothing),
        "expected_noise_sd": float("nan"),
    })
    return rows


def cell_errors(release: PartitionRelease, aggregate: Aggregate) -> dict[str, float]:
    """Curator-only: error per fine cell of the density estimate. NOT FOR PUBLICATION."""
    d = release.density()
    t = aggregate.counts.astype(np.float64)
    return {"mae": metrics.mae(t, d), "rmse": metrics.rmse(t, d), "max_abs_error": metrics.max_abs(t, d)}
