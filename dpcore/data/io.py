"""Readers for point tables and boundary files, with errors a curator can act on.

Data flows one way (see DESIGN.md): an uploaded file becomes a validated
:class:`PointTable`, which the engines turn into a frequency matrix.  This module
is the first step: it reads CSV (also gzip-compressed), Parquet (also
GeoParquet) and GeoJSON point files into a :class:`pandas.DataFrame`, finds the
coordinate and user-id columns by name, and checks the coordinates.

Every problem a person can fix raises :class:`~dpcore.errors.InputError` whose
message names the file or column, says how many rows are affected and which
ones (1-based *data* rows, the header not counted), shows a few example values
and says what to do.  Rows with a missing coordinate or user id are not errors:
they are dropped and counted in :attr:`PointTable.dropped` so that the app can
show "rows dropped and why".

Nothing here prints or logs.  The few example values quoted in error messages
go only to the curator who uploaded the file.

Boundary files (GeoJSON, GeoPackage, zipped shapefile) are public geography used
for bounds and map context; :func:`read_boundaries` returns them in EPSG:4326
with invalid geometries repaired.  Writers for releases live elsewhere.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import itertools
import os
import re
import tempfile
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pandas as pd

from dpcore.data.engines.base import WHITESPACE  # what 'stripped' means in every engine
from dpcore.errors import InputError, ParameterError

if TYPE_CHECKING:
    import geopandas

__all__ = [
    "PointTable",
    "boundary_bounds",
    "detect_coordinate_columns",
    "detect_user_column",
    "load_points",
    "load_points_file",
    "read_boundaries",
    "read_table",
]

DataSource: TypeAlias = "bytes | bytearray | memoryview | str | os.PathLike[str] | IO[bytes]"
ProgressCallback: TypeAlias = "Callable[[float, str], None]"

#: Rows per chunk when a CSV is read with a progress callback.
CSV_CHUNK_ROWS = 1_000_000
#: Bytes of (decompressed) content inspected to choose encoding and delimiter.
SNIFF_BYTES = 64 * 1024
#: Delimiters tried by the sniffer, in order of preference when they tie.
DELIMITERS = (",", ";", "\t", "|")
#: Zipped shapefiles larger than this once uncompressed are refused (zip bomb guard).
MAX_ZIP_UNCOMPRESSED = 2 * 1024**3
#: Zipped shapefiles that expand more than this factor are refused (zip bomb guard) ...
MAX_ZIP_RATIO = 200
#: ... once they expand to more than this many bytes: tiny archives cannot be bombs,
#: and a small .dbf padded with blanks may legitimately compress very well.
ZIP_RATIO_FLOOR = 10 * 1024**2
#: Gzip-compressed tables are refused once they expand past this many bytes (gzip bomb guard) ...
MAX_GZIP_UNCOMPRESSED = 16 * 1024**3
#: ... or past :data:`MAX_ZIP_RATIO` times their compressed size (and :data:`ZIP_RATIO_FLOOR`).
#: Real CSV compresses 3-10x; a bomb made of one repeated line compresses 1000x.
#: A header row longer than this (no line break in the first 64 KiB) is not a table's header.
MAX_HEADER_BYTES = SNIFF_BYTES
#: Most columns a table may have; real point, census and O/D tables have a few dozen.
MAX_COLUMNS = 10_000
#: Largest upload the app accepts, in MB (``server.maxUploadSize`` in .streamlit/config.toml);
#: larger files go through the command line, which reads from disk.
UPLOAD_LIMIT_MB = 2048

DROP_MISSING_COORDINATE = "missing coordinate"
DROP_MISSING_USER = "missing user id"

_N_EXAMPLES = 5


# --------------------------------------------------------------------------------------
# The validated table
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, repr=False)
class PointTable:
    """Validated points, ready to be aggregated.

    Attributes
    ----------
    lon, lat : numpy.ndarray
        Longitudes and latitudes in decimal degrees (float64, finite, within
        -180..180 and -90..90), one entry per kept row, in file order.
    user : numpy.ndarray or None
        User ids of the kept rows (int64 when the ids are whole numbers, else an
        object array of str), or None when no user column was chosen.
    source_name : str
        File name as uploaded.  Curator-only: never exported.
    lat_column, lon_column, user_column : str or None
        The columns the values came from.
    n_read : int
        Data rows read (the header not counted).
    dropped : dict of str to int
        Reason -> number of rows dropped for it.  Each dropped row is counted
        once, under the first reason that applies ("missing coordinate" before
        "missing user id"), so ``n_read == n_kept + sum(dropped.values())``.

    Notes
    -----
    ``repr`` shows counts and column names only, never values, so a table that
    ends up in a log does not leak any location.  Equality is identity (arrays
    do not compare as a single bool).
    """

    lon: np.ndarray
    lat: np.ndarray
    user: np.ndarray | None
    source_name: str
    lat_column: str
    lon_column: str
    user_column: str | None
    n_read: int
    dropped: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.lon)
        if len(self.lat) != n or (self.user is not None and len(self.user) != n):
            raise ValueError("PointTable: lon, lat and user must have the same length")

    @property
    def n_kept(self) -> int:
        """Number of rows kept (``len(lon)``)."""
        return int(len(self.lon))

    @property
    def n_dropped(self) -> int:
        """Number of rows dropped, all reasons together."""
        return int(sum(self.dropped.values()))

    def __repr__(self) -> str:
        return (
            f"PointTable(source_name={self.source_name!r}, n_read={self.n_read}, "
            f"n_kept={self.n_kept}, dropped={self.dropped!r}, lat_column={self.lat_column!r}, "
            f"lon_column={self.lon_column!r}, user_column={self.user_column!r})"
        )


# --------------------------------------------------------------------------------------
# Sources: bytes, paths and uploaded file objects
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Source:
    """Bytes in memory or a file on disk, reopenable for several passes."""

    name: str
    size: int
    data: bytes | None = None
    path: Path | None = None

    @classmethod
    def from_data(cls, data: Any, filename: str | None) -> _Source:
        if isinstance(data, bytes | bytearray | memoryview):
            raw = bytes(data)
            return cls(name=filename or "", size=len(raw), data=raw)
        if isinstance(data, str | os.PathLike):
            path = Path(data)
            if not path.is_file():
                raise InputError(f"File not found: '{path}'. Check the path and the file name.")
            return cls(name=filename or path.name, size=path.stat().st_size, path=path)
        if hasattr(data, "getvalue") or hasattr(data, "read"):
            # Streamlit's UploadedFile is a BytesIO with a .name
            raw = data.getvalue() if hasattr(data, "getvalue") else data.read()
            if isinstance(raw, str):
                raw = raw.encode("utf-8")
            name = filename or Path(str(getattr(data, "name", "") or "")).name
            return cls(name=name, size=len(raw), data=bytes(raw))
        raise TypeError(
            f"expected bytes, a path or a binary file object, got {type(data).__name__}"
        )

    @property
    def label(self) -> str:
        return f"'{self.name}'" if self.name else "the file"

    def open(self) -> IO[bytes]:
        if self.data is not None:
            return io.BytesIO(self.data)
        assert self.path is not None
        return open(self.path, "rb")

    def head(self, n: int) -> bytes:
        if self.data is not None:
            return self.data[:n]
        with self.open() as fh:
            return fh.read(n)

    def read_all(self) -> bytes:
        if self.data is not None:
            return self.data
        with self.open() as fh:
            return fh.read()


# Magic numbers of formats people upload by mistake (or on purpose).
_MAGIC: tuple[tuple[bytes, str, str], ...] = (
    (b"\x1f\x8b", "gzip", "a gzip archive"),
    (b"PK\x03\x04", "zip", "a ZIP file (for example an Excel .xlsx workbook or a zipped folder)"),
    (b"PK\x05\x06", "zip", "an empty ZIP file"),
    (b"PAR1", "parquet", "a Parquet file"),
    (b"\x89PNG\r\n\x1a\n", "png", "a PNG image"),
    (b"\xff\xd8\xff", "jpeg", "a JPEG image"),
    (b"GIF87a", "gif", "a GIF image"),
    (b"GIF89a", "gif", "a GIF image"),
    (b"%PDF-", "pdf", "a PDF document"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "ole", "an old Excel (.xls) or Office file"),
    (b"SQLite format 3\x00", "sqlite", "a SQLite database or GeoPackage"),
    (b"\xfd7zXZ\x00", "xz", "an xz archive"),
    (b"7z\xbc\xaf\x27\x1c", "7z", "a 7-Zip archive"),
    (b"Rar!\x1a\x07", "rar", "a RAR archive"),
)
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_TEXT_LEAD = b" \t\r\n\xef\xbb\xbf"


def _magic(head: bytes) -> tuple[str, str] | None:
    """``(kind, description)`` of a recognised binary format, else None."""
    for magic, kind, desc in _MAGIC:
        if head.startswith(magic):
            return kind, desc
    if re.match(rb"BZh[1-9]1AY&SY", head):
        return "bz2", "a bzip2 archive"
    return None


def _looks_like_json(head: bytes) -> bool:
    return head.lstrip(_TEXT_LEAD).startswith(b"{")


_CSV_SUFFIXES = (".csv", ".txt", ".tsv", ".tab", ".dat")
_PARQUET_SUFFIXES = (".parquet", ".pq", ".parq", ".geoparquet")
_GEOJSON_SUFFIXES = (".geojson", ".json")
_SPREADSHEET_SUFFIXES = (".xlsx", ".xlsm", ".xls", ".ods", ".numbers")
_GIS_SUFFIXES = (".gpkg", ".shp", ".zip", ".kml", ".kmz", ".gml", ".gdb", ".fgb")


def _format_from_name(name: str) -> str | None:
    lower = name.lower().strip()
    if lower.endswith(".gz"):
        stem = lower[:-3]
        if stem.endswith(_PARQUET_SUFFIXES + _GEOJSON_SUFFIXES):
            return "unsupported-gz"
        return "csv"
    for suffixes, fmt in (
        (_CSV_SUFFIXES, "csv"),
        (_PARQUET_SUFFIXES, "parquet"),
        (_GEOJSON_SUFFIXES, "geojson"),
        (_SPREADSHEET_SUFFIXES, "spreadsheet"),
        (_GIS_SUFFIXES, "gis"),
    ):
        if lower.endswith(suffixes):
            return fmt
    return None


# --------------------------------------------------------------------------------------
# Reading tables
# --------------------------------------------------------------------------------------


def read_table(
    data: DataSource,
    filename: str | None = None,
    *,
    max_rows: int | None = None,
    progress: ProgressCallback | None = None,
) -> pd.DataFrame:
    """Read an uploaded table: CSV (also ``.csv.gz``, ``.txt``, ``.tsv``), Parquet or GeoJSON.

    The format is chosen from the file name's extension and then checked
    against the content's magic bytes (Parquet ``PAR1``, gzip ``1f 8b``, ZIP
    ``PK``, JSON ``{``), so a workbook or an image renamed ``.csv`` is refused
    with a clear message instead of being parsed as garbage.  Without a usable
    extension the content decides.

    CSV details:

    * gzip-compressed content is decompressed whatever the extension, and refused as a
      gzip bomb once it expands past :data:`MAX_ZIP_RATIO` times the compressed bytes read
      so far (beyond :data:`ZIP_RATIO_FLOOR`) or past :data:`MAX_GZIP_UNCOMPRESSED`;
    * a first line longer than :data:`MAX_HEADER_BYTES` or a header of more than
      :data:`MAX_COLUMNS` columns is refused from the sample, before pandas parses it;
    * the delimiter is sniffed among ``,`` ``;`` tab and ``|`` on the first
      64 KiB: the one that splits the header and the rows into the same number
      (at least two) of fields wins, ties going to the extension's own delimiter
      (tab for ``.tsv``) and then to the order above;
    * text is decoded as UTF-8 (a BOM is dropped), falling back silently to
      Latin-1; UTF-16 with a BOM is read too; content with NUL bytes or many
      control characters is refused as binary;
    * pandas infers the column types; its default missing-value markers
      (empty, ``NA``, ``N/A``, ``NaN``, ``null``, ...) become NaN;
    * spaces around header names are removed.

    GeoJSON (a FeatureCollection of Point features) and GeoParquet become a
    table with the columns ``"longitude"`` and ``"latitude"`` (EPSG:4326) first,
    followed by the feature properties; a property with one of those names is
    renamed with the suffix ``"_property"``.

    Parameters
    ----------
    data : bytes, str, os.PathLike or binary file object
        The content, a path to it, or an uploaded file object (anything with
        ``getvalue()`` or ``read()``, such as Streamlit's ``UploadedFile``).
    filename : str, optional
        The name the file was uploaded under; used to choose the format and in
        messages.  Defaults to the path's (or file object's) name.
    max_rows : int, optional
        Read at most this many data rows (for previews).
    progress : callable, optional
        Called as ``progress(fraction, message)`` with ``0 <= fraction <= 1`` while
        the file is read; large CSV files are then read in chunks of
        :data:`CSV_CHUNK_ROWS` rows and the fraction is the share of (compressed)
        bytes consumed.

    Returns
    -------
    pandas.DataFrame
        With a default RangeIndex: row ``i`` is data row ``i + 1``.

    Raises
    ------
    InputError
        Empty file, header without rows, a single column (wrong delimiter), a
        binary or mismatched format, or content that fails to parse; the message
        says what to do.
    ParameterError
        ``max_rows`` is not a positive integer.
    """
    if max_rows is not None and (
        isinstance(max_rows, bool) or int(max_rows) != max_rows or max_rows < 1
    ):
        raise ParameterError(f"max_rows must be a positive whole number, got {max_rows!r}.")
    src = _Source.from_data(data, filename)
    if src.size == 0:
        raise InputError(
            f"{src.label} is empty (0 bytes). Upload the file again, or export it again "
            "with a header row and at least one data row."
        )
    head = src.head(1024)
    fmt = _format_from_name(src.name)
    magic = _magic(head)
    json_like = _looks_like_json(head)

    if fmt == "spreadsheet":
        raise InputError(
            f"{src.label} is a spreadsheet, which cannot be read directly. Save it as CSV "
            "(in Excel: File > Save As > 'CSV UTF-8') with a header row and upload the CSV."
        )
    if fmt == "gis":
        raise InputError(
            f"{src.label} is a GIS file; points are read from CSV, Parquet or GeoJSON. Export "
            "the point layer as GeoJSON, or as CSV with latitude and longitude columns "
            "(boundary files go in the boundaries upload)."
        )
    if fmt == "unsupported-gz":
        raise InputError(
            f"{src.label} is a compressed Parquet or GeoJSON file. Only CSV may be gzip-"
            "compressed: decompress it and upload the .parquet or .geojson file."
        )
    if fmt is None:
        if magic is not None and magic[0] == "parquet":
            fmt = "parquet"
        elif json_like:
            fmt = "geojson"
        elif magic is not None and magic[0] != "gzip":
            raise InputError(
                f"{src.label} is not a CSV, Parquet or GeoJSON file (it looks like {magic[1]}). "
                "Export it as CSV with a header row, or upload Parquet/GeoJSON."
            )
        else:
            fmt = "csv"

    if progress is not None:
        progress(0.0, f"Reading {src.label}")
    if fmt == "parquet":
        if magic is None or magic[0] != "parquet":
            found = magic[1] if magic is not None else "a text file"
            hint = (
                " Rename it to end in .csv if it is a CSV file, or export it again as Parquet."
                if magic is None
                else " Export it again as Parquet, or upload a CSV file."
            )
            raise InputError(f"{src.label} is not a Parquet file (it looks like {found}).{hint}")
        df = _read_parquet(src, max_rows)
    elif fmt == "geojson":
        if not json_like:
            found = magic[1] if magic is not None else "a text file that does not start with '{'"
            raise InputError(
                f"{src.label} is not a GeoJSON file (it looks like {found}). Upload a GeoJSON "
                "FeatureCollection of points, or rename a CSV file to end in .csv."
            )
        df = _read_geojson_points(src, max_rows)
    else:
        if magic is not None and magic[0] == "parquet":
            raise InputError(
                f"{src.label} is not a text CSV file (it looks like a Parquet file). "
                "Rename it to end in .parquet, or export it as CSV with a header row."
            )
        if json_like:
            raise InputError(
                f"{src.label} is not a text CSV file (it looks like JSON/GeoJSON). "
                "Rename it to end in .geojson, or export it as CSV with a header row."
            )
        preferred = (
            "\t" if src.name.lower().removesuffix(".gz").endswith((".tsv", ".tab")) else None
        )
        df = _read_csv(src, max_rows=max_rows, progress=progress, preferred_sep=preferred)
    if progress is not None:
        progress(1.0, f"Read {len(df):,} rows from {src.label}")
    return df


def _read_csv(
    src: _Source,
    *,
    max_rows: int | None,
    progress: ProgressCallback | None,
    preferred_sep: str | None,
) -> pd.DataFrame:
    label = src.label
    head = src.head(SNIFF_BYTES)
    magic = _magic(head)
    compressed = magic is not None and magic[0] == "gzip"
    if compressed:
        try:
            with src.open() as fh, gzip.GzipFile(fileobj=fh) as gz:
                sample = gz.read(SNIFF_BYTES)
        except (gzip.BadGzipFile, EOFError, zlib.error) as err:
            raise _damaged_gzip(label, err) from err
    else:
        sample = head
    whole = len(sample) < SNIFF_BYTES
    if whole and not sample.strip(_TEXT_LEAD):
        raise InputError(
            f"{label} is empty (it holds no text). Export it again with a header row "
            "and at least one data row."
        )
    encoding = _text_encoding(sample, label, compressed)
    check_text_head(sample, label, whole=whole)
    text = _decode_sample(sample, encoding, whole)
    sep = _sniff_delimiter(text, preferred_sep)
    if sep is None:
        raise _single_column_error(label, text)
    _check_header_width(text, sep, label)

    def attempt(enc: str) -> pd.DataFrame:
        kwargs: dict[str, Any] = {
            "sep": sep,
            "encoding": enc,
            "compression": None,  # gzip: decompressed by _CappedGzip (bomb guard)
            "low_memory": False,
            # Never turn the first column into the index: with the default, a file whose
            # rows end in a delimiter ('1,2,') would be read shifted by one column.
            "index_col": False,
        }
        with src.open() as fh:
            stream: IO[bytes] = (
                io.BufferedReader(_CappedGzip(fh, label, src.size), 1 << 20) if compressed else fh
            )
            if progress is None:
                return pd.read_csv(stream, nrows=max_rows, **kwargs)
            chunks: list[pd.DataFrame] = []
            n = 0
            with pd.read_csv(stream, chunksize=CSV_CHUNK_ROWS, nrows=max_rows, **kwargs) as reader:
                for chunk in reader:
                    chunks.append(chunk)
                    n += len(chunk)
                    fraction = fh.tell() / src.size if src.size else 1.0
                    progress(min(max(fraction, 0.0), 0.99), f"Read {n:,} rows from {label}")
            if not chunks:  # header only: keep the columns for the error message
                fh.seek(0)
                if compressed:
                    stream = io.BufferedReader(_CappedGzip(fh, label, src.size), 1 << 20)
                return pd.read_csv(stream, nrows=0, **kwargs)
            return pd.concat(chunks, ignore_index=True) if len(chunks) > 1 else chunks[0]

    try:
        try:
            df = attempt(encoding)
        except UnicodeDecodeError:
            # Non-UTF-8 bytes after the sniffed sample: Latin-1 decodes anything.
            if encoding != "utf-8-sig":
                raise
            df = attempt("latin-1")
    except pd.errors.EmptyDataError as err:
        raise InputError(
            f"{label} is empty (it holds only blank lines). Export it again with a header "
            "row and at least one data row."
        ) from err
    except pd.errors.ParserError as err:
        reason = str(err).strip().removeprefix("Error tokenizing data. C error: ").rstrip(".")
        raise InputError(
            f"{label} could not be read as CSV ({reason}; lines counted from the header). "
            f"Check that every row has as many values as the header, that values containing "
            f"{_sep_name(sep)} are quoted, and that every quote is closed."
        ) from err
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise _damaged_gzip(label, err) from err

    df = _strip_header(df)
    if df.shape[1] < 2:
        raise _single_column_error(label, text)
    if len(df) == 0:
        raise InputError(
            f"{label} has a header but no data rows. Add the data below the header "
            "(one point per row) and upload it again."
        )
    return df


def _damaged_gzip(label: str, err: BaseException) -> InputError:
    return InputError(
        f"{label} is a damaged or incomplete gzip file ({err}). Upload it again, or "
        "upload the uncompressed CSV."
    )


def _text_encoding(sample: bytes, label: str, compressed: bool) -> str:
    """Encoding for a CSV sample, or InputError when it is not text."""
    if sample.startswith(_UTF16_BOMS):
        return "utf-16"
    magic = _magic(sample)
    inner = " inside the gzip archive" if compressed else ""
    if magic is not None:
        raise InputError(
            f"{label} is not a text CSV file (it looks like {magic[1]}{inner}). "
            "Export it as CSV with a header row, or upload Parquet/GeoJSON."
        )
    arr = np.frombuffer(sample, dtype=np.uint8)
    control = (arr < 32) & ~np.isin(arr, (9, 10, 12, 13)) | (arr == 127)
    if b"\x00" in sample or (arr.size and control.mean() > 0.05):
        raise InputError(
            f"{label} is not a text CSV file (it looks like a binary file{inner}). "
            "Export it as CSV with a header row, or upload Parquet/GeoJSON."
        )
    try:
        codecs.getincrementaldecoder("utf-8-sig")().decode(sample, final=len(sample) < SNIFF_BYTES)
    except UnicodeDecodeError:
        return "latin-1"
    return "utf-8-sig"


def _decode_sample(sample: bytes, encoding: str, whole: bool) -> str:
    text = codecs.getincrementaldecoder(encoding)(errors="replace").decode(sample, final=whole)
    if not whole and "\n" in text:
        text = text[: text.rindex("\n")]  # the last line may be cut
    return text


def _sniff_delimiter(text: str, preferred: str | None) -> str | None:
    """The delimiter that splits the header and rows into the same number of fields.

    Scores ``(header has the modal field count, share of rows with it, preference)``
    so that ``lat;lon`` / ``40,7;-73,9`` picks ``;`` although ``,`` also splits the
    data rows consistently.
    """
    order = list(DELIMITERS)
    if preferred in order:
        order.remove(preferred)
        order.insert(0, preferred)
    best: str | None = None
    best_score: tuple[bool, float, int] | None = None
    for rank, sep in enumerate(order):
        try:
            reader = csv.reader(io.StringIO(text), delimiter=sep)
            rows = [r for r in itertools.islice(reader, 200) if any(f.strip() for f in r)]
        except csv.Error:
            continue
        if not rows:
            continue
        mode, freq = Counter(len(r) for r in rows).most_common(1)[0]
        if mode < 2:
            continue
        score = (len(rows[0]) == mode, freq / len(rows), -rank)
        if best_score is None or score > best_score:
            best, best_score = sep, score
    return best


def _check_header_width(text: str, sep: str, label: str) -> None:
    """InputError when a row of the sample has more values than the header names.

    pandas would otherwise use the extra values as an index (shifting every column)
    or drop them; both corrupt the table silently.  Trailing empty values
    ('1,2,') are allowed: many exports end each row with a delimiter.
    """
    reader = csv.reader(io.StringIO(text), delimiter=sep)
    try:
        header = next(reader)
        for row in itertools.islice(reader, 1000):
            width = len(row)
            while width and not row[width - 1].strip():
                width -= 1
            if width > len(header):
                shown = sep.join(header)
                shown = shown if len(shown) <= 60 else shown[:57] + "..."
                raise InputError(
                    f"Line {reader.line_num} of {label} has {width} values but the header "
                    f"(line 1: '{shown}') names only {len(header)} "
                    f"{'column' if len(header) == 1 else 'columns'}. If the file starts with a "
                    "title or notes, delete those lines so that the column names come first; "
                    "otherwise add the missing names to the header."
                )
    except (csv.Error, StopIteration):
        return  # pandas reports malformed quoting with its own message


def _sep_name(sep: str) -> str:
    return {"\t": "a tab", ",": "a comma", ";": "a semicolon", "|": "a '|'"}.get(sep, repr(sep))


def _single_column_error(label: str, text: str) -> InputError:
    first = next((line for line in text.splitlines() if line.strip()), "")
    shown = first if len(first) <= 60 else first[:57] + "..."
    return InputError(
        f"{label} has only one column (header '{shown}'): its values are not separated by "
        "commas, semicolons, tabs or '|'. Export it again as CSV with a comma between "
        "columns (for example 'lat,lon') and a header row."
    )


def _strip_header(df: pd.DataFrame) -> pd.DataFrame:
    stripped = [c.strip() if isinstance(c, str) else c for c in df.columns]
    if stripped != list(df.columns) and len(set(stripped)) == len(stripped):
        df.columns = stripped
    return df


def _read_parquet(src: _Source, max_rows: int | None) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.parquet as pq

    label = src.label
    try:
        with src.open() as fh:
            pf = pq.ParquetFile(fh)
            metadata = pf.schema_arrow.metadata or {}
            if b"geo" in metadata:
                fh.seek(0)
                return _read_geoparquet_points(fh, label, max_rows)
            if max_rows is None:
                table = pf.read()
            else:
                batches = []
                n = 0
                for batch in pf.iter_batches(batch_size=min(max_rows, CSV_CHUNK_ROWS)):
                    batches.append(batch)
                    n += batch.num_rows
                    if n >= max_rows:
                        break
                table = pa.Table.from_batches(batches, schema=pf.schema_arrow).slice(0, max_rows)
            df = table.to_pandas()
    except (pa.ArrowException, OSError, ValueError) as err:
        raise InputError(
            f"{label} could not be read as Parquet ({err}). Export it again as Parquet, "
            "or upload it as CSV."
        ) from err
    if not isinstance(df.index, pd.RangeIndex):
        df = df.reset_index()  # a named index (e.g. a user id) becomes a column again
    df = df.reset_index(drop=True)
    if df.shape[1] == 0:
        raise InputError(f"{label} has no columns. Export it again with the coordinate columns.")
    if len(df) == 0:
        raise InputError(
            f"{label} has columns but no data rows. Export it again with the rows included."
        )
    return df


def _read_geoparquet_points(fh: IO[bytes], label: str, max_rows: int | None) -> pd.DataFrame:
    import geopandas as gpd

    gdf = gpd.read_parquet(fh)
    if max_rows is not None:
        gdf = gdf.iloc[:max_rows]
    return _points_frame(gdf, label)


def _read_geojson_points(src: _Source, max_rows: int | None) -> pd.DataFrame:
    import geopandas as gpd

    label = src.label
    kwargs: dict[str, Any] = {} if max_rows is None else {"max_features": max_rows}
    try:
        gdf = gpd.read_file(io.BytesIO(src.read_all()), **kwargs)
    except Exception as err:  # pyogrio raises several types; all mean "cannot parse"
        raise InputError(
            f"{label} could not be read as GeoJSON ({_geojson_problem(src.read_all(), err)}). Check that "
            "it is a GeoJSON FeatureCollection of points, or upload it as CSV."
        ) from err
    return _points_frame(gdf, label)


def _points_frame(gdf: geopandas.GeoDataFrame, label: str) -> pd.DataFrame:
    """Longitude/latitude columns (EPSG:4326) of Point features, then the properties."""
    if len(gdf) == 0:
        raise InputError(
            f"{label} has no features (no data rows). Export it again with the points included."
        )
    if gdf.crs is not None and not _is_wgs84(gdf.crs):
        try:
            gdf = gdf.to_crs(4326)
        except Exception as err:
            raise InputError(
                f"{label} uses a coordinate system ({gdf.crs}) that could not be converted to "
                f"longitude/latitude ({_first_line(err)}). Export it in WGS84 (EPSG:4326)."
            ) from err
    types = gdf.geom_type
    other = types.notna() & (types != "Point")
    if other.any():
        counts = ", ".join(f"{n:,} {t}" for t, n in types[other].value_counts().items())
        raise InputError(
            f"{label} has features that are not points ({counts}). Only Point features can "
            "be read as location points: convert them to points, or upload polygons as a "
            "boundary file."
        )
    geometry = gdf.geometry
    lon = geometry.x.to_numpy(dtype=np.float64, na_value=np.nan)
    lat = geometry.y.to_numpy(dtype=np.float64, na_value=np.nan)
    props = pd.DataFrame(gdf.drop(columns=gdf.geometry.name)).reset_index(drop=True)
    props = props.rename(
        columns={c: f"{c}_property" for c in props.columns if c in ("longitude", "latitude")}
    )
    out = pd.DataFrame({"longitude": lon, "latitude": lat})
    return pd.concat([out, props], axis=1)


def _is_wgs84(crs: Any) -> bool:
    try:
        return crs.to_epsg() == 4326 or crs.equals("OGC:CRS84")
    except Exception:
        return False


_GEOJSON_TYPES = frozenset({
    "FeatureCollection", "Feature", "Point", "MultiPoint", "LineString", "MultiLineString", "Polygon",
    "MultiPolygon", "GeometryCollection",
})


def _geojson_problem(raw: bytes, err: BaseException) -> str:
    """What is wrong with JSON content GDAL refused, in words (not GDAL's /vsimem/ path)."""
    import json

    try:
        obj = json.loads(raw.decode("utf-8-sig", errors="replace"))
    except json.JSONDecodeError as e:
        return f"it is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}"
    except RecursionError:
        return "it is nested too deeply to be GeoJSON"
    if not isinstance(obj, dict) or obj.get("type") not in _GEOJSON_TYPES:
        return 'it is JSON but not GeoJSON: it has no "type": "FeatureCollection"'
    text = _first_line(err)
    return re.sub(r"'?/vsimem/\S+'?\s*", "", text) or "GDAL could not parse it"


def _first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0][:200]


# --------------------------------------------------------------------------------------
# Guards shared by the table readers (also dpcore.areas.census_tables, dpcore.areas.area_sets, dpcore.points.workload_io)
# --------------------------------------------------------------------------------------


def gzip_limit(compressed_size: int) -> int:
    """Most bytes a gzip of ``compressed_size`` bytes may expand to (see :data:`MAX_ZIP_RATIO`)."""
    return int(min(MAX_GZIP_UNCOMPRESSED, max(ZIP_RATIO_FLOOR, MAX_ZIP_RATIO * max(compressed_size, 1))))


def _gzip_bomb_error(label: str, compressed_size: int, limit: int) -> InputError:
    return InputError(
        f"{label} expands to more than {limit / 1024**2:,.0f} MB from {compressed_size / 1024**2:,.1f} MB "
        f"compressed (limits: {MAX_ZIP_RATIO}x its size and {MAX_GZIP_UNCOMPRESSED // 1024**3} GB); it was not read "
        "further. A real table compresses far less: check the file, or upload it uncompressed or as Parquet."
    )


class _CappedGzip(io.RawIOBase):
    """A gzip stream that raises InputError once it has produced more than ``limit`` bytes."""

    def __init__(self, fh: IO[bytes], label: str, compressed_size: int) -> None:
        self._fh = fh
        self._start = fh.tell()
        self._gz = gzip.GzipFile(fileobj=fh)
        self._label = label
        self._size = compressed_size
        self._limit = gzip_limit(compressed_size)
        self._n = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        chunk = self._gz.read(len(b))
        self._n += len(chunk)
        # The ratio is checked as the stream goes, against the compressed bytes consumed so far,
        # so a bomb of many repeated members is stopped just past the floor, not at the end.
        consumed = max(self._fh.tell() - self._start, 1)
        if self._n > self._limit or (self._n > ZIP_RATIO_FLOOR and self._n > MAX_ZIP_RATIO * consumed):
            raise _gzip_bomb_error(self._label, self._size, min(self._n, self._limit))
        b[: len(chunk)] = chunk
        return len(chunk)

    def close(self) -> None:
        self._gz.close()
        super().close()


def gunzip_limited(raw: bytes, label: str) -> bytes:
    """Decompress gzip bytes, refusing a bomb before it is expanded in full.

    Raises
    ------
    InputError
        Damaged gzip, or content larger than :func:`gzip_limit` allows.
    """
    try:
        with _CappedGzip(io.BytesIO(raw), label, len(raw)) as fh:
            return io.BufferedReader(fh, 1 << 20).read()
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise _damaged_gzip(label, err) from err


def check_text_head(head: bytes, label: str, *, whole: bool) -> None:
    """Refuse text whose first line is too long or has too many fields to be a table header.

    ``head`` is the first :data:`SNIFF_BYTES` (or more) bytes of decompressed content;
    ``whole`` says whether that is all of it.  Parsing a 20 MB line of commas as a header
    would take minutes and gigabytes, so it is refused from the sample.
    """
    first, nl, _ = head.partition(b"\n")
    if not nl:
        first, nl, _ = head.partition(b"\r")
    if not nl and not whole and len(head) >= MAX_HEADER_BYTES:
        raise InputError(
            f"The first line of {label} is longer than {MAX_HEADER_BYTES // 1024} KB, so it is not a header row "
            "of column names (or the file has no line breaks). Export the table again as CSV with one row per "
            "line and a header row such as 'lat,lon'."
        )
    widest = max(first.count(sep.encode()) for sep in DELIMITERS) + 1
    if widest > MAX_COLUMNS:
        raise InputError(
            f"The header row of {label} has {widest:,} columns, more than the {MAX_COLUMNS:,} a table may have. "
            "Check the delimiter and the line breaks, or keep only the columns you need."
        )


# --------------------------------------------------------------------------------------
# Column detection
# --------------------------------------------------------------------------------------

_LAT_TOKENS = frozenset({"lat", "latitude", "lati"})
_LON_TOKENS = frozenset({"lon", "lng", "long", "longitude", "longi"})
_Y_NAMES = frozenset({"y", "ycoord", "y_coord", "coord_y", "point_y", "y_coordinate", "pos_y"})
_X_NAMES = frozenset({"x", "xcoord", "x_coord", "coord_x", "point_x", "x_coordinate", "pos_x"})


def _tokens(name: object) -> list[str]:
    """Lower-case word tokens of a column name: 'Start Lat' / 'startLat' -> ['start', 'lat']."""
    s = str(name).strip()
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    s = re.sub(r"([A-Za-z])([0-9])", r"\1_\2", s)
    return [t for t in re.split(r"[^0-9a-zA-Z]+", s.lower()) if t]


def _looks_numeric(s: pd.Series) -> bool:
    if pd.api.types.is_bool_dtype(s):
        return False
    if pd.api.types.is_numeric_dtype(s):
        return True
    sample = s.dropna().head(50)
    if len(sample) == 0:
        return False
    parsed = pd.to_numeric(sample.astype(str).str.strip(), errors="coerce")
    return bool(parsed.notna().mean() >= 0.8)


_Candidate: TypeAlias = "tuple[int, Any, tuple[str, ...], bool]"


def _coordinate_candidates(
    df: pd.DataFrame, tokens_of_axis: frozenset[str], xy_names: frozenset[str]
) -> list[_Candidate]:
    """``(tier, column, stem, weak)`` for every column that may hold this axis.

    ``stem`` is the name without the axis word (``pickup`` for ``pickup_latitude``).
    ``weak`` marks a name that qualifies only through the word "long" among other
    words (``long_name``, ``trip_long``): such a column is used only next to a
    latitude column with the same stem (``start_long`` with ``start_lat``).
    """
    found: list[_Candidate] = []
    for col in df.columns:
        toks = _tokens(col)
        joined = "_".join(toks)
        axis = [t for t in toks if t in tokens_of_axis]
        if len(toks) == 1 and axis:
            found.append((0, col, (), False))
        elif axis:
            stem = tuple(t for t in toks if t not in tokens_of_axis)
            found.append((1, col, stem, set(axis) == {"long"}))
        elif joined in xy_names:
            found.append((2, col, tuple(t for t in toks if t not in ("x", "y")), False))
    return found


def detect_coordinate_columns(df: pd.DataFrame) -> tuple[str | None, str | None]:
    """Find the latitude and longitude columns by name.

    Names are compared case-insensitively as word tokens (split at spaces,
    punctuation, camelCase and digits).  In order of preference:

    0. a name that is just ``lat``/``latitude`` (``lon``/``lng``/``long``/``longitude``);
    1. a name with one of those as a whole word: ``Start Lat``, ``pickup_latitude``,
       ``decimalLatitude``, ``Lat_DD`` (but not ``latency`` or ``plate``; and
       ``long`` among other words, as in ``long_name``, only next to a latitude
       column with the same other words, as ``start_long`` with ``start_lat``);
    2. ``y``/``x`` and the like (``POINT_Y``, ``x_coord``).

    When several pairs qualify, a pair whose names match apart from the axis word
    (``pickup_latitude`` with ``pickup_longitude``) beats a mixed pair, columns
    that hold numbers beat text columns, and then the leftmost columns win.

    Parameters
    ----------
    df : pandas.DataFrame
        The table as read.

    Returns
    -------
    (lat_col, lon_col) : tuple of str or None
        Each None when no column qualifies.
    """
    lats = _coordinate_candidates(df, _LAT_TOKENS, _Y_NAMES)
    lons = _coordinate_candidates(df, _LON_TOKENS, _X_NAMES)
    position = {c: i for i, c in enumerate(df.columns)}
    numeric: dict[Any, bool] = {}

    def is_numeric(col: Any) -> bool:
        if col not in numeric:
            numeric[col] = _looks_numeric(df[col]) if df.columns.is_unique else True
        return numeric[col]

    pairs = [
        (
            max(lat_tier, lon_tier),
            lat_stem != lon_stem,
            not is_numeric(lat),
            not is_numeric(lon),
            position[lat],
            position[lon],
            lat,
            lon,
        )
        for (lat_tier, lat, lat_stem, _), (lon_tier, lon, lon_stem, weak) in itertools.product(
            lats, lons
        )
        if lat != lon and not (weak and lat_stem != lon_stem)
    ]
    if pairs:
        best = min(pairs, key=lambda p: p[:6])
        return best[6], best[7]

    def best_single(cands: list[_Candidate]) -> Any:
        usable = [c for c in cands if not c[3]]
        if not usable:
            return None
        return min(usable, key=lambda c: (c[0], not is_numeric(c[1]), position[c[1]]))[1]

    return best_single(lats), best_single(lons)


# Person-like nouns; earlier ones are preferred when several columns qualify.
_USER_NOUNS = (
    "user", "person", "individual", "participant", "respondent", "subject", "patient",
    "customer", "client", "member", "passenger", "rider", "traveler", "traveller", "account",
    "device", "phone", "imei", "taxi", "vehicle", "driver",
)  # fmt: skip
_ID_TOKENS = frozenset(
    {"id", "uid", "key", "hash", "hashed", "code", "no", "number", "name", "ident"}
)
_USER_EXACT = {
    "uid": 0, "userid": 0, "username": 0, "personid": 1, "pid": 1, "deviceid": 15,
    "maid": 15, "ad_id": 15, "idfa": 15, "gaid": 15, "hack_license": 20, "medallion": 20,
}  # fmt: skip


def detect_user_column(df: pd.DataFrame) -> str | None:
    """Find a user-id column by name, or None.

    Recognised: ``user_id``, ``userid``, ``uid``, ``user``, ``person_id``,
    ``device_id``, ``participant_id``, ``customer_id``, ``taxi_id``, ... -- a
    person-, device- or vehicle-like word alone or with ``id``/``key``/``hash``/
    ``name`` (``User ID``, ``hashed_user_id``, ``deviceId``), and a few
    well-known ids (``maid``, ``medallion``).  Person-like names beat device- and
    vehicle-like ones; then the leftmost column wins.

    Detection only proposes a column: the unit of privacy is the curator's choice.

    Parameters
    ----------
    df : pandas.DataFrame
        The table as read.

    Returns
    -------
    str or None
    """
    best: tuple[int, int, Any] | None = None
    for pos, col in enumerate(df.columns):
        toks = _tokens(col)
        joined = "_".join(toks)
        rank: int | None = _USER_EXACT.get(joined, _USER_EXACT.get(joined.replace("_", "")))
        if rank is None:
            nouns = [t for t in toks if t in _USER_NOUNS]
            rest = [t for t in toks if t not in _USER_NOUNS]
            if nouns and len(nouns) == 1 and all(t in _ID_TOKENS for t in rest):
                rank = _USER_NOUNS.index(nouns[0])
            elif nouns and len(nouns) == 1 and len(rest) == 1 and rest[0] in ("hashed", "anon"):
                rank = _USER_NOUNS.index(nouns[0])
        if rank is not None and (best is None or (rank, pos) < best[:2]):
            best = (rank, pos, col)
    return None if best is None else best[2]


# --------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _fmt_value(v: object) -> str:
    if isinstance(v, str):
        return repr(v if len(v) <= 24 else v[:21] + "...")
    if isinstance(v, float | np.floating):
        return f"{float(v):.10g}"
    text = repr(v)
    return text if len(text) <= 24 else text[:21] + "..."


def _where(positions: np.ndarray, values: Sequence[object]) -> str:
    """'data rows 2, 5, 9: 'abc', 'N/A', '4O.7'' for 0-based positions and their values."""
    shown = positions[:_N_EXAMPLES]
    more = len(positions) > _N_EXAMPLES
    rows = ", ".join(str(int(i) + 1) for i in shown) + (", ..." if more else "")
    examples = ", ".join(_fmt_value(v) for v in list(values)[:_N_EXAMPLES]) + (
        ", ..." if more else ""
    )
    word = "data row" if len(positions) == 1 else "data rows"
    return f"{word} {rows}: {examples}"


def _check_column(df: pd.DataFrame, col: object, role: str) -> None:
    columns = list(df.columns)
    if col not in columns:
        near = [c for c in columns if str(c).strip().lower() == str(col).strip().lower()]
        hint = f" Did you mean '{near[0]}'?" if near else ""
        raise InputError(
            f"There is no column '{col}' for the {role} (columns: {_list_columns(columns)}).{hint} "
            "Choose one of the columns listed."
        )
    if columns.count(col) > 1:
        raise InputError(
            f"There are {columns.count(col)} columns named '{col}'. Rename them so that each "
            f"name is used once, then choose the {role} column again."
        )


def _list_columns(columns: Sequence[object], limit: int = 20) -> str:
    shown = ", ".join(str(c) for c in columns[:limit])
    if len(columns) > limit:
        shown += f", ... ({len(columns) - limit:,} more)"
    return shown or "none"


_DECIMAL_COMMA = re.compile(r"^[+-]?(\d+,\d*|,\d+)$")


def _numeric_column(s: pd.Series, col: object) -> np.ndarray:
    """Coordinates as float64 with NaN for missing ones; InputError for text values.

    Missing: NaN/None/NA, empty or blank strings and the string 'nan'.  Numbers
    written with a decimal comma ('40,71') are accepted when every value that
    does not parse has that form: a coordinate cannot have a thousands separator.
    """
    dtype = s.dtype
    if pd.api.types.is_bool_dtype(dtype):
        raise InputError(
            f"Column '{col}' holds true/false values, not coordinates. Choose the column "
            "that holds the coordinates in decimal degrees."
        )
    if pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_complex_dtype(dtype):
        # a copy: the table must not share (read-only, copy-on-write) memory with df
        return np.array(s.to_numpy(dtype=np.float64, na_value=np.nan), copy=True)
    if not (
        pd.api.types.is_object_dtype(dtype)
        or pd.api.types.is_string_dtype(dtype)
        or isinstance(dtype, pd.CategoricalDtype)
    ):
        raise InputError(
            f"Column '{col}' holds values of type {dtype} (dates or times?), not coordinates. "
            "Choose the column that holds the coordinates in decimal degrees."
        )
    if isinstance(dtype, pd.CategoricalDtype):
        s = s.astype(object)
    values = np.array(
        pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan), copy=True
    )
    failed = np.flatnonzero(np.isnan(values) & s.notna().to_numpy())
    if failed.size == 0:
        return values
    # Second chance for the few values pandas could not parse: surrounding spaces,
    # blanks (missing, not text) and decimal commas.
    originals = s.iloc[failed]
    stripped = originals.astype(object).map(str).str.strip(WHITESPACE)
    lowered = stripped.str.lower()
    blank = ((stripped == "") | lowered.isin(("nan", "+nan", "-nan"))).to_numpy()
    reparsed = np.array(
        pd.to_numeric(stripped, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan),
        copy=True,
    )
    text = np.isnan(reparsed) & ~blank
    if text.any() and stripped[text].str.match(_DECIMAL_COMMA).all():
        fixed = stripped[text].str.replace(",", ".", regex=False)
        reparsed[text] = pd.to_numeric(fixed, errors="coerce").to_numpy(
            dtype=np.float64, na_value=np.nan
        )
        text = np.isnan(reparsed) & ~blank
    if text.any():
        bad = failed[text]
        raise InputError(
            f"Column '{col}' has {_plural(int(bad.size), 'value')} that "
            f"{'is not a number' if bad.size == 1 else 'are not numbers'} "
            f"({_where(bad, originals.to_numpy()[text])}). Fix or remove those rows."
        )
    values[failed] = reparsed
    return values


def _check_finite(values: np.ndarray, col: object) -> None:
    bad = np.flatnonzero(np.isinf(values))
    if bad.size:
        raise InputError(
            f"Column '{col}' has {_plural(int(bad.size), 'infinite value')} "
            f"({_where(bad, values[bad])}). Replace them with the real coordinates or "
            "remove those rows."
        )


def _check_ranges(lat: np.ndarray, lon: np.ndarray, lat_col: object, lon_col: object) -> None:
    # NaN compares False, so missing values are never out of range.
    with np.errstate(invalid="ignore"):
        swap_ok = not (np.abs(lat) > 180).any() and not (np.abs(lon) > 90).any()
        for values, col, limit, word in (
            (lat, lat_col, 90, "latitude"),
            (lon, lon_col, 180, "longitude"),
        ):
            bad = np.flatnonzero(np.abs(values) > limit)
            if bad.size == 0:
                continue
            if swap_ok:
                hint = (
                    "Check that latitude and longitude are not swapped: choose "
                    f"'{lon_col}' as latitude and '{lat_col}' as longitude."
                )
            elif np.abs(values[bad]).max() > 1000:
                hint = (
                    "These look like projected coordinates (for example metres), not degrees: "
                    "convert them to longitude/latitude (WGS84, EPSG:4326) before uploading."
                )
            else:
                hint = (
                    f"Check that '{col}' is the {word} column in decimal degrees, then fix or "
                    "remove those rows."
                )
            raise InputError(
                f"Column '{col}' has {_plural(int(bad.size), 'value')} outside "
                f"{-limit}..{limit} ({_where(bad, values[bad])}). {hint}"
            )


def _user_ids(s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, missing)``: int64 ids when they are whole numbers, else stripped str."""
    dtype = s.dtype
    if pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
        values = s.to_numpy(dtype=np.float64, na_value=np.nan)
        missing = np.isnan(values)
        if pd.api.types.is_unsigned_integer_dtype(dtype) and (s.dropna() > np.iinfo(np.int64).max).any():
            # above int64: keep them exact as text (an int64 cast would wrap them around)
            return s.astype(object).map(lambda v: str(int(v)) if pd.notna(v) else None).to_numpy(dtype=object), missing
        if pd.api.types.is_integer_dtype(dtype):
            return s.to_numpy(dtype=np.int64, na_value=0), missing
        present = values[~missing]
        if present.size and np.abs(present[np.isfinite(present)]).max(initial=0) >= 2**53 and \
                np.all(present[np.isfinite(present)] == np.round(present[np.isfinite(present)])):
            raise InputError(
                "The person ids are whole numbers of more than 15 digits, and some rows have none, so they were "
                "read as decimal numbers, which cannot hold them exactly: different people could be merged. "
                "Fill or drop the rows without an id, or write the ids with a letter prefix so they are read "
                "as text."
            )
        if (
            np.all(np.isfinite(present))
            and np.all(present == np.round(present))
            and (present.size == 0 or np.abs(present).max() < 2**53)
        ):
            return np.where(missing, 0, values).astype(np.int64), missing
        text = s.astype(object).map(str).to_numpy(dtype=object)
        return text, missing
    stripped = s.astype("string").str.strip(WHITESPACE)
    missing = (stripped.isna() | (stripped == "")).to_numpy(dtype=bool)
    return stripped.astype(object).where(~missing, None).to_numpy(dtype=object), missing


def load_points(
    df: pd.DataFrame,
    lat_col: str,
    lon_col: str,
    user_col: str | None = None,
    *,
    source_name: str = "",
) -> PointTable:
    """Validate coordinate (and user-id) columns and return a :class:`PointTable`.

    Checks, in order, each an :class:`InputError` naming the column, the number
    of rows, the first data rows (1-based, header not counted), example values
    and the fix:

    1. the columns exist (the message lists the available ones), each name is
       used once, and latitude, longitude and user id are different columns;
    2. the table has data rows;
    3. no coordinate is text that does not parse as a number (surrounding spaces
       are ignored; empty strings count as missing; decimal commas are read when
       every unparsable value is one);
    4. no coordinate is infinite;
    5. latitudes lie in -90..90 and longitudes in -180..180; when swapping the
       two columns would make every value valid, the message says so.

    Rows with a missing (NaN, None, empty) latitude or longitude are dropped and
    counted under ``"missing coordinate"``; with a user column, remaining rows
    with a missing or blank user id are dropped and counted under
    ``"missing user id"``.  If nothing is left, :class:`InputError`.

    The checks are vectorised (``pd.to_numeric(errors="coerce")`` compared with
    the missing mask); only values that fail are looked at again.

    Parameters
    ----------
    df : pandas.DataFrame
        The table, as returned by :func:`read_table`.  Row ``i`` (by position)
        is data row ``i + 1``.
    lat_col, lon_col : str
        Latitude and longitude columns, decimal degrees (WGS84).
    user_col : str, optional
        Column of user ids, for user-level privacy.  Ids are stripped of
        surrounding spaces; whole-number ids become int64.
    source_name : str
        The file name as uploaded, kept for the curator's view.

    Returns
    -------
    PointTable
    """
    label = f"'{source_name}'" if source_name else "The table"
    _check_column(df, lat_col, "latitude")
    _check_column(df, lon_col, "longitude")
    if user_col is not None:
        _check_column(df, user_col, "user id")
    if lat_col == lon_col:
        raise InputError(
            f"Column '{lat_col}' was chosen for both latitude and longitude. Choose two "
            f"different columns (columns: {_list_columns(list(df.columns))})."
        )
    if user_col is not None and user_col in (lat_col, lon_col):
        raise InputError(
            f"Column '{user_col}' was chosen both as a coordinate and as the user id. Choose "
            "a user-id column that is neither the latitude nor the longitude column."
        )
    n_read = len(df)
    if n_read == 0:
        raise InputError(
            f"{label} has no data rows. Upload a table with at least one row of coordinates."
        )

    lat = _numeric_column(df[lat_col], lat_col)
    lon = _numeric_column(df[lon_col], lon_col)
    _check_finite(lat, lat_col)
    _check_finite(lon, lon_col)
    _check_ranges(lat, lon, lat_col, lon_col)

    missing = np.isnan(lat) | np.isnan(lon)
    keep = ~missing
    dropped: dict[str, int] = {}
    if missing.any():
        dropped[DROP_MISSING_COORDINATE] = int(missing.sum())
    if not keep.any():
        raise InputError(
            f"{label} has no rows with both coordinates: all {n_read:,} data rows have an "
            f"empty '{lat_col}' or '{lon_col}'. Check that you chose the coordinate columns."
        )

    user: np.ndarray | None = None
    if user_col is not None:
        ids, no_user = _user_ids(df[user_col])
        lost = no_user & keep
        if lost.any():
            dropped[DROP_MISSING_USER] = int(lost.sum())
            keep &= ~no_user
        if not keep.any():
            raise InputError(
                f"{label} has no rows with both coordinates and a user id: column "
                f"'{user_col}' is empty in every row that has coordinates. Choose the "
                "user-id column again, or choose none to protect single records."
            )
        user = ids[keep]

    all_kept = bool(keep.all())
    return PointTable(
        lon=lon if all_kept else lon[keep],
        lat=lat if all_kept else lat[keep],
        user=user,
        source_name=source_name,
        lat_column=lat_col,
        lon_column=lon_col,
        user_column=user_col,
        n_read=n_read,
        dropped=dropped,
    )


def load_points_file(
    data: DataSource,
    filename: str | None = None,
    lat_col: str | None = None,
    lon_col: str | None = None,
    user_col: str | None = None,
    progress: ProgressCallback | None = None,
) -> PointTable:
    """Read a point file, find its coordinate columns if not given, and validate it.

    :func:`read_table`, then :func:`detect_coordinate_columns` for whichever of
    ``lat_col``/``lon_col`` is None, then :func:`load_points`.

    The user column is *not* detected: a user id changes the unit of privacy
    and drops rows without one, so it is used only when named (the app proposes
    :func:`detect_user_column` and lets the curator decide).

    Parameters
    ----------
    data, filename, progress
        As for :func:`read_table`.
    lat_col, lon_col, user_col : str, optional
        Columns to use; see :func:`load_points`.

    Returns
    -------
    PointTable

    Raises
    ------
    InputError
        Any problem from reading or validation, or no coordinate columns found.
    """
    src_name = filename or _source_name(data)
    df = read_table(data, filename=src_name or None, progress=progress)
    if lat_col is None or lon_col is None:
        found_lat, found_lon = detect_coordinate_columns(df)
        lat_col = lat_col if lat_col is not None else found_lat
        lon_col = lon_col if lon_col is not None else found_lon
        if lat_col is None or lon_col is None:
            raise _no_coordinates_error(df, src_name, lat_col is None, lon_col is None)
    return load_points(df, lat_col, lon_col, user_col, source_name=src_name)


def _source_name(data: object) -> str:
    if isinstance(data, str | os.PathLike):
        return Path(data).name
    return Path(str(getattr(data, "name", "") or "")).name


def _no_coordinates_error(df: pd.DataFrame, name: str, no_lat: bool, no_lon: bool) -> InputError:
    where = f"'{name}'" if name else "the file"
    columns = list(df.columns)
    numeric_names = pd.to_numeric(pd.Series([str(c) for c in columns]), errors="coerce")
    if len(columns) and numeric_names.notna().mean() >= 0.5:
        return InputError(
            f"The first row of {where} looks like data, not column names ({_list_columns(columns, 6)}). "
            "Add a header row naming the columns (for example 'lat,lon') and upload it again."
        )
    what = (
        "latitude/longitude columns"
        if no_lat and no_lon
        else ("latitude column" if no_lat else "longitude column")
    )
    return InputError(
        f"No {what} found in {where} (columns: {_list_columns(columns)}). Name them 'lat' and "
        "'lon' or choose them in the app (CLI: --lat-col/--lon-col)."
    )


# --------------------------------------------------------------------------------------
# Boundaries
# --------------------------------------------------------------------------------------


def read_boundaries(data: DataSource, filename: str | None = None) -> geopandas.GeoDataFrame:
    """Read a boundary file: GeoJSON, GeoPackage or a zipped shapefile.

    The format is recognised from the content (``{`` for GeoJSON, the SQLite
    header for GeoPackage, ``PK`` for a ZIP); a path to an unzipped ``.shp`` is
    read with its side files.

    * Zip archives are checked before anything is decompressed: members with an
      absolute path, a ``..`` component or a symbolic link are refused (path
      traversal), and so are archives that expand to more than 2 GiB, or to more
      than 200 times their compressed size once past 10 MiB (zip bombs).  The
      members are then extracted with the sizes counted as they are written, so
      a header that lies about sizes cannot get around the limit.  One
      shapefile (or GeoPackage/GeoJSON) per archive.
    * A GeoPackage with several layers must have exactly one polygon layer.
    * Features without geometry are dropped; none left is an error.
    * No CRS: EPSG:4326 is assumed if all coordinates lie in -180..180 / -90..90,
      otherwise an error asks for the ``.prj``.  Anything else is reprojected to
      EPSG:4326.
    * Invalid geometries are repaired with :func:`shapely.make_valid` (the
      ``"structure"`` method for polygons, which keeps them polygons).

    Parameters
    ----------
    data : bytes, str, os.PathLike or binary file object
        Content, path or uploaded file object.
    filename : str, optional
        Name for messages.

    Returns
    -------
    geopandas.GeoDataFrame
        In EPSG:4326, with a fresh RangeIndex.

    Raises
    ------
    InputError
        Unrecognised, unsafe, damaged or empty file, or no usable CRS.
    """
    import geopandas as gpd

    src = _Source.from_data(data, filename)
    label = src.label
    if src.path is not None and src.path.suffix.lower() == ".shp":
        gdf = _read_vector(lambda: gpd.read_file(src.path), label)
        return _clean_boundaries(gdf, label)
    raw = src.read_all()
    if not raw.strip(_TEXT_LEAD):
        raise InputError(f"{label} is empty. Upload a GeoJSON, GeoPackage or zipped shapefile.")
    magic = _magic(raw[:64])
    kind = magic[0] if magic is not None else None
    if kind == "zip":
        gdf = _read_zipped_boundaries(raw, label)
    elif kind == "sqlite":
        gdf = _read_gpkg(raw, label)
    elif _looks_like_json(raw[:1024]):
        try:
            gdf = gpd.read_file(io.BytesIO(raw))
        except Exception as err:  # pyogrio/GDAL raise several types; all mean "cannot parse"
            raise InputError(
                f"{label} could not be read as a boundary file ({_geojson_problem(raw, err)}). Export "
                "the boundaries again as a GeoJSON FeatureCollection of polygons."
            ) from err
    else:
        found = f" (it looks like {magic[1]})" if magic is not None else ""
        raise InputError(
            f"{label} is not a GeoJSON, GeoPackage or zipped shapefile{found}. Export the "
            "boundaries in one of those formats (zip the .shp, .shx, .dbf and .prj together)."
        )
    return _clean_boundaries(gdf, label)


def _read_vector(read: Callable[[], Any], label: str) -> geopandas.GeoDataFrame:
    try:
        return read()
    except Exception as err:  # pyogrio/GDAL raise several types; all mean "cannot parse"
        raise InputError(
            f"{label} could not be read as a boundary file ({_first_line(err)}). Check that it "
            "is a valid GeoJSON, GeoPackage or zipped shapefile, and export it again if not."
        ) from err


def _read_gpkg(raw: bytes, label: str) -> geopandas.GeoDataFrame:
    import geopandas as gpd
    import pyogrio

    # From a real .gpkg file: GDAL warns about a GeoPackage read from memory (no
    # .gpkg extension), and silencing warnings is not thread-safe.
    with tempfile.TemporaryDirectory(prefix="dpcore-boundaries-") as tmp:
        path = Path(tmp) / "boundaries.gpkg"
        path.write_bytes(raw)
        found = _read_vector(lambda: pyogrio.list_layers(path), label)
        if len(found) == 0:
            raise InputError(f"{label} has no layers. Export the boundaries into it again.")
        layer = None
        if len(found) > 1:
            polygonal = [str(n) for n, t in found if t is not None and "polygon" in str(t).lower()]
            if len(polygonal) != 1:
                names = ", ".join(str(n) for n, _ in found)
                raise InputError(
                    f"{label} has {len(found)} layers ({names}) and it is not clear which holds "
                    "the boundaries. Save the layer with the areas as its own GeoPackage or "
                    "GeoJSON."
                )
            layer = polygonal[0]
        return _read_vector(lambda: gpd.read_file(path, layer=layer), label)


def _unsafe_member(info: zipfile.ZipInfo) -> bool:
    name = info.filename.replace("\\", "/")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return True
    if ".." in PurePosixPath(name).parts:
        return True
    mode = info.external_attr >> 16
    return (mode & 0o170000) == 0o120000  # symbolic link


_SHAPEFILE_PARTS = (".shp", ".shx", ".dbf", ".prj", ".cpg", ".qix", ".sbn", ".sbx", ".qpj")
_ZIPPED_LAYERS = (".shp", ".gpkg", ".geojson", ".json")


def _read_zipped_boundaries(raw: bytes, label: str) -> geopandas.GeoDataFrame:
    import geopandas as gpd

    try:
        zf = zipfile.ZipFile(io.BytesIO(raw))
        infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError) as err:
        raise InputError(
            f"{label} is a damaged ZIP file ({err}). Zip the shapefile's files again and upload "
            "the new archive."
        ) from err
    with zf:
        for info in infos:
            if _unsafe_member(info):
                raise InputError(
                    f"{label} contains a file with an unsafe path ('{info.filename}'); it was not "
                    "opened. Zip only the shapefile's own files (.shp, .shx, .dbf, .prj), without "
                    "absolute paths, '..' or links."
                )
        total = sum(i.file_size for i in infos)
        packed = sum(i.compress_size for i in infos)
        if total > MAX_ZIP_UNCOMPRESSED or (
            total > ZIP_RATIO_FLOOR and total > MAX_ZIP_RATIO * max(packed, 1)
        ):
            raise InputError(
                f"{label} would expand to {total / 1024**2:,.0f} MB from {packed / 1024**2:,.1f} MB "
                f"(limits: {MAX_ZIP_UNCOMPRESSED // 1024**3} GB and {MAX_ZIP_RATIO}x); it was not "
                "opened. Upload the boundary file itself, simplified if it is very large."
            )
        members = [
            i
            for i in infos
            if not i.is_dir()
            and not i.filename.startswith("__MACOSX/")
            and not PurePosixPath(i.filename).name.startswith("._")
        ]
        layers = [i for i in members if i.filename.lower().endswith(_ZIPPED_LAYERS)]
        if not layers:
            names = ", ".join(i.filename for i in members[:10]) or "nothing"
            raise InputError(
                f"{label} contains no shapefile (.shp) or other boundary file (it holds: {names}). "
                "Zip the .shp together with its .shx, .dbf and .prj files."
            )
        if len(layers) > 1:
            names = ", ".join(i.filename for i in layers[:10])
            raise InputError(
                f"{label} contains several boundary files ({names}). Upload one per zip file."
            )
        main = layers[0]
        stem = main.filename[: -len(PurePosixPath(main.filename).suffix)]
        needed = [main]
        if main.filename.lower().endswith(".shp"):
            needed = [
                i
                for i in members
                if i.filename[: -len(PurePosixPath(i.filename).suffix) or None] == stem
                and PurePosixPath(i.filename).suffix.lower() in _SHAPEFILE_PARTS
            ]
        with tempfile.TemporaryDirectory(prefix="dpcore-boundaries-") as tmp:
            root = Path(tmp)
            _extract(zf, needed, root, label)
            target = root / PurePosixPath(main.filename.replace("\\", "/"))
            return _read_vector(lambda: gpd.read_file(target), label)


def _extract(
    zf: zipfile.ZipFile, members: Iterable[zipfile.ZipInfo], root: Path, label: str
) -> None:
    """Extract members under root, counting real bytes against the declared sizes."""
    written_total = 0
    try:
        for info in members:
            dest = (root / PurePosixPath(info.filename.replace("\\", "/"))).resolve()
            if root.resolve() not in dest.parents:
                raise InputError(
                    f"{label} contains a file with an unsafe path ('{info.filename}'). Zip only "
                    "the shapefile's own files."
                )
            dest.parent.mkdir(parents=True, exist_ok=True)
            written = 0
            with zf.open(info) as fin, open(dest, "wb") as fout:
                while chunk := fin.read(1 << 20):
                    written += len(chunk)
                    written_total += len(chunk)
                    if written > info.file_size or written_total > MAX_ZIP_UNCOMPRESSED:
                        raise InputError(
                            f"{label} expands to more than it declares ('{info.filename}'); it "
                            "was not read. Zip the shapefile's files again and upload the archive."
                        )
                    fout.write(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as err:
        raise InputError(
            f"{label} could not be unzipped ({err}). Zip the shapefile's files again without "
            "a password and upload the new archive."
        ) from err


def _clean_boundaries(gdf: geopandas.GeoDataFrame, label: str) -> geopandas.GeoDataFrame:
    import geopandas as gpd
    import shapely

    if len(gdf) == 0:
        raise InputError(f"{label} has no features. Upload a boundary file with at least one area.")
    geometry = gdf.geometry
    present = (geometry.notna() & ~geometry.is_empty).to_numpy()
    if not present.any():
        raise InputError(
            f"{label} has {_plural(len(gdf), 'feature')} but none has a geometry. Export the "
            "boundaries again with their shapes."
        )
    gdf = gdf.loc[present].reset_index(drop=True)
    if gdf.crs is None:
        west, south, east, north = gdf.total_bounds
        if -180 <= west <= east <= 180 and -90 <= south <= north <= 90:
            gdf = gdf.set_crs(4326)
        else:
            raise InputError(
                f"{label} has no coordinate reference system and its coordinates (x {west:,.0f} "
                f"to {east:,.0f}, y {south:,.0f} to {north:,.0f}) are not longitude/latitude. "
                "Include the .prj file in the zip, or save the boundaries with a CRS (for "
                "example WGS84, EPSG:4326)."
            )
    elif not _is_wgs84(gdf.crs):
        try:
            gdf = gdf.to_crs(4326)
        except Exception as err:
            raise InputError(
                f"{label} uses a coordinate system ({gdf.crs}) that could not be converted to "
                f"longitude/latitude ({_first_line(err)}). Export it in WGS84 (EPSG:4326)."
            ) from err
    geoms = gdf.geometry.to_numpy()
    invalid = ~shapely.is_valid(geoms)
    if invalid.any():
        polygonal = np.isin(shapely.get_type_id(geoms), (3, 6))  # Polygon, MultiPolygon
        fixed = geoms.copy()
        poly_fix = invalid & polygonal
        other_fix = invalid & ~polygonal
        if poly_fix.any():
            fixed[poly_fix] = shapely.make_valid(
                geoms[poly_fix], method="structure", keep_collapsed=False
            )
        if other_fix.any():
            fixed[other_fix] = shapely.make_valid(geoms[other_fix])
        gdf = gdf.set_geometry(gpd.GeoSeries(fixed, crs=gdf.crs, index=gdf.index))
    if not np.all(np.isfinite(gdf.total_bounds)):
        raise InputError(
            f"{label} has coordinates that are not finite after conversion to longitude/"
            "latitude. Check its coordinate system and export it again."
        )
    return gdf


def boundary_bounds(gdf: geopandas.GeoDataFrame) -> tuple[float, float, float, float]:
    """West, south, east and north of the union of the boundaries, in degrees.

    Public when the boundary file is public: it depends on the geography only,
    never on the points.

    Parameters
    ----------
    gdf : geopandas.GeoDataFrame
        As returned by :func:`read_boundaries`; reprojected to EPSG:4326 if it
        is in another CRS.

    Returns
    -------
    (west, south, east, north) : tuple of float

    Raises
    ------
    InputError
        No geometry, or bounds that are not finite.
    """
    if gdf is None or len(gdf) == 0:
        raise InputError(
            "The boundary file has no areas, so it gives no bounds. Upload a boundary file "
            "with at least one area, or type the bounds."
        )
    if gdf.crs is not None and not _is_wgs84(gdf.crs):
        gdf = gdf.to_crs(4326)
    west, south, east, north = (float(v) for v in gdf.total_bounds)
    if not all(np.isfinite((west, south, east, north))):
        raise InputError(
            "The boundary file has no usable geometry, so it gives no bounds. Upload a "
            "boundary file with at least one area, or type the bounds."
        )
    return west, south, east, north
