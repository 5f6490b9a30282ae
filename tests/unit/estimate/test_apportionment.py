"""Tests of dpcore.estimate.apportionment: the cut cells' apportionment variance and its over-dispersion.

Synthetic point sets where the model holds exactly, with counts measured (almost) without noise so
that the apportionment is the only error:

* points uniform and independent within their cell: the count of a cut cell inside the polygon is
  Binomial(x, w) exactly, so the binomial interval covers the true count at its nominal rate; the
  tolerance is 3 binomial SEs of the coverage over the trials (plus 0.005 for the normal
  approximation of a sum of ~30 binomials with SD ~10);
* with probability π a cell's points all sit at one uniform spot, else uniform: the variance is
  x·w(1 − w)(1 + (x − 1)π) exactly, the over-dispersed model with ρ = π; the Monte Carlo variance
  of the error is compared with the model within 3 SEs of a sample variance (from the sample's
  fourth moment);
* the same process on 2×2 groups of cells: the estimator of ρ from the finest split is unbiased for π
  (mean over seeds within 3 SEs of the seeds' spread), with and without measurement noise.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
import shapely
from scipy.stats import norm

from dpcore.errors import ParameterError
from dpcore.estimate.apportionment import apportionment_variance, overdispersion
from dpcore.estimate.gls import Measurements
from dpcore.estimate.polygon_interval import CellIndex, polygon_interval

K = 8  # an 8 x 8 grid of unit cells
POLY = shapely.Polygon([(0.3, 0.7), (6.6, 1.2), (7.4, 6.9), (1.1, 7.6)])


def grid_cells(n: int) -> np.ndarray:
    x, y = np.meshgrid(np.arange(n, dtype=float), np.arange(n, dtype=float))
    return shapely.box(x.ravel(), y.ravel(), x.ravel() + 1, y.ravel() + 1)


def flat_measurements(counts: np.ndarray) -> Measurements:
    """Each cell measured once with a negligible variance (the counts known: apportionment alone)."""
    n = counts.size
    return Measurements(sp.identity(n, format="csr"), counts.astype(float), np.full(n, 1e-9),
                        [str(i) for i in range(n)])


def scatter(rng: np.random.Generator, counts: np.ndarray, cells: np.ndarray, pi: float, trials: int = 1
            ) -> tuple[np.ndarray, np.ndarray]:
    """``trials`` independent layouts (rows) of the points of each square cell: with probability ``pi``
    all of a cell's points at one uniform spot, else independent uniforms."""
    b = shapely.bounds(cells)
    owner = np.repeat(np.arange(counts.size), counts)
    clustered = rng.random((trials, counts.size)) < pi
    spot = rng.random((trials, counts.size, 2))
    u = rng.random((trials, owner.size, 2))
    u = np.where(clustered[:, owner, None], spot[:, owner], u)
    side = b[owner, 2] - b[owner, 0]
    return b[owner, 0] + side * u[..., 0], b[owner, 1] + side * u[..., 1]


def test_variance_formula_and_bad_model() -> None:
    assert apportionment_variance(np.array([30.0]), np.array([0.2]), rho=0.5) == pytest.approx(
        30 * 0.2 * 0.8 * (1 + 29 * 0.5))
    m = flat_measurements(np.full(K * K, 5))
    with pytest.raises(ParameterError, match="apportionment"):
        polygon_interval(m, grid_cells(K), POLY, apportionment="poisson")


def test_binomial_interval_covers_uniform_points_at_its_rate() -> None:
    rng = np.random.default_rng(7)
    cells = grid_cells(K)
    counts = rng.integers(10, 40, K * K)
    r = polygon_interval(flat_measurements(counts), CellIndex(cells), POLY, 0.9, apportionment="binomial")
    assert r["cells_cut"] >= 20 and r["noise_sd"] < 1e-3 and r["apportionment"] == "binomial"
    trials = 2000
    x, y = scatter(rng, counts, cells, 0.0, trials)
    truth = shapely.contains_xy(POLY, x, y).sum(axis=1)
    hits = int(np.sum((r["low"] <= truth) & (truth <= r["high"])))
    tol = 3 * math.sqrt(0.9 * 0.1 / trials) + 0.005
    assert abs(hits / trials - 0.9) <= tol
    # the noise alone (the old interval) is far too narrow for the count inside
    none = polygon_interval(flat_measurements(counts), CellIndex(cells), POLY, 0.9, apportionment="none")
    assert none["high"] - none["low"] < 0.01 < r["high"] - r["low"]


def test_overdispersed_variance_matches_the_clustered_points() -> None:
    rng = np.random.default_rng(11)
    cells, pi = grid_cells(K), 0.3
    counts = rng.integers(5, 40, K * K)
    r = polygon_interval(flat_measurements(counts), CellIndex(cells), POLY, 0.9, rho=pi)
    assert r["apportionment"] == "overdispersed" and r["rho"] == pi
    trials = 3000
    x, y = scatter(rng, counts, cells, pi, trials)
    err = shapely.contains_xy(POLY, x, y).sum(axis=1) - r["estimate"]
    v = float(np.mean(err ** 2))  # the estimate is unbiased (E y = w·x): the mean square is the variance
    se = math.sqrt((np.mean(err ** 4) - v ** 2) / trials)
    assert abs(v - r["apportionment_sd"] ** 2) <= 3 * se
    binomial = polygon_interval(flat_measurements(counts), CellIndex(cells), POLY, apportionment="binomial")
    assert r["apportionment_sd"] > 2 * binomial["apportionment_sd"]  # clustering widens it


def group_measurements(counts: np.ndarray, noise_var: float, rng: np.random.Generator) -> Measurements:
    """A 2-level design on a ``k x k`` grid: every cell and every 2×2 group, each with its own noise."""
    k = int(math.isqrt(counts.size))
    i, j = np.divmod(np.arange(counts.size), k)
    group = (i // 2) * (k // 2) + j // 2
    A = sp.vstack([sp.identity(counts.size, format="csr"),
                   sp.csr_matrix((np.ones(counts.size), (group, np.arange(counts.size))))]).tocsr()
    y = A @ counts.astype(float)
    var = np.full(A.shape[0], max(noise_var, 1e-9))
    if noise_var > 0:
        y = y + rng.normal(0.0, math.sqrt(noise_var), y.size)
    return Measurements(A, y, var, [str(c) for c in range(counts.size)])


@pytest.mark.parametrize("noise_var", [0.0, 100.0])
def test_overdispersion_from_the_finest_split_is_unbiased(noise_var: float) -> None:
    k, pi, n = 16, 0.25, 60  # 64 groups of 2×2 cells, n points each
    groups = shapely.box(*(2 * shapely.bounds(grid_cells(k // 2))).T)  # the 2×2 groups' squares
    cells = grid_cells(k)
    est = []
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        x, y = (a[0] for a in scatter(rng, np.full(groups.size, n), groups, pi))
        col, row = np.minimum(x.astype(int), k - 1), np.minimum(y.astype(int), k - 1)
        counts = np.bincount(row * k + col, minlength=k * k)
        m = group_measurements(counts, noise_var, rng)
        est.append(overdispersion(m, shapely.area(cells)))
    e = np.asarray(est)
    assert abs(e.mean() - pi) <= 3 * e.std(ddof=1) / math.sqrt(e.size)
    assert overdispersion(flat_measurements(counts), shapely.area(cells)) is None  # no groups: nothing to use


def test_default_estimates_rho_from_the_release() -> None:
    rng = np.random.default_rng(3)
    k = 8
    cells = grid_cells(k)
    x, y = (a[0] for a in scatter(rng, np.full(16, 200), shapely.box(*(2 * shapely.bounds(grid_cells(4))).T), 1.0))
    counts = np.bincount(np.minimum(y.astype(int), k - 1) * k + np.minimum(x.astype(int), k - 1), minlength=k * k)
    m = group_measurements(counts, 0.0, rng)
    r = polygon_interval(m, CellIndex(cells), POLY, 0.9)
    assert r["apportionment"] == "overdispersed" and r["rho"] == pytest.approx(1.0)  # all of a group at one spot
    z = norm.ppf(0.95)
    assert r["high"] - r["estimate"] == pytest.approx(z * r["sd"])
    assert r["sd"] ** 2 == pytest.approx(r["noise_sd"] ** 2 + r["apportionment_sd"] ** 2)


def test_only_the_smallest_groups_count() -> None:
    """A total over all cells (a coarser level) is not a finest group: adding it changes nothing."""
    rng = np.random.default_rng(5)
    counts = rng.integers(0, 50, 64)
    m = group_measurements(counts, 0.0, rng)
    A = sp.vstack([m.A, sp.csr_matrix(np.ones((1, 64)))]).tocsr()
    total = Measurements(A, np.r_[m.y, counts.sum()], np.r_[m.var, 1e-9], m.cells)
    areas = np.ones(64)
    assert overdispersion(total, areas) == pytest.approx(overdispersion(m, areas))
    # only the cells' own measurements are used: a group whose cell has none is left out
    part = Measurements(A[1:], total.y[1:], total.var[1:], m.cells)
    assert overdispersion(part, areas) != pytest.approx(overdispersion(m, areas))
