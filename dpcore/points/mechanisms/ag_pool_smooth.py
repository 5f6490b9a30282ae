"""``ag_pool`` with a piecewise-linear prior inside its leaves (issue 27, item 3).

Release
    Exactly ``ag_pool``'s (:mod:`dpcore.points.mechanisms.ag_pool`): AG's noisy count, first
    level and second level (Qardaji, Yang & Li, ICDE 2013), AG's least-squares consistent
    estimate, then the pooling of sparse cells.  The released leaves, their counts, SDs and
    intervals are ``ag_pool``'s, number for number.

Within-leaf prior (post-processing)
    A query that cuts a leaf is answered, instead of by the leaf's even spread, by the
    piecewise-linear prior of :func:`dpcore.points.within_leaf.piecewise_linear`: the leaves'
    even spread box-filtered at each leaf's own scale (the bilinear interpolation between the
    leaves' centres on a regular tiling), clamped at 0 and rescaled inside every leaf to keep its
    released count (a leaf whose count is not positive keeps its even spread; ``ag_pool``'s
    leaves are never negative: a pool's sum is clamped at 0 and kept cells are above 2 SD).
    The filter is fixed (a window of ``2·(h // 2) + 1`` × ``2·(w // 2) + 1`` cells for a leaf of
    ``h × w``: the leaf's height × width when odd, one more cell when even); it was chosen among eight
    data-free post-processings on the head-to-head's training shapes (roads, single_tight,
    earthquakes, gauss_paper; benchmarks/beat_ag_denoise.py, results/beat_ag_denoise.md), not
    on the held-out ones.

Privacy
    ``ag_pool``'s release is ε-DP (ρ-zCDP with discrete Gaussian noise): its noisy counts are
    AG's, drawn with AG's budgets, composed sequentially (Dwork & Roth, 2014, Thm. 3.16), and
    pooling is post-processing.  The prior reads only the released leaves (rectangles and
    counts) and the public grid; it never reads the data, draws no noise and takes no
    parameter chosen from the data.  A function of a DP release is DP with the same
    parameters (post-processing, Dwork & Roth, 2014, Prop. 2.1), so this mechanism is ε-DP
    (ρ-zCDP) at ``ag_pool``'s cost, which is AG's.

Expected error
    The plan rows are ``ag_pool``'s (AG's noise): they do NOT model the prior, and each leaf row's
    note says so (:data:`PRIOR_NOTE`).  The prior moves no mass between leaves, so a
    query made of whole leaves has ``ag_pool``'s answer.  Where a query cuts a leaf it trades
    the uniformity error for the prior's error, which is smaller when density varies smoothly
    across leaves.  Measured on 256² grids (10^4 and 10^5 points): 0.67× AG's mean relative
    error on the training shapes (results/beat_ag_denoise.md); in the head-to-head on the
    held-out shapes (uber, many_small, tight_wide; results/spatial_256_agpost_quick.md) 0.70× AG
    at ε 0.1 (geometric mean, 0.47-0.91×; ``ag_pool`` 0.79×) and 0.96× at ε 1 (0.78-1.02×;
    ``ag_pool`` 0.98×), losing to ``ag_pool`` by up to 6 % on dense data at ε 1.  At ε 1 an oracle that knows the true
    density inside every leaf reaches only about 0.77× AG, so no within-leaf prior gets far
    below that there.  The map and the exported tables show the leaves' counts (unchanged).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dpcore.data.domain import Aggregate, Grid
from dpcore.points.mechanisms.ag_pool import AdaptiveGridPooled
from dpcore.points.release import LevelPlan, PartitionRelease
from dpcore.points.within_leaf import PIECEWISE_LINEAR
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.noise import NoiseSource

#: the within-leaf rule this mechanism's releases state (:mod:`dpcore.points.within_leaf`)
WITHIN_LEAF = PIECEWISE_LINEAR
#: what the leaf rows' expected error leaves out (appended to their notes)
PRIOR_NOTE = ("Expected error of whole cells only (AG's noise): a query that cuts a cell is answered by the "
              "sloping within-cell density, whose error these figures do not model (measured on held-out "
              "shapes: 0.70x AG's mean relative error at ε 0.1, 0.96x at ε 1).")


class AdaptiveGridPooledSmooth(AdaptiveGridPooled):
    name = "ag_pool_smooth"
    title = "AG with pooled sparse cells, smoothed within cells"
    summary = (
        "AG with pooled sparse cells, answering queries that cut a cell by a density that slopes "
        "towards the neighbouring cells instead of a flat one: the same noisy counts and cost."
    )
    when_to_use = (
        "As AG with pooled sparse cells, when queries are small or cut many cells and the density "
        "changes gradually (roads, spread-out clusters). Whole-cell queries get the same answers."
    )
    reference = ("Qardaji, Yang & Li, 'Differentially private grids for geospatial data', ICDE 2013 "
                 "(with pooling and a piecewise-linear within-cell prior, after Zeighami et al., PVLDB 2022)")

    def _levels(self, grid: Grid, e_n: PrivacyCost | None, e1: PrivacyCost, e2: PrivacyCost,
                n_first: int, n_second: int, sensitivity: int, preview: bool) -> tuple[LevelPlan, ...]:
        """AG's levels, the leaf level's note saying that its figures leave the prior out."""
        levels = super()._levels(grid, e_n, e1, e2, n_first, n_second, sensitivity, preview)
        return tuple(dataclasses.replace(lv, note=(lv.note + " " if lv.note else "") + PRIOR_NOTE)
                     if lv.in_partition else lv for lv in levels)

    def _release(
        self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: NoiseSource
    ) -> PartitionRelease:
        rel = super()._release(aggregate, cost, params, noise)
        return dataclasses.replace(rel, within_leaf=WITHIN_LEAF, public={**rel.public, "within_leaf": WITHIN_LEAF})
