"""Helpers for the point-mechanism tests (imported as ``points_helpers``; ``tests/`` is on the path
through its conftest)."""

from __future__ import annotations

from typing import Any

import pytest

from dpcore import catalog
from dpcore.core.mechanism import Plan
from dpcore.data.domain import Aggregate, Grid
from dpcore.points import recommend_features as frule
from dpcore.points.mechanisms.base import PointsMechanism
from dpcore.points.release import LevelPlan, PartitionRelease
from dpcore.points.unit import points_unit
from dpcore.privacy.noise import NoiseSource
from dpcore.privacy.units import Unit


def plan_points(aggregate: Aggregate, name: str, budget: Any, params: dict[str, Any] | None = None, *,
                n_estimate: float | None = None) -> Plan:
    """The catalogue's plan of point mechanism ``name`` on the aggregate's grid and unit
    (:func:`dpcore.points.unit.points_unit`), as the app and the CLI build it; release it with
    :func:`dpcore.pipeline.release`."""
    unit = points_unit(aggregate.user_cap)
    return catalog.get("points", name).plan(aggregate.grid, budget, params, unit=unit, n_estimate=n_estimate)


def plan_with(mech: PointsMechanism, aggregate: Aggregate, budget: Any, params: dict[str, Any] | None, *,
              n_estimate: float | None = None) -> Plan:
    """The plan of ``mech`` on the aggregate's grid and unit: the aggregate's
    (:func:`dpcore.points.unit.points_unit`), or one person of ``aggregate.sensitivity`` records for
    counts capped without a person column (hand-made test data).  Data-free: neighbouring
    aggregates on one grid with one cap share it."""
    unit = points_unit(aggregate.user_cap)
    if unit.contribution != aggregate.sensitivity:
        unit = Unit("person", cap=aggregate.sensitivity)
    return mech.plan(aggregate.grid, budget, params, unit=unit, n_estimate=n_estimate)


def release_with(mech: PointsMechanism, aggregate: Aggregate, budget: Any, params: dict[str, Any] | None,
                 noise: NoiseSource, *, n_estimate: float | None = None) -> PartitionRelease:
    """Plan ``mech`` on the aggregate's grid and unit (:func:`plan_with`), then release that plan
    (no ledger: tests only)."""
    plan = plan_with(mech, aggregate, budget, params, n_estimate=n_estimate)
    return mech.release(plan, aggregate, noise).inner


def favour(monkeypatch: pytest.MonkeyPatch, config: str) -> None:
    """Make auto's feature rule predict ``config`` far below every other candidate (its intercept
    −10 in every size class): the choice then rests on the allowed set alone."""
    coef = dict(frule.COEF)
    for sc in ("0.1%", "1%", "10%", "mixed"):
        coef[(config, sc)] = (-10.0,) + (0.0,) * (len(frule.TERMS) - 1)
    monkeypatch.setattr(frule, "COEF", coef)


def levels_of(mech: PointsMechanism, grid: Grid, budget: Any, params: dict[str, Any] | None = None, *,
              sensitivity: int = 1, n_estimate: float | None = None) -> tuple[LevelPlan, ...]:
    """The level plans of ``mech``'s plan for one unit of ``sensitivity`` records.

    A mechanism sized by the number of points has no levels in a plan without a guess of it; its
    levels are then computed from its public number (``public_n``, a manual height...), and a
    plan with neither is refused, as the mechanism's :meth:`plan_levels` does."""
    unit = Unit("person", cap=sensitivity) if sensitivity > 1 else Unit("record")
    plan = mech.plan(grid, budget, params, unit=unit, n_estimate=n_estimate)
    if plan.inner or not mech.needs_n_guess:
        return tuple(plan.inner)
    return mech.plan_levels(grid, plan.cost, dict(plan.params), sensitivity=sensitivity, n_estimate=n_estimate)


class RecordingNoise(NoiseSource):
    """A seeded noise source that records the scale of every discrete Laplace draw."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.scales: list[object] = []

    def discrete_laplace(self, scale, size):  # type: ignore[override]
        self.scales.append(scale)
        return super().discrete_laplace(scale, size)


def secret_value(secret: str) -> str:
    """A regular expression matching the whole number ``secret`` as a value in an export (``7``,
    ``7.0``), not a digit run of another number (``17``, ``7.25``: a noisy value whose integer part
    happens to equal a true count says nothing about it).

    >>> import re
    >>> [bool(re.search(secret_value("7"), t)) for t in ("a,7,b", "7.0", "17", "7.25", "0.7")]
    [True, True, False, False, False]
    """
    import re

    return rf"(?<![\d.]){re.escape(secret)}(?:\.0+)?(?![\d.])"


def uniform_aggregate(grid: Grid, n: int, seed: int = 0) -> Aggregate:
    """``n`` points uniform over the unit square (seeded), counted on ``grid``."""
    import numpy as np

    from dpcore.data.domain import aggregate_points

    rng = np.random.default_rng(seed)
    return aggregate_points(rng.random(n), rng.random(n), grid)


def clustered_aggregate(grid: Grid, n: int, seed: int = 1, spread: float = 0.02) -> Aggregate:
    """``n`` points in one normal cluster at (0.3, 0.7) of SD ``spread`` (seeded), counted on ``grid``."""
    import numpy as np

    from dpcore.data.domain import aggregate_points

    rng = np.random.default_rng(seed)
    x = np.clip(rng.normal(0.3, spread, n), 0, 0.999)
    y = np.clip(rng.normal(0.7, spread, n), 0, 0.999)
    return aggregate_points(x, y, grid)


def clustered_counts(side: int, n: int, seed: int) -> Any:
    """A ``side`` × ``side`` count grid of ``n`` points (seeded): half in a tight cluster, a third in a
    wide one, the rest uniform."""
    import numpy as np

    rng = np.random.default_rng(seed)
    pts = np.vstack([rng.normal(side * 0.3, side * 0.03, (n // 2, 2)),
                     rng.normal(side * 0.7, side * 0.1, (n // 3, 2)),
                     rng.uniform(0, side, (n - n // 2 - n // 3, 2))]).astype(int).clip(0, side - 1)
    c = np.zeros((side, side), dtype=np.int64)
    np.add.at(c, (pts[:, 0], pts[:, 1]), 1)
    return c
