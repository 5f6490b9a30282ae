"""Hypothesis invariants of O/D releases (ODMechanism.release_counts, dpcore.flows.mechanisms),
spec topdown-od.md §9.3–9.4.

Random small origin and destination hierarchies (same depth 1–3, 1–4 children per node, drawn
independently so origin/destination mix-ups show) and random sparse flows.  For InfTDA and
TopDown L2 (and, with fewer examples, the MILP baseline), both orientations, bounded and
unbounded neighbours, ρ-zCDP and pure ε:

* every level is consistent (``rel.consistent``) and, checked independently, the released
  finest table summed to every geo pair of the tree equals the released table at that pair;
* values are int64 and > 0; a pair released as 0 has no descendants;
* the public total is exact under bounded neighbours (one trip per person);
* exactly the public children of the surviving parents are noised, level by level.

VanillaGauss: every level is the exact sum of its (signed, non-zero) finest cells.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dpcore import catalog
from dpcore.data.hierarchy import Hierarchy
from dpcore.flows.counts import ODCounts
from dpcore.flows.mechanisms.common import ODRelease
from dpcore.flows.tree import tree_levels
from dpcore.privacy import budget
from dpcore.privacy.noise import NoiseSource

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _tree(draw, depth: int, tag: str) -> Hierarchy:
    paths: list[tuple[int, ...]] = [()]
    for _ in range(depth):
        kids = draw(st.lists(st.integers(min_value=1, max_value=4), min_size=len(paths), max_size=len(paths)))
        paths = [p + (k,) for p, n in zip(paths, kids, strict=True) for k in range(n)]
    df = pd.DataFrame({f"{tag}{d + 1}": [tag + ".".join(map(str, p[: d + 1])) for p in paths]
                       for d in range(depth)})
    return Hierarchy.from_frame(df, list(df.columns))


@st.composite
def od_data(draw):
    """(origin hierarchy, destination hierarchy, trips frame with columns o, d, n)."""
    depth = draw(st.integers(min_value=1, max_value=3))
    ho = _tree(draw, depth, "o")
    hd = _tree(draw, depth, "d") if draw(st.booleans()) else ho
    lo, ld = ho.labels(depth), hd.labels(depth)
    n_pairs = draw(st.integers(min_value=1, max_value=min(12, lo.size * ld.size)))
    cells = draw(st.lists(st.tuples(st.integers(0, lo.size - 1), st.integers(0, ld.size - 1)),
                          min_size=n_pairs, max_size=n_pairs))
    count = st.one_of(st.integers(0, 3), st.integers(0, 500))
    counts = draw(st.lists(count, min_size=n_pairs, max_size=n_pairs))
    df = pd.DataFrame({"o": lo[[c[0] for c in cells]], "d": ld[[c[1] for c in cells]], "n": counts})
    return ho, hd, df


def up(h: Hierarchy, frm: int, to: int) -> np.ndarray:
    idx = np.arange(h.sizes[frm], dtype=np.int64)
    for d in range(frm - 1, to - 1, -1):
        idx = h.parents[d][idx]
    return idx


def dense(rel: ODRelease, t: int) -> np.ndarray:
    lp = rel.plan.levels[t]
    n_o, n_d = rel.origin_h.sizes[lp.origin_depth], rel.destination_h.sizes[lp.destination_depth]
    keys = rel.origins[t] * n_d + rel.destinations[t]
    assert np.unique(keys).size == keys.size
    m = np.zeros((n_o, n_d), dtype=np.int64)
    m[rel.origins[t], rel.destinations[t]] = rel.values[t]
    return m


class Recorder(NoiseSource):
    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.sizes: list[int] = []

    def discrete_gaussian(self, sigma, size):  # type: ignore[override]
        out = super().discrete_gaussian(sigma, size)
        self.sizes.append(out.size)
        return out

    def discrete_laplace(self, scale, size):  # type: ignore[override]
        out = super().discrete_laplace(scale, size)
        self.sizes.append(out.size)
        return out


costs = st.sampled_from([budget.zcdp(0.005), budget.zcdp(0.5), budget.zcdp(50.0), budget.pure(0.2), budget.pure(3.0)])


@SETTINGS
@given(od_data(), st.sampled_from(["inftda", "tda_l2"]), st.sampled_from(["destination", "origin"]),
       st.sampled_from(["replace", "add_remove"]), costs, st.sampled_from(["ascending", "descending"]),
       st.sampled_from(["random", "index"]), st.integers(min_value=0, max_value=2**32 - 1))
def test_topdown_releases_are_consistent_integral_positive(data, mechanism, orientation, neighbour, cost, order,
                                                           tiebreak, seed):
    ho, hd, df = data
    # one area on each side and a public total: plan() refuses (nothing to measure; test_od.py)
    assume(ho.n_leaves * hd.n_leaves > 1 or neighbour == "add_remove")
    c = ODCounts.from_frame(df, ho, hd, origin="o", destination="d", count="n")
    n = int(df["n"].sum())
    src = Recorder(seed)
    rel = catalog.get("od", mechanism).release_counts(
        c, cost, src, neighbour=neighbour, orientation=orientation, order=order,
        tiebreak=tiebreak)
    assert rel.consistent
    T = rel.depth
    assert T == 2 * ho.depth
    lv = [(lp.origin_depth, lp.destination_depth) for lp in rel.plan.levels]
    assert lv == tree_levels(ho.depth, orientation)
    for t in range(T + 1):
        assert rel.values[t].dtype == np.int64 and (rel.values[t] > 0).all()
    if neighbour == "replace":
        assert rel.values[0].tolist() == ([n] if n else []) and rel.public_total == n
    else:
        assert rel.public_total is None and rel.values[0].size <= 1
    # the released finest table summed to every geo pair is the released table there
    (oT, dT) = lv[T]
    for t, (o, d) in enumerate(lv):
        agg = np.zeros((ho.sizes[o], hd.sizes[d]), dtype=np.int64)
        np.add.at(agg, (up(ho, oT, o)[rel.origins[T]], up(hd, dT, d)[rel.destinations[T]]), rel.values[T])
        assert np.array_equal(agg, dense(rel, t)), t
    # zeros have no descendants; the noised cells are the public children of the survivors
    expected_sizes = [] if rel.plan.levels[0].measured is False else [1]
    for t in range(1, T + 1):
        (po, pd_), (o, d) = lv[t - 1], lv[t]
        par = dense(rel, t - 1)
        assert (par[up(ho, o, po)[rel.origins[t]], up(hd, d, pd_)[rel.destinations[t]]] > 0).all()
        if rel.plan.levels[t].measured and rel.values[t - 1].size:
            h, depth, idx = (ho, po, rel.origins[t - 1]) if o > po else (hd, pd_, rel.destinations[t - 1])
            expected_sizes.append(int(np.bincount(h.parents[depth], minlength=h.sizes[depth])[idx].sum()))
        if not rel.plan.levels[t].measured:  # a copy level repeats its parent
            assert rel.values[t].tolist() == rel.values[t - 1].tolist()
    assert src.sizes == expected_sizes
    assert rel.details["noised_cells"] == sum(expected_sizes[1:] if rel.plan.levels[0].measured else expected_sizes)


@SETTINGS
@given(od_data(), st.sampled_from(["destination", "origin"]), costs, st.integers(min_value=0, max_value=2**32 - 1))
def test_vanilla_gauss_levels_are_sums_of_its_leaves(data, orientation, cost, seed):
    ho, hd, df = data
    c = ODCounts.from_frame(df, ho, hd, origin="o", destination="d", count="n")
    rel = catalog.get("od", "vanilla_gauss").release_counts(
        c, cost, NoiseSource(seed), orientation=orientation)
    assert rel.consistent
    T = rel.depth
    lv = [(lp.origin_depth, lp.destination_depth) for lp in rel.plan.levels]
    (oT, dT) = lv[T]
    for t, (o, d) in enumerate(lv):
        assert rel.values[t].dtype == np.int64 and (rel.values[t] != 0).all()
        agg = np.zeros((ho.sizes[o], hd.sizes[d]), dtype=np.int64)
        np.add.at(agg, (up(ho, oT, o)[rel.origins[T]], up(hd, dT, d)[rel.destinations[T]]), rel.values[T])
        assert np.array_equal(agg, dense(rel, t)), t
    assert rel.details["noised_cells"] == ho.n_leaves * hd.n_leaves


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(od_data(), st.sampled_from(["destination", "origin"]), st.sampled_from(["replace", "add_remove"]),
       st.integers(min_value=0, max_value=2**32 - 1))
def test_milp_baseline_is_consistent_integral_positive(data, orientation, neighbour, seed):
    """The black-box MILP baseline (one solver call per node, so fewer examples)."""
    ho, hd, df = data
    assume(ho.n_leaves * hd.n_leaves > 1 or neighbour == "add_remove")
    c = ODCounts.from_frame(df, ho, hd, origin="o", destination="d", count="n")
    rel = catalog.get("od", "tda_linf_milp").release_counts(
        c, budget.zcdp(0.5), NoiseSource(seed), neighbour=neighbour,
        orientation=orientation)
    assert rel.consistent
    lv = [(lp.origin_depth, lp.destination_depth) for lp in rel.plan.levels]
    (oT, dT) = lv[-1]
    for t, (o, d) in enumerate(lv):
        assert rel.values[t].dtype == np.int64 and (rel.values[t] > 0).all()
        agg = np.zeros((ho.sizes[o], hd.sizes[d]), dtype=np.int64)
        np.add.at(agg, (up(ho, oT, o)[rel.origins[-1]], up(hd, dT, d)[rel.destinations[-1]]), rel.values[-1])
        assert np.array_equal(agg, dense(rel, t)), t
    if neighbour == "replace":
        assert rel.values[0].tolist() == ([int(df["n"].sum())] if df["n"].sum() else [])
