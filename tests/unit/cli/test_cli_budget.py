"""The command line is accounted by default, through the one session, in the app's budget database."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest
from test_cli import assert_user_error, hier_args, release_args, write_points, write_tracts

from dpcore.cli import main
from dpcore.privacy.ledger_store import default_path


def _ok(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    rc = main(argv)
    out = capsys.readouterr()
    assert rc == 0, out.err
    return out.out


def test_a_release_is_accounted_by_default_with_the_apps_cap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pts = write_points(tmp_path / "points.csv")
    line = _ok(release_args(pts, tmp_path / "a", epsilon="0.6"), capsys)
    assert "0.4 of the budget left in the budget database" in line and str(default_path()) in line
    rec = json.loads((tmp_path / "a" / "release.json").read_text("utf-8"))
    led = rec["ledger"]
    assert led["accounted"] is True and led["cap"]["value"] == 1.0 and led["spent"] == pytest.approx(0.6)
    assert led["unit"]["entity"] == "record" and "dataset" not in led
    assert rec["accounted"] is True and not any("NOT ACCOUNTED" in n for n in rec["notes"])
    assert "accounted" not in pd.read_csv(tmp_path / "a" / "release.csv").columns
    # the same points reordered, with the columns swapped, gzipped and renamed: the same budget
    df = pd.read_csv(pts).iloc[::-1][["lon", "lat"]]
    other = tmp_path / "renamed.csv.gz"
    with gzip.open(other, "wt") as fh:
        df.to_csv(fh, index=False)
    line = assert_user_error(main(release_args(other, tmp_path / "b", epsilon="0.6")), capsys)
    assert "Not enough privacy budget" in line


def test_no_budget_charges_nothing_and_the_record_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pts = write_points(tmp_path / "points.csv")
    for out in ("a", "b"):  # twice the default cap: nothing is charged
        line = _ok(release_args(pts, tmp_path / out, epsilon="0.6", extra=["--no-budget"]), capsys)
        assert "not accounted" in line
    rec = json.loads((tmp_path / "a" / "release.json").read_text("utf-8"))
    assert rec["ledger"] == {"accounted": False, "note": rec["ledger"]["note"]}
    assert "not accounted" in rec["ledger"]["note"]
    # said first, where a data user looks (issue 26 item 16): the record's top, its privacy section,
    # its first note, every row of release.csv and the GeoJSON
    assert list(rec).index("accounted") < list(rec).index("mechanism") and rec["accounted"] is False
    assert rec["privacy"]["accounted"] is False and "NOT ACCOUNTED" in rec["privacy"]["not_accounted"]
    assert rec["notes"][0].startswith("NOT ACCOUNTED")
    table = pd.read_csv(tmp_path / "a" / "release.csv")
    assert table["accounted"].str.startswith("no (--no-budget").all() and len(table) > 0
    geo = json.loads((tmp_path / "a" / "release.geojson").read_text("utf-8"))
    assert geo["accounted"] is False and geo["not_accounted"].startswith("NOT ACCOUNTED") and geo["features"]
    _ok(release_args(pts, tmp_path / "c", epsilon="1"), capsys)  # the whole default budget is still there
    line = assert_user_error(main(release_args(pts, tmp_path / "d", extra=["--no-budget", "--budget-cap", "2"])),
                             capsys)
    assert "--no-budget" in line


def test_one_budget_option_at_a_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pts = write_points(tmp_path / "points.csv")
    line = assert_user_error(main(release_args(pts, tmp_path / "a", extra=[
        "--ledger", str(tmp_path / "l.json"), "--no-budget"])), capsys)
    assert "not both" in line


def test_a_ledger_file_belongs_to_the_data_it_was_made_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = tmp_path / "ledger.json"
    a = write_points(tmp_path / "a.csv", seed=1)
    b = write_points(tmp_path / "b.csv", seed=2)
    _ok(release_args(a, tmp_path / "a", epsilon="0.3", extra=["--ledger", str(ledger)]), capsys)
    line = assert_user_error(main(release_args(b, tmp_path / "b", epsilon="0.3", extra=["--ledger", str(ledger)])),
                             capsys)
    assert "other data" in line
    kept = json.loads(ledger.read_text("utf-8"))
    assert kept["dataset"].startswith("k1:") and len(kept["entries"]) == 1  # a keyed hash, not the data's


def test_points_and_a_census_table_of_one_population_share_its_budget(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    rows = ["lat,lon,uid"] + [f"{40.6 + i * 0.001:.6f},{-73.9 + i * 0.0007:.6f},{i % 7}" for i in range(120)]
    pts = tmp_path / "people.csv"
    pts.write_text("\n".join(rows) + "\n", "utf-8")
    person = ["--user-col", "uid", "--user-cap", "5"]
    tracts = write_tracts(tmp_path / "tracts.csv")
    pop = ["--population", "survey 2026"]
    once = "--each-person-counted-once"  # the table counts each person once: it protects one person
    _ok(release_args(pts, tmp_path / "p", epsilon="0.5", extra=[*pop, *person]), capsys)
    line = assert_user_error(main(hier_args(tracts, tmp_path / "h", *pop, once, budget_flag="--epsilon=0.6")), capsys)
    assert "Not enough privacy budget" in line  # 0.5 of the population's 1 is gone
    _ok(hier_args(tracts, tmp_path / "h", *pop, once, budget_flag="--epsilon=0.5"), capsys)
    # once bound, the data finds the population's budget without naming it
    line = assert_user_error(main(release_args(pts, tmp_path / "q", epsilon="0.1", extra=person)), capsys)
    assert "Not enough privacy budget" in line


def test_a_record_level_release_of_person_data_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = ["lat,lon,uid"] + [f"{40.6 + i * 0.001:.6f},{-73.9 + i * 0.0007:.6f},{i % 7}" for i in range(120)]
    pts = tmp_path / "people.csv"
    pts.write_text("\n".join(rows) + "\n", "utf-8")
    _ok(release_args(pts, tmp_path / "a", epsilon="0.2", extra=["--user-col", "uid", "--user-cap", "5"]), capsys)
    line = assert_user_error(main(release_args(pts, tmp_path / "b", epsilon="0.2")), capsys)
    assert "protected by nothing" in line
    # another cap protects the same people: it shares the budget
    _ok(release_args(pts, tmp_path / "c", epsilon="0.2", extra=["--user-col", "uid", "--user-cap", "2"]), capsys)


def test_a_table_budget_kept_under_the_earlier_key_rule_is_found_again(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from dpcore.areas.census_tables import legacy_fingerprint
    from dpcore.core.session import Charge, Session
    from dpcore.data.code_tables import read_code_table
    from dpcore.privacy.budget import pure
    from dpcore.privacy.ledger_store import LedgerStore

    tracts = write_tracts(tmp_path / "tracts.csv")
    # a budget an earlier version kept under its plain key of the whole table's text
    old = LedgerStore(default_path()).ledger(f"census:{legacy_fingerprint(read_code_table(tracts))}", pure(1.0))
    Session.unaccounted().release(old, Charge(pure(0.8), "earlier release"), lambda: None)
    line = assert_user_error(main(hier_args(tracts, tmp_path / "h", budget_flag="--epsilon=0.5")), capsys)
    assert "Not enough privacy budget" in line and "0.2" in line  # the earlier 0.8 still counts
