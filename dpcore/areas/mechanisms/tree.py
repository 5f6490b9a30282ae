"""What every hierarchy mechanism shares: the tree mechanism behind the one mechanism interface.

A hierarchy mechanism (one module each in this package) releases counts, or group-size
histograms, over a public tree of areas (:class:`~dpcore.data.hierarchy.Hierarchy` ->
:class:`~dpcore.areas.counts.HierarchyCounts`).  It declares, as class attributes, its
parameters, the privacy definition it is usually run under and what it guarantees
(``consistent``: every level adds up; ``integral``; ``nonnegative``; ``counts`` and
``group_sizes``: the statistics it releases); it says which levels it measures
(:meth:`TreeMechanism.measured_levels`), with which sensitivities
(:meth:`TreeMechanism.sensitivities`), the error variance of every area that follows
(:meth:`TreeMechanism.node_variances`), and its estimator (:meth:`TreeMechanism.release_tree`).

This base class turns those into the data-free :class:`~dpcore.areas.tree_plans.HierPlan`
(:meth:`TreeMechanism.plan_tree`: the budget split over the measured levels, the noise of each,
the expected error per level) and into the one interface's :class:`~dpcore.core.mechanism.Plan`
and :class:`~dpcore.core.mechanism.KindRelease`.  The machinery is in :mod:`dpcore.areas.tree_plans`.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpcore.areas import tree_plans
from dpcore.areas.counts import HierarchyCounts
from dpcore.areas.tree_plans import HierarchyRelease, HierLevelPlan, HierPlan, LevelNoise
from dpcore.areas.unit import check_neighbour
from dpcore.core.mechanism import (
    KindRelease,
    Mechanism,
    Param,
    Plan,
    PlanRow,
    errors_wanted,
    finite_or_none,
)
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import ParameterError
from dpcore.estimate import topdown_opt
from dpcore.privacy import calibration
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.calibration import interval_half_width
from dpcore.privacy.noise import NoiseSource
from dpcore.privacy.units import Unit

__all__ = ["SPLIT", "WEIGHTS", "TopDownTree", "TreeMechanism", "hier_row", "no_cap"]

#: How the budget is split over the measured levels.
SPLIT = Param("split", "Budget split over levels", str, "uniform",
              "'uniform' (equal shares), 'geometric' (finer levels get more) or 'custom' (weights).",
              choices=("uniform", "geometric", "custom"))
#: The weights of a custom split.
WEIGHTS = Param("weights", "Split weights", tuple, (), "With split 'custom': one weight per measured level, "
                "top first (e.g. 1,2,4).", item=float)


def no_cap(unit: Unit, what: str) -> None:
    """Refuse a unit of privacy with a contribution cap (these mechanisms count each unit once)."""
    if unit.cap not in (None, 1):
        raise ParameterError(f"{what} counts each {unit.entity} once; a cap of {unit.cap} records is not supported.")


#: A plan row's ``details["ci95"]`` where each area's error is a sum of whole-number draws (bottom-up's
#: coarse levels); the record's intervals note says the same (:func:`dpcore.areas.export.intervals_note`).
SUM_CI95_TEXT = ("exact: each area's k is the smallest whole number with P(|S| <= k) >= 0.95, S the sum of its m "
                 "finest areas' noise draws (m = its number of finest areas); ci95 is the mean of k over the "
                 "level's areas")


def hier_row(lv: HierLevelPlan, definition: str, whole_budget: bool, exact_scale: Any = None,
             sum_half: np.ndarray | None = None) -> PlanRow:
    """A hierarchy level plan as a plan row.  ``whole_budget``: the level is not a share of a
    split (the matrix mechanism answers one strategy with the whole budget).  ``exact_scale``: the
    level's exact noise scale where an area's error is one draw of it (``single_draw_measured``): its
    95 % half-width is then the noise's own quantile, as the release publishes it
    (:meth:`~dpcore.areas.tree_plans.HierarchyRelease.interval`).  ``sum_half``: the level's areas' exact
    half-widths where each area's error is a sum of whole-number draws (:meth:`TreeMechanism.sum_half_widths`):
    the row's ``ci95`` is then their mean over the level's areas.  Else the normal ``1.96·sd``."""
    measured = lv.measured and lv.share > 0 and not whole_budget
    sens = lv.l1_sensitivity if definition == "pure" else lv.l2_sensitivity
    # the target planner's search reads the SDs only (sd_only) and finds its own quantiles: no exact one here
    exact = exact_scale is not None and lv.noise is not None and errors_wanted()
    summed = not exact and sum_half is not None and errors_wanted()
    if exact:
        ci95: Any = float(interval_half_width(lv.noise, exact_scale))
        ci95_text = "exact: the smallest whole k with P(|X| <= k) >= 0.95 of one draw of the level's noise"
    elif summed:
        ci95 = float(np.mean(sum_half))
        ci95_text = SUM_CI95_TEXT
    else:
        ci95, ci95_text = interval_half_width("normal", lv.sd), "normal approximation: 1.96 sd"
    return PlanRow(
        level=lv.depth, name=lv.level,
        cost=PrivacyCost(definition, lv.share) if measured else None,
        noise=lv.noise, scale=lv.scale if lv.noise else None, sensitivity=sens if lv.noise else None,
        n_counts=lv.cells, sd=lv.sd,
        ci95=ci95,
        mean_abs=finite_or_none(lv.mean_abs), max_abs=finite_or_none(lv.max_abs), note=lv.basis,
        details={"areas": lv.areas, "measured": lv.measured, "share": lv.share, "noise_sd": lv.noise_sd,
                 "l1_sensitivity": lv.l1_sensitivity, "l2_sensitivity": lv.l2_sensitivity,
                 "ci95": ci95_text},
    )


class TreeMechanism(Mechanism):
    """A mechanism of kind ``hierarchy``.

    ``public_inputs``: ``statistic`` (``count`` or ``group_sizes``) and ``k`` (number of group
    sizes) describe the public shape of the counts; ``area_sets`` (matrix only) the curator's
    public area-code sets (:class:`~dpcore.areas.area_sets.AreaSets`).  The unit's neighbour
    relation is the release's: add/remove (total noised) or replace-one (total public).
    """

    kind = "hierarchy"
    public_inputs = ("statistic", "k", "area_sets")
    #: every level adds up to the level above
    consistent: bool
    #: every released count is an integer
    integral: bool
    #: no released count is negative
    nonnegative: bool
    #: releases plain counts / group-size histograms
    counts: bool = True
    group_sizes: bool = False
    #: the privacy definition the mechanism is usually run under
    default_definition: str = "pure"
    #: one strategy answered with the whole budget (the levels are not shares of a split)
    whole_budget: bool = False
    #: the keyword options :meth:`release_tree` takes
    release_options: tuple[str, ...] = ()
    #: ``value ± 1.96·sd`` is a valid 95 % interval for the released values (linear, unbiased
    #: post-processing); False where a data-dependent projection (non-negative whole numbers) biases
    #: them, and release.csv leaves ``ci95_low``/``ci95_high`` empty
    #: (benchmarks/results/interval_release_coverage.md)
    normal_intervals: bool = True
    #: the released values of every measured level are that level's noisy counts themselves (one
    #: discrete noise draw per area, no post-processing): their 95 % interval is the exact quantile of
    #: the noise (:meth:`~dpcore.areas.tree_plans.HierarchyRelease.interval`), not the normal one, which
    #: covered such areas 1-2 points short (benchmarks/results/interval_release_coverage.md)
    single_draw_measured: bool = False

    def single_draw(self, level: HierLevelPlan) -> bool:
        """Whether every area's error at ``level`` is one draw of its discrete noise (a measured level of a
        mechanism that releases its measured levels as they are): its 95 % interval is then the noise's
        exact quantile, in the plan and in the release."""
        return self.single_draw_measured and level.measured

    def sum_half_widths(self, h: Hierarchy, p: HierPlan, depth: int) -> np.ndarray | None:
        """The exact 95 % half-width of every area at ``depth`` where each area's error is the sum of a public
        number of whole-number draws of one discrete noise (bottom-up's coarse levels): the smallest whole
        ``k`` with ``P(|S| <= k) >= 0.95`` (:func:`~dpcore.privacy.calibration.discrete_sum_half_widths`).
        None (the default) elsewhere: the release uses the single draw's quantile or the normal ``1.96·sd``."""
        return None

    # -- privacy: which levels are measured, with which sensitivities -------------------------
    def measured_levels(self, statistic: str, neighbour: str, depth: int) -> list[bool]:
        """Which depths 0..L get a noisy measurement: every one, but the total when it is public."""
        root = not (statistic == "count" and neighbour == "replace")
        return [root] + [True] * depth

    def sensitivities(self, statistic: str, neighbour: str) -> tuple[float, float]:
        """``(Δ₁, Δ₂)`` of one measured level (:func:`dpcore.areas.tree_plans.sensitivities`)."""
        return tree_plans.sensitivities(statistic, neighbour)

    # -- plan (data-free) -----------------------------------------------------------------------
    @abstractmethod
    def node_variances(self, h: Hierarchy, ln: LevelNoise, *, statistic: str, neighbour: str,
                       k: int) -> tuple[list[np.ndarray], str]:
        """The error variance of every area per depth, and the basis of that expectation."""

    def level_error(self, d: int, ln: LevelNoise, nv: np.ndarray, cells: int, k: int,
                    family: str) -> tuple[float, float]:
        """Mean and expected largest absolute error of depth ``d`` from its areas' variances."""
        return tree_plans.smooth_error(nv, k, family)

    def plan_tree(self, h: Hierarchy, cost: PrivacyCost, *, neighbour: str = "add_remove",
                  split: calibration.SplitKind = "uniform", weights: Sequence[float] | None = None,
                  statistic: str = "count", k: int = 1, area_sets: Any = None) -> HierPlan:
        """Budget split, noise and analytic expected error per level, before any data is touched.

        The split runs over the **measured** levels (:meth:`measured_levels`); ``weights`` (one
        per measured level, top first) are used with ``split="custom"``.  The expected errors are
        data-free (they use only the public tree, the budget and the noise), so they can be shown
        before release and published; the maximum is the expected largest absolute error over the
        level's cells.
        """
        if area_sets is not None:
            raise ParameterError("Area-code-set queries are answered by the matrix mechanism only.")
        if statistic not in ("count", "group_sizes"):
            raise ParameterError("The statistic must be 'count' or 'group_sizes'.")
        if statistic == "group_sizes" and not self.group_sizes:
            raise ParameterError(
                f"{self.title} releases plain counts only. For group-size histograms choose "
                "'exact' or 'dpc_approx'."
            )
        if statistic == "count" and not self.counts:
            raise ParameterError(f"{self.title} is for group-size histograms; choose another mechanism for counts.")
        check_neighbour(neighbour)
        if not isinstance(cost, PrivacyCost):
            raise ParameterError("The cost must be a PrivacyCost (pure ε or ρ-zCDP).")
        k = int(k) if statistic == "group_sizes" else 1
        if k < 1:
            raise ParameterError("A group-size histogram needs at least one size.")
        measured = self.measured_levels(statistic, neighbour, h.depth)
        l1, l2 = self.sensitivities(statistic, neighbour)
        ln = tree_plans.level_noise(h, cost, measured, split, weights, l1, l2)
        node_var, basis = self.node_variances(h, ln, statistic=statistic, neighbour=neighbour, k=k)
        levels = tree_plans.level_plans(h, cost, ln, node_var, k, basis, self.level_error)
        return HierPlan(self.name, cost, neighbour, statistic, k, split,
                        tuple(float(w) for w in (weights or ())), levels,
                        tuple(np.sqrt(np.asarray(v, float)) for v in node_var), ln.scales, made_by=self)

    def _plan_options(self, params: Mapping[str, Any], public: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword options of :meth:`plan_tree` besides the split (the matrix mechanism's area sets)."""
        return {"area_sets": public.get("area_sets")}

    def _plan(self, domain: Hierarchy, cost: PrivacyCost, params: dict[str, Any], unit: Unit,
              public: Mapping[str, Any]) -> Plan:
        if not isinstance(domain, Hierarchy):
            raise ParameterError(f"A hierarchy plan needs the public hierarchy (got {type(domain).__name__}).")
        no_cap(unit, self.title)
        statistic, k = public.get("statistic", "count"), int(public.get("k", 1))
        inner = self.plan_tree(domain, cost, neighbour=unit.neighbour, split=params["split"],
                               weights=params["weights"] or None, statistic=statistic, k=k,
                               **self._plan_options(params, public))
        rows = tuple(hier_row(lv, cost.definition, self.whole_budget,
                              inner.scales[d] if self.single_draw(lv) else None,
                              None if self.single_draw(lv) or not errors_wanted()
                              else self.sum_half_widths(domain, inner, d))
                     for d, lv in enumerate(inner.levels))
        if statistic == "group_sizes" and unit.neighbour == "add_remove":
            # Group-size histograms publish the exact number of groups N: one person may join or leave a
            # group, but no group is created or removed, so the release protects membership changes with N
            # public, like replace-one neighbours; it is charged as such (refused on an add/remove budget).
            unit = Unit(unit.entity, unit.cap, neighbour="replace")
        return Plan(self.kind, self.name, params, cost, unit, rows, inner=inner, label=self.title,
                    extra=self._plan_details(inner, public), domain=domain, public=dict(public))

    def _plan_details(self, inner: HierPlan, public: Mapping[str, Any]) -> dict[str, Any]:
        """The plan's facts for the ledger entry."""
        return {"neighbour": inner.neighbour, "split": inner.split, "split_weights": list(inner.split_weights),
                "statistic": inner.statistic,
                "levels": [{"level": lv.level, "share": lv.share} for lv in inner.levels]}

    # -- release ---------------------------------------------------------------------------------
    def check_counts(self, counts: HierarchyCounts, p: HierPlan, public: Mapping[str, Any]) -> None:
        """The mechanism's refusals that depend on the true counts (the default: the exact
        solver of every group-size histogram takes at most 2^47 groups,
        :func:`dpcore.estimate.treedp.check_true_total`)."""
        if counts.statistic == "group_sizes":  # the total is N, the number of groups
            from dpcore.estimate import treedp

            treedp.check_true_total(tree_plans.true_total(counts))

    def check_data(self, plan: Plan, aggregate: HierarchyCounts) -> None:
        """The counts match the plan (hierarchy, statistic, k) and the mechanism can release them
        (:meth:`check_counts`); run before the charge.

        Every refusal here depends on the true counts, so it is itself an event that depends on
        the data; it is acceptable because nothing is released or charged, only the curator (who
        holds the counts) sees it, and it refuses only counts that do not match the public plan or
        are far beyond any real table (totals beyond 2^47)."""
        self.check_plan(plan)
        h, p = aggregate.hierarchy, plan.inner
        if h is not plan.domain and (h.levels != plan.domain.levels or list(h.sizes) != list(plan.domain.sizes)):
            raise ParameterError("The counts are over another hierarchy than the one this plan was made for.")
        k = aggregate.k if aggregate.statistic == "group_sizes" else 1
        if (aggregate.statistic, k) != (p.statistic, p.k):
            raise ParameterError(
                f"The plan is for {p.statistic} (k = {p.k}) but the counts are {aggregate.statistic} (k = {k}); "
                "plan again with statistic and k of the counts."
            )
        self.check_counts(aggregate, p, plan.public)

    @staticmethod
    def public_total(counts: HierarchyCounts, p: HierPlan) -> int | None:
        """The exact total published under replace-one neighbours (None otherwise)."""
        return int(counts.levels()[0][0]) if p.total_public else None

    @abstractmethod
    def release_tree(self, counts: HierarchyCounts, p: HierPlan, noise: NoiseSource,
                     **options: Any) -> HierarchyRelease:
        """Release ``counts`` with the plan ``p`` of :meth:`plan_tree` (the caller has charged
        ``p.cost``): the measured levels get the plan's noise, then the mechanism's estimator runs."""

    def _release_options(self, plan: Plan) -> dict[str, Any]:
        """The keyword options of :meth:`release_tree` taken from the plan."""
        return {}

    def release(self, plan: Plan, aggregate: HierarchyCounts, noise: NoiseSource, *,
                checked: bool = False) -> KindRelease:
        from dpcore.areas import export

        if not checked:  # a direct caller: the pipeline ran it before the charge and says so
            self.check_data(plan, aggregate)
        inner = self.release_tree(aggregate, plan.inner, noise, **self._release_options(plan))
        return KindRelease.of(plan, inner, export.hierarchy_record, export.hierarchy_files)

    def release_counts(self, counts: HierarchyCounts, cost: PrivacyCost, noise: NoiseSource, *,
                       neighbour: str = "add_remove", split: calibration.SplitKind = "uniform",
                       weights: Sequence[float] | None = None, area_sets: Any = None,
                       **options: Any) -> HierarchyRelease:
        """Plan for ``counts`` and release them in one call, charging nothing (studies and tests;
        a published release goes through :func:`dpcore.pipeline.release`, which charges first)."""
        tree_plans.check_order(options.get("order", "ascending"))  # IntOpt's order; ignored by the others
        if "order" not in self.release_options:
            options.pop("order", None)
        plan_opts = {"area_sets": area_sets} if area_sets is not None else {}
        if "sets_weight" in options:
            plan_opts["sets_weight"] = options["sets_weight"]
        p = self.plan_tree(counts.hierarchy, cost, neighbour=neighbour, split=split, weights=weights,
                           statistic=counts.statistic, k=counts.k, **plan_opts)
        if area_sets is not None:
            options["area_sets"] = area_sets
        return self.release_tree(counts, p, noise, **options)


class TopDownTree(TreeMechanism):
    """What the TopDown mechanisms share: every level measured, then from the total down each
    area's noisy children projected onto non-negative integers that add up to the area's released
    count (the projection, :meth:`release_tree`, is each mechanism's own).  Their plan is the
    TopDown recursion (ours) and they refuse counts beyond the projections' exact integer range.
    The projection depends on the data (a large count among empty siblings is pulled down by the
    positive noise the empty ones keep), so ``value ± 1.96·sd`` is no valid 95 % interval."""

    normal_intervals = False

    def node_variances(self, h: Hierarchy, ln: LevelNoise, *, statistic: str, neighbour: str,
                       k: int) -> tuple[list[np.ndarray], str]:
        root_var = 0.0 if neighbour == "replace" else ln.var[0]
        return (tree_plans.topdown_variance(h, ln.var, root_var),
                "TopDown recursion V = σ²(1 − 1/b) + V_parent/b², dense regime (ours)")

    def level_error(self, d: int, ln: LevelNoise, nv: np.ndarray, cells: int, k: int,
                    family: str) -> tuple[float, float]:
        return tree_plans.topdown_error(nv, cells, k, family)

    def check_counts(self, counts: HierarchyCounts, p: HierPlan, public: Mapping[str, Any]) -> None:
        """The counts leave half the exact integer range of the projections
        (:func:`dpcore.estimate.topdown_opt.check_true_counts`)."""
        topdown_opt.check_true_counts(tree_plans.true_total(counts), tree_plans.max_fanout(counts.hierarchy))
