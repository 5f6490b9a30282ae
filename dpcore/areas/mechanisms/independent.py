"""Independent noise per level: the inconsistent baseline.

Fioretto, Van Hentenryck & Zhu, *Differentially Private Census Data Release*, AIJ 2021, Sec. 5
(Model 1 relaxed, without rounding).

Parameters: the split of the budget over the levels (``split``, ``weights``).

Privacy: every level is measured (the total too, unless it is public under replace-one
neighbours) with the exact discrete Laplace (pure ε) or discrete Gaussian (ρ-zCDP) at
sensitivity 1 (2 under replace-one); levels compose sequentially.

Plan: every count's error is the noise of its level, so its mean and expected largest absolute
error come from the exact pmf of the noise.

Release: the noisy counts, nothing else: levels do not add up and counts may be negative.  Every
measured count is one draw of the noise, so its 95 % interval is the exact quantile of that noise
(``value ± k``, the smallest whole k with ``P(|X| ≤ k) ≥ 0.95``; ``single_draw_measured``).
"""

from __future__ import annotations

import numpy as np

from dpcore.areas import tree_plans
from dpcore.areas.counts import HierarchyCounts
from dpcore.areas.mechanisms.tree import SPLIT, WEIGHTS, TreeMechanism
from dpcore.areas.tree_plans import HierarchyRelease, HierPlan, LevelNoise
from dpcore.data.hierarchy import Hierarchy
from dpcore.privacy.noise import NoiseSource

__all__ = ["Independent"]


class Independent(TreeMechanism):
    """Every level noised on its own; nothing adjusted."""

    name = "independent"
    title = "Independent noise per level"
    summary = ("Every level gets its own noisy counts; nothing is adjusted, so levels do not add up "
               "and counts may be negative.")
    when_to_use = "A baseline to compare against; not for publication when users add areas up."
    reference = "baseline (Fioretto et al., AIJ 2021, Sec. 5, Model 1 relaxed, without rounding)"
    params = (SPLIT, WEIGHTS)
    consistent, integral, nonnegative = False, True, False
    single_draw_measured = True  # a measured level's values are its noisy counts
    counts, group_sizes = True, False
    default_definition = "pure"

    def node_variances(self, h: Hierarchy, ln: LevelNoise, *, statistic: str, neighbour: str,
                       k: int) -> tuple[list[np.ndarray], str]:
        return ([np.full(h.sizes[d], ln.var[d] if ln.measured[d] else 0.0) for d in range(h.depth + 1)],
                "exact noise distribution")

    def level_error(self, d: int, ln: LevelNoise, nv: np.ndarray, cells: int, k: int,
                    family: str) -> tuple[float, float]:
        if not ln.measured[d]:  # the public total: no error
            return super().level_error(d, ln, nv, cells, k, family)
        sd = ln.noise_sd(d)
        return (tree_plans.exact_mean_abs(ln.noises[d], ln.scales[d], sd),
                tree_plans.exact_expected_max(ln.noises[d], ln.scales[d], sd, cells))

    def release_tree(self, counts: HierarchyCounts, p: HierPlan, noise: NoiseSource) -> HierarchyRelease:
        true = counts.levels()
        public_total = self.public_total(counts, p)
        y = tree_plans.measure(true, p, noise)
        # the only unmeasured level is the public total (replace neighbours)
        values = [yy if yy is not None else true[d].copy() for d, yy in enumerate(y)]
        return HierarchyRelease(counts.hierarchy, p, tuple(np.asarray(v) for v in values), public_total, (), {},
                                measurements=tuple(y))
