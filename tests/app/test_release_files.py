"""A point release's files are made once, when the release is made: the record with the ledger as
of the charge; the history keeps those bytes and the Export step serves them (ui.kinds.points.state)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from points_helpers import plan_points

from dpcore import pipeline
from dpcore.core.review import level_guidance
from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.points import export
from dpcore.privacy import budget
from dpcore.privacy.ledger_store import LedgerStore
from dpcore.privacy.noise import NoiseSource
from ui.kinds.points import state as points_state


def _aggregate(rows: int = 8) -> Aggregate:
    counts = np.random.default_rng(0).poisson(20, size=(rows, rows)).astype(np.int64)
    return Aggregate(grid=Grid(Bounds(-74.0, 40.6, -73.8, 40.8), rows, rows), counts=counts, n_outside=0,
                     n_capped=0, sensitivity=1, user_cap=None)


@pytest.mark.parametrize("large", [False, True], ids=["stored-at-once", "stored-after-the-page"])
def test_a_point_release_builds_its_record_once_and_serves_the_stored_bytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, large: bool) -> None:
    built = []
    real = export.release_record
    monkeypatch.setattr(export, "release_record", lambda *a, **k: built.append(1) or real(*a, **k))
    if large:  # a large release stores its tables after the page is drawn: the record is still made at once
        monkeypatch.setattr(points_state, "HISTORY_LATER_ABOVE", 0)
    store = LedgerStore(tmp_path / "budgets.db")
    led = store.ledger("points:k1", budget.pure(2.0), "points")
    agg = _aggregate()
    envelope = pipeline.release(plan_points(agg, "ug", 0.5, {"public_n": 1000}), agg, ledger=led,
                                noise=NoiseSource(1))
    into: list[points_state.ReleaseEntry] = []
    entry = points_state.add_release(envelope, into=into, fp="k1", led=led)
    assert built == [1] and into == [entry]
    record = entry.exports["files"]["release.json"]
    # a later spend on the same budget does not change the record of this release
    led.spend(budget.pure(0.25), label="another release")
    if large:
        entry.exports.pop("history_pending")
        points_state._store_history(entry, led)
    files = points_state.release_files(entry)
    assert points_state.release_files(entry) is files
    assert built == [1]  # built once per release
    if large:  # the record as made at the charge, plus the guidance read from the table made later
        rec = json.loads(files["release.json"])
        assert rec.pop("level_guidance") == level_guidance(files["release.csv"])
        assert rec == json.loads(record)
    else:
        assert files["release.json"] == record
    assert list(files) == ["release.csv", "release.geojson", "release.json", "measurements.csv", "design.json",
                           "estimates.csv", "replicates.csv", "deployment.yaml", "review.html"]  # + data users' and review (issue 25)
    assert files["release.csv"] == export.release_csv(envelope.inner)
    # the history keeps exactly these bytes
    for name, data in files.items():
        assert store.release_file(envelope.release_id, name) == data
