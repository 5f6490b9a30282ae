"""Streamlit entry point: navigation over the pages and the sidebar ledger.

Run with ``./run`` (or ``streamlit run app.py``).
"""

from __future__ import annotations

import streamlit as st

from ui import sidebar, state

# An emoji favicon is an inline SVG; a ":material/...:" one is fetched from fonts.gstatic.com.
st.set_page_config(page_title="Private location statistics", page_icon="🗺️", layout="wide")

PAGES = [
    st.Page("app_pages/data.py", title="1 · Data", icon=":material/folder_open:", default=True, url_path="data"),
    st.Page("app_pages/mechanism.py", title="2 · Mechanism & budget", icon=":material/tune:", url_path="mechanism"),
    st.Page("app_pages/map.py", title="3 · Map", icon=":material/map:", url_path="map"),
    st.Page("app_pages/errors.py", title="4 · Errors", icon=":material/straighten:", url_path="errors"),
    st.Page("app_pages/export.py", title="5 · Export", icon=":material/download:", url_path="export"),
    st.Page("app_pages/compare.py", title="6 · Compare", icon=":material/compare_arrows:", url_path="compare"),
    st.Page("app_pages/hierarchy.py", title="7 · Census hierarchy", icon=":material/account_tree:",
            url_path="hierarchy"),
    st.Page("app_pages/census.py", title="8 · Census (Privelet)", icon=":material/groups:", url_path="census"),
    st.Page("app_pages/od.py", title="9 · O/D flows", icon=":material/route:", url_path="od"),
    st.Page("app_pages/history.py", title="10 · Release history", icon=":material/history:", url_path="history"),
]

state.init()
page = st.navigation(PAGES)
try:
    page.run()
finally:
    # after the page (also when it stops early): the hierarchy and O/D pages build what their sidebars show
    sidebar.render(page.url_path)
