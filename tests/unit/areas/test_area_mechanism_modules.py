"""Every areas mechanism (kinds ``hierarchy`` and ``census``) is a class of its own module under
dpcore/areas/mechanisms/, declaring its parameters and guarantees there (issue 23, items 4-5)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from dpcore import catalog
from dpcore.core.mechanism import Mechanism

PACKAGE = Path(__file__).resolve().parents[3] / "dpcore" / "areas" / "mechanisms"
AREAS = [(kind, name) for kind in ("hierarchy", "census") for name in catalog.names(kind)]


def _module_file(kind: str, name: str) -> str:
    return f"{name}.py" if kind == "hierarchy" else f"census_{name}.py"


@pytest.mark.parametrize(("kind", "name"), AREAS)
def test_each_mechanism_is_defined_in_its_own_module(kind: str, name: str) -> None:
    m = catalog.get(kind, name)
    cls = type(m)
    assert isinstance(m, Mechanism)
    assert Path(inspect.getsourcefile(cls)) == PACKAGE / _module_file(kind, name)
    assert cls.__module__ == f"dpcore.areas.mechanisms.{_module_file(kind, name)[:-3]}"
    assert vars(m) == {}  # no adapter filled in per instance: everything is the class's


@pytest.mark.parametrize(("kind", "name"), AREAS)
def test_each_mechanism_declares_its_params_and_description_in_its_class(kind: str, name: str) -> None:
    cls = type(catalog.get(kind, name))
    declared = vars(cls)
    for attr in ("name", "title", "summary", "when_to_use", "reference", "params"):
        assert attr in declared, f"{cls.__name__} does not declare {attr}"
    assert declared["name"] == name
    assert all(p.name for p in declared["params"])
    if kind == "hierarchy":  # what it guarantees, as class attributes, not a table of booleans
        for attr in ("consistent", "integral", "nonnegative", "counts", "group_sizes", "default_definition"):
            assert attr in declared, f"{cls.__name__} does not declare {attr}"


def test_one_module_per_mechanism_and_no_other_registry() -> None:
    modules = [type(catalog.get(k, n)).__module__ for k, n in AREAS]
    assert len(set(modules)) == len(modules)
    import dpcore.areas.kind as kind_module
    import dpcore.areas.tree_plans as tree_plans

    for gone in ("MECHANISMS", "get", "HierMechanismInfo"):
        assert not hasattr(tree_plans, gone)
        assert not hasattr(kind_module, gone)
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == sorted(
        ["__init__.py", "tree.py", *(_module_file(k, n) for k, n in AREAS)])
