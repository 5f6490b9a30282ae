"""Start the app's server (``./run``): ``python -m ui.serve app.py [--workers N] [streamlit options]``.

``--workers N`` (or ``$DPCORE_WORKERS``; ``auto``: one per core) serves the address with N such
servers behind a sticky front (:mod:`ui.workers`, :mod:`ui.front`): for many curators at once.  The
default is one.

The same as ``streamlit run app.py ...``, after importing the app's modules and the libraries they
use and moving every object then alive to the garbage collector's permanent generation
(:func:`gc.freeze`, issue 28 item 5).  Python's automatic full collections then no longer walk the
hundreds of thousands of objects of plotly, pandas, Streamlit and the rest: with Streamlit's own
collection after every run switched off (.streamlit/config.toml), they still came every other
Release step and took 0.06-0.19 s of CPU each, in whatever session's script thread allocated then.

Frozen here, before the server exists, so that no browser session's objects are ever frozen: frozen
reference cycles are never collected, and a session's state (a curator's uploaded table, its true
counts) must be freed when the session ends.  The app froze on its first run before, which kept the
first session's state for the life of the process (review finding).  ``streamlit run app.py``
still works, without the freeze.

Each server of ``--workers N`` also warms itself once it listens (:func:`warm_up`: the app's first page
in a session of its own, charging nothing), so that no curator's first page pays the server's first run.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import logging
import os
import pkgutil
import sys
import threading
import time

from ui.options import take_options

#: The garbage collector's thresholds for the app's server and the test processes (Python's default is
#: (700, 10, 10)).  A young-generation collection ran every 700 net allocations of container objects,
#: and the app's steps (pandas frames, plotly figures, Streamlit's protobufs) allocate millions: with
#: 10,000 the same tests took 13 % less CPU (tests/app/test_od_page.py, test_hierarchy_page.py and
#: tests/unit/points in one process: 66.2-72.6 s of user CPU with the default, 57.2-60.6 s with 10,000 to
#: 200,000; benchmarks/results/test_suite_profile.md), for 4-30 % more peak memory.  Only *when* cyclic
#: garbage is found changes: objects without cycles are still freed at once by reference counting, and
#: what a closed session leaves in cycles (every plotly figure is one: its layout points back to it) by
#: the server's collection every :data:`COLLECT_EVERY` seconds (:func:`collect_periodically`).
GC_THRESHOLDS = (10_000, 10, 10)
#: Seconds between the server's full collections.
COLLECT_EVERY = 60.0


def tune_gc() -> None:
    """Set :data:`GC_THRESHOLDS` for this process (the server's, a test run's)."""
    gc.set_threshold(*GC_THRESHOLDS)


def collect_periodically(interval: float = COLLECT_EVERY, stop: threading.Event | None = None) -> threading.Thread:
    """Start a daemon thread that runs a full collection every ``interval`` seconds (until ``stop`` is
    set).  A closed session's figures, a curator's true-density preview among them, are reference
    cycles: without this they waited for the next automatic full collection, which an idle server
    never makes (Streamlit's collection after every run is off in .streamlit/config.toml).  Within a
    minute they are freed; with the libraries frozen (:func:`freeze_libraries`) a collection walks
    only the sessions' objects."""
    stop = stop or threading.Event()

    def run() -> None:
        while not stop.wait(interval):
            gc.collect()

    thread = threading.Thread(target=run, name="dpcore-collect", daemon=True)
    thread.start()
    return thread


def freeze_libraries() -> int:
    """Import every module of :mod:`ui` (and so the library and what both use), collect, freeze;
    return the number of objects frozen.  Call it before any session exists."""
    # st.cache_data at import time, before the server's runtime: "No runtime found" is expected here
    from streamlit.logger import get_logger

    import ui

    quiet = get_logger("streamlit.runtime.caching.cache_data_api")  # the one its module will use
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        for info in pkgutil.walk_packages(ui.__path__, "ui."):
            importlib.import_module(info.name)
    finally:
        quiet.setLevel(level)
    return freeze_alive()


def freeze_alive() -> int:
    """Collect, then move every object alive to the permanent generation (:func:`gc.freeze`), given
    back to the collector at exit; return the number frozen.  The server calls it before any session
    exists, the test processes after collection."""
    gc.collect()
    gc.freeze()
    # back to the collector at exit, so that shutdown frees them as before (DuckDB's bindings
    # otherwise report their objects as leaked)
    atexit.register(gc.unfreeze)
    return gc.get_freeze_count()


#: "1": the server warms itself (:func:`warm_up`).  :mod:`ui.workers` sets it for each server it
#: starts unless the environment says otherwise (``DPCORE_WARM_UP=0 ./run --workers N``: no warm-up).
WARM_UP_ENV = "DPCORE_WARM_UP"
#: Seconds the warm-up waits for the server to listen, then for its run (it starts after the imports of
#: :func:`freeze_libraries`, so this bounds Streamlit's own start and one page: generous, for a loaded
#: machine).
WARM_UP_TIMEOUT = 300.0


def warm_up(port: int, timeout: float = WARM_UP_TIMEOUT) -> float | None:
    """Once this process listens on ``port``, run the app's first page in a session of its own, as a
    browser's first visit does (Streamlit's websocket protocol: one run of the root URL), and close it;
    return the seconds the run took, or None when it could not be made (said on stderr; the server
    serves as before).

    A new server's first session pays what later ones find ready: Streamlit's first-run work (its emoji
    table for the page icon, a look at the caller's stack) and the caches of public figures, about 0.2
    CPU-seconds of the Data step (benchmarks/results/workers_cost.md).  Without the warm-up the first
    curator on each of ``--workers N`` servers paid it.

    Nothing is charged and nothing is kept: the run is the root URL's (the Data step with the demo's
    made-up points) and touches no widget, so nothing is released (a page run never draws noise,
    DESIGN.md's rule 4); the demo's budget lives in the session's own temporary database, and the
    shared budget database is not opened.  The session goes when the connection closes, as a closed
    browser tab's does.  Only this process's own socket is used (:func:`ui.workers.own_listener`): a
    program that took the port first gets nothing.
    """
    deadline = time.monotonic() + timeout
    try:
        from streamlit import config
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
        from websockets.sync.client import connect

        from ui.workers import own_listener

        # websockets is Streamlit's dependency, not ours: were it gone, the warm-up says so below

        while own_listener(os.getpid(), port) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"not listening on port {port} after {timeout:.0f} s")
            time.sleep(0.2)
        path = str(config.get_option("server.baseUrlPath") or "").strip("/")  # read once the server runs
        url = f"ws://127.0.0.1:{port}/{path + '/' if path else ''}_stcore/stream"
        start = time.monotonic()
        with connect(url, subprotocols=["streamlit"], max_size=None, proxy=None, compression=None,
                     open_timeout=30) as ws:
            msg = BackMsg()
            msg.rerun_script.query_string = ""  # the root URL, no widget state: nothing clicked
            ws.send(msg.SerializeToString())
            while True:
                fm = ForwardMsg()
                fm.ParseFromString(ws.recv(timeout=max(0.0, deadline - time.monotonic())))
                if (fm.WhichOneof("type") == "script_finished"
                        and fm.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN):
                    return time.monotonic() - start
    except Exception as e:  # noqa: BLE001 - a warm-up that fails leaves the server as it was
        print(f"The app server on port {port} could not warm itself ({e!r}); its first session does.",
              file=sys.stderr, flush=True)
        return None


def warm_up_later(argv: list[str]) -> threading.Thread | None:
    """Start :func:`warm_up` in a daemon thread when ui.workers asked for it (:data:`WARM_UP_ENV`) and
    ``argv`` names the port (the workers' commands do)."""
    port = take_options(argv, ("--server.port",))[0].get("--server.port", "")
    if os.environ.get(WARM_UP_ENV) != "1" or not port.isdigit():
        return None
    thread = threading.Thread(target=warm_up, args=(int(port),), name="dpcore-warm-up", daemon=True)
    thread.start()
    return thread


#: The environment variable that sets ``--workers`` when the option is not given.
WORKERS_ENV = "DPCORE_WORKERS"


def workers_option(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, list[str]]:
    """``--workers N`` (or ``auto``: one per core) among ``argv``, else ``$DPCORE_WORKERS``, else 1; and
    ``argv`` without it.

    >>> workers_option(["app.py", "--workers", "3", "--server.port", "8600"], {})
    (3, ['app.py', '--server.port', '8600'])
    >>> workers_option(["app.py"], {"DPCORE_WORKERS": "2"})
    (2, ['app.py'])
    """
    found, rest = take_options(argv, ("--workers",))
    value = found.get("--workers", (os.environ if env is None else env).get(WORKERS_ENV, "1"))
    if value == "auto":  # the cores this process may use (a container's or taskset's limit included)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        return max(1, cores or 1), rest
    if not value.isdigit() or int(value) < 1:
        raise SystemExit(f"--workers {value!r} is not a number of app servers: give 1 or more, or auto "
                         "(one per core)")
    return int(value), rest


def main(argv: list[str]) -> int:
    workers, argv = workers_option(argv)
    if workers > 1:  # several servers behind one address (ui/workers.py); each comes back here with 1
        from ui import workers as servers

        return servers.serve(argv, workers)
    tune_gc()
    freeze_libraries()
    collect_periodically()
    warm_up_later(argv)
    from streamlit.web import cli

    return cli.main(["run", *argv], prog_name="streamlit", standalone_mode=False) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
