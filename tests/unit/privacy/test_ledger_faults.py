"""Fault injection on the budget database and its key file (issue 26, items 13, 18, 19): every
fault is one line naming the problem and the fix, and no fault restarts a budget at zero."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dpcore.errors import StorageError
from dpcore.privacy import budget
from dpcore.privacy.ledger_store import LedgerStore


def _spent_store(tmp_path: Path) -> LedgerStore:
    store = LedgerStore(tmp_path / "ledger.sqlite")
    store.ledger(store.key("points", "fp"), budget.pure(1.0), "points").spend(budget.pure(0.4), "first")
    return store


def _one_line(e: pytest.ExceptionInfo[StorageError]) -> str:
    text = str(e.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_a_full_disk_is_one_line_and_charges_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _spent_store(tmp_path)
    led = store.ledger(store.key("points", "fp"), budget.pure(1.0), "points")
    connect = LedgerStore._connect

    def full(self: LedgerStore, check_same_thread: bool = True) -> sqlite3.Connection:
        con = connect(self, check_same_thread)
        pages = con.execute("PRAGMA page_count").fetchone()[0]
        con.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own SQLITE_FULL, as on a full disk
        return con

    monkeypatch.setattr(LedgerStore, "_connect", full)
    with pytest.raises(StorageError) as e:
        led.spend(budget.pure(0.1), "x" * 20_000)
    text = _one_line(e)
    assert "disk holding the budget database" in text and "Free some space" in text
    assert "cannot rollback" not in text
    monkeypatch.setattr(LedgerStore, "_connect", connect)  # not undo(): that also drops DPCORE_LEDGER_DB
    assert store.ledger(store.key("points", "fp"), budget.pure(1.0)).spent == pytest.approx(0.4)


def test_a_held_lock_says_it_waits_then_names_the_fix(tmp_path: Path) -> None:
    store = _spent_store(tmp_path)
    led = store.ledger(store.key("points", "fp"), budget.pure(1.0), "points")
    store.timeout = 0.5
    said: list[str] = []
    store.on_wait = said.append
    other = sqlite3.connect(store.path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StorageError) as e:
            led.spend(budget.pure(0.1), "second")
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert said and said[0].startswith("Waiting for the budget database")
    assert "locked by another release" in _one_line(e) and "0.5 s" in str(e.value)
    assert led.spent == pytest.approx(0.4)


def test_a_truncated_database_is_to_be_restored_not_replaced(tmp_path: Path) -> None:
    store = _spent_store(tmp_path)
    data = store.path.read_bytes()
    store.path.write_bytes(data[:1000])  # a damaged file, not empty
    with pytest.raises(StorageError) as e:
        LedgerStore(store.path)
    text = _one_line(e)
    assert "is damaged" in text and "Restore it from your backup" in text
    assert "DPCORE_LEDGER_DB to a writable" not in text


def test_a_damaged_ledger_row_is_one_line(tmp_path: Path) -> None:
    store = _spent_store(tmp_path)
    with sqlite3.connect(store.path) as con:
        con.execute("UPDATE spends SET entry = CAST(x'7b22ff' AS TEXT)")  # not UTF-8
    with pytest.raises(StorageError) as e:
        _ = store.ledger(store.key("points", "fp"), budget.pure(1.0)).spent
    assert "is damaged" in _one_line(e) and "Restore" in str(e.value)
    with sqlite3.connect(store.path) as con:
        con.execute("UPDATE spends SET entry = '{not json'")
    with pytest.raises(StorageError, match="does not read"):
        _ = store.ledger(store.key("points", "fp"), budget.pure(1.0)).spent


def test_a_key_file_that_is_not_hex(tmp_path: Path) -> None:
    store = _spent_store(tmp_path)
    store.key_path.write_text("not a key at all\n")
    with pytest.raises(StorageError) as e:
        LedgerStore(store.path)
    assert "is damaged (its first line is not a hex key)" in _one_line(e) and "Restore" in str(e.value)


def test_a_replaced_key_file_is_refused(tmp_path: Path) -> None:
    store = _spent_store(tmp_path)
    store.key_path.write_text(("ab" * 32) + "\n")  # another key, in the old one-line format
    with pytest.raises(StorageError) as e:
        LedgerStore(store.path)
    assert "is not the key of the budget database" in _one_line(e)
    store.key_path.write_text(("cd" * 32) + "\ncheck 00\n")  # or with a check value of its own
    with pytest.raises(StorageError, match="damaged"):
        LedgerStore(store.path)


@pytest.mark.parametrize("mishap", ["emptied", "deleted"])
def test_an_emptied_or_deleted_database_is_refused_while_its_key_file_stays(tmp_path: Path, mishap: str) -> None:
    store = _spent_store(tmp_path)
    if mishap == "emptied":
        store.path.write_bytes(b"")
    else:
        store.path.unlink()
    with pytest.raises(StorageError) as e:
        LedgerStore(store.path)
    assert "was emptied, truncated or deleted" in _one_line(e) and "Restore ledger.sqlite" in str(e.value)
    with pytest.raises(StorageError):  # and again: the refusal does not wear off
        LedgerStore(store.path)


def test_a_key_file_of_an_earlier_version_keeps_working_and_is_pinned(tmp_path: Path) -> None:
    store = _spent_store(tmp_path)
    key = store.key("points", "fp")
    secret_line = store.key_path.read_text().splitlines()[0]
    with sqlite3.connect(store.path) as con:
        con.execute("DROP TABLE meta")  # a database of an earlier version
    store.key_path.write_text(secret_line + "\n")  # and its key file: the secret alone
    again = LedgerStore(store.path)
    assert again.key("points", "fp") == key and again.ledger(key, budget.pure(1.0)).spent == pytest.approx(0.4)
    text = store.key_path.read_text()
    assert text.startswith(secret_line + "\ncheck ") and "database " in text and "budgets yes" in text
    store.key_path.write_text(("ef" * 32) + "\n")
    with pytest.raises(StorageError, match="not the key"):
        LedgerStore(store.path)


def test_a_fresh_database_and_key_work_and_a_budget_marks_the_key_file(tmp_path: Path) -> None:
    store = LedgerStore(tmp_path / "ledger.sqlite")
    assert "budgets yes" not in store.key_path.read_text()
    store.path.unlink()  # nothing was kept yet: starting again is fine
    store = LedgerStore(tmp_path / "ledger.sqlite")
    led = store.ledger(store.key("points", "fp"), budget.pure(1.0))
    assert led.created_new and "budgets yes" in store.key_path.read_text()
    assert not store.ledger(store.key("points", "fp"), budget.pure(1.0)).created_new
