"""Counts over areas, Compare: every hierarchy mechanism's expected error per level at the Plan step's
budget and choices, side by side (:mod:`ui.compare_plans`; no data read, nothing spent)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from dpcore import catalog
from ui import compare_plans, fmt, frame, plans
from ui.kinds.areas import common
from ui.kinds.areas.plan import SPLITS, _core_plan, mechanism_names, mechanism_options, selection

ss = st.session_state

#: left out of the comparison, and why (its strategy is designed from the areas: seconds to minutes)
NOT_COMPARED = {"matrix": "its strategy is designed for the areas and queries you choose on the Plan step, "
                          "which takes a while; plan it there to see its errors."}


def compare_step() -> None:
    """The Compare page for counts over areas (below its heading)."""
    if common.which() == common.TABLE:
        frame.missing("For a census table with attributes, the Plan step shows each mechanism's expected error "
                      "per table; choose the mechanism there.", "plan", "Go to the Plan step")
    m = common.model()
    if m is None:
        frame.missing("Load a table of counts over areas on the Data step first.", "data", "Go to the Data step")
    h, counts, fp = m["h"], m["counts"], m["fp"]
    sel = selection(parse_only=True)  # its cost; its options follow the Plan step's mechanism
    opts = compare_options(counts.statistic, fp)
    key = plans.digest(fp, h.fingerprint(), counts.statistic, counts.k, sel.cost, *opts.items())
    candidates = plans.kept("hier_compare", key, lambda: _candidates(h, counts, sel.cost, opts))
    split_words = compare_plans.split_words(SPLITS[_split()], ss.get("hier_split", "uniform") == "custom")
    compare_plans.show(candidates, label=common.level_label,
                       unit_word="groups" if counts.statistic == "group_sizes" else "people",
                       cost_label=sel.cost.label(), mech_key="hier_mech",
                       choices_note=f"Budget across levels: {split_words}; the neighbours and the unit of privacy "
                                    f"as on the Plan step. Data: {m['name']} ({fmt.count(h.sizes[-1])} "
                                    f"{common.level_label(h.level_names[-1], h.sizes[-1])}). * From the noise "
                                    "alone: these round and clip in ways that depend on the data and can move a "
                                    "large area beside empty ones further (their releases publish no 95 % "
                                    "interval).")


def _split() -> str:
    """The budget across levels of every compared mechanism: the Plan step's split, uniform in place of its
    custom weights (one per measured level, which differ between mechanisms)."""
    split = ss.get("hier_split", "uniform")
    return split if split in SPLITS and split != "custom" else "uniform"


def compare_options(statistic: str, fp: str) -> dict[str, dict[str, Any]]:
    """Each compared mechanism's options, by name: the Plan step's settings as that mechanism reads them
    (:func:`ui.kinds.areas.plan.mechanism_options`, the Plan step's own rule; not the options of the
    Plan step's mechanism, which under the matrix mechanism may carry area sets no other mechanism
    answers) and the split of :func:`_split`; every input of the compared plans."""
    split = _split()
    return {name: {**mechanism_options(name, statistic, fp), "split": split, "weights": None}
            for name in mechanism_names(statistic) if name not in NOT_COMPARED}


def _candidates(h, counts, cost, opts) -> list[compare_plans.Candidate]:  # noqa: ANN001 - the model's objects
    out = []
    for name in mechanism_names(counts.statistic):
        mech = catalog.get("hierarchy", name)
        title = mech.title + ("" if getattr(mech, "normal_intervals", True) else " *")
        if name in NOT_COMPARED:
            out.append(compare_plans.Candidate(name, title, None, NOT_COMPARED[name]))
            continue
        core, why = _core_plan(h, counts, name, cost, opts[name])  # a DPCoreError comes back as (None, why)
        out.append(compare_plans.Candidate(name, title, core, why))
    return out
