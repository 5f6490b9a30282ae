"""Range-query workloads on the public grid, and answering them.

Workloads are random rectangles of given area fractions (the HTF paper's 2 %,
6 % and 10 % of the domain, Shaham et al. 2021, Sec. 5.1).  Their positions are drawn from
a seeded generator that never sees the data: they are public evaluation
queries, not part of any release, so numpy's PRNG is fine here (noise for
releases comes only from :mod:`dpcore.privacy.noise`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from dpcore.data.domain import Grid, rect_sums
from dpcore.errors import ParameterError


def random_rectangles(
    grid: Grid,
    sizes: Sequence[float] = (0.02, 0.06, 0.10),
    n_per_size: int = 2000,
    *,
    shape: str = "square",
    seed: int = 0,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Random rectangles ``(r0, r1, c0, c1)`` and the size each was drawn for.

    ``shape="square"``: side ``sqrt(s)`` of each axis (a square in cells).
    ``shape="random"``: aspect ratio log-uniform in [1/4, 4] (ours; the paper's sizes, Shaham et al. 2021, Sec. 5.1).
    The position is uniform among the positions where the query fits.
    """
    if shape not in ("square", "random"):
        raise ParameterError(f"Query shape must be 'square' or 'random' (got {shape!r}).")
    rng = np.random.default_rng(seed)
    out = []
    tags = []
    for s in sizes:
        s = float(s)
        if not 0 < s <= 1:
            raise ParameterError(f"Query size {s} must be a fraction of the domain in (0, 1], e.g. 0.02.")
        if shape == "square":
            aspect = np.ones(n_per_size)
        else:
            aspect = np.exp(rng.uniform(math.log(0.25), math.log(4.0), n_per_size))
        h = np.clip(np.round(np.sqrt(s * aspect) * grid.rows), 1, grid.rows).astype(np.int64)
        w = np.clip(np.round(np.sqrt(s / aspect) * grid.cols), 1, grid.cols).astype(np.int64)
        r0 = (rng.random(n_per_size) * (grid.rows - h + 1)).astype(np.int64)
        c0 = (rng.random(n_per_size) * (grid.cols - w + 1)).astype(np.int64)
        out.append(np.column_stack([r0, r0 + h, c0, c0 + w]))
        tags.append(np.full(n_per_size, s))
    return np.vstack(out), np.concatenate(tags)


def true_answers(counts: NDArray[np.integer], queries: NDArray[np.int64]) -> NDArray[np.int64]:
    """Exact answers from the confidential frequency matrix (curator-only)."""
    return rect_sums(counts, queries)


def random_cell_rectangles(n1: int, n2: int, sizes: list[tuple[int, int]], count_per_size: int,
                           seed: int = 0) -> NDArray[np.int64]:
    """``count_per_size`` uniformly placed rectangles of every ``(height, width)`` in cell units on
    an ``n1 × n2`` grid: rows ``[r0, r1, c0, c1)`` (half-open).  A public workload, so a seeded
    numpy generator is fine; the caller checks that the sizes fit."""
    rng = np.random.default_rng(seed)
    out = []
    for h, w in sizes:
        r0 = rng.integers(0, n1 - h + 1, size=count_per_size)
        c0 = rng.integers(0, n2 - w + 1, size=count_per_size)
        out.append(np.stack([r0, r0 + h, c0, c0 + w], axis=1))
    return np.concatenate(out).astype(np.int64)
