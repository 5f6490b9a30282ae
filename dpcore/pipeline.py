"""The one release function of every kind: :func:`release` releases a plan built once.

A release made by clicking, one made on the command line (or by ``dpcore.run``) and one made
from Python go through exactly the same checks and the same accounting
(:meth:`dpcore.core.session.Session.release` is the one place a budget is charged):

1. ``plan = catalog.get(kind, name).plan(domain, budget, params, unit=..., **public)``: the
   data-free plan (:class:`dpcore.core.mechanism.Plan`; parameters resolved, cost and unit
   checked, expected error per level).  The unit of privacy comes from the kind's module
   (:func:`dpcore.points.unit.points_unit`, :func:`dpcore.areas.unit.hierarchy_unit`,
   :func:`dpcore.areas.unit.census_unit`, :func:`dpcore.flows.unit.od_unit`), which also refuses
   an unknown neighbour word.  The Plan step shows this plan; the Release step releases it.
2. ``release(plan, aggregate, ledger=..., session=..., noise=...)``: one pre-charge check of the
   budget (``ledger.check(plan.cost, plan.unit)``, the one refusal message), then the refusals
   that depend on the data (``mechanism.check_data``; issue 18, item 7), both before anything is
   spent; the session charges the plan (its cost, label, details and unit) and only then is the
   noise drawn (:meth:`dpcore.core.mechanism.Mechanism.release`).

It returns the envelope (:class:`dpcore.core.mechanism.KindRelease`); its ``inner`` is the
kind's own release object.  The catalogue (:mod:`dpcore.catalog`) is imported where it is used:
it sits above the kinds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dpcore.core.mechanism import KindRelease, Plan
from dpcore.core.session import Session
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource, secure_source

#: Charges the ledger it is handed (and refuses none); the app and the CLI pass their own session.
_LEDGER_ONLY = Session()


def release(plan: Plan, aggregate: Any, *, ledger: Ledger | None = None, session: Session | None = None,
            noise: NoiseSource | None = None, **options: Any) -> KindRelease:
    """Release ``plan`` (built once, by ``catalog.get(kind, name).plan(...)``) over ``aggregate``.

    The one release path of every kind: the plan's mechanism is looked up in the catalogue; the
    budget is checked once (``ledger.check(plan.cost, plan.unit)``, the one refusal message), then
    the refusals that depend on the data (``mechanism.check_data``), both before anything is spent;
    the session charges ``plan`` and only then is the noise drawn.  ``options`` go to the
    mechanism's release (``progress`` for O/D).  Returns the envelope (:class:`KindRelease`), whose
    ``created`` and whose ``inner``'s ``created`` are the time of the charge.
    """
    from dpcore import catalog

    mech = catalog.get(plan.kind, plan.mechanism)
    mech.check_plan(plan)
    if ledger is not None:
        ledger.check(plan.cost, plan.unit)
    mech.check_data(plan, aggregate)  # refusals that depend on the data come before the charge
    # checked: the mechanism does not run check_data again (it does for a direct caller)
    # the session stamps the envelope and its inner release with the charge's time
    return (session or _LEDGER_ONLY).release(ledger, plan, lambda: mech.release(plan, aggregate, _noise(noise),
                                                                                checked=True, **options))


def release_many(plan: Plan, aggregates: Sequence[Any], *, ledgers: Sequence[Ledger], session: Session | None,
                 noise: NoiseSource | None = None) -> list[KindRelease]:
    """:func:`release` of ``plan`` over several aggregates, one per ledger (the periods of a series):
    every check first (budget, data), then every charge in one transaction
    (:meth:`dpcore.core.session.Session.release_many`), and only then the noise of each."""
    from dpcore import catalog

    mech = catalog.get(plan.kind, plan.mechanism)
    mech.check_plan(plan)
    for ledger, aggregate in zip(ledgers, aggregates, strict=True):
        ledger.check(plan.cost, plan.unit)
        mech.check_data(plan, aggregate)
    source = _noise(noise)
    runs = [(lambda agg=agg: mech.release(plan, agg, source, checked=True)) for agg in aggregates]
    return (session or _LEDGER_ONLY).release_many(list(ledgers), plan, runs)


def _noise(noise: NoiseSource | None) -> NoiseSource:
    return noise if noise is not None else secure_source()
