"""The budget controls every page shares: the privacy definition and the cap of a data set's budget.

One copy of the rules a page must keep (they were four, and had drifted):

* the cap is written only when the curator edits the cap box (an ``on_change`` callback), never
  by a rerun of a stale tab, and always through :meth:`dpcore.core.session.Session.set_cap`, which
  keeps the change as a ledger event;
* raising the cap asks for confirmation;
* the definition is fixed once budget has been spent under it;
* a cap changed elsewhere (another tab, a pipeline on the same budget database) is shown, and a
  stale widget value is never written back over it.
"""

from __future__ import annotations

import math
from typing import Any

import streamlit as st

from dpcore.core.session import DEFAULT_EPSILON_CAP, DEFAULT_RHO_CAP
from dpcore.errors import DPCoreError
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from ui import fmt, state

ss = st.session_state

#: Default cap of a new budget per definition: ε = 1, or its zCDP reading ρ = ε²/2 = 0.5.
DEFAULT_CAPS = {"pure": DEFAULT_EPSILON_CAP, "zcdp": DEFAULT_RHO_CAP}


def _make(definition: str, value: float) -> budget.PrivacyCost:
    return budget.pure(value) if definition == "pure" else budget.zcdp(value)


def switch_definition(led: Ledger, definition: str, defaults: dict[str, float] | None = None) -> None:
    """Give an unused budget the other definition, at the cap that means the same: ε ↔ ρ = ε²/2.

    Never a raise: a cap lowered to ε = 0.2 stays ρ = 0.02 (not the default ρ = 0.5) and comes back as
    ε = 0.2, so switching definitions cannot lift a cap past its confirmation.  (``defaults`` is
    kept for callers; the converted cap is used.)"""
    if led.entries or definition == led.definition:
        return
    if definition == "zcdp":  # the ρ that pure ε-DP implies (Bun & Steinke 2016, Prop. 1.4)
        cap = budget.zcdp(led.cap.value ** 2 / 2)
    else:  # the ε whose implied ρ is this cap; rounded down so the converted cap is never larger
        cap = budget.pure(math.nextafter(math.sqrt(2 * led.cap.value), 0.0))
    state.session().set_cap(led, cap)  # the same loss in the other definition: no raise, so no confirmation


def cap_input(led: Ledger, key: str, container: Any = None, *, label: str = "Budget cap of this dataset",
              min_value: float = 0.001, step: float = 0.1, fmt_str: str = "%.3f",
              help: str = "The most all releases of this dataset may spend together. Smaller is more private; "
                          "raising it later asks for confirmation.", population: str | None = None) -> None:
    """The cap box of ``led``; edits go through the session, raises wait for confirmation.

    With ``population`` (the name the data is bound to) the box says it is that population's cap.
    """
    box = container if container is not None else st
    if population:
        label = f"Budget cap of the population {population}"
        help = ("The most all releases of every data set bound to this population may spend together. Smaller "
                "is more private; raising it later asks for confirmation.")
    shown, pending = f"{key}__shown", f"{key}__raise"
    if ss.get(shown) != led.cap.value or key not in ss:
        # first draw, or the cap changed elsewhere: show it (never write a stale value back)
        ss[key] = ss[shown] = float(led.cap.value)

    def changed() -> None:
        new = _make(led.definition, float(ss[key]))
        try:
            state.session().set_cap(led, new)
        except DPCoreError as e:
            if "Confirm" in str(e):
                ss[pending] = float(ss[key])
            else:
                ss[f"{key}__error"] = str(e)
        ss[key] = ss[shown] = float(led.cap.value)

    box.number_input(f"{label} ({led.cap.symbol})", min_value=min_value, max_value=100.0, step=step,
                     format=fmt_str, key=key, on_change=changed, help=help)
    if ss.get(f"{key}__error"):
        box.error(ss.pop(f"{key}__error"))
    if ss.get(pending) is not None:
        want = float(ss[pending])
        box.warning(f"Raise the cap from {led.cap.symbol} = {fmt.eps(led.cap.value)} to {fmt.eps(want)}? "
                    "A higher cap lets the same people be exposed more; raise it only if your privacy "
                    "policy allows it. The change is kept in the budget's history.")

        def confirm() -> None:
            try:
                state.session().set_cap(led, _make(led.definition, want), confirm=True)
            except DPCoreError as e:
                ss[f"{key}__error"] = str(e)
            ss[pending] = None
            ss[key] = ss[shown] = float(led.cap.value)

        def cancel() -> None:
            ss[pending] = None

        c1, c2 = box.columns(2)
        c1.button("Raise the cap", key=f"{key}__confirm", on_click=confirm, type="primary")
        c2.button("Keep the cap", key=f"{key}__cancel", on_click=cancel)


POPULATION_HELP = ("Data that comes from the same people (the points, trips and census tables of one survey) "
                   "should share one budget, so that their releases together never expose anyone more than the "
                   "cap allows. Give each of them the same name here before its first release. A data set keeps "
                   "its population for good.")


def population_input(kind: str, fp: str, default_cap: budget.PrivacyCost, cache: dict[str, Ledger], key: str,
                     container: Any = None, reset: tuple[str, ...] = ()) -> Ledger:
    """The "Population (optional)" box of a data set, and the budget the page should use.

    Typing a name binds ``kind`` data with content fingerprint ``fp`` to that population
    (:meth:`dpcore.core.session.Session.budget`); its releases then draw on the population's budget,
    shared with every data set bound to it.  A refusal (the data already has releases on its own
    budget, or belongs to another population) is shown under the box and changes nothing.
    ``cache`` is the page's dict of ledgers; the returned ledger is the one now in it.  ``reset``:
    widget keys to drop after a binding, so they show the population's budget (its definition).
    """
    box = container if container is not None else st
    wkey, err_key = f"{key}__population", f"{key}__population_error"
    bound = state.population_of(kind, fp)
    if wkey not in ss:
        ss[wkey] = bound or ""

    def changed() -> None:
        name = str(ss[wkey]).strip()
        current = state.population_of(kind, fp)
        if name == (current or ""):
            ss[wkey] = name
            return
        if not name:  # emptied: a binding cannot be undone
            ss[err_key] = (f"This data belongs to the population '{current}' for good: its releases are counted "
                           "in that population's budget.")
        else:
            own = cache.get(fp)
            try:
                state.bind_population(kind, fp, name, own.cap if own is not None and not current else default_cap,
                                      cache)
                ss[wkey] = name
                state.forget(*reset)
                return
            except DPCoreError as e:
                ss[err_key] = str(e)
        ss[wkey] = current or ""

    left, right = box.columns(2, vertical_alignment="center")
    left.text_input("Population (optional)", key=wkey, on_change=changed, placeholder="e.g. Travel survey 2023",
                    help=POPULATION_HELP)
    if bound:
        right.caption(f"population: **{bound}**. This data draws on the population's budget, shared with all the "
                      "data bound to it (a data set keeps its population for good).")
    else:
        right.caption("Is other data about the same people (points, trips, census tables)? Give it all the same "
                      "population name so their releases share one budget. Name it before the first release.")
    if ss.get(err_key):
        box.error(ss.pop(err_key))
    led = state.data_ledger(kind, fp, default_cap, cache)
    if state.is_session_budget(led):
        box.caption(f"**{state.DEMO_BUDGET_NOTE}**: this is made-up demo data, so its budget is kept only for this "
                    "session. Real data's budget is kept for good in the budget database.")
    return led
