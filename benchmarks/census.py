"""Hierarchy mechanisms on the 2020 US tract populations: accuracy, checks, speed and memory.

Data
    ../shared/data/census/us_tract_population_2020_cenpop.csv.gz (read with codes as text,
    ``encoding="utf-8-sig"``): one row per 2020 census tract, empty tracts included, so the
    table itself is the public area list (``source="table (confirmed public)"``).  Hierarchy
    nation (root) → STATEFP → COUNTYFP → TRACTCE: 1 / 52 / 3,221 / 85,395 areas.  Counts:
    the POPULATION column.
Mechanisms
    every mechanism of ``dpcore.areas.mechanisms`` that releases plain counts (exact,
    topdown_linf, topdown_l2, hay, bottom_up, independent), uniform split, add/remove
    neighbours, at
    * pure ε-DP ε = 0.1 and ε = 1 (discrete Laplace, ``budget.pure``);
    * ρ-zCDP with ρ = (√(ln(1/δ) + ε) − √(ln(1/δ)))², the classic Bun–Steinke inverse for
      ε = 1, δ = 1e-8 (exact, topdown_linf, topdown_l2 only; discrete Gaussian);
    * replace-one neighbours (public total) at ε = 1 for exact and topdown_linf.
    Each configuration is released ``--seeds`` times (seeded ``NoiseSource(seed)``, seeds
    ``--noise-seed`` … ``--noise-seed + seeds − 1``, the same seeds for every configuration).
Measured
    per level: mean / max absolute error and mean relative error (``empirical_errors``,
    |x̂ − x| / max(x, 20)), true-zero areas released positive; the analytic expected mean and
    max error of ``TreeMechanism.plan_tree`` next to them; consistency, non-negativity and
    integrality of every release (compared with what each mechanism promises); wall time of
    ``release()`` alone (``time.perf_counter``), and separately the time to read the file,
    build the Hierarchy and map the counts; peak memory (``ru_maxrss`` and tracemalloc) of
    the slowest configuration in a fresh subprocess.

Flags (thresholds fixed before the run)
    * mean error: |empirical / analytic − 1| > max(0.10, 4/√(cells·seeds)) (4 standard errors
      of a mean of |Laplace| draws, whose SD equals their mean; never tighter than 10 %);
    * max error: empirical / analytic outside [0.75, 1.33] on levels with ≥ 50 cells;
    * a check that contradicts what the mechanism promises (consistent / integral / non-negative);
    * a release slower than the 10 s target; an exception.

Run from the repository root::

    .venv/bin/python benchmarks/census.py            # 5 seeds, writes results/census.{csv,md}
    .venv/bin/python benchmarks/census.py --seeds 10
    .venv/bin/python benchmarks/census.py --quick    # 1 seed, writes results/census_quick.*

Benchmark noise is seeded so that a run can be repeated: this is a benchmark on public data,
never a release.  The empirical errors are curator-only diagnostics.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dpcore import catalog  # noqa: E402
from dpcore.areas import tree_plans  # noqa: E402
from dpcore.areas.counts import HierarchyCounts  # noqa: E402
from dpcore.core import metrics  # noqa: E402
from dpcore.data.hierarchy import Hierarchy  # noqa: E402
from dpcore.privacy import budget  # noqa: E402
from dpcore.privacy.budget import PrivacyCost  # noqa: E402
from dpcore.privacy.noise import NoiseSource  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
TRACTS = DATA / "census" / "us_tract_population_2020_cenpop.csv.gz"
RESULTS = ROOT / "benchmarks" / "results"
LEVELS = ["STATEFP", "COUNTYFP", "TRACTCE"]
LEVEL_LABEL = {"total": "nation", "STATEFP": "state", "COUNTYFP": "county", "TRACTCE": "tract"}
EXPECTED_COUNT_MECHANISMS = ["exact", "topdown_linf", "topdown_l2", "hay", "bottom_up", "independent"]
EPSILONS = [0.1, 1.0]
ZCDP_EPS, ZCDP_DELTA = 1.0, 1e-8
ZCDP_MECHANISMS = ["exact", "topdown_linf", "topdown_l2"]
REPLACE_MECHANISMS = ["exact", "topdown_linf"]
REPLACE_EPS = 1.0
TARGET_SECONDS = 10.0
MEAN_TOL, MEAN_SE_FACTOR = 0.10, 4.0
MAX_BAND, MAX_MIN_CELLS = (0.75, 1.33), 50


def classic_rho(eps: float, delta: float) -> float:
    """Bun–Steinke (2016) Prop. 1.3 inverted: the ρ with ρ + 2√(ρ ln(1/δ)) = ε."""
    L = math.log(1.0 / delta)
    return (math.sqrt(L + eps) - math.sqrt(L)) ** 2


@dataclass(frozen=True)
class Config:
    mechanism: str
    cost: PrivacyCost
    neighbour: str
    budget_label: str

    @property
    def key(self) -> str:
        return f"{self.mechanism}|{self.cost.definition}|{self.cost.value!r}|{self.neighbour}"


#: the configuration whose peak memory the brief asks for (the slowest one is probed as well)
MEMORY_CONFIG = Config("exact", budget.pure(0.1), "add_remove", "ε=0.1")


def configs() -> list[Config]:
    counts_mechs = [m for m in catalog.names("hierarchy") if catalog.get("hierarchy", m).counts]
    if sorted(counts_mechs) != sorted(EXPECTED_COUNT_MECHANISMS):
        print(f"note: mechanisms with counts = {counts_mechs}, the brief expected "
              f"{EXPECTED_COUNT_MECHANISMS}", file=sys.stderr)
    order = [m for m in EXPECTED_COUNT_MECHANISMS if m in counts_mechs] + \
            [m for m in counts_mechs if m not in EXPECTED_COUNT_MECHANISMS]
    rho = classic_rho(ZCDP_EPS, ZCDP_DELTA)
    out = []
    for eps in EPSILONS:
        for m in order:
            out.append(Config(m, budget.pure(eps), "add_remove", f"ε={eps:g}"))
    for m in ZCDP_MECHANISMS:
        out.append(Config(m, budget.zcdp(rho), "add_remove", f"ρ={rho:.5f}"))
    for m in REPLACE_MECHANISMS:
        out.append(Config(m, budget.pure(REPLACE_EPS), "replace", f"ε={REPLACE_EPS:g}"))
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5, help="seeded releases per configuration (default 5)")
    p.add_argument("--noise-seed", type=int, default=0, help="first seed of the (benchmark-only) noise")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 seed; writes census_quick.*")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocess")
    p.add_argument("--out-dir", default=str(RESULTS), help="where to write the results")
    p.add_argument("--memory-probe", metavar="MECH:DEF:VALUE:NEIGHBOUR", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.seeds = 1
    if args.seeds < 1:
        p.error("--seeds must be at least 1")
    return args


# ---------------------------------------------------------------- data


def load() -> tuple[HierarchyCounts, dict[str, float]]:
    t = {}
    t0 = time.perf_counter()
    df = pd.read_csv(TRACTS, dtype=str, encoding="utf-8-sig")
    t1 = time.perf_counter()
    h = Hierarchy.from_frame(df, LEVELS, source="table (confirmed public)")
    t2 = time.perf_counter()
    counts = HierarchyCounts.from_frame(df, h, LEVELS, "POPULATION")
    t3 = time.perf_counter()
    t["read the .csv.gz (pandas, codes as text)"] = t1 - t0
    t["Hierarchy.from_frame"] = t2 - t1
    t["HierarchyCounts.from_frame"] = t3 - t2
    # the solvers are imported lazily by the first release that needs them: time it apart
    t4 = time.perf_counter()
    from dpcore.estimate import topdown_opt, treedp  # noqa: F401
    t["import of the solvers (treedp, topdown_opt)"] = time.perf_counter() - t4
    return counts, t


# ---------------------------------------------------------------- one configuration


def checks(rel: tree_plans.HierarchyRelease) -> dict[str, bool]:
    vals = [np.asarray(v) for v in rel.values]
    return {
        "consistent": bool(rel.consistent),
        "nonnegative": bool(all((v >= 0).all() for v in vals)),
        "integral": bool(all(np.issubdtype(v.dtype, np.integer) or np.all(v == np.round(v)) for v in vals)),
    }


def run_config(cfg: Config, counts: HierarchyCounts, seeds: list[int]) -> tuple[list[dict], dict]:
    """All seeds of one configuration: per-level aggregated rows and per-release facts."""
    h = counts.hierarchy
    pl = catalog.get("hierarchy", cfg.mechanism).plan_tree(h, cfg.cost, neighbour=cfg.neighbour, split="uniform")
    true = counts.levels()
    per_seed: list[list[dict]] = []
    times: list[float] = []
    chk: list[dict[str, bool]] = []
    widen: list[int] = []
    for s in seeds:
        noise = NoiseSource(s)
        t0 = time.perf_counter()
        rel = catalog.get("hierarchy", cfg.mechanism).release_counts(counts, cfg.cost, noise, neighbour=cfg.neighbour, split="uniform")
        times.append(time.perf_counter() - t0)
        errs = tree_plans.empirical_errors(rel, counts)
        for e, v, t in zip(errs, rel.values, true, strict=True):
            e["rmse"] = metrics.rmse(t.astype(float).ravel(), np.asarray(v, float).ravel())
        for e, lv in zip(errs, pl.levels, strict=True):
            if not (math.isclose(e["expected_mae"], lv.mean_abs) and math.isclose(e["expected_max_abs"], lv.max_abs)):
                print(f"note: plan() and the release's plan disagree for {cfg.key} at {lv.level}", file=sys.stderr)
        per_seed.append(errs)
        chk.append(checks(rel))
        if "widenings" in rel.details:
            widen.append(int(rel.details["widenings"]))
        del rel
    info = catalog.get("hierarchy", cfg.mechanism)
    rel_facts = {
        "time_mean_s": float(np.mean(times)),
        "time_max_s": float(np.max(times)),
        "times_s": " ".join(f"{x:.3f}" for x in times),
        "consistent": all(c["consistent"] for c in chk),
        "nonnegative": all(c["nonnegative"] for c in chk),
        "integral": all(c["integral"] for c in chk),
        "promised_consistent": info.consistent,
        "promised_nonnegative": info.nonnegative,
        "promised_integral": info.integral,
        "widenings_max": max(widen) if widen else None,
    }
    rows = []
    n = len(seeds)
    for d, lv in enumerate(pl.levels):
        def col(k: str, d: int = d) -> np.ndarray:
            return np.array([ps[d][k] for ps in per_seed], float)

        mae, mx, mre, zp = col("mae"), col("max_abs_error"), col("mre_percent"), col("true_zero_released_positive")
        rmse = np.sqrt(np.mean(col("rmse") ** 2))  # pooled over the seeds
        cells = per_seed[0][d]["cells"]
        r_mean = float(mae.mean() / lv.mean_abs) if lv.mean_abs > 0 else math.nan
        r_max = float(mx.mean() / lv.max_abs) if lv.max_abs > 0 else math.nan
        tol = max(MEAN_TOL, MEAN_SE_FACTOR / math.sqrt(cells * n))
        rows.append({
            "mechanism": cfg.mechanism,
            "definition": cfg.cost.definition,
            "budget": cfg.budget_label,
            "budget_value": cfg.cost.value,
            "neighbour": cfg.neighbour,
            "depth": d,
            "level": LEVEL_LABEL.get(lv.level, lv.level),
            "cells": cells,
            "seeds": n,
            "measured": lv.measured,
            "noise": lv.noise,
            "noise_sd": lv.noise_sd,
            "mae_mean": float(mae.mean()),
            "mae_max": float(mae.max()),
            "expected_mae": lv.mean_abs,
            "mae_ratio": r_mean,
            "rmse": float(rmse),
            "expected_sd": lv.sd,
            "rmse_ratio": float(rmse / lv.sd) if lv.sd > 0 else math.nan,
            "mae_over_rmse": float(mae.mean() / rmse) if rmse > 0 else math.nan,
            "max_abs_mean": float(mx.mean()),
            "max_abs_max": float(mx.max()),
            "expected_max_abs": lv.max_abs,
            "max_ratio": r_max,
            "mre_pct_mean": float(mre.mean()),
            "mre_pct_max": float(mre.max()),
            "true_zeros": per_seed[0][d]["true_zeros"],
            "zero_released_positive_mean": float(zp.mean()),
            "zero_released_positive_max": int(zp.max()),
            "flag_mean_error": bool(math.isfinite(r_mean) and abs(r_mean - 1.0) > tol),
            "flag_max_error": bool(cells >= MAX_MIN_CELLS and math.isfinite(r_max)
                                   and not (MAX_BAND[0] <= r_max <= MAX_BAND[1])),
            "mean_tolerance": tol,
            **rel_facts,
            "analytic_basis": lv.basis,
        })
    return rows, rel_facts


# ---------------------------------------------------------------- memory


def memory_probe(spec: str) -> int:
    """Child process: load, then one release of ``spec``; prints JSON (ru_maxrss in KiB on Linux)."""
    import tracemalloc

    mech, definition, value, neighbour = spec.split(":")
    cost = budget.pure(float(value)) if definition == "pure" else budget.zcdp(float(value))
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    counts, _ = load()
    loaded_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # the load (a pandas frame of the whole table) sets the high-water mark; reset it (Linux ≥ 4.0:
    # writing 5 to /proc/self/clear_refs resets the peak RSS that ru_maxrss reports) so that the
    # peak below is that of the release
    gc.collect()
    reset = False
    try:
        Path("/proc/self/clear_refs").write_text("5")
        reset = True
    except OSError:
        pass
    before_rss = _vm_kib()
    t0 = time.perf_counter()
    catalog.get("hierarchy", mech).release_counts(counts, cost, NoiseSource(0), neighbour=neighbour)
    dt = time.perf_counter() - t0
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak_hwm = _vm_kib("VmHWM")
    gc.collect()
    tracemalloc.start()
    catalog.get("hierarchy", mech).release_counts(counts, cost, NoiseSource(1), neighbour=neighbour)
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(json.dumps({"rss_after_imports_kib": base_rss, "rss_after_load_kib": loaded_rss,
                      "hwm_reset": reset, "rss_before_release_kib": before_rss, "rss_peak_kib": peak_rss,
                      "hwm_peak_kib": peak_hwm,
                      "tracemalloc_peak_bytes": traced_peak,
                      "release_s": dt}))
    return 0


def _vm_kib(field: str = "VmRSS") -> int | None:
    """``VmRSS`` (resident now) or ``VmHWM`` (peak since exec or the last clear_refs) in KiB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def measure_memory(cfg: Config) -> dict:
    spec = f"{cfg.mechanism}:{cfg.cost.definition}:{cfg.cost.value!r}:{cfg.neighbour}"
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--memory-probe", spec],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["config"] = f"{cfg.mechanism}, {cfg.budget_label}, {cfg.neighbour}"
    return res


# ---------------------------------------------------------------- tables


def _mib(kib: int | None) -> str:
    return "–" if kib is None else f"{kib / 1024:.0f} MiB"


def md_table(header: list[str], rows: list[list], align: str | None = None) -> str:
    align = align or "l" + "r" * (len(header) - 1)
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def f3(x: float) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    a = abs(x)
    if a >= 1000:
        return f"{x:,.0f}"
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def yn(b: bool, promised: bool) -> str:
    s = "yes" if b else "no"
    return s if b == promised else f"**{s} (promised {'yes' if promised else 'no'})**"


def cfg_label(r: pd.Series | dict) -> str:
    return r["budget"] + ("" if r["neighbour"] == "add_remove" else ", replace")


def headline_rows(df: pd.DataFrame) -> list[list]:
    out = []
    for _, g in df.groupby(["mechanism", "budget", "neighbour"], sort=False):
        tr = g[g["level"] == "tract"].iloc[0]
        co = g[g["level"] == "county"].iloc[0]
        st = g[g["level"] == "state"].iloc[0]
        na = g[g["level"] == "nation"].iloc[0]
        out.append([
            tr["mechanism"], cfg_label(tr),
            f"{f3(tr['mae_mean'])} / {f3(tr['expected_mae'])}",
            f"{f3(tr['max_abs_mean'])} / {f3(tr['expected_max_abs'])}",
            f"{f3(co['mae_mean'])} / {f3(co['expected_mae'])}",
            f"{f3(st['mae_mean'])} / {f3(st['expected_mae'])}",
            f"{f3(na['mae_mean'])} / {f3(na['expected_mae'])}",
            f"{tr['mre_pct_mean']:.2f}",
            f"{tr['zero_released_positive_mean']:.0f} / {tr['true_zeros']}",
            "".join(c for c, k in (("C", "consistent"), ("N", "nonnegative"), ("I", "integral")) if tr[k]) or "–",
            f"{tr['time_mean_s']:.3f} / {tr['time_max_s']:.3f}",
        ])
    return out


HEADLINE_HEADER = ["mechanism", "budget", "tract MAE emp / exp", "tract max emp / exp",
                   "county MAE emp / exp", "state MAE emp / exp", "nation |err| emp / exp",
                   "tract MRE %", "empty tracts > 0", "checks", "time mean / max (s)"]


def level_rows(g: pd.DataFrame) -> list[list]:
    out = []
    for _, r in g.iterrows():
        flag = []
        if r["flag_mean_error"]:
            flag.append("mean")
        if r["flag_max_error"]:
            flag.append("max")
        out.append([
            r["level"], f"{r['cells']:,}", "yes" if r["measured"] else "no",
            f3(r["noise_sd"]),
            f"{f3(r['mae_mean'])} ({f3(r['mae_max'])})", f3(r["expected_mae"]), f"{r['mae_ratio']:.3f}",
            f"{f3(r['rmse'])} / {f3(r['expected_sd'])} = {r['rmse_ratio']:.3f}", f"{r['mae_over_rmse']:.3f}",
            f"{f3(r['max_abs_mean'])} ({f3(r['max_abs_max'])})", f3(r["expected_max_abs"]), f"{r['max_ratio']:.3f}",
            f"{r['mre_pct_mean']:.3f} ({r['mre_pct_max']:.3f})",
            f"{r['zero_released_positive_mean']:.1f} ({r['zero_released_positive_max']}) / {r['true_zeros']}",
            ", ".join(flag) or "",
        ])
    return out


LEVEL_HEADER = ["level", "cells", "measured", "noise SD", "MAE mean (max)", "exp. MAE", "ratio",
                "RMSE / exp. SD = ratio", "MAE/RMSE",
                "max err mean (max)", "exp. max", "ratio", "MRE % mean (max)", "true 0 → > 0 mean (max) / zeros",
                "flag"]


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.memory_probe:
        return memory_probe(args.memory_probe)
    cmd = ".venv/bin/python benchmarks/census.py" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = "census_quick" if args.quick else "census"
    load_before = os.getloadavg()
    t_script = time.perf_counter()

    mem: list[dict] = []
    failures: list[str] = []
    if not args.no_memory:
        print(f"peak memory of {MEMORY_CONFIG.mechanism} {MEMORY_CONFIG.budget_label} in a fresh process …",
              file=sys.stderr, flush=True)
        try:
            mem.append(measure_memory(MEMORY_CONFIG))
        except subprocess.CalledProcessError as exc:
            failures.append(f"memory probe {MEMORY_CONFIG.key}: {exc.stderr[-500:]}")
    t_loop = time.perf_counter()
    print("reading census tracts …", file=sys.stderr, flush=True)
    counts, load_times = load()
    h = counts.hierarchy
    print(f"hierarchy sizes {h.sizes}; total population {int(counts.leaf.sum()):,}; "
          f"empty tracts {int((counts.leaf == 0).sum()):,}", file=sys.stderr)
    for k, v in load_times.items():
        print(f"  {k}: {v:.3f} s", file=sys.stderr)

    seeds = list(range(args.noise_seed, args.noise_seed + args.seeds))
    rows: list[dict] = []
    facts: dict[str, dict] = {}
    cfgs = configs()
    for i, cfg in enumerate(cfgs):
        print(f"[{i + 1}/{len(cfgs)}] {cfg.mechanism} {cfg.budget_label} {cfg.neighbour} …",
              file=sys.stderr, flush=True)
        try:
            r, f = run_config(cfg, counts, seeds)
        except Exception as exc:  # report, do not hide: a dpcore failure is a finding
            failures.append(f"{cfg.mechanism}, {cfg.budget_label}, {cfg.neighbour}: "
                            f"{type(exc).__name__}: {exc}")
            traceback.print_exc()
            continue
        rows += r
        facts[cfg.key] = {"cfg": cfg, **f}
        print(f"    release {f['time_mean_s']:.3f} s mean, {f['time_max_s']:.3f} s max", file=sys.stderr)
    bench_s = time.perf_counter() - t_loop
    df = pd.DataFrame(rows)
    csv_path, md_path = out_dir / f"{stem}.csv", out_dir / f"{stem}.md"
    df.to_csv(csv_path, index=False)

    # peak memory: exact at ε = 0.1 was probed before the parent loaded anything (a child's
    # ru_maxrss starts at the parent's RSS at fork: Linux keeps it across exec); probe the
    # slowest configuration too if it is another one
    slowest = max(facts.values(), key=lambda f: f["time_mean_s"]) if facts else None
    if not args.no_memory and slowest is not None and slowest["cfg"].key != MEMORY_CONFIG.key:
        print(f"peak memory of {slowest['cfg'].mechanism} {slowest['cfg'].budget_label} in a fresh process …",
              file=sys.stderr)
        try:
            mem.append(measure_memory(slowest["cfg"]))
        except subprocess.CalledProcessError as exc:
            failures.append(f"memory probe {slowest['cfg'].key}: {exc.stderr[-500:]}")
    own_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    load_after = os.getloadavg()
    runtime = time.perf_counter() - t_script

    # ---- findings computed from the numbers
    flags = []
    if not df.empty:
        for _, r in df[df["flag_mean_error"] | df["flag_max_error"]].iterrows():
            what = []
            if r["flag_mean_error"]:
                what.append(f"mean error {f3(r['mae_mean'])} vs analytic {f3(r['expected_mae'])} "
                            f"(ratio {r['mae_ratio']:.3f}, tolerance ±{r['mean_tolerance']:.3f})")
            if r["flag_max_error"]:
                what.append(f"max error {f3(r['max_abs_mean'])} vs analytic {f3(r['expected_max_abs'])} "
                            f"(ratio {r['max_ratio']:.3f})")
            flags.append(f"{r['mechanism']}, {cfg_label(r)}, {r['level']}: " + "; ".join(what))
    for f in facts.values():
        c = f["cfg"]
        for k in ("consistent", "nonnegative", "integral"):
            if f[k] != f[f"promised_{k}"]:
                flags.append(f"{c.mechanism}, {c.budget_label}, {c.neighbour}: {k} = {f[k]} but "
                             f"the mechanism promises {f[f'promised_{k}']}")
        if f["time_max_s"] > TARGET_SECONDS:
            flags.append(f"{c.mechanism}, {c.budget_label}, {c.neighbour}: release took up to "
                         f"{f['time_max_s']:.2f} s > {TARGET_SECONDS:g} s target")
    worst = slowest
    speed_ok = all(f["time_max_s"] <= TARGET_SECONDS for f in facts.values()) and not failures
    rho = classic_rho(ZCDP_EPS, ZCDP_DELTA)
    eps_cks = budget.zcdp_to_approx_dp(rho, ZCDP_DELTA)

    # ---- markdown
    L = ["# Hierarchy mechanisms on the 2020 US tract populations"
         + (" — QUICK SMOKE RUN (1 seed), not the benchmark" if args.quick else ""), ""]
    L += [
        f"- Date: {datetime.date.today().isoformat()}",
        f"- Machine: {os.cpu_count()} cores, {platform.machine()}, {platform.system()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}, pandas {pd.__version__}; "
        f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after (shared machine)",
        f"- Command: `{cmd}`",
        f"- Runtime: {runtime:.1f} s in total (loading and releases {bench_s:.1f} s, rest = memory subprocesses).",
        f"- Data: `{TRACTS.relative_to(ROOT.parent)}` (read in place), hierarchy nation → STATEFP → "
        f"COUNTYFP → TRACTCE = {' / '.join(f'{s:,}' for s in h.sizes)} areas (code modes "
        f"{', '.join(h.code_modes)}); total population {int(counts.leaf.sum()):,}; "
        f"{int((counts.leaf == 0).sum()):,} tracts have population 0. The table lists every tract, so it "
        "is the public area list (`source=\"table (confirmed public)\"`).",
        f"- Budgets: pure ε ∈ {{{', '.join(f'{e:g}' for e in EPSILONS)}}} (discrete Laplace); "
        f"ρ = (√(ln(1/δ)+ε) − √(ln(1/δ)))² = {rho:.6f} for ε = {ZCDP_EPS:g}, δ = {ZCDP_DELTA:g} "
        f"(classic Bun–Steinke; dpcore's tighter CKS conversion reads this ρ as ε = {eps_cks:.3f} at that δ) "
        "with the discrete Gaussian; uniform split over the measured levels; add/remove neighbours "
        "unless marked *replace* (public total, Δ₁ = 2).",
        f"- {args.seeds} seeded releases per configuration (`NoiseSource(seed)`, seeds "
        f"{seeds[0]}–{seeds[-1]}, the same for every configuration). *emp* = mean over the seeds; "
        "*exp* = analytic expectation of `TreeMechanism.plan_tree` (data-free). MAE = mean |released − true| "
        "over the level's areas; max = largest |error| in the level; MRE = mean |error| / max(true, 20) "
        "in %. Curator-only diagnostics, not for publication.",
        "- Time: `time.perf_counter()` around `TreeMechanism.release_counts()` only (plan, noise and "
        "post-processing; not the error evaluation).",
        "",
        "## Verdicts",
        "",
        f"- **Speed target (every mechanism releases the full tract hierarchy in < {TARGET_SECONDS:g} s): "
        f"{'MET' if speed_ok else 'NOT MET'}.** Slowest: "
        + (f"{worst['cfg'].mechanism} at {worst['cfg'].budget_label} ({worst['cfg'].neighbour}), "
           f"{worst['time_mean_s']:.3f} s mean, {worst['time_max_s']:.3f} s max." if worst else "none ran."),
        f"- **Exceptions:** {len(failures) or 'none'}.",
        f"- **Flags** (mean-error ratio outside max(10 %, 4 SE); max-error ratio outside "
        f"[{MAX_BAND[0]}, {MAX_BAND[1]}] on levels with ≥ {MAX_MIN_CELLS} cells; checks contradicting "
        f"the mechanism; > {TARGET_SECONDS:g} s): {len(flags) or 'none'}.",
    ]
    L += [f"  - {x}" for x in flags + failures]
    L += ["", "## Summary (tract level unless named; emp / exp)", "",
          md_table(HEADLINE_HEADER, headline_rows(df), "ll" + "r" * (len(HEADLINE_HEADER) - 2)) if not df.empty else "",
          "", "checks: C = consistent (every level adds up), N = non-negative, I = integral, over all "
          "seeds and levels. Empty tracts > 0: true-zero tracts released with a positive count (mean over seeds).",
          ""]
    L += ["## Setup time and memory", "",
          md_table(["step", "seconds"], [[k, f"{v:.3f}"] for k, v in load_times.items()]), ""]
    if mem:
        L += [md_table(["configuration (fresh process)", "RSS after imports", "RSS before release",
                        "peak RSS during release (VmHWM)", "ru_maxrss after release",
                        "tracemalloc peak of release()", "release (s)"],
                       [[m["config"], _mib(m["rss_after_imports_kib"]), _mib(m["rss_before_release_kib"]),
                         _mib(m["hwm_peak_kib"]) + ("" if m["hwm_reset"] else " (not reset)"),
                         _mib(m["rss_peak_kib"]),
                         f"{m['tracemalloc_peak_bytes'] / 2**20:.0f} MiB", f"{m['release_s']:.3f}"] for m in mem]),
              "",
              "A child process imports dpcore, reads the table and builds the hierarchy and counts (its RSS "
              f"peaks at {_mib(mem[0]['rss_after_load_kib'])} while pandas holds the frame), drops the frame, "
              "resets the RSS high-water mark (`echo 5 > /proc/self/clear_refs`) and releases once: "
              "*peak RSS during release* is `VmHWM` after that release, i.e. the whole process (Python, "
              "numpy, pandas, the hierarchy and the counts) plus the release's working memory; "
              "`resource.getrusage(RUSAGE_SELF).ru_maxrss` is the same peak but never lower than the "
              "load's or the parent's RSS at fork (Linux keeps it across exec), so the child runs before the "
              "parent loads anything. *tracemalloc*: peak of the Python and numpy allocations made by a "
              f"second release in the same process. The benchmark process itself peaked at {_mib(own_rss)} "
              "(ru_maxrss).",
              ""]
    L += ["## Per level", "",
          "Per level and configuration: *MAE mean (max)* = mean over the seeds of the level's mean "
          "absolute error (largest of the seeds); *max err* likewise for the largest absolute error in "
          "the level; *RMSE* pooled over the seeds against the analytic per-area SD of the plan "
          "(root mean square of the node SDs); *MAE/RMSE* is the shape of the errors (0.707 for "
          "Laplace-shaped errors, which `plan()` assumes under pure ε-DP; 0.798 for normal ones, assumed "
          "under zCDP). A mean-error ratio away from 1 with an RMSE ratio near 1 means the analytic "
          "variance is right and only the assumed shape differs. The nation level is one cell: "
          "with 5 seeds its ratios are dominated by sampling noise. For `hay` (real-valued) "
          "\"true 0 → > 0\" counts any positive value, fractions included.", ""]
    for _, g in df.groupby(["mechanism", "budget", "neighbour"], sort=False):
        r0 = g.iloc[0]
        L += [f"### {r0['mechanism']}, {cfg_label(r0)} ({r0['definition']})", "",
              f"release {r0['time_mean_s']:.3f} s mean, {r0['time_max_s']:.3f} s max; consistent "
              f"{yn(r0['consistent'], r0['promised_consistent'])}, non-negative "
              f"{yn(r0['nonnegative'], r0['promised_nonnegative'])}, integral "
              f"{yn(r0['integral'], r0['promised_integral'])}"
              + (f"; DP window widenings ≤ {int(r0['widenings_max'])}" if pd.notna(r0["widenings_max"]) else "")
              + f". Analytic basis: {r0['analytic_basis']}.", "",
              md_table(LEVEL_HEADER, level_rows(g), "l" + "r" * (len(LEVEL_HEADER) - 2) + "l"), ""]
    md_path.write_text("\n".join(L), encoding="utf-8")

    # ---- stdout
    print(md_table(HEADLINE_HEADER, headline_rows(df)) if not df.empty else "no results")
    print()
    for k, v in load_times.items():
        print(f"{k}: {v:.3f} s")
    for m in mem:
        print(f"memory {m['config']}: peak RSS during release {_mib(m['hwm_peak_kib'])} (VmHWM; before "
              f"{_mib(m['rss_before_release_kib'])}; ru_maxrss {_mib(m['rss_peak_kib'])}; load peak "
              f"{_mib(m['rss_after_load_kib'])}; reset={m['hwm_reset']}), "
              f"tracemalloc peak {m['tracemalloc_peak_bytes'] / 2**20:.0f} MiB")
    print(f"speed target < {TARGET_SECONDS:g} s: {'MET' if speed_ok else 'NOT MET'}")
    print(f"flags: {len(flags)}; exceptions: {len(failures)}")
    for x in flags + failures:
        print(f"  {x}")
    print(f"runtime {runtime:.1f} s; wrote {csv_path}, {md_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
