"""One data set, several keys: aliases that lead every key of the same data to one budget.

A budget is keyed by a fingerprint of the data's content (:meth:`LedgerStore.key`), but one rule
cannot see every way the same people's data comes back: a census table keyed by its top level is
keyed by another level once an empty row adds or removes a code there; points keyed by their exact
coordinates get a new key from a file re-saved with 15 significant digits; an upgrade changes the
rule itself.  So data is keyed by **several** fingerprints (every level of a table, the points inside
the bounds and all of them, the rule of earlier versions), and the budget keeps all of them: a key
that matches any key of an existing budget draws on that budget (issue 26, items 11 and 12).

* :func:`adopt` is called when the data is loaded, before its budget is opened: it finds the budget
  that the data's main key or any of its other keys already leads to (the main key first, then the
  others in the order given) and records every key of the data without a budget of its own as an
  alias of it (table ``key_aliases``).
* :func:`resolve` is what :meth:`LedgerStore.data_key` applies: the budget key an alias leads to.

A key that has its own budget or population binding is never made an alias (its spends would stop
counting), and a recorded alias is never moved: two budgets are never merged, so matching more
keys can only make more data share a budget (the safe direction).  Aliases are keyed hashes like
every key (:meth:`LedgerStore.key`): they say nothing about the data without the install's secret.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from typing import Any

from dpcore.privacy.ledger import minute_now

__all__ = ["LEVEL_KEYS_V2", "adopt", "ensure", "is_new", "mark_level_keys_v2", "may_hold_v1_level_keys", "resolve"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS key_aliases (
    alias TEXT PRIMARY KEY,
    data_key TEXT NOT NULL,
    created TEXT NOT NULL
)
"""


def ensure(con: sqlite3.Connection) -> None:
    """Create the alias table (idempotent)."""
    con.execute(_SCHEMA)


#: The ``meta`` row of a database created by a version that keys a table's finer levels with
#: ``codes:v2`` (:mod:`dpcore.data.code_words`): no key of an earlier version can be in it.
LEVEL_KEYS_V2 = "level_keys_v2"


def is_new(con: sqlite3.Connection) -> bool:
    """Whether the database of ``con`` was never opened before: no check value (written when a
    database is first opened), no budget, binding or alias.  Ask before the check value is written."""
    def empty(table: str) -> bool:
        try:
            return con.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is None
        except sqlite3.OperationalError:  # no such table yet
            return True

    try:
        checked = con.execute("SELECT 1 FROM meta WHERE name = 'check'").fetchone() is not None
    except sqlite3.OperationalError:
        checked = False
    return not checked and all(empty(t) for t in ("datasets", "bindings", "key_aliases"))


def mark_level_keys_v2(con: sqlite3.Connection) -> None:
    """Note in a new database (:func:`is_new`) that every key in it is of this version."""
    con.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", (LEVEL_KEYS_V2, minute_now()))


def may_hold_v1_level_keys(store: Any) -> bool:
    """Whether the database may hold a table's finer-level keys of the earlier rule (``codes:v1``):
    true unless it was created by a version that keys them with ``codes:v2`` (:data:`LEVEL_KEYS_V2`).
    Only then does a table need its ``codes:v1`` level keys, whose md5 per area takes seconds for
    millions of census blocks, to find a budget opened under one of them."""
    with contextlib.closing(store._connect()) as con:  # noqa: SLF001 - the store's own connection settings
        try:
            row = con.execute("SELECT 1 FROM meta WHERE name = ?", (LEVEL_KEYS_V2,)).fetchone()
        except sqlite3.OperationalError:  # no meta table: a database of an earlier version
            return True
    return row is None


def _owns(con: sqlite3.Connection, key: str) -> bool:
    """Whether ``key`` has a budget or a population binding of its own."""
    return (con.execute("SELECT 1 FROM datasets WHERE fingerprint = ?", (key,)).fetchone() is not None
            or con.execute("SELECT 1 FROM bindings WHERE data_key = ?", (key,)).fetchone() is not None)


def _target(con: sqlite3.Connection, key: str) -> str | None:
    try:
        row = con.execute("SELECT data_key FROM key_aliases WHERE alias = ?", (key,)).fetchone()
    except sqlite3.OperationalError:  # no alias recorded in this database yet
        return None
    return str(row[0]) if row else None


def resolve(store: Any, key: str) -> str:
    """The key of the budget ``key`` leads to: its own, or the one it is an alias of."""
    with contextlib.closing(store._connect()) as con:  # noqa: SLF001 - the store's own connection settings
        return _target(con, key) or key


def adopt(store: Any, key: str, aliases: Sequence[str]) -> str:
    """Record the keys of one data set (``key`` its main key, ``aliases`` its others) and return the
    key of the budget they lead to.

    The budget is the one the first of ``key, *aliases`` with a budget, binding or alias leads to;
    when none has one, ``key`` (the budget opened next is then found by every key).  Every key of
    the data without a budget of its own becomes an alias of that budget, in one transaction.
    """
    keys = list(dict.fromkeys([str(key), *(str(a) for a in aliases if a)]))
    with store.transaction() as con:
        ensure(con)
        chosen = None
        for k in keys:
            if _owns(con, k):
                chosen = k
                break
            t = _target(con, k)
            if t is not None:
                chosen = t
                break
        chosen = chosen or str(key)
        now = minute_now()
        con.executemany("INSERT OR IGNORE INTO key_aliases VALUES (?, ?, ?)",
                        [(k, chosen, now) for k in keys if k != chosen and not _owns(con, k)])
    return chosen
