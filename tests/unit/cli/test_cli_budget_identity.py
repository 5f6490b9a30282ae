"""The same data finds the same budget (issue 26, items 11, 12, 14, 15 and 17): keys that survive an
empty row or a re-saved file, a ledger file that cannot start a database budget afresh."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from test_cli import assert_user_error

from dpcore.cli import main
from dpcore.errors import BudgetError


def _ok(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    rc = main(argv)
    out = capsys.readouterr()
    assert rc == 0, out.err
    return out.out


def _one_state(path: Path, empty_row: bool = False) -> Path:
    """A single-state table of counties; ``empty_row`` adds a row of another state with 0 people."""
    rows = [{"state": "01", "county": f"{c:03d}", "pop": 100 + 7 * c} for c in range(1, 9)]
    if empty_row:
        rows.append({"state": "02", "county": "101", "pop": 0})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _hier(inp: Path, out: Path, epsilon: str, *extra: str) -> list[str]:
    return ["release", "hierarchy", "--input", str(inp), "--levels", "state,county", "--count", "pop",
            "--mechanism", "exact", f"--epsilon={epsilon}", "--input-lists-all-areas", "--out", str(out), *extra]


def test_an_empty_row_does_not_open_a_second_census_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Item 11: the key's top level is chosen among codes with people, so a row of another state with
    0 people (which made 'state' the keyed level) finds the same budget."""
    plain = _one_state(tmp_path / "plain.csv")
    padded = _one_state(tmp_path / "padded.csv", empty_row=True)
    _ok(_hier(plain, tmp_path / "a", "0.7"), capsys)
    line = assert_user_error(main(_hier(padded, tmp_path / "b", "0.7")), capsys)
    assert "Not enough privacy budget" in line


def test_a_budget_opened_under_the_earlier_rule_is_found_by_its_alias(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A budget kept under the earlier rule's key (state counted over every row, the empty one
    included) is still found: that key is kept as an alias of the data."""
    from dpcore.core.session import Charge, Session
    from dpcore.data.engines.base import codes_fingerprint
    from dpcore.privacy.budget import pure

    padded = _one_state(tmp_path / "padded.csv", empty_row=True)
    df = pd.read_csv(padded, dtype=str)
    earlier = codes_fingerprint("table", [df["state"]], df["pop"].astype(int).to_numpy())
    session = Session()
    old = session.budget("areas", earlier, default=pure(1.0))
    session.release(old, Charge(pure(0.8), "released by an earlier version"), lambda: None)
    line = assert_user_error(main(_hier(padded, tmp_path / "b", "0.5")), capsys)
    assert "Not enough privacy budget" in line
    _ok(_hier(padded, tmp_path / "c", "0.2"), capsys)


def test_a_ledger_file_cannot_restart_a_budget_the_database_holds(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Item 17: a JSON --ledger consults the database; data whose budget is there is refused."""
    plain = _one_state(tmp_path / "plain.csv")
    other = tmp_path / "other.csv"
    pd.DataFrame({"state": ["01", "01", "02", "02"], "county": ["001", "003", "001", "005"],
                  "pop": [5, 9, 4, 6]}).to_csv(other, index=False)
    ledger = ["--ledger", str(tmp_path / "ledger.json")]
    _ok(_hier(other, tmp_path / "o", "0.5", *ledger), capsys)  # data the database does not know: allowed
    _ok(_hier(plain, tmp_path / "a", "0.9"), capsys)
    line = assert_user_error(main(_hier(plain, tmp_path / "b", "0.5", "--ledger", str(tmp_path / "l2.json"))),
                             capsys)
    assert "already holds a budget of this data" in line and not (tmp_path / "l2.json").exists()


def test_a_population_budget_protects_persons(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Item 15: a census table opening a population no longer makes it a record budget that then takes
    record-level points at 1x; a count table joins as one person only when the curator confirms it."""
    from test_cli import release_args, write_points

    tracts = _one_state(tmp_path / "table.csv")
    pts = write_points(tmp_path / "points.csv")
    pop = ["--population", "survey"]
    line = assert_user_error(main(_hier(tracts, tmp_path / "a", "0.2", *pop)), capsys)
    assert "person or group unit" in line and "--each-person-counted-once" in line
    _ok(_hier(tracts, tmp_path / "b", "0.2", *pop, "--each-person-counted-once"), capsys)
    rec = json.loads((tmp_path / "b" / "release.json").read_text("utf-8"))
    assert rec["ledger"]["unit"]["entity"] == "person"
    line = assert_user_error(main(release_args(pts, tmp_path / "c", epsilon="0.2", extra=pop)), capsys)
    assert "person or group unit" in line  # record-level points cannot join the population


def _points(path: Path, fmt: str, extra: tuple[float, float] | None = None) -> Path:
    """300 points at full double precision (``fmt`` "r": as Python writes them; ".15g": as a
    spreadsheet re-saves them); ``extra`` adds one point (lat, lon)."""
    import numpy as np

    rng = np.random.default_rng(3)
    lat, lon = rng.uniform(40.6, 40.9, 300), rng.uniform(-74.0, -73.75, 300)
    rows = [(float(a), float(o)) for a, o in zip(lat, lon, strict=True)] + ([extra] if extra else [])
    path.write_text("lat,lon\n" + "".join(f"{a!r},{o!r}\n" if fmt == "r" else f"{a:.15g},{o:.15g}\n"
                                          for a, o in rows), "utf-8")
    return path


def test_a_re_saved_points_file_finds_its_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Item 12: a %.15g round trip, and one point far outside the bounds, keep the budget (rounded
    keys of every point and of the points inside the bounds are aliases of it)."""
    from test_cli import release_args

    exact = _points(tmp_path / "exact.csv", "r")
    resaved = _points(tmp_path / "resaved.csv", ".15g")
    far = _points(tmp_path / "far.csv", "r", extra=(10.0, 10.0))
    assert exact.read_text() != resaved.read_text()
    _ok(release_args(exact, tmp_path / "a", epsilon="0.7"), capsys)
    for other in (resaved, far):
        line = assert_user_error(main(release_args(other, tmp_path / "b", epsilon="0.7")), capsys)
        assert "Not enough privacy budget" in line
    _ok(release_args(far, tmp_path / "c", epsilon="0.3"), capsys)  # the same budget's 0.3 left


def test_a_file_read_by_duckdb_finds_the_budget_of_the_same_points_read_in_memory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Item 12 for large files: DuckDB computes the same rounded keys as the in-memory read, so a
    re-saved copy with one far-away point, counted by DuckDB, draws on the budget the in-memory
    release spent (before, engines kept the exact key only and opened a fresh budget)."""
    from test_cli import release_args

    exact = _points(tmp_path / "exact.csv", "r")
    far = _points(tmp_path / "far.csv", ".15g", extra=(10.0, 10.0))
    _ok(release_args(exact, tmp_path / "a", epsilon="0.7"), capsys)
    duck = ["--engine", "duckdb"]
    line = assert_user_error(main(release_args(far, tmp_path / "b", epsilon="0.7", extra=duck)), capsys)
    assert "Not enough privacy budget" in line
    _ok(release_args(far, tmp_path / "c", epsilon="0.3", extra=duck), capsys)


def test_near_identical_points_are_asked_about_and_the_answer_is_kept(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Item 14: the same file minus one row would get a fresh budget; the CLI says so and refuses until
    --matches-spent-data answers, records the answer, and never prints a count or a coordinate."""
    from test_cli import release_args

    full = _points(tmp_path / "full.csv", "r")
    lines = full.read_text().splitlines()
    short = tmp_path / "short.csv"
    short.write_text("\n".join(lines[:-1]) + "\n", "utf-8")  # one row fewer
    _ok(release_args(full, tmp_path / "a", epsilon="0.7"), capsys)
    line = assert_user_error(main(release_args(short, tmp_path / "b", epsilon="0.5")), capsys)
    assert "closely matches" in line and "--matches-spent-data" in line
    assert "299" not in line and "300" not in line and "40." not in line  # nothing about the data
    line = assert_user_error(main(release_args(short, tmp_path / "b", epsilon="0.5",
                                               extra=["--matches-spent-data", "same"])), capsys)
    assert "Not enough privacy budget" in line  # drew on the spent budget (0.3 left)
    # recorded: asked no more, and still the same budget
    line = assert_user_error(main(release_args(short, tmp_path / "c", epsilon="0.5")), capsys)
    assert "Not enough privacy budget" in line


def test_near_identical_points_counted_by_duckdb_are_asked_about(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Item 14 for large files: the engines compute the near-match profile in their pass, so the same
    file minus one row, counted by DuckDB, is asked about as an in-memory read is (before, an engine's
    read had no profile and opened a fresh budget without a word)."""
    from test_cli import release_args

    full = _points(tmp_path / "full.csv", "r")
    short = tmp_path / "short.csv"
    short.write_text("\n".join(full.read_text().splitlines()[:-1]) + "\n", "utf-8")
    _ok(release_args(full, tmp_path / "a", epsilon="0.7"), capsys)
    duck = ["--engine", "duckdb"]
    line = assert_user_error(main(release_args(short, tmp_path / "b", epsilon="0.5", extra=duck)), capsys)
    assert "closely matches" in line and "--matches-spent-data" in line
    line = assert_user_error(main(release_args(short, tmp_path / "b", epsilon="0.5",
                                               extra=[*duck, "--matches-spent-data", "same"])), capsys)
    assert "Not enough privacy budget" in line


def test_other_people_answered_once_keep_their_own_budget(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from test_cli import release_args

    full = _points(tmp_path / "full.csv", "r")
    short = tmp_path / "short.csv"
    short.write_text("\n".join(full.read_text().splitlines()[:-1]) + "\n", "utf-8")
    _ok(release_args(full, tmp_path / "a", epsilon="0.7"), capsys)
    _ok(release_args(short, tmp_path / "b", epsilon="0.5", extra=["--matches-spent-data", "different"]), capsys)
    _ok(release_args(short, tmp_path / "c", epsilon="0.5"), capsys)  # not asked again: its own budget


def _counties(path: Path, drop: int = 0) -> Path:
    """200 counties of one state with about 1,000 people each; ``drop`` leaves out that many rows."""
    rows = [{"state": "01", "county": f"{c:03d}", "pop": 900 + (37 * c) % 200} for c in range(1, 201)]
    pd.DataFrame(rows[drop:]).to_csv(path, index=False)
    return path


def _trips(tmp_path: Path, drop: int = 0) -> tuple[Path, Path]:
    """A public list of 6 districts in 2 regions and 2,000 trips between them (``drop`` rows fewer)."""
    import numpy as np

    rng = np.random.default_rng(5)
    codes = [f"{r:02d}{d:02d}" for r in (1, 2) for d in (1, 2, 3)]
    areas = tmp_path / "areas.csv"
    pd.DataFrame({"region": [c[:2] for c in codes], "district": [c[2:] for c in codes], "code": codes}).to_csv(
        areas, index=False)
    trips = tmp_path / f"trips{drop}.csv"
    pd.DataFrame({"origin": rng.choice(codes, 2000), "destination": rng.choice(codes, 2000)})[drop:].to_csv(
        trips, index=False)
    return trips, areas


def _od(trips: Path, areas: Path, out: Path, rho: str, *extra: str) -> list[str]:
    return ["release", "od", "--input", str(trips), "--hierarchy", str(areas), "--levels", "region,district",
            "--rho", rho, "--budget-cap", "1", "--out", str(out), *extra]


@pytest.mark.parametrize("kind", ["hierarchy", "census", "od"])
def test_near_identical_tables_and_trips_are_asked_about(kind: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Item 14 for areas and trips: the same table or trips file minus one row would get a fresh
    budget; the CLI refuses until --matches-spent-data answers, and 'same' draws on the spent budget."""
    if kind == "od":
        full, areas = _trips(tmp_path)
        short, _ = _trips(tmp_path, drop=1)

        def args(inp: Path, out: str, amount: str, *extra: str) -> list[str]:
            return _od(inp, areas, tmp_path / out, amount, *extra)
    else:
        full, short = _counties(tmp_path / "full.csv"), _counties(tmp_path / "short.csv", drop=1)

        def args(inp: Path, out: str, amount: str, *extra: str) -> list[str]:
            if kind == "hierarchy":
                return _hier(inp, tmp_path / out, amount, *extra)
            return ["release", "census", "--input", str(inp), "--levels", "state,county", "--count", "pop",
                    f"--epsilon={amount}", "--out", str(tmp_path / out), *extra]
    _ok(args(full, "a", "0.7"), capsys)
    line = assert_user_error(main(args(short, "b", "0.4")), capsys)
    assert "closely matches" in line and "--matches-spent-data" in line
    assert "199" not in line and "1999" not in line  # nothing about the data
    line = assert_user_error(main(args(short, "b", "0.4", "--matches-spent-data", "same")), capsys)
    assert "not enough" in line.lower()  # drew on the spent budget (0.3 left)
    _ok(args(short, "c", "0.05"), capsys)  # recorded: not asked again, the same budget's remainder


def test_a_table_record_claims_one_person_only_when_confirmed(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Item 15: a count table not confirmed to count each person once is charged as one counted record;
    its release.json says so (it said 'one person' whatever was confirmed), and says one person once
    --each-person-counted-once confirms it."""
    table = _one_state(tmp_path / "table.csv")
    for extra, words in (((), "one counted record"), (("--each-person-counted-once",), "one person (")):
        out = tmp_path / f"h{len(extra)}"
        _ok(_hier(table, out, "0.1", *extra), capsys)
        rec = json.loads((out / "release.json").read_text("utf-8"))
        assert rec["privacy"]["unit_of_privacy"].startswith(words), rec["privacy"]["unit_of_privacy"]
        assert rec["ledger"]["entries"][-1]["unit"]["entity"] == ("person" if extra else "record")
        census = ["release", "census", "--input", str(table), "--levels", "state,county", "--count", "pop",
                  "--epsilon=0.1", "--areas", str(table), "--out", str(tmp_path / f"c{len(extra)}"), *extra]
        _ok(census, capsys)
        rec = json.loads((tmp_path / f"c{len(extra)}" / "release.json").read_text("utf-8"))
        assert rec["privacy"]["unit_of_privacy"].startswith(words), rec["privacy"]["unit_of_privacy"]


def test_a_budget_opened_unused_gives_way_to_the_spent_one_another_key_leads_to(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Item 12, CLI side of the app's load-time budget: the same points with one far-away point were
    loaded in the app (which opens their budget, unused, under their key of every point) after a CLI
    release with bounds spent the budget of the points inside them.  A CLI run of a re-saved copy of the
    loaded file, whose keys lead to both, draws on the spent budget (before: on the first found, the
    unused one, a second cap for the same points)."""
    from test_cli import release_args

    from dpcore.core.session import Session
    from dpcore.data.engines.base import points_fingerprint, tolerant_points_fingerprints
    from dpcore.data.points import load_points_file
    from dpcore.privacy.budget import pure

    inner = _points(tmp_path / "inner.csv", "r")
    loaded = _points(tmp_path / "loaded.csv", "r", extra=(10.0, 10.0))
    resaved = _points(tmp_path / "resaved.csv", ".15g", extra=(10.0, 10.0))
    _ok(release_args(inner, tmp_path / "a", epsilon="0.7"), capsys)
    table = load_points_file(loaded, loaded.name)  # the app's load: its keys, its budget opened unused
    session, fp = Session(), points_fingerprint(table.lon, table.lat)
    session.adopt_keys("points", fp, tolerant_points_fingerprints(table.lon, table.lat))
    assert session.budget("points", fp, default=pure(1.0)).spent == 0
    line = assert_user_error(main(release_args(resaved, tmp_path / "b", epsilon="0.7")), capsys)
    assert "Not enough privacy budget" in line
    _ok(release_args(resaved, tmp_path / "c", epsilon="0.3"), capsys)  # the spent budget's 0.3 left
    assert session.budget("points", fp, default=pure(1.0)).spent == pytest.approx(1.0)  # the app finds it too


def test_the_apps_used_budget_and_the_clis_count_together(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Privacy review of item 12: the CLI spent 0.6 on the points inside its bounds; the app spent 0.3 on
    the same points with one far-away point (its own budget: its keys then led to no other).  A CLI run
    of a re-saved copy of the app's file has keys that lead to both used budgets: they form one group,
    so 0.2 more is refused (0.6 + 0.3 + 0.2 > 1; before: 0.8 of one cap), on either side; 0.1 fits."""
    from test_cli import release_args

    from dpcore.core.session import Charge, Session
    from dpcore.data.engines.base import points_fingerprint, tolerant_points_fingerprints
    from dpcore.data.points import load_points_file
    from dpcore.privacy.budget import pure

    inner = _points(tmp_path / "inner.csv", "r")
    loaded = _points(tmp_path / "loaded.csv", "r", extra=(10.0, 10.0))
    resaved = _points(tmp_path / "resaved.csv", ".15g", extra=(10.0, 10.0))
    _ok(release_args(inner, tmp_path / "a", epsilon="0.6"), capsys)
    table = load_points_file(loaded, loaded.name)  # the app's load: its keys lead to no budget yet
    session, fp = Session(), points_fingerprint(table.lon, table.lat)
    session.adopt_keys("points", fp, tolerant_points_fingerprints(table.lon, table.lat))
    app = session.budget("points", fp, default=pure(1.0))
    session.release(app, Charge(pure(0.3), "released in the app"), lambda: None)
    line = assert_user_error(main(release_args(resaved, tmp_path / "b", epsilon="0.2")), capsys)
    assert "shared with another budget of the same data" in line
    line = assert_user_error(main(release_args(inner, tmp_path / "c", epsilon="0.2")), capsys)
    assert "shared with another budget of the same data" in line
    with pytest.raises(BudgetError, match="shared with another budget"):
        app.check(pure(0.2))
    _ok(release_args(inner, tmp_path / "d", epsilon="0.1"), capsys)
    with pytest.raises(BudgetError, match="shared with another budget"):
        app.check(pure(0.05))
