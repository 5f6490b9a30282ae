"""The series linked to one-off budgets, read and linked inside the caller's transaction.

A series of releases over time (population ``P``, period ledgers ``P@PERIOD``) is linked to the
one-off budgets of the same data (table ``series_links``, :mod:`dpcore.privacy.oneoff_links`), and
used budgets of the same data are counted together as a group
(:mod:`dpcore.privacy.budget_groups`).  Both need the same reads: which series a one-off budget is
linked to, what each of their ledgers spent, and what a record of one period loses to a series.
They live here, below both modules (``oneoff_links`` imports the ledger store, which imports
``budget_groups``: neither can import the other's reads).

**What a series adds to a one-off budget's spends** (:func:`share`).  A one-off release covers every
period, so a record of period ``p`` loses the one-off spends, period ``p``'s spend and whatever
else covers every period (sequential composition: Dwork & Roth 2014, Thm. 3.14; Bun & Steinke 2016,
Lemma 1.7).  Periods are disjoint (parallel composition, McSherry 2009, Thm. 4), so each series
adds its **largest** ledger (a period, or a person's horizon ledger), plus the spends of the other
budgets linked to it that cover every period (a cumulative series, a named population's one-off
budget), each budget once.  Two series of the same data are counted as two (a record may be in a
period of each): the conservative reading.

>>> import sqlite3
>>> con = sqlite3.connect(":memory:")
>>> populations(con, ["k1:a"])  # no series was ever linked
[]
>>> like("pop_1") == "pop\\\\_1@%"
True
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction

from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.ledger import LedgerEntry, minute_now

__all__ = ["like", "populations", "period_ledgers", "share", "spread"]

Ledgers = dict[str, tuple[PrivacyCost, list[LedgerEntry]]]


def like(population: str) -> str:
    """The ``LIKE ... ESCAPE '\\'`` pattern of the ledger keys ``population@...`` of a series."""
    return population.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "@%"


def _rows(con: sqlite3.Connection, sql: str, args: Sequence[str]) -> list[tuple[str, ...]]:
    """``sql``'s rows, none when no series was ever linked (the table is created by the first link)."""
    try:
        return con.execute(sql, tuple(args)).fetchall()
    except sqlite3.OperationalError as e:
        if "no such table" not in str(e):
            raise
        return []


def populations(con: sqlite3.Connection, keys: Sequence[str]) -> list[str]:
    """The series populations linked to any of the one-off budget ``keys`` (sorted)."""
    keys = list(dict.fromkeys(keys))
    if not keys:
        return []
    return sorted({str(p) for (p,) in _rows(
        con, f"SELECT DISTINCT population FROM series_links WHERE data_key IN ({','.join('?' * len(keys))})", keys)})


def _linked_keys(con: sqlite3.Connection, population: str) -> list[str]:
    return [str(k) for (k,) in _rows(con, "SELECT data_key FROM series_links WHERE population = ?", [population])]


def period_ledgers(con: sqlite3.Connection, population: str) -> Ledgers:
    """The ledgers of the series ``population`` (``P@PERIOD``, or ``P@horizon``): cap and entries."""
    pattern = like(population)
    ledgers: Ledgers = {fp: (PrivacyCost.from_dict(json.loads(cap)), []) for fp, cap in con.execute(
        "SELECT fingerprint, cap FROM datasets WHERE fingerprint LIKE ? ESCAPE '\\'", (pattern,))}
    for fp, e in con.execute("SELECT fingerprint, entry FROM spends WHERE fingerprint LIKE ? ESCAPE '\\' "
                             "ORDER BY fingerprint, idx", (pattern,)):
        if fp in ledgers:
            ledgers[fp][1].append(LedgerEntry.from_dict(json.loads(e)))
    return ledgers


def share(con: sqlite3.Connection, keys: Sequence[str], count: Callable[[LedgerEntry], Fraction],
          pending: Mapping[str, Sequence[LedgerEntry]] | None = None) -> Fraction:
    """What the series linked to the one-off budgets ``keys`` (one budget, or a group's members) add to
    their spends for a record of one period, each entry counted by ``count`` (module docstring): per
    series its largest ledger, plus the spends of the budgets linked to it other than ``keys``.

    ``pending`` adds charges not written yet to the ledgers they name (``P@PERIOD``: a period charge
    being checked before it is made, :meth:`~dpcore.privacy.series_ledger.PeriodLedger.check`; or
    another budget linked to the series, :class:`~dpcore.privacy.oneoff_links.LinkedLedger`).  A
    series with ledgers in ``pending`` (a charge of its periods, before or, with no entries, just
    after it is written) counts the largest of *those*: the charge reaches only the records of its
    periods, so a period it does not touch (one already past a cap lowered since) refuses nothing."""
    total, others = Fraction(0), set()
    for pop in populations(con, keys):
        ledgers = {fp: list(entries) for fp, (_cap, entries) in period_ledgers(con, pop).items()}
        charged = [fp for fp in (pending or {}) if fp.rpartition("@")[0] == pop]
        for fp in charged:
            ledgers.setdefault(fp, []).extend((pending or {})[fp])
        if charged:
            ledgers = {fp: ledgers[fp] for fp in charged}
        total += max((sum((count(e) for e in entries), Fraction(0)) for entries in ledgers.values()),
                     default=Fraction(0))
        others.update(k for k in _linked_keys(con, pop) if k not in keys)
    for k in sorted(others):
        total += sum((count(LedgerEntry.from_dict(json.loads(e))) for (e,) in con.execute(
            "SELECT entry FROM spends WHERE fingerprint = ? ORDER BY idx", (k,))), Fraction(0))
        total += sum((count(e) for e in (pending or {}).get(k, ())), Fraction(0))
    return total


def spread(con: sqlite3.Connection, keys: Sequence[str]) -> None:
    """Link every series linked to one of the one-off budgets ``keys`` (a group's members) to every one
    of them, so that each series counts the spends of all (nothing when no series is linked)."""
    pops = populations(con, keys)
    if pops:
        con.executemany("INSERT OR IGNORE INTO series_links VALUES (?, ?, ?)",
                        [(p, str(k), minute_now()) for p in pops for k in dict.fromkeys(keys)])
