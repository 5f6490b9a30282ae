"""A hierarchy too large to send to the browser whole (issue 28 item 1), scaled down: 2,400 blocks
without boundaries, with the app's caps lowered so that they bind (at most 50 rows a table, 10
areas a choice, the release's progress above 100 areas)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest
from test_hierarchy_page import areas, ok, step

from ui import data_user_downloads
from ui.kinds.areas import data as areas_data
from ui.kinds.areas import drill
from ui.kinds.areas import release as areas_release
from ui.state import release_widget_key

LEVELS = ["STATE", "COUNTY", "TRACT", "BLOCK"]
ROWS, OPTIONS = 50, 10


def blocks() -> pd.DataFrame:
    """3 states x 4 counties x 5 tracts x 40 blocks, codes nested by prefix (as census GEOIDs)."""
    rows = [(s, f"{s}{c}", f"{s}{c}{t:02d}", f"{s}{c}{t:02d}{b:03d}", (b * 7 + t) % 23)
            for s in ("01", "02", "03") for c in "abcd" for t in range(5) for b in range(40)]
    return pd.DataFrame(rows, columns=[*LEVELS, "POP"])


def read_blocks() -> AppTest:
    """The areas page with :func:`blocks` uploaded, its levels and count chosen, the table as the area list."""
    app = areas()
    app.radio(key="_w_hier_source").set_value("upload").run()
    app.file_uploader(key="hier_upload").set_value(("blocks.csv", blocks().to_csv(index=False).encode(),
                                                    "text/csv")).run()
    app.multiselect(key="w_levels").set_value(LEVELS).run()
    app.multiselect(key="w_count").set_value(["POP"]).run()
    return app.radio(key="_w_hier_area_source").set_value("table").run()


@pytest.fixture
def at(monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setattr(drill, "MAX_ROWS", ROWS)
    monkeypatch.setattr(drill, "MAX_OPTIONS", OPTIONS)
    monkeypatch.setattr(areas_release, "PROGRESS_NODES", 100)
    monkeypatch.setattr(data_user_downloads, "LAZY_BYTES", 10_000)
    app = read_blocks()
    assert ok(app).session_state["hier_model"]["h"].sizes == [1, 3, 12, 60, 2400]
    step(app, "release")
    app.button(key=release_widget_key("hier_release_button", app.session_state)).click().run()
    return ok(app)


def sent(at: AppTest) -> list[int]:
    """How many areas each table, choice and chart of the page sends to the browser."""
    sizes = [len(d.value) for d in at.dataframe] + [len(s.options) for s in at.selectbox]
    for c in at.get("plotly_chart"):
        for trace in json.loads(c.proto.spec)["data"]:
            sizes.append(len(trace.get("ids") or trace.get("locations") or []))
    return sizes


def test_a_large_release_shows_its_steps_and_sends_a_level_at_a_time(at: AppTest) -> None:
    """The release's steps, then no table, choice or chart larger than its cap, the blocks of a tract
    reached by narrowing down, and the release's large files deferred on the Export step."""
    [status] = at.status  # the release's steps, closed once it is made
    assert status.state == "complete" and status.label.startswith("Released 2,476 areas at all levels")
    assert "interval_read_" in " ".join(b.key for b in at.button)  # measurements read on a click only
    assert not [m for m in at.multiselect if m.key.startswith("_w_interval_areas")]
    # no boundaries: the first level is listed as a table; the finest level only up to the cap
    assert at.selectbox(key="_w_hier_map_level").options == LEVELS
    at.selectbox(key="_w_hier_map_level").set_value("BLOCK").run()
    table = next(d.value for d in ok(at).dataframe if "code" in d.value)
    assert len(table) == ROWS and table["code"].iloc[0] == "01a00000"
    assert any(c.value.startswith(f"The first {ROWS} of 2,400 areas") for c in at.caption)
    assert max(sent(at)) <= max(ROWS, OPTIONS + 1, 60)  # the treemap: states and counties, not blocks
    # narrowing down: a state (3 to list), then its 20 tracts are more than 10: the code is typed
    at.selectbox(key="hier_drill_2").set_value(1).run()
    assert "hier_drill_4_code" in [t.key for t in ok(at).text_input]
    at.text_input(key="hier_drill_4_code").set_value("02b03").run()
    table = next(d.value for d in ok(at).dataframe if "code" in d.value)
    assert len(table) == 40 and set(table["in"]) == {"02b03"}
    assert table["code"].tolist() == [f"02b03{b:03d}" for b in range(40)]
    assert not any(c.value.startswith("The first") for c in at.caption)
    [tree] = [json.loads(c.proto.spec) for c in at.get("plotly_chart") if '"treemap"' in c.proto.spec]
    assert len(tree["data"][0]["ids"]) == 41  # the tract and its 40 blocks
    assert max(sent(at)) <= max(ROWS, OPTIONS + 1)
    # a code that is not there says so and shows the whole state's blocks, capped
    at.text_input(key="hier_drill_4_code").set_value("09z99").run()
    assert any("No tract" in w.value or "No TRACT" in w.value for w in ok(at).warning), [w.value for w in at.warning]
    # Export: the large files are handed over on the click only (one release for both checks: ~20 s)
    step(at, "export")
    buttons = {b.proto.label: b.proto for b in at.get("download_button")}
    files = at.session_state["hier_release"].files
    assert len(files["release.csv"]) > 10_000 and len(files["release.json"]) > 10_000
    # deferred: no file registered with the page for the large files, only for the small ones
    assert buttons["Download release.csv"].deferred_file_id and not buttons["Download release.csv"].url
    assert buttons["Download deployment.yaml"].url and not buttons["Download deployment.yaml"].deferred_file_id


def test_the_data_step_shows_each_phase_of_a_large_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table above the Data step's progress threshold (lowered to 100 rows here) shows each phase of
    building its hierarchy and keying its budget in the step's status as it runs (issue 28 item 1:
    at 8 M blocks these take about a minute), then closes it with the areas read."""
    monkeypatch.setattr(areas_data, "PROGRESS_ROWS", 100)
    app = read_blocks()
    [status] = ok(app).status
    assert status.state == "complete" and status.label.startswith("Read blocks.csv: 2,476 areas in")
    lines = [c.value for c in status.caption]
    for verb in ("Reading the codes of", "Finding the areas of", "Keying the", "Checking the codes of"):
        assert [lv for lv in LEVELS if any(m.startswith(f"{verb} ") and f"'{lv}'" in m for m in lines)] == LEVELS
    assert any(m.startswith("Built the areas of STATE, COUNTY, TRACT, BLOCK (") for m in lines)
    assert any(m.startswith("Keying the table's budget: the totals per 'BLOCK'") for m in lines)
    assert any(m.startswith("Keyed the table's budget (") and m.endswith(", 100%)") for m in lines)
