"""Census blocks at national scale (issue 28 item 1): the finer levels' budget keys of a table are
``codes:v2`` (vectorised words, :mod:`dpcore.data.code_words`) and never open a second budget.

* the words and keys depend on the content only (order, types, encoding, split rows, empty rows);
* a database created by this version holds no ``codes:v1`` level key, so none is computed for it;
* a database of an earlier version (no ``level_keys_v2`` mark) may hold one: the table is then keyed
  by its ``codes:v1`` level keys too, and a budget opened under one of them is charged, not a new one.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_cli_blocks_bytes import KEYS, _blocks

from dpcore.areas import census_tables
from dpcore.cli import main
from dpcore.core.session import Session
from dpcore.data import code_words
from dpcore.data.code_tables import read_code_table
from dpcore.privacy import key_aliases
from dpcore.privacy.budget import pure
from dpcore.privacy.ledger_store import LedgerStore

LEVELS = ["STATE", "COUNTY", "TRACT", "BLOCK"]


def test_words_are_a_function_of_the_canonical_text() -> None:
    digits = code_words.code_words(pd.Series(["007", "7", "0", "-3", "x7", None], dtype=object))
    fast = code_words.code_words(pd.Series(["007", "7", "0"], dtype="string[pyarrow]"))
    ints = code_words.code_words(np.array([7, 7, 0, -3], dtype=np.int64))
    whole = code_words.code_words(pd.Series([7.0, 0.0, -3.0]))
    assert digits[0] == digits[1] == fast[0] == fast[1] == ints[0] == whole[0]
    assert digits[2] == fast[2] == ints[2] == whole[1] and digits[3] == ints[3] == whole[2]
    assert len(set(digits.tolist())) == 5  # 7, 0, -3, "x7" and the missing value differ
    big = code_words.code_words(np.array([10**18, 5], dtype=np.int64))  # 19 digits: hashed as its text
    assert big[0] == code_words.code_words(pd.Series(["1000000000000000000"], dtype=object))[0]


def test_chained_keys_depend_on_the_totals_only() -> None:
    w = [code_words.code_words(pd.Series(["01", "01", "02", "02"])),
         code_words.code_words(pd.Series(["001", "003", "001", "001"]))]
    keys = code_words.chained_keys("table", w, [5, 0, 3, 4], [1, 2])
    split = [code_words.code_words(np.array([2, 1, 3])), code_words.code_words(np.array([1, 1, 9]))]
    assert code_words.chained_keys("table", split, [7, 5, 0], [1, 2]) == keys  # merged, reordered, empty row
    other = code_words.chained_keys("table", w, [5, 0, 3, 5], [1, 2])
    assert other[0] != keys[0] and other[1] != keys[1]
    assert code_words.chained_keys("trips", w, [5, 0, 3, 4], [1, 2]) != keys


def test_fingerprints_keep_every_earlier_key_unless_the_database_is_new(tmp_path: Path) -> None:
    df = read_code_table(_blocks(tmp_path / "blocks.parquet"))
    full = census_tables.fingerprints(df, LEVELS, "POP")
    fast = census_tables.fingerprints(df, LEVELS, "POP", v1_levels=False)
    assert full[0] == fast[0] == KEYS[0]  # the main key is the earlier code's
    assert set(KEYS) <= set(full) and not set(KEYS[1:]) & set(fast)
    assert fast == full[:len(fast)] and len(fast) == 4  # main, then the three finer levels' codes:v2 keys


def test_a_new_database_is_marked_and_an_earlier_one_is_not(tmp_path: Path) -> None:
    new = Session.open(str(tmp_path / "new.sqlite"))
    assert not new.may_hold_v1_level_keys()
    db = tmp_path / "old.sqlite"
    store = LedgerStore(db)
    store.ledger(store.key("areas", "some data"), pure(1.0))
    _unmark(db)  # as an earlier version left it
    assert Session.open(str(db)).may_hold_v1_level_keys()
    assert Session.open(str(db)).may_hold_v1_level_keys()  # reopening never marks a used database


def _unmark(db: Path) -> None:
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        con.execute("DELETE FROM meta WHERE name = ?", (key_aliases.LEVEL_KEYS_V2,))


def _release(data: Path, db: Path, out: Path) -> None:
    rc = main(["release", "hierarchy", "--input", str(data), "--levels", ",".join(LEVELS), "--count", "POP",
               "--mechanism", "exact", "--epsilon", "0.5", "--input-lists-all-areas", "--out", str(out),
               "--budget-db", str(db)])
    assert rc == 0


def _budgets(db: Path) -> dict[str, int]:
    with contextlib.closing(sqlite3.connect(db)) as con:
        return dict(con.execute("SELECT d.fingerprint, (SELECT count(*) FROM spends s WHERE s.fingerprint = "
                                "d.fingerprint) FROM datasets d").fetchall())


@pytest.mark.parametrize("level", [1, 2, 3])
def test_a_budget_under_an_earlier_level_key_is_charged(level: int, tmp_path: Path) -> None:
    """A database of an earlier version holds a budget under one of the table's ``codes:v1`` finer
    level keys (another table's main key): the release is charged to it, no second budget opens."""
    data = _blocks(tmp_path / "blocks.parquet")
    db = tmp_path / "old.sqlite"
    store = LedgerStore(db)
    old = store.key("areas", KEYS[level])
    store.ledger(old, pure(10.0))
    _unmark(db)
    _release(data, db, tmp_path / "out")
    assert _budgets(db) == {old: 1}


def test_a_new_database_keeps_one_budget_without_earlier_level_keys(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    data = _blocks(tmp_path / "blocks.parquet")
    db = tmp_path / "new.sqlite"
    asked: list[bool] = []
    real = census_tables.fingerprints

    def spy(*args: object, **kw: bool) -> list[str]:
        asked.append(kw.get("v1_levels", True))
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(census_tables, "fingerprints", spy)
    _release(data, db, tmp_path / "a")
    _release(data, db, tmp_path / "b")
    assert asked == [False, False]
    budgets = _budgets(db)
    assert list(budgets.values()) == [2]  # both releases on one budget
    store = LedgerStore(db)
    assert list(budgets) == [store.key("areas", KEYS[0])]  # the main key is the earlier code's
