"""The estimate and interval of a drawn polygon from a release's finest cells (issue 25 item 3).

Cells wholly inside the polygon weigh 1; a cut cell weighs the share of its area inside (the
counts are assumed spread evenly within a cell: apportionment).  The estimate is
``Σ w_i x̂_i`` with the GLS estimates ``x̂`` and its noise SD ``√(wᵀCw)``
(:func:`dpcore.estimate.gls.union_interval`).  The count inside the polygon also differs from
``Σ w_i x_i`` by the apportionment error of the cut cells; by default the interval adds its
modelled variance (:mod:`dpcore.estimate.apportionment`: beta-binomial, with the over-dispersion
inside a cell extrapolated from the release's own splits and scaled by each cut piece's shape), so that it is an interval for the count inside
the polygon, not only for the area-weighted cells.  That model is an assumption, not a
measurement, so the answer also gives the bracket ``[Σ_inside x̂, Σ_touching x̂]`` and a warning
when the cut cells carry more than 20 % of the estimate.

**Points on a lattice** (``precision``).  Coordinates are often published rounded (the NYC pickups
to 4 decimals: a lattice 0.0001° apart, about 8 × 11 m), so the points of a cell can only sit on
its lattice positions, and a cut cell's points inside are those of the positions inside, not an
area share of them.  Where a cell spans few positions that matters, and not as noise: the area
share errs the same way in consecutive cells along a polygon's edge (the lattice's phase against
the cells drifts slowly: a 1,024² cell of the 0.3° box is 2.93 positions wide, so the phase moves
0.07 of a position per cell), so the cut cells' errors add up instead of averaging out, which no
model of independent cells (nor the isotropic neighbours' term) describes.  Measured on training
polygons of the pickups (benchmarks/interval_polygons_diagnose.py, seed 11, never the reported
polygons): at 1,024² the squared apportionment error of a polygon was 2.08 times the sum of its
cut cells' own squared errors (1.2 at 256², where a cell spans 11.7 positions); with the points
moved off the lattice by up to half a position (a thought experiment) 1.25; weighing cut cells by
their share of the lattice positions inside (:func:`lattice_shares`) 0.96: the correlation is the
lattice's, and it goes with the lattice shares.  A release cannot see the lattice (that would read
the data), so the precision is a public fact the curator or data user states (the file's
decimals); without it the area share is used.

Cell shapes are the rectangles of ``design.json``'s ``cell_bounds`` (points releases, lon/lat);
area shares are taken in those coordinates (within one small cell the distortion of lon/lat
is negligible); with ``neighbours``, cells of one size (within 1e-3 of a cell: ``design.json``
rounds the bounds) are placed on their grid to find neighbouring cut cells.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import shapely
from numpy.typing import NDArray

from dpcore.errors import ParameterError
from dpcore.estimate.apportionment import (
    APPORTIONMENTS,
    SUBGRID,
    SubcellRho,
    apportionment_variance,
    correlated_variance,
    shape_factors,
    subcell_overdispersion,
)
from dpcore.estimate.gls import Measurements, gls_estimate, union_interval
from dpcore.privacy.calibration import interval_half_width

__all__ = ["CUT_WARNING_SHARE", "CellIndex", "Density", "grid_positions", "lattice_counts", "lattice_shares", "piece_grids",
           "polygon_interval", "polygon_weights"]

#: Warn when cut cells carry more than this share of the estimate.
CUT_WARNING_SHARE = 0.2


class CellIndex:
    """The finest cells' shapes with their spatial index (an STR-tree) and areas, built once per release.

    Each polygon is then two index queries, ``covers`` (cells wholly inside, weight 1) and
    ``intersects`` (cells touching it), and one vectorised intersection of the cut cells alone
    (shapely 2's vectorised predicates; no Python loop per cell).
    """

    def __init__(self, cells: Sequence[shapely.Geometry] | NDArray[Any]) -> None:
        self.geoms = np.asarray(cells, dtype=object)
        self.tree = shapely.STRtree(self.geoms)
        self.area = shapely.area(self.geoms)

    def __len__(self) -> int:
        return int(self.geoms.size)


class Density:
    """A public density the curator supplies (fixed before the data): value ``values[k]`` over
    ``shapes[k]`` (lon/lat polygons), 0 elsewhere, e.g. land (1) and water (0), or housing units.

    A cut cell then weighs the share of its density inside the polygon,
    ``Σ_k d_k·|c ∩ P ∩ D_k| / Σ_k d_k·|c ∩ D_k|``, instead of its area share; a cell without density
    keeps its area share.  Vectorised over (cut cell, density shape) pairs from an STR-tree.
    """

    def __init__(self, shapes: Sequence[shapely.Geometry] | NDArray[Any], values: Sequence[float] | NDArray[Any]
                 ) -> None:
        self.shapes = np.asarray(shapes, dtype=object)
        self.values = np.asarray(values, dtype=np.float64)
        if self.values.shape != self.shapes.shape or not np.all(np.isfinite(self.values) & (self.values >= 0)):
            raise ParameterError("A density gives one finite value of at least 0 for each of its shapes.")
        self.tree = shapely.STRtree(self.shapes)

    @functools.cached_property
    def key(self) -> str:
        """A digest of the shapes and values: two densities with the same key apportion alike.

        >>> a = Density(shapely.box([0], [0], [1], [1]), [1.0])
        >>> a.key == Density(shapely.box([0], [0], [1], [1]), [1.0]).key != Density(shapely.box([0], [0], [1], [1]), [2.0]).key
        True
        """
        h = hashlib.sha256(self.values.tobytes())
        for wkb in shapely.to_wkb(self.shapes):
            h.update(wkb)
        return h.hexdigest()

    def shares(self, cells: NDArray[Any], polygon: shapely.Geometry, fallback: NDArray[np.float64]
               ) -> NDArray[np.float64]:
        """The density share of each of ``cells`` inside ``polygon`` (``fallback`` where a cell has none)."""
        i, k = self.tree.query(cells, predicate="intersects")
        part = shapely.intersection(cells[i], self.shapes[k])
        den = np.bincount(i, weights=self.values[k] * shapely.area(part), minlength=cells.size)
        num = np.bincount(i, weights=self.values[k] * shapely.area(shapely.intersection(part, polygon)),
                          minlength=cells.size)
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), fallback)


def polygon_weights(cells: CellIndex | Sequence[shapely.Geometry] | NDArray[Any], polygon: shapely.Geometry,
                    density: Density | None = None, precision: float | None = None
                    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The cells the polygon touches and the share of each cell's area inside it.

    ``cells``: their shapes, or a :class:`CellIndex` of them (many polygons over one release).
    ``density``: a public :class:`Density`: cut cells weigh their share of it instead of their area share.
    ``precision``: the coordinates' public precision (degrees): cut cells weigh their share of the
    lattice of positions the points can take (:func:`lattice_shares`).

    >>> cells = shapely.box([0, 1], [0, 0], [1, 2], [1, 1])
    >>> idx, share = polygon_weights(cells, shapely.box(0.5, 0, 2, 1))
    >>> idx.tolist(), share.round(3).tolist()
    ([0, 1], [0.5, 1.0])
    """
    idx, share, _ = _coverage(cells, polygon, density, precision)
    keep = share > 0
    return idx[keep], share[keep]


def _coverage(cells: CellIndex | Sequence[shapely.Geometry] | NDArray[Any], polygon: shapely.Geometry,
              density: Density | None, precision: float | None = None
              ) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.bool_]]:
    """Every cell sharing area with the polygon (sorted), its weight, and whether it lies wholly inside."""
    if polygon is None or polygon.is_empty or polygon.area <= 0:
        raise ParameterError("The polygon is empty or has no area; draw an area (a Polygon or MultiPolygon).")
    if precision is not None:
        _check_precision(precision, density)
    index = cells if isinstance(cells, CellIndex) else CellIndex(cells)
    full = index.tree.query(polygon, predicate="covers")
    touch = index.tree.query(polygon, predicate="intersects")
    covered = np.zeros(len(index), dtype=bool)
    covered[full] = True
    cut = touch[~covered[touch]]
    area = index.area[cut]
    inside = shapely.area(shapely.intersection(index.geoms[cut], polygon))
    part = np.clip(np.divide(inside, area, out=np.zeros_like(inside), where=area > 0), 0.0, 1.0)
    cut, part = cut[part > 0], part[part > 0]  # a cell touching only along an edge is not under it
    full = full[index.area[full] > 0]
    if density is not None and cut.size:
        part = np.clip(density.shares(index.geoms[cut], polygon, part), 0.0, 1.0)
    elif precision is not None and cut.size:
        part = lattice_shares(index.geoms[cut], polygon, precision, part)
    idx = np.concatenate([full, cut]).astype(np.int64)
    share = np.concatenate([np.ones(full.size), part])
    whole = np.concatenate([np.ones(full.size, dtype=bool), np.zeros(cut.size, dtype=bool)])
    order = np.argsort(idx, kind="stable")
    return idx[order], share[order], whole[order]


#: Above this many lattice positions per cell the lattice is fine against the cell: its share is the area share.
MAX_LATTICE = 4096


def _lattice_first_count(lo: NDArray[np.float64], hi: NDArray[np.float64], step: float
                         ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """The first lattice index ``k`` with ``k·step ≥ lo`` of each cell and its count of positions
    ``k·step`` in ``[lo, hi)`` (half-open, as points are binned; within 1e-6 of a step of an edge
    counts as on it: ``design.json`` rounds the bounds)."""
    first = np.ceil(lo / step - 1e-6)
    return first, np.maximum(np.ceil(hi / step - 1e-6) - first, 0).astype(np.int64)


def _check_precision(precision: float, density: Density | None = None) -> None:
    if density is not None or not (math.isfinite(precision) and precision > 0):
        raise ParameterError("The coordinates' precision is a positive number of degrees (e.g. 0.0001 for 4 decimals), "
                             "and is not given together with a public density: choose one.")


def lattice_counts(geoms: NDArray[Any], precision: float) -> NDArray[np.float64]:
    """How many positions of the coordinates' lattice (multiples of ``precision`` in longitude and in
    latitude) each cell holds: the cells' "areas" when the points can only lie on the lattice.

    >>> lattice_counts(shapely.box([0, 0.25], [0, 0], [0.25, 0.5], [0.1, 0.1]), 0.1).tolist()  # 3×1 and 2×1
    [3.0, 2.0]
    """
    _check_precision(precision)
    geoms = np.asarray(geoms, dtype=object).reshape(-1)
    b = shapely.bounds(geoms).reshape(-1, 4)
    box = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    if np.any(np.abs(shapely.area(geoms) - box) > 1e-9 * np.maximum(box, 1e-300)):
        # the lattice is counted over each cell's bounding box: right for a grid's cells only
        raise ParameterError("The coordinates' precision applies to a release of grid cells (rectangles, as a "
                             "points release has); these areas are not rectangles: leave the precision out "
                             "(cut areas then weigh their share of the area, or give a public density).")
    nx = _lattice_first_count(b[:, 0], b[:, 2], precision)[1]
    ny = _lattice_first_count(b[:, 1], b[:, 3], precision)[1]
    return (nx * ny).astype(np.float64)


def lattice_shares(geoms: NDArray[Any], polygon: shapely.Geometry, precision: float,
                   fallback: NDArray[np.float64]) -> NDArray[np.float64]:
    """Each cell's share of its lattice positions (:func:`lattice_counts`) inside ``polygon``
    (``fallback``, the area share, where a cell holds none or more than :data:`MAX_LATTICE`).
    One vectorised point-in-polygon test over every cell's positions.

    >>> cell = shapely.box([0], [0], [0.3], [0.1])  # positions at x = 0, 0.1, 0.2
    >>> lattice_shares(cell, shapely.box(-1, -1, 0.15, 1), 0.1, np.array([0.5])).tolist()  # area: 0.5
    [0.6666666666666666]
    """
    n = lattice_counts(geoms, precision)
    out = np.array(fallback, dtype=np.float64)
    # each cell on its own: one cell with a fine lattice falls back to its area share, not its neighbours
    use = np.flatnonzero((n > 0) & (n <= MAX_LATTICE))
    if use.size == 0:
        return out
    b = shapely.bounds(np.asarray(geoms, dtype=object).reshape(-1)[use]).reshape(-1, 4)
    fx, nx = _lattice_first_count(b[:, 0], b[:, 2], precision)
    fy, ny = _lattice_first_count(b[:, 1], b[:, 3], precision)
    shapely.prepare(polygon)
    shape = nx * 65_536 + ny  # cells of one lattice shape together (a grid has few): no padding
    for s in np.unique(shape):
        g = np.flatnonzero(shape == s)
        kx, ky = int(nx[g[0]]), int(ny[g[0]])
        ix, iy = np.repeat(np.arange(kx), ky), np.tile(np.arange(ky), kx)
        x, y = (fx[g, None] + ix[None, :]) * precision, (fy[g, None] + iy[None, :]) * precision
        out[use[g]] = shapely.contains_xy(polygon, x, y).sum(axis=1) / (kx * ky)
    return out


def piece_grids(geoms: NDArray[Any], polygon: shapely.Geometry, k: int = SUBGRID) -> NDArray[np.float64]:
    """Each cut cell's piece under ``polygon`` on a ``k×k`` sub-grid of its bounding box: one row per
    cell, 1 where a sub-cell's centre lies in the polygon (row-major over the cell's x, then y), for
    :func:`~dpcore.estimate.apportionment.shape_factors`.  One vectorised point-in-polygon test.

    >>> piece_grids(shapely.box([0], [0], [1], [1]), shapely.box(0, 0, 0.5, 1), k=2).tolist()
    [[1.0, 1.0, 0.0, 0.0]]
    """
    b = shapely.bounds(np.asarray(geoms, dtype=object)).reshape(-1, 4)
    t = (np.arange(k) + 0.5) / k
    gx = np.repeat(t, k)  # the sub-cell (i, j) at flat position i·k + j: x from i, y from j
    gy = np.tile(t, k)
    x = b[:, [0]] + (b[:, [2]] - b[:, [0]]) * gx[None, :]
    y = b[:, [1]] + (b[:, [3]] - b[:, [1]]) * gy[None, :]
    shapely.prepare(polygon)
    return shapely.contains_xy(polygon, x, y).astype(np.float64)


def grid_positions(geoms: NDArray[Any]) -> NDArray[np.int64] | None:
    """The integer grid positions (column, row) of cells of one size (``None`` when their sizes
    differ or a cell has no area: then no two cut cells are taken as neighbours).

    >>> grid_positions(shapely.box([0, 2], [0, 1], [1, 3], [1, 2])).tolist()
    [[0, 0], [2, 1]]
    """
    b = shapely.bounds(np.asarray(geoms, dtype=object)).reshape(-1, 4)
    if b.shape[0] == 0 or not np.all(np.isfinite(b)):
        return None
    dx, dy = b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]
    if dx[0] <= 0 or dy[0] <= 0 or not (np.allclose(dx, dx[0], rtol=1e-3) and np.allclose(dy, dy[0], rtol=1e-3)):
        return None
    return np.column_stack([np.rint((b[:, 0] - b[0, 0]) / dx[0]), np.rint((b[:, 1] - b[0, 1]) / dy[0])]).astype(np.int64)


def polygon_interval(m: Measurements, cells: CellIndex | Sequence[shapely.Geometry] | NDArray[Any],
                     polygon: shapely.Geometry, coverage: float = 0.9, *,
                     estimate: NDArray[np.float64] | None = None, density: Density | None = None,
                     apportionment: str = "overdispersed", rho: float | SubcellRho | None = None,
                     neighbours: bool = False, precision: float | None = None) -> dict[str, Any]:
    """The estimate and ``coverage`` interval of the count inside ``polygon``.

    :func:`~dpcore.estimate.gls.union_interval` of the cells under ``polygon`` weighted by their
    area share (``density``: by their share of a public :class:`Density`), widened by the cut
    cells' apportionment variance (:mod:`dpcore.estimate.apportionment`).

    Parameters
    ----------
    apportionment : {"overdispersed", "binomial", "none"}
        The cut cells' apportionment model: beta-binomial with ``rho`` (default), binomial
        (``rho = 0``), or none (the noise alone: an interval for the area-weighted cells, not for the
        count inside the polygon).
    rho : float or SubcellRho, optional
        The over-dispersion.  By default :func:`~dpcore.estimate.apportionment.subcell_overdispersion`
        of ``m`` (pass it when asking many polygons of one release: it reads every measurement): the
        ρ of a cell's own points, extrapolated from the release's splits by a power law, each cut
        piece's ρ scaled by its shape.  A float is one ρ for every cut cell (the beta-binomial alone).  Where the release holds nothing to
        estimate it from, the binomial is used and the warning says so.  It is estimated against
        area shares: with a ``density`` that already follows the points it is likely too large (the
        interval too wide).
    neighbours : bool
        Also correlate cut cells up to two cells apart under the same model
        (:func:`~dpcore.estimate.apportionment.correlated_variance`); off by default: on held-out
        pickups it over-covered (91.5–93 % for a 90 % interval; benchmarks/results/interval_coverage_polygons.md).
    estimate : array, optional
        :func:`~dpcore.estimate.gls.gls_estimate` of ``m`` when already solved (many polygons).
    precision : float, optional
        The public precision of the points' coordinates, in the cells' units (degrees; 0.0001 for
        coordinates given to 4 decimals): the points can only lie on that lattice, so a cut cell weighs
        its share of the lattice positions inside, not of its area, and ``ρ`` is read at the release's
        splits against the parts' lattice positions (:func:`lattice_shares`, :func:`lattice_counts`;
        the module docstring says why).  Not with ``density``.

    Returns
    -------
    dict
        ``estimate``, ``variance``, ``sd``, ``low``, ``high`` (the interval: noise and apportionment),
        ``coverage``, ``method``; ``noise_sd`` and ``apportionment_sd`` (the two parts of ``sd``),
        ``apportionment`` (the model used), ``rho`` (ρ of a cell's quarters) and ``rho_how`` (how it was
        found); ``inside`` and ``touching`` (the bracket
        sums), ``cells_inside``, ``cells_cut``, ``cut_share`` (the cut cells' part of the estimate)
        and ``warning``.
    """
    if apportionment not in APPORTIONMENTS:
        raise ParameterError(f"Unknown apportionment {apportionment!r}: choose one of {', '.join(APPORTIONMENTS)}.")
    index = cells if isinstance(cells, CellIndex) else CellIndex(cells)
    idx, share, full = _coverage(index, polygon, density, precision)
    w = np.zeros(m.n)
    w[idx] = share
    x = gls_estimate(m) if estimate is None else estimate
    out = union_interval(m, w, coverage, estimate=x)
    cut_x, cut_w = x[idx[~full]], share[~full]
    used, note = apportionment, ""
    if apportionment == "overdispersed" and rho is None and cut_x.size:
        rho = subcell_overdispersion(m, index.area if precision is None else lattice_counts(index.geoms, precision))
        if rho is None:
            used, note = "binomial", ("; the release measures no groups of cells to estimate the over-dispersion "
                                      "from, so the binomial apportionment variance is used (likely too small)")
    model = rho if isinstance(rho, SubcellRho) else None
    r = (model.rho if model else float(rho or 0.0)) if used == "overdispersed" else 0.0
    if used == "none":
        app_var = 0.0
    elif model is not None and model.exponent is not None and cut_x.size:
        geoms = index.geoms[idx[~full]]
        grids = piece_grids(geoms, polygon)
        if neighbours:
            app_var = correlated_variance(cut_x, cut_w, r, grids, grid_positions(geoms), model.exponent)
        else:
            app_var = apportionment_variance(cut_x, cut_w, np.minimum(1.0, r * shape_factors(grids, model.exponent)))
    else:
        app_var = apportionment_variance(cut_x, cut_w, r)
    if app_var > 0:
        var = out["variance"] + app_var
        half = max(float(interval_half_width("normal", math.sqrt(var), coverage)), out["high"] - out["estimate"])
        out.update({"variance": var, "sd": math.sqrt(var), "low": out["estimate"] - half,
                    "high": out["estimate"] + half, "method": out["method"] + f" + {used} apportionment"})
    cut_part = float(np.sum(cut_w * cut_x))
    inside, touching = float(np.sum(x[idx[full]])), float(np.sum(x[idx]))
    cut_share = abs(cut_part) / abs(out["estimate"]) if out["estimate"] != 0 else (1.0 if cut_part else 0.0)
    warning = None
    if cut_share > CUT_WARNING_SHARE or note:
        by = ("the public density" if density is not None else
              "the coordinates' lattice" if precision is not None else "area")
        how = ("is not measured by the interval" if used == "none" else
               f"enters the interval only as modelled ({used}, rho {r:.3f})")
        warning = (f"cut cells carry {cut_share:.0%} of the estimate: their apportionment by {by} {how}; "
                   f"read the bracket [inside, touching]{note}")
    out.update({"noise_sd": math.sqrt(out["variance"] - app_var), "apportionment_sd": math.sqrt(app_var),
                "apportionment": used, "rho": r if used == "overdispersed" else (0.0 if used == "binomial" else None),
                "rho_how": _rho_how(used, model, rho),
                "inside": inside, "touching": touching, "cells_inside": int(full.sum()),
                "cells_cut": int((~full).sum()), "cut_share": cut_share, "warning": warning})
    return out


def _rho_how(used: str, model: SubcellRho | None, rho: float | SubcellRho | None) -> str | None:
    """How the answer's ``rho`` was found (the ``rho_how`` field)."""
    if used != "overdispersed":
        return None
    if model is None:
        return "given" if rho is not None else None
    levels = ", ".join(f"{r:.3f}" for r, _ in model.levels)
    return f"{model.how} (rho at the release's splits, finest first: {levels})"
