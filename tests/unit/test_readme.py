"""The README's Python API examples run as written (one per kind: points, hierarchy, census table, trips)."""

from __future__ import annotations

import doctest
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_examples_run() -> None:
    result = doctest.testfile(str(README), module_relative=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 30, "the README's Python API examples are missing"
    assert result.failed == 0
