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

__all__ = ["QueryTruth", "cell_errors", "empirical_errors", "query_truth"]


#: The curator's range queries and their true answers: ``(queries, size tags, true answers)``.
QueryTruth = tuple[np.ndarray, np.ndarray, np.ndarray]


def query_truth(
    aggregate: Aggregate,
    *,
    sizes: tuple[float, ...] = (0.02, 0.06, 0.10),
    n_per_size: int = 500,
    shape: str = "random",
    seed: int = 0,
) -> QueryTruth:
    """Curator-only: the random range queries of :func:`empirical_errors` (data-free, seeded) and their
    TRUE answers.  NOT FOR PUBLICATION.  The same for every release of the same counts, so a caller
    may make it once per aggregate (the prefix sums of a 4,096² grid are most of the errors' time).

    >>> from dpcore.data.domain import Bounds, Grid
    >>> agg = Aggregate(Grid(Bounds(0, 0, 1, 1), 8, 8), np.ones((8, 8), dtype=np.int64), 0, 0, 1, None)
    >>> qs, tags, true = query_truth(agg, sizes=(0.25,), n_per_size=3)
    >>> qs.shape, tags.tolist(), bool((true == (qs[:, 1] - qs[:, 0]) * (qs[:, 3] - qs[:, 2])).all())
    ((3, 4), [0.25, 0.25, 0.25], True)
    """
    qs, tags = queries.random_rectangles(aggregate.grid, sizes, n_per_size, shape=shape, seed=seed)
    return qs, tags, queries.true_answers(aggregate.counts, qs)


def empirical_errors(
    release: PartitionRelease,
    aggregate: Aggregate,
    *,
    sizes: tuple[float, ...] | None = None,
    n_per_size: int | None = None,
    shape: str = "random",
    smoothing: float = metrics.DEFAULT_SMOOTHING,
    seed: int = 0,
    truth: QueryTruth | None = None,
) -> list[dict[str, Any]]:
    """Curator-only: error of the release against the truth on random range queries.

    NOT FOR PUBLICATION — computed from the true counts.  Without ``truth`` the queries are
    :func:`query_truth`'s of ``sizes`` (default 2%, 6% and 10% of the area), ``n_per_size``
    (default 500), ``shape`` and ``seed``.  ``truth``: a :func:`query_truth` of ``aggregate`` made
    before; its queries, size tags and answers are used as they are (``shape`` and ``seed`` are then
    unused); ``sizes``, if given, must be the sizes it holds (they set the rows' order), and
    ``n_per_size``, if given, the number of queries it holds of each size.
    """
    if truth is None:  # made here: nothing to check it against
        sizes = (0.02, 0.06, 0.10) if sizes is None else sizes
        truth = query_truth(aggregate, sizes=sizes, n_per_size=500 if n_per_size is None else n_per_size,
                            shape=shape, seed=seed)
        n_per_size = None
    qs, tags, true = truth
    tagged, per_size = np.unique(tags, return_counts=True)
    held = tuple(tagged.tolist())
    if sizes is None:
        sizes = held
    elif set(sizes) != set(held):
        raise ValueError(f"truth holds queries of sizes {list(held)}, not {list(sizes)}: make it with "
                         "query_truth(...) of the same sizes, or leave sizes out")
    if n_per_size is not None and (per_size != n_per_size).any():
        counts = " or ".join(map(str, sorted(set(per_size.tolist()))))
        raise ValueError(f"truth holds {counts} queries of each size, not n_per_size={n_per_size}: make it "
                         f"with query_truth(..., n_per_size={n_per_size}), or leave n_per_size out")
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
