"""Headless tests of the counts-over-areas kind, a census table with attributes (Privelet and the
marginal tables of ui/kinds/areas/), driven through app.py's steps with Streamlit's AppTest.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui.state import release_widget_key

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


def ok(at: AppTest) -> AppTest:
    assert not at.exception, at.exception
    return at


def step(at: AppTest, name: str) -> AppTest:
    at.switch_page(f"pages/{name}.py").run()
    return ok(at)


def census_data() -> AppTest:
    """The app's Data step with a census table with attributes chosen (the built-in synthetic census)."""
    at = ok(AppTest.from_file(APP, default_timeout=120).run())
    at.radio(key="_w_kind").set_value("areas").run()
    at.radio(key="_w_areas_table").set_value("census").run()
    return ok(at)


@pytest.fixture
def at() -> AppTest:
    """The Plan step of the synthetic census."""
    return step(census_data(), "plan")


def frame_with(at: AppTest, column: str):
    """The first dataframe shown with ``column`` (AppTest does not expose dataframe keys)."""
    for d in at.dataframe:
        if column in d.value.columns:
            return d.value
    raise AssertionError(f"no dataframe with a column {column!r}")


def release_button(at: AppTest):
    return at.button(key=release_widget_key("census_release_button", at.session_state))


def test_page_shows_expected_error_before_release() -> None:
    at = census_data()
    assert [t.value for t in at.title] == ["Data"]
    assert at.multiselect(key="census_levels").value == ["state", "county", "tract"]
    assert at.selectbox(key="census_count").value == "population"
    assert any("taken from the data" in w.value for w in at.warning)  # no public area list
    assert any("3 states, 12 counties, 60 tracts" in x.value for x in at.success)
    assert not at.error
    step(at, "plan")
    assert [t.value for t in at.title] == ["Plan"]
    assert any(m.value.startswith("**Use it when:**") for m in at.markdown)
    err = at.dataframe[0].value
    assert list(err["level"]) == ["total", "state", "county", "tract"]
    assert list(err["number of areas"]) == ["1", "3", "12", "60"]
    assert all(v.startswith("± ") for v in err["± 95 %"])
    assert any("Expected error of" in m.value for m in at.markdown)
    # the area check follows the chosen level
    at.selectbox(key="census_q_level").set_value("tract").run()
    ok(at)
    assert at.selectbox(key="census_q_area").value == "01 / 001 / 000100"
    # the area's half-width is Privelet's one rule, sd·ln 20/√2 (census_privelet.half_widths), not 1.96·sd
    (check,) = [m.value for m in at.markdown if "Expected error of" in m.value]
    half, sd = (float(x.replace(",", "")) for x in re.findall(r"± ([\d,.]+) people \(95 %; SD ([\d,.]+)\)", check)[0])
    assert half / sd == pytest.approx(math.log(20) / math.sqrt(2), rel=0.02), check
    step(at, "release")
    assert "Release with ε = 0.5" in release_button(at).label
    assert "census_release" not in at.session_state
    assert not at.get("download_button")
    # the sidebar shows the census table, its budget and (no) release: not the points dataset
    side = "\n".join(m.value for m in at.sidebar.markdown)
    assert "**synthetic census**" in side and "#### Privacy budget" in side and "demo" not in side.lower()
    assert any("Nothing released yet" in c.value for c in at.sidebar.caption)


def test_release_spends_once_and_reruns_do_not_redraw(at: AppTest) -> None:
    step(at, "release")
    release_button(at).click().run()
    ok(at)
    assert not at.error
    entry = at.session_state["census_release"]
    rel = entry.release
    ledgers = at.session_state["census_ledgers"]
    led = ledgers[entry.fingerprint]
    assert len(led.entries) == 1 and led.spent == pytest.approx(0.5)
    # one confirmation, the same as every kind's; Privelet's negative/fractional counts said plainly
    assert any(x.value.startswith("Released synthetic census with Privelet: 76 areas at all levels (60 finest")
               for x in at.success)
    assert any("fractional" in i.value and "below zero" in i.value for i in at.info)
    assert any("Privelet" in m.value and "76 areas at all levels" in m.value for m in at.sidebar.markdown)
    shown = at.dataframe[-1].value
    assert len(shown) == 3  # state level by default
    # the interval in the mechanism's words (census_privelet.half_widths), not ± 1.96 × SD
    assert any("ci95 = noisy_count ± sd·ln 20/√2" in c.value for c in at.caption), [c.value for c in at.caption]
    assert not any("1.96" in c.value for c in at.caption)
    assert not shown.isna().any().any()
    # reruns and view changes draw no new noise and spend nothing
    at.run()
    at.selectbox(key="census_view").set_value("tract").run()
    ok(at)
    assert at.session_state["census_release"].release.release_id == rel.release_id
    assert len(at.dataframe[-1].value) == 60
    assert len(at.session_state["census_ledgers"][entry.fingerprint].entries) == 1
    assert "0.5 left after this" not in release_button(at).label  # 0.5 spent, 0.5 left → 0 after
    assert "the budget is used up after this" in release_button(at).label
    step(at, "export")
    assert [b.label for b in at.get("download_button")] == ["Download release.csv", "Download release.json",
                                                            "Download release.toml"]


def test_overspend_is_refused_with_a_clear_message(at: AppTest) -> None:
    at.number_input(key="_w_census_epsilon").set_value(0.6).run()
    step(at, "release")
    release_button(at).click().run()
    ok(at)
    first = at.session_state["census_release"].release.release_id
    assert release_button(at).disabled
    # after the confirmation, the next release's state is a calm caption below it, not a warning (issue 26, item 6)
    assert any("more than the 0.4 left" in c.value and "Lower it on the Plan step" in c.value for c in at.caption)
    # a smaller ε fits again; raising the cap is the other way out
    step(at, "plan")
    at.number_input(key="_w_census_epsilon").set_value(0.4).run()
    step(at, "release")
    assert not release_button(at).disabled and not at.error and not at.warning
    step(at, "plan")
    at.number_input(key="_w_census_epsilon").set_value(0.6).run()
    at.number_input(key="census_cap").set_value(1.2).run()
    # raising the cap waits for the curator's confirmation
    assert at.number_input(key="census_cap").value == 1.0
    step(at, "release")
    assert release_button(at).disabled
    step(at, "plan")
    at.number_input(key="census_cap").set_value(1.2).run()
    at.button(key="census_cap__confirm").click().run()
    step(at, "release")
    assert not release_button(at).disabled and not at.error
    step(at, "plan")
    at.number_input(key="census_cap").set_value(0.5).run()  # below what was spent
    assert any("below what was already spent" in e.value for e in at.error)
    assert at.number_input(key="census_cap").value == 1.2  # the box shows the cap that holds
    entry = at.session_state["census_release"]
    # another ledger object on the same budget database (for real data: another tab or a pipeline; the
    # made-up census's budget lives in this session's own database) lowers the cap: a rerun here shows
    # it and does not write the old value back
    from dpcore.privacy import budget

    demo = at.session_state["demo_session"]
    other = demo.budget("areas", entry.fingerprint, default=budget.pure(1.0))
    demo.set_cap(other, budget.pure(0.7))
    at.number_input(key="_w_census_epsilon").set_value(0.5).run()
    at.run()
    assert other.cap.value == 0.7 and at.number_input(key="census_cap").value == 0.7
    assert entry.release.release_id == first
    led = at.session_state["census_ledgers"][entry.fingerprint]
    assert len(led.entries) == 1
    # every change of the cap is a ledger event: the raise, then the other tab's lowering
    assert [(c.old.value, c.new.value) for c in led.cap_changes] == [(1.0, 1.2), (1.2, 0.7)]


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    at.file_uploader(key="census_upload").set_value((name, data, "text/csv")).run()
    return ok(at)


GOOD = b"STATEFP,COUNTYFP,TRACTCE,POPULATION\n01,001,020100,1775\n01,001,020200,2055\n02,001,000100,990\n"


def test_upload_good_then_bad_keeps_earlier_table() -> None:
    at = census_data()
    at.radio(key="_w_census_source").set_value("upload").run()
    ok(at)
    assert any("Upload a census table" in i.value for i in at.info)
    upload(at, "tracts.csv", GOOD)
    assert not at.error
    assert at.multiselect(key="census_levels").value == ["STATEFP", "COUNTYFP", "TRACTCE"]
    assert at.selectbox(key="census_count").value == "POPULATION"
    assert list(step(at, "plan").dataframe[0].value["number of areas"]) == ["1", "2", "2", "3"]
    step(at, "data")
    upload(at, "empty.csv", b"")
    assert any("empty" in e.value for e in at.error)
    assert not at.success  # no green line above the red error
    # the earlier table is still there and still previewed
    assert list(step(at, "plan").dataframe[0].value["number of areas"]) == ["1", "2", "2", "3"]


def test_bad_counts_show_error_naming_the_fix() -> None:
    at = census_data()
    at.radio(key="_w_census_source").set_value("upload").run()
    upload(at, "neg.csv", b"state,county,population\n01,001,5\n01,003,-2\n")
    assert any("negative" in e.value and "fix" in e.value for e in at.error)
    assert not at.dataframe and not at.success  # no preview of a table that failed validation
    assert "census_release" not in at.session_state


def test_matrix_marginals_zcdp_release_once_with_exports() -> None:
    """The matrix mechanism of a census table: ρ-zCDP budget, tract × age band and age band
    tables, the optimal strategy at the lower bound, one charge for two clicks, downloads."""
    at = census_data()
    at.multiselect(key="census_ordinals").set_value(["age_band"]).run()
    step(at, "plan")
    at.radio(key="_w_census_mech").set_value("matrix").run()
    ok(at)
    fp = at.session_state["census_fp"]
    at.radio(key=f"census_def_{fp}").set_value("zcdp").run()
    ok(at)
    assert at.multiselect(key="_w_census_mx_marginals").value == ["tract × age_band", "age_band"]
    plan = frame_with(at, "table")
    assert list(plan["table"]) == ["tract × age_band", "age_band"]
    summary = frame_with(at, "value").set_index("")["value"]
    assert "closed-form" in summary["Strategy"]
    assert float(summary["Ratio to the lower bound"]) == pytest.approx(1.0, abs=1e-9)
    step(at, "release")
    assert "ρ = 0.25" in at.button(key=release_widget_key("census_mx_release_button", at.session_state)).label  # the default: half the cap ρ = 0.5
    at.button(key=release_widget_key("census_mx_release_button", at.session_state)).click().run()
    ok(at)
    led = at.session_state["census_ledgers"][fp]
    assert len(led.entries) == 1 and led.spent == pytest.approx(0.25)
    rel = at.session_state["census_mx_release"].release
    assert list(rel.tables) == ["tract × age_band", "age_band"]
    assert len(rel.tables["tract × age_band"]) == 60 * 4
    step(at, "export")
    assert [b.label for b in at.get("download_button")] == ["Download marginals.csv", "Download release.json",
                                                            "Download release.toml"]
    at.run()  # a rerun neither spends nor redraws
    ok(at)
    assert len(led.entries) == 1
    assert at.session_state["census_mx_release"].release.release_id == rel.release_id
    # the definition is now fixed for this dataset
    step(at, "plan")
    assert at.radio(key=f"census_def_{fp}").disabled


def test_matrix_pure_plan_shows_one_half_width_per_table() -> None:
    """Under pure ε (the default) the tract × age band table is answered by the identity strategy, each
    cell one discrete Laplace draw published ``± k``: the sentence and the plan table's "± 95 %" column
    show the same k (the column was 1.96 × the largest SD: ± 5.49 beside the sentence's ± 6); the age band
    table, each cell a sum of discrete Laplace draws, states its exact ± k_m."""
    at = census_data()
    at.multiselect(key="census_ordinals").set_value(["age_band"]).run()
    step(at, "plan")
    at.radio(key="_w_census_mech").set_value("matrix").run()
    ok(at)
    (sentence,) = [m.value for m in at.markdown if "in 19 of 20 cases" in m.value]
    plan = frame_with(at, "table").set_index("table")
    first = plan.index[0]
    assert first == "tract × age_band", plan
    assert f"± {sentence.split('± ')[1].split(' people')[0]}" == plan.loc[first, "± 95 %"], (sentence, plan)
    # released: the shown table's caption states its rule, ± k for the single-draw table, 1.96 elsewhere
    step(at, "release")
    at.button(key=release_widget_key("census_mx_release_button", at.session_state)).click().run()
    ok(at)
    k = at.session_state["census_mx_release"].release.plan.exact_half[0]
    assert k is not None
    half = (frame_with(at, "ci95_high")["ci95_high"] - frame_with(at, "ci95_high")["noisy_count"]).abs()
    assert half.round(1).eq(round(k, 1)).all()
    assert any(f"ci95 = noisy_count ± {int(k)} (the exact 95 % quantile" in c.value for c in at.caption)
    # the age band table sums m = (tracts) cells: ± k_m, the exact quantile of that sum (h-msum, was ± 1.96·se)
    at.selectbox(key="census_mx_view").set_value("age_band").run()
    ok(at)
    inner = at.session_state["census_mx_release"].release.plan
    m, k2 = inner.n_draws(1), inner.exact_half[1]
    assert m > 1 and k2 is not None
    assert any(f"ci95 = noisy_count ± {int(k2)} (the exact 95 % quantile of the sum of {m} discrete Laplace draws"
               in c.value for c in at.caption)


def test_matrix_without_attributes_says_what_to_choose(at: AppTest) -> None:
    at.radio(key="_w_census_mech").set_value("matrix").run()
    ok(at)
    assert any("choose at least one ordinal attribute" in i.value for i in at.info)
    assert at.multiselect(key="_w_census_mx_marginals").value == ["tract"]


def test_a_large_upload_is_summed_by_duckdb(monkeypatch: pytest.MonkeyPatch) -> None:
    """Above the engine threshold DuckDB sums the file per area; the table equals the in-memory one,
    and the budget key is the in-memory table's (its used columns' content, not the file's bytes)."""
    import numpy as np
    import pandas as pd

    from dpcore.areas import census_tables

    monkeypatch.setenv("DPCORE_AUTO_ENGINE_BYTES", "50")
    at = census_data()
    at.radio(key="_w_census_source").set_value("upload").run()
    upload(at, "tracts.csv", GOOD)
    assert at.session_state["census_src"] is not None
    assert not at.error, [e.value for e in at.error]
    table = at.session_state["census_table"]
    import io as _io

    ref = census_tables.CensusTable.from_frame(pd.read_csv(_io.BytesIO(GOOD), dtype=str), ["STATEFP", "COUNTYFP", "TRACTCE"],
                                        "POPULATION")
    assert np.array_equal(table.counts, ref.counts)
    assert list(step(at, "plan").dataframe[0].value["number of areas"]) == ["1", "2", "2", "3"]
    step(at, "data")
    # the budget key is the table's content key, as if it had been read in memory
    key = census_tables.fingerprint(pd.read_csv(_io.BytesIO(GOOD), dtype=str), ["STATEFP", "COUNTYFP", "TRACTCE"],
                                    "POPULATION")
    assert at.session_state["census_fp"] == key and key in at.session_state["census_ledgers"]
    ledgers = list(at.session_state["census_ledgers"])
    # the same rows below the threshold (read in memory, CRLF line ends) find that budget
    monkeypatch.setenv("DPCORE_AUTO_ENGINE_BYTES", "10000000")
    upload(at, "tracts_small.csv", GOOD.replace(b"\n", b"\r\n"))
    assert at.session_state["census_src"] is None and not at.error
    assert at.session_state["census_fp"] == key and list(at.session_state["census_ledgers"]) == ledgers


def test_ordinal_values_come_from_a_typed_public_list() -> None:
    """An ordinal attribute's values are not taken from the data: the page waits for the public
    list, refuses a data value outside it, releases a value nobody has, and the record says
    where the values came from (issue 18, item 2)."""
    import json

    rows = "".join(f"0{s},00{c},{band}\n" for s in (1, 2) for c in (1, 3) for band in ("0-17", "18-64", "18-64"))
    at = census_data()
    at.radio(key="_w_census_source").set_value("upload").run()
    upload(at, "people.csv", ("state,county,age\n" + rows).encode())
    at.multiselect(key="census_levels").set_value(["state", "county"]).run()
    at.multiselect(key="census_ordinals").set_value(["age"]).run()
    ok(at)
    assert any("Type the public values of 'age'" in i.value for i in at.info)
    assert at.session_state["census_table"].structure.ordinals == ()  # nothing is built from the data's values
    at.text_input(key="census_order_age").set_value("0-17|65+").run()  # 18-64 is missing from the list
    ok(at)
    assert any("'18-64'" in e.value and "not in its public list of values" in e.value for e in at.error)
    assert at.session_state["census_table"].structure.ordinals == ()
    at.text_input(key="census_order_age").set_value("0-17 | 18-64 | 65+").run()
    ok(at)
    assert not at.error
    step(at, "release")
    release_button(at).click().run()
    ok(at)
    entry = at.session_state["census_release"]
    rec = json.loads(entry.json)
    [axis] = [a for a in rec["params"]["axes"] if a["name"] == "age"]
    assert axis["bins"] == ["0-17", "18-64", "65+"]  # 65+ has nobody and is released all the same
    assert axis["bins_source"] == "a public list typed by the curator"
    assert "age=65+" in entry.csv.decode().splitlines()[0]
    # the matrix mechanism's record says it too
    step(at, "plan")
    at.radio(key="_w_census_mech").set_value("matrix").run()
    step(at, "release")
    at.button(key=release_widget_key("census_mx_release_button", at.session_state)).click().run()
    ok(at)
    mx = json.loads(at.session_state["census_mx_release"].json)
    assert mx["table"]["bins_source"] == {"age": "a public list typed by the curator"}


def test_an_upload_above_the_size_limit_is_refused_before_reading(monkeypatch) -> None:
    monkeypatch.setenv("DPCORE_MAX_TABLE_BYTES", "50")
    at = census_data()
    at.radio(key="_w_census_source").set_value("upload").run()
    upload(at, "tracts.csv", GOOD)
    assert any("DPCORE_MAX_TABLE_BYTES" in e.value and "'tracts.csv'" in e.value for e in at.error)
    assert "census_upload_df" not in at.session_state or at.session_state["census_upload_df"] is None


def offered_config(at: AppTest, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    """The Export step's release.toml of a ``kind`` release (its TOML, read): it parses as a release
    description, and ``python -m dpcore run --dry-run`` on it prints the ``release <kind>`` command line."""
    import tomllib

    from dpcore.cli import main
    from dpcore.core.spec import ReleaseSpec

    [code] = [c for c in at.code if f'release = "{kind}"' in c.value]
    assert ReleaseSpec.from_toml(code.value).kind == kind
    (tmp_path / "release.toml").write_text(code.value, "utf-8")
    capsys.readouterr()
    assert main(["run", "--dry-run", str(tmp_path / "release.toml")]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"python -m dpcore release {kind} "), line
    return tomllib.loads(code.value)


def test_a_privelet_release_offers_its_release_toml(at: AppTest, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    step(at, "release")
    release_button(at).click().run()
    ok(at)
    step(at, "export")
    assert any(e.label == "Repeat this release in a pipeline (config file)" for e in at.expander)
    cfg = offered_config(at, "census", tmp_path, capsys)
    assert cfg["mechanism"]["name"] == "privelet"
    assert cfg["input"]["levels"] == ["state", "county", "tract"] and cfg["input"]["count"] == "population"
    assert cfg["budget"]["epsilon"] == pytest.approx(0.5) and cfg["budget"]["db"] is True


def test_a_marginals_release_offers_its_release_toml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    at = census_data()
    at.multiselect(key="census_ordinals").set_value(["age_band"]).run()
    step(at, "plan")
    at.radio(key="_w_census_mech").set_value("matrix").run()
    ok(at)
    step(at, "release")
    at.button(key=release_widget_key("census_mx_release_button", at.session_state)).click().run()
    ok(at)
    step(at, "export")
    cfg = offered_config(at, "census", tmp_path, capsys)
    assert cfg["mechanism"]["name"] == "matrix" and cfg["mechanism"]["marginals"] == "tract*age_band;age_band"
    assert cfg["input"]["ordinal"] == ["age_band"] and cfg["input"]["ordinal_order"]["age_band"]
