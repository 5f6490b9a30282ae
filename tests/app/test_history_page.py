"""The persistent budget across sessions and the Release history page (issue 9)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui.state import release_widget_key

ROOT = Path(__file__).resolve().parents[2]


# where a page script of the old layout lives now (the flows kind still runs as one page)
SCRIPTS = {"od.py": "ui/kinds/flows/od_page.py", "history.py": "pages/history.py", "compare.py": "pages/compare.py"}


def wrapper(page: str) -> str:
    path = ROOT / SCRIPTS[page]
    return f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from ui.kinds.points import state as points_state
points_state.init()
from ui import frame
with frame.framed():  # as app.py runs a page
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


TRACTS = b"STATEFP,COUNTYFP,TRACTCE,POPULATION\n01,001,020100,1775\n01,001,020200,2055\n02,001,000100,990\n"


def uploaded(page: str = "census.py") -> AppTest:
    """A fresh session of the census page holding an uploaded (real) table."""
    at = session(page)
    at.switch_page("pages/data.py").run()  # the table is chosen on the Data step
    at.radio(key="_w_census_source").set_value("upload").run()
    at.file_uploader(key="census_upload").set_value(("tracts.csv", TRACTS, "text/csv")).run()
    at.switch_page("pages/release.py").run()
    assert not at.exception, at.exception
    return at


def census_ledger(at: AppTest):
    """The budget of the table the census page holds now."""
    return at.session_state["census_ledgers"][at.session_state["census_fp"]]


def history_of(at: AppTest) -> AppTest:
    """The history page of a session holding the same census tables as ``at``."""
    h = AppTest.from_string(wrapper("history.py"), default_timeout=60)
    h.session_state["census_ledgers"] = dict(at.session_state["census_ledgers"])
    for k in ("demo_data", "demo_session"):
        if k in at.session_state:
            h.session_state[k] = at.session_state[k]
    h.run()
    assert not h.exception, h.exception
    return h


def test_a_new_session_continues_the_budget_of_real_data_and_lists_the_release() -> None:
    first = uploaded()
    first.button(key=release_widget_key("census_release_button", first.session_state)).click().run()
    assert not first.exception
    rel_id = first.session_state["census_release"].release.release_id
    assert not state_is_session_budget(census_ledger(first))
    # a reload / second tab / restart: a fresh session with the same data finds the same budget
    second = uploaded()
    led = census_ledger(second)
    assert led.spent == pytest.approx(0.5) and len(led.entries) == 1
    second.button(key=release_widget_key("census_release_button", second.session_state)).click().run()  # 0.5 + 0.5 = the cap 1.0
    assert not second.exception
    assert second.button(key=release_widget_key("census_release_button", second.session_state)).disabled  # nothing left
    assert len(led.entries) == 2
    assert not any("budget resets with the session" in c.value for c in second.caption)
    # the history page of a session holding that table lists both releases with their files
    h = history_of(second)
    labels = [b.label for b in h.get("download_button")]
    assert labels.count("Download release.csv") == 2 and labels.count("Download release.json") == 2
    assert any(rel_id in e.label for e in h.expander)
    # each release reads as plain lines, not raw JSON (issue 26 item 10)
    assert not h.code and any(m.value.startswith("**Mechanism:** ") for m in h.markdown)


def state_is_session_budget(led) -> bool:
    from dpcore.privacy.ledger_store import StoredLedger

    return isinstance(led, StoredLedger) and led.store.temporary


def test_the_demo_budget_lives_with_the_session() -> None:
    """Two fresh sessions can each release with the default budget on the made-up demo: its budget
    resets with the session (and says so), it is never written to the shared database."""
    from dpcore.privacy import ledger_store

    for _ in range(2):
        at = session("census.py")  # the built-in synthetic census (made up)
        led = census_ledger(at)
        assert state_is_session_budget(led) and led.spent == 0
        for _ in range(2):  # the default ε 0.5, twice: the whole default cap of this session
            at.button(key=release_widget_key("census_release_button", at.session_state)).click().run()
            assert not at.exception, at.exception
        assert led.spent == pytest.approx(1.0) and at.button(key=release_widget_key("census_release_button", at.session_state)).disabled
        assert any("demo: budget resets with the session" in c.value for c in at.caption)
        h = history_of(at)  # the session's releases are in its history, with their files
        assert [b.label for b in h.get("download_button")].count("Download release.csv") == 2
        assert any("demo: budget resets with the session" in c.value for c in h.caption)
    shared = ledger_store.default_store()
    assert shared.storage()["files"] == 0  # nothing of the demo in the shared database
    # the demo points too (the app's first page): their budget is this session's
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    app.run()
    assert not app.exception, app.exception
    assert state_is_session_budget(app.session_state["ledgers"][app.session_state["dataset"].fingerprint])
    assert any("demo: budget resets with the session" in c.value for c in app.sidebar.caption)


def test_history_shows_its_size_and_removes_old_files_keeping_the_budget() -> None:
    at = uploaded()
    at.button(key=release_widget_key("census_release_button", at.session_state)).click().run()
    assert not at.exception
    led = census_ledger(at)
    entries = led.to_dict()
    h = history_of(at)
    assert any(c.value.startswith("Budget database: ") and "1 release files kept" not in c.value
               and "4 release files kept" in c.value for c in h.caption)  # + deployment.yaml, review.html
    assert [b.label for b in h.get("download_button")] == ["Download release.csv", "Download release.json",
                                                          "Download deployment.yaml", "Download review.html"]
    h.multiselect(key="hist_chosen").set_value([0]).run()
    h.button(key="hist_remove_chosen").click().run()
    assert not h.exception, h.exception
    assert any("Removed 4 release files; the budget entries stay." in s.value for s in h.success)
    assert not h.get("download_button")  # no longer downloadable ...
    assert any("no longer downloadable: release.csv, release.json, deployment.yaml, review.html" in c.value
               for c in h.caption)  # ... and said so
    assert any(e.label.endswith("· files removed") for e in h.expander)
    assert any("4 files removed" in c.value for c in h.caption)
    assert led.to_dict() == entries and len(led.entries) == 1  # the budget is unchanged


def test_history_is_empty_for_data_the_session_does_not_hold() -> None:
    session("census.py").button(key="census_release_button").click().run()
    h = session("history.py")  # this session loaded only the demo points
    assert not h.get("download_button")
    assert any("No release in the budget database yet" in i.value for i in h.info)


@pytest.mark.parametrize(("ledgers", "earlier"), [("census_ledgers", "census"), ("od_ledgers", "od")])
def test_history_lists_releases_kept_under_an_earlier_key_kind(ledgers: str, earlier: str) -> None:
    """A budget and release stored by an earlier version under the key kind 'census' or 'od' are
    listed under the kind of data ('areas', 'flows') with their spends and files."""
    from dpcore.core.session import Charge, Session
    from dpcore.privacy import budget
    from dpcore.privacy.ledger_store import default_store

    store = default_store()
    old_key = store.key(earlier, "fp-old")
    led = store.ledger(old_key, budget.pure(1.0), earlier)
    Session.unaccounted().release(led, Charge(budget.pure(0.25), "old release", {}), lambda: None)
    store.record_release(old_key, "0123456789ab", earlier, {"mechanism": "Old mechanism", "cost": "ε = 0.25"},
                         {"release.csv": b"area,noisy_count\n1,2\n"})
    h = AppTest.from_string(wrapper("history.py"), default_timeout=60)
    h.session_state[ledgers] = {"fp-old": None}
    h.run()
    assert not h.exception, h.exception
    assert any("0123456789ab" in e.label and "Old mechanism" in e.label for e in h.expander)
    assert "Download release.csv" in [b.label for b in h.get("download_button")]
    assert any("0.25 spent" in c.value for c in h.caption)


def test_a_new_session_lists_every_dataset_of_the_database_by_name_and_serves_its_files() -> None:
    """Issue 26, item 8: History in a new browser session that loaded nothing lists the uploaded table's
    budget by the name the curator gave it (never the file's name), with spent and cap, and its
    release's files to download again."""
    first = uploaded()
    first.button(key=release_widget_key("census_release_button", first.session_state)).click().run()
    assert not first.exception
    rel_id = first.session_state["census_release"].release.release_id
    h = session("history.py")  # a new session: only the demo points loaded
    assert any(s.value.startswith("areas data, budget opened") and "(unnamed) · 1 release" in s.value
               for s in h.subheader), [s.value for s in h.subheader]
    box = next(t for t in h.text_input if t.key.startswith("hist_name_"))
    box.set_value("Tract populations 2020").run()
    h = session("history.py")  # another new session
    assert any(s.value.startswith("Tract populations 2020 · 1 release") for s in h.subheader)
    assert not any("tracts.csv" in s.value for s in h.subheader)
    assert any("ε = 0.5 spent of 1" in c.value for c in h.caption)
    assert any(rel_id in e.label for e in h.expander)
    assert "Download release.csv" in [b.label for b in h.get("download_button")]


def test_a_charge_whose_files_were_not_stored_is_listed_as_not_delivered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 26, item 20: an app server stopped between a charge and its stored files (here the store
    fails) leaves the charge listed as "charged, not delivered" in History."""
    from dpcore.privacy.ledger_store import LedgerStore

    def stopped(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        raise RuntimeError("the server stopped here")

    at = uploaded()
    kept = LedgerStore.record_release
    monkeypatch.setattr(LedgerStore, "record_release", stopped)
    at.button(key=release_widget_key("census_release_button", at.session_state)).click().run()
    monkeypatch.setattr(LedgerStore, "record_release", kept)  # not undo(): that also drops DPCORE_LEDGER_DB
    assert census_ledger(at).spent == pytest.approx(0.5)  # charged
    h = session("history.py")
    assert any("charged, not delivered to the app" in w.value and "nothing to serve yet" in w.value
               for w in h.warning), [w.value for w in h.warning]


def test_a_new_budget_is_said_on_the_plan_step() -> None:
    at = uploaded()
    at.switch_page("pages/plan.py").run()
    assert not at.exception, at.exception
    assert any(i.value.startswith("New budget for this data: cap ε = 1") for i in at.info), [i.value for i in at.info]
    at.switch_page("pages/release.py").run()
    at.button(key=release_widget_key("census_release_button", at.session_state)).click().run()
    at.switch_page("pages/plan.py").run()
    assert not any(i.value.startswith("New budget for this data") for i in at.info)


def test_a_damaged_key_file_is_one_error_line_in_the_app() -> None:
    """Issue 26, item 19: a storage fault is an st.error naming the fix, not a traceback."""
    from dpcore.privacy.ledger_store import default_path

    path = default_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_name(path.name + ".key").write_text("this is not hex\n")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180).run()
    at.switch_page("pages/history.py").run()
    assert not at.exception, at.exception
    assert any("not a hex key" in e.value and "Restore it" in e.value for e in at.error), [e.value for e in at.error]
