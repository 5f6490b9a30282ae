"""Issue 26 item 14 for counts over areas and trips in the app: a table or trips file that closely
matches data whose budget is spent (here: the same file minus one row) is asked about on the Release
step before it opens a fresh budget; 'same people' leads it to the spent budget (the answer recorded)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from app_steps import counties_csv as counties
from app_steps import data_step, ok, step
from streamlit.testing.v1 import AppTest

from ui.state import release_widget_key

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "assets" / "demo"


def texts(items) -> str:
    return "\n".join(str(x.value) for x in items)


def trips(drop: int = 0) -> bytes:
    return pd.read_csv(DEMO / "od" / "nyc_green_taxi_trips_2020-04.csv.gz", dtype=str, nrows=3000).iloc[drop:].to_csv(
        index=False).encode()


def _ask_then_same(at: AppTest, button: str, ledgers: str, load) -> None:
    at.button(key=release_widget_key(button, at.session_state)).click().run()
    before = dict(ok(at).session_state[ledgers])  # the demo's budget too
    [spent] = [led for led in before.values() if led.spent > 0]
    step(at, "data")
    load(at, 1)
    step(at, "release")
    question = texts(at.warning)
    assert "Is this the same population" in question
    assert not [b for b in at.button if b.key and button in b.key]  # nothing to release before the answer
    at.button(key="near_match_same").click().run()
    ok(at)
    assert "Is this the same population" not in texts(at.warning)
    [now] = [led for fp, led in at.session_state[ledgers].items() if fp not in before]
    assert now.dataset == spent.dataset and now.spent == spent.spent  # the spent budget


def test_near_identical_tables_are_asked_about() -> None:
    at = data_step("areas")
    at.radio(key="_w_hier_source").set_value("upload").run()

    def load(at: AppTest, drop: int = 0) -> None:
        at.file_uploader(key="hier_upload").set_value((f"c{drop}.csv", counties(drop), "text/csv")).run()
        at.radio(key="_w_hier_area_source").set_value("table").run()
        ok(at)

    load(at)
    step(at, "release")
    _ask_then_same(at, "hier_release_button", "census_ledgers", load)


def test_near_identical_trips_are_asked_about() -> None:
    at = data_step("flows")
    at.radio(key="_w_od_source").set_value("upload").run()

    def load(at: AppTest, drop: int = 0) -> None:
        at.file_uploader(key="od_upload").set_value((f"t{drop}.csv", trips(drop), "text/csv")).run()
        at.file_uploader(key="od_areas_upload").set_value(
            ("lookup.csv", (DEMO / "boundaries" / "nyc_taxi_zone_lookup.csv").read_bytes(), "text/csv")).run()
        ok(at)

    load(at)
    step(at, "release")
    _ask_then_same(at, "od_release_button", "od_ledgers", load)
