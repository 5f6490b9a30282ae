"""InfTDA's projection, IntOpt (Boninsegna & Silvestri, PoPETs 2025, Algorithm 2): every segment
reaches the optimum that scipy's MILP (HiGHS) finds, and the zeroing order decides which pairs
are dropped."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from od_testing import Scripted, level_matrix, tree_h
from scipy.optimize import Bounds, LinearConstraint, milp

from dpcore import catalog
from dpcore.estimate import topdown_opt
from dpcore.flows.counts import ODCounts
from dpcore.privacy import budget


@pytest.mark.parametrize("orientation", ["destination", "origin"])
def test_intopt_zeroing_order_decides_which_pairs_are_dropped(orientation: str) -> None:
    """Level-1 noise (3, 1, 2) on truth (0, 0, 100): x = (3, 1, 102) must lose 6; IntOpt
    ascending zeroes the small cells, descending takes from the largest first."""
    h = tree_h([3, 3])
    df = pd.DataFrame({"o": ["A2.0"] * 100, "d": ["A2.1"] * 100})
    c = ODCounts.from_frame(df, h, origin="o", destination="d")
    x = np.array([3, 1, 102])
    outs = {}
    for order in ("ascending", "descending"):
        rel = catalog.get("od", "inftda").release_counts(
            c, budget.zcdp(0.1), Scripted([[3, 1, 2]]), orientation=orientation,
            order=order, tiebreak="index")
        expect = topdown_opt.intopt(x, 100, order=order)
        assert level_matrix(rel, 1).ravel().tolist() == expect.tolist()
        assert rel.plan.order == order
        outs[order] = expect.tolist()
    assert outs == {"ascending": [0, 0, 100], "descending": [1, 0, 99]}


def milp_alpha(x: np.ndarray, c: int) -> int:
    """α* = min ‖y − x‖_∞ s.t. y ∈ ℕ₀^b, Σy = c, by scipy.optimize.milp (HiGHS)."""
    b = x.size
    cost = np.r_[np.zeros(b), 1.0]
    eye = np.eye(b)
    a = np.block([[eye, -np.ones((b, 1))], [eye, np.ones((b, 1))], [np.ones((1, b)), np.zeros((1, 1))]])
    lo = np.r_[np.full(b, -np.inf), x, c]
    hi = np.r_[x, np.full(b, np.inf), c]
    res = milp(cost, constraints=LinearConstraint(a, lo, hi), integrality=np.ones(b + 1),
               bounds=Bounds(np.zeros(b + 1), np.full(b + 1, np.inf)))
    assert res.success
    return round(res.fun)


def box_alpha(x: np.ndarray, c: int) -> int:
    """α* by its definition, searched upwards: the least integer α for which some y ∈ ℕ₀^b with
    ‖y − x‖_∞ ≤ α sums to c, i.e. every box ``[max(0, x_i − α), x_i + α]`` is non-empty and
    ``c`` lies between the sum of the lower ends and the sum of the upper ends (a box of integers
    reaches every total in between).  Independent of topdown_opt's closed form; checked against
    :func:`milp_alpha` below."""
    alpha = 0
    while not ((x + alpha >= 0).all() and np.maximum(x - alpha, 0).sum() <= c <= (x + alpha).sum()):
        alpha += 1
    return alpha


#: Every how many-th case is also solved by scipy's MILP (≈ 5 ms a call): 400 of the 2,000.
MILP_EVERY = 5


def test_intopt_segments_reach_the_milp_optimum() -> None:
    """2,000 random O/D-like segments (b = 1..10 children, sparse true counts plus small integer
    noise: many ties and negatives; c = 0..30 with c = 0 in about a fifth).  The objective of
    every IntOpt segment equals the optimum α*, and y is a non-negative integer vector summing to c.
    α* is found for every case by :func:`box_alpha` (the feasibility of α read off its definition)
    and, for every :data:`MILP_EVERY`-th case, also by scipy's MILP (HiGHS), which must agree (milp
    takes about 5 ms a call: all 2,000 took ≈ 10 s; box_alpha and milp agree on all 2,000)."""
    rng = np.random.default_rng(7)
    cases = []
    for _ in range(2000):
        b = int(rng.integers(1, 11))
        true = rng.poisson(0.8, b) * rng.integers(0, 12)
        x = true + rng.integers(-3, 4, b)
        c = 0 if rng.random() < 0.2 else int(rng.integers(0, 31))
        cases.append((x.astype(np.int64), c))
    assert sum(c == 0 for _, c in cases) > 300
    assert sum(len(set(x.tolist())) < len(x) for x, _ in cases) > 1000  # ties
    xs = np.concatenate([x for x, _ in cases])
    offsets = np.r_[0, np.cumsum([len(x) for x, _ in cases])].astype(np.int64)
    totals = np.array([c for _, c in cases], dtype=np.int64)
    tb = rng.permutation(xs.size)
    alpha_seg = topdown_opt.linf_alpha_segments(xs, offsets, totals)
    ys = {(order, tie is None): topdown_opt.intopt_segments(xs, offsets, totals, order=order, tiebreak=tie)
          for order in ("ascending", "descending") for tie in (None, tb)}
    for i, (x, c) in enumerate(cases):
        a = box_alpha(x, c)
        if i % MILP_EVERY == 0:
            assert milp_alpha(x, c) == a, (x, c)
        assert alpha_seg[i] == a, (x, c)
        for y_all in ys.values():
            y = y_all[offsets[i]:offsets[i + 1]]
            assert y.dtype == np.int64 and int(y.sum()) == c and (y >= 0).all(), (x, c, y)
            assert int(np.abs(y - x).max()) == a, (x, c, y)
