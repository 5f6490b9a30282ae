"""``./run --workers 2``: two app servers behind one address (ui/front.py, issue 28 item 5).

A new browser is pinned by the front; a second is pinned to the other server.  An upload, a release and
a download work through the front (each browser's websocket, upload and media stay on its own server:
the file A downloaded is not found through B's server), and the budget is one budget:
the second server sees what the first spent on the same data, because both charge the one SQLite
database (no server can overspend a shared cap)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlparse

import pytest
from browser_steps import click, go_to, open_census

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="/usr/bin/chromium is missing"),
]

TABLE = b"state,county,tract,population\n09,001,000100,55\n09,001,000200,75\n09,003,000100,95\n"


def test_two_servers_share_one_budget_and_keep_each_browser_on_its_own(workers_app_url, browser, tmp_path):
    cookie = f"dpcore_worker_{urlparse(workers_app_url).port}"  # the front's own: ports share cookies
    a_ctx, b_ctx = (browser.new_context(accept_downloads=True) for _ in range(2))
    try:
        # A, a new browser: the front pins it on the first page; upload, release with ε = 0.5, download
        a, a_main, a_side = open_census(a_ctx, workers_app_url, "tracts.csv", TABLE)
        a_worker = [c["value"] for c in a_ctx.cookies() if c["name"] == cookie]
        assert a_worker in (["0"], ["1"])
        go_to(a, "Release")
        click(a, a_main.get_by_role("button", name=re.compile(r"^Release with ε = 0\.5")))
        a_main.get_by_text(re.compile(r"^Released tracts\.csv with .*ε = 0\.5 of 1 is left")).wait_for()
        go_to(a, "Export")
        with a.expect_download() as info:
            click(a, a_main.get_by_role("button", name="Download release.csv"))
        rows = Path(info.value.path()).read_text().splitlines()
        assert len(rows) > 3 and rows[0].startswith("level,")

        # B, pinned to the other server, opens the same table: the budget spent on the first is spent here
        b_ctx.add_cookies([{"name": cookie, "value": "1" if a_worker == ["0"] else "0", "url": workers_app_url}])
        b, b_main, b_side = open_census(b_ctx, workers_app_url, "same.csv", TABLE)
        b_side.get_by_text(re.compile(r"spent ε = 0\.5 of 1")).wait_for()

        # two processes indeed: A's file is kept by A's server only, and each browser kept its cookie
        assert a_ctx.request.get(info.value.url).status == 200
        assert b_ctx.request.get(info.value.url).status == 404
        assert [c["value"] for c in a_ctx.cookies() if c["name"] == cookie] == a_worker
    finally:
        for ctx in (a_ctx, b_ctx):
            ctx.close()
