"""ReleaseSpec: one release description for the command line, ``run CONFIG`` and the app.

A spec built from a ``release KIND`` command line and the same spec read from its TOML config are
equal, write the same command line, and make byte-identical releases (with the same seeded noise);
a spec survives ``to_toml``/``from_toml``; the option table the spec reads configs with is the
command line's (flags, defaults, forms)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_cli import write_tracts

from dpcore.cli import build_parser, main
from dpcore.cli.spec_args import argument_values
from dpcore.core.spec import ReleaseSpec, census_config, hierarchy_config, od_config, points_config
from dpcore.core.spec_options import KINDS, OPTIONS
from dpcore.errors import ParameterError
from dpcore.privacy import noise


@pytest.fixture(autouse=True)
def seeded_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every release draws from the same seeded stream, so equal specs give equal files."""
    import dpcore.pipeline

    monkeypatch.setattr(noise, "secure_source", lambda: noise.NoiseSource(5))
    monkeypatch.setattr(dpcore.pipeline, "secure_source", lambda: noise.NoiseSource(5))


def _inputs(tmp: Path) -> None:
    rng = np.random.default_rng(3)
    n = 2000
    pd.DataFrame({"lat": rng.uniform(40.5, 40.95, n), "lon": rng.uniform(-74.1, -73.65, n),
                  "person": rng.integers(0, 150, n)}).to_csv(tmp / "points.csv", index=False)
    write_tracts(tmp / "tracts.csv")
    zones = [f"{r:02d}{d:02d}" for r in (1, 2) for d in (1, 2, 3)]
    pd.DataFrame({"region": [z[:2] for z in zones], "zone": zones}).to_csv(tmp / "areas.csv", index=False)
    pd.DataFrame({"person": rng.integers(0, 40, 300), "origin": rng.choice(zones, 300),
                  "destination": rng.choice(zones, 300)}).to_csv(tmp / "trips.csv", index=False)


#: kind -> (command line after 'release KIND', with {d} the data folder; the same release as a config
#: next to the data).  Each uses a list, a repeated option, a number, a switch and a non-default value.
CASES = {
    "points": (
        "--input {d}/points.csv --bounds=-74.06,40.56,-73.70,40.92 --grid 16,8 --mechanism ug --param c=4 "
        "--epsilon 0.5 --lat-col lat --lon-col lon --user-col person --user-cap 3 --engine numpy "
        "--ledger {d}/l.json --budget-cap 2 --out {d}/o",
        'release = "points"\n[input]\npath = "points.csv"\nlat = "lat"\nlon = "lon"\nuser = "person"\n'
        'user_cap = 3\n[engine]\nname = "numpy"\n[domain]\nbounds = "-74.06,40.56,-73.70,40.92"\ngrid = [16, 8]\n'
        '[mechanism]\nname = "ug"\n[mechanism.params]\nc = 4\n'
        '[budget]\nepsilon = 0.5\ncap = 2.0\nledger = "l.json"\n[output]\ndir = "o"\n'),
    "hierarchy": (
        "--input {d}/tracts.csv --levels STATEFP,COUNTYFP,TRACTCE --count POPULATION --mechanism topdown_linf "
        "--rho 0.5 --split 1,1,2,3 --order descending --input-lists-all-areas --ledger {d}/l.json --out {d}/o",
        'release = "hierarchy"\n[input]\npath = "tracts.csv"\nlevels = ["STATEFP", "COUNTYFP", "TRACTCE"]\n'
        'count = "POPULATION"\ninput_lists_all_areas = true\n[mechanism]\nname = "topdown_linf"\n'
        '[budget]\nrho = 0.5\nsplit = [1, 1, 2, 3]\norder = "descending"\nledger = "l.json"\n[output]\ndir = "o"\n'),
    "census": (
        "--input {d}/tracts.csv --levels STATEFP,COUNTYFP,TRACTCE --count POPULATION --epsilon 1 "
        "--areas {d}/tracts.csv --name STATEFP=STATEFP --ledger {d}/l.json --out {d}/o",
        'release = "census"\n[input]\npath = "tracts.csv"\nlevels = "STATEFP,COUNTYFP,TRACTCE"\n'
        'count = "POPULATION"\nareas = "tracts.csv"\n[input.name]\nSTATEFP = "STATEFP"\n'
        '[budget]\nepsilon = 1\nledger = "l.json"\n[output]\ndir = "o"\n'),
    "od": (
        "--input {d}/trips.csv --hierarchy {d}/areas.csv --levels region,zone --user person --max-trips 2 "
        "--repeats --epsilon 1 --delta 1e-8 --conversion cks --orientation origin --ledger {d}/l.json --out {d}/o",
        'release = "od"\n[input]\npath = "trips.csv"\nuser = "person"\nmax_trips = 2\nrepeats = true\n'
        '[domain]\nhierarchy = "areas.csv"\nlevels = ["region", "zone"]\n[mechanism]\norientation = "origin"\n'
        '[budget]\nepsilon = 1\ndelta = 1e-8\nconversion = "cks"\nledger = "l.json"\n[output]\ndir = "o"\n'),
}


def _cli_spec(kind: str, argv: list[str]) -> ReleaseSpec:
    args = build_parser().parse_args(["release", kind, *argv])
    return ReleaseSpec.from_args(kind, args)


@pytest.mark.parametrize("kind", KINDS)
def test_the_command_line_and_its_config_are_one_spec(kind: str, tmp_path: Path) -> None:
    line, toml = CASES[kind]
    argv = line.format(d=tmp_path).split()
    (tmp_path / "c.toml").write_text(toml, "utf-8")
    from_cli = _cli_spec(kind, argv)
    from_cfg = ReleaseSpec.from_toml(tmp_path / "c.toml")
    assert from_cfg == from_cli
    assert from_cfg.to_argv() == from_cli.to_argv()
    # to_argv is the command line of the same spec, and TOML written from the spec reads back to it
    assert _cli_spec(kind, from_cli.to_argv()[2:]) == from_cli
    assert ReleaseSpec.from_toml(from_cli.to_toml()) == from_cli
    assert ReleaseSpec.from_toml(from_cli.to_toml(header="a header\n\nof two lines")) == from_cli
    # the spec holds what differs from the defaults; the command line's adapter gives every option as the
    # parser gives the spec's own command line
    parsed = vars(build_parser().parse_args(from_cli.to_argv()))
    assert argument_values(from_cli) == {k: v for k, v in parsed.items() if k not in ("command", "kind")}


@pytest.mark.parametrize("kind", KINDS)
def test_the_command_line_and_its_config_make_the_same_release(kind: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    _inputs(tmp_path)
    line, toml = CASES[kind]
    assert main(["release", kind, *line.format(d=tmp_path).split()]) == 0, capsys.readouterr().err
    (tmp_path / "c.toml").write_text(toml.replace('"o"', '"o2"').replace('"l.json"', '"l2.json"'), "utf-8")
    assert main(["run", str(tmp_path / "c.toml")]) == 0, capsys.readouterr().err
    a, b = (tmp_path / "o" / "release.csv").read_bytes(), (tmp_path / "o2" / "release.csv").read_bytes()
    assert a == b and len(a) > 100
    # and the summary lines name the same release (only the paths differ)
    assert (tmp_path / "l2.json").is_file()


def test_run_checks_the_config_as_the_parser_checks_a_command_line(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.toml"
    base = 'release = "points"\n[input]\npath = "x.csv"\n[domain]\nbounds = [0, 0, 1, 1]\n[mechanism]\nname = "ug"\n'
    cfg.write_text(base + '[budget]\nledger = "l.json"\n[output]\ndir = "o"\n', "utf-8")
    assert main(["run", str(cfg)]) == 2
    assert "one of the arguments --epsilon --rho is required" in capsys.readouterr().err
    cfg.write_text(base + '[budget]\nepsilon = 1\nrho = 1\nledger = "l.json"\n[output]\ndir = "o"\n', "utf-8")
    assert main(["run", str(cfg)]) == 2
    assert "not allowed with argument" in capsys.readouterr().err
    cfg.write_text(base + '[budget]\nepsilon = 1\nledger = "l.json"\n', "utf-8")
    assert main(["run", str(cfg)]) == 2
    assert "the following arguments are required: --out" in capsys.readouterr().err
    cfg.write_text(base + '[engine]\nname = "pandas"\n[budget]\nepsilon = 1\n[output]\ndir = "o"\n', "utf-8")
    assert main(["run", str(cfg)]) == 2
    assert "invalid choice: 'pandas'" in capsys.readouterr().err
    cfg.write_text(base.replace('path = "x.csv"', 'path = "x.csv"\nuser_cap = "ten"')
                   + '[budget]\nepsilon = 1\n[output]\ndir = "o"\n', "utf-8")
    assert main(["run", str(cfg)]) == 2
    assert "user_cap" in capsys.readouterr().err


def test_the_option_table_is_the_command_lines() -> None:
    """Every option of every 'release KIND' parser has one row in OPTIONS, with its default and form."""
    parser = build_parser()
    for kind in KINDS:
        sub = parser.release_parsers[kind]  # type: ignore[attr-defined]
        actions = {a.option_strings[-1]: a for a in sub._actions if a.option_strings and a.dest != "help"}
        rows = {o.flag: o for o in OPTIONS[kind]}
        assert set(rows) == set(actions), kind
        for flag, a in actions.items():
            o = rows[flag]
            assert o.dest == a.dest, flag
            default = tuple(a.default) if isinstance(a.default, list) else a.default
            assert o.default == default, (kind, flag)
            form = ("flag" if isinstance(a, argparse._StoreTrueAction)
                    else "repeat" if isinstance(a, argparse._AppendAction)
                    else "opt" if a.nargs == "?" else {int: "int", float: "float"}.get(a.type, "str"))
            assert o.form == form, (kind, flag)


def test_app_configs_are_specs(tmp_path: Path) -> None:
    pts = points_config(input_path="pings.csv", lat="lat", lon="lon", user="id", user_cap=None,
                        bounds=(np.float64(-74.06), 40.56, -73.7, 40.92), grid=(np.int64(64), 32), mechanism="ug",
                        params={"c": 10, "rectangles": [[0, 0, 1, 1]], "skip": None}, definition="zcdp",
                        value=0.05, delta=1e-6, engine="spark", spark_master="local[2]")
    text = pts.to_toml(header="written by the app")
    assert text.startswith("# written by the app\n\nrelease = \"points\"\n")
    assert ReleaseSpec.from_toml(text) == pts
    assert pts.to_argv() == [
        "release", "points", "--input=pings.csv", "--lat-col=lat", "--lon-col=lon", "--user-col=id", "--user-cap=1",
        "--engine=spark", "--spark-master=local[2]", "--bounds=-74.06,40.56,-73.7,40.92", "--grid=64,32",
        "--mechanism=ug", "--param", "c=10", "--workload-file=workload.json", "--rho=0.05", "--budget-db",
        "--out=release"]
    hi = hierarchy_config(input_path="t.csv", levels=["a", "b"], count=["n"], group=None, areas_path="areas.csv",
                          lists_all_areas=False, mechanism="topdown_linf", definition="pure", value=1.0, delta=None,
                          split="custom", weights=[1.0, 2.5], neighbour="replace", order="descending", sets_path=None,
                          sets_weight=None)
    # a config next to its files: the paths are taken from its folder
    (tmp_path / "h.toml").write_text(hi.to_toml(), "utf-8")
    loaded = ReleaseSpec.from_toml(tmp_path / "h.toml")
    assert loaded.input["path"] == str(tmp_path / "t.csv") and loaded.input["areas"] == str(tmp_path / "areas.csv")
    assert "--split=1.0,2.5" in loaded.to_argv() and "--neighbour=replace" in loaded.to_argv()


def test_census_and_od_configs_round_trip(tmp_path: Path) -> None:
    pv = census_config(input_path="table.csv", levels=["state", "county"], count="pop", ordinals=["age"],
                       ordinal_orders={"age": ["0-17", "18-64", "65+"]}, areas_path="areas.csv", mechanism="privelet",
                       definition="pure", value=np.float64(0.5), plus=["age"])
    assert ReleaseSpec.from_toml(pv.to_toml(header="written by the app")) == pv
    assert pv.to_argv() == [
        "release", "census", "--input=table.csv", "--levels=state,county", "--count=pop", "--ordinal", "age",
        "--ordinal-order", "age=0-17|18-64|65+", "--areas=areas.csv", "--plus", "age",
        "--epsilon=0.5", "--budget-db", "--out=release"]
    mx = census_config(input_path="table.csv", levels=["state", "county"], count=None, ordinals=["age"],
                       ordinal_orders=None, areas_path=None, mechanism="matrix", definition="zcdp", value=0.1,
                       marginals="county*age;age", geo_level="county")
    assert ReleaseSpec.from_toml(mx.to_toml()) == mx
    assert "--marginals=county*age;age" in mx.to_argv() and "--rho=0.1" in mx.to_argv()
    assert (mx.mechanism_name, mx.budget_definition, mx.budget_value) == ("matrix", "zcdp", 0.1)

    od = od_config(input_path="trips.csv", hierarchy_path="blocks.csv", code_column="GEOID",
                   prefix_lengths=[2, 5, 11], origin="h_geocode", destination="w_geocode", count="S000",
                   definition="zcdp", value=0.3, delta=1e-8, split="custom", weights=[1, 2], neighbour="add_remove")
    (tmp_path / "od.toml").write_text(od.to_toml(), "utf-8")
    loaded = ReleaseSpec.from_toml(tmp_path / "od.toml")
    assert loaded.input_path == str(tmp_path / "trips.csv") and loaded.domain["hierarchy"] == str(tmp_path / "blocks.csv")
    assert ReleaseSpec.from_toml(od.to_toml()) == od
    assert od.to_argv() == [
        "release", "od", "--input=trips.csv", "--origin=h_geocode", "--destination=w_geocode", "--count=S000",
        "--hierarchy=blocks.csv", "--code-column=GEOID", "--prefix-lengths=2,5,11", "--delta=1e-08", "--rho=0.3",
        "--neighbour=add_remove", "--split=1.0,2.0", "--budget-db", "--out=release"]
    pure = od_config(input_path="trips.csv", hierarchy_path="areas.csv", levels=["state", "county"], user="person",
                     max_trips=3, definition="pure", value=1.0, mechanism="tda_l2")
    assert ReleaseSpec.from_toml(pure.to_toml()) == pure
    assert (pure.budget_definition, pure.budget_value, pure.mechanism_name) == ("pure", 1.0, "tda_l2")
    assert {"--pure", "--max-trips=3", "--user=person", "--levels=state,county"} <= set(pure.to_argv())
    assert pure.budget_store == {"db": True}


def test_unknown_keys_and_opting_out_are_refused() -> None:
    with pytest.raises(ParameterError, match=r"\[input\] colour .* Options are: .*lat"):
        ReleaseSpec.from_toml('release = "points"\n[input]\ncolour = "red"\n')
    with pytest.raises(ParameterError, match="always accounted"):
        ReleaseSpec.from_toml('release = "od"\n[budget]\nno_budget = true\n')
    with pytest.raises(ParameterError, match="on or off"):
        ReleaseSpec.from_toml('release = "od"\n[input]\nrepeats = "yes"\n')
    # a key outside its own section still names its option, as configs always could
    assert ReleaseSpec.from_toml('release = "od"\n[options]\nlevels = "a,b"\n').domain["levels"] == ("a", "b")
