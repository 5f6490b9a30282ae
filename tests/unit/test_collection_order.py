"""tests/conftest.py: on a run of the whole suite the odd pytest-xdist workers collect the test files backwards
(sharing a fresh clone's bytecode caching between the workers) through a private function of pytest; any
other run collects as usual, and so does a pytest whose internals differ."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType, SimpleNamespace

import _pytest.main
import _pytest.pathlib
import pytest

WHOLE_SUITE = SimpleNamespace(args_source=pytest.Config.ArgsSource.TESTPATHS, args=["tests"])


@pytest.fixture
def conftest(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The suite's tests/conftest.py as pytest loaded it; its flag and pytest's scandir are restored after."""
    path = Path(__file__).resolve().parents[1] / "conftest.py"
    [module] = [p for p in request.config.pluginmanager.get_plugins()
                if isinstance(p, ModuleType) and p.__file__ and Path(p.__file__).resolve() == path]
    monkeypatch.setattr(module, "BACKWARDS", module.BACKWARDS)
    monkeypatch.setattr(_pytest.main, "scandir", _pytest.main.scandir)
    return module


def a_folder(tmp_path: Path) -> Path:
    for name in ("a_test.py", "b_test.py"):
        (tmp_path / name).touch()
    (tmp_path / "c").mkdir()
    return tmp_path


def test_only_an_odd_worker_of_a_whole_suite_run_collects_backwards(conftest, monkeypatch) -> None:
    given = SimpleNamespace(args_source=pytest.Config.ArgsSource.ARGS, args=["tests"])
    two = SimpleNamespace(args_source=pytest.Config.ArgsSource.TESTPATHS, args=["tests", "benchmarks"])
    for worker, config, backwards in [("gw1", WHOLE_SUITE, True), ("gw3", WHOLE_SUITE, True),
                                      ("gw0", WHOLE_SUITE, False), ("gw2", WHOLE_SUITE, False),
                                      ("", WHOLE_SUITE, False), ("gwx", WHOLE_SUITE, False),
                                      ("gw1", given, False), ("gw1", two, False)]:
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        assert conftest._collects_backwards(config) is backwards, (worker, config)


def test_this_run_replaced_pytests_scandir_only_if_it_collects_backwards(request) -> None:
    """This very run: with paths given (as here with -n 0, or ./test tests/unit) pytest's own scandir."""
    path = Path(__file__).resolve().parents[1] / "conftest.py"
    [module] = [p for p in request.config.pluginmanager.get_plugins()
                if isinstance(p, ModuleType) and p.__file__ and Path(p.__file__).resolve() == path]
    assert (_pytest.main.scandir is not _pytest.pathlib.scandir) is module.BACKWARDS
    assert not module.BACKWARDS or module._collects_backwards(request.config)


def test_an_odd_worker_of_a_whole_suite_run_lists_each_folder_backwards(conftest, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(_pytest.main, "scandir", _pytest.pathlib.scandir)
    folder = a_folder(tmp_path)
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    conftest.pytest_sessionstart(SimpleNamespace(config=WHOLE_SUITE))
    assert conftest.BACKWARDS
    assert [e.name for e in _pytest.main.scandir(folder)] == ["c", "b_test.py", "a_test.py"]
    by_length = [e.name for e in _pytest.main.scandir(folder, lambda e: (len(e.name), e.name))]
    assert by_length == ["b_test.py", "a_test.py", "c"]  # pytest's sort key still applies, reversed


@pytest.mark.parametrize("worker", ["gw0", "", "gw1"])
def test_any_other_run_leaves_pytest_as_it_is(conftest, monkeypatch, worker) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    before = _pytest.main.scandir
    config = WHOLE_SUITE if worker != "gw1" else SimpleNamespace(args_source=pytest.Config.ArgsSource.ARGS,
                                                                 args=["tests/unit", "tests/app"])
    conftest.pytest_sessionstart(SimpleNamespace(config=config))
    assert not conftest.BACKWARDS and _pytest.main.scandir is before


def test_a_pytest_without_that_scandir_collects_as_usual(conftest, monkeypatch, tmp_path) -> None:
    """Internals of another pytest: no error, the usual order (no scandir, one of another signature), and a
    result other than a list passed on as it is."""
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.delattr(_pytest.main, "scandir")
    conftest.pytest_sessionstart(SimpleNamespace(config=WHOLE_SUITE))
    assert not conftest.BACKWARDS and not hasattr(_pytest.main, "scandir")

    def other() -> list[object]:  # cannot be given a path
        return []

    monkeypatch.setattr(_pytest.main, "scandir", other, raising=False)
    conftest.pytest_sessionstart(SimpleNamespace(config=WHOLE_SUITE))
    assert not conftest.BACKWARDS and _pytest.main.scandir is other

    folder = a_folder(tmp_path)
    monkeypatch.setattr(_pytest.main, "scandir", lambda path, sort_key=None: iter(_pytest.pathlib.scandir(path)),
                        raising=False)
    conftest.pytest_sessionstart(SimpleNamespace(config=WHOLE_SUITE))
    assert [e.name for e in _pytest.main.scandir(folder)] == ["a_test.py", "b_test.py", "c"]
