"""A cumulative series (--cumulative): the square-root factorisation over the periods, charged once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpcore.core.session import Charge, Session
from dpcore.errors import BudgetError
from dpcore.estimate.prefix_sums import compare_variances, release_prefix_sums
from dpcore.privacy.budget import zcdp
from dpcore.privacy.noise import NoiseSource
from dpcore.privacy.units import TimeUnit, Unit
from dpcore.series import release_cumulative, series_csv_with_cumulative

EVENT = TimeUnit("event", Unit(), "week")
COUNTS = np.array([[3, 0, 5], [1, 2, 0], [0, 0, 7], [4, 1, 1]], dtype=float)
LABELS = ["w1", "w2", "w3", "w4"]
AREAS = ["a", "b", "c"]


def _budget(session: Session, unit: TimeUnit = EVENT, **kw):
    return session.series_budget("points", "whole", [("w1", "x")], unit, default=zcdp(0.5), **kw)


def test_cumulative_values_are_the_factorised_release_and_charged_once(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    budget = _budget(session)
    out = release_cumulative(COUNTS, LABELS, AREAS, 0.1, unit=EVENT, budget=budget, fingerprint="fp",
                             session=session, noise=NoiseSource(seed=7))
    want = release_prefix_sums(COUNTS, 0.1, NoiseSource(seed=7))
    got = out.table["cumulative"].to_numpy().reshape(4, 3)
    assert np.array_equal(got, want.prefix)  # the same draw, as published
    assert out.table["cumulative_sd"].to_numpy().reshape(4, 3)[:, 0].tolist() == want.prefix_sd.tolist()
    assert out.table["period"].tolist()[:3] == ["w1"] * 3 and out.table["area"].tolist()[:3] == AREAS
    # charged once: one entry of ρ = 0.1 on the cumulative ledger, counted in every period (0.1 each)
    entries = budget.cumulative_ledger().entries
    assert [e.charged for e in entries] == [0.1]
    assert budget.ledger("w3").spent == pytest.approx(0.1) and budget.ledger("w9").spent == pytest.approx(0.1)
    # the horizon: ρ·‖C·1_T‖²/‖c‖² (not T·ρ = 0.4, not T²·ρ = 1.6)
    multiple = compare_variances(4)["factorisation"]["horizon_rho_multiple"]
    assert budget.horizon()["rho"] == pytest.approx(0.1 * multiple)
    assert 4 < multiple < 16
    # re-served, not re-noised, not charged
    again = release_cumulative(COUNTS, LABELS, AREAS, 0.1, unit=EVENT, budget=budget, fingerprint="fp",
                               session=session, noise=NoiseSource(seed=8))
    assert again.status == "re-served" and again.table.equals(out.table)
    assert len(budget.cumulative_ledger().entries) == 1
    # the record states both designs and the recommendation
    assert out.record["comparison"]["factorisation"]["ytd"] < out.record["comparison"]["leaves"]["ytd"]
    assert out.record["recommendation"]["method"] == "factorisation"
    assert out.record["recommendation"]["by_statistic"] == {"period": "leaves", "cumulative": "factorisation"}


def test_cumulative_and_periods_share_the_per_period_cap(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    budget = _budget(session)
    session.release(budget.ledger("w2"), Charge(zcdp(0.3), "w2", unit=Unit()), lambda: None)
    with pytest.raises(BudgetError):  # 0.3 + 0.25 > 0.5 in w2
        release_cumulative(COUNTS, LABELS, AREAS, 0.25, unit=EVENT, budget=budget, fingerprint="fp",
                           session=session, noise=NoiseSource(seed=1))
    release_cumulative(COUNTS, LABELS, AREAS, 0.2, unit=EVENT, budget=budget, fingerprint="fp",
                       session=session, noise=NoiseSource(seed=1))
    with pytest.raises(BudgetError):  # w1: 0.2 (cumulative) + 0.31 > 0.5
        session.release(budget.ledger("w1"), Charge(zcdp(0.31), "w1", unit=Unit()), lambda: None)


def test_a_person_over_the_horizon_pays_the_cumulative_on_the_horizon_ledger(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "l.sqlite")
    unit = TimeUnit("person", Unit("person", cap=2), "week", max_periods=2)
    budget = _budget(session, unit)
    out = release_cumulative(COUNTS, LABELS, AREAS, 0.1, unit=unit, budget=budget, fingerprint="fp",
                             session=session, noise=NoiseSource(seed=3))
    assert budget.ledger("w1").spent == pytest.approx(0.1)  # the one horizon ledger
    assert out.record["plan"]["periods_per_person"] == 2 and out.record["plan"]["per_period_sensitivity"] == 2


def test_a_persons_cumulative_is_counted_once_not_as_a_period(tmp_path: Path) -> None:
    """Unit person: the cumulative (ρ = 0.1, on the horizon ledger) and three periods at 0.05 each.
    By hand: horizon ρ = 3·0.05 + 0.1 = 0.25 over 3 periods (not 4); the projection's rate is the
    periods' 0.05 (52 weeks: 2.6); a person in at most w = 2 periods loses at most 2·0.05 + 0.1 = 0.2
    (the cumulative is not one of the w largest "periods")."""
    session = Session.open(tmp_path / "l.sqlite")
    unit = TimeUnit("person", Unit("person", cap=2), "week", max_periods=2)
    budget = _budget(session, unit)
    release_cumulative(COUNTS, LABELS, AREAS, 0.1, unit=unit, budget=budget, fingerprint="fp", session=session,
                       noise=NoiseSource(seed=3))
    for w in LABELS[:3]:
        session.release(budget.ledger(w), Charge(zcdp(0.05), w, unit=unit.base), lambda: None)
    h = budget.horizon()
    assert h["periods"] == 3
    assert h["rho"] == pytest.approx(0.25)
    assert h["projection"]["rho"] == pytest.approx(52 * 0.05)
    assert h["person_bound"]["rho"] == pytest.approx(0.2)


def test_series_csv_gains_the_cumulative_columns() -> None:
    out = release_cumulative(COUNTS, LABELS, AREAS, 0.1, unit=EVENT, budget=None, fingerprint="fp",
                             noise=NoiseSource(seed=7))
    series = b"period,area,noisy_count\nw1,a,3\nw1,b,0\nw1,c,5\nw2,a,1\n"
    text = series_csv_with_cumulative(series, out).decode()
    assert text.splitlines()[0] == ("period,area,noisy_count,cumulative,cumulative_sd,cumulative_ci95_low,"
                                    "cumulative_ci95_high")
    rows = [r.split(",") for r in text.splitlines()[1:]]
    # every cumulative cell: the published rows first in their period, the other cells after them
    assert [(r[0], r[1]) for r in rows] == [("w1", "a"), ("w1", "b"), ("w1", "c"), ("w2", "a"), ("w2", "b"),
                                            ("w2", "c")] + [(p, a) for p in ("w3", "w4") for a in AREAS]
    assert [r[2] for r in rows[:5]] == ["3", "0", "5", "1", ""]
    assert float(rows[4][3]) == out.table["cumulative"].iloc[4]


def test_periods_under_a_cumulative_bear_both_releases(tmp_path: Path) -> None:
    """Event unit, --cumulative on top of the periods: each period bears two releases (its own and the
    cumulative, one mechanism over every period), so its ledger counts both, and the horizon figure
    counts each period's charge once and the cumulative once at ρ·horizon_rho_multiple.
    By hand: periods 0.05 each, cumulative 0.1: each period has spent 0.15; horizon
    4·0.05 + 0.1·multiple."""
    session = Session.open(tmp_path / "l.sqlite")
    budget = _budget(session)
    release_cumulative(COUNTS, LABELS, AREAS, 0.1, unit=EVENT, budget=budget, fingerprint="fp", session=session,
                       noise=NoiseSource(seed=2))
    for w in LABELS:
        session.release(budget.ledger(w), Charge(zcdp(0.05), w, unit=Unit()), lambda: None)
    assert all(budget.ledger(w).spent == pytest.approx(0.15) for w in LABELS)
    multiple = compare_variances(4)["factorisation"]["horizon_rho_multiple"]
    h = budget.horizon()
    assert h["periods"] == 4 and h["rho"] == pytest.approx(4 * 0.05 + 0.1 * multiple)
    assert "cumulative" in h["oneoff"]["text"]
