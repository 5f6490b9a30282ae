"""O/D flows: trips between the areas of a public hierarchy, released with InfTDA (or a baseline)."""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
import streamlit as st

from dpcore import budget, census, io, od, od_export, od_viz, synthetic
from dpcore.errors import DPCoreError, InputError, ParameterError
from dpcore.hierarchy import Hierarchy, read_hierarchy_table
from dpcore.pipeline import release_od
from ui import fmt
from ui.state import persistent, seed, store

ss = st.session_state
ss.setdefault("od_ledgers", {})  # one ledger per data fingerprint (same data re-loaded: same ledger)
ss.setdefault("od_releases", {})  # the latest release per data fingerprint

SHARED = Path(os.environ.get("DPCORE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
NYC_TRIPS = SHARED / "od" / "nyc_green_taxi_trips_2020-04.csv.gz"
NYC_LOOKUP = SHARED / "boundaries" / "nyc_taxi_zone_lookup.csv"
NYC_ZONES = SHARED / "boundaries" / "nyc_taxi_zones.geojson"
NYC_BOROUGHS = SHARED / "boundaries" / "nyc_boroughs.geojson"
US_FLOWS = SHARED / "od" / "us_county_commuting_flows_acs2009_2013.csv.gz"
US_COUNTIES = SHARED / "boundaries" / "us_counties_2010_20m_fips.geojson"
US_STATES = SHARED / "boundaries" / "us_states_2010_20m.geojson"
RI_OD = SHARED / "od" / "ri_lodes7_od_main_JT00_2019.csv.gz"
RI_XWALK = SHARED / "od" / "ri_lodes7_xwalk_2010blocks.csv.gz"
RI_TRACTS = SHARED / "boundaries" / "ri_tracts_2020_tiger2023.geojson"

DEMO, NYC, US, RI, UPLOAD = "demo", "nyc", "us", "ri", "upload"
# every mechanism whose cost a ledger can add up ('sh' is (ε, δ)-DP: it cannot), InfTDA first
MECHS = sorted((m.name for m in od.MECHANISMS.values() if m.ledger), key=lambda n: n != "inftda")
DEFS = {"approx": "(ε, δ), converted to ρ-zCDP (discrete Gaussian)", "rho": "ρ-zCDP directly (discrete Gaussian)",
        "pure": "Pure ε-DP (discrete Laplace)"}
FAMILY = {"approx": "zcdp", "rho": "zcdp", "pure": "pure"}
CONVERSIONS = {"classic": "classic (the paper's Lemma 3)", "cks": "CKS (tighter: more ρ for the same ε)"}
NEIGHBOURS = {"bounded": "Replace one person (bounded; the total is public and exact)",
              "unbounded": "Add or remove one person (unbounded; the total is noised)"}
ORIENTATIONS = {"destination": "Destination tree (refine the destination first)",
                "origin": "Origin tree (refine the origin first)"}
SPLITS = {"uniform": "Uniform across tree levels (the paper)", "geometric": "Geometric (finer levels get more)",
          "custom": "Custom weights"}
DEFAULT_RHO_CAP = 0.05  # ≈ (ε = 2, δ = 1e-8): room for three releases at the paper's ε = 1
DEFAULT_EPS_CAP = 2.0
# default map level: the finest intra-level table small enough for the O/D matrix beside the map
MAX_MAP_AREAS = od_viz.MAX_HEATMAP_SIDE
AREA_WARNING = ("The area list must be the **public geography**: every area, also those no trip starts or ends "
                "in, from a gazetteer or a boundary file, never built from the trips. A list taken from the data "
                "reveals which areas have trips, and that is not protected (spec pitfall 1).")


def keep(key: str, default: Any) -> str:
    """:func:`ui.state.persistent` under this page's prefix (values survive page switches)."""
    return persistent(f"od_{key}", default)


def kept(key: str) -> Any:
    return store(f"od_{key}")


def file_fp(data: bytes | Path) -> str:
    """Content hash of an input file (keys its ledger; never shown or exported)."""
    b = data.read_bytes() if isinstance(data, Path) else data
    return hashlib.sha256(b).hexdigest()[:16]


def rho_of(eps: float, delta: float, conversion: str) -> float:
    """ρ-zCDP giving (ε, δ)-DP: the inverse of the classic bound ε = ρ + 2√(ρ ln(1/δ)) (the
    paper's Lemma 3), or the tighter Canonne–Kamath–Steinke conversion."""
    if conversion == "cks":
        return budget.approx_dp_to_zcdp(eps, delta)
    big_l = math.log(1.0 / delta)
    return eps * eps / (math.sqrt(big_l + eps) + math.sqrt(big_l)) ** 2


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


@st.cache_resource(show_spinner="Building the demo geography …")
def demo_public() -> dict[str, Any]:
    areas, _flows, bounds = synthetic.demo_od()
    h = Hierarchy.from_frame(areas, ["region", "district", "zone"], source="area list")
    frames = {1: bounds["region"], 2: bounds["district"], 3: bounds["zone"]}
    xy, notes = _xy_from_boundaries(h, frames)
    return {"h": h, "xy": xy, "boundaries": frames, "notes": notes, "area_desc": "the made-up demo geography"}


@st.cache_resource(show_spinner="Reading the NYC taxi zones …")
def nyc_public() -> dict[str, Any]:
    lk = pd.read_csv(NYC_LOOKUP, dtype=str).rename(columns={"Borough": "borough", "LocationID": "zone"})
    h = Hierarchy.from_frame(lk, ["borough", "zone"], codes="global", names={"zone": "Zone"},
                             source="area list")
    zones = io.read_boundaries(NYC_ZONES)
    boroughs = zones.dissolve(by="borough", as_index=False)[["borough", "geometry"]]
    xy, notes = _xy_from_boundaries(h, {1: boroughs, 2: zones})
    frames = {1: io.read_boundaries(NYC_BOROUGHS) if NYC_BOROUGHS.exists() else boroughs, 2: zones}
    return {"h": h, "xy": xy, "boundaries": frames, "notes": notes,
            "area_desc": "the TLC taxi-zone lookup, 265 zones with the 2 unknown ones"}


@st.cache_resource(show_spinner="Reading the US county boundaries …")
def us_public() -> dict[str, Any]:
    counties = io.read_boundaries(US_COUNTIES)
    states = io.read_boundaries(US_STATES)
    ids = counties["id"].astype(str)
    st_names = dict(zip(states["STATE"].astype(str), states["NAME"].astype(str), strict=True))
    df = pd.DataFrame({"state": ids.str[:2], "county": ids,
                       "state_name": ids.str[:2].map(st_names).fillna(ids.str[:2]),
                       "county_name": counties["NAME"].astype(str) + ", " + ids.str[:2].map(st_names).fillna("")})
    # the prefix hierarchy of od.hierarchy_from_prefixes(ids, [2, 5], …), with display names
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
    h = Hierarchy.from_frame(df, levels, codes="global", names={"county": "county_name", "tract": "tract_name"},
                             source="area list")
    xy = od_export.centroids_from_points(h, blk, xw["blklondd"], xw["blklatdd"])
    frames: dict[int, Any] = {}
    counties = io.read_boundaries(US_COUNTIES)
    frames[2] = counties[counties["id"].astype(str).str.startswith("44")]
    if RI_TRACTS.exists():
        frames[3] = io.read_boundaries(RI_TRACTS)  # 2020 tracts: background only (the release uses 2010)
    return {"h": h, "xy": xy, "boundaries": frames, "notes": [],
            "area_desc": "the LODES block crosswalk, every 2010 block"}


# ---------------------------------------------------------------------------------------------
# confidential tables (this session only)
# ---------------------------------------------------------------------------------------------


def session_table(key: str, read: Any, path: Path) -> tuple[pd.DataFrame, str]:
    """Read a (confidential) input file once per session; never through a shared cache."""
    store_ = ss.setdefault("od_raw", {})
    if key not in store_:
        with st.spinner(f"Reading {path.name} …"):
            store_[key] = (read(), file_fp(path))
    return store_[key]


st.title("O/D flows")
st.markdown(
    "Publish how many trips go from each area to each other area (origin/destination flows), at every "
    "level of a public geography, so that all tables add up, no flow is negative, and each level's error "
    "is known before release. Work through the tabs from left to right."
)
tab_data, tab_mech, tab_map, tab_err, tab_exp = st.tabs(
    ["1 · Data", "2 · Mechanism & budget", "3 · Map", "4 · Errors", "5 · Export"])

# ============================================================================ data
with tab_data:
    sources = {DEMO: "Made-up demo (576 zones, 60,000 trips)"}
    if NYC_TRIPS.exists() and NYC_LOOKUP.exists() and NYC_ZONES.exists():
        sources[NYC] = "NYC green taxi trips, April 2020 (borough → taxi zone)"
    if US_FLOWS.exists() and US_COUNTIES.exists() and US_STATES.exists():
        sources[US] = "US county-to-county commuting, ACS 2009–2013 (state → county)"
    if RI_OD.exists() and RI_XWALK.exists() and US_COUNTIES.exists():
        sources[RI] = "Rhode Island home → work blocks, LODES 2019 (state → county → tract → block group → block)"
    sources[UPLOAD] = "Upload trips"
    if ss.get("_w_od_source", ss.get("od_source", DEMO)) not in sources:  # e.g. shared data gone
        ss.pop("_w_od_source", None)
        ss["od_source"] = DEMO
    source = st.radio("Data", list(sources), format_func=sources.get, key=keep("source", DEMO))
    kept("source")
    inputs: dict[str, Any] | None = None
    if source == DEMO:
        pub = demo_public()
        if "od_demo_flows" not in ss:
            ss["od_demo_flows"] = synthetic.demo_od()[1]
        flows = ss["od_demo_flows"]
        inputs = {"key": (DEMO,), "name": "O/D demo (made up)", "pub": pub, "df": flows, "unit": "trips",
                  "cols": {"origin": "origin", "destination": "destination", "count": "count"},
                  "fp": census.fingerprint(flows) if "od_demo_fp" not in ss else ss["od_demo_fp"]}
        ss["od_demo_fp"] = inputs["fp"]
        st.caption("Made-up trips between 576 square zones (a gravity model: many short trips, few long ones); "
                   "no real person. The zone list is the made-up public geography.")
    elif source == NYC:
        pub = nyc_public()
        df, fp = session_table(NYC, lambda: pd.read_csv(NYC_TRIPS, dtype=str, usecols=["PULocationID", "DOLocationID"]),
                               NYC_TRIPS)
        inputs = {"key": (NYC,), "name": "NYC green taxi trips, April 2020", "pub": pub, "df": df, "unit": "trips",
                  "cols": {"origin": "PULocationID", "destination": "DOLocationID"}, "fp": fp, "trips": True}
        st.caption("One row per trip, pick-up zone → drop-off zone (NYC TLC). The area list is the TLC's public "
                   "taxi-zone lookup (265 zones, the two 'unknown' ones included). The file has no person id, so "
                   "every trip counts as a different person (event-level privacy).")
    elif source == US:
        pub = us_public()

        def _read_us() -> pd.DataFrame:
            f = pd.read_csv(US_FLOWS, dtype=str, usecols=["h_fips", "w_fips", "workplace_kind", "flow"])
            return f[f["workplace_kind"] == "us_county"].reset_index(drop=True)

        df, fp = session_table(US, _read_us, US_FLOWS)
        inputs = {"key": (US,), "name": "US county commuting, ACS 2009–2013", "pub": pub, "df": df, "unit": "workers",
                  "cols": {"origin": "h_fips", "destination": "w_fips", "count": "flow"}, "fp": fp}
        st.caption("Workers by home county → work county (Census Bureau, only workplaces in a US county or PR "
                   "municipio). These are survey estimates, treated here as counts of people, one commute each. "
                   "The area list is the 2010 county boundary file (every county).")
    elif source == RI:
        pub = ri_public()
        df, fp = session_table(RI, lambda: pd.read_csv(RI_OD, dtype=str, usecols=["h_geocode", "w_geocode", "S000"]),
                               RI_OD)
        inputs = {"key": (RI,), "name": "Rhode Island LODES 2019", "pub": pub, "df": df, "unit": "workers",
                  "cols": {"origin": "h_geocode", "destination": "w_geocode", "count": "S000"}, "fp": fp}
        st.caption("Jobs by home block → work block within Rhode Island (LEHD LODES 7, all jobs). The area list is "
                   "the LODES block crosswalk (every 2010 block); levels are prefixes of the block code. Map "
                   "positions are the blocks' public internal points. LODES is itself already noise-infused.")
    else:
        inputs = None
        st.info(AREA_WARNING)
        c1, c2 = st.columns(2)
        up = c1.file_uploader("Trips (CSV, CSV.gz or Parquet)", type=["csv", "gz", "txt", "parquet"], key="od_upload",
                              help="One row per trip (origin, destination, optional person id), or one row per "
                                   "origin/destination pair with a count.")
        aup = c2.file_uploader("Public area list (CSV, CSV.gz or Parquet)", type=["csv", "gz", "txt", "parquet"],
                               key="od_areas_upload",
                               help="One row per finest area: a code column per level (top first), or one code "
                                    "column whose prefixes are the levels (e.g. census block codes).")
        for upl, what in ((up, "trips"), (aup, "areas")):
            if upl is not None and ss.get(f"od_{what}_id") != upl.file_id:
                ss[f"od_{what}_id"] = upl.file_id
                try:
                    data = upl.getvalue()
                    ss[f"od_{what}_df"] = read_hierarchy_table(data, upl.name)
                    ss[f"od_{what}_fp"] = file_fp(data)
                    ss[f"od_{what}_name"] = upl.name
                    ss[f"od_{what}_error"] = None
                    for k in [k for k in ss if str(k).startswith(f"od_w_{what}_")]:
                        del ss[k]  # column choices of the earlier file
                except DPCoreError as e:
                    ss[f"od_{what}_error"] = str(e)
            if ss.get(f"od_{what}_error"):
                st.error(ss[f"od_{what}_error"])
        tdf, adf = ss.get("od_trips_df"), ss.get("od_areas_df")
        if tdf is None or adf is None:
            st.info("Upload the trips and the public area list to continue, or pick a data set above. "
                    "Earlier releases are kept.")
        else:
            tcols = [str(c) for c in tdf.columns]
            acols = [str(c) for c in adf.columns]
            st.markdown("**Trips**")
            kind = st.radio("Rows are", ["trips", "counts"], horizontal=True, key=seed("od_w_trips_kind", "trips"),
                            format_func={"trips": "one trip per row", "counts": "origin, destination and a count"}.get)
            c1, c2, c3 = st.columns(3)
            low = {c.lower(): c for c in tcols}
            g_o = next((low[k] for k in ("origin", "o", "from", "h_geocode", "pulocationid", "h_fips") if k in low), tcols[0])
            g_d = next((low[k] for k in ("destination", "d", "to", "w_geocode", "dolocationid", "w_fips") if k in low),
                       tcols[min(1, len(tcols) - 1)])
            ocol = c1.selectbox("Origin column", tcols, key=seed("od_w_trips_origin", g_o))
            dcol = c2.selectbox("Destination column", tcols, key=seed("od_w_trips_destination", g_d))
            ccol = pcol = None
            m, distinct = 1, True
            if kind == "counts":
                g_c = next((low[k] for k in ("count", "flow", "trips", "s000", "n") if k in low), tcols[-1])
                ccol = c3.selectbox("Count column", tcols, key=seed("od_w_trips_count", g_c))
            else:
                pc = c3.selectbox("Person id column (optional)", ["(none)", *tcols], key=seed("od_w_trips_person", "(none)"),
                                  help="Without it every trip counts as a different person.")
                pcol = None if pc == "(none)" else pc
                if pcol:
                    c4, c5 = st.columns(2)
                    m = int(c4.number_input("At most m trips per person", 1, 1000, key=seed("od_w_trips_m", 1),
                                            help="Each person keeps at most m trips (chosen at random); more "
                                                 "trips per person means more noise (sensitivity grows with m)."))
                    distinct = c5.radio("A person's trips", [True, False], key=seed("od_w_trips_distinct", True),
                                        format_func=lambda b: "distinct pairs (repeats count once)" if b
                                        else "repeats allowed") is True
            st.markdown("**Public area list**")
            shape = st.radio("The area list has", ["levels", "prefix"], horizontal=True,
                             key=seed("od_w_areas_shape", "levels"),
                             format_func={"levels": "one code column per level (top first)",
                                          "prefix": "one code column; levels are prefixes"}.get)
            if shape == "levels":
                lv_cols = st.multiselect("Level columns, top level first", acols,
                                         key=seed("od_w_areas_levels", acols[: min(2, len(acols))]))
                prefix = None
            else:
                c1, c2, c3 = st.columns(3)
                code_col = c1.selectbox("Code column", acols, key=seed("od_w_areas_code", acols[0]))
                lens_txt = c2.text_input("Prefix lengths, top first", key=seed("od_w_areas_lengths", "2,5"),
                                         help="e.g. 2,5,11,12,15 for census blocks (state, county, tract, "
                                              "block group, block).")
                names_txt = c3.text_input("Level names (optional)", key=seed("od_w_areas_names", ""),
                                          help="Comma-separated, e.g. state,county.")
                prefix = (code_col, lens_txt, names_txt)
                lv_cols = []
            c1, c2 = st.columns(2)
            lon_c = c1.selectbox("Longitude of each finest area (optional, for the map)", ["(none)", *acols],
                                 key=seed("od_w_areas_lon", next((c for c in acols if c.lower() in
                                                                  ("lon", "longitude", "x", "blklondd")), "(none)")))
            lat_c = c2.selectbox("Latitude of each finest area (optional, for the map)", ["(none)", *acols],
                                 key=seed("od_w_areas_lat", next((c for c in acols if c.lower() in
                                                                  ("lat", "latitude", "y", "blklatdd")), "(none)")))
            bounds_up: dict[str, Any] = {}
            with st.expander("Boundaries per level (optional, for the map)"):
                n_lv = len(lv_cols) if shape == "levels" else len([x for x in lens_txt.split(",") if x.strip()])
                for i in range(n_lv):
                    bup = st.file_uploader(f"Boundaries of level {i + 1} (GeoJSON, GeoPackage, zipped shapefile)",
                                           type=["geojson", "json", "gpkg", "zip"], key=f"od_bounds_{i + 1}")
                    if bup is not None:
                        bounds_up[i + 1] = (bup.getvalue(), bup.name, bup.file_id)
            inputs = {"key": (UPLOAD, ss["od_trips_id"], ss["od_areas_id"], kind, ocol, dcol, ccol, pcol, m, distinct,
                              shape, tuple(lv_cols), prefix, lon_c, lat_c,
                              tuple((k, v[2]) for k, v in bounds_up.items())),
                      "name": ss.get("od_trips_name", "upload"), "pub": None, "df": tdf, "unit": "trips",
                      "cols": {"origin": ocol, "destination": dcol, "count": ccol, "user": pcol}, "m": m,
                      "distinct": distinct, "fp": ss["od_trips_fp"], "trips": kind == "trips",
                      "areas": {"df": adf, "shape": shape, "levels": lv_cols, "prefix": prefix, "lon": lon_c,
                                "lat": lat_c, "bounds": bounds_up}}
            if shape == "levels" and not lv_cols:
                inputs = None
                st.info("Choose the level columns of the area list (top level first) to continue.")

    # -------------------------------------------------- unit of privacy (public choice)
    if inputs is not None and source != UPLOAD:
        st.caption(f"Unit of privacy: **one {'trip' if inputs['unit'] == 'trips' else 'worker'}**: "
                   + ("every trip is taken to be a different person." if inputs.get("trips") else
                      "the counts cannot say which trips belong to one person, so each is a different person."))

    model = None
    if inputs is not None:
        key = inputs["key"]
        if ss.get("od_model_key") == key and ss.get("od_model") is not None:
            model = ss["od_model"]  # confidential counts: this session only
        else:
            try:
                with st.spinner("Counting the trips per area pair …"):
                    if inputs["pub"] is not None:
                        pub = inputs["pub"]
                        h, xy, frames, notes = pub["h"], pub["xy"], pub["boundaries"], list(pub["notes"])
                        area_desc = pub["area_desc"]
                    else:
                        a = inputs["areas"]
                        if a["shape"] == "levels":
                            h = Hierarchy.from_frame(a["df"], a["levels"], source="area list")
                        else:
                            code_col, lens_txt, names_txt = a["prefix"]
                            try:
                                lens = [int(x) for x in lens_txt.split(",") if x.strip()]
                            except ValueError:
                                raise ParameterError("Prefix lengths must be whole numbers separated by commas, "
                                                     "e.g. 2,5,11.") from None
                            nm = [x.strip() for x in names_txt.split(",") if x.strip()] or None
                            h = od.hierarchy_from_prefixes(a["df"][code_col], lens, nm, source="area list")
                        xy, frames, notes = {}, {}, []
                        area_desc = "your uploaded public area list"
                        if a["lon"] != "(none)" and a["lat"] != "(none)":
                            codes = (a["df"][a["prefix"][0]] if a["shape"] == "prefix" else
                                     a["df"][a["levels"][-1]] if h.code_modes[-1] == "global" else
                                     a["df"][a["levels"]].astype(str).agg("/".join, axis=1))
                            xy = od_export.centroids_from_points(h, codes, a["df"][a["lon"]], a["df"][a["lat"]])
                        for d, b in a["bounds"].items():
                            if d > h.depth:
                                continue
                            gdf = io.read_boundaries(b[0], b[1])
                            lon, lat, unmatched = od_export.centroids_from_boundaries(h, d, gdf)
                            xy[d] = (lon, lat)
                            frames[d] = gdf
                            if unmatched:
                                notes.append(f"{h.level_names[d]}: {fmt.count(len(unmatched))} areas without a "
                                             "boundary; their flows are not drawn")
                    cols = inputs["cols"]
                    counts = od.ODCounts.from_frame(
                        inputs["df"], h, origin=cols["origin"], destination=cols["destination"],
                        count=cols.get("count"), user=cols.get("user"), max_trips=inputs.get("m", 1),
                        distinct=inputs.get("distinct", True))
                    if counts.total == 0:
                        raise InputError("No trips are counted: the table holds no trips (all counts are 0).")
                model = {"h": h, "counts": counts, "xy": xy, "boundaries": frames, "notes": notes, "fp": inputs["fp"],
                         "name": inputs["name"], "unit": inputs["unit"], "area_desc": area_desc}
                ss["od_model"], ss["od_model_key"] = model, key
            except DPCoreError as e:
                st.error(str(e))
                st.caption("Fix the input and the page picks it up; earlier releases are kept.")
    ss["od_active"] = model is not None
    if model is not None:
        h = model["h"]
        counts = model["counts"]
        st.success(f"{model['name']}: " + ", ".join(f"{fmt.count(n)} {lv}" for lv, n in
                                                   zip(h.level_names[1:], h.sizes[1:], strict=True))
                   + f" (area list: {model['area_desc']}).")
        if source == UPLOAD:
            st.caption("Unit of privacy: " + (f"one person with at most {counts.max_trips} trips "
                                              f"({'distinct pairs' if counts.distinct else 'repeats allowed'})"
                                              if counts.max_trips > 1 or inputs["cols"].get("user") else
                                              "one trip (each trip is a different person)") + ".")
        for note in model["notes"]:
            st.caption(note + ".")
        st.markdown("**Summary of your data** · for you only, never exported")
        c1, c2, c3 = st.columns(3)
        c1.metric(model["unit"].capitalize(), fmt.count(counts.total))
        c2.metric("Observed area pairs", fmt.count(counts.n_pairs),
                  help=f"Of {fmt.count(h.n_leaves ** 2)} possible finest pairs.")
        c3.metric("Above the per-person cap", fmt.count(counts.dropped_trips),
                  help="Trips left out because their person already has m trips.")
        with st.expander("First rows · confidential, not for publication"):
            st.dataframe(inputs["df"].head(8), hide_index=True, key="od_head")

if model is None:
    for tab in (tab_mech, tab_map, tab_err, tab_exp):
        with tab:
            st.info("Load O/D data on the Data tab first. Earlier releases are kept.")
    st.stop()

h: Hierarchy = model["h"]
counts: od.ODCounts = model["counts"]
fp = model["fp"]
unit = model["unit"]
led = ss["od_ledgers"].get(fp)
if led is None:
    led = ss["od_ledgers"][fp] = budget.Ledger(budget.zcdp(DEFAULT_RHO_CAP), dataset=fp)

# ============================================================================ mechanism
with tab_mech:
    mech = st.selectbox("Mechanism", MECHS, format_func=lambda n: od.get(n).title, key=keep("mech", "inftda"))
    kept("mech")
    info = od.get(mech)
    st.caption(f"{info.description} **When to use:** {info.when} *({info.paper})*")
    st.caption("The stability histogram (SH) is not offered here: it is (ε, δ)-DP, and its cost cannot be added "
               "to this data set's budget ledger (compare with it in the benchmarks).")
    locked = bool(led.entries)
    wdef = keep("definition", "approx")
    if locked and FAMILY[ss[wdef]] != led.definition:
        ss[wdef] = "approx" if led.definition == "zcdp" else "pure"
    c1, c2, c3 = st.columns(3)
    definition = c1.radio("Privacy definition", list(DEFS), format_func=DEFS.get, key=wdef)
    kept("definition")
    if locked:
        c1.caption(f"This data set's budget is kept in {'ρ (zCDP)' if led.definition == 'zcdp' else 'ε'}: "
                   "budget was already spent under it.")
    elif FAMILY[definition] != led.definition:
        led.set_cap(budget.pure(DEFAULT_EPS_CAP) if definition == "pure" else budget.zcdp(DEFAULT_RHO_CAP))
    delta = 1e-8
    approx_note: dict[str, Any] = {}
    try:
        if definition == "approx":
            eps = c2.number_input("ε of this release", min_value=0.01, max_value=20.0, step=0.1, format="%.2f",
                                  key=keep("eps", 1.0), help="Smaller: more privacy, more noise. The paper uses 0.1, 1, 10.")
            kept("eps")
            delta = c2.select_slider("δ", [1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5], key=keep("delta", 1e-8),
                                     format_func=lambda d: f"{d:.0e}", help="The chance the ε bound may fail; "
                                     "far below 1 / the number of people.")
            kept("delta")
            conv = c2.radio("Conversion", list(CONVERSIONS), format_func=CONVERSIONS.get, key=keep("conversion", "classic"),
                            horizontal=True)
            kept("conversion")
            rho = rho_of(eps, delta, conv)
            cost = budget.zcdp(rho)
            approx_note = {"epsilon": eps, "delta": delta, "conversion": conv, "rho": rho}
            c2.caption(f"ρ = {rho:.4g} (zCDP) guarantees (ε = {fmt.eps(eps)}, δ = {delta:.0e})-DP.")
            cost_label = f"ρ = {rho:.2g} (ε = {fmt.eps(eps)}, δ = {delta:.0e})"
        elif definition == "rho":
            rho = c2.number_input("ρ of this release", min_value=1e-5, max_value=10.0, step=0.001, format="%.4f",
                                  key=keep("rho", 0.0132), help="zCDP budget; ρ ≈ 0.0132 is (ε = 1, δ = 1e-8).")
            kept("rho")
            delta = c2.select_slider("δ for the (ε, δ) reading", [1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5],
                                     key=keep("delta_read", 1e-8), format_func=lambda d: f"{d:.0e}")
            kept("delta_read")
            cost = budget.zcdp(rho)
            c2.caption(f"Reads as (ε = {fmt.eps(budget.zcdp_to_approx_dp(rho, delta))}, δ = {delta:.0e})-DP.")
            cost_label = cost.label()
        else:
            eps = c2.number_input("ε of this release", min_value=0.01, max_value=20.0, step=0.1, format="%.2f",
                                  key=keep("eps_pure", 1.0), help="Pure ε-DP: discrete Laplace noise, no δ.")
            kept("eps_pure")
            cost = budget.pure(eps)
            cost_label = cost.label()
    except DPCoreError as e:  # not reachable through the inputs' own limits; kept for safety
        st.error(str(e))
        cost, cost_label = None, "(fix the budget above)"
    ss["od_delta"] = delta
    sym = led.cap.symbol
    cap = c3.number_input(f"Budget cap of this data set ({sym})", min_value=0.0001, max_value=100.0, step=0.01,
                          format="%.4f", value=float(led.cap.value), key=f"od_cap_{fp}_{led.definition}",
                          help="The most all releases of this data set may spend together.")
    if cap != led.cap.value:
        try:
            led.set_cap(budget.pure(cap) if led.definition == "pure" else budget.zcdp(cap))
        except DPCoreError as e:
            c3.error(str(e))
    if led.definition == "zcdp":
        c3.caption(f"Cap ρ = {led.cap.value:.4g} reads as ε = {fmt.eps(budget.zcdp_to_approx_dp(led.cap.value, delta))} "
                   f"at δ = {delta:.0e}.")
    c4, c5, c6 = st.columns(3)
    neighbour = c4.radio("Neighbouring data sets", list(NEIGHBOURS), format_func=NEIGHBOURS.get,
                         key=keep("neighbour", "bounded"),
                         help="Bounded: one person's trip is replaced by another, so the number of trips is public "
                              "(the paper's default). Unbounded: a person is added or removed; the total is noised.")
    kept("neighbour")
    orientation = c5.radio("Tree orientation", list(ORIENTATIONS), format_func=ORIENTATIONS.get,
                           key=keep("orientation", "destination"),
                           help="Decides which cross-level tables are measured directly: the destination tree "
                                "measures 'large origin area → smaller destination area'.")
    kept("orientation")
    split = c6.radio("Budget across tree levels", list(SPLITS), format_func=SPLITS.get, key=keep("split", "uniform"))
    kept("split")
    order, tiebreak = "ascending", "random"
    with st.expander("Advanced"):
        if mech == "inftda":
            order = st.radio("IntOpt zeroing order", ["ascending", "descending"], key=keep("order", "ascending"),
                             help="Ascending zeroes the smallest noisy flows first (fewer spurious flows); "
                                  "descending keeps them (fewer real flows lost).")
            kept("order")
        if mech in ("inftda", "tda_l2"):
            tiebreak = st.radio("Ties", ["random", "index"], key=keep("tiebreak", "random"),
                                format_func={"random": "broken at random (no area favoured)",
                                             "index": "broken by area order (reproducible)"}.get)
            kept("tiebreak")
        st.caption(f"Unit of privacy (from the Data tab): at most {counts.max_trips} trip"
                   f"{'s' if counts.max_trips > 1 else ''} per person.")
    opts = {"neighbour": neighbour, "orientation": orientation, "order": order, "tiebreak": tiebreak}
    weights = None
    weights_ok = True
    p: od.ODPlan | None = None
    try:
        if cost is None:
            raise ParameterError("Set a valid privacy budget for this release first.")
        probe = od.plan(h, None, mech, cost, max_trips=counts.max_trips, distinct=counts.distinct, split="uniform",
                        **opts)
        measured = [lv.name for lv in probe.levels if lv.measured]
        if split == "custom":
            n_m = len(measured)
            txt = c6.text_input(f"Weights, one per measured level ({n_m}), top first",
                                key=keep(f"weights_{n_m}", ",".join(["1"] * n_m)),
                                help="Measured levels: " + ", ".join(measured) + ".")
            kept(f"weights_{n_m}")
            try:
                weights = [float(x) for x in txt.split(",") if x.strip()]
            except ValueError:
                st.error("Weights must be numbers separated by commas, e.g. 1,1,2,4.")
                weights, weights_ok = [1.0] * n_m, False
        p = od.plan(h, None, mech, cost, max_trips=counts.max_trips, distinct=counts.distinct, split=split,
                    weights=weights, **opts)
    except DPCoreError as e:  # e.g. the MILP baseline on a large domain: say why, keep the page
        st.error(str(e))

    def plan_table(pl: od.ODPlan) -> pd.DataFrame:
        sym_ = "ε" if pl.cost is not None and pl.cost.definition == "pure" else "ρ"
        return pd.DataFrame([{
            "level": lv.name,
            "table": ("total" if lv.kind == "total" else f"{lv.origin_level} → {lv.destination_level}"),
            "possible pairs": fmt.count(lv.pairs),
            "measured": "yes" if lv.measured else ("public" if lv.level == 0 else "no (copy level)"),
            "share": f"{sym_} = {lv.share:.2g}" if lv.measured else "–",
            "σ per node": fmt.num(lv.noise_sd) if lv.measured else "–",
            "expected RMSE": fmt.num(lv.sd),
            "typical max error": fmt.num(lv.max_abs),
            "95 % bound": fmt.num(lv.bound) if math.isfinite(lv.bound) else "–",
            "unreliable below": fmt.num(lv.unreliable_below),
        } for lv in pl.levels])

    if p is not None:
        st.subheader("Expected error per level (before release)")
        st.dataframe(plan_table(p), hide_index=True, key="od_plan_table")
        st.bar_chart(pd.DataFrame({"level": [lv.name for lv in p.levels[1:]],
                                   "expected RMSE": [lv.sd for lv in p.levels[1:]],
                                   "typical max error": [lv.max_abs for lv in p.levels[1:]]}).set_index("level"),
                     height=220, stack=False)
        st.caption(f"Analytic and data-free: from the budget, the unit of privacy and the public area lists only "
                   f"({p.levels[-1].basis}). Errors are in {unit} per area pair. 'level' names the origin level, "
                   "then '>' and the destination level for cross-level tables. The 95 % bound holds with "
                   "probability 95 % for the exact L∞ projections (InfTDA and its MILP baseline).")
    can = cost is not None and led.can_spend(cost)
    left = led.remaining - (led.charge_of(cost) if can else 0.0)
    label = f"Release with {cost_label} — {fmt.eps(max(left, 0.0))} left after this"
    if st.button(label, type="primary", disabled=not (can and weights_ok and p is not None),
                 key="od_release_button"):
        bar = st.progress(0.0, text="Checking the budget …")

        def progress(frac: float, msg: str) -> None:
            bar.progress(min(max(float(frac), 0.0), 1.0), text=f"Releasing: {msg}")

        try:
            rel = release_od(counts, mech, cost, led, progress=progress, split=split, weights=weights, **opts)
            ss["od_releases"][fp] = {"release": rel, "fp": fp, "model_key": ss["od_model_key"], "name": model["name"],
                                     "cost_label": cost_label, "delta": delta, "approx": approx_note,
                                     "exports": {}, "figs": {}}
            st.rerun()
        except DPCoreError as e:
            st.error(str(e))
    if cost is not None and not can:
        st.error(f"Not enough budget left: {led.cap.symbol} = {fmt.eps(led.remaining)} of "
                 f"{fmt.eps(led.cap.value)} is left, and this release needs {cost.label()}. Lower the budget of this "
                 "release, or raise the cap if your privacy policy allows it.")
    st.caption(f"Spent on this data set: {led.cap.symbol} = {fmt.eps(led.spent)} of {fmt.eps(led.cap.value)} "
               f"({len(led.entries)} release{'s' if len(led.entries) != 1 else ''}).")

entry = ss["od_releases"].get(fp)
if entry is not None and entry["model_key"] != ss.get("od_model_key"):
    for tab in (tab_map, tab_exp):
        with tab:
            st.info("The last release of this data used other settings on the Data tab (columns, area list or unit "
                    "of privacy). Change them back to see it, or release again.")
    entry = None
elif entry is None:
    for tab in (tab_map, tab_exp):
        with tab:
            st.info("Nothing released yet for this data: release on the Mechanism & budget tab.")

# ============================================================================ map
if entry is not None:
    rel: od.ODRelease = entry["release"]
    with tab_map:
        st.caption(f"{rel.mechanism.title}, {entry['cost_label']} · released {rel.created.replace('+00:00', '')} UTC")
        T = rel.depth
        names = [lp.name for lp in rel.plan.levels]
        intra = [t for t in range(1, T + 1) if rel.plan.levels[t].kind == "intra"
                 and h.sizes[rel.plan.levels[t].origin_depth] <= MAX_MAP_AREAS]
        default_t = intra[-1] if intra else 1
        c1, c2 = st.columns([2, 3])
        t = c1.selectbox("Table (tree level)", list(range(1, T + 1)), key=keep(f"map_level_{fp}", default_t),
                         format_func=lambda i: f"{names[i]} · {fmt.count(rel.values[i].size)} flows released")
        kept(f"map_level_{fp}")
        top = c2.slider("Show the largest N flows", 10, 1000, step=10, key=keep("top", 200),
                        help="The N largest flows between two different areas are drawn as lines, and the N largest "
                             "flows within one area as circles.")
        kept("top")
        within = c2.checkbox("Show flows within one area as circles", key=keep("within", True))
        kept("within")
        lp = rel.plan.levels[t]
        od_, dd = lp.origin_depth, lp.destination_depth
        xy = model["xy"]
        has_xy = od_ in xy and dd in xy and min(od_, dd) > 0
        cmap, cside = st.columns([3, 2]) if max(h.sizes[od_], h.sizes[dd]) <= od_viz.MAX_HEATMAP_SIDE else (st, None)
        if has_xy:
            fkey = ("map", t, top, within)
            figs = entry["figs"]  # a rerun does not rebuild the same map
            if fkey not in figs:
                frames = model["boundaries"]  # public outlines: the finest ones up to this level, and the top level
                bg = []
                if frames:
                    upto = [d for d in sorted(frames) if d <= max(od_, dd)] or [min(frames)]
                    bg = [frames[upto[-1]]] + ([frames[min(frames)]] if min(frames) != upto[-1] else [])
                figs[fkey] = od_viz.flow_map(rel, t, xy, boundaries=bg or None, top=top, within=within, unit=unit)
            cmap.plotly_chart(figs[fkey], key="od_map", config={"displayModeBar": False})
            cmap.caption(f"Lines: the {top} largest released flows of '{lp.name}' ({lp.origin_level} → "
                         f"{lp.destination_level}) between two areas, thicker = more {unit}, arcs bend to the right "
                         "of their direction and end in a dot at the destination"
                         + (f"; circles: the {top} largest flows within one area" if within else "")
                         + ". Hover: the noisy count. Positions are public area centres.")
        elif min(od_, dd) == 0:
            cmap.info(f"In '{lp.name}' one end is the whole territory (the total), which has no place on a map: "
                      "the matrix and the table below show these flows.")
        else:
            cmap.info("No positions for these areas (add longitude/latitude columns or boundaries to the area list "
                      "on the Data tab); the table below lists the largest flows.")
        if cside is not None:
            log = cside.checkbox("Logarithmic colours", value=True, key="od_heat_log")
            hkey = ("heat", t, log)
            if hkey not in entry["figs"]:
                entry["figs"][hkey] = od_viz.od_heatmap(rel, t, log=log, unit=unit, height=520)
            cside.plotly_chart(entry["figs"][hkey], key="od_heatmap")
            cside.caption(f"Origin ({lp.origin_level}, rows) × destination ({lp.destination_level}, columns); "
                          "blank: released as 0.")
        st.info(f"At this level, flows below about **{fmt.num(lp.unreliable_below)} {unit}** are unreliable (about "
                "twice the noise): a released flow that small may be noise, and true flows that small are often "
                "released as 0.")
        with st.expander("Largest flows as a table"):
            f = rel.frame(t, names=True)
            codes = rel.frame(t)
            if not (f["origin"].equals(codes["origin"]) and f["destination"].equals(codes["destination"])):
                f.insert(1, "origin code", codes["origin"])
                f.insert(3, "destination code", codes["destination"])
            f = f.sort_values("noisy_count", ascending=False, kind="stable").head(top)
            st.dataframe(f, hide_index=True, key="od_top_table")

# ============================================================================ errors
with tab_err:
    shown = entry["release"].plan if entry is not None else p
    if shown is None:
        st.info("Choose settings the mechanism accepts on the Mechanism & budget tab to see the expected error.")
        st.stop()
    st.subheader("Expected error of the release (analytic, data-free)" if entry is not None
                 else "Expected error (analytic, data-free)")
    st.dataframe(plan_table(shown), hide_index=True, key="od_err_plan")
    st.caption(shown.levels[-1].basis + ". Publishable: it uses no data.")
    if entry is not None:
        rel = entry["release"]
        st.subheader("Empirical error of the release · curator only, not for publication")
        st.warning("These numbers compare the release with your confidential data. Do not publish them, and do not "
                   "re-run releases until they look good: that choice is not covered by the privacy budget.")
        if "empirical" not in entry:
            entry["empirical"] = od.empirical_errors(rel, counts)  # curator only, computed once
        emp = entry["empirical"]

        def pct(x: float) -> str:
            return "n/a" if x is None or not math.isfinite(x) else f"{x:.1f} %"

        st.dataframe(pd.DataFrame([{
            "level": e["level"], "max abs. error": fmt.num(e["max_abs_error"]),
            "mean abs. error (non-zero pairs)": fmt.num(e["mean_abs_error"]),
            "expected max": fmt.num(e["expected_max_abs"]), "expected RMSE": fmt.num(e["expected_rmse"]),
            "false positives": fmt.count(e["false_positives"]), "FDR": pct(e["fdr_percent"]),
            "false negatives": fmt.count(e["false_negatives"]), "FNR": pct(e["fnr_percent"]),
            "released pairs": fmt.count(e["released_pairs"]), "true pairs": fmt.count(e["true_pairs"]),
        } for e in emp]), hide_index=True, key="od_err_emp")
        st.caption("Over the pairs positive in the truth or the release. False positive: released > 0 where nobody "
                   "travelled (FDR: their share of the released pairs); false negative: a real flow released as 0 "
                   "(FNR: share of the real pairs).")

# ============================================================================ export
if entry is not None:
    rel = entry["release"]
    with tab_exp:
        ex = entry["exports"]
        xy = model["xy"]
        if "csv" not in ex:
            ex["csv"] = od_export.release_csv_bytes(rel)
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
                ex["geojson_n"] = n_lines
            extra = {"budget_input": entry["approx"]} if entry["approx"] else None
            ex["json"] = od_export.od_json(rel, led, delta=entry["delta"], extra=extra, files=files)

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
            c3.caption("No flows.geojson: the areas have no positions (see the Data tab).")
        st.markdown("**release.csv** (first rows): every released flow of every level; flows released as 0 are "
                    "not listed.")
        st.dataframe(pd.read_csv(pd.io.common.BytesIO(ex["csv"]), dtype=str, nrows=12), hide_index=True,
                     key="od_csv_preview")
        if "geojson_n" in ex:
            st.caption(f"flows.geojson: {fmt.count(ex['geojson_n'])} flow lines, one per released flow of every level "
                       "with positions at both ends (origin centre → destination centre), with the CSV's columns as "
                       "properties.")
        with st.expander("Release record (release.json)"):
            st.json(ex["json"].decode("utf-8"), expanded=1)
        st.caption("Nothing in these files comes from your data unnoised, except the total number of trips when "
                   "the plan makes it public (bounded neighbours, one trip per person).")
