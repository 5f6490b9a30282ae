"""Helpers for the origin/destination tests outside tests/unit/flows (imported as ``flows_helpers``:
``tests/`` is on the path through its conftest).  Not a test module."""

from __future__ import annotations

from typing import Any

from dpcore import catalog
from dpcore.core.mechanism import Plan
from dpcore.flows.unit import od_unit


def plan_od(counts: Any, name: str, cost: Any, *, neighbour: str = "replace", **params: Any) -> Plan:
    """The catalogue's plan of O/D mechanism ``name`` for ``counts`` (their two hierarchies and
    ``distinct``), under :func:`dpcore.flows.unit.od_unit` of ``neighbour`` and the counts' trip cap;
    ``params`` are the mechanism's parameters.  Release it with :func:`dpcore.pipeline.release`."""
    unit = od_unit(neighbour, counts.max_trips, counts.persons)
    return catalog.get("od", name).plan((counts.origin_h, counts.destination_h), cost, params, unit=unit,
                                        distinct=counts.distinct)
