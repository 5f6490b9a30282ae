"""Confidential O/D counts: trips aggregated per finest (origin, destination) pair.

:class:`ODCounts` reads trip rows (one per trip, optionally with a person id) or aggregated
``(origin, destination, count)`` rows, matches their codes to the finest areas of the public
hierarchies (:mod:`dpcore.flows.tree`) and sums them per pair.  With a person id every person
keeps at most ``m`` trips (the engines' rule, :func:`dpcore.data.engines.base.cap_groups`), which
is the contribution bound the sensitivities of Boninsegna & Silvestri ("Differentially private
release of hierarchical origin/destination data with a TopDown approach", PoPETs 2025 / arXiv
2024; Boninsegna & Silvestri 2025, Sec. 3) are computed for.  The counts and their fingerprint are confidential: only a
mechanism (:mod:`dpcore.flows.mechanisms`) turns them into something publishable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dpcore.data.code_tables import text_numbers
from dpcore.data.engines import base as _engine_rules
from dpcore.data.hierarchy import Hierarchy, plural, row_list
from dpcore.data.persons import canonical_id
from dpcore.errors import InputError, ParameterError, curator_only
from dpcore.flows.tree import _text, ancestors, check_pair, group_sum, leaf_lookup
from dpcore.privacy import near_match
from dpcore.privacy.noise import NoiseSource

__all__ = ["MAX_COUNT", "ODCounts", "trips_fingerprint"]

#: Largest total number of trips: counts are read as floats, which are exact up to 2⁵³.
MAX_COUNT = 2**53


@dataclass(frozen=True, eq=False)
class ODCounts:
    """Trip counts per finest (origin, destination) pair, sparse.  **Confidential.**

    ``origin``/``destination`` are finest-area indices into the two hierarchies, one entry per
    observed pair (sorted, unique), ``count`` > 0.  ``max_trips`` (m) and ``distinct`` describe
    the contribution bound the counts respect (m = 1: one trip per person).
    """

    origin_h: Hierarchy
    destination_h: Hierarchy
    origin: np.ndarray
    destination: np.ndarray
    count: np.ndarray
    max_trips: int = 1
    distinct: bool = True
    dropped_trips: int = 0
    #: Order-independent hash of the input rows (codes as canonical text), before any cap: the same
    #: trips re-encoded, reordered, gzipped, typed (Parquet), read by any engine or given as
    #: (origin, destination, count) rows hash the same,
    #: so a budget keyed by it cannot be reset by re-uploading.  Confidential-data derived: use it
    #: as a key only, never publish it.
    fingerprint: str = ""
    #: Whether a person column bounded each person's trips (then one person is protected, with
    #: ``max_trips`` trips at most; without one, every trip is taken to be a different person).
    persons: bool = False

    @property
    def total(self) -> int:
        return int(self.count.sum())

    @property
    def n_pairs(self) -> int:
        return int(self.count.size)

    def profile(self) -> near_match.Profile:
        """What near-identical trips are recognised by (issue 26 item 14; curator-side, stored only as
        keyed buckets): the origin levels, trips or persons, the total and the pairs with trips."""
        return near_match.counts_profile("flows", [*self.origin_h.levels, "persons" if self.persons else "trips"],
                                         self.count)

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        origin_h: Hierarchy,
        destination_h: Hierarchy | None = None,
        *,
        origin: str,
        destination: str,
        count: str | None = None,
        user: str | None = None,
        max_trips: int = 1,
        distinct: bool = True,
        noise: NoiseSource | None = None,
        fingerprint: bool = True,
    ) -> ODCounts:
        """Counts from trip rows (one per trip, optional person id) or from ``count`` rows.

        With ``user``, every person keeps at most ``max_trips`` trips (chosen at random with
        the rule of :func:`dpcore.data.engines.base.cap_groups`; with ``distinct`` a person's repeated
        pairs count once first).  ``noise`` is not used (kept for callers).  Without it,
        every trip is taken to be a different person (``max_trips`` must be 1).
        ``fingerprint=False`` leaves :attr:`fingerprint` empty (for a release charged to no budget, or
        one whose budget is keyed otherwise): hashing every pair is a large part of reading the trips.
        """
        destination_h = destination_h or origin_h
        check_pair(origin_h, destination_h)
        if not isinstance(df, pd.DataFrame) or df.empty:
            raise InputError("The trips table is empty. Give one row per trip, or origin, destination and count.")
        for col, what in ((origin, "origin"), (destination, "destination"), (count, "count"), (user, "person id")):
            if col is not None and col not in df.columns:
                raise InputError(
                    f"The trips table has no {what} column '{col}'. Its columns are: "
                    f"{', '.join(map(str, list(df.columns)[:20]))}."
                )
        m = int(max_trips)
        if m < 1:
            raise ParameterError("The most trips per person (m) must be at least 1.")
        if count is not None and user is not None:
            raise ParameterError("Give either a count column (aggregated pairs) or a person id (trip rows), not both.")
        if user is None and m != 1:
            raise ParameterError(
                "Without a person id every trip is a different person, so m must be 1. Name the person-id "
                "column to cap each person at m trips."
            )
        o = leaf_lookup(origin_h, df[origin], "origin")
        d = leaf_lookup(destination_h, df[destination], "destination")
        nd = destination_h.n_leaves
        key = o * nd + d
        dropped = 0
        if count is not None:
            w = _whole_counts(df, count)
        else:
            w = np.ones(len(df), dtype=np.int64)
            if user is not None:
                uid = canonical_id(df[user])
                bad = pd.isna(uid)
                if bad.any():
                    raise InputError(curator_only(f"The person id column '{user}' is empty in {row_list(bad)}. Fill it or drop those rows."))
                # the engines' rule (dpcore.data.engines.base.cap_groups): a person keeps the m trips
                # with the smallest md5(person, origin, destination); with ``distinct`` a repeated
                # pair counts once.  Order independent, so DuckDB and Spark keep the same trips.
                frame = pd.DataFrame({"u": uid, "o": _text(df[origin]).to_numpy(object),
                                      "d": _text(df[destination]).to_numpy(object)})
                kept = _engine_rules.cap_groups(frame, ["o", "d"], m, bool(distinct))
                ok = leaf_lookup(origin_h, kept["o"], "origin")
                dk = leaf_lookup(destination_h, kept["d"], "destination")
                dropped = int(len(df) - kept["count"].sum())
                key = ok * nd + dk
                w = kept["count"].to_numpy(dtype=np.int64)
        uniq, tot = group_sum(key, w)
        # before the cap (w is then all ones): the budget belongs to the trips, not to one sample
        fp = _trips_fingerprint(df[origin], df[destination], w if count is not None else None) if fingerprint else ""
        return cls(origin_h, destination_h, (uniq // nd).astype(np.int64), (uniq % nd).astype(np.int64),
                   tot, m, bool(distinct), dropped, fp, user is not None)

    @classmethod
    def from_code_counts(
        cls,
        cc: Any,
        origin_h: Hierarchy,
        destination_h: Hierarchy | None = None,
        *,
        max_trips: int = 1,
        distinct: bool = True,
        persons: bool = False,
    ) -> ODCounts:
        """Counts from an engine's :class:`~dpcore.data.engines.base.CodeCounts` over (origin,
        destination) codes: the same result as :meth:`from_frame` on the raw rows (the engines
        apply the same per-person cap), for inputs too large for memory."""
        destination_h = destination_h or origin_h
        check_pair(origin_h, destination_h)
        ko, kd = cc.keys
        f = cc.frame
        if f.empty:
            raise InputError("The trips table is empty. Give one row per trip, or origin, destination and count.")
        if float(f["count_all"].sum()) > MAX_COUNT:
            raise InputError(f"The trips add up to more than {MAX_COUNT:,}. Counts that large cannot be added exactly; "
                             "check the count column (is it really a count?).")
        o = leaf_lookup(origin_h, f[ko], "origin")
        d = leaf_lookup(destination_h, f[kd], "destination")
        nd = destination_h.n_leaves
        uniq, tot = group_sum(o * nd + d, f["count"].to_numpy(dtype=np.int64))
        fp = _trips_fingerprint(f[ko], f[kd], f["count_all"].to_numpy(dtype=np.int64))
        return cls(origin_h, destination_h, (uniq // nd).astype(np.int64), (uniq % nd).astype(np.int64),
                   tot, int(max_trips), bool(distinct), int(cc.n_capped), fp, bool(persons))

    def level(self, od: int, dd: int) -> tuple[np.ndarray, np.ndarray]:
        """True counts at origin depth ``od`` × destination depth ``dd``: (sorted keys, counts),
        key = origin index × (areas at dd) + destination index; only positive pairs."""
        cache = self.__dict__.setdefault("_level_cache", {})
        if (od, dd) not in cache:
            anc_o = self.__dict__.setdefault("_anc_o", ancestors(self.origin_h))
            anc_d = self.__dict__.setdefault("_anc_d", ancestors(self.destination_h))
            n_d = self.destination_h.sizes[dd]
            key = anc_o[od][self.origin] * n_d + anc_d[dd][self.destination]
            cache[(od, dd)] = group_sum(key, self.count)
        return cache[(od, dd)]

    def lookup(self, od: int, dd: int, o: np.ndarray, d: np.ndarray) -> np.ndarray:
        """True counts of the pairs ``(o[i], d[i])`` (0 where nobody travels)."""
        keys, c = self.level(od, dd)
        q = o * self.destination_h.sizes[dd] + d
        if keys.size == 0:
            return np.zeros(q.size, dtype=np.int64)
        pos = np.searchsorted(keys, q)
        pos_c = np.minimum(pos, keys.size - 1)
        return np.where(keys[pos_c] == q, c[pos_c], 0)


def _whole_counts(df: pd.DataFrame, count: str) -> np.ndarray:
    """The count column as whole numbers ≥ 0 (InputError naming the rows otherwise)."""
    c = text_numbers(df[count])
    bad = ~np.isfinite(c) | (c < 0) | (c != np.floor(c))
    if bad.any():
        raise InputError(
            curator_only(f"The count column '{count}' has {plural(int(bad.sum()), 'value')} that are not whole "
            f"numbers ≥ 0 ({row_list(bad)}). Fix or drop those rows.")
        )
    too_big = c > MAX_COUNT
    if too_big.any() or float(c.sum()) > MAX_COUNT:
        raise InputError(
            curator_only(f"The count column '{count}' adds up to more than {MAX_COUNT:,} trips"
            + (f" ({row_list(too_big)} alone exceed it)" if too_big.any() else "")
            + ". Counts that large cannot be added exactly; check the column (is it really a count?).")
        )
    return c.astype(np.int64)


def trips_fingerprint(df: pd.DataFrame, origin: str, destination: str, count: str | None = None) -> str:
    """The budget key :meth:`ODCounts.from_frame` gives the trips ``df`` (its :attr:`ODCounts.fingerprint`),
    without aggregating them: the key of a series' one-off budget needs only this.

    >>> df = pd.DataFrame({"o": ["01", "02", "01"], "d": ["02", "01", "02"], "n": [1, 4, 2]})
    >>> trips_fingerprint(df, "o", "d", "n") == trips_fingerprint(df.iloc[::-1], "o", "d", "n")
    True
    >>> trips_fingerprint(df, "o", "d", "n") == trips_fingerprint(df, "o", "d")
    False
    """
    w = _whole_counts(df, count) if count is not None else None
    return _trips_fingerprint(df[origin], df[destination], w)


def _trips_fingerprint(origin: Any, destination: Any, count: np.ndarray | None) -> str:
    """Hash of the multiset of trips: trips per (origin, destination) pair
    (:func:`dpcore.data.engines.base.codes_fingerprint`: codes as canonical text, so ``"01"`` in a
    CSV and ``1`` in a Parquet file are one area; pairs without trips left out).

    Person ids are left out on purpose: the same trips loaded with or without the person column
    (or with renamed ids) are the same people's data and must draw on one budget.
    """
    return _engine_rules.codes_fingerprint("trips", [origin, destination], count)
