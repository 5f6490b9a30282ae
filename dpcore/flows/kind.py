"""Flows as a kind of data: every O/D mechanism behind the one :class:`~dpcore.core.mechanism.Mechanism`.

The domain is the public origin and destination hierarchies (one
:class:`~dpcore.areas.hierarchy.Hierarchy` for both, or a pair), the aggregate the sparse trip
counts (:class:`~dpcore.flows.counts.ODCounts`), the unit of privacy one person making at most
``cap`` trips (``max_trips``), added/removed (``unbounded``) or replaced (``bounded``).  The
adapters are thin: :mod:`dpcore.flows.mechanisms` stays the engine room; this module converts its level
plans to :class:`~dpcore.core.mechanism.PlanRow` and its releases to the one record envelope.
The stability histogram (``sh``) is (ε, δ)-DP: it is listed, but its cost is refused, as a
pure-ε or zCDP budget cannot add it up.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dpcore.areas.hierarchy import Hierarchy
from dpcore.core.mechanism import KindRelease, Mechanism, Param, Plan, PlanRow
from dpcore.core.registry import Registry
from dpcore.errors import ParameterError
from dpcore.flows import mechanisms as od
from dpcore.flows.counts import ODCounts
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.calibration import interval_half_width
from dpcore.privacy.noise import NoiseSource
from dpcore.privacy.units import Unit

__all__ = ["ODMechanism", "od_row", "register"]

_NEIGHBOUR = {"add_remove": "unbounded", "replace": "bounded"}

PARAMS = (
    Param("orientation", "Which side is split first", str, "destination",
          "At each level the destination areas are split first ('destination', the paper) or the origins.",
          choices=("destination", "origin")),
    Param("split", "Budget split over levels", str, "uniform",
          "'uniform' (the paper), 'geometric' (finer levels get more) or 'custom' (weights).",
          choices=("uniform", "geometric", "custom")),
    Param("weights", "Split weights", tuple, (), "With split 'custom': one weight per measured level, top first.",
          item=float),
    Param("order", "Zeroing order", str, "ascending",
          "IntOpt zeroes the smallest noisy pairs first ('ascending': fewer spurious flows) or the largest.",
          choices=("ascending", "descending")),
    Param("tiebreak", "Ties", str, "random", "Ties are broken at random (no area favoured) or by index.",
          choices=("random", "index")),
)


def _finite_or_none(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def od_row(lv: od.ODLevelPlan, definition: str) -> PlanRow:
    """An O/D level plan as a plan row (its error bound and reliability threshold under ``details``)."""
    measured = lv.measured and lv.share > 0
    sens = lv.l1_sensitivity if definition == "pure" else lv.l2_sensitivity
    return PlanRow(
        level=lv.level, name=lv.name, cost=PrivacyCost(definition, lv.share) if measured else None,
        noise=lv.noise, scale=lv.scale if lv.noise else None, sensitivity=sens if lv.noise else None,
        n_counts=lv.pairs, sd=lv.sd, ci95=interval_half_width("normal", lv.sd), mean_abs=_finite_or_none(lv.mean_abs),
        max_abs=_finite_or_none(lv.max_abs), note=lv.basis,
        details={"kind": lv.kind, "origin_level": lv.origin_level, "destination_level": lv.destination_level,
                 "branching": lv.branching, "measured": lv.measured, "share": lv.share, "noise_sd": lv.noise_sd,
                 "l1_sensitivity": lv.l1_sensitivity, "l2_sensitivity": lv.l2_sensitivity,
                 "bound_95": _finite_or_none(lv.bound), "unreliable_below": _finite_or_none(lv.unreliable_below),
                 "ci95": "normal approximation: 1.96 sd"},
    )


def _pair(domain: Any) -> tuple[Hierarchy, Hierarchy]:
    if isinstance(domain, Hierarchy):
        return domain, domain
    if isinstance(domain, tuple) and len(domain) == 2 and all(isinstance(h, Hierarchy) for h in domain):
        return domain
    raise ParameterError("An O/D plan needs the public hierarchy, or the (origin, destination) pair of hierarchies.")


class ODMechanism(Mechanism):
    """One O/D mechanism (InfTDA, TopDown L2, ...) behind the one interface.

    ``public_inputs``: ``distinct`` (whether a person's trips go to distinct pairs; it lowers
    the finest level's L2 sensitivity).  The unit's cap is the most trips per person (m).
    """

    kind = "od"
    public_inputs = ("distinct",)
    params = PARAMS

    def __init__(self, info: od.ODMechanismInfo) -> None:
        self.info = info
        self.name = info.name
        self.title = info.title
        self.summary = info.description
        self.when_to_use = info.when
        self.reference = info.paper
        self.definitions = ("pure", "zcdp") if info.ledger else ()

    def cost(self, budget: PrivacyCost | float, params: Mapping[str, Any] | None = None) -> PrivacyCost:
        if not self.info.ledger:
            raise ParameterError(
                f"{self.info.title} is (ε, δ)-DP; its cost cannot be added to a pure-ε or zCDP budget, so it cannot "
                "be released here. Use InfTDA (or compare with SH in the benchmarks)."
            )
        return super().cost(budget, params)

    def _plan(self, domain: Any, cost: PrivacyCost, params: dict[str, Any], unit: Unit,
              public: Mapping[str, Any]) -> Plan:
        origin, destination = _pair(domain)
        inner = od.plan(origin, destination, self.name, cost, neighbour=_NEIGHBOUR[unit.neighbour],
                        max_trips=unit.contribution, distinct=bool(public.get("distinct", True)),
                        orientation=params["orientation"], split=params["split"],
                        weights=params["weights"] or None, order=params["order"], tiebreak=params["tiebreak"])
        extra = {"neighbour": inner.neighbour, "max_trips": inner.max_trips, "orientation": inner.orientation,
                 "split": inner.split, "split_weights": list(inner.split_weights),
                 "levels": [{"level": lv.name, "share": lv.share} for lv in inner.levels]}
        rows = tuple(od_row(lv, cost.definition) for lv in inner.levels)
        return Plan(self.kind, self.name, params, cost, unit, rows, inner=inner, label=f"O/D: {self.title}",
                    extra=extra, domain=(origin, destination), public=dict(public))

    def check_data(self, plan: Plan, aggregate: ODCounts) -> None:
        """The trips match the plan (hierarchies, the cap of trips per person, distinct pairs) and
        the projections can take them (:func:`dpcore.flows.mechanisms.check_data`); run before the
        charge.

        A refusal depends on the true trips, but nothing is released or charged, only the curator
        (who holds the trips) sees it, and it refuses only trips that do not match the public plan
        or totals far beyond any real table."""
        self.check_plan(plan)
        p = plan.inner
        for got, want, side in zip((aggregate.origin_h, aggregate.destination_h), plan.domain,
                                   ("origin", "destination"), strict=True):
            if got is not want and (got.levels != want.levels or list(got.sizes) != list(want.sizes)):
                raise ParameterError(f"The trips use another {side} hierarchy than the one this plan was made for.")
        if (aggregate.max_trips, aggregate.distinct) != (p.max_trips, p.distinct):
            raise ParameterError(
                f"The plan is for at most {p.max_trips} trip(s) per person (distinct: {p.distinct}), but the counts "
                f"allow {aggregate.max_trips} (distinct: {aggregate.distinct}); plan again with the counts' cap."
            )
        od.check_data(aggregate, p)

    def release(self, plan: Plan, aggregate: ODCounts, noise: NoiseSource, *, progress: Any = None) -> KindRelease:
        """As :meth:`Mechanism.release`; ``progress(fraction, message)`` is called once per tree level."""
        from dpcore.flows import export as od_export  # with GeoPandas: loaded for a release only

        self.check_data(plan, aggregate)  # the pipeline ran it before the charge; again for direct callers
        p = plan.inner
        inner = od.release_planned(aggregate, p, noise, progress=progress)
        return KindRelease.of(plan, inner, od_export.od_record, od_export.od_files)


def register(registry: Registry) -> None:
    """Register every O/D mechanism (``sh`` included: listed, its cost refused)."""
    for info in od.MECHANISMS.values():
        registry.register(ODMechanism(info))
