"""The ``auto`` point mechanism and its rule (dpcore.points.recommend; issue 19, item 5)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from points_helpers import clustered_aggregate, levels_of, release_with, uniform_aggregate

from dpcore import catalog
from dpcore.cli import main
from dpcore.data.domain import Bounds, Grid
from dpcore.errors import ParameterError
from dpcore.points import evaluate, recommend
from dpcore.points.mechanisms import auto as auto_module
from dpcore.privacy import budget
from dpcore.privacy.noise import NoiseSource

GRID = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 64, 64)
AUTO = catalog.get("points", "auto")


# -- the rule ------------------------------------------------------------------------------------


def test_table_is_complete_and_names_registered_mechanisms() -> None:
    keys = {(n, e, c) for n in recommend.TABLE_NS for e in recommend.TABLE_EPSILONS for c in recommend.SIZE_CLASSES}
    assert set(recommend.TABLE) == keys
    for mech, wins, sets, worst in recommend.TABLE.values():
        assert mech in catalog.names("points") and mech != "auto"
        assert 0 <= wins <= sets and worst >= 1.0


@pytest.mark.parametrize(("n", "eps", "sizes", "expected"), [
    (300_000, 1.0, (0.02, 0.06, 0.1), "privtree"),
    (1_000, 0.01, (0.02, 0.06, 0.1), "uniform"),
    (100_000, 0.1, (0.1,), "ag_pool"),
    (100_000, 1.0, (0.001,), "privtree"),
    (1_000_000, 0.01, (0.1,), "ag"),
    (5_000_000, 0.05, (0.02, 0.06, 0.1), "privtree"),
])
def test_rule_choices_for_fixed_inputs(n: float, eps: float, sizes: tuple[float, ...], expected: str) -> None:
    """Pinned from the table of the current CSV (re-derive with benchmarks/derive_auto.py --write)."""
    rec = recommend.lookup(n, eps, sizes)
    assert rec.mechanism == expected
    assert rec.mechanism == recommend.TABLE[rec.key][0]


def test_lookup_keys_and_reason() -> None:
    rec = recommend.lookup(300_000, 1.0)
    assert rec.key == (100_000, 1.0, "mixed")
    m, wins, sets, worst = recommend.TABLE[rec.key]
    assert rec.reason.startswith("For about 300,000 points at ε = 1 and queries of 2–10 % of the area, ")
    assert f"{wins} of {sets} benchmark data sets" in rec.reason and rec.reason.endswith(".")
    assert recommend.lookup(300_000, 1.0, (0.1,)).key[2] == "10%"
    assert recommend.lookup(300_000, 1.0, (0.02, 0.015)).key[2] == "1%"
    # a cap of k records per person: ε/k per record chooses
    assert recommend.lookup(100_000, 1.0, sensitivity=10).key == recommend.lookup(100_000, 0.1).key
    # outside the benchmark: nearest edge, and the reason says so
    far = recommend.lookup(50, 5.0)
    assert far.key[:2] == (1_000, 1.0) and len(far.outside) == 2 and "outside" in far.reason
    with pytest.raises(ParameterError):
        recommend.lookup(1000, 0.0)
    with pytest.raises(ParameterError):
        recommend.size_class_of(2.0)


def test_ag_and_ag_pool_get_the_public_n() -> None:
    rec = recommend.lookup(100_000, 0.1, (0.1,))
    assert rec.mechanism == "ag_pool" and rec.params == {"public_n": 100_000}
    rec = recommend.lookup(1_000_000, 0.01, (0.1,))
    assert rec.mechanism == "ag" and rec.params == {"public_n": 1_000_000}


def test_app_default() -> None:
    name, why = recommend.app_default(GRID, 1.0, 300_000)
    assert name == "auto" and why.startswith("Auto will use PrivTree: for about 300,000 points")
    name, why = recommend.app_default(GRID, 1.0, None)
    assert name == "auto" and "noisy count" in why


# -- never reads the data to choose ---------------------------------------------------------------


def test_public_n_same_choice_for_different_data() -> None:
    a, b = uniform_aggregate(GRID, 20_000), clustered_aggregate(GRID, 3_000)
    for params in ({"public_n": 100_000, "query_sizes": "0.1", "feature_share": 0}, {"public_n": 500, "feature_share": 0}):
        ra = release_with(AUTO, a, 0.1, params, NoiseSource(1))
        rb = release_with(AUTO, b, 0.1, params, NoiseSource(2))
        assert ra.public["auto"]["chosen"] == rb.public["auto"]["chosen"]
        want = recommend.lookup(params["public_n"], 0.1, AUTO.resolve_params(params)["query_sizes"]).mechanism
        assert ra.public["auto"]["chosen"] == want
        assert ra.public["auto"]["n_source"] == "public number of points"
        assert "noisy_point_count" not in ra.public


def test_private_count_is_the_only_data_it_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a public n the choice depends on the data only through the noisy count: fix the
    count and two very different data sets get the same choice."""
    fixed = np.array([123_456])
    monkeypatch.setattr(auto_module, "noisy_counts", lambda true, cost, k, noise: fixed)
    ra = release_with(AUTO, uniform_aggregate(GRID, 20_000), 1.0, {"feature_share": 0}, NoiseSource(3))
    rb = release_with(AUTO, clustered_aggregate(GRID, 500), 1.0, {"feature_share": 0}, NoiseSource(4))
    assert ra.public["auto"]["chosen"] == rb.public["auto"]["chosen"] == recommend.lookup(123_456, 1.0).mechanism
    assert ra.public["auto"]["n_used"] == 123_456.0 and ra.public["auto"]["n_source"] == "noisy count"


# -- privacy cost ----------------------------------------------------------------------------------


def test_cost_is_the_chosen_mechanisms_plus_the_count_share() -> None:
    eps = 1.0
    assert AUTO.cost(eps, AUTO.resolve_params({"feature_share": 0})) == budget.pure(eps)
    rel = release_with(AUTO, uniform_aggregate(GRID, 20_000), eps, {"feature_share": 0}, NoiseSource(5))
    count = [lv for lv in rel.levels if lv.name.startswith("Number of points (chooses")]
    assert len(count) == 1 and count[0].cost.value == pytest.approx(0.05 * eps)
    others = sum(lv.cost.value for lv in rel.levels if lv is not count[0])
    assert others == pytest.approx(0.95 * eps)
    assert sum(lv.cost.value for lv in rel.levels) <= eps
    assert rel.cost == budget.pure(eps) and rel.mechanism == "auto"
    # the chosen mechanism's own levels at 0.95 ε
    chosen = catalog.get("points", rel.public["auto"]["chosen"])
    assert rel.public["auto"]["epsilon_chosen"] == pytest.approx(0.95 * eps)
    want = levels_of(chosen, GRID, 0.95 * eps, rel.public["auto"]["chosen_params"], n_estimate=20_000)
    assert [lv.cost.value for lv in want] == pytest.approx([lv.cost.value for lv in rel.levels if lv is not count[0]])


def test_public_n_spends_nothing_on_the_count() -> None:
    rel = release_with(AUTO, uniform_aggregate(GRID, 5_000), 0.5, {"public_n": 5_000, "feature_share": 0}, NoiseSource(6))
    assert sum(lv.cost.value for lv in rel.levels) == pytest.approx(0.5)
    assert not any("chooses the mechanism" in lv.name for lv in rel.levels)


def test_zcdp_refused() -> None:
    with pytest.raises(ParameterError):
        AUTO.cost(budget.zcdp(0.5), {})


# -- plan ----------------------------------------------------------------------------------------


def test_plan_is_the_chosen_mechanisms() -> None:
    levels = levels_of(AUTO, GRID, 0.1, {"public_n": 100_000, "query_sizes": "0.1", "feature_share": 0})
    ag = levels_of(catalog.get("points", "ag_pool"), GRID, 0.1, {"public_n": 100_000})
    assert [(lv.name, lv.cost) for lv in levels] == [(lv.name, lv.cost) for lv in ag]
    assert "Auto chose AG with pooled sparse cells" in levels[0].note
    with pytest.raises(ParameterError, match="guess of the number of points"):
        levels_of(AUTO, GRID, 1.0, {})
    guessed = levels_of(AUTO, GRID, 1.0, {"feature_share": 0}, n_estimate=300_000)
    assert guessed[-1].name.startswith("Number of points") and "noisy count" in guessed[0].note


# -- CLI -------------------------------------------------------------------------------------------


def test_cli_recommend(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["recommend", "points", "--grid", "512", "512", "--epsilon", "1", "--n-guess", "300000"])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.splitlines()[0] == "Recommended: privtree"
    assert "For about 300,000 points at ε = 1" in out
    rc = main(["recommend", "points", "--grid", "512,512", "--epsilon", "0.1", "--n-guess", "1e5",
               "--query-sizes", "0.1", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["mechanism"] == "ag_pool" and d["table_entry"]["query_sizes"] == "10%"
    rc = main(["recommend", "points", "--grid", "512", "--epsilon", "1", "--n-guess", "10"])
    assert rc == 2 and "--grid" in capsys.readouterr().err


def test_cli_release_auto(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    inp = tmp_path / "p.csv"
    inp.write_text("lat,lon\n" + "\n".join(f"{a:.5f},{o:.5f}" for a, o in
                                           zip(rng.uniform(0.1, 0.9, 400), rng.uniform(0.1, 0.9, 400), strict=True)))
    out = tmp_path / "out"
    rc = main(["release", "points", "--input", str(inp), "--bounds", "0,0,1,1", "--grid", "16,16",
               "--mechanism", "auto", "--epsilon", "1", "--param", "public_n=400", "--param", "feature_share=0", "--out", str(out), "--no-budget"])
    assert rc == 0, capsys.readouterr().err
    rec = json.loads((out / "release.json").read_text("utf-8"))
    assert rec["mechanism"]["name"] == "auto"
    choice = rec["released_values"]["auto"]
    assert choice["chosen"] == recommend.lookup(400, 1.0).mechanism
    assert choice["reason"].startswith("For about 400 points at ε = 1")


def test_evaluate_reports_auto_with_its_choice() -> None:
    agg = clustered_aggregate(GRID, 5_000)
    res = evaluate.evaluate(agg, ["auto", "ug"], [1.0], [0.1], 50, 2, noise_seed=7,
                            params={"auto": {"feature_share": 0}})
    a = res[res["mechanism"] == "auto"]
    # 5,000 ± a few points stays in the 10^4 row of the table
    assert set(a["choice"]) == {recommend.lookup(5_000, 1.0, (0.1,)).mechanism}
    assert set(res.loc[res["mechanism"] == "ug", "choice"]) == {""}
    summary = evaluate.summarize(res)
    md = evaluate.summary_markdown(summary)
    assert "`auto` chose" in md and summary.loc[summary["mechanism"] == "auto", "choice"].iloc[0] != ""
    assert math.isfinite(float(a["mre_percent"].mean()))


@pytest.mark.parametrize("side", [8, 1024, 4096])
@pytest.mark.parametrize("eps", [0.001, 1.0])
def test_no_candidates_public_check_depends_on_n(side: int, eps: float) -> None:
    """``auto`` runs its candidates' public checks before the charge without the noisy n
    (``Auto.check_public``), so each must accept or refuse a grid and budget whatever n it is
    given later: the same verdict at no n and at n from 1 to 10^9, for every mechanism and
    parameter set either rule can name."""
    from dpcore.points import recommend_features as frule

    grid = Grid(Bounds(0.0, 0.0, 1.0, 1.0), side, side)
    named = {(m, ()) for m, *_ in recommend.TABLE.values()} | {(m, tuple(x.items())) for m, x in frule.CONFIGS.values()}
    for name, extra in sorted(named):
        verdicts = {_public_verdict(name, dict(extra), grid, eps, n) for n in (1, 10**4, 10**9)}
        assert verdicts == {_public_verdict(name, dict(extra), grid, eps, None)}, (name, extra)


def _public_verdict(name: str, raw: dict, grid: Grid, eps: float, n: int | None) -> str:
    """``name``'s public check of ``grid`` at ``eps`` with parameters ``raw`` and ``n`` as its public n
    (None: none): "accepted" or the refusal's message."""
    mech = catalog.get("points", name)
    if n is not None and name in recommend.TAKES_PUBLIC_N:
        raw = {**raw, "public_n": n}
    try:
        mech.check_public(grid, budget.pure(eps), mech.resolve_params(raw))
    except ParameterError as e:
        return str(e)
    return "accepted"
