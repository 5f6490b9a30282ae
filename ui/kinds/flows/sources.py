"""Trips between areas: where the trips and the public areas come from.

The public geography of each data set on disk (cached across sessions: nothing confidential in
it), the reading of uploads with their problems in O/D words, and the counting of the trips per
area pair (confidential: this session only).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from dpcore.data import engines, synthetic
from dpcore.data.area_boundaries import boundary_names, join_boundaries
from dpcore.data.boundaries import read_boundaries
from dpcore.data.code_tables import read_code_upload
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import DPCoreError, InputError, ParameterError
from dpcore.flows import export as od_export
from dpcore.flows.counts import ODCounts
from dpcore.flows.tree import hierarchy_from_prefixes, match_leaves
from ui import fmt, state
from ui.demo_data import demo_file
from ui.kinds.flows.common import (
    BOUNDARY_NAMES,
    DEMO,
    MODELS_KEPT,
    NONE,
    UPLOAD,
    init,
    missing,
)

NYC_TRIPS = demo_file("od/nyc_green_taxi_trips_2020-04.csv.gz")
NYC_LOOKUP = demo_file("boundaries/nyc_taxi_zone_lookup.csv")
NYC_ZONES = demo_file("boundaries/nyc_taxi_zones.geojson")
NYC_BOROUGHS = demo_file("boundaries/nyc_boroughs.geojson")
US_FLOWS = demo_file("od/us_county_commuting_flows_acs2009_2013.csv.gz")
US_COUNTIES = demo_file("boundaries/us_counties_2010_20m_fips.geojson")
US_STATES = demo_file("boundaries/us_states_2010_20m.geojson")
RI_OD = demo_file("od/ri_lodes7_od_main_JT00_2019.csv.gz")
RI_XWALK = demo_file("od/ri_lodes7_xwalk_2010blocks.csv.gz")
RI_TRACTS = demo_file("boundaries/ri_tracts_2020_tiger2023.geojson")

# ---------------------------------------------------------------------------------------------
# public geography (cached across sessions: nothing confidential in here)
# ---------------------------------------------------------------------------------------------


def _xy_from_boundaries(h: Hierarchy, frames: dict[int, Any]) -> tuple[dict[int, Any], list[str]]:
    xy: dict[int, Any] = {}
    notes = []
    for d, gdf in frames.items():
        lon, lat, unmatched = od_export.centroids_from_boundaries(h, d, gdf)
        xy[d] = (lon, lat)
        if unmatched:
            notes.append(f"{h.level_names[d]}: {fmt.count(len(unmatched))} areas without a boundary "
                         f"({', '.join(unmatched[:6])}{' …' if len(unmatched) > 6 else ''}); their flows are not drawn")
    return xy, notes


@st.cache_resource(show_spinner="Making the demo trips …")
def _demo_od() -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """The made-up O/D demo (:func:`dpcore.data.synthetic.demo_od`: seeded, the same in every session),
    made once per server, as the points demo (issue 28 item 5: every new session made it again, and
    its geography a second time); read only, never changed."""
    return synthetic.demo_od()


@st.cache_resource(show_spinner=False)
def _demo_counts() -> ODCounts:
    """The made-up demo's trips counted per area pair, once per server (as the points demo's grid
    counts: the same made-up data in every session, so counting and fingerprinting its 28,377 pairs
    again for every new session was server time for nothing); read only, never changed."""
    counts = ODCounts.from_frame(_demo_od()[1], demo_public()["h"], origin="origin", destination="destination",
                                 count="count")
    for a in (counts.origin, counts.destination, counts.count):
        a.setflags(write=False)
    return counts


@st.cache_resource(show_spinner="Building the demo geography …")
def demo_public() -> dict[str, Any]:
    areas, _flows, bounds = _demo_od()
    h = Hierarchy.from_frame(areas, ["region", "district", "zone"], source="area list")
    frames = {1: bounds["region"], 2: bounds["district"], 3: bounds["zone"]}
    xy, notes = _xy_from_boundaries(h, frames)
    return {"h": h, "xy": xy, "boundaries": frames, "notes": notes, "area_desc": "the made-up demo geography"}


@st.cache_resource(show_spinner="Reading the NYC taxi zones …")
def nyc_public() -> dict[str, Any]:
    lk = pd.read_csv(NYC_LOOKUP, dtype=str).rename(columns={"Borough": "borough", "LocationID": "zone"})
    h = Hierarchy.from_frame(lk, ["borough", "zone"], codes="global", names={"zone": "Zone"},
                             source="area list")
    zones = read_boundaries(NYC_ZONES)
    boroughs = zones.dissolve(by="borough", as_index=False)[["borough", "geometry"]]
    xy, notes = _xy_from_boundaries(h, {1: boroughs, 2: zones})
    frames = {1: read_boundaries(NYC_BOROUGHS) if NYC_BOROUGHS.exists() else boroughs, 2: zones}
    return {"h": h, "xy": xy, "boundaries": frames, "notes": notes,
            "area_desc": "the TLC taxi-zone lookup, 265 zones with the 2 unknown ones"}


@st.cache_resource(show_spinner="Reading the US county boundaries …")
def us_public() -> dict[str, Any]:
    counties = read_boundaries(US_COUNTIES)
    states = read_boundaries(US_STATES)
    ids = counties["id"].astype(str)
    st_names = dict(zip(states["STATE"].astype(str), states["NAME"].astype(str), strict=True))
    df = pd.DataFrame({"state": ids.str[:2], "county": ids,
                       "state_name": ids.str[:2].map(st_names).fillna(ids.str[:2]),
                       "county_name": counties["NAME"].astype(str) + ", " + ids.str[:2].map(st_names).fillna("")})
    # the prefix hierarchy of hierarchy_from_prefixes(ids, [2, 5], …), with display names
    h = Hierarchy.from_frame(df, ["state", "county"], codes="global",
                             names={"state": "state_name", "county": "county_name"},
                             source="boundaries")
    xy, notes = _xy_from_boundaries(h, {1: states, 2: counties})
    return {"h": h, "xy": xy, "boundaries": {1: states, 2: counties}, "notes": notes,
            "area_desc": "the Census 2010 county boundaries, every county"}


@st.cache_resource(show_spinner="Reading the Rhode Island block crosswalk …")
def ri_public() -> dict[str, Any]:
    xw = pd.read_csv(RI_XWALK, dtype=str, usecols=["tabblk2010", "cty", "ctyname", "trct", "trctname",
                                                   "blklatdd", "blklondd"])
    blk = xw["tabblk2010"]
    lengths = [2, 5, 11, 12, 15]
    levels = ["state", "county", "tract", "block group", "block"]
    df = pd.DataFrame({lv: blk.str.slice(0, ln) for lv, ln in zip(levels, lengths, strict=True)})
    # names only where the crosswalk's own columns agree with the code prefix (two blocks do not)
    cty = xw[xw["cty"] == df["county"]].groupby("cty")["ctyname"].first()
    trct = xw[xw["trct"] == df["tract"]].groupby("trct")["trctname"].first()
    df["county_name"] = df["county"].map(cty).fillna(df["county"])
    df["tract_name"] = df["tract"].map(trct).fillna(df["tract"])
    df["state_name"] = df["state"].map({"44": "Rhode Island"}).fillna(df["state"])
    h = Hierarchy.from_frame(df, levels, codes="global",
                             names={"state": "state_name", "county": "county_name", "tract": "tract_name"},
                             source="area list")
    xy = od_export.centroids_from_points(h, blk, xw["blklondd"], xw["blklatdd"])
    frames: dict[int, Any] = {}
    counties = read_boundaries(US_COUNTIES)
    frames[2] = counties[counties["id"].astype(str).str.startswith("44")]
    if RI_TRACTS.exists():
        frames[3] = read_boundaries(RI_TRACTS)  # 2020 tracts: background only (the release uses 2010)
    return {"h": h, "xy": xy, "boundaries": frames, "notes": [],
            "area_desc": "the LODES block crosswalk, every 2010 block"}


# ---------------------------------------------------------------------------------------------
# confidential tables (this session only)
# ---------------------------------------------------------------------------------------------


def session_table(key: str, read: Any, path: Path) -> pd.DataFrame:
    """Read a (confidential) input file once per session; never through a shared cache."""
    store_ = st.session_state.setdefault("od_raw", {})
    if key not in store_:
        with st.spinner(f"Reading {path.name} …"):
            store_[key] = read()
    return store_[key]


def read_upload(data: bytes, name: str, what: str) -> pd.DataFrame:
    """An uploaded trips table or area list, codes kept as text; its problems in O/D words
    (:func:`dpcore.data.code_tables.read_code_upload`)."""
    return read_code_upload(
        data, name, one_column=what == "areas",  # one code column is an area list (its levels are code prefixes)
        single_column_fix="O/D trips need an origin and a destination column (one trip per row), "
        "or origin, destination and a count column, separated by commas, semicolons or tabs. Check the "
        "file, then choose the origin and destination columns.")


def check_code_column(df: pd.DataFrame, col: str, what: str, h: Hierarchy) -> None:
    """Refuse a column that is not an area code column at all (wrong column chosen), naming the
    columns that are; a few unknown codes are left to :func:`dpcore.flows.tree.leaf_lookup`, which names the rows."""
    sample = df[col].head(5000)
    hit = match_leaves(h, sample) >= 0
    if hit.size == 0 or hit.mean() >= 0.5:
        return
    fits = [str(c) for c in df.columns if c != col and (match_leaves(h, df[c].head(500)) >= 0).mean() >= 0.9]
    ex = list(dict.fromkeys(sample[~hit].astype(str).tolist()))[:3]
    raise InputError(
        f"The {what} column '{col}' does not hold areas of the public area list: {100 * (1 - hit.mean()):.0f} % "
        f"of its values (e.g. {', '.join(ex)}) are not finest areas ('{h.levels[-1]}'). Choose the {what} column"
        + (f" ({', '.join(map(repr, fits))} {'holds' if len(fits) == 1 else 'hold'} area codes)" if fits else "")
        + ", or check that the area list belongs to these trips.")




def demo_inputs() -> dict[str, Any]:
    """The made-up demo: its public geography and its trips (made once per session)."""
    ss = st.session_state
    if "od_demo_flows" not in ss:
        ss["od_demo_flows"] = _demo_od()[1]
    return {"key": (DEMO,), "name": "O/D demo (made up)", "pub": demo_public(), "df": ss["od_demo_flows"],
            "unit": "trips", "cols": {"origin": "origin", "destination": "destination", "count": "count"}}


def model() -> dict[str, Any] | None:
    """The trips loaded on the Data step (their counts, areas and positions), or None.

    Before the Data step was ever opened for this kind, the made-up demo is loaded (as the Data
    step would): a Plan or Release link opened first has data to work on."""
    ss = st.session_state
    init()
    if "od_active" not in ss:
        load_demo()
    return ss.get("od_model") if ss.get("od_active") else None


def need_model() -> dict[str, Any] | None:
    """The loaded trips, or None after a message with a link to the Data step.

    The caller returns (no ``st.stop()``: app.py draws the sidebar after the page, and a stopped run
    would leave it empty)."""
    m = model()
    if m is None:
        st.session_state["od_shown"] = None
        missing("Load trips and their public area list on the Data step first. Earlier releases are kept.",
                "data", "Go to the Data step")
    return m


def load_demo() -> None:
    """Count the demo's trips and make them the loaded data (what the Data step does by default)."""
    init()
    use(demo_inputs(), DEMO)


def use(inputs: dict[str, Any] | None, source: str) -> dict[str, Any] | None:
    """Make ``inputs`` the loaded data (counted once per session, the last :data:`MODELS_KEPT` kept);
    a problem is shown (the earlier data and releases are kept).  Returns the model or None."""
    ss = st.session_state
    model = None
    if inputs is not None:
        key = inputs["key"]
        models = ss.setdefault("od_models", {})  # confidential counts: this session only
        if key in models:
            model = models[key] = models.pop(key)  # most recently used last
        else:
            try:
                with st.spinner("Counting the trips per area pair …"):
                    model = count(inputs, source)
                models[key] = model
                while len(models) > MODELS_KEPT:
                    models.pop(next(iter(models)))
            except DPCoreError as e:
                st.error(str(e))
                st.caption("Fix the input and the page picks it up; earlier releases are kept.")
        if model is not None:
            ss["od_model"], ss["od_model_key"] = model, key
    ss["od_active"] = model is not None
    return model


def _uploaded_areas(inputs: dict[str, Any]) -> tuple[Hierarchy, dict[int, Any], dict[int, Any], list[str]]:
    """The hierarchy, positions, outlines and notes of an uploaded public area list."""
    a = inputs["areas"]
    named = {lv: col for lv, col in a.get("names", {}).items() if col != BOUNDARY_NAMES}
    if a["shape"] == "levels":
        h = Hierarchy.from_frame(a["df"], a["levels"], names=named, source="area list")
    else:
        code_col, lens_txt, names_txt = a["prefix"]
        try:
            lens = [int(x) for x in lens_txt.split(",") if x.strip()]
        except ValueError:
            raise ParameterError("Prefix lengths must be whole numbers separated by commas, e.g. 2,5,11.") from None
        nm = [x.strip() for x in names_txt.split(",") if x.strip()] or None
        h = hierarchy_from_prefixes(a["df"][code_col], lens, nm, source="area list")
    xy: dict[int, Any] = {}
    frames: dict[int, Any] = {}
    notes: list[str] = []
    if a["lon"] != NONE and a["lat"] != NONE:
        codes = (a["df"][a["prefix"][0]] if a["shape"] == "prefix" else
                 a["df"][a["levels"][-1]] if h.code_modes[-1] == "global" else
                 a["df"][a["levels"]].astype(str).agg("/".join, axis=1))
        xy = od_export.centroids_from_points(h, codes, a["df"][a["lon"]], a["df"][a["lat"]])
    for d, b in a["bounds"].items():
        if d > h.depth:
            continue
        gdf = read_boundaries(b[0], b[1])
        if h.level_names[d] not in named:  # names from the boundary file (NAME, zone …) unless a column is chosen
            nm = boundary_names(h, join_boundaries(h, d, gdf))
            h = h.with_names(d, nm) if nm is not None else h
        lon, lat, unmatched = od_export.centroids_from_boundaries(h, d, gdf)
        xy[d] = (lon, lat)
        frames[d] = gdf
        if unmatched:
            notes.append(f"{h.level_names[d]}: {fmt.count(len(unmatched))} areas without a boundary; their flows "
                         "are not drawn")
    check_code_column(inputs["df"], inputs["cols"]["origin"], "origin", h)
    check_code_column(inputs["df"], inputs["cols"]["destination"], "destination", h)
    return h, xy, frames, notes


def count(inputs: dict[str, Any], source: str) -> dict[str, Any]:
    """Count the trips per finest area pair (with the per-person cap): the model the steps use."""
    if inputs["pub"] is not None:
        pub = inputs["pub"]
        h, xy, frames, notes = pub["h"], pub["xy"], pub["boundaries"], list(pub["notes"])
        area_desc = pub["area_desc"]
    else:
        h, xy, frames, notes = _uploaded_areas(inputs)
        area_desc = "your uploaded public area list"
    cols = inputs["cols"]
    src = st.session_state.get("od_trips_src") if source == UPLOAD else None
    if src is not None:  # a large upload: DuckDB groups the rows, with the person cap
        bar = st.progress(0.0, text=f"Counting the trips of {inputs['name']} with DuckDB …")
        user_col = cols.get("user")
        cc = engines.get_engine("duckdb").code_counts(
            src, [cols["origin"], cols["destination"]], count=cols.get("count"), user=user_col,
            cap=inputs.get("m", 1) if user_col else None, distinct=inputs.get("distinct", True),
            progress=lambda f, msg: bar.progress(min(max(f, 0.0), 1.0), text=msg))
        bar.empty()
        counts = ODCounts.from_code_counts(cc, h, max_trips=inputs.get("m", 1) if user_col else 1,
                                           persons=bool(user_col), distinct=inputs.get("distinct", True))
    elif inputs["key"] == (DEMO,) and inputs["df"] is _demo_od()[1] and h is demo_public()["h"]:
        counts = _demo_counts()
    else:
        counts = ODCounts.from_frame(
            inputs["df"], h, origin=cols["origin"], destination=cols["destination"],
            count=cols.get("count"), user=cols.get("user"), max_trips=inputs.get("m", 1),
            distinct=inputs.get("distinct", True))
    if counts.total == 0:
        raise InputError("No trips are counted: the table holds no trips (all counts are 0).")
    if not counts.fingerprint:  # the budget must follow the trips, never a fresh key
        raise InputError("The trips could not be fingerprinted, so their budget cannot be kept.")
    if inputs["key"] == (DEMO,):
        state.mark_demo("flows", counts.fingerprint)  # the made-up demo's budget lives with the session
    return {"h": h, "counts": counts, "xy": xy, "boundaries": frames, "notes": notes,
            "fp": counts.fingerprint, "view": (h.fingerprint(), counts.max_trips, counts.distinct),
            "name": inputs["name"], "unit": inputs["unit"], "area_desc": area_desc,
            "df": inputs["df"], "user": inputs["cols"].get("user"), "source": source, "demo": inputs["key"] == (DEMO,),
            "areas_text": fmt.sizes_line(list(h.level_names[1:]), list(h.sizes[1:])),
            "config": config_inputs(inputs, source, h)}


def config_inputs(inputs: dict[str, Any], source: str, h: Hierarchy) -> dict[str, Any]:
    """What a release.toml of these trips names (no data): the files as uploaded, the columns, the cap
    per person and how the area list gives its levels."""
    ss = st.session_state
    a = inputs.get("areas") if source == UPLOAD else None
    return {"upload": source == UPLOAD, "trips_file": ss.get("od_trips_name") if a else None,
            "areas_file": ss.get("od_areas_name") if a else None, "cols": dict(inputs["cols"]),
            "m": int(inputs.get("m", 1)), "distinct": bool(inputs.get("distinct", True)),
            "shape": a["shape"] if a else "levels",
            "levels": list(a["levels"]) if a and a["shape"] == "levels" else list(h.level_names[1:]),
            "prefix": tuple(a["prefix"]) if a and a["shape"] == "prefix" else None,
            "engine": "duckdb" if ss.get("od_trips_src") is not None and source == UPLOAD else "auto"}
