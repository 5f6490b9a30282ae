"""Compare: the mechanisms side by side, to choose one (ui.compare_page draws it: range queries on a stand-in
for points, each mechanism's expected error per level for areas and trips)."""

from __future__ import annotations

from ui import compare_page, frame

frame.ensure()
frame.heading("Compare", compare_page.purpose())
compare_page.compare_step()
