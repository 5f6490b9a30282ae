"""InfTDA: the TopDown release of O/D flows with the L∞ projection IntOpt.

Boninsegna & Silvestri, "Differentially private release of hierarchical origin/destination data
with a TopDown approach", PoPETs 2025, Sec. 4.1, Algorithms 1 (bounded DP: replace
neighbours), 2 (IntOpt) and 3 (unbounded DP: add/remove neighbours, App. B).

Parameters
    Which side of the O/D tree is split first, the budget split over the measured levels, and
    IntOpt's zeroing order and tie rule (:mod:`.base`: ``ORIENTATION``, ``SPLIT``, ``WEIGHTS``,
    ``ORDER``, ``TIEBREAK``).

Privacy
    Every tree level partitions the trips, so each is a histogram of the same sensitivity
    (:func:`.common.sensitivity`: L2 ``√2·m`` replace, ``m`` add/remove, ``√(2m)`` / ``√m`` at the
    leaves for distinct pairs); ρ-zCDP with discrete Gaussian noise (the paper) or pure ε with
    discrete Laplace noise (ours), the budget split over the measured levels, which compose
    sequentially.  IntOpt is post-processing.

Plan
    Per level, the noise SD, the TopDown RMSE recursion and the paper's guaranteed bound on the
    largest error per level (Theorem 4.2; :func:`.common.topdown_level_plans` with an exact L∞
    projection).

Release
    From the root down, the children of every surviving pair (all of them, zeros included) get
    the level's noise and IntOpt finds the closest non-negative integers (smallest largest change)
    adding up to the parent, zeroing the smallest noisy pairs first: one lexsort per level
    (:func:`dpcore.estimate.topdown_opt.intopt_segments`).  Pairs released as 0 are dropped with
    their subtree.
"""

from __future__ import annotations

import numpy as np

from dpcore.estimate import topdown_opt
from dpcore.flows.counts import ODCounts
from dpcore.flows.mechanisms.base import ORDER, ORIENTATION, SPLIT, TIEBREAK, WEIGHTS, ODMechanism
from dpcore.flows.mechanisms.common import ODPlan, check_projection_range

__all__ = ["InfTDA"]


class InfTDA(ODMechanism):
    """InfTDA (Boninsegna & Silvestri 2025, Algorithms 1–3): TopDown with IntOpt at every node."""

    name = "inftda"
    title = "InfTDA (TopDown, L∞ / IntOpt)"
    summary = ("From the total down, the flows out of every released area pair are split one level finer "
               "(destination, then origin); all possible sub-pairs get noise, then IntOpt finds the closest "
               "non-negative whole numbers adding up to the parent (smallest largest change). Pairs "
               "released as 0 are dropped with everything below them.")
    when_to_use = ("The default: consistent, non-negative, whole-number O/D tables at every level, few "
                   "spurious flows, and a proven bound on the largest error per level.")
    reference = "Boninsegna & Silvestri, PoPETs 2025, Algorithms 1–2"
    params = (ORIENTATION, SPLIT, WEIGHTS, ORDER, TIEBREAK)
    definitions = ("pure", "zcdp")
    consistent = nonnegative = True
    exact_linf = True
    reads_order = reads_tiebreak = True

    def project(self, x: np.ndarray, offsets: np.ndarray, totals: np.ndarray, p: ODPlan, t: int,
                tiebreak: np.ndarray | None) -> np.ndarray:
        """IntOpt (Algorithm 2) on every parent's children at once, in the plan's zeroing order."""
        return topdown_opt.intopt_segments(x, offsets, totals, order=p.order, tiebreak=tiebreak)

    def check_counts(self, counts: ODCounts, p: ODPlan) -> None:
        """IntOpt's integer range (:func:`.common.check_projection_range`)."""
        check_projection_range(counts)
