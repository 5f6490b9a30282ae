"""Tests of dpcore.data.tables.read_table on delimited text: formats, compression, encodings,
delimiters, damaged and binary files, row limits and progress reports. Bad files are built inside
the tests.
"""

from __future__ import annotations

import gzip
import io
import zipfile

import numpy as np
import pandas as pd
import pytest
from input_files import assert_actionable

from dpcore.data import tables
from dpcore.data.points import load_points, load_points_file
from dpcore.data.tables import read_table
from dpcore.data.text import SNIFF_BYTES
from dpcore.errors import DPCoreError, InputError, ParameterError


def csv_bytes(text: str) -> bytes:
    return text.encode("utf-8")


def test_errors_are_dpcore_errors():
    assert issubclass(InputError, DPCoreError)


@pytest.mark.parametrize("content", [b"", b"   \n\n  \r\n", b"\xef\xbb\xbf"])
def test_empty_file(content):
    with pytest.raises(InputError, match="empty") as err:
        read_table(content, "points.csv")
    assert_actionable(err, "'points.csv'")


def test_empty_gzip_file():
    with pytest.raises(InputError, match="empty") as err:
        read_table(gzip.compress(b""), "points.csv.gz")
    assert_actionable(err, "'points.csv.gz'")


@pytest.mark.parametrize("with_progress", [False, True])
def test_header_only(with_progress):
    progress = (lambda f, m: None) if with_progress else None
    with pytest.raises(InputError, match="has a header but no data rows") as err:
        read_table(b"lat,lon,name\n", "points.csv", progress=progress)
    assert_actionable(err, "'points.csv'")


def test_comma_csv_basic_types():
    df = read_table(csv_bytes("lat,lon,name\n40.7,-73.9,a\n40.8,-73.8,b\n"), "p.csv")
    assert list(df.columns) == ["lat", "lon", "name"]
    assert df["lat"].dtype == np.float64
    assert df["name"].tolist() == ["a", "b"]


def test_semicolon_sniffed():
    df = read_table(csv_bytes("lat;lon;name\n40.7;-73.9;a, b\n40.8;-73.8;c\n"), "p.csv")
    assert list(df.columns) == ["lat", "lon", "name"]
    assert df["name"].tolist() == ["a, b", "c"]


def test_semicolon_with_decimal_commas():
    # The European export: ';' between columns, ',' as the decimal mark.
    content = "Breite;Länge;lat;lon\n" + "".join(f"x;y;40,{i:04d};-73,{i:04d}\n" for i in range(20))
    df = read_table(content.encode("utf-8"), "europe.csv")
    assert list(df.columns) == ["Breite", "Länge", "lat", "lon"]
    table = load_points(df, "lat", "lon")
    assert table.n_kept == 20
    np.testing.assert_allclose(table.lat[:2], [40.0, 40.0001])
    np.testing.assert_allclose(table.lon[:2], [-73.0, -73.0001])


@pytest.mark.parametrize(
    ("sep", "name"), [("\t", "p.tsv"), ("\t", "p.txt"), ("|", "p.csv"), (",", "p.txt")]
)
def test_other_delimiters(sep, name):
    text = sep.join(["lat", "lon", "note"]) + "\n" + sep.join(["1.5", "2.5", "x y"]) + "\n"
    df = read_table(text.encode(), name)
    assert list(df.columns) == ["lat", "lon", "note"]
    assert df.loc[0, "lon"] == 2.5


def test_tsv_prefers_tab_when_commas_also_split():
    text = "lat\tlon\tnote\n1.5\t2.5\ta,b,c\n"
    df = read_table(text.encode(), "p.tsv")
    assert df.loc[0, "note"] == "a,b,c"


def test_unusual_delimiter_gives_one_column_error():
    with pytest.raises(InputError, match="only one column") as err:
        read_table(b"lat:lon\n40.7:-73.9\n40.8:-73.8\n", "colon.csv")
    msg = assert_actionable(err, "'colon.csv'", "lat:lon")
    assert "comma" in msg


def test_single_column_file():
    with pytest.raises(InputError, match="only one column") as err:
        read_table(b"latitude\n40.7\n40.8\n", "one.csv")
    assert_actionable(err, "'one.csv'", "latitude")


def test_ragged_rows():
    with pytest.raises(InputError, match="Data row 3 of 'ragged.csv' has 4 values") as err:
        read_table(b"lat,lon\n1,2\n3,4\n5,6,7,8\n", "ragged.csv")
    assert_actionable(err, "'lat,lon'")


def test_parse_error_beyond_the_sample():
    rows = b"1.5,2.5\n" * 10_000  # > SNIFF_BYTES, so the sniffer does not see the bad row
    with pytest.raises(InputError, match="could not be read as CSV") as err:
        read_table(b"lat,lon\n" + rows + b"5,6,7,8\n", "ragged.csv")
    assert_actionable(err, "'ragged.csv'", "data row 10001 has 4 values")


def test_unclosed_quote():
    with pytest.raises(InputError, match="could not be read as CSV") as err:
        read_table(b'lat,lon\n1,"2\n', "quote.csv")
    assert_actionable(err, "'quote.csv'", "quote")


def test_trailing_delimiters_do_not_shift_columns():
    df = read_table(b"lat,lon\n1.5,2.5,\n3.5,4.5,\n", "trailing.csv")
    assert list(df.columns) == ["lat", "lon"]
    assert df["lat"].tolist() == [1.5, 3.5]
    assert df["lon"].tolist() == [2.5, 4.5]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"Exported from X\nlat,lon,name\n1,2,a\n", "Data row 1 of 'wide.csv' has 3 values"),
        (b"lat,lon\n1,2,3,4\n5,6\n", "Data row 1 of 'wide.csv' has 4 values"),
    ],
)
def test_rows_wider_than_header(content, fragment):
    with pytest.raises(InputError, match=fragment) as err:
        read_table(content, "wide.csv")
    assert_actionable(err, "header", "delete those lines")


def test_header_names_stripped():
    df = read_table(b"lat , lon\n1,2\n", "p.csv")
    assert list(df.columns) == ["lat", "lon"]


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4


def _zip_with_csv() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("points.csv", "lat,lon\n1,2\n")
    return buf.getvalue()


@pytest.mark.parametrize(
    ("content", "looks_like"),
    [
        (PNG, "PNG"),
        (_zip_with_csv(), "ZIP"),
        (np.random.default_rng(0).bytes(4096), "binary"),
        (b"%PDF-1.7\n" + bytes(200), "PDF"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(100), "Excel"),
        (b"lat,lon\n1,2\n\x00\x00\x00\x01\x02", "binary"),
    ],
)
def test_binary_renamed_csv(content, looks_like):
    with pytest.raises(InputError, match="is not a text CSV file") as err:
        read_table(content, "x.csv")
    msg = assert_actionable(err, "'x.csv'", looks_like)
    assert "Export it as CSV with a header row, or upload Parquet/GeoJSON." in msg


def test_binary_inside_gzip():
    with pytest.raises(InputError, match="is not a text CSV file") as err:
        read_table(gzip.compress(PNG), "x.csv.gz")
    assert_actionable(err, "'x.csv.gz'", "PNG", "gzip")


def test_damaged_gzip():
    data = gzip.compress(b"lat,lon\n" + b"1.5,2.5\n" * 50_000)
    with pytest.raises(InputError, match="damaged or incomplete gzip") as err:
        read_table(data[: len(data) // 2], "cut.csv.gz")
    assert_actionable(err, "'cut.csv.gz'")


def test_latin1_text():
    content = "lat,lon,ville\n48.85,2.35,Orléans\n45.76,4.84,Besançon\n".encode("latin-1")
    df = read_table(content, "fr.csv")
    assert df["ville"].tolist() == ["Orléans", "Besançon"]


def test_latin1_after_the_sniffed_sample():
    ascii_rows = "".join(f"{40 + i / 1e5:.5f},-73.9,plain\n" for i in range(8000))
    content = ("lat,lon,name\n" + ascii_rows + "41.0,-73.0,Zoë\n").encode("latin-1")
    assert len(content) > SNIFF_BYTES
    df = read_table(content, "late.csv")
    assert len(df) == 8001
    assert df["name"].iloc[-1] == "Zoë"


def test_utf8_bom_and_utf16():
    df = read_table("\ufefflat,lon\n1,2\n".encode(), "bom.csv")
    assert list(df.columns) == ["lat", "lon"]
    df = read_table("lat\tlon\n1\t2\n".encode("utf-16"), "excel-unicode.txt")
    assert list(df.columns) == ["lat", "lon"]
    assert df.loc[0, "lon"] == 2


def test_gzip_csv(tmp_path):
    content = gzip.compress(b"lat,lon\n40.7,-73.9\n40.8,-73.8\n")
    df = read_table(content, "p.csv.gz")
    assert df.shape == (2, 2)
    # gzip content under a plain .csv name is still read
    df = read_table(content, "p.csv")
    assert df.shape == (2, 2)
    path = tmp_path / "p.csv.gz"
    path.write_bytes(content)
    assert read_table(path).shape == (2, 2)
    assert read_table(str(path)).shape == (2, 2)


def test_content_decides_without_extension():
    assert read_table(b"lat,lon\n1,2\n").shape == (1, 2)
    assert read_table(gzip.compress(b"lat,lon\n1,2\n"), "upload").shape == (1, 2)
    with pytest.raises(InputError, match="not a CSV, Parquet or GeoJSON") as err:
        read_table(PNG, "upload")
    assert_actionable(err, "'upload'", "PNG")


def test_file_object_with_name():
    buf = io.BytesIO(b"lat,lon\n1,2\n")
    buf.name = "uploaded.csv"
    table = load_points_file(buf)
    assert table.source_name == "uploaded.csv"
    assert table.n_kept == 1


def test_missing_path():
    with pytest.raises(InputError, match="File not found") as err:
        read_table("/nonexistent/dir/points.csv")
    assert_actionable(err, "points.csv")


def test_spreadsheet_and_gis_extensions():
    with pytest.raises(InputError, match="spreadsheet") as err:
        read_table(_zip_with_csv(), "book.xlsx")
    assert_actionable(err, "'book.xlsx'", "CSV")
    with pytest.raises(InputError, match="GIS file") as err:
        read_table(b"SQLite format 3\x00" + bytes(100), "pts.gpkg")
    assert_actionable(err, "'pts.gpkg'", "GeoJSON")


def test_max_rows_and_bad_max_rows():
    content = b"lat,lon\n" + b"1,2\n" * 100
    assert len(read_table(content, "p.csv", max_rows=7)) == 7
    with pytest.raises(ParameterError):
        read_table(content, "p.csv", max_rows=0)


def test_progress_reports_chunks(monkeypatch):
    monkeypatch.setattr(tables, "CSV_CHUNK_ROWS", 1000)
    content = gzip.compress(
        b"lat,lon\n" + b"".join(f"{i % 90}.5,{i % 180}.25\n".encode() for i in range(10_500))
    )
    calls: list[tuple[float, str]] = []
    df = read_table(content, "big.csv.gz", progress=lambda f, m: calls.append((f, m)))
    assert len(df) == 10_500
    fractions = [f for f, _ in calls]
    assert len(calls) >= 11  # start, one per chunk (11 chunks), end
    assert fractions[0] == 0.0 and fractions[-1] == 1.0
    assert all(0.0 <= f <= 1.0 for f in fractions)
    assert fractions == sorted(fractions)
    assert calls[-1][1] == "Read 'big.csv.gz'"  # neither rows nor bytes (fixed-width rows: bytes tell rows)
    assert all("kB" not in m and "MB" not in m for _, m in calls)
    # same table as without progress (chunks concatenated with a fresh index)
    pd.testing.assert_frame_equal(df, read_table(content, "big.csv.gz"))


def test_code_table_reads_the_chosen_columns_as_a_full_read_does() -> None:
    """``columns`` picks columns from the header (names stripped); they hold what a full read holds,
    and a header with a repeated name is read in full."""
    from dpcore.data.code_tables import read_code_table

    data = b"a, b ,c,d\n01,x,,3\n002,y,NA,4\n"
    full = read_code_table(data, "t.csv")
    seen: list[list[str]] = []
    part = read_code_table(data, "t.csv", columns=lambda names: seen.append(names) or ["b", "c"])
    assert seen == [["a", "b", "c", "d"]] and list(part.columns) == ["b", "c"]
    pd.testing.assert_frame_equal(part, full[["b", "c"]])
    assert list(read_code_table(data, "t.csv", columns=lambda names: None).columns) == ["a", "b", "c", "d"]
    dup = b"a,a,c\n1,2,3\n"
    assert list(read_code_table(dup, "t.csv", columns=lambda names: ["c"]).columns) == ["a", "a.1", "c"]
