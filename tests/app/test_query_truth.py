"""The curator's error queries are answered on the true counts once per aggregate, not on every release
(issue 28 item 5: on a 4,096² grid their prefix sums were most of the Release step's server time after
the map).  Shared across sessions only for the demo's made-up points, whose counts every session
already shares; a user's counts are answered in that user's session only."""

from __future__ import annotations

import weakref

import numpy as np
import pytest
from points_helpers import release_with
from streamlit.testing.v1 import AppTest

from dpcore import catalog
from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.points import diagnostics
from dpcore.privacy.noise import NoiseSource
from ui.kinds.points import state as points_state
from ui.state import release_widget_key

APP = "../../app.py"


def _demo_release(grid: int = 32) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["kind"] = at.session_state["_w_kind"] = "points"
    at.session_state["grid_shape"] = (grid, grid)
    at.session_state["mechanism"] = "ug"
    at.run()
    at.switch_page("pages/release.py").run()
    at.button(key=release_widget_key("release_button", at.session_state)).click().run()
    assert not at.exception, at.exception
    return at


def test_the_demo_sessions_share_the_true_answers_and_get_the_same_errors(monkeypatch) -> None:
    made = []
    real = diagnostics.query_truth
    monkeypatch.setattr(diagnostics, "query_truth", lambda *a, **k: made.append(1) or real(*a, **k))
    points_state._demo_query_truth.clear()  # the cache of this server process starts cold
    a = _demo_release(grid=24)
    b = _demo_release(grid=24)
    assert made == [1]  # answered once for both sessions
    ea, eb = (s.session_state["releases"][-1].exports["empirical"] for s in (a, b))
    agg = a.session_state["aggregate"]
    assert agg is b.session_state["aggregate"]  # the demo's shared counts
    # the same numbers as answering the queries again for this release
    again = diagnostics.empirical_errors(a.session_state["releases"][-1].release, agg, n_per_size=500)
    assert [r["mae"] for r in ea] == [r["mae"] for r in again]
    assert len(ea) == len(eb) == 4


def test_a_users_counts_are_answered_in_that_session_only(monkeypatch) -> None:
    import streamlit as st

    counts = np.arange(16 * 16, dtype=np.int64).reshape(16, 16)
    user = Aggregate(Grid(Bounds(-74.0, 40.6, -73.8, 40.8), 16, 16), counts, 0, 0, 1, None)
    one: dict = {"aggregate": user, "aggregate_demo": None}
    monkeypatch.setattr(st, "session_state", one)
    t1 = points_state.query_truth(user)
    assert points_state.query_truth(user) is t1  # once per aggregate in the session
    qs, _, true = t1
    assert np.array_equal(true, [counts[r0:r1, c0:c1].sum() for r0, r1, c0, c1 in qs])
    # another session with the same counts answers them itself, even with the demo's counts marked
    # (a grid of the demo counted before the user's data replaced them): nothing crosses sessions
    other = Aggregate(user.grid, counts.copy(), 0, 0, 1, None)
    two: dict = {"aggregate": user, "aggregate_demo": (((-74.0, 40.6, -73.8, 40.8), 16, 16), weakref.ref(other))}
    monkeypatch.setattr(st, "session_state", two)
    t2 = points_state.query_truth(user)
    assert t2 is not t1 and np.array_equal(t2[2], t1[2])
    # the session's mark does not keep a replaced aggregate alive
    del one["aggregate"], two["aggregate"], user, t1, t2, qs, true
    import gc

    gc.collect()
    assert one["_query_truth"][0]() is None


def test_truth_made_for_other_queries_is_refused() -> None:
    """``empirical_errors(..., truth=)`` labels its rows with the sizes the truth holds: sizes given
    that differ from them are refused, not mislabelled; left out (or equal), the truth's are used."""
    agg = Aggregate(Grid(Bounds(0, 0, 1, 1), 8, 8), np.ones((8, 8), dtype=np.int64), 0, 0, 1, None)
    truth = diagnostics.query_truth(agg, sizes=(0.25, 0.5), n_per_size=3)
    with pytest.raises(ValueError, match=r"sizes \[0.25, 0.5\], not \[0.5\].*same sizes"):
        diagnostics.empirical_errors(None, agg, sizes=(0.5,), truth=truth)
    rel = release_with(catalog.get("points", "ug"), agg, 1.0, None, NoiseSource(3))
    for sizes in (None, (0.5, 0.25)):
        for n_per_size in (None, 3):
            rows = diagnostics.empirical_errors(rel, agg, sizes=sizes, n_per_size=n_per_size, truth=truth)
            assert [r["query_size"] for r in rows] == [*(sizes or (0.25, 0.5)), "all"]
            assert [r["n_queries"] for r in rows] == [3, 3, 6]


def test_truth_of_another_number_of_queries_per_size_is_refused() -> None:
    """``n_per_size`` given with a truth must be the number of queries it holds of each size: another
    number is refused with the fix, not ignored (it was refused before the truth's sizes labelled the rows)."""
    agg = Aggregate(Grid(Bounds(0, 0, 1, 1), 8, 8), np.ones((8, 8), dtype=np.int64), 0, 0, 1, None)
    truth = diagnostics.query_truth(agg, sizes=(0.25, 0.5), n_per_size=3)
    with pytest.raises(ValueError, match=r"truth holds 3 queries of each size, not n_per_size=7: make it "
                                         r"with query_truth\(\.\.\., n_per_size=7\), or leave n_per_size out"):
        diagnostics.empirical_errors(None, agg, n_per_size=7, truth=truth)


def test_errors_without_a_truth_check_no_number_of_queries_the_caller_did_not_give() -> None:
    """Without a truth the queries are made here (500 per size by default): a size named twice makes
    1,000 of it, and no check of ``n_per_size`` against them refuses the call (review finding)."""
    agg = Aggregate(Grid(Bounds(0, 0, 1, 1), 8, 8), np.ones((8, 8), dtype=np.int64), 0, 0, 1, None)
    rel = release_with(catalog.get("points", "ug"), agg, 1.0, None, NoiseSource(3))
    rows = diagnostics.empirical_errors(rel, agg, sizes=(0.25, 0.25))
    assert rows[-1]["query_size"] == "all" and rows[-1]["n_queries"] == 1000
