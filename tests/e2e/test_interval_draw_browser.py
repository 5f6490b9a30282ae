"""End to end in a real browser: upload, release, map, a drawn polygon's interval, export — all offline.

Runs the app as `./run` does (`python -m ui.serve app.py`, fixture in conftest.py) and drives Debian's
chromium through pytest-playwright. Navigation is by the sidebar links only: a
page.goto() to another URL would start a new session and lose the state.

Issue 25 item 4: on the Release step of the points release, a lasso drawn around an area on the
release's cells is answered with its estimate and 90 % interval (the drawn path is answered by the
same code as an uploaded polygon; tests/app/test_interval_draw.py checks the numbers against the
library).  One flow walks both paths (they share the upload, the UG plan and the release).
"""

from __future__ import annotations

import io
import json
import math
import os
import re
from urllib.parse import urlparse

import numpy as np
import pandas as pd
import pytest
from browser_steps import (
    click,
    download,
    go_to,
    keep_screenshot,
    pick_option,
    wait_for_map,
    wait_idle,
)

from dpcore.core.record import validate_record
from dpcore.points import export

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="/usr/bin/chromium is missing"),
    # pytest-playwright 0.10's class-style base_url fixture, under pytest 9
    pytest.mark.filterwarnings("ignore:Session-scoped fixtures defined as instance methods"),
]

N_POINTS = 2_000
NYC_CORE = (-74.06, 40.56, -73.70, 40.92)  # west, south, east, north: the app's default area
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
DRAW_TIMEOUT_MS = 120_000  # the drawing chart, then the drawn polygon's answer, under load
#: The lasso's vertices (longitude, latitude): a pentagon inside the uploaded points' area.
LASSO = [(-74.00, 40.62), (-73.82, 40.64), (-73.78, 40.78), (-73.92, 40.86), (-74.02, 40.74)]


def points_csv(n: int, seed: int = 7) -> bytes:
    rng = np.random.default_rng(seed)
    w, s, e, no = NYC_CORE
    lat = rng.uniform(s + 0.01, no - 0.01, n)
    lon = rng.uniform(w + 0.01, e - 0.01, n)
    lines = ["lat,lon"] + [f"{a:.6f},{b:.6f}" for a, b in zip(lat, lon, strict=True)]
    return ("\n".join(lines) + "\n").encode()


def test_upload_release_map_lasso_export_offline(app_url, page, tmp_path):
    page.set_default_timeout(60_000)
    requests: list[str] = []
    page.on("request", lambda req: requests.append(req.url))

    page.goto(app_url)
    sidebar = page.get_by_test_id("stSidebar")
    sidebar.get_by_text("100,000 rows kept of 100,000 read").wait_for()

    # ---- Data: upload 2,000 points
    wait_idle(page)
    page.locator("input[type=file]").first.set_input_files(
        files=[{"name": "points.csv", "mimeType": "text/csv", "buffer": points_csv(N_POINTS)}]
    )
    sidebar.get_by_text(f"{N_POINTS:,} rows kept of {N_POINTS:,} read").wait_for()
    assert sidebar.get_by_text("points.csv").count() >= 1

    # ---- Plan: UG (the session starts on auto), ε = 0.5; Release: the button, then the map on the same page
    go_to(page, "Plan")
    pick_option(page, page.get_by_test_id("stSelectbox").first, "UG (uniform grid sized from the data volume)")
    page.get_by_text("Counts on a coarser regular grid").first.wait_for(state="attached")
    go_to(page, "Release")
    click(page, page.get_by_role("button", name=re.compile(r"^Release with ε = ")))
    page.get_by_text(re.compile(r"^Released UG")).first.wait_for()
    sidebar.get_by_text(re.compile(r"spent ε = 0\.5 of 1")).wait_for()

    # ---- Map: wait until MapLibre has drawn it
    wait_for_map(page)
    keep_screenshot(page, "interval_map.png", full_page=True)

    # ---- Release step: a lasso drawn on the release's cells, its estimate and 90 % interval
    main = page.get_by_test_id("stMain")
    click(page, main.get_by_text("Draw a polygon on the release's cells"))
    chart = main.locator(".js-plotly-plot").filter(has_text="Draw with the lasso")
    chart.wait_for(timeout=DRAW_TIMEOUT_MS)
    wait_idle(page)
    draw_lasso(page, chart, LASSO)
    # the answer leads with one plain sentence (counts rounded for people); the exact numbers and the
    # technical words are in "How is this computed"
    plain = main.get_by_text(re.compile(r"^Drawn polygon 1: about [\d,]+ points in this area")).first
    plain.wait_for(timeout=DRAW_TIMEOUT_MS)
    p = re.search(r"about ([\d,]+) points in this area \(90 % interval: ([\d,]+) to ([\d,]+)\)", plain.inner_text())
    assert p, plain.inner_text()
    click(page, main.get_by_test_id("stExpander").filter(has_text="How is this computed").get_by_text(
        "How is this computed"))
    answer = main.get_by_text(re.compile(r"^Drawn polygon 1: estimate")).first
    answer.wait_for(timeout=DRAW_TIMEOUT_MS)
    text = answer.inner_text()
    m = re.search(r"estimate ([\d,.-]+) \(SD ([\d.e+-]+)\), 90% interval \[([\d,.-]+), ([\d,.-]+)\]; "
                  r"cells inside ([\d,]+), cut ([\d,]+)", text)
    assert m, text
    est, sd, low, high, inside, cut = (float(g.replace(",", "")) for g in m.groups())
    assert inside > 0 and cut > 0  # a drawn shape covers whole cells and cuts others
    assert low < est < high and sd > 0 and high - low == pytest.approx(2 * 1.6449 * sd, rel=0.02, abs=0.2)
    about, p_low, p_high = (int(g.replace(",", "")) for g in p.groups())  # whole numbers, the interval outwards
    assert p_low <= max(low, 0) and p_high >= high and abs(about - est) <= (high - low) / 20 + 0.5
    main.get_by_role("button", name="Download the drawn polygon (GeoJSON)").wait_for()
    assert page.get_by_test_id("stException").count() == 0

    # ---- Export: the three files
    go_to(page, "Export")
    csv_bytes = download(page, "Download release.csv", tmp_path)
    geo_bytes = download(page, "Download release.geojson", tmp_path)
    json_bytes = download(page, "Download release.json", tmp_path)

    csv = pd.read_csv(io.BytesIO(csv_bytes))
    geo = json.loads(geo_bytes)
    record = json.loads(json_bytes)
    validate_record(record)

    assert list(csv.columns) == export.CSV_COLUMNS
    assert geo["type"] == "FeatureCollection"
    assert len(csv) == len(geo["features"]) == record["outputs"]["n_rectangles"]
    assert [f["id"] for f in geo["features"]] == csv["id"].tolist()
    assert [f["properties"]["noisy_count"] for f in geo["features"]] == csv["noisy_count"].tolist()
    assert record["mechanism"]["name"] == "ug"
    assert record["privacy"]["cost"]["value"] == pytest.approx(0.5)
    assert record["outputs"]["n_leaves"] == int(csv["leaf"].sum())

    # The leaves tile the area, which holds all the points: their noisy counts sum to
    # N plus independent discrete Laplace noise, SD sqrt(leaves) * sd_per_count.
    leaf_levels = [lv for lv in record["levels"] if lv["in_partition"]]
    assert len(leaf_levels) == 1
    sd = leaf_levels[0]["expected_error"]["sd_per_count"]
    leaves = csv[csv["leaf"]]
    np.testing.assert_allclose(leaves["noise_sd"], sd, atol=1e-3)  # CSV rounds to 4 decimals
    bound = 6 * math.sqrt(len(leaves)) * sd
    assert abs(leaves["noisy_count"].sum() - N_POINTS) <= bound, (leaves["noisy_count"].sum(), bound)

    # ---- offline: the browser asked nothing of any other host
    foreign = [u for u in requests
               if urlparse(u).scheme not in ("data", "blob", "about")
               and urlparse(u).hostname not in LOCAL_HOSTS]
    assert not foreign, foreign



def draw_lasso(page, chart, lonlat) -> None:
    """Drag the mouse around ``lonlat`` (longitude, latitude) on the Plotly ``chart`` with its lasso,
    each edge in small steps and back to the start; the vertices in page pixels from the figure's own
    axes (longitude x, latitude y)."""
    points = chart.evaluate("""(gd, lasso) => {
        const box = gd.getBoundingClientRect(), xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
        return lasso.map(([x, y]) => [box.left + xa._offset + xa.l2p(x), box.top + ya._offset + ya.l2p(y)]);
    }""", lonlat)
    page.mouse.move(*points[0])
    page.mouse.down()
    for a, b in zip(points, points[1:] + points[:1], strict=True):
        for t in (0.25, 0.5, 0.75, 1.0):
            page.mouse.move(a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]))
    page.mouse.up()
