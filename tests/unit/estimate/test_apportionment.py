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
from dpcore.estimate.apportionment import (
    SUBGRID,
    apportionment_variance,
    correlated_variance,
    overdispersion,
    piece_covariance,
    shape_factors,
    subcell_overdispersion,
)
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


def quadtree_measurements(counts: np.ndarray, noise_var: float, rng: np.random.Generator) -> Measurements:
    """A quadtree on a ``k x k`` grid (``k`` a power of 2): every cell and every block of 2^L × 2^L cells,
    each measured with its own noise (variance ``noise_var``)."""
    k = counts.shape[0]
    i, j = np.divmod(np.arange(k * k), k)
    rows = [sp.identity(k * k, format="csr")]
    L = 1
    while (1 << L) <= k:
        g = (i >> L) * (k >> L) + (j >> L)
        rows.append(sp.csr_matrix((np.ones(k * k), (g, np.arange(k * k)))))
        L += 1
    A = sp.vstack(rows).tocsr()
    y = A @ counts.ravel().astype(float)
    var = np.full(A.shape[0], max(noise_var, 1e-9))
    if noise_var > 0:
        y = y + rng.normal(0.0, math.sqrt(noise_var), y.size)
    return Measurements(A, y, var, [str(c) for c in range(k * k)])


def cascade(rng: np.random.Generator, k: int, n: int, rho_of_side: dict[int, float]) -> np.ndarray:
    """Counts on a ``k x k`` grid from a random cascade: each block's points split into its four quarters
    by a Dirichlet-multinomial whose intra-class correlation is ``rho_of_side[side of the quarters]``
    (Dirichlet(θ, θ, θ, θ) has ``ρ = 1 / (4θ + 1)``; Mosimann 1962): the ρ of each split is known."""
    counts = np.array([[n]])
    side = k
    while counts.shape[0] < k:
        side //= 2
        theta = (1.0 / rho_of_side[side] - 1.0) / 4.0
        p = rng.dirichlet(np.full(4, theta), size=counts.size)
        parts = rng.multinomial(counts.ravel(), p).reshape(counts.shape + (2, 2))
        counts = parts.transpose(0, 2, 1, 3).reshape(2 * counts.shape[0], 2 * counts.shape[1])
    return counts


@pytest.mark.parametrize("noise_var", [0.0, 50.0])
def test_subcell_rho_extrapolates_a_power_law_of_the_splits(noise_var: float) -> None:
    """On a cascade whose splits' ρ follow ρ(side) = 0.12·side^−0.5 (side of the parts, in cells), the three
    finest splits are each estimated without bias and the power law through them gives the ρ of the split
    one level below the cells, 0.12·2^0.5 (means over seeds within 3 SEs of the seeds' spread)."""
    k, alpha = 32, 0.5
    law = {s: 0.12 * s ** -alpha for s in (16, 8, 4, 2, 1)}
    fits, levels = [], []
    for seed in range(12):
        rng = np.random.default_rng(200 + seed)
        counts = cascade(rng, k, 256 * 300, law)
        model = subcell_overdispersion(quadtree_measurements(counts, noise_var, rng), np.ones(k * k))
        assert model is not None and len(model.levels) == 3
        assert [s for _, s in model.levels] == pytest.approx([1.0, 2.0, 4.0])
        fits.append((model.rho, model.exponent))
        levels.append([r for r, _ in model.levels])
    lv = np.asarray(levels)
    assert np.all(np.abs(lv.mean(axis=0) - [law[1], law[2], law[4]]) <= 3 * lv.std(axis=0, ddof=1) / math.sqrt(12))
    f = np.asarray(fits)
    target = (0.12 * 2 ** alpha, alpha)
    assert np.all(np.abs(f.mean(axis=0) - target) <= 3 * f.std(axis=0, ddof=1) / math.sqrt(12))


def test_shape_factors_are_symmetric_and_order_the_shapes() -> None:
    k = SUBGRID
    i, j = np.divmod(np.arange(k * k), k)
    half, strip, diag = (i < k // 2), (i < 1), (i + j < k - 1)
    corner = (i + j < 3)
    shapes = np.stack([half, strip, diag, corner]).astype(float)
    for alpha in (0.2, 0.8, 1.4):
        f = shape_factors(shapes, alpha)
        # a piece and its complement share their error (f_A = −f_{A^c}); a transposed piece is the same shape
        assert shape_factors(1.0 - shapes, alpha) == pytest.approx(f)
        flip = shapes.reshape(-1, k, k).transpose(0, 2, 1).reshape(-1, k * k)
        assert shape_factors(flip, alpha) == pytest.approx(f)
        assert f[0] > f[2] > 1.0 > f[3] > f[1] > 0  # a straight half > a diagonal half > quarters > slivers
    # a piece with no sub-cell centre inside takes the thinnest strip's factor
    assert shape_factors(np.zeros((1, k * k)), 0.8)[0] == pytest.approx(shape_factors(strip[None, :].astype(float), 0.8)[0])


def test_kernel_matches_direct_integration() -> None:
    """The mean of r^−α between two uniform points of one unit square and of two squares side by side,
    against scipy's adaptive quadrature of the same triangular-density integral."""
    from scipy.integrate import dblquad

    from dpcore.estimate.apportionment import kernel_table

    for alpha in (0.4, 1.2):
        table = kernel_table(alpha)
        for i, j in ((0, 0), (1, 0), (2, 1)):
            def f(v: float, u: float, i: int = i, j: int = j, a: float = alpha) -> float:
                return (1 - abs(u)) * (1 - abs(v)) * ((i + u) ** 2 + (j + v) ** 2) ** (-a / 2)

            ref = sum(dblquad(f, u0, u0 + 1, v0, v0 + 1, epsabs=1e-8)[0] for u0 in (-1, 0) for v0 in (-1, 0))
            assert table[i, j] == pytest.approx(ref, rel=2e-3)


def test_neighbouring_pieces_widen_the_interval() -> None:
    """Cells cut alike along a straight edge err together: the correlated variance of a row of them exceeds
    the sum of their own, and a row cut on alternating sides is below it (negative correlations)."""
    k = SUBGRID
    i = np.arange(k * k) // k
    left = (i < k // 2).astype(float)
    n = 6
    x, w = np.full(n, 80.0), np.full(n, 0.5)
    row = np.column_stack([np.zeros(n, dtype=int), np.arange(n)])  # a column of cells, each cut in its left half
    alone = correlated_variance(x, w, 0.2, np.tile(left, (n, 1)), None, 0.6)
    together = correlated_variance(x, w, 0.2, np.tile(left, (n, 1)), row, 0.6)
    across = np.column_stack([np.arange(n), np.zeros(n, dtype=int)])  # a row of cells, each cut in its left half
    alternating = correlated_variance(x, w, 0.2, np.tile(left, (n, 1)), across, 0.6)
    assert together > 1.2 * alone and alternating < alone


def test_default_polygon_interval_uses_the_subcell_model() -> None:
    """On a quadtree release (three splits and more) the default interval adds the shape-scaled apportionment
    variance with the extrapolated ρ and says how ρ was found; ``neighbours`` adds the correlations of
    neighbouring cut cells; a given ρ keeps the plain beta-binomial."""
    rng = np.random.default_rng(21)
    k = 16
    counts = cascade(rng, k, 256 * 100, {s: 0.1 * s ** -0.5 for s in (8, 4, 2, 1)})
    m = quadtree_measurements(counts, 4.0, rng)
    cells = grid_cells(k)
    poly = shapely.Polygon([(1.3, 2.2), (13.6, 1.4), (14.2, 12.7), (2.1, 14.9)])
    r = polygon_interval(m, CellIndex(cells), poly, 0.9)
    model = subcell_overdispersion(m, shapely.area(cells))
    assert model is not None and model.exponent is not None
    assert r["apportionment"] == "overdispersed" and r["rho"] == pytest.approx(model.rho)
    assert "power law" in r["rho_how"] and r["cells_cut"] > 20
    from dpcore.estimate.gls import gls_estimate
    from dpcore.estimate.polygon_interval import grid_positions, piece_grids, polygon_weights

    idx, share = polygon_weights(cells, poly)
    full = share >= 1.0
    x = gls_estimate(m)
    geoms = cells[idx[~full]]
    grids = piece_grids(geoms, poly)
    want = apportionment_variance(x[idx[~full]], share[~full],
                                  np.minimum(1.0, model.rho * shape_factors(grids, model.exponent)))
    assert r["apportionment_sd"] ** 2 == pytest.approx(want)
    both = polygon_interval(m, CellIndex(cells), poly, 0.9, neighbours=True)
    want = correlated_variance(x[idx[~full]], share[~full], model.rho, grids, grid_positions(geoms), model.exponent)
    assert both["apportionment_sd"] ** 2 == pytest.approx(want) and want > r["apportionment_sd"] ** 2
    plain = polygon_interval(m, CellIndex(cells), poly, 0.9, rho=model.rho)
    assert plain["rho_how"] == "given"
    assert plain["apportionment_sd"] ** 2 == pytest.approx(apportionment_variance(x[idx[~full]], share[~full], model.rho))


def test_correlated_variance_reads_the_shapes_once_and_answers_as_from_its_parts(monkeypatch) -> None:
    """Given the pieces or not, the same variance (shape factors, then the cross terms of piece_covariance);
    without them the shape factors are computed once, not a second time inside piece_covariance."""
    import dpcore.estimate.apportionment as app

    k = SUBGRID
    rng = np.random.default_rng(3)
    inside = (rng.random((6, k * k)) < 0.5).astype(float)
    xy = np.array([[0, 0], [0, 1], [1, 0], [1, 1], [3, 3], [2, 1]])
    x, w = rng.integers(5, 60, 6).astype(float), inside.mean(axis=1) * 0.9 + 0.05
    pieces = (shape_factors(inside, 0.5), *piece_covariance(inside, xy, 0.5)[1:])
    calls = []
    real = app.shape_factors
    monkeypatch.setattr(app, "shape_factors", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    got = correlated_variance(x, w, 0.2, inside, xy, 0.5)
    assert len(calls) == 1
    assert got == pytest.approx(correlated_variance(x, w, 0.2, None, None, 0.5, pieces), rel=1e-12)
