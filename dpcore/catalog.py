"""The full mechanism catalogue: every mechanism of every kind of data, in one registry.

The kind modules register their mechanisms (:func:`dpcore.points.kind.register`,
:func:`dpcore.areas.kind.register`, :func:`dpcore.flows.kind.register`); this module, above
them, builds the one :class:`~dpcore.core.registry.Registry` the session, the CLI and the app
read.  It lives outside ``dpcore/core`` so the core never imports a kind.

Names.  There are three kinds of data, ``points``, ``areas`` and ``flows``: the packages, the
app's kinds and the key kind of a budget in the ledger (hierarchy and census releases of one
table draw on one ``areas`` budget).  A kind is released in one or more release forms, which are
this catalogue's keys, the ``release`` subcommands of the command line and the ``kind`` of a
release record: ``points`` (points), ``hierarchy`` and ``census`` (areas: counts over a public
hierarchy, or a census table's cells and marginal tables) and ``od`` (flows: origin/destination
trips).  Neighbouring data sets are named as in :class:`~dpcore.privacy.units.Unit` everywhere:
``add_remove`` or ``replace``.
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
    """The mechanism ``name`` of the release form ``kind`` (``points``, ``hierarchy``, ``census``, ``od``)."""
    return REGISTRY.get(kind, name)


def names(kind: str) -> list[str]:
    return REGISTRY.names(kind)


def kinds() -> list[str]:
    return REGISTRY.kinds()


def describe_all() -> dict[str, list[dict[str, Any]]]:
    return REGISTRY.describe_all()
