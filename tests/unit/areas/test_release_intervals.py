"""The 95 % intervals of a hierarchy release.csv (ci95_low, ci95_high; also the level GeoJSONs): filled
where ``noisy_count ± 1.96 · noise_sd`` is a valid interval for the released values, empty with the
reason said where it is not.

The exact tree DP and the TopDown projections (L2, L∞) make the released values non-negative whole
numbers that add up, a projection that depends on the data: a large count among empty siblings is
pulled down by the positive noise the empty ones keep, and the exact DP's total moves with the clipped areas.  Hay,
the matrix mechanism, bottom-up and independent noise are linear in the noisy counts (unbiased) and
keep their intervals, byte for byte.  Measured over many settings in
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
#: could be empty (sha256, first 16 hex digits): the same bytes.
KEPT_CSV = {
    ("hay", "pure"): "03ac0cf4cdd59aa3", ("hay", "zcdp"): "f825fafe29e76123",
    ("matrix", "pure"): "a95d693c2b492557", ("matrix", "zcdp"): "7f7328b55717b655",
    ("bottom_up", "pure"): "2b5870e948d43910", ("bottom_up", "zcdp"): "dc1dfb908af8d2a2",
    ("independent", "pure"): "d0ef18232e94aa01", ("independent", "zcdp"): "cad6a1e71c94d990",
}
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


@pytest.mark.parametrize("mech", KEPT)
@pytest.mark.parametrize("cost", [budget.pure(1.0), budget.zcdp(0.5)], ids=["pure", "zcdp"])
def test_linear_mechanisms_keep_their_intervals_byte_for_byte(counts: HierarchyCounts, mech: str, cost) -> None:
    rel = catalog.get("hierarchy", mech).release_counts(counts, cost, NoiseSource(7))
    assert rel.has_intervals and X.no_interval_note(rel) is None and X.no_interval_line(rel) is None
    data = X.hierarchy_csv(rel)
    assert hashlib.sha256(data).hexdigest()[:16] == KEPT_CSV[(mech, cost.definition)]
    table = pd.read_csv(io.BytesIO(data))
    assert table[["ci95_low", "ci95_high"]].notna().all().all()
    assert X.hierarchy_record(rel, None)["outputs"]["intervals"] == OLD_TEXT


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
