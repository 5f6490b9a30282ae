"""Counts over areas: the app's own model of this kind's releases, typed and frozen (as DP Wizard's
``AppState``).

A hierarchy release (:class:`HierarchyEntry`) and a census-table release (:class:`TableEntry`, Privelet
or the marginal tables) are kept in the session under :data:`HIERARCHY_KEY` and :data:`TABLE_KEYS`;
their plans are the Plan step's (:mod:`ui.plans`).  ``exports`` is a cache of what is drawn from a
release (files, figures, the curator-only errors), built once and kept with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dpcore.core.mechanism import Plan

#: the session key of the latest hierarchy release
HIERARCHY_KEY = "hier_release"
#: the session keys of the latest census-table release, per mechanism
TABLE_KEYS = {"privelet": "census_release", "matrix": "census_mx_release"}


@dataclass(frozen=True, eq=False)
class HierarchyEntry:
    """A hierarchy release of this session: the release, the data it came from, its release.toml."""

    release: Any  # dpcore.areas.tree_plans.HierarchyRelease
    fp: str  # the data's content fingerprint (keys its budget)
    name: str
    config: str | None  # the release.toml that makes it again, where one can be written
    plan: Plan  # the Plan step's plan, which the release is of
    #: the release's files (name -> bytes), made once at release time with the ledger as of the
    #: charge; the Export step and the history serve these bytes
    files: dict[str, bytes] = field(default_factory=dict)
    exports: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class TableEntry:
    """A census-table release of this session (Privelet or the marginal tables), its two files and its
    release.toml."""

    release: Any  # CensusRelease or MarginalsRelease
    fingerprint: str  # the table's content fingerprint
    source: str
    #: the release's files (name -> bytes: ``release.csv`` or ``marginals.csv``, and ``release.json``),
    #: made once at release time with the ledger as of the charge; the Export step and the history
    #: serve these bytes
    files: dict[str, bytes]
    config: str | None = None  # the release.toml that makes it again

    @property
    def csv(self) -> bytes:
        """The table file: ``marginals.csv`` (the matrix mechanism) or ``release.csv`` (Privelet)."""
        return self.files.get("marginals.csv", self.files.get("release.csv", b""))

    @property
    def json(self) -> bytes:
        """``release.json``: the record."""
        return self.files["release.json"]
