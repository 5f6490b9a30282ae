"""Reproduce the matrix-mechanism paper's main numbers (matrix-mechanism.md §5) with dpcore.

Li & Miklau, "An Adaptive Mechanism for Accurate Query Answering under Differential Privacy"
(PVLDB 5(6), 2012) — the Eigen-Design — as implemented in :mod:`dpcore.estimate.matrix_design`.

Part 1, Table 2 / lower-bound ratio (spec §5.2 Table 2, §5.3, Appendix A.6)
    Ratio of the Eigen-Design's RMSE to the SVD lower bound (``sqrt(TSE/svdb)``) for all 1-D
    ranges and for the 1-D prefix (CDF) workload at n = 64, 256, 1024, 2048, beside the spec's
    reproduction values (tolerance ±0.01, Appendix A.6) and the paper's "Bound" column
    (lower bound / Eigen error: 0.99 for permuted ranges — the Eigen-Design is invariant to
    permuting cells — and 0.80 for CDF, both at n = 2048).  Each strategy is computed fresh
    (no cache) and timed; then the strategy cache (``cached_strategy``, in a temporary
    ``DPCORE_CACHE_DIR``) is timed on a miss and a hit, and one release with the cached
    strategy is timed (target < 1 s).
Part 2, 1-D competitors (spec §5.1 "Competitors", §5.3)
    Analytic ``TSE/P = Δ(A)² trace(G X⁺)`` of Eigen-Design, the Haar wavelet strategy
    (the paper's Fig. 2 matrix: the total plus unweighted ±1 Haar rows,
    ``dpcore.estimate.matrix_l1.haar_matrix``), the binary hierarchical tree
    (``hierarchical_strategy``) and the identity, for all ranges and prefixes at n = 64, 256,
    1024.  As in the paper every competitor is measured with L2 sensitivity (Gaussian noise,
    (ε, δ) or zCDP); a second table gives the pure-ε (L1, Laplace) reading, where the
    Eigen-Design is evaluated with its L1 sensitivity to show why pure ε falls back to an L1
    strategy (spec §7.3).
Part 3, 2-D rectangles on the NYC Uber pickups (April 2014)
    A 128 x 128 grid over the 1st–99th percentile box of the pickups (the public numbers in
    ../shared/data/README.md: lat 40.644–40.828, lon −74.054 – −73.782).  Random rectangles of
    4 sizes (500 each, seeded).  Analytic RMSE (noise only, exact) of the Kronecker Eigen-Design,
    Identity, Privelet (2-D Haar, ``privelet.query_variance``), Haar⊗Haar and tree⊗tree under
    Gaussian noise, and the matrix mechanism's own pure-ε fallback; empirical RMSE of HTF (the
    existing mechanism, seeded releases, error against the true counts, includes HTF's
    uniformity bias); and an empirical check of the Eigen-Design on the real counts
    (``matrix_release.release``, seeded, error against the truth vs the analytic prediction).

How budgets are made comparable (part 3)
    Identity, Privelet, HTF and the pure-ε fallback run under pure ε-DP (Laplace).  Every pure
    ε-DP mechanism is also (ε²/2)-zCDP (Bun & Steinke 2016, Prop. 1.4), so the Gaussian
    mechanisms get ρ = ε²/2 ("same zCDP"), a guarantee implied by, not equal to, pure ε.  The
    stricter reading gives the Eigen-Design (ε, δ = 1e-6)-DP with the analytic Gaussian
    (Balle & Wang 2018): weaker than (ε, 0) only by δ.  Both are shown.

All noise is seeded (``NoiseSource(seed)``): a benchmark on public data, never a release.

Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/matrix_paper.py
    PYTHONPATH=. .venv/bin/python benchmarks/matrix_paper.py --quick   # smoke run, *_quick.*
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from dpcore.core import metrics  # noqa: E402
from dpcore.data.domain import Bounds, Grid, aggregate_points, rect_sums  # noqa: E402
from dpcore.data.points import load_points_file  # noqa: E402
from dpcore.estimate import (  # noqa: E402
    matrix_cache,
    matrix_design,
    matrix_errors,
    matrix_release,
    matrix_strategy,
    matrix_workload,
)
from dpcore.estimate import privelet as pv  # noqa: E402
from dpcore.estimate.matrix_l1 import haar_matrix  # noqa: E402  (the paper's Fig. 2 Haar matrix)
from dpcore.points.mechanisms.htf import HTF  # noqa: E402
from dpcore.points.unit import points_unit  # noqa: E402
from dpcore.privacy.noise import NoiseSource  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
UBER = DATA / "points" / "uber_nyc_pickups_2014-04.csv.gz"
RESULTS = ROOT / "benchmarks" / "results"
# 1st–99th percentile box of the pickups, as published in ../shared/data/README.md
BOX = Bounds(west=-74.054, south=40.644, east=-73.782, north=40.828)
DELTA = 1e-6
TOL = 0.01  # Appendix A.6 tolerance on the RMSE ratios

# spec §5.3 reproduction values: (TSE/P of Eigen, RMSE ratio Eigen/svdb)
REF = {
    ("all ranges", 64): (11224.2, 1.020), ("all ranges", 256): (281773, 1.018),
    ("all ranges", 1024): (None, 1.015), ("all ranges", 2048): (3.1185e7, 1.014),
    ("prefix", 64): (390.211, math.sqrt(390.211 / 266.376)),
    ("prefix", 256): (2429.05, math.sqrt(2429.05 / 1563.66)),
    ("prefix", 1024): (None, None), ("prefix", 2048): (32962, 1.282),
}
# paper Table 2 "Bound" (lower bound / Eigen error) at n = 2048
PAPER_BOUND = {"all ranges": 0.99, "prefix": 0.80}
# spec §5.3 TSE/P of the competitors (L2) for a sanity check of our Haar/tree matrices
REF_COMP = {
    ("all ranges", 64): {"identity": 45760, "Haar": 15191, "hierarchical": 18905.2},
    ("all ranges", 256): {"identity": 2.82906e6, "Haar": 404131, "hierarchical": 483901},
    ("prefix", 64): {"identity": 2080, "Haar": 401.734, "hierarchical": 405.718},
    ("prefix", 256): {"identity": 32896, "Haar": 2436.5, "hierarchical": 2463.71},
}
FAMILIES = {"all ranges": matrix_workload.all_range_workload, "prefix": matrix_workload.prefix_workload}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="64,256,1024,2048", help="1-D n for the bound ratios")
    p.add_argument("--compare-sizes", default="64,256,1024", help="1-D n for the competitor tables")
    p.add_argument("--grid", type=int, default=128, help="2-D grid side (power of 2; default 128)")
    p.add_argument("--queries", type=int, default=500, help="rectangles per size (default 500)")
    p.add_argument("--repeats", type=int, default=5, help="seeded releases for the empirical parts")
    p.add_argument("--epsilons", default="0.1,1", help="ε values for the 2-D comparison")
    p.add_argument("--seed", type=int, default=0, help="seed of the public rectangle workload")
    p.add_argument("--noise-seed", type=int, default=0, help="seed of the (benchmark-only) noise")
    p.add_argument("--quick", action="store_true", help="smoke run; writes matrix_paper_quick.*")
    p.add_argument("--out-dir", default=str(RESULTS))
    a = p.parse_args(argv)
    if a.quick:
        a.sizes, a.compare_sizes, a.grid, a.queries, a.repeats = "64,256", "64", 32, 100, 2
    a.sizes = [int(v) for v in a.sizes.split(",")]
    a.compare_sizes = [int(v) for v in a.compare_sizes.split(",")]
    a.epsilons = [float(v) for v in a.epsilons.split(",")]
    return a


# ---------------------------------------------------------------- strategies


def as_norm(s: matrix_strategy.Strategy, norm: str) -> matrix_strategy.Strategy:
    """The same matrix read under another sensitivity norm (errors use Δ of that norm)."""
    if s.factors:
        return matrix_strategy.Strategy("kron", s.n, factors=tuple(as_norm(f, norm) for f in s.factors), norm=norm)
    return matrix_strategy.Strategy(s.kind, s.n, A=s.A, norm=norm)


def competitors_1d(n: int, eigen: matrix_strategy.Strategy) -> dict[str, matrix_strategy.Strategy]:
    return {
        "Eigen-Design": eigen,
        "Haar": matrix_strategy.Strategy("haar", n, A=haar_matrix(n), norm="l2"),
        "hierarchical": as_norm(matrix_strategy.hierarchical_strategy(n, 2), "l2"),
        "identity": as_norm(matrix_strategy.identity_strategy(n), "l2"),
    }


# ---------------------------------------------------------------- part 1


def part1(args: argparse.Namespace, out: dict) -> dict[tuple[str, int], matrix_strategy.Strategy]:
    rows, strategies = [], {}
    for fam, make in FAMILIES.items():
        for n in args.sizes:
            w = make(n)
            t0 = time.perf_counter()
            s = matrix_design.eigen_design(w)
            t_design = time.perf_counter() - t0
            t0 = time.perf_counter()
            rep = matrix_errors.error_report(w, s)
            t_err = time.perf_counter() - t0
            ref_tse, ref_ratio = REF.get((fam, n), (None, None))
            ok = None if ref_ratio is None else abs(rep["ratio_rmse"] - ref_ratio) <= TOL
            rows.append({
                "workload": fam, "n": n, "m": w.m, "tse_per_p": rep["tse_per_p"], "svdb": rep["svdb"],
                "ratio_rmse": rep["ratio_rmse"], "bound": 1 / rep["ratio_rmse"],
                "ref_tse_per_p": ref_tse, "ref_ratio_rmse": ref_ratio, "within_tol": ok,
                "paper_bound_2048": PAPER_BOUND[fam] if n == 2048 else None,
                "design_seconds": t_design, "error_seconds": t_err, "gap": float(s.info["gap"]),
                "rank": int(s.info["rank"]), "p": s.p,
            })
            strategies[(fam, n)] = s
            print(f"  {fam} n={n}: ratio {rep['ratio_rmse']:.4f} (ref {ref_ratio}), design {t_design:.2f} s",
                  flush=True)
    out["table2"] = rows

    # cache + release timing
    timing = []
    old = os.environ.get("DPCORE_CACHE_DIR")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DPCORE_CACHE_DIR"] = tmp
        try:
            n_big = max(n for n in args.sizes if n <= 1024)
            cases = [("prefix", matrix_workload.prefix_workload(n_big)), ("all ranges", matrix_workload.all_range_workload(256)),
                     ("all ranges", matrix_workload.all_range_workload(n_big))]
            rng = np.random.default_rng(1)
            for i, (fam, w) in enumerate(cases):
                t0 = time.perf_counter()
                matrix_cache.cached_strategy(w)
                t_miss = time.perf_counter() - t0
                t0 = time.perf_counter()
                s = matrix_cache.cached_strategy(w)
                t_hit = time.perf_counter() - t0
                x = rng.integers(0, 1000, w.n).astype(float)
                row = {"workload": fam, "n": w.n, "m": w.m, "cache_miss_seconds": t_miss,
                       "cache_hit_seconds": t_hit}
                t0 = time.perf_counter()
                try:
                    r = matrix_release.release(w, s, x, NoiseSource(args.noise_seed + 1000 + i), rho=0.5)
                    row["release_seconds"] = time.perf_counter() - t0
                    row["release_error"] = None
                    row["answers"] = None if r.answers is None else int(r.answers.size)
                except Exception as exc:  # noqa: BLE001 - reported in the results, not hidden
                    row["release_seconds"] = time.perf_counter() - t0
                    row["release_error"] = f"{type(exc).__name__}: {exc}"
                    row["answers"] = None
                timing.append(row)
                print(f"  cache {fam} n={w.n}: miss {t_miss:.2f} s, hit {t_hit:.3f} s, release "
                      f"{row['release_seconds']:.3f} s {row['release_error'] or ''}", flush=True)
        finally:
            if old is None:
                os.environ.pop("DPCORE_CACHE_DIR", None)
            else:
                os.environ["DPCORE_CACHE_DIR"] = old
    out["cache_release"] = timing
    return strategies


# ---------------------------------------------------------------- part 2


def part2(args: argparse.Namespace, out: dict, strategies: dict) -> None:
    rows = []
    for fam, make in FAMILIES.items():
        for n in args.compare_sizes:
            w = make(n)
            eig = strategies.get((fam, n)) or matrix_design.eigen_design(w)
            comp = competitors_1d(n, eig)
            l2 = {k: matrix_errors.tse_per_p(w, s) for k, s in comp.items()}
            l1 = {k: matrix_errors.tse_per_p(w, as_norm(s, "l1")) for k, s in comp.items()}
            ref = REF_COMP.get((fam, n), {})
            rows.append({
                "workload": fam, "n": n, "svdb": matrix_errors.svd_bound(w),
                "l2_tse_per_p": l2, "l1_tse_per_p": l1,
                "l2_rmse_ratio_vs_eigen": {k: math.sqrt(v / l2["Eigen-Design"]) for k, v in l2.items()},
                "l1_rmse_ratio_vs_best_l1": {k: math.sqrt(v / min(l1.values())) for k, v in l1.items()},
                "l1_fallback": matrix_design.l1_strategy(w).kind,
                "ref_l2_tse_per_p": ref,
                "ref_check": {k: abs(l2[k] / v - 1) < 1e-4 for k, v in ref.items()},
            })
            print(f"  {fam} n={n}: " + ", ".join(f"{k} {math.sqrt(v / l2['Eigen-Design']):.3f}x"
                                              for k, v in l2.items()), flush=True)
    out["competitors_1d"] = rows


# ---------------------------------------------------------------- part 3


def part3(args: argparse.Namespace, out: dict) -> None:
    if not UBER.exists():
        msg = f"SKIPPED: {UBER} is missing."
        print("  " + msg)
        out["nyc"] = {"skipped": msg}
        return
    side = args.grid
    t0 = time.perf_counter()
    grid = Grid(BOX, side, side)
    pts = load_points_file(UBER, UBER.name, lat_col="Lat", lon_col="Lon")
    agg = aggregate_points(pts.lon, pts.lat, grid)
    counts = agg.counts
    x = counts.reshape(-1).astype(float)
    t_load = time.perf_counter() - t0
    q = side // 32
    sizes = [(q, q), (4 * q, 4 * q), (8 * q, 8 * q), (16 * q, 16 * q)]
    w = matrix_workload.random_rectangles_workload(side, side, sizes, args.queries, seed=args.seed)
    rects = w.rects
    tag = np.repeat(np.arange(len(sizes)), args.queries)
    truth = rect_sums(counts, rects).astype(float)
    labels = [f"{h}×{wd} ({100 * h * wd / side**2:.3g} %)" for h, wd in sizes]

    t0 = time.perf_counter()
    eig = matrix_design.kron_eigen_design(w)
    t_kron = time.perf_counter() - t0
    H = matrix_strategy.Strategy("haar", side, A=haar_matrix(side), norm="l2")
    T = as_norm(matrix_strategy.hierarchical_strategy(side, 2), "l2")
    I1 = as_norm(matrix_strategy.identity_strategy(side), "l2")
    kron = {
        "Eigen-Design (Kronecker)": eig,
        "Haar⊗Haar": matrix_strategy.Strategy("kron", w.n, factors=(H, H), norm="l2"),
        "tree⊗tree": matrix_strategy.Strategy("kron", w.n, factors=(T, T), norm="l2"),
        "Identity": matrix_strategy.Strategy("kron", w.n, factors=(I1, I1), norm="l2"),
    }
    qv = {k: matrix_errors.query_variances_per_p(w, s) for k, s in kron.items()}  # per unit noise variance
    l1s = matrix_design.l1_strategy(w)
    qv_l1 = matrix_errors.query_variances_per_p(w, l1s)  # Δ1² w X⁺ wᵀ
    axes = [pv.Axis.ordinal("row", side), pv.Axis.ordinal("col", side)]

    def by_size(v: np.ndarray) -> list[float]:  # RMSE per size from per-query variances
        return [float(math.sqrt(v[tag == i].mean())) for i in range(len(sizes))]

    def emp(est: np.ndarray) -> list[float]:
        return [metrics.rmse(truth[tag == i], est[tag == i]) for i in range(len(sizes))]

    res = {"grid": side, "bounds": BOX.as_tuple(), "points_in_grid": int(counts.sum()),
           "n_outside": int(agg.n_outside), "sizes": labels, "queries_per_size": args.queries,
           "kron_design_seconds": t_kron, "load_seconds": t_load, "l1_fallback": l1s.factors[0].kind
           if l1s.factors else l1s.kind, "by_epsilon": []}
    htf = HTF()
    for j, eps in enumerate(args.epsilons):
        rho = eps * eps / 2
        var_z = 1 / (2 * rho)  # σ² for Δ2 = 1 at ρ = ε²/2
        sig_ad = matrix_release.analytic_gaussian_sigma(eps, DELTA, 1.0)
        lap = 2 / eps**2  # Laplace variance per unit L1 sensitivity
        analytic = {
            "pure ε": {
                "Identity (Laplace)": by_size(lap * qv["Identity"]),
                "Privelet (2-D Haar, Laplace)": by_size(np.array([
                    pv.query_variance(axes, eps, ((int(r[0]), int(r[1])), (int(r[2]), int(r[3]))))
                    for r in rects])),
                f"matrix mech. pure-ε fallback ({res['l1_fallback']}⊗, Laplace)": by_size(lap * qv_l1),
            },
            f"ρ = ε²/2 = {rho:g} zCDP (Gaussian)": {k: by_size(var_z * v) for k, v in qv.items()},
            f"(ε, δ = {DELTA:g}) analytic Gaussian": {
                "Eigen-Design (Kronecker)": by_size(sig_ad**2 * qv["Eigen-Design (Kronecker)"]),
                "Identity": by_size(sig_ad**2 * qv["Identity"]),
            },
        }
        # empirical: HTF (pure ε) and Eigen-Design releases on the real counts
        h_err, e_err, e_err_ad, h_secs, e_secs = [], [], [], [], []
        for r in range(args.repeats):
            seed = args.noise_seed + 100 * j + r
            t0 = time.perf_counter()
            rel = htf.release(htf.plan(agg.grid, eps, None, unit=points_unit(agg.user_cap)), agg, NoiseSource(seed)).inner
            h_secs.append(time.perf_counter() - t0)
            h_err.append(np.array(emp(rel.answer(rects))) ** 2)
            t0 = time.perf_counter()
            er = matrix_release.release(w, eig, x, NoiseSource(seed + 50), rho=rho)
            e_secs.append(time.perf_counter() - t0)
            e_err.append(np.array(emp(er.answers)) ** 2)
            er2 = matrix_release.release(w, eig, x, NoiseSource(seed + 75), epsilon=eps, delta=DELTA)
            e_err_ad.append(np.array(emp(er2.answers)) ** 2)
        empirical = {
            "HTF (pure ε, default θ = 50)": [float(v) for v in np.sqrt(np.mean(h_err, axis=0))],
            f"Eigen-Design release, ρ = {rho:g}": [float(v) for v in np.sqrt(np.mean(e_err, axis=0))],
            f"Eigen-Design release, (ε, δ = {DELTA:g})": [float(v) for v in np.sqrt(np.mean(e_err_ad, axis=0))],
        }
        res["by_epsilon"].append({
            "epsilon": eps, "rho": rho, "sigma_analytic_gaussian": sig_ad, "analytic_rmse": analytic,
            "empirical_rmse": empirical, "htf_release_seconds": float(np.mean(h_secs)),
            "eigen_release_seconds": float(np.mean(e_secs)),
            "eigen_release_cost": str(er.cost), "eigen_release_guarantee": er2.guarantee,
        })
        print(f"  NYC ε={eps:g}: Eigen ρ {analytic[next(iter(list(analytic)[1:2]))]['Eigen-Design (Kronecker)']}, "
              f"HTF emp {empirical['HTF (pure ε, default θ = 50)']}", flush=True)
    out["nyc"] = res


# ---------------------------------------------------------------- markdown


def fmt(v, d=4) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "**NO**"
    if isinstance(v, float):
        return f"{v:.{d}g}"
    return str(v)


def md_table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(fmt(c) if not isinstance(c, str) else c for c in r) + " |" for r in rows]
    return out


def markdown(args: argparse.Namespace, out: dict) -> str:
    L = ["# Matrix mechanism (Eigen-Design) — paper reproduction"
         + (" — QUICK SMOKE RUN" if args.quick else ""), "",
         f"Generated {out['generated']} by `{out['command']}` on {out['machine']}; total runtime "
         f"{out['runtime_seconds']:.0f} s.  Library: `dpcore/estimate/matrix_mech.py`; spec: "
         "`shared/specs/matrix-mechanism.md` (§5, Table 2, Appendix A).", "",
         "Errors are analytic (`TSE/P = Δ(A)² trace(G X⁺)`, data-free) unless marked empirical. "
         "RMSE ratios are `sqrt` of TSE ratios.", ""]
    # part 1
    L += ["## 1. Table 2: Eigen-Design error vs the SVD lower bound", "",
          "`ratio` = RMSE(Eigen) / RMSE lower bound = sqrt(TSE/svdb) (≥ 1); `bound` = 1/ratio, the "
          "paper's Table 2 column. Reference = spec §5.3, tolerance ±0.01 (Appendix A.6). Strategy "
          "time = a fresh `eigen_design` (eigendecomposition + Program 1 + completion), no cache.", ""]
    L += md_table(
        ["workload", "n", "TSE/P", "ref TSE/P", "svdb", "ratio", "ref ratio", "within ±0.01", "bound",
         "paper bound (n=2048)", "strategy time (s)", "duality gap"],
        [[r["workload"], r["n"], r["tse_per_p"], r["ref_tse_per_p"], r["svdb"], f"{r['ratio_rmse']:.4f}",
          None if r["ref_ratio_rmse"] is None else f"{r['ref_ratio_rmse']:.4f}", r["within_tol"],
          f"{r['bound']:.3f}", r["paper_bound_2048"], f"{r['design_seconds']:.2f}", f"{r['gap']:.1e}"]
         for r in out["table2"]])
    L += ["", "The paper's Table 2 row is *permuted* 1-D ranges; the Eigen-Design error does not change "
          "under a permutation of cells (spec Appendix A.4), so the all-range rows stand for it.", ""]
    L += ["### Strategy cache and release time", "",
          "`cached_strategy` in a temporary `DPCORE_CACHE_DIR`: first call computes and stores "
          "(miss), second loads (hit); then one `release(..., rho=0.5)` with the cached strategy on "
          "random counts (target < 1 s).", ""]
    L += md_table(["workload", "n", "queries m", "cache miss (s)", "cache hit (s)", "release (s)", "release error"],
                  [[r["workload"], r["n"], r["m"], f"{r['cache_miss_seconds']:.2f}",
                    f"{r['cache_hit_seconds']:.3f}", f"{r['release_seconds']:.3f}", r["release_error"] or "–"]
                   for r in out["cache_release"]])
    # part 2
    L += ["", "## 2. 1-D competitors: Eigen-Design vs wavelet (Haar), hierarchical, identity", "",
          "L2 sensitivity (Gaussian noise; how the paper adapts every competitor). Cells: TSE/P and, "
          "in brackets, RMSE relative to the Eigen-Design (> 1 = worse than Eigen). Haar = the "
          "total plus unweighted ±1 Haar rows (paper Fig. 2); hierarchical = binary tree of "
          "all dyadic intervals. `ref ok` = our TSE/P of identity/Haar/tree matches spec §5.3 to 1e-4.", ""]
    names = ["Eigen-Design", "Haar", "hierarchical", "identity"]
    rows = []
    for r in out["competitors_1d"]:
        rows.append([r["workload"], r["n"], r["svdb"]] + [
            f"{r['l2_tse_per_p'][k]:.5g} [{r['l2_rmse_ratio_vs_eigen'][k]:.3f}×]" for k in names
        ] + [("yes" if all(r["ref_check"].values()) else "**NO**") if r["ref_check"] else "–"])
    L += md_table(["workload", "n", "svdb"] + names + ["ref ok"], rows)
    L += ["", "Pure ε (L1 sensitivity, Laplace): TSE/(2/ε²) and, in brackets, RMSE relative to the "
          "best L1 strategy. `fallback` = what `l1_strategy` picks for pure ε.", ""]
    rows = [[r["workload"], r["n"]] + [f"{r['l1_tse_per_p'][k]:.5g} [{r['l1_rmse_ratio_vs_best_l1'][k]:.2f}×]"
                                       for k in names] + [r["l1_fallback"]] for r in out["competitors_1d"]]
    L += md_table(["workload", "n"] + [f"{k} (L1)" for k in names] + ["fallback"], rows)
    # part 3
    nyc = out["nyc"]
    L += ["", "## 3. 2-D rectangles on the NYC Uber pickups (April 2014)", ""]
    if "skipped" in nyc:
        L += [nyc["skipped"], ""]
    else:
        L += [f"{nyc['grid']} × {nyc['grid']} grid over the 1st–99th percentile box {nyc['bounds']} "
              f"(published in `shared/data/README.md`); {nyc['points_in_grid']:,} pickups inside, "
              f"{nyc['n_outside']:,} outside. {nyc['queries_per_size']} random rectangles per size "
              f"(seed {args.seed}). Kronecker Eigen-Design strategy: {nyc['kron_design_seconds']:.2f} s.", "",
              "**Budgets.** Identity, Privelet, HTF and the matrix mechanism's pure-ε fallback are "
              "pure ε-DP (Laplace). Every pure ε-DP mechanism also satisfies ρ = ε²/2 zCDP, so the "
              "Gaussian block gives every strategy that same ρ (a guarantee *implied by* pure ε, "
              "not equal to it). The stricter reading gives the Eigen-Design (ε, δ = 1e-6)-DP "
              "with the analytic Gaussian — as strong as pure ε except for δ.", "",
              "Analytic RMSE is the exact noise RMSE (unbiased strategies); HTF is empirical "
              f"(mean over {args.repeats} seeded releases, error vs the true counts, includes its "
              "uniformity bias). Lower is better.", ""]
        for e in nyc["by_epsilon"]:
            L += [f"### ε = {e['epsilon']:g} (ρ = {e['rho']:g}; analytic-Gaussian σ at δ = 1e-6: "
                  f"{e['sigma_analytic_gaussian']:.3f})", ""]
            rows = []
            for block, d in e["analytic_rmse"].items():
                for name, v in d.items():
                    rows.append([block, name, "analytic"] + [f"{x:.4g}" for x in v])
            for name, v in e["empirical_rmse"].items():
                rows.append(["pure ε" if name.startswith("HTF") else name.split("release, ")[-1], name,
                             f"empirical ({args.repeats} runs)"] + [f"{x:.4g}" for x in v])
            L += md_table(["budget", "mechanism", "kind"] + nyc["sizes"], rows)
            L += ["", f"Release time: HTF {e['htf_release_seconds']:.2f} s, Eigen-Design "
                  f"{e['eigen_release_seconds']:.2f} s (answers + standard errors). Eigen ρ-release "
                  f"charges {e['eigen_release_cost']}; the (ε, δ) release says: "
                  f"\"{e['eigen_release_guarantee']}\".", ""]
    L += ["## What this shows", ""] + out["findings"]
    return "\n".join(L) + "\n"


def findings(out: dict) -> list[str]:
    f = []
    t2 = out["table2"]
    ar = [r for r in t2 if r["workload"] == "all ranges"]
    pr = [r for r in t2 if r["workload"] == "prefix"]
    checked = [r for r in t2 if r["within_tol"] is not None]
    f.append(f"- **Table 2.** Eigen-Design is within {max(r['ratio_rmse'] for r in ar):.3f}× of the SVD "
             "lower bound (RMSE) on all 1-D ranges at every n (paper: always ≤ 1.3, 0.99 bound on "
             f"permuted ranges); on prefix/CDF the ratio grows to {max(r['ratio_rmse'] for r in pr):.3f} "
             f"(paper bound 0.80). {sum(bool(r['within_tol']) for r in checked)} of {len(checked)} "
             "values with a spec reference are within ±0.01.")
    big = [r for r in t2 if r["n"] == 1024]
    if big:
        f.append(f"- **Speed.** A fresh strategy at n = 1024 takes "
                 f"{max(r['design_seconds'] for r in big):.2f} s (target < 10 s); "
                 + ", ".join(f"all ranges at n = {r['n']}: {r['design_seconds']:.1f} s" for r in ar if r['n'] > 1024) + ".")
    ok = [r for r in out["cache_release"] if r["release_error"] is None]
    bad = [r for r in out["cache_release"] if r["release_error"] is not None]
    if ok:
        f.append("- **Cached release.** " + "; ".join(
            f"{r['workload']} n = {r['n']}: cache hit {r['cache_hit_seconds']:.3f} s, release "
            f"{r['release_seconds']:.3f} s" for r in ok) + " (target < 1 s).")
    if bad:
        f.append("- **Release failure.** " + "; ".join(
            f"{r['workload']} n = {r['n']} ({r['m']:,} queries) raised `{r['release_error'][:120]}…`"
            for r in bad) + " — `release` lists every answer when m ≤ 2,000,000 but builds the "
            "explicit W, which `Workload.matrix` refuses above 50M entries (a matrix_mech bug).")
    for r in out["competitors_1d"]:
        if r["workload"] == "all ranges" and r["n"] == max(x["n"] for x in out["competitors_1d"]):
            q = r["l2_rmse_ratio_vs_eigen"]
            f.append(f"- **1-D ranges (n = {r['n']}, L2).** Haar is {q['Haar']:.3f}×, the binary tree "
                     f"{q['hierarchical']:.3f}× and identity {q['identity']:.2f}× the Eigen-Design's RMSE "
                     "(paper: Eigen up to 2.6× better than Wavelet and 2.7× better than Hierarchical on "
                     "range workloads — the large factors are for permuted ranges).")
        if r["workload"] == "prefix" and r["n"] == max(x["n"] for x in out["competitors_1d"]):
            q = r["l2_rmse_ratio_vs_eigen"]
            f.append(f"- **Prefix/CDF (n = {r['n']}).** Haar {q['Haar']:.3f}×, tree {q['hierarchical']:.3f}× "
                     "the Eigen-Design: essentially a tie, as in the paper's Table 2 (1.01/1.01).")
    l1 = out["competitors_1d"][0]
    f.append(f"- **Pure ε.** Under L1 sensitivity the Eigen-Design is "
             f"{l1['l1_rmse_ratio_vs_best_l1']['Eigen-Design']:.2f}× the best L1 strategy "
             f"({l1['workload']}, n = {l1['n']}), which is why `release(epsilon=...)` without δ switches "
             f"to an identity/tree strategy (here: {l1['l1_fallback']}).")
    nyc = out["nyc"]
    if "by_epsilon" in nyc:
        for e in nyc["by_epsilon"]:
            a = e["analytic_rmse"]
            zkey = [k for k in a if k.startswith("ρ")][0]
            adkey = [k for k in a if k.startswith("(ε")][0]
            eig_z = a[zkey]["Eigen-Design (Kronecker)"]
            eig_ad = a[adkey]["Eigen-Design (Kronecker)"]
            prv = a["pure ε"]["Privelet (2-D Haar, Laplace)"]
            idn = a["pure ε"]["Identity (Laplace)"]
            htf = e["empirical_rmse"]["HTF (pure ε, default θ = 50)"]
            emp = [v for k, v in e["empirical_rmse"].items() if k.startswith("Eigen-Design release, ρ")][0]
            sz = nyc["sizes"]
            f.append(
                f"- **NYC 2-D, ε = {e['epsilon']:g}.** RMSE smallest → largest rectangle: Eigen-Design "
                f"at ρ = ε²/2 {eig_z[0]:.3g} … {eig_z[-1]:.3g}; at (ε, 1e-6) {eig_ad[0]:.3g} … "
                f"{eig_ad[-1]:.3g}; Privelet (pure ε) {prv[0]:.3g} … {prv[-1]:.3g}; Identity "
                f"{idn[0]:.3g} … {idn[-1]:.3g}; HTF (empirical) {htf[0]:.3g} … {htf[-1]:.3g}. "
                f"Under the same ρ the Eigen-Design beats Haar⊗Haar by "
                f"{a[zkey]['Haar⊗Haar'][-1] / eig_z[-1]:.2f}× on {sz[-1]}; empirical Eigen RMSE on the "
                f"real counts / analytic = " + ", ".join(f"{u / v:.2f}" for u, v in zip(emp, eig_z, strict=True))
                + ".")
            best_pure = [min(v[i] for v in a["pure ε"].values()) for i in range(len(sz))]
            f.append(
                f"  Strict reading (ε = {e['epsilon']:g}, δ = 1e-6) vs the best pure-ε analytic mechanism: "
                + ", ".join(f"{s_} {u / v:.2f}×" for s_, u, v in zip(sz, eig_ad, best_pure, strict=True))
                + " (Eigen RMSE / best pure-ε RMSE; < 1 = Eigen-Design better).")
        f.append("- The (ε, δ = 1e-6) reading costs the Eigen-Design a factor σ ≈ "
                 f"{nyc['by_epsilon'][-1]['sigma_analytic_gaussian'] * nyc['by_epsilon'][-1]['epsilon']:.2f}/ε "
                 "against σ = 1/ε at ρ = ε²/2; which comparison is fair depends on whether the "
                 "curator needs pure ε (then the fallback or Privelet/HTF), or accepts δ.")
    return f


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    t_start = time.perf_counter()
    out: dict = {
        "generated": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": "benchmarks/matrix_paper.py" + ("" if argv is None and len(sys.argv) < 2 else " "
                                                   + " ".join(argv if argv is not None else sys.argv[1:])),
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "args": {k: v for k, v in vars(args).items()},
    }
    print("Part 1: Table 2 ratios and timing", flush=True)
    strategies = part1(args, out)
    print("Part 2: 1-D competitors", flush=True)
    part2(args, out, strategies)
    print("Part 3: NYC 2-D rectangles", flush=True)
    part3(args, out)
    out["runtime_seconds"] = time.perf_counter() - t_start
    out["findings"] = findings(out)
    d = Path(args.out_dir)
    d.mkdir(parents=True, exist_ok=True)
    stem = "matrix_paper_quick" if args.quick else "matrix_paper"
    (d / f"{stem}.json").write_text(json.dumps(out, indent=1, default=float) + "\n")
    (d / f"{stem}.md").write_text(markdown(args, out))
    print(f"Wrote {d / stem}.md/.json in {out['runtime_seconds']:.0f} s")


if __name__ == "__main__":
    main()
