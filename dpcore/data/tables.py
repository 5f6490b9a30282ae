"""Reading an uploaded table: CSV (also gzipped), Parquet (also GeoParquet) and GeoJSON points.

:func:`read_table` chooses the format from the name and checks it against the content, then
returns a :class:`pandas.DataFrame` with the types pandas infers.  The text checks it applies
(encoding, gzip limits, header) are those of :mod:`dpcore.data.text`.  Every problem a person
can fix raises :class:`~dpcore.errors.InputError` naming the file and saying what to do.
"""

from __future__ import annotations

import gzip
import io
import zlib
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dpcore.data.boundaries import geojson_problem, to_wgs84
from dpcore.data.limits import check_bytes
from dpcore.data.text import (
    SNIFF_BYTES,
    TEXT_LEAD,
    CappedGzip,
    DataSource,
    ProgressCallback,
    Source,
    binary_format,
    check_header_width,
    check_text_head,
    damaged_gzip,
    decode_sample,
    looks_like_json,
    parser_problem,
    sep_name,
    single_column_error,
    sniff_delimiter,
    text_encoding,
)
from dpcore.errors import InputError, ParameterError, curator_only, curator_only_if_numbered

__all__ = [
    "CSV_CHUNK_ROWS",
    "read_table",
]

if TYPE_CHECKING:
    import geopandas

#: Rows per chunk when a CSV is read with a progress callback.
CSV_CHUNK_ROWS = 1_000_000

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
    src = Source.from_data(data, filename)
    check_bytes(src.size, "DPCORE_MAX_TABLE_BYTES", src.label,
                "Open a large CSV or Parquet file with an engine (DuckDB) instead of reading it into memory.")
    if src.size == 0:
        raise InputError(
            f"{src.label} is empty (0 bytes). Upload the file again, or export it again "
            "with a header row and at least one data row."
        )
    head = src.head(1024)
    fmt = _format_from_name(src.name)
    magic = binary_format(head)
    json_like = looks_like_json(head)

    fmt = _checked_format(src, fmt, magic, json_like)
    if progress is not None:
        progress(0.0, f"Reading {src.label}")
    df = _read_as(src, fmt, magic, json_like, max_rows, progress)
    if progress is not None:
        progress(1.0, f"Read {src.label}")  # never its size or rows: logs are public (fixed-width rows)
    return df


def _checked_format(src: Source, fmt: str | None, magic: tuple[str, str] | None, json_like: bool) -> str:
    """The format to read ``src`` as: the name's (``fmt``), refused for spreadsheets, GIS files and
    compressed Parquet/GeoJSON, or, without a usable extension, the content's (:func:`read_table`)."""
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

    return fmt


def _read_as(src: Source, fmt: str, magic: tuple[str, str] | None, json_like: bool, max_rows: int | None,
             progress: ProgressCallback | None) -> pd.DataFrame:
    """Read ``src`` as ``fmt``, refusing content of another format (:func:`read_table`)."""
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
    return df


def _read_csv(
    src: Source,
    *,
    max_rows: int | None,
    progress: ProgressCallback | None,
    preferred_sep: str | None,
) -> pd.DataFrame:
    label = src.label
    head = src.head(SNIFF_BYTES)
    magic = binary_format(head)
    compressed = magic is not None and magic[0] == "gzip"
    if compressed:
        try:
            with src.open() as fh, gzip.GzipFile(fileobj=fh) as gz:
                sample = gz.read(SNIFF_BYTES)
        except (gzip.BadGzipFile, EOFError, zlib.error) as err:
            raise damaged_gzip(label, err) from err
    else:
        sample = head
    whole = len(sample) < SNIFF_BYTES
    if whole and not sample.strip(TEXT_LEAD):
        raise InputError(
            f"{label} is empty (it holds no text). Export it again with a header row "
            "and at least one data row."
        )
    encoding = text_encoding(sample, label, compressed)
    check_text_head(sample, label, whole=whole)
    text = decode_sample(sample, encoding, whole)
    sep = sniff_delimiter(text, preferred_sep)
    if sep is None:
        raise single_column_error(label, text)
    check_header_width(text, sep, label)

    def attempt(enc: str) -> pd.DataFrame:
        kwargs: dict[str, Any] = {
            "sep": sep,
            "encoding": enc,
            "compression": None,  # gzip: decompressed by CappedGzip (bomb guard)
            "low_memory": False,
            # Never turn the first column into the index: with the default, a file whose
            # rows end in a delimiter ('1,2,') would be read shifted by one column.
            "index_col": False,
        }
        with src.open() as fh:
            stream: IO[bytes] = (
                io.BufferedReader(CappedGzip(fh, label, src.size), 1 << 20) if compressed else fh
            )
            if progress is None:
                return pd.read_csv(stream, nrows=max_rows, **kwargs)
            chunks: list[pd.DataFrame] = []
            with pd.read_csv(stream, chunksize=CSV_CHUNK_ROWS, nrows=max_rows, **kwargs) as reader:
                for chunk in reader:
                    chunks.append(chunk)
                    fraction = fh.tell() / src.size if src.size else 1.0
                    progress(min(max(fraction, 0.0), 0.99), f"Reading {label}")  # the fraction, no bytes
            if not chunks:  # header only: keep the columns for the error message
                fh.seek(0)
                if compressed:
                    stream = io.BufferedReader(CappedGzip(fh, label, src.size), 1 << 20)
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
        raise InputError(
            f"{label} could not be read as CSV ({parser_problem(err)}). "
            f"Check that every row has as many values as the header, that values containing "
            f"{sep_name(sep)} are quoted, and that every quote is closed."
        ) from err
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise damaged_gzip(label, err) from err

    df = _strip_header(df)
    if df.shape[1] < 2:
        raise single_column_error(label, text)
    if len(df) == 0:
        raise InputError(
            f"{label} has a header but no data rows. Add the data below the header "
            "(one point per row) and upload it again."
        )
    return df


def _strip_header(df: pd.DataFrame) -> pd.DataFrame:
    stripped = [c.strip() if isinstance(c, str) else c for c in df.columns]
    if stripped != list(df.columns) and len(set(stripped)) == len(stripped):
        df.columns = stripped
    return df


def _read_parquet(src: Source, max_rows: int | None) -> pd.DataFrame:
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
            f"{label} could not be read as Parquet ({curator_only_if_numbered(str(err))}). Export it again as Parquet, "
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


def _read_geojson_points(src: Source, max_rows: int | None) -> pd.DataFrame:
    import geopandas as gpd

    label = src.label
    kwargs: dict[str, Any] = {} if max_rows is None else {"max_features": max_rows}
    raw = src.read_all()  # once: the error path words the problem from the same bytes
    try:
        gdf = gpd.read_file(io.BytesIO(raw), **kwargs)
    except Exception as err:  # pyogrio raises several types; all mean "cannot parse"
        # the parser's line and column in a private file tell its length (one feature a line)
        problem = curator_only_if_numbered(geojson_problem(raw, err), own=(label,))
        raise InputError(
            f"{label} could not be read as GeoJSON ({problem}). Check that "
            "it is a GeoJSON FeatureCollection of points, or upload it as CSV."
        ) from err
    return _points_frame(gdf, label)


def _points_frame(gdf: geopandas.GeoDataFrame, label: str) -> pd.DataFrame:
    """Longitude/latitude columns (EPSG:4326) of Point features, then the properties."""
    if len(gdf) == 0:
        raise InputError(
            f"{label} has no features (no data rows). Export it again with the points included."
        )
    if gdf.crs is not None:
        gdf = to_wgs84(gdf, label)
    types = gdf.geom_type
    other = types.notna() & (types != "Point")
    if other.any():
        counts = ", ".join(f"{n:,} {t}" for t, n in types[other].value_counts().items())
        raise InputError(
            curator_only(f"{label} has features that are not points ({counts}). Only Point features can "
            "be read as location points: convert them to points, or upload polygons as a "
            "boundary file.")
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


# --------------------------------------------------------------------------------------
