"""The examples in the docstrings of dpcore/core and the shared estimators run (DESIGN.md: examples
run as doctests)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["dpcore.core.mechanism", "dpcore.core.record", "dpcore.core.registry",
           "dpcore.core.metrics", "dpcore.estimate.tree_inference"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
