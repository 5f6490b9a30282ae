"""Unit tests of dpcore.data.synthetic: Gaussian clusters, the demo points and the census table.

Moments are checked against the generating distribution with 5 standard errors.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpcore.data.domain import Bounds
from dpcore.data.synthetic import (
    CLUSTER_SHAPES,
    DEMO_BOUNDS,
    DEMO_N,
    clustered_points,
    demo_points,
    gaussian_clusters,
    synthetic_census,
)

N_SE = 5.0
B = Bounds(-74.06, 40.56, -73.70, 40.92)


class TestGaussianClusters:
    @pytest.mark.parametrize("n", [1, 17, 5000])
    def test_exactly_n_inside(self, n: int) -> None:
        lon, lat = gaussian_clusters(n, B, sigma_cells=200, seed=3)
        assert lon.shape == (n,) and lat.shape == (n,)
        assert np.all((lon >= B.west) & (lon <= B.east))
        assert np.all((lat >= B.south) & (lat <= B.north))

    def test_zero_points(self) -> None:
        lon, lat = gaussian_clusters(0, B, seed=3)
        assert lon.shape == (0,) and lat.shape == (0,)

    def test_edge_centre_resampled_not_clamped(self) -> None:
        # a centre on the south-west corner: ~3/4 of the draws fall outside and are redrawn
        n = 4000
        lon, lat = gaussian_clusters(n, B, sigma_cells=30, centres=[(0.0, 0.0)], seed=5)
        assert len(lon) == n
        assert np.all(lon >= B.west) and np.all(lat >= B.south)
        # clamping would pile points on the edge; resampling leaves none exactly there
        assert np.sum(lon == B.west) == 0 and np.sum(lat == B.south) == 0
        # a half-normal in each axis: mean offset sigma * sqrt(2/pi)
        sig_lon = 30 / 1024 * (B.east - B.west)
        mean_half = sig_lon * math.sqrt(2 / math.pi)
        sd_half = sig_lon * math.sqrt(1 - 2 / math.pi)
        assert abs((lon - B.west).mean() - mean_half) <= N_SE * sd_half / math.sqrt(n)

    def test_centred_and_spread(self) -> None:
        n = 20_000
        sigma = 50.0
        lon, lat = gaussian_clusters(n, B, sigma_cells=sigma, centres=[(0.5, 0.25)], seed=11)
        sig_lon = sigma / 1024 * (B.east - B.west)
        sig_lat = sigma / 1024 * (B.north - B.south)
        c_lon = B.west + 0.5 * (B.east - B.west)
        c_lat = B.south + 0.25 * (B.north - B.south)
        # the domain cuts the normal at least 5.1 sigma away (256 cells): that shifts the
        # mean by < 1e-5 sigma and the variance by < 1e-4 sigma^2, far below the tolerances
        assert abs(lon.mean() - c_lon) <= N_SE * sig_lon / math.sqrt(n)
        assert abs(lat.mean() - c_lat) <= N_SE * sig_lat / math.sqrt(n)
        # sample variance: SE sigma^2 sqrt(2 / n) for a normal
        for x, s in ((lon, sig_lon), (lat, sig_lat)):
            assert abs(x.var() - s**2) <= N_SE * s**2 * math.sqrt(2 / n)

    def test_weights(self) -> None:
        n = 10_000
        lon, _ = gaussian_clusters(
            n, B, sigma_cells=20, centres=[(0.2, 0.5), (0.8, 0.5)], weights=[4, 1], seed=2
        )
        west_share = np.mean(lon < B.west + 0.5 * (B.east - B.west))
        p = 0.8
        assert abs(west_share - p) <= N_SE * math.sqrt(p * (1 - p) / n)

    def test_per_cluster_sigma(self) -> None:
        n = 10_000
        lon, _ = gaussian_clusters(
            n, B, sigma_cells=[10, 60], centres=[(0.25, 0.5), (0.75, 0.5)], seed=4
        )
        mid = B.west + 0.5 * (B.east - B.west)
        left, right = lon[lon < mid], lon[lon >= mid]
        unit = (B.east - B.west) / 1024
        for x, s in ((left, 10 * unit), (right, 60 * unit)):
            assert abs(x.std() - s) <= N_SE * s / math.sqrt(2 * len(x))

    def test_reproducible_by_seed(self) -> None:
        a = gaussian_clusters(500, B, seed=9)
        b = gaussian_clusters(500, B, seed=9)
        c = gaussian_clusters(500, B, seed=10)
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
        assert not np.array_equal(a[0], c[0])


class TestDemoPoints:
    def test_shape_columns_inside(self) -> None:
        df = demo_points(n=3000, seed=1)
        assert isinstance(df, pd.DataFrame)
        assert df.shape == (3000, 2)
        assert set(df.columns) == {"lat", "lon"}
        assert DEMO_BOUNDS.contains(df["lon"].to_numpy(), df["lat"].to_numpy()).all()
        assert df["lat"].dtype.kind == "f" and df["lon"].dtype.kind == "f"

    def test_default_size_and_reproducible(self) -> None:
        a = demo_points()
        assert len(a) == DEMO_N
        pd.testing.assert_frame_equal(a, demo_points())
        assert not demo_points(n=100, seed=1).equals(demo_points(n=100, seed=2))

    def test_clustered(self) -> None:
        # the Midtown hot spot holds ~30 % of the points, far more than its area share
        df = demo_points(n=20_000, seed=3)
        near = (np.abs(df["lon"] + 73.985) < 0.01) & (np.abs(df["lat"] - 40.755) < 0.01)
        area_share = (0.02 * 0.02) / ((DEMO_BOUNDS.east - DEMO_BOUNDS.west) * (DEMO_BOUNDS.north - DEMO_BOUNDS.south))
        assert near.mean() > 20 * area_share


class TestSyntheticCensus:
    def test_nested_codes(self) -> None:
        df = synthetic_census(n_states=3, counties_per_state=4, tracts_per_county=5, seed=0)
        assert len(df) == 3 * 4 * 5
        assert list(df.columns) == ["state", "county", "tract", "population"]
        assert sorted(df["state"].unique()) == ["01", "02", "03"]
        counties = {s: set(g["county"]) for s, g in df.groupby("state")}
        # county codes repeat across states: an area is identified by its path
        assert counties["01"] == counties["02"] == counties["03"]
        assert len(counties["01"]) == 4
        assert df["state"].str.len().eq(2).all()
        assert df["county"].str.len().eq(3).all()
        assert df["tract"].str.len().eq(6).all()
        assert not df.duplicated(["state", "county", "tract"]).any()
        assert df.groupby(["state", "county"]).size().eq(5).all()

    def test_populations(self) -> None:
        df = synthetic_census(seed=1)
        assert np.issubdtype(df["population"].dtype, np.integer)
        assert (df["population"] >= 0).all()
        assert df["population"].sum() > 0

    def test_reproducible(self) -> None:
        pd.testing.assert_frame_equal(synthetic_census(seed=5), synthetic_census(seed=5))
        assert not synthetic_census(seed=5).equals(synthetic_census(seed=6))


# ---------------------------------------------------------------- clustered_points (issue 19)

def test_clustered_points_exact_n_inside_and_seeded():
    b = Bounds(-74.0, 40.0, -73.0, 41.0)
    for shape in CLUSTER_SHAPES:
        lon, lat = clustered_points(5000, b, shape, seed=3)
        assert lon.size == lat.size == 5000
        assert ((lon >= b.west) & (lon < b.east) & (lat >= b.south) & (lat < b.north)).all()
        lon2, lat2 = clustered_points(5000, b, shape, seed=3)
        assert np.array_equal(lon, lon2) and np.array_equal(lat, lat2)
    other, _ = clustered_points(5000, b, "tight_wide", seed=4)
    assert not np.array_equal(other, clustered_points(5000, b, "tight_wide", seed=3)[0])


def test_clustered_points_tight_wide_matches_its_description():
    """45 % within a σ = 8/512 Gaussian: about 39 % of all points within 2σ of its centre
    (0.45 · (1 − e^-2) = 0.389); the uniform background puts about 10 % · area elsewhere."""
    lon, lat = clustered_points(200_000, Bounds(0.0, 0.0, 1.0, 1.0), "tight_wide", seed=0)
    near = np.hypot(lon - 0.30, lat - 0.62) < 2 * 8 / 512
    assert abs(near.mean() - 0.389) < 0.006  # 5.5 standard errors
    with pytest.raises(ValueError, match="Unknown shape"):
        clustered_points(10, Bounds(0.0, 0.0, 1.0, 1.0), "nope")
