"""The registry (dpcore.core.registry) and the full catalogue (dpcore.catalog)."""

from __future__ import annotations

import json

import pytest

from dpcore import catalog
from dpcore.core.mechanism import Mechanism
from dpcore.core.registry import Registry
from dpcore.errors import ParameterError


def test_every_kind_and_every_existing_mechanism_is_listed() -> None:
    assert catalog.kinds() == ["points", "hierarchy", "census", "od"]
    assert catalog.names("points") == ["htf", "privtree", "dawa", "dawa_free", "ag", "ag_pool", "ag_pool_smooth", "privtree_ag", "ug",
                                       "quadtree",
                                       "kdtree", "privelet",
                                       "matrix", "identity", "uniform", "auto"]
    assert catalog.names("hierarchy") == ["exact", "topdown_linf", "topdown_l2", "hay", "matrix", "bottom_up",
                                          "independent", "dpc_approx"]
    assert catalog.names("census") == ["privelet", "matrix"]
    assert catalog.names("od") == ["inftda", "tda_l2", "tda_linf_milp", "vanilla_gauss", "sh"]
    assert len(catalog.REGISTRY) == sum(len(catalog.names(k)) for k in catalog.kinds())
    assert all(isinstance(m, Mechanism) for m in catalog.REGISTRY)


def test_get_normalises_names() -> None:
    assert catalog.get("hierarchy", "TopDown-L2").name == "topdown_l2"
    assert catalog.get("Points", " HTF ").name == "htf"


def test_unknown_name_lists_the_available_ones() -> None:
    with pytest.raises(ParameterError, match=r"Unknown od mechanism 'bogus'\. Available: inftda, tda_l2"):
        catalog.get("od", "bogus")
    with pytest.raises(ParameterError, match=r"Unknown kind of data 'rasters'\. Available: points, hierarchy, census, od"):
        catalog.get("rasters", "htf")
    with pytest.raises(ParameterError, match="Unknown kind"):
        catalog.names("rasters")


def test_same_name_in_two_kinds_is_two_mechanisms() -> None:
    assert catalog.get("points", "matrix") is not catalog.get("hierarchy", "matrix")
    assert catalog.get("census", "matrix").kind == "census"


def test_duplicate_registration_refused() -> None:
    reg = Registry()
    m = catalog.get("points", "ug")
    reg.register(m)
    with pytest.raises(ParameterError, match="already registered"):
        reg.register(m)


def test_describe_all_is_json() -> None:
    d = catalog.describe_all()
    assert list(d) == catalog.kinds()
    json.dumps(d)
    for kind, rows in d.items():
        assert [r["name"] for r in rows] == catalog.names(kind)
        assert all({"title", "summary", "definitions", "params"} <= set(r) for r in rows)
