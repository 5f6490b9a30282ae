"""The mechanism registry: every point mechanism the app and the CLI offer."""

from __future__ import annotations

from dpcore.errors import ParameterError
from dpcore.points.mechanisms.ag import AdaptiveGrid
from dpcore.points.mechanisms.auto import Auto
from dpcore.points.mechanisms.base import Param, PointMechanism
from dpcore.points.mechanisms.dawa import DAWA
from dpcore.points.mechanisms.htf import HTF
from dpcore.points.mechanisms.identity import Identity
from dpcore.points.mechanisms.kdtree import KDTree
from dpcore.points.mechanisms.matrix import MatrixMechanism
from dpcore.points.mechanisms.privelet import Privelet
from dpcore.points.mechanisms.privtree import PrivTree
from dpcore.points.mechanisms.quadtree import Quadtree
from dpcore.points.mechanisms.ug import UniformGrid
from dpcore.points.mechanisms.uniform import Uniform

_CHOOSABLE: dict[str, PointMechanism] = {
    m.name: m
    for m in (HTF(), PrivTree(), DAWA(), AdaptiveGrid(), UniformGrid(), Quadtree(), KDTree(), Privelet(), MatrixMechanism(),
              Identity(), Uniform())
}
#: Every point mechanism; ``auto`` (last) chooses among the others from public inputs.
REGISTRY: dict[str, PointMechanism] = {**_CHOOSABLE, "auto": Auto(_CHOOSABLE)}


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
