"""The top-down walk shared by the O/D mechanisms: the O/D tree, its data-free plan and its release.

Boninsegna & Silvestri, "Differentially private release of hierarchical origin/destination data
with a TopDown approach" (PoPETs 2025), release trips counted per finest (origin, destination)
pair (:class:`dpcore.flows.counts.ODCounts`) level by level down the O/D tree of two public
hierarchies (:func:`dpcore.flows.tree.tree_levels`): every tree level partitions the trips, so
each is a histogram with the same sensitivity.  This module holds what their mechanisms share,
one file each beside it (:mod:`~dpcore.flows.mechanisms.inftda`,
:mod:`~dpcore.flows.mechanisms.tda_l2`, :mod:`~dpcore.flows.mechanisms.tda_linf_milp`,
:mod:`~dpcore.flows.mechanisms.vanilla_gauss`, :mod:`~dpcore.flows.mechanisms.sh`):

* the tree (:class:`ODTree`: levels, branching, copy levels) and the plan types
  (:class:`ODLevelPlan`, :class:`ODPlan`) with the released tree (:class:`ODRelease`);
* the sensitivities (:func:`sensitivity`), the budget split over the measured levels and the noise
  per level (:func:`calibrate`), the TopDown expected errors (:func:`topdown_level_plans`);
* the walk itself (:func:`topdown_walk`): from the root down, the children of every surviving
  node (all of them, from the public list, zeros included) get discrete Gaussian (or discrete
  Laplace) noise and are projected onto non-negative integers summing to the parent's released
  value by the mechanism's projection; children released as 0 are dropped with their whole
  subtree (post-processing: lazy noise equals noising the whole level and discarding).  The
  baselines that noise the finest pairs sum them up the tree (:func:`sum_up`).

Privacy (Boninsegna & Silvestri 2025, Sec. 3–4, App. B)
-------------------------------------------------------
Neighbours are ``"replace"`` (replace one person, the paper's bounded DP: the total is public and
exact when every person has exactly one trip) or ``"add_remove"`` (add or remove one person, the
paper's unbounded DP of Appendix B: the total is noised).
With up to ``m`` trips per person the L2 sensitivity is ``√2·m`` (replace) or ``m``
(add/remove) at every level above the leaves, and at the leaves ``√(2m)`` / ``√m`` when a person's
trips are distinct pairs (repeats allowed: as above the leaves); the L1 sensitivity is ``2m`` /
``m``.  With ``m > 1`` the total is not invariant even under replace neighbours (pitfall 3), so
the root is measured (sensitivity ``m``).  The budget is split over the measured levels; a level
in which every node has a single child ("copy level") is not measured and gets no share.  σ is
computed from each level's share and sensitivity (never hard-coded ``T/ρ``).  The expected errors
of a plan come from :mod:`dpcore.flows.accuracy`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dpcore.core.mechanism import finite_fields
from dpcore.core.record import created_now, new_release_id
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import ParameterError
from dpcore.estimate import topdown_opt
from dpcore.flows.accuracy import linf_bounds, topdown_variances, typical_max
from dpcore.flows.counts import ODCounts
from dpcore.flows.tree import Orientation, ancestors, check_pair, group_sum, level_name, tree_levels
from dpcore.flows.unit import check_neighbour
from dpcore.privacy import calibration
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.noise import NoiseSource
from dpcore.privacy.units import Neighbour

__all__ = [
    "Calibration",
    "ODOptions",
    "Neighbour",
    "ODLevelPlan",
    "ODPlan",
    "ODRelease",
    "ODTree",
    "Projection",
    "calibrate",
    "check_options",
    "check_projection_range",
    "expand_children",
    "max_fanout",
    "noise_fields",
    "sensitivity",
    "sum_up",
    "topdown_level_plans",
    "topdown_walk",
]

# ---------------------------------------------------------------------------------------------
# the plan: the O/D tree, budget, noise and analytic errors, before the data
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
        return finite_fields(self.__dict__)


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
    #: the :class:`~dpcore.flows.mechanisms.base.ODMechanism` that made the plan (its title,
    #: paper and guarantees go into the record); not part of :meth:`to_dict`
    made_by: Any = field(default=None, repr=False, compare=False)

    @property
    def total_public(self) -> bool:
        return self.neighbour == "replace" and self.max_trips == 1 and self.mechanism in (
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


def sensitivity(neighbour: str, m: int, distinct: bool, leaf: bool) -> tuple[float, float]:
    """(L1, L2) sensitivity of one tree level below the root (Boninsegna & Silvestri 2025, Sec. 3;
    erratum: m > 1 changes multiply the sensitivity).

    >>> sensitivity("replace", 1, True, leaf=False), sensitivity("add_remove", 4, True, leaf=True)
    ((2.0, 1.4142135623730951), (4.0, 2.0))
    """
    if neighbour == "replace":
        l1 = 2.0 * m
        l2 = math.sqrt(2.0 * m) if (leaf and distinct) else math.sqrt(2.0) * m
    else:
        l1 = float(m)
        l2 = math.sqrt(m) if (leaf and distinct) else float(m)
    return l1, l2


def check_options(neighbour: str, order: str, tiebreak: str, max_trips: int) -> None:
    """Refuse an unknown neighbour relation, zeroing order or tie rule, or a cap below one trip."""
    check_neighbour(neighbour)
    if order not in ("ascending", "descending"):
        raise ParameterError("The zeroing order is 'ascending' (fewer spurious flows) or 'descending' "
                             "(fewer missed flows).")
    if tiebreak not in ("random", "index"):
        raise ParameterError("Ties are broken 'random' (no area favoured) or by 'index'.")
    if int(max_trips) < 1:
        raise ParameterError("The most trips per person (m) must be at least 1.")


@dataclass(frozen=True, eq=False)
class ODTree:
    """The O/D tree of two public hierarchies (data-free): per tree level the origin and
    destination depths (``lv``), the number of possible pairs, the mean branching and the name.

    >>> from dpcore.flows.tree import hierarchy_from_prefixes
    >>> h = hierarchy_from_prefixes(["0101", "0102", "0201"], [2, 4])
    >>> t = ODTree.of(h, h, "destination")
    >>> t.lv, t.pairs, t.branching
    ([(0, 0), (0, 1), (1, 1), (1, 2), (2, 2)], [1, 2, 4, 6, 9], [1.0, 2.0, 2.0, 1.5, 1.5])
    """

    origin: Hierarchy
    destination: Hierarchy
    lv: list[tuple[int, int]]
    branching: list[float]  # mean number of children per node of the level above (1.0 for the root)
    pairs: list[int]
    names: list[str]
    kinds: list[str]  # "total", "intra" or "cross"

    @classmethod
    def of(cls, origin: Hierarchy, destination: Hierarchy, orientation: Orientation) -> ODTree:
        check_pair(origin, destination)
        lv = tree_levels(origin.depth, orientation)
        b = [1.0]
        for (po, pd_), (o, d) in zip(lv, lv[1:], strict=False):
            b.append(origin.sizes[o] / origin.sizes[po] if o > po else destination.sizes[d] / destination.sizes[pd_])
        return cls(origin, destination, lv, b, [origin.sizes[o] * destination.sizes[d] for o, d in lv],
                   [level_name(origin, destination, o, d) for o, d in lv],
                   ["total"] + ["intra" if o == d else "cross" for o, d in lv[1:]])

    @property
    def depth(self) -> int:
        """T: the index of the finest tree level."""
        return len(self.lv) - 1

    def copy_level(self, t: int) -> bool:
        """Every node of level ``t - 1`` has a single child: level ``t`` copies it (nothing to measure)."""
        (po, pd_), (o, _d) = self.lv[t - 1], self.lv[t]
        h, depth = (self.origin, po) if o > po else (self.destination, pd_)
        return bool((h.n_children(depth) == 1).all())

    def level(self, t: int, **kw: Any) -> ODLevelPlan:
        """The plan of level ``t``: its public shape and ``kw`` (budget, noise, expected error)."""
        o, d = self.lv[t]
        return ODLevelPlan(level=t, name=self.names[t], origin_depth=o, destination_depth=d,
                           origin_level=self.origin.level_names[o], destination_level=self.destination.level_names[d],
                           kind=self.kinds[t], pairs=self.pairs[t], branching=self.branching[t], **kw)


@dataclass(frozen=True)
class ODOptions:
    """The options of an O/D plan besides the tree and the cost (checked by :func:`check_options`)."""

    neighbour: str = "replace"
    max_trips: int = 1
    distinct: bool = True
    orientation: str = "destination"
    split: str = "uniform"
    weights: Sequence[float] | None = None
    order: str = "ascending"
    tiebreak: str = "random"
    beta: float = 0.05

    def split_weights(self) -> tuple[float, ...]:
        return tuple(float(w) for w in (self.weights or ()))


@dataclass(frozen=True)
class Calibration:
    """The budget and noise of every tree level (unmeasured levels: share 0, no noise)."""

    measured: list[bool]
    shares: list[float]
    scales: list[Any]
    var: list[float]
    noises: list[str | None]
    sens: list[tuple[float, float]]


def calibrate(tree: ODTree, cost: PrivacyCost, measured: list[bool], o: ODOptions) -> Calibration:
    """Split ``cost`` over the measured levels (top first; ``o.split``, ``o.weights``) and calibrate
    each level's noise to its share and sensitivity (the total changes by at most ``m`` trips;
    :func:`sensitivity` below it)."""
    split, weights, m = o.split, o.weights, int(o.max_trips)
    n_meas = sum(measured)
    if n_meas == 0:
        raise ParameterError(
            "Nothing to measure: every area of this hierarchy has a single sub-area and the total is public, "
            "so every O/D table equals the total. Use a hierarchy with more than one finest area."
        )
    if split not in ("uniform", "geometric", "custom"):
        raise ParameterError("The budget split is 'uniform' (the paper), 'geometric' (finer levels get more) or 'custom'.")
    shares = calibration.split_measured(cost.value, measured, split, weights, tree.names)
    scales: list[Any] = []
    var: list[float] = []
    noises: list[str | None] = []
    sens: list[tuple[float, float]] = []
    for t in range(tree.depth + 1):
        l1, l2 = (float(m), float(m)) if t == 0 else sensitivity(o.neighbour, m, o.distinct,
                                                                    leaf=(t == tree.depth))
        sens.append((l1, l2))
        if not measured[t]:
            scales.append(None), var.append(0.0), noises.append(None)
            continue
        nm, sc = calibration.noise_for_cost(cost.definition, shares[t], l1, l2)
        noises.append(nm)
        scales.append(sc)
        var.append(calibration.noise_variance(nm, sc))
    return Calibration(measured, shares, scales, var, noises, sens)


def noise_fields(c: Calibration, t: int) -> dict[str, Any]:
    """The budget and noise fields of level ``t``'s :class:`ODLevelPlan`."""
    return dict(measured=c.measured[t], share=c.shares[t], noise=c.noises[t],
                scale=float(c.scales[t]) if c.scales[t] is not None else 0.0,
                l1_sensitivity=c.sens[t][0] if c.measured[t] else 0.0,
                l2_sensitivity=c.sens[t][1] if c.measured[t] else 0.0, noise_sd=math.sqrt(c.var[t]))


def topdown_level_plans(tree: ODTree, c: Calibration, *, laplace: bool, beta: float,
                        exact_linf: bool) -> list[ODLevelPlan]:
    """Expected errors of the TopDown walk (ours; data-free, publishable), per tree level.

    The RMSE recursion ``V_ℓ = σ_ℓ²(1 − 1/b_ℓ) + V_{ℓ−1}/b_ℓ²`` with ``b_ℓ`` the mean number of
    children; the typical maximum ``√V_ℓ·√(2 ln N_ℓ)`` over the ``N_ℓ`` possible pairs (Laplace
    tails under pure ε); the guaranteed bound ``B_ℓ(β) = 2 Σ_{κ≤ℓ} σ_κ √(2 ln(2ℓN_κ/β))`` when the
    projection is an exact L∞ one (``exact_linf``; pure ε uses the Laplace tail
    ``2 Σ t_κ ln(2ℓN_κ/β)``); and the reliability threshold 2σ_ℓ.
    """
    V = topdown_variances(c.var, tree.branching, c.measured)
    bounds = linf_bounds(c.scales, tree.pairs, c.measured, laplace=laplace, beta=beta, exact_linf=exact_linf)
    levels = []
    for t in range(tree.depth + 1):
        sd = math.sqrt(V[t])
        mean_abs = sd * (math.sqrt(0.5) if laplace else math.sqrt(2.0 / math.pi))
        levels.append(tree.level(t, **noise_fields(c, t), sd=sd, mean_abs=mean_abs,
                                 max_abs=typical_max(sd, tree.pairs[t], laplace), bound=bounds[t],
                                 unreliable_below=2.0 * math.sqrt(c.var[t]) if c.measured[t] else 2.0 * sd,
                                 basis="TopDown recursion V = σ²(1 − 1/b) + V_parent/b² (dense regime, ours)"))
    return levels

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
    #: The noisy counts before post-processing, per tree level: ``(origins, destinations, values)``
    #: of the pairs measured (``origins``/``destinations`` None: every pair of the level's full
    #: domain, row-major), or None where the level is not measured; empty when the mechanism does
    #: not expose them (the stability histogram: its measured pairs are the true support).
    measurements: tuple[tuple[np.ndarray | None, np.ndarray | None, np.ndarray] | None, ...] = field(
        default=(), repr=False)

    @property
    def mechanism(self) -> Any:
        """The :class:`~dpcore.flows.mechanisms.base.ODMechanism` that planned this release."""
        return self.plan.made_by

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
            uk, s = group_sum(key, self.values[t])
            pk = self.origins[t - 1] * n_d + self.destinations[t - 1]
            if not (np.array_equal(uk, pk) and np.array_equal(s, self.values[t - 1])):
                return False
        return True


def expand_children(h: Hierarchy, depth: int, parent_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def max_fanout(h: Hierarchy) -> int:
    """The largest number of child areas of any area of ``h``."""
    return max((int(np.diff(h.child_offsets(d)).max()) for d in range(h.depth)), default=1)


def check_projection_range(counts: ODCounts) -> None:
    """Refuse true trips the exact integer projections could not take, before the budget is charged.

    IntOpt and the least-squares rounding of :mod:`dpcore.estimate.topdown_opt` (Boninsegna &
    Silvestri 2025, Algorithm 2) refuse noisy values beyond their int64 range: the true trips must
    leave half that range (:func:`dpcore.estimate.topdown_opt.check_true_counts`, with the total
    as the largest count and the largest number of child areas of either hierarchy).  The refusal
    publishes nothing and only the curator sees it.
    """
    fan = max(max_fanout(counts.origin_h), max_fanout(counts.destination_h))
    topdown_opt.check_true_counts(counts.total, fan)


#: ``project(x, offsets, totals, plan, t, tiebreak)``: non-negative integers per segment
#: ``x[offsets[i]:offsets[i+1]]`` summing to ``totals[i]`` at tree level ``t`` (the mechanism's projection).
Projection = Callable[[np.ndarray, np.ndarray, np.ndarray, "ODPlan", int, "np.ndarray | None"], np.ndarray]


def topdown_walk(counts: ODCounts, p: ODPlan, noise: NoiseSource, project: Projection, *,
                 progress: Any = None) -> ODRelease:
    """Release ``counts`` down the O/D tree with the plan ``p`` (Boninsegna & Silvestri 2025,
    Algorithms 1 and 3: the per-level noise is the plan's): the root is noised unless the total is
    public, then at every level the children of every surviving pair get the level's noise and
    ``project`` makes them non-negative integers summing to their parent; zeros are dropped.

    Random tie-breaking keys are drawn for every noised child whatever the projection uses, so a
    seed gives every TopDown variant the same noise.
    """
    oh, dh = counts.origin_h, counts.destination_h
    T = p.depth
    lv = [(x.origin_depth, x.destination_depth) for x in p.levels]
    n = counts.total
    measured: list[tuple[np.ndarray | None, np.ndarray | None, np.ndarray] | None] = [None] * (T + 1)
    if p.levels[0].measured:
        noisy_root = n + int(noise.discrete(p.levels[0].noise, p.scales[0], 1)[0])
        measured[0] = (np.zeros(1, np.int64), np.zeros(1, np.int64), np.array([noisy_root], np.int64))
        root = max(noisy_root, 0)
        public_total = None
    else:
        root, public_total = n, n
    cur_o = np.zeros(1 if root > 0 else 0, dtype=np.int64)
    cur_d = np.zeros_like(cur_o)
    cur_v = np.array([root] if root > 0 else [], dtype=np.int64)
    outs_o, outs_d, outs_v = [cur_o], [cur_d], [cur_v]
    noised = 0
    for t in range(1, T + 1):
        if progress is not None:
            progress((t - 1) / max(T, 1), f"level {t} of {T}: {p.levels[t].name} ({cur_v.size:,} parents)")
        (po, pd_), (o, d) = lv[t - 1], lv[t]
        if cur_v.size == 0:
            e = np.zeros(0, dtype=np.int64)
            outs_o.append(e), outs_d.append(e), outs_v.append(e)
            continue
        if o > po:
            child, pos, cnt = expand_children(oh, po, cur_o)
            co, cd = child, cur_d[pos]
        else:
            child, pos, cnt = expand_children(dh, pd_, cur_d)
            co, cd = cur_o[pos], child
        if not p.levels[t].measured:  # copy level: every node has one child, nothing to measure
            y = cur_v[pos]
        else:
            x = counts.lookup(o, d, co, cd) + noise.discrete(p.levels[t].noise, p.scales[t], co.size)
            measured[t] = (co, cd, x.copy())
            noised += int(co.size)
            tb = noise.random_uint64(co.size) if p.tiebreak == "random" else None
            y = project(x, np.r_[0, np.cumsum(cnt)], cur_v, p, t, tb)
        keep = y > 0
        cur_o, cur_d, cur_v = _sort_level(co[keep], cd[keep], np.asarray(y[keep], np.int64), dh.sizes[d])
        outs_o.append(cur_o), outs_d.append(cur_d), outs_v.append(cur_v)
    if progress is not None:
        progress(T / max(T, 1), "done")
    return ODRelease(oh, dh, p, tuple(outs_o), tuple(outs_d), tuple(outs_v), public_total, {"noised_cells": noised},
                     measurements=tuple(measured))


def sum_up(counts: ODCounts, p: ODPlan, o: np.ndarray, d: np.ndarray, v: np.ndarray,
           details: dict[str, Any], *, progress: Any = None) -> ODRelease:
    """The release of noisy finest pairs ``(o, d, v)`` (zeros dropped): every tree level their sums
    (post-processing; the baselines that noise the finest pairs only)."""
    oh, dh = counts.origin_h, counts.destination_h
    anc_o, anc_d = ancestors(oh), ancestors(dh)
    outs = []
    for t, lp in enumerate(p.levels):
        n_d = dh.sizes[lp.destination_depth]
        uk, s = group_sum(anc_o[lp.origin_depth][o] * n_d + anc_d[lp.destination_depth][d], v)
        outs.append((uk // n_d, uk % n_d, s))
        if progress is not None:
            progress(t / max(p.depth, 1), f"summing level {t}")
    return ODRelease(oh, dh, p, tuple(x[0] for x in outs), tuple(x[1] for x in outs),
                     tuple(x[2] for x in outs), None, details)
