"""What every O/D mechanism is to the one core: :class:`ODMechanism`, a
:class:`~dpcore.core.mechanism.Mechanism` over the top-down walk of :mod:`.common`.

The domain is the public origin and destination hierarchies (one
:class:`~dpcore.data.hierarchy.Hierarchy` for both, or a pair), the aggregate the sparse trip
counts (:class:`~dpcore.flows.counts.ODCounts`), the unit of privacy one person making at most
``cap`` trips (``max_trips``), added/removed (``add_remove``) or replaced (``replace``)
(Boninsegna & Silvestri, PoPETs 2025, Sec. 3 and App. B).  A mechanism plans in the paper's
terms (:meth:`ODMechanism.plan_tree` -> :class:`~.common.ODPlan`, the tree's levels with their
noise and expected error), which :meth:`ODMechanism.plan` turns into the core
:class:`~dpcore.core.mechanism.Plan`; it releases a tree (:meth:`ODMechanism.release_tree` ->
:class:`~.common.ODRelease`), which :meth:`ODMechanism.release` wraps in the one record envelope.

The TopDown variants (InfTDA, TopDown L2, the MILP baseline) differ only in their projection
(:meth:`ODMechanism.project`) and error bound; the baselines that noise the finest pairs
(VanillaGauss, the stability histogram) override the measured levels and the release.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpcore.core.mechanism import KindRelease, Mechanism, Param, Plan, PlanRow, finite_or_none
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import ParameterError
from dpcore.flows.counts import ODCounts
from dpcore.flows.mechanisms.common import (
    Calibration,
    ODLevelPlan,
    ODOptions,
    ODPlan,
    ODRelease,
    ODTree,
    calibrate,
    check_options,
    topdown_level_plans,
    topdown_walk,
)
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.calibration import interval_half_width
from dpcore.privacy.noise import NoiseSource
from dpcore.privacy.units import Unit

__all__ = ["ORDER", "ORIENTATION", "SPLIT", "TIEBREAK", "WEIGHTS", "ODMechanism", "od_row"]

# The parameters of the TopDown walk, declared once here and listed by every mechanism.
ORIENTATION = Param("orientation", "Which side is split first", str, "destination",
                    "At each level the destination areas are split first ('destination', the paper) or the origins.",
                    choices=("destination", "origin"))
SPLIT = Param("split", "Budget split over levels", str, "uniform",
              "'uniform' (the paper), 'geometric' (finer levels get more) or 'custom' (weights).",
              choices=("uniform", "geometric", "custom"))
WEIGHTS = Param("weights", "Split weights", tuple, (),
                "With split 'custom': one weight per measured level, top first.", item=float)
ORDER = Param("order", "Zeroing order", str, "ascending",
              "IntOpt zeroes the smallest noisy pairs first ('ascending': fewer spurious flows) or the largest.",
              choices=("ascending", "descending"))
TIEBREAK = Param("tiebreak", "Ties", str, "random", "Ties are broken at random (no area favoured) or by index.",
                 choices=("random", "index"))



def od_row(lv: ODLevelPlan, definition: str) -> PlanRow:
    """An O/D level plan as a plan row (its error bound and reliability threshold under ``details``)."""
    measured = lv.measured and lv.share > 0
    sens = lv.l1_sensitivity if definition == "pure" else lv.l2_sensitivity
    return PlanRow(
        level=lv.level, name=lv.name, cost=PrivacyCost(definition, lv.share) if measured else None,
        noise=lv.noise, scale=lv.scale if lv.noise else None, sensitivity=sens if lv.noise else None,
        n_counts=lv.pairs, sd=lv.sd, ci95=interval_half_width("normal", lv.sd), mean_abs=finite_or_none(lv.mean_abs),
        max_abs=finite_or_none(lv.max_abs), note=lv.basis,
        details={"kind": lv.kind, "origin_level": lv.origin_level, "destination_level": lv.destination_level,
                 "branching": lv.branching, "measured": lv.measured, "share": lv.share, "noise_sd": lv.noise_sd,
                 "l1_sensitivity": lv.l1_sensitivity, "l2_sensitivity": lv.l2_sensitivity,
                 "bound_95": finite_or_none(lv.bound), "unreliable_below": finite_or_none(lv.unreliable_below),
                 "ci95": "normal approximation: 1.96 sd"},
    )


def _pair(domain: Any) -> tuple[Hierarchy, Hierarchy]:
    if isinstance(domain, Hierarchy):
        return domain, domain
    if isinstance(domain, tuple) and len(domain) == 2 and all(isinstance(h, Hierarchy) for h in domain):
        return domain
    raise ParameterError("An O/D plan needs the public hierarchy, or the (origin, destination) pair of hierarchies.")


class ODMechanism(Mechanism):
    """An O/D mechanism: the TopDown walk of Boninsegna & Silvestri (2025, Algorithms 1 and 3) by
    default, with the projection of :meth:`project`.

    ``public_inputs``: ``distinct`` (whether a person's trips go to distinct pairs; it lowers
    the finest level's L2 sensitivity).  The unit's cap is the most trips per person (m).
    Subclasses set the descriptive attributes, ``params``, ``definitions``, ``consistent`` and
    ``nonnegative`` (the record's guarantees), and override the hooks they change.
    """

    kind = "od"
    public_inputs = ("distinct",)
    #: every level sums to its parent / no released count is negative (the record states both)
    consistent = True
    nonnegative = True
    #: the guaranteed L∞ bound of :func:`~.common.topdown_level_plans` holds (an exact L∞ projection)
    exact_linf = False
    #: the budget goes to the finest pairs only (the split options are not used)
    finest_only = False
    #: the projection reads the ``order`` option (IntOpt's zeroing order) / the ``tiebreak`` option (how
    #: its ties are broken); every mechanism lists both parameters, the others release as with their
    #: defaults, and the Plan step shows (and Compare passes) each only where it is read
    reads_order = False
    reads_tiebreak = False
    #: why ``noisy_count ± 1.96 × noise_sd`` is no valid 95 % interval for the released flows, said
    #: after the mechanism's title where release.csv leaves ``ci95_low``/``ci95_high`` empty (every
    #: level without a guaranteed bound: :func:`dpcore.flows.export.no_interval_note`).  A mechanism
    #: without such a bound states its own reason (TopDown L2, VanillaGauss, the stability histogram);
    #: the exact L∞ ones (InfTDA, the MILP) publish intervals and never say this generic one
    no_interval_reason = ("has no guaranteed bound on the error of these released values, so no valid 95 % "
                          "interval is known for them.")

    # -- the plan in the paper's terms ----------------------------------------------------------
    def plan_tree(self, origin: Hierarchy, destination: Hierarchy | None = None, cost: PrivacyCost | None = None,
                  *, neighbour: str = "replace", max_trips: int = 1, distinct: bool = True,
                  orientation: str = "destination", split: str = "uniform", weights: Sequence[float] | None = None,
                  order: str = "ascending", tiebreak: str = "random", approx: tuple[float, float] | None = None,
                  beta: float = 0.05) -> ODPlan:
        """Budget split, noise and analytic errors per tree level, before any data is touched.

        ``cost`` is ρ-zCDP (discrete Gaussian; the paper) or pure ε (discrete Laplace; our
        extension); the stability histogram takes ``approx=(ε, δ)`` and no cost.  The split runs
        over the measured levels (the root only when the total is not public; copy levels
        never), top first; ``weights`` are used with ``split="custom"``.  ``beta``: the failure
        probability of the guaranteed error bound.
        """
        tree = ODTree.of(origin, destination or origin, orientation)
        check_options(neighbour, order, tiebreak, max_trips)
        o = ODOptions(neighbour, int(max_trips), bool(distinct), orientation, split, weights, order, tiebreak, beta)
        return self.plan_levels(tree, cost, approx, o)

    def plan_levels(self, tree: ODTree, cost: PrivacyCost | None, approx: tuple[float, float] | None,
                    o: ODOptions) -> ODPlan:
        """:meth:`plan_tree` on a checked tree and options: the measured levels share ``cost``."""
        if not isinstance(cost, PrivacyCost):
            raise ParameterError("The cost must be a PrivacyCost: ρ-zCDP (discrete Gaussian) or pure ε (discrete Laplace).")
        if approx is not None:
            raise ParameterError(f"{self.title} takes a pure-ε or zCDP cost, not (ε, δ); convert (ε, δ) to ρ first.")
        measured = self.measured_levels(tree, o)
        self.check_size(tree, measured)
        c = calibrate(tree, cost, measured, o)
        levels = self.level_plans(tree, c, laplace=cost.definition == "pure", beta=o.beta)
        split, weights = ("finest only", ()) if self.finest_only else (o.split, o.split_weights())
        return ODPlan(self.name, cost, None, o.neighbour, o.max_trips, o.distinct, o.orientation, split, weights,
                      o.order, o.tiebreak, tuple(levels), tuple(c.scales), made_by=self)

    def measured_levels(self, tree: ODTree, o: ODOptions) -> list[bool]:
        """The TopDown walk measures the root unless the total is public (replace neighbours, one trip
        each) and every level but the copy levels."""
        root_measured = not (o.neighbour == "replace" and o.max_trips == 1)
        return [root_measured] + [not tree.copy_level(t) for t in range(1, tree.depth + 1)]

    def check_size(self, tree: ODTree, measured: list[bool]) -> None:
        """Refuse, from public inputs, a tree too large for the mechanism (none by default)."""

    def level_plans(self, tree: ODTree, c: Calibration, *, laplace: bool, beta: float) -> list[ODLevelPlan]:
        """The expected error of every level: the TopDown recursion."""
        return topdown_level_plans(tree, c, laplace=laplace, beta=beta, exact_linf=self.exact_linf)

    # -- the release in the paper's terms ------------------------------------------------------
    def project(self, x: np.ndarray, offsets: np.ndarray, totals: np.ndarray, p: ODPlan, t: int,
                tiebreak: np.ndarray | None) -> np.ndarray:
        """Non-negative integers per segment ``x[offsets[i]:offsets[i+1]]`` summing to ``totals[i]``
        (the noisy children of every parent at tree level ``t``; ``tiebreak`` random keys or None)."""
        raise NotImplementedError(f"{self.title} releases the finest pairs; it has no TopDown projection.")

    def release_tree(self, counts: ODCounts, p: ODPlan, noise: NoiseSource, *, progress: Any = None) -> ODRelease:
        """Release ``counts`` with the plan ``p`` built by :meth:`plan_tree` for ``counts``'
        hierarchies, ``max_trips`` and ``distinct`` (:meth:`check_data` checks); the caller has
        charged ``p.cost``.  ``progress(fraction, message)`` is called once per tree level."""
        self.check_own(p)
        return topdown_walk(counts, p, noise, self.project, progress=progress)

    def release_counts(self, counts: ODCounts, cost: PrivacyCost | None, noise: NoiseSource, *,
                       progress: Any = None, **options: Any) -> ODRelease:
        """Plan for ``counts`` (``options``: those of :meth:`plan_tree`) and release; charges no budget
        (release a catalogue plan with :func:`dpcore.pipeline.release`, which does)."""
        p = self.plan_tree(counts.origin_h, counts.destination_h, cost, max_trips=counts.max_trips,
                           distinct=counts.distinct, **options)
        return self.release_tree(counts, p, noise, progress=progress)

    def check_counts(self, counts: ODCounts, p: ODPlan) -> None:
        """Refusals of :meth:`release_tree` decidable from the true trips (none by default)."""

    def check_own(self, p: ODPlan) -> None:
        """Refuse an O/D plan made by another mechanism."""
        if p.mechanism != self.name:
            raise ParameterError(f"This plan is for O/D mechanism '{p.mechanism}', not '{self.name}'.")

    # -- the one core interface -----------------------------------------------------------------
    def _plan(self, domain: Any, cost: PrivacyCost, params: dict[str, Any], unit: Unit,
              public: Mapping[str, Any]) -> Plan:
        origin, destination = _pair(domain)
        inner = self.plan_tree(origin, destination, cost, neighbour=unit.neighbour,
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
        the mechanism can take them (:meth:`check_counts`); run before the charge.

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
        self.check_counts(aggregate, p)

    def release(self, plan: Plan, aggregate: ODCounts, noise: NoiseSource, *, checked: bool = False,
                progress: Any = None) -> KindRelease:
        """As :meth:`Mechanism.release`; ``progress(fraction, message)`` is called once per tree level."""
        from dpcore.flows import export as od_export  # with GeoPandas: loaded for a release only

        if not checked:  # a direct caller: the pipeline ran it before the charge and says so
            self.check_data(plan, aggregate)
        inner = self.release_tree(aggregate, plan.inner, noise, progress=progress)
        return KindRelease.of(plan, inner, od_export.od_record, od_export.od_files)
