"""Flows as a kind of data: the O/D mechanisms, one module each under :mod:`dpcore.flows.mechanisms`,
registered into the one catalogue (:mod:`dpcore.catalog`).

Every mechanism is a :class:`~dpcore.flows.mechanisms.base.ODMechanism` (Boninsegna & Silvestri,
PoPETs 2025, and its baselines).  The stability histogram (``sh``) is (ε, δ)-DP: it is listed,
but its cost is refused, as a pure-ε or zCDP budget cannot add it up.
"""

from __future__ import annotations

from dpcore.core.registry import Registry
from dpcore.flows.mechanisms.inftda import InfTDA
from dpcore.flows.mechanisms.sh import StabilityHistogram
from dpcore.flows.mechanisms.tda_l2 import TopDownL2
from dpcore.flows.mechanisms.tda_linf_milp import TopDownLinfMILP
from dpcore.flows.mechanisms.vanilla_gauss import VanillaGauss

__all__ = ["register"]


def register(registry: Registry) -> None:
    """Register every O/D mechanism, InfTDA (the default) first (``sh`` included: listed, its cost refused)."""
    for cls in (InfTDA, TopDownL2, TopDownLinfMILP, VanillaGauss, StabilityHistogram):
        registry.register(cls())
