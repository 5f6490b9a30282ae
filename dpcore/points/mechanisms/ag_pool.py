"""AG with pooled sparse cells: the adaptive grid (Qardaji, Yang & Li, ICDE 2013), then a data-free
sparsity rule on its released estimates (issue 27, item 3).

Where the data are empty or thin, AG's error is noise: a 10 % query over empty land adds the noise
of a dozen first-level cells, and on clustered data that noise, not the uniformity error, is
most of AG's mean relative error (benchmarks/results/beat_ag_study.md).  This mechanism releases
exactly AG's noisy counts and changes only what is inferred from them.

Release (AG's phases, unchanged; :mod:`dpcore.points.mechanisms.ag`)
    0. a noisy number of points ``N̂`` (share ``count_share`` of ε, unless a public N is given);
    1. AG's ``m1 x m1`` first level, budget ``α·ε_g``;
    2. AG's ``m2 x m2`` sub-grid in every first-level cell, ``m2`` from the cell's released
       count, budget ``(1−α)·ε_g``;
    then AG's weighted least-squares consistent estimate of the two-level forest (Hay,
    Rastogi, Miklau & Suciu, PVLDB 2010, Sec. 4), with each node's exact post-inference SD ``s_v``.

Pooling of sparse cells (post-processing)
    Top down, the first-level cells forming one group and the sub-cells of every first-level
    cell one group each, the nodes whose consistent estimate is below ``pool_threshold · s_v``
    (default 2) are *pooled*: their summed estimate (clamped at 0) is spread over them in
    proportion to area, and a pooled cell's sub-cells follow it by area.  Within a first-level
    cell this keeps the cell's total (unless the pool's sum is negative, when it gets 0), and
    across the pooled first-level cells it keeps their sum.  Unlike zeroing, which removes thin
    background, it moves no mass between pooled and unpooled areas; it only flattens the noise
    inside the pool, where it averages out.  Every first-level cell is then reset to the sum of
    its sub-cells, so the release is exactly consistent.  ``pool_threshold = 0`` is plain AG.

Privacy
    The noisy counts are AG's, drawn by AG's code with AG's budgets: ``N̂`` costs ``ε_N``, the
    first level ``ε₁`` (disjoint cells: one point changes one count by 1, a person's ``k``
    points at most ``k`` in L1, discrete Laplace of scale ``k/ε₁``), the second level ``ε₂``
    (a partition chosen from the released first-level counts only), ``ε_N + ε₁ + ε₂ = ε`` by
    adaptive sequential composition (Dwork & Roth, 2014, Thm. 3.16, Sec. 3.5).  Inference,
    pooling and the final sums read only the released counts and public parameters (each
    level's noise SD follows from its budget): post-processing (Dwork & Roth, Prop. 2.1),
    so the release is ε-DP (ρ-zCDP alike, with AG's discrete Gaussian noise).

Expected error
    AG's noise and uniformity error where cells are kept; in a pool, a cell's error is its
    area share of the pool's summed noise (plus the pool's bias: cells selected for being
    below the threshold have a downward-biased sum, and true mass in the pool is spread
    evenly over it).  ``sd`` of a pooled node is its pool's SD (the root sum of its members'
    variances) times its area share, an approximation that ignores covariances and the bias;
    ``ci95`` is AG's half-width scaled by the same ratio.  The default threshold (2 SD) was
    chosen on the head-to-head's training shapes (roads, single_tight, earthquakes,
    gauss_paper), not on the held-out ones (uber, many_small, tight_wide).  Measured
    (benchmarks/results/beat_ag_study.md, 256², n 10^4 and 10^5): 0.80× AG's mean relative error
    (geometric mean; worst 1.12×) on the training shapes; on the held-out shapes 0.66–0.92× at
    ε = 0.1 and 0.91–1.05× at ε = 1, where dense data leave little to pool.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcore.data.domain import Aggregate
from dpcore.points.mechanisms.ag import AdaptiveGrid
from dpcore.points.mechanisms.base import Param
from dpcore.points.release import PartitionRelease
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.noise import NoiseSource


def pool_sparse(est: NDArray[np.float64], sd: NDArray[np.float64], parent: NDArray[np.int64],
                depth: NDArray[np.int64], area: NDArray[np.float64],
                threshold: float) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """Pool the nodes below ``threshold`` SDs, top down (see the module docstring).

    Roots form one group, the children of a node one group each.  Returns the new estimates,
    their approximate SDs and which nodes were pooled (directly or through an ancestor).

    >>> est = np.array([10.0, -1.0, 0.5, 4.0, 6.0])
    >>> sd = np.ones(5)
    >>> parent = np.array([-1, -1, -1, 0, 0]); depth = np.array([0, 0, 0, 1, 1])
    >>> area = np.array([2.0, 1.0, 3.0, 1.0, 1.0])
    >>> e, s, p = pool_sparse(est, sd, parent, depth, area, 2.0)
    >>> e.tolist(), p.tolist()
    ([10.0, 0.0, 0.0, 4.0, 6.0], [False, True, True, False, False])
    >>> pool_sparse(np.array([5.0, 1.0, 2.0]), np.ones(3), np.array([-1, 0, 0]),
    ...             np.array([0, 1, 1]), np.array([4.0, 1.0, 3.0]), 2.5)[0].tolist()
    [5.0, 0.75, 2.25]
    """
    est = np.array(est, dtype=np.float64)
    sd = np.array(sd, dtype=np.float64)
    pooled = np.zeros(est.size, dtype=bool)
    if threshold <= 0 or est.size == 0:
        return est, sd, pooled
    for d in range(int(depth.max()) + 1):
        nodes = np.flatnonzero(depth == d)
        if d > 0:  # below a pooled node: spread by area
            inh = nodes[pooled[parent[nodes]]]
            share = area[inh] / area[parent[inh]]
            est[inh] = est[parent[inh]] * share
            sd[inh] = sd[parent[inh]] * share
            pooled[inh] = True
        live = nodes[~pooled[nodes]]
        low = live[est[live] < threshold * sd[live]]
        if low.size == 0:
            continue
        group = parent[low] + 1  # the roots' group is 0
        n_groups = int(group.max()) + 1
        total = np.maximum(np.bincount(group, est[low], minlength=n_groups), 0.0)
        var = np.bincount(group, sd[low] ** 2, minlength=n_groups)
        g_area = np.bincount(group, area[low], minlength=n_groups)
        share = area[low] / g_area[group]
        est[low] = total[group] * share
        sd[low] = np.sqrt(var[group]) * share
        pooled[low] = True
    return est, sd, pooled


def sum_up(est: NDArray[np.float64], parent: NDArray[np.int64], depth: NDArray[np.int64]) -> NDArray[np.float64]:
    """Every node with children reset to the sum of its children, bottom up.

    >>> sum_up(np.array([9.0, 2.0, 3.0, 1.0]), np.array([-1, 0, 0, 1]), np.array([0, 1, 1, 2])).tolist()
    [4.0, 1.0, 3.0, 1.0]
    """
    est = np.array(est, dtype=np.float64)
    for d in range(int(depth.max()), 0, -1):
        nodes = np.flatnonzero(depth == d)
        has = np.zeros(est.size, dtype=bool)
        has[parent[nodes]] = True
        sums = np.bincount(parent[nodes], est[nodes], minlength=est.size)
        est[has] = sums[has]
    return est


class AdaptiveGridPooled(AdaptiveGrid):
    name = "ag_pool"
    title = "AG with pooled sparse cells"
    summary = (
        "AG's two-level adaptive grid, then cells whose estimate is within noise of zero share one "
        "flat estimate: the same noisy counts, far less noise over empty land."
    )
    when_to_use = (
        "Clustered data with empty or thin areas (cities, clusters, point sets with large empty "
        "regions), where most of AG's error is noise over empty cells. Where the data cover the "
        "grid densely it gives AG's answers."
    )
    reference = ("Qardaji, Yang & Li, 'Differentially private grids for geospatial data', ICDE 2013 "
                 "(with a pooling post-processing step)")
    params = (
        *AdaptiveGrid.params,
        Param("pool_threshold", "Pooling threshold (SDs; 0 = plain AG)", float, 2.0,
              "Cells whose consistent estimate is below this many standard deviations share one "
              "flat estimate with their pooled neighbours (post-processing: costs nothing).",
              minimum=0.0, maximum=10.0, advanced=True),
    )

    def _release(
        self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: NoiseSource
    ) -> PartitionRelease:
        rel, parent = self._release_tree(aggregate, cost, params, noise)
        depth = rel.level
        area = ((rel.rects[:, 1] - rel.rects[:, 0]) * (rel.rects[:, 3] - rel.rects[:, 2])).astype(np.float64)
        est, sd, pooled = pool_sparse(rel.noisy, rel.sd, parent, depth, area, params["pool_threshold"])
        est = sum_up(est, parent, depth)
        ratio = np.divide(sd, rel.sd, out=np.ones_like(sd), where=rel.sd > 0)
        public = {**rel.public, "pooled_cells": int(np.count_nonzero(pooled & rel.leaf))}
        # AG's least-squares estimates and exact SDs stay available to the data users' files
        details = {**rel.details, "least_squares": (rel.noisy, rel.sd)}
        return dataclasses.replace(rel, noisy=est, sd=sd, ci95=rel.ci95 * ratio, public=public, details=details)
