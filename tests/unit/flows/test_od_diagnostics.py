"""Curator-only empirical errors of an O/D release (dpcore.flows.diagnostics) against hand-computed
values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from od_testing import up

from dpcore import catalog
from dpcore.errors import InputError
from dpcore.flows.counts import ODCounts
from dpcore.flows.diagnostics import empirical_errors
from dpcore.flows.mechanisms.common import ODRelease
from dpcore.flows.tree import hierarchy_from_prefixes
from dpcore.privacy import budget


def test_empirical_errors_match_hand_computed_values() -> None:
    """States A = {a1, a2}, B = {b1}.  Truth: a1→a2: 5, b1→a1: 3.  Release (leaves): a1→a2: 7,
    a2→b1: 2 (a false positive); b1→a1 is missing (a false negative)."""
    h = hierarchy_from_prefixes(["A1", "A2", "B1"], [1, 2], ["state", "area"])
    truth = pd.DataFrame({"o": ["A1"] * 5 + ["B1"] * 3, "d": ["A2"] * 5 + ["A1"] * 3})
    c = ODCounts.from_frame(truth, h, origin="o", destination="d")
    p = catalog.get("od", "vanilla_gauss").plan_tree(h, h, budget.zcdp(1.0))
    leaf = {(0, 1): 7, (1, 2): 2}  # (a1, a2), (a2, b1)
    outs = []
    for lp in p.levels:
        agg: dict[tuple[int, int], int] = {}
        for (o, d), v in leaf.items():
            k = (int(up(h, 2, lp.origin_depth)[o]), int(up(h, 2, lp.destination_depth)[d]))
            agg[k] = agg.get(k, 0) + v
        ks = sorted(agg, key=lambda k: k[0] * h.sizes[lp.destination_depth] + k[1])
        outs.append((np.array([k[0] for k in ks], dtype=np.int64), np.array([k[1] for k in ks], dtype=np.int64),
                     np.array([agg[k] for k in ks], dtype=np.int64)))
    rel = ODRelease(h, h, p, tuple(x[0] for x in outs), tuple(x[1] for x in outs), tuple(x[2] for x in outs), None)
    rows = empirical_errors(rel, c)
    assert [r["level"] for r in rows] == ["total", "total>state", "state", "state>area", "area"]
    leaf_row = rows[4]
    assert leaf_row["possible_pairs"] == 9 and leaf_row["true_pairs"] == 2 and leaf_row["released_pairs"] == 2
    assert leaf_row["max_abs_error"] == 3.0  # |0 − 3| at b1→a1
    assert leaf_row["mean_abs_error"] == pytest.approx(7 / 3)  # (2 + 3 + 2) over the 3 pairs in the union
    assert leaf_row["mae_all_pairs"] == pytest.approx(7 / 9)
    assert leaf_row["rmse_all_pairs"] == pytest.approx(math.sqrt(17 / 9))
    assert leaf_row["false_positives"] == 1 and leaf_row["fdr_percent"] == pytest.approx(50.0)
    assert leaf_row["false_negatives"] == 1 and leaf_row["fnr_percent"] == pytest.approx(50.0)
    assert leaf_row["median_relative_error"] == pytest.approx(0.7)  # 2/5 and 3/3
    assert leaf_row["p95_relative_error"] == pytest.approx(0.4 + 0.95 * 0.6)
    state = rows[2]  # A→A: 5 vs 7, B→A: 3 vs 0, A→B: 0 vs 2
    assert (state["max_abs_error"], state["mean_abs_error"], state["mae_all_pairs"]) == (3.0, pytest.approx(7 / 3),
                                                                                         pytest.approx(7 / 4))
    assert state["fdr_percent"] == pytest.approx(50.0) and state["fnr_percent"] == pytest.approx(50.0)
    cross = rows[1]  # total→A: 8 vs 7, total→B: 0 vs 2
    assert cross["max_abs_error"] == 2.0 and cross["mean_abs_error"] == pytest.approx(1.5)
    assert cross["mae_all_pairs"] == pytest.approx(1.5) and cross["false_positives"] == 1
    assert cross["fdr_percent"] == pytest.approx(50.0) and cross["fnr_percent"] == 0.0
    assert cross["median_relative_error"] == pytest.approx(1 / 8)
    assert rows[0]["max_abs_error"] == 1.0  # 9 released vs 8 true
    # nothing released: the FDR is undefined (pitfall 12)
    nothing = tuple(np.zeros(0, np.int64) for _ in range(5))
    r = empirical_errors(ODRelease(h, h, p, nothing, nothing, nothing, None), c)[4]
    assert math.isnan(r["fdr_percent"]) and r["fnr_percent"] == 100.0 and r["released_pairs"] == 0
    other = hierarchy_from_prefixes(["A1", "A2", "B2"], [1, 2], ["state", "area"])
    with pytest.raises(InputError, match="another hierarchy"):
        empirical_errors(ODRelease(other, other, p, nothing, nothing, nothing, None), c)
