"""The one record envelope and release id (dpcore.core.record)."""

from __future__ import annotations

import datetime as dt

import pytest

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


def _build(**kw):
    args = dict(schema="dpcore-od-release/1", kind="od", release_id="0123456789ab",
                created="2025-01-03T04:59+00:00", cost=zcdp(0.5), unit_of_privacy=UNIT,
                mechanism={"name": "inftda", "title": "InfTDA", "reference": "Boninsegna & Silvestri 2025",
                           "details": {"split": "uniform"}},
                privacy={"noise": "discrete Gaussian"}, body={"levels": [(0, 1)]}, notes=["noisy"],
                plan=[{"level": 0}])
    return record.build_record(**{**args, **kw})


def test_the_shared_top_and_the_body() -> None:
    rec = _build()
    assert list(rec) == ["schema", "software", "release_id", "created", "kind", "accounted", "mechanism", "privacy",
                         "levels", "plan", "notes", "ledger"]
    assert rec["software"] == {"name": "dpcore", "version": dpcore.__version__}
    assert rec["mechanism"] == {"name": "inftda", "title": "InfTDA", "reference": "Boninsegna & Silvestri 2025",
                                "details": {"split": "uniform"}}
    p = rec["privacy"]
    assert (p["definition"], p["cost"], p["unit_of_privacy"], p["noise"]) == (
        "rho-zCDP", zcdp(0.5).to_dict(), UNIT, "discrete Gaussian")
    assert p["approx_dp"] == record.approx_dp_reading(zcdp(0.5))
    assert p["approx_dp_conversion"] == record.APPROX_DP_CONVERSION
    assert rec["levels"] == [[0, 1]] and rec["plan"] == [{"level": 0}]
    assert rec["notes"] == [record.NOT_ACCOUNTED, "noisy"]  # charged to no ledger: said first
    assert rec["ledger"]["accounted"] is False and rec["accounted"] is False
    assert "plan" not in _build(plan=None)


def test_a_pure_cost_has_no_approx_reading_and_one_delta_can_be_stated() -> None:
    assert "approx_dp" not in _build(cost=pure(1.0))["privacy"]
    p = _build(approx_dp_at=1e-8)["privacy"]
    assert p["approx_dp"]["delta"] == 1e-8 and p["approx_dp"]["epsilon_classic"] > p["approx_dp"]["epsilon"]
    assert 1e-8 in [r["delta"] for r in p["approx_dp_table"]]


def test_a_body_cannot_override_the_shared_top() -> None:
    with pytest.raises(ValueError, match="ledger"):
        _build(body={"ledger": {}})


def test_the_ledger_as_of_the_charge_never_names_the_dataset() -> None:
    led = Ledger(pure(2.0), dataset="secret_trips.csv")
    led.spend(pure(0.5), "first")
    led.spend(pure(0.25), "second")
    rec = _build(cost=pure(0.25), ledger=led)
    assert rec["ledger"]["accounted"] is True and rec["ledger"]["spent"] == 0.75
    assert len(rec["ledger"]["entries"]) == 2
    assert "secret_trips" not in str(rec)
