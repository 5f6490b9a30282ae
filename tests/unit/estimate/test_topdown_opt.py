"""Per-node TopDown projections (dpcore.estimate.topdown_opt): IntOpt (L∞) and the exact L2 rounding.

shared/specs/topdown-od.md §2.5–2.7, §8.2, §9 item 1; census-optimization.md §6.1.
Oracles: the §2.6 test-vector table, scipy.optimize.milp (HiGHS) for α*, the paper's
Algorithm 2 run literally, and exhaustive search for the integer L2 problem.
"""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np
import pytest
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from dpcore.errors import ParameterError
from dpcore.estimate.topdown_opt import (
    intopt,
    intopt_alg2,
    intopt_segments,
    l2_round,
    l2_round_segments,
    linf_alpha,
    linf_alpha_segments,
)

# §2.6 test vectors: x, c, IntOpt y (ascending, ties by index), α*
TABLE = [
    ((0, -1, 1), 2, (0, 0, 2), 1),
    ((20, 0), 0, (0, 0), 20),
    ((5, 3, -2, 0), 10, (6, 4, 0, 0), 2),
    ((5, 3, -2, 0), 1, (1, 0, 0, 0), 4),
    ((1, 1, 1, 1), 1, (0, 0, 0, 1), 1),
    ((10, -4, 2, 7, 0, -1), 30, (13, 0, 5, 10, 2, 0), 4),
    ((10, -4, 2, 7, 0, -1), 3, (3, 0, 0, 0, 0, 0), 7),
    ((-5, -5, -5), 6, (2, 2, 2), 7),
    ((3, 3, 3), 3, (1, 1, 1), 2),
    ((100, 1, 1, 1), 50, (50, 0, 0, 0), 50),
    ((2, 0, 0, 1, 0), 3, (2, 0, 0, 1, 0), 0),
    ((-1, -2, 4, 6), 40, (8, 4, 13, 15), 9),
]


def pack(cases):
    """Concatenate (x, c) cases into CSR segments."""
    xs = [np.asarray(x, dtype=np.int64) for x, _ in cases]
    offsets = np.concatenate([[0], np.cumsum([len(x) for x in xs])]).astype(np.int64)
    return np.concatenate(xs), offsets, np.array([c for _, c in cases], dtype=np.int64)


def split(y, offsets):
    return [y[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]


def check_linf(x, c, y, alpha):
    x = np.asarray(x, dtype=np.int64)
    assert y.dtype == np.int64
    assert y.shape == x.shape
    assert int(y.sum()) == c
    assert (y >= 0).all()
    assert int(np.abs(y - x).max()) == alpha


def l2_exchange_optimal(x, y) -> bool:
    """Integer L2 optimality: no unit move i → j (y_i > 0) lowers Σ(y − x)².

    The objective is separable convex on {y ∈ ℕ^b, Σy = c}, so pairwise unit exchanges
    certify global optimality: need (y_j − x_j) − (y_i − x_i) ≥ −1 for all i with y_i > 0.
    """
    r = np.asarray(y, dtype=np.int64) - np.asarray(x, dtype=np.int64)
    pos = np.asarray(y) > 0
    return not pos.any() or int(r.min()) - int(r[pos].max()) >= -1


# ---------------------------------------------------------------- the §2.6 table


@pytest.mark.parametrize("x, c, y, alpha", TABLE)
def test_table_single(x, c, y, alpha) -> None:
    assert linf_alpha(np.array(x), c) == alpha
    for fn in (intopt, intopt_alg2):
        out = fn(np.array(x), c)
        assert out.tolist() == list(y), fn.__name__
        check_linf(x, c, out, alpha)
    # explicit defaults give the same vector
    assert intopt(np.array(x), c, order="ascending", tiebreak=None).tolist() == list(y)
    assert intopt(np.array(x), c, tiebreak=np.arange(len(x))).tolist() == list(y)


def test_table_segments() -> None:
    x, offsets, totals = pack([(x, c) for x, c, _, _ in TABLE])
    y = intopt_segments(x, offsets, totals)
    assert [s.tolist() for s in split(y, offsets)] == [list(r[2]) for r in TABLE]
    assert linf_alpha_segments(x, offsets, totals).tolist() == [r[3] for r in TABLE]
    # by index = by an increasing tie-break key
    y2 = intopt_segments(x, offsets, totals, tiebreak=np.arange(x.size) * 3.5)
    assert y2.tolist() == y.tolist()


def test_non_uniqueness_example() -> None:
    x = np.array([0, -1, 1])
    assert intopt(x, 2).tolist() == [0, 0, 2]  # the sparser optimum
    down = intopt(x, 2, order="descending")
    assert down.tolist() == [1, 0, 1]  # the other optimum
    check_linf(x, 2, down, 1)
    assert intopt_alg2(x, 2, order="descending").tolist() == [1, 0, 1]
    assert intopt_segments(x, np.array([0, 3]), np.array([2]), order="descending").tolist() == [
        1, 0, 1]


def test_order_semantics() -> None:
    """Ascending zeroes the smallest cells first; descending the largest first."""
    x = np.array([1, 4, 2, 3])
    assert intopt(x, 7).tolist() == [0, 4, 1, 2]  # α* = 1: lowers x = 1, 2, 3
    assert intopt(x, 7, order="descending").tolist() == [1, 3, 1, 2]  # lowers x = 4, 3, 2
    check_linf(x, 7, intopt(x, 7, order="descending"), 1)


def test_tiebreak_decides_equal_values() -> None:
    x = np.array([1, 1, 1, 1])
    assert intopt(x, 1).tolist() == [0, 0, 0, 1]  # by index: the last one survives
    assert intopt(x, 1, tiebreak=np.array([3, 2, 1, 0])).tolist() == [1, 0, 0, 0]
    assert intopt(x, 1, tiebreak=np.array([0.5, 0.1, 0.9, 0.2])).tolist() == [0, 0, 1, 0]
    assert intopt_alg2(x, 1, tiebreak=np.array([0.5, 0.1, 0.9, 0.2])).tolist() == [0, 0, 1, 0]
    # tiebreak only breaks ties: never overrides the x order
    x = np.array([5, 1, 1])
    assert intopt(x, 5, tiebreak=np.array([0, 9, 8])).tolist() == [5, 0, 0]
    # equal keys fall back to index order
    assert intopt(np.array([1, 1, 1]), 1, tiebreak=np.zeros(3)).tolist() == [0, 0, 1]


# ---------------------------------------------------------------- random cases vs MILP


def milp_block(x: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Constraints of min α s.t. |y_i − x_i| ≤ α, Σy = c over (y, α): matrix, lower and upper bounds."""
    b = x.size
    eye = np.eye(b)
    a = np.block([[eye, -np.ones((b, 1))], [eye, np.ones((b, 1))],
                  [np.ones((1, b)), np.zeros((1, 1))]])
    lo = np.concatenate([np.full(b, -np.inf), x, [c]])
    hi = np.concatenate([x, np.full(b, np.inf), [c]])
    return a, lo, hi


def milp_alpha(x: np.ndarray, c: int) -> int:
    """α* by scipy.optimize.milp (HiGHS): min α s.t. |y_i − x_i| ≤ α, Σy = c, y ∈ ℕ."""
    return int(milp_alphas([(x, c)])[0])


def milp_alphas(cases: list[tuple[np.ndarray, int]], chunk: int = 50) -> np.ndarray:
    """α* of every case by scipy.optimize.milp, ``chunk`` cases per solve: one block-diagonal MILP
    minimising the sum of the cases' α.  The blocks share no variable, so a solution is optimal
    only if every block is at its own optimum: each block's α is its case's α* (the same as one
    solve per case, which cost ~5 ms of HiGHS set-up per case)."""
    out = []
    for i in range(0, len(cases), chunk):
        blocks = [milp_block(np.asarray(x), c) for x, c in cases[i:i + chunk]]
        a = sparse.block_diag([blk[0] for blk in blocks], format="csr")
        ends = np.cumsum([blk[0].shape[1] for blk in blocks]) - 1  # each block's α is its last column
        cost = np.zeros(a.shape[1])
        cost[ends] = 1.0
        res = milp(cost, constraints=LinearConstraint(a, np.concatenate([blk[1] for blk in blocks]),
                                                      np.concatenate([blk[2] for blk in blocks])),
                   integrality=np.ones(a.shape[1]), bounds=Bounds(np.zeros(a.shape[1]), np.full(a.shape[1], np.inf)))
        assert res.success, res.message
        alphas = res.x[ends]
        assert np.allclose(alphas, np.rint(alphas), atol=1e-6)
        out.append(np.rint(alphas).astype(np.int64))
    return np.concatenate(out)


def random_case(rng: np.random.Generator) -> tuple[np.ndarray, int]:
    b = int(rng.integers(1, 13))
    kind = rng.integers(0, 4)
    if kind == 0:  # many ties
        x = rng.integers(-2, 3, size=b)
    elif kind == 1:  # sparse counts + noise
        x = rng.poisson(0.7, size=b) * rng.integers(0, 30) + rng.integers(-4, 5, size=b)
    elif kind == 2:  # all negative
        x = -rng.integers(0, 8, size=b)
    else:
        x = rng.integers(-20, 41, size=b)
    if rng.random() < 1 / 3:
        c = 0
    else:
        c = int(rng.integers(1, max(2, int(np.abs(x).sum()) + 3 * b)))
    return x.astype(np.int64), c


@pytest.mark.slow
def test_random_against_milp_and_alg2() -> None:
    rng = np.random.default_rng(20240611)
    cases = [random_case(rng) for _ in range(2400)]
    assert sum(c == 0 for _, c in cases) > 600
    x_all, offsets, totals = pack(cases)
    alpha_seg = linf_alpha_segments(x_all, offsets, totals)
    keys = rng.permutation(x_all.size)
    for order in ("ascending", "descending"):
        for tb_all in (None, keys):
            seg_y = split(intopt_segments(x_all, offsets, totals, order=order, tiebreak=tb_all),
                          offsets)
            for i, (x, c) in enumerate(cases):
                tb = None if tb_all is None else tb_all[offsets[i]:offsets[i + 1]]
                y = intopt(x, c, order=order, tiebreak=tb)
                assert y.tolist() == intopt_alg2(x, c, order=order, tiebreak=tb).tolist(), (x, c)
                assert y.tolist() == seg_y[i].tolist(), (x, c)
                check_linf(x, c, y, int(alpha_seg[i]))
    for i, ((x, c), a) in enumerate(zip(cases, milp_alphas(cases), strict=True)):
        assert linf_alpha(x, c) == a, (x, c)
        assert alpha_seg[i] == a, (x, c)


def test_lemma5_bound_is_not_tight() -> None:
    """x = (20, 0), c = 0: Lemma 5 gives 10, the optimum is 20 (spec §2.5)."""
    assert linf_alpha(np.array([20, 0]), 0) == 20
    assert milp_alpha(np.array([20, 0]), 0) == 20


# ---------------------------------------------------------------- L2 vs exhaustive search


@cache
def compositions(b: int, c: int) -> np.ndarray:
    """All y ∈ ℕ^b with Σy = c, as rows (stars and bars)."""
    rows = []
    for bars in itertools.combinations(range(c + b - 1), b - 1):
        edges = (-1, *bars, c + b - 1)
        rows.append([edges[i + 1] - edges[i] - 1 for i in range(b)])
    return np.array(rows, dtype=np.int64).reshape(-1, b)


def test_compositions_helper() -> None:
    assert compositions(3, 2).tolist() == [[0, 0, 2], [0, 1, 1], [0, 2, 0], [1, 0, 1],
                                           [1, 1, 0], [2, 0, 0]]
    assert compositions(1, 5).tolist() == [[5]]


def test_l2_against_exhaustive_integer() -> None:
    rng = np.random.default_rng(7)
    cases = []
    for _ in range(2400):
        b = int(rng.integers(1, 6))
        x = rng.integers(-6, 15, size=b) if rng.random() < 0.6 else rng.integers(-2, 4, size=b)
        cases.append((x.astype(np.int64), int(rng.integers(0, 13))))
    x_all, offsets, totals = pack(cases)
    keys = rng.permutation(x_all.size)
    seg_plain = split(l2_round_segments(x_all, offsets, totals), offsets)
    seg_keyed = split(l2_round_segments(x_all, offsets, totals, tiebreak=keys), offsets)
    for i, (x, c) in enumerate(cases):
        tb = keys[offsets[i]:offsets[i + 1]]
        comp = compositions(x.size, c)
        best = int(((comp - x) ** 2).sum(axis=1).min())
        for y, seg in ((l2_round(x, c), seg_plain[i]), (l2_round(x, c, tiebreak=tb), seg_keyed[i])):
            assert y.dtype == np.int64
            assert int(y.sum()) == c and (y >= 0).all()
            assert int(((y - x) ** 2).sum()) == best, (x, c, y)
            assert y.tolist() == seg.tolist(), (x, c)
            assert l2_exchange_optimal(x, y)


def test_l2_against_exhaustive_real() -> None:
    rng = np.random.default_rng(8)
    for _ in range(800):
        b = int(rng.integers(1, 6))
        x = np.round(rng.uniform(-4, 10, size=b), int(rng.integers(0, 3)))
        if rng.random() < 0.3:
            x[-1] = x[0]  # ties
        c = int(rng.integers(0, 13))
        comp = compositions(b, c)
        best = ((comp - x) ** 2).sum(axis=1).min()
        y = l2_round(x, c, tiebreak=rng.permutation(b))
        assert int(y.sum()) == c and (y >= 0).all()
        assert ((y - x) ** 2).sum() <= best + 1e-9, (x, c, y)


def test_l2_every_tie_choice_is_optimal() -> None:
    """All b! tie-break orders give optimal (possibly different) answers."""
    x = np.array([3, 3, 3, 1, 0])
    best = int(((compositions(5, 5) - x) ** 2).sum(axis=1).min())
    seen = set()
    for perm in itertools.permutations(range(5)):
        y = l2_round(x, 5, tiebreak=np.array(perm))
        assert int(((y - x) ** 2).sum()) == best
        seen.add(tuple(y.tolist()))
    # τ = 5/3 → T = 2: floors (1, 1, 1, 0, 0), d = 2 extra units to two of the three 3s
    assert seen == {(2, 2, 1, 0, 0), (2, 1, 2, 0, 0), (1, 2, 2, 0, 0)}
    assert l2_round(x, 5).tolist() == [2, 2, 1, 0, 0]  # by index


def test_l2_known_values() -> None:
    assert l2_round(np.array([5, 3, -2, 0]), 10).tolist() == [6, 4, 0, 0]
    assert l2_round(np.array([0, 0]), 4).tolist() == [2, 2]  # τ < 0
    assert l2_round(np.array([-5, -5, -5]), 6).tolist() == [2, 2, 2]
    # eligible entries include x_i = T, whose floor is 0 (real projection T − τ > 0)
    assert l2_round(np.array([2, 1]), 2).tolist() == [2, 0]  # τ = 0.5 → T = 1, d = 0
    assert l2_round(np.array([1, 1, 1]), 1, tiebreak=np.array([2, 0, 1])).tolist() == [0, 1, 0]
    # real x: largest fractional part wins, ties by tiebreak
    assert l2_round(np.array([0.3, 1.7, 2.25]), 3).tolist() == [0, 1, 2]
    assert l2_round(np.array([0.5, 0.5, 0.2]), 1).tolist() == [1, 0, 0]
    assert l2_round(np.array([0.5, 0.5, 0.2]), 1, tiebreak=np.array([1, 0, 2])).tolist() == [
        0, 1, 0]
    # whole-number floats take the integer path
    assert l2_round(np.array([5.0, 3.0, -2.0, 0.0]), 10).tolist() == [6, 4, 0, 0]


def test_l2_beats_round_then_adjust() -> None:
    """§2.7: the authors' round-then-adjust rule can lose; ours matches brute force.

    x = (4, 4, 4, 5), c = 3: the projection is (0.5, 0.5, 0.5, 1.5); numpy's half-to-even
    rounding gives (0, 0, 0, 2), then +1 on the largest: (0, 0, 0, 3), objective 52.
    """
    x = np.array([4, 4, 4, 5])
    best = int(((compositions(4, 3) - x) ** 2).sum(axis=1).min())
    y = l2_round(x, 3)
    assert y.tolist() == [1, 1, 0, 1]
    assert int(((y - x) ** 2).sum()) == best == 50
    assert int(((np.array([0, 0, 0, 3]) - x) ** 2).sum()) == 52


# ---------------------------------------------------------------- edge cases


@pytest.mark.parametrize("x", [[7], [-3], [0], [10**12]])
@pytest.mark.parametrize("c", [0, 1, 5, 10**9])
def test_single_child(x, c) -> None:
    x = np.array(x)
    for fn in (intopt, l2_round):
        assert fn(x, c).tolist() == [c]
    assert intopt(x, c, order="descending").tolist() == [c]
    if abs(x[0]) < 100 and c < 100:
        assert intopt_alg2(x, c).tolist() == [c]
    assert linf_alpha(x, c) == abs(c - int(x[0]))
    assert intopt_segments(x, np.array([0, 1]), np.array([c])).tolist() == [c]
    assert l2_round_segments(x, np.array([0, 1]), np.array([c])).tolist() == [c]
    assert linf_alpha_segments(x, np.array([0, 1]), np.array([c])).tolist() == [abs(c - x[0])]


def test_zero_total_gives_zeros() -> None:
    x = np.array([5, -3, 0, 12, 12])
    for fn in (intopt, intopt_alg2, l2_round):
        assert fn(x, 0).tolist() == [0] * 5
    assert linf_alpha(x, 0) == 12
    xs, off, tot = pack([(x, 0), ([4], 0), ([-1, -1], 0), ([3, 9], 2)])
    assert intopt_segments(xs, off, tot).tolist() == [0] * 8 + [0, 2]
    assert l2_round_segments(xs, off, tot).tolist() == [0] * 8 + [0, 2]
    assert linf_alpha_segments(xs, off, tot).tolist() == [12, 4, 1, 7]


def test_all_negative() -> None:
    x = np.array([-3, -1, -7, -1])
    for c in (0, 1, 4, 30):
        a = linf_alpha(x, c)
        assert a == milp_alpha(x, c)
        for order in ("ascending", "descending"):
            y = intopt(x, c, order=order)
            check_linf(x, c, y, a)
            assert y.tolist() == intopt_alg2(x, c, order=order).tolist()
        y = l2_round(x, c)
        assert int(y.sum()) == c and l2_exchange_optimal(x, y)


def test_huge_values_no_overflow() -> None:
    rng = np.random.default_rng(3)
    cases = []
    for _ in range(300):
        b = int(rng.integers(1, 40))
        x = rng.integers(-10**12, 10**12, size=b)
        if rng.random() < 0.5:
            x[: b // 2] = rng.integers(-3, 3, size=b // 2)
        c = int(rng.integers(0, 10**13)) if rng.random() < 0.8 else 0
        cases.append((x.astype(np.int64), c))
    x_all, offsets, totals = pack(cases)
    alpha = linf_alpha_segments(x_all, offsets, totals)
    seg_i = split(intopt_segments(x_all, offsets, totals, order="descending"), offsets)
    seg_l = split(l2_round_segments(x_all, offsets, totals), offsets)
    for i, (x, c) in enumerate(cases):
        assert linf_alpha(x, c) == alpha[i]  # bisection vs closed form
        y = intopt(x, c, order="descending")
        check_linf(x, c, y, int(alpha[i]))
        assert y.tolist() == seg_i[i].tolist()
        y2 = l2_round(x, c)
        assert y2.tolist() == seg_l[i].tolist()
        assert int(y2.sum()) == c and (y2 >= 0).all() and l2_exchange_optimal(x, y2)
    # a big level: one segment of 10^5 entries of size ~1e12 (sums ~1e17)
    x = rng.integers(-10**12, 10**12, size=100_000)
    c = int(np.maximum(x, 0).sum() // 3)
    y = intopt_segments(x, np.array([0, x.size]), np.array([c]))
    check_linf(x, c, y, linf_alpha(x, c))
    assert y.tolist() == intopt(x, c).tolist()
    y = l2_round_segments(x, np.array([0, x.size]), np.array([c]))
    assert int(y.sum()) == c and l2_exchange_optimal(x, y)


def test_too_large_values_are_refused() -> None:
    with pytest.raises(ParameterError, match="too large"):
        intopt(np.array([2**61, 0]), 1)
    with pytest.raises(ParameterError, match="too large"):
        intopt_segments(np.array([2**59, 2**59, 0]), np.array([0, 3]), np.array([5]))
    with pytest.raises(ParameterError, match="too large"):
        l2_round(np.array([1e300, 0.5]), 1)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("fn", [intopt, intopt_alg2, l2_round, linf_alpha])
def test_single_errors(fn) -> None:
    with pytest.raises(ParameterError, match="empty"):
        fn(np.array([], dtype=np.int64), 1)
    with pytest.raises(ParameterError, match="1-D"):
        fn(np.zeros((2, 2), dtype=np.int64), 1)
    with pytest.raises(ParameterError, match="≥ 0"):
        fn(np.array([1, 2]), -1)
    with pytest.raises(ParameterError, match="whole number"):
        fn(np.array([1, 2]), 1.5)
    with pytest.raises(ParameterError, match="finite"):
        fn(np.array([1.0, np.nan]), 1)
    with pytest.raises(ParameterError, match="numeric"):
        fn(np.array(["a", "b"]), 1)


def test_single_option_errors() -> None:
    with pytest.raises(ParameterError, match="whole numbers"):
        intopt(np.array([0.5, 1.0]), 1)
    with pytest.raises(ParameterError, match="whole numbers"):
        linf_alpha(np.array([0.5, 1.0]), 1)
    with pytest.raises(ParameterError, match="order"):
        intopt(np.array([1, 2]), 1, order="random")
    with pytest.raises(ParameterError, match="order"):
        intopt_alg2(np.array([1, 2]), 1, order="asc")
    with pytest.raises(ParameterError, match="tiebreak"):
        intopt(np.array([1, 2]), 1, tiebreak=np.array([0]))
    with pytest.raises(ParameterError, match="finite"):
        l2_round(np.array([1, 2]), 1, tiebreak=np.array([0.0, np.nan]))
    with pytest.raises(ParameterError, match="tiebreak"):
        intopt(np.array([1, 2]), 1, tiebreak=np.array(["a", "b"]))
    # accepted inputs: Python lists, numpy integer totals, whole floats
    assert intopt([0, -1, 1], np.int64(2)).tolist() == [0, 0, 2]
    assert intopt([0.0, -1.0, 1.0], 2.0).tolist() == [0, 0, 2]


@pytest.mark.parametrize("fn", [intopt_segments, l2_round_segments, linf_alpha_segments])
def test_segment_errors(fn) -> None:
    x = np.array([3, 1, 4, 1, 5])
    with pytest.raises(ParameterError, match="empty"):
        fn(np.array([], dtype=np.int64), np.array([0]), np.array([], dtype=np.int64))
    with pytest.raises(ParameterError, match="start at 0"):
        fn(x, np.array([1, 5]), np.array([2]))
    with pytest.raises(ParameterError, match="end at len"):
        fn(x, np.array([0, 2, 4]), np.array([2, 2]))
    with pytest.raises(ParameterError, match="strictly increasing"):
        fn(x, np.array([0, 2, 2, 5]), np.array([1, 1, 1]))
    with pytest.raises(ParameterError, match="strictly increasing"):
        fn(x, np.array([0, 3, 2, 5]), np.array([1, 1, 1]))
    with pytest.raises(ParameterError, match="offsets"):
        fn(x, np.array([0.0, 5.0]), np.array([1]))
    with pytest.raises(ParameterError, match="offsets"):
        fn(x, np.array([5]), np.array([1]))
    with pytest.raises(ParameterError, match="one entry per segment"):
        fn(x, np.array([0, 2, 5]), np.array([1]))
    with pytest.raises(ParameterError, match="≥ 0"):
        fn(x, np.array([0, 2, 5]), np.array([1, -4]))
    with pytest.raises(ParameterError, match="whole numbers"):
        fn(x, np.array([0, 2, 5]), np.array([1, 0.5]))
    with pytest.raises(ParameterError, match="whole numbers"):
        fn(np.array([0.5, 1, 2]), np.array([0, 3]), np.array([1]))


def test_segment_tiebreak_errors() -> None:
    x = np.array([3, 1, 4])
    with pytest.raises(ParameterError, match="tiebreak"):
        intopt_segments(x, np.array([0, 3]), np.array([2]), tiebreak=np.arange(2))
    with pytest.raises(ParameterError, match="tiebreak"):
        l2_round_segments(x, np.array([0, 3]), np.array([2]), tiebreak=np.arange(4))
    with pytest.raises(ParameterError, match="order"):
        intopt_segments(x, np.array([0, 3]), np.array([2]), order="up")


def test_inputs_not_modified() -> None:
    rng = np.random.default_rng(11)
    x = rng.integers(-5, 20, size=500)
    off = np.array([0, 100, 101, 350, 500])
    tot = np.array([300, 0, 1000, 7])
    tb = rng.permutation(500)
    copies = (x.copy(), off.copy(), tot.copy(), tb.copy())
    a = intopt_segments(x, off, tot, tiebreak=tb)
    l2_round_segments(x, off, tot, tiebreak=tb)
    for orig, now in zip(copies, (x, off, tot, tb), strict=True):
        assert np.array_equal(orig, now)
    # other integer dtypes of the inputs give the same answer
    assert np.array_equal(a, intopt_segments(x.astype(np.int32), off.astype(np.int32),
                                             tot.astype(np.uint16), tiebreak=tb))


def test_inputs_beyond_int64_arithmetic_are_refused():
    off = np.array([0, 2])
    with pytest.raises(ParameterError, match="too large for int64"):
        intopt_segments(np.array([2**63 + 1, 0], dtype=np.uint64), off, np.array([1]))
    with pytest.raises(ParameterError, match="too large for exact int64"):
        l2_round_segments(np.array([1, 2]), off, np.array([2.0**63]))
    with pytest.raises(ParameterError, match="whole numbers"):
        intopt_segments(np.array([1, 2]), off, np.array([2**63 + 5], dtype=np.uint64))
