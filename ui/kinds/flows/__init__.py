"""Trips between areas (origin/destination counts): the adapter of the four steps for this kind (:mod:`ui.kinds`)."""

from ui.kinds.flows.data import data_step
from ui.kinds.flows.export import export_step
from ui.kinds.flows.plan import plan_step
from ui.kinds.flows.release import release_step
from ui.kinds.flows.side import sidebar

__all__ = ["data_step", "export_step", "plan_step", "release_step", "sidebar"]
