"""Streamlit helpers shared by app.py and the pages (UI only; computations live in dpcore)."""
