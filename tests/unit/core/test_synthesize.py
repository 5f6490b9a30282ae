"""Synthetic points and trips (issue 25 item 6): every published count is reproduced exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcore import pipeline
from dpcore.cli import main
from dpcore.core.record import write_files
from dpcore.core.synthesize import synthesize, whole_counts
from dpcore.data.hierarchy import Hierarchy
from dpcore.flows.counts import ODCounts
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource


def _points_release(tmp_path: Path, mechanism: str, params: dict, epsilon: float = 2.0) -> Path:
    """A points release with a fixed noise seed, written as the CLI writes it."""
    from points_helpers import release_with

    from dpcore import catalog
    from dpcore.data.domain import Aggregate, Bounds, Grid
    from dpcore.points.export import release_files

    counts = np.random.default_rng(4).poisson(9, size=(16, 16)).astype(np.int64)
    agg = Aggregate(grid=Grid(Bounds(-74.06, 40.56, -73.70, 40.92), 16, 16), counts=counts, n_outside=0,
                    n_capped=0, sensitivity=1, user_cap=None)
    rel = release_with(catalog.get("points", mechanism), agg, epsilon, params, NoiseSource(6))
    out = tmp_path / f"rel_{mechanism}"
    write_files(release_files(rel), out)
    return out


@pytest.mark.parametrize("mechanism,params,epsilon", [("identity", {}, 0.5), ("privtree", {}, 20.0),
                                                     ("quadtree", {"height": 3}, 2.0)])
def test_points_reproduce_every_leaf_and_every_consistent_node(tmp_path, capsys, mechanism, params, epsilon):
    out = _points_release(tmp_path, mechanism, params, epsilon)
    dest = tmp_path / "syn" / "points.csv"
    assert main(["synthesize", "--release", str(out), "--out", str(dest), "--seed", "7"]) == 0
    said = capsys.readouterr().out
    assert "artefacts" in said and "Seed: 7" in said and "not secret" in said
    assert (dest.parent / "points.README.txt").read_text("utf-8").startswith("SYNTHETIC POINTS")
    syn = pd.read_csv(dest)
    rel = pd.read_csv(out / "release.csv")
    leaves = rel[rel["leaf"]]
    whole = whole_counts(leaves["noisy_count"].to_numpy())
    # each synthetic point lies inside its leaf's rectangle, and the leaf holds its whole count
    got = syn["cell"].value_counts().reindex(leaves["id"], fill_value=0).to_numpy()
    np.testing.assert_array_equal(got, whole)
    box = leaves.set_index("id").loc[syn["cell"]]
    assert ((syn["lon"].to_numpy() >= box["west"].to_numpy()) & (syn["lon"].to_numpy() <= box["east"].to_numpy())
            & (syn["lat"].to_numpy() >= box["south"].to_numpy()) & (syn["lat"].to_numpy() <= box["north"].to_numpy())).all()
    # every published rectangle (all levels) counted from the synthetic points in its box
    inside = ((syn["lon"].to_numpy()[None, :] >= rel["west"].to_numpy()[:, None])
              & (syn["lon"].to_numpy()[None, :] < rel["east"].to_numpy()[:, None])
              & (syn["lat"].to_numpy()[None, :] >= rel["south"].to_numpy()[:, None])
              & (syn["lat"].to_numpy()[None, :] < rel["north"].to_numpy()[:, None])).sum(axis=1)
    published = rel["noisy_count"].to_numpy(dtype=float)
    exact_leaves = np.array_equal(leaves["noisy_count"].to_numpy(dtype=float), whole)
    if mechanism == "privtree":  # non-negative integer, consistent leaves (this seed): every count
        assert exact_leaves
        np.testing.assert_array_equal(inside, published)
    else:  # otherwise the whole non-negative leaf counts are what is reproduced (stated in the README)
        assert "rounded and raised to 0" in said
        np.testing.assert_array_equal(inside[rel["leaf"].to_numpy()], whole)


def test_the_seed_reproduces_the_file_and_a_fresh_one_is_recorded(tmp_path):
    out = _points_release(tmp_path, "identity", {})
    a, b = synthesize(out, seed=3), synthesize(out, seed=3)
    pd.testing.assert_frame_equal(a.frame, b.frame)
    c = synthesize(out)
    assert f"Seed: {c.seed} " in c.readme and c.seed != synthesize(out).seed


def test_a_public_mask_places_the_points_and_keeps_every_count(tmp_path, capsys):
    """--mask: each leaf's points are drawn inside its part of the curator's public mask (a triangle
    here, cutting cells); a leaf outside the mask keeps the draw over the leaf, and says so."""
    import json

    import shapely

    out = _points_release(tmp_path, "identity", {})
    tri = [[-74.06, 40.56], [-73.70, 40.56], [-74.06, 40.92], [-74.06, 40.56]]
    mask = tmp_path / "land.geojson"
    mask.write_text(json.dumps({"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {},
                                "geometry": {"type": "Polygon", "coordinates": [tri]}}]}), "utf-8")
    dest = tmp_path / "points.csv"
    assert main(["synthesize", "--release", str(out), "--out", str(dest), "--seed", "2", "--mask", str(mask)]) == 0
    said = capsys.readouterr().out
    syn, rel = pd.read_csv(dest), pd.read_csv(out / "release.csv")
    leaves = rel[rel["leaf"]].set_index("id")
    np.testing.assert_array_equal(syn["cell"].value_counts().reindex(leaves.index, fill_value=0).to_numpy(),
                                  whole_counts(leaves["noisy_count"].to_numpy()))
    poly = shapely.Polygon(tri)
    cells = shapely.box(*leaves.loc[syn["cell"], ["west", "south", "east", "north"]].to_numpy().T)
    in_mask = shapely.area(shapely.intersection(cells, poly)) > 0
    inside = shapely.contains_xy(poly, syn["lon"], syn["lat"]) | shapely.intersects_xy(poly.boundary, syn["lon"], syn["lat"])
    assert inside[in_mask].all() and 0 < in_mask.sum() < len(syn)
    assert shapely.intersects_xy(cells, syn["lon"], syn["lat"]).all()  # still in its own leaf
    away = syn.loc[~in_mask, "cell"].nunique()  # leaves with points and no part of the mask
    assert f"{away:,} leaves with points lie outside the mask" in said and "land.geojson" in said


ZONES = [(r, d, z) for r in ("01", "02") for d in ("001", "003") for z in ("1", "2", "3")]


def test_od_trips_reproduce_every_published_flow(tmp_path, capsys):
    from flows_helpers import plan_od

    h = Hierarchy.from_frame(pd.DataFrame(ZONES, columns=["region", "district", "zone"]), ["region", "district", "zone"])
    labels = ["/".join(t) for t in ZONES]
    rng = np.random.default_rng(2)
    flows = pd.DataFrame({"origin": np.repeat(labels, len(labels)), "destination": np.tile(labels, len(labels)),
                          "count": rng.poisson(6, len(labels) ** 2)})
    counts = ODCounts.from_frame(flows, h, origin="origin", destination="destination", count="count")
    kr = pipeline.release(plan_od(counts, "inftda", budget.zcdp(1.0)), counts,
                          ledger=Ledger(budget.zcdp(10.0), dataset="x"), noise=NoiseSource(5))
    out = tmp_path / "od"
    write_files(kr.files(), out)
    dest = tmp_path / "trips.csv"
    assert main(["synthesize", "--release", str(out), "--out", str(dest), "--seed", "1"]) == 0
    assert "artefacts" in capsys.readouterr().out
    trips = pd.read_csv(dest, dtype=str)
    rel = pd.read_csv(out / "release.csv", dtype={"origin": str, "destination": str})
    assert (rel["noisy_count"] == np.round(rel["noisy_count"])).all() and (rel["noisy_count"] >= 0).all()
    for level, rows in rel.groupby("level"):
        def cut(col: pd.Series, like: pd.Series) -> pd.Series:
            k = like.iloc[0].count("/") + 1
            return pd.Series(["total"] * len(col)) if like.iloc[0] == "total" else col.str.split("/").str[:k].str.join("/")
        got = pd.DataFrame({"o": cut(trips["origin"], rows["origin"]), "d": cut(trips["destination"], rows["destination"])})
        n = got.value_counts()
        for o, d, v in rows[["origin", "destination", "noisy_count"]].itertuples(index=False):
            assert n.get((o, d), 0) == v, (level, o, d)
        assert n.sum() == rows["noisy_count"].sum()  # and no trips between pairs not listed


def test_a_folder_without_a_release_is_refused(tmp_path, capsys):
    assert main(["synthesize", "--release", str(tmp_path), "--out", str(tmp_path / "p.csv")]) == 2
    assert "holds no release" in capsys.readouterr().err
