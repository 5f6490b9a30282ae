"""Counts over areas, Release step: the level shown and the area it is shown inside, at any scale.

A hierarchy of millions of finest areas (census blocks) is never sent to the browser whole (issue 28
item 1): the curator picks a level and narrows it down area by area (a state, then a county in it,
then a tract), each choice listing only the areas inside the one above it; the areas of the level
inside the deepest choice are drawn, on a map where the level has boundaries, else as a table, at
most :data:`MAX_ROWS` rows (the map: ``viz.MAX_POLYGONS`` areas).  A choice with more than
:data:`MAX_OPTIONS` areas to list asks for the area's code instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from ui import fmt
from ui.kinds.areas import common

#: At most this many areas are listed in one drill-down choice; more: the area's code is typed.
MAX_OPTIONS = 5_000
#: At most this many areas are sent to the browser as a table.
MAX_ROWS = 1_000
ALL = "(all)"


def levels_shown(h: Any, joins: dict[str, Any]) -> list[str]:
    """The levels the curator can look at: those with boundaries first (a map), then the others (a table).

    >>> class H: level_names = ["total", "state", "county", "block"]
    >>> levels_shown(H(), {"county": object()})
    ['county', 'state', 'block']
    """
    names = list(h.level_names[1:])
    return [lv for lv in names if lv in joins] + [lv for lv in names if lv not in joins]


def choose_area(h: Any, d: int, where: Any) -> tuple[int, int]:
    """The area the level at depth ``d`` is shown inside: ``(depth, index)`` of the deepest area chosen
    in a cascade of choices (depth 1, then the areas inside the choice so far ...), ``(0, 0)`` for all
    areas.  The choice of the areas at depth ``k`` has the key ``hier_drill_{k + 1}``."""
    ss = st.session_state
    at, idx = 0, 0
    for k in range(1, d):
        lo, hi = span(h, at, idx, k)
        key = f"hier_drill_{k + 1}"
        last = k == d - 1
        label = (f"Show the {common.level_label(h.level_names[d], 2)} inside" if last
                 else f"… in the {common.level_label(h.level_names[k])}")
        if hi - lo > MAX_OPTIONS:
            code = where.text_input(f"{label} (the code of one of {fmt.count(hi - lo)} "
                                    f"{common.level_label(h.level_names[k], hi - lo)})", key=f"{key}_code")
            hit = np.flatnonzero(h.labels(k)[lo:hi] == code.strip()) if code.strip() else np.zeros(0, dtype=int)
            if code.strip() and not hit.size:
                where.warning(f"No {common.level_label(h.level_names[k])} with the code '{code.strip()}' here.")
            if hit.size:
                at, idx = k, lo + int(hit[0])
            continue
        names = common.area_names_of(h, k, lo, hi)
        opts: list[Any] = [ALL, *range(lo, hi)]
        if ss.get(key, ALL) not in opts:  # a choice inside another area than the one chosen now
            ss.pop(key, None)
        pick = where.selectbox(label, opts, key=key,
                               format_func=lambda i, lo=lo, names=names: "all areas" if i == ALL else str(names[i - lo]))
        if pick != ALL:
            at, idx = k, int(pick)
    return at, idx


def span(h: Any, depth: int, index: int, to_depth: int) -> tuple[int, int]:
    """The areas at ``to_depth`` below area ``index`` of ``depth`` (``0, 0``: the root): indices ``lo``
    to ``hi - 1`` (the children of a block of areas are a block)."""
    lo, hi = index, index + 1
    for k in range(depth, to_depth):
        off = h.child_offsets(k)
        lo, hi = int(off[lo]), int(off[hi])
    return lo, hi


def area_table(rel: Any, d: int, nodes: np.ndarray | None, size: int | None, limit: int | None = None
               ) -> tuple[pd.DataFrame, int]:
    """The released values of the areas ``nodes`` of depth ``d`` (all when None) as a table of at most
    ``limit`` rows (:data:`MAX_ROWS`), and how many areas there are in all."""
    limit = MAX_ROWS if limit is None else limit
    h = rel.hierarchy
    idx = np.arange(h.sizes[d]) if nodes is None else np.asarray(nodes)
    total = len(idx)
    idx = idx[:limit]
    v = rel.values[d]
    out = pd.DataFrame({"area": h.display_names(d)[idx], "code": h.labels(d)[idx],
                        "in": h.parent_labels(d)[idx]})
    if v.ndim == 2:
        z = v[:, size] if size is not None else v.sum(axis=1)
        out["noisy count"] = z[idx]
    else:
        out["noisy count"] = v[idx]
        if rel.has_intervals:  # none where release.csv has none
            lo, hi = rel.interval(d)
            out["95 % interval"] = [f"{a:,.0f} – {b:,.0f}" for a, b in zip(lo[idx], hi[idx], strict=True)]
    return out, total
