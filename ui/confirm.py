"""The Release button's surroundings, the same for every kind of data.

Before: what will be released and what it costs, and why it cannot be released when it cannot
(the budget is used up, another unit of privacy than the budget's, a parameter to fix).  After: the
same confirmation for points, areas and flows, first on the step: what was released, what it cost,
what is left, and a link down to the map; the next release's button (secondary) and state come after the
release's map and errors, calmly (shared/UX.md: "a success reads as a success").
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from dpcore.core.review import CV_THRESHOLD
from dpcore.errors import DPCoreError
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.units import Unit
from ui import fmt, state


def check(led: Ledger, cost: PrivacyCost, unit: Unit, plan_error: str | None, *, after: bool = False
          ) -> tuple[bool, str]:
    """Whether the release can be made, and the button's label (which states the cost or the reason).
    ``after``: a release was just confirmed above, so a next release that cannot be made is a calm note
    (st.caption), not a warning."""
    if plan_error is not None:
        st.error(plan_error)
        return False, "Release: fix the plan first"
    try:
        # the unit of privacy must fit the budget's (checked again when charging); a person/group release
        # on a record budget is charged for a group, and pure ε on a ρ budget as ρ = ε²/2
        charged, group = led.charge_for(cost, unit)
        charge = led.charge_of(charged)
    except DPCoreError as e:
        st.error(str(e))
        return False, "Release refused: another unit of privacy than the budget's"
    sym = led.cap.symbol
    as_charged = "" if (charged == cost and charge == cost.value) else f" (charged as {sym} = {fmt.eps(charge)})"
    if led.remaining <= 0:
        (st.caption if after else st.info)(
            "The budget of this data is used up: nothing more can be released from it. What was published "
            "is listed on the History page.")
        return False, "Budget used up"
    try:
        led.check(cost, unit)
    except DPCoreError:
        (st.caption if after else st.warning)(
            (f"Another release with {cost.label()}{as_charged} would need more than the " if after else
             f"This release asks for {cost.label()}{as_charged}, more than the ")
            + f"{fmt.eps(led.remaining)} left of the budget. Lower it on the Plan step, or raise the cap there if "
            "your policy allows it.")
        return False, f"Not enough budget: {cost.label()} asked, {fmt.eps(led.remaining)} left"
    after = max(led.remaining - charge, 0.0)
    tail = "the budget is used up after this" if after <= 1e-12 else f"{fmt.eps(after)} left after this"
    return True, f"Release with {cost.label()}{as_charged} — {tail}"


def button(key: str, led: Ledger, cost: PrivacyCost, unit: Unit, plan_error: str | None,
           release: Any, *args: Any, after: bool = False, what: str | None = None) -> None:
    """The Release button (one release per click, :func:`ui.state.release_button`) with its checks,
    under ``what`` (the line that says what will be released, markdown).

    ``after``: a release of this data is confirmed and shown above (:func:`released`, then its map and
    errors), so the button is the next release's, a secondary matter: the kind draws it after the
    release's results, under a small heading, as a secondary (not primary) button, and a budget too small
    for it is a calm caption rather than a warning.  Before any release it is the step's primary button,
    at the top."""
    if after:
        st.markdown("###### Another release from this data")
    if what:
        st.markdown(what)
    can, label = check(led, cost, unit, plan_error, after=after)
    _threshold_input()
    state.release_button(key, label, release, *args, disabled=not can,
                         button_type="secondary" if after else "primary")


#: set by the Plan page whenever it runs (pages/plan.py): the curator has seen this session's plan
PLAN_SEEN = "_plan_seen"


def planned() -> str:
    """How the Release step names where its mechanism and budget come from: the Plan step the curator
    saw, or its defaults when they went straight to the Release step (UX review: "as planned" for a
    plan never seen)."""
    return ("as planned on the Plan step" if st.session_state.get(PLAN_SEEN)
            else "the Plan step's defaults (open Plan to see or change them)")


def cv_threshold() -> float:
    """The curator's threshold behind the record's "use at level L or coarser" line (``level_guidance``:
    the finest level whose median coefficient of variation is under it), as set beside the Release
    button; :data:`dpcore.core.review.CV_THRESHOLD` until changed.  A release's action reads it before
    the charge and passes it to ``KindRelease.files(cv_threshold=...)``."""
    return float(st.session_state.get("cv_threshold", CV_THRESHOLD))


def _threshold_input() -> None:
    """The input of :func:`cv_threshold` (one setting for every kind, kept across pages)."""
    st.number_input(
        "The record calls a level reliable when its noise is under this share of a typical count",
        min_value=0.01, max_value=10.0,
        step=0.05, format="%.2f", key=state.persistent("cv_threshold", CV_THRESHOLD),
        help="release.json and review.html say \"use at level L or coarser\": the finest level whose median "
             "noise SD / published count is under this threshold (0.3: the SD is under 30 % of a typical count). "
             "It only words the record: it changes no count and spends nothing.")
    state.store("cv_threshold")


def released(what: str, cost: PrivacyCost, led: Ledger, release_id: str, *, below: str = "See it on the map") -> None:
    """The confirmation of a release: what was released, what it cost, what is left, where to look
    (``below``: the link to what the step shows under it, anchored "map")."""
    left = led.remaining
    rest = ("The budget of this data is now used up." if left <= 1e-12
            else f"{led.cap.symbol} = {fmt.eps(left)} of {fmt.eps(led.cap.value)} is left.")
    st.success(f"Released {what} with {cost.label()} (release {release_id}). {rest}", icon=":material/check_circle:")
    st.markdown(f"[{below} ↓](#map)")
