"""History: every dataset in the budget database, its releases, its files downloadable again (ui.history_page draws it)."""

from __future__ import annotations

from ui import frame, history_page

frame.ensure()
frame.heading("History", "Every dataset in the budget database, whichever session loaded it: when its budget was "
    "opened, what was spent of its cap, every release with its files exactly as published. Downloading them "
    "again spends nothing. The budget of a dataset follows its content, so re-uploading the same data, reloading "
    "the page, a second tab or a restart continues the same budget.")
history_page.history_step()
