"""Counts over areas (census tables over a public geography): the adapter of the four steps (:mod:`ui.kinds`).

Two kinds of table go through the same steps: a hierarchy of areas (TopDown and its kin) and a
census table with attributes (Privelet, marginal tables), both chosen on the Data step; their
mechanisms are chosen on the Plan step.
"""

from ui.kinds.areas.data import data_step
from ui.kinds.areas.export import export_step
from ui.kinds.areas.plan import plan_step
from ui.kinds.areas.release import release_step
from ui.kinds.areas.side import sidebar

__all__ = ["data_step", "export_step", "plan_step", "release_step", "sidebar"]
