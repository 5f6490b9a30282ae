"""Unit tests of dpcore.points.release: density, answers, tables and the LevelPlan error formulas.

Releases are built by hand so that every expected number can be written down.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcore.data.domain import Bounds, Grid
from dpcore.points import release as release_mod
from dpcore.points.release import DEFAULT_QUERY_SIZES, LevelPlan, PartitionRelease, area_block_sums
from dpcore.privacy.budget import pure


def level_plan(**kw) -> LevelPlan:
    base = dict(
        level=0, name="test level", cost=pure(1.0), noise="discrete_laplace", scale=2.0,
        sensitivity=1, n_counts=4, sd=3.0, ci95=6.0, cells_per_count=6.0, in_partition=True,
    )
    base.update(kw)
    return LevelPlan(**base)


def make_release(grid: Grid, rects, noisy, leaf=None, level=None, levels=None) -> PartitionRelease:
    rects = np.asarray(rects, dtype=np.int64)
    k = len(rects)
    return PartitionRelease(
        mechanism="hand",
        mechanism_title="Hand-made release",
        params={},
        grid=grid,
        cost=pure(1.0),
        levels=levels if levels is not None else (level_plan(n_counts=k, cells_per_count=grid.n_cells / k),),
        rects=rects,
        level=np.zeros(k, dtype=np.int64) if level is None else np.asarray(level, dtype=np.int64),
        leaf=np.ones(k, dtype=bool) if leaf is None else np.asarray(leaf, dtype=bool),
        noisy=np.asarray(noisy, dtype=np.float64),
        sd=np.full(k, 1.5),
        ci95=np.full(k, 3.0),
        sensitivity=1,
        user_cap=None,
    )


def brute_density(grid: Grid, rel: PartitionRelease) -> np.ndarray:
    d = np.zeros(grid.shape)
    for (r0, r1, c0, c1), v, is_leaf in zip(rel.rects.tolist(), rel.noisy, rel.leaf, strict=True):
        if is_leaf:
            d[r0:r1, c0:c1] += v / ((r1 - r0) * (c1 - c0))
    return d


def all_rects(rows: int, cols: int) -> np.ndarray:
    return np.array(
        [
            [r0, r1, c0, c1]
            for r0 in range(rows)
            for r1 in range(r0 + 1, rows + 1)
            for c0 in range(cols)
            for c1 in range(c0 + 1, cols + 1)
        ],
        dtype=np.int64,
    )


G46 = Grid(Bounds(0.0, 0.0, 6.0, 4.0), 4, 6)

# four leaves tiling the 4 x 6 grid, and a non-leaf parent over everything
RECTS = [
    [0, 2, 0, 3],  # 6 cells, 12 -> 2 per cell
    [2, 4, 0, 3],  # 6 cells,  3 -> 0.5 per cell
    [0, 4, 3, 4],  # 4 cells, -4 -> -1 per cell
    [0, 4, 4, 6],  # 8 cells,  8 -> 1 per cell
    [0, 4, 0, 6],  # parent, not a leaf: must be ignored
]
NOISY = [12.0, 3.0, -4.0, 8.0, 1000.0]
LEAF = [True, True, True, True, False]


class TestDensity:
    def test_hand_example(self) -> None:
        rel = make_release(G46, RECTS, NOISY, LEAF, level=[1, 1, 1, 1, 0])
        expected = np.array(
            [
                [2, 2, 2, -1, 1, 1],
                [2, 2, 2, -1, 1, 1],
                [0.5, 0.5, 0.5, -1, 1, 1],
                [0.5, 0.5, 0.5, -1, 1, 1],
            ]
        )
        np.testing.assert_allclose(rel.density(), expected, atol=1e-12)
        # the density keeps the leaves' total (12 + 3 - 4 + 8)
        assert rel.density().sum() == pytest.approx(19.0)

    def test_random_partitions_vs_brute_force(self) -> None:
        rng = np.random.default_rng(0)
        g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 9, 13)
        for _ in range(20):
            # random guillotine partition: split rows, then each row band by columns
            r_edges = np.unique(np.r_[0, rng.integers(1, 9, 3), 9])
            rects = []
            for r0, r1 in zip(r_edges[:-1], r_edges[1:], strict=True):
                c_edges = np.unique(np.r_[0, rng.integers(1, 13, 4), 13])
                rects += [[r0, r1, c0, c1] for c0, c1 in zip(c_edges[:-1], c_edges[1:], strict=True)]
            noisy = rng.integers(-20, 100, len(rects)).astype(float)
            rel = make_release(g, rects, noisy)
            np.testing.assert_allclose(rel.density(), brute_density(g, rel), atol=1e-9)

    def test_single_cell_leaves_in_any_order(self) -> None:
        g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 3, 5)
        rng = np.random.default_rng(1)
        cells = [[r, r + 1, c, c + 1] for r in range(3) for c in range(5)]
        order = rng.permutation(len(cells))
        rects = [cells[i] for i in order]
        noisy = rng.integers(-5, 50, 15).astype(float)
        rel = make_release(g, rects, noisy)
        expected = np.zeros((3, 5))
        for (r0, _, c0, _), v in zip(rects, noisy, strict=True):
            expected[r0, c0] = v
        np.testing.assert_array_equal(rel.density(), expected)

    def test_single_cell_leaves_with_a_parent(self) -> None:
        # 4 single-cell leaves on a 2 x 2 grid plus their (non-leaf) parent
        g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 2, 2)
        rects = [[0, 2, 0, 2], [0, 1, 0, 1], [0, 1, 1, 2], [1, 2, 0, 1], [1, 2, 1, 2]]
        rel = make_release(g, rects, [99, 1, 2, 3, 4], leaf=[False, True, True, True, True])
        np.testing.assert_array_equal(rel.density(), [[1, 2], [3, 4]])

    def test_whole_grid_leaf(self) -> None:
        g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 3, 4)
        rel = make_release(g, [[0, 3, 0, 4]], [24.0])
        np.testing.assert_allclose(rel.density(), np.full((3, 4), 2.0))


class TestAnswer:
    def test_all_rectangles_hand_example(self) -> None:
        rel = make_release(G46, RECTS, NOISY, LEAF)
        d = brute_density(G46, rel)
        qs = all_rects(4, 6)
        expected = np.array([d[r0:r1, c0:c1].sum() for r0, r1, c0, c1 in qs.tolist()])
        got = rel.answer(qs)
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, expected, atol=1e-9)

    def test_leaf_rectangles_answer_their_own_count(self) -> None:
        rel = make_release(G46, RECTS, NOISY, LEAF)
        np.testing.assert_allclose(rel.answer(np.array(RECTS[:4])), NOISY[:4], atol=1e-9)
        # the whole grid: the sum of the leaves, not the parent's 1000
        assert rel.answer(np.array([[0, 4, 0, 6]]))[0] == pytest.approx(19.0)

    def test_random_partition_answers(self) -> None:
        rng = np.random.default_rng(2)
        g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 6, 7)
        rects = [[0, 3, 0, 7], [3, 6, 0, 2], [3, 6, 2, 7]]
        rel = make_release(g, rects, rng.integers(0, 90, 3).astype(float))
        d = brute_density(g, rel)
        qs = all_rects(6, 7)
        expected = [d[a:b, c:e].sum() for a, b, c, e in qs.tolist()]
        np.testing.assert_allclose(rel.answer(qs), expected, atol=1e-9)


def guillotine(rng: np.random.Generator, rows: int, cols: int, splits: int) -> np.ndarray:
    """A random partition of a rows x cols grid into rectangles, by random cuts of random pieces."""
    rects = [(0, rows, 0, cols)]
    for _ in range(splits):
        i = int(rng.integers(len(rects)))
        r0, r1, c0, c1 = rects[i]
        if r1 - r0 >= 2 and (c1 - c0 < 2 or rng.random() < 0.5):
            m = int(rng.integers(r0 + 1, r1))
            rects[i:i + 1] = [(r0, m, c0, c1), (m, r1, c0, c1)]
        elif c1 - c0 >= 2:
            m = int(rng.integers(c0 + 1, c1))
            rects[i:i + 1] = [(r0, r1, c0, m), (r0, r1, m, c1)]
    return np.array(rects, dtype=np.int64)


class TestFromTheAreas:
    """Block sums and query answers computed from the areas' overlaps (never the grid's cells) equal
    the sums over the brute-force per-cell density, for any partition and any blocks."""

    @pytest.mark.parametrize("rows, cols", [(37, 53), (64, 64), (100, 7)])
    def test_block_sums_of_random_partitions(self, rows: int, cols: int) -> None:
        rng = np.random.default_rng(rows * cols)
        g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), rows, cols)
        rects = guillotine(rng, rows, cols, 60)
        rel = make_release(g, rects, rng.normal(50, 30, len(rects)))
        d = brute_density(g, rel)
        for m_rows, m_cols in [(1, 1), (3, 5), (rows, cols), (7, 2)]:
            re = np.round(np.linspace(0, rows, m_rows + 1)).astype(np.int64)
            ce = np.round(np.linspace(0, cols, m_cols + 1)).astype(np.int64)
            expected = np.add.reduceat(np.add.reduceat(d, re[:-1], axis=0), ce[:-1], axis=1)
            np.testing.assert_allclose(area_block_sums(rel.rects, rel.noisy, re, ce), expected, atol=1e-9)

    @pytest.mark.parametrize("per_cell", [0, 10**9])
    def test_answers_from_the_areas_and_from_the_cells_agree(self, per_cell: int, monkeypatch) -> None:
        """per_cell 0: always the prefix sums of the density; 10**9: always the areas' overlaps."""
        monkeypatch.setattr(release_mod, "FEW_OVERLAPS_PER_CELL", per_cell)
        rng = np.random.default_rng(4)
        g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 11, 9)
        rects = guillotine(rng, 11, 9, 25)
        rel = make_release(g, rects, rng.integers(-20, 100, len(rects)).astype(float))
        d = brute_density(g, rel)
        qs = all_rects(11, 9)
        expected = [d[a:b, c:e].sum() for a, b, c, e in qs.tolist()]
        got = rel.answer(qs)
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, expected, atol=1e-9)


class TestTable:
    def test_leaf_table(self) -> None:
        rel = make_release(G46, RECTS, NOISY, LEAF)
        t = rel.leaf_table()
        assert t["id"].tolist() == [0, 1, 2, 3]
        assert t["cells"].tolist() == [6, 6, 4, 8]
        # 1 degree per cell: lon = column, lat = row
        assert t["west"].tolist() == [0, 0, 3, 4]
        assert t["east"].tolist() == [3, 3, 4, 6]
        assert t["south"].tolist() == [0, 2, 0, 0]
        assert t["north"].tolist() == [2, 4, 4, 4]
        np.testing.assert_array_equal(t["ci95_low"], np.array(NOISY[:4]) - 3.0)
        np.testing.assert_array_equal(t["ci95_high"], np.array(NOISY[:4]) + 3.0)
        assert rel.table()["id"].tolist() == [0, 1, 2, 3, 4]
        assert rel.n_rects == 5
        assert rel.leaf_index().tolist() == [0, 1, 2, 3]

    def test_release_ids_differ(self) -> None:
        a = make_release(G46, RECTS, NOISY, LEAF)
        b = make_release(G46, RECTS, NOISY, LEAF)
        assert a.release_id != b.release_id
        assert len(a.release_id) == 12 and int(a.release_id, 16) >= 0


class TestLevelPlan:
    @pytest.mark.parametrize(
        "fraction,n_cells,cells_per_count,expected",
        [
            # covered = fraction * n_cells / cells_per_count
            (0.5, 100, 4.0, 3.0 * math.sqrt(12.5)),  # 12.5 counts: sqrt(12.5) * sd
            (0.04, 100, 4.0, 3.0),  # exactly one count
            (0.02, 100, 4.0, 1.5),  # half a count: share 0.5 of sd
            (0.1, 1_000_000, 1.0, 3.0 * math.sqrt(100_000)),
            (1.0, 64, 64.0, 3.0),
        ],
    )
    def test_query_sd(self, fraction: float, n_cells: int, cells_per_count: float, expected: float) -> None:
        lv = level_plan(sd=3.0, cells_per_count=cells_per_count)
        assert lv.query_sd(fraction, n_cells) == pytest.approx(expected, rel=1e-12)

    def test_query_sd_not_in_partition(self) -> None:
        assert math.isnan(level_plan(in_partition=False).query_sd(0.1, 100))

    def test_to_dict(self) -> None:
        lv = level_plan(scale=2.0, sd=3.0, ci95=6.0, cells_per_count=4.0, note="a note")
        d = lv.to_dict(100, (0.04, 0.5))
        assert d["noise"] == {"distribution": "discrete_laplace", "scale": 2.0, "sensitivity": 1}
        assert d["privacy"]["value"] == 1.0
        assert d["expected_error"]["sd_per_count"] == 3.0
        assert d["expected_error"]["ci95_half_width_per_count"] == 6.0
        assert d["expected_error"]["range_query_sd"] == {
            "0.04": pytest.approx(3.0),
            "0.5": pytest.approx(3.0 * math.sqrt(12.5)),
        }
        assert d["note"] == "a note"
        # E|X| of the discrete Laplace with scale 2, by summing the pmf
        q = math.exp(-1 / 2.0)
        k = np.arange(-400, 401)
        e_abs = float(np.sum(np.abs(k) * (1 - q) / (1 + q) * q ** np.abs(k)))
        assert d["expected_error"]["mean_abs_error_per_count"] == pytest.approx(e_abs, rel=1e-9)

    def test_to_dict_non_partition_has_no_query_sd(self) -> None:
        d = level_plan(in_partition=False).to_dict(100)
        assert d["expected_error"]["range_query_sd"] == {}
        assert "note" not in d

    def test_default_query_sizes(self) -> None:
        d = level_plan().to_dict(100)
        assert set(d["expected_error"]["range_query_sd"]) == {f"{s:g}" for s in DEFAULT_QUERY_SIZES}

    def test_release_expected_query_sd_single_leaf_level(self) -> None:
        lv = level_plan(sd=2.0, n_counts=4, cells_per_count=6.0)
        rel = make_release(G46, RECTS[:4], NOISY[:4], levels=(lv,))
        for s in (0.02, 0.25, 0.5, 1.0):
            assert rel.expected_query_sd(s) == pytest.approx(lv.query_sd(s, 24), rel=1e-12)

    def test_release_expected_query_sd_without_leaf_level(self) -> None:
        rel = make_release(G46, RECTS[:4], NOISY[:4], levels=(level_plan(in_partition=False),))
        assert math.isnan(rel.expected_query_sd(0.1))
