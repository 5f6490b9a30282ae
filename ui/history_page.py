"""Release history: every dataset in the budget database, its releases, its files downloadable again.

Every budget of the shared budget database is listed (issue 26, item 8), by the name the curator
gave it here (kept in the database; an uploaded file's name is never stored: issue 18, item 8),
with when it was opened and last charged, spent and cap, and each release with its files:
the ones published at the time, stored, not recomputed, so downloading them again spends nothing.
A charge whose files were never delivered (a server or a command stopped after the charge) is
listed as "charged, not delivered", with its stored files to download when they were kept
(:mod:`dpcore.privacy.ledger_journal`).  The made-up demo data's budget lives with this browser
session, in a database of its own.

``pages/history.py`` calls :func:`history_step` on every run (this module is imported once).
"""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st

from dpcore.errors import DPCoreError
from dpcore.privacy import budget
from dpcore.privacy.ledger_history import datasets as all_datasets
from dpcore.privacy.ledger_history import name_dataset, series_of
from dpcore.privacy.ledger_journal import undelivered
from dpcore.privacy.ledger_store import LedgerStore
from dpcore.privacy.oneoff_links import LinkedLedger
from ui import budget_ui, clicks, fmt, frame, series, state
from ui.kinds.points import state as points_state

ss = st.session_state
MIME = {".csv": "text/csv", ".json": "application/json", ".geojson": "application/geo+json"}

#: budget key -> (kind, labels, the store holding it)
Budgets = dict[str, tuple[str, list[str], LedgerStore]]


def history_step() -> None:
    """The History page below its heading: every budget, its releases and files, the removal form."""
    with clicks.held():  # this session's last release, if its files still wait (its map's run stopped early)
        points_state.store_pending_history()
    datasets: list[tuple[str, str, str]] = []  # (kind, fingerprint, label)
    ds = points_state.dataset()
    datasets.append(("points", ds.fingerprint, f"Points: {ds.name}"))
    for fp in ss.get("census_ledgers", {}):
        datasets.append(("areas", fp, "Census table"))
    for fp in ss.get("od_ledgers", {}):
        datasets.append(("flows", fp, "O/D trips"))

    try:
        shared = state.session().store
    except DPCoreError as e:
        st.error(str(e))
        frame.stop()

    try:
        budgets, given = _all_budgets(datasets, shared)
    except DPCoreError as e:
        st.error(str(e))
        frame.stop()

    over_time = {key: series_of(store, key) for key, (_kind, _labels, store) in budgets.items()}
    _office_view(shared, _names(budgets, over_time))

    shown, listed = 0, []  # listed: (store, budget key, release id, title)
    drawn: dict[str, str] = {}  # series key -> the budget it is drawn under (a series linked to several: once)
    for key, (kind, labels, store) in budgets.items():
        if store.has_ledger(key):
            shown += _budget_history(key, kind, labels, store, given, listed, over_time[key], drawn)

    _removal_form(budgets, shared, listed)

    if shown == 0:
        st.info("No release in the budget database yet. Releases made on any page or on the command line appear "
                "here, with their files, and stay after the app restarts.")


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 100_000 else f"{n / 1e3:,.0f} kB"


def _loaded_budgets(datasets: list[tuple[str, str, str]]) -> Budgets:
    """The budgets of the data loaded in this session (data bound to one population share one budget
    and one history: listed once, naming its data)."""
    out: Budgets = {}
    for kind, fp, label in datasets:
        store = state.session_for(kind, fp).store
        key = store.budget_key(kind, fp)
        population = state.population_of(kind, fp)
        if key not in out:
            out[key] = (kind, [f"Population {population}"] if population else [], store)
        if population or not out[key][1]:
            out[key][1].append(label)
    return out


def _all_budgets(datasets: list[tuple[str, str, str]], shared: LedgerStore) -> tuple[Budgets, dict[str, str]]:
    """The loaded data's budgets, then every other dataset of the shared database, loaded in this
    session or not (issue 26, item 8); and the name the curator gave each budget key."""
    budgets = _loaded_budgets(datasets)
    given = {}  # budget key -> the name the curator gave it
    for d in all_datasets(shared):
        given[d["key"]] = d["names"][0] if d["names"] and not d["names"][0].startswith("Population ") else ""
        if d["key"] in budgets:
            if given[d["key"]]:
                budgets[d["key"]][1].insert(0, given[d["key"]])
            continue
        names = d["names"] or [f"{d['kind']} data, budget opened {d['created'][:16].replace('T', ' ')} UTC (unnamed)"]
        budgets[d["key"]] = (d["kind"], names, shared)
    return budgets, given


def _names(budgets: Budgets, over_time: dict[str, list[dict]]) -> dict[str, str]:
    """Budget key -> the name its data is listed under here (a series: its data's, "over time")."""
    names: dict[str, str] = {}
    for key, (_kind, labels, _store) in budgets.items():
        if labels:
            names[key] = labels[0]
            for s in over_time.get(key, []):
                names.setdefault(s["key"], s["name"] or f"{labels[0]} (over time)")
    return names


def _office_view(shared: LedgerStore, names: dict[str, str]) -> None:
    """Every budget in the database as one table, and the database's size on disk."""
    st.subheader("Every budget in the database (the office view)")
    st.caption("Population, unit, periods, spent per period and cap, the horizon figure for a person present in every "
               "period: read from the budget database, without uploading anything (as python -m dpcore budgets).")
    series.budgets_table(names)

    size = shared.storage()
    st.caption(f"Budget database: {_mb(size['database_bytes'])} on disk ({shared.path}); "
               f"{fmt.count(size['files'])} release files kept, {_mb(size['files_bytes'])} compressed "
               f"({_mb(size['files_published_bytes'])} as published)"
               + (f"; {fmt.count(size['removed'])} files removed" if size["removed"] else "") + ".")


def _rename(store: LedgerStore, key: str) -> None:
    try:
        name_dataset(store, key, ss[f"hist_name_{key}"])
    except DPCoreError as e:
        ss["hist_removed"] = (False, str(e))


def _delivery(d: dict | None) -> str:
    """The "delivered" column of a charge: yes, or why not (:mod:`dpcore.privacy.ledger_journal`)."""
    if d is None:
        return "yes"
    return "charged, not delivered" + (" (files stored below)" if d["state"] == "stored" else " (nothing stored)")


def _undelivered_note(d: dict) -> None:
    where = "the app" if d["target"] == "app" else d["target"].removeprefix("folder:")
    if d["state"] == "stored":
        st.warning(f"Charge #{d['idx'] + 1} was charged, not delivered to {where}: its files were stored but never "
                   f"written. Download them below (release {d['release_id']}), or on the command line: python -m "
                   f"dpcore history --serve {d['release_id']} --out DIR. The same files: no new noise, no new charge.")
    else:
        st.warning(f"Charge #{d['idx'] + 1} was charged, not delivered to {where}: the run stopped before its files "
                   "were kept (or an open session is still storing them: look again in a moment), so there is "
                   "nothing to serve yet. The budget it spent stays spent.")


def _budget_history(key: str, kind: str, labels: list[str], store: LedgerStore, given: dict[str, str],
                    listed: list[tuple[LedgerStore, str, str, str]], over_time: list[dict],
                    drawn: dict[str, str]) -> int:
    """One budget (it has a ledger): its spends, its name field, each release with its files, and the
    series over time of the same data (``over_time``: :func:`dpcore.privacy.ledger_history.series_of`);
    appends the releases with files to ``listed`` and returns how many releases it shows.

    A series linked to several listed budgets (:func:`dpcore.privacy.linked_series.spread` links it to
    every member of a budget group) is drawn, listed and counted under the first of them only
    (``drawn``: series key -> that budget's name); a later one says where it is."""
    label = labels[0] + (f" ({'; '.join(labels[1:])})" if len(labels) > 1 else "")
    rels = store.releases(key)
    # exists (has_ledger): its own cap is loaded; with a series, read as the sidebar reads it (linked)
    led = LinkedLedger(store, key, budget.pure(1.0), kind) if over_time else store.ledger(key, budget.pure(1.0), kind)
    periods = sum(len(s["periods"]) for s in over_time)
    st.subheader(f"{label} · {len(rels)} release{'s' if len(rels) != 1 else ''}"
                 + (f" · over time: {fmt.count(periods)} period{'s' if periods != 1 else ''} released" if over_time
                    else ""))
    last = f"; last charge {led.entries[-1].time[:16].replace('T', ' ')} UTC" if led.entries else ""
    spent, share = budget_ui.spent_with_series(led)
    with_series = budget_ui.series_share_text(led, share)
    st.caption(f"Budget: {led.cap.symbol} = {fmt.eps(spent)} spent of {fmt.eps(led.cap.value)} "
               f"({len(led.entries)} spend{'s' if len(led.entries) != 1 else ''}{last})"
               + (f"; {with_series}" if with_series else "."))
    pending = {d["idx"]: d for d in undelivered(store, key)}
    if not store.temporary:
        st.text_input("Name of this dataset (kept in the budget database, shown here in every session)",
                      value=given.get(key, ""), key=f"hist_name_{key}", on_change=clicks.atomic(_rename), args=(store, key),
                      placeholder="e.g. Taxi pickups, April 2014")
    if led.entries:
        st.dataframe(pd.DataFrame([{
            "#": e.index + 1, "time (UTC)": e.time[:16].replace("T", " "), "what": e.label,
            "cost": e.cost.label(), f"charged ({led.cap.symbol})": fmt.eps(e.charged),
            "unit of privacy": e.unit.label() + (f" (charged for a group of {e.group})" if e.group > 1 else ""),
            "delivered": _delivery(pending.get(e.index)),
        } for e in led.entries]), hide_index=True, key=f"hist_spends_{key}")
    for d in pending.values():
        _undelivered_note(d)
    if led.cap_changes:
        st.caption("Cap changes: " + "; ".join(
            f"{c.time[:16].replace('T', ' ')} UTC: {c.old.label()} → {c.new.label()}" for c in led.cap_changes))
    if store.temporary:
        st.caption(f"{state.DEMO_BUDGET_NOTE}: made-up data, whose budget and releases are not kept after this "
                   "session.")
    not_delivered = {d["release_id"] for d in pending.values()}
    for r in rels:
        _release(r, store, key, not_delivered, listed)
    n = len(rels)
    for s in over_time:
        if s["key"] in drawn:  # its widget keys are already in this run, its releases already listed
            st.markdown(f"**Over time**{_population(s)}: listed under {drawn[s['key']]}.")
        else:
            drawn[s["key"]] = label
            n += _series_history(s, store, listed)
    return n


def _population(s: dict) -> str:
    return f" (population {s['name']})" if s["name"] else ""


def _series_history(s: dict, store: LedgerStore, listed: list[tuple[LedgerStore, str, str, str]]) -> int:
    """A series over time of the data: what each period's release spent, and every release's files (one
    per period, and the series' own files); returns how many period releases it shows."""
    cap = budget.PrivacyCost.from_dict(s["cap"])
    sym, n = cap.symbol, len(s["periods"])
    per = "per period" if s["per_period"] else "of the horizon"
    st.markdown(f"**Over time**{_population(s)}: "
                f"{fmt.count(n)} period{'s' if n != 1 else ''} released, {s['unit']}")
    spent = ("what its unit cannot count (a one-off release of the data protects another unit)"
             if s["spent"] is None else f"{sym} = {fmt.eps(s['spent'])}")
    st.caption(f"Budget of the series: {spent} spent of {fmt.eps(cap.value)} {per} "
               f"({'the most any period spent; ' if s['per_period'] else ''}{fmt.count(s['charges'])} "
               f"spend{'s' if s['charges'] != 1 else ''}; one-off releases of the same data included, as they "
               "count in every period).")
    rels = {r["release_id"]: r for r in s["releases"]}
    st.dataframe(pd.DataFrame([{
        "period": p["period"], f"spent ({sym})": fmt.eps(p["spent"]), "charges": p["charges"],
        "release": ", ".join(p["release_ids"]),
        "files": "kept" if any(rels.get(r, {}).get("files") for r in p["release_ids"]) else "removed",
    } for p in s["periods"]]), hide_index=True, key=f"hist_series_{s['key']}")
    titled = []
    for r in s["releases"]:
        summ = r["summary"]
        what = f"period {summ['period']}" if "period" in summ else "the series' files (series.csv, series.json)"
        title = f"{r['created'].replace('T', ' ')} UTC · over time · {what} · release {r['release_id']}"
        if r["files"]:
            listed.append((store, s["key"], r["release_id"], title))
            titled.append((title, r))
    if titled:
        with st.expander(f"Files of the series' releases ({fmt.count(len(titled))})"):
            i = st.selectbox("Release", range(len(titled)), format_func=lambda j: titled[j][0],
                             key=f"hist_series_pick_{s['key']}")
            r = titled[i][1]
            for c, name in zip(st.columns(max(1, len(r["files"]))), r["files"], strict=False):
                c.download_button(f"Download {name}",
                                  lambda rid=r["release_id"], nm=name, db=store: db.release_file(rid, nm), name,
                                  MIME.get(name[name.rfind("."):], "application/octet-stream"), on_click="ignore",
                                  key=f"hist_dl_{r['release_id']}_{name}")
    return sum(1 for r in s["releases"] if "period" in r["summary"])


def _release(r: dict, store: LedgerStore, key: str, not_delivered: set[str],
             listed: list[tuple[LedgerStore, str, str, str]]) -> None:
    """One release: its description and its stored files, each downloadable again."""
    summ = r["summary"]
    title = (f"{r['created'].replace('T', ' ')} UTC · {summ.get('mechanism', r['kind'])} · "
             f"{summ.get('cost', '')} · release {r['release_id']}"
             + (" · charged, not delivered" if r["release_id"] in not_delivered else ""))
    if r["files"]:
        listed.append((store, key, r["release_id"], title))
    with st.expander(title + (" · files removed" if r["removed"] and not r["files"] else "")):
        st.markdown("  \n".join(fmt.summary_lines(summ)))  # plain lines, not raw JSON (issue 26 item 10)
        if r["removed"]:
            when = sorted(set(r["removed"].values()))[-1].replace("T", " ")
            st.caption(f"Removed from the history on {when} UTC to save space, no longer downloadable: "
                       f"{', '.join(r['removed'])}. The release's budget entry stays.")
        cols = st.columns(max(1, len(r["files"])))
        for c, name in zip(cols, r["files"], strict=False):
            ext = name[name.rfind("."):]
            # read from the database only when clicked: a rerun must not load every stored file
            c.download_button(f"Download {name}",
                              lambda rid=r["release_id"], n=name, db=store: db.release_file(rid, n), name,
                              MIME.get(ext, "application/octet-stream"), on_click="ignore",
                              key=f"hist_dl_{r['release_id']}_{name}")


def _remove(before: dt.date | None, chosen: list[tuple[LedgerStore, str]], everything: bool,
            budgets: Budgets, shared: LedgerStore, series_keys: tuple[tuple[LedgerStore, str], ...] = ()) -> None:
    """Remove release files by date (of the budgets listed, and ``series_keys``: the series over time
    listed under them) or the ``chosen`` releases'."""
    n = 0
    try:
        if before is not None:
            stores: dict[str, tuple[LedgerStore, set[str]]] = {}
            for key, (_kind, _labels, store) in budgets.items():
                stores.setdefault(str(store.path), (store, set()))[1].add(key)
            for store, key in series_keys:
                stores.setdefault(str(store.path), (store, set()))[1].add(key)
            if everything:
                stores[str(shared.path)] = (shared, set())
            for path, (store, keys) in stores.items():
                n += store.remove_release_files(before=before.isoformat(),
                                                fingerprints=None if everything and path == str(shared.path) else keys)
        else:
            for store, rid in chosen:
                n += store.remove_release_files(release_ids=[rid])
        ss["hist_removed"] = (True, f"Removed {fmt.count(n)} release file{'s' if n != 1 else ''}; the budget "
                                    "entries stay.")
    except DPCoreError as e:
        ss["hist_removed"] = (False, str(e))


def _removal_form(budgets: Budgets, shared: LedgerStore, listed: list[tuple[LedgerStore, str, str, str]]) -> None:
    """Remove old release files, by date or by release (the budget entries stay)."""
    with st.expander("Remove old release files (the budget entries stay)"):
        st.caption("Stored release files take space; removing them keeps every budget entry and the release's "
                   "description, but the files can no longer be downloaded here (keep your own copies).")
        c1, c2 = st.columns(2)
        before = c1.date_input("Releases made before", value=dt.date.today() - dt.timedelta(days=30), key="hist_before")
        everything = c1.checkbox("Also releases of data not loaded in this session", key="hist_everything",
                                 help="Every release in the budget database, e.g. of data loaded in earlier sessions.")
        series_keys = tuple(dict.fromkeys((store, key) for store, key, _rid, _title in listed if key not in budgets))
        c1.button("Remove their files", key="hist_remove_before", on_click=clicks.atomic(_remove),
                  args=(before, [], everything, budgets, shared, series_keys))
        chosen = c2.multiselect("Or these releases", list(range(len(listed))), format_func=lambda i: listed[i][3],
                                key="hist_chosen")
        c2.button("Remove the chosen releases' files", key="hist_remove_chosen", disabled=not chosen,
                  on_click=clicks.atomic(_remove), args=(None, [(listed[i][0], listed[i][2]) for i in chosen], False, budgets, shared))
        if ss.get("hist_removed"):
            done, msg = ss.pop("hist_removed")
            (st.success if done else st.error)(msg)
