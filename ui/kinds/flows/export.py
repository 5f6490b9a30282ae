"""Trips between areas, Export step: release.csv, flows.geojson and release.json, with previews."""

from __future__ import annotations

import io as _io

import orjson
import pandas as pd
import streamlit as st

from dpcore.flows.mechanisms.common import ODRelease
from ui import fmt
from ui.kinds.flows.common import missing, shown_entry
from ui.kinds.flows.sources import need_model


def export_step() -> None:
    """The Export step for trips between areas (the page script is pages/export.py)."""
    m = need_model()
    if m is None:
        return
    entry = shown_entry(m)
    if entry is None:
        missing("Nothing has been released from these trips yet.", "release", "Go to the Release step")
        return
    rel: ODRelease = entry.release
    st.caption(f"{rel.mechanism.title}, {entry.cost_label} · released {rel.created.replace('+00:00', '')} UTC")
    files = entry.files  # made once, with the release (the bytes stored in the history)
    c1, c2, c3 = st.columns(3)
    c1.download_button("Download release.csv", files["release.csv"], "release.csv", "text/csv", on_click="ignore",
                       key="od_dl_csv", type="primary")
    c2.download_button("Download release.json", files["release.json"], "release.json", "application/json",
                       on_click="ignore", key="od_dl_json", type="primary")
    if "flows.geojson" in files:
        c3.download_button("Download flows.geojson", files["flows.geojson"], "flows.geojson",
                           "application/geo+json", on_click="ignore", key="od_dl_geojson")
    else:
        c3.caption("No flows.geojson: the areas have no positions (see the Data step).")
    st.markdown("**release.csv** (first rows): every released flow of every level; flows released as 0 are "
                "not listed.")
    st.dataframe(pd.read_csv(_io.BytesIO(files["release.csv"]), dtype=str, nrows=12), hide_index=True,
                 key="od_csv_preview", width="stretch")
    if "flows.geojson" in files:
        n_lines = len(orjson.loads(files["flows.geojson"])["features"])
        st.caption(f"flows.geojson: {fmt.count(n_lines)} flow lines, one per released flow of every level "
                   "with positions at both ends (origin centre → destination centre), with the CSV's columns as "
                   "properties.")
    with st.expander("Release record (release.json)"):
        st.json(files["release.json"].decode("utf-8"), expanded=1)
    st.caption("Nothing in these files comes from your data unnoised, except the total number of trips when "
               "the plan makes it public (replace neighbours, one trip per person). No file name is written.")
