"""A ReleaseSpec describes a release in typed values (numbers, tuples, dicts), however it was written:
in Python (``ReleaseSpec.points(...)``), on the command line (``from_args``), in a TOML config, or in an
older config that gave lists and parameters as text.  All of them are one description; it survives
TOML and the command line; and ``dpcore.run`` makes the release the command line makes."""

from __future__ import annotations

import io
from argparse import Namespace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpcore
from dpcore.cli import build_parser, main
from dpcore.core.session import Session
from dpcore.core.spec import ReleaseSpec
from dpcore.core.spec_options import KINDS, OPTIONS, TYPES
from dpcore.errors import ParameterError
from dpcore.privacy import noise


def _from_argv(kind: str, line: str) -> ReleaseSpec:
    return ReleaseSpec.from_args(kind, build_parser().parse_args(["release", kind, *line.split()]))


#: kind -> (a command line, the same release in Python, the same release in a TOML config).
SAME = {
    "points": (
        "--input x.csv --bounds=-74.06,40.56,-73.70,40.92 --grid 16,8 --mechanism ug --param c=4 --param fast=true "
        "--param name=ab --epsilon 0.5 --user-col id --user-cap 3 --budget-db --out o",
        dict(input="x.csv", bounds=(-74.06, 40.56, -73.7, 40.92), grid=(16, 8), mechanism="ug",
             params={"c": 4, "fast": True, "name": "ab"}, epsilon=0.5, user="id", user_cap=3, budget_db=True,
             out="o"),
        'release = "points"\n[input]\npath = "x.csv"\nuser = "id"\nuser_cap = 3\n[domain]\n'
        'bounds = [-74.06, 40.56, -73.7, 40.92]\ngrid = [16, 8]\n[mechanism]\nname = "ug"\n'
        '[mechanism.params]\nc = 4\nfast = true\nname = "ab"\n[budget]\nepsilon = 0.5\ndb = true\n'
        '[output]\ndir = "o"\n'),
    "hierarchy": (
        "--input t.csv --levels a,b,c --count x,y --mechanism topdown_l2 --rho 0.25 --split 1,1,2.5 "
        "--name a=a_name --out o",
        dict(input="t.csv", levels=["a", "b", "c"], count=["x", "y"], mechanism="topdown_l2", rho=0.25,
             split=[1, 1, 2.5], name={"a": "a_name"}, out="o"),
        'release = "hierarchy"\n[input]\npath = "t.csv"\nlevels = ["a", "b", "c"]\ncount = ["x", "y"]\n'
        '[input.name]\na = "a_name"\n[mechanism]\nname = "topdown_l2"\n[budget]\nrho = 0.25\n'
        'split = [1, 1, 2.5]\n[output]\ndir = "o"\n'),
    "census": (
        "--input p.csv --levels state,county --ordinal age,sex --ordinal-order age=young|old "
        "--mechanism matrix --marginals county*age;age --rho 0.1 --out o",
        dict(input="p.csv", levels=("state", "county"), ordinal=("age", "sex"), ordinal_order={"age": "young|old"},
             mechanism="matrix", marginals="county*age;age", rho=0.1, out="o"),
        'release = "census"\n[input]\npath = "p.csv"\nlevels = ["state", "county"]\nordinal = ["age", "sex"]\n'
        '[input.ordinal_order]\nage = "young|old"\n[mechanism]\nname = "matrix"\nmarginals = "county*age;age"\n'
        '[budget]\nrho = 0.1\n[output]\ndir = "o"\n'),
    "od": (
        "--input trips.csv --origin o --destination d --user person --max-trips 2 --hierarchy b.csv "
        "--code-column GEOID --prefix-lengths 2,5,11 --epsilon 1 --delta 1e-8 --split geometric --out o",
        dict(input="trips.csv", origin="o", destination="d", user="person", max_trips=2, hierarchy="b.csv",
             code_column="GEOID", prefix_lengths=[2, 5, 11], epsilon=1, delta=1e-8, split="geometric", out="o"),
        'release = "od"\n[input]\npath = "trips.csv"\norigin = "o"\ndestination = "d"\nuser = "person"\n'
        'max_trips = 2\n[domain]\nhierarchy = "b.csv"\ncode_column = "GEOID"\nprefix_lengths = [2, 5, 11]\n'
        '[budget]\nepsilon = 1\ndelta = 1e-8\nsplit = "geometric"\n[output]\ndir = "o"\n'),
}


@pytest.mark.parametrize("kind", KINDS)
def test_python_the_command_line_and_a_config_are_one_description(kind: str) -> None:
    line, python, toml = SAME[kind]
    built = getattr(ReleaseSpec, kind)(**python)
    assert built == _from_argv(kind, line) == ReleaseSpec.from_toml(toml, base_dir="")
    assert hash(built) == hash(_from_argv(kind, line))  # a dict of parameters does not stop hashing
    # round trips: TOML and the command line give back the same description
    assert ReleaseSpec.from_toml(built.to_toml(), base_dir="") == built
    assert _from_argv(kind, " ".join(built.to_argv()[2:])) == built


def test_values_are_typed() -> None:
    pts = _from_argv("points", SAME["points"][0])
    assert pts.domain["bounds"] == (-74.06, 40.56, -73.7, 40.92)
    assert all(isinstance(x, float) for x in pts.domain["bounds"]) and pts.domain["grid"] == (16, 8)
    assert pts.params == {"c": 4, "fast": True, "name": "ab"} and isinstance(pts.params["c"], int)
    assert pts.budget["epsilon"] == 0.5 and pts.input["user_cap"] == 3 and pts.budget["db"] is True
    hi = _from_argv("hierarchy", SAME["hierarchy"][0])
    assert hi.input["levels"] == ("a", "b", "c") and hi.input["count"] == ("x", "y")
    assert hi.budget["split"] == (1, 1, 2.5) and hi.input["name"] == {"a": "a_name"}
    assert ReleaseSpec.from_args("hierarchy", Namespace(split="geometric")).budget["split"] == "geometric"
    cen = _from_argv("census", SAME["census"][0])
    assert cen.input["ordinal"] == ("age", "sex") and cen.input["ordinal_order"] == {"age": "young|old"}
    od = _from_argv("od", SAME["od"][0])
    assert od.domain["prefix_lengths"] == (2, 5, 11) and od.input["max_trips"] == 2 and od.budget["delta"] == 1e-8
    # defaults are not held: the grid of a points release is 1024 x 1024 unless it says otherwise
    assert "grid" not in ReleaseSpec.points(grid="1024,1024").domain
    # every type of the table is used by some option, and each fits its option's command-line form
    assert {o.type for opts in OPTIONS.values() for o in opts} == set(TYPES)
    fits = {"str": {"text", "number", "list", "ints", "floats", "split"}, "repeat": {"items", "table", "params"},
            "int": {"int"}, "float": {"float"}, "flag": {"bool"}, "opt": {"opt"}}
    assert all(o.type in fits[o.form] for opts in OPTIONS.values() for o in opts)


def test_older_configs_still_read() -> None:
    """Lists as comma-separated text, parameters as KEY=VALUE items, numbers as text: what older configs
    (and the app's earlier release.toml files) wrote, read as the typed description."""
    old = ReleaseSpec.from_toml(
        'release = "points"\n[input]\npath = "x.csv"\n[domain]\nbounds = "-74.06,40.56,-73.70,40.92"\n'
        'grid = "16,8"\n[mechanism]\nname = "ug"\nparams = ["c=4", "fast=true", "name=ab"]\n'
        '[budget]\nepsilon = "0.5"\n[output]\ndir = "o"\n', base_dir="")
    new = ReleaseSpec.points(input="x.csv", bounds=(-74.06, 40.56, -73.7, 40.92), grid=(16, 8), mechanism="ug",
                             params={"c": 4, "fast": True, "name": "ab"}, epsilon=0.5, out="o")
    assert old == new
    # [options] KEY = ... names the option by its command-line name, as configs always could
    od = ReleaseSpec.from_toml('release = "od"\n[options]\nlevels = "a,b"\nprefix_lengths = "2,5"\n')
    assert od.domain["levels"] == ("a", "b") and od.domain["prefix_lengths"] == (2, 5)
    hi = ReleaseSpec.from_toml('release = "hierarchy"\n[input]\nlevels = "a,b"\ncount = "pop"\n'
                               '[budget]\nsplit = "1,2"\n[output]\nboundaries = ["a=a.geojson"]\n', base_dir="")
    assert hi.input["count"] == ("pop",) and hi.budget["split"] == (1, 2)
    assert hi.output["boundaries"] == {"a": "a.geojson"}
    # an old census config wrote the default marginals as a number
    assert ReleaseSpec.from_toml('release = "census"\n[mechanism]\nmarginals = 2\n').mechanism["marginals"] == "2"


def test_whole_numbers_keep_their_text() -> None:
    """``bounds = [0, 0, 1, 1]`` is still ``--bounds=0,0,1,1`` on the command line (run --dry-run prints
    what it printed), and equals the same bounds given as floats."""
    ints = ReleaseSpec.points(bounds=[0, 0, 1, 1])
    floats = ReleaseSpec.points(bounds=(0.0, 0.0, 1.0, 1.0))
    assert ints == floats and "--bounds=0,0,1,1" in ints.to_argv() and "--bounds=0.0,0.0,1.0,1.0" in floats.to_argv()


def test_wrong_values_are_refused_with_their_name() -> None:
    with pytest.raises(ParameterError, match="colour is not an option of a points release.*bounds"):
        ReleaseSpec.points(colour="red")
    with pytest.raises(ParameterError, match=r"\[domain\] colour is not an option"):
        ReleaseSpec("points", domain={"colour": "red"})
    with pytest.raises(ParameterError, match=r"\[input\] user_cap: invalid int value"):
        ReleaseSpec.points(user_cap="ten")
    with pytest.raises(ParameterError, match=r"\[input\] repeats is on or off"):
        ReleaseSpec.od(repeats="yes")
    with pytest.raises(ParameterError, match=r"--param 'c' must look like key=value, e.g. --param c=10"):
        ReleaseSpec.from_args("points", Namespace(param=["c"]))
    with pytest.raises(ParameterError, match="A release is one of"):
        ReleaseSpec("grid")


@pytest.mark.parametrize(("key", "value", "needle"), [
    ("bounds", '"1,2,3"', "four numbers"),
    ("bounds", '["a", 0, 1, 1]', "not a number"),
    ("grid", '"a,b"', "Grid"),
])
def test_text_that_is_not_its_type_is_refused_by_the_release(tmp_path: Path, key: str, value: str, needle: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A value that does not read as its type stays as given, and the release refuses it with the
    command line's own message (before any data is read)."""
    cfg = tmp_path / "c.toml"
    body = {"bounds": "[0, 0, 1, 1]", "grid": "[4, 4]", key: value}
    cfg.write_text(f'release = "points"\n[input]\npath = "none.csv"\n[domain]\nbounds = {body["bounds"]}\n'
                   f'grid = {body["grid"]}\n[mechanism]\nname = "ug"\n[budget]\nepsilon = 1\nledger = "l.json"\n'
                   '[output]\ndir = "o"\n', "utf-8")
    assert main(["run", str(cfg)]) == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "o").exists() and not (tmp_path / "l.json").exists()


def test_dpcore_run_makes_a_python_description_as_the_command_line_does(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcore import pipeline

    monkeypatch.setattr(noise, "secure_source", lambda: noise.NoiseSource(11))
    monkeypatch.setattr(pipeline, "secure_source", lambda: noise.NoiseSource(11))
    rng = np.random.default_rng(4)
    pd.DataFrame({"lat": rng.uniform(0, 1, 500), "lon": rng.uniform(0, 1, 500)}).to_csv(tmp_path / "p.csv",
                                                                                         index=False)
    spec = ReleaseSpec.points(input=str(tmp_path / "p.csv"), bounds=(0, 0, 1, 1), grid=(8, 8), mechanism="ug",
                              params={"c": 4}, epsilon=0.5, out=str(tmp_path / "a"))
    (tmp_path / "release.toml").write_text(spec.to_toml(), "utf-8")
    made = dpcore.run(tmp_path / "release.toml", session=Session.unaccounted())  # a config's path, or the spec
    assert made.release.plan.mechanism == "ug" and made.release.plan.params["c"] == 4
    assert main(["release", "points", *spec.to_argv()[2:]][:-1] + [f"--out={tmp_path / 'b'}", "--no-budget"]) == 0
    a, b = (tmp_path / "a" / "release.csv").read_bytes(), (tmp_path / "b" / "release.csv").read_bytes()
    assert len(a) > 100
    # the --no-budget copy says so on every row (issue 26 item 16); its values are the same
    da, db = pd.read_csv(io.BytesIO(a)), pd.read_csv(io.BytesIO(b))
    assert db.pop("accounted").str.startswith("no (--no-budget").all()
    pd.testing.assert_frame_equal(da, db)
