"""The 95 % intervals of a hierarchy release.csv (ci95_low, ci95_high; also the level GeoJSONs): filled
where ``noisy_count ± 1.96 · noise_sd`` is a valid interval for the released values, empty with the
reason said where it is not.

The exact tree DP and the TopDown projections (L2, L∞) make the released values non-negative whole
numbers that add up, a projection that depends on the data: a large count among empty siblings is
pulled down by the positive noise the empty ones keep, and the exact DP's total moves with the clipped areas.  Hay,
the matrix mechanism, bottom-up and independent noise are linear in the noisy counts (unbiased) and
keep their intervals.  Where an area's value is one discrete noise draw (every measured level of
independent noise, bottom-up's finest level) the interval is ``value ± k``, k the exact 95 % quantile of
that noise (since 2026-11-30: ``± 1.96·sd`` covered only ``|X| ≤ ⌊1.96·sd⌋``, 92.7-92.9 %); bottom-up's
coarser areas, sums of m finest draws, publish ``value ± k_m``, the exact 95 % quantile of that sum (h-busum:
``± 1.96·sd`` covered down to 78.6 %, benchmarks/results/bottom_up_sum_coverage.md); every other cell is
unchanged, byte for byte.  Measured over many settings in
benchmarks/interval_release_coverage.py (benchmarks/results/interval_release_coverage.md); here a
fixed seed per release and tolerances from the binomial distribution (one-sided, 0.1 %)."""

from __future__ import annotations

import hashlib
import io

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpcore import catalog
from dpcore.areas import export as X
from dpcore.areas.counts import HierarchyCounts
from dpcore.data.hierarchy import Hierarchy
from dpcore.privacy import budget
from dpcore.privacy.noise import NoiseSource

RUNS = 300
#: z of the two-sided normal 95 % interval, derived here independently of dpcore (SciPy's ndtri).
Z95 = float(-stats.norm.ppf(0.025))
EMPTIED = ("exact", "topdown_l2", "topdown_linf")
KEPT = ("hay", "matrix", "bottom_up", "independent")
#: release.csv of each kept mechanism on :func:`counts`, NoiseSource(7), as main wrote it before intervals
#: could be empty (sha256, first 16 hex digits): the same bytes.  Bottom-up and independent noise write
#: these bytes with their normal intervals (``single_draw_measured`` off) and :data:`EXACT_CSV` with the
#: exact ones.
KEPT_CSV = {
    ("hay", "pure"): "03ac0cf4cdd59aa3", ("hay", "zcdp"): "f825fafe29e76123",
    ("matrix", "pure"): "a95d693c2b492557", ("matrix", "zcdp"): "7f7328b55717b655",
    ("bottom_up", "pure"): "2b5870e948d43910", ("bottom_up", "zcdp"): "dc1dfb908af8d2a2",
    ("independent", "pure"): "d0ef18232e94aa01", ("independent", "zcdp"): "cad6a1e71c94d990",
}
#: release.csv of the single-draw mechanisms with the exact intervals (2026-11-30), made after checking that
#: only the interval cells of their single-draw levels differ from :data:`KEPT_CSV`'s bytes
#: (:func:`test_single_draw_levels_change_only_their_interval_cells`).
#: bottom_up re-pinned (h-busum, 2026-11-30) after its coarse levels (region, district, total) publish ± k_m, the
#: exact quantile of the sum of their m finest draws (was 0b4536d36e8305a3 / e6489842e0221dd6): only those
#: levels' interval cells changed (:func:`test_single_draw_levels_change_only_their_interval_cells`).
EXACT_CSV = {
    ("bottom_up", "pure"): "ac32798c906c4321", ("bottom_up", "zcdp"): "573b45432a548ee0",
    ("independent", "pure"): "a8706bfdb8ae5ef4", ("independent", "zcdp"): "d9e664ab1281693b",
}
SINGLE_DRAW = ("bottom_up", "independent")
OLD_TEXT = ("noise_sd = the analytic SD of the area's error; ci95_low/high (CSV and GeoJSON) = value ± 1.96 × "
            "noise_sd (a normal approximation, computed from public parameters only; clipped at 0 for "
            "non-negative mechanisms)")


@pytest.fixture(scope="module")
def counts() -> HierarchyCounts:
    """Region R1: one zone of 1,000 people among 15 empty zones; R2: 30 people in each of 16 zones."""
    rows = []
    for r, pops in (("R1", [1000] + [0] * 15), ("R2", [30] * 16)):
        for i, pop in enumerate(pops):
            rows.append({"region": r, "district": f"D{i // 8 + 1}", "zone": f"Z{i % 8 + 1}", "population": pop})
    df = pd.DataFrame(rows)
    levels = ["region", "district", "zone"]
    return HierarchyCounts.from_frame(df, Hierarchy.from_frame(df, levels), levels, "population")


def _lowest_hits(runs: int, coverage: float = 0.95) -> float:
    """The number of covering runs below which a true coverage of ``coverage`` is refused (0.1 %)."""
    return float(stats.binom.ppf(0.001, runs, coverage))


@pytest.mark.parametrize("mech", EMPTIED)
def test_projected_mechanisms_write_empty_interval_columns_and_say_why(counts: HierarchyCounts, mech: str) -> None:
    rel = catalog.get("hierarchy", mech).release_counts(counts, budget.zcdp(0.5), NoiseSource(7))
    assert not rel.has_intervals
    data = X.hierarchy_csv(rel)
    assert data.startswith(b"level,code,parent,noisy_count,noise_sd,ci95_low,ci95_high\n")  # columns kept
    table = pd.read_csv(io.BytesIO(data))
    assert table[["ci95_low", "ci95_high"]].isna().all().all()
    assert table["noise_sd"].notna().all()  # the analytic SD stays
    text = X.hierarchy_record(rel, None)["outputs"]["intervals"]
    assert text == X.no_interval_note(rel)
    assert text.startswith(f"Empty for this release: {rel.mechanism.title}")
    assert "estimates.csv" in text and "python -m dpcore interval" in text
    assert X.no_interval_line(rel).startswith("No 95 % interval is shown")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


@pytest.mark.parametrize("mech", KEPT)
@pytest.mark.parametrize("cost", [budget.pure(1.0), budget.zcdp(0.5)], ids=["pure", "zcdp"])
def test_linear_mechanisms_keep_their_intervals_byte_for_byte(counts: HierarchyCounts, mech: str, cost) -> None:
    rel = catalog.get("hierarchy", mech).release_counts(counts, cost, NoiseSource(7))
    assert rel.has_intervals and X.no_interval_note(rel) is None and X.no_interval_line(rel) is None
    data = X.hierarchy_csv(rel)
    assert _digest(data) == EXACT_CSV.get((mech, cost.definition), KEPT_CSV[(mech, cost.definition)])
    table = pd.read_csv(io.BytesIO(data))
    assert table[["ci95_low", "ci95_high"]].notna().all().all()
    text = X.hierarchy_record(rel, None)["outputs"]["intervals"]
    if mech in SINGLE_DRAW:
        assert text == X.intervals_note(rel) != OLD_TEXT
        assert "exact 95 % quantile" in text and "zone: k = " in text
    else:
        assert text == OLD_TEXT


@pytest.mark.parametrize("mech", SINGLE_DRAW)
@pytest.mark.parametrize("cost", [budget.pure(1.0), budget.zcdp(0.5)], ids=["pure", "zcdp"])
def test_single_draw_levels_change_only_their_interval_cells(counts: HierarchyCounts, mech: str, cost,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """With the exact intervals switched off the bytes are main's (:data:`KEPT_CSV`); switched on, only
    ``ci95_low``/``ci95_high`` of the single-draw levels differ, and by whole numbers around the count."""
    m = catalog.get("hierarchy", mech)
    rel = m.release_counts(counts, cost, NoiseSource(7))
    exact = X.hierarchy_csv(rel)
    with monkeypatch.context() as mp:
        mp.setattr(type(m), "single_draw_measured", False)
        mp.setattr(type(m), "sum_half_widths", lambda self, h, p, d: None)
        old = X.hierarchy_csv(rel)
    assert _digest(old) == KEPT_CSV[(mech, cost.definition)]
    a, b = (pd.read_csv(io.BytesIO(x), keep_default_na=False, dtype=str) for x in (old, exact))
    iv = ["ci95_low", "ci95_high"]
    assert list(a.columns) == list(b.columns) and a.drop(columns=iv).equals(b.drop(columns=iv))
    single = {lv.level for d, lv in enumerate(rel.plan.levels) if rel.single_draw(d)}
    assert single == ({"total", "region", "district", "zone"} if mech == "independent" else {"zone"})
    # bottom-up's coarse levels (sums of m finest draws) publish the exact quantile of the sum (h-busum)
    summed = {lv.level for d, lv in enumerate(rel.plan.levels)
              if m.sum_half_widths(rel.hierarchy, rel.plan, d) is not None}
    assert summed == (set() if mech == "independent" else {"total", "region", "district"})
    changed = (a[iv] != b[iv]).any(axis=1)
    assert set(b.loc[changed, "level"]) == single | summed
    rows = b[b["level"].isin(single | summed)]
    half = rows["ci95_high"].astype(float) - rows["noisy_count"].astype(float)
    assert (half == rows["noisy_count"].astype(float) - rows["ci95_low"].astype(float)).all()
    assert (half == np.round(half)).all()


def _coverage(noise: str, scale: float) -> np.ndarray:
    """``P(|X| ≤ a)`` for a = 0, 1, … (60 scales and more), summed here from the pmf (independently of
    dpcore): discrete Laplace ``(1 − q)/(1 + q)·q^|x|``, q = e^(−1/t); discrete Gaussian ``e^(−x²/2σ²)/Z``."""
    x = np.arange(0, int(60 * scale) + 50)
    if noise == "discrete_laplace":
        q = np.exp(-1.0 / scale)
        pmf = (1 - q) / (1 + q) * q ** x
    else:
        w = np.exp(-(x * x) / (2.0 * scale * scale))
        pmf = w / (w[0] + 2.0 * w[1:].sum())
    return pmf[0] + 2.0 * np.concatenate([[0.0], np.cumsum(pmf[1:])])


def _exact_k(noise: str, scale: float, level: float = 0.95) -> int:
    """The smallest k with P(|X| ≤ k) ≥ level (:func:`_coverage`)."""
    return int(np.argmax(_coverage(noise, scale) >= level))


def _sum_coverage(noise: str, scale: float, m: int) -> np.ndarray:
    """``P(|S_m| ≤ a)`` for a = 0, 1, … with S_m the sum of m iid draws, by direct convolution of the pmf on
    ``[−60·scale − 50, 60·scale + 50]`` (independently of dpcore's FFT)."""
    x = np.arange(-int(60 * scale) - 50, int(60 * scale) + 51)
    if noise == "discrete_laplace":
        q = np.exp(-1.0 / scale)
        pmf = (1 - q) / (1 + q) * q ** np.abs(x)
    else:
        w = np.exp(-(x * x) / (2.0 * scale * scale))
        pmf = w / w.sum()
    dist = pmf
    for _ in range(m - 1):
        dist = np.convolve(dist, pmf)
    c = dist.size // 2
    return dist[c] + 2.0 * np.concatenate([[0.0], np.cumsum(dist[c + 1:])])


def _exact_sum_k(noise: str, scale: float, m: int) -> int:
    return int(np.argmax(_sum_coverage(noise, scale, m) >= 0.95))


@pytest.mark.parametrize("noise, scale, m", [("discrete_laplace", 0.2, 16), ("discrete_laplace", 1.0, 2),
                                             ("discrete_laplace", 1.0, 3), ("discrete_laplace", 2.0, 29),
                                             ("discrete_laplace", 10.0, 5), ("discrete_gaussian", 1 / np.sqrt(2), 2),
                                             ("discrete_gaussian", 1 / np.sqrt(8), 7),
                                             ("discrete_gaussian", np.sqrt(2.0), 16),
                                             ("discrete_gaussian", 3.1623, 40)])
def test_the_exact_sum_half_width_is_the_smallest_whole_number_reaching_95_percent(noise: str, scale: float,
                                                                                    m: int) -> None:
    """k_m of both families (:func:`dpcore.privacy.calibration.discrete_sum_half_width`) against a direct
    convolution: P(|S_m| ≤ k_m) ≥ 0.95 > P(|S_m| ≤ k_m − 1); cached per (scale, m), the same on a second call."""
    from dpcore.privacy.calibration import discrete_sum_half_width

    cover = _sum_coverage(noise, scale, m)
    k = discrete_sum_half_width(noise, scale, m)
    assert k == int(k) and cover[int(k)] >= 0.95 > cover[int(k) - 1]
    assert k == _exact_sum_k(noise, scale, m) == discrete_sum_half_width(noise, scale, m)


@pytest.mark.parametrize("noise, scale", [("discrete_laplace", 0.5), ("discrete_laplace", 1.0),
                                          ("discrete_laplace", 2.5), ("discrete_laplace", 40.0),
                                          ("discrete_gaussian", 0.7), ("discrete_gaussian", np.sqrt(2.0)),
                                          ("discrete_gaussian", 3.7), ("discrete_gaussian", 60.0)])
def test_the_exact_half_width_is_the_smallest_whole_number_reaching_95_percent(noise: str, scale: float) -> None:
    from dpcore.privacy.calibration import interval_half_width

    assert interval_half_width(noise, scale) == _exact_k(noise, scale)


@pytest.mark.parametrize("mech", SINGLE_DRAW)
@pytest.mark.parametrize("cost", [budget.pure(1.6), budget.zcdp(0.25)], ids=["pure", "zcdp"])
def test_single_draw_levels_publish_the_exact_quantile_of_their_noise(counts: HierarchyCounts, mech: str,
                                                                      cost) -> None:
    rel = catalog.get("hierarchy", mech).release_counts(counts, cost, NoiseSource(7))
    for d, lv in enumerate(rel.plan.levels):
        lo, hi = rel.interval(d)
        v = rel.values[d].astype(float)
        if rel.single_draw(d):
            k = _exact_k(lv.noise, float(rel.plan.scales[d]))
            assert (hi - v == k).all() and (v - lo == k).all(), (mech, lv.level)
        else:  # bottom-up's sums of m finest draws: the exact quantile of the sum, per area (h-busum)
            fin = rel.plan.levels[-1]
            ms = rel.hierarchy.leaves_under()[d]
            k = np.array([_exact_sum_k(fin.noise, float(rel.plan.scales[-1]), int(n)) for n in ms])
            assert mech == "bottom_up" and (hi - v == k).all() and (v - lo == k).all(), (mech, lv.level)


@pytest.mark.parametrize("mech", [*SINGLE_DRAW, "hay"])
@pytest.mark.parametrize("cost", [budget.pure(1.6), budget.zcdp(0.25)], ids=["pure", "zcdp"])
def test_the_plan_states_the_half_width_the_release_publishes(counts: HierarchyCounts, mech: str, cost) -> None:
    """The plan's ± for 19 of 20 counts (``PlanRow.ci95``: the Plan step's lead sentence, Compare, the
    record's plan rows) is the release's own: the exact quantile where an area's error is one draw, the
    normal 1.96·sd elsewhere."""
    m = catalog.get("hierarchy", mech)
    from dpcore.areas.unit import hierarchy_unit

    plan = m.plan(counts.hierarchy, cost, {"split": "uniform", "weights": None}, unit=hierarchy_unit("add_remove"),
                  statistic="count", k=1)
    rel = m.release_counts(counts, cost, NoiseSource(7))
    for d, row in enumerate(plan.rows):
        if rel.single_draw(d):
            assert row.ci95 == _exact_k(row.noise, float(rel.plan.scales[d])), (mech, row.name)
            assert row.details["ci95"].startswith("exact")
        elif mech == "bottom_up":  # the mean over the level's areas of the exact quantile of their sums
            lo, hi = rel.interval(d)
            assert row.ci95 == pytest.approx(float(np.mean(hi - rel.values[d]))), row.name
            assert row.details["ci95"].startswith("exact: each area's k")
        else:
            assert row.ci95 == pytest.approx(Z95 * row.sd), (mech, row.name)


#: Where the normal interval fell short of one draw (benchmarks/results/interval_release_coverage.md): the
#: discrete Laplace at ε = 0.4 a level (independent noise at ε = 1.6 over the 4 measured levels; old
#: coverage 1 − 2q⁷/(1 + q) = 0.927, exact k = 7: 0.951) and the discrete Gaussian with σ² = 2 (bottom-up's
#: zones at ρ = 0.25; old |X| ≤ 2: 0.929, exact k = 3: 0.989).
SHORT = {"independent": budget.pure(1.6), "bottom_up": budget.zcdp(0.25)}


@pytest.mark.parametrize("mech", list(SHORT))
def test_the_exact_interval_of_a_single_draw_covers_95_percent_where_the_normal_one_fell_short(
        counts: HierarchyCounts, mech: str) -> None:
    """300 releases × 32 zones: the noise of different zones (and releases) is independent, so the 9,600
    (release, zone) pairs are independent trials.  The exact interval covers at least the binomial 0.1 %
    floor of 95 % (9,053 of 9,600) and no more than the 0.1 % ceiling of its own exact coverage; the normal
    interval of the same draws (``value ± 1.96·sd``, rounded to 3 decimals as the file writes it) falls
    below the floor."""
    m = catalog.get("hierarchy", mech)
    p = m.plan_tree(counts.hierarchy, SHORT[mech])
    d = counts.hierarchy.depth
    truth = counts.levels()[d].astype(float)
    exact = normal = 0
    for seed in range(RUNS):
        rel = m.release_tree(counts, p, NoiseSource(seed))
        assert rel.single_draw(d)
        lo, hi = rel.interval(d)
        exact += int(np.sum((np.round(lo, 3) <= truth) & (truth <= np.round(hi, 3))))
        half = np.round(Z95 * rel.sd(d), 3)
        v = rel.values[d].astype(float)
        normal += int(np.sum((v - half <= truth) & (truth <= v + half)))
    n = RUNS * truth.size
    assert n == 9600
    cover = _coverage(p.levels[d].noise, float(p.scales[d]))
    k = _exact_k(p.levels[d].noise, float(p.scales[d]))
    old = cover[int(np.floor(Z95 * float(rel.sd(d)[0])))]  # the normal interval covers |X| ≤ ⌊1.96·sd⌋
    assert cover[k] >= 0.95 > 0.935 > old  # the settings are those where the normal interval fell short
    assert _lowest_hits(n) <= exact <= stats.binom.ppf(0.999, n, cover[k]), exact / n
    assert normal < _lowest_hits(n), normal / n


#: Where ± 1.96·sd fell short on bottom-up's districts (m = 8 zones each; benchmarks/results/
#: bottom_up_sum_coverage.md): pure ε = 5 (t = 0.2: old 0.900, exact k = 1: 0.997) and ρ = 1 (σ = 1/√2: old
#: 0.923, exact k = 4: 0.977).
SUM_SHORT = {"pure": (budget.pure(5.0), 300), "zcdp": (budget.zcdp(1.0), 1000)}


@pytest.mark.parametrize("definition", list(SUM_SHORT))
def test_the_exact_interval_of_a_bottom_up_sum_covers_95_percent_where_the_normal_one_fell_short(
        counts: HierarchyCounts, definition: str) -> None:
    """Fixed seeds, 4 districts a release (disjoint zones: independent trials).  The published interval
    (± k_m) covers at least the binomial 0.1 % floor of 95 % and at most the 0.1 % ceiling of its exact
    coverage; the old ``value ± 1.96·sd`` of the same draws (3 decimals, as the file wrote it) falls below
    the floor."""
    m = catalog.get("hierarchy", "bottom_up")
    cost, runs = SUM_SHORT[definition]
    p = m.plan_tree(counts.hierarchy, cost)
    d = counts.hierarchy.depth - 1
    truth = counts.levels()[d].astype(float)
    assert (counts.hierarchy.leaves_under()[d] == 8).all() and truth.size == 4
    exact = normal = 0
    for seed in range(runs):
        rel = m.release_tree(counts, p, NoiseSource(seed))
        lo, hi = rel.interval(d)
        exact += int(np.sum((np.round(lo, 3) <= truth) & (truth <= np.round(hi, 3))))
        half = np.round(Z95 * rel.sd(d), 3)
        v = rel.values[d].astype(float)
        normal += int(np.sum((v - half <= truth) & (truth <= v + half)))
    n = runs * truth.size
    fin = p.levels[-1]
    cover = _sum_coverage(fin.noise, float(p.scales[-1]), 8)
    k = _exact_sum_k(fin.noise, float(p.scales[-1]), 8)
    assert cover[int(np.floor(Z95 * float(rel.sd(d)[0])))] < 0.93  # the normal interval fell short here
    assert _lowest_hits(n) <= exact <= stats.binom.ppf(0.999, n, cover[k]), exact / n
    assert normal < _lowest_hits(n), normal / n


def test_the_normal_interval_of_a_topdown_release_covers_a_large_count_among_empty_zones_too_rarely(
        counts: HierarchyCounts) -> None:
    """Why TopDown L2's columns are empty: the 1,000-person zone among empty zones, ρ = 0.25."""
    m = catalog.get("hierarchy", "topdown_l2")
    p = m.plan_tree(counts.hierarchy, budget.zcdp(0.25))
    hits = 0
    for seed in range(RUNS):
        rel = m.release_tree(counts, p, NoiseSource(seed))
        lo, hi = rel.interval(3)
        hits += bool(lo[0] <= 1000 <= hi[0])
    assert hits < _lowest_hits(RUNS), hits / RUNS


def test_the_published_intervals_of_hay_cover_at_the_stated_rate(counts: HierarchyCounts) -> None:
    """Hay (linear least squares, unbiased): the published interval of the 1,000-person zone among empty zones,
    of an empty zone beside it and of its region covers the truth in at least 95 % of the releases (0.1 %
    binomial floor), and not far above (the SD is not overstated: 0.1 % ceiling)."""
    m = catalog.get("hierarchy", "hay")
    p = m.plan_tree(counts.hierarchy, budget.zcdp(0.25))
    cells = {(3, 0): 1000, (3, 1): 0, (1, 0): 1000}
    hits = dict.fromkeys(cells, 0)
    for seed in range(RUNS):
        rel = m.release_tree(counts, p, NoiseSource(seed))
        frame = X.hierarchy_frame(rel)
        for (d, i), truth in cells.items():
            row = frame[frame["level"] == rel.hierarchy.level_names[d]].iloc[i]
            hits[(d, i)] += bool(row["ci95_low"] <= truth <= row["ci95_high"])
    ceiling = stats.binom.ppf(0.999, RUNS, 0.95)
    for cell, h in hits.items():
        assert _lowest_hits(RUNS) <= h <= ceiling, (cell, h / RUNS)


def test_the_map_shows_no_interval_where_the_file_has_none(counts: HierarchyCounts) -> None:
    import geopandas
    from shapely.geometry import box

    from dpcore.areas import figures
    from dpcore.data.area_boundaries import join_boundaries

    ex = catalog.get("hierarchy", "exact").release_counts(counts, budget.zcdp(0.5), NoiseSource(7))
    hay = catalog.get("hierarchy", "hay").release_counts(counts, budget.zcdp(0.5), NoiseSource(7))
    codes = list(ex.hierarchy.labels(1))
    gdf = geopandas.GeoDataFrame({"code": codes}, geometry=[box(i, 0, i + 1, 1) for i in range(len(codes))],
                                 crs="EPSG:4326")
    join = join_boundaries(ex.hierarchy, 1, gdf)
    assert "interval" not in figures.hierarchy_map(ex, join).data[0].hovertemplate
    assert "interval" in figures.hierarchy_map(hay, join).data[0].hovertemplate
    assert np.isfinite(hay.interval(1)[0]).all()
