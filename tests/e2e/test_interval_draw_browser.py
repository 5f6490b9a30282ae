"""Issue 25 item 4 in a real browser: on the Release step of a points release, draw a lasso around an
area on the release's cells and read its estimate and 90 % interval (the drawn path is answered by the
same code as an uploaded polygon; tests/app/test_interval_draw.py checks the numbers against the library).
"""

from __future__ import annotations

import os
import re

import pytest
from browser_steps import click, go_to, pick_option
from browser_steps import wait_idle as idle
from test_kinds_browser import RELEASE_TIMEOUT_MS, start

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="/usr/bin/chromium is missing"),
    # pytest-playwright 0.10's class-style base_url fixture, under pytest 9
    pytest.mark.filterwarnings("ignore:Session-scoped fixtures defined as instance methods"),
]

#: The lasso's vertices (longitude, latitude): a pentagon inside the demo's NYC area.
LASSO = [(-74.00, 40.62), (-73.82, 40.64), (-73.78, 40.78), (-73.92, 40.86), (-74.02, 40.74)]


def test_lasso_on_the_points_release_reads_its_interval(app_url, page):
    start(page, app_url, "Points")
    main = page.get_by_test_id("stMain")
    go_to(page, "Plan")
    idle(page)
    pick_option(page, page.get_by_test_id("stSelectbox").first, "UG (uniform grid sized from the data volume)")
    page.get_by_text("Counts on a coarser regular grid").first.wait_for(state="attached")
    go_to(page, "Release")
    idle(page)
    click(page, main.get_by_role("button", name=re.compile(r"^Release with ε = ")))
    main.get_by_text(re.compile(r"^Released UG")).first.wait_for(timeout=RELEASE_TIMEOUT_MS)
    idle(page)

    click(page, main.get_by_text("Draw a polygon on the release's cells"))
    chart = main.locator(".js-plotly-plot").filter(has_text="Draw with the lasso")
    chart.wait_for(timeout=RELEASE_TIMEOUT_MS)
    idle(page)
    # the lasso's vertices in page pixels, from the figure's own axes (longitude x, latitude y)
    points = chart.evaluate("""(gd, lasso) => {
        const box = gd.getBoundingClientRect(), xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
        return lasso.map(([x, y]) => [box.left + xa._offset + xa.l2p(x), box.top + ya._offset + ya.l2p(y)]);
    }""", LASSO)
    page.mouse.move(*points[0])
    page.mouse.down()
    for a, b in zip(points, points[1:] + points[:1], strict=True):  # each edge in small steps, back to the start
        for t in (0.25, 0.5, 0.75, 1.0):
            page.mouse.move(a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]))
    page.mouse.up()

    answer = main.get_by_text(re.compile(r"^Drawn polygon 1: estimate")).first
    answer.wait_for(timeout=RELEASE_TIMEOUT_MS)
    text = answer.inner_text()
    m = re.search(r"estimate ([\d,.-]+) \(SD ([\d.e+-]+)\), 90% interval \[([\d,.-]+), ([\d,.-]+)\]; "
                  r"cells inside ([\d,]+), cut ([\d,]+)", text)
    assert m, text
    est, sd, low, high, inside, cut = (float(g.replace(",", "")) for g in m.groups())
    assert inside > 0 and cut > 0  # a drawn shape covers whole cells and cuts others
    assert low < est < high and sd > 0 and high - low == pytest.approx(2 * 1.6449 * sd, rel=0.02, abs=0.2)
    main.get_by_role("button", name="Download the drawn polygon (GeoJSON)").wait_for()
    assert page.get_by_test_id("stException").count() == 0
