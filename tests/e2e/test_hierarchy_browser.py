"""Counts over areas in a real browser, through the four steps: demo geography → exact release → map → export."""

from __future__ import annotations

import io
import json
import os
import re
from urllib.parse import urlparse

import pandas as pd
import pytest
from browser_steps import click, keep_screenshot, wait_for_map, wait_idle

from dpcore.areas.export import validate_hierarchy_record

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="/usr/bin/chromium is missing"),
    pytest.mark.filterwarnings("ignore:Session-scoped fixtures defined as instance methods"),
]

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}


def test_hierarchy_release_map_drilldown_export(app_url, page, tmp_path):
    page.set_default_timeout(60_000)
    requests: list[str] = []
    page.on("request", lambda req: requests.append(req.url))
    page.goto(f"{app_url}/data?kind=areas")  # a link naming the kind of data: its Data step first
    main = page.get_by_test_id("stMain")
    main.get_by_text(re.compile(r"4 regions, 36 districts, 576 zones")).wait_for()

    nav = page.get_by_test_id("stSidebarNav")
    click(page, nav.get_by_role("link", name="Plan"))
    main.get_by_text(re.compile(r"Use it when:")).wait_for()
    click(page, nav.get_by_role("link", name="Release"))
    click(page, main.get_by_role("button", name=re.compile(r"^Release with ε = 0\.5")))
    main.get_by_text(re.compile(r"617 areas at all levels \(576 finest areas\)")).first.wait_for()
    main.get_by_text(re.compile(r"ε = 0\.5 of 1 is left")).wait_for(state="attached")

    wait_for_map(page, main)
    assert page.evaluate("() => document.querySelector('.js-plotly-plot').data[0].geojson.features.length") == 4
    assert page.locator(".js-plotly-plot .treemaplayer").count() >= 1  # the treemap beside the map
    keep_screenshot(page, "hierarchy-map.png", full_page=True)

    # issue 25 item 4: upload a polygon and read its estimate and 90 % interval (a box over the whole
    # geography: every finest area inside, none cut)
    poly = tmp_path / "area.geojson"
    poly.write_text(json.dumps({"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {},
                    "geometry": {"type": "Polygon", "coordinates": [[[-179, -80], [179, -80], [179, 80], [-179, 80],
                                                                      [-179, -80]]]}}]}))
    uploader = main.get_by_test_id("stFileUploader").filter(has_text="Upload a polygon")
    wait_idle(page)
    uploader.locator("input[type=file]").set_input_files(str(poly))
    # one plain sentence first (people rounded for reading), the exact numbers in "How is this computed"
    main.get_by_text(re.compile(r"^Polygon 1: about [\d,]+ people in this area \(90 % interval: ")).first.wait_for()
    click(page, main.get_by_test_id("stExpander").filter(has_text="How is this computed").get_by_text(
        "How is this computed"))
    answer = main.get_by_text(re.compile(r"^Polygon 1: estimate")).first
    answer.wait_for()
    text = answer.inner_text()
    m = re.search(r"estimate ([\d,.-]+) \(SD ([\d.e+-]+)\), 90% interval \[([\d,.-]+), ([\d,.-]+)\]; "
                  r"cells inside 576, cut 0", text)
    assert m, text
    est, sd, low, high = (float(g.replace(",", "")) for g in m.groups())
    assert low < est < high and 0 < sd and high - low == pytest.approx(2 * 1.6449 * sd, rel=0.02, abs=0.2)

    click(page, nav.get_by_role("link", name="Export"))
    with page.expect_download() as info:
        click(page, main.get_by_role("button", name="Download release.csv"))
    csv = pd.read_csv(io.BytesIO(open(info.value.path(), "rb").read()), dtype={"noisy_count": int})
    with page.expect_download() as info:
        click(page, main.get_by_role("button", name="Download release.json"))
    record = json.loads(open(info.value.path(), "rb").read())
    validate_hierarchy_record(record)
    assert list(csv.columns) == ["level", "code", "parent", "noisy_count", "noise_sd", "ci95_low", "ci95_high"]
    assert csv.groupby("level").size().to_dict() == {"total": 1, "region": 4, "district": 36, "zone": 576}
    # consistent: each level sums to the released total
    total = int(csv.loc[csv["level"] == "total", "noisy_count"].iloc[0])
    assert all(int(csv.loc[csv["level"] == lv, "noisy_count"].sum()) == total for lv in ("region", "district", "zone"))
    assert (csv["noisy_count"] >= 0).all()

    foreign = [u for u in requests
               if urlparse(u).scheme not in ("data", "blob", "about") and urlparse(u).hostname not in LOCAL_HOSTS]
    assert not foreign, foreign
