"""Flow lines of an O/D release as GeoJSON text, built whole-array at a time.

:func:`flow_line_levels` picks, per tree level, the released flows whose two ends have public
coordinates (the ``top`` largest where asked); :func:`dpcore.flows.export.flows_geojson` turns
them into a FeatureCollection of dicts and :func:`flows_geojson_bytes` into the bytes that
``orjson.dumps`` gives for that FeatureCollection, without a dict per flow: every distinct area's
coordinates, label and name are written once (by orjson, so each number and string reads exactly
as in the dict's dump) and pyarrow joins them with the template's fixed text, flow by flow, in C.
A release of 115,000 flows takes a twentieth of a second this way, against 0.8 s for the dicts.

Everything here is public: released (noisy) flows and public geography (RFC 7946 GeoJSON; a
FeatureCollection's foreign members ``accounted`` and ``not_accounted``, RFC 7946 §6.1, are
written first when asked).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from dpcore.errors import ParameterError
from dpcore.flows.mechanisms.common import ODRelease

__all__ = ["COORD_DECIMALS", "LevelLines", "feature_count", "flow_line_levels", "flows_geojson_bytes"]

#: Decimal places of exported coordinates (~1 cm); centroids of public boundaries.
COORD_DECIMALS = 6


@dataclass(frozen=True)
class LevelLines:
    """The flows of one tree level that get a line: ``sel`` indexes the level's released flows
    (``rel.origins[t]``, ``rel.destinations[t]``, ``rel.values[t]``), in the order they are written;
    ``ox``..``dy`` are the (lon, lat) of every area at the origin and destination depths."""

    tree_level: int
    name: str
    origin_depth: int
    destination_depth: int
    sel: np.ndarray
    ox: np.ndarray
    oy: np.ndarray
    dx: np.ndarray
    dy: np.ndarray


def tree_level_indices(rel: ODRelease, levels: Sequence[int | str] | None) -> list[int]:
    """Tree levels named or numbered by ``levels`` (default: every level 1..T), each once."""
    names = [lp.name for lp in rel.plan.levels]
    if levels is None:
        return list(range(1, rel.depth + 1))
    out = []
    for lv in levels:
        if isinstance(lv, str) and not lv.strip().lstrip("-").isdigit():
            if lv not in names:
                raise ParameterError(f"There is no O/D level '{lv}'; choose from {', '.join(names[1:])}.")
            t = names.index(lv)
        else:
            t = int(lv)
            if not 0 <= t <= rel.depth:
                raise ParameterError(f"Tree level {t} does not exist (the O/D tree has levels 0..{rel.depth}).")
        if t not in out:
            out.append(t)
    return out


def flow_line_levels(
    rel: ODRelease,
    origin_xy: Mapping[int, tuple[np.ndarray, np.ndarray]],
    destination_xy: Mapping[int, tuple[np.ndarray, np.ndarray]] | None = None,
    *,
    levels: Sequence[int | str] | None = None,
    top: int | None = None,
) -> Iterator[LevelLines]:
    """The flows of each tree level that get a line (see :func:`dpcore.flows.export.flows_geojson`):
    levels whose origin or destination depth has no coordinates are skipped, and so are flows with an
    end without coordinates (NaN); ``top`` keeps the ``top`` largest flows per level (ties in
    (origin, destination) order); a level left without flows is not yielded."""
    dest_xy = origin_xy if destination_xy is None else destination_xy
    if top is not None and int(top) < 1:
        raise ParameterError("'top' must be a positive number of flows per level (or None for all).")
    for t in tree_level_indices(rel, levels):
        if t == 0:
            continue  # the total is one number, not a flow between two areas
        lp = rel.plan.levels[t]
        od_, dd = lp.origin_depth, lp.destination_depth
        if od_ not in origin_xy or dd not in dest_xy:
            continue
        ox, oy = (np.asarray(a, dtype=float) for a in origin_xy[od_])
        dx, dy = (np.asarray(a, dtype=float) for a in dest_xy[dd])
        if ox.shape[0] != rel.origin_h.sizes[od_] or dx.shape[0] != rel.destination_h.sizes[dd]:
            raise ParameterError(
                f"The coordinates of level '{lp.name}' do not fit the hierarchy: expected "
                f"{rel.origin_h.sizes[od_]:,} origin and {rel.destination_h.sizes[dd]:,} destination areas."
            )
        o, d, v = rel.origins[t], rel.destinations[t], rel.values[t]
        ok = np.isfinite(ox[o]) & np.isfinite(oy[o]) & np.isfinite(dx[d]) & np.isfinite(dy[d])
        sel = np.flatnonzero(ok)
        if top is not None and sel.size > int(top):
            # largest first; ties kept in (origin, destination) order (stable sort)
            sel = sel[np.argsort(-v[sel], kind="stable")[: int(top)]]
        if sel.size:
            yield LevelLines(t, lp.name, od_, dd, sel, ox, oy, dx, dy)


def _json_each(values: list[Any]) -> list[bytes]:
    """Each value as orjson writes it inside any document."""
    return [orjson.dumps(v) for v in values]


def _json_numbers(values: np.ndarray) -> list[bytes]:
    """Each number of a numeric array as orjson writes it (one dump, split at the commas: a number's
    JSON text has none)."""
    if values.size == 0:
        return []
    return orjson.dumps(values.tolist())[1:-1].split(b",")


class _AreaText:
    """JSON text of every area of a depth, made once per (hierarchy, depth): ``[lon,lat]`` rounded
    to :data:`COORD_DECIMALS` places, the export label and the display name."""

    def __init__(self) -> None:
        self._memo: dict[tuple[str, int, int], Any] = {}  # (what, hierarchy id or 0, depth) -> array

    def _get(self, key: tuple[str, int, int], make: Any) -> Any:
        import pyarrow as pa

        if key not in self._memo:
            self._memo[key] = pa.array(make(), type=pa.large_binary())
        return self._memo[key]

    def coords(self, x: np.ndarray, y: np.ndarray, depth: int, side: str) -> Any:
        """``[lon,lat]`` of every area at ``depth`` of the ``side`` ("o" or "d") coordinates (one
        mapping per side and call: the key needs no more)."""
        def make() -> list[bytes]:
            xs = _json_numbers(np.round(x, COORD_DECIMALS))
            ys = _json_numbers(np.round(y, COORD_DECIMALS))
            return [b"[" + a + b"," + b + b"]" for a, b in zip(xs, ys, strict=True)]

        return self._get(("xy" + side, 0, depth), make)

    def labels(self, h: Any, depth: int) -> Any:
        return self._get(("label", id(h), depth), lambda: _json_each(h.labels(depth).tolist()))

    def names(self, h: Any, depth: int) -> Any:
        return self._get(("name", id(h), depth), lambda: _json_each(h.display_names(depth).tolist()))


def _level_text(rel: ODRelease, lines: LevelLines, text: _AreaText) -> Any:
    """The features of one level, each followed by a comma (a pyarrow buffer: no copy)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def lit(b: bytes) -> Any:
        return pa.scalar(b, type=pa.large_binary())

    t, sel = lines.tree_level, lines.sel
    o = pa.array(rel.origins[t][sel])
    d = pa.array(rel.destinations[t][sel])
    od_, dd = lines.origin_depth, lines.destination_depth
    parts: list[Any] = [
        lit(b'{"type":"Feature","geometry":{"type":"LineString","coordinates":['),
        text.coords(lines.ox, lines.oy, od_, "o").take(o), lit(b","),
        text.coords(lines.dx, lines.dy, dd, "d").take(d),
        lit(b']},"properties":{"level":' + orjson.dumps(lines.name) + b',"origin":'),
        text.labels(rel.origin_h, od_).take(o), lit(b',"destination":'),
        text.labels(rel.destination_h, dd).take(d), lit(b',"noisy_count":'),
        pa.array(_json_numbers(rel.values[t][sel]), type=pa.large_binary()),
    ]
    # public display names (e.g. --names county=NAME), where the area list has them
    for side, h, depth, idx in (("origin", rel.origin_h, od_, o), ("destination", rel.destination_h, dd, d)):
        if depth > 0 and h.names[depth - 1] is not None:
            parts += [lit(f',"{side}_name":'.encode()), text.names(h, depth).take(idx)]
    joined = pc.binary_join_element_wise(*parts, lit(b"}},"), lit(b""))
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int64)[joined.offset: joined.offset + len(joined) + 1]
    return joined.buffers()[2][int(offsets[0]): int(offsets[-1])]


def flows_geojson_bytes(
    rel: ODRelease,
    origin_xy: Mapping[int, tuple[np.ndarray, np.ndarray]],
    destination_xy: Mapping[int, tuple[np.ndarray, np.ndarray]] | None = None,
    *,
    levels: Sequence[int | str] | None = None,
    top: int | None = None,
    members: Mapping[str, Any] | None = None,
) -> bytes:
    """``orjson.dumps(flows_geojson(rel, origin_xy, destination_xy, levels=levels, top=top))``, byte
    for byte, written without a dict per flow; ``members`` (foreign members, RFC 7946 §6.1, e.g.
    ``accounted``) come first, before ``type``.

    Examples
    --------
    >>> import pandas as pd
    >>> from dpcore import catalog, pipeline
    >>> from dpcore.core.session import Session
    >>> from dpcore.flows.counts import ODCounts
    >>> from dpcore.flows.export import flows_geojson
    >>> from dpcore.flows.tree import hierarchy_from_prefixes
    >>> from dpcore.flows.unit import od_unit
    >>> from dpcore.privacy.budget import zcdp
    >>> from dpcore.privacy.noise import NoiseSource
    >>> h = hierarchy_from_prefixes(["4401", "4402", "4501"], [2, 4], ["state", "county"])
    >>> trips = pd.DataFrame({"o": ["4401", "4402"], "d": ["4501", "4401"], "n": [30, 20]})
    >>> counts = ODCounts.from_frame(trips, h, origin="o", destination="d", count="n", fingerprint=False)
    >>> plan = catalog.get("od", "inftda").plan((h, h), zcdp(1.0), {}, unit=od_unit("replace", 1, False))
    >>> rel = pipeline.release(plan, counts, session=Session.unaccounted(), noise=NoiseSource(1)).inner
    >>> xy = {d: (np.linspace(-71.5, -71.0, n), np.full(n, 41.8)) for d, n in enumerate(h.sizes)}
    >>> flows_geojson_bytes(rel, xy) == orjson.dumps(flows_geojson(rel, xy))
    True
    >>> flows_geojson_bytes(rel, xy, top=1, members={"accounted": False})[:68]
    b'{"accounted":false,"type":"FeatureCollection","features":[{"type":"F'
    """
    text = _AreaText()
    parts = [_level_text(rel, lines, text) for lines in flow_line_levels(
        rel, origin_xy, destination_xy, levels=levels, top=top)]
    if parts:
        parts[-1] = parts[-1][: len(parts[-1]) - 1]  # the last feature's comma
    head = orjson.dumps(dict(members or {}))[:-1] + b"," if members else b"{"
    return b"".join([head + b'"type":"FeatureCollection","features":[', *parts, b"]}"])  # one copy


#: How every feature of :func:`flows_geojson_bytes` (and of ``orjson.dumps``) begins.  Inside a JSON
#: string a quote is escaped (``\"``), so these bytes occur nowhere else in such a document.
_FEATURE = b'{"type":"Feature",'


def feature_count(geojson: bytes) -> int:
    """How many features the compact GeoJSON ``geojson`` (written by :func:`flows_geojson_bytes` or
    ``orjson.dumps``) holds: ``len(orjson.loads(geojson)["features"])`` without parsing it (the
    Export step's caption; parsing Rhode Island's LODES lines took seconds and a few hundred MB).

    Examples
    --------
    >>> doc = {"type": "FeatureCollection", "features": [
    ...     {"type": "Feature", "geometry": None, "properties": {"name": '{"type":"Feature",'}},
    ...     {"type": "Feature", "geometry": None, "properties": {}}]}
    >>> feature_count(orjson.dumps(doc)) == len(doc["features"]) == 2
    True
    >>> feature_count(b'{"type":"FeatureCollection","features":[]}')
    0
    """
    return geojson.count(_FEATURE)
