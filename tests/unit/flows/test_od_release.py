"""Releasing O/D trips down the tree (the TopDown walk of Boninsegna & Silvestri, PoPETs 2025,
Algorithms 1 and 3): consistency and non-negativity on synthetic trees, reproducibility, the root,
noise on every public child (zeros included), and a replay of Algorithm 1 from the recorded
noise with our own aggregation as the oracle."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from od_testing import (
    NoDraw,
    Recorder,
    Scripted,
    check_tree_release,
    level_matrix,
    make_states,
    n_children,
    random_trips,
    replay,
    tree_h,
    truth_matrix,
    truths_of,
)

from dpcore import catalog
from dpcore.data.hierarchy import Hierarchy
from dpcore.data.synthetic import demo_od, synthetic_od_tree
from dpcore.estimate import topdown_opt
from dpcore.flows.counts import ODCounts
from dpcore.flows.diagnostics import empirical_errors
from dpcore.flows.tree import tree_levels
from dpcore.privacy import budget
from dpcore.privacy.noise import NoiseSource


@pytest.fixture(scope="module")
def states() -> Hierarchy:
    """3 states with 2, 3 and 1 counties (prefix codes)."""
    return make_states()


@pytest.fixture(scope="module")
def random_tree_data() -> dict[int, tuple[Hierarchy, pd.DataFrame]]:
    out = {}
    for seed in (1, 2, 3):
        areas, flows = synthetic_od_tree("random", "dense" if seed != 2 else "sparse", seed=seed, levels=2)
        h = Hierarchy.from_frame(areas, list(areas.columns))
        out[seed] = (h, flows)
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("orientation", ["destination", "origin"])
@pytest.mark.parametrize("mechanism", ["inftda", "tda_l2"])
@pytest.mark.parametrize("neighbour", ["replace", "add_remove"])
@pytest.mark.parametrize("cost", [budget.zcdp(0.05), budget.pure(0.5)], ids=["rho", "pure"])
def test_release_invariants_on_synthetic_trees(random_tree_data, seed, orientation, mechanism, neighbour, cost):
    h, flows = random_tree_data[seed]
    c = ODCounts.from_frame(flows, h, origin="origin", destination="destination", count="count")
    n = int(flows["count"].sum())
    assert c.total == n
    rel = catalog.get("od", mechanism).release_counts(
        c, cost, NoiseSource(seed), neighbour=neighbour, orientation=orientation)
    bounded = neighbour == "replace"
    check_tree_release(rel, n if bounded else None)
    assert rel.public_total == (n if bounded else None)
    assert rel.plan.mechanism == mechanism and rel.plan.orientation == orientation
    if not bounded:
        # noised: the total is a measured level with noise (a draw of 0 is not rare at these scales:
        # P(Z = 0) = tanh(1/(2t)), about 5 % at t = 10, so the value alone cannot show it)
        assert rel.values[0].size == 1 and rel.plan.levels[0].measured and rel.plan.scales[0] > 0


@pytest.mark.parametrize("orientation", ["destination", "origin"])
def test_release_invariants_with_different_origin_and_destination_hierarchies(orientation: str) -> None:
    rng = np.random.default_rng(11)
    ho = tree_h([3, [1, 4, 2], [2, 1, 3, 1, 2, 2, 1]], "O")
    hd = tree_h([2, [3, 1], [1, 2, 2, 3]], "D")
    df = random_trips(rng, ho, hd, 400)
    c = ODCounts.from_frame(df, ho, hd, origin="o", destination="d")
    for mech in ("inftda", "tda_l2"):
        for s in range(4):
            rel = catalog.get("od", mech).release_counts(
                c, budget.zcdp(0.5), NoiseSource(s), orientation=orientation,
                tiebreak="index" if s % 2 else "random", order="descending" if s == 3 else "ascending")
            check_tree_release(rel, 400)
    # with ample budget the release is close to the truth at every level
    rel = catalog.get("od", "inftda").release_counts(
        c, budget.zcdp(5000), NoiseSource(0), orientation=orientation)
    for t, lp in enumerate(rel.plan.levels):
        truth = truth_matrix(df, ho, hd, lp.origin_depth, lp.destination_depth)
        assert np.abs(level_matrix(rel, t) - truth).max() <= 1  # σ ≈ 0.03: P(any noise ≠ 0) is tiny


def test_release_is_reproducible_and_frames_are_labelled(states: Hierarchy) -> None:
    df = pd.DataFrame({"o": ["0101", "0203", "0203", "0301"], "d": ["0202", "0101", "0101", "0301"]})
    c = ODCounts.from_frame(df, states, origin="o", destination="d")
    a = catalog.get("od", "inftda").release_counts(c, budget.zcdp(0.3), NoiseSource(9))
    b = catalog.get("od", "inftda").release_counts(c, budget.zcdp(0.3), NoiseSource(9))
    for t in range(a.depth + 1):
        assert np.array_equal(a.values[t], b.values[t]) and np.array_equal(a.origins[t], b.origins[t])
        assert np.array_equal(a.destinations[t], b.destinations[t])
    f = a.frame(4)
    assert list(f.columns) == ["origin", "destination", "noisy_count"]
    assert set(f["origin"]) <= set(states.labels(2)) and set(f["destination"]) <= set(states.labels(2))
    assert int(f["noisy_count"].sum()) == 4
    g = a.to_frame()
    assert list(g.columns) == ["level", "origin", "destination", "noisy_count"]
    assert set(g["level"]) <= {"total>state", "state", "state>county", "county"}
    assert g.groupby("level")["noisy_count"].sum().to_dict() == {k: 4 for k in set(g["level"])}
    f1 = a.frame(1)
    assert set(f1["origin"]) == {"total"} and set(f1["destination"]) <= {"01", "02", "03"}
    assert a.matrix(2).sum() == 4 and a.total(0) == 4 and a.total(4) == 4
    progress = []
    catalog.get("od", "inftda").release_counts(
        c, budget.zcdp(0.3), NoiseSource(1), progress=lambda f, msg: progress.append(f))
    assert progress[-1] == 1.0 and all(x <= y for x, y in itertools.pairwise(progress))


def test_unbounded_root_is_noised_and_clamped_at_zero(states: Hierarchy) -> None:
    """Spec §2.3, pitfall 9: ñ = max(n + Z, 0).  With tiny ρ the noise dwarfs n = 3: some
    seeds give ñ = 0 (then nothing is released below, without error), others ñ ≠ n."""
    df = pd.DataFrame({"o": ["0101", "0202", "0301"], "d": ["0102", "0101", "0301"]})
    c = ODCounts.from_frame(df, states, origin="o", destination="d")
    roots = []
    for seed in range(16):
        rel = catalog.get("od", "inftda").release_counts(
            c, budget.zcdp(1e-6), NoiseSource(seed), neighbour="add_remove")
        assert rel.public_total is None and rel.consistent
        check_tree_release(rel)
        root = rel.values[0].tolist()
        roots.append(root[0] if root else 0)
        if not root:
            assert all(v.size == 0 for v in rel.values)
    assert min(roots) == 0  # P(Z ≤ −3) ≈ 1/2 per seed
    assert any(r > 3 for r in roots)  # and the noise is not one-sided


def test_root_released_as_zero_returns_empty_levels(states: Hierarchy) -> None:
    """c = 0 at the root (pitfall 8): no division by zero, no further draws, empty levels."""
    df = pd.DataFrame({"o": ["0101"] * 5, "d": ["0102"] * 5})
    c = ODCounts.from_frame(df, states, origin="o", destination="d")

    class RootToZero(Recorder):
        def discrete_gaussian(self, sigma, size):  # type: ignore[override]
            self.calls.append(("discrete_gaussian", sigma, int(size)))
            return np.full(int(size), -1000, dtype=np.int64)

    src = RootToZero(0)
    rel = catalog.get("od", "inftda").release_counts(c, budget.zcdp(0.1), src, neighbour="add_remove")
    assert [n for _, _, n in src.calls] == [1]
    assert all(v.size == 0 and v.dtype == np.int64 for v in rel.values) and rel.consistent
    assert rel.details["noised_cells"] == 0
    assert len(rel.to_frame()) == 0 and rel.matrix(4).sum() == 0
    # bounded data with no trips at all: the public total 0 releases nothing either
    zero = ODCounts.from_frame(pd.DataFrame({"o": ["0101"], "d": ["0102"], "n": [0]}), states,
                                  origin="o", destination="d", count="n")
    assert zero.total == 0 and zero.n_pairs == 0
    rel = catalog.get("od", "tda_l2").release_counts(zero, budget.zcdp(0.1), NoDraw(0))
    assert all(v.size == 0 for v in rel.values) and rel.public_total == 0


def test_zero_cells_are_noised_and_noised_cells_follow_public_children() -> None:
    h = tree_h([3, 3])
    leaf = h.labels(2)
    df = pd.DataFrame({"o": [leaf[0]] * 1000, "d": [leaf[4]] * 1000})
    c = ODCounts.from_frame(df, h, origin="o", destination="d")
    false_pos = 0
    for orient in ("destination", "origin"):
        for seed in range(6):
            src = Recorder(seed)
            rel = catalog.get("od", "inftda").release_counts(
                c, budget.zcdp(0.002), src, orientation=orient)  # σ ≈ 45
            check_tree_release(rel, 1000)
            lv = tree_levels(2, orient)
            expected = []
            for t in range(1, rel.depth + 1):
                (po, pd_), (o, _d) = lv[t - 1], lv[t]
                if o > po:
                    expected.append(int(n_children(h, po)[rel.origins[t - 1]].sum()))
                else:
                    expected.append(int(n_children(h, pd_)[rel.destinations[t - 1]].sum()))
            assert [n for _, _, n in src.calls] == expected
            assert rel.details["noised_cells"] == sum(expected)
            for t, lp in enumerate(rel.plan.levels):
                truth = truth_matrix(df, h, h, lp.origin_depth, lp.destination_depth)
                false_pos += int(((level_matrix(rel, t) > 0) & (truth == 0)).sum())
    # only one pair has trips: a positive release anywhere else proves zero cells were noised
    assert false_pos > 0


@pytest.mark.parametrize("mechanism", ["inftda", "tda_l2"])
@pytest.mark.parametrize("orientation", ["destination", "origin"])
def test_noise_reaches_every_public_child(mechanism: str, orientation: str) -> None:
    """Scripted noise that keeps each noisy vector feasible (non-negative, summing to the parent),
    so both projections return it unchanged: the released levels 1 and 2 are then exactly
    truth + noise, zero-count children included.  (The noise of one parent's children is read
    in the public child order, the parents in the order of their released pairs.)  All 100 trips
    go from county A0.0 to county A2.1 of a 3 × 3 hierarchy."""
    h = tree_h([3, 3])
    df = pd.DataFrame({"o": ["A0.0"] * 100, "d": ["A2.1"] * 100})
    c = ODCounts.from_frame(df, h, origin="o", destination="d")
    # level 1: the 3 states (destinations, or origins in the origin tree), truth (0, 0, 100) or (100, 0, 0)
    truth1 = np.array([0, 0, 100]) if orientation == "destination" else np.array([100, 0, 0])
    noise1 = np.array([7, 4, -11]) if orientation == "destination" else np.array([-11, 7, 4])
    lvl1 = truth1 + noise1
    # level 2 (state × state): children of every level-1 pair, in state order; each segment sums to its parent
    noise2 = {0: [2, 5, 0], 1: [0, 1, 3], 2: [-20, 6, 3]} if orientation == "destination" else \
        {0: [3, 6, -20], 1: [2, 5, 0], 2: [0, 1, 3]}
    src = Scripted([noise1.tolist(), sum((noise2[k] for k in range(3)), [])])
    rel = catalog.get("od", mechanism).release_counts(
        c, budget.zcdp(0.1), src, orientation=orientation, tiebreak="index")
    check_tree_release(rel, 100)
    assert src.sizes[:2] == [3, 9]
    m1 = level_matrix(rel, 1).ravel()
    assert m1.tolist() == lvl1.tolist()
    t2 = truth_matrix(df, h, h, 1, 1)
    expect2 = t2.copy()
    for k in range(3):  # k: the level-1 area; its children are the states on the other side
        if orientation == "destination":
            expect2[:, k] += np.array(noise2[k])
        else:
            expect2[k, :] += np.array(noise2[k])
    assert (expect2 >= 0).all() and np.array_equal(level_matrix(rel, 2), expect2)
    assert (level_matrix(rel, 2)[t2 == 0] > 0).sum() >= 6  # zero cells carry their noise


@pytest.mark.parametrize("mechanism", ["inftda", "tda_l2", "tda_linf_milp"])
@pytest.mark.parametrize("orientation", ["destination", "origin"])
def test_release_replays_algorithm_1(mechanism: str, orientation: str) -> None:
    """Every node of the release is the projection of (truth + its recorded noise) over the
    public children of a surviving parent: IntOpt exactly (index ties, both orders), the exact L2
    rounding exactly, the MILP baseline at the optimal L∞ distance α*.  Different origin and
    destination hierarchies, a copy level, unbounded (noised total) and bounded."""
    rng = np.random.default_rng(21)
    ho = tree_h([3, [1, 4, 2], [2, 1, 3, 1, 2, 2, 1]], "O")
    hd = tree_h([2, [3, 1], [1, 2, 2, 3]], "D")
    df = random_trips(rng, ho, hd, 300)
    c = ODCounts.from_frame(df, ho, hd, origin="o", destination="d")
    n_segments = 0
    for neighbour, order, cost in (("replace", "ascending", budget.zcdp(0.2)),
                                   ("add_remove", "descending", budget.pure(1.0))):
        src = Recorder(17)
        rel = catalog.get("od", mechanism).release_counts(
            c, cost, src, neighbour=neighbour, orientation=orientation, order=order,
            tiebreak="index")
        check_tree_release(rel, 300 if neighbour == "replace" else None)
        truth = truths_of(c, rel)
        assert np.array_equal(truth[rel.depth], truth_matrix(df, ho, hd, 3, 3))
        for _t, x, cc, y in replay(rel, truth, src.outputs):
            n_segments += 1
            assert int(y.sum()) == cc and (y >= 0).all()
            if mechanism == "inftda":
                assert y.tolist() == topdown_opt.intopt(x, cc, order=order).tolist(), (x, cc)
            elif mechanism == "tda_l2":
                assert y.tolist() == topdown_opt.l2_round(x, cc).tolist(), (x, cc)
            else:
                assert int(np.abs(y - x).max()) == topdown_opt.linf_alpha(x, cc), (x, cc, y)
        assert sum(int(np.asarray(z).size) for z in src.outputs) == rel.details["noised_cells"] + (
            1 if rel.plan.levels[0].measured else 0)
    assert n_segments > 20


def test_demo_trips_release_consistent_levels() -> None:
    areas, flows, _ = demo_od(trips=5000)
    h = Hierarchy.from_frame(areas, ["region", "district", "zone"])
    c = ODCounts.from_frame(flows, h, origin="origin", destination="destination", count="count")
    assert c.total == 5000
    rel = catalog.get("od", "inftda").release_counts(c, budget.zcdp(0.5), NoiseSource(0))
    check_tree_release(rel, 5000)
    rows = empirical_errors(rel, c)
    assert rows[0]["max_abs_error"] == 0 and all(r["max_abs_error"] >= 0 for r in rows)
