"""Trips between areas, Data step: which trips, whom they protect (the unit of privacy with the
per-person trip cap), and the public area list with its boundaries."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dpcore.data import engines
from dpcore.data.area_columns import AreaColumns, guess_area_columns
from dpcore.data.columns import (
    ATTRIBUTE_NAMES,
    DEST_NAMES,
    LAT_NAMES,
    LON_NAMES,
    ORIGIN_NAMES,
    coord_like,
    count_like,
    name_key,
    name_like,
)
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import DPCoreError
from dpcore.flows import figures as od_figures
from ui import charts, fmt, frame
from ui.kinds.flows import series as flows_series
from ui.kinds.flows import sources as src
from ui.kinds.flows.common import (
    BOUNDARY_NAMES,
    CHOOSE,
    DEMO,
    NONE,
    NYC,
    RI,
    UPLOAD,
    US,
    init,
    keep,
    keep_choice,
    kept,
)
from ui.source_ui import drop_copy, keep_copy, large_upload_source

AREA_WARNING = ("The area list must be the **public geography**: every area, also those no trip starts or ends "
                "in, from a gazetteer or a boundary file, never built from the trips. A list taken from the data "
                "reveals which areas have trips, and that is not protected.")


def data_step() -> None:
    """The Data step for trips between areas (the page script is pages/data.py)."""
    init()
    ss = st.session_state
    st.subheader("1. Trips")
    source = _source_choice()
    inputs = _source_inputs(source)

    st.subheader("2. Whom the release protects")
    if inputs is not None and source != UPLOAD:
        st.markdown(f"Unit of privacy: **one {'trip' if inputs['unit'] == 'trips' else 'worker'}**: "
                    + ("every trip is taken to be a different person." if inputs.get("trips") else
                       "the counts cannot say which trips belong to one person, so each is a different person."))
    elif source == UPLOAD:
        st.caption("Set above with the trips: a person id column and at most m trips per person, or one trip per "
                   "person.")

    model = src.use(inputs, source)
    if model is None:
        ss["od_shown"] = None
        st.info("Load the trips and their public area list above to continue. Earlier releases are kept.")
        return
    counts = model["counts"]
    if source == UPLOAD:
        st.markdown("Unit of privacy: " + (f"**one person with at most {counts.max_trips} trip"
                                           f"{'s' if counts.max_trips != 1 else ''}** "
                                           f"({'distinct pairs' if counts.distinct else 'repeats allowed'})"
                                           if counts.max_trips > 1 or model["user"] else
                                           "**one trip** (each trip is a different person)") + ".")
    _area_list_and_summary(model)
    flows_series.data_controls(model)
    frame.link("plan")


def _source_choice() -> str:
    """Which trips: the demo, the public data sets shipped in assets/demo, or an upload."""
    options = {DEMO: "Made-up demo (576 zones, 60,000 trips)"}
    if src.NYC_TRIPS.exists() and src.NYC_LOOKUP.exists() and src.NYC_ZONES.exists():
        options[NYC] = "NYC green taxi trips, April 2020 (boroughs and taxi zones)"
    if src.US_FLOWS.exists() and src.US_COUNTIES.exists() and src.US_STATES.exists():
        options[US] = "US county-to-county commuting, ACS 2009–2013 (states and counties)"
    if src.RI_OD.exists() and src.RI_XWALK.exists() and src.US_COUNTIES.exists():
        options[RI] = ("Rhode Island home-to-work commutes, LODES 2019 (state, counties, tracts, block groups, "
                       "blocks)")
    options[UPLOAD] = "Upload trips"
    source = st.radio("Which trips?", list(options), format_func=options.get,
                      key=keep_choice("source", list(options), DEMO))
    kept("source")
    return source


def _source_inputs(source: str) -> dict[str, Any] | None:
    """What the chosen trips are read from (the public area list, the columns, the unit), or None."""
    inputs: dict[str, Any] | None = None
    if source == DEMO:
        inputs = src.demo_inputs()
        st.caption("Made-up trips between 576 square zones (a gravity model: many short trips, few long ones); "
                   "no real person. The zone list is the made-up public geography.")
    elif source == NYC:
        df = src.session_table(NYC, lambda: pd.read_csv(src.NYC_TRIPS, dtype=str,
                                                        usecols=["lpep_pickup_datetime", "PULocationID", "DOLocationID"]), src.NYC_TRIPS)
        inputs = {"key": (NYC,), "name": "NYC green taxi trips, April 2020", "pub": src.nyc_public(), "df": df,
                  "unit": "trips", "cols": {"origin": "PULocationID", "destination": "DOLocationID"}, "trips": True}
        st.caption("One row per trip, pick-up zone to drop-off zone (NYC TLC). The area list is the TLC's public "
                   "taxi-zone lookup (265 zones, the two 'unknown' ones included). The file has no person id, so "
                   "every trip counts as a different person (event-level privacy).")
    elif source == US:
        def _read_us() -> pd.DataFrame:
            f = pd.read_csv(src.US_FLOWS, dtype=str, usecols=["h_fips", "w_fips", "workplace_kind", "flow"])
            return f[f["workplace_kind"] == "us_county"].reset_index(drop=True)

        df = src.session_table(US, _read_us, src.US_FLOWS)
        inputs = {"key": (US,), "name": "US county commuting, ACS 2009–2013", "pub": src.us_public(), "df": df,
                  "unit": "workers", "cols": {"origin": "h_fips", "destination": "w_fips", "count": "flow"}}
        st.caption("Workers by home county and work county (Census Bureau, only workplaces in a US county or PR "
                   "municipio). These are survey estimates, treated here as counts of people, one commute each. "
                   "The area list is the 2010 county boundary file (every county); counties and states are "
                   "shown by name.")
    elif source == RI:
        df = src.session_table(RI, lambda: pd.read_csv(src.RI_OD, dtype=str,
                                                       usecols=["h_geocode", "w_geocode", "S000"]), src.RI_OD)
        inputs = {"key": (RI,), "name": "Rhode Island LODES 2019", "pub": src.ri_public(), "df": df,
                  "unit": "workers", "cols": {"origin": "h_geocode", "destination": "w_geocode", "count": "S000"}}
        st.caption("Jobs by home block and work block within Rhode Island (LEHD LODES 7, all jobs). The area list "
                   "is the LODES block crosswalk (every 2010 block); levels are prefixes of the block code. Map "
                   "positions are the blocks' public internal points. LODES is itself already noise-infused.")
    else:
        inputs = _upload_inputs()

    return inputs


def _area_list_and_summary(model: dict[str, Any]) -> None:
    """The public area list (a map and its first areas), then the curator-only summary of the trips."""
    h: Hierarchy = model["h"]
    counts = model["counts"]
    st.subheader("3. The public area list")
    st.success(f"{model['name']}: {model['areas_text']} (area list: {model['area_desc']}).")
    for note in model["notes"]:
        st.caption(note + ".")
    extent_map(model)
    with st.expander("The public area list (first areas)"):
        st.dataframe(area_preview(h), hide_index=True, width="stretch", key="od_area_preview")
        st.caption("Public: every area of the geography, whether trips start or end in it or not. Names come from "
                   "the boundaries or the lookup where they give one; the codes are what release.csv uses.")
    st.markdown("**Summary of your data** · for you only, never exported")
    c1, c2, c3 = st.columns(3)
    c1.metric(model["unit"].capitalize(), fmt.count(counts.total))
    c2.metric("Observed area pairs", fmt.count(counts.n_pairs),
              help=f"Of {fmt.count(h.n_leaves ** 2)} possible pairs of {fmt.plural(h.level_names[-1])}.")
    c3.metric("Above the per-person cap", fmt.count(counts.dropped_trips),
              help="Trips left out because their person already has m trips.")
    with st.expander("First rows · confidential, not for publication"):
        st.dataframe(model["df"].head(8), hide_index=True, key="od_head", width="stretch")


def area_preview(h: Hierarchy, n: int = 50) -> pd.DataFrame:
    """The first ``n`` finest areas with the areas above them: names where the list gives them,
    then the codes."""
    leaf = h.depth
    idx = list(range(min(n, h.n_leaves)))
    cols: dict[str, Any] = {}
    for d in range(leaf, 0, -1):
        lab, nm = h.labels(d), h.display_names(d)
        name = h.level_names[d]
        if not (lab == nm).all():
            cols[name] = [str(nm[i]) for i in idx]
        cols[f"{name} code"] = [str(lab[i]) for i in idx]
        if d > 1:
            idx = [int(h.parents[d - 1][i]) for i in idx]
    order = [c for d in range(1, leaf + 1) for c in (h.level_names[d], f"{h.level_names[d]} code") if c in cols]
    return pd.DataFrame({c: cols[c] for c in order})


def forget_settings(what: str) -> None:
    """Forget the remembered column choices of the trips or the area list (a file with other
    columns came)."""
    ss = st.session_state
    for k in [k for k in ss if str(k).startswith((f"od_set_{what}_", f"_w_od_set_{what}_"))]:
        del ss[k]


def _bounds_changed(i: int) -> None:
    """A boundary file was uploaded or removed by the curator (not merely undrawn)."""
    ss = st.session_state
    f = ss.get(f"od_bounds_{i}")
    files = ss.setdefault("od_bounds_files", {})
    if f is None:
        files.pop(i, None)
    else:
        files[i] = (f.getvalue(), f.name, f.file_id)


def _upload_inputs() -> dict[str, Any] | None:
    """The upload of the trips and of the public area list, and the choice of their columns."""
    ss = st.session_state
    _read_uploads()
    tdf, adf = ss.get("od_trips_df"), ss.get("od_areas_df")
    if tdf is None or adf is None:
        st.info("Upload the trips and the public area list to continue, or pick a data set above. "
                "Earlier releases are kept.")
        return None
    problems: list[str] = []
    waiting: list[str] = []
    t = _trip_columns([str(c) for c in tdf.columns], problems, waiting)
    a = _area_columns(adf)
    kind, ocol, dcol, ccol, pcol, m, distinct = (t[k] for k in ("kind", "ocol", "dcol", "ccol", "pcol", "m",
                                                                "distinct"))
    shape, lv_cols, prefix, lon_c, lat_c, bounds_up = (a[k] for k in ("shape", "lv_cols", "prefix", "lon_c",
                                                                      "lat_c", "bounds_up"))
    inputs = {"key": (UPLOAD, ss["od_trips_df_id"], ss["od_areas_df_id"], kind, ocol, dcol, ccol, pcol, m,
                      distinct, shape, tuple(lv_cols), prefix, lon_c, lat_c,
                      tuple((k, v[2]) for k, v in sorted(bounds_up.items())), tuple(a["names"])),
              "name": ss.get("od_trips_name", "upload"), "pub": None, "df": tdf, "unit": "trips",
              "cols": {"origin": ocol, "destination": dcol, "count": ccol, "user": pcol}, "m": m,
              "distinct": distinct, "trips": kind == "trips",
              "areas": {"df": adf, "shape": shape, "levels": lv_cols, "prefix": prefix, "lon": lon_c,
                        "lat": lat_c, "bounds": bounds_up, "names": a["names"]}}
    if shape == "levels" and not lv_cols:
        waiting.append("Choose the level columns of the area list (top level first) to continue.")
    for msg in problems:
        st.error(msg)
    for msg in waiting:
        st.info(msg)
    return None if problems or waiting else inputs


def _read_uploads() -> None:
    """The two uploaders; a new file is read once (the trips above the engine threshold stay in a file
    DuckDB counts); a file that cannot be used says why and keeps the earlier one."""
    ss = st.session_state
    st.info(AREA_WARNING)
    c1, c2 = st.columns(2)
    up = c1.file_uploader("Trips (CSV, CSV.gz or Parquet)", type=["csv", "gz", "txt", "parquet"], key="od_upload",
                          help="One row per trip (origin, destination, optional person id), or one row per "
                               "origin/destination pair with a count. Files above 200 MB are counted by DuckDB "
                               "instead of being read into memory. Up to 2 GB per file; for larger files use "
                               "the command line: python -m dpcore release od --engine duckdb.")
    aup = c2.file_uploader("Public area list (CSV, CSV.gz or Parquet)", type=["csv", "gz", "txt", "parquet"],
                           key="od_areas_upload",
                           help="One row per finest area: a code column per level (top first), or one code "
                                "column whose prefixes are the levels (e.g. census block codes).")
    for upl, what, col in ((up, "trips", c1), (aup, "areas", c2)):
        if upl is not None and ss.get(f"od_{what}_id") != upl.file_id:
            ss[f"od_{what}_id"] = upl.file_id  # this upload is read once (also when it fails)
            try:
                # above the engine threshold the trips stay in a file that DuckDB counts; the page
                # works on its first rows (columns, checks) until the counts are made
                big = large_upload_source(upl) if what == "trips" else None
                try:
                    new_df = (src.read_upload(upl.getvalue(), upl.name, what) if big is None else
                              engines.get_engine("duckdb").head(big, 5000))
                except DPCoreError:
                    drop_copy(big)
                    raise
                if what == "trips":
                    ss["od_trips_src"] = big
                    keep_copy(big, "od_upload_tmp")
                old_df = ss.get(f"od_{what}_df")
                if old_df is None or list(map(str, old_df.columns)) != list(map(str, new_df.columns)):
                    forget_settings(what)  # other columns: guess the choices again
                ss[f"od_{what}_df"] = new_df
                ss[f"od_{what}_df_id"] = upl.file_id
                ss[f"od_{what}_name"] = upl.name
                ss[f"od_{what}_error"] = None
            except DPCoreError as e:
                ss[f"od_{what}_error"] = str(e)
        what_txt = "trips file" if what == "trips" else "area list"
        if ss.get(f"od_{what}_error"):
            col.error(ss[f"od_{what}_error"])
            if ss.get(f"od_{what}_df") is not None:
                col.caption(f"The earlier {what_txt} ({ss[f'od_{what}_name']}) is still used; earlier releases "
                            "are kept.")
        elif upl is None and ss.get(f"od_{what}_df") is not None:
            col.caption(f"Using the {what_txt} uploaded earlier: {ss[f'od_{what}_name']}.")


def _trip_columns(tcols: list[str], problems: list[str], waiting: list[str]) -> dict[str, Any]:
    """The trips' columns: trips or counts per row, origin, destination, and the count or the person
    (with the most trips per person); what is wrong goes to ``problems``, what is missing to ``waiting``."""
    st.markdown("**Trips**")
    t_count = [c for c in tcols if count_like(c)]
    t_codes = [c for c in tcols if c not in t_count and not coord_like(c)] or tcols
    kind = st.radio("Rows are", ["trips", "counts"], horizontal=True,
                    key=keep_choice("set_trips_kind", ["trips", "counts"], "counts" if t_count else "trips"),
                    format_func={"trips": "one trip per row", "counts": "origin, destination and a count"}.get)
    kept("set_trips_kind")
    c1, c2, c3 = st.columns(3)
    low = {c.lower(): c for c in tcols}
    g_o = next((low[k] for k in ORIGIN_NAMES if k in low), t_codes[0])
    g_d = next((low[k] for k in DEST_NAMES if k in low and low[k] != g_o),
               next((c for c in t_codes if c != g_o), g_o))
    ocol = c1.selectbox("Origin column", tcols, key=keep_choice("set_trips_origin", tcols, g_o),
                        help="The area code where each trip starts.")
    kept("set_trips_origin")
    dcol = c2.selectbox("Destination column", tcols, key=keep_choice("set_trips_destination", tcols, g_d),
                        help="The area code where each trip ends.")
    kept("set_trips_destination")
    if ocol == dcol:
        problems.append(f"The origin and the destination column are both '{ocol}': choose the origin and "
                        "destination columns (where each trip starts and where it ends).")
    ccol = pcol = None
    m, distinct = 1, True
    if kind == "counts":
        ccol = _count_column(tcols, t_count, ocol, dcol, c3, problems, waiting)
    else:
        pcol, m, distinct = _person_column(tcols, ocol, dcol, c3, problems)
    return {"kind": kind, "ocol": ocol, "dcol": dcol, "ccol": ccol, "pcol": pcol, "m": m, "distinct": distinct}


def _count_column(tcols: list[str], t_count: list[str], ocol: str, dcol: str, c3: Any, problems: list[str],
                  waiting: list[str]) -> str | None:
    """The column holding the number of trips of each origin → destination row."""
    copts = [CHOOSE, *tcols]
    g_c = next((c for c in t_count if c not in (ocol, dcol)), CHOOSE)
    cc = c3.selectbox("Count column", copts, key=keep_choice("set_trips_count", copts, g_c),
                      help="The number of trips of the row's origin → destination pair (whole numbers "
                           "≥ 0), e.g. a column named count, n, trips, flow or S000.")
    kept("set_trips_count")
    ccol = None if cc == CHOOSE else cc
    if ccol is None:
        waiting.append("Choose the count column (the number of trips of each row): no column is named "
                       "like a count (count, n, trips, flow, S000, …).")
    elif ccol in (ocol, dcol):
        problems.append(f"The count column '{ccol}' is also the "
                        f"{'origin' if ccol == ocol else 'destination'} column: choose the column that "
                        "holds the number of trips of each row.")
    return ccol


def _person_column(tcols: list[str], ocol: str, dcol: str, c3: Any,
                   problems: list[str]) -> tuple[str | None, int, bool]:
    """The optional person id, the most trips kept per person (m) and whether they are distinct pairs."""
    m, distinct = 1, True
    popts = [NONE, *tcols]
    pc = c3.selectbox("Person id column (optional)", popts, key=keep_choice("set_trips_person", popts, NONE),
                      help="Without it every trip counts as a different person.")
    kept("set_trips_person")
    pcol = None if pc == NONE else pc
    if pcol in (ocol, dcol):
        problems.append(f"The person id column '{pcol}' is also the "
                        f"{'origin' if pcol == ocol else 'destination'} column: choose the column that "
                        "names the person of each trip, or (none).")
    if pcol:
        c4, c5 = st.columns(2)
        m = int(c4.number_input("At most m trips per person", 1, 1000, key=keep("set_trips_m", 1),
                                help="Each person keeps at most m trips (chosen at random); more "
                                     "trips per person means more noise (sensitivity grows with m)."))
        kept("set_trips_m")
        distinct = c5.radio("A person's trips", [True, False],
                            key=keep_choice("set_trips_distinct", [True, False], True),
                            format_func=lambda b: "distinct pairs (repeats count once)" if b
                            else "repeats allowed") is True
        kept("set_trips_distinct")
    return pcol, m, distinct


def area_guess(adf: pd.DataFrame) -> AreaColumns:
    """The guessed levels and name columns of the uploaded area list (once per upload)."""
    ss = st.session_state
    key = ss.get("od_areas_df_id")
    if ss.get("od_areas_guess", (None,))[0] != key:
        ss["od_areas_guess"] = (key, guess_area_columns(adf))
    return ss["od_areas_guess"][1]


def _area_columns(adf: pd.DataFrame) -> dict[str, Any]:
    """The public area list's columns: the levels (columns, or prefixes of one code), the names of their
    areas, the centres and the boundary files per level (optional, for the map)."""
    ss = st.session_state
    st.markdown("**Public area list**")
    acols = [str(c) for c in adf.columns]
    guess = area_guess(adf)
    a_codes = guess.levels or [c for c in acols if not (count_like(c) or coord_like(c) or name_like(c)
                                                        or name_key(c) in ATTRIBUTE_NAMES)] or acols
    shape = st.radio("The area list has", ["levels", "prefix"], horizontal=True,
                     key=keep_choice("set_areas_shape", ["levels", "prefix"], "levels"),
                     format_func={"levels": "one code column per level (top first)",
                                  "prefix": "one code column; levels are prefixes"}.get)
    kept("set_areas_shape")
    prefix = None
    lv_cols: list[str] = []
    lens_txt = ""
    if shape == "levels":
        lv_cols = st.multiselect("Level columns, top level first", acols,
                                 key=keep_choice("set_areas_levels", acols, a_codes),
                                 help="The code columns of the geography, top level first (fewest areas "
                                      "first, e.g. borough, zone); not coordinates, names or counts.")
        kept("set_areas_levels")
    else:
        c1, c2, c3 = st.columns(3)
        code_col = c1.selectbox("Code column", acols, key=keep_choice("set_areas_code", acols, a_codes[0]))
        kept("set_areas_code")
        lens_txt = c2.text_input("Prefix lengths, top first", key=keep("set_areas_lengths", "2,5"),
                                 help="e.g. 2,5,11,12,15 for census blocks (state, county, tract, "
                                      "block group, block).")
        kept("set_areas_lengths")
        names_txt = c3.text_input("Level names (optional)", key=keep("set_areas_names", ""),
                                  help="Comma-separated, e.g. state,county.")
        kept("set_areas_names")
        prefix = (code_col, lens_txt, names_txt)
    c1, c2 = st.columns(2)
    lopts = [NONE, *acols]
    lon_c = c1.selectbox("Longitude of each finest area (optional, for the map)", lopts,
                         key=keep_choice("set_areas_lon", lopts,
                                         next((c for c in acols if c.lower() in LON_NAMES), NONE)))
    kept("set_areas_lon")
    lat_c = c2.selectbox("Latitude of each finest area (optional, for the map)", lopts,
                         key=keep_choice("set_areas_lat", lopts,
                                         next((c for c in acols if c.lower() in LAT_NAMES), NONE)))
    kept("set_areas_lat")
    bfiles = ss.setdefault("od_bounds_files", {})
    with st.expander("Boundaries per level (optional, for the map)"):
        n_lv = len(lv_cols) if shape == "levels" else len([x for x in lens_txt.split(",") if x.strip()])
        for i in range(1, n_lv + 1):
            bup = st.file_uploader(f"Boundaries of level {i} (GeoJSON, GeoPackage, zipped shapefile)",
                                   type=["geojson", "json", "gpkg", "zip"], key=f"od_bounds_{i}",
                                   on_change=_bounds_changed, args=(i,))
            if bup is not None:
                bfiles[i] = (bup.getvalue(), bup.name, bup.file_id)
            elif i in bfiles:
                st.caption(f"Using {bfiles[i][1]} (uploaded earlier).")
    bounds_up = {i: v for i, v in bfiles.items() if i <= n_lv}
    names = _name_columns(lv_cols if shape == "levels" else [], acols, guess)
    return {"shape": shape, "lv_cols": lv_cols, "prefix": prefix, "lon_c": lon_c, "lat_c": lat_c,
            "bounds_up": bounds_up, "names": names}


def _name_columns(levels: list[str], acols: list[str], guess: AreaColumns) -> dict[str, str]:
    """The column naming each level's areas (level -> column, or :data:`BOUNDARY_NAMES`): the guessed
    name column, else the boundary file's names; maps, tables and exports show the names."""
    names: dict[str, str] = {}
    if not levels:
        st.caption("Area names come from the boundary file of each level (its NAME column), where one is given.")
        return names
    opts = [BOUNDARY_NAMES, NONE, *[c for c in acols if c not in levels]]
    cols = st.columns(min(len(levels), 4))
    for i, lv in enumerate(levels):
        default = guess.names.get(lv, BOUNDARY_NAMES)
        choice = cols[i % len(cols)].selectbox(
            f"Names of the '{lv}' areas", opts, key=keep_choice(f"set_areas_name_{i}", opts, default),
            help="Shown on maps, hovers, tables and in the exports' name fields; the codes stay in the code "
                 "columns. 'From the boundary file' takes its NAME column (or the like) when this level has one.")
        kept(f"set_areas_name_{i}")
        if choice != NONE:
            names[lv] = choice
    return names


def extent_map(model: dict[str, Any]) -> None:
    """The public extent: the areas' boundaries and centres on an offline map (no trips), drawn once per
    area list and kept in the session."""
    xy, frames = model["xy"], model["boundaries"] or {}
    if not xy and not frames:
        st.caption("No map of the areas: the area list has no positions or boundaries (add longitude/latitude "
                   "columns or a boundary file to see one).")
        return
    key = (model["h"].fingerprint(), model["source"], tuple(sorted(frames)))

    def make() -> go.Figure | charts.BuiltFigure:  # its dict made once; a shipped geography's once per server
        bg = [frames[max(frames)]] + ([frames[min(frames)]] if min(frames) != max(frames) else []) if frames else None
        return od_figures.extent_figure(bg, xy) if model["source"] == UPLOAD else _shipped_extent(key, bg, xy)

    st.plotly_chart(charts.kept("od_extent", key, make), key="od_extent_map", config={"displayModeBar": False})


@charts.shared_figure
def _shipped_extent(key: tuple[Any, ...], _bg: Any, _xy: Any) -> go.Figure:
    """The extent map of a geography shipped with the app (the made-up demo's, the NYC taxi zones', the
    US counties', Rhode Island's), keyed by its source and codes: public files, the same map for every
    session, so made once per server (an uploaded area list's is made in its own session)."""
    return od_figures.extent_figure(_bg, _xy)
