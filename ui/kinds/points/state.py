"""Points: the app's state of this kind, typed (as DP Wizard's ``AppState``).

The loaded points (:class:`Dataset`, or a :class:`SourceTable` preview of points that stay in
their files), the grid and the confidential frequency matrix counted over it (:func:`aggregate`),
the dataset's ledger, the releases of this session (:class:`ReleaseEntry`) and their files in the
release history.

:class:`PlanChoice` is what the curator chose on the Plan step, read back from the session without
widgets; :class:`PlannedRelease` is the one core :class:`~dpcore.core.mechanism.Plan` built from it
through the catalogue (``catalog.get("points", name).plan(grid, cost, params, unit=...)``).  The
Plan step shows that plan and the Release step releases *that* plan
(:func:`dpcore.pipeline.release`): a preview is never re-planned for the release.  The plan is kept
in the session under :data:`PLAN_KEY` and built again only when a choice changes.
"""

from __future__ import annotations

import hashlib
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import streamlit as st

from dpcore import catalog
from dpcore.core.mechanism import KindRelease, Plan
from dpcore.core.review import CV_THRESHOLD
from dpcore.data import engines, synthetic
from dpcore.data.domain import Aggregate, Bounds, Grid, aggregate_points
from dpcore.data.engines import base as engine_rules
from dpcore.data.points import DROP_UNREADABLE_COORDINATE, PointTable, load_points
from dpcore.errors import DPCoreError
from dpcore.points import diagnostics
from dpcore.points.release import PartitionRelease
from dpcore.points.unit import points_unit
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.units import Unit
from ui import state

DEFAULT_GRID = (1024, 1024)
#: the points Plan step's mechanism in a new session: auto, chosen from public inputs (issue 19, item 5)
DEFAULT_MECHANISM = "auto"


@dataclass(frozen=True, eq=False, repr=False)
class SourceTable:
    """What the pages show of points that stay in their files (a large file or folder aggregated
    by an engine): the counts of rows and the first rows, like :class:`dpcore.data.points.PointTable`, but
    no full columns.  Curator-only."""

    lon: np.ndarray  # the first rows only, for the preview
    lat: np.ndarray
    user: np.ndarray | None  # the first rows' ids, or None without a user column
    source_name: str
    lat_column: str
    lon_column: str
    user_column: str | None
    n_read: int
    dropped: dict[str, int]

    @property
    def n_kept(self) -> int:
        return self.n_read - int(sum(self.dropped.values()))

    @property
    def n_dropped(self) -> int:
        return int(sum(self.dropped.values()))


@dataclass
class Dataset:
    """A loaded points table and what the curator said about it.

    ``source``/``engine`` are set when the points stay in their files and an engine aggregates
    them (``table`` is then a :class:`SourceTable`); ``None`` for points held in memory.
    """

    name: str
    table: PointTable | SourceTable
    is_demo: bool
    fingerprint: str
    n_guess: int | None = None  # public guess of the size, for previews (demo only)
    source: engines.Source | None = None
    engine: str = "numpy"
    spark_master: str | None = None
    #: for points kept in their files: the engine's tolerant keys (every point, and those inside
    #: ``keys_bounds``, the bounds of the count that computed them; :attr:`dpcore.data.engines.PointCounts.keys`)
    keys: tuple[str, ...] = ()
    keys_bounds: Bounds | None = None


@dataclass(frozen=True, eq=False)
class ReleaseEntry:
    """A points release of this session: the envelope of :func:`dpcore.pipeline.release` (its plan is
    the Plan step's), the points' release object, and the files and figures drawn from it (a cache)."""

    envelope: KindRelease
    dataset_fingerprint: str
    exports: dict[str, Any] = field(default_factory=dict)

    @property
    def release(self) -> PartitionRelease:
        return self.envelope.inner


def fingerprint(table: PointTable) -> str:
    """Content key of the points (keys the ledger; never shown or exported).

    The engines' order-independent fingerprint (:func:`dpcore.data.engines.base.points_fingerprint`),
    so the same points uploaded here or read from their files by DuckDB or Spark share one budget.
    """
    return engine_rules.points_fingerprint(table.lon, table.lat)


def init() -> None:
    """Initialise the session once: the demo dataset is loaded so a newcomer sees a map."""
    ss = st.session_state
    if "dataset" not in ss:
        load_demo()
    ss.setdefault("bounds", synthetic.DEMO_BOUNDS)
    ss.setdefault("grid_shape", DEFAULT_GRID)
    ss.setdefault("user_cap", None)
    ss.setdefault("ledgers", {})
    ss.setdefault("releases", [])
    ss.setdefault("mechanism", DEFAULT_MECHANISM)
    ss.setdefault("mech_params", {})
    ss.setdefault("epsilon", state.DEFAULT_EPSILON)
    ss.setdefault("boundaries", None)
    ss.setdefault("boundaries_name", None)


@st.cache_resource(show_spinner=False)
def _demo_table() -> tuple[PointTable, str]:
    """The made-up demo points (seeded, the same in every session) and their fingerprint, made once per
    server (issue 28 item 5: a new session's first page made them again)."""
    table = load_points(synthetic.demo_points(), "lat", "lon", source_name=synthetic.DEMO_NAME)
    return table, fingerprint(table)


@st.cache_resource(show_spinner=False, max_entries=2)  # a 4,096² grid's counts are 134 MB
def _demo_aggregate(bounds: tuple[float, float, float, float], rows: int, cols: int) -> Aggregate:
    """The demo points counted on a grid, once per server and grid (the same made-up data for every
    session; releases read it, none changes it)."""
    table, _ = _demo_table()
    return aggregate_points(table.lon, table.lat, Grid(Bounds(*bounds), rows, cols))


@st.cache_resource(show_spinner=False, max_entries=2)
def _demo_query_truth(bounds: tuple[float, float, float, float], rows: int, cols: int) -> diagnostics.QueryTruth:
    """The curator's error queries answered on the demo's counts, once per server and grid: the demo
    points are made up and public, and their counts are already shared (:func:`_demo_aggregate`);
    a user's data is never answered here (:func:`query_truth`)."""
    truth = diagnostics.query_truth(_demo_aggregate(bounds, rows, cols))
    for a in truth:  # shared by every demo session: none may change them
        a.setflags(write=False)
    return truth


def query_truth(agg: Aggregate) -> diagnostics.QueryTruth:
    """CURATOR-ONLY: the true answers of the Release step's error queries for ``agg`` (this session's
    :func:`aggregate`), made once per aggregate: every release of the same counts reads them (on a
    4,096² grid their prefix sums were most of the step's server time after the map).  Kept in this
    session only, except for the demo's counts, which every session shares (issue 28 item 5)."""
    ss = st.session_state
    # weak references: a grid counted before (134 MB at 4,096²) is not kept alive by these marks
    demo = ss.get("aggregate_demo")  # (grid, counts) of the demo's shared counts, set by aggregate()
    if demo is not None and demo[1]() is agg:  # the very object every demo session reads
        return _demo_query_truth(*demo[0])
    kept = ss.get("_query_truth")
    if kept is None or kept[0]() is not agg:
        kept = ss["_query_truth"] = (weakref.ref(agg), diagnostics.query_truth(agg))
    return kept[1]


def load_demo() -> None:
    table, fp = _demo_table()
    set_dataset(Dataset(synthetic.DEMO_NAME, table, True, fp, synthetic.DEMO_N))
    state.mark_demo("points", st.session_state["dataset"].fingerprint)
    st.session_state["bounds"] = synthetic.DEMO_BOUNDS


def set_dataset(ds: Dataset) -> None:
    ss = st.session_state
    ss["dataset"] = ds
    ss.pop("aggregate", None)
    ss.pop("aggregate_key", None)
    ss.pop("aggregate_demo", None)  # the mark of the demo's shared counts (query_truth)


def dataset() -> Dataset:
    return st.session_state["dataset"]


def grid() -> Grid:
    rows, cols = st.session_state["grid_shape"]
    return Grid(st.session_state["bounds"], int(rows), int(cols))


def aggregate_key() -> tuple[Any, ...]:
    ss = st.session_state
    return (dataset().fingerprint, grid(), ss.get("user_cap"))


def aggregate_current() -> Aggregate | None:
    """The frequency matrix if it is counted for the current grid and cap, else None (nothing is
    computed: for points kept in their files a count is a pass over them, made on request)."""
    ss = st.session_state
    return ss.get("aggregate") if ss.get("aggregate_key") == aggregate_key() else None


def aggregate() -> Aggregate:
    """The confidential frequency matrix of this session, recomputed only when its inputs change."""
    ss = st.session_state
    ds = dataset()
    g = grid()
    cap = ss.get("user_cap")
    key = aggregate_key()
    if ss.get("aggregate_key") != key:
        t = ds.table
        demo = None  # the grid of the demo's shared counts (query_truth)
        use_user = t.user_column is not None and cap is not None
        if ds.source is not None:
            # new bounds: the keys of the points inside them come with this count (issue 26 item 12)
            pc = engine_points(ds, g, cap if use_user else None, fingerprint=ds.keys_bounds != g.bounds)
            if ds.keys_bounds != g.bounds:
                ds.keys, ds.keys_bounds = pc.keys, g.bounds
            ss["aggregate"] = pc.aggregate
        elif ds.is_demo and not use_user and ds.table is _demo_table()[0]:
            ss["aggregate"] = _demo_aggregate(g.bounds.as_tuple(), g.rows, g.cols)
            demo = ((g.bounds.as_tuple(), g.rows, g.cols), weakref.ref(ss["aggregate"]))
        else:
            assert isinstance(t, PointTable)
            ss["aggregate"] = aggregate_points(
                t.lon, t.lat, g, user=t.user if use_user else None, user_cap=cap if use_user else None
            )
        ss["aggregate_key"], ss["aggregate_demo"] = key, demo
    return ss["aggregate"]


def engine_points(ds: Dataset, g: Grid, cap: int | None,
                  columns: tuple[str, str, str | None] | None = None, fingerprint: bool = False,
                  drop_unreadable: bool | None = None) -> engines.PointCounts:
    """One pass of the dataset's engine over its files, with a progress bar (DuckDB reports its
    own progress; Spark and numpy report stages).  ``columns`` (lat, lon, user) default to the
    dataset's; the budget key (``fingerprint``) is computed only when asked, i.e. when loading.
    ``drop_unreadable`` defaults to the dataset's (rows with text coordinates were left out when
    it was counted: the Data step's button)."""
    assert ds.source is not None
    lat, lon, user = columns or (ds.table.lat_column, ds.table.lon_column, ds.table.user_column)
    if drop_unreadable is None:
        drop_unreadable = ds.table is not None and DROP_UNREADABLE_COORDINATE in ds.table.dropped
    eng = engines.get_engine(ds.engine, spark_master=ds.spark_master)
    bar = st.progress(0.0, text=f"Counting the points of {ds.name} with {ds.engine} …")
    try:
        return eng.points(ds.source, g, lat=lat, lon=lon, user=user, user_cap=cap if user else None,
                          progress=lambda f, msg: bar.progress(min(max(f, 0.0), 1.0), text=msg),
                          fingerprint=fingerprint, drop_unreadable=drop_unreadable)
    finally:
        bar.empty()



def ledger() -> Ledger:
    """The ledger of the loaded dataset (same data re-uploaded -> same ledger, in every session)."""
    ss = st.session_state
    ds = dataset()
    _adopt_tolerant_keys(ds, ss.get("bounds"))
    return state.data_ledger("points", ds.fingerprint, budget.pure(state.DEFAULT_CAP), ss["ledgers"])


def profile() -> Any:
    """The loaded points' profile for the near-identical question (:mod:`ui.near_match_ui`), or None
    for points kept in their files (an engine) and the demo."""
    ds = dataset()
    if ds.is_demo or ds.source is not None:
        return None
    from dpcore.privacy.near_match import points_profile

    t = ds.table
    return points_profile(t.lon, t.lat, (t.lat_column, t.lon_column, t.user_column))


def _adopt_tolerant_keys(ds: Dataset, bounds: Any) -> None:
    """Lead the points' rounded keys (every point, and those inside ``bounds``) to their budget, once
    per data and bounds in this session: a re-saved file or one far-away point more finds it
    (:func:`dpcore.data.engines.base.tolerant_points_fingerprints`, issue 26 item 12), as the CLI does
    with the bounds of its release.  Points kept in their files (an engine) have the keys their engine
    computed in its last count with new bounds (:func:`aggregate`): until the current bounds are
    counted, only the key of every point (which no bounds change) is led; a release counts them
    first and leads the new key then.  The data's own budget is opened when the file is loaded; when a
    key of bounds set afterwards leads to a budget already used (e.g. a CLI release with those bounds of
    the same points and one far-away point fewer) and the data's own budget is still unused, that one is
    retired into the used one (:func:`dpcore.privacy.key_aliases.adopt`), and :func:`ui.state.data_ledger`
    then hands out the used budget (the sidebar and the release draw on it).  Two budgets both already
    charged stay apart (the data draws on its own).  The demo has the exact key only."""
    done = st.session_state.setdefault("points_keys_adopted", set())
    mark = (ds.fingerprint, None if bounds is None else (bounds.west, bounds.south, bounds.east, bounds.north))
    if mark in done or ds.is_demo or state.is_demo("points", ds.fingerprint):
        return
    if ds.source is None:
        keys = engine_rules.tolerant_points_fingerprints(ds.table.lon, ds.table.lat, bounds)
    elif ds.keys_bounds == bounds:
        keys = list(ds.keys)
    else:  # counted with other bounds: the inside key is not known yet (the every-point key, once)
        if (ds.fingerprint, "every") not in done:
            state.session().adopt_keys("points", ds.fingerprint, list(ds.keys[:1]))
            done.add((ds.fingerprint, "every"))
        return
    state.session().adopt_keys("points", ds.fingerprint, keys)
    done.add(mark)


def current_release() -> ReleaseEntry | None:
    """The latest release of the loaded dataset, if any."""
    fp = dataset().fingerprint
    for entry in reversed(st.session_state["releases"]):
        if entry.dataset_fingerprint == fp:
            return entry
    return None


def add_release(out: KindRelease, *, into: list[ReleaseEntry], fp: str, led: Ledger,
                cv_threshold: float = CV_THRESHOLD) -> ReleaseEntry:
    """Keep the release in this session (the list ``into``, read from st.session_state before the
    charge); its files follow in the release history once its map is on the page.

    It reads and writes no st.session_state: Streamlit 1.67 may stop a callback at any access to it
    (a second click asks for a rerun), and a release that is charged must not be lost after the
    charge.  The charge (journalled with the release's id, :mod:`dpcore.privacy.ledger_journal`:
    History lists it as charged until its files are stored) and ``release.json`` (the record, with
    the ledger as of the charge) are made here, before anything is shown; the tables
    (``release.csv``, the GeoJSON, the data users' files: 0.2–0.5 s for UG's 4,761 areas, up to a
    gigabyte of CSV for a million cells) are made once from this release and stored with it by
    :func:`store_pending_history`, which the Release step calls right after the map (and app.py after
    every run, for a run stopped before: storing is idempotent, so a run stopped half-way stores them
    on the next run) — before any download or History read of this session (issue 28 item 5: the map
    of a UG release at 4,096² waited for its files).  ``cv_threshold``: the curator's threshold of
    the record's level guidance (:func:`ui.confirm.cv_threshold`)."""
    entry = ReleaseEntry(out, fp)
    entry.exports["cv_threshold"] = cv_threshold
    entry.exports["files"] = out.files(led, tables=False, cv_threshold=cv_threshold)
    entry.exports["history_pending"] = led
    into.append(entry)
    return entry


#: releases with more areas than this have no stored release.geojson (offered built on request)
GEOJSON_STORED_UP_TO = 200_000


def release_files(entry: ReleaseEntry) -> dict[str, bytes]:
    """The files of a point release, each made once: ``release.json`` when the release is made
    (:func:`add_release`: ``KindRelease.files`` with the ledger as of the charge), the tables (which
    do not depend on the ledger) the first time they are needed (:func:`store_pending_history` right
    after the map, or a download before it).  The Export step and the release history serve these
    bytes; nothing is rebuilt from a later ledger."""
    from dpcore.core.review import with_review
    from dpcore.points import export
    from dpcore.points.data_users import match_written

    rel = entry.release
    files = entry.exports["files"]
    if "release.csv" not in files:
        tables = export.release_tables(rel, geojson=rel.n_rects <= GEOJSON_STORED_UP_TO)
        # the review page is made again with the table (its errors per level read release.csv)
        ordered = export.in_file_order(with_review(match_written({**files, **tables}),
                                                   entry.exports.get("cv_threshold", CV_THRESHOLD)))
        files.clear()
        files.update(ordered)  # in the order the CLI writes them
    return files


def _store_history(entry: ReleaseEntry, led: Ledger) -> bool:
    rel = entry.release
    return state.remember_release("points", entry.dataset_fingerprint, rel.release_id,
                     {"mechanism": rel.mechanism_title, "cost": rel.cost.label(),
                      "grid": f"{rel.grid.rows} x {rel.grid.cols}", "params": rel.params}, release_files(entry), led)


def store_pending_history() -> None:
    """Store the files of releases not yet stored in the history (:func:`add_release`): the Release
    step calls it right after the map, app.py after every run (so the map does not wait for the
    tables: a gigabyte of CSV for a million cells).  A release whose files could not be stored (a
    warning said so) stays pending and is tried again on the next run."""
    for entry in st.session_state.get("releases", []):
        led = entry.exports.get("history_pending")
        if led is not None and _store_history(entry, led):
            entry.exports.pop("history_pending", None)


def bounds() -> Bounds:
    return st.session_state["bounds"]


#: the preview's guess of the number of points when the data gives none (not used by a release)
DEFAULT_N_GUESS = 100_000
#: where the session keeps the current :class:`PlannedRelease`
PLAN_KEY = "points_plan"


@dataclass(frozen=True)
class PlanChoice:
    """What the Plan step chose for the loaded points: mechanism, parameters as typed, budget, unit."""

    fingerprint: str
    mechanism: str
    raw: dict[str, Any]  # the parameters as typed (resolved by the plan)
    cost: budget.PrivacyCost
    unit: Unit
    n_guess: int  # a public guess of the number of points, for mechanisms sized by it (preview only)

    def key(self, grid: Grid | None) -> str:
        """A digest of every input of the plan (the rectangles of a workload included)."""
        text = repr((self.fingerprint, self.mechanism, sorted(self.raw.items(), key=lambda kv: kv[0]),
                     self.cost, self.unit, self.n_guess, grid))
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class PlannedRelease:
    """The Plan step's outcome: the one plan to release, or why there is none.

    ``needs_guess``: the mechanism sizes its levels by the number of points (or its preview is closer
    to the release with a number of points), so its preview was planned with the public guess
    ``choice.n_guess`` (the release sizes them from its noisy count, or from the data)."""

    choice: PlanChoice
    key: str
    plan: Plan | None
    needs_guess: bool
    error: str | None  # why the plan cannot be released (bad parameters, no rectangles ...), or None
    grid: Grid | None

    @property
    def mechanism(self) -> Any:
        """The catalogue's mechanism (title, summary, parameters)."""
        return catalog.get("points", self.choice.mechanism)


def series_periods() -> int | None:
    """The number of public periods when "Release over time" is on with valid settings, else None."""
    from ui import series

    s = series.active("points")
    if s is None:
        return None
    try:
        return len(s.periods())
    except DPCoreError:
        return None


def choice() -> PlanChoice:
    """The Plan step's choices for the dataset loaded now, read from the session (no widgets)."""
    ss = st.session_state
    ds = dataset()
    name = ss.get("mechanism", DEFAULT_MECHANISM)
    led = ledger()
    cost = (budget.pure(ss.get("epsilon", state.DEFAULT_EPSILON)) if led.definition == "pure"
            else budget.zcdp(ss.get("rho", state.DEFAULT_RHO)))
    cap_user = ss.get("user_cap")
    # whom this release protects (checked again when charging)
    unit = points_unit(int(cap_user) if ds.table.user_column is not None and cap_user else None)
    guess = int(ss.get(f"n_guess_{ds.fingerprint}", ds.n_guess or DEFAULT_N_GUESS))
    return PlanChoice(ds.fingerprint, name, dict(ss["mech_params"].get(name, {})), cost, unit, guess)


def planned() -> PlannedRelease:
    """The plan of the current choices: the one kept in the session when they have not changed,
    else built once through the catalogue and kept."""
    c = choice()
    try:
        g: Grid | None = grid()
    except DPCoreError as e:
        return PlannedRelease(c, "", None, False, str(e), None)
    key = c.key(g)
    kept = st.session_state.get(PLAN_KEY)
    if isinstance(kept, PlannedRelease) and kept.key == key:
        return kept
    out = _build(c, g, key)
    st.session_state[PLAN_KEY] = out
    return out


def _build(c: PlanChoice, grid: Grid, key: str) -> PlannedRelease:
    """Plan through the catalogue: first without a guess of the number of points (a mechanism that
    sizes its levels by it then has no rows to preview), then, for those, with the public guess."""
    mech = catalog.get("points", c.mechanism)
    try:
        if c.mechanism == "matrix" and c.raw.get("workload") == "uploaded" and not c.raw.get("rectangles"):
            raise DPCoreError("Upload the query rectangles on the Plan step first.")
        with st.spinner("Planning (a matrix strategy for a big grid takes a minute) …"):
            plan = mech.plan(grid, c.cost, c.raw, unit=c.unit)
            # sized by n (no rows without a guess), or closer to the release with one (PrivTree's leaves)
            # a public number of points given to the mechanism is the one number: no second box asks for a
            # guess (issue 26 item 10: two "number of points" boxes)
            public_n = int(c.raw.get("public_n", 0) or 0)
            sized = not plan.rows or bool(getattr(mech, "n_guess_helps", False))
            if sized:
                plan = mech.plan(grid, c.cost, c.raw, unit=c.unit, n_estimate=public_n or c.n_guess)
            needs_guess = sized and not public_n
    except DPCoreError as e:
        return PlannedRelease(c, key, None, False, str(e), grid)
    return PlannedRelease(c, key, plan, needs_guess, None, grid)
