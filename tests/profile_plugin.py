"""Where the suite's time goes: ``DPCORE_TEST_PROFILE=DIR ./test`` writes one JSON per pytest process
(the xdist controller and each worker) to DIR, with the session's start, the end of collection, and
each test's phases (setup, call, teardown) as wall-clock start/stop.  benchmarks/test_suite_profile.py
reads them.  Off unless the variable is set; loaded from tests/conftest.py.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

_OUT = os.environ.get("DPCORE_TEST_PROFILE")


class _Profile:
    def __init__(self, config: pytest.Config) -> None:
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", "controller")
        self.t0 = time.time()
        self.collected_at: float | None = None
        self.tests: list[dict] = []

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected_at = time.time()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.worker == "controller" and hasattr(report, "node"):
            return  # the controller sees the workers' reports too; the workers write their own
        self.tests.append({"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome,
                           "start": report.start, "stop": report.stop, "duration": report.duration})

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        out = Path(_OUT)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{self.worker}.json").write_text(json.dumps({
            "worker": self.worker, "pid": os.getpid(), "started": self.t0,
            "collected": self.collected_at, "finished": time.time(), "tests": self.tests}))


def pytest_configure(config: pytest.Config) -> None:
    if _OUT:
        config.pluginmanager.register(_Profile(config), "dpcore_test_profile")
