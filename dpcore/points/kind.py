"""Points as a kind of data: every point mechanism behind the one :class:`~dpcore.core.mechanism.Mechanism`.

The domain is the public :class:`~dpcore.data.domain.Grid`, the aggregate its
:class:`~dpcore.data.domain.Aggregate` (the frequency matrix), the unit of privacy one record or
one person with a cap on records (the counts' sensitivity).  The adapters are thin: the point
mechanisms of :mod:`dpcore.points.mechanisms` (:class:`~dpcore.points.mechanisms.base.PointMechanism`)
stay the engine room; this module converts their level plans to
:class:`~dpcore.core.mechanism.PlanRow` and their releases to the one record envelope.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpcore.core.mechanism import KindRelease, Mechanism, Plan, PlanRow
from dpcore.core.registry import Registry
from dpcore.data.domain import Aggregate, Grid
from dpcore.errors import ParameterError
from dpcore.points.mechanisms import REGISTRY as POINT_MECHANISMS
from dpcore.points.mechanisms.base import PointMechanism
from dpcore.points.release import DEFAULT_QUERY_SIZES, LevelPlan
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.noise import NoiseSource
from dpcore.privacy.units import Unit

__all__ = ["KIND", "PointsMechanism", "level_row", "register"]

KIND = "points"


def level_row(lv: LevelPlan, n_cells: int) -> PlanRow:
    """A point level plan as a plan row (the expected error of range queries under ``details``)."""
    d = lv.to_dict(n_cells, DEFAULT_QUERY_SIZES)
    details: dict[str, Any] = {"in_partition": lv.in_partition, "cells_per_count": lv.cells_per_count,
                               "range_query_sd": d["expected_error"]["range_query_sd"]}
    details.update(lv.extra)
    return PlanRow(
        level=lv.level, name=lv.name, cost=lv.cost, noise=lv.noise, scale=lv.scale,
        sensitivity=lv.sensitivity, n_counts=lv.n_counts, sd=lv.sd, ci95=lv.ci95,
        mean_abs=d["expected_error"]["mean_abs_error_per_count"], max_abs=None, note=lv.note, details=details,
    )


class PointsMechanism(Mechanism):
    """One point mechanism (HTF, AG, UG, quadtree, ...) behind the one interface.

    ``public_inputs``: ``n_estimate``, a public guess of the number of points for the
    mechanisms that size their grid by it (``needs_n_guess``); without it their plan has no
    rows (nothing to preview), and the release sizes the levels from its noisy count.
    """

    kind = KIND
    public_inputs = ("n_estimate",)

    def __init__(self, point: PointMechanism) -> None:
        self.point = point
        self.name = point.name
        self.title = point.title
        self.summary = point.summary
        self.when_to_use = point.when_to_use
        self.reference = point.reference
        self.params = point.params
        self.definitions = ("pure", "zcdp") if point.supports_zcdp else ("pure",)

    def resolve_params(self, raw: Mapping[str, Any] | None = None) -> dict[str, Any]:
        # the point mechanism's own resolution (the matrix mechanism drops unused rectangles)
        return self.point.resolve_params(dict(raw or {}))

    def cost(self, budget: PrivacyCost | float, params: Mapping[str, Any] | None = None) -> PrivacyCost:
        # the point mechanism's own privacy map (and its refusal of ρ-zCDP for pure-only trees)
        return self.point.privacy_cost(budget, dict(params or {}))

    def _plan(self, domain: Grid, cost: PrivacyCost, params: dict[str, Any], unit: Unit,
              public: Mapping[str, Any]) -> Plan:
        if not isinstance(domain, Grid):
            raise ParameterError(f"A points plan needs the public grid (got {type(domain).__name__}).")
        if unit.neighbour != "add_remove":
            raise ParameterError("Point releases protect one unit added or removed; choose the add/remove neighbours.")
        n_estimate = public.get("n_estimate")
        if n_estimate is None and self.point.needs_n_guess:
            # sized by the number of points: without a public guess there is no preview of the
            # levels (the release sizes them from its noisy count); the public checks still run
            self.point.prepare(domain, cost, params)
            levels: tuple[Any, ...] = ()
        else:
            levels = self.point.plan(domain, cost, params, sensitivity=unit.contribution, n_estimate=n_estimate)
        rows = tuple(level_row(lv, domain.n_cells) for lv in levels)
        return Plan(KIND, self.name, params, cost, unit, rows, inner=levels, label=self.title,
                    domain=domain, public=dict(public))

    def check_data(self, plan: Plan, aggregate: Aggregate) -> None:
        """The counts match the plan's grid and cap, and the mechanism accepts their size
        (:meth:`~dpcore.points.mechanisms.base.PointMechanism.check_aggregate`): run before the charge."""
        self.check_plan(plan)
        if aggregate.grid != plan.domain:
            raise ParameterError("The points were aggregated on another grid than the one this plan was made for.")
        if aggregate.sensitivity != plan.unit.contribution:
            raise ParameterError(
                f"The plan protects {plan.unit.label()}, but the counts were capped at {aggregate.sensitivity} "
                "records per unit; plan again with the same cap."
            )
        self.point.check_aggregate(aggregate)

    def release(self, plan: Plan, aggregate: Aggregate, noise: NoiseSource) -> KindRelease:
        from dpcore.points import export  # the record's writer: loaded for a release only

        self.check_data(plan, aggregate)  # again, for a caller that did not run it first
        # the plan has checked the cost and resolved the parameters (PointMechanism.prepare); the
        # levels the data sizes (noisy number of points) are set inside the release
        inner = self.point.release_planned(aggregate, plan.cost, dict(plan.params), noise)
        return KindRelease.of(plan, inner, export.release_record, export.release_files)


def register(registry: Registry) -> None:
    """Register every point mechanism of :data:`dpcore.points.mechanisms.REGISTRY`."""
    for point in POINT_MECHANISMS.values():
        registry.register(PointsMechanism(point))
