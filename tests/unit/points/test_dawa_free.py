"""DAWA with free bucket starts and node-by-node budgets (Li, Hay, Miklau & Wang, PVLDB 2014):
the interval costs, the partition's dynamic programme against brute force, the pieces, the
node shares and the release."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from points_helpers import RecordingNoise, release_with

from dpcore import catalog
from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.errors import ParameterError
from dpcore.estimate import greedy_h as gh
from dpcore.points.mechanisms import dawa_free as F
from dpcore.privacy.noise import NoiseSource

B = Bounds(0.0, 0.0, 1.0, 1.0)


def _agg(counts: np.ndarray, k: int = 1) -> Aggregate:
    counts = np.asarray(counts, dtype=np.int64)
    return Aggregate(Grid(B, *counts.shape), counts, 0, 0, k, None)


def _starts(n: int, length: int, offsets: int) -> list[int]:
    return list(range(0, n - length + 1, gh.free_start_step(length, offsets)))


@pytest.mark.parametrize("offsets", [1, 2, 4, 16])
def test_free_costs_are_the_rounded_l1_deviation(offsets: int) -> None:
    rng = np.random.default_rng(offsets)
    x = rng.integers(0, 9, 16)
    for lv, c in enumerate(gh.free_interval_costs(x, 4, offsets)):
        ln = 1 << lv
        want = [math.floor(16 * float(np.abs(x[s:s + ln] - x[s:s + ln].mean()).sum()) + 0.5)
                for s in _starts(16, ln, offsets)]
        assert c.tolist() == want, lv


@pytest.mark.parametrize("frac_bits", [0, 2, 4])
def test_free_costs_round_half_up_on_long_intervals(frac_bits: int) -> None:
    """Intervals of up to 256 cells (lengths beyond ``2^(f+1)``, whose rounding adds a half before
    the shift), on counts whose deviations land on the half: the rounded ``2^f · Σ|x_i − mean|``
    by exact fractions."""
    rng = np.random.default_rng(frac_bits)
    x = rng.integers(0, 5, 256) * (rng.random(256) < 0.5)
    for lv, c in enumerate(gh.free_interval_costs(x, frac_bits, 4)):
        ln = 1 << lv
        for j, s in enumerate(_starts(256, ln, 4)):
            w = [int(v) for v in x[s:s + ln]]
            dev = sum(abs(Fraction(v) - Fraction(sum(w), ln)) for v in w)
            assert int(c[j]) == math.floor((1 << frac_bits) * dev + Fraction(1, 2)), (lv, s)


@pytest.mark.parametrize("top", [3, 2**20, 2**31])
def test_free_costs_are_exact_with_large_counts(top: int) -> None:
    """Exact on both arithmetic paths (int32 terms where they fit, else int64): the rounded
    ``16 · Σ|x_i − mean|`` by exact fractions."""
    rng = np.random.default_rng(top % 1000)
    x = rng.integers(0, top, 32)
    for lv, c in enumerate(gh.free_interval_costs(x, 4, 4)):
        ln = 1 << lv
        for j, s in enumerate(_starts(32, ln, 4)):
            w = [int(v) for v in x[s:s + ln]]
            dev = sum(abs(Fraction(v) - Fraction(sum(w), ln)) for v in w)
            assert int(c[j]) == math.floor(16 * dev + Fraction(1, 2)), (lv, s)


def _partitions(n: int, offsets: int, start: int = 0):
    """Every partition of [start, n) into the candidate intervals, as (start, length) lists."""
    if start == n:
        yield []
        return
    ln = 1
    while start + ln <= n:
        if start % gh.free_start_step(ln, offsets) == 0:
            for rest in _partitions(n, offsets, start + ln):
                yield [(start, ln), *rest]
        ln *= 2


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("offsets", [1, 2, 8])
def test_partition_dp_matches_brute_force_and_its_tie_order(seed: int, offsets: int) -> None:
    """The least total cost over every partition; among equal totals the fixed order of the
    docstring (last bucket longer first, then the rest), which ignores the costs."""
    rng = np.random.default_rng(seed)
    costs = [rng.integers(0, 4, len(_starts(8, 1 << lv, offsets))) for lv in range(4)]

    def total(p):
        return sum(int(costs[ln.bit_length() - 1][s // gh.free_start_step(ln, offsets)]) for s, ln in p)

    def key(p):  # the order: total, then bucket lengths from the end, longer first
        return (total(p), [-ln for _, ln in reversed(p)])

    best = min(_partitions(8, offsets), key=key)
    s, ln = gh.optimal_interval_partition(costs, offsets)
    assert list(zip(s.tolist(), ln.tolist(), strict=True)) == best


def _reference_partition(costs: list[np.ndarray], offsets: int) -> tuple[list[int], list[int]]:
    """The partition's dynamic programme as it was written before the block version (end by end
    in Python integers, lengths longest first, a strictly smaller total replaces): the reference
    the fast one must reproduce bucket for bucket."""
    top = len(costs) - 1
    n = 1 << top
    shift = max(0, offsets.bit_length() - 1)
    table = [np.asarray(c).tolist() for c in costs]
    steps = [max(0, lv - shift) for lv in range(top + 1)]
    best = [0] * (n + 1)
    last = [0] * (n + 1)
    for e in range(1, n + 1):
        tz = (e & -e).bit_length() - 1
        hi = min(top, tz + shift, e.bit_length() - 1)
        bv, bl = None, 0
        for lv in range(hi, -1, -1):
            s = e - (1 << lv)
            v = best[s] + table[lv][s >> steps[lv]]
            if bv is None or v < bv:
                bv, bl = v, lv
        best[e], last[e] = bv, bl
    starts, lengths = [], []
    e = n
    while e > 0:
        ln = 1 << last[e]
        e -= ln
        starts.append(e)
        lengths.append(ln)
    return starts[::-1], lengths[::-1]


def _candidate_costs(rng: np.random.Generator, top: int, offsets: int, kind: str) -> list[np.ndarray]:
    """Costs for every candidate interval of ``2^top`` cells: random, with many ties (few values,
    or all equal: every partition ties), mostly negative, wide, and beyond int64's room for totals."""
    out = []
    for lv in range(top + 1):
        size = len(_starts(1 << top, 1 << lv, offsets))
        if kind == "random":
            c = rng.integers(-300, 3000, size)
        elif kind == "few values":
            c = rng.integers(0, 3, size) * (1 << lv)
        elif kind == "all equal":
            c = np.full(size, 7)
        elif kind == "negative":
            c = rng.integers(-5000, 20, size)
        elif kind == "clustered":  # costs of real L1 deviations plus noise and a penalty
            c = np.zeros(size, dtype=np.int64)
        elif kind == "wide":  # paths inside a block beyond int32: the int64 tables
            c = rng.integers(-(1 << 26), 1 << 26, size)
        else:  # "huge": totals beyond int64's room, the Python-integer path
            c = rng.integers(-(1 << 60), 1 << 60, size)
        out.append(np.asarray(c, dtype=np.int64))
    if kind == "clustered":
        x = rng.poisson(np.repeat(rng.gamma(0.3, 20.0, 1 << max(0, top - 3)), 8)[: 1 << top])
        out = [c + 400 + rng.integers(-200, 200, c.size)
               for c in gh.free_interval_costs(x.astype(np.int64), 4, offsets)]
    return out


@pytest.mark.parametrize("block", [1, 2, 8, 256])
@pytest.mark.parametrize("offsets", [1, 2, 8, 64])
def test_partition_blocks_match_the_end_by_end_programme(block: int, offsets: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The block version returns the old loop's partition (same buckets, same tie breaks) on
    random costs, on costs with many ties or all equal, on negative ones, on L1 costs of
    clustered counts, on costs too wide for int32 paths inside a block and too large for int64
    totals; with blocks of 1 … 256 ends and chunks of a few blocks, so block and chunk edges are
    crossed, and the walk back switching from one bucket at a time to every end at once after
    1 … 256 buckets (or never)."""
    monkeypatch.setattr(gh, "PARTITION_BLOCK", block)
    monkeypatch.setattr(gh, "PARTITION_CHUNK_CELLS", 4 * block)
    monkeypatch.setattr(gh, "BACKTRACK_ONE_BY_ONE", block)
    rng = np.random.default_rng(block * 100 + offsets)
    for top in (0, 1, 2, 3, 5, 9, 11):
        for kind in ("random", "few values", "all equal", "negative", "clustered", "wide", "huge"):
            costs = _candidate_costs(rng, top, offsets, kind)
            s, ln = gh.optimal_interval_partition(costs, offsets)
            assert (s.tolist(), ln.tolist()) == _reference_partition(costs, offsets), (top, kind)


def test_pieces_tile_each_bucket_with_aligned_blocks() -> None:
    rng = np.random.default_rng(1)
    starts = np.sort(rng.choice(256, 12, replace=False))
    lengths = np.minimum(np.diff(np.append(starts, 256)), 64)
    s, ln, owner = gh.dyadic_pieces(starts, lengths)
    assert np.all(s % ln == 0) and np.all(ln & (ln - 1) == 0)
    for b in range(starts.size):
        mine = owner == b
        cells = np.concatenate([np.arange(a, a + n) for a, n in zip(s[mine], ln[mine], strict=True)])
        assert cells.tolist() == list(range(starts[b], starts[b] + lengths[b]))


@pytest.mark.parametrize("m", [1, 2, 5, 16])
def test_node_shares_spend_one_budget_per_path_and_minimise_the_decomposition(m: int) -> None:
    rng = np.random.default_rng(m)
    tree = gh.BucketTree(m)
    uses = [rng.integers(1, 5, tree.n_nodes(lv)).astype(float) for lv in range(tree.height + 1)]
    shares = gh.node_shares(tree, uses)
    for leaf in range(m):  # every root-to-leaf path spends exactly the whole budget
        path = [shares[lv][leaf >> lv] for lv in range(tree.height + 1)]
        assert math.fsum(path) == pytest.approx(1.0, abs=1e-12)
    if tree.height == 1 and m == 2:  # two leaves: the closed form beats every other split
        n0 = np.maximum(uses[0], gh.LEAF_FLOOR * max(float(u.max()) for u in uses))

        def var(a: float) -> float:
            return float((n0 / (1 - a) ** 2).sum() + uses[1][0] / a ** 2)

        assert all(var(shares[1][0]) <= var(a) + 1e-9 for a in np.linspace(0.01, 0.99, 99))


def test_node_epsilons_round_down_to_few_values() -> None:
    eps = F.node_epsilons([np.array([0.3, 0.7, 0.0, 1.0])], 2.0)[0]
    assert eps[2] == 0.0
    assert np.all(eps[[0, 1, 3]] <= np.array([0.3, 0.7, 1.0]) * 2.0 * (1 - F.PATH_MARGIN))
    assert np.all(eps[[0, 1, 3]] > np.array([0.3, 0.7, 1.0]) * 2.0 * 2 ** (-1 / F.SHARE_STEPS) * (1 - 1e-6))


def _clustered(side: int, n: int, seed: int) -> Aggregate:
    rng = np.random.default_rng(seed)
    r = np.clip(rng.normal(side * 0.3, side * 0.08, n), 0, side - 1).astype(int)
    c = np.clip(rng.normal(side * 0.6, side * 0.1, n), 0, side - 1).astype(int)
    counts = np.zeros((side, side), dtype=np.int64)
    np.add.at(counts, (r, c), 1)
    return _agg(counts)


@pytest.mark.parametrize("shape", [(16, 16), (12, 20)])
def test_release_tiles_the_grid_and_spends_at_most_epsilon(shape: tuple[int, int]) -> None:
    """The leaves tile the grid once (padding dropped); every node's scale is the exact
    rational ``k/ε_v`` and every root-to-leaf path spends at most ε₂."""

    rng = np.random.default_rng(7)
    agg = _agg(rng.poisson(3.0, shape) * (rng.random(shape) < 0.3))
    mech = catalog.get("points", "dawa_free")
    noise = RecordingNoise(3)
    rel = release_with(mech, agg, 1.0, {"start_offsets": 4}, noise)
    cover = np.zeros(shape, dtype=int)
    for r0, r1, c0, c1 in rel.rects.tolist():
        cover[r0:r1, c0:c1] += 1
    assert np.all(cover == 1)
    assert all(isinstance(t, Fraction) for t in noise.scales)
    e1, e2 = mech.budgets(F.pure(1.0), mech.resolve_params({}))
    assert e1 + e2 <= 1.0
    spent = [Fraction(1) / t for t in noise.scales[len(gh.free_interval_costs(np.zeros(256, dtype=np.int64), 4, 4)):]]
    assert max(spent) <= Fraction(e2)
    assert rel.public["buckets"] <= rel.public["rectangles"]
    assert rel.noisy.sum() == pytest.approx(agg.counts.sum(), abs=8 * 4 / e2 + 8 * 64 / e1)


def test_release_is_close_at_large_epsilon() -> None:
    agg = _clustered(32, 5000, 2)
    mech = catalog.get("points", "dawa_free")
    rel = release_with(mech, agg, 100.0, {}, NoiseSource(1))
    q = np.array([[0, 16, 0, 16], [8, 24, 10, 30], [0, 32, 0, 32]])
    true = np.array([agg.counts[a:b, c:d].sum() for a, b, c, d in q])
    assert np.all(np.abs(rel.answer(q) - true) <= 0.02 * true + 5)


def test_start_offsets_must_be_a_power_of_two() -> None:
    mech = catalog.get("points", "dawa_free")
    with pytest.raises(ParameterError, match="power of two"):
        mech.plan(Grid(B, 8, 8), 1.0, {"start_offsets": 3})


def test_grids_up_to_dawas_limit_are_accepted() -> None:
    """The partition is no longer limited to 512² (its programme is fast on 1,024²); DAWA's own
    limit, a Hilbert square of 2,048², still holds."""
    mech = catalog.get("points", "dawa_free")
    p = mech.resolve_params({})
    mech.check_public(Grid(B, 1024, 1024), F.pure(1.0), p)
    mech.check_public(Grid(B, 2048, 600), F.pure(1.0), p)
    with pytest.raises(ParameterError, match="2,048 × 2,048"):
        mech.check_public(Grid(B, 2049, 10), F.pure(1.0), p)


@pytest.mark.parametrize("seed", range(4))
def test_node_decomposition_adds_up_to_the_level_decomposition(seed: int) -> None:
    """Per node (sparse) and per level (dawa's) agree: the same canonical decomposition."""
    rng = np.random.default_rng(seed)
    tree = gh.BucketTree(32)
    cov = np.where(rng.random(32) < 0.6, 1.0, rng.random(32)) * (rng.random(32) < 0.8)
    ids = np.flatnonzero(cov > 0)
    per_node = gh.node_decomposition(tree, ids, cov[ids])
    assert [float(v.sum()) for _, v in per_node] == pytest.approx(gh.level_decomposition(tree, cov).tolist())


def _one_decomposition(tree: gh.BucketTree, b: np.ndarray, f: np.ndarray, runs: tuple | None) -> list:
    """node_decomposition as it was written for one query (before the queries went up together)."""
    full = f >= 1.0
    part = (f > 0) & ~full
    idx: list[list[np.ndarray]] = [[] for _ in range(tree.height + 1)]
    val: list[list[np.ndarray]] = [[] for _ in range(tree.height + 1)]
    idx[0].append(b[part])
    val[0].append(f[part] ** 2)
    fb = b[full]
    if runs is not None:
        lo, hi = (np.array(a, dtype=np.int64) for a in runs)
    else:
        cut = np.flatnonzero(np.diff(fb) != 1) + 1
        lo = fb[np.concatenate([[0], cut])] if fb.size else fb
        hi = fb[np.concatenate([cut - 1, [fb.size - 1]])] + 1 if fb.size else fb
    if lo.size:
        hi[hi == tree.m] = 1 << tree.height
        for lv in range(tree.height + 1):
            live = lo < hi
            if not live.any():
                break
            if lv == tree.height:
                idx[lv].append(np.zeros(int(live.sum()), dtype=np.int64))
                val[lv].append(np.ones(int(live.sum())))
                break
            take_lo = live & (lo % 2 == 1)
            take_hi = live & (hi % 2 == 1) & (lo + take_lo < hi)
            at = np.column_stack([np.where(take_lo, lo, -1), np.where(take_hi, hi - 1, -1)]).ravel()
            idx[lv].append(at[(at >= 0) & (at < tree.n_nodes(lv))])
            val[lv].append(np.ones(idx[lv][-1].size))
            lo, hi = (lo + take_lo) // 2, (hi - take_hi) // 2
    out = []
    for lv in range(tree.height + 1):
        pieces = [(i, v) for i, v in zip(idx[lv], val[lv], strict=True) if i.size]
        if not pieces:
            out.append((np.zeros(0, dtype=np.int64), np.zeros(0)))
        elif len(pieces) == 1 and lv < tree.height:
            out.append(pieces[0])
        else:
            i, v = (np.concatenate(p) for p in zip(*pieces, strict=True))
            u, inv = np.unique(i, return_inverse=True)
            out.append((u, np.bincount(inv.ravel(), weights=v, minlength=u.size)))
    return out


@pytest.mark.parametrize("m", [1, 2, 3, 32, 37, 300])
def test_node_decompositions_of_many_queries_are_each_querys_own(m: int) -> None:
    """All queries at once (their runs climbing the tree together) give each query's decomposition
    as it was made one query at a time: the same nodes and uses, the same dtypes; queries by
    covered shares (partial and whole buckets), by runs, empty, and the whole range."""
    rng = np.random.default_rng(m)
    tree = gh.BucketTree(m)
    queries = [(np.zeros(0, dtype=np.int64), np.zeros(0), None), (np.arange(m), np.ones(m), None)]
    for _ in range(40):
        cov = np.where(rng.random(m) < 0.6, 1.0, rng.random(m)) * (rng.random(m) < rng.random())
        ids = np.flatnonzero(cov > 0)
        queries.append((ids, cov[ids], None))
        edges = np.unique(rng.integers(0, m + 1, 2 * int(rng.integers(0, 4))))
        lo, hi = edges[0::2], edges[1::2]
        k = min(lo.size, hi.size)
        queries.append((np.zeros(0, dtype=np.int64), np.zeros(0), (lo[:k], hi[:k])))
    got = gh.node_decompositions(tree, queries)
    assert len(got) == len(queries)
    for g, (b, f, runs) in zip(got, queries, strict=True):
        want = _one_decomposition(tree, b, f, runs)
        assert len(g) == len(want) == tree.height + 1
        for (gi, gv), (wi, wv) in zip(g, want, strict=True):
            assert np.array_equal(gi, wi) and np.array_equal(gv, wv) and (gi.dtype, gv.dtype) == (wi.dtype, wv.dtype)
    assert gh.node_decompositions(tree, []) == []


@pytest.mark.parametrize("shape", [(1, 1), (1, 9), (5, 3), (37, 64), (64, 64), (100, 70)])
def test_covered_buckets_are_np_unique_of_the_rectangle(shape: tuple[int, int]) -> None:
    """The buckets a workload rectangle touches: by counting (few buckets), exactly ``np.unique``'s
    arrays; for the finest partition, from the rectangle's border as runs, exactly the node
    decomposition of ``np.unique``'s buckets."""
    rng = np.random.default_rng(shape[0] * 1000 + shape[1])
    grid = Grid(B, *shape)
    mech = catalog.get("points", "dawa_free")
    finest = mech._finest_buckets(grid)
    tree = gh.BucketTree(grid.n_cells)
    cut = np.zeros(grid.n_cells, dtype=np.int64)
    cut[rng.choice(grid.n_cells, min(grid.n_cells, 12), replace=False)] = 1
    coarse = np.cumsum(cut)[finest] - cut[0]  # bucket ids 0 .. m-1 along the curve
    runs = F._finest_runs(grid, finest)
    rects = [(0, shape[0], 0, shape[1])]
    for _ in range(60):
        r0, c0 = int(rng.integers(0, shape[0])), int(rng.integers(0, shape[1]))
        rects.append((r0, int(rng.integers(r0 + 1, shape[0] + 1)), c0, int(rng.integers(c0 + 1, shape[1] + 1))))
    for r0, r1, c0, c1 in rects:
        ids, cells = np.unique(finest[r0:r1, c0:c1], return_counts=True)
        want = gh.node_decomposition(tree, ids, cells / 1)
        got = gh.node_decomposition(tree, np.zeros(0, dtype=np.int64), np.zeros(0), runs=runs((r0, r1, c0, c1)))
        assert len(got) == len(want)
        for (gi, gv), (wi, wv) in zip(got, want, strict=True):
            assert np.array_equal(gi, wi) and np.array_equal(gv, wv) and gv.dtype == wv.dtype
        want = np.unique(coarse[r0:r1, c0:c1], return_counts=True)
        got = F._covered(coarse, int(coarse.max()) + 1, (r0, r1, c0, c1))
        assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(got, want, strict=True))


@pytest.mark.parametrize("shape", [(1, 1), (1, 9), (5, 3), (37, 64), (64, 64), (100, 70)])
def test_covered_from_runs_is_covered_from_the_cells(shape: tuple[int, int]) -> None:
    """A rectangle's buckets and cells counted from its runs along the curve (the random
    workload's, kept) are the ones counted cell by cell, for partitions of a few to every cell."""
    rng = np.random.default_rng(shape[0] * 7 + shape[1])
    grid = Grid(B, *shape)
    finest = catalog.get("points", "dawa_free")._finest_buckets(grid)
    rects = [(0, shape[0], 0, shape[1])]
    for _ in range(40):
        r0, c0 = int(rng.integers(0, shape[0])), int(rng.integers(0, shape[1]))
        rects.append((r0, int(rng.integers(r0 + 1, shape[0] + 1)), c0, int(rng.integers(c0 + 1, shape[1] + 1))))
    runs = F._rect_runs(grid, rects)
    for cuts in (1, 5, grid.n_cells // 3 + 1, grid.n_cells):
        cut = np.zeros(grid.n_cells, dtype=np.int64)
        cut[rng.choice(grid.n_cells, min(grid.n_cells, cuts), replace=False)] = 1
        cut[0] = 1
        coarse = np.cumsum(cut)[finest] - 1  # bucket ids 0 .. m-1 along the curve
        size = np.bincount(coarse.ravel())
        first = np.cumsum(size) - size
        for rect, rr in zip(rects, runs, strict=True):
            got = F._runs_cover(rr, first, size)
            want = F._covered(coarse, size.size, rect)
            assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(got, want, strict=True))


def test_variances_by_budget_step_are_per_node_variances() -> None:
    """The node variances found per budget step (counted) are every node's own budget's variance,
    for node budgets and steps of :func:`_node_budgets` (the budgets those of :func:`node_epsilons`)
    and, through the sorting fallback, for any budgets or steps."""
    rng = np.random.default_rng(11)

    def want(eps: np.ndarray, k: int) -> list[float]:
        return [F._facts(float(e), k)[1] if e > 0 else 0.0 for e in eps]

    for e2, k in ((1e-4, 1), (0.3, 2), (7.5, 3)):
        shares = [rng.random(2000) * (rng.random(2000) < 0.8)]
        (eps,), (steps,) = F._node_budgets(shares, e2)
        assert np.array_equal(eps, F.node_epsilons(shares, e2)[0]) and steps.dtype == np.int64
        assert steps.min() == 0 and (steps[eps > 0] >= 1).all()  # 0 for an unmeasured node only
        assert F._variances(eps, steps, k).tolist() == want(eps, k)
    eps = rng.random(300) * (rng.random(300) < 0.7)
    for steps in ((eps > 0).astype(np.int64), np.zeros(300, dtype=np.int64)):  # not one budget per step
        assert F._variances(eps, steps, 2).tolist() == want(eps, 2)
    (eps,), (steps,) = F._node_budgets([np.array([3.0, 0.5, 0.0, 1.05])], 1.0)  # shares above 1: steps <= 0
    assert steps.min() < 0 and F._variances(eps, steps, 1).tolist() == want(eps, 1)
    assert F._variances(np.zeros(4), np.zeros(4, dtype=np.int64), 1).tolist() == [0.0] * 4
    assert F._variances(np.zeros(0), np.zeros(0, dtype=np.int64), 1).tolist() == []


def test_partition_takes_the_extreme_int64_cost_as_the_old_loop_does() -> None:
    """A cost of exactly -2^63 (np.abs leaves it negative): the width check counts it as 2^63, so the
    totals are summed without wrapping and the partition is the old loop's (review finding)."""
    costs = [np.full(8 >> lv, 0, dtype=np.int64) for lv in range(4)]
    costs[0][:] = -1
    costs[2][1] = np.iinfo(np.int64).min  # the bucket [4, 8)
    s, ln = gh.optimal_interval_partition(costs, 1)
    assert (s.tolist(), ln.tolist()) == _reference_partition(costs, 1) == ([0, 1, 2, 3, 4], [1, 1, 1, 1, 4])


def test_interval_costs_refuse_negative_counts() -> None:
    """The costs are of counts; the overflow guards assume x >= 0 (a negative cell gave other costs
    than the old code, review finding): refused with a message."""
    with pytest.raises(ParameterError, match="0 or more"):
        gh.free_interval_costs(np.array([-(2**30), 0, 3, 1]), 4, 4)


def test_plans_finest_design_is_kept_read_only_and_equals_a_fresh_one() -> None:
    """The random workload's facts are kept per grid shape and seed (public), in one object: its
    rectangles' runs and its finest-partition design are the ones made afresh and cannot be written
    through; so are its node budgets for ε₂ = 1, which times ε₂ are the budgets."""
    grid = Grid(B, 13, 20)
    mech = catalog.get("points", "dawa_free")
    p = mech.resolve_params({})
    kept = F._random_workload(grid, p)
    assert F._random_workload(Grid(Bounds(-74.0, 40.0, -73.0, 41.0), 13, 20), p) is kept  # keyed by the shape alone
    groups = mech._workload_groups(grid, p)
    fresh_runs = F._rect_runs(grid, groups[0])
    assert all(np.array_equal(a, c) and np.array_equal(b, d)
               for (a, b), (c, d) in zip(kept.runs, fresh_runs, strict=True))
    tree, (flats, which), units, steps = kept.finest
    assert kept.finest[2] is units  # made once
    fresh_tree, fresh_shares, (fresh_flats, fresh_which) = F._finest_design(grid, groups)
    assert tree == fresh_tree and np.array_equal(which, fresh_which)
    assert all(np.array_equal(a, c) and np.array_equal(b, d)
               for (a, b), (c, d) in zip(flats, fresh_flats, strict=True))
    for e2 in (1e-3, 0.75, 3.0):  # the kept units times ε₂: the budgets and steps of the shares, to the bit
        eps, want_steps = F._node_budgets(fresh_shares, e2)
        assert all(np.array_equal(e2 * u, e) and np.array_equal(a, b)
                   for u, e, a, b in zip(units, eps, steps, want_steps, strict=True))
    for a in (units[0], steps[0], flats[0][1], kept.runs[0][0]):
        with pytest.raises(ValueError):
            a[0] = 1
