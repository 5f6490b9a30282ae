"""CLI first, then the app (issue 26 item 12): points released by the CLI with bounds B, loaded in the
app with one far-away point more and given the bounds B only after loading, draw on the CLI's budget.

The app opens the data's budget when the file is loaded (its main key differs from the CLI's: one
point more); the key of the points inside B, known once B is set, leads to the CLI's budget, into which
the unused one opened at load is retired (:func:`dpcore.privacy.key_aliases.adopt`).  Before, the
release charged the budget opened at load: a second cap for the same points."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest
from test_engine_source import _count, _open
from test_pages import APP, goto, release, sidebar_text, upload

from dpcore.cli import main
from dpcore.core.session import Session
from dpcore.privacy.ledger_history import datasets

BOX = {"_w_b_west": -74.0, "_w_b_south": 40.6, "_w_b_east": -73.9, "_w_b_north": 40.7}


@pytest.fixture(autouse=True)
def _data_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files read in place (the DuckDB case) only under this folder."""
    monkeypatch.setenv("DPCORE_DATA_ROOT", str(tmp_path.resolve()))


def _spent() -> dict[str, float]:
    """Every budget of the database that has been charged: key -> spent ε."""
    return {d["key"]: float(d["spent"]) for d in datasets(Session().store) if d["charges"]}


@pytest.mark.parametrize("how", ["upload", "duckdb", pytest.param("spark", marks=pytest.mark.spark)])
def test_points_released_by_the_cli_with_bounds_keep_their_budget_in_the_app(tmp_path: Path, how: str) -> None:
    rng = np.random.default_rng(11)
    inner = pd.DataFrame({"lat": rng.uniform(40.61, 40.69, 300), "lon": rng.uniform(-73.99, -73.91, 300)})
    with_far = pd.concat([inner, pd.DataFrame({"lat": [40.85], "lon": [-73.75]})], ignore_index=True)
    alone, loaded = tmp_path / "inner.csv", tmp_path / "with_far.csv"
    inner.to_csv(alone, index=False, float_format="%.17g")
    with_far.to_csv(loaded, index=False, float_format="%.15g")  # and re-saved as a spreadsheet would
    assert main(["release", "points", "--input", str(alone), "--bounds=-74.0,40.6,-73.9,40.7", "--grid", "8,8",
                 "--mechanism", "identity", "--epsilon=0.1", "--out", str(tmp_path / "cli")]) == 0
    [(cli_key, cli_spent)] = _spent().items()
    assert cli_spent == pytest.approx(0.1)

    at = AppTest.from_file(APP, default_timeout=120).run()
    if how == "upload":
        upload(at, "with_far.csv", loaded.read_bytes())
    else:  # kept in the file, counted by an engine (its keys computed in the count)
        _count(_open(at, loaded, engine=how))
    far = at.session_state["bounds"].contains(np.array([-73.75]), np.array([40.85]))[0]
    assert far and "spent ε = 0 of 1" in sidebar_text(at)  # loaded with the far point: its own, new budget
    goto(at, "data")
    at.radio(key="_w_bounds_how").set_value("Numbers I type").run()
    for key, value in BOX.items():
        at.number_input(key=key).set_value(value).run()
    assert not at.exception, at.exception
    if how == "upload":  # read in memory: the key of the points inside B is known at once
        assert "spent ε = 0.1 of 1" in sidebar_text(at)
    release(at)
    assert len(at.session_state["releases"]) == 1
    eps = float(at.session_state["releases"][-1].release.cost.value)
    assert _spent() == {cli_key: pytest.approx(0.1 + eps)}  # the CLI's budget, no second one charged
    assert f"spent ε = {0.1 + eps:g} of 1" in sidebar_text(at)
