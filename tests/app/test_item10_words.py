"""Issue 26 item 10 leftovers in the app: the planner names levels in plain words (not raw column
names)."""

from __future__ import annotations

from pathlib import Path

from app_steps import counties_csv as counties
from app_steps import data_step, ok, step

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "assets" / "demo"


def test_the_planner_names_levels_in_plain_words() -> None:
    at = data_step("areas")
    at.radio(key="_w_hier_source").set_value("upload").run()
    at.file_uploader(key="hier_upload").set_value(("counties.csv", counties(), "text/csv")).run()
    at.radio(key="_w_hier_area_source").set_value("table").run()
    step(ok(at), "plan")
    levels = at.multiselect(key="hier_target_levels")
    assert "state (STATEFP)" in levels.options and "STATEFP" not in levels.options
    levels.set_value([*levels.value, "STATEFP"]).run()
    ok(at)
    labels = [n.label for n in at.number_input] + [s.label for s in at.selectbox]
    assert "Error at state (STATEFP)" in labels and "Error at STATEFP" not in labels
    at.button(key="hier_target_propose").click().run()
    table = next(d.value for d in ok(at).dataframe if "your target" in d.value.columns)
    assert set(table["level"]) <= {"state (STATEFP)", "county (COUNTYFP)", "total"}, table["level"].tolist()
