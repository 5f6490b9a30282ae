"""Where AG's error comes from, and what a variant changes (issue 27, item 3).

For every setting (dataset × n × ε on a 256² grid, as the head-to-head ``benchmarks/spatial.py``:
same data, same random-rectangle workloads of 0.1 %, 1 % and 10 % of the area, MRE with sanity
bound 20) and every mechanism variant, the mean over ``--releases`` releases of

* the MRE per query size (``total``), and
* the *uniformity-only* MRE: the same release's leaves carrying their TRUE counts, spread evenly
  (what the partition alone costs; the rest of ``total`` is noise).  This column reads the true
  counts and is a study of the method, never a release.

Variants are ``name`` or ``name:param=value,...`` (e.g. ``agh:pool_threshold=0``), separated by
``;`` (or by ``,`` when none has parameters).  The training
shapes (roads, single_tight, earthquakes, gauss_paper) are the ones ag_pool's default was chosen on;
the held-out shapes of the head-to-head (uber, many_small, tight_wide) are for reporting.

    /work/main/.venv/bin/python benchmarks/beat_ag_study.py --datasets roads,single_tight \\
        --variants 'ag;ag_pool;ag_pool:pool_threshold=1' --out benchmarks/results/beat_ag_study_training.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
from spatial import DATASET_INFO, SIZES, SMOOTHING, _hash, make_points  # noqa: E402

from dpcore import catalog  # noqa: E402
from dpcore.core import metrics  # noqa: E402
from dpcore.data import queries  # noqa: E402
from dpcore.data.domain import Grid, aggregate_points, prefix_sums, rect_sums_from_prefix  # noqa: E402
from dpcore.points.unit import points_unit  # noqa: E402
from dpcore.privacy.noise import NoiseSource  # noqa: E402


def parse_variant(text: str) -> tuple[str, dict[str, float]]:
    name, _, rest = text.partition(":")
    params = {k: float(v) for k, v in (kv.split("=") for kv in rest.split(",") if kv)}
    return name, params


def one_setting(agg, grid: Grid, eps: float, variant: str, releases: int, tag: str) -> tuple[np.ndarray, np.ndarray]:
    """Mean MRE per query size: total and uniformity-only."""
    name, params = parse_variant(variant)
    mech = catalog.get("points", name)
    P = prefix_sums(agg.counts)
    total, uniform = np.zeros(len(SIZES)), np.zeros(len(SIZES))
    for r in range(releases):
        qs, tags = queries.random_rectangles(grid, SIZES, 1000, shape="random",
                                             seed=_hash("workload", grid.rows, grid.cols, r))
        true = queries.true_answers(agg.counts, qs)
        plan = mech.plan(agg.grid, eps, params, unit=points_unit(agg.user_cap))
        rel = mech.release(plan, agg, NoiseSource(_hash("study", tag, eps, name, r))).inner
        est = rel.answer(qs)
        leaves = rel.leaf_index()
        leaf_true = np.zeros(rel.n_rects)
        leaf_true[leaves] = rect_sums_from_prefix(P, rel.rects[leaves])
        oracle = rect_sums_from_prefix(prefix_sums(rel.spread(leaf_true, leaves)), qs)
        for i, s in enumerate(SIZES):
            m = tags == s
            total[i] += metrics.mre(true[m], est[m], SMOOTHING) / releases
            uniform[i] += metrics.mre(true[m], oracle[m], SMOOTHING) / releases
    return total, uniform


def setting_args(ap: argparse.ArgumentParser, releases: int, out: str) -> argparse.ArgumentParser:
    """The settings of the beat-AG studies: training shapes, n 10^4 and 10^5, ε 0.1 and 1 (256²)."""
    ap.add_argument("--datasets", default="roads,single_tight,earthquakes,gauss_paper")
    ap.add_argument("--ns", default="10000,100000")
    ap.add_argument("--epsilons", default="0.1,1")
    ap.add_argument("--releases", type=int, default=releases)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / out))
    return ap


def settings(a: argparse.Namespace):
    """``(dataset, n, grid, aggregate, ε)`` of every setting of :func:`setting_args`' arguments, the data
    made once per dataset and n."""
    for ds in a.datasets.split(","):
        grid = Grid(DATASET_INFO[ds].bounds, 256, 256)
        for n in (int(x) for x in a.ns.split(",")):
            lon, lat, _ = make_points(ds, n, grid)
            agg = aggregate_points(lon, lat, grid)
            for eps in (float(x) for x in a.epsilons.split(",")):
                yield ds, n, grid, agg, eps


def main(argv: list[str] | None = None) -> int:
    ap = setting_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), 3, "beat_ag_study_training.md")
    ap.add_argument("--variants", default="ag,agh")
    a = ap.parse_args(argv)
    variants = a.variants.split(";") if ";" in a.variants else a.variants.split(",")
    sizes = " / ".join(f"{100 * s:g} %" for s in SIZES)
    lines = [f"# {__doc__.splitlines()[0]}", "",
             f"- Command: `benchmarks/beat_ag_study.py --datasets {a.datasets} --variants '{a.variants}' "
             f"--releases {a.releases}`; grid 256², MRE % (sanity bound {SMOOTHING:g}) per query size {sizes}.",
             "- `ratio` = the variant's mean MRE (pooled over sizes) / the first variant's.", "",
             "| dataset | n | ε | variant | MRE | ratio | total per size | uniformity-only per size |",
             "|---|---:|---:|---|---:|---:|---|---|"]
    ratios: dict[str, list[float]] = {v: [] for v in variants}
    for ds, n, grid, agg, eps in settings(a):
        base = None
        for v in variants:
            tot, uni = one_setting(agg, grid, eps, v, a.releases, f"{ds}:{n}")
            base = tot.mean() if base is None else base
            ratios[v].append(tot.mean() / base)
            lines.append(f"| {ds} | {n:,} | {eps:g} | {v} | {tot.mean():.1f} | {tot.mean() / base:.2f} | "
                         + " / ".join(f"{x:.1f}" for x in tot) + " | "
                         + " / ".join(f"{x:.1f}" for x in uni) + " |")
            print(lines[-1], flush=True)
    lines += ["", "| variant | geometric mean ratio | worst ratio |", "|---|---:|---:|"]
    lines += [f"| {v} | {np.exp(np.mean(np.log(r))):.3f} | {max(r):.3f} |" for v, r in ratios.items()]
    Path(a.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
