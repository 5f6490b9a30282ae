"""The Release step's table of a level shows a 95 % interval only where release.csv has one
(tests/unit/areas/test_release_intervals.py: the exact DP and TopDown publish none)."""

from __future__ import annotations

import pandas as pd

from dpcore import catalog
from dpcore.areas import export as X
from dpcore.areas.counts import HierarchyCounts
from dpcore.data.hierarchy import Hierarchy
from dpcore.privacy import budget
from dpcore.privacy.noise import NoiseSource
from ui.kinds.areas import drill


def test_the_level_table_has_an_interval_column_only_where_the_file_has_intervals() -> None:
    df = pd.DataFrame({"region": ["R1"] * 4, "zone": ["Z1", "Z2", "Z3", "Z4"], "population": [100, 0, 0, 5]})
    counts = HierarchyCounts.from_frame(df, Hierarchy.from_frame(df, ["region", "zone"]), ["region", "zone"],
                                        "population")
    for mech, shown in (("exact", False), ("topdown_l2", False), ("topdown_linf", False), ("hay", True),
                        ("bottom_up", True)):
        rel = catalog.get("hierarchy", mech).release_counts(counts, budget.zcdp(0.5), NoiseSource(3))
        table, total = drill.area_table(rel, 2, None, None)
        assert total == 4 and ("95 % interval" in table.columns) is shown, mech
        assert (X.no_interval_line(rel) is None) is shown
