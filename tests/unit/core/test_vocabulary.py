"""One neighbour vocabulary: ``add_remove`` / ``replace`` (:class:`dpcore.privacy.units.Unit`) in the
library, the app and the records; the O/D paper's ``bounded`` / ``unbounded`` only as aliases of
the command line's ``--neighbour`` (:data:`dpcore.cli.common.NEIGHBOUR_ALIASES`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dpcore.cli.common import NEIGHBOUR_ALIASES, neighbour_arg
from dpcore.cli.parser import build_parser
from dpcore.errors import ParameterError

ROOT = Path(__file__).resolve().parents[3]
#: the one module that may name the aliases
ALIAS_TABLE = ROOT / "dpcore" / "cli" / "common.py"
#: "bounded" or "unbounded" as a value (quoted), but not scipy's ``minimize_scalar(method="bounded")``
AS_VALUE = re.compile(r"""(?<!method=)["'`](un)?bounded["'`]""")


def _modules() -> list[Path]:
    files = [ROOT / "app.py"]
    for folder in ("dpcore", "ui", "pages"):
        files += sorted((ROOT / folder).rglob("*.py"))
    return [f for f in files if f != ALIAS_TABLE]


def test_no_module_but_the_cli_alias_table_names_bounded_or_unbounded_as_a_neighbour_value() -> None:
    found = [f"{f.relative_to(ROOT)}:{n}: {line.strip()}" for f in _modules()
             for n, line in enumerate(f.read_text("utf-8").splitlines(), 1) if AS_VALUE.search(line)]
    assert not found, "use add_remove / replace:\n" + "\n".join(found)
    schemas = (ROOT / "dpcore" / "schemas").glob("*.json")
    assert not [s.name for s in schemas if AS_VALUE.search(s.read_text("utf-8"))]


def test_the_check_finds_a_neighbour_value_and_passes_scipy() -> None:
    assert AS_VALUE.search('od_unit("bounded", 1)') and AS_VALUE.search("neighbour='unbounded'")
    assert not AS_VALUE.search('minimize_scalar(f, method="bounded")')
    assert not AS_VALUE.search("the paper's bounded DP")


def test_the_aliases_are_read_as_the_units_relations() -> None:
    assert NEIGHBOUR_ALIASES == {"replace": "replace", "add_remove": "add_remove",
                                 "bounded": "replace", "unbounded": "add_remove"}
    assert [neighbour_arg(v) for v in ("bounded", "unbounded", "replace", "add_remove")] == [
        "replace", "add_remove", "replace", "add_remove"]


@pytest.mark.parametrize(("form", "default"), [("od", "replace"), ("hierarchy", "add_remove")])
def test_release_neighbour_accepts_the_relations_and_the_aliases(form: str, default: str) -> None:
    parser = build_parser()
    base = ["release", form, "--input", "x.csv", "--out", "out"] + (["--hierarchy", "h.csv"] if form == "od" else ["--levels", "a,b", "--epsilon", "1"])
    assert parser.parse_args(base).neighbour == default  # the default is unchanged in meaning
    for given, meant in NEIGHBOUR_ALIASES.items():
        assert parser.parse_args([*base, "--neighbour", given]).neighbour == meant
    with pytest.raises(ParameterError, match="invalid choice: 'swap'"):
        parser.parse_args([*base, "--neighbour", "swap"])
