"""Reproduce Privelet's main accuracy finding (privelet.md §5.2) on two public tables.

The paper (Xiao, Wang & Gehrke, ICDE 2010) finds that Basic's (Laplace noise on every cell)
average square error grows *linearly* with a query's coverage, while Privelet's stays nearly
*flat*, so that Privelet wins on every query above roughly 1 % coverage. This script checks
that finding with dpcore's Privelet on two tables:

Census (1-D, nominal)
    The 2020 tract populations (../shared/data/census/us_tract_population_2020_cenpop.csv.gz):
    one nominal axis whose leaves are the 85,395 tracts, with the public hierarchy
    nation (implicit root) -> state (52) -> county (3,221) -> tract. Leaves are laid out in path
    (depth-first) order, sorted by STATEFP, COUNTYFP, TRACTCE. No synthetic attribute is added.
    Two workloads:
    * "tract ranges": random *contiguous leaf ranges in path order* (a run of whole states,
      then whole counties, then tracts at each end). Their number of tracts k is drawn
      log-uniform on [1, m], the start uniform. This is outside the paper's query class
      (privelet.md §1.2), so the < 4σ² node guarantee does not apply (§7.2 D14); the exact
      variance still does (§3.4).
    * "hierarchy nodes" (the paper's query class): one random non-root node (level drawn
      uniformly among state / county / tract, then a node uniformly within the level), i.e.
      a whole subtree. Coverage cannot exceed the largest state's share (about 11 %).
Location (2-D, both axes ordinal)
    The NYC Uber pickups of April 2014 (../shared/data/points/) on a 1024 x 1024 grid over the
    public "New York City core" preset bounds -74.06,40.56,-73.70,40.92 (dpcore.data.domain.PRESETS).
    Random rectangles: area drawn log-uniform on [1 cell, whole grid], aspect ratio
    log-uniform on [1/4, 4] (clipped to the grid), position uniform.

For every workload and ε ∈ {0.1, 0.5, 1.0}:
    (a) exact analytic noise variance per query, data-free: ``privelet.query_variance``
        against ``privelet.basic_query_variance`` (Basic = Laplace(Δ/ε) per cell);
    (b) empirical error from R = 5 seeded releases each of Privelet (``privelet.release``) and
        of Basic (true counts + discrete Laplace(Δ/ε) per cell, ``NoiseSource.discrete_laplace``)
        on the real table: mean square error and mean relative error
        |noisy - true| / max(true, s), with the paper's sanity bound s = 0.1 % of the table's
        total (privelet.md §5.2).
Δ = 1: one person (census) or one pickup (location) changes one cell by one.

Queries are grouped by *coverage* = fraction of the domain's cells inside the query
(privelet.md §5.2), in the bins 0-0.1 %, 0.1-1 %, 1-5 %, 5-10 %, 10-25 %, 25-50 %, 50-100 %.
The crossover (the coverage above which Privelet's mean error stays below Basic's) is located
on finer log bins (4 per decade) by log-log interpolation. Since both variances scale as
1/ε², the analytic crossover does not depend on ε; the empirical one moves only by sampling
noise.

Verdict per workload, "Privelet error stays flat while Basic grows linearly", from the
coverage bins, at every ε, for the analytic variances and for the empirical MSE alike:
    * Basic grows linearly: least-squares slope of log(mean error) on log(mean coverage)
      in [0.8, 1.2];
    * Privelet stays (nearly) flat: the same slope is at most 0.25;
    * in the largest-coverage bin Privelet's error is at least 10x below Basic's
      (the paper reports about two orders of magnitude).
HOLDS when all three hold everywhere, otherwise DOES NOT HOLD (with the failing items).
The ratios "error at the largest bin / error at the smallest bin" are printed too.

Outputs: benchmarks/results/privelet_paper.csv (long: one row per table, workload, ε,
coverage bin, mechanism and metric), privelet_paper.md (tables, crossovers, verdicts) and
privelet_paper.png (error against coverage, log-log, both mechanisms, one column per ε).

Run from the repository root::

    .venv/bin/python benchmarks/privelet_paper.py
    .venv/bin/python benchmarks/privelet_paper.py --quick   # smoke run, writes privelet_paper_quick.*

All noise is seeded (``--noise-seed``) so a run can be repeated: this is a benchmark on
public data, never a release.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dpcore.core import metrics  # noqa: E402
from dpcore.data.domain import PRESETS, Grid, aggregate_points  # noqa: E402
from dpcore.data.points import load_points_file  # noqa: E402
from dpcore.estimate import privelet as pv  # noqa: E402
from dpcore.privacy.noise import NoiseSource, discrete_laplace_variance  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
TRACTS = DATA / "census" / "us_tract_population_2020_cenpop.csv.gz"
UBER = DATA / "points" / "uber_nyc_pickups_2014-04.csv.gz"
RESULTS = ROOT / "benchmarks" / "results"
PRESET = "New York City core (Manhattan, Brooklyn, Queens, Bronx)"

EPSILONS = [0.1, 0.5, 1.0]
SENSITIVITY = 1
SANITY_FRACTION = 0.001  # s = 0.1 % of the total (privelet.md §5.2)
BIN_EDGES = [0.0, 0.001, 0.01, 0.05, 0.10, 0.25, 0.50, 1.0]
FINE_PER_DECADE = 4
MIN_FINE_QUERIES = 5  # a fine bin needs this many queries to count for the crossover

# verdict thresholds, fixed before looking at any result
BASIC_SLOPE = (0.8, 1.2)
PRIVELET_MAX_SLOPE = 0.25
MIN_TOP_RATIO = 10.0

MECHS = ("Privelet", "Basic")


def bin_label(lo: float, hi: float) -> str:
    def pct(v: float) -> str:
        return f"{100 * v:g}"
    return f"{pct(lo)}–{pct(hi)} %"


BIN_LABELS = [bin_label(a, b) for a, b in zip(BIN_EDGES[:-1], BIN_EDGES[1:], strict=True)]


# ---------------------------------------------------------------- arguments


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5, help="releases per mechanism and ε (default 5)")
    p.add_argument("--queries", type=int, default=3000,
                   help="queries per workload (default 3000; the node workload uses half)")
    p.add_argument("--grid", type=int, default=1024, help="location grid side (default 1024)")
    p.add_argument("--seed", type=int, default=0, help="seed of the query workloads")
    p.add_argument("--noise-seed", type=int, default=0, help="seed of the (benchmark-only) noise")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 300 queries, 2 repeats, 256 grid; writes privelet_paper_quick.*")
    p.add_argument("--out-dir", default=str(RESULTS), help="where to write the results")
    args = p.parse_args(argv)
    if args.quick:
        args.queries, args.repeats, args.grid = 300, 2, 256
    return args


# ---------------------------------------------------------------- tables and workloads


@dataclass
class Workload:
    """Queries as half-open index boxes: ``lo[:, i] <= index_i < hi[:, i]`` on every axis."""

    name: str
    lo: np.ndarray  # (k, d) int64
    hi: np.ndarray  # (k, d) int64
    coverage: np.ndarray  # (k,) fraction of the cells

    def __len__(self) -> int:
        return len(self.coverage)


@dataclass
class Table:
    name: str
    description: str
    x: np.ndarray  # the confidential frequency matrix (int64)
    axes: list
    workloads: list[Workload] = field(default_factory=list)

    @property
    def total(self) -> int:
        return int(self.x.sum())


def census_table(n_queries: int, rng: np.random.Generator) -> Table:
    df = pd.read_csv(TRACTS, dtype=str, encoding="utf-8-sig",
                     usecols=["STATEFP", "COUNTYFP", "TRACTCE", "POPULATION"])
    df = df.sort_values(["STATEFP", "COUNTYFP", "TRACTCE"], kind="stable").reset_index(drop=True)
    x = df["POPULATION"].astype(np.int64).to_numpy()
    # ids in path order (sort=True on already sorted keys keeps them increasing)
    state = pd.factorize(df["STATEFP"], sort=True)[0].astype(np.int64)
    county = pd.factorize(df["STATEFP"] + df["COUNTYFP"], sort=True)[0].astype(np.int64)
    m = len(x)
    axis = pv.Axis.nominal("tract (state → county → tract)", [state, county])
    desc = (f"{m:,} tracts, {state.max() + 1} states, {county.max() + 1:,} counties; "
            f"total population {int(x.sum()):,}; hierarchy height h = 4 (root, state, county, tract)")
    t = Table("Census tracts 2020", desc, x, [axis])

    # workload 1: contiguous leaf ranges in path order, k log-uniform on [1, m]
    k = np.clip(np.rint(np.exp(rng.uniform(0.0, math.log(m), n_queries))), 1, m).astype(np.int64)
    start = (rng.random(n_queries) * (m - k + 1)).astype(np.int64)
    t.workloads.append(Workload("tract ranges", start[:, None], (start + k)[:, None], k / m))

    # workload 2: whole subtrees (paper's query class): level uniform, node uniform in level
    n_nodes = max(1, n_queries // 2)
    level = rng.integers(0, 3, n_nodes)
    lo = np.empty(n_nodes, dtype=np.int64)
    hi = np.empty(n_nodes, dtype=np.int64)
    for lev, ids in ((0, state), (1, county), (2, np.arange(m, dtype=np.int64))):
        sel = np.flatnonzero(level == lev)
        node = rng.integers(0, ids[-1] + 1, len(sel))
        lo[sel] = np.searchsorted(ids, node, side="left")
        hi[sel] = np.searchsorted(ids, node, side="right")
    t.workloads.append(Workload("hierarchy nodes", lo[:, None], hi[:, None], (hi - lo) / m))
    return t


def location_table(side: int, n_queries: int, rng: np.random.Generator) -> Table:
    grid = Grid(PRESETS[PRESET], side, side)
    pts = load_points_file(UBER, UBER.name, lat_col="Lat", lon_col="Lon")
    agg = aggregate_points(pts.lon, pts.lat, grid)
    axes = [pv.Axis.ordinal("row (latitude)", side), pv.Axis.ordinal("column (longitude)", side)]
    b = PRESETS[PRESET]
    desc = (f"NYC Uber pickups 2014-04 on a {side} x {side} grid over the public bounds "
            f"{b.west},{b.south},{b.east},{b.north} ('{PRESET}'); {agg.total:,} pickups inside, "
            f"{agg.n_outside:,} outside (dropped)")
    t = Table("NYC Uber pickups", desc, agg.counts, axes)

    m = side * side
    area = np.exp(rng.uniform(0.0, math.log(m), n_queries))
    aspect = np.exp(rng.uniform(math.log(0.25), math.log(4.0), n_queries))
    h = np.clip(np.rint(np.sqrt(area * aspect)), 1, side).astype(np.int64)
    w = np.clip(np.rint(area / h), 1, side).astype(np.int64)
    r0 = (rng.random(n_queries) * (side - h + 1)).astype(np.int64)
    c0 = (rng.random(n_queries) * (side - w + 1)).astype(np.int64)
    lo = np.column_stack([r0, c0])
    hi = np.column_stack([r0 + h, c0 + w])
    t.workloads.append(Workload("rectangles", lo, hi, (h * w) / m))
    return t


# ---------------------------------------------------------------- answering queries


def box_sums(values: np.ndarray, wl: Workload) -> np.ndarray:
    """Sum of ``values`` over every query box, by prefix sums (1-D or 2-D), float64."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 1:
        P = np.concatenate([[0.0], np.cumsum(v)])
        return P[wl.hi[:, 0]] - P[wl.lo[:, 0]]
    if v.ndim == 2:
        P = np.zeros((v.shape[0] + 1, v.shape[1] + 1))
        np.cumsum(np.cumsum(v, axis=0), axis=1, out=P[1:, 1:])
        r0, c0 = wl.lo[:, 0], wl.lo[:, 1]
        r1, c1 = wl.hi[:, 0], wl.hi[:, 1]
        return P[r1, c1] - P[r0, c1] - P[r1, c0] + P[r0, c0]
    raise ValueError("only 1-D and 2-D tables are used here")


def axis_query(lo: int, hi: int) -> tuple[int, int]:
    """One axis of a query for ``query_variance``: the API takes (lo, hi) index ranges.

    RANGE_HI_INCLUSIVE says whether dpcore.estimate.privelet's ``hi`` is the last index (True) or one
    past it (False); set from the module's documentation.
    """
    return (int(lo), int(hi) - 1) if RANGE_HI_INCLUSIVE else (int(lo), int(hi))


RANGE_HI_INCLUSIVE = False


def analytic_variances(t: Table, wl: Workload, eps: float) -> tuple[np.ndarray, np.ndarray]:
    vp = np.empty(len(wl))
    vb = np.empty(len(wl))
    for i in range(len(wl)):
        q = [axis_query(a, b) for a, b in zip(wl.lo[i], wl.hi[i], strict=True)]
        vp[i] = pv.query_variance(t.axes, eps, q, sensitivity=SENSITIVITY)
        vb[i] = pv.basic_query_variance(t.axes, eps, q, sensitivity=SENSITIVITY)
    return vp, vb


# ---------------------------------------------------------------- summaries


def coarse_bins(cov: np.ndarray) -> np.ndarray:
    """Index of the coverage bin of every query (bins are (lo, hi], the first closed)."""
    idx = np.searchsorted(np.asarray(BIN_EDGES), cov, side="left") - 1
    return np.clip(idx, 0, len(BIN_LABELS) - 1)


def fine_edges(min_cov: float) -> np.ndarray:
    lo = math.floor(math.log10(min_cov) * FINE_PER_DECADE) / FINE_PER_DECADE
    n = round(-lo * FINE_PER_DECADE)
    return np.logspace(lo, 0.0, n + 1)


def binned(cov: np.ndarray, vals: dict[str, np.ndarray], edges: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    idx = np.clip(np.searchsorted(edges, cov, side="left") - 1, 0, len(edges) - 2)
    nb = len(edges) - 1
    cnt = np.bincount(idx, minlength=nb)
    with np.errstate(invalid="ignore", divide="ignore"):
        mcov = np.bincount(idx, cov, nb) / cnt
        out = {k: np.bincount(idx, v, nb) / cnt for k, v in vals.items()}
    return cnt, mcov, out


def crossover(cov: np.ndarray, p: np.ndarray, b: np.ndarray) -> tuple[str, float]:
    """Coverage above which Privelet's mean error stays below Basic's (fine log bins).

    Returns a kind ('at', 'below-range', 'none') and the coverage (nan unless 'at').
    """
    edges = fine_edges(cov.min())
    cnt, mcov, m = binned(cov, {"p": p, "b": b}, edges)
    ok = cnt >= MIN_FINE_QUERIES
    c, d = mcov[ok], np.log(m["p"][ok] / m["b"][ok])  # d < 0: Privelet better
    if len(d) == 0 or d[-1] >= 0:
        return "none", math.nan
    above = np.flatnonzero(d >= 0)
    if len(above) == 0:
        return "below-range", float(c[0])
    i = above[-1]  # last bin where Basic is at least as good; Privelet wins in all later ones
    lc0, lc1 = math.log(c[i]), math.log(c[i + 1])
    frac = d[i] / (d[i] - d[i + 1])
    return "at", float(math.exp(lc0 + frac * (lc1 - lc0)))


def fmt_cross(kind: str, c: float) -> str:
    if kind == "at":
        return f"{100 * c:.3g} %"
    if kind == "below-range":
        return f"< {100 * c:.2g} % (Privelet ahead in every bin)"
    return "none (Basic ahead in the largest bin)"


def slope(cov: np.ndarray, err: np.ndarray) -> float:
    ok = np.isfinite(cov) & np.isfinite(err) & (err > 0)
    if ok.sum() < 2:
        return math.nan
    return float(np.polyfit(np.log(cov[ok]), np.log(err[ok]), 1)[0])


# ---------------------------------------------------------------- the experiment


def run_workload(t: Table, wl: Workload, args: argparse.Namespace, stream: int,
                 timings: dict[str, list[float]]) -> tuple[list[dict], dict]:
    """Analytic and empirical errors of one workload; long rows and per-ε raw arrays."""
    true = box_sums(t.x, wl)
    s = SANITY_FRACTION * t.total
    bins = coarse_bins(wl.coverage)
    rows: list[dict] = []
    raw: dict = {}
    for ie, eps in enumerate(EPSILONS):
        t0 = time.perf_counter()
        vp, vb = analytic_variances(t, wl, eps)
        timings["analytic variance (s per workload and ε)"].append(time.perf_counter() - t0)
        sq = {k: np.zeros(len(wl)) for k in MECHS}
        rel = {k: np.zeros(len(wl)) for k in MECHS}
        for r in range(args.repeats):
            # a distinct seeded stream per (noise seed, workload, ε, repeat, mechanism)
            base = (((args.noise_seed * 100 + stream) * 10 + ie) * 1000 + r) * 10
            t0 = time.perf_counter()
            noisy_p = pv.release(t.x, t.axes, eps, NoiseSource(base + 1),
                                 sensitivity=SENSITIVITY).noisy
            timings[f"Privelet release, {t.name} (s)"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            noisy_b = t.x + NoiseSource(base + 2).discrete_laplace(SENSITIVITY / eps, t.x.shape)
            timings[f"Basic release, {t.name} (s)"].append(time.perf_counter() - t0)
            for k, noisy in (("Privelet", noisy_p), ("Basic", noisy_b)):
                est = box_sums(noisy, wl)
                err = est - true
                sq[k] += err**2 / args.repeats
                rel[k] += metrics.relative_errors(true, est, s, percent=False) / args.repeats
        raw[eps] = {"var": {"Privelet": vp, "Basic": vb}, "mse": sq, "mre": rel}
        nb = len(BIN_LABELS)
        cnt = np.bincount(bins, minlength=nb)
        with np.errstate(invalid="ignore"):
            mcov = np.bincount(bins, wl.coverage, nb) / cnt
        for k in MECHS:
            for metric, arr in (("analytic_variance", raw[eps]["var"][k]),
                                ("empirical_mse", sq[k]), ("mean_relative_error", rel[k])):
                with np.errstate(invalid="ignore"):
                    means = np.bincount(bins, arr, nb) / cnt
                for j in range(nb):
                    rows.append({
                        "table": t.name, "workload": wl.name, "epsilon": eps,
                        "coverage_bin": BIN_LABELS[j], "bin_lo": BIN_EDGES[j],
                        "bin_hi": BIN_EDGES[j + 1], "n_queries": int(cnt[j]),
                        "mean_coverage": float(mcov[j]) if cnt[j] else math.nan,
                        "mechanism": k, "metric": metric,
                        "value": float(means[j]) if cnt[j] else math.nan,
                        "repeats": args.repeats if metric != "analytic_variance" else 0,
                    })
    return rows, raw


def summarise(t: Table, wl: Workload, raw: dict) -> dict:
    """Crossovers, slopes, growth ratios and the verdict of one workload."""
    bins = coarse_bins(wl.coverage)
    nb = len(BIN_LABELS)
    cnt = np.bincount(bins, minlength=nb)
    occupied = np.flatnonzero(cnt > 0)
    with np.errstate(invalid="ignore"):
        mcov = (np.bincount(bins, wl.coverage, nb) / cnt)[occupied]
    out: dict = {"per_eps": {}, "failures": []}
    for eps in EPSILONS:
        e: dict = {}
        for src in ("var", "mse"):
            means = {}
            for k in MECHS:
                with np.errstate(invalid="ignore"):
                    means[k] = (np.bincount(bins, raw[eps][src][k], nb) / cnt)[occupied]
            kind, c = crossover(wl.coverage, raw[eps][src]["Privelet"], raw[eps][src]["Basic"])
            sp, sb = slope(mcov, means["Privelet"]), slope(mcov, means["Basic"])
            top = means["Basic"][-1] / means["Privelet"][-1]
            gp = means["Privelet"][-1] / means["Privelet"][0]
            gb = means["Basic"][-1] / means["Basic"][0]
            e[src] = {"cross": (kind, c), "slope_p": sp, "slope_b": sb, "top_ratio": top,
                      "growth_p": gp, "growth_b": gb}
            what = "analytic" if src == "var" else "empirical"
            if not BASIC_SLOPE[0] <= sb <= BASIC_SLOPE[1]:
                out["failures"].append(f"ε={eps} {what}: Basic slope {sb:.2f} not in {BASIC_SLOPE}")
            if not sp <= PRIVELET_MAX_SLOPE:
                out["failures"].append(f"ε={eps} {what}: Privelet slope {sp:.2f} > {PRIVELET_MAX_SLOPE}")
            if not top >= MIN_TOP_RATIO:
                out["failures"].append(
                    f"ε={eps} {what}: Basic/Privelet at the largest bin {top:.3g} < {MIN_TOP_RATIO:g}")
        out["per_eps"][eps] = e
    out["holds"] = not out["failures"]
    out["cov_growth"] = float(mcov[-1] / mcov[0])
    out["largest_bin"] = BIN_LABELS[occupied[-1]]
    out["smallest_bin"] = BIN_LABELS[occupied[0]]
    return out


# ---------------------------------------------------------------- outputs


def fmt(v: float) -> str:
    if not np.isfinite(v):
        return "—"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        return f"{v:.2e}"
    if a >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def md_bin_table(df: pd.DataFrame, eps: float) -> str:
    d = df[df["epsilon"] == eps]
    piv = d.pivot_table(index="coverage_bin", columns=["metric", "mechanism"], values="value",
                        sort=False, dropna=False)
    meta = d.drop_duplicates("coverage_bin").set_index("coverage_bin")
    head = ("| coverage | queries | mean coverage | var Privelet | var Basic | Basic/Privelet (var) "
            "| MSE Privelet | MSE Basic | MRE Privelet | MRE Basic |")
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for lab in BIN_LABELS:
        n = int(meta.loc[lab, "n_queries"])
        if n == 0:
            lines.append(f"| {lab} | 0 | — | — | — | — | — | — | — | — |")
            continue
        vp, vb = piv.loc[lab, ("analytic_variance", "Privelet")], piv.loc[lab, ("analytic_variance", "Basic")]
        lines.append(
            f"| {lab} | {n} | {100 * meta.loc[lab, 'mean_coverage']:.3g} % | {fmt(vp)} | {fmt(vb)} "
            f"| {vb / vp:.3g} | {fmt(piv.loc[lab, ('empirical_mse', 'Privelet')])} "
            f"| {fmt(piv.loc[lab, ('empirical_mse', 'Basic')])} "
            f"| {100 * piv.loc[lab, ('mean_relative_error', 'Privelet')]:.3g} % "
            f"| {100 * piv.loc[lab, ('mean_relative_error', 'Basic')]:.3g} % |")
    return "\n".join(lines)


def plot(tables: list[Table], raws: dict, repeats: int, path: Path) -> None:
    from matplotlib.figure import Figure  # object API: no pyplot, no global backend state

    panels = [(t, wl) for t in tables for wl in t.workloads]
    fig = Figure(figsize=(15, 3.8 * len(panels) + 0.6), layout="constrained")
    axs = fig.subplots(len(panels), len(EPSILONS), squeeze=False)
    colours = {"Privelet": "tab:blue", "Basic": "tab:red"}
    for i, (t, wl) in enumerate(panels):
        raw = raws[(t.name, wl.name)]
        edges = fine_edges(wl.coverage.min())
        for j, eps in enumerate(EPSILONS):
            ax = axs[i, j]
            r = raw[eps]
            cnt, mcov, var = binned(wl.coverage, r["var"], edges)
            _, _, mse = binned(wl.coverage, r["mse"], edges)
            ok = cnt >= MIN_FINE_QUERIES
            for k in MECHS:
                ax.plot(mcov[ok], var[k][ok], "-", color=colours[k], label=f"{k}: exact variance")
                ax.plot(mcov[ok], mse[k][ok], "o", ms=3.5, color=colours[k], alpha=0.7,
                        label=f"{k}: empirical MSE (R={repeats})")
            kind, c = crossover(wl.coverage, r["var"]["Privelet"], r["var"]["Basic"])
            if kind == "at":
                ax.axvline(c, color="grey", ls=":", lw=1)
                ax.annotate(f"crossover {100 * c:.2g} %", (c, 0.97), xycoords=("data", "axes fraction"),
                            ha="left", va="top", fontsize=8, color="grey")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.grid(True, which="major", alpha=0.3)
            ax.set_title(f"{t.name} — {wl.name}, ε = {eps}", fontsize=10)
            ax.set_xlabel("query coverage (fraction of cells)")
            if j == 0:
                ax.set_ylabel("mean squared error")
            if i == 0 and j == 0:
                ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("Privelet vs Basic: error against query coverage (means over log-coverage bins)")
    fig.savefig(path, dpi=110)


def write_md(path: Path, tables: list[Table], df: pd.DataFrame, sums: dict, args: argparse.Namespace,
             timings: dict[str, list[float]], runtime: float, load_s: float, cmd: str) -> None:
    L: list[str] = ["# Privelet vs Basic: error against query coverage (privelet.md §5.2)", ""]
    L += [
        f"- Date: {datetime.date.today().isoformat()}",
        f"- Machine: {os.cpu_count()} cores, {platform.machine()}, {platform.system()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}",
        f"- Command: `{cmd}`",
        f"- Runtime: {runtime:.1f} s in total (loading data {load_s:.1f} s).",
        f"- ε ∈ {{{', '.join(map(str, EPSILONS))}}}; Δ = {SENSITIVITY} (one person / one pickup "
        f"changes one cell by one); {args.repeats} seeded releases per mechanism and ε "
        f"(noise seed {args.noise_seed}); workload seed {args.seed}.",
        "- Privelet: `dpcore.estimate.privelet.release` (nominal wavelet on the census axis, Haar on both "
        "grid axes); Basic: true counts + discrete Laplace(Δ/ε) per cell "
        "(`NoiseSource.discrete_laplace`).",
        "- *var* = exact analytic noise variance, mean over the bin's queries "
        "(`query_variance` / `basic_query_variance`, data-free). *MSE* = empirical mean squared "
        "error on the real table (per query averaged over the releases, then over the bin). "
        "*MRE* = mean |noisy − true| / max(true, s), s = 0.1 % of the table total (the paper's "
        "sanity bound).",
        "- Coverage = fraction of the domain's cells inside the query. The crossover is located "
        f"on log bins ({FINE_PER_DECADE} per decade, ≥ {MIN_FINE_QUERIES} queries each): the "
        "coverage above which Privelet's mean error is below Basic's in every bin, interpolated "
        "log-log.",
        "",
    ]
    bdl = {eps: discrete_laplace_variance(SENSITIVITY / eps) for eps in EPSILONS}
    L += ["Note: the exact variance of the *discrete* Laplace noise that the empirical Basic uses is "
          + ", ".join(f"{bdl[e]:.4g} (ε={e})" for e in EPSILONS)
          + " per cell, slightly below the continuous 2(Δ/ε)² "
          + ", ".join(f"{2 * (SENSITIVITY / e) ** 2:g}" for e in EPSILONS)
          + " used by `basic_query_variance`; Basic's empirical MSE is therefore up to ~8 % lower "
          "than its analytic variance at ε = 1.", ""]

    L += ["## Verdicts", ""]
    L += [f"Criteria (fixed in advance): Basic's log-log slope of mean error on mean coverage "
          f"across the coverage bins in [{BASIC_SLOPE[0]}, {BASIC_SLOPE[1]}] (linear growth); "
          f"Privelet's slope ≤ {PRIVELET_MAX_SLOPE} (nearly flat); Basic/Privelet ≥ "
          f"{MIN_TOP_RATIO:g} in the largest-coverage bin; at every ε, on the exact variances and "
          "on the empirical MSE.", ""]
    for t in tables:
        for wl in t.workloads:
            s = sums[(t.name, wl.name)]
            verdict = "HOLDS" if s["holds"] else "DOES NOT HOLD"
            e1 = s["per_eps"][EPSILONS[-1]]
            L.append(
                f"- **{t.name} — {wl.name}: Privelet error stays flat while Basic grows linearly: "
                f"{verdict}.** From bin {s['smallest_bin']} to bin {s['largest_bin']} the mean "
                f"coverage grows {s['cov_growth']:.3g}x; Basic's exact variance grows "
                f"{e1['var']['growth_b']:.3g}x (slope {e1['var']['slope_b']:.2f}), Privelet's "
                f"{e1['var']['growth_p']:.3g}x (slope {e1['var']['slope_p']:.2f}); Basic/Privelet in "
                f"the largest bin {e1['var']['top_ratio']:.3g} (exact), "
                + ", ".join(f"{s['per_eps'][e]['mse']['top_ratio']:.3g} (empirical, ε={e})"
                            for e in EPSILONS) + ".")
            for f in s["failures"]:
                L.append(f"  - fails: {f}")
    L.append("")

    L += ["## Crossover coverage (Privelet's error below Basic's above it)", "",
          "| table | workload | ε | exact variance | empirical MSE | slope Privelet (exact / emp.) "
          "| slope Basic (exact / emp.) | Basic/Privelet, largest bin (exact / emp.) |",
          "|---|---|---:|---:|---:|---:|---:|---:|"]
    for t in tables:
        for wl in t.workloads:
            s = sums[(t.name, wl.name)]
            for eps in EPSILONS:
                a, m = s["per_eps"][eps]["var"], s["per_eps"][eps]["mse"]
                L.append(f"| {t.name} | {wl.name} | {eps} | {fmt_cross(*a['cross'])} "
                         f"| {fmt_cross(*m['cross'])} | {a['slope_p']:.2f} / {m['slope_p']:.2f} "
                         f"| {a['slope_b']:.2f} / {m['slope_b']:.2f} "
                         f"| {a['top_ratio']:.3g} / {m['top_ratio']:.3g} |")
    L += ["", "The exact-variance crossover is the same at every ε because both variances scale "
          "as 1/ε².", ""]

    for t in tables:
        L += [f"## {t.name}", "", t.description + ".", ""]
        for wl in t.workloads:
            L += [f"### {wl.name} ({len(wl):,} queries)", ""]
            for eps in EPSILONS:
                d = df[(df["table"] == t.name) & (df["workload"] == wl.name)]
                L += [f"ε = {eps}:", "", md_bin_table(d, eps), ""]

    L += ["## Timings", "", "| step | mean (s) | max (s) | n |", "|---|---:|---:|---:|"]
    for k, v in timings.items():
        if v:
            L.append(f"| {k} | {np.mean(v):.3f} | {np.max(v):.3f} | {len(v)} |")
    L += ["", "Notes: the census table is 1-D (no synthetic attribute). Tract-range queries are "
          "contiguous leaf ranges in path order, outside the paper's roll-up/drill-down class; "
          "hierarchy-node queries are that class. The paper used Privelet+ on 4-attribute IPUMS "
          "microdata (m ≈ 10⁸); these tables are smaller (m = 85,395 and 1,048,576), so the "
          "absolute gap is smaller than the paper's two orders of magnitude would suggest.", "",
          "Why the tract ranges fall short: a range that is not a union of whole subtrees cuts "
          "sibling groups at its two ends, and after mean subtraction the nominal transform's "
          "variance for j of the f children of one parent is about j(f − j)/f times one "
          "coefficient's variance, i.e. it grows with the fanout of the cut group (up to "
          "2,498 tracts in one county, 254 counties in one state). A range of whole states has "
          "V ≤ 52/4 · (102/52)² ≈ 50 (in units of 2λ²) whatever its coverage; the paper's "
          "node queries stay below 4 (§3.4).", "",
          "Sampling noise of the empirical columns: the queries of a high-coverage bin overlap "
          "and share the few coarse noise terms (and, for Basic, most cells), so within one "
          "release their errors are strongly correlated; with R = 5 releases the empirical MSE "
          "of those bins rests on roughly 5 independent draws and can be off by a factor 2–3. "
          "The exact-variance columns carry no such noise. Privelet's λ includes dpcore's "
          "0.1 % grid-rounding margin (λ = Δρ(1 + 2⁻¹⁰)/ε).", ""]
    path.write_text("\n".join(L), encoding="utf-8")


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cmd = ".venv/bin/python benchmarks/privelet_paper.py" + (" " + " ".join(argv or sys.argv[1:])).rstrip()
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = "privelet_paper_quick" if args.quick else "privelet_paper"
    t_start = time.perf_counter()
    rng = np.random.default_rng(args.seed)

    print("reading census tracts …", file=sys.stderr, flush=True)
    tables = [census_table(args.queries, rng)]
    print("reading NYC Uber pickups …", file=sys.stderr, flush=True)
    tables.append(location_table(args.grid, args.queries, rng))
    load_s = time.perf_counter() - t_start

    timings: dict[str, list[float]] = {"analytic variance (s per workload and ε)": []}
    for t in tables:
        timings[f"Privelet release, {t.name} (s)"] = []
        timings[f"Basic release, {t.name} (s)"] = []
    rows: list[dict] = []
    raws: dict = {}
    sums: dict = {}
    for ti, t in enumerate(tables):
        for wi, wl in enumerate(t.workloads):
            print(f"{t.name} — {wl.name}: {len(wl)} queries …", file=sys.stderr, flush=True)
            r, raw = run_workload(t, wl, args, ti * 10 + wi, timings)
            rows += r
            raws[(t.name, wl.name)] = raw
            sums[(t.name, wl.name)] = summarise(t, wl, raw)

    df = pd.DataFrame(rows)
    csv_path, md_path, png_path = (out_dir / f"{stem}.{ext}" for ext in ("csv", "md", "png"))
    df.to_csv(csv_path, index=False)
    plot(tables, raws, args.repeats, png_path)
    runtime = time.perf_counter() - t_start
    write_md(md_path, tables, df, sums, args, timings, runtime, load_s, cmd)

    for t in tables:
        for wl in t.workloads:
            s = sums[(t.name, wl.name)]
            print(f"{t.name} — {wl.name}: "
                  f"{'HOLDS' if s['holds'] else 'DOES NOT HOLD'}")
            for eps in EPSILONS:
                a, m = s["per_eps"][eps]["var"], s["per_eps"][eps]["mse"]
                print(f"  ε={eps}: crossover exact {fmt_cross(*a['cross'])}, empirical "
                      f"{fmt_cross(*m['cross'])}; Basic/Privelet at the largest bin "
                      f"{a['top_ratio']:.3g} exact, {m['top_ratio']:.3g} empirical; slopes "
                      f"P {a['slope_p']:.2f}/{m['slope_p']:.2f}, B {a['slope_b']:.2f}/{m['slope_b']:.2f}")
            for f in s["failures"]:
                print(f"    fails: {f}")
    print(f"runtime {runtime:.1f} s; wrote {csv_path}, {md_path}, {png_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
