"""Hypothesis invariants of hierarchy releases (the catalogue's hierarchy mechanisms, dpcore.areas.mechanisms).

On random small trees and sparse counts: exact, topdown_l2 and topdown_linf return int64,
non-negative, consistent hierarchies (the public total exactly under replace-one
neighbours); hay is consistent up to float rounding; group-size releases (exact,
dpc_approx) are consistent size by size and their root sizes add up to the public N.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpcore import catalog
from dpcore.areas import tree_plans as TR
from dpcore.areas.counts import HierarchyCounts
from dpcore.data.hierarchy import Hierarchy
from dpcore.privacy import budget
from dpcore.privacy.noise import NoiseSource


def plan_hier(h: Any, mechanism: str, cost: Any, **options: Any) -> Any:
    """The data-free plan of the catalogue's hierarchy mechanism ``mechanism``."""
    return catalog.get("hierarchy", mechanism).plan_tree(h, cost, **options)


def release_hier(counts: Any, mechanism: str, cost: Any, noise: Any, **options: Any) -> Any:
    """Plan and release ``counts`` with the catalogue's hierarchy mechanism ``mechanism`` (no charge)."""
    return catalog.get("hierarchy", mechanism).release_counts(counts, cost, noise, **options)

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def trees(draw, k: int = 1):
    """A table of leaves (1–3 levels, 1–4 children per node) with sparse counts (k columns)."""
    L = draw(st.integers(min_value=1, max_value=3))
    paths: list[tuple[str, ...]] = [()]
    for _ in range(L):
        kids = draw(st.lists(st.integers(min_value=1, max_value=4), min_size=len(paths), max_size=len(paths)))
        # codes unique across the level (the path joined): no "levels in the wrong order" ambiguity
        paths = [p + ("-".join(p + (str(c),)),) for p, n in zip(paths, kids, strict=True) for c in range(n)]
    df = pd.DataFrame(paths, columns=[f"l{d}" for d in range(L)])
    small = st.integers(min_value=0, max_value=3)
    value = st.one_of(st.just(0), small, st.integers(min_value=0, max_value=400))
    for j in range(k):
        df[f"c{j}"] = draw(st.lists(value, min_size=len(df), max_size=len(df)))
    levels = [f"l{d}" for d in range(L)]
    h = Hierarchy.from_frame(df, levels)
    cols = [f"c{j}" for j in range(k)]
    return HierarchyCounts.from_frame(df, h, levels, cols[0] if k == 1 else cols)


costs = st.sampled_from([budget.pure(0.2), budget.pure(2.0), budget.zcdp(0.02), budget.zcdp(1.0)])
neighbours = st.sampled_from(["add_remove", "replace"])
splits = st.sampled_from(["uniform", "geometric"])
seeds = st.integers(min_value=0, max_value=2**32 - 1)


def assert_consistent(rel: TR.HierarchyRelease) -> None:
    h = rel.hierarchy
    for d in range(h.depth):
        sums = np.zeros_like(rel.values[d])
        np.add.at(sums, h.parents[d], rel.values[d + 1])
        assert np.array_equal(sums, rel.values[d])


@SETTINGS
@given(trees(), st.sampled_from(["exact", "topdown_l2", "topdown_linf"]), costs, neighbours, splits, seeds)
def test_integer_mechanisms_are_int_nonnegative_consistent(counts, mechanism, cost, neighbour, split, seed):
    rel = release_hier(counts, mechanism, cost, NoiseSource(seed), neighbour=neighbour, split=split)
    assert [v.shape for v in rel.values] == [(n,) for n in counts.hierarchy.sizes]
    for v in rel.values:
        assert v.dtype == np.int64
        assert np.all(v >= 0)
    assert_consistent(rel)
    assert rel.consistent
    if neighbour == "replace":
        assert int(rel.values[0][0]) == int(counts.leaf.sum()) == rel.public_total


@SETTINGS
@given(trees(), costs, neighbours, seeds)
def test_hay_is_consistent_up_to_float_rounding(counts, cost, neighbour, seed):
    rel = release_hier(counts, "hay", cost, NoiseSource(seed), neighbour=neighbour)
    h = counts.hierarchy
    scale = max(1.0, max(float(np.abs(v).max()) for v in rel.values))
    for d in range(h.depth):
        sums = np.bincount(h.parents[d], weights=rel.values[d + 1], minlength=h.sizes[d])
        assert np.allclose(sums, rel.values[d], rtol=0, atol=1e-9 * scale * h.n_leaves)
    if neighbour == "replace":
        assert rel.values[0][0] == float(counts.leaf.sum())


@SETTINGS
@given(trees(k=3), st.sampled_from(["exact", "dpc_approx"]), costs, neighbours, seeds)
def test_group_sizes_are_consistent_per_size_and_add_up_to_n(counts, mechanism, cost, neighbour, seed):
    rel = release_hier(counts, mechanism, cost, NoiseSource(seed), neighbour=neighbour)
    for v in rel.values:
        assert v.dtype == np.int64 and v.shape[1] == 3
        assert np.all(v >= 0)
    assert_consistent(rel)  # every (area, size)
    assert int(rel.values[0].sum()) == counts.n_groups
    for v in rel.values:
        np.testing.assert_array_equal(v.sum(axis=0), rel.values[0][0])
