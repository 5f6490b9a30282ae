"""Points (one row per point): the adapter of the four steps for this kind (:mod:`ui.kinds`)."""

from ui.kinds.points.data import data_step
from ui.kinds.points.export import export_step
from ui.kinds.points.plan import plan_step
from ui.kinds.points.release import release_step
from ui.kinds.points.side import sidebar

__all__ = ["data_step", "export_step", "plan_step", "release_step", "sidebar"]
