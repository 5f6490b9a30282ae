"""TopDown L2: the O/D TopDown walk with the least-squares projection and controlled rounding.

The walk of Boninsegna & Silvestri, PoPETs 2025 (Algorithms 1 and 3) with the projection of the
US Census Bureau's TopDown algorithm (Abowd et al., "The 2020 Census Disclosure Avoidance System
TopDown Algorithm", Harvard Data Science Review 2022, Sec. 5): the paper's comparison ``TDA_ℓ2``.

Parameters
    As InfTDA (:mod:`.base`); the zeroing order does not apply (least squares has none).

Privacy
    As InfTDA: one histogram per tree level, same sensitivities (:func:`.common.sensitivity`),
    the budget split over the measured levels; the projection is post-processing.

Plan
    Per level, the noise SD and the TopDown RMSE recursion (:func:`.common.topdown_level_plans`);
    the guaranteed L∞ bound does not hold (no exact L∞ projection) and is not given.

Release
    The children of every surviving pair get the level's noise and are projected onto the scaled
    simplex (non-negative, adding up to the parent) by least squares, then rounded to integers
    with the same sum by exact controlled rounding
    (:func:`dpcore.estimate.topdown_opt.l2_round_segments`).
"""

from __future__ import annotations

import numpy as np

from dpcore.estimate import topdown_opt
from dpcore.flows.counts import ODCounts
from dpcore.flows.mechanisms.base import ORDER, ORIENTATION, SPLIT, TIEBREAK, WEIGHTS, ODMechanism
from dpcore.flows.mechanisms.common import ODPlan, check_projection_range

__all__ = ["TopDownL2"]


class TopDownL2(ODMechanism):
    """TopDown with the least-squares projection and controlled rounding (Abowd et al. 2022)."""

    name = "tda_l2"
    title = "TopDown L2 (least squares)"
    summary = ("The same TopDown walk with the least-squares projection (non-negative, adding up to the "
               "parent) and exact controlled rounding, as the US Census Bureau's TopDown does.")
    when_to_use = ("Comparing with the Census Bureau's approach; about the same accuracy as InfTDA, more "
                   "spurious flows.")
    reference = "US Census TDA (Abowd et al., HDSR 2022)"
    params = (ORIENTATION, SPLIT, WEIGHTS, ORDER, TIEBREAK)
    definitions = ("pure", "zcdp")
    consistent = nonnegative = True
    reads_tiebreak = True
    #: TopDown's projection biases the values: a large flow among empty pairs is pulled down by the
    #: positive noise the empty ones keep (tests/unit/flows/test_od_intervals.py: 253 of 300 releases,
    #: 84 %, for a flow of 100 trips among three empty pairs at ρ = 0.25; 86 % of 1,000)
    no_interval_reason = (
        "adjusts every table's noisy counts to non-negative whole numbers that add up to the table above and "
        "drops the flows released as 0 with everything below them. The released values are therefore biased "
        "(most of all a large flow among empty pairs), and noisy_count ± 1.96 × noise_sd would cover the true "
        "count less often than 95 % of the time (about 85 % for a 100-trip flow among empty pairs in a "
        "simulation; how much less depends on the data and the budget), so no interval is given for them.")

    def project(self, x: np.ndarray, offsets: np.ndarray, totals: np.ndarray, p: ODPlan, t: int,
                tiebreak: np.ndarray | None) -> np.ndarray:
        """Least squares onto the scaled simplex, then exact controlled rounding."""
        return topdown_opt.l2_round_segments(x, offsets, totals, tiebreak=tiebreak)

    def check_counts(self, counts: ODCounts, p: ODPlan) -> None:
        """The rounding's integer range (:func:`.common.check_projection_range`)."""
        check_projection_range(counts)
