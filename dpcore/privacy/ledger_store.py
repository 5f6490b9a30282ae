"""A persistent privacy-budget ledger and release history in an embedded SQLite database.

Why: a ledger that lives in a browser session resets when the page is reloaded, the app is
restarted or a second tab is opened, and a curator could then spend the same dataset's budget
again.  Here the ledger of a dataset is keyed by a fingerprint of the dataset's *content* (the
same data re-uploaded, under any file name, finds the same budget) and lives in one SQLite
file shared by every session and process of the app on this machine.

* Location: ``$DPCORE_LEDGER_DB`` if set, else ``$XDG_DATA_HOME/dpcore/ledger.sqlite``
  (``~/.local/share/dpcore/ledger.sqlite``).
* Every check-and-spend runs in one ``BEGIN IMMEDIATE`` transaction after reloading the
  ledger from the file, so two tabs, two sessions or two processes spending at once can never
  pass the cap between them (SQLite's write lock serialises them; the loser re-reads the new
  total and is refused if it no longer fits).
* Stored releases keep their export files (CSV, GeoJSON, JSON record) as they were published,
  so the history page can offer them again without recomputing or spending anything.  They
  hold only what was exported (noisy outputs and public parameters), never true counts.

SQLite is the standard library's embedded database: no server, safe for concurrent readers and
serialised writers with a busy timeout.  The ledger arithmetic is :class:`dpcore.privacy.budget.Ledger`'s,
unchanged: :class:`StoredLedger` only reloads its state from the file before every operation
and writes it back inside the same transaction.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpcore.errors import DPCoreError, InputError
from dpcore.privacy.budget import Ledger, LedgerEntry, PrivacyCost

__all__ = ["LedgerStore", "StoredLedger", "default_path", "default_store"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS datasets (
    fingerprint TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    cap TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS spends (
    fingerprint TEXT NOT NULL REFERENCES datasets(fingerprint),
    idx INTEGER NOT NULL,
    entry TEXT NOT NULL,
    PRIMARY KEY (fingerprint, idx)
);
CREATE TABLE IF NOT EXISTS releases (
    release_id TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    kind TEXT NOT NULL,
    created TEXT NOT NULL,
    summary TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS release_files (
    release_id TEXT NOT NULL REFERENCES releases(release_id),
    name TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (release_id, name)
);
CREATE INDEX IF NOT EXISTS releases_by_dataset ON releases(fingerprint, created);
"""


def default_path() -> Path:
    """``$DPCORE_LEDGER_DB``, else ``$XDG_DATA_HOME/dpcore/ledger.sqlite``."""
    env = os.environ.get("DPCORE_LEDGER_DB")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "dpcore" / "ledger.sqlite"


class LedgerStore:
    """One SQLite file of ledgers and stored releases."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as con:
                con.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as e:
            raise DPCoreError(
                f"Cannot open the budget database at {self.path}: {e}. Set DPCORE_LEDGER_DB to a writable "
                "file path (the budget must be kept somewhere that survives restarts)."
            ) from None

    def _connect(self, check_same_thread: bool = True) -> sqlite3.Connection:
        # autocommit mode (isolation_level=None): transactions are explicit BEGIN IMMEDIATE
        con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=check_same_thread)
        con.execute("PRAGMA foreign_keys = ON")
        return con

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """An exclusive-for-writes transaction: committed on success, rolled back on any error."""
        con = self._connect()
        try:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
        finally:
            con.close()

    # -- ledgers ----------------------------------------------------------------------------
    def ledger(self, fingerprint: str, default_cap: PrivacyCost, kind: str = "") -> StoredLedger:
        """The ledger of the dataset with this content fingerprint (created with ``default_cap``)."""
        return StoredLedger(self, str(fingerprint), default_cap, kind)

    def has_ledger(self, fingerprint: str) -> bool:
        with contextlib.closing(self._connect()) as con:
            return con.execute("SELECT 1 FROM datasets WHERE fingerprint = ?", (fingerprint,)).fetchone() is not None

    # -- releases ---------------------------------------------------------------------------
    def record_release(self, fingerprint: str, release_id: str, kind: str, summary: Mapping[str, Any],
                       files: Mapping[str, bytes]) -> None:
        """Keep a release's exported files (as published) for the history page.

        ``summary`` is public (mechanism, budget, parameters); ``files`` are the exports.
        Recording the same release twice keeps the first copy.
        """
        created = datetime.now(UTC).isoformat(timespec="seconds")
        with self.transaction() as con:
            if con.execute("SELECT 1 FROM releases WHERE release_id = ?", (release_id,)).fetchone():
                return
            con.execute("INSERT INTO releases VALUES (?, ?, ?, ?, ?)",
                        (release_id, fingerprint, kind, created, json.dumps(dict(summary), default=str)))
            con.executemany("INSERT INTO release_files VALUES (?, ?, ?)",
                            [(release_id, str(n), sqlite3.Binary(bytes(d))) for n, d in files.items()])

    def releases(self, fingerprint: str) -> list[dict[str, Any]]:
        """Stored releases of a dataset, newest first: id, kind, created, summary, file names."""
        with contextlib.closing(self._connect()) as con:
            rows = con.execute("SELECT release_id, kind, created, summary FROM releases WHERE fingerprint = ? "
                               "ORDER BY created DESC, rowid DESC", (fingerprint,)).fetchall()
            out = []
            for rid, kind, created, summary in rows:
                names = [n for (n,) in con.execute(
                    "SELECT name FROM release_files WHERE release_id = ? ORDER BY rowid", (rid,))]
                out.append({"release_id": rid, "kind": kind, "created": created,
                            "summary": json.loads(summary), "files": names})
            return out

    def release_file(self, release_id: str, name: str) -> bytes:
        with contextlib.closing(self._connect()) as con:
            row = con.execute("SELECT data FROM release_files WHERE release_id = ? AND name = ?",
                              (release_id, name)).fetchone()
        if row is None:
            raise InputError(f"There is no stored file {name!r} for release {release_id}.")
        return bytes(row[0])


class StoredLedger(Ledger):
    """A :class:`~dpcore.privacy.budget.Ledger` whose state lives in a :class:`LedgerStore`.

    Every read reloads the cap and the entries from the file, and every change (spend, new
    cap) reloads, applies :class:`Ledger`'s own checks and writes back inside one
    ``BEGIN IMMEDIATE`` transaction, so what another tab or process spent is always counted.
    """

    def __init__(self, store: LedgerStore, fingerprint: str, default_cap: PrivacyCost, kind: str = "") -> None:
        super().__init__(default_cap, dataset=fingerprint)
        # re-entrant: Ledger's refusal message reads ``definition`` while holding the lock, and
        # every read here reloads under the same lock
        self._lock = threading.RLock()
        self._store = store
        self._fp = fingerprint
        # one read connection per ledger object; PRAGMA data_version changes whenever another
        # connection (a spend here, another tab, another process) commits, so reads reload only
        # then (a page run reads the ledger a dozen times; reloading each time cost 0.2-1.3 ms
        # per read and a connection per read)
        self._read = store._connect(check_same_thread=False)
        self._version: int | None = None
        if not store.has_ledger(fingerprint):
            with store.transaction() as con:
                con.execute("INSERT OR IGNORE INTO datasets VALUES (?, ?, ?, ?)",
                            (fingerprint, kind, json.dumps(self._check_cap(default_cap).to_dict()),
                             datetime.now(UTC).isoformat(timespec="seconds")))
        self._refresh()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self._read.close()

    # -- sync -------------------------------------------------------------------------------
    def _load(self, con: sqlite3.Connection) -> None:
        row = con.execute("SELECT cap FROM datasets WHERE fingerprint = ?", (self._fp,)).fetchone()
        if row is None:  # pragma: no cover - created in __init__ and never deleted
            raise InputError("This dataset's budget record has disappeared from the budget database.")
        cap = PrivacyCost.from_dict(json.loads(row[0]))
        entries = [LedgerEntry.from_dict(json.loads(e)) for (e,) in con.execute(
            "SELECT entry FROM spends WHERE fingerprint = ? ORDER BY idx", (self._fp,))]
        spent = sum((Fraction(e.charged) for e in entries), Fraction(0))
        with self._lock:
            self._cap, self._entries, self._spent = cap, entries, spent

    def _refresh(self) -> None:
        with self._lock:
            version = self._read.execute("PRAGMA data_version").fetchone()[0]
            if version != self._version:
                self._load(self._read)
                self._version = version

    # -- reads reload first -----------------------------------------------------------------
    @property
    def cap(self) -> PrivacyCost:
        self._refresh()
        return self._cap

    @property
    def definition(self) -> str:
        self._refresh()
        return self._cap.definition

    @property
    def spent(self) -> float:
        self._refresh()
        return super().spent

    @property
    def remaining(self) -> float:
        self._refresh()
        return super().remaining

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        self._refresh()
        return super().entries

    def check(self, cost: PrivacyCost) -> None:
        self._refresh()
        super().check(cost)

    def to_dict(self) -> dict[str, Any]:
        self._refresh()
        return super().to_dict()

    # -- writes in one transaction ------------------------------------------------------------
    def spend(self, cost: PrivacyCost, label: str, details: Mapping[str, Any] | None = None) -> LedgerEntry:
        with self._lock, self._store.transaction() as con:
            self._load(con)
            entry = super().spend(cost, label, details)
            try:
                con.execute("INSERT INTO spends VALUES (?, ?, ?)",
                            (self._fp, entry.index, json.dumps(entry.to_dict())))
            except BaseException:
                self._load(con)  # the transaction rolls back: forget the in-memory charge too
                raise
            return entry

    def set_cap(self, cap: PrivacyCost) -> None:
        with self._lock, self._store.transaction() as con:
            self._load(con)
            super().set_cap(cap)
            con.execute("UPDATE datasets SET cap = ? WHERE fingerprint = ?", (json.dumps(cap.to_dict()), self._fp))


_DEFAULT: dict[Path, LedgerStore] = {}
_DEFAULT_LOCK = threading.Lock()


def default_store() -> LedgerStore:
    """The store at :func:`default_path` (one object per path and process)."""
    path = default_path()
    with _DEFAULT_LOCK:
        if path not in _DEFAULT:
            _DEFAULT[path] = LedgerStore(path)
        return _DEFAULT[path]
