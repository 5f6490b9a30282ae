"""Refusals that depend on the data come before the budget is charged (issue 18, item 7)."""

from __future__ import annotations

import numpy as np
import pytest

from dpcore import pipeline
from dpcore.core.session import Session
from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.errors import ParameterError
from dpcore.points.mechanisms.htf_tree import MAX_POINTS
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger


def _aggregate(total: int) -> Aggregate:
    g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 4, 4)
    counts = np.zeros((4, 4), dtype=np.int64)
    counts[0, 0] = total
    return Aggregate(grid=g, counts=counts, n_outside=0, n_capped=0, sensitivity=1, user_cap=None)


@pytest.mark.parametrize("session", [None, Session()])
def test_htf_refuses_too_many_points_without_charging(session) -> None:
    led = Ledger(budget.pure(2.0))
    with pytest.raises(ParameterError, match="fewer than"):
        pipeline.release_points(_aggregate(MAX_POINTS), "htf", 0.5, {}, led, session=session)
    assert led.spent == 0 and not led.entries


def test_points_counts_for_another_grid_are_refused_without_charging() -> None:
    from dpcore import catalog

    mech = catalog.get("points", "ug")
    plan = mech.plan(Grid(Bounds(0.0, 0.0, 1.0, 1.0), 8, 8), 0.5, {})
    with pytest.raises(ParameterError, match="another grid"):
        mech.check_data(plan, _aggregate(10))
