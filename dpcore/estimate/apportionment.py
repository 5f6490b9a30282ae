"""The apportionment error of a polygon's cut cells, as a variance (issue 25 item 3).

A polygon's estimate weighs a cut cell ``i`` by the share ``w_i`` of it inside the polygon (its
area share, or its share of a public density): the points of the cell are assumed spread like
the share.  They are not: the true number inside is ``y_i``, not ``w_i·x_i``.  Two models of
that error, both conditional on the cell's count ``x_i``:

* **binomial**: each point of the cell falls inside independently with probability ``w_i``, so
  ``y_i ~ Binomial(x_i, w_i)`` and ``Var(y_i − w_i x_i) = x_i w_i (1 − w_i)``;
* **overdispersed** (beta-binomial): points cluster (along streets, at entrances), so two points
  of one cell fall on the same side more often than independent points would: with the
  intra-cell correlation ``ρ`` (Skellam, J. R. Stat. Soc. B 10, 1948, §2; the design effect
  ``1 + (x − 1)ρ`` of cluster sampling, Kish, *Survey Sampling*, 1965, §5.4)
  ``Var = x_i w_i (1 − w_i) (1 + (x_i − 1) ρ)``: ``ρ = 0`` is the binomial, ``ρ = 1`` all the
  cell's points at one spot.

Cut cells are taken as independent, and ``x_i`` is replaced by the GLS estimate clipped at 0.

``ρ`` from the release alone (:func:`overdispersion`): the release measures the finest cells and
the smallest groups of them (a quadtree's parents of its leaves, 2×2 cells).  How unevenly a
group's count is spread over its cells, against their area shares, is the same kind of
apportionment one level up, and the Dirichlet-multinomial moment estimator (Mosimann,
Biometrika 49, 1962, §3) gives its ``ρ``.  With the raw (independent, exact-variance) cell
measurements ``y_k`` of group ``p``, area shares ``a_k``, ``Y = Σ_k y_k``, ``V = Σ_k σ_k²``,
``g = 1 − Σ_k a_k²`` and true count ``n``:

.. math:: E\\,Σ_k (y_k − a_k Y)^2 = g\\,n\\,(1 + (n − 1)ρ) + N,\\quad
          N = Σ_k σ_k^2 (1 − 2a_k) + V Σ_k a_k^2,\\quad E[Y^2 − Y − V] = n(n − 1),

so ``ρ̂ = Σ_p (T_p − N_p − g_p Y_p) / Σ_p g_p (Y_p² − Y_p − V_p)`` (ratio of unbiased sums),
clipped to ``[0, 1]``.  Nothing here reads data: the measurements are published.  The assumption
(stated with every answer): a finest cell's points are spread over it as unevenly as its group's
points over its cells, and a polygon's edge splits a cell like a group is split.  It is an
assumption a release cannot check: on the NYC pickups (benchmarks/results/interval_coverage_polygons.md)
the true ρ one level finer is about 1.5 times the release's (points cluster more at finer scales),
and the 90 % interval covers the pickups inside drawn polygons about 86 % of the time, against 20 %
for the noise alone and 31 % for the binomial.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from dpcore.estimate.gls import Measurements

__all__ = ["APPORTIONMENTS", "apportionment_variance", "overdispersion"]

#: The apportionment models of a polygon's interval: the default first.
APPORTIONMENTS = ("overdispersed", "binomial", "none")


def apportionment_variance(counts: NDArray[np.float64], share: NDArray[np.float64], rho: float = 0.0) -> float:
    """``Σ_i x_i w_i (1 − w_i) (1 + (x_i − 1) ρ)`` over cut cells (counts clipped at 0, ``x − 1`` too).

    >>> apportionment_variance(np.array([10.0, 4.0]), np.array([0.5, 0.25]))  # binomial
    3.25
    >>> apportionment_variance(np.array([10.0, -2.0]), np.array([0.5, 0.5]), rho=1.0)  # all at one spot
    25.0
    """
    x = np.maximum(np.asarray(counts, dtype=np.float64), 0.0)
    w = np.clip(np.asarray(share, dtype=np.float64), 0.0, 1.0)
    return float(np.sum(x * w * (1.0 - w) * (1.0 + np.maximum(x - 1.0, 0.0) * rho)))


def _cell_measurements(m: Measurements) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Each cell's own measurement (inverse-variance mean where measured more than once) and its
    variance (``inf`` where the cell has no measurement of its own)."""
    A = m.A.tocsr()
    one = np.flatnonzero(np.diff(A.indptr) == 1)
    cols = A.indices[A.indptr[one]]
    prec = np.bincount(cols, weights=1.0 / m.var[one], minlength=m.n)
    ysum = np.bincount(cols, weights=np.asarray(m.y, dtype=np.float64)[one] / m.var[one], minlength=m.n)
    safe = np.where(prec > 0, prec, 1.0)
    return np.where(prec > 0, ysum / safe, 0.0), np.where(prec > 0, 1.0 / safe, np.inf)


def _finest_groups(m: Measurements) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(group, cell)`` pairs of the smallest measured groups of cells: a row of ``A`` over two or
    more cells that holds no smaller such row (for each of its cells, no row over two or more cells
    is smaller).  Linear in the non-zeros of ``A``: no sort."""
    csr = m.A.tocsr()
    size = np.diff(csr.indptr)
    csc = csr.tocsc()
    rows_of = csc.indices  # the rows holding each column, column by column
    big = np.where(size[rows_of] >= 2, size[rows_of].astype(np.int64), np.iinfo(np.int64).max)
    smallest = np.minimum.reduceat(big, csc.indptr[:-1])  # every cell is in some row (Measurements checks)
    row = np.repeat(np.arange(size.size, dtype=np.int64), size)
    col = csr.indices.astype(np.int64)
    multi = size[row] >= 2
    row, col = row[multi], col[multi]
    bad = np.zeros(size.size, dtype=bool)
    bad[row[smallest[col] < size[row]]] = True
    keep = ~bad[row]
    return row[keep], col[keep]


def overdispersion(m: Measurements, areas: NDArray[np.float64]) -> float | None:
    """The intra-cell correlation ``ρ`` of the beta-binomial apportionment model, estimated from the
    release's finest split (module docstring); ``None`` when the release measures no group of cells
    whose cells are each measured (a flat grid: nothing to estimate it from).

    ``areas``: each finest cell's area (:class:`~dpcore.estimate.polygon_interval.CellIndex`'s ``area``).

    >>> import scipy.sparse as sp
    >>> A = sp.csr_matrix(np.vstack([np.eye(4), np.ones((1, 4))]))  # four cells and their group
    >>> m = Measurements(A, np.array([100.0, 0, 0, 0, 100]), np.full(5, 1e-9), list("abcd"))
    >>> round(overdispersion(m, np.ones(4)), 6)  # all the group's points in one cell
    1.0
    >>> m = Measurements(A, np.array([25.0, 25, 25, 25, 100]), np.full(5, 1e-9), list("abcd"))
    >>> overdispersion(m, np.ones(4))  # spread exactly evenly: less than binomial, clipped
    0.0
    """
    r, c = _finest_groups(m)
    y, s2 = _cell_measurements(m)
    area = np.asarray(areas, dtype=np.float64)
    ok = np.isfinite(s2[c])
    groups, inv = np.unique(r, return_inverse=True)
    k = groups.size
    if k == 0:
        return None
    whole = np.bincount(inv, weights=ok.astype(float), minlength=k) == np.bincount(inv, minlength=k)
    tot_area = np.bincount(inv, weights=area[c], minlength=k)
    use = (whole & (tot_area > 0))[inv]
    if not np.any(use):
        return None
    inv, c = inv[use], c[use]
    a = area[c] / tot_area[inv]
    Y = np.bincount(inv, weights=y[c], minlength=k)
    V = np.bincount(inv, weights=s2[c], minlength=k)
    g = 1.0 - np.bincount(inv, weights=a * a, minlength=k)
    T = np.bincount(inv, weights=(y[c] - a * Y[inv]) ** 2, minlength=k)
    N = np.bincount(inv, weights=s2[c] * (1.0 - 2.0 * a), minlength=k) + V * (1.0 - g)
    on = np.bincount(inv, minlength=k) > 0  # the groups used
    den = float(np.sum((g * (Y * Y - Y - V))[on]))
    if not den > 0:
        return None
    return float(np.clip(np.sum((T - N - g * Y)[on]) / den, 0.0, 1.0))
