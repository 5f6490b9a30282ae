"""Areas as kinds of data: hierarchies and census tables behind the one
:class:`~dpcore.core.mechanism.Mechanism`.

* kind ``hierarchy``: counts (or group-size histograms) over a public tree of areas
  (:class:`~dpcore.areas.hierarchy.Hierarchy` -> :class:`~dpcore.areas.hierarchy.HierarchyCounts`),
  every mechanism of :data:`dpcore.areas.tree_plans.MECHANISMS` (the matrix mechanism through
  :mod:`dpcore.areas.mechanisms.matrix`).
* kind ``census``: a census table over a public structure
  (:class:`~dpcore.areas.census_tables.CensusStructure` -> :class:`~dpcore.areas.census_tables.CensusTable`):
  ``privelet`` (every area of every level, :func:`dpcore.areas.census_privelet.release_census`) and
  ``matrix`` (marginal tables, :mod:`dpcore.areas.marginals`).

The adapters are thin: the modules named above stay the engine room; this one validates the
unit of privacy, converts their level plans to :class:`~dpcore.core.mechanism.PlanRow` and
their releases to the one record envelope.  The engine rooms are imported where a plan or a
release needs them, so listing the catalogue (``python -m dpcore mechanisms``) stays light.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dpcore.areas import census_tables, tree_plans
from dpcore.areas.census_tables import CensusStructure, CensusTable
from dpcore.areas.hierarchy import Hierarchy, HierarchyCounts
from dpcore.core.mechanism import KindRelease, Mechanism, Param, Plan, PlanRow
from dpcore.core.registry import Registry
from dpcore.errors import ParameterError
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.calibration import interval_half_width
from dpcore.privacy.noise import NoiseSource
from dpcore.privacy.units import Unit

__all__ = ["CensusMarginals", "CensusPrivelet", "HierarchyMechanism", "hier_row", "register"]

_NEIGHBOUR = {"add_remove": "add_remove", "replace": "replace"}

_WEIGHTS = Param("weights", "Split weights", tuple, (), "With split 'custom': one weight per measured level, "
                 "top first (e.g. 1,2,4).", item=float)


def _split_param(matrix: bool) -> Param:
    if matrix:
        return Param("split", "Importance of the levels", str, "uniform",
                     "How the levels' area totals are weighed: 'levels' (every level equally; 'uniform' reads as "
                     "this), 'queries' (every area total equally) or 'custom' (weights).",
                     choices=("uniform", "levels", "queries", "custom"))
    return Param("split", "Budget split over levels", str, "uniform",
                 "'uniform' (equal shares), 'geometric' (finer levels get more) or 'custom' (weights).",
                 choices=("uniform", "geometric", "custom"))


def _no_cap(unit: Unit, what: str) -> None:
    if unit.cap not in (None, 1):
        raise ParameterError(f"{what} counts each {unit.entity} once; a cap of {unit.cap} records is not supported.")


def _finite_or_none(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


# ---------------------------------------------------------------------------------------------
# hierarchies
# ---------------------------------------------------------------------------------------------


def hier_row(lv: tree_plans.HierLevelPlan, definition: str, whole_budget: bool) -> PlanRow:
    """A hierarchy level plan as a plan row.  ``whole_budget``: the level is not a share of a
    split (the matrix mechanism answers one strategy with the whole budget)."""
    measured = lv.measured and lv.share > 0 and not whole_budget
    sens = lv.l1_sensitivity if definition == "pure" else lv.l2_sensitivity
    return PlanRow(
        level=lv.depth, name=lv.level,
        cost=PrivacyCost(definition, lv.share) if measured else None,
        noise=lv.noise, scale=lv.scale if lv.noise else None, sensitivity=sens if lv.noise else None,
        n_counts=lv.cells, sd=lv.sd, ci95=interval_half_width("normal", lv.sd),
        mean_abs=_finite_or_none(lv.mean_abs), max_abs=_finite_or_none(lv.max_abs), note=lv.basis,
        details={"areas": lv.areas, "measured": lv.measured, "share": lv.share, "noise_sd": lv.noise_sd,
                 "l1_sensitivity": lv.l1_sensitivity, "l2_sensitivity": lv.l2_sensitivity,
                 "ci95": "normal approximation: 1.96 sd"},
    )


class HierarchyMechanism(Mechanism):
    """One hierarchy mechanism (exact, TopDown, Hay, matrix, ...) behind the one interface.

    ``public_inputs``: ``statistic`` (``count`` or ``group_sizes``) and ``k`` (number of group
    sizes) describe the public shape of the counts; ``area_sets`` (matrix only) the curator's
    public area-code sets (:class:`~dpcore.areas.mechanisms.matrix.AreaSets`).  The unit's neighbour
    relation is the release's: add/remove (total noised) or replace-one (total public).
    """

    kind = "hierarchy"
    public_inputs = ("statistic", "k", "area_sets")

    def __init__(self, info: tree_plans.HierMechanismInfo) -> None:
        self.info = info
        self.name = info.name
        self.title = info.title
        self.summary = info.description
        self.when_to_use = info.when
        self.reference = info.paper
        matrix = info.name == "matrix"
        params = [_split_param(matrix), _WEIGHTS]
        if info.name == "topdown_linf":
            params.append(Param("order", "Zeroing order", str, "ascending",
                                "IntOpt zeroes the smallest noisy cells first ('ascending') or the largest.",
                                choices=("ascending", "descending")))
        if matrix:
            params.append(Param("sets_weight", "Weight of the area sets", float, 1.0,
                                "Importance of your area-code sets against the levels' totals.", minimum=0.0))
        self.params = tuple(params)

    def _plan(self, domain: Hierarchy, cost: PrivacyCost, params: dict[str, Any], unit: Unit,
              public: Mapping[str, Any]) -> Plan:
        if not isinstance(domain, Hierarchy):
            raise ParameterError(f"A hierarchy plan needs the public hierarchy (got {type(domain).__name__}).")
        _no_cap(unit, self.title)
        statistic, k = public.get("statistic", "count"), int(public.get("k", 1))
        area_sets = public.get("area_sets")
        if area_sets is not None and self.name != "matrix":
            raise ParameterError("Area-code-set queries are answered by the matrix mechanism only.")
        from dpcore.areas import tree_mechanisms

        tree_mechanisms.check_order(params.get("order", "ascending"))
        extra_opts = {"area_sets": area_sets, "sets_weight": params["sets_weight"]} if self.name == "matrix" else {}
        inner = tree_mechanisms.plan(domain, self.name, cost, neighbour=_NEIGHBOUR[unit.neighbour],
                                  split=params["split"], weights=params["weights"] or None,
                                  statistic=statistic, k=k, **extra_opts)
        details: dict[str, Any] = {"neighbour": inner.neighbour, "split": inner.split,
                                   "split_weights": list(inner.split_weights), "statistic": inner.statistic}
        if self.name == "matrix":  # one strategy answered with the whole budget; levels are not split
            details.update(strategy=inner.extra["strategy"], level_weights=inner.extra["level_weights"],
                           area_sets=len(area_sets or ()))
        else:
            details["levels"] = [{"level": lv.level, "share": lv.share} for lv in inner.levels]
        rows = tuple(hier_row(lv, cost.definition, self.name == "matrix") for lv in inner.levels)
        if statistic == "group_sizes" and unit.neighbour == "add_remove":
            # Group-size histograms publish the exact number of groups N: one person may join or leave a
            # group, but no group is created or removed, so the release protects membership changes with N
            # public, like replace-one neighbours; it is charged as such (refused on an add/remove budget).
            unit = Unit(unit.entity, unit.cap, neighbour="replace")
        return Plan(self.kind, self.name, params, cost, unit, rows, inner=inner, label=self.title, extra=details,
                    domain=domain, public=dict(public))

    def check_data(self, plan: Plan, aggregate: HierarchyCounts) -> None:
        """The counts match the plan (hierarchy, statistic, k) and the mechanism can release them
        (:func:`dpcore.areas.tree_mechanisms.check_data`: sizes the exact solver, the TopDown
        projections and the matrix mechanism's noise grid take); run before the charge.

        Every refusal here depends on the true counts, so it is itself an event that depends on
        the data; it is acceptable because nothing is released or charged, only the curator (who
        holds the counts) sees it, and it refuses only counts that do not match the public plan or
        are far beyond any real table (totals beyond 2^47)."""
        from dpcore.areas import tree_mechanisms

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
        tree_mechanisms.check_data(aggregate, p, area_sets=plan.public.get("area_sets"))

    def release(self, plan: Plan, aggregate: HierarchyCounts, noise: NoiseSource) -> KindRelease:
        from dpcore.areas import export, tree_mechanisms
        from dpcore.areas.mechanisms import matrix as area_sets

        self.check_data(plan, aggregate)  # the pipeline ran it before the charge; again for direct callers
        p = plan.inner
        prm = plan.params
        if self.name == "matrix":
            inner = area_sets.release(aggregate, p, noise, area_sets=plan.public.get("area_sets"),
                                        sets_weight=prm["sets_weight"])
        else:
            inner = tree_mechanisms.release_planned(aggregate, p, noise, order=prm.get("order", "ascending"))
        return KindRelease.of(plan, inner, export.hierarchy_record)


# ---------------------------------------------------------------------------------------------
# census tables
# ---------------------------------------------------------------------------------------------


def _check_structure(table: CensusTable, plan: Plan) -> None:
    if table.structure is not plan.domain and table.structure != plan.domain:
        raise ParameterError("The table has another structure (levels, areas, bins) than the plan was made for.")


class CensusPrivelet(Mechanism):
    """Privelet (Privelet+ for ``plus_axes``) over a census table: every area of every level."""

    kind = "census"
    name = "privelet"
    title = "Privelet (wavelet noise, every area of every level)"
    summary = ("Wavelet coefficients of the table get Laplace noise; every area's total of every level is the sum "
               "of its noisy finest areas, so levels add up.")
    when_to_use = "Area totals of every level, and ordinal attributes (age bands) split into ranges, under pure ε-DP."
    reference = "X. Xiao, G. Wang, J. Gehrke, Differential Privacy via Wavelet Transforms, ICDE 2010"
    definitions = ("pure",)
    params = (Param("plus_axes", "Axes without transform (Privelet+)", tuple, (),
                    f"Axes noised directly instead of through the wavelet: '{census_tables.GEO_AXIS}' or an attribute name."),)

    def _plan(self, domain: CensusStructure, cost: PrivacyCost, params: dict[str, Any], unit: Unit,
              public: Mapping[str, Any]) -> Plan:
        if not isinstance(domain, CensusStructure):
            raise ParameterError(f"A census plan needs the public structure (got {type(domain).__name__}).")
        if unit.neighbour != "add_remove":
            raise ParameterError("Privelet protects one unit added or removed; choose the add/remove neighbours.")
        from dpcore.areas import census_privelet

        inner = census_privelet.plan_census(domain, cost.value, plus_axes=params["plus_axes"],
                                            sensitivity=unit.contribution)  # refuses unknown axes
        table = census_privelet.plan_frame(inner)
        plus, lam, gs = inner.plus_axes, inner.lam, inner.generalized_sensitivity
        rows = tuple(
            PlanRow(level=d, name=str(r.level), cost=None, noise="laplace_on_grid", scale=lam, sensitivity=gs,
                    n_counts=int(r.n_areas), sd=float(r.sd), ci95=float(r.ci95),
                    mean_abs=math.sqrt(2 / math.pi) * float(r.sd), max_abs=None,
                    note="the whole ε is spent once on the wavelet coefficients; every level is a sum of noisy "
                         "finest areas (mean error: normal approximation)",
                    details={"sd_max": float(r.sd_max)})
            for d, r in enumerate(table.itertuples(index=False))
        )
        label = "census release (Privelet" + ("+" if plus else "") + ")"
        extra = {"plus_axes": list(plus), "levels": list(domain.levels)}
        return Plan(self.kind, self.name, params, cost, unit, rows, inner=inner, label=label, extra=extra,
                    domain=domain, public=dict(public))

    def check_data(self, plan: Plan, aggregate: CensusTable) -> None:
        """The table has the plan's structure (levels, areas, bins); run before the charge.  The
        release has no other refusal that depends on the counts: the exact wavelet coefficients
        are Python integers when they outgrow float64 (:mod:`dpcore.estimate.privelet_exact`)."""
        self.check_plan(plan)
        _check_structure(aggregate, plan)

    def release(self, plan: Plan, aggregate: CensusTable, noise: NoiseSource) -> KindRelease:
        from dpcore.areas import census_privelet

        self.check_data(plan, aggregate)  # the pipeline ran it before the charge; again for direct callers
        inner = census_privelet.release_planned(aggregate, plan.inner, noise)  # no ledger: the session charges
        return KindRelease.of(plan, inner, census_privelet.census_record)


class CensusMarginals(Mechanism):
    """Marginal tables of a census table with the matrix mechanism (closed-form strategy under zCDP)."""

    kind = "census"
    name = "matrix"
    title = "Matrix mechanism (marginals)"
    summary = ("One noisy answer to the optimal strategy for a union of marginal tables (area × age band, ...); "
               "every table cell comes with its exact standard error.")
    when_to_use = "A few marginal tables of a census table at one geographic level, best under ρ-zCDP."
    reference = "Li & Miklau, PVLDB 5(6) 2012, Sec. 4.2"
    params = (
        Param("level", "Geographic level", str, "", "Level of the areas (empty: the finest level)."),
        Param("marginals", "Marginal tables", str, "1",
              "'1' (all one-way tables), '2' (all two-way), or tables like 'county*age_band;age_band'."),
    )

    def _plan(self, domain: CensusStructure, cost: PrivacyCost, params: dict[str, Any], unit: Unit,
              public: Mapping[str, Any]) -> Plan:
        if not isinstance(domain, CensusStructure):
            raise ParameterError(f"A census plan needs the public structure (got {type(domain).__name__}).")
        if unit.neighbour != "add_remove":
            raise ParameterError("The marginals protect one person added or removed; choose the add/remove neighbours.")
        _no_cap(unit, self.title)
        from dpcore.areas import marginals

        level = params["level"] or domain.levels[-1]
        axes, _ = marginals.axes_of(domain, level)
        inner = marginals.plan(domain, level, marginals.parse_marginals(params["marginals"], axes), cost)
        info = inner.info
        rows = tuple(
            PlanRow(level=i, name=m["marginal"], cost=None, noise=info["noise"], scale=info["noise_scale"],
                    sensitivity=None, n_counts=m["cells"], sd=m["sd_mean"], ci95=interval_half_width("normal", m["sd_mean"]),
                    mean_abs=math.sqrt(2 / math.pi) * m["sd_mean"], max_abs=None,
                    note="one strategy answered with the whole budget; sd is the RMS over the table's cells "
                         "(mean error: normal approximation)",
                    details={"sd_max": m["sd_max"]})
            for i, m in enumerate(inner.per_marginal)
        )
        extra = {"level": level, "marginals": [[inner.axes[a] for a in t] for t in inner.marginals],
                 "strategy": info["strategy"]}
        return Plan(self.kind, self.name, {**params, "level": level}, cost, unit, rows, inner=inner,
                    label="census marginals (matrix mechanism)", extra=extra, domain=domain, public=dict(public))

    def check_data(self, plan: Plan, aggregate: CensusTable) -> None:
        """The table has the plan's structure and its strategy answers fit the noise grid
        (:func:`dpcore.areas.marginals.check_data`); run before the charge.  A refusal depends on
        the counts, but nothing is released or charged, only the curator sees it, and it refuses
        only counts beyond about 2^62 grid units."""
        from dpcore.areas import marginals

        self.check_plan(plan)
        _check_structure(aggregate, plan)
        marginals.check_data(aggregate, plan.inner)

    def release(self, plan: Plan, aggregate: CensusTable, noise: NoiseSource) -> KindRelease:
        from dpcore.areas import marginals

        self.check_data(plan, aggregate)  # the pipeline ran it before the charge; again for direct callers
        inner = marginals.release(aggregate, plan.inner, noise)
        return KindRelease.of(plan, inner, marginals.marginals_record)


def register(registry: Registry) -> None:
    """Register every hierarchy mechanism and the two census-table mechanisms."""
    for info in tree_plans.MECHANISMS.values():
        registry.register(HierarchyMechanism(info))
    registry.register(CensusPrivelet())
    registry.register(CensusMarginals())

