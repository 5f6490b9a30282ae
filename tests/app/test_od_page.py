"""Headless tests of the trips-between-areas kind (ui/kinds/flows/) through the app's four steps, with AppTest."""

from __future__ import annotations

import base64
import gzip
import io
import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pytest
import streamlit.testing.v1.app_test as app_test_module
from app_steps import extent_map_kept, next_release_after_results
from flows_helpers import plan_od
from streamlit.testing.v1 import AppTest

from dpcore import pipeline
from dpcore.errors import BudgetError
from dpcore.flows import export as od_export
from dpcore.flows.counts import ODCounts
from dpcore.flows.mechanisms import vanilla_gauss
from dpcore.privacy import budget
from ui import state
from ui.kinds.flows.plan import WHY_NOT_THE_SAME
from ui.state import release_widget_key

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
SHARED = Path(os.environ.get("DPCORE_SHARED_DATA", ROOT.parent / "shared" / "data"))

# the paper's budget (spec §5.3): ε = 1, δ = 1e-8 by its conversion is ρ = 0.0132
PAPER_COST = "ρ = 0.0132 (from ε = 1, δ = 1e-8 by the paper's conversion)"


def ok(at: AppTest) -> AppTest:
    assert not at.exception, at.exception
    return at


def step(at: AppTest, name: str) -> AppTest:
    """Go to a step of the path (data, plan, release, export) as the navigation does."""
    at.switch_page(f"pages/{name}.py").run()
    return ok(at)


@pytest.fixture
def at() -> AppTest:
    """The app on the Data step with 'Trips between areas' chosen (the made-up demo is loaded)."""
    app = AppTest.from_file(APP, default_timeout=180)
    app.session_state["kind"] = app.session_state["_w_kind"] = "flows"
    app.run()
    return step(ok(app), "data")


@pytest.fixture
def media(monkeypatch) -> list:
    """The media file managers of the coming runs: the bytes behind every download button."""
    made: list = []

    class Recording(app_test_module.MediaFileManager):
        def __init__(self, storage) -> None:
            super().__init__(storage)
            made.append(self)

    monkeypatch.setattr(app_test_module, "MediaFileManager", Recording)
    return made


def downloads(made: list) -> dict[str, bytes]:
    """file name -> bytes of every download button of the last run (deferred ones are built here)."""
    mgr = made[-1]
    out = {f.filename: f.content for f in mgr._storage._files_by_id.values() if f.filename}
    for d in mgr._deferred_callables.values():
        data = d["callable"]()
        out[d["filename"]] = data if isinstance(data, bytes) else str(data).encode()
    return out


def frame_with(at: AppTest, column: str) -> pd.DataFrame:
    """The first dataframe shown with ``column`` (AppTest does not expose dataframe keys)."""
    for d in at.dataframe:
        if column in d.value.columns:
            return d.value
    raise AssertionError(f"no dataframe with a column {column!r}")


def figures(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def paper_budget(at: AppTest) -> AppTest:
    """On the Plan step: the paper's budget, stated as (ε = 1, δ = 1e-8) by its conversion."""
    step(at, "plan")
    at.radio(key="_w_od_definition").set_value("approx").run()
    at.number_input(key="_w_od_eps").set_value(1.0).run()
    return ok(at)


def release_button(at: AppTest):
    """The Release button of the Release step."""
    return at.button(key=release_widget_key("od_release_button", at.session_state))


def release(at: AppTest) -> AppTest:
    """Release on the Release step (the page stays there)."""
    step(at, "release")
    release_button(at).click().run()
    return ok(at)


def ledger(at: AppTest):
    return at.session_state["od_ledgers"][at.session_state["od_model"]["fp"]]


def entries(at: AppTest) -> list:
    return at.session_state["od_releases"].get(at.session_state["od_model"]["fp"], [])


def errors(at: AppTest) -> str:
    return " | ".join(e.value for e in at.error)


def texts(elements) -> str:
    return "\n".join(e.value for e in elements)


def sidebar_text(at: AppTest) -> str:
    return "\n".join([m.value for m in at.sidebar.markdown] + [c.value for c in at.sidebar.caption])


def test_demo_loads_and_shows_the_plan_before_release(at: AppTest) -> None:
    assert [t.value for t in at.title] == ["Data"]
    # level names in plain words, counted: "4 regions", not "4 region"
    assert any("4 regions, 36 districts, 576 zones" in s.value for s in at.success)
    assert any("for you only, never exported" in m.value for m in at.markdown)
    assert [m.value for m in at.metric][:2] == ["60,000", "28,377"]  # trips, observed pairs (curator only)
    step(at, "plan")
    # the default budget is the app's, the same for every kind: ρ = 0.125 of a cap of 0.5 (ε = 0.5 of 1)
    assert at.radio(key="_w_od_definition").value == "rho"
    assert at.number_input(key="_w_od_rho").value == pytest.approx(state.DEFAULT_RHO)
    assert ledger(at).cap.value == pytest.approx(state.DEFAULT_RHO_CAP)
    # one sentence why trips do not default to the other kinds' language; the formulas, conversions and lemma
    # numbers behind "How is this computed" (issue 26, item 7)
    assert any(c.value == WHY_NOT_THE_SAME for c in at.caption)
    how = " ".join(m.value for e in at.expander if e.label in ("How is this computed", "How are these defaults chosen")
                   for m in e.markdown)
    assert "ε = 1 at δ = 1e-8" in how and "Lemma 3" in how and "Canonne, Kamath & Steinke" in how
    reading = [i.value for i in at.info if i.value.startswith("Read as (ε, δ)-DP")]
    assert reading and not any("Lemma" in r or "Canonne" in r for r in reading)
    paper_budget(at)
    plan = frame_with(at, "noise per cell (SD)")
    assert list(plan["table"]) == ["total of all trips · exact, public", "the whole territory to regions",
                                   "regions to regions", "regions to districts", "districts to districts",
                                   "districts to zones", "zones to zones"]
    # the errors in trips first, the budget share and the noise SD after them (none dropped): the columns a
    # curator reads fit the page (about 920 px of a 1400-px window) without scrolling sideways
    first = ["table", "typical largest error", "error per flow (RMSE)", "unreliable below"]
    assert list(plan.columns[:5]) == [*first, "guaranteed 95 % bound"]
    assert set(plan.columns[5:]) == {"budget share", "noise per cell (SD)"}
    (shown,) = [d for d in at.dataframe if "noise per cell (SD)" in d.value.columns]
    widths = {label: c.get("width") for label, c in json.loads(shown.proto.columns).items()}
    assert sum(widths[label] for label in first) <= 920, widths
    # bounded, one trip per person: the total is exact and public, nothing of the budget goes to it
    assert np.isnan(plan["budget share"].iloc[0])
    # numbers stay numbers (they sort), rounded for people: whole numbers, one decimal below 10
    assert plan["noise per cell (SD)"].dtype.kind == "f"
    # spec §5.3: ε = 1, δ = 1e-8 by the paper's conversion is ρ = 0.0132; T = 6 gives σ = 21.3 → 21
    assert set(plan["noise per cell (SD)"].iloc[1:]) == {21.0}
    assert plan["unreliable below"].iloc[-1] == 43.0
    assert plan["budget share"].iloc[1] == pytest.approx(0.0022)
    assert any("guaranteed 95 % bound** is a promise" in c.value and "names it region>district" in c.value
               for c in at.caption)
    # the expected error as bars in the tree's order (not alphabetical), with axis titles
    (bars,) = [f for f in figures(at) if f["data"][0]["type"] == "bar"]
    names = list(plan["table"])[1:]
    assert bars["layout"]["yaxis"]["categoryarray"] == names and list(bars["data"][0]["y"]) == names
    assert "trips per area pair" in bars["layout"]["xaxis"]["title"]["text"]
    assert bars["layout"]["yaxis"]["title"]["text"]
    # the conversion is named in words, with what it is behind the help
    assert "Canonne" in at.radio(key="_w_od_conversion").help
    step(at, "release")
    assert any(PAPER_COST in m.value for m in at.markdown)
    assert release_button(at).label == "Release with ρ = 0.013 — 0.49 left after this"
    assert not at.session_state["od_releases"]
    assert ledger(at).spent == 0
    assert any("Nothing has been released" in c.value for c in at.caption)
    # the tighter conversion gives more ρ for the same (ε, δ): less noise, still nothing spent; the
    # release names the conversion
    step(at, "plan")
    at.radio(key="_w_od_conversion").set_value("cks").run()
    ok(at)
    assert frame_with(at, "noise per cell (SD)")["noise per cell (SD)"].iloc[-1] < 21
    step(at, "release")
    assert any("by the tighter conversion of Canonne, Kamath & Steinke" in m.value for m in at.markdown)
    # unbounded neighbours: the total is measured too
    step(at, "plan")
    at.radio(key="_w_od_neighbour").set_value("add_remove").run()
    ok(at)
    assert frame_with(at, "noise per cell (SD)")["table"].iloc[0] == "total of all trips"
    assert ledger(at).spent == 0


def test_release_spends_once_and_fills_map_errors_and_export(at: AppTest, media: list) -> None:
    paper_budget(at)
    release(at)
    led = ledger(at)
    (entry,) = entries(at)
    rel = entry.release
    assert len(led.entries) == 1 and led.spent == pytest.approx(rel.plan.cost.value)
    assert rel.consistent and rel.total(0) == 60_000
    # the one confirmation of every kind: what was released, what it cost, what is left, a link to the map
    (done,) = [s.value for s in at.success if s.value.startswith("Released")]
    assert "InfTDA" in done and "ρ = 0.013" in done and "of 0.5 is left" in done and rel.release_id in done
    assert any("(#map)" in m.value for m in at.markdown)
    assert any("unit of privacy: **one trip, " in m.value for m in at.markdown)  # the Data step's words
    next_release_after_results(at, "od_release_button")
    first = rel.release_id
    at.run()  # a rerun draws no new noise and spends nothing
    ok(at)
    (entry,) = entries(at)
    assert entry.release.release_id == first and len(led.entries) == 1
    # map: the default level is the finest intra-level table with at most 300 areas a side
    # (36 districts), drawn offline, with its O/D matrix beside it
    level = at.selectbox(key=f"_w_od_map_level_{entry.fp}")  # remembered per data set
    assert level.value == 4
    figs = figures(at)
    assert sorted(f["data"][0]["type"] for f in figs) == ["heatmap", "scattermap"]
    fig = next(f for f in figs if f["data"][0]["type"] == "scattermap")
    assert fig["layout"]["map"]["style"] == "white-bg"
    assert {tr["type"] for tr in fig["data"]} == {"scattermap"}
    assert any("unreliable" in i.value for i in at.info)
    # the 576 zones are too many for a matrix: the map only; the session keeps the last 3 figures
    for t in (6, 5, 3, 6):
        at.selectbox(key=f"_w_od_map_level_{entry.fp}").set_value(t).run()
        ok(at)
    assert [f["data"][0]["type"] for f in figures(at)] == ["scattermap"]
    assert len(at.session_state["od_figs"]) == 3
    # errors: analytic for everyone, empirical for the curator under a warning, measured next to expected
    emp = frame_with(at, "released flows not in the data (%)")
    assert list(emp["table"])[-1] == "zones to zones"
    assert frame_with(at, "possible pairs")["possible pairs"].iloc[-1] == 576 * 576  # the release's plan
    assert list(emp.columns) == ["table", "released flows not in the data (%)", "true flows released as 0 (%)",
                                 "released flows", "true flows"]
    err = frame_with(at, "largest error · measured")
    assert list(err.columns) == ["table", "largest error · measured", "typical largest error · expected",
                                 "error per flow (RMSE) · measured", "error per flow (RMSE) · expected"]
    assert err["largest error · measured"].dtype.kind == "f"
    assert any("Do not publish" in w.value for w in at.warning)
    # export: three downloads of the release, the data users' and review files (issue 25, offered as
    # for every kind) and its release.toml; the files hold the release only
    step(at, "export")
    labels = [b.proto.label for b in at.get("download_button")]
    measured = orjson.loads(entry.files["release.json"])["data_users"]["files"]  # InfTDA's measured tree
    assert measured[:3] == ["measurements.csv", "design.json", "estimates.csv"]
    users = [*measured, "deployment.yaml", "review.html"]
    assert labels == ["Download release.csv", "Download release.json", "Download flows.geojson",
                      *(f"Download {n}" for n in users), "Download release.toml"]
    files = downloads(media)
    assert sorted(files) == sorted(["flows.geojson", "release.csv", "release.json", "release.toml", *users])
    assert files.pop("release.toml").decode() == entry.config
    csv = pd.read_csv(io.BytesIO(files["release.csv"]), dtype={"noisy_count": int})
    assert list(csv.columns) == ["level", "origin", "destination", "noisy_count", "noise_sd", "ci95_low", "ci95_high"]
    assert (csv["noisy_count"] > 0).all()
    rec = json.loads(files["release.json"])
    od_export.validate_od_record(rec)
    assert rec["outputs"]["files"] == ["release.csv", "flows.geojson", *measured, "release.json"]
    assert rec["ledger"]["entries"][0]["cost"]["value"] == pytest.approx(led.spent)
    assert rec["extra"]["budget_input"]["conversion"] == "classic"
    # every area has a position; the total (level 1: total → region) has none
    assert len(json.loads(files["flows.geojson"])["features"]) == sum(v.size for v in rel.values[2:])
    # the Export step serves the bytes made with the release (and kept in the history): every one of them
    assert files == dict(entry.files)


def test_a_release_without_intervals_says_why_and_previews_empty_cells(at: AppTest) -> None:
    """TopDown L2 has no valid 95 % interval for its projected flows: release.csv keeps ci95_low and
    ci95_high empty, the Export preview shows "—" there (not "None"), and the page and the record say
    why and where a data user gets an interval."""
    step(at, "plan")
    at.selectbox(key="_w_od_mech").set_value("tda_l2").run()
    release(at)
    (entry,) = entries(at)
    step(at, "export")
    preview = frame_with(at, "ci95_low")
    assert (preview[["ci95_low", "ci95_high"]] == "—").all().all() and "None" not in preview.to_string()
    (said,) = [c.value for c in at.caption if "left empty" in c.value]
    assert "TopDown L2" in said and "estimates.csv" in said and "python -m dpcore interval" in said
    rec = json.loads(entry.files["release.json"])
    assert rec["outputs"]["columns"]["ci95_low"] == od_export.no_interval_note(entry.release)


def test_a_second_click_on_release_spends_nothing(at: AppTest) -> None:
    release(at)
    assert len(ledger(at).entries) == 1
    # a click that comes with a token already used (the second click of a double click, drawn before
    # the release) releases nothing
    at.session_state["od_release_button_token_used"] = at.session_state["od_release_button_token"]
    release_button(at).click().run()
    ok(at)
    assert len(ledger(at).entries) == 1 and len(entries(at)) == 1
    # reruns (widget changes, page switches) never release
    at.run()
    step(at, "plan")
    step(at, "release")
    assert len(ledger(at).entries) == 1 and len(entries(at)) == 1
    # a deliberate second release on the redrawn button is a new release, charged once more
    release(at)
    assert len(ledger(at).entries) == 2 and len(entries(at)) == 2
    # every charge has its release: the budget is never spent for a release that was not kept
    assert len(ledger(at).entries) == sum(len(v) for v in at.session_state["od_releases"].values())


def test_a_click_on_the_button_as_drawn_before_the_release_spends_nothing(at: AppTest) -> None:
    """A burst of clicks in a browser: clicks sent before the page showed the release reach the server
    after the button was drawn again.  They carry the earlier drawing's widget id, so they must find
    that drawing's used token, not the newly armed one (a callback runs with the arguments of the
    widget's latest drawing, so the new token needs a widget id of its own)."""
    step(at, "release")
    before = release_button(at)
    before.click().run()
    ok(at)
    assert len(ledger(at).entries) == 1
    assert release_button(at).key != before.key  # the redrawn button is another widget
    before.click().run()  # the stale click, as the browser sends it: the earlier drawing's id
    ok(at)
    assert len(ledger(at).entries) == 1 and len(entries(at)) == 1
    release_button(at).click().run()  # a click on the redrawn button is a deliberate new release
    ok(at)
    assert len(ledger(at).entries) == 2 and len(entries(at)) == 2


def test_an_exhausted_budget_is_refused(at: AppTest) -> None:
    step(at, "plan")
    at.number_input(key="_w_od_rho").set_value(0.3).run()  # ρ = 0.3 of the cap 0.5
    release(at)
    led = ledger(at)
    assert len(led.entries) == 1
    button = release_button(at)
    assert button.disabled and button.label.startswith("Not enough budget")
    assert any("more than the 0.2 left" in c.value for c in at.caption)
    # the same refusal one level down, should the button be bypassed: nothing is spent
    counts = at.session_state["od_model"]["counts"]
    with pytest.raises(BudgetError, match="cap"):
        pipeline.release(plan_od(counts, "inftda", budget.zcdp(0.3)), counts, ledger=led)
    assert len(led.entries) == 1
    # the cap can be raised by the curator (policy permitting); then the button works again
    fp = at.session_state["od_model"]["fp"]
    step(at, "plan")
    at.number_input(key=f"od_cap_{fp}_zcdp").set_value(1.0).run()
    ok(at)
    assert release_button(step(at, "release")).disabled  # a raise waits for confirmation
    step(at, "plan")
    at.button(key=f"od_cap_{fp}_zcdp__confirm").click().run()
    ok(at)
    assert not release_button(step(at, "release")).disabled
    # the definition is locked once budget is spent under it
    step(at, "plan")
    at.radio(key="_w_od_definition").set_value("pure").run()
    ok(at)
    assert at.radio(key="_w_od_definition").value in ("rho", "approx")
    assert led.definition == "zcdp"


def test_vanilla_gauss_on_a_too_large_domain_is_refused_before_the_click(at: AppTest, monkeypatch) -> None:
    release(at)
    monkeypatch.setattr(vanilla_gauss, "VANILLA_MAX_CELLS", 100_000)  # the demo has 576² = 331,776 finest pairs
    step(at, "plan")
    at.selectbox(key="_w_od_mech").set_value("vanilla_gauss").run()
    ok(at)
    assert "VanillaGauss" in errors(at) and "331,776" in errors(at)
    step(at, "release")
    assert release_button(at).disabled
    assert len(ledger(at).entries) == 1
    assert figures(at)  # the earlier release stays


# ---------------------------------------------------------------------------------------------
# uploads
# ---------------------------------------------------------------------------------------------

AREAS = "code,lon,lat\n" + "\n".join(
    f"{a}{b}{c:02d},{10 + a + 0.1 * c:.2f},{50 + b + 0.05 * c:.2f}"
    for a in (1, 2) for b in (1, 2, 3) for c in (1, 2, 3, 4)) + "\n"
CODES = [ln.split(",")[0] for ln in AREAS.splitlines()[1:]]


def trip_rows(n: int = 400) -> list[tuple[str, str, str]]:
    rng = np.random.default_rng(5)
    return [(f"p{i % 150}", *rng.choice(CODES, 2)) for i in range(n)]


def trips_csv(bad: bool = False) -> bytes:
    rows = ["person,origin,destination"] + [",".join(r) for r in trip_rows()]
    if bad:
        rows.append("p1,9999,1101")
    return ("\n".join(rows) + "\n").encode()


def upload(at: AppTest, trips: bytes, areas: bytes | None = AREAS.encode(), name: str = "trips.csv") -> AppTest:
    at.file_uploader(key="od_upload").set_value((name, trips, "text/csv")).run()
    ok(at)
    if areas is not None:
        at.file_uploader(key="od_areas_upload").set_value(("areas.csv", areas, "text/csv")).run()
        ok(at)
    return at


def prefix_areas(at: AppTest) -> AppTest:
    at.radio(key="_w_od_set_areas_shape").set_value("prefix").run()
    at.text_input(key="_w_od_set_areas_lengths").set_value("1,2,4").run()
    at.text_input(key="_w_od_set_areas_names").set_value("region,district,zone").run()
    return ok(at)


def to_upload(at: AppTest) -> AppTest:
    at.radio(key="_w_od_source").set_value("upload").run()
    return ok(at)


def test_upload_with_person_cap_and_prefix_codes(at: AppTest) -> None:
    to_upload(at)
    assert any("public geography" in i.value for i in at.info)
    upload(at, trips_csv())
    # the level guess leaves out coordinates: 'code', not 'code, lon'
    assert at.multiselect(key="_w_od_set_areas_levels").value == ["code"]
    assert at.selectbox(key="_w_od_set_areas_lon").value == "lon"
    prefix_areas(at)
    at.selectbox(key="_w_od_set_trips_person").set_value("person").run()
    at.number_input(key="_w_od_set_trips_m").set_value(2).run()
    ok(at)
    assert any("2 regions, 6 districts, 24 zones" in s.value for s in at.success), errors(at)
    c = at.session_state["od_model"]["counts"]
    assert c.max_trips == 2 and c.total == 150 * 2 and c.dropped_trips == 100
    assert "one person with at most 2 trips" in texts(at.markdown)  # the unit of privacy, on the Data step
    plan = frame_with(step(at, "plan"), "noise per cell (SD)")
    assert plan["budget share"].iloc[0] > 0  # with m > 1 the total is not invariant: it is noised
    release(at)
    (entry,) = entries(at)
    assert entry.release.plan.max_trips == 2
    assert any("unit of privacy: **one person with at most 2 trips, " in m.value for m in at.markdown)  # as on Data
    assert figures(at)  # positions from the area list's lon/lat columns


def test_a_large_trips_upload_is_counted_by_duckdb(at: AppTest, monkeypatch) -> None:
    """Above the engine threshold the trips are not read into memory: DuckDB groups them (with the
    person cap) and the counts equal those of the in-memory path."""
    import pandas as pd

    monkeypatch.setenv("DPCORE_AUTO_ENGINE_BYTES", "1000")
    to_upload(at)
    upload(at, trips_csv())
    assert at.session_state["od_trips_src"] is not None  # the upload went to DuckDB
    prefix_areas(at)
    at.selectbox(key="_w_od_set_trips_person").set_value("person").run()
    at.number_input(key="_w_od_set_trips_m").set_value(2).run()
    ok(at)
    c = at.session_state["od_model"]["counts"]
    h = at.session_state["od_model"]["h"]
    df = pd.DataFrame(trip_rows(), columns=["person", "origin", "destination"])
    ref = ODCounts.from_frame(df, h, origin="origin", destination="destination", user="person", max_trips=2)
    assert c.max_trips == 2 and c.total == ref.total == 300 and c.dropped_trips == ref.dropped_trips
    assert c.origin.tolist() == ref.origin.tolist() and c.destination.tolist() == ref.destination.tolist()
    assert c.count.tolist() == ref.count.tolist() and c.fingerprint == ref.fingerprint
    release(at)
    assert len(entries(at)) == 1


def test_upload_settings_survive_a_source_switch(at: AppTest) -> None:
    to_upload(at)
    upload(at, trips_csv())
    prefix_areas(at)
    at.selectbox(key="_w_od_set_trips_person").set_value("person").run()
    at.number_input(key="_w_od_set_trips_m").set_value(3).run()
    at.radio(key="_w_od_set_trips_distinct").set_value(False).run()
    at.selectbox(key="_w_od_set_areas_lat").set_value("(none)").run()
    ok(at)
    release(at)
    counts = at.session_state["od_model"]["counts"]
    rel_id = entries(at)[0].release.release_id
    step(at, "data")
    at.radio(key="_w_od_source").set_value("demo").run()
    ok(at)
    assert any("576 zones" in s.value for s in at.success)
    to_upload(at)
    assert at.radio(key="_w_od_set_areas_shape").value == "prefix"
    assert at.text_input(key="_w_od_set_areas_lengths").value == "1,2,4"
    assert at.text_input(key="_w_od_set_areas_names").value == "region,district,zone"
    assert at.selectbox(key="_w_od_set_trips_person").value == "person"
    assert at.number_input(key="_w_od_set_trips_m").value == 3
    assert at.radio(key="_w_od_set_trips_distinct").value is False
    assert at.selectbox(key="_w_od_set_areas_lat").value == "(none)"
    assert any("Using the trips file uploaded earlier: trips.csv" in c.value for c in at.caption)
    # the same data (not counted again: the same per-person sample) and its release
    assert at.session_state["od_model"]["counts"] is counts
    assert any("2 regions, 6 districts, 24 zones" in s.value for s in at.success)
    assert entries(at)[-1].release.release_id == rel_id
    assert entries(at)[-1].release.plan.max_trips == 3
    step(at, "release")
    assert at.session_state["od_shown"].release.release_id == rel_id
    assert not any("Nothing has been released" in c.value for c in at.caption)
    step(at, "data")
    assert len(ledger(at).entries) == 1
    # a corrected file with the same columns keeps the choices (and these trips keep their budget)
    fp = at.session_state["od_model"]["fp"]
    at.file_uploader(key="od_upload").set_value(("trips.csv", trips_csv().replace(b"\n", b"\r\n"), "text/csv")).run()
    ok(at)
    assert at.selectbox(key="_w_od_set_trips_person").value == "person"
    assert at.number_input(key="_w_od_set_trips_m").value == 3
    assert at.session_state["od_model"]["fp"] == fp and len(ledger(at).entries) == 1


def test_the_same_trips_reuploaded_share_one_budget(at: AppTest) -> None:
    """CRLF, reordered rows, gzip, (origin, destination, count) rows, another area list: one budget."""
    to_upload(at)
    rows = [(o, d) for _p, o, d in trip_rows()]
    plain = ("origin,destination\n" + "".join(f"{o},{d}\n" for o, d in rows)).encode()
    upload(at, plain)
    prefix_areas(at)
    assert any("24 zones" in s.value for s in at.success), errors(at)
    release(at)
    fp = at.session_state["od_model"]["fp"]
    spent = ledger(at).spent
    step(at, "data")
    n_ledgers = len(at.session_state["od_ledgers"])
    crlf = ("origin,destination\r\n" + "".join(f"{o},{d}\r\n" for o, d in reversed(rows))).encode()
    counted = "origin,destination,count\n" + "".join(
        f"{o},{d},{n}\n" for (o, d), n in sorted(Counter(rows).items(), reverse=True))
    for name, data in (("trips_crlf.csv", crlf), ("trips.csv.gz", gzip.compress(plain)),
                       ("pairs.csv", counted.encode())):
        at.file_uploader(key="od_upload").set_value((name, data, "text/csv")).run()
        ok(at)
        assert not at.error, errors(at)
        assert at.session_state["od_model"]["counts"].total == 400, name
        assert at.session_state["od_model"]["fp"] == fp, name
        assert len(at.session_state["od_ledgers"]) == n_ledgers
        assert ledger(at).spent == spent and len(ledger(at).entries) == 1
        # the release of these trips is still shown after the re-upload
        step(at, "release")
        assert at.session_state["od_shown"] is entries(at)[-1]
        assert figures(at), name
        step(at, "data")
    assert at.radio(key="_w_od_set_trips_kind").value == "counts"  # guessed from the 'count' column
    # another area list (the same codes as one level column): the same people, the same budget;
    # the release made on the other list is still shown, with its own settings
    at.radio(key="_w_od_set_areas_shape").set_value("levels").run()
    ok(at)
    assert any("24 codes" in s.value for s in at.success), errors(at)
    assert at.session_state["od_model"]["fp"] == fp and ledger(at).spent == spent
    step(at, "release")
    assert any("made with another area list" in i.value for i in at.info)
    assert figures(at)


def test_the_count_column_is_never_a_code_column(at: AppTest) -> None:
    to_upload(at)
    pairs = Counter((o, d) for _p, o, d in trip_rows())
    data = "home,work,k\n" + "".join(f"{o},{d},{n}\n" for (o, d), n in pairs.items())
    upload(at, data.encode())
    prefix_areas(at)
    assert at.selectbox(key="_w_od_set_trips_origin").value == "home"
    assert at.selectbox(key="_w_od_set_trips_destination").value == "work"
    # 'k' is not named like a count: the rows are read as trips until the curator says otherwise
    assert at.radio(key="_w_od_set_trips_kind").value == "trips"
    at.radio(key="_w_od_set_trips_kind").set_value("counts").run()
    ok(at)
    assert at.selectbox(key="_w_od_set_trips_count").value == "(choose)"
    assert any("Choose the count column" in i.value for i in at.info)
    assert not at.session_state["od_active"]
    at.selectbox(key="_w_od_set_trips_count").set_value("work").run()
    ok(at)
    assert "The count column 'work' is also the destination column" in errors(at)
    assert not at.session_state["od_active"]
    at.selectbox(key="_w_od_set_trips_count").set_value("k").run()
    ok(at)
    assert at.session_state["od_model"]["counts"].total == 400
    # the level guess leaves out coordinates, names and counts
    areas = "lon,region,zone,zone_name,lat,population\n" + "".join(
        f"{10 + i / 10},R{c[0]},{c},Zone {c},{50 + i / 10},{i}\n" for i, c in enumerate(CODES))
    at.file_uploader(key="od_areas_upload").set_value(("areas2.csv", areas.encode(), "text/csv")).run()
    ok(at)
    assert at.multiselect(key="_w_od_set_areas_levels").value == ["region", "zone"]
    assert (at.selectbox(key="_w_od_set_areas_lon").value, at.selectbox(key="_w_od_set_areas_lat").value) == (
        "lon", "lat")
    assert any("2 regions, 24 zones" in s.value for s in at.success), errors(at)
    # the origin and the destination must be two columns
    at.selectbox(key="_w_od_set_trips_destination").set_value("home").run()
    ok(at)
    assert "choose the origin and destination columns" in errors(at)


def test_bad_uploads_show_clear_errors_and_keep_the_earlier_release(at: AppTest) -> None:
    release(at)
    demo_fp = at.session_state["od_model"]["fp"]
    rel_id = entries(at)[0].release.release_id
    step(at, "data")
    to_upload(at)
    cases = [
        (b"\x89PNG\r\n\x1a\n" + bytes(200), "is not a text (CSV) file"),
        (b"", "is empty"),
        ("origin,destination\n1101,1102\n".encode("utf-16"), "is a UTF-16 text file. Save it as UTF-8"),
        (b"zone\n1101\n1102\n", "O/D trips need an origin and a destination column"),
    ]
    for data, msg in cases:
        at.file_uploader(key="od_upload").set_value(("trips.csv", data, "text/csv")).run()
        ok(at)
        assert msg in errors(at), errors(at)
        assert "census" not in errors(at).lower()
    # trips whose codes are not in the public area list: the rows are named
    upload(at, trips_csv(bad=True))
    prefix_areas(at)
    msgs = errors(at)
    assert "not a finest area" in msgs and "9999" in msgs
    assert any("Load the trips and their public area list above" in i.value for i in at.info)
    step(at, "plan")  # the other steps say what is missing and link to the Data step
    assert any("Load trips and their public area list on the Data step first" in i.value for i in at.info)
    step(at, "data")
    # a column that is no area code at all: 'choose the origin column', naming the ones that are
    upload(at, trips_csv(), areas=None)
    at.selectbox(key="_w_od_set_trips_origin").set_value("person").run()
    ok(at)
    assert "Choose the origin column ('origin', 'destination' hold area codes)" in errors(at), errors(at)
    assert "not a finest area" not in errors(at)
    # a good file, then a bad one: the good one is still used, with its release
    at.selectbox(key="_w_od_set_trips_origin").set_value("origin").run()
    release(at)
    up_fp = at.session_state["od_model"]["fp"]
    step(at, "data")
    at.file_uploader(key="od_upload").set_value(("trips.csv", b"", "text/csv")).run()
    ok(at)
    assert "is empty" in errors(at)
    assert any("The earlier trips file (trips.csv) is still used" in c.value for c in at.caption)
    assert at.session_state["od_model"]["fp"] == up_fp and figures(step(at, "release"))
    # the demo comes back with its release and its ledger
    step(at, "data")
    at.radio(key="_w_od_source").set_value("demo").run()
    ok(at)
    assert figures(step(at, "release"))
    assert len(at.session_state["od_ledgers"][demo_fp].entries) == 1
    assert at.session_state["od_releases"][demo_fp][-1].release.release_id == rel_id


def test_the_exports_do_not_name_the_uploaded_file(at: AppTest, media: list) -> None:
    to_upload(at)
    upload(at, trips_csv(), name="secret_client_trips.csv")
    prefix_areas(at)
    assert any("secret_client_trips.csv" in m.value for m in at.success)  # on screen, for the curator
    release(at)
    step(at, "export")
    files = downloads(media)
    # every file the release made is offered (the data users' and review files too), with its config
    assert sorted(files) == sorted([*entries(at)[-1].files, "release.toml"])
    assert {"release.csv", "release.json", "deployment.yaml", "review.html"} <= set(files)
    # the config is the curator's (it names the input to read again, and says not to publish it)
    config = files.pop("release.toml")
    assert b"secret_client_trips.csv" in config and b"do not publish" in config
    fp = at.session_state["od_model"]["fp"]
    assert fp.encode() not in config
    for name, data in files.items():
        assert b"secret_client" not in data, name
        assert fp.encode() not in data, name  # the data's fingerprint is a key, never published
    entry = entries(at)[-1]
    geo = orjson.dumps(od_export.flows_geojson(entry.release, entry.model["xy"]))
    assert geo == files["flows.geojson"]


@pytest.mark.skipif(not (SHARED / "od" / "nyc_green_taxi_trips_2020-04.csv.gz").exists(),
                    reason="shared/data is not available")
def test_nyc_taxi_trips(at: AppTest) -> None:
    at.radio(key="_w_od_source").set_value("nyc").run()
    ok(at)
    assert any("7 boroughs, 265 zones" in s.value for s in at.success)
    # zone names from the TLC lookup beside their codes
    preview = frame_with(at, "zone code")
    assert "zone" in preview.columns and preview["zone"].iloc[0] != preview["zone code"].iloc[0]
    assert at.session_state["od_model"]["counts"].total == 35_612
    release(at)
    types = sorted(f["data"][0]["type"] for f in figures(at))
    assert types == ["heatmap", "scattermap"]  # 265 zones a side: the matrix is shown too
    (entry,) = entries(at)
    assert entry.release.total(0) == 35_612  # bounded, one trip each: the total is public


def test_the_sidebar_shows_the_trips_budget_and_release_on_every_step(at: AppTest) -> None:
    for name in ("data", "plan", "release", "export"):
        side = sidebar_text(step(at, name))
        assert "O/D demo (made up)" in side and "60,000 trips, 28,377 observed pairs" in side, name
        assert "4 regions, 36 districts, 576 zones" in side and "Nothing released yet." in side, name
        assert at.sidebar.get("progress"), name
    paper_budget(at)
    release(at)
    for name in ("release", "export", "plan", "data"):
        side = sidebar_text(step(at, name))
        assert "InfTDA" in side and "flows released in the finest table" in side, name
        assert "from ε = 1, δ = 1e-8 by the paper's conversion" in side, name
        # the spent budget read as (ε, δ): each reading says which conversion, in words; no bare "CKS"
        assert "As (ε, δ)-DP with δ = 1e-08: spent ε = 0.87" in side
        assert "By the paper's simpler conversion (its Lemma 3), the spent ρ reads as ε = 1 at δ = 1e-8" in side
        assert "CKS" not in side
        assert any("spent ρ = 0.013 of 0.5" in p.proto.text for p in at.sidebar.get("progress"))


def test_a_refused_plan_explains_itself_and_keeps_the_release(at: AppTest) -> None:
    release(at)
    (entry,) = entries(at)
    # the MILP baseline would need too many solver calls on the demo's 576 zones: refused before any spending
    step(at, "plan")
    at.selectbox(key="_w_od_mech").set_value("tda_linf_milp").run()
    ok(at)
    assert "solver calls" in errors(at)
    assert not [o for o in at.selectbox(key="_w_od_mech").options if "Stability" in o]  # (ε, δ): not offered
    assert any("MILP" in o for o in at.selectbox(key="_w_od_mech").options)
    # every mechanism says when to use it, in one line
    assert any(m.value.startswith("*Use it when:*") for m in at.markdown)
    step(at, "release")
    assert "solver calls" in errors(at)
    assert release_button(at).disabled
    assert len(ledger(at).entries) == 1
    assert figures(at) and entries(at)[-1].release is entry.release


@pytest.mark.skipif(not (SHARED / "od" / "us_county_commuting_flows_acs2009_2013.csv.gz").exists(),
                    reason="shared/data is not available")
def test_us_counties_and_states_are_shown_by_name(at: AppTest) -> None:
    at.radio(key="_w_od_source").set_value("us").run()
    ok(at)
    assert any("52 states" in s.value and "counties" in s.value for s in at.success), texts(at.success)
    preview = frame_with(at, "county code")
    assert list(preview.columns) == ["state", "state code", "county", "county code"]
    assert preview["state"].iloc[0] == "Alabama" and preview["state code"].iloc[0] == "01"
    assert preview["county"].iloc[0].endswith(", Alabama")


def test_the_release_history_does_not_store_the_uploaded_file_name(at: AppTest) -> None:
    """Issue 18, item 8: the stored history summary is neutral (mechanism, budget, levels), as for
    the other kinds; the curator's file name (often naming people or a project) is not kept."""
    from dpcore.privacy import ledger_store

    to_upload(at)
    upload(at, trips_csv(), name="alice_smith_clinic_visits.csv")
    prefix_areas(at)
    ok(at)
    release(at)
    store = ledger_store.default_store()
    fp = at.session_state["od_model"]["fp"]
    stored = store.releases(store.budget_key("flows", fp))
    assert stored
    for row in stored:
        assert "alice_smith" not in json.dumps(row)
        assert row["summary"]["levels"] and "name" not in row["summary"]


def test_the_default_release_is_half_the_default_cap_as_for_every_kind(at: AppTest) -> None:
    from dpcore.core.session import DEFAULT_RHO_CAP, default_release_budget

    step(at, "plan")
    assert at.radio(key="_w_od_definition").value == "rho"
    assert at.number_input(key="_w_od_rho").value == default_release_budget("zcdp") == 0.25
    assert ledger(at).cap.value == DEFAULT_RHO_CAP == 0.5
    step(at, "release")
    assert release_button(at).label == "Release with ρ = 0.25 — 0.25 left after this"


def test_target_planner_proposes_rho_and_split_and_use_sets_both(at: AppTest) -> None:
    """Issue 17, item 2: "±20 trips between zones" (the finest table) and "±100 between districts" on the
    demo; the proposal is the library planner's; "Use this budget" sets ρ and the split over the tables."""
    from dpcore import catalog
    from dpcore.core.target import Target, plan_for_targets
    from dpcore.flows.unit import od_unit
    from ui import fmt

    step(at, "plan")
    box = at.multiselect(key="od_target_levels")
    assert box.options[0] == "each pair of the finest table (zone)" and "district" in box.options
    box.set_value(["finest", "district"]).run()
    at.number_input(key="od_target_abs_finest").set_value(20).run()
    at.number_input(key="od_target_abs_district").set_value(100).run()
    at.button(key="od_target_propose").click().run()
    ok(at)
    m = at.session_state["od_model"]
    c = m["counts"]
    expected = plan_for_targets(
        catalog.get("od", "inftda"), m["h"], [Target("finest", 20), Target("district", 100)], definition="zcdp",
        params={"split": "uniform", "orientation": "destination", "order": "ascending", "tiebreak": "random"},
        unit=od_unit("replace", c.max_trips, c.persons), distinct=c.distinct)
    proposal = [v.value for v in at.markdown if v.value.startswith("The smallest budget that meets your targets")]
    assert len(proposal) == 1 and f"targets: **ρ ≈ {fmt.eps(expected.rounded)}**" in proposal[0], proposal
    assert at.button(key="od_target_use").label == f"Use this budget (ρ ≈ {fmt.eps(expected.rounded)})"
    table = frame_with(at, "your target")
    assert list(table.loc[table["level"].isin(["district", "zone"]), "met"]) == ["yes", "yes"]
    at.button(key="od_target_use").click().run()
    ok(at)
    ss = at.session_state
    assert ss["od_definition"] == "rho" and ss["od_rho"] == pytest.approx(expected.rounded)
    assert ss["od_split"] == "custom"
    n = len(expected.params["weights"])
    weights = np.array([float(w) for w in ss[f"od_weights_{n}"].split(",")])
    np.testing.assert_allclose(weights / weights.sum(),
                               np.array(expected.params["weights"]) / sum(expected.params["weights"]), rtol=1e-5)
    step(at, "release")
    assert any(b.label.startswith(f"Release with ρ = {fmt.eps(expected.rounded)}") for b in at.button), \
        [b.label for b in at.button]


def test_the_extent_map_is_kept_across_reruns(at: AppTest, monkeypatch) -> None:
    """The Data step's extent map is made once per area list and kept in the session
    (:func:`ui.charts.kept`): a rerun asks for it again and gets the same figure."""
    from ui.kinds.flows import data

    extent_map_kept(at, monkeypatch, data, "-od_extent_map")


def test_data_step_previews_the_public_areas_on_an_offline_map(at: AppTest) -> None:
    """Issue 17: the Data step previews the public extent with context: the demo's boundaries and the
    areas' public centres, no trips."""
    maps = [json.loads(el.proto.spec) for el in at.get("plotly_chart") if el.proto.id.endswith("-od_extent_map")]
    assert len(maps) == 1
    spec = maps[0]
    assert spec["layout"]["map"]["style"] == "white-bg"
    m = at.session_state["od_model"]
    lon = spec["data"][0]["lon"]  # plotly sends arrays as base64 binary
    n = len(base64.b64decode(lon["bdata"])) // 8 if isinstance(lon, dict) else len(lon)
    assert n == m["h"].sizes[-1]  # one public centre per finest area
    layers = spec["layout"]["map"]["layers"]
    assert 1 <= len(layers) <= 2 and all(lay["type"] == "line" for lay in layers)


def test_table_names_are_explained_with_the_datas_own_levels_and_the_formula_is_behind_an_expander(
        at: AppTest) -> None:
    """The plan's caption names a table of this geography ("States to counties"), not the demo's
    ("Regions to districts"); the method's formula is in "How the expected error is computed"."""
    to_upload(at)
    upload(at, trips_csv())
    at.radio(key="_w_od_set_areas_shape").set_value("prefix").run()
    at.text_input(key="_w_od_set_areas_lengths").set_value("1,2,4").run()
    at.text_input(key="_w_od_set_areas_names").set_value("state,county,tract").run()
    ok(at)
    for name in ("plan", "release"):
        step(at, name)
        if name == "release":
            release(at)
        captions = texts(at.caption)
        assert "'States to counties' is the table of flows from each state (origin) to each county" in captions
        assert "release.csv names it state>county" in captions
        assert "Regions to districts" not in captions
        assert "V = σ²" not in captions  # the formula is not in the captions ...
        [how] = [e for e in at.expander if e.label == "How the expected error is computed"]
        assert "TopDown recursion" in texts(how.markdown)  # ... but behind the expander


def offered_config(at: AppTest, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    """The Export step's release.toml of a trips release (its TOML, read): it parses as a release
    description, and ``python -m dpcore run --dry-run`` on it prints the ``release od`` command line."""
    import tomllib

    from dpcore.cli import main
    from dpcore.core.spec import ReleaseSpec

    step(at, "export")
    assert any(e.label == "Repeat this release in a pipeline (config file)" for e in at.expander)
    [code] = [c for c in at.code if 'release = "od"' in c.value]
    assert ReleaseSpec.from_toml(code.value).kind == "od"
    (tmp_path / "release.toml").write_text(code.value, "utf-8")
    capsys.readouterr()
    assert main(["run", "--dry-run", str(tmp_path / "release.toml")]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("python -m dpcore release od "), line
    return tomllib.loads(code.value)


def test_a_trips_release_offers_its_release_toml(at: AppTest, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    release(at)
    cfg = offered_config(at, tmp_path, capsys)
    entry = entries(at)[-1]
    assert cfg["mechanism"]["name"] == "inftda"
    assert cfg["budget"]["rho"] == pytest.approx(entry.release.plan.cost.value) and cfg["budget"]["db"] is True
    assert cfg["domain"]["levels"] == list(entry.model["h"].level_names[1:])


def test_an_uploaded_trips_release_names_its_files_and_columns_in_release_toml(
        at: AppTest, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    to_upload(at)
    upload(at, trips_csv())
    prefix_areas(at)
    at.selectbox(key="_w_od_set_trips_person").set_value("person").run()
    at.number_input(key="_w_od_set_trips_m").set_value(2).run()
    ok(at)
    release(at)
    cfg = offered_config(at, tmp_path, capsys)
    assert cfg["input"]["path"] == "trips.csv" and cfg["domain"]["hierarchy"] == "areas.csv"
    assert (cfg["input"]["origin"], cfg["input"]["destination"]) == ("origin", "destination")
    assert cfg["input"]["user"] == "person" and cfg["input"]["max_trips"] == 2
    assert cfg["domain"]["code_column"] == "code" and cfg["domain"]["prefix_lengths"] == [1, 2, 4]
