"""./run's server freezes the libraries' objects for the garbage collector before any session exists
(``ui.serve``), and the app's own runs freeze nothing: a frozen reference cycle is never collected, so
a session's state (a curator's upload, its true counts) frozen on the server's first run outlived the
session (review finding)."""

from __future__ import annotations

import subprocess
import sys
import time
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
    monkeypatch.delenv("DPCORE_WARM_UP", raising=False)
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


def test_the_warm_up_runs_the_root_page_once_touching_nothing_and_closes(monkeypatch) -> None:
    """ui.serve.warm_up against a stand-in of Streamlit's websocket end (in this process, so its socket
    is this process's own): one run of the root URL, no widget state (nothing clicked, so nothing is
    released or charged), done at the run that finishes (not the one replaced by the app's page switch),
    then the connection is closed.

    No sleep decides it: the stand-in sends the run that finishes only once the warm-up asks for a
    message after the replaced run (its connection's recv is watched); a warm-up that stops at the
    replaced run closes instead, and that second message is never sent."""
    import threading

    import websockets.sync.client as ws_client
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.sync.server import serve as ws_serve

    import ui.serve as serve

    seen: list[Any] = []
    asked_again, moved, second_sent = threading.Event(), threading.Event(), threading.Event()
    real_connect = ws_client.connect

    def connect(*args: Any, **kwargs: Any) -> Any:
        conn = real_connect(*args, **kwargs)
        recv, close, calls = conn.recv, conn.close, [0]

        def watched_recv(*a: Any, **k: Any) -> Any:
            calls[0] += 1
            if calls[0] == 2:  # the warm-up reads on after the replaced run
                asked_again.set()
                moved.set()
            return recv(*a, **k)

        def watched_close(*a: Any, **k: Any) -> Any:
            moved.set()
            return close(*a, **k)

        conn.recv, conn.close = watched_recv, watched_close
        return conn

    monkeypatch.setattr(ws_client, "connect", connect)

    def finished(status: Any) -> bytes:
        fm = ForwardMsg()
        fm.script_finished = status
        return fm.SerializeToString()

    def handler(ws) -> None:
        seen.append((ws.request.path, ws.subprotocol))
        msg = BackMsg()
        msg.ParseFromString(ws.recv())
        seen.append(msg)
        ws.send(finished(ForwardMsg.FINISHED_EARLY_FOR_RERUN))  # app.py switches to the Data step
        moved.wait(timeout=30)  # the warm-up either asks for the next message or closes
        if asked_again.is_set():
            second_sent.set()
            ws.send(finished(ForwardMsg.FINISHED_SUCCESSFULLY))
        for _ in ws:  # until the warm-up closes
            seen.append("more")
        seen.append("closed")

    with ws_serve(handler, "127.0.0.1", 0, subprotocols=["streamlit"]) as server:
        port = server.socket.getsockname()[1]
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        took = serve.warm_up(port, timeout=30)
        waited = second_sent.is_set()
        deadline = time.monotonic() + 10
        while seen[-1] != "closed" and time.monotonic() < deadline:
            time.sleep(0.02)
        server.shutdown()
    assert took is not None and took >= 0
    assert waited  # the warm-up returned only after the run that finishes was sent
    (path, protocol), msg, closed = seen
    assert (path, protocol, closed) == ("/_stcore/stream", "streamlit", "closed")
    assert msg.WhichOneof("type") == "rerun_script"
    assert msg.rerun_script.query_string == msg.rerun_script.page_script_hash == ""
    assert not msg.rerun_script.widget_states.widgets  # no widget, no button: nothing released


def test_a_warm_up_that_cannot_be_made_is_said_and_the_server_goes_on(capsys) -> None:
    """A port this process does not listen on (another program's, or none): no connection is made."""
    import ui.serve as serve
    from ui.workers import free_port

    assert serve.warm_up(free_port(), timeout=0.3) is None
    assert "could not warm itself (TimeoutError('not listening on port" in capsys.readouterr().err


def test_the_workers_ask_their_servers_to_warm_up_unless_told_not_to(monkeypatch) -> None:
    import ui.serve as serve
    from ui.workers import Workers

    ports: list[int] = []
    monkeypatch.setattr(serve, "warm_up", lambda port: ports.append(port))
    monkeypatch.delenv(serve.WARM_UP_ENV, raising=False)
    assert serve.warm_up_later(["app.py", "--server.port=9001"]) is None  # one server (./run): no warm-up
    assert Workers(1, ["app.py"]).env[serve.WARM_UP_ENV] == "1"  # the workers' servers: warm up
    monkeypatch.setenv(serve.WARM_UP_ENV, "0")
    assert Workers(1, ["app.py"]).env[serve.WARM_UP_ENV] == "0"  # DPCORE_WARM_UP=0 ./run --workers N
    monkeypatch.setenv(serve.WARM_UP_ENV, "1")
    serve.warm_up_later(["app.py", "--server.port", "9000", "--server.port=9002"]).join(5)  # the last wins
    assert serve.warm_up_later(["app.py"]) is None
    assert ports == [9002]
