"""Tests of dpcore.data.boundaries: reading GeoJSON, GeoPackage and zipped shapefiles, repairing
geometries, refusing unsafe or unusable archives, and their bounds.
"""

from __future__ import annotations

import io
import time
import zipfile
from pathlib import Path

import pytest
from input_files import BOROUGHS, assert_actionable, feature_collection, need

from dpcore.data.boundaries import boundary_bounds, read_boundaries
from dpcore.errors import InputError

gpd = pytest.importorskip("geopandas")
shapely = pytest.importorskip("shapely")

NYC_BOUNDS = (-74.255591, 40.496115, -73.700009, 40.915533)


@pytest.fixture(scope="module")
def squares():
    """Two unit-ish squares near NYC, one invalid (a bow-tie), in EPSG:4326."""
    good = shapely.box(-74.0, 40.6, -73.9, 40.7)
    bowtie = shapely.Polygon([(-73.9, 40.6), (-73.8, 40.7), (-73.8, 40.6), (-73.9, 40.7)])
    return gpd.GeoDataFrame({"name": ["a", "b"]}, geometry=[good, bowtie], crs=4326)


def test_nyc_boroughs():
    path = need(BOROUGHS)
    gdf = read_boundaries(path)
    assert len(gdf) == 5
    assert gdf.crs.to_epsg() == 4326
    assert gdf.is_valid.all()  # the source has invalid polygons; they are repaired
    assert set(gdf.geom_type) <= {"Polygon", "MultiPolygon"}
    assert boundary_bounds(gdf) == pytest.approx(NYC_BOUNDS, abs=1e-6)
    same = read_boundaries(path.read_bytes(), "nyc_boroughs.geojson")
    assert len(same) == 5


def test_invalid_geometry_repaired(squares):
    buf = io.BytesIO()
    squares.to_file(buf, driver="GeoJSON")
    gdf = read_boundaries(buf.getvalue(), "b.geojson")
    assert gdf.is_valid.all()
    assert set(gdf.geom_type) <= {"Polygon", "MultiPolygon"}
    assert boundary_bounds(gdf) == pytest.approx((-74.0, 40.6, -73.8, 40.7))


def test_geopackage_in_bytes(squares):
    buf = io.BytesIO()
    squares.to_crs(2263).to_file(buf, driver="GPKG", layer="areas")  # NY state plane, feet
    gdf = read_boundaries(buf.getvalue(), "areas.gpkg")
    assert gdf.crs.to_epsg() == 4326
    assert len(gdf) == 2
    assert boundary_bounds(gdf) == pytest.approx((-74.0, 40.6, -73.8, 40.7), abs=1e-6)


def test_geopackage_with_two_polygon_layers(squares, tmp_path):
    path = tmp_path / "two.gpkg"
    squares.to_file(path, layer="one")
    squares.to_file(path, layer="two")
    with pytest.raises(InputError, match="2 layers") as err:
        read_boundaries(path.read_bytes(), "two.gpkg")
    assert_actionable(err, "'two.gpkg'", "one, two")


def _zip_dir(folder: Path, arcnames: dict[str, str] | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.iterdir()):
            zf.write(path, (arcnames or {}).get(path.name, path.name))
    return buf.getvalue()


def test_zipped_shapefile(squares, tmp_path):
    folder = tmp_path / "shp"
    folder.mkdir()
    squares.to_crs(32618).to_file(folder / "areas.shp")
    data = _zip_dir(folder)
    gdf = read_boundaries(data, "areas.zip")
    assert gdf.crs.to_epsg() == 4326
    assert gdf["name"].tolist() == ["a", "b"]
    assert boundary_bounds(gdf) == pytest.approx((-74.0, 40.6, -73.8, 40.7), abs=1e-6)
    # in a folder inside the zip, with macOS litter
    nested = _zip_dir(folder, {p.name: f"data/{p.name}" for p in folder.iterdir()})
    with zipfile.ZipFile(io.BytesIO(nested), "a") as zf:
        zf.writestr("__MACOSX/data/._areas.shp", b"junk")
    buf = io.BytesIO(nested)
    assert len(read_boundaries(buf.getvalue(), "nested.zip")) == 2


def test_zipped_shapefile_without_prj(squares, tmp_path):
    lonlat = tmp_path / "lonlat"
    lonlat.mkdir()
    squares.to_file(lonlat / "areas.shp")
    (lonlat / "areas.prj").unlink()
    gdf = read_boundaries(_zip_dir(lonlat), "noprj.zip")
    assert gdf.crs.to_epsg() == 4326  # assumed: coordinates look like degrees

    metres = tmp_path / "metres"
    metres.mkdir()
    squares.to_crs(32618).to_file(metres / "areas.shp")
    (metres / "areas.prj").unlink()
    with pytest.raises(InputError, match="no coordinate reference system") as err:
        read_boundaries(_zip_dir(metres), "utm.zip")
    assert_actionable(err, "'utm.zip'", ".prj")


def test_shapefile_path_on_disk(squares, tmp_path):
    squares.to_file(tmp_path / "areas.shp")
    assert len(read_boundaries(tmp_path / "areas.shp")) == 2


@pytest.mark.parametrize(
    "member", ["../evil.shp", "/etc/evil.shp", "a/../../evil.shp", "C:/evil.shp"]
)
def test_zip_path_traversal_rejected(member):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(zipfile.ZipInfo(member), b"not really a shapefile")
    with pytest.raises(InputError, match="unsafe path") as err:
        read_boundaries(buf.getvalue(), "evil.zip")
    assert_actionable(err, "'evil.zip'", member)


def test_zip_bomb_rejected_before_reading():
    buf = io.BytesIO()
    zeros = bytes(1 << 20)
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        with zf.open("bomb.shp", "w", force_zip64=True) as member:
            for _ in range(300):
                member.write(zeros)
    data = buf.getvalue()
    assert len(data) < 1_000_000
    start = time.perf_counter()
    with pytest.raises(InputError, match="would expand to 300 MB") as err:
        read_boundaries(data, "bomb.zip")
    assert time.perf_counter() - start < 2  # decided from the directory, nothing inflated
    assert_actionable(err, "'bomb.zip'", "200x")


def test_zip_without_shapefile():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("readme.txt", "hello")
    with pytest.raises(InputError, match="no shapefile") as err:
        read_boundaries(buf.getvalue(), "empty.zip")
    assert_actionable(err, "'empty.zip'", "readme.txt")


def test_boundary_errors():
    with pytest.raises(InputError, match="empty") as err:
        read_boundaries(b"", "b.geojson")
    assert_actionable(err, "'b.geojson'")
    with pytest.raises(InputError, match="not a GeoJSON, GeoPackage or zipped shapefile") as err:
        read_boundaries(b"lat,lon\n1,2\n", "b.csv")
    assert_actionable(err, "'b.csv'")
    with pytest.raises(InputError, match="could not be read as a boundary file") as err:
        read_boundaries(b"{not json at all", "broken.geojson")
    assert_actionable(err, "'broken.geojson'")
    with pytest.raises(InputError, match="has no features") as err:
        read_boundaries(feature_collection([]), "none.geojson")
    assert_actionable(err, "'none.geojson'")
    with pytest.raises(InputError, match="damaged ZIP") as err:
        read_boundaries(b"PK\x03\x04" + bytes(50), "bad.zip")
    assert_actionable(err, "'bad.zip'")


def test_boundary_bounds_reprojects_and_rejects_empty(squares):
    assert boundary_bounds(squares.to_crs(32618)) == pytest.approx(
        (-74.0, 40.6, -73.8, 40.7), abs=1e-6
    )
    with pytest.raises(InputError, match="no areas") as err:
        boundary_bounds(squares.iloc[:0])
    assert_actionable(err)
