"""Two browser sessions (two Playwright contexts) on one server: different data never share data,
releases or budget; the same data shares its budget (issue 9)."""

from __future__ import annotations

import os
import re

import pytest

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="/usr/bin/chromium is missing"),
]

OTHER = b"state,county,tract,population\n07,001,000100,50\n07,001,000200,70\n07,003,000100,90\n"


def open_census(context, app_url):
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(app_url)
    page.get_by_test_id("stSidebar").get_by_text("100,000 rows kept of 100,000 read").wait_for()
    page.locator('[data-testid="stSidebarNav"] a', has_text="8 · Census").first.click()
    main = page.get_by_test_id("stMain")
    main.get_by_text("1. Data").wait_for()
    return page, main


def test_two_sessions_keep_data_releases_and_budgets_apart(app_url, browser):
    a_ctx, b_ctx, c_ctx = browser.new_context(), browser.new_context(), browser.new_context()
    try:
        # session A releases the built-in census with ε = 0.5
        a, a_main = open_census(a_ctx, app_url)
        a_main.get_by_role("button", name=re.compile(r"^Release with ε = 0\.5")).click()
        a_main.get_by_text(re.compile(r"^Released synthetic census with Privelet")).wait_for()
        a_main.get_by_text("ε = 0.5 of 1").wait_for()

        # session B uploads other data: none of A's release, table or budget is visible
        b, b_main = open_census(b_ctx, app_url)
        b_main.get_by_text("Upload a file").click()
        b_main.get_by_text("Upload a census table, or use the built-in synthetic census.").wait_for()
        b_main.locator('input[type="file"]').first.set_input_files(
            files=[{"name": "other.csv", "mimeType": "text/csv", "buffer": OTHER}])
        b_main.get_by_text(re.compile(r"Source: other\.csv, 3 rows")).wait_for()
        b_main.get_by_text("ε = 0 of 1").wait_for()
        b_main.get_by_text(re.compile(r"Nothing released yet")).wait_for()
        assert b_main.get_by_text(re.compile(r"^Released ")).count() == 0  # not A's release

        # session C holds the same data as A: the budget follows the content, so it continues
        c, c_main = open_census(c_ctx, app_url)
        c_main.get_by_text("ε = 0.5 of 1").wait_for()
        c.locator('[data-testid="stSidebarNav"] a', has_text="10 · Release history").first.click()
        c_main = c.get_by_test_id("stMain")
        c_main.get_by_text(re.compile(r"Census table · 1 release")).wait_for()
        # and A, after a reload, still sees its own release's budget
        a.reload()
        a.locator('[data-testid="stSidebarNav"] a', has_text="8 · Census").first.click()
        a.get_by_test_id("stMain").get_by_text("ε = 0.5 of 1").wait_for()
    finally:
        for ctx in (a_ctx, b_ctx, c_ctx):
            ctx.close()
