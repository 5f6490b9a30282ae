"""The examples in the docstrings of dpcore and of the app's ui package run (DESIGN.md: examples
run as doctests): every module's, and the core modules and shared estimators must have some."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import dpcore
import ui

#: Modules whose public constructors must carry examples.
MUST_HAVE_EXAMPLES = {"dpcore.core.mechanism", "dpcore.core.record", "dpcore.core.registry", "dpcore.core.session",
                      "dpcore.core.metrics", "dpcore.estimate.tree_inference", "dpcore.privacy.units",
                      "dpcore.privacy.ledger", "dpcore.areas.census_tables", "ui.fmt"}
MODULES = sorted(m.name for package in (dpcore, ui) for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
                 if not m.name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    if name in MUST_HAVE_EXAMPLES:
        assert result.attempted > 0, f"{name} has no examples"
