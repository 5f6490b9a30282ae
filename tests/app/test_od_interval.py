"""The trips Release step's interval for a union of released flows (issue 25 item 4), with AppTest: the
small prefix-coded upload and the fixture of tests/app/test_od_page.py (its helpers, not its tests)."""

from __future__ import annotations

import orjson
import pytest
from app_steps import ok
from streamlit.testing.v1 import AppTest
from test_od_page import at, entries, prefix_areas, release, texts, to_upload, trips_csv, upload

from dpcore.estimate.release_interval import ReleaseIntervals
from ui.intervals import answer_line, plain_line

__all__ = ["at"]  # the fixture, imported


def test_the_release_step_answers_a_union_of_flows_with_its_interval(at: AppTest) -> None:
    """Issue 25 item 4 for trips: picking released flows (origin>destination pairs of any table) on the
    Release step shows the least-squares estimate and 90 % interval of their union, as the library computes
    it from the stored files; a region pair and the district pairs under it cover the same finest pairs, so
    the same answer; no polygon upload (a pair has no one shape); without measurements, one line says so."""
    upload(to_upload(at), trips_csv())
    prefix_areas(at)
    release(at)
    (entry,) = entries(at)
    rid = entry.release.release_id
    ri = ReleaseIntervals(entry.files)
    design = orjson.loads(entry.files["design.json"])
    region_pair = next(n for lv, n in ri.nodes() if lv == "region" and n.split(">")[0] != n.split(">")[1])
    children = [c for p, c in design["edges"] if p == region_pair]
    assert len(children) > 1
    box = at.multiselect(key=f"_w_interval_areas_{rid}")
    assert f"region · {region_pair}" in box.options and box.label == "Flows (their union)"
    assert not at.get("file_uploader") or all(u.key != f"_w_interval_polygon_{rid}" for u in at.get("file_uploader"))
    box.set_value([region_pair]).run()
    ok(at)
    one = ri.of_nodes([region_pair])
    assert answer_line(one, "1 flow") in texts(at.markdown)
    assert plain_line(one, "1 flow", "trips") in texts(at.markdown)  # the plain sentence leads
    box.set_value(children).run()
    ok(at)
    many = ri.of_nodes(children)
    assert many["cells"] == one["cells"] and many["estimate"] == pytest.approx(one["estimate"], rel=1e-9)
    assert answer_line(many, f"{len(children)} flows") in texts(at.markdown)
    del entry.files["measurements.csv"]  # a release without measurements (e.g. the stability histogram)
    at.run()
    ok(at)
    assert "This release has no measurements file, so no interval for a union of flows." in texts(at.caption)
