"""The library's ``privtree_ag`` against the research hybrid of ``benchmarks/beat_ag_ptree.py`` (issue 27, item 3).

On the held-out settings of ``beat_ag_study.py`` (uber, many_small, tight_wide; 256², n 10^4 and 10^5,
ε 0.1 and 1) one release of the library mechanism with ``NoiseSource(seed)`` is compared with the
script's ``s=0.1 th=0 / ag2 0.2 7.5 / pl`` variant fed ONE noise stream ``NoiseSource(seed)`` for its tree
and its counts (the script itself draws the counts from a second stream).  Reported: whether the
budgets, the tree's leaves and the blocks are the same; the largest difference of the blocks'
estimates and of the fine density (the script weights the least squares by ``2t²``, the library by the
exact discrete Laplace variance, as AG does); and the same with the script given the exact variances.

    PYTHONPATH=. nice -n 19 .venv/bin/python benchmarks/privtree_ag_matches_research.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import beat_ag_ptree as B  # noqa: E402
import numpy as np  # noqa: E402
from beat_ag_study import setting_args, settings  # noqa: E402

from dpcore import catalog  # noqa: E402
from dpcore.points.mechanisms.privtree import grow_privtree, privtree_parameters  # noqa: E402
from dpcore.points.unit import points_unit  # noqa: E402
from dpcore.privacy import noise as _noise  # noqa: E402
from dpcore.privacy.calibration import laplace_scale_for_epsilon, split_custom  # noqa: E402
from dpcore.privacy.noise import NoiseSource  # noqa: E402


def script_hybrid(agg, eps: float, seed: int, exact: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple]:
    """The script's hybrid with one noise stream: (blocks, their estimates, the prior's field, budgets)."""
    k = int(agg.sensitivity)
    ns = NoiseSource(seed)
    et, ec = split_custom(eps, [0.1, 0.9])
    t, d = privtree_parameters(et, k)
    tree = grow_privtree(agg.counts, 0, t, d, ns)
    li = np.flatnonzero(tree["leaf"])
    e1, e2 = split_custom(ec, [0.2, 0.8])
    orig = B.tree_least_squares
    if exact:
        s1, s2 = laplace_scale_for_epsilon(e1, k), laplace_scale_for_epsilon(e2, k)
        ex = {2.0 * float(s1) ** 2: _noise.discrete_laplace_variance(s1),
              2.0 * float(s2) ** 2: _noise.discrete_laplace_variance(s2)}
        B.tree_least_squares = lambda p, dd, y, v: orig(p, dd, y, np.array([ex[x] for x in v.tolist()]))
    try:
        subs, est = B.refine_leaves(agg, tree["rects"][li], tree["count"][li], e1, e2, 7.5, ns)
    finally:
        B.tree_least_squares = orig
    return subs, est, B.fields(subs, est, agg.counts.shape)["pl"], (et, e1, e2)


def main(argv: list[str] | None = None) -> int:
    ap = setting_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), 1, "privtree_ag_matches_research.md")
    ap.set_defaults(datasets="uber,many_small,tight_wide")
    a = ap.parse_args(argv)
    mech = catalog.get("points", "privtree_ag")
    lines = [f"# {__doc__.splitlines()[0]}", "", "- Command: `benchmarks/privtree_ag_matches_research.py`; seed 12345.", "",
             "| dataset | n | ε | budgets | blocks (same) | max abs diff, estimates | max abs diff, density | "
             "with exact variances: estimates | density |", "|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for ds, n, _grid, agg, eps in settings(a):
        rel = mech.release(mech.plan(agg.grid, eps, {}, unit=points_unit(agg.user_cap)), agg, NoiseSource(12345)).inner
        leaves = rel.leaf_index()
        subs, est, pl, budgets = script_hybrid(agg, eps, 12345, False)
        subs_x, est_x, pl_x, _ = script_hybrid(agg, eps, 12345, True)
        same_b = budgets == tuple(rel.public[x] for x in ("epsilon_tree", "epsilon_leaves", "epsilon_blocks"))
        same_r = np.array_equal(rel.rects[leaves], subs) and np.array_equal(subs, subs_x)
        dens = rel.density()
        lines.append(f"| {ds} | {n:,} | {eps:g} | {'same' if same_b else 'DIFFER'} | {len(subs):,} "
                     f"({'yes' if same_r else 'NO'}) | {np.max(np.abs(rel.noisy[leaves] - est)):.3g} | "
                     f"{np.max(np.abs(dens - pl)):.3g} | {np.max(np.abs(rel.noisy[leaves] - est_x)):.2g} | "
                     f"{np.max(np.abs(dens - pl_x)):.2g} |")
        print(lines[-1], flush=True)
    Path(a.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
