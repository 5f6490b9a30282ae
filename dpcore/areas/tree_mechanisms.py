"""Releases of counts over a geographic hierarchy: consistent, non-negative, integral.

Mechanisms (Fioretto, Van Hentenryck & Zhu, AIJ 2021; Boninsegna & Silvestri, PoPETs 2025; Hay et al., PVLDB 2010):

* ``independent`` — noise on every level, nothing else (inconsistent baseline).
* ``bottom_up`` — the whole budget on the finest level, coarser levels are sums.
* ``hay`` — Hay et al. (2010) least squares on the tree, generalised two-pass with per-level
  variances (Hay et al., PVLDB 2010), solved by :func:`dpcore.estimate.tree_inference.level_least_squares`
  (the same two passes as the point tree mechanisms): consistent, real-valued, may be negative.
* ``topdown_l2`` — TopDown as the US Census Bureau runs it: level by level, non-negative least
  squares per parent (scaled-simplex projection) then controlled rounding (largest remainder);
  exact integer minimiser per parent (the L2 variant of TopDown, Abowd et al., HDSR 2022).
* ``topdown_linf`` — InfTDA: TopDown with the L∞ objective solved by IntOpt in its closed
  form (Boninsegna & Silvestri 2025, Sec. 4.2, Alg. 2 and App. C).
* ``exact`` — the census paper's exact integer least-squares release: the tree dynamic
  program with convex cost tables (Fioretto et al. 2021, Sec. 7, Alg. 1 in an equivalent form), for plain counts and for group-size
  histograms (the k-copy tree T′ under a dummy root fixed to N, §1.8).
* ``dpc_approx`` — group sizes with the cumulative encoding (Fioretto et al. 2021, Sec. 9.1, Alg. 2): per-region
  cumulative histograms (sensitivity 1) are noised, repaired by isotonic regression, rounded,
  differenced, then the same exact DP.
* ``matrix`` — planned and released by :mod:`dpcore.areas.mechanisms.matrix` (dispatched from here).

The mechanism catalogue and the plan and release records are in :mod:`dpcore.areas.tree_plans`.

Privacy.  Each measured level is a histogram that partitions the people (or groups), so a
level's counts have L1 sensitivity Δ₁ and L2 sensitivity Δ₂ (below) and levels compose
sequentially over the per-level split of the budget (Fioretto et al. 2021, Lemmas 4 and 6, Thm 1; Boninsegna & Silvestri 2025, Sec. 4.1).
Pure ε-DP uses the exact discrete Laplace with scale Δ₁/ε_l; ρ-zCDP uses the exact discrete
Gaussian with σ_l = Δ₂/√(2ρ_l).  Neighbours are either add/remove one person (the total is
noised) or replace one person (the total is public and exact, the root is not measured, and
Δ doubles: Fioretto et al. 2021, Sec. 4; erratum: the paper's Δ is for add/remove).  Everything after the noise is post-processing.

====================  ===============  ==============  =====================
statistic             add/remove Δ₁/Δ₂  replace Δ₁/Δ₂  note
====================  ===============  ==============  =====================
count                 1 / 1            2 / √2          root public under replace
group sizes (raw)     2 / √2           4 / 2           N public (Lemma 4)
group sizes (cumul.)  1 / 1            2 / √2          N public (Lemma 6)
====================  ===============  ==============  =====================
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from dpcore.areas.hierarchy import Hierarchy, HierarchyCounts
from dpcore.areas.mechanisms.matrix import check_data as matrix_check_data
from dpcore.areas.mechanisms.matrix import plan as matrix_plan
from dpcore.areas.mechanisms.matrix import release as matrix_release
from dpcore.areas.tree_plans import HierarchyRelease, HierLevelPlan, HierPlan, expected_max, get
from dpcore.core import metrics
from dpcore.errors import InputError, ParameterError
from dpcore.estimate import topdown_opt, treedp
from dpcore.estimate.tree_inference import level_least_squares
from dpcore.privacy import calibration
from dpcore.privacy import noise as _noise
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.noise import NoiseSource

__all__ = [
    "check_data",
    "empirical_errors",
    "plan",
    "release",
    "release_planned",
]

Neighbour = Literal["add_remove", "replace"]


# ---------------------------------------------------------------------------------------------
# plan: everything before the data (budget split, noise, analytic errors)
# ---------------------------------------------------------------------------------------------


def _sensitivities(mechanism: str, statistic: str, neighbour: str) -> tuple[float, float]:
    if statistic == "count":
        base = (1.0, 1.0)
    elif mechanism == "dpc_approx":
        base = (1.0, 1.0)
    else:
        base = (2.0, math.sqrt(2.0))
    if neighbour == "replace":
        return 2.0 * base[0], math.sqrt(2.0) * base[1]
    return base


def measured_levels(mechanism: str, statistic: str, neighbour: str, depth: int) -> list[bool]:
    """Which depths 0..L get a noisy measurement."""
    if mechanism == "bottom_up":
        return [d == depth for d in range(depth + 1)]
    root = not (statistic == "count" and neighbour == "replace")
    return [root] + [True] * depth


def _abs_tail(noise: str, scale: Any, sd: float) -> tuple[np.ndarray, np.ndarray]:
    """``(t, P(|η| > t))`` for t = 0, 1, … far into the tail, from the exact pmf."""
    kmax = int(math.ceil(60.0 * sd)) + 10
    k = np.arange(kmax + 1)
    pmf = (_noise.discrete_laplace_pmf(k, scale) if noise == "discrete_laplace"
           else _noise.discrete_gaussian_pmf(k, scale))
    mass = pmf.copy()
    mass[1:] *= 2.0  # ±k
    cdf = np.cumsum(mass)
    return k, np.clip(1.0 - cdf, 0.0, 1.0)


def _exact_mean_abs(noise: str, scale: Any, sd: float) -> float:
    kmax = int(math.ceil(60.0 * sd)) + 10
    k = np.arange(1, kmax + 1)
    pmf = (_noise.discrete_laplace_pmf(k, scale) if noise == "discrete_laplace"
           else _noise.discrete_gaussian_pmf(k, scale))
    return float(2.0 * np.sum(k * pmf))


def _exactexpected_max(noise: str, scale: Any, sd: float, n: int) -> float:
    """``E[max |η_i|]`` over ``n`` independent draws: ``Σ_{t≥0} 1 − (1 − P(|η| > t))^n`` (exact pmf)."""
    _, tail = _abs_tail(noise, scale, sd)
    return float(np.sum(-np.expm1(n * np.log1p(-np.minimum(tail, 1 - 1e-16)))))


def _topdown_variance(h: Hierarchy, var: Sequence[float], root_var: float) -> list[np.ndarray]:
    """TopDown per-node error variance (ours, dense regime).

    ``V_0`` = root variance (0 when public), ``V_u = σ_l²(1 − 1/b) + V_parent/b²`` with ``b`` the
    number of children of the parent (a single child copies its parent: ``V_u = V_parent``).
    """
    out = [np.array([root_var])]
    for d in range(h.depth):
        b = h.n_children(d).astype(float)[h.parents[d]]
        out.append(var[d + 1] * (1.0 - 1.0 / b) + out[d][h.parents[d]] / (b * b))
    return out


def plan(
    hierarchy: Hierarchy,
    mechanism: str,
    cost: PrivacyCost,
    *,
    neighbour: Neighbour = "add_remove",
    split: calibration.SplitKind = "uniform",
    weights: Sequence[float] | None = None,
    statistic: Literal["count", "group_sizes"] = "count",
    k: int = 1,
    area_sets: Any = None,
    sets_weight: float = 1.0,
) -> HierPlan:
    """Budget split, noise and analytic expected error per level, before any data is touched.

    The split runs over the **measured** levels (all levels; not the root when the total is
    public; only the finest level for ``bottom_up``).  ``weights`` (one per measured level, top
    first) are used with ``split="custom"``.  The expected errors are data-free (they use only
    the public tree, the budget and the noise), so they can be shown before release and
    published:

    * ``independent``: exact mean and typical maximum of the noise (exact pmf).
    * ``bottom_up``: sums of leaf noise (normal approximation above the leaves).
    * ``hay`` / ``exact``: posterior variance of the least-squares estimate (exact for ``hay``;
      for ``exact`` it ignores the non-negativity and integrality effects, which depend on the
      data: ours).

    Mean and maximum come from the node SDs with the tails of the noise: a Laplace shape
    (``E|e| = sd/√2``) under pure ε-DP, a normal shape (``E|e| = sd·√(2/π)``) under zCDP (census
    ours: the Gaussian form overstates the mean of Laplace-noised errors by 12 %).
    * ``topdown_*``: the TopDown recursion ``V_l = σ_l²(1 − 1/b) + V_{l−1}/b²`` and the typical
      maximum ``√V·√(2 ln N_l)`` (ours).
    * ``dpc_approx``: the per-cell noise after differencing the cumulative noise, before the
      (non-linear) isotonic repair (ours).

    The maximum is the expected largest absolute error over the level's cells.

    ``matrix`` is planned by :func:`dpcore.areas.mechanisms.matrix.plan` (``area_sets``/``sets_weight``: the
    curator's public area-code-set queries; ``split``/``weights`` set the levels' importance).
    """
    info = get(mechanism)
    if info.name == "matrix":
        return matrix_plan(hierarchy, cost, neighbour=neighbour, split=split, weights=weights,
                          statistic=statistic, area_sets=area_sets, sets_weight=sets_weight)
    if area_sets is not None:
        raise ParameterError("Area-code-set queries are answered by the matrix mechanism only.")
    if statistic not in ("count", "group_sizes"):
        raise ParameterError("The statistic must be 'count' or 'group_sizes'.")
    if statistic == "group_sizes" and not info.group_sizes:
        raise ParameterError(
            f"{info.title} releases plain counts only. For group-size histograms choose "
            "'exact' or 'dpc_approx'."
        )
    if statistic == "count" and not info.counts:
        raise ParameterError(f"{info.title} is for group-size histograms; choose another mechanism for counts.")
    if neighbour not in ("add_remove", "replace"):
        raise ParameterError("Neighbours are 'add_remove' (total noised) or 'replace' (total public).")
    if not isinstance(cost, PrivacyCost):
        raise ParameterError("The cost must be a PrivacyCost (pure ε or ρ-zCDP).")
    k = int(k) if statistic == "group_sizes" else 1
    if k < 1:
        raise ParameterError("A group-size histogram needs at least one size.")
    L = hierarchy.depth
    measured = measured_levels(info.name, statistic, neighbour, L)
    n_meas = sum(measured)
    if split == "custom":
        if weights is None or len(list(weights)) != n_meas:
            names = [hierarchy.level_names[d] for d in range(L + 1) if measured[d]]
            raise ParameterError(
                f"A custom split needs {n_meas} weights, one per measured level ({', '.join(names)}), "
                "top first, e.g. " + ",".join(["1"] * n_meas) + "."
            )
    # geometric: each level gets 2^(1/3) times the share of the level above (finest the most)
    shares_m = calibration.split(cost.value, n_meas, split, weights=weights)
    l1, l2 = _sensitivities(info.name, statistic, neighbour)
    shares: list[float] = []
    it = iter(shares_m)
    for m in measured:
        shares.append(next(it) if m else 0.0)

    noises: list[str | None] = []
    scales: list[Any] = []
    var: list[float] = []
    for d in range(L + 1):
        if measured[d]:
            nm, sc = calibration.noise_for_cost(cost.definition, shares[d], l1, l2)
            v = calibration.noise_variance(nm, sc)
        else:
            nm, sc, v = None, None, math.inf
        noises.append(nm)
        scales.append(sc)
        var.append(v)

    sizes = hierarchy.sizes
    node_var: list[np.ndarray]
    basis: str
    if info.name == "independent":
        node_var = [np.full(sizes[d], var[d] if measured[d] else 0.0) for d in range(L + 1)]
        basis = "exact noise distribution"
    elif info.name == "bottom_up":
        leaves = hierarchy.leaves_under()
        node_var = [leaves[d].astype(float) * var[L] for d in range(L + 1)]
        basis = "sum of finest-level noise (normal approximation above the finest level)"
    elif info.name in ("hay", "exact"):
        root_value = 0.0 if (statistic == "count" and neighbour == "replace") else None
        _, node_var = level_least_squares(hierarchy.parents, [None] * (L + 1), var, root_value=root_value)
        basis = ("least-squares posterior variance (exact)" if info.name == "hay" else
                 "least-squares posterior variance; non-negativity and rounding, which depend on the data, "
                 "are not included")
    elif info.name in ("topdown_l2", "topdown_linf"):
        root_var = 0.0 if neighbour == "replace" else var[0]
        node_var = _topdown_variance(hierarchy, var, root_var)
        basis = "TopDown recursion V = σ²(1 − 1/b) + V_parent/b², dense regime (ours)"
    else:  # dpc_approx: raw per-size-cell noise after differencing cumulative noise
        node_var = [np.full(sizes[d], (2.0 * var[d] - var[d] / k) if k > 1 else var[d]) for d in range(L + 1)]
        basis = ("noise per size cell before the isotonic repair (difference of two cumulative noises); "
                 "the repair is non-linear and data-dependent")

    # errors inherit the tails of the noise: exponential for discrete Laplace, Gaussian otherwise
    family = "laplace" if cost.definition == "pure" else "normal"
    levels: list[HierLevelPlan] = []
    for d in range(L + 1):
        nv = np.asarray(node_var[d], float)
        sd_nodes = np.sqrt(nv)
        cells = sizes[d] * k
        noise_sd = math.sqrt(var[d]) if measured[d] else 0.0
        if info.name == "independent" and measured[d]:
            mean_abs = _exact_mean_abs(noises[d], scales[d], noise_sd)
            max_abs = _exactexpected_max(noises[d], scales[d], noise_sd, cells)
        elif info.name == "bottom_up" and d == L:
            mean_abs = _exact_mean_abs(noises[d], scales[d], noise_sd)
            max_abs = _exactexpected_max(noises[d], scales[d], noise_sd, cells)
        elif info.name in ("topdown_l2", "topdown_linf") and family == "normal":
            mean_abs = float(np.mean(sd_nodes)) * math.sqrt(2.0 / math.pi)
            # σ·√(2 ln N) (ours); one cell: E|e| of a normal
            max_abs = (math.sqrt(float(np.mean(nv))) * math.sqrt(2.0 * math.log(cells)) if cells > 1
                       else mean_abs)
        else:
            # sums of many leaf noises (bottom-up above the leaves) are close to normal
            fam = "normal" if info.name == "bottom_up" else family
            mean_abs = float(np.mean(sd_nodes)) * (math.sqrt(0.5) if fam == "laplace" else math.sqrt(2.0 / math.pi))
            max_abs = expected_max(np.repeat(sd_nodes, k), fam)
        levels.append(HierLevelPlan(
            depth=d, level=hierarchy.level_names[d], areas=sizes[d], cells=cells, measured=measured[d],
            share=shares[d], noise=noises[d],
            scale=float(scales[d]) if scales[d] is not None else 0.0,
            l1_sensitivity=l1 if measured[d] else 0.0, l2_sensitivity=l2 if measured[d] else 0.0,
            noise_sd=noise_sd, sd=float(math.sqrt(np.mean(nv))), mean_abs=mean_abs, max_abs=max_abs,
            basis=basis,
        ))
    return HierPlan(info.name, cost, neighbour, statistic, k, split,
                    tuple(float(w) for w in (weights or ())), tuple(levels),
                    tuple(np.sqrt(np.asarray(v, float)) for v in node_var), tuple(scales))


# ---------------------------------------------------------------------------------------------
# release
# ---------------------------------------------------------------------------------------------


def _draw(noise: NoiseSource, kind: str, scale: Any, shape: tuple[int, ...]) -> np.ndarray:
    if kind == "discrete_laplace":
        return noise.discrete_laplace(scale, shape)
    return noise.discrete_gaussian(scale, shape)


def _measure(true: list[np.ndarray], p: HierPlan, noise: NoiseSource) -> list[np.ndarray | None]:
    out: list[np.ndarray | None] = []
    for d, lv in enumerate(p.levels):
        if lv.measured:
            out.append(true[d] + _draw(noise, lv.noise, p.scales[d], true[d].shape))
        else:
            out.append(None)
    return out


def _tiebreak(noise: NoiseSource, n: int) -> np.ndarray:
    """Random tie-break keys (Boninsegna & Silvestri 2025, Sec. 4.2: no area is favoured by its index)."""
    return (noise.random_uint64(n) >> np.uint64(1)).astype(np.int64)


def _half_widths(p: HierPlan) -> list[float]:
    return list(treedp.default_half_widths([1.0 / lv.noise_sd ** 2 if lv.measured else 0.0 for lv in p.levels]))


def _dp_weights(p: HierPlan) -> list[float]:
    """Inverse-variance weights, normalised so that a uniform split gives all 1 (exact integers)."""
    v = [lv.noise_sd ** 2 for lv in p.levels if lv.measured]
    vmin = min(v)
    return [vmin / (lv.noise_sd ** 2) if lv.measured else 1.0 for lv in p.levels]


def _tprime(h: Hierarchy, k: int) -> list[np.ndarray]:
    """Parents of the group-size tree T′: depth 0 = dummy root, depth d+1 = k copies of depth d."""
    parents = [np.zeros(k, dtype=np.int64)]
    sizes = h.sizes
    for d in range(h.depth):
        g = np.repeat(np.arange(k, dtype=np.int64), sizes[d + 1])
        parents.append(g * sizes[d] + np.tile(h.parents[d], k))
    return parents


def _copy_major(a: np.ndarray) -> np.ndarray:
    """(n, k) → copy-major flat (all nodes of size 1, then size 2, …)."""
    return np.ascontiguousarray(a.T).ravel()


def _isotonic_rows(c: np.ndarray) -> np.ndarray:
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


def check_order(order: str) -> None:
    """IntOpt's zeroing order must be 'ascending' or 'descending'."""
    if order not in ("ascending", "descending"):
        raise ParameterError("The zeroing order is 'ascending' (fewer false positives) or 'descending'.")


def max_fanout(h: Hierarchy) -> int:
    """The largest number of children of one area of ``h`` (public)."""
    return max((int(np.diff(h.child_offsets(d)).max()) for d in range(h.depth)), default=1)


def check_data(counts: HierarchyCounts, p: HierPlan, *, area_sets: Any = None) -> None:
    """Every refusal of a release of ``counts`` with ``p`` that can be decided from the true counts,
    run before the budget is charged (issue 18, item 7).

    * the matrix mechanism: the strategy answers fit the noise grid
      (:func:`dpcore.areas.mechanisms.matrix.check_data`);
    * the exact solver (``exact`` and every group-size histogram; Fioretto, Van Hentenryck & Zhu
      2021): the total (the number of groups N for group sizes) is at most ``2^47``
      (:func:`dpcore.estimate.treedp.check_true_total`);
    * TopDown (``topdown_l2``, ``topdown_linf``; Abowd et al. 2022): the counts leave half the
      exact integer range of the projections (:func:`dpcore.estimate.topdown_opt.check_true_counts`).

    Each refuses only counts far beyond any real table; the refusal publishes nothing (nothing is
    released or charged) and is seen by the curator, who holds the counts, only.  What depends on
    the *noisy* values (the solver's table size, and a noisy value beyond those ranges) is still
    checked during the release, after the charge (``SECURITY.md``).
    """
    if p.mechanism == "matrix":
        matrix_check_data(counts, p, area_sets=area_sets)
        return
    # summed in Python integers: an int64 sum of absurd counts could wrap round and pass
    total = int(np.sum(np.asarray(counts.leaf).reshape(-1).astype(object), initial=0))
    if counts.statistic == "group_sizes":  # the total is N, the number of groups
        treedp.check_true_total(total)
        return
    if p.mechanism == "exact":
        treedp.check_true_total(total)
    elif p.mechanism in ("topdown_l2", "topdown_linf"):
        topdown_opt.check_true_counts(total, max_fanout(counts.hierarchy))


def release(
    counts: HierarchyCounts,
    mechanism: str,
    cost: PrivacyCost,
    noise: NoiseSource,
    *,
    neighbour: Neighbour = "add_remove",
    split: calibration.SplitKind = "uniform",
    weights: Sequence[float] | None = None,
    order: Literal["ascending", "descending"] = "ascending",
    area_sets: Any = None,
    sets_weight: float = 1.0,
) -> HierarchyRelease:
    """Release ``counts`` with a hierarchy mechanism (the caller has charged the ledger).

    Use :func:`dpcore.pipeline.release_hierarchy`, which validates, charges the ledger and then
    calls this.  ``order`` is IntOpt's zeroing order for ``topdown_linf``.
    """
    p = plan(counts.hierarchy, mechanism, cost, neighbour=neighbour, split=split, weights=weights,
             statistic=counts.statistic, k=counts.k, area_sets=area_sets, sets_weight=sets_weight)
    check_order(order)
    if p.mechanism == "matrix":
        return matrix_release(counts, p, noise, area_sets=area_sets, sets_weight=sets_weight)
    return release_planned(counts, p, noise, order=order)


def release_planned(
    counts: HierarchyCounts,
    p: HierPlan,
    noise: NoiseSource,
    *,
    order: Literal["ascending", "descending"] = "ascending",
) -> HierarchyRelease:
    """Release ``counts`` with the plan ``p`` already built by :func:`plan` (not ``matrix``,
    which :func:`dpcore.areas.mechanisms.matrix.release` releases from its plan).

    The noise of every level is the plan's (its shares, noise and scales), so a release planned
    once is never planned again: the measured levels get the noise of the plan, then each
    mechanism's estimator runs (least squares for Hay et al. 2010 / ``exact``, the TopDown
    projections of Abowd et al. 2022 for ``topdown_*``, the isotonic repair of ``dpc_approx``).
    ``p`` must be planned for ``counts``' hierarchy, statistic and ``k``
    (:class:`dpcore.areas.kind.HierarchyMechanism` checks); the caller has charged ``p.cost``.
    """
    check_order(order)
    if p.mechanism == "matrix":
        raise ParameterError("The matrix mechanism releases from its plan with dpcore.areas.mechanisms.matrix.release.")
    h = counts.hierarchy
    true = counts.levels()
    L = h.depth
    details: dict[str, Any] = {}
    # bottom-up's total is the sum of its noisy finest areas: it publishes no exact total
    public_total = int(true[0][0]) if p.total_public and p.mechanism != "bottom_up" else None
    name = p.mechanism

    if counts.statistic == "group_sizes":
        N = counts.n_groups
        details["public_groups_N"] = N
        k = counts.k
        if name == "dpc_approx":
            y_levels: list[np.ndarray | None] = []
            for d in range(L + 1):
                lv = p.levels[d]
                cum = np.cumsum(true[d], axis=1)
                noisy = cum + _draw(noise, lv.noise, p.scales[d], cum.shape)
                z = _isotonic_rows(noisy.astype(float))
                z = np.maximum(z, 0.0)
                if d == 0:
                    z = np.minimum(z, float(N))
                z = np.floor(z + 0.5).astype(np.int64)  # ⌊z + ½⌋, not banker's rounding (§7.4)
                y_levels.append(np.diff(z, axis=1, prepend=0))
        else:
            y_levels = _measure(true, p, noise)
        tp = _tprime(h, k)
        ys: list[np.ndarray | None] = [None] + [_copy_major(y) for y in y_levels]
        w = [1.0] + _dp_weights(p)
        hw = [5.0] + _half_widths(p)
        res = treedp.solve_l2(tp, ys, w, root_value=N, half_widths=hw)
        values = [res.values[d + 1].reshape(k, h.sizes[d]).T.copy() for d in range(L + 1)]
        details.update(widenings=res.widenings)
        return HierarchyRelease(h, p, tuple(values), None, counts.size_labels, details)

    y = _measure(true, p, noise)
    if name == "independent":
        values = [yy if yy is not None else true[d].copy() for d, yy in enumerate(y)]
        # the only unmeasured level of 'independent' is the public total (replace neighbours)
    elif name == "bottom_up":
        values = h.aggregate(y[L])
    elif name == "hay":
        var = [lv.noise_sd ** 2 if lv.measured else math.inf for lv in p.levels]
        values, _ = level_least_squares(h.parents, y, var, root_value=public_total)
    elif name == "exact":
        res = treedp.solve_l2(h.parents, y, _dp_weights(p), root_value=public_total,
                              half_widths=_half_widths(p))
        values = list(res.values)
        details.update(widenings=res.widenings)
    elif name in ("topdown_l2", "topdown_linf"):
        root = public_total if public_total is not None else max(int(y[0][0]), 0)
        values = [np.array([root], dtype=np.int64)]
        for d in range(L):
            off = h.child_offsets(d)
            tb = _tiebreak(noise, h.sizes[d + 1])
            if name == "topdown_linf":
                x = topdown_opt.intopt_segments(y[d + 1], off, values[d], order=order, tiebreak=tb)
            else:
                # every tie choice is optimal; a random order keeps the rounding independent of
                # the noise (giving the leftover units to the largest noisy counts biases them up)
                x = topdown_opt.l2_round_segments(y[d + 1], off, values[d], tiebreak=tb)
            values.append(np.asarray(x, dtype=np.int64))
        details["zeroing_order"] = order if name == "topdown_linf" else None
    else:  # pragma: no cover - plan() rejects the rest
        raise ParameterError(f"{name} does not release plain counts.")
    return HierarchyRelease(h, p, tuple(np.asarray(v) for v in values), public_total, (), details)


# ---------------------------------------------------------------------------------------------
# curator-only diagnostics
# ---------------------------------------------------------------------------------------------


def empirical_errors(rel: HierarchyRelease, counts: HierarchyCounts,
                     smoothing: float = metrics.DEFAULT_SMOOTHING) -> list[dict[str, Any]]:
    """Curator-only: error of the release against the truth, per level.  **Not for publication.**

    Per level (:mod:`dpcore.core.metrics`): mean absolute error, maximum absolute error, mean
    relative error in percent (``|x̂ − x| / max(x, smoothing)``), and the number of cells whose true
    value is 0 but whose released value is positive (empty areas that show people).
    """
    if counts.hierarchy is not rel.hierarchy and counts.hierarchy.fingerprint() != rel.hierarchy.fingerprint():
        raise InputError("The release was made on another area list than these counts.")
    true = counts.levels()
    out = []
    for d, lv in enumerate(rel.plan.levels):
        t = true[d].astype(float).ravel()
        e = rel.values[d].astype(float).ravel()
        out.append({
            "level": lv.level,
            "cells": int(t.size),
            "mae": metrics.mae(t, e),
            "max_abs_error": metrics.max_abs(t, e),
            "mre_percent": metrics.mre(t, e, smoothing),
            "true_zero_released_positive": int(np.sum((t == 0) & (e > 0))),
            "true_zeros": int(np.sum(t == 0)),
            "expected_mae": lv.mean_abs,
            "expected_max_abs": lv.max_abs,
        })
    return out

