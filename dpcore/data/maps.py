"""What every map of every kind shares: the offline style, the colour scale, the zoom that fits a
box, and light public outlines.

Maps draw without the internet: the inline ``white-bg`` MapLibre style (no tiles, no glyphs) with
local GeoJSON line layers; a web basemap (``open-street-map``) is an option the curator switches on.
"""

from __future__ import annotations

import math
from typing import Any

from dpcore.data.domain import Bounds

__all__ = ["COLORSCALE", "OFFLINE_STYLE", "WEB_STYLE", "light_outlines", "zoom_box"]

OFFLINE_STYLE = "white-bg"
WEB_STYLE = "open-street-map"
COLORSCALE = "YlOrRd"


def zoom_box(west: float, south: float, east: float, north: float, *, width_px: int = 900,
              height_px: int = 600) -> tuple[float, dict[str, float]]:
    """Zoom and centre that fit a lon/lat box into ``width_px × height_px`` pixels (Web Mercator,
    a 512-px world at zoom 0, less 0.15 of a zoom step as a margin).

    >>> zoom, centre = zoom_box(-74.06, 40.56, -73.70, 40.92)
    >>> round(zoom, 2), centre
    (9.64, {'lon': -73.88, 'lat': 40.74})
    """
    def merc(lat: float) -> float:
        lat = max(min(lat, 85.0), -85.0)
        return math.log(math.tan(math.pi / 4 + math.radians(lat) / 2))

    lon_span = max(east - west, 1e-9)
    y_span = max(merc(north) - merc(south), 1e-9)
    z_lon = math.log2(width_px * 360.0 / (512.0 * lon_span))
    z_lat = math.log2(height_px * 2 * math.pi / (512.0 * y_span))
    zoom = max(0.0, min(z_lon, z_lat) - 0.15)
    centre = {"lon": (west + east) / 2, "lat": (south + north) / 2}
    return zoom, centre


def light_outlines(frame: Any, bounds: Bounds | None = None, *, fraction: float = 1 / 1500) -> dict[str, Any]:
    """Public boundaries (a GeoDataFrame) as a light GeoJSON for a map's line layer: in lon/lat, clipped to
    ``bounds`` (padded by a quarter) when given, and simplified to about ``fraction`` of the view, so that a
    city's or a country's outlines stay cheap to send to the browser and to draw (Douglas–Peucker)."""
    g = frame.geometry
    if g.crs is not None and not g.crs.equals("EPSG:4326"):
        g = g.to_crs("EPSG:4326")
    g = g[g.notna() & ~g.is_empty]
    if bounds is not None:
        w, s, e, n = bounds.as_tuple()
        pw, ph = (e - w) / 4, (n - s) / 4
        g = g.cx[w - pw:e + pw, s - ph:n + ph]
        span = max(e - w, n - s)
    else:
        b = g.total_bounds if len(g) else (0.0, 0.0, 1.0, 1.0)
        span = max(b[2] - b[0], b[3] - b[1])
    g = g.simplify(max(span, 1e-6) * fraction, preserve_topology=False)
    return g[~g.is_empty].__geo_interface__
