"""./run's server freezes the libraries' objects for the garbage collector before any session exists
(``ui.serve``), and the app's own runs freeze nothing: a frozen reference cycle is never collected, so
a session's state (a curator's upload, its true counts) frozen on the server's first run outlived the
session (review finding)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter; its last two lines of output."""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-2:]


def test_the_apps_runs_freeze_nothing_and_the_server_freezes_the_libraries() -> None:
    """In one fresh process (no test worker's freeze; one interpreter's imports, not two): the app's
    first page runs and freezes nothing; then the server's freeze takes the libraries' objects.
    (That the server freezes before Streamlit's runtime exists:
    test_the_server_sets_the_collectors_thresholds_before_it_starts.)"""
    frozen = _python("import gc\nfrom streamlit.testing.v1 import AppTest\n"
                     "at = AppTest.from_file('app.py', default_timeout=240).run()\n"
                     "assert not at.exception, at.exception\nprint(gc.get_freeze_count())\n"
                     "from ui.serve import freeze_libraries\nprint(freeze_libraries())")
    by_app, by_server = frozen
    assert by_app == "0"
    assert int(by_server) > 50_000  # plotly's, pandas', Streamlit's objects ...


def test_the_server_sets_the_collectors_thresholds_before_it_starts(monkeypatch) -> None:
    """``main`` sets :data:`ui.serve.GC_THRESHOLDS` before the freeze and Streamlit's own ``run``."""
    monkeypatch.delenv("DPCORE_WORKERS", raising=False)  # one server, whatever the shell says
    import gc

    from streamlit.web import cli

    import ui.serve as serve

    seen: list[Any] = []
    monkeypatch.setattr(serve, "freeze_libraries", lambda: seen.append(gc.get_threshold()))
    monkeypatch.setattr(serve, "collect_periodically", lambda: seen.append("collector"))
    monkeypatch.setattr(cli, "main", lambda args, **kw: seen.append(tuple(args)) or 0)
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)  # Python's default
        assert serve.main(["app.py", "--server.port", "1"]) == 0
        assert seen == [serve.GC_THRESHOLDS, "collector", ("run", "app.py", "--server.port", "1")]
        assert gc.get_threshold() == serve.GC_THRESHOLDS != (700, 10, 10)
    finally:
        gc.set_threshold(*before)


def test_the_servers_collector_frees_a_closed_sessions_figures_without_an_automatic_collection() -> None:
    """A plotly figure is a reference cycle: dropped by its session, it is freed by the server's own
    periodic collection even when Python's automatic collections do not run (review finding)."""
    import gc
    import threading
    import time
    import weakref

    import plotly.graph_objects as go

    import ui.serve as serve

    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]))
    alive = weakref.ref(fig)
    was = gc.isenabled()
    gc.disable()  # no automatic collection: only the collector thread can free the cycle
    stop = threading.Event()
    try:
        del fig
        assert alive() is not None  # a cycle: reference counting alone does not free it
        thread = serve.collect_periodically(0.05, stop)
        deadline = time.monotonic() + 10
        while alive() is not None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert alive() is None
    finally:
        stop.set()
        if was:
            gc.enable()
    thread.join(timeout=5)
    assert not thread.is_alive()
