"""The expected-error table of a Plan step, drawn from the one core plan's rows for every kind.

Each row of :attr:`dpcore.core.mechanism.Plan.rows` (a :class:`~dpcore.core.mechanism.PlanRow`)
is one level of the release: its share of the budget, the number of counts, the noise scale and
the 95 % interval of one count (:func:`budget_columns`).  Columns that only make sense for one kind
(the error of range queries over points, the areas of a level) are read from
:attr:`PlanRow.details` by the kind's own columns.
The table is data-free: it is what the release will spend and add, before any data is used.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd
import streamlit as st

from dpcore.core.mechanism import Plan, PlanRow

#: a column: its label, how to read it from a row, and its column configuration (or None)
Column = tuple[str, Callable[[PlanRow], Any], Any]


def frame(plan: Plan, columns: tuple[Column, ...]) -> pd.DataFrame:
    """The table of ``plan``'s rows, one column per ``columns`` entry.

    >>> from dpcore.core.mechanism import Plan, PlanRow
    >>> from dpcore.privacy.budget import pure
    >>> from dpcore.privacy.units import Unit
    >>> row = PlanRow(0, "Grid", pure(0.5), "discrete_laplace", 2.0, 1, 16, 2.8, 6.0, 2.0, None)
    >>> p = Plan("points", "identity", {}, pure(0.5), Unit(), (row,))
    >>> frame(p, budget_columns(p)).iloc[0].to_dict()
    {'level': 'Grid', 'ε': 0.5, 'share of ε': 1.0, 'counts released': 16, 'noise scale': 2.0, '± per count (95%)': 6}
    """
    return pd.DataFrame([{label: read(r) for label, read, _ in columns} for r in plan.rows],
                        columns=[label for label, _, _ in columns])


def budget_columns(plan: Plan, *, unit_word: str = "points") -> tuple[Column, ...]:
    """Level, its budget and share of the release's, counts, noise scale and ± per count (95 %); narrow
    number columns, so that the whole table fits the page without scrolling."""
    sym, total = plan.cost.symbol, plan.cost.value

    def value(r: PlanRow) -> float:
        return r.cost.value if r.cost is not None else 0.0

    return (
        ("level", lambda r: r.name, st.column_config.TextColumn(width="medium")),
        (sym, value, st.column_config.NumberColumn(format="%.2g", help="This level's share of the budget.",
                                                   width="small")),
        (f"share of {sym}", lambda r: value(r) / total if total else 0.0,
         st.column_config.ProgressColumn(min_value=0.0, max_value=1.0, format="percent", width="small")),
        ("counts released", lambda r: int(r.n_counts), st.column_config.NumberColumn(format="localized",
                                                                                     width="small")),
        ("noise scale", lambda r: r.scale, st.column_config.NumberColumn(format="%.3g", width="small")),
        ("± per count (95%)", lambda r: int(round(r.ci95)),
         st.column_config.NumberColumn(format="localized", width="small",
                                       help=f"In {unit_word}, for 95 % of the counts.")),
    )


def plain_first(columns: tuple[Column, ...], first: tuple[str, ...]) -> tuple[Column, ...]:
    """``columns`` with those labelled ``first`` moved to the front, in that order, the others after them
    in their own order: the columns a curator reads (the error in people) show without scrolling
    sideways, the budget and noise columns after them (none is dropped).

    >>> cols = tuple((label, None, None) for label in ("level", "ε", "noise scale", "± per count (95%)"))
    >>> [c[0] for c in plain_first(cols, ("level", "± per count (95%)"))]
    ['level', '± per count (95%)', 'ε', 'noise scale']
    """
    by_label = {c[0]: c for c in columns}
    front = [by_label[label] for label in first if label in by_label]
    return (*front, *(c for c in columns if c[0] not in first))


#: the pixel widths of Streamlit's named column widths, and the width of a header's character (px)
_NAMED_WIDTHS = {"small": 75, "medium": 200, "large": 400}
_HEADER_CHAR_PX, _HEADER_PAD_PX = 7.5, 30


def header_width(label: str) -> int:
    """The width (px) a column needs to show its header ``label`` whole (no cut header, issue 26
    item 10); a help icon is part of the padding.

    >>> header_width("± per count (95%)")
    158
    """
    return int(round(len(label) * _HEADER_CHAR_PX + _HEADER_PAD_PX))


def fit_headers(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` (label -> column configuration) with every column at least as wide as its header:
    a named width ("small" …) narrower than the header becomes the header's width in pixels.

    >>> fit_headers({"noise scale": st.column_config.NumberColumn(width="small")})["noise scale"]["width"]
    112
    """
    out = {}
    for label, c in config.items():
        if isinstance(c, dict):
            w = c.get("width")
            px = _NAMED_WIDTHS.get(w, w) if isinstance(w, str) else w
            if isinstance(px, int | float) and px < header_width(label):
                c = {**c, "width": header_width(label)}
        out[label] = c
    return out


#: the widest a text column is made to show its cells whole (Streamlit's "large"); longer cells wrap
MAX_TEXT_PX = _NAMED_WIDTHS["large"]
#: one wrapped line of a cell and a row's padding (px), and the row height past which Streamlit's
#: table wraps text (4rem, px)
_LINE_PX, _ROW_PAD_PX, _WRAP_FROM_PX = 20, 12, 64


def fit_cells(table: pd.DataFrame, config: Mapping[str, Any]) -> tuple[dict[str, Any], int | None]:
    """``config`` with every text column wide enough for its longest cell (no cut cell text, issue 26
    item 10), up to :data:`MAX_TEXT_PX`; a cell longer than that wraps: the row height returned (else
    None) holds its lines, and is past the 4rem from which Streamlit's table wraps text.

    Cells are measured as :func:`header_width` measures a header.  Only columns of text (a configured
    column that does not hold numbers) are widened; numbers keep their configured width.

    >>> t = pd.DataFrame({"level": ["Leaf counts (about 6,598 leaves if evenly spread)", "Depth 0"]})
    >>> cfg, height = fit_cells(t, {"level": st.column_config.TextColumn(width="medium")})
    >>> cfg["level"]["width"], height
    (398, None)
    >>> cfg, height = fit_cells(pd.DataFrame({"level": ["x" * 120]}), {"level": {"width": "medium"}})
    >>> cfg["level"]["width"], height
    (400, 72)
    """
    out, lines = dict(config), 1
    for label, c in config.items():
        if not isinstance(c, dict) or label not in table.columns or pd.api.types.is_numeric_dtype(table[label]):
            continue
        cells = [str(v) for v in table[label] if v is not None]
        need = max([header_width(v) for v in cells] + [0])
        w = c.get("width")
        px = _NAMED_WIDTHS.get(w, w) if isinstance(w, str) else w
        if isinstance(px, int | float) and px >= need:
            continue
        out[label] = {**c, "width": min(need, MAX_TEXT_PX)}
        if need > MAX_TEXT_PX:
            lines = max(lines, math.ceil((need - _HEADER_PAD_PX) / (MAX_TEXT_PX - _HEADER_PAD_PX)))
    return out, (max(lines * _LINE_PX + _ROW_PAD_PX, _WRAP_FROM_PX + 1) if lines > 1 else None)


def show(plan: Plan, columns: tuple[Column, ...], *, key: str | None = None, **options: Any) -> None:
    """Draw the expected-error table of ``plan`` (one row per level), every header whole
    (:func:`fit_headers`) and every text cell whole (:func:`fit_cells`); ``options`` go to ``st.dataframe``."""
    table = frame(plan, columns)
    config, row_height = fit_cells(table, fit_headers({label: c for label, _, c in columns if c is not None}))
    if row_height is not None:
        options.setdefault("row_height", row_height)
    st.dataframe(table, hide_index=True, key=key, column_config=config or None, **options)


def details(plan: Plan, name: str) -> Mapping[str, Any] | None:
    """The first row's ``details[name]`` (a kind's fact about the whole plan, e.g. a matrix strategy)."""
    for r in plan.rows:
        if name in r.details:
            return r.details[name]
    return None
