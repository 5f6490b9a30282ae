"""What every aggregation engine computes, and the rules that make their answers identical.

The mechanisms work on aggregates; an *engine* turns raw rows (a CSV or Parquet file, or a
folder of them) into those aggregates:

* :meth:`Engine.points`: location points -> the frequency matrix over a public grid
  (:class:`~dpcore.data.domain.Aggregate`), with the per-person cap;
* :meth:`Engine.code_counts`: rows carrying area codes (one per person or trip, or with a count
  column) -> counts per code combination, with the per-person cap for trips.  Census hierarchies
  and O/D flows are built from that small table by the existing in-memory code.

Three engines give identical answers: ``numpy`` (pandas + numpy, in memory), ``duckdb``
(embedded, streaming and out of core) and ``spark`` (PySpark, for clusters).  They can only be
identical if every rule is defined without reference to row order or to an engine's own hash
function, because DuckDB and Spark scan files in parallel and in no guaranteed order.  The rules:

**Cells.**  A point's column is ``searchsorted(edges, lon, "right") - 1`` clipped to the grid,
with ``edges = numpy.linspace(west, east, cols + 1)`` (:meth:`Grid.cell_index`).  SQL cannot call
searchsorted, so the engines compute ``c = floor((lon - west) / step)`` and correct it by one
against ``edge(i) = i * step + west`` (``edge(cols) = east``), which is, operation for operation,
how numpy's linspace makes its edges; the IEEE results are therefore the same bits.

**Which records a cap keeps.**  A person with more than ``cap`` records keeps the ``cap`` records
with the smallest key

* points: ``frac(lon * A + lat * B)``, ties broken by ``(lon, lat)``: identical coordinates are
  interchangeable, so the aggregate is unique.  The key is pseudo-random at the scale of
  metres, so the kept records are a spread sample, not the westernmost;
* trips: ``md5(person · origin · destination)`` as hexadecimal text (md5 is the one hash the three
  engines share), ties broken by the codes.  The person is part of the key so that no pair is
  preferred by everybody.

Which records are kept does not change the privacy argument: after the cap one person changes
at most ``cap`` counts by one each, whatever the rule.

**Codes and ids** are compared as canonical text: surrounding spaces stripped, and a whole number
written without leading zeros, sign ``+`` or trailing ``.0`` (``"007"``, ``7`` and ``7.0`` are the
same person); ``True``/``true`` are one person (pandas reads them as one boolean).  Area codes are only stripped (their leading zeros matter), except that whole
floats from a Parquet file become integer text, as :func:`dpcore.data.code_tables.code_text` does.

**The fingerprint** that keys a dataset's budget is order independent and engine independent:
the number of points and sums of integer hashes of the coordinates (person ids left out, so
choosing a person column does not give the same points a fresh budget).  It is a key, never
published.  Coded rows (census and hierarchy tables, O/D trips) are keyed by
:func:`codes_fingerprint` of the engine's answer (:class:`CodeCounts`), which every engine
computes identically, or of the rows read in memory: the same key either way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from dpcore.data.domain import Aggregate, Grid
from dpcore.data.persons import canonical_id, frac_key
from dpcore.errors import InputError, ParameterError
from dpcore.privacy.near_match import Profile

ProgressCallback = Callable[[float, str], None]

# Multipliers of the two fingerprint hashes (same idea, different constants).
FP_A1, FP_B1 = 104729.0 * 0.5772156649015329, 3571.0 * 2.718281828459045
FP_A2, FP_B2 = 15485863.0 * 0.7071067811865476, 7927.0 * 3.141592653589793
FP_SCALE = 2.0**31  # frac * 2^31 -> a 31-bit integer; sums of 2^32 of them fit in int64
SEP = "\x1f"  # unit separator between the fields hashed for the trip cap


ENGINE_NAMES = ("numpy", "duckdb", "spark")


# ---------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """One CSV/Parquet file or several of one format (a folder, a glob, a list).

    ``paths`` are the files, sorted; ``fmt`` is ``"csv"`` (optionally gzipped) or
    ``"parquet"``; ``label`` is what the curator typed (curator-only, never exported).
    """

    paths: tuple[str, ...]
    fmt: str
    label: str

    @property
    def n_bytes(self) -> int:
        return sum(Path(p).stat().st_size for p in self.paths)

    @classmethod
    def from_path(cls, path: str | Path | list[str | Path]) -> Source:
        """A file, a folder (its CSV or Parquet files, subfolders included), a glob pattern or a list
        of files."""
        if isinstance(path, list | tuple):
            if not path:
                raise InputError("No input file was given. Name a CSV or Parquet file, a folder or a pattern.")
            items = [Path(p) for p in path]
            label = ", ".join(p.name for p in items[:3]) + (" …" if len(items) > 3 else "")
        else:
            p = Path(path).expanduser()
            label = str(path)
            if any(ch in str(path) for ch in "*?["):
                items = sorted(Path(p.anchor or ".").glob(str(p.relative_to(p.anchor)) if p.is_absolute() else str(p)))
                if not items:
                    raise InputError(f"No file matches '{path}'. Check the pattern.")
            elif p.is_dir():
                # subfolders too (partitioned datasets: year=2024/part-0.parquet); hidden and
                # bookkeeping files (.crc, _SUCCESS, _metadata) are not data
                items = sorted(q for q in p.rglob("*") if q.is_file() and _fmt(q) is not None
                               and not any(part.startswith((".", "_")) for part in q.relative_to(p).parts))
                if not items:
                    raise InputError(
                        f"The folder '{path}' holds no CSV (.csv, .csv.gz) or Parquet (.parquet) files. "
                        "Point to the folder that holds the data files."
                    )
            elif p.is_file():
                items = [p]
            else:
                raise InputError(f"Input '{path}' does not exist. Check the path.")
        fmts = {_fmt(q) for q in items}
        if None in fmts:
            bad = next(q for q in items if _fmt(q) is None)
            raise InputError(
                f"'{bad.name}' is not a CSV (.csv, .csv.gz, .txt, .tsv) or Parquet (.parquet) file. "
                "The engines read those two formats; convert the file or leave it out."
            )
        if len(fmts) > 1:
            raise InputError(
                f"'{label}' mixes CSV and Parquet files. Put files of one format in the folder."
            )
        for q in items:
            if not q.is_file():
                raise InputError(f"Input '{q}' does not exist. Check the path.")
        return cls(tuple(str(q) for q in sorted(items)), fmts.pop() or "csv", label)


def _fmt(p: Path) -> str | None:
    name = p.name.lower()
    if name.endswith(".parquet") or name.endswith(".pq"):
        return "parquet"
    for ext in (".csv", ".csv.gz", ".txt", ".tsv", ".txt.gz", ".tsv.gz", ".gz"):
        if name.endswith(ext):
            return "csv"
    return None


# ---------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PointCounts:
    """An engine's answer for points.  **Confidential** (curator-only).  ``fingerprint`` is ""
    when it was not asked for (it costs a second, light pass in the SQL engines)."""

    aggregate: Aggregate
    n_read: int
    dropped: dict[str, int]
    fingerprint: str
    engine: str
    #: the tolerant keys (:func:`tolerant_points_fingerprints` with the grid's bounds), computed with
    #: ``fingerprint``; the same in every engine
    keys: tuple[str, ...] = ()
    #: the near-match profile (:func:`dpcore.privacy.near_match.points_profile`: columns, number of
    #: valid points, their extent), computed with ``fingerprint``; None without it
    profile: Profile | None = None

    @property
    def n_kept(self) -> int:
        return self.n_read - int(sum(self.dropped.values()))


@dataclass(frozen=True, eq=False)
class CodeCounts:
    """An engine's answer for coded rows.  **Confidential** (curator-only).

    ``frame`` has the key columns (canonical text), ``count`` (after the per-person cap) and
    ``count_all`` (before it), one row per code combination present in the input (with a count
    column, combinations whose counts are all 0 are kept: empty areas).  Sorted by the keys.
    """

    frame: pd.DataFrame
    keys: tuple[str, ...]
    n_read: int
    n_capped: int
    engine: str
    n_missing: int = 0  # rows dropped for a missing code (``drop_missing``)


class Engine(Protocol):
    name: str

    def columns(self, src: Source) -> list[str]: ...

    def head(self, src: Source, n: int = 1000) -> pd.DataFrame: ...

    def points(self, src: Source, grid: Grid, *, lat: str, lon: str, user: str | None = None,
               user_cap: int | None = None, progress: ProgressCallback | None = None,
               fingerprint: bool = True, drop_unreadable: bool = False) -> PointCounts: ...

    def code_counts(self, src: Source, keys: list[str], *, count: str | None = None, user: str | None = None,
                    cap: int | None = None, distinct: bool = False,
                    progress: ProgressCallback | None = None, drop_missing: bool = False) -> CodeCounts: ...


# ---------------------------------------------------------------------------------------------
# shared rules, in numpy (the SQL engines write the same in SQL)
# ---------------------------------------------------------------------------------------------


def check_point_options(user: str | None, user_cap: int | None) -> None:
    if user is not None and user_cap is None:
        raise ParameterError(
            "A user-id column was given without a cap on records per person. "
            "Set the cap (for example 10) or remove the user-id column."
        )
    if user is None and user_cap is not None and user_cap != 1:
        raise ParameterError(
            "A cap on records per person needs a user-id column. Choose the column that "
            "identifies a person, or use 'one record' as the unit of privacy."
        )
    if user_cap is not None and (not isinstance(user_cap, int | np.integer) or user_cap < 1):
        raise ParameterError(f"The cap on records per person must be a whole number >= 1 (got {user_cap!r}).")


def check_code_options(keys: list[str], count: str | None, user: str | None, cap: int | None) -> None:
    if not keys:
        raise ParameterError("Name at least one code column.")
    if len(set(keys)) != len(keys):
        raise ParameterError(f"The code columns {keys} name a column twice.")
    if count is not None and user is not None:
        raise ParameterError("Give either a count column (aggregated rows) or a person id (one row per trip), not both.")
    if user is None and cap not in (None, 1):
        raise ParameterError("A cap per person needs the person-id column.")
    if user is not None and cap is None:
        raise ParameterError("A person-id column needs a cap on the rows per person (e.g. 1).")
    if cap is not None and (not isinstance(cap, int | np.integer) or cap < 1):
        raise ParameterError(f"The most trips per person must be a whole number >= 1 (got {cap!r}).")


def md5_hex(texts: np.ndarray) -> np.ndarray:
    """md5 hex digests of UTF-8 texts (object array), computed once per distinct text."""
    codes, uniq = pd.factorize(pd.Series(texts, dtype=object))
    digests = np.array([hashlib.md5(str(t).encode("utf-8")).hexdigest() for t in uniq], dtype=object)
    return digests[codes]


def point_fingerprint(n: int, s1: int, s2: int) -> str:
    """The dataset key from the engine-independent sums (see the module docstring).  Person ids
    are left out on purpose, as for O/D trips: the same points loaded with or without a person
    column (or with renamed ids) are the same people's data and must draw on one budget."""
    return hashlib.sha256(f"points:v3:{int(n)}:{int(s1)}:{int(s2)}".encode()).hexdigest()[:16]


def fingerprint_sums(lon: np.ndarray, lat: np.ndarray) -> tuple[int, int]:
    h1 = np.floor(frac_key(lon, lat, FP_A1, FP_B1) * FP_SCALE).astype(np.int64)
    h2 = np.floor(frac_key(lon, lat, FP_A2, FP_B2) * FP_SCALE).astype(np.int64)
    return int(h1.sum()), int(h2.sum())


def points_fingerprint(lon: np.ndarray, lat: np.ndarray) -> str:
    """:func:`point_fingerprint` of points held in memory (the rows kept after validation)."""
    lon = np.asarray(lon, dtype=np.float64)
    lat = np.asarray(lat, dtype=np.float64)
    s1, s2 = fingerprint_sums(lon, lat)
    return point_fingerprint(lon.size, s1, s2)


#: Coordinates are rounded to this many decimal places of a degree (1e-7°, about 1 cm) in the
#: tolerant keys of points (:func:`tolerant_points_fingerprints`): far below any grid's cell.
KEY_DECIMALS = 7


def quantised(v: np.ndarray) -> np.ndarray:
    """Coordinates rounded to :data:`KEY_DECIMALS` decimals: ``floor(v·10⁷ + 0.5) / 10⁷``, three IEEE
    operations that the SQL engines write the same way (:func:`dpcore.data.engines.sql.fingerprint_query`),
    so every engine gets the same doubles."""
    scale = 10.0**KEY_DECIMALS
    return np.floor(np.asarray(v, dtype=np.float64) * scale + 0.5) / scale


def tolerant_key(n: int, s1: int, s2: int) -> str:
    """A tolerant budget key from the sums of :func:`fingerprint_sums` over ``n`` quantised points."""
    return hashlib.sha256(f"points:q{KEY_DECIMALS}:{int(n)}:{int(s1)}:{int(s2)}".encode()).hexdigest()[:16]


def tolerant_keys_of_sums(every: tuple[int, int, int], inside: tuple[int, int, int] | None) -> list[str]:
    """The tolerant keys from ``(n, s1, s2)`` over every valid point and over those inside the bounds
    (None: no bounds).  No point inside gives no key (every such data would share it); no point, none."""
    if not int(every[0]):
        return []
    keys = [tolerant_key(*every)]
    if inside is not None and int(inside[0]):
        keys.append(tolerant_key(*inside))
    return keys


def tolerant_points_fingerprints(lon: np.ndarray, lat: np.ndarray, bounds: Any = None) -> list[str]:
    """Further budget keys of points, besides :func:`points_fingerprint` (issue 26 item 12).

    The exact key changes when a file is saved again with fewer digits (a spreadsheet writes
    ``%.15g``) or when a point far outside the release is added.  These keys do not: the
    coordinates are rounded to :data:`KEY_DECIMALS` decimals (:func:`quantised`, the same double in
    every IEEE engine) before the same order-independent hash, over every point and, with
    ``bounds`` (``west``, ``south``, ``east``, ``north``), over the points inside them, which is all a
    release can use.  The DuckDB and Spark engines compute the same keys in SQL
    (:attr:`PointCounts.keys`), so the same data finds the same budget whichever engine read it.
    They are kept as aliases of the data's budget
    (:meth:`dpcore.core.session.Session.adopt_keys`), so a budget is found by any of them.  A point
    that lies within a rounding of 10⁻¹³° of a rounding boundary can still change them (for data
    written with at most 7 decimals, never).  Keys, never published.

    >>> lon, lat = np.array([-73.98765432101234, -73.9]), np.array([40.71234567890123, 40.8])
    >>> a = tolerant_points_fingerprints(lon, lat)
    >>> a == tolerant_points_fingerprints(np.array([float(f"{v:.15g}") for v in lon]), lat)  # re-saved
    True
    >>> from types import SimpleNamespace
    >>> box = SimpleNamespace(west=-74.0, south=40.5, east=-73.5, north=41.0)
    >>> far = tolerant_points_fingerprints(np.append(lon, 10.0), np.append(lat, 10.0), box)
    >>> far[1] == a[0]   # a point outside the bounds: the key of the points inside them is the same
    True
    >>> len(tolerant_points_fingerprints(lon, lat, SimpleNamespace(west=0.0, south=0.0, east=1.0, north=1.0)))
    1
    """
    lon = np.asarray(lon, dtype=np.float64)
    lat = np.asarray(lat, dtype=np.float64)
    qlon, qlat = quantised(lon), quantised(lat)
    every = (lon.size, *fingerprint_sums(qlon, qlat))
    inside_sums = None
    if bounds is not None:
        inside = (lon >= bounds.west) & (lon <= bounds.east) & (lat >= bounds.south) & (lat <= bounds.north)
        inside_sums = (int(inside.sum()), *fingerprint_sums(qlon[inside], qlat[inside]))
    return tolerant_keys_of_sums(every, inside_sums)


def codes_fingerprint(tag: str, codes: Sequence[Any], count: Any = None) -> str:
    """Budget key of coded rows: a multiset hash of their totals per code combination.

    The rows' code columns are compared as canonical text (:func:`dpcore.data.persons.canonical_id`:
    stripped, a whole number without leading zeros or ``.0``, so ``"01"`` in a CSV and ``1`` in a
    Parquet file are one code), the counts summed per combination (``count`` whole numbers; None:
    each row counts 1) and combinations whose total is 0 left out.  Each remaining
    ``(codes, total)`` is hashed with md5 into two 64-bit words; the key is a hash of ``tag``, the
    number of combinations and the two sums of those words mod 2**64 (the additive multiset hash
    of Clarke, Devadas, van Dijk, Gassend & Suh, "Incremental Multiset Hash Functions and Their
    Application to Memory Integrity Checking", ASIACRYPT 2003, §3).

    So the key does not change with the rows' order, with columns that are not passed, with how
    the file is encoded, compressed or typed, or with how the rows are split (one row per person,
    or one per area with a count): it is a function of the totals, which every engine computes
    identically (:meth:`Engine.code_counts`).  Confidential-data derived: a key, never published.

    Parameters
    ----------
    tag : str
        What the rows are (``"table"``, ``"trips"``): part of the key.
    codes : sequence of array-like
        The code columns, equal lengths (any dtype: text, integers, whole floats, booleans).
    count : array-like of int, optional
        The whole, non-negative count of each row.

    >>> a = codes_fingerprint("table", [["01", "01", "02"], ["001", "003", "001"]], [5, 0, 7])
    >>> a == codes_fingerprint("table", [[2, 1], [1, 1]], [7, 5])   # typed, reordered, no empty row
    True
    >>> a == codes_fingerprint("table", [["01", "01", "02"], ["001", "001", "001"]], [3, 2, 7])
    True
    """
    n = len(codes[0]) if codes else 0
    if any(len(v) != n for v in codes) or (count is not None and np.shape(count) != (n,)):
        raise ParameterError("The code and count columns of a fingerprint must have one value per row.")
    return coded_fingerprint(tag, [canonical_codes(v) for v in codes], count, n)


#: A code column as integer ids (one per row) and the canonical text of each id.
CodedColumn = tuple[np.ndarray, np.ndarray]


def canonical_codes(values: Any) -> CodedColumn:
    """A code column as integer ids of its canonical text: ``(ids, texts)``, ``texts[ids[i]]`` the
    canonical text of row ``i`` (:func:`dpcore.data.persons.canonical_id`; "" where missing).
    The text work runs once per distinct value; rows equal as canonical text share an id.

    >>> ids, texts = canonical_codes(["01", "1", " 2", None])
    >>> texts[ids].tolist()
    ['1', '1', '2', '']
    """
    fast = _number_codes(values)
    if fast is not None:
        return fast
    v = values if hasattr(values, "dtype") else np.asarray(values, dtype=object)
    idx, uniq = pd.factorize(pd.Series(v).reset_index(drop=True), use_na_sentinel=True)
    canon = pd.Series(canonical_id(pd.Series(uniq)), dtype=object).fillna("").to_numpy(dtype=object)
    ids, texts = pd.factorize(np.append(canon, ""))  # the last one: the missing value's id
    return ids[idx].astype(np.int64, copy=False), np.asarray(texts, dtype=object)


def _number_codes(values: Any) -> CodedColumn | None:
    """:func:`canonical_codes` of a column of whole numbers without a missing value: integers, or
    text of ASCII digits only (at most 18, the census codes' case), whose canonical text is the
    number's (``"0042"`` is ``"42"``: :func:`dpcore.data.persons.canonical_id`).  The rows are
    factorized as int64 (hashing 8 M numbers, not 8 M strings) and only the distinct numbers are
    written as text.  None for any other column (the general path decides).

    >>> ids, texts = _number_codes(pd.Series(["007", "7", "10"], dtype="string[pyarrow]"))
    >>> texts[ids].tolist()
    ['7', '7', '10']
    >>> _number_codes(pd.Series(["7", " 8"], dtype="string[pyarrow]")) is None   # blank: the general path
    True
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    nums = number_values(values)
    if nums is None:
        return None
    ids, uniq = pd.factorize(nums)
    texts = np.asarray(pc.cast(pa.array(uniq), pa.string()).to_numpy(zero_copy_only=False), dtype=object)
    return ids.astype(np.int64, copy=False), np.append(texts, "")  # the last one: the missing value's id


def number_values(values: Any) -> np.ndarray | None:
    """A code column of whole numbers without a missing value as its numbers (integers, or text of
    ASCII digits only, at most 18: the census codes' case, read as int64), or None for any other
    column.  Its canonical text is each number's (:func:`dpcore.data.persons.canonical_id`).

    >>> number_values(pd.Series(["007", "10"], dtype="string[pyarrow]")).tolist()
    [7, 10]
    >>> number_values(pd.Series(["7", " 8"], dtype="string[pyarrow]")) is None
    True
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    dtype = getattr(values, "dtype", None)
    if dtype is None:
        return None
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":
        nums = np.asarray(values)
    elif isinstance(dtype, pd.StringDtype) or str(dtype).startswith(("string", "large_string")):
        arr = pa.array(values) if not isinstance(values, pa.Array) else values
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if not pa.types.is_string(arr.type) and not pa.types.is_large_string(arr.type):
            return None
        if len(arr) == 0 or arr.null_count or not pc.all(pc.match_substring_regex(arr, "^[0-9]{1,18}$")).as_py():
            return None
        nums = pc.cast(arr, pa.int64()).to_numpy()
    else:
        return None
    return nums


def coded_fingerprint(tag: str, coded: Sequence[CodedColumn], count: Any, n: int) -> str:
    """:func:`codes_fingerprint` of ``n`` rows whose code columns are already
    :func:`canonical_codes` (a caller keying several level paths canonicalises each column once).
    Rows are grouped by their integer ids and summed exactly (int64); only the groups with a
    positive total are written as text and hashed.

    >>> a = [canonical_codes(["01", "01", "02"]), canonical_codes(["001", "003", "001"])]
    >>> coded_fingerprint("table", a, [5, 0, 7], 3) == codes_fingerprint("table", [[2, 1], [1, 1]], [7, 5])
    True
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    w = np.ones(n, dtype=np.int64) if count is None else np.asarray(count, dtype=np.int64)
    if coded:
        group = np.zeros(n, dtype=np.int64)
        for ids, texts in coded:  # mixed radix, re-numbered after each column: never overflows
            group = pd.factorize(group * len(texts) + ids)[0].astype(np.int64, copy=False)
        n_groups = int(group.max()) + 1 if n else 0
        totals = group_sums(group, w, n_groups)
        rep = np.empty(n_groups, dtype=np.int64)
        rep[group] = np.arange(n)  # any row of a group: they share their codes
        keep = totals > 0
        rep, totals = rep[keep], totals[keep]
        parts = [pa.array(texts, type=pa.string()).take(pa.array(ids[rep])) for ids, texts in coded]
        joined = pc.binary_join_element_wise(*parts, pc.cast(pa.array(totals), pa.string()), SEP)
    else:
        joined = pc.cast(pa.array(w[w > 0]), pa.string())
    words = np.frombuffer(_md5_each(joined), dtype="<u8").reshape(-1, 2)
    s1, s2 = (int(words[:, j].sum(dtype=np.uint64)) for j in (0, 1))  # numpy wraps mod 2**64
    return hashlib.sha256(f"codes:v1:{tag}:{len(coded)}:{len(words)}:{s1}:{s2}".encode()).hexdigest()[:16]


def _md5_each(texts: Any) -> bytes:
    """The md5 digests of a pyarrow string array's values (UTF-8), concatenated (the values are
    read as bytes: no Python string and no encoding per value).

    >>> import pyarrow as pa
    >>> _md5_each(pa.array(["a", "bc"])) == hashlib.md5(b"a").digest() + hashlib.md5(b"bc").digest()
    True
    """
    import pyarrow as pa

    md5 = hashlib.md5
    return b"".join([md5(b).digest() for b in texts.cast(pa.large_binary()).to_pylist()])


def group_sums(group: np.ndarray, w: np.ndarray, n_groups: int) -> np.ndarray:
    """Exact int64 sums of ``w`` per group (bincount's float64 is exact below 2**53)."""
    if not w.size or int(np.abs(w).sum()) < 2**53:
        return np.rint(np.bincount(group, weights=w, minlength=n_groups)).astype(np.int64)
    out = np.zeros(n_groups, dtype=np.int64)
    np.add.at(out, group, w)
    return out


@dataclass
class Progress:
    """Forwards fractions to a callback, never going backwards; silent without one."""

    callback: ProgressCallback | None
    last: float = field(default=0.0)

    def __call__(self, frac: float, msg: str) -> None:
        if self.callback is None:
            return
        frac = max(self.last, min(max(float(frac), 0.0), 1.0))
        self.last = frac
        self.callback(frac, msg)


def cap_groups(frame: pd.DataFrame, keys: list[str], cap: int, distinct: bool) -> pd.DataFrame:
    """The per-person cap on coded rows, in pandas (the SQL engines run the same steps).

    ``frame`` has one row per record with canonical text columns ``u`` (person) and ``keys``.
    Rows are grouped by (person, codes) with their multiplicity ``m``; a person's groups are
    ordered by ``md5(person · codes)`` then the codes, and the first ``cap`` records are kept
    (``distinct``: each group counts once).  Returns ``keys``, ``count`` (kept) and
    ``count_all`` (all records) per code combination, unsorted.
    """
    g = frame.groupby(["u", *keys], sort=False, dropna=False).size().rename("m").reset_index()
    texts = g["u"].astype(str)
    for k in keys:
        texts = texts + SEP + g[k].astype(str)
    g["h"] = md5_hex(texts.to_numpy(dtype=object))
    g = g.sort_values(["u", "h", *keys], kind="stable").reset_index(drop=True)
    grp = g.groupby("u", sort=False)
    if distinct:
        g["kept"] = (grp.cumcount() < int(cap)).astype(np.int64)
    else:
        cum = grp["m"].cumsum()
        g["kept"] = np.maximum(0, np.minimum(g["m"], int(cap) - (cum - g["m"]))).astype(np.int64)
    out = g.groupby(keys, sort=False).agg(count=("kept", "sum"), count_all=("m", "sum")).reset_index()
    return out
