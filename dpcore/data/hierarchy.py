"""Public geography: hierarchies of areas (nation → state → county → tract …), shared by every kind
that releases counts over areas (counts over areas, trips between them).

A :class:`Hierarchy` is the **public** structure of a release: the level names, every area of
every level and its parent.  It is stored as arrays, one per level, so that aggregation and the
mechanisms run vectorised on national-size trees (85k tracts):

* depth 0 is the root (the grand total, one node);
* ``parents[d]`` maps each node of depth ``d + 1`` to its parent's index at depth ``d``; nodes of
  a depth are sorted by their path, so every parent's children are contiguous and
  ``parents[d]`` is non-decreasing (the "level tree" the solvers in :mod:`dpcore.estimate.treedp` and
  :mod:`dpcore.estimate.topdown_opt` take).

An area is identified by its **path** of codes (state ``01`` → county ``001``), because many
code systems repeat codes within parents (county ``001`` exists in almost every state).  When a
level's codes are meant to be unique across the whole level (5-digit county FIPS), a code that
appears under two parents is an error ("a child with two parents"), not a second area.

.. warning:: **The list of areas must be public** (DESIGN.md privacy rule 1).  Areas where nobody
   lives must still be released, with noise; an area list taken from the data drops them, and
   that absence is not protected.  :class:`Hierarchy` is therefore built from a public area
   list, a boundary file, or a table the curator confirms lists every area (zero rows
   included); the confidential counts (:class:`dpcore.areas.counts.HierarchyCounts`, the trips'
   :class:`dpcore.flows.counts.ODCounts`) are then mapped onto it, and rows whose area is not in
   the list are rejected.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import pandas as pd

from dpcore.data.code_tables import code_text
from dpcore.errors import InputError, ParameterError, curator_only

__all__ = [
    "ROOT_LEVEL",
    "AreaSource",
    "CodeMode",
    "Hierarchy",
    "code_frame",
    "hierarchy_info",
    "level_ids",
    "plural",
    "require_public_area_list",
    "row_list",
]

#: Name of depth 0 (the grand total).
ROOT_LEVEL = "total"
#: Separator inside path keys; below every printable character, so that sorting the keys as
#: strings sorts the paths lexicographically (parents before children, children contiguous).
_SEP = "\x1f"
_MAX_EXAMPLES = 5
#: Most rows a table may have to build a hierarchy from (checked before any work): the 2020 US
#: census blocks (8.2 M) fit; beyond, aggregate to one row per finest area first.
MAX_AREA_ROWS = 20_000_000
#: Paths whose key texts are made at a time (:func:`_path_keys`).
_KEY_STEP = 1_000_000

CodeMode = Literal["auto", "global", "within_parent"]
#: A progress callback, as the engines take it (:class:`dpcore.data.engines.base.ProgressCallback`):
#: the fraction done (0 to 1) and a line saying what runs now.
Progress = Callable[[float, str], None]
#: A phase's line, said as it starts (:func:`phases`).
Say = Callable[[str], None]
AreaSource = Literal["area list", "table (confirmed public)", "data (not public)"]


def phases(progress: Progress | None, total: int) -> Say:
    """A ``say(line)`` for work in ``total`` phases: each call tells ``progress`` the fraction of
    the phases done before it and the line (nothing without ``progress``); the caller ends with
    ``progress(1.0, ...)``.  Long library steps (a hierarchy of 8 M census blocks) use it so that a
    command line or a page shows every few seconds what runs.

    >>> said = []
    >>> say = phases(lambda f, m: said.append((f, m)), 4)
    >>> say("codes"); say("areas")
    >>> said
    [(0.0, 'codes'), (0.25, 'areas')]
    """
    done = [0]

    def say(line: str) -> None:
        if progress is not None:
            progress(min(done[0] / max(total, 1), 1.0), line)
        done[0] += 1

    return say


def _quiet(line: str) -> None:
    """The ``say`` of work without a progress callback."""


def plural(n: int, word: str) -> str:
    """``n`` and ``word``, with an s unless there is one (for messages).

    >>> plural(1, "row"), plural(1200, "row")
    ('1 row', '1,200 rows')
    """
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def data_rows(positions: Sequence[int] | np.ndarray, limit: int = _MAX_EXAMPLES) -> str:
    """'data rows 1, 4, 8' from 0-based positions: every message about rows of a file numbers them
    this one way, 1-based and the header not counted (the first row below the header is data row 1),
    and says so by the word "data" (issue 26 item 10: one message counted file lines, another data rows).

    >>> data_rows([0, 3, 7]), data_rows([2]), data_rows(range(9), limit=2)
    ('data rows 1, 4, 8', 'data row 3', 'data rows 1, 2 and 7 more')
    """
    idx = [int(i) + 1 for i in positions]
    shown = ", ".join(map(str, idx[:limit]))
    more = len(idx) - min(len(idx), limit)
    return f"data row{'s' if len(idx) > 1 else ''} {shown}" + (f" and {more:,} more" if more > 0 else "")


def row_list(mask: np.ndarray, limit: int = _MAX_EXAMPLES) -> str:
    """:func:`data_rows` of the rows where ``mask`` is true."""
    return data_rows(np.flatnonzero(mask), limit)


def code_frame(df: pd.DataFrame, levels: Sequence[str], what: str) -> pd.DataFrame:
    """The level columns as stripped strings; missing codes are an error naming the rows."""
    _check_columns(df, levels, what)
    out = {}
    for c in levels:
        t = code_text(df[c])
        _check_codes(t, np.arange(len(t)), c, what)  # every row its own code
        out[c] = t.astype(object).to_numpy()
    return pd.DataFrame(out)


def _check_columns(df: pd.DataFrame, levels: Sequence[str], what: str) -> None:
    """Refuse level columns that ``df`` does not have, naming the columns it has."""
    missing_cols = [c for c in levels if c not in df.columns]
    if missing_cols:
        raise InputError(
            f"{what} has no column {', '.join(map(repr, missing_cols))}. "
            f"Its columns are: {', '.join(map(str, list(df.columns)[:20]))}. Choose the level columns again."
        )
    twice = [c for c in dict.fromkeys(levels) if list(df.columns).count(c) > 1]
    if twice:
        raise InputError(f"{what} has more than one column named {', '.join(map(repr, twice))}. "
                         "Rename the columns so that each level column's name is unique.")


def _check_codes(t: pd.Series, rows: np.ndarray, col: str, what: str) -> None:
    """Refuse missing codes and control characters (``t``: distinct stripped codes, ``rows``: the
    index of each row's code in ``t``, -1 where missing)."""
    bad_u = (t.isna() | (t == "")).to_numpy(dtype=bool)
    bad = (rows < 0) | bad_u[np.maximum(rows, 0)] if len(t) else rows < 0
    if bad.any():
        raise _missing_codes(bad, col, what)
    ctrl_u = t.str.contains(r"[\x00-\x1f]", regex=True).to_numpy(dtype=bool)
    if ctrl_u.any():
        raise InputError(
            curator_only(f"{what}: the level column '{col}' has codes with control characters ({row_list(ctrl_u[rows])}). "
            "Remove them from the codes.")
        )


def _missing_codes(bad: np.ndarray, col: str, what: str) -> InputError:
    """The refusal of the rows ``bad`` without a code in the level column ``col``."""
    return InputError(curator_only(f"{what}: the level column '{col}' has {plural(int(bad.sum()), 'missing code')} "
                      f"({row_list(bad)}). Every row needs a code at every level: fill them in or drop those rows."))


def check_area_frame(df: pd.DataFrame, levels: Sequence[str], *, codes: CodeMode | Sequence[CodeMode] = "auto",
                     names: Mapping[str, str] | None = None, what: str = "The area list",
                     ) -> tuple[list[str], list[str]]:
    """The refusals of :meth:`Hierarchy.from_frame` that need no area's key built: the levels and
    code modes, an empty table or one of more than :data:`MAX_AREA_ROWS` rows, missing level or
    name columns, missing or blank codes, codes with control characters, and levels that do not
    nest (a level listed above a coarser one, a code under two parents).  The codes are checked
    once per distinct value and the areas found as integer paths (:func:`level_ids`,
    :func:`_paths`), without the areas' key texts.  It is not cheap: reading the codes
    (:func:`level_ids`, which factorizes every level column) is the larger part of the build too,
    and the build reads them again.  Measured at 2 M census-block rows of four levels: the check
    1.7 s against the build's 2.9 s (on a busy 2-core machine 5.0-5.6 s against 6.8-7.3 s; reading
    the codes 3.1-3.8 s of it).  The app still runs it before keying a table's budget (longer
    again: 7.3 s in that busy run), so that such a table is refused before that work; it does
    not hand the check's codes to the build, since they would stay in memory through the keying
    (rows x levels integers and each level's distinct codes: hundreds of MB at 8 M blocks).
    Returns the levels as text and the code mode of each.

    >>> check_area_frame(pd.DataFrame({"state": ["01", "02", "02"], "county": ["001", "001", "003"]}),
    ...                  ["state", "county"])
    (['state', 'county'], ['auto', 'auto'])
    >>> check_area_frame(pd.DataFrame({"state": ["01", None]}), ["state"])
    Traceback (most recent call last):
    ...
    dpcore.errors.InputError: curator only, not for publication: The area list: the level column 'state' has 1 missing code (data row 2). ...
    >>> check_area_frame(pd.DataFrame({"county": ["01001", "01003"], "state": ["01", "01"]}), ["county", "state"])
    Traceback (most recent call last):
    ...
    dpcore.errors.InputError: curator only, not for publication: Every area of 'county' has exactly one 'state' ...
    """
    levels, modes = _frame_basics(df, levels, codes, names, what)
    ids = level_ids(df, levels, what)
    _level_modes(df, levels, modes, ids, _paths(ids, keep=set(), levels=levels), what)
    return levels, modes


def _frame_basics(df: pd.DataFrame, levels: Sequence[str], codes: CodeMode | Sequence[CodeMode],
                  names: Mapping[str, str] | None, what: str) -> tuple[list[str], list[str]]:
    """:func:`check_area_frame`'s refusals that read no code's text, in a fraction of a second at
    8 M rows (Arrow keeps the missing values apart): levels, code modes, size, columns, missing codes."""
    levels = [str(c) for c in levels]
    if not levels:
        raise ParameterError("Choose at least one level column (e.g. state), top level first.")
    if len(set(levels)) != len(levels):
        raise ParameterError(f"The levels {levels} repeat a column; name each level once.")
    if ROOT_LEVEL in levels:
        raise ParameterError(f"A level column is called '{ROOT_LEVEL}', the name of the grand total. Rename that column.")
    modes = [codes] * len(levels) if isinstance(codes, str) else list(codes)
    if len(modes) != len(levels) or any(m not in ("auto", "global", "within_parent") for m in modes):
        raise ParameterError("Give the code mode per level as 'auto', 'global' (unique across the level) or "
                             "'within_parent' (unique only under the same parent).")
    if not isinstance(df, pd.DataFrame) or df.empty:
        raise InputError(f"{what} is empty. Give one row per finest area with its code at every level.")
    if len(df) > MAX_AREA_ROWS:
        raise InputError(
            curator_only(f"{what} has {len(df):,} rows, more than the {MAX_AREA_ROWS:,} a hierarchy is built from. Give one row "
            "per finest area (aggregate person rows to counts per area first), or use a coarser finest level."))
    _check_columns(df, levels, what)
    for lv, col in (names or {}).items():
        if lv not in levels:
            raise ParameterError(f"Names are given for '{lv}', which is not a level ({', '.join(levels)}).")
        if col not in df.columns:
            raise InputError(f"The name column '{col}' is not in the table.")
    for c in levels:
        if df[c].isna().any():  # then every row without a code, blank ones too, as the build names them
            raise _missing_codes((code_text(df[c]).fillna("") == "").to_numpy(dtype=bool), c, what)
    return levels, [str(m) for m in modes]


def _level_modes(df: pd.DataFrame, levels: list[str], modes: list[str], ids: list[tuple[Any, np.ndarray]],
                 paths: list[tuple[np.ndarray | None, np.ndarray, np.ndarray]], what: str,
                 say: Say = _quiet) -> list[str]:
    """Each level's code mode (:func:`_code_mode`), refusing levels that do not nest: a coarser
    level listed under a finer one with codes unique across its level (states under 5-digit
    counties) shows as exactly one child per area, with codes that repeat.  Paths refine paths, so
    a level never has fewer areas than the one above it.  ``ids``/``paths`` as :func:`level_ids`
    and :func:`_paths` make them (the rows' arrays may be gone); ``df`` names an example's rows."""
    out_modes: list[str] = []
    for d, lv in enumerate(levels):
        say(f"Checking the codes of '{lv}' ({d + 1} of {len(levels)} levels) …")
        _, parent, own = paths[d]
        per_code = np.bincount(own, minlength=len(ids[d][1]))
        n_codes = int(np.count_nonzero(per_code))
        n_up = len(paths[d - 1][1]) if d else 1
        if d and out_modes[d - 1] == "global" and len(own) == n_up and n_codes < len(own):
            code = ids[d][1][int(np.flatnonzero(per_code > 1)[0])]
            raise _not_nesting(df, levels[d - 1], lv, code, n_up, n_codes, what)
        out_modes.append(_code_mode(ids[d][1], own, parent if d else np.zeros(len(own), dtype=np.int64),
                                    _PathKeys(ids, paths, d - 1) if d else None, lv,
                                    levels[d - 1] if d else None, modes[d]))
    return out_modes


def _not_nesting(df: pd.DataFrame, up: str, lv: str, code: object, n_up: int, n_codes: int, what: str) -> InputError:
    """The refusal of levels that do not nest (``up`` listed above ``lv``), with an example: the
    first rows (one per ``up`` code) that share the ``lv`` code ``code``."""
    rows = np.flatnonzero((code_text(df[lv]) == code).fillna(False).to_numpy(dtype=bool))
    _, first = np.unique(code_text(df[up]).to_numpy(dtype=object)[rows].astype(str), return_index=True)
    ex = np.sort(rows[first])[:2]
    return InputError(
        curator_only(f"Every area of '{up}' has exactly one '{lv}' in {what[:1].lower() + what[1:]}, and the {n_up:,} '{up}' "
        f"areas share only {n_codes:,} '{lv}' codes, so the levels do not nest in this order (e.g. {data_rows(ex)}: the same "
        f"'{lv}' {str(code)!r} under different '{up}' codes). List the level columns from the top (largest "
        f"areas) down to the finest (if each '{up}' really holds a single '{lv}', drop the level '{lv}').")
    )


class _PathKeys:
    """The key text of an area at ``depth`` (0-based), one at a time, as :func:`_path_keys` makes
    them all: for the few examples an error names, without the key texts of every area."""

    def __init__(self, ids: list[tuple[Any, np.ndarray]],
                 paths: list[tuple[np.ndarray | None, np.ndarray, np.ndarray]], depth: int) -> None:
        self.ids, self.paths, self.depth = ids, paths, depth

    def __getitem__(self, p: int) -> str:
        parts = []
        for d in range(self.depth, -1, -1):
            _, parent, own = self.paths[d]
            parts.append(str(self.ids[d][1][own[p]]))
            p = int(parent[p])
        return _SEP.join(reversed(parts))


def level_ids(df: pd.DataFrame, levels: Sequence[str], what: str, say: Say = _quiet,
              ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each level column as integer codes: ``(ids, codes)`` with ``codes`` the sorted distinct
    stripped codes (object array, as :func:`code_frame` makes them) and ``codes[ids[i]]`` row
    ``i``'s.  The text work runs once per distinct value; missing codes are an error.  ``say``
    (:func:`phases`) is told each level as it starts.

    >>> ids, codes = level_ids(pd.DataFrame({"c": ["02", " 01", "02"]}), ["c"], "The table")[0]
    >>> codes.tolist(), ids.tolist()
    (['01', '02'], [1, 0, 1])
    """
    _check_columns(df, levels, what)  # (not code_frame of no rows: ~10 ms of pandas per column for nothing)
    out = []
    for i, c in enumerate(levels):
        say(f"Reading the codes of '{c}' ({i + 1} of {len(levels)} levels) …")  # no row count: logs are public
        raw, uniq = _factorize(df[c])
        t = code_text(uniq)
        _check_codes(t, raw, c, what)
        codes, inv = _sorted_distinct(t)  # "01" and " 01" are one code
        out.append((inv[raw], codes))
    return out


def _factorize(col: pd.Series) -> tuple[np.ndarray, pd.Series]:
    """``pd.factorize(col)`` (each row's index among the distinct values, -1 where missing, and the
    distinct values): a column of Arrow-backed text (pandas 3's ``str``) is encoded by Arrow, whose
    distinct texts stay Arrow text (pandas makes a Python string of each of 8 M distinct codes).

    >>> raw, uniq = _factorize(pd.Series(["b", None, "a", "b"], dtype="string[pyarrow]"))
    >>> raw.tolist(), uniq.tolist()
    ([0, -1, 1, 0], ['b', 'a'])
    """
    import pyarrow as pa

    if not (isinstance(col.dtype, pd.StringDtype) and col.dtype.storage == "pyarrow"):
        raw, uniq = pd.factorize(col.reset_index(drop=True), use_na_sentinel=True)
        return raw, pd.Series(uniq)
    arr = pa.array(col.array)
    enc = (arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr).dictionary_encode()
    raw = enc.indices.fill_null(-1).to_numpy().astype(np.int64)
    return raw, pd.Series(pd.arrays.ArrowStringArray(enc.dictionary))


def _sorted_distinct(t: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(t, return_inverse=True)`` (distinct texts, each value's index among them) of text without missing values, for many values:
    Arrow finds the distinct texts by hashing and sorts them as UTF-8 bytes, which is the order of
    their code points (Python's order of str), instead of numpy sorting Python objects.

    >>> codes, inv = _sorted_distinct(pd.Series(["b", "a", "b", "é", "z"]))
    >>> codes.tolist(), inv.tolist()
    (['a', 'b', 'z', 'é'], [1, 0, 1, 3, 2])
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(pa.array(t, type=pa.string(), from_pandas=True))
    order = pc.array_sort_indices(enc.dictionary).to_numpy()
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    codes = np.asarray(enc.dictionary.take(pa.array(order)).to_numpy(zero_copy_only=False), dtype=object)
    return codes, rank[enc.indices.to_numpy()]


def _paths(ids: list[tuple[np.ndarray, np.ndarray]], keep: set[int] | None = None, say: Say = _quiet,
           levels: Sequence[str] = ()) -> list[tuple[np.ndarray | None, np.ndarray, np.ndarray]]:
    """Per depth 1..L: ``(row_path, parent, own)`` - every row's path index (paths numbered in
    their sorted order, as the string keys sort), and per path its parent's index one depth up
    and its own code index.  Paths are pairs (parent path, own code) packed in one int64.

    With ``keep`` (0-based depths), only those depths keep ``row_path`` (the others are None) and
    ``ids`` loses its per-row arrays as they are used (``(None, codes)``): 8 M rows' int64 arrays
    per level need not outlive the paths.  ``say`` (:func:`phases`) is told each depth (named by
    ``levels``) as it starts."""
    out: list[tuple[np.ndarray | None, np.ndarray, np.ndarray]] = []
    prev = np.zeros(len(ids[0][0]) if ids else 0, dtype=np.int64)
    for d in range(len(ids)):
        say(f"Finding the areas of '{levels[d] if d < len(levels) else d + 1}' ({d + 1} of {len(ids)} levels) …")
        own_ids, codes = ids[d]
        packed = prev * len(codes) + own_ids  # < 2**63: at most MAX_AREA_ROWS**2
        if keep is not None:
            ids[d] = (None, codes)  # type: ignore[assignment]
        del own_ids, prev
        row_path, uniq = pd.factorize(packed, sort=True)
        del packed
        uniq = np.asarray(uniq, dtype=np.int64)
        prev = row_path.astype(np.int64, copy=False)
        del row_path
        out.append((prev if keep is None or d in keep else None, uniq // len(codes), uniq % len(codes)))
    return out


def _path_keys(ids: list[tuple[np.ndarray, np.ndarray]], paths: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
               say: Say = _quiet, levels: Sequence[str] = ()) -> list[np.ndarray]:
    """The sorted path key strings of the distinct paths per depth 1..L (depth d joins the first d
    codes with ``_SEP``); ``say`` (:func:`phases`) is told each depth as it starts."""
    keys: list[np.ndarray] = []
    for d, ((_, codes), (_, parent, own)) in enumerate(zip(ids, paths, strict=True)):
        lv = levels[d] if d < len(levels) else str(d + 1)
        say(f"Keying the areas of '{lv}' ({d + 1} of {len(ids)} levels) …")  # not their number: logs are public
        if not keys:
            keys.append(codes[own])
            continue
        out = np.empty(len(own), dtype=object)
        # a million paths at a time: the texts made on the way (parent key + separator) never
        # exist for all 8 M census blocks at once, only the keys themselves
        for i in range(0, len(own), _KEY_STEP):
            part = slice(i, i + _KEY_STEP)
            out[part] = keys[-1][parent[part]] + _SEP + codes[own[part]]
        keys.append(out)
    return keys


#: The fix named when person rows come without a public area list (the command line names its flag).
AREA_LIST_FIX = ("upload the public list of areas (a gazetteer, or the table of a boundary file, with the level "
                 "columns)")


def require_public_area_list(person_rows: bool, area_list_given: bool, fix: str = AREA_LIST_FIX) -> None:
    """Refuse one-row-per-person data as its own list of areas (DESIGN.md privacy rule 1).

    A table with one row per person (or per group member) has no row for an area where nobody
    lives, so it cannot list every area, whatever the curator confirms: the release would list
    exactly the areas that have people, and that absence is not protected.  Such data needs a
    public area list.  This is the one rule the app and the command line both apply; ``fix`` says
    how to give the list in each (an upload, or ``--areas``).

    Parameters
    ----------
    person_rows : bool
        True when the table has no count column (each row is one person).
    area_list_given : bool
        True when a separate public area list (gazetteer, boundary table) is given.
    fix : str
        How to give the public list, appended to the message.

    Raises
    ------
    ParameterError
        With ``person_rows`` and no ``area_list_given``.

    >>> require_public_area_list(person_rows=False, area_list_given=False)  # counts per area: may list all
    >>> require_public_area_list(person_rows=True, area_list_given=True)
    >>> require_public_area_list(True, False)
    Traceback (most recent call last):
    ...
    dpcore.errors.ParameterError: With one row per person the areas where nobody lives are missing ...
    """
    if person_rows and not area_list_given:
        raise ParameterError(
            "With one row per person the areas where nobody lives are missing from the data, so the table cannot "
            f"list every area and the area list must be public: {fix}.")


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """The public tree of areas.

    Attributes
    ----------
    levels
        Level names, top first, finest last (depth 0, the root, is :data:`ROOT_LEVEL`).
    keys
        Per depth 1..L, the sorted path keys of the areas (codes joined by an internal
        separator).
    parents
        ``parents[d]``: for each node at depth ``d + 1`` the index of its parent at depth ``d``
        (non-decreasing).
    code_modes
        Per level, ``"global"`` (codes unique across the level) or ``"within_parent"``.
    names
        Optional display names per depth 1..L (``None`` when not given).
    source
        Where the area list came from (recorded in the release record).
    """

    levels: tuple[str, ...]
    keys: tuple[np.ndarray, ...]
    parents: tuple[np.ndarray, ...]
    code_modes: tuple[str, ...]
    names: tuple[np.ndarray | None, ...]
    source: str

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        levels: Sequence[str],
        *,
        codes: CodeMode | Sequence[CodeMode] = "auto",
        names: Mapping[str, str] | None = None,
        source: AreaSource = "area list",
        progress: Progress | None = None,
    ) -> Hierarchy:
        """Build the hierarchy from a table with one code column per level (top first).

        Rows may repeat areas (a table with several rows per tract); every distinct path is one
        finest area.  ``codes`` says whether each level's codes are unique across the level
        (``"global"``) or only within their parent (``"within_parent"``); ``"auto"`` decides per
        level and raises an error for the ambiguous case of a few codes under two parents.
        ``names`` maps a level to a column of display names.  ``progress(fraction, line)`` is told
        each phase as it starts (per level: its codes, its areas, their keys, the code check; a
        national table of 8 M census blocks takes about a minute) and ``1.0`` at the end.

        >>> lines = []
        >>> h = Hierarchy.from_frame(pd.DataFrame({"state": ["01", "01", "02"], "county": ["001", "003", "001"]}),
        ...                          ["state", "county"], progress=lambda f, m: lines.append(m))
        >>> len(lines), lines[0], lines[-1]
        (9, "Reading the codes of 'state' (1 of 2 levels) …", 'Built the areas of state, county')
        """
        what = "The area list"
        levels, modes = _frame_basics(df, levels, codes, names, what)  # before any work
        say = phases(progress, 4 * len(levels))
        ids = level_ids(df, levels, what, say)
        named = {levels.index(lv) for lv in (names or {}) if lv in levels}
        paths = _paths(ids, keep={len(levels) - 1} | named, say=say, levels=levels)  # rows' finest areas, named levels'
        out_modes = _level_modes(df, levels, modes, ids, paths, what, say)  # before the keys, the slow part
        keys = _path_keys(ids, paths, say, levels)
        parents = [np.zeros(len(paths[0][2]), dtype=np.int64)] + [p[1] for p in paths[1:]]
        name_arrays: list[np.ndarray | None] = [None] * len(levels)
        for lv, col in (names or {}).items():  # levels and columns checked (check_area_frame)
            d = levels.index(lv)
            nm = df[col].astype("string").fillna("").str.strip().to_numpy(dtype=object)
            name_arrays[d] = nm[np.unique(paths[d][0], return_index=True)[1]]  # each area's first row
        h = cls(tuple(levels), tuple(keys), tuple(parents), tuple(out_modes), tuple(name_arrays), source)
        # each area's own code, known here without splitting its key (what codes() would make)
        h.__dict__["_labels_cache"] = {("codes", d + 1): ids[d][1][paths[d][2]] for d in range(len(levels))}
        h.__dict__["_frame_rows"] = paths[-1][0]  # each row's finest area, for frame_rows()
        if progress is not None:
            progress(1.0, f"Built the areas of {', '.join(levels)}")  # not their number: logs are public
        return h

    def frame_rows(self) -> np.ndarray | None:
        """The finest area of each row of the frame this hierarchy was built from
        (:meth:`from_frame`), what :meth:`leaf_index` of that frame gives, without mapping the rows
        a second time; None for a hierarchy not built from a frame, or once handed out (the array is
        released here: a table of 8 M rows need not keep it).  Only for that same, unchanged frame.

        >>> df = pd.DataFrame({"state": ["02", "01", "02"]})
        >>> h = Hierarchy.from_frame(df, ["state"])
        >>> h.frame_rows().tolist() == h.leaf_index(df, ["state"]).tolist(), h.frame_rows()
        (True, None)
        """
        return self.__dict__.pop("_frame_rows", None)

    def with_names(self, depth: int, names: Sequence[object]) -> Hierarchy:
        """This hierarchy with display names for the areas at ``depth`` (one per area, in the
        order of :meth:`labels`; an empty name shows the code).  Names are public display text
        (a lookup's or a boundary file's): the structure and its fingerprint are unchanged.

        >>> h = Hierarchy.from_frame(pd.DataFrame({"state": ["01", "02"]}), ["state"])
        >>> h.with_names(1, ["Alabama", ""]).display_names(1).tolist()
        ['Alabama', '02']
        """
        if not 1 <= depth <= self.depth:
            raise ParameterError(f"Names belong to a level 1..{self.depth}, not depth {depth}.")
        arr = pd.Series(list(names), dtype="string").fillna("").str.strip().to_numpy(dtype=object)
        if len(arr) != self.sizes[depth]:
            raise ParameterError(f"Give one name per area of '{self.level_names[depth]}': {self.sizes[depth]:,} "
                                 f"areas, {len(arr):,} names.")
        out = list(self.names)
        out[depth - 1] = arr
        return replace(self, names=tuple(out))

    # -- shape ----------------------------------------------------------------------------

    @property
    def depth(self) -> int:
        """Number of levels below the root (L)."""
        return len(self.levels)

    @property
    def level_names(self) -> list[str]:
        """``["total", *levels]``: index = depth."""
        return [ROOT_LEVEL, *self.levels]

    @property
    def sizes(self) -> list[int]:
        """Number of areas at each depth 0..L (depth 0 has 1)."""
        return [1, *(len(k) for k in self.keys)]

    @property
    def n_nodes(self) -> int:
        return sum(self.sizes)

    @property
    def n_leaves(self) -> int:
        return len(self.keys[-1])

    def depth_of(self, level: str) -> int:
        names = self.level_names
        if level not in names:
            raise ParameterError(f"Unknown level '{level}'; choose one of {', '.join(names)}.")
        return names.index(level)

    def child_offsets(self, depth: int) -> np.ndarray:
        """CSR offsets of the children (at ``depth + 1``) of every node at ``depth``."""
        if not 0 <= depth < self.depth:
            raise ParameterError(f"Depth {depth} has no children (the tree has depths 0..{self.depth}).")
        return np.searchsorted(self.parents[depth], np.arange(self.sizes[depth] + 1)).astype(np.int64)

    def n_children(self, depth: int) -> np.ndarray:
        """Number of children of each node at ``depth``."""
        return np.bincount(self.parents[depth], minlength=self.sizes[depth]).astype(np.int64)

    def aggregate(self, leaf_values: np.ndarray) -> list[np.ndarray]:
        """Sums of the leaf values at every depth 0..L (``leaf_values`` may have extra columns)."""
        v = np.asarray(leaf_values)
        if v.shape[0] != self.n_leaves:
            raise ParameterError(f"Expected {self.n_leaves:,} leaf values, got {v.shape[0]:,}.")
        out = [v]
        for d in range(self.depth - 1, -1, -1):
            cur = out[0]
            n = self.sizes[d]
            if cur.ndim == 1 and not np.issubdtype(cur.dtype, np.integer):
                s = np.bincount(self.parents[d], weights=cur, minlength=n)
            else:
                # integers: exact int64 sums (bincount would go through float64)
                s = np.zeros((n, *cur.shape[1:]), dtype=cur.dtype)
                np.add.at(s, self.parents[d], cur)
            out.insert(0, s)
        return out

    def leaves_under(self) -> list[np.ndarray]:
        """Number of finest areas below each node, per depth 0..L."""
        return self.aggregate(np.ones(self.n_leaves, dtype=np.int64))

    # -- labels ---------------------------------------------------------------------------

    def _memo(self, what: str, depth: int, make: Any) -> np.ndarray:
        """Per-depth label arrays are built once (Python string work over up to 10⁵ keys)."""
        cache = self.__dict__.setdefault("_labels_cache", {})
        if (what, depth) not in cache:
            cache[(what, depth)] = make()
        return cache[(what, depth)]

    def codes(self, depth: int) -> np.ndarray:
        """The own code of every node at ``depth`` (the last element of its path)."""
        if depth == 0:
            return np.array([ROOT_LEVEL], dtype=object)
        return self._memo("codes", depth, lambda: pd.Series(self.keys[depth - 1]).str.rsplit(_SEP, n=1).str[-1]
                          .to_numpy(dtype=object))

    def paths(self, depth: int) -> list[tuple[str, ...]]:
        if depth == 0:
            return [()]
        return [tuple(k.split(_SEP)) for k in self.keys[depth - 1]]

    def labels(self, depth: int) -> np.ndarray:
        """Identifiers used in exports: the code for globally unique levels, else ``a/b/c``."""
        if depth == 0:
            return np.array([ROOT_LEVEL], dtype=object)
        if self.code_modes[depth - 1] == "global":
            return self.codes(depth)
        return self._memo("labels", depth, lambda: pd.Series(self.keys[depth - 1]).str.replace(_SEP, "/", regex=False)
                          .to_numpy(dtype=object))

    def joined_codes(self, depth: int) -> np.ndarray:
        """Path codes concatenated without separator (``01`` + ``001`` = ``01001``: a GEOID)."""
        if depth == 0:
            return np.array([ROOT_LEVEL], dtype=object)
        return self._memo("joined", depth, lambda: pd.Series(self.keys[depth - 1]).str.replace(_SEP, "", regex=False)
                          .to_numpy(dtype=object))

    def display_names(self, depth: int) -> np.ndarray:
        """Names where given, else the labels."""
        if depth == 0:
            return np.array(["Total"], dtype=object)
        nm = self.names[depth - 1]
        lab = self.labels(depth)
        if nm is None:
            return lab
        return np.where(pd.Series(nm).fillna("").to_numpy(dtype=object) == "", lab, nm)

    def parent_labels(self, depth: int) -> np.ndarray:
        if depth == 0:
            return np.array([""], dtype=object)
        return self.labels(depth - 1)[self.parents[depth - 1]]

    def find(self, depth: int, label: str) -> int:
        """Index of the area with export label ``label`` at ``depth``."""
        lab = self.labels(depth)
        hit = np.flatnonzero(lab == str(label))
        if hit.size == 0:
            raise ParameterError(f"There is no area '{label}' at level '{self.level_names[depth]}'.")
        return int(hit[0])

    def descendants(self, depth: int, index: int, to_depth: int) -> np.ndarray:
        """Indices at ``to_depth`` of the areas below node ``index`` of ``depth``."""
        lo, hi = index, index + 1
        for d in range(depth, to_depth):
            off = self.child_offsets(d)
            lo, hi = int(off[lo]), int(off[hi])
        return np.arange(lo, hi)

    # -- data -----------------------------------------------------------------------------

    def leaf_index(self, df: pd.DataFrame, levels: Sequence[str], what: str = "The table") -> np.ndarray:
        """Map every row of ``df`` (code columns ``levels``) to its finest area; unknown areas are an error."""
        if len(levels) != self.depth:
            raise ParameterError(
                f"The data has {len(levels)} level columns but the area list has {self.depth} "
                f"({', '.join(self.levels)}). Choose one column per level."
            )
        ids = level_ids(df, levels, what)
        paths = _paths(ids)
        uk = _path_keys(ids, paths)[-1]  # the rows' distinct paths, sorted
        row_path = paths[-1][0]
        leaf_keys = self.keys[-1]
        if len(uk) == len(leaf_keys) and bool((uk == leaf_keys).all()):
            return row_path  # the rows list exactly the public areas (the table is the area list)
        upos = np.searchsorted(leaf_keys, uk)
        ufound = leaf_keys[np.minimum(upos, len(leaf_keys) - 1)] == uk
        pos = upos[row_path]
        found = ufound[row_path]
        if not found.all():
            bad = ~found
            rk = uk[row_path[bad]]
            ex = list(dict.fromkeys(rk.tolist()))[:3]
            raise InputError(
                curator_only(f"{plural(int(bad.sum()), 'row')} of {what.lower() if what[0].isupper() else what} "
                f"({row_list(bad)}) have areas that are not in the public area list "
                f"(e.g. {', '.join(' / '.join(e.split(_SEP)) for e in ex)}). "
                "Fix their codes, or use an area list that contains them.")
            )
        return pos.astype(np.int64)

    def fingerprint(self) -> str:
        """Hash of the public structure (for records and caches): the level names, then each depth's
        keys joined by the separator, hashed 100,000 keys at a time (the same bytes as one join,
        without a text of all 8 M block keys in memory).

        >>> h = Hierarchy.from_frame(pd.DataFrame({"s": ["1", "1", "2"], "c": ["a", "b", "c"]}), ["s", "c"])
        >>> g = hashlib.sha256("|".join(h.levels).encode())
        >>> for k in h.keys:
        ...     g.update(_SEP.join(k.tolist()).encode())
        >>> h.fingerprint() == g.hexdigest()[:16]
        True
        """
        h = hashlib.sha256("|".join(self.levels).encode())
        step = 100_000
        for k in self.keys:
            for i in range(0, len(k), step):
                h.update(((_SEP if i else "") + _SEP.join(k[i:i + step].tolist())).encode())
        return h.hexdigest()[:16]

    def summary(self) -> list[dict[str, Any]]:
        """One row per depth: level name, number of areas, code mode (public)."""
        out: list[dict[str, Any]] = [{"level": ROOT_LEVEL, "areas": 1, "codes": "-"}]
        for d, lv in enumerate(self.levels, start=1):
            out.append({"level": lv, "areas": self.sizes[d], "codes": self.code_modes[d - 1]})
        return out


def _code_mode(code_texts: np.ndarray, own: np.ndarray, parents: np.ndarray, parent_keys: np.ndarray | None,
               level: str, parent_level: str | None, mode: str) -> str:
    """Decide (or check) whether a level's codes are unique across the level.

    ``code_texts[own[i]]``/``parents[i]`` describe the distinct areas of the level (distinct
    (parent, code) pairs).  A code under two parents is legitimate when codes are local to their
    parent (county ``001`` in every state), an error ("a child with two parents") when they are
    meant to be unique.  ``auto`` treats the level as local when at least a fifth of its codes
    repeat under several parents; a few repeats are far more likely a typo in the parent column,
    so they are reported.
    """
    if parent_keys is None:
        return "global"
    per_code = np.bincount(own, minlength=len(code_texts))  # areas are distinct pairs: parents per code
    shared = np.flatnonzero(per_code > 1)
    if not shared.size:
        return "global" if mode != "within_parent" else "within_parent"
    if mode == "within_parent":
        return "within_parent"
    frac = shared.size / max(int(np.count_nonzero(per_code)), 1)
    if mode == "auto" and frac >= 0.2:
        return "within_parent"
    ex = []
    first_area = np.unique(own, return_index=True)[1][np.searchsorted(np.unique(own), shared)]
    for code in shared[np.argsort(first_area, kind="stable")][:3]:  # in the order the areas come
        ps = parents[own == code][:2]
        ex.append(f"'{code_texts[code]}' under " + " and ".join(
            "'" + " / ".join(str(parent_keys[p]).split(_SEP)) + "'" for p in ps))
    raise InputError(
        curator_only(f"The level '{level}' has {plural(shared.size, 'code')} with two or more parents in "
        f"'{parent_level}' ({'; '.join(ex)}). A child must have one parent: fix the parent codes of "
        "those rows, or, if these codes are only unique within their parent (like county 001 in "
        "every state), choose 'codes unique within parent' for this level.")
    )


def hierarchy_info(h: Hierarchy) -> dict[str, Any]:
    """The public area list as release records describe it (hierarchy and O/D records)."""
    return {
        "levels": h.level_names,
        "areas_per_level": list(h.sizes),
        "code_modes": ["-", *h.code_modes],
        "area_list_source": h.source,
        "structure_fingerprint": h.fingerprint(),
    }
