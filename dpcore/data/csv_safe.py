"""CSV exports that a spreadsheet cannot run: formula-injection escaping (issue 18, item 4).

A spreadsheet opening a CSV file treats a cell that begins with ``=``, ``+``, ``-`` or ``@`` as
a formula (and some also after a leading tab or carriage return, after leading spaces, or with
the full-width forms ``＝ ＋ － ＠`` that some convert on input), so an area code, an area name
or a query label typed by whoever made the curator's files could run ``=HYPERLINK(...)`` or a
DDE command on the machine of anyone who opens an export.  Every CSV writer of the library goes
through :func:`csv_bytes`, which escapes such *text* cells (and header names) the way the OWASP
"CSV Injection" guidance and the spreadsheet tools expect: the cell gets a leading single quote
(``'=1+2``), which makes the spreadsheet show it as text.  The escaping is done on the values
themselves, before the exporter's own writer runs, so the writer quotes each field as it quotes
any other (RFC 4180: a field with a comma, a double quote or a line break is enclosed in double
quotes with inner quotes doubled) and no text of one cell can change how another is written.
A line break inside a cell is a line start too: Python's ``csv`` module (and so pandas) with a
``"\n"`` line terminator does not quote a bare carriage return, which readers take as the end
of a row, so text after a line break that could run as a formula gets the quote as well
(``"a\r'=1"``).
Numbers are never touched: a negative count in a numeric column stays ``-3``.  A file with no
such text cell is written byte for byte as before.

References: OWASP Foundation, "CSV Injection" (owasp.org/www-community/attacks/CSV_Injection);
RFC 4180 (Shafranovich 2005), section 2, for the quoting.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["ESTIMATE_DECIMALS", "FORMULA_PREFIXES", "append_constant_column", "csv_bytes", "escape_cell", "estimate_decimals", "is_formula",
           "pandas_csv"]

#: First characters that make a spreadsheet read a cell as a formula (OWASP), with the
#: full-width forms of ``= + - @`` (U+FF1D, U+FF0B, U+FF0D, U+FF20).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")

# Unicode White_Space, written out so that Python's ``re`` and pyarrow's RE2 (whose ``\s`` is
# ASCII only) read the same class; a formula sign after any run of these is still a formula.
_SPACE = "\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_SIGN = "=+\\-@\uff1d\uff0b\uff0d\uff20"
_START = f"(?:[\t\r]|[{_SPACE}]*[{_SIGN}])"
_FORMULA = re.compile("^" + _START)
# a cell to escape: a formula at its start or after a line break inside it
_PATTERN = f"(?:^|[\r\n]){_START}"
_MASK = re.compile(_PATTERN)
_LINE_START = re.compile(f"(^|\r\n|\r|\n)(?={_START})")
#: The UTF-8 bytes without which no text matches :data:`_PATTERN`: a match needs a tab, a carriage
#: return or a line feed, or a sign (``= + - @``, or a full-width one: non-ASCII bytes, as every
#: character outside ASCII is)
_NEEDED = np.zeros(256, dtype=bool)
_NEEDED[[ord(c) for c in "\t\r\n=+-@"]] = True
_NEEDED[0x80:] = True


#: Decimals an estimate's column is written with: counts, totals and interval ends 3, SDs 4 (as the
#: hierarchies' release.csv, :mod:`dpcore.areas.export`; census Privelet's release.csv writes full digits).
ESTIMATE_DECIMALS = {"noisy_count": 3, "noisy_total": 3, "ci95_low": 3, "ci95_high": 3,
                     "standard_error": 4, "noise_sd": 4}


def estimate_decimals(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with its estimate columns rounded to :data:`ESTIMATE_DECIMALS` (the others as they are),
    for a CSV written with full digits: a fixed number of significant digits (``%.6g``, written by
    marginals.csv and area_queries.csv before 2026-11-30) dropped whole people from large counts
    (39,512,223 became 3.95122e+07).

    >>> df = pd.DataFrame({"noisy_count": [39512223.12345], "standard_error": [1.234567]})
    >>> print(estimate_decimals(df).to_csv(index=False).strip())
    noisy_count,standard_error
    39512223.123,1.2346
    """
    return df.round({c: d for c, d in ESTIMATE_DECIMALS.items() if c in df.columns})


def is_formula(value: object) -> bool:
    """Whether ``value`` is text a spreadsheet could run as a formula: it starts with one of
    :data:`FORMULA_PREFIXES`, or with whitespace followed by ``= + - @`` (or their full-width
    forms).

    >>> is_formula("=1+2"), is_formula("-3"), is_formula(-3), is_formula("E07000223")
    (True, True, False, False)
    >>> is_formula("\\uff1dSUM(1)"), is_formula("  =1"), is_formula(" Leeds")
    (True, True, False)
    """
    return isinstance(value, str) and _FORMULA.match(value) is not None


def escape_cell(value: str) -> str:
    """``value`` with a single quote before its start and before the text after each line break
    that could run as a formula (:func:`is_formula`), else unchanged (OWASP, "CSV Injection").

    >>> escape_cell("=HYPERLINK(\\"http://x\\")"), escape_cell("Leeds")
    ('\\'=HYPERLINK("http://x")', 'Leeds')
    >>> escape_cell("a\\r=cmd|' /C calc'!A0"), escape_cell("a\\nb")
    ("a\\r'=cmd|' /C calc'!A0", 'a\\nb')
    """
    return _LINE_START.sub(r"\1'", value)


def _text_dtype(dtype: object) -> bool:
    return bool(pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype)
                or isinstance(dtype, pd.CategoricalDtype))


def _arrow_bytes(table: Any, write: Callable[[Any], bytes], numbers_as_text: bool) -> bytes:
    """:func:`csv_bytes` of a pyarrow Table: ``write(table)`` when no text cell or name could run as
    a formula (checked by pyarrow's kernels, no copy); else the one pandas rule on a copy, written
    back as a Table."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def risky(col: Any) -> bool:
        if pa.types.is_dictionary(col.type) or pa.types.is_string_view(col.type):
            col = col.cast(pa.string())
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            return False
        if _plain_bytes(col):
            return False
        return bool(pc.any(pc.match_substring_regex(col, _PATTERN)).as_py())

    if not any(_MASK.search(c) for c in table.column_names) and not any(risky(c) for c in table.columns):
        return write(table)
    return csv_bytes(table.to_pandas(), lambda d: write(pa.Table.from_pandas(d, preserve_index=False)),
                     numbers_as_text=numbers_as_text)


def _arrow_text(col: pd.Series) -> Any:
    """The pyarrow array behind a column of pandas' Arrow-backed text (pandas 3's default ``str``),
    without a copy; None for any other column (object text, categories, numbers).

    >>> _arrow_text(pd.Series(["a", None], dtype="string[pyarrow]")).to_pylist(), _arrow_text(pd.Series([1]))
    (['a', None], None)
    """
    import pyarrow as pa

    if not (isinstance(col.dtype, pd.StringDtype) and col.dtype.storage == "pyarrow"):
        return None
    arr = pa.array(col.array)
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def _plain_bytes(arr: Any) -> bool:
    """Whether the characters of a pyarrow ``string``/``large_string`` array (or of every chunk of a
    chunked one) hold no byte of :data:`_NEEDED` (then no cell is a formula): one table look-up per
    byte, a fraction of the regular expression's time per cell (codes such as ``R1/D2/Z07>R1/D2/Z08``
    and fixed words pass it).  Only the bytes between the array's first and last offsets are read
    (a slice shares its parent's buffer); any other type (``string_view`` keeps short strings in
    its views) answers False, i.e. the full check.

    >>> import pyarrow as pa
    >>> _plain_bytes(pa.array(["R1/D1", "x"])), _plain_bytes(pa.array(["a", "=1"])[:1])
    (True, True)
    >>> _plain_bytes(pa.array(["=1"])), _plain_bytes(pa.array(["=short"], pa.string_view()))
    (False, False)
    """
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        return all(_plain_bytes(chunk) for chunk in arr.chunks)
    large = pa.types.is_large_string(arr.type)
    if not (large or pa.types.is_string(arr.type)):
        return False
    _, offsets, data = arr.buffers()
    if data is None or len(arr) == 0:
        return True
    off = np.frombuffer(offsets, dtype=np.int64 if large else np.int32)
    chars = np.frombuffer(data, dtype=np.uint8)[int(off[arr.offset]):int(off[arr.offset + len(arr)])]
    return not _NEEDED[chars].any()


def _text_mask(arr: Any) -> np.ndarray:
    """:func:`_formula_mask` of a pyarrow text array (missing values are not formulas)."""
    import pyarrow.compute as pc

    if _plain_bytes(arr):
        return np.zeros(len(arr), dtype=bool)
    hit = pc.match_substring_regex(arr, _PATTERN)
    return np.asarray(hit.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)


def _formula_mask(vals: np.ndarray) -> np.ndarray:
    """Rows of a text column whose cell is a formula at its start or after a line break (vectorised through pyarrow when the column
    holds only text, which a 10^6-row export checks in milliseconds)."""
    import pyarrow as pa

    try:
        arr = pa.array(vals, type=pa.string(), from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # numbers mixed in: only the text is checked
        return np.fromiter((isinstance(v, str) and _MASK.search(v) is not None for v in vals),
                           dtype=bool, count=len(vals))
    return _text_mask(arr)


#: Distinct floats formatted at a time by :func:`pandas_csv` (numpy's fixed-width text of 8 M values
#: would take 1 GB).
_FORMAT_STEP = 1_000_000

#: A plain number written as text (``-3``, ``2.5e-4``): a spreadsheet reads it as that number, never
#: as a formula, so text read back from a published CSV may keep it as it is.
_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")


def csv_bytes(df: Any, write: Callable[[Any], bytes], *, numbers_as_text: bool = False) -> bytes:
    """Write ``df`` as CSV with ``write`` (the exporter's own pandas or pyarrow call), with every
    text cell and header name that could run as a formula escaped (:func:`escape_cell`).

    When no cell needs it, the result is ``write(df)`` unchanged.  Otherwise ``write`` writes a
    copy of the frame in which each such cell (and header name) is replaced by its escaped text;
    the writer quotes fields as it always does, and numbers are never escaped.

    Parameters
    ----------
    df : pandas.DataFrame or pyarrow.Table
        The table to export (no index is written; ``write`` decides the format).  A Table is
        handed to ``write`` as a Table (writers that build their columns as arrays skip pandas).
    write : callable
        ``DataFrame -> bytes`` (UTF-8 CSV with a header row), e.g.
        ``lambda d: d.to_csv(index=False).encode("utf-8")``.
    numbers_as_text : bool
        The frame holds a published CSV read back as text (to be written back verbatim): a text
        cell that is a plain number literal (``-3``) is a number and is left as it is.

    Examples
    --------
    >>> df = pd.DataFrame({"code": ["E1", "=1+2", "=A1,B1"], "noisy_count": [4, -3, 1]})
    >>> print(csv_bytes(df, lambda d: d.to_csv(index=False).encode()).decode(), end="")
    code,noisy_count
    E1,4
    '=1+2,-3
    "'=A1,B1",1
    """
    if not isinstance(df, pd.DataFrame):  # a pyarrow Table, written by ``write`` as it is
        return _arrow_bytes(df, write, numbers_as_text)
    cols = list(df.columns)
    head = [isinstance(c, str) and _MASK.search(c) is not None for c in cols]
    escaped: dict[int, np.ndarray] = {}
    text = [j for j, dt in enumerate(df.dtypes) if _text_dtype(dt)]  # numbers are never escaped: not read
    for j in text:
        s = df.iloc[:, j]
        arr = _arrow_text(s)  # Arrow-backed text is checked where it is, with no Python string per cell
        vals = s.to_numpy(dtype=object) if arr is None else None
        m = _formula_mask(vals) if arr is None else _text_mask(arr)
        if m.any() and vals is None:
            vals = s.to_numpy(dtype=object)
        if numbers_as_text and m.any():
            m[m] = [not (isinstance(v, str) and _NUMBER.match(v)) for v in vals[m]]
        if m.any():
            vals = vals.copy()
            vals[m] = [escape_cell(v) for v in vals[m]]
            escaped[j] = vals
    if not escaped and not any(head):
        return write(df)
    esc = df.copy()
    esc.columns = [escape_cell(c) if h else c for c, h in zip(cols, head, strict=True)]
    for j, vals in escaped.items():
        esc.isetitem(j, pd.Series(vals, index=esc.index, dtype=object))
    return write(esc)


def _plain_column(col: pd.Series) -> Any:
    """A column as pyarrow writes it with pandas' text: a float64 column as numpy's ``str`` of each
    value (what pandas writes; formatted once per distinct value), ints and text as they are; None
    for a type whose text could differ (booleans, dates, categories, nullable numbers)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = col.dtype.kind
    if col.dtype == np.float64:
        v = col.to_numpy()
        nan = np.isnan(v)
        w = np.where(nan, 0.0, v)
        # distinct bit patterns (so that -0.0 keeps its sign as pandas writes it, "-0.0"), found by
        # hashing: no sort, and each distinct value formatted once
        inv, uniq = pd.factorize(w.view(np.int64))
        uniq = uniq.view(np.float64)
        # formatted a million at a time: numpy's text of 8 M values is a 1 GB fixed-width array
        text = pa.chunked_array([pa.array(uniq[i:i + _FORMAT_STEP].astype(str), type=pa.string())
                                 for i in range(0, len(uniq), _FORMAT_STEP)] or [pa.array([], pa.string())]
                                ).combine_chunks().take(pa.array(inv))
        del inv, uniq
        if nan.any():
            text = pc.if_else(pa.array(nan), "", text)  # pandas' empty na_rep
        return text
    if isinstance(col.dtype, np.dtype) and kind in "iu":
        return pa.array(col.to_numpy())
    if _text_dtype(col.dtype) and not isinstance(col.dtype, pd.CategoricalDtype):
        arr = _arrow_text(col)
        return pa.array(col.to_numpy(dtype=object), type=pa.string(), from_pandas=True) if arr is None else arr
    return None


def pandas_csv(df: pd.DataFrame) -> bytes:
    """``df.to_csv(index=False, lineterminator="\\n").encode("utf-8")``, byte for byte, written faster.

    pandas formats every float with numpy's ``str`` (about 1 µs a value) and writes the rows through
    Python; here each distinct float is formatted once (the same numpy call) and pyarrow writes
    the rows, unquoted.  Wherever pandas would quote a field (a comma, a double quote or a line
    break in it) pyarrow refuses, and so does a column whose text pyarrow would write differently:
    then pandas writes the frame itself.  Give it the frame :func:`csv_bytes` hands to its writer.

    >>> df = pd.DataFrame({"code": ["a", "b"], "n": [3, -1], "sd": [0.1, 1e-05]})
    >>> pandas_csv(df) == df.to_csv(index=False, lineterminator="\\n").encode("utf-8")
    True
    >>> pandas_csv(df.assign(code=["a,b", "c"])).decode().splitlines()[1]
    '"a,b",3,0.1'
    """
    import io

    import pyarrow as pa
    import pyarrow.csv as pacsv

    def by_pandas() -> bytes:
        return df.to_csv(index=False, lineterminator="\n").encode("utf-8")

    names = list(df.columns)
    if len(names) < 2 or len(set(names)) != len(names) or not all(
            isinstance(c, str) and not any(ch in c for ch in ',"\r\n') for c in names):
        return by_pandas()  # one column (pandas quotes an empty row), or a header pandas would quote
    buf = io.BytesIO()
    buf.write((",".join(names) + "\n").encode("utf-8"))
    try:
        cols = [_plain_column(df.iloc[:, j]) for j in range(len(names))]
        if any(c is None for c in cols):
            return by_pandas()
        pacsv.write_csv(pa.table(cols, names=names), buf,
                        pacsv.WriteOptions(include_header=False, quoting_style="none"))
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # a field pandas would quote, or not all text
        return by_pandas()
    return buf.getvalue()


# a field of a file without quotes that starts like a formula: at a line start or after a comma
# the start of a field that begins like a formula but is not a plain number (the field runs to the
# next comma or line end): one search over the whole text, in C
_UNSAFE_FIELD = re.compile(f"(?:^|,)(?={_START})(?!{_NUMBER.pattern[1:-1]}(?:,|$))", re.MULTILINE)


def append_constant_column(data: bytes, name: str, cell: str, *, vouched: bool) -> bytes | None:
    """A published CSV with one more column ``name`` holding ``cell`` on every row, by appending
    text to each line, or None when the shortcut cannot be sure of giving the bytes that reading
    the file back as text and writing it again with pandas (through :func:`csv_bytes` with
    ``numbers_as_text``) gives.

    It is sure for a UTF-8 file with a header of two or more unique, non-empty names (pandas takes a
    line of spaces in a one-column file for a blank line), a line feed after every line, no
    double quote or carriage return (so no field is quoted and none spans lines), no empty line,
    the header's number of fields on every line, and no header name or field that
    :func:`csv_bytes` would escape (a field may start with a sign only as a plain number).
    ``name`` and ``cell`` must need neither quoting nor escaping (else None).  The fields are
    checked by one search over the text (a second or less for 600,000 rows of an O/D release),
    against several seconds through pandas.

    ``vouched`` (required, no default: every caller says which contract it takes): ``False`` for
    bytes of unknown origin (any kind's ``release.csv``, a stored file), which are checked as above.
    ``True`` only for bytes the caller has just written itself and whose writer guarantees all of
    this (one unquoted row per line under a header of unique names, fields escaped by
    :func:`csv_bytes`, numbers plain, no ``-inf``: pyarrow's unquoted write of the O/D release):
    the text is then not scanned (the second of that search on an O/D release is saved), so a wrong vouch would
    publish its fields as they are, formulas included; ``name`` and ``cell`` are still checked.

    >>> append_constant_column(b"a,b\\n1,-2\\nx,y\\n", "c", "no", vouched=False)
    b'a,b,c\\n1,-2,no\\nx,y,no\\n'
    >>> append_constant_column(b'a,b\\n"1,5",2\\n', "c", "no", vouched=False) is None   # a quoted field
    True
    >>> append_constant_column(b"a,b\\n=1+2,2\\n", "c", "no", vouched=False) is None   # a formula: escaped
    True
    """
    for extra in (name, cell):
        if not extra or any(ch in extra for ch in ',"\r\n') or _MASK.search(extra):
            return None
    suffix = ("," + cell + "\n").encode("utf-8")
    if vouched:
        head_bytes, _, body_bytes = data.partition(b"\n")
        return head_bytes + ("," + name + "\n").encode("utf-8") + body_bytes.replace(b"\n", suffix)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if (not text.endswith("\n") or '"' in text or "\r" in text or text.startswith(("\n", "\ufeff"))
            or "\n\n" in text):
        return None
    head, _, body = text.partition("\n")
    names = head.split(",")
    if len(names) < 2 or "" in names or len(set(names)) != len(names) or name in names or any(_MASK.search(c) for c in names):
        return None
    raw = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(raw == ord("\n"))
    commas = np.flatnonzero(raw == ord(","))
    per_line = np.diff(np.searchsorted(commas, ends), prepend=0)
    if np.any(per_line != len(names) - 1):
        return None
    if _UNSAFE_FIELD.search(body):
        return None
    return (head + "," + name + "\n").encode("utf-8") + body.encode("utf-8").replace(b"\n", suffix)
