"""Points, Export step: the three files of the release, with a preview of each, and the config."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import streamlit as st

from dpcore.core import spec as config
from dpcore.data.points import DROP_UNREADABLE_COORDINATE
from dpcore.points import export, workload_io
from dpcore.points.release import PartitionRelease
from ui import data_user_downloads, fmt, frame, series
from ui.kinds.points import state as points_state


def export_step() -> None:
    """The Export step for points (the page script is pages/export.py)."""
    if series.active("points") is not None and series.export_step("points", points_state.dataset().fingerprint):
        return
    cur = points_state.current_release()
    if cur is None:
        frame.missing("Nothing has been released from this data yet.", "release", "Go to the Release step")

    rel = cur.release
    led = points_state.ledger()
    with st.spinner("Preparing the files …"):
        files = points_state.release_files(cur)  # made once, with the release (the stored bytes)

    c1, c2, c3 = st.columns(3)
    c1.download_button("Download release.csv", files["release.csv"], "release.csv", "text/csv",
                       on_click="ignore", key="dl_csv", type="primary")
    geo = files.get("release.geojson") or (lambda: export.release_geojson(rel))
    c2.download_button("Download release.geojson", geo, "release.geojson", "application/geo+json",
                       on_click="ignore", key="dl_geojson", type="primary")
    c3.download_button("Download release.json", files["release.json"], "release.json", "application/json",
                       on_click="ignore", key="dl_json", type="primary")

    if "workload_answers.csv" in files:
        st.download_button("Download workload_answers.csv", files["workload_answers.csv"], "workload_answers.csv",
                           "text/csv", on_click="ignore", key="dl_workload_answers")
    data_user_downloads.offer(files, "points")

    _negatives(rel)
    _config(rel)

    if "record" not in cur.exports:  # the files are final from here on: parsed once per release
        cur.exports["record"] = json.loads(files["release.json"])
    rec = cur.exports["record"]
    st.subheader("The release record")
    privacy = rec["privacy"]
    st.markdown(
        f"- **Mechanism:** {rec['mechanism']['title']}\n"
        f"- **Privacy:** {privacy['definition']}, {rel.cost.label()}; unit of privacy: {privacy['unit_of_privacy']}\n"
        f"- **Area:** {', '.join(f'{v:.4f}' for v in rel.grid.bounds.as_tuple())} (west, south, east, north), "
        f"grid {rel.grid.rows:,} × {rel.grid.cols:,}\n"
        f"- **Released:** {_released(int(rel.leaf.sum()), int(rec['outputs']['n_rectangles']))}, {rec['created']}\n"
        f"- **Budget of this dataset:** {led.cap.symbol} = {fmt.eps(led.spent)} spent of {fmt.eps(led.cap.value)}"
    )
    st.dataframe(pd.DataFrame([{"level": s["name"], "budget": s["label"]} for s in rec["budget"]["split"]]),
                 hide_index=True)
    with st.expander("release.json"):
        st.json(rec, expanded=2)
    with st.expander("release.csv (first 20 rows)"):
        st.dataframe(export.release_frame(rel).head(20), hide_index=True, column_config={
            "budget": st.column_config.NumberColumn(format="%.2g"),
            "noise_sd": st.column_config.NumberColumn(format="%.3g")})
    if export.has_workload_answers(rel):
        wl = rec.get("workload", {})
        st.subheader("Answers to the workload queries")
        st.markdown(
            f"{fmt.count(wl.get('n_queries', 0))} queries ({wl.get('workload_name', '')}), each with its "
            f"released answer and standard error (analytic, from no data). Expected error per query: "
            f"{fmt.num(wl.get('expected_rmse_per_query', float('nan')))}."
        )
        st.dataframe(export.workload_answers_frame(rel).head(20), hide_index=True, key="workload_answers_preview")
    with st.expander("release.geojson (first feature)"):
        if "release.geojson" in files:
            if "geojson_first" not in cur.exports:
                cur.exports["geojson_first"] = json.loads(files["release.geojson"])["features"][:1]
            st.json(cur.exports["geojson_first"])
        else:
            st.caption("Large release: the GeoJSON is built when you download it.")


def _negatives(rel: PartitionRelease) -> None:
    """Why some released counts are negative, and the clamped file for users who need counts ≥ 0, with its
    bias (post-processing of the release: costs nothing, reads no data)."""
    neg = export.negative_counts(rel)
    if not neg["n_negative"]:
        return
    st.subheader("Negative counts")
    st.markdown(
        f"{fmt.count(neg['n_negative'])} of the {fmt.count(neg['n_areas'])} released areas have a negative count "
        f"(the smallest is {fmt.num(neg['min'])}). They are kept on purpose: the noise is as likely to push a count "
        "up as down, so a sum over many areas is right on average. Setting them to 0 would push every sum up.")
    st.download_button(
        f"Download {export.CLAMPED_FILE} (counts below 0 set to 0)", lambda: export.clamped_csv(rel),
        export.CLAMPED_FILE, "text/csv", on_click="ignore", key="dl_clamped",
        help="For users who need counts of at least 0: the released areas with count_clamped = max(count, 0), "
             "next to the unclamped count. Made from the release only: it costs no budget.")
    st.caption(
        f"The clamped counts are biased upward: each by at most half its noise SD (here at most "
        f"{fmt.num(neg['bias_at_most'])} points per area, the most for empty areas), so a sum of k areas can be "
        "too high by up to k times that. Sums and totals should use release.csv. The column bias_at_most gives "
        "each area's bound.")


def _config(rel: PartitionRelease) -> None:
    """The release.toml of the release (and the uploaded workload it names), in the expander every kind
    shows: ``python -m dpcore run`` makes the same release on the same budget."""
    with st.expander("Repeat this release in a pipeline (config file)"):
        ds = points_state.dataset()
        t = ds.table
        # a path as typed in the app is relative to the app's folder: written absolute
        typed = ds.source is not None and not Path(ds.source.paths[0]).parent.name.startswith("dpcore-upload-")
        cfg = config.points_config(
            input_path=os.path.abspath(os.path.expanduser(ds.source.label)) if typed else ds.name,
            lat=t.lat_column, lon=t.lon_column, user=t.user_column, user_cap=rel.user_cap,
            bounds=rel.grid.bounds.as_tuple(), grid=(rel.grid.rows, rel.grid.cols), mechanism=rel.mechanism,
            params=rel.params, definition=rel.cost.definition, value=rel.cost.value,
            delta=st.session_state.get("delta"), engine=ds.engine if ds.source is not None else "auto",
            spark_master=ds.spark_master, coordinate_precision=rel.coordinate_precision,
            drop_unreadable=DROP_UNREADABLE_COORDINATE in t.dropped,
        )
        where = ("" if typed else
                 "\n[input] path names the app's made-up demo data, which is not a file: give your file's path." if ds.is_demo
                 else "\n[input] path is the name of the uploaded file: put the file next to this config or give its path.")
        text = cfg.to_toml(header=(
            f"dpcore release config, written by the app for release {rel.release_id} ({rel.created}).\n"
            f"Run: python -m dpcore run release.toml (paths are relative to this file).{where}\n"
            "It names your input file and columns: keep it with your data, do not publish it."))
        st.download_button("Download release.toml", text, "release.toml", "application/toml", on_click="ignore",
                           key="dl_config")
        rects = rel.params.get("rectangles")
        if rects:
            st.download_button("Download workload.json (the uploaded query rectangles the config names)",
                               json.dumps(workload_io.RectangleList(rects).to_list(), indent=1), "workload.json",
                               "application/json", on_click="ignore", key="dl_config_workload")
        st.code(text, language="toml")
        st.caption("The command line makes the same release from the same data (new noise). Its budget is this "
                   "app's budget database on this computer (DPCORE_LEDGER_DB), keyed by the points' content, so the "
                   "app's releases and the pipeline's runs draw on one budget.")


def _released(leaves: int, rects: int) -> str:
    """The released areas as the sidebar counts them (the leaves), and what else the files hold."""
    text = f"{fmt.count(leaves)} areas"
    if rects > leaves:
        text += f" (plus the {fmt.count(rects - leaves)} larger areas that contain them, also in the files)"
    return text
