"""The one adapter from a release description to the command line's arguments.

The release commands (``cli/points.py``, ``cli/areas.py``, ``cli/flows.py``) read their options as the
command line's parser gives them; :func:`arguments` gives a :class:`~dpcore.core.spec.ReleaseSpec`'s
typed values in that form (each by its row of :data:`dpcore.core.spec_options.OPTIONS`), defaults
included, whether the description came from a command line, a config or Python.

>>> from dpcore.core.spec import ReleaseSpec
>>> a = arguments(ReleaseSpec.points(bounds=(0, 0, 1, 1), grid=(16, 8), params={"c": 10}, epsilon=0.5))
>>> a.bounds, a.grid, a.param, a.epsilon, a.delta
('0,0,1,1', '16,8', ['c=10'], '0.5', 1e-06)
"""

from __future__ import annotations

import argparse
from typing import Any

from dpcore.core.spec import ReleaseSpec
from dpcore.core.spec_options import OPTIONS

__all__ = ["arguments", "argument_values"]


def argument_values(spec: ReleaseSpec) -> dict[str, Any]:
    """Every option of ``release KIND`` (attribute name -> value), defaults included: what the command
    line's parser makes of ``spec.to_argv()``."""
    out = {}
    for opt in OPTIONS[spec.kind]:
        sec = getattr(spec, opt.section)
        out[opt.dest] = opt.arg(sec[opt.key]) if opt.key in sec else _default(opt.default)
    return out


def arguments(spec: ReleaseSpec) -> argparse.Namespace:
    """:func:`argument_values` as the :class:`argparse.Namespace` the release commands read."""
    return argparse.Namespace(**argument_values(spec))


def _default(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v
