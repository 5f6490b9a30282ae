"""The session and the budget it owns: keys, units of privacy, populations, cap events, times, files."""

from __future__ import annotations

import json
import re
import sqlite3
import stat
from pathlib import Path

import numpy as np
import pytest
from points_helpers import plan_points

from dpcore import pipeline
from dpcore.areas.unit import hierarchy_unit
from dpcore.core.session import Charge, JsonLedger, Session, default_cap
from dpcore.data.domain import Bounds, Grid, aggregate_points
from dpcore.errors import BudgetError, DPCoreError
from dpcore.flows.unit import od_unit
from dpcore.privacy.budget import pure, zcdp
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.ledger_store import KEY_PREFIX, LedgerStore
from dpcore.privacy.noise import NoiseSource
from dpcore.privacy.units import Unit, group_factor

MINUTE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d\+00:00$")


def _store(tmp_path: Path) -> LedgerStore:
    return LedgerStore(tmp_path / "budget" / "ledger.sqlite")


def _run(session: Session, ledger: Ledger, cost, unit: Unit | None = None) -> str:
    return session.release(ledger, Charge(cost, "test", {"m": 1}, unit), lambda: "out")


# -- units of privacy ---------------------------------------------------------------------------
def test_same_unit_is_charged_as_it_is() -> None:
    assert group_factor(Unit("record"), Unit("record")) == 1
    # the cap is enforced inside every release: persons are protected whatever the cap
    assert group_factor(Unit("person", cap=5), Unit("person", cap=2)) == 1


def test_a_record_level_release_is_refused_on_a_person_budget() -> None:
    led = Ledger(pure(1.0), unit=Unit("person", cap=3))
    with pytest.raises(BudgetError, match="protected by nothing"):
        _run(Session.unaccounted(), led, pure(0.1), Unit("record"))
    assert led.spent == 0 and not led.entries
    with pytest.raises(BudgetError, match="protected by nothing"):
        Ledger(pure(1.0), unit=Unit("group")).check(pure(0.1), Unit("record"))


def test_a_person_release_on_a_record_budget_pays_for_a_group_of_two() -> None:
    led = Ledger(pure(1.0), unit=Unit("record"))
    _run(Session.unaccounted(), led, pure(0.2), Unit("person", cap=4))
    assert led.spent == pytest.approx(0.4)
    assert led.entries[0].group == 2 and led.entries[0].unit == Unit("person", cap=4)
    z = Ledger(zcdp(1.0), unit=Unit("record"))
    _run(Session.unaccounted(), z, zcdp(0.1), Unit("group"))
    assert z.spent == pytest.approx(0.4)  # ρ·g² (Bun & Steinke 2016, Prop. 1.9)


def test_neighbours_replace_one_on_add_remove_is_refused_and_the_reverse_pays_double() -> None:
    with pytest.raises(BudgetError, match="total is public"):
        Ledger(pure(1.0), unit=Unit()).check(pure(0.1), Unit(neighbour="replace"))
    led = Ledger(pure(1.0), unit=Unit(neighbour="replace"))
    _run(Session.unaccounted(), led, pure(0.1), Unit())
    assert led.spent == pytest.approx(0.2)


def test_person_and_group_do_not_mix() -> None:
    with pytest.raises(BudgetError, match="neither contains"):
        group_factor(Unit("group"), Unit("person", cap=2))


def test_a_budget_without_a_unit_takes_its_first_releases_unit() -> None:
    led = Ledger(pure(1.0))
    assert led.unit is None
    _run(Session.unaccounted(), led, pure(0.1), Unit("person", cap=2))
    assert led.unit == Unit("person", cap=2)
    with pytest.raises(BudgetError, match="protected by nothing"):
        _run(Session.unaccounted(), led, pure(0.1), Unit("record"))
    back = Ledger.from_dict(json.loads(json.dumps(led.to_dict())))
    assert back.unit == Unit("person", cap=2) and back.entries[0].unit == Unit("person", cap=2)


def test_a_stored_budget_keeps_its_unit_across_processes(tmp_path: Path) -> None:
    store = _store(tmp_path)
    s = Session(store)
    led = s.budget("points", "fp", default=pure(1.0))
    _run(s, led, pure(0.1), Unit("person", cap=3))
    again = Session(LedgerStore(store.path)).budget("points", "fp", default=pure(1.0))
    assert again.unit == Unit("person", cap=3)
    with pytest.raises(BudgetError, match="protected by nothing"):
        _run(s, again, pure(0.1), Unit("record"))
    assert again.spent == pytest.approx(0.1)


# -- keys -------------------------------------------------------------------------------------
def test_keys_are_keyed_hashes_with_a_private_secret(tmp_path: Path) -> None:
    store = _store(tmp_path)
    key = store.key("points", "abc")
    assert key.startswith(KEY_PREFIX) and len(key) == len(KEY_PREFIX) + 64  # an HMAC, not the fingerprint
    assert LedgerStore(store.path).key("points", "abc") == key  # the secret persists beside the database
    other = LedgerStore(tmp_path / "other.sqlite")
    assert other.key("points", "abc") != key  # another install, another secret
    assert store.key("flows", "abc") != key  # kinds never share a key by accident
    for f in (store.path, store.path.with_name(store.path.name + ".key")):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600


def test_an_existing_database_file_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    sqlite3.connect(path).close()
    path.chmod(0o644)
    LedgerStore(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_budget_under_an_earlier_plain_key_moves_to_its_keyed_name(tmp_path: Path) -> None:
    store = _store(tmp_path)
    old = store.ledger("points:fp", pure(1.0), "points")
    _run(Session.unaccounted(), old, pure(0.3))
    store.record_release("points:fp", "r1", "points", {"m": "x"}, {"a.csv": b"1"})
    led = Session(store).budget("points", "fp", default=pure(1.0))
    assert led.spent == pytest.approx(0.3)  # not a fresh budget
    assert not store.has_ledger("points:fp")
    assert [r["release_id"] for r in store.releases(led.dataset)] == ["r1"]


@pytest.mark.parametrize(("kind", "earlier"), [("areas", "census"), ("flows", "od")])
def test_a_budget_under_an_earlier_key_kind_moves_to_the_kind_of_data(tmp_path: Path, kind: str, earlier: str) -> None:
    """Area data was keyed 'census' and trips 'od' by earlier versions: opened under the kind of data,
    the budget is found with its spends and releases, and the old key is gone (never two budgets)."""
    store = _store(tmp_path)
    old_key = store.key(earlier, "fp")
    old = store.ledger(old_key, pure(1.0), earlier)
    _run(Session.unaccounted(), old, pure(0.3))
    _run(Session.unaccounted(), old, pure(0.2))
    store.record_release(old_key, "r1", earlier, {"mechanism": "x"}, {"a.csv": b"1"})
    led = Session(store).budget(kind, "fp", default=pure(1.0))
    assert led.dataset == store.key(kind, "fp")
    assert led.spent == pytest.approx(0.5) and [e.cost.value for e in led.entries] == [0.3, 0.2]
    assert not store.has_ledger(old_key)
    assert [r["release_id"] for r in store.releases(store.budget_key(kind, "fp"))] == ["r1"]
    # a plain key of the earliest versions under the old key kind moves too
    plain = store.ledger(f"{earlier}:fp2", pure(1.0), earlier)
    _run(Session.unaccounted(), plain, pure(0.4))
    assert Session(store).budget(kind, "fp2", default=pure(1.0)).spent == pytest.approx(0.4)


def test_a_population_binding_under_an_earlier_key_kind_is_kept(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.bind(store.key("od", "fp"), "survey")
    s = Session(store)
    _run(s, s.budget("points", "p", default=pure(1.0), population="survey"), pure(0.6), PERSON)
    led = s.budget("flows", "fp", default=pure(1.0))  # found bound without naming the population
    assert led.dataset == store.population_key("survey") and led.spent == pytest.approx(0.6)
    assert store.population_name(store.data_key("flows", "fp")) == "survey"


def test_a_ledger_file_written_under_an_earlier_key_kind_keeps_working(tmp_path: Path) -> None:
    s = Session(_store(tmp_path))
    path = tmp_path / "ledger.json"
    old = JsonLedger.open(path, s.key("census", "fp"), pure(1.0))
    _run(s, old, pure(0.3))
    led = s.json_budget(path, "areas", "fp", default=pure(1.0))
    assert led.spent == pytest.approx(0.3) and led.dataset == s.key("areas", "fp")
    _run(s, led, pure(0.1))
    assert json.loads(path.read_text())["dataset"] == s.key("areas", "fp")  # saved under the new key
    with pytest.raises(BudgetError, match="other data"):  # still tied to its data
        s.json_budget(path, "areas", "other", default=pure(1.0))


# -- populations ----------------------------------------------------------------------------------
#: A population's budget protects persons (issue 26 item 15): its releases name a person unit.
PERSON = Unit("person", cap=3)


def test_a_population_budget_takes_person_or_group_releases_only(tmp_path: Path) -> None:
    """A record-level release is refused on a named population's budget, whether it would open the
    population (before anything is created) or is charged to one that exists."""
    s = Session(_store(tmp_path))
    with pytest.raises(BudgetError, match="person or group unit"):
        s.budget("areas", "t", default=pure(1.0), unit=Unit("record"), population="survey")
    assert not s.store.is_population(s.store.population_key("survey"))
    led = s.budget("points", "p", default=pure(1.0), population="survey")
    with pytest.raises(BudgetError, match="person or group unit"):
        _run(s, led, pure(0.2))  # a charge naming no unit is record-level
    assert led.spent == 0
    _run(s, led, pure(0.2), Unit("person"))
    table = s.budget("areas", "t", default=pure(1.0), unit=Unit("person"), population="survey")
    _run(s, table, pure(0.2), Unit("person"))
    assert led.spent == pytest.approx(0.4)


def test_data_bound_to_one_population_draw_on_one_budget(tmp_path: Path) -> None:
    s = Session(_store(tmp_path))
    pts = s.budget("points", "p-fp", default=pure(1.0), population="survey 2026")
    od = s.budget("flows", "o-fp", default=pure(1.0), population="survey 2026")
    _run(s, pts, pure(0.6), PERSON)
    with pytest.raises(BudgetError, match="Not enough privacy budget"):
        _run(s, od, pure(0.6), PERSON)
    _run(s, od, pure(0.4), PERSON)
    # once bound, the data finds the population's budget without naming it
    assert s.budget("points", "p-fp", default=pure(1.0)).spent == pytest.approx(1.0)
    # unbound data keeps a budget of its own
    assert s.budget("areas", "c-fp", default=pure(1.0)).spent == 0


def test_binding_after_a_release_or_to_a_second_population_is_refused(tmp_path: Path) -> None:
    s = Session(_store(tmp_path))
    _run(s, s.budget("points", "fp", default=pure(1.0)), pure(0.1))
    with pytest.raises(DPCoreError, match="before its first release"):
        s.budget("points", "fp", default=pure(1.0), population="survey")
    s.budget("flows", "fp2", default=pure(1.0), population="A")
    with pytest.raises(DPCoreError, match="already bound"):
        s.budget("flows", "fp2", default=pure(1.0), population="B")


# -- caps -------------------------------------------------------------------------------------------
def test_cap_changes_are_ledger_events_and_a_raise_needs_confirmation(tmp_path: Path) -> None:
    store = _store(tmp_path)
    s = Session(store)
    led = s.budget("points", "fp", default=pure(1.0))
    assert s.set_cap(led, pure(0.5)) is True  # lowering needs no confirmation
    with pytest.raises(BudgetError, match="Confirm"):
        s.set_cap(led, pure(2.0))
    assert led.cap == pure(0.5)
    assert s.set_cap(led, pure(2.0), confirm=True) is True
    assert s.set_cap(led, pure(2.0)) is False  # no change, no event
    changes = Session(LedgerStore(store.path)).budget("points", "fp", default=pure(1.0)).cap_changes
    assert [(c.old.value, c.new.value) for c in changes] == [(1.0, 0.5), (0.5, 2.0)]
    assert all(MINUTE.match(c.time) for c in changes)
    assert [c["new"]["value"] for c in led.to_dict()["cap_changes"]] == [0.5, 2.0]


def test_default_caps() -> None:
    assert default_cap(pure(0.1)) == pure(1.0)
    assert default_cap(zcdp(0.01)) == zcdp(0.5)


# -- times ------------------------------------------------------------------------------------------
def test_the_release_and_its_ledger_entry_state_one_time_to_the_minute() -> None:
    grid = Grid(Bounds(0, 0, 1, 1), 8, 8)
    agg = aggregate_points(np.array([0.1, 0.5, 0.9]), np.array([0.2, 0.5, 0.7]), grid)
    led = Ledger(pure(1.0))
    rel = pipeline.release(plan_points(agg, "identity", 0.5), agg, ledger=led, noise=NoiseSource(1)).inner
    assert MINUTE.match(led.entries[0].time)
    assert rel.created == led.entries[0].time


# -- the session's own rules -----------------------------------------------------------------------------
def test_an_accounted_session_refuses_a_release_without_a_budget(tmp_path: Path) -> None:
    with pytest.raises(BudgetError, match="no budget"):
        Session(_store(tmp_path)).release(None, Charge(pure(0.1), "x"), lambda: 1)
    assert Session.unaccounted().release(None, Charge(pure(0.1), "x"), lambda: 1) == 1


def test_nothing_runs_when_the_charge_is_refused() -> None:
    led = Ledger(pure(0.1))
    ran = []
    with pytest.raises(BudgetError):
        Session.unaccounted().release(led, Charge(pure(0.2), "x"), lambda: ran.append(1))
    assert not ran and not led.entries


def test_a_json_ledger_is_tied_to_its_data(tmp_path: Path) -> None:
    s = Session(_store(tmp_path))
    path = tmp_path / "ledger.json"
    led = s.json_budget(path, "points", "fp", default=pure(1.0))
    _run(s, led, pure(0.25))
    again = s.json_budget(path, "points", "fp", default=pure(1.0))
    assert isinstance(again, JsonLedger) and again.spent == pytest.approx(0.25)
    with pytest.raises(BudgetError, match="other data"):
        s.json_budget(path, "points", "another", default=pure(1.0))
    assert "fp" not in path.read_text()  # the file holds the keyed hash, not the fingerprint


# -- found in review: ways around the budget that are now closed ------------------------------------
def test_a_budget_opened_before_its_data_was_bound_refuses_to_spend(tmp_path: Path) -> None:
    s = Session(_store(tmp_path))
    stale = s.budget("points", "fp", default=pure(1.0))  # a tab drew its page with the data's own budget
    s.budget("points", "fp", default=pure(1.0), population="survey")  # another tab binds the data
    with pytest.raises(BudgetError, match="population 'survey'"):
        _run(s, stale, pure(0.5))
    assert stale.spent == 0
    _run(s, s.budget("points", "fp", default=pure(1.0)), pure(0.5), PERSON)  # reopened: the population's


def test_a_lost_key_file_is_refused_not_replaced(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _run(Session(store), Session(store).budget("points", "fp", default=pure(1.0)), pure(0.5))
    store.path.with_name(store.path.name + ".key").unlink()
    with pytest.raises(DPCoreError, match="key file .* is missing"):
        LedgerStore(store.path)


def test_group_size_histograms_are_charged_as_replace_one() -> None:

    assert hierarchy_unit("add_remove", "group_sizes") == Unit(neighbour="replace")
    with pytest.raises(BudgetError, match="total is public"):
        Ledger(pure(1.0), unit=Unit()).check(pure(0.1), hierarchy_unit("add_remove", "group_sizes"))


def test_a_constant_level_on_top_of_a_table_is_no_new_budget() -> None:
    import pandas as pd

    from dpcore.areas.census_tables import fingerprint

    df = pd.DataFrame({"state": ["01", "01", "02"], "county": ["001", "003", "001"], "pop": [5, 7, 9]})
    dummy = df.assign(nation="US")
    assert fingerprint(dummy, ["nation", "state", "county"], "pop") == fingerprint(df, ["state", "county"], "pop")


def test_the_refusal_of_a_group_charged_release_names_what_the_release_itself_may_ask() -> None:
    led = Ledger(pure(1.0), unit=Unit("record"))
    _run(Session.unaccounted(), led, pure(0.3), Unit("person", cap=2))  # charged 0.6
    with pytest.raises(BudgetError, match=r"group of 2.*at most ε = 0\.2\b"):
        led.check(pure(0.3), Unit("person", cap=2))  # 0.4 left: the release itself may ask for 0.2


def test_trips_with_a_person_column_protect_persons_even_at_one_trip_each() -> None:
    import pandas as pd

    from dpcore.flows.counts import ODCounts
    from dpcore.flows.tree import hierarchy_from_prefixes

    h = hierarchy_from_prefixes(["0101", "0102", "0201"], [2, 4], ["region", "zone"])
    trips = pd.DataFrame({"o": ["0101", "0102", "0201"], "d": ["0102", "0201", "0101"], "who": ["a", "b", "c"]})
    with_people = ODCounts.from_frame(trips, h, origin="o", destination="d", user="who", max_trips=1)
    without = ODCounts.from_frame(trips, h, origin="o", destination="d")
    assert with_people.persons and not without.persons
    assert od_unit("replace", with_people.max_trips, with_people.persons) == Unit(
        "person", cap=1, neighbour="replace")
    assert od_unit("replace", without.max_trips, without.persons) == Unit("record", neighbour="replace")


def test_switching_the_definition_cannot_raise_a_cap_unconfirmed(tmp_path: Path) -> None:
    s = Session(_store(tmp_path))
    led = s.budget("points", "fp", default=pure(1.0))
    assert s.set_cap(led, zcdp(0.5)) is True  # ε = 1 reads as ρ = 0.5: the same cap, no confirmation
    with pytest.raises(BudgetError, match="Confirm"):
        s.set_cap(led, pure(5.0))  # ρ = 12.5 > 0.5
    assert led.cap == zcdp(0.5)


def test_a_charge_that_names_no_unit_is_record_level() -> None:
    led = Ledger(pure(1.0), unit=Unit("person", cap=3))
    with pytest.raises(BudgetError, match="protected by nothing"):
        Session.unaccounted().release(led, Charge(pure(0.1), "no unit given"), lambda: None)


def test_one_default_release_budget_for_every_kind_is_half_the_default_cap() -> None:
    from dpcore.core.session import DEFAULT_EPSILON_CAP, DEFAULT_RHO_CAP, default_release_budget
    from dpcore.errors import ParameterError

    assert default_release_budget("pure") == DEFAULT_EPSILON_CAP / 2
    assert default_release_budget("zcdp") == DEFAULT_RHO_CAP / 2
    with pytest.raises(ParameterError, match="Unknown privacy definition"):
        default_release_budget("approx")
