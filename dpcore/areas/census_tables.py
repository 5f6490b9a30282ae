"""Census tables: reading a census file and the public structure of its areas and bins.

A census table holds counts of people per finest area (a *leaf* such as a tract), possibly
split by ordinal attributes (an age band, an income bucket).  :class:`CensusTable` turns it
into a frequency matrix of shape ``(leaves, bins_1, …, bins_k)`` with

* one **nominal** axis for the geography, whose public hierarchy is given by the code
  columns (top level first, finest last), and
* one **ordinal** axis per attribute,

described by its public :class:`CensusStructure` (levels, list of areas, bins).  The table is
released with Privelet (Xiao, Wang & Gehrke, *Differential Privacy via Wavelet Transforms*,
ICDE 2010) by :mod:`dpcore.areas.mechanisms.census_privelet`, or its marginals with the matrix mechanism
by :mod:`dpcore.areas.mechanisms.census_matrix`.

Areas are identified by their **path** (state ``01`` + county ``001``), because codes repeat
within parents (county ``001`` exists in almost every state).

.. warning:: **The list of areas must be public.**
   A release lists the areas it covers.  If that list is taken from the data, an area where
   nobody lives (or where the curator has no record) is *missing* from the release, and
   that absence is not protected by differential privacy.  The source of the area list
   should be a public gazetteer or boundary file (e.g. TIGER/Line), passed as ``areas``:
   areas present only in that list are added with a true count of 0 and get noise like
   every other area.  The same holds for the bins of an ordinal attribute: give their
   public order (``ordinal_orders``) rather than letting the data decide.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dpcore.areas.counts import whole_counts
from dpcore.data.code_words import chained_keys, code_words
from dpcore.data.engines.base import canonical_codes, coded_fingerprint, codes_fingerprint
from dpcore.data.hierarchy import ROOT_LEVEL, Progress, phases
from dpcore.errors import InputError, ParameterError, curator_only
from dpcore.privacy import near_match

__all__ = [
    "GEO_AXIS",
    "TOTAL_LEVEL",
    "CensusStructure",
    "CensusTable",
    "fingerprint",
    "fingerprints",
    "parse_ordinal_order",
]

#: Name of the geography axis (for ``plus_axes``).
GEO_AXIS = "geography"
#: Name of the implicit root level (the grand total): the hierarchies' (:data:`dpcore.data.hierarchy.ROOT_LEVEL`).
TOTAL_LEVEL = ROOT_LEVEL

_MAX_EXAMPLES = 5

#: Where an ordinal attribute's values and their order came from, stated in the release record.
BINS_FROM_DATA = "the data (not public: a value nobody has is missing from the release)"
BINS_GIVEN = "a public list given by the caller"
BINS_TYPED = "a public list typed by the curator"
BINS_FLAG = "a public list given with --ordinal-order"
#: Separator of the values of a public order (``0-17|18-64|65+``), in the app and on the command line.
ORDER_SEP = "|"


def parse_ordinal_order(text: str, column: str) -> tuple[str, ...]:
    """The public values of an ordinal attribute, in order, from ``V1|V2|...`` text.

    The one parser of a typed order (the app's box and the CLI's ``--ordinal-order``).  Values
    are stripped; an empty value or a repeated one is refused, so a typo cannot silently make an
    extra bin.  The values are public: they are the bins of the release whether or not anybody
    falls in them, which is what keeps an empty bin from disappearing (Xiao, Wang & Gehrke 2010,
    Sec. 3 take the ordinal domain as given).

    >>> parse_ordinal_order(" 0-17 | 18-64|65+ ", "age_band")
    ('0-17', '18-64', '65+')
    >>> parse_ordinal_order("a||b", "age_band")
    Traceback (most recent call last):
    ...
    dpcore.errors.ParameterError: The public values of 'age_band' have an empty value ...
    """
    values = tuple(v.strip() for v in str(text).split(ORDER_SEP))
    if not str(text).strip():
        raise ParameterError(f"Give the public values of '{column}' in their order, separated by '{ORDER_SEP}' "
                             "(e.g. 0-17|18-64|65+).")
    if any(not v for v in values):
        raise ParameterError(f"The public values of '{column}' have an empty value (two '{ORDER_SEP}' in a row, or one "
                             f"at an end): list each value once, separated by '{ORDER_SEP}'.")
    dup = sorted({v for v in values if values.count(v) > 1})
    if dup:
        raise ParameterError(f"The public values of '{column}' repeat {', '.join(map(repr, dup))}: list each value "
                             "once.")
    return values


# ---------------------------------------------------------------------------------------------
# the budget key
# ---------------------------------------------------------------------------------------------


def legacy_fingerprint(df: pd.DataFrame) -> str:
    """The budget key rule of earlier versions (all columns' text, in row order), kept only so that
    a budget stored under it is found again (:meth:`dpcore.core.session.Session.adopt_legacy`).

    >>> len(legacy_fingerprint(pd.DataFrame({"state": ["01"], "pop": [5]})))
    16
    """
    h = hashlib.sha256()
    h.update("\x1f".join(map(str, df.columns)).encode())
    h.update(pd.util.hash_pandas_object(df.astype(str), index=False).to_numpy().tobytes())
    return h.hexdigest()[:16]


def fingerprint(df: pd.DataFrame, levels: Sequence[str], count: str | Sequence[str] | None = None) -> str:
    """Budget key of a census or hierarchy table (never shown or exported): the first of
    :func:`fingerprints`, the key of the top level.

    >>> a = pd.DataFrame({"state": ["01", "02"], "county": ["001", "001"], "pop": ["5", "7"], "note": ["x", "y"]})
    >>> b = pd.DataFrame({"pop": [7, 5], "state": [2, 1]})          # reordered, typed, no note
    >>> fingerprint(a, ["state", "county"], "pop") == fingerprint(b, ["state"], "pop")
    True
    """
    return fingerprints(df, levels, count)[0]


def fingerprints(df: pd.DataFrame, levels: Sequence[str], count: str | Sequence[str] | None = None, *,
                 v1_levels: bool = True, progress: Progress | None = None) -> list[str]:
    """The budget keys of a census or hierarchy table (never shown or exported), main key first.

    Computed from the columns the release uses, and only from them: level codes as canonical text
    and the count as a whole number, summed per area
    (:func:`dpcore.data.engines.base.codes_fingerprint`, an additive multiset hash).  The same
    people therefore find the same budget whatever the order of the rows or columns, the other
    columns of the file, its encoding, compression or format (``01`` in a CSV is ``1`` in a
    Parquet file), whether it lists one row per person or per area (with empty areas or not), and
    whichever engine read it: ``df`` may be the table itself or an engine's sums per code
    combination (:meth:`dpcore.data.engines.base.Engine.code_counts`; finer levels and ordinals
    are summed out).

    * The **main key** is the top level's totals, so that releasing the same table at fewer or more
      finer levels (state and county, then state, county and tract) draws on one budget.  The top
      level is the first with more than one code **among the rows with a positive total**: a level
      with a single such code (a constant column on top, the one state of a single-state table,
      with or without an empty row of another state) says nothing about the people, so adding or
      dropping it, or an empty row, must not open another budget (issue 26 item 11).
    * The **other keys** are every such level's totals per area (its path of varying levels above
      it) and the key of the earlier rule (top level counted over every row, empty ones included),
      so that a budget is found by any of them (:meth:`dpcore.core.session.Session.adopt_keys`).
      Two tables with equal totals at any level share a budget (the safe direction).
    * The main key and the earlier rule's key are ``codes:v1`` keys (an md5 per area,
      :func:`dpcore.data.engines.base.codes_fingerprint`); the finer levels' keys are ``codes:v2``
      (:func:`dpcore.data.code_words.chained_keys`, vectorised: the finest level of 8 M census
      blocks would take seconds of md5 calls), followed, with ``v1_levels``, by their ``codes:v1``
      keys of earlier versions, which a budget database written by an earlier version may hold
      (:meth:`dpcore.core.session.Session.may_hold_v1_level_keys`).  A group-size histogram (several
      count columns) keeps ``codes:v1`` keys throughout.

    Parameters
    ----------
    df : DataFrame
        The rows: one per person (``count=None``) or with a count column.
    levels : sequence of str
        The level code columns, top first.
    count : str or sequence of str, optional
        The count column; several columns (a group-size histogram) are keyed per column position.
    v1_levels : bool
        Also the finer levels' keys of the earlier rule (``codes:v1``); the default, since only a
        budget database created by this version is known to hold none.
    progress : callable, optional
        ``progress(fraction, line)``, told each key as it starts and ``1.0`` at the end (8 M census
        blocks take tens of seconds).

    >>> a = pd.DataFrame({"state": ["01", "01", "02"], "county": ["001", "003", "001"], "pop": [5, 7, 0]})
    >>> keys = fingerprints(a, ["state", "county"], "pop")
    >>> keys[0] == fingerprints(a.iloc[:2], ["state", "county"], "pop")[0]   # the empty row changes nothing
    True
    >>> len(keys)   # county's totals (the main key) and the earlier rule's key (state, over every row)
    2
    >>> b = pd.DataFrame({"state": ["01", "01", "02"], "county": ["001", "003", "001"], "pop": [5, 7, 1]})
    >>> len(fingerprints(b, ["state", "county"], "pop")), len(fingerprints(b, ["state", "county"], "pop", v1_levels=False))
    (3, 2)
    """
    levels = [str(c) for c in levels]
    if not levels:
        raise ParameterError("Choose at least one level column (e.g. state), top level first.")
    _check_columns(df, levels, "level")
    cols = [count] if isinstance(count, str) else [str(c) for c in (count or [])]
    _check_columns(df, cols, "count")
    weights = [_key_counts(df[c], c) for c in cols]
    positive = (np.sum(weights, axis=0) > 0) if cols else np.ones(len(df), dtype=bool)
    varying = [lv for lv in levels if _varies(df[lv][positive])]
    coded: dict[str, Any] = {}  # each level's canonical codes, made once for all the keys
    paths = [varying[: i + 1] for i in range(len(varying))] or [[levels[-1]]]
    # the earlier rule: the first level with more than one code over every row (empty ones too)
    earlier = next((lv for lv in levels if _varies(df[lv])), levels[-1])
    made: dict[tuple[str, ...], str] = {}
    v2 = paths[1:] if len(weights) <= 1 else []  # the finer levels' keys, codes:v2
    todo = list(dict.fromkeys(tuple(p) for p in [paths[0], *([] if v2 and not v1_levels else paths[1:]), [earlier]]))
    say = phases(progress, len(todo) + bool(v2))
    for path in todo:
        say(f"Keying the table's budget: the totals per '{path[-1]}' …")
        made[path] = _level_key(df, list(path), weights, coded)
    if v2:
        say(f"Keying the table's budget: the totals per area of {len(v2)} finer levels …")
        words = [code_words(df[lv]) for lv in paths[-1]]
        v2_keys = chained_keys("table", words, weights[0] if weights else None, [len(p) for p in v2])
    else:
        v2_keys = []
    v1_finer = [made[tuple(p)] for p in paths[1:] if tuple(p) in made]
    if progress is not None:
        progress(1.0, "Keyed the table's budget")
    return list(dict.fromkeys([made[tuple(paths[0])], *v2_keys, made[(earlier,)], *v1_finer]))


def _varies(s: pd.Series) -> bool:
    """``s.nunique(dropna=False) > 1`` without hashing every value (8 M block codes): a missing
    value beside a present one, or a value unequal to the first.

    >>> _varies(pd.Series(["01", "01"])), _varies(pd.Series(["01", None])), _varies(pd.Series([1, 1.0]))
    (False, True, False)
    """
    if len(s) < 2:
        return False
    na = s.isna().to_numpy(dtype=bool)
    if na.any():
        return not na.all()
    return bool((s != s.iloc[0]).to_numpy(dtype=bool).any())


def _level_key(df: pd.DataFrame, path: list[str], weights: list[np.ndarray], coded: dict[str, Any]) -> str:
    """:func:`codes_fingerprint` of the totals per area of the ``path`` levels (a group-size
    histogram: one row per (area, size column), the column's position as a code); ``coded``
    caches each level's :func:`canonical_codes`."""
    if len(weights) <= 1:
        for lv in path:
            if lv not in coded:
                coded[lv] = canonical_codes(df[lv])
        return coded_fingerprint("table", [coded[lv] for lv in path], weights[0] if weights else None, len(df))
    n = len(df)
    codes = [np.tile(df[lv].to_numpy(dtype=object), len(weights)) for lv in path]
    size = np.repeat(np.array([f"#{i + 1}" for i in range(len(weights))], dtype=object), n)
    return codes_fingerprint("table", [*codes, size], np.concatenate(weights))


def _key_counts(s: pd.Series, col: str) -> np.ndarray:
    """Whole counts >= 0 of a count column, for the key, refused as the counts refuse them
    (:func:`dpcore.areas.counts.whole_counts`): the app keys a table before it counts it."""
    return whole_counts(s, col)


# ---------------------------------------------------------------------------------------------
# structure and table
# ---------------------------------------------------------------------------------------------


def _natural_key(v: str) -> list[Any]:
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", str(v)) if p]


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _rows(mask: np.ndarray) -> str:
    pos = np.flatnonzero(mask)[:_MAX_EXAMPLES] + 2  # +1 header, +1 one-based
    more = ", …" if mask.sum() > _MAX_EXAMPLES else ""
    return "rows " + ", ".join(str(p) for p in pos) + more


def _check_columns(df: pd.DataFrame, cols: Sequence[str], role: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        have = ", ".join(map(str, list(df.columns)[:20]))
        raise InputError(
            f"The {role} column{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))} "
            f"{'are' if len(missing) > 1 else 'is'} not in the table (columns: {have}). "
            "Choose columns that exist, or fix the header."
        )


def _codes(df: pd.DataFrame, levels: Sequence[str], what: str) -> pd.DataFrame:
    """The level columns as stripped text; missing codes are an InputError."""
    out = {}
    for lv in levels:
        s = df[lv]
        if pd.api.types.is_float_dtype(s) and s.dropna().apply(float.is_integer).all():
            s = s.astype("Int64")
        s = s.astype("string").str.strip()
        bad = s.isna().to_numpy() | (s.fillna("") == "").to_numpy()
        if bad.any():
            raise InputError(
                curator_only(f"{what}: column '{lv}' has {_plural(int(bad.sum()), 'missing code')} ({_rows(bad)}). "
                "Every row needs a code at every level: fill them in or remove those rows.")
            )
        out[lv] = s.astype(str).to_numpy()
    return pd.DataFrame(out)


@dataclass(frozen=True)
class CensusStructure:
    """The **public** shape of a census release: levels, areas and ordinal bins.

    Parameters
    ----------
    levels : tuple of str
        Level names, top first (``("state", "county", "tract")``).
    leaf_paths : tuple of tuple of str
        The finest areas, each as its code path, sorted (so every parent's children are
        contiguous: the depth-first order the nominal transform needs).
    ordinals : tuple of str
        Names of the ordinal attributes.
    bins : tuple of tuple of str
        Ordered values of each ordinal attribute.
    public_areas : bool
        Whether the area list came from a public list (True) or from the data (False: a
        privacy leak, see the module docstring).
    bins_source : tuple of str
        Where each ordinal's values came from (:data:`BINS_FROM_DATA`, :data:`BINS_TYPED`,
        :data:`BINS_FLAG`, :data:`BINS_GIVEN`), one per ordinal; empty when not stated.
    """

    levels: tuple[str, ...]
    leaf_paths: tuple[tuple[str, ...], ...]
    ordinals: tuple[str, ...] = ()
    bins: tuple[tuple[str, ...], ...] = ()
    public_areas: bool = False
    bins_source: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.levels:
            raise ParameterError("Choose at least one level column (e.g. state), top level first.")
        if len(set(self.levels)) != len(self.levels):
            raise ParameterError(f"The levels {list(self.levels)} repeat a column; name each level once.")
        if not self.leaf_paths:
            raise InputError("There are no areas. Give a table (or public area list) with at least one row.")
        if len(self.bins) != len(self.ordinals):
            raise ParameterError("Give one list of ordered values per ordinal attribute.")
        for name, b in zip(self.ordinals, self.bins, strict=True):
            if len(b) == 0:
                raise InputError(f"The ordinal attribute '{name}' has no values.")
        if self.bins_source and len(self.bins_source) != len(self.ordinals):
            raise ParameterError("State where the values came from once per ordinal attribute.")

    def bins_origin(self) -> dict[str, str]:
        """``{ordinal: where its values came from}`` (for the release record)."""
        return {o: (self.bins_source[j] if self.bins_source else "not stated")
                for j, o in enumerate(self.ordinals)}

    @property
    def depth(self) -> int:
        return len(self.levels)

    @property
    def level_names(self) -> list[str]:
        """``["total", *levels]``: depth 0 is the grand total."""
        return [TOTAL_LEVEL, *self.levels]

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.leaf_paths), *(len(b) for b in self.bins))

    def paths_at(self, depth: int) -> list[tuple[str, ...]]:
        """The areas at ``depth`` (0 = total, ``len(levels)`` = leaves), in order."""
        if not 0 <= depth <= self.depth:
            raise ParameterError(f"Level depth {depth} is outside 0..{self.depth}.")
        out: list[tuple[str, ...]] = []
        last = None
        for p in self.leaf_paths:
            q = p[:depth]
            if q != last:
                out.append(q)
                last = q
        return out

    def level_depth(self, level: str) -> int:
        names = self.level_names
        if level not in names:
            raise ParameterError(f"Unknown level '{level}'; choose one of {', '.join(names)}.")
        return names.index(level)

    def leaf_mask(self, path: Sequence[str]) -> np.ndarray:
        """Boolean mask over the leaves below the area ``path``."""
        path = tuple(str(p) for p in path)
        k = len(path)
        mask = np.fromiter((p[:k] == path for p in self.leaf_paths), bool, len(self.leaf_paths))
        if not mask.any():
            raise ParameterError(f"There is no area {' / '.join(path)}; pick one from the list.")
        return mask

    def bin_labels(self) -> list[str]:
        """Column labels of the ordinal cells, e.g. ``age=0-17`` (C order over the bins)."""
        if not self.ordinals:
            return []
        grids = np.meshgrid(*[np.arange(len(b)) for b in self.bins], indexing="ij")
        idx = np.stack([g.ravel() for g in grids], axis=1)
        return [", ".join(f"{o}={self.bins[j][i]}" for j, (o, i) in enumerate(zip(self.ordinals, row, strict=True)))
                for row in idx]

    @classmethod
    def from_areas(cls, areas: pd.DataFrame, levels: Sequence[str], ordinals: Sequence[str] = (),
                   bins: Sequence[Sequence[str]] = (), bins_source: Sequence[str] = ()) -> CensusStructure:
        """The structure from a **public** area list (one row per finest area, code columns)."""
        levels = tuple(levels)
        if not isinstance(areas, pd.DataFrame) or areas.empty:
            raise InputError("The public area list is empty. Give one row per finest area with its codes.")
        _check_columns(areas, levels, "area-list level")
        codes = _codes(areas, levels, "The public area list")
        paths = sorted(set(map(tuple, codes.to_numpy().tolist())))
        return cls(levels, tuple(paths), tuple(ordinals), tuple(tuple(map(str, b)) for b in bins), True,
                   tuple(bins_source))


def _check_roles(df: pd.DataFrame, levels: list[str], count: str | None, ordinals: list[str],
                 names: dict[str, str], areas: pd.DataFrame | None) -> None:
    """Refuse a table whose columns cannot play the roles given (missing, used twice, empty)."""
    if not isinstance(df, pd.DataFrame):
        raise InputError("The census data must be a table (pandas DataFrame).")
    if not levels:
        raise ParameterError("Choose at least one level column (e.g. state), top level first.")
    roles = levels + ordinals + ([count] if count else [])
    dup = sorted({c for c in roles if roles.count(c) > 1})
    if dup:
        raise ParameterError(
            f"Column {', '.join(map(repr, dup))} is used twice (as a level, count or ordinal). "
            "Give each column one role."
        )
    _check_columns(df, levels, "level")
    if count:
        _check_columns(df, [count], "count")
    _check_columns(df, ordinals, "ordinal")
    if areas is None:
        _check_columns(df, list(names.values()), "name")
    unknown = [lv for lv in names if lv not in levels]
    if unknown:
        raise ParameterError(f"Names are given for {unknown}, which are not levels ({levels}).")
    if df.empty:
        raise InputError("The census table has no rows. Upload a file with a header and at least one data row.")


def _count_weights(df: pd.DataFrame, count: str | None, n: int) -> np.ndarray:
    """Each row's count: the count column (whole numbers ≥ 0, refused otherwise) or 1 per row."""
    return whole_counts(df[count], count) if count else np.ones(n, dtype=np.int64)


def _ordinal_bins(df: pd.DataFrame, ordinals: list[str], orders: dict[str, Sequence[Any]], require_orders: bool,
                  orders_source: str, n: int) -> tuple[list[tuple[str, ...]], list[np.ndarray], tuple[str, ...]]:
    """Each ordinal's public values in order, each row's bin index and where each order came from."""
    if require_orders:
        missing_orders = [o for o in ordinals if o not in orders]
        if missing_orders:
            raise ParameterError(
                f"Give the public values of {', '.join(map(repr, missing_orders))} in their order (e.g. "
                "0-17|18-64|65+): values taken from the data would drop a value nobody has from the release, "
                "and that absence is not protected.")
    bins_source = tuple(orders_source if o in orders else BINS_FROM_DATA for o in ordinals)
    bins: list[tuple[str, ...]] = []
    bin_idx: list[np.ndarray] = []
    for o in ordinals:
        s = df[o]
        miss = s.isna().to_numpy()
        if miss.any():
            raise InputError(
                curator_only(f"The ordinal column '{o}' has {_plural(int(miss.sum()), 'missing value')} "
                f"({_rows(miss)}). Fill them in or drop those rows.")
            )
        vals = s.astype(str).str.strip().to_numpy()
        if o in orders:
            order = [str(v).strip() for v in orders[o]]
            if len(set(order)) != len(order):
                raise ParameterError(f"The order given for '{o}' repeats a value; list each value once.")
        else:
            order = sorted(set(vals.tolist()), key=_natural_key)
        pos = {v: i for i, v in enumerate(order)}
        idx = np.fromiter((pos.get(v, -1) for v in vals), np.int64, n)
        out = idx < 0
        if out.any():
            ex = sorted(set(vals[out].tolist()))[:_MAX_EXAMPLES]
            raise InputError(
                curator_only(f"The ordinal column '{o}' has values {ex} ({_rows(out)}) that are not in its public list of "
                f"values {order}. Add them to the list if they are values of the attribute, or fix those rows.")
            )
        bins.append(tuple(order))
        bin_idx.append(idx)
    return bins, bin_idx, bins_source


def _name_maps(df: pd.DataFrame, data_paths: list[tuple[str, ...]], levels: list[str], names: dict[str, str],
               areas: pd.DataFrame | None) -> dict[str, dict[tuple[str, ...], str]]:
    """``{level: {code path: name}}`` from the public area list when there is one."""
    # Names must come from the same source as the area list: names taken from the data
    # would leave the empty areas of a public list without a name, which reveals them.
    name_src, name_paths = df, data_paths
    if names and areas is not None:
        missing_names = [c for c in names.values() if c not in areas.columns]
        if missing_names:
            raise InputError(
                f"The name column{'s' if len(missing_names) > 1 else ''} {', '.join(map(repr, missing_names))} "
                "must be in the public area list (names taken from the data would reveal which areas "
                "are empty). Add the names to the area list, or leave them out."
            )
        name_src = areas
        name_paths = list(map(tuple, _codes(areas, levels, "The public area list").to_numpy().tolist()))
    name_maps: dict[str, dict[tuple[str, ...], str]] = {}
    for lv, col in names.items():
        k = levels.index(lv) + 1
        nm = name_src[col].astype("string").fillna("").str.strip().to_numpy()
        m: dict[tuple[str, ...], str] = {}
        for p, v in zip(name_paths, nm, strict=True):
            m.setdefault(p[:k], str(v))
        name_maps[lv] = m
    return name_maps


@dataclass(frozen=True)
class CensusTable:
    """Confidential counts per leaf area (× ordinal bins), with the structure they live in.

    Build it with :meth:`from_frame`.  ``counts`` has the shape ``structure.shape`` and holds
    **true** counts: never show or export it.
    """

    structure: CensusStructure
    counts: np.ndarray
    names: dict[str, dict[tuple[str, ...], str]] = field(default_factory=dict)
    count_column: str | None = None
    n_rows: int = 0
    n_duplicate_rows: int = 0
    n_added_areas: int = 0

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        levels: Sequence[str],
        count: str | None = None,
        *,
        ordinals: Sequence[str] = (),
        ordinal_orders: Mapping[str, Sequence[Any]] | None = None,
        names: Mapping[str, str] | None = None,
        areas: pd.DataFrame | None = None,
        orders_source: str = BINS_GIVEN,
        require_orders: bool = False,
    ) -> CensusTable:
        """Validate a table and aggregate it to leaf areas.

        Parameters
        ----------
        df : DataFrame
            One row per area (with ``count``) or per person (``count=None``: each row
            counts 1).  Rows with the same path (and bins) are summed.
        levels : sequence of str
            The code columns, top level first, finest last.  An area is its code path.
        count : str, optional
            The count column (whole numbers ≥ 0).
        ordinals : sequence of str
            Ordinal attribute columns (e.g. an age band).
        ordinal_orders : mapping, optional
            The public order of each ordinal's values; by default the sorted (natural order)
            values found in the data, which leaks which bins are empty.  A data value outside a
            given order is refused.
        names : mapping, optional
            ``{level: name column}``, e.g. ``{"state": "state_name"}`` (public labels).
        areas : DataFrame, optional
            **Public** list of finest areas (code columns named like ``levels``).  Areas only
            in this list get a true count of 0 (and noise).  Without it the area list is
            derived from the data: a privacy leak (areas with nobody vanish).
        orders_source : str
            Where ``ordinal_orders`` came from (:data:`BINS_TYPED` in the app, :data:`BINS_FLAG`
            on the command line), stated in the release record; values taken from the data are
            recorded as :data:`BINS_FROM_DATA`.
        require_orders : bool
            Refuse an ordinal without a public order (the app does) instead of taking its values
            from the data.
        """
        levels = [str(c) for c in levels]
        ordinals = [str(c) for c in ordinals]
        names = dict(names or {})
        _check_roles(df, levels, count, ordinals, names, areas)

        codes = _codes(df, levels, "The census table")
        n = len(df)
        weights = _count_weights(df, count, n)

        bins, bin_idx, bins_source = _ordinal_bins(df, ordinals, dict(ordinal_orders or {}), require_orders,
                                                   orders_source, n)

        # leaf areas: from the public list, or (leak) from the data
        data_paths = list(map(tuple, codes.to_numpy().tolist()))
        if areas is not None:
            structure = CensusStructure.from_areas(areas, levels, ordinals, bins, bins_source)
            known = set(structure.leaf_paths)
            unknown_rows = np.fromiter((p not in known for p in data_paths), bool, n)
            if unknown_rows.any():
                bad_paths = [p for p, u in zip(data_paths, unknown_rows, strict=True) if u]
                ex = ", ".join(" / ".join(p) for p in list(dict.fromkeys(bad_paths))[:3])
                raise InputError(
                    curator_only(f"{_plural(int(unknown_rows.sum()), 'row')} of the table ({_rows(unknown_rows)}) have areas "
                    f"that are not in the public area list (e.g. {ex}). Fix their codes or use an area list "
                    "that contains them.")
                )
        else:
            structure = CensusStructure(tuple(levels), tuple(sorted(set(data_paths))), tuple(ordinals),
                                        tuple(bins), False, bins_source)

        # finest-level paths that share a code but differ in their parents are distinct areas
        leaf_pos = {p: i for i, p in enumerate(structure.leaf_paths)}
        li = np.fromiter((leaf_pos[p] for p in data_paths), np.int64, n)
        flat = li
        for b, idx in zip(bins, bin_idx, strict=True):
            flat = flat * len(b) + idx
        size = int(np.prod(structure.shape))
        counts = np.bincount(flat, weights=weights, minlength=size)
        counts = np.rint(counts).astype(np.int64).reshape(structure.shape)
        n_dup = int(n - len(np.unique(flat))) if count else 0

        name_maps = _name_maps(df, data_paths, levels, names, areas)

        added = len(structure.leaf_paths) - len(set(data_paths))
        return cls(structure, counts, name_maps, count, n, n_dup, added)

    @property
    def total(self) -> int:
        """True total (confidential)."""
        return int(self.counts.sum())

    def profile(self) -> near_match.Profile:
        """What near-identical tables are recognised by (issue 26 item 14; curator-side, stored only as
        keyed buckets): the levels and ordinals, the total and the areas with people."""
        s = self.structure
        return near_match.counts_profile("areas", [*s.levels, *s.ordinals, "census table"], self.counts)
