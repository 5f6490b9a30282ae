"""PrivTree-family variants against AG, chosen on the training shapes (issue 27, item 3).

Every variant is PrivTree's tree (Zhang, Xiao & Xie, SIGMOD 2016; the library's
:func:`~dpcore.points.mechanisms.privtree.grow_privtree`, built with its own share ε_tree of ε) and
then counts with ε_count = ε − ε_tree, answered from a fine-grid field (flat inside leaves, or the
data-free piecewise-linear prior of :func:`dpcore.points.within_leaf.piecewise_linear`).

Variants (``tree / counts / field`` in the tables)
    tree    ``s`` = ε_tree's share, ``θ`` = the split threshold (the library's defaults: s 0.5, θ 0).
    counts  ``leaf``: the leaves' counts only, each with all of ε_count (the library's PrivTree);
            ``geo r``: every node counted, the depths 0..H of the released tree (H its height) with
            geometric budgets ``ε_d ∝ r^d`` adding up to ε_count (Cormode, Procopiuc, Srivastava, Shen
            & Yu, ICDE 2012, Eq. 17: r = 2^(1/3)), a leaf above the bottom taking what its path has left
            (the library quadtree's rule, :func:`~dpcore.points.mechanisms.quadtree.node_budgets`);
            ``sub r``: every node counted, budgets allotted top-down per subtree: a node with ``R`` of
            ε_count left on its path and a subtree of height ``h`` below it takes ``R / Σ_{j≤h} r^j``
            (its share of a geometric allocation along its own deepest path) and passes the rest to its
            children; a leaf (h = 0) takes all it has left;
            in ``geo`` / ``sub`` the counts are made consistent by weighted least squares (Hay et al.
            2010; Cormode et al. 2012; :func:`dpcore.estimate.tree_inference.tree_least_squares`);
            ``leafpool``: ``leaf``, then ``ag_pool``'s pooling among siblings (:func:`pool_siblings`);
            ``leafeb``: ``leaf``, then shrunk towards the neighbours (:func:`shrink_to_neighbours`);
            ``ag2 a c2``: AG's second level under PrivTree's leaves (:func:`refine_leaves`): the leaves
            counted with a share ``a`` of ε_count, each cut into AG's ``m2 × m2`` blocks from its noisy
            count (constant ``c2``), the blocks counted with the rest, AG's least squares; ``ag2p a c2``:
            the same, then ``ag_pool``'s pooling below 2 SD;
            ``true`` (a study column, never a release): the leaves' TRUE counts, so that the error left is
            the partition's and the within-leaf rule's, the rest of ``leaf``'s being noise.
    field   ``uni``: leaves spread evenly; ``pl``: the piecewise-linear prior inside leaves
            (``ag_pool_smooth``'s rule); with ``--extra-fields`` also ``pl0`` (negative leaf counts
            set to 0 first) and ``pl^γ`` (the prior raised to the power γ inside every leaf and
            rescaled to keep its count: :func:`sharpened`).

Privacy (the argument a library mechanism would carry; pure ε-DP, k records per person)
    The tree is PrivTree's, ε_tree-DP (the library's proof, privtree.py).  Given the released tree
    (public from then on), every root-to-leaf path's node budgets ε_v add up to at most ε_count by
    construction (``leaf``: one node per path; ``geo``: depth parts plus the path remainder; ``sub``:
    each node takes a part of what its path has left).  Node v's count gets discrete Laplace noise of
    scale k/ε_v.  Adding a person's j ≤ k records changes node v's count by Δ_v, and the privacy loss
    is at most Σ_v Δ_v·ε_v/k = (1/k)·Σ_records Σ_{v on the record's path} ε_v ≤ (j/k)·ε_count ≤ ε_count.
    ``ag2``: the leaves (disjoint) get scale k/ε₁ (ε₁-DP); every leaf's block grid is a function of the
    public leaf and its released noisy count only; the blocks (disjoint, tiling the grid) get scale
    k/ε₂ (ε₂-DP); ε₁ + ε₂ = ε_count.  The budgets are functions of what was released before
    (adaptive sequential composition, Dwork & Roth 2014, Thm. 3.16: ε_tree + ε_count ≤ ε).  Least
    squares, pooling and the prior read only the release (post-processing, Prop. 2.1).  This script
    splits the budgets in floats (``split_custom``); a library version rounds each part down.

Baselines: the library's ``ag`` (every ratio's denominator), ``ag_pool_smooth`` and ``privtree``,
with the seeds of ``benchmarks/beat_ag_study.py`` (same data and workloads, 256², MRE with sanity bound
20, sizes 0.1 / 1 / 10 % pooled).  The training shapes are the default ``--datasets``; the held-out ones
(``--datasets uber,many_small,tight_wide``) were run once per chosen variant.  The commands of every
results file are in ``benchmarks/results/beat_ag_ptree.md`` and in each file's first line, e.g.

    PYTHONPATH=. nice -n 19 .venv/bin/python benchmarks/beat_ag_ptree.py --releases 8 \\
        --trees "s=0.05 th=0;s=0.1 th=0" --counts "ag2 0.2 5;ag2 0.2 7.5;ag2 0.3 5;ag2p 0.2 5;ag2p 0.2 7.5" \\
        --out benchmarks/results/beat_ag_ptree_hybrid.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
from beat_ag_study import setting_args, settings  # noqa: E402
from spatial import SIZES, SMOOTHING, _hash  # noqa: E402

from dpcore import catalog  # noqa: E402
from dpcore.core import metrics  # noqa: E402
from dpcore.data import queries  # noqa: E402
from dpcore.data.domain import paint_rects, prefix_sums, rect_sums_from_prefix  # noqa: E402
from dpcore.estimate.tree_inference import tree_least_squares  # noqa: E402
from dpcore.points.mechanisms.ag import second_level_sides, sub_blocks  # noqa: E402
from dpcore.points.mechanisms.ag_pool import pool_sparse, sum_up  # noqa: E402
from dpcore.points.mechanisms.privtree import grow_privtree, privtree_parameters  # noqa: E402
from dpcore.points.mechanisms.quadtree import node_budgets, noisy_tree_counts  # noqa: E402
from dpcore.points.unit import points_unit  # noqa: E402
from dpcore.points.within_leaf import _box_mean, leaf_labels, piecewise_linear  # noqa: E402
from dpcore.privacy.calibration import laplace_scale_for_epsilon, split_custom  # noqa: E402
from dpcore.privacy.calibration import split as split_parts  # noqa: E402
from dpcore.privacy.noise import NoiseSource  # noqa: E402


def score(field: np.ndarray, qs: np.ndarray, tags: np.ndarray, true: np.ndarray) -> float:
    est = rect_sums_from_prefix(prefix_sums(field), qs)
    return float(np.mean([metrics.mre(true[tags == s], est[tags == s], SMOOTHING) for s in SIZES]))


def fields(rects: np.ndarray, counts: np.ndarray, shape: tuple[int, int]) -> dict[str, np.ndarray]:
    """The leaves' flat spread and the piecewise-linear prior."""
    area = ((rects[:, 1] - rects[:, 0]) * (rects[:, 3] - rects[:, 2])).astype(float)
    out = {"uni": paint_rects(rects, counts / area, shape), "pl": piecewise_linear(rects, counts, shape)}
    if FIELDS_EXTRA:
        out["pl0"] = piecewise_linear(rects, np.maximum(counts, 0.0), shape)
        for g in (1.5, 2.0):
            out[f"pl^{g:g}"] = sharpened(out["pl"], rects, counts, shape, g)
    return out


def sharpened(pl: np.ndarray, rects: np.ndarray, counts: np.ndarray, shape: tuple[int, int], gamma: float) -> np.ndarray:
    """The prior raised to the power ``gamma`` inside every positive leaf and rescaled to keep the leaf's
    count (mass pushed further towards the denser neighbours; data-free post-processing)."""
    lab = leaf_labels(rects, shape)
    f = np.maximum(pl, 0.0) ** gamma
    s = np.bincount(lab.ravel(), f.ravel(), minlength=len(rects))
    ok = (s > 1e-12) & (counts > 0)
    scale = np.divide(counts, s, out=np.zeros(len(rects)), where=ok)
    return np.where(ok[lab], f * scale[lab], pl)


#: ``--extra-fields``: add ``pl0`` (negative leaf counts set to 0, then the prior)
FIELDS_EXTRA = False


def subtree_heights(parent: np.ndarray, depth: np.ndarray) -> np.ndarray:
    h = np.zeros(parent.size, dtype=np.int64)
    for d in range(int(depth.max(initial=0)), 0, -1):
        at = np.flatnonzero(depth == d)
        np.maximum.at(h, parent[at], h[at] + 1)
    return h


def sub_budgets(parent: np.ndarray, depth: np.ndarray, total: float, r: float) -> np.ndarray:
    """Top-down per-subtree geometric budgets (module docstring, ``sub r``); every path sums to
    ``total`` (up to float rounding; a library version would round down as ``path_remainders`` does)."""
    h = subtree_heights(parent, depth)
    left = np.zeros(parent.size)
    eps = np.zeros(parent.size)
    for d in range(int(depth.max(initial=0)) + 1):
        at = np.flatnonzero(depth == d)
        rem = np.full(at.size, total) if d == 0 else left[parent[at]]
        norm = np.array([sum(r ** j for j in range(int(x) + 1)) for x in h[at]])
        eps[at] = rem / norm
        left[at] = rem - eps[at]
    return eps


def ptree_variants(agg, eps: float, share: float, theta: int, counts: list[str], seed: int) -> dict[str, np.ndarray]:
    k = int(agg.sensitivity)
    eps_tree, eps_count = split_custom(eps, [share, 1.0 - share])
    t, delta = privtree_parameters(eps_tree, k)
    tree = grow_privtree(agg.counts, int(theta), t, delta, NoiseSource(seed))
    rects, parent, depth, leaf, true = tree["rects"], tree["parent"], tree["depth"], tree["leaf"], tree["count"]
    li = np.flatnonzero(leaf)
    shape = agg.counts.shape
    out: dict[str, np.ndarray] = {}
    for j, cv in enumerate(counts):
        noise = NoiseSource(_hash(seed, cv, j))
        if cv == "true":  # study only (reads the true leaf counts): the partition's and the prior's error
            est = true[li].astype(float)
        elif cv in ("leaf", "leafpool", "leafeb"):
            scale = laplace_scale_for_epsilon(eps_count, k)
            est = (true[li] + noise.discrete_laplace(scale, li.size)).astype(float)
            if cv == "leafpool":
                est = pool_siblings(est, parent[li], rects[li], 2.0 * float(np.sqrt(2.0) * scale))
            elif cv == "leafeb":
                est = shrink_to_neighbours(est, rects[li], depth[li], 2.0 * float(scale) ** 2, shape)
        elif cv.startswith("ag2"):
            kind, a1, c2 = cv.split()
            e1, e2 = split_custom(eps_count, [float(a1), 1.0 - float(a1)])
            lrects, est = refine_leaves(agg, rects[li], true[li], e1, e2, float(c2), noise, kind == "ag2p")
            for f, field in fields(lrects, est, shape).items():
                out[f"{cv} / {f}"] = field
            continue
        else:
            kind, r = cv.split()
            r = float(r)
            if kind == "geo":
                H = int(depth.max())
                parts = split_parts(eps_count, H + 1, "geometric", ratio=r) if H > 0 else [eps_count]
                b = node_budgets(depth, leaf, parts, eps_count)
            else:
                b = sub_budgets(parent, depth, eps_count, r)
            noisy, sd, _ = noisy_tree_counts(true, b, k, noise)
            est = tree_least_squares(parent, depth, noisy.astype(float), sd ** 2)[0][li]
        for f, field in fields(rects[li], est.astype(float), shape).items():
            out[f"{cv} / {f}"] = field
    return out


def pool_siblings(est: np.ndarray, group: np.ndarray, rects: np.ndarray, threshold: float) -> np.ndarray:
    """``ag_pool``'s pooling on PrivTree's leaves: among the leaves of one parent, those whose noisy count is
    below ``threshold`` (2 SD) share their summed count (clamped at 0) in proportion to their areas."""
    area = ((rects[:, 1] - rects[:, 0]) * (rects[:, 3] - rects[:, 2])).astype(float)
    low = est < threshold
    g = np.unique(group, return_inverse=True)[1]
    tot = np.bincount(g[low], est[low], minlength=g.max() + 1)
    ar = np.bincount(g[low], area[low], minlength=g.max() + 1)
    out = est.copy()
    out[low] = np.maximum(tot[g[low]], 0.0) * area[low] / ar[g[low]]
    return out


def shrink_to_neighbours(est: np.ndarray, rects: np.ndarray, depth: np.ndarray, noise_var: float,
                         shape: tuple[int, int]) -> np.ndarray:
    """Empirical-Bayes (Wiener) shrinkage of every leaf's noisy count towards ``m``, the leaf's share of its
    neighbourhood's flat density (a box of three times the leaf's height and width): ``m + k·(est − m)``
    with ``k = V/(V + σ²)``, ``V = max(mean (est − m)² − σ², 0)`` over the leaves of the same depth.  Reads
    only the release (post-processing)."""
    area = ((rects[:, 1] - rects[:, 0]) * (rects[:, 3] - rects[:, 2])).astype(float)
    lab = leaf_labels(rects, shape)
    flat = (est / area)[lab]
    h, w = rects[:, 1] - rects[:, 0], rects[:, 3] - rects[:, 2]
    box = _box_mean(flat, ((3 * h) // 2).astype(np.int32)[lab], ((3 * w) // 2).astype(np.int32)[lab])
    m = np.bincount(lab.ravel(), box.ravel(), minlength=len(rects))
    r = est - m
    out = est.copy()
    for d in np.unique(depth):
        at = depth == d
        v = max(float(np.mean(r[at] ** 2)) - noise_var, 0.0)
        out[at] = m[at] + v / (v + noise_var) * r[at]
    return out


def refine_leaves(agg, leaves: np.ndarray, true: np.ndarray, e1: float, e2: float, c2: float,
                  noise: NoiseSource, pool: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """AG's second level under PrivTree's leaves: every leaf counted with ``e1``, then cut into an
    ``m2 × m2`` block grid with AG's rule ``m2 = ceil(sqrt(n'·e2/c2))`` from its released noisy count
    ``n'``, the blocks counted with ``e2``, and each leaf with its blocks made consistent by weighted
    least squares (AG's inference, Qardaji, Yang & Li 2013); with ``pool``, then ``ag_pool``'s pooling
    below 2 SD (all leaves one group, each leaf's blocks one group).  Returns the blocks and their
    estimates."""
    k = int(agg.sensitivity)
    s1, s2 = laplace_scale_for_epsilon(e1, k), laplace_scale_for_epsilon(e2, k)
    noisy1 = true + noise.discrete_laplace(s1, true.size)
    m2 = second_level_sides(noisy1, e2, c2, k)
    subs, owner = sub_blocks(leaves, m2, m2)
    noisy2 = rect_sums_from_prefix(prefix_sums(agg.counts.astype(np.int64)), subs) + noise.discrete_laplace(s2, len(subs))
    n1 = len(leaves)
    parent = np.concatenate([np.full(n1, -1, dtype=np.int64), owner])
    depth = np.concatenate([np.zeros(n1, dtype=np.int64), np.ones(len(subs), dtype=np.int64)])
    var = np.concatenate([np.full(n1, 2.0 * float(s1) ** 2), np.full(len(subs), 2.0 * float(s2) ** 2)])
    est, post = tree_least_squares(parent, depth, np.concatenate([noisy1, noisy2]).astype(float), var)
    if pool:
        area = ((rects := np.vstack([leaves, subs]))[:, 1] - rects[:, 0]) * (rects[:, 3] - rects[:, 2])
        est = sum_up(pool_sparse(est, np.sqrt(post), parent, depth, area.astype(float), 2.0)[0], parent, depth)
    return subs, est[n1:]


def parse_tree(label: str) -> tuple[float, int]:
    kv = dict(x.split("=") for x in label.split())
    return float(kv.get("s", 0.5)), int(kv.get("th", 0))


def one_setting(agg, grid, eps: float, releases: int, tag: str, trees: list[str], counts: list[str]) -> dict[str, float]:
    acc: dict[str, float] = {}

    def add(key: str, v: float) -> None:
        acc[key] = acc.get(key, 0.0) + v / releases

    for r in range(releases):
        qs, tags = queries.random_rectangles(grid, SIZES, 1000, shape="random", seed=_hash("workload", 256, 256, r))
        true = queries.true_answers(agg.counts, qs)
        for name in ("ag", "ag_pool_smooth", "privtree"):
            mech = catalog.get("points", name)
            plan = mech.plan(agg.grid, eps, {}, unit=points_unit(agg.user_cap))
            rel = mech.release(plan, agg, NoiseSource(_hash("study", tag, eps, name, r))).inner
            add(name, score(rel.density(), qs, tags, true))
        for label in trees:
            share, theta = parse_tree(label)
            for k, field in ptree_variants(agg, eps, share, theta, counts, _hash("ptree", tag, eps, label, r)).items():
                add(f"{label} / {k}", score(field, qs, tags, true))
    return acc


def main(argv: list[str] | None = None) -> int:
    ap = setting_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), 3, "beat_ag_ptree.md")
    ap.add_argument("--trees", default="s=0.5 th=0;s=0.3 th=0", help="tree configs, ';'-separated")
    ap.add_argument("--counts", default="leaf;geo 1.26;sub 1.26", help="count variants, ';'-separated")
    ap.add_argument("--extra-fields", action="store_true", help="add the pl0 field")
    a = ap.parse_args(argv)
    global FIELDS_EXTRA
    FIELDS_EXTRA = a.extra_fields
    trees, counts = a.trees.split(";"), a.counts.split(";")
    rows = []
    for ds, n, grid, agg, eps in settings(a):
        acc = one_setting(agg, grid, eps, a.releases, f"{ds}:{n}", trees, counts)
        rows.append((ds, n, eps, acc))
        best = sorted(acc, key=acc.get)[:5]
        print(ds, n, eps, f"ag {acc['ag']:.2f}", " | ".join(f"{k}={acc[k] / acc['ag']:.3f}" for k in best), flush=True)
    names = [k for k in rows[0][3] if k != "ag"]
    lines = [f"# {__doc__.splitlines()[0]}", "",
             f"- Command: `benchmarks/beat_ag_ptree.py --datasets {a.datasets} --trees '{a.trees}' "
             f"--counts '{a.counts}' --releases {a.releases}`; 256², MRE (sizes 0.1/1/10 % pooled) over AG's.", "",
             "- `without gauss_paper`: the geometric mean over the other datasets' settings (gauss_paper, one "
             "concentrated Gaussian, is far below AG for every tree and dominates the mean).", "",
             "| variant | ε | geometric mean ratio | worst ratio | without gauss_paper |", "|---|---:|---:|---:|---:|"]
    for e in sorted({r[2] for r in rows}):
        for k in names:
            v = [r[3][k] / r[3]["ag"] for r in rows if r[2] == e]
            w = [r[3][k] / r[3]["ag"] for r in rows if r[2] == e and r[0] != "gauss_paper"] or v
            lines.append(f"| {k} | {e:g} | {np.exp(np.mean(np.log(v))):.3f} | {max(v):.3f} | "
                         f"{np.exp(np.mean(np.log(w))):.3f} |")
    lines += ["", "Per setting (ratio to AG):", "", "| dataset | n | ε | AG MRE | " + " | ".join(names) + " |",
              "|---|---:|---:|---:|" + "---:|" * len(names)]
    for ds, n, e, acc in rows:
        lines.append(f"| {ds} | {n:,} | {e:g} | {acc['ag']:.1f} | " + " | ".join(f"{acc[k] / acc['ag']:.3f}" for k in names) + " |")
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:7 + 2 * len(names)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
