"""The app writes every kind's files once, at release time, from the envelope: its ``release.json`` is
``KindRelease.record(ledger as of the charge)`` with the plan's rows, and the Export step serves those
very bytes, even after a later spend on the same budget (issue 23, item 3).

The release is caught at :func:`dpcore.pipeline.release` (the envelope and a copy of its ledger right
after the charge) and at :meth:`KindRelease.files` (the options the app made the files with); the Export
step's downloads are caught at ``download_button`` (AppTest cannot read the bytes behind a button).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import streamlit as st
from record_helpers import Caught
from streamlit.delta_generator import DeltaGenerator
from streamlit.testing.v1 import AppTest
from test_plan_once import (  # the app tests' two steps: run without an exception, switch page
    APP,
    ok,
    step,
)

from dpcore.core.record import jsonable, validate_record
from dpcore.core.review import level_guidance
from dpcore.privacy import budget
from ui.state import release_widget_key


def catch_downloads(monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    """The bytes behind every download button drawn from now on, by file name."""
    served: dict[str, bytes] = {}
    button = DeltaGenerator.download_button

    def caught_button(dg: DeltaGenerator, label: str, data: Any, file_name: str | None = None,
                      *args: Any, **kwargs: Any) -> Any:
        served[str(file_name)] = data() if callable(data) else data
        return button(dg, label, data, file_name, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "download_button", caught_button)
    monkeypatch.setattr(st, "download_button", lambda *a, **k: caught_button(st._main, *a, **k))
    return served


def _release_and_check(at: AppTest, caught: Caught, served: dict[str, bytes], button: str, stored: Any,
                       kind: str, mechanism: str) -> None:
    """Release once; the stored files are the envelope's, the record validates and carries the plan's
    rows; after a later spend on the same budget the Export step serves the stored bytes unchanged."""
    step(at, "release")
    at.button(key=release_widget_key(button, at.session_state)).click().run()
    ok(at)
    [(kr, ledger, as_of_charge)] = caught.releases
    assert (kr.kind, kr.mechanism) == (kind, mechanism)
    files = stored(at)
    at_release = dict(files)
    assert caught.options, "the files were not made by KindRelease.files"
    rec = json.loads(files["release.json"])
    assert rec.pop("level_guidance", None) == level_guidance(files.get("release_full.csv") or files.get("release.csv"))
    assert rec == kr.record(as_of_charge, **caught.options[-1])  # the envelope, with the ledger of the charge
    assert rec["plan"] == jsonable(kr.plan.rows_dict()) and rec["plan"]
    assert rec["release_id"] == kr.release_id
    assert rec["ledger"]["entries"][-1]["cost"] == kr.cost.to_dict()
    validate_record(rec)  # the envelope and the body of the kind
    # a later spend on the same budget changes nothing the Export step serves
    ledger.spend(budget.PrivacyCost(ledger.definition, 0.01), "a later release")
    served.clear()
    step(at, "export")
    for name, data in at_release.items():
        if name in served:
            assert served[name] == data, name
    assert "release.json" in served
    assert stored(at) == at_release


def test_points_records_are_the_envelope_and_served_as_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    caught, served = Caught(monkeypatch), catch_downloads(monkeypatch)
    at = ok(AppTest.from_file(APP, default_timeout=120).run())
    step(at, "plan")
    at.selectbox(key="_w_mechanism").set_value("ug").run()
    from ui.kinds.points import state as points_state

    _release_and_check(at, caught, served, "release_button",
                       lambda a: points_state.release_files(a.session_state["releases"][-1]), "points", "ug")
    assert set(served) >= {"release.csv", "release.geojson", "release.json"}


def test_hierarchy_records_are_the_envelope_and_served_as_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    caught, served = Caught(monkeypatch), catch_downloads(monkeypatch)
    at = ok(AppTest.from_file(APP, default_timeout=180).run())
    at.radio(key="_w_kind").set_value("areas").run()
    step(ok(at), "plan")
    mech = at.session_state["hier_plan"][1][0].mechanism
    _release_and_check(at, caught, served, "hier_release_button", lambda a: a.session_state["hier_release"].files,
                       "hierarchy", mech)
    assert {"release.csv", "release.json"} <= set(served)


@pytest.mark.parametrize("mechanism", ["privelet", "matrix"])
def test_census_records_are_the_envelope_and_served_as_stored(monkeypatch: pytest.MonkeyPatch,
                                                              mechanism: str) -> None:
    caught, served = Caught(monkeypatch), catch_downloads(monkeypatch)
    at = ok(AppTest.from_file(APP, default_timeout=120).run())
    at.radio(key="_w_kind").set_value("areas").run()
    at.radio(key="_w_areas_table").set_value("census").run()
    step(ok(at), "plan")
    if mechanism == "matrix":
        ok(at.radio(key="_w_census_mech").set_value("matrix").run())
    button, key = (("census_mx_release_button", "census_mx_release") if mechanism == "matrix"
                   else ("census_release_button", "census_release"))
    _release_and_check(at, caught, served, button, lambda a: a.session_state[key].files, "census", mechanism)
    table = "marginals.csv" if mechanism == "matrix" else "release.csv"
    assert list(served)[:2] == [table, "release.json"]


def test_flows_records_are_the_envelope_and_served_as_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    caught, served = Caught(monkeypatch), catch_downloads(monkeypatch)
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state["kind"] = at.session_state["_w_kind"] = "flows"
    ok(at.run())
    step(at, "data")
    step(at, "plan")
    mech = at.session_state["od_plan"][1][1].mechanism

    def stored(a: AppTest) -> dict[str, bytes]:
        [entries] = a.session_state["od_releases"].values()
        return entries[-1].files

    _release_and_check(at, caught, served, "od_release_button", stored, "od", mech)
    assert {"release.csv", "release.json"} <= set(served)
