"""TopDown with the L2 objective, as the US Census Bureau runs it.

Abowd et al., *The 2020 Census Disclosure Avoidance System TopDown Algorithm*, HDSR 2022;
Fioretto, Van Hentenryck & Zhu, AIJ 2021, Sec. 10.

Parameters: the split of the budget over the levels (``split``, ``weights``).

Privacy: every level is measured (the total too, unless it is public under replace-one
neighbours) with the exact discrete Gaussian (ρ-zCDP) or discrete Laplace (pure ε) at
sensitivity 1 (2 under replace-one); levels compose sequentially.

Plan: the TopDown recursion ``V_l = σ_l²(1 − 1/b) + V_{l−1}/b²`` (``b`` children per parent,
dense regime) and the typical maximum ``√V·√(2 ln N_l)`` (ours), with the check of the projection's
integer range, as for every TopDown variant (:class:`~dpcore.areas.mechanisms.tree.TopDownTree`).

Release: from the total down, each area's noisy children are projected onto non-negative
integers that add up to the area's released count, minimising the squared change: non-negative
least squares per parent (scaled-simplex projection) then controlled rounding (largest
remainder), the exact integer minimiser per parent
(:func:`dpcore.estimate.topdown_opt.l2_round_segments`).
"""

from __future__ import annotations

import numpy as np

from dpcore.areas import tree_plans
from dpcore.areas.counts import HierarchyCounts
from dpcore.areas.mechanisms.tree import SPLIT, WEIGHTS, TopDownTree
from dpcore.areas.tree_plans import HierarchyRelease, HierPlan
from dpcore.estimate import topdown_opt
from dpcore.privacy.noise import NoiseSource

__all__ = ["TopDownL2"]


class TopDownL2(TopDownTree):
    """TopDown, least squares then controlled rounding per parent."""

    name = "topdown_l2"
    title = "TopDown L2 (Census Bureau style)"
    summary = ("From the total down, each area's children are noised and projected onto non-negative "
               "integers that add up to the area's count, minimising the squared change (least squares "
               "then controlled rounding).")
    when_to_use = "Reproducing the US Census Bureau's TopDown algorithm."
    reference = "US Census TDA (Abowd et al., HDSR 2022); Fioretto et al., AIJ 2021, Sec. 10"
    params = (SPLIT, WEIGHTS)
    consistent, integral, nonnegative = True, True, True
    counts, group_sizes = True, False
    default_definition = "zcdp"

    def release_tree(self, counts: HierarchyCounts, p: HierPlan, noise: NoiseSource) -> HierarchyRelease:
        h = counts.hierarchy
        public_total = self.public_total(counts, p)
        y = tree_plans.measure(counts.levels(), p, noise)
        # every tie choice is optimal; a random order keeps the rounding independent of the noise
        # (giving the leftover units to the largest noisy counts biases them up)
        values = tree_plans.topdown_release(
            h, y, public_total, noise,
            lambda yc, off, parent, tb: topdown_opt.l2_round_segments(yc, off, parent, tiebreak=tb))
        return HierarchyRelease(h, p, tuple(np.asarray(v) for v in values), public_total, (),
                                {"zeroing_order": None},
                                measurements=tuple(y))
