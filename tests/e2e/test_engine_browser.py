"""In a real browser: points that stay in their files (a folder of Parquet) counted by DuckDB,
released, and the Export page's release.toml run by the command line on the same budget."""

from __future__ import annotations

import os
import re
import tomllib

import numpy as np
import pandas as pd
import pytest
from browser_steps import click, download, enter, go_to, pick_option

from dpcore.cli import main

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="/usr/bin/chromium is missing"),
    pytest.mark.filterwarnings("ignore:Session-scoped fixtures defined as instance methods"),
]


def test_folder_counted_by_duckdb_then_config_rerun(app_url, app_ledger_db, page, tmp_path, monkeypatch):
    page.set_default_timeout(90_000)
    rng = np.random.default_rng(12)
    n = 6_000
    df = pd.DataFrame({"lat": rng.uniform(40.57, 40.91, n), "lon": rng.uniform(-74.05, -73.71, n),
                       "device": rng.integers(0, 400, n)})
    folder = tmp_path / "pings"
    folder.mkdir()
    for i in range(3):
        df.iloc[i * 2000:(i + 1) * 2000].to_parquet(folder / f"part-{i}.parquet")

    page.goto(app_url)
    sidebar = page.get_by_test_id("stSidebar")
    sidebar.get_by_text("100,000 rows kept of 100,000 read").wait_for()

    # ---- Data: a folder on this computer, DuckDB, the person column detected by name
    click(page, page.get_by_text("Files on this computer (large data)"))
    enter(page, page.get_by_role("textbox", name=re.compile(r"^A CSV or Parquet file in ")), str(folder))
    pick_option(page, page.get_by_test_id("stSelectbox").filter(has=page.get_by_text("Engine", exact=True)),
                re.compile("^DuckDB"))
    click(page, page.locator(".st-key-open_path button"))
    page.get_by_text("3 PARQUET files").wait_for()
    click(page, page.get_by_role("button", name="Count the points with duckdb"))
    page.get_by_text(f"Counted {n:,} rows with duckdb").wait_for()
    sidebar.get_by_text(f"{n:,} rows kept of {n:,} read").wait_for()

    # ---- Plan: defaults; Release
    go_to(page, "Release")
    click(page, page.get_by_role("button", name=re.compile(r"^Release with ε = ")))
    page.get_by_text(re.compile(r"^Released ")).first.wait_for()
    sidebar.get_by_text(re.compile(r"spent ε = 0\.5 of 1")).wait_for()

    # ---- Export: the config of this release
    go_to(page, "Export")
    click(page, page.get_by_text("Repeat this release in a pipeline"))
    text = download(page, "Download release.toml", tmp_path).decode()
    cfg = tomllib.loads(text)
    assert cfg["release"] == "points" and cfg["engine"]["name"] == "duckdb"
    assert cfg["input"]["path"] == str(folder) and cfg["input"]["user"] == "device"
    assert cfg["budget"]["db"] is True and cfg["budget"]["epsilon"] == pytest.approx(0.5)

    # the command line, on the app's budget database, spends the rest and is then refused
    monkeypatch.setenv("DPCORE_LEDGER_DB", app_ledger_db)
    (tmp_path / "release.toml").write_text(text, "utf-8")
    assert main(["run", str(tmp_path / "release.toml")]) == 0
    assert main(["run", str(tmp_path / "release.toml")]) == 2
    # the app's sidebar (same session, next run) sees the pipeline's spend
    go_to(page, "Plan")
    sidebar.get_by_text(re.compile(r"spent ε = 1 of 1")).wait_for()
