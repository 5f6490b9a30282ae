"""Storage faults of the budget database, told as one line that names the problem and the fix.

SQLite reports a full disk, a lock held by another process, a damaged file or a row that no
longer decodes as :class:`sqlite3.Error` with its own wording (``database or disk is full``,
``database is locked``, ``file is not a database``, ``Could not decode to UTF-8 ...``).  A
connection made by :func:`connect` raises :class:`~dpcore.errors.StorageError` instead, from
every statement and every fetch, with the database's path and what to do: free space, wait for
(or stop) the other process, restore the database from its backup.  A damaged database is never
told to start afresh: a new database starts every budget at zero (issue 26, item 19).

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "l.sqlite"
>>> str(storage_error(sqlite3.OperationalError("database or disk is full"), p)).startswith("The disk holding")
True
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

from dpcore.errors import DPCoreError, StorageError

__all__ = ["MissingTable", "connect", "damaged", "storage_error"]


class MissingTable(StorageError, sqlite3.OperationalError):
    """A table or column the database lacks: SQLite's error (callers test for a table made on first
    use, ``no such table`` stays in the message) and a :class:`StorageError` for the user."""


def damaged(path: Path, detail: object) -> StorageError:
    """The error of a database whose content cannot be read: restore it, never start afresh."""
    return StorageError(
        f"The budget database {path} is damaged ({detail}). Restore it from your backup, together with its key "
        f"file {path.name}.key, and run again; do not delete it or point DPCORE_LEDGER_DB elsewhere: a new "
        "database would start every budget at zero.")


def storage_error(e: BaseException, path: Path, *, timeout: float | None = None) -> BaseException:
    """The :class:`~dpcore.errors.StorageError` for SQLite's error ``e`` on the database at ``path``.

    ``timeout``: how long a lock was waited for (said in the message).  A missing table or column
    (a table made on first use, which callers test for) is also SQLite's own error (:class:`MissingTable`)."""
    if isinstance(e, DPCoreError):
        return e
    text = str(e)
    low = text.lower()
    if low.startswith(("no such table", "no such column")):
        return MissingTable(
            f"The budget database {path} lacks a part it needs ({text}): it was emptied or replaced while in use, or "
            f"written by another version. Restore it from your backup, together with its key file {path.name}.key, "
            "and run again.")
    if "full" in low or "no space" in low:
        return StorageError(
            f"The disk holding the budget database {path} is full: this change was not saved (nothing was charged "
            "by it). Free some space on that disk and run again.")
    if "locked" in low or "busy" in low:
        waited = f" for {timeout:g} s" if timeout else ""
        return StorageError(
            f"The budget database {path} is locked by another release or process (waited{waited}). Let it finish, "
            "or stop the process holding it, and run again (DPCORE_LEDGER_TIMEOUT sets how many seconds to wait).")
    if "readonly" in low or "read-only" in low:
        return StorageError(
            f"The budget database {path} cannot be written (read-only). Give your user write permission on it "
            "and on its folder, and run again.")
    if "unable to open" in low:
        return StorageError(
            f"Cannot open the budget database at {path} ({text}). Check that its folder exists and is writable, "
            "or set DPCORE_LEDGER_DB to a writable file path for a new budget database.")
    if "decode" in low or "malformed" in low or "not a database" in low or "corrupt" in low or "i/o" in low:
        return damaged(path, text)
    return StorageError(f"The budget database {path} could not be used ({text}). Restore it from your backup if "
                        "this persists.")


class _Cursor(sqlite3.Cursor):
    """A cursor whose statements and fetches raise :class:`StorageError`."""

    def _path(self) -> Path:
        return self.connection.dp_path  # type: ignore[attr-defined, no-any-return]

    def execute(self, *args: Any) -> Any:  # type: ignore[override]
        try:
            return super().execute(*args)
        except sqlite3.Error as e:
            raise storage_error(e, self._path()) from None

    def executemany(self, *args: Any) -> Any:  # type: ignore[override]
        try:
            return super().executemany(*args)
        except sqlite3.Error as e:
            raise storage_error(e, self._path()) from None

    def _failed(self, e: sqlite3.Error) -> BaseException:
        # a statement stopped half-way keeps its read lock until closed: close it now
        with contextlib.suppress(sqlite3.Error):
            self.close()
        return storage_error(e, self._path())

    def fetchone(self) -> Any:
        try:
            return super().fetchone()
        except sqlite3.Error as e:
            raise self._failed(e) from None

    def fetchall(self) -> list[Any]:
        try:
            return super().fetchall()
        except sqlite3.Error as e:
            raise self._failed(e) from None

    def __next__(self) -> Any:
        try:
            return super().__next__()
        except StopIteration:
            raise
        except sqlite3.Error as e:
            raise self._failed(e) from None


class _Connection(sqlite3.Connection):
    """A connection whose every statement goes through :class:`_Cursor`."""

    dp_path: Path

    def cursor(self, factory: Any = _Cursor) -> Any:  # type: ignore[override]
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = ()) -> Any:  # type: ignore[override]
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any) -> Any:  # type: ignore[override]
        return self.cursor().executemany(sql, parameters)

    def executescript(self, script: str) -> Any:  # type: ignore[override]
        try:
            return super().executescript(script)
        except sqlite3.Error as e:
            raise storage_error(e, self.dp_path) from None


def connect(path: Path, timeout: float, check_same_thread: bool = True) -> sqlite3.Connection:
    """An autocommit connection (transactions are explicit) whose errors are :class:`StorageError`."""
    try:
        con = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=check_same_thread,
                              factory=_Connection)
    except sqlite3.Error as e:
        raise storage_error(e, path) from None
    con.dp_path = Path(path)  # type: ignore[attr-defined]
    return con
