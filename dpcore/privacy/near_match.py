"""Near-identical data: ask whether it is the same population before a fresh budget (issue 26 item 14).

A content key finds the same data, not *almost* the same data: the same file minus one row is
other data to every key, and would get a fresh budget.  So each data set's budget keeps a
**profile** (its kind, its column names, its size and, for points, its extent; for counts over
areas and trips, the number of areas or pairs with a positive count), and data whose budget would
be new is compared with the profiles of the budgets that have been spent.  A close match (the same
kind and columns, the size and the number of areas within about 2 % each and each edge of the
extent within about 0.02°) is put to the curator, who answers once: the same population (the data then draws on
that budget, as one more key of it: :mod:`dpcore.privacy.key_aliases`) or other people (the data
keeps a budget of its own, and the pair is not asked about again).  The answer is recorded.

**Nothing about the data is published or stored plain.**  The profile is stored as keyed hashes
(:meth:`LedgerStore.key` under the install's secret, like every budget key) of coarse buckets: the
size's 1 % bucket and each edge's 0.01° cell, never a count or a coordinate.  A match is tested by
hashing the new data's neighbouring buckets.  The comparison runs on the curator's machine, before
any release; its only output is the question to the curator, who already holds both files, and no
release, record or export contains the profile or the answer.

>>> p = Profile("points", ("lat", "lon"), 1000, (-74.0, 40.6, -73.7, 40.9))
>>> [len(g) for g in buckets(p, spread=True)]
[1, 3, 3, 3, 3, 3]
>>> t = counts_profile("areas", ("state", "county", "pop"), [[5, 0], [7, 3]])
>>> (t.size, t.codes, [len(g) for g in buckets(t, spread=True)])
(15, 2, [1, 3, 3])
"""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dpcore.privacy import key_aliases
from dpcore.privacy.ledger import minute_now

__all__ = ["EXTENT_STEP", "SIZE_STEP", "Profile", "answer", "buckets", "counts_profile", "matches", "points_profile",
           "remember", "spent"]

#: The size bucket's relative width (1 %) and the extent's cell (0.01°): a match is within one of either.
SIZE_STEP = 0.01
EXTENT_STEP = 0.01

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS data_profiles (data_key TEXT PRIMARY KEY, tokens TEXT NOT NULL, created TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS identity_answers (data_key TEXT NOT NULL, other TEXT NOT NULL, same INTEGER NOT NULL, "
    "created TEXT NOT NULL, PRIMARY KEY (data_key, other))",
)


@dataclass(frozen=True)
class Profile:
    """What near-identical data is recognised by (curator-side, stored only as keyed buckets).

    ``kind`` the kind of data, ``columns`` the file's column names, ``size`` its rows (points) or
    total count (a table, trips), ``extent`` the points' (west, south, east, north) or None, ``codes``
    the number of areas (or origin/destination pairs) with a positive count, or None (points)."""

    kind: str
    columns: tuple[str, ...]
    size: int
    extent: tuple[float, float, float, float] | None = None
    codes: int | None = None


def points_profile(lon: Any, lat: Any, columns: Sequence[str | None]) -> Profile:
    """The profile of points: the coordinate (and person) column names, the number of points and
    their extent.  Curator-side: stored only as keyed buckets (:func:`remember`).

    >>> points_profile([-74.0, -73.9], [40.7, 40.8], ("lat", "lon", None)).extent
    (-74.0, 40.7, -73.9, 40.8)
    """
    import numpy as np

    x, y = np.asarray(lon, dtype=float), np.asarray(lat, dtype=float)
    extent = (float(x.min()), float(y.min()), float(x.max()), float(y.max())) if x.size else None
    return Profile("points", tuple(str(c) for c in columns if c), int(x.size), extent)


def counts_profile(kind: str, columns: Sequence[str | None], counts: Any) -> Profile:
    """The profile of counts over areas or trips (issue 26 item 14): the column names, the total count
    and the number of areas or pairs (rows of ``counts``, the true counts per finest area or pair,
    further axes summed) with a positive total.  Curator-side: stored only as keyed buckets.

    >>> counts_profile("flows", ("origin", "destination", None), [4, 0, 1]).codes
    2
    """
    import numpy as np

    c = np.asarray(counts, dtype=np.int64)
    per = c.reshape(c.shape[0], -1).sum(axis=1) if c.ndim > 1 else c
    return Profile(kind, tuple(str(x) for x in columns if x), int(c.sum()), None, int(np.count_nonzero(per > 0)))


def _bucket(n: int) -> int:
    """The 1 % (log) bucket of a whole number."""
    return math.floor(math.log(max(int(n), 1)) / math.log1p(SIZE_STEP))


def buckets(profile: Profile, *, spread: bool) -> list[list[str]]:
    """The profile's buckets as text, one group per feature: columns, size, then the number of areas
    or the extent's four edges; with ``spread`` each group also holds the neighbouring buckets (a match is within one)."""
    near = (-1, 0, 1) if spread else (0,)
    size = _bucket(profile.size)
    groups = [[f"{profile.kind}|columns|" + "\x1f".join(sorted(map(str, profile.columns)))],
              [f"{profile.kind}|size|{size + d}" for d in near]]
    if profile.codes is not None:
        groups.append([f"{profile.kind}|codes|{_bucket(profile.codes) + d}" for d in near])
    for name, v in zip(("west", "south", "east", "north"), profile.extent or (), strict=False):
        cell = math.floor(float(v) / EXTENT_STEP)
        groups.append([f"{profile.kind}|{name}|{cell + d}" for d in near])
    return groups


def _ensure(con: sqlite3.Connection) -> None:
    for stmt in _SCHEMA:
        con.execute(stmt)


def _keyed(store: Any, groups: list[list[str]]) -> list[list[str]]:
    return [[store.key("profile", b) for b in g] for g in groups]


def remember(store: Any, data_key: str, profile: Profile) -> None:
    """Keep the profile of the data whose budget is ``data_key`` (keyed hashes only)."""
    tokens = [g[0] for g in _keyed(store, buckets(profile, spread=False))]
    with store.transaction() as con:
        _ensure(con)
        con.execute("INSERT OR REPLACE INTO data_profiles VALUES (?, ?, ?)",
                    (data_key, json.dumps(tokens), minute_now()))


def matches(store: Any, data_key: str, profile: Profile) -> list[str]:
    """The spent budgets (keys) whose data closely matches ``profile`` and that the curator has not
    yet answered about for ``data_key``."""
    groups = [set(g) for g in _keyed(store, buckets(profile, spread=True))]
    with contextlib.closing(store._connect()) as con:  # noqa: SLF001 - the store's own connection settings
        _ensure(con)
        rows = con.execute("SELECT data_key, tokens FROM data_profiles WHERE data_key != ?", (data_key,)).fetchall()
        answered = {r[0] for r in con.execute("SELECT other FROM identity_answers WHERE data_key = ?", (data_key,))}
        found = []
        for other, text in rows:
            tokens = json.loads(text)
            if len(tokens) != len(groups) or not all(t in g for t, g in zip(tokens, groups, strict=True)):
                continue
            budget = store.resolve(key_aliases.resolve(store, other))
            spent = con.execute("SELECT 1 FROM spends WHERE fingerprint = ? LIMIT 1", (budget,)).fetchone()
            if spent and budget not in answered and budget != store.resolve(data_key):
                found.append(budget)
    return list(dict.fromkeys(found))


def spent(store: Any, key: str) -> bool:
    """Whether the budget ``key`` has been charged."""
    with contextlib.closing(store._connect()) as con:  # noqa: SLF001 - the store's own connection settings
        return con.execute("SELECT 1 FROM spends WHERE fingerprint = ? LIMIT 1", (key,)).fetchone() is not None


def answer(store: Any, data_key: str, others: Sequence[str], same: bool) -> None:
    """Record the curator's answer about ``data_key`` and the matched budgets ``others``: ``same``
    leads the data to the first of them (a budget it opened and never used but for its cap is retired
    into it, the lower cap kept: :func:`dpcore.privacy.key_aliases.adopt`);
    otherwise the data keeps its own budget and is not asked about these again."""
    with store.transaction() as con:
        _ensure(con)
        con.executemany("INSERT OR REPLACE INTO identity_answers VALUES (?, ?, ?, ?)",
                        [(data_key, o, int(same), minute_now()) for o in others])
    if same and others:
        key_aliases.adopt(store, others[0], [data_key])
