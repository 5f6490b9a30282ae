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


def test_a_point_release_builds_its_record_once_and_serves_the_stored_bytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The record is made at the charge; the tables once, after the map (store_pending_history), from
    the same release: the same bytes, in the same order, as the files made in one go (as the CLI writes
    them), and the history keeps exactly those."""
    built = []
    real = export.release_record
    monkeypatch.setattr(export, "release_record", lambda *a, **k: built.append(1) or real(*a, **k))
    store = LedgerStore(tmp_path / "budgets.db")
    led = store.ledger("points:k1", budget.pure(2.0), "points")
    agg = _aggregate()
    envelope = pipeline.release(plan_points(agg, "ug", 0.5, {"public_n": 1000}), agg, ledger=led,
                                noise=NoiseSource(1))
    in_one_go = envelope.files(led, tables=True)  # as the CLI makes them, with the ledger as of the charge
    built.clear()
    into: list[points_state.ReleaseEntry] = []
    entry = points_state.add_release(envelope, into=into, fp="k1", led=led)
    assert built == [1] and into == [entry]
    assert "release.csv" not in entry.exports["files"] and entry.exports["history_pending"] is led
    assert store.releases(led.dataset) == []  # not stored before its map is on the page
    record = entry.exports["files"]["release.json"]
    # a later spend on the same budget does not change the record of this release
    led.spend(budget.pure(0.25), label="another release")
    entry.exports.pop("history_pending")
    points_state._store_history(entry, led)
    files = points_state.release_files(entry)
    assert points_state.release_files(entry) is files
    assert built == [1]  # built once per release
    # the record as made at the charge, plus the guidance read from the table made later
    rec = json.loads(files["release.json"])
    assert rec.pop("level_guidance") == level_guidance(files["release.csv"])
    assert rec == json.loads(record)
    assert files == in_one_go and list(files) == list(in_one_go)
    assert list(files) == ["release.csv", "release.geojson", "release.json", "measurements.csv", "design.json",
                           "estimates.csv", "replicates.csv", "deployment.yaml", "review.html"]  # + data users' and review (issue 25)
    assert files["release.csv"] == export.release_csv(envelope.inner)
    # the history keeps exactly these bytes
    for name, data in files.items():
        assert store.release_file(envelope.release_id, name) == data
