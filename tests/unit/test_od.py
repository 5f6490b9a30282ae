"""Unit tests of O/D releases (dpcore.flows: InfTDA, TopDown L2, VanillaGauss, SH) and
``pipeline.release_od``.

Spec: ``shared/specs/topdown-od.md``.  Oracles come from outside the code under test: the
tree-level table of §1.4, the accounting table of §5.3 (classic Lemma 3 conversion), the
sensitivity table of §1.5 checked by brute force over every record set of one person on a
tiny hierarchy, ``scipy.optimize.milp`` (HiGHS) for the optimum of every IntOpt segment, our
own aggregation of the released finest table (``Hierarchy.parents`` only), hand-computed
error metrics, and the statistical estimates of §6.2 / §9.5.

Statistical tests use fixed seeds; their tolerances are derived from the distribution and
the sample size (stated at each test), not tuned to the observed values.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.stats import binom

from dpcore import pipeline
from dpcore.areas.hierarchy import Hierarchy
from dpcore.data.synthetic import demo_od, synthetic_od_tree
from dpcore.errors import BudgetError, InputError, ParameterError
from dpcore.estimate import topdown_opt
from dpcore.flows import mechanisms as od
from dpcore.flows.counts import ODCounts
from dpcore.flows.diagnostics import empirical_errors
from dpcore.flows.tree import hierarchy_from_prefixes, level_name, tree_levels
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource, discrete_gaussian_variance, discrete_laplace_variance

LN_INV_DELTA = math.log(1e8)  # δ = 1e-8


def classic_rho(eps: float, log_inv_delta: float = LN_INV_DELTA) -> float:
    """Lemma 3 inverse (spec §2.1): ρ = (√(ln(1/δ) + ε) − √ln(1/δ))²."""
    return (math.sqrt(log_inv_delta + eps) - math.sqrt(log_inv_delta)) ** 2


# ---------------------------------------------------------------------------------------------
# helpers: public hierarchies, our own aggregation, recording noise sources
# ---------------------------------------------------------------------------------------------


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


def level_matrix(rel: od.ODRelease, t: int) -> np.ndarray:
    lp = rel.plan.levels[t]
    return dense(rel.origins[t], rel.destinations[t], rel.values[t],
                 rel.origin_h.sizes[lp.origin_depth], rel.destination_h.sizes[lp.destination_depth])


def check_tree_release(rel: od.ODRelease, n: int | None = None, *, positive: bool = True) -> None:
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


def replay(rel: od.ODRelease, truth: dict[int, np.ndarray], noises: list[np.ndarray]):
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


def truths_of(c: ODCounts, rel: od.ODRelease) -> dict[int, np.ndarray]:
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


@pytest.fixture(scope="module")
def states() -> Hierarchy:
    """3 states with 2, 3 and 1 counties (prefix codes)."""
    return hierarchy_from_prefixes(["0101", "0102", "0201", "0202", "0203", "0301"], [2, 4],
                                      ["state", "county"])


def random_trips(rng: np.random.Generator, ho: Hierarchy, hd: Hierarchy, n: int) -> pd.DataFrame:
    lo, ld = ho.labels(ho.depth), hd.labels(hd.depth)
    # a few hot pairs plus a uniform background: sparse, many zero children
    hot_o, hot_d = rng.choice(lo, 3), rng.choice(ld, 3)
    k = rng.integers(0, 3, n)
    bg = rng.random(n) < 0.3
    o = np.where(bg, rng.choice(lo, n), hot_o[k])
    d = np.where(bg, rng.choice(ld, n), hot_d[k])
    return pd.DataFrame({"o": o, "d": d})


# ---------------------------------------------------------------------------------------------
# 1. tree structure
# ---------------------------------------------------------------------------------------------


def test_tree_levels_both_orientations() -> None:
    """Spec §1.4: depth T = 2g; odd levels (k−1, k) in the destination tree, (k, k−1) in the
    origin tree; even levels (k, k)."""
    assert tree_levels(3, "destination") == [(0, 0), (0, 1), (1, 1), (1, 2), (2, 2), (2, 3), (3, 3)]
    assert tree_levels(3, "origin") == [(0, 0), (1, 0), (1, 1), (2, 1), (2, 2), (3, 2), (3, 3)]
    for g in range(1, 9):
        for orient in ("destination", "origin"):
            lv = tree_levels(g, orient)
            assert len(lv) - 1 == 2 * g
            for k in range(1, g + 1):
                assert lv[2 * k] == (k, k)
                assert lv[2 * k - 1] == ((k - 1, k) if orient == "destination" else (k, k - 1))
    assert tree_levels(2) == tree_levels(2, "destination")
    with pytest.raises(ParameterError, match="orientation"):
        tree_levels(2, "sideways")  # type: ignore[arg-type]


def test_plan_levels_names_kinds_and_domain_sizes(states: Hierarchy) -> None:
    p = od.plan(states, states, "inftda", budget.zcdp(1.0))
    assert [lv.name for lv in p.levels] == ["total", "total>state", "state", "state>county", "county"]
    assert [lv.kind for lv in p.levels] == ["total", "cross", "intra", "cross", "intra"]
    assert [lv.pairs for lv in p.levels] == [1, 3, 9, 18, 36]
    assert [(lv.origin_level, lv.destination_level) for lv in p.levels] == [
        ("total", "total"), ("total", "state"), ("state", "state"), ("state", "county"), ("county", "county")]
    assert [lv.branching for lv in p.levels] == [1.0, 3.0, 3.0, 2.0, 2.0]
    po = od.plan(states, None, "inftda", budget.zcdp(1.0), orientation="origin")
    assert [lv.name for lv in po.levels] == ["total", "state>total", "state", "county>state", "county"]
    assert [lv.pairs for lv in po.levels] == [1, 3, 9, 18, 36]
    # different origin and destination hierarchies: intra levels name both
    other = tree_h([2, 2], "B")
    px = od.plan(states, other, "inftda", budget.zcdp(1.0))
    assert px.levels[2].name == "state>lv1" and px.levels[4].name == "county>lv2"
    assert [lv.pairs for lv in px.levels] == [1, 2, 6, 12, 24]
    assert level_name(states, states, 1, 2) == "state>county"
    assert level_name(states, states, 2, 2) == "county"
    with pytest.raises(ParameterError, match="same number of levels"):
        od.plan(states, tree_h([2]), "inftda", budget.zcdp(1.0))


# ---------------------------------------------------------------------------------------------
# 2. accounting (spec §5.3, §9.2, §1.5)
# ---------------------------------------------------------------------------------------------

# ε → (ρ total, σ at T = 6, 8, 16, VanillaGauss σ per leaf), spec §5.3 table
# (printed values: a computed value must round to them, i.e. lie within half a unit of the last digit)
TABLE_53 = {
    0.1: (1.3535e-4, ("210.5", "243", "344"), "86.0"),
    1.0: (1.32154e-2, ("21.3", "24.6", "34.8"), "8.70"),
    10.0: (1.07988, ("2.36", "2.72", "3.85"), "0.962"),
}


def matches_printed(value: float, printed: str) -> bool:
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return abs(value - float(printed)) <= 0.5 * 10.0 ** -decimals


@pytest.mark.parametrize("eps", sorted(TABLE_53))
def test_sigma_per_node_matches_the_accounting_table(eps: float) -> None:
    rho_tab, sigmas, vanilla = TABLE_53[eps]
    rho = classic_rho(eps)
    assert rho == pytest.approx(rho_tab, rel=5e-5)
    assert budget.approx_dp_to_zcdp_classic(eps, 1e-8) == pytest.approx(rho, rel=1e-12)
    # inverse check (spec §5.3): ρ + 2√(ρ ln(1/δ)) = ε
    assert rho + 2 * math.sqrt(rho * LN_INV_DELTA) == pytest.approx(eps, rel=1e-12)
    for g, sig_tab in zip((3, 4, 8), sigmas, strict=True):
        h = tree_h([2] * g)  # binary: no copy level
        T = 2 * g
        p = od.plan(h, h, "inftda", budget.zcdp(rho))
        assert p.depth == T and not p.levels[0].measured and p.total_public
        scales = [lv.scale for lv in p.levels[1:]]
        assert all(lv.measured for lv in p.levels[1:])
        assert all(lv.noise == "discrete_gaussian" for lv in p.levels[1:])
        # σ = √(T/ρ) for bounded m = 1 with a uniform split (§2.2 line 3); never below it
        for s in scales:
            assert s == pytest.approx(math.sqrt(T / rho), rel=1e-12)
            assert Fraction(s) ** 2 >= Fraction(2) * T / 2 / Fraction(rho) * (1 - Fraction(1, 10**12))
        assert matches_printed(scales[0], sig_tab), (scales[0], sig_tab)
        # composition: Σ GS₂,ℓ²/(2σ_ℓ²) ≤ ρ exactly, and within 1e-9 relative
        spent = sum(Fraction(lv.l2_sensitivity) ** 2 / (2 * Fraction(lv.scale) ** 2) for lv in p.levels[1:])
        assert spent <= Fraction(rho)
        assert float(spent) >= rho * (1 - 1e-9)
        assert math.fsum(lv.share for lv in p.levels) <= rho
        pv = od.plan(h, h, "vanilla_gauss", budget.zcdp(rho))
        assert matches_printed(pv.levels[-1].scale, vanilla), (pv.levels[-1].scale, vanilla)
        assert [lv.measured for lv in pv.levels] == [False] * T + [True]


# Italy-shaped hierarchy (20 regions, 110 provinces, 8,092 municipalities; spec §1.4, §6.3):
# ε → guaranteed bound B_ℓ(0.05) at L1…L6 and the VanillaGauss SD at L0…L6, as printed in §6.3
TABLE_63 = {
    0.1: (("1540", "3536", "5721", "8067", "10741", "13703"),
          ("695548", "155529", "34777", "14829", "6323", "737", "86")),
    1.0: (("156", "358", "579", "816", "1087", "1387"),
          ("70391", "15740", "3520", "1501", "640", "75", "9")),
    10.0: (("17", "40", "64", "90", "120", "153"),
           ("7787", "1741", "389", "166", "71", "8", "1")),
}


@pytest.fixture(scope="module")
def italy() -> Hierarchy:
    return tree_h([20, [5] * 10 + [6] * 10, [74] * 62 + [73] * 48])


@pytest.mark.parametrize("eps", sorted(TABLE_63))
def test_bound_and_vanilla_sd_match_the_italy_calibration_table(italy: Hierarchy, eps: float,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """B_ℓ(β) = 2 Σ_{κ≤ℓ} σ_κ √(2 ln(2ℓN_κ/β)) (spec §3.2) and VanillaGauss SD σ_leaf·√(N_T/N_ℓ)
    (§6.2 item 6) against the numbers printed in §6.3 (T = 6, uniform, bounded, δ = 1e-8).
    VanillaGauss cannot release Italy (65 M cells), but its plan is what the table describes."""
    monkeypatch.setattr(od, "VANILLA_MAX_CELLS", 10**9)
    assert italy.sizes == [1, 20, 110, 8092]
    bounds, vanilla = TABLE_63[eps]
    rho = classic_rho(eps)
    p = od.plan(italy, italy, "inftda", budget.zcdp(rho))
    assert [lv.pairs for lv in p.levels] == [1, 20, 400, 2200, 12100, 890_120, 65_480_464]
    assert p.levels[0].bound == 0.0
    for lv, printed in zip(p.levels[1:], bounds, strict=True):
        assert matches_printed(lv.bound, printed), (lv.level, lv.bound, printed)
    pv = od.plan(italy, italy, "vanilla_gauss", budget.zcdp(rho))
    for lv, printed in zip(pv.levels, vanilla, strict=True):
        assert matches_printed(lv.sd, printed), (lv.level, lv.sd, printed)
        assert math.isnan(lv.bound)
    # the L2 variant has no proven bound (NaN), the same noise
    p2 = od.plan(italy, italy, "tda_l2", budget.zcdp(rho))
    assert all(math.isnan(lv.bound) for lv in p2.levels[1:])
    assert [lv.scale for lv in p2.levels] == [lv.scale for lv in p.levels]


def expected_sens(neighbour: str, m: int, distinct: bool, leaf: bool) -> tuple[float, float]:
    """Spec §1.5 table with the m > 1 correction (§8.1 item 15)."""
    if neighbour == "bounded":
        return 2.0 * m, (math.sqrt(2 * m) if (leaf and distinct) else math.sqrt(2) * m)
    return float(m), (math.sqrt(m) if (leaf and distinct) else float(m))


@pytest.mark.parametrize("neighbour", ["bounded", "unbounded"])
@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize("distinct", [True, False])
@pytest.mark.parametrize("orientation", ["destination", "origin"])
def test_per_level_sensitivities_and_root(neighbour: str, m: int, distinct: bool, orientation: str) -> None:
    h = tree_h([3, 2, 2])
    rho = 0.7
    p = od.plan(h, h, "inftda", budget.zcdp(rho), neighbour=neighbour, max_trips=m, distinct=distinct,
                orientation=orientation)
    T = p.depth
    root_measured = not (neighbour == "bounded" and m == 1)
    assert p.levels[0].measured is root_measured
    assert p.total_public is (not root_measured)
    n_meas = T + root_measured
    for t, lv in enumerate(p.levels):
        if t == 0:
            if root_measured:
                assert (lv.l1_sensitivity, lv.l2_sensitivity) == (m, m)  # the total moves by ≤ m
            else:
                assert lv.share == 0 and lv.scale == 0 and lv.noise is None and lv.bound == 0.0
            continue
        l1, l2 = expected_sens(neighbour, m, distinct, leaf=(t == T))
        assert lv.l1_sensitivity == pytest.approx(l1, rel=1e-15)
        assert lv.l2_sensitivity == pytest.approx(l2, rel=1e-15)
    shares = [lv.share for lv in p.levels if lv.measured]
    assert len(shares) == n_meas
    assert shares == pytest.approx([rho / n_meas] * n_meas, rel=1e-12)
    for lv in p.levels:
        if lv.measured:
            assert lv.scale == pytest.approx(lv.l2_sensitivity / math.sqrt(2 * lv.share), rel=1e-12)
    spent = sum(Fraction(lv.l2_sensitivity) ** 2 / (2 * Fraction(lv.scale) ** 2) for lv in p.levels if lv.measured)
    assert spent <= Fraction(rho) and float(spent) >= rho * (1 - 1e-9)
    check_estimates(p, laplace=False)


def check_estimates(p: od.ODPlan, laplace: bool, beta: float = 0.05) -> None:
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


def test_unbounded_m1_costs_like_the_paper_appendix_b() -> None:
    """App. B: σ² = T/ρ' everywhere (root too) costs (1/T + 1)·ρ'/2 for m = 1 unbounded; our plan
    takes the target total ρ and spreads it over T + 1 measurements of sensitivity 1."""
    h = tree_h([2, 3])
    rho = 0.3
    p = od.plan(h, h, "inftda", budget.zcdp(rho), neighbour="unbounded")
    T = p.depth
    assert all(lv.measured for lv in p.levels)
    for lv in p.levels:
        assert lv.l2_sensitivity == 1.0
        assert lv.scale == pytest.approx(math.sqrt((T + 1) / (2 * rho)), rel=1e-12)


def test_copy_levels_get_no_share_and_no_noise() -> None:
    """A single-state hierarchy: levels 1 and 2 only copy the total (spec §2.10, review note 2)."""
    h = hierarchy_from_prefixes(["1001", "1002", "1003"], [2, 4], ["state", "county"])
    rho = 0.2
    for orient in ("destination", "origin"):
        p = od.plan(h, h, "inftda", budget.zcdp(rho), orientation=orient)
        assert [lv.measured for lv in p.levels] == [False, False, False, True, True]
        assert [lv.share for lv in p.levels[:3]] == [0.0, 0.0, 0.0]
        assert [lv.branching for lv in p.levels] == [1.0, 1.0, 1.0, 3.0, 3.0]
        assert p.levels[3].share == pytest.approx(rho / 2, rel=1e-12)
        assert p.levels[3].scale == pytest.approx(math.sqrt(2 / rho), rel=1e-12)  # σ² = 2/(2·ρ/2)
        assert p.levels[1].sd == 0.0 and p.levels[2].sd == 0.0
        check_estimates(p, laplace=False)
        df = pd.DataFrame({"o": ["1001"] * 5 + ["1003"] * 2, "d": ["1002"] * 4 + ["1001"] * 3})
        c = ODCounts.from_frame(df, h, origin="o", destination="d")
        src = Recorder(3)
        rel = od.release(c, "inftda", budget.zcdp(rho), src, orientation=orient)
        check_tree_release(rel, 7)
        assert rel.values[1].tolist() == [7] and rel.values[2].tolist() == [7]
        assert [k for k, _, _ in src.calls] == ["discrete_gaussian"] * 2  # levels 3 and 4 only
        assert src.calls[0][2] == 3  # the three counties of the one state
        assert src.calls[1][2] == 3 * rel.values[3].size
        assert rel.details["noised_cells"] == src.calls[0][2] + src.calls[1][2]
    # a level where only some nodes have one child is measured
    mixed = hierarchy_from_prefixes(["1001", "2001", "2002"], [2, 4])
    p = od.plan(mixed, mixed, "inftda", budget.zcdp(rho))
    assert all(lv.measured for lv in p.levels[1:])


def test_nothing_to_measure_is_explained() -> None:
    """Every tree level a copy level and the total public: nothing can be measured, and the plan
    says so in terms of the hierarchy (not budget's generic 'parts' message)."""
    h = hierarchy_from_prefixes(["0101"], [2, 4], ["state", "county"])
    with pytest.raises(ParameterError, match="Nothing to measure") as err:
        od.plan(h, h, "inftda", budget.zcdp(0.5))
    assert "parts" not in str(err.value)


def test_custom_split_weights(states: Hierarchy) -> None:
    rho = 0.4
    w = [1.0, 2.0, 3.0, 4.0]
    p = od.plan(states, states, "inftda", budget.zcdp(rho), split="custom", weights=w)
    shares = [lv.share for lv in p.levels[1:]]
    assert shares == pytest.approx([rho * x / 10 for x in w], rel=1e-12)
    assert sum(Fraction(s) for s in shares) <= Fraction(rho)
    assert p.split_weights == tuple(w)
    for lv in p.levels[1:]:
        assert lv.scale == pytest.approx(lv.l2_sensitivity / math.sqrt(2 * lv.share), rel=1e-12)
    with pytest.raises(ParameterError, match="4 weights"):
        od.plan(states, states, "inftda", budget.zcdp(rho), split="custom", weights=[1, 1, 1])
    with pytest.raises(ParameterError):
        od.plan(states, states, "inftda", budget.zcdp(rho), split="custom")
    # unbounded measures the root too: 5 weights, top first
    pu = od.plan(states, states, "inftda", budget.zcdp(rho), neighbour="unbounded", split="custom",
                 weights=[4, 1, 1, 1, 1])
    assert pu.levels[0].share == pytest.approx(rho / 2, rel=1e-12)
    with pytest.raises(ParameterError, match="5 weights"):
        od.plan(states, states, "inftda", budget.zcdp(rho), neighbour="unbounded", split="custom", weights=w)
    for bad in ([1, -1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 1]):  # negative, all zero, a zero share
        with pytest.raises(ParameterError):
            od.plan(states, states, "inftda", budget.zcdp(rho), split="custom", weights=bad)
    with pytest.raises(ParameterError, match="split"):
        od.plan(states, states, "inftda", budget.zcdp(rho), split="sideways")
    pg = od.plan(states, states, "inftda", budget.zcdp(rho), split="geometric")
    g = [lv.share for lv in pg.levels[1:]]
    assert all(a < b for a, b in itertools.pairwise(g)) and math.fsum(g) <= rho


@pytest.mark.parametrize("neighbour", ["bounded", "unbounded"])
@pytest.mark.parametrize("m", [1, 2])
def test_pure_epsilon_uses_discrete_laplace_with_l1_scales(states: Hierarchy, neighbour: str, m: int) -> None:
    eps = 0.9
    p = od.plan(states, states, "inftda", budget.pure(eps), neighbour=neighbour, max_trips=m)
    measured = [lv for lv in p.levels if lv.measured]
    assert len(measured) == 4 + (not (neighbour == "bounded" and m == 1))
    total = Fraction(0)
    for lv, sc in zip(p.levels, p.scales, strict=True):
        if not lv.measured:
            assert sc is None
            continue
        assert lv.noise == "discrete_laplace"
        assert isinstance(sc, Fraction) and sc == Fraction(lv.l1_sensitivity) / Fraction(lv.share)
        assert lv.l1_sensitivity == (m if lv.level == 0 else (2 * m if neighbour == "bounded" else m))
        total += Fraction(lv.l1_sensitivity) / sc  # ε_ℓ = GS₁/scale
    assert total <= Fraction(eps)
    assert float(total) == pytest.approx(eps, rel=1e-12)
    check_estimates(p, laplace=True)
    # a pure release draws discrete Laplace noise with exactly these scales
    df = pd.DataFrame({"o": ["0101", "0201", "0301"] * 4, "d": ["0102", "0203", "0101"] * 4,
                       "u": list(range(12))})
    c = ODCounts.from_frame(df, states, origin="o", destination="d",
                               user="u" if m > 1 else None, max_trips=m, noise=NoiseSource(0))
    src = Recorder(5)
    rel = od.release(c, "inftda", budget.pure(eps), src, neighbour=neighbour)
    assert {k for k, _, _ in src.calls} == {"discrete_laplace"}
    used = [s for _, s, _ in src.calls]
    assert all(s in set(p.scales) for s in used)
    check_tree_release(rel, 12 if p.total_public else None)


def test_plan_refuses_bad_options(states: Hierarchy) -> None:
    z = budget.zcdp(0.5)
    for kw in ({"neighbour": "replace"}, {"order": "up"}, {"tiebreak": "coin"}, {"max_trips": 0},
               {"orientation": "both"}):
        with pytest.raises(ParameterError):
            od.plan(states, states, "inftda", z, **kw)
    with pytest.raises(ParameterError, match="Unknown O/D mechanism"):
        od.plan(states, states, "bogus", z)
    with pytest.raises(ParameterError):
        od.plan(states, states, "inftda", None)
    with pytest.raises(ParameterError):
        od.plan(states, states, "inftda", z, approx=(1.0, 1e-6))
    with pytest.raises(ParameterError):
        od.plan(states, states, "sh", z)
    with pytest.raises(ParameterError):
        od.plan(states, states, "sh", None, approx=(1.0, 1e-6), max_trips=2)
    with pytest.raises(ParameterError):
        od.plan(states, states, "sh", None, approx=(1.0, 1.0))
    assert od.get("TDA-L2").name == "tda_l2"


# ---------------------------------------------------------------------------------------------
# 3. brute-force sensitivity on a tiny two-level hierarchy (spec review notes)
# ---------------------------------------------------------------------------------------------


def _person_sets(cells: int, m: int, distinct: bool, exactly: bool) -> list[tuple[int, ...]]:
    sizes = [m] if exactly else range(m + 1)
    gen = itertools.combinations if distinct else itertools.combinations_with_replacement
    return [s for k in sizes for s in gen(range(cells), k)]


@pytest.mark.parametrize("orientation", ["destination", "origin"])
@pytest.mark.parametrize("m", [1, 2, 3])
@pytest.mark.parametrize("distinct", [True, False])
def test_sensitivity_by_brute_force(orientation: str, m: int, distinct: bool) -> None:
    """Every record set of one person (m trips or at most m, distinct or repeated leaf pairs) on
    a 2-state hierarchy (A = {a1, a2}, B = {b1}; 9 leaf pairs).  The largest change of each tree
    level's histogram between neighbours never exceeds the plan's GS₂ / GS₁ and equals GS₁
    everywhere.  It equals GS₂ at the leaves, with repeated trips, and with distinct trips where
    one node (unbounded: add/remove) or two nodes (bounded: the person moves from one to the
    other) can hold m of the person's leaf cells; otherwise it is strictly smaller (the spec's
    example: √10 instead of √18 where a node holds at most 2 cells and m = 3)."""
    h = hierarchy_from_prefixes(["A1", "A2", "B1"], [1, 2], ["state", "area"])
    L, n_leaf = h.depth, h.n_leaves
    lv = tree_levels(L, orientation)
    cells_o = np.repeat(np.arange(n_leaf), n_leaf)
    cells_d = np.tile(np.arange(n_leaf), n_leaf)
    leaves_under = [np.bincount(up(h, L, k), minlength=h.sizes[k]) for k in range(L + 1)]
    checked_note: set[str] = set()
    for neighbour in ("bounded", "unbounded"):
        p = od.plan(h, h, "inftda", budget.zcdp(1.0), neighbour=neighbour, max_trips=m, distinct=distinct,
                    orientation=orientation)
        for exactly in (True, False):
            sets = _person_sets(n_leaf * n_leaf, m, distinct, exactly)
            for t, (o, d) in enumerate(lv):
                node = up(h, L, o)[cells_o] * h.sizes[d] + up(h, L, d)[cells_d]
                H = np.zeros((len(sets), h.sizes[o] * h.sizes[d]))
                for i, s in enumerate(sets):
                    np.add.at(H[i], node[list(s)], 1.0)
                if neighbour == "bounded":  # replace the person: max over pairs of record sets
                    diff = H[:, None, :] - H[None, :, :]
                    l2 = float(np.sqrt((diff ** 2).sum(-1)).max())
                    l1 = float(np.abs(diff).sum(-1).max())
                else:  # add or remove the person
                    l2 = float(np.sqrt((H ** 2).sum(-1)).max())
                    l1 = float(np.abs(H).sum(-1).max())
                lp = p.levels[t]
                if t == 0:
                    # the total: fixed when every person has exactly m trips under replacement
                    expect = 0.0 if (neighbour == "bounded" and exactly) else float(m)
                    assert l2 == pytest.approx(expect) and l1 == pytest.approx(expect)
                    if lp.measured:
                        assert l2 <= lp.l2_sensitivity + 1e-12 and l1 <= lp.l1_sensitivity + 1e-12
                    else:  # only bounded m = 1, where the total is invariant (the paper's setting)
                        assert neighbour == "bounded" and m == 1
                    continue
                assert l2 <= lp.l2_sensitivity + 1e-12, (neighbour, exactly, t)
                assert l1 == pytest.approx(lp.l1_sensitivity), (neighbour, exactly, t)
                cap = (leaves_under[o][:, None] * leaves_under[d][None, :]).ravel()  # leaf cells per node
                full = int((cap >= m).sum())
                attained = t == len(lv) - 1 or not distinct or full >= (2 if neighbour == "bounded" else 1)
                if attained:
                    assert l2 == pytest.approx(lp.l2_sensitivity), (neighbour, exactly, t)
                else:
                    assert l2 < lp.l2_sensitivity - 1e-9, (neighbour, exactly, t)
                    if neighbour == "bounded" and m == 3 and cap.max() == 2:  # review note 1
                        assert l2 == pytest.approx(math.sqrt(10))
                        checked_note.add(orientation)
    assert bool(checked_note) == (distinct and m == 3)


# ---------------------------------------------------------------------------------------------
# 4. release invariants (spec §9.3, §9.4)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def random_tree_data() -> dict[int, tuple[Hierarchy, pd.DataFrame]]:
    out = {}
    for seed in (1, 2, 3):
        areas, flows = synthetic_od_tree("random", "dense" if seed != 2 else "sparse", seed=seed, levels=2)
        h = Hierarchy.from_frame(areas, list(areas.columns))
        out[seed] = (h, flows)
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("orientation", ["destination", "origin"])
@pytest.mark.parametrize("mechanism", ["inftda", "tda_l2"])
@pytest.mark.parametrize("neighbour", ["bounded", "unbounded"])
@pytest.mark.parametrize("cost", [budget.zcdp(0.05), budget.pure(0.5)], ids=["rho", "pure"])
def test_release_invariants_on_synthetic_trees(random_tree_data, seed, orientation, mechanism, neighbour, cost):
    h, flows = random_tree_data[seed]
    c = ODCounts.from_frame(flows, h, origin="origin", destination="destination", count="count")
    n = int(flows["count"].sum())
    assert c.total == n
    rel = od.release(c, mechanism, cost, NoiseSource(seed), neighbour=neighbour, orientation=orientation)
    bounded = neighbour == "bounded"
    check_tree_release(rel, n if bounded else None)
    assert rel.public_total == (n if bounded else None)
    assert rel.plan.mechanism == mechanism and rel.plan.orientation == orientation
    if not bounded:
        assert rel.values[0].size == 1 and rel.values[0][0] != n  # noised (P(Z = 0) is tiny here)


@pytest.mark.parametrize("orientation", ["destination", "origin"])
def test_release_invariants_with_different_origin_and_destination_hierarchies(orientation: str) -> None:
    rng = np.random.default_rng(11)
    ho = tree_h([3, [1, 4, 2], [2, 1, 3, 1, 2, 2, 1]], "O")
    hd = tree_h([2, [3, 1], [1, 2, 2, 3]], "D")
    df = random_trips(rng, ho, hd, 400)
    c = ODCounts.from_frame(df, ho, hd, origin="o", destination="d")
    for mech in ("inftda", "tda_l2"):
        for s in range(4):
            rel = od.release(c, mech, budget.zcdp(0.5), NoiseSource(s), orientation=orientation,
                             tiebreak="index" if s % 2 else "random", order="descending" if s == 3 else "ascending")
            check_tree_release(rel, 400)
    # with ample budget the release is close to the truth at every level
    rel = od.release(c, "inftda", budget.zcdp(5000), NoiseSource(0), orientation=orientation)
    for t, lp in enumerate(rel.plan.levels):
        truth = truth_matrix(df, ho, hd, lp.origin_depth, lp.destination_depth)
        assert np.abs(level_matrix(rel, t) - truth).max() <= 1  # σ ≈ 0.03: P(any noise ≠ 0) is tiny


def test_release_is_reproducible_and_frames_are_labelled(states: Hierarchy) -> None:
    df = pd.DataFrame({"o": ["0101", "0203", "0203", "0301"], "d": ["0202", "0101", "0101", "0301"]})
    c = ODCounts.from_frame(df, states, origin="o", destination="d")
    a = od.release(c, "inftda", budget.zcdp(0.3), NoiseSource(9))
    b = od.release(c, "inftda", budget.zcdp(0.3), NoiseSource(9))
    for t in range(a.depth + 1):
        assert np.array_equal(a.values[t], b.values[t]) and np.array_equal(a.origins[t], b.origins[t])
        assert np.array_equal(a.destinations[t], b.destinations[t])
    f = a.frame(4)
    assert list(f.columns) == ["origin", "destination", "noisy_count"]
    assert set(f["origin"]) <= set(states.labels(2)) and set(f["destination"]) <= set(states.labels(2))
    assert int(f["noisy_count"].sum()) == 4
    g = a.to_frame()
    assert list(g.columns) == ["level", "origin", "destination", "noisy_count"]
    assert set(g["level"]) <= {"total>state", "state", "state>county", "county"}
    assert g.groupby("level")["noisy_count"].sum().to_dict() == {k: 4 for k in set(g["level"])}
    f1 = a.frame(1)
    assert set(f1["origin"]) == {"total"} and set(f1["destination"]) <= {"01", "02", "03"}
    assert a.matrix(2).sum() == 4 and a.total(0) == 4 and a.total(4) == 4
    progress = []
    od.release(c, "inftda", budget.zcdp(0.3), NoiseSource(1), progress=lambda f, msg: progress.append(f))
    assert progress[-1] == 1.0 and all(x <= y for x, y in itertools.pairwise(progress))


def test_unbounded_root_is_noised_and_clamped_at_zero(states: Hierarchy) -> None:
    """Spec §2.3, pitfall 9: ñ = max(n + Z, 0).  With tiny ρ the noise dwarfs n = 3: some
    seeds give ñ = 0 (then nothing is released below, without error), others ñ ≠ n."""
    df = pd.DataFrame({"o": ["0101", "0202", "0301"], "d": ["0102", "0101", "0301"]})
    c = ODCounts.from_frame(df, states, origin="o", destination="d")
    roots = []
    for seed in range(16):
        rel = od.release(c, "inftda", budget.zcdp(1e-6), NoiseSource(seed), neighbour="unbounded")
        assert rel.public_total is None and rel.consistent
        check_tree_release(rel)
        root = rel.values[0].tolist()
        roots.append(root[0] if root else 0)
        if not root:
            assert all(v.size == 0 for v in rel.values)
    assert min(roots) == 0  # P(Z ≤ −3) ≈ 1/2 per seed
    assert any(r > 3 for r in roots)  # and the noise is not one-sided


def test_root_released_as_zero_returns_empty_levels(states: Hierarchy) -> None:
    """c = 0 at the root (pitfall 8): no division by zero, no further draws, empty levels."""
    df = pd.DataFrame({"o": ["0101"] * 5, "d": ["0102"] * 5})
    c = ODCounts.from_frame(df, states, origin="o", destination="d")

    class RootToZero(Recorder):
        def discrete_gaussian(self, sigma, size):  # type: ignore[override]
            self.calls.append(("discrete_gaussian", sigma, int(size)))
            return np.full(int(size), -1000, dtype=np.int64)

    src = RootToZero(0)
    rel = od.release(c, "inftda", budget.zcdp(0.1), src, neighbour="unbounded")
    assert [n for _, _, n in src.calls] == [1]
    assert all(v.size == 0 and v.dtype == np.int64 for v in rel.values) and rel.consistent
    assert rel.details["noised_cells"] == 0
    assert len(rel.to_frame()) == 0 and rel.matrix(4).sum() == 0
    # bounded data with no trips at all: the public total 0 releases nothing either
    zero = ODCounts.from_frame(pd.DataFrame({"o": ["0101"], "d": ["0102"], "n": [0]}), states,
                                  origin="o", destination="d", count="n")
    assert zero.total == 0 and zero.n_pairs == 0
    rel = od.release(zero, "tda_l2", budget.zcdp(0.1), NoDraw(0))
    assert all(v.size == 0 for v in rel.values) and rel.public_total == 0


# ---------------------------------------------------------------------------------------------
# 5. public child lists, zeros included (pitfall 1)
# ---------------------------------------------------------------------------------------------


def test_zero_cells_are_noised_and_noised_cells_follow_public_children() -> None:
    h = tree_h([3, 3])
    leaf = h.labels(2)
    df = pd.DataFrame({"o": [leaf[0]] * 1000, "d": [leaf[4]] * 1000})
    c = ODCounts.from_frame(df, h, origin="o", destination="d")
    false_pos = 0
    for orient in ("destination", "origin"):
        for seed in range(6):
            src = Recorder(seed)
            rel = od.release(c, "inftda", budget.zcdp(0.002), src, orientation=orient)  # σ ≈ 45
            check_tree_release(rel, 1000)
            lv = tree_levels(2, orient)
            expected = []
            for t in range(1, rel.depth + 1):
                (po, pd_), (o, _d) = lv[t - 1], lv[t]
                if o > po:
                    expected.append(int(n_children(h, po)[rel.origins[t - 1]].sum()))
                else:
                    expected.append(int(n_children(h, pd_)[rel.destinations[t - 1]].sum()))
            assert [n for _, _, n in src.calls] == expected
            assert rel.details["noised_cells"] == sum(expected)
            for t, lp in enumerate(rel.plan.levels):
                truth = truth_matrix(df, h, h, lp.origin_depth, lp.destination_depth)
                false_pos += int(((level_matrix(rel, t) > 0) & (truth == 0)).sum())
    # only one pair has trips: a positive release anywhere else proves zero cells were noised
    assert false_pos > 0


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


@pytest.mark.parametrize("mechanism", ["inftda", "tda_l2"])
@pytest.mark.parametrize("orientation", ["destination", "origin"])
def test_noise_reaches_every_public_child(mechanism: str, orientation: str) -> None:
    """Scripted noise that keeps each noisy vector feasible (non-negative, summing to the parent),
    so both projections return it unchanged: the released levels 1 and 2 are then exactly
    truth + noise, zero-count children included.  (The noise of one parent's children is read
    in the public child order, the parents in the order of their released pairs.)  All 100 trips
    go from county A0.0 to county A2.1 of a 3 × 3 hierarchy."""
    h = tree_h([3, 3])
    df = pd.DataFrame({"o": ["A0.0"] * 100, "d": ["A2.1"] * 100})
    c = ODCounts.from_frame(df, h, origin="o", destination="d")
    # level 1: the 3 states (destinations, or origins in the origin tree), truth (0, 0, 100) or (100, 0, 0)
    truth1 = np.array([0, 0, 100]) if orientation == "destination" else np.array([100, 0, 0])
    noise1 = np.array([7, 4, -11]) if orientation == "destination" else np.array([-11, 7, 4])
    lvl1 = truth1 + noise1
    # level 2 (state × state): children of every level-1 pair, in state order; each segment sums to its parent
    noise2 = {0: [2, 5, 0], 1: [0, 1, 3], 2: [-20, 6, 3]} if orientation == "destination" else \
        {0: [3, 6, -20], 1: [2, 5, 0], 2: [0, 1, 3]}
    src = Scripted([noise1.tolist(), sum((noise2[k] for k in range(3)), [])])
    rel = od.release(c, mechanism, budget.zcdp(0.1), src, orientation=orientation, tiebreak="index")
    check_tree_release(rel, 100)
    assert src.sizes[:2] == [3, 9]
    m1 = level_matrix(rel, 1).ravel()
    assert m1.tolist() == lvl1.tolist()
    t2 = truth_matrix(df, h, h, 1, 1)
    expect2 = t2.copy()
    for k in range(3):  # k: the level-1 area; its children are the states on the other side
        if orientation == "destination":
            expect2[:, k] += np.array(noise2[k])
        else:
            expect2[k, :] += np.array(noise2[k])
    assert (expect2 >= 0).all() and np.array_equal(level_matrix(rel, 2), expect2)
    assert (level_matrix(rel, 2)[t2 == 0] > 0).sum() >= 6  # zero cells carry their noise


@pytest.mark.parametrize("orientation", ["destination", "origin"])
def test_zeroing_order_is_applied(orientation: str) -> None:
    """Level-1 noise (3, 1, 2) on truth (0, 0, 100): x = (3, 1, 102) must lose 6; IntOpt
    ascending zeroes the small cells, descending takes from the largest first."""
    h = tree_h([3, 3])
    df = pd.DataFrame({"o": ["A2.0"] * 100, "d": ["A2.1"] * 100})
    c = ODCounts.from_frame(df, h, origin="o", destination="d")
    x = np.array([3, 1, 102])
    outs = {}
    for order in ("ascending", "descending"):
        rel = od.release(c, "inftda", budget.zcdp(0.1), Scripted([[3, 1, 2]]), orientation=orientation,
                         order=order, tiebreak="index")
        expect = topdown_opt.intopt(x, 100, order=order)
        assert level_matrix(rel, 1).ravel().tolist() == expect.tolist()
        assert rel.plan.order == order
        outs[order] = expect.tolist()
    assert outs == {"ascending": [0, 0, 100], "descending": [1, 0, 99]}


@pytest.mark.parametrize("mechanism", ["inftda", "tda_l2", "tda_linf_milp"])
@pytest.mark.parametrize("orientation", ["destination", "origin"])
def test_release_replays_algorithm_1(mechanism: str, orientation: str) -> None:
    """Every node of the release is the projection of (truth + its recorded noise) over the
    public children of a surviving parent: IntOpt exactly (index ties, both orders), the exact L2
    rounding exactly, the MILP baseline at the optimal L∞ distance α*.  Different origin and
    destination hierarchies, a copy level, unbounded (noised total) and bounded."""
    rng = np.random.default_rng(21)
    ho = tree_h([3, [1, 4, 2], [2, 1, 3, 1, 2, 2, 1]], "O")
    hd = tree_h([2, [3, 1], [1, 2, 2, 3]], "D")
    df = random_trips(rng, ho, hd, 300)
    c = ODCounts.from_frame(df, ho, hd, origin="o", destination="d")
    n_segments = 0
    for neighbour, order, cost in (("bounded", "ascending", budget.zcdp(0.2)),
                                   ("unbounded", "descending", budget.pure(1.0))):
        src = Recorder(17)
        rel = od.release(c, mechanism, cost, src, neighbour=neighbour, orientation=orientation, order=order,
                         tiebreak="index")
        check_tree_release(rel, 300 if neighbour == "bounded" else None)
        truth = truths_of(c, rel)
        assert np.array_equal(truth[rel.depth], truth_matrix(df, ho, hd, 3, 3))
        for _t, x, cc, y in replay(rel, truth, src.outputs):
            n_segments += 1
            assert int(y.sum()) == cc and (y >= 0).all()
            if mechanism == "inftda":
                assert y.tolist() == topdown_opt.intopt(x, cc, order=order).tolist(), (x, cc)
            elif mechanism == "tda_l2":
                assert y.tolist() == topdown_opt.l2_round(x, cc).tolist(), (x, cc)
            else:
                assert int(np.abs(y - x).max()) == topdown_opt.linf_alpha(x, cc), (x, cc, y)
        assert sum(int(np.asarray(z).size) for z in src.outputs) == rel.details["noised_cells"] + (
            1 if rel.plan.levels[0].measured else 0)
    assert n_segments > 20


def test_milp_baseline_limit_is_checked_before_spending(monkeypatch: pytest.MonkeyPatch) -> None:
    h = tree_h([3, 2])
    rng = np.random.default_rng(4)
    df = pd.DataFrame({"o": rng.choice(h.labels(2), 600), "d": rng.choice(h.labels(2), 600)})
    c = ODCounts.from_frame(df, h, origin="o", destination="d")
    monkeypatch.setattr(od, "MILP_MAX_SUBPROBLEMS", 2)  # level 2 has 3 surviving parents here
    led = Ledger(budget.zcdp(1.0))
    with pytest.raises(ParameterError, match="solver calls"):
        pipeline.release_od(c, "tda_linf_milp", budget.zcdp(0.5), led, noise=NoiseSource(0))
    assert led.spent == 0 and not led.entries, "budget charged, but no release was returned"


# ---------------------------------------------------------------------------------------------
# 6. statistics: RMSE ≈ √V_ℓ and the bound B_ℓ(0.05) (spec §9.5, §6.2, §3.2)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dense_tree() -> tuple[Hierarchy, pd.DataFrame, ODCounts]:
    """b = 5, g = 2 (T = 4), Poisson(2000) flows on all 625 finest pairs."""
    h = tree_h([5, 5])
    rng = np.random.default_rng(2000)
    leaf = h.labels(2)
    n_leaf = leaf.size
    flows = pd.DataFrame({"o": np.repeat(leaf, n_leaf), "d": np.tile(leaf, n_leaf),
                          "n": rng.poisson(2000, n_leaf * n_leaf)})
    return h, flows, ODCounts.from_frame(flows, h, origin="o", destination="d", count="n")


@pytest.mark.parametrize(("mechanism", "cost", "neighbour"), [
    ("inftda", budget.zcdp(0.05), "bounded"),  # the spec's §9.5 setting
    ("inftda", budget.pure(0.5), "bounded"),
    ("inftda", budget.zcdp(0.05), "unbounded"),
    ("tda_l2", budget.zcdp(0.05), "bounded"),
], ids=["inftda-rho-bounded", "inftda-pure-bounded", "inftda-rho-unbounded", "tda_l2-rho-bounded"])
def test_rmse_matches_the_plan_and_the_bound_holds(dense_tree, mechanism, cost, neighbour) -> None:
    """Dense tree b = 5, T = 4, Poisson(2000) leaves, ρ = 0.05 (spec §9.5), R = 400 seeded runs.

    Per level the RMSE over all cells and runs must be within ±10 % of the plan's ``sd`` (√V_ℓ,
    §6.2 item 3).  Sampling error: a level of N cells under P parents has N − P free errors per
    run (children sum to their parent), so the relative SE of the RMSE is about
    √((κ − 1)/(4·(N − P)·R)) with κ the kurtosis of the noise (3 Gaussian, 6 Laplace): at most
    1.8 % (Gaussian) or 2.8 % (Laplace, level 1: 4 free errors per run), so the 10 % band is at
    least 3.5 SE wide and a wrong σ (the artefact's √2, or T/ρ with m > 1) fails.  The
    empirical SE (spread of the per-run MSE) must agree with that within a factor 2.  A noised
    total (unbounded) is one cell per run: tolerance 4 SE (≈ 14 %).  The maximum error may
    exceed B_ℓ(0.05) (InfTDA only) in at most 5 % of runs: the number of exceedances must not
    pass the 0.999 quantile of Binomial(R, 0.05).
    """
    h, flows, c = dense_tree
    R = 400
    p = od.plan(h, h, mechanism, cost, neighbour=neighbour)
    T = p.depth
    truths = [truth_matrix(flows, h, h, lp.origin_depth, lp.destination_depth, n_col="n") for lp in p.levels]
    mse = np.zeros((R, T + 1))
    mx = np.zeros((R, T + 1))
    for r in range(R):
        rel = od.release(c, mechanism, cost, NoiseSource(10_000 + r), neighbour=neighbour)
        for t in range(T + 1):
            e = (level_matrix(rel, t) - truths[t]).astype(float)
            mse[r, t] = np.mean(e * e)
            mx[r, t] = np.abs(e).max()
    if neighbour == "bounded":
        assert (mx[:, 0] == 0).all()  # the public total is exact
    kurtosis = 6.0 if cost.definition == "pure" else 3.0
    q = binom.ppf(0.999, R, 0.05)
    for t in range(0 if p.levels[0].measured else 1, T + 1):
        lp = p.levels[t]
        free = lp.pairs - (p.levels[t - 1].pairs if t else 0)
        se = math.sqrt((kurtosis - 1) / (4 * free * R))
        tol = 4 * se if t == 0 else 0.10
        assert 3.5 * se <= tol
        se_emp = mse[:, t].std(ddof=1) / math.sqrt(R) / mse[:, t].mean() / 2
        assert 0.5 * se <= se_emp <= 2 * se, (t, se_emp, se)
        rmse = math.sqrt(mse[:, t].mean())
        assert abs(rmse / lp.sd - 1) <= tol, (t, rmse, lp.sd)
        if mechanism == "inftda":
            assert (mx[:, t] > lp.bound).sum() <= q, (t, mx[:, t].max(), lp.bound)
        else:
            assert math.isnan(lp.bound)
        # the typical maximum √V·√(2 ln N) is of the right size
        assert 0.5 * lp.max_abs <= mx[:, t].mean() <= 2 * lp.max_abs, (t, mx[:, t].mean(), lp.max_abs)


# ---------------------------------------------------------------------------------------------
# 7. regression against the paper's magnitudes (spec §9.6)
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_binary_complete_regression() -> None:
    """Binary tree, 8 levels (T = 16), complete Pareto flows, ε = 1, δ = 1e-8 (classic Lemma 3),
    InfTDA, mean max error over 10 runs: leaves 103 ± 15, L8 87 ± 12, L1 in 12–35.  About 3 s."""
    areas, flows = synthetic_od_tree("binary", "complete", seed=42)
    h = Hierarchy.from_frame(areas, list(areas.columns))
    c = ODCounts.from_frame(flows, h, origin="origin", destination="destination", count="count")
    assert c.n_pairs == 65_536
    rho = classic_rho(1.0)
    errs = []
    for seed in range(10):
        rel = od.release(c, "inftda", budget.zcdp(rho), NoiseSource(seed))
        assert rel.depth == 16 and rel.values[0].tolist() == [c.total]
        errs.append([r["max_abs_error"] for r in empirical_errors(rel, c)])
    mean = np.mean(errs, axis=0)
    assert mean[0] == 0
    assert 103 - 15 <= mean[16] <= 103 + 15, mean[16]
    assert 87 - 12 <= mean[8] <= 87 + 12, mean[8]
    assert 12 <= mean[1] <= 35, mean[1]


# ---------------------------------------------------------------------------------------------
# 8. IntOpt on O/D-like segments against scipy milp
# ---------------------------------------------------------------------------------------------


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


@pytest.mark.slow
def test_intopt_segments_against_milp() -> None:
    """2,000 random O/D-like segments (b = 1..10 children, sparse true counts plus small integer
    noise: many ties and negatives; c = 0..30 with c = 0 in about a fifth).  The objective of
    every IntOpt segment equals milp's α*, and y is a non-negative integer vector summing to c.
    milp takes about 5 ms per call here (≈ 10 s in all)."""
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
        a = milp_alpha(x, c)
        assert alpha_seg[i] == a, (x, c)
        for y_all in ys.values():
            y = y_all[offsets[i]:offsets[i + 1]]
            assert y.dtype == np.int64 and int(y.sum()) == c and (y >= 0).all(), (x, c, y)
            assert int(np.abs(y - x).max()) == a, (x, c, y)


# ---------------------------------------------------------------------------------------------
# 9. ODCounts and the public structure
# ---------------------------------------------------------------------------------------------


def test_hierarchy_from_prefixes(states: Hierarchy) -> None:
    assert states.sizes == [1, 3, 6] and states.levels == ("state", "county")
    assert states.codes(1).tolist() == ["01", "02", "03"]
    assert n_children(states, 1).tolist() == [2, 3, 1]
    h = hierarchy_from_prefixes(pd.Series(["440070101001000", "440070101001001", "450010101001000"]),
                                   [2, 5, 11, 12, 15])
    assert h.sizes == [1, 2, 2, 2, 2, 3] and h.levels[0] == "level1"
    for bad in ([2, 2], [4, 2], [], [0, 4]):
        with pytest.raises(ParameterError, match="increasing"):
            hierarchy_from_prefixes(["0101"], bad)
    with pytest.raises(ParameterError, match="one level name per prefix"):
        hierarchy_from_prefixes(["0101"], [2, 4], ["state"])
    with pytest.raises(InputError, match=r"rows 4, 5.*4 characters"):
        hierarchy_from_prefixes(["0101", "0102", "101", "10203"], [2, 4])
    with pytest.raises(InputError, match="4 characters"):
        hierarchy_from_prefixes([101, 102], [2, 4])  # leading zeros lost


def test_counts_from_frame_and_lookup(states: Hierarchy) -> None:
    df = pd.DataFrame({"o": ["0101", "0203", "0203", "0301", "0101"],
                       "d": ["0202", "0101", "0101", "0301", "0202"]})
    c = ODCounts.from_frame(df, states, origin="o", destination="d")
    assert c.total == 5 and c.n_pairs == 3 and c.max_trips == 1 and c.dropped_trips == 0
    lab = states.labels(2)
    got = {(lab[o], lab[d]): int(n) for o, d, n in zip(c.origin, c.destination, c.count, strict=True)}
    assert got == {("0101", "0202"): 2, ("0203", "0101"): 2, ("0301", "0301"): 1}
    assert c.count.dtype == np.int64 and (c.count > 0).all()
    keys = c.origin * states.n_leaves + c.destination
    assert (np.diff(keys) > 0).all()  # sorted, unique
    # level (1, 1): state × state
    k, v = c.level(1, 1)
    assert dict(zip(k.tolist(), v.tolist(), strict=True)) == {0 * 3 + 1: 2, 1 * 3 + 0: 2, 2 * 3 + 2: 1}
    assert c.level(0, 0)[1].tolist() == [5]
    assert c.lookup(1, 1, np.array([0, 0, 1, 2]), np.array([1, 0, 0, 2])).tolist() == [2, 0, 2, 1]
    # aggregated input with a count column; zero counts are dropped
    agg = pd.DataFrame({"o": ["0101", "0203", "0301"], "d": ["0202", "0101", "0301"], "n": [2, 0, 7.0]})
    ca = ODCounts.from_frame(agg, states, origin="o", destination="d", count="n")
    assert ca.total == 9 and ca.n_pairs == 2


def test_counts_unknown_codes_name_the_rows(states: Hierarchy) -> None:
    df = pd.DataFrame({"o": ["0101", "0999", "0102", "0999"], "d": ["0101", "0102", "0102", "0101"]})
    with pytest.raises(InputError, match=r"2 rows.*rows 3, 5.*origin.*0999"):
        ODCounts.from_frame(df, states, origin="o", destination="d")
    df = pd.DataFrame({"o": ["0101", "0102"], "d": ["0101", "02"]})
    with pytest.raises(InputError, match=r"row 3.*destination.*02"):
        ODCounts.from_frame(df, states, origin="o", destination="d")


def test_counts_path_labels_and_geoids() -> None:
    """Within-parent codes: trips may give the a/b label or the joined code (GEOID)."""
    areas = pd.DataFrame({"state": ["01", "01", "02"], "county": ["001", "003", "001"]})
    h = Hierarchy.from_frame(areas, ["state", "county"])
    df = pd.DataFrame({"o": ["01/001", "02/001"], "d": ["01003", "01001"]})
    c = ODCounts.from_frame(df, h, origin="o", destination="d")
    lab = h.labels(2)
    assert sorted((lab[o], lab[d]) for o, d in zip(c.origin, c.destination, strict=True)) == [
        ("01/001", "01/003"), ("02/001", "01/001")]


@pytest.mark.parametrize("bad", [[1, -1, 2], [1, 1.5, 2], [1, np.nan, 2], [1, "x", 2]])
def test_counts_must_be_whole_non_negative(states: Hierarchy, bad: list) -> None:
    df = pd.DataFrame({"o": ["0101"] * 3, "d": ["0102"] * 3, "n": bad})
    with pytest.raises(InputError, match=r"count column 'n'.*row 3"):
        ODCounts.from_frame(df, states, origin="o", destination="d", count="n")


def test_person_cap(states: Hierarchy) -> None:
    """m caps each person; distinct de-duplicates a person's repeated pair first."""
    trips = [("p", "0101", "0102")] * 3 + [("p", "0201", "0202"), ("p", "0301", "0301"),  # p: 5 trips
             ("q", "0101", "0102"), ("q", "0101", "0102"),  # q: the same pair twice
             ("r", "0203", "0101")]  # r: one trip
    df = pd.DataFrame(trips, columns=["u", "o", "d"])
    lab = states.labels(2)
    for seed in range(8):
        c = ODCounts.from_frame(df, states, origin="o", destination="d", user="u", max_trips=2,
                                   noise=NoiseSource(seed))
        assert c.max_trips == 2 and c.distinct
        # p keeps 2 of its 3 distinct pairs, q keeps its pair once, r its trip
        assert c.total == 2 + 1 + 1 and c.dropped_trips == 8 - 4
        got = {(lab[o], lab[d]): int(n) for o, d, n in zip(c.origin, c.destination, c.count, strict=True)}
        assert got[("0203", "0101")] == 1 and got[("0101", "0102")] in (1, 2)
        assert max(got.values()) <= 2  # a pair holds at most one trip of p and one of q
        r = ODCounts.from_frame(df, states, origin="o", destination="d", user="u", max_trips=2,
                                   distinct=False, noise=NoiseSource(seed))
        assert not r.distinct and r.total == 2 + 2 + 1 and r.dropped_trips == 3
        got = {(lab[o], lab[d]): int(n) for o, d, n in zip(r.origin, r.destination, r.count, strict=True)}
        assert got[("0101", "0102")] >= 2  # q's repeated pair counts twice
    # which trips p keeps follows the documented rule: the smallest md5(person · origin ·
    # destination), whatever the row order or noise seed (so DuckDB and Spark keep the same)
    import hashlib

    pairs = sorted({(o, d) for _, o, d in trips[:5]}, key=lambda od_: hashlib.md5(
        "\x1f".join(("p", *od_)).encode()).hexdigest())
    expect: dict[tuple[str, str], int] = {}
    left = 2
    for pr in pairs:  # not distinct: each pair's trips in md5 order until 2 are taken
        take = min(left, sum(1 for t in trips[:5] if (t[1], t[2]) == pr))
        if take:
            expect[pr] = take
        left -= take
    for seed in range(4):
        shuffled = df[df.u == "p"].sample(frac=1.0, random_state=seed)
        c = ODCounts.from_frame(shuffled, states, origin="o", destination="d", user="u", max_trips=2,
                                   distinct=False, noise=NoiseSource(seed))
        assert c.total == 2 and c.dropped_trips == 3
        got = {(lab[o], lab[d]): int(n) for o, d, n in zip(c.origin, c.destination, c.count, strict=True)}
        assert got == expect
    one = ODCounts.from_frame(df, states, origin="o", destination="d", user="u", noise=NoiseSource(0))
    assert one.total == 3 and one.dropped_trips == 5  # m = 1: one trip per person


def test_counts_refuse_bad_options(states: Hierarchy) -> None:
    df = pd.DataFrame({"o": ["0101"], "d": ["0102"], "n": [3], "u": ["a"]})
    with pytest.raises(ParameterError, match="person id"):
        ODCounts.from_frame(df, states, origin="o", destination="d", max_trips=2)
    with pytest.raises(ParameterError, match="either a count column"):
        ODCounts.from_frame(df, states, origin="o", destination="d", count="n", user="u")
    with pytest.raises(ParameterError, match="at least 1"):
        ODCounts.from_frame(df, states, origin="o", destination="d", user="u", max_trips=0)
    with pytest.raises(InputError, match="no origin column 'x'"):
        ODCounts.from_frame(df, states, origin="x", destination="d")
    with pytest.raises(InputError, match="empty"):
        ODCounts.from_frame(df.iloc[:0], states, origin="o", destination="d")
    with pytest.raises(InputError, match="person id column 'u' is empty in row 3"):
        ODCounts.from_frame(pd.DataFrame({"o": ["0101"] * 2, "d": ["0102"] * 2, "u": ["a", None]}), states,
                               origin="o", destination="d", user="u")
    with pytest.raises(ParameterError, match="same number of levels"):
        ODCounts.from_frame(df, states, tree_h([2]), origin="o", destination="d")


# ---------------------------------------------------------------------------------------------
# 10. baselines: VanillaGauss and SH
# ---------------------------------------------------------------------------------------------


def test_vanilla_gauss_refuses_large_domains(states: Hierarchy, monkeypatch: pytest.MonkeyPatch) -> None:
    df = pd.DataFrame({"o": ["0101"], "d": ["0102"]})
    c = ODCounts.from_frame(df, states, origin="o", destination="d")
    monkeypatch.setattr(od, "VANILLA_MAX_CELLS", 35)  # 36 finest pairs
    with pytest.raises(ParameterError, match="36"):
        od.release(c, "vanilla_gauss", budget.zcdp(0.5), NoDraw(0))
    led = Ledger(budget.zcdp(1.0))
    with pytest.raises(ParameterError, match="36"):
        pipeline.release_od(c, "vanilla_gauss", budget.zcdp(0.5), led, noise=NoDraw(0))
    assert led.spent == 0 and not led.entries
    monkeypatch.setattr(od, "VANILLA_MAX_CELLS", 36)
    rel = od.release(c, "vanilla_gauss", budget.zcdp(0.5), NoiseSource(0))
    assert rel.details["noised_cells"] == 36


@pytest.mark.parametrize("orientation", ["destination", "origin"])
def test_vanilla_gauss_sums_its_leaves_and_has_sigma_noise(orientation: str) -> None:
    """Coarse levels are exact sums of the noisy leaves (negatives kept, exact zeros dropped);
    the leaf noise has the discrete Gaussian variance of σ = GS₂/√(2ρ).  With N = 160,000 leaf
    cells the sample variance has relative SE √((κ − 1)/N) ≈ √(2/N) = 0.35 %; tolerance 5 SE."""
    h = tree_h([20, 20])  # 400 leaves, 160,000 pairs
    rng = np.random.default_rng(3)
    df = random_trips(rng, h, h, 3000)
    c = ODCounts.from_frame(df, h, origin="o", destination="d")
    rho = 0.02
    rel = od.release(c, "vanilla_gauss", budget.zcdp(rho), NoiseSource(4), orientation=orientation)
    p = rel.plan
    T = p.depth
    assert p.levels[T].scale == pytest.approx(math.sqrt(2) / math.sqrt(2 * rho), rel=1e-12)
    assert [lv.measured for lv in p.levels] == [False] * T + [True]
    assert rel.public_total is None and rel.consistent
    check_tree_release(rel, positive=False)  # every level is the exact sum of the leaves
    assert (rel.values[T] < 0).any()  # negative leaves are kept (unbiased sums, pitfall 13)
    noise = (level_matrix(rel, T) - truth_matrix(df, h, h, 2, 2)).ravel().astype(float)
    N = noise.size
    var = discrete_gaussian_variance(p.levels[T].scale)
    assert abs(noise.mean()) <= 5 * math.sqrt(var / N)
    assert abs(noise.var() / var - 1) <= 5 * math.sqrt(2 / N)
    assert rel.details["noised_cells"] == N
    # the plan's SD of a coarse cell: √(N_T/N_ℓ) leaf SDs (equal-sized nodes here)
    for t in range(T + 1):
        assert p.levels[t].sd == pytest.approx(math.sqrt(var * p.levels[T].pairs / p.levels[t].pairs), rel=1e-12)


@pytest.mark.parametrize("neighbour", ["bounded", "unbounded"])
def test_sh_baseline(neighbour: str) -> None:
    """SH: discrete Laplace of scale GS₁/ε on the observed finest pairs only; pairs below
    τ = 1 + scale·ln(k/δ) (bounded: scale 2/ε, k = 2, i.e. τ = 1 + (2/ε) ln(2/δ)) are dropped;
    no false positives at any level."""
    h = tree_h([4, 4])
    rng = np.random.default_rng(8)
    df = random_trips(rng, h, h, 3000)
    c = ODCounts.from_frame(df, h, origin="o", destination="d")
    eps, delta = 1.0, 1e-6
    scale = 2 / eps if neighbour == "bounded" else 1 / eps
    tau = 1 + scale * math.log((2 if neighbour == "bounded" else 1) / delta)
    observed = set(zip(c.origin.tolist(), c.destination.tolist(), strict=True))
    released = 0
    for seed in range(5):
        src = Recorder(seed)
        rel = od.release(c, "sh", None, src, approx=(eps, delta), neighbour=neighbour)
        assert rel.plan.sh_threshold == pytest.approx(tau, rel=1e-12)
        assert rel.plan.cost is None and rel.plan.approx == (eps, delta)
        assert [(k, n) for k, _, n in src.calls] == [("discrete_laplace", c.n_pairs)]
        assert src.calls[0][1] == Fraction(scale)
        assert "noised_cells" not in rel.details  # the number of observed pairs is confidential
        T = rel.depth
        leaves = set(zip(rel.origins[T].tolist(), rel.destinations[T].tolist(), strict=True))
        assert leaves <= observed
        assert (rel.values[T] >= tau).all()
        released += len(leaves)
        check_tree_release(rel)
        for t, lp in enumerate(rel.plan.levels):
            truth = truth_matrix(df, h, h, lp.origin_depth, lp.destination_depth)
            assert not ((level_matrix(rel, t) > 0) & (truth == 0)).any()
        # a pair of one or two people survives with probability ≤ e^{1/scale}·δ/k: never here
        idx = np.searchsorted(c.origin * h.n_leaves + c.destination,
                              rel.origins[T] * h.n_leaves + rel.destinations[T])
        assert (c.count[idx] > 2).all()
    assert released > 0 and (c.count <= 2).sum() > 20


def test_sh_is_refused_by_the_pipeline(states: Hierarchy) -> None:
    df = pd.DataFrame({"o": ["0101"], "d": ["0102"]})
    c = ODCounts.from_frame(df, states, origin="o", destination="d")
    led = Ledger(budget.zcdp(1.0))
    with pytest.raises(ParameterError, match=r"\(ε, δ\)"):
        pipeline.release_od(c, "sh", budget.zcdp(0.1), led, noise=NoDraw(0))
    assert led.spent == 0 and not led.entries


# ---------------------------------------------------------------------------------------------
# 11. pipeline.release_od: validate, charge, then draw
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def small_counts(states: Hierarchy) -> ODCounts:
    df = pd.DataFrame({"o": ["0101", "0203", "0203", "0301"] * 5, "d": ["0202", "0101", "0102", "0301"] * 5})
    return ODCounts.from_frame(df, states, origin="o", destination="d")


@pytest.mark.parametrize("opts", [
    {"orientation": "sideways"}, {"order": "random"}, {"split": "sideways"}, {"tiebreak": "coin"},
    {"neighbour": "replace"}, {"split": "custom", "weights": [1.0]}, {"seed": 1}, {"approx": (1.0, 1e-6)},
])
def test_pipeline_validates_before_spending(small_counts: ODCounts, opts: dict) -> None:
    led = Ledger(budget.zcdp(1.0))
    with pytest.raises(ParameterError):
        pipeline.release_od(small_counts, "inftda", budget.zcdp(0.1), led, noise=NoDraw(0), **opts)
    assert led.spent == 0 and not led.entries
    with pytest.raises(ParameterError):
        pipeline.release_od(small_counts, "bogus", budget.zcdp(0.1), led, noise=NoDraw(0))
    assert led.spent == 0 and not led.entries


@pytest.mark.parametrize("mechanism", ["inftda", "tda_l2", "tda_linf_milp", "vanilla_gauss"])
def test_pipeline_charges_before_any_noise(small_counts: ODCounts, mechanism: str) -> None:
    led = Ledger(budget.zcdp(1.0))
    src = LedgerWatcher(led, 0.3)
    seen = []
    rel = pipeline.release_od(small_counts, mechanism, budget.zcdp(0.3), led, noise=src, orientation="origin",
                              split="geometric", progress=lambda f, msg: seen.append(f))
    assert not src.first  # noise was drawn, after the charge
    assert seen and isinstance(rel, od.ODRelease)
    (entry,) = led.entries
    assert entry.details["kind"] == "od" and entry.details["mechanism"] == mechanism
    assert entry.details["orientation"] == "origin" and entry.details["split"] == rel.plan.split
    assert [lv["share"] for lv in entry.details["levels"]] == [lv.share for lv in rel.plan.levels]
    assert sum(Fraction(lv["share"]) for lv in entry.details["levels"]) <= Fraction(0.3)
    assert rel.consistent


def test_pipeline_pure_cost_on_a_zcdp_ledger_and_exhaustion(small_counts: ODCounts) -> None:
    led = Ledger(budget.zcdp(0.5))
    src = LedgerWatcher(led, 0.5 ** 2 / 2)
    rel = pipeline.release_od(small_counts, "inftda", budget.pure(0.5), led, noise=src)
    assert rel.plan.cost == budget.pure(0.5) and not src.first
    assert led.spent == pytest.approx(0.125)
    pipeline.release_od(small_counts, "inftda", budget.zcdp(0.375), led, noise=NoiseSource(1))
    with pytest.raises(BudgetError):
        pipeline.release_od(small_counts, "inftda", budget.zcdp(0.01), led, noise=NoDraw(0))
    assert led.spent == pytest.approx(0.5) and len(led.entries) == 2
    pure_led = Ledger(budget.pure(1.0))
    with pytest.raises(BudgetError, match="zCDP"):
        pipeline.release_od(small_counts, "inftda", budget.zcdp(0.01), pure_led, noise=NoDraw(0))
    assert pure_led.spent == 0 and not pure_led.entries


# ---------------------------------------------------------------------------------------------
# 12. empirical_errors on a hand-made release
# ---------------------------------------------------------------------------------------------


def test_empirical_errors_hand_computed() -> None:
    """States A = {a1, a2}, B = {b1}.  Truth: a1→a2: 5, b1→a1: 3.  Release (leaves): a1→a2: 7,
    a2→b1: 2 (a false positive); b1→a1 is missing (a false negative)."""
    h = hierarchy_from_prefixes(["A1", "A2", "B1"], [1, 2], ["state", "area"])
    truth = pd.DataFrame({"o": ["A1"] * 5 + ["B1"] * 3, "d": ["A2"] * 5 + ["A1"] * 3})
    c = ODCounts.from_frame(truth, h, origin="o", destination="d")
    p = od.plan(h, h, "vanilla_gauss", budget.zcdp(1.0))
    leaf = {(0, 1): 7, (1, 2): 2}  # (a1, a2), (a2, b1)
    outs = []
    for lp in p.levels:
        agg: dict[tuple[int, int], int] = {}
        for (o, d), v in leaf.items():
            k = (int(up(h, 2, lp.origin_depth)[o]), int(up(h, 2, lp.destination_depth)[d]))
            agg[k] = agg.get(k, 0) + v
        ks = sorted(agg, key=lambda k: k[0] * h.sizes[lp.destination_depth] + k[1])
        outs.append((np.array([k[0] for k in ks], dtype=np.int64), np.array([k[1] for k in ks], dtype=np.int64),
                     np.array([agg[k] for k in ks], dtype=np.int64)))
    rel = od.ODRelease(h, h, p, tuple(x[0] for x in outs), tuple(x[1] for x in outs), tuple(x[2] for x in outs), None)
    rows = empirical_errors(rel, c)
    assert [r["level"] for r in rows] == ["total", "total>state", "state", "state>area", "area"]
    leaf_row = rows[4]
    assert leaf_row["possible_pairs"] == 9 and leaf_row["true_pairs"] == 2 and leaf_row["released_pairs"] == 2
    assert leaf_row["max_abs_error"] == 3.0  # |0 − 3| at b1→a1
    assert leaf_row["mean_abs_error"] == pytest.approx(7 / 3)  # (2 + 3 + 2) over the 3 pairs in the union
    assert leaf_row["mae_all_pairs"] == pytest.approx(7 / 9)
    assert leaf_row["rmse_all_pairs"] == pytest.approx(math.sqrt(17 / 9))
    assert leaf_row["false_positives"] == 1 and leaf_row["fdr_percent"] == pytest.approx(50.0)
    assert leaf_row["false_negatives"] == 1 and leaf_row["fnr_percent"] == pytest.approx(50.0)
    assert leaf_row["median_relative_error"] == pytest.approx(0.7)  # 2/5 and 3/3
    assert leaf_row["p95_relative_error"] == pytest.approx(0.4 + 0.95 * 0.6)
    state = rows[2]  # A→A: 5 vs 7, B→A: 3 vs 0, A→B: 0 vs 2
    assert (state["max_abs_error"], state["mean_abs_error"], state["mae_all_pairs"]) == (3.0, pytest.approx(7 / 3),
                                                                                         pytest.approx(7 / 4))
    assert state["fdr_percent"] == pytest.approx(50.0) and state["fnr_percent"] == pytest.approx(50.0)
    cross = rows[1]  # total→A: 8 vs 7, total→B: 0 vs 2
    assert cross["max_abs_error"] == 2.0 and cross["mean_abs_error"] == pytest.approx(1.5)
    assert cross["mae_all_pairs"] == pytest.approx(1.5) and cross["false_positives"] == 1
    assert cross["fdr_percent"] == pytest.approx(50.0) and cross["fnr_percent"] == 0.0
    assert cross["median_relative_error"] == pytest.approx(1 / 8)
    assert rows[0]["max_abs_error"] == 1.0  # 9 released vs 8 true
    # nothing released: the FDR is undefined (pitfall 12)
    nothing = tuple(np.zeros(0, np.int64) for _ in range(5))
    r = empirical_errors(od.ODRelease(h, h, p, nothing, nothing, nothing, None), c)[4]
    assert math.isnan(r["fdr_percent"]) and r["fnr_percent"] == 100.0 and r["released_pairs"] == 0
    other = hierarchy_from_prefixes(["A1", "A2", "B2"], [1, 2], ["state", "area"])
    with pytest.raises(InputError, match="another hierarchy"):
        empirical_errors(od.ODRelease(other, other, p, nothing, nothing, nothing, None), c)


def test_demo_od_releases_consistently() -> None:
    areas, flows, _ = demo_od(trips=5000)
    h = Hierarchy.from_frame(areas, ["region", "district", "zone"])
    c = ODCounts.from_frame(flows, h, origin="origin", destination="destination", count="count")
    assert c.total == 5000
    rel = od.release(c, "inftda", budget.zcdp(0.5), NoiseSource(0))
    check_tree_release(rel, 5000)
    rows = empirical_errors(rel, c)
    assert rows[0]["max_abs_error"] == 0 and all(r["max_abs_error"] >= 0 for r in rows)


def test_level_names_with_the_export_separator_are_refused() -> None:
    """'>' separates origin and destination levels in exports (state>county): a level called
    'p>q' would make two different tables share one name."""
    h = hierarchy_from_prefixes(["0101", "0102"], [2, 4], ["p", "p>q"])
    with pytest.raises(ParameterError, match="contains '>'"):
        od.plan(h, h, "inftda", budget.zcdp(0.5))


def test_counts_too_large_to_add_exactly_are_refused() -> None:
    h = hierarchy_from_prefixes(["0101", "0102"], [2, 4])
    df = pd.DataFrame({"o": ["0101", "0102"], "d": ["0102", "0101"], "n": [2.0**62, 2.0**62]})
    with pytest.raises(InputError, match="cannot be added exactly"):
        ODCounts.from_frame(df, h, origin="o", destination="d", count="n")
    df["n"] = [1e19, 1.0]
    with pytest.raises(InputError, match="row 2 alone"):
        ODCounts.from_frame(df, h, origin="o", destination="d", count="n")


def test_vanilla_limit_is_part_of_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The size limit is checked by plan(), so the app and the CLI refuse before the click."""
    h = hierarchy_from_prefixes(["0101", "0102", "0201"], [2, 4])
    monkeypatch.setattr(od, "VANILLA_MAX_CELLS", 8)
    with pytest.raises(ParameterError, match="VanillaGauss noises every possible finest pair"):
        od.plan(h, h, "vanilla_gauss", budget.zcdp(0.5))
    monkeypatch.setattr(od, "VANILLA_MAX_CELLS", 9)
    assert od.plan(h, h, "vanilla_gauss", budget.zcdp(0.5)).levels[-1].measured


def test_fingerprint_follows_the_trips_not_their_encoding() -> None:
    """The budget key: the same trips reordered, as count rows, with or without (renamed) person
    ids hash alike; one trip more does not."""
    h = hierarchy_from_prefixes(["0101", "0102", "0201"], [2, 4])
    rng = np.random.default_rng(5)
    codes = np.array(["0101", "0102", "0201"])
    trips = pd.DataFrame({"o": rng.choice(codes, 300), "d": rng.choice(codes, 300),
                          "who": rng.integers(0, 40, 300).astype(str)})
    base = ODCounts.from_frame(trips, h, origin="o", destination="d").fingerprint
    assert base
    same = [
        ODCounts.from_frame(trips.sample(frac=1, random_state=2), h, origin="o", destination="d"),
        ODCounts.from_frame(trips.groupby(["o", "d"]).size().rename("n").reset_index(), h,
                               origin="o", destination="d", count="n"),
        ODCounts.from_frame(trips, h, origin="o", destination="d", user="who", max_trips=2,
                               noise=NoiseSource(0)),
        ODCounts.from_frame(trips.assign(who="p" + trips["who"]), h, origin="o", destination="d", user="who",
                               max_trips=3, noise=NoiseSource(1)),
    ]
    assert all(c.fingerprint == base for c in same)
    more = pd.concat([trips, trips.iloc[:1]], ignore_index=True)
    assert ODCounts.from_frame(more, h, origin="o", destination="d").fingerprint != base


def test_milp_plan_with_only_the_total_measured() -> None:
    """One area, unbounded: only the total is measured (every other level is a copy level); the
    MILP size check must not fail on an empty list of measured levels (found by hypothesis)."""
    h = hierarchy_from_prefixes(["0101"], [2, 4])
    p = od.plan(h, h, "tda_linf_milp", budget.zcdp(0.5), neighbour="unbounded")
    assert [lv.measured for lv in p.levels] == [True] + [False] * 4
