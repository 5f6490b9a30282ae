"""Speed of the post-processing steps studied in ``beat_ag_denoise.py`` at the speed rule's size (issue 27).

The rule: 3.5 M points on 1,024², a release at most 3x reading the file plus a numpy histogram.  The
steps measured run after ``ag_pool``'s release (best of 3, data of ``benchmarks/htf_speed.py``):
the piecewise-linear prior inside leaves (``pl/leaf*``: a box filter over each cell's own leaf by
summed-area table, then a per-leaf rescaling) and the screened pool (``pool_screen`` on AG's
release).  The ratio is to the histogram alone, stricter than the rule.  None of these is a
catalogued mechanism; this says whether one built from them would meet the rule.

    /work/main/.venv/bin/python benchmarks/beat_ag_post_speed.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import htf_speed as H  # noqa: E402
from beat_ag_denoise import keep_mass_scaled, labels, leaf_box, pool_screen  # noqa: E402

from dpcore import catalog  # noqa: E402
from dpcore.data.domain import Grid, aggregate_points  # noqa: E402
from dpcore.data.synthetic import gaussian_clusters  # noqa: E402
from dpcore.points.unit import points_unit  # noqa: E402
from dpcore.privacy.noise import secure_source  # noqa: E402


def main() -> None:
    grid = Grid(H.LA, H.SIDE, H.SIDE)
    lon, lat = gaussian_clusters(H.N_POINTS, H.LA, sigma_cells=H.SIGMAS, centres=H.CENTRES,
                                 weights=H.WEIGHTS, resolution=H.SIDE, seed=H.SEED)
    t_agg, agg = H.best_of(lambda: aggregate_points(lon, lat, grid))
    src = secure_source()
    lines = ["# Post-processing steps of the third beat-AG round: speed at 3.5 M points on 1,024²", "",
             f"- Data: benchmarks/htf_speed.py's {H.N_POINTS:,} points; best of {H.REPEATS}; shared 2-core "
             f"machine (nice 10). Histogram (`aggregate_points`): {t_agg:.3f} s.",
             "- Command: `benchmarks/beat_ag_post_speed.py`", "",
             "| ε | ag_pool release (s) | + pl/leaf* (s) | AG release + pool_screen (s) | (ag_pool + pl) / histogram | leaves |",
             "|---:|---:|---:|---:|---:|---:|"]
    pool, ag = catalog.get("points", "ag_pool"), catalog.get("points", "ag")
    for eps in (0.1, 1.0):
        plan_p = pool.plan(agg.grid, eps, {}, unit=points_unit(agg.user_cap))
        plan_a = ag.plan(agg.grid, eps, {}, unit=points_unit(agg.user_cap))
        t_rel, rel = H.best_of(lambda plan_p=plan_p: pool.release(plan_p, agg, src).inner)

        def prior(rel=rel):
            leaves = rel.leaf_index()
            dens = rel.density()
            return keep_mass_scaled(leaf_box(dens, rel, leaves), labels(rel, leaves), rel.noisy, dens)

        t_pl, _ = H.best_of(prior)
        t_scr, _ = H.best_of(lambda plan_a=plan_a: pool_screen(ag.release(plan_a, agg, src).inner))
        lines.append(f"| {eps:g} | {t_rel:.3f} | {t_pl:.3f} | {t_scr:.3f} | {(t_rel + t_pl) / t_agg:.2f} | "
                     f"{int(rel.leaf.sum()):,} |")
        print(lines[-1], file=sys.stderr)
    lines += ["", "Target: release / histogram <= 3 (the rule also counts reading the file)."]
    out = Path(__file__).resolve().parent / "results" / "beat_ag_post_speed.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
