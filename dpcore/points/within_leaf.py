"""Data-free priors for how a leaf's released count lies within the leaf (issue 27, item 3).

A :class:`~dpcore.points.release.PartitionRelease` answers a query that cuts a leaf by a rule for
the leaf's count inside it.  ``"uniform"`` (every mechanism's default) spreads it evenly over the
leaf's cells.  ``"piecewise_linear"`` (``ag_pool_smooth``) lets the density slope towards the
neighbouring leaves: the even spread ``D`` is box-filtered over a window centred on each cell of
``2·(h // 2) + 1`` rows × ``2·(w // 2) + 1`` columns, where ``h × w`` is the cell's own leaf (the leaf's
height and width when they are odd, one more cell when even; clipped at the grid's edges; on a
regular tiling of equal leaves, close to the bilinear "tent" interpolation of the leaves' densities
between their centres), clamped at 0, and rescaled inside every leaf so that the
leaf keeps exactly its released count; a leaf whose filtered density sums to 0, or whose released
count is not positive, keeps its even spread.  The idea of answering from a smoothed fine
estimate rather than from flat leaves is SNH's (Zeighami, Ahuja, Ghinita & Shahabi, PVLDB 2022,
Sec. 3), here reduced to a fixed, data-free filter.

Both rules read only the leaves' rectangles and released counts: post-processing (Dwork & Roth,
2014, Prop. 2.1), with no privacy cost.  Every leaf's sum is unchanged, so the release's tables,
exports and intervals (one row per leaf) are the same under either rule; only answers of queries
that cut leaves and the fine density differ.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from dpcore.data.domain import paint_rects, prefix_sums
from dpcore.errors import ParameterError

__all__ = ["PIECEWISE_LINEAR", "RULES", "leaf_labels", "piecewise_linear", "within_leaf_density"]

#: The within-leaf rules a release may state (``PartitionRelease.within_leaf``).
RULES = ("uniform", "piecewise_linear")
#: The name of :func:`piecewise_linear`'s rule, as the mechanisms that use it state it.
PIECEWISE_LINEAR = RULES[1]


def leaf_labels(rects: NDArray[np.int64], shape: tuple[int, int]) -> NDArray[np.int64]:
    """Grid of the position (in ``rects``, a tiling of the grid) of the leaf each cell lies in.

    >>> leaf_labels(np.array([[0, 2, 0, 1], [0, 2, 1, 3]]), (2, 3)).tolist()
    [[0, 1, 1], [0, 1, 1]]
    """
    r = np.asarray(rects, dtype=np.int64).reshape(-1, 4)
    return np.rint(paint_rects(r, np.arange(len(r), dtype=np.float64), shape)).astype(np.int64)


def _box_mean(dens: NDArray[np.float64], half_r: NDArray[np.integer], half_c: NDArray[np.integer]) -> NDArray[np.float64]:
    """Mean of ``dens`` over the window ``±half_r`` rows × ``±half_c`` columns of every cell (clipped
    at the grid's edges), from one summed-area table; grid-sized indices are int32 and clipped in
    place (a 2,048² grid's four index grids: 64 MB, not 128 MB plus temporaries)."""
    rows, cols = dens.shape
    P = prefix_sums(dens)
    half_r = np.asarray(half_r, dtype=np.int32)
    half_c = np.asarray(half_c, dtype=np.int32)
    ri = np.arange(rows, dtype=np.int32)[:, None]
    ci = np.arange(cols, dtype=np.int32)[None, :]
    r0 = np.subtract(ri, half_r, dtype=np.int32)
    np.clip(r0, 0, rows, out=r0)
    r1 = np.add(ri, half_r, dtype=np.int32)
    r1 += 1
    np.clip(r1, 0, rows, out=r1)
    c0 = np.subtract(ci, half_c, dtype=np.int32)
    np.clip(c0, 0, cols, out=c0)
    c1 = np.add(ci, half_c, dtype=np.int32)
    c1 += 1
    np.clip(c1, 0, cols, out=c1)
    s = P[r1, c1]
    s -= P[r0, c1]
    s -= P[r1, c0]
    s += P[r0, c0]
    r1 -= r0
    c1 -= c0
    s /= np.multiply(r1, c1, dtype=np.float64)  # exact: below 2^53
    return s


def piecewise_linear(rects: NDArray[np.int64], counts: NDArray[np.float64],
                     shape: tuple[int, int]) -> NDArray[np.float64]:
    """Fine density of the leaves ``rects`` (a tiling) with released ``counts`` under the
    piecewise-linear prior (module docstring): non-negative where the count is, and every leaf's
    cells sum to its count.

    >>> d = piecewise_linear(np.array([[0, 4, 0, 2], [0, 4, 2, 4]]), np.array([0.0, 8.0]), (4, 4))
    >>> d.sum(axis=0).round(6).tolist()   # the empty half's mass stays 0; the other slopes up
    [0.0, 0.0, 3.2, 4.8]
    """
    r = np.asarray(rects, dtype=np.int64).reshape(-1, 4)
    counts = np.asarray(counts, dtype=np.float64)
    lab = leaf_labels(r, shape)
    h, w = r[:, 1] - r[:, 0], r[:, 3] - r[:, 2]
    flat = (counts / (h * w))[lab]
    tent = _box_mean(flat, (h // 2).astype(np.int32)[lab], (w // 2).astype(np.int32)[lab])
    np.maximum(tent, 0.0, out=tent)
    s = np.bincount(lab.ravel(), tent.ravel(), minlength=len(r))
    ok = (s > 1e-12) & (counts > 0)
    scale = np.divide(counts, s, out=np.zeros(len(r)), where=ok)
    return np.where(ok[lab], tent * scale[lab], flat)


def within_leaf_density(rule: str, rects: NDArray[np.int64], counts: NDArray[np.float64],
                        shape: tuple[int, int]) -> NDArray[np.float64]:
    """Fine density of the leaves under a non-uniform ``rule`` of :data:`RULES` (the ``"uniform"``
    rule is the leaves' even spread, :meth:`~dpcore.points.release.PartitionRelease.spread`).

    >>> within_leaf_density("piecewise_linear", np.array([[0, 1, 0, 2]]), np.array([4.0]), (1, 2)).tolist()
    [[2.0, 2.0]]
    """
    if rule != "piecewise_linear":
        raise ParameterError(f"No fine-density filter for the within-leaf rule {rule!r}; the filtered rule is "
                             "'piecewise_linear' ('uniform' is the leaves' even spread, PartitionRelease.spread).")
    return piecewise_linear(rects, counts, shape)
