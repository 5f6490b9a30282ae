"""CSV exports that a spreadsheet cannot run: formula-injection escaping (issue 18, item 4).

A spreadsheet opening a CSV file treats a cell that begins with ``=``, ``+``, ``-`` or ``@`` as
a formula (and some also after a leading tab or carriage return), so an area code, an area name
or a query label typed by whoever made the curator's files could run ``=HYPERLINK(...)`` or a
DDE command on the machine of anyone who opens an export.  Every CSV writer of the library goes
through :func:`csv_bytes`, which escapes such *text* cells (and header names) the way the OWASP
"CSV Injection" guidance and the spreadsheet tools expect: the cell gets a leading single quote
(``'=1+2``), which makes the spreadsheet show it as text, and the field is enclosed in double
quotes with inner quotes doubled.  Numbers are never touched: a negative count in a numeric
column stays ``-3``.  A file with no such text cell is written byte for byte as before.

References: OWASP Foundation, "CSV Injection" (owasp.org/www-community/attacks/CSV_Injection);
RFC 4180 (Shafranovich 2005), section 2, for the quoting.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

__all__ = ["FORMULA_PREFIXES", "csv_bytes", "escape_cell", "is_formula"]

#: First characters that make a spreadsheet read a cell as a formula (OWASP).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def is_formula(value: object) -> bool:
    """Whether ``value`` is text a spreadsheet could run as a formula.

    >>> is_formula("=1+2"), is_formula("-3"), is_formula(-3), is_formula("E07000223")
    (True, True, False, False)
    """
    return isinstance(value, str) and value[:1] in FORMULA_PREFIXES


def escape_cell(value: str) -> str:
    """``value`` with a leading single quote when it could run as a formula, else unchanged
    (OWASP, "CSV Injection").

    >>> escape_cell("=HYPERLINK(\\"http://x\\")"), escape_cell("Leeds")
    ('\\'=HYPERLINK("http://x")', 'Leeds')
    """
    return "'" + value if is_formula(value) else value


def _text_column(s: pd.Series) -> bool:
    return bool(pd.api.types.is_object_dtype(s.dtype) or pd.api.types.is_string_dtype(s.dtype)
                or isinstance(s.dtype, pd.CategoricalDtype))


def _formula_mask(s: pd.Series) -> np.ndarray:
    """Rows of a text column whose cell is a formula (vectorised through pyarrow when the column
    holds only text, which a 10^6-row export checks in milliseconds)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    vals = s.to_numpy(dtype=object)
    try:
        arr = pa.array(vals, type=pa.string(), from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # numbers mixed in: only the text is checked
        return np.fromiter((is_formula(v) for v in vals), dtype=bool, count=len(vals))
    hit = pc.match_substring_regex(arr, "^[=+\\-@\t\r]")
    return np.asarray(hit.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)


def csv_bytes(df: pd.DataFrame, write: Callable[[pd.DataFrame], bytes]) -> bytes:
    """Write ``df`` as CSV with ``write`` (the exporter's own pandas or pyarrow call), with every
    text cell and header name that could run as a formula escaped (:func:`escape_cell`) and
    quoted.

    When no cell needs it, the result is ``write(df)`` unchanged.  Otherwise ``write`` writes the
    frame with each such cell (and header name) replaced by a placeholder, so every other field
    keeps the exporter's format and quoting, and each placeholder is then replaced by its escaped
    field enclosed in double quotes (RFC 4180); numbers are never quoted or escaped.

    Parameters
    ----------
    df : pandas.DataFrame
        The table to export (no index is written; ``write`` decides the format).
    write : callable
        ``DataFrame -> bytes`` (UTF-8 CSV with a header row), e.g.
        ``lambda d: d.to_csv(index=False).encode("utf-8")``.

    Examples
    --------
    >>> df = pd.DataFrame({"code": ["E1", "=1+2"], "noisy_count": [4, -3]})
    >>> print(csv_bytes(df, lambda d: d.to_csv(index=False).encode()).decode(), end="")
    code,noisy_count
    E1,4
    "'=1+2",-3
    """
    cols = [str(c) for c in df.columns]
    head = [is_formula(c) for c in cols]
    masks = {j: m for j, c in enumerate(df.columns)
             if _text_column(df.iloc[:, j]) and (m := _formula_mask(df.iloc[:, j])).any()}
    if not masks and not any(head):
        return write(df)
    # each escaped cell is written as a unique placeholder (plain letters and digits, which no
    # writer quotes or changes), then replaced by its escaped, quoted field
    texts = [*cols, *(v for j, m in masks.items() for v in df.iloc[:, j].to_numpy(dtype=object)[m])]
    tag = "DPCSVESCAPED"
    while any(tag in t for t in texts):
        tag += "X"
    fields: list[str] = []

    def token(v: str) -> str:
        fields.append(_quoted(escape_cell(v)))
        return f"{tag}{len(fields) - 1}_"

    esc = df.copy()
    esc.columns = [token(c) if h else c for c, h in zip(cols, head, strict=True)]
    for j, m in masks.items():
        col = esc.iloc[:, j].to_numpy(dtype=object).copy()
        col[m] = [token(v) for v in col[m]]
        esc.isetitem(j, pd.Series(col, index=esc.index, dtype=object))
    raw = write(esc).decode("utf-8")
    # a writer that quotes every string (pyarrow's "needed") writes "token": replaced whole
    pat = re.compile(f'"{tag}(\\d+)_"|{tag}(\\d+)_')
    return pat.sub(lambda k: fields[int(k[1] or k[2])], raw).encode("utf-8")


def _quoted(v: str) -> str:
    return '"' + v.replace('"', '""') + '"'
