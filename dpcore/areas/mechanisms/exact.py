"""Exact integer least squares on the tree (tree DP): the census paper's release.

Fioretto, Van Hentenryck & Zhu, *Differentially Private Census Data Release*, AIJ 2021,
Sec. 6–7, Algorithm 1 (in an equivalent form), and §1.8 for group sizes.

Parameters: the split of the budget over the levels (``split``, ``weights``).

Privacy: every level is measured (the total too, unless it is public under replace-one
neighbours) with the exact discrete Laplace (pure ε) or discrete Gaussian (ρ-zCDP) calibrated to
the level's share and the sensitivities of :func:`dpcore.areas.tree_plans.sensitivities`
(count 1/1; raw group sizes 2/√2, Lemma 4; doubled under replace-one); levels compose
sequentially (Thm 1).

Plan: the expected error of every area is the posterior variance of the least-squares estimate
(Hay et al., PVLDB 2010), which ignores the effect of non-negativity and rounding (they depend
on the data: ours).

Release: the noisy levels, then the closest non-negative, integral, consistent counts in the
weighted least-squares sense, found exactly by the dynamic program with convex cost tables
(:func:`dpcore.estimate.treedp.solve_l2`); group-size histograms on the k-copy tree T′ under a
dummy root fixed to the public number of groups N.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dpcore.areas import tree_plans
from dpcore.areas.counts import HierarchyCounts
from dpcore.areas.mechanisms.tree import SPLIT, WEIGHTS, TreeMechanism
from dpcore.areas.tree_plans import HierarchyRelease, HierPlan, LevelNoise
from dpcore.data.hierarchy import Hierarchy
from dpcore.estimate import treedp
from dpcore.estimate.tree_inference import level_least_squares
from dpcore.privacy.noise import NoiseSource

__all__ = ["ExactTreeDP"]


class ExactTreeDP(TreeMechanism):
    """Noise on every level, then the exact integer least-squares consistent release."""

    name = "exact"
    title = "Exact integer least squares (tree DP)"
    summary = ("Noise on every level, then the closest non-negative, integral, consistent counts in the "
               "least-squares sense, found exactly by a dynamic program over the tree.")
    when_to_use = ("The default: every level adds up, no negative or fractional counts, and every level's "
                   "noise informs every other level.")
    reference = "Fioretto, Van Hentenryck & Zhu, AIJ 2021, Sec. 6–7, Algorithm 1"
    params = (SPLIT, WEIGHTS)
    consistent, integral, nonnegative = True, True, True
    counts, group_sizes = True, True
    default_definition = "pure"
    # the non-negative integer projection biases the released values (the total and a large count among
    # empty siblings): value ± 1.96·sd covers less than 95 % (benchmarks/results/interval_release_coverage.md)
    normal_intervals = False

    def node_variances(self, h: Hierarchy, ln: LevelNoise, *, statistic: str, neighbour: str,
                       k: int) -> tuple[list[np.ndarray], str]:
        root_value = 0.0 if (statistic == "count" and neighbour == "replace") else None
        _, node_var = level_least_squares(h.parents, [None] * (h.depth + 1), list(ln.var), root_value=root_value)
        return node_var, ("least-squares posterior variance; non-negativity and rounding, which depend on the "
                          "data, are not included")

    def check_counts(self, counts: HierarchyCounts, p: HierPlan, public: Mapping[str, Any]) -> None:
        """The exact solver takes a total (the number of groups N for group sizes) of at most 2^47
        (:func:`dpcore.estimate.treedp.check_true_total`)."""
        treedp.check_true_total(tree_plans.true_total(counts))

    def release_tree(self, counts: HierarchyCounts, p: HierPlan, noise: NoiseSource) -> HierarchyRelease:
        h, true = counts.hierarchy, counts.levels()
        if counts.statistic == "group_sizes":
            return tree_plans.group_size_release(counts, p, tree_plans.measure(true, p, noise))
        public_total = self.public_total(counts, p)
        y = tree_plans.measure(true, p, noise)
        res = treedp.solve_l2(h.parents, y, tree_plans.dp_weights(p), root_value=public_total,
                              half_widths=tree_plans.half_widths(p))
        return HierarchyRelease(h, p, tuple(np.asarray(v) for v in res.values), public_total, (),
                                {"widenings": res.widenings},
                                measurements=tuple(y))
