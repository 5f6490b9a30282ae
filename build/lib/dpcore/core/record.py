"""The one record envelope of every release, and the one release id.

Every release, whatever its kind, is recorded as the same envelope: the software, the privacy
definition and cost, the unit of privacy, the budget it was spent from (or "not accounted"),
its release id and creation time, the data-free plan, and the kind's own body (the record the
kind already writes: levels, tables, files).  Nothing here reads data: the envelope holds only
public facts and outputs of a DP mechanism (``DESIGN.md``, privacy rules 3 and 5).

The release id is random (a prefix of a uuid4), never a hash of the data or a timestamp, so
it says nothing about the data and two releases never share one.  The creation time is kept to
the minute in UTC.
"""

from __future__ import annotations

import datetime as _dt
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import dpcore
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.ledger import Ledger, minute_now

__all__ = ["ENVELOPE", "budget_summary", "created_now", "envelope", "new_release_id"]

#: Name and version of the envelope format.
ENVELOPE = "dpcore-release-envelope/1"

_DEFINITION = {"pure": "pure epsilon-DP", "zcdp": "rho-zCDP"}


def new_release_id() -> str:
    """A fresh release id: the first 12 hex digits of a random uuid4 (48 random bits).

    >>> rid = new_release_id()
    >>> len(rid), all(c in "0123456789abcdef" for c in rid), rid != new_release_id()
    (12, True, True)
    """
    return uuid.uuid4().hex[:12]


def created_now(now: _dt.datetime | None = None) -> str:
    """The creation time, to the minute, in UTC (ISO 8601).

    >>> created_now(_dt.datetime(2024, 5, 1, 12, 34, 56, tzinfo=_dt.UTC))
    '2024-05-01T12:34+00:00'
    >>> created_now(_dt.datetime(2024, 5, 1, 14, 34, tzinfo=_dt.timezone(_dt.timedelta(hours=2))))
    '2024-05-01T12:34+00:00'
    """
    if now is None:
        return minute_now()  # the ledger's clock: a record and its ledger entry state one time
    return now.astimezone(_dt.UTC).replace(second=0, microsecond=0).isoformat(timespec="minutes")


def budget_summary(ledger: Ledger | None) -> dict[str, Any]:
    """The budget the release was spent from: cap, spent, remaining and number of entries.

    Never the ledger's dataset name (it may name the input file).

    >>> budget_summary(None)
    {'accounted': False, 'note': 'not accounted: no budget ledger was given'}
    >>> from dpcore.privacy.budget import pure
    >>> led = Ledger(pure(1.0), dataset="trips.csv")
    >>> _ = led.spend(pure(0.25), label="HTF")
    >>> s = budget_summary(led)
    >>> s["cap"]["label"], s["spent"], s["remaining"], s["entries"], "trips.csv" in str(s)
    ('ε = 1', 0.25, 0.75, 1, False)
    """
    if ledger is None:
        return {"accounted": False, "note": "not accounted: no budget ledger was given"}
    return {
        "accounted": True,
        "definition": ledger.definition,
        "cap": ledger.cap.to_dict(),
        "spent": float(ledger.spent),
        "remaining": float(ledger.remaining),
        "entries": len(ledger.entries),
    }


def header(schema: str, kind: str, release_id: str, created: str) -> dict[str, Any]:
    """The first keys of every release record (one copy for every kind of data): the record's
    schema, the software that made it, the release id and the time the budget was charged.

    >>> sorted(header("dpcore-release/1", "points", "0123456789ab", "2024-05-01T12:34+00:00"))
    ['created', 'kind', 'release_id', 'schema', 'software']
    """
    return {"schema": schema, "software": {"name": "dpcore", "version": dpcore.__version__},
            "release_id": release_id, "created": created, "kind": kind}


def ledger_section(ledger: Ledger | None) -> dict[str, Any]:
    """The ledger part of every release record (one copy for every kind of data).

    The budget the release was charged to, with its unit of privacy, every entry and every cap
    change, but never the ledger's key (a keyed hash of the data); or, for a release charged to no
    budget (``--no-budget``), the statement that it was not accounted.

    >>> ledger_section(None)["accounted"]
    False
    >>> from dpcore.privacy.budget import pure
    >>> sorted(ledger_section(Ledger(pure(1.0), dataset="k1:abc")))[:4]
    ['accounted', 'cap', 'cap_changes', 'definition']
    """
    if ledger is None:
        return {"accounted": False, "note": "not accounted: this release was charged to no budget (--no-budget)"}
    d = ledger.to_dict()
    d.pop("dataset", None)  # the budget's key: a keyed hash of the data, never exported
    return {"accounted": True, **d}


def envelope(
    *,
    kind: str,
    mechanism: str,
    cost: PrivacyCost,
    unit: Mapping[str, Any],
    body: Mapping[str, Any],
    params: Mapping[str, Any] | None = None,
    plan: Sequence[Mapping[str, Any]] = (),
    release_id: str | None = None,
    created: str | None = None,
    ledger: Ledger | None = None,
) -> dict[str, Any]:
    """The record of one release: the envelope around the kind's ``body``.

    ``unit`` describes the unit of privacy (``Unit.to_dict()``), ``plan`` the data-free rows
    (``PlanRow.to_dict()``); ``release_id`` and ``created`` default to fresh ones.

    >>> from dpcore.privacy.budget import pure
    >>> rec = envelope(kind="points", mechanism="ug", cost=pure(0.5),
    ...                unit={"name": "record", "cap": None, "neighbour": "add_remove"},
    ...                body={"cells": 16}, release_id="0123456789ab", created="2024-05-01T12:34+00:00")
    >>> sorted(rec)
    ['body', 'budget', 'created', 'envelope', 'kind', 'mechanism', 'plan', 'privacy', 'release_id', 'software']
    >>> rec["privacy"]["definition"], rec["privacy"]["cost"]["value"], rec["budget"]["accounted"]
    ('pure epsilon-DP', 0.5, False)
    """
    return {
        "envelope": ENVELOPE,
        "software": {"name": "dpcore", "version": dpcore.__version__},
        "release_id": release_id or new_release_id(),
        "created": created or created_now(),
        "kind": kind,
        "mechanism": {"name": mechanism, "params": dict(params or {})},
        "privacy": {
            "definition": _DEFINITION[cost.definition],
            "cost": cost.to_dict(),
            "unit_of_privacy": dict(unit),
        },
        "budget": budget_summary(ledger),
        "plan": [dict(r) for r in plan],
        "body": dict(body),
    }
