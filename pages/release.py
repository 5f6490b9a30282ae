"""Release: the release step of the path, the same for every kind of data (the kind's adapter draws it)."""

from __future__ import annotations

from ui import frame, kinds

frame.ensure()
frame.heading("Release", "Spend the budget and draw the noise, then look at the release on the map and at its errors. Next: export.")
kinds.adapter().release_step()
