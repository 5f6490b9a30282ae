"""dpcore: differentially private releases of location data.

The library behind the Streamlit app and the ``python -m dpcore`` command line.
It never imports streamlit.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "run"]


def run(spec: Any, *, session: Any = None) -> Any:
    """Make the release a :class:`~dpcore.core.spec.ReleaseSpec` describes (what ``python -m dpcore run
    CONFIG`` and ``release KIND`` do): read its input, plan once, charge its budget through ``session``
    (default: the budget its ``[budget]`` names, the app's database unless it says otherwise), release,
    write its files.  ``spec`` may also be the path of a ``release.toml`` (a :class:`~pathlib.Path`).
    Returns the result with ``.release`` (the envelope, :class:`~dpcore.core.mechanism.KindRelease`),
    ``.paths`` (the files written) and ``.summary``.
    """
    from pathlib import Path

    from dpcore.cli.run import make
    from dpcore.core.spec import ReleaseSpec

    return make(ReleaseSpec.from_toml(spec) if isinstance(spec, Path) else spec, session=session)
