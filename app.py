"""Streamlit entry point: the path Data → Plan → Release → Export, the tools, the sidebar.

Run with ``./run`` (or ``streamlit run app.py``).
"""

from __future__ import annotations

import streamlit as st

from ui import frame, sidebar, state

# An emoji favicon is an inline SVG; a ":material/...:" one is fetched from fonts.gstatic.com.
st.set_page_config(page_title="Private location statistics", page_icon="🗺️", layout="wide")


def _pages(entries: tuple[tuple[str, str, str, str], ...], default: str | None = None) -> list[st.Page]:
    return [st.Page(script, title=title, icon=icon, url_path=url, default=url == default)
            for script, title, icon, url in entries]


state.init()
page = st.navigation({"The path": _pages(frame.STEPS, default="data"), "Tools": _pages(frame.TOOLS)})
with frame.framed():
    try:
        page.run()
    finally:
        # after the page (also when it stops early): a step may change what the sidebar shows
        sidebar.render()
