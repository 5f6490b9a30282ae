"""Guessing the levels and the name columns of a public area list from its values.

An area list has one row per finest area: code columns (the levels, e.g. borough and taxi zone),
display names (``Zone``, ``NAME``) and attributes.  :func:`guess_area_columns` proposes

* **levels** ordered from the fewest codes to the most, keeping only columns that nest (every code
  of a finer level lies in one area of the level above, or its codes are local to their parent,
  like county ``001`` in every state);
* **names**: free text that names the areas of a level (the TLC lookup's ``Zone`` for
  ``LocationID``) is offered as that level's names, never as a level of its own.

:func:`name_column` finds the name column of a boundary file (``NAME``, ``zone``, ``boro_name``),
the default names of a level that has boundaries.  The app and the command line offer the guesses;
the curator confirms them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dpcore.data.columns import (
    ATTRIBUTE_NAMES,
    coord_like,
    count_like,
    guess_level_columns,
    name_key,
    name_like,
)

__all__ = ["AreaColumns", "free_text", "guess_area_columns", "name_column"]

#: Row numbers and feature ids of GIS exports: unique per row, never a level.
ROW_IDS = {"objectid", "fid", "ogc_fid", "index", "unnamed: 0", "rowid", "row_id", "shape_id"}
#: A text column is a level's names when it tells at least this share of the level's areas apart.
NAME_SHARE = 0.5
_SAMPLE = 2_000


@dataclass(frozen=True)
class AreaColumns:
    """The guessed columns of an area list.

    Attributes
    ----------
    levels : list of str
        Level columns, top level (fewest codes) first.
    names : dict of str to str
        Level column -> the column naming its areas.
    """

    levels: list[str]
    names: dict[str, str] = field(default_factory=dict)


def free_text(values: pd.Series) -> bool:
    """Whether a column holds words (names such as ``Jamaica Bay``), not codes (``B02512``,
    ``440010301001008``, ``EWR``): at least half of its non-empty values have a lower-case letter.

    >>> free_text(pd.Series(["Newark Airport", "Jamaica Bay"])), free_text(pd.Series(["01", "EWR", "B02512"]))
    (True, False)
    """
    v = values.dropna().astype(str).str.strip()
    v = v[v != ""].head(_SAMPLE)
    return bool(len(v)) and bool(v.str.contains(r"[a-z]", regex=True).mean() >= 0.5)


def _usable(col: Any) -> bool:
    n = name_key(col)
    return not (count_like(col) or coord_like(col) or n in ATTRIBUTE_NAMES or n in ROW_IDS)


def _functional(fine: np.ndarray, coarse: np.ndarray) -> bool:
    """Every value of ``fine`` (integer codes 0..k-1, no missing) goes with one value of ``coarse``."""
    seen = np.empty(int(fine.max()) + 1, dtype=np.int64)
    seen[fine] = coarse  # one of each code's values (the last written)
    return bool(np.array_equal(seen[fine], coarse))


def _names(df: pd.DataFrame, cols: list[str], codes: dict[str, np.ndarray], nd: dict[str, int],
           text: dict[str, bool]) -> tuple[dict[str, str], set[str]]:
    """Level -> name column, and every column that names areas (never a level)."""
    names: dict[str, str] = {}
    naming: set[str] = set()
    for n in cols:
        if not (text[n] or name_like(n)):
            continue
        owners = [c for c in cols if c != n and not text[c] and codes[c].min() >= 0
                  and nd[c] >= nd[n] >= NAME_SHARE * nd[c] and _functional(codes[c], codes[n])]
        if owners:
            naming.add(n)
            names.setdefault(min(owners, key=lambda c: (nd[c], cols.index(c))), n)
        elif name_like(n):
            naming.add(n)
    return names, naming


def _chain(cols: list[str], codes: dict[str, np.ndarray], nd: dict[str, int]) -> list[str]:
    """The longest chain of nesting columns from the fewest codes to the most (leftmost on ties)."""
    order = sorted(cols, key=lambda c: (nd[c], cols.index(c)))
    best: dict[str, tuple[int, int, list[str]]] = {}  # column -> (length, -sum of positions, chain)
    for i, c in enumerate(order):
        cand = (1, -cols.index(c), [c])
        for p in order[:i]:
            if nd[p] >= nd[c]:
                continue
            if _functional(codes[c], codes[p]):
                ln, pos, chain = best[p]
                if (ln + 1, pos - cols.index(c)) > cand[:2]:
                    cand = (ln + 1, pos - cols.index(c), [*chain, c])
        best[c] = cand
    finest = max(order, key=lambda c: (nd[c], -cols.index(c)))
    return best[finest][2]


def guess_area_columns(df: pd.DataFrame) -> AreaColumns:
    """Propose the levels and name columns of a public area list from its values.

    Columns named like counts, coordinates, attributes or row ids are left out.  A text column
    that tells most areas of a code column apart (``Zone`` for ``LocationID``), or one named like
    a name (``ctyname``), names areas; it is offered as names, not as a level.  The levels are the
    longest chain of the remaining complete columns, from the fewest codes to the most, in which
    each column nests in the one before (every code has one parent); a column that does not nest
    (the TLC's ``service_zone``, which cuts across boroughs) is left out.  Codes local to their
    parent (county ``001`` in every state) nest only as paths: census levels named as such
    (:func:`dpcore.data.columns.guess_level_columns`) are taken when they give more levels.

    Parameters
    ----------
    df : pandas.DataFrame
        The area list as read (one row per finest area).

    Returns
    -------
    AreaColumns
        The levels, top first, and each level's name column where one was found.

    Examples
    --------
    >>> lookup = pd.DataFrame({"LocationID": ["1", "2", "3", "4", "5", "6"],
    ...                        "Borough": ["Queens", "Queens", "Queens", "Manhattan", "Manhattan", "Manhattan"],
    ...                        "Zone": ["Jamaica Bay", "Astoria", "Corona", "Alphabet City", "Chelsea", "Inwood"],
    ...                        "service_zone": ["Airports", "Boro Zone", "Boro Zone", "Yellow Zone", "Yellow Zone",
    ...                                         "Boro Zone"]})
    >>> g = guess_area_columns(lookup)
    >>> g.levels, g.names
    (['Borough', 'LocationID'], {'LocationID': 'Zone'})
    """
    cols = [str(c) for c in df.columns if _usable(c)]
    if not cols:
        return AreaColumns([])
    frame = df.set_axis([str(c) for c in df.columns], axis=1)
    codes: dict[str, np.ndarray] = {}
    nd: dict[str, int] = {}
    text: dict[str, bool] = {}
    for c in cols:
        s = frame[c].astype("string").str.strip().replace("", pd.NA)
        codes[c] = pd.factorize(s, use_na_sentinel=True)[0].astype(np.int64)
        nd[c] = int(codes[c].max()) + 1
        text[c] = free_text(frame[c])
    names, naming = _names(frame, cols, codes, nd, text)
    complete = [c for c in cols if c not in naming and nd[c] > 0 and codes[c].min() >= 0]
    if not complete:
        return AreaColumns([])
    levels = _chain(complete, codes, nd)
    by_name = guess_level_columns(complete)  # census levels with codes local to their parent (county 001)
    if len(by_name) > len(levels):
        levels = by_name
    return AreaColumns(levels, {lv: n for lv, n in names.items() if lv in levels})


def name_column(gdf: Any) -> str | None:
    """The column of a boundary file that names its features, or None.

    A column named like a name (``NAME``, ``boro_name``, ``NAMELSAD``: the shortest such name
    first), else a text column that tells most features apart (``zone`` in the TLC's taxi
    zones).

    >>> name_column(pd.DataFrame({"GEOID": ["44001", "44003"], "NAME": ["Bristol", "Kent"]}))
    'NAME'
    >>> name_column(pd.DataFrame({"LocationID": [1, 2], "zone": ["Newark Airport", "Jamaica Bay"]}))
    'zone'
    """
    geom = getattr(getattr(gdf, "geometry", None), "name", None)
    cols = [c for c in gdf.columns if c != geom and c != "id"]
    named = [c for c in cols if name_like(c) and free_text(gdf[c])]
    if named:
        return str(min(named, key=lambda c: (len(str(c)), cols.index(c))))
    n = max(len(gdf), 1)
    texts = [c for c in cols if free_text(gdf[c]) and gdf[c].nunique() >= NAME_SHARE * n]
    return str(texts[0]) if texts else None
