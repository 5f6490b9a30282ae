"""Points, Data step: load the points, say what a unit of privacy is, set the public bounds and grid."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dpcore.data import engines, file_access, maps
from dpcore.data.boundaries import boundary_bounds, read_boundaries
from dpcore.data.columns import detect_coordinate_columns, detect_user_column
from dpcore.data.domain import PRESETS, Bounds, Grid
from dpcore.data.points import DROP_UNREADABLE_COORDINATE, UnreadableCoordinates, load_points
from dpcore.data.tables import read_table
from dpcore.errors import DPCoreError
from dpcore.points import viz
from ui import charts, fmt, frame, source_ui, state
from ui.demo_data import demo_file
from ui.kinds.points import series as points_series
from ui.kinds.points import state as points_state

#: the NYC boroughs shipped with the demo data: the demo's context outlines on the Data step's preview
NYC_BOROUGHS = demo_file("boundaries/nyc_boroughs.geojson")
#: the real-data points demo: every 4th Uber pickup in NYC, April 2014 (public TLC records)
UBER = demo_file("points/uber_nyc_pickups_2014-04_every4th.csv.gz")
UBER_NAME = "NYC Uber pickups, April 2014 (every 4th)"
BOUND_KEYS = ("_w_b_west", "_w_b_south", "_w_b_east", "_w_b_north")


def data_step() -> None:
    """The Data step for points (the page script is pages/data.py): the points, the unit of privacy,
    the public area and grid, a preview for the curator."""
    up = _source()
    _read_upload(up)
    if st.session_state.get("upload_error"):
        st.error(st.session_state["upload_error"])
        st.caption("Your earlier dataset and releases are kept.")
        _leave_out_unreadable()
    path_columns_form()
    _columns_form()
    ds = _rows_read()
    _unit_of_privacy(ds.table)
    new_bounds, cur = _area()
    _grid(new_bounds, cur)
    coordinate_precision_input()
    _preview(ds)
    points_series.data_controls()
    frame.link("plan", "Next: plan the release →")


def _source() -> Any:
    """Where the points are: an upload (returned, or None), files on this computer, or the demo."""
    st.subheader("1. Points")
    WHERE = ["Upload a file", "Files on this computer (large data)"]
    where = st.radio("Where are the points?", WHERE, horizontal=True, key=state.persistent("points_where", WHERE[0]),
                     help="Uploads are read into memory. Files on this computer stay where they are: DuckDB streams "
                          "them (any size, out of core) or Spark reads them on a cluster.")
    state.store("points_where")
    up = None
    col_a, col_b = st.columns([2, 1])
    with col_a:
        if where == WHERE[0]:
            up = st.file_uploader(
                "Upload points (CSV, CSV.gz, Parquet or GeoJSON)",
                type=["csv", "gz", "txt", "tsv", "parquet", "geojson", "json"],
                key="points_upload",
                help="One row per point with latitude and longitude columns; an optional column identifying a "
                     f"person. Files above {engines.threshold() / 1e6:,.0f} MB are counted by DuckDB instead of "
                     "being read into memory. For files larger than the upload limit (2 GB), choose 'Files on "
                     "this computer', or use the command line: python -m dpcore release points --engine duckdb.",
            )
        else:
            source_ui.path_picker()
    with col_b:
        st.write("")
        made_up = st.button("Use the demo dataset", help="Made-up pickups over New York City (no real person).")
        uber = UBER.exists() and st.button(
            f"Use {UBER_NAME}", help="Public NYC TLC records (FiveThirtyEight FOIL): every 4th Uber pickup of "
                                     "April 2014 with its time, shipped with the app (assets/demo).")
        if made_up or uber:
            st.session_state.pop("upload_error", None)
            st.session_state.pop("upload_unreadable", None)
            st.session_state.pop("path_open", None)
            state.forget(*BOUND_KEYS, "_w_user_cap")
            if made_up:
                points_state.load_demo()
                st.session_state.pop("upload_df", None)
            else:
                _load_uber()
            st.session_state["user_cap"] = None
            st.rerun()
    return up


def _load_uber() -> None:
    """Load the shipped Uber pickups as an upload would be (their time column serves the series)."""
    ss = st.session_state
    df = read_table(UBER.read_bytes(), UBER.name)
    table = load_points(df, "Lat", "Lon", None, source_name=UBER_NAME)
    ss["upload_df"], ss["upload_name"], ss["upload_cols"] = df, UBER_NAME, ("Lat", "Lon", None)
    ss["upload_drop_unreadable"] = False
    points_state.set_dataset(points_state.Dataset(UBER_NAME, table, False, points_state.fingerprint(table)))
    ss["bounds"] = PRESETS["New York City (all five boroughs)"]


def _read_upload(up: Any) -> None:
    """Read a new upload once (a large one goes to DuckDB); a failure keeps the earlier dataset."""
    if up is None and st.session_state.get("upload_id") is not None:
        # the curator removed the file: forget its error (the loaded dataset stays)
        st.session_state["upload_id"] = None
        st.session_state.pop("upload_error", None)
        st.session_state.pop("upload_unreadable", None)
        st.session_state.pop("upload_df", None)
    if up is not None and st.session_state.get("upload_id") != up.file_id:
        # a new file: read it once; a failure keeps the earlier dataset and release
        st.session_state["upload_id"] = up.file_id
        st.session_state["path_open"] = None  # a newer upload replaces a file opened but not counted
        st.session_state.pop("upload_unreadable", None)
        routed = source_ui.route_large_upload(up)
        if routed is not None:  # a large file: opened with DuckDB (columns next), or refused with a message
            st.rerun()
        try:
            with st.status(f"Reading {up.name} …", expanded=False) as status:
                bar = st.progress(0.0, text="reading")

                def progress(frac: float, msg: str) -> None:
                    bar.progress(min(max(frac, 0.0), 1.0), text=msg)

                try:
                    df = read_table(up.getvalue(), up.name, progress=progress)
                    lat, lon = detect_coordinate_columns(df)
                    table = load_points(df, lat, lon, None, source_name=up.name) if lat and lon else None
                except DPCoreError as e:
                    # the red message below says why; no green "read" line above it
                    status.update(label=f"Could not use {up.name}", state="error")
                    if isinstance(e, UnreadableCoordinates):
                        st.session_state["upload_unreadable"] = _unreadable_offer(df, lat, lon, up.name)
                    raise
                if table is None:  # read, but not usable yet: no green "read" line over the old data
                    status.update(label=f"Read {fmt.count(len(df))} rows from {up.name}, but no latitude and "
                                        "longitude columns were recognised: choose them below", state="error")
                else:
                    status.update(label=f"Read {fmt.count(len(df))} rows from {up.name}", state="complete")
            st.session_state["upload_df"] = df
            st.session_state["upload_drop_unreadable"] = False
            st.session_state["upload_name"] = up.name
            st.session_state["upload_cols"] = (lat, lon, detect_user_column(df))
            st.session_state["upload_error"] = None
            if table is not None:
                points_state.set_dataset(points_state.Dataset(up.name, table, False, points_state.fingerprint(table)))
                st.session_state["user_cap"] = None
                st.rerun()  # the sidebar was drawn before this page: redraw it with the new dataset
        except DPCoreError as e:
            st.session_state["upload_error"] = str(e)
            st.session_state.pop("upload_df", None)


def _unreadable_offer(df: pd.DataFrame, lat: str, lon: str, name: str) -> dict[str, Any] | None:
    """An upload refused because some coordinates are text: the rows the option would leave out, when
    that is the only reason (read with ``drop_unreadable``; None if it would still be refused), and the
    points it reads, which the option's button loads.
    CURATOR-ONLY: the tables and the number stay in this session's state until the curator decides."""
    try:
        trial = load_points(df, lat, lon, None, source_name=name, drop_unreadable=True)
    except DPCoreError:
        return None
    return {"df": df, "name": name, "cols": (lat, lon, detect_user_column(df)), "table": trial,
            "n": trial.dropped.get(DROP_UNREADABLE_COORDINATE, 0)}


def _leave_out_unreadable() -> None:
    """Under the refusal of an upload with text coordinates: a button that loads it without those rows.
    The earlier dataset stays until it is clicked (nothing done is lost)."""
    ss = st.session_state
    offer = ss.get("upload_unreadable")
    if not offer or not offer["n"]:
        return
    if not _leave_out_button(offer["n"]):
        return
    df, name, (lat, lon, user0), table = offer["df"], offer["name"], offer["cols"], offer["table"]
    ss.pop("upload_unreadable", None)
    ss["upload_df"], ss["upload_name"], ss["upload_cols"] = df, name, (lat, lon, user0)
    ss["upload_drop_unreadable"] = True  # the columns form reads this file the same way
    ss["upload_error"] = None
    points_state.set_dataset(points_state.Dataset(name, table, False, points_state.fingerprint(table)))
    ss["user_cap"] = None
    ss["data_flash"] = f"Loaded {fmt.count(table.n_kept)} points."
    st.rerun()


def _leave_out_button(n: int, key: str = "leave_out_unreadable") -> bool:
    """The button that reads the points again without the ``n`` rows whose coordinates are text."""
    label = (f"Leave out the {fmt.count(n)} rows whose coordinates are not numbers" if n != 1
             else "Leave out the 1 row whose coordinates are not numbers")
    return st.button(label, key=key)


def _columns_form() -> None:
    """The columns of an upload, detected by name; the curator may change them."""
    df = st.session_state.get("upload_df") if st.session_state.get("path_open") is None else None
    if df is not None:
        cols = list(df.columns)
        lat0, lon0, user0 = st.session_state.get("upload_cols", (None, None, None))
        if not (lat0 and lon0):
            st.warning(
                f"No latitude/longitude columns were recognised by name in "
                f"'{st.session_state.get('upload_name')}'. Choose them below. Until then the data in use (below "
                f"and in the sidebar) is still '{points_state.dataset().name}'."
            )
        with st.form("columns"):
            st.markdown("**Columns** (detected by name; change them if needed)")
            lat_col, lon_col, uc = source_ui.column_choice(cols, (lat0, lon0, user0))
            if st.form_submit_button("Use these columns") and not source_ui.columns_missing(lat_col, lon_col):
                assert lat_col is not None and lon_col is not None
                try:
                    table = load_points(df, lat_col, lon_col, uc, source_name=st.session_state["upload_name"],
                                        drop_unreadable=bool(st.session_state.get("upload_drop_unreadable")))
                    points_state.set_dataset(points_state.Dataset(st.session_state["upload_name"], table, False,
                                                    points_state.fingerprint(table)))
                    st.session_state["user_cap"] = 10 if uc else None
                    st.session_state["data_flash"] = f"Loaded {fmt.count(table.n_kept)} points."
                    st.rerun()
                except DPCoreError as e:
                    st.error(str(e))
                    st.caption("Your earlier dataset and releases are kept.")


def _rows_read() -> points_state.Dataset:
    """The rows read, kept and dropped (for the curator only)."""
    if st.session_state.get("data_flash"):
        st.success(st.session_state.pop("data_flash"))  # shown after the rerun that loads the data
    ds = points_state.dataset()
    t = ds.table
    m1, m2, m3 = st.columns(3)
    m1.metric("Rows read", fmt.count(t.n_read))
    m2.metric("Rows kept", fmt.count(t.n_kept))
    m3.metric("Rows dropped", fmt.count(t.n_dropped))
    if t.dropped:
        st.caption("Dropped: " + "; ".join(f"{fmt.count(v)} {k}" for k, v in t.dropped.items()))
    st.caption("These row counts are about your confidential data: for you only, not for publication.")
    return ds


def _unit_of_privacy(t: Any) -> None:
    """One row, or one person (with a cap on the records kept per person)."""
    st.subheader("2. Unit of privacy")
    if t.user_column is None:
        has_columns = st.session_state.get("upload_df") is not None and st.session_state.get("path_open") is None
        st.markdown(
            "Each **row** is protected: the release hides whether any single point is in the data. "
            "If one person can have many rows, " + (
                "choose their id column in **Columns** above" if has_columns else
                "upload a file with a column that identifies the person and choose it as the id column "
                "(the column choices appear once a file is read)") + " so that the whole person is protected."
        )
    else:
        cap = st.number_input(
            "Most records kept per person",
            min_value=1, max_value=10_000, step=1,
            key=state.seed("_w_user_cap", int(st.session_state.get("user_cap") or 10)),
            help="Records beyond this number are left out. Noise grows in proportion to this cap, "
                 "so keep it as small as your analysis allows.",
        )
        st.session_state["user_cap"] = int(cap)
        st.markdown(f"Each **person** (column `{t.user_column}`) is protected, with at most {cap} records each.")


def _area() -> tuple[Bounds | None, Bounds]:
    """The public area: a preset, typed numbers, or the box of a boundary file (new, and the current)."""
    st.subheader("3. Public area and grid")
    st.caption(
        "The area must come from public knowledge (a city, a state), not from your data: "
        "bounds fitted to the points would reveal where the outermost points are."
    )
    how = st.radio("Set the area from", ["A preset", "Numbers I type", "A boundary file"], horizontal=True,
                   key=state.persistent("bounds_how", "A preset"))
    state.store("bounds_how")
    cur = points_state.bounds()
    new_bounds: Bounds | None = None
    try:
        if how == "A preset":
            names = list(PRESETS)
            default = next((k for k, v in PRESETS.items() if v == cur), names[0])
            name = st.selectbox("Preset", names, index=names.index(default))
            new_bounds = PRESETS[name]
        elif how == "Numbers I type":
            c1, c2, c3, c4 = st.columns(4)
            for k, v in zip(BOUND_KEYS, cur.as_tuple(), strict=True):
                state.seed(k, float(v))
            w = c1.number_input("West (longitude)", -180.0, 180.0, format="%.5f", key=BOUND_KEYS[0])
            s = c2.number_input("South (latitude)", -90.0, 90.0, format="%.5f", key=BOUND_KEYS[1])
            e = c3.number_input("East (longitude)", -180.0, 180.0, format="%.5f", key=BOUND_KEYS[2])
            n = c4.number_input("North (latitude)", -90.0, 90.0, format="%.5f", key=BOUND_KEYS[3])
            new_bounds = Bounds(w, s, e, n)
        else:
            bf = st.file_uploader("Boundary file (GeoJSON, GeoPackage or zipped shapefile)",
                                  type=["geojson", "json", "gpkg", "zip"], key="boundary_upload")
            if bf is not None and st.session_state.get("boundary_id") != bf.file_id:
                st.session_state["boundary_id"] = bf.file_id
                gdf = read_boundaries(bf.getvalue(), bf.name)
                st.session_state["boundaries"] = gdf.__geo_interface__
                st.session_state["boundaries_name"] = bf.name
                st.session_state["boundary_bounds"] = Bounds(*boundary_bounds(gdf))
            if st.session_state.get("boundary_bounds") is not None:
                new_bounds = st.session_state["boundary_bounds"]
                st.caption(f"Bounds of {st.session_state['boundaries_name']}: "
                           f"{', '.join(f'{v:.4f}' for v in new_bounds.as_tuple())}")
            else:
                st.info("Upload a public boundary file; its outer box becomes the area.")
    except DPCoreError as e:
        st.error(str(e))
        st.caption("The earlier area is kept.")
        new_bounds = None
    return new_bounds, cur


def _grid(new_bounds: Bounds | None, cur: Bounds) -> None:
    """The grid over the area (a finer grid costs memory and time, not privacy)."""
    c1, c2 = st.columns(2)
    rows0, cols0 = st.session_state["grid_shape"]
    rows = c1.number_input("Grid rows (north–south)", 1, 4096, step=64, key=state.seed("_w_grid_rows", int(rows0)),
                           help="A finer grid costs memory and time, not privacy. 1024 is the HTF paper's choice.")
    cols_n = c2.number_input("Grid columns (west–east)", 1, 4096, step=64, key=state.seed("_w_grid_cols", int(cols0)))
    try:
        g = Grid(new_bounds or cur, int(rows), int(cols_n))
        if new_bounds is not None:
            st.session_state["bounds"] = new_bounds
        st.session_state["grid_shape"] = (g.rows, g.cols)
        st.caption(
            f"{fmt.count(g.n_cells)} cells of about {g.bounds.width_km / g.cols * 1000:,.0f} m × "
            f"{g.bounds.height_km / g.rows * 1000:,.0f} m."
        )
    except DPCoreError as e:
        st.error(str(e))
        st.caption("The earlier grid is kept.")


def coordinate_precision_input() -> None:
    """The points' coordinate precision the curator states (optional, degrees): a public fact from the data's
    documentation, never measured from the file; the release records it for the data users' intervals."""
    st.number_input(
        "Coordinates are rounded to … degrees (public: from the data's documentation, not measured)",
        min_value=0.0, value=None, step=0.0001, format="%.6f", key=state.persistent("coordinate_precision", None),
        placeholder="optional, e.g. 0.0001 for 4 decimals",
        help="State it only if the data's documentation says so (e.g. coordinates published with 4 decimals: "
             "0.0001); it is never read from your file. It changes no noise and no budget: the release records it, "
             "and a polygon's interval then weighs a cell the polygon cuts by its share of the positions such "
             "coordinates can take (as `release points --coordinate-precision`). Leave empty if unknown.")
    state.store("coordinate_precision")


def _preview(ds: points_state.Dataset) -> None:
    """The area on a map and, for the curator only, the true density and the first rows."""
    t = ds.table
    st.subheader("Preview")
    left, right = st.columns(2)
    with left:
        uploaded = st.session_state.get("boundaries")
        if uploaded is not None:
            fig, demo_context = viz.extent_figure(points_state.bounds(), uploaded), False
        else:
            public = points_state.bounds().as_tuple()
            fig, demo_context = _public_extent(public), demo_outlines(public) is not None
        st.plotly_chart(fig, width="stretch", key="extent_map")
        if demo_context:
            st.caption("Grey: the New York City boroughs, for context (public outlines; upload a boundary file "
                       "to draw your own).")
    with right:
        try:
            agg = points_state.aggregate_current() if ds.source is not None else points_state.aggregate()
            if agg is None:  # points kept in their files: a count is a pass over them, made on request
                st.info(f"The points are not counted for this area, grid and cap yet. A release counts them; to "
                        f"check them first, count them now ({ds.engine}).")
                if st.button(f"Count the points for this grid with {ds.engine}", key="count_source"):
                    points_state.aggregate()
                    st.rerun()
            else:
                st.markdown(":red[**Not for publication**] — your confidential data, for checking only.")
                if agg.n_outside:
                    st.warning(f"{fmt.count(agg.n_outside)} of {fmt.count(t.n_kept)} points lie outside the area "
                               "and will not be counted. Widen the area if they matter.")
                # made and sent only when opened (issue 28 item 5: the closed expander's figure was
                # 0.8 MB of every fresh session's first page and most of its run on the server)
                density = st.expander("True point density (not for publication)", key="_w_density_open",
                                      on_change="rerun")
                if density.open:
                    with density:
                        st.plotly_chart(_density_figure(agg), width="stretch", key="density_preview")
        except DPCoreError as e:
            st.error(str(e))
        if ds.source is not None:
            st.caption(f"Counted by {ds.engine} from {ds.source.label} ({len(ds.source.paths)} file"
                       f"{'s' if len(ds.source.paths) != 1 else ''}); the points stay in their files.")
        st.markdown("First rows (not for publication)")
        _first_rows(t.lat[:10], t.lon[:10])


def _first_rows(lat: Any, lon: Any) -> None:
    """CURATOR-ONLY: the first points as a small markdown table; a data grid here made every fresh session's
    first page load and run about 1.5 MB more of the browser's scripts for ten rows (issue 28 item 5)."""
    body = "".join(f"| {a:.6f} | {o:.6f} |\n" for a, o in zip(lat, lon, strict=True))
    st.markdown("| latitude | longitude |\n|---:|---:|\n" + body)


@st.cache_resource(show_spinner=False, max_entries=8)
def demo_outlines(bounds: tuple[float, float, float, float]) -> dict[str, Any] | None:
    """The demo's context outlines, the NYC boroughs shipped in assets/demo (simplified, clipped to the
    area), when no boundary file was uploaded; None when the file is absent or nothing of it is in view.
    Public (typed or preset bounds and a shipped file): made once per server and area, shared read-only
    (the extent map draws it; the Data step asks on every run whether there is any)."""
    if not NYC_BOROUGHS.exists():
        return None
    gj = maps.light_outlines(_boroughs(), Bounds(*bounds))
    return gj if gj.get("features") else None


@charts.shared_figure
def _public_extent(bounds: tuple[float, float, float, float]) -> go.Figure:
    """The area's outline with the shipped demo outlines: public (typed or preset bounds and a shipped
    file), so made once per server and area for every session (issue 28 item 5: each new session's first
    page built and serialised it again)."""
    return viz.extent_figure(Bounds(*bounds), demo_outlines(bounds))


def _density_figure(agg: Any) -> charts.BuiltFigure:
    """CURATOR-ONLY: the true density preview, made once per count in this session's state (never in a
    cache shared between sessions: it is made of the true counts)."""
    ss = st.session_state
    kept = ss.get("_density_figure")
    if kept is None or kept[0] is not agg:
        kept = ss["_density_figure"] = (agg, charts.built(viz.true_density_figure(agg.counts, agg.grid)))
    return kept[1]


@st.cache_resource(show_spinner=False)
def _boroughs() -> Any:
    return read_boundaries(NYC_BOROUGHS)


def path_columns_form() -> None:
    """Confirm the columns of an opened path, then count the points with the engine."""
    ss = st.session_state
    opened = ss.get("path_open")
    if opened is None:
        return
    src, name, head = opened["src"], opened["engine"], opened["head"]
    cols = [str(c) for c in head.columns]
    lat0, lon0, user0 = opened["cols"]
    st.info(f"Opened **{src.label}**: {len(src.paths)} {src.fmt.upper()} file{'s' if len(src.paths) != 1 else ''}, "
            f"{src.n_bytes / 1e6:,.1f} MB, counted by **{name}**. Confirm the columns to count the points.")
    if not (lat0 and lon0):
        st.warning(f"No latitude/longitude columns were recognised by name in '{src.label}'. Choose them below.")
    with st.form("path_columns"):
        lat_col, lon_col, uc = source_ui.column_choice(cols, (lat0, lon0, user0))
        go = st.form_submit_button(f"Count the points with {name}", type="primary")
    drop = False
    if not go:
        # the refusal of text coordinates, kept across the rerun its button makes (curator-only)
        offer = ss.get("path_unreadable")
        if offer is None or offer["src"] != src:
            return
        st.error(offer["error"])
        st.caption("Your earlier dataset and releases are kept.")
        if not _leave_out_button(offer["n"], "leave_out_unreadable_path"):
            return
        ss.pop("path_unreadable", None)
        (lat_col, lon_col, uc), drop = offer["cols"], True
    ss.pop("path_unreadable", None)
    if source_ui.columns_missing(lat_col, lon_col):
        return
    assert lat_col is not None and lon_col is not None
    cap = 10 if uc else None
    g = points_state.grid()
    probe = points_state.Dataset(src.label, None, False, "", source=src, engine=name,  # type: ignore[arg-type]
                                 spark_master=opened["master"])
    try:
        pc = points_state.engine_points(probe, g, cap, (lat_col, lon_col, uc), fingerprint=True,
                                        drop_unreadable=drop)
    except (DPCoreError, OSError) as e:
        message = (file_access.safe_message(str(e), [src.label, lat_col, lon_col, uc or ""]) if opened.get("redact")
                   else str(e))
        st.error(message)
        st.caption("Your earlier dataset and releases are kept.")
        if isinstance(e, UnreadableCoordinates) and e.rows:
            # the engine counted those rows: offer to leave them out (another pass, on request)
            ss["path_unreadable"] = {"src": src, "cols": (lat_col, lon_col, uc), "n": e.rows, "error": message}
            _leave_out_button(e.rows, "leave_out_unreadable_path")
        return
    first = head.head(10)
    table = points_state.SourceTable(
        lon=pd.to_numeric(first[lon_col], errors="coerce").to_numpy(dtype=float),
        lat=pd.to_numeric(first[lat_col], errors="coerce").to_numpy(dtype=float),
        user=first[uc].to_numpy() if uc else None,
        source_name=src.label, lat_column=lat_col, lon_column=lon_col, user_column=uc,
        n_read=pc.n_read, dropped=dict(pc.dropped),
    )
    ds = points_state.Dataset(src.label, table, False, pc.fingerprint, source=src, engine=name,
                              spark_master=opened["master"], keys=pc.keys, keys_bounds=g.bounds)
    points_state.set_dataset(ds)
    ss["path_open"] = None
    source_ui.forget_unused_copies()  # the copy of an earlier large upload, if this one replaced it
    ss["user_cap"] = cap
    state.forget("_w_user_cap")
    ss["aggregate"] = pc.aggregate  # this pass already counted the current grid
    ss["aggregate_key"] = (ds.fingerprint, g, cap)
    ss["path_open"] = None
    ss["data_flash"] = f"Counted {fmt.count(pc.n_read)} rows with {name}."
    st.rerun()
