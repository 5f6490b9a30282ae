"""What every map of every kind shares: the offline style, the colour scale, the zoom that fits a
box, and light public outlines.

Maps draw without the internet: the inline ``white-bg`` MapLibre style (no tiles, no glyphs) with
local GeoJSON line layers; a web basemap (``open-street-map``) is an option the curator switches on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcore.data.domain import Bounds

__all__ = ["COLORSCALE", "DECADES", "OFFLINE_STYLE", "WEB_STYLE", "LogScale", "light_outlines", "zoom_box"]

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


# -- one colour scale for every map: a log scale, so skewed counts show ------------------------------
#
# Counts over space are skewed (a few dense cells, or one county with ten million people): on a linear
# scale up to the largest (or the 99th percentile) most areas share the first colour.  Every map colours
# by log10 of the value over four decades below the largest, whatever the number of areas and whatever
# the unit's size (points per km² on a world grid are tiny numbers); values at or below the bottom
# (negative noisy counts among them, drawn as 0) take the first colour.  The colour bar is labelled in
# the value's own unit.

#: decades of values a map's colours span below the largest value
DECADES = 4.0


@dataclass(frozen=True)
class LogScale:
    """A log colour scale from ``top / 10^DECADES`` to ``top``: colour coordinate ``log10(v)`` clipped.

    >>> sc = LogScale.of(np.array([-3.0, 0.0, 5.0, 1000.0]))
    >>> sc.zmin, sc.zmax
    (-1.0, 3.0)
    >>> sc.z(np.array([-3.0, 0.0, 10.0, 1000.0])).tolist()
    [-1.0, -1.0, 1.0, 3.0]
    >>> sc.colorbar("people")["ticktext"]
    ['≤ 0.1', '0.3', '1', '3', '10', '30', '100', '300', '1,000']
    """

    zmin: float
    zmax: float

    @classmethod
    def of(cls, values: Any) -> LogScale:
        """The scale of ``values``: up to the largest (1 if none is positive)."""
        top = float(np.max(np.asarray(values, dtype=np.float64), initial=0.0))
        zmax = math.log10(top) if top > 0 else 0.0
        return cls(zmax - DECADES, zmax)

    def z(self, values: Any) -> np.ndarray:
        """The colour coordinate of each value: ``log10(v)`` within the scale (the bottom for v ≤ 0)."""
        v = np.asarray(values, dtype=np.float64)
        out = np.full(v.shape, self.zmin)
        np.log10(v, out=out, where=v > 0)  # one pass (a 1,024² image is drawn from a million values)
        np.clip(out, self.zmin, self.zmax, out=out)
        return out if out.ndim else out[()]

    def colorbar(self, title: str) -> dict[str, Any]:
        """A plotly colour bar with ticks at 1 and 3 times the powers of ten, labelled in the unit."""
        ticks = [k + math.log10(m) for k in range(math.floor(self.zmin), math.ceil(self.zmax) + 1) for m in (1, 3)]
        ticks = [t for t in ticks if self.zmin - 1e-9 <= t <= self.zmax + 1e-9]
        text = [_tick(10.0 ** t) for t in ticks]
        if ticks and ticks[0] <= self.zmin + 1e-9:
            text[0] = "≤ " + text[0]
        return {"title": {"text": title}, "thickness": 14, "tickvals": ticks, "ticktext": text}


def _tick(v: float) -> str:
    """A tick label: "1,000", "30", "0.3", "0.003"."""
    return f"{v:,.0f}" if v >= 1 else f"{v:.1g}"


def choropleth_figure(geojson: dict[str, Any], *, customdata: Any = None, **trace: Any) -> Any:
    """A plotly figure of one ``Choroplethmap`` trace over ``geojson``, which it holds without copying.

    ``go.Figure(go.Choroplethmap(geojson=..., customdata=...))`` deep-copies the GeoJSON (every
    coordinate pair of every polygon) and the hover values (every element of an array of numbers and
    words) while building the figure: for a release map of a few thousand areas that was about
    0.6 s of the server's CPU per map (issue 28 item 5).  Set after the figure is built, the trace
    refers to the same GeoJSON (do not change it afterwards); the hover values are validated and
    copied once, shallowly, by plotly's ``update_traces``.

    >>> gj = {"type": "FeatureCollection", "features": []}
    >>> fig = choropleth_figure(gj, locations=[], z=[])
    >>> fig.data[0].geojson is gj, fig.data[0].type
    (True, 'choroplethmap')
    """
    import plotly.graph_objects as go  # the figures need it; the rest of this module does not

    fig = go.Figure(go.Choroplethmap(**trace))
    fig.update_traces(geojson=geojson, **({} if customdata is None else {"customdata": customdata}))
    return fig
