"""A charge never loses its release (issue 26, items 13 and 20): the files are kept with the charge's
journal before they are written, a run stopped before its files are written is listed as "charged,
not delivered" and ``history --serve`` writes the same bytes again, with no new charge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import assert_user_error, release_args, write_points

from dpcore.cli import main
from dpcore.core import record
from dpcore.privacy import budget, ledger_store
from dpcore.privacy.ledger_store import LedgerStore, default_path


class Killed(BaseException):
    """A kill: not an Exception, nothing catches it."""


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _spent() -> float:
    return sum(d["spent"] for d in json.loads(_history(["--json"]))) if default_path().exists() else 0.0


def _history(extra: list[str]) -> str:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["history", *extra]) == 0
    return buf.getvalue()


def test_a_first_release_says_it_opened_a_new_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pts = write_points(tmp_path / "points.csv")
    assert main(release_args(pts, tmp_path / "a", epsilon="0.25")) == 0
    assert "new budget for this data: cap ε = 1" in capsys.readouterr().out
    assert main(release_args(pts, tmp_path / "b", epsilon="0.25")) == 0
    assert "new budget" not in capsys.readouterr().out


def test_a_run_killed_after_the_charge_is_listed_and_re_served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    pts = write_points(tmp_path / "points.csv")
    real = record.write_files

    def killed(files: object, out: object) -> list[Path]:
        raise Killed

    monkeypatch.setattr(record, "write_files", killed)
    with pytest.raises(Killed):
        main(release_args(pts, tmp_path / "out", epsilon="0.25"))
    monkeypatch.setattr(record, "write_files", real)
    assert not (tmp_path / "out").exists()
    listed = _history([])
    assert "points data (unnamed)" in listed and "charged, not delivered to" in listed and "--serve" in listed
    rid = json.loads(_history(["--json"]))[0]["undelivered"][0]["release_id"]
    spent = _spent()
    assert spent == pytest.approx(0.25)
    assert main(["history", "--serve", rid, "--out", str(tmp_path / "again")]) == 0
    assert "no new charge" in capsys.readouterr().out
    got = _files(tmp_path / "again")
    store = LedgerStore(default_path())
    assert got == {n: store.release_file(rid, n) for n in got} and "release.csv" in got and "release.json" in got
    assert json.loads(got["release.json"])["release_id"] == rid
    assert _spent() == pytest.approx(spent)  # no new charge
    assert "charged, not delivered" not in _history([])  # delivered now


def test_a_full_disk_says_the_budget_was_charged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    pts = write_points(tmp_path / "points.csv")

    def full(files: object, out: object) -> list[Path]:
        raise OSError(28, "No space left on device", str(out))

    monkeypatch.setattr(record, "write_files", full)
    line = assert_user_error(main(release_args(pts, tmp_path / "out", epsilon="0.25")), capsys)
    assert "The budget WAS charged (ε = 0.25)" in line and "No space left on device" in line
    assert "history --serve" in line and not (tmp_path / "out").exists()


def test_a_storage_fault_is_one_line_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pts = write_points(tmp_path / "points.csv")
    assert main(release_args(pts, tmp_path / "a", epsilon="0.25")) == 0
    default_path().write_bytes(b"")  # the database emptied while its key file stays
    line = assert_user_error(main(release_args(pts, tmp_path / "b", epsilon="0.25")), capsys)
    assert "emptied or replaced while in use" in line and "Restore" in line  # this process had it open
    ledger_store._DEFAULT.clear()  # a new process
    line = assert_user_error(main(release_args(pts, tmp_path / "b", epsilon="0.25")), capsys)
    assert "was emptied, truncated or deleted" in line and "Restore" in line
    ledger_store._DEFAULT.clear()
    key = default_path().with_name(default_path().name + ".key")
    key.write_text("zz not hex\n")
    line = assert_user_error(main(release_args(pts, tmp_path / "c", epsilon="0.25")), capsys)
    assert "not a hex key" in line
    assert budget  # the budget module stays imported for the cap's label
