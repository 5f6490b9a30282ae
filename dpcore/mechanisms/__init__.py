"""The mechanism registry: every point mechanism the app and the CLI offer."""

from __future__ import annotations

from dpcore.errors import ParameterError
from dpcore.mechanisms.ag import AdaptiveGrid
from dpcore.mechanisms.base import Param, PointMechanism
from dpcore.mechanisms.htf import HTF
from dpcore.mechanisms.identity import Identity
from dpcore.mechanisms.kdtree import KDTree
from dpcore.mechanisms.matrix import MatrixMechanism
from dpcore.mechanisms.privelet import Privelet
from dpcore.mechanisms.quadtree import Quadtree
from dpcore.mechanisms.ug import UniformGrid
from dpcore.mechanisms.uniform import Uniform

REGISTRY: dict[str, PointMechanism] = {
    m.name: m
    for m in (HTF(), AdaptiveGrid(), UniformGrid(), Quadtree(), KDTree(), Privelet(), MatrixMechanism(), Identity(),
              Uniform())
}


def get(name: str) -> PointMechanism:
    """The mechanism called ``name`` (case-insensitive)."""
    key = str(name).strip().lower()
    if key not in REGISTRY:
        raise ParameterError(
            f"Unknown mechanism '{name}'. Available: {', '.join(REGISTRY)} "
            "(run 'python -m dpcore mechanisms' for details)."
        )
    return REGISTRY[key]


def names() -> list[str]:
    return list(REGISTRY)


__all__ = ["REGISTRY", "Param", "PointMechanism", "get", "names"]
