"""Initial view of the hierarchy maps (dpcore/areas/figures.py): framed on the bulk of the areas."""

from __future__ import annotations

from pathlib import Path

import geopandas as gpd
import pytest
from shapely.geometry import box

from dpcore.areas.figures import _view, extent_figure
from dpcore.data.maps import zoom_box

STATES = Path("/work/shared/data/boundaries/us_states_2010_20m.geojson")


def _grid_with_islands() -> gpd.GeoDataFrame:
    """48 one-degree squares over the lower 48 states, plus Alaska, Hawaii and Puerto Rico."""
    cells = [box(-118 + 6 * i, 30 + 3 * j, -117 + 6 * i, 31 + 3 * j) for i in range(8) for j in range(6)]
    far = [box(-170, 52, -130, 71), box(-160, 19, -155, 22), box(-67, 18, -65.5, 18.5)]
    return gpd.GeoDataFrame(geometry=cells + far, crs="EPSG:4326")


def test_view_starts_on_the_bulk_not_on_far_flung_areas() -> None:
    frame = _grid_with_islands()
    zoom, centre = _view(frame, 420)
    bulk_zoom, bulk_centre = _view(frame.iloc[:48], 420)
    assert centre == pytest.approx(bulk_centre)
    assert zoom == pytest.approx(bulk_zoom)


def test_few_areas_are_all_in_view() -> None:
    frame = _grid_with_islands().iloc[-4:]  # one square and the three far ones
    zoom, centre = _view(frame, 420)
    west, south, east, north = frame.total_bounds
    assert centre == pytest.approx({"lon": (west + east) / 2, "lat": (south + north) / 2})
    assert zoom == pytest.approx(zoom_box(west, south, east, north, width_px=520, height_px=420)[0] - 0.15)


@pytest.mark.skipif(not STATES.exists(), reason="shared data absent")
def test_us_states_view_is_the_lower_48() -> None:
    states = gpd.read_file(STATES)
    fig = extent_figure([states])
    centre, zoom = fig.layout.map.center, fig.layout.map.zoom
    assert -100 < centre.lon < -92 and 35 < centre.lat < 39  # Kansas, not the Pacific
    lower48 = states[~states["NAME"].isin(["Alaska", "Hawaii", "Puerto Rico"])]
    assert zoom == pytest.approx(_view(lower48, 420)[0])
    assert zoom > 2.2  # the whole of the US with Alaska and Hawaii fits only below zoom 2
    drawn = {int(f["id"]) for f in fig.layout.map.layers[0].source["features"]}
    far = states.index[states["NAME"].isin(["Alaska", "Hawaii", "Puerto Rico"])]
    assert len(far) == 3 and set(far) <= drawn  # still drawn: the curator can pan or zoom out to them


def test_far_areas_are_the_ones_the_first_view_leaves_out() -> None:
    """Issue 26, item 10: the map names the areas outside its first view (Alaska and Hawaii here)."""
    from dpcore.areas.figures import far_areas

    far = far_areas(_grid_with_islands())
    assert far[:48].sum() == 0 and far[48] and far[49]
    assert not far_areas(_grid_with_islands().iloc[-4:]).any()  # fewer than 8 areas: all in view
