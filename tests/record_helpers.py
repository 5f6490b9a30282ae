"""Catching a release on its way out: the envelope :func:`dpcore.pipeline.release` returns, its ledger as
of the charge, and the options its files were made with (:meth:`KindRelease.files`), so a test can
compare what the CLI or the app wrote with ``KindRelease.record(ledger as of the charge)``."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dpcore import pipeline
from dpcore.core.mechanism import KindRelease


class Snapshot:
    """A ledger as of one moment: what :func:`dpcore.core.record.ledger_section` reads of a ledger."""

    def __init__(self, ledger: Any) -> None:
        self.state = copy.deepcopy(ledger.to_dict())

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self.state)


class Caught:
    """The envelopes released, each with its live ledger and a copy as of the charge, and the options
    every :meth:`KindRelease.files` call was made with."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.releases: list[tuple[KindRelease, Any, Snapshot]] = []
        self.options: list[dict[str, Any]] = []
        release, files = pipeline.release, KindRelease.files

        def caught_release(plan: Any, aggregate: Any, **kwargs: Any) -> KindRelease:
            out = release(plan, aggregate, **kwargs)
            self.releases.append((out, kwargs["ledger"], Snapshot(kwargs["ledger"])))
            return out

        def caught_files(kr: KindRelease, ledger: Any = None, **options: Any) -> dict[str, bytes]:
            self.options.append(options)
            return files(kr, ledger, **options)

        monkeypatch.setattr(pipeline, "release", caught_release)
        monkeypatch.setattr(KindRelease, "files", caught_files)
