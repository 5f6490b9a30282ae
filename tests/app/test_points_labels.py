"""AppTests of the numbers and words on the points steps: points (not people), no "None" in
tables, integers as integers, and the same count of released areas on Export and in the sidebar."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from ui.state import release_widget_key

APP = "../../app.py"  # relative to this file


@pytest.fixture
def at() -> AppTest:
    app = AppTest.from_file(APP, default_timeout=120)
    app.run()
    assert not app.exception, app.exception
    return app


def goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, at.exception
    return at


def no_none(table) -> bool:
    return not any(v is None or str(v) in ("None", "nan", "<NA>") for v in table.to_numpy().ravel())


@pytest.mark.parametrize("mechanism", ["quadtree", "htf", "privtree"])
def test_plan_table_and_sentence(at: AppTest, mechanism: str) -> None:
    goto(at, "plan")
    at.selectbox(key="_w_mechanism").set_value(mechanism).run()
    assert not at.exception and not at.error
    table = at.dataframe[0].value
    assert no_none(table)  # levels that answer no query show "–"
    assert table["counts released"].dtype.kind == "i" and table["± per count (95%)"].dtype.kind == "i"
    unreleased = table[table["2% of area: ± (95%)"] == "–"]
    released = table[table["2% of area: ± (95%)"] != "–"]
    assert len(released) >= 1
    assert all(v.startswith("± ") and v[2:].replace(",", "").isdigit() for v in released["10% of area: ± (95%)"])
    # no cut headers (issue 26 item 10): every configured column is at least as wide as its header
    import json

    from ui.plan_table import MAX_TEXT_PX, header_width
    config = json.loads(at.dataframe[0].proto.columns)
    widths = {label: c.get("width") for label, c in config.items() if label in table.columns}
    assert widths["± per count (95%)"] >= header_width("± per count (95%)"), widths
    # the errors in points first, the budget and the noise scale after them (none dropped): the columns a
    # curator reads fit the page (about 920 px of a 1400-px window) without scrolling sideways
    first = ["level", "± per count (95%)", "2% of area: ± (95%)", "10% of area: ± (95%)"]
    assert list(table.columns[:4]) == first
    assert set(table.columns[4:]) == {"ε", "share of ε", "counts released", "noise scale"}
    assert sum(widths[label] for label in first) <= 920, widths
    assert all(not isinstance(w, str) or w != "small" or header_width(label) <= 75 for label, w in widths.items())
    # no cut cells either: the level column fits its longest name ("Leaf counts (about 6,598 leaves if evenly
    # spread)" for PrivTree), or the rows are tall enough to wrap it
    longest = header_width(max(table["level"], key=len))
    assert isinstance(widths["level"], int) and widths["level"] >= min(longest, MAX_TEXT_PX), (widths, longest)
    assert longest <= MAX_TEXT_PX or at.dataframe[0].proto.row_height > 64
    if mechanism == "htf":
        assert len(unreleased) >= 1  # the height estimate and the split search
    text = "\n".join(m.value for m in at.markdown)
    assert "Each released count is off by at most" in text and " points** in 19 of 20" in text
    assert "people" not in text


def test_release_labels_legend_axes_and_counts(at: AppTest) -> None:
    goto(at, "plan")
    at.selectbox(key="_w_mechanism").set_value("htf").run()
    goto(at, "release")
    at.button(key=release_widget_key("release_button", at.session_state)).click().run()
    assert not at.exception, at.exception
    rel = at.session_state["releases"][-1].release
    specs = {el.proto.id.rsplit("-", 1)[-1]: json.loads(el.proto.spec) for el in at.get("plotly_chart")}
    legend = specs["release_map"]["data"][0]["colorbar"]["title"]["text"]
    assert legend == "points<br>per km² (log)"  # one unit, one log scale on every points map (issue 26, item 5)
    bars = specs["level_error_chart"]["layout"]
    assert bars["xaxis"]["title"]["text"] == "± points per count (95% of counts)"
    assert bars["yaxis"]["title"]["text"] == "level"
    assert "points" in specs["level_error_chart"]["data"][0]["hovertemplate"]
    for d in at.dataframe:
        assert no_none(d.value), d.value
    expected = next(d.value for d in at.dataframe if "SD per count" in d.value.columns)
    assert expected["counts"].dtype.kind == "i"
    # the sidebar and the Export step count the same released areas (the leaves)
    leaves = f"{int(rel.leaf.sum()):,}"
    side = "\n".join(m.value for m in at.sidebar.markdown)
    assert f"{leaves} released areas" in side
    goto(at, "export")
    record = "\n".join(m.value for m in at.markdown)
    assert f"**Released:** {leaves} areas (plus the " in record
