"""The persistent budget across sessions and the Release history page (issue 9)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]


# where a page script of the old layout lives now (the flows kind still runs as one page)
SCRIPTS = {"od.py": "ui/kinds/flows/od_page.py", "history.py": "pages/history.py", "compare.py": "pages/compare.py"}


def wrapper(page: str) -> str:
    path = ROOT / SCRIPTS[page]
    return f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from ui import state
state.init()
exec(compile(open({str(path)!r}, encoding="utf-8").read(), {str(path)!r}, "exec"))
"""


def session(page: str) -> AppTest:
    """A new session on ``page``; "census.py" is the Release step of the census table (through app.py)."""
    if page != "census.py":
        at = AppTest.from_string(wrapper(page), default_timeout=180)
        at.run()
        assert not at.exception, at.exception
        return at
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180).run()
    at.radio(key="_w_kind").set_value("areas").run()
    at.radio(key="_w_areas_table").set_value("census").run()
    at.switch_page("pages/release.py").run()
    assert not at.exception, at.exception
    return at


def test_a_new_session_continues_the_budget_and_lists_the_release() -> None:
    first = session("census.py")
    first.button(key="census_release_button").click().run()
    assert not first.exception
    rel_id = first.session_state["census_release"]["release"].release_id
    # a reload / second tab / restart: a fresh session with the same data finds the same budget
    second = session("census.py")
    led = second.session_state["census_ledgers"][second.session_state["census_fp"]]
    assert led.spent == pytest.approx(0.5) and len(led.entries) == 1
    second.button(key="census_release_button").click().run()  # 0.5 + 0.5 = the cap 1.0
    assert not second.exception
    assert second.button(key="census_release_button").disabled  # nothing left
    assert len(led.entries) == 2
    # the history page of a session holding that table lists both releases with their files
    h = AppTest.from_string(wrapper("history.py"), default_timeout=60)
    h.session_state["census_ledgers"] = dict(second.session_state["census_ledgers"])
    h.run()
    assert not h.exception, h.exception
    labels = [b.label for b in h.get("download_button")]
    assert labels.count("Download release.csv") == 2 and labels.count("Download release.json") == 2
    assert any(rel_id in e.label for e in h.expander)


def test_history_is_empty_for_data_the_session_does_not_hold() -> None:
    session("census.py").button(key="census_release_button").click().run()
    h = session("history.py")  # this session loaded only the demo points
    assert not h.get("download_button")
    assert any("No release of the data loaded in this session" in i.value for i in h.info)
