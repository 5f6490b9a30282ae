"""``ag_pool_smooth`` (issue 27, item 3): ``ag_pool``'s release with a piecewise-linear prior
inside its leaves: the same counts, every leaf keeps its count, non-negative, whole-leaf answers
unchanged."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from points_helpers import levels_of, release_with

from dpcore import catalog
from dpcore.data.domain import Aggregate, Bounds, Grid, paint_rects
from dpcore.errors import ParameterError
from dpcore.points import export
from dpcore.points.mechanisms.ag_pool_smooth import PRIOR_NOTE
from dpcore.points.within_leaf import leaf_labels, piecewise_linear, within_leaf_density
from dpcore.privacy.noise import NoiseSource

SMOOTH = catalog.get("points", "ag_pool_smooth")
POOL = catalog.get("points", "ag_pool")


def _clustered(side: int = 64, seed: int = 3) -> Aggregate:
    """Three dense clusters and a thin background (seeded)."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(0.3, (side, side)).astype(np.int64)
    for r, c in ((10, 12), (40, 50), (50, 8)):
        rr = np.clip(rng.normal(r, 4, 3000).astype(int), 0, side - 1)
        cc = np.clip(rng.normal(c, 4, 3000).astype(int), 0, side - 1)
        np.add.at(counts, (rr, cc), 1)
    return Aggregate(Grid(Bounds(0.0, 0.0, 1.0, 1.0), side, side), counts, 0, 0, 1, None)


@pytest.fixture(scope="module")
def pair() -> tuple:
    agg = _clustered()
    return agg, release_with(SMOOTH, agg, 0.5, {}, NoiseSource(7)), release_with(POOL, agg, 0.5, {}, NoiseSource(7))


def test_same_release_as_ag_pool_with_the_prior_stated(pair: tuple) -> None:
    _, s, p = pair
    np.testing.assert_array_equal(s.rects, p.rects)
    np.testing.assert_array_equal(s.noisy, p.noisy)
    np.testing.assert_array_equal(s.sd, p.sd)
    assert s.within_leaf == "piecewise_linear" and p.within_leaf == "uniform"
    assert s.public["within_leaf"] == "piecewise_linear"
    np.testing.assert_array_equal(export.release_columns(s)["noisy_count"], export.release_columns(p)["noisy_count"])


def test_every_leaf_keeps_its_count_and_the_density_is_not_negative(pair: tuple) -> None:
    _, s, _ = pair
    d = s.density()
    leaves = s.leaf_index()
    lab = leaf_labels(s.rects[leaves], s.grid.shape)
    np.testing.assert_allclose(np.bincount(lab.ravel(), d.ravel(), minlength=len(leaves)), s.noisy[leaves],
                               rtol=1e-9, atol=1e-9)
    assert (s.noisy[leaves] >= 0).all() and (d >= 0).all()
    assert not np.allclose(d, s.spread(s.noisy, leaves))  # the prior changed the spread somewhere


def test_whole_leaf_queries_unchanged_cut_leaves_differ(pair: tuple) -> None:
    _, s, p = pair
    leaves = s.leaf_index()
    np.testing.assert_allclose(s.answer(s.rects[leaves]), p.answer(p.rects[leaves]), rtol=1e-9, atol=1e-9)
    cut = np.array([[1, 7, 3, 9], [33, 47, 40, 58]])
    assert not np.allclose(s.answer(cut), p.answer(cut))


def test_prior_follows_a_ramp_better_than_flat_leaves() -> None:
    """Counts rising linearly across 8 columns of 4 x 4 leaves: the prior's fine density is closer
    to the ramp than the leaves' even spread (no noise: the counts are the ramp's sums)."""
    side = 32
    truth = np.tile(np.arange(side, dtype=np.float64) + 0.5, (side, 1))
    rects = np.array([[r, r + 4, c, c + 4] for r in range(0, side, 4) for c in range(0, side, 4)])
    counts = np.array([truth[r0:r1, c0:c1].sum() for r0, r1, c0, c1 in rects])
    smooth = piecewise_linear(rects, counts, (side, side))
    flat = paint_rects(rects, counts / 16, (side, side))  # the leaves' even spread
    assert np.abs(smooth - truth).sum() < 0.5 * np.abs(flat - truth).sum()


def test_negative_or_empty_leaves_keep_their_even_spread() -> None:
    rects = np.array([[0, 2, 0, 2], [0, 2, 2, 4]])
    d = piecewise_linear(rects, np.array([-4.0, 8.0]), (2, 4))
    assert d[:, :2].tolist() == [[-1.0, -1.0], [-1.0, -1.0]]
    assert d[:, 2:].sum() == pytest.approx(8.0) and (d[:, 2:] >= 0).all()


def test_unknown_or_unfiltered_rule_is_refused() -> None:
    for rule in ("cubic", "uniform"):
        with pytest.raises(ParameterError, match="within-leaf rule"):
            within_leaf_density(rule, np.array([[0, 1, 0, 1]]), np.array([1.0]), (1, 1))


def test_the_smoothed_density_is_computed_once_per_release(pair: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole-grid filter runs once per release, not once per answer() / density() call, and a
    caller that writes into density()'s grid does not change later answers."""
    import dpcore.points.release as release_module

    agg, _, _ = pair
    s = release_with(SMOOTH, agg, 0.5, {}, NoiseSource(7))
    calls = []
    real = release_module.within_leaf_density
    monkeypatch.setattr(release_module, "within_leaf_density", lambda *a: calls.append(1) or real(*a))
    cut = np.array([[1, 7, 3, 9], [33, 47, 40, 58]])
    first = s.answer(cut)
    s.density()[:] = 0.0
    np.testing.assert_array_equal(s.answer(cut), first)
    assert len(calls) == 1


def test_a_release_refuses_an_unknown_within_leaf_rule(pair: tuple) -> None:
    _, smooth, _ = pair
    for rule in ("cubic", "Uniform", ""):
        with pytest.raises(ParameterError, match=r"within-leaf rule .*uniform, piecewise_linear"):
            dataclasses.replace(smooth, within_leaf=rule)
    assert dataclasses.replace(smooth, within_leaf="uniform").within_leaf == "uniform"


def test_leaf_rows_say_the_prior_is_not_in_their_expected_error(pair: tuple) -> None:
    """The plan's and the release's leaf rows carry AG's noise figures (the same as ``ag_pool``'s)
    and say that the within-leaf prior's error is not in them; the other rows are ``ag_pool``'s."""
    agg, s, p = pair
    for smooth, pool in ((levels_of(SMOOTH, agg.grid, 0.5, {}, n_estimate=9_000),
                          levels_of(POOL, agg.grid, 0.5, {}, n_estimate=9_000)), (s.levels, p.levels)):
        assert [lv.sd for lv in smooth] == [lv.sd for lv in pool]
        for a, b in zip(smooth, pool, strict=True):
            assert a.note == ((b.note + " " if b.note else "") + PRIOR_NOTE if b.in_partition else b.note)
        assert any(lv.in_partition for lv in smooth)
