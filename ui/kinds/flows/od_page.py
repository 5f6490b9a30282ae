"""O/D flows: trips between the areas of a public hierarchy, released with InfTDA (or a baseline)."""

from __future__ import annotations

import gzip
import io as _io
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
import streamlit as st

from dpcore.areas.hierarchy import Hierarchy
from dpcore.data import engines, synthetic
from dpcore.data.boundaries import read_boundaries
from dpcore.data.code_tables import read_code_table
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
from dpcore.data.text import UTF16_BOMS, decode_text, gunzip_limited
from dpcore.errors import DPCoreError, InputError, ParameterError
from dpcore.flows import export as od_export
from dpcore.flows import figures as od_figures
from dpcore.flows import mechanisms as od
from dpcore.flows.counts import ODCounts
from dpcore.flows.diagnostics import empirical_errors
from dpcore.flows.tree import hierarchy_from_prefixes, match_leaves
from dpcore.pipeline import release_od
from dpcore.privacy import budget
from ui import budget_ui, fmt, state
from ui.source_ui import drop_copy, keep_copy, large_upload_source
from ui.state import persistent, remember_release, store

ss = st.session_state
# Ledgers and releases are keyed by ODCounts.fingerprint: a hash of the trips themselves (order,
# line endings, compression, trip rows or count rows do not matter), not of the file, the area
# list or the settings.  The same trips re-loaded draw on the same budget.
ss.setdefault("od_ledgers", {})  # fingerprint -> Ledger
ss.setdefault("od_releases", {})  # fingerprint -> [release entries], oldest first
ss.setdefault("od_release_token", 0)  # one-time token of the Release button (a second click is stale)

SHARED = Path(os.environ.get("DPCORE_SHARED_DATA", Path(state.__file__).resolve().parents[2] / "shared" / "data"))
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
FIGURES_KEPT = 3  # figures kept in the session (the last ones drawn)
MODELS_KEPT = 3  # counted data sets kept in the session (switching back does not count again)
CHOOSE, NONE = "(choose)", "(none)"
DEFAULT_RHO_CAP, DEFAULT_EPS_CAP = state.DEFAULT_RHO_CAP, state.DEFAULT_CAP  # the same for every kind
# default map level: the finest intra-level table small enough for the O/D matrix beside the map
MAX_MAP_AREAS = od_figures.MAX_HEATMAP_SIDE
AREA_WARNING = ("The area list must be the **public geography**: every area, also those no trip starts or ends "
                "in, from a gazetteer or a boundary file, never built from the trips. A list taken from the data "
                "reveals which areas have trips, and that is not protected (spec pitfall 1).")


def keep(key: str, default: Any) -> str:
    """:func:`ui.state.persistent` under this page's prefix (values survive page switches)."""
    return persistent(f"od_{key}", default)


def kept(key: str) -> Any:
    return store(f"od_{key}")


def keep_choice(key: str, options: list[Any], default: Any) -> str:
    """:func:`keep` for a choice among ``options``: a remembered value that is no longer offered
    (another file, another release) falls back to ``default``.  Lists (multiselect) are checked
    item by item."""
    for k in (f"od_{key}", f"_w_od_{key}"):
        if k in ss:
            v = ss[k]
            ok = all(x in options for x in v) if isinstance(v, list) else v in options
            if not ok:
                del ss[k]
    return keep(key, default)


def forget_settings(what: str) -> None:
    """Forget the remembered column choices of the trips or the area list (a file with other
    columns came)."""
    for k in [k for k in ss if str(k).startswith((f"od_set_{what}_", f"_w_od_set_{what}_"))]:
        del ss[k]


def sci(x: float) -> str:
    """1e-08 → 1e-8."""
    m, e = f"{x:.0e}".split("e")
    return f"{m}e{int(e)}"


def people(x: float | None) -> float | None:
    """A number of people for a table: whole numbers, one decimal below 10 (None if not finite)."""
    if x is None or not math.isfinite(x):
        return None
    return round(float(x), 1) if abs(x) < 10 else float(round(x))


def rho_of(eps: float, delta: float, conversion: str) -> float:
    """ρ-zCDP giving (ε, δ)-DP: the inverse of the classic bound ε = ρ + 2√(ρ ln(1/δ)) (the
    paper's Lemma 3), or the tighter Canonne–Kamath–Steinke conversion."""
    if conversion == "cks":
        return budget.approx_dp_to_zcdp(eps, delta)
    return budget.approx_dp_to_zcdp_classic(eps, delta)


def figure(key: tuple[Any, ...], build: Any) -> Any:
    """A figure of a release, built once and kept (the last :data:`FIGURES_KEPT` only)."""
    figs = ss.setdefault("od_figs", {})
    if key in figs:
        figs[key] = figs.pop(key)  # most recently used last
    else:
        figs[key] = build()
        while len(figs) > FIGURES_KEPT:
            figs.pop(next(iter(figs)))
    return figs[key]


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
    h = Hierarchy.from_frame(df, levels, codes="global", names={"county": "county_name", "tract": "tract_name"},
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
    store_ = ss.setdefault("od_raw", {})
    if key not in store_:
        with st.spinner(f"Reading {path.name} …"):
            store_[key] = read()
    return store_[key]


def _head(data: bytes, n: int = 65536) -> bytes:
    """The first bytes of an upload, unzipped (b"" if the gzip is damaged: the reader says so)."""
    if data[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=_io.BytesIO(data)) as f:
                return f.read(n)
        except (OSError, EOFError):
            return b""
    return data[:n]


def _one_column(data: bytes, name: str) -> pd.DataFrame:
    raw = gunzip_limited(data, name) if data[:2] == b"\x1f\x8b" else data
    text = decode_text(raw, name)  # UTF-16 was refused by read_upload
    try:
        df = pd.read_csv(_io.StringIO(text), dtype=str, sep=",")
    except pd.errors.ParserError as e:
        raise InputError(f"{name} could not be read as a list of area codes ({str(e).splitlines()[0]}). Give one "
                         "code per row, or one column per level separated by commas.") from None
    df.columns = [str(c).strip() for c in df.columns]
    return df


def read_upload(data: bytes, name: str, what: str) -> pd.DataFrame:
    """An uploaded trips table or area list, codes kept as text; its problems in O/D words."""
    head = _head(data)
    if head.startswith(UTF16_BOMS):
        raise InputError(f"{name} is a UTF-16 text file. Save it as UTF-8 (in a spreadsheet program: "
                         "'CSV UTF-8') and upload it again.")
    if head and head[:4] != b"PAR1":
        ctrl = sum(1 for b in head if b < 32 and b not in (9, 10, 13))
        if ctrl > max(2, len(head) // 100):
            raise InputError(f"{name} is not a text (CSV) file. Upload a CSV (optionally .gz) or Parquet file.")
    try:
        df = read_code_table(data, name)
    except InputError as e:
        if "single column" not in str(e):
            raise
        if what == "areas":  # one code column is an area list (its levels are code prefixes)
            return _one_column(data, name)
        raise InputError(
            f"{name} has a single column. O/D trips need an origin and a destination column (one trip per row), "
            "or origin, destination and a count column, separated by commas, semicolons or tabs. Check the "
            "file, then choose the origin and destination columns.") from None
    if df.empty:
        raise InputError(f"{name} has a header but no rows. Upload the file with its data.")
    return df


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


def _bounds_changed(i: int) -> None:
    """A boundary file was uploaded or removed by the curator (not merely undrawn)."""
    f = ss.get(f"od_bounds_{i}")
    files = ss.setdefault("od_bounds_files", {})
    if f is None:
        files.pop(i, None)
    else:
        files[i] = (f.getvalue(), f.name, f.file_id)


def release_now(token: int, **job: Any) -> None:
    """on_click of the Release button: claim its one-time token, then charge and release.

    The release runs in the callback on purpose: Streamlit runs callbacks before the script, so a
    rerun asked for meanwhile (a second click, a widget change) waits for it.  Streamlit 1.67 may
    still stop a callback at a read or write of st.session_state, so none happens between the
    charge and the storing of the release.  (Releasing in the
    script body with a progress bar could be interrupted between the charge and the storing by a
    rapid second click: the budget was spent and the release was gone.)  ``token`` is the one the
    button was drawn with (it is in the button's key too), so a second click on the same button
    finds it used, or the button gone, and releases nothing.
    """
    if token != ss.get("od_release_token"):
        return
    ss["od_release_token"] = token + 1
    # Streamlit 1.67 can stop a callback at any read or write of st.session_state (a second click
    # asks for a rerun): everything the release needs is read before the charge, and nothing between
    # the charge and the storing of the release touches st.session_state.
    fp_, model_ = job["fp"], job["model"]
    releases, led = ss["od_releases"], ss["od_ledgers"][fp_]
    try:
        rel_ = release_od(model_["counts"], job["mech"], job["cost"], led,
                          split=job["split"], weights=job["weights"], session=state.session(), **job["opts"])
    except DPCoreError as e:
        ss["od_release_error"] = str(e)
        return
    releases.setdefault(fp_, []).append({
        "release": rel_, "fp": fp_, "view": model_["view"], "model": model_, "name": model_["name"],
        "cost_label": job["cost_label"], "delta": job["delta"], "approx": job["approx"], "exports": {}})
    extra = {"budget_input": job["approx"]} if job["approx"] else None
    remember_release("od", fp_, rel_.release_id,
                     {"mechanism": od.get(job["mech"]).title, "cost": job["cost_label"],
                      "levels": [lv.name for lv in rel_.plan.levels]},  # no file name (issue 18)
                     {"release.csv": od_export.release_csv_bytes(rel_),
                      "release.json": od_export.od_json(rel_, led, delta=job["delta"], extra=extra,
                                                        files=["release.csv", "release.json"])}, led)
    ss["od_just_released"] = job["cost_label"]


def shown_entry(model: dict[str, Any]) -> dict[str, Any] | None:
    """The release to show for the loaded data: the latest one made with the same area list and
    unit of privacy, else the latest one of these trips."""
    entries = ss["od_releases"].get(model["fp"], [])
    same = [e for e in entries if e["view"] == model["view"]]
    return (same or entries or [None])[-1]


def table_name(lp: od.ODLevelPlan, unit: str) -> str:
    """A tree level's table in words: 'region → district', 'total (all trips) · public, exact'."""
    if lp.kind == "total":
        return f"total (all {unit})" if lp.measured else "total · exact, public"
    return f"{lp.origin_level} → {lp.destination_level}" + ("" if lp.measured else " · copy of the level above")


PLAN_CAPTION = ("'region → district' is the table of flows from each region (origin) to each district "
                "(destination); release.csv names it region>district. **Typical largest error** is what the largest "
                "error over a table usually comes to (it can be exceeded); the **guaranteed 95 % bound** is a "
                "promise: the largest error stays below it with probability 95 % (only for the exact projections of "
                "InfTDA and its MILP baseline, so '–' otherwise). ")


def plan_table(pl: od.ODPlan, unit_: str, full: bool = False) -> pd.DataFrame:
    """The data-free plan per table, numbers as numbers (they sort), rounded for people; ``full``
    (the Errors tab) shows the possible pairs instead of the budget shares."""
    return pd.DataFrame([{
        "table": table_name(lv, unit_),
        **({"possible pairs": lv.pairs} if full else
           {"budget share": float(f"{lv.share:.2g}") if lv.measured else None}),
        "noise per cell (SD)": people(lv.noise_sd) if lv.measured else None,
        "error per flow (RMSE)": people(lv.sd),
        "typical largest error": people(lv.max_abs),
        "guaranteed 95 % bound": people(lv.bound),
        "unreliable below": people(lv.unreliable_below),
    } for lv in pl.levels])


def plan_columns(pl: od.ODPlan, unit_: str) -> dict[str, Any]:
    sym_ = "ε" if pl.cost is not None and pl.cost.definition == "pure" else "ρ"
    num = st.column_config.NumberColumn
    return {
        "table": st.column_config.TextColumn(
            "table", width=150, help="Origin level → destination level: the flows from each origin area to each destination "
                          "area. release.csv names it origin>destination (e.g. region>district)."),
        "possible pairs": num(format="localized", help="Origin areas × destination areas of this table."),
        "budget share": num(f"budget share ({sym_})", format="%.2g",
                            help="The part of this release's budget spent on this table (none: not measured)."),
        "noise per cell (SD)": num(format="localized", help=f"Standard deviation of the noise added to each flow "
                                                            f"of this table, in {unit_}."),
        "error per flow (RMSE)": num(format="localized", help=f"Typical error of one released flow (root mean "
                                                              f"square) after the tables are made consistent, in "
                                                              f"{unit_}."),
        "typical largest error": num(format="localized", help=f"About the largest error over all the table's "
                                                              f"possible pairs, in {unit_}; can be exceeded."),
        "guaranteed 95 % bound": num(format="localized", help=f"The largest error stays below this with probability "
                                                              f"95 %, in {unit_} (InfTDA and the MILP baseline only)."),
        "unreliable below": num(format="localized", help=f"Released flows below this many {unit_} (about twice the "
                                                         "noise) may be noise."),
    }


def short_name(lp: od.ODLevelPlan) -> str:
    return "total" if lp.kind == "total" else f"{lp.origin_level} → {lp.destination_level}"


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
    source = st.radio("Data", list(sources), format_func=sources.get, key=keep_choice("source", list(sources), DEMO))
    kept("source")
    inputs: dict[str, Any] | None = None
    if source == DEMO:
        pub = demo_public()
        if "od_demo_flows" not in ss:
            ss["od_demo_flows"] = synthetic.demo_od()[1]
        inputs = {"key": (DEMO,), "name": "O/D demo (made up)", "pub": pub, "df": ss["od_demo_flows"],
                  "unit": "trips", "cols": {"origin": "origin", "destination": "destination", "count": "count"}}
        st.caption("Made-up trips between 576 square zones (a gravity model: many short trips, few long ones); "
                   "no real person. The zone list is the made-up public geography.")
    elif source == NYC:
        pub = nyc_public()
        df = session_table(NYC, lambda: pd.read_csv(NYC_TRIPS, dtype=str, usecols=["PULocationID", "DOLocationID"]),
                           NYC_TRIPS)
        inputs = {"key": (NYC,), "name": "NYC green taxi trips, April 2020", "pub": pub, "df": df, "unit": "trips",
                  "cols": {"origin": "PULocationID", "destination": "DOLocationID"}, "trips": True}
        st.caption("One row per trip, pick-up zone → drop-off zone (NYC TLC). The area list is the TLC's public "
                   "taxi-zone lookup (265 zones, the two 'unknown' ones included). The file has no person id, so "
                   "every trip counts as a different person (event-level privacy).")
    elif source == US:
        pub = us_public()

        def _read_us() -> pd.DataFrame:
            f = pd.read_csv(US_FLOWS, dtype=str, usecols=["h_fips", "w_fips", "workplace_kind", "flow"])
            return f[f["workplace_kind"] == "us_county"].reset_index(drop=True)

        df = session_table(US, _read_us, US_FLOWS)
        inputs = {"key": (US,), "name": "US county commuting, ACS 2009–2013", "pub": pub, "df": df, "unit": "workers",
                  "cols": {"origin": "h_fips", "destination": "w_fips", "count": "flow"}}
        st.caption("Workers by home county → work county (Census Bureau, only workplaces in a US county or PR "
                   "municipio). These are survey estimates, treated here as counts of people, one commute each. "
                   "The area list is the 2010 county boundary file (every county).")
    elif source == RI:
        pub = ri_public()
        df = session_table(RI, lambda: pd.read_csv(RI_OD, dtype=str, usecols=["h_geocode", "w_geocode", "S000"]),
                           RI_OD)
        inputs = {"key": (RI,), "name": "Rhode Island LODES 2019", "pub": pub, "df": df, "unit": "workers",
                  "cols": {"origin": "h_geocode", "destination": "w_geocode", "count": "S000"}}
        st.caption("Jobs by home block → work block within Rhode Island (LEHD LODES 7, all jobs). The area list is "
                   "the LODES block crosswalk (every 2010 block); levels are prefixes of the block code. Map "
                   "positions are the blocks' public internal points. LODES is itself already noise-infused.")
    else:
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
                        new_df = (read_upload(upl.getvalue(), upl.name, what) if big is None else
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
        tdf, adf = ss.get("od_trips_df"), ss.get("od_areas_df")
        if tdf is None or adf is None:
            st.info("Upload the trips and the public area list to continue, or pick a data set above. "
                    "Earlier releases are kept.")
        else:
            tcols = [str(c) for c in tdf.columns]
            acols = [str(c) for c in adf.columns]
            problems: list[str] = []
            waiting: list[str] = []
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
            else:
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
            st.markdown("**Public area list**")
            a_codes = [c for c in acols if not (count_like(c) or coord_like(c) or name_like(c)
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
                                         help="The code columns of the geography, top level first (e.g. region, "
                                              "district, zone); not coordinates, names or counts.")
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
            inputs = {"key": (UPLOAD, ss["od_trips_df_id"], ss["od_areas_df_id"], kind, ocol, dcol, ccol, pcol, m,
                              distinct, shape, tuple(lv_cols), prefix, lon_c, lat_c,
                              tuple((k, v[2]) for k, v in sorted(bounds_up.items()))),
                      "name": ss.get("od_trips_name", "upload"), "pub": None, "df": tdf, "unit": "trips",
                      "cols": {"origin": ocol, "destination": dcol, "count": ccol, "user": pcol}, "m": m,
                      "distinct": distinct, "trips": kind == "trips",
                      "areas": {"df": adf, "shape": shape, "levels": lv_cols, "prefix": prefix, "lon": lon_c,
                                "lat": lat_c, "bounds": bounds_up}}
            if shape == "levels" and not lv_cols:
                waiting.append("Choose the level columns of the area list (top level first) to continue.")
            for msg in problems:
                st.error(msg)
            for msg in waiting:
                st.info(msg)
            if problems or waiting:
                inputs = None

    # -------------------------------------------------- unit of privacy (public choice)
    if inputs is not None and source != UPLOAD:
        st.caption(f"Unit of privacy: **one {'trip' if inputs['unit'] == 'trips' else 'worker'}**: "
                   + ("every trip is taken to be a different person." if inputs.get("trips") else
                      "the counts cannot say which trips belong to one person, so each is a different person."))

    model = None
    if inputs is not None:
        key = inputs["key"]
        models = ss.setdefault("od_models", {})  # confidential counts: this session only
        if key in models:
            model = models[key] = models.pop(key)  # most recently used last
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
                            h = hierarchy_from_prefixes(a["df"][code_col], lens, nm, source="area list")
                        xy, frames, notes = {}, {}, []
                        area_desc = "your uploaded public area list"
                        if a["lon"] != NONE and a["lat"] != NONE:
                            codes = (a["df"][a["prefix"][0]] if a["shape"] == "prefix" else
                                     a["df"][a["levels"][-1]] if h.code_modes[-1] == "global" else
                                     a["df"][a["levels"]].astype(str).agg("/".join, axis=1))
                            xy = od_export.centroids_from_points(h, codes, a["df"][a["lon"]], a["df"][a["lat"]])
                        for d, b in a["bounds"].items():
                            if d > h.depth:
                                continue
                            gdf = read_boundaries(b[0], b[1])
                            lon, lat, unmatched = od_export.centroids_from_boundaries(h, d, gdf)
                            xy[d] = (lon, lat)
                            frames[d] = gdf
                            if unmatched:
                                notes.append(f"{h.level_names[d]}: {fmt.count(len(unmatched))} areas without a "
                                             "boundary; their flows are not drawn")
                        check_code_column(inputs["df"], inputs["cols"]["origin"], "origin", h)
                        check_code_column(inputs["df"], inputs["cols"]["destination"], "destination", h)
                    cols = inputs["cols"]
                    src = ss.get("od_trips_src") if source == UPLOAD else None
                    if src is not None:  # a large upload: DuckDB groups the rows, with the person cap
                        bar = st.progress(0.0, text=f"Counting the trips of {inputs['name']} with DuckDB …")
                        user_col = cols.get("user")
                        cc = engines.get_engine("duckdb").code_counts(
                            src, [cols["origin"], cols["destination"]], count=cols.get("count"), user=user_col,
                            cap=inputs.get("m", 1) if user_col else None, distinct=inputs.get("distinct", True),
                            progress=lambda f, msg: bar.progress(min(max(f, 0.0), 1.0), text=msg))
                        bar.empty()
                        counts = ODCounts.from_code_counts(cc, h, max_trips=inputs.get("m", 1) if user_col else 1,
                                                           persons=bool(user_col),
                                                              distinct=inputs.get("distinct", True))
                    else:
                        counts = ODCounts.from_frame(
                            inputs["df"], h, origin=cols["origin"], destination=cols["destination"],
                            count=cols.get("count"), user=cols.get("user"), max_trips=inputs.get("m", 1),
                            distinct=inputs.get("distinct", True))
                    if counts.total == 0:
                        raise InputError("No trips are counted: the table holds no trips (all counts are 0).")
                    if not counts.fingerprint:  # the budget must follow the trips, never a fresh key
                        raise InputError("The trips could not be fingerprinted, so their budget cannot be kept.")
                model = {"h": h, "counts": counts, "xy": xy, "boundaries": frames, "notes": notes,
                         "fp": counts.fingerprint, "view": (h.fingerprint(), counts.max_trips, counts.distinct),
                         "name": inputs["name"], "unit": inputs["unit"], "area_desc": area_desc,
                         "df": inputs["df"], "user": inputs["cols"].get("user"), "demo": inputs["key"] == (DEMO,)}
                models[key] = model
                while len(models) > MODELS_KEPT:
                    models.pop(next(iter(models)))
            except DPCoreError as e:
                st.error(str(e))
                st.caption("Fix the input and the page picks it up; earlier releases are kept.")
        if model is not None:
            ss["od_model"], ss["od_model_key"] = model, key
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
                                              if counts.max_trips > 1 or model["user"] else
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
            st.dataframe(model["df"].head(8), hide_index=True, key="od_head")

if model is None:
    ss["od_shown"] = None
    for tab in (tab_mech, tab_map, tab_err, tab_exp):
        with tab:
            st.info("Load O/D data on the Data tab first. Earlier releases are kept.")
    st.stop()

h: Hierarchy = model["h"]
counts: ODCounts = model["counts"]
fp = model["fp"]
unit = model["unit"]

# ============================================================================ mechanism
with tab_mech:
    mech = st.selectbox("Mechanism", MECHS, format_func=lambda n: od.get(n).title, key=keep("mech", "inftda"))
    kept("mech")
    info = od.get(mech)
    st.caption(f"{info.description} **When to use:** {info.when} *({info.paper})*")
    st.caption("The stability histogram (SH) is not offered here: it is (ε, δ)-DP, and its cost cannot be added "
               "to this data set's budget ledger (compare with it in the benchmarks).")
    # persistent: the same trips find the same budget (their population's, once bound) in every tab and after
    # restarts
    if model.get("demo"):
        state.mark_demo("od", fp)  # the made-up demo's budget lives with the session
    led = budget_ui.population_input("od", fp, budget.zcdp(DEFAULT_RHO_CAP), ss["od_ledgers"], f"od_{fp}")
    population = state.population_of("od", fp)
    locked = bool(led.entries)
    wdef = keep("definition", "rho")  # the default release: half the default cap, as for every kind
    if locked and FAMILY[ss[wdef]] != led.definition:
        ss[wdef] = "approx" if led.definition == "zcdp" else "pure"
    c1, c2, c3 = st.columns(3)
    definition = c1.radio("Privacy definition", list(DEFS), format_func=DEFS.get, key=wdef)
    kept("definition")
    if locked:
        c1.caption(f"This {'population' if population else 'data set'}'s budget is kept in "
                   f"{'ρ (zCDP)' if led.definition == 'zcdp' else 'ε'}: budget was already spent under it.")
    elif FAMILY[definition] != led.definition:
        budget_ui.switch_definition(led, FAMILY[definition], {"pure": DEFAULT_EPS_CAP, "zcdp": DEFAULT_RHO_CAP})
    delta = 1e-8
    approx_note: dict[str, Any] = {}
    try:
        if definition == "approx":
            eps = c2.number_input("ε of this release", min_value=0.01, max_value=20.0, step=0.1, format="%.2f",
                                  key=keep("eps", 1.0), help="Smaller: more privacy, more noise. The paper uses 0.1, 1, 10.")
            kept("eps")
            delta = c2.select_slider("δ", [1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5], key=keep("delta", 1e-8),
                                     format_func=sci, help="The chance the ε bound may fail; "
                                     "far below 1 / the number of people.")
            kept("delta")
            conv = c2.radio("Conversion", list(CONVERSIONS), format_func=CONVERSIONS.get, key=keep("conversion", "classic"),
                            horizontal=True)
            kept("conversion")
            rho = rho_of(eps, delta, conv)
            cost = budget.zcdp(rho)
            approx_note = {"epsilon": eps, "delta": delta, "conversion": conv, "rho": rho}
            how = "the paper's conversion" if conv == "classic" else "the CKS conversion"
            c2.caption(f"ρ = {rho:.4g} (zCDP) guarantees (ε = {fmt.eps(eps)}, δ = {sci(delta)})-DP by {how}.")
            cost_label = f"ρ = {rho:.3g} (from ε = {fmt.eps(eps)}, δ = {sci(delta)} by {how})"
        elif definition == "rho":
            rho = c2.number_input("ρ of this release", min_value=1e-5, max_value=10.0, step=0.001, format="%.4f",
                                  key=keep("rho", state.DEFAULT_RHO),
                                  help="zCDP budget; ρ ≈ 0.0132 is (ε = 1, δ = 1e-8), the paper's setting.")
            kept("rho")
            delta = c2.select_slider("δ for the (ε, δ) reading", [1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5],
                                     key=keep("delta_read", 1e-8), format_func=sci)
            kept("delta_read")
            cost = budget.zcdp(rho)
            c2.caption(f"Reads as (ε ≈ {fmt.eps(budget.zcdp_to_approx_dp(rho, delta))}, δ = {sci(delta)})-DP "
                       "(CKS conversion).")
            cost_label = f"ρ = {rho:.3g}"
        else:
            eps = c2.number_input("ε of this release", min_value=0.01, max_value=20.0, step=0.1, format="%.2f",
                                  key=keep("eps_pure", state.DEFAULT_EPSILON),
                                  help="Pure ε-DP: discrete Laplace noise, no δ.")
            kept("eps_pure")
            cost = budget.pure(eps)
            cost_label = cost.label()
    except DPCoreError as e:  # not reachable through the inputs' own limits; kept for safety
        st.error(str(e))
        cost, cost_label = None, "(fix the budget above)"
    ss["od_delta"] = delta
    sym = led.cap.symbol
    budget_ui.cap_input(led, f"od_cap_{fp}_{led.definition}", c3, label="Budget cap of this data set",
                        min_value=0.0001, step=0.01, fmt_str="%.4f", population=population)
    if led.definition == "zcdp":
        c3.caption(f"Cap ρ = {led.cap.value:.4g} reads as ε ≈ "
                   f"{fmt.eps(budget.zcdp_to_approx_dp(led.cap.value, delta))} at δ = {sci(delta)} (CKS conversion; "
                   f"ε = {fmt.eps(budget.zcdp_to_approx_dp_classic(led.cap.value, delta))} by the paper's).")
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

    if p is not None:
        st.subheader("Expected error per table (before release)")
        st.dataframe(plan_table(p, unit), hide_index=True, key="od_plan_table", column_config=plan_columns(p, unit),
                     placeholder="–")
        st.bar_chart(pd.DataFrame({"table": [short_name(lv) for lv in p.levels[1:]],
                                   "error per flow (RMSE)": [lv.sd for lv in p.levels[1:]],
                                   "typical largest error": [lv.max_abs for lv in p.levels[1:]]}),
                     x="table", y_label=unit, x_label="", horizontal=True, sort=False, stack=False,
                     height=60 + 36 * (len(p.levels) - 1))
        st.caption(PLAN_CAPTION + f"All errors are in {unit} per area pair and come from the budget, the unit of "
                   f"privacy and the public area list only, not from the data ({p.levels[-1].basis}).")
    slot = st.empty()
    can = cost is not None and led.can_spend(cost)
    left = led.remaining - (led.charge_of(cost) if can else 0.0)
    label = f"Release with {cost_label} — {led.cap.symbol} = {fmt.eps(max(left, 0.0))} left after this"
    token = ss["od_release_token"]
    # The token is in the key too: a click on the button as drawn before a release (a second
    # click arriving while the page is redrawn) is a click on a widget that no longer exists.
    slot.button(label, type="primary", disabled=not (can and weights_ok and p is not None),
                key=f"od_release_button_{token}", on_click=release_now, args=(token,),
                kwargs={"fp": fp, "model": model, "mech": mech, "cost": cost, "split": split, "weights": weights,
                        "opts": opts, "cost_label": cost_label, "delta": delta, "approx": approx_note},
                help="Spends the budget shown, once: the noise is drawn on this click only.")
    if ss.get("od_just_released"):
        st.toast(f"Released with {ss.pop('od_just_released')}. See the Map, Errors and Export tabs.")
    if ss.get("od_release_error"):
        st.error(ss.pop("od_release_error"))
    if cost is not None and not can:
        st.error(f"Not enough budget left: {led.cap.symbol} = {fmt.eps(led.remaining)} of "
                 f"{fmt.eps(led.cap.value)} is left, and this release needs {cost.label()}. Lower the budget of this "
                 "release, or raise the cap if your privacy policy allows it.")
    st.caption(f"Spent on {f'the population {population}' if population else 'these trips'}: {led.cap.symbol} = "
               f"{fmt.eps(led.spent)} of {fmt.eps(led.cap.value)} "
               f"({len(led.entries)} release{'s' if len(led.entries) != 1 else ''}). The budget belongs to the trips "
               "themselves: loading them again, in another file or with another area list, draws on the same budget.")

entry = shown_entry(model)
ss["od_shown"] = entry
if entry is None:
    for tab in (tab_map, tab_exp):
        with tab:
            st.info("Nothing released yet for this data: release on the Mechanism & budget tab.")
elif entry["view"] != model["view"]:
    for tab in (tab_map, tab_exp):
        with tab:
            st.info("This is the latest release of these trips. It was made with another area list or unit of "
                    "privacy than the Data tab now shows, and is shown as it was made. Release again to publish "
                    "with the new settings.")

# ============================================================================ map
if entry is not None:
    rel: od.ODRelease = entry["release"]
    em = entry["model"]  # the settings the release was made with
    eh, eunit = em["h"], em["unit"]
    with tab_map:
        st.caption(f"{rel.mechanism.title}, {entry['cost_label']} · released {rel.created.replace('+00:00', '')} UTC")
        T = rel.depth
        lps = rel.plan.levels
        intra = [t for t in range(1, T + 1) if lps[t].kind == "intra" and eh.sizes[lps[t].origin_depth] <= MAX_MAP_AREAS]
        default_t = intra[-1] if intra else 1
        c1, c2 = st.columns([2, 3])
        t = c1.selectbox("Table (tree level)", list(range(1, T + 1)),
                         key=keep_choice(f"map_level_{fp}", list(range(1, T + 1)), default_t),
                         format_func=lambda i: f"{short_name(lps[i])} · {fmt.count(rel.values[i].size)} flows released")
        kept(f"map_level_{fp}")
        top = c2.slider("Show the largest N flows", 10, 1000, step=10, key=keep("top", 200),
                        help="The N largest flows between two different areas are drawn as lines, and the N largest "
                             "flows within one area as circles.")
        kept("top")
        within = c2.checkbox("Show flows within one area as circles", key=keep("within", True))
        kept("within")
        lp = lps[t]
        od_, dd = lp.origin_depth, lp.destination_depth
        xy = em["xy"]
        has_xy = od_ in xy and dd in xy and min(od_, dd) > 0
        cmap, cside = st.columns([3, 2]) if max(eh.sizes[od_], eh.sizes[dd]) <= od_figures.MAX_HEATMAP_SIDE else (st, None)
        if has_xy:
            def _flow_map() -> Any:
                frames = em["boundaries"]  # public outlines: the finest ones up to this level, and the top level
                bg = []
                if frames:
                    upto = [d for d in sorted(frames) if d <= max(od_, dd)] or [min(frames)]
                    bg = [frames[upto[-1]]] + ([frames[min(frames)]] if min(frames) != upto[-1] else [])
                return od_figures.flow_map(rel, t, xy, boundaries=bg or None, top=top, within=within, unit=eunit)

            cmap.plotly_chart(figure((rel.release_id, "map", t, top, within), _flow_map), key="od_map",
                              config={"displayModeBar": False})
            cmap.caption(f"Lines: the {top} largest released flows of '{short_name(lp)}' ({lp.origin_level} → "
                         f"{lp.destination_level}) between two areas, thicker = more {eunit}, arcs bend to the right "
                         "of their direction and end in a dot at the destination"
                         + (f"; circles: the {top} largest flows within one area" if within else "")
                         + ". Hover: the noisy count. Positions are public area centres.")
        elif min(od_, dd) == 0:
            cmap.info(f"In '{short_name(lp)}' one end is the whole territory (the total), which has no place on a "
                      "map: the matrix and the table below show these flows.")
        else:
            cmap.info("No positions for these areas (add longitude/latitude columns or boundaries to the area list "
                      "on the Data tab); the table below lists the largest flows.")
        if cside is not None:
            log = cside.checkbox("Logarithmic colours", key=keep("heat_log", True))
            kept("heat_log")
            cside.plotly_chart(figure((rel.release_id, "heat", t, log),
                                      lambda: od_figures.od_heatmap(rel, t, log=log, unit=eunit, height=520)),
                               key="od_heatmap")
            cside.caption(f"Origin ({lp.origin_level}, rows) × destination ({lp.destination_level}, columns); "
                          "blank: released as 0.")
        st.info(f"At this level, flows below about **{fmt.num(lp.unreliable_below)} {eunit}** are unreliable (about "
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
    eunit = entry["model"]["unit"] if entry is not None else unit
    st.subheader("Expected error of the release (analytic, data-free)" if entry is not None
                 else "Expected error (analytic, data-free)")
    st.dataframe(plan_table(shown, eunit, full=True), hide_index=True, key="od_err_plan",
                 column_config=plan_columns(shown, eunit), placeholder="–")
    st.caption(PLAN_CAPTION + shown.levels[-1].basis + ". Publishable: it uses no data.")
    if entry is not None:
        rel = entry["release"]
        st.subheader("Empirical error of the release · curator only, not for publication")
        st.warning("These numbers compare the release with your confidential data. Do not publish them, and do not "
                   "re-run releases until they look good: that choice is not covered by the privacy budget.")
        if "empirical" not in entry:
            entry["empirical"] = empirical_errors(rel, entry["model"]["counts"])  # curator only, computed once
        emp = entry["empirical"]
        lps = rel.plan.levels

        def pct(x: float | None) -> float | None:
            return None if x is None or not math.isfinite(x) else round(float(x), 1)

        num = st.column_config.NumberColumn
        name_col = st.column_config.TextColumn("table", width=150)
        st.markdown("**Errors: measured and expected**")
        st.dataframe(pd.DataFrame([{
            "table": short_name(lps[e["tree_level"]]),
            "largest error · measured": people(e["max_abs_error"]),
            "typical largest error · expected": people(e["expected_max_abs"]),
            "error per flow (RMSE) · measured": people(e["rmse_all_pairs"]),
            "error per flow (RMSE) · expected": people(e["expected_rmse"]),
        } for e in emp]), hide_index=True, key="od_err_emp", placeholder="–", column_config={
            "table": name_col,
            **{c: num(format="localized") for c in ("largest error · measured", "typical largest error · expected",
                                                    "error per flow (RMSE) · measured",
                                                    "error per flow (RMSE) · expected")}})
        st.caption(f"In {eunit} per area pair: measured on your data, next to what the plan expected (the columns of "
                   "the same names above). The RMSE is over all possible pairs of the table; the largest error over "
                   "the pairs positive in the data or the release.")
        st.markdown("**Flows made up and flows lost**")
        st.dataframe(pd.DataFrame([{
            "table": short_name(lps[e["tree_level"]]),
            "released flows not in the data (%)": pct(e["fdr_percent"]),
            "true flows released as 0 (%)": pct(e["fnr_percent"]),
            "released flows": e["released_pairs"],
            "true flows": e["true_pairs"],
        } for e in emp]), hide_index=True, key="od_err_emp_flows", placeholder="–", column_config={
            "table": name_col,
            "released flows not in the data (%)": num(format="%.1f %%", help="Of the flows released > 0, the share "
                                                                              "nobody travelled (false positives)."),
            "true flows released as 0 (%)": num(format="%.1f %%", help="Of the real flows, the share released as 0 "
                                                                        "(false negatives)."),
            "released flows": num(format="localized", help="Area pairs released with a count above 0."),
            "true flows": num(format="localized", help="Area pairs with at least one trip in your data."),
        })
        with st.expander("More measured errors · curator only, not for publication"):
            st.dataframe(pd.DataFrame([{
                "table": short_name(lps[e["tree_level"]]),
                "mean error (flows in the data or the release)": people(e["mean_abs_error"]),
                "median relative error (%)": pct(100 * e["median_relative_error"]),
                "95th percentile relative error (%)": pct(100 * e["p95_relative_error"]),
                "released flows not in the data": e["false_positives"],
                "true flows released as 0": e["false_negatives"],
            } for e in emp]), hide_index=True, key="od_err_emp_more", placeholder="–",
                column_config={"table": name_col,
                               "released flows not in the data": num(format="localized"),
                               "true flows released as 0": num(format="localized")})
            st.caption("Relative error: |released − true| / true, over the real flows.")

# ============================================================================ export
if entry is not None:
    rel = entry["release"]
    with tab_exp:
        ex = entry["exports"]
        xy = entry["model"]["xy"]
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
            extra = {"budget_input": entry["approx"]} if entry["approx"] else None
            built["json"] = od_export.od_json(rel, ss["od_ledgers"][entry["fp"]], delta=entry["delta"], extra=extra,
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
            c3.caption("No flows.geojson: the areas have no positions (see the Data tab).")
        st.markdown("**release.csv** (first rows): every released flow of every level; flows released as 0 are "
                    "not listed.")
        st.dataframe(pd.read_csv(_io.BytesIO(ex["csv"]), dtype=str, nrows=12), hide_index=True,
                     key="od_csv_preview")
        if "geojson_n" in ex:
            st.caption(f"flows.geojson: {fmt.count(ex['geojson_n'])} flow lines, one per released flow of every level "
                       "with positions at both ends (origin centre → destination centre), with the CSV's columns as "
                       "properties.")
        with st.expander("Release record (release.json)"):
            st.json(ex["json"].decode("utf-8"), expanded=1)
        st.caption("Nothing in these files comes from your data unnoised, except the total number of trips when "
                   "the plan makes it public (bounded neighbours, one trip per person). No file name is written.")
