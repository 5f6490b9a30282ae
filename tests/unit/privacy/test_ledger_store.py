"""The persistent budget database (dpcore.privacy.ledger_store): survives sessions, refuses concurrent overspending."""

from __future__ import annotations

import multiprocessing as mp
import threading
from pathlib import Path

import numpy as np
import pytest

from dpcore.errors import BudgetError, DPCoreError, InputError
from dpcore.privacy import budget, ledger_store


def test_a_second_session_or_restart_continues_the_same_budget(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    a = ledger_store.LedgerStore(path).ledger("points:abc", budget.pure(1.0), "points")
    a.spend(budget.pure(0.4), "first", {"mechanism": "ug"})
    # another session (another object), and a restart (another store object on the same file)
    b = ledger_store.LedgerStore(path).ledger("points:abc", budget.pure(5.0), "points")
    assert b.cap.value == 1.0  # the default cap applies only to a new dataset
    assert b.spent == pytest.approx(0.4) and [e.label for e in b.entries] == ["first"]
    b.spend(budget.pure(0.5), "second")
    assert a.spent == pytest.approx(0.9) and len(a.entries) == 2  # a sees b's spend
    with pytest.raises(BudgetError, match="Not enough privacy budget"):
        a.spend(budget.pure(0.2), "third")
    assert b.remaining == pytest.approx(0.1) and len(b.entries) == 2  # the refusal changed nothing
    # another dataset has its own budget
    c = ledger_store.LedgerStore(path).ledger("points:other", budget.pure(1.0))
    assert c.spent == 0 and not c.entries


def test_cap_and_definition_rules_persist(tmp_path: Path) -> None:
    store = ledger_store.LedgerStore(tmp_path / "l.sqlite")
    led = store.ledger("census:x", budget.pure(1.0))
    led.set_cap(budget.zcdp(0.5))  # nothing spent yet: the definition may change
    assert store.ledger("census:x", budget.pure(1.0)).definition == "zcdp"
    led.spend(budget.pure(0.5), "pure on zcdp")  # charged ρ = ε²/2
    assert store.ledger("census:x", budget.pure(1.0)).spent == pytest.approx(0.125)
    with pytest.raises(BudgetError, match="cannot become"):
        led.set_cap(budget.pure(2.0))
    with pytest.raises(BudgetError, match="below what was already spent"):
        led.set_cap(budget.zcdp(0.1))
    assert store.ledger("census:x", budget.pure(1.0)).cap.value == 0.5
    d = led.to_dict()
    assert d["spent"] == pytest.approx(0.125) and d["entries"][0]["label"] == "pure on zcdp"


def test_threads_with_their_own_ledger_objects_never_pass_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    ledger_store.LedgerStore(path).ledger("od:t", budget.zcdp(1.0))
    ok, refused = [], []
    barrier = threading.Barrier(8)

    def worker(i: int) -> None:
        led = ledger_store.LedgerStore(path).ledger("od:t", budget.zcdp(1.0))  # one "tab" each
        barrier.wait()
        try:
            led.spend(budget.zcdp(0.3), f"tab {i}")
            ok.append(i)
        except BudgetError:
            refused.append(i)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ok) == 3 and len(refused) == 5
    led = ledger_store.LedgerStore(path).ledger("od:t", budget.zcdp(1.0))
    assert led.spent == pytest.approx(0.9) and [e.index for e in led.entries] == [0, 1, 2]


def _spend_in_process(path: str, n: int, out: mp.Queue) -> None:
    led = ledger_store.LedgerStore(path).ledger("points:p", budget.pure(1.0))
    got = 0
    for _ in range(n):
        try:
            led.spend(budget.pure(0.05), "p")
            got += 1
        except BudgetError:
            pass
    out.put(got)


def test_processes_spending_at_once_never_pass_the_cap(tmp_path: Path) -> None:
    path = str(tmp_path / "l.sqlite")
    ledger_store.LedgerStore(path).ledger("points:p", budget.pure(1.0))
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_spend_in_process, args=(path, 15, q)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    got = sum(q.get(timeout=10) for _ in procs)
    assert got == 20  # 20 × 0.05 = the cap of 1.0, out of 45 attempts
    assert ledger_store.LedgerStore(path).ledger("points:p", budget.pure(1.0)).spent == pytest.approx(1.0)


def test_a_failed_spend_stores_nothing(tmp_path: Path) -> None:
    store = ledger_store.LedgerStore(tmp_path / "l.sqlite")
    led = store.ledger("points:f", budget.pure(1.0))
    with pytest.raises(DPCoreError):
        led.spend(budget.zcdp(0.1), "zcdp on a pure cap")
    with pytest.raises(DPCoreError):
        led.spend(budget.pure(0.1), "bad details", {"x": object()})
    assert store.ledger("points:f", budget.pure(1.0)).entries == ()


def test_release_files_are_stored_and_served_back(tmp_path: Path) -> None:
    store = ledger_store.LedgerStore(tmp_path / "l.sqlite")
    store.ledger("points:r", budget.pure(1.0))
    store.record_release("points:r", "abc123", "points", {"mechanism": "UG", "cost": "ε = 0.5"},
                         {"release.csv": b"a,b\n1,2\n", "release.json": b"{}"})
    store.record_release("points:r", "abc123", "points", {"mechanism": "other"}, {"x.csv": b"no"})  # kept once
    store.record_release("points:r", "def456", "points", {"mechanism": "HTF"}, {"release.csv": b"c\n"})
    rels = store.releases("points:r")
    assert [r["release_id"] for r in rels] == ["def456", "abc123"]
    assert rels[1]["files"] == ["release.csv", "release.json"] and rels[1]["summary"]["mechanism"] == "UG"
    assert store.release_file("abc123", "release.csv") == b"a,b\n1,2\n"
    assert store.releases("points:other") == []
    with pytest.raises(DPCoreError, match="no stored file"):
        store.release_file("abc123", "missing.csv")


def _csv(rows: int) -> bytes:
    return ("area,count\n" + "".join(f"a{i},{i % 97}\n" for i in range(rows))).encode()


def test_release_files_are_stored_compressed_and_read_back_as_published(tmp_path: Path) -> None:
    store = ledger_store.LedgerStore(tmp_path / "l.sqlite")
    store.ledger("points:z", budget.pure(1.0))
    data = _csv(20_000)
    store.record_release("points:z", "big", "points", {"mechanism": "UG"}, {"release.csv": data})
    assert store.release_file("big", "release.csv") == data
    size = store.storage()
    assert size["files"] == 1 and size["files_published_bytes"] == len(data)
    assert size["files_bytes"] < len(data) / 2  # compressed, not the bytes as published
    assert size["database_bytes"] >= size["files_bytes"]


def test_new_files_are_zstandard_and_gzip_rows_of_the_last_version_still_read(tmp_path: Path) -> None:
    """This version stores Zstandard (``encoding`` 'zstd', the published size beside it); files the
    previous version stored gzip-compressed read back as published, through the history's reader and
    the series' re-serving reader alike."""
    import gzip
    import sqlite3

    store = ledger_store.LedgerStore(tmp_path / "l.sqlite")
    store.ledger("points:z", budget.pure(1.0))
    new, old = _csv(5_000), _csv(3_000)
    store.record_release("points:z", "new", "points", {"mechanism": "UG"}, {"release.csv": new})
    store.record_release("points:z", "old", "points", {"mechanism": "UG"}, {"release.csv": b"placeholder"})
    with sqlite3.connect(store.path) as con:  # as the previous version wrote it: gzip, level 1, mtime 0
        con.execute("UPDATE release_files SET data = ?, encoding = 'gzip', size = ? WHERE release_id = 'old'",
                    (gzip.compress(old, compresslevel=1, mtime=0), len(old)))
        [(encoding, size)] = con.execute("SELECT encoding, size FROM release_files WHERE release_id = 'new'")
    assert (encoding, size) == ("zstd+crc32", len(new))
    assert store.release_file("new", "release.csv") == new
    assert store.release_file("old", "release.csv") == old
    from dpcore.privacy.series_ledger import SeriesBudget

    series = SeriesBudget(store, "p", "points", None, budget.pure(1.0), None, None)  # reads store only
    assert series.files("new") == {"release.csv": new} and series.files("old") == {"release.csv": old}


def test_a_damaged_stored_file_is_refused_never_served_altered(tmp_path: Path) -> None:
    """Zstandard frames as pyarrow writes them carry no checksum: one flipped bit decompressed to other
    numbers in three of four trials (review finding).  The CRC-32 kept with each file refuses them, as
    a damaged gzip row, a missing size or one that lies."""
    import gzip
    import sqlite3

    store = ledger_store.LedgerStore(tmp_path / "l.sqlite")
    store.ledger("points:z", budget.pure(1.0))
    data = _csv(5_000)
    store.record_release("points:z", "r", "points", {"mechanism": "UG"}, {"release.csv": data})
    with sqlite3.connect(store.path) as con:
        [(blob,)] = con.execute("SELECT data FROM release_files")
    blob = bytes(blob)
    damaged = "The file 'release.csv' of release r is damaged in the budget database"
    rng = np.random.default_rng(4)
    for bit in rng.choice(len(blob) * 8, 40, replace=False):  # anywhere: frame, payload, checksum
        bad = bytearray(blob)
        bad[bit // 8] ^= 1 << (bit % 8)
        with sqlite3.connect(store.path) as con:
            con.execute("UPDATE release_files SET data = ?", (bytes(bad),))
        with pytest.raises(InputError, match=damaged):
            store.release_file("r", "release.csv")
    cases = [(blob, "zstd+crc32", None), (blob, "zstd+crc32", len(data) + 1), (blob, "zstd+crc32", len(data) - 1),
             (blob, "zstd+crc32", -1), (blob[:3], "zstd+crc32", len(data)),
             (gzip.compress(data)[:-9] + b"x" * 9, "gzip", len(data)), (b"not gzip", "gzip", None)]
    for stored, encoding, size in cases:
        with sqlite3.connect(store.path) as con:
            con.execute("UPDATE release_files SET data = ?, encoding = ?, size = ?", (stored, encoding, size))
        with pytest.raises(InputError, match=damaged):
            store.release_file("r", "release.csv")
    with sqlite3.connect(store.path) as con:
        con.execute("UPDATE release_files SET data = ?, encoding = 'zstd+crc32', size = ?", (blob, len(data)))
    assert store.release_file("r", "release.csv") == data


def test_an_unknown_encoding_names_a_newer_version(tmp_path: Path) -> None:
    import sqlite3

    store = ledger_store.LedgerStore(tmp_path / "l.sqlite")
    store.ledger("points:z", budget.pure(1.0))
    store.record_release("points:z", "r", "points", {"mechanism": "UG"}, {"release.csv": b"a\n1\n"})
    with sqlite3.connect(store.path) as con:
        con.execute("UPDATE release_files SET encoding = 'brotli'")
    with pytest.raises(InputError, match="unknown encoding 'brotli' .*newer version"):
        store.release_file("r", "release.csv")


def test_rows_of_an_earlier_version_stored_uncompressed_still_read(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.sqlite"
    # the schema as earlier versions wrote it: without the columns a new database is now made with
    # (datasets.unit; release_files.encoding, size, removed), which opening the store adds
    earlier = ledger_store._SCHEMA.replace("    encoding TEXT,\n    size INTEGER,\n    removed TEXT,\n", "")
    earlier = earlier.replace("    created TEXT NOT NULL,\n    unit TEXT\n", "    created TEXT NOT NULL\n")
    assert "encoding" not in earlier and "unit" not in earlier
    with sqlite3.connect(path) as con:  # the schema and rows as earlier versions wrote them
        con.executescript(earlier)
        con.execute("INSERT INTO releases VALUES ('old1', 'points:o', 'points', '2024-01-02T03:04', '{}')")
        con.execute("INSERT INTO release_files VALUES ('old1', 'release.csv', ?)", (b"a,b\n1,2\n",))
    store = ledger_store.LedgerStore(path)
    assert store.release_file("old1", "release.csv") == b"a,b\n1,2\n"
    assert store.releases("points:o")[0]["files"] == ["release.csv"]
    assert store.storage()["files_published_bytes"] == len(b"a,b\n1,2\n")


def test_removing_old_release_files_keeps_the_budget_and_lists_them_as_removed(tmp_path: Path, monkeypatch) -> None:
    store = ledger_store.LedgerStore(tmp_path / "l.sqlite")
    led = store.ledger("points:h", budget.pure(1.0))
    for i, day in enumerate(["2024-01-10", "2024-03-10", "2024-06-10"]):
        monkeypatch.setattr(ledger_store, "minute_now", lambda day=day: f"{day}T12:00")
        led.spend(budget.pure(0.2), f"release {i}")
        store.record_release("points:h", f"r{i}", "points", {"mechanism": "UG"},
                             {"release.csv": _csv(5_000 + i), "release.json": b"{}"})
    store.ledger("points:other", budget.pure(1.0))
    store.record_release("points:other", "x0", "points", {}, {"release.csv": _csv(10)})
    before = store.ledger("points:h", budget.pure(1.0)).to_dict()
    db_before = store.storage()["database_bytes"]

    monkeypatch.setattr(ledger_store, "minute_now", lambda: "2024-07-01T09:30")
    # older than a chosen date, for the chosen budgets only
    assert store.remove_release_files(before="2024-04-01", fingerprints=["points:h"]) == 4
    assert store.ledger("points:h", budget.pure(1.0)).to_dict() == before  # the budget is untouched
    rels = {r["release_id"]: r for r in store.releases("points:h")}
    assert rels["r2"]["files"] == ["release.csv", "release.json"] and rels["r2"]["removed"] == {}
    for rid in ("r0", "r1"):
        assert rels[rid]["files"] == [] and rels[rid]["summary"] == {"mechanism": "UG"}
        assert rels[rid]["removed"] == {"release.csv": "2024-07-01T09:30", "release.json": "2024-07-01T09:30"}
        with pytest.raises(DPCoreError, match="removed from the history on 2024-07-01 09:30 UTC"):
            store.release_file(rid, "release.csv")
    assert store.release_file("x0", "release.csv") == _csv(10)  # another budget's files stay
    # chosen releases; removing twice removes nothing more
    assert store.remove_release_files(release_ids=["r2"]) == 2
    assert store.remove_release_files(release_ids=["r2"]) == 0
    assert store.remove_release_files(release_ids=[]) == 0
    size = store.storage()
    assert size["removed"] == 6 and size["files"] == 1
    assert size["database_bytes"] < db_before  # compacted
    assert store.ledger("points:h", budget.pure(1.0)).to_dict() == before
    with pytest.raises(DPCoreError, match="Say which"):
        store.remove_release_files()


def test_location_from_the_environment_and_an_unwritable_path(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DPCORE_LEDGER_DB", str(tmp_path / "sub" / "db.sqlite"))
    assert ledger_store.default_path() == tmp_path / "sub" / "db.sqlite"
    assert ledger_store.default_store().path == tmp_path / "sub" / "db.sqlite"
    monkeypatch.delenv("DPCORE_LEDGER_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert ledger_store.default_path() == tmp_path / "xdg" / "dpcore" / "ledger.sqlite"
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(DPCoreError, match="DPCORE_LEDGER_DB"):
        ledger_store.LedgerStore(blocker / "db.sqlite")
