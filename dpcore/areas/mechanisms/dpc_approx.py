"""Group-size histograms with the cumulative encoding, then the exact tree DP.

Fioretto, Van Hentenryck & Zhu, *Differentially Private Census Data Release*, AIJ 2021,
Sec. 9.1, Algorithm 2.

Parameters: the split of the budget over the levels (``split``, ``weights``).

Privacy: each area's cumulative histogram (groups of size at most s, s = 1..k) changes by at
most 1 in one cell when one person joins or leaves a group (sensitivity 1, half that of the raw
encoding: Lemma 6; 2 under replace-one); the number of groups N is public.  Every level is
measured with the exact discrete Laplace (pure ε) or discrete Gaussian (ρ-zCDP); levels compose
sequentially.

Plan: the noise of one size cell after differencing two cumulative noises, before the
isotonic repair, which is non-linear and depends on the data (ours).

Release: noisy cumulative histograms, repaired by isotonic regression (PAV), clipped, rounded
(``⌊z + ½⌋``, §7.4) and differenced, then the exact tree DP makes everything consistent.
"""

from __future__ import annotations

import numpy as np

from dpcore.areas import tree_plans
from dpcore.areas.counts import HierarchyCounts
from dpcore.areas.mechanisms.tree import SPLIT, WEIGHTS, TreeMechanism
from dpcore.areas.tree_plans import HierarchyRelease, HierPlan, LevelNoise
from dpcore.data.hierarchy import Hierarchy
from dpcore.privacy.noise import NoiseSource

__all__ = ["DpcApprox", "isotonic_rows"]


def isotonic_rows(c: np.ndarray) -> np.ndarray:
    """Row-wise non-decreasing least-squares fit (PAV), vectorised over rows for small k.

    Uses the min–max formula ``s̄_i = min_{j≥i} max_{i'≤i} mean(c[i'..j])`` (Hay et al., PVLDB 2010),
    checked against :func:`scipy.optimize.isotonic_regression` in the tests.
    """
    n, k = c.shape
    if k > 16:
        from scipy.optimize import isotonic_regression

        return np.vstack([isotonic_regression(row).x for row in c]) if n else c.astype(float)
    P = np.concatenate([np.zeros((n, 1)), np.cumsum(c, axis=1, dtype=float)], axis=1)
    out = np.empty((n, k))
    for i in range(k):
        best = np.full(n, np.inf)
        for j in range(i, k):
            inner = np.full(n, -np.inf)
            for i2 in range(i + 1):
                inner = np.maximum(inner, (P[:, j + 1] - P[:, i2]) / (j - i2 + 1))
            best = np.minimum(best, inner)
        out[:, i] = best
    return out


class DpcApprox(TreeMechanism):
    """Cumulative group-size histograms, isotonic repair, exact tree DP."""

    name = "dpc_approx"
    title = "Exact DP with cumulative encoding (group sizes)"
    summary = ("For group-size histograms: each area's cumulative histogram (sensitivity 1, half the "
               "noise) is noised and repaired by isotonic regression, then the exact tree DP makes "
               "everything consistent.")
    when_to_use = "Group sizes (households by size): usually more accurate than the raw encoding."
    reference = "Fioretto et al., AIJ 2021, Sec. 9.1, Algorithm 2"
    params = (SPLIT, WEIGHTS)
    consistent, integral, nonnegative = True, True, True
    counts, group_sizes = False, True
    default_definition = "pure"

    def sensitivities(self, statistic: str, neighbour: str) -> tuple[float, float]:
        return tree_plans.sensitivities(statistic, neighbour, cumulative=True)

    def node_variances(self, h: Hierarchy, ln: LevelNoise, *, statistic: str, neighbour: str,
                       k: int) -> tuple[list[np.ndarray], str]:
        v = ln.var
        return ([np.full(h.sizes[d], (2.0 * v[d] - v[d] / k) if k > 1 else v[d]) for d in range(h.depth + 1)],
                "noise per size cell before the isotonic repair (difference of two cumulative noises); "
                "the repair is non-linear and data-dependent")

    def release_tree(self, counts: HierarchyCounts, p: HierPlan, noise: NoiseSource) -> HierarchyRelease:
        true = counts.levels()
        y_levels: list[np.ndarray] = []
        for d, lv in enumerate(p.levels):
            cum = np.cumsum(true[d], axis=1)
            noisy = cum + noise.discrete(lv.noise, p.scales[d], cum.shape)
            z = np.maximum(isotonic_rows(noisy.astype(float)), 0.0)
            if d == 0:
                z = np.minimum(z, float(counts.n_groups))
            z = np.floor(z + 0.5).astype(np.int64)  # ⌊z + ½⌋, not banker's rounding (§7.4)
            y_levels.append(np.diff(z, axis=1, prepend=0))
        return tree_plans.group_size_release(counts, p, y_levels)
