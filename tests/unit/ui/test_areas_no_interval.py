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


def test_the_map_and_the_level_table_show_the_interval_the_file_holds() -> None:
    """Independent noise and bottom-up publish the exact quantile of their noise where a value is one draw
    (whole-number half-widths): the Release step's level table and map hover show release.csv's interval."""
    import io

    import geopandas
    import numpy as np
    from shapely.geometry import box

    from dpcore.areas import figures
    from dpcore.data.area_boundaries import join_boundaries

    df = pd.DataFrame({"region": ["R1"] * 4 + ["R2"] * 4, "zone": [f"Z{i}" for i in range(8)],
                       "population": [100, 0, 0, 5, 30, 30, 30, 30]})
    h = Hierarchy.from_frame(df, ["region", "zone"])
    counts = HierarchyCounts.from_frame(df, h, ["region", "zone"], "population")
    for mech in ("independent", "bottom_up"):
        for cost in (budget.pure(1.0), budget.zcdp(0.25)):
            rel = catalog.get("hierarchy", mech).release_counts(counts, cost, NoiseSource(3))
            file = pd.read_csv(io.BytesIO(X.hierarchy_csv(rel)))
            for d in (1, 2):
                rows = file[file["level"] == h.level_names[d]]
                table, _ = drill.area_table(rel, d, None, None)
                assert table["95 % interval"].tolist() == [f"{a:,.0f} – {b:,.0f}" for a, b in
                                                           zip(rows["ci95_low"], rows["ci95_high"], strict=True)]
                codes = list(h.labels(d))
                gdf = geopandas.GeoDataFrame({"code": codes}, geometry=[box(i, 0, i + 1, 1) for i in range(len(codes))],
                                             crs="EPSG:4326")
                custom = figures.hierarchy_map(rel, join_boundaries(h, d, gdf)).data[0].customdata
                shown = pd.DataFrame({"code": custom[:, 1], "lo": custom[:, 4].astype(float),
                                      "hi": custom[:, 5].astype(float)}).set_index("code").loc[rows["code"]]
                # the hover shows whole numbers (%{…:,.0f}); at single-draw levels the file's are whole too
                assert np.array_equal(shown["lo"], np.round(rows["ci95_low"]))
                assert np.array_equal(shown["hi"], np.round(rows["ci95_high"]))
                if rel.single_draw(d):
                    assert np.array_equal(shown["lo"], rows["ci95_low"]) and np.array_equal(shown["hi"], rows["ci95_high"])
