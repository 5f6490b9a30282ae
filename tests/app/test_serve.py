"""./run's server freezes the libraries' objects for the garbage collector before any session exists
(``ui.serve``), and the app's own runs freeze nothing: a frozen reference cycle is never collected, so
a session's state (a curator's upload, its true counts) frozen on the server's first run outlived the
session (review finding)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_the_apps_runs_freeze_no_object() -> None:
    """A fresh process (no test worker's freeze) runs the app's first page: nothing frozen."""
    frozen = _python("import gc\nfrom streamlit.testing.v1 import AppTest\n"
                     "at = AppTest.from_file('app.py', default_timeout=240).run()\n"
                     "assert not at.exception, at.exception\nprint(gc.get_freeze_count())")
    assert frozen == "0"


def test_the_server_freezes_the_libraries_before_any_session() -> None:
    frozen, runtime = _python("import streamlit.runtime as rt\nfrom ui.serve import freeze_libraries\n"
                              "n = freeze_libraries()\nprint(n, rt.exists())").split()
    assert int(frozen) > 50_000 and runtime == "False"  # plotly's, pandas', Streamlit's objects ...


def test_the_server_sets_the_collectors_thresholds_before_it_starts(monkeypatch) -> None:
    """``main`` sets :data:`ui.serve.GC_THRESHOLDS` before the freeze and Streamlit's own ``run``."""
    import gc

    from streamlit.web import cli

    import ui.serve as serve

    seen: list[tuple[int, ...]] = []
    monkeypatch.setattr(serve, "freeze_libraries", lambda: seen.append(gc.get_threshold()))
    monkeypatch.setattr(cli, "main", lambda args, **kw: seen.append(tuple(args)) or 0)
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)  # Python's default
        assert serve.main(["app.py", "--server.port", "1"]) == 0
        assert seen == [serve.GC_THRESHOLDS, ("run", "app.py", "--server.port", "1")]
        assert gc.get_threshold() == serve.GC_THRESHOLDS != (700, 10, 10)
    finally:
        gc.set_threshold(*before)
