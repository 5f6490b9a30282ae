"""The estimate and interval of a drawn polygon from a release's finest cells (issue 25 item 3).

Cells wholly inside the polygon weigh 1; a cut cell weighs the share of its area inside (the
counts are assumed spread evenly within a cell: apportionment).  The estimate is
``Σ w_i x̂_i`` with the GLS estimates ``x̂`` and its noise SD ``√(wᵀCw)``
(:func:`dpcore.estimate.gls.union_interval`).  Apportionment error cannot be measured from
the release, so the answer also gives the bracket ``[Σ_inside x̂, Σ_touching x̂]`` and a warning
when the cut cells carry more than 20 % of the estimate.

Cell shapes are the rectangles of ``design.json``'s ``cell_bounds`` (points releases, lon/lat);
area shares are taken in those coordinates (within one small cell the distortion of lon/lat
is negligible).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import shapely
from numpy.typing import NDArray

from dpcore.errors import ParameterError
from dpcore.estimate.gls import Measurements, gls_estimate, union_interval

__all__ = ["CUT_WARNING_SHARE", "CellIndex", "polygon_interval", "polygon_weights"]

#: Warn when cut cells carry more than this share of the estimate.
CUT_WARNING_SHARE = 0.2
#: An area share at least 1 − this counts as inside.
_INSIDE_TOL = 1e-9


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


def polygon_weights(cells: CellIndex | Sequence[shapely.Geometry] | NDArray[Any], polygon: shapely.Geometry,
                    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The cells the polygon touches and the share of each cell's area inside it.

    ``cells``: their shapes, or a :class:`CellIndex` of them (many polygons over one release).

    >>> cells = shapely.box([0, 1], [0, 0], [1, 2], [1, 1])
    >>> idx, share = polygon_weights(cells, shapely.box(0.5, 0, 2, 1))
    >>> idx.tolist(), share.round(3).tolist()
    ([0, 1], [0.5, 1.0])
    """
    if polygon is None or polygon.is_empty or polygon.area <= 0:
        raise ParameterError("The polygon is empty or has no area; draw an area (a Polygon or MultiPolygon).")
    index = cells if isinstance(cells, CellIndex) else CellIndex(cells)
    full = index.tree.query(polygon, predicate="covers")
    touch = index.tree.query(polygon, predicate="intersects")
    covered = np.zeros(len(index), dtype=bool)
    covered[full] = True
    cut = touch[~covered[touch]]
    area = index.area[cut]
    inside = shapely.area(shapely.intersection(index.geoms[cut], polygon))
    part = np.divide(inside, area, out=np.zeros_like(inside), where=area > 0)
    idx = np.concatenate([full, cut]).astype(np.int64)
    share = np.concatenate([np.where(index.area[full] > 0, 1.0, 0.0), np.clip(part, 0.0, 1.0)])
    order = np.argsort(idx, kind="stable")
    keep = share[order] > 0
    return idx[order][keep], share[order][keep]


def polygon_interval(m: Measurements, cells: CellIndex | Sequence[shapely.Geometry] | NDArray[Any],
                     polygon: shapely.Geometry, coverage: float = 0.9, *,
                     estimate: NDArray[np.float64] | None = None) -> dict[str, Any]:
    """:func:`~dpcore.estimate.gls.union_interval` of the cells under ``polygon`` weighted by
    their area share, plus ``inside`` and ``touching`` (bracket sums), ``cells_inside``,
    ``cells_cut``, ``cut_share`` (the cut cells' part of the estimate) and ``warning``.
    ``estimate``: :func:`~dpcore.estimate.gls.gls_estimate` of ``m`` when already solved (many polygons)."""
    idx, share = polygon_weights(cells, polygon)
    w = np.zeros(m.n)
    w[idx] = share
    x = gls_estimate(m) if estimate is None else estimate
    out = union_interval(m, w, coverage, estimate=x)
    full = share >= 1.0 - _INSIDE_TOL
    cut_part = float(np.sum(share[~full] * x[idx[~full]]))
    inside, touching = float(np.sum(x[idx[full]])), float(np.sum(x[idx]))
    cut_share = abs(cut_part) / abs(out["estimate"]) if out["estimate"] != 0 else (1.0 if cut_part else 0.0)
    warning = None
    if cut_share > CUT_WARNING_SHARE:
        warning = (f"cut cells carry {cut_share:.0%} of the estimate: their apportionment by area is not "
                   "measured by the interval; read the bracket [inside, touching]")
    out.update({"inside": inside, "touching": touching, "cells_inside": int(full.sum()),
                "cells_cut": int((~full).sum()), "cut_share": cut_share, "warning": warning})
    return out
