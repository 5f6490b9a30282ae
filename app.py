"""Streamlit entry point: the path Data → Plan → Release → Export, the tools, the sidebar.

Run with ``./run`` (``python -m ui.serve app.py``; or ``streamlit run app.py``).
"""

from __future__ import annotations

import streamlit as st

from dpcore.errors import StorageError
from ui import clicks, frame, sidebar
from ui import state as ui_state
from ui.kinds.points import state as points_state

ui_state.keep_widget_values()  # first: a choice made just before a page change is kept (issue 28 item 5)
# An emoji favicon is an inline SVG; a ":material/...:" one is fetched from fonts.gstatic.com.
st.set_page_config(page_title="Private location statistics", page_icon="🗺️", layout="wide")


def _pages(entries: tuple[tuple[str, str, str, str], ...]) -> list[st.Page]:
    return [st.Page(script, title=title, icon=icon, url_path=url) for script, title, icon, url in entries]


def _start() -> None:
    """The app's root URL goes to the Data step.  Streamlit serves its default page at "/" only
    (its url_path is ignored), so a Data page marked default would answer "/data" with "Page not
    found"; a hidden default page that switches to the Data step keeps every step's URL working.  The
    link's query (``?kind=flows``) goes along: a page switch drops it otherwise."""
    kind = st.query_params.get("kind")
    st.switch_page(frame.STEPS[0][0], query_params={"kind": kind} if kind else None)


points_state.init()
start = st.Page(_start, title="Start", url_path="start", default=True, visibility="hidden")
page = st.navigation({"": [start], "The path": _pages(frame.STEPS), "Tools": _pages(frame.TOOLS)})
if page is start:
    # the root URL: straight on to the Data step, drawing no sidebar in a run that is replaced at once
    # (issue 28 item 5: the fresh session's first page drew the sidebar twice)
    _start()
with frame.framed():
    try:
        page.run()
    except frame.Stop:
        pass  # the page ended early and said why
    except StorageError as e:  # the budget database or its key file: one line with the fix, no traceback
        st.error(str(e))
    finally:
        # after the page (also when it stops early): a step may change what the sidebar shows
        try:
            # first, and not stopped by a rerun request (a page change to History must find the files)
            with clicks.held():
                points_state.store_pending_history()
            sidebar.render()
        except StorageError as e:
            st.error(str(e))
