"""Release history: every release of the datasets loaded in this session, its files downloadable again.

Releases are read from the budget database (:mod:`dpcore.privacy.ledger_store`) by the content
fingerprint of the data this session has loaded, so a session only ever sees the history of data
it holds itself.  The files are the ones published at the time, stored, not recomputed: downloading
them again spends nothing.
"""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from dpcore.errors import DPCoreError
from dpcore.privacy import budget, ledger_store
from ui import fmt, state

ss = st.session_state
MIME = {".csv": "text/csv", ".json": "application/json", ".geojson": "application/geo+json"}

st.title("Release history")
st.markdown(
    "Every release of the data loaded in this session, from the budget database: when it was made, with "
    "which mechanism and budget, and its files exactly as published. Downloading them again spends nothing. "
    "The budget of a dataset follows its content, so re-uploading the same data, reloading the page, a "
    "second tab or a restart continues the same budget."
)

datasets: list[tuple[str, str, str]] = []  # (kind, fingerprint, label)
ds = state.dataset()
datasets.append(("points", ds.fingerprint, f"Points: {ds.name}"))
for fp in ss.get("census_ledgers", {}):
    datasets.append(("census", fp, "Census table"))
for fp in ss.get("od_ledgers", {}):
    datasets.append(("od", fp, "O/D trips"))

try:
    store = ledger_store.default_store()
except DPCoreError as e:
    st.error(str(e))
    st.stop()

# data bound to one population share one budget and one history: list it once, naming its data
budgets: dict[str, tuple[str, list[str]]] = {}  # budget key -> (kind, labels)
for kind, fp, label in datasets:
    key = store.budget_key(kind, fp)
    population = state.population_of(kind, fp)
    if key not in budgets:
        budgets[key] = (kind, [f"Population {population}"] if population else [])
    if population:
        budgets[key][1].append(label)
    elif not budgets[key][1]:
        budgets[key][1].append(label)

shown = 0
for key, (kind, labels) in budgets.items():
    if not store.has_ledger(key):
        continue
    label = labels[0] + (f" ({'; '.join(labels[1:])})" if len(labels) > 1 else "")
    rels = store.releases(key)
    led = store.ledger(key, budget.pure(1.0), kind)  # exists (has_ledger): its own cap is loaded
    st.subheader(f"{label} · {len(rels)} release{'s' if len(rels) != 1 else ''}")
    st.caption(f"Budget: {led.cap.symbol} = {fmt.eps(led.spent)} spent of {fmt.eps(led.cap.value)} "
               f"({len(led.entries)} spend{'s' if len(led.entries) != 1 else ''}).")
    if led.entries:
        st.dataframe(pd.DataFrame([{
            "#": e.index + 1, "time (UTC)": e.time[:16].replace("T", " "), "what": e.label,
            "cost": e.cost.label(), f"charged ({led.cap.symbol})": fmt.eps(e.charged),
            "unit of privacy": e.unit.label() + (f" (charged for a group of {e.group})" if e.group > 1 else ""),
        } for e in led.entries]), hide_index=True, key=f"hist_spends_{key}")
    if led.cap_changes:
        st.caption("Cap changes: " + "; ".join(
            f"{c.time[:16].replace('T', ' ')} UTC: {c.old.label()} → {c.new.label()}" for c in led.cap_changes))
    for r in rels:
        summ = r["summary"]
        with st.expander(f"{r['created'].replace('T', ' ')} UTC · {summ.get('mechanism', r['kind'])} · "
                         f"{summ.get('cost', '')} · release {r['release_id']}"):
            st.code(json.dumps(summ, indent=1, ensure_ascii=False), language="json")
            cols = st.columns(max(1, len(r["files"])))
            for c, name in zip(cols, r["files"], strict=False):
                ext = name[name.rfind("."):]
                # read from the database only when clicked: a rerun must not load every stored file
                c.download_button(f"Download {name}",
                                  lambda rid=r["release_id"], n=name: store.release_file(rid, n), name,
                                  MIME.get(ext, "application/octet-stream"), on_click="ignore",
                                  key=f"hist_dl_{r['release_id']}_{name}")
        shown += 1

if shown == 0:
    st.info("No release of the data loaded in this session yet. Releases made on any page appear here, with "
            "their files, and stay after the app restarts.")
