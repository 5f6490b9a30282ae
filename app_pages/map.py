"""Map: the released partition on a map that draws offline; trees can be browsed by depth."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from dpcore.points import viz
from ui import fmt, state

st.title("Map")
st.markdown(
    "The released counts on the map: colour is the noisy count per cell or per km², hover shows a noisy "
    "count and its 95% interval. Everything here is publishable. "
    "Next step: check the errors."
)

cur = state.current_release()
if cur is None:
    st.info("Nothing has been released for this dataset yet.")
    st.page_link("app_pages/mechanism.py", label="Go to Mechanism & budget to make a release",
                 icon=":material/tune:")
    st.stop()

rel = cur.release
c1, c2 = st.columns([3, 1])
with c1:
    basemap = st.toggle("Web basemap (needs the internet)", key=state.persistent("basemap", False),
                        help="Off by default: the map draws offline on a white background.")
    state.store("basemap")
depth = None
if rel.is_tree:
    height = int(rel.level.max())
    depth = st.slider(
        "Tree depth shown", min_value=0, max_value=height,
        key=state.seed(f"_w_depth_{rel.release_id}", height),
        help="The partition at this depth of the tree: its nodes there plus the leaves that stopped "
             "above it. The deepest level shows the released leaves.",
    ) if height > 0 else 0

key = ("map", rel.release_id, basemap, depth, id(st.session_state.get("boundaries")))
if cur.exports.get("map_key") != key:
    fig, info = viz.release_map_figure(rel, boundaries=st.session_state.get("boundaries"),
                                       basemap=basemap, depth=depth)
    cur.exports["map_fig"], cur.exports["map_info"], cur.exports["map_key"] = fig, info, key
fig, info = cur.exports["map_fig"], cur.exports["map_info"]

if rel.is_tree:
    left, right = st.columns([3, 1])
else:
    left, right = st.container(), None
with left:
    st.plotly_chart(fig, width="stretch", key="release_map")
    shown = "released areas" if depth is None else f"areas at depth {depth}"
    cap = f"{rel.mechanism_title}, {rel.cost.label()}: {fmt.count(info['n_shown'])} {shown}"
    if info["kind"] == "image":
        cap += (f", drawn at full resolution: one pixel per grid cell ({fmt.count(rel.grid.rows)} × "
                f"{fmt.count(rel.grid.cols)}); zoom in to see single cells. Hover shows "
                + ("block sums with their 95% interval" if info["hover_aggregated"] else
                   "each released count with its 95% interval"))
    elif info["aggregated"]:
        cap += (f", drawn as {fmt.count(info['n_polygons'])} blocks (sums of the released counts) "
                "so the map stays fast; the export holds every area")
    st.caption(cap + ". Negative noisy counts are drawn as 0; the export keeps them.")
if right is not None:
    with right:
        st.markdown("**Tree statistics**")
        depths = rel.level
        leaves_per = np.bincount(depths[rel.leaf], minlength=int(depths.max()) + 1)
        nodes_per = np.bincount(depths, minlength=int(depths.max()) + 1)
        st.metric("Height", int(depths.max()))
        st.metric("Leaves", fmt.count(int(rel.leaf.sum())))
        budgets = rel.budgets()
        per_depth = pd.DataFrame({
            "depth": np.arange(len(nodes_per)),
            "nodes": nodes_per,
            "leaves": leaves_per,
            f"{rel.cost.symbol} per count": [
                float(np.nanmedian(budgets[depths == d])) if nodes_per[d] else np.nan
                for d in range(len(nodes_per))
            ],
        })
        st.dataframe(per_depth, hide_index=True, width="stretch",
                     column_config={f"{rel.cost.symbol} per count":
                                    st.column_config.NumberColumn(format="%.3g",
                                                                  help="median over the nodes of that depth")})
        phases = [lv for lv in rel.levels if not lv.in_partition and "depth" not in lv.extra]
        if phases:
            st.caption("Budget of the other phases: "
                       + "; ".join(f"{lv.name}: {lv.cost.label()}" for lv in phases))
st.page_link("app_pages/errors.py", label="Next: errors →", icon=":material/straighten:")
