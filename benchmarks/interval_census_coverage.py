"""Coverage of the 95 % intervals a census-table release publishes (``ci95_low``/``ci95_high``).

The census kind has two mechanisms; both published ``value ± 1.96 × SD`` with nothing else done to the
value (no rounding to whole numbers, no clipping at 0, no projection), and since 2026-11-30 a value that is
one noise draw gets the exact 95 % quantile of its noise instead (the matrix mechanism's
``sum_half_width`` tables, since h-msum every identity-strategy cell, a sum of m draws; Privelet's single-draw areas first, then every Privelet area, since a
weighted sum of Laplace draws is covered at least as often: benchmarks/privelet_weights_coverage.py):

* ``privelet`` (:mod:`dpcore.areas.mechanisms.census_privelet`): release.csv has one row per area of every
  level; ``noisy_count`` is the area's total over the ordinal bins, a sum of noisy finest cells (the inverse
  wavelet transform of Laplace-noised coefficients, noise on a power-of-two grid), ``sd`` its exact analytic
  SD, ``ci95_low/high = noisy_count ∓ interval_half_width("laplace", sd)`` (``sd·ln 20/√2``; the normal
  ``1.96·sd`` before 2026-11-30).
* ``matrix`` (:mod:`dpcore.areas.mechanisms.census_matrix`): marginals.csv has one row per cell of every
  marginal table; ``noisy_count`` is the least-squares answer from one noisy answer to the strategy
  (discrete Laplace under pure ε, discrete Gaussian under ρ-zCDP), ``standard_error`` its analytic SD,
  ``ci95_low/high = noisy_count ∓ 1.96 × standard_error``, written with ``%.6g``.

Both values are linear and unbiased, so the question is only whether the normal approximation holds: the
area totals of Privelet are sums of few Laplace terms, the grand total one term (the base coefficient).

Design (as benchmarks/interval_release_coverage.py)
    Tables: ``synthetic`` (the census kind's demo in the app, :func:`dpcore.data.synthetic.synthetic_census`
    with age bands: 3 states × 4 counties × 5 tracts × 4 age bands), ``sparse`` (made up, adversarial:
    4 states × 4 counties × 8 tracts × 4 age bands; in three states one tract holds 1,000, 100 or 20 people,
    all in one band, and every other cell of that state is empty; the fourth state has 30 people in every
    tract, spread over the bands), ``us_tracts`` (the app's demo census file,
    assets/demo/census/us_tract_population_2020_cenpop.csv.gz: state → county → tract, no attribute; the
    tracts of Delaware, DC, Hawaii, Rhode Island and Vermont, 1,179 tracts, because Privelet's exact grid
    units overflow on the whole file; the matrix mechanism at the county level, 28 counties).
    Mechanisms and parameters: ``privelet`` (every axis transformed) and ``privelet+`` (``plus_axes =
    (geography,)``) at pure ε = 0.5 and 2 (the mechanism takes pure ε only); ``matrix`` with the 1-way and
    2-way marginals at pure ε = 0.5, 2 and ρ = 0.25 zCDP.  Each released ``R`` times (3,000 for the two
    small tables, 1,000 for the tracts, at most 500 for the matrix mechanism) with
    ``NoiseSource(seed + r)``, charged nothing (a study), intervals read as the file writes them.
Measured
    For each level (Privelet) or marginal table (matrix), the share of (release, cell) pairs whose published
    interval covers the true value, overall and by true count (0, 1–10, 11–100, > 100); beside it
    (``normal``) the share the normal interval ``value ± 1.96·sd`` of the same draws covers (what every
    cell published before the single-draw cells of Privelet got the exact Laplace quantile).
Tolerance
    Cells within a release share the noise, so the unit of independence is the release: a cell under-covers
    when its coverage is below 0.95 − 3·√(0.95·0.05/R).

Run from the repository root (results/interval_census_coverage.md)::

    PYTHONPATH=. nice -n 19 .venv/bin/python benchmarks/interval_census_coverage.py
"""

from __future__ import annotations

import argparse
import datetime
import io
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from interval_release_coverage import COUNT_GROUPS, count_group, floor_of  # noqa: E402

from dpcore import catalog  # noqa: E402
from dpcore.areas.census_tables import GEO_AXIS, CensusTable  # noqa: E402
from dpcore.areas.mechanisms import census_matrix, census_privelet  # noqa: E402
from dpcore.data.synthetic import AGE_BANDS, synthetic_census  # noqa: E402
from dpcore.privacy import budget  # noqa: E402
from dpcore.privacy.calibration import interval_half_width  # noqa: E402
from dpcore.privacy.noise import NoiseSource  # noqa: E402

TRACTS = ROOT / "assets" / "demo" / "census" / "us_tract_population_2020_cenpop.csv.gz"
PURE = {"pure ε=0.5": budget.pure(0.5), "pure ε=2": budget.pure(2.0)}
ZCDP = {"zCDP ρ=0.25": budget.zcdp(0.25)}
RESULTS = ROOT / "benchmarks" / "results"
LEVELS = ["state", "county", "tract"]
US_STATES = ("10", "11", "15", "44", "50")


# ---------------------------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------------------------


def synthetic() -> CensusTable:
    df = synthetic_census(age_bands=True)
    return CensusTable.from_frame(df, LEVELS, "population", ordinals=["age_band"],
                                  ordinal_orders={"age_band": AGE_BANDS})


def sparse() -> CensusTable:
    rows = []
    big = {1: 1000, 2: 100, 3: 20}
    for s in range(1, 5):
        for c in range(1, 5):
            for t in range(1, 9):
                for b, band in enumerate(AGE_BANDS):
                    if s in big:
                        pop = big[s] if (c, t, b) == (1, 1, 2) else 0
                    else:
                        pop = (30 // len(AGE_BANDS)) + (b < 30 % len(AGE_BANDS))
                    rows.append({"state": f"{s:02d}", "county": f"{2 * c - 1:03d}", "tract": f"{t * 100:06d}",
                                 "age_band": band, "population": pop})
    return CensusTable.from_frame(pd.DataFrame(rows), LEVELS, "population", ordinals=["age_band"],
                                  ordinal_orders={"age_band": AGE_BANDS})


def us_tracts() -> CensusTable:
    """The demo's 2020 tracts of Rhode Island, Delaware, DC, Vermont and Hawaii (1,179 tracts): Privelet's
    exact grid units overflow int64 on the whole file (see the results)."""
    df = pd.read_csv(TRACTS, dtype={"STATEFP": str, "COUNTYFP": str, "TRACTCE": str}, encoding="utf-8-sig")
    df = df.rename(columns={"STATEFP": "state", "COUNTYFP": "county", "TRACTCE": "tract", "POPULATION": "population"})
    df = df[df["state"].isin(US_STATES)]
    return CensusTable.from_frame(df[[*LEVELS, "population"]], LEVELS, "population")


# ---------------------------------------------------------------------------------------------
# true values, in the order the files write them
# ---------------------------------------------------------------------------------------------


def _area_index(table: CensusTable, depth: int) -> np.ndarray:
    """Leaf → index of its area at ``depth`` (leaves are sorted: each area's leaves are contiguous)."""
    idx = np.empty(len(table.structure.leaf_paths), dtype=np.int64)
    last, k = None, -1
    for i, p in enumerate(table.structure.leaf_paths):
        if p[:depth] != last:
            last, k = p[:depth], k + 1
        idx[i] = k
    return idx


def privelet_truth(table: CensusTable) -> np.ndarray:
    """Every area's true total, level by level (total first): the rows of release.csv."""
    leaf = table.counts.reshape(table.counts.shape[0], -1).sum(axis=1).astype(np.float64)
    out = []
    for d in range(table.structure.depth + 1):
        out.append(np.bincount(_area_index(table, d), weights=leaf))
    return np.concatenate(out)


def matrix_truth(table: CensusTable, level: str, marginals: list[tuple[int, ...]]) -> np.ndarray:
    """Every marginal cell's true value, marginal by marginal: the rows of marginals.csv."""
    geo = _area_index(table, table.structure.level_depth(level))
    x = np.zeros((int(geo.max()) + 1, *table.counts.shape[1:]))
    np.add.at(x, geo, table.counts)
    out = []
    for t in marginals:
        drop = tuple(a for a in range(x.ndim) if a not in t)
        out.append(x.sum(axis=drop).ravel())
    return np.concatenate(out)


# ---------------------------------------------------------------------------------------------
# the study
# ---------------------------------------------------------------------------------------------


def published(mech: str, rel) -> pd.DataFrame:
    """``group, ci95_low, ci95_high`` as the release's CSV writes them (group: level or marginal), with the
    value and its SD unrounded."""
    if mech == "matrix":
        f = pd.read_csv(io.BytesIO(census_matrix.marginals_csv(rel.inner)), usecols=["marginal", "ci95_low",
                                                                                      "ci95_high"])
        t = pd.concat(rel.inner.tables.values(), ignore_index=True)  # the same rows, unrounded
        return pd.DataFrame({"group": f["marginal"].to_numpy(), "ci95_low": f["ci95_low"].to_numpy(),
                             "ci95_high": f["ci95_high"].to_numpy(), "value": t["noisy_count"].to_numpy(),
                             "sd": t["standard_error"].to_numpy()})
    f = census_privelet.census_frame(rel.inner)  # to_csv writes these floats exactly (shortest repr)
    return pd.DataFrame({"group": f["level"].to_numpy(), "ci95_low": f["ci95_low"].to_numpy(),
                         "ci95_high": f["ci95_high"].to_numpy(), "value": f["noisy_count"].to_numpy(),
                         "sd": f["sd"].to_numpy()})


def _as_written(mech: str, v: np.ndarray) -> np.ndarray:
    """Values as the release's CSV writes them: marginals.csv with ``%.6g``, release.csv exactly."""
    return np.char.mod("%.6g", v).astype(np.float64) if mech == "matrix" else v


def study(table: CensusTable, mech: str, params: dict, cost, releases: int, seed: int) -> pd.DataFrame:
    m = catalog.get("census", "matrix" if mech == "matrix" else "privelet")
    p = m.plan(table.structure, cost, params)
    if mech == "matrix":
        truth = matrix_truth(table, p.inner.level, list(p.inner.marginals))
    else:
        truth = privelet_truth(table)
    band = count_group(truth)
    per: dict[tuple[str, str], list[tuple[int, int]]] = {}
    groups = None
    for r in range(releases):
        rel = m.release(p, table, NoiseSource(seed + r))
        f = published(mech, rel)
        if groups is None:
            groups = f["group"].astype(str).to_numpy()
            key = pd.Series(groups).str.cat(band, sep="|").to_numpy()
            keys = list(dict.fromkeys(key))
            sels = {k: key == k for k in keys}
        lo, hi = f["ci95_low"].to_numpy(), f["ci95_high"].to_numpy()
        cov = (lo <= truth) & (truth <= hi)
        # the normal interval value ± 1.96·sd of the same draws, written as the file writes it (what every
        # cell published before 2026-11-30)
        h = interval_half_width("normal", f["sd"].to_numpy())
        lo_n, hi_n = _as_written(mech, f["value"].to_numpy() - h), _as_written(mech, f["value"].to_numpy() + h)
        cov_n = (lo_n <= truth) & (truth <= hi_n)
        for k, sel in sels.items():
            per.setdefault(tuple(k.split("|")), []).append((int(cov[sel].sum()), int(sel.sum()),
                                                            int(cov_n[sel].sum())))
    rows = []
    for (g, b), v in per.items():
        a = np.array(v, dtype=float)
        shares = a[:, 0] / a[:, 1]
        rows.append({"group": g, "count": b, "cells": int(a[0, 1]), "releases": releases,
                     "covered": int(a[:, 0].sum()), "pairs": int(a[:, 1].sum()),
                     "coverage": float(a[:, 0].sum() / a[:, 1].sum()),
                     "coverage_normal": float(a[:, 2].sum() / a[:, 1].sum()),
                     "between_se": float(shares.std(ddof=1) / np.sqrt(releases))})
    return pd.DataFrame(rows)


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (tab, bud, mech, g), x in df.groupby(["table", "budget", "mechanism", "group"], sort=False):
        fl = floor_of(int(x["releases"].iloc[0]))
        worst = x.loc[x["coverage"].idxmin()]
        out.append({"table": tab, "budget": bud, "mechanism": mech, "group": g, "cells": int(x["cells"].sum()),
                    "R": int(x["releases"].iloc[0]), "coverage": x["covered"].sum() / x["pairs"].sum(),
                    "normal": (x["coverage_normal"] * x["pairs"]).sum() / x["pairs"].sum(),
                    "by band": " / ".join(f"{b}: {x.loc[x['count'] == b, 'coverage'].iloc[0]:.3f}"
                                          for b in COUNT_GROUPS if (x["count"] == b).any()),
                    "worst": f"{worst['coverage']:.3f} ({worst['count']}, {worst['cells']} cells)",
                    "floor": fl, "cells under": int((x["coverage"] < fl).sum())})
    return pd.DataFrame(out)


MECHS = {
    "privelet": ({"plus_axes": ()}, PURE),
    "privelet+": ({"plus_axes": (GEO_AXIS,)}, PURE),
    "matrix": ({"marginals": "1"}, {**PURE, **ZCDP}),
    "matrix_2way": ({"marginals": "2"}, {**PURE, **ZCDP}),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mechanisms", default=",".join(MECHS))
    ap.add_argument("--tables", default="sparse,synthetic,us_tracts")
    ap.add_argument("--releases", default="sparse=3000,synthetic=3000,us_tracts=1000")
    ap.add_argument("--matrix-releases", type=int, default=500, help="at most this many for the matrix mechanism")
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--out", default=str(RESULTS / "interval_census_coverage"))
    a = ap.parse_args(argv)
    reps = dict(kv.split("=") for kv in a.releases.split(","))
    makers = {"synthetic": synthetic, "sparse": sparse, "us_tracts": us_tracts}
    frames = []
    for tab in a.tables.split(","):
        table = makers[tab]()
        R = int(reps[tab])
        for mech in a.mechanisms.split(","):
            params, buds = MECHS[mech]
            if mech == "matrix_2way" and not table.structure.ordinals:
                continue  # one axis: there is no 2-way table
            kind = "matrix" if mech.startswith("matrix") else "privelet"
            if kind == "matrix" and tab == "us_tracts":
                params = {**params, "level": "county"}
            for bud, cost in buds.items():
                t0 = time.perf_counter()
                res = study(table, kind, params, cost, min(R, a.matrix_releases) if kind == "matrix" else R, a.seed)
                for col, val in (("mechanism", mech), ("budget", bud), ("table", tab)):
                    res.insert(0, col, val)
                frames.append(res)
                s = summarise(res)
                print(f"{tab:10s} {bud:12s} {mech:12s} {time.perf_counter() - t0:6.1f} s  " +
                      "  ".join(f"{r.group}:{r.coverage:.3f}" for _, r in s.iterrows()), flush=True)
    df = pd.concat(frames, ignore_index=True)
    df.to_csv(a.out + ".csv", index=False, float_format="%.5f")
    s = summarise(df)
    s.to_csv(a.out + "_summary.csv", index=False, float_format="%.4f")
    with pd.option_context("display.width", 250, "display.max_colwidth", 80):
        print(s.to_string(index=False))
    print(f"written {a.out}.csv and {a.out}_summary.csv ({datetime.date.today()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
