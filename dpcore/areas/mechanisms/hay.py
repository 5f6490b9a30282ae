"""Least squares on the tree: Hay, Rastogi, Miklau & Suciu, *Boosting the Accuracy of
Differentially Private Histograms Through Consistency*, PVLDB 2010.

Parameters: the split of the budget over the levels (``split``, ``weights``).

Privacy: every level is measured (the total too, unless it is public under replace-one
neighbours) with the exact discrete Laplace (pure ε) or discrete Gaussian (ρ-zCDP); a level's
counts have sensitivity 1 (2 under replace-one, :func:`dpcore.areas.tree_plans.sensitivities`)
and levels compose sequentially.

Plan: the error of every area is the posterior variance of the weighted least-squares
estimate, exact (per-level variances, the generalised two passes).

Release: weighted least squares that makes every level add up, in two passes over the tree
(:func:`dpcore.estimate.tree_inference.level_least_squares`, the same passes as the point tree
mechanisms).  Counts are real numbers and may be negative; the estimates are unbiased.
"""

from __future__ import annotations

import math

import numpy as np

from dpcore.areas import tree_plans
from dpcore.areas.counts import HierarchyCounts
from dpcore.areas.mechanisms.tree import SPLIT, WEIGHTS, TreeMechanism
from dpcore.areas.tree_plans import HierarchyRelease, HierPlan, LevelNoise
from dpcore.data.hierarchy import Hierarchy
from dpcore.estimate.tree_inference import level_least_squares
from dpcore.privacy.noise import NoiseSource

__all__ = ["HayLeastSquares"]


class HayLeastSquares(TreeMechanism):
    """Noise on every level, then least squares on the tree (consistent, real valued)."""

    name = "hay"
    title = "Least squares on the tree (Hay et al.)"
    summary = ("Noise on every level, then weighted least squares that makes every level add up "
               "(two passes over the tree). Counts are real numbers and may be negative.")
    when_to_use = "Unbiased estimates for analysts who accept fractional and negative counts."
    reference = "Hay, Rastogi, Miklau & Suciu, PVLDB 2010"
    params = (SPLIT, WEIGHTS)
    consistent, integral, nonnegative = True, False, False
    counts, group_sizes = True, False
    default_definition = "pure"

    def node_variances(self, h: Hierarchy, ln: LevelNoise, *, statistic: str, neighbour: str,
                       k: int) -> tuple[list[np.ndarray], str]:
        root_value = 0.0 if (statistic == "count" and neighbour == "replace") else None
        _, node_var = level_least_squares(h.parents, [None] * (h.depth + 1), list(ln.var), root_value=root_value)
        return node_var, "least-squares posterior variance (exact)"

    def release_tree(self, counts: HierarchyCounts, p: HierPlan, noise: NoiseSource) -> HierarchyRelease:
        h = counts.hierarchy
        public_total = self.public_total(counts, p)
        y = tree_plans.measure(counts.levels(), p, noise)
        var = [lv.noise_sd ** 2 if lv.measured else math.inf for lv in p.levels]
        values, _ = level_least_squares(h.parents, y, var, root_value=public_total)
        return HierarchyRelease(h, p, tuple(np.asarray(v) for v in values), public_total, (), {},
                                measurements=tuple(y))
