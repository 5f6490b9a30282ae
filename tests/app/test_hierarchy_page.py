"""Headless tests of the counts-over-areas kind, a hierarchy of areas (ui/kinds/areas/), through app.py's steps."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from app_steps import extent_map_kept, next_release_after_results
from streamlit.testing.v1 import AppTest

from dpcore.data.hierarchy import Hierarchy
from ui.state import release_widget_key

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


def ok(at: AppTest) -> AppTest:
    assert not at.exception, at.exception
    return at


def areas() -> AppTest:
    """The app on the Data step with the kind "counts over areas" (a hierarchy of areas) chosen."""
    app = ok(AppTest.from_file(APP, default_timeout=180).run())
    app.radio(key="_w_kind").set_value("areas").run()
    return ok(app)


def step(at: AppTest, name: str) -> AppTest:
    at.switch_page(f"pages/{name}.py").run()
    return ok(at)


def release(at: AppTest) -> AppTest:
    step(at, "release")
    at.button(key=release_widget_key("hier_release_button", at.session_state)).click().run()
    return ok(at)


@pytest.fixture
def at() -> AppTest:
    return areas()


def texts(elements) -> str:
    return "\n".join(e.value for e in elements)


def frame_with(at: AppTest, column: str) -> pd.DataFrame:
    """The first dataframe shown with ``column`` (AppTest does not expose dataframe keys)."""
    for d in at.dataframe:
        if column in d.value.columns:
            return d.value
    raise AssertionError(f"no dataframe with a column {column!r}")


def test_demo_shows_levels_and_expected_error_before_release(at: AppTest) -> None:
    assert [t.value for t in at.title] == ["Data"]
    assert any("4 regions, 36 districts, 576 zones" in s.value for s in at.success)  # pluralised
    step(at, "plan")
    plan = frame_with(at, "budget")
    assert list(plan["level"]) == ["total", "region", "district", "zone"]
    assert all(v.startswith("ε = ") for v in plan["budget"])  # add/remove: every level measured
    assert any(m.value.startswith("**Use it when:**") for m in at.markdown)  # one plain line first
    assert not any("recursion" in m.value or "§" in m.value for m in at.markdown)  # formulas behind the expander
    step(at, "release")
    assert "Release with ε = 0.5" in at.button(key=release_widget_key("hier_release_button", at.session_state)).label
    assert "hier_release" not in at.session_state
    step(at, "plan")
    # the replace-one model makes the total public: the root is no longer measured
    at.radio(key="_w_hier_neighbour").set_value("replace").run()
    ok(at)
    plan = frame_with(at, "budget")
    assert plan["budget"].iloc[0] == "not measured"


def test_release_is_consistent_charged_once_and_kept_across_reruns(at: AppTest) -> None:
    step(at, "plan")
    at.selectbox(key="_w_hier_mech").set_value("exact").run()
    # the curator's threshold of the record's "use at level L or coarser" line, beside the Release button
    step(at, "release")
    assert at.number_input(key="_w_cv_threshold").value == pytest.approx(0.3)  # the default, as before
    at.number_input(key="_w_cv_threshold").set_value(0.02).run()
    release(at)
    entry = at.session_state["hier_release"]
    guidance = json.loads(entry.files["release.json"])["level_guidance"]
    assert guidance["threshold"] == pytest.approx(0.02) and "under 0.02" in guidance["statement"]
    page = entry.files["review.html"].decode()  # the same line in words, the level by name
    assert (f"Use at level {guidance['use_level']} or coarser" if guidance["use_level"] is not None
            else "No level is reliable on its own") in page and "0.02" in page
    rel = entry.release
    led = next(iter(at.session_state["census_ledgers"].values()))
    assert len(led.entries) == 1 and led.spent == pytest.approx(0.5)
    # not confirmed that each person is counted once: one counted record, as release.json says (item 15)
    assert any("unit of privacy: **one counted record, " in m.value for m in at.markdown)
    next_release_after_results(at, "hier_release_button")
    assert json.loads(entry.files["release.json"])["privacy"]["unit_of_privacy"].startswith("one counted record")
    h: Hierarchy = rel.hierarchy
    for d in range(h.depth):
        sums = np.zeros(h.sizes[d], dtype=np.int64)
        np.add.at(sums, h.parents[d], rel.values[d + 1])
        assert np.array_equal(sums, rel.values[d])
    assert all((v >= 0).all() and v.dtype.kind == "i" for v in rel.values)
    first = [v.copy() for v in rel.values]
    at.run()  # a rerun draws no new noise
    ok(at)
    assert all(np.array_equal(a, b) for a, b in zip(first, at.session_state["hier_release"].release.values,
                                                    strict=True))
    assert len(led.entries) == 1
    # curator-only empirical errors appear with a warning; the map and the exports exist
    emp = frame_with(at, "empty areas released > 0")
    assert list(emp["level"]) == ["total", "region", "district", "zone"]
    assert any("Do not publish" in w.value for w in at.warning)
    assert at.get("plotly_chart")
    # the confirmation and the sidebar name the same count, labelled alike
    assert any("617 areas at all levels (576 finest areas)" in x.value for x in at.success)
    assert any("617 areas at all levels (576 finest areas)" in x.value for x in at.sidebar.markdown)
    said = next(m.value for m in at.markdown if "unit of privacy: **one counted record, " in m.value)
    unit = said.split("unit of privacy: **")[1].split("**")[0]
    step(at, "export")
    assert any("617 areas at all levels (576 finest areas)" in x.value for x in at.markdown)
    # the Export step names the unit of privacy in the Release step's words (issue 26, item 10)
    assert any(f"unit of privacy: {unit}" in x.value for x in at.markdown) and unit.startswith("one counted record")
    ex = at.session_state["hier_release"].files  # made once, with the release: the Export step serves them
    csv = pd.read_csv(__import__("io").BytesIO(ex["release.csv"]), dtype=str)
    assert list(csv.columns) == ["level", "code", "parent", "noisy_count", "noise_sd", "ci95_low", "ci95_high"]
    assert len(csv) == 1 + 4 + 36 + 576
    rec = json.loads(ex["release.json"])
    assert rec["hierarchy"]["area_list_source"] == "table (confirmed public)"
    assert rec["ledger"]["entries"][0]["cost"]["value"] == pytest.approx(0.5)
    assert {n for n in ex if n.endswith(".geojson")} == {"region.geojson", "district.geojson", "zone.geojson"}
    # the data users' and review files are offered as for every kind (issue 25): one button each, in order
    users = ["measurements.csv", "design.json", "estimates.csv", "replicates.csv", "deployment.yaml", "review.html"]
    labels = [b.proto.label for b in at.get("download_button")]
    assert [x for x in labels if x.removeprefix("Download ") in users] == [f"Download {n}" for n in users]
    assert set(users) <= set(ex) and rec["data_users"]["files"] == users[:4]
    assert any("**estimates.csv**: the unbiased least-squares estimate" in m.value for m in at.markdown)


def test_budget_refusal_and_switching_source_keep_the_release(at: AppTest) -> None:
    step(at, "plan")
    at.number_input(key="_w_hier_value_pure").set_value(0.8).run()
    release(at)
    rel_id = at.session_state["hier_release"].release.release_id
    button = at.button(key=release_widget_key("hier_release_button", at.session_state))
    assert button.disabled  # 0.8 + 0.8 > cap 1.0
    assert "Not enough budget" in button.label and any("more than the 0.2 left" in c.value for c in at.caption)
    step(at, "data")
    # switching to an upload (nothing uploaded yet) says what to do and keeps the earlier release
    at.radio(key="_w_hier_source").set_value("upload").run()
    ok(at)
    assert any("Upload a table" in i.value for i in at.info)
    assert at.session_state["hier_release"].release.release_id == rel_id


def test_drill_down_restricts_the_map_to_one_parent(at: AppTest) -> None:
    release(at)
    at.selectbox(key="_w_hier_map_level").set_value("zone").run()
    ok(at)
    at.selectbox(key="hier_drill_3").set_value(0).run()
    ok(at)
    fig = json.loads(next(c for c in at.get("plotly_chart") if '"geojson"' in c.proto.spec).proto.spec)
    assert len(fig["data"][0]["geojson"]["features"]) == 16  # the 16 zones of district 0
    assert at.selectbox(key="hier_drill_3").label == "Show the zones inside"


def test_matrix_mechanism_with_uploaded_area_sets(at: AppTest) -> None:
    """The matrix mechanism: zCDP, level importance, an uploaded query file (bad, then good),
    the data-free summary, one charge, and area_queries.csv among the downloads."""
    step(at, "plan")
    at.selectbox(key="_w_hier_mech").set_value("matrix").run()
    ok(at)
    fp = next(iter(at.session_state["census_ledgers"]))
    at.radio(key=f"hier_def_{fp}").set_value("zcdp").run()
    ok(at)
    plan = frame_with(at, "budget")
    assert set(plan["budget"]) == {"one strategy, whole budget"}
    summary = frame_with(at, "value")
    assert "Eigen-Design" in summary["value"].iloc[0]
    ratio = float(summary.set_index("")["value"]["Ratio to the lower bound"])
    assert 1.0 <= ratio < 1.001  # a hierarchy Gram: Eigen-Design reaches the bound (spec §6.1)
    # a bad query file: a clear message, nothing lost, the plan still shown
    at.file_uploader(key="hier_sets_upload").set_value(("q.csv", b"query,area\nmetro,R9\n", "text/csv")).run()
    ok(at)
    assert any("not in the hierarchy" in e.value for e in at.error)
    assert frame_with(at, "budget") is not None
    at.file_uploader(key="hier_sets_upload").set_value(
        ("q.csv", b"query,area\nNorth,R1\nNorth,R2\nDowntown,R1/D2\n", "text/csv")).run()
    ok(at)
    sets = frame_with(at, "query")
    assert list(sets["query"]) == ["North", "Downtown"]
    release(at)
    rel = at.session_state["hier_release"].release
    assert rel.plan.mechanism == "matrix" and rel.consistent
    led = at.session_state["census_ledgers"][fp]
    assert len(led.entries) == 1 and led.definition == "zcdp"
    step(at, "export")
    labels = [b.label for b in at.get("download_button")]
    assert "Download area_queries.csv" in labels
    ex = at.session_state["hier_release"].files
    assert b"North" in ex["area_queries.csv"] and b"area_queries.csv" in ex["release.json"]


def test_a_large_table_upload_is_summed_by_duckdb(monkeypatch) -> None:
    """Above the engine threshold the table stays in a file DuckDB sums per area; the counts equal
    the in-memory ones."""
    import numpy as np
    import pandas as pd

    from dpcore.areas.counts import HierarchyCounts
    from dpcore.data.hierarchy import Hierarchy

    monkeypatch.setenv("DPCORE_AUTO_ENGINE_BYTES", "100")
    rng = np.random.default_rng(1)
    rows = [(s, f"{c:03d}", f"{t:06d}", int(rng.integers(0, 50))) for s in ("01", "02") for c in (1, 3)
            for t in (100, 200, 300)]
    df = pd.DataFrame(rows, columns=["state", "county", "tract", "population"])
    data = df.to_csv(index=False).encode()
    at = areas()
    at.radio(key="_w_hier_source").set_value("upload").run()
    at.file_uploader(key="hier_upload").set_value(("tracts.csv", data, "text/csv")).run()
    assert not at.exception, at.exception
    assert at.session_state["hier_src"] is not None
    at.radio(key="_w_hier_area_source").set_value("table").run()
    assert not at.exception, at.exception
    model = at.session_state["hier_model"]
    h = Hierarchy.from_frame(df, ["state", "county", "tract"], source="table")
    ref = HierarchyCounts.from_frame(df, h, ["state", "county", "tract"], ["population"])
    assert model["h"].sizes == h.sizes
    assert np.array_equal(np.asarray(model["counts"].leaf), np.asarray(ref.leaf))
    # the budget belongs to the table (its totals per state), whatever finer levels are chosen: a new
    # choice is no fresh budget
    at.multiselect(key="w_levels").set_value(["state", "county"]).run()
    assert not at.exception, at.exception
    assert at.session_state["hier_model"]["fp"] == model["fp"]
    assert at.session_state["hier_model"]["h"].sizes != h.sizes


def test_release_config_reruns_on_the_apps_budget(tmp_path) -> None:
    """The Export tab's release.toml, run by the CLI next to the uploaded table, spends from the same
    budget as the app's release of it."""
    import tomllib

    import pandas as pd

    from dpcore.cli import main
    from dpcore.core.session import Session
    from dpcore.privacy import budget

    rng = __import__("numpy").random.default_rng(2)
    rows = [(s, f"{c:03d}", f"{t:06d}", int(rng.integers(0, 50))) for s in ("01", "02") for c in (1, 3)
            for t in (100, 200)]
    df = pd.DataFrame(rows, columns=["state", "county", "tract", "population"])
    (tmp_path / "tracts.csv").write_bytes(df.to_csv(index=False).encode())
    at = areas()
    at.radio(key="_w_hier_source").set_value("upload").run()
    at.file_uploader(key="hier_upload").set_value(("tracts.csv", (tmp_path / "tracts.csv").read_bytes(),
                                                   "text/csv")).run()
    at.radio(key="_w_hier_area_source").set_value("table").run()
    assert not at.exception, at.exception
    release(at)
    step(at, "export")
    [code] = [c for c in at.code if 'release = "hierarchy"' in c.value]
    cfg = tomllib.loads(code.value)
    assert cfg["input"]["path"] == "tracts.csv" and cfg["input"]["levels"] == ["state", "county", "tract"]
    assert cfg["input"]["input_lists_all_areas"] is True and cfg["budget"]["db"] is True
    (tmp_path / "release.toml").write_text(code.value, "utf-8")
    assert main(["run", str(tmp_path / "release.toml")]) == 0
    fp = at.session_state["hier_release"].fp
    led = Session().budget("areas", fp, default=budget.pure(1.0))
    eps = cfg["budget"]["epsilon"]
    assert len(led.entries) == 2 and abs(led.spent - 2 * eps) < 1e-12


def test_person_rows_cannot_serve_as_their_own_area_list() -> None:
    """One row per person has no row for an empty area: confirming that such a table "lists every
    area" is refused (the rule the CLI applies, dpcore.data.hierarchy.require_public_area_list), and
    the message names the fix; with an uploaded public area list the same rows are accepted."""
    people = pd.DataFrame({"state": ["01", "01", "02"], "county": ["001", "003", "001"], "age": [30, 41, 52]})
    area_list = pd.DataFrame({"state": ["01", "01", "02", "02"], "county": ["001", "003", "001", "005"]})
    at = areas()
    at.radio(key="_w_hier_source").set_value("upload").run()
    at.file_uploader(key="hier_upload").set_value(("people.csv", people.to_csv(index=False).encode(),
                                                   "text/csv")).run()
    at.multiselect(key="w_levels").set_value(["state", "county"]).run()
    at.multiselect(key="w_count").set_value([]).run()
    at.radio(key="_w_hier_area_source").set_value("table").run()
    ok(at)
    assert at.session_state["hier_model"]["name"] != "people.csv"  # the demo's model, kept; none for these rows
    [err] = [e.value for e in at.error]
    assert "one row per person" in err and "upload the public list of areas" in err
    assert not at.success  # no green line of the earlier table above the red error
    step(at, "release")  # nothing is released from these rows: the Release step offers the earlier table only
    assert any("demo geography" in m.value for m in at.markdown) and "people.csv" not in texts(at.markdown)
    step(at, "data")
    at.radio(key="_w_hier_area_source").set_value("upload").run()
    at.file_uploader(key="hier_areas_upload").set_value(("areas.csv", area_list.to_csv(index=False).encode(),
                                                         "text/csv")).run()
    ok(at)
    assert not at.error
    model = at.session_state["hier_model"]
    assert model["h"].sizes == [1, 2, 4] and model["h"].source == "area list"


def test_a_table_the_hierarchy_refuses_is_refused_before_its_budget_is_keyed(monkeypatch) -> None:
    """Keying a table's budget takes tens of seconds at 8 M rows: a table with a missing code, a
    missing level or name column, or more rows than a hierarchy takes is refused by the checks that
    need no areas built (dpcore.data.hierarchy.check_area_frame), before any key is computed."""
    from dpcore.areas import census_tables

    keyed: list[int] = []
    real = census_tables.fingerprints

    def fingerprints(df, *args, **kwargs):
        keyed.append(len(df))
        return real(df, *args, **kwargs)

    monkeypatch.setattr(census_tables, "fingerprints", fingerprints)
    table = pd.DataFrame({"state": ["01", "01", "02", "02"], "county": ["001", None, "001", "003"],
                          "pop": [5, 7, 0, 3]})
    at = areas()
    keyed.clear()  # the demo's keys
    at.radio(key="_w_hier_source").set_value("upload").run()
    at.file_uploader(key="hier_upload").set_value(("t.csv", table.to_csv(index=False).encode(), "text/csv")).run()
    at.multiselect(key="w_levels").set_value(["state", "county"]).run()
    at.multiselect(key="w_count").set_value(["pop"]).run()
    at.radio(key="_w_hier_area_source").set_value("table").run()
    ok(at)
    assert any("'county' has 1 missing code" in e.value for e in at.error), [e.value for e in at.error]
    assert keyed == []
    # the code filled in: keyed and built
    table.loc[1, "county"] = "003"
    at.file_uploader(key="hier_upload").set_value(("t.csv", table.to_csv(index=False).encode(), "text/csv")).run()
    ok(at)
    assert not at.error and keyed == [4]
    assert at.session_state["hier_model"]["h"].sizes == [1, 2, 4]


def test_a_refused_area_list_costs_no_count_of_a_large_upload(monkeypatch) -> None:
    """The area list's checks (dpcore.data.hierarchy.check_area_frame) need no counts: a list with a
    missing code is refused before DuckDB counts a large upload; the code filled in, it is counted."""
    from dpcore.data.engines.duckdb_engine import DuckDBEngine

    counted: list[int] = []
    real = DuckDBEngine.code_counts

    def code_counts(self, *args, **kwargs):
        counted.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(DuckDBEngine, "code_counts", code_counts)
    monkeypatch.setenv("DPCORE_AUTO_ENGINE_BYTES", "100")
    table = pd.DataFrame({"state": ["01", "01", "02"] * 4, "county": ["001", "003", "001"] * 4,
                          "pop": range(12)})  # over the 100 bytes: a file DuckDB counts
    area_list = pd.DataFrame({"state": ["01", "01", "02", "02"], "county": ["001", "003", None, "005"]})
    at = areas()
    at.radio(key="_w_hier_source").set_value("upload").run()
    at.file_uploader(key="hier_upload").set_value(("t.csv", table.to_csv(index=False).encode(), "text/csv")).run()
    assert at.session_state["hier_src"] is not None
    at.multiselect(key="w_levels").set_value(["state", "county"]).run()
    at.multiselect(key="w_count").set_value(["pop"]).run()
    at.radio(key="_w_hier_area_source").set_value("upload").run()
    counted.clear()
    at.file_uploader(key="hier_areas_upload").set_value(("areas.csv", area_list.to_csv(index=False).encode(),
                                                         "text/csv")).run()
    ok(at)
    assert any("'county' has 1 missing code" in e.value for e in at.error), [e.value for e in at.error]
    assert counted == []
    area_list.loc[2, "county"] = "001"
    at.file_uploader(key="hier_areas_upload").set_value(("areas.csv", area_list.to_csv(index=False).encode(),
                                                         "text/csv")).run()
    ok(at)
    assert not at.error and counted == [1]
    assert at.session_state["hier_model"]["h"].sizes == [1, 2, 4]


def test_error_bars_follow_the_hierarchy_with_axis_titles(at: AppTest) -> None:
    """The expected-error chart lists the levels top down (not alphabetically) and names its axes."""
    step(at, "plan")
    [chart] = [json.loads(c.proto.spec) for c in at.get("plotly_chart") if '"Bar"' in c.proto.spec
               or '"type":"bar"' in c.proto.spec.replace(" ", "")]
    layout = chart["layout"]
    assert layout["yaxis"]["categoryarray"] == ["total", "region", "district", "zone"]
    assert "mean absolute error" in layout["xaxis"]["title"]["text"]
    assert layout["yaxis"]["title"]["text"] == "level"
    assert all(v not in ("None", "nan") for v in frame_with(at, "budget").to_numpy().ravel().tolist())


def test_plain_words_for_level_names_and_counts() -> None:
    from ui.fmt import plural, sizes_line
    from ui.kinds.areas.common import level_label

    assert [plural(w) for w in ("region", "county", "box", "day")] == ["regions", "counties", "boxes", "days"]
    assert level_label("COUNTYFP", 3221) == "counties (COUNTYFP)" and level_label("STATEFP") == "state (STATEFP)"
    assert sizes_line(["region", "district"], [1, 36]) == "1 region, 36 districts"


@pytest.mark.skipif(not (__import__("ui.kinds.areas.common").kinds.areas.common.US_NAMES.exists()
                         and __import__("ui.kinds.areas.common").kinds.areas.common.US_TRACTS.exists()),
                    reason="the shared census lookup table is missing")
def test_us_tracts_show_state_and_county_names() -> None:
    """FIPS codes come with the names of the public lookup table: in the sizes line, the drill-down
    and the treemap."""
    at = areas()
    at.radio(key="_w_hier_source").set_value("us").run()
    ok(at)
    assert any("states (STATEFP)" in x.value and "counties (COUNTYFP)" in x.value for x in at.success)
    step(at, "plan")
    at.selectbox(key="_w_hier_mech").set_value("bottom_up").run()
    release(at)
    # the states map starts on the lower 48 and says which states are outside the view (issue 26, item 10)
    at.selectbox(key="_w_hier_map_level").set_value("STATEFP").run()
    ok(at)
    far = [c.value for c in at.caption if c.value.startswith("Outside the first view")]
    assert len(far) == 1 and "Alaska" in far[0] and "Hawaii" in far[0], far
    at.selectbox(key="_w_hier_map_level").set_value("COUNTYFP").run()
    ok(at)
    drill = at.selectbox(key="hier_drill_2")
    assert "Alabama (01)" in drill.options
    # Puerto Rico is not in the lookup table: its name comes from the public state boundaries
    assert "Puerto Rico (72)" in drill.options
    [tree] = [json.loads(c.proto.spec) for c in at.get("plotly_chart") if '"treemap"' in c.proto.spec]
    assert "California" in tree["data"][0]["labels"]  # a name, not the code 06
    # the states' counties are in the treemap, so a click on a state zooms into its counties, not into an
    # empty tile (issue 26, item 10)
    assert any(str(x).startswith("Los Angeles County") for x in tree["data"][0]["labels"])
    assert "Puerto Rico" in tree["data"][0]["labels"] and "72" not in tree["data"][0]["labels"]
    drill.set_value("Puerto Rico (72)").run()
    ok(at)
    [tree] = [json.loads(c.proto.spec) for c in at.get("plotly_chart") if '"treemap"' in c.proto.spec]
    assert any(str(x).startswith("Arecibo Municipio") for x in tree["data"][0]["labels"]), tree["data"][0]["labels"][:5]


def test_target_planner_proposes_a_budget_and_split_and_use_sets_both(at: AppTest) -> None:
    """Issue 17, item 2: "±20 people for 95 % of zones" and "±50 for 95 % of districts" on the demo;
    the proposal is the library planner's, and "Use this budget" sets the release budget and the split."""
    from dpcore import catalog
    from dpcore.areas.unit import hierarchy_unit
    from dpcore.core.target import Target, plan_for_targets
    from ui import fmt

    step(at, "plan")
    at.selectbox(key="_w_hier_mech").set_value("topdown_l2").run()
    box = at.multiselect(key="hier_target_levels")
    assert box.options == ["each zone", "total", "region", "district"]
    box.set_value(["finest", "district"]).run()
    at.number_input(key="hier_target_abs_finest").set_value(20).run()
    at.button(key="hier_target_propose").click().run()
    ok(at)
    h = at.session_state["hier_model"]["h"]
    expected = plan_for_targets(catalog.get("hierarchy", "topdown_l2"), h,
                                [Target("finest", 20), Target("district", 50)], params={"split": "uniform"},
                                unit=hierarchy_unit("add_remove"), statistic="count", k=1)
    assert expected.split == "optimised"
    proposal = [m.value for m in at.markdown if m.value.startswith("The smallest budget that meets your targets")]
    assert len(proposal) == 1 and f"targets: **ε ≈ {fmt.eps(expected.rounded)}**" in proposal[0], proposal
    assert at.button(key="hier_target_use").label == f"Use this budget (ε ≈ {fmt.eps(expected.rounded)})"
    # total and region have no target: one calm sentence says their errors were not aimed at
    assert any(c.value.startswith("Only district and each zone were targeted. The errors shown for total and region")
               for c in at.caption), [c.value for c in at.caption if "target" in c.value]
    table = frame_with(at, "your target")
    assert list(table["met"]) == ["–", "–", "yes", "yes"]
    at.button(key="hier_target_use").click().run()
    ok(at)
    assert at.session_state["hier_value_pure"] == pytest.approx(expected.rounded)
    assert at.session_state["hier_split"] == "custom"
    weights = [float(w) for w in at.session_state["hier_weights_4"].split(",")]
    np.testing.assert_allclose(np.array(weights) / sum(weights),
                               np.array(expected.params["weights"]) / sum(expected.params["weights"]), rtol=1e-5)
    # the plan shown now is the proposal's: each level's budget as proposed
    plan = frame_with(at, "budget")
    assert list(plan["budget"]) == [f"ε = {fmt.eps(lv.budget * expected.rounded / expected.total)}"
                                    for lv in expected.levels]
    step(at, "release")
    assert at.button(key="hier_release_button").label.startswith(f"Release with ε = {fmt.eps(expected.rounded)} ")


def test_the_extent_map_is_kept_across_reruns(at: AppTest, monkeypatch) -> None:
    """The Data step's extent map is made once per area list and kept in the session
    (:func:`ui.charts.kept`): a rerun asks for it again and gets the same figure."""
    from ui.kinds.areas import data

    extent_map_kept(at, monkeypatch, data, "-hier_extent_map")


def test_data_step_previews_the_public_areas_on_an_offline_map(at: AppTest) -> None:
    """Issue 17: the Data step previews the public extent with context (the demo's outlines per level)."""
    maps = [json.loads(el.proto.spec) for el in at.get("plotly_chart") if el.proto.id.endswith("-hier_extent_map")]
    assert len(maps) == 1
    spec = maps[0]
    assert spec["layout"]["map"]["style"] == "white-bg"  # offline: no tiles, no web requests
    layers = spec["layout"]["map"]["layers"]
    joins = at.session_state["hier_model"]["joins"]
    assert len(layers) == len(joins) >= 1
    assert sum(len(lay["source"]["features"]) for lay in layers) == sum(len(j.frame) for j in joins.values())
    assert all(trace.get("lon", []) == [] for trace in spec["data"])  # no counts drawn


def test_the_choropleth_colours_skewed_counts_on_a_log_scale(at: AppTest) -> None:
    """Issue 26, item 5: the area map's colours are log10 of the released counts (one large area does not
    leave the others in the first colour); the hover still shows each count itself."""
    import math

    release(at)
    fig = json.loads(next(c for c in at.get("plotly_chart") if '"geojson"' in c.proto.spec).proto.spec)
    tr = fig["data"][0]
    assert tr["colorbar"]["title"]["text"] == "people (log)"
    counts = [float(c[3]) for c in tr["customdata"]]
    top = math.log10(max(counts))
    assert tr["zmax"] == pytest.approx(top) and tr["zmin"] == pytest.approx(top - 4)
    zs = tr["z"]
    if isinstance(zs, dict):  # plotly's typed array: {"dtype": "f8", "bdata": base64}
        import base64

        import numpy as np
        zs = np.frombuffer(base64.b64decode(zs["bdata"]), dtype=zs["dtype"]).tolist()
    for z, c in zip(zs, counts, strict=True):
        assert z == pytest.approx(max(math.log10(c), top - 4) if c > 0 else top - 4, abs=1e-6)
    assert "%{customdata[3]:,.0f}" in tr["hovertemplate"]


def test_the_release_step_answers_a_union_of_areas_with_its_interval(at: AppTest) -> None:
    """Issue 25 item 4: picking areas on the Release step shows the least-squares estimate and 90 %
    interval of their union, as the library computes it from the stored files; a region and all its
    districts are the same cells, so the same answer; the record's "use at level" line is shown."""
    from dpcore.estimate.release_interval import ReleaseIntervals
    from ui.intervals import answer_line, plain_line

    release(at)
    entry = at.session_state["hier_release"]
    rid = entry.release.release_id
    ri = ReleaseIntervals(entry.files)
    design = json.loads(entry.files["design.json"])
    region = next(n for lv, n in ri.nodes() if lv == "region")
    children = [c for p, c in design["edges"] if p == region]
    box = at.multiselect(key=f"_w_interval_areas_{rid}")
    box.set_value([region]).run()
    ok(at)
    want = answer_line(ri.of_nodes([region]), "1 area")
    assert want in texts(at.markdown)
    box.set_value(children).run()
    ok(at)
    r_children = ri.of_nodes(children)
    assert r_children["cells"] == ri.of_nodes([region])["cells"]
    assert r_children["estimate"] == pytest.approx(ri.of_nodes([region])["estimate"], rel=1e-6)
    assert answer_line(r_children, f"{len(children)} areas") in texts(at.markdown)
    # led by one plain sentence (people rounded for reading); the line above sits in "How is this computed"
    assert plain_line(r_children, f"{len(children)} areas together", "people") in texts(at.markdown)
    [how] = [e for e in at.expander if e.label.startswith("How is this computed")]
    assert answer_line(r_children, f"{len(children)} areas") in texts(how.markdown)
    g = json.loads(entry.files["release.json"])["level_guidance"]
    assert any(g["statement"] in c.value for c in at.caption)


def test_the_exact_dp_shows_no_interval_where_its_release_csv_has_none(at: AppTest) -> None:
    """The demo's default mechanism (the exact tree DP) publishes no 95 % interval (its projection biases the
    values: tests/unit/areas/test_release_intervals.py): the map's caption, the Export step's preview and
    caption say so in one line, as release.csv and release.json do."""
    step(at, "plan")
    release(at)
    rel = at.session_state["hier_release"].release
    assert rel.mechanism.name == "exact" and not rel.has_intervals
    assert any("No 95 % interval is shown: Exact integer least squares" in c.value for c in at.caption)
    assert not any("its 95 % interval" in c.value for c in at.caption)
    step(at, "export")
    preview = frame_with(at, "ci95_low")
    assert (preview["ci95_low"] == "—").all() and (preview["ci95_high"] == "—").all()
    assert any(c.value.startswith("ci95_low and ci95_high are kept as columns") for c in at.caption)
    csv = pd.read_csv(__import__("io").BytesIO(at.session_state["hier_release"].files["release.csv"]))
    assert csv[["ci95_low", "ci95_high"]].isna().all().all()
