"""The public structure of an O/D release: area hierarchies, finest-area codes and the O/D tree.

Everything here is public (the curator's list of areas or public geography), never the trips:
a hierarchy built from code prefixes, trip codes matched to its finest areas, and the levels of
the O/D tree.

The O/D counts at the finest level ``g`` of a public hierarchy are rewritten as a tree of depth
``T = 2g`` (Boninsegna & Silvestri, "Differentially private release of hierarchical
origin/destination data with a TopDown approach", PoPETs 2025 / arXiv 2024: the destination and
origin trees; Boninsegna & Silvestri 2025, Sec. 3).  In the *destination tree* a node ``(u_{k−1}, v_{k−1})`` first gets the
children ``(u_{k−1}, v_k)`` for every sub-area ``v_k`` of ``v_{k−1}`` (a cross-level table), and
each of those the children ``(u_k, v_k)`` for every sub-area ``u_k`` of ``u_{k−1}`` (the O/D
matrix at level k).  The *origin tree* refines the origin first.  Every tree level partitions the
trips, so each is a histogram with the same sensitivity.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from dpcore.data.code_tables import code_text
from dpcore.data.hierarchy import Hierarchy, code_frame, plural, row_list
from dpcore.errors import InputError, ParameterError, curator_only

__all__ = [
    "ancestors",
    "check_pair",
    "group_sum",
    "hierarchy_from_prefixes",
    "leaf_lookup",
    "level_name",
    "match_leaves",
    "tree_levels",
]

Orientation = Literal["destination", "origin"]


def hierarchy_from_prefixes(
    codes: Sequence[Any] | pd.Series,
    lengths: Sequence[int],
    names: Sequence[str] | None = None,
    *,
    source: str = "area list",
) -> Hierarchy:
    """A hierarchy whose levels are prefixes of one code (block ``440070101001000`` → state
    ``44``, county ``44007``, …).

    ``codes`` is the **public** list of finest areas (every area, zero-flow ones included).  The
    codes must all have the finest length; every level's codes are unique across the level.
    """
    lengths = [int(v) for v in lengths]
    if not lengths or any(b <= a for a, b in zip(lengths, lengths[1:], strict=False)) or lengths[0] < 1:
        raise ParameterError(
            f"Prefix lengths {lengths} must be increasing whole numbers, e.g. 2,5,11,12,15 for "
            "census block codes (state, county, tract, block group, block)."
        )
    names = [str(n) for n in names] if names is not None else [f"level{i + 1}" for i in range(len(lengths))]
    if len(names) != len(lengths):
        raise ParameterError(f"Give one level name per prefix length ({len(lengths)}), e.g. state,county.")
    cf = code_frame(pd.DataFrame({"code": pd.Series(list(codes) if not isinstance(codes, pd.Series) else codes)}),
                     ["code"], "The area list")
    s = pd.Series(cf["code"].to_numpy(dtype=object)).astype(str)
    bad = (s.str.len() != lengths[-1]).to_numpy()
    if bad.any():
        ex = ", ".join(s[bad].head(3).tolist())
        raise InputError(
            curator_only(f"{plural(int(bad.sum()), 'code')} of the area list ({row_list(bad)}; e.g. {ex}) do not have "
            f"{lengths[-1]} characters, the finest prefix length. Read the codes as text (leading zeros "
            "kept) or fix the prefix lengths.")
        )
    df = pd.DataFrame({n: s.str.slice(0, ln) for n, ln in zip(names, lengths, strict=True)})
    return Hierarchy.from_frame(df, names, codes="global", source=source)  # type: ignore[arg-type]


def match_leaves(h: Hierarchy, values: pd.Series | Sequence[Any]) -> np.ndarray:
    """Finest-area index of every value, ``-1`` where it is missing or not an area.

    A value may be the area's own code (when unique across the level), its joined path code
    (GEOID style) or its ``a/b/c`` label; whichever style matches the most values is used.
    Whole floats (``1.0``, as Parquet may store codes) become integer text; spaces are stripped.
    """
    return _match(h, _text(values).to_numpy(dtype=object))


def _match(h: Hierarchy, v: np.ndarray, weight: np.ndarray | None = None) -> np.ndarray:
    """:func:`match_leaves` on codes that are already clean text (object array); ``weight``: how
    many rows each value stands for (the style matching the most rows wins)."""
    L = h.depth
    candidates = []
    if h.code_modes[-1] == "global":
        candidates.append(h.codes(L))
    candidates += [h.joined_codes(L), h.labels(L)]
    best: np.ndarray | None = None
    for cand in candidates:
        idx = pd.Index(cand)
        if not idx.is_unique:
            continue
        pos = idx.get_indexer(v)
        if best is None or _matched(pos, weight) > _matched(best, weight):
            best = pos
        if (pos >= 0).all():
            break
    assert best is not None  # labels are always unique
    return best.astype(np.int64)


def _matched(pos: np.ndarray, weight: np.ndarray | None) -> int:
    return int((pos >= 0).sum() if weight is None else weight[pos >= 0].sum())


def leaf_lookup(h: Hierarchy, values: pd.Series | Sequence[Any], what: str) -> np.ndarray:
    """:func:`match_leaves`, but missing codes and codes that are not in the public area list
    are an error naming the rows."""
    series = pd.Series(values).reset_index(drop=True)
    # each distinct code is cleaned and matched once (372,191 LODES rows hold 17,127 home blocks);
    # a missing or unclean code takes the row-by-row path, whose error names the rows
    rows, distinct = pd.factorize(series, use_na_sentinel=True)
    try:
        clean = None if (rows < 0).any() else code_frame(
            pd.DataFrame({what: pd.Series(distinct)}), [what], "The trips")[what].to_numpy(dtype=object)
    except InputError:
        clean = None
    if clean is not None:
        v = clean[rows]
        best = _match(h, clean, np.bincount(rows, minlength=len(clean)))[rows]
    else:
        v = code_frame(pd.DataFrame({what: series}), [what], "The trips")[what].to_numpy(dtype=object)
        best = _match(h, v)  # code_frame has cleaned the codes already
    missing = best < 0
    if missing.any():
        ex = list(dict.fromkeys(v[missing].tolist()))[:3]
        raise InputError(
            curator_only(f"{plural(int(missing.sum()), 'row')} of the trips ({row_list(missing)}) have {'an' if what[:1] in 'aeiou' else 'a'} {what} that is not "
            f"a finest area ('{h.levels[-1]}') of the public hierarchy (e.g. {', '.join(map(str, ex))}). "
            "Fix the codes, drop those rows, or use a hierarchy that lists these areas.")
        )
    return best.astype(np.int64)


def tree_levels(depth: int, orientation: Orientation = "destination") -> list[tuple[int, int]]:
    """``(origin depth, destination depth)`` of every O/D tree level 0..2g: the destination
    or origin tree of Boninsegna & Silvestri (PoPETs 2025, Sec. 3)."""
    if orientation not in ("destination", "origin"):
        raise ParameterError("The tree orientation is 'destination' (refine destinations first) or 'origin'.")
    out = [(0, 0)]
    for k in range(1, depth + 1):
        out.append((k - 1, k) if orientation == "destination" else (k, k - 1))
        out.append((k, k))
    return out


def group_sum(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys and the exact int64 sum of their values, zero sums dropped
    (``np.bincount`` would go through float64)."""
    if keys.size == 0:
        return keys.astype(np.int64), np.zeros(0, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    sums = np.add.reduceat(np.asarray(values, dtype=np.int64)[order], starts)
    uniq = k[starts]
    nz = sums != 0
    return uniq[nz], sums[nz]


def ancestors(h: Hierarchy) -> list[np.ndarray]:
    """``anc[d][leaf]``: index at depth d of every finest area's ancestor (d = 0..L)."""
    anc = [np.arange(h.n_leaves, dtype=np.int64)]
    for d in range(h.depth - 1, -1, -1):
        anc.insert(0, h.parents[d][anc[0]])
    return anc


def check_pair(origin: Hierarchy, destination: Hierarchy) -> None:
    """Refuse an origin and destination hierarchy pair that cannot make one O/D tree."""
    for h in (origin, destination):
        bad = [lv for lv in h.levels if ">" in lv]
        if bad:
            raise ParameterError(
                f"The level name '{bad[0]}' contains '>', which O/D exports use between an origin and a "
                "destination level (state>county). Rename the level."
            )
    if origin.depth != destination.depth:
        raise ParameterError(
            f"The origin hierarchy has {origin.depth} levels and the destination hierarchy "
            f"{destination.depth}; they must have the same number of levels (add a copy level to the "
            "shorter one: each area its own single child)."
        )


def level_name(origin: Hierarchy, destination: Hierarchy, od: int, dd: int) -> str:
    """``"county"`` for an intra-level table, ``"state>county"`` (origin > destination) otherwise."""
    a, b = origin.level_names[od], destination.level_names[dd]
    return a if (od == dd and a == b) else f"{a}>{b}"



def _text(values: Any) -> pd.Series:
    return code_text(values).fillna("")
