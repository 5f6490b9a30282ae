"""The 95 % intervals of a census release (Privelet's release.csv, the matrix mechanism's marginals.csv:
``ci95_low``/``ci95_high``).

Every area's total is linear in Laplace-noised wavelet coefficients.  Where it is *one* coefficient
(:func:`census_privelet.single_draw`: the grand total; under Privelet+ of the geography, every finest
area) its error is one Laplace draw, which ``± 1.96·sd`` covers only with probability
``1 − e^{−1.96·√2}`` ≈ 93.7 %; those areas publish the exact quantile ``± sd·ln 20/√2`` (since
2026-11-30).  Likewise a marginal cell of the matrix mechanism that is one discrete Laplace draw (pure ε,
identity strategy, the marginal over every axis) publishes ``± k``, k the exact 95 % quantile.  Every
other cell is unchanged, byte for byte.  Measured over many settings in
benchmarks/interval_census_coverage.py (benchmarks/results/interval_census_coverage.md); here a fixed
seed per release and tolerances from the binomial distribution (one-sided, 0.1 %)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

from dpcore.areas import census_tables
from dpcore.areas.census_tables import GEO_AXIS, CensusStructure
from dpcore.areas.mechanisms import census_matrix, census_privelet
from dpcore.data.synthetic import AGE_BANDS, synthetic_census
from dpcore.estimate import privelet
from dpcore.privacy import budget
from dpcore.privacy.noise import NoiseSource

#: z of the two-sided normal 95 % interval and the exact 95 % quantile of one Laplace draw in SDs
#: (P(|X| > h) = e^{−h√2/sd} = 0.05), derived here independently of dpcore.
Z95 = float(-special.ndtri(0.025))
LAPLACE95 = math.log(20.0) / math.sqrt(2.0)
#: release.csv of the synthetic census with age bands, ε = 1, NoiseSource(7), as main wrote it before
#: (sha256, first 16 hex digits), with every area's interval ``± 1.96·sd``.
MAIN_CSV = {(): "358dce39cc23de53", (GEO_AXIS,): "760623b970becdf4"}


def _synthetic() -> census_tables.CensusTable:
    return census_tables.CensusTable.from_frame(
        synthetic_census(age_bands=True), ["state", "county", "tract"], "population", ordinals=["age_band"],
        ordinal_orders={"age_band": AGE_BANDS})


def _structures() -> list[CensusStructure]:
    uneven = (("s1", "c1"), ("s1", "c2"), ("s1", "c3"), ("s2", "c1"), ("s3", "c1"), ("s3", "c2"))
    one_state = (("s1", "c1"), ("s1", "c2"))
    out = []
    for paths in (uneven, one_state):
        out.append(CensusStructure(("state", "county"), paths))
        for bins in (("a",), ("a", "b"), ("a", "b", "c"), ("a", "b", "c", "d")):
            out.append(CensusStructure(("state", "county"), paths, ("age",), (bins,)))
    return out


def _area_of_leaf(structure: CensusStructure, depth: int) -> np.ndarray:
    paths = structure.paths_at(depth)
    return np.array([paths.index(p[:depth]) for p in structure.leaf_paths])


@pytest.mark.parametrize("structure", _structures(), ids=lambda s: f"{len(s.leaf_paths)}x{s.shape[1:]}")
def test_single_draw_is_one_noisy_coefficient(structure: CensusStructure) -> None:
    """:func:`single_draw` against the transform itself: an area's total is one draw exactly when one
    noisy coefficient (finite weight) reaches it through the inverse transform."""
    for plus in [(), (GEO_AXIS,), *[(o,) for o in structure.ordinals]]:
        axes = census_privelet.build_axes(structure, plus)
        weights = privelet.coefficient_weights(axes)
        shape = tuple(a.n_coefficients for a in axes)
        reach = [np.zeros(len(structure.paths_at(d)), dtype=int) for d in range(structure.depth + 1)]
        for idx in itertools.product(*(range(n) for n in shape)):
            if not np.isfinite(weights[idx]):
                continue  # weight +inf: always 0, no noise
            e = np.zeros(shape)
            e[idx] = 1.0
            leaf = privelet.inverse(e, axes).reshape(len(structure.leaf_paths), -1).sum(axis=1)
            for d in range(structure.depth + 1):
                area = _area_of_leaf(structure, d)
                reach[d] += np.abs(np.bincount(area, weights=leaf)) > 1e-9
        got = census_privelet.single_draw(structure, plus)
        for d in range(structure.depth + 1):
            assert got[d].tolist() == (reach[d] == 1).tolist(), (plus, d, reach[d])


def test_single_draw_areas_publish_the_laplace_quantile_and_nothing_else_changes() -> None:
    """Only the interval cells of single-draw areas differ from main's bytes; they are ``± sd·ln 20/√2``."""
    t = _synthetic()
    for plus, digest in MAIN_CSV.items():
        rel = census_privelet.release_census(t, 1.0, NoiseSource(7), plus_axes=plus)
        single = np.concatenate(census_privelet.single_draw(t.structure, plus))
        f = census_privelet.census_frame(rel)
        assert single.any() and not single.all()
        half = f["ci95_high"] - f["noisy_count"]
        np.testing.assert_allclose(half[single], LAPLACE95 * f["sd"][single], rtol=1e-12)
        np.testing.assert_allclose(half[~single], Z95 * f["sd"][~single], rtol=1e-12)
        old = f.copy()
        old["ci95_low"] = np.where(single, f["noisy_count"] - Z95 * f["sd"], f["ci95_low"])
        old["ci95_high"] = np.where(single, f["noisy_count"] + Z95 * f["sd"], f["ci95_high"])
        old_csv = old.to_csv(index=False).encode("utf-8")
        assert hashlib.sha256(old_csv).hexdigest()[:16] == digest
        now = pd.read_csv(io.BytesIO(census_privelet.census_csv(rel)), dtype=str, keep_default_na=False)
        before = pd.read_csv(io.BytesIO(old_csv), dtype=str, keep_default_na=False)
        others = [c for c in now.columns if c not in ("ci95_low", "ci95_high")]
        assert now[others].equals(before[others])
        assert now.loc[~single, ["ci95_low", "ci95_high"]].equals(before.loc[~single, ["ci95_low", "ci95_high"]])


def test_record_states_the_single_draw_intervals() -> None:
    t = _synthetic()
    rel = census_privelet.release_census(t, 1.0, NoiseSource(7), plus_axes=(GEO_AXIS,))
    body = census_privelet.census_body(rel)
    by_level = {lv["level"]: lv for lv in body["levels"]}
    assert by_level["tract"]["ci95_half_width"] == pytest.approx(LAPLACE95 * by_level["tract"]["sd"])
    assert by_level["county"]["ci95_half_width"] == pytest.approx(Z95 * by_level["county"]["sd"])
    assert "exact 95 % quantile of one Laplace draw): tract" in body["outputs"]["columns"]
    plan = census_privelet.expected_error(t.structure, 1.0, plus_axes=(GEO_AXIS,))
    assert plan["ci95"].tolist() == pytest.approx([lv["ci95_half_width"] for lv in body["levels"]])
    census_privelet.validate_census_record(census_privelet.census_record(rel))


def test_single_draw_intervals_cover_95_percent() -> None:
    """Privelet+ of the geography, no attribute: every tract's total is its own Laplace draw, independent
    of the others', so 1,200 tracts × 20 releases are 24,000 independent trials.  The coverage lies within
    the binomial 0.1 % bounds of 95 % (the old ``± 1.96·sd`` has 93.75 %, 5 binomial SDs under the lower
    bound, and fails)."""
    rng = np.random.default_rng(3)
    n_tracts = 1200
    df = pd.DataFrame({"state": np.repeat(["01", "02", "03"], n_tracts // 3),
                       "county": np.tile(np.repeat(["001", "003", "005", "007"], n_tracts // 12), 3),
                       "tract": [f"{i:06d}" for i in range(n_tracts)],
                       "population": rng.poisson(rng.choice([0.0, 5.0, 500.0], n_tracts))})
    t = census_tables.CensusTable.from_frame(df, ["state", "county", "tract"], "population")
    plan = census_privelet.plan_census(t.structure, 0.7, plus_axes=(GEO_AXIS,))
    truth = t.counts.astype(float)
    runs, new, old = 20, 0, 0
    for r in range(runs):
        tr = census_privelet.release_planned(t, plan, NoiseSource(100 + r)).levels["tract"]
        err = np.abs(tr["noisy_count"].to_numpy() - truth)
        new += int(((tr["ci95_low"] <= truth) & (truth <= tr["ci95_high"])).sum())
        old += int((err <= Z95 * tr["sd"].to_numpy()).sum())
    n = runs * n_tracts
    lo, hi = stats.binom.ppf(0.001, n, 0.95), stats.binom.isf(0.001, n, 0.95)
    assert lo <= new <= hi, (new / n, lo / n, hi / n)
    assert old < lo, (old / n, lo / n)  # the old formula fails this test


# ------------------------------------------------------------------ the matrix mechanism's marginals

#: marginals.csv of the synthetic census with age bands at county level, NoiseSource(7), as main wrote it
#: before (sha256, first 16 hex digits), every cell ``± 1.96·standard_error``.  Re-pinned on 2026-11-30
#: when the file's numbers went from ``%.6g`` to 3 decimals (4 for SDs; csv_safe.estimate_decimals), the
#: values unchanged (the digests before: 796bd989…, e54968ad…, 2b176c11…, bf2d41a6…).
MAIN_MARGINALS = {("county*age_band;age_band", "pure"): "72f345e1ef1c82a0",
                  ("county*age_band;age_band", "zcdp"): "ad7f4bc9793a9095",
                  ("county", "pure"): "e8f31930d747af87", ("county", "zcdp"): "c04814f406307bc5"}


def _dlaplace_k(t: float) -> int:
    """Smallest whole k with P(|X| ≤ k) ≥ 0.95 for the discrete Laplace of scale t (SciPy's dlaplace)."""
    d = stats.dlaplace(1.0 / t)
    return next(k for k in range(10_000) if d.cdf(k) - d.cdf(-k - 1) >= 0.95)


def test_matrix_single_draw_cells_publish_the_exact_quantile_and_nothing_else_changes() -> None:
    """Under pure ε the identity strategy answers every cell once with discrete Laplace noise: the
    marginal over every axis publishes ``± k``; the other marginals and zCDP keep main's bytes."""
    t = _synthetic()
    axes, _ = census_matrix.axes_of(t.structure, "county")
    for (spec, definition), digest in MAIN_MARGINALS.items():
        cost = budget.pure(1.0) if definition == "pure" else budget.zcdp(0.5)
        p = census_matrix.plan(t.structure, "county", census_matrix.parse_marginals(spec, axes), cost)
        rel = census_matrix.release(t, p, NoiseSource(7))
        old_tables = {}
        for j, (name, df) in enumerate(rel.tables.items()):
            half = (df["ci95_high"] - df["noisy_count"]).to_numpy()
            full = len(p.marginals[j]) == len(axes)
            if definition == "pure" and full:
                assert p.info["strategy"] == "L1 strategy (identity)"
                assert half == pytest.approx(np.full(len(df), _dlaplace_k(1.0)), abs=1e-9)  # ε = 1: t = 1
            else:
                np.testing.assert_allclose(half, Z95 * df["standard_error"].to_numpy(), rtol=1e-12)
            old_tables[name] = df.assign(ci95_low=df["noisy_count"] - Z95 * df["standard_error"],
                                         ci95_high=df["noisy_count"] + Z95 * df["standard_error"])
        old = dataclasses.replace(rel, tables=old_tables)
        assert hashlib.sha256(census_matrix.marginals_csv(old)).hexdigest()[:16] == digest, (spec, definition)
        record = census_matrix.marginals_record(rel)
        census_matrix.validate_marginals_record(record)
        notes = record["notes"]
        assert any("one discrete Laplace draw" in n for n in notes) == (definition == "pure" and "*" in spec)


def test_matrix_single_draw_cells_cover_95_percent() -> None:
    """The tract × age band table of a made-up census (120 tracts × 4 bands) under pure ε = 0.5: every
    cell is its own discrete Laplace draw (t = 2), independent of the others, so 40 releases are 19,200
    independent trials.  Coverage is within the binomial 0.1 % bounds of the exact P(|X| ≤ k) = 96.2 % and
    above the lower bound of 95 %; the old ``± 1.96·se`` (|X| ≤ 5: 93.8 %) is under that bound and fails."""
    rng = np.random.default_rng(5)
    rows = [{"state": "01", "county": f"{c:03d}", "tract": f"{c:03d}{i:03d}", "age_band": b,
             "population": int(rng.poisson(rng.choice([0.0, 3.0, 80.0])))}
            for c in range(1, 5) for i in range(30) for b in AGE_BANDS]
    t = census_tables.CensusTable.from_frame(pd.DataFrame(rows), ["state", "county", "tract"], "population",
                                             ordinals=["age_band"], ordinal_orders={"age_band": AGE_BANDS})
    axes, _ = census_matrix.axes_of(t.structure, "tract")
    p = census_matrix.plan(t.structure, "tract", census_matrix.parse_marginals("2", axes), budget.pure(0.5))
    truth = t.counts.reshape(-1).astype(float)
    runs, new, old = 40, 0, 0
    for r in range(runs):
        df = census_matrix.release(t, p, NoiseSource(300 + r)).tables["tract × age_band"]
        new += int(((df["ci95_low"] <= truth) & (truth <= df["ci95_high"])).sum())
        old += int((np.abs(df["noisy_count"] - truth) <= Z95 * df["standard_error"]).sum())
    n = runs * truth.size
    d, k = stats.dlaplace(0.5), _dlaplace_k(2.0)
    exact = d.cdf(k) - d.cdf(-k - 1)
    lo95 = stats.binom.ppf(0.001, n, 0.95)
    assert stats.binom.ppf(0.001, n, exact) <= new <= stats.binom.isf(0.001, n, exact), (new / n, exact)
    assert new >= lo95
    assert old < lo95, (old / n, lo95 / n)  # the old formula fails this test
