"""Census (Privelet): release population counts per area of a geographic hierarchy."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dpcore.areas import census_privelet, census_tables
from dpcore.data import engines, synthetic
from dpcore.data.code_tables import read_code_table
from dpcore.data.columns import guess_level_columns
from dpcore.errors import DPCoreError
from dpcore.pipeline import release_census
from dpcore.privacy import budget
from dpcore.privacy.calibration import interval_half_width
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import secure_source
from ui import budget_ui, fmt, state
from ui import marginals as marginals_ui
from ui import ordinals as ordinals_ui
from ui.source_ui import drop_copy, keep_copy, large_upload_source

SYNTHETIC = "synthetic"
UPLOAD = "upload"
PER_PERSON = "(one row per person)"
MAX_SELECT = 2000  # beyond this many areas, type the path instead of picking it
DEFAULT_CAP, DEFAULT_RHO_CAP = state.DEFAULT_CAP, state.DEFAULT_RHO_CAP
DEFAULT_EPSILON = 0.5
MECHS = {"privelet": "Privelet: every area of every level (pure ε)",
         "matrix": "Matrix mechanism: the tables you choose (area × age band …)"}
DEFS = {"pure": "Pure ε-DP", "zcdp": "ρ-zCDP (for the matrix mechanism's optimal strategy)"}

ss = st.session_state
ss.setdefault("census_ledgers", {})

st.title("Census (Privelet)")
st.markdown(
    "Publish noisy population counts for every area of a hierarchy (state → county → tract) "
    "with Privelet, so that totals add up across levels and each level's error is known before release; "
    "or publish the tables you choose (people per area and age band, per age band, …) with the matrix "
    "mechanism, tuned to exactly those tables."
)

# ---------------------------------------------------------------- source
st.subheader("1. Data")
source = st.radio(
    "Source", [SYNTHETIC, UPLOAD], key="census_source", horizontal=True,
    format_func=lambda s: "Built-in synthetic census (made up)" if s == SYNTHETIC else "Upload a file",
)
if source == UPLOAD:
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
            big = large_upload_source(up)
            try:
                df_new = (read_code_table(up.getvalue(), up.name) if big is None else
                          engines.get_engine("duckdb").head(big, 5000))
            except DPCoreError:
                drop_copy(big)
                raise
            ss["census_src"] = big
            ss["census_df_id"] = up.file_id  # the table now shown (a failed upload keeps the earlier one)
            keep_copy(big, "census_upload_tmp")
            ss["census_upload_df"] = df_new
            ss["census_upload_name"] = up.name
            ss["census_upload_error"] = None
            for k in ("census_levels", "census_count", "census_ordinals"):
                ss.pop(k, None)  # re-guess the columns for the new file
        except DPCoreError as e:
            ss["census_upload_error"] = str(e)
    if ss.get("census_upload_error"):
        st.error(ss["census_upload_error"])
        st.caption("The earlier table and release are kept.")
    df = ss.get("census_upload_df")
    name = ss.get("census_upload_name", "")
    if df is None:
        st.info("Upload a census table, or use the built-in synthetic census.")
        st.stop()
else:
    df = synthetic.synthetic_census(age_bands=True)
    name = "synthetic census"

src = ss.get("census_src") if source == UPLOAD else None
source_key = ("synthetic",) if source != UPLOAD else ("upload", ss.get("census_df_id"))
if ss.get("census_columns_for") != source_key or "census_levels" not in ss:
    ss["census_columns_for"] = source_key
    cols_l = [str(c) for c in df.columns]
    ss["census_levels"] = guess_level_columns(cols_l)
    count_guess = next((c for c in cols_l if c.lower() in ("population", "count", "pop", "n", "persons")),
                       PER_PERSON)
    ss["census_count"] = count_guess
    ss["census_ordinals"] = []

columns = [str(c) for c in df.columns]
c1, c2, c3 = st.columns(3)
levels = c1.multiselect("Level columns, top level first", columns, key="census_levels",
                        help="The code columns of the geography in order, e.g. state, county, tract.")
count_col = c2.selectbox("Count column", [PER_PERSON, *columns], key="census_count",
                         help="Number of people per row, or one row per person.")
ss["census_ordinals"] = [o for o in ss.get("census_ordinals", []) if o not in levels]
ordinals = c3.multiselect("Ordinal attributes (optional)", [c for c in columns if c not in levels],
                          key="census_ordinals", help="Ordered categories such as an age band.")
areas_up = st.file_uploader("Public list of the finest areas (optional, recommended)", type=["csv", "gz", "parquet"],
                            key="census_areas_upload",
                            help="A gazetteer or boundary-file table with the same level columns.")

st.caption(f"Source: {name}, " + (f"{fmt.count(len(df))} rows." if src is None else
                                   f"{src.n_bytes / 1e6:,.0f} MB: DuckDB sums the whole file; the columns come from "
                                   f"its first {fmt.count(len(df))} rows."))

if not levels:
    st.info("Choose the level columns (top level first) to continue.")
    st.stop()
orders = ordinals_ui.orders_input(ordinals, {"age_band": synthetic.AGE_BANDS} if source != UPLOAD else None)
if orders is None:
    st.stop()

table_key = (source_key, tuple(levels), count_col, tuple(ordinals), areas_up.file_id if areas_up is not None else None,
             tuple(orders.items()))
table, fp = None, None
if ss.get("census_table_key") == table_key:
    # confidential: this session only, rebuilt (with its budget key) when an input changes
    table, fp = ss["census_table"], ss["census_fp"]
else:
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
            fp = census_tables.fingerprint(small, levels, engines.COUNT_COLUMN)
        else:
            table = census_tables.CensusTable.from_frame(df, levels, None if count_col == PER_PERSON else count_col,
                                                  ordinals=ordinals, areas=areas_df,
                                                  **ordinals_ui.public_orders(orders))
            # the used columns' content: the same key as DuckDB's sums of the same table would give
            fp = census_tables.fingerprint(df, levels, None if count_col == PER_PERSON else count_col)
            state.session().adopt_legacy("census", fp, [census_tables.legacy_fingerprint(df)])  # earlier key rule
        ss["census_table"], ss["census_fp"], ss["census_table_key"] = table, fp, table_key
    except DPCoreError as e:
        st.error(str(e))

if table is not None and not table.structure.public_areas:
    st.warning(
        "The list of areas is taken from the data: an area where nobody is counted is missing from the "
        "release, and that absence is not protected. Upload a public list of areas (e.g. from a boundary file) "
        "so that every area, empty or not, gets noise."
    )
if table is not None and ordinals:
    st.caption("Values of the ordinal attributes (your public lists; each is a column of the release): "
               + "; ".join(f"{o}: {', '.join(b)}" for o, b in zip(table.structure.ordinals,
                                                                    table.structure.bins, strict=True)))
if fp is None:  # no table: its budget (keyed by the table's content) cannot be found
    st.stop()

# ---------------------------------------------------------------- budget
st.subheader("2. Mechanism and budget")
mech = st.radio("Mechanism", list(MECHS), format_func=MECHS.get, key="census_mech", horizontal=True)
# persistent: the same table finds the same budget (its population's, once bound) in every tab and after restarts
led = budget_ui.population_input("census", fp, budget.pure(DEFAULT_CAP), ss["census_ledgers"], f"census_{fp}",
                                 reset=(f"census_def_{fp}",))
population = state.population_of("census", fp)
locked = bool(led.entries)
definition = st.radio("Privacy definition of this dataset's budget", list(DEFS), format_func=DEFS.get,
                      index=list(DEFS).index(led.definition), disabled=locked, key=f"census_def_{fp}",
                      horizontal=True,
                      help="Privelet is pure ε-DP; under a ρ-zCDP budget it is charged ρ = ε²/2.")
if locked:
    st.caption(f"Fixed for this {'population' if population else 'dataset'}: budget has already been spent under it.")
elif definition != led.definition:
    budget_ui.switch_definition(led, definition, {"pure": DEFAULT_CAP, "zcdp": DEFAULT_RHO_CAP})
sym = led.cap.symbol
ss.setdefault("census_epsilon", DEFAULT_EPSILON)
b1, b2, b3 = st.columns(3)
if mech == "privelet":
    epsilon = b1.number_input("Privacy budget of this release (ε)", min_value=0.01, max_value=10.0,
                              step=0.05, key="census_epsilon", help="Smaller ε: more privacy, more noise.")
budget_ui.cap_input(led, "census_cap", b2, label="Budget cap of this dataset", population=population)
b3.metric("Spent of the population's cap" if population else "Spent of the cap",
          f"{sym} = {fmt.eps(led.spent)} of {fmt.eps(led.cap.value)}")
if mech == "matrix":
    marginals_ui.section(table, fp, led, name)
    st.stop()
axis_names = [census_tables.GEO_AXIS, *ordinals]
ss["census_plus"] = [a for a in ss.get("census_plus", []) if a in axis_names]
with st.expander("Advanced: Privelet+"):
    plus = st.multiselect("Axes left untransformed (identity)", axis_names, key="census_plus",
                          help="Privelet+ adds plain noise per cell on these axes: better for small axes "
                               "queried cell by cell, worse for large sums.")

if table is None:
    st.stop()

# ---------------------------------------------------------------- expected error
st.subheader("3. Expected error (before release)")
try:
    err = census_privelet.expected_error(table.structure, epsilon, plus_axes=plus)
except DPCoreError as e:
    st.error(str(e))
    st.stop()
show = pd.DataFrame({
    "level": err["level"],
    "number of areas": err["n_areas"].map(fmt.count),
    "SD of an area's total": err["sd"].map(lambda v: f"{v:,.1f}"),
    "± 95 %": err["ci95"].map(lambda v: f"± {v:,.1f}"),
})
st.dataframe(show, hide_index=True, key="census_expected")
st.caption("Analytic and data-free: 95 % half-width = 1.96 × SD (normal approximation of the noise).")

q1, q2 = st.columns([1, 2])
q_level = q1.selectbox("Check one area: level", table.structure.level_names[1:], key="census_q_level")
depth = table.structure.level_depth(q_level)
paths = table.structure.paths_at(depth)
labels = [" / ".join(p) for p in paths]
if len(paths) <= MAX_SELECT:
    q_label = q2.selectbox("Area (code path)", labels, key="census_q_area")
else:
    q_label = q2.text_input(f"Area code path ({fmt.count(len(paths))} areas), e.g. {labels[0]}",
                            value=labels[0], key="census_q_text")
q_path = tuple(s.strip() for s in str(q_label).split("/"))
try:
    q_sd = census_privelet.area_expected_error(table.structure, epsilon, q_path, plus_axes=plus)
    st.markdown(f"Expected error of **{q_label}**'s total: ± {interval_half_width('normal', q_sd):,.1f} people "
                f"(95 %; SD {q_sd:,.1f}).")
except DPCoreError as e:
    st.error(str(e))

# ---------------------------------------------------------------- release
st.subheader("4. Release")
cost = budget.pure(epsilon)
left_after = led.remaining - led.charge_of(cost)
label = f"Release with ε = {fmt.eps(epsilon)} — {fmt.eps(max(left_after, 0.0))} left after this"


def release_now(table: census_tables.CensusTable, epsilon: float, plus: list[str], led: Ledger, fp: str,
                name: str) -> None:
    """The Release button's action (:func:`ui.state.release_button`): charge, release, store."""
    rel = release_census(table, "privelet", budget.pure(epsilon), led, session=state.session(), noise=secure_source(),
                         plus_axes=tuple(plus))
    entry = {"release": rel, "fingerprint": fp, "source": name,
             "csv": census_privelet.census_csv(rel), "json": census_privelet.census_json(rel, led)}
    # the history first: Streamlit 1.67 may stop a callback at an st.session_state access
    state.remember_release("census", fp, rel.release_id,
                           {"mechanism": "Privelet" + ("+" if rel.plus_axes else ""), "cost": rel.cost.label(),
                            "levels": list(rel.structure.levels)},
                           {"release.csv": entry["csv"], "release.json": entry["json"]})
    ss["census_release"] = entry


state.release_button("census_release_button", label, release_now, table, epsilon, plus, led, fp, name,
                     disabled=not led.can_spend(cost))
if not led.can_spend(cost):
    st.error(f"Not enough budget left for ε = {fmt.eps(epsilon)}: {sym} = {fmt.eps(led.remaining)} is left of the "
             f"cap {fmt.eps(led.cap.value)}. Lower ε, or raise the cap if your privacy policy allows it.")

entry = ss.get("census_release")
if entry is None:
    st.info("Nothing released yet. The expected error above costs nothing; the Release button spends ε.")
    st.stop()

rel = entry["release"]
marginals_ui.show_release(entry, fp, f"Released {entry['source']} with Privelet{'+' if rel.plus_axes else ''}, "
                                         f"ε = {fmt.eps(rel.epsilon)}.",
                              "Level", rel.levels, 1, 1, "SD", "release.csv", "census")
