"""One data set, several keys: aliases that lead every key of the same data to one budget.

A budget is keyed by a fingerprint of the data's content (:meth:`LedgerStore.key`), but one rule
cannot see every way the same people's data comes back: a census table keyed by its top level is
keyed by another level once an empty row adds or removes a code there; points keyed by their exact
coordinates get a new key from a file re-saved with 15 significant digits; an upgrade changes the
rule itself.  So data is keyed by **several** fingerprints (every level of a table, the points inside
the bounds and all of them, the rule of earlier versions), and the budget keeps all of them: a key
that matches any key of an existing budget draws on that budget (issue 26, items 11 and 12).

* :func:`adopt` is called when the data is loaded, before its budget is opened, and again whenever
  the data gets a new key (points whose bounds change): it finds the budgets that the data's keys
  lead to, chooses one, and records every key of the data without a budget of its own as an alias
  of it (table ``key_aliases``).
* :func:`resolve` is what :meth:`LedgerStore.data_key` applies: the budget key an alias leads to.

**Which budget.** The first (in the order ``key, *aliases``) that has been *used*, else the first
found, else ``key``.  A budget is used when any row of the database other than its own ``datasets``
row and the records that move with it refers to it (a charge, a cap change, a release, a binding,
a series link, ...: :func:`pristine`).  The app opens the data's budget when the file is loaded, before
the curator may change the bounds; the key of the points inside the new bounds may then lead to a
budget that another release of the same points (the CLI's, say) has already spent.  So the
budgets of the data's keys that are **pristine** (never used) are *retired* into the chosen one in the
same transaction (:func:`_retire`): the row is deleted, its key becomes an alias of the chosen
budget and the aliases, names, profiles and near-match answers that led to it are moved to the
chosen budget.  A budget whose only use is a change of its cap (typed in the app before the bounds
changed) is retired too, and a lower cap it promised holds for the chosen budget from then on
(:func:`_carry_cap`).  Nothing is lost (such a budget has no charge, release or link), and
matching more keys only makes more data share a budget (the safe direction).  Two used budgets are
never merged (each keeps its charges; the data draws on the first), and a recorded alias is never
moved unless its budget is retired; but they are recorded as one **group**
(:mod:`dpcore.privacy.budget_groups`): from then on a charge of either must fit the smallest cap
of the group with the spends of both, so the same people are never bounded by two caps.

**Why not open budgets at the first charge instead?**  Every reader of a budget (the Plan step's
cap box, the sidebar, the cap change, History, the CLI's "new budget" notice, the series' links)
would then need a budget that does not exist yet, and a cap changed before the first release would
have nowhere to go; retiring an unused row touches one function.  A process still holding a retired
budget (another tab, a concurrent run) cannot charge it: its row is gone, so its next read or charge
is refused with "reload" (:class:`~dpcore.privacy.ledger_store.StoredLedger`), and it cannot open it
afresh (a key that is an alias is never given a budget row).

**Every table is classified** (:data:`COLUMNS`: each column of each table of the budget database, by
what it says about a budget key), and a database holding a table or column that is not classified
(a later version's) retires nothing, as before.  A test checks that every table the library creates
is classified, so a new table cannot be forgotten.

Aliases are keyed hashes like every key (:meth:`LedgerStore.key`): they say nothing about the data
without the install's secret.

>>> import tempfile, pathlib
>>> from dpcore.privacy import budget
>>> from dpcore.privacy.ledger_store import LedgerStore
>>> store = LedgerStore(pathlib.Path(tempfile.mkdtemp()) / "ledger.sqlite")
>>> spent = store.ledger("k1:cli", budget.pure(1.0), "points")
>>> _ = spent.spend(budget.pure(0.3), "released by the CLI")
>>> opened = store.ledger("k1:app", budget.pure(1.0), "points")   # opened at load, never charged
>>> adopt(store, "k1:app", ["k1:cli"])                           # a key of the app's data leads to the CLI's
'k1:cli'
>>> store.has_ledger("k1:app"), resolve(store, "k1:app")
(False, 'k1:cli')
"""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3
from collections.abc import Collection, Iterator, Sequence
from fractions import Fraction
from typing import Any

from dpcore.privacy import budget_groups
from dpcore.privacy.budget import CAP_TOLERANCE, PrivacyCost, float_down, float_up
from dpcore.privacy.ledger import CapChange, LedgerEntry, minute_now

__all__ = ["BUDGET", "CAP", "COLUMNS", "FOLLOW", "LEVEL_KEYS_V2", "NONE", "USE", "adopt", "ensure", "is_new", "leads_to",
           "mark_level_keys_v2", "may_hold_v1_level_keys", "pristine", "resolve", "unclassified"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS key_aliases (
    alias TEXT PRIMARY KEY,
    data_key TEXT NOT NULL,
    created TEXT NOT NULL
)
"""

#: A budget's own row (``datasets.fingerprint``): deleted when the budget is retired.
BUDGET = "budget"
#: A use of the budget: a budget named in such a column is never retired.
USE = "use"
#: A change of the budget's cap: a use, except that a budget used only so (a cap typed or a switch
#: between ε and ρ before any release) is still retired, its cap carried (:func:`_carry_cap`).
CAP = "cap"
#: A record about the data that moves to the chosen budget when its budget is retired.
FOLLOW = "follow"
#: Holds no budget key.
NONE = "none"

#: Every column of every table of the budget database, by what it holds about a budget key.  The
#: one place the tables are classified: :func:`pristine` and :func:`_retire` read it, and a
#: database with a table or column missing here retires nothing (:func:`unclassified`).
COLUMNS: dict[str, dict[str, str]] = {
    # dpcore.privacy.ledger_store
    "datasets": {"fingerprint": BUDGET, "kind": NONE, "cap": NONE, "created": NONE, "unit": NONE},
    "spends": {"fingerprint": USE, "idx": NONE, "entry": NONE},
    "cap_changes": {"fingerprint": CAP, "idx": NONE, "change": NONE},
    "releases": {"release_id": NONE, "fingerprint": USE, "kind": NONE, "created": NONE, "summary": NONE},
    # a release's files hang on its release id (and so on a ``releases`` row, a use)
    "release_files": {"release_id": NONE, "name": NONE, "data": NONE, "encoding": NONE, "size": NONE,
                      "removed": NONE},
    "bindings": {"data_key": USE, "population": USE, "name": NONE},
    # dpcore.privacy.ledger_journal, ledger_keyfile
    "deliveries": {"fingerprint": USE, "idx": NONE, "target": NONE, "state": NONE, "release_id": NONE},
    "meta": {"name": NONE, "value": NONE},
    # dpcore.privacy.oneoff_links, series_ledger
    "series_links": {"population": USE, "data_key": USE, "created": NONE},
    "series_budgets": {"population": USE, "kind": NONE, "unit": NONE, "horizon_cap": NONE, "name": NONE,
                       "created": NONE},
    "series_periods": {"population": USE, "plan": NONE, "period": NONE, "data": USE, "release_id": NONE,
                       "correction_of": NONE, "created": NONE},
    # dpcore.privacy.budget_groups: a budget counted with other used budgets of the same data is used
    "budget_groups": {"member": USE, "group_id": NONE, "created": NONE},
    # this module: a key that is itself an alias is not a budget to retire
    "key_aliases": {"alias": USE, "data_key": FOLLOW, "created": NONE},
    # dpcore.privacy.ledger_history, near_match: what the curator said and the profile follow the data
    "dataset_names": {"fingerprint": FOLLOW, "name": NONE},
    "data_profiles": {"data_key": FOLLOW, "tokens": NONE, "created": NONE},
    "identity_answers": {"data_key": FOLLOW, "other": FOLLOW, "same": NONE, "created": NONE},
}


def ensure(con: sqlite3.Connection) -> None:
    """Create the alias table (idempotent)."""
    con.execute(_SCHEMA)


def _columns(con: sqlite3.Connection) -> dict[str, list[str]]:
    """The database's tables and their columns (SQLite's own tables left out)."""
    tables = [r[0] for r in con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")]
    return {t: [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')] for t in tables}


def unclassified(con: sqlite3.Connection) -> list[str]:
    """The ``table.column`` of the database missing from :data:`COLUMNS` (sorted; none: every one known)."""
    return sorted(f"{t}.{c}" for t, cols in _columns(con).items() for c in cols if c not in COLUMNS.get(t, {}))


def _present(con: sqlite3.Connection, role: str) -> Iterator[tuple[str, str]]:
    have = _columns(con)
    for table, cols in COLUMNS.items():
        for column, r in cols.items():
            if r == role and column in have.get(table, ()):
                yield table, column


def pristine(con: sqlite3.Connection, key: str, ignoring: Collection[str] = ()) -> bool:
    """Whether the budget ``key`` was never used: no column of role :data:`USE` or :data:`CAP` names it
    (tables in ``ignoring`` aside), and every table of the database is classified (a table this
    version does not know might hold a use)."""
    if unclassified(con):
        return False
    return not any(con.execute(f'SELECT 1 FROM "{t}" WHERE "{c}" = ? LIMIT 1', (key,)).fetchone()
                   for t, c in (*_present(con, USE), *_present(con, CAP)) if t not in ignoring)


def _retirable(con: sqlite3.Connection, key: str) -> bool:
    """Whether the budget ``key`` may be retired: pristine but for changes of its cap."""
    return pristine(con, key, ignoring=[t for t, _ in _present(con, CAP)])


def _same_loss(cap: PrivacyCost, definition: str) -> PrivacyCost:
    """``cap`` read as a cap of ``definition``, rounded down (never a larger cap): pure ε-DP is
    ρ = ε²/2-zCDP (Bun & Steinke 2016, Prop. 1.4), so a pure cap ε keeps a ρ cap when ε = √(2ρ).

    >>> from dpcore.privacy.budget import pure, zcdp
    >>> _same_loss(zcdp(0.5), "pure").value < 1.0 < _same_loss(zcdp(0.5), "pure").value + 1e-12
    True
    >>> _same_loss(pure(0.2), "zcdp").value <= 0.02, _same_loss(pure(0.2), "pure") == pure(0.2)
    (True, True)
    """
    if cap.definition == definition:
        return cap
    if definition == "zcdp":
        return PrivacyCost("zcdp", float_down(Fraction(cap.value) ** 2 / 2))
    return PrivacyCost("pure", math.nextafter(math.sqrt(2 * cap.value), 0.0))


def _carry_cap(con: sqlite3.Connection, old: str, into: str) -> None:
    """Keep the promise of a cap the curator set on the budget ``old`` that is being retired: when
    ``old``'s cap was changed and is below ``into``'s in the same definition, ``into`` takes it (as a
    cap change of ``into``, never below what ``into`` has spent, so that nothing spent is disowned).
    A cap of the other definition is read in ``into``'s (:func:`_same_loss`): a ρ cap as the pure ε
    whose ρ = ε²/2 is that cap, a pure ε cap as ρ = ε²/2 (the most a ρ budget can keep of a pure
    promise: zCDP gives no pure ε guarantee).  ``old``'s cap changes go with it.  When ``into`` is a
    key bound to a population (no budget row of its own), the population's budget, which its releases
    draw on, takes the cap."""
    changed = con.execute("SELECT 1 FROM cap_changes WHERE fingerprint = ? LIMIT 1", (old,)).fetchone()
    into = _drawn_on(con, into)
    rows = {k: con.execute("SELECT cap FROM datasets WHERE fingerprint = ?", (k,)).fetchone() for k in (old, into)}
    con.execute("DELETE FROM cap_changes WHERE fingerprint = ?", (old,))
    if not changed or rows[old] is None or rows[into] is None:
        return
    old_cap, cap = (PrivacyCost.from_dict(json.loads(rows[k][0])) for k in (old, into))
    low = _same_loss(old_cap, cap.definition)
    if low.value >= cap.value * (1 - CAP_TOLERANCE):  # a switch ε ↔ ρ and back is no lower cap
        return
    spent = sum(Fraction(LedgerEntry.from_dict(json.loads(e)).charged) for (e,) in con.execute(
        "SELECT entry FROM spends WHERE fingerprint = ?", (into,)))
    new = PrivacyCost(cap.definition, max(low.value, float_up(spent)) if spent else low.value)
    if new.value >= cap.value:
        return
    idx = con.execute("SELECT COUNT(*) FROM cap_changes WHERE fingerprint = ?", (into,)).fetchone()[0]
    con.execute("UPDATE datasets SET cap = ? WHERE fingerprint = ?", (json.dumps(new.to_dict()), into))
    con.execute("INSERT INTO cap_changes VALUES (?, ?, ?)",
                (into, idx, json.dumps(CapChange(minute_now(), cap, new).to_dict())))


def _retire(con: sqlite3.Connection, old: str, into: str) -> None:
    """Retire the pristine budget ``old`` into ``into`` (inside the caller's transaction): its row goes,
    its key and the records that followed it (:data:`FOLLOW`) lead to ``into``."""
    _carry_cap(con, old, into)
    con.execute("DELETE FROM datasets WHERE fingerprint = ?", (old,))
    moved: dict[str, list[str]] = {}
    for t, c in _present(con, FOLLOW):
        con.execute(f'UPDATE OR IGNORE "{t}" SET "{c}" = ? WHERE "{c}" = ?', (into, old))
        con.execute(f'DELETE FROM "{t}" WHERE "{c}" = ?', (old,))  # what ``into`` already had stays
        moved.setdefault(t, []).append(c)
    for t, cols in moved.items():  # a record about ``into`` and itself says nothing (an answer about the pair)
        for a, b in zip(cols, cols[1:], strict=False):
            con.execute(f'DELETE FROM "{t}" WHERE "{a}" = "{b}"')
    con.execute("DELETE FROM key_aliases WHERE alias = data_key")
    con.execute("INSERT OR REPLACE INTO key_aliases VALUES (?, ?, ?)", (old, into, minute_now()))


#: The ``meta`` row of a database created by a version that keys a table's finer levels with
#: ``codes:v2`` (:mod:`dpcore.data.code_words`): no key of an earlier version can be in it.
LEVEL_KEYS_V2 = "level_keys_v2"


def is_new(con: sqlite3.Connection) -> bool:
    """Whether the database of ``con`` was never opened before: no check value (written when a
    database is first opened), no budget, binding or alias.  Ask before the check value is written."""
    def empty(table: str) -> bool:
        try:
            return con.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is None
        except sqlite3.OperationalError:  # no such table yet
            return True

    try:
        checked = con.execute("SELECT 1 FROM meta WHERE name = 'check'").fetchone() is not None
    except sqlite3.OperationalError:
        checked = False
    return not checked and all(empty(t) for t in ("datasets", "bindings", "key_aliases"))


def mark_level_keys_v2(con: sqlite3.Connection) -> None:
    """Note in a new database (:func:`is_new`) that every key in it is of this version."""
    con.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", (LEVEL_KEYS_V2, minute_now()))


def may_hold_v1_level_keys(store: Any) -> bool:
    """Whether the database may hold a table's finer-level keys of the earlier rule (``codes:v1``):
    true unless it was created by a version that keys them with ``codes:v2`` (:data:`LEVEL_KEYS_V2`).
    Only then does a table need its ``codes:v1`` level keys, whose md5 per area takes seconds for
    millions of census blocks, to find a budget opened under one of them."""
    with contextlib.closing(store._connect()) as con:  # noqa: SLF001 - the store's own connection settings
        try:
            row = con.execute("SELECT 1 FROM meta WHERE name = ?", (LEVEL_KEYS_V2,)).fetchone()
        except sqlite3.OperationalError:  # no meta table: a database of an earlier version
            return True
    return row is None


def _owns(con: sqlite3.Connection, key: str) -> bool:
    """Whether ``key`` has a budget or a population binding of its own."""
    return (con.execute("SELECT 1 FROM datasets WHERE fingerprint = ?", (key,)).fetchone() is not None
            or con.execute("SELECT 1 FROM bindings WHERE data_key = ?", (key,)).fetchone() is not None)


def _target(con: sqlite3.Connection, key: str) -> str | None:
    try:
        row = con.execute("SELECT data_key FROM key_aliases WHERE alias = ?", (key,)).fetchone()
    except sqlite3.OperationalError:  # no alias recorded in this database yet
        return None
    return str(row[0]) if row else None


def leads_to(con: sqlite3.Connection, key: str) -> str | None:
    """The budget key the alias ``key`` leads to, or None when ``key`` is no alias.  An alias of an
    alias (an earlier version retired a budget without moving its aliases) is followed to its end."""
    seen, found = {key}, _target(con, key)
    while found is not None and found not in seen:
        seen.add(found)
        further = _target(con, found)
        if further is None or further in seen:
            break
        found = further
    return found


def resolve(store: Any, key: str) -> str:
    """The key of the budget ``key`` leads to: its own, or the one it is an alias of."""
    with contextlib.closing(store._connect()) as con:  # noqa: SLF001 - the store's own connection settings
        return leads_to(con, key) or key


def _drawn_on(con: sqlite3.Connection, key: str) -> str:
    """The budget ``key``'s releases are charged to: its population's when it is bound, else its own."""
    row = con.execute("SELECT population FROM bindings WHERE data_key = ?", (key,)).fetchone()
    return str(row[0]) if row else key


def adopt(store: Any, key: str, aliases: Sequence[str]) -> str:
    """Record the keys of one data set (``key`` its main key, ``aliases`` its others) and return the
    key of the budget they lead to.

    The budgets the keys lead to (each key's own budget or binding, else the budget its alias leads
    to) are found in the order ``key, *aliases``; the chosen one is the first used (not
    :func:`pristine`), else the first, else ``key`` (the budget opened next is then found by every
    key).  The others that are pristine are retired into it (:func:`_retire`); used ones stay apart,
    recorded as one group whose spends count together (:func:`dpcore.privacy.budget_groups.record`).
    Every key of the data without a budget of its own becomes an alias of the chosen budget.  All in
    one transaction.
    """
    keys = list(dict.fromkeys([str(key), *(str(a) for a in aliases if a)]))
    with store.transaction() as con:
        ensure(con)
        budgets: list[str] = []
        for k in keys:
            b = k if _owns(con, k) else leads_to(con, k)
            if b is not None and b not in budgets:
                budgets.append(b)
        unused = [b for b in budgets if _retirable(con, b)] if len(budgets) > 1 else budgets
        chosen = next((b for b in budgets if b not in unused), budgets[0] if budgets else str(key))
        for b in unused:
            if b != chosen:
                _retire(con, b, chosen)
        used = [b for b in budgets if b not in unused]
        if len(used) > 1:  # the same data's used budgets stay apart but count together from now on
            budget_groups.record(con, [_drawn_on(con, b) for b in used])
        con.executemany("INSERT OR IGNORE INTO key_aliases VALUES (?, ?, ?)",
                        [(k, chosen, minute_now()) for k in keys if k != chosen and not _owns(con, k)])
    return chosen
