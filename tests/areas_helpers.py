"""Helpers for the area tests (hierarchies of counts and census tables; imported as
``areas_helpers``: ``tests/`` is on the path through its conftest).  Not a test module."""

from __future__ import annotations

from typing import Any

from dpcore import catalog
from dpcore.areas.unit import census_unit, hierarchy_unit
from dpcore.core.mechanism import Plan
from dpcore.privacy.units import Unit


def plan_hierarchy(counts: Any, name: str, cost: Any, *, neighbour: str = "add_remove", area_sets: Any = None,
                   **params: Any) -> Plan:
    """The catalogue's plan of hierarchy mechanism ``name`` for ``counts`` (its hierarchy, statistic
    and ``k``), under :func:`dpcore.areas.unit.hierarchy_unit` of ``neighbour``; ``params`` are the
    mechanism's parameters.  Release it with :func:`dpcore.pipeline.release`."""
    public: dict[str, Any] = {"statistic": counts.statistic, "k": counts.k}
    if area_sets is not None:
        public["area_sets"] = area_sets
    return catalog.get("hierarchy", name).plan(counts.hierarchy, cost, params, unit=hierarchy_unit(neighbour),
                                               **public)


def plan_census(table: Any, name: str, cost: Any, *, unit: Unit | None = None, **params: Any) -> Plan:
    """The catalogue's plan of census mechanism ``name`` (``privelet`` or ``matrix``) for ``table``'s
    structure, under ``unit`` (default :func:`dpcore.areas.unit.census_unit`)."""
    return catalog.get("census", name).plan(table.structure, cost, params,
                                            unit=unit if unit is not None else census_unit())
