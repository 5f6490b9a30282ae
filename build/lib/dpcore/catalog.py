"""The full mechanism catalogue: every mechanism of every kind of data, in one registry.

The kind modules register their mechanisms (:func:`dpcore.points.kind.register`,
:func:`dpcore.areas.kind.register`, :func:`dpcore.flows.kind.register`); this module, above
them, builds the one :class:`~dpcore.core.registry.Registry` the session, the CLI and the app
read.  It lives outside ``dpcore/core`` so the core never imports a kind.
"""

from __future__ import annotations

from typing import Any

from dpcore.areas import kind as areas_kind
from dpcore.core.mechanism import Mechanism
from dpcore.core.registry import Registry
from dpcore.flows import kind as flows_kind
from dpcore.points import kind as points_kind

__all__ = ["REGISTRY", "describe_all", "get", "kinds", "names"]

REGISTRY = Registry()
for _kind in (points_kind, areas_kind, flows_kind):
    _kind.register(REGISTRY)


def get(kind: str, name: str) -> Mechanism:
    """The mechanism ``name`` of ``kind`` (``points``, ``hierarchy``, ``census``, ``od``)."""
    return REGISTRY.get(kind, name)


def names(kind: str) -> list[str]:
    return REGISTRY.names(kind)


def kinds() -> list[str]:
    return REGISTRY.kinds()


def describe_all() -> dict[str, list[dict[str, Any]]]:
    return REGISTRY.describe_all()
