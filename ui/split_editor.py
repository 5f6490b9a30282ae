"""The custom split of a budget over levels as a small editable table (shared/UX.md: "the split over
levels or phases as a small editable table"), for areas and trips.

The weights stay one comma-separated text under the kind's persistent key (``hier_weights_N``,
``od_weights_N``: what the target planner's "Use this budget" writes through :func:`store` and the
kinds' ``selection`` reads through :func:`parse`).  The table shows them beside the levels' names and
writes an edit back to that key.  Every writer writes ``N`` numbers under ``..._N``: the text always parses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import streamlit as st

LEVEL, WEIGHT = "level", "weight"


def parse(text: str, n: int) -> list[float]:
    """The ``n`` weights of a comma-separated ``text``, or ``n`` ones when it does not hold ``n`` numbers.

    >>> parse("1, 2,4", 3), parse("1,x", 2), parse("1,2", 3)
    ([1.0, 2.0, 4.0], [1.0, 1.0], [1.0, 1.0, 1.0])
    """
    try:
        out = [float(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        return [1.0] * n
    return out if len(out) == n else [1.0] * n


def text_of(weights: Sequence[float]) -> str:
    """The comma-separated text the Plan step stores.

    >>> text_of([1.0, 2.5, 4.0])
    '1,2.5,4'
    """
    return ",".join(f"{float(w):.6g}" for w in weights)


def store(key: str, weights: Sequence[float]) -> None:
    """Set the weights under ``key`` from outside the table (the target planner's "Use this budget"): their
    text, under ``key`` and its widget key (as :func:`ui.state.persistent` keeps them)."""
    st.session_state[key] = st.session_state[f"_w_{key}"] = text_of(weights)


def after_edit(text: str, n: int, edited: Sequence[float]) -> tuple[str, bool]:
    """The stored text after the table, drawn from the stored ``text`` (``n`` weights), returned the
    weight column ``edited``; and whether to draw the page again (an edit: the shares and the plan follow
    it; a stored text that did not fit these levels is only replaced by the ones shown).

    >>> after_edit("1,1,2,4", 4, [1.0, 1.0, 2.0, 4.0])       # no edit
    ('1,1,2,4', False)
    >>> after_edit("1,1,2,4", 4, [1.0, 3.0, 2.0, 4.0])       # an edit
    ('1,3,2,4', True)
    >>> after_edit("1,2", 4, [1.0, 1.0, 1.0, 1.0])           # did not fit: the even weights shown
    ('1,1,1,1', False)
    >>> after_edit("1,1", 2, [float("nan"), 2.5])            # a cleared cell is a weight of 0
    ('0,2.5', True)
    """
    new = text_of([0.0 if pd.isna(w) else w for w in edited])
    return new, new != text_of(parse(text, n))


def editor(container: Any, levels: Sequence[str], key: str, *, noun: str = "level") -> None:
    """The weights under ``key`` (one per name in ``levels``, top first) as a table whose weight column
    the curator edits; an edit is written back to ``key`` (and to its widget key, as
    :func:`ui.state.persistent` keeps them).  Shares are relative: only their ratios matter."""
    ss = st.session_state
    n = len(levels)
    text = ss.get(key, text_of([1.0] * n))
    weights = parse(text, n)
    frame = pd.DataFrame({LEVEL: list(levels), WEIGHT: weights})
    frame["share"] = frame[WEIGHT] / frame[WEIGHT].sum() if sum(weights) > 0 else 0.0
    # A stable key: the grid keeps its focus and a second quick edit (a key that followed the text
    # remounted it at every edit, losing the next one).  A text set from outside (the target planner's
    # "Use this budget") differs from the one the table last saw: a new generation remounts it, so the
    # edits it holds do not cover the new weights.
    seen, gen = f"_split_seen_{key}", f"_split_gen_{key}"
    if ss.get(seen, text) != text:
        ss[gen] = ss.get(gen, 0) + 1
    ss[seen] = text
    edited = container.data_editor(
        frame, key=f"_split_{key}_{ss.get(gen, 0)}", hide_index=True, disabled=[LEVEL, "share"], width="stretch",
        column_config={
            LEVEL: st.column_config.TextColumn(noun),
            WEIGHT: st.column_config.NumberColumn(min_value=0.0, step=0.5, format="%.3g",
                                                  help=f"Relative weight of each {noun}: only the ratios matter."),
            "share": st.column_config.ProgressColumn("share of the budget", min_value=0.0, max_value=1.0,
                                                     format="percent")})
    new, rerun = after_edit(text, n, list(edited[WEIGHT]))
    if new != text:  # an edit, or a stored text that did not fit these levels (then the ones shown)
        ss[key] = ss[f"_w_{key}"] = ss[seen] = new
        if rerun:
            st.rerun()
