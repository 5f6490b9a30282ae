"""dpcore.data.csv_safe.pandas_csv: the bytes of pandas' ``to_csv`` (the data users' files and the
area releases are written with it), whatever the frame holds: it writes them faster, never differently."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcore.data.csv_safe import pandas_csv

TEXT = st.text(st.sampled_from(list('ab1-=+@ ,"\r\n\t\'é>') + ["\u2028", "\uff1d"]), max_size=6)
FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64) | st.sampled_from([0.1, -0.0, 1e-05, 1e16, 3.0])


def expected(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False, lineterminator="\n").encode("utf-8")


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 6).flatmap(lambda n: st.tuples(
    st.lists(TEXT, min_size=n, max_size=n), st.lists(st.integers(-2**62, 2**62), min_size=n, max_size=n),
    st.lists(FLOATS, min_size=n, max_size=n))))
def test_the_same_bytes_as_pandas(cols: tuple[list, list, list]) -> None:
    text, ints, floats = cols
    df = pd.DataFrame({"code": pd.Series(text, dtype=object), "n": np.array(ints, dtype=np.int64),
                       "x": np.array(floats, dtype=np.float64), "label": pd.Series(text, dtype="string")})
    assert pandas_csv(df) == expected(df)


def test_frames_pyarrow_would_write_differently_are_written_by_pandas() -> None:
    base = pd.DataFrame({"a": [1, 2], "b": [0.5, np.nan]})
    for df in (base.assign(flag=[True, False]), base.assign(c=pd.Categorical(["x", "y"])),
               base.assign(d=pd.to_datetime(["2024-01-01", "2024-01-02"])), base.assign(f=np.float32([0.1, 0.2])),
               base.assign(m=pd.array([1, None], dtype="Int64")), base.assign(o=[1, "x"]),
               base.rename(columns={"a": "a,b"}), base[["a"]], pd.DataFrame({"s": ["", "x"]}),
               base.assign(t=["x\ry", "z"])):
        assert pandas_csv(df) == expected(df), df.dtypes


def test_a_plain_frame_is_written_without_pandas(monkeypatch) -> None:
    df = pd.DataFrame({"node": ["total>R1", "R1>R2"], "value": [14148, -3], "scale": [6.928203230275511, 0.1]})
    want = expected(df)

    def refuse(*args, **kwargs):
        raise AssertionError("written by pandas")

    monkeypatch.setattr(pd.DataFrame, "to_csv", refuse)
    assert pandas_csv(df) == want


def test_signed_zeros_and_mostly_distinct_floats_as_pandas_writes_them() -> None:
    """-0.0 stays "-0.0" (equal to 0.0, it once shared 0.0's text), on both the few-distinct-values
    path and the mostly-distinct path of long columns."""
    rng = np.random.default_rng(0)
    for n in (50, 10_000):
        df = pd.DataFrame({"i": np.arange(n), "few": np.round(rng.normal(size=n), 1),
                           "many": rng.normal(size=n) * 1000})
        df.loc[1, "few"], df.loc[2, "few"], df.loc[3, "many"] = -0.0, 0.0, np.nan
        assert pandas_csv(df) == df.to_csv(index=False, lineterminator="\n").encode("utf-8")


@pytest.mark.parametrize("numbers_as_text", [False, True])
def test_arrow_backed_text_is_escaped_and_written_as_object_text(numbers_as_text: bool) -> None:
    """A column of pandas' Arrow-backed text (pandas 3's ``str``) is checked and written from its
    Arrow array: the same bytes as the same column of Python strings, formulas escaped."""
    from dpcore.data.csv_safe import csv_bytes

    for vals in (["E1", "=1+2", None, "-3", "+A1"], ["E1", "a\n=cmd", "x,y", None, "-3"]):
        obj = pd.DataFrame({"code": pd.Series(vals, dtype=object), "n": [1, 2, 3, 4, 5]})
        arrow = obj.astype({"code": "string[pyarrow]"})
        want = csv_bytes(obj, pandas_csv, numbers_as_text=numbers_as_text)
        assert csv_bytes(arrow, pandas_csv, numbers_as_text=numbers_as_text) == want
        assert b"'=" in want


SIGNS_AND_SPACES = list("aZ09 /_>\t\r\n\v\f=+-@é") + ["\u0085", "\u00a0", "\u2000", "\u3000", "\ufeff", "\uff1d", "\uff0b",
                                                      "\uff0d", "\uff20"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(st.sampled_from(SIGNS_AND_SPACES), max_size=8), min_size=1, max_size=5))
def test_the_byte_check_passes_no_formula(cells: list[str]) -> None:
    """The quick test of a text column's bytes (csv_safe._plain_bytes) only clears columns in which
    no cell is a formula: the escaping never depends on it."""
    import pyarrow as pa

    from dpcore.data.csv_safe import _MASK, _plain_bytes

    if _plain_bytes(pa.array(cells)):
        assert not any(_MASK.search(c) for c in cells)


def test_the_byte_check_clears_plain_codes_and_only_them() -> None:
    """The quick test does clear plain text (so the property above checks something), reads a
    slice's own characters only, and sends every other text type to the full check."""
    import pyarrow as pa

    from dpcore.data.csv_safe import _plain_bytes

    assert _plain_bytes(pa.array(["R1/D2/Z07>R1/D2/Z08", "x", None]))
    assert _plain_bytes(pa.array(["ok", "=1"]).slice(0, 1)) and not _plain_bytes(pa.array(["ok", "=1"]).slice(1))
    assert _plain_bytes(pa.chunked_array([["a"], ["b"]])) and not _plain_bytes(pa.chunked_array([["a"], ["@x"]]))
    assert not _plain_bytes(pa.array(["=short"], pa.string_view()))
    assert not _plain_bytes(pa.array(["\uff1dSUM(A1)"])) and not _plain_bytes(pa.array(["a\tb"]))
