"""Headless tests of the Census hierarchy page (ui/kinds/areas/hierarchy_page.py) with AppTest."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dpcore.areas.hierarchy import Hierarchy

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "ui" / "kinds" / "areas" / "hierarchy_page.py"

WRAPPER = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from ui import state
state.init()
exec(compile(open({str(PAGE)!r}, encoding="utf-8").read(), {str(PAGE)!r}, "exec"))
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


def test_demo_shows_levels_and_expected_error_before_release(at: AppTest) -> None:
    assert [t.value for t in at.title] == ["Census hierarchy"]
    assert any("4 region, 36 district, 576 zone" in s.value for s in at.success)
    plan = frame_with(at, "budget")
    assert list(plan["level"]) == ["total", "region", "district", "zone"]
    assert all(v.startswith("ε = ") for v in plan["budget"])  # add/remove: every level measured
    assert "Release with ε = 0.5" in at.button(key="hier_release_button").label
    assert "hier_release" not in at.session_state
    # the replace-one model makes the total public: the root is no longer measured
    at.radio(key="_w_hier_neighbour").set_value("replace").run()
    ok(at)
    plan = frame_with(at, "budget")
    assert plan["budget"].iloc[0] == "not measured"


def test_release_is_consistent_charged_once_and_kept_across_reruns(at: AppTest) -> None:
    at.selectbox(key="_w_hier_mech").set_value("exact").run()
    at.button(key="hier_release_button").click().run()
    ok(at)
    entry = at.session_state["hier_release"]
    rel = entry["release"]
    led = next(iter(at.session_state["census_ledgers"].values()))
    assert len(led.entries) == 1 and led.spent == pytest.approx(0.5)
    h: Hierarchy = rel.hierarchy
    for d in range(h.depth):
        sums = np.zeros(h.sizes[d], dtype=np.int64)
        np.add.at(sums, h.parents[d], rel.values[d + 1])
        assert np.array_equal(sums, rel.values[d])
    assert all((v >= 0).all() and v.dtype.kind == "i" for v in rel.values)
    first = [v.copy() for v in rel.values]
    at.run()  # a rerun draws no new noise
    ok(at)
    assert all(np.array_equal(a, b) for a, b in zip(first, at.session_state["hier_release"]["release"].values,
                                                    strict=True))
    assert len(led.entries) == 1
    # curator-only empirical errors appear with a warning; the map and the exports exist
    emp = frame_with(at, "empty areas released > 0")
    assert list(emp["level"]) == ["total", "region", "district", "zone"]
    assert any("Do not publish" in w.value for w in at.warning)
    assert at.get("plotly_chart")
    ex = at.session_state["hier_release"]["exports"]
    csv = pd.read_csv(__import__("io").BytesIO(ex["csv"]), dtype=str)
    assert list(csv.columns) == ["level", "code", "parent", "noisy_count"]
    assert len(csv) == 1 + 4 + 36 + 576
    rec = json.loads(ex["json"])
    assert rec["hierarchy"]["area_list_source"] == "table (confirmed public)"
    assert rec["budget"]["ledger"]["entries"][0]["cost"]["value"] == pytest.approx(0.5)
    assert set(ex["geojson"]) == {"region", "district", "zone"}


def test_budget_refusal_and_switching_source_keep_the_release(at: AppTest) -> None:
    at.number_input(key="_w_hier_value_pure").set_value(0.8).run()
    at.button(key="hier_release_button").click().run()
    ok(at)
    rel_id = at.session_state["hier_release"]["release"].release_id
    button = at.button(key="hier_release_button")
    assert button.disabled  # 0.8 + 0.8 > cap 1.0
    assert any("Not enough budget" in e.value for e in at.error)
    # switching to an upload (nothing uploaded yet) says what to do and keeps the earlier release
    at.radio(key="_w_hier_source").set_value("upload").run()
    ok(at)
    assert any("Upload a table" in i.value for i in at.info)
    assert at.session_state["hier_release"]["release"].release_id == rel_id


def test_drill_down_restricts_the_map_to_one_parent(at: AppTest) -> None:
    at.button(key="hier_release_button").click().run()
    at.selectbox(key="_w_hier_map_level").set_value("zone").run()
    ok(at)
    at.selectbox(key="hier_drill_3").set_value(0).run()
    ok(at)
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert len(fig["data"][0]["geojson"]["features"]) == 16  # the 16 zones of district 0


def test_matrix_mechanism_with_uploaded_area_sets(at: AppTest) -> None:
    """The matrix mechanism: zCDP, level importance, an uploaded query file (bad, then good),
    the data-free summary, one charge, and area_queries.csv among the downloads."""
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
    at.button(key="hier_release_button").click().run()
    ok(at)
    rel = at.session_state["hier_release"]["release"]
    assert rel.plan.mechanism == "matrix" and rel.consistent
    led = at.session_state["census_ledgers"][fp]
    assert len(led.entries) == 1 and led.definition == "zcdp"
    labels = [b.label for b in at.get("download_button")]
    assert "Download area_queries.csv" in labels
    ex = at.session_state["hier_release"]["exports"]
    assert b"North" in ex["sets"] and b"area_queries.csv" in ex["json"]


def test_a_large_table_upload_is_summed_by_duckdb(monkeypatch) -> None:
    """Above the engine threshold the table stays in a file DuckDB sums per area; the counts equal
    the in-memory ones."""
    import numpy as np
    import pandas as pd

    from dpcore.areas.hierarchy import Hierarchy, HierarchyCounts

    monkeypatch.setenv("DPCORE_AUTO_ENGINE_BYTES", "100")
    rng = np.random.default_rng(1)
    rows = [(s, f"{c:03d}", f"{t:06d}", int(rng.integers(0, 50))) for s in ("01", "02") for c in (1, 3)
            for t in (100, 200, 300)]
    df = pd.DataFrame(rows, columns=["state", "county", "tract", "population"])
    data = df.to_csv(index=False).encode()
    at = AppTest.from_string(WRAPPER, default_timeout=180).run()
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
    at = AppTest.from_string(WRAPPER, default_timeout=180).run()
    at.radio(key="_w_hier_source").set_value("upload").run()
    at.file_uploader(key="hier_upload").set_value(("tracts.csv", (tmp_path / "tracts.csv").read_bytes(),
                                                   "text/csv")).run()
    at.radio(key="_w_hier_area_source").set_value("table").run()
    assert not at.exception, at.exception
    at.button(key="hier_release_button").click().run()
    assert not at.exception, at.exception
    [code] = [c for c in at.code if 'release = "hierarchy"' in c.value]
    cfg = tomllib.loads(code.value)
    assert cfg["input"]["path"] == "tracts.csv" and cfg["input"]["levels"] == ["state", "county", "tract"]
    assert cfg["input"]["input_lists_all_areas"] is True and cfg["budget"]["db"] is True
    (tmp_path / "release.toml").write_text(code.value, "utf-8")
    assert main(["run", str(tmp_path / "release.toml")]) == 0
    fp = at.session_state["hier_release"]["fp"]
    led = Session().budget("census", fp, default=budget.pure(1.0))
    eps = cfg["budget"]["epsilon"]
    assert len(led.entries) == 2 and abs(led.spent - 2 * eps) < 1e-12


def test_person_rows_cannot_serve_as_their_own_area_list() -> None:
    """One row per person has no row for an empty area: confirming that such a table "lists every
    area" is refused (the rule the CLI applies, dpcore.areas.hierarchy.require_public_area_list), and
    the message names the fix; with an uploaded public area list the same rows are accepted."""
    people = pd.DataFrame({"state": ["01", "01", "02"], "county": ["001", "003", "001"], "age": [30, 41, 52]})
    areas = pd.DataFrame({"state": ["01", "01", "02", "02"], "county": ["001", "003", "001", "005"]})
    at = AppTest.from_string(WRAPPER, default_timeout=180).run()
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
    assert "hier_release_button" not in [b.key for b in at.button]
    at.radio(key="_w_hier_area_source").set_value("upload").run()
    at.file_uploader(key="hier_areas_upload").set_value(("areas.csv", areas.to_csv(index=False).encode(),
                                                         "text/csv")).run()
    ok(at)
    assert not at.error
    model = at.session_state["hier_model"]
    assert model["h"].sizes == [1, 2, 4] and model["h"].source == "area list"
