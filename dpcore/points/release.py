"""What a mechanism returns, and the data-free plan that describes its noise.

A :class:`PartitionRelease` is a set of rectangles of the public grid with noisy
counts.  It holds no true value: everything in it is public (grid, parameters,
plan) or the output of a DP mechanism, so maps, answers to queries and exports
are post-processing and cost no budget.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcore.core.record import created_now, new_release_id
from dpcore.data.domain import Grid, cumsum_down, paint_rects, prefix_sums, rect_sums_from_prefix
from dpcore.errors import ParameterError
from dpcore.points.within_leaf import RULES, within_leaf_density
from dpcore.privacy.budget import PrivacyCost

#: Area fractions of the range queries the expected error is reported for
#: (the HTF paper's 2 %, 6 % and 10 % workloads).
DEFAULT_QUERY_SIZES: tuple[float, ...] = (0.02, 0.06, 0.10)
#: :meth:`PartitionRelease.answer` reads queries × leaves overlaps instead of the grid's cells when
#: there are at most this many per cell (the prefix sums of a density visit every cell a few times).
FEW_OVERLAPS_PER_CELL = 2


@dataclass(frozen=True)
class LevelPlan:
    """Noise of one level of a release, computed from public inputs only.

    Attributes
    ----------
    level
        0 for the first phase / top level, increasing downwards.
    name
        Plain-words name ("Grid of 57 x 57 cells", "Point count estimate").
    cost
        Budget spent on this level.
    noise
        ``"discrete_laplace"`` or ``"discrete_gaussian"``.
    scale
        Discrete Laplace scale ``t`` (pmf ∝ exp(-|k|/t)) or Gaussian sigma.
    sensitivity
        Sensitivity of the counts of this level under the unit of privacy.
    n_counts
        Number of noisy counts released at this level.
    sd, ci95
        Standard deviation and 95 % half-width of the noise on one count.
    cells_per_count
        Average number of fine grid cells one count covers (for density and
        query-error formulas).
    in_partition
        Whether the counts of this level are the final partition (leaves).
    """

    level: int
    name: str
    cost: PrivacyCost
    noise: str
    scale: float
    sensitivity: int
    n_counts: int
    sd: float
    ci95: float
    cells_per_count: float
    in_partition: bool
    note: str = ""
    #: mechanism-specific, data-free facts of the level (JSON-able), e.g. the
    #: probability that HTF's stop test is decided by noise; exported under "details"
    extra: dict[str, Any] = field(default_factory=dict)

    def query_sd(self, fraction: float, n_cells: int) -> float:
        """Noise SD of a range query covering ``fraction`` of the domain, answered
        from this level by uniform spread.

        A query covering area fraction ``s`` overlaps about ``L = s * n_counts``
        counts.  When ``L >= 1`` it covers them (nearly) fully and the SD is
        ``sqrt(L) * sd``; inside one count it takes the share ``L`` of it, SD ``L * sd``.
        Partial overlap at the query's border is ignored (HTF spec 6.2-4).
        """
        if not self.in_partition:
            return float("nan")
        exact = self.extra.get("range_query_sd_exact", {}).get(f"{fraction:g}")
        if exact is not None:  # e.g. wavelets, where spreading does not describe the noise
            return float(exact)
        covered = fraction * n_cells / self.cells_per_count
        return self.sd * (math.sqrt(covered) if covered >= 1 else covered)

    def to_dict(self, n_cells: int, query_sizes: tuple[float, ...] = DEFAULT_QUERY_SIZES) -> dict[str, Any]:
        d: dict[str, Any] = {
            "level": self.level,
            "name": self.name,
            "privacy": self.cost.to_dict(),
            "noise": {"distribution": self.noise, "scale": self.scale, "sensitivity": self.sensitivity},
            "n_counts": self.n_counts,
            "in_partition": self.in_partition,
            "expected_error": {
                "sd_per_count": self.sd,
                "ci95_half_width_per_count": self.ci95,
                "mean_abs_error_per_count": _mean_abs(self),
                "range_query_sd": (
                    {f"{s:g}": self.query_sd(s, n_cells) for s in query_sizes}
                    if self.in_partition
                    else {}
                ),
            },
        }
        if self.note:
            d["note"] = self.note
        if self.extra:
            d["details"] = dict(self.extra)
        return d


def _mean_abs(plan: LevelPlan) -> float:
    """E|X| of the noise on one count (exact for discrete Laplace; ~sqrt(2/pi) sd otherwise)."""
    if plan.noise == "discrete_laplace":
        q = math.exp(-1.0 / plan.scale)
        # E|X| = 2q / ((1 - q)(1 + q)) for X = G1 - G2 with geometric G_i
        return 2 * q / ((1 - q) * (1 + q))
    return math.sqrt(2 / math.pi) * plan.sd


def _block_pieces(lo: NDArray[np.int64], hi: NDArray[np.int64], edges: NDArray[np.int64]
                  ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """The blocks ``edges[b]:edges[b + 1]`` that each cell range ``lo:hi`` covers, as three pieces of
    consecutive blocks, each with the share of every block it covers: the first block (partly
    covered), the blocks fully covered (share 1) and the last block (partly); an empty piece has
    share 0.  Returns ``(3, k)`` arrays of first block, end block (exclusive) and share."""
    e = np.asarray(edges, dtype=np.int64)
    size = np.diff(e).astype(np.float64)
    b0 = np.searchsorted(e, lo, side="right") - 1  # the block of the first cell
    b1 = np.searchsorted(e, hi - 1, side="right") - 1  # the block of the last cell
    one = b0 == b1
    first = (np.minimum(hi, e[b0 + 1]) - lo) / size[b0]
    last = np.where(one, 0.0, (hi - e[b1]) / size[b1])
    inner = (b1 > b0 + 1).astype(np.float64)
    starts = np.stack([b0, b0 + 1, b1])
    ends = np.stack([b0 + 1, np.maximum(b1, b0 + 1), b1 + 1])
    return starts, ends, np.stack([first, inner, last])


def area_block_sums(rects: NDArray[np.int64], per_area: NDArray[np.float64], row_edges: NDArray[np.int64],
                    col_edges: NDArray[np.int64]) -> NDArray[np.float64]:
    """Sums over the blocks ``row_edges[i]:row_edges[i + 1]`` × ``col_edges[j]:col_edges[j + 1]`` (a
    ``(rows, cols)`` array) of the values ``per_area`` of the areas ``rects`` (``(r0, r1, c0, c1)``,
    disjoint) each spread evenly over its cells, without visiting the cells (:meth:`PartitionRelease.spread`
    then block sums give the same numbers).  An area adds its value per cell times its overlap with
    the block, a row overlap times a column overlap; along each axis it covers a first block partly,
    then whole blocks, then a last block partly, so its contribution is at most 3 × 3 rectangles of
    blocks, each of one value per cell of the block: they are added to a difference array of the
    blocks, in O(areas + blocks) (UG's 4,761 areas on a 4,096² grid: 1,024² blocks of 4 × 4 cells
    for the image, 50² for the hover layer).

    >>> rects = np.array([[0, 4, 0, 2], [0, 4, 2, 4]])   # two halves of a 4 x 4 grid
    >>> area_block_sums(rects, np.array([8.0, 4.0]), np.array([0, 2, 4]), np.array([0, 1, 4]))
    array([[2., 4.],
           [2., 4.]])
    """
    rects = np.asarray(rects, dtype=np.int64).reshape(-1, 4)
    re, ce = np.asarray(row_edges, dtype=np.int64), np.asarray(col_edges, dtype=np.int64)
    nr, nc = len(re) - 1, len(ce) - 1
    per_cell = np.asarray(per_area, dtype=np.float64) / ((rects[:, 1] - rects[:, 0]) * (rects[:, 3] - rects[:, 2]))
    rs, rend, rw = _block_pieces(rects[:, 0], rects[:, 1], re)
    cs, cend, cw = _block_pieces(rects[:, 2], rects[:, 3], ce)
    # the 3 x 3 pieces: value per cell of a block = per_cell × row share × column share
    v = (rw[:, None, :] * cw[None, :, :] * per_cell).ravel()
    r0, r1 = np.repeat(rs, 3, axis=0).ravel(), np.repeat(rend, 3, axis=0).ravel()
    c0, c1 = np.tile(cs, (3, 1)).ravel(), np.tile(cend, (3, 1)).ravel()
    w = nc + 1
    at = np.concatenate([r0 * w + c0, r1 * w + c0, r0 * w + c1, r1 * w + c1])
    diff = np.bincount(at, np.concatenate([v, -v, -v, v]), minlength=(nr + 1) * w).reshape(nr + 1, w)
    # summed in place, as paint_rects does: one block-sized array, not two
    share = np.cumsum(cumsum_down(diff, out=diff), axis=1, out=diff)[:-1, :-1]
    return share * np.diff(re)[:, None] * np.diff(ce)[None, :]


def area_rect_sums(rects: NDArray[np.int64], per_area: NDArray[np.float64], queries: NDArray[np.int64],
                   chunk: int = 64) -> NDArray[np.float64]:
    """Sums over the rectangles ``queries`` (``(r0, r1, c0, c1)``) of the values ``per_area`` of the
    areas ``rects`` each spread evenly over its cells (the answers of :meth:`PartitionRelease.answer`),
    from the overlaps of every query with every area: O(queries × areas), no grid (for few areas on a
    large grid).

    >>> rects = np.array([[0, 4, 0, 2], [0, 4, 2, 4]])   # two halves of a 4 x 4 grid
    >>> area_rect_sums(rects, np.array([8.0, 4.0]), np.array([[0, 2, 1, 3], [0, 4, 0, 4]]))
    array([ 3., 12.])
    """
    r = np.asarray(rects, dtype=np.int64).reshape(-1, 4)
    q = np.asarray(queries, dtype=np.int64).reshape(-1, 4)
    per_cell = np.asarray(per_area, dtype=np.float64) / ((r[:, 1] - r[:, 0]) * (r[:, 3] - r[:, 2]))
    out = np.empty(len(q), dtype=np.float64)
    for s in range(0, len(q), chunk):
        b = q[s:s + chunk]
        rows = np.minimum(b[:, 1, None], r[None, :, 1]) - np.maximum(b[:, 0, None], r[None, :, 0])
        cols = np.minimum(b[:, 3, None], r[None, :, 3]) - np.maximum(b[:, 2, None], r[None, :, 2])
        np.maximum(rows, 0, out=rows)
        np.maximum(cols, 0, out=cols)
        out[s:s + chunk] = (rows * cols) @ per_cell
    return out


@dataclass(frozen=True)
class PartitionRelease:
    """A released partition of the public grid into rectangles with noisy counts.

    ``rects`` are ``(r0, r1, c0, c1)`` half-open fine-cell ranges; ``level`` says
    which :class:`LevelPlan` produced each rectangle; ``leaf`` marks the final
    partition used to answer queries (it tiles the grid).
    """

    mechanism: str
    mechanism_title: str
    params: dict[str, Any]
    grid: Grid
    cost: PrivacyCost
    levels: tuple[LevelPlan, ...]
    rects: NDArray[np.int64]
    level: NDArray[np.int64]
    leaf: NDArray[np.bool_]
    noisy: NDArray[np.float64]
    sd: NDArray[np.float64]
    ci95: NDArray[np.float64]
    sensitivity: int
    user_cap: int | None
    public: dict[str, Any] = field(default_factory=dict)
    #: budget value (ε or ρ, same definition as ``cost``) spent on each node's count;
    #: None when every node's budget is its level's (``levels[level[i]].cost.value``)
    node_budget: NDArray[np.float64] | None = None
    #: True for tree mechanisms: ``level`` is the depth and the Map page offers a depth slider
    is_tree: bool = False
    #: mechanism-specific released extras (e.g. the matrix mechanism's workload answers with
    #: their standard errors under ``"workload_answers"``); all DP outputs or public facts
    details: dict[str, Any] = field(default_factory=dict)
    created: str = field(default_factory=created_now)  # the session restamps it with the charge time
    release_id: str = field(default_factory=new_release_id)
    #: the mechanism's paper (authors, venue, year, section), stated in the record
    mechanism_reference: str = ""
    #: each rectangle's own count-phase noisy count *before* post-processing (NaN: no count of its
    #: own), for mechanisms whose released ``noisy`` is post-processed (least-squares trees); None:
    #: the leaves' released counts are the count-phase measurements (:mod:`dpcore.points.data_users`)
    measured: NDArray[np.float64] | None = None
    #: the points' coordinate precision in degrees (e.g. 0.0001: rounded to 4 decimals) as the curator
    #: states it, a public fact of the data's format (its documentation), never read from the data;
    #: recorded for the data users' intervals (:mod:`dpcore.points.data_users`); changes no noise
    coordinate_precision: float | None = None
    #: how a leaf's count lies within the leaf when a query cuts it (:mod:`dpcore.points.within_leaf`):
    #: ``"uniform"`` (evenly) or ``"piecewise_linear"`` (``ag_pool_smooth``); a data-free rule over the
    #: released counts that keeps every leaf's count, so tables and exports do not depend on it
    within_leaf: str = "uniform"

    def __post_init__(self) -> None:
        if self.within_leaf not in RULES:
            raise ParameterError(f"Unknown within-leaf rule {self.within_leaf!r}; use one of {', '.join(RULES)} "
                                 "(dpcore.points.within_leaf.RULES).")

    @property
    def n_rects(self) -> int:
        return int(self.rects.shape[0])

    def budgets(self) -> NDArray[np.float64]:
        """Budget spent on each node's count (ε or ρ)."""
        if self.node_budget is not None:
            return np.asarray(self.node_budget, dtype=np.float64)
        lut = np.full(max([lv.level for lv in self.levels] + [int(np.max(self.level, initial=0))]) + 1, np.nan)
        lut[[lv.level for lv in self.levels]] = [lv.cost.value for lv in self.levels]
        return lut[np.asarray(self.level, dtype=np.int64)]

    def frontier(self, depth: int) -> NDArray[np.int64]:
        """Indices of the partition seen at ``depth`` of a tree: the nodes at that depth
        plus the leaves above it.  For a flat release, the leaves."""
        if not self.is_tree:
            return self.leaf_index()
        return np.flatnonzero((self.level == depth) | (self.leaf & (self.level < depth)))

    def leaf_index(self) -> NDArray[np.int64]:
        return np.flatnonzero(self.leaf)

    def density(self, idx: NDArray[np.int64] | None = None) -> NDArray[np.float64]:
        """Estimated count per fine cell: each leaf's noisy count spread by the release's
        :attr:`within_leaf` rule (uniformly, for most mechanisms).

        ``idx`` picks another tiling of the grid, e.g. a tree's :meth:`frontier`, spread uniformly.
        """
        if idx is None and self.within_leaf != "uniform":
            return self._within_leaf_density.copy()
        return self.spread(self.noisy, self.leaf_index() if idx is None else idx)

    @functools.cached_property
    def _within_leaf_density(self) -> NDArray[np.float64]:
        """The leaves' fine density under a non-uniform :attr:`within_leaf` rule, computed once per
        release (a whole-grid filter: seconds and hundreds of MB at 2,048²); read-only, since the
        release's fields never change (a frozen dataclass)."""
        leaves = self.leaf_index()
        d = within_leaf_density(self.within_leaf, self.rects[leaves], self.noisy[leaves], self.grid.shape)
        d.flags.writeable = False
        return d

    def spread(self, per_area: NDArray[np.float64], idx: NDArray[np.int64]) -> NDArray[np.float64]:
        """Grid-shaped array: the value of each area ``idx`` (``per_area`` holds one value per
        rectangle of the release) divided evenly over its cells.  One area per cell in row-major
        order (Identity) is a reshape, not a scatter."""
        g = self.grid
        idx = np.asarray(idx, dtype=np.int64)
        if len(idx) == g.n_cells:  # a tiling by n_cells areas: every area is one cell
            every = len(idx) == self.n_rects  # idx is then 0, 1, ..., n - 1: no copies
            r = self.rects if every else self.rects[idx]
            per_cell = np.asarray(per_area if every else per_area[idx], dtype=np.float64)
            lin = r[:, 0] * g.cols
            lin += r[:, 2]
            if np.array_equal(lin, np.arange(g.n_cells)):
                return per_cell.reshape(g.shape)
            out = np.empty(g.n_cells, dtype=np.float64)
            out[lin] = per_cell
            return out.reshape(g.shape)
        r = self.rects[idx]
        per_cell = np.asarray(per_area[idx], dtype=np.float64) / ((r[:, 1] - r[:, 0]) * (r[:, 3] - r[:, 2]))
        return paint_rects(r, per_cell, g.shape)  # O(k + cells)

    def block_sums(self, per_area: NDArray[np.float64], idx: NDArray[np.int64], row_edges: NDArray[np.int64],
                   col_edges: NDArray[np.int64]) -> NDArray[np.float64]:
        """Sums of :meth:`spread` ``(per_area, idx)`` over the blocks ``row_edges[i]:row_edges[i + 1]`` ×
        ``col_edges[j]:col_edges[j + 1]``, without the grid (:func:`area_block_sums`)."""
        idx = np.asarray(idx, dtype=np.int64)
        return area_block_sums(self.rects[idx], np.asarray(per_area[idx], dtype=np.float64), row_edges, col_edges)

    def answer(self, queries: NDArray[np.int64]) -> NDArray[np.float64]:
        """Answers to range queries ``(r0, r1, c0, c1)`` from the leaves (spread by :attr:`within_leaf`):
        from the overlaps of the queries with the leaves when there are few of both for the grid and
        the spread is uniform (:func:`area_rect_sums`: UG's 4,761 areas on a 4,096² grid), else from
        the density's prefix sums."""
        q = np.asarray(queries, dtype=np.int64).reshape(-1, 4)
        idx = self.leaf_index()
        few = len(q) * len(idx) <= FEW_OVERLAPS_PER_CELL * self.grid.n_cells
        if few and self.within_leaf == "uniform":
            return area_rect_sums(self.rects[idx], self.noisy[idx], q)
        # the prefix sums are made per call, not kept: a kept table would hold another grid-sized
        # array per release in the app (134 MB at 4,096²) for a call made once per release
        dens = self._within_leaf_density if self.within_leaf != "uniform" else self.density()
        return rect_sums_from_prefix(prefix_sums(dens), q).astype(np.float64)

    def expected_query_sd(self, fraction: float) -> float:
        """Noise SD of a query of area ``fraction``, from the leaf level's plan."""
        leaf_levels = [lv for lv in self.levels if lv.in_partition]
        if not leaf_levels:
            return float("nan")
        # several leaf levels (pruned trees): combine as independent contributions
        # in proportion to the cells they cover
        var = 0.0
        covered_total = 0.0
        for lv in leaf_levels:
            cells = lv.n_counts * lv.cells_per_count
            share = cells / self.grid.n_cells
            var += lv.query_sd(fraction * share, self.grid.n_cells) ** 2 if share > 0 else 0.0
            covered_total += share
        return math.sqrt(var)

    def leaf_table(self) -> dict[str, NDArray[Any]]:
        """Columns of the leaves, for tables and exports (lon/lat boxes included)."""
        idx = self.leaf_index()
        return self.table(idx)

    def table(self, idx: NDArray[np.int64] | None = None) -> dict[str, NDArray[Any]]:
        if idx is None:
            idx = np.arange(self.n_rects)
        box = self.grid.rect_lonlat(self.rects[idx])
        return {
            "id": idx.astype(np.int64),
            "level": self.level[idx],
            "leaf": self.leaf[idx],
            "west": box[:, 0],
            "south": box[:, 1],
            "east": box[:, 2],
            "north": box[:, 3],
            "noisy_count": self.noisy[idx],
            "ci95_low": self.noisy[idx] - self.ci95[idx],
            "ci95_high": self.noisy[idx] + self.ci95[idx],
            "noise_sd": self.sd[idx],
            "budget": self.budgets()[idx],
            "cells": ((self.rects[idx, 1] - self.rects[idx, 0]) * (self.rects[idx, 3] - self.rects[idx, 2])),
        }
