"""Progress of a long piece of work on a page, one line a step with the seconds each took (st.status).

Issue 28 item 1: a release of millions of areas, or the model of a table of millions of rows, shows
what it is doing while it works instead of a page that looks frozen.  Works in a widget's callback
too (the status is drawn at the top of the page for that run).
"""

from __future__ import annotations

import time

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

    def done(self, what: str) -> None:
        if self.box is not None:
            self.box.update(label=f"{what} in {time.perf_counter() - self.t0:.1f} s", state="complete",
                            expanded=False)

    def failed(self, what: str) -> None:
        if self.box is not None:
            self.box.update(label=what, state="error", expanded=False)
