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


def test_the_od_planner_names_levels_as_the_areas_planner_does() -> None:
    """The O/D planner's levels read like the areas planner's (one helper, ui.fmt.level_label): areas
    named by raw Census column names read 'county (COUNTYFP)', a cross-level table 'state (STATEFP) to
    county (COUNTYFP)', never 'STATEFP>COUNTYFP'."""
    import numpy as np

    areas = "code\n" + "".join(f"{a}{b}{c:02d}\n" for a in (1, 2) for b in (1, 2, 3) for c in (1, 2, 3, 4))
    codes = areas.split()[1:]
    rng = np.random.default_rng(5)
    trips = "origin,destination\n" + "".join(f"{o},{d}\n" for o, d in rng.choice(codes, (300, 2)))
    at = data_step("flows")
    at.radio(key="_w_od_source").set_value("upload").run()
    at.file_uploader(key="od_upload").set_value(("trips.csv", trips.encode(), "text/csv")).run()
    at.file_uploader(key="od_areas_upload").set_value(("areas.csv", areas.encode(), "text/csv")).run()
    at.radio(key="_w_od_set_areas_shape").set_value("prefix").run()
    at.text_input(key="_w_od_set_areas_lengths").set_value("1,2,4").run()
    at.text_input(key="_w_od_set_areas_names").set_value("STATEFP,COUNTYFP,TRACTCE").run()
    step(ok(at), "plan")
    levels = at.multiselect(key="od_target_levels")
    raw = [o for o in levels.options if "FP" in o and "(" not in o or ">" in o]
    assert not raw, levels.options
    assert "county (COUNTYFP)" in levels.options and "state (STATEFP) to county (COUNTYFP)" in levels.options
    assert levels.options[0] == "each pair of the finest table: tract (TRACTCE)"
    levels.set_value([*levels.value, "COUNTYFP"]).run()
    labels = [n.label for n in ok(at).number_input] + [s.label for s in at.selectbox]
    assert "Error at county (COUNTYFP)" in labels and "Error at COUNTYFP" not in labels
    at.button(key="od_target_propose").click().run()
    table = next(d.value for d in ok(at).dataframe if "your target" in d.value.columns)
    assert not [lv for lv in table["level"] if ">" in lv or lv in ("STATEFP", "COUNTYFP", "TRACTCE")], table["level"]
