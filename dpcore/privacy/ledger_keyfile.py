"""The budget database's key file, and the proof that it and the database belong together.

Every budget key is an HMAC under the per-install secret in ``ledger.sqlite.key``
(:meth:`dpcore.privacy.ledger_store.LedgerStore.key`).  A replaced key file, an emptied or
deleted database, or a database restored without its key file would each find no budget and
open fresh ones at zero: the same people exposed again (issue 26, items 13 and 18).  So:

* the key file holds, after the secret, a **check value** ``HMAC-SHA256(secret, CHECK_LABEL)``,
  the **id of its database** and, once the first budget is opened, ``budgets yes``;
* the database holds the same check value and id (table ``meta``).

:func:`open_secret` refuses, naming the file to restore, a key that does not reproduce the
database's check value (the key file was replaced), a key file of another database, a key file
whose check value its own secret does not give (edited), a key file that is not hex, and an
empty or new database whose key file says budgets existed (the database was emptied, truncated to
0 bytes or deleted: restore it).  Moving *both* files away starts afresh, deliberately.

Key files of earlier versions hold the secret alone.  They keep working: the first open writes
the check value and the database id into both files (the key is trusted that once, as before, and
pinned from then on).

>>> import tempfile, pathlib
>>> kf = KeyFile.parse("ab" * 32 + "\\ncheck 00\\ndatabase d1\\nbudgets yes\\n", pathlib.Path("k"))
>>> kf.database, kf.budgets, len(kf.secret)
('d1', True, 32)
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sqlite3
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from dpcore.errors import StorageError
from dpcore.privacy.noise import secret_key

__all__ = ["CHECK_LABEL", "KeyFile", "check_value", "mark_budgets", "open_secret"]

#: What the check value is the HMAC of (a constant: it tells nothing about any data).
CHECK_LABEL = b"dpcore budget database key check v1"

META_SCHEMA = "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);"


def check_value(secret: bytes) -> str:
    """The check value of a secret: HMAC-SHA256 of :data:`CHECK_LABEL` (hex).

    >>> len(check_value(b"0" * 32)), check_value(b"0" * 32) == check_value(b"1" * 32)
    (64, False)
    """
    return hmac.new(secret, CHECK_LABEL, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class KeyFile:
    """The content of a key file: the secret and, when written by this version, the check value,
    the database id and whether budgets were opened under it."""

    secret: bytes
    check: str | None = None
    database: str | None = None
    budgets: bool = False

    @classmethod
    def parse(cls, text: str, path: Path) -> KeyFile:
        """Read a key file's text; a damaged one is refused (restore it)."""
        lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
        try:
            secret = bytes.fromhex(lines[0]) if lines else b""
        except ValueError:
            raise StorageError(
                f"The budget key file {path} is damaged (its first line is not a hex key). Restore it from the backup "
                f"taken with the budget database {path.with_suffix('').name}: without it the budgets in the database "
                "cannot be found.") from None
        if len(secret) < 16:
            raise StorageError(f"The budget key file {path} is damaged (too short). Restore it from a backup: "
                               "without it the budgets in the database cannot be found.")
        fields = dict((ln.split(None, 1) + [""])[:2] for ln in lines[1:])
        return cls(secret, fields.get("check") or None, fields.get("database") or None, fields.get("budgets") == "yes")

    def text(self) -> str:
        """The file's text (the secret on the first line, as earlier versions wrote it)."""
        out = [self.secret.hex()]
        if self.check:
            out.append(f"check {self.check}")
        if self.database:
            out.append(f"database {self.database}")
        if self.budgets:
            out.append("budgets yes")
        return "\n".join(out) + "\n"


def _write(path: Path, kf: KeyFile) -> None:
    """Write the key file whole (a private temporary file renamed into place), readable by its owner only."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(kf.text())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    os.chmod(path, 0o600)


def _refuse(kind: str, key_path: Path, db: Path, extra: str = "") -> StorageError:
    texts = {
        "missing": f"The budget key file {key_path} is missing, but the budget database {db} holds budgets keyed "
                   "with it. Restore the key file from the backup of the database (they go together); without it "
                   "these budgets cannot be found, and a new key would start every data set afresh.",
        "replaced": f"The budget key file {key_path} is not the key of the budget database {db} (it does not "
                    "reproduce the database's check value: the file was replaced or rewritten). Restore the key file "
                    "from the backup taken with the database; with this key every budget would start at zero.",
        "edited": f"The budget key file {key_path} is damaged (its key does not give its own check value). Restore "
                  "it from the backup taken with the database.",
        "other": f"The budget key file {key_path} belongs to another budget database ({extra}), not to {db}. Put "
                 "back the key file of this database, or the database of this key file, from the backup.",
        "emptied": f"The budget database {db} is empty or new, but its key file {key_path} says budgets were kept in "
                   f"it (database {extra}): the database was emptied, truncated or deleted. Restore {db.name} from "
                   "your backup; opened empty, every budget would start at zero. (To start afresh on purpose, move "
                   "both the database and its key file away.)",
    }
    return StorageError(texts[kind])


def _meta(con: sqlite3.Connection) -> dict[str, str]:
    return {str(k): str(v) for k, v in con.execute("SELECT name, value FROM meta").fetchall()}


def open_secret(con: sqlite3.Connection, db: Path, key_path: Path) -> tuple[bytes, bool]:
    """The secret of the database ``db`` (open transaction ``con``), checked against its key file.

    Creates the key file (and the database's check value and id) for a new database, upgrades a key
    file of an earlier version, and refuses every mismatch (module docstring).  Returns the secret
    and whether the key file already says budgets were opened.
    """
    con.execute(META_SCHEMA)
    meta = _meta(con)
    has_budgets = con.execute("SELECT 1 FROM datasets UNION ALL SELECT 1 FROM bindings LIMIT 1").fetchone() is not None
    keyed = con.execute("SELECT 1 FROM datasets WHERE fingerprint LIKE 'k1:%' LIMIT 1").fetchone() is not None
    if not key_path.exists():
        if keyed or "check" in meta:
            raise _refuse("missing", key_path, db)
        secret = secret_key()
        kf = KeyFile(secret, check_value(secret), meta.get("database") or secret_key(16).hex(), has_budgets)
    else:
        kf = KeyFile.parse(key_path.read_text(), key_path)
        check = check_value(kf.secret)
        if kf.check is not None and not hmac.compare_digest(kf.check, check):
            raise _refuse("edited", key_path, db)
        if "check" in meta and not hmac.compare_digest(meta["check"], check):
            raise _refuse("replaced", key_path, db)
        if kf.database and meta.get("database") and kf.database != meta["database"]:
            raise _refuse("other", key_path, db, kf.database)
        if kf.budgets and "database" not in meta and not has_budgets:
            raise _refuse("emptied", key_path, db, kf.database or "unknown")
        kf = replace(kf, check=check, database=kf.database or meta.get("database") or secret_key(16).hex(),
                     budgets=kf.budgets or has_budgets)
    con.execute("INSERT OR IGNORE INTO meta VALUES ('check', ?)", (kf.check,))
    con.execute("INSERT OR IGNORE INTO meta VALUES ('database', ?)", (kf.database,))
    if not key_path.exists() or KeyFile.parse(key_path.read_text(), key_path) != kf:
        _write(key_path, kf)
    return kf.secret, kf.budgets


def mark_budgets(key_path: Path) -> None:
    """Note in the key file that budgets were opened (then an emptied database is refused)."""
    kf = KeyFile.parse(key_path.read_text(), key_path)
    if not kf.budgets:
        _write(key_path, replace(kf, budgets=True))
