"""Releases over time in the app (issue 24): the Data step's time controls, the Plan step's horizon
figure, the one-click series release (re-served byte for byte on a second click, nothing charged),
the series files, and History's office view of every budget."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from app_steps import series_session, timed_points
from streamlit.testing.v1 import AppTest

from dpcore.core.session import Session

ROOT = Path(__file__).resolve().parents[2]
APP = "../../app.py"  # relative to this file


def ok(at: AppTest) -> AppTest:
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def test_time_controls_detect_the_column_and_take_the_range_from_the_curator() -> None:
    at = series_session()
    assert at.selectbox(key="_w_series_col_points").value == "Date/Time"
    assert at.session_state["series_settings_points"] is None  # no range typed: no series yet
    assert "public time range" in at.text_input(key="_w_series_start_points").help
    assert "never filled from the data" in at.text_input(key="_w_series_start_points").help
    at.text_input(key="_w_series_start_points").set_value("2014-04-01")
    at.text_input(key="_w_series_end_points").set_value("2014-04-07").run()
    ok(at)
    s = at.session_state["series_settings_points"]
    assert len(s.periods()) == 7 and s.scope == "event"  # two empty days are periods too
    at.selectbox(key="_w_series_period_points").set_value("week").run()
    assert [p.label for p in at.session_state["series_settings_points"].periods()] == ["2014-W14", "2014-W15"]
    at.text_input(key="_w_series_end_points").set_value("not a date").run()
    assert at.error and at.session_state["series_settings_points"] is None


def test_series_release_then_reserve_byte_identical_and_history_table() -> None:
    at = series_session()
    at.text_input(key="_w_series_start_points").set_value("2014-04-01")
    at.text_input(key="_w_series_end_points").set_value("2014-04-06").run()
    ok(at)
    at.switch_page("pages/plan.py").run()
    ok(at)
    labels = [m.label for m in at.metric]
    assert "Horizon, a person in every period (ρ)" in labels
    eps = at.session_state["epsilon"]
    horizon = next(m for m in at.metric if m.label.startswith("Horizon")).value
    assert float(horizon) == float(f"{6 * eps * eps / 2:.2g}")  # ρ = Σ ε²/2 over 6 periods (2 significant digits)
    at.switch_page("pages/release.py").run()
    ok(at)
    button = at.button(key="series_release_points")
    assert button.label.startswith("Release 6 periods — ε = ")
    button.click().run()
    ok(at)
    out = at.session_state["series_out_points"][1]
    assert [o.status for o in out.outcomes] == ["released"] * 6 and out.charged == 6
    assert at.select_slider(key="_w_series_period_shown_points").options == [f"2014-04-0{d}" for d in range(1, 7)]
    at.select_slider(key="_w_series_period_shown_points").set_value("2014-04-03").run()
    ok(at)
    assert "2014-04-03" in at.caption[-1].value or any("2014-04-03:" in c.value for c in at.caption)
    at.button(key="series_release_points").click().run()
    ok(at)
    again = at.session_state["series_out_points"][1]
    assert [o.status for o in again.outcomes] == ["re-served"] * 6 and again.charged == 0
    assert again.files == out.files and [o.files for o in again.outcomes] == [o.files for o in out.outcomes]
    assert any("Re-served all 6 periods" in s.value for s in at.success)
    at.switch_page("pages/export.py").run()
    ok(at)
    assert {"series.csv", "series.json", "Every period's files (zip)"} <= {d.label for d in at.get("download_button")}
    at.switch_page("pages/history.py").run()
    ok(at)
    table = next(d.value for d in at.dataframe if "horizon ρ" in d.value.columns)
    row = table[table["periods"] == 6].iloc[0]
    assert row["kind"] == "points" and "per day" in row["unit"] and "per period" in row["cap"]
    assert row["releases"] == 6


def test_a_series_of_points_with_text_coordinates_left_out() -> None:
    """The Data step's "Leave out" button: the series reads the table the same way (else its periods'
    rows would not match the points kept)."""
    lines = timed_points(3).decode().splitlines()
    for i in (2, 50):
        d, _, lon = lines[i].split(",")
        lines[i] = f"{d},n/a?,{lon}"
    at = ok(AppTest.from_file(APP, default_timeout=240).run())
    at.file_uploader(key="points_upload").set_value(("texty.csv", ("\n".join(lines) + "\n").encode(),
                                                     "text/csv")).run()
    assert at.error and "not numbers" in at.error[0].value
    at.button(key="leave_out_unreadable").click().run()
    ok(at)
    assert at.session_state["dataset"].table.dropped == {"coordinate not a number": 2}
    at.toggle(key="_w_series_on_points").set_value(True).run()
    at.text_input(key="_w_series_start_points").set_value("2014-04-01")
    at.text_input(key="_w_series_end_points").set_value("2014-04-03").run()
    ok(at)
    at.switch_page("pages/release.py").run()
    at.button(key="series_release_points").click().run()
    ok(at)
    assert [o.status for o in at.session_state["series_out_points"][1].outcomes] == ["released"] * 3


def test_a_series_past_the_horizon_cap_is_refused_before_anything_is_charged() -> None:
    at = series_session()
    at.text_input(key="_w_series_start_points").set_value("2014-04-01")
    at.text_input(key="_w_series_end_points").set_value("2014-04-04").run()
    at.switch_page("pages/plan.py").run()
    eps = at.session_state["epsilon"]
    at.number_input(key="_w_series_hcap_points").set_value(3 * eps).run()  # 4 periods need 4 ε
    ok(at)
    assert any("past the horizon cap" in w.value for w in at.warning)
    at.switch_page("pages/release.py").run()
    at.button(key="series_release_points").click().run()
    assert any("horizon cap" in e.value for e in at.error)
    assert "series_out_points" not in at.session_state  # nothing released
    (row,) = [r for r in Session.open(None).budgets() if r["periods"] or r["spent"]] or [None]
    assert row is None  # refused before the first period was charged


def test_a_shorter_range_re_serves_its_days_and_draws_without_a_slider() -> None:
    at = series_session(days=3)
    at.text_input(key="_w_series_start_points").set_value("2014-04-01")
    at.text_input(key="_w_series_end_points").set_value("2014-04-03").run()
    first = release_series(at, "points")
    at.select_slider(key="_w_series_period_shown_points").set_value("2014-04-03").run()
    at.switch_page("pages/data.py").run()
    at.text_input(key="_w_series_end_points").set_value("2014-04-01").run()
    one = release_series(at, "points")
    assert [o.status for o in one.outcomes] == ["re-served"] and one.charged == 0
    assert one.outcomes[0].files == first.outcomes[0].files
    assert not at.get("select_slider") and at.get("plotly_chart")


# ------------------------------------------------------------------ trips between areas

SHARED = ROOT.parent / "shared" / "data"
TAXI = SHARED / "od" / "nyc_green_taxi_trips_2020-04.csv.gz"
ZONES = SHARED / "boundaries" / "nyc_taxi_zone_lookup.csv"


def trips_session() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    at.session_state["kind"] = at.session_state["_w_kind"] = "flows"
    return ok(at.run())


def release_series(at: AppTest, kind: str) -> Any:
    """Release every period from the Release step; the series made."""
    at.switch_page("pages/release.py").run()
    at.button(key=f"series_release_{kind}").click().run()
    ok(at)
    return at.session_state[f"series_out_{kind}"][1]


def weekly(at: AppTest) -> AppTest:
    at.toggle(key="_w_series_on_flows").set_value(True).run()
    at.selectbox(key="_w_series_period_flows").set_value("week").run()
    at.text_input(key="_w_series_start_flows").set_value("2020-04-01")
    at.text_input(key="_w_series_end_flows").set_value("2020-04-30").run()
    return ok(at)


@pytest.mark.skipif(not TAXI.exists(), reason="shared/data is not available")
def test_green_taxi_trips_by_iso_week_event_unit() -> None:
    at = trips_session()
    at.radio(key="_w_od_source").set_value("nyc").run()
    ok(weekly(at))
    assert at.selectbox(key="_w_series_col_flows").value == "lpep_pickup_datetime"
    s = at.session_state["series_settings_flows"]
    assert [p.label for p in s.periods()] == [f"2020-W{w}" for w in range(14, 19)] and s.scope == "event"
    out = release_series(at, "flows")
    assert [o.status for o in out.outcomes] == ["released"] * 5
    rows = pd.read_csv(io.BytesIO(out.files["series.csv"]), dtype=str)
    assert rows["area"].str.contains("->").all() and set(rows["period"]) == {f"2020-W{w}" for w in range(14, 19)}
    assert any(el.proto.spec and "scattermap" in el.proto.spec for el in at.get("plotly_chart"))


@pytest.mark.skipif(not TAXI.exists(), reason="shared/data is not available")
def test_green_taxi_trips_person_period_with_a_synthetic_id() -> None:
    df = pd.read_csv(TAXI, usecols=["lpep_pickup_datetime", "PULocationID", "DOLocationID"])
    df["person"] = np.random.default_rng(5).integers(0, 4000, len(df))  # a synthetic person id
    at = trips_session()
    at.radio(key="_w_od_source").set_value("upload").run()
    at.file_uploader(key="od_upload").set_value(("taxi.csv", df.to_csv(index=False).encode(), "text/csv")).run()
    at.file_uploader(key="od_areas_upload").set_value(("zones.csv", ZONES.read_bytes(), "text/csv")).run()
    at.multiselect(key="_w_od_set_areas_levels").set_value(["Borough", "LocationID"]).run()
    at.selectbox(key="_w_od_set_trips_origin").set_value("PULocationID").run()
    at.selectbox(key="_w_od_set_trips_destination").set_value("DOLocationID").run()
    at.selectbox(key="_w_od_set_trips_person").set_value("person").run()
    at.number_input(key="_w_od_set_trips_m").set_value(2).run()
    ok(weekly(at))
    s = at.session_state["series_settings_flows"]
    assert s.scope == "person-period"  # a person column: the default unit over time
    out = release_series(at, "flows")
    assert out.record["unit"]["label"].startswith("one person-week (at most 2 records each)")
    assert [o.status for o in out.outcomes] == ["released"] * 5


# ------------------------------------------------------------------ counts over areas (a hierarchy)


AREA_LIST = b"state,county\n01,001\n01,003\n02,001\n02,005\n"


def hierarchy_by_day() -> AppTest:
    """Person rows (state, county, day) with a public area list, released over the days 1 to 3 January
    2024 (no rows on the 2nd)."""
    people = pd.DataFrame({"state": ["01", "01", "02", "01", "02"], "county": ["001", "003", "001", "001", "005"],
                           "day": ["2024-01-01", "2024-01-01", "2024-01-01", "2024-01-03", "2024-01-03"]})
    at = ok(AppTest.from_file(APP, default_timeout=240).run())
    at.radio(key="_w_kind").set_value("areas").run()
    at.radio(key="_w_hier_source").set_value("upload").run()
    at.file_uploader(key="hier_upload").set_value(("people.csv", people.to_csv(index=False).encode(),
                                                   "text/csv")).run()
    at.multiselect(key="w_levels").set_value(["state", "county"]).run()
    at.multiselect(key="w_count").set_value([]).run()
    at.radio(key="_w_hier_area_source").set_value("upload").run()
    at.file_uploader(key="hier_areas_upload").set_value(("areas.csv", AREA_LIST, "text/csv")).run()
    ok(at)
    at.toggle(key="_w_series_on_areas").set_value(True).run()
    assert at.selectbox(key="_w_series_col_areas").value == "day"
    at.text_input(key="_w_series_start_areas").set_value("2024-01-01")
    at.text_input(key="_w_series_end_areas").set_value("2024-01-03").run()
    return ok(at)


def test_hierarchy_rows_by_day_with_an_empty_day() -> None:
    """Released per day; a day without rows is released too (zero in every public area, noised), as the
    range, not the data, gives the days."""
    at = hierarchy_by_day()
    at.switch_page("pages/plan.py").run()
    ok(at)
    out = release_series(at, "areas")
    assert [o.status for o in out.outcomes] == ["released"] * 3
    rows = pd.read_csv(io.BytesIO(out.files["series.csv"]), dtype=str)
    # every public county in every day, the empty 2 January included
    counties = rows[rows["level"] == "county"]
    assert counties.groupby("period").size().to_dict() == {f"2024-01-0{d}": 4 for d in (1, 2, 3)}


def test_a_series_in_the_app_shares_the_budget_of_one_off_releases_of_the_same_data() -> None:
    """A one-off release of the upload touches every period: after a series it must fit under its cap
    together with the largest period's spend (as on the command line), never on a budget of its own."""
    from dpcore.errors import BudgetError
    from dpcore.privacy.budget import pure

    at = series_session(days=2)
    at.text_input(key="_w_series_start_points").set_value("2014-04-01")
    at.text_input(key="_w_series_end_points").set_value("2014-04-02").run()
    ok(at)
    at.switch_page("pages/release.py").run()
    ok(at)
    at.button(key="series_release_points").click().run()
    ok(at)
    scope, out = at.session_state["series_out_points"]
    assert out.charged == 2 and scope
    eps = at.session_state["epsilon"]
    one_off = Session.open(None).budget("points", scope, default=pure(1.0))
    cap = one_off.cap.value
    one_off.check(pure(cap - eps))  # fits beside the largest period's spend
    with pytest.raises(BudgetError):
        one_off.check(pure(cap - eps / 2))  # would not: the periods' spend counts


def test_a_hierarchy_series_joins_a_population_once_each_person_is_counted_once_in_each_period() -> None:
    """Issue 26 item 15 for series: a table bound to a population (whose budget protects persons) is
    released over time only when the curator confirms each person is counted once in each period
    (the unit over time is then one person-day); unconfirmed, the refusal names the option.  The
    confirmation is the series' own: the table's one-off checkbox is not shown over time."""
    from dpcore.errors import BudgetError
    from dpcore.privacy.budget import pure
    from dpcore.privacy.units import Unit

    at = hierarchy_by_day()
    fp = at.session_state["hier_model"]["fp"]
    assert at.checkbox(key=f"_w_series_person_once_{fp}").value is False
    assert at.session_state["series_settings_areas"].scope == "event"
    at.switch_page("pages/plan.py").run()
    [box] = [t for t in at.text_input if t.label == "Population (optional)"]
    box.input("Travel survey 2023").run()
    ok(at)
    assert f"_w_person_once_{fp}" not in [c.key for c in at.checkbox]  # the series' confirmation rules
    at.switch_page("pages/release.py").run()
    at.button(key="series_release_areas").click().run()
    assert not at.exception, at.exception
    refused = " ".join(e.value for e in at.error)
    assert "protects one record per period" in refused and "Each person is counted once in each period" in refused
    assert at.session_state.get("series_out_areas") is None  # nothing charged, nothing released

    at.switch_page("pages/data.py").run()
    at.file_uploader(key="hier_areas_upload").set_value(("areas.csv", AREA_LIST, "text/csv")).run()  # a new page
    at.checkbox(key=f"_w_series_person_once_{fp}").check().run()
    ok(at)
    assert at.session_state["series_settings_areas"].scope == "person-period"
    at.switch_page("pages/plan.py").run()
    ok(at)
    out = release_series(at, "areas")
    assert [o.status for o in out.outcomes] == ["released"] * 3
    assert out.record["unit"]["scope"] == "person-period" and out.record["unit"]["label"].startswith("one person-day")
    eps = out.record["spend"]["per_period"]["value"]
    pop = Session.open(None).budget("areas", fp, default=pure(1.0))  # the population's budget
    person = Unit("person")
    pop.check(pure(pop.cap.value - eps), person)  # the days' spend counts on it ...
    with pytest.raises(BudgetError):
        pop.check(pure(pop.cap.value - eps / 2), person)


def _two_days_released() -> AppTest:
    """A session that released the Uber demo's first two days as a series (points)."""
    at = series_session(days=2)
    at.text_input(key="_w_series_start_points").set_value("2014-04-01")
    at.text_input(key="_w_series_end_points").set_value("2014-04-02").run()
    at.switch_page("pages/release.py").run()
    at.button(key="series_release_points").click().run()
    return ok(at)


def test_the_sidebar_states_the_budget_a_series_spent_and_names_it_as_the_current_release() -> None:
    """After a series of 2 periods at ε per period, the sidebar's budget (the curator's main safety signal)
    says what a record of one period has lost, consistently (spent + left = cap), the per-period budget
    and the series as the current release (it said "spent ε = 0 of 1 · left 0.5", "Nothing released yet")."""
    at = _two_days_released()
    eps = at.session_state["epsilon"]
    e = f"{eps:g}"
    left = f"{1 - eps:g}"
    [bar] = at.sidebar.get("progress")
    assert bar.proto.text == f"spent ε = {e} of 1 · left {left}" and bar.value == round(eps * 100)
    captions = [c.value for c in at.sidebar.caption]
    assert f"per period: spent ε = {e} of 1 · left {left}, over 2 periods" in captions
    assert any(c.startswith(f"of which ε = {e} by the series over time") for c in captions)
    assert "Nothing released yet." not in captions
    assert any(f"ε = {e} per period · 2 periods (day)" in m.value for m in at.sidebar.markdown)
    at.switch_page("pages/plan.py").run()
    ok(at)
    spent = next(m for m in at.metric if m.label == "Spent of the cap")
    assert spent.value == f"ε = {e} of 1"


def test_history_and_the_cli_list_a_series_releases_under_the_datasets_name(capsys: pytest.CaptureFixture) -> None:
    """History listed a series' data as '... · 0 releases', 'ε = 0 spent of 1', 'No release in the budget
    database yet' and the office view by keyed hash; now one row per period with its spend and release,
    under the dataset's name, and ``python -m dpcore history`` prints the same periods."""
    from dpcore.cli import main

    at = _two_days_released()
    out = at.session_state["series_out_points"][1]
    e = f"{at.session_state['epsilon']:g}"
    at.switch_page("pages/history.py").run()
    ok(at)
    assert "Points: pickups.csv · 0 releases · over time: 2 periods released" in [h.value for h in at.subheader]
    assert not any("No release in the budget database yet" in i.value for i in at.info)
    budget_line = next(c.value for c in at.caption if c.value.startswith("Budget: ε = "))
    assert budget_line.startswith(f"Budget: ε = {e} spent of 1 (0 spends); of which")  # as the sidebar says it
    assert f"of which ε = {e} by the series over time" in budget_line
    periods = next(d.value for d in at.dataframe if "period" in d.value.columns and "release" in d.value.columns)
    ids = [o.release_id for o in out.outcomes]
    assert periods["period"].tolist() == ["2014-04-01", "2014-04-02"]
    assert periods["spent (ε)"].tolist() == [e, e] and periods["release"].tolist() == ids
    office = next(d.value for d in at.dataframe if "horizon ρ" in d.value.columns)
    assert set(office["population"]) == {"Points: pickups.csv", "Points: pickups.csv (over time)"}
    capsys.readouterr()
    assert main(["history"]) == 0
    printed = capsys.readouterr().out
    assert f"spent ε = {e} of 1 per period in 2 charges over 2 periods" in printed
    for period, rid in zip(["2014-04-01", "2014-04-02"], ids, strict=True):
        assert f"{period}: spent ε = {e} in 1 charges; release {rid}" in printed
    # removing old files by date reaches the series' releases listed here too (their spends stay)
    at.date_input(key="hist_before").set_value(dt.date.today() + dt.timedelta(days=1)).run()
    at.button(key="hist_remove_before").click().run()
    ok(at)
    periods = next(d.value for d in at.dataframe if "period" in d.value.columns and "release" in d.value.columns)
    assert periods["files"].tolist() == ["removed", "removed"] and periods["spent (ε)"].tolist() == [e, e]


def test_the_plan_of_a_series_says_what_its_preview_is_for_and_the_range_and_a_year_alike() -> None:
    """The series' Plan step previewed the guessed n of the whole file (100,000 points) as if it were each
    period's, and said '365 days at this rate: ρ = …; ε summed over the periods: …' (a year's ρ beside the
    range's ε).  The plan stays the one typed (every period is released and re-served by it, so it does not
    change with the range); the page says the preview is for the number typed, offers the per-period figure
    from public inputs (the guess over the periods), and states the range's and a year's figures alike."""
    at = series_session(days=4)
    at.text_input(key="_w_series_start_points").set_value("2014-04-01")
    at.text_input(key="_w_series_end_points").set_value("2014-04-04").run()
    at.switch_page("pages/plan.py").run()
    ok(at)
    guess = next(n for n in at.number_input if n.label.startswith("Rough number of points"))
    assert guess.value == 100_000 and at.session_state["points_plan"].choice.n_guess == 100_000  # unchanged plan
    note = next(c.value for c in at.caption if c.value.startswith("Over time, every period is released"))
    assert "the preview is for one period of **100,000 points**, the number typed here" in note
    assert "100,000 points is about 25,000 a period" in note
    assert any(m.value.startswith("In each period, planned for 100,000 points (the number typed above, the whole "
                                  "file's guess unless you typed one period's): each released count") for m in at.markdown)
    eps = at.session_state["epsilon"]
    line = next(c.value for c in at.caption if c.value.startswith("Over the 4 periods of the range"))
    assert line.startswith(f"Over the 4 periods of the range: ε summed = {4 * eps:.2g}")
    assert "365 days at this rate: ε summed = " in line and "ε summed over the periods" not in line
    guess.set_value(25_000).run()
    ok(at)
    assert at.session_state["points_plan"].choice.n_guess == 25_000  # typed: the plan every period is released with
    assert any(m.value.startswith("In each period, planned for 25,000 points") for m in at.markdown)
    at.switch_page("pages/data.py").run()  # a one-off release: the sentences as they were
    at.toggle(key="_w_series_on_points").set_value(False).run()
    at.switch_page("pages/plan.py").run()
    ok(at)
    assert any(m.value.startswith("Each released count is off by at most") for m in at.markdown)
    assert not any(c.value.startswith("Over time, every period") for c in at.caption)
