"""Public boundaries joined to the areas of a public hierarchy, by code: what every map of areas
(counts over areas, trips between them) draws from.

A boundary file names its features by a code column (``GEOID``, ``STATEFP``...) or a feature id;
:func:`join_boundaries` finds which column and which form of the area codes (own code, export label
``01/001`` or joined path ``01001``) match best, and lists the areas without a boundary and the
features that are no area, so that nothing is dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass

import geopandas
import numpy as np
import pandas as pd

from dpcore.data.area_columns import name_column
from dpcore.data.code_tables import code_text
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import InputError

__all__ = ["BoundaryJoin", "boundary_names", "join_boundaries"]


@dataclass(frozen=True, eq=False)
class BoundaryJoin:
    """Boundaries of one level joined to the areas of the hierarchy by code.

    ``frame`` holds the matched features (column ``node`` = area index at ``depth``);
    ``missing_areas`` are areas without a boundary, ``extra_features`` boundary codes that are
    not areas of the level.  Both are listed to the curator, never silently dropped.
    """

    depth: int
    frame: geopandas.GeoDataFrame
    key: str
    key_style: str
    missing_areas: list[str]
    extra_features: list[str]


def _candidate_columns(gdf: geopandas.GeoDataFrame) -> dict[str, pd.Series]:
    out: dict[str, pd.Series] = {}
    idx = pd.Series(gdf.index.astype(str), index=gdf.index)
    if "id" in gdf.columns:
        out["id"] = gdf["id"].astype("string").str.strip()
    for c in gdf.columns:
        if c == gdf.geometry.name:
            continue
        out[str(c)] = code_text(gdf[c]).set_axis(gdf.index)
    out["(feature index)"] = idx
    return out


def join_boundaries(h: Hierarchy, depth: int, gdf: geopandas.GeoDataFrame, key: str | None = None) -> BoundaryJoin:
    """Join boundary features to the areas at ``depth``.

    The join key is a boundary column (or the feature ``id``) whose values equal either the
    areas' own codes, their export labels (``01/001``) or their concatenated path codes
    (``01001``, a GEOID).  With ``key=None`` the column and style with the most matches win.
    """
    if depth < 1 or depth > h.depth:
        raise InputError(f"Boundaries belong to a level 1..{h.depth}, not depth {depth}.")
    if gdf is None or len(gdf) == 0:
        raise InputError("The boundary file has no features.")
    styles = {
        "code": h.codes(depth),
        "label": h.labels(depth),
        "joined": h.joined_codes(depth),
    }
    # own codes are ambiguous when they repeat within parents; prefer the path forms then
    if h.code_modes[depth - 1] != "global":
        styles.pop("code")
    cands = _candidate_columns(gdf)
    if key is not None and key not in cands:
        raise InputError(f"The boundary file has no column '{key}'. Its columns: {', '.join(cands)}.")
    best: tuple[int, str, str] | None = None
    for col, vals in cands.items():
        if key is not None and col != key:
            continue
        present = pd.Index(vals.dropna().to_numpy(dtype=object), dtype=object)
        for style, codes in styles.items():
            # a hash lookup of Python objects (numpy's isin on text compares every pair: 3 s for the
            # US counties; pandas 3 makes an Index of text its Arrow string type, whose isin against
            # other values converts them one by one: 0.43 s for 85,000 tracts, 0.01 s as objects)
            n = int(pd.Index(codes, dtype=object).isin(present).sum())
            if best is None or n > best[0]:
                best = (n, col, style)
    assert best is not None
    n, col, style = best
    if n == 0:
        raise InputError(
            f"No boundary matches an area of level '{h.level_names[depth]}' "
            f"(e.g. codes {', '.join(map(str, styles[style][:3]))}). Choose the boundary file of this "
            "level, or a file whose features carry these codes (an id or a code column)."
        )
    vals = cands[col].fillna("").astype(str)
    node = pd.Index(styles[style], dtype=object).get_indexer(vals.to_numpy(dtype=object)).astype(np.int64)
    matched = gdf.loc[node >= 0].copy()
    matched["node"] = node[node >= 0]
    matched = matched.drop_duplicates("node")  # a code drawn twice: the first feature is kept
    have = np.zeros(h.sizes[depth], dtype=bool)
    have[matched["node"].to_numpy()] = True
    missing = h.labels(depth)[~have].astype(str).tolist()
    extra = sorted(set(vals[node < 0].tolist()) - {""})
    return BoundaryJoin(depth, matched, col, style, missing, extra)


def boundary_names(h: Hierarchy, join: BoundaryJoin, column: str | None = None) -> np.ndarray | None:
    """Display names of the areas at ``join.depth`` from their boundary features: the boundary
    file's name column (``column``, else :func:`dpcore.data.area_columns.name_column`: ``NAME``,
    ``zone`` …), ``""`` for an area without a boundary (it shows its code).  None when the file
    names nothing.  Apply them with :meth:`dpcore.data.hierarchy.Hierarchy.with_names`.

    >>> import geopandas, shapely
    >>> h = Hierarchy.from_frame(pd.DataFrame({"state": ["01", "02"]}), ["state"])
    >>> gdf = geopandas.GeoDataFrame({"STATE": ["01"], "NAME": ["Alabama"]}, geometry=[shapely.box(0, 0, 1, 1)])
    >>> boundary_names(h, join_boundaries(h, 1, gdf)).tolist()
    ['Alabama', '']
    """
    col = column or name_column(join.frame)
    if col is None or col not in join.frame.columns:
        return None
    out = np.full(h.sizes[join.depth], "", dtype=object)
    out[join.frame["node"].to_numpy()] = join.frame[col].astype("string").fillna("").str.strip().to_numpy(dtype=object)
    return out
