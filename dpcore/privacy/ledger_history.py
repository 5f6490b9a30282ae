"""Every dataset of the budget database, for History in any session (issue 26, item 8).

A budget is found by its data's keyed fingerprint, so a new browser session used to show no
history until the same file was uploaded again.  :func:`datasets` lists every budget of the
database instead, with the name the curator gave it (:func:`name_dataset`, table
``dataset_names``; a population's own name), never an uploaded file's name (issue 18, item 8), when
it was opened and last charged, spent and cap, its releases and its charges not delivered
(:mod:`dpcore.privacy.ledger_journal`); the stored files of each release can be downloaded again
from there.

>>> import tempfile, pathlib
>>> from dpcore.privacy import budget
>>> from dpcore.privacy.ledger_store import LedgerStore
>>> store = LedgerStore(pathlib.Path(tempfile.mkdtemp()) / "l.sqlite")
>>> led = store.ledger(store.key("points", "fp"), budget.pure(1.0), "points")
>>> _ = led.spend(budget.pure(0.25), "first")
>>> name_dataset(store, led.dataset, "Pickups, April")
>>> [(d["names"], d["kind"], d["spent"], d["cap"]["value"]) for d in datasets(store)]
[(['Pickups, April'], 'points', 0.25, 1.0)]
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from fractions import Fraction
from typing import Any

from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.ledger import LedgerEntry
from dpcore.privacy.ledger_journal import undelivered
from dpcore.privacy.linked_series import period_ledgers
from dpcore.privacy.oneoff_links import series_spend
from dpcore.privacy.units import TimeUnit

__all__ = ["NAMES_SCHEMA", "datasets", "name_dataset", "series_of"]

NAMES_SCHEMA = """
CREATE TABLE IF NOT EXISTS dataset_names (
    fingerprint TEXT NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (fingerprint, name)
);
"""


def name_dataset(store: Any, key: str, name: str) -> None:
    """Name the budget ``key`` as the curator typed it (an empty name removes it); kept in the
    database only, shown by History in every session."""
    name = " ".join(str(name).split())[:200]
    with store.transaction() as con:
        con.execute(NAMES_SCHEMA)
        con.execute("DELETE FROM dataset_names WHERE fingerprint = ?", (key,))
        if name:
            con.execute("INSERT INTO dataset_names VALUES (?, ?)", (key, name))


def datasets(store: Any) -> list[dict[str, Any]]:
    """Every one-off budget of the database (periods of a series are listed by ``budgets``), oldest
    first: ``key``, ``kind``, ``names``, ``population`` (when data is bound to it), ``created``,
    ``last`` (time of the last charge), ``cap`` (a dict), ``spent``, ``charges``, ``releases``
    (as :meth:`LedgerStore.releases`), ``undelivered`` (:func:`ledger_journal.undelivered`) and
    ``series``: the series over time of the same data, linked to this budget
    (:mod:`dpcore.privacy.oneoff_links`), as :func:`series_of` lists them."""
    with contextlib.closing(store._connect()) as con:  # noqa: SLF001 - the store's own helper module
        con.execute(NAMES_SCHEMA)
        rows = con.execute("SELECT fingerprint, kind, cap, created FROM datasets WHERE kind != 'period' "
                           "ORDER BY created, rowid").fetchall()
        names: dict[str, list[str]] = {}
        for key, name in con.execute("SELECT fingerprint, name FROM dataset_names ORDER BY rowid"):
            names.setdefault(key, []).append(name)
        for data_key, pop, name in con.execute("SELECT data_key, population, name FROM bindings"):
            names.setdefault(pop, []).insert(0, f"Population {name}")
            names[pop].extend(names.get(data_key, []))
        spends: dict[str, list[LedgerEntry]] = {}
        for key, e in con.execute("SELECT fingerprint, entry FROM spends ORDER BY fingerprint, idx"):
            spends.setdefault(key, []).append(LedgerEntry.from_dict(json.loads(e)))
    pending: dict[str, list[dict[str, Any]]] = {}
    for d in undelivered(store):
        pending.setdefault(d["key"], []).append(d)
    out = []
    for key, kind, cap, created in rows:
        entries = spends.get(key, [])
        if "@" in key or "#" in key:  # a series' period or cumulative budget: the office view lists those
            continue
        out.append({"key": key, "kind": kind, "names": list(dict.fromkeys(names.get(key, []))),
                    "created": created, "last": entries[-1].time if entries else None,
                    "cap": PrivacyCost.from_dict(json.loads(cap)).to_dict(),
                    "spent": float(sum((Fraction(e.charged) for e in entries), Fraction(0))),
                    "charges": len(entries), "releases": store.releases(key), "undelivered": pending.get(key, []),
                    "series": series_of(store, key)})
    return out


def series_of(store: Any, key: str) -> list[dict[str, Any]]:
    """The series over time linked to the one-off budget ``key``, oldest first: ``key`` (the series'
    population key), ``name`` (a named population's, else None), ``unit`` (its label), ``cap`` (a dict:
    per period, or of the horizon when ``per_period`` is false), ``spent`` (:func:`~dpcore.privacy.oneoff_links.series_spend`: the
    most any of its ledgers holds, a period's or the horizon's, the linked one-off releases included; None
    when they cannot be counted in its unit), ``charges``, ``periods`` (each ``{period, spent, charges, release_ids}``, by
    period) and ``releases`` (as :meth:`LedgerStore.releases`, one per period released).  The spends
    are the series' own (what each period's release charged), read from the budget database."""
    with contextlib.closing(store._connect()) as con:  # noqa: SLF001 - the store's own helper module
        try:
            rows = con.execute("SELECT b.population, b.unit, b.name FROM series_links l JOIN series_budgets b ON "
                               "b.population = l.population WHERE l.data_key = ? ORDER BY b.created, b.rowid",
                               (key,)).fetchall()
        except sqlite3.OperationalError as e:
            if "no such table" not in str(e):
                raise
            return []  # no series was ever linked in this database
        found = []
        for pop, unit_text, name in rows:
            ledgers = period_ledgers(con, pop)
            ids: dict[str, list[str]] = {}
            for period, rid in con.execute("SELECT period, release_id FROM series_periods WHERE population = ? "
                                           "ORDER BY created, rowid", (pop,)):
                ids.setdefault(str(period), []).append(str(rid))
            found.append((pop, unit_text, name, ledgers, ids, series_spend(con, pop, ledgers)))
    out = []
    for pop, unit_text, name, ledgers, ids, spend in found:
        if not ledgers or spend is None:
            continue
        per: dict[str, list[LedgerEntry]] = {}
        for _cap, entries in ledgers.values():
            for e in entries:
                per.setdefault(str(e.details.get("period", "")), []).append(e)
        periods = [{"period": p, "spent": float(sum((Fraction(e.charged) for e in es), Fraction(0))),
                    "charges": len(es), "release_ids": ids.get(p, [])} for p, es in sorted(per.items())]
        unit = TimeUnit.from_dict(json.loads(unit_text))
        out.append({"key": pop, "name": name, "unit": unit.label() if unit is not None else "",
                    "cap": spend["cap"].to_dict(), "per_period": spend["per_period"],
                    "spent": spend["spent"],
                    "charges": sum(p["charges"] for p in periods), "periods": periods,
                    "releases": store.releases(pop)})
    return out
