"""AppTest of points that stay in their files: a folder opened with DuckDB, a large upload routed
to DuckDB, the same budget key as an in-memory upload, and the release config the Export page
writes (which the command line then runs)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest
from test_pages import APP, goto, release

from dpcore.cli import main
from dpcore.data.domain import Grid, aggregate_points


def _points(n: int, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"lat": rng.uniform(40.57, 40.91, n), "lon": rng.uniform(-74.05, -73.71, n),
                         "person": rng.integers(0, 50, n)})


@pytest.fixture(autouse=True)
def _data_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app reads files in place only under the folder set at start-up (off by default)."""
    monkeypatch.setenv("DPCORE_DATA_ROOT", str(tmp_path.resolve()))


def _open(at: AppTest, path: Path, engine: str = "duckdb") -> AppTest:
    goto(at, "data")
    at.radio(key="_w_points_where").set_value("Files on this computer (large data)").run()
    at.text_input(key="_w_points_path").set_value(str(path)).run()
    at.selectbox(key="_w_points_engine").set_value(engine).run()
    at.button(key="open_path").click().run()
    assert not at.exception, at.exception
    assert at.session_state["path_open"] is not None, [e.value for e in at.error]
    return at


def _count(at: AppTest, user: str | None = None) -> AppTest:
    if user:
        [box] = [b for b in at.selectbox if b.label == "Person / user id column (optional)"]
        box.set_value(user)
    [btn] = [b for b in at.button if b.label.startswith("Count the points with")]
    btn.click().run()
    assert not at.exception, at.exception
    return at


def _truth(df: pd.DataFrame, at: AppTest, cap: int | None = None) -> np.ndarray:
    ss = at.session_state
    rows, cols = ss["grid_shape"]
    g = Grid(ss["bounds"], int(rows), int(cols))
    return aggregate_points(df["lon"].to_numpy(), df["lat"].to_numpy(), g,
                            user=df["person"].to_numpy() if cap else None, user_cap=cap).counts


def test_a_folder_opened_with_duckdb_is_counted_like_an_upload(tmp_path: Path) -> None:
    df = _points(4000)
    folder = tmp_path / "pings"
    folder.mkdir()
    df.iloc[:2500].to_parquet(folder / "part-1.parquet")
    df.iloc[2500:].to_parquet(folder / "part-2.parquet")
    at = AppTest.from_file(APP, default_timeout=120).run()
    _count(_open(at, folder), user="person")
    ds = at.session_state["dataset"]
    assert ds.source is not None and ds.engine == "duckdb" and ds.table.n_read == 4000
    assert at.session_state["user_cap"] == 10
    assert np.array_equal(at.session_state["aggregate"].counts, _truth(df, at, cap=10))
    assert any("Counted 4,000 rows with duckdb" in s.value for s in at.success)
    # a coarser grid: not counted on every edit (a pass over the files), but on request
    at.number_input(key="_w_grid_rows").set_value(64).run()
    at.number_input(key="_w_grid_cols").set_value(32).run()
    assert not at.exception, at.exception
    assert at.session_state["aggregate"].counts.shape == (1024, 1024)
    assert any("not counted for this area" in i.value for i in at.info)
    at.button(key="count_source").click().run()
    assert not at.exception, at.exception
    assert at.session_state["aggregate"].counts.shape == (64, 32)
    assert np.array_equal(at.session_state["aggregate"].counts, _truth(df, at, cap=10))

    # a release counts what it needs: change the cap, then release without counting first
    at.number_input(key="_w_user_cap").set_value(4).run()
    release(at)
    assert at.session_state["releases"][-1].release.user_cap == 4
    assert np.array_equal(at.session_state["aggregate"].counts, _truth(df, at, cap=4))
    goto(at, "export")
    [code] = [c for c in at.code if "release = \"points\"" in c.value]
    cfg = tomllib.loads(code.value)
    assert cfg["input"] == {"path": str(folder), "lat": "lat", "lon": "lon", "user": "person", "user_cap": 4}
    assert cfg["engine"]["name"] == "duckdb" and cfg["domain"]["grid"] == [64, 32]
    (tmp_path / "release.toml").write_text(code.value, "utf-8")
    assert main(["run", str(tmp_path / "release.toml")]) == 0
    assert (tmp_path / "release" / "release.csv").is_file()
    # the pipeline's run drew on the app's budget for these points: 0.5 (app) + 0.5 (config)
    from dpcore.core.session import Session
    from dpcore.privacy import budget

    led = Session().budget("points", ds.fingerprint, default=budget.pure(1.0))
    assert abs(led.spent - 2 * cfg["budget"]["epsilon"]) < 1e-12
    assert main(["run", str(tmp_path / "release.toml")]) == 2  # and the cap holds across both


def test_same_points_uploaded_or_opened_share_one_budget_key(tmp_path: Path) -> None:
    df = _points(500, seed=8)[["lat", "lon"]]
    csv = tmp_path / "pts.csv"
    df.to_csv(csv, index=False, float_format="%.17g")
    at = AppTest.from_file(APP, default_timeout=120).run()
    goto(at, "data")
    at.file_uploader(key="points_upload").set_value(("pts.csv", csv.read_bytes(), "text/csv")).run()
    assert not at.exception, at.exception
    fp_upload = at.session_state["dataset"].fingerprint
    _count(_open(at, csv))
    assert at.session_state["dataset"].source is not None
    assert at.session_state["dataset"].fingerprint == fp_upload


def test_a_large_upload_goes_to_duckdb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPCORE_AUTO_ENGINE_BYTES", "1000")
    df = _points(300, seed=5)
    data = df.to_csv(index=False).encode()
    at = AppTest.from_file(APP, default_timeout=120).run()
    goto(at, "data")
    at.file_uploader(key="points_upload").set_value(("big.csv", data, "text/csv")).run()
    assert not at.exception, at.exception
    opened = at.session_state["path_open"]
    assert opened is not None and opened["engine"] == "duckdb" and opened["src"].label == "big.csv"
    _count(at)
    ds = at.session_state["dataset"]
    assert ds.engine == "duckdb" and ds.name == "big.csv" and ds.table.n_read == 300
    assert ds.table.user_column == "person"  # detected by name and proposed, as for an upload
    assert np.array_equal(at.session_state["aggregate"].counts, _truth(df, at, cap=10))


def test_text_coordinates_in_a_file_left_out_on_request(tmp_path: Path) -> None:
    """DuckDB refuses rows whose coordinate is text; the button counts again without them (the same rows
    and key as an upload left out the same way), and the release config asks for the same."""
    df = _points(400, seed=6)[["lat", "lon"]]
    text = df.to_csv(index=False, float_format="%.17g").splitlines()
    for i in (3, 30, 300):
        text[i] = "n/a?," + text[i].split(",")[1]
    csv = tmp_path / "texty.csv"
    csv.write_text("\n".join(text) + "\n", "utf-8")
    at = AppTest.from_file(APP, default_timeout=120).run()
    goto(at, "data")
    at.file_uploader(key="points_upload").set_value(("texty.csv", csv.read_bytes(), "text/csv")).run()
    at.button(key="leave_out_unreadable").click().run()
    assert not at.exception, at.exception
    fp_upload = at.session_state["dataset"].fingerprint
    _count(_open(at, csv))
    assert any("3 rows whose 'lat' or 'lon' is not a number" in e.value for e in at.error)
    assert at.session_state["dataset"].source is None  # the upload stays until the curator chooses
    at.button(key="leave_out_unreadable_path").click().run()
    assert not at.exception, at.exception
    ds = at.session_state["dataset"]
    assert ds.source is not None and ds.table.n_read == 400 and ds.table.dropped == {"coordinate not a number": 3}
    assert ds.fingerprint == fp_upload
    assert "Dropped: 3 coordinate not a number" in [c.value for c in at.caption]
    release(at)
    goto(at, "export")
    [code] = [c for c in at.code if "release = \"points\"" in c.value]
    assert tomllib.loads(code.value)["input"]["drop_unreadable"] is True


def test_a_bad_path_is_a_message_and_keeps_the_dataset(tmp_path: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=120).run()
    before = at.session_state["dataset"].name
    goto(at, "data")
    at.radio(key="_w_points_where").set_value("Files on this computer (large data)").run()
    at.text_input(key="_w_points_path").set_value(str(tmp_path / "nope")).run()
    at.button(key="open_path").click().run()
    assert not at.exception, at.exception
    assert any("does not exist" in e.value for e in at.error)
    assert at.session_state["dataset"].name == before


def test_files_on_this_computer_are_off_without_a_data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Off by default: no path box, no Open button, a message naming the setting (issue 18, item 5)."""
    monkeypatch.delenv("DPCORE_DATA_ROOT")
    at = AppTest.from_file(APP, default_timeout=120).run()
    goto(at, "data")
    at.radio(key="_w_points_where").set_value("Files on this computer (large data)").run()
    assert not at.exception, at.exception
    assert "open_path" not in [b.key for b in at.button]
    assert not [t for t in at.text_input if t.key == "_w_points_path"]
    assert any("DPCORE_DATA_ROOT" in i.value and "off" in i.value for i in at.info)


def test_paths_outside_the_data_folder_are_refused_and_values_not_echoed(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "secret.csv"
    _points(50).to_csv(outside, index=False)
    (root / "link.csv").symlink_to(outside)
    bad = root / "bad.csv"
    bad.write_text("lat,lon\nSECRET-VALUE,1\n40.7,-74.0\n", "utf-8")
    monkeypatch.setenv("DPCORE_DATA_ROOT", str(root.resolve()))
    at = AppTest.from_file(APP, default_timeout=120).run()
    goto(at, "data")
    at.radio(key="_w_points_where").set_value("Files on this computer (large data)").run()
    for typed, words in ((str(outside), "outside the data folder"), ("../secret.csv", "'..'"),
                         ("link.csv", "link to a file outside")):
        at.text_input(key="_w_points_path").set_value(typed).run()
        at.button(key="open_path").click().run()
        assert not at.exception, at.exception
        assert any(words in e.value for e in at.error), (typed, [e.value for e in at.error])
        assert at.session_state.get("path_open") is None
    # a file inside opens; the engine's complaint about a cell does not quote the cell
    at.text_input(key="_w_points_path").set_value("bad.csv").run()
    at.selectbox(key="_w_points_engine").set_value("duckdb").run()
    at.button(key="open_path").click().run()
    assert not at.exception, at.exception
    if at.session_state.get("path_open") is not None:
        _count(at)
    shown = " ".join(e.value for e in at.error)
    assert shown and "SECRET-VALUE" not in shown, shown


def test_the_inside_key_follows_the_bounds_of_the_release_not_of_the_count(tmp_path: Path) -> None:
    """Issue 26 item 12: points kept in their files are keyed also by the points inside the bounds,
    and those must be the bounds the release uses, as in the CLI.  Opened (and counted) with the
    default bounds, which hold one extra point, then released after the curator typed smaller bounds
    that leave it out: the same points without the extra one, released by the CLI with those bounds,
    draw on the app's budget (before, the app kept the key of the bounds it counted with, and the CLI
    found no budget)."""
    from dpcore.core.session import Session
    from dpcore.privacy import budget

    rng = np.random.default_rng(11)
    lat, lon = rng.uniform(40.61, 40.69, 300), rng.uniform(-73.99, -73.91, 300)
    inner = pd.DataFrame({"lat": lat, "lon": lon})
    with_extra = pd.concat([inner, pd.DataFrame({"lat": [40.85], "lon": [-73.75]})], ignore_index=True)
    opened, alone = tmp_path / "with_extra.csv", tmp_path / "inner.csv"
    with_extra.to_csv(opened, index=False, float_format="%.17g")
    inner.to_csv(alone, index=False, float_format="%.15g")  # re-saved as a spreadsheet would
    at = AppTest.from_file(APP, default_timeout=120).run()
    _count(_open(at, opened))
    assert at.session_state["bounds"].contains(np.array([-73.75]), np.array([40.85]))[0]  # counted with the extra point
    goto(at, "data")
    at.radio(key="_w_bounds_how").set_value("Numbers I type").run()
    box = {"_w_b_west": -74.0, "_w_b_south": 40.6, "_w_b_east": -73.9, "_w_b_north": 40.7}
    for key, value in box.items():
        at.number_input(key=key).set_value(value).run()
    assert not at.exception, at.exception
    assert at.session_state["bounds"].as_tuple() == (-74.0, 40.6, -73.9, 40.7)
    release(at)
    assert len(at.session_state["releases"]) == 1
    eps = float(at.session_state["releases"][-1].release.cost.value)
    out = tmp_path / "cli"
    assert main(["release", "points", "--input", str(alone), "--bounds=-74.0,40.6,-73.9,40.7", "--grid", "8,8",
                 "--mechanism", "identity", "--epsilon=0.1", "--out", str(out)]) == 0
    led = Session().budget("points", at.session_state["dataset"].fingerprint, default=budget.pure(1.0))
    assert abs(led.spent - (eps + 0.1)) < 1e-12, led.spent  # the CLI drew on the app's budget, not a fresh one
