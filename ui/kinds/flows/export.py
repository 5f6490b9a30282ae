"""Trips between areas, Export step: release.csv, flows.geojson and release.json, with previews."""

from __future__ import annotations

import io as _io
from typing import Any

import numpy as np
import orjson
import pandas as pd
import streamlit as st

from dpcore.flows import export as od_export
from dpcore.flows import mechanisms as od
from ui import fmt
from ui.kinds.flows.common import missing, shown_entry
from ui.kinds.flows.sources import need_model


def export_step() -> None:
    """The Export step for trips between areas (the page script is pages/export.py)."""
    m = need_model()
    if m is None:
        return
    ss = st.session_state
    entry = shown_entry(m)
    if entry is None:
        missing("Nothing has been released from these trips yet.", "release", "Go to the Release step")
        return
    rel: od.ODRelease = entry.release
    st.caption(f"{rel.mechanism.title}, {entry.cost_label} · released {rel.created.replace('+00:00', '')} UTC")
    ex = entry.exports
    xy = entry.model["xy"]
    if "json" not in ex:
        # built into a local dict and stored in one step: a rerun (a click) that interrupts the
        # build leaves nothing half-made for the next run to trip over
        built: dict[str, Any] = {"csv": od_export.release_csv_bytes(rel)}
        files = ["release.csv", "release.json"]
        if xy:
            files.insert(1, "flows.geojson")
            n_lines = 0
            for lp_ in rel.plan.levels[1:]:
                if lp_.origin_depth in xy and lp_.destination_depth in xy:
                    t_ = lp_.level
                    ok = (np.isfinite(xy[lp_.origin_depth][0][rel.origins[t_]])
                          & np.isfinite(xy[lp_.destination_depth][0][rel.destinations[t_]]))
                    n_lines += int(ok.sum())
            built["geojson_n"] = n_lines
        extra = {"budget_input": entry.approx} if entry.approx else None
        built["json"] = od_export.od_json(rel, ss["od_ledgers"][entry.fp], delta=entry.delta, extra=extra,
                                          files=files)
        ex.update(built)

    def geojson_bytes(rel: od.ODRelease = rel, ex: dict[str, Any] = ex, xy: dict[int, Any] = xy) -> bytes:
        """Built on the first click only (a second or more for 10⁵ flows), then kept with the release."""
        if "geojson" not in ex:
            ex["geojson"] = orjson.dumps(od_export.flows_geojson(rel, xy))
        return ex["geojson"]

    c1, c2, c3 = st.columns(3)
    c1.download_button("Download release.csv", ex["csv"], "release.csv", "text/csv", on_click="ignore",
                       key="od_dl_csv", type="primary")
    c2.download_button("Download release.json", ex["json"], "release.json", "application/json",
                       on_click="ignore", key="od_dl_json", type="primary")
    if "geojson_n" in ex:
        c3.download_button("Download flows.geojson", geojson_bytes, "flows.geojson", "application/geo+json",
                           on_click="ignore", key="od_dl_geojson")
    else:
        c3.caption("No flows.geojson: the areas have no positions (see the Data step).")
    st.markdown("**release.csv** (first rows): every released flow of every level; flows released as 0 are "
                "not listed.")
    st.dataframe(pd.read_csv(_io.BytesIO(ex["csv"]), dtype=str, nrows=12), hide_index=True,
                 key="od_csv_preview", width="stretch")
    if "geojson_n" in ex:
        st.caption(f"flows.geojson: {fmt.count(ex['geojson_n'])} flow lines, one per released flow of every level "
                   "with positions at both ends (origin centre → destination centre), with the CSV's columns as "
                   "properties.")
    with st.expander("Release record (release.json)"):
        st.json(ex["json"].decode("utf-8"), expanded=1)
    st.caption("Nothing in these files comes from your data unnoised, except the total number of trips when "
               "the plan makes it public (bounded neighbours, one trip per person). No file name is written.")
