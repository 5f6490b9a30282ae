"""Boundary files: public geography for bounds and map context.

:func:`read_boundaries` reads GeoJSON, GeoPackage or a zipped shapefile (zip archives checked
for bombs and unsafe members before anything is decompressed) and returns it in EPSG:4326 with
invalid geometries repaired; :func:`boundary_bounds` gives its bounding box.  The GeoJSON and
coordinate-system helpers here are shared with the point reader of :mod:`dpcore.data.tables`.
"""

from __future__ import annotations

import io
import re
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import numpy as np

from dpcore.data.limits import check_bytes
from dpcore.data.text import (
    MAX_ZIP_RATIO,
    MAX_ZIP_UNCOMPRESSED,
    TEXT_LEAD,
    ZIP_RATIO_FLOOR,
    DataSource,
    Source,
    binary_format,
    looks_like_json,
)
from dpcore.errors import InputError

__all__ = [
    "boundary_bounds",
    "read_boundaries",
]

if TYPE_CHECKING:
    import geopandas



def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def is_wgs84(crs: Any) -> bool:
    try:
        return crs.to_epsg() == 4326 or crs.equals("OGC:CRS84")
    except Exception:
        return False


def to_wgs84(gdf: geopandas.GeoDataFrame, label: str) -> geopandas.GeoDataFrame:
    """``gdf`` in longitude/latitude (EPSG:4326): as it is when already there, else converted from its
    coordinate reference system (which it must have); a CRS that cannot be converted is refused with
    what to do, for boundary files and point files alike."""
    if is_wgs84(gdf.crs):
        return gdf
    try:
        return gdf.to_crs(4326)
    except Exception as err:
        raise InputError(
            f"{label} uses a coordinate system ({gdf.crs}) that could not be converted to "
            f"longitude/latitude ({first_line(err)}). Export it in WGS84 (EPSG:4326)."
        ) from err


GEOJSON_TYPES = frozenset({
    "FeatureCollection", "Feature", "Point", "MultiPoint", "LineString", "MultiLineString", "Polygon",
    "MultiPolygon", "GeometryCollection",
})


def geojson_problem(raw: bytes, err: BaseException) -> str:
    """What is wrong with JSON content GDAL refused, in words (not GDAL's /vsimem/ path)."""
    import json

    try:
        obj = json.loads(raw.decode("utf-8-sig", errors="replace"))
    except json.JSONDecodeError as e:
        return f"it is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}"
    except RecursionError:
        return "it is nested too deeply to be GeoJSON"
    if not isinstance(obj, dict) or obj.get("type") not in GEOJSON_TYPES:
        return 'it is JSON but not GeoJSON: it has no "type": "FeatureCollection"'
    text = first_line(err)
    return re.sub(r"'?/vsimem/\S+'?\s*", "", text) or "GDAL could not parse it"


def first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0][:200]


def read_boundaries(data: DataSource, filename: str | None = None) -> geopandas.GeoDataFrame:
    """Read a boundary file: GeoJSON, GeoPackage or a zipped shapefile.

    The format is recognised from the content (``{`` for GeoJSON, the SQLite
    header for GeoPackage, ``PK`` for a ZIP); a path to an unzipped ``.shp`` is
    read with its side files.

    * Zip archives are checked before anything is decompressed: members with an
      absolute path, a ``..`` component or a symbolic link are refused (path
      traversal), and so are archives that expand to more than 2 GiB, or to more
      than 200 times their compressed size once past 10 MiB (zip bombs).  The
      members are then extracted with the sizes counted as they are written, so
      a header that lies about sizes cannot get around the limit.  One
      shapefile (or GeoPackage/GeoJSON) per archive.
    * A GeoPackage with several layers must have exactly one polygon layer.
    * Features without geometry are dropped; none left is an error.
    * No CRS: EPSG:4326 is assumed if all coordinates lie in -180..180 / -90..90,
      otherwise an error asks for the ``.prj``.  Anything else is reprojected to
      EPSG:4326.
    * Invalid geometries are repaired with :func:`shapely.make_valid` (the
      ``"structure"`` method for polygons, which keeps them polygons).

    Parameters
    ----------
    data : bytes, str, os.PathLike or binary file object
        Content, path or uploaded file object.
    filename : str, optional
        Name for messages.

    Returns
    -------
    geopandas.GeoDataFrame
        In EPSG:4326, with a fresh RangeIndex.

    Raises
    ------
    InputError
        Unrecognised, unsafe, damaged or empty file, or no usable CRS.
    """
    import geopandas as gpd

    src = Source.from_data(data, filename)
    label = src.label
    check_bytes(src.size, "DPCORE_MAX_BOUNDARY_BYTES", label,
                "Simplify the boundaries (a generalised, cartographic file) or keep only the areas you release.")
    if src.path is not None and src.path.suffix.lower() == ".shp":
        gdf = _read_vector(lambda: gpd.read_file(src.path), label)
        return _clean_boundaries(gdf, label)
    raw = src.read_all()
    if not raw.strip(TEXT_LEAD):
        raise InputError(f"{label} is empty. Upload a GeoJSON, GeoPackage or zipped shapefile.")
    magic = binary_format(raw[:64])
    kind = magic[0] if magic is not None else None
    if kind == "zip":
        gdf = _read_zipped_boundaries(raw, label)
    elif kind == "sqlite":
        gdf = _read_gpkg(raw, label)
    elif looks_like_json(raw[:1024]):
        try:
            gdf = gpd.read_file(io.BytesIO(raw))
        except Exception as err:  # pyogrio/GDAL raise several types; all mean "cannot parse"
            raise InputError(
                f"{label} could not be read as a boundary file ({geojson_problem(raw, err)}). Export "
                "the boundaries again as a GeoJSON FeatureCollection of polygons."
            ) from err
    else:
        found = f" (it looks like {magic[1]})" if magic is not None else ""
        raise InputError(
            f"{label} is not a GeoJSON, GeoPackage or zipped shapefile{found}. Export the "
            "boundaries in one of those formats (zip the .shp, .shx, .dbf and .prj together)."
        )
    return _clean_boundaries(gdf, label)


def _read_vector(read: Callable[[], Any], label: str) -> geopandas.GeoDataFrame:
    try:
        return read()
    except Exception as err:  # pyogrio/GDAL raise several types; all mean "cannot parse"
        raise InputError(
            f"{label} could not be read as a boundary file ({first_line(err)}). Check that it "
            "is a valid GeoJSON, GeoPackage or zipped shapefile, and export it again if not."
        ) from err


def _read_gpkg(raw: bytes, label: str) -> geopandas.GeoDataFrame:
    import geopandas as gpd
    import pyogrio

    # From a real .gpkg file: GDAL warns about a GeoPackage read from memory (no
    # .gpkg extension), and silencing warnings is not thread-safe.
    with tempfile.TemporaryDirectory(prefix="dpcore-boundaries-") as tmp:
        path = Path(tmp) / "boundaries.gpkg"
        path.write_bytes(raw)
        found = _read_vector(lambda: pyogrio.list_layers(path), label)
        if len(found) == 0:
            raise InputError(f"{label} has no layers. Export the boundaries into it again.")
        layer = None
        if len(found) > 1:
            polygonal = [str(n) for n, t in found if t is not None and "polygon" in str(t).lower()]
            if len(polygonal) != 1:
                names = ", ".join(str(n) for n, _ in found)
                raise InputError(
                    f"{label} has {len(found)} layers ({names}) and it is not clear which holds "
                    "the boundaries. Save the layer with the areas as its own GeoPackage or "
                    "GeoJSON."
                )
            layer = polygonal[0]
        return _read_vector(lambda: gpd.read_file(path, layer=layer), label)


def _unsafe_member(info: zipfile.ZipInfo) -> bool:
    name = info.filename.replace("\\", "/")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return True
    if ".." in PurePosixPath(name).parts:
        return True
    mode = info.external_attr >> 16
    return (mode & 0o170000) == 0o120000  # symbolic link


_SHAPEFILE_PARTS = (".shp", ".shx", ".dbf", ".prj", ".cpg", ".qix", ".sbn", ".sbx", ".qpj")
_ZIPPED_LAYERS = (".shp", ".gpkg", ".geojson", ".json")


def _read_zipped_boundaries(raw: bytes, label: str) -> geopandas.GeoDataFrame:
    import geopandas as gpd

    try:
        zf = zipfile.ZipFile(io.BytesIO(raw))
        infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError) as err:
        raise InputError(
            f"{label} is a damaged ZIP file ({err}). Zip the shapefile's files again and upload "
            "the new archive."
        ) from err
    with zf:
        for info in infos:
            if _unsafe_member(info):
                raise InputError(
                    f"{label} contains a file with an unsafe path ('{info.filename}'); it was not "
                    "opened. Zip only the shapefile's own files (.shp, .shx, .dbf, .prj), without "
                    "absolute paths, '..' or links."
                )
        total = sum(i.file_size for i in infos)
        packed = sum(i.compress_size for i in infos)
        if total > MAX_ZIP_UNCOMPRESSED or (
            total > ZIP_RATIO_FLOOR and total > MAX_ZIP_RATIO * max(packed, 1)
        ):
            raise InputError(
                f"{label} would expand to {total / 1024**2:,.0f} MB from {packed / 1024**2:,.1f} MB "
                f"(limits: {MAX_ZIP_UNCOMPRESSED // 1024**3} GB and {MAX_ZIP_RATIO}x); it was not "
                "opened. Upload the boundary file itself, simplified if it is very large."
            )
        members = [
            i
            for i in infos
            if not i.is_dir()
            and not i.filename.startswith("__MACOSX/")
            and not PurePosixPath(i.filename).name.startswith("._")
        ]
        layers = [i for i in members if i.filename.lower().endswith(_ZIPPED_LAYERS)]
        if not layers:
            names = ", ".join(i.filename for i in members[:10]) or "nothing"
            raise InputError(
                f"{label} contains no shapefile (.shp) or other boundary file (it holds: {names}). "
                "Zip the .shp together with its .shx, .dbf and .prj files."
            )
        if len(layers) > 1:
            names = ", ".join(i.filename for i in layers[:10])
            raise InputError(
                f"{label} contains several boundary files ({names}). Upload one per zip file."
            )
        main = layers[0]
        stem = main.filename[: -len(PurePosixPath(main.filename).suffix)]
        needed = [main]
        if main.filename.lower().endswith(".shp"):
            needed = [
                i
                for i in members
                if i.filename[: -len(PurePosixPath(i.filename).suffix) or None] == stem
                and PurePosixPath(i.filename).suffix.lower() in _SHAPEFILE_PARTS
            ]
        with tempfile.TemporaryDirectory(prefix="dpcore-boundaries-") as tmp:
            root = Path(tmp)
            _extract(zf, needed, root, label)
            target = root / PurePosixPath(main.filename.replace("\\", "/"))
            return _read_vector(lambda: gpd.read_file(target), label)


def _extract(
    zf: zipfile.ZipFile, members: Iterable[zipfile.ZipInfo], root: Path, label: str
) -> None:
    """Extract members under root, counting real bytes against the declared sizes."""
    written_total = 0
    try:
        for info in members:
            dest = (root / PurePosixPath(info.filename.replace("\\", "/"))).resolve()
            if root.resolve() not in dest.parents:
                raise InputError(
                    f"{label} contains a file with an unsafe path ('{info.filename}'). Zip only "
                    "the shapefile's own files."
                )
            dest.parent.mkdir(parents=True, exist_ok=True)
            written = 0
            with zf.open(info) as fin, open(dest, "wb") as fout:
                while chunk := fin.read(1 << 20):
                    written += len(chunk)
                    written_total += len(chunk)
                    if written > info.file_size or written_total > MAX_ZIP_UNCOMPRESSED:
                        raise InputError(
                            f"{label} expands to more than it declares ('{info.filename}'); it "
                            "was not read. Zip the shapefile's files again and upload the archive."
                        )
                    fout.write(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as err:
        raise InputError(
            f"{label} could not be unzipped ({err}). Zip the shapefile's files again without "
            "a password and upload the new archive."
        ) from err


def _clean_boundaries(gdf: geopandas.GeoDataFrame, label: str) -> geopandas.GeoDataFrame:
    import geopandas as gpd
    import shapely

    if len(gdf) == 0:
        raise InputError(f"{label} has no features. Upload a boundary file with at least one area.")
    geometry = gdf.geometry
    present = (geometry.notna() & ~geometry.is_empty).to_numpy()
    if not present.any():
        raise InputError(
            f"{label} has {_plural(len(gdf), 'feature')} but none has a geometry. Export the "
            "boundaries again with their shapes."
        )
    gdf = gdf.loc[present].reset_index(drop=True)
    if gdf.crs is None:
        west, south, east, north = gdf.total_bounds
        if -180 <= west <= east <= 180 and -90 <= south <= north <= 90:
            gdf = gdf.set_crs(4326)
        else:
            raise InputError(
                f"{label} has no coordinate reference system and its coordinates (x {west:,.0f} "
                f"to {east:,.0f}, y {south:,.0f} to {north:,.0f}) are not longitude/latitude. "
                "Include the .prj file in the zip, or save the boundaries with a CRS (for "
                "example WGS84, EPSG:4326)."
            )
    else:
        gdf = to_wgs84(gdf, label)
    geoms = gdf.geometry.to_numpy()
    invalid = ~shapely.is_valid(geoms)
    if invalid.any():
        polygonal = np.isin(shapely.get_type_id(geoms), (3, 6))  # Polygon, MultiPolygon
        fixed = geoms.copy()
        poly_fix = invalid & polygonal
        other_fix = invalid & ~polygonal
        if poly_fix.any():
            fixed[poly_fix] = shapely.make_valid(
                geoms[poly_fix], method="structure", keep_collapsed=False
            )
        if other_fix.any():
            fixed[other_fix] = shapely.make_valid(geoms[other_fix])
        gdf = gdf.set_geometry(gpd.GeoSeries(fixed, crs=gdf.crs, index=gdf.index))
    if not np.all(np.isfinite(gdf.total_bounds)):
        raise InputError(
            f"{label} has coordinates that are not finite after conversion to longitude/"
            "latitude. Check its coordinate system and export it again."
        )
    return gdf


def boundary_bounds(gdf: geopandas.GeoDataFrame) -> tuple[float, float, float, float]:
    """West, south, east and north of the union of the boundaries, in degrees.

    Public when the boundary file is public: it depends on the geography only,
    never on the points.

    Parameters
    ----------
    gdf : geopandas.GeoDataFrame
        As returned by :func:`read_boundaries`; reprojected to EPSG:4326 if it
        is in another CRS.

    Returns
    -------
    (west, south, east, north) : tuple of float

    Raises
    ------
    InputError
        No geometry, or bounds that are not finite.
    """
    if gdf is None or len(gdf) == 0:
        raise InputError(
            "The boundary file has no areas, so it gives no bounds. Upload a boundary file "
            "with at least one area, or type the bounds."
        )
    if gdf.crs is not None and not is_wgs84(gdf.crs):
        gdf = gdf.to_crs(4326)
    west, south, east, north = (float(v) for v in gdf.total_bounds)
    if not all(np.isfinite((west, south, east, north))):
        raise InputError(
            "The boundary file has no usable geometry, so it gives no bounds. Upload a "
            "boundary file with at least one area, or type the bounds."
        )
    return west, south, east, north
