"""Trips between areas, Compare: every O/D mechanism's expected error per table at the Plan step's
budget and choices, side by side (:mod:`ui.compare_plans`; no data read, nothing spent)."""

from __future__ import annotations

from typing import Any

from dpcore import catalog
from dpcore.errors import DPCoreError
from ui import compare_plans, frame, plans
from ui.kinds.flows.common import MECHS, SPLITS, level_label, setting
from ui.kinds.flows.plan import _core_plan, _params, options, selection
from ui.kinds.flows.sources import model


def compare_step() -> None:
    """The Compare page for trips between areas (below its heading)."""
    m = model()
    if m is None:
        frame.missing("Load trips between areas on the Data step first.", "data", "Go to the Data step")
    sel = selection(m)
    split = sel.split if sel.split != "custom" else "uniform"
    c = m["counts"]
    key = plans.digest(id(c.origin_h), id(c.destination_h), c.max_trips, c.distinct, sel.cost, split,
                       sel.opts["neighbour"], sel.opts["orientation"], setting("order"), setting("tiebreak"), sel.unit)
    candidates = plans.kept("od_compare", key, lambda: _candidates(m, sel, split))
    compare_plans.show(candidates, label=level_label, unit_word="trips", cost_label=sel.cost_label, mech_key="od_mech",
                       choices_note=f"Budget across the tables: {compare_plans.split_words(SPLITS[split], sel.split == 'custom')}; "
                                    "the neighbours, the tree's orientation and the unit of privacy as on the Plan step.")


def _candidates(m: dict[str, Any], sel: Any, split: str) -> list[compare_plans.Candidate]:
    out = []
    for name in MECHS:
        title = catalog.get("od", name).title
        try:
            core, why = _core_plan(m, name, sel.cost, _params(split, None, options(name)), sel.unit), None
        except DPCoreError as e:
            core, why = None, str(e)
        out.append(compare_plans.Candidate(name, title, core, why))
    return out
