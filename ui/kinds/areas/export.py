"""Counts over areas, Export step: the files of the release, their previews, the record and the config."""

from __future__ import annotations

import io
import json
from typing import Any

import pandas as pd
import streamlit as st

from dpcore.core import spec as config
from dpcore.core.mechanism import Plan
from dpcore.data import engines
from ui import data_user_downloads, fmt, frame, series
from ui.data_user_downloads import served
from ui.kinds.areas import common
from ui.kinds.areas.common import US_TRACTS
from ui.kinds.areas.data_table import PER_PERSON

ss = st.session_state


def export_step() -> None:
    """The Export step for counts over areas (the page script is pages/export.py)."""
    if common.which() == common.TABLE:
        _table_export()
        return
    m = common.model()
    if m is not None and series.active("areas") is not None and series.export_step("areas", m["fp"]):
        return
    entry = common.hier_entry()
    if m is None or entry is None:
        frame.missing("Nothing has been released from this data yet.", "release", "Go to the Release step")
    rel = entry.release
    led = common.ledger(m["fp"])
    files = entry.files  # made once, with the release (the bytes stored in the history)
    c1, c2 = st.columns(2)
    c1.download_button("Download release.csv", served(files["release.csv"]), "release.csv", "text/csv", on_click="ignore",
                       key="hier_dl_csv", type="primary")
    c2.download_button("Download release.json", served(files["release.json"]), "release.json", "application/json",
                       on_click="ignore", key="hier_dl_json", type="primary")
    if "area_queries.csv" in files:
        sets = files["area_queries.csv"]
        st.download_button("Download area_queries.csv", sets, "area_queries.csv", "text/csv",
                           on_click="ignore", key="hier_dl_sets", type="primary")
        st.markdown("**area_queries.csv**: your area-code sets, their noisy totals and standard errors")
        st.dataframe(pd.read_csv(io.BytesIO(sets), nrows=50), hide_index=True, key="hier_sets_preview")
    for name, data in files.items():
        if name.endswith(".geojson"):
            st.download_button(f"Download {name}", served(data), name, "application/geo+json",
                               on_click="ignore", key=f"hier_dl_geo_{name}")
    data_user_downloads.offer(files, "hier")

    st.subheader("The release record")
    st.markdown(f"- **Mechanism:** {rel.mechanism.title}\n"
                f"- **Privacy:** {rel.plan.cost.label()}; unit of privacy: {common.unit_words(entry.plan.unit)}\n"
                f"- **Released:** {common.released_areas(rel.hierarchy)}, {rel.created}\n"
                f"- **Budget of this dataset:** {led.cap.symbol} = {fmt.eps(led.spent)} spent of "
                f"{fmt.eps(led.cap.value)}")
    st.markdown("**release.csv** (first rows)")
    preview = pd.read_csv(io.BytesIO(files["release.csv"]), dtype=str, nrows=12, keep_default_na=False,
                          na_filter=False)
    st.dataframe(preview.replace("", "—"), hide_index=True, key="hier_csv_preview")  # an empty cell as —
    why = json.loads(files["release.json"]).get("outputs", {}).get("intervals", "")  # the file's own words
    if why.startswith("Empty for this release"):  # (area_export.no_interval_note when it was made)
        st.caption(f"ci95_low and ci95_high are kept as columns (pipelines read them) but left empty (—). {why}")
    with st.expander("Release record (release.json)"):
        st.json(files["release.json"].decode("utf-8"), expanded=1)
    if entry.config:
        _config_expander(entry.config, "hier_dl_config", "table")
    if not rel.mechanism.consistent or not rel.mechanism.nonnegative:
        st.info(f"{rel.mechanism.title}: " + ("levels do not add up; " if not rel.mechanism.consistent else "")
                + ("some counts may be negative or fractional." if not rel.mechanism.nonnegative else ""))


def release_config(inputs: dict[str, Any], sel: Any) -> str:
    """release.toml of a release made here: ``python -m dpcore run`` repeats it on the same budget."""
    notes = []
    if inputs["id"] == "us":
        path = str(US_TRACTS.resolve())
    elif inputs["id"] == "demo":
        path = "demo.csv"
        notes.append("[input] path names the page's made-up demo table, which is not a file: give your table's path.")
    else:
        path = ss.get("hier_upload_name", "table.csv")
        notes.append("[input] path is the uploaded file's name: put the file next to this config or give its path.")
    areas = ss.get("hier_areas_name") if inputs["area_source"] == "upload" else None
    if areas:
        notes.append("[input] areas is the uploaded area list's name: put it next to this config.")
    opts = sel.opts
    sets = ss.get("hier_sets_name") if opts.get("area_sets") is not None else None
    if sets:
        notes.append("[mechanism] area_sets is the uploaded query file's name: put it next to this config.")
    count = [c for c in inputs["count"] if c != engines.COUNT_COLUMN]
    cost = sel.cost
    cfg = config.hierarchy_config(
        input_path=path, levels=list(inputs["levels"]), count=count, group=inputs.get("group"), areas_path=areas,
        lists_all_areas=inputs["area_source"] == "table", mechanism=sel.mech, definition=cost.definition,
        value=cost.value, delta=sel.delta if cost.definition == "zcdp" else None, split=opts["split"],
        weights=opts["weights"], neighbour=opts["neighbour"], order=opts["order"], sets_path=sets,
        sets_weight=opts.get("sets_weight"), engine="duckdb" if inputs.get("src") is not None else "auto")
    header = ("dpcore release config, written by the app (counts over areas).\n"
              "Run: python -m dpcore run release.toml (paths are relative to this file).\n"
              + "".join(n + "\n" for n in notes)
              + "It names your input files and columns: keep it with your data, do not publish it.")
    return cfg.to_toml(header=header)


def table_config(table: Any, core: Plan) -> str:
    """release.toml of a census-table release (Privelet or the marginal tables) planned here as ``core``:
    ``python -m dpcore run`` repeats it on the same budget."""
    notes = []
    if ss.get("census_source", "synthetic") == "synthetic":
        path = "synthetic_census.csv"
        notes.append("[input] path names the page's made-up synthetic census, which is not a file: give your "
                     "table's path.")
    else:
        path = ss.get("census_upload_name") or "table.csv"
        notes.append("[input] path is the uploaded file's name: put the file next to this config or give its path.")
    areas = ss.get("census_areas_name")
    if areas:
        notes.append("[input] areas is the uploaded area list's name: put it next to this config.")
    levels, count, ordinals = ss.get("census_columns_kept", (list(table.structure.level_names[1:]), None, []))
    s = table.structure
    orders = {str(o): [str(v) for v in b] for o, b in zip(s.ordinals, s.bins, strict=True)}
    params = core.params
    cfg = config.census_config(
        input_path=path, levels=list(levels), count=None if count == PER_PERSON else count,
        ordinals=list(ordinals), ordinal_orders=orders or None, areas_path=areas, mechanism=core.mechanism,
        definition=core.cost.definition, value=core.cost.value, plus=list(params.get("plus_axes") or ()) or None,
        marginals=params.get("marginals"), geo_level=params.get("level") or None,
        engine="duckdb" if ss.get("census_src") is not None else "auto")
    header = ("dpcore release config, written by the app (a census table with attributes).\n"
              "Run: python -m dpcore run release.toml (paths are relative to this file).\n"
              + "".join(n + "\n" for n in notes)
              + "It names your input files and columns: keep it with your data, do not publish it.")
    return cfg.to_toml(header=header)


def _config_expander(text: str, key: str, what: str) -> None:
    """The release.toml of a release, to download and read (the same expander for every kind)."""
    with st.expander("Repeat this release in a pipeline (config file)"):
        st.download_button("Download release.toml", text, "release.toml", "application/toml",
                           on_click="ignore", key=key)
        st.code(text, language="toml")
        st.caption(f"The command line makes the same release from the same {what} (new noise), spending from "
                   "this app's budget database on this computer (DPCORE_LEDGER_DB), keyed as the app keys "
                   f"the {what}.")


def _table_export() -> None:
    table, fp = common.table()
    entry = common.table_entry()
    if table is None or entry is None:
        frame.missing("Nothing has been released from this table yet.", "release", "Go to the Release step")
    rel = entry.release
    matrix = ss.get("census_mech", "privelet") == "matrix"
    csv_name, key = ("marginals.csv", "census_mx") if matrix else ("release.csv", "census")
    d1, d2 = st.columns(2)
    d1.download_button(f"Download {csv_name}", entry.csv, csv_name, "text/csv", on_click="ignore",
                       key=f"{key}_dl_csv", type="primary")
    d2.download_button("Download release.json", entry.json, "release.json", "application/json",
                       on_click="ignore", key=f"{key}_dl_json", type="primary")
    if entry.fingerprint != fp:
        st.caption(f"This is the latest release, made from another table ({entry.source}).")
    cost = rel.plan.cost if matrix else rel.cost
    st.subheader("The release record")
    st.markdown(f"- **Mechanism:** {'matrix mechanism (marginal tables)' if matrix else 'Privelet' + ('+' if rel.plus_axes else '')}\n"
                f"- **Privacy:** {cost.label()}; unit of privacy: {json.loads(entry.json)['privacy']['unit_of_privacy']}\n"
                f"- **Released:** {entry.source}, release {rel.release_id}")
    st.info("The published counts are noisy and unrounded: some are fractional and small ones can be below "
            "zero, so that sums stay unbiased.")
    st.markdown(f"**{csv_name}** (first rows)")
    st.dataframe(pd.read_csv(io.BytesIO(entry.csv), dtype=str, nrows=12), hide_index=True, key=f"{key}_csv_preview")
    with st.expander("Release record (release.json)"):
        st.json(json.loads(entry.json), expanded=1)
    if entry.config:
        _config_expander(entry.config, f"{key}_dl_config", "table")
