"""The 95 % intervals of a census release (Privelet's release.csv, the matrix mechanism's marginals.csv:
``ci95_low``/``ci95_high``).

Every area's total of Privelet is linear in Laplace-noised wavelet coefficients: a weighted sum of a
few independent Laplace draws, which ``± 1.96·sd`` covers less than 95 % of the time (93.7 % for one).  Since
2026-11-30 every area publishes ``± sd·ln 20/√2``, the exact 95 % quantile of one Laplace draw, which
covers a weighted sum of Laplace draws at least 95 % of the time for every weight pattern checked
(computed exactly, not proven in general, in benchmarks/privelet_weights_coverage.py, benchmarks/results/privelet_weights_coverage.md).  A marginal
cell of the matrix mechanism that is one discrete Laplace draw (pure ε, identity strategy, the marginal
over every axis) publishes ``± k``, k the exact 95 % quantile; since the same day (h-msum) every cell under
the identity strategy, the sum of m draws, publishes ``± k_m``, the exact 95 % quantile of that sum.
Every other byte is unchanged.  Measured
over many settings in benchmarks/interval_census_coverage.py (benchmarks/results/interval_census_coverage.md);
here a fixed seed per release and tolerances from the binomial distribution (one-sided, 0.1 %)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import math

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, special, stats

from dpcore.areas import census_tables
from dpcore.areas.census_tables import GEO_AXIS
from dpcore.areas.mechanisms import census_matrix, census_privelet
from dpcore.data.synthetic import AGE_BANDS, synthetic_census
from dpcore.estimate import privelet
from dpcore.privacy import budget
from dpcore.privacy.calibration import (
    discrete_sum_half_width,
    interval_half_width,
    laplace_scale_for_epsilon,
)
from dpcore.privacy.noise import NoiseSource

#: z of the two-sided normal 95 % interval and the exact 95 % quantile of one Laplace draw in SDs
#: (P(|X| > h) = e^{−h√2/sd} = 0.05), derived here independently of dpcore.
Z95 = float(-special.ndtri(0.025))
LAPLACE95 = math.log(20.0) / math.sqrt(2.0)
#: release.csv of the synthetic census with age bands, ε = 1, NoiseSource(7), as main wrote it before
#: 2026-11-30 (sha256, first 16 hex digits), with every area's interval ``± 1.96·sd``; since then every
#: area publishes ``± sd·ln 20/√2`` and nothing else changed.
MAIN_CSV = {(): "358dce39cc23de53", (GEO_AXIS,): "760623b970becdf4"}


def _synthetic() -> census_tables.CensusTable:
    return census_tables.CensusTable.from_frame(
        synthetic_census(age_bands=True), ["state", "county", "tract"], "population", ordinals=["age_band"],
        ordinal_orders={"age_band": AGE_BANDS})


def test_every_area_publishes_the_laplace_quantile_and_nothing_else_changes() -> None:
    """Every interval cell is ``± sd·ln 20/√2``; with main's ``± 1.96·sd`` put back the file is main's."""
    t = _synthetic()
    for plus, digest in MAIN_CSV.items():
        rel = census_privelet.release_census(t, 1.0, NoiseSource(7), plus_axes=plus)
        f = census_privelet.census_frame(rel)
        half = f["ci95_high"] - f["noisy_count"]
        np.testing.assert_allclose(half, LAPLACE95 * f["sd"], rtol=1e-12)
        np.testing.assert_allclose(f["noisy_count"] - f["ci95_low"], LAPLACE95 * f["sd"], rtol=1e-12)
        z = interval_half_width("normal", f["sd"].to_numpy())  # main's floats, to the last bit
        old = f.assign(ci95_low=f["noisy_count"] - z, ci95_high=f["noisy_count"] + z)
        old_csv = old.to_csv(index=False).encode("utf-8")
        assert hashlib.sha256(old_csv).hexdigest()[:16] == digest
        now = pd.read_csv(io.BytesIO(census_privelet.census_csv(rel)), dtype=str, keep_default_na=False)
        before = pd.read_csv(io.BytesIO(old_csv), dtype=str, keep_default_na=False)
        others = [c for c in now.columns if c not in ("ci95_low", "ci95_high")]
        assert now[others].equals(before[others])


def test_record_and_plan_state_the_laplace_intervals() -> None:
    t = _synthetic()
    for plus in ((), (GEO_AXIS,)):
        rel = census_privelet.release_census(t, 1.0, NoiseSource(7), plus_axes=plus)
        body = census_privelet.census_body(rel)
        for lv in body["levels"]:
            assert lv["ci95_half_width"] == pytest.approx(LAPLACE95 * lv["sd"], rel=1e-12)
        assert "noisy_count ± sd·ln 20/√2" in body["outputs"]["columns"]
        assert "1.96·sd covers less than 95 %" in body["outputs"]["columns"]
        plan = census_privelet.expected_error(t.structure, 1.0, plus_axes=plus)
        assert plan["ci95"].tolist() == pytest.approx([lv["ci95_half_width"] for lv in body["levels"]], rel=1e-12)
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


def test_multi_draw_intervals_cover_95_percent() -> None:
    """Privelet+ of the geography with 3 age bands: every tract's total over the bands is a weighted sum of
    3 Laplace draws (the Haar coefficients of its padded row: weights 1, 1/3, 2/3 of the largest), independent
    of every other tract's, so 4,000 tracts × 20 releases are 80,000 independent trials.  The exact coverage
    of ``± sd·ln 20/√2`` is 95.56 % and the published intervals are within its binomial 0.1 % bounds and above
    those of 95 %; the old ``± 1.96·sd`` (94.21 %) is under the lower bound of 95 % and fails."""
    rng = np.random.default_rng(4)
    n_tracts, bands = 4000, ["young", "adult", "old"]
    base = pd.DataFrame({"state": np.repeat(["01", "02"], n_tracts // 2),
                         "county": np.tile(np.repeat(["001", "003", "005", "007"], n_tracts // 8), 2),
                         "tract": [f"{i:06d}" for i in range(n_tracts)]})
    df = base.merge(pd.DataFrame({"band": bands}), how="cross")
    df["population"] = rng.poisson(rng.choice([0.0, 4.0, 300.0], len(df)))
    t = census_tables.CensusTable.from_frame(df, ["state", "county", "tract"], "population", ordinals=["band"],
                                             ordinal_orders={"band": bands})
    plan = census_privelet.plan_census(t.structure, 0.7, plus_axes=(GEO_AXIS,))
    truth = t.counts.sum(axis=1).astype(float)
    runs, new, old = 20, 0, 0
    for r in range(runs):
        tr = census_privelet.release_planned(t, plan, NoiseSource(500 + r)).levels["tract"]
        err = np.abs(tr["noisy_count"].to_numpy() - truth)
        new += int(((tr["ci95_low"] <= truth) & (truth <= tr["ci95_high"])).sum())
        old += int((err <= Z95 * tr["sd"].to_numpy()).sum())
    n = runs * n_tracts
    exact = _coverage(np.array([3.0, 1.0, 2.0]), LAPLACE95)
    assert exact == pytest.approx(0.95565, abs=1e-5)
    lo95 = stats.binom.ppf(0.001, n, 0.95)
    assert stats.binom.ppf(0.001, n, exact) <= new <= stats.binom.isf(0.001, n, exact), (new / n, exact)
    assert new >= lo95
    assert old < lo95, (old / n, lo95 / n)  # the old formula fails this test


def _coverage(b: np.ndarray, h: float) -> float:
    """Exact P(|Σ b_i·L_i| ≤ h·sd) for i.i.d. Laplace L_i, by Gil-Pelaez inversion of the characteristic
    function Π 1/(1 + b_i²t²) (variance scaled to 1), written here independently of the benchmark."""
    b = np.abs(b) / math.sqrt(2.0 * float(np.sum(np.square(b))))
    b2 = b * b
    cut = 40.0 / float(b.max())
    head = integrate.quad(lambda u: float(np.prod(1 / (1 + b2 * u * u))) * h * np.sinc(h * u / np.pi), 0, cut,
                          limit=500, epsabs=1e-12, points=np.linspace(0, cut, 21)[1:-1])[0]
    tail = integrate.quad(lambda u: float(np.prod(1 / (1 + b2 * u * u))) / u, cut, np.inf, weight="sin", wvar=h)[0]
    return 2.0 / math.pi * (head + tail)


def test_every_area_of_the_synthetic_table_is_covered_exactly_95_percent_or_more() -> None:
    """The noise weights of every area of the synthetic census (Privelet, and Privelet+ of the geography),
    from the library's transform: ``a_c``, the area's weight on coefficient c (the adjoint of the inverse
    transform), over the coefficient's weight W(c).  Their variance is the published SD's, and the exact
    coverage of ``± sd·ln 20/√2`` is at least 95 % for every one; ``± 1.96·sd`` is under 95 % for every one."""
    s = _synthetic().structure
    for plus in ((), (GEO_AXIS,)):
        axes = census_privelet.build_axes(s, plus)
        geo, band = axes
        w_geo, w_band = geo._tf.weights(), band._tf.weights()
        eye = np.eye(band.n_coefficients)
        a_band = np.array([privelet.inverse(eye[i], [band]).sum() for i in range(band.n_coefficients)])
        b_band = np.where(np.isfinite(w_band), a_band / w_band, 0.0)
        lam = privelet.noise_magnitude(axes, 1.0)
        sds = census_privelet.plan_census(s, 1.0, plus_axes=plus).node_sd
        seen = set()
        for d in range(s.depth + 1):
            paths = s.paths_at(d)
            for i, path in enumerate(paths):
                mask = s.leaf_mask(path).astype(float)
                a_geo = np.concatenate(geo._tf.adjoint(mask)) if geo.transform else mask
                b = np.outer(np.where(np.isfinite(w_geo), a_geo / w_geo, 0.0), b_band).ravel()
                b = b[np.abs(b) > 1e-12]
                assert math.sqrt(2 * float(np.sum(b * b))) * lam == pytest.approx(sds[d][i], rel=1e-9)
                key = tuple(np.round(np.sort(np.abs(b)) / np.abs(b).max(), 9))
                if key in seen:
                    continue
                seen.add(key)
                assert _coverage(b, LAPLACE95) >= 0.95 - 1e-9, (plus, path, key)
                assert _coverage(b, Z95) < 0.95, (plus, path, key)
        assert len(seen) >= 4


# ------------------------------------------------------------------ the matrix mechanism's marginals

#: marginals.csv of the synthetic census with age bands at county level, NoiseSource(7), as main wrote it
#: before (sha256, first 16 hex digits), every cell ``± 1.96·standard_error``.  Re-pinned on 2026-11-30
#: when the file's numbers went from ``%.6g`` to 3 decimals (4 for SDs; csv_safe.estimate_decimals), the
#: values unchanged (the digests before: 796bd989…, e54968ad…, 2b176c11…, bf2d41a6…).
#: Since h-msum (2026-11-30) the marginals of the pure-ε identity strategy that sum m > 1 cells publish
#: ``± k_m`` (the exact quantile of the sum of m discrete Laplace draws) instead of ``± 1.96·se``; with the old
#: interval put back every file is still main's (these digests), and the files as released now are
#: NEW_MARGINALS: only the interval cells of age_band (m = 12) changed, values and SEs byte-identical.
MAIN_MARGINALS = {("county*age_band;age_band", "pure"): "72f345e1ef1c82a0",
                  ("county*age_band;age_band", "zcdp"): "ad7f4bc9793a9095",
                  ("county", "pure"): "e8f31930d747af87", ("county", "zcdp"): "c04814f406307bc5"}
#: marginals.csv as released since h-msum (2026-11-30): ``± k_m`` for the pure-ε identity cells summing m > 1
#: (age_band, m = 12: ± 9 instead of ± 1.96·se ≈ ± 9.21; both cover |S| ≤ 9, the bytes change with the
#: half-width's value); the other three are main's bytes.
NEW_MARGINALS = {("county*age_band;age_band", "pure"): "987726d9284cc3d5",
                 ("county*age_band;age_band", "zcdp"): "ad7f4bc9793a9095",
                 ("county", "pure"): "e8f31930d747af87", ("county", "zcdp"): "c04814f406307bc5"}


def _dlaplace_k(t: float) -> int:
    """Smallest whole k with P(|X| ≤ k) ≥ 0.95 for the discrete Laplace of scale t (SciPy's dlaplace)."""
    d = stats.dlaplace(1.0 / t)
    return next(k for k in range(10_000) if d.cdf(k) - d.cdf(-k - 1) >= 0.95)


def _dlaplace_sum(t: float, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The integers j and P(S_m = j) for the sum of m iid discrete Laplace draws of scale t, by m − 1
    direct convolutions of SciPy's pmf (truncated at |j| > 40·t + 5, a tail below 1e-17; not dpcore's FFT)."""
    width = int(40 * t) + 5
    one = stats.dlaplace(1.0 / t).pmf(np.arange(-width, width + 1))
    out = one
    for _ in range(m - 1):
        out = np.convolve(out, one)
    return np.arange(len(out)) - len(out) // 2, out


@pytest.mark.parametrize(("epsilon", "m"), [(0.1, 2), (0.5, 3), (1.0, 3), (1.0, 12), (2.0, 2), (2.5, 4), (5.6, 29),
                                            (0.25, 40), (20.0, 5)])
def test_the_sum_quantile_is_the_smallest_whole_number_covering_95_percent(epsilon: float, m: int) -> None:
    """``k_m`` covers ≥ 0.95 of the sum of m discrete Laplace draws and ``k_m − 1`` does not (exact,
    on the integers; k = 0 when one point holds 95 %)."""
    t = laplace_scale_for_epsilon(epsilon, 1)
    k = discrete_sum_half_width("discrete_laplace", t, m)
    assert k == int(k) >= 0
    j, p = _dlaplace_sum(float(t), m)
    assert p[np.abs(j) <= k].sum() >= 0.95
    if k > 0:
        assert p[np.abs(j) <= k - 1].sum() < 0.95
    assert discrete_sum_half_width("discrete_laplace", t, 1) == interval_half_width("discrete_laplace", t)


def test_matrix_identity_cells_publish_the_exact_sum_quantile_and_nothing_else_changes() -> None:
    """Under pure ε the identity strategy answers every cell once with discrete Laplace noise: a marginal
    cell summing m cells publishes ``± k_m`` (``± k`` for the marginal over every axis, m = 1); zCDP and
    the other strategies keep main's bytes, and with ``± 1.96·se`` put back every file is main's."""
    t = _synthetic()
    axes, _ = census_matrix.axes_of(t.structure, "county")
    for (spec, definition), digest in MAIN_MARGINALS.items():
        cost = budget.pure(1.0) if definition == "pure" else budget.zcdp(0.5)
        p = census_matrix.plan(t.structure, "county", census_matrix.parse_marginals(spec, axes), cost)
        rel = census_matrix.release(t, p, NoiseSource(7))
        old_tables = {}
        for j, (name, df) in enumerate(rel.tables.items()):
            half = (df["ci95_high"] - df["noisy_count"]).to_numpy()
            identity = definition == "pure" and p.info["strategy"] == "L1 strategy (identity)"
            if identity:
                m = p.info["cells"] // len(df)
                assert p.n_draws(j) == m == (1 if len(p.marginals[j]) == len(axes) else 12)
                jj, pm = _dlaplace_sum(1.0, m)  # ε = 1: t = 1
                k = next(h for h in range(100) if pm[np.abs(jj) <= h].sum() >= 0.95)
                assert m > 1 or k == _dlaplace_k(1.0)
                assert half == pytest.approx(np.full(len(df), k), abs=1e-9)
            else:
                np.testing.assert_allclose(half, Z95 * df["standard_error"].to_numpy(), rtol=1e-12)
            old_tables[name] = df.assign(ci95_low=df["noisy_count"] - Z95 * df["standard_error"],
                                         ci95_high=df["noisy_count"] + Z95 * df["standard_error"])
        old = dataclasses.replace(rel, tables=old_tables)
        assert hashlib.sha256(census_matrix.marginals_csv(old)).hexdigest()[:16] == digest, (spec, definition)
        new = hashlib.sha256(census_matrix.marginals_csv(rel)).hexdigest()[:16]
        assert new == NEW_MARGINALS[spec, definition], (spec, definition, new)
        record = census_matrix.marginals_record(rel)
        census_matrix.validate_marginals_record(record)
        notes = [n for n in record["notes"] if "the exact 95 % quantile of the sum of m discrete Laplace draws" in n]
        assert len(notes) == (definition == "pure" and "*" in spec)


def _tracts_by_age() -> census_tables.CensusTable:
    """A made-up census: 4 counties × 30 tracts × 4 age bands, counts 0, about 3 or about 80 (seeded)."""
    rng = np.random.default_rng(5)
    rows = [{"state": "01", "county": f"{c:03d}", "tract": f"{c:03d}{i:03d}", "age_band": b,
             "population": int(rng.poisson(rng.choice([0.0, 3.0, 80.0])))}
            for c in range(1, 5) for i in range(30) for b in AGE_BANDS]
    return census_tables.CensusTable.from_frame(pd.DataFrame(rows), ["state", "county", "tract"], "population",
                                                ordinals=["age_band"], ordinal_orders={"age_band": AGE_BANDS})


def test_matrix_single_draw_cells_cover_95_percent() -> None:
    """The tract × age band table of a made-up census (120 tracts × 4 bands) under pure ε = 0.5: every
    cell is its own discrete Laplace draw (t = 2), independent of the others, so 40 releases are 19,200
    independent trials.  Coverage is within the binomial 0.1 % bounds of the exact P(|X| ≤ k) = 96.2 % and
    above the lower bound of 95 %; the old ``± 1.96·se`` (|X| ≤ 5: 93.8 %) is under that bound and fails."""
    t = _tracts_by_age()
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


def test_matrix_summed_cells_cover_95_percent() -> None:
    """The one-way marginals of a made-up census (120 tracts × 4 age bands) under pure ε = 2.5: identity
    strategy, each tract cell the sum of m = 4 discrete Laplace draws (t = 0.4) of its own cells, so 60
    releases are 7,200 independent trials.  Coverage is within the binomial 0.1 % bounds of the exact
    P(|S_4| ≤ k_4) and above the lower bound of 95 %; the old ``± 1.96·se`` (|S_4| ≤ 1: 91.5 %) is under that
    bound and fails."""
    t = _tracts_by_age()
    axes, _ = census_matrix.axes_of(t.structure, "tract")
    p = census_matrix.plan(t.structure, "tract", census_matrix.parse_marginals("1", axes), budget.pure(2.5))
    assert p.info["strategy"] == "L1 strategy (identity)" and p.n_draws(0) == 4
    truth = t.counts.sum(axis=1).astype(float)  # people per tract
    runs, new, old = 60, 0, 0
    for r in range(runs):
        df = census_matrix.release(t, p, NoiseSource(500 + r)).tables["tract"]
        new += int(((df["ci95_low"] <= truth) & (truth <= df["ci95_high"])).sum())
        old += int((np.abs(df["noisy_count"] - truth) <= Z95 * df["standard_error"]).sum())
    n = runs * truth.size
    j, pm = _dlaplace_sum(0.4, 4)
    k = next(h for h in range(100) if pm[np.abs(j) <= h].sum() >= 0.95)
    exact = float(pm[np.abs(j) <= k].sum())
    lo95 = stats.binom.ppf(0.001, n, 0.95)
    assert stats.binom.ppf(0.001, n, exact) <= new <= stats.binom.isf(0.001, n, exact), (new / n, exact)
    assert new >= lo95
    assert old < lo95, (old / n, lo95 / n)  # the old formula fails this test


def test_identity_check_forms_no_identity_matrix() -> None:
    """``_is_identity`` answers as ``np.array_equal(a, np.eye(n))`` did, without forming ``np.eye(n)``."""
    eye = np.eye(5)
    off = eye.copy()
    off[0, 3] = 0.5
    two = eye.copy()
    two[2, 2] = 2.0
    nan = eye.copy()
    nan[1, 1] = np.nan
    for a in (eye, off, two, nan, np.zeros((5, 5)), np.ones((1, 1))):
        assert census_matrix._is_identity(a) == np.array_equal(a, np.eye(a.shape[0]))


def test_single_draw_note_writes_k_in_full() -> None:
    """A large k is written as a whole number (``{k:g}`` wrote 1e+06)."""
    p = census_matrix.MarginalsPlan("county", budget.pure(1.0), ("county",), ((0,),),
                                    ({"marginal": "county", "cells": 1, "sd_mean": 1.0, "sd_max": 1.0},), {},
                                    (1_000_000.0,))
    (note,) = census_matrix._interval_notes(p)
    assert "± 1000000," in note and "e+" not in note
