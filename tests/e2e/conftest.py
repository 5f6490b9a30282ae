"""Browser tests: the app served by a real Streamlit server, driven by Debian's chromium.

Playwright's own browsers cannot be downloaded here (no network), so
pytest-playwright's launch arguments point at /usr/bin/chromium.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from browser_steps import SCREENS  # the one reading of E2E_SCREENS

from ui.workers import free_port

CHROMIUM = "/usr/bin/chromium"
#: Debian's headless build of the same chromium (package chromium-headless-shell, what Playwright runs
#: for headless tests): no browser UI layer, less CPU per page (benchmarks/results/test_suite_profile.md).
HEADLESS_SHELL = "/usr/lib/chromium/chromium-headless-shell"
REPO = Path(__file__).resolve().parents[2]
SERVER_START_TIMEOUT = 90  # s
#: The pages' size: wide enough for the app's desktop layout (the sidebar open beside the step), small
#: enough that chromium paints and composites about half the pixels of 1400x900 (maps and charts are
#: drawn in software here)
VIEWPORT = {"width": 1024, "height": 640}


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {
        **browser_type_launch_args,
        "executable_path": HEADLESS_SHELL if os.path.exists(HEADLESS_SHELL) else CHROMIUM,
        # --process-per-site: the pages of one context on 127.0.0.1 share one renderer process, so
        # a test's page starts with the app's scripts (Streamlit, Plotly, MapLibre) already compiled
        "args": ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--process-per-site"],
    }


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "accept_downloads": True,
            "viewport": VIEWPORT}


@pytest.fixture(scope="session")
def worker_context(browser, browser_context_args, app_url):
    """One browser context per test process for the tests' pages, with a page of the app's host kept
    open: with ``--process-per-site`` every test's page then runs in that warm renderer (the second and
    later page loads and steps cost about a quarter less chromium CPU than in a context of their own).
    Each test still gets a page of its own, i.e. a Streamlit session of its own; request events fire
    for cached files too, so the offline checks see every request."""
    context = browser.new_context(**browser_context_args)
    holder = context.new_page()
    holder.goto(f"{app_url}/_stcore/health")
    yield context
    context.close()


@pytest.fixture
def page(worker_context):
    """A new page (a new Streamlit session) in the worker's context; its local storage is cleared and
    the page closed afterwards."""
    page = worker_context.new_page()
    yield page
    try:
        page.evaluate("() => localStorage.clear()")
    except Exception:  # noqa: BLE001 (a page the test closed or broke)
        pass
    page.close()


_LEDGER_DBS: dict[str, str] = {}  # server URL -> its budget database


@pytest.fixture
def app_ledger_db(app_url) -> str:
    """The budget database of the server at ``app_url`` (for a CLI run that shares its budget)."""
    return _LEDGER_DBS[app_url]


@contextmanager
def _streamlit_server(workers: int = 1) -> Iterator[str]:
    """Start the app's server as ``./run`` does (``python -m ui.serve app.py``: Streamlit's ``run``
    after the libraries are imported and frozen, with the server's garbage-collector thresholds) on a
    free port with a budget database of its own; yield its URL; stop it afterwards.  ``workers``:
    ``./run --workers N`` (N servers behind ui/front.py's sticky front)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [
        sys.executable, "-m", "ui.serve", "app.py", f"--workers={workers}",
        "--server.headless=true", f"--server.port={port}", "--server.address=127.0.0.1",
        "--browser.gatherUsageStats=false", "--server.fileWatcherType=none",
        # no full garbage collection after every script run (Streamlit's default, runner.postScriptGC):
        # a collection of every generation per rerun was about an eighth of the server's CPU during the
        # tests' page loads and steps.  The app's .streamlit/config.toml now says the same (issue 28
        # item 5); the flag keeps the tests' servers so if that file changes.
        "--runner.postScriptGC=false",
    ]
    # a file, not a pipe: a full pipe would block the server
    # a budget database of its own: budgets persist by design, so servers must not share one
    with tempfile.TemporaryFile() as log, tempfile.TemporaryDirectory() as db_dir:
        env = dict(os.environ, DPCORE_LEDGER_DB=os.path.join(db_dir, "ledger.sqlite"))
        # "Files on this computer" is off unless a data folder is set: the tests' files live under tmp
        env.setdefault("DPCORE_DATA_ROOT", os.path.realpath(tempfile.gettempdir()))
        _LEDGER_DBS[url] = env["DPCORE_LEDGER_DB"]
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + SERVER_START_TIMEOUT
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    pytest.fail(f"streamlit exited with {proc.returncode}:\n"
                                f"{log.read().decode(errors='replace')[-4000:]}")
                try:
                    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                        if r.read().strip() == b"ok":
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    log.seek(0)
                    pytest.fail(f"streamlit did not answer on {url} within {SERVER_START_TIMEOUT} s:\n"
                                f"{log.read().decode(errors='replace')[-4000:]}")
                time.sleep(0.25)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


@pytest.fixture(scope="session")
def app_url():
    """The URL of the app served by one Streamlit server per test process (per xdist worker), shared
    by the browser files: a server's start and its first session's imports are paid once, not once
    per file.

    Safe to share because every browser test opens sessions of its own (a new page, a new Streamlit
    session, in its worker's shared browser context, whose local storage each test's teardown clears),
    the made-up demos' budgets live with the browser session (``ui.state.mark_demo``), and the real
    data each file releases (its own uploads, the US tracts, Rhode Island's LODES) is released by no
    other file, so no file's budget reading depends on another's releases.  A file whose test needs
    a server no session has used yet asks for ``fresh_app_url`` instead (test_deep_links: the first
    request a new server gets)."""
    with _streamlit_server() as url:
        yield url


@pytest.fixture(scope="module")
def fresh_app_url():
    """The URL of a Streamlit server of this module's own, started for it (no session has run on it)."""
    with _streamlit_server() as url:
        yield url


@pytest.fixture(scope="module")
def workers_app_url():
    """The URL of two app servers behind one front (``./run --workers 2``), for this module alone."""
    with _streamlit_server(workers=2) as url:
        yield url


# ---- when E2E_SCREENS names a folder, a failed test leaves a full-page screenshot of its page there



@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed and SCREENS and "page" in getattr(item, "funcargs", {}):
        try:
            os.makedirs(SCREENS, exist_ok=True)
            item.funcargs["page"].screenshot(path=os.path.join(SCREENS, f"FAILED-{item.name}.png"), full_page=True)
        except Exception:  # noqa: BLE001 (a screenshot must not hide the failure)
            pass
