"""Data: the data step of the path, the same for every kind of data (the kind's adapter draws it)."""

from __future__ import annotations

from ui import frame, kinds

frame.ensure()
frame.heading("Data", "What the data is, where it comes from, whom it protects and the **public** area it covers. Next: plan the release.")
kinds.choose().data_step()
