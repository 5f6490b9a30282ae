"""Session state every kind shares: the budget session and its ledgers, the release history store,
the demo data's throwaway budgets, widgets' persistence helpers and the one-click Release button.

Each kind keeps its own typed state beside its steps (``ui/kinds/<kind>/state.py``).  Everything
confidential lives under plain ``st.session_state`` keys of this session only; nothing confidential
goes through ``st.cache_data`` with global scope, so sessions never share data.  Releases are stored
when made, so a rerun never draws new noise.
"""

from __future__ import annotations

import queue
import sqlite3
import sys
import threading
from typing import Any

import streamlit as st

from dpcore.core.session import DEFAULT_EPSILON_CAP, Session, default_release_budget
from dpcore.core.session import DEFAULT_RHO_CAP as SESSION_RHO_CAP
from dpcore.errors import DPCoreError
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.ledger_journal import APP
from dpcore.privacy.ledger_store import LedgerStore, StoredLedger
from ui import clicks

# the default caps and the default budget of one release (half the cap), the same for every kind
DEFAULT_CAP = DEFAULT_EPSILON_CAP
DEFAULT_EPSILON = default_release_budget("pure")
DEFAULT_RHO_CAP = SESSION_RHO_CAP
DEFAULT_RHO = default_release_budget("zcdp")
DEFAULT_RELEASE = {"pure": DEFAULT_EPSILON, "zcdp": DEFAULT_RHO}


class _AppSession(Session):
    """:class:`Session` whose database, once opened, says in the page when a write waits for another
    process's lock (a toast in the session that writes)."""

    @property
    def store(self) -> LedgerStore:
        out = super().store
        out.on_wait = _waiting
        return out


def session() -> Session:
    """The app's session on the shared budget database: the only code that charges a budget
    (:class:`dpcore.core.session.Session`); pages, the CLI and configs share its database.  Its
    charges are journalled until their files are stored (``deliver_to="app"``): a server stopped
    between a charge and its files leaves the charge listed on History as charged, not delivered.
    The database is opened when first used, not here: a release of the demo (whose budget lives in
    the browser session's own database) never opens it (issue 28 item 5: opening it, an SQLite
    schema check and a write transaction, was in the first release's click on a new server)."""
    return _AppSession(deliver_to=APP)


def _waiting(message: str) -> None:
    try:
        st.toast(message)
    except Exception:  # noqa: BLE001 - outside a page run (a thread, a test): the server log
        print(message, file=sys.stderr)


#: Text shown beside the budget of made-up demo data.
DEMO_BUDGET_NOTE = "demo: budget resets with the session"


def mark_demo(kind: str, fp: str) -> None:
    """Say that ``kind`` data with content fingerprint ``fp`` is the app's made-up demo data: its
    budget and release history then live with this browser session (:func:`session_for`) instead
    of the shared database, so a newcomer's releases never use the demo's budget up for good.
    Call it when the demo is loaded, before its budget is opened.  Data whose budget this session
    has already opened in the shared database stays there: a budget is never moved to the
    throwaway store (a wrong key passed here must not free real data from its budget)."""
    ss = st.session_state
    if (kind, fp) in ss.get("shared_budgets", set()):
        return
    ss.setdefault("demo_data", set()).add((kind, fp))


def is_demo(kind: str, fp: str) -> bool:
    """Whether ``kind`` data with fingerprint ``fp`` was loaded as the demo in this session."""
    return (kind, fp) in st.session_state.get("demo_data", ())


def demo_session() -> Session:
    """This browser session's own budget database (temporary, removed with the session)."""
    ss = st.session_state
    if "demo_session" not in ss:
        ss["demo_session"] = _fresh_temporary()
        ss["demo_session"].deliver_to = APP
    return ss["demo_session"]


#: Fresh temporary budget databases made ahead for the next browser sessions (issue 28 item 5: making
#: one, an SQLite schema written to disk, was half of a new session's first page on a busy machine).
SPARE_DEMO_SESSIONS = 2


@st.cache_resource(show_spinner=False)
def _spares() -> tuple[queue.Queue, threading.Lock]:
    """The server's queue of unused temporary sessions and the lock of its refill."""
    return queue.Queue(), threading.Lock()


def _fresh_temporary() -> Session:
    """A new temporary session (:meth:`Session.temporary`), each handed to one browser session only:
    one made ahead when there is one, then another made in the background for the next."""
    spares, lock = _spares()
    try:
        out = spares.get_nowait()
    except queue.Empty:
        out = Session.temporary()
    threading.Thread(target=_refill, args=(spares, lock), daemon=True).start()
    return out


def _refill(spares: queue.Queue, lock: threading.Lock) -> None:
    if not lock.acquire(blocking=False):
        return  # another refill is running
    try:
        while spares.qsize() < SPARE_DEMO_SESSIONS:
            spares.put(Session.temporary())
    except Exception:  # noqa: BLE001 - the next session makes its own (the disk is full ...)
        return
    finally:
        lock.release()


def session_for(kind: str, fp: str) -> Session:
    """The session whose database keeps the budget of ``kind`` data with fingerprint ``fp``: this
    browser session's temporary one for the demo data, the shared persistent one for real data."""
    return demo_session() if is_demo(kind, fp) else session()


def is_session_budget(led: Ledger) -> bool:
    """Whether ``led`` lives only as long as this browser session (the demo data's budget)."""
    return isinstance(led, StoredLedger) and led.store.temporary


def stored_ledger(kind: str, fp: str, default_cap: budget.PrivacyCost) -> Ledger:
    """The budget of a dataset (``kind`` + content fingerprint, keyed by the session).

    Real data's budget is kept in the budget database: re-uploading the data, reloading the page, a
    second tab or a restart of the app all continue the same budget (its population's, when it is
    bound to one).  The demo data's budget lives with this browser session (:func:`mark_demo`)."""
    if not is_demo(kind, fp):
        st.session_state.setdefault("shared_budgets", set()).add((kind, fp))  # see mark_demo
    return session_for(kind, fp).budget(kind, fp, default=default_cap)


def data_ledger(kind: str, fp: str, default_cap: budget.PrivacyCost, cache: dict[str, Ledger]) -> Ledger:
    """The budget ``kind`` data with content fingerprint ``fp`` draws on, kept in ``cache`` (a page's
    ``st.session_state`` dict of ledgers).

    The cached ledger is opened again when the data's binding no longer matches it (the data was
    bound to a population since, in this tab or another), so a page never charges a data set's
    own budget once the data draws on its population's.
    """
    led = cache.get(fp)
    if led is not None:
        store = session_for(kind, fp).store
        if led.dataset == store.budget_key(kind, fp):  # its binding and alias (key_aliases) as now
            return led
    led = cache[fp] = stored_ledger(kind, fp, default_cap)
    return led


def population_of(kind: str, fp: str) -> str | None:
    """The name of the population ``kind`` data with fingerprint ``fp`` is bound to, or None.

    A binding is for good, so a name once found is remembered for this browser session; "not bound"
    is asked again on every call (another tab may bind the data meanwhile).
    """
    names = st.session_state.setdefault("population_names", {})
    if (kind, fp) in names:
        return names[(kind, fp)]
    store = session_for(kind, fp).store
    name = store.population_name(store.data_key(kind, fp))
    if name is not None:
        names[(kind, fp)] = name
    return name


def bind_population(kind: str, fp: str, name: str, default_cap: budget.PrivacyCost,
                    cache: dict[str, Ledger]) -> Ledger:
    """Bind the data to the named population (for good) and keep the population's budget in ``cache``.

    Refusals (:meth:`dpcore.privacy.ledger_store.LedgerStore.bind`: the data already has releases
    on its own budget, or belongs to another population) raise :class:`DPCoreError` with the reason.
    A new population starts with ``default_cap``.
    """
    if not is_demo(kind, fp):
        st.session_state.setdefault("shared_budgets", set()).add((kind, fp))  # see mark_demo
    led = cache[fp] = session_for(kind, fp).budget(kind, fp, default=default_cap, population=name)
    st.session_state.setdefault("population_names", {})[(kind, fp)] = name.strip()
    return led


def person_once(fp: str, *, per_period: bool = False) -> bool:
    """Whether the curator confirmed that each person is counted once in the table with content
    fingerprint ``fp`` (the checkbox of :func:`ui.budget_ui.section`): its releases then protect one
    person and may draw on a population's budget (issue 26 item 15).  Unconfirmed: one counted record.

    ``per_period``: the confirmation of a release over time, that each person is counted once in each
    period's rows (:mod:`ui.kinds.areas.series`); kept apart from the table's, since a person present
    in several periods is counted more than once in the whole table."""
    return bool(st.session_state.get("series_person_once" if per_period else "person_once", {}).get(fp, False))


def remember_release(kind: str, fp: str, release_id: str, summary: dict[str, Any],
                     files: dict[str, bytes], ledger: Ledger | None = None) -> bool:
    """Keep a release's exported files in the budget database for the Release history page.

    ``ledger``: the budget the release was charged to; its database keeps the files (the demo's
    stay with the browser session).  Pass it from a release callback: without it the database is
    found through st.session_state, which Streamlit 1.67 may stop a callback at.
    A failure to store is shown as a warning: the release itself (already charged) is kept.
    Returns whether the files were stored (a caller keeps them pending otherwise, to try again).
    """
    try:
        if isinstance(ledger, StoredLedger):
            ledger.store.record_release(ledger.dataset, release_id, kind, summary, files)
            return True
        store = session_for(kind, fp).store
        store.record_release(store.budget_key(kind, fp), release_id, kind, summary, files)
        return True
    except (DPCoreError, OSError, sqlite3.Error) as e:
        st.warning(f"The release was made but could not be stored in the release history: {e}. Download its "
                   "files now.")
        return False


def persistent(key: str, default: Any) -> str:
    """Widget key whose value survives page switches (widgets reset when their page is left).

    Use as ``st.number_input(..., key=persistent("epsilon", 0.5))`` then read
    ``st.session_state["epsilon"]`` after calling :func:`store`.
    """
    ss = st.session_state
    wkey = f"_w_{key}"
    if wkey not in ss:
        ss[wkey] = ss.get(key, default)
    ss.setdefault("_persisted", {})[wkey] = key  # kept first thing on the next run (keep_widget_values)
    return wkey


def use_on_plan_step(key: str, value: Any) -> None:
    """Set the Plan step's :func:`persistent` setting ``key`` to ``value`` and go to the Plan step.

    Both keys are written: ``key`` for the step's code and ``_w_{key}`` so that its widget shows it."""
    ss = st.session_state
    ss[key] = ss[f"_w_{key}"] = value
    st.switch_page("pages/plan.py")


def keep_widget_values() -> None:
    """Copy every :func:`persistent` widget's value to its key; app.py calls it first on every run.

    :func:`store` does it after the widget, but a run stopped before that line (another click
    arrived: a page change right after choosing a mechanism) left the choice in the widget's key,
    which Streamlit then drops with the page: the choice was lost (issue 28 item 5).  The widgets'
    new values are in st.session_state before the script starts, and :func:`ui.clicks.held` keeps a
    request from stopping this copy half-way.  (A change the server has not yet taken when a page
    change arrives is merged into the page change by Streamlit and never reaches the app.)"""
    with clicks.held():
        ss = st.session_state
        for wkey, key in list(ss.get("_persisted", {}).items()):
            if wkey in ss:
                ss[key] = ss[wkey]


def store(key: str) -> Any:
    ss = st.session_state
    ss[key] = ss[f"_w_{key}"]
    return ss[key]


def seed(wkey: str, value: Any) -> str:
    """Give widget ``wkey`` its starting value once; returns the key.

    Widgets are then created with ``key=`` and no ``value=``: a widget whose default
    comes from the state it writes changes identity on every edit and drops the
    second of two quick edits.  Streamlit deletes the key when the widget's page
    is left, so coming back re-seeds it from the authoritative state.
    """
    ss = st.session_state
    if wkey not in ss:
        ss[wkey] = value
    return wkey


def forget(*wkeys: str) -> None:
    """Drop widget keys so that they are re-seeded (e.g. after loading the demo)."""
    for k in wkeys:
        st.session_state.pop(k, None)


def release_button(key: str, label: str, release: Any, *args: Any, disabled: bool = False,
                   help: str | None = None, button_type: str = "primary") -> None:
    """A Release button whose ``release(*args)`` runs once per click, in the button's callback.

    Streamlit runs callbacks before the script, so a rerun asked for meanwhile (a second click, a
    widget change) waits for the release; but Streamlit 1.67 may still stop a callback at any read
    or write of st.session_state.  So ``release`` reads what it needs from st.session_state before
    the charge, puts the release in the history (no session state) right after it, and touches
    st.session_state again only at the end: a charged release is never lost half-way.  The callback runs
    :func:`ui.clicks.atomic`: a request that arrives meanwhile (a second click, a reconnecting browser)
    waits for its end instead of stopping it before the charge, which lost the click.  Each drawing of the button
    carries a one-time token: a second click on the button as drawn before the release (a double
    click) finds its token used and releases nothing.  A :class:`DPCoreError` from ``release`` is
    shown under the button on the next run.  ``button_type``: the button's type, "primary" for a first release,
    "secondary" for the next one under a release that is shown (:func:`ui.confirm.button`).
    """
    ss = st.session_state
    token = ss.setdefault(f"{key}_token", 0)
    if ss.get(f"{key}_token_used") == token:
        ss[f"{key}_token"] = token = token + 1  # the last click was used: arm a new one
    # A button's callback and its arguments are the ones of its latest drawing on the server, not of
    # the drawing the browser showed when it was clicked; so each token is a button of its own (its
    # own key): a click on a drawing from before the release finds that drawing's token, used, and
    # releases nothing, instead of finding the new token (seen in a browser: a burst of clicks made
    # two releases).
    st.button(label, type=button_type, key=release_widget_key(key), disabled=disabled, help=help,
              on_click=clicks.atomic(_release_once), args=(key, token, release, args))
    err = ss.pop(f"{key}_error", None)
    if err:
        st.error(err)


def release_widget_key(key: str, session_state: Any = None) -> str:
    """The widget key of the Release button ``key`` as drawn now: ``key`` until the first release,
    then ``key#1``, ``key#2`` … (one widget per one-time token, see :func:`release_button`).
    ``session_state``: another session's state (an AppTest's), else this session's."""
    ss = st.session_state if session_state is None else session_state
    token = ss[f"{key}_token"] if f"{key}_token" in ss else 0
    return key if not token else f"{key}#{token}"


def _release_once(key: str, token: int, release: Any, args: tuple[Any, ...]) -> None:
    ss = st.session_state
    if ss.get(f"{key}_token_used") == token:  # a second click of the same drawing: ignored
        return
    ss[f"{key}_token_used"] = token
    try:
        release(*args)
    except DPCoreError as e:
        ss[f"{key}_error"] = str(e)
