"""read_code_table parses an ASCII CSV with pyarrow (issue 28 item 2): the frame is the one pandas
reads with ``dtype=str`` (missing-value words, quotes, blank lines, CRLF, chosen columns), and what
the two could read differently goes to pandas."""

from __future__ import annotations

import io
import random

import pandas as pd
import pytest
from pandas._libs.parsers import STR_NA_VALUES

from dpcore.data import code_tables
from dpcore.data.code_tables import PANDAS_NA_WORDS, read_code_table
from dpcore.errors import InputError

TOKENS = ["1", "01", "", "NA", "nan", "None", " x", "x ", '"q"', '"a,b"', 'a"b', '"a""b"', '""', "null",
          "-3", "1.0", "\t", '"x"y', "  ", "#N/A", "n/a", "N/A ", "'01"]


def test_missing_words_are_pandas_defaults() -> None:
    assert set(PANDAS_NA_WORDS) == set(STR_NA_VALUES)


def _pandas(raw: bytes, sep: str, usecols: list[str] | None) -> pd.DataFrame:
    df = pd.read_csv(io.BytesIO(raw), sep=sep, dtype=str, keep_default_na=True, usecols=usecols)
    df.columns = [str(c).strip() for c in df.columns]
    return df


def test_random_tables_read_as_pandas_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """600 small random tables: whatever path read_code_table takes, its frame is pandas' (or both
    refuse); most take pyarrow's."""
    taken = []
    inner = code_tables._arrow_read

    def spy(*a: object) -> object:
        out = inner(*a)  # type: ignore[arg-type]
        taken.append(out is not None)
        return out

    monkeypatch.setattr(code_tables, "_arrow_read", spy)
    rng = random.Random(5)
    for _ in range(600):
        ncol, sep = rng.randint(2, 4), rng.choice([",", ";", "\t", "|"])
        names = [rng.choice(["a", "b", " c", "d "]) + str(i) for i in range(ncol)]
        rows = [sep.join(rng.choice(TOKENS) for _ in range(ncol if rng.random() < 0.9 else rng.randint(1, ncol + 1)))
                for _ in range(rng.randint(1, 5))]
        nl = rng.choice(["\n", "\r\n", "\r"])
        text = nl.join([sep.join(names), *rows]) + (nl if rng.random() < 0.8 else "")
        if rng.random() < 0.1:
            text = text.replace(nl, nl + nl, 1)
        raw = text.encode()
        pick = [n.strip() for n in names[: rng.randint(1, ncol)]]
        try:
            want = _pandas(raw, sep, [n for n in names if n.strip() in pick])
        except (pd.errors.ParserError, ValueError):
            want = None
        try:
            got = read_code_table(raw, "t.csv", columns=lambda cols, pick=pick: pick)
        except InputError:
            got = None
        if want is None or want.empty:
            assert got is None, text
            continue
        assert got is not None, text
        pd.testing.assert_frame_equal(got, want)
    assert sum(taken) > len(taken) / 2


def test_what_pyarrow_could_read_otherwise_goes_to_pandas() -> None:
    lone_cr = b"a,b\r1,2\r\r3,4\r"
    assert code_tables._arrow_read(lone_cr, ",", ["a", "b"]) is None
    pd.testing.assert_frame_equal(read_code_table(lone_cr, "t.csv"), _pandas(lone_cr, ",", None))
    short = b"a,b\n1\n2,3\n"  # pandas fills the short row
    assert code_tables._arrow_read(short, ",", ["a", "b"]) is None
    assert read_code_table(short, "t.csv")["b"].isna().tolist() == [True, False]
    dup = b"a,a,b\n1,2,3\n"  # pandas renames the second 'a'
    assert read_code_table(dup, "t.csv").columns.tolist() == ["a", "a.1", "b"]
    latin = "a,b\nZürich,1\n".encode("latin-1")  # not ASCII: pandas on the decoded text
    assert read_code_table(latin, "t.csv")["a"].tolist() == ["Zürich"]
    with pytest.raises(InputError, match="data row 2 has 3 values"):
        read_code_table(b"a,b\n1,2\n3,4,5\n", "t.csv")


def test_gunzip_of_one_member_in_memory_and_the_stream_for_the_rest() -> None:
    """One gzip member is decompressed by zlib from memory; several members, zero padding, damage and
    bombs go through the capped stream: the same bytes, the same refusals."""
    import gzip

    from dpcore.data import text

    body = b"a,b\n" + b"".join(b"%d,%d\n" % (i, i * 7) for i in range(50_000))
    one = gzip.compress(body)
    assert text._gunzip_one_member(one) == body == text.gunzip_limited(one, "t.csv.gz")
    two = gzip.compress(body[:1000]) + gzip.compress(body[1000:])
    assert text._gunzip_one_member(two) is None and text.gunzip_limited(two, "t.csv.gz") == body
    padded = one + b"\0" * 16
    assert text._gunzip_one_member(padded) is None and text.gunzip_limited(padded, "t.csv.gz") == body
    for damaged in (one[:-9], one[:-4] + b"\0\0\0\0"):  # cut short; a wrong length in the trailer
        assert text._gunzip_one_member(damaged) is None
        with pytest.raises(InputError, match="damaged or incomplete gzip"):
            text.gunzip_limited(damaged, "t.csv.gz")
    bomb = gzip.compress(b"\0" * (text.ZIP_RATIO_FLOOR + text.MAX_ZIP_RATIO * 200_000))
    assert text._gunzip_one_member(bomb) is None
    with pytest.raises(InputError, match="expands to more than"):
        text.gunzip_limited(bomb, "t.csv.gz")
