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

__all__ = ["FORMULA_PREFIXES", "csv_bytes", "escape_cell", "frame_csv", "is_formula"]

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
        if pa.types.is_dictionary(col.type):
            col = col.cast(pa.string())
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            return False
        return bool(pc.any(pc.match_substring_regex(col, _PATTERN)).as_py())

    if not any(_MASK.search(c) for c in table.column_names) and not any(risky(c) for c in table.columns):
        return write(table)
    return csv_bytes(table.to_pandas(), lambda d: write(pa.Table.from_pandas(d, preserve_index=False)),
                     numbers_as_text=numbers_as_text)


def _formula_mask(vals: np.ndarray) -> np.ndarray:
    """Rows of a text column whose cell is a formula at its start or after a line break (vectorised through pyarrow when the column
    holds only text, which a 10^6-row export checks in milliseconds)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        arr = pa.array(vals, type=pa.string(), from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # numbers mixed in: only the text is checked
        return np.fromiter((isinstance(v, str) and _MASK.search(v) is not None for v in vals),
                           dtype=bool, count=len(vals))
    hit = pc.match_substring_regex(arr, _PATTERN)
    return np.asarray(hit.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)


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
        vals = s.to_numpy(dtype=object)
        m = _formula_mask(vals)
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


#: Rows :func:`frame_csv` formats at a time (bounds the text copies of a large frame).
_CHUNK = 500_000
# a text cell Python's csv module would quote (QUOTE_MINIMAL with delimiter "," and "\n")
_NEEDS_QUOTE = '[,"\r\n]'


def frame_csv(df: pd.DataFrame) -> bytes:
    r"""``df.to_csv(index=False, lineterminator="\n").encode("utf-8")``, byte for byte, formatted by
    column instead of by row (pandas' writer runs Python's csv module cell by cell: about 2 s a
    million rows of seven columns).  Numbers are written as pandas writes them (``astype(str)``:
    integers as ``str``, floats as their shortest repr, NaN as an empty cell); a frame whose text
    or header could need quoting, or of another type, is handed to pandas.

    >>> df = pd.DataFrame({"code": ["01", None], "n": [3, -1], "x": [0.5, float("nan")]})
    >>> frame_csv(df) == df.to_csv(index=False, lineterminator="\n").encode("utf-8")
    True
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    def pandas_csv() -> bytes:
        return df.to_csv(index=False, lineterminator="\n").encode("utf-8")

    names = [str(c) for c in df.columns]
    kinds = [dt.kind if isinstance(dt, np.dtype) else "T" if _text_dtype(dt) else "?" for dt in df.dtypes]
    if len(names) < 2 or any(k not in "iufOT" for k in kinds) or any(re.search(_NEEDS_QUOTE, c) for c in names) \
            or df.columns.duplicated().any():
        return pandas_csv()
    parts = [(",".join(names) + "\n").encode("utf-8")]
    for lo in range(0, len(df), _CHUNK):
        cols = []
        for j, k in enumerate(kinds):
            v = df.iloc[lo:lo + _CHUNK, j]
            if k in "iu":
                cols.append(pa.array(v.to_numpy().astype(str), type=pa.string()))
                continue
            a = v.to_numpy() if k == "f" else v.to_numpy(dtype=object)
            miss = pd.isna(a)
            try:  # text columns must hold text only (pandas would str() anything else)
                col = pa.array(np.where(miss, "", _float_text(a) if k == "f" else a), type=pa.string())
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                return pandas_csv()
            if k != "f" and pc.any(pc.match_substring_regex(col, _NEEDS_QUOTE)).as_py():
                return pandas_csv()
            cols.append(col)
        line = pc.binary_join_element_wise(pc.binary_join_element_wise(*cols, ","), "", "\n")
        parts.append(b"".join(memoryview(b) for b in _string_data(line)))
    return b"".join(parts)


def _string_data(arr: object) -> list[object]:
    """The UTF-8 bytes of a pyarrow string array without nulls, in order (its data buffer)."""
    chunks = arr.chunks if hasattr(arr, "chunks") else [arr]
    out = []
    for c in chunks:
        if not len(c):
            continue
        offsets = np.frombuffer(c.buffers()[1], dtype=np.int32)[c.offset:c.offset + len(c) + 1]
        out.append(c.buffers()[2][int(offsets[0]):int(offsets[-1])])
    return out


def _float_text(a: np.ndarray) -> np.ndarray:
    """``a.astype(str)`` (pandas' float cells): for float64 Python's ``repr``, which is the same
    shortest round-trip text about ten times faster than numpy's."""
    if a.dtype != np.float64:
        return a.astype(str)
    return np.array(list(map(float.__repr__, a.tolist())), dtype=object)
