"""HTF: the Homogeneous Tree Framework of Shaham, Ghinita, Ahuja, Krumm & Shahabi (SIGSPATIAL 2021).

Implements Shaham et al. (2021), Sec. 3–4 (Algorithms 1–3), with the errata listed below.  HTF builds a
binary, kd-like tree over the public grid whose splits make the two children internally
homogeneous, then releases noisy counts top-down and stops splitting where the counts are
small.  Three phases compose sequentially (Sec. 3, Eq. 4)::

    ε_tot = ε_height + ε_prt + ε_data

1. **Height** (ε_height, Sec. 4.2, Eqs. 9–10): ``n̂ = n + DLap(k/ε_height)``, then
   ``h = floor(log2(n̂·ε_tot/(c0·k)))``, 0 when the argument is below 1, capped at
   ``h_max = ceil(log2 N) + ceil(log2 M)``.  The floor is computed exactly (rationals).
   With a manual height or a public number of points this phase costs nothing.
2. **Partitioning** (ε_prt = h·ε'_prt, Sec. 4.1–4.2, Algorithms 1–2): at every node the split position is
   chosen by the corrected Algorithm 1 (noisy local search, ``2T+1`` noisy evaluations of
   the homogeneity objective ``o_k = Σ|c − μ1| + Σ|c − μ2|``), or optionally by the
   exhaustive baseline (every candidate, ``ε'_prt`` divided by their number).  Nodes of a
   level are disjoint (parallel composition), levels add up (sequential composition).
3. **Counts** (ε_data, Sec. 4.3, Algorithm 3): node counts get discrete Laplace noise with the geometric
   per-level budget of paper Eq. 17 (ratio 2^(1/3), the root gets the least).  A node whose
   noisy count is ``<= θ``, or that has fewer than ``κ`` cells, or that is a single cell,
   becomes a leaf and gets a fresh count with **all the budget left on its path**
   ``ε_rem(i) = Σ_{j<i} ε_j``; a node that reaches height 0 keeps its count.  Every
   root-to-leaf path therefore spends exactly ε_data.

Phases 2 and 3 run merged, level by level (a lazy form of Algorithms 2–3): a node is
searched for a split only if the count phase keeps it.  This has exactly the output
distribution of building the full tree first, and is what makes large grids fast.
The vectorised split search and that top-down pass are in
:mod:`dpcore.points.mechanisms.htf_tree`; this module holds the parameters, the privacy cost
(height rule and budget split), the data-free plan and the release.

Unit of privacy
    With at most ``k`` records per person (``aggregate.sensitivity``) every sensitivity is
    multiplied by ``k``: the counts (1 → k), |D| (1 → k) and the objective (2 → 2k, by the
    triangle inequality over the k added points).  The height rule uses ``ε_tot/k`` (the
    per-record budget), as UG does with its grid size; for ``k = 1`` this is the paper's rule.

Noise (DESIGN rule 2)
    Counts are integers and get exact discrete Laplace noise (``NoiseSource.discrete_laplace``).
    The objective is real.  ``o_k = 2·(P1/A1 + P2/A2)`` where ``A`` is a child's number of
    cells, ``S`` its count and ``P = Σ_{A·c > S}(A·c − S)`` an integer (Eqs. 5–7 in the fast form
    ``Σ|c − μ| = 2Σ_{c>μ}(c − μ)``, multiplied by ``A``).  We compute ``P`` exactly
    (integers; float64 only where every partial sum is an integer below 2^53, otherwise
    int64 split in two halves) and round ``o_k`` to the grid ``g = 2^-10`` before adding
    ``g·DLap(t/g)`` (``NoiseSource.laplace_on_grid``).  Rounding moves two neighbouring
    values apart by at most one more grid step, so one evaluation is
    ``(2k + g)/t``-DP (``dpcore.privacy.noise.real_noise_epsilon``).  The float error of
    ``o_k`` (a few correctly rounded operations on exact integers: at most about 3 ulps of
    ``o_k <= 2n``, i.e. below 2^-14 for n < 2^36 points, the most a release accepts) is
    below ``g/2``, and since ``2k/g`` is an integer the integer released still changes by
    at most ``2k/g + 1`` grid steps.  We therefore use
    ``t = (2k + g)·(2T+1)/ε'_prt``: each evaluation spends exactly ``ε'_prt/(2T+1)``, the
    paper's allocation (Sec. 4.1.2); the Laplace scale is ``2k(2T+1)/ε'_prt`` times ``1 + g/(2k)``
    (28,013.7 instead of 28,000 for T = 3, ε'_prt = 5e-4).  With a cap ``k > 1`` one person
    can move up to ``m = min(k, nodes)`` disjoint nodes of a level, each by one more grid
    step, so the level's scale uses ``2k + (m + ⌊m/8⌋)·g`` (the ⌊m/8⌋ absorbs the float
    error; :func:`~dpcore.points.mechanisms.htf_tree.rounding_steps` has the proof);
    for ``k = 1`` nothing changes.  An exact rational mechanism
    on ``A1·A2·o_k`` would avoid the rounding term, but its lattice is so fine that the
    scale (``2k(2T+1)·A1·A2/ε'_prt``) overflows 64-bit noise on a 1024² grid.

Parameters and the paper preset
    The general defaults (ours, not the paper's) spend 1 % of ε on the height and 10 % on the
    splits (spread as ε_prt/h per level).  The paper's settings are absolute:
    ``height_epsilon = 1e-4`` and ``partition_epsilon_per_level = 5e-4`` (or 1e-3), see
    :data:`PAPER_PRESET`.  A positive absolute value overrides the matching share.

What the release holds
    All visited nodes, root first then level by level (``level`` = depth).  Internal nodes
    carry the noisy count of their stop test, leaves their final count.  ``node_budget`` is
    the ε spent on the node's counts: ``ε_i`` for an internal node and for a leaf at height
    0, and ``ε_i + ε_rem(i)`` for a leaf pruned at height ``i`` (its discarded stop-test
    count and its final count), so the budgets along every root-to-leaf path add up to
    ε_data.  ``sd``/``ci95`` describe the published count only (scale ``k/ε_rem(i)`` for a
    pruned leaf).  ``levels`` is the plan for the height actually used; there
    ``LevelPlan.level`` is the display index (height estimate, split search, then depth 0..h)
    and a count level's depth is ``extra["depth"]``.

Why one release can be much worse than the next (measured, benchmarks/results/htf_study.md)
    On clustered points HTF's error varies a lot between releases of the same data.  With
    300,000 points of a tight cluster (σ = 8 cells, 45 %), a wide one (45 %) and a uniform
    background on 512 x 512 at ε = 1, 16 releases gave MRE 2.7 % to 182 % (median 19 %; AG
    0.7–1.0 %).  This is the paper's algorithm, not a defect of this implementation: the
    release reproduces the paper's Algorithm 1 on the paper's objective (checked cut by cut
    against the reference objective).  In numbers:

    * the error is uniformity error: the same partition with the TRUE leaf counts scores
      within 0.5 % of the noisy one; the worst leaf (largest ``Σ|c − μ|``) is at the bottom of
      the tree (height 0) in all 16 releases, never stopped by θ;
    * the height cap ``h = floor(log2(n̂·ε/c0)) = 14`` is the same in every release (n̂ within
      ±500 of n; the cap moves only at n̂ = 163,840 or 327,680), so the cap does not vary: what
      varies is how the 14 cuts on the path to the dense cluster are spent;
    * the homogeneity objective of a node holding a dense cluster is nearly flat (best and
      middle cut differ by 3–5 %) and often smallest for a cut that peels a thin strip off the
      node.  The releases whose path to the cluster has 5–8 "sliver" cuts (at least 7/8 of the
      lines kept on the cluster's side) end with the cluster in a leaf of 53 x 40 to
      180 x 169 cells (MRE 34–182 %); those with 0–2 isolate it in a leaf of about 10 x 20
      cells (MRE 3–21 %);
    * about half the cuts on that path differ from what the same search without noise
      would choose, but the noise is not the cause: with 30 % of ε on the cuts (three times
      less split noise) the median is 130 %, because the search then follows the objective's
      sliver cuts more faithfully.  A deeper tree helps (manual height 18: median 3.3 %,
      worst 40 %) but does not remove the spread.

    :func:`bad_release_chance` tabulates how often a release is worse than 3x the median of
    its setting in simulations (the plan's split level carries it as ``bad_release_chance``
    and a sentence ``bad_release_note``).

Errata (corrections of the paper) and implementation decisions
    erratum: Algorithm 1's midpoints need the ``lo +`` / ``k +`` offsets, a ceiling on the
    right half, and the winner's noisy value carried to the next round.
    erratum: Eq. 16 misses a cube root; the count budget grows geometrically towards the
    leaves with ratio 2^(1/3) (Eq. 17).
    erratum: Eq. 2's Laplace density has a minus sign in the exponent.
    Decisions: sensitivities scale with the cap k (counts, |D|, objective); candidates
    1..L−1, fall back to the other axis, 1x1 nodes are leaves; duplicate midpoints skipped,
    optional ``adaptive_rounds`` (T_eff); axis = height mod 2 (0 = split columns) unless
    ``first_axis`` says otherwise; the height uses a floor, n̂ <= 0 is guarded, capped at
    h_max, with ε_tot in the rule; both budget modes, ε_data > 0 checked before any noise
    with the data-independent worst case; a path-local accumulator; height-0 nodes keep
    their count; stop on ``<= θ`` or ``cells < κ`` (optional ``extent_first``); the
    stop-test count is not averaged in; the objective uses the mean and the absolute
    deviation; the data-driven depth d* is in the plan; no noisy-min extension; negative
    counts kept; one NoiseSource per release, never re-seeded; exact samplers;
    ``p_stop_by_noise`` in the plan; lazy building; with h = 0 the partitioning share goes
    to the counts; ε'_prt is divided by the number of candidates evaluated; remainders are
    computed exactly, so every path spends at most ε_data in exact arithmetic.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpcore.data.domain import Aggregate, Grid
from dpcore.errors import ParameterError
from dpcore.points.mechanisms.base import Param, PointsMechanism, count_level
from dpcore.points.mechanisms.htf_tree import (
    GRANULARITY,
    MAX_POINTS,
    ceil_log2,
    grow_tree,
    objective_scale,
    search_rounds,
)
from dpcore.points.release import LevelPlan, PartitionRelease
from dpcore.privacy import noise as _noise
from dpcore.privacy.budget import PrivacyCost, float_down, pure
from dpcore.privacy.calibration import (
    interval_half_width,
    laplace_scale_for_epsilon,
    split,
)
from dpcore.privacy.noise import NoiseSource

__all__ = [
    "HTF",
    "PAPER_PRESET",
    "BAD_RELEASE_TABLE",
    "Budgets",
    "bad_release_chance",
    "budget_breakdown",
    "count_budgets",
    "max_height",
    "remainder_budgets",
    "tree_height",
]


#: The paper's HTF settings (Shaham et al. 2021, Sec. 5.1): absolute ε_height and ε'_prt, T = 3, c0 = 10, κ = 5;
#: θ = 50 (best on LA in the paper's Fig. 4; Sec. 5.2 used 100).
PAPER_PRESET: dict[str, Any] = {
    "height_epsilon": 1e-4,
    "partition_epsilon_per_level": 5e-4,
    "T": 3,
    "c0": 10.0,
    "theta": 50,
    "kappa": 5,
    "allocation": "geometric",
    "split_method": "alg1",
}

_X, _Y = 0, 1  # X: cut between columns (split the V columns); Y: cut between rows



# =============================================================================================
# height and budgets (Shaham et al. 2021, Sec. 4.2–4.3, Eqs. 9–10 and 17)
# =============================================================================================



def max_height(grid: Grid) -> int:
    """``h_max = ceil(log2 N) + ceil(log2 M)`` (ours: the full tree's depth; 20 for 1024 x 1024)."""
    return ceil_log2(grid.rows) + ceil_log2(grid.cols)


def tree_height(n: float, epsilon: float, c0: float, sensitivity: int = 1,
                h_max: int | None = None) -> int:
    """Nominal height ``floor(log2(n·ε/(c0·k)))``, 0 when the argument is < 1, capped at h_max.

    Spec H2–H4 (paper Eqs. 9–10).  The floor is exact: ``x`` is formed as a rational from
    the floats, and ``floor(log2 x) = bitlength(floor(x)) − 1`` for ``x >= 1`` (floor,
    not round; ``n̂ <= 0`` gives 0; ε_tot, not ε_data).
    """
    x = Fraction(n) * Fraction(epsilon) / (Fraction(c0) * int(sensitivity))
    h = 0 if x < 1 else math.floor(x).bit_length() - 1
    return h if h_max is None else min(h, int(h_max))


def count_budgets(eps_data: float, h: int, allocation: str = "geometric") -> tuple[float, ...]:
    """Per-node count budget ``ε_i`` indexed by **height** i = 0..h (root = h).

    Geometric (paper Eq. 17; erratum: Eq. 16 misses the cube root): ``ε_i = ε_data·2^((h−i)/3)·(2^(1/3) − 1)/(2^((h+1)/3) − 1)``,
    so the root gets the least and ``ε_{i−1}/ε_i = 2^(1/3)``.  Uniform: ``ε_data/(h+1)``.
    The exact sum of the floats is <= ε_data (:func:`dpcore.privacy.calibration.split_geometric`).
    """
    if allocation not in ("geometric", "uniform"):
        raise ParameterError(f"Unknown count allocation {allocation!r}; choose 'geometric' or 'uniform'.")
    by_depth = split(eps_data, h + 1, allocation)  # geometric ratio 2^(1/3) by default
    return tuple(by_depth[h - i] for i in range(h + 1))


def remainder_budgets(by_height: tuple[float, ...], eps_data: float) -> tuple[float, ...]:
    """``rem[i]`` = budget left on a path after the stop tests at heights h..i.

    ``rem[i] = ε_data − Σ_{j>=i} ε_j`` (= ``Σ_{j<i} ε_j``, Algorithm 3) rounded down, computed
    exactly so that ``Σ_{j>=i} ε_j + rem[i] <= ε_data`` holds exactly.  ``rem[0] = 0``; ``rem[h+1] = ε_data`` (nothing spent yet: used when the size test
    runs before the root's count, ``extent_first``).
    """
    h = len(by_height) - 1
    total = Fraction(eps_data)
    rem = [0.0] * (h + 2)
    acc = Fraction(0)
    for i in range(h, 0, -1):
        acc += Fraction(by_height[i])
        rem[i] = float_down(total - acc)
    rem[h + 1] = float(eps_data)
    return tuple(rem)


@dataclass(frozen=True)
class Budgets:
    """The budget breakdown of one release for a given height (all public)."""

    epsilon: float
    h: int
    height_estimated: bool
    eps_height: float
    eps_prt_level: float
    eps_data: float
    by_height: tuple[float, ...]
    rem: tuple[float, ...]

    @property
    def eps_prt(self) -> float:
        return self.h * self.eps_prt_level


def _height_epsilon(epsilon: float, params: dict[str, Any]) -> float:
    if params["height_epsilon"] > 0:
        return float(params["height_epsilon"])
    return float(Fraction(epsilon) * Fraction(params["height_share"]))


def _height_is_estimated(params: dict[str, Any]) -> bool:
    return params["height"] == 0 and params["public_n"] == 0


def budget_breakdown(epsilon: float, params: dict[str, Any], h: int) -> Budgets:
    """ε_height, ε'_prt, ε_data, the per-height ``ε_i`` and the remainders for height ``h``.

    Spec B1–B3.  ``partition_epsilon_per_level > 0`` is the paper's "per-level" mode
    (``ε_prt = h·ε'_prt``); otherwise "total" mode: ``ε_prt = share·ε_tot`` spread as
    ``ε'_prt = ε_prt/h``.  With ``h = 0`` nothing is partitioned and the share goes to the
    counts.  Raises ParameterError if ``ε_data <= 0``.  Public inputs only, scalars once resolved: kept per set
    of them (exact Fractions; every release of a plan asks again).
    """
    keys = ("height_epsilon", "height_share", "height", "public_n", "partition_epsilon_per_level",
            "partition_share", "allocation")
    return _budget_breakdown(epsilon, h, tuple((key, params[key]) for key in keys))


@functools.lru_cache(maxsize=256, typed=True)
def _budget_breakdown(epsilon: float, h: int, items: tuple[tuple[str, Any], ...]) -> Budgets:
    params = dict(items)
    estimated = _height_is_estimated(params)
    eps_height = _height_epsilon(epsilon, params) if estimated else 0.0
    total = Fraction(epsilon)
    if h == 0:
        eps_level = 0.0
    elif params["partition_epsilon_per_level"] > 0:
        eps_level = float(params["partition_epsilon_per_level"])
    else:
        eps_level = float_down(total * Fraction(params["partition_share"]) / h)
    eps_data = float_down(total - Fraction(eps_height) - h * Fraction(eps_level))
    if eps_data <= 0:
        raise ParameterError(
            f"HTF's budget does not add up: ε = {epsilon:g} minus ε_height = {eps_height:g} "
            f"minus {h} levels x ε'_prt = {eps_level:g} leaves nothing for the counts. Lower "
            "'height_epsilon' or 'partition_epsilon_per_level' (or set them to 0 to use the "
            "shares), or raise ε."
        )
    by_height = count_budgets(eps_data, h, params["allocation"])
    return Budgets(
        epsilon=float(epsilon),
        h=int(h),
        height_estimated=estimated,
        eps_height=eps_height,
        eps_prt_level=eps_level,
        eps_data=eps_data,
        by_height=by_height,
        rem=remainder_budgets(by_height, eps_data),
    )


# =============================================================================================
# the mechanism
# =============================================================================================


#: Share of releases with MRE above 3x the median MRE of their setting, simulated by
#: benchmarks/htf_study.py (32 releases per cell, 512 x 512 grid, default parameters, random
#: queries of 2/6/10 % of the area): for each (n, ε) the largest share over the clustered shapes
#: ``tight_wide``, ``many_small``, ``roads`` and ``single_tight`` of
#: :func:`dpcore.data.synthetic.clustered_points`, with the shape that gave it.  One cell's
#: standard error is about 0.05.
BAD_RELEASE_TABLE: dict[tuple[int, float], tuple[float, str]] = {
    (10_000, 0.1): (0.0, "all"), (10_000, 1.0): (0.062, "tight_wide"),
    (30_000, 0.1): (0.0, "all"), (30_000, 1.0): (0.219, "single_tight"),
    (100_000, 0.1): (0.094, "single_tight"), (100_000, 1.0): (0.094, "tight_wide"),
    (300_000, 0.1): (0.125, "single_tight"), (300_000, 1.0): (0.188, "tight_wide"),
    (1_000_000, 0.1): (0.062, "tight_wide"), (1_000_000, 1.0): (0.188, "single_tight"),
}
_TABLE_GRID = (512, 512)
_TABLE_DEFAULTS = ("height_share", "partition_share", "theta", "kappa", "T", "c0", "height",
                   "height_epsilon", "partition_epsilon_per_level", "allocation", "split_method",
                   "first_axis", "extent_first", "adaptive_rounds")


def bad_release_chance(n: float | None, epsilon: float, grid: Grid,
                       params: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The simulated chance that one HTF release is much worse than a typical one, data-free.

    From public inputs only (a public guess ``n`` of the number of points, ε, the grid and the
    parameters): the share of releases whose MRE exceeded 3x the median MRE of the same
    setting in :data:`BAD_RELEASE_TABLE`, nearest tabulated n (in log scale, within a factor
    of about 1.8) and ε (0.1 or 1, within a factor of about 1.8), worst clustered shape.  The
    cause is the paper's algorithm (Shaham et al., SIGSPATIAL 2021, Algorithms 1–3; module
    docstring): whether the cuts reach a dense cluster before the height cap.  Returns None
    where nothing was simulated: another grid than 512 x 512, non-default parameters, n or ε
    outside the table.  It is not a bound: on data of another shape the chance can be larger.

    >>> from dpcore.data.domain import Bounds, Grid
    >>> bad_release_chance(300_000, 1.0, Grid(Bounds(0, 0, 1, 1), 512, 512))["chance"]
    0.188
    >>> bad_release_chance(300_000, 1.0, Grid(Bounds(0, 0, 1, 1), 1024, 1024)) is None
    True
    """
    if n is None or n <= 0 or (grid.rows, grid.cols) != _TABLE_GRID:
        return None
    if params:
        defaults = {q.name: q.default for q in HTF.params}
        if any(params.get(key, defaults[key]) != defaults[key] for key in _TABLE_DEFAULTS):
            return None
    ns = sorted({k[0] for k in BAD_RELEASE_TABLE})
    eps_values = sorted({k[1] for k in BAD_RELEASE_TABLE})
    n_near = min(ns, key=lambda v: abs(math.log(v / float(n))))
    e_near = min(eps_values, key=lambda v: abs(math.log(v / float(epsilon))))
    if abs(math.log(n_near / float(n))) > math.log(1.8) or abs(math.log(e_near / float(epsilon))) > math.log(1.8):
        return None
    chance, shape = BAD_RELEASE_TABLE[(n_near, e_near)]
    return {
        "chance": chance,
        "n_tabulated": n_near,
        "epsilon_tabulated": e_near,
        "worst_shape": shape,
        "sentence": (f"In simulations on clustered synthetic data ({n_near:,} points, ε = {e_near:g}, "
                     f"512 x 512), {chance:.0%} of HTF releases had an error more than 3 times a "
                     "typical release's; the chance depends on how clustered the data are."),
    }


def _p_stop_by_noise(expected_count: float | None, theta: int, scale: float) -> float | None:
    """½·exp(−|c − θ|/b): probability that the noise reverses the stop test (ours, from Algorithm 3's noise scale)."""
    if expected_count is None:
        return None
    return 0.5 * math.exp(-abs(expected_count - theta) / scale)


class HTF(PointsMechanism):
    """Homogeneous Tree Framework (Shaham et al., SIGSPATIAL 2021); see the module docstring."""

    name = "htf"
    title = "HTF (homogeneous tree)"
    summary = (
        "Splits the map again and again in two, choosing each cut so that both halves are as "
        "evenly filled as possible, and stops splitting where few points are left. Only the "
        "final pieces (leaves) are used to answer queries."
    )
    when_to_use = (
        "Clustered data with large empty or sparse areas (cities, mobility traces): leaves "
        "follow the dense areas, and little budget is wasted on empty ones. Needs many points "
        "(roughly 100,000 or more at ε = 0.1) for the tree to grow deep."
    )
    reference = (
        "Shaham, Ghinita, Ahuja, Krumm & Shahabi, 'HTF: Homogeneous Tree Framework for "
        "Differentially-Private Release of Location Data', ACM SIGSPATIAL 2021"
    )
    needs_n_guess = True
    definitions = ("pure",)  # the paper proves pure ε-DP only
    is_tree = True
    params = (
        Param("height_share", "Share of ε for choosing the tree height", float, 0.01,
              "Part of the budget spent on a noisy number of points, which sets the tree height "
              "(default 1 %). Not used with a manual height or a public number of points, "
              "or when 'height_epsilon' is set.",
              minimum=0.001, maximum=0.25),
        Param("partition_share", "Share of ε for choosing the splits", float, 0.10,
              "Part of the budget spent on choosing where to cut (default 10 %), spread "
              "evenly over the tree levels. Not used when 'partition_epsilon_per_level' is set.",
              minimum=0.001, maximum=0.5),
        Param("theta", "Stop count θ", int, 50,
              "A node whose noisy count is at most θ is not split further (paper: 10 to 100; "
              "about 50 works best on its city data).",
              minimum=0, maximum=10_000),
        Param("kappa", "Minimum cells κ", int, 5,
              "A node with fewer grid cells than this is not split further (paper: 5).",
              minimum=1, maximum=1000, advanced=True),
        Param("T", "Search rounds T", int, 3,
              "Rounds of the noisy search for each cut (2T+1 noisy evaluations); the cut is "
              "placed to within about 1/2^(T+1) of the node's width. Paper: 3.",
              minimum=1, maximum=10, advanced=True),
        Param("c0", "Height constant c0", float, 10.0,
              "c0 in h = floor(log2(n·ε/c0)); larger c0 gives a shallower tree. Paper: 10.",
              minimum=1.0, maximum=100.0, advanced=True),
        Param("height", "Manual tree height (0 = estimate privately)", int, 0,
              "A height chosen without looking at the data; then the height costs no budget. "
              "At most ceil(log2 rows) + ceil(log2 cols).",
              minimum=0, maximum=24, advanced=True),
        Param("public_n", "Public number of points (0 = estimate privately)", int, 0,
              "Only if the number of points is already public; then the height costs no budget.",
              minimum=0, advanced=True),
        Param("height_epsilon", "ε for the tree height (0 = use the share)", float, 0.0,
              "An absolute budget for the noisy number of points instead of the share; the "
              "paper uses 1e-4, which suits millions of points only.",
              minimum=0.0, maximum=10.0, advanced=True),
        Param("partition_epsilon_per_level", "ε per tree level for the cuts (0 = use the share)",
              float, 0.0,
              "An absolute budget ε'_prt per tree level (the paper's 5e-4 or 1e-3) instead of the "
              "share; the cuts then cost h·ε'_prt in total.",
              minimum=0.0, maximum=1.0, advanced=True),
        Param("allocation", "Count budget across levels", str, "geometric",
              "'geometric': each level down gets 2^(1/3) times more (paper Eq. 17); 'uniform': "
              "the same for every level.",
              choices=("geometric", "uniform"), advanced=True),
        Param("split_method", "Split selection", str, "alg1",
              "'alg1': the paper's noisy local search (2T+1 evaluations per cut); 'exhaustive': "
              "the paper's baseline that tries every cut, each with a tiny share of the budget.",
              choices=("alg1", "exhaustive"), advanced=True),
        Param("first_axis", "Direction of the first cut", str, "paper",
              "'paper': the axis alternates with the height (even heights cut between columns), "
              "so the root's direction depends on h; 'x' / 'y': the root cuts between columns / "
              "rows, then directions alternate.",
              choices=("paper", "x", "y"), advanced=True),
        Param("extent_first", "Check the minimum size before counting", bool, False,
              "Not in the paper: a node too small to split becomes a leaf without spending on a "
              "stop-test count, so its final count gets that budget too.", advanced=True),
        Param("adaptive_rounds", "Fewer search rounds on narrow nodes", bool, False,
              "Not in the paper: use T_eff = min(T, ceil(log2 width) − 1) rounds, so narrow nodes "
              "spend their split budget on fewer, less noisy evaluations.", advanced=True),
    )

    # -- parameters and budgets ------------------------------------------------------------
    def check_public(self, grid: Grid, cost: PrivacyCost, params: dict[str, Any]) -> None:
        """A manual height within the grid's deepest tree, and ``ε_data > 0`` for that tree."""
        p = params
        hmax = max_height(grid)
        if p["height"] > hmax:
            raise ParameterError(
                f"Parameter 'height' = {p['height']} is too deep for a {grid.rows} x {grid.cols} "
                f"grid: choose at most {hmax} (= ceil(log2 rows) + ceil(log2 cols)), or 0 to "
                "estimate it."
            )
        # ε_data > 0 is checked for the deepest possible tree,
        # before any noise is drawn, so the refusal depends on public inputs only
        budget_breakdown(cost.value, p, p["height"] or hmax)

    @staticmethod
    def _evaluations(p: dict[str, Any]) -> int:
        return 2 * p["T"] + 1

    # -- plan (data-free, our estimates) ----------------------------------------------------------
    def plan_levels(
        self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], *, sensitivity: int, n_estimate: float | None
    ) -> tuple[LevelPlan, ...]:
        """Height estimate, split search and one count level per depth, from public inputs.

        The height comes from the manual height, else the public number of points, else the
        guess ``n_estimate``.  Per depth ``d`` (height ``i = h − d``) the level
        assumes uniform data: ``2^d`` nodes (at most one per cell) of ``n_cells/2^d`` cells.
        Its ``extra`` holds

        * ``p_stop_by_noise``: the probability that the stop test's noise reverses the
          decision the true count would give, for a node whose true count equals its
          uniform-data expectation ``c = n/2^d``: ``½·exp(−|c − θ|/b_i)`` with
          ``b_i = k/ε_i`` (Laplace tail).  0.5 at ``c = θ`` (a coin flip).
          None at height 0 (no stop test) or without a number of points;
        * ``leaf_budget_if_pruned_here``: ``ε_rem(i)``, the budget of the final count of a
          leaf pruned at this depth (``ε_0`` at the bottom), and its noise scale.
        """
        p = params
        hmax = max_height(grid)
        if p["height"] > 0:
            h = p["height"]
        else:
            n = p["public_n"] if p["public_n"] > 0 else n_estimate
            if n is None:
                raise ParameterError(
                    "HTF sets its tree height from the number of points. Give a rough public guess "
                    "of the number of points to preview its error (it is used only for the "
                    "preview), or set a manual height."
                )
            h = tree_height(float(n), cost.value, p["c0"], sensitivity, hmax)
        n_for_extras = n_estimate if p["public_n"] == 0 else p["public_n"]
        b = budget_breakdown(cost.value, p, h)
        return self._levels(grid, b, p, int(sensitivity), n_for_extras)

    def _levels(self, grid: Grid, b: Budgets, p: dict[str, Any], k: int,
                n: float | None) -> tuple[LevelPlan, ...]:
        levels: list[LevelPlan] = []
        h = b.h
        if b.height_estimated:
            lv = count_level(0, "Height estimate (noisy number of points)", pure(b.eps_height), k, 1,
                             float(grid.n_cells), False,
                             note="Sets the tree height; published with the release, not used "
                                  "to answer queries.")
            levels.append(dataclasses.replace(lv, extra={
                "height": h, "h_max": max_height(grid), "c0": p["c0"],
                "height_sd": math.sqrt(2.0) * k / b.eps_height,
            }))
        if h >= 1:
            levels.append(self._split_level(len(levels), grid, b, p, k, n))
        for d in range(h + 1):
            i = h - d
            e_i = b.by_height[i]
            nodes = min(2**d, grid.n_cells)
            label = f"Depth {d} (~{nodes:,} node{'s' if nodes != 1 else ''})"
            note = ("Leaves that reach the bottom keep this count." if d == h else
                    "Stop-test counts; a node stopped here gets a fresh count with the rest of "
                    "its path's budget.")
            if d == 0 and h > 0 and n is not None and n < p["theta"] + 3 * k / e_i:
                # small data may be pruned at the root
                note += (f" With about {float(n):,.0f} points the root's count is within 3 noise "
                         f"scales of θ = {p['theta']}: the release may be a single leaf.")
            lv = count_level(len(levels), label, pure(e_i), k, nodes,
                             grid.n_cells / nodes, d == h, note=note)
            leaf_budget = b.by_height[0] if i == 0 else b.rem[i]
            expected = None if n is None else float(n) / 2**d
            levels.append(dataclasses.replace(lv, extra={
                "depth": d,
                "height": i,
                "expected_count_uniform": expected,
                "p_stop_by_noise": None if i == 0 else _p_stop_by_noise(expected, p["theta"], k / e_i),
                "leaf_budget_if_pruned_here": leaf_budget,
                "leaf_scale_if_pruned_here": k / leaf_budget,
            }))
        return tuple(levels)

    def _split_level(self, index: int, grid: Grid, b: Budgets, p: dict[str, Any], k: int,
                     n: float | None) -> LevelPlan:
        """The split search: ``ε_prt = h·ε'_prt``; noise ``g·DLap(t/g)`` on the objective."""
        h = b.h
        # uniform-data estimate: 2^d nodes at depth d, extents halved alternately
        rows, cols = grid.rows, grid.cols
        n_eval = 0
        root_L = None
        for d in range(h):
            axis_x = self._axis_is_x(h - d, d, p)
            L = cols if axis_x else rows
            if L < 2:
                axis_x, L = (not axis_x), (rows if axis_x else cols)
            if L < 2:
                break
            root_L = L if root_L is None else root_L
            nodes = min(2**d, grid.n_cells)
            if p["split_method"] == "exhaustive":
                n_eval += nodes * (L - 1)
            else:
                rounds = int(search_rounds(np.array([L]), p["T"], p["adaptive_rounds"])[0])
                n_eval += nodes * (2 * rounds + 1)
            if axis_x:
                cols = (cols + 1) // 2
            else:
                rows = (rows + 1) // 2
        root_L = root_L or 2
        if p["split_method"] == "exhaustive":
            evaluations = root_L - 1
        else:
            evaluations = 2 * int(search_rounds(np.array([root_L]), p["T"], p["adaptive_rounds"])[0]) + 1
        t = objective_scale(k, evaluations, b.eps_prt_level)
        t_units = t / GRANULARITY
        sd = float(GRANULARITY) * math.sqrt(_noise.discrete_laplace_variance(t_units))
        ci = float(GRANULARITY) * interval_half_width("discrete_laplace", t_units)
        d_star_raw = None
        if n is not None and n > 0:
            base = 2 * k * self._evaluations(p) if p["split_method"] == "alg1" else 2 * k * (root_L - 1)
            d_star_raw = math.log2(float(n) * b.eps_prt_level / base) if n * b.eps_prt_level > 0 else None
        # d* is "about log2(...)": rounded, kept within the tree
        d_star = None if d_star_raw is None else int(min(max(round(d_star_raw), 0), h))
        bad = bad_release_chance(n, b.epsilon, grid, p) if k == 1 else None  # simulated for one record per unit
        return LevelPlan(
            level=index,
            name=f"Split search ({h} levels)",
            cost=pure(b.eps_prt),
            noise="discrete_laplace_grid",
            scale=float(t),
            sensitivity=2 * k,
            n_counts=int(n_eval),
            sd=sd,
            ci95=ci,
            cells_per_count=float(grid.n_cells),
            in_partition=False,
            note=("Noisy objective values used only to pick the cuts; never published. Below "
                  "depth d* the cuts are driven mostly by noise."),
            extra={
                "split_method": p["split_method"],
                "T": p["T"],
                "evaluations_per_split": evaluations,
                "epsilon_per_level": b.eps_prt_level,
                "epsilon_per_evaluation": float(Fraction(b.eps_prt_level) / evaluations),
                "granularity": float(GRANULARITY),
                "objective_sensitivity": 2 * k,
                "data_driven_depth": d_star,
                "data_driven_depth_exact": d_star_raw,
                "bad_release_chance": None if bad is None else bad["chance"],
                "bad_release_note": None if bad is None else bad["sentence"],
                "scale_note": ("root node's scale (exhaustive: varies with the node's width)"
                               if p["split_method"] == "exhaustive" else
                               "same scale at every node" if not p["adaptive_rounds"] else
                               "root node's scale (T_eff varies with the node's width)"),
            },
        )

    @staticmethod
    def _axis_is_x(height: int, depth: int, p: dict[str, Any]) -> bool:
        """Algorithm 2's ``axis = height mod 2`` (0 = X = cut between columns), or the
        chosen first axis alternating with depth."""
        if p["first_axis"] == "paper":
            return height % 2 == 0
        return (depth % 2 == 0) == (p["first_axis"] == "x")

    # -- release (Algorithms 2–3) ------------------------------------------------------------------
    def check_aggregate(self, aggregate: Aggregate) -> None:
        """Refuse ``2^36`` points or more (the float bound of the split objective), before the charge."""
        if int(np.asarray(aggregate.counts, dtype=np.int64).sum()) >= MAX_POINTS:
            raise ParameterError(
                f"HTF's split objective is exact for fewer than {MAX_POINTS:,} points; split the "
                "data (e.g. by period) into smaller releases."
            )

    def _release(
        self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: NoiseSource
    ) -> PartitionRelease:
        grid = aggregate.grid
        p = params
        k = int(aggregate.sensitivity)
        counts = np.asarray(aggregate.counts, dtype=np.int64)
        n_true = int(counts.sum())
        hmax = max_height(grid)
        public: dict[str, Any] = {}
        # Phase H (Sec. 4.2, Eqs. 9–10)
        if p["height"] > 0:
            h = p["height"]
            n_public: float | None = None
        elif p["public_n"] > 0:
            n_public = float(p["public_n"])
            h = tree_height(n_public, cost.value, p["c0"], k, hmax)
        else:
            e_h = _height_epsilon(cost.value, p)
            # |D| with sensitivity k; the height rule in tree_height
            n_hat = int(n_true + noise.discrete_laplace(laplace_scale_for_epsilon(e_h, k), 1)[0])
            public["noisy_n"] = n_hat
            n_public = float(n_hat)
            h = tree_height(n_hat, cost.value, p["c0"], k, hmax)
        b = budget_breakdown(cost.value, p, h)
        tree = grow_tree(counts, k, b, p, noise, self._axis_is_x)
        levels = self._levels(grid, b, p, k, n_public)
        public.update({
            "height": h,
            "n_leaves": int(tree["leaf"].sum()),
            "n_nodes": int(tree["leaf"].size),
            "depth_reached": int(tree["level"].max()),
            "epsilon_height": b.eps_height,
            "epsilon_partition_per_level": b.eps_prt_level,
            "epsilon_partition": b.eps_prt,
            "epsilon_data": b.eps_data,
        })
        return self.make_release(
            aggregate, cost, p, levels,
            rects=tree["rects"],
            level=tree["level"],
            leaf=tree["leaf"],
            noisy=tree["noisy"],
            sd=tree["sd"],
            ci95=tree["ci95"],
            public=public,
            node_budget=tree["budget"],
            is_tree=True,
        )
