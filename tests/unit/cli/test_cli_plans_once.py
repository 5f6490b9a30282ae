"""Every release made by the command line, by ``run CONFIG`` and by :func:`dpcore.run` builds its plan
exactly once (issue 23, item 1: the plan that is checked is the plan that is released)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpcore
from dpcore.cli import main
from dpcore.core.mechanism import KindRelease, Mechanism
from dpcore.core.session import Session
from dpcore.core.spec import ReleaseSpec


@pytest.fixture
def plans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The (kind, mechanism) of every plan built while the test runs."""
    built: list[str] = []
    original = Mechanism.plan

    def counting(self: Mechanism, *args: object, **kwargs: object) -> object:
        built.append(f"{self.kind}:{self.name}")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Mechanism, "plan", counting)
    return built


def _inputs(tmp_path: Path) -> dict[str, Path]:
    rng = np.random.default_rng(0)
    pts = pd.DataFrame({"lat": rng.uniform(0.1, 0.9, 200), "lon": rng.uniform(0.1, 0.9, 200)})
    pts.to_csv(tmp_path / "points.csv", index=False)
    areas = pd.DataFrame({"state": ["1", "1", "2", "2"], "county": ["1a", "1b", "2a", "2b"]})
    areas.to_csv(tmp_path / "areas.csv", index=False)
    table = areas.assign(pop=[5, 7, 0, 3], age=["young", "old", "young", "old"])
    table.to_csv(tmp_path / "table.csv", index=False)
    trips = pd.DataFrame({"origin": ["1a", "1b", "2a", "2b"] * 5, "destination": ["2b", "1a", "1b", "2a"] * 5})
    trips.to_csv(tmp_path / "trips.csv", index=False)
    return {"points": tmp_path / "points.csv", "areas": tmp_path / "areas.csv", "table": tmp_path / "table.csv",
            "trips": tmp_path / "trips.csv"}


def _argv(kind: str, f: dict[str, Path], out: Path) -> list[str]:
    common = ["--out", str(out), "--no-budget"]
    return {
        "points": ["release", "points", "--input", str(f["points"]), "--bounds", "0,0,1,1", "--grid", "8,8",
                   "--mechanism", "ug", "--epsilon", "1"],
        "hierarchy": ["release", "hierarchy", "--input", str(f["table"]), "--levels", "state,county", "--count", "pop",
                      "--areas", str(f["areas"]), "--mechanism", "topdown_l2", "--rho", "0.5"],
        "census": ["release", "census", "--input", str(f["table"]), "--levels", "state,county", "--count", "pop",
                   "--areas", str(f["areas"]), "--epsilon", "1"],
        "od": ["release", "od", "--input", str(f["trips"]), "--hierarchy", str(f["areas"]), "--levels",
               "state,county", "--rho", "0.5"],
    }[kind] + common


@pytest.mark.parametrize("kind", ["points", "hierarchy", "census", "od"])
def test_a_cli_release_plans_once(tmp_path: Path, kind: str, plans: list[str]) -> None:
    rc = main(_argv(kind, _inputs(tmp_path), tmp_path / "out"))
    assert rc == 0
    assert len(plans) == 1 and plans[0].startswith(f"{kind}:"), plans
    assert (tmp_path / "out" / "release.json").is_file()


def test_census_matrix_plans_once(tmp_path: Path, plans: list[str]) -> None:
    f = _inputs(tmp_path)
    argv = _argv("census", f, tmp_path / "out")
    argv[argv.index("--epsilon"):argv.index("--epsilon") + 2] = ["--rho", "0.5", "--mechanism", "matrix",
                                                                 "--ordinal", "age"]
    assert main(argv) == 0
    assert plans == ["census:matrix"]


def test_run_config_plans_once_and_dpcore_run_returns_the_release(tmp_path: Path, plans: list[str]) -> None:
    f = _inputs(tmp_path)
    from dpcore.cli.parser import build_parser

    argv = _argv("points", f, tmp_path / "out")
    args = build_parser().parse_args(argv)
    spec = ReleaseSpec.from_args("points", args)
    config = tmp_path / "release.toml"
    budget = {k: v for k, v in spec.budget.items() if k != "no_budget"}
    spec_db = ReleaseSpec("points", spec.input, spec.engine, spec.domain, spec.mechanism,
                          {**budget, "ledger": str(tmp_path / "ledger.json")}, spec.output)
    config.write_text(spec_db.to_toml(), "utf-8")
    assert main(["run", str(config)]) == 0
    assert plans == ["points:ug"]

    plans.clear()
    made = dpcore.run(spec, session=Session.unaccounted())
    assert plans == ["points:ug"]
    assert isinstance(made.release, KindRelease) and made.release.plan.mechanism == "ug"
    assert {p.name for p in made.paths} >= {"release.csv", "release.json"}
