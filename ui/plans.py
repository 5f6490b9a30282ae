"""The one core plan of a Plan step, kept in the session so that the Release step releases it.

Every kind's Plan step builds its :class:`~dpcore.core.mechanism.Plan` through the catalogue
(``catalog.get(kind, name).plan(domain, cost, params, unit=..., **public)``) and keeps it here under
the digest of its inputs; the Release step reads the same plan back (built here once if the
curator came straight to it) and releases it with :func:`dpcore.pipeline.release`.  A rerun, a
page switch or the Release click never plans again while the inputs stay the same.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, TypeVar

import streamlit as st

T = TypeVar("T")


def digest(*inputs: Any) -> str:
    """A digest of a plan's inputs (their ``repr``: public choices, never data).

    >>> digest("ug", {"c": 10}) == digest("ug", {"c": 10}) != digest("ug", {"c": 5})
    True
    """
    return hashlib.sha256(repr(inputs).encode()).hexdigest()


def kept(slot: str, key: str, build: Callable[[], T]) -> T:
    """The value kept in ``slot`` when it was built for ``key``, else ``build()``, kept for ``key``."""
    ss = st.session_state
    old = ss.get(slot)
    if isinstance(old, tuple) and len(old) == 2 and old[0] == key:
        return old[1]
    out = build()
    ss[slot] = (key, out)
    return out
