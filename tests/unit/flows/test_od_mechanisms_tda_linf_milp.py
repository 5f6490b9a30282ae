"""The MILP baseline TDA_ℓ∞ (Boninsegna & Silvestri, PoPETs 2025, Sec. 5): its solver-call limit is
checked from public inputs, before any budget is spent."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from flows_helpers import plan_od
from od_testing import tree_h

from dpcore import catalog, pipeline
from dpcore.errors import ParameterError
from dpcore.flows.counts import ODCounts
from dpcore.flows.mechanisms import tda_linf_milp
from dpcore.flows.tree import hierarchy_from_prefixes
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource


def test_milp_solver_call_limit_is_checked_before_spending(monkeypatch: pytest.MonkeyPatch) -> None:
    h = tree_h([3, 2])
    rng = np.random.default_rng(4)
    df = pd.DataFrame({"o": rng.choice(h.labels(2), 600), "d": rng.choice(h.labels(2), 600)})
    c = ODCounts.from_frame(df, h, origin="o", destination="d")
    monkeypatch.setattr(tda_linf_milp, "MILP_MAX_SUBPROBLEMS", 2)  # level 2 has 3 surviving parents here
    led = Ledger(budget.zcdp(1.0))
    with pytest.raises(ParameterError, match="solver calls"):
        pipeline.release(plan_od(c, "tda_linf_milp", budget.zcdp(0.5)), c, ledger=led, noise=NoiseSource(0))
    assert led.spent == 0 and not led.entries, "budget charged, but no release was returned"


def test_milp_plan_with_only_the_total_measured_is_accepted() -> None:
    """One area, unbounded: only the total is measured (every other level is a copy level); the
    MILP size check must not fail on an empty list of measured levels (found by hypothesis)."""
    h = hierarchy_from_prefixes(["0101"], [2, 4])
    p = catalog.get("od", "tda_linf_milp").plan_tree(h, h, budget.zcdp(0.5), neighbour="add_remove")
    assert [lv.measured for lv in p.levels] == [True] + [False] * 4
