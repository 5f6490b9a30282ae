"""DAWA (Li, Hay, Miklau & Wang, PVLDB 2014): Hilbert order, the dyadic partition, the
sensitivity of stage 1, the hierarchy over buckets and the release."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from points_helpers import RecordingNoise, levels_of, plan_with, release_with

from dpcore import catalog
from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.estimate import greedy_h as gh
from dpcore.points.mechanisms import dawa as D
from dpcore.privacy.noise import NoiseSource, discrete_laplace_variance

B = Bounds(0.0, 0.0, 1.0, 1.0)


def _agg(counts: np.ndarray) -> Aggregate:
    counts = np.asarray(counts, dtype=np.int64)
    return Aggregate(Grid(B, *counts.shape), counts, 0, 0, 1, None)


@pytest.mark.parametrize("order", [0, 1, 2, 3, 5])
def test_hilbert_is_a_bijection_of_adjacent_cells(order: int) -> None:
    r, c = gh.hilbert_cells(order)
    n = 1 << order
    assert sorted((r * n + c).tolist()) == list(range(n * n))
    if n > 1:
        assert np.all(np.abs(np.diff(r)) + np.abs(np.diff(c)) == 1)  # a curve: neighbours step by one


def _d2xy(order: int, d: int) -> tuple[int, int]:
    """The classic Hilbert ``d2xy`` conversion, one position at a time: (row, column)."""
    x = y = 0
    s, t = 1, d
    while s < (1 << order):
        rx = 1 & (t // 2)
        ry = 1 & (t ^ rx)
        if ry == 0:
            if rx == 1:
                x, y = s - 1 - x, s - 1 - y
            x, y = y, x
        x, y = x + s * rx, y + s * ry
        t //= 4
        s *= 2
    return y, x


@pytest.mark.parametrize("order", [0, 1, 2, 3, 6])
def test_hilbert_is_the_classic_d2xy(order: int) -> None:
    r, c = gh.hilbert_cells(order)
    assert list(zip(r.tolist(), c.tolist(), strict=True)) == [_d2xy(order, d) for d in range(4 ** order)]
    assert r.dtype == c.dtype == np.int64 and not r.flags.writeable and not c.flags.writeable


def test_aligned_hilbert_blocks_are_rectangles() -> None:
    rr, cc = gh.hilbert_cells(4)
    grid = Grid(B, 16, 16)
    for ln in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        start = np.arange(0, 256, ln)
        rects = D._block_rects(rr, cc, start, np.full(start.size, ln), grid)
        for s, (r0, r1, c0, c1) in zip(start.tolist(), rects.tolist(), strict=True):
            cells = {(int(a), int(b)) for a, b in zip(rr[s:s + ln], cc[s:s + ln], strict=True)}
            assert cells == {(a, b) for a in range(r0, r1) for b in range(c0, c1)}


def _dev_exact(x: np.ndarray) -> float:
    return float(np.abs(x - x.mean()).sum())


def test_costs_are_the_rounded_l1_deviation() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 9, 16)
    costs = gh.dyadic_deviation_costs(x, 4)
    for lv, c in enumerate(costs):
        ln = 1 << lv
        want = [math.floor(16 * _dev_exact(x[i:i + ln]) + 0.5) for i in range(0, 16, ln)]
        assert c.tolist() == want


def test_costs_are_exact_up_to_the_point_limit_on_the_largest_grid() -> None:
    """All points in one cell of a 2,048² grid: every block through it costs
    ``round(16·2(|b|−1)S/|b|)``, exact just below DAWA's limit; where int64 would wrap
    (``2^35`` points) the costs are refused instead."""
    from dpcore.errors import ParameterError

    x = np.zeros(D.MAX_CELLS, dtype=np.int64)
    at, total = 12345, D.MAX_POINTS - 1
    x[at] = total
    for lv, c in enumerate(gh.dyadic_deviation_costs(x, D.FRAC_BITS)):
        ln = 1 << lv
        want = (2 * (2 * (ln - 1) * total) * 16 + ln) // (2 * ln)  # Python ints: exact
        assert int(c[at >> lv]) == want and int(c.sum()) == want, lv
    x[at] = 2**35
    with pytest.raises(ParameterError, match="Too many points"):
        gh.dyadic_deviation_costs(x, D.FRAC_BITS)


def test_noise_scales_are_exact_fractions() -> None:
    """Both stages draw with the exact rational scales (``2kΔ/ε₁`` and ``k/(w_ℓ ε₂)``), so the
    spent ε is the stated one, not one a float quotient rounded down would give."""

    mech = catalog.get("points", "dawa")
    for k, eps, share in ((1, 0.3, 0.25), (3, 0.7, 0.35)):
        agg = _clustered(16, 2000, seed=k)
        agg = Aggregate(agg.grid, agg.counts, 0, 0, k, None)
        noise = RecordingNoise(k)
        rel = release_with(mech, agg, eps, {"partition_share": share}, noise)
        e1, _ = D.DAWA.budgets(D.pure(eps), mech.resolve_params({"partition_share": share}))
        assert all(isinstance(t, Fraction) for t in noise.scales), noise.scales
        n1 = 2 * gh.hilbert_order_for(16, 16) + 1  # stage 1: one draw per interval length, first
        stage1, stage2 = noise.scales[:n1], noise.scales[n1:]
        assert stage1 == [Fraction(2 * k * D.COST_SENSITIVITY) / Fraction(e1)] * n1
        assert D.cost_noise_scale(e1, k) == stage1[0]
        levels = rel.levels[1:]  # stage 2: one draw per measured level, root first
        assert stage2 == [Fraction(k) / Fraction(lv.cost.value) for lv in levels]
        # the spent ε: exactly the stated parts, which add up to at most ε
        assert Fraction(2 * k * D.COST_SENSITIVITY) / stage1[0] == Fraction(e1)
        assert math.fsum([e1, *(lv.cost.value for lv in levels)]) <= eps


def _all_partitions(n: int, start: int = 0):
    """Every partition of [start, start+n) into aligned dyadic intervals, as (start, length) lists."""
    if n == 1:
        yield [(start, 1)]
        return
    yield [(start, n)]
    for left in _all_partitions(n // 2, start):
        for right in _all_partitions(n // 2, start + n // 2):
            yield left + right


@pytest.mark.parametrize("seed", range(6))
def test_partition_dp_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 5, 8) * rng.integers(0, 2, 8)
    costs = [c + 7 for c in gh.dyadic_deviation_costs(x, 4)]  # + a bucket penalty
    chosen = gh.optimal_dyadic_partition(costs)
    got = sorted((int(i) << lv, 1 << lv) for lv, sel in enumerate(chosen) for i in np.flatnonzero(sel))

    def total(p):
        return sum(int(costs[int(math.log2(ln))][s // ln]) for s, ln in p)

    best = min(total(p) for p in _all_partitions(8))
    assert total(got) == best
    assert sum(ln for _, ln in got) == 8


def test_ties_prefer_the_whole_interval() -> None:
    costs = [np.array([1, 1]), np.array([2])]
    chosen = gh.optimal_dyadic_partition(costs)
    assert chosen[1].tolist() == [True] and chosen[0].tolist() == [False, False]


def test_stage_one_sensitivity_brute_force() -> None:
    """Adding one point anywhere moves every interval's lattice cost by at most Δ = 32, and only
    the costs of intervals holding the changed cell (the premise of the privacy argument)."""
    worst = 0
    for x in itertools.product(range(3), repeat=4):
        x = np.array(x + (0, 0, 1, 2))
        base = gh.dyadic_deviation_costs(x, D.FRAC_BITS)
        for i in range(8):
            y = x.copy()
            y[i] += 1
            moved = gh.dyadic_deviation_costs(y, D.FRAC_BITS)
            for lv, (a, b) in enumerate(zip(base, moved, strict=True)):
                diff = np.abs(a - b)
                holder = i >> lv
                assert np.all(np.delete(diff, holder) == 0)
                worst = max(worst, int(diff[holder]))
    assert 0 < worst <= D.COST_SENSITIVITY


def test_level_decomposition_counts_canonical_nodes() -> None:
    tree = gh.BucketTree(8)
    cov = np.zeros(8)
    cov[1:7] = 1.0  # [1, 7): nodes 1 | 2-3 | 4-5 | 6
    assert gh.level_decomposition(tree, cov).tolist() == [2.0, 2.0, 0.0, 0.0]
    cov = np.ones(8)
    assert gh.level_decomposition(tree, cov).tolist() == [0.0, 0.0, 0.0, 1.0]
    cov = np.array([0.5, 1, 1, 1, 1, 0, 0, 0.25])  # [1, 5) = 1 | 2-3 | 4; partial buckets: squared share
    assert gh.level_decomposition(tree, cov).tolist() == [2.0 + 0.25 + 0.0625, 1.0, 0.0, 0.0]
    odd = gh.BucketTree(5)
    assert gh.level_decomposition(odd, np.ones(5)).sum() == 1.0


def test_level_weights_minimise_the_decomposition_error() -> None:
    counts = np.array([40.0, 9.0, 3.0, 1.0])
    w = gh.level_weights(counts)
    assert w.sum() == pytest.approx(1.0)
    err = float((counts / w**2).sum())
    assert err == pytest.approx(gh.cube_root_rule_variance(counts, 1.0))
    rng = np.random.default_rng(1)
    for _ in range(200):  # no other split does better
        v = rng.dirichlet(np.ones(4))
        assert float((counts / v**2).sum()) >= err * (1 - 1e-12)


def _clustered(side: int = 32, n: int = 4000, seed: int = 0) -> Aggregate:
    rng = np.random.default_rng(seed)
    r = np.clip(rng.normal(side * 0.3, 2, n), 0, side - 1).astype(int)
    c = np.clip(rng.normal(side * 0.6, 3, n), 0, side - 1).astype(int)
    counts = np.zeros((side, side), dtype=np.int64)
    np.add.at(counts, (r, c), 1)
    return _agg(counts)


def test_release_tiles_the_grid_and_is_reproducible() -> None:
    agg = _agg(_clustered(24).counts[:, :20])  # 24 × 20: padded to 32 × 32
    mech = catalog.get("points", "dawa")
    rel = release_with(mech, agg, 1.0, {}, NoiseSource(seed=3))
    cover = np.zeros(agg.grid.shape, dtype=int)
    for r0, r1, c0, c1 in rel.rects.tolist():
        cover[r0:r1, c0:c1] += 1
    assert np.all(cover == 1)
    again = release_with(mech, agg, 1.0, {}, NoiseSource(seed=3))
    assert np.array_equal(rel.noisy, again.noisy) and np.array_equal(rel.rects, again.rects)
    assert rel.public["buckets"] == rel.n_rects
    assert np.all(rel.sd > 0) and np.all(np.isfinite(rel.ci95))


def test_stage_two_is_unbiased_with_the_planned_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the partition fixed, the bucket estimates are unbiased and their spread matches
    the exact least-squares SD the release reports; each level's noise has the planned SD."""
    agg = _clustered(16, 3000, seed=2)
    mech = catalog.get("points", "dawa")
    fixed = gh.optimal_dyadic_partition(gh.dyadic_deviation_costs(np.zeros(256, dtype=np.int64), 4))
    monkeypatch.setattr(gh, "optimal_dyadic_partition", lambda costs: fixed)  # one bucket: the grid
    plan = plan_with(mech, agg, 2.0, {})  # data-free: made once, released 400 times (as the app does)
    runs = [mech.release(plan, agg, NoiseSource(seed=100 + i)).inner for i in range(400)]
    est = np.array([r.noisy.sum() for r in runs])
    sd = runs[0].sd.sum()
    assert runs[0].n_rects == 1
    assert abs(est.mean() - agg.total) < 5 * sd / math.sqrt(len(runs))
    # the sample SD of n draws has relative SE sqrt((κ − 1)/(4n)) (κ: the kurtosis, 6 for a Laplace;
    # the estimate sums Laplace-like noises, so κ ≤ 6); four SEs
    rel_se = math.sqrt((6 - 1) / (4 * len(runs)))
    assert abs(est.std() / sd - 1) < 4 * rel_se
    leaf = runs[0].levels[-1]
    assert leaf.sd == pytest.approx(math.sqrt(discrete_laplace_variance(leaf.scale)))
    eps1, eps2 = D.DAWA.budgets(D.pure(2.0), mech.resolve_params({}))
    assert leaf.cost.value == pytest.approx(eps2)  # one bucket: the whole stage-2 budget on it
    assert runs[0].levels[0].cost.value == pytest.approx(eps1) and eps1 == pytest.approx(0.5)


def test_plan_is_data_free_and_costs_add_up() -> None:
    grid = Grid(B, 32, 32)
    mech = catalog.get("points", "dawa")
    levels = levels_of(mech, grid, 1.0, {"partition_share": 0.3})
    assert math.fsum(lv.cost.value for lv in levels) <= 1.0 + 1e-12
    assert levels[0].cost.value == pytest.approx(0.3)
    assert levels[0].scale == pytest.approx(4 / 0.3)  # 4k/ε₁ points
    assert levels[-1].in_partition and levels[-1].n_counts == grid.n_cells
    assert levels[-1].extra["workload_noise_sd_bound"]["mean"] > 0
    capped = levels_of(mech, grid, 1.0, {"partition_share": 0.3}, sensitivity=3)
    assert capped[0].scale == pytest.approx(3 * levels[0].scale)
    assert capped[-1].scale == pytest.approx(3 * levels[-1].scale)


def test_zcdp_refused_and_uploaded_workload() -> None:
    from dpcore.errors import ParameterError
    from dpcore.privacy.budget import zcdp

    mech = catalog.get("points", "dawa")
    grid = Grid(B, 16, 16)
    with pytest.raises(ParameterError, match="pure"):
        levels_of(mech, grid, zcdp(0.5), {})
    with pytest.raises(ParameterError, match="rectangles"):
        levels_of(mech, grid, 1.0, {"workload": "uploaded"})
    rects = [{"west": 0.0, "south": 0.0, "east": 0.5, "north": 0.5}]
    levels = levels_of(mech, grid, 1.0, {"workload": "uploaded", "rectangles": rects})
    assert levels[-1].in_partition


def test_the_plan_marks_its_query_figures_as_the_finest_partitions_upper_bound() -> None:
    """Issue 26, item 3: DAWA's preview assumes one bucket per cell; its leaf row says so, and the app reads
    its query figure as an upper bound (ui.kinds.points.plan.query_reading)."""
    from dpcore import catalog
    from dpcore.data.domain import Bounds, Grid
    from dpcore.points.unit import points_unit
    from dpcore.privacy.budget import pure

    plan = catalog.get("points", "dawa").plan(Grid(Bounds(0, 0, 1, 1), 16, 16), pure(0.5), {}, unit=points_unit())
    [leaf] = [r for r in plan.rows if r.details.get("in_partition")]
    assert leaf.details["finest_partition"] is True
