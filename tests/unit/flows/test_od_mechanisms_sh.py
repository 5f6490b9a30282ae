"""The stability histogram baseline (Bun, Nissim & Stemmer; Boninsegna & Silvestri, PoPETs 2025,
Sec. 2.1): noise on observed pairs, the (ε, δ) threshold, and its refusal by the budgeted pipeline."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from flows_helpers import plan_od
from od_testing import (
    NoDraw,
    Recorder,
    check_tree_release,
    level_matrix,
    make_states,
    random_trips,
    tree_h,
    truth_matrix,
)

from dpcore import catalog, pipeline
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import ParameterError
from dpcore.flows.counts import ODCounts
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger


@pytest.fixture(scope="module")
def states() -> Hierarchy:
    """3 states with 2, 3 and 1 counties (prefix codes)."""
    return make_states()


@pytest.mark.parametrize("neighbour", ["replace", "add_remove"])
def test_sh_noises_observed_pairs_and_suppresses_those_below_the_threshold(neighbour: str) -> None:
    """SH: discrete Laplace of scale GS₁/ε on the observed finest pairs only; pairs below
    τ = 1 + scale·ln(k/δ) (bounded: scale 2/ε, k = 2, i.e. τ = 1 + (2/ε) ln(2/δ)) are dropped;
    no false positives at any level."""
    h = tree_h([4, 4])
    rng = np.random.default_rng(8)
    df = random_trips(rng, h, h, 3000)
    c = ODCounts.from_frame(df, h, origin="o", destination="d")
    eps, delta = 1.0, 1e-6
    scale = 2 / eps if neighbour == "replace" else 1 / eps
    tau = 1 + scale * math.log((2 if neighbour == "replace" else 1) / delta)
    observed = set(zip(c.origin.tolist(), c.destination.tolist(), strict=True))
    released = 0
    for seed in range(5):
        src = Recorder(seed)
        rel = catalog.get("od", "sh").release_counts(c, None, src, approx=(eps, delta), neighbour=neighbour)
        assert rel.plan.sh_threshold == pytest.approx(tau, rel=1e-12)
        assert rel.plan.cost is None and rel.plan.approx == (eps, delta)
        assert [(k, n) for k, _, n in src.calls] == [("discrete_laplace", c.n_pairs)]
        assert src.calls[0][1] == Fraction(scale)
        assert "noised_cells" not in rel.details  # the number of observed pairs is confidential
        T = rel.depth
        leaves = set(zip(rel.origins[T].tolist(), rel.destinations[T].tolist(), strict=True))
        assert leaves <= observed
        assert (rel.values[T] >= tau).all()
        released += len(leaves)
        check_tree_release(rel)
        for t, lp in enumerate(rel.plan.levels):
            truth = truth_matrix(df, h, h, lp.origin_depth, lp.destination_depth)
            assert not ((level_matrix(rel, t) > 0) & (truth == 0)).any()
        # a pair of one or two people survives with probability ≤ e^{1/scale}·δ/k: never here
        idx = np.searchsorted(c.origin * h.n_leaves + c.destination,
                              rel.origins[T] * h.n_leaves + rel.destinations[T])
        assert (c.count[idx] > 2).all()
    assert released > 0 and (c.count <= 2).sum() > 20


def test_sh_is_refused_by_the_pipeline(states: Hierarchy) -> None:
    df = pd.DataFrame({"o": ["0101"], "d": ["0102"]})
    c = ODCounts.from_frame(df, states, origin="o", destination="d")
    led = Ledger(budget.zcdp(1.0))
    with pytest.raises(ParameterError, match=r"\(ε, δ\)"):
        pipeline.release(plan_od(c, "sh", budget.zcdp(0.1)), c, ledger=led, noise=NoDraw(0))
    assert led.spent == 0 and not led.entries
