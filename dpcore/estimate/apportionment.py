"""The apportionment error of a polygon's cut cells, as a variance (issue 25 item 3).

A polygon's estimate weighs a cut cell ``i`` by the share ``w_i`` of it inside the polygon (its
area share, or its share of a public density): the points of the cell are assumed spread like
the share.  They are not: the true number inside is ``y_i``, not ``w_i·x_i``.  Two models of
that error, both conditional on the cell's count ``x_i``:

* **binomial**: each point of the cell falls inside independently with probability ``w_i``, so
  ``y_i ~ Binomial(x_i, w_i)`` and ``Var(y_i − w_i x_i) = x_i w_i (1 − w_i)``;
* **overdispersed** (beta-binomial, below with the pieces' shapes and neighbours): points cluster (along streets, at entrances), so two points
  of one cell fall on the same side more often than independent points would: with the
  intra-cell correlation ``ρ`` (Skellam, J. R. Stat. Soc. B 10, 1948, §2; the design effect
  ``1 + (x − 1)ρ`` of cluster sampling, Kish, *Survey Sampling*, 1965, §5.4)
  ``Var = x_i w_i (1 − w_i) (1 + (x_i − 1) ρ)``: ``ρ = 0`` is the binomial, ``ρ = 1`` all the
  cell's points at one spot.

``x_i`` is replaced by the GLS estimate clipped at 0.

``ρ`` at one split, from the release alone (:func:`overdispersion`): the release measures the
finest cells and groups of them (a quadtree's parents of its leaves, 2×2 cells).  How unevenly a
group's count is spread over its parts, against their area shares, is the same kind of
apportionment one level up, and the Dirichlet-multinomial moment estimator (Mosimann,
Biometrika 49, 1962, §3) gives its ``ρ``.  With the raw (independent, exact-variance) measurements
``y_k`` of the parts of group ``p``, area shares ``a_k``, ``Y = Σ_k y_k``, ``V = Σ_k σ_k²``,
``g = 1 − Σ_k a_k²`` and true count ``n``:

.. math:: E\\,Σ_k (y_k − a_k Y)^2 = g\\,n\\,(1 + (n − 1)ρ) + N,\\quad
          N = Σ_k σ_k^2 (1 − 2a_k) + V Σ_k a_k^2,\\quad E[Y^2 − Y − V] = n(n − 1),

so ``ρ̂ = Σ_p (T_p − N_p − g_p Y_p) / Σ_p g_p (Y_p² − Y_p − V_p)`` (ratio of unbiased sums),
clipped to ``[0, 1]``.  Nothing here reads data: the measurements are published.

**The ρ inside a cell** (the default, :func:`subcell_overdispersion`).  A cut cell needs the ρ of
its *own* points, one level below anything released, and points cluster more finely than cells
show (on the NYC pickups the true ρ of a cell's quarters is about 1.5 times the finest released
split's; with that split's ρ the 90 % interval covered 86 %).  Two steps, both from the release:

1. *A scaling law.*  ``ρ̂`` is read at the release's three finest splits (:func:`overdispersion_levels`:
   the parts of side ``s``, ``2s``, ``4s``): Greig-Smith's blocked-quadrat analysis
   (Annals of Botany 16, 1952: the variance of counts in contiguous blocks of doubling size)
   in Dirichlet-multinomial form.  A clustered pattern whose pair correlation is a power,
   ``g(r) − 1 ∝ r^−α`` (a self-similar pattern: its correlation integral scales as a power,
   Grassberger & Procaccia, Physica D 9, 1983: the correlation integral ``C(r) ∝ r^ν``), has ``ρ(s) ∝ s^−α`` at every split of the same
   shape.  The least-squares line of ``log ρ̂`` on ``log s`` gives ``α`` (clipped to
   ``[0, MAX_EXPONENT]``), and ``ρ`` of a cell's quarters is ``ρ̂₁·2^α``, anchored at the finest,
   best-measured split.
2. *The pieces' shapes, and neighbours.*  Under second-order intensity-reweighted stationarity
   (Baddeley, Møller & Waagepetersen, Statistica Neerlandica 54, 2000, §2: the pair intensity
   ``λ(u)λ(v)g(u − v)``), with ``λ`` the cells' counts over their areas, the covariance of the
   errors of two cut pieces ``A ⊂ C`` and ``B ⊂ D`` given the cells' counts is, from the second
   moment of counts in regions (Illian, Penttinen, Stoyan & Stoyan, *Statistical Analysis and
   Modelling of Spatial Point Patterns*, 2008, pp. 223–243, the second-order characteristics),
   ``x_C x_D κ ∫_C∫_D f_A(u) f_B(v) |u − v|^−α du dv / (|C||D|)``, ``f_A = 1_A − w_A`` on ``C``
   (the binomial term added on the diagonal).  ``κ`` is fixed by step 1: a cell's quarters have
   ``ρ = ρ_sub``.  So a piece's own ``ρ`` is ``ρ_sub·G(A)/G(quarters)`` (:func:`shape_factors`: a
   straight half of a cell varies more than a quarter, a sliver less).  The integrals are read on
   a ``SUBGRID × SUBGRID`` grid of each cut cell, with the exact mean of ``r^−α`` between two
   sub-cells (:func:`kernel_table`).  Cut cells are taken as independent (the default): the same
   model also correlates cut cells up to ``REACH`` cells apart (:func:`piece_covariance`,
   :func:`correlated_variance`: an edge cuts neighbouring cells alike), but on held-out pickups that
   over-covered (91.5–93 % for a 90 % interval, against 89.8–90.5 % without), probably because the power law through
   three splits makes ``r^−α`` too long-ranged at the scale of a cell (ρ̂ falls by half from the
   finest split to the next, then flattens), which the neighbours' terms feel and a cell's own
   quarters hardly do.  It is offered (``polygon_interval(..., neighbours=True)``), not the default.

The assumptions (stated with every answer, ``rho_how``): the clustering inside a cell follows the
power law of the release's splits, and is the same everywhere up to the local count; and the cut
cells' errors are independent, which fails where the points sit on a coarse lattice of rounded
coordinates (an edge then splits the lattice alike in consecutive cells: the errors add up; the
``precision`` of :func:`~dpcore.estimate.polygon_interval.polygon_interval` weighs cut cells by
their share of the lattice instead, module docstring there).  A release
cannot check them; they were checked on held-out point sets only (other days of the pickups,
benchmarks/results/interval_coverage_polygons.md) before the reported run.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcore.estimate.gls import Measurements

__all__ = ["APPORTIONMENTS", "SubcellRho", "apportionment_variance", "correlated_variance", "overdispersion",
           "piece_covariance", "overdispersion_levels",
           "shape_factors", "subcell_overdispersion"]

#: The apportionment models of a polygon's interval: the default first.
APPORTIONMENTS = ("overdispersed", "binomial", "none")


def apportionment_variance(counts: NDArray[np.float64], share: NDArray[np.float64],
                           rho: float | NDArray[np.float64] = 0.0) -> float:
    """``Σ_i x_i w_i (1 − w_i) (1 + (x_i − 1) ρ_i)`` over cut cells (counts clipped at 0, ``x − 1`` too);
    ``rho``: one for all, or one per cut cell.

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


def correlated_variance(counts: NDArray[np.float64], share: NDArray[np.float64], rho: float,
                        inside: NDArray[np.float64] | None, cell_xy: NDArray[np.int64] | None, alpha: float,
                        pieces: tuple[NDArray[Any], ...] | None = None) -> float:
    """The cut cells' apportionment variance with each piece's ``ρ`` scaled by its shape and the
    pieces of neighbouring cells correlated (:func:`piece_covariance`; module docstring):
    ``Σ x_i w_i(1 − w_i) + Σ_i x_i(x_i − 1) min(ρ·d_i, w_i(1 − w_i)) + 2ρ Σ_{a<b} x_a x_b c_ab``
    (``d_i``: the shape factor times ``w_i(1 − w_i)``; the correlated part at least 0).  ``pieces``:
    ``(shape_factors, *piece_covariance[1:])`` of ``inside`` when already computed (many releases).

    >>> k = SUBGRID
    >>> left = (np.arange(k * k) // k < k // 2).astype(float)
    >>> one = correlated_variance(np.array([50.0]), np.array([0.5]), 0.2, left[None, :], None, 0.6)
    >>> two = correlated_variance(np.array([50.0, 50]), np.array([0.5, 0.5]), 0.2, np.stack([left, left]),
    ...                           np.array([[0, 0], [0, 1]]), 0.6)
    >>> two > 2 * one  # the two pieces err together
    True
    """
    x = np.maximum(np.asarray(counts, dtype=np.float64), 0.0)
    w = np.clip(np.asarray(share, dtype=np.float64), 0.0, 1.0)
    g = w * (1.0 - w)
    if pieces is None:
        assert inside is not None
        pieces = _pieces(inside, cell_xy, alpha)  # the shape factors read once
    factor, a, b, c = pieces
    pair = np.sum(x * np.maximum(x - 1.0, 0.0) * np.minimum(rho * factor * g, g)) + 2.0 * rho * np.sum(x[a] * x[b] * c)
    return float(np.sum(x * g) + max(float(pair), 0.0))


def _level_groups(m: Measurements, depth: int) -> list[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """``(group, cell)`` pairs of the measured groups of cells at each of the ``depth`` finest levels: at
    level 1 a row of ``A`` over two or more cells that holds no smaller such row; at level ``k`` the
    smallest rows strictly larger than each cell's level-``k − 1`` group.  One row per group (a group
    measured twice counts once).  Linear in the non-zeros of ``A`` per level: no sort."""
    csr = m.A.tocsr()
    size = np.diff(csr.indptr).astype(np.int64)
    csc = csr.tocsc()
    rows_of = csc.indices  # the rows holding each column, column by column
    col_of = np.repeat(np.arange(m.n, dtype=np.int64), np.diff(csc.indptr))
    row = np.repeat(np.arange(size.size, dtype=np.int64), size)
    col = csr.indices.astype(np.int64)
    prev, out = np.ones(m.n, dtype=np.int64), []
    top = np.iinfo(np.int64).max
    for _ in range(depth):
        big = np.where(size[rows_of] > prev[col_of], size[rows_of], top)
        smallest = np.minimum.reduceat(big, csc.indptr[:-1])  # every cell is in some row (Measurements checks)
        bad = np.zeros(size.size, dtype=bool)
        bad[row[(smallest[col] != size[row]) | (size[row] < 2)]] = True
        keep = ~bad[row]
        r, c = row[keep], col[keep]
        if r.size == 0:
            break
        first = np.full(size.size, m.n, dtype=np.int64)  # one row per group: keyed by its first cell
        np.minimum.at(first, r, c)
        owner = np.full(m.n, -1, dtype=np.int64)
        owner[first[r]] = r  # the kept rows of one cell set share their first cell: the last one wins
        one = owner[first[r]] == r
        out.append((r[one], c[one]))
        prev = np.where(smallest < top, smallest, prev)
    return out


def _dm_rho(inv: NDArray[np.int64], y: NDArray[np.float64], s2: NDArray[np.float64], area: NDArray[np.float64],
            k: int) -> float | None:
    """The Dirichlet-multinomial moment ``ρ̂`` (module docstring) of ``k`` groups, unit ``j`` in group
    ``inv[j]`` with measurement ``y[j]``, its variance ``s2[j]`` and area ``area[j]``; clipped to ``[0, 1]``."""
    tot_area = np.bincount(inv, weights=area, minlength=k)
    use = (tot_area > 0)[inv]
    inv, y, s2, area = inv[use], y[use], s2[use], area[use]
    if inv.size == 0:
        return None
    a = area / tot_area[inv]
    Y = np.bincount(inv, weights=y, minlength=k)
    V = np.bincount(inv, weights=s2, minlength=k)
    g = 1.0 - np.bincount(inv, weights=a * a, minlength=k)
    T = np.bincount(inv, weights=(y - a * Y[inv]) ** 2, minlength=k)
    N = np.bincount(inv, weights=s2 * (1.0 - 2.0 * a), minlength=k) + V * (1.0 - g)
    on = np.bincount(inv, minlength=k) > 0  # the groups used
    den = float(np.sum((g * (Y * Y - Y - V))[on]))
    if not den > 0:
        return None
    return float(np.clip(np.sum((T - N - g * Y)[on]) / den, 0.0, 1.0))


def overdispersion_levels(m: Measurements, areas: NDArray[np.float64], depth: int = 3
                          ) -> list[tuple[float, float]]:
    """``(ρ̂, side)`` of the release's ``depth`` finest splits, finest first: the over-dispersion of how
    each measured group splits into its parts (cells at the finest split, the finest groups one level
    up, ...; module docstring), and ``side``, the square root of the parts' mean area.  Stops at the
    first level with nothing to estimate from (a flat grid: an empty list).

    A part is the sum of its cells' own measurements (independent, their variances add); a group
    with a part whose cells are not all measured is left out.

    >>> import scipy.sparse as sp
    >>> A = sp.csr_matrix(np.vstack([np.eye(4), np.ones((1, 4))]))  # four cells and their group
    >>> m = Measurements(A, np.array([100.0, 0, 0, 0, 100]), np.full(5, 1e-9), list("abcd"))
    >>> [(round(r, 6), s) for r, s in overdispersion_levels(m, np.ones(4))]  # one split: all in one cell
    [(1.0, 1.0)]
    """
    y, s2 = _cell_measurements(m)
    area = np.asarray(areas, dtype=np.float64)
    unit_of = np.arange(m.n, dtype=np.int64)  # each cell's part at the level being read (first: itself)
    out: list[tuple[float, float]] = []
    for r, c in _level_groups(m, depth):
        units, u = np.unique(unit_of[c], return_inverse=True)
        uy = np.bincount(unit_of, weights=y, minlength=m.n)[units]
        us2 = np.bincount(unit_of, weights=np.where(np.isfinite(s2), s2, 0.0), minlength=m.n)[units]
        whole = np.bincount(unit_of, weights=np.isfinite(s2).astype(float), minlength=m.n)[units] == \
            np.bincount(unit_of, minlength=m.n)[units]
        uarea = np.bincount(unit_of, weights=area, minlength=m.n)[units]
        pairs = np.unique(np.column_stack([r, units[u]]), axis=0)  # (group, part) once each
        groups, inv = np.unique(pairs[:, 0], return_inverse=True)
        j = np.searchsorted(units, pairs[:, 1])
        ok_group = np.bincount(inv, weights=whole[j].astype(float), minlength=groups.size) == \
            np.bincount(inv, minlength=groups.size)
        keep = ok_group[inv]
        rho = _dm_rho(inv[keep], uy[j][keep], us2[j][keep], uarea[j][keep], groups.size)
        if rho is None:
            break
        out.append((rho, float(np.sqrt(np.mean(uarea[j][keep])))))
        unit_of = np.arange(m.n, dtype=np.int64)
        unit_of[c] = -1 - r  # the next level's parts: this level's groups (cells outside any stay alone)
        unit_of = np.unique(unit_of, return_inverse=True)[1].astype(np.int64)
    return out


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
    levels = overdispersion_levels(m, areas, depth=1)
    return levels[0][0] if levels else None


@dataclass(frozen=True)
class SubcellRho:
    """The over-dispersion of a cell's own points, extrapolated from the release's splits (module docstring).

    ``rho``: ``ρ`` of the split of a finest cell into its quarters; ``exponent``: ``α`` of the power law
    ``ρ ∝ side^−α`` fitted to ``levels`` (``(ρ̂, side)`` of the release's splits, finest first), also the
    exponent of the pair-correlation kernel that scales each cut piece (``None``: one split only, no
    extrapolation and no shape factor); ``how``: a sentence for the answer.
    """

    rho: float
    exponent: float | None
    levels: tuple[tuple[float, float], ...]
    how: str


def subcell_overdispersion(m: Measurements, areas: NDArray[np.float64], depth: int = 3) -> SubcellRho | None:
    """:class:`SubcellRho` of the release: ``ρ̂`` at its ``depth`` finest splits
    (:func:`overdispersion_levels`), the power law through them (least squares of ``log ρ̂`` on
    ``log side``; ``α`` clipped to ``[0, MAX_EXPONENT]``), and ``ρ`` one level below the finest,
    ``ρ̂₁·2^α`` (anchored at the best-measured split), at most 1.  ``None`` when the release has no split.

    >>> import scipy.sparse as sp
    >>> A = sp.csr_matrix(np.vstack([np.eye(4), np.ones((1, 4))]))
    >>> m = Measurements(A, np.array([100.0, 0, 0, 0, 100]), np.full(5, 1e-9), list("abcd"))
    >>> s = subcell_overdispersion(m, np.ones(4))
    >>> round(s.rho, 6), s.exponent  # one split: its ρ̂ as it is
    (1.0, None)
    """
    levels = overdispersion_levels(m, areas, depth)
    if not levels:
        return None
    rho1, side1 = levels[0]
    fit = [(r, s) for r, s in levels if r > 0 and s > 0]
    if len(fit) < 2 or rho1 <= 0:
        return SubcellRho(rho1, None, tuple(levels), "the release's finest split (one split: no trend to extrapolate)")
    lr, ls = np.log([r for r, _ in fit]), np.log([s for _, s in fit])
    alpha = float(np.clip(-np.polyfit(ls, lr, 1)[0], 0.0, MAX_EXPONENT))
    rho = float(min(1.0, rho1 * 2.0 ** alpha))
    return SubcellRho(rho, alpha, tuple(levels),
                      f"the power law rho ~ side^-{alpha:.2f} through the release's {len(fit)} finest splits, "
                      f"one level below the finest (rho {rho1:.3f} there), each cut piece's rho scaled by its shape")


#: The largest exponent of the power law (a pair correlation ``r^−α`` is integrable in the plane for α < 2).
MAX_EXPONENT = 1.5
#: Side of the sub-grid on which a cut piece's shape is read (``SUBGRID²`` sub-cells per cut cell).
SUBGRID = 8


def _gauss(n: int, a: float, b: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    x, w = np.polynomial.legendre.leggauss(n)
    return (a + b + (b - a) * x) / 2.0, w * (b - a) / 2.0


#: How many cells away a cut piece's correlation with another cut piece is counted (``REACH`` on each side).
REACH = 2


@functools.lru_cache(maxsize=32)
def kernel_table(alpha: float, k: int = SUBGRID, reach: int = REACH) -> NDArray[np.float64]:
    """The mean of ``r^−α`` between two uniform points of two sub-cells (side 1) at offset ``(i, j)``,
    ``0 ≤ i, j < k·(reach + 1)``: ``∫∫ (1−|u|)(1−|v|) ((i+u)² + (j+v)²)^{−α/2} du dv`` on ``[−1, 1]²``
    (the difference of two uniform points has the triangular density), by Gauss-Legendre on each
    half; the singular ``(0, 0)`` by Duffy's (1982) transform ``u = t, v = ts`` (the ``t^{1−α}`` left
    is integrable)."""
    x, w = (np.concatenate(p) for p in zip(_gauss(16, -1.0, 0.0), _gauss(16, 0.0, 1.0), strict=True))
    tri = (1.0 - np.abs(x))[:, None] * (1.0 - np.abs(x))[None, :] * w[:, None] * w[None, :]
    off = np.arange(k * (reach + 1), dtype=np.float64)
    d2 = (off[:, None, None, None] + x[None, None, :, None]) ** 2 + (off[None, :, None, None] + x[None, None, None, :]) ** 2
    table = np.einsum("abij,ij->ab", np.where(d2 > 0, d2, 1.0) ** (-alpha / 2.0), tri)
    t, wt = _gauss(48, 0.0, 1.0)
    s, ws = _gauss(48, 0.0, 1.0)
    f = (1.0 - t[:, None]) * (1.0 - t[:, None] * s[None, :]) * t[:, None] ** (1.0 - alpha) * (1.0 + s * s)[None, :] ** (-alpha / 2.0)
    table[0, 0] = 8.0 * float(wt @ f @ ws)  # 4 quadrants × 2 triangles
    return table


def _kernel(alpha: float, k: int = SUBGRID, shift: tuple[int, int] = (0, 0)) -> NDArray[np.float64]:
    """The ``k²×k²`` kernel between the sub-cells of a cell and those of the cell ``shift`` cells away
    (flat index ``i·k + j``, ``i`` along x)."""
    table = kernel_table(round(max(float(alpha), 0.05), 3), k)
    i, j = np.divmod(np.arange(k * k), k)
    return table[np.abs(k * shift[0] + i[:, None] - i[None, :]), np.abs(k * shift[1] + j[:, None] - j[None, :])]


def _share_variance(inside: NDArray[np.float64], kern: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``fᵀKf / (w(1 − w))`` of each row of ``inside`` (sub-cell shares, flattened), ``f = inside − w``."""
    w = inside.mean(axis=1)
    f = inside - w[:, None]
    q = np.einsum("ij,jk,ik->i", f, kern, f)
    return q, w * (1.0 - w)


def shape_factors(inside: NDArray[np.float64], alpha: float) -> NDArray[np.float64]:
    """Each cut piece's ``ρ`` relative to its cell's split into quarters, under the pair correlation
    ``g(r) − 1 ∝ r^−α`` (module docstring): ``G(piece) / G(quarters)`` with
    ``G(A) = ∫∫ f_A(u) f_A(v) r^−α / (w(1 − w))``, ``f_A = 1_A − w``, read on the ``k×k`` sub-grid
    ``inside`` (one row per piece: 1 where a sub-cell's centre is in the polygon).  A piece too thin
    for the sub-grid (no centre in, or none out) takes the thinnest strip's factor (one row of sub-cells).

    >>> k = SUBGRID
    >>> half = (np.arange(k * k) // k < k // 2).astype(float)  # the cell's left half
    >>> float(shape_factors(half[None, :], 0.6)[0]) > 1  # a half varies more than a quarter
    True
    >>> quarter = ((np.arange(k * k) // k < k // 2) & (np.arange(k * k) % k < k // 2)).astype(float)
    >>> round(float(shape_factors(quarter[None, :], 0.6)[0]), 6)  # the quarters themselves
    1.0
    """
    inside = np.atleast_2d(np.asarray(inside, dtype=np.float64))
    k = int(round(math.sqrt(inside.shape[1])))
    alpha = round(max(float(alpha), 0.05), 3)
    kern = _kernel(alpha, k)
    q, g = _share_variance(inside, kern)
    thin_q, thin_g, ref = _references(alpha, k)
    return np.where(g > 0, q / np.where(g > 0, g, 1.0), thin_q / thin_g) / ref


@functools.lru_cache(maxsize=32)
def _references(alpha: float, k: int) -> tuple[float, float, float]:
    """The thinnest strip's ``fᵀKf`` and ``w(1 − w)``, and the quarters' pooled ``Σ fᵀKf / Σ w(1 − w)``
    (the release's splits are read with that pooled estimator)."""
    kern = _kernel(alpha, k)
    i, j = np.divmod(np.arange(k * k), k)
    quarters = np.stack([((i < k // 2) == a) & ((j < k // 2) == b) for a in (0, 1) for b in (0, 1)]).astype(float)
    q, g = _share_variance(quarters, kern)
    thin_q, thin_g = _share_variance((i == 0).astype(float)[None, :], kern)
    return float(thin_q[0]), float(thin_g[0]), float(q.sum() / g.sum())


def piece_covariance(inside: NDArray[np.float64], cell_xy: NDArray[np.int64] | None, alpha: float,
                     reach: int = REACH) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64],
                                                  NDArray[np.float64]]:
    """The cut pieces' share covariances relative to a cell's quarters, under the pair correlation
    ``g(r) − 1 ∝ r^−α`` (module docstring): ``diag[i] = shape_factors · w_i(1 − w_i)`` and, for the
    pairs ``(a, b)`` of cut cells at most ``reach`` cells apart (``cell_xy``: their integer grid
    positions; ``None``: no pairs), ``cross = f_aᵀK_{ab}f_b / ref`` (counted once per pair).

    >>> k = SUBGRID
    >>> left = (np.arange(k * k) // k < k // 2).astype(float)
    >>> d, a, b, c = piece_covariance(np.stack([left, left]), np.array([[0, 0], [0, 1]]), 0.6)
    >>> a.tolist(), b.tolist(), bool(c[0] > 0)  # two cells cut alike, one above the other: correlated
    ([0], [1], True)
    """
    inside = np.atleast_2d(np.asarray(inside, dtype=np.float64))
    w = inside.mean(axis=1)
    factor, a, b, c = _pieces(inside, cell_xy, alpha, reach)
    return factor * w * (1.0 - w), a, b, c


def _pieces(inside: NDArray[np.float64], cell_xy: NDArray[np.int64] | None, alpha: float, reach: int = REACH
            ) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """:func:`shape_factors` of ``inside`` and the cross terms ``(a, b, cross)`` of :func:`piece_covariance`."""
    inside = np.atleast_2d(np.asarray(inside, dtype=np.float64))
    k = int(round(math.sqrt(inside.shape[1])))
    alpha = round(max(float(alpha), 0.05), 3)
    w = inside.mean(axis=1)
    factor = shape_factors(inside, alpha)
    none = np.zeros(0, dtype=np.int64)
    if cell_xy is None or inside.shape[0] < 2:
        return factor, none, none, np.zeros(0)
    ref = _references(alpha, k)[2]
    xy = np.asarray(cell_xy, dtype=np.int64)
    xy = xy - xy.min(axis=0)
    span = int(xy[:, 1].max()) + 2 * reach + 1
    key = xy[:, 0] * span + xy[:, 1]
    order = np.argsort(key)
    f = inside - w[:, None]
    out_a, out_b, out_c = [], [], []
    for dx in range(0, reach + 1):
        for dy in range(-reach, reach + 1):
            if dx == 0 and dy <= 0:
                continue  # each unordered pair once
            want = key + dx * span + dy
            pos = np.clip(np.searchsorted(key[order], want), 0, key.size - 1)
            hit = key[order][pos] == want
            a, b = np.flatnonzero(hit), order[pos[hit]]
            if a.size:
                out_a.append(a)
                out_b.append(b)
                out_c.append(np.einsum("ij,jk,ik->i", f[a], _kernel(alpha, k, (-dx, -dy)), f[b]) / ref)
    if not out_a:
        return factor, none, none, np.zeros(0)
    return factor, np.concatenate(out_a), np.concatenate(out_b), np.concatenate(out_c)
