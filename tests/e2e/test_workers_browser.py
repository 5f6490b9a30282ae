"""``./run --workers 2``: two app servers behind one address (ui/front.py, issue 28 item 5).

Two browsers pinned to different servers: an upload, a release and a download work through the front
(each browser's websocket, upload and media stay on its own server), and the budget is one budget:
the second server sees what the first spent on the same data, because both charge the one SQLite
database (no server can overspend a shared cap)."""

from __future__ import annotations

import os
import re

import pytest
from browser_steps import click, download, go_to, open_census

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="/usr/bin/chromium is missing"),
]

TABLE = b"state,county,tract,population\n09,001,000100,55\n09,001,000200,75\n09,003,000100,95\n"


def test_two_servers_share_one_budget_and_keep_each_browser_on_its_own(workers_app_url, browser, tmp_path):
    a_ctx, b_ctx, new_ctx = (browser.new_context(accept_downloads=True) for _ in range(3))
    try:
        for ctx, worker in ((a_ctx, "0"), (b_ctx, "1")):
            ctx.add_cookies([{"name": "dpcore_worker", "value": worker, "url": workers_app_url}])

        # A, on the first server: upload, release with ε = 0.5, download the release
        a, a_main, a_side = open_census(a_ctx, workers_app_url, "tracts.csv", TABLE)
        go_to(a, "Release")
        click(a, a_main.get_by_role("button", name=re.compile(r"^Release with ε = 0\.5")))
        a_main.get_by_text(re.compile(r"^Released tracts\.csv with .*ε = 0\.5 of 1 is left")).wait_for()
        go_to(a, "Export")
        rows = download(a, "Download release.csv", tmp_path).decode().splitlines()
        assert len(rows) > 3 and rows[0].startswith("level,")

        # B, on the second server, opens the same table: the budget spent on the first is spent here
        b, b_main, b_side = open_census(b_ctx, workers_app_url, "same.csv", TABLE)
        b_side.get_by_text(re.compile(r"spent ε = 0\.5 of 1")).wait_for()

        # a browser without the cookie is given one
        fresh = new_ctx.new_page()
        fresh.goto(f"{workers_app_url}/_stcore/health")
        assert [c["value"] for c in new_ctx.cookies() if c["name"] == "dpcore_worker"] in (["0"], ["1"])
        # and the pinned ones kept theirs (the front set no other)
        assert [c["value"] for c in a_ctx.cookies() if c["name"] == "dpcore_worker"] == ["0"]
        assert [c["value"] for c in b_ctx.cookies() if c["name"] == "dpcore_worker"] == ["1"]
    finally:
        for ctx in (a_ctx, b_ctx, new_ctx):
            ctx.close()
