"""The delivery journal: every charge knows whether its release reached the curator.

A charge comes before the noise (:meth:`dpcore.core.session.Session.release`), so a run killed, or
a disk filled, after the charge leaves budget spent and no files.  Killed CLI runs and app servers
did (issue 26, item 20).  The journal keeps, in the budget database, one row per charge made to be
delivered (table ``deliveries``):

* written **in the charge's own transaction** (state ``charged``, where its files go), so no charge
  made to be delivered exists without its row;
* given the release's id as soon as the release is made (``made``);
* ``stored`` once the release's files are kept in the database (the same transaction as
  :meth:`~dpcore.privacy.ledger_store.LedgerStore.record_release`): from then on it can be re-served,
  the same bytes, with no new noise and no new charge;
* ``delivered`` once its files are written whole to the curator's folder (or, in the app, stored:
  the app serves them from the database).

History (the app page and ``python -m dpcore history``) lists every charge whose row is not
``delivered`` as *charged, not delivered*, with its stored files to re-serve when there are any.

>>> import tempfile, pathlib
>>> from dpcore.privacy import budget
>>> from dpcore.privacy.ledger_store import LedgerStore
>>> store = LedgerStore(pathlib.Path(tempfile.mkdtemp()) / "l.sqlite")
>>> led = store.ledger(store.key("points", "fp"), budget.pure(1.0), "points")
>>> entry = led.spend(budget.pure(0.5), "a release", journal="folder out")
>>> [(d["state"], d["target"]) for d in undelivered(store, led.dataset)]
[('charged', 'folder out')]
>>> made(store, led.dataset, entry.index, "r1"); store.record_release(led.dataset, "r1", "points", {}, {"a.csv": b"1"})
>>> [d["state"] for d in undelivered(store, led.dataset)], delivered(store, "r1")
(['stored'], None)
>>> undelivered(store, led.dataset)
[]
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any

__all__ = ["JOURNAL_SCHEMA", "delivered", "journal_charge", "made", "stored", "undelivered"]

JOURNAL_SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    fingerprint TEXT NOT NULL,
    idx INTEGER NOT NULL,
    target TEXT NOT NULL,
    state TEXT NOT NULL,
    release_id TEXT,
    PRIMARY KEY (fingerprint, idx)
);
CREATE INDEX IF NOT EXISTS deliveries_by_release ON deliveries(release_id);
"""

#: The target of a release made in the app: stored in the database is delivered (History serves it).
APP = "app"


def journal_charge(con: sqlite3.Connection, key: str, idx: int, target: str) -> None:
    """Journal the charge ``idx`` of budget ``key`` inside its own transaction ``con``."""
    con.execute("INSERT OR REPLACE INTO deliveries VALUES (?, ?, ?, 'charged', NULL)", (key, int(idx), str(target)))


def made(store: Any, key: str, idx: int, release_id: str) -> None:
    """The charge ``idx`` of ``key`` made the release ``release_id`` (its files are not stored yet)."""
    with store.transaction() as con:
        con.execute("UPDATE deliveries SET state = 'made', release_id = ? WHERE fingerprint = ? AND idx = ? "
                    "AND state = 'charged'", (str(release_id), key, int(idx)))


def stored(con: sqlite3.Connection, release_id: str) -> None:
    """The files of ``release_id`` are kept in the database (inside record_release's transaction);
    for a release made in the app that is its delivery."""
    con.execute("UPDATE deliveries SET state = CASE WHEN target = ? THEN 'delivered' ELSE 'stored' END "
                "WHERE release_id = ? AND state IN ('charged', 'made')", (APP, str(release_id)))


def delivered(store: Any, release_id: str) -> None:
    """The files of ``release_id`` were written whole where they were meant to go."""
    with store.transaction() as con:
        con.execute("UPDATE deliveries SET state = 'delivered' WHERE release_id = ?", (str(release_id),))


def undelivered(store: Any, key: str | None = None) -> list[dict[str, Any]]:
    """Charges not delivered (of budget ``key``, or of every budget): ``key``, ``idx`` (the ledger
    entry), ``target``, ``state`` (``charged``, ``made``: nothing stored, nothing to re-serve;
    ``stored``: its files can be re-served) and ``release_id``."""
    where, args = ("WHERE state != 'delivered'" + (" AND fingerprint = ?" if key else "")), ((key,) if key else ())
    with contextlib.closing(store._connect()) as con:  # noqa: SLF001 - the store's own helper module
        try:
            rows = con.execute(f"SELECT fingerprint, idx, target, state, release_id FROM deliveries {where} "
                               "ORDER BY fingerprint, idx", args).fetchall()
        except sqlite3.OperationalError as e:  # a database no version with the journal has opened
            if "no such table" not in str(e):
                raise
            return []
    return [{"key": k, "idx": int(i), "target": t, "state": s, "release_id": r} for k, i, t, s, r in rows]
