"""The one mechanism interface (dpcore.core.mechanism) over every registered mechanism of every kind."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcore import catalog
from dpcore.areas import area_sets, census_tables
from dpcore.areas.counts import HierarchyCounts
from dpcore.core.mechanism import KindRelease, Mechanism, Param, Plan, PlanRow, Release
from dpcore.core.record import validate_record
from dpcore.core.review import level_guidance
from dpcore.data import synthetic
from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import ParameterError
from dpcore.flows.counts import ODCounts
from dpcore.flows.tree import hierarchy_from_prefixes
from dpcore.privacy.budget import PrivacyCost, pure, zcdp
from dpcore.privacy.noise import NoiseSource
from dpcore.privacy.units import Unit

ALL = [(m.kind, m.name) for m in catalog.REGISTRY]
ACCOUNTABLE = [(m.kind, m.name) for m in catalog.REGISTRY if m.definitions]
SHARED_KEYS = {"schema", "software", "release_id", "created", "kind", "mechanism", "privacy", "plan", "notes",
               "ledger"}


# ---------------------------------------------------------------------------------------------
# tiny public domains (built without data) and tiny aggregates
# ---------------------------------------------------------------------------------------------

GRID = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 8, 8)
TREE = pd.DataFrame({"state": ["01", "01", "02", "02", "02"], "county": ["001", "002", "001", "002", "003"]})
LEVELS = ["state", "county"]


def _hierarchy() -> Hierarchy:
    return Hierarchy.from_frame(TREE, LEVELS)


def _census_table() -> census_tables.CensusTable:
    df = synthetic.synthetic_census(n_states=2, counties_per_state=2, tracts_per_county=2, age_bands=True)
    return census_tables.CensusTable.from_frame(df, ["state", "county", "tract"], "population", ordinals=["age_band"])


def _od_domain() -> Hierarchy:
    return hierarchy_from_prefixes(["0101", "0102", "0201", "0202", "0203"], [2, 4], ["state", "county"])


class Case:
    """Public domain + public inputs + unit + a budget, and a factory of the tiny aggregate."""

    def __init__(self, domain: Any, aggregate: Callable[[], Any], budget: PrivacyCost,
                 unit: Unit | None = None, **public: Any) -> None:
        self.domain, self.aggregate, self.budget, self.unit, self.public = domain, aggregate, budget, unit, public


def case(kind: str, name: str) -> Case:
    if kind == "points":
        counts = np.random.default_rng(0).poisson(3, (8, 8)).astype(np.int64)
        return Case(GRID, lambda: Aggregate(GRID, counts, 0, 0, 1, None), pure(1.0), Unit(), n_estimate=200.0)
    if kind == "hierarchy":
        h = _hierarchy()
        if name == "dpc_approx":
            df = TREE.assign(s1=[3, 1, 0, 2, 5], s2=[1, 0, 2, 1, 0])
            return Case(h, lambda: HierarchyCounts.from_frame(df, h, LEVELS, ["s1", "s2"]), pure(1.0),
                        Unit("person"), statistic="group_sizes", k=2)
        budget = zcdp(0.5) if name == "matrix" else pure(1.0)
        return Case(h, lambda: HierarchyCounts.from_frame(TREE.assign(n=[5, 3, 0, 7, 2]), h, LEVELS, "n"),
                    budget, Unit("person"))
    if kind == "census":
        t = _census_table()
        return Case(t.structure, lambda: t, pure(1.0) if name == "privelet" else zcdp(0.5), Unit("person"))
    h = _od_domain()
    trips = pd.DataFrame({"o": ["0101", "0201", "0203", "0101"] * 3, "d": ["0202", "0102", "0101", "0203"] * 3})
    return Case(h, lambda: ODCounts.from_frame(trips, h, origin="o", destination="d"), zcdp(0.5),
                Unit("person", neighbour="replace"))


def _plan(m: Mechanism, c: Case, params: dict | None = None) -> Plan:
    return m.plan(c.domain, c.budget, params, unit=c.unit, **c.public)


# ---------------------------------------------------------------------------------------------
# every registered mechanism
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "name"), ACCOUNTABLE)
def test_plan_is_data_free_and_costs_the_budget(kind: str, name: str) -> None:
    m = catalog.get(kind, name)
    c = case(kind, name)
    p = _plan(m, c)  # the domain and public inputs only: no aggregate exists yet
    assert isinstance(p, Plan) and (p.kind, p.mechanism) == (kind, name)
    assert p.rows and all(isinstance(r, PlanRow) for r in p.rows)
    assert p.cost == c.budget == m.cost(c.budget, p.params)
    asked = c.unit or Unit()
    if c.public.get("statistic") == "group_sizes":  # the number of groups is public: charged as replace-one
        asked = Unit(asked.entity, asked.cap, neighbour="replace")
    assert p.unit == asked
    assert p.label and isinstance(p.label, str)
    d = p.details()
    assert (d["kind"], d["mechanism"]) == (kind, name) and "params" in d
    json.dumps(d)
    json.dumps([r.to_dict() for r in p.rows])
    assert p.inner is not None


@pytest.mark.parametrize(("kind", "name"), ACCOUNTABLE)
def test_release_from_plan_and_record_envelope(kind: str, name: str) -> None:
    m = catalog.get(kind, name)
    c = case(kind, name)
    p = _plan(m, c)
    rel = m.release(p, c.aggregate(), NoiseSource(7))
    assert isinstance(rel, Release) and isinstance(rel, KindRelease)
    assert (rel.kind, rel.mechanism, rel.cost, rel.plan) == (kind, name, c.budget, p)
    assert rel.inner.release_id == rel.release_id  # the kind's release carries the envelope's id
    rec = rel.record()
    assert SHARED_KEYS <= set(rec)
    validate_record(rec)  # the envelope and, through it, the body schema of the kind and mechanism
    assert (rec["release_id"], rec["created"]) == (rel.release_id, rel.created)
    assert rec["mechanism"]["name"] == name and m.reference in rec["mechanism"]["reference"]
    assert rec["privacy"]["cost"]["value"] == c.budget.value
    assert rec["ledger"]["accounted"] is False
    assert rec["plan"] == json.loads(json.dumps(p.rows_dict()))  # the rows of the plan it was made from
    # the record is exactly what release.json holds (one builder for both)
    files = rel.files()
    written = json.loads(files["release.json"])  # plus the "use at level L" guidance from the published table
    assert written.pop("level_guidance", None) == level_guidance(files.get("release.csv"))
    assert written == rec


@pytest.mark.parametrize(("kind", "name"), ALL)
def test_unknown_params_refused(kind: str, name: str) -> None:
    m = catalog.get(kind, name)
    with pytest.raises(ParameterError, match="has no parameter 'no_such_param'"):
        m.resolve_params({"no_such_param": 1})
    with pytest.raises(ParameterError, match="no parameter"):
        m.plan(case(kind, name).domain, pure(1.0), {"no_such_param": 1})


@pytest.mark.parametrize(("kind", "name"), ACCOUNTABLE)
def test_unknown_public_input_refused(kind: str, name: str) -> None:
    with pytest.raises(ParameterError, match="no public input 'colour'"):
        catalog.get(kind, name).plan(case(kind, name).domain, pure(1.0), colour="red")


@pytest.mark.parametrize(("kind", "name"), ALL)
def test_unsupported_definition_refused(kind: str, name: str) -> None:
    m = catalog.get(kind, name)
    for definition, budget in (("pure", pure(1.0)), ("zcdp", zcdp(0.5))):
        if definition in m.definitions:
            assert m.cost(budget) == budget
        else:
            with pytest.raises(ParameterError):
                m.cost(budget)
            with pytest.raises(ParameterError):
                m.plan(case(kind, name).domain, budget)


def test_pure_only_mechanisms_say_so() -> None:
    with pytest.raises(ParameterError, match="defined for pure ε-DP only"):
        catalog.get("census", "privelet").cost(zcdp(0.5))
    pure_points = [m for m in catalog.REGISTRY if m.kind == "points" and m.definitions == ("pure",)]
    for m in pure_points:
        with pytest.raises(ParameterError, match="defined for pure ε-DP only"):
            m.cost(zcdp(0.5))


def test_sh_is_listed_but_its_cost_refused_with_the_pipeline_message() -> None:
    sh = catalog.get("od", "sh")
    assert sh.definitions == ()
    with pytest.raises(ParameterError, match=r"is \(ε, δ\)-DP; its cost cannot be added to a pure-ε or zCDP budget"):
        sh.cost(zcdp(0.5))
    with pytest.raises(ParameterError, match="Use InfTDA"):
        sh.plan(_od_domain(), pure(1.0))


# ---------------------------------------------------------------------------------------------
# plans meet their release
# ---------------------------------------------------------------------------------------------


def test_bare_number_is_epsilon() -> None:
    p = catalog.get("points", "ug").plan(GRID, 0.5, n_estimate=100.0)
    assert p.cost == pure(0.5)


def test_release_refuses_another_mechanisms_plan() -> None:
    c = case("points", "ug")
    p = _plan(catalog.get("points", "ug"), c)
    with pytest.raises(ParameterError, match="not points mechanism 'identity'"):
        catalog.get("points", "identity").release(p, c.aggregate(), NoiseSource(0))


def test_points_release_refuses_another_unit_or_grid() -> None:
    m = catalog.get("points", "identity")
    c = case("points", "identity")
    capped = m.plan(GRID, pure(1.0), unit=Unit("person", cap=3))
    assert capped.rows[0].sensitivity == 3
    with pytest.raises(ParameterError, match="capped at 1"):
        m.release(capped, c.aggregate(), NoiseSource(0))
    other = m.plan(Grid(Bounds(0.0, 0.0, 1.0, 1.0), 4, 4), pure(1.0))
    with pytest.raises(ParameterError, match="another grid"):
        m.release(other, c.aggregate(), NoiseSource(0))
    with pytest.raises(ParameterError, match="add/remove"):
        m.plan(GRID, pure(1.0), unit=Unit(neighbour="replace"))


def test_hierarchy_unit_sets_the_neighbours() -> None:
    m = catalog.get("hierarchy", "exact")
    h = _hierarchy()
    add = m.plan(h, pure(1.0), unit=Unit("person"))
    rep = m.plan(h, pure(1.0), unit=Unit("person", neighbour="replace"))
    assert (add.inner.neighbour, rep.inner.neighbour) == ("add_remove", "replace")
    assert rep.rows[0].cost is None  # the total is public under replace-one: not measured
    assert rep.rows[1].sensitivity == 2 * add.rows[1].sensitivity
    with pytest.raises(ParameterError, match="cap of 3"):
        m.plan(h, pure(1.0), unit=Unit("person", cap=3))


def test_hierarchy_release_refuses_other_counts() -> None:
    m = catalog.get("hierarchy", "exact")
    c = case("hierarchy", "dpc_approx")
    p = m.plan(c.domain, pure(1.0), unit=Unit("person"))  # planned for counts, given group sizes
    with pytest.raises(ParameterError, match="plan again"):
        m.release(p, c.aggregate(), NoiseSource(0))


def test_hierarchy_params_are_declared_and_checked() -> None:
    m = catalog.get("hierarchy", "topdown_linf")
    assert {p.name for p in m.params} == {"split", "weights", "order"}
    with pytest.raises(ParameterError, match="must be one of"):
        m.resolve_params({"order": "random"})
    p = m.plan(_hierarchy(), zcdp(0.5), {"split": "custom", "weights": "1,2,3"})
    assert p.params["weights"] == (1.0, 2.0, 3.0)
    assert [r.cost.value for r in p.rows] == pytest.approx([0.5 / 6, 1.0 / 6, 0.25])  # ρ split 1:2:3
    with pytest.raises(ParameterError, match="needs 3 weights"):
        m.plan(_hierarchy(), zcdp(0.5), {"split": "custom", "weights": [1.0]})


def test_hierarchy_matrix_uses_its_plan_and_area_sets() -> None:
    m = catalog.get("hierarchy", "matrix")
    h = _hierarchy()
    sets = area_sets.read_area_sets(pd.DataFrame({"query": ["a", "a"], "area": ["01/001", "02/003"]}), h)
    p = m.plan(h, zcdp(0.5), unit=Unit("person"), area_sets=sets)
    assert p.details()["area_sets"] == 1 and all(r.cost is None for r in p.rows)
    counts = HierarchyCounts.from_frame(TREE.assign(n=[5, 3, 0, 7, 2]), h, LEVELS, "n")
    rel = m.release(p, counts, NoiseSource(1))
    assert rel.inner.plan is p.inner  # released from the plan, not re-planned
    with pytest.raises(ParameterError, match="matrix mechanism only"):
        catalog.get("hierarchy", "hay").plan(h, pure(1.0), area_sets=sets)


def test_census_marginals_release_from_its_plan() -> None:
    m = catalog.get("census", "matrix")
    t = _census_table()
    p = m.plan(t.structure, zcdp(0.5), {"level": "county", "marginals": "county*age_band;age_band"})
    assert [r.name for r in p.rows] == ["county × age_band", "age_band"]
    rel = m.release(p, t, NoiseSource(3))
    assert rel.inner.plan is p.inner
    assert p.params["level"] == "county"


def test_census_privelet_release_id_is_random_not_a_data_hash() -> None:
    m = catalog.get("census", "privelet")
    t = _census_table()
    p = m.plan(t.structure, pure(1.0), {"plus_axes": "age_band"})
    assert p.label == "census release (Privelet+)"
    ids = {m.release(p, t, NoiseSource(5)).release_id for _ in range(3)}
    assert len(ids) == 3
    with pytest.raises(ParameterError):
        m.plan(t.structure, pure(1.0), {"plus_axes": "shoe_size"})


def test_od_unit_sets_neighbours_and_cap() -> None:
    m = catalog.get("od", "inftda")
    h = _od_domain()
    p = m.plan(h, zcdp(0.5), unit=Unit("person", cap=2))
    assert (p.inner.neighbour, p.inner.max_trips) == ("add_remove", 2)
    trips = pd.DataFrame({"o": ["0101"], "d": ["0202"]})
    counts = ODCounts.from_frame(trips, h, origin="o", destination="d")  # one trip per person
    with pytest.raises(ParameterError, match="plan again"):
        m.release(p, counts, NoiseSource(0))
    seen: list[float] = []
    rel = m.release(m.plan(h, zcdp(0.5), unit=Unit("person")), counts, NoiseSource(0),
                    progress=lambda f, msg: seen.append(f))
    assert seen and rel.inner.consistent


def test_describe_lists_definitions_and_params() -> None:
    d = catalog.get("points", "htf").describe()
    assert d["kind"] == "points" and d["definitions"] and d["params"]
    assert catalog.get("od", "sh").describe()["privacy"] == "not accountable"


def test_param_list_of_numbers() -> None:
    p = Param("weights", "Weights", tuple, (), "One per level.", item=float)
    assert p.convert([1, "2"]) == (1.0, 2.0)
    assert p.convert("") == ()
    with pytest.raises(ParameterError, match="must be a list of numbers"):
        p.convert("1,x")
    with pytest.raises(ParameterError, match="must be a list of numbers"):
        p.convert("1,nan")
