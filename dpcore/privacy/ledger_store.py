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
  Files are kept Zstandard-compressed (RFC 8878, level 1, through pyarrow; the CSV and GeoJSON of
  a release shrink about three- to tenfold) with a CRC-32 of the published bytes, and read back as
  published (a damaged file is refused); rows stored gzip-compressed
  or uncompressed by earlier versions read as they are.  The curator may remove old release files
  (:meth:`LedgerStore.remove_release_files`) to reclaim space: the budget entries stay, and a
  removed file is listed as removed, never served.

* **Keys.** A population's key is ``HMAC-SHA256(secret, kind:fingerprint)`` (:meth:`LedgerStore.key`)
  with a per-install secret kept beside the database (``ledger.sqlite.key``, readable by its owner
  only).  A content fingerprint is a hash of the data, so a stored plain fingerprint would let
  whoever reads the database test guesses about the data (say, one person's location); the keyed
  hash does not without the secret.  The key file also holds a check value of the secret and the
  id of its database, both also stored in the database, so a replaced key file or an emptied or
  deleted database is refused instead of opening fresh budgets (:mod:`dpcore.privacy.ledger_keyfile`);
  every SQLite fault is a :class:`~dpcore.errors.StorageError` naming the fix
  (:mod:`dpcore.privacy.ledger_errors`).  Budgets stored under a plain key by earlier versions move to
  their keyed name the first time they are opened.  The key kinds are the kinds of data,
  ``points``, ``areas`` (hierarchy and census releases of one table share a budget) and ``flows``;
  a budget stored under an earlier version's key kind (``census``, ``od``: :data:`LEGACY_KINDS`)
  moves to its new key, with its spends, releases and binding, the first time it is opened.
* **Populations.** Data sets that come from the same people (points, trips and census tables of
  one survey) can be bound to one named population (:meth:`LedgerStore.bind`); their releases then
  draw on one budget.  A data set is bound before its first release, and for good.
* **Files** are created readable and writable by their owner only (mode 0600).

SQLite is the standard library's embedded database: no server, safe for concurrent readers and
serialised writers with a busy timeout.  The ledger arithmetic is :class:`dpcore.privacy.ledger.Ledger`'s,
unchanged: :class:`StoredLedger` only reloads its state from the file before every operation
and writes it back inside the same transaction.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import hashlib
import hmac
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import weakref
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpcore.errors import BudgetError, DPCoreError, InputError, StorageError
from dpcore.privacy import budget_groups, key_aliases
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.ledger import CapChange, Ledger, LedgerEntry, minute_now
from dpcore.privacy.ledger_errors import connect, damaged, storage_error
from dpcore.privacy.ledger_journal import JOURNAL_SCHEMA, journal_charge
from dpcore.privacy.ledger_journal import stored as journal_stored
from dpcore.privacy.ledger_keyfile import mark_budgets, open_secret
from dpcore.privacy.units import Unit, population_needs_persons

__all__ = ["LedgerStore", "StoredLedger", "default_path", "default_store"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS datasets (
    fingerprint TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    cap TEXT NOT NULL,
    created TEXT NOT NULL,
    unit TEXT
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
    encoding TEXT,
    size INTEGER,
    removed TEXT,
    PRIMARY KEY (release_id, name)
);
CREATE INDEX IF NOT EXISTS releases_by_dataset ON releases(fingerprint, created);
CREATE TABLE IF NOT EXISTS cap_changes (
    fingerprint TEXT NOT NULL REFERENCES datasets(fingerprint),
    idx INTEGER NOT NULL,
    change TEXT NOT NULL,
    PRIMARY KEY (fingerprint, idx)
);
CREATE TABLE IF NOT EXISTS bindings (
    data_key TEXT PRIMARY KEY,
    population TEXT NOT NULL,
    name TEXT NOT NULL
);
"""

#: Prefix of keyed (HMAC) population keys; keys without it are plain keys of earlier versions.
KEY_PREFIX = "k1:"

#: The key kinds of budgets: the kinds of data.  Earlier versions keyed area data ``census`` and
#: trips ``od``; a budget under such a key moves to the new key when it is opened.
LEGACY_KINDS: dict[str, tuple[str, ...]] = {"points": (), "areas": ("census",), "flows": ("od",)}


def _private_file(path: Path) -> None:
    """Create ``path`` (if missing) readable and writable by its owner only, and make it so."""
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    os.close(fd)
    os.chmod(path, 0o600)



def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def default_path() -> Path:
    """``$DPCORE_LEDGER_DB``, else ``$XDG_DATA_HOME/dpcore/ledger.sqlite``."""
    env = os.environ.get("DPCORE_LEDGER_DB")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "dpcore" / "ledger.sqlite"


class LedgerStore:
    """One SQLite file of ledgers and stored releases.

    ``temporary`` is True for a store made by :meth:`temporary_store` (removed with the object).
    """

    temporary = False

    @classmethod
    def temporary_store(cls) -> LedgerStore:
        """A store in a private temporary directory, removed when the object is collected.

        For budgets that must *not* outlive their holder, e.g. the app's made-up demo data, whose
        budget lives with the browser session: the same SQLite code paths as the persistent
        store (transactions, keys, populations, stored releases), nothing kept afterwards.
        """
        folder = tempfile.mkdtemp(prefix="dpcore-session-")
        store = cls(Path(folder) / "ledger.sqlite")
        store.temporary = True
        weakref.finalize(store, shutil.rmtree, folder, True)
        return store

    #: Called with a one-line notice when a write waits for another process's lock (default: stderr).
    on_wait: Callable[[str], None] | None = None

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.key_path = self.path.with_name(self.path.name + ".key")
        #: seconds a write waits for another process's lock before it is refused (a notice says it waits)
        self.timeout = float(os.environ.get("DPCORE_LEDGER_TIMEOUT") or 30.0)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _private_file(self.path)
        except OSError as e:
            raise StorageError(
                f"Cannot create the budget database at {self.path}: {e.strerror or e}. Make its folder writable, or "
                "set DPCORE_LEDGER_DB to a writable file path (the budget must be kept somewhere that survives "
                "restarts).") from None
        with contextlib.closing(self._connect()) as con:
            # one transaction: a new database's nine tables in one commit (one journal and sync) instead
            # of one each, a third of the CPU of a new store (the app makes one per browser session for
            # the demo data); on an existing database the IF NOT EXISTS statements write nothing
            con.executescript("BEGIN;" + _SCHEMA + JOURNAL_SCHEMA + "COMMIT;")
            # databases of earlier versions lack columns a new one is made with: added here, once
            if "unit" not in {r[1] for r in con.execute("PRAGMA table_info(datasets)")}:
                con.execute("ALTER TABLE datasets ADD COLUMN unit TEXT")
            # columns added without a migration: rows of earlier versions read as uncompressed
            # (encoding NULL), of their stored length (size NULL) and not removed (removed NULL)
            have = {r[1] for r in con.execute("PRAGMA table_info(release_files)")}
            for column, decl in (("encoding", "TEXT"), ("size", "INTEGER"), ("removed", "TEXT")):
                if column not in have:
                    con.execute(f"ALTER TABLE release_files ADD COLUMN {column} {decl}")
        try:
            with self.transaction() as con:  # one process at a time makes or upgrades the key file
                new = key_aliases.is_new(con)
                self._secret, self._budgets_marked = open_secret(con, self.path, self.key_path)
                if new:  # every key this database will hold is of this version (codes:v2 level keys)
                    key_aliases.mark_level_keys_v2(con)
        except OSError as e:
            raise StorageError(f"Cannot read or write the budget key file {self.key_path}: {e.strerror or e}. "
                               "Check its permissions (it must stay beside the database).") from None

    def _mark_budgets(self) -> None:
        """Note in the key file, before a first budget is written, that budgets exist (item 18)."""
        if not self._budgets_marked:
            mark_budgets(self.key_path)
            self._budgets_marked = True

    # -- keys -------------------------------------------------------------------------------
    def key(self, kind: str, fingerprint: str) -> str:
        """The population key of a data set: HMAC-SHA256 of ``kind:fingerprint`` under this
        install's secret (a stored key tells nothing about the data without the secret)."""
        mac = hmac.new(self._secret, f"{kind}:{fingerprint}".encode(), hashlib.sha256).hexdigest()
        return KEY_PREFIX + mac

    def population_key(self, name: str) -> str:
        """The key of a named population (:meth:`bind`)."""
        return self.key("population", str(name).strip())

    def resolve(self, data_key: str) -> str:
        """The key whose budget a data set draws on: its population's when bound, else its own."""
        with contextlib.closing(self._connect()) as con:
            row = con.execute("SELECT population FROM bindings WHERE data_key = ?", (data_key,)).fetchone()
        return row[0] if row else data_key

    def population_name(self, data_key: str) -> str | None:
        """The name of the population a data set is bound to, or None when it has a budget of its own."""
        with contextlib.closing(self._connect()) as con:
            row = con.execute("SELECT name FROM bindings WHERE data_key = ?", (data_key,)).fetchone()
        return str(row[0]) if row else None

    def is_population(self, key: str) -> bool:
        """Whether ``key`` is a named population's budget (data is bound to it)."""
        with contextlib.closing(self._connect()) as con:
            return con.execute("SELECT 1 FROM bindings WHERE population = ? LIMIT 1", (key,)).fetchone() is not None

    def bind(self, data_key: str, name: str) -> str:
        """Bind a data set to the named population (for good) and return the population's key.

        Refused when the data set already has releases on a budget of its own (they would not
        count against the population) or is bound to another population.
        """
        name = str(name).strip()
        if not name:
            raise DPCoreError("A population needs a name (for example the survey the data comes from).")
        pop = self.population_key(name)
        with self.transaction() as con:
            row = con.execute("SELECT population, name FROM bindings WHERE data_key = ?", (data_key,)).fetchone()
            if row is not None:
                if row[0] != pop:
                    raise DPCoreError(
                        f"This data is already bound to the population '{row[1]}'; a data set belongs to one "
                        "population for good. Keep that population's name.")
                return pop
            if con.execute("SELECT 1 FROM spends WHERE fingerprint = ?", (data_key,)).fetchone():
                raise DPCoreError(
                    "This data already has releases on a budget of its own, which the population's budget would not "
                    "count. Bind data to a population before its first release, or keep its own budget.")
            con.execute("INSERT INTO bindings VALUES (?, ?, ?)", (data_key, pop, name))
        return pop

    def data_key(self, kind: str, fingerprint: str) -> str:
        """The key of ``kind`` data with this fingerprint (:meth:`key`), after moving a budget
        stored under an earlier version's plain key or key kind (:data:`LEGACY_KINDS`) to it; or the
        key of the budget it is an alias of (:mod:`dpcore.privacy.key_aliases`)."""
        data_key = self.key(kind, fingerprint)
        earlier = [f"{kind}:{fingerprint}"]
        for k in LEGACY_KINDS.get(kind, ()):
            earlier += [self.key(k, fingerprint), f"{k}:{fingerprint}"]
        marks = ",".join("?" * len(earlier))
        with contextlib.closing(self._connect()) as con:  # a read first: no write lock when nothing moves
            found = {r[0] for r in con.execute(
                f"SELECT fingerprint FROM datasets WHERE fingerprint IN ({marks}) "
                f"UNION SELECT data_key FROM bindings WHERE data_key IN ({marks})", (*earlier, *earlier))}
        for old in earlier:
            if old in found:
                self.migrate_plain_key(old, data_key, kind)
        return key_aliases.resolve(self, data_key)  # another key of the same data's budget (issue 26)

    def budget_key(self, kind: str, fingerprint: str) -> str:
        """The key of the budget ``kind`` data with this fingerprint draws on (its population's
        when bound), after moving a budget stored under an earlier version's key (:meth:`data_key`)."""
        return self.resolve(self.data_key(kind, fingerprint))

    def migrate_plain_key(self, plain: str, key: str, kind: str | None = None) -> None:
        """Move a budget stored under an earlier version's key ``plain`` (a plain key, or the keyed
        name under an earlier key kind) to ``key``, with its spends, releases, cap changes and
        population binding; ``kind`` (if given) becomes the budget's kind.  Nothing moves when
        ``key`` already has a budget or a binding (the two are never merged)."""
        with self.transaction() as con:
            def has(table: str, column: str, k: str) -> bool:
                return con.execute(f"SELECT 1 FROM {table} WHERE {column} = ?", (k,)).fetchone() is not None

            old = has("datasets", "fingerprint", plain) or has("bindings", "data_key", plain)
            if not old or has("datasets", "fingerprint", key) or has("bindings", "data_key", key):
                return
            con.execute("PRAGMA defer_foreign_keys = ON")
            for table in ("datasets", "spends", "releases", "cap_changes"):
                con.execute(f"UPDATE {table} SET fingerprint = ? WHERE fingerprint = ?", (key, plain))
            con.execute("UPDATE bindings SET data_key = ? WHERE data_key = ?", (key, plain))
            if kind is not None:
                con.execute("UPDATE datasets SET kind = ? WHERE fingerprint = ? AND kind != 'population'",
                            (kind, key))

    def holds_plain_keys(self, kinds: Sequence[str]) -> bool:
        """Whether a budget or binding is stored under a plain key of an earlier version (``kind:...``,
        not a keyed name) of one of ``kinds``: only then can :meth:`migrate_plain_key` move anything,
        so a caller may skip computing an earlier rule's fingerprint (seconds for a large table)."""
        pattern = " OR ".join(["fingerprint LIKE ?"] * len(kinds))
        like = [f"{k}:%" for k in kinds]
        with contextlib.closing(self._connect()) as con:
            return bool(kinds) and con.execute(
                f"SELECT 1 FROM datasets WHERE {pattern} UNION ALL SELECT 1 FROM bindings WHERE "
                f"{pattern.replace('fingerprint', 'data_key')} LIMIT 1", (*like, *like)).fetchone() is not None

    def _connect(self, check_same_thread: bool = True) -> sqlite3.Connection:
        # autocommit mode (isolation_level=None): transactions are explicit BEGIN IMMEDIATE;
        # every SQLite error reaches the caller as a StorageError naming the fix (ledger_errors)
        con = connect(self.path, self.timeout, check_same_thread)
        con.execute("PRAGMA foreign_keys = ON")
        return con

    def _begin(self, con: sqlite3.Connection) -> None:
        """``BEGIN IMMEDIATE``; when another process holds the write lock, say so and wait up to
        :attr:`timeout` seconds before refusing (a silent 30-second wait reads as a hang)."""
        con.execute("PRAGMA busy_timeout = 200")
        try:
            sqlite3.Connection.execute(con, "BEGIN IMMEDIATE")  # the raw error: is it a lock?
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) and "busy" not in str(e):
                raise storage_error(e, self.path) from None
        notice = (f"Waiting for the budget database {self.path}: another release or process is writing to it "
                  f"(up to {self.timeout:g} s)...")
        (self.on_wait or _stderr)(notice)
        con.execute(f"PRAGMA busy_timeout = {max(0, int(self.timeout * 1000) - 200)}")
        try:
            sqlite3.Connection.execute(con, "BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise storage_error(e, self.path, timeout=self.timeout) from None
        finally:
            con.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """An exclusive-for-writes transaction: committed on success, rolled back on any error.

        A full disk can make SQLite roll the transaction back itself; the ROLLBACK is then skipped
        (it used to replace the cause with ``cannot rollback - no transaction is active``)."""
        con = self._connect()
        try:
            self._begin(con)
            try:
                yield con
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    with contextlib.suppress(Exception):
                        sqlite3.Connection.execute(con, "ROLLBACK")
                raise
        finally:
            con.close()

    # -- ledgers ----------------------------------------------------------------------------
    def ledger(self, fingerprint: str, default_cap: PrivacyCost, kind: str = "",
               unit: Unit | None = None) -> StoredLedger:
        """The ledger under this key (created with ``default_cap`` and ``unit``)."""
        return StoredLedger(self, str(fingerprint), default_cap, kind, unit)

    def has_ledger(self, fingerprint: str) -> bool:
        with contextlib.closing(self._connect()) as con:
            return con.execute("SELECT 1 FROM datasets WHERE fingerprint = ?", (fingerprint,)).fetchone() is not None

    # -- releases ---------------------------------------------------------------------------
    def record_release(self, fingerprint: str, release_id: str, kind: str, summary: Mapping[str, Any],
                       files: Mapping[str, bytes], con: sqlite3.Connection | None = None) -> None:
        """Keep a release's exported files (as published, Zstandard-compressed) for the history page.

        ``summary`` is public (mechanism, budget, parameters); ``files`` are the exports.
        Recording the same release twice keeps the first copy.  ``con``: an open transaction
        (:meth:`transaction`) to record it in, with the caller's other writes.
        """
        created = minute_now()
        rows = [(release_id, str(n), sqlite3.Binary(_pack(bytes(d))), _ZSTD, len(d)) for n, d in files.items()]
        with contextlib.nullcontext(con) if con is not None else self.transaction() as con:
            if con.execute("SELECT 1 FROM releases WHERE release_id = ?", (release_id,)).fetchone():
                return
            con.execute("INSERT INTO releases VALUES (?, ?, ?, ?, ?)",
                        (release_id, fingerprint, kind, created, json.dumps(dict(summary), default=str)))
            con.executemany("INSERT INTO release_files (release_id, name, data, encoding, size) "
                            "VALUES (?, ?, ?, ?, ?)", rows)
            journal_stored(con, release_id)  # its charge can now be re-served (ledger_journal)

    def releases(self, fingerprint: str) -> list[dict[str, Any]]:
        """Stored releases of a dataset, newest first: id, kind, created, summary, the names of the
        files that can be downloaded (``files``) and of those removed (``removed``: name -> when)."""
        with contextlib.closing(self._connect()) as con:
            rows = con.execute("SELECT release_id, kind, created, summary FROM releases WHERE fingerprint = ? "
                               "ORDER BY created DESC, rowid DESC", (fingerprint,)).fetchall()
            out = []
            for rid, kind, created, summary in rows:
                files = con.execute("SELECT name, removed FROM release_files WHERE release_id = ? ORDER BY rowid",
                                    (rid,)).fetchall()
                out.append({"release_id": rid, "kind": kind, "created": created, "summary": json.loads(summary),
                            "files": [n for n, gone in files if gone is None],
                            "removed": {n: gone for n, gone in files if gone is not None}})
            return out

    def release_file(self, release_id: str, name: str) -> bytes:
        """A stored file of a release, as published (decompressed)."""
        with contextlib.closing(self._connect()) as con:
            row = con.execute("SELECT data, encoding, removed, size FROM release_files WHERE release_id = ? AND name = ?",
                              (release_id, name)).fetchone()
        if row is None:
            raise InputError(f"There is no stored file {name!r} for release {release_id}.")
        if row[2] is not None:
            raise InputError(f"The file {name!r} of release {release_id} was removed from the history on "
                             f"{row[2].replace('T', ' ')} UTC to save space; its budget entry is kept.")
        return _unpack(bytes(row[0]), row[1], row[3], f"The file {name!r} of release {release_id}")

    def storage(self) -> dict[str, int]:
        """What the database takes on disk: ``database_bytes`` (the file and its journal),
        ``files_bytes`` (stored release files, compressed), ``files_published_bytes`` (the same
        files as published), ``files`` (how many are kept) and ``removed`` (how many were removed)."""
        with contextlib.closing(self._connect()) as con:
            kept, stored, published = con.execute(
                "SELECT COUNT(*), COALESCE(SUM(LENGTH(data)), 0), COALESCE(SUM(COALESCE(size, LENGTH(data))), 0) "
                "FROM release_files WHERE removed IS NULL").fetchone()
            removed = con.execute("SELECT COUNT(*) FROM release_files WHERE removed IS NOT NULL").fetchone()[0]
        on_disk = sum(p.stat().st_size for p in (self.path, self.path.with_name(self.path.name + "-wal"),
                                                 self.path.with_name(self.path.name + "-journal")) if p.exists())
        return {"database_bytes": int(on_disk), "files_bytes": int(stored), "files_published_bytes": int(published),
                "files": int(kept), "removed": int(removed)}

    def remove_release_files(self, *, before: str | None = None, release_ids: Iterable[str] | None = None,
                             fingerprints: Iterable[str] | None = None) -> int:
        """Remove stored release files to reclaim space; the budget entries and the releases'
        summaries stay, and the files stay listed as removed (with when).

        Parameters
        ----------
        before : str, optional
            Remove the files of releases made before this time (ISO 8601, UTC; a date such as
            ``"2024-05-01"`` means the start of that day).
        release_ids : iterable of str, optional
            Remove the files of these releases.
        fingerprints : iterable of str, optional
            Only releases of these budget keys (default: every release in the database).

        Returns
        -------
        int
            How many files were removed.  The database file is compacted afterwards (``VACUUM``).
        """
        if before is None and release_ids is None:
            raise InputError("Say which release files to remove: those made before a date, or chosen releases.")
        where, args = ["removed IS NULL"], []
        if before is not None:
            where.append("release_id IN (SELECT release_id FROM releases WHERE created < ?)")
            args.append(str(before))
        if release_ids is not None:
            ids = [str(r) for r in release_ids]
            where.append(f"release_id IN ({','.join('?' * len(ids))})" if ids else "0")
            args.extend(ids)
        if fingerprints is not None:
            keys = [str(k) for k in fingerprints]
            where.append(f"release_id IN (SELECT release_id FROM releases WHERE fingerprint IN "
                         f"({','.join('?' * len(keys))}))" if keys else "0")
            args.extend(keys)
        with self.transaction() as con:
            n = con.execute(f"UPDATE release_files SET data = x'', removed = ? WHERE {' AND '.join(where)}",
                            (minute_now(), *args)).rowcount
        if n:
            with contextlib.closing(self._connect()) as con:
                con.execute("VACUUM")  # SQLite keeps freed pages otherwise: the file would not shrink
        return int(n)


#: ``release_files.encoding``: ``zstd+crc32`` (written by this version: a Zstandard frame, then the
#: CRC-32 of the published bytes, 4 bytes big-endian), ``gzip`` (earlier versions) or NULL (stored as
#: published, the earliest); every one is read.
_ZSTD = "zstd+crc32"
_GZIP = "gzip"


@functools.cache
def _zstd() -> Any:
    """Zstandard at level 1, from pyarrow (already a dependency: its bundled libzstd; the standard
    library has no Zstandard before Python 3.14).  Against gzip at level 1 on a 22 MB release.csv of
    a 1,000 x 1,000 grid: 0.065 s instead of 0.14 s of CPU to pack, 6.3 MB instead of 6.8 MB,
    0.026 s instead of 0.069 s to read back; the curator waits for the packing after every release.
    The same file packs to the same bytes.  pyarrow's frames carry no checksum (gzip's carry a
    CRC-32), so :func:`_pack` appends one: a damaged stored file is refused, never served altered."""
    import pyarrow as pa

    return pa.Codec("zstd", compression_level=1)


def _pack(data: bytes) -> bytes:
    return _zstd().compress(data, asbytes=True) + zlib.crc32(data).to_bytes(4, "big")


def _unpack(data: bytes, encoding: str | None, size: int | None, what: str = "A stored release file") -> bytes:
    """A stored file as published; ``size`` is its ``release_files.size`` (Zstandard needs it),
    ``what`` names it in the refusal of a damaged file."""
    if encoding is None:
        return data
    damaged = InputError(f"{what} is damaged in the budget database (it no longer reads back as it was "
                         "published); use the copy that was published, or remove it from the history.")
    if encoding == _GZIP:
        try:
            return gzip.decompress(data)
        except (OSError, EOFError, zlib.error):
            raise damaged from None
    if encoding == _ZSTD:
        if type(size) is not int or size < 0 or len(data) < 4:
            raise damaged
        try:
            out = _zstd().decompress(data[:-4], decompressed_size=size, asbytes=True)
        except (OSError, ValueError, MemoryError):
            raise damaged from None
        if zlib.crc32(out) != int.from_bytes(data[-4:], "big"):
            raise damaged
        return out
    raise InputError(f"A stored release file has an unknown encoding {encoding!r} (written by a newer version?).")


#: Said when a budget held open was retired unused into the budget another key of the same data
#: leads to (:func:`dpcore.privacy.key_aliases.adopt`): nothing is charged to it.
_MERGED = ("This data's budget was never used and has been merged into the budget that another key of the same "
           "data leads to (the same points or table released before); nothing was charged. Reload the page (or "
           "run the command again) to draw on that budget.")


class StoredLedger(Ledger):
    """A :class:`~dpcore.privacy.ledger.Ledger` whose state lives in a :class:`LedgerStore`.

    Every read reloads the cap and the entries from the file, and every change (spend, new
    cap) reloads, applies :class:`Ledger`'s own checks and writes back inside one
    ``BEGIN IMMEDIATE`` transaction, so what another tab or process spent is always counted.
    """

    def __init__(self, store: LedgerStore, fingerprint: str, default_cap: PrivacyCost, kind: str = "",
                 unit: Unit | None = None) -> None:
        super().__init__(default_cap, dataset=fingerprint, unit=unit)
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
        #: whether this object opened the budget (it did not exist): "new budget for this data"
        self.created_new = False
        if not store.has_ledger(fingerprint):
            store._mark_budgets()  # before the row: an emptied database is then refused, never reset
            with store.transaction() as con:
                if key_aliases.leads_to(con, fingerprint) is not None:  # retired meanwhile (key_aliases.adopt)
                    raise BudgetError(_MERGED)
                con.execute("INSERT OR IGNORE INTO datasets (fingerprint, kind, cap, created, unit) "
                            "VALUES (?, ?, ?, ?, ?)",
                            (fingerprint, kind, json.dumps(self._check_cap(default_cap).to_dict()),
                             minute_now(), json.dumps(unit.to_dict()) if unit else None))
                self.created_new = con.execute("SELECT changes()").fetchone()[0] > 0
        # a budget from before units were recorded gets its unit from its next *charged* release
        # (Ledger.spend), never from a release that is only asked about and then refused
        self._refresh()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self._read.close()

    @property
    def store(self) -> LedgerStore:
        """The store this ledger lives in."""
        return self._store

    # -- sync -------------------------------------------------------------------------------
    def _load(self, con: sqlite3.Connection) -> None:
        row = con.execute("SELECT cap, unit FROM datasets WHERE fingerprint = ?", (self._fp,)).fetchone()
        if row is None:  # created in __init__; deleted only when retired unused (key_aliases.adopt)
            if key_aliases.leads_to(con, self._fp) is not None:
                raise BudgetError(_MERGED)
            raise InputError("This dataset's budget record has disappeared from the budget database.")
        try:
            cap = PrivacyCost.from_dict(json.loads(row[0]))
            unit = Unit.from_dict(json.loads(row[1])) if row[1] else None
            entries = [LedgerEntry.from_dict(json.loads(e)) for (e,) in con.execute(
                "SELECT entry FROM spends WHERE fingerprint = ? ORDER BY idx", (self._fp,))]
            changes = [CapChange.from_dict(json.loads(c)) for (c,) in con.execute(
                "SELECT change FROM cap_changes WHERE fingerprint = ? ORDER BY idx", (self._fp,))]
        except (ValueError, KeyError, TypeError) as e:  # a row that no longer reads as what was written
            raise damaged(self._store.path, f"a ledger row of this budget does not read: {e}") from None
        spent = sum((Fraction(e.charged) for e in entries), Fraction(0))
        with self._lock:
            self._cap, self._entries, self._spent = cap, entries, spent
            self._unit_of_privacy, self._cap_changes = unit, changes

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
        """What is left under the cap, and under the caps of the other used budgets of the same data that
        count with this one (:func:`dpcore.privacy.budget_groups.left`; :meth:`check` is the rule)."""
        self._refresh()
        with self._lock:
            group = self._in_group(budget_groups.left, self._read)
        own = super().remaining
        return own if group is None else min(own, float(group))

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        self._refresh()
        return super().entries

    @property
    def unit(self) -> Unit | None:
        self._refresh()
        return self._unit_of_privacy

    @property
    def cap_changes(self) -> tuple[CapChange, ...]:
        self._refresh()
        return super().cap_changes

    def check(self, cost: PrivacyCost, unit: Unit | None = None) -> None:
        self._refresh()
        super().check(cost, unit)
        with self._lock:  # the group of used budgets of the same data (key_aliases.adopt) as spend counts it
            self._in_group(budget_groups.fit, self._read, cost, unit if unit is not None else (self._unit_of_privacy or Unit()))

    def _in_group(self, rule: Callable[..., Any], con: sqlite3.Connection, *args: Any) -> Any:
        """``rule(con, key, *args)`` of :mod:`dpcore.privacy.budget_groups`, a damaged row of another budget
        of the group reported as a damaged database (restore it, never start afresh)."""
        try:
            return rule(con, self._fp, *args)
        except (ValueError, KeyError, TypeError) as e:
            raise damaged(self._store.path, f"a ledger row of a budget counted with this one does not read: {e}") from None

    def charge_for(self, cost: PrivacyCost, unit: Unit | None = None) -> tuple[PrivacyCost, int]:
        if unit is not None and unit.entity == "record" and self._store.is_population(self._fp):
            population_needs_persons(unit)  # a population's budget protects persons (issue 26 item 15)
        return super().charge_for(cost, unit)

    def to_dict(self) -> dict[str, Any]:
        self._refresh()
        return super().to_dict()

    # -- writes in one transaction ------------------------------------------------------------
    def spend(self, cost: PrivacyCost, label: str, details: Mapping[str, Any] | None = None,
              unit: Unit | None = None, *, journal: str | None = None) -> LedgerEntry:
        """Charge ``cost`` (:meth:`Ledger.spend`) in one transaction; ``journal``: where the release's
        files go, kept with the charge in the same transaction (:mod:`dpcore.privacy.ledger_journal`)."""
        with self._lock, self._store.transaction() as con:
            bound = con.execute("SELECT name FROM bindings WHERE data_key = ?", (self._fp,)).fetchone()
            if bound:
                # bound to a population after this budget was opened (another tab, another process)
                raise BudgetError(
                    f"This data now belongs to the population '{bound[0]}', whose budget its releases draw on. "
                    "Reload the page (or run the command again) to release from the population's budget.")
            self._load(con)
            # other used budgets of the same data count with this one (dpcore.privacy.budget_groups)
            self._in_group(budget_groups.fit, con, cost, unit if unit is not None else (self._unit_of_privacy or Unit()))
            self._before_spend(con, cost, unit)
            entry = super().spend(cost, label, details, unit)
            try:
                con.execute("INSERT INTO spends VALUES (?, ?, ?)",
                            (self._fp, entry.index, json.dumps(entry.to_dict())))
                # a budget without a unit takes its first release's (Ledger.spend set it)
                con.execute("UPDATE datasets SET unit = ? WHERE fingerprint = ? AND unit IS NULL",
                            (json.dumps(entry.unit.to_dict()), self._fp))
                if journal is not None:
                    journal_charge(con, self._fp, entry.index, journal)
            except BaseException:
                self._load(con)  # the transaction rolls back: forget the in-memory charge too
                raise
            return entry

    def _before_spend(self, con: sqlite3.Connection, cost: PrivacyCost, unit: Unit | None) -> None:
        """A subclass's further refusal of a charge, inside the charge's transaction (none here)."""

    def set_cap(self, cap: PrivacyCost) -> None:
        with self._lock, self._store.transaction() as con:
            self._load(con)
            before = len(self._cap_changes)
            super().set_cap(cap)
            con.execute("UPDATE datasets SET cap = ? WHERE fingerprint = ?", (json.dumps(cap.to_dict()), self._fp))
            if len(self._cap_changes) > before:
                con.execute("INSERT INTO cap_changes VALUES (?, ?, ?)",
                            (self._fp, before, json.dumps(self._cap_changes[-1].to_dict())))


_DEFAULT: dict[Path, LedgerStore] = {}
_DEFAULT_LOCK = threading.Lock()


def default_store() -> LedgerStore:
    """The store at :func:`default_path` (one object per path and process)."""
    path = default_path()
    with _DEFAULT_LOCK:
        if path not in _DEFAULT:
            _DEFAULT[path] = LedgerStore(path)
        return _DEFAULT[path]
