"""The expected-error table of a Plan step, drawn from the one core plan's rows for every kind.

Each row of :attr:`dpcore.core.mechanism.Plan.rows` (a :class:`~dpcore.core.mechanism.PlanRow`)
is one level of the release: its share of the budget, the number of counts, the noise scale and
the 95 % interval of one count.  Columns that only make sense for one kind (the error of range
queries over points, say) are read from :attr:`PlanRow.details` by the kind's ``extra`` columns.
The table is data-free: it is what the release will spend and add, before any data is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd
import streamlit as st

from dpcore.core.mechanism import Plan, PlanRow

#: a kind's own column: its label, how to read it from a row, and its column configuration
Extra = tuple[str, Callable[[PlanRow], Any], Any]


def frame(plan: Plan, extra: tuple[Extra, ...] = ()) -> pd.DataFrame:
    """The table of ``plan``'s rows: level, budget and share, counts, noise scale, ± per count (95 %),
    then the kind's ``extra`` columns.

    >>> from dpcore.core.mechanism import Plan, PlanRow
    >>> from dpcore.privacy.budget import pure
    >>> from dpcore.privacy.units import Unit
    >>> row = PlanRow(0, "Grid", pure(0.5), "discrete_laplace", 2.0, 1, 16, 2.8, 6.0, 2.0, None)
    >>> frame(Plan("points", "identity", {}, pure(0.5), Unit(), (row,))).iloc[0].to_dict()
    {'level': 'Grid', 'ε': 0.5, 'share of ε': 1.0, 'counts released': 16, 'noise scale': 2.0, '± per count (95%)': 6}
    """
    sym = plan.cost.symbol
    rows = []
    for r in plan.rows:
        value = r.cost.value if r.cost is not None else 0.0
        d: dict[str, Any] = {
            "level": r.name,
            sym: value,
            f"share of {sym}": value / plan.cost.value if plan.cost.value else 0.0,
            "counts released": int(r.n_counts),
            "noise scale": r.scale,
            "± per count (95%)": int(round(r.ci95)),
        }
        for label, read, _ in extra:
            d[label] = read(r)
        rows.append(d)
    return pd.DataFrame(rows)


def columns(plan: Plan, extra: tuple[Extra, ...] = (), *, unit_word: str = "points") -> dict[str, Any]:
    """Narrow number columns, so that the whole table fits the page without scrolling."""
    sym = plan.cost.symbol
    return {
        "level": st.column_config.TextColumn(width="medium"),
        sym: st.column_config.NumberColumn(format="%.2g", help="This level's share of the budget.", width="small"),
        f"share of {sym}": st.column_config.ProgressColumn(min_value=0.0, max_value=1.0, format="percent",
                                                           width="small"),
        "counts released": st.column_config.NumberColumn(format="localized", width="small"),
        "noise scale": st.column_config.NumberColumn(format="%.3g", width="small"),
        "± per count (95%)": st.column_config.NumberColumn(format="localized", width="small",
                                                            help=f"In {unit_word}, for 95 % of the counts."),
    } | {label: config for label, _, config in extra if config is not None}


def show(plan: Plan, extra: tuple[Extra, ...] = (), *, key: str | None = None, unit_word: str = "points") -> None:
    """Draw the expected-error table of ``plan`` (one row per level)."""
    st.dataframe(frame(plan, extra), hide_index=True, width="stretch", key=key,
                 column_config=columns(plan, extra, unit_word=unit_word))


def details(plan: Plan, name: str) -> Mapping[str, Any] | None:
    """The first row's ``details[name]`` (a kind's fact about the whole plan, e.g. a matrix strategy)."""
    for r in plan.rows:
        if name in r.details:
            return r.details[name]
    return None
