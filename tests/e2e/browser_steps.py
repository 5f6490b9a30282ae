"""Steps every browser test takes, in one place: wait until the app is idle, then click.

A click that lands while Streamlit still runs the script (drawing the step after a navigation, an
upload or a widget change) can be lost: the rerun it triggers is merged with, or replaced by, the
one in progress, and the confirmation the test waits for never comes (one clean-clone run of
tests/e2e/test_kinds_browser.py failed so: the Release click on the US tracts was lost while the
step still drew).  So every click below first waits until Streamlit's running icon is hidden.
"""

from __future__ import annotations

import os
import re
import time

from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

#: How long a step may keep running before a click gives up (TopDown on 85,395 tracts, the series).
IDLE_TIMEOUT_MS = 180_000
MAP_TIMEOUT_MS = 90_000  # WebGL is software-rendered here
#: How long a select box's list may take to open after its click before the click counts as lost
LIST_OPEN_TIMEOUT_MS = 3_000
#: Shown by Streamlit's status widget while the script runs; hidden (or absent) when it is idle.
RUNNING_ICON = "stStatusWidgetRunningIcon"
#: The stApp element's data-test-script-state when no run is going (set at once, unlike the icon).
SCRIPT_IDLE = "notRunning"
#: A folder for screenshots of the pages the tests reach, for a reader (no test reads them); unset,
#: none is taken: each costs chromium a repaint and a PNG encoding.
SCREENS = os.environ.get("E2E_SCREENS")


def wait_idle(page, timeout: float = IDLE_TIMEOUT_MS) -> None:
    """Wait until the app's script has finished running (the running icon hidden or absent)."""
    page.get_by_test_id(RUNNING_ICON).wait_for(state="hidden", timeout=timeout)


def settle(page, shown, *, quiet_ms: int = 2_000, timeout: float = IDLE_TIMEOUT_MS) -> bool:
    """Wait until ``shown`` (a locator) is visible, or until the app has stayed idle for ``quiet_ms``
    (no run started since: every run a click asked for has ended, callbacks included: the app's
    script state says "running" from the start of a run, before its callbacks).  Returns
    whether ``shown`` was seen.  A condition, not a fixed wait: it replaces "wait 20 s for the
    confirmation, then look again" where the confirmation may legitimately not be drawn."""
    app = page.get_by_test_id("stApp")
    idle_since = None
    deadline = time.monotonic() + timeout / 1000
    while time.monotonic() < deadline:
        if shown.first.is_visible():
            return True
        # the app's script state, not the running icon: Streamlit shows the icon only once a run has
        # lasted 500 ms, so a quiet period read from it could end inside a run
        if app.first.get_attribute("data-test-script-state") != SCRIPT_IDLE:
            idle_since = None
        elif idle_since is None:
            idle_since = time.monotonic()
        elif (time.monotonic() - idle_since) * 1000 >= quiet_ms:
            return shown.first.is_visible()
        page.wait_for_timeout(100)
    raise PlaywrightTimeoutError(f"the app neither showed {shown} nor stayed idle within {timeout} ms")


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
    again, up to three times.  The click goes to the box's control, not its middle: where a long label
    wraps, the middle of the box can be the label, which opens nothing."""
    for attempt in range(3):
        click(page, selectbox.get_by_role("combobox").first)
        try:
            # an open list shows within a frame or two; a click the rerun swallowed shows none, and
            # waiting the whole ``timeout`` for its option cost 20 s a miss (test_matrix_browser)
            page.get_by_role("listbox").first.wait_for(timeout=LIST_OPEN_TIMEOUT_MS)
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


def keep_screenshot(page, name: str, **kwargs) -> None:
    """A screenshot of ``page`` into ``E2E_SCREENS`` as ``name`` when that folder is set."""
    if SCREENS:
        os.makedirs(SCREENS, exist_ok=True)
        page.screenshot(path=os.path.join(SCREENS, name), **kwargs)


def open_census(context, app_url, name: str, data: bytes):
    """A new session: Data step → counts over areas → a census table → upload ``data``."""
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(f"{app_url}/data?kind=areas")  # a link naming the kind of data: its Data step first
    main = page.get_by_test_id("stMain")
    click(page, main.get_by_text(re.compile(r"^A census table with attributes")))
    click(page, main.get_by_role("radiogroup", name="Source").get_by_text("Upload a file"))  # the census form's, not the points step's
    main.get_by_text("Upload a census table, or use the built-in synthetic census.").wait_for()
    wait_idle(page)
    main.locator('input[type="file"]').first.set_input_files(
        files=[{"name": name, "mimeType": "text/csv", "buffer": data}])
    main.get_by_text(re.compile(rf"Source: {re.escape(name)}, 3 rows")).wait_for()
    return page, main, page.get_by_test_id("stSidebar")
