"""Person ids and the per-person cap rule, the same in memory and in every engine.

With a user-id column each person's contribution is capped (DESIGN.md privacy rule 6).  Which
records are kept must not depend on the order of the file, so that the numpy path
(:func:`dpcore.data.domain.cap_user_contributions`) and the DuckDB and Spark engines
(:mod:`dpcore.data.engines`) keep exactly the same records:

* ids are compared as canonical text (:func:`canonical_id`): surrounding whitespace stripped, a
  whole number written without leading zeros, sign ``+`` or trailing ``.0``, ``True``/``true``
  one value;
* a person keeps the ``cap`` points with the smallest ``frac(lon * CAP_A + lat * CAP_B)``, ties
  broken by ``(lon, lat)`` (:func:`cap_mask_points`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpcore.data.text import WHITESPACE
from dpcore.errors import ParameterError

__all__ = [
    "CAP_A",
    "CAP_B",
    "NUMERIC_ID",
    "canonical_id",
    "cap_mask_points",
    "frac_key",
    "person_codes",
]

# Multipliers of the cap key frac(lon * A + lat * B) (irrational-looking, ~1e4: 1e-6 degrees,
# about 10 cm, moves the key by ~0.01, so the order is pseudo-random at the scale of metres).
CAP_A = 7919.0 * 1.6180339887498949
CAP_B = 6037.0 * 1.4142135623730951
NUMERIC_ID = r"[+-]?[0-9]{1,18}(\.0*)?"  # a whole number the canonical id rewrites


def frac_key(lon: np.ndarray, lat: np.ndarray, a: float, b: float) -> np.ndarray:
    """``frac(lon * a + lat * b)`` in IEEE double, as every engine computes it."""
    v = lon * a + lat * b
    return v - np.floor(v)


def canonical_id(values: pd.Series | np.ndarray) -> np.ndarray:
    """Person ids as canonical text (object array; None where missing or blank)."""
    s = pd.Series(values).reset_index(drop=True)
    if pd.api.types.is_bool_dtype(s.dtype):
        s = s.astype("string").str.lower()
    if pd.api.types.is_integer_dtype(s.dtype):
        out = s.astype("string")
    elif pd.api.types.is_float_dtype(s.dtype):
        whole = s.notna() & np.isfinite(s) & (s % 1 == 0) & (s.abs() < 1e18)
        out = s.astype("string")
        out[whole] = s[whole].astype("int64").astype("string")
    else:
        out = s.astype("string").str.strip(WHITESPACE)
        num = out.str.fullmatch(NUMERIC_ID).fillna(False).astype(bool)
        if num.any():
            out[num] = out[num].str.replace(r"\.0*$", "", regex=True).astype("int64").astype("string")  # vectorised
        boolean = out.str.lower().isin(["true", "false"]).fillna(False).astype(bool)
        if boolean.any():  # pandas reads True/true/TRUE as one boolean
            out[boolean] = out[boolean].str.lower()
    out = out.where(out.notna() & (out != ""), None)
    return out.astype(object).to_numpy()


def person_codes(values: pd.Series | np.ndarray) -> np.ndarray:
    """Integer codes of person ids: two records share a code iff their canonical ids are equal.
    Whole-number ids are factorized as numbers (text is only needed for other ids; 10 M int ids
    take 0.5 s this way and 10 s through text)."""
    a = np.asarray(values)
    if a.dtype.kind in "iu":
        return pd.factorize(a)[0]
    raw, uniq = pd.factorize(pd.Series(a, dtype=object))
    canon_text = canonical_id(np.asarray(uniq, dtype=object))
    if (raw < 0).any() or pd.isna(canon_text).any():
        # a missing id would silently join another person's records: the readers drop such rows first
        raise ParameterError("Some records have no person id. Drop them (or give each an id) before capping.")
    canon = pd.factorize(pd.Series(canon_text, dtype=object))[0]
    return canon[raw]


def cap_mask_points(codes: np.ndarray, lon: np.ndarray, lat: np.ndarray, cap: int) -> np.ndarray:
    """Keep, per person (``codes`` from :func:`person_codes`), the ``cap`` records with the smallest
    ``(frac key, lon, lat)``."""
    key = frac_key(lon, lat, CAP_A, CAP_B)
    order = np.lexsort((lat, lon, key, codes))
    return _rank_within(codes, order) < cap


def _rank_within(codes: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Rank (0-based) of every row within its group, in ``order``."""
    sc = codes[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sc)) + 1]
    run = np.diff(np.r_[starts, len(sc)])
    rank_sorted = np.arange(len(sc)) - np.repeat(starts, run)
    rank = np.empty_like(rank_sorted)
    rank[order] = rank_sorted
    return rank
