"""Counts over areas, Data step for a census table with attributes (people per area and age band …).

The table is read and checked here once; its budget key is its content's (the same as a hierarchy
release of the same table, so both draw on one budget).  Privelet and the marginal tables are
chosen on the Plan step.
"""

from __future__ import annotations

import streamlit as st

from dpcore.areas import census_tables
from dpcore.data import engines, synthetic
from dpcore.data.code_tables import read_code_table
from dpcore.data.columns import guess_level_columns
from dpcore.errors import DPCoreError
from ui import fmt, state
from ui import ordinals as ordinals_ui
from ui.kinds.areas import common
from ui.source_ui import keep_copy, read_code_upload

SYNTHETIC = "synthetic"
UPLOAD = "upload"
PER_PERSON = "(one row per person)"
COLUMN_KEYS = ("census_levels", "census_count", "census_ordinals")

ss = st.session_state


def data_step() -> None:
    """The census table: source, columns, public area list and public values of the attributes."""
    st.subheader("1. Table")
    source = st.radio(
        "Source", [SYNTHETIC, UPLOAD], key=state.persistent("census_source", SYNTHETIC), horizontal=True,
        format_func=lambda s: "Built-in synthetic census (made up)" if s == SYNTHETIC else "Upload a file",
    )
    state.store("census_source")
    if source == UPLOAD:
        df, name = _upload()
        if df is None:
            return
    else:
        df = synthetic.synthetic_census(age_bands=True)
        name = "synthetic census"

    src = ss.get("census_src") if source == UPLOAD else None
    source_key = ("synthetic",) if source != UPLOAD else ("upload", ss.get("census_df_id"))
    if ss.get("census_columns_for") != source_key:
        ss["census_columns_for"] = source_key
        cols_l = [str(c) for c in df.columns]
        ss["census_levels"] = guess_level_columns(cols_l)
        ss["census_count"] = next((c for c in cols_l if c.lower() in ("population", "count", "pop", "n", "persons")),
                                  PER_PERSON)
        ss["census_ordinals"] = []
    elif "census_levels" not in ss:  # back on this step: the columns chosen before
        for k, v in zip(COLUMN_KEYS, ss.get("census_columns_kept", ([], PER_PERSON, [])), strict=True):
            ss[k] = v

    columns = [str(c) for c in df.columns]
    c1, c2, c3 = st.columns(3)
    levels = c1.multiselect("Level columns, top level first", columns, key="census_levels",
                            help="The code columns of the geography in order, e.g. state, county, tract.")
    count_col = c2.selectbox("Count column", [PER_PERSON, *columns], key="census_count",
                             help="Number of people per row, or one row per person.")
    ss["census_ordinals"] = [o for o in ss.get("census_ordinals", []) if o not in levels]
    ordinals = c3.multiselect("Ordinal attributes (optional)", [c for c in columns if c not in levels],
                              key="census_ordinals", help="Ordered categories such as an age band.")
    ss["census_columns_kept"] = (list(levels), count_col, list(ordinals))
    st.caption(f"Source: {name}, " + (f"{fmt.count(len(df))} rows." if src is None else
                                       f"{src.n_bytes / 1e6:,.0f} MB: DuckDB sums the whole file; the columns "
                                       f"come from its first {fmt.count(len(df))} rows."))

    st.subheader("2. Unit of privacy")
    st.markdown("Each **person** counted is protected: the release hides whether any one person is in the table.")

    st.subheader("3. Public areas and values")
    areas_up = st.file_uploader("Public list of the finest areas (optional, recommended)",
                                type=["csv", "gz", "parquet"], key="census_areas_upload",
                                help="A gazetteer or boundary-file table with the same level columns.")
    if not levels:
        st.info("Choose the level columns (top level first) to continue.")
        return
    orders = ordinals_ui.orders_input(ordinals, {"age_band": synthetic.AGE_BANDS} if source != UPLOAD else None)
    if orders is None:
        return
    table_key = (source_key, tuple(levels), count_col, tuple(ordinals),
                 areas_up.file_id if areas_up is not None else ss.get("census_areas_kept"), tuple(orders.items()))
    if ss.get("census_table_key") != table_key:
        _build(df, src, name, levels, count_col, ordinals, orders, areas_up, table_key, demo=source == SYNTHETIC)
    table, _ = common.table()
    if table is None or ss.get("census_table_key") != table_key:
        return
    s = table.structure
    if source == UPLOAD and ss.get("census_upload_error"):  # no green line under the red one: say what is in use
        st.caption(f"In use: {name} (" + fmt.sizes_line(s.level_names[1:], [len(s.paths_at(d)) for d in
                                                                                range(1, len(s.level_names))]) + ").")
        return
    st.success(f"{name}: " + fmt.sizes_line(s.level_names[1:], [len(s.paths_at(d)) for d in
                                                                       range(1, len(s.level_names))]))
    if not s.public_areas:
        st.warning(
            "The list of areas is taken from the data: an area where nobody is counted is missing from the "
            "release, and that absence is not protected. Upload a public list of areas (e.g. from a boundary file) "
            "so that every area, empty or not, gets noise."
        )
    if ordinals:
        st.caption("Values of the ordinal attributes (your public lists; each is a column of the release): "
                   + "; ".join(f"{o}: {', '.join(b)}" for o, b in zip(s.ordinals, s.bins, strict=True)))


def _upload():
    up = st.file_uploader("Census table (CSV, CSV.gz or Parquet)", type=["csv", "gz", "txt", "parquet"],
                          key="census_upload",
                          help="One row per area with a count column, or one row per person; code columns per level. "
                               "Files above 200 MB are summed by DuckDB instead of being read into memory. "
                               "Up to 2 GB per file; for larger files use the command line: "
                               "python -m dpcore release census --engine duckdb.")
    if up is not None and ss.get("census_upload_id") != up.file_id:
        ss["census_upload_id"] = up.file_id
        try:
            # above the engine threshold the table stays in a file that DuckDB sums; the page shows
            # its first rows, and its budget is keyed by the sums' content (as a small table's)
            df_new, big = read_code_upload(up)
            ss["census_src"] = big
            ss["census_df_id"] = up.file_id  # the table now shown (a failed upload keeps the earlier one)
            keep_copy(big, "census_upload_tmp")
            ss["census_upload_df"] = df_new
            ss["census_upload_name"] = up.name
            ss["census_upload_error"] = None
            for k in COLUMN_KEYS:
                ss.pop(k, None)  # re-guess the columns for the new file
        except DPCoreError as e:
            ss["census_upload_error"] = str(e)
    if ss.get("census_upload_error"):
        st.error(ss["census_upload_error"])
        st.caption("The earlier table and release are kept.")
    df = ss.get("census_upload_df")
    if df is None:
        st.info("Upload a census table, or use the built-in synthetic census.")
    return df, ss.get("census_upload_name", "")


def _build(df, src, name, levels, count_col, ordinals, orders, areas_up, table_key, *, demo: bool) -> None:
    """The confidential census table and its budget key (this session only), or the error.

    ``demo``: the built-in made-up census, whose budget lives with the session; it is marked here,
    with the key of the table just built (a failed build leaves the earlier table, real or not,
    and its budget as they were)."""
    try:
        areas_df = read_code_table(areas_up.getvalue(), areas_up.name) if areas_up is not None else None
        if src is not None:  # a large upload: DuckDB sums the rows per area and ordinal value
            bar = st.progress(0.0, text=f"Counting {name} with DuckDB …")
            cc = engines.get_engine("duckdb").code_counts(
                src, [*levels, *ordinals], count=None if count_col == PER_PERSON else count_col,
                progress=lambda f, msg: bar.progress(min(max(f, 0.0), 1.0), text=msg))
            bar.empty()
            small = cc.frame[[*levels, *ordinals, "count"]].rename(columns={"count": engines.COUNT_COLUMN})
            table = census_tables.CensusTable.from_frame(small, levels, engines.COUNT_COLUMN, ordinals=ordinals,
                                                         areas=areas_df, **ordinals_ui.public_orders(orders))
            keys = census_tables.fingerprints(small, levels, engines.COUNT_COLUMN)
            fp = keys[0]
        else:
            table = census_tables.CensusTable.from_frame(df, levels, None if count_col == PER_PERSON else count_col,
                                                         ordinals=ordinals, areas=areas_df,
                                                         **ordinals_ui.public_orders(orders))
            # the used columns' content: the same key as DuckDB's sums of the same table would give
            keys = census_tables.fingerprints(df, levels, None if count_col == PER_PERSON else count_col)
            fp = keys[0]
            state.session().adopt_legacy("areas", fp, lambda: [census_tables.legacy_fingerprint(df)])  # earlier key rule
        if not demo:  # every level's key finds the budget (an empty row, the earlier rule: issue 26 item 11)
            state.session().adopt_keys("areas", fp, keys[1:])
        if demo:
            state.mark_demo("areas", fp)  # the made-up census's budget lives with the session
        ss["census_table"], ss["census_fp"], ss["census_table_key"] = table, fp, table_key
        ss["census_table_source"] = SYNTHETIC if demo else UPLOAD  # Plan and Release use it only under this source
        ss["census_name"] = name
        ss["census_areas_kept"] = areas_up.file_id if areas_up is not None else None
        ss["census_areas_name"] = areas_up.name if areas_up is not None else None  # for release.toml
    except DPCoreError as e:
        st.error(str(e))
