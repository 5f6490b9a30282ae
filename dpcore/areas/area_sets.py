"""The curator's area-code sets: public queries over a hierarchy, each the total of a set of areas.

A query file lists, one row per (query, area), sets of areas of any level (a metro area made of
counties, a school district made of tracts).  The sets are public inputs of the matrix mechanism
(:mod:`dpcore.areas.mechanisms.matrix`, Li & Miklau, PVLDB 5(6) 2012), which designs its strategy
for them and answers each with its exact standard error (:func:`area_sets_csv`).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dpcore.data.csv_safe import csv_bytes, estimate_decimals
from dpcore.data.hierarchy import Hierarchy, data_rows
from dpcore.data.text import parser_problem
from dpcore.errors import InputError, ParameterError
from dpcore.privacy.calibration import interval_half_width

__all__ = ["MAX_AREA_SETS", "AreaSets", "area_sets_csv", "read_area_sets"]

#: Most area-code-set queries in one upload.
MAX_AREA_SETS = 5000
_QUERY_COLUMNS = ("query", "query_id", "name", "set", "group")
_AREA_COLUMNS = ("area", "code", "geoid", "area_code", "id")




@dataclass(frozen=True, eq=False)
class AreaSets:
    """Public queries, each the total of a set of areas (of any level) of a hierarchy.

    ``rows`` is the 0/1 matrix over the hierarchy's finest areas (a finest area is counted once
    even when the set lists it twice, directly or through a coarser area).  ``members`` keeps the
    listed areas (``level:label``) for the release record.
    """

    names: tuple[str, ...]
    members: tuple[tuple[str, ...], ...]
    rows: np.ndarray

    def __len__(self) -> int:
        return len(self.names)

    def to_record(self) -> list[dict[str, Any]]:
        return [{"query": n, "areas": list(m)} for n, m in zip(self.names, self.members, strict=True)]


def _pick(cols: dict[str, str], names: Sequence[str], what: str, have: Sequence[str]) -> str:
    for n in names:
        if n in cols:
            return cols[n]
    raise InputError(
        f"The query file has no {what} column (looked for {', '.join(names)}; it has "
        f"{', '.join(have) or 'no columns'}). Give one row per (query, area), e.g. 'query,area' "
        "then 'Metro A,44007'."
    )


def read_area_sets(data: bytes | str | pd.DataFrame, h: Hierarchy, filename: str = "") -> AreaSets:
    """Parse a CSV of area-code sets: one row per (query, area), optional ``level`` column.

    ``area`` is an area's label as in the exports (``44007`` for unique codes, ``44/007`` for
    codes unique within their parent) or its joined code (a GEOID such as ``44007``).  Without
    a ``level`` column the code is looked up at every level; a code found at two levels is an
    error that asks for the column.  ``filename`` is only used in messages.
    """
    if isinstance(data, pd.DataFrame):
        df = data.copy()
    else:
        raw = data.encode() if isinstance(data, str) else bytes(data)
        if not raw.strip():
            raise InputError(f"The query file {filename or ''} is empty. Give one row per (query, area).".replace("  ", " "))
        from dpcore.data.text import SNIFF_BYTES, check_text_head, gunzip_limited

        label = f"'{filename}'" if filename else "the query file"
        if raw[:2] == b"\x1f\x8b":
            raw = gunzip_limited(raw, label)  # damaged gzip and gzip bombs: InputError
        check_text_head(raw[: SNIFF_BYTES], label, whole=len(raw) <= SNIFF_BYTES)
        try:
            df = pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False)
        except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError, OSError, ValueError) as e:
            raise InputError(
                f"Could not read the query file {filename}: {parser_problem(e)}. "
                "Save it as a UTF-8 CSV with a header row 'query,area'."
            ) from None
    have = [str(c) if len(str(c)) <= 40 else str(c)[:37] + "..." for c in df.columns][:20]
    cols = {str(c).strip().lower(): str(c) for c in df.columns}
    qcol = _pick(cols, _QUERY_COLUMNS, "query name", have)
    acol = _pick(cols, _AREA_COLUMNS, "area code", have)
    lcol = cols.get("level")
    if df.empty:
        raise InputError("The query file has a header but no rows. Add one row per (query, area).")
    q = df[qcol].astype(str).str.strip()
    a = df[acol].astype(str).str.strip()
    bad = np.flatnonzero((q == "").to_numpy() | (a == "").to_numpy())
    if bad.size:
        raise InputError(f"{_row_list(bad).capitalize()} of the query file have an empty query name or area code; fill or "
                         "delete them.")
    level_of = {name.lower(): d for d, name in enumerate(h.level_names)}
    depth_rows: np.ndarray | None = None
    if lcol is not None:
        lv = df[lcol].astype(str).str.strip().str.lower()
        unknown = sorted(set(lv) - set(level_of))
        if unknown:
            raise InputError(
                f"Unknown level {', '.join(repr(u) for u in unknown[:5])} in the query file; the levels are "
                f"{', '.join(h.level_names[1:])}."
            )
        depth_rows = lv.map(level_of).to_numpy(dtype=np.int64)
    # area label -> (depth, index), per depth, from the export labels and the joined codes
    lookup: list[dict[str, int]] = [{}]
    for d in range(1, h.depth + 1):
        m = {str(s): i for i, s in enumerate(h.joined_codes(d))}
        m.update({str(s): i for i, s in enumerate(h.labels(d))})
        lookup.append(m)
    hits = np.full(len(df), -1, dtype=np.int64)
    depth = np.full(len(df), -1, dtype=np.int64)
    ambiguous: list[int] = []
    for r, code in enumerate(a.to_numpy()):
        depths = [int(depth_rows[r])] if depth_rows is not None else range(1, h.depth + 1)
        found = [(d, lookup[d][code]) for d in depths if d >= 1 and code in lookup[d]]
        if len(found) > 1:
            ambiguous.append(r)
        elif found:
            depth[r], hits[r] = found[0]
    if ambiguous:
        raise InputError(
            f"{_row_list(np.array(ambiguous)).capitalize()} of the query file name codes found at more than one level "
            f"(e.g. '{a.iloc[ambiguous[0]]}'). Add a 'level' column ({', '.join(h.level_names[1:])})."
        )
    missing = np.flatnonzero(hits < 0)
    if missing.size:
        example = h.labels(h.depth)[0]
        raise InputError(
            f"{_row_list(missing).capitalize()} of the query file name areas that are not in the hierarchy "
            f"(e.g. '{a.iloc[int(missing[0])]}'). Use the area codes of the exports, e.g. '{example}'."
        )
    names = list(dict.fromkeys(q.to_numpy()))
    if len(names) > MAX_AREA_SETS:
        raise InputError(f"The query file defines {len(names):,} queries; at most {MAX_AREA_SETS:,} are supported. "
                         "Split it, or keep the queries that matter most.")
    qi = pd.Series(range(len(names)), index=names)[q.to_numpy()].to_numpy()
    rows = np.zeros((len(names), h.n_leaves))
    members: list[list[str]] = [[] for _ in names]
    for r in range(len(df)):
        d, i = int(depth[r]), int(hits[r])
        rows[qi[r], h.descendants(d, i, h.depth)] = 1.0
        members[qi[r]].append(f"{h.level_names[d]}:{h.labels(d)[i]}")
    rows.setflags(write=False)
    return AreaSets(tuple(str(n) for n in names), tuple(tuple(m) for m in members), rows)


def _row_list(idx: np.ndarray, limit: int = 5) -> str:
    return data_rows(np.asarray(idx), limit)  # "data rows 1, 4": one numbering in every message


def area_sets_csv(rel: Any) -> bytes:
    """``area_queries.csv``: each area-code set's noisy total, its SD and 95 % interval."""
    a = rel.details.get("area_sets")
    if not a:
        raise ParameterError("This release has no area-code-set queries.")
    ans = np.asarray(a["answer"], float)
    se = np.asarray(a["standard_error"], float)
    half = interval_half_width("normal", se)  # a set's total sums many areas' estimates
    df = pd.DataFrame({
        "query": a["query"], "areas": [";".join(d["areas"]) for d in a["definition"]],
        "noisy_total": ans, "standard_error": se,
        "ci95_low": ans - half, "ci95_high": ans + half,
    })
    return csv_bytes(estimate_decimals(df), lambda d: d.to_csv(index=False).encode())
