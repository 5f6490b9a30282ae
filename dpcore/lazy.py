"""Heavy libraries imported on first use.

A module that calls a heavy library (SciPy's optimisers and linear algebra) in many places names it
once at the top with :func:`module` or :func:`function` instead of an import statement: the library
is then imported the first time it is used, not when the module is imported, so commands that never
use it (``python -m dpcore mechanisms``, ``--help``) start without paying for it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


class _LazyModule:
    """Stands for the module ``name`` and imports it when one of its attributes is first read."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        value = getattr(importlib.import_module(self._name), attr)
        setattr(self, attr, value)  # later reads are plain attribute reads
        return value

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported on first use>"


def module(name: str) -> Any:
    """``module("scipy.linalg")`` in place of ``import scipy.linalg``: imported on first attribute read."""
    return _LazyModule(name)


def function(module_name: str, name: str) -> Callable[..., Any]:
    """``function("scipy.optimize", "minimize")`` in place of ``from scipy.optimize import minimize``:
    the module is imported on the first call."""
    found: list[Callable[..., Any]] = []

    def call(*args: Any, **kwargs: Any) -> Any:
        if not found:
            found.append(getattr(importlib.import_module(module_name), name))
        return found[0](*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"``{module_name}.{name}``, imported on the first call."
    return call
