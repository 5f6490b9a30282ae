"""code_words: the words of a mixed-type code column are the same when its whole numbers are mixed in
one call (vectorised) as when they were mixed one at a time (the codes:v2 budget keys depend on them)."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from dpcore.data.code_words import code_words, mix
from dpcore.data.engines.base import canonical_codes


def _one_at_a_time(text: str) -> int:
    """The word of one canonical text, as code_words made it before it was vectorised."""
    d = text[1:] if text.startswith("-") else text
    if 0 < len(d) <= 18 and d.isascii() and d.isdigit() and (d == "0" or d[0] != "0") and text != "-0":
        return int(mix(np.array([int(text)], dtype=np.int64).view(np.uint64) ^ np.uint64(0x9E3779B97F4A7C15))[0])
    return int.from_bytes(hashlib.md5(text.encode("utf-8")).digest()[:8], "little")


def test_mixed_type_column_words_are_unchanged() -> None:
    values = pd.Series([1, "x", "007", -5, 10**19, "-0", "\u0663", None, "999999999999999999",
                        "1000000000000000000", "-999999999999999999", 44, "44", "tract 9", ""], dtype=object)
    ids, texts = canonical_codes(values)
    expected = np.array([_one_at_a_time(str(t)) for t in texts], dtype=np.uint64)[ids]
    got = code_words(values)
    assert got.dtype == np.uint64 and got.tolist() == expected.tolist()
    assert got[11] == got[12] == code_words(np.array([44]))[0]  # 44 and "44": one code
    assert len(set(got.tolist())) == len(texts)  # distinct canonical texts, distinct words
