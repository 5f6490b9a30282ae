"""Helpers shared by the O/D tests (tests/unit/test_od_*.py): public hierarchies, our own
aggregation of released levels (the oracle: ``Hierarchy.parents`` only), recording noise sources,
and random trips.  Not a test module."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpcore.data.hierarchy import Hierarchy
from dpcore.flows.counts import ODCounts
from dpcore.flows.mechanisms.common import ODPlan, ODRelease
from dpcore.flows.tree import hierarchy_from_prefixes, tree_levels
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource, discrete_gaussian_variance, discrete_laplace_variance

LN_INV_DELTA = math.log(1e8)  # δ = 1e-8


def classic_rho(eps: float, log_inv_delta: float = LN_INV_DELTA) -> float:
    """Lemma 3 inverse (spec §2.1): ρ = (√(ln(1/δ) + ε) − √ln(1/δ))²."""
    return (math.sqrt(log_inv_delta + eps) - math.sqrt(log_inv_delta)) ** 2


def tree_frame(fanouts: list, tag: str = "A") -> pd.DataFrame:
    """One row per leaf; ``fanouts[d]`` is the number of children of every node at depth d (an
    int) or the list of children counts of the depth-d nodes in order.  Codes are unique across
    each level (the dotted path with a tag), so every level is 'global'."""
    paths: list[tuple[int, ...]] = [()]
    for f in fanouts:
        counts = [f] * len(paths) if isinstance(f, int) else list(f)
        assert len(counts) == len(paths)
        paths = [p + (k,) for p, n in zip(paths, counts, strict=True) for k in range(n)]
    return pd.DataFrame({
        f"lv{d + 1}": [tag + ".".join(map(str, p[: d + 1])) for p in paths] for d in range(len(fanouts))
    })


def tree_h(fanouts: list, tag: str = "A") -> Hierarchy:
    df = tree_frame(fanouts, tag)
    return Hierarchy.from_frame(df, list(df.columns))


def up(h: Hierarchy, frm: int, to: int) -> np.ndarray:
    """Index at depth ``to`` of the ancestor of every node at depth ``frm`` (to ≤ frm)."""
    idx = np.arange(h.sizes[frm], dtype=np.int64)
    for d in range(frm - 1, to - 1, -1):
        idx = h.parents[d][idx]
    return idx


def n_children(h: Hierarchy, depth: int) -> np.ndarray:
    return np.bincount(h.parents[depth], minlength=h.sizes[depth])


def dense(o: np.ndarray, d: np.ndarray, v: np.ndarray, n_o: int, n_d: int) -> np.ndarray:
    """Dense matrix of a sparse level; every pair must appear at most once."""
    keys = o.astype(np.int64) * n_d + d
    assert np.unique(keys).size == keys.size, "a pair is listed twice"
    m = np.zeros((n_o, n_d), dtype=np.int64)
    m[o, d] = v
    return m


def truth_matrix(df: pd.DataFrame, ho: Hierarchy, hd: Hierarchy, od_: int, dd: int,
                 o_col: str = "o", d_col: str = "d", n_col: str | None = None) -> np.ndarray:
    """True counts at origin depth ``od_`` × destination depth ``dd`` from the raw trip rows."""
    lo = pd.Index(ho.labels(ho.depth)).get_indexer(df[o_col].astype(str))
    ld = pd.Index(hd.labels(hd.depth)).get_indexer(df[d_col].astype(str))
    assert (lo >= 0).all() and (ld >= 0).all()
    w = np.ones(len(df), dtype=np.int64) if n_col is None else df[n_col].to_numpy(dtype=np.int64)
    m = np.zeros((ho.sizes[od_], hd.sizes[dd]), dtype=np.int64)
    np.add.at(m, (up(ho, ho.depth, od_)[lo], up(hd, hd.depth, dd)[ld]), w)
    return m


def level_matrix(rel: ODRelease, t: int) -> np.ndarray:
    lp = rel.plan.levels[t]
    return dense(rel.origins[t], rel.destinations[t], rel.values[t],
                 rel.origin_h.sizes[lp.origin_depth], rel.destination_h.sizes[lp.destination_depth])


def check_tree_release(rel: ODRelease, n: int | None = None, *, positive: bool = True) -> None:
    """Spec §9.3/9.4 checked independently of ``rel.consistent``: integers (> 0 for the TopDown
    mechanisms), the finest table summed to every geo pair reproduces that level exactly, every
    released pair's parent pair is released (a 0 has no descendants), root = n if given."""
    assert rel.consistent
    ho, hd = rel.origin_h, rel.destination_h
    T = rel.depth
    lvls = [(lp.origin_depth, lp.destination_depth) for lp in rel.plan.levels]
    assert lvls == tree_levels(ho.depth, rel.plan.orientation)
    for t in range(T + 1):
        assert rel.values[t].dtype == np.int64
        if positive:
            assert (rel.values[t] > 0).all()
        else:
            assert (rel.values[t] != 0).all()
    o_T, d_T = lvls[T]
    for t, (o, d) in enumerate(lvls):
        agg = np.zeros((ho.sizes[o], hd.sizes[d]), dtype=np.int64)
        np.add.at(agg, (up(ho, o_T, o)[rel.origins[T]], up(hd, d_T, d)[rel.destinations[T]]), rel.values[T])
        assert np.array_equal(agg, level_matrix(rel, t)), f"level {t} is not the sum of the finest level"
    for t in range(1, T + 1 if positive else 1):  # sums of signed leaves may cancel to 0
        (po, pd_), (o, d) = lvls[t - 1], lvls[t]
        par = level_matrix(rel, t - 1)
        po_idx = up(ho, o, po)[rel.origins[t]]
        pd_idx = up(hd, d, pd_)[rel.destinations[t]]
        assert (par[po_idx, pd_idx] > 0).all(), f"level {t} has a child of a pair released as 0"
    if n is not None:
        assert rel.values[0].tolist() == ([n] if n > 0 else [])


class Recorder(NoiseSource):
    """A seeded source that records every noise call (kind, scale, size) and its output."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.calls: list[tuple[str, object, int]] = []
        self.outputs: list[np.ndarray] = []

    def discrete_gaussian(self, sigma, size):  # type: ignore[override]
        out = super().discrete_gaussian(sigma, size)
        self.calls.append(("discrete_gaussian", sigma, out.size))
        self.outputs.append(out.copy())
        return out

    def discrete_laplace(self, scale, size):  # type: ignore[override]
        out = super().discrete_laplace(scale, size)
        self.calls.append(("discrete_laplace", scale, out.size))
        self.outputs.append(out.copy())
        return out


def replay(rel: ODRelease, truth: dict[int, np.ndarray], noises: list[np.ndarray]):
    """Alg. 1 (spec §2.2) re-walked from the release: for every measured level, every released
    parent (in the order of its pair) and its **public** children (in child order), yield
    (level, x = truth + recorded noise, c = the parent's released value, y = the released
    children, 0 where absent).  Checks that the recorded noise vectors exactly cover the public
    children of the surviving parents.  ``truth[t]``: dense true matrix of level t."""
    ho, hd = rel.origin_h, rel.destination_h
    lv = [(lp.origin_depth, lp.destination_depth) for lp in rel.plan.levels]
    noises = list(noises)
    if rel.plan.levels[0].measured:
        root_noise = noises.pop(0)
        assert root_noise.size == 1
        assert rel.values[0].tolist() == ([v] if (v := int(truth[0][0, 0] + root_noise[0])) > 0 else [])
    for t in range(1, rel.depth + 1):
        (po, pd_), (o, _d) = lv[t - 1], lv[t]
        ymat = level_matrix(rel, t)
        segs = []
        for po_i, pd_i, c in zip(rel.origins[t - 1], rel.destinations[t - 1], rel.values[t - 1], strict=True):
            if o > po:
                kids = np.flatnonzero(ho.parents[po] == po_i)
                co, cd = kids, np.full(kids.size, pd_i)
            else:
                kids = np.flatnonzero(hd.parents[pd_] == pd_i)
                co, cd = np.full(kids.size, po_i), kids
            segs.append((co, cd, int(c)))
        if not rel.plan.levels[t].measured:  # copy level: one child per parent, no noise
            for co, cd, c in segs:
                assert co.size == 1 and ymat[co[0], cd[0]] == c
            continue
        if not segs:
            continue
        z = noises.pop(0)
        assert z.size == sum(co.size for co, _, _ in segs)
        pos = 0
        for co, cd, c in segs:
            k = co.size
            yield t, truth[t][co, cd] + z[pos:pos + k], c, ymat[co, cd]
            pos += k
    assert not noises


def truths_of(c: ODCounts, rel: ODRelease) -> dict[int, np.ndarray]:
    out = {}
    for t, lp in enumerate(rel.plan.levels):
        keys, cnt = c.level(lp.origin_depth, lp.destination_depth)
        n_d = rel.destination_h.sizes[lp.destination_depth]
        m = np.zeros((rel.origin_h.sizes[lp.origin_depth], n_d), dtype=np.int64)
        m[keys // n_d, keys % n_d] = cnt
        out[t] = m
    return out


class NoDraw(NoiseSource):
    def random_uint64(self, size: int) -> np.ndarray:  # every sampler draws through here
        raise AssertionError("noise drawn")


class LedgerWatcher(NoiseSource):
    """Asserts, at the first random bit, that the ledger has already been charged."""

    def __init__(self, ledger: Ledger, expected: float) -> None:
        super().__init__(1)
        self.ledger, self.expected, self.first = ledger, expected, True

    def random_uint64(self, size: int) -> np.ndarray:
        if self.first:
            self.first = False
            assert len(self.ledger.entries) == 1
            assert self.ledger.spent == pytest.approx(self.expected, rel=1e-12)
        return super().random_uint64(size)


def random_trips(rng: np.random.Generator, ho: Hierarchy, hd: Hierarchy, n: int) -> pd.DataFrame:
    lo, ld = ho.labels(ho.depth), hd.labels(hd.depth)
    # a few hot pairs plus a uniform background: sparse, many zero children
    hot_o, hot_d = rng.choice(lo, 3), rng.choice(ld, 3)
    k = rng.integers(0, 3, n)
    bg = rng.random(n) < 0.3
    o = np.where(bg, rng.choice(lo, n), hot_o[k])
    d = np.where(bg, rng.choice(ld, n), hot_d[k])
    return pd.DataFrame({"o": o, "d": d})


def check_estimates(p: ODPlan, laplace: bool, beta: float = 0.05) -> None:
    """The data-free estimates by hand (spec §6.2 items 1, 3, 4; §3.2): the TopDown recursion
    V_ℓ = var_ℓ(1 − 1/b_ℓ) + V_{ℓ−1}/b_ℓ² with the true noise variance, the typical maximum
    √V·√(2 ln N) (Laplace tails: √V·ln N/√2), and the bound B_ℓ(β) = 2 Σ_{κ≤ℓ} σ_κ √(2 ln(2ℓN_κ/β))
    (Laplace: 2 Σ t_κ ln(2ℓN_κ/β)) plus the noised total's own σ_0 √(2 ln(2/β)) (t_0 ln(2/β))."""
    var = [0.0 if not lv.measured else (discrete_laplace_variance(sc) if laplace else discrete_gaussian_variance(sc))
           for lv, sc in zip(p.levels, p.scales, strict=True)]
    V = [var[0]]
    for t in range(1, p.depth + 1):
        b = p.levels[t].branching
        V.append(var[t] * (1 - 1 / b) + V[-1] / b**2 if p.levels[t].measured else V[-1])
    for t, lv in enumerate(p.levels):
        assert lv.noise_sd == pytest.approx(math.sqrt(var[t]), rel=1e-12)
        assert lv.sd == pytest.approx(math.sqrt(V[t]), rel=1e-12)
        if t and lv.pairs > 1:
            typical = math.sqrt(V[t]) * (math.log(lv.pairs) / math.sqrt(2) if laplace
                                         else math.sqrt(2 * math.log(lv.pairs)))
            assert lv.max_abs == pytest.approx(typical, rel=1e-12)
        if t == 0:
            continue
        tail = (lambda s, a: float(s) * math.log(a)) if laplace else (lambda s, a: float(s) * math.sqrt(2 * math.log(a)))
        # β is split over the t levels and, when the total is noised, the total as well
        parts = t + (1 if p.levels[0].measured else 0)
        acc = sum(tail(p.scales[k], 2 * parts * p.levels[k].pairs / beta)
                  for k in range(1, t + 1) if p.levels[k].measured)
        r0 = tail(p.scales[0], 2 * parts / beta) if p.levels[0].measured else 0.0
        assert lv.bound == pytest.approx(2 * acc + r0, rel=1e-12)


class Scripted(NoiseSource):
    """Hands out the given noise vectors in order (zeros once they run out), recording sizes."""

    def __init__(self, draws: list[list[int]]) -> None:
        super().__init__(0)
        self.draws = [np.asarray(d, dtype=np.int64) for d in draws]
        self.sizes: list[int] = []

    def discrete_gaussian(self, sigma, size):  # type: ignore[override]
        n = int(size)
        self.sizes.append(n)
        if not self.draws:
            return np.zeros(n, dtype=np.int64)
        out = self.draws.pop(0)
        assert out.shape == (n,), (out.shape, n)
        return out.copy()


def make_states() -> Hierarchy:
    """3 states with 2, 3 and 1 counties (prefix codes)."""
    return hierarchy_from_prefixes(["0101", "0102", "0201", "0202", "0203", "0301"], [2, 4],
                                   ["state", "county"])
