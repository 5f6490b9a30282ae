"""Reproduce the HTF paper's comparison (htf.md §5.5, Figures 3–6; protocol §5.6).

Datasets
    * synthetic Gaussian data, σ ∈ {20, 50, 100} cells of a 1024 grid, n = 1,000,000
      (htf.md §5.1; the paper gives no n, domain or border rule: the generator in
      :func:`dpcore.points.evaluate.synthetic_aggregate` is OUR guess, one centre, fixed seed);
    * the real NYC Uber pickups of April 2014 (../shared/data/points/), over the public
      "New York City core" preset bounds -74.06,40.56,-73.70,40.92 (dpcore.data.domain.PRESETS).
      It stands in for the paper's Los Angeles data, which is not public.
    All on a 1024 x 1024 grid.
Mechanisms
    htf, ag, ug, quadtree, kdtree, identity, uniform with their default (paper) parameters;
    any that is not registered yet is skipped with a note.
Workloads
    ε ∈ {0.1, 0.3, 0.5}; 2,000 queries of 2 %, 6 % and 10 % of the area, random shape and
    squares (htf.md §5.2), redrawn each repeat and shared by all mechanisms; 5 repeats.
    MRE with sanity bound 20 (htf.md §1.5).

It writes benchmarks/results/htf_paper.csv (one row per dataset, mechanism, ε, shape,
size, repeat), htf_paper.md (tables of MRE % ± SE per dataset) and htf_paper.png, and
prints whether each of the paper's claims holds, computed from these numbers:

    1. HTF is ahead of every baseline (lowest mean MRE in every setting);
    2. its margin is larger at low ε (ratio best-baseline MRE / HTF MRE at ε = 0.1 vs 0.5);
    3. its margin over UG grows with sparsity (σ = 20 -> 50 -> 100, ε = 0.1, mixed workload);
    4. the protocol's ordering HTF < UG < Identity < Uniform on the clustered synthetic data.

Parameter sweeps (Figures 3, 4 and 5), part of the default run, alone with ``--sweeps``
    On the NYC Uber data and the Gaussian σ = 50 data, random-shape mixed workload
    (2/6/10 %, ``--queries`` per size), ε ∈ {0.1, 0.3, 0.5}, ``--repeats`` (at least 3):
    * Fig. 3: HTF (default parameters, θ = 50, its own private height) vs kd-tree at fixed
      heights 8, 10, …, 20;
    * Fig. 5: HTF vs quadtree at heights 4 … 10 (those the grid allows);
    * Fig. 4: HTF with θ ∈ {10, 50, 100} vs UG and AG.
    Every configuration is one call of dpcore.points.evaluate.evaluate with ``params`` (labels such
    as "kdtree h=12", "quadtree h=6", "htf θ=50"); all share the workloads of a repeat. It
    writes htf_paper_sweeps.csv (long), .md (tables per dataset and figure) and .png, and
    prints, computed from the numbers:

    a. kd-tree / quadtree MRE is U-shaped in the height (minimum strictly inside the range);
    b. HTF beats kd-tree / quadtree at every height and ε;
    c. HTF's MRE is U-shaped in θ with θ = 50 the best or within 10 % of it;
    d. HTF (θ = 50) beats UG and AG at every ε.

Run from the repository root::

    .venv/bin/python benchmarks/htf_paper.py              # full run: comparison + sweeps
    .venv/bin/python benchmarks/htf_paper.py --no-sweeps  # the comparison only
    .venv/bin/python benchmarks/htf_paper.py --sweeps     # the sweeps only
    .venv/bin/python benchmarks/htf_paper.py --quick      # smoke run, writes htf_paper_quick.* and
                                                          # htf_paper_sweeps_quick.*

Release noise is seeded (``--noise-seed``, default 0) so that a run can be repeated; this
is a benchmark on synthetic and public data, never a release.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dpcore import catalog  # noqa: E402
from dpcore.data.domain import PRESETS, Grid, aggregate_points  # noqa: E402
from dpcore.data.points import load_points_file  # noqa: E402
from dpcore.points import evaluate as ev  # noqa: E402

PAPER_MECHANISMS = ["htf", "ag", "ug", "quadtree", "kdtree", "identity", "uniform"]
EPSILONS = [0.1, 0.3, 0.5]
SIZES = (0.02, 0.06, 0.10)
SHAPES = ("random", "square")
SIGMAS = [20, 50, 100]
BOUNDS = PRESETS["New York City core (Manhattan, Brooklyn, Queens, Bronx)"]
UBER = ROOT.parent / "shared" / "data" / "points" / "uber_nyc_pickups_2014-04.csv.gz"
RESULTS = ROOT / "benchmarks" / "results"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5, help="releases per mechanism and ε (default 5)")
    p.add_argument("--queries", type=int, default=2000, help="queries per size and shape (default 2000)")
    p.add_argument("--n", type=int, default=1_000_000, help="points per synthetic dataset (default 1,000,000)")
    p.add_argument("--grid", type=int, default=1024, help="grid side (default 1024)")
    p.add_argument("--noise-seed", type=int, default=0, help="seed of the (benchmark-only) noise")
    p.add_argument("--seed", type=int, default=0, help="seed of the query workloads")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: n = 100,000, 256 x 256 grid, 200 queries, 2 repeats; writes htf_paper_quick.*")
    p.add_argument("--out-dir", default=str(RESULTS), help="where to write the results")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--sweeps", action="store_true",
                       help="run only the parameter sweeps of Figs. 3-5 (writes htf_paper_sweeps.*)")
    which.add_argument("--no-sweeps", action="store_true",
                       help="run only the comparison of all mechanisms (writes htf_paper.*)")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats, args.queries, args.n, args.grid = 2, 200, 100_000, 256
    return args


# ---------------------------------------------------------------- data


def datasets(args: argparse.Namespace, grid: Grid,
             sigmas: list[int] | None = None) -> list[tuple[str, object]]:
    out = []
    for sigma in SIGMAS if sigmas is None else sigmas:
        spec = ev.SyntheticSpec(float(sigma), args.n)
        print(f"generating {spec.label} …", file=sys.stderr, flush=True)
        out.append((f"Gaussian σ={sigma}", ev.synthetic_aggregate(grid, spec.sigma, spec.n, seed=spec.seed)))
    if UBER.exists():
        print(f"reading {UBER.name} …", file=sys.stderr, flush=True)
        table = load_points_file(UBER, UBER.name, lat_col="Lat", lon_col="Lon")
        out.append(("NYC Uber 2014-04", aggregate_points(table.lon, table.lat, grid)))
    else:
        print(f"note: {UBER} not found; the real dataset is skipped", flush=True)
    return out


# ---------------------------------------------------------------- summaries


def mixed_summary(results: pd.DataFrame) -> pd.DataFrame:
    """Fig. 6's mixed workload: random-shape queries of all sizes pooled (equal numbers per size,
    so its MRE is the mean of the per-size MREs), mean and SE over repeats."""
    r = results[results["shape"] == "random"]
    per_rep = (r.groupby(["dataset", "mechanism", "epsilon", "repeat"], sort=False)["mre_percent"]
               .mean().reset_index())
    g = per_rep.groupby(["dataset", "mechanism", "epsilon"], sort=False)["mre_percent"]
    out = g.agg(mre_percent="mean", mre_sd="std", repeats="count").reset_index()
    out["mre_se"] = out["mre_sd"] / np.sqrt(out["repeats"])
    return out


def mixed_table(mixed: pd.DataFrame, dataset: str) -> pd.DataFrame:
    d = mixed[mixed["dataset"] == dataset]
    cells = d.assign(cell=[ev.format_mre(m, s) for m, s in zip(d["mre_percent"], d["mre_se"], strict=True)])
    t = cells.pivot(index="mechanism", columns="epsilon", values="cell")
    t = t.reindex(index=list(dict.fromkeys(d["mechanism"])), columns=list(dict.fromkeys(d["epsilon"])))
    t.columns = [f"ε = {e:g}" for e in t.columns]
    t.index.name = "mechanism"
    return t


def md_table(t: pd.DataFrame) -> str:
    lines = ["| " + " | ".join([t.index.name or ""] + list(map(str, t.columns))) + " |",
             "|" + "|".join(["---"] + ["---:"] * len(t.columns)) + "|"]
    lines += ["| " + " | ".join([str(i)] + list(map(str, row))) + " |" for i, row in t.iterrows()]
    return "\n".join(lines)


# ---------------------------------------------------------------- claims


def check_claims(summary: pd.DataFrame, mixed: pd.DataFrame, present: list[str]) -> list[str]:
    """Each claim as 'HOLDS' / 'DOES NOT HOLD' / 'CANNOT BE CHECKED', with the numbers behind it."""
    lines: list[str] = []
    baselines = [m for m in present if m != "htf"]
    keys = ["dataset", "epsilon", "shape", "query_size"]

    # 1. HTF ahead of every baseline
    if "htf" not in present or not baselines:
        lines.append("1. HTF ahead of every baseline: CANNOT BE CHECKED (htf is not registered).")
    else:
        wins, total, losses = 0, 0, []
        for key, d in summary.groupby(keys, sort=False):
            m = d.set_index("mechanism")["mre_percent"]
            best_other = m[baselines].idxmin()
            total += 1
            if m["htf"] < m[best_other]:
                wins += 1
            else:
                losses.append(f"{key[0]}, ε={key[1]:g}, {key[2]} {key[3]:.0%}: {best_other} "
                              f"{m[best_other]:.4g} vs htf {m['htf']:.4g}")
        verdict = "HOLDS" if wins == total else "DOES NOT HOLD"
        lines.append(f"1. HTF ahead of every baseline ({', '.join(baselines)}): {verdict} — lowest mean "
                     f"MRE in {wins} of {total} settings (dataset × ε × shape × size).")
        lines += [f"     not ahead: {x}" for x in losses[:10]]
        if len(losses) > 10:
            lines.append(f"     … and {len(losses) - 10} more")

    # 2. margin larger at low ε
    lo, hi = min(EPSILONS), max(EPSILONS)
    if "htf" not in present or not baselines:
        lines.append("2. HTF's margin larger at low ε: CANNOT BE CHECKED (htf is not registered).")
    else:
        bigger, total, detail = 0, 0, []
        for key, d in summary.groupby(["dataset", "shape", "query_size"], sort=False):
            ratio = {}
            for e in (lo, hi):
                m = d[d["epsilon"] == e].set_index("mechanism")["mre_percent"]
                ratio[e] = m[baselines].min() / m["htf"]
            total += 1
            bigger += ratio[lo] > ratio[hi]
            if key[1] == "random" and math.isclose(key[2], SIZES[1]):
                detail.append(f"{key[0]}: {ratio[lo]:.3g}x at ε={lo:g} vs {ratio[hi]:.3g}x at ε={hi:g}")
        verdict = "HOLDS" if bigger == total else "DOES NOT HOLD"
        lines.append(f"2. HTF's margin (best baseline MRE / HTF MRE) larger at ε={lo:g} than at ε={hi:g}: "
                     f"{verdict} — in {bigger} of {total} (dataset × shape × size) cases.")
        lines += [f"     {x} (random shape, {SIZES[1]:.0%})" for x in detail]

    # 3. margin over UG grows with sparsity
    syn = [f"Gaussian σ={s}" for s in SIGMAS]
    if "htf" not in present or "ug" not in present:
        lines.append("3. HTF's margin over UG grows with sparsity σ: CANNOT BE CHECKED "
                     "(needs htf and ug registered).")
    else:
        verdicts = {}
        for e in EPSILONS:
            ratios = []
            for name in syn:
                m = mixed[(mixed["dataset"] == name) & (mixed["epsilon"] == e)].set_index("mechanism")["mre_percent"]
                ratios.append(m["ug"] / m["htf"])
            grows = all(b >= a for a, b in zip(ratios, ratios[1:], strict=False))
            verdicts[e] = (grows, " -> ".join(f"{r:.3g}x" for r in ratios))
        grows, text = verdicts[lo]
        lines.append(f"3. HTF's margin over UG grows with sparsity (UG MRE / HTF MRE, mixed workload, "
                     f"ε={lo:g} as in the paper's Fig. 6): {'HOLDS' if grows else 'DOES NOT HOLD'} — "
                     f"{text} for σ = 20 -> 50 -> 100.")
        for e in EPSILONS:
            if e != lo:
                g, t = verdicts[e]
                lines.append(f"     at ε={e:g}: {t} ({'grows' if g else 'does not grow'})")

    # 4. protocol ordering on the synthetic data
    order = [m for m in ["htf", "ug", "identity", "uniform"] if m in present]
    missing = [m for m in ["htf", "ug", "identity", "uniform"] if m not in present]
    if len(order) < 2:
        lines.append("4. Ordering HTF < UG < Identity < Uniform: CANNOT BE CHECKED.")
    else:
        ok, total = 0, 0
        for _key, d in mixed[mixed["dataset"].isin(syn)].groupby(["dataset", "epsilon"], sort=False):
            m = d.set_index("mechanism")["mre_percent"]
            total += 1
            ok += all(m[a] < m[b] for a, b in zip(order, order[1:], strict=False))
        note = f" (without {', '.join(missing)}: not registered)" if missing else ""
        lines.append(f"4. Ordering {' < '.join(order)} on the synthetic data, mixed workload{note}: "
                     f"{'HOLDS' if ok == total else 'DOES NOT HOLD'} — in {ok} of {total} (σ × ε) cases.")
    return lines


# ---------------------------------------------------------------- sweeps (Figs. 3, 4, 5)

SWEEP_SIGMA = 50
SWEEP_DATASETS = (f"Gaussian σ={SWEEP_SIGMA}", "NYC Uber 2014-04")
KD_HEIGHTS = [8, 10, 12, 14, 16, 18, 20]
QUAD_HEIGHTS = [4, 5, 6, 7, 8, 9, 10]
THETAS = [10, 50, 100]
HTF_THETA = 50  # HTF's default θ: its line in Figs. 3 and 5 and its entry in claim (d)
NEAR_BEST = 0.10  # claim (c): θ = 50 counts as "near the best" within 10 % of the best θ's MRE
SWEEP_MIN_REPEATS = 3
SWEEP_SEED_OFFSET = 1_000_000  # sweep noise seeds start here (above the comparison's)
FIGURES = {
    "fig3": "Fig. 3: HTF vs kd-tree over fixed kd-tree heights",
    "fig5": "Fig. 5: HTF vs quadtree over quadtree heights",
    "fig4": "Fig. 4: HTF's stop count θ vs UG and AG",
}


@dataclass(frozen=True)
class SweepConfig:
    label: str
    mechanism: str
    figure: str
    parameter: str | None = None
    value: int | None = None


def sweep_configs(grid: Grid) -> list[SweepConfig]:
    """The configurations of the sweeps; heights the grid cannot hold (they would be capped to
    a height already in the list) are left out."""
    registered = catalog.names("points")
    out = [SweepConfig(f"htf θ={t}", "htf", "fig4", "theta", t) for t in THETAS]
    out += [SweepConfig(m, m, "fig4") for m in ("ug", "ag")]
    for mech, heights, fig in (("kdtree", KD_HEIGHTS, "fig3"), ("quadtree", QUAD_HEIGHTS, "fig5")):
        if mech in registered:
            cls = catalog.get("points", mech)
            out += [SweepConfig(f"{mech} h={h}", mech, fig, "height", h) for h in heights
                    if cls.effective_height(grid, h) == h]
    missing = sorted({c.mechanism for c in out} - set(registered))
    for m in missing:
        print(f"note: mechanism '{m}' is not registered; its sweep configurations are skipped")
    return [c for c in out if c.mechanism in registered]


def sweep_summary(results: pd.DataFrame) -> pd.DataFrame:
    """Mixed workload per configuration: the mean of the per-size MREs of a repeat (equal numbers
    of queries per size), then mean and SE over the repeats."""
    keys = ["dataset", "config", "mechanism", "parameter", "value", "epsilon"]
    per_rep = (results.groupby(keys + ["repeat"], sort=False, dropna=False)["mre_percent"]
               .mean().reset_index())
    g = per_rep.groupby(keys, sort=False, dropna=False)["mre_percent"]
    out = g.agg(mre_percent="mean", mre_sd="std", repeats="count").reset_index()
    out["mre_se"] = out["mre_sd"] / np.sqrt(out["repeats"])
    return out


def _cell(mixed: pd.DataFrame, dataset: str, config: str, eps: float) -> tuple[float, float]:
    row = mixed[(mixed["dataset"] == dataset) & (mixed["config"] == config)
                & np.isclose(mixed["epsilon"], eps)]
    if row.empty:
        return math.nan, math.nan
    return float(row["mre_percent"].iloc[0]), float(row["mre_se"].iloc[0])


def _clearly_below(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """a's mean is more than 2 combined standard errors below b's."""
    se = math.sqrt(np.nan_to_num(a[1]) ** 2 + np.nan_to_num(b[1]) ** 2)
    return b[0] - a[0] > 2 * se


def _family(configs: list[SweepConfig], mechanism: str) -> list[SweepConfig]:
    return sorted((c for c in configs if c.mechanism == mechanism and c.value is not None),
                  key=lambda c: c.value)


def check_sweeps(mixed: pd.DataFrame, configs: list[SweepConfig]) -> list[str]:
    """Claims (a)-(d) as 'HOLDS' / 'DOES NOT HOLD' / 'CANNOT BE CHECKED', with the numbers behind them."""
    lines: list[str] = []
    names = list(dict.fromkeys(mixed["dataset"]))
    htf_ref = f"htf θ={HTF_THETA}"
    have_ref = htf_ref in set(mixed["config"])
    short = {"kdtree": "kd-tree", "quadtree": "quadtree"}

    # (a) U-shape in the height
    for letter, mech in (("a1", "kdtree"), ("a2", "quadtree")):
        fam = _family(configs, mech)
        if len(fam) < 3:
            lines.append(f"({letter}) {short[mech]} MRE U-shaped in the height: CANNOT BE CHECKED "
                         f"(fewer than 3 heights).")
            continue
        hs = [c.value for c in fam]
        ok, total, detail = 0, 0, []
        for name in names:
            for e in EPSILONS:
                m = [_cell(mixed, name, c.label, e)[0] for c in fam]
                i = int(np.nanargmin(m))
                inside = 0 < i < len(m) - 1
                total += 1
                ok += inside
                detail.append(f"{name}, ε={e:g}: minimum at h={hs[i]} ({m[i]:.3g} %)"
                              f"{'' if inside else ' — AT THE EDGE'}; h={hs[0]}: {m[0]:.3g} %, "
                              f"h={hs[-1]}: {m[-1]:.3g} %")
        verdict = "HOLDS" if ok == total else "DOES NOT HOLD"
        lines.append(f"({letter}) {short[mech]} MRE U-shaped in the height (minimum strictly inside "
                     f"h = {hs[0]}..{hs[-1]}): {verdict} — in {ok} of {total} (dataset × ε) cases.")
        lines += [f"     {x}" for x in detail]

    # (b) HTF beats every height
    for letter, mech in (("b1", "kdtree"), ("b2", "quadtree")):
        fam = _family(configs, mech)
        if not fam or not have_ref:
            lines.append(f"({letter}) HTF beats {short[mech]} at every height and ε: CANNOT BE CHECKED.")
            continue
        wins, clear, total, losses = 0, 0, 0, []
        for name in names:
            for e in EPSILONS:
                h = _cell(mixed, name, htf_ref, e)
                for c in fam:
                    o = _cell(mixed, name, c.label, e)
                    total += 1
                    if h[0] < o[0]:
                        wins += 1
                        clear += _clearly_below(h, o)
                    else:
                        sig = " (by more than 2 SE)" if _clearly_below(o, h) else " (within 2 SE)"
                        losses.append(f"{name}, ε={e:g}: {c.label} {o[0]:.3g} vs {htf_ref} {h[0]:.3g}{sig}")
        verdict = "HOLDS" if wins == total else "DOES NOT HOLD"
        lines.append(f"({letter}) HTF ({htf_ref}) beats {short[mech]} at every height and ε: {verdict} — "
                     f"lower mean MRE in {wins} of {total} (dataset × ε × height) cases "
                     f"({clear} by more than 2 SE).")
        for name in names:
            n_lost = sum(x.startswith(f"{name},") for x in losses)
            lines.append(f"     {name}: HTF behind in {n_lost} of {len(EPSILONS) * len(fam)}")
        lines += [f"     behind: {x}" for x in losses[:12]]
        if len(losses) > 12:
            lines.append(f"     … and {len(losses) - 12} more")

    # (c) U-shape in θ, 50 near the best
    thetas = [c for c in configs if c.mechanism == "htf" and c.parameter == "theta"]
    thetas.sort(key=lambda c: c.value)
    if len(thetas) < 3 or not have_ref:
        lines.append("(c) HTF MRE U-shaped in θ, θ=50 near the best: CANNOT BE CHECKED.")
    else:
        ts = [c.value for c in thetas]
        u_ok, near_ok, clear_worse, total, detail = 0, 0, 0, 0, []
        for name in names:
            for e in EPSILONS:
                cells = [_cell(mixed, name, c.label, e) for c in thetas]
                m = [v for v, _ in cells]
                i = int(np.nanargmin(m))
                ref = m[ts.index(HTF_THETA)]
                inside = 0 < i < len(m) - 1
                near = ref <= (1 + NEAR_BEST) * m[i]
                total += 1
                u_ok += inside
                near_ok += near
                clear_worse += _clearly_below(cells[i], cells[ts.index(HTF_THETA)])
                detail.append(f"{name}, ε={e:g}: " + ", ".join(f"θ={t}: {v:.3g}" for t, v in zip(ts, m, strict=True))
                              + f" -> best θ={ts[i]}; θ={HTF_THETA} is {ref / m[i]:.3g}x the best")
        verdict = "HOLDS" if u_ok == total and near_ok == total else "DOES NOT HOLD"
        lines.append(f"(c) HTF MRE U-shaped in θ ∈ {{{', '.join(map(str, ts))}}} (best θ strictly inside) "
                     f"with θ={HTF_THETA} the best or within {NEAR_BEST:.0%} of it: {verdict} — U-shaped in "
                     f"{u_ok} of {total} (dataset × ε) cases; θ={HTF_THETA} near the best in {near_ok} of {total} "
                     f"(worse than the best θ by more than 2 SE in {clear_worse} of {total}).")
        lines += [f"     {x}" for x in detail]

    # (d) HTF θ=50 beats UG and AG at every ε
    base = [b for b in ("ug", "ag") if b in set(mixed["config"])]
    if not base or not have_ref:
        lines.append(f"(d) HTF ({htf_ref}) beats UG and AG at every ε: CANNOT BE CHECKED.")
    else:
        wins, clear, total, detail = 0, 0, 0, []
        for name in names:
            for e in EPSILONS:
                h = _cell(mixed, name, htf_ref, e)
                parts = []
                for b in base:
                    o = _cell(mixed, name, b, e)
                    total += 1
                    wins += h[0] < o[0]
                    clear += h[0] < o[0] and _clearly_below(h, o)
                    parts.append(f"{b}/htf = {o[0] / h[0]:.3g}x")
                detail.append(f"{name}, ε={e:g}: htf {h[0]:.3g} %; " + ", ".join(parts))
        verdict = "HOLDS" if wins == total else "DOES NOT HOLD"
        lines.append(f"(d) HTF ({htf_ref}) beats {' and '.join(b.upper() for b in base)} at every ε: "
                     f"{verdict} — lower mean MRE in {wins} of {total} (dataset × ε × baseline) cases "
                     f"({clear} by more than 2 SE).")
        lines += [f"     {x}" for x in detail]
    return lines


def key_numbers(mixed: pd.DataFrame, configs: list[SweepConfig], eps: float) -> list[str]:
    """Best kd-tree and quadtree height and their MRE vs HTF's, per dataset, at one ε."""
    out = []
    htf_ref = f"htf θ={HTF_THETA}"
    for name in dict.fromkeys(mixed["dataset"]):
        h = _cell(mixed, name, htf_ref, eps)
        parts = [f"{htf_ref} {ev.format_mre(*h)} %"]
        for mech in ("kdtree", "quadtree"):
            fam = _family(configs, mech)
            if not fam:
                continue
            cells = [_cell(mixed, name, c.label, eps) for c in fam]
            i = int(np.nanargmin([m for m, _ in cells]))
            parts.append(f"best {mech} h={fam[i].value}: {ev.format_mre(*cells[i])} % "
                         f"({cells[i][0] / h[0]:.3g}x HTF)")
        out.append(f"{name}, ε={eps:g}: " + "; ".join(parts))
    return out


def sweep_table(mixed: pd.DataFrame, dataset: str, labels: list[str]) -> pd.DataFrame:
    d = mixed[(mixed["dataset"] == dataset) & mixed["config"].isin(labels)]
    cells = d.assign(cell=[ev.format_mre(m, s) for m, s in zip(d["mre_percent"], d["mre_se"], strict=True)])
    t = cells.pivot(index="config", columns="epsilon", values="cell")
    t = t.reindex(index=[x for x in labels if x in set(d["config"])], columns=EPSILONS)
    t.columns = [f"ε = {e:g}" for e in t.columns]
    t.index.name = "configuration"
    return t


def figure_labels(configs: list[SweepConfig], fig: str) -> list[str]:
    labels = [c.label for c in configs if c.figure == fig]
    ref = f"htf θ={HTF_THETA}"
    return labels + [ref] if fig != "fig4" and ref not in labels else labels


def plot_sweeps(mixed: pd.DataFrame, configs: list[SweepConfig], path: Path) -> None:
    from matplotlib.figure import Figure  # object API: no pyplot, no global backend state

    names = list(dict.fromkeys(mixed["dataset"]))
    htf_ref = f"htf θ={HTF_THETA}"
    colours = {e: f"C{i}" for i, e in enumerate(EPSILONS)}
    fig = Figure(figsize=(15, 3.9 * len(names) + 0.6), layout="constrained")
    axes = fig.subplots(len(names), 3, squeeze=False)
    for i, name in enumerate(names):
        d = mixed[mixed["dataset"] == name]
        for j, (mech, title) in enumerate((("kdtree", "kd-tree (Fig. 3)"), ("quadtree", "quadtree (Fig. 5)"))):
            ax = axes[i][j]
            fam = _family(configs, mech)
            for e in EPSILONS:
                rows = [_cell(mixed, name, c.label, e) for c in fam]
                if fam:
                    ax.errorbar([c.value for c in fam], [m for m, _ in rows],
                                yerr=[np.nan_to_num(s) for _, s in rows], marker="o", capsize=3,
                                color=colours[e], label=f"{mech}, ε={e:g}")
                h = _cell(mixed, name, htf_ref, e)
                if math.isfinite(h[0]):
                    ax.axhline(h[0], color=colours[e], linestyle="--", linewidth=1.2,
                               label=f"HTF (θ={HTF_THETA}, own height), ε={e:g}")
            ax.set_yscale("log")
            if fam:
                ax.set_xticks([c.value for c in fam], [str(c.value) for c in fam])
            ax.set_xlabel(f"{mech} height")
            ax.set_ylabel("MRE (%)")
            ax.set_title(f"{name}: {title}", fontsize=9)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=6.5)
        ax = axes[i][2]
        for k, label in enumerate(figure_labels(configs, "fig4")):
            r = d[d["config"] == label].sort_values("epsilon")
            if r.empty:
                continue
            style = "-" if label.startswith("htf") else ":"
            ax.errorbar(r["epsilon"], r["mre_percent"], yerr=r["mre_se"].fillna(0.0), marker="o",
                        capsize=3, linestyle=style, color=f"C{k + 3}", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(EPSILONS, [f"{e:g}" for e in EPSILONS])
        ax.minorticks_off()
        ax.set_xlabel("privacy budget ε")
        ax.set_ylabel("MRE (%)")
        ax.set_title(f"{name}: HTF θ vs UG, AG (Fig. 4)", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("HTF paper sweeps: random-shape mixed workload (2/6/10 %), MRE ± SE "
                 "(curator-only, not for publication)", fontsize=11)
    fig.savefig(path, dpi=110)


def run_sweeps(args: argparse.Namespace, grid: Grid, data: list[tuple[str, object]], t_script: float,
               argv: list[str] | None) -> None:
    """Figs. 3, 4 and 5: one evaluate() call per configuration, random-shape mixed workload."""
    t_start = time.perf_counter()
    repeats = max(args.repeats, SWEEP_MIN_REPEATS)
    if repeats != args.repeats:
        print(f"note: the sweeps use {repeats} repeats (at least {SWEEP_MIN_REPEATS}), not {args.repeats}")
    configs = sweep_configs(grid)
    noise_seed = args.noise_seed + SWEEP_SEED_OFFSET
    frames = []
    for name, agg in data:
        for i, c in enumerate(configs):
            def progress(done: int, total: int, what: str, name: str = name, i: int = i,
                         c: SweepConfig = c) -> None:
                if done < total:
                    print(f"  [{name}] {c.label} ({i + 1}/{len(configs)}): {done + 1}/{total} {what}",
                          file=sys.stderr, flush=True)

            params = {c.mechanism: {c.parameter: c.value}} if c.parameter else None
            res = ev.evaluate(agg, [c.mechanism], EPSILONS, SIZES, n_queries=args.queries, repeats=repeats,
                              shape="random", seed=args.seed, params=params, noise_seed=noise_seed,
                              progress=progress)
            noise_seed += len(EPSILONS) * repeats  # no noise seed is reused
            res.insert(0, "dataset", name)
            res.insert(1, "config", c.label)
            res.insert(2, "figure", c.figure)
            res.insert(4, "parameter", c.parameter or "")
            res.insert(5, "value", c.value)
            frames.append(res)
    results = pd.concat(frames, ignore_index=True)
    results["value"] = results["value"].astype("Int64")
    sweep_seconds = time.perf_counter() - t_start
    mixed = sweep_summary(results)
    verdicts = check_sweeps(mixed, configs)
    keys = key_numbers(mixed, configs, min(EPSILONS))

    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = "htf_paper_sweeps_quick" if args.quick else "htf_paper_sweeps"
    csv_path, md_path, png_path = (out_dir / f"{stem}.csv", out_dir / f"{stem}.md", out_dir / f"{stem}.png")
    results.to_csv(csv_path, index=False)
    plot_sweeps(mixed, configs, png_path)

    htf_defaults = {p.name: p.default for p in catalog.get("points", "htf").params} if "htf" in catalog.names("points") else {}
    fewer = args.queries < 2000
    md = [
        "# HTF paper parameter sweeps (htf.md §5.5, Figs. 3, 4, 5)"
        + (" — QUICK SMOKE RUN, not the benchmark" if args.quick else ""),
        "",
        *([f"- **Queries reduced to {args.queries:,} per size** (the paper uses 2,000)."] if fewer else []),
        f"- Date: {datetime.date.today().isoformat()}; machine: {os.cpu_count()} cores, "
        f"{platform.machine()}, {platform.system()}, Python {platform.python_version()}; "
        f"sweeps {sweep_seconds:,.0f} s, whole run (data included) {time.perf_counter() - t_script:,.0f} s",
        f"- Command: `.venv/bin/python {command_line(argv)}`",
        f"- Data: {', '.join(n for n, _ in data)} (as in htf_paper.md; the Uber pickups stand in for "
        f"the paper's non-public LA data; the Gaussian data is OUR generator, n = {args.n:,}), "
        f"grid {args.grid} x {args.grid} over the public NYC core bounds {BOUNDS.as_tuple()}.",
        f"- Workload: random shape and size (the paper's Figs. 3a–c, 4a–c, 5a–c), {args.queries:,} "
        f"queries of each of {', '.join(f'{s:.0%}' for s in SIZES)} of the area, redrawn each repeat "
        f"(workload seed {args.seed}) and shared by every configuration; MRE of the pooled "
        f"(mixed) workload = mean of the three per-size MREs; {repeats} repeats; ε ∈ "
        f"{{{', '.join(f'{e:g}' for e in EPSILONS)}}}; seeded benchmark noise from "
        f"{args.noise_seed + SWEEP_SEED_OFFSET}.",
        f"- Configurations (one dpcore.points.evaluate.evaluate call each, other parameters at their defaults): "
        f"kd-tree height ∈ {{{', '.join(str(c.value) for c in _family(configs, 'kdtree'))}}}; quadtree "
        f"height ∈ {{{', '.join(str(c.value) for c in _family(configs, 'quadtree'))}}}; HTF θ ∈ "
        f"{{{', '.join(map(str, THETAS))}}}; UG; AG. HTF's reference line in Figs. 3 and 5 is "
        f"htf θ={HTF_THETA} (default θ = {htf_defaults.get('theta', '?')}), with its own privately "
        f"estimated height and the default ε shares (height {htf_defaults.get('height_share', '?'):g}, "
        f"partition {htf_defaults.get('partition_share', '?'):g}), not the paper's absolute "
        "ε'_prt / ε_height preset.",
        "- MRE in percent, 100·|true − released| / max(true, 20), ± standard error of the mean over the "
        "repeats. Curator-only diagnostics, not for publication. The paper's figures give no numbers "
        "(htf.md §5.5), so only the shapes and orderings are compared.",
        "",
        "## The paper's claims, checked against these numbers",
        "",
        "```",
        *verdicts,
        "```",
        "",
        f"## Key numbers at ε = {min(EPSILONS):g} (mixed workload)",
        "",
        *[f"- {x}" for x in keys],
        "",
    ]
    for name, _ in data:
        md += [f"## {name}", ""]
        for fig, title in FIGURES.items():
            md += [f"### {title}", "", md_table(sweep_table(mixed, name, figure_labels(configs, fig))), ""]
    md_path.write_text("\n".join(md), "utf-8")

    for name, _ in data:
        for fig, title in FIGURES.items():
            print(f"{name} — {title}: MRE % ± SE, mixed workload")
            print(md_table(sweep_table(mixed, name, figure_labels(configs, fig))))
            print()
    print("The paper's sweep claims, checked against these numbers:")
    for line in verdicts:
        print(line)
    print(f"Key numbers at ε = {min(EPSILONS):g}:")
    for line in keys:
        print(f"  {line}")
    print(f"sweeps took {sweep_seconds:,.0f} s")
    for p in (csv_path, md_path, png_path):
        print(f"wrote {p.relative_to(ROOT) if p.is_relative_to(ROOT) else p}")



# ---------------------------------------------------------------- main


def command_line(argv: list[str] | None) -> str:
    return "benchmarks/htf_paper.py" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()


def run_comparison(args: argparse.Namespace, data: list[tuple[str, object]], load_seconds: float,
                   argv: list[str] | None) -> None:
    """All mechanisms with their default parameters (Fig. 6 and the squares of Figs. 3-5)."""
    registered = catalog.names("points")
    present = [m for m in PAPER_MECHANISMS if m in registered]
    skipped = [m for m in PAPER_MECHANISMS if m not in registered]
    for m in skipped:
        print(f"note: mechanism '{m}' is not registered; skipped")
    t_start = time.perf_counter() - load_seconds  # the time includes reading the data
    frames = []
    noise_seed = args.noise_seed
    for name, agg in data:
        def progress(done: int, total: int, what: str, name: str = name) -> None:
            if done < total:
                print(f"  [{name}] {done + 1}/{total} {what}", file=sys.stderr, flush=True)

        res = ev.evaluate(agg, present, EPSILONS, SIZES, n_queries=args.queries, repeats=args.repeats,
                          shape=SHAPES, seed=args.seed, noise_seed=noise_seed, progress=progress)
        noise_seed += len(present) * len(EPSILONS) * args.repeats  # no seed is reused across datasets
        res.insert(0, "dataset", name)
        frames.append(res)
    results = pd.concat(frames, ignore_index=True)
    elapsed = time.perf_counter() - t_start

    summaries = []
    for name, d in results.groupby("dataset", sort=False):
        s = ev.summarize(d.drop(columns="dataset"))
        s.insert(0, "dataset", name)
        summaries.append(s)
    summary = pd.concat(summaries, ignore_index=True)
    mixed = mixed_summary(results)
    claims = check_claims(summary, mixed, present)

    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = "htf_paper_quick" if args.quick else "htf_paper"
    csv_path, md_path, png_path = (out_dir / f"{stem}.csv", out_dir / f"{stem}.md", out_dir / f"{stem}.png")
    results.to_csv(csv_path, index=False)

    cmd = command_line(argv)
    md = [
        "# HTF paper comparison (htf.md §5.5–5.6)" + (" — QUICK SMOKE RUN, not the benchmark" if args.quick else ""),
        "",
        f"- Date: {datetime.date.today().isoformat()}; machine: {os.cpu_count()} cores, "
        f"{platform.machine()}, {platform.system()}, Python {platform.python_version()}; "
        f"total time {elapsed:,.0f} s",
        f"- Command: `.venv/bin/python {cmd}`",
        f"- Grid {args.grid} x {args.grid} over the public NYC core bounds {BOUNDS.as_tuple()}; "
        f"ε ∈ {{{', '.join(f'{e:g}' for e in EPSILONS)}}}; {args.queries:,} queries per size and shape "
        f"({', '.join(f'{s:.0%}' for s in SIZES)} of the area; random shape and squares), redrawn each "
        f"repeat (workload seed {args.seed}) and shared by all mechanisms; {args.repeats} repeats; "
        f"seeded benchmark noise from {args.noise_seed}.",
        f"- Synthetic data: OUR generator for the paper's Gaussian data (htf.md §5.1): one centre, "
        f"σ ∈ {{20, 50, 100}} cells of a 1024 grid, n = {args.n:,}, seed {ev.SYNTHETIC_SEED}. "
        "The paper states neither n nor the domain; these are guesses.",
        f"- Real data: {UBER.name} (public NYC TLC records) stands in for the paper's non-public "
        "Los Angeles data.",
        f"- Mechanisms (default parameters): {', '.join(present)}"
        + (f"; not registered, skipped: {', '.join(skipped)}" if skipped else ""),
        "- MRE in percent, 100·|true − released| / max(true, 20), mean over the queries, "
        "± standard error of the mean over the repeats.",
        "",
        "## The paper's claims, checked against these numbers",
        "",
        "```",
        *claims,
        "```",
        "",
    ]
    for name in dict.fromkeys(results["dataset"]):
        md += [f"## {name}", "", "### Mixed workload (random shape, all sizes pooled; Fig. 6)", "",
               md_table(mixed_table(mixed, name)), ""]
        s = summary[summary["dataset"] == name].drop(columns="dataset")
        body = ev.summary_markdown(s, heading="##")
        md += [body.split("\n", 1)[1] if body.startswith("Curator-only") else body, ""]
    md_path.write_text("\n".join(md), "utf-8")
    ev.plot_summary(summary[summary["shape"] == "random"], png_path,
                    "MRE vs ε, random-shape queries (HTF paper protocol)", facet_row="dataset")

    print()
    for name in dict.fromkeys(results["dataset"]):
        print(f"{name}: MRE % ± SE, mixed workload")
        print(md_table(mixed_table(mixed, name)))
        print()
    print("The paper's claims, checked against these numbers:")
    for line in claims:
        print(line)
    for p in (csv_path, md_path, png_path):
        print(f"wrote {p.relative_to(ROOT) if p.is_relative_to(ROOT) else p}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t_start = time.perf_counter()
    grid = Grid(BOUNDS, args.grid, args.grid)
    do_comparison, do_sweeps = not args.sweeps, not args.no_sweeps
    data = datasets(args, grid, SIGMAS if do_comparison else [SWEEP_SIGMA])
    load_seconds = time.perf_counter() - t_start
    if do_comparison:
        run_comparison(args, data, load_seconds, argv)
    if do_sweeps:
        if do_comparison:
            print()
        run_sweeps(args, grid, [(n, a) for n, a in data if n in SWEEP_DATASETS], t_start, argv)
    print(f"total time {time.perf_counter() - t_start:,.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
