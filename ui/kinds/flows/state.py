"""Trips between areas: the app's own model of this kind's releases, typed and frozen (as DP Wizard's
``AppState``).

The releases of each set of trips are kept in the session under :data:`RELEASES_KEY` (content
fingerprint → :class:`ODEntry` list, oldest first); each release's plan is the Plan step's
(:mod:`ui.plans`).  ``exports`` is a cache of what is drawn from a release (files, the curator-only
errors), built once and kept with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dpcore.core.mechanism import Plan

#: the session key of the releases per set of trips
RELEASES_KEY = "od_releases"


@dataclass(frozen=True, eq=False)
class ODEntry:
    """One release of trips: the release, the data model it was made from, how its budget was stated."""

    release: Any  # dpcore.flows.mechanisms.common.ODRelease
    fp: str  # the trips' content fingerprint (keys their budget)
    view: Any  # the area list and unit of privacy the release was made with
    model: dict[str, Any]  # the Data step's model at release time (area list, map positions, counts)
    name: str
    cost_label: str
    delta: float
    approx: dict[str, Any]  # the (ε, δ) the budget was stated in, if it was
    #: the release's files (name -> bytes), made once at release time with the ledger as of the
    #: charge; the Export step and the history serve these bytes
    files: dict[str, bytes] = field(default_factory=dict)
    exports: dict[str, Any] = field(default_factory=dict)
    config: str | None = None  # the release.toml that makes it again
    plan: Plan | None = None  # the Plan step's core plan, which the release is of (its rows: the error table)
