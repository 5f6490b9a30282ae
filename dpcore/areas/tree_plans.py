"""Plans and releases over a geographic hierarchy, and the machinery every tree mechanism shares.

The hierarchy mechanisms (one module each under :mod:`dpcore.areas.mechanisms`) build and
return these objects:

* :class:`HierLevelPlan` / :class:`HierPlan` — the data-free plan: budget, noise and expected
  error per level (safe to show before the release and to publish).
* :class:`HierarchyRelease` — the released values per level, with the plan that made them.

and share these steps:

* the sensitivities of a level's counts (:func:`sensitivities`) and the split of the budget over
  the measured levels with the noise of each (:func:`level_noise`);
* the expected errors: :func:`expected_max` (largest absolute error over independent area
  errors), :func:`exact_mean_abs` / :func:`exact_expected_max` (from the exact pmf of the noise),
  :func:`smooth_error`, and the level plans built from per-area variances (:func:`level_plans`);
* measuring the levels (:func:`measure`), the tree DP's weights (:func:`dp_weights`,
  :func:`half_widths`) and group-size trees (:func:`group_size_release`), the TopDown recursion
  (:func:`topdown_variance`, :func:`topdown_error`, :func:`topdown_release`);
* the curator-only diagnostics against the truth (:func:`empirical_errors`).

Privacy.  Each measured level is a histogram that partitions the people (or groups), so a
level's counts have L1 sensitivity Δ₁ and L2 sensitivity Δ₂ (below) and levels compose
sequentially over the per-level split of the budget (Fioretto, Van Hentenryck & Zhu, AIJ 2021,
Lemmas 4 and 6, Thm 1; Boninsegna & Silvestri, PoPETs 2025, Sec. 4.1).  Pure ε-DP uses the
exact discrete Laplace with scale Δ₁/ε_l; ρ-zCDP uses the exact discrete Gaussian with
σ_l = Δ₂/√(2ρ_l).  Neighbours are either add/remove one person (the total is noised) or replace
one person (the total is public and exact, the root is not measured, and Δ doubles: Fioretto et
al. 2021, Sec. 4; erratum: the paper's Δ is for add/remove).  Everything after the noise is
post-processing.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpcore.areas.counts import HierarchyCounts
from dpcore.core import metrics
from dpcore.core.mechanism import errors_wanted, finite_fields
from dpcore.core.record import created_now, new_release_id
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import InputError, ParameterError
from dpcore.estimate import treedp
from dpcore.privacy import calibration
from dpcore.privacy import noise as _noise
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.calibration import interval_half_width
from dpcore.privacy.noise import NoiseSource
from dpcore.privacy.units import Neighbour

__all__ = [
    "HierLevelPlan",
    "HierPlan",
    "HierarchyRelease",
    "LevelError",
    "LevelNoise",
    "Neighbour",
    "check_order",
    "dp_weights",
    "empirical_errors",
    "exact_expected_max",
    "exact_mean_abs",
    "expected_max",
    "group_size_release",
    "half_widths",
    "level_noise",
    "level_plans",
    "max_fanout",
    "measure",
    "sensitivities",
    "smooth_error",
    "tiebreak",
    "topdown_error",
    "topdown_release",
    "topdown_variance",
    "true_total",
]


@dataclass(frozen=True)
class HierLevelPlan:
    """One depth of the hierarchy: its budget, noise and expected error (all data-free)."""

    depth: int
    level: str
    areas: int
    cells: int
    measured: bool
    share: float
    noise: str | None
    scale: float
    l1_sensitivity: float
    l2_sensitivity: float
    noise_sd: float
    sd: float
    mean_abs: float
    max_abs: float
    basis: str

    def to_dict(self) -> dict[str, Any]:
        return finite_fields(self.__dict__)


@dataclass(frozen=True, eq=False)
class HierPlan:
    """The data-free description of a hierarchy release (safe to show and publish)."""

    mechanism: str
    cost: PrivacyCost
    neighbour: str
    statistic: str
    k: int
    split: str
    split_weights: tuple[float, ...]
    levels: tuple[HierLevelPlan, ...]
    node_sd: tuple[np.ndarray, ...] = field(repr=False)
    scales: tuple[Any, ...] = field(repr=False)
    #: Mechanism-specific public facts (the matrix mechanism's strategy, workload and bounds).
    extra: dict[str, Any] = field(default_factory=dict)
    #: The mechanism that made the plan (its title, paper and guarantees, for records and pages).
    made_by: Any = field(default=None, repr=False)

    @property
    def total_public(self) -> bool:
        return self.neighbour == "replace" and self.statistic == "count"


@dataclass(frozen=True, eq=False)
class HierarchyRelease:
    """A released hierarchy: noisy values at every depth, and how they were made.

    ``values[d]`` has shape ``(n_d,)`` (counts) or ``(n_d, k)`` (group sizes).  Everything here
    is public: the tree, the plan, the DP output and its post-processing.
    """

    hierarchy: Hierarchy
    plan: HierPlan
    values: tuple[np.ndarray, ...]
    public_total: int | None
    size_labels: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    release_id: str = field(default_factory=new_release_id)
    created: str = field(default_factory=created_now)  # the session restamps it with the charge time
    #: The noisy counts of every level before post-processing (None: not measured), for the data
    #: users' files (:mod:`dpcore.estimate.data_users`); empty when the mechanism does not expose them.
    measurements: tuple[np.ndarray | None, ...] = field(default=(), repr=False)

    @property
    def mechanism(self) -> Any:
        """The :class:`~dpcore.areas.mechanisms.tree.TreeMechanism` that made the plan."""
        return self.plan.made_by

    @property
    def consistent(self) -> bool:
        for d in range(self.hierarchy.depth):
            child = self.values[d + 1]
            sums = np.zeros_like(self.values[d], dtype=float)
            np.add.at(sums, self.hierarchy.parents[d], child.astype(float))
            if not np.allclose(sums, self.values[d], rtol=1e-9, atol=1e-6):
                return False
        return True

    def sd(self, depth: int) -> np.ndarray:
        """Analytic (data-free) standard deviation of each area's error at ``depth``."""
        return self.plan.node_sd[depth]

    @property
    def has_intervals(self) -> bool:
        """Whether :meth:`interval` is a valid 95 % interval for the released values, so that
        release.csv, the GeoJSON and the map publish it (the mechanism's ``normal_intervals``)."""
        return bool(self.mechanism.normal_intervals)

    def single_draw(self, depth: int) -> bool:
        """Whether every area's error at ``depth`` is one draw of the level's discrete noise: the level is
        measured and the mechanism releases its measured levels as they are (``single_draw_measured``:
        every measured level of independent noise, the finest level of bottom-up)."""
        return self.mechanism.single_draw(self.plan.levels[depth])

    def interval(self, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """The 95 % interval ``value ± h`` of every area at ``depth`` (clipped at 0 for non-negative
        releases; published only where :attr:`has_intervals`).

        * Where an area's error is one discrete Laplace / discrete Gaussian draw (:meth:`single_draw`),
          ``h`` is the exact quantile of that noise, the smallest whole number with ``P(|X| ≤ h) ≥ 0.95``
          (:func:`~dpcore.privacy.calibration.interval_half_width` of the level's noise and scale).  The
          normal ``1.96·sd`` is not a whole number, so it covered only ``|X| ≤ ⌊1.96·sd⌋``: 92.7 % for the
          discrete Laplace at ε = 0.4 a level, 92.9 % for the discrete Gaussian with σ² = 2
          (benchmarks/results/interval_release_coverage.md).
        * Where an area's error is the sum of a public number m of whole-number draws of one discrete noise
          (bottom-up's coarse levels: :meth:`~dpcore.areas.mechanisms.tree.TreeMechanism.sum_half_widths`),
          ``h`` is the exact quantile of that sum, the smallest whole number with ``P(|S_m| ≤ h) ≥ 0.95``,
          per area.  ``1.96·sd`` covered such areas down to 78.6 % (pure ε = 5, m = 19;
          benchmarks/results/bottom_up_sum_coverage.md).
        * Elsewhere (sums or least-squares combinations of many noisy counts) the normal approximation
          ``h = z·sd``, ``z = normal_z(0.95)``.
        """
        v = self.values[depth].astype(float)
        summed = None if self.single_draw(depth) else self.mechanism.sum_half_widths(self.hierarchy, self.plan, depth)
        if self.single_draw(depth):
            half: Any = interval_half_width(self.plan.levels[depth].noise, self.plan.scales[depth])
        elif summed is not None:
            half = summed[:, None] if v.ndim == 2 else summed
        else:
            sd = self.sd(depth)
            if v.ndim == 2:
                sd = sd[:, None]
            half = interval_half_width("normal", np.asarray(sd, dtype=np.float64))
        lo, hi = v - half, v + half
        if self.mechanism.nonnegative:
            lo = np.maximum(lo, 0.0)
        return lo, hi


# ---------------------------------------------------------------------------------------------
# privacy: sensitivities and the noise of every measured level
# ---------------------------------------------------------------------------------------------


def sensitivities(statistic: str, neighbour: str, *, cumulative: bool = False) -> tuple[float, float]:
    """``(Δ₁, Δ₂)`` of one level's counts (the table in the module docstring).

    ``cumulative``: group sizes in the cumulative encoding (Fioretto et al. 2021, Lemma 6).

    >>> sensitivities("count", "replace")
    (2.0, 1.4142135623730951)
    """
    base = (1.0, 1.0) if statistic == "count" or cumulative else (2.0, math.sqrt(2.0))
    if neighbour == "replace":
        return 2.0 * base[0], math.sqrt(2.0) * base[1]
    return base


@dataclass(frozen=True)
class LevelNoise:
    """The budget share, noise and noise variance of every depth (0 for unmeasured depths)."""

    measured: tuple[bool, ...]
    shares: tuple[float, ...]
    noises: tuple[str | None, ...]
    scales: tuple[Any, ...]
    var: tuple[float, ...]
    l1: float
    l2: float

    def noise_sd(self, d: int) -> float:
        return math.sqrt(self.var[d]) if self.measured[d] else 0.0


def level_noise(h: Hierarchy, cost: PrivacyCost, measured: Sequence[bool], split: calibration.SplitKind,
                weights: Sequence[float] | None, l1: float, l2: float) -> LevelNoise:
    """Split ``cost`` over the measured levels (``split``; ``weights`` one per measured level, top
    first, with ``custom``) and calibrate each level's noise to its share and sensitivity."""
    shares = calibration.split_measured(cost.value, measured, split, weights, h.level_names)
    noises: list[str | None] = []
    scales: list[Any] = []
    var: list[float] = []
    for d, m in enumerate(measured):
        if m:
            nm, sc = calibration.noise_for_cost(cost.definition, shares[d], l1, l2)
            v = calibration.noise_variance(nm, sc)
        else:
            nm, sc, v = None, None, math.inf
        noises.append(nm)
        scales.append(sc)
        var.append(v)
    return LevelNoise(tuple(measured), tuple(shares), tuple(noises), tuple(scales), tuple(var), l1, l2)


# ---------------------------------------------------------------------------------------------
# expected errors
# ---------------------------------------------------------------------------------------------


def expected_max(sds: np.ndarray, family: str = "normal") -> float:
    """``E[max_v |e_v|]`` for independent errors with standard deviations ``sds``.

    ``family`` is ``"normal"`` (tail ``erfc(t/(s√2))``) or ``"laplace"`` (tail ``exp(−t√2/s)``:
    errors dominated by discrete Laplace noise have exponential, not Gaussian, tails, and the
    normal form underestimates their maximum by about half on 10⁵ areas).  Computed as
    ``∫_0^∞ 1 − Π_v (1 − tail_v(t)) dt`` on a fine grid; equal SDs are grouped (rounded to 4
    significant digits, far below the precision of the estimate itself).
    """
    s = np.asarray(sds, float)
    s = s[s > 0]
    if s.size == 0:
        return 0.0
    digits = 3 - int(np.floor(np.log10(s.max())))
    u, c = np.unique(np.round(s, digits), return_counts=True)
    u = np.maximum(u, s.min())
    reach = math.log(max(s.size, 2)) + 8.0
    t = np.linspace(0.0, float(u.max()) * (reach if family == "laplace" else 4.0 + math.sqrt(2.0 * reach)), 2001)
    x = t[:, None] / u[None, :]
    from scipy import special  # here, not at the top: listing mechanisms need not import SciPy

    tail = np.exp(-math.sqrt(2.0) * x) if family == "laplace" else special.erfc(x / math.sqrt(2.0))
    log_none = (np.log1p(-np.minimum(tail, 1 - 1e-16)) * c[None, :]).sum(axis=1)
    p_exceed = -np.expm1(log_none)
    return float(np.sum((p_exceed[1:] + p_exceed[:-1]) * 0.5 * np.diff(t)))


#: Points of the exact pmf summed at most (an SD of about 33,000).  The exact sums need about 60·SD
#: points, memory in proportion to 1/ε (ε = 10⁻⁹ asked for 10¹¹ and failed with a MemoryError); beyond
#: this the continuous formulas (:func:`smooth_error`'s tails) take over: at the switch they differ
#: from the exact ones by about 10⁻⁹ relative (mean) and by :func:`expected_max`'s rounding of the SD
#: to 4 significant digits (expected largest).
EXACT_MAX_POINTS = 2_000_000


def _exact_fits(sd: float) -> bool:
    return 60.0 * sd + 10 <= EXACT_MAX_POINTS


def _family(noise: str) -> str:
    return "laplace" if noise == "discrete_laplace" else "normal"


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


def exact_mean_abs(noise: str, scale: Any, sd: float) -> float:
    """``E|η|`` of one draw of the noise, from its exact pmf (beyond :data:`EXACT_MAX_POINTS`, the
    continuous noise's with the same SD)."""
    if not _exact_fits(sd):
        return float(sd) * (math.sqrt(0.5) if _family(noise) == "laplace" else math.sqrt(2.0 / math.pi))
    kmax = int(math.ceil(60.0 * sd)) + 10
    k = np.arange(1, kmax + 1)
    pmf = (_noise.discrete_laplace_pmf(k, scale) if noise == "discrete_laplace"
           else _noise.discrete_gaussian_pmf(k, scale))
    return float(2.0 * np.sum(k * pmf))


def exact_expected_max(noise: str, scale: Any, sd: float, n: int) -> float:
    """``E[max |η_i|]`` over ``n`` independent draws: ``Σ_{t≥0} 1 − (1 − P(|η| > t))^n`` (exact pmf;
    beyond :data:`EXACT_MAX_POINTS`, :func:`expected_max` of the continuous noise with the same SD)."""
    if not _exact_fits(sd):
        return expected_max(np.full(n, float(sd)), _family(noise))
    _, tail = _abs_tail(noise, scale, sd)
    return float(np.sum(-np.expm1(n * np.log1p(-np.minimum(tail, 1 - 1e-16)))))


def smooth_error(nv: np.ndarray, k: int, family: str) -> tuple[float, float]:
    """Mean and expected largest absolute error of a level from its per-area variances ``nv``,
    with the tails of ``family``: ``E|e| = sd/√2`` (Laplace) or ``sd·√(2/π)`` (normal)."""
    sd_nodes = np.sqrt(nv)
    mean_abs = float(np.mean(sd_nodes)) * (math.sqrt(0.5) if family == "laplace" else math.sqrt(2.0 / math.pi))
    return mean_abs, expected_max(np.repeat(sd_nodes, k), family)


def topdown_variance(h: Hierarchy, var: Sequence[float], root_var: float) -> list[np.ndarray]:
    """TopDown per-node error variance (ours, dense regime).

    ``V_0`` = root variance (0 when public), ``V_u = σ_l²(1 − 1/b) + V_parent/b²`` with ``b`` the
    number of children of the parent (a single child copies its parent: ``V_u = V_parent``).
    """
    out = [np.array([root_var])]
    for d in range(h.depth):
        b = h.n_children(d).astype(float)[h.parents[d]]
        out.append(var[d + 1] * (1.0 - 1.0 / b) + out[d][h.parents[d]] / (b * b))
    return out


def topdown_error(nv: np.ndarray, cells: int, k: int, family: str) -> tuple[float, float]:
    """TopDown's mean error and typical maximum ``√V·√(2 ln N_l)`` (ours) under Gaussian noise;
    :func:`smooth_error` under Laplace noise."""
    if family != "normal":
        return smooth_error(nv, k, family)
    mean_abs = float(np.mean(np.sqrt(nv))) * math.sqrt(2.0 / math.pi)
    # σ·√(2 ln N) (ours); one cell: E|e| of a normal
    max_abs = math.sqrt(float(np.mean(nv))) * math.sqrt(2.0 * math.log(cells)) if cells > 1 else mean_abs
    return mean_abs, max_abs


#: ``level_error(depth, noise, per-area variances, cells, k, family) -> (mean_abs, max_abs)``
LevelError = Callable[[int, LevelNoise, np.ndarray, int, int, str], tuple[float, float]]


def level_plans(h: Hierarchy, cost: PrivacyCost, ln: LevelNoise, node_var: Sequence[np.ndarray], k: int,
                basis: str, level_error: LevelError) -> tuple[HierLevelPlan, ...]:
    """The plan of every depth from the per-area error variances ``node_var`` (data-free).

    Errors inherit the tails of the noise: exponential for discrete Laplace (pure ε), Gaussian
    otherwise; ``level_error`` gives the mean and expected largest absolute error of a level (NaN,
    not computed, inside :func:`~dpcore.core.mechanism.sd_only`).
    """
    family = "laplace" if cost.definition == "pure" else "normal"
    wanted = errors_wanted()  # not in a search that reads the SDs only (the target planner)
    levels = []
    for d in range(h.depth + 1):
        nv = np.asarray(node_var[d], float)
        cells = h.sizes[d] * k
        mean_abs, max_abs = level_error(d, ln, nv, cells, k, family) if wanted else (math.nan, math.nan)
        levels.append(HierLevelPlan(
            depth=d, level=h.level_names[d], areas=h.sizes[d], cells=cells, measured=ln.measured[d],
            share=ln.shares[d], noise=ln.noises[d],
            scale=float(ln.scales[d]) if ln.scales[d] is not None else 0.0,
            l1_sensitivity=ln.l1 if ln.measured[d] else 0.0, l2_sensitivity=ln.l2 if ln.measured[d] else 0.0,
            noise_sd=ln.noise_sd(d), sd=float(math.sqrt(np.mean(nv))), mean_abs=mean_abs, max_abs=max_abs,
            basis=basis,
        ))
    return tuple(levels)


# ---------------------------------------------------------------------------------------------
# release: measuring the levels and the estimators shared by several mechanisms
# ---------------------------------------------------------------------------------------------


def measure(true: list[np.ndarray], p: HierPlan, noise: NoiseSource) -> list[np.ndarray | None]:
    """The noisy counts of every measured level (None for the others), with the plan's noise."""
    out: list[np.ndarray | None] = []
    for d, lv in enumerate(p.levels):
        if lv.measured:
            out.append(true[d] + noise.discrete(lv.noise, p.scales[d], true[d].shape))
        else:
            out.append(None)
    return out


def tiebreak(noise: NoiseSource, n: int) -> np.ndarray:
    """Random tie-break keys (Boninsegna & Silvestri 2025, Sec. 4.2: no area is favoured by its index)."""
    return (noise.random_uint64(n) >> np.uint64(1)).astype(np.int64)


def half_widths(p: HierPlan) -> list[float]:
    """The tree DP's initial search half-widths per level (:func:`dpcore.estimate.treedp.default_half_widths`)."""
    return list(treedp.default_half_widths([1.0 / lv.noise_sd ** 2 if lv.measured else 0.0 for lv in p.levels]))


def dp_weights(p: HierPlan) -> list[float]:
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


def group_size_release(counts: HierarchyCounts, p: HierPlan, y_levels: Sequence[np.ndarray]) -> HierarchyRelease:
    """Consistent, non-negative, integral group-size histograms from the noisy ones ``y_levels``
    (``(n_d, k)`` per depth): the exact tree DP on the k-copy tree T′ under a dummy root fixed to
    the public number of groups N (Fioretto et al. 2021, §1.8)."""
    h, k, n_groups = counts.hierarchy, counts.k, counts.n_groups
    details: dict[str, Any] = {"public_groups_N": n_groups}
    ys: list[np.ndarray | None] = [None] + [_copy_major(y) for y in y_levels]
    res = treedp.solve_l2(_tprime(h, k), ys, [1.0] + dp_weights(p), root_value=n_groups,
                          half_widths=[5.0] + half_widths(p))
    values = [res.values[d + 1].reshape(k, h.sizes[d]).T.copy() for d in range(h.depth + 1)]
    details.update(widenings=res.widenings)
    return HierarchyRelease(h, p, tuple(values), None, counts.size_labels, details)


def topdown_release(h: Hierarchy, y: Sequence[np.ndarray | None], public_total: int | None, noise: NoiseSource,
                    project: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], Any]) -> list[np.ndarray]:
    """TopDown (Abowd et al., HDSR 2022): from the total down, each area's noisy children are
    projected (``project(noisy children, segment offsets, parents' values, tie-break keys)``)
    onto non-negative integers that add up to the area's released count."""
    root = public_total if public_total is not None else max(int(y[0][0]), 0)
    values = [np.array([root], dtype=np.int64)]
    for d in range(h.depth):
        tb = tiebreak(noise, h.sizes[d + 1])
        values.append(np.asarray(project(y[d + 1], h.child_offsets(d), values[d], tb), dtype=np.int64))
    return values


def check_order(order: str) -> None:
    """IntOpt's zeroing order must be 'ascending' or 'descending'."""
    if order not in ("ascending", "descending"):
        raise ParameterError("The zeroing order is 'ascending' (fewer false positives) or 'descending'.")


def max_fanout(h: Hierarchy) -> int:
    """The largest number of children of one area of ``h`` (public)."""
    return max((int(np.diff(h.child_offsets(d)).max()) for d in range(h.depth)), default=1)


def true_total(counts: HierarchyCounts) -> int:
    """The total of the true counts, summed in Python integers (an int64 sum of absurd counts
    could wrap round and pass a range check)."""
    return int(np.sum(np.asarray(counts.leaf).reshape(-1).astype(object), initial=0))


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

