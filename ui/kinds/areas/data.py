"""Census hierarchy: consistent, non-negative, integral counts for every level of a geography."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from dpcore.areas import area_sets, census_tables, export, figures, tree_mechanisms, tree_records
from dpcore.areas.hierarchy import Hierarchy, HierarchyCounts, require_public_area_list
from dpcore.core import spec as config
from dpcore.data import engines, synthetic
from dpcore.data.boundaries import read_boundaries
from dpcore.data.code_tables import read_code_table
from dpcore.data.columns import guess_level_columns
from dpcore.errors import DPCoreError, InputError
from dpcore.pipeline import release_hierarchy
from dpcore.points import viz
from dpcore.privacy import budget
from dpcore.privacy.calibration import interval_half_width
from dpcore.privacy.noise import secure_source
from ui import budget_ui, fmt, state
from ui.source_ui import drop_copy, keep_copy, large_upload_source
from ui.state import persistent, release_button, remember_release, seed, store

ss = st.session_state
ss.setdefault("census_ledgers", {})  # one ledger per table, shared with the Census (Privelet) page
DEMO = "demo"
US = "us"
UPLOAD = "upload"
MAX_POLYGONS = viz.MAX_POLYGONS
SHARED = Path(os.environ.get("DPCORE_SHARED_DATA", Path(state.__file__).resolve().parents[2] / "shared" / "data"))
US_TRACTS = SHARED / "census" / "us_tract_population_2020_cenpop.csv.gz"
US_STATES = SHARED / "boundaries" / "us_states_2010_20m.geojson"
US_COUNTIES = SHARED / "boundaries" / "us_counties_2010_20m_fips.geojson"
AREA_TABLE = "table"
AREA_UPLOAD = "upload"
DEF_LABELS = {"pure": "Pure ε-DP (discrete Laplace noise)", "zcdp": "ρ-zCDP (discrete Gaussian noise)"}
NEIGHBOURS = {"add_remove": "Add or remove one person (the total is noised)",
              "replace": "Replace one person (the total is public and exact)"}
SPLITS = {"uniform": "Uniform across levels", "geometric": "Geometric (finer levels get more)",
          "custom": "Custom weights"}


def keep(key: str, default: Any) -> str:
    """:func:`ui.state.persistent` under this page's prefix (values survive page switches)."""
    return persistent(f"hier_{key}", default)


def kept(key: str) -> Any:
    return store(f"hier_{key}")


def area_sets_widget(h: Hierarchy) -> dict[str, Any]:
    """Optional upload of area-code sets (public queries) for the matrix mechanism."""
    up = st.file_uploader(
        "Your own queries (optional): area-code sets, CSV 'query,area' (+ optional 'level')", type=["csv", "txt"],
        key="hier_sets_upload",
        help="Each query is the total of a set of areas of any level, e.g. a metro area made of counties: one "
             "row per (query, area). These are public questions, not data: they tune the strategy and their "
             "noisy totals are exported as area_queries.csv.")
    key = (h.fingerprint(), up.file_id if up is not None else None)
    if up is not None and ss.get("hier_sets_key") != key:
        try:
            ss["hier_sets"] = area_sets.read_area_sets(up.getvalue(), h, up.name)
            ss["hier_sets_name"] = up.name
            ss["hier_sets_error"] = None
        except DPCoreError as e:
            ss["hier_sets_error"] = str(e)
        ss["hier_sets_key"] = key
    if up is None:
        ss.pop("hier_sets", None)
        ss.pop("hier_sets_key", None)
        ss["hier_sets_error"] = None
    if ss.get("hier_sets_error"):
        st.error(ss["hier_sets_error"])
        st.caption("Fix the file and upload it again; the release is planned without it meanwhile.")
    sets = ss.get("hier_sets")
    if sets is None or ss.get("hier_sets_key") != key:
        return {}
    weight = st.number_input("How much your queries matter (1 = together as much as one level)", min_value=0.01,
                             max_value=100.0, step=0.5, key=keep("sets_weight", 1.0),
                             help="The strategy minimises a weighted sum of squared errors. With 'every level "
                                  "equally', your queries share this weight, in units of one level; with 'every "
                                  "area total equally', each query counts like one area total times this weight.")
    kept("sets_weight")
    st.caption(f"{fmt.count(len(sets))} queries read: " + ", ".join(sets.names[:5])
               + (" …" if len(sets) > 5 else ""))
    return {"area_sets": sets, "sets_weight": float(weight)}


def release_config(inputs: dict[str, Any], mech_name: str, cost: Any, delta: float, split: str,
                   weights: list[float] | None, neighbour: str, order: str, matrix_opts: dict[str, Any]) -> str:
    """release.toml of a release made here: ``python -m dpcore run`` repeats it on the same budget."""
    notes = []
    if inputs["id"] == US:
        path = str(US_TRACTS.resolve())
    elif inputs["id"] == DEMO:
        path = "demo.csv"
        notes.append("[input] path names the page's made-up demo table, which is not a file: give your table's path.")
    else:
        path = ss.get("hier_upload_name", "table.csv")
        notes.append("[input] path is the uploaded file's name: put the file next to this config or give its path.")
    areas = ss.get("hier_areas_name") if inputs["area_source"] == AREA_UPLOAD else None
    if areas:
        notes.append("[input] areas is the uploaded area list's name: put it next to this config.")
    sets = ss.get("hier_sets_name") if matrix_opts.get("area_sets") is not None else None
    if sets:
        notes.append("[mechanism] area_sets is the uploaded query file's name: put it next to this config.")
    count = [c for c in inputs["count"] if c != engines.COUNT_COLUMN]
    cfg = config.hierarchy_config(
        input_path=path, levels=list(inputs["levels"]), count=count, group=inputs.get("group"), areas_path=areas,
        lists_all_areas=inputs["area_source"] == AREA_TABLE, mechanism=mech_name, definition=cost.definition,
        value=cost.value, delta=delta if cost.definition == "zcdp" else None, split=split, weights=weights,
        neighbour=neighbour, order=order, sets_path=sets, sets_weight=matrix_opts.get("sets_weight"),
        engine="duckdb" if inputs.get("src") is not None else "auto")
    header = ("dpcore release config, written by the app's Census hierarchy page.\n"
              "Run: python -m dpcore run release.toml (paths are relative to this file).\n"
              + "".join(n + "\n" for n in notes)
              + "It names your input files and columns: keep it with your data, do not publish it.")
    return cfg.to_toml(header=header)


def release_now(job: dict[str, Any]) -> None:
    """The Release button's action (:func:`ui.state.release_button`): charge, release, store."""
    led = job["led"]
    rel = release_hierarchy(job["counts"], job["mech"], job["cost"], led, noise=secure_source(),
                            session=state.session(), **job["opts"])
    # no st.session_state access until the release is in the history: Streamlit 1.67 may stop a
    # callback at any such access (a second click), and a charged release must not be lost
    files = {"release.csv": export.hierarchy_csv(rel)}
    if rel.details.get("area_sets"):
        files["area_queries.csv"] = area_sets.area_sets_csv(rel)
    files["release.json"] = export.hierarchy_json(rel, led, [*files, "release.json"])
    remember_release("census", job["fp"], rel.release_id,
                     {"mechanism": rel.mechanism.title, "cost": rel.plan.cost.label(),
                      "levels": list(rel.hierarchy.level_names)}, files)
    ss["hier_release"] = {"release": rel, "fp": job["fp"], "name": job["name"], "exports": {},
                          "config": release_config(*job["config"])}


def matrix_summary(p: Any) -> None:
    """The matrix mechanism's data-free facts: strategy, workload error, lower bound, query SDs."""
    x = p.extra
    rows = [("Strategy", f"{x['strategy']} ({fmt.count(x['strategy_queries'])} strategy queries)"),
            ("Queries it is tuned to", f"{fmt.count(x['n_queries'])} ({x['workload']})"),
            ("Expected RMSE per query (weighted)", fmt.num(x["expected_rmse_per_query"]))]
    if x.get("rmse_lower_bound") is not None:
        rows += [("Lower bound for any strategy (SVD bound)", fmt.num(x["rmse_lower_bound"])),
                 ("Ratio to the lower bound", f"{x['ratio_to_lower_bound']:.4f}")]
    st.dataframe(pd.DataFrame(rows, columns=["", "value"]), hide_index=True, key="hier_matrix_summary")
    for note in x.get("notes", []):
        st.info(note)
    if "area_sets" in x:
        st.markdown("**Your queries: expected error (data-free)**")
        st.dataframe(pd.DataFrame({"query": x["area_sets"]["query"],
                                   "SD": [fmt.num(v) for v in x["area_sets"]["sd"]],
                                   "± 95 %": [f"± {fmt.num(interval_half_width('normal', v))}" for v in x["area_sets"]["sd"]]}),
                     hide_index=True, key="hier_matrix_sets")


st.title("Census hierarchy")
st.markdown(
    "Publish counts for every area of a geography (nation → state → county → tract) so that every level "
    "adds up exactly, no count is negative or fractional, and each level's error is known before release. "
    "Work through the tabs from left to right."
)
tab_data, tab_mech, tab_map, tab_err, tab_exp = st.tabs(
    ["1 · Data", "2 · Mechanism & budget", "3 · Map", "4 · Errors", "5 · Export"])

# ============================================================================ data
with tab_data:
    sources = {DEMO: "Made-up demo geography (576 zones)"}
    if US_TRACTS.exists():
        sources[US] = "US census tracts 2020 (public Census Bureau counts, 85,395 tracts)"
    sources[UPLOAD] = "Upload a table"
    source = st.radio("Data", list(sources), format_func=sources.get, key=keep("source", DEMO), horizontal=True)
    kept("source")
    inputs: dict[str, Any] | None = None
    if source == DEMO:
        if "hier_demo" not in ss:
            ss["hier_demo"] = synthetic.synthetic_hierarchy()
        df_demo, bounds_demo = ss["hier_demo"]
        inputs = {"id": DEMO, "name": "demo geography (made up)", "df": df_demo, "levels": ["region", "district", "zone"],
                  "count": ["population"], "area_source": AREA_TABLE, "boundaries": bounds_demo,
                  "areas_df": None}
    elif source == US:
        if "hier_us" not in ss:
            with st.spinner("Reading the US tract table …"):
                ss["hier_us"] = read_code_table(US_TRACTS)
        us_bounds = {}
        for lv, path in (("STATEFP", US_STATES), ("COUNTYFP", US_COUNTIES)):
            if path.exists():
                us_bounds[lv] = path
        inputs = {"id": US, "name": "US tracts 2020", "df": ss["hier_us"], "levels": ["STATEFP", "COUNTYFP", "TRACTCE"],
                  "count": ["POPULATION"], "area_source": AREA_TABLE, "boundaries": us_bounds, "areas_df": None}
        st.caption("The Census Bureau's tract file lists every tract, the 614 empty ones included, so it serves "
                   "as the public area list. State and county boundaries are the 2010 cartographic files; four "
                   "county codes changed since and are listed as unmatched.")
    else:
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
                big = large_upload_source(up)
                try:
                    new_df = (read_code_table(up.getvalue(), up.name) if big is None else
                              engines.get_engine("duckdb").head(big, 5000))
                except DPCoreError:
                    drop_copy(big)
                    raise
                ss["hier_src"] = big
                keep_copy(big, "hier_upload_tmp")
                ss["hier_upload_df"] = new_df
                ss["hier_upload_name"] = up.name
                ss["hier_upload_error"] = None
                for k in ("w_levels", "w_count", "w_group"):
                    ss.pop(k, None)
            except DPCoreError as e:
                ss["hier_upload_error"] = str(e)
        if ss.get("hier_upload_error"):
            st.error(ss["hier_upload_error"])
            st.caption("The earlier table and release are kept.")
        df_up = ss.get("hier_upload_df")
        if df_up is None:
            st.info("Upload a table, or pick the demo geography above.")
        else:
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
            bounds_up: dict[str, Any] = {}
            with st.expander("Boundaries per level (optional, for the map and the GeoJSON export)"):
                for lv in levels:
                    bup = st.file_uploader(f"Boundaries of '{lv}' (GeoJSON, GeoPackage, zipped shapefile)",
                                           type=["geojson", "json", "gpkg", "zip"], key=f"hier_bounds_{lv}")
                    if bup is not None:
                        bounds_up[lv] = (bup.getvalue(), bup.name, bup.file_id)
            inputs = {"id": ss.get("hier_upload_id"), "name": ss.get("hier_upload_name", "upload"), "df": df_up,
                      "src": ss.get("hier_src"), "levels": levels,
                      "count": count, "group": None if group == "(none)" else group, "area_source": area_source,
                      "areas_df": areas_df, "boundaries": bounds_up}
            if area_source == AREA_UPLOAD and areas_df is None:
                inputs = None
                st.info("Upload the public area list to continue.")
            if not levels:
                inputs = None
                st.info("Choose the level columns (top level first) to continue.")

    model = None
    if inputs is not None:
        df = inputs["df"]
        key = (inputs["id"], tuple(inputs["levels"]), tuple(inputs["count"]), inputs.get("group"),
               inputs["area_source"], ss.get("hier_areas_id") if inputs["areas_df"] is not None else None,
               tuple((lv, b[2] if isinstance(b, tuple) else str(b)) for lv, b in inputs["boundaries"].items()))
        if ss.get("hier_model_key") == key:
            model = ss["hier_model"]  # confidential counts: this session only
        else:
            try:
                with st.spinner("Checking the hierarchy …"):
                    require_public_area_list(not inputs["count"], inputs["area_source"] != AREA_TABLE)
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
                    if inputs["area_source"] == AREA_TABLE:
                        h = Hierarchy.from_frame(df, inputs["levels"], source="table (confirmed public)")
                    else:
                        h = Hierarchy.from_frame(inputs["areas_df"], inputs["levels"], source="area list")
                    counts = HierarchyCounts.from_frame(df, h, inputs["levels"], inputs["count"] or None,
                                                        group=inputs.get("group"))
                    joins: dict[str, Any] = {}
                    join_msgs: list[str] = []
                    for lv, b in inputs["boundaries"].items():
                        if lv not in h.levels:
                            continue
                        gdf = b if hasattr(b, "geometry") else (
                            read_boundaries(b) if isinstance(b, Path) else read_boundaries(b[0], b[1]))
                        j = export.join_boundaries(h, h.depth_of(lv), gdf)
                        joins[lv] = j
                        if j.missing_areas or j.extra_features:
                            join_msgs.append(
                                f"**{lv}**: {fmt.count(len(j.missing_areas))} areas without a boundary"
                                + (f" ({', '.join(j.missing_areas[:8])}{' …' if len(j.missing_areas) > 8 else ''})"
                                   if j.missing_areas else "")
                                + f"; {fmt.count(len(j.extra_features))} boundary features that match no area"
                                + (f" ({', '.join(j.extra_features[:8])}{' …' if len(j.extra_features) > 8 else ''})"
                                   if j.extra_features else ""))
                # the ledger belongs to the table's totals per top-level area, whatever finer levels or
                # area list are chosen, and whether DuckDB summed the file (df is then its sums) or not
                fp = census_tables.fingerprint(df, inputs["levels"], inputs["count"] or None)
                if inputs.get("src") is None:  # the table as read: find a budget kept under the earlier key rule
                    state.session().adopt_legacy("census", fp, [census_tables.legacy_fingerprint(df)])
                model = {"h": h, "counts": counts, "joins": joins, "join_msgs": join_msgs, "fp": fp,
                         "name": inputs["name"]}
                ss["hier_model"], ss["hier_model_key"] = model, key
            except DPCoreError as e:
                st.error(str(e))
                st.caption("Fix the input and the page picks it up; earlier releases are kept.")
    if model is not None:
        h = model["h"]
        counts = model["counts"]
        st.success(f"{model['name']}: " + ", ".join(f"{fmt.count(n)} {lv}" for lv, n in
                                                   zip(h.level_names[1:], h.sizes[1:], strict=True))
                   + (f"; group sizes {', '.join(counts.size_labels)}" if counts.statistic == "group_sizes" else ""))
        st.caption(f"Area list: {h.source}. Codes: " + ", ".join(
            f"{lv} {'unique' if m == 'global' else 'unique within parent'}"
            for lv, m in zip(h.levels, h.code_modes, strict=True)) + ".")
        for msg in model["join_msgs"]:
            st.warning(msg + ". They are listed, not dropped: every area is still released; only the map misses them.")
        st.markdown("**First rows** · confidential, not for publication")
        st.dataframe((ss.get("hier_upload_df") if inputs.get("src") is not None else inputs["df"]).head(8),
                     hide_index=True, key="hier_head")

if model is None:
    for tab in (tab_mech, tab_map, tab_err, tab_exp):
        with tab:
            st.info("Load a table on the Data tab first.")
    st.stop()

h: Hierarchy = model["h"]
counts: HierarchyCounts = model["counts"]
fp = model["fp"]

# ============================================================================ mechanism
with tab_mech:
    mechs = [m for m in tree_records.MECHANISMS.values()
             if (m.group_sizes if counts.statistic == "group_sizes" else m.counts)]
    names = [m.name for m in mechs]
    mech_name = st.selectbox("Mechanism", names, format_func=lambda n: tree_records.get(n).title,
                             key=keep("mech", names[0]))
    kept("mech")
    info = tree_records.get(mech_name)
    st.caption(f"{info.description} **When to use:** {info.when} *({info.paper})*")
    # persistent: the same table finds the same budget (its population's, once bound) in every tab and after
    # restarts; shared with the Census (Privelet) page
    led = budget_ui.population_input("census", fp, budget.pure(1.0), ss["census_ledgers"], f"hier_{fp}",
                                      reset=(f"hier_def_{fp}",))
    population = state.population_of("census", fp)
    c1, c2, c3 = st.columns(3)
    locked = bool(led.entries)
    definition = c1.radio("Privacy definition", list(DEF_LABELS), format_func=DEF_LABELS.get,
                          index=list(DEF_LABELS).index(led.definition), disabled=locked, key=f"hier_def_{fp}")
    if locked:
        c1.caption(f"Fixed for this {'population' if population else 'dataset'}: budget has already been spent "
                   "under it.")
    elif definition != led.definition:
        budget_ui.switch_definition(led, definition)
    sym = "ε" if definition == "pure" else "ρ"
    value = c2.number_input(f"Privacy budget of this release ({sym})", min_value=0.001, max_value=10.0,
                            step=0.05, format="%.3f", key=keep(f"value_{definition}", 0.5 if definition == "pure" else 0.05),
                            help="Smaller: more privacy, more noise.")
    kept(f"value_{definition}")
    budget_ui.cap_input(led, f"hier_cap_{fp}_{definition}", c3, label="Budget cap of this dataset",
                        population=population)
    cost = budget.pure(value) if definition == "pure" else budget.zcdp(value)
    delta = 1e-6
    if definition == "zcdp":
        delta = st.select_slider("δ for the (ε, δ) reading", [1e-10, 1e-8, 1e-6, 1e-5], value=1e-6,
                                 format_func=lambda d: f"{d:.0e}", key="hier_delta")
        st.caption(f"ρ = {fmt.eps(value)} reads as (ε = {fmt.eps(budget.zcdp_to_approx_dp(value, delta))}, "
                   f"δ = {delta:.0e})-DP.")
    c4, c5 = st.columns(2)
    neighbour = "add_remove"
    is_matrix = mech_name == "matrix"
    if is_matrix:
        c4.caption("Unit of privacy: one person, added or removed (the total is noised). The matrix mechanism "
                   "answers one strategy with the whole budget; every level is computed from it.")
    elif counts.statistic == "count":
        neighbour = c4.radio("Neighbouring datasets (unit of privacy: one person)", list(NEIGHBOURS),
                             format_func=NEIGHBOURS.get, key=keep("neighbour", "add_remove"),
                             help="Replace-one keeps the total fixed, so it can be published exactly; the "
                                  "sensitivity doubles.")
        kept("neighbour")
    else:
        c4.caption(f"Unit of privacy: one person's membership in a group; the number of groups "
                   f"(N = {fmt.count(counts.n_groups)}) is public, as in the census paper.")
    if is_matrix:
        split = c5.radio("Which totals matter most", list(area_sets.IMPORTANCE),
                         format_func=area_sets.IMPORTANCE.get, key=keep("importance", "levels"),
                         help="The strategy is tuned to make the weighted sum of squared errors smallest. The "
                              "budget is not split: this only moves accuracy between levels.")
        kept("importance")
    else:
        split = c5.radio("Budget across levels", list(SPLITS), format_func=SPLITS.get, key=keep("split", "uniform"))
        kept("split")
    weights = None
    weights_ok = True
    n_measured = sum(tree_mechanisms.measured_levels(mech_name, counts.statistic, neighbour, h.depth))
    if split == "custom":
        txt = c5.text_input(f"Weights, one per measured level ({n_measured}), top first",
                            key=keep(f"weights_{n_measured}", ",".join(["1"] * n_measured)))
        kept(f"weights_{n_measured}")
        try:
            weights = [float(x) for x in txt.split(",") if x.strip()]
        except ValueError:
            st.error("Weights must be numbers separated by commas, e.g. 1,1,2,4.")
            weights, weights_ok = [1.0] * n_measured, False
    order = "ascending"
    if mech_name == "topdown_linf":
        with st.expander("Advanced"):
            order = st.radio("IntOpt zeroing order", ["ascending", "descending"], key=keep("order", "ascending"),
                             help="Ascending zeroes the smallest noisy cells first (fewer empty areas showing "
                                  "people); descending keeps them (fewer real flows lost).")
            kept("order")
    matrix_opts: dict[str, Any] = {}
    if is_matrix:
        matrix_opts = area_sets_widget(h)
    try:
        with st.spinner("Designing the strategy from the public areas (once per hierarchy and set of queries; "
                        "then cached) …"):
            p = tree_mechanisms.plan(h, mech_name, cost, neighbour=neighbour, split=split, weights=weights,
                                  statistic=counts.statistic, k=counts.k, **matrix_opts)
    except DPCoreError as e:
        st.error(str(e))
        st.stop()
    st.subheader("Expected error per level (before release)")
    tbl = pd.DataFrame([{
        "level": lv.level, "areas": fmt.count(lv.areas),
        "budget": ("one strategy, whole budget" if is_matrix else
                   f"{sym} = {fmt.eps(lv.share)}" if lv.measured else "not measured"),
        "noise SD": fmt.num(lv.noise_sd) if lv.measured else "–",
        "mean abs. error": fmt.num(lv.mean_abs), "expected max abs. error": fmt.num(lv.max_abs),
    } for lv in p.levels])
    st.dataframe(tbl, hide_index=True, key="hier_plan_table")
    st.bar_chart(pd.DataFrame({"level": [lv.level for lv in p.levels],
                               "mean abs. error": [lv.mean_abs for lv in p.levels]}).set_index("level"),
                 height=200)
    st.caption(f"Analytic and data-free ({p.levels[-1].basis}). Errors are in people"
               f"{' (groups per size)' if counts.statistic == 'group_sizes' else ''} per area.")
    if is_matrix:
        matrix_summary(p)
    can = led.can_spend(cost)
    left = led.remaining - (led.charge_of(cost) if can else 0.0)
    label = f"Release with {cost.label()} — {fmt.eps(max(left, 0.0))} left after this"
    job = {"counts": counts, "mech": mech_name, "cost": cost, "led": led, "fp": fp, "name": model["name"],
           "opts": {"neighbour": neighbour, "split": split, "weights": weights, "order": order, **matrix_opts},
           "config": (inputs, mech_name, cost, delta, split, weights, neighbour, order, matrix_opts)}
    release_button("hier_release_button", label, release_now, job, disabled=not (can and weights_ok))
    if not can:
        st.error(f"Not enough budget left: {led.cap.symbol} = {fmt.eps(led.remaining)} of "
                 f"{fmt.eps(led.cap.value)} is left. Lower the budget of this release, or raise the cap if "
                 "your privacy policy allows it.")
    st.caption(f"Spent on {f'the population {population}' if population else 'this dataset'}: "
               f"{led.cap.symbol} = {fmt.eps(led.spent)} of {fmt.eps(led.cap.value)} "
               f"({len(led.entries)} release{'s' if len(led.entries) != 1 else ''}).")

entry = ss.get("hier_release")
if entry is not None and entry["fp"] != fp:
    entry = None
for tab in (tab_map, tab_exp):
    if entry is None:
        with tab:
            st.info("Nothing released yet for this dataset: release on the Mechanism & budget tab.")

# ============================================================================ map
if entry is not None:
    rel = entry["release"]
    with tab_map:
        st.caption(f"{rel.mechanism.title}, {rel.plan.cost.label()} · released {rel.created.replace('+00:00', '')} UTC")
        joins = model["joins"]
        depths = [h.depth_of(lv) for lv in h.levels if lv in joins]
        cmap, ctree = st.columns([3, 2])
        if not depths:
            cmap.info("No boundaries were given, so there is no map; the treemap shows the hierarchy.")
        else:
            level = cmap.selectbox("Level", [h.level_names[d] for d in depths], key=keep("map_level", h.level_names[depths[0]]))
            kept("map_level")
            d = h.depth_of(level)
            nodes = None
            parent_join = joins.get(h.level_names[d - 1]) if d > 1 else None
            if d > 1:
                par_lab = h.labels(d - 1)
                par_names = h.display_names(d - 1)
                opts = ["(all)", *range(len(par_lab))] if len(par_lab) <= 5000 else ["(all)"]
                within = cmap.selectbox(f"Show the {level} areas inside", opts, key=f"hier_drill_{d}",
                                        format_func=lambda i: "all areas" if i == "(all)" else
                                        f"{par_names[i]} ({par_lab[i]})")
                if within != "(all)":
                    nodes = h.descendants(d - 1, int(within), d)
            size = None
            if counts.statistic == "group_sizes":
                sz = cmap.selectbox("Group size", ["all sizes", *rel.size_labels], key="hier_map_size")
                size = None if sz == "all sizes" else rel.size_labels.index(sz)
            n_poly = len(joins[level].frame) if nodes is None else len(nodes)
            if n_poly > MAX_POLYGONS:
                cmap.info(f"{fmt.count(n_poly)} areas are too many to draw at once: choose an area above to see "
                          "the areas inside it.")
            else:
                figs = entry.setdefault("figs", {})  # a rerun does not rebuild the same map
                fkey = (level, None if nodes is None else int(within), size)
                if fkey not in figs:
                    figs[fkey] = figures.hierarchy_map(rel, joins[level], nodes=nodes, parent_join=parent_join,
                                                        size=size)
                cmap.plotly_chart(figs[fkey], key="hier_map", config={"displayModeBar": False})
            cmap.caption("Colour: noisy count. Hover: the noisy count and its 95 % interval (from the mechanism's "
                         "analytic error, not from the data). Dark outlines: the level above.")
        tree_depth = 0
        tree_index = 0
        if depths and nodes is not None:
            tree_depth, tree_index = d - 1, int(within)
        ctree.plotly_chart(figures.hierarchy_treemap(rel, tree_depth, tree_index), key="hier_treemap")
        ctree.caption("Treemap of the released counts (two levels below the selected area).")

# ============================================================================ errors
with tab_err:
    shown = entry["release"].plan if entry is not None else p
    st.subheader("Expected error of the release (analytic, data-free)" if entry is not None
                 else "Expected error (analytic, data-free)")
    st.dataframe(pd.DataFrame([{
        "level": lv.level, "areas": fmt.count(lv.areas), "noise SD": fmt.num(lv.noise_sd),
        "SD after post-processing": fmt.num(lv.sd), "mean abs. error": fmt.num(lv.mean_abs),
        "expected max abs. error": fmt.num(lv.max_abs)} for lv in shown.levels]), hide_index=True,
        key="hier_err_plan")
    st.caption(shown.levels[-1].basis)
    if entry is not None:
        rel = entry["release"]
        st.subheader("Empirical error of the release · curator only, not for publication")
        if "empirical" not in entry:
            entry["empirical"] = tree_mechanisms.empirical_errors(rel, counts)  # curator only, computed once
        emp = entry["empirical"]
        st.dataframe(pd.DataFrame([{
            "level": e["level"], "mean abs. error": fmt.num(e["mae"]), "max abs. error": fmt.num(e["max_abs_error"]),
            "mean rel. error": f"{e['mre_percent']:.1f} %",
            "empty areas released > 0": f"{fmt.count(e['true_zero_released_positive'])} of {fmt.count(e['true_zeros'])}",
            "expected mean abs.": fmt.num(e["expected_mae"]), "expected max abs.": fmt.num(e["expected_max_abs"]),
        } for e in emp]), hide_index=True, key="hier_err_emp")
        st.warning("These numbers compare the release with your confidential data. Do not publish them, and do not "
                   "re-run releases until they look good: that choice is not covered by the privacy budget.")

# ============================================================================ export
if entry is not None:
    rel = entry["release"]
    with tab_exp:
        ex = entry["exports"]
        joins = model["joins"]
        if "csv" not in ex:
            new: dict[str, Any] = {"csv": export.hierarchy_csv(rel)}
            if rel.details.get("area_sets"):
                new["sets"] = area_sets.area_sets_csv(rel)
            files = ["release.csv", *(["area_queries.csv"] if "sets" in new else []),
                     *[f"{export.safe_file_stem(lv)}.geojson" for lv in joins], "release.json"]
            new["json"] = export.hierarchy_json(rel, led, files)
            new["geojson"] = {lv: export.level_geojson(rel, j) for lv, j in joins.items()}
            ex.update(new)  # built whole, then stored: an interrupted rerun leaves no half-filled dict
        c1, c2 = st.columns(2)
        c1.download_button("Download release.csv", ex["csv"], "release.csv", "text/csv", on_click="ignore",
                           key="hier_dl_csv", type="primary")
        c2.download_button("Download release.json", ex["json"], "release.json", "application/json",
                           on_click="ignore", key="hier_dl_json", type="primary")
        if "sets" in ex:
            st.download_button("Download area_queries.csv", ex["sets"], "area_queries.csv", "text/csv",
                               on_click="ignore", key="hier_dl_sets", type="primary")
            st.markdown("**area_queries.csv**: your area-code sets, their noisy totals and standard errors")
            st.dataframe(pd.read_csv(pd.io.common.BytesIO(ex["sets"]), nrows=50), hide_index=True,
                         key="hier_sets_preview")
        for lv, data in ex["geojson"].items():
            st.download_button(f"Download {export.safe_file_stem(lv)}.geojson", data,
                               f"{export.safe_file_stem(lv)}.geojson", "application/geo+json",
                               on_click="ignore", key=f"hier_dl_geo_{lv}")
        st.markdown("**release.csv** (first rows)")
        st.dataframe(pd.read_csv(pd.io.common.BytesIO(ex["csv"]), dtype=str, nrows=12), hide_index=True,
                     key="hier_csv_preview")
        with st.expander("Release record (release.json)"):
            st.json(ex["json"].decode("utf-8"), expanded=1)
        if entry.get("config"):
            with st.expander("Repeat this release in a pipeline (config file)"):
                st.download_button("Download release.toml", entry["config"], "release.toml", "application/toml",
                                   on_click="ignore", key="hier_dl_config")
                st.code(entry["config"], language="toml")
                st.caption("The command line makes the same release from the same table (new noise), spending from "
                           "this app's budget database on this computer (DPCORE_LEDGER_DB), keyed as the app keys "
                           "the table.")
        if not rel.mechanism.consistent or not rel.mechanism.nonnegative:
            st.info(f"{rel.mechanism.title}: " + ("levels do not add up; " if not rel.mechanism.consistent else "")
                    + ("some counts may be negative or fractional." if not rel.mechanism.nonnegative else ""))
