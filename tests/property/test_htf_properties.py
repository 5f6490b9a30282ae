"""Hypothesis invariants of HTF releases (shared/specs/htf.md Appendix A-6, §3).

For random small grids, data and parameters: the leaves tile the grid exactly, every
root-to-leaf path spends exactly ε_data on counts, the phases add up to ε, rectangles are
non-empty and inside the grid, and no node is deeper than the height h.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from points_helpers import release_with

from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.points.mechanisms.htf import HTF, max_height
from dpcore.privacy.noise import NoiseSource

MECH = HTF()


@st.composite
def cases(draw):
    rows = draw(st.integers(1, 14))
    cols = draw(st.integers(1, 14))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    lam = draw(st.sampled_from([0.0, 0.3, 3.0, 30.0]))
    counts = rng.poisson(lam, size=(rows, cols))
    if draw(st.booleans()):  # a dense block somewhere
        r, c = rng.integers(0, rows), rng.integers(0, cols)
        counts[r: r + 3, c: c + 3] += int(rng.integers(1, 200))
    k = draw(st.sampled_from([1, 1, 2, 5]))
    grid = Grid(Bounds(0.0, 0.0, 1.0, 1.0), rows, cols)
    hmax = max_height(grid)
    params = {
        "theta": draw(st.integers(0, 60)),
        "kappa": draw(st.integers(1, 8)),
        "T": draw(st.integers(1, 4)),
        "c0": draw(st.sampled_from([1.0, 10.0])),
        "allocation": draw(st.sampled_from(["geometric", "uniform"])),
        "split_method": draw(st.sampled_from(["alg1", "alg1", "exhaustive"])),
        "first_axis": draw(st.sampled_from(["paper", "x", "y"])),
        "extent_first": draw(st.booleans()),
        "adaptive_rounds": draw(st.booleans()),
        "partition_share": draw(st.sampled_from([0.001, 0.1, 0.5])),
    }
    mode = draw(st.sampled_from(["estimate", "manual", "public"]))
    if mode == "manual" and hmax > 0:
        params["height"] = draw(st.integers(1, hmax))
    elif mode == "public":
        params["public_n"] = draw(st.integers(1, 10**6))
    if draw(st.booleans()):
        params["partition_epsilon_per_level"] = draw(st.sampled_from([1e-3, 0.01]))
    eps = draw(st.sampled_from([0.3, 1.0, 5.0, 40.0]))
    agg = Aggregate(grid=grid, counts=counts.astype(np.int64), n_outside=0, n_capped=0,
                    sensitivity=k, user_cap=k if k > 1 else None)
    return agg, eps, params, draw(st.integers(0, 2**32 - 1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_release_invariants(case) -> None:
    agg, eps, params, seed = case
    rel = release_with(MECH, agg, eps, params, NoiseSource(seed))
    rows, cols = agg.grid.shape
    r = rel.rects
    h = rel.public["height"]
    # rectangles inside the grid, non-empty
    assert (r[:, 0] >= 0).all() and (r[:, 1] <= rows).all()
    assert (r[:, 2] >= 0).all() and (r[:, 3] <= cols).all()
    assert (r[:, 1] > r[:, 0]).all() and (r[:, 3] > r[:, 2]).all()
    # depth within the height; root first
    assert rel.level.min() == 0 and rel.level.max() <= h and h <= max_height(agg.grid)
    assert r[0].tolist() == [0, rows, 0, cols]
    # leaves tile the grid exactly
    cov = np.zeros((rows, cols), dtype=np.int64)
    for r0, r1, c0, c1 in r[rel.leaf].tolist():
        cov[r0:r1, c0:c1] += 1
    assert (cov == 1).all()
    # the nodes of every depth are disjoint
    for d in range(h + 1):
        cov = np.zeros((rows, cols), dtype=np.int64)
        for r0, r1, c0, c1 in r[rel.level == d].tolist():
            cov[r0:r1, c0:c1] += 1
        assert cov.max() <= 1
    # every root-to-leaf path spends exactly ε_data on counts
    eps_data = rel.public["epsilon_data"]
    for j in np.flatnonzero(rel.leaf):
        a = r[j]
        path = (r[:, 0] <= a[0]) & (r[:, 1] >= a[1]) & (r[:, 2] <= a[2]) & (r[:, 3] >= a[3])
        assert path.sum() == rel.level[j] + 1
        assert math.fsum(rel.node_budget[path]) == np_approx(eps_data)
        assert math.fsum(rel.node_budget[path]) <= eps_data * (1 + 1e-15)
    # the phases add up to ε, which is the release's cost
    assert rel.cost.value == eps
    assert math.fsum(lv.cost.value for lv in rel.levels) == np_approx(eps)
    assert (rel.public["epsilon_height"] + rel.public["epsilon_partition"]
            + eps_data) == np_approx(eps)
    assert [lv.level for lv in rel.levels] == list(range(len(rel.levels)))
    assert sum(lv.in_partition for lv in rel.levels) == 1
    # noise: integers, and the published uncertainty is finite
    assert np.all(rel.noisy == np.round(rel.noisy))
    assert np.isfinite(rel.sd).all() and (rel.sd > 0).all()


class np_approx:
    """Equality within 1e-9 relative (hypothesis-friendly, no pytest import needed)."""

    def __init__(self, value: float) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return abs(float(other) - self.value) <= 1e-9 * abs(self.value)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"{self.value!r} ± 1e-9 rel"


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 4096), cols=st.integers(1, 4096),
    n=st.floats(0, 1e9), eps=st.sampled_from([0.05, 0.1, 0.5, 2.0]),
    share=st.floats(0.001, 0.5), hshare=st.floats(0.001, 0.25),
)
def test_plan_budget_adds_up(rows, cols, n, eps, share, hshare) -> None:
    grid = Grid(Bounds(0.0, 0.0, 1.0, 1.0), rows, cols)
    levels = MECH.plan(grid, eps, {"partition_share": share, "height_share": hshare},
                       n_estimate=n).inner
    assert math.fsum(lv.cost.value for lv in levels) == np_approx(eps)
    depths = [lv for lv in levels if "depth" in lv.extra]
    h = len(depths) - 1
    assert 0 <= h <= max_height(grid)
    x = n * eps / 10
    assert h == (min(math.floor(math.log2(x)), max_height(grid)) if x >= 1 else 0) or \
        abs(math.log2(x) - round(math.log2(x))) < 1e-9  # float log2 at an exact power of two
    for d, lv in enumerate(depths):
        if d < h:
            spent = math.fsum(x.cost.value for x in depths[: d + 1])
            assert spent + lv.extra["leaf_budget_if_pruned_here"] == np_approx(
                math.fsum(x.cost.value for x in depths))
