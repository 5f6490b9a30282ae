"""The frame every page script runs in: the deep-link guard, the page heading, the step links.

Streamlit 1.67 serves the scripts of a folder named ``pages/`` by their file names until some
session has run ``st.navigation`` (its legacy multipage discovery,
``streamlit.runtime.pages_manager.PagesManager.uses_pages_directory``).  A deep link such as
``/plan`` opened first after the server starts therefore runs ``pages/plan.py`` *without*
``app.py``: no navigation, no sidebar, no session set-up.  :func:`ensure` notices that (app.py
marks every session it has run in) and runs ``app.py`` in the page's place, whose
``st.navigation`` resolves the same URL to the same page; from then on Streamlit ignores the
legacy discovery for every session.
"""

from __future__ import annotations

import runpy
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import streamlit as st

APP = Path(__file__).resolve().parents[1] / "app.py"
_RUN = threading.local()  # a script run happens on one thread: app.py marks the run it frames

#: the path, in order: (page script, title, icon, url path)
STEPS = (
    ("pages/data.py", "Data", ":material/folder_open:", "data"),
    ("pages/plan.py", "Plan", ":material/tune:", "plan"),
    ("pages/release.py", "Release", ":material/map:", "release"),
    ("pages/export.py", "Export", ":material/download:", "export"),
)
TOOLS = (
    ("pages/compare.py", "Compare", ":material/compare_arrows:", "compare"),
    ("pages/history.py", "History", ":material/history:", "history"),
)
_BY_URL = {url: (script, title, icon) for script, title, icon, url in STEPS + TOOLS}


@contextmanager
def framed() -> Iterator[None]:
    """app.py runs the page inside this: the page knows it runs in the app's navigation."""
    _RUN.depth = getattr(_RUN, "depth", 0) + 1
    try:
        yield
    finally:
        _RUN.depth -= 1


def ensure() -> None:
    """First line of every page script: hand a legacy direct run over to app.py (see the module).

    AppTest resets Streamlit's flag before every run, so there too a page may be run without
    app.py; the check is per run, not per session."""
    if not getattr(_RUN, "depth", 0):
        runpy.run_path(str(APP), run_name="__main__")
        st.stop()


def heading(title: str, purpose: str) -> None:
    """The page title and its one sentence: what the page is for and what comes next."""
    st.title(title)
    st.markdown(purpose)


def link(url: str, label: str | None = None) -> None:
    """A link to another step or tool, by its URL path (``"plan"``, ``"release"`` ...)."""
    script, title, icon = _BY_URL[url]
    st.page_link(script, label=label or f"Next: {title.lower()} →", icon=icon)


class Stop(Exception):  # noqa: N818 (a control-flow signal, like Streamlit's own StopException)
    """Ends a page early; app.py catches it and still draws the sidebar.

    ``st.stop()`` inside a page also ends the run, but Streamlit 1.67 then draws nothing more, so
    the sidebar's dataset, budget and release panel would vanish on that page."""


def stop() -> None:
    """End the page here (what is already drawn stays, and so does the sidebar)."""
    raise Stop


def missing(what: str, url: str, label: str) -> None:
    """A prerequisite is missing: say what to do, with a link that goes there, and end the page."""
    st.info(what)
    link(url, label)
    raise Stop
