"""dpcore.series from Python (what the app calls): progress, re-serve, an unaccounted series."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpcore import catalog
from dpcore.core.periods import parse_time_range, periods_in
from dpcore.core.session import Session
from dpcore.data.domain import Bounds, Grid
from dpcore.points.export import release_files
from dpcore.points.unit import points_unit
from dpcore.privacy.budget import pure
from dpcore.privacy.units import TimeUnit
from dpcore.series import keep_for_unit, points_inputs, release_series


def _series(session: Session, budget, lon, lat, pidx, periods, grid, plan, progress=None):
    inputs = points_inputs(lon, lat, None, pidx, periods, grid)
    return release_series(plan, inputs, release_files, unit=TimeUnit("event", plan.unit, "day"), budget=budget,
                          session=session, progress=progress)


def test_release_series_from_python(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    grid = Grid.parse(Bounds.parse("0,0,1,1"), "16,16")
    periods = periods_in(*parse_time_range("2024-01-01,2024-01-05"), "day")
    lon, lat = rng.uniform(0, 1, 500), rng.uniform(0, 1, 500)
    pidx = rng.integers(0, 4, 500)  # nothing on the fifth day
    plan = catalog.get("points", "ug").plan(grid, pure(0.2), {}, unit=points_unit())
    unit = TimeUnit("event", plan.unit, "day")
    assert keep_for_unit(unit, None, pidx, None, periods).all()
    session = Session.open(tmp_path / "l.sqlite")
    inputs = points_inputs(lon, lat, None, pidx, periods, grid)
    budget = session.series_budget("points", "whole", [(i.period.label, i.fingerprint) for i in inputs if not i.empty],
                                   unit, default=pure(1.0))
    seen: list[tuple[float, str]] = []
    first = _series(session, budget, lon, lat, pidx, periods, grid, plan, lambda f, m: seen.append((f, m)))
    assert first.charged == 5 and [o.status for o in first.outcomes] == ["released"] * 5
    assert [f for f, _ in seen] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0]) and seen[0][1].startswith("Released")
    assert budget.per_period() == pytest.approx({p.label: 0.2 for p in periods})
    again = _series(session, budget, lon, lat, pidx, periods, grid, plan)
    assert again.charged == 0 and again.reserved and dict(again.files) == dict(first.files)
    assert [dict(o.files) for o in again.outcomes] == [dict(o.files) for o in first.outcomes]
    assert budget.per_period() == pytest.approx({p.label: 0.2 for p in periods})
    paths = again.write(tmp_path / "S")
    assert (tmp_path / "S" / "2024-01-05" / "release.csv") in paths and (tmp_path / "S" / "series.json") in paths
    # unaccounted: released, not stored, said so in the record
    free = _series(Session.unaccounted(), None, lon, lat, pidx, periods, grid, plan)
    assert {o.status for o in free.outcomes} == {"not accounted"} and free.record["spend"]["accounted"] is False


def test_a_rule_serves_the_files_a_one_off_release_with_the_rule_has() -> None:
    """A period served under a reliability rule reads as ``KindRelease.files(suppress=)`` makes a release's
    files: the same files in the same order, the same record sections in the same order (the review
    record is made once, after the rule, not kept from before it)."""
    import orjson

    from dpcore import pipeline
    from dpcore.privacy.noise import NoiseSource

    rng = np.random.default_rng(2)
    grid = Grid.parse(Bounds.parse("0,0,1,1"), "8,8")
    periods = periods_in(*parse_time_range("2024-01-01,2024-01-01"), "day")
    lon, lat, pidx = rng.uniform(0, 1, 300), rng.uniform(0, 1, 300), np.zeros(300, dtype=np.int64)
    plan = catalog.get("points", "quadtree").plan(grid, pure(0.5), {"height": 2}, unit=points_unit())
    inputs = points_inputs(lon, lat, None, pidx, periods, grid)
    series = release_series(plan, inputs, unit=TimeUnit("event", plan.unit, "day"), budget=None,
                            session=Session.unaccounted(), noise=NoiseSource(4), suppress="flag:cv=0.3")
    served = dict(series.outcomes[0].files)
    one = pipeline.release(plan, inputs[0].aggregate(), session=Session.unaccounted(),
                           noise=NoiseSource(4)).files(None, suppress="flag:cv=0.3")
    assert list(served) == list(one)
    rec, ref = orjson.loads(served["release.json"]), orjson.loads(one["release.json"])
    assert list(rec) == list(ref) and rec["reliability"] == ref["reliability"]
    assert rec["level_guidance"] == ref["level_guidance"]
    assert served["release.csv"] == one["release.csv"]  # the same noise: the same flagged table


def test_the_curators_cv_threshold_words_every_new_periods_record() -> None:
    import orjson

    from dpcore.privacy.noise import NoiseSource

    rng = np.random.default_rng(3)
    grid = Grid.parse(Bounds.parse("0,0,1,1"), "4,4")
    periods = periods_in(*parse_time_range("2024-01-01,2024-01-02"), "day")
    lon, lat, pidx = rng.uniform(0, 1, 200), rng.uniform(0, 1, 200), rng.integers(0, 2, 200)
    plan = catalog.get("points", "quadtree").plan(grid, pure(0.5), {"height": 2}, unit=points_unit())
    for cv, rule in ((0.05, None), (7.0, "flag:cv=0.3")):
        series = release_series(plan, points_inputs(lon, lat, None, pidx, periods, grid),
                                unit=TimeUnit("event", plan.unit, "day"), budget=None, session=Session.unaccounted(),
                                noise=NoiseSource(1), suppress=rule, cv_threshold=cv)
        for o in series.outcomes:
            g = orjson.loads(o.files["release.json"])["level_guidance"]
            assert g["threshold"] == cv and f"under {cv:g}" in g["statement"]
