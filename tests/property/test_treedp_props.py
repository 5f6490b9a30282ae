"""Hypothesis invariants of dpcore.estimate.treedp.solve_l2: the released hierarchy is int64,
non-negative and consistent, honours a public root value, is deterministic, and its
(optimal) objective does not depend on the window half-widths."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpcore.estimate.treedp import solve_l2

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def instances(draw):
    """A level tree with 1–4 levels below the root, noisy integers (negatives included),
    per-level weights, some unmeasured internal levels, a free or public root."""
    L = draw(st.integers(min_value=1, max_value=4))
    sizes = [1]
    parents = []
    for _ in range(L):
        counts = draw(st.lists(st.integers(min_value=1, max_value=4), min_size=sizes[-1],
                               max_size=sizes[-1]))
        parents.append(np.repeat(np.arange(sizes[-1]), counts).astype(np.int64))
        sizes.append(int(sum(counts)))
    fixed = draw(st.booleans())
    noisy = []
    for d, n in enumerate(sizes):
        skip = (d == 0 and fixed) or (0 < d < L and draw(st.booleans()))
        if skip:
            noisy.append(None)
        else:
            vals = draw(st.lists(st.integers(min_value=-40, max_value=120), min_size=n,
                                 max_size=n))
            noisy.append(np.array(vals, dtype=np.int64))
    weights = draw(st.one_of(
        st.just([1.0] * (L + 1)),
        st.lists(st.sampled_from([0.25, 0.5, 1.0, 2.0, 4.0]), min_size=L + 1, max_size=L + 1),
        st.lists(st.floats(min_value=0.05, max_value=20.0), min_size=L + 1, max_size=L + 1),
    ))
    root_value = draw(st.integers(min_value=0, max_value=60 * sizes[-1])) if fixed else None
    return parents, noisy, weights, root_value


def exact_cost(values, noisy, weights) -> Fraction:
    total = Fraction(0)
    for x, y, w in zip(values, noisy, weights, strict=True):
        if y is not None:
            total += Fraction(w) * sum((int(a) - int(b)) ** 2 for a, b in zip(x, y, strict=True))
    return total


@SETTINGS
@given(instances())
def test_output_is_a_valid_hierarchy(inst):
    parents, noisy, weights, root_value = inst
    res = solve_l2(parents, noisy, weights, root_value=root_value)
    assert len(res.values) == len(parents) + 1
    for d, x in enumerate(res.values):
        assert x.dtype == np.int64
        assert x.shape == ((1,) if d == 0 else parents[d - 1].shape)
        assert np.all(x >= 0)
    for d, p in enumerate(parents):
        sums = np.zeros(res.values[d].size, dtype=np.int64)
        np.add.at(sums, p, res.values[d + 1])
        assert np.array_equal(sums, res.values[d])
    if root_value is not None:
        assert int(res.values[0][0]) == root_value
    assert res.objective == float(exact_cost(res.values, noisy, weights))
    assert all(h > 0 for h in res.half_widths)


@SETTINGS
@given(instances(), st.sampled_from([0.5, 1.0, 2.0, 3.0]))
def test_objective_does_not_depend_on_windows(inst, small_h):
    parents, noisy, weights, root_value = inst
    L = len(parents)
    small = solve_l2(parents, noisy, weights, root_value=root_value,
                     half_widths=[small_h] * (L + 1))
    # a window wider than any optimal value: no widening needed
    big_h = 200.0 * (len(noisy[-1]) + 1) + (root_value or 0)
    large = solve_l2(parents, noisy, weights, root_value=root_value,
                     half_widths=[big_h] * (L + 1))
    assert large.widenings == 0
    assert exact_cost(small.values, noisy, weights) == exact_cost(large.values, noisy, weights)
    assert small.objective == large.objective
