"""``auto``'s default since 2026-11-30 (issue 27, item 1): rule ``held_out_best``, the mechanism that did
best on held-out data shapes (``privtree_ag``) at the whole ε, nothing spent on choosing; and the
inference of the rule for pipelines that name none (``feature_share`` / ``count_share`` given)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from points_helpers import clustered_aggregate, levels_of, release_with

from dpcore import catalog
from dpcore.cli import main
from dpcore.core.record import validate_record
from dpcore.data.domain import Bounds, Grid
from dpcore.points.mechanisms import auto as auto_module
from dpcore.privacy import budget
from dpcore.privacy.noise import NoiseSource

GRID = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 64, 64)
AUTO = catalog.get("points", "auto")
PTAG = catalog.get("points", "privtree_ag")


def test_the_default_rule_is_held_out_best_naming_privtree_ag() -> None:
    p = AUTO.resolve_params(None)
    assert p["rule"] == "held_out_best" == auto_module.RULES[0]
    assert auto_module.HELD_OUT_BEST == "privtree_ag"
    rule = next(q for q in AUTO.params if q.name == "rule")
    assert rule.choices == ("held_out_best", "features", "table") and rule.advanced


@pytest.mark.parametrize(("raw", "rule"), [
    ({}, "held_out_best"), ({"public_n": 5_000}, "features"), ({"query_sizes": "0.1"}, "held_out_best"),
    ({"feature_share": 0.05}, "features"), ({"feature_share": "0.2"}, "features"),
    ({"feature_share": 0}, "table"), ({"feature_share": 0, "count_share": 0.1}, "table"),
    ({"count_share": 0.05}, "features"), ({"count_share": 0.05, "feature_share": 0.05}, "features"),
    ({"rule": "held_out_best", "feature_share": 0.05}, "held_out_best"), ({"rule": "table"}, "table"),
    ({"rule": "", "feature_share": 0}, "table"), ({"rule": None}, "held_out_best"),
])
def test_a_pipeline_without_a_rule_keeps_its_behaviour(raw: dict, rule: str) -> None:
    """As before ``rule`` existed (the default spent 5 % on features): ``feature_share`` > 0 given: features; 0:
    table; ``count_share`` or ``public_n`` without it: features; an explicit rule wins."""
    assert AUTO.resolve_params(raw)["rule"] == rule


def test_the_default_gives_the_whole_budget_to_privtree_ag() -> None:
    p = AUTO.resolve_params({})
    assert AUTO.budgets(budget.pure(0.7), p) == (None, budget.pure(0.7))
    # nothing is bought to choose, so a public n changes nothing either (named with the rule: alone, a
    # public n keeps the feature rule it drove before the rule existed)
    p = AUTO.resolve_params({"rule": "held_out_best", "public_n": 9})
    assert AUTO.budgets(budget.pure(0.7), p) == (None, budget.pure(0.7))


def test_the_default_release_is_privtree_ags_at_the_whole_epsilon() -> None:
    agg = clustered_aggregate(GRID, 20_000)
    rel = release_with(AUTO, agg, 1.0, None, NoiseSource(21))
    alone = release_with(PTAG, agg, 1.0, None, NoiseSource(21))
    assert rel.mechanism == "auto" and rel.mechanism_title == f"Auto → {PTAG.title}"
    assert rel.cost == budget.pure(1.0)
    assert [(lv.name, lv.cost) for lv in rel.levels] == [(lv.name, lv.cost) for lv in alone.levels]
    assert sum(lv.cost.value for lv in rel.levels) == pytest.approx(1.0)
    assert np.array_equal(rel.noisy, alone.noisy) and np.array_equal(rel.rects, alone.rects)
    a = rel.public["auto"]
    assert set(a) == {"chosen", "chosen_title", "chosen_params", "reason", "rule", "epsilon_chosen"}
    assert a["chosen"] == "privtree_ag" and a["chosen_title"] == PTAG.title
    assert a["chosen_params"] == PTAG.resolve_params({}) and a["epsilon_chosen"] == 1.0
    assert a["reason"] == auto_module.HELD_OUT_REASON and "auto_fresh3.md" in a["reason"]
    assert a["reason"].count(". ") == 0  # one sentence
    assert "noisy_point_count" not in rel.public and not any("feature" in lv.name for lv in rel.levels)
    assert rel.params["rule"] == "held_out_best"


def test_the_default_plan_is_privtree_ags_with_the_note() -> None:
    levels = levels_of(AUTO, GRID, 1.0, {}, n_estimate=30_000)
    alone = levels_of(PTAG, GRID, 1.0, {}, n_estimate=30_000)
    assert [(lv.name, lv.cost, lv.scale) for lv in levels] == [(lv.name, lv.cost, lv.scale) for lv in alone]
    note = auto_module.held_out_note(PTAG.title)
    assert levels[0].note.endswith(note) and "does not depend on your data" in note
    assert all(lv.extra["auto_choice"] == "privtree_ag" for lv in levels)
    name, extra, why = AUTO.preview(GRID, budget.pure(1.0), AUTO.resolve_params({}), 30_000, 1)
    assert (name, extra, why) == ("privtree_ag", {}, note)


def test_cli_release_with_auto_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    inp = tmp_path / "points.csv"
    inp.write_text("lat,lon\n" + "".join(f"{a:.6f},{o:.6f}\n" for a, o in
                                           zip(rng.uniform(40.6, 40.9, 300), rng.uniform(-74.0, -73.75, 300),
                                               strict=True)), "utf-8")
    outs = {}
    for tag, extra in (("default", []), ("features", ["--param", "rule=features"])):
        out = tmp_path / tag
        rc = main(["release", "points", "--input", str(inp), "--bounds=-74.06,40.56,-73.70,40.92", "--grid", "8,8",
                   "--mechanism", "auto", "--epsilon=0.5", "--out", str(out), *extra])
        assert rc == 0, capsys.readouterr().err
        outs[tag] = rec = json.loads((out / "release.json").read_text("utf-8"))
        validate_record(rec)
    default, feats = outs["default"], outs["features"]
    assert default["mechanism"]["params"]["rule"] == "held_out_best"
    assert default["mechanism"]["title"].startswith("Auto → PrivTree with AG")
    assert feats["mechanism"]["params"]["rule"] == "features"
    assert "noisy_point_count" not in json.dumps(default) and "noisy_point_count" in json.dumps(feats)


def test_rule_features_needs_a_feature_share() -> None:
    from dpcore.errors import ParameterError
    with pytest.raises(ParameterError, match="feature share above 0"):
        AUTO.resolve_params({"rule": "features", "feature_share": 0})


def test_the_default_checks_only_privtree_ags_data_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the charge the default runs privtree_ag's data check alone (it releases nothing else): a
    limit of a candidate only the rules can choose (DAWA's, here made to refuse) does not refuse it,
    while rule 'features' still refuses before spending."""
    from dpcore.errors import ParameterError

    dawa = catalog.get("points", "dawa")

    def refuse(aggregate):  # noqa: ANN001, ANN202 - a stand-in for DAWA's limit on the number of points
        raise ParameterError("too many points for DAWA")

    monkeypatch.setattr(dawa, "check_aggregate", refuse)
    agg = clustered_aggregate(GRID, 2_000)
    plan = AUTO.plan(GRID, budget.pure(1.0), {}, n_estimate=2_000.0)
    AUTO.check_data(plan, agg)  # the default: no refusal
    plan = AUTO.plan(GRID, budget.pure(1.0), {"rule": "features"}, n_estimate=2_000.0)
    with pytest.raises(ParameterError, match="Auto may choose .*too many points for DAWA"):
        AUTO.check_data(plan, agg)
