"""Trips between areas in a real browser, through the four steps: the made-up demo → the plan → an
InfTDA release with its flow map → the CSV export, offline."""

from __future__ import annotations

import io
import json
import os
import re
from urllib.parse import urlparse

import pandas as pd
import pytest
from browser_steps import click, go_to, keep_screenshot, settle, wait_for_map, wait_idle
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from dpcore.flows.export import validate_od_record

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="/usr/bin/chromium is missing"),
    pytest.mark.filterwarnings("ignore:Session-scoped fixtures defined as instance methods"),
]

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}


def test_od_release_map_export(app_url, page):
    page.set_default_timeout(60_000)
    requests: list[str] = []
    page.on("request", lambda req: requests.append(req.url))
    # ---- Data: a link naming the kind of data ("Trips between areas"); the made-up demo is loaded
    page.goto(f"{app_url}/data?kind=flows")
    main = page.get_by_test_id("stMain")
    main.get_by_text(re.compile(r"4 regions, 36 districts, 576 zones")).wait_for()
    side = page.get_by_test_id("stSidebar")
    side.get_by_text(re.compile(r"60,000 trips, 28,377 observed pairs")).wait_for()

    # ---- Plan: the defaults (InfTDA, ρ = 0.25 of 0.5), the expected error per table
    go_to(page, "Plan")
    main.get_by_text("Use it when:").first.wait_for()
    main.get_by_text(re.compile(r"Expected error per table")).wait_for()

    # ---- Release
    go_to(page, "Release")
    button = main.get_by_role("button", name=re.compile(r"^Release with ρ = 0\.25 — 0\.25 left after this"))
    # clicks that land before the page shows the release (a double click, an impatient curator)
    # release once (the button's one-time token)
    button.wait_for()
    wait_idle(page)  # the burst starts on the drawn step; its later clicks land while the release runs
    button.evaluate("b => { b.click(); for (const ms of [30, 100, 200]) setTimeout(() => b.click(), ms); }")
    confirmation = main.get_by_text(re.compile(r"^Released InfTDA .* with ρ = 0\.25 .*ρ = 0\.25 of 0\.5 is left"))
    released = side.get_by_text(re.compile(r"flows released in the finest table"))
    # Under a burst of clicks the release runs in the first click's callback while the later
    # clicks' runs draw the page (Streamlit 1.67 does not wait for a callback that touches no
    # session state); the release itself is stored, and a fresh run of the page shows it.  So wait
    # for the confirmation or for every run of the burst to have ended (the app idle for 2 s), and
    # only then leave the step: a navigation before the click's run has started could lose it.
    if not (settle(page, confirmation) and settle(page, released)):
        for attempt in range(3):
            go_to(page, "History")
            go_to(page, "Release")
            try:
                confirmation.wait_for(timeout=30_000)
                released.wait_for(timeout=30_000)
                break
            except PlaywrightTimeoutError:
                if attempt == 2:
                    raise
    side.get_by_text(re.compile(r"By the paper's simpler conversion \(its Lemma 3\)")).wait_for()
    settle(page, side.get_by_text(re.compile(r"^#2 ")), quiet_ms=1_500)  # a second release would show by now
    assert side.get_by_text(re.compile(r"^#1 ")).count() == 1
    assert side.get_by_text(re.compile(r"^#2 ")).count() == 0

    # ---- the map, below the confirmation on the Release step
    wait_for_map(page, main)
    traces = page.evaluate("() => document.querySelector('.js-plotly-plot').data.map(t => [t.type, t.mode])")
    assert {t for t, _ in traces} == {"scattermap"}
    assert sum(1 for _, m in traces if m == "lines+markers") >= 2  # flow lines in width classes
    style = page.evaluate("() => document.querySelector('.js-plotly-plot')._fullLayout.map.style")
    assert style == "white-bg"
    keep_screenshot(page, "od-map.png")

    # ---- Export
    go_to(page, "Export")
    with page.expect_download() as info:
        click(page, main.get_by_role("button", name="Download release.csv"))
    assert info.value.suggested_filename == "release.csv"
    csv = pd.read_csv(io.BytesIO(open(info.value.path(), "rb").read()), dtype={"noisy_count": int})
    with page.expect_download() as info:
        click(page, main.get_by_role("button", name="Download release.json"))
    record = json.loads(open(info.value.path(), "rb").read())
    validate_od_record(record)
    with page.expect_download() as info:  # built on the click (deferred), then kept
        click(page, main.get_by_role("button", name="Download flows.geojson"))
    geo = json.loads(open(info.value.path(), "rb").read())
    assert list(csv.columns) == ["level", "origin", "destination", "noisy_count", "noise_sd", "ci95_low", "ci95_high"]
    assert (csv["noisy_count"] > 0).all()
    # consistent: every table sums to the public total of 60,000 trips
    assert csv.groupby("level")["noisy_count"].sum().to_dict() == {
        lv: 60_000 for lv in ("total>region", "region", "region>district", "district", "district>zone", "zone")}
    assert record["privacy"]["invariants"] == {"total": 60_000}
    # one line per released flow with positions at both ends (the total has none)
    assert geo["type"] == "FeatureCollection"
    assert len(geo["features"]) == int((csv["level"] != "total>region").sum())
    assert {f["geometry"]["type"] for f in geo["features"]} == {"LineString"}

    foreign = [u for u in requests
               if urlparse(u).scheme not in ("data", "blob", "about") and urlparse(u).hostname not in LOCAL_HOSTS]
    assert not foreign, foreign
