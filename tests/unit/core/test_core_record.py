"""The one record envelope and release id (dpcore.core.record)."""

from __future__ import annotations

import datetime as dt

import dpcore
from dpcore.core import record
from dpcore.privacy.budget import pure, zcdp
from dpcore.privacy.ledger import Ledger

UNIT = {"name": "person", "cap": 2, "neighbour": "add_remove"}


def test_release_ids_are_random_hex() -> None:
    ids = {record.new_release_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 12 and int(i, 16) >= 0 for i in ids)


def test_created_is_utc_to_the_minute() -> None:
    t = dt.datetime(2025, 1, 2, 23, 59, 59, 999, tzinfo=dt.timezone(dt.timedelta(hours=-5)))
    assert record.created_now(t) == "2025-01-03T04:59+00:00"
    now = record.created_now()
    assert now.endswith("+00:00") and len(now) == len("2025-01-03T04:59+00:00")


def test_envelope_keys_and_values() -> None:
    rec = record.envelope(kind="od", mechanism="inftda", cost=zcdp(0.5), unit=UNIT, body={"levels": []},
                          params={"split": "uniform"}, plan=[{"level": 0}])
    assert rec["envelope"] == record.ENVELOPE
    assert rec["software"] == {"name": "dpcore", "version": dpcore.__version__}
    assert rec["privacy"] == {"definition": "rho-zCDP", "cost": zcdp(0.5).to_dict(), "unit_of_privacy": UNIT}
    assert rec["mechanism"] == {"name": "inftda", "params": {"split": "uniform"}}
    assert rec["plan"] == [{"level": 0}] and rec["body"] == {"levels": []}
    assert len(rec["release_id"]) == 12 and rec["created"].endswith("+00:00")
    assert rec["budget"]["accounted"] is False


def test_budget_summary_of_a_ledger_never_names_the_dataset() -> None:
    led = Ledger(pure(2.0), dataset="secret_trips.csv")
    led.spend(pure(0.5), "first")
    led.spend(pure(0.25), "second")
    rec = record.envelope(kind="points", mechanism="ug", cost=pure(0.25), unit=UNIT, body={}, ledger=led)
    assert rec["budget"] == {"accounted": True, "definition": "pure", "cap": pure(2.0).to_dict(),
                             "spent": 0.75, "remaining": 1.25, "entries": 2}
    assert "secret_trips" not in str(rec)
