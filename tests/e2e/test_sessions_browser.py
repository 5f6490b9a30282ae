"""Two browser sessions (two Playwright contexts) on one server: different data never share data,
releases or budget; the same data shares its budget (issue 9).

Real (uploaded) data only: the made-up demo's budget lives with its browser session by design."""

from __future__ import annotations

import os
import re

import pytest
from browser_steps import click, go_to, open_census

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="/usr/bin/chromium is missing"),
]

SHARED = b"state,county,tract,population\n07,001,000100,50\n07,001,000200,70\n07,003,000100,90\n"
OTHER = b"state,county,tract,population\n08,001,000100,40\n08,001,000200,60\n08,003,000100,80\n"


def test_two_sessions_keep_data_releases_and_budgets_apart(app_url, browser):
    """On the browser files' shared server: History lists every budget of the server's database, so
    the "1 release" check reads the heading of session C's own table ("Census table", the label of
    the budgets loaded in the session; another file's budget is "… data, budget opened …" or the
    name a curator gave it), not any budget's.  The tables' contents are this file's alone, so their
    budgets start at 0 whatever ran on the server before."""
    a_ctx, b_ctx, c_ctx = browser.new_context(), browser.new_context(), browser.new_context()
    try:
        # session A releases its table with ε = 0.5
        a, a_main, a_side = open_census(a_ctx, app_url, "tracts.csv", SHARED)
        go_to(a, "Release")
        click(a, a_main.get_by_role("button", name=re.compile(r"^Release with ε = 0\.5")))
        a_main.get_by_text(re.compile(r"^Released tracts\.csv with Privelet.*ε = 0\.5 of 1 is left")).wait_for()
        a_side.get_by_text(re.compile(r"spent ε = 0\.5 of 1")).wait_for()

        # session B uploads other data: none of A's release, table or budget is visible
        b, b_main, b_side = open_census(b_ctx, app_url, "other.csv", OTHER)
        b_side.get_by_text(re.compile(r"spent ε = 0 of 1")).wait_for()
        go_to(b, "Release")
        b_main.get_by_text("Nothing has been released from this table yet.").wait_for()
        assert b_main.get_by_text(re.compile(r"^Released ")).count() == 0  # not A's release

        # session C uploads the same data as A (under another file name): the budget follows the
        # content, so it continues
        c, c_main, c_side = open_census(c_ctx, app_url, "same.csv", SHARED)
        c_side.get_by_text(re.compile(r"spent ε = 0\.5 of 1")).wait_for()
        go_to(c, "History")
        c_main.get_by_role("heading", name=re.compile(r"^(.+ \()?Census table\)? · 1 release$")).wait_for()
        # and A, after a reload (a new session that opens the same table again), still sees its budget
        a.close()
        a, a_main, a_side = open_census(a_ctx, app_url, "tracts.csv", SHARED)
        a_side.get_by_text(re.compile(r"spent ε = 0\.5 of 1")).wait_for()
    finally:
        for ctx in (a_ctx, b_ctx, c_ctx):
            ctx.close()
