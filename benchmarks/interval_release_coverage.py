"""Coverage of the 95 % intervals a counts-over-areas release publishes (release.csv ``ci95_low``/``ci95_high``).

A hierarchy release writes, for every area, ``noisy_count ± 1.96 × noise_sd`` rounded to 3 decimals and
clipped at 0 for the non-negative mechanisms (:meth:`dpcore.areas.tree_plans.HierarchyRelease.interval`,
:mod:`dpcore.areas.export`); since 2026-11-30 ``noisy_count ± k``, k the exact 95 % quantile of the noise,
where the value is one discrete noise draw (independent noise, bottom-up's finest level).  The SD is the analytic SD of the area's error; the interval assumes an
unbiased, normal error.  Mechanisms whose values are post-processed in a data-dependent way (projections
onto non-negative whole numbers) are neither, so this study measures how often the published interval
covers the true count.

Design
    Geographies: ``demo`` (the app's made-up demo, :func:`dpcore.data.synthetic.synthetic_hierarchy`,
    region → district → zone, 576 zones), ``adversarial`` (4 regions × 4 districts × 8 zones: in each of
    three regions one zone holds a large count, 1,000, 100 or 20, and every other zone of that region is
    empty; the fourth region has 30 people in every zone), ``ri_jobs`` (real sparse data: LODES 2019 jobs by
    Rhode Island workplace block, county → tract → block group → block, every 2010 block of the state from
    the crosswalk, 67 % of them with no job; read from ../shared/data, skipped when absent), and
    ``adversarial_groups``/``demo_groups`` (the same areas as made-up group-size histograms, for the
    mechanisms that release group sizes).
    Every mechanism of ``catalog.names("hierarchy")`` for the statistic (the matrix mechanism only up to 4,096
    finest areas), at pure ε = 0.5 and ε = 2 and
    ρ = 0.25 zCDP (add/remove neighbours, uniform split), released ``R`` times with ``NoiseSource(seed + r)``,
    charged nothing (a study).
Measured
    For each level the share of (release, area) pairs whose published interval (rounded as the file
    writes it; ``HierarchyRelease.interval``, the one the file wrote before the exact DP and TopDown
    left the columns empty) covers the true count: overall, and by true count (0, 1–10, 11–100, > 100) and by whether
    the area's siblings are mostly empty (at least half of the other children of its parent hold 0).
Tolerance
    Areas within a release share the noise (and the projection), so the unit of independence is the
    release: a cell under-covers when its coverage is below 0.95 − 3·√(0.95·0.05/R).  The between-release
    SE of the cell's per-release shares is printed as well.

Run from the repository root (about 4 minutes on 2 shared cores; results/interval_release_coverage.md)::

    PYTHONPATH=. nice -n 19 .venv/bin/python benchmarks/interval_release_coverage.py
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpcore import catalog  # noqa: E402
from dpcore.areas.counts import HierarchyCounts  # noqa: E402
from dpcore.data.hierarchy import Hierarchy  # noqa: E402
from dpcore.data.synthetic import synthetic_hierarchy  # noqa: E402
from dpcore.privacy import budget  # noqa: E402
from dpcore.privacy.noise import NoiseSource  # noqa: E402

LODES = ROOT.parent / "shared" / "data" / "od"
BUDGETS = {"pure ε=0.5": budget.pure(0.5), "pure ε=2": budget.pure(2.0), "zCDP ρ=0.25": budget.zcdp(0.25)}
COUNT_GROUPS = ("0", "1-10", "11-100", ">100")
RESULTS = ROOT / "benchmarks" / "results"


# ---------------------------------------------------------------------------------------------
# geographies
# ---------------------------------------------------------------------------------------------


def demo() -> HierarchyCounts:
    df, _ = synthetic_hierarchy()
    levels = ["region", "district", "zone"]
    return HierarchyCounts.from_frame(df, Hierarchy.from_frame(df, levels), levels, "population")


def adversarial() -> HierarchyCounts:
    df = _adversarial_frame()
    levels = ["region", "district", "zone"]
    return HierarchyCounts.from_frame(df, Hierarchy.from_frame(df, levels), levels, "population")


def _adversarial_frame() -> pd.DataFrame:
    rows = []
    big = {1: 1000, 2: 100, 3: 20}
    for r in range(1, 5):
        for d in range(1, 5):
            for z in range(1, 9):
                if r in big:
                    pop = big[r] if (d, z) == (1, 1) else 0
                else:
                    pop = 30
                rows.append({"region": f"R{r}", "district": f"D{d}", "zone": f"Z{z}", "population": pop})
    return pd.DataFrame(rows)


def _with_sizes(counts_df: pd.DataFrame, col: str) -> HierarchyCounts:
    """A made-up group-size table (sizes 1, 2, 3+) from a population column: half the people alone,
    the rest in pairs and threes."""
    pop = counts_df[col].to_numpy()
    df = counts_df.drop(columns=[col]).assign(s1=pop // 2, s2=pop // 8, s3=pop // 12)
    levels = ["region", "district", "zone"]
    return HierarchyCounts.from_frame(df, Hierarchy.from_frame(df, levels), levels, ["s1", "s2", "s3"])


def demo_groups() -> HierarchyCounts:
    return _with_sizes(synthetic_hierarchy()[0], "population")


def adversarial_groups() -> HierarchyCounts:
    return _with_sizes(_adversarial_frame(), "population")


def ri_jobs() -> HierarchyCounts | None:
    xw, od = LODES / "ri_lodes7_xwalk_2010blocks.csv.gz", LODES / "ri_lodes7_od_main_JT00_2019.csv.gz"
    if not (xw.exists() and od.exists()):
        return None
    blocks = pd.read_csv(xw, usecols=["tabblk2010"], dtype=str)["tabblk2010"]
    jobs = pd.read_csv(od, usecols=["w_geocode", "S000"], dtype={"w_geocode": str}).groupby("w_geocode")["S000"].sum()
    df = pd.DataFrame({"block": blocks})
    df["jobs"] = df["block"].map(jobs).fillna(0).astype(np.int64)
    # levels from the code prefix (the crosswalk puts two blocks in a Massachusetts county)
    df["county"], df["tract"], df["bg"] = df["block"].str[:5], df["block"].str[:11], df["block"].str[:12]
    levels = ["county", "tract", "bg", "block"]
    return HierarchyCounts.from_frame(df, Hierarchy.from_frame(df, levels), levels, "jobs")


# ---------------------------------------------------------------------------------------------
# the study
# ---------------------------------------------------------------------------------------------


def count_group(t: np.ndarray) -> np.ndarray:
    return np.select([t == 0, t <= 10, t <= 100], list(COUNT_GROUPS[:3]), COUNT_GROUPS[3])


def sibling_group(h: Hierarchy, true: list[np.ndarray], d: int) -> np.ndarray:
    """'mostly empty' where at least half of the other children of the area's parent hold 0."""
    if d == 0:
        return np.array(["(root)"], dtype=object)
    par = np.asarray(h.parents[d - 1])
    t = true[d]
    n_kids = np.bincount(par, minlength=h.sizes[d - 1])[par] - 1
    n_zero = np.bincount(par, weights=(t == 0).astype(float), minlength=h.sizes[d - 1])[par] - (t == 0)
    mostly = (n_kids > 0) & (n_zero >= 0.5 * n_kids)
    return np.where(mostly, "mostly empty", "not")


def study(counts: HierarchyCounts, mech: str, cost, releases: int, seed: int) -> pd.DataFrame:
    """One row per (level, count group, sibling group): covered pairs, pairs, and the per-release shares'
    between-release SE."""
    h = counts.hierarchy
    true = [np.asarray(t, dtype=np.float64) for t in counts.levels()]
    totals = [t if t.ndim == 1 else t.sum(axis=1) for t in true]
    k = 1 if true[0].ndim == 1 else true[0].shape[1]
    cells = []
    for d in range(h.depth + 1):
        g = pd.DataFrame({"count": count_group(true[d].ravel()),
                          "siblings": np.repeat(sibling_group(h, totals, d), k)})
        key = g["count"] + "|" + g["siblings"]
        cells.append((key.to_numpy(), np.unique(key.to_numpy())))
    m = catalog.get("hierarchy", mech)
    # the plan is data-free: built once, as release_counts builds it (add/remove, uniform split)
    p = m.plan_tree(h, cost, neighbour="add_remove", split="uniform", weights=None, statistic=counts.statistic,
                    k=counts.k)
    per = {}  # (level, key) -> list of per-release (covered, n)
    for r in range(releases):
        rel = m.release_tree(counts, p, NoiseSource(seed + r))
        for d in range(h.depth + 1):
            lo, hi = rel.interval(d)
            lo, hi = np.round(lo, 3), np.round(hi, 3)  # as release.csv writes them
            cov = ((lo <= true[d]) & (true[d] <= hi)).ravel()
            key, keys = cells[d]
            for k in keys:
                sel = key == k
                per.setdefault((d, k), []).append((int(cov[sel].sum()), int(sel.sum())))
    rows = []
    for (d, k), v in per.items():
        a = np.array(v, dtype=float)
        shares = a[:, 0] / a[:, 1]
        cnt, sib = k.split("|")
        rows.append({"level": h.level_names[d], "depth": d, "count": cnt, "siblings": sib,
                     "areas": int(a[0, 1]), "releases": releases, "covered": int(a[:, 0].sum()),
                     "pairs": int(a[:, 1].sum()), "coverage": float(a[:, 0].sum() / a[:, 1].sum()),
                     "between_se": float(shares.std(ddof=1) / math.sqrt(releases)) if releases > 1 else float("nan")})
    return pd.DataFrame(rows)


def floor_of(releases: int) -> float:
    return 0.95 - 3.0 * math.sqrt(0.95 * 0.05 / releases)


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Per (geography, budget, mechanism, level): overall coverage, the worst cell and the cells under the floor."""
    out = []
    for (geo, bud, mech, _d), g in df.groupby(["geography", "budget", "mechanism", "depth"], sort=False):
        overall = g["covered"].sum() / g["pairs"].sum()
        fl = floor_of(int(g["releases"].iloc[0]))
        worst = g.loc[g["coverage"].idxmin()]
        under = g[g["coverage"] < fl]
        out.append({"geography": geo, "budget": bud, "mechanism": mech, "level": g["level"].iloc[0],
                    "areas": int(g["areas"].sum()), "R": int(g["releases"].iloc[0]), "coverage": overall,
                    "worst cell": f"{worst['count']}, {worst['siblings']} ({worst['areas']} areas)",
                    "worst coverage": float(worst["coverage"]), "floor": fl,
                    "cells under": len(under)})
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mechanisms", default="")
    ap.add_argument("--geographies", default="adversarial,demo,ri_jobs,adversarial_groups,demo_groups")
    ap.add_argument("--releases", default="adversarial=600,demo=300,ri_jobs=200,adversarial_groups=300,demo_groups=300")
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--out", default=str(RESULTS / "interval_release_coverage"))
    a = ap.parse_args(argv)
    names = a.mechanisms.split(",") if a.mechanisms else catalog.names("hierarchy")
    reps = dict(kv.split("=") for kv in a.releases.split(","))
    makers = {"demo": demo, "adversarial": adversarial, "ri_jobs": ri_jobs, "demo_groups": demo_groups,
              "adversarial_groups": adversarial_groups}
    frames = []
    for geo in a.geographies.split(","):
        counts = makers[geo]()
        stat = "counts" if counts.statistic == "count" else "group_sizes"
        mechs_here = [n for n in names if getattr(catalog.get("hierarchy", n), stat)
                      and not (n == "matrix" and counts.hierarchy.n_leaves > 4096)]
        if counts is None:
            print(f"{geo}: data not found, skipped")
            continue
        R = int(reps[geo])
        for bud, cost in BUDGETS.items():
            for mech in mechs_here:
                t0 = time.perf_counter()
                res = study(counts, mech, cost, R, a.seed)
                res.insert(0, "mechanism", mech)
                res.insert(0, "budget", bud)
                res.insert(0, "geography", geo)
                frames.append(res)
                s = summarise(res)
                print(f"{geo:12s} {bud:12s} {mech:13s} {time.perf_counter() - t0:6.1f} s  " +
                      "  ".join(f"{r.level}:{r.coverage:.3f}/{r['worst coverage']:.3f}" for _, r in s.iterrows()),
                      flush=True)
    df = pd.concat(frames, ignore_index=True)
    df.to_csv(a.out + ".csv", index=False, float_format="%.5f")
    s = summarise(df)
    s.to_csv(a.out + "_summary.csv", index=False, float_format="%.4f")
    print(s.to_string(index=False))
    print(f"written {a.out}.csv and {a.out}_summary.csv ({datetime.date.today()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
