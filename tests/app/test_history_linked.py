"""History: one series over time linked to two listed budgets (``linked_series.spread`` links a series to
every member of a budget group, e.g. two used budgets of the same data) is drawn once."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from app_steps import clean, series_session

from dpcore.privacy import budget, oneoff_links
from dpcore.privacy.ledger_store import LedgerStore


def test_a_series_linked_to_two_budgets_is_drawn_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "ledger.sqlite"
    monkeypatch.setenv("DPCORE_LEDGER_DB", str(db))
    at = series_session(days=2)
    at.text_input(key="_w_series_start_points").set_value("2014-04-01")
    at.text_input(key="_w_series_end_points").set_value("2014-04-02").run()
    at.switch_page("pages/release.py").run()
    at.button(key="series_release_points").click().run()
    clean(at)
    con = sqlite3.connect(db)
    pops = [p for (p,) in con.execute("SELECT DISTINCT population FROM series_links")]
    con.close()
    assert len(pops) == 1
    store = LedgerStore(db)
    led = store.ledger("k1:other", budget.pure(1.0), "points")
    led.spend(budget.pure(0.1), "cli")
    oneoff_links.link(store, pops[0], ["k1:other"])  # now linked to this session's budget and to k1:other

    at.switch_page("pages/history.py").run()
    clean(at)
    heads = [h.value.split(" · ")[0] for h in at.subheader if "over time" in h.value]
    assert len(heads) == 2, heads
    overs = [m.value for m in at.markdown if m.value.startswith("**Over time**")]
    assert len(overs) == 2 and sum("listed under" in m for m in overs) == 1, overs  # drawn once
    assert any(m.endswith(f"listed under {heads[0]}.") for m in overs), (overs, heads)
    # each release once in the removal list
    titles = at.multiselect(key="hist_chosen").options
    assert len(titles) == len(set(titles)), titles
