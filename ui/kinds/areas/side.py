"""Counts over areas: the sidebar's dataset, budget and current release (both kinds of table)."""

from __future__ import annotations

import streamlit as st

from ui import fmt, series, state
from ui import sidebar as sidebar_ui
from ui.kinds.areas import common


def sidebar() -> None:
    """Dataset, budget and current release of the table loaded (drawn inside st.sidebar)."""
    if common.which() == common.TABLE:
        _table()
        return
    m = common.model()
    st.markdown("#### Dataset")
    if m is None:
        st.caption("No table of counts over areas loaded yet: choose one on the Data step.")
        return
    h = m["h"]
    st.markdown(f"**{m['name']}**")
    st.caption(fmt.sizes_line(h.level_names[1:], h.sizes[1:]) + f" · {fmt.count(m['counts'].n_rows)} rows read")
    st.caption("These figures are about your confidential data: for you only, never exported.")
    st.markdown("#### Privacy budget")
    led = common.ledger(m["fp"])
    sidebar_ui.budget_panel(led, st.session_state.get("hier_delta", 1e-6),
                            population=state.population_of("areas", m["fp"]))
    series.sidebar_note("areas", m["fp"], led)
    st.markdown("#### Current release")
    entry = common.hier_entry()
    over_time = series.current_note("areas", m["fp"])
    if over_time:
        st.markdown(over_time)
    if entry is None:
        if not over_time:
            st.caption("Nothing released yet.")
    else:
        r = entry.release
        st.markdown(f"{r.mechanism.title}  \n{r.plan.cost.label()} · {common.released_areas(h)}")


def _table() -> None:
    table, fp = common.table()
    st.markdown("#### Dataset")
    if table is None:
        st.caption("No census table loaded yet: choose one on the Data step.")
        return
    s = table.structure
    st.markdown(f"**{st.session_state.get('census_name', 'census table')}**")
    st.caption(fmt.sizes_line(s.level_names[1:], [len(s.paths_at(d)) for d in range(1, len(s.level_names))])
               + (f" · attributes: {', '.join(s.ordinals)}" if s.ordinals else ""))
    st.caption("These figures are about your confidential data: for you only, never exported.")
    st.markdown("#### Privacy budget")
    sidebar_ui.budget_panel(common.ledger(fp), 1e-6, population=state.population_of("areas", fp))
    st.markdown("#### Current release")
    entry = common.table_entry()
    if entry is None:
        st.caption("Nothing released yet.")
    else:
        r = entry.release
        if st.session_state.get("census_mech") == "matrix":
            st.markdown(f"Matrix mechanism  \n{r.plan.cost.label()} · {fmt.count(len(r.tables))} tables")
        else:
            st.markdown(f"Privelet{'+' if r.plus_axes else ''}  \n{r.cost.label()} · "
                        f"{fmt.count(sum(len(t) for t in r.levels.values()))} areas at all levels")
