"""Unit tests of dpcore.data.queries (range-query workloads) and dpcore.core.metrics (error measures)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcore.core import metrics
from dpcore.data.domain import Bounds, Grid
from dpcore.data.queries import random_rectangles, true_answers
from dpcore.errors import ParameterError

GRID = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 64, 200)  # not square, to catch rows/cols mix-ups
SIZES = (0.02, 0.06, 0.10)


class TestRandomRectangles:
    @pytest.mark.parametrize("shape", ["square", "random"])
    def test_inside_the_grid_and_tagged(self, shape: str) -> None:
        qs, tags = random_rectangles(GRID, SIZES, 300, shape=shape, seed=1)
        assert qs.shape == (900, 4) and qs.dtype == np.int64
        r0, r1, c0, c1 = qs.T
        assert (r0 >= 0).all() and (r1 <= GRID.rows).all() and (r0 < r1).all()
        assert (c0 >= 0).all() and (c1 <= GRID.cols).all() and (c0 < c1).all()
        assert tags.tolist() == [0.02] * 300 + [0.06] * 300 + [0.10] * 300

    def test_square_sizes_within_rounding(self) -> None:
        qs, tags = random_rectangles(GRID, SIZES, 100, shape="square", seed=2)
        h = qs[:, 1] - qs[:, 0]
        w = qs[:, 3] - qs[:, 2]
        for s in SIZES:
            m = tags == s
            # h = round(sqrt(s) * rows), w = round(sqrt(s) * cols): within half a cell each
            assert np.all(np.abs(h[m] - math.sqrt(s) * GRID.rows) <= 0.5)
            assert np.all(np.abs(w[m] - math.sqrt(s) * GRID.cols) <= 0.5)
            x, y = math.sqrt(s) * GRID.rows, math.sqrt(s) * GRID.cols
            bound = (0.5 * (x + y) + 0.25) / GRID.n_cells
            assert np.all(np.abs(h[m] * w[m] / GRID.n_cells - s) <= bound)

    def test_random_shape_area_and_aspect(self) -> None:
        qs, tags = random_rectangles(GRID, SIZES, 500, shape="random", seed=3)
        h = (qs[:, 1] - qs[:, 0]).astype(float)
        w = (qs[:, 3] - qs[:, 2]).astype(float)
        R, C = GRID.rows, GRID.cols
        # h = round(x), w = round(y) with x * y = s * R * C, so |h w - s R C| <= (x + y)/2 + 1/4
        # and x <= h + 1/2, y <= w + 1/2
        bound = 0.5 * (h + w + 1) + 0.25
        assert np.all(np.abs(h * w - tags * R * C) <= bound)
        # aspect a = (x / R) / (y / C) lies in [1/4, 4]
        a_min = ((h - 0.5) / R) / ((w + 0.5) / C)
        a_max = ((h + 0.5) / R) / ((w - 0.5) / C)
        assert np.all(a_max >= 0.25) and np.all(a_min <= 4.0)
        # and the aspects really vary
        assert (h / R / (w / C)).std() > 0.3

    def test_positions_cover_the_grid(self) -> None:
        qs, _ = random_rectangles(GRID, (0.02,), 3000, shape="square", seed=4)
        h = qs[0, 1] - qs[0, 0]
        w = qs[0, 3] - qs[0, 2]
        # every possible row offset 0..rows-h is reachable; with 3000 draws over
        # 56 offsets each is missed with probability (1 - 1/56)^3000 < 1e-23
        assert set(qs[:, 0].tolist()) == set(range(GRID.rows - h + 1))
        assert qs[:, 2].min() == 0 and qs[:, 2].max() == GRID.cols - w

    def test_seeded_reproducible(self) -> None:
        a, ta = random_rectangles(GRID, SIZES, 50, shape="random", seed=7)
        b, tb = random_rectangles(GRID, SIZES, 50, shape="random", seed=7)
        c, _ = random_rectangles(GRID, SIZES, 50, shape="random", seed=8)
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(ta, tb)
        assert not np.array_equal(a, c)

    def test_whole_domain(self) -> None:
        qs, _ = random_rectangles(GRID, (1.0,), 5, shape="square", seed=0)
        assert qs.tolist() == [[0, 64, 0, 200]] * 5

    def test_tiny_size_on_small_grid_is_one_cell(self) -> None:
        g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 3, 3)
        qs, _ = random_rectangles(g, (0.001,), 20, shape="random", seed=0)
        assert np.all(qs[:, 1] - qs[:, 0] == 1) and np.all(qs[:, 3] - qs[:, 2] == 1)

    @pytest.mark.parametrize("sizes", [(0.0,), (-0.1,), (1.5,)])
    def test_bad_size(self, sizes: tuple[float, ...]) -> None:
        with pytest.raises(ParameterError, match="fraction"):
            random_rectangles(GRID, sizes, 10)

    def test_bad_shape(self) -> None:
        with pytest.raises(ParameterError, match="square"):
            random_rectangles(GRID, SIZES, 10, shape="circle")

    def test_true_answers_brute_force(self) -> None:
        rng = np.random.default_rng(9)
        counts = rng.integers(0, 50, GRID.shape)
        qs, _ = random_rectangles(GRID, SIZES, 40, shape="random", seed=9)
        expected = [counts[a:b, c:d].sum() for a, b, c, d in qs.tolist()]
        assert true_answers(counts, qs).tolist() == expected


class TestMetrics:
    TRUE = [0, 10, 100, 40]
    EST = [5, 12, 90, 40]

    def test_mre_default_smoothing(self) -> None:
        # |err| / max(c, 20): 5/20, 2/20, 10/100, 0/40 -> 25 %, 10 %, 10 %, 0 % -> mean 11.25 %
        assert metrics.DEFAULT_SMOOTHING == 20.0
        assert metrics.mre(self.TRUE, self.EST) == pytest.approx(11.25)
        np.testing.assert_allclose(metrics.relative_errors(self.TRUE, self.EST), [25, 10, 10, 0])

    def test_mre_custom_smoothing(self) -> None:
        # smoothing 1: 5/1, 2/10, 10/100, 0 -> 500 %, 20 %, 10 %, 0 % -> 132.5 %
        assert metrics.mre(self.TRUE, self.EST, smoothing=1) == pytest.approx(132.5)
        # smoothing 200 dominates every count: (5 + 2 + 10 + 0) / 200 / 4 * 100
        assert metrics.mre(self.TRUE, self.EST, smoothing=200) == pytest.approx(2.125)

    def test_mae_rmse_max(self) -> None:
        assert metrics.mae(self.TRUE, self.EST) == pytest.approx(17 / 4)
        assert metrics.rmse(self.TRUE, self.EST) == pytest.approx(math.sqrt((25 + 4 + 100) / 4))
        assert metrics.max_abs(self.TRUE, self.EST) == 10.0

    def test_signs_do_not_cancel(self) -> None:
        assert metrics.mae([0, 0], [3, -3]) == 3.0
        assert metrics.rmse([0, 0], [3, -3]) == 3.0
        assert metrics.max_abs([0, 0], [1, -4]) == 4.0
        assert metrics.mre([100, 100], [110, 90]) == pytest.approx(10.0)

    def test_perfect_estimate(self) -> None:
        t = np.arange(10)
        for f in (metrics.mre, metrics.mae, metrics.rmse, metrics.max_abs):
            assert f(t, t) == 0.0

    def test_summary(self) -> None:
        s = metrics.summary(self.TRUE, self.EST, 1)
        assert s == {
            "mre_percent": pytest.approx(132.5),
            "mae": pytest.approx(4.25),
            "rmse": pytest.approx(math.sqrt(32.25)),
            "max_abs_error": pytest.approx(10.0),
        }
        for v in s.values():
            assert isinstance(v, float)

    def test_arrays_2d(self) -> None:
        t = np.array([[1, 2], [3, 4]])
        e = np.array([[1, 0], [3, 8]])
        assert metrics.mae(t, e) == pytest.approx(6 / 4)
        assert metrics.max_abs(t, e) == 4.0
