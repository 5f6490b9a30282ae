"""The O/D mechanisms in the catalogue: one module each under dpcore/flows/mechanisms/, named after
the mechanism, whose class declares its own parameters, privacy definitions and guarantees; a
mechanism releases only the plans it made."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pandas as pd
import pytest
from od_testing import make_states

from dpcore import catalog
from dpcore.core.mechanism import Mechanism
from dpcore.errors import ParameterError
from dpcore.flows import mechanisms as package
from dpcore.flows.counts import ODCounts
from dpcore.flows.mechanisms.base import ODMechanism
from dpcore.privacy import budget
from dpcore.privacy.noise import NoiseSource

SHARED = {"__init__", "base", "common"}  # the package's shared modules: no mechanism of their own
OWN = ("name", "title", "summary", "when_to_use", "reference", "params", "definitions")


def _class_assignments(cls: type) -> set[str]:
    """The names assigned in the body of ``cls`` as written in its module's source."""
    tree = ast.parse(inspect.getsource(inspect.getmodule(cls)))
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__).body
    names: set[str] = set()
    for node in body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for t in targets:
            names |= {e.id for e in ast.walk(t) if isinstance(e, ast.Name)}
    return names


@pytest.mark.parametrize("name", catalog.names("od"))
def test_every_od_mechanism_is_defined_and_declares_its_params_in_its_own_module(name: str) -> None:
    mech = catalog.get("od", name)
    cls = type(mech)
    assert isinstance(mech, ODMechanism) and isinstance(mech, Mechanism) and mech.kind == "od"
    assert cls.__module__ == f"dpcore.flows.mechanisms.{name}"
    assert Path(inspect.getfile(cls)).parent == Path(package.__file__).parent
    declared = _class_assignments(cls)
    assert set(OWN) <= declared, f"{cls.__name__} does not declare {sorted(set(OWN) - declared)} in its module"
    assert set(OWN) <= set(vars(cls))
    assert mech.params and all(p.name for p in mech.params)


def test_every_mechanism_module_of_the_package_is_in_the_catalogue() -> None:
    modules = {p.stem for p in Path(package.__file__).parent.glob("*.py")} - SHARED
    assert modules == set(catalog.names("od"))
    assert len({type(catalog.get("od", n)) for n in catalog.names("od")}) == len(modules)


def test_a_mechanism_refuses_to_release_another_mechanisms_plan() -> None:
    h = make_states()
    c = ODCounts.from_frame(pd.DataFrame({"o": ["0101"], "d": ["0201"]}), h, origin="o", destination="d")
    p = catalog.get("od", "tda_l2").plan_tree(h, h, budget.zcdp(0.5))
    with pytest.raises(ParameterError, match="plan is for O/D mechanism 'tda_l2', not 'inftda'"):
        catalog.get("od", "inftda").release_tree(c, p, NoiseSource(1))
    assert p.made_by is catalog.get("od", "tda_l2")
