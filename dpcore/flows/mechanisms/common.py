"""O/D mechanisms: InfTDA and its baselines, their data-free plan and their release.

InfTDA is the algorithm of Boninsegna & Silvestri, "Differentially private release of
hierarchical origin/destination data with a TopDown approach" (PoPETs 2025 / arXiv 2024; spec
Boninsegna & Silvestri 2025).  The trips are counted per finest (origin, destination) pair
(:class:`dpcore.flows.counts.ODCounts`) and released level by level down the O/D tree of the two
public hierarchies (:func:`dpcore.flows.tree.tree_levels`): every tree level partitions the
trips, so each is a histogram with the same sensitivity.

Mechanisms
----------
* ``inftda`` — InfTDA (the paper's Algorithm 1; Boninsegna & Silvestri 2025, Sec. 4.1, Alg. 1): from the root down, the children of
  every **surviving** node (all of them, from the public list, zeros included) get discrete
  Gaussian (or discrete Laplace) noise and are projected by IntOpt (the paper's Algorithm 2) onto
  non-negative integers summing to the parent's released value, minimising the largest change
  (closed form, one lexsort per level: :func:`dpcore.estimate.topdown_opt.intopt_segments`).
  Children released as 0 are dropped with their whole subtree (post-processing: lazy noise equals
  noising the whole level and discarding).
* ``tda_l2`` — the same walk with the exact integer least-squares projection (scaled simplex
  plus controlled rounding, :func:`dpcore.estimate.topdown_opt.l2_round_segments`), as the US
  Census Bureau's TopDown algorithm does (Abowd et al., "The 2020 Census Disclosure Avoidance
  System TopDown Algorithm", Harvard Data Science Review 2022).
* ``tda_linf_milp`` — baseline (Boninsegna & Silvestri 2025, Sec. 5): the same walk and the same L∞ objective, solved by a
  black-box MILP (scipy/HiGHS) per node, which returns an arbitrary optimal vertex instead of
  IntOpt's sparse one (the paper's TDA_ℓ∞).  One solver call per surviving node, so it is
  refused above :data:`MILP_MAX_SUBPROBLEMS` calls per level; for comparisons on small data.
* ``vanilla_gauss`` — baseline (Boninsegna & Silvestri 2025, Sec. 5): the whole budget on every cell of the full finest O/D
  domain; coarser levels are sums (unbiased, may be negative; exact zeros are dropped).  Needs
  the full domain in memory, so it is refused above :data:`VANILLA_MAX_CELLS`.
* ``sh`` — baseline (Boninsegna & Silvestri 2025, Sec. 2.1 and 5): the stability-based histogram, (ε, δ)-DP: discrete Laplace
  on the *observed* finest pairs only and a threshold that hides pairs of a single person.
  Biased; no false positives.  Its (ε, δ) cost cannot be added to a pure-ε or zCDP ledger, so
  it is for comparisons (benchmarks, the library) only.

Privacy (Boninsegna & Silvestri 2025, Sec. 3–4, App. B)
-------------------------------------------
Neighbours are ``"bounded"`` (replace one person: the total is public and exact when every
person has exactly one trip) or ``"unbounded"`` (add or remove one person, the paper's
Appendix B: the total is noised).
With up to ``m`` trips per person the L2 sensitivity is ``√2·m`` (bounded) or ``m``
(unbounded) at every level above the leaves, and at the leaves ``√(2m)`` / ``√m`` when a person's
trips are distinct pairs (repeats allowed: as above the leaves); the L1 sensitivity is ``2m`` /
``m``.  With ``m > 1`` the total is not invariant even under bounded neighbours (pitfall 3), so
the root is measured (sensitivity ``m``).  The budget is split over the measured levels; a level
in which every node has a single child ("copy level") is not measured and gets no share.  σ is
computed from each level's share and sensitivity (never hard-coded ``T/ρ``).  The expected errors
of a plan come from :mod:`dpcore.flows.accuracy`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from dpcore.areas.hierarchy import Hierarchy
from dpcore.core.record import created_now, new_release_id
from dpcore.core.registry import lookup
from dpcore.errors import ParameterError
from dpcore.estimate import topdown_opt
from dpcore.flows.accuracy import linf_bounds, topdown_variances, typical_max, vanilla_errors
from dpcore.flows.counts import ODCounts
from dpcore.flows.tree import (
    Orientation,
    _ancestors,
    _check_pair,
    _group_sum,
    level_name,
    tree_levels,
)
from dpcore.privacy import calibration
from dpcore.privacy import noise as _noise
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.noise import NoiseSource

__all__ = [
    "MECHANISMS",
    "MILP_MAX_SUBPROBLEMS",
    "VANILLA_MAX_CELLS",
    "ODLevelPlan",
    "ODMechanismInfo",
    "ODPlan",
    "ODRelease",
    "check_data",
    "get",
    "plan",
    "release",
    "release_planned",
]

Neighbour = Literal["bounded", "unbounded"]

MAX_COUNT = 2**53
#: Largest full finest O/D domain (origin areas × destination areas) VanillaGauss will noise: the
#: US county × county domain (10.4 M) peaks at about 1.7 GB, so 12 M keeps a release near 2 GB.
VANILLA_MAX_CELLS = 12_000_000
#: Most MILP calls per tree level the black-box TDA_ℓ∞ baseline will make.
MILP_MAX_SUBPROBLEMS = 20_000


@dataclass(frozen=True)
class ODMechanismInfo:
    """What the app and the CLI say about an O/D mechanism."""

    name: str
    title: str
    description: str
    when: str
    consistent: bool
    nonnegative: bool
    ledger: bool
    paper: str


MECHANISMS: dict[str, ODMechanismInfo] = {
    m.name: m
    for m in (
        ODMechanismInfo(
            "inftda", "InfTDA (TopDown, L∞ / IntOpt)",
            "From the total down, the flows out of every released area pair are split one level finer "
            "(destination, then origin); all possible sub-pairs get noise, then IntOpt finds the closest "
            "non-negative whole numbers adding up to the parent (smallest largest change). Pairs "
            "released as 0 are dropped with everything below them.",
            "The default: consistent, non-negative, whole-number O/D tables at every level, few "
            "spurious flows, and a proven bound on the largest error per level.",
            True, True, True, "Boninsegna & Silvestri, PoPETs 2025, Algorithms 1–2"),
        ODMechanismInfo(
            "tda_l2", "TopDown L2 (least squares)",
            "The same TopDown walk with the least-squares projection (non-negative, adding up to the "
            "parent) and exact controlled rounding, as the US Census Bureau's TopDown does.",
            "Comparing with the Census Bureau's approach; about the same accuracy as InfTDA, more "
            "spurious flows.",
            True, True, True, "US Census TDA (Abowd et al., HDSR 2022)"),
        ODMechanismInfo(
            "tda_linf_milp", "TopDown L∞ with a generic MILP solver (baseline)",
            "The InfTDA walk with the same objective solved per area pair by a black-box MILP "
            "(HiGHS), which returns an arbitrary optimal answer rather than the sparse one.",
            "Comparisons on small data: it shows why IntOpt's choice among optimal answers matters "
            "(more spurious flows), and it is far slower.",
            True, True, True, "Boninsegna & Silvestri, PoPETs 2025, Sec. 5 (TDA_ℓ∞)"),
        ODMechanismInfo(
            "vanilla_gauss", "Gaussian on every finest pair (baseline)",
            "The whole budget on every possible finest O/D pair (zeros included); coarser tables are "
            "sums. Unbiased but negative values are kept, and the error grows as one zooms out.",
            "Small domains where only the finest pairs matter.",
            True, False, True, "Boninsegna & Silvestri, PoPETs 2025, Sec. 5 (VanillaGauss)"),
        ODMechanismInfo(
            "sh", "Stability histogram (baseline, (ε, δ)-DP)",
            "Noise on the observed finest pairs only; pairs below a threshold are suppressed. No "
            "spurious flows, but every suppressed flow is lost from the totals.",
            "Comparisons only: its (ε, δ) cost cannot be added to a pure-ε or zCDP budget ledger.",
            True, True, False, "Bun, Nissim & Stemmer; Boninsegna & Silvestri, PoPETs 2025, Sec. 2.1"),
    )
}


def get(name: str) -> ODMechanismInfo:
    """The O/D mechanism called ``name`` (case and hyphens do not matter)."""
    return lookup(MECHANISMS, name, "O/D mechanism")

# ---------------------------------------------------------------------------------------------
# plan: budget, noise and analytic errors, before the data
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ODLevelPlan:
    """One tree level: its tables, budget, noise and expected error (all data-free)."""

    level: int
    name: str
    origin_depth: int
    destination_depth: int
    origin_level: str
    destination_level: str
    kind: str  # "total", "intra" or "cross"
    pairs: int  # full public domain size of the level
    branching: float  # mean number of children per node of the level above (1 = copy level)
    measured: bool
    share: float
    noise: str | None
    scale: float
    l1_sensitivity: float
    l2_sensitivity: float
    noise_sd: float
    sd: float  # RMSE per cell (approximation, ours)
    mean_abs: float
    max_abs: float  # typical maximum absolute error over the level
    bound: float  # guaranteed max-error bound with probability 95 % (L∞ only; NaN otherwise)
    unreliable_below: float  # flows below this are likely noise (≈ 2σ, ours)
    basis: str

    def to_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in self.__dict__.items()}


@dataclass(frozen=True, eq=False)
class ODPlan:
    """The data-free description of an O/D release (safe to show and publish)."""

    mechanism: str
    cost: PrivacyCost | None  # None for 'sh' ((ε, δ)-DP: see ``approx``)
    approx: tuple[float, float] | None
    neighbour: str
    max_trips: int
    distinct: bool
    orientation: str
    split: str
    split_weights: tuple[float, ...]
    order: str
    tiebreak: str
    levels: tuple[ODLevelPlan, ...]
    scales: tuple[Any, ...] = field(repr=False)
    sh_threshold: float | None = None

    @property
    def total_public(self) -> bool:
        return self.neighbour == "bounded" and self.max_trips == 1 and self.mechanism in (
            "inftda", "tda_l2", "tda_linf_milp")

    @property
    def depth(self) -> int:
        return len(self.levels) - 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism,
            "cost": self.cost.to_dict() if self.cost is not None else None,
            "approx_dp": ({"epsilon": self.approx[0], "delta": self.approx[1]} if self.approx else None),
            "neighbour": self.neighbour, "max_trips": self.max_trips, "distinct": self.distinct,
            "orientation": self.orientation, "split": self.split, "split_weights": list(self.split_weights),
            "zeroing_order": self.order, "tiebreak": self.tiebreak, "total_public": self.total_public,
            "sh_threshold": self.sh_threshold,
            "levels": [lv.to_dict() for lv in self.levels],
        }


def _sens(neighbour: str, m: int, distinct: bool, leaf: bool) -> tuple[float, float]:
    """(L1, L2) sensitivity of one tree level (Boninsegna & Silvestri 2025, Sec. 3; erratum: m > 1 changes multiply the sensitivity)."""
    if neighbour == "bounded":
        l1 = 2.0 * m
        l2 = math.sqrt(2.0 * m) if (leaf and distinct) else math.sqrt(2.0) * m
    else:
        l1 = float(m)
        l2 = math.sqrt(m) if (leaf and distinct) else float(m)
    return l1, l2


def _branching(origin: Hierarchy, destination: Hierarchy, lv: list[tuple[int, int]]) -> list[float]:
    """Mean number of children per node of the level above (1.0 for the root)."""
    out = [1.0]
    for (po, pd_), (o, d) in zip(lv, lv[1:], strict=False):
        if o > po:
            out.append(origin.sizes[o] / origin.sizes[po])
        else:
            out.append(destination.sizes[d] / destination.sizes[pd_])
    return out


def _copy_level(origin: Hierarchy, destination: Hierarchy, lv: list[tuple[int, int]], t: int) -> bool:
    (po, pd_), (o, _d) = lv[t - 1], lv[t]
    h, depth = (origin, po) if o > po else (destination, pd_)
    return bool((h.n_children(depth) == 1).all())


def _check_options(neighbour: str, order: str, tiebreak: str, max_trips: int) -> None:
    if neighbour not in ("bounded", "unbounded"):
        raise ParameterError("Neighbours are 'bounded' (replace one person; total public) or 'unbounded' "
                             "(add or remove one person).")
    if order not in ("ascending", "descending"):
        raise ParameterError("The zeroing order is 'ascending' (fewer spurious flows) or 'descending' "
                             "(fewer missed flows).")
    if tiebreak not in ("random", "index"):
        raise ParameterError("Ties are broken 'random' (no area favoured) or by 'index'.")
    if int(max_trips) < 1:
        raise ParameterError("The most trips per person (m) must be at least 1.")


def plan(
    origin: Hierarchy,
    destination: Hierarchy | None,
    mechanism: str,
    cost: PrivacyCost | None,
    *,
    neighbour: Neighbour = "bounded",
    max_trips: int = 1,
    distinct: bool = True,
    orientation: Orientation = "destination",
    split: str = "uniform",
    weights: Sequence[float] | None = None,
    order: str = "ascending",
    tiebreak: str = "random",
    approx: tuple[float, float] | None = None,
    beta: float = 0.05,
) -> ODPlan:
    """Budget split, noise and analytic errors per tree level, before any data is touched.

    The sensitivities and the per-level noise follow Boninsegna & Silvestri (2024), Algorithm 1
    (bounded) and Algorithm 3 (unbounded, Appendix B), with the budget split generalised over the
    measured levels; the estimates come from :mod:`dpcore.flows.accuracy`.

    ``cost`` is ρ-zCDP (discrete Gaussian; the paper) or pure ε (discrete Laplace; our
    extension).  For ``sh`` give ``approx=(ε, δ)`` and no cost.  The split runs over the
    measured levels (the root only when the total is not public; copy levels never), top first;
    ``weights`` are used with ``split="custom"``.

    Estimates (ours; data-free, publishable): per-node noise SD σ_ℓ; the TopDown RMSE
    recursion ``V_ℓ = σ_ℓ²(1 − 1/b_ℓ) + V_{ℓ−1}/b_ℓ²`` with ``b_ℓ`` the mean number of children;
    the typical maximum ``√V_ℓ·√(2 ln N_ℓ)`` over the ``N_ℓ`` possible pairs (Laplace tails under
    pure ε); the guaranteed bound ``B_ℓ(β) = 2 Σ_{κ≤ℓ} σ_κ √(2 ln(2ℓN_κ/β))`` (L∞ only, zCDP; pure
    ε uses the Laplace tail ``2 Σ t_κ ln(2ℓN_κ/β)``); and the reliability threshold 2σ_ℓ.
    """
    info = get(mechanism)
    destination = destination or origin
    _check_pair(origin, destination)
    _check_options(neighbour, order, tiebreak, max_trips)
    m = int(max_trips)
    g = origin.depth
    lv = tree_levels(g, orientation)
    T = len(lv) - 1
    b = _branching(origin, destination, lv)
    pairs = [origin.sizes[o] * destination.sizes[d] for o, d in lv]
    names = [level_name(origin, destination, o, d) for o, d in lv]
    kinds = ["total"] + ["intra" if o == d else "cross" for o, d in lv[1:]]

    def lp(t: int, **kw: Any) -> ODLevelPlan:
        o, d = lv[t]
        base = dict(level=t, name=names[t], origin_depth=o, destination_depth=d,
                    origin_level=origin.level_names[o], destination_level=destination.level_names[d],
                    kind=kinds[t], pairs=pairs[t], branching=b[t])
        base.update(kw)
        return ODLevelPlan(**base)

    if info.name == "sh":
        if cost is not None or approx is None:
            raise ParameterError("The stability histogram is (ε, δ)-DP: give approx=(ε, δ), not a pure/zCDP cost.")
        eps, delta = float(approx[0]), float(approx[1])
        if not (eps > 0 and math.isfinite(eps)) or not (0 < delta < 1):
            raise ParameterError("The stability histogram needs ε > 0 and 0 < δ < 1.")
        if m != 1:
            raise ParameterError("The stability histogram baseline supports one trip per person only.")
        l1 = 2.0 if neighbour == "bounded" else 1.0
        k_cells = 2 if neighbour == "bounded" else 1
        scale = calibration.laplace_scale_for_epsilon(eps, l1)
        # a pair of one person survives with P(Z ≥ τ − 1) ≤ exp(−(τ − 1)/t); k such pairs ≤ δ
        tau = 1.0 + float(scale) * math.log(k_cells / delta)
        sd = math.sqrt(_noise.discrete_laplace_variance(scale))
        levels = [lp(t, measured=(t == T), share=eps if t == T else 0.0,
                     noise="discrete_laplace" if t == T else None, scale=float(scale) if t == T else 0.0,
                     l1_sensitivity=l1 if t == T else 0.0, l2_sensitivity=0.0,
                     noise_sd=sd if t == T else 0.0, sd=math.nan, mean_abs=math.nan, max_abs=math.nan,
                     bound=math.nan, unreliable_below=tau,
                     basis="data-dependent: suppressed flows are lost from every sum (biased)")
                  for t in range(T + 1)]
        return ODPlan(info.name, None, (eps, delta), neighbour, m, True, orientation, "finest only", (),
                      order, tiebreak, tuple(levels), tuple([None] * T + [scale]), tau)

    if not isinstance(cost, PrivacyCost):
        raise ParameterError("The cost must be a PrivacyCost: ρ-zCDP (discrete Gaussian) or pure ε (discrete Laplace).")
    if approx is not None:
        raise ParameterError(f"{info.title} takes a pure-ε or zCDP cost, not (ε, δ); convert (ε, δ) to ρ first.")

    if info.name == "vanilla_gauss":
        cells = origin.n_leaves * destination.n_leaves
        if cells > VANILLA_MAX_CELLS:
            raise ParameterError(
                f"VanillaGauss noises every possible finest pair: {origin.n_leaves:,} × {destination.n_leaves:,} = "
                f"{cells:,} cells, more than {VANILLA_MAX_CELLS:,}. Use InfTDA (its work follows the released "
                "flows), or a coarser finest level."
            )
        measured = [t == T for t in range(T + 1)]
    else:
        root_measured = not (neighbour == "bounded" and m == 1)
        measured = [root_measured] + [not _copy_level(origin, destination, lv, t) for t in range(1, T + 1)]
    n_meas = sum(measured)
    if n_meas == 0:
        raise ParameterError(
            "Nothing to measure: every area of this hierarchy has a single sub-area and the total is public, "
            "so every O/D table equals the total. Use a hierarchy with more than one finest area."
        )
    if info.name == "tda_linf_milp":  # data-free: one solver call per (possible) parent pair
        worst = max((pairs[t - 1] for t in range(1, T + 1) if measured[t]), default=0)
        if worst > MILP_MAX_SUBPROBLEMS:
            raise ParameterError(
                f"The MILP baseline could need {worst:,} solver calls at one level (limit {MILP_MAX_SUBPROBLEMS:,}). "
                "Use InfTDA, which solves the same problem exactly in closed form, or a smaller hierarchy."
            )
    if split == "custom":
        if weights is None or len(list(weights)) != n_meas:
            nm = [names[t] for t in range(T + 1) if measured[t]]
            raise ParameterError(
                f"A custom split needs {n_meas} weights, one per measured level ({', '.join(nm)}), top first, "
                "e.g. " + ",".join(["1"] * n_meas) + "."
            )
    shares_m = calibration.split(cost.value, n_meas, split, weights=weights) if split in (
        "uniform", "geometric", "custom") else None
    if shares_m is None:
        raise ParameterError("The budget split is 'uniform' (the paper), 'geometric' (finer levels get more) or 'custom'.")
    it = iter(shares_m)
    shares = [next(it) if mm else 0.0 for mm in measured]

    scales: list[Any] = []
    var: list[float] = []
    noises: list[str | None] = []
    sens: list[tuple[float, float]] = []
    for t in range(T + 1):
        if t == 0:
            l1, l2 = float(m), float(m)  # the total changes by at most m
        else:
            l1, l2 = _sens(neighbour, m, distinct, leaf=(t == T))
        sens.append((l1, l2))
        if not measured[t]:
            scales.append(None)
            var.append(0.0)
            noises.append(None)
            continue
        nm, sc = calibration.noise_for_cost(cost.definition, shares[t], l1, l2)
        v = calibration.noise_variance(nm, sc)
        noises.append(nm)
        scales.append(sc)
        var.append(v)

    laplace = cost.definition == "pure"
    levels: list[ODLevelPlan] = []
    if info.name == "vanilla_gauss":
        leaf_pairs = pairs[T]
        under_o, under_d = origin.leaves_under(), destination.leaves_under()
        for t in range(T + 1):
            o, d = lv[t]
            sd, mean_abs, max_abs = vanilla_errors(var[T], leaf_pairs, pairs[t], under_o[o], under_d[d],
                                                   laplace and t == T)
            levels.append(lp(t, measured=measured[t], share=shares[t], noise=noises[t],
                             scale=float(scales[t]) if scales[t] is not None else 0.0,
                             l1_sensitivity=sens[t][0] if measured[t] else 0.0,
                             l2_sensitivity=sens[t][1] if measured[t] else 0.0,
                             noise_sd=math.sqrt(var[t]), sd=sd, mean_abs=mean_abs,
                             max_abs=max_abs, bound=math.nan, unreliable_below=2.0 * sd,
                             basis="sum of finest-pair noise (normal above the finest level, SD from the "
                                   "public area sizes); unbiased, may be negative"))
        return ODPlan(info.name, cost, None, neighbour, m, bool(distinct), orientation, "finest only", (),
                      order, tiebreak, tuple(levels), tuple(scales))

    V = topdown_variances(var, b, measured)  # the TopDown recursion (all three TopDown variants)
    bounds = linf_bounds(scales, pairs, measured, laplace=laplace, beta=beta,
                         exact_linf=info.name in ("inftda", "tda_linf_milp"))
    for t in range(T + 1):
        sd = math.sqrt(V[t])
        mean_abs = sd * (math.sqrt(0.5) if laplace else math.sqrt(2.0 / math.pi))
        levels.append(lp(t, measured=measured[t], share=shares[t], noise=noises[t],
                         scale=float(scales[t]) if scales[t] is not None else 0.0,
                         l1_sensitivity=sens[t][0] if measured[t] else 0.0,
                         l2_sensitivity=sens[t][1] if measured[t] else 0.0,
                         noise_sd=math.sqrt(var[t]), sd=sd, mean_abs=mean_abs,
                         max_abs=typical_max(sd, pairs[t], laplace), bound=bounds[t],
                         unreliable_below=2.0 * math.sqrt(var[t]) if measured[t] else 2.0 * sd,
                         basis="TopDown recursion V = σ²(1 − 1/b) + V_parent/b² (dense regime, ours)"))
    return ODPlan(info.name, cost, None, neighbour, m, bool(distinct), orientation, split,
                  tuple(float(w) for w in (weights or ())), order, tiebreak, tuple(levels), tuple(scales))

# ---------------------------------------------------------------------------------------------
# release
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ODRelease:
    """A released O/D tree: per tree level the non-zero released pairs.  Everything is public.

    ``origins[t]``, ``destinations[t]``, ``values[t]``: area indices (at the level's origin and
    destination depths) and released counts, sorted by (origin, destination); zeros omitted.
    """

    origin_h: Hierarchy
    destination_h: Hierarchy
    plan: ODPlan
    origins: tuple[np.ndarray, ...]
    destinations: tuple[np.ndarray, ...]
    values: tuple[np.ndarray, ...]
    public_total: int | None
    details: dict[str, Any] = field(default_factory=dict)
    release_id: str = field(default_factory=new_release_id)
    created: str = field(default_factory=created_now)  # the session restamps it with the charge time

    @property
    def mechanism(self) -> ODMechanismInfo:
        return get(self.plan.mechanism)

    @property
    def depth(self) -> int:
        return len(self.values) - 1

    def level_plan(self, t: int) -> ODLevelPlan:
        return self.plan.levels[t]

    def frame(self, t: int, *, names: bool = False) -> pd.DataFrame:
        """Level ``t`` as a table: origin, destination (export labels), noisy_count."""
        lp = self.plan.levels[t]
        lab_o = (self.origin_h.display_names if names else self.origin_h.labels)(lp.origin_depth)
        lab_d = (self.destination_h.display_names if names else self.destination_h.labels)(lp.destination_depth)
        return pd.DataFrame({
            "origin": lab_o[self.origins[t]],
            "destination": lab_d[self.destinations[t]],
            "noisy_count": self.values[t],
        })

    def to_frame(self) -> pd.DataFrame:
        """Every level below the total: level, origin, destination, noisy_count (non-zero only)."""
        parts = []
        for t in range(1, self.depth + 1):
            f = self.frame(t)
            f.insert(0, "level", self.plan.levels[t].name)
            parts.append(f)
        return pd.concat(parts, ignore_index=True)

    def matrix(self, t: int) -> np.ndarray:
        """Dense origin × destination matrix of level ``t`` (small levels only)."""
        lp = self.plan.levels[t]
        no, nd = self.origin_h.sizes[lp.origin_depth], self.destination_h.sizes[lp.destination_depth]
        if no * nd > 4_000_000:
            raise ParameterError(f"Level '{lp.name}' has {no * nd:,} possible pairs; too many for a matrix view.")
        mtx = np.zeros((no, nd), dtype=np.int64)
        mtx[self.origins[t], self.destinations[t]] = self.values[t]
        return mtx

    def total(self, t: int = 0) -> int:
        return int(self.values[t].sum())

    @property
    def consistent(self) -> bool:
        """Every level sums (per parent) to the level above; checked exactly on integers."""
        lv = [(p.origin_depth, p.destination_depth) for p in self.plan.levels]
        for t in range(1, self.depth + 1):
            (po, pd_), (o, _) = lv[t - 1], lv[t]
            if o > po:
                par_o = self.origin_h.parents[po][self.origins[t]]
                par_d = self.destinations[t]
            else:
                par_o = self.origins[t]
                par_d = self.destination_h.parents[pd_][self.destinations[t]]
            n_d = self.destination_h.sizes[pd_]
            key = par_o * n_d + par_d
            uk, s = _group_sum(key, self.values[t])
            pk = self.origins[t - 1] * n_d + self.destinations[t - 1]
            if not (np.array_equal(uk, pk) and np.array_equal(s, self.values[t - 1])):
                return False
        return True


def _draw(noise: NoiseSource, kind: str, scale: Any, n: int) -> np.ndarray:
    if kind == "discrete_laplace":
        return noise.discrete_laplace(scale, n)
    return noise.discrete_gaussian(scale, n)


def _expand(h: Hierarchy, depth: int, parent_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Children of every parent (contiguous per parent): (child index, parent position, counts)."""
    off = h.child_offsets(depth)
    lo, hi = off[parent_idx], off[parent_idx + 1]
    cnt = hi - lo
    pos = np.repeat(np.arange(parent_idx.size, dtype=np.int64), cnt)
    starts = np.cumsum(cnt) - cnt
    child = lo[pos] + (np.arange(pos.size, dtype=np.int64) - starts[pos])
    return child, pos, cnt


def _sort_level(o: np.ndarray, d: np.ndarray, v: np.ndarray, n_d: int) -> tuple[np.ndarray, ...]:
    order = np.argsort(o * n_d + d, kind="stable")
    return o[order], d[order], v[order]


def release(
    counts: ODCounts,
    mechanism: str,
    cost: PrivacyCost | None,
    noise: NoiseSource,
    *,
    neighbour: Neighbour = "bounded",
    orientation: Orientation = "destination",
    split: str = "uniform",
    weights: Sequence[float] | None = None,
    order: str = "ascending",
    tiebreak: str = "random",
    approx: tuple[float, float] | None = None,
    progress: Any = None,
) -> ODRelease:
    """Release ``counts`` (the caller has charged the ledger; use :func:`dpcore.pipeline.release_od`).

    InfTDA walks the O/D tree top down as in Boninsegna & Silvestri (2024), Algorithm 1, with
    IntOpt (their Algorithm 2) at every node; ``tda_l2`` projects by least squares and rounds, as
    the US Census TopDown algorithm does (Abowd et al. 2022); ``tda_linf_milp`` solves the L∞
    projection with a MILP solver; ``vanilla_gauss`` and ``sh`` noise the finest pairs and sum
    them up (the paper's baselines).

    ``progress(fraction, message)`` is called once per tree level.
    """
    p = plan(counts.origin_h, counts.destination_h, mechanism, cost, neighbour=neighbour,
             max_trips=counts.max_trips, distinct=counts.distinct, orientation=orientation, split=split,
             weights=weights, order=order, tiebreak=tiebreak, approx=approx)
    return release_planned(counts, p, noise, progress=progress)


def _max_fanout(h: Hierarchy) -> int:
    return max((int(np.diff(h.child_offsets(d)).max()) for d in range(h.depth)), default=1)


def check_data(counts: ODCounts, p: ODPlan) -> None:
    """The refusals of :func:`release_planned` that can be decided from the true trips, run before
    the budget is charged (issue 18, item 7).

    InfTDA and ``tda_l2`` project every level with the exact integer projections of
    :mod:`dpcore.estimate.topdown_opt` (Boninsegna & Silvestri 2024, Algorithm 2), which refuse
    noisy values beyond their int64 range: the true trips must leave half that range
    (:func:`dpcore.estimate.topdown_opt.check_true_counts`, with the total as the largest count and
    the largest number of child areas of either hierarchy).  The other mechanisms refuse nothing for
    the data (``tda_linf_milp``'s and VanillaGauss's sizes are refused by :func:`plan`, from
    public inputs).  The refusal publishes nothing and only the curator sees it.
    """
    if p.mechanism in ("inftda", "tda_l2"):
        fan = max(_max_fanout(counts.origin_h), _max_fanout(counts.destination_h))
        topdown_opt.check_true_counts(counts.total, fan)


def release_planned(counts: ODCounts, p: ODPlan, noise: NoiseSource, *, progress: Any = None) -> ODRelease:
    """Release ``counts`` with the plan ``p`` already built by :func:`plan`, so a release is planned
    once (Boninsegna & Silvestri 2024, Algorithms 1 and 3: the per-level noise is the plan's).

    ``p`` must be planned for ``counts``' hierarchies, ``max_trips`` and ``distinct``
    (:class:`dpcore.flows.kind.ODMechanism` checks); the caller has charged ``p.cost``.
    """
    oh, dh = counts.origin_h, counts.destination_h
    T = p.depth
    lv = [(x.origin_depth, x.destination_depth) for x in p.levels]
    details: dict[str, Any] = {}

    def tick(t: int, msg: str) -> None:
        if progress is not None:
            progress(t / max(T, 1), msg)

    if p.mechanism == "vanilla_gauss":
        return _vanilla(counts, p, noise, lv, tick)
    if p.mechanism == "sh":
        return _sh(counts, p, noise, lv, tick)

    n = counts.total
    if p.levels[0].measured:
        root = max(n + int(_draw(noise, p.levels[0].noise, p.scales[0], 1)[0]), 0)
        public_total = None
    else:
        root, public_total = n, n
    cur_o = np.zeros(1 if root > 0 else 0, dtype=np.int64)
    cur_d = np.zeros_like(cur_o)
    cur_v = np.array([root] if root > 0 else [], dtype=np.int64)
    outs_o, outs_d, outs_v = [cur_o], [cur_d], [cur_v]
    noised = 0
    for t in range(1, T + 1):
        tick(t - 1, f"level {t} of {T}: {p.levels[t].name} ({cur_v.size:,} parents)")
        (po, pd_), (o, d) = lv[t - 1], lv[t]
        if cur_v.size == 0:
            e = np.zeros(0, dtype=np.int64)
            outs_o.append(e), outs_d.append(e), outs_v.append(e)
            continue
        if o > po:
            child, pos, cnt = _expand(oh, po, cur_o)
            co, cd = child, cur_d[pos]
        else:
            child, pos, cnt = _expand(dh, pd_, cur_d)
            co, cd = cur_o[pos], child
        if not p.levels[t].measured:  # copy level: every node has one child, nothing to measure
            y = cur_v[pos]
        else:
            x = counts.lookup(o, d, co, cd) + _draw(noise, p.levels[t].noise, p.scales[t], co.size)
            noised += int(co.size)
            offsets = np.r_[0, np.cumsum(cnt)]
            tb = noise.random_uint64(co.size) if p.tiebreak == "random" else None
            if p.mechanism == "inftda":
                y = topdown_opt.intopt_segments(x, offsets, cur_v, order=p.order, tiebreak=tb)
            elif p.mechanism == "tda_linf_milp":
                y = _linf_milp_segments(x, offsets, cur_v, p.levels[t].name)
            else:
                y = topdown_opt.l2_round_segments(x, offsets, cur_v, tiebreak=tb)
        keep = y > 0
        cur_o, cur_d, cur_v = _sort_level(co[keep], cd[keep], np.asarray(y[keep], np.int64), dh.sizes[d])
        outs_o.append(cur_o), outs_d.append(cur_d), outs_v.append(cur_v)
    tick(T, "done")
    details.update(noised_cells=noised)
    return ODRelease(oh, dh, p, tuple(outs_o), tuple(outs_d), tuple(outs_v), public_total, details)


def _linf_milp_segments(x: np.ndarray, offsets: np.ndarray, totals: np.ndarray, level: str) -> np.ndarray:
    """The per-node L∞ projection by scipy's MILP (HiGHS), one call per segment (baseline only).

    ``min α  s.t.  y_i − α ≤ x_i,  y_i + α ≥ x_i,  Σ y = c,  y ∈ ℕ, α ≥ 0`` (ours).  The
    solver returns whichever optimal vertex it finds first — the point of the baseline.
    """
    from scipy.optimize import Bounds, LinearConstraint, milp

    m = totals.size
    if m > MILP_MAX_SUBPROBLEMS:
        raise ParameterError(
            f"The MILP baseline would make {m:,} solver calls at level '{level}' (limit "
            f"{MILP_MAX_SUBPROBLEMS:,}). Use InfTDA, which solves the same problem exactly in closed form."
        )
    y = np.empty(x.size, dtype=np.int64)
    for i in range(m):
        a, b_ = int(offsets[i]), int(offsets[i + 1])
        xi = x[a:b_].astype(float)
        b = xi.size
        c = int(totals[i])
        if b == 1 or c == 0:
            y[a:b_] = c if b == 1 else 0
            continue
        eye = np.eye(b)
        A = np.block([[eye, -np.ones((b, 1))], [eye, np.ones((b, 1))], [np.ones((1, b)), np.zeros((1, 1))]])
        lo = np.concatenate([np.full(b, -np.inf), xi, [c]])
        hi = np.concatenate([xi, np.full(b, np.inf), [c]])
        cost = np.zeros(b + 1)
        cost[-1] = 1.0
        res = milp(cost, constraints=LinearConstraint(A, lo, hi), integrality=np.ones(b + 1),
                   bounds=Bounds(np.zeros(b + 1), np.full(b + 1, np.inf)))
        if not res.success:  # pragma: no cover - the problem is always feasible (y = c·e_1)
            raise ParameterError(f"The MILP solver failed at level '{level}': {res.message}")
        yi = np.round(res.x[:b]).astype(np.int64)
        # the solver works in floating point: restore the exact sum on the largest entry
        yi[np.argmax(yi)] += c - int(yi.sum())
        y[a:b_] = yi
    return y


def _aggregate_sparse(o: np.ndarray, d: np.ndarray, v: np.ndarray, anc_o: np.ndarray, anc_d: np.ndarray,
                      n_d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    key = anc_o[o] * n_d + anc_d[d]
    uk, s = _group_sum(key, v)
    return uk // n_d, uk % n_d, s


def _vanilla(counts: ODCounts, p: ODPlan, noise: NoiseSource, lv: list[tuple[int, int]], tick: Any) -> ODRelease:
    oh, dh = counts.origin_h, counts.destination_h
    no, nd = oh.n_leaves, dh.n_leaves  # plan() has checked no·nd ≤ VANILLA_MAX_CELLS
    T = p.depth
    tick(0, f"noising {no * nd:,} finest pairs")
    leaf = _draw(noise, p.levels[T].noise, p.scales[T], no * nd).astype(np.int64)
    leaf[counts.origin * nd + counts.destination] += counts.count
    nz = np.flatnonzero(leaf)
    lo, ld, lvv = nz // nd, nz % nd, leaf[nz]
    del leaf
    anc_o, anc_d = _ancestors(oh), _ancestors(dh)
    outs = []
    for t in range(T + 1):
        o, d = lv[t]
        outs.append(_aggregate_sparse(lo, ld, lvv, anc_o[o], anc_d[d], dh.sizes[d]))
        tick(t, f"summing level {t}")
    return ODRelease(oh, dh, p, tuple(x[0] for x in outs), tuple(x[1] for x in outs),
                     tuple(x[2] for x in outs), None, {"noised_cells": int(no * nd)})


def _sh(counts: ODCounts, p: ODPlan, noise: NoiseSource, lv: list[tuple[int, int]], tick: Any) -> ODRelease:
    oh, dh = counts.origin_h, counts.destination_h
    T = p.depth
    noisy = counts.count + _draw(noise, "discrete_laplace", p.scales[T], counts.n_pairs)
    keep = noisy >= p.sh_threshold
    lo, ld, lvv = counts.origin[keep], counts.destination[keep], noisy[keep].astype(np.int64)
    anc_o, anc_d = _ancestors(oh), _ancestors(dh)
    outs = [_aggregate_sparse(lo, ld, lvv, anc_o[o], anc_d[d], dh.sizes[d]) for o, d in lv]
    tick(T, "done")
    # no "noised_cells" here: SH noises the observed pairs only, and their number is confidential
    return ODRelease(oh, dh, p, tuple(x[0] for x in outs), tuple(x[1] for x in outs),
                     tuple(x[2] for x in outs), None, {})
