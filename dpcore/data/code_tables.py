"""Tables of area codes: census counts, public area lists, hierarchies and O/D trips.

Codes are text: ``01`` and ``1`` are different areas, and the leading zeros of FIPS codes must
survive.  :func:`read_code_table` reads a CSV (optionally gzipped) or Parquet table with every
CSV column as text, through the text checks of :mod:`dpcore.data.text`; :func:`read_code_upload` is the
same reader for an uploaded file, stricter about what is not UTF-8 text and able to read a one-column
code list; :func:`code_text` turns
a column into stripped code text (whole floats from Parquet or Excel become integer text).
The structures built on these tables (:class:`dpcore.data.hierarchy.Hierarchy`, the census
table of :mod:`dpcore.areas.census`, the O/D counts of :mod:`dpcore.flows.mechanisms`) live with their
kind; reading the table is the data layer's work.
"""

from __future__ import annotations

import gzip
import io
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpcore.data.limits import check_bytes
from dpcore.data.tables import read_table
from dpcore.data.text import (
    DELIMITERS,
    SNIFF_BYTES,
    UTF16_BOMS,
    WHITESPACE,
    check_text_head,
    decode_text,
    gunzip_limited,
    looks_binary,
    parser_problem,
    sniff_delimiter,
)
from dpcore.errors import InputError

__all__ = ["PANDAS_NA_WORDS", "code_text", "read_code_table", "read_code_upload", "text_numbers"]


def code_text(values: Any) -> pd.Series:
    """Codes as stripped text (pandas ``string``; missing stays missing).

    Parquet/Excel may store codes as floats (``1.0``): whole floats become integer text (``1``).
    """
    s = pd.Series(values).reset_index(drop=True)
    if pd.api.types.is_float_dtype(s):
        # vectorised (a per-value map took 1.7 s on 2 M codes); |v| < 2⁶³ for the int64 cast
        out = s.astype("string")
        whole = (s.notna() & (s % 1 == 0) & (s.abs() < 2.0**63)).to_numpy()
        out[whole] = s[whole].astype("int64").astype("string")
        return out.str.strip(WHITESPACE)
    return s.astype("string").str.strip(WHITESPACE)


def text_numbers(values: Any) -> np.ndarray:
    """``pd.to_numeric(values, errors="coerce")`` as float64 (NaN where a value is missing or not a
    number), the same numbers, parsed by pyarrow where every value is a number literal it reads
    (about twenty times faster on a column of text; pandas otherwise).

    >>> text_numbers(pd.Series(["1", "2.5", None, "-3e2"], dtype="str")).tolist()
    [1.0, 2.5, nan, -300.0]
    >>> text_numbers(pd.Series([" 4", "x"], dtype="str")).tolist()  # pyarrow refuses: pandas reads them
    [4.0, nan]
    """
    s = values if isinstance(values, pd.Series) else pd.Series(values)
    if isinstance(s.dtype, pd.StringDtype) and s.dtype.storage == "pyarrow":
        import pyarrow as pa
        import pyarrow.compute as pc

        try:  # correctly rounded, as pandas' parser: the same float for every literal both read
            return np.asarray(pc.cast(pa.array(s.array), pa.float64()).to_numpy(zero_copy_only=False),
                              dtype=np.float64)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # a word, spaces, '0x10': pandas decides
            pass
    return pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)


_ENGINE_FIX = "Sum a large table with an engine instead (--engine duckdb; the app does above 200 MB)."


def read_code_table(data: bytes | str | Path, filename: str | None = None,
                    columns: Callable[[list[str]], Iterable[str] | None] | None = None) -> pd.DataFrame:
    """Read a CSV (optionally gzipped) or Parquet code table, **codes kept as text**.

    One reader for census counts, public area lists, hierarchies and O/D trips.

    CSV columns are all read as strings so that leading zeros of FIPS codes survive
    (``01``, ``001``); a UTF-8 byte-order mark is dropped; the delimiter is one of
    ``, ; tab |``.  Count columns are converted later (e.g. by
    :class:`dpcore.areas.census.CensusTable`).  Gzip bombs, a
    first line longer than 64 KiB and a header row without data rows are refused (InputError).
    Parquet files are read with :func:`dpcore.data.tables.read_table` (their types are kept; integer
    code columns become text without padding).

    ``columns`` (CSV only) chooses, from the header's names, the columns to read (None: all): a
    caller that needs 3 of a file's 43 columns reads those alone, which is most of the time spent
    on a wide file.  The chosen columns hold what a full read holds.
    """
    if isinstance(data, str | Path):
        path = Path(data)
        if not path.exists():
            raise InputError(f"Input file '{path}' does not exist. Check the path.")
        filename = filename or path.name
        check_bytes(path.stat().st_size, "DPCORE_MAX_TABLE_BYTES", f"'{filename}'", _ENGINE_FIX)
        raw = path.read_bytes()
    else:
        check_bytes(len(data), "DPCORE_MAX_TABLE_BYTES", f"'{filename}'" if filename else "The file", _ENGINE_FIX)
        raw = bytes(data)
    label = filename or "the file"
    if not raw.strip():
        raise InputError(f"{label} is empty. Upload a CSV or Parquet file with a header row and data.")
    if raw[:4] == b"PAR1":
        return read_table(raw, filename or "table.parquet")
    if raw[:2] == b"\x1f\x8b":
        raw = gunzip_limited(raw, label)  # refuses a gzip bomb before expanding it in full
    if raw[:2] == b"PK":
        raise InputError(f"{label} looks like a ZIP or spreadsheet file. Save it as CSV (or Parquet) first.")
    if raw.startswith(UTF16_BOMS):
        raw = decode_text(raw, label).encode("utf-8")  # the header checks below count bytes
    if looks_binary(raw[:SNIFF_BYTES]):
        raise InputError(f"{label} is not a text file. Upload a CSV (optionally .gz) or Parquet file.")
    check_text_head(raw[:SNIFF_BYTES], label, whole=len(raw) <= SNIFF_BYTES)
    # ASCII reads the same as UTF-8 and Latin-1 (decode_text's choices): no need to decode it all
    text = None if raw.isascii() else decode_text(raw, label)
    if text is None:
        end = raw.find(b"\n")
        header, head = raw[: end if end >= 0 else len(raw)].decode("ascii"), raw[:SNIFF_BYTES].decode("ascii")
    else:
        end = text.find("\n")
        header, head = text[: end if end >= 0 else len(text)], text[:SNIFF_BYTES]
    if (len(raw) if text is None else len(text)) > SNIFF_BYTES and "\n" in head:
        head = head[: head.rindex("\n")]  # the last line may be cut
    # the delimiter that splits the header and the rows alike (as for every table), else the one
    # the header uses most
    sep = sniff_delimiter(head, None) or max(DELIMITERS, key=header.count)
    if header.count(sep) == 0:
        raise InputError(
            f"{label} has a single column ({header.strip()[:60]!r}). A census table needs code "
            "columns per level and a count column: export it again as CSV with a comma (or semicolon, tab) between "
            "the columns."
        )
    try:
        names: list[str] | None = None
        if columns is not None or text is None:
            try:
                names = [str(c) for c in pd.read_csv(io.StringIO(head), sep=sep, dtype=str, nrows=0).columns]
            except (pd.errors.ParserError, ValueError):
                if columns is not None:
                    raise
        stripped = [c.strip() for c in names or []]
        # repeated names (pandas renames them 'a.1') are read in full, as before
        plain = names is not None and len(set(stripped)) == len(stripped) and not any(
            re.fullmatch(r".+\.\d+", c) for c in stripped)
        usecols = None
        if columns is not None:
            chosen = columns(stripped)
            if chosen is not None and plain:
                wanted = set(chosen)
                usecols = [c for c in names or [] if c.strip() in wanted]
        df = _arrow_read(raw, sep, usecols or names or []) if text is None and plain else None
        if df is None:
            df = pd.read_csv(io.BytesIO(raw) if text is None else io.StringIO(text), sep=sep, dtype=str,
                             keep_default_na=True, usecols=usecols)
    except (pd.errors.ParserError, ValueError) as e:
        raise InputError(f"{label} could not be read as CSV ({parser_problem(e)}). "
                         "Check that every row has as many fields as the header.") from None
    df.columns = [str(c).strip() for c in df.columns]
    if df.empty:
        raise InputError(f"{label} has a header but no data rows. Add the rows below the header and upload "
                         "it again.")
    return df


#: The words pandas reads as missing by default (``keep_default_na``; the pandas documentation of
#: ``read_csv``'s ``na_values``), given to pyarrow so that both read a code table alike.
PANDAS_NA_WORDS = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
                   "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null")

#: Inputs above this many bytes are parsed by pyarrow on every core (below, one thread costs less
#: time in all: a 22 MB LODES file takes 0.18 s of CPU on one, 0.31 s on two).
_THREADS_ABOVE = 32 << 20


def _arrow_read(raw: bytes, sep: str, columns: list[str]) -> pd.DataFrame | None:
    """``columns`` of an ASCII CSV read by pyarrow as pandas reads them with ``dtype=str`` (the same
    missing-value words, text columns; about three times faster), or None where the two could
    differ: a carriage return that is not part of a line break (pandas and pyarrow split such
    lines differently) or a file pyarrow refuses (a row whose number of fields is not the
    header's, a line break inside quotes, a column name it cannot find), which pandas then reads
    or refuses with its own message."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    if b"\r" in raw and raw.count(b"\r") != raw.count(b"\r\n"):
        return None
    try:
        table = pacsv.read_csv(
            pa.py_buffer(raw),
            read_options=pacsv.ReadOptions(use_threads=len(raw) > _THREADS_ABOVE),
            parse_options=pacsv.ParseOptions(delimiter=sep),
            convert_options=pacsv.ConvertOptions(
                include_columns=columns, column_types={c: pa.large_string() for c in columns},
                null_values=list(PANDAS_NA_WORDS), strings_can_be_null=True, quoted_strings_can_be_null=True))
    except (pa.ArrowException, KeyError):
        return None
    if table.column_names != columns:
        return None
    return table.to_pandas()  # large_string: pandas' own text storage, no copy


def _upload_head(data: bytes, n: int = SNIFF_BYTES) -> bytes:
    """The first ``n`` bytes of an upload, unzipped (``b""`` if the gzip is damaged: the reader says so)."""
    if data[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
                return f.read(n)
        except (OSError, EOFError):
            return b""
    return data[:n]


def _code_list(data: bytes, label: str) -> pd.DataFrame:
    """A one-column CSV (a list of codes) read as text; its header is the column name."""
    raw = gunzip_limited(data, label) if data[:2] == b"\x1f\x8b" else data
    text = decode_text(raw, label)  # UTF-16 was refused by read_code_upload
    try:
        df = pd.read_csv(io.StringIO(text), dtype=str, sep=",")
    except pd.errors.ParserError as e:
        raise InputError(f"{label} could not be read as a list of area codes ({parser_problem(e)}). Give one "
                         "code per row, or one column per level separated by commas.") from None
    df.columns = [str(c).strip() for c in df.columns]
    return df


def read_code_upload(data: bytes, filename: str, *, one_column: bool = False,
                     single_column_fix: str | None = None) -> pd.DataFrame:
    """Read an uploaded CSV (optionally gzipped) or Parquet code table, codes kept as text.

    :func:`read_code_table` with the stricter checks an upload gets, so that a wrong file is named
    before it is parsed:

    * UTF-16 text (a UTF-16 byte-order mark, also inside a gzip) is refused with the fix "save it
      as UTF-8" (:func:`read_code_table` itself decodes it);
    * content (unzipped) whose first 64 KiB hold more than 1 % (at least 3) control characters other
      than tab and line breaks is refused as not a text file (Parquet is exempt);
    * a table without rows is refused, also a Parquet one.

    Parameters
    ----------
    data : bytes
        The uploaded file's bytes.
    filename : str
        Its name, used in the messages.
    one_column : bool
        Read a file with a single column as a list of codes (for instance an area list whose
        levels are prefixes of one code column) instead of refusing it.
    single_column_fix : str, optional
        When ``one_column`` is false, the text after "<filename> has a single column." in the
        error for a one-column file (what the table needs); by default the error of
        :func:`read_code_table`.

    Returns
    -------
    pandas.DataFrame
        Every CSV column as text (``str``), column names stripped.

    Raises
    ------
    InputError
        A file that is not a readable table, as described above and in :func:`read_code_table`.

    Examples
    --------
    >>> read_code_upload(b"origin,destination\\n01,002\\n", "trips.csv")["destination"].tolist()
    ['002']
    >>> read_code_upload(b"block\\n440010101001\\n", "areas.csv", one_column=True).columns.tolist()
    ['block']
    >>> read_code_upload("a,b\\n1,2\\n".encode("utf-16"), "t.csv")
    Traceback (most recent call last):
    ...
    dpcore.errors.InputError: t.csv is a UTF-16 text file. Save it as UTF-8 (in a spreadsheet program: \
'CSV UTF-8') and upload it again.
    """
    head = _upload_head(data)
    if head.startswith(UTF16_BOMS):
        raise InputError(f"{filename} is a UTF-16 text file. Save it as UTF-8 (in a spreadsheet program: "
                         "'CSV UTF-8') and upload it again.")
    if head and head[:4] != b"PAR1":
        ctrl = sum(1 for b in head if b < 32 and b not in (9, 10, 13))
        if ctrl > max(2, len(head) // 100):
            raise InputError(f"{filename} is not a text (CSV) file. Upload a CSV (optionally .gz) or Parquet file.")
    try:
        df = read_code_table(data, filename)
    except InputError as e:
        if "single column" not in str(e):
            raise
        if one_column:
            return _code_list(data, filename)
        if single_column_fix is None:
            raise
        raise InputError(f"{filename} has a single column. {single_column_fix}") from None
    if df.empty:
        raise InputError(f"{filename} has a header but no rows. Upload the file with its data.")
    return df
