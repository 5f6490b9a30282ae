"""The matrix mechanism on census data: the US county hierarchy and census marginals.

Data
    ../shared/data/census/us_tract_population_2020_cenpop.csv.gz, aggregated to counties:
    nation → STATEFP → COUNTYFP (1 / 52 / 3,221 areas; the tract file lists every county, so it
    serves as the public area list).  Counts: the 2020 POPULATION per county.
What is measured
    1. **Hierarchy** (``dpcore.areas.mechanisms.matrix``), ρ-zCDP ρ = 0.05, levels weighted equally
       (``split="levels"``): the time to design the Eigen-Design strategy (cold, then from the
       disk cache), its ratio to the SVD lower bound and Program 1's certified gap; per level the
       analytic RMSE next to the least-squares tree (``hay``, the same ρ split uniformly over the
       levels) and TopDown L2; then ``--seeds`` releases of each (seeded ``NoiseSource``): the
       empirical RMSE per level.  With area-code sets: 20 random "metro areas" of 2–8 counties of
       one state (seeded, public) added to the workload; their analytic SD under the matrix
       mechanism against the SD of the same sums under ``hay`` (sum of its county estimates:
       exact through the tree's posterior covariance is not exposed, so it is measured).
    2. **Marginals** (``dpcore.areas.mechanisms.census_matrix``) on the synthetic census with age bands:
       tract × age band plus age band, ρ = 0.05; the RMSE and the ratio to the bound.
Run from the repository root::

    .venv/bin/python benchmarks/matrix_census.py            # writes results/matrix_census.{md,json}
    .venv/bin/python benchmarks/matrix_census.py --seeds 3

Benchmark noise is seeded so that a run can be repeated: this is a benchmark on public data,
never a release.  Empirical errors are curator-only diagnostics.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpcore import catalog  # noqa: E402
from dpcore.areas import area_sets, census_tables  # noqa: E402
from dpcore.areas.counts import HierarchyCounts  # noqa: E402
from dpcore.areas.mechanisms import census_matrix as marginals  # noqa: E402
from dpcore.areas.mechanisms import matrix  # noqa: E402
from dpcore.core import metrics  # noqa: E402
from dpcore.data import synthetic  # noqa: E402
from dpcore.data.hierarchy import Hierarchy  # noqa: E402
from dpcore.estimate import matrix_errors, matrix_release, matrix_strategy  # noqa: E402
from dpcore.privacy import budget  # noqa: E402
from dpcore.privacy.noise import NoiseSource  # noqa: E402

SHARED = Path(os.environ.get("DPCORE_SHARED_DATA", ROOT.parent / "shared" / "data"))
TRACTS = SHARED / "census" / "us_tract_population_2020_cenpop.csv.gz"
OUT = ROOT / "benchmarks" / "results"
RHO = 0.05


def counties() -> tuple[Hierarchy, HierarchyCounts]:
    df = pd.read_csv(TRACTS, dtype=str, encoding="utf-8-sig")
    df["POPULATION"] = df["POPULATION"].astype(np.int64)
    c = df.groupby(["STATEFP", "COUNTYFP"], as_index=False)["POPULATION"].sum()
    h = Hierarchy.from_frame(c, ["STATEFP", "COUNTYFP"], source="table (confirmed public)")
    return h, HierarchyCounts.from_frame(c, h, ["STATEFP", "COUNTYFP"], "POPULATION")


def metro_sets(h: Hierarchy, n: int = 20, seed: int = 3) -> area_sets.AreaSets:
    rng = np.random.default_rng(seed)
    rows = []
    big = [s for s in range(h.sizes[1]) if len(h.descendants(1, s, 2)) >= 8]
    for q in range(n):
        s = int(rng.choice(big))
        kids = h.descendants(1, s, 2)
        pick = rng.choice(kids, size=int(rng.integers(2, 9)), replace=False)
        rows += [{"query": f"metro{q:02d}", "area": h.labels(2)[k], "level": "COUNTYFP"} for k in pick]
    return area_sets.read_area_sets(pd.DataFrame(rows), h)


def rmse_levels(values: list[np.ndarray], truth: list[np.ndarray]) -> list[float]:
    return [metrics.rmse(t, np.asarray(v, float)) for v, t in zip(values, truth, strict=True)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    if not TRACTS.exists():
        print(f"missing {TRACTS}; set DPCORE_SHARED_DATA", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    res: dict = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count()}, "rho": RHO}
    h, counts = counties()
    truth = counts.levels()
    res["hierarchy"] = {"levels": h.level_names, "sizes": h.sizes}
    cost = budget.zcdp(RHO)
    # --- design time: cold (fresh cache dir) and warm
    matrix._MEMO.clear()
    t = time.perf_counter()
    p = catalog.get("hierarchy", "matrix").plan_tree(h, cost, split="levels")
    cold = time.perf_counter() - t
    matrix._MEMO.clear()
    t = time.perf_counter()
    catalog.get("hierarchy", "matrix").plan_tree(h, cost, split="levels")
    warm = time.perf_counter() - t
    res["design"] = {"plan_cold_s": cold, "plan_from_disk_cache_s": warm,
                     "ratio_to_lower_bound": p.extra["ratio_to_lower_bound"], "program1_gap": p.extra["program1_gap"],
                     "strategy_queries": p.extra["strategy_queries"]}
    print(f"design: cold {cold:.1f} s, cached {warm:.1f} s, ratio {p.extra['ratio_to_lower_bound']:.5f}", flush=True)
    plans = {"matrix": p, "hay": catalog.get("hierarchy", "hay").plan_tree(h, cost),
             "topdown_l2": catalog.get("hierarchy", "topdown_l2").plan_tree(h, cost)}
    emp: dict[str, list[list[float]]] = {m: [] for m in plans}
    times: dict[str, list[float]] = {m: [] for m in plans}
    for seed in range(args.seeds):
        for m in plans:
            t = time.perf_counter()
            rel = catalog.get("hierarchy", m).release_counts(counts, cost, NoiseSource(1000 + seed), split="levels" if m == "matrix"
                                       else "uniform")
            times[m].append(time.perf_counter() - t)
            emp[m].append(rmse_levels(list(rel.values), truth))
    res["levels"] = {m: {"analytic_sd": [lv.sd for lv in plans[m].levels],
                         "empirical_rmse": np.sqrt(np.mean(np.square(emp[m]), axis=0)).tolist(),
                         "release_s_median": float(np.median(times[m]))} for m in plans}
    # --- with 20 metro areas
    sets = metro_sets(h)
    matrix._MEMO.clear()
    t = time.perf_counter()
    ps = catalog.get("hierarchy", "matrix").plan_tree(h, cost, split="levels", area_sets=sets)
    res["metro"] = {"plan_cold_s": time.perf_counter() - t, "queries": len(sets),
                    "matrix_sd": ps.extra["area_sets"]["sd"], "ratio_to_lower_bound": ps.extra["ratio_to_lower_bound"],
                    "levels_sd_with_sets": [lv.sd for lv in ps.levels]}
    set_truth = sets.rows @ truth[-1]
    hay_err, mx_err = [], []
    for seed in range(max(args.seeds, 20)):
        r = catalog.get("hierarchy", "hay").release_counts(counts, cost, NoiseSource(5000 + seed))
        hay_err.append(sets.rows @ np.asarray(r.values[-1], float) - set_truth)
        r2 = catalog.get("hierarchy", "matrix").release_counts(counts, cost, NoiseSource(5000 + seed), split="levels", area_sets=sets)
        mx_err.append(np.asarray(r2.details["area_sets"]["answer"]) - set_truth)
    res["metro"]["hay_empirical_sd"] = np.sqrt(np.mean(np.square(hay_err), axis=0)).tolist()
    res["metro"]["matrix_empirical_sd"] = np.sqrt(np.mean(np.square(mx_err), axis=0)).tolist()
    # --- census marginals
    df = synthetic.synthetic_census(age_bands=True)
    tbl = census_tables.CensusTable.from_frame(df, ["state", "county", "tract"], "population", ordinals=["age_band"])
    ms = marginals.parse_marginals("tract*age_band;age_band", ["tract", "age_band"])
    t = time.perf_counter()
    pm = marginals.plan(tbl.structure, "tract", ms, cost)
    res["marginals"] = {"plan_s": time.perf_counter() - t, "per_marginal": list(pm.per_marginal),
                        "ratio_to_lower_bound": pm.info["ratio_to_lower_bound"],
                        "identity_rmse": None}
    w = marginals.workload(tbl.structure, "tract", ms)
    ident = matrix_strategy.identity_strategy(w.n)
    ident = matrix_strategy.Strategy("identity", w.n, A=ident.A, norm="l2")
    cal = matrix_release.calibrate(ident, rho=RHO)
    res["marginals"]["identity_rmse"] = math.sqrt(matrix_errors.tse_per_p(w, ident) / w.m * cal.variance)
    res["marginals"]["matrix_rmse"] = pm.info["expected_rmse_per_query"]
    (OUT / "matrix_census.json").write_text(json.dumps(res, indent=2))
    (OUT / "matrix_census.md").write_text(report(res))
    print(report(res))
    return 0


def report(r: dict) -> str:
    d = r["design"]
    lines = [
        "# Matrix mechanism on census data (`benchmarks/matrix_census.py`)",
        "",
        f"US counties under states (2020 populations; {' / '.join(f'{n:,}' for n in r['hierarchy']['sizes'])} areas), "
        f"ρ-zCDP ρ = {r['rho']}, levels weighted equally. Machine: Python {r['machine']['python']}, "
        f"{r['machine']['cpus']} CPUs.",
        "",
        f"* Strategy design (Eigen-Design, {d['strategy_queries']:,} strategy queries): plan "
        f"{d['plan_cold_s']:.1f} s cold, {d['plan_from_disk_cache_s']:.1f} s from the disk cache; ratio to the SVD "
        f"lower bound {d['ratio_to_lower_bound']:.5f}; Program 1 certified gap {d['program1_gap']:.1e}.",
        "",
        "| level | matrix: analytic SD | matrix: empirical RMSE | hay: analytic SD | hay: empirical | "
        "TopDown L2: analytic | TopDown L2: empirical |",
        "|---|---|---|---|---|---|---|",
    ]
    L = r["levels"]
    for i, name in enumerate(r["hierarchy"]["levels"]):
        lines.append(f"| {name} | {L['matrix']['analytic_sd'][i]:.1f} | {L['matrix']['empirical_rmse'][i]:.1f} | "
                     f"{L['hay']['analytic_sd'][i]:.1f} | {L['hay']['empirical_rmse'][i]:.1f} | "
                     f"{L['topdown_l2']['analytic_sd'][i]:.1f} | {L['topdown_l2']['empirical_rmse'][i]:.1f} |")
    lines.append("")
    lines.append("Release time (median): " + ", ".join(f"{m} {v['release_s_median']:.2f} s" for m, v in L.items()) + ".")
    m = r["metro"]
    lines += [
        "",
        f"With {m['queries']} public 'metro areas' (2–8 counties of one state each) added to the workload: plan "
        f"{m['plan_cold_s']:.1f} s cold, ratio {m['ratio_to_lower_bound']:.4f}. SD of a metro total: matrix "
        f"analytic median {np.median(m['matrix_sd']):.1f} (empirical {np.median(m['matrix_empirical_sd']):.1f}), "
        f"hay's sum of county estimates empirical median {np.median(m['hay_empirical_sd']):.1f}. Level SDs with the "
        "sets: " + ", ".join(f"{v:.1f}" for v in m["levels_sd_with_sets"]) + ".",
        "",
        f"Census marginals (synthetic census, tract × age band + age band, ρ = {r['rho']}): RMSE per cell "
        f"{r['marginals']['matrix_rmse']:.2f} with the closed-form strategy (ratio to the bound "
        f"{r['marginals']['ratio_to_lower_bound']:.4f}) against {r['marginals']['identity_rmse']:.2f} with noisy "
        f"cells (identity); plan {r['marginals']['plan_s']:.2f} s.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
