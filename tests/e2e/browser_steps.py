"""Steps every browser test takes, in one place: wait until the app is idle, then click.

A click that lands while Streamlit still runs the script (drawing the step after a navigation, an
upload or a widget change) can be lost: the rerun it triggers is merged with, or replaced by, the
one in progress, and the confirmation the test waits for never comes (one clean-clone run of
tests/e2e/test_kinds_browser.py failed so: the Release click on the US tracts was lost while the
step still drew).  So every click below first waits until Streamlit's running icon is hidden.
"""

from __future__ import annotations

import re

from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

#: How long a step may keep running before a click gives up (TopDown on 85,395 tracts, the series).
IDLE_TIMEOUT_MS = 180_000
MAP_TIMEOUT_MS = 90_000  # WebGL is software-rendered here
#: Shown by Streamlit's status widget while the script runs; hidden (or absent) when it is idle.
RUNNING_ICON = "stStatusWidgetRunningIcon"


def wait_idle(page, timeout: float = IDLE_TIMEOUT_MS) -> None:
    """Wait until the app's script has finished running (the running icon hidden or absent)."""
    page.get_by_test_id(RUNNING_ICON).wait_for(state="hidden", timeout=timeout)


def click(page, locator, **kwargs) -> None:
    """``locator.click(**kwargs)`` once the app is idle."""
    wait_idle(page)
    locator.click(**kwargs)


def enter(page, box, value: str) -> None:
    """Type ``value`` into the text or number box ``box`` once the app is idle, then press Enter."""
    wait_idle(page)
    box.fill(value)
    box.press("Enter")


def go_to(page, label: str) -> None:
    """Click a step's link in the sidebar (its icon is a ligature like "map", so match the label
    inside its text) once the app is idle, then wait for the step's heading."""
    click(page, page.locator('[data-testid="stSidebarNav"] a', has_text=label).first)
    page.get_by_test_id("stMain").get_by_role("heading", name=label, exact=True).first.wait_for()


def pick_option(page, selectbox, name: str | re.Pattern[str], *, timeout: float = 15_000) -> None:
    """Pick the option ``name`` in ``selectbox``.  A click that lands while the page is still running
    can leave the list closed, so each try waits for the app to be idle, and the list is opened
    again, up to three times."""
    for attempt in range(3):
        click(page, selectbox)
        try:
            page.get_by_role("option", name=name).click(timeout=timeout)
            return
        except PlaywrightTimeoutError:
            if attempt == 2:
                raise
            page.keyboard.press("Escape")
            page.wait_for_timeout(500)


def download(page, label: str, tmp_path) -> bytes:
    """Click the download button ``label`` of the current step once the app is idle; check the
    file's name; return its bytes."""
    with page.expect_download() as info:
        click(page, page.get_by_test_id("stMain").get_by_role("button", name=label))
    d = info.value
    assert d.suggested_filename == label.removeprefix("Download ")
    target = tmp_path / d.suggested_filename
    d.save_as(target)
    return target.read_bytes()


def wait_for_map(page, within=None) -> None:
    """Wait until MapLibre has drawn the first map of the page (in ``within``, else anywhere)."""
    (within or page).locator(".js-plotly-plot .maplibregl-canvas").first.wait_for(timeout=MAP_TIMEOUT_MS)
    page.wait_for_function(
        """() => {
            const gd = document.querySelector('.js-plotly-plot');
            const m = gd && gd._fullLayout && gd._fullLayout.map && gd._fullLayout.map._subplot;
            return !!(m && m.map && m.map.loaded());
        }""",
        timeout=MAP_TIMEOUT_MS,
    )
