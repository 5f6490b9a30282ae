"""The steps the app and the CLI share: validate, charge through the session, release, evaluate.

Keeping them here means a release made by clicking and one made on the command
line go through exactly the same checks and the same accounting
(:meth:`dpcore.core.session.Session.release` is the one place a budget is charged).

Every release takes the one mechanism interface (:class:`dpcore.core.mechanism.Mechanism`):
``mech = catalog.get(kind, name)``; ``plan = mech.plan(domain, cost, params, unit=..., **public)``
(data-free: every check happens here, before anything is spent);
``mech.check_data(plan, aggregate)`` (the refusals that depend on the data, before anything is
spent; issue 18, item 7); ``session.release(ledger, plan, lambda: mech.release(plan, aggregate,
noise))`` (the plan is what the session charges: its cost, label, details and unit).  The functions return the kind's
own release object (:attr:`dpcore.core.mechanism.KindRelease.inner`).  The catalogue
(:mod:`dpcore.catalog`) is imported where it is used: it sits above the kinds.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dpcore.areas.unit import census_unit, hierarchy_unit
from dpcore.core.mechanism import KindRelease, Plan
from dpcore.core.session import Session
from dpcore.data.domain import Aggregate
from dpcore.errors import ParameterError
from dpcore.flows.unit import od_unit
from dpcore.points.release import PartitionRelease
from dpcore.points.unit import points_unit
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource, secure_source
from dpcore.privacy.units import Unit

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
    out = (session or _LEDGER_ONLY).release(ledger, plan, lambda: mech.release(plan, aggregate, _noise(noise),
                                                                               **options))
    if dataclasses.is_dataclass(out.inner) and any(f.name == "created" for f in dataclasses.fields(out.inner)):
        out = dataclasses.replace(out, inner=dataclasses.replace(out.inner, created=out.created))
    return out


def _noise(noise: NoiseSource | None) -> NoiseSource:
    return noise if noise is not None else secure_source()


def _unknown_options(options: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ParameterError(f"Unknown release option {', '.join(unknown)}; use {', '.join(sorted(allowed))}.")


def release_points(
    aggregate: Aggregate,
    mechanism: str,
    epsilon: float,
    params: dict[str, Any] | None,
    ledger: Ledger | None,
    *,
    noise: NoiseSource | None = None,
    session: Session | None = None,
    n_estimate: float | None = None,
) -> PartitionRelease:
    """Release ``aggregate`` with a point mechanism of the catalogue, charging ``ledger`` first.

    The mechanism's plan (:meth:`dpcore.points.kind.PointsMechanism.plan`: parameters resolved,
    cost and the grid checked; ``n_estimate`` is an optional public guess of the number of
    points for its preview rows) is built before anything is spent, and is what the session
    charges; the budget is charged before any noise is drawn, so a failure afterwards can never
    hand out an uncharged release.  ``noise`` defaults to the secure source; only tests pass a
    seeded one.  Returns the point mechanism's :class:`~dpcore.points.release.PartitionRelease`.
    """
    from dpcore import catalog

    mech = catalog.get("points", mechanism)
    public = {} if n_estimate is None else {"n_estimate": n_estimate}
    plan = mech.plan(aggregate.grid, epsilon, params, unit=points_unit(aggregate.user_cap), **public)
    return release(plan, aggregate, ledger=ledger, session=session, noise=noise).inner


def release_hierarchy(
    counts: Any,
    mechanism: str,
    cost: Any,
    ledger: Ledger | None,
    *,
    noise: NoiseSource | None = None,
    session: Session | None = None,
    **options: Any,
) -> Any:
    """Release hierarchical counts (:class:`dpcore.areas.counts.HierarchyCounts`), charging first.

    ``options``: ``neighbour`` (``add_remove`` or ``replace``: the unit of privacy), ``split``,
    ``weights``, ``order`` (IntOpt's zeroing order; used by ``topdown_linf``), ``area_sets`` and
    ``sets_weight`` (the matrix mechanism's).  The catalogue's plan
    (:class:`dpcore.areas.mechanisms.tree.TreeMechanism`) is built, and every option validated, before
    anything is spent; the ledger is charged with it before any noise is drawn.  Returns the
    :class:`~dpcore.areas.tree_plans.HierarchyRelease`.
    """
    from dpcore import catalog
    from dpcore.areas import tree_plans

    _unknown_options(options, {"neighbour", "split", "weights", "order", "area_sets", "sets_weight"})
    neighbour = options.get("neighbour", "add_remove")
    if neighbour not in ("add_remove", "replace"):
        raise ParameterError("Neighbours are 'add_remove' (total noised) or 'replace' (total public).")
    tree_plans.check_order(options.get("order", "ascending"))
    mech = catalog.get("hierarchy", mechanism)
    declared = {p.name for p in mech.params}
    # 'order' and 'sets_weight' are accepted for every mechanism (the app and the CLI always send
    # them) and go to the mechanisms that declare them
    params = {k: options.get(k) for k in ("split", "weights", "order", "sets_weight") if k in declared}
    public: dict[str, Any] = {"statistic": counts.statistic, "k": counts.k}
    if options.get("area_sets") is not None:
        public["area_sets"] = options["area_sets"]
    plan = mech.plan(counts.hierarchy, cost, params, unit=hierarchy_unit(neighbour), **public)
    return release(plan, counts, ledger=ledger, session=session, noise=noise).inner


def release_od(
    counts: Any,
    mechanism: str,
    cost: Any,
    ledger: Ledger | None,
    *,
    noise: NoiseSource | None = None,
    progress: Any = None,
    session: Session | None = None,
    **options: Any,
) -> Any:
    """Release O/D counts (:class:`dpcore.flows.counts.ODCounts`), charging the ledger first.

    ``options``: ``neighbour`` (``replace`` or ``add_remove``: with the counts' ``max_trips``, the
    unit of privacy), ``orientation``, ``split``, ``weights``, ``order``, ``tiebreak``.  Every
    option and the domain size are checked by building the catalogue's plan
    (:class:`dpcore.flows.mechanisms.base.ODMechanism`) before anything is spent; the ledger is charged with
    it before any noise is drawn.  The stability histogram (``sh``) is (ε, δ)-DP, which a pure-ε
    or zCDP ledger cannot add up, so its cost is refused (the library and the benchmarks can
    still run it).  Returns the :class:`~dpcore.flows.mechanisms.common.ODRelease`.
    """
    from dpcore import catalog

    _unknown_options(options, {"neighbour", "orientation", "split", "weights", "order", "tiebreak"})
    neighbour = options.get("neighbour", "replace")  # od_unit refuses any other than replace/add_remove
    mech = catalog.get("od", mechanism)
    params = {k: options.get(k) for k in ("orientation", "split", "weights", "order", "tiebreak")}
    # (the plan refuses a VanillaGauss domain above VANILLA_MAX_CELLS and the MILP baseline's
    # size limit, so both are checked here, before the ledger is charged)
    plan = mech.plan((counts.origin_h, counts.destination_h), cost, params,
                     unit=od_unit(neighbour, counts.max_trips, counts.persons), distinct=counts.distinct)
    return release(plan, counts, ledger=ledger, session=session, noise=noise, progress=progress).inner


def release_census(
    table: Any,
    mechanism: str,
    cost: Any,
    ledger: Ledger | None,
    *,
    noise: NoiseSource | None = None,
    session: Session | None = None,
    unit: Unit | None = None,
    **options: Any,
) -> Any:
    """Release a census table (:class:`dpcore.areas.census_tables.CensusTable`), charging first.

    ``mechanism`` is ``privelet`` (every area of every level; Xiao, Wang & Gehrke 2010; option
    ``plus_axes``, the Privelet+ axes) or ``matrix`` (marginal tables with the matrix mechanism;
    Li & Miklau 2012; options ``level`` and ``marginals``).  ``unit`` defaults to
    :func:`census_unit`.  The catalogue's plan (:class:`dpcore.areas.mechanisms.census_privelet.CensusPrivelet`,
    :class:`dpcore.areas.mechanisms.census_matrix.CensusMatrix`) is built, and every option validated, before
    anything is spent; the ledger is charged with it before any noise is drawn.  Returns the
    :class:`~dpcore.areas.mechanisms.census_privelet.CensusRelease` or the
    :class:`~dpcore.areas.mechanisms.census_matrix.MarginalsRelease`.
    """
    from dpcore import catalog

    mech = catalog.get("census", mechanism)
    _unknown_options(options, {p.name for p in mech.params})
    plan = mech.plan(table.structure, cost, options, unit=unit if unit is not None else census_unit())
    return release(plan, table, ledger=ledger, session=session, noise=noise).inner
