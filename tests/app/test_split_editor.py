"""The custom split over levels as a small editable table (ui.split_editor; shared/UX.md), for areas and
trips: the levels by name beside their weights and shares, the weights kept where the Plan step reads them."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def _plan(kind: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.radio(key="_w_kind").set_value(kind).run()
    at.switch_page("pages/plan.py").run()
    assert not at.exception, at.exception
    return at


def _editor(at: AppTest):
    [table] = [d.value for d in at.dataframe if list(d.value.columns) == ["level", "weight", "share"]]
    return table


def test_areas_custom_weights_are_a_table_of_the_measured_levels() -> None:
    at = _plan("areas")
    at.radio(key="_w_hier_split").set_value("custom").run()
    assert not at.exception, at.exception
    table = _editor(at)
    assert list(table["level"]) == ["total", "region", "district", "zone"]
    assert list(table["weight"]) == [1.0] * 4 and table["share"].sum() == pytest.approx(1.0)
    # weights set elsewhere (the target planner writes the text) show in the table and drive the plan
    at.session_state["hier_weights_4"] = "1,1,2,4"
    at.run()
    table = _editor(at)
    assert list(table["weight"]) == [1.0, 1.0, 2.0, 4.0]
    assert list(table["share"]) == pytest.approx([0.125, 0.125, 0.25, 0.5])
    budgets = [r.cost.value for r in at.session_state["hier_plan"][1][0].rows]
    assert budgets == pytest.approx([0.5 * w for w in (0.125, 0.125, 0.25, 0.5)])
    # a stored text that does not fit the levels is shown and kept as even weights, not left to fail
    at.session_state["hier_weights_4"] = "1,2"
    at.run()
    assert list(_editor(at)["weight"]) == [1.0] * 4
    assert at.session_state["hier_weights_4"] == "1,1,1,1"


def test_trips_custom_weights_are_a_table_of_the_measured_tables() -> None:
    at = _plan("flows")
    at.radio(key="_w_od_split").set_value("custom").run()
    assert not at.exception, at.exception
    table = _editor(at)
    assert len(table) >= 3 and table["share"].sum() == pytest.approx(1.0)
    assert all(" to " in name or name in ("region", "district", "zone") for name in table["level"])


def _edits_script() -> None:
    """The table alone, in a container whose grid returns the edit the test put in ``edit``."""
    import streamlit as st

    from ui import split_editor

    class Grid:
        def data_editor(self, frame, **kw):  # noqa: ANN001, ANN003, ANN202 - Streamlit's own signature
            st.session_state.setdefault("grid_keys", []).append(kw["key"])
            out = frame.copy()
            if st.session_state.get("edit"):
                row, value = st.session_state["edit"]
                out.loc[row, "weight"] = value
            return out

    st.session_state["runs"] = st.session_state.get("runs", 0) + 1
    split_editor.editor(Grid(), ["region", "district", "zone"], "hier_weights_3")


def test_an_edit_is_written_back_under_a_stable_key_that_changes_only_for_a_text_set_elsewhere() -> None:
    at = AppTest.from_function(_edits_script).run()
    assert not at.exception, at.exception
    at.session_state["edit"] = (1, 3.0)
    at.session_state["runs"] = 0
    at.run()
    assert not at.exception, at.exception
    # the edit is the stored text the Plan step reads, and the page was drawn again from it
    assert at.session_state["hier_weights_3"] == at.session_state["_w_hier_weights_3"] == "1,3,1"
    assert at.session_state["runs"] == 2
    at.session_state["edit"] = (2, 5.0)  # a second quick edit, in the same grid (it keeps both)
    at.run()
    assert at.session_state["hier_weights_3"] == "1,3,5"
    assert set(at.session_state["grid_keys"]) == {"_split_hier_weights_3_0"}  # never remounted by its own edits
    # the target planner's "Use this budget" writes the text: the grid is drawn anew (a new key) with it
    at.session_state["edit"] = None
    at.session_state["hier_weights_3"] = "1,2,4"
    at.run()
    assert at.session_state["grid_keys"][-1] == "_split_hier_weights_3_1"
    assert at.session_state["hier_weights_3"] == "1,2,4"
    at.run()
    assert at.session_state["grid_keys"][-1] == "_split_hier_weights_3_1"
