"""History: the page's script now lives in ui/history_page.py (run here as a script until it is split into functions)."""

from __future__ import annotations

import runpy
from pathlib import Path

import ui

runpy.run_path(str(Path(ui.__file__).parent / "history_page.py"))
