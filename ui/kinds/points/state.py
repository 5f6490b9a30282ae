"""Points: the app's own model of the Plan step, typed and frozen (as DP Wizard's ``AppState``).

:class:`PlanChoice` is what the curator chose on the Plan step, read back from the session without
widgets; :class:`PlannedRelease` is the one core :class:`~dpcore.core.mechanism.Plan` built from it
through the catalogue (``catalog.get("points", name).plan(grid, cost, params, unit=...)``).  The
Plan step shows that plan and the Release step releases *that* plan
(:func:`dpcore.pipeline.release`): a preview is never re-planned for the release.  The plan is kept
in the session under :data:`PLAN_KEY` and built again only when a choice changes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import streamlit as st

from dpcore import catalog
from dpcore.core.mechanism import Plan
from dpcore.data.domain import Grid
from dpcore.errors import DPCoreError
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.units import Unit
from ui import state

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

    ``needs_guess``: the mechanism sizes its levels by the number of points, so its preview was
    planned with the public guess ``choice.n_guess`` (the release sizes them from its noisy count)."""

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


def choice() -> PlanChoice:
    """The Plan step's choices for the dataset loaded now, read from the session (no widgets)."""
    ss = st.session_state
    ds = state.dataset()
    name = ss.get("mechanism", state.DEFAULT_MECHANISM)
    led = state.ledger()
    cost = (budget.pure(ss.get("epsilon", state.DEFAULT_EPSILON)) if led.definition == "pure"
            else budget.zcdp(ss.get("rho", state.DEFAULT_RHO)))
    cap_user = ss.get("user_cap")
    # whom this release protects (checked again when charging)
    unit = Unit("person", cap=int(cap_user)) if ds.table.user_column is not None and cap_user else Unit("record")
    guess = int(ss.get(f"n_guess_{ds.fingerprint}", ds.n_guess or DEFAULT_N_GUESS))
    return PlanChoice(ds.fingerprint, name, dict(ss["mech_params"].get(name, {})), cost, unit, guess)


def ledger() -> Ledger:
    """The budget the plan is charged to (the loaded dataset's)."""
    return state.ledger()


def planned() -> PlannedRelease:
    """The plan of the current choices: the one kept in the session when they have not changed,
    else built once through the catalogue and kept."""
    c = choice()
    try:
        grid: Grid | None = state.grid()
    except DPCoreError as e:
        return PlannedRelease(c, "", None, False, str(e), None)
    key = c.key(grid)
    kept = st.session_state.get(PLAN_KEY)
    if isinstance(kept, PlannedRelease) and kept.key == key:
        return kept
    out = _build(c, grid, key)
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
            needs_guess = not plan.rows
            if needs_guess:
                plan = mech.plan(grid, c.cost, c.raw, unit=c.unit, n_estimate=c.n_guess)
    except DPCoreError as e:
        return PlannedRelease(c, key, None, False, str(e), grid)
    return PlannedRelease(c, key, plan, needs_guess, None, grid)
