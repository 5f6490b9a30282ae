"""Map: the released partition on a map that draws offline."""

from __future__ import annotations

import streamlit as st

from dpcore import viz
from ui import fmt, state

st.title("Map")
st.markdown(
    "The released counts on the map: colour is noisy density, hover shows each area's noisy "
    "count and its 95% interval. Everything here is publishable. Next step: check the errors."
)

cur = state.current_release()
if cur is None:
    st.info("Nothing has been released for this dataset yet.")
    st.page_link("app_pages/mechanism.py", label="Go to Mechanism & budget to make a release", icon=":material/tune:")
    st.stop()

rel = cur.release
basemap = st.toggle("Web basemap (needs the internet)", key=state.persistent("basemap", False),
                    help="Off by default: the map draws offline on a white background.")
state.store("basemap")
key = ("map", rel.release_id, basemap, id(st.session_state.get("boundaries")))
if cur.exports.get("map_key") != key:
    fig, info = viz.partition_figure(rel, boundaries=st.session_state.get("boundaries"), basemap=basemap)
    cur.exports["map_fig"], cur.exports["map_info"], cur.exports["map_key"] = fig, info, key
fig, info = cur.exports["map_fig"], cur.exports["map_info"]
st.plotly_chart(fig, width="stretch", key="release_map")
cap = (f"{rel.mechanism_title}, {rel.cost.label()}: {fmt.count(info['n_leaves'])} released areas")
if info["aggregated"]:
    cap += (f", drawn as {fmt.count(info['n_polygons'])} blocks (sums of the released counts) "
            "so the map stays fast; the export holds every area")
st.caption(cap + ". Negative noisy counts are drawn as 0; the export keeps them.")
st.page_link("app_pages/errors.py", label="Next: errors →", icon=":material/straighten:")
