"""Compare for counts over areas and trips between areas: every mechanism's expected error per level.

Point mechanisms are compared by releasing them on a stand-in (:mod:`ui.compare_page`).  For areas
and trips each mechanism's :class:`~dpcore.core.mechanism.Plan` already states its expected error per
level from the budget and the public areas alone, so Compare sets those plans side by side: no data
is read, nothing is released or spent, and the numbers are the ones the Plan step shows for each.
The kinds build the plans (``ui.kinds.areas.compare``, ``ui.kinds.flows.compare``); this module
draws them and lets the curator take one to the Plan step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from dpcore.core.mechanism import Plan
from ui import fmt, state

#: the row label of a mechanism's table row
MECHANISM = "mechanism"


@dataclass(frozen=True)
class Candidate:
    """One mechanism of the comparison: its plan at the Plan step's choices, or why it has none."""

    name: str
    title: str
    plan: Plan | None
    why: str | None = None


def table(candidates: Sequence[Candidate], label: Callable[[str], str]) -> pd.DataFrame:
    """Mechanisms (rows, by title) × levels (columns, top first, by ``label``): the 95 % half-width of
    one count's error (``PlanRow.ci95``, rounded to whole people or trips; NaN where a mechanism has no
    such level).  Mechanisms without a plan are left out.

    >>> from dpcore.core.mechanism import PlanRow
    >>> from dpcore.privacy.budget import pure
    >>> from dpcore.privacy.units import Unit
    >>> def p(*c): return Plan("hierarchy", "m", {}, pure(1.0), Unit(), tuple(
    ...     PlanRow(i, n, pure(0.5), "discrete_laplace", 2.0, 1, 4, 1.0, v, 1.0, 2.0) for i, (n, v) in enumerate(c)))
    >>> table([Candidate("a", "A", p(("state", 4.2), ("county", 9.6))), Candidate("b", "B", None, "no")],
    ...       str.upper).to_dict("records")
    [{'mechanism': 'A', 'STATE': 4.0, 'COUNTY': 10.0}]
    """
    rows, levels = [], []
    for c in candidates:
        if c.plan is None:
            continue
        row = {MECHANISM: c.title}
        for r in c.plan.rows:
            name = label(r.name)
            if name not in levels:
                levels.append(name)
            row[name] = float(round(r.ci95)) if r.ci95 is not None and math.isfinite(r.ci95) else math.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=[MECHANISM, *levels])


def _best(frame: pd.DataFrame, level: str) -> str:
    low = frame[level].min()
    names = list(frame.loc[frame[level] == low, MECHANISM])
    # a title's own "*" (the no-interval mark) would close the bold: escaped for Markdown
    who = f"**{names[0].replace('*', chr(92) + '*')}**" + (f" (and {len(names) - 1} more)" if len(names) > 1 else "")
    return f"{who}, ± {fmt.count(low)}"


def best_sentence(frame: pd.DataFrame, unit_word: str) -> str | None:
    """Which mechanism has the smallest expected error at the finest level and at the top one (the
    table's last and first level columns; the table marks the smallest of every level).

    >>> best_sentence(pd.DataFrame({"mechanism": ["A", "B"], "state": [3.0, 3.0], "zone": [12.0, 9.0]}), "people")
    'Smallest expected error in people, for 19 of 20 counts: at the finest level (zone) **B**, ± 9; at the top (state) **A** (and 1 more), ± 3.'
    >>> print(best_sentence(pd.DataFrame({"mechanism": ["A *"], "zone": [9.0]}), "people"))
    Smallest expected error in people, for 19 of 20 counts: at the finest level (zone) **A \\***, ± 9.
    """
    levels = [c for c in frame.columns[1:] if not frame[c].isna().all()]
    if frame.empty or not levels:
        return None
    text = f"Smallest expected error in {unit_word}, for 19 of 20 counts: at the finest level ({levels[-1]}) " \
           + _best(frame, levels[-1])
    if len(levels) > 1:
        text += f"; at the top ({levels[0]}) " + _best(frame, levels[0])
    return text + "."


def _marked(frame: pd.DataFrame) -> Any:
    """The table with the smallest value of every level in bold (a pandas Styler for st.dataframe)."""
    levels = [c for c in frame.columns if c != MECHANISM]
    return frame.style.format("{:,.0f}", subset=levels, na_rep="–").highlight_min(
        subset=levels, props="font-weight: bold; background-color: #e6f2e6")


def split_words(chosen: str, replaced: bool) -> str:
    """How the budget is split over levels for every mechanism of the comparison, in words: the Plan
    step's split, or uniform where that split (custom weights: one per measured level, which differ
    between mechanisms) cannot serve every mechanism.

    >>> split_words("Geometric (finer levels get more)", False)
    'geometric (finer levels get more)'
    >>> split_words("Uniform across levels", True)
    "uniform across levels (the Plan step's custom weights fit one mechanism only)"
    """
    words = chosen[:1].lower() + chosen[1:]
    return words + (" (the Plan step's custom weights fit one mechanism only)" if replaced else "")


def show(candidates: Sequence[Candidate], *, label: Callable[[str], str], unit_word: str, cost_label: str,
         mech_key: str, choices_note: str) -> None:
    """The comparison: what it is, the table, the best at the finest level, why some mechanisms have no
    plan here, and a button that takes the chosen mechanism to the Plan step (``mech_key`` is the Plan
    step's persistent mechanism setting, :func:`ui.state.persistent`'s key)."""
    st.subheader(f"Each mechanism's expected error at {cost_label}")
    st.caption(f"± {unit_word} per count, for 19 of 20 counts (95 %), at every level; lower is better. From the "
               f"budget and the public areas only: no data is read, nothing is released or spent. {choices_note}")
    frame = table(candidates, label)
    st.dataframe(_marked(frame), hide_index=True, width="stretch")
    sentence = best_sentence(frame, unit_word)
    if sentence:
        st.markdown(sentence)
    for c in candidates:
        if c.plan is None:
            st.caption(f":gray[Not compared — **{c.title}**: {c.why}]")
    offered = [c for c in candidates if c.plan is not None]
    if not offered:
        return
    titles = {c.name: c.title for c in offered}
    ss = st.session_state
    current = ss.get(mech_key)
    pick = st.selectbox("Mechanism to plan with", list(titles), format_func=titles.get,
                        index=list(titles).index(current) if current in titles else 0, key="compare_plans_pick")
    if st.button("Use it on the Plan step", key="compare_plans_use", icon=":material/tune:"):
        state.use_on_plan_step(mech_key, pick)
