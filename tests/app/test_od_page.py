"""Headless tests of the O/D flows page (app_pages/od.py) with AppTest."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dpcore import budget, od_export
from dpcore.errors import BudgetError
from dpcore.pipeline import release_od

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "app_pages" / "od.py"
SHARED = Path(os.environ.get("DPCORE_SHARED_DATA", ROOT.parent / "shared" / "data"))

# the page runs as it does under st.navigation: as a script whose __file__ is the page
WRAPPER = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
exec(compile(open({str(PAGE)!r}, encoding="utf-8").read(), {str(PAGE)!r}, "exec"),
     {{"__file__": {str(PAGE)!r}, "__name__": "__main__"}})
"""


def ok(at: AppTest) -> AppTest:
    assert not at.exception, at.exception
    return at


@pytest.fixture
def at() -> AppTest:
    app = AppTest.from_string(WRAPPER, default_timeout=180)
    app.run()
    return ok(app)


def frame_with(at: AppTest, column: str) -> pd.DataFrame:
    """The first dataframe shown with ``column`` (AppTest does not expose dataframe keys)."""
    for d in at.dataframe:
        if column in d.value.columns:
            return d.value
    raise AssertionError(f"no dataframe with a column {column!r}")


def figures(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def release(at: AppTest) -> AppTest:
    at.button(key="od_release_button").click().run()
    return ok(at)


def ledger(at: AppTest):
    (led,) = at.session_state["od_ledgers"].values()
    return led


def test_demo_loads_and_shows_the_plan_before_release(at: AppTest) -> None:
    assert [t.value for t in at.title] == ["O/D flows"]
    assert any("4 region, 36 district, 576 zone" in s.value for s in at.success)
    assert any("for you only, never exported" in m.value for m in at.markdown)
    assert [m.value for m in at.metric][:2] == ["60,000", "28,377"]  # trips, observed pairs (curator only)
    plan = frame_with(at, "σ per node")
    assert list(plan["level"]) == ["total", "total>region", "region", "region>district", "district",
                                   "district>zone", "zone"]
    assert plan["measured"].iloc[0] == "public"  # bounded, one trip per person: the total is exact
    # spec §5.3: ε = 1, δ = 1e-8 by the paper's conversion is ρ = 0.0132; T = 6 gives σ = 21.3
    assert set(plan["σ per node"].iloc[1:]) == {"21.3"}
    assert plan["unreliable below"].iloc[-1] == "42.6"
    assert at.button(key="od_release_button").label.startswith("Release with ρ = 0.013 (ε = 1, δ = 1e-08)")
    assert not at.session_state["od_releases"]
    assert ledger(at).spent == 0
    assert any("Nothing released yet" in i.value for i in at.info)
    # the tighter conversion gives more ρ for the same (ε, δ): less noise, still nothing spent
    at.radio(key="_w_od_conversion").set_value("cks").run()
    ok(at)
    assert float(frame_with(at, "σ per node")["σ per node"].iloc[-1]) < 21.3
    # unbounded neighbours: the total is measured too
    at.radio(key="_w_od_neighbour").set_value("unbounded").run()
    ok(at)
    assert frame_with(at, "σ per node")["measured"].iloc[0] == "yes"
    assert ledger(at).spent == 0


def test_release_spends_once_and_fills_map_errors_and_export(at: AppTest) -> None:
    release(at)
    led = ledger(at)
    (entry,) = at.session_state["od_releases"].values()
    rel = entry["release"]
    assert len(led.entries) == 1 and led.spent == pytest.approx(rel.plan.cost.value)
    assert rel.consistent and rel.total(0) == 60_000
    first = rel.release_id
    at.run()  # a rerun draws no new noise and spends nothing
    ok(at)
    (entry,) = at.session_state["od_releases"].values()
    assert entry["release"].release_id == first and len(led.entries) == 1
    # map: the default level is the finest intra-level table with at most 300 areas a side
    # (36 districts), drawn offline, with its O/D matrix beside it
    level = at.selectbox(key=f"_w_od_map_level_{entry['fp']}")  # remembered per data set
    assert level.value == 4
    figs = figures(at)
    assert sorted(f["data"][0]["type"] for f in figs) == ["heatmap", "scattermap"]
    fig = next(f for f in figs if f["data"][0]["type"] == "scattermap")
    assert fig["layout"]["map"]["style"] == "white-bg"
    assert {tr["type"] for tr in fig["data"]} == {"scattermap"}
    assert any("unreliable" in i.value for i in at.info)
    # the 576 zones are too many for a matrix: the map only
    level.set_value(6).run()
    ok(at)
    assert [f["data"][0]["type"] for f in figures(at)] == ["scattermap"]
    # errors: analytic for everyone, empirical for the curator under a warning
    emp = frame_with(at, "FDR")
    assert list(emp["level"])[-1] == "zone"
    assert any("Do not publish" in w.value for w in at.warning)
    # export: three downloads; the files hold the release only
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["Download release.csv", "Download release.json", "Download flows.geojson"]
    ex = entry["exports"]
    csv = pd.read_csv(io.BytesIO(ex["csv"]), dtype={"noisy_count": int})
    assert list(csv.columns) == ["level", "origin", "destination", "noisy_count"]
    assert (csv["noisy_count"] > 0).all()
    rec = json.loads(ex["json"])
    od_export.validate_od_record(rec)
    assert rec["outputs"]["files"] == ["release.csv", "flows.geojson", "release.json"]
    assert rec["ledger"]["entries"][0]["cost"]["value"] == pytest.approx(led.spent)
    assert rec["extra"]["budget_input"]["conversion"] == "classic"
    # every area has a position; the total (level 1: total → region) has none
    assert ex["geojson_n"] == sum(v.size for v in rel.values[2:])


def test_an_exhausted_budget_is_refused(at: AppTest) -> None:
    at.number_input(key="_w_od_eps").set_value(1.5).run()  # ρ ≈ 0.029 of the cap 0.05
    release(at)
    led = ledger(at)
    assert len(led.entries) == 1
    button = at.button(key="od_release_button")
    assert button.disabled
    assert any("Not enough budget" in e.value for e in at.error)
    # the same refusal one level down, should the button be bypassed: nothing is spent
    counts = at.session_state["od_model"]["counts"]
    with pytest.raises(BudgetError, match="cap"):
        release_od(counts, "inftda", budget.zcdp(0.029), led)
    assert len(led.entries) == 1
    # the cap can be raised by the curator (policy permitting); then the button works again
    fp = next(iter(at.session_state["od_ledgers"]))
    at.number_input(key=f"od_cap_{fp}_zcdp").set_value(0.1).run()
    ok(at)
    assert not at.button(key="od_release_button").disabled
    # the definition is locked once budget is spent under it
    at.radio(key="_w_od_definition").set_value("pure").run()
    ok(at)
    assert at.radio(key="_w_od_definition").value == "approx"
    assert led.definition == "zcdp"


AREAS = "code,lon,lat\n" + "\n".join(
    f"{a}{b}{c:02d},{10 + a + 0.1 * c:.2f},{50 + b + 0.05 * c:.2f}"
    for a in (1, 2) for b in (1, 2, 3) for c in (1, 2, 3, 4)) + "\n"


def trips_csv(bad: bool = False) -> bytes:
    rng = np.random.default_rng(5)
    codes = [ln.split(",")[0] for ln in AREAS.splitlines()[1:]]
    rows = ["person,origin,destination"]
    for i in range(400):
        o, d = rng.choice(codes, 2)
        rows.append(f"p{i % 150},{o},{d}")
    if bad:
        rows.append("p1,9999,1101")
    return ("\n".join(rows) + "\n").encode()


def upload(at: AppTest, trips: bytes, areas: bytes | None = AREAS.encode()) -> AppTest:
    at.file_uploader(key="od_upload").set_value(("trips.csv", trips, "text/csv")).run()
    ok(at)
    if areas is not None:
        at.file_uploader(key="od_areas_upload").set_value(("areas.csv", areas, "text/csv")).run()
        ok(at)
    return at


def test_upload_with_person_cap_and_prefix_codes(at: AppTest) -> None:
    at.radio(key="_w_od_source").set_value("upload").run()
    ok(at)
    assert any("public geography" in i.value for i in at.info)
    upload(at, trips_csv())
    at.radio(key="od_w_areas_shape").set_value("prefix").run()
    at.text_input(key="od_w_areas_lengths").set_value("1,2,4").run()
    at.text_input(key="od_w_areas_names").set_value("region,district,zone").run()
    at.selectbox(key="od_w_trips_person").set_value("person").run()
    at.number_input(key="od_w_trips_m").set_value(2).run()
    ok(at)
    assert any("2 region, 6 district, 24 zone" in s.value for s in at.success), [e.value for e in at.error]
    c = at.session_state["od_model"]["counts"]
    assert c.max_trips == 2 and c.total == 150 * 2 and c.dropped_trips == 100
    assert any("at most 2 trips" in cap.value for cap in at.caption)
    plan = frame_with(at, "σ per node")
    assert plan["measured"].iloc[0] == "yes"  # with m > 1 the total is not invariant: it is noised
    release(at)
    (entry,) = at.session_state["od_releases"].values()
    assert entry["release"].plan.max_trips == 2
    assert figures(at)  # positions from the area list's lon/lat columns


def test_bad_uploads_show_errors_and_keep_the_earlier_release(at: AppTest) -> None:
    release(at)
    (fp_demo,) = at.session_state["od_releases"]
    rel_id = at.session_state["od_releases"][fp_demo]["release"].release_id
    at.radio(key="_w_od_source").set_value("upload").run()
    ok(at)
    # a file that is not a table
    at.file_uploader(key="od_upload").set_value(("trips.csv", b"\x89PNG\r\n\x1a\n" + bytes(200), "text/csv")).run()
    ok(at)
    assert at.error, "an unreadable file must be reported"
    # trips whose codes are not in the public area list
    upload(at, trips_csv(bad=True))
    at.radio(key="od_w_areas_shape").set_value("prefix").run()
    at.text_input(key="od_w_areas_lengths").set_value("1,2,4").run()
    ok(at)
    msgs = " ".join(e.value for e in at.error)
    assert "not a finest area" in msgs and "9999" in msgs
    assert any("Load O/D data on the Data tab first" in i.value for i in at.info)
    assert at.session_state["od_releases"][fp_demo]["release"].release_id == rel_id
    # the demo comes back with its release and its ledger
    at.radio(key="_w_od_source").set_value("demo").run()
    ok(at)
    assert figures(at)
    assert len(at.session_state["od_ledgers"][fp_demo].entries) == 1


@pytest.mark.skipif(not (SHARED / "od" / "nyc_green_taxi_trips_2020-04.csv.gz").exists(),
                    reason="shared/data is not available")
def test_nyc_taxi_trips(at: AppTest) -> None:
    at.radio(key="_w_od_source").set_value("nyc").run()
    ok(at)
    assert any("7 borough, 265 zone" in s.value for s in at.success)
    assert at.session_state["od_model"]["counts"].total == 35_612
    release(at)
    types = sorted(f["data"][0]["type"] for f in figures(at))
    assert types == ["heatmap", "scattermap"]  # 265 zones a side: the matrix is shown too
    (entry,) = at.session_state["od_releases"].values()
    assert entry["release"].total(0) == 35_612  # bounded, one trip each: the total is public


def test_sidebar_through_the_app() -> None:
    app = AppTest.from_file("../../app.py", default_timeout=180)
    app.run()
    app.switch_page("app_pages/od.py").run()
    ok(app)
    side = "\n".join([m.value for m in app.sidebar.markdown] + [c.value for c in app.sidebar.caption])
    assert "O/D demo (made up)" in side and "60,000 trips, 28,377 observed pairs" in side
    assert "Nothing released yet." in side
    app.button(key="od_release_button").click().run()
    ok(app)
    side = "\n".join([m.value for m in app.sidebar.markdown] + [c.value for c in app.sidebar.caption])
    assert "InfTDA" in side and "finest flows released" in side
    assert any("spent ρ = 0.013 of 0.05" in p.proto.text for p in app.sidebar.get("progress"))


def test_a_refused_plan_explains_itself_and_keeps_the_release(at: AppTest) -> None:
    release(at)
    (entry,) = at.session_state["od_releases"].values()
    # the MILP baseline would need too many solver calls on the demo's 576 zones: refused before any spending
    at.selectbox(key="_w_od_mech").set_value("tda_linf_milp").run()
    ok(at)
    assert any("solver calls" in e.value for e in at.error)
    assert at.button(key="od_release_button").disabled
    assert len(ledger(at).entries) == 1
    assert figures(at) and at.session_state["od_releases"][entry["fp"]]["release"] is entry["release"]
    assert not [o for o in at.selectbox(key="_w_od_mech").options if "Stability" in o]  # (ε, δ): not offered
    assert any("MILP" in o for o in at.selectbox(key="_w_od_mech").options)
