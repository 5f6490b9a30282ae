"""Figures of an O/D release (dpcore/flows/figures.py): flow map and O/D heatmap."""

from __future__ import annotations

import numpy as np
import pytest

from dpcore import catalog
from dpcore.data import synthetic
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import ParameterError
from dpcore.flows import export, figures
from dpcore.flows.counts import ODCounts
from dpcore.privacy import budget
from dpcore.privacy.noise import NoiseSource


@pytest.fixture(scope="module")
def demo():
    areas, flows, bounds = synthetic.demo_od()
    h = Hierarchy.from_frame(areas, ["region", "district", "zone"])
    counts = ODCounts.from_frame(flows, h, origin="origin", destination="destination", count="count")
    rel = catalog.get("od", "inftda").release_counts(counts, budget.zcdp(0.0132), NoiseSource(3))
    xy = {}
    for d, lv in ((1, "region"), (2, "district"), (3, "zone")):
        lon, lat, unmatched = export.centroids_from_boundaries(h, d, bounds[lv])
        assert not unmatched
        xy[d] = (lon, lat)
    return rel, xy, bounds


def line_flows(trace) -> int:
    """Number of flows in a line trace (each ends with a gap)."""
    return sum(1 for x in trace.lon if x is None)


def first_value(text: str) -> int:
    return int(text.rsplit(": ", 1)[1].split(" ")[0].replace(",", ""))


def line_traces(fig):
    return [tr for tr in fig.data if tr.mode == "lines+markers"]


def circles(fig):
    return [tr for tr in fig.data if (tr.name or "").startswith("within one area")]


def test_flow_map_is_offline_and_has_one_trace_per_width_class(demo):
    rel, xy, bounds = demo
    t = 6  # zone → zone
    fig = figures.flow_map(rel, t, xy, boundaries=[bounds["zone"], bounds["region"]], top=150)
    assert fig.layout.map.style == "white-bg"
    assert all(tr.type == "scattermap" for tr in fig.data)
    # the view fits the public geography (all zone centres), not where the flows are
    assert fig.layout.map.fitbounds == "locations" and fig.layout.map.zoom is None
    (extent,) = [tr for tr in fig.data if tr.name == "extent"]
    assert extent.hoverinfo == "skip" and extent.showlegend is False
    lon, lat = xy[3]
    assert extent.lon[0] < lon.min() < lon.max() < extent.lon[1]
    assert extent.lat[0] < lat.min() < lat.max() < extent.lat[1]
    assert all("text" not in (tr.mode or "") for tr in fig.data)  # map text would fetch glyphs
    lines = line_traces(fig)
    assert 1 <= len(lines) <= 5
    assert len({tr.line.width for tr in lines}) == len(lines)  # one width per class
    assert sum(line_flows(tr) for tr in lines) == 150
    (c,) = circles(fig)
    assert 1 <= len(c.lon) <= 150
    assert [ly.type for ly in fig.layout.map.layers] == ["line", "line"]
    assert fig.layout.map.layers[1].line.width > fig.layout.map.layers[0].line.width  # coarse on top, thicker
    # every legend entry names its range of noisy counts and the unit
    assert all(tr.name.endswith(" trips") for tr in lines)


def test_widths_grow_with_counts_and_classes_do_not_overlap(demo):
    rel, xy, _ = demo
    fig = figures.flow_map(rel, 4, xy, top=300)  # district → district
    lines = line_traces(fig)
    assert len(lines) >= 3
    spans = []
    for tr in lines:
        vals = [first_value(h) for h in tr.hovertext if h]
        spans.append((min(vals), max(vals), tr.line.width))
    spans.sort()
    for (_lo1, hi1, w1), (lo2, _hi2, w2) in zip(spans, spans[1:], strict=False):
        assert hi1 < lo2  # classes are disjoint ranges of counts
        assert w1 < w2  # larger flows are drawn thicker


def test_top_keeps_the_largest_flows_between_different_areas(demo):
    rel, xy, _ = demo
    t = 6
    top = 40
    fig = figures.flow_map(rel, t, xy, top=top, within=False)
    assert not circles(fig)
    shown = sorted(first_value(h) for tr in line_traces(fig) for h in tr.hovertext[:: figures.ARC.size + 1])
    assert len(shown) == top
    v = rel.values[t]
    between = v[rel.origins[t] != rel.destinations[t]]
    assert shown == sorted(np.sort(between)[-top:].tolist())
    # a larger N than there are flows draws them all
    lp = rel.plan.levels[2]
    n_between = int((rel.origins[2] != rel.destinations[2]).sum())
    fig = figures.flow_map(rel, 2, xy, top=1000)
    assert lp.kind == "intra"
    assert sum(line_flows(tr) for tr in line_traces(fig)) == n_between


def test_self_flows_are_circles_at_the_area_centre(demo):
    rel, xy, _ = demo
    t = 2  # region → region: the 4 within-region flows are the largest
    fig = figures.flow_map(rel, t, xy, top=10)
    (c,) = circles(fig)
    self_idx = np.flatnonzero(rel.origins[t] == rel.destinations[t])
    assert len(c.lon) == self_idx.size
    assert set(np.round(c.lon, 9)) == set(np.round(xy[1][0][rel.origins[t][self_idx]], 9))
    assert all(h.startswith("within ") for h in c.hovertext)
    sizes = np.asarray(c.marker.size)
    vals = np.array([first_value(h) for h in c.hovertext])
    assert np.all(np.diff(sizes[np.argsort(vals)]) >= 0)  # bigger flow, bigger circle


def test_hover_names_both_ends_and_the_noisy_count(demo):
    rel, xy, _ = demo
    t = 3  # region > district: origins are regions, destinations districts
    fig = figures.flow_map(rel, t, xy, top=5)
    txt = [h for tr in line_traces(fig) for h in tr.hovertext if h]
    o_names = set(rel.origin_h.display_names(1))
    assert txt and all(" → " in h and h.endswith(" trips") for h in txt)
    assert all(h.split(" → ")[0] in o_names for h in txt)
    flows = {f"{a} → {b}": n for a, b, n in rel.frame(t, names=True).itertuples(index=False)}
    for h in txt:
        key, n = h.rsplit(": ", 1)
        assert flows[key] == int(n.split(" ")[0].replace(",", ""))


def test_areas_without_coordinates_are_skipped(demo):
    rel, xy, _ = demo
    lon, lat = (a.copy() for a in xy[3])
    lon[:300] = np.nan
    fig = figures.flow_map(rel, 6, {**xy, 3: (lon, lat)}, top=10_000, within=False)
    pts = np.array([x for tr in line_traces(fig) for x in tr.lon if x is not None], dtype=float)
    assert np.isfinite(pts).all()
    o, d = rel.origins[6], rel.destinations[6]
    expected = int(((o >= 300) & (d >= 300) & (o != d)).sum())
    assert sum(line_flows(tr) for tr in line_traces(fig)) == expected


def test_flow_map_refuses_bad_input(demo):
    rel, xy, _ = demo
    with pytest.raises(ParameterError):
        figures.flow_map(rel, 0, xy)  # the total is one number
    with pytest.raises(ParameterError):
        figures.flow_map(rel, 6, xy, top=0)
    with pytest.raises(ParameterError):
        figures.flow_map(rel, 6, {1: xy[1]})  # no zone coordinates
    with pytest.raises(ParameterError):
        figures.flow_map(rel, 6, {3: (xy[3][0][:10], xy[3][1][:10])})


def test_flow_classes():
    cls, ranges = figures.flow_classes(np.array([1, 2, 3, 50, 60, 1000, 5000]))
    assert 2 <= len(ranges) <= 5
    assert np.all(np.diff(cls[np.argsort([1, 2, 3, 50, 60, 1000, 5000])]) >= 0)
    assert ranges[0][0] == 1 and ranges[-1][1] == 5000
    assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    cls, ranges = figures.flow_classes(np.array([7, 7, 7]))
    assert ranges == [(7, 7)] and (cls == 0).all()
    assert figures.flow_classes(np.array([]))[1] == []


def test_heatmap_shows_the_released_matrix(demo):
    rel, _, _ = demo
    t = 4  # district × district: 36 × 36
    fig = figures.od_heatmap(rel, t, log=False)
    hm = fig.data[0]
    assert hm.type == "heatmap"
    m = rel.matrix(t)
    assert np.array_equal(np.asarray(hm.customdata), m)
    z = np.asarray(hm.z, dtype=float)
    assert np.isnan(z[m == 0]).all() and np.array_equal(z[m != 0], m[m != 0])  # zeros blank
    assert len(hm.y) == len(set(hm.y)) == 36
    logfig = figures.od_heatmap(rel, t, log=True)
    lz = np.asarray(logfig.data[0].z, dtype=float)
    assert np.allclose(lz[m > 0], np.log10(m[m > 0]))
    ticks = logfig.data[0].colorbar.ticktext
    assert list(ticks[:3]) == ["1", "10", "100"]


def test_heatmap_refuses_big_levels(demo):
    rel, _, _ = demo
    with pytest.raises(ParameterError, match="at most 300"):
        figures.od_heatmap(rel, 6)  # 576 zones a side
    with pytest.raises(ParameterError):
        figures.od_heatmap(rel, 4, max_side=20)
    with pytest.raises(ParameterError):
        figures.od_heatmap(rel, 5)  # district > zone: 36 × 576
    assert figures.od_heatmap(rel, 3).data  # region > district: 4 × 36


def test_published_flow_map_draws_the_largest_published_flows_between_public_centroids() -> None:
    """One period of a series, from its published rows: lines for the ``top`` largest flows between
    two areas (codes not in the public list and flows ≤ 0 are not drawn), circles within one area."""
    import pandas as pd

    labels = ["a", "b", "c"]
    xy = (np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0, 0.0]))
    rows = pd.DataFrame({"origin": ["a", "a", "b", "c", "zz", "b"], "destination": ["b", "c", "c", "c", "a", "a"],
                         "noisy_count": [10, 3, 7, 5, 99, -2]})
    fig = figures.published_flow_map(rows, labels, xy, top=2)
    lines = [t for t in fig.data if t.mode == "lines"]
    drawn = sorted(h for t in lines for h in t.hovertext[::3])
    assert drawn == ["a → b: 10 trips", "b → c: 7 trips"]  # the 2 largest; 'zz' and -2 never drawn
    (circles,) = [t for t in fig.data if t.mode == "markers" and t.name.startswith("within")]
    assert list(circles.hovertext) == ["within c: 5 trips"]
    assert fig.layout.map.style == figures.OFFLINE_STYLE
