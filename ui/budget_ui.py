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
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from dpcore.errors import DPCoreError
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from ui import clicks, fmt, state

ss = st.session_state

#: Default cap of a new budget per definition: ε = 1, or its zCDP reading ρ = ε²/2 = 0.5.


def _make(definition: str, value: float) -> budget.PrivacyCost:
    return budget.pure(value) if definition == "pure" else budget.zcdp(value)


def switch_definition(led: Ledger, definition: str) -> None:
    """Give an unused budget the other definition, at the cap that means the same: ε ↔ ρ = ε²/2.

    Never a raise: a cap lowered to ε = 0.2 stays ρ = 0.02 (not the default ρ = 0.5) and comes back as
    ε = 0.2, so switching definitions cannot lift a cap past its confirmation."""
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
                     format=fmt_str, key=key, on_change=clicks.atomic(changed), help=help)
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
        c1.button("Raise the cap", key=f"{key}__confirm", on_click=clicks.atomic(confirm), type="primary")
        c2.button("Keep the cap", key=f"{key}__cancel", on_click=clicks.atomic(cancel))


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
    left.text_input("Population (optional)", key=wkey, on_change=clicks.atomic(changed), placeholder="e.g. Travel survey 2023",
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


# ------------------------------------------------------------------ the Plan step's budget section
#: The two definitions a budget is kept in, as every Plan step names them.
DEFINITIONS = {"pure": "Pure ε-DP (discrete Laplace noise)", "zcdp": "ρ-zCDP (discrete Gaussian noise)"}
#: The statements of a release's budget when (ε, δ) statements are offered (trips between areas): ρ stated
#: directly, an (ε, δ) converted to ρ, or pure ε; :data:`FAMILY` says which budget each draws on.
STATEMENTS = {"rho": "ρ-zCDP (discrete Gaussian noise, as in the paper)",
              "approx": "(ε, δ)-DP, converted to ρ-zCDP (discrete Gaussian noise)",
              "pure": "Pure ε-DP (discrete Laplace noise)"}
FAMILY = {"pure": "pure", "zcdp": "zcdp", "rho": "zcdp", "approx": "zcdp"}
#: How an (ε, δ) statement becomes ρ.
CONVERSIONS = {"classic": "the paper's (its Lemma 3; simple, a little loose)",
               "cks": "Canonne, Kamath & Steinke's (tighter: more ρ for the same ε)"}
CONVERSION_HELP = ("The noise is discrete Gaussian, whose privacy is stated as ρ-zCDP. A conversion turns a ρ "
                   "into an (ε, δ) guarantee and back: the paper's (Lemma 3: ε = ρ + 2√(ρ ln(1/δ))) or the "
                   "tighter one of Canonne, Kamath & Steinke (2020), which gives more ρ, so less noise, for the same "
                   "(ε, δ).")
#: The δ a ρ-zCDP budget can be read at (every kind offers the same).
DELTAS = [1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5]
DEFINITION_HELP = ("Pure ε-DP is the strictest guarantee. ρ-zCDP (zero-concentrated DP) adds up more gently over many "
                   "releases and reads as (ε, δ)-DP for a small δ; use it if your policy allows a δ.")
RELEASE_HELP = {"pure": "Smaller ε means more noise and more privacy. Typical values: 0.1 to 1.",
                "zcdp": "Smaller ρ means more noise and more privacy. ρ = 0.125 gives noise of SD 2 per count."}
#: the smallest value, step and format of a release's budget (and of a cap) per definition
_BOX = {"pure": (0.001, 0.05, "%.3f"), "zcdp": (1e-5, 0.01, "%.4f")}


def rho_of(eps: float, delta: float, conversion: str) -> float:
    """The ρ of a release stated as (ε, δ)-DP: the inverse of the paper's bound ε = ρ + 2√(ρ ln(1/δ))
    (Lemma 3 of the O/D paper; Bun & Steinke 2016, Prop. 1.3) or of the tighter conversion of
    Canonne, Kamath & Steinke (2020), ``conversion`` = ``"classic"`` or ``"cks"``."""
    if conversion == "cks":
        return budget.approx_dp_to_zcdp(eps, delta)
    return budget.approx_dp_to_zcdp_classic(eps, delta)


@dataclass(frozen=True)
class Section:
    """What the Plan step's budget section shows: the budget, this release's cost and how it was stated."""

    ledger: Ledger
    cost: budget.PrivacyCost | None  # None: the kind sets the release's budget itself (e.g. marginal tables)
    definition: str  # the choice: "pure" / "zcdp", or with statements "rho" / "approx" / "pure"
    delta: float | None  # the δ of the (ε, δ) reading of a ρ-zCDP release, or of its (ε, δ) statement
    population: str | None
    approx: dict[str, Any] = field(default_factory=dict)  # the (ε, δ) the release was stated in, if it was


def section(kind: str, fp: str, cache: dict[str, Ledger], *, key: str, definition_key: str, cap_key: str,
            release_keys: dict[str, str] | None, default_cap: budget.PrivacyCost | None = None,
            release_in: str | None = None, delta_key: str | None = None, default_delta: float = 1e-6,
            statements: tuple[str, str, str] | None = None, default_statement: str = "rho",
            definition_label: str = "Privacy definition", definitions: dict[str, str] | None = None,
            definition_help: str | None = DEFINITION_HELP, release_label: str = "Privacy budget of this release ({sym})",
            release_max: float | dict[str, float] = 100.0, cap_label: str = "Budget cap of this dataset",
            over_time: bool = False) -> Section:
    """The budget block of a Plan step, the same for every kind: the population box, the privacy
    definition (fixed once budget was spent; an unused budget switched with :func:`switch_definition`),
    this release's budget, the cap (:func:`cap_input`), what was spent, and the (ε, δ) reading of a
    ρ-zCDP release (Canonne, Kamath & Steinke 2020; Bun & Steinke 2016, Prop. 1.3).

    Parameters
    ----------
    kind, fp, cache, key
        The data's kind, content fingerprint, the page's dict of ledgers and the population box's key
        (:func:`population_input`).
    definition_key
        Key of the definition radio (a :func:`ui.state.persistent` name when ``statements`` is given).
    cap_key
        Key of the cap box; ``{definition}`` in it is the budget's definition.
    release_keys
        Definition → :func:`ui.state.persistent` name of this release's budget; None: no release box
        (``cost`` is None).
    default_cap
        The cap of a new budget (ε = ``ui.state.DEFAULT_CAP``, or with statements ρ = ``DEFAULT_RHO_CAP``).
    release_in
        The definition the release is always stated in (Privelet: ``"pure"``, charged ρ = ε²/2 under zCDP).
    delta_key
        :func:`ui.state.persistent` name of the δ of the (ε, δ) reading; None: no reading.
    release_max
        The largest budget of one release (per definition, as a dict, or one for both).
    statements
        Persistent names of the ε, δ and conversion of an (ε, δ) statement converted to ρ: offers the
        definitions of :data:`STATEMENTS` (trips between areas, after the O/D paper's Lemma 3).
    over_time
        A table released over time: its unit follows the series' own confirmation (each person counted
        once in each period, on the Data step), not the table's checkbox, which is then not shown.
    """
    defaults = default_cap or (budget.zcdp(state.DEFAULT_RHO_CAP) if statements else budget.pure(state.DEFAULT_CAP))
    labels = definitions or (STATEMENTS if statements else DEFINITIONS)
    led = population_input(kind, fp, defaults, cache, key, reset=() if statements else (definition_key,))
    if kind == "areas" and over_time:
        st.caption("Unit over time: " + ("one person per period" if state.person_once(fp, per_period=True) else
                                         "one counted record per period")
                   + " ('Each person is counted once in each period' under Release over time on the Data step).")
    elif kind == "areas":
        person_once_box(fp)
    population = state.population_of(kind, fp)
    whose = "population" if population else "dataset"
    definition = _definition(led, labels, whose, definition_key, default_statement, definition_label,
                             definition_help, statements)
    c1, c2, c3 = st.columns(3)
    cost, approx, delta = _release_budget(c1, definition, FAMILY[definition], statements, release_keys, release_in,
                                          release_max, release_label, default_delta)
    _cap_and_spent(led, c2, c3, cap_key, cap_label, population)
    _over_budget(led, cost, whose)
    if not led.entries and not state.is_session_budget(led):  # issue 26, item 13: a new budget is said
        st.info(f"New budget for this data: cap {led.cap.label()}. No earlier release of this "
                f"{'population' if population else 'data'} is in the budget database, so its first release starts "
                "here. If this data was released before (on another machine, or before the database was "
                "restored), its spending is not counted: restore that budget database instead.")
    delta = _approx_reading(led, cost, delta, approx, delta_key, default_delta, whose)
    return Section(led, cost, definition, delta, population, approx)


#: The table's confirmation and the series' (each period's rows): (widget key prefix, state key, label, help).
_PERSON_ONCE = {
    False: ("_w_person_once_", "person_once", "Each person is counted once in this table",
            "Tick only if nobody appears twice in the counts (one row per person, or counts of persons, not of "
            "visits or trips). The release then protects one person, as a population's budget requires; unticked, "
            "it protects one counted record."),
    True: ("_w_series_person_once_", "series_person_once", "Each person is counted once in each period",
           "Tick only if nobody appears twice in one period's rows (one row per person and period, or counts of "
           "persons, not of visits or trips). Each period's release then protects one person (the unit over time "
           "is one person-period), as a population's budget requires; unticked, each period protects one counted "
           "record (the unit event)."),
}


def person_once_box(fp: str, *, per_period: bool = False) -> bool:
    """The confirmation that a table counts each person once (``per_period``: in each period's rows, for
    a release over time), kept for :func:`ui.state.person_once`; returns it."""
    prefix, name, label, help_text = _PERSON_ONCE[per_period]
    wkey = prefix + fp
    st.checkbox(label, key=state.seed(wkey, state.person_once(fp, per_period=per_period)), help=help_text)
    ss.setdefault(name, {})[fp] = once = bool(ss[wkey])
    return once


def over_budget_text(led: Ledger, cost: budget.PrivacyCost | None, whose: str = "dataset") -> str | None:
    """The Plan step's warning when this release's budget is more than what is left of the cap, or None.

    >>> from dpcore.privacy.budget import pure
    >>> led = Ledger(pure(1.0))
    >>> over_budget_text(led, pure(0.5)) is None
    True
    >>> _ = led.spend(pure(0.7), "first")
    >>> over_budget_text(led, pure(0.5))
    'This release asks for ε = 0.5, more than the ε = 0.3 left of the cap of this dataset: the Release step will refuse it. Lower it, or raise the cap if your policy allows it.'
    """
    if cost is None:
        return None
    try:
        charge = led.charge_of(cost)
    except DPCoreError as e:  # another definition than the budget's: the Release step says why
        return str(e)
    if led.can_spend(cost) or charge <= 0:
        return None
    sym = led.cap.symbol
    return (f"This release asks for {cost.label()}, more than the {sym} = {fmt.eps(led.remaining)} left of the cap "
            f"of this {whose}: the Release step will refuse it. Lower it, or raise the cap if your policy allows it.")


def _over_budget(led: Ledger, cost: budget.PrivacyCost | None, whose: str) -> None:
    text = over_budget_text(led, cost, whose)
    if text is not None:
        st.warning(text, icon=":material/warning:")


def _definition(led: Ledger, labels: dict[str, str], whose: str, definition_key: str, default_statement: str,
                definition_label: str, definition_help: str | None, statements: tuple[str, str, str] | None) -> str:
    """The privacy definition radio: fixed once budget was spent; an unused budget follows it."""
    locked = bool(led.entries)
    if statements:
        wdef = state.persistent(definition_key, default_statement)
        if locked and FAMILY[ss[wdef]] != led.definition:
            ss[wdef] = "rho" if led.definition == "zcdp" else "pure"
        definition = st.radio(definition_label, list(labels), format_func=labels.get, key=wdef, horizontal=True,
                              help=definition_help)
        state.store(definition_key)
    else:
        definition = st.radio(definition_label, list(labels), format_func=labels.get, horizontal=True,
                              index=list(labels).index(led.definition), disabled=locked, key=definition_key,
                              help=definition_help)
    if locked:
        st.caption(f"The definition is fixed for this {whose}: budget has already been spent under it "
                   f"({'ρ, zCDP' if led.definition == 'zcdp' else 'ε'}).")
    elif FAMILY[definition] != led.definition:
        switch_definition(led, FAMILY[definition])
        st.rerun()
    return definition


def _release_budget(c1: Any, definition: str, family: str, statements: tuple[str, str, str] | None,
                    release_keys: dict[str, str] | None, release_in: str | None,
                    release_max: float | dict[str, float], release_label: str,
                    default_delta: float) -> tuple[budget.PrivacyCost | None, dict[str, Any], float | None]:
    """This release's budget: an (ε, δ) statement converted to ρ, or ε or ρ typed in (or none)."""
    cost: budget.PrivacyCost | None = None
    approx: dict[str, Any] = {}
    delta: float | None = None
    if statements and definition == "approx":
        k_eps, k_delta, k_conv = statements
        eps = c1.number_input("ε of this release", min_value=0.01, max_value=20.0, step=0.1, format="%.2f",
                              key=state.persistent(k_eps, state.DEFAULT_EPSILON),
                              help="Smaller: more privacy, more noise. The paper uses 0.1, 1 and 10.")
        state.store(k_eps)
        delta = c1.select_slider("δ (the chance the ε bound may fail)", DELTAS,
                                 key=state.persistent(k_delta, default_delta), format_func=_sci,
                                 help="Far below 1 / the number of people.")
        state.store(k_delta)
        conv = c1.radio("Conversion to ρ", list(CONVERSIONS), format_func=CONVERSIONS.get,
                        key=state.persistent(k_conv, "classic"), help=CONVERSION_HELP)
        state.store(k_conv)
        rho = rho_of(float(eps), float(delta), conv)
        cost = budget.zcdp(rho)
        approx = {"epsilon": float(eps), "delta": float(delta), "conversion": conv, "rho": rho}
    elif release_keys is not None:
        shown = release_in or family
        name = release_keys[shown]
        low, step, fmt_str = _BOX[shown]
        top = release_max[shown] if isinstance(release_max, dict) else release_max
        value = c1.number_input(release_label.format(sym=budget.SYMBOL[shown]), min_value=low,
                                max_value=top, step=step, format=fmt_str,
                                key=state.persistent(name, state.DEFAULT_RELEASE[shown]), help=RELEASE_HELP[shown])
        state.store(name)
        cost = _make(shown, float(value))
    return cost, approx, delta


def spent_with_series(led: Ledger) -> tuple[float, float | None]:
    """What a record of one period has lost of ``led``'s cap, as its ``remaining`` counts it: the budget's
    own spends plus what the series over time of the same data add (the most any of their periods spent,
    :attr:`dpcore.privacy.oneoff_links.LinkedLedger.linked_share`); and that share (0 without a series,
    None when it cannot be counted in this budget).  Read from the budget database; display only."""
    share = getattr(led, "linked_share", 0.0)
    return led.spent + (share or 0.0), share


def series_share_text(led: Ledger, share: float | None) -> str | None:
    """The line under a budget that the series over time of its data share (None without one)."""
    sym = led.cap.symbol
    if share is None:
        return ("The series over time of this data cannot be counted in this budget (another definition or unit), "
                "so nothing more can be released from it here.")
    if not share:
        return None
    return (f"of which {sym} = {fmt.eps(share)} by the series over time of this data (the most any one of its periods "
            f"spent: a record is in one period), {sym} = {fmt.eps(led.spent)} by one-off releases.")


def _cap_and_spent(led: Ledger, c2: Any, c3: Any, cap_key: str, cap_label: str, population: str | None) -> None:
    """The cap box and what was spent of it (the population's, when the data is bound to one)."""
    low, step, fmt_str = _BOX[led.definition]
    cap_input(led, cap_key.format(definition=led.definition), c2, label=cap_label, min_value=low,
              step=step if led.definition == "zcdp" else 0.1, fmt_str=fmt_str, population=population)
    sym = led.cap.symbol
    spent, share = spent_with_series(led)
    c3.metric("Spent of the population's cap" if population else "Spent of the cap",
              f"{sym} = {fmt.eps(spent)} of {fmt.eps(led.cap.value)}")
    c3.caption(f"left: {sym} = {fmt.eps(led.remaining)} ({len(led.entries)} "
               f"release{'s' if len(led.entries) != 1 else ''}{f' of the population {population}' if population else ''}"
               f"{'' if not share else ' and a series over time'}).")
    series_text = series_share_text(led, share)
    if series_text:
        c3.caption(series_text)


def _approx_reading(led: Ledger, cost: budget.PrivacyCost | None, delta: float | None, approx: dict[str, Any],
                    delta_key: str | None, default_delta: float, whose: str) -> float | None:
    """The (ε, δ) reading of a ρ-zCDP release, and of every release of the budget with it."""
    if cost is not None and cost.definition == "zcdp" and delta_key is not None and not approx:
        delta = st.select_slider("δ for the (ε, δ) reading", DELTAS, key=state.persistent(delta_key, default_delta),
                                 format_func=_sci,
                                 help="ρ-zCDP implies (ε, δ)-DP for every δ; δ should be far below 1 / number of "
                                      "people.")
        state.store(delta_key)
    if cost is not None and cost.definition == "zcdp" and delta is not None:
        this_eps = budget.zcdp_to_approx_dp(cost.value, delta)
        total_eps = budget.zcdp_to_approx_dp(spent_with_series(led)[0] + cost.value, delta)
        # plain words first; the conversions and the lemma behind "how is this computed" (issue 26, item 7)
        st.info(f"Read as (ε, δ)-DP with δ = {delta:.0e}: this release is ε = {fmt.eps(this_eps)}; all releases of "
                f"this {whose} including this one: ε = {fmt.eps(total_eps)}.")
        with st.expander("How is this computed"):
            st.markdown(
                f"ρ-zCDP implies (ε, δ)-DP for every δ. The figures above use the conversion of Canonne, Kamath & "
                f"Steinke (2020), the tightest known. The simpler bound ε = ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016, "
                f"Prop. 1.3; Lemma 3 of the O/D paper) gives ε = "
                f"{fmt.eps(budget.zcdp_to_approx_dp_classic(cost.value, delta))} for this release. Pure ε in a ρ "
                "budget is charged ρ = ε²/2 (Bun & Steinke 2016, Prop. 1.4).")
    return delta


def _sci(x: float) -> str:
    """1e-08 → 1e-8."""
    m, e = f"{x:.0e}".split("e")
    return f"{m}e{int(e)}"
