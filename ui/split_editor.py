"""The custom split of a budget over levels as a small editable table (shared/UX.md: "the split over
levels or phases as a small editable table"), for areas and trips.

The Plan step's reading of the weights is unchanged: they stay one comma-separated text under the
kind's persistent key (``hier_weights_N``, ``od_weights_N``: what the target planner's "Use this
budget" writes and :func:`ui.kinds.areas.plan.selection` parses).  The table shows them beside the
levels' names and writes an edit back to that key.
"""

from __future__ import annotations

import hashlib
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
    # the editor's key follows the stored text, so a value set elsewhere (the target planner) shows at once
    tag = hashlib.sha256(f"{key}:{text}".encode()).hexdigest()[:12]
    edited = container.data_editor(
        frame, key=f"_split_{key}_{tag}", hide_index=True, disabled=[LEVEL, "share"], width="stretch",
        column_config={
            LEVEL: st.column_config.TextColumn(noun),
            WEIGHT: st.column_config.NumberColumn(min_value=0.0, step=0.5, format="%.3g",
                                                  help=f"Relative weight of each {noun}: only the ratios matter."),
            "share": st.column_config.ProgressColumn("share of the budget", min_value=0.0, max_value=1.0,
                                                     format="percent")})
    new = text_of([0.0 if pd.isna(w) else w for w in edited[WEIGHT]])
    if new != text:  # an edit, or a stored text that did not fit these levels (then the ones shown)
        ss[key] = ss[f"_w_{key}"] = new
        if new != text_of(weights):  # an edit: draw the shares and the plan from it
            st.rerun()
