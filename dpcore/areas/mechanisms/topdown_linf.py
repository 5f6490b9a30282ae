"""TopDown with the L∞ objective: InfTDA.

Boninsegna & Silvestri, *Differentially Private Release of Hierarchical Origin/Destination Data
with a TopDown Approach*, PoPETs 2025, Algorithms 1–2 (IntOpt in its closed form, Sec. 4.2 and
App. C).

Parameters: the split of the budget over the levels (``split``, ``weights``) and IntOpt's
zeroing ``order`` (the smallest noisy cells first, ``ascending``, or the largest).

Privacy: every level is measured (the total too, unless it is public under replace-one
neighbours) with the exact discrete Gaussian (ρ-zCDP) or discrete Laplace (pure ε) at
sensitivity 1 (2 under replace-one); levels compose sequentially (Sec. 4.1).

Plan: the TopDown recursion ``V_l = σ_l²(1 − 1/b) + V_{l−1}/b²`` and the typical maximum
``√V·√(2 ln N_l)`` (ours), with the check of the projection's integer range, as for every TopDown
variant (:class:`~dpcore.areas.mechanisms.tree.TopDownTree`).

Release: from the total down, each area's noisy children are projected onto non-negative
integers that add up to the area's released count, minimising the largest change
(:func:`dpcore.estimate.topdown_opt.intopt_segments`), with random tie-breaks (Sec. 4.2).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpcore.areas import tree_plans
from dpcore.areas.counts import HierarchyCounts
from dpcore.areas.mechanisms.tree import SPLIT, WEIGHTS, TopDownTree
from dpcore.areas.tree_plans import HierarchyRelease, HierPlan
from dpcore.core.mechanism import Param, Plan
from dpcore.estimate import topdown_opt
from dpcore.privacy.noise import NoiseSource

__all__ = ["TopDownLinf"]


class TopDownLinf(TopDownTree):
    """TopDown with IntOpt (L∞) per parent."""

    name = "topdown_linf"
    title = "TopDown L∞ (InfTDA)"
    summary = ("From the total down, each area's children are noised and projected onto non-negative "
               "integers that add up to the area's released count, minimising the largest change (IntOpt).")
    when_to_use = ("Many small areas: it zeroes the smallest noisy cells first, so few empty areas show "
                   "people, and its worst-case error per level is bounded.")
    reference = "Boninsegna & Silvestri, PoPETs 2025, Algorithms 1–2"
    params = (SPLIT, WEIGHTS,
              Param("order", "Zeroing order", str, "ascending",
                    "IntOpt zeroes the smallest noisy cells first ('ascending') or the largest.",
                    choices=("ascending", "descending")))
    consistent, integral, nonnegative = True, True, True
    counts, group_sizes = True, False
    default_definition = "zcdp"
    release_options = ("order",)

    def _release_options(self, plan: Plan) -> dict[str, Any]:
        return {"order": plan.params["order"]}

    def release_tree(self, counts: HierarchyCounts, p: HierPlan, noise: NoiseSource, *,
                     order: str = "ascending") -> HierarchyRelease:
        tree_plans.check_order(order)
        h = counts.hierarchy
        public_total = self.public_total(counts, p)
        y = tree_plans.measure(counts.levels(), p, noise)
        values = tree_plans.topdown_release(
            h, y, public_total, noise,
            lambda yc, off, parent, tb: topdown_opt.intopt_segments(yc, off, parent, order=order, tiebreak=tb))
        return HierarchyRelease(h, p, tuple(np.asarray(v) for v in values), public_total, (),
                                {"zeroing_order": order},
                                measurements=tuple(y))
