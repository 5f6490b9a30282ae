"""Every page URL works as a fresh deep link, also as the first request a new server gets.

The module has a server of its own (``fresh_app_url``, not the browser files' shared one), so the
first page opened here is the first session that server runs: the case where Streamlit's legacy
``pages/`` discovery would run the page script without ``app.py`` (see ``ui/frame.py``).
"""

from __future__ import annotations

import os

import pytest
from browser_steps import settle

from ui.frame import STEPS, TOOLS

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="/usr/bin/chromium is missing"),
    pytest.mark.filterwarnings("ignore:Session-scoped fixtures defined as instance methods"),
]

# the first deep link is a page other than the default one, on a server no session has used yet
URLS = ["plan"] + [url for *_, url in STEPS + TOOLS if url != "plan"]


def test_every_page_url_opens_fresh_with_the_apps_frame(fresh_app_url, worker_context):
    """Each URL in a new page (a new Streamlit session) of the worker's browser context."""
    app_url = fresh_app_url
    for url in URLS:
        page = worker_context.new_page()
        try:
            page.set_default_timeout(60_000)
            page.goto(f"{app_url}/{url}")
            title = next(t for _, t, _, u in STEPS + TOOLS if u == url)
            main = page.get_by_test_id("stMain")
            main.get_by_role("heading", name=title, exact=True).first.wait_for()
            sidebar = page.get_by_test_id("stSidebar")
            # the app's frame: its navigation sections and the sidebar's three panels
            sidebar.get_by_text("The path").wait_for()
            for panel in ("Dataset", "Privacy budget", "Current release"):
                sidebar.get_by_role("heading", name=panel).first.wait_for()
            # a late "Page not found" would come with the first run: wait until that run has ended
            settle(page, page.get_by_text("Page not found"), quiet_ms=300)
            assert page.get_by_text("Page not found").count() == 0, url
            assert page.get_by_test_id("stException").count() == 0, url
            assert page.url.rstrip("/").endswith(f"/{url}"), (url, page.url)
        finally:
            page.close()
