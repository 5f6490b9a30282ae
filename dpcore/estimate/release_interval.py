"""The data user's interval from a release's files: any union of areas or a drawn polygon (issue 25).

A release's data users' files (``measurements.csv`` or, for a large release, ``measurements.parquet``,
and ``design.json``; see
:mod:`dpcore.estimate.data_users`) are all a data user needs: :class:`ReleaseIntervals` reads them
once (name -> bytes, as the app stores them and the CLI writes them), solves the generalised
least-squares estimate once (:func:`dpcore.estimate.gls.gls_estimate`), and then answers any number
of questions:

* :meth:`ReleaseIntervals.of_nodes`: the union of measured nodes (areas of any level; a node sums
  its finest cells, and a cell under two chosen nodes counts once), by
  :func:`dpcore.estimate.gls.union_interval`;
* :meth:`ReleaseIntervals.of_polygons`: one answer per polygon of a GeoJSON, by
  :func:`dpcore.estimate.polygon_interval.polygon_interval` (cut cells weighted by their area
  share, the interval widened by their modelled apportionment error, with the bracket
  ``[inside, touching]``).

Cell shapes are ``design.json``'s ``cell_bounds`` (points) or, for areas, the finest level's
GeoJSON among the files (features with a ``code`` property).  Nothing here reads data or draws
noise: every input is a published file.

>>> import orjson
>>> design = {"schema": "dpcore-design/1", "kind": "hierarchy", "cells": ["a", "b"],
...           "nodes": {"t": [0, 1], "a": [0], "b": [1]}, "invariants": [], "edges": [["t", "a"], ["t", "b"]],
...           "cell_bounds": [[0, 0, 1, 1], [1, 0, 2, 1]]}
>>> meas = (b"measurement_id,level,node,value,family,scale,variance,share,phase\\n"
...         b"0,total,t,10,discrete_gaussian,1,1,0.5,count\\n1,leaf,a,4,discrete_gaussian,1,1,0.5,count\\n"
...         b"2,leaf,b,5,discrete_gaussian,1,1,0.5,count\\n")
>>> ri = ReleaseIntervals({"design.json": orjson.dumps(design), "measurements.csv": meas})
>>> ri.nodes()
[('total', 't'), ('leaf', 'a'), ('leaf', 'b')]
>>> r = ri.of_nodes(["a", "b"])
>>> round(r["estimate"], 3), r["cells"]
(9.667, 2)
>>> square = b'{"type":"FeatureCollection","features":[{"type":"Feature","properties":{},' \\
...          b'"geometry":{"type":"Polygon","coordinates":[[[0.5,0],[2,0],[2,1],[0.5,1],[0.5,0]]]}}]}'
>>> [p] = ri.of_polygons(square)
>>> p["cells_inside"], p["cells_cut"]
(1, 1)
"""

from __future__ import annotations

import functools
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import orjson
import pandas as pd
from numpy.typing import NDArray

from dpcore.errors import InputError, ParameterError
from dpcore.estimate.apportionment import SubcellRho, subcell_overdispersion
from dpcore.estimate.data_user_format import MEASUREMENT_FILES, measurements_in, read_measurements
from dpcore.estimate.gls import Measurements, gls_estimate, measurements_from, union_interval
from dpcore.estimate.polygon_interval import CellIndex, Density, lattice_counts, polygon_interval

__all__ = ["INTERVAL_FILES", "ReleaseIntervals", "cell_shapes", "clean", "offers_intervals", "read_density",
           "read_polygons", "weighting"]

#: The files an interval is computed from: the design and the measurements (CSV, or Parquet for a
#: large release: :data:`~dpcore.estimate.data_user_format.MEASUREMENT_FILES`).
INTERVAL_FILES = ("design.json", *MEASUREMENT_FILES)


def offers_intervals(files: Mapping[str, bytes]) -> bool:
    """Whether a release's files hold the data users' measurements (every file an interval needs).

    >>> offers_intervals({"design.json": b"{}", "measurements.parquet": b""}), offers_intervals({"design.json": b""})
    (True, False)
    """
    return "design.json" in files and measurements_in(files) is not None


def clean(d: Mapping[str, Any]) -> dict[str, Any]:
    """An answer with non-finite floats as None (JSON has no NaN).

    >>> clean({"sd": float("nan"), "estimate": 1.0})
    {'sd': None, 'estimate': 1.0}
    """
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def cell_shapes(design: Mapping[str, Any], files: Mapping[str, bytes]) -> NDArray[Any]:
    """Every finest cell's shape, in the order of ``design["cells"]``: the rectangles of
    ``cell_bounds`` (points), else the GeoJSON among ``files`` whose ``code`` properties name the
    most cells (an area's boundary; cells without one get an empty shape)."""
    import shapely

    bounds = design.get("cell_bounds")  # a list read from design.json, or the writer's own array
    if bounds is not None and len(bounds):
        b = np.asarray(bounds, dtype=float)
        return shapely.box(b[:, 0], b[:, 1], b[:, 2], b[:, 3])
    cells = [str(c) for c in design["cells"]]
    pos = {c: i for i, c in enumerate(cells)}
    best, best_hits = None, 0
    for name in sorted(n for n in files if n.endswith(".geojson")):
        feats = orjson.loads(files[name]).get("features") or []
        codes = [str((f.get("properties") or {}).get("code")) for f in feats]
        hits = [i for i, c in enumerate(codes) if c in pos and feats[i].get("geometry")]
        if len(hits) > best_hits:
            shapes = np.full(len(cells), shapely.Polygon(), dtype=object)
            shapes[[pos[codes[i]] for i in hits]] = shapely.from_geojson(
                [orjson.dumps(feats[i]["geometry"]).decode() for i in hits])
            best, best_hits = shapes, len(hits)
    if best is None:
        raise InputError("This release has no cell shapes: design.json gives no cell_bounds and no GeoJSON of the "
                         "finest level is among its files. Release with boundaries, or choose areas by code.")
    return best


def read_density(data: bytes | str) -> Density:
    """A public density (:class:`~dpcore.estimate.polygon_interval.Density`) from a GeoJSON of polygons
    in lon/lat, each with its ``density`` property (1 where the property is missing: a mask).

    >>> d = read_density(b'{"type":"Feature","properties":{"density":2.5},'
    ...                  b'"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0]]]}}')
    >>> d.values.tolist()
    [2.5]
    """
    import geopandas

    try:
        g = geopandas.read_file(io.BytesIO(data) if isinstance(data, bytes) else data)
    except Exception as err:  # pyogrio/fiona raise their own errors for a file that is not GeoJSON
        raise InputError(f"The density file could not be read as GeoJSON ({err}); give polygons in "
                         "longitude/latitude with a numeric 'density' property.") from err
    if g.crs is not None and not g.crs.equals("EPSG:4326"):
        g = g.to_crs("EPSG:4326")
    g = g[g.geometry.notna() & g.geometry.geom_type.isin(["Polygon", "MultiPolygon"])]
    if g.empty:
        raise InputError("The density file holds no polygons: give areas with a numeric 'density' property.")
    values = pd.to_numeric(g["density"], errors="coerce") if "density" in g else pd.Series(1.0, index=g.index)
    if values.isna().any():
        raise InputError("Every density polygon needs a number in its 'density' property (or none of them: a mask).")
    return Density(g.geometry.to_numpy(), values.to_numpy(float))


def read_polygons(data: bytes | str) -> list[Any]:
    """The (multi)polygons of a GeoJSON (bytes, or a path), in longitude/latitude (EPSG:4326).

    >>> [p] = read_polygons(b'{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0]]]}')
    >>> p.area
    0.5
    """
    import geopandas

    try:
        g = geopandas.read_file(io.BytesIO(data) if isinstance(data, bytes) else data)
    except Exception as err:  # pyogrio/fiona raise their own errors for a file that is not GeoJSON
        raise InputError(f"The polygon file could not be read as GeoJSON ({err}); give a GeoJSON of polygons "
                         "in longitude/latitude.") from err
    if g.empty:
        raise InputError("The polygon file has no features: give a GeoJSON with one polygon per area.")
    if g.crs is not None and not g.crs.equals("EPSG:4326"):
        g = g.to_crs("EPSG:4326")
    polys = [_valid(p) for p in g.geometry if p is not None and p.geom_type in ("Polygon", "MultiPolygon")]
    if not polys:
        raise InputError("The polygon file holds no Polygon or MultiPolygon; draw an area, not points or lines.")
    return polys


def _valid(p: Any) -> Any:
    """``p``, or its polygonal part made valid (a lasso drawn across itself is a bow tie: two areas).

    >>> import shapely
    >>> round(_valid(shapely.Polygon([(0, 0), (2, 2), (2, 0), (0, 2)])).area, 6)
    2.0
    """
    import shapely

    if p.is_valid:
        return p
    fixed = shapely.make_valid(p)
    if fixed.geom_type == "GeometryCollection":
        fixed = shapely.union_all([g for g in fixed.geoms if g.geom_type in ("Polygon", "MultiPolygon")])
    return fixed


#: At most this many polygon answers are kept per release (then the kept ones are dropped).
MAX_KEPT_ANSWERS = 256


class ReleaseIntervals:
    """One release's measurements with their GLS estimate, solved once; then intervals for any unions.

    Parameters
    ----------
    files : mapping of str to bytes
        The release's files (at least ``measurements.csv`` and ``design.json``; a GeoJSON of the
        finest areas for polygons over areas).
    """

    def __init__(self, files: Mapping[str, bytes]) -> None:
        if not offers_intervals(files):
            raise ParameterError("This release has no measurements.csv (or measurements.parquet) and design.json (the "
                                 "data users' files), so no interval can be computed from it; release it with this "
                                 "version.")
        self._files = files
        # design.json names the measurements' file only to choose between two present (an older
        # release's other file in a folder); with one present it is not read here: parsing the O/D
        # demo's design took 0.3 s of the Release step, which only lists the nodes to pick
        present = [n for n in MEASUREMENT_FILES if n in files]
        self._measurements = present[0] if len(present) == 1 else measurements_in(files, self.design)
        self._shapes: CellIndex | None = None
        self._answers: dict[tuple[Any, ...], dict[str, Any]] = {}  # polygon answers, keyed by the polygon
        self._lattice_rho: dict[float, SubcellRho | None] = {}

    @functools.cached_property
    def design(self) -> dict[str, Any]:
        """The release's ``design.json``, parsed on first use (an interval, the cells' shapes)."""
        return orjson.loads(self._files["design.json"])

    # The measurements are read, the design built and the GLS estimate solved on the first interval
    # asked, not when the release is shown: listing the nodes to pick reads three columns only.
    @functools.cached_property
    def frame(self) -> pd.DataFrame:
        """The measurements (``measurements.csv`` or ``.parquet``) as a frame (node and level codes as text)."""
        return read_measurements(self._files[self._measurements], self._measurements)

    @functools.cached_property
    def m(self) -> Measurements:
        """The release's linear measurements (:func:`~dpcore.estimate.gls.measurements_from`)."""
        return measurements_from(self.design, self.frame)

    @functools.cached_property
    def estimate(self) -> NDArray[np.float64]:
        """The GLS estimate of every finest cell, solved once."""
        return gls_estimate(self.m)

    def nodes(self) -> list[tuple[str, str]]:
        """``(level, node)`` of every measured node, in the order of the measurements (coarse first).

        Read once: the Release step lists them on every rerun of its page."""
        return list(self._nodes)

    @functools.cached_property
    def _nodes(self) -> tuple[tuple[str, str], ...]:
        f = self.__dict__.get("frame")
        if f is None:
            f = read_measurements(self._files[self._measurements], self._measurements, ["phase", "level", "node"])
        rows = f.loc[f["phase"] == "count", ["level", "node"]].drop_duplicates("node")
        # tolist: one conversion per column (iterating an Arrow-backed column boxes element by element)
        return tuple(zip(rows["level"].astype(str).tolist(), rows["node"].astype(str).tolist(), strict=True))

    def of_nodes(self, nodes: Sequence[str], coverage: float = 0.9) -> dict[str, Any]:
        """The union of ``nodes`` (codes of ``design.json``'s nodes, any level): each finest cell under
        them weighs 1 once.  Adds ``cells`` (how many finest cells the union covers)."""
        cover = self.design["nodes"]
        unknown = [c for c in nodes if str(c) not in cover]
        if unknown or not nodes:
            raise ParameterError(f"Choose areas of this release (unknown: {', '.join(map(str, unknown[:5]))})."
                                 if unknown else "Choose at least one area.")
        w = np.zeros(self.m.n)
        w[np.unique(np.concatenate([np.asarray(cover[str(c)], dtype=np.int64) for c in nodes]))] = 1.0
        return clean({**union_interval(self.m, w, coverage, estimate=self.estimate), "cells": int(w.sum())})

    def shapes(self) -> CellIndex:
        """The finest cells' shapes (:func:`cell_shapes`) with their spatial index, built on first use."""
        if self._shapes is None:
            self._shapes = CellIndex(cell_shapes(self.design, self._files))
        return self._shapes

    @functools.cached_property
    def rho(self) -> SubcellRho | None:
        """The release's over-dispersion of points within a cell
        (:func:`~dpcore.estimate.apportionment.subcell_overdispersion`), estimated once."""
        return subcell_overdispersion(self.m, self.shapes().area)

    def lattice_rho(self, precision: float) -> SubcellRho | None:
        """:attr:`rho` read against the cells' positions on the coordinates' lattice
        (:func:`~dpcore.estimate.polygon_interval.lattice_counts`), estimated once per ``precision``."""
        if precision not in self._lattice_rho:
            self._lattice_rho[precision] = subcell_overdispersion(self.m, lattice_counts(self.shapes().geoms, precision))
        return self._lattice_rho[precision]

    def of_polygons(self, geojson: bytes | str, coverage: float = 0.9, density: Density | None = None,
                    apportionment: str = "overdispersed", precision: float | None = None) -> list[dict[str, Any]]:
        """One answer per polygon of ``geojson`` (:func:`read_polygons`): the estimate, ``sd``, ``low``,
        ``high`` (noise and the cut cells' ``apportionment`` error: ``"overdispersed"``, ``"binomial"``
        or ``"none"``), the bracket ``inside``/``touching`` and a ``warning`` when cut cells carry over
        20 %.  ``density``: a public density to apportion cut cells by (:func:`read_density`);
        ``precision``: the coordinates' public precision in degrees (cut cells weigh their share of its
        lattice; :func:`~dpcore.estimate.polygon_interval.polygon_interval`); when not given, the precision
        the curator recorded for the release (:attr:`recorded_precision`), unless a ``density`` is given.
        Each answer states its ``weighting`` (:func:`weighting`) and the ``precision`` it used.

        Each answer is kept, keyed by the polygon (its WKB), the coverage, the model and the density's
        :attr:`~dpcore.estimate.polygon_interval.Density.key`: a polygon asked again (the app's reruns)
        is not recomputed.  Copies are returned."""
        import shapely

        polys = read_polygons(geojson)
        given = precision
        if precision is None and density is None:
            precision = self.recorded_precision
        how = weighting(density is not None, precision, recorded=given is None)
        ask = (float(coverage), apportionment, None if density is None else density.key, precision)
        keys = [(shapely.to_wkb(p), *ask) for p in polys]
        for key, p in zip(keys, polys, strict=True):
            if key not in self._answers:  # an app rerun asks the same polygons again: answered once
                if len(self._answers) >= MAX_KEPT_ANSWERS:
                    self._answers.clear()
                rho = None if apportionment != "overdispersed" or (precision and density is not None) else \
                    self.rho if precision is None else self.lattice_rho(precision)
                self._answers[key] = clean(polygon_interval(self.m, self.shapes(), p, coverage, estimate=self.estimate,
                                                            density=density, apportionment=apportionment, rho=rho,
                                                            precision=precision))
        return [{**self._answers[k], "weighting": how, "precision": precision} for k in keys]

    @property
    def recorded_precision(self) -> float | None:
        """The points' coordinate precision the curator stated when releasing (``design.json``'s
        ``coordinate_precision``, a public fact of the data's format), or None."""
        p = self.design.get("coordinate_precision")
        return None if p is None else float(p)


def weighting(density: bool, precision: float | None, recorded: bool = False) -> str:
    """How a polygon answer weighs its cut cells (the answer's ``weighting``).

    >>> weighting(False, 0.0001, recorded=True)
    "lattice shares at precision 0.0001° (the release's recorded coordinate precision)"
    >>> weighting(False, None), weighting(True, None)
    ('area shares', 'public density shares')
    """
    if density:
        return "public density shares"
    if precision is None:
        return "area shares"
    return f"lattice shares at precision {precision:g}° (" + (
        "the release's recorded coordinate precision)" if recorded else "as given)")
