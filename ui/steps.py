"""Progress of a long piece of work on a page, one line a step with the seconds each took (st.status).

Issue 28 item 1: a release of millions of areas, or the model of a table of millions of rows, shows
what it is doing while it works instead of a page that looks frozen.  Works in a widget's callback
too (the status is drawn at the top of the page for that run).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import streamlit as st


class Steps:
    """``say`` a step when it starts, ``done`` at the end; ``show=False`` (quick work) draws nothing."""

    def __init__(self, label: str, show: bool = True) -> None:
        self.box = st.status(label, expanded=True) if show else None
        self.t0 = self.last = time.perf_counter()
        self.said = False

    def say(self, line: str) -> None:
        if self.box is None:
            return
        now = time.perf_counter()
        if self.said:
            self.box.write(f"… done in {now - self.last:.1f} s")
        self.box.write(line)
        self.box.update(label=line)
        self.last, self.said = now, True

    def progress(self) -> Callable[[float, str], None] | None:
        """The progress callback a library step takes (``progress=`` of
        :meth:`dpcore.data.hierarchy.Hierarchy.from_frame`, :func:`dpcore.areas.census_tables.fingerprints`):
        each phase it reports shows as the status's label and as a line with the seconds since the
        step began, so a step of a minute (8 M census blocks) moves every few seconds; None when
        nothing is shown (the library then reports nothing)."""
        box = self.box
        if box is None:
            return None
        start = time.perf_counter()

        def show(frac: float, line: str) -> None:
            box.update(label=line)
            box.caption(f"{line} ({time.perf_counter() - start:.0f} s, {min(max(frac, 0.0), 1.0):.0%})")

        return show

    def done(self, what: str) -> None:
        if self.box is not None:
            self.box.update(label=f"{what} in {time.perf_counter() - self.t0:.1f} s", state="complete",
                            expanded=False)

    def failed(self, what: str) -> None:
        if self.box is not None:
            self.box.update(label=what, state="error", expanded=False)
