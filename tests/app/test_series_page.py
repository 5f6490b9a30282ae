"""Releases over time in the app (issue 24): the Data step's time controls, the Plan step's horizon
figure, the one-click series release (re-served byte for byte on a second click, nothing charged),
the series files, and History's office view of every budget."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
APP = "../../app.py"  # relative to this file


def ok(at: AppTest) -> AppTest:
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def timed_points(days: int = 5, per_day: int = 40, seed: int = 3) -> bytes:
    """Points over NYC with a 'Date/Time' column, April 2014 (the Uber file's format)."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in range(1, days + 1):
        for _ in range(per_day):
            lat, lon = 40.70 + 0.1 * rng.random(), -74.0 + 0.1 * rng.random()
            rows.append(f"4/{d}/2014 {rng.integers(0, 24)}:{rng.integers(10, 60)}:00,{lat:.5f},{lon:.5f}")
    return ("Date/Time,Lat,Lon\n" + "\n".join(rows) + "\n").encode()


def series_session(days: int = 5) -> AppTest:
    at = ok(AppTest.from_file(APP, default_timeout=240).run())
    at.file_uploader(key="points_upload").set_value(("pickups.csv", timed_points(days), "text/csv")).run()
    ok(at)
    at.toggle(key="_w_series_on_points").set_value(True).run()
    return ok(at)


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
    out = at.session_state["series_out_points"]
    assert [o.status for o in out.outcomes] == ["released"] * 6 and out.charged == 6
    assert at.select_slider(key="_w_series_period_shown_points").options == [f"2014-04-0{d}" for d in range(1, 7)]
    at.select_slider(key="_w_series_period_shown_points").set_value("2014-04-03").run()
    ok(at)
    assert "2014-04-03" in at.caption[-1].value or any("2014-04-03:" in c.value for c in at.caption)
    at.button(key="series_release_points").click().run()
    ok(at)
    again = at.session_state["series_out_points"]
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
