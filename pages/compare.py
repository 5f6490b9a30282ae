"""Compare: the mechanisms' error on random range queries, to choose one (curator-only; ui.compare_page draws it)."""

from __future__ import annotations

from ui import compare_page, frame

frame.ensure()
frame.heading("Compare", "Compare how far each mechanism's answers to range queries are from the truth, to choose a "
    "mechanism before you release. Nothing here spends your privacy budget or is published. "
    "Next step: choose the best one on the Plan step.")
compare_page.compare_step()
