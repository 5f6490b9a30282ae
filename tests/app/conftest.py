"""AppTest set-up shared by the files of tests/app: two costs of Streamlit's test harness, paid once.

Neither changes what a test runs or asserts; both were found with py-spy over tests/app/test_od_page.py
and test_pages.py (benchmarks/results/test_suite_profile.md, 2026-11-29).
"""

from __future__ import annotations

import functools

import streamlit.components.v2.manifest_scanner as _manifests
import streamlit.testing.v1.local_script_runner as _runner


def _wait_for_the_script(runner: _runner.LocalScriptRunner, timeout: float = 3) -> None:
    """Wait for an AppTest run's script thread as Streamlit's ``require_widgets_deltas`` does, on the
    thread itself instead of polling.

    Streamlit 1.67 polls every millisecond and on each poll scans every event of the run (one per
    element drawn) for its end, taking the GIL from the script it waits for: about 20 ms of CPU per
    second waited (800 events; measured), so the more a run waits for a core on a busy machine, the
    more CPU it spends.  The script thread sends SHUTDOWN and then returns, so joining it waits
    exactly as long; a run over ``timeout`` is stopped and reported with Streamlit's own message."""
    thread = runner._script_thread
    if thread is not None:
        thread.join(timeout)
    if runner.script_stopped():
        return
    runner.request_stop()
    runner.join()
    raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")


# LocalScriptRunner.run looks the function up in its module at each run
_runner.require_widgets_deltas = _wait_for_the_script

# Every new AppTest scans every installed distribution's metadata for Streamlit components (v2) on
# its first run (AppTest._run -> BidiComponentManager.discover_and_register_components): 0.21 s of
# CPU per AppTest (measured; about 210 AppTests in tests/app); the installed packages do not change
# during a test run, so the scan is made once.
# (discover_and_register_components imports the function from its module at each call.)
_manifests.scan_component_manifests = functools.cache(_manifests.scan_component_manifests)
