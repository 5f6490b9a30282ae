"""Used budgets of the same data, counted together: a group whose members' spends share the smallest cap.

:func:`dpcore.privacy.key_aliases.adopt` leads every key of one data set to one budget, but it never
merges two budgets that have both been **used** (each keeps its charges).  Yet two used budgets can
belong to the same data: the app released points with wide bounds (budget A, its main key), the CLI
released the same points with ``--bounds B`` (budget C), and the curator then sets bounds B in the
app, whose key of the points inside B leads to C.  The same people's releases would then be bounded
by two caps, and their loss is the sum of both (sequential composition: Dwork & Roth 2014, Thm. 3.14;
Bun & Steinke 2016, Lemma 1.7).

So ``adopt`` records such budgets as one **group** (table ``budget_groups``; groups merge
transitively: a budget is in at most one group, and a second group sharing a member becomes one with
the first).  A charge of any member, inside the charge's transaction, and the pre-charge check
(:meth:`~dpcore.privacy.ledger_store.StoredLedger.check`) must then fit **every** member's cap with
the spends of **every** member plus the new charge, i.e. the smallest cap (:func:`fit`).  Spends
are counted in each cap's definition and unit as a linked series counts one-off spends
(:func:`dpcore.privacy.oneoff_links.in_unit`): group privacy for another unit
(:func:`~dpcore.privacy.units.group_factor`), pure ε read as ρ = ε²/2 under a ρ cap (Bun & Steinke
2016, Prop. 1.4); a ρ-zCDP spend cannot be counted under a pure ε cap (zCDP gives no pure ε
guarantee), and a charge is then refused.  The charge itself is recorded only in the budget charged.

**Series of the same data.**  A series linked to one member (:mod:`dpcore.privacy.oneoff_links`) is
data of every member: when the group is recorded (and when a series is linked to a member later),
every series of a member is linked to every member (:func:`dpcore.privacy.linked_series.spread`),
so each period counts the spends of all members, and :func:`fit` counts, under each member's cap,
what the series add for a record of one period (each series' largest period, plus what else covers
every period: :func:`dpcore.privacy.linked_series.share`).

>>> import tempfile, pathlib
>>> from dpcore.privacy import budget
>>> from dpcore.privacy.ledger_store import LedgerStore
>>> store = LedgerStore(pathlib.Path(tempfile.mkdtemp()) / "ledger.sqlite")
>>> _ = store.ledger("k1:app", budget.pure(1.0), "points").spend(budget.pure(0.6), "app")
>>> cli = store.ledger("k1:cli", budget.pure(1.0), "points")
>>> _ = cli.spend(budget.pure(0.3), "cli")
>>> with store.transaction() as con:
...     record(con, ["k1:app", "k1:cli"])
>>> cli.can_spend(budget.pure(0.1)), cli.can_spend(budget.pure(0.2))
(True, False)
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from fractions import Fraction

from dpcore.errors import BudgetError
from dpcore.privacy import linked_series
from dpcore.privacy.budget import CAP_TOLERANCE, PrivacyCost, two_significant
from dpcore.privacy.ledger import LedgerEntry, minute_now
from dpcore.privacy.units import Unit, group_factor

__all__ = ["ensure", "fit", "left", "members", "record"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS budget_groups (
    member TEXT PRIMARY KEY,
    group_id TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS budget_groups_by_group ON budget_groups(group_id);
"""

_SHARED = "This data's budget is shared with another budget of the same data (its releases under another key"


def ensure(con: sqlite3.Connection) -> None:
    """Create the group table (idempotent)."""
    for stmt in _SCHEMA.split(";"):
        if stmt.strip():
            con.execute(stmt)


def record(con: sqlite3.Connection, keys: Sequence[str]) -> None:
    """Record the budgets ``keys`` as one group, inside the caller's transaction; every group that
    already holds one of them joins it (for good: groups only grow)."""
    keys = list(dict.fromkeys(str(k) for k in keys if k))
    if len(keys) < 2:
        return
    ensure(con)
    marks = ",".join("?" * len(keys))
    found = sorted({str(g) for (g,) in con.execute(
        f"SELECT DISTINCT group_id FROM budget_groups WHERE member IN ({marks})", keys)})
    gid = found[0] if found else "group:" + keys[0]
    if len(found) > 1:
        con.execute(f"UPDATE budget_groups SET group_id = ? WHERE group_id IN ({','.join('?' * len(found))})",
                    (gid, *found))
    con.executemany("INSERT OR IGNORE INTO budget_groups VALUES (?, ?, ?)", [(k, gid, minute_now()) for k in keys])
    # a series of one member is a series of the same data as every member's: link it to all of them
    linked_series.spread(con, [str(m) for (m,) in con.execute(
        "SELECT member FROM budget_groups WHERE group_id = ? ORDER BY member", (gid,))])


def members(con: sqlite3.Connection, key: str) -> list[str]:
    """Every budget of ``key``'s group, ``key`` included (none: ``key`` is in no group)."""
    try:
        row = con.execute("SELECT group_id FROM budget_groups WHERE member = ?", (key,)).fetchone()
    except sqlite3.OperationalError as e:
        if "no such table" not in str(e):
            raise
        return []  # no group was ever recorded in this database
    if row is None:
        return []
    return [str(m) for (m,) in con.execute(
        "SELECT member FROM budget_groups WHERE group_id = ? ORDER BY member", (row[0],))]


def _counted(cost: PrivacyCost, unit: Unit, base: Unit, cap: PrivacyCost) -> Fraction:
    """A release of ``cost`` protecting ``unit`` as counted under ``cap``, a cap of ``base`` units."""
    try:
        cost = cost.for_group(group_factor(base, unit))
    except BudgetError as e:
        raise BudgetError(f"{_SHARED}), but the two cannot be counted together: {e}") from None
    if cost.definition == cap.definition:
        return Fraction(cost.value)
    if cap.definition == "zcdp":
        return Fraction(cost.to_zcdp().value)
    raise BudgetError(
        f"{_SHARED}), and a ρ-zCDP release ({cost.label()}) charged to one of them cannot be counted under the "
        f"pure ε cap {cap.label()} of the other: zCDP gives no pure ε guarantee, so nothing more can be charged to "
        "this data. Keep every release of the same data under one definition: a ρ cap (--rho) for all of them.")


def _state(con: sqlite3.Connection, key: str) -> tuple[PrivacyCost, Unit | None, list[LedgerEntry]] | None:
    row = con.execute("SELECT cap, unit FROM datasets WHERE fingerprint = ?", (key,)).fetchone()
    if row is None:  # a member without a budget row (retired or bound) holds no spend of its own
        return None
    entries = [LedgerEntry.from_dict(json.loads(e)) for (e,) in con.execute(
        "SELECT entry FROM spends WHERE fingerprint = ? ORDER BY idx", (key,))]
    return (PrivacyCost.from_dict(json.loads(row[0])), Unit.from_dict(json.loads(row[1])) if row[1] else None,
            entries)


_State = tuple[PrivacyCost, Unit | None, list[LedgerEntry]]


def _group(con: sqlite3.Connection, key: str) -> dict[str, _State]:
    """The members of ``key``'s group that have a budget row, with their caps, units and spends."""
    return {m: s for m in members(con, key) if (s := _state(con, m)) is not None}


def _parts(group: dict[str, _State], m: str, base: Unit) -> dict[str, Fraction]:
    """What each member of ``group`` spent, counted under member ``m``'s cap (of ``base`` units)."""
    cap = group[m][0]
    return {o: sum((Fraction(e.charged) if o == m else _counted(e.cost, e.unit, base, cap) for e in es),
                   Fraction(0)) for o, (_c, _u, es) in group.items()}


def _series(con: sqlite3.Connection, group: dict[str, _State], base: Unit, cap: PrivacyCost,
            pending: Mapping[str, Sequence[LedgerEntry]] | None = None) -> Fraction:
    """What the series linked to the members of ``group`` add for a record of one period, counted under
    ``cap`` (of ``base`` units): :func:`dpcore.privacy.linked_series.share`."""
    return linked_series.share(con, list(group), lambda e: _counted(e.cost, e.unit, base, cap), pending)


def fit(con: sqlite3.Connection, key: str, cost: PrivacyCost | None, unit: Unit,
        pending: Mapping[str, Sequence[LedgerEntry]] | None = None) -> None:
    """Refuse (:class:`~dpcore.errors.BudgetError`) a charge of ``cost`` protecting ``unit`` to the budget
    ``key`` unless, for every budget of its group, the spends of every member, what the series of the
    same data add (:func:`_series`) and the charge fit that member's cap (so the smallest cap holds for
    all).  Nothing when ``key`` is in no group.

    ``cost`` None re-checks the group without a charge of its own, after (or, with ``pending``, before)
    a charge of a series of the same data (:func:`dpcore.privacy.oneoff_links.fit_series`)."""
    group = _group(con, key)
    if len(group) < 2:
        return
    for m, (cap, m_unit, _entries) in group.items():
        base = m_unit or unit
        parts = _parts(group, m, base)
        series = _series(con, group, base, cap, pending)
        new = _counted(cost, unit, base, cap) if cost is not None else Fraction(0)
        total = sum(parts.values(), series)
        if total + new > Fraction(cap.value) * (1 + CAP_TOLERANCE):
            elsewhere = total - series - parts.get(key, Fraction(0))
            left = max(Fraction(0), Fraction(cap.value) - total)
            periods = (f", and the series of the same data {cap.symbol} = {two_significant(float(series))} (its "
                       "largest period: a record of that period loses every release)") if series else ""
            raise BudgetError(
                f"{_SHARED}, e.g. the same points with other bounds), which has {cap.symbol} = "
                f"{two_significant(float(elsewhere))} spent{periods}; together {cap.symbol} = "
                f"{two_significant(float(total))} is spent of the cap {cap.label()}, so this release "
                f"({cost.label() if cost is not None else 'of the series'}) does not fit ({cap.symbol} = {two_significant(float(left), down=True)} is left). "
                "Lower the release's budget, or release less.")


def left(con: sqlite3.Connection, key: str) -> Fraction | None:
    """What the group of ``key`` leaves for a charge of ``key`` in its own definition and unit: the least
    a member's cap leaves after the spends of every member and what the series of the same data add
    (:func:`_series`), over the members whose cap has ``key``'s definition and unit (0 when a spend
    cannot be counted under one of them; a member of another definition or unit is left to
    :func:`fit`).  None when ``key`` is in no group."""
    group = _group(con, key)
    if len(group) < 2 or key not in group:
        return None
    own_cap, own_unit, _entries = group[key]
    least: Fraction | None = None
    for m, (cap, m_unit, _es) in group.items():
        if cap.definition != own_cap.definition or (m != key and m_unit not in (None, own_unit)):
            continue
        try:
            base = m_unit or own_unit or Unit()
            total = sum(_parts(group, m, base).values(), _series(con, group, base, cap))
        except BudgetError:
            return Fraction(0)
        here = max(Fraction(0), Fraction(cap.value) - total)
        least = here if least is None else min(least, here)
    return least
