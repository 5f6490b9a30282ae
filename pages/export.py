"""Export: the export step of the path, the same for every kind of data (the kind's adapter draws it)."""

from __future__ import annotations

from ui import frame, kinds

frame.ensure()
frame.heading("Export", "Download the release: the noisy counts and the record of how they were made. They hold no true count and no raw row, so they can be published.")
kinds.adapter().export_step()
