"""Where the suite's time goes: ``DPCORE_TEST_PROFILE=DIR ./test`` makes every pytest process (the
xdist controller and each worker) write DIR/<worker>.jsonl, one JSON object a line: its start, the
end of its collection, each test phase (setup, call, teardown) with wall-clock start and stop and this process's
CPU time in it, and its end.  Lines are written as they happen, so a run cut short still leaves its profile.
benchmarks/test_suite_profile.py summarises them.  Off unless the variable is set.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

_OUT = os.environ.get("DPCORE_TEST_PROFILE")


class _Profile:
    def __init__(self) -> None:
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", "controller")
        Path(_OUT).mkdir(parents=True, exist_ok=True)
        self.file = open(Path(_OUT) / f"{self.worker}.jsonl", "a", buffering=1)  # noqa: SIM115 (closed at the end)
        self.write(event="start", pid=os.getpid())

    def write(self, **fields: object) -> None:
        self.file.write(json.dumps({"worker": self.worker, "t": time.time(), **fields}) + "\n")

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.write(event="collected", n=len(session.items))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item):  # noqa: ANN201 (a hook wrapper)
        return (yield from self._cpu(item, "setup"))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):  # noqa: ANN201
        return (yield from self._cpu(item, "call"))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item):  # noqa: ANN201
        return (yield from self._cpu(item, "teardown"))

    def _cpu(self, item: pytest.Item, when: str):  # noqa: ANN202
        """CPU seconds of this process in the phase: unlike wall time, hardly changed by what else the
        machine runs (but blind to servers, browsers and the JVM, which run in other processes)."""
        c0 = time.process_time()
        try:
            return (yield)
        finally:
            self.write(event="cpu", nodeid=item.nodeid, when=when, cpu=time.process_time() - c0)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.worker == "controller" and hasattr(report, "node"):
            return  # a worker's report, relayed: the worker writes its own
        self.write(event="phase", nodeid=report.nodeid, when=report.when, outcome=report.outcome,
                   start=report.start, stop=report.stop, duration=report.duration)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.write(event="finish")
        self.file.close()


def pytest_configure(config: pytest.Config) -> None:
    if _OUT:
        config.pluginmanager.register(_Profile(), "dpcore_test_profile")
