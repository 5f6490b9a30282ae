"""The command line writes every kind's files once, from the envelope: ``release.json`` is
``KindRelease.record(ledger as of the charge)`` with the plan's rows, validated by the envelope and the
kind's body schema, and the folder holds exactly ``KindRelease.files`` (issue 23, item 3).

The release is caught at :func:`dpcore.pipeline.release` (the envelope and a copy of its ledger right
after the charge) and at :meth:`KindRelease.files` (the options the CLI made the files with).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from record_helpers import Caught

from dpcore.cli import main
from dpcore.core.record import INTERVAL_COLUMNS, jsonable, validate_record
from dpcore.core.review import level_guidance


@pytest.fixture
def caught(monkeypatch: pytest.MonkeyPatch) -> Caught:
    return Caught(monkeypatch)


def _argv(kind: str, tmp_path: Path) -> list[str]:
    rng = np.random.default_rng(0)
    pd.DataFrame({"lat": rng.uniform(0.1, 0.9, 300), "lon": rng.uniform(0.1, 0.9, 300)}).to_csv(
        tmp_path / "points.csv", index=False)
    areas = pd.DataFrame({"state": ["1", "1", "2", "2"], "county": ["1a", "1b", "2a", "2b"]})
    areas.to_csv(tmp_path / "areas.csv", index=False)
    areas.assign(pop=[50, 70, 0, 30], age=["young", "old", "young", "old"]).to_csv(tmp_path / "table.csv",
                                                                                  index=False)
    pd.DataFrame({"origin": ["1a", "1b", "2a", "2b"] * 5, "destination": ["2b", "1a", "1b", "2a"] * 5}).to_csv(
        tmp_path / "trips.csv", index=False)
    t, a = str(tmp_path / "table.csv"), str(tmp_path / "areas.csv")
    census = ["release", "census", "--input", t, "--levels", "state,county", "--count", "pop", "--areas", a]
    return {
        "points": ["release", "points", "--input", str(tmp_path / "points.csv"), "--bounds", "0,0,1,1", "--grid",
                   "8,8", "--mechanism", "ug", "--epsilon", "0.5"],
        "hierarchy": ["release", "hierarchy", "--input", t, "--levels", "state,county", "--count", "pop",
                      "--areas", a, "--mechanism", "topdown_l2", "--rho", "0.25"],
        "census": [*census, "--epsilon", "0.5"],
        "census_marginals": [*census, "--rho", "0.25", "--mechanism", "matrix", "--ordinal", "age"],
        "od": ["release", "od", "--input", str(tmp_path / "trips.csv"), "--hierarchy", a, "--levels",
               "state,county", "--rho", "0.25"],
    }[kind] + ["--out", str(tmp_path / "out"), "--ledger", str(tmp_path / "ledger.json")]


@pytest.mark.parametrize("kind", ["points", "hierarchy", "census", "census_marginals", "od"])
def test_the_cli_writes_the_envelope_of_the_charge(tmp_path: Path, kind: str, caught: Caught) -> None:
    assert main(_argv(kind, tmp_path)) == 0
    [(kr, _, as_of_charge)] = caught.releases
    [options] = caught.options  # the files were made once, by KindRelease.files
    out = tmp_path / "out"
    rec = json.loads((out / "release.json").read_bytes())
    validate_record(rec)
    table = out / "release.csv"
    assert rec.pop("level_guidance", None) == level_guidance(table.read_bytes() if table.exists() else None)
    assert rec == kr.record(as_of_charge, **options)
    assert "plan" in rec and rec["plan"] == jsonable(kr.plan.rows_dict())  # [] where the data sizes the levels
    assert rec["plan"] or kind == "points"  # UG sizes its grid from a noisy count: no rows before the data
    assert rec["ledger"]["accounted"] and rec["ledger"]["entries"][-1]["cost"] == kr.cost.to_dict()
    validate_record(rec)  # the envelope and the body of the kind
    # the folder holds the envelope's files and nothing else (the same names as before)
    made = kr.files(as_of_charge, **options)
    assert sorted(p.name for p in out.iterdir()) == sorted(made)
    for name, data in made.items():
        assert (out / name).read_bytes() == data, name
    table = pd.read_csv(out / ("marginals.csv" if kind == "census_marginals" else "release.csv"))
    assert set(INTERVAL_COLUMNS) <= set(table.columns)
