"""A data-free smoothing prior inside ``ag_pool``'s leaves, measured on the training shapes (issue 27, item 3).

Post-processing of the released estimates only (public parameters, no data): the leaves' uniform
spread ``D`` (:meth:`PartitionRelease.density`) is blurred with a Gaussian of ``σ`` fine cells
(``blur σ``), and, in the mass-preserving variant (``mp σ``), rescaled inside every leaf so the
leaf keeps its released estimate (the blur only decides how the leaf's mass lies inside it; a
leaf whose blurred mass is 0 keeps the even spread).  Same settings, seeds and workloads as
``benchmarks/beat_ag_study.py`` (256², n 10^4 and 10^5, ε 0.1 and 1, 3 releases); every entry is
the variant's mean MRE (pooled over the query sizes) over ``ag_pool``'s.  Training shapes only
(roads, single_tight, earthquakes, gauss_paper): the held-out shapes were not run.

    /work/main/.venv/bin/python benchmarks/beat_ag_smoothing.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
from scipy import ndimage  # noqa: E402
from spatial import DATASET_INFO, SIZES, SMOOTHING, _hash, make_points  # noqa: E402

from dpcore import catalog  # noqa: E402
from dpcore.core import metrics  # noqa: E402
from dpcore.data import queries  # noqa: E402
from dpcore.data.domain import Grid, aggregate_points, prefix_sums, rect_sums_from_prefix  # noqa: E402
from dpcore.points.unit import points_unit  # noqa: E402
from dpcore.privacy.noise import NoiseSource  # noqa: E402

SIGMAS = (1.0, 2.0, 4.0)


def smoothed(rel) -> dict[str, np.ndarray]:
    """The release's fine-grid estimate: even spread (``base``), blurred, blurred keeping each leaf's mass."""
    leaves = rel.leaf_index()
    dens = rel.density()
    area = ((rel.rects[:, 1] - rel.rects[:, 0]) * (rel.rects[:, 3] - rel.rects[:, 2])).astype(float)
    label = np.rint(rel.spread(np.arange(rel.n_rects, dtype=float) * area, leaves)).astype(np.int64).ravel()
    mass = np.bincount(label, dens.ravel(), minlength=rel.n_rects)
    out = {"base": dens}
    for s in SIGMAS:
        blur = ndimage.gaussian_filter(np.maximum(dens, 0.0), s, mode="nearest")
        bm = np.bincount(label, blur.ravel(), minlength=rel.n_rects)
        scale = np.divide(mass, bm, out=np.zeros_like(mass), where=bm > 1e-12)
        keep = (bm > 1e-12)[label].reshape(dens.shape)
        out[f"blur {s:g}"] = blur
        out[f"mp {s:g}"] = np.where(keep, blur * scale[label].reshape(dens.shape), dens)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="roads,single_tight,earthquakes,gauss_paper")
    ap.add_argument("--releases", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "beat_ag_smoothing.md"))
    a = ap.parse_args(argv)
    mech = catalog.get("points", "ag_pool")
    names = ["base", *(f"blur {s:g}" for s in SIGMAS), *(f"mp {s:g}" for s in SIGMAS)]
    lines = [f"# {__doc__.splitlines()[0]}", "",
             f"- Command: `benchmarks/beat_ag_smoothing.py --datasets {a.datasets} --releases {a.releases}`; "
             "ratios to `ag_pool`'s mean MRE (sizes 0.1 %, 1 %, 10 % pooled), same seeds as beat_ag_study.py.", "",
             "| dataset | n | ε | " + " | ".join(names[1:]) + " |", "|---|---:|---:|" + "---:|" * (len(names) - 1)]
    ratios: dict[tuple[str, float], list[float]] = {}
    for ds in a.datasets.split(","):
        grid = Grid(DATASET_INFO[ds].bounds, 256, 256)
        for n in (10_000, 100_000):
            lon, lat, _ = make_points(ds, n, grid)
            agg = aggregate_points(lon, lat, grid)
            for eps in (0.1, 1.0):
                acc: dict[str, float] = dict.fromkeys(names, 0.0)
                for r in range(a.releases):
                    qs, tags = queries.random_rectangles(grid, SIZES, 1000, shape="random",
                                                         seed=_hash("workload", 256, 256, r))
                    true = queries.true_answers(agg.counts, qs)
                    plan = mech.plan(agg.grid, eps, {}, unit=points_unit(agg.user_cap))
                    rel = mech.release(plan, agg, NoiseSource(_hash("study", f"{ds}:{n}", eps, "ag_pool", r))).inner
                    for k, field in smoothed(rel).items():
                        est = rect_sums_from_prefix(prefix_sums(field), qs)
                        acc[k] += float(np.mean([metrics.mre(true[tags == s], est[tags == s], SMOOTHING)
                                                 for s in SIZES]))
                row = [acc[k] / acc["base"] for k in names[1:]]
                for k, v in zip(names[1:], row, strict=True):
                    ratios.setdefault((k, eps), []).append(v)
                lines.append(f"| {ds} | {n:,} | {eps:g} | " + " | ".join(f"{v:.3f}" for v in row) + " |")
                print(lines[-1], flush=True)
    lines += ["", "| variant | ε | geometric mean ratio | worst ratio |", "|---|---:|---:|---:|"]
    lines += [f"| {k} | {e:g} | {np.exp(np.mean(np.log(v))):.3f} | {max(v):.3f} |" for (k, e), v in sorted(ratios.items())]
    Path(a.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
