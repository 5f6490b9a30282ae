"""Points as a kind of data: the point mechanisms the catalogue lists.

The domain is the public :class:`~dpcore.data.domain.Grid`, the aggregate its
:class:`~dpcore.data.domain.Aggregate` (the frequency matrix), the unit of privacy one record or
one person with a cap on records (the counts' sensitivity).  Every point mechanism is a
:class:`~dpcore.core.mechanism.Mechanism` through
:class:`~dpcore.points.mechanisms.base.PointsMechanism`; this module lists them, in the order the
app and the CLI offer them, and registers them into :mod:`dpcore.catalog`, the one registry.
"""

from __future__ import annotations

from dpcore.core.registry import Registry
from dpcore.points.mechanisms.ag import AdaptiveGrid
from dpcore.points.mechanisms.ag_pool import AdaptiveGridPooled
from dpcore.points.mechanisms.ag_pool_smooth import AdaptiveGridPooledSmooth
from dpcore.points.mechanisms.auto import Auto
from dpcore.points.mechanisms.base import KIND, PointsMechanism
from dpcore.points.mechanisms.dawa import DAWA
from dpcore.points.mechanisms.dawa_free import DAWAFree
from dpcore.points.mechanisms.htf import HTF
from dpcore.points.mechanisms.identity import Identity
from dpcore.points.mechanisms.kdtree import KDTree
from dpcore.points.mechanisms.matrix import MatrixMechanism
from dpcore.points.mechanisms.privelet import Privelet
from dpcore.points.mechanisms.privtree import PrivTree
from dpcore.points.mechanisms.privtree_ag import PrivTreeAG
from dpcore.points.mechanisms.quadtree import Quadtree
from dpcore.points.mechanisms.ug import UniformGrid
from dpcore.points.mechanisms.uniform import Uniform

__all__ = ["KIND", "MECHANISMS", "register"]


def _mechanisms() -> tuple[PointsMechanism, ...]:
    choosable = (HTF(), PrivTree(), DAWA(), DAWAFree(), AdaptiveGrid(), AdaptiveGridPooled(),
                 AdaptiveGridPooledSmooth(), PrivTreeAG(), UniformGrid(), Quadtree(), KDTree(), Privelet(),
                 MatrixMechanism(), Identity(), Uniform())
    # ``auto`` (last) chooses among the others from public inputs
    return (*choosable, Auto({m.name: m for m in choosable}))


#: Every point mechanism, in the order they are offered.
MECHANISMS: tuple[PointsMechanism, ...] = _mechanisms()




def register(registry: Registry) -> None:
    """Register every point mechanism of :data:`MECHANISMS`."""
    for mech in MECHANISMS:
        registry.register(mech)
