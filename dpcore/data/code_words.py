"""Budget keys of coded rows, second version: vectorised 64-bit words instead of one md5 per area.

:func:`dpcore.data.engines.base.codes_fingerprint` (``codes:v1``) hashes the canonical text of every
code combination with a positive total with md5, one Python call per combination: for a table of
8 million census blocks, about 5.6 million calls and a Python string per block, a tenth of the run.
This module keys the same content with the same additive multiset hash (Clarke, Devadas, van Dijk,
Gassend & Suh, "Incremental Multiset Hash Functions and Their Application to Memory Integrity
Checking", ASIACRYPT 2003, §3), with each element hashed by numpy instead:

* every code is a 64-bit **word**, a function of its canonical text
  (:func:`dpcore.data.persons.canonical_id`): a whole number of at most 18 digits is mixed as the
  number itself (:func:`mix`, a bijection, so no two such codes share a word), any other text is the
  first 8 bytes of its md5 (once per distinct text);
* a row's path of codes is chained level by level (``r = mix(r ^ word)``), the rows are grouped by
  that chain and their counts summed exactly, and each group with a positive total adds
  ``mix(r ^ mix(total))`` and a second mix of it to two sums mod 2**64 (numpy wraps).

Equal content gives equal words, chains and sums whatever the rows' order, types or encoding, as
for ``codes:v1``; two different contents share a key only by a 64-bit collision, which makes them
share one budget (the safe direction).  The words are not a cryptographic hash, which a budget key
does not need: it is hashed again (SHA-256) and then keyed with the install's secret before it is
stored (:meth:`dpcore.privacy.ledger_store.LedgerStore.key`).  Confidential-data derived: a key,
never published.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpcore.data.engines.base import canonical_codes, group_sums, number_values

__all__ = ["chained_keys", "code_words", "mix"]

_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_NUMBER = np.uint64(0x9E3779B97F4A7C15)  # domain of whole-number codes
_CHAIN = np.uint64(0x2545F4914F6CDD1D)  # the chain's start
_TOTAL = np.uint64(0x94D049BB133111EB)  # domain of the totals
_SECOND = np.uint64(0xBF58476D1CE4E5B9)  # the second lane
_DIGITS18 = 10**18


def mix(x: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser (Appleby 2011, ``fmix64``), element-wise on uint64: a
    bijection that spreads every input bit over the output.

    >>> mix(np.array([0, 1], dtype=np.uint64)).tolist()
    [0, 12994781566227106604]
    """
    x = np.asarray(x, dtype=np.uint64)
    x = x ^ (x >> _S33)
    x = x * _M1
    x ^= x >> _S33
    x *= _M2
    x ^= x >> _S33
    return x


def _text_words(texts: Sequence[str]) -> np.ndarray:
    """The words of canonical texts (see the module docstring), once per text given: the whole
    numbers mixed together in one call, every other text's md5 (one call each: md5 has no numpy form).

    >>> w = _text_words(["42", "x", "-7"])
    >>> bool(w[0] == code_words(np.array([42]))[0]), bool(w[2] == code_words(np.array([-7]))[0])
    (True, True)
    """
    texts = [str(t) for t in texts]
    out = np.empty(len(texts), dtype=np.uint64)
    numeric = np.fromiter(map(_is_number, texts), dtype=bool, count=len(texts))
    if numeric.any():
        values = np.array([texts[i] for i in np.flatnonzero(numeric)]).astype(np.int64)
        out[numeric] = mix(values.view(np.uint64) ^ _NUMBER)
    for i in np.flatnonzero(~numeric):
        out[i] = int.from_bytes(hashlib.md5(texts[i].encode("utf-8")).digest()[:8], "little")
    return out


def _is_number(t: str) -> bool:
    """Whether ``t`` is canonical text of a whole number with at most 18 digits (``-5``, ``0``, ``42``)."""
    d = t[1:] if t.startswith("-") else t
    return 0 < len(d) <= 18 and d.isascii() and d.isdigit() and (d == "0" or d[0] != "0") and t != "-0"


def code_words(values: Any) -> np.ndarray:
    """One uint64 word per row of a code column, a function of the row's canonical text
    (:func:`dpcore.data.engines.base.canonical_codes`; ``""`` where missing).  Whole numbers
    (integer columns, or text of ASCII digits as census GEOIDs are) are mixed as numbers with no
    text made; other columns are canonicalised once per distinct value.

    >>> a = code_words(pd.Series(["01", "1", "x", None]))
    >>> bool(a[0] == a[1]), bool(a[0] == code_words(np.array([1]))[0]), bool(a[2] == a[3])
    (True, True, False)
    """
    nums = number_values(values)
    if nums is not None and nums.dtype.kind == "u" and (not nums.size or int(nums.max()) < 2**63):
        nums = nums.astype(np.int64)
    if nums is not None and nums.dtype.kind == "i":
        big = np.abs(nums) >= _DIGITS18  # 19 digits and more: hashed as text, as the general path does
        words = mix(nums.view(np.uint64) ^ _NUMBER)
        if big.any():
            words[big] = _text_words([str(int(v)) for v in nums[big]])
        return words
    ids, texts = canonical_codes(values)
    return _text_words([str(t) for t in texts])[ids]


def chained_keys(tag: str, words: Sequence[np.ndarray], count: Any, paths: Sequence[int]) -> list[str]:
    """The ``codes:v2`` key of each path of leading code columns: ``paths`` gives the number of
    leading columns of each (``[2, 3]``: the first two columns, then the first three), ``words``
    the :func:`code_words` of every column, ``count`` the rows' whole counts (None: each row
    counts 1).  Rows are grouped by their chain of words and summed exactly; groups with a total
    of 0 are left out.

    >>> w = [code_words(pd.Series(["01", "01", "02"])), code_words(pd.Series(["001", "003", "001"]))]
    >>> k = chained_keys("table", w, [5, 0, 7], [1, 2])
    >>> w2 = [code_words(np.array([2, 1])), code_words(np.array([1, 1]))]
    >>> k == chained_keys("table", w2, [7, 5], [1, 2])          # typed, reordered, no empty row
    True
    """
    n = len(words[0]) if words else 0
    w = np.ones(n, dtype=np.int64) if count is None else np.asarray(count, dtype=np.int64)
    chain = np.full(n, _CHAIN, dtype=np.uint64)
    made: dict[int, str] = {}
    for depth in range(1, max(paths, default=0) + 1):
        chain = mix(chain ^ words[depth - 1])
        if depth in paths:
            made[depth] = _multiset_key(tag, depth, chain, w)
    return [made[p] for p in paths]


def _multiset_key(tag: str, depth: int, chain: np.ndarray, w: np.ndarray) -> str:
    """The key of the groups of equal ``chain`` with their summed counts ``w`` (positive only)."""
    group, uniq = pd.factorize(chain)
    totals = group_sums(group.astype(np.int64, copy=False), w, len(uniq))
    keep = totals > 0
    e1 = mix(np.asarray(uniq, dtype=np.uint64)[keep] ^ mix(totals[keep].view(np.uint64) ^ _TOTAL))
    e2 = mix(e1 ^ _SECOND)
    s1, s2 = int(e1.sum(dtype=np.uint64)), int(e2.sum(dtype=np.uint64))  # numpy wraps mod 2**64
    return hashlib.sha256(f"codes:v2:{tag}:{depth}:{int(keep.sum())}:{s1}:{s2}".encode()).hexdigest()[:16]
