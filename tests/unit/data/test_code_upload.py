"""dpcore.data.code_tables.read_code_upload: the upload reader of the O/D Data step (moved out of the UI)."""

from __future__ import annotations

import gzip
import io

import pandas as pd
import pytest

from dpcore.data.code_tables import read_code_upload
from dpcore.errors import InputError


def test_codes_stay_text_plain_and_gzipped() -> None:
    data = b"origin,destination,count\n01,002,3\n"
    for raw in (data, gzip.compress(data)):
        df = read_code_upload(raw, "trips.csv")
        assert df.to_dict("list") == {"origin": ["01"], "destination": ["002"], "count": ["3"]}


@pytest.mark.parametrize("gz", [False, True])
def test_utf16_is_refused_with_the_fix(gz: bool) -> None:
    raw = "origin,destination\n1101,1102\n".encode("utf-16")
    with pytest.raises(InputError, match="t.csv is a UTF-16 text file. Save it as UTF-8"):
        read_code_upload(gzip.compress(raw) if gz else raw, "t.csv")


def test_control_characters_mean_not_text() -> None:
    raw = b"a,b\n" + b"1,\x01\x02\x03\x04\n" * 50
    with pytest.raises(InputError, match=r"is not a text \(CSV\) file"):
        read_code_upload(raw, "t.csv")
    # three control characters in a large text are tolerated (more than 1 % is not)
    ok = b"a,b\n" + b"1,2\n" * 200 + b"3,x\x01\x02\x03\n"
    assert len(read_code_upload(ok, "t.csv")) == 201


def test_one_column_is_a_code_list_or_refused() -> None:
    raw = b"block\n440010101001\n440010101002\n"
    df = read_code_upload(raw, "areas.csv", one_column=True)
    assert df["block"].tolist() == ["440010101001", "440010101002"]
    assert read_code_upload(gzip.compress(raw), "areas.csv.gz", one_column=True).equals(df)
    with pytest.raises(InputError, match="single column") as e:
        read_code_upload(raw, "trips.csv")
    assert "census table" in str(e.value)  # the error of read_code_table by default
    with pytest.raises(InputError, match=r"^trips.csv has a single column. Needs two\.$"):
        read_code_upload(raw, "trips.csv", single_column_fix="Needs two.")


def test_tables_without_rows_are_refused() -> None:
    with pytest.raises(InputError, match="header but no data rows"):
        read_code_upload(b"origin,destination\n", "t.csv")
    buf = io.BytesIO()
    pd.DataFrame({"origin": pd.Series([], dtype=str), "destination": pd.Series([], dtype=str)}).to_parquet(buf)
    with pytest.raises(InputError, match="t.parquet. has columns but no data rows"):
        read_code_upload(buf.getvalue(), "t.parquet")
    with pytest.raises(InputError, match="is empty"):
        read_code_upload(b"", "t.csv")
