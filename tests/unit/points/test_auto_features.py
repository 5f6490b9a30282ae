"""``auto`` from private features (issue 27, item 1): privacy of the features, the choice, the record."""

from __future__ import annotations

import numpy as np
import pytest
from points_helpers import clustered_aggregate, favour, levels_of, release_with, uniform_aggregate

from dpcore import catalog
from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.points import data_users
from dpcore.points import recommend_features as frule
from dpcore.points.mechanisms import auto as auto_module
from dpcore.points.mechanisms import features as feat
from dpcore.privacy import budget
from dpcore.privacy.noise import NoiseSource

GRID = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 64, 64)
AUTO = catalog.get("points", "auto")
#: the features at the share Pythia spends (auto's default from 2026-11-29 to 2026-11-30, now rule "features";
#: feature_share = 0 is the data-free auto)
FEATURES = {"feature_share": 0.05}


def _feature_levels(rel):
    return [lv for lv in rel.levels if "feature" in lv.name]


# -- privacy ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("eps", "share"), [(1.0, 0.05), (0.1, 0.2)])
def test_features_use_the_stated_share_and_the_total_is_epsilon(eps: float, share: float) -> None:
    params = {"feature_share": share}
    assert AUTO.cost(eps, AUTO.resolve_params(params)) == budget.pure(eps)
    rel = release_with(AUTO, uniform_aggregate(GRID, 20_000), eps, params, NoiseSource(11))
    fl = _feature_levels(rel)
    assert [lv.n_counts for lv in fl] == [1, 16 * 16]  # the count and the coarse histogram
    assert sum(lv.cost.value for lv in fl) == pytest.approx(share * eps)
    assert fl[0].cost.value == pytest.approx(fl[1].cost.value)
    assert sum(lv.cost.value for lv in rel.levels) == pytest.approx(eps)
    assert sum(lv.cost.value for lv in rel.levels) <= eps
    a = rel.public["auto"]
    assert a["feature_epsilon"] == pytest.approx(share * eps)
    assert a["epsilon_chosen"] == pytest.approx((1 - share) * eps)
    assert rel.cost == budget.pure(eps)


def test_the_feature_rule_buys_features_at_the_rules_training_share() -> None:
    """Issue 27: rule "features" spends, by default, the share its coefficients were fitted for; the
    features' count is the one published and passed on (no second count)."""
    assert AUTO.resolve_params({"rule": "features"})["feature_share"] == frule.FEATURE_SHARE == 0.05
    rel = release_with(AUTO, clustered_aggregate(GRID, 20_000), 1.0, {"rule": "features"}, NoiseSource(21))
    a = rel.public["auto"]
    assert a["n_source"] == "noisy features" and a["feature_epsilon"] == pytest.approx(0.05)
    assert [lv.n_counts for lv in _feature_levels(rel)] == [1, 16 * 16]
    assert rel.public["noisy_point_count"] == int(a["features"]["noisy_total"])


def test_features_noise_scale_is_k_over_epsilon() -> None:
    """A cap of k records per person: the count and the disjoint blocks have L1 sensitivity k."""
    agg = uniform_aggregate(GRID, 5_000)
    agg3 = Aggregate(agg.grid, agg.counts, 0, 0, 3, 3)
    rel = release_with(AUTO, agg3, 1.0, FEATURES, NoiseSource(2))
    for lv in _feature_levels(rel):
        assert lv.sensitivity == 3 and lv.scale == pytest.approx(3 / lv.cost.value)


def _fixed(total: float, sparsity: float, concentration: float, top_entropy: float) -> feat.ShapeFeatures:
    return feat.ShapeFeatures(total, concentration, sparsity, top_entropy, 16, 16, 0.05, 1)


#: a uniform-looking and a clustered-looking set of noisy features (what the coarse histogram shows)
SPREAD, CLUSTERED = (0.0, 0.1, 1.0), (0.95, 0.99, 0.2)


def test_choice_depends_only_on_the_noisy_features(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fix the noisy features: two very different data sets get the same choice, the rule's argmin
    for those features; the predictions follow the features when they change."""
    preds = []
    for shape in (SPREAD, CLUSTERED):
        fixed = _fixed(50_000.0, *shape)
        monkeypatch.setattr(auto_module, "private_features", lambda agg, e, noise, public_n=None, fixed=fixed: fixed)
        ra = release_with(AUTO, uniform_aggregate(GRID, 20_000), 1.0, FEATURES, NoiseSource(3))
        rb = release_with(AUTO, clustered_aggregate(GRID, 800, spread=0.01), 1.0, FEATURES, NoiseSource(4))
        p = AUTO.resolve_params(FEATURES)
        want = frule.choose(fixed, 1.0, p["query_sizes"], grid_shape=(64, 64),
                            allowed=AUTO.allowed_configs(GRID, budget.pure(1.0), p))
        assert ra.public["auto"]["config"] == rb.public["auto"]["config"] == want.config
        assert want.config == min(want.predictions, key=want.predictions.__getitem__)
        assert ra.public["auto"]["chosen"] == want.mechanism
        assert ra.public["auto"]["n_used"] == 50_000.0
        if want.mechanism in frule.TAKES_PUBLIC_N:
            assert ra.public["auto"]["chosen_params"]["public_n"] == 50_000
        else:
            assert "public_n" not in ra.public["auto"]["chosen_params"]
        preds.append(want.predictions)
    assert preds[0] != preds[1]


def test_public_n_gives_the_whole_feature_share_to_the_histogram(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a public n nothing is spent on a count: one histogram level with the whole share, and
    the public n stands in for the total."""
    seen = {}

    def spy(agg, e, noise, public_n=None):
        seen["args"] = (e, public_n)
        return feat.private_features(agg, e, noise, public_n=public_n)
    monkeypatch.setattr(auto_module, "private_features", spy)
    params = {"feature_share": 0.1, "public_n": 20_000}
    rel = release_with(AUTO, uniform_aggregate(GRID, 20_000), 1.0, params, NoiseSource(12))
    fl = _feature_levels(rel)
    assert [lv.n_counts for lv in fl] == [16 * 16]
    assert fl[0].cost.value == pytest.approx(0.1)
    assert sum(lv.cost.value for lv in rel.levels) == pytest.approx(1.0)
    assert seen["args"] == (pytest.approx(0.1), 20_000)
    a = rel.public["auto"]
    assert a["features"]["noisy_total"] == 20_000.0 and a["n_used"] == 20_000.0
    assert a["n_source"] == "public number of points"
    # no count was bought: none is published as one, the reason calls the n public, and the
    # data users' files still say the partition was chosen from noisy data (the histogram)
    assert "noisy_point_count" not in rel.public
    assert a["reason"].startswith("For 20,000 points (public)")
    assert data_users.data_users_section(rel)["conditional_on_partition"] is True
    levels = levels_of(AUTO, GRID, 1.0, params)
    assert [lv.name.split(" (")[0] for lv in levels if "feature" in lv.name] == ["Coarse 16 × 16 histogram"]


def test_private_features_with_a_public_n_spend_nothing_on_the_count() -> None:
    """The same noise stream: with a public n the histogram's noise has half the scale (ε_f, not
    ε_f/2), and no draw goes to a count."""
    agg = uniform_aggregate(GRID, 20_000)
    f = feat.private_features(agg, 0.2, NoiseSource(5), public_n=12_345)
    assert f.noisy_total == 12_345.0
    assert feat.feature_budgets(0.2, count=False) == (0.0, 0.2)


def test_candidates_a_grid_refuses_are_never_chosen() -> None:
    """The public checks run before the features are bought: DAWA refuses grids above 2048², so
    on 4096² it is not a candidate; PrivTree is."""
    big = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 4096, 4096)
    p = AUTO.resolve_params(FEATURES)
    allowed = AUTO.allowed_configs(big, budget.pure(1.0), p)
    assert "dawa" not in allowed and "privtree" in allowed
    assert "dawa" in AUTO.allowed_configs(GRID, budget.pure(1.0), p)
    only = frule.choose(_fixed(1e6, *CLUSTERED), 1.0, grid_shape=(4096, 4096), allowed=("privtree", "ug"))
    assert only.config in {"privtree", "ug"} and set(only.predictions) == {"privtree", "ug"}


def test_reliability_falls_with_the_noise() -> None:
    """r = √2·k/ε_h over the mean block count: 1,000 points in 256 blocks at ε_h = 0.0005 is all
    noise; a million points at ε_h = 0.025 all signal; a cap of k records is k times the noise."""
    assert frule.reliability(1_000, 0.001, 1, 256) < 1e-4
    assert frule.reliability(1_000_000, 0.05, 1, 256) > 0.99
    assert frule.reliability(50_000, 0.05, 3, 256) < frule.reliability(50_000, 0.05, 1, 256)


def test_feature_share_zero_is_the_data_free_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a, **k):
        raise AssertionError("features bought with a feature share of 0")
    monkeypatch.setattr(auto_module, "private_features", boom)
    rel = release_with(AUTO, uniform_aggregate(GRID, 5_000), 0.5, {"feature_share": 0, "public_n": 5_000}, NoiseSource(6))
    assert not _feature_levels(rel) and rel.public["auto"]["rule"].startswith("public inputs")
    assert "features" not in rel.public["auto"]


# -- record ----------------------------------------------------------------------------------------


def test_record_has_the_features_and_the_reason() -> None:
    rel = release_with(AUTO, clustered_aggregate(GRID, 20_000, spread=0.01), 1.0, FEATURES, NoiseSource(8))
    a = rel.public["auto"]
    assert a["rule"].startswith("private features") and a["n_source"] == "noisy features"
    assert set(a["features"]) >= {"noisy_total", "concentration", "sparsity", "top_entropy", "epsilon"}
    assert a["reason"].startswith(f"The noisy features read about {a['features']['noisy_total']:,.0f} points")
    assert frule.NAMES.get(a["chosen"], a["chosen"]) in a["reason"]
    assert a["config"] in frule.CONFIGS and frule.CONFIGS[a["config"]][0] == a["chosen"]
    assert a["prediction"]["predicted_regret"] == min(a["prediction"]["predicted_regrets"].values())
    assert rel.public["noisy_point_count"] == int(a["features"]["noisy_total"])


def test_plan_shows_the_feature_levels() -> None:
    levels = levels_of(AUTO, GRID, 1.0, FEATURES, n_estimate=30_000)
    assert [lv.name.split(" (")[0] for lv in levels[-2:]] == ["Number of points", "Coarse 16 × 16 histogram"]
    assert "noisy features" in levels[0].note
    assert sum(lv.cost.value for lv in levels) == pytest.approx(1.0)


# -- behaviour (seeded) ----------------------------------------------------------------------------


def test_features_from_exact_histograms() -> None:
    u = feat.features_from_noisy(25_600.0, np.full((16, 16), 100))
    assert u.concentration == pytest.approx(26 / 256) and u.sparsity == 0.0 and u.top_entropy == pytest.approx(1.0)
    h = np.zeros((16, 16))
    h[3, 4] = 1000
    c = feat.features_from_noisy(1000.0, h)
    assert c.concentration == 1.0 and c.sparsity == pytest.approx(255 / 256) and c.top_entropy == 0.0


def test_noisy_features_tell_clustered_from_uniform() -> None:
    """ε_f = 0.5 (ε 10, share 5 %): each block gets discrete Laplace of scale 1/0.25 = 4 (SD 5.7);
    20,000 uniform points put about 78 ± 9 in each of 256 blocks, so the top 26 blocks hold about
    0.12 of the mass (< 0.15 with room for noise), while the cluster (σ = 0.01) sits in one to four blocks
    (> 0.9 even after the 255 other blocks' clipped noise, about 255·2.3 ≈ 600 of 20,600)."""
    fu = feat.private_features(uniform_aggregate(GRID, 20_000), 0.5, NoiseSource(21))
    fc = feat.private_features(clustered_aggregate(GRID, 20_000, spread=0.01), 0.5, NoiseSource(22))
    assert fu.concentration < 0.15 < 0.9 < fc.concentration
    assert abs(fu.noisy_total - 20_000) < 40 and abs(fc.noisy_total - 20_000) < 40  # scale 4: P(|X|>40) ≈ 1e-4


def test_seeded_release_is_reproducible_and_answers() -> None:
    agg = clustered_aggregate(GRID, 20_000, spread=0.01)
    ra = release_with(AUTO, agg, 1.0, FEATURES, NoiseSource(5))
    rb = release_with(AUTO, agg, 1.0, FEATURES, NoiseSource(5))
    assert ra.public["auto"] == rb.public["auto"]
    np.testing.assert_array_equal(ra.noisy, rb.noisy)
    total = ra.answer(np.array([[0, 64, 0, 64]]))[0]
    assert abs(total - 20_000) < 2_000


# -- the candidates added with the 13-candidate rule (issue 27: ag_pool_smooth, dawa_free) -----------


def test_ag_pool_smooth_is_a_candidate_and_gets_the_features_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the rule names ``ag_pool_smooth`` it releases ``ag_pool``'s counts with its within-leaf
    prior, sized by the features' noisy count (post-processing: no second count is bought), and the
    parts still add up to ε."""
    assert frule.CONFIGS["ag_pool_smooth"] == ("ag_pool_smooth", {})
    assert "ag_pool_smooth" in frule.TAKES_PUBLIC_N
    favour(monkeypatch, "ag_pool_smooth")
    rel = release_with(AUTO, clustered_aggregate(GRID, 20_000, spread=0.05), 1.0, FEATURES, NoiseSource(31))
    a = rel.public["auto"]
    assert a["chosen"] == "ag_pool_smooth" and a["config"] == "ag_pool_smooth"
    assert a["chosen_params"]["public_n"] == max(int(round(a["features"]["noisy_total"])), 1)
    assert rel.within_leaf == "piecewise_linear" and rel.public["within_leaf"] == "piecewise_linear"
    assert [lv.n_counts for lv in _feature_levels(rel)] == [1, 16 * 16]
    assert not [lv for lv in rel.levels if lv.name.startswith("Number of points") and "feature" not in lv.name]
    assert sum(lv.cost.value for lv in rel.levels) == pytest.approx(1.0)
    assert rel.cost == budget.pure(1.0)


def test_dawa_free_is_a_candidate_up_to_512_squared(monkeypatch: pytest.MonkeyPatch) -> None:
    """``dawa_free`` is allowed on Hilbert squares up to 512² (auto's own limit, where the rule was
    derived: ``dawa_free`` itself now accepts up to 2,048²), whatever n, and refused (so never
    chosen) above; when named it releases with the rest of ε and takes no n."""
    p = AUTO.resolve_params(FEATURES)
    assert "dawa_free" in AUTO.allowed_configs(GRID, budget.pure(1.0), p)
    big = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 1024, 1024)
    allowed = AUTO.allowed_configs(big, budget.pure(1.0), p)
    assert "dawa_free" not in allowed and "dawa" in allowed
    assert "512 × 512" in str(AUTO._refusal("dawa_free", {}, big, budget.pure(1.0), p))
    catalog.get("points", "dawa_free").check_public(big, budget.pure(1.0), catalog.get("points", "dawa_free").resolve_params({}))
    favour(monkeypatch, "dawa_free")
    assert frule.choose(_fixed(1e5, *CLUSTERED), 1.0, grid_shape=(1024, 1024), allowed=allowed).config != "dawa_free"
    small = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 16, 16)
    rel = release_with(AUTO, clustered_aggregate(small, 5_000, spread=0.1), 1.0, FEATURES, NoiseSource(32))
    a = rel.public["auto"]
    assert a["chosen"] == "dawa_free" and "public_n" not in a["chosen_params"]
    assert a["epsilon_chosen"] == pytest.approx(0.95)
    assert sum(lv.cost.value for lv in rel.levels) == pytest.approx(1.0)
    assert abs(rel.answer(np.array([[0, 16, 0, 16]]))[0] - 5_000) < 1_000


# -- the candidate added with the 14-candidate rule (issue 27: privtree_ag) --------------------------


def test_privtree_ag_is_a_candidate_and_releases_when_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the rule names ``privtree_ag`` it releases PrivTree's leaves cut into AG's blocks with
    the within-leaf prior and the rest of ε; it takes no n (its tree needs none), so no count is
    passed on or bought beyond the features' own."""
    assert frule.CONFIGS["privtree_ag"] == ("privtree_ag", {})
    assert "privtree_ag" not in frule.TAKES_PUBLIC_N
    assert "privtree_ag" in AUTO.allowed_configs(GRID, budget.pure(1.0), AUTO.resolve_params(FEATURES))
    favour(monkeypatch, "privtree_ag")
    small = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 16, 16)
    rel = release_with(AUTO, clustered_aggregate(small, 5_000, spread=0.1), 1.0, FEATURES, NoiseSource(33))
    a = rel.public["auto"]
    assert a["chosen"] == "privtree_ag" and a["config"] == "privtree_ag" and "public_n" not in a["chosen_params"]
    assert a["epsilon_chosen"] == pytest.approx(0.95)
    assert rel.within_leaf == "piecewise_linear" and rel.public["within_leaf"] == "piecewise_linear"
    assert [lv.n_counts for lv in _feature_levels(rel)] == [1, 16 * 16]
    assert not [lv for lv in rel.levels if lv.name.startswith("Number of points") and "feature" not in lv.name]
    assert sum(lv.cost.value for lv in rel.levels) == pytest.approx(1.0)
    assert rel.cost == budget.pure(1.0)
    assert abs(rel.answer(np.array([[0, 16, 0, 16]]))[0] - 5_000) < 1_000


def test_takes_public_n_is_every_point_mechanism_with_a_public_n_parameter() -> None:
    """``auto`` hands the features' noisy count to exactly the mechanisms that take ``public_n``: a
    mechanism missing from the list would silently buy a second count with its own share of ε."""
    takes = {name for name in catalog.names("points")
             if any(p.name == "public_n" for p in catalog.get("points", name).params)}
    takes.discard("auto")  # auto passes its public_n on; it is not one of its own candidates
    assert set(frule.TAKES_PUBLIC_N) == takes


def test_prefer_is_off_by_default_and_needs_others_to_beat_the_favourite_by_its_margin() -> None:
    """``prefer`` (a policy studied in benchmarks/auto_fresh3.py): off, the choice is unchanged; on,
    every other configuration's prediction is multiplied by 1 + m, the favourite's kept."""
    f = feat.features_from_noisy(50_000.0, np.full((16, 16), 195.0), epsilon=0.05)
    base = frule.choose(f, 1.0, grid_shape=(256, 256))
    assert frule.choose(f, 1.0, grid_shape=(256, 256), prefer=None) == base
    fav = "privtree_ag"
    on = frule.choose(f, 1.0, grid_shape=(256, 256), prefer=(fav, 0.2))
    assert on.predictions[fav] == pytest.approx(base.predictions[fav])
    for c, v in base.predictions.items():
        if c != fav:
            assert on.predictions[c] == pytest.approx(v * 1.2)
    # the favourite wins unless another promised more than 20 % less regret
    best_other = min(v for c, v in base.predictions.items() if c != fav)
    assert (on.config == fav) == (base.predictions[fav] <= best_other * 1.2)
    huge = frule.choose(f, 1.0, grid_shape=(256, 256), prefer=(fav, 1e9))
    assert huge.config == fav
    with pytest.raises(Exception, match="margin"):
        frule.choose(f, 1.0, grid_shape=(256, 256), prefer=(fav, -0.5))
