"""Hypothesis invariants of the per-node TopDown projections (dpcore.estimate.topdown_opt).

shared/specs/topdown-od.md §2.6 ("invariants to test on every output"), §9 item 1: every
output is int64, non-negative, sums to the parent's total; IntOpt reaches exactly α*
(bisection oracle and the closed form agree); L2 passes the unit-exchange optimality
certificate; the segment versions equal per-segment single calls;
IntOpt equals the paper's Algorithm 2 run literally.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpcore.estimate.topdown_opt import (
    intopt,
    intopt_alg2,
    intopt_segments,
    l2_round,
    l2_round_segments,
    linf_alpha,
    linf_alpha_segments,
)

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

orders = st.sampled_from(["ascending", "descending"])


@st.composite
def levels(draw, max_abs: int = 40, max_b: int = 9, max_m: int = 8):
    """A tree level: m segments (x, c), a tie-break choice and the packed CSR arrays."""
    m = draw(st.integers(1, max_m))
    small = st.integers(-3, 3)  # many ties and zeros
    wide = st.integers(-max_abs, max_abs)
    cases = []
    for _ in range(m):
        x = draw(st.lists(st.one_of(small, wide), min_size=1, max_size=max_b))
        bound = sum(abs(v) for v in x) + 3 * len(x)
        c = draw(st.one_of(st.just(0), st.integers(0, bound)))
        cases.append((np.array(x, dtype=np.int64), c))
    lens = [x.size for x, _ in cases]
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    x_all = np.concatenate([x for x, _ in cases])
    totals = np.array([c for _, c in cases], dtype=np.int64)
    tb_kind = draw(st.sampled_from(["none", "perm", "coarse"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if tb_kind == "none":
        tb = None
    elif tb_kind == "perm":
        tb = rng.permutation(x_all.size)
    else:  # a key with ties of its own (falls back to index)
        tb = rng.integers(0, 3, size=x_all.size).astype(np.float64)
    return cases, x_all, offsets, totals, tb


def pieces(arr, offsets):
    return [arr[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]


def exchange_optimal(x, y) -> bool:
    """No unit move i → j (y_i > 0) lowers Σ(y − x)² (certifies the integer L2 optimum)."""
    r = y - x
    pos = y > 0
    return not pos.any() or int(r.min()) - int(r[pos].max()) >= -1


@SETTINGS
@given(levels(), orders)
def test_intopt_segments_invariants(level, order) -> None:
    cases, x_all, offsets, totals, tb = level
    y_all = intopt_segments(x_all, offsets, totals, order=order, tiebreak=tb)
    alpha = linf_alpha_segments(x_all, offsets, totals)
    assert y_all.dtype == np.int64 and y_all.shape == x_all.shape
    assert (y_all >= 0).all()
    # equal to per-segment single calls
    tbs = [None] * len(cases) if tb is None else pieces(tb, offsets)
    for (x, c), y, a, t in zip(cases, pieces(y_all, offsets), alpha, tbs, strict=True):
        assert int(y.sum()) == c
        assert linf_alpha(x, c) == a
        assert int(np.abs(y - x).max()) == a
        assert y.tolist() == intopt(x, c, order=order, tiebreak=t).tolist()
        if c == 0:
            assert not y.any()
        if x.size == 1:
            assert y.tolist() == [c]


@SETTINGS
@given(levels(max_abs=25, max_b=7, max_m=3), orders)
def test_intopt_equals_algorithm2(level, order) -> None:
    cases, _, offsets, _, tb = level
    tbs = [None] * len(cases) if tb is None else pieces(tb, offsets)
    for (x, c), t in zip(cases, tbs, strict=True):
        assert intopt(x, c, order=order, tiebreak=t).tolist() == \
            intopt_alg2(x, c, order=order, tiebreak=t).tolist()


@SETTINGS
@given(levels())
def test_l2_segments_invariants(level) -> None:
    cases, x_all, offsets, totals, tb = level
    y_all = l2_round_segments(x_all, offsets, totals, tiebreak=tb)
    assert y_all.dtype == np.int64 and (y_all >= 0).all()
    tbs = [None] * len(cases) if tb is None else pieces(tb, offsets)
    for (x, c), y, t in zip(cases, pieces(y_all, offsets), tbs, strict=True):
        assert int(y.sum()) == c
        assert exchange_optimal(x, y)
        assert y.tolist() == l2_round(x, c, tiebreak=t).tolist()


@SETTINGS
@given(levels(max_abs=10**12, max_b=12, max_m=5), orders)
def test_huge_values(level, order) -> None:
    """int64 values near 1e12 (sums near 1e13): still exact, closed form = bisection."""
    cases, x_all, offsets, totals, tb = level
    y_all = intopt_segments(x_all, offsets, totals, order=order, tiebreak=tb)
    l2_all = l2_round_segments(x_all, offsets, totals, tiebreak=tb)
    alpha = linf_alpha_segments(x_all, offsets, totals)
    for (x, c), y, y2, a in zip(cases, pieces(y_all, offsets), pieces(l2_all, offsets), alpha,
                                strict=True):
        assert linf_alpha(x, c) == a
        assert int(y.sum()) == c and (y >= 0).all() and int(np.abs(y - x).max()) == a
        assert int(y2.sum()) == c and (y2 >= 0).all() and exchange_optimal(x, y2)


@SETTINGS
@given(st.lists(st.floats(-20, 40, allow_nan=False), min_size=1, max_size=8),
       st.integers(0, 60), st.integers(0, 2**32 - 1))
def test_l2_real_input(xs, c, seed) -> None:
    """Real-valued x (single version): sums, non-negativity, and the exchange certificate
    for real x: (y_j − x_j) − (y_i − x_i) ≥ −1 for all i with y_i > 0 (up to rounding)."""
    x = np.array(xs)
    y = l2_round(x, c, tiebreak=np.random.default_rng(seed).permutation(x.size))
    assert y.dtype == np.int64 and (y >= 0).all() and int(y.sum()) == c
    r = y - x
    pos = y > 0
    assert not pos.any() or r.min() - r[pos].max() >= -1 - 1e-9
