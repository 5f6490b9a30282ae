"""ui.state.release_button: the release runs once per drawing of the button, in its callback."""

from __future__ import annotations

import pytest

from dpcore.errors import ParameterError
from ui import state


@pytest.fixture
def session(monkeypatch: pytest.MonkeyPatch) -> dict:
    ss: dict = {}
    monkeypatch.setattr(state.st, "session_state", ss)
    return ss


def test_a_second_click_on_the_same_drawing_releases_nothing(session: dict) -> None:
    calls: list[int] = []
    state._release_once("b", 0, calls.append, (7,))
    state._release_once("b", 0, calls.append, (8,))  # the double click: same token
    assert calls == [7]
    state._release_once("b", 1, calls.append, (9,))  # the button drawn again: a new release
    assert calls == [7, 9]


def test_an_error_is_kept_for_the_next_run_and_the_token_stays_used(session: dict) -> None:
    def fail() -> None:
        raise ParameterError("Not enough budget")

    state._release_once("b", 0, fail, ())
    assert session["b_error"] == "Not enough budget" and session["b_token_used"] == 0
    calls: list[int] = []
    state._release_once("b", 0, calls.append, (1,))
    assert calls == []
