"""Plan: the plan step of the path, the same for every kind of data (the kind's adapter draws it)."""

from __future__ import annotations

import streamlit as st

from ui import confirm, frame, kinds

frame.ensure()
st.session_state[confirm.PLAN_SEEN] = True  # the Release step then says "as planned" (ui.confirm.planned)
frame.heading("Plan", "Choose a mechanism and how much privacy budget to spend, and see the error to expect. This uses no data and spends nothing. Next: release.")
kinds.adapter().plan_step()
