"""Trips between areas, Export step: release.csv, flows.geojson and release.json, with previews."""

from __future__ import annotations

import io as _io
from typing import Any

import pandas as pd
import streamlit as st

from dpcore.core import spec
from dpcore.flows import export as od_export
from dpcore.flows.flow_lines import feature_count
from dpcore.flows.mechanisms.common import ODRelease
from ui import data_user_downloads, fmt, series
from ui.kinds.flows.common import missing, shown_entry
from ui.kinds.flows.sources import need_model


def export_step() -> None:
    """The Export step for trips between areas (the page script is pages/export.py)."""
    m = need_model()
    if m is None:
        return
    if series.active("flows") is not None and series.export_step("flows", m["fp"]):
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
    data_user_downloads.offer(files, "od")
    st.markdown("**release.csv** (first rows): every released flow of every level; flows released as 0 are "
                "not listed.")
    st.dataframe(csv_preview(files["release.csv"]), hide_index=True, key="od_csv_preview", width="stretch")
    why = od_export.no_interval_note(rel)
    if why is not None:
        st.caption(f"ci95_low and ci95_high are kept as columns (pipelines read them) but left empty (—). {why}")
    if "flows.geojson" in files:
        n_lines = feature_count(files["flows.geojson"])
        st.caption(f"flows.geojson: {fmt.count(n_lines)} flow lines, one per released flow of every level "
                   "with positions at both ends (origin centre → destination centre), with the CSV's columns as "
                   "properties.")
    with st.expander("Release record (release.json)"):
        st.json(files["release.json"].decode("utf-8"), expanded=1)
    if entry.config:
        with st.expander("Repeat this release in a pipeline (config file)"):
            st.download_button("Download release.toml", entry.config, "release.toml", "application/toml",
                               on_click="ignore", key="od_dl_config")
            st.code(entry.config, language="toml")
            st.caption("The command line makes the same release from the same trips (new noise), spending from "
                       "this app's budget database on this computer (DPCORE_LEDGER_DB), keyed as the app keys "
                       "the trips.")
    st.caption("Nothing in these files comes from your data unnoised, except the total number of trips when "
               "the plan makes it public (replace neighbours, one trip per person). No file name is written.")


def csv_preview(data: bytes, rows: int = 12) -> pd.DataFrame:
    """The first ``rows`` rows of ``release.csv`` as the file has them (text), an empty cell shown as
    "—" (not "None").

    >>> csv_preview(b"level,noisy_count,ci95_low\\nzone,7,\\n").values.tolist()
    [['zone', '7', '—']]
    """
    frame = pd.read_csv(_io.BytesIO(data), dtype=str, nrows=rows, keep_default_na=False, na_filter=False)
    return frame.replace("", "—")


def release_config(sel: Any) -> str | None:
    """release.toml of the trips release planned as ``sel`` (a :class:`ui.kinds.flows.plan.Selection`):
    ``python -m dpcore run`` repeats it on the same budget; None without a plan."""
    core, c = sel.core, sel.model.get("config")
    if core is None or c is None:
        return None
    notes = []
    if c["upload"]:
        trips, areas = c["trips_file"] or "trips.csv", c["areas_file"] or "areas.csv"
        notes.append("[input] path and [domain] hierarchy are the uploaded files' names: put the files next to "
                     "this config or give their paths.")
    else:
        trips, areas = "trips.csv", "areas.csv"
        notes.append("[input] path and [domain] hierarchy name the page's built-in data set, which is not a file "
                     "here: give your trips' and area list's paths.")
    cols = c["cols"]
    if c["shape"] == "prefix":
        code_col, lens_txt, _names = c["prefix"]
        shape: dict[str, Any] = {"code_column": code_col,
                                 "prefix_lengths": [int(x) for x in str(lens_txt).split(",") if x.strip()]}
    else:
        shape = {"levels": list(c["levels"])}
    p = core.params
    cfg = spec.od_config(
        input_path=trips, hierarchy_path=areas, **shape, origin=cols["origin"], destination=cols["destination"],
        count=cols.get("count"), user=cols.get("user"), max_trips=c["m"], repeats=not c["distinct"],
        mechanism=core.mechanism, definition=sel.cost.definition, value=sel.cost.value,
        delta=sel.delta if sel.cost.definition == "zcdp" else None, neighbour=sel.opts["neighbour"],
        orientation=p.get("orientation", "destination"), split=sel.split, weights=sel.weights,
        order=p.get("order", "ascending"), engine=c["engine"])
    header = ("dpcore release config, written by the app (trips between areas).\n"
              "Run: python -m dpcore run release.toml (paths are relative to this file).\n"
              + "".join(n + "\n" for n in notes)
              + "It names your input files and columns: keep it with your data, do not publish it.")
    return cfg.to_toml(header=header)
