"""The shared release step: validate, charge, then draw; curator-only error reports."""

from __future__ import annotations

import numpy as np
import pytest
from points_helpers import plan_points

from dpcore import pipeline
from dpcore.data import queries
from dpcore.data.domain import Bounds, Grid, aggregate_points
from dpcore.errors import BudgetError, ParameterError
from dpcore.points import diagnostics
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource

GRID = Grid(Bounds(-74.06, 40.56, -73.70, 40.92), 64, 64)


def aggregate(n: int = 5000, seed: int = 0):
    rng = np.random.default_rng(seed)
    return aggregate_points(rng.normal(-73.95, 0.03, n), rng.normal(40.75, 0.03, n), GRID)


class CountingSource(NoiseSource):
    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.calls = 0

    def random_uint64(self, size: int) -> np.ndarray:
        self.calls += 1
        return super().random_uint64(size)


def test_release_charges_the_ledger_once_with_the_mechanism_and_params():
    led = Ledger(budget.pure(1.0))
    agg = aggregate()
    rel = pipeline.release(plan_points(agg, "ug", 0.4, {"c": "10"}), agg, ledger=led, noise=NoiseSource(1)).inner
    assert led.spent == pytest.approx(0.4)
    (entry,) = led.entries
    assert entry.details["mechanism"] == "ug" and entry.details["params"]["c"] == 10.0
    assert rel.cost.value == pytest.approx(0.4)


@pytest.mark.parametrize(
    ("mechanism", "params", "epsilon", "error"),
    [
        ("ug", {"nope": 1}, 0.4, ParameterError),   # unknown parameter
        ("ug", {"c": 0}, 0.4, ParameterError),      # out of range
        ("no-such", {}, 0.4, ParameterError),       # unknown mechanism
        ("ug", {}, -1.0, ParameterError),           # bad epsilon
        ("identity", {}, 0.7, BudgetError),         # over the remaining budget
    ],
)
def test_refused_release_spends_nothing_and_draws_no_noise(mechanism, params, epsilon, error):
    led = Ledger(budget.pure(1.0))
    led.spend(budget.pure(0.5), "earlier")
    src = CountingSource(2)
    with pytest.raises(error):
        agg = aggregate()
        pipeline.release(plan_points(agg, mechanism, epsilon, params), agg, ledger=led, noise=src)
    assert led.spent == pytest.approx(0.5) and len(led.entries) == 1
    assert src.calls == 0


def test_empirical_errors_match_a_known_error():
    """Every cell is released 3 too high, so each query's error is 3 × its number of cells."""

    class PlusThree(NoiseSource):
        def discrete_laplace(self, scale, size):
            return np.full(size, 3, dtype=np.int64)

    agg = aggregate()
    led = Ledger(budget.pure(1.0))
    rel = pipeline.release(plan_points(agg, "identity", 0.5, {}), agg, ledger=led, noise=PlusThree(3)).inner
    rows = diagnostics.empirical_errors(rel, agg, n_per_size=100, seed=5)
    assert [r["query_size"] for r in rows] == [0.02, 0.06, 0.10, "all"]
    qs, tags = queries.random_rectangles(GRID, (0.02, 0.06, 0.10), 100, shape="random", seed=5)
    cells = ((qs[:, 1] - qs[:, 0]) * (qs[:, 3] - qs[:, 2])).astype(float)
    for r in rows[:3]:
        m = tags == r["query_size"]
        assert r["n_queries"] == 100
        assert r["mae"] == pytest.approx(3 * cells[m].mean())
        assert r["max_abs_error"] == pytest.approx(3 * cells[m].max())
        assert r["rmse"] == pytest.approx(3 * np.sqrt((cells[m] ** 2).mean()))
    assert rows[3]["mae"] == pytest.approx(3 * cells.mean())
    cell = diagnostics.cell_errors(rel, agg)
    assert cell == pytest.approx({"mae": 3.0, "rmse": 3.0, "max_abs_error": 3.0})
