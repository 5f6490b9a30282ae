"""Shared fixtures. Kept light: unit tests must not pay for importing Streamlit."""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any

import pytest
from hypothesis import settings
from profile_plugin import pytest_configure  # noqa: F401 (DPCORE_TEST_PROFILE=DIR: where the time goes)

# One BLAS/OpenMP thread per test process, as ./test sets it (for a bare `pytest`; read when numpy
# loads, which no import above does): pytest-xdist's workers already use every core, and
# OpenBLAS's spinning threads took them from each other.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

# The app server's garbage-collector thresholds in every test process too (ui/serve.py: the app tests
# run the app's script in this process, and everything else allocates as much), set before collection
# imports the test modules
from ui.serve import tune_gc  # noqa: E402 (standard library only at import)

tune_gc()

# Property tests explore a fixed sequence of examples (DESIGN.md: statistical and random tests fix
# their seed), so a run on a clean machine cannot fail on an example no earlier run saw.  Set
# HYPOTHESIS_PROFILE=explore to search with fresh randomness when hunting bugs locally.
settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def _collects_backwards(config: pytest.Config) -> bool:
    """Whether this process is an odd-numbered pytest-xdist worker (gw1, gw3 ...) collecting the whole
    suite (``testpaths``: the one folder ``tests``, so that sorting by path restores the usual order;
    paths given on the command line are collected in their own order, left as it is)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return (worker.startswith("gw") and worker[2:].isdigit() and int(worker[2:]) % 2 == 1
            and config.args_source == pytest.Config.ArgsSource.TESTPATHS and len(config.args) == 1)


def _scandir_backwards() -> bool:
    """Make pytest's collector of a directory list its entries backwards; whether it was done.

    pytest has no hook for the order in which it visits files, so this replaces a private function,
    ``_pytest.main.scandir`` (pytest 8 and 9: ``scandir(path, sort_key=...)`` returning a sorted list).
    It only ever changes an order: when pytest's internals differ (no such function, or one that cannot
    be called with a path alone) nothing is replaced and the worker collects in the usual order, only
    not sharing the work of a fresh clone; a result that is not a list is passed on as it is."""
    try:
        import _pytest.main

        scandir = _pytest.main.scandir
        inspect.signature(scandir).bind("tests")
    except (ImportError, AttributeError, TypeError, ValueError):
        return False

    def backwards(path: Any, *args: Any, **kwargs: Any) -> Any:
        entries = scandir(path, *args, **kwargs)
        return entries[::-1] if isinstance(entries, list) else entries

    _pytest.main.scandir = backwards
    return True


#: Every xdist worker collects every test, and on a fresh clone each rewrote the assertions of all
#: ~190 test modules for its bytecode cache at the same time as the other (collection 16.4 s against
#: 8.3 s with the caches, on 2 cores).  On a run of the whole suite (./test) the odd-numbered workers
#: import the test files backwards, so that each worker rewrites about half and finds the other half
#: cached by the other; their items are put back in the usual order before xdist compares the
#: workers' collections.  Any other run, or a pytest whose internals differ, collects as usual.
BACKWARDS = False


def pytest_sessionstart(session: pytest.Session) -> None:
    global BACKWARDS
    BACKWARDS = _collects_backwards(session.config) and _scandir_backwards()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if BACKWARDS:  # the usual order: by path, a file's items as defined (a stable sort)
        items.sort(key=lambda item: item.path.relative_to(config.rootpath).parts)


#: This process's main module as pytest (or an xdist worker) started it, before any AppTest ran.
_PYTEST_MAIN = sys.modules.get("__main__")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``./test`` runs pytest-xdist with ``--dist loadfile``: a test file's tests run on one worker,
    so its module-scoped fixtures (the fitted releases of the unit tests) are built once.  The
    browser tests share one Streamlit server per worker (tests/e2e/conftest.py) and are handed out
    one test at a time.  On top of that every test whose id names Spark runs on one
    worker, so the suite starts one Spark session (one JVM), not one per worker, and that unit is
    handed out first.

    (``--dist loadgroup`` with ``xdist_group`` marks would say the same, but pytest-xdist 3.8 sets
    the group through ``item._nodeid``, which pytest 9 no longer reads.)
    """
    if config.getoption("dist") != "loadfile":
        return None
    from collections import OrderedDict

    from xdist.scheduler import LoadFileScheduling

    class SparkFirst(OrderedDict):
        """The work queue, with the Spark unit put first whenever it is added."""

        def __setitem__(self, key: str, value: dict[str, bool]) -> None:
            super().__setitem__(key, value)
            if key == "spark":
                self.move_to_end(key, last=False)

    class FilesAndOneSparkWorker(LoadFileScheduling):
        def __init__(self, config, log=None) -> None:  # noqa: ANN001 (xdist's signature)
            super().__init__(config, log)
            self.workqueue = SparkFirst()

        def _split_scope(self, nodeid: str) -> str:
            if "spark" in nodeid.lower():
                return "spark"
            if nodeid.startswith("tests/e2e/"):
                # one unit per browser test: they share their worker's Streamlit server and chromium
                # (tests/e2e/conftest.py), so a file's tests need not run on one worker, and a file
                # of several long flows (test_kinds_browser.py) no longer holds one worker alone
                return nodeid
            return super()._split_scope(nodeid)

        def schedule(self) -> None:
            # The Spark unit first (the largest: a JVM's start and every Spark test, about two
            # minutes), then the files in collection order (tests/app and tests/e2e first: few tests,
            # each slow), not xdist's default of most tests first, which left the browser files for
            # the end.  The longest work first, so that neither worker is left alone with a long
            # unit at the end (the longest-processing-time rule, Graham 1969).
            self.config.option.loadscopereorder = False
            super().schedule()

    return FilesAndOneSparkWorker(config, log)


@pytest.fixture(autouse=True)
def _clear_streamlit_caches(request):
    """Clear st.cache_data / st.cache_resource around app tests.

    Streamlit's caches persist across AppTest instances in one pytest process, so
    one test could otherwise see another's cached results. Streamlit is imported
    only for the AppTest tests under tests/app (browser tests run the app in a
    server process of their own).
    """
    if request.node.path.parent.parts[-2:] != ("tests", "app"):
        yield
        return
    import streamlit as st

    st.cache_data.clear()
    _clear_resources_but_the_demos()
    yield
    st.cache_data.clear()
    _clear_resources_but_the_demos()


#: The st.cache_resource functions an app test keeps from the one before: the made-up demo data
#: (seeded, read from no file and no environment variable) and the public geography read from the
#: files shipped in assets/demo (and figures made of them only).  They are the same for every session
#: by design (the app shares them between browser sessions; none is changed by its users), so a test
#: that finds them made by an earlier one runs as a second browser session on the same server does;
#: making them again for every test was about a tenth of tests/app's CPU (2026-11-29 profile), the
#: shipped geography about 8 % more (2026-11-30).  Every other resource (anything a test may
#: monkeypatch or read from DPCORE_SHARED_DATA, any uploaded data's) is cleared as before, and so is
#: the queue of temporary budget databases made ahead for new sessions (a spare made during one test,
#: under its environment, must not serve the next).  A test that must see none of them clears them
#: itself (tests/app/test_demo_data.py's fresh clone, the test counting the area map's making).
KEPT_RESOURCES = frozenset({
    "ui.kinds.flows.sources._demo_od",
    "ui.kinds.flows.sources.demo_public",
    "ui.kinds.flows.sources._demo_counts",
    "ui.kinds.areas.data._demo_geography",
    "ui.kinds.points.state._demo_table",
    "ui.kinds.points.state._demo_aggregate",
    # the public geography read from the files shipped in assets/demo (never from the shared data
    # folder or the environment), shared read-only by every session of a server as these are: the
    # Data step's map of the area and its outlines, the trips demos' area lists and boundaries
    # (about 8 % of tests/app's CPU was making them again for each test; 2026-11-30 profile)
    "ui.kinds.points.data._public_extent",  # the extent maps go through ui.charts.shared_figure
    "ui.kinds.points.data.demo_outlines",
    "ui.kinds.points.data._boroughs",
    "ui.kinds.flows.sources.nyc_public",
    "ui.kinds.flows.sources.us_public",
    "ui.kinds.flows.sources.ri_public",
    # keyed by the shipped file's path (and the hierarchy's codes): the US tracts and their boundaries
    "ui.kinds.areas.data._public_table",
    "ui.kinds.areas.data._public_join",
    "ui.kinds.areas.data._shipped_extent",
    "ui.kinds.flows.data._shipped_extent",
})


def _clear_resources_but_the_demos() -> None:
    """``st.cache_resource.clear()``, except the global caches of :data:`KEPT_RESOURCES` (Streamlit has
    no public call for that; on another Streamlit version without these internals everything is cleared)."""
    import streamlit as st

    try:
        from streamlit.runtime.caching.cache_resource_api import _resource_caches as caches
        lock, by_session = caches._caches_lock, caches._function_caches
    except (ImportError, AttributeError):
        st.cache_resource.clear()
        return
    with lock:
        kept = {k: c for k, c in by_session.get(None, {}).items() if c.display_name in KEPT_RESOURCES}
        doomed = [c for per in by_session.values() for k, c in per.items() if c is not kept.get(k)]
        caches._function_caches = {None: kept}
    for c in doomed:  # as ResourceCaches.clear_all: release each cache's values
        c.mark_detached()
        c.clear()


@pytest.fixture(autouse=True)
def _main_module_kept():
    """``sys.modules["__main__"]`` is pytest's own around every test.  Streamlit's script runner
    (AppTest) puts the app's script there and leaves it; a later test of the same worker that starts
    a ``spawn`` process (tests/unit/privacy/test_ledger_store.py) then had the child run app.py as
    its main module, outside any Streamlit session (NoSessionContext), and the child died.  Restored
    before the test too, and to the module of this process's start (:data:`_PYTEST_MAIN`), not to
    what it was when the test began: a module-scoped AppTest fixture (tests/app/test_interval_draw.py)
    runs the app before this function-scoped fixture looks."""
    if _PYTEST_MAIN is not None:
        sys.modules["__main__"] = _PYTEST_MAIN
    yield
    if _PYTEST_MAIN is not None:
        sys.modules["__main__"] = _PYTEST_MAIN


@pytest.fixture(autouse=True)
def _strategy_cache_dir(tmp_path_factory, monkeypatch):
    """The matrix mechanism's strategy cache goes to a temporary directory, never ~/.cache."""
    monkeypatch.setenv("DPCORE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "strategy_cache"))
    yield


@pytest.fixture(autouse=True)
def _ledger_db(tmp_path, monkeypatch):
    """Each test gets its own budget database: budgets persist by design, so tests sharing the
    default file (~/.local/share/dpcore) would spend each other's budget."""
    monkeypatch.setenv("DPCORE_LEDGER_DB", str(tmp_path / "ledger.sqlite"))
    yield


#: One Spark master for every test (one SparkContext per process): the engine tests, the CLI tests
#: (through DPCORE_SPARK_MASTER) and the property tests share one local session.
SPARK_TEST_MASTER = "local[2]"
os.environ.setdefault("DPCORE_SPARK_MASTER", SPARK_TEST_MASTER)
#: Two shuffle partitions for two local cores (the engine's default is 8): the tests' tables have
#: tens of rows, and a Spark query on them was ~30 % faster with 2 (median of 4 alternating runs;
#: benchmarks/results/test_suite_profile.md). Still more than one, so results are still merged.
os.environ.setdefault("DPCORE_SPARK_PARTITIONS", "2")
#: The Spark JVM of the tests runs for minutes on tables of tens of rows: its optimising JIT compiler
#: (C2) was most of its CPU (40 of 90 s in one sample), compiling code that then ran a few times.
#: The client compiler alone (TieredStopAtLevel=1) and one GC thread (SerialGC) halved the JVM's CPU
#: for the Spark tests of tests/unit/data/test_engines.py (113 s to 58 s; test_suite_profile.md).
#: JVM flags only: what Spark computes and the queries it plans are unchanged.
#: On tables of tens of rows Spark's own code generation (a Java class compiled with Janino for every
#: query stage and expression) and adaptive re-planning cost more than the queries: with both off
#: (interpreted expressions, the plan as first made) the `-k spark` tests took 42 instead of 55 s of
#: JVM CPU and 52 instead of 75 s of wall (2026-11-29, test_suite_profile.md).  Spark's interpreted
#: and generated code compute the same results (the engine tests compare every answer with numpy's);
#: the engine itself keeps Spark's defaults.
os.environ.setdefault(
    "PYSPARK_SUBMIT_ARGS",
    "--driver-java-options '-XX:TieredStopAtLevel=1 -XX:+UseSerialGC' "
    "--conf spark.sql.codegen.wholeStage=false --conf spark.sql.codegen.factoryMode=NO_CODEGEN "
    "--conf spark.sql.adaptive.enabled=false pyspark-shell")


#: Why a Spark test is skipped without Java, and the fix: ./test installs Java through apt-get (as root
#: or with password-free sudo) and otherwise prints this command and goes on (README, Quick start).
NO_JAVA = ("the Spark engine needs Java 17+ and 'java' is not on PATH: install it (as root: apt-get install "
           "openjdk-17-jre-headless, which ./test runs itself as root or with password-free sudo), "
           "or leave the Spark tests out with -m \"not spark\"")


@pytest.fixture(scope="session")
def spark_engine():
    """The Spark engine in local mode; skips when Java or PySpark is missing (CI installs both)."""
    import shutil

    if shutil.which("java") is None:
        pytest.skip(NO_JAVA)
    pytest.importorskip("pyspark", reason="PySpark is not installed (pip install -r requirements-spark.txt)")
    from dpcore.data.engines import get_engine

    return get_engine("spark", spark_master=SPARK_TEST_MASTER)


def pytest_collection_finish(session: pytest.Session) -> None:
    """After collection, move every object alive (the collected tests, their modules, the libraries
    they imported) to the garbage collector's permanent generation (:func:`gc.freeze`): Python's
    automatic full collections then walk only what the tests make, not these hundreds of thousands
    of objects that live for the whole run anyway (the app's server does the same after its
    imports: ``ui.serve``).  Objects are still freed by reference counting.  Measured
    in one process: tests/unit/points and tests/unit/estimate 58.9 -> 53.5 s of user CPU,
    tests/app/test_od_page.py and test_pages.py 36.5 -> 33.7 s."""
    from ui.serve import freeze_alive

    freeze_alive()
