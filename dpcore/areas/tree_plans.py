"""What a release over a geographic hierarchy is: the mechanism catalogue, the plan and the release.

Both the mechanisms on the tree (:mod:`dpcore.areas.tree_mechanisms`) and the matrix mechanism
over curator area sets (:mod:`dpcore.areas.mechanisms.matrix`) build these records and take them from
here: ``tree_mechanisms`` dispatches ``matrix`` to ``area_sets``, which needs nothing back.

* :data:`MECHANISMS` / :func:`get` — what the app and the CLI say about each mechanism (title,
  when to use it, the consistency, integrality and non-negativity it guarantees, its paper).
* :class:`HierLevelPlan` / :class:`HierPlan` — the data-free plan: budget, noise and expected
  error per level (safe to show before the release and to publish).
* :class:`HierarchyRelease` — the released values per level, with the plan that made them.
* :func:`expected_max` — the expected largest absolute error over independent area errors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpcore.areas.hierarchy import Hierarchy
from dpcore.core.record import created_now, new_release_id
from dpcore.core.registry import lookup
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.calibration import interval_half_width

__all__ = [
    "MECHANISMS",
    "HierLevelPlan",
    "HierMechanismInfo",
    "HierPlan",
    "HierarchyRelease",
    "expected_max",
    "get",
]


@dataclass(frozen=True)
class HierMechanismInfo:
    """What the app and the CLI say about a hierarchy mechanism."""

    name: str
    title: str
    description: str
    when: str
    consistent: bool
    integral: bool
    nonnegative: bool
    group_sizes: bool
    counts: bool
    default_definition: str
    paper: str


MECHANISMS: dict[str, HierMechanismInfo] = {
    m.name: m
    for m in (
        HierMechanismInfo(
            "exact", "Exact integer least squares (tree DP)",
            "Noise on every level, then the closest non-negative, integral, consistent counts in the "
            "least-squares sense, found exactly by a dynamic program over the tree.",
            "The default: every level adds up, no negative or fractional counts, and every level's "
            "noise informs every other level.",
            True, True, True, True, True, "pure",
            "Fioretto, Van Hentenryck & Zhu, AIJ 2021, Sec. 6–7, Algorithm 1"),
        HierMechanismInfo(
            "topdown_linf", "TopDown L∞ (InfTDA)",
            "From the total down, each area's children are noised and projected onto non-negative "
            "integers that add up to the area's released count, minimising the largest change (IntOpt).",
            "Many small areas: it zeroes the smallest noisy cells first, so few empty areas show "
            "people, and its worst-case error per level is bounded.",
            True, True, True, False, True, "zcdp",
            "Boninsegna & Silvestri, PoPETs 2025, Algorithms 1–2"),
        HierMechanismInfo(
            "topdown_l2", "TopDown L2 (Census Bureau style)",
            "From the total down, each area's children are noised and projected onto non-negative "
            "integers that add up to the area's count, minimising the squared change (least squares "
            "then controlled rounding).",
            "Reproducing the US Census Bureau's TopDown algorithm.",
            True, True, True, False, True, "zcdp",
            "US Census TDA (Abowd et al., HDSR 2022); Fioretto et al., AIJ 2021, Sec. 10"),
        HierMechanismInfo(
            "hay", "Least squares on the tree (Hay et al.)",
            "Noise on every level, then weighted least squares that makes every level add up "
            "(two passes over the tree). Counts are real numbers and may be negative.",
            "Unbiased estimates for analysts who accept fractional and negative counts.",
            True, False, False, False, True, "pure",
            "Hay, Rastogi, Miklau & Suciu, PVLDB 2010"),
        HierMechanismInfo(
            "matrix", "Matrix mechanism (Eigen-Design, tuned to the area totals you ask for)",
            "One noisy answer to a strategy designed for every area total of every level (and any "
            "area-code sets you upload); the finest areas are its least-squares solution and every "
            "level is their sum. Counts are real numbers and may be negative; every area's error is exact.",
            "When people will ask for totals of several levels or of your own groups of areas "
            "(metro areas, districts), under ρ-zCDP, on up to 4,096 finest areas.",
            True, False, False, False, True, "zcdp",
            "Li & Miklau, PVLDB 5(6) 2012, Sec. 3.3"),
        HierMechanismInfo(
            "bottom_up", "Bottom-up (noise on the finest areas only)",
            "The whole budget goes to the finest areas; every coarser area is the sum of its "
            "noisy finest areas.",
            "When only the finest areas matter; coarse areas collect the noise of all their parts.",
            True, True, False, False, True, "pure",
            "baseline (Boninsegna & Silvestri, PoPETs 2025, Sec. 5)"),
        HierMechanismInfo(
            "independent", "Independent noise per level",
            "Every level gets its own noisy counts; nothing is adjusted, so levels do not add up "
            "and counts may be negative.",
            "A baseline to compare against; not for publication when users add areas up.",
            False, True, False, False, True, "pure",
            "baseline (Fioretto et al., AIJ 2021, Sec. 5, Model 1 relaxed, without rounding)"),
        HierMechanismInfo(
            "dpc_approx", "Exact DP with cumulative encoding (group sizes)",
            "For group-size histograms: each area's cumulative histogram (sensitivity 1, half the "
            "noise) is noised and repaired by isotonic regression, then the exact tree DP makes "
            "everything consistent.",
            "Group sizes (households by size): usually more accurate than the raw encoding.",
            True, True, True, True, False, "pure",
            "Fioretto et al., AIJ 2021, Sec. 9.1, Algorithm 2"),
    )
}


def get(name: str) -> HierMechanismInfo:
    """The hierarchy mechanism called ``name`` (case and hyphens do not matter)."""
    return lookup(MECHANISMS, name, "hierarchy mechanism")


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
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in self.__dict__.items()}


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

    @property
    def total_public(self) -> bool:
        return self.neighbour == "replace" and self.statistic == "count"


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

    @property
    def mechanism(self) -> HierMechanismInfo:
        return get(self.plan.mechanism)

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

    def interval(self, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """Normal-approximation 95 % interval ``value ± z·sd``, ``z = normal_z(0.95)`` (an area's
        error combines many noisy counts; clipped at 0 for non-negative releases)."""
        v = self.values[depth].astype(float)
        sd = self.sd(depth)
        if v.ndim == 2:
            sd = sd[:, None]
        half = interval_half_width("normal", np.asarray(sd, dtype=np.float64))
        lo, hi = v - half, v + half
        if self.mechanism.nonnegative:
            lo = np.maximum(lo, 0.0)
        return lo, hi
