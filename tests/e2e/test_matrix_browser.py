"""The matrix mechanism with an uploaded workload in a real browser: grid → Mechanism page →
upload lon/lat rectangles → data-free error report (§6.3) → release → workload answers by name."""

from __future__ import annotations

import io
import os
import re

import numpy as np
import pandas as pd
import pytest
from browser_steps import SCREENS, click, enter, go_to, keep_screenshot, pick_option, wait_idle

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="/usr/bin/chromium is missing"),
    pytest.mark.filterwarnings("ignore:Session-scoped fixtures defined as instance methods"),
]


def nyc_questions() -> bytes:
    """32 public rectangles over the demo area (New York City core), 4 groups (seeded)."""
    rng = np.random.default_rng(5)
    boroughs = {"Manhattan": (-74.02, 40.70, -73.93, 40.88), "Brooklyn": (-74.04, 40.57, -73.86, 40.70),
                "Queens": (-73.93, 40.62, -73.72, 40.80), "Bronx": (-73.93, 40.80, -73.76, 40.91)}
    lines = ["name,lon_min,lat_min,lon_max,lat_max,weight,group"]
    for b, (w, s, e, n) in boroughs.items():
        lines.append(f"{b} (whole),{w},{s},{e},{n},2,{b}")
        for i in range(7):
            x0, y0 = rng.uniform(w, e - 0.04), rng.uniform(s, n - 0.04)
            dx, dy = rng.uniform(0.03, 0.08, 2)
            lines.append(f"{b} area {i + 1},{x0:.4f},{y0:.4f},{min(e, x0 + dx):.4f},{min(n, y0 + dy):.4f},1,{b}")
    return ("\n".join(lines) + "\n").encode()


def test_uploaded_workload_report_release_and_named_answers(app_url, page, tmp_path):
    page.set_default_timeout(120_000)
    page.goto(app_url)
    for label in ("Grid rows (north–south)", "Grid columns (west–east)"):
        enter(page, page.get_by_role("spinbutton", name=label), "16")
        page.wait_for_timeout(1000)
    go_to(page, "Plan")
    pick_option(page, page.get_by_test_id("stSelectbox").first, re.compile("^Matrix mechanism"), timeout=20_000)
    click(page, page.get_by_text("ρ-zCDP (discrete Gaussian noise)"))
    page.get_by_text("Queries to optimise for").wait_for()
    page.wait_for_timeout(1000)
    pick_option(page, page.get_by_test_id("stSelectbox").filter(has_text="Queries to optimise for"),
                re.compile("^uploaded rectangles"), timeout=20_000)
    page.get_by_text("once your rectangles are uploaded").wait_for()
    wait_idle(page)
    page.locator("input[type=file]").first.set_input_files(
        files=[{"name": "nyc_questions.csv", "mimeType": "text/csv", "buffer": nyc_questions()}])
    page.get_by_text("Other strategies under the same budget").wait_for()
    page.get_by_text(re.compile(r"32 rectangles from nyc_questions\.csv")).wait_for()
    page.locator(".js-plotly-plot").first.wait_for()
    assert page.get_by_test_id("stException").count() == 0
    if SCREENS:  # the whole report in one picture
        viewport = page.viewport_size
        page.set_viewport_size({"width": 1400, "height": 3600})
        page.wait_for_timeout(1500)
        keep_screenshot(page, "matrix.png")
        page.set_viewport_size(viewport)  # the rest of the test at the layout CI sees

    go_to(page, "Release")
    click(page, page.get_by_role("button", name=re.compile(r"^Release with ρ = ")))
    page.get_by_text(re.compile(r"^Released Matrix")).first.wait_for()
    go_to(page, "Export")
    with page.expect_download() as info:
        click(page, page.get_by_role("button", name="Download workload_answers.csv"))
    target = tmp_path / "workload_answers.csv"
    info.value.save_as(target)
    answers = pd.read_csv(io.BytesIO(target.read_bytes()))
    assert list(answers["name"][:2]) == ["Manhattan (whole)", "Manhattan area 1"]
    assert set(answers["group"]) == {"Manhattan", "Brooklyn", "Queens", "Bronx"}
    assert {"lon_min", "lat_min", "lon_max", "lat_max", "answer", "standard_error"} <= set(answers.columns)
