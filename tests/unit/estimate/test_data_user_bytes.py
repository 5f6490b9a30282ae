"""The data users' files keep their bytes for a fixed seed (a guard for the writers' speed-ups):
the SHA-256 of every file of seeded O/D releases of the made-up demo (InfTDA on the whole demo,
TopDown L2 and VanillaGauss on parts of it, which also write replicates.csv), of hierarchy
releases of the demo's areas (their populations as counts) and of seeded points releases (a
least-squares tree, a data-dependent partition, leaves only, a mechanism offering no
measurement).  The digests were taken from the writers before they were made faster."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest
from points_helpers import release_with

from dpcore import catalog
from dpcore.areas.counts import HierarchyCounts
from dpcore.areas.data_users import hierarchy_data_user_files
from dpcore.data import synthetic
from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.data.hierarchy import Hierarchy
from dpcore.flows.counts import ODCounts
from dpcore.flows.data_users import od_data_user_files
from dpcore.points.export import release_tables
from dpcore.privacy import budget
from dpcore.privacy.noise import NoiseSource


def _digests(files: dict[str, bytes]) -> dict[str, str]:
    return {name: hashlib.sha256(data).hexdigest()[:16] for name, data in files.items()}


@pytest.fixture(scope="module")
def demo() -> tuple:
    areas, flows, _ = synthetic.demo_od()
    return areas, flows


def _od_files(demo: tuple, mech: str, rho: float, districts: list[str] | None = None) -> dict[str, bytes]:
    """The data users' files of ``mech`` on the demo (only the trips within ``districts``, path
    labels such as ``R1/D1``, when given)."""
    areas, flows = demo
    if districts is not None:
        areas = areas[(areas["region"] + "/" + areas["district"]).isin(districts)]
        within = [flows[c].str.rsplit("/", n=1).str[0].isin(districts) for c in ("origin", "destination")]
        flows = flows[within[0] & within[1]]
    h = Hierarchy.from_frame(areas, ["region", "district", "zone"], source="area list")
    counts = ODCounts.from_frame(flows, h, origin="origin", destination="destination", count="count",
                                 fingerprint=False)
    rel = catalog.get("od", mech).release_counts(counts, budget.zcdp(rho), NoiseSource(11))
    return od_data_user_files(rel)


OD_CASES = {
    # the whole demo: 80k measured nodes, no replicates.csv (75k cells)
    "inftda": ("inftda", 0.25, None, {
        "measurements.csv": "53ad5c6dd19b8762", "design.json": "e83d3025533fa7e8", "estimates.csv": "87493ef6725ac6dc"}),
    # two districts: a tree small enough for replicates.csv
    "tda_l2": ("tda_l2", 1.0, ["R1/D1", "R1/D2"], {
        "measurements.csv": "a988f16a80872ab6", "design.json": "503dfea00eab68de", "replicates.csv": "b8a62fe97117ec6f",
        "estimates.csv": "8ef293c89f305941"}),
    # the leaf-only design of three districts
    "vanilla_gauss": ("vanilla_gauss", 1.0, ["R1/D1", "R1/D2", "R1/D3"], {
        "measurements.csv": "808730fd1a89af0f", "design.json": "02525e78080fcaba", "replicates.csv": "f688cd9c376aed2a",
        "estimates.csv": "a7605bd18b0bde12"}),
}


@pytest.mark.parametrize("case", list(OD_CASES))
def test_od_data_user_files_keep_their_bytes(demo: tuple, case: str) -> None:
    mech, rho, districts, want = OD_CASES[case]
    assert _digests(_od_files(demo, mech, rho, districts)) == want


HIERARCHY_CASES = {
    # the public total an invariant of the root
    ("exact", "replace"): {
        "measurements.csv": "ae16985209155985", "design.json": "06fe7ac8700fc79b", "replicates.csv": "46af883b78bcc2a9",
        "estimates.csv": "b8730b49b5fe39b3"},
    # the finest areas measured alone
    ("bottom_up", "add_remove"): {
        "measurements.csv": "7bd9688beb139ad0", "design.json": "c18f0ecb067714d8", "replicates.csv": "daf26d430b92dc77",
        "estimates.csv": "c78ef53ee8c7c12c"},
}


@pytest.mark.parametrize("case", list(HIERARCHY_CASES))
def test_hierarchy_data_user_files_keep_their_bytes(demo: tuple, case: tuple[str, str]) -> None:
    areas, _ = demo
    levels = ["region", "district", "zone"]
    h = Hierarchy.from_frame(areas, levels, source="area list")
    counts = HierarchyCounts.from_frame(areas, h, levels, "population")
    mech, neighbour = case
    rel = catalog.get("hierarchy", mech).release_counts(counts, budget.zcdp(0.5), NoiseSource(11), neighbour=neighbour)
    assert _digests(hierarchy_data_user_files(rel)) == HIERARCHY_CASES[case]


BOUNDS = Bounds(-74.06, 40.56, -73.70, 40.92)

POINTS_CASES = {
    "quadtree": ({"height": 4}, {  # least squares on a tree: nodes of many cells
        "release.csv": "5d451dd7e89174cd", "release.geojson": "d844346adb45d7ba", "measurements.csv": "eefb6b2e37b6939f",
        "design.json": "41f34a596dc2fad0", "estimates.csv": "9b10ec8e5ea94e24", "replicates.csv": "c5aa62708a75a76a"}),
    "ag": ({"public_n": 20_000}, {  # data-dependent partition, measured at two levels
        "release.csv": "8d4b527445a7d749", "release.geojson": "0a3d4ac7ead06d13", "measurements.csv": "b05a423b023be730",
        "design.json": "35942fe82f4c6bd2", "estimates.csv": "2717a1e250fa487d", "replicates.csv": "0b737425cfb80321"}),
    "privtree": ({}, {  # the leaves are the measurements: one cell a node
        "release.csv": "2e9b30521c4bcd83", "release.geojson": "e87a1b21f680a0fc", "measurements.csv": "f499bd7c7d54c7ca",
        "design.json": "e85ee2f6beb2ce85", "estimates.csv": "6f4ab1d38c3881b1", "replicates.csv": "dbd846531f0e4108"}),
    "privelet": ({}, {  # no measurement offered
        "release.csv": "4aef1ccdf973a7ab", "release.geojson": "3abe2c55184a4c09", "measurements.csv": "8af8d16e59406b6f",
        "design.json": "3e153c9c16d6dbcc", "estimates.csv": "e1ab03d6a6856521"}),
}


@pytest.mark.parametrize("mech", list(POINTS_CASES))
def test_points_release_tables_keep_their_bytes(mech: str) -> None:
    params, want = POINTS_CASES[mech]
    counts = np.random.default_rng(5).poisson(6, size=(48, 48)).astype(np.int64)
    agg = Aggregate(grid=Grid(BOUNDS, 48, 48), counts=counts, n_outside=0, n_capped=0, sensitivity=1, user_cap=None)
    rel = release_with(catalog.get("points", mech), agg, 1.0, params, NoiseSource(11))
    rel = dataclasses.replace(rel, release_id="fixed")  # release.geojson names it; drawn at random
    assert _digests(release_tables(rel)) == want


@pytest.mark.parametrize("row_level", [[0, -1, 0], [0, 1, 0], [0, 0], [[0, 0, 0]], [0.0, 0.0, 0.0]])
def test_a_pack_refuses_level_indices_that_do_not_name_a_level_per_measurement(row_level) -> None:
    """A negative index used to wrap silently, labelling a row with the last level's noise."""
    from dpcore.estimate.data_users import DataUserPack, MeasuredLevel

    cells = ["a", "b", "c"]
    with pytest.raises(ValueError, match="one level index in 0..0 per measurement"):
        DataUserPack("points", [MeasuredLevel("grid", "discrete_laplace", 2.0, 1.0)], np.asarray(row_level),
                     cells, np.array([40, 10, 7]), cells, {c: [i] for i, c in enumerate(cells)})
