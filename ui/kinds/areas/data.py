"""Counts over areas, Data step: which table, where it comes from, whom it protects, the public areas.

A hierarchy of areas (TopDown and its kin) is read here; a census table with attributes (Privelet,
marginal tables) is read by :mod:`ui.kinds.areas.data_table`.  Either way the confidential model is
built once and kept for the later steps (:mod:`ui.kinds.areas.common`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from dpcore.areas import census_tables
from dpcore.areas import figures as area_figures
from dpcore.areas.counts import HierarchyCounts
from dpcore.data import engines, synthetic
from dpcore.data.area_boundaries import boundary_names, join_boundaries
from dpcore.data.boundaries import read_boundaries
from dpcore.data.code_tables import read_code_table
from dpcore.data.columns import guess_level_columns, name_key, name_like
from dpcore.data.hierarchy import Hierarchy, check_area_frame, require_public_area_list
from dpcore.data.memory import release_unused
from dpcore.errors import DPCoreError, InputError
from ui import charts, fmt, frame, state
from ui.kinds.areas import common
from ui.kinds.areas import series as areas_series
from ui.kinds.areas.common import US_COUNTIES, US_STATES, US_TRACTS, keep, kept
from ui.kinds.areas.plan import selection
from ui.source_ui import keep_copy, read_code_upload
from ui.state import seed
from ui.steps import Steps

ss = st.session_state
DEMO = "demo"
US = "us"
UPLOAD = "upload"
AREA_TABLE = "table"
AREA_UPLOAD = "upload"
#: the name choice that takes a level's names from its boundary file (the default without a name column)
BOUNDARY_NAMES = "(from the boundary file)"
#: A table of more rows than this shows the steps of reading it (st.status).
PROGRESS_ROWS = 200_000


def data_step() -> None:
    """The Data step for counts over areas (the page script is pages/data.py)."""
    what = st.radio("Which table?", list(common.TABLES), format_func=common.TABLES.get, horizontal=True,
                    key=state.persistent("areas_table", common.HIERARCHY))
    state.store("areas_table")
    if what == common.TABLE:
        from ui.kinds.areas import data_table

        data_table.data_step()
    else:
        _hierarchy_data()
    frame.link("plan", "Next: plan the release →")


def _hierarchy_data() -> None:
    st.subheader("1. Areas and counts")
    sources = {DEMO: "Made-up demo geography (576 zones)"}
    if US_TRACTS.exists():
        sources[US] = "US census tracts 2020 (public Census Bureau counts, 85,395 tracts)"
    sources[UPLOAD] = "Upload a table"
    source = st.radio("Data", list(sources), format_func=sources.get, key=keep("source", DEMO), horizontal=True)
    kept("source")
    inputs = _demo() if source == DEMO else _us() if source == US else _upload()
    st.subheader("2. Unit of privacy")
    st.markdown("Each **person** counted is protected: the release hides whether any one person is in the table "
                "(with group sizes, which group a person belongs to). The Plan step chooses whether the grand "
                "total itself is public.")
    if inputs is not None:
        _build(inputs)
    m = common.model()
    if m is None:
        return
    if inputs is None:
        st.caption(f"In use until then: {m['name']} ({fmt.sizes_line(m['h'].level_names[1:], m['h'].sizes[1:])}).")
        return
    h, counts = m["h"], m["counts"]
    st.subheader("3. Public areas")
    st.success(f"{m['name']}: " + fmt.sizes_line(h.level_names[1:], h.sizes[1:])
               + (f"; group sizes {', '.join(counts.size_labels)}" if counts.statistic == "group_sizes" else ""))
    st.caption(f"Area list: {h.source}. Codes: " + ", ".join(
        f"{common.level_label(lv)} {'unique' if md == 'global' else 'unique within the area above'}"
        for lv, md in zip(h.levels, h.code_modes, strict=True)) + ".")
    for msg in m["join_msgs"]:
        st.warning(msg + ". They are listed, not dropped: every area is still released; only the map misses them.")
    if m["joins"]:
        st.caption("Boundaries for the map: " + ", ".join(common.level_label(lv) for lv in m["joins"]) + ".")
        extent_map(m)
    else:
        st.caption("No map of the areas: no boundaries were given for any level (upload a boundary file per "
                   "level to see the areas and to map the release).")
    st.markdown("**First rows** · confidential, not for publication")
    head = m.get("head")
    if head is not None:
        st.dataframe(head, hide_index=True, key="hier_head")
    areas_series.data_controls(m, selection(parse_only=True).unit)


def extent_map(m: dict[str, Any]) -> None:
    """The public extent: the boundaries of every level that has them on an offline map (no counts), drawn
    once per table and boundaries and kept in the session."""
    h, joins = m["h"], m["joins"]
    key = (h.fingerprint(), tuple(joins))

    def make() -> go.Figure | charts.BuiltFigure:  # its dict made once; a shipped geography's once per server
        frames = [joins[lv].frame for lv in sorted(joins, key=h.depth_of)]
        return _shipped_extent(key, frames) if m["inputs"]["id"] in (DEMO, US) else area_figures.extent_figure(frames)

    st.plotly_chart(charts.kept("hier_extent", key, make), key="hier_extent_map", config={"displayModeBar": False})


@charts.shared_figure
def _shipped_extent(key: tuple[Any, ...], _frames: list[Any]) -> go.Figure:
    """The extent map of a geography shipped with the app (the made-up demo's, the US tracts' states and
    counties), keyed by its codes and levels: public files, the same map for every session, so made once
    per server (an uploaded table's is made in its own session)."""
    return area_figures.extent_figure(_frames)


@st.cache_resource(show_spinner=False)
def _demo_geography() -> tuple[Any, dict[str, Any]]:
    """The made-up demo geography and its counts (:func:`dpcore.data.synthetic.synthetic_hierarchy`:
    seeded, the same in every session), made once per server as the other demos (issue 28 item 5);
    read only, never changed."""
    return synthetic.synthetic_hierarchy()


def _demo() -> dict[str, Any]:
    if "hier_demo" not in ss:
        ss["hier_demo"] = _demo_geography()
    df_demo, bounds_demo = ss["hier_demo"]
    return {"id": DEMO, "name": "demo geography (made up)", "df": df_demo, "levels": ["region", "district", "zone"],
            "count": ["population"], "area_source": AREA_TABLE, "boundaries": bounds_demo, "areas_df": None}


def _us() -> dict[str, Any]:
    if "hier_us" not in ss:
        ss["hier_us"] = _public_table(str(US_TRACTS))
    us_bounds = {lv: path for lv, path in (("STATEFP", US_STATES), ("COUNTYFP", US_COUNTIES)) if path.exists()}
    st.caption("The Census Bureau's tract file lists every tract, the 614 empty ones included, so it serves "
               "as the public area list. State and county boundaries are the 2010 cartographic files; four "
               "county codes changed since and are listed as unmatched. State and county names come from the "
               "Census Bureau's public lookup table (STATEFP, COUNTYFP: the FIPS codes of state and county).")
    return {"id": US, "name": "US tracts 2020", "df": ss["hier_us"], "levels": ["STATEFP", "COUNTYFP", "TRACTCE"],
            "count": ["POPULATION"], "area_source": AREA_TABLE, "boundaries": us_bounds, "areas_df": None,
            "named": True}


def _upload() -> dict[str, Any] | None:
    up = st.file_uploader("Table (CSV, CSV.gz or Parquet)", type=["csv", "gz", "txt", "parquet"],
                          key="hier_upload",
                          help="One code column per level (top first) and a count column, or one row per person. "
                               "Files above 200 MB are summed by DuckDB instead of being read into memory. "
                               "Up to 2 GB per file; for larger files use the command line: "
                               "python -m dpcore release hierarchy --engine duckdb.")
    if up is not None and ss.get("hier_upload_id") != up.file_id:
        ss["hier_upload_id"] = up.file_id
        try:
            # above the engine threshold the table stays in a file that DuckDB sums; the page
            # works on its first rows until the counts are made
            new_df, big = read_code_upload(up)
            ss["hier_src"] = big
            keep_copy(big, "hier_upload_tmp")
            ss["hier_upload_df"] = new_df
            ss["hier_upload_name"] = up.name
            ss["hier_upload_error"] = None
            for k in ("w_levels", "w_count", "w_group", *[k for k in ss if str(k).startswith("w_names_")]):
                ss.pop(k, None)
        except DPCoreError as e:
            ss["hier_upload_error"] = str(e)
    if ss.get("hier_upload_error"):
        st.error(ss["hier_upload_error"])
        st.caption("The earlier table and release are kept.")
    df_up = ss.get("hier_upload_df")
    if df_up is None:
        st.info("Upload a table, or pick the demo geography above.")
        return None
    cols = [str(c) for c in df_up.columns]
    guess = guess_level_columns(cols)
    c1, c2, c3 = st.columns(3)
    levels = c1.multiselect("Level columns, top level first", cols, key=seed("w_levels", guess),
                            help="The code columns of the geography in order, e.g. state, county, tract.")
    count_guess = [c for c in cols if c.lower() in ("population", "count", "pop", "persons")][:1]
    count = c2.multiselect("Count column(s)", [c for c in cols if c not in levels],
                           key=seed("w_count", count_guess),
                           help="One column: people per row. Several columns: a group-size histogram "
                                "(households of size 1, 2, …, the last 'k or more'). None: one row per person.")
    group = c3.selectbox("Group id (one row per person, optional)",
                         ["(none)", *[c for c in cols if c not in levels and c not in count]],
                         key=seed("w_group", "(none)"),
                         help="For group-size histograms from person rows: the household (or taxi) id.")
    area_opts = {AREA_TABLE: "This table lists every area of the geography, empty ones included (I confirm)",
                 AREA_UPLOAD: "Upload the public list of areas (a gazetteer or boundary table)"}
    area_source = st.radio("Where does the list of areas come from?", list(area_opts),
                           format_func=area_opts.get, key=keep("area_source", AREA_UPLOAD),
                           help="Areas where nobody lives must still be released (with noise). A list taken "
                                "from the data would drop them, and that absence is not protected.")
    kept("area_source")
    areas_df = None
    if area_source == AREA_UPLOAD:
        aup = st.file_uploader("Public area list (CSV or Parquet with the level columns)",
                               type=["csv", "gz", "parquet"], key="hier_areas_upload")
        if aup is not None and ss.get("hier_areas_id") != aup.file_id:
            try:
                ss["hier_areas_df"] = read_code_table(aup.getvalue(), aup.name)
                ss["hier_areas_id"] = aup.file_id
                ss["hier_areas_name"] = aup.name
            except DPCoreError as e:
                st.error(str(e))
        if aup is not None and ss.get("hier_areas_id") == aup.file_id:
            areas_df = ss["hier_areas_df"]
    bounds_up = _boundary_uploads(levels)
    if not levels:
        st.info("Choose the level columns (top level first) to continue.")
        return None
    names = _name_columns(levels, [c for c in (areas_df.columns if areas_df is not None else cols)
                                   if c not in levels and c not in count])
    if area_source == AREA_UPLOAD and areas_df is None:
        st.info("Upload the public area list to continue.")
        return None
    return {"id": ss.get("hier_upload_id"), "name": ss.get("hier_upload_name", "upload"), "df": df_up,
            "src": ss.get("hier_src"), "levels": levels, "count": count,
            "group": None if group == "(none)" else group, "area_source": area_source,
            "areas_df": areas_df, "boundaries": bounds_up, "names": names}


def _boundary_uploads(levels: list[str]) -> dict[str, Any]:
    """The boundary file uploaded per level: level -> (bytes, name, file id)."""
    bounds_up: dict[str, Any] = {}
    with st.expander("Boundaries per level (optional, for the map, the area names and the GeoJSON export)"):
        for lv in levels:
            bup = st.file_uploader(f"Boundaries of '{lv}' (GeoJSON, GeoPackage, zipped shapefile)",
                                   type=["geojson", "json", "gpkg", "zip"], key=f"hier_bounds_{lv}")
            if bup is not None:
                bounds_up[lv] = (bup.getvalue(), bup.name, bup.file_id)
    return bounds_up


def _name_columns(levels: list[str], cols: list[str]) -> dict[str, str]:
    """The column naming each level's areas (level -> column, or :data:`BOUNDARY_NAMES`); by default a
    column named like the level's name (``NAME``, ``county_name``), else the boundary file's names."""
    opts = [BOUNDARY_NAMES, "(none)", *map(str, cols)]
    names: dict[str, str] = {}
    boxes = st.columns(min(len(levels), 4))
    for i, lv in enumerate(levels):
        guess = next((c for c in cols if name_like(c) and name_key(c).startswith(name_key(lv).removesuffix("fp"))),
                     BOUNDARY_NAMES)
        if st.session_state.get(f"w_names_{lv}", guess) not in opts:  # a column of an earlier file
            st.session_state.pop(f"w_names_{lv}", None)
        choice = boxes[i % len(boxes)].selectbox(
            f"Names of the '{lv}' areas", opts, key=seed(f"w_names_{lv}", guess),
            help="Shown on maps, hovers, the treemap, tables and in the GeoJSON's name; the codes stay in the "
                 "code columns. 'From the boundary file' takes its NAME column (or the like) when this level "
                 "has boundaries.")
        if choice != "(none)":
            names[lv] = choice
    return names


def _build(inputs: dict[str, Any]) -> None:
    """The confidential model of the inputs (once per inputs), or the error that prevents it."""
    key = (inputs["id"], tuple(inputs["levels"]), tuple(inputs["count"]), inputs.get("group"),
           tuple(inputs.get("names", {}).items()),
           inputs["area_source"], ss.get("hier_areas_id") if inputs["areas_df"] is not None else None,
           tuple((lv, b[2] if isinstance(b, tuple) else str(b)) for lv, b in inputs["boundaries"].items()))
    if ss.get("hier_model_key") == key:
        return
    df = inputs["df"]
    steps = Steps(f"Reading {inputs['name']} …", inputs.get("src") is not None or len(df) > PROGRESS_ROWS)
    try:
        with st.spinner("Checking the hierarchy …"):
            require_public_area_list(not inputs["count"], inputs["area_source"] != AREA_TABLE)
            # name columns of the table (a table DuckDB summed keeps only its levels: names from boundaries)
            chosen = {lv: c for lv, c in inputs.get("names", {}).items() if c != BOUNDARY_NAMES}
            # the hierarchy's refusals that need no area built (missing codes or columns, too many rows)
            # come before the keys, which take tens of seconds at 8 M rows; an area list's need no
            # counts either, so a refused list costs no DuckDB count of a large upload.  The check reads
            # the codes (level_ids) and the build reads them again (about 1.7 s of a 2.9 s build at
            # 2 M rows): its arrays are not kept for the build, they would stay in memory through the keying
            if inputs["area_source"] != AREA_TABLE:
                check_area_frame(inputs["areas_df"], inputs["levels"], names=chosen)
            if inputs.get("src") is not None:  # a large upload: DuckDB sums the rows per area
                if len(inputs["count"]) > 1 or inputs.get("group"):
                    raise InputError(
                        "Group-size histograms of a table this large are counted in memory only: use the "
                        "command line, python -m dpcore release hierarchy --engine numpy.")
                bar = st.progress(0.0, text=f"Counting {inputs['name']} with DuckDB …")
                cc = engines.get_engine("duckdb").code_counts(
                    inputs["src"], list(inputs["levels"]), count=inputs["count"][0] if inputs["count"] else None,
                    progress=lambda f, msg: bar.progress(min(max(f, 0.0), 1.0), text=msg))
                bar.empty()
                df = cc.frame[[*inputs["levels"], "count"]].rename(columns={"count": engines.COUNT_COLUMN})
                inputs = {**inputs, "count": [engines.COUNT_COLUMN]}
            if inputs["area_source"] == AREA_TABLE:  # the table's own checks, on the frame DuckDB summed
                check_area_frame(df, inputs["levels"])  # its name columns: those the table has
            # the ledger belongs to the table's totals per top-level area, whatever finer levels or
            # area list are chosen, and whether DuckDB summed the file (df is then its sums) or not;
            # keyed before the hierarchy is built, so that the keys' temporaries and the hierarchy's
            # arrays are not in memory at once (8 M blocks)
            steps.say("Keying the table's budget …")
            keys = census_tables.fingerprints(df, inputs["levels"], inputs["count"] or None, progress=steps.progress())
            release_unused()  # the keys' temporaries, before the hierarchy's arrays
            steps.say("Building the hierarchy of areas …")
            leaf = None
            if inputs["area_source"] == AREA_TABLE:
                named, names = common.us_names(df) if inputs.get("named") else (df, {})
                names |= {lv: c for lv, c in chosen.items() if c in named.columns}
                h = Hierarchy.from_frame(named, inputs["levels"], names=names, source="table (confirmed public)",
                                         progress=steps.progress())
                leaf = h.frame_rows()  # the rows of df (named has them in order): not mapped a second time
            else:
                h = Hierarchy.from_frame(inputs["areas_df"], inputs["levels"], names=chosen, source="area list",
                                         progress=steps.progress())
            steps.say("Matching the boundaries …")
            joins, join_msgs = _joins(h, inputs["boundaries"])
            for lv, j in joins.items():  # names from the boundary file (NAME …) unless a column names them
                nm = boundary_names(h, j) if inputs.get("names", {}).get(lv) == BOUNDARY_NAMES else None
                h = h.with_names(j.depth, nm) if nm is not None else h
            steps.say("Counting the people per area …")
            counts = HierarchyCounts.from_frame(df, h, inputs["levels"], inputs["count"] or None,
                                                group=inputs.get("group"), leaf=leaf)
            release_unused()  # building the hierarchy's temporaries, before the page and the release
            fp = keys[0]
            if inputs.get("src") is None:  # the table as read: find a budget kept under the earlier key rule
                state.session().adopt_legacy("areas", fp, lambda: [census_tables.legacy_fingerprint(df)])
            if inputs["id"] != DEMO:  # every level's key finds the budget (issue 26 item 11)
                state.session().adopt_keys("areas", fp, keys[1:])
        head = (ss.get("hier_upload_df") if inputs.get("src") is not None else inputs["df"]).head(8)
        config = {k: v for k, v in inputs.items() if k not in ("df", "areas_df", "boundaries")}
        ss["hier_model"] = {"h": h, "counts": counts, "joins": joins, "join_msgs": join_msgs, "fp": fp,
                            "name": inputs["name"], "inputs": config, "head": head, "demo": inputs["id"] == DEMO,
                            "df": inputs["df"] if inputs.get("src") is None else None}  # its time column
        if inputs["id"] == DEMO:
            state.mark_demo("areas", fp)  # the made-up demo's budget lives with the session
        ss["hier_model_key"] = key
        steps.done(f"Read {inputs['name']}: {fmt.count(h.n_nodes)} areas")
    except DPCoreError as e:
        steps.failed("Could not read the table")
        st.error(str(e))
        earlier = common.model()
        st.caption("Fix the input and the page picks it up; "
                   + (f"meanwhile the earlier table ({earlier['name']}) and its releases are kept." if earlier
                      else "earlier releases are kept."))
        frame.stop()  # not st.stop(): the sidebar is drawn after the page


@st.cache_resource(show_spinner="Reading the US tract table …", max_entries=2)
def _public_table(path: str) -> Any:
    """A public table shipped with the app (the US tracts), read once per server and shared by every
    session (read only: sessions make their own frames from it)."""
    return read_code_table(Path(path))


@st.cache_resource(show_spinner="Matching the public boundaries …", max_entries=8)
def _public_join(path: str, depth: int, fingerprint: str, _h: Hierarchy) -> Any:
    """A public boundary file shipped with the app joined to the areas of a level, once per server for
    a hierarchy (``fingerprint``: its codes) and shared by every session (public, read only)."""
    return join_boundaries(_h, depth, read_boundaries(Path(path)))


def _joins(h: Hierarchy, boundaries: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The boundaries matched to the areas per level, and what did not match (listed, not dropped)."""
    joins: dict[str, Any] = {}
    msgs: list[str] = []
    for lv, b in boundaries.items():
        if lv not in h.levels:
            continue
        if isinstance(b, Path):  # a public file shipped with the app: read and matched once per server
            j = _public_join(str(b), h.depth_of(lv), h.fingerprint(), h)
        else:
            gdf = b if hasattr(b, "geometry") else read_boundaries(b[0], b[1])
            j = join_boundaries(h, h.depth_of(lv), gdf)
        joins[lv] = j
        if j.missing_areas or j.extra_features:
            msgs.append(
                f"**{common.level_label(lv)}**: {fmt.count(len(j.missing_areas))} areas without a boundary"
                + (f" ({', '.join(j.missing_areas[:8])}{' …' if len(j.missing_areas) > 8 else ''})"
                   if j.missing_areas else "")
                + f"; {fmt.count(len(j.extra_features))} boundary features that match no area"
                + (f" ({', '.join(j.extra_features[:8])}{' …' if len(j.extra_features) > 8 else ''})"
                   if j.extra_features else ""))
    return joins, msgs
