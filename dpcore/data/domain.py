"""The public 2-D domain: bounds, grid, cell <-> lon/lat, points -> frequency matrix.

Everything here is *public*: the bounds and the grid are chosen by the curator
(typed, a preset, or a public boundary file), never read silently off the data
(DESIGN.md, privacy rule 1).  The frequency matrix is confidential; it only
leaves dpcore through a mechanism.

Conventions
-----------
* ``counts[row, col]``: ``row`` runs south -> north along latitude, ``col``
  west -> east along longitude; ``row 0`` is the southernmost row.
* A cell is half-open ``[lon0, lon1) x [lat0, lat1)``, except that the last
  column and the last row also hold points exactly on the east / north edge,
  so the domain is closed.
* Rectangles of cells are ``(r0, r1, c0, c1)`` half-open index ranges.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from dpcore.data.persons import cap_mask_points, person_codes
from dpcore.errors import ParameterError

#: Largest number of cells the app lets a curator choose; a 4096 x 4096 int64
#: matrix is 128 MB and every mechanism holds a few arrays of that size.
MAX_CELLS = 4096 * 4096
MAX_SIDE = 4096


@dataclass(frozen=True)
class Bounds:
    """A lon/lat box ``[west, east] x [south, north]`` in degrees (WGS84)."""

    west: float
    south: float
    east: float
    north: float

    def __post_init__(self) -> None:
        vals = (self.west, self.south, self.east, self.north)
        ok = all(isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) for v in vals)
        if ok:  # numpy scalars are fine; store plain floats
            for name in ("west", "south", "east", "north"):
                object.__setattr__(self, name, float(getattr(self, name)))
            vals = (self.west, self.south, self.east, self.north)
        if not ok:
            raise ParameterError(
                f"Bounds {vals} contain a value that is not a finite number. "
                "Type four numbers: west, south, east, north in degrees."
            )
        if not (-180.0 <= self.west <= 180.0 and -180.0 <= self.east <= 180.0):
            raise ParameterError(
                f"Longitudes must lie in -180..180 (got west={self.west}, east={self.east}). "
                "Check that longitude and latitude are not swapped."
            )
        if not (-90.0 <= self.south <= 90.0 and -90.0 <= self.north <= 90.0):
            raise ParameterError(
                f"Latitudes must lie in -90..90 (got south={self.south}, north={self.north}). "
                "Check that longitude and latitude are not swapped."
            )
        if self.west >= self.east:
            raise ParameterError(
                f"West ({self.west}) must be smaller than east ({self.east}). "
                "Bounds are west, south, east, north; boxes across the antimeridian are not supported."
            )
        if self.south >= self.north:
            raise ParameterError(
                f"South ({self.south}) must be smaller than north ({self.north}). "
                "Bounds are west, south, east, north."
            )

    @classmethod
    def parse(cls, text: str) -> Bounds:
        """Parse ``"W,S,E,N"`` (as typed on the command line or in the app)."""
        parts = [p.strip() for p in str(text).replace(";", ",").split(",") if p.strip()]
        if len(parts) != 4:
            raise ParameterError(
                f"Bounds '{text}' must be four numbers 'west,south,east,north', "
                "for example -74.06,40.64,-73.78,40.83."
            )
        try:
            w, s, e, n = (float(p) for p in parts)
        except ValueError:
            raise ParameterError(
                f"Bounds '{text}' contain something that is not a number. "
                "Use four numbers 'west,south,east,north', for example -74.06,40.64,-73.78,40.83."
            ) from None
        return cls(w, s, e, n)

    def as_tuple(self) -> tuple[float, float, float, float]:
        return (self.west, self.south, self.east, self.north)

    def to_dict(self) -> dict[str, float]:
        return {"west": self.west, "south": self.south, "east": self.east, "north": self.north}

    @property
    def width_km(self) -> float:
        """East-west extent at the box's middle latitude (spherical Earth, R = 6371 km)."""
        mid = math.radians((self.south + self.north) / 2)
        return math.radians(self.east - self.west) * 6371.0 * math.cos(mid)

    @property
    def height_km(self) -> float:
        return math.radians(self.north - self.south) * 6371.0

    def contains(self, lon: NDArray[np.float64], lat: NDArray[np.float64]) -> NDArray[np.bool_]:
        return (lon >= self.west) & (lon <= self.east) & (lat >= self.south) & (lat <= self.north)


#: Public extents a curator can pick instead of typing numbers.  They come from
#: public geography (city or state outlines), not from any dataset.
PRESETS: dict[str, Bounds] = {
    "New York City core (Manhattan, Brooklyn, Queens, Bronx)": Bounds(-74.06, 40.56, -73.70, 40.92),
    "New York City (all five boroughs)": Bounds(-74.26, 40.49, -73.70, 40.92),
    "Rhode Island": Bounds(-71.91, 41.09, -71.08, 42.02),
    "Contiguous United States": Bounds(-125.0, 24.4, -66.9, 49.4),
    "Whole world": Bounds(-180.0, -90.0, 180.0, 90.0),
}


@dataclass(frozen=True)
class Grid:
    """A regular ``rows x cols`` grid over public bounds."""

    bounds: Bounds
    rows: int
    cols: int

    def __post_init__(self) -> None:
        for name, v in (("rows", self.rows), ("cols", self.cols)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise ParameterError(f"Grid {name} must be a whole number (got {v!r}).")
            if v < 1 or v > MAX_SIDE:
                raise ParameterError(
                    f"Grid {name} must be between 1 and {MAX_SIDE} (got {v}). "
                    "Choose a coarser grid; a finer grid costs memory, not privacy."
                )
        if self.rows * self.cols > MAX_CELLS:
            raise ParameterError(
                f"A {self.rows} x {self.cols} grid has {self.rows * self.cols:,} cells, more than "
                f"the limit of {MAX_CELLS:,}. Choose fewer rows or columns."
            )

    @classmethod
    def parse(cls, bounds: Bounds, text: str) -> Grid:
        """Parse ``"R,C"`` or ``"RxC"`` or a single ``"N"`` (square)."""
        parts = [p for p in str(text).lower().replace("x", ",").split(",") if p.strip()]
        try:
            nums = [int(p) for p in parts]
        except ValueError:
            raise ParameterError(
                f"Grid '{text}' must be 'rows,cols' in whole numbers, for example 1024,1024."
            ) from None
        if len(nums) == 1:
            nums = nums * 2
        if len(nums) != 2:
            raise ParameterError(f"Grid '{text}' must be 'rows,cols', for example 1024,1024.")
        return cls(bounds, nums[0], nums[1])

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.cols)

    @property
    def n_cells(self) -> int:
        return self.rows * self.cols

    @property
    def dlon(self) -> float:
        return (self.bounds.east - self.bounds.west) / self.cols

    @property
    def dlat(self) -> float:
        return (self.bounds.north - self.bounds.south) / self.rows

    def lon_edges(self) -> NDArray[np.float64]:
        return np.linspace(self.bounds.west, self.bounds.east, self.cols + 1)

    def lat_edges(self) -> NDArray[np.float64]:
        return np.linspace(self.bounds.south, self.bounds.north, self.rows + 1)

    def cell_area_km2(self) -> float:
        """Area of one cell at the domain's middle latitude (for densities per km²)."""
        return self.bounds.width_km * self.bounds.height_km / self.n_cells

    def rect_lonlat(self, rects: NDArray[np.int64]) -> NDArray[np.float64]:
        """Convert ``(k, 4)`` cell rectangles ``(r0, r1, c0, c1)`` to ``(k, 4)`` lon/lat
        boxes ``(west, south, east, north)``."""
        rects = np.asarray(rects, dtype=np.int64).reshape(-1, 4)
        lon_e = self.lon_edges()
        lat_e = self.lat_edges()
        return np.column_stack(
            [lon_e[rects[:, 2]], lat_e[rects[:, 0]], lon_e[rects[:, 3]], lat_e[rects[:, 1]]]
        )

    def to_dict(self) -> dict[str, object]:
        return {"rows": self.rows, "cols": self.cols, "bounds": self.bounds.to_dict()}

    def cell_index(
        self, lon: NDArray[np.float64], lat: NDArray[np.float64]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
        """Row and column of every point, and the mask of points inside the bounds.

        Points outside the bounds get index -1.  Points exactly on the east or
        north edge belong to the last column / row.
        """
        lon = np.asarray(lon, dtype=np.float64)
        lat = np.asarray(lat, dtype=np.float64)
        inside = self.bounds.contains(lon, lat)
        col = np.full(lon.shape, -1, dtype=np.int64)
        row = np.full(lat.shape, -1, dtype=np.int64)
        col[inside] = edge_index(self.lon_edges(), lon[inside])
        row[inside] = edge_index(self.lat_edges(), lat[inside])
        return row, col, inside


def edge_index(edges: NDArray[np.float64], v: NDArray[np.float64]) -> NDArray[np.int64]:
    """``searchsorted(edges, v, side="right") - 1`` clipped to the cells, for ``v`` within the edges.

    The cells are the very edges the exports publish, so a point on an edge falls in the cell
    whose box starts there.  ``floor((v - lo) / step)`` can be off by one from them, so it is
    corrected against the edges until it is exact: the same answer as searchsorted, about five
    times faster on unsorted points (no binary search per point).

    >>> e = np.linspace(0.0, 1.0, 4)
    >>> edge_index(e, np.array([0.0, 1 / 3, 0.5, 1.0])).tolist()
    [0, 1, 1, 2]
    """
    n = edges.size - 1
    step = (edges[-1] - edges[0]) / n
    with np.errstate(invalid="ignore", divide="ignore"):
        i = np.clip(np.floor((v - edges[0]) / step), 0, n - 1).astype(np.int64)
    while True:
        down = (i > 0) & (v < edges[i])
        up = (i < n - 1) & (v >= edges[np.minimum(i + 1, n)])
        if not (down.any() or up.any()):
            return i
        i = i - down + up


@dataclass(frozen=True)
class Aggregate:
    """The confidential frequency matrix and what was dropped on the way.

    ``counts`` and ``n_outside``/``n_capped`` are curator-only: they never reach an
    export.  ``sensitivity`` is the L1 sensitivity of ``counts`` under the unit of
    privacy (1 for one record; the cap k when one person may add up to k points).
    """

    grid: Grid
    counts: NDArray[np.int64]
    n_outside: int
    n_capped: int
    sensitivity: int
    user_cap: int | None

    @property
    def total(self) -> int:
        return int(self.counts.sum())


def cap_user_contributions(
    user: NDArray[np.generic], cap: int, lon: NDArray[np.float64], lat: NDArray[np.float64]
) -> NDArray[np.bool_]:
    """Mask keeping at most ``cap`` records per user.

    A user keeps the ``cap`` records with the smallest pseudo-random key
    ``frac(lon * A + lat * B)`` (ties by ``lon``, ``lat``); ids are compared as canonical text
    (``7``, ``"007"`` and ``7.0`` are one person).  The rule depends on the records alone, not
    on their order in the file, so the DuckDB and Spark engines, which scan files in parallel,
    keep exactly the same records (:mod:`dpcore.data.persons`).  Which records are kept does
    not affect privacy: after capping, adding or removing one person changes at most ``cap``
    cells by one each, so the L1 sensitivity of the histogram is ``cap`` whatever the rule.
    """
    if not isinstance(cap, (int, np.integer)) or cap < 1:
        raise ParameterError(f"The cap on records per person must be a whole number >= 1 (got {cap!r}).")
    return cap_mask_points(person_codes(np.asarray(user)), np.asarray(lon),
                                         np.asarray(lat), int(cap))


def aggregate_points(
    lon: NDArray[np.float64],
    lat: NDArray[np.float64],
    grid: Grid,
    *,
    user: NDArray[np.generic] | None = None,
    user_cap: int | None = None,
) -> Aggregate:
    """Points -> frequency matrix over a public grid.

    Parameters
    ----------
    lon, lat
        Coordinates in degrees.
    grid
        The public grid.
    user, user_cap
        Optional user ids and the cap on records per user.  With a cap, the
        histogram's L1 sensitivity is ``user_cap`` (one person adds up to that
        many points); without, every record is its own unit and it is 1.

    Notes
    -----
    The cap is applied *before* dropping points outside the bounds, so that the
    sensitivity argument holds for any person (their capped records either fall
    inside or are dropped).
    """
    lon = np.asarray(lon, dtype=np.float64)
    lat = np.asarray(lat, dtype=np.float64)
    n_capped = 0
    sens = 1
    if user is not None:
        if user_cap is None:
            raise ParameterError(
                "A user-id column was given without a cap on records per person. "
                "Set the cap (for example 10) or remove the user-id column."
            )
        keep = cap_user_contributions(np.asarray(user), int(user_cap), lon, lat)
        n_capped = int((~keep).sum())
        lon, lat = lon[keep], lat[keep]
        sens = int(user_cap)
    elif user_cap is not None and user_cap != 1:
        raise ParameterError(
            "A cap on records per person needs a user-id column. Choose the column that "
            "identifies a person, or use 'one record' as the unit of privacy."
        )
    row, col, inside = grid.cell_index(lon, lat)
    flat = row[inside] * grid.cols + col[inside]
    counts = np.bincount(flat, minlength=grid.n_cells).astype(np.int64).reshape(grid.shape)
    return Aggregate(
        grid=grid,
        counts=counts,
        n_outside=int((~inside).sum()),
        n_capped=n_capped,
        sensitivity=sens,
        user_cap=int(user_cap) if user is not None else None,
    )


def block_edges(n: int, m: int) -> NDArray[np.int64]:
    """Split ``n`` fine cells into ``m`` nearly equal blocks; returns ``m + 1`` edges.

    Used by coarse grids (UG) that must be unions of the curator's fine cells so
    that every mechanism releases rectangles of the same public grid.
    """
    m = max(1, min(int(m), int(n)))
    return np.round(np.linspace(0, n, m + 1)).astype(np.int64)


def block_rects(grid: Grid, m_rows: int, m_cols: int) -> NDArray[np.int64]:
    """Rectangles ``(r0, r1, c0, c1)`` of an ``m_rows x m_cols`` block grid, row-major (public
    geometry, made at each call: about 0.1 ms, once per release or figure).

    >>> block_rects(Grid(Bounds(0, 0, 1, 1), 4, 4), 2, 1).tolist()
    [[0, 2, 0, 4], [2, 4, 0, 4]]
    """
    re = block_edges(int(grid.rows), int(m_rows))
    ce = block_edges(int(grid.cols), int(m_cols))
    r0, c0 = np.meshgrid(re[:-1], ce[:-1], indexing="ij")
    r1, c1 = np.meshgrid(re[1:], ce[1:], indexing="ij")
    return np.column_stack([r0.ravel(), r1.ravel(), c0.ravel(), c1.ravel()]).astype(np.int64)


def block_sums(values: NDArray[np.number], row_edges: NDArray[np.int64], col_edges: NDArray[np.int64]) -> NDArray[np.number]:
    """Sums of ``values`` over the blocks ``row_edges[i]:row_edges[i + 1]`` × ``col_edges[j]:col_edges[j + 1]``
    (strictly increasing edges from 0 to the grid's side, e.g. :func:`block_edges`), an ``(m_rows, m_cols)``
    array whose row-major order is :func:`block_rects`'; one pass over the cells (``np.add.reduceat``
    along the rows first, in memory order: 10 times faster than along the columns first on a 4,096²
    grid), no prefix sums.

    >>> block_sums(np.arange(16).reshape(4, 4), np.array([0, 1, 4]), np.array([0, 2, 4]))
    array([[ 1,  5],
           [51, 63]])
    """
    v = np.asarray(values)
    return np.add.reduceat(np.add.reduceat(v, np.asarray(col_edges)[:-1], axis=1), np.asarray(row_edges)[:-1], axis=0)


#: :func:`cumsum_down` adds row by row from this many columns on (fewer: numpy's own axis-0 cumsum).
ROWWISE_FROM_COLS = 64


def cumsum_down(values: NDArray[np.number], out: NDArray[np.number] | None = None) -> NDArray[np.number]:
    """``np.cumsum(values, axis=0, out=out)`` of a 2-D array, bit for bit, added one row at a time.

    A cumulative sum is sequential (row i = row i - 1 + values[i], no pairwise summation), so adding
    whole rows in order makes the same floating-point sums; numpy's own axis-0 cumsum walks each
    column across memory and was 4 to 5 times slower on a C-ordered grid (1,024²: 9.6 vs 2.0 ms;
    4,096²: 157 vs 40 ms).  ``out`` may be ``values`` itself (in place); an ``out`` that shares
    memory with ``values`` otherwise (a shifted view: row i would add a row already overwritten),
    narrow arrays, other layouts and mixed types that numpy's cumsum would cast differently keep
    numpy's cumsum (which buffers overlapping operands).  ``values`` must be 2-D (ValueError).

    >>> v = np.arange(12.0).reshape(3, 4) / 7
    >>> bool((cumsum_down(np.repeat(v, 20, axis=1)) == np.cumsum(np.repeat(v, 20, axis=1), axis=0)).all())
    True
    """
    v = np.asarray(values)
    if v.ndim != 2:  # its callers sum grids; a 1-D input used to fail on v[:0, :0] with an IndexError
        raise ValueError(f"cumsum_down sums the rows of a 2-D array; got a {v.ndim}-D array of shape {v.shape}.")
    if out is None:
        out = np.empty(v.shape, dtype=np.cumsum(v[:0, :0], axis=0).dtype)
    if (v.shape[1] < ROWWISE_FROM_COLS or out.shape != v.shape or v.dtype != out.dtype
            or v.strides[1] != v.itemsize or out.strides[1] != out.itemsize  # rows laid out contiguously
            or (out is not v and np.may_share_memory(out, v))):
        return np.cumsum(v, axis=0, out=out)
    if v.shape[0]:
        if out is not v:
            out[0] = v[0]
        for i in range(1, v.shape[0]):
            np.add(out[i - 1], v[i], out=out[i])
    return out


def paint_rects(rects: NDArray[np.int64], per_cell: NDArray[np.float64], shape: tuple[int, int]) -> NDArray[np.float64]:
    """Grid of ``shape`` holding ``per_cell[i]`` on every cell of rectangle ``rects[i]`` ``(r0, r1, c0,
    c1)`` (values add where rectangles overlap), by a 2-D difference array: O(rectangles + cells).

    >>> paint_rects(np.array([[0, 2, 0, 1], [1, 2, 1, 3]]), np.array([1.0, 5.0]), (2, 3)).tolist()
    [[1.0, 0.0, 0.0], [1.0, 5.0, 5.0]]
    """
    r = np.asarray(rects, dtype=np.int64).reshape(-1, 4)
    v = np.asarray(per_cell, dtype=np.float64)
    diff = np.zeros((shape[0] + 1, shape[1] + 1), dtype=np.float64)
    np.add.at(diff, (r[:, 0], r[:, 2]), v)
    np.add.at(diff, (r[:, 1], r[:, 2]), -v)
    np.add.at(diff, (r[:, 0], r[:, 3]), -v)
    np.add.at(diff, (r[:, 1], r[:, 3]), v)
    # summed in place: the one grid-sized array (4,096²: 134 MB) is the output, as a view
    return np.cumsum(cumsum_down(diff, out=diff), axis=1, out=diff)[:-1, :-1]


def rect_sums(counts: NDArray[np.integer], rects: NDArray[np.int64]) -> NDArray[np.int64]:
    """Sum of ``counts`` over each rectangle, by 2-D prefix sums (O(cells + k))."""
    P = prefix_sums(counts)
    return rect_sums_from_prefix(P, rects)


def prefix_sums(values: NDArray[np.number]) -> NDArray[np.number]:
    """2-D prefix sums with a zero first row and column, summed in place (no grid-sized temporary:
    a 4,096² grid's is 134 MB); integers along the rows first, in memory order (exact in any order:
    2 to 5 times faster on a 4,096² grid), floats along the columns first, as always (the same
    rounding).

    >>> prefix_sums(np.array([[1, 2], [3, 4]])).tolist()
    [[0, 0, 0], [0, 1, 3], [0, 4, 10]]
    """
    v = np.asarray(values)
    integer = np.issubdtype(v.dtype, np.integer)
    dtype = np.int64 if integer else np.float64
    P = np.zeros((v.shape[0] + 1, v.shape[1] + 1), dtype=dtype)
    inner = P[1:, 1:]
    first, second = (1, 0) if integer else (0, 1)
    if first == 0 and v.dtype == dtype:
        cumsum_down(v, out=inner)
    else:
        np.cumsum(v, axis=first, dtype=dtype, out=inner)
    if second == 0:
        cumsum_down(inner, out=inner)
    else:
        np.cumsum(inner, axis=second, out=inner)
    return P


def rect_sums_from_prefix(P: NDArray[np.number], rects: NDArray[np.int64]) -> NDArray[np.number]:
    r = np.asarray(rects, dtype=np.int64).reshape(-1, 4)
    r0, r1, c0, c1 = r[:, 0], r[:, 1], r[:, 2], r[:, 3]
    return P[r1, c1] - P[r0, c1] - P[r1, c0] + P[r0, c0]


def validate_rects(grid: Grid, rects: Sequence[Sequence[int]] | NDArray[np.int64]) -> NDArray[np.int64]:
    r = np.asarray(rects, dtype=np.int64).reshape(-1, 4)
    bad = (r[:, 0] < 0) | (r[:, 1] > grid.rows) | (r[:, 0] >= r[:, 1]) | (r[:, 2] < 0) | (
        r[:, 3] > grid.cols
    ) | (r[:, 2] >= r[:, 3])
    if bad.any():
        raise ParameterError(f"{int(bad.sum())} rectangles do not lie inside the {grid.rows} x {grid.cols} grid.")
    return r
