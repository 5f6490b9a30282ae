"""Areas as kinds of data: hierarchies and census tables, registered into the catalogue.

* kind ``hierarchy``: counts (or group-size histograms) over a public tree of areas
  (:class:`~dpcore.data.hierarchy.Hierarchy` -> :class:`~dpcore.areas.counts.HierarchyCounts`),
  one mechanism per module of :mod:`dpcore.areas.mechanisms` (what they share:
  :mod:`dpcore.areas.mechanisms.tree` and :mod:`dpcore.areas.tree_plans`).
* kind ``census``: a census table over a public structure
  (:class:`~dpcore.areas.census_tables.CensusStructure` -> :class:`~dpcore.areas.census_tables.CensusTable`):
  ``privelet`` (every area of every level, :mod:`dpcore.areas.mechanisms.census_privelet`) and
  ``matrix`` (marginal tables, :mod:`dpcore.areas.mechanisms.census_matrix`).

:mod:`dpcore.catalog` is the only registry; this module only says which mechanisms the areas
kinds have, in the order the app and ``python -m dpcore mechanisms`` list them.
"""

from __future__ import annotations

from dpcore.areas.mechanisms.bottom_up import BottomUp
from dpcore.areas.mechanisms.census_matrix import CensusMatrix
from dpcore.areas.mechanisms.census_privelet import CensusPrivelet
from dpcore.areas.mechanisms.dpc_approx import DpcApprox
from dpcore.areas.mechanisms.exact import ExactTreeDP
from dpcore.areas.mechanisms.hay import HayLeastSquares
from dpcore.areas.mechanisms.independent import Independent
from dpcore.areas.mechanisms.matrix import MatrixMechanism
from dpcore.areas.mechanisms.topdown_l2 import TopDownL2
from dpcore.areas.mechanisms.topdown_linf import TopDownLinf
from dpcore.core.mechanism import Mechanism
from dpcore.core.registry import Registry

__all__ = ["HIERARCHY", "CENSUS", "register"]

#: The hierarchy mechanisms, in the order they are listed.
HIERARCHY: tuple[type[Mechanism], ...] = (ExactTreeDP, TopDownLinf, TopDownL2, HayLeastSquares, MatrixMechanism,
                                          BottomUp, Independent, DpcApprox)
#: The census-table mechanisms, in the order they are listed.
CENSUS: tuple[type[Mechanism], ...] = (CensusPrivelet, CensusMatrix)


def register(registry: Registry) -> None:
    """Register every hierarchy mechanism and the two census-table mechanisms."""
    for cls in (*HIERARCHY, *CENSUS):
        registry.register(cls())
