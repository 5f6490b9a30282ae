"""ui.intervals._pick: the nodes offered to pick and their labels are made once per release, not on
every rerun of the page (the reason its session cache is kept beside the release's ReleaseIntervals)."""

from __future__ import annotations

from typing import Any

import pytest

from ui import intervals


class _Release:
    def __init__(self, nodes: list[tuple[str, str]]) -> None:
        self._nodes = nodes

    def nodes(self) -> list[tuple[str, str]]:
        return list(self._nodes)


def test_the_offered_nodes_are_made_once_per_release(monkeypatch: pytest.MonkeyPatch) -> None:
    releases = {"r1": _Release([("state", "1"), ("county", "1a")]), "r2": _Release([("state", "2")])}
    shown: list[tuple[list[str], list[str]]] = []
    made: list[int] = []
    real = intervals.pickable
    monkeypatch.setattr(intervals.st, "session_state", {})
    monkeypatch.setattr(intervals, "offers_intervals", lambda files: True)
    monkeypatch.setattr(intervals, "_intervals", lambda files, release_id: releases[release_id])
    monkeypatch.setattr(intervals, "pickable", lambda nodes: made.append(1) or real(nodes))

    def multiselect(label: str, options: list[str], format_func: Any, **kwargs: Any) -> list[str]:
        shown.append((list(options), [format_func(o) for o in options]))
        return []

    monkeypatch.setattr(intervals.st, "multiselect", multiselect)
    for rid in ("r1", "r1", "r1", "r2", "r2"):
        assert intervals._pick(lambda: {}, rid, "area", guide=False) == []
    assert len(made) == 2  # once for r1, once for r2, not on each of the five runs
    assert shown[0] == shown[2] == (["1", "1a"], ["state · 1", "county · 1a"])
    assert shown[3] == shown[4] == (["2"], ["state · 2"])
