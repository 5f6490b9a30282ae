"""The steps the app and the CLI share: validate, charge through the session, release, evaluate.

Keeping them here means a release made by clicking and one made on the command
line go through exactly the same checks and the same accounting
(:meth:`dpcore.core.session.Session.release` is the one place a budget is charged).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpcore.core import metrics
from dpcore.core.session import Charge, Session
from dpcore.data.domain import Aggregate
from dpcore.errors import BudgetError, ParameterError
from dpcore.points import mechanisms, queries
from dpcore.points.release import PartitionRelease
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource, secure_source
from dpcore.privacy.units import Unit

#: Charges the ledger it is handed (and refuses none); the app and the CLI pass their own session.
_LEDGER_ONLY = Session()


def od_unit(neighbour: str, max_trips: int) -> Unit:
    """The unit of privacy of an O/D release: one person making at most ``max_trips`` trips (one
    record when each person makes one); O/D neighbours are "bounded" (replace one) or "unbounded"."""
    n = "replace" if neighbour == "bounded" else "add_remove"
    return Unit("person", cap=max_trips, neighbour=n) if max_trips > 1 else Unit("record", neighbour=n)


def hierarchy_unit(neighbour: str) -> Unit:
    """The unit of privacy of a hierarchy release: one record, added/removed or replaced."""
    return Unit("record", neighbour="replace" if neighbour == "replace" else "add_remove")


def points_unit(aggregate: Aggregate) -> Unit:
    """The unit of privacy of a point release: one person (capped) with a person column, else one record."""
    return Unit("person", cap=aggregate.user_cap) if aggregate.user_cap else Unit("record")


def release_points(
    aggregate: Aggregate,
    mechanism: str,
    epsilon: float,
    params: dict[str, Any] | None,
    ledger: Ledger | None,
    *,
    noise: NoiseSource | None = None,
    session: Session | None = None,
) -> PartitionRelease:
    """Release ``aggregate`` with a mechanism, charging ``ledger`` first.

    Parameters are validated before anything is spent; the budget is charged
    before any noise is drawn, so a failure afterwards can never hand out an
    uncharged release.  ``noise`` defaults to the secure source; only tests pass
    a seeded one.
    """
    mech = mechanisms.get(mechanism)
    p = mech.resolve_params(params)
    # validate everything that can be validated without the data (raises ParameterError)
    cost = mech.privacy_cost(epsilon, p)
    mech.prepare(aggregate.grid, epsilon, p)  # the mechanism's public checks on the grid
    if ledger is not None and not ledger.can_spend(cost):
        raise BudgetError(
            f"This release needs {cost.label()} but only {ledger.remaining:.4g} of the budget "
            f"cap {ledger.cap.label()} is left. Lower ε, or raise the cap if your policy allows it."
        )
    charge = Charge(cost, mech.title, {"mechanism": mech.name, "params": p}, points_unit(aggregate))
    return (session or _LEDGER_ONLY).release(
        ledger, charge, lambda: mech.release(aggregate, epsilon, p, noise if noise is not None else secure_source()))


def empirical_errors(
    release: PartitionRelease,
    aggregate: Aggregate,
    *,
    sizes: tuple[float, ...] = (0.02, 0.06, 0.10),
    n_per_size: int = 500,
    shape: str = "random",
    smoothing: float = metrics.DEFAULT_SMOOTHING,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Curator-only: error of the release against the truth on random range queries.

    NOT FOR PUBLICATION — computed from the true counts.
    """
    qs, tags = queries.random_rectangles(aggregate.grid, sizes, n_per_size, shape=shape, seed=seed)
    true = queries.true_answers(aggregate.counts, qs)
    est = release.answer(qs)
    rows = []
    for s in sizes:
        m = tags == s
        rows.append({
            "query_size": s,
            "n_queries": int(m.sum()),
            **metrics.summary(true[m], est[m], smoothing),
            "expected_noise_sd": release.expected_query_sd(s),
        })
    rows.append({
        "query_size": "all",
        "n_queries": int(len(qs)),
        **metrics.summary(true, est, smoothing),
        "expected_noise_sd": float("nan"),
    })
    return rows


def cell_errors(release: PartitionRelease, aggregate: Aggregate) -> dict[str, float]:
    """Curator-only: error per fine cell of the density estimate. NOT FOR PUBLICATION."""
    d = release.density()
    t = aggregate.counts.astype(np.float64)
    return {"mae": metrics.mae(t, d), "rmse": metrics.rmse(t, d), "max_abs_error": metrics.max_abs(t, d)}


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
    """Release hierarchical counts (:class:`dpcore.areas.hierarchy.HierarchyCounts`), charging first.

    ``options`` go to :func:`dpcore.areas.tree_mechanisms.release` (``neighbour``, ``split``,
    ``weights``, ``order``).  The plan is built (and every parameter validated) before
    anything is spent; the ledger is charged before any noise is drawn.
    """
    from dpcore.areas import tree_mechanisms, tree_records

    allowed = {"neighbour", "split", "weights", "order", "area_sets", "sets_weight"}
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ParameterError(f"Unknown release option {', '.join(unknown)}; use {', '.join(sorted(allowed))}.")
    tree_mechanisms.check_order(options.get("order", "ascending"))
    plan_opts = {k: v for k, v in options.items() if k != "order"}
    p = tree_mechanisms.plan(counts.hierarchy, mechanism, cost, statistic=counts.statistic, k=counts.k, **plan_opts)
    unit = hierarchy_unit(p.neighbour)
    if ledger is not None:
        ledger.check(cost, unit)
    info = tree_records.get(mechanism)
    details: dict[str, Any] = {
        "kind": "hierarchy", "mechanism": info.name, "neighbour": p.neighbour, "split": p.split,
        "split_weights": list(p.split_weights), "statistic": p.statistic,
    }
    if p.mechanism == "matrix":  # one strategy answered with the whole budget; levels are not split
        details.update(strategy=p.extra["strategy"], level_weights=p.extra["level_weights"],
                       area_sets=len(options.get("area_sets") or ()))
    else:
        details["levels"] = [{"level": lv.level, "share": lv.share} for lv in p.levels]
    return (session or _LEDGER_ONLY).release(ledger, Charge(cost, info.title, details, unit), lambda: tree_mechanisms.release(
        counts, mechanism, cost, noise if noise is not None else secure_source(), **options))


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

    ``options`` go to :func:`dpcore.flows.mechanisms.release` (``neighbour``, ``orientation``, ``split``,
    ``weights``, ``order``, ``tiebreak``).  Every option and the domain size are checked by
    building the plan before anything is spent; the ledger is charged before any noise is drawn.
    The stability histogram (``sh``) is (ε, δ)-DP, which a pure-ε or zCDP ledger cannot add up,
    so it is refused here (the library and the benchmarks can still run it).
    """
    from dpcore.flows import mechanisms as od

    allowed = {"neighbour", "orientation", "split", "weights", "order", "tiebreak"}
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ParameterError(f"Unknown release option {', '.join(unknown)}; use {', '.join(sorted(allowed))}.")
    info = od.get(mechanism)
    if not info.ledger:
        raise ParameterError(
            f"{info.title} is (ε, δ)-DP; its cost cannot be added to a pure-ε or zCDP budget, so it cannot be "
            "released here. Use InfTDA (or compare with SH in the benchmarks)."
        )
    p = od.plan(counts.origin_h, counts.destination_h, mechanism, cost, max_trips=counts.max_trips,
                distinct=counts.distinct, **options)
    # (od.plan refuses a VanillaGauss domain above od.VANILLA_MAX_CELLS and the MILP baseline's
    # size limit, so both are checked here, before the ledger is charged)
    unit = od_unit(p.neighbour, p.max_trips)
    if ledger is not None:
        ledger.check(cost, unit)
    charge = Charge(cost, f"O/D: {info.title}", {
        "kind": "od", "mechanism": info.name, "neighbour": p.neighbour, "max_trips": p.max_trips,
        "orientation": p.orientation, "split": p.split, "split_weights": list(p.split_weights),
        "levels": [{"level": lv.name, "share": lv.share} for lv in p.levels],
    }, unit)
    return (session or _LEDGER_ONLY).release(ledger, charge, lambda: od.release(
        counts, mechanism, cost, noise if noise is not None else secure_source(), progress=progress, **options))
