"""The persistent budget database (dpcore.privacy.ledger_store): survives sessions, refuses concurrent overspending."""

from __future__ import annotations

import multiprocessing as mp
import threading
from pathlib import Path

import pytest

from dpcore.errors import BudgetError, DPCoreError
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
